"""bias_difference: two models on the same rows, a paired interval and a verdict."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from vlfair import paired, stats
from vlfair.defaults import BOOTSTRAP, CONFIDENCE, PERMUTATIONS, SEED
from vlfair.measures.checks import (
    MAY_BE_UNDEFINED,
    Labels,
    MeasureResult,
    checked,
    float_column,
    label_array,
    require_present,
    require_sizes,
    same_length,
)
from vlfair.measures.known import BIASES
from vlfair.measures.reporters import p_fields

# ---- bias_difference: two models on the same rows ----------------------------------------
# What a verdict says (``*_verdict``); "less biased" = closer to the measure's neutral value.
A_LESS_BIASED = "A less biased"
B_LESS_BIASED = "B less biased"
NEITHER_CLOSER = "differ; neither closer to no bias"
NO_DIFFERENCE = "no difference detected"


@dataclasses.dataclass(frozen=True, eq=False)
class BiasDifference(MeasureResult):
    """The result of :func:`bias_difference`: model A (``predictions1``) against model B
    (``predictions2``) on the same rows."""

    ratio_a: float
    """A's bias ratio, mean(protected) / mean(reference), as :func:`bias_ratio` computes it."""
    ratio_b: float
    ratio_difference: float
    """A's ratio minus B's."""
    ratio_difference_ci: list[float] | None = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    """Its paired bootstrap interval (both models on the same resampled rows); None without resampling (a
    bound is infinite where resamples of a reference mean reach 0)."""
    ratio_distance_difference: float
    """|A's ratio - 1| - |B's ratio - 1|: negative where A is closer to the neutral 1."""
    ratio_distance_difference_ci: list[float] | None = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    ratio_p_value: float | None
    """Paired permutation (sign-flip) test of "the two models' ratios do not differ"; None without permutations."""
    ratio_log10_p_value: float | None
    ratio_p_value_method: str | None
    """"exact", "monte_carlo" or "sequential_monte_carlo"."""
    ratio_verdict: str | None
    """"A less biased", "B less biased", "differ; neither closer to no bias" or "no difference detected"
    (:func:`bias_difference` gives the rule); None without resampling."""
    max_gap_a: float
    """A's largest minus smallest group mean, as :func:`group_score_gap` computes it (neutral 0)."""
    max_gap_b: float
    max_gap_difference: float
    """A's gap minus B's (also the difference of their distances to the neutral 0)."""
    max_gap_difference_ci: list[float] | None
    max_gap_p_value: float | None
    max_gap_log10_p_value: float | None
    max_gap_p_value_method: str | None
    max_gap_verdict: str | None
    protected_group: str
    reference_group: str
    group_counts: dict[str, int]
    confidence: float
    """The intervals' level; a verdict's p-value must also be below 1 - confidence."""


@checked
def bias_difference(scores_a: npt.ArrayLike, scores_b: npt.ArrayLike, groups: Labels, protected_group: Any,
                    reference_group: Any, bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                    seed: int | None = SEED, n_permutations: int = PERMUTATIONS) -> BiasDifference:
    """Two models scored on the same rows: the difference of their bias ratios and of their largest
    group gaps, each with a paired bootstrap interval and a paired permutation test.

    Both are ``vlfair compare``'s paired statistics (:func:`vlfair.paired.compare`, one engine): the bootstrap
    draws rows within each group (stratified, as the measures' own intervals; the bare seed, as theirs) and
    evaluates both models on the same drawn rows (:func:`vlfair.stats.stratified_resamples`). The test swaps the
    two models' scores in random sets of rows (:func:`vlfair.stats.sign_flip_tests`: exact over all 2^N swaps
    when they number at most ``n_permutations``). Each model's values are bias_ratio's and group_score_gap's own.

    The verdict of each measure: "no difference detected" unless the interval of A - B excludes 0
    and (when computed) the p-value is below 1 - ``confidence``; then "A less biased" where the
    interval of |A - neutral| - |B - neutral| lies below 0, "B less biased" where it lies above 0,
    else "differ; neither closer to no bias" (e.g. ratios 0.9 and 1.08). Neutral: 1 for the ratio,
    0 for the gap. None without an interval (``bootstrap=0``).

    Args:
        scores_a: model A's score >= 0 per row (the module's ``predictions1``).
        scores_b: model B's score >= 0 per row, the same rows in the same order (``predictions2``).
        groups: each row's group label (``references``).
        protected_group: the group whose mean is the ratio's numerator.
        reference_group: the group whose mean is the ratio's denominator.
        bootstrap: paired stratified resamples for the intervals (0: no intervals, no verdicts).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling and the swaps (None: fresh randomness each call).
        n_permutations: swaps for the p-values (0: no test).

    Returns:
        A :class:`BiasDifference`: ``ratio_*`` and ``max_gap_*`` (A, B, difference with its
        interval, p-value, its log10 and method, verdict), the ratio's distance difference,
        ``protected_group``, ``reference_group``, ``group_counts`` and ``confidence``.

    Raises:
        ValueError: bad input, named by its column or option: lengths that differ, a negative or
            non-finite score, a missing label, an absent group or one with fewer than 2 rows, a model
            whose reference group's mean is 0.
    """
    a, b = float_column(scores_a, "predictions1"), float_column(scores_b, "predictions2")
    labels = label_array(groups, "references")
    same_length(predictions1=a, predictions2=b, references=labels)
    for option, value in (("protected_group", protected_group), ("reference_group", reference_group)):
        if value is None:
            raise ValueError(f"{option} is required: name the group to put in the "
                             + ("numerator" if option == "protected_group" else "denominator"))
    protected, reference = stats.label_text(protected_group), stats.label_text(reference_group)
    names, codes = stats.encode_groups(labels)
    require_present(protected, names, "protected_group")
    require_present(reference, names, "reference_group")
    if protected == reference:
        raise ValueError(f"protected_group and reference_group are the same group ({protected!r})")
    counts = np.bincount(codes, minlength=len(names))
    require_sizes(names, counts)
    p_i, r_i, num_groups = names.index(protected), names.index(reference), len(names)
    points = []  # each model's ratio and gap by bias_ratio's and group_score_gap's own arithmetic: their values
    for column, values in (("predictions1", a), ("predictions2", b)):
        negative = np.flatnonzero(values < 0)
        if negative.size:  # as bias_ratio: a ratio of means needs scores that cannot cancel
            raise ValueError(f"{column} must be >= 0 for a ratio of means (e.g. CLIP scores, probabilities); row "
                             f"{int(negative[0])} is {values[negative[0]]:g}")
        means = stats.group_means(values, codes, num_groups)
        if means[r_i] == 0:
            raise ValueError(f"{column}: the mean score of reference_group {reference!r} is 0: the ratio is undefined")
        points.append((float(means[p_i] / means[r_i]), float(means.max() - means.min())))
    # the one paired engine (vlfair.paired, vlfair compare's): the ratio and the largest gap as functions of each
    # group's moments, both models on the same resampled rows (within the groups) and the same swaps, drawn
    # from the bare seed as the measures draw theirs
    # each compared quantity's neutral value is its measure's (bias_ratio's and group_score_gap's)
    neutrals = {key: _neutral(measure) for key, measure in _COMPARED.items()}
    row_set = paired.RowSet(np.arange(a.size), ("score",), codes, (
        paired.Statistic("ratio", {}, paired.mean_ratio(p_i, r_i), neutrals["ratio"]),
        paired.Statistic("max_gap", {}, paired.mean_range(), neutrals["max_gap"])))
    found = paired.compare(row_set, a, b, bootstrap=bootstrap, confidence=confidence, seed=seed,
                           n_permutations=n_permutations, measured=True)
    fields: dict[str, Any] = {}
    for j, (key, difference) in enumerate(zip(_COMPARED, found)):
        neutral = neutrals[key]
        value_a, value_b = points[0][j], points[1][j]
        interval = difference.difference_ci if bootstrap else None
        distance_ci = difference.distance_difference_ci if bootstrap else None
        p_value = difference.p_value if n_permutations else None
        p = {"p_value": p_value, "log10_p_value": difference.log10_p_value,
             "p_value_method": difference.p_method} if n_permutations else p_fields(None)
        fields |= {f"{key}_a": value_a, f"{key}_b": value_b, f"{key}_difference": value_a - value_b,
                   f"{key}_difference_ci": interval}
        if key == "ratio":
            fields |= {"ratio_distance_difference": abs(value_a - neutral) - abs(value_b - neutral),
                       "ratio_distance_difference_ci": distance_ci}
        fields |= {f"{key}_{name}": value for name, value in p.items()}
        fields[f"{key}_verdict"] = _verdict(value_a - value_b, interval, distance_ci, p_value, 1 - confidence,
                                            neutral)
    return BiasDifference(**fields, protected_group=protected, reference_group=reference,
                          group_counts={n: int(c) for n, c in zip(names, counts)}, confidence=confidence)


_COMPARED = {"ratio": "bias_ratio", "max_gap": "group_score_gap"}  # bias_difference's quantities: their measures


def _neutral(measure: str) -> float:
    neutral = BIASES[measure][0].neutral  # the measure's facts (the catalog's objects are made of them)
    assert neutral is not None, "a ratio and a gap are bias measures: each has a neutral value"
    return neutral


def _verdict(difference: float, difference_ci: list[float] | None, distance_ci: list[float] | None,
             p_value: float | None, alpha: float, neutral: float) -> str | None:
    """Which model is less biased, by ``stats.paired_verdict`` (the rule of ``vlfair compare``);
    None without an interval (bootstrap=0)."""
    found = stats.paired_verdict(difference, difference_ci, distance_ci, p_value, alpha, neutral)
    return {"not_assessed": None, "no_difference": NO_DIFFERENCE, "a_less_biased": A_LESS_BIASED,
            "b_less_biased": B_LESS_BIASED, "differ": NEITHER_CLOSER}[found]
