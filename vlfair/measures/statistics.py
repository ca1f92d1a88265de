"""The statistics a metric is declared with, each a function of a row set's group moments that the one paired
engine (:mod:`vlfair.paired`) evaluates on one run and on two runs' shared resamples: a group's mean
(:class:`Mean`), a gap between group means (:class:`Range`) or between columns (:class:`ColumnRange`), a ratio
(:class:`Ratio`), an F (:class:`FStatistic`), a probe's own (:class:`Custom`), and several phrasings' pooled
(:class:`Pooled`). Each says where it is defined on the data (``defined``: the measures' own rules: groups
enough, rows enough, finite values). A :class:`vlfair.measures.catalog.Measure` names the statistic it is
computed with; a probe's declaration (:class:`vlfair.probes.declared.Declared`) gives one to each metric."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from vlfair.defaults import MIN_GROUP_SIZE

if TYPE_CHECKING:  # vlfair.paired (scipy) is imported where a metric is evaluated: probes declare at import
    from vlfair import paired

Group = Any  # a value of a metric's group column (a tuple of values for several columns)
Function = Callable[[Any], np.ndarray]  # (b,) values of a statistic from a row set's paired.Moments


class RowSetData(Protocol):
    """A row set's data as a statistic asks where it is defined (:class:`vlfair.probes.declared`'s row sets)."""

    codes: np.ndarray

    @property
    def code(self) -> Mapping[Group, int]: ...  # each group's code

    @property
    def counts(self) -> Mapping[Group, int]: ...  # each present group's rows

    def values(self, column: str) -> np.ndarray: ...

    def finite(self, column: str, groups: Sequence[Group] | None = None) -> bool: ...


@dataclasses.dataclass(frozen=True)
class Mean:
    """One group's mean of ``column`` (``group`` None: the mean over every row, whatever its group),
    times ``scale`` (100: a probability read as a percentage)."""

    column: str
    group: Group = None
    scale: float = 1.0

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    def function(self, at: Mapping[str, int], code: Mapping[Group, int]) -> Function:
        from vlfair import paired

        j = at[self.column]
        mean = paired.pooled_mean(j) if self.group is None else paired.group_mean(code[self.group], j)
        return lambda m: self.scale * mean(m)  # (x 1.0 is exact)

    def defined(self, data: RowSetData) -> bool:
        return (sum(data.counts.values()) if self.group is None else data.counts.get(self.group, 0)) > 0


@dataclasses.dataclass(frozen=True)
class Range:
    """The largest minus the smallest group mean of ``column`` among ``groups`` (None: every group of
    the row set): a gap. Defined for 2 groups or more, each holding ``MIN_GROUP_SIZE`` rows, as the
    measures' gaps are."""

    column: str
    groups: tuple[Group, ...] | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    def function(self, at: Mapping[str, int], code: Mapping[Group, int]) -> Function:
        from vlfair import paired

        j = at[self.column]
        if self.groups is None:
            return paired.mean_range(j)
        index = np.asarray([code[g] for g in self.groups], dtype=np.int64)

        def statistic(m: paired.Moments) -> np.ndarray:
            means = m.means[:, index, j]
            return np.nanmax(means, axis=1) - np.nanmin(means, axis=1)
        return statistic

    def defined(self, data: RowSetData) -> bool:
        sizes = [data.counts.get(g, 0) for g in (data.counts if self.groups is None else self.groups)]
        return len(sizes) >= 2 and min(sizes) >= MIN_GROUP_SIZE and data.finite(self.column, self.groups)


@dataclasses.dataclass(frozen=True)
class ColumnRange:
    """The largest minus the smallest of several ``columns``' means over the rows (one group): a gap
    between quantities measured on the same rows, such as one accuracy per language; defined for rows
    enough for a mean (``MIN_GROUP_SIZE``), as ``cross_lingual_gap`` requires of each language."""

    columns: tuple[str, ...]

    def function(self, at: Mapping[str, int], code: Mapping[Group, int]) -> Function:

        picked = [at[column] for column in self.columns]

        def statistic(m: paired.Moments) -> np.ndarray:
            means = m.means[:, 0, picked]
            return means.max(axis=1) - means.min(axis=1)
        return statistic

    def defined(self, data: RowSetData) -> bool:
        return len(data.counts) == 1 and sum(data.counts.values()) >= MIN_GROUP_SIZE


@dataclasses.dataclass(frozen=True)
class Ratio:
    """One group's mean of ``column`` over another's (a bias ratio); defined where ``bias_ratio``
    accepts the rows: both groups present, every group holding ``MIN_GROUP_SIZE`` rows, no value below
    0 (a ratio of means of values that cancel says nothing) and a reference mean other than 0."""

    column: str
    numerator: Group
    denominator: Group

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    def function(self, at: Mapping[str, int], code: Mapping[Group, int]) -> Function:
        from vlfair import paired

        return paired.mean_ratio(code[self.numerator], code[self.denominator], at[self.column])

    def defined(self, data: RowSetData) -> bool:
        if self.numerator not in data.counts or self.denominator not in data.counts:
            return False
        values = data.values(self.column)
        return (min(data.counts.values()) >= MIN_GROUP_SIZE and data.finite(self.column)
                and not (values < 0).any() and values[data.codes == data.code[self.denominator]].mean() != 0)


@dataclasses.dataclass(frozen=True)
class FStatistic:
    """The one-way ANOVA F of ``column`` across the groups (``welch``: Welch's F, for unequal variances); defined
    for 2 groups or more."""

    column: str
    welch: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    def function(self, at: Mapping[str, int], code: Mapping[Group, int]) -> Function:
        from vlfair import paired

        return paired.f_statistic(at[self.column], welch=self.welch)

    def defined(self, data: RowSetData) -> bool:
        return len(data.counts) >= 2 and min(data.counts.values()) >= MIN_GROUP_SIZE and data.finite(self.column)


@dataclasses.dataclass(frozen=True)
class Custom:
    """A probe's own statistic of some ``columns``: ``make(at, code)`` returns its function of the
    row set's moments (``at``: each column's index; ``code``: each group's); with ``values``, of the
    rows' (b, n, k) values (a maximum over rows); with an ``engine`` (:class:`vlfair.paired.RowSet`'s),
    of whatever that engine computes (a ranking re-ranked in every resample), its resamples shifted
    onto the point values where ``recentre``."""

    columns: tuple[str, ...]
    make: Callable[[Mapping[str, int], Mapping[Group, int]], Callable[[Any], np.ndarray]]
    values: bool = False
    engine: Callable[..., Any] | None = None
    recentre: bool = False

    def function(self, at: Mapping[str, int], code: Mapping[Group, int]) -> Callable[[Any], np.ndarray]:
        return self.make(at, code)

    def defined(self, data: RowSetData) -> bool:
        return True


@dataclasses.dataclass(frozen=True)
class Pooled:
    """One statistic measured with several phrasings (``statistics``: the same statistic of each phrasing's
    column, the study's first), pooled: the mean of the phrasings' values. Its interval is a two-level bootstrap:
    each resample draws the rows (as the members' row set does, shared by every phrasing, since each phrasing
    scores the same images) and, apart, the phrasings (``len(statistics)`` of them with replacement), and takes the
    mean over the drawn phrasings of their statistics on the drawn rows. Its details say in how many phrasings
    the metric's own interval excludes the neutral value on the pooled value's side (``holds_in``; None for a
    measure never below its neutral 0, a gap, whose interval never holds it: its probe's test says). Evaluated
    on one run (:func:`evaluate`); ``vlfair compare`` compares the phrasings one by one."""

    statistics: tuple[Statistic, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for statistic in self.statistics for c in statistic.columns))


Statistic = Mean | Range | ColumnRange | Ratio | FStatistic | Custom


__all__ = ["ColumnRange", "Custom", "FStatistic", "Function", "Group", "Mean", "Pooled", "Range", "Ratio", "RowSetData",
           "Statistic"]
