"""One verdict per metric of a run, decided once, when the run is measured, and read by every reader.

Each bias metric is judged by its measure's rule (:attr:`vlfair.facts.Facts.judged`; DESIGN "Verdicts"):

- ``interval``: a signed statistic whose neutral value lies inside its range (a ratio, a signed difference, a
  skew). Its p-value is its interval's (:func:`interval_p`): the two-sided normal p at which the interval's side
  towards the neutral value would reach it, so that at the run's confidence level it is below 1 - confidence
  exactly where the interval excludes the neutral value;
- ``test``: a statistic bounded at its neutral value (a largest gap, MaxSkew, NDKL, an F), whose estimate is
  biased away from it under no difference: its test against no difference (a permutation of the group labels,
  :mod:`vlfair.measures.null`; an F's F-test);
- ``level`` (a mean score, an accuracy): no verdict.

The tests of a run are one family: each metric carries its raw p, Holm's adjusted p (the family-wise error rate)
and Benjamini-Hochberg's q (the false discovery rate), and the run's ``correction`` (a setting: holm, bh or none)
picks the one that decides "detected" at alpha = 1 - confidence. A metric measured with several phrasings and
pooled counts once: its pooled metric is the family's, its phrasings carry their raw p beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vlfair import stats
from vlfair.defaults import CONFIDENCE, CORRECTION, CORRECTIONS
from vlfair.facts import Facts
from vlfair.outputs import Metric

# each correction: a family's raw p-values -> the adjusted ones that decide (none: the raw ones)
ADJUSTED: dict[str, Callable[[Sequence[float]], list[float]]] = {
    "holm": stats.holm, "bh": stats.benjamini_hochberg, "none": lambda p_values: [float(p) for p in p_values]}
assert tuple(ADJUSTED) == CORRECTIONS
CORRECTION_NAMES = {"holm": "Holm (family-wise error rate)", "bh": "Benjamini-Hochberg (false discovery rate)",
                    "none": "none (each test at its own level)"}
# the heading of a column of p-values adjusted by each correction: what a reader is told the numbers are
ADJUSTED_COLUMNS = {"holm": "p (Holm)", "bh": "q (BH)", "none": "p (not adjusted)"}
# the key of a verdict (judge) that holds the p-value each correction decides by, and its name in a sentence
DECIDING = {"holm": "p_holm", "bh": "q_bh", "none": "p_value"}
DECIDING_NAMES = {"holm": "Holm's p", "bh": "BH's q", "none": "p"}
assert tuple(ADJUSTED_COLUMNS) == tuple(DECIDING) == tuple(DECIDING_NAMES) == CORRECTIONS
POOLED_PHRASING = "pooled"  # the subset's "phrasing" of a metric pooled over its phrasings (probes.phrasings)


def interval_p(value: float | None, ci: Sequence[float | None] | None, neutral: float, confidence: float
               ) -> float | None:
    """The p-value of a signed metric's interval: the interval's half towards ``neutral`` read as z standard
    errors (z of the interval's level), p = 2 (1 - Phi(z |value - neutral| / half)). At the run's level p < 1 -
    confidence exactly where the interval excludes the neutral value; away from it p follows the normal tail, so
    that an adjustment for many tests (Holm's alpha / m) is not floored by the resamples' count. None: no
    interval, or a value that is not a finite number."""
    from scipy.stats import norm

    if value is None or ci is None or not math.isfinite(value):
        return None
    distance = abs(value - neutral)
    if distance == 0:
        return 1.0
    near = ci[0] if value > neutral else ci[1]
    if near is None or math.isnan(near):
        return None
    half = (value - near) if value > neutral else (near - value)
    if half <= 0:  # every resample at the value or beyond it: the interval is as far from neutral as it
        return 0.0
    z = float(norm.ppf(1 - (1 - confidence) / 2))
    return float(2 * norm.sf(z * distance / half))


def _pooled_key(metric: Metric) -> tuple[str, tuple]:
    subset = {key: value for key, value in metric.subset.items() if key != "phrasing"}
    return metric.name, tuple(sorted((key, str(value)) for key, value in subset.items()))


def judge(metrics: Sequence[Metric], facts: Mapping[str, Facts], *, correction: str = CORRECTION,
          confidence: float = CONFIDENCE, tests_given: bool = True) -> dict[str, Any]:
    """Set each metric's ``verdict`` (None for a level) and return the run's summary (results.json
    ``verdicts``): the correction, alpha, how many tests the family holds, how many were detected and how many
    bias metrics could not be judged. ``tests_given``: whether the run drew its tests (n_permutations > 0)."""
    if correction not in ADJUSTED:
        raise ValueError(f"correction is {correction!r}, not one of {', '.join(ADJUSTED)}")
    alpha = round(1 - confidence, 12)  # 0.05, not 1 - 0.95's 0.050000000000000044
    pooled = {_pooled_key(m) for m in metrics if m.subset.get("phrasing") == POOLED_PHRASING}
    family: list[tuple[Metric, float]] = []
    not_judged = 0
    for metric in metrics:
        found = facts.get(metric.name, metric.facts or Facts())
        if found.judged == "level" or found.neutral is None:
            metric.verdict = None
            continue
        p = (interval_p(metric.value, metric.ci, found.neutral, confidence) if found.judged == "interval"
             else metric.p_value)
        verdict: dict[str, Any] = {"rule": found.judged, "p_value": p, "p_holm": None, "q_bh": None,
                                   "detected": None, "side": None, "not_judged": None}
        metric.verdict = verdict
        if p is None or not math.isfinite(p):
            verdict["p_value"] = None
            verdict["not_judged"] = _why_not(str(found.judged), metric, tests_given)
            not_judged += 1
        elif metric.subset.get("phrasing") != POOLED_PHRASING and _pooled_key(metric) in pooled:
            verdict["not_judged"] = "a phrasing of a pooled metric: the family counts the pooled metric once"
        else:
            family.append((metric, float(p)))
    raw = [p for _, p in family]
    holm, bh = stats.holm(raw), stats.benjamini_hochberg(raw)
    decided = ADJUSTED[correction](raw)
    for (metric, _), p_holm, q_bh, p_decided in zip(family, holm, bh, decided):
        assert metric.verdict is not None
        detected = bool(p_decided < alpha)
        neutral = (facts.get(metric.name) or metric.facts or Facts()).neutral
        side = None
        if detected and metric.value is not None and neutral is not None:
            side = "over" if metric.value > neutral else "under"
        metric.verdict.update({"p_holm": float(p_holm), "q_bh": float(q_bh), "detected": detected, "side": side})
    return {"correction": correction, "alpha": alpha, "tests": len(family),
            "detected": sum(1 for metric, _ in family if metric.verdict and metric.verdict["detected"]),
            "not_judged": not_judged}


def _why_not(rule: str, metric: Metric, tests_given: bool) -> str:
    if rule == "interval":
        return "no interval (bootstrap 0, or no resample defined it)"
    if not tests_given:
        return "no test (n_permutations 0)"
    return "no test of no difference for this metric (one group, or its value is not a number)"


def detected(metric: Mapping[str, Any] | Metric) -> bool | None:
    """A metric's verdict as results.json (or a :class:`Metric`) holds it: True detected, False not detected,
    None not judged (a level, no interval or test, a phrasing counted as its pooled metric)."""
    verdict = metric.get("verdict") if isinstance(metric, Mapping) else metric.verdict
    return None if not isinstance(verdict, Mapping) else verdict.get("detected")


def summary_text(summary: Mapping[str, Any] | None) -> str:
    """The run's verdicts in one sentence, for the terminal and the report."""
    if not summary:
        return "no verdicts (a run written before vlfair judged runs: rescore it)"
    correction = CORRECTION_NAMES.get(summary["correction"], summary["correction"])
    text = (f"bias detected in {summary['detected']} of {summary['tests']} tests at alpha = {summary['alpha']:.2g}, "
            f"corrected by {correction}")
    if summary.get("not_judged"):
        text += f"; {summary['not_judged']} bias metrics not judged (no interval or test)"
    return text


__all__ = ["ADJUSTED", "ADJUSTED_COLUMNS", "CORRECTION_NAMES", "DECIDING", "DECIDING_NAMES", "detected", "interval_p",
           "judge", "summary_text"]
