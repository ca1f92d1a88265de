"""Two models measured on the same rows: each metric's difference with a paired bootstrap
interval and a paired permutation test (numpy and scipy only).

A probe describes its metrics as functions of per-sample values (:class:`RowSet`): the rows a
group of metrics reads, the value columns, each row's group and resampling stratum, and one
function per metric. Most metrics of the studies (group means, gaps, ratios of means,
F-statistics, rates) are functions of each group's count, sum and sum of squares, so a
:class:`RowSet` hands its statistics :class:`Moments`. The moments of a bootstrap resample are
one matrix product (multiplicities x values), and those of a relabelling that swaps the two
models' results in some rows are the observed moments plus one matrix product (swaps x
differences): thousands of resamples and relabellings of 14,000 rows cost a few matrix
products, never a loop over resamples. A metric that is not a function of moments (a maximum
over rows) sets ``values=True`` and receives the (b, n, k) resampled values instead; one that
needs neither (a ranking re-ranked in every resample) brings its own ``engine``.

Values are centred on each column's mean before squaring, so sums of squares keep their digits. The
engines a row set may bring instead (``RowSet.engine``: ``point``, ``resampled``, ``swapped_difference``)
are described, with the retrieval probe's, in docs/DESIGN.md ("Declared metrics and paired statistics").
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from vlfair import stats
from vlfair.defaults import BOOTSTRAP, CONFIDENCE, PERMUTATIONS, SEED


@dataclasses.dataclass(frozen=True)
class Moments:
    """Per group and value column: the (weighted) row count, and the sum and sum of squares of
    the values minus ``shift`` (each column's overall mean: sums of squares keep their digits)."""

    count: npt.NDArray[np.float64]    # (b, G)
    total: npt.NDArray[np.float64]    # (b, G, k)
    squares: npt.NDArray[np.float64]  # (b, G, k)
    shift: npt.NDArray[np.float64]    # (k,)

    @property
    def means(self) -> npt.NDArray[np.float64]:
        """(b, G, k) group means (nan for an empty group)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.total / self.count[:, :, None] + self.shift

    @property
    def within(self) -> npt.NDArray[np.float64]:
        """(b, G, k) sums of squared deviations from each group's mean."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.maximum(self.squares - self.total**2 / self.count[:, :, None], 0.0)


@dataclasses.dataclass(frozen=True)
class Statistic:
    """One metric of a :class:`RowSet`: ``function`` maps the row set's :class:`Moments` (or,
    with ``RowSet.values``, its (b, n, k) values) to (b,) values of the metric."""

    name: str
    subset: dict[str, Any]
    function: Callable[[Any], npt.NDArray[np.float64]]
    neutral: float | None = None  # the value of "no bias" (None: a level, such as a mean score)


@dataclasses.dataclass(frozen=True)
class RowSet:
    """Metrics read from the same rows: ``rows`` (positions in the samples table), the value
    ``columns`` read per model, each row's ``groups`` code (0..G-1) and its resampling stratum
    (``strata``; None: the groups, as the measures' own intervals resample)."""

    rows: npt.NDArray[np.int64]
    columns: tuple[str, ...]
    groups: npt.NDArray[np.int64]
    statistics: tuple[Statistic, ...]
    strata: npt.NDArray[np.int64] | None = None
    values: bool = False  # the statistics take (b, n, k) values, not moments
    # Statistics that are neither functions of moments nor affordable from (b, n, k) values (a
    # ranking re-ranked in every resample) come with their own engine: engine(row_set, a, b) has
    # point(), resampled(indices), swapped_difference(swaps) and relabelled(order) as _Engine has, and hands its
    # statistics whatever it computes.
    engine: Callable[[RowSet, np.ndarray, np.ndarray], Any] | None = None
    # Resampled values shifted onto the point values before any interval (top-k statistics, whose
    # resamples are shifted by copies of one item ranked side by side: measures.top_k_interval)
    recentre: bool = False

    @property
    def resampling_strata(self) -> npt.NDArray[np.int64]:
        return self.groups if self.strata is None else self.strata


@dataclasses.dataclass(frozen=True)
class Difference:
    """A metric of two models on the same rows: both values, A - B with its paired bootstrap
    interval, A / B for a ratio metric (neutral 1), the difference of their distances to the
    neutral value (negative: A is closer, less biased) and the paired permutation test."""

    name: str
    subset: dict[str, Any]
    neutral: float | None
    value_a: float
    value_b: float
    difference: float
    difference_ci: list[float] | None
    unpaired_ci: list[float] | None  # the interval had the models been resampled apart (for contrast)
    ratio: float | None
    ratio_ci: list[float] | None
    distance_difference: float | None
    distance_difference_ci: list[float] | None
    p_value: float
    log10_p_value: float
    p_method: str
    permutations: int | None


Resampled = tuple[np.ndarray, np.ndarray]  # a model's (M,) statistics at the data and (B, M) on the resamples


def compare(row_set: RowSet, values_a: npt.ArrayLike, values_b: npt.ArrayLike, *, bootstrap: int = BOOTSTRAP,
            confidence: float = CONFIDENCE, seed: int | None = SEED, n_permutations: int = PERMUTATIONS,
            resampled: tuple[Resampled, Resampled] | None = None,
            tests: list[stats.PermutationResult] | None = None, measured: bool = False) -> list[Difference]:
    """Every statistic of ``row_set`` for models A and B, whose (n, k) values of the row set's
    columns are ``values_a`` and ``values_b`` (the same rows in the same order).

    The bootstrap draws rows within each stratum and evaluates both models on the same draws;
    the permutation test swaps the two models' values within randomly chosen rows
    (:func:`vlfair.stats.sign_flip_tests`: exact for up to log2(n_permutations) rows).

    ``resampled``: each model's statistics at the data and on the resamples, as :func:`resample` gives
    them for the same row set, bootstrap and seed (several models compared pair by pair resample each
    model once); ``tests``: the pair's permutation tests, made on :func:`relabelling_stream`'s swaps
    (several pairs sharing the swaps' products: ``vlfair.compare.tiers``); ``measured``: the resamples and the
    swaps drawn from the bare seed, as the measures draw theirs (``measures.bias_difference``), not from the
    streams compare spawns from it.
    """
    a = np.asarray(values_a, dtype=float).reshape(len(row_set.rows), -1)
    b = np.asarray(values_b, dtype=float).reshape(len(row_set.rows), -1)
    engine = (row_set.engine or _Engine)(row_set, a, b)
    count = len(row_set.statistics)
    # independent streams for the resamples, the unpaired contrast and the relabellings (a measure's: its seed)
    streams: list[Any] = np.random.SeedSequence(seed).spawn(3)
    if measured:
        streams = [seed, streams[1], seed]
    if resampled is not None:
        (point_a, samples_a), (point_b, samples_b) = resampled
    else:
        point_a, point_b = engine.point()
        samples_a = np.empty((0, count))
        samples_b = np.empty((0, count))
        if bootstrap:
            blocks = [engine.resampled(indices) for indices in
                      stats.stratified_resamples(row_set.resampling_strata, bootstrap, streams[0])]
            samples_a = np.concatenate([block[0] for block in blocks])
            samples_b = np.concatenate([block[1] for block in blocks])
    if bootstrap and row_set.recentre:
        samples_a, samples_b = recentred(samples_a, point_a), recentred(samples_b, point_b)
    # B's resamples in another order: each A resample meets an independent B resample, the
    # interval an unpaired analysis would give (what pairing gains is the ratio of the widths)
    apart = np.random.default_rng(streams[1]).permutation(len(samples_b))
    if tests is None and n_permutations:
        tests = stats.sign_flip_tests(engine.swapped_difference, len(row_set.rows), count, n_permutations, streams[2])
    elif tests is None:
        tests = [stats.PermutationResult(float("nan"), float("nan"), "none", None)] * count
    differences = []
    for j, statistic in enumerate(row_set.statistics):
        differences.append(_difference(statistic, point_a[j], point_b[j], samples_a[:, j], samples_b[:, j],
                                       apart, confidence, tests[j]))
    return differences


def relabelling_stream(seed: int | None) -> np.random.SeedSequence:
    """The stream :func:`compare` draws its relabellings (the swaps of its permutation test) from."""
    return np.random.SeedSequence(seed).spawn(3)[2]


def resample(row_set: RowSet, values: npt.ArrayLike, *, bootstrap: int = BOOTSTRAP,
             seed: int | None = SEED, measured: bool = False) -> Resampled:
    """One model's statistics of ``row_set`` at its (n, k) ``values`` and on the stratified resamples
    :func:`compare` draws for the same seed (the same rows for every model); ``measured``: on those the
    measures' own bootstrap draws (``stats.bootstrap_interval``: the bare seed), as one run reports them."""
    a = np.asarray(values, dtype=float).reshape(len(row_set.rows), -1)
    engine = (row_set.engine or _Engine)(row_set, a, a)
    point = engine.point()[0]
    samples = np.empty((0, len(row_set.statistics)))
    if bootstrap:
        # compare's stream of resamples, or the measures'
        stream = seed if measured else np.random.SeedSequence(seed).spawn(3)[0]
        samples = np.concatenate([engine.resampled(indices)[0] for indices in
                                  stats.stratified_resamples(row_set.resampling_strata, bootstrap, stream)])
    return point, samples


def relabeller(row_set: RowSet, values: npt.ArrayLike) -> Callable[[np.ndarray], np.ndarray]:
    """One model's statistics of ``row_set`` on relabellings of its rows' groups: a function of a (b, n) order
    (row i takes row ``order[r, i]``'s group) to (b, M) statistics, by the row set's engine (its own, where it
    brings one): what no difference between the groups gives (:mod:`vlfair.measures.null`)."""
    a = np.asarray(values, dtype=float).reshape(len(row_set.rows), -1)
    engine = (row_set.engine or _Engine)(row_set, a, a)

    def relabelled(order: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an undefined statistic is nan (counted as extreme)
            return np.asarray(engine.relabelled(order), dtype=float)
    return relabelled


def resample_groups(row_set: RowSet, values: npt.ArrayLike, units: npt.NDArray[np.int64] | None = None, *,
                    bootstrap: int = BOOTSTRAP, seed: int | None = SEED, squares: bool = False
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One model's statistics of ``row_set`` at its (n, k) ``values`` and on the measures' stream: each
    group's mean resampled within its group by :func:`vlfair.stats.bootstrap_group_means` seeded with
    ``seed``, each unit of rows apart (``units``: each row's unit, a study's measure called once per
    unit; None: one unit), each column on the same draws, as :mod:`vlfair.measures` resample one call's
    groups. A one-run interval so equals the measure's on the same rows, draw for draw. A unit holding a
    group smaller than ``MIN_GROUP_SIZE`` is not resampled (the measures refuse it: its statistics get no
    interval), nor, where units are given, a unit of one group (a gap's measure refuses it). For a row set
    resampled within its groups; with ``squares``, the groups' sums of squares are resampled on the same draws
    too (an F reads them), else they are nan. A seed of None draws one fresh seed for every column.

    Returns: the (M,) statistics at the data, (B, M) on the resamples, and the (B, G, k) resampled group
    means (None without ``bootstrap``)."""
    from vlfair.defaults import MIN_GROUP_SIZE

    a = np.asarray(values, dtype=float).reshape(len(row_set.rows), -1)
    groups = row_set.groups
    num_groups, k = (int(groups.max()) + 1 if groups.size else 0), a.shape[1]
    counts = np.bincount(groups, minlength=num_groups).astype(float)
    shift = _column_means(a)
    # the moments at the data group by group (a value that is not a number leaves its own group's statistics
    # undefined, as a measure refuses that group's call, not every group's)
    centred = a - shift
    total = np.stack([np.bincount(groups, centred[:, j], num_groups) for j in range(k)], axis=1).astype(float)
    with np.errstate(over="ignore"):  # squares of values near float64's largest: an F of them is undefined (nan)
        second = np.stack([np.bincount(groups, centred[:, j] ** 2, num_groups) for j in range(k)],
                          axis=1).astype(float)
    point = statistics(row_set, Moments(counts[None], total[None], second[None], shift))[0]
    if not bootstrap:
        return point, np.empty((0, len(row_set.statistics))), None
    means = np.full((bootstrap, num_groups, k), np.nan)
    squared = np.full_like(means, np.nan)  # the mean square about ``shift``, each column's mean
    several = units is not None  # units are a measure's calls, each across 2 groups or more
    if seed is None:  # every column and the squares on the same draws: one fresh seed for all of them
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    for inside, present, local in _units(groups, units, num_groups):
        if np.bincount(local).min() < MIN_GROUP_SIZE or (several and present.size < 2):
            continue
        # every column, and their squares where read, on one set of draws
        drawn = np.concatenate([a[inside], (a[inside] - shift) ** 2], axis=1) if squares else a[inside]
        found = stats.bootstrap_group_means(drawn, local, len(present), bootstrap, seed)  # (B, G_unit, k or 2k)
        means[:, present, :] = found[:, :, :k]
        if squares:
            squared[:, present, :] = found[:, :, k:]
    with np.errstate(invalid="ignore"):
        total = (means - shift) * counts[None, :, None]
        moments = Moments(np.broadcast_to(counts, (bootstrap, num_groups)), total, squared * counts[None, :, None],
                          shift)
    return point, statistics(row_set, moments), means  # (a unit not resampled: its groups' statistics are nan)


def _units(groups: np.ndarray, units: np.ndarray | None, num_groups: int
           ) -> Iterator[tuple[Any, np.ndarray, np.ndarray]]:
    """Each unit of rows (:func:`resample_groups`): its rows (every row, where there are no units), the groups
    present in it, and its rows' codes among those (0.. in the groups' order)."""
    if units is None:  # one unit: no sort of the rows (np.unique's), the codes looked up
        present = np.flatnonzero(np.bincount(groups, minlength=num_groups))
        lookup = np.full(num_groups, -1, dtype=np.int64)
        lookup[present] = np.arange(present.size)
        yield slice(None), present, lookup[groups]
        return
    lowest = np.full(num_groups, np.iinfo(np.int64).max)
    highest = np.full(num_groups, np.iinfo(np.int64).min)
    np.minimum.at(lowest, groups, units)
    np.maximum.at(highest, groups, units)
    if (lowest != highest)[np.bincount(groups, minlength=num_groups) > 0].any():
        raise ValueError("a group of the row set lies in two units: a unit holds whole groups")
    for unit in np.unique(units):
        inside = units == unit
        present, local = np.unique(groups[inside], return_inverse=True)
        yield inside, present, local.reshape(-1)


def resample_apart(row_set: RowSet, values: npt.ArrayLike, calls: list[tuple[int, ...]], *,
                   bootstrap: int = BOOTSTRAP, seed: int | None = SEED) -> tuple[np.ndarray, np.ndarray]:
    """One model's statistics of a one-group ``row_set`` whose value columns are samples of their own (one
    language's answers each, on the same images), resampled apart as a measure resamples several languages'
    samples: each of ``calls`` (column indices, one measure call's languages in its groups' order) is drawn
    by :func:`vlfair.stats.bootstrap_group_means` seeded with ``seed``, its columns as its groups; a column in
    no call is a call of its own. Returns the (M,) statistics at the data and (B, M) on the resamples."""
    a = np.asarray(values, dtype=float).reshape(len(row_set.rows), -1)
    point, _, _ = resample_groups(row_set, a, bootstrap=0)
    if not bootstrap:
        return point, np.empty((0, len(row_set.statistics)))
    n, k = a.shape
    if seed is None:  # every call on draws from one fresh seed, as the row set's other streams
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    listed = [j for call in calls for j in call]
    if len(set(listed)) < len(listed):
        raise ValueError("a column in two calls: each call draws its own columns")
    means = np.full((bootstrap, 1, k), np.nan)
    for call in [*calls, *((j,) for j in range(k) if j not in listed)]:
        stacked = a[:, list(call)].T.reshape(-1)  # the call's first column's rows, then its second's, ...
        means[:, 0, list(call)] = stats.bootstrap_group_means(stacked, np.repeat(np.arange(len(call)), n), len(call),
                                                              bootstrap, seed)
    shift = _column_means(a)
    moments = Moments(np.full((bootstrap, 1), float(n)), (means - shift) * n, np.full_like(means, np.nan), shift)
    return point, statistics(row_set, moments)


def _column_means(a: np.ndarray) -> np.ndarray:
    """Each column's mean over its finite values, the moments' shift (nan for a column of none, said nowhere)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(a, axis=0) if a.size else np.zeros(a.shape[1])


def statistics(row_set: RowSet, data: Any) -> np.ndarray:
    """(b, M) values of every statistic of ``row_set`` on ``data`` (its moments, or values): a statistic left
    undefined (a group with no rows, a column of no finite value) is nan, without a warning."""
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.stack([np.asarray(s.function(data), dtype=float) for s in row_set.statistics], axis=1)


def measure(row_set: RowSet, values: npt.ArrayLike, *, bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
            seed: int | None = SEED) -> list[tuple[float, list[float] | None]]:
    """Every statistic of ``row_set`` for one model (its (n, k) ``values``): the value and its
    stratified-bootstrap interval, on the resamples :func:`compare` draws for the same seed (None
    where nothing was resampled or no resample gave a finite value)."""
    point, samples = resample(row_set, values, bootstrap=bootstrap, seed=seed)
    if bootstrap and row_set.recentre:
        samples = recentred(samples, point)
    return [(float(point[j]), resampled_interval(samples[:, j], confidence)) for j in range(len(row_set.statistics))]


def smallest_stratum(row_set: RowSet, units: np.ndarray | None = None) -> int:
    """The fewest rows any of ``row_set``'s resampling strata holds (within each unit, where ``units`` are
    given): the sample size a small-sample interval is widened for (:func:`vlfair.stats.expanded_confidence`)."""
    cells = row_set.resampling_strata if units is None else np.unique(
        np.stack([np.asarray(units), row_set.resampling_strata]), axis=1, return_inverse=True)[1].ravel()
    counts = np.bincount(cells) if len(cells) else np.zeros(0, dtype=int)
    return int(counts[counts > 0].min()) if (counts > 0).any() else 0


def resampled_interval(samples: np.ndarray, confidence: float) -> list[float] | None:
    """The percentile interval of some resampled values; None where there are none finite."""
    if samples.size == 0 or not np.isfinite(samples).any():
        return None
    low, high = stats.percentile_interval(samples, confidence)
    return [float(low), float(high)]


def recentred(samples: np.ndarray, point: np.ndarray) -> np.ndarray:
    """(b, M) resampled values moved so that each column's mean is its point value (where finite)."""
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a column of nan resamples: left as it is
        shift = point - np.nanmean(samples, axis=0)
    return samples + np.where(np.isfinite(shift), shift, 0.0)


def _difference(statistic: Statistic, value_a: float, value_b: float, samples_a: np.ndarray, samples_b: np.ndarray,
                apart: np.ndarray, confidence: float, test: stats.PermutationResult) -> Difference:
    def interval(samples: np.ndarray) -> list[float] | None:
        return resampled_interval(samples, confidence)

    neutral = statistic.neutral
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = ratio_ci = None
        if neutral == 1.0:
            ratio = float(value_a / value_b) if value_b else float("nan")
            ratio_ci = interval(samples_a / samples_b)
        distance = distance_ci = None
        if neutral is not None:
            distance = float(abs(value_a - neutral) - abs(value_b - neutral))
            distance_ci = interval(np.abs(samples_a - neutral) - np.abs(samples_b - neutral))
    return Difference(statistic.name, statistic.subset, neutral, float(value_a), float(value_b),
                      float(_undefined_difference(np.float64(value_a), np.float64(value_b))),
                      interval(_undefined_difference(samples_a, samples_b)),
                      interval(_undefined_difference(samples_a, samples_b[apart])), ratio, ratio_ci, distance,
                      distance_ci, test.p_value, test.log10_p_value, test.method, test.permutations)


class _Engine:
    """The statistics of one row set for both models: at the data, on resampled rows and on
    relabellings that swap the models' values in some rows."""

    def __init__(self, row_set: RowSet, a: np.ndarray, b: np.ndarray):
        self.row_set, self.a, self.b = row_set, a, b
        self.num_groups = int(row_set.groups.max()) + 1 if row_set.groups.size else 0
        if not row_set.values:
            self.shift = np.nanmean(np.concatenate([a, b]), axis=0) if a.size else np.zeros(a.shape[1])
            self.onehot = np.eye(self.num_groups)[row_set.groups]  # (n, G)
            self.centred_a, self.centred_b = a - self.shift, b - self.shift
            with np.errstate(over="ignore"):  # refused just below, naming the column
                for centred in (self.centred_a, self.centred_b):
                    self._refuse_overflow(centred**2, "a row's square")
            self.first_a = self._spread(self.centred_a)       # (n, G*k): each row's value in its group's slot
            self.second_a = self._spread(self.centred_a**2)
            difference = self.centred_b - self.centred_a
            self.first_swap = self._spread(difference)        # what swapping a row adds to A's sums
            self.second_swap = self._spread(self.centred_b**2 - self.centred_a**2)
            self.first_b = self._spread(self.centred_b)
            self.second_b = self._spread(self.centred_b**2)

    def _spread(self, values: np.ndarray) -> np.ndarray:
        return (self.onehot[:, :, None] * values[:, None, :]).reshape(len(values), -1)

    def _moments(self, count: np.ndarray, first: np.ndarray, second: np.ndarray) -> Moments:
        """The moments every statistic is computed from (at the data, resampled, relabelled): an
        infinite sum or sum of squares is an overflow, refused naming its column (a statistic of it
        would read as "undefined" or as an infinite gap). A missing value (NaN) stays NaN."""
        b, k = first.shape[0], self.a.shape[1]
        total, squares = first.reshape(b, self.num_groups, k), second.reshape(b, self.num_groups, k)
        self._refuse_overflow(total, "a group's sum")
        self._refuse_overflow(squares, "a group's sum of squares")
        return Moments(count, total, squares, self.shift)

    def _refuse_overflow(self, values: np.ndarray, what: str) -> None:
        """Raise where ``values`` (last axis: the value columns) hold an infinity: float64 overflowed
        (a missing value stays NaN and is not refused)."""
        infinite = np.isinf(values)
        if infinite.any():
            column = self.row_set.columns[int(np.argwhere(infinite)[0][-1])]
            raise stats.not_finite(f"{what} of column {column!r} (centred on its mean)", float(values[infinite][0]))

    def _evaluate(self, data: Any) -> np.ndarray:
        """(b, M) values of every statistic."""
        return np.stack([np.asarray(s.function(data), dtype=float) for s in self.row_set.statistics], axis=1)

    def point(self) -> tuple[np.ndarray, np.ndarray]:
        if self.row_set.values:
            return self._evaluate(self.a[None])[0], self._evaluate(self.b[None])[0]
        count = self.onehot.sum(axis=0)[None]
        moments_a = self._moments(count, self.first_a.sum(axis=0)[None], self.second_a.sum(axis=0)[None])
        if self.b is self.a:  # one model (resample, measure): its statistics once
            point = self._evaluate(moments_a)[0]
            return point, point
        moments_b = self._moments(count, self.first_b.sum(axis=0)[None], self.second_b.sum(axis=0)[None])
        return self._evaluate(moments_a)[0], self._evaluate(moments_b)[0]

    def resampled(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(b, M) statistics of A and of B on the same b resamples of rows."""
        if self.row_set.values:
            return self._evaluate(self.a[indices]), self._evaluate(self.b[indices])
        b, n = indices.shape
        weights = np.bincount((indices + np.arange(b)[:, None] * n).ravel(), minlength=b * n).reshape(b, n)
        weights = weights.astype(float)
        count = weights @ self.onehot
        if self.b is self.a:  # one model (resample, measure): its statistics once
            found = self._evaluate(self._moments(count, weights @ self.first_a, weights @ self.second_a))
            return found, found
        return (self._evaluate(self._moments(count, weights @ self.first_a, weights @ self.second_a)),
                self._evaluate(self._moments(count, weights @ self.first_b, weights @ self.second_b)))

    def relabelled(self, order: np.ndarray) -> np.ndarray:
        """(b, M) statistics of A with its rows' group labels permuted: row i takes row ``order[r, i]``'s label in
        relabelling r (what no difference between the groups gives: :mod:`vlfair.measures.null`). The group sizes
        stay, so only the sums move: one bincount over (relabelling, group) pairs per column."""
        if self.row_set.values:  # a statistic of the rows' values: the values move, the groups stay
            return self._evaluate(self.a[order])
        b, n = order.shape
        codes = self.row_set.groups[order]
        flat = (np.arange(b)[:, None] * self.num_groups + codes).ravel()
        size = b * self.num_groups

        def sums(values: np.ndarray) -> np.ndarray:  # (b, G*k), each column's sums by group, as _spread lays them
            return np.stack([np.bincount(flat, np.tile(values[:, j], b), size).reshape(b, self.num_groups)
                             for j in range(values.shape[1])], axis=2).reshape(b, -1)

        count = np.broadcast_to(self.onehot.sum(axis=0), (b, self.num_groups))
        return self._evaluate(self._moments(count, sums(self.centred_a), sums(self.centred_a ** 2)))

    def swapped_difference(self, swaps: np.ndarray) -> np.ndarray:
        """(b, M) statistic(A') - statistic(B') where A' takes B's values in the swapped rows."""
        if self.row_set.values:
            mask = swaps[:, :, None]
            return _undefined_difference(self._evaluate(np.where(mask, self.b[None], self.a[None])),
                                         self._evaluate(np.where(mask, self.a[None], self.b[None])))
        s = swaps.astype(float)
        count = np.broadcast_to(self.onehot.sum(axis=0), (len(s), self.num_groups))
        first_a = self.first_a.sum(axis=0) + s @ self.first_swap
        second_a = self.second_a.sum(axis=0) + s @ self.second_swap
        first_b = self.first_a.sum(axis=0) + self.first_b.sum(axis=0) - first_a
        second_b = self.second_a.sum(axis=0) + self.second_b.sum(axis=0) - second_a
        return _undefined_difference(self._evaluate(self._moments(count, first_a, second_a)),
                                     self._evaluate(self._moments(count, first_b, second_b)))


def _undefined_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A - B of two runs' statistics, where a statistic infinite in both (an F of groups with no spread within
    them) leaves the difference undefined: nan, without numpy's warning. A permutation test counts such a
    relabelling as extreme, an interval leaves such a resample out, and compare says which run's value is
    undefined (``compare.comparison``'s ``undefined``)."""
    with np.errstate(invalid="ignore"):
        return a - b


# ---- statistics of moments the studies use ---------------------------------------------------
def group_mean(group: int, column: int = 0) -> Callable[[Moments], np.ndarray]:
    """One group's mean of one column (``m.means[:, group, column]`` without every group's and
    column's: a row set may hold 40 statistics of 21 columns)."""
    def statistic(m: Moments) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return m.total[:, group, column] / m.count[:, group] + m.shift[column]
    return statistic


def pooled_mean(column: int = 0) -> Callable[[Moments], np.ndarray]:
    """The mean of one column over every row, whatever its group (an accuracy)."""
    def statistic(m: Moments) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return m.total[:, :, column].sum(axis=1) / m.count.sum(axis=1) + m.shift[column]
    return statistic


def mean_range(column: int = 0) -> Callable[[Moments], np.ndarray]:
    """The largest minus the smallest group mean (a max gap)."""
    def statistic(m: Moments) -> np.ndarray:
        means = m.means[:, :, column]
        return np.nanmax(means, axis=1) - np.nanmin(means, axis=1)
    return statistic


def mean_ratio(numerator: int, denominator: int, column: int = 0) -> Callable[[Moments], np.ndarray]:
    """One group's mean over another's (a bias ratio)."""
    top, bottom = group_mean(numerator, column), group_mean(denominator, column)

    def statistic(m: Moments) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return top(m) / bottom(m)
    return statistic


def f_statistic(column: int = 0, welch: bool = False) -> Callable[[Moments], np.ndarray]:
    """The one-way ANOVA F across the groups (as ``stats.one_way_anova``: nan where 0/0), or Welch's F, for unequal
    variances (nan where a group's variance is 0, which ``stats.one_way_anova`` refuses)."""
    def statistic(m: Moments) -> np.ndarray:
        count = m.count
        present = count > 0
        k = present.sum(axis=1)
        n = count.sum(axis=1)
        total = m.total[:, :, column]
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(present, total / count, 0.0)
            within = np.where(present, m.within[:, :, column], 0.0)
            if welch:
                return _welch_f(count, present, k, means, within)
            grand = total.sum(axis=1) / n
            between = (count * (means - grand[:, None]) ** 2).sum(axis=1)
            within = within.sum(axis=1)
            # no variance within the groups but rounding's (a sum of squares less the square of a sum leaves
            # ~1e-16 of the values' scale where every group holds one value): none, as stats.one_way_anova finds
            within = np.where(within <= 1e-12 * (between + within), 0.0, within)
            df_between, df_within = k - 1.0, n - k
            numerator, denominator = between / df_between, within / df_within
            return np.where(denominator > 0, numerator / denominator, np.where(numerator > 0, np.inf, np.nan))
    return statistic


def _welch_f(count: np.ndarray, present: np.ndarray, k: np.ndarray, means: np.ndarray,
             within: np.ndarray) -> np.ndarray:
    """Welch's F from each group's rows, mean and sum of squared deviations (the formula of
    ``stats.one_way_anova(welch=True)``), the groups absent from a resample left out."""
    # no variance within a group but rounding's (a sum of squares less the square of a sum leaves ~1e-16 of the
    # values' scale): none, which Welch's F cannot weigh (stats.one_way_anova refuses it)
    spread = within.sum(axis=1, keepdims=True) + (count * (means - (count * means).sum(axis=1, keepdims=True)
                                                           / count.sum(axis=1, keepdims=True)) ** 2).sum(
        axis=1, keepdims=True)
    within = np.where(within <= 1e-12 * spread, 0.0, within)
    variance = np.where(present, within / (count - 1), np.nan)
    weights = np.where(present, count / variance, 0.0)
    total_weight = weights.sum(axis=1, keepdims=True)
    weighted_mean = (weights * means).sum(axis=1, keepdims=True) / total_weight
    tmp = np.where(present, (1 - weights / total_weight) ** 2 / (count - 1), 0.0).sum(axis=1)
    f = (weights * (means - weighted_mean) ** 2).sum(axis=1) / (k - 1) / (1 + 2 * (k - 2) * tmp / (k**2 - 1))
    return np.where((present & ~(variance > 0)).any(axis=1), np.nan, f)


def iter_columns(row_sets: list[RowSet]) -> Iterator[str]:
    """Every value column the row sets read, once."""
    seen: set[str] = set()
    for row_set in row_sets:
        for column in row_set.columns:
            if column not in seen:
                seen.add(column)
                yield column


__all__ = ["Difference", "Moments", "RowSet", "Statistic", "compare", "f_statistic", "group_mean", "iter_columns",
           "mean_range", "mean_ratio", "measure", "pooled_mean", "relabelling_stream", "resample", "resample_apart",
           "resample_groups", "Resampled", "statistics"]
