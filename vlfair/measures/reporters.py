"""What one run reports beside a declared metric's value and interval: the details and test its study's
measure gives (a gap's groups and permutation p, an F's degrees of freedom, a ratio's group means), so that a
probe's results.json holds the fields its probe reported from its measures before the declarations, number for
number. A measure names its
reporter (:class:`vlfair.measures.catalog.Measure`), a declaration may name another (``Declared.report``);
:func:`vlfair.probes.declared.evaluate` calls it on one run with the metric and
a :class:`Reading` of its row set (``vlfair compare`` reads none of this: it compares values)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

Group = Any  # a value of a metric's group column (a tuple of values for several columns)


class Metric(Protocol):
    """What a reporter sets on the metric it reports (:class:`vlfair.outputs.Metric` is one)."""

    value: float | None
    ci: list[float] | None
    p_value: float | None
    details: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Groups:
    """Some groups of a row set as a measure reads them: their names, their rows' values and codes (0..G-1,
    in the groups' order), each group's mean and rows, and the (B, G) resampled means (None: none drawn)."""

    names: list[Any]
    values: np.ndarray
    codes: np.ndarray
    means: np.ndarray
    counts: np.ndarray
    resampled: np.ndarray | None
    confidence: float

    def as_dict(self, values: Iterable[Any], kind: Callable[[Any], Any] = float) -> dict[Any, Any]:
        return dict(zip(self.names, map(kind, values)))

    def bounds(self, derived: Callable[[np.ndarray], np.ndarray]) -> np.ndarray | None:
        """The (2, ...) percentile interval of ``derived(means)`` over the resampled (B, G) means (None: none
        drawn): a gap's, each group's, each group's gap to another's."""
        from vlfair import stats

        if self.resampled is None:
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            return stats.percentile_interval(derived(self.resampled), self.confidence)

    def interval(self, derived: Callable[[np.ndarray], np.ndarray]) -> list[float] | None:
        """:meth:`bounds` of a (B,) ``derived`` as [low, high]."""
        found = self.bounds(derived)
        return None if found is None else [float(found[0]), float(found[1])]

    def by_group(self, derived: Callable[[np.ndarray], np.ndarray]) -> dict[Any, list[float]] | None:
        """:meth:`bounds` of a (B, G) ``derived`` as [low, high] by group."""
        found = self.bounds(derived)
        return None if found is None else {name: [float(lo), float(hi)] for name, lo, hi in zip(self.names, *found)}

    @property
    def cis(self) -> dict[Any, list[float]] | None:
        """Each group's mean's interval (None: none drawn)."""
        return self.by_group(lambda means: means)

    def details(self) -> dict[str, Any]:
        """The group means, their intervals and the groups' rows, as every measure of group means gives them."""
        return {"group_means": self.as_dict(self.means), "group_means_ci": self.cis,
                "group_counts": self.as_dict(self.counts, int)}

    def extremes(self) -> tuple[int, int]:
        """The highest and the lowest group (groups whose means a rounding could swap: the first named)."""
        from vlfair.measures.ties import best_index

        return int(best_index(self.means)), int(best_index(-self.means))


@dataclasses.dataclass(frozen=True)
class Reading:
    """One run's row set as a reporter reads it: its rows' values (``at``: each column's place), each row's group
    code, the groups by code and each group's code, the resampled group means (None: none drawn) and the metric's
    own resampled values, how a group is named (as the measures name a label), and the interval's and test's
    options."""

    values: np.ndarray  # (n, k)
    codes: np.ndarray  # (n,)
    levels: Sequence[Group]
    code: Mapping[Group, int]
    at: Mapping[str, int]
    means: np.ndarray | None  # (B, G, k)
    resampled: np.ndarray  # (B,) the metric's own resampled values, as drawn (empty: none)
    name: Callable[[Group], Any]
    confidence: float
    n_permutations: int
    seed: int | None

    def groups(self, column: str, groups: Sequence[Group] | None = None) -> Groups:
        """``groups`` (None: every group present) of ``column``, in that order."""
        from vlfair import stats

        j = self.at[column]
        index = (np.asarray([self.code[g] for g in groups], dtype=np.int64) if groups is not None
                 else np.unique(self.codes))
        local = np.full(len(self.levels), -1, dtype=np.int64)
        local[index] = np.arange(index.size)
        inside = local[self.codes] >= 0
        codes, values = local[self.codes[inside]], self.values[inside, j]
        names = [self.name(self.levels[code]) for code in index]
        return Groups(names, values, codes, stats.group_means(values, codes, index.size),
                      np.bincount(codes, minlength=index.size),
                      None if self.means is None else self.means[:, index, j], self.confidence)

    def test(self, values: np.ndarray, codes: np.ndarray, statistic: Callable[..., Any]) -> dict[str, Any]:
        """The permutation test of ``statistic`` (``n_permutations`` relabellings; none: 0) as the measures'
        ``p_fields``: p_value, log10_p_value, p_value_method."""
        from vlfair import stats

        return p_fields(stats.permutation_test(values, codes, statistic, self.n_permutations, self.seed)
                        if self.n_permutations else None)


# (the metric: a vlfair.outputs.Metric, as :class:`Metric` says; its row set; its statistic): sets its fields
Report = Callable[[Any, Reading, Any], None]


def p_fields(test: Any) -> dict[str, Any]:
    """A permutation test (``stats.PermutationResult``; None: none made) as the measures report it: p_value, its
    log10 (finite below float64's 1e-308) and the method that gave it."""
    if test is None:
        return {"p_value": None, "log10_p_value": None, "p_value_method": None}
    return {"p_value": test.p_value, "log10_p_value": test.log10_p_value, "p_value_method": test.method}


def score_gap(metric: Metric, reading: Reading, statistic: Any) -> None:
    """``measures.group_score_gap``'s fields: each group's mean, interval and rows, the most and least associated
    groups, bottom / top with its interval, and the range's permutation test."""
    from vlfair import stats

    found = reading.groups(statistic.column, statistic.groups)
    top, bottom = found.extremes()
    metric.value = float(found.means[top] - found.means[bottom])
    test = reading.test(found.values, found.codes, stats.mean_range)
    metric.p_value = test.pop("p_value")
    ratio = float(found.means[bottom] / found.means[top]) if found.means[top] != 0 else float("nan")
    metric.details = {**found.details(), "top_group": found.names[top], "bottom_group": found.names[bottom],
                      "min_max_ratio": ratio,
                      "min_max_ratio_ci": found.interval(lambda m: m.min(axis=1) / m.max(axis=1)), **test}


def rate_gap(metric: Metric, reading: Reading, statistic: Any) -> None:
    """``measures.group_rate_gap``'s fields: each group's rate, its interval and rows, and the pair of groups the
    gap lies between."""
    found = reading.groups(statistic.column, statistic.groups)
    top, bottom = found.extremes()
    metric.value = float(found.means[top] - found.means[bottom])
    metric.details = {"accuracy": found.as_dict(found.means), "accuracy_ci": found.cis,
                      "counts": found.as_dict(found.counts, int), "gap_pair": [found.names[top], found.names[bottom]]}


def languages(pivot: Group | None) -> Report:
    """``measures.cross_lingual_gap``'s fields, the languages being the groups: each language's accuracy, interval
    and rows, the best and the worst language, and each language's gap to ``pivot`` (the pivot's accuracy minus
    the language's) with its interval (None without a pivot)."""
    def report(metric: Metric, reading: Reading, statistic: Any) -> None:
        found = reading.groups(statistic.column, statistic.groups)
        best, worst = found.extremes()
        metric.value = float(found.means[best] - found.means[worst])
        to_pivot: dict[str, Any] = {"pivot": None, "gap_to_pivot": None, "gap_to_pivot_ci": None}
        if pivot is not None:
            p = found.names.index(reading.name(pivot))
            to_pivot = {"pivot": found.names[p], "gap_to_pivot": found.as_dict(found.means[p] - found.means),
                        "gap_to_pivot_ci": found.by_group(lambda m: m[:, [p]] - m)}
        metric.details = {"accuracy": found.as_dict(found.means), "accuracy_ci": found.cis,
                          "counts": found.as_dict(found.counts, int), "best_language": found.names[best],
                          "worst_language": found.names[worst], **to_pivot}
    return report


def anova(metric: Metric, reading: Reading, statistic: Any) -> None:
    """``measures.trait_anova``'s fields (``stats.one_way_anova``, Welch's where the statistic says: F, its p from
    the F distribution, the degrees of freedom, eta squared, omega squared with its interval (``stats.f_effect``:
    the effect size runs of other sizes and a study compare by); no interval of F), with each group's mean,
    interval and rows."""
    from vlfair import stats

    found = reading.groups(statistic.column)
    result = stats.one_way_anova([found.values[found.codes == i] for i in range(len(found.names))],
                                 welch=statistic.welch)
    metric.value, metric.ci, metric.p_value = result.f_statistic, None, result.p_value
    omega_squared, omega_squared_ci = stats.f_effect(result.f_statistic, result.df_between, result.df_within,
                                                     reading.confidence)
    metric.details = {"log10_p_value": result.log10_p_value, "df_between": result.df_between,
                      "df_within": result.df_within, "eta_squared": result.eta_squared,
                      "omega_squared": omega_squared, "omega_squared_ci": omega_squared_ci, **found.details()}


def ratio(metric: Metric, reading: Reading, statistic: Any) -> None:
    """``measures.bias_ratio``'s fields: every group's mean, interval and rows, and the permutation test of the two
    groups' mean difference."""
    from vlfair import stats

    found = reading.groups(statistic.column)
    top, bottom = found.names.index(reading.name(statistic.numerator)), found.names.index(
        reading.name(statistic.denominator))
    metric.value = float(found.means[top] / found.means[bottom])
    pair = np.isin(found.codes, [top, bottom])
    test = reading.test(found.values[pair], (found.codes[pair] == top).astype(np.int64), stats.mean_difference)
    metric.p_value = test.pop("p_value")
    metric.details = {**found.details(), **test}


def group_rows(metric: Metric, reading: Reading, statistic: Any) -> None:
    """A group's mean with its group's rows under "n" (a study's table cell)."""
    metric.details = {"n": int(np.count_nonzero(reading.codes == reading.code[statistic.group]))}


def top_k(metric: Metric, reading: Reading, statistic: Any) -> None:
    """A top-k statistic's interval as ``measures.top_k_interval`` gives it: the resamples' percentiles moved by
    the value minus their mean, a bound beside a Skew of -inf kept -inf."""
    from vlfair.measures.ranking import top_k_interval

    if reading.resampled.size and metric.value is not None:
        metric.ci = top_k_interval(reading.resampled, metric.value, reading.confidence).tolist()


def by_group(key: str) -> Report:
    """A rate over every group with each group's rate under ``key`` and its rows under "counts", and no interval
    (as a study reports an accuracy beside its gap)."""
    def report(metric: Metric, reading: Reading, statistic: Any) -> None:
        found = reading.groups(statistic.column)
        metric.ci = None
        metric.details = {key: found.as_dict(found.means), "counts": found.as_dict(found.counts, int)}
    return report


__all__ = ["Groups", "Reading", "Report", "anova", "by_group", "group_rows", "languages", "p_fields", "rate_gap",
           "ratio", "score_gap", "top_k"]
