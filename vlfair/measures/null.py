"""What no difference between the groups gives: the test of a statistic bounded at its neutral value.

A largest gap between group means, MaxSkew, NDKL, an F are never on the far side of their neutral value, so
their estimate is biased away from it whatever the groups are, and an interval of the estimate almost never
holds it (over 200 worlds of no difference, the largest gap's percentile interval excluded 0 in all 200). Such a
statistic is judged by a test instead: the group labels permuted among the rows (within each stratum and unit,
as the study's measure is called once per unit), the statistic recomputed on every relabelling by the row set's
engine (:meth:`vlfair.paired._Engine.relabelled`; a ranking's by its own), and its p-value the share of
relabellings as far from the neutral value as the data (Phipson & Smyth's (1 + #) / (1 + B), stopped once
:data:`vlfair.stats.SEQUENTIAL_EXCEEDANCES` were: Besag & Clifford's h / L). The relabellings' mean is what no
difference gives at this design, so the run reports by how much its value exceeds it (``excess``).

Quantities measured on the same rows as samples apart (one language's answers each: ``cross_lingual_gap``) have
no group labels: their relabelling permutes the columns of each row instead (:func:`columns_drawn`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vlfair import stats
from vlfair.facts import Facts

NULL_DRAWS = 1_000  # relabellings at least where a null mean is asked: its error is the null's spread / 30
_BLOCK_ENTRIES = 2_000_000  # a block of relabellings holds about this many row indices (16 MB)

Draw = Callable[[np.random.Generator, int], np.ndarray]  # (rng, b) -> (b, M) quantities on b relabellings


@dataclasses.dataclass(frozen=True)
class Null:
    """Each quantity's test against no difference: its p-value (nan: not asked, or undefined), how it was
    obtained, and its mean over the relabellings drawn (what no difference gives at this design)."""

    p_value: np.ndarray
    method: list[str | None]
    mean: np.ndarray
    drawn: int


def deviation(values: np.ndarray, neutral: np.ndarray, sides: np.ndarray) -> np.ndarray:
    """How far each (..., M) value lies from its neutral value on the sides it can deviate to (``sides``: (M, 2)
    booleans, under and over): a statistic never below its neutral 0 is as far as it is large."""
    under = np.where(sides[:, 0], neutral - values, -np.inf)
    over = np.where(sides[:, 1], values - neutral, -np.inf)
    return np.maximum(under, over)


def relabelling_keys(strata: np.ndarray | None, units: np.ndarray | None, size: int) -> np.ndarray:
    """Each row's relabelling block: its stratum within its unit (labels move only inside a block)."""
    keys = np.zeros(size, dtype=np.int64)
    for part in (strata, units):
        if part is not None:
            keys = keys * (int(part.max()) + 1 if part.size else 1) + part
    return keys


def rows_drawn(relabelled: Callable[[np.ndarray], np.ndarray], keys: np.ndarray,
               derived: Callable[[np.ndarray], np.ndarray] = lambda found: found) -> Draw:
    """A draw of relabellings that permute the rows' group labels within ``keys``' blocks: ``relabelled``
    (an engine's: an (b, n) order -> (b, M) statistics), then ``derived`` (the quantities tested of them)."""
    blocks = [np.flatnonzero(keys == key) for key in np.unique(keys)]

    def draw(rng: np.random.Generator, count: int) -> np.ndarray:
        order = np.empty((count, keys.size), dtype=np.int64)
        for block in blocks:
            order[:, block] = rng.permuted(np.broadcast_to(block, (count, block.size)), axis=1)
        return derived(relabelled(order))
    return draw


def columns_drawn(values: np.ndarray, calls: Sequence[Sequence[int]],
                  statistics: Callable[[np.ndarray], np.ndarray]) -> Draw:
    """A draw of relabellings that permute, in each row, the values of each call's columns (quantities of the
    same rows taken as samples apart, one column each), then ``statistics`` of the (b, k) column means."""
    n = values.shape[0]

    def draw(rng: np.random.Generator, count: int) -> np.ndarray:
        means = np.broadcast_to(_nanmean(values), (count, values.shape[1])).copy()
        for call in calls:
            columns = values[:, list(call)]  # (n, c)
            picked = np.argsort(rng.random((count, n, len(call))), axis=2)
            means[:, list(call)] = _nanmean(np.take_along_axis(columns[None], picked, axis=2), axis=1)
        return statistics(means)
    return draw


def column_means(values: np.ndarray) -> np.ndarray:
    """Each column's mean over its finite values (nan for a column of none)."""
    return _nanmean(values)


def _nanmean(values: np.ndarray, axis: int = 0) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, axis=axis)


def test(draw: Draw, observed: np.ndarray, neutral: np.ndarray, sides: np.ndarray, asked: np.ndarray, *,
         permutations: int, seed: np.random.SeedSequence | int | None, minimum: int = NULL_DRAWS,
         rows: int = 1) -> Null:
    """Every quantity's test against no difference on relabellings from ``draw``: ``observed`` (M,) values, their
    ``neutral`` values and ``sides``; a p-value for those ``asked`` (a quantity whose measure gives its own test
    gets only the null mean), on at most ``permutations`` relabellings, at least ``minimum`` where any are drawn
    (for the null mean). A relabelling whose statistic is undefined (nan) counts as extreme (it cannot say the
    data are more so). ``rows``: the rows a relabelling reads (sizes the blocks)."""
    observed = np.asarray(observed, dtype=float)
    count = observed.size
    far = deviation(observed, neutral, sides)
    tolerance = 1e-12 * np.maximum(1.0, np.abs(far))  # ties up to float noise count as extreme
    wanted = np.asarray(asked, dtype=bool) & np.isfinite(far)
    hits = np.zeros(count, dtype=np.int64)
    settled = np.full(count, -1, dtype=np.int64)  # where a quantity's h-th extreme relabelling came
    total, finite = np.zeros(count), np.zeros(count)
    rng = np.random.default_rng(seed)
    goal = min(permutations, minimum)
    cap = max(1, _BLOCK_ENTRIES // max(rows, 1))
    drawn, block = 0, min(100, cap)
    h = stats.SEQUENTIAL_EXCEEDANCES
    while drawn < permutations and (drawn < goal or (wanted & (settled < 0)).any()):
        limit = permutations if (wanted & (settled < 0)).any() else goal  # the null mean alone needs no more
        b = min(block, limit - drawn)
        found = np.asarray(draw(rng, b), dtype=float).reshape(b, count)
        with np.errstate(invalid="ignore"):
            extreme = ~(deviation(found, neutral, sides) < far - tolerance)  # nan: extreme
        running = hits + np.cumsum(extreme, axis=0)
        reached = (settled < 0) & (running[-1] >= h)
        for j in np.flatnonzero(reached):
            settled[j] = drawn + int(np.argmax(running[:, j] >= h)) + 1
        hits = running[-1]
        ok = np.isfinite(found)
        total += np.where(ok, found, 0.0).sum(axis=0)
        finite += ok.sum(axis=0)
        drawn += b
        block = min(2 * block, cap)
    p = np.full(count, np.nan)
    methods: list[str | None] = [None] * count
    for j in np.flatnonzero(wanted):
        if settled[j] > 0:
            p[j], methods[j] = h / settled[j], "sequential_monte_carlo"
        else:
            p[j], methods[j] = (1 + hits[j]) / (1 + drawn), "monte_carlo"
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(finite > 0, total / np.maximum(finite, 1), np.nan)
    return Null(p, methods, mean, drawn)


def interval_of(resampled: np.ndarray, value: float, confidence: float, facts: Facts,
                rows: float | None = None) -> list[float] | None:
    """A metric's interval from its (B,) resamples. A statistic judged by a test (one bounded at its neutral
    value) is biased away from it, and more so in a resample than in the data, so its resamples are moved onto its
    value first (their spread kept: the interval says how precisely the value is measured, and holds it) and the
    interval is cut to the metric's range; one judged by its interval (a ratio) is read at the level that makes it
    as wide as a t interval at ``rows``, its smallest resampled group (:func:`vlfair.stats.expanded_confidence`:
    a plain percentile interval is too narrow in small groups, and this one decides); any other's is the plain
    percentile interval."""
    from vlfair import paired, stats

    if facts.judged == "test" and resampled.size and np.isfinite(value):
        resampled = paired.recentred(resampled[:, None], np.asarray([value]))[:, 0]
        found = paired.resampled_interval(resampled, confidence)
        return None if found is None else _cut(found, facts)
    if facts.judged == "interval":
        return paired.resampled_interval(resampled, stats.expanded_confidence(confidence, rows))
    return paired.resampled_interval(resampled, confidence)


def note_widening(metric: Any, facts: Facts, rows: float, interval: list[float] | None) -> None:
    """Where ``metric``'s interval is still ``interval``, the one :func:`interval_of` read at the level expanded for
    ``rows``, those rows under its details' "ci_rows": what its arms were read at, for the run's detectable effects
    and ``vlfair power`` (a reporter's own interval, a Hoeffding bound or a top k's, is read at the level asked)."""
    if facts.judged == "interval" and rows >= 2 and interval is not None and metric.ci is interval:
        metric.details["ci_rows"] = int(rows)


def exceeding(value: float | None, ci: list[float] | None, mean: float) -> dict[str, Any]:
    """What a bounded metric reports of its null beside its value: the null mean, and by how much the value (and
    its interval) exceed it."""
    if value is None or not np.isfinite(mean):
        return {"null_mean": None, "excess": None, "excess_ci": None}
    return {"null_mean": float(mean), "excess": float(value - mean),
            "excess_ci": None if ci is None else [float(ci[0] - mean), float(ci[1] - mean)]}


def snapped(value: float | None, neutral: float | None, scale: float) -> float | None:
    """``value`` with a rounding residue of its neutral value (a gap of identical groups computed as 8.9e-16) made
    the neutral value, and -0.0 made 0.0: the residue is no bias, and would be shown, counted and plotted as one."""
    if value is None or not np.isfinite(value):
        return value
    if neutral is not None and abs(value - neutral) <= RESIDUE * max(1.0, scale):
        return float(neutral)
    return value + 0.0  # -0.0 -> 0.0


RESIDUE = 1e-12  # relative to the data's largest magnitude: below this a deviation is float64's, not the data's


def scale_of(values: np.ndarray) -> float:
    """The data's largest magnitude, what a rounding residue is relative to (:func:`snapped`)."""
    return float(np.nanmax(np.abs(values), initial=0.0)) if values.size else 0.0


def cut_to_range(found: Any, facts: Facts) -> None:
    """A result's ``ci`` cut to its measure's range, in place: the truth lies in it, so the cut interval covers
    it as often, and a reporter's own interval (a top k's percentiles moved onto the value, a Hoeffding bound
    either side of an influence) no longer passes a bound the value cannot (a MaxSkew's below 0)."""
    if found.ci is not None and None not in found.ci:
        found.ci = _cut(found.ci, facts)


def _cut(interval: list[float], facts: Facts) -> list[float]:
    low, high = facts.bounds
    return [float(min(max(bound, low), high)) for bound in interval]


def snap(found: Any, neutral: float | None, scale: float) -> None:
    """A result's ``value`` and ``ci`` bounds (a Metric, a measure's reading) :func:`snapped`, in place."""
    found.value = snapped(found.value, neutral, scale)
    if found.ci is not None:
        found.ci = [snapped(bound, neutral, scale) for bound in found.ci]

__all__ = ["NULL_DRAWS", "Null", "RESIDUE", "column_means", "columns_drawn", "cut_to_range", "deviation", "exceeding",
           "interval_of", "note_widening", "relabelling_keys", "rows_drawn", "scale_of", "snap", "snapped", "test"]
