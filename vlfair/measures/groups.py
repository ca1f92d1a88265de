"""The group statistics: bias_ratio, group_score_gap, trait_anova, word_influence, cross_lingual_gap,
group_rate_gap, individual_fairness and retention. Those of group means check their arrays, then evaluate their
measure's statistic and reporter as a probe's declared metric is evaluated (:mod:`vlfair.measures.arrays`):
their arithmetic is the measure's, once."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from vlfair import stats
from vlfair.defaults import BOOTSTRAP, CONFIDENCE, PERMUTATIONS, SEED
from vlfair.measures import arrays, reporters
from vlfair.measures.checks import (
    ABSENT_WHEN_NONE,
    MAY_BE_UNDEFINED,
    Labels,
    MeasureResult,
    as_interval,
    by_stratum,
    checked,
    float_column,
    label_array,
    require_present,
    same_length,
    whole_column,
)
from vlfair.measures.known import BIASES, DECLARED
from vlfair.measures.reporters import Report
from vlfair.measures.statistics import FStatistic, Range, Ratio, Statistic
from vlfair.measures.ties import best_credit


# ---- bias_ratio, group_score_gap, trait_anova -------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class BiasRatio(MeasureResult):
    """The result of :func:`bias_ratio`."""

    bias_ratio: float
    """mean(score | protected) / mean(score | reference); 1.0 is neutral."""
    bias_ratio_ci: list[float] | None = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    """Its bootstrap interval [low, high]; None without resampling or where no resample has a ratio (a bound is
    inf where resamples of the reference group's mean reach 0)."""
    p_value: float | None
    """Two-sided permutation test of the two groups' mean difference; None without permutations."""
    log10_p_value: float | None
    """log10 of ``p_value``, finite where the p-value underflows float64."""
    p_value_method: str | None
    """How ``p_value`` was obtained: "exact", "monte_carlo", "sequential_monte_carlo" or "normal_limit"."""
    protected_group: str
    reference_group: str
    group_means: dict[str, float]
    group_means_ci: dict[str, list[float] | None] | None
    group_counts: dict[str, int]
    confidence: float
    """The intervals' level."""


@checked
def bias_ratio(scores: npt.ArrayLike, groups: Labels, protected_group: Any, reference_group: Any,
               bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE, seed: int | None = SEED,
               n_permutations: int = PERMUTATIONS) -> BiasRatio:
    """The bias ratio b = mean(score | protected) / mean(score | reference); 1.0 is neutral.

    ``p_value``: permutation test of the two groups' mean difference (two-sided).

    Args:
        scores: one score >= 0 per sample (e.g. CLIP scores or probabilities).
        groups: each sample's group label.
        protected_group: the group whose mean is the numerator.
        reference_group: the group whose mean is the denominator.
        bootstrap: stratified-bootstrap resamples for the intervals (0: no intervals).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling and the permutations (None: fresh randomness each call).
        n_permutations: label permutations for ``p_value`` (0: no test).

    Returns:
        A :class:`BiasRatio`: ``bias_ratio`` and ``bias_ratio_ci``; ``p_value``, ``log10_p_value``
        and ``p_value_method``; ``protected_group`` and ``reference_group``; ``group_means``,
        ``group_means_ci`` and ``group_counts`` by group; ``confidence``.

    Raises:
        ValueError: bad input, named: a negative or non-finite score, a missing label, lengths that
            differ, a group that is absent or has fewer than 2 samples, a reference mean of 0.
    """
    values, labels = float_column(scores, "predictions"), label_array(groups, "references")
    same_length(predictions=values, references=labels)
    negative = np.flatnonzero(values < 0)
    if negative.size:  # a ratio of means says nothing when scores can cancel or flip its sign
        raise ValueError(f"predictions must be >= 0 for a ratio of means (e.g. CLIP scores, probabilities); row "
                         f"{int(negative[0])} is {values[negative[0]]:g}"
                         + (f" and {negative.size - 1} more rows are negative" if negative.size > 1 else "")
                         + "; for signed scores use group_score_gap")
    for option, value in (("protected_group", protected_group), ("reference_group", reference_group)):
        if value is None:
            raise ValueError(f"{option} is required: name the group to put in the "
                             + ("numerator" if option == "protected_group" else "denominator"))
    protected, reference = stats.label_text(protected_group), stats.label_text(reference_group)
    names = sorted(set(labels.tolist()))
    require_present(protected, names, "protected_group")
    require_present(reference, names, "reference_group")
    if protected == reference:
        raise ValueError(f"protected_group and reference_group are the same group ({protected!r})")
    coded = arrays.groups_of(labels)
    if stats.group_means(values, coded.codes, len(coded.names))[coded.names.index(reference)] == 0:
        raise ValueError(f"the mean score of reference_group {reference!r} is 0: the ratio is undefined")
    found = _measured("bias_ratio", Ratio("score", protected, reference), values, coded, bootstrap, confidence, seed,
                      n_permutations)
    return BiasRatio(bias_ratio=found.number, bias_ratio_ci=found.ci, p_value=found.p_value, **found.details,
                     protected_group=protected, reference_group=reference, confidence=confidence)


def _measured(measure: str, statistic: Statistic, values: np.ndarray, groups: arrays.Groups, bootstrap: int,
              confidence: float, seed: int | None, n_permutations: int = 0, report: Report | None = None
              ) -> arrays.Reported:
    """``measure``'s ``statistic`` of the scores ``values`` across ``groups``, reported by the measure's reporter
    (or ``report``), as a probe's declared metric of one run is."""
    report = report or DECLARED[measure][1]
    assert report is not None, f"{measure} names its reporter (vlfair.measures.known)"
    return arrays.evaluate(statistic, report, {"score": values}, groups, bootstrap=bootstrap, confidence=confidence,
                           seed=seed, n_permutations=n_permutations, facts=BIASES[measure][0])


@dataclasses.dataclass(frozen=True, eq=False)
class GroupScoreGap(MeasureResult):
    """The result of :func:`group_score_gap`."""

    group_means: dict[str, float]
    group_means_ci: dict[str, list[float] | None] | None
    group_counts: dict[str, int]
    top_group: str
    """The group with the highest mean (the most associated)."""
    bottom_group: str
    """The group with the lowest mean."""
    max_gap: float
    """The top group's mean minus the bottom group's."""
    max_gap_ci: list[float] | None
    min_max_ratio: float = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    """The bottom group's mean over the top group's (NaN where the top mean is 0)."""
    min_max_ratio_ci: list[float] | None = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    p_value: float | None
    """Permutation test of the range of group means; None without permutations."""
    log10_p_value: float | None
    """log10 of ``p_value``, finite where the p-value underflows float64."""
    p_value_method: str | None
    """How ``p_value`` was obtained: "exact", "monte_carlo", "sequential_monte_carlo" or "normal_limit"."""
    confidence: float
    """The intervals' level."""


@checked
def group_score_gap(scores: npt.ArrayLike, groups: Labels, bootstrap: int = BOOTSTRAP,
                    confidence: float = CONFIDENCE, seed: int | None = SEED,
                    n_permutations: int = PERMUTATIONS) -> GroupScoreGap:
    """Group means, the most associated group, and the gap between the highest and lowest mean.

    ``p_value`` tests the range of group means against label permutations, so it accounts for
    the top and bottom groups being picked after looking at the data.

    Args:
        scores: one score per sample (any sign).
        groups: each sample's group label; at least 2 groups.
        bootstrap: stratified-bootstrap resamples for the intervals (0: no intervals).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling and the permutations (None: fresh randomness each call).
        n_permutations: label permutations for ``p_value`` (0: no test).

    Returns:
        A :class:`GroupScoreGap`: ``group_means``, ``group_means_ci`` and ``group_counts`` by group;
        ``top_group`` and ``bottom_group``; ``max_gap`` and ``min_max_ratio`` (bottom / top mean) with
        their ``_ci``; ``p_value``, ``log10_p_value`` and ``p_value_method``; ``confidence``.

    Raises:
        ValueError: bad input, named (as for :func:`bias_ratio`), or fewer than 2 groups.
    """
    values, labels = float_column(scores, "predictions"), label_array(groups, "references")
    same_length(predictions=values, references=labels)
    coded = arrays.groups_of(labels)
    if len(coded.names) < 2:
        raise ValueError(f"a gap needs at least 2 groups; references hold only {coded.names}")
    found = _measured("group_score_gap", Range("score"), values, coded, bootstrap, confidence, seed, n_permutations)
    return GroupScoreGap(max_gap=found.number, max_gap_ci=found.ci, p_value=found.p_value, **found.details,
                         confidence=confidence)


@dataclasses.dataclass(frozen=True, eq=False)
class TraitAnova(MeasureResult):
    """The result of :func:`trait_anova`. With strata every field but ``strata`` holds a dict by stratum."""

    f_statistic: float | dict[str, float] = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    """F = mean square between groups / mean square within (inf without variance within groups, NaN
    without any variance)."""
    p_value: float | dict[str, float] = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    """From the F distribution's survival function (NaN where F is)."""
    log10_p_value: float | dict[str, float] = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    """log10 of ``p_value``, finite where the p-value underflows float64 (-inf where F is inf)."""
    df_between: float | dict[str, float]
    df_within: float | dict[str, float]
    eta_squared: float | dict[str, float] = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    """The share of the scores' variance between groups in these data (NaN where every score is equal)."""
    omega_squared: float | None | dict[str, float | None] = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    """The effect size: the population's share of the variance between groups estimated from F (0 at F <= 1),
    which runs of different sizes compare by (``stats.f_effect``; None where F is not finite)."""
    omega_squared_ci: list[float] | None | dict[str, list[float] | None] = dataclasses.field(
        metadata=MAY_BE_UNDEFINED)
    """Its interval at ``confidence``, by inverting the noncentral F (None where F is not finite)."""
    welch: bool | dict[str, bool]
    """Whether Welch's ANOVA (unequal variances) was run."""
    group_means: dict[str, float] | dict[str, dict[str, float]]
    group_means_ci: dict[str, list[float] | None] | None | dict[str, dict[str, list[float] | None] | None]
    group_counts: dict[str, int] | dict[str, dict[str, int]]
    strata: list[str] | None = dataclasses.field(default=None, metadata=ABSENT_WHEN_NONE)
    """The strata, sorted; None (and no key) without strata."""


@checked
def trait_anova(scores: npt.ArrayLike, groups: Labels, strata: Labels | None = None,
                welch: bool = False, bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                seed: int | None = SEED) -> TraitAnova:
    """One-way ANOVA of scores across groups (e.g. races), optionally within each stratum (e.g.
    gender): F, p, degrees of freedom, eta squared and group means with CIs.

    Without strata every key holds one value; with strata every key holds a dict by stratum.
    ``welch=True`` runs Welch's ANOVA (unequal variances).

    Args:
        scores: one score per sample.
        groups: each sample's group label; at least 2 groups of at least 2 samples.
        strata: each sample's stratum, or None for one ANOVA over all samples.
        welch: Welch's ANOVA instead of the classic (equal-variance) one.
        bootstrap: stratified-bootstrap resamples for the intervals (0: no intervals).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling (None: fresh randomness each call).

    Returns:
        A :class:`TraitAnova`: ``f_statistic``, ``p_value``, ``log10_p_value``, ``df_between``, ``df_within``,
        ``eta_squared``, ``welch``, and ``group_means``, ``group_means_ci`` and ``group_counts`` by
        group; with ``strata`` each of them by stratum, plus ``strata`` (the strata, sorted).

    Raises:
        ValueError: bad input, named; the stratum is named where a stratum's groups are too small.
    """
    values, labels = float_column(scores, "predictions"), label_array(groups, "references")
    same_length(predictions=values, references=labels)
    if strata is None:
        return _anova_one(values, labels, welch, bootstrap, confidence, seed)
    strata_labels = label_array(strata, "strata")
    same_length(predictions=values, strata=strata_labels)
    per = {s: _anova_one(values[strata_labels == s], labels[strata_labels == s], welch, bootstrap, confidence, seed,
                         where=f" in stratum {s!r}")
           for s in sorted(set(strata_labels.tolist()))}
    return by_stratum(per, strata=list(per))


def _anova_one(values, labels, welch, bootstrap, confidence, seed, where: str = "") -> TraitAnova:
    try:
        found = _measured("trait_anova", FStatistic("score", welch), values, arrays.groups_of(labels), bootstrap,
                          confidence, seed)
    except ValueError as exc:
        raise ValueError(f"{exc}{where}") from None
    return TraitAnova(f_statistic=found.number, p_value=cast(float, found.p_value), **found.details, welch=welch)


# ---- word_influence ---------------------------------------------------------------------
def parse_variant(variant: Any, num_words: int, row: int) -> tuple[int, ...]:
    """``"0,2"`` / ``(0, 2)`` / ``""`` -> sorted word positions; positions must be < num_words. A
    single whole number is one position; a missing variant (None, NaN) is an error naming its row."""
    if stats.is_missing(variant):
        raise ValueError(f"variants row {row} is missing (None or NaN): give the replaced word positions, "
                         '"" (or ()) for the original prompt')
    if isinstance(variant, (int, float, np.integer, np.floating)):
        variant = (variant,)  # one position, checked as every position is
    elif not isinstance(variant, (str, Iterable)):
        raise ValueError(f"variants row {row}: {stats.shown(variant)} is not a list of word positions "
                         '(e.g. "0,2" or (0, 2))')
    if isinstance(variant, str):
        parts = [p.strip() for p in variant.split(",") if p.strip()]
        try:
            positions = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"variants row {row}: {variant!r} is not a comma-separated list of word positions") \
                from None
    else:
        positions = []
        for p in variant:  # 0.7 is not a position (int() would quietly make it 0)
            if isinstance(p, bool) or not isinstance(p, (int, np.integer, float)) or float(p) != int(p):
                raise ValueError(f"variants row {row}: {p!r} is not a word position (a whole number)")
            positions.append(int(p))
    for p in positions:
        if not 0 <= p < num_words:
            raise ValueError(f"variants row {row}: word position {p} is outside 0..{num_words - 1} "
                             f"(num_words={num_words})")
    if len(set(positions)) != len(positions):
        raise ValueError(f"variants row {row}: {variant!r} repeats a word position")
    return tuple(sorted(positions))


@dataclasses.dataclass(frozen=True, eq=False)
class WordInfluence(MeasureResult):
    """The result of :func:`word_influence`."""

    influence: list[float]
    """Level-``k`` influence of each word, in word order."""
    k: int
    ci_half_width: float
    """Hoeffding half-width of ``influence`` (the least-sampled variant level ``k`` uses)."""
    levels: dict[str, list[float]]
    """Influence of each word by level ("1", "2", ...), for every level whose variants are all present."""
    levels_ci_half_width: dict[str, float]
    shapley: list[float] | None
    """Mean of the n levels (the Shapley value of v(S) = -P(S)); None unless every level is complete."""
    shares: dict[str, float]
    """Share of images classified as the target group, by variant ("0,2": words 0 and 2 replaced)."""
    images_per_variant: dict[str, int]
    min_images_per_variant: int
    """Images of the least-sampled variant level ``k`` uses."""
    num_words: int
    confidence: float
    """The Hoeffding bound's level."""


@checked
def word_influence(predictions: npt.ArrayLike, variants: Sequence[Any] | npt.NDArray[Any], num_words: int,
                   k: int = 1, confidence: float = CONFIDENCE) -> WordInfluence:
    """k-level word influence on the share of images classified as the target group.

    P(R) = share of images with prediction 1 when the words in R are replaced. Influence of
    word i at level k = mean over R within the other words, |R| = k - 1, of P(R) - P(R + {i}).
    Level 1 is P(original) - P(i replaced). ``levels`` holds every level whose variants are
    all present; ``shapley`` is the mean of the n levels when all are present (it equals the
    Shapley value of the game v(S) = -P(S)). ``ci_half_width``: Hoeffding half-width at
    ``confidence`` for the least-sampled variant that level k uses.

    Args:
        predictions: one 0/1 per generated image (1 = classified as the target group).
        variants: each image's prompt variant: the replaced word positions, as ``"0,2"``,
            ``(0, 2)`` or ``""`` / ``()`` for the original prompt.
        num_words: the number of words in the prompt that may be replaced.
        k: the level reported as ``influence``, in 1..num_words.
        confidence: the Hoeffding bound's level, in (0, 1).

    Returns:
        A :class:`WordInfluence`: ``influence`` (one value per word) and ``k``; ``ci_half_width``; ``levels`` and
        ``levels_ci_half_width`` by level (as text); ``shapley`` (None unless every level is
        complete); ``shares`` and ``images_per_variant`` by variant; ``min_images_per_variant``;
        ``num_words``; ``confidence``.

    Raises:
        ValueError: bad input, named: a prediction other than 0/1, a malformed variant, or a
            variant level k needs that has no images.
    """
    if k > num_words:
        raise ValueError(f"k must be in 1..num_words={num_words}, got {k}")
    if isinstance(variants, (str, bytes, Mapping)) or not isinstance(variants, Iterable):
        raise ValueError(f"variants must be a sequence with one variant per row, got {type(variants).__name__}")
    values = float_column(predictions, "predictions")
    if not np.isin(values, (0.0, 1.0)).all():
        row = int(np.flatnonzero(~np.isin(values, (0.0, 1.0)))[0])
        raise ValueError(f"predictions must be 0 or 1 (1 = classified as the target group); row {row} is {values[row]}")
    same_length(predictions=values, variants=list(variants))
    keys = [parse_variant(v, num_words, row) for row, v in enumerate(variants)]
    sums: dict[tuple[int, ...], float] = {}
    counts: dict[tuple[int, ...], int] = {}
    for key, value in zip(keys, values):
        sums[key] = sums.get(key, 0.0) + value
        counts[key] = counts.get(key, 0) + 1
    shares = {key: sums[key] / counts[key] for key in sums}

    def level(level_k: int) -> tuple[list[float], int] | None:
        result, least = [], math.inf
        for word in range(num_words):
            others = [w for w in range(num_words) if w != word]
            terms = []
            for subset in itertools.combinations(others, level_k - 1):
                with_word = tuple(sorted(subset + (word,)))
                if subset not in shares or with_word not in shares:
                    return None
                terms.append(shares[subset] - shares[with_word])
                least = min(least, counts[subset], counts[with_word])
            result.append(float(np.mean(terms)))
        return result, int(least)

    levels = {j: level(j) for j in range(1, num_words + 1)}
    if levels[k] is None:
        missing = _missing_variant(shares, num_words, k)
        raise ValueError(f"level {k} needs variant {_describe(missing)}, which has no images")
    complete = {j: v for j, v in levels.items() if v is not None}
    shapley = ([float(np.mean([complete[j][0][w] for j in complete])) for w in range(num_words)]
               if len(complete) == num_words else None)
    influence, least = complete[k]
    return WordInfluence(
        influence=influence, k=k, ci_half_width=stats.hoeffding_half_width(least, 1 - confidence),
        levels={str(j): v[0] for j, v in complete.items()},
        levels_ci_half_width={str(j): stats.hoeffding_half_width(v[1], 1 - confidence) for j, v in complete.items()},
        shapley=shapley, shares={",".join(map(str, key)): float(s) for key, s in sorted(shares.items())},
        images_per_variant={",".join(map(str, key)): int(c) for key, c in sorted(counts.items())},
        min_images_per_variant=least, num_words=num_words, confidence=confidence,
    )


def _missing_variant(shares: Mapping, num_words: int, k: int) -> tuple[int, ...]:
    for word in range(num_words):
        others = [w for w in range(num_words) if w != word]
        for subset in itertools.combinations(others, k - 1):
            for key in (subset, tuple(sorted(subset + (word,)))):
                if key not in shares:
                    return key
    raise AssertionError("unreachable: level was incomplete")


def _describe(variant: tuple[int, ...]) -> str:
    if not variant:
        return '"" (the original prompt)'
    return f'"{",".join(map(str, variant))}" (words {list(variant)} replaced)'


# ---- cross_lingual_gap, group_rate_gap ---------------------------------------------------
def _correct(predictions: Labels, references: Labels) -> npt.NDArray[np.float64]:
    # answers, not groups: a blank or odd answer is a wrong one, scored as such (the label rule's blank and
    # read-alike checks are for the texts that name groups)
    preds = stats.label_column(predictions, "predictions", groups=False)
    refs = stats.label_column(references, "references", groups=False)
    same_length(predictions=preds, references=refs)
    return (preds == refs).astype(float)


@dataclasses.dataclass(frozen=True, eq=False)
class CrossLingualGap(MeasureResult):
    """The result of :func:`cross_lingual_gap`."""

    accuracy: dict[str, float]
    """Share of correct samples, by language."""
    accuracy_ci: dict[str, list[float] | None] | None
    counts: dict[str, int]
    """Samples by language."""
    gap: float
    """The best language's accuracy minus the worst's."""
    gap_ci: list[float] | None
    best_language: str
    worst_language: str
    pivot: str | None
    gap_to_pivot: dict[str, float] | None
    """acc(pivot) - acc(language), by language; None without a pivot."""
    gap_to_pivot_ci: dict[str, list[float] | None] | None
    confidence: float
    """The intervals' level."""


@checked
def cross_lingual_gap(predictions: Labels, references: Labels, languages: Labels,
                      pivot: Any = None, bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                      seed: int | None = SEED) -> CrossLingualGap:
    """Accuracy per language; gap = max - min accuracy; ``gap_to_pivot`` = acc(pivot) - acc(l).

    Args:
        predictions: each sample's predicted label (a sample is correct where it equals the reference).
        references: each sample's true label.
        languages: each sample's language; at least 2 languages.
        pivot: a language to compare every language with, or None.
        bootstrap: stratified-bootstrap resamples for the intervals (0: no intervals).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling (None: fresh randomness each call).

    Returns:
        A :class:`CrossLingualGap`: ``accuracy``, ``accuracy_ci`` and ``counts`` by language; ``gap`` and ``gap_ci``;
        ``best_language`` and ``worst_language``; ``pivot``, ``gap_to_pivot`` and
        ``gap_to_pivot_ci`` (by language; None without a pivot); ``confidence``.

    Raises:
        ValueError: bad input, named, fewer than 2 languages, or a pivot that does not occur.
    """
    correct = _correct(predictions, references)
    langs = label_array(languages, "languages")
    same_length(predictions=correct, languages=langs)
    groups = arrays.groups_of(langs, what="language")
    if len(groups.names) < 2:  # as group_score_gap refuses one group: one language has no gap
        raise ValueError(f"a cross-lingual gap needs at least 2 languages; languages hold only {groups.names}")
    if pivot is not None:
        pivot = stats.label_text(pivot)
        require_present(pivot, groups.names, "pivot language", "languages")
    found = _measured("cross_lingual_gap", Range("score"), correct, groups, bootstrap, confidence, seed,
                      report=reporters.languages(pivot))
    return CrossLingualGap(gap=found.number, gap_ci=found.ci, **found.details, confidence=confidence)


@dataclasses.dataclass(frozen=True, eq=False)
class GroupRateGap(MeasureResult):
    """The result of :func:`group_rate_gap`. With languages every field but ``languages`` holds a dict by language."""

    accuracy: dict[str, float] | dict[str, dict[str, float]]
    """Share of correct samples, by group."""
    accuracy_ci: dict[str, list[float] | None] | None | dict[str, dict[str, list[float] | None] | None]
    counts: dict[str, int] | dict[str, dict[str, int]]
    """Samples by group."""
    gap: float | dict[str, float]
    """The largest pairwise gap: the highest group's accuracy minus the lowest's."""
    gap_pair: list[str] | dict[str, list[str]]
    """The highest and the lowest group."""
    gap_ci: list[float] | None | dict[str, list[float] | None]
    confidence: float | dict[str, float]
    """The intervals' level."""
    languages: list[str] | None = dataclasses.field(default=None, metadata=ABSENT_WHEN_NONE)
    """The languages, sorted; None (and no key) without languages."""


@checked
def group_rate_gap(predictions: Labels, references: Labels, groups: Labels, languages: Labels | None = None,
                   bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                   seed: int | None = SEED) -> GroupRateGap:
    """Accuracy per group and the largest pairwise gap |acc(g1) - acc(g2)|, per language if given.

    Without languages every key holds one value; with languages every key holds a dict by language.

    Args:
        predictions: each sample's predicted label (a sample is correct where it equals the reference).
        references: each sample's true label.
        groups: each sample's group; at least 2 groups (in each language).
        languages: each sample's language, or None for one result over all samples.
        bootstrap: stratified-bootstrap resamples for the intervals (0: no intervals).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling (None: fresh randomness each call).

    Returns:
        A :class:`GroupRateGap`: ``accuracy``, ``accuracy_ci`` and ``counts`` by group; ``gap``,
        ``gap_pair`` (the highest and lowest group) and ``gap_ci``; ``confidence``; with
        ``languages`` each of them by language, plus ``languages`` (sorted).

    Raises:
        ValueError: bad input, named (the language too, where one language's groups are too small).
    """
    correct = _correct(predictions, references)
    group_labels = label_array(groups, "groups")
    same_length(predictions=correct, groups=group_labels)
    if languages is None:
        return _rate_gap_one(correct, group_labels, bootstrap, confidence, seed)
    langs = label_array(languages, "languages")
    same_length(predictions=correct, languages=langs)
    per = {lang: _rate_gap_one(correct[langs == lang], group_labels[langs == lang], bootstrap, confidence, seed,
                               where=f" in language {lang!r}")
           for lang in sorted(set(langs.tolist()))}
    return by_stratum(per, languages=list(per))


def _rate_gap_one(correct, labels, bootstrap, confidence, seed, where: str = "") -> GroupRateGap:
    try:
        groups = arrays.groups_of(labels)
    except ValueError as exc:
        raise ValueError(f"{exc}{where}") from None
    if len(groups.names) < 2:
        raise ValueError(f"a gap needs at least 2 groups; groups{where} hold only {groups.names}")
    found = _measured("group_rate_gap", Range("score"), correct, groups, bootstrap, confidence, seed)
    return GroupRateGap(gap=found.number, gap_ci=found.ci, **found.details, confidence=confidence)


# ---- individual_fairness ----------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class IndividualFairness(MeasureResult):
    """The result of :func:`individual_fairness`."""

    epsilon: float
    """The largest ratio |cos(v, t_a) - cos(v, t_b)| / ||t_a - t_b||."""
    epsilon_row: int
    """The row (image) of ``epsilon``."""
    mean_ratio: float
    median_ratio: float
    bound_holds: bool
    """Whether every ratio is within its Dunkl-Williams bound 2 / (||t_a|| + ||t_b||), up to the tolerance."""
    num_bound_violations: int
    max_bound: float
    """The largest bound over the pairs."""
    num_pairs: int
    """Pairs with a ratio (identical text features left out)."""
    num_identical_pairs: int
    """Pairs left out: their two captions have identical text features."""
    ratios: list[float]
    similarity_gaps: list[float]
    """|cos(v, t_a) - cos(v, t_b)| per pair."""
    text_distances: list[float]
    """||t_a - t_b|| per pair."""


@checked
def individual_fairness(image_embeddings: npt.ArrayLike, text_embeddings_a: npt.ArrayLike,
                        text_embeddings_b: npt.ArrayLike, tolerance: float = 1e-6) -> IndividualFairness:
    """Individual fairness across two languages' captions of the same images.

    ratio = |cos(v, t_a) - cos(v, t_b)| / ||t_a - t_b|| on unnormalised text features;
    epsilon = max ratio. Every sample must satisfy ratio <= 2 / (||t_a|| + ||t_b||) (the
    Dunkl-Williams inequality); ``bound_holds`` checks it up to ``tolerance``. Pairs with
    identical text features (distance 0) have no ratio: they are left out and counted.

    Args:
        image_embeddings: (N, D) image features v, one row per image.
        text_embeddings_a: (N, D) unnormalised text features of each image's caption in language a.
        text_embeddings_b: (N, D) the same captions' features in language b.
        tolerance: relative and absolute slack of the bound check (float rounding).

    Returns:
        An :class:`IndividualFairness`: ``epsilon`` and ``epsilon_row``; ``mean_ratio`` and
        ``median_ratio``; ``bound_holds``, ``num_bound_violations`` and ``max_bound``; ``num_pairs``
        and ``num_identical_pairs``; per pair (identical ones left out) ``ratios``,
        ``similarity_gaps`` and ``text_distances``.

    Raises:
        ValueError: bad input, named: shapes, non-finite values, a zero vector, or every pair identical.
    """
    terms = individual_fairness_terms(image_embeddings, text_embeddings_a, text_embeddings_b)
    return individual_fairness_of_terms(*terms, tolerance=tolerance)


def individual_fairness_terms(image_embeddings: npt.ArrayLike, text_embeddings_a: npt.ArrayLike,
                              text_embeddings_b: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per caption pair, the terms :func:`individual_fairness` is made of: the similarity gap
    |cos(v, t_a) - cos(v, t_b)|, the text distance ||t_a - t_b|| and the bound 2 / (||t_a|| + ||t_b||) (a probe
    keeps them per row, and resamples epsilon from them). Bad input is a ValueError naming it, as there."""
    images = float_column(image_embeddings, "image_embeddings", ndim=2)
    a = float_column(text_embeddings_a, "text_embeddings_a", ndim=2)
    b = float_column(text_embeddings_b, "text_embeddings_b", ndim=2)
    same_length(image_embeddings=images, text_embeddings_a=a, text_embeddings_b=b)
    if not images.shape[1] == a.shape[1] == b.shape[1]:
        raise ValueError(f"embedding sizes differ: images {images.shape[1]}, a {a.shape[1]}, b {b.shape[1]}")
    norm_v, norm_a, norm_b = (np.linalg.norm(x, axis=1) for x in (images, a, b))
    distance = np.linalg.norm(a - b, axis=1)
    norms = {"image_embeddings": norm_v, "text_embeddings_a": norm_a, "text_embeddings_b": norm_b}
    for name, values in {**norms, "text_embeddings_a - text_embeddings_b": distance}.items():
        if not np.isfinite(values).all():  # an overflowed norm would make every cosine 0, and epsilon 0
            row = int(np.flatnonzero(~np.isfinite(values))[0])
            raise stats.not_finite(f"the norm of {name} at row {row}", values[row])
    for name, values in norms.items():
        if (values == 0).any():
            raise ValueError(f"{name} has a zero vector at row {int(np.flatnonzero(values == 0)[0])}: "
                             "its cosine is undefined")
    v = images / norm_v[:, None]
    gap = np.abs((v * a).sum(axis=1) / norm_a - (v * b).sum(axis=1) / norm_b)
    return gap, distance, 2.0 / (norm_a + norm_b)


@checked
def individual_fairness_of_terms(gap: np.ndarray, distance: np.ndarray, bound: np.ndarray,
                                 tolerance: float = 1e-6) -> IndividualFairness:
    """:func:`individual_fairness` of the caption pairs' terms (:func:`individual_fairness_terms`)."""
    usable = distance > 0
    if not usable.any():
        raise ValueError("every caption pair has identical text features: no ratio is defined")
    ratio = gap[usable] / distance[usable]
    violations = ratio > bound[usable] * (1 + tolerance) + tolerance
    rows = np.flatnonzero(usable)
    return IndividualFairness(
        epsilon=float(ratio.max()), epsilon_row=int(rows[int(np.argmax(ratio))]),
        mean_ratio=float(ratio.mean()), median_ratio=float(np.median(ratio)),
        bound_holds=bool(not violations.any()), num_bound_violations=int(violations.sum()),
        max_bound=float(bound.max()), num_pairs=int(usable.sum()), num_identical_pairs=int((~usable).sum()),
        ratios=ratio.tolist(), similarity_gaps=gap[usable].tolist(), text_distances=distance[usable].tolist(),
    )


# ---- retention --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class Retention(MeasureResult):
    """The result of :func:`retention`."""

    text_score: float
    """Share of images whose best-scoring name is their own (an own name tied with t - 1 others counts 1/t)."""
    image_score: float
    """Share of names (with at least one image) whose best-scoring image is one of theirs (ties as above)."""
    text_score_ci: list[float] | None
    image_score_ci: list[float] | None
    num_images: int
    num_names: int
    """Names with at least one image."""
    num_candidates: int
    """Candidate names each image was scored against."""
    confidence: float
    """The intervals' level."""
    ci_note: str | None = dataclasses.field(default=None, metadata=ABSENT_WHEN_NONE)
    """Why the intervals are None though resampling was asked for; None (and no key) otherwise."""


@checked
def retention(scores: npt.ArrayLike, references: npt.ArrayLike, bootstrap: int = BOOTSTRAP,
              confidence: float = CONFIDENCE, seed: int | None = SEED) -> Retention:
    """Name retention of public figures.

    ``scores[i, j]``: similarity of image i to candidate name j; ``references[i]``: the index
    of image i's own name. Text score = share of images whose best-scoring name is theirs;
    image score = share of names (those with at least one image) whose best-scoring image is
    one of theirs. Scores within the tie tolerance of the best (:mod:`vlfair.measures.ties`) are
    ties, a tied own name (image) counting 1/ties: the expected value under random tie-breaking. CIs
    resample images within each name; where every
    name has a single image there is nothing to resample, so the CIs are None and ``ci_note`` says why.

    Args:
        scores: (images, candidate names) similarities.
        references: each image's own name, as an integer column index of ``scores``.
        bootstrap: stratified-bootstrap resamples for the intervals (0: no intervals).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling (None: fresh randomness each call).

    Returns:
        A :class:`Retention`: ``text_score`` and ``image_score`` with their ``_ci``; ``num_images``, ``num_names`` and
        ``num_candidates``; ``confidence``; ``ci_note`` where the intervals are None for want of
        variation.

    Raises:
        ValueError: bad input, named: shapes, non-finite scores, a reference that is not an index.
    """
    matrix = float_column(scores, "predictions", ndim=2)
    refs = whole_column(references, "references")  # name indices: 1.0 is 1, 0.7 an error (never name 0)
    same_length(predictions=matrix, references=refs)
    outside = np.flatnonzero((refs < 0) | (refs >= matrix.shape[1]))
    if outside.size:
        raise ValueError(f"references row {int(outside[0])} is {int(refs[outside[0]])}, outside the "
                         f"{matrix.shape[1]} candidate names")
    names = np.unique(refs)

    def scores_of(rows: np.ndarray) -> tuple[float, float]:
        # top-1 as the expected value under random tie-breaking (vlfair.measures.ties): no rounding flips it
        scored = matrix[rows]
        text = float(best_credit(scored, np.arange(matrix.shape[1])[None, :] == refs[rows][:, None]).mean())
        image = float(best_credit(scored[:, names].T, refs[rows][None, :] == names[:, None]).mean())
        return text, image

    text_score, image_score = scores_of(np.arange(refs.size))
    text_ci = image_ci = note = None
    if bootstrap and np.bincount(refs).max() < 2:  # one image per name: every resample is the data itself
        note = ("no interval: every name has one image, so resampling images within names cannot vary "
                "(a zero-width interval would claim a certainty the data does not have)")
    elif bootstrap:
        samples = stats.bootstrap_samples(lambda idx: np.array([scores_of(rows) for rows in idx]), refs, bootstrap,
                                          seed)
        ci = stats.percentile_interval(samples, confidence)
        text_ci, image_ci = as_interval(ci, 0), as_interval(ci, 1)
    return Retention(
        text_score=text_score, image_score=image_score, text_score_ci=text_ci, image_score_ci=image_ci,
        num_images=int(refs.size), num_names=int(names.size), num_candidates=int(matrix.shape[1]),
        confidence=confidence, ci_note=note,
    )
