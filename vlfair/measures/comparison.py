"""bias_difference: two models on the same rows, a paired interval and a verdict."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from vlfair import stats
from vlfair.defaults import BOOTSTRAP, CONFIDENCE, PERMUTATIONS, SEED
from vlfair.measures.checks import (
    MAY_BE_UNDEFINED,
    Labels,
    MeasureResult,
    as_interval,
    checked,
    float_column,
    label_array,
    require_present,
    require_sizes,
    same_length,
)
from vlfair.measures.groups import (
    p_fields,
)

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

    The bootstrap draws rows within each group (stratified, as the measures' own intervals) and
    evaluates both models on the same drawn rows (:func:`vlfair.stats.stratified_resamples`, so it
    is :func:`vlfair.stats.paired_bootstrap` vectorised). The test swaps the two models' scores in
    random sets of rows (:func:`vlfair.stats.sign_flip_tests`: exact over all 2^N swaps when they
    number at most ``n_permutations``).

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
    means = []
    for column, values in (("predictions1", a), ("predictions2", b)):
        negative = np.flatnonzero(values < 0)
        if negative.size:  # as bias_ratio: a ratio of means needs scores that cannot cancel
            raise ValueError(f"{column} must be >= 0 for a ratio of means (e.g. CLIP scores, probabilities); row "
                             f"{int(negative[0])} is {values[negative[0]]:g}")
        means.append(stats.group_means(values, codes, num_groups))
        if means[-1][r_i] == 0:
            raise ValueError(f"{column}: the mean score of reference_group {reference!r} is 0: the ratio is undefined")
    neutral = np.array([1.0, 0.0])  # of the ratio and the gap

    def measured(group_means: np.ndarray) -> np.ndarray:
        """(b, G) group means -> (b, 2) the bias ratio and the largest gap (the same arithmetic as
        bias_ratio and group_score_gap, so the point values equal theirs)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.stack([group_means[:, p_i] / group_means[:, r_i],
                             group_means.max(axis=1) - group_means.min(axis=1)], axis=1)

    point_a, point_b = measured(means[0][None])[0], measured(means[1][None])[0]
    difference_ci = distance_ci = None
    if bootstrap:
        # every slot of a stratified resample keeps its group, so the codes hold for the resampled rows
        blocks = [(measured(stats.group_means(a[rows], codes, num_groups)),
                   measured(stats.group_means(b[rows], codes, num_groups)))
                  for rows in stats.stratified_resamples(codes, bootstrap, seed)]
        samples_a = np.concatenate([block[0] for block in blocks])
        samples_b = np.concatenate([block[1] for block in blocks])
        with np.errstate(invalid="ignore"):  # inf - inf where a resample's reference mean is 0
            difference_ci = stats.percentile_interval(samples_a - samples_b, confidence)
            distance_ci = stats.percentile_interval(np.abs(samples_a - neutral) - np.abs(samples_b - neutral),
                                                    confidence)
    tests: list[stats.PermutationResult | None] = [None, None]
    if n_permutations:
        # swapping row i moves A's mean of its group by (b_i - a_i) / n_g and B's by the opposite:
        # a block of swaps is one matrix product, never a pass over the rows per relabelling
        moves = np.eye(num_groups)[codes] * ((b - a) / counts[codes])[:, None]

        def swapped(swaps: np.ndarray) -> np.ndarray:
            shift = swaps.astype(float) @ moves
            return measured(means[0] + shift) - measured(means[1] - shift)

        tests = list(stats.sign_flip_tests(swapped, a.size, 2, n_permutations, seed))
    fields: dict[str, Any] = {}
    for j, key in enumerate(("ratio", "max_gap")):
        interval = as_interval(difference_ci, j)
        p = p_fields(tests[j])
        fields |= {f"{key}_a": float(point_a[j]), f"{key}_b": float(point_b[j]),
                   f"{key}_difference": float(point_a[j] - point_b[j]), f"{key}_difference_ci": interval}
        if key == "ratio":
            fields |= {"ratio_distance_difference": float(abs(point_a[j] - 1.0) - abs(point_b[j] - 1.0)),
                       "ratio_distance_difference_ci": as_interval(distance_ci, j)}
        fields |= {f"{key}_{name}": value for name, value in p.items()}
        fields[f"{key}_verdict"] = _verdict(float(point_a[j] - point_b[j]), interval, as_interval(distance_ci, j),
                                            p["p_value"], 1 - confidence, 1.0 if key == "ratio" else 0.0)
    return BiasDifference(**fields, protected_group=protected, reference_group=reference,
                          group_counts={n: int(c) for n, c in zip(names, counts)}, confidence=confidence)


def _verdict(difference: float, difference_ci: list[float] | None, distance_ci: list[float] | None,
             p_value: float | None, alpha: float, neutral: float) -> str | None:
    """Which model is less biased, by ``stats.paired_verdict`` (the rule of ``vlfair compare``);
    None without an interval (bootstrap=0)."""
    found = stats.paired_verdict(difference, difference_ci, distance_ci, p_value, alpha, neutral)
    return {"not_assessed": None, "no_difference": NO_DIFFERENCE, "a_less_biased": A_LESS_BIASED,
            "b_less_biased": B_LESS_BIASED, "differ": NEITHER_CLOSER}[found]
