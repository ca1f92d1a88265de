"""Metrics declared once: what a probe states of each metric, and the one engine that evaluates
those statements on one run (``analyze``, ``rescore``) and on two runs with shared resamples
(``vlfair compare``).

A :class:`Declared` metric names its rows (positions in samples.parquet), the column whose values
are its groups (or several columns, whose value combinations are the groups: a profession x race
cell), the column whose values are its resampling strata (None: the groups), and one statistic of
the groups' means (:mod:`vlfair.measures.statistics`: :class:`Mean`, :class:`Range`, :class:`Ratio`,
:class:`FStatistic`, or a probe's own :class:`Custom`). It points to the measure it is an instance of (a
:class:`vlfair.measures.catalog.Measure`, or its name in the catalog), whose facts (neutral value, range,
how it is judged; a probe's own ``facts`` first) and reporter are the metric's. Metrics on the same rows, groups and
strata are evaluated together, on the same resamples: one :class:`vlfair.paired.RowSet` each, in
the order they were declared.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vlfair.defaults import BOOTSTRAP, CONFIDENCE, SEED
from vlfair.facts import Facts
from vlfair.measures import reporters
from vlfair.measures.catalog import CATALOG, Measure, facts_of
from vlfair.measures.statistics import ColumnRange, Custom, FStatistic, Group, Mean, Pooled, Range, Ratio, Statistic
from vlfair.outputs import Metric, metric_key, repeated
from vlfair.probes.errors import ProbeError

if TYPE_CHECKING:  # vlfair.paired (scipy) is imported where a metric is evaluated: probes declare at import
    from vlfair import paired
    from vlfair.samples import Samples


@dataclasses.dataclass(frozen=True)
class Declared:
    """One metric: its name and subset, its statistic, the rows it reads (None: every row), its
    groups' column(s) (None: one group), its resampling strata's column (None: the groups), the
    groups' order where it matters (None: sorted), and value columns read with it that its statistic
    does not use (paired, so that vlfair compare checks they are the model's and pairs them)."""

    name: str  # a Measure object (vlfair.measures.catalog), or the name of one the catalog or the probe's facts hold
    subset: Mapping[str, Any]
    statistic: Statistic | Pooled
    rows: np.ndarray | None = None
    group: str | tuple[str, ...] | None = None
    strata: str | None = None
    order: Sequence[Group] | None = None
    also: tuple[str, ...] = ()
    # the column whose values split a run's rows into units resampled apart, as a study's measure is called
    # once per unit (a profession's gaps); None: one unit. One run's intervals read it (evaluate); metrics of
    # other units are row sets of their own
    unit: str | None = None
    # what one run reports beside its value and interval, as its study's measure does (vlfair.measures.reporters)
    report: reporters.Report | None = None
    # the value columns are samples of their own (one language's answers each, on the same images), which one
    # run resamples apart, as a study's measure resamples several languages' samples: each ColumnRange of the
    # row set is one such call, its columns in its order (vlfair.paired.resample_apart); vlfair compare pairs them
    apart: bool = False
    # the measure object (set from ``name`` where a Measure is given there): its facts are the metric's
    measure: Measure | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.name, Measure):  # the measure the metric is an instance of, with its facts
            object.__setattr__(self, "measure", self.name)
            object.__setattr__(self, "name", self.name.name)
        elif not isinstance(self.name, str) or not self.name:
            raise TypeError(f"a declared metric names its measure: a vlfair.measures.catalog.Measure or its name, "
                            f"not {self.name!r}")
        elif self.name in CATALOG:
            object.__setattr__(self, "measure", CATALOG.get(self.name))

    def facts(self, own: Mapping[str, Facts | float] | None = None) -> Facts:
        """Its facts: the probe's ``own`` for its name where it states them, else its measure's (the object it was
        declared with, or the catalog's of its name); a metric of no known measure is a level."""
        if self.measure is None or (own and self.name in own):
            return facts_of(self.name, own)
        return self.measure.facts

    def key(self) -> tuple:
        rows = None if self.rows is None else np.asarray(self.rows, dtype=np.int64).tobytes()
        custom = (self.statistic.values, self.statistic.engine, self.statistic.recentre) \
            if isinstance(self.statistic, Custom) else None
        return (rows, self.group, self.strata, None if self.order is None else tuple(self.order), custom, self.unit,
                self.apart)


def once(metrics: Iterable[Declared]) -> list[Declared]:
    """The declared metrics, each name and subset once: a metric declared twice would be reported twice, and
    every reader would take the two for two metrics (a board ranking a model against itself, a comparison's two
    rows, two Hub entries of one task id), so a second declaration is refused, naming it."""
    found = list(metrics)
    twice = repeated(metric_key(metric.name, metric.subset) for metric in found)
    if twice is not None:
        raise ProbeError(f"metric {twice[0]!r} of subset {twice[1]} is declared twice (the probe's declare() states "
                         "it more than once): declare each metric, a name and a subset, once")
    return found


def row_sets(samples: Samples, metrics: Iterable[Declared], own: Mapping[str, Facts | float] | None = None
             ) -> list[paired.RowSet]:
    """The declared metrics as row sets (:class:`vlfair.paired.RowSet`): one per distinct rows, groups and
    strata (their metrics share the resamples and relabellings), each holding its metrics that are defined
    on the data in the order declared (a metric of no rows is none); ``own``: the probe's own facts."""
    return [found.row_set() for found in _built(samples, once(metrics), own)]


def _built(samples: Samples, metrics: Iterable[Declared], own: Mapping[str, Facts | float] | None
           ) -> list[_Building]:
    frame = samples.frame
    built: dict[tuple, _Building] = {}
    for position, metric in enumerate(metrics):
        if (metric.rows is not None and not len(metric.rows)) or isinstance(metric.statistic, Pooled):
            continue  # a metric of no rows is none; a pooled one is its phrasings' (:func:`evaluate`)
        key = metric.key()
        if key not in built:
            built[key] = _Building.of(frame, metric)
        built[key].add(metric, own, position)
    return [found for found in built.values() if found.statistics]


@dataclasses.dataclass
class _Building:
    """A row set as it fills: its rows, their group codes and strata, and its columns and statistics so far."""

    rows: np.ndarray
    codes: np.ndarray
    code: _ByLabel  # each group's code
    counts: _ByLabel  # each group's rows (the groups present only)
    strata: np.ndarray | None
    custom: Custom | None  # the first metric's statistic, where a Custom one: how the row set is evaluated
    frame: Any = None
    levels: list[Group] = dataclasses.field(default_factory=list)  # the groups, by code
    units: np.ndarray | None = None  # each row's unit (Declared.unit), None: one
    apart: bool = False  # Declared.apart

    at: dict[str, int] = dataclasses.field(default_factory=dict)
    statistics: list[paired.Statistic] = dataclasses.field(default_factory=list)
    positions: list[int] = dataclasses.field(default_factory=list)  # each statistic's place among the declared
    # each column's values on the rows and its groups' non-finite counts, read once for every metric asking
    _read: dict[str, tuple[np.ndarray, np.ndarray]] = dataclasses.field(default_factory=dict)

    def _column(self, column: str) -> tuple[np.ndarray, np.ndarray]:
        if column not in self._read:
            values = np.asarray(self.frame[column].to_numpy(float)[self.rows])
            self._read[column] = values, np.bincount(self.codes, ~np.isfinite(values), len(self.levels))
        return self._read[column]

    def values(self, column: str) -> np.ndarray:
        """The rows' values of ``column`` (what a statistic's ``defined`` may ask)."""
        return self._column(column)[0]

    def finite(self, column: str, groups: Sequence[Group] | None = None) -> bool:
        """Whether every value of ``column`` in ``groups`` (None: every row) is a finite number: the measures
        refuse a NaN or an infinity (a gap or an F of them says nothing)."""
        bad = self._column(column)[1]
        return not (bad.any() if groups is None else bad[[self.code[g] for g in groups]].any())

    def read_by(self, statistic: Statistic | Pooled) -> int:
        """How many rows ``statistic`` reads: a group's mean its group's, any other every row of the row set."""
        if isinstance(statistic, Mean) and statistic.group is not None:
            return self.counts.get(statistic.group, 0)
        return len(self.rows)

    def why_undefined(self, statistic: Statistic | Pooled) -> str:
        """Why ``statistic`` came out not a number on these rows, as a run's warning says it (the values it reads
        are not all finite numbers, or they do not vary: an F of no spread, a pair read as one text)."""
        for column in statistic.columns:
            bad = int(self._column(column)[1].sum())
            if bad:
                return f"column {column!r} holds {bad} value(s) that are not finite numbers (NaN or infinite)"
        for column in statistic.columns:
            values = self.values(column)
            if values.size and (values == values[0]).all():
                return (f"every one of the {values.size} values of column {column!r} is {values[0]:g}: no spread to "
                        "measure (a model that reads the texts compared as one text gives one value)")
        return f"its statistic is undefined on the values of {', '.join(map(repr, statistic.columns))}"

    @classmethod
    def of(cls, frame: Any, metric: Declared) -> _Building:
        from vlfair import stats

        rows = np.arange(len(frame)) if metric.rows is None else np.asarray(metric.rows, dtype=np.int64)
        if metric.group is None:
            levels: list[Group] = [None]
            codes = np.zeros(rows.size, dtype=np.int64)
        elif metric.order is not None:
            levels = list(metric.order)
            position = _ByLabel((level, i) for i, level in enumerate(levels))
            codes = np.asarray([position[label] for label in _labels(frame, metric.group, rows)], dtype=np.int64)
        else:  # sorted: each column's labels by the measures' rule, the cells in that order
            columns = (metric.group,) if isinstance(metric.group, str) else metric.group
            parts = [stats.encode_groups(frame[c].to_numpy()[rows].tolist(), c) for c in columns]
            cells, codes = np.unique(np.stack([part[1] for part in parts], axis=1), axis=0, return_inverse=True)
            codes = codes.reshape(-1).astype(np.int64)
            levels = [tuple(parts[j][0][k] for j, k in enumerate(cell)) for cell in cells]
            if isinstance(metric.group, str):
                levels = [level[0] for level in levels]
        counts = np.bincount(codes, minlength=len(levels))
        strata = None
        if metric.strata is not None:
            _names, strata = stats.encode_groups(frame[metric.strata].to_numpy()[rows].tolist(), metric.strata)
            # where every stratum holds one row, resampling within them draws nothing (an interval of no
            # width): the rows are resampled together instead
            if np.bincount(strata).max() <= 1:
                strata = np.zeros(rows.size, dtype=np.int64)
        units = None
        if metric.unit is not None:
            units = stats.encode_groups(frame[metric.unit].to_numpy()[rows].tolist(), metric.unit)[1]
        return cls(rows, codes, _ByLabel((level, i) for i, level in enumerate(levels)),
                   _ByLabel((level, int(c)) for level, c in zip(levels, counts) if c), strata,
                   metric.statistic if isinstance(metric.statistic, Custom) else None, frame, levels, units,
                   metric.apart)

    @property
    def grouped(self) -> bool:
        """Whether one run resamples this row set on the measures' stream (:func:`vlfair.paired.resample_groups`):
        rows resampled within their groups, every statistic one of group means (not a probe's own)."""
        return self.strata is None and self.custom is None

    def add(self, metric: Declared, own: Mapping[str, Facts | float] | None, position: int) -> None:
        from vlfair import paired

        assert not isinstance(metric.statistic, Pooled), "a pooled metric is built as its phrasings (evaluate)"
        if not metric.statistic.defined(self):
            return
        self.positions.append(position)
        for column in (*metric.statistic.columns, *metric.also):
            self.at.setdefault(column, len(self.at))
        self.statistics.append(paired.Statistic(metric.name, dict(metric.subset),
                                                metric.statistic.function(self.at, self.code),
                                                metric.facts(own).neutral))

    def row_set(self) -> paired.RowSet:
        from vlfair import paired

        custom = self.custom
        return paired.RowSet(self.rows, tuple(self.at), self.codes, tuple(self.statistics), strata=self.strata,
                             values=bool(custom and custom.values), engine=custom.engine if custom else None,
                             recentre=bool(custom and custom.recentre))


class _ByLabel(Mapping[Group, int]):
    """Group -> a number (its code, its rows), a group named as the measures read labels: by its text
    (1, 1.0 and "1" are one group; a cell by each of its labels)."""

    def __init__(self, items: Iterable[tuple[Group, int]]):
        self._found = {_label(group): number for group, number in items}

    def __getitem__(self, group: Group) -> int:
        return self._found[_label(group)]

    def __iter__(self) -> Iterator[Group]:
        return iter(self._found)

    def __len__(self) -> int:
        return len(self._found)


def _label(group: Group) -> Group:
    from vlfair.stats import label_text

    if group is None:
        return None
    return tuple(map(label_text, group)) if isinstance(group, tuple) else label_text(group)


def too_small(labels: Any, values: Any = None) -> str:
    """Why no gap or F-test is measured across these groups (each row's label; ``values``: each row's value), as
    the measures say it: fewer than 2 groups, a group of fewer rows than a mean needs, or a value that is not a
    finite number ("" where none holds)."""
    from vlfair import stats
    from vlfair.measures.checks import require_sizes

    names, codes = stats.encode_groups(list(labels))
    if len(names) < 2:
        return f"a comparison needs at least 2 groups; there is only {names}"
    try:
        require_sizes(names, np.bincount(codes))
    except ValueError as exc:
        return str(exc)
    if values is not None and not np.isfinite(np.asarray(values, dtype=float)).all():
        return "a value is not a finite number (NaN or infinite)"
    return ""


def _name(metric: Declared, level: Group) -> Any:
    """A group as the measures name a label (its text); a cell by its labels but the unit's, which is the same in
    every cell of a unit."""
    from vlfair.stats import label_text

    if isinstance(metric.group, tuple):
        parts = [label_text(part) for column, part in zip(metric.group, level) if column != metric.unit]
        return parts[0] if len(parts) == 1 else tuple(parts)
    return label_text(level)


def _labels(frame: Any, group: str | tuple[str, ...], rows: np.ndarray) -> list[Group]:
    if isinstance(group, str):
        return frame[group].to_numpy()[rows].tolist()
    return list(zip(*(frame[column].to_numpy()[rows].tolist() for column in group)))


def evaluate(samples: Samples, metrics: Iterable[Declared], own: Mapping[str, Facts | float] | None = None, *,
             bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE, seed: int | None = SEED,
             n_permutations: int = 0) -> list[Metric]:
    """The declared metrics of one run defined on its data, in the order declared, each with its bootstrap
    interval drawn as the measures draw theirs, so that a study's numbers are its measures', draw for draw: a row
    set resampled within its groups, each group's mean apart (:func:`vlfair.paired.resample_groups`, as
    ``vlfair.measures`` resample group means); one whose columns are samples ``apart``, each call's columns as
    its groups (:func:`vlfair.paired.resample_apart`, as ``measures.cross_lingual_gap`` resamples its
    languages); any other (strata of its own, a probe's own statistic) by rows
    within its strata (:func:`vlfair.paired.resample` ``measured``, as ``stats.bootstrap_interval`` draws). A
    metric with a ``report`` gets the details and test its study's measure gives (:mod:`vlfair.measures.reporters`;
    ``n_permutations``: a test's relabellings, 0: no test); a :class:`Pooled` metric its two-level interval,
    where every phrasing's statistic is defined."""
    from vlfair import paired
    from vlfair.measures import null

    declared = once(metrics)
    plain = [m for m in declared if not isinstance(m.statistic, Pooled)]
    # each pooled metric's phrasings, as metrics of their own on its rows, groups and strata (one row set: the
    # same resamples of the rows for every phrasing), after the plain ones
    # (a phrasing the probe declared as a metric of its own is that metric, evaluated once)
    expanded = list(plain)
    owners: dict[int, list[tuple[int, int]]] = {}  # an expanded metric's position -> the (pooled metric, phrasing)s
    declared_as = {(m.key(), m.statistic): i for i, m in enumerate(plain)}
    for position, metric in enumerate(declared):
        if isinstance(metric.statistic, Pooled):
            for k, member in enumerate(metric.statistic.statistics):
                phrasing = dataclasses.replace(metric, statistic=member)
                at = declared_as.get((phrasing.key(), member))
                if at is None:
                    at = len(expanded)
                    expanded.append(phrasing)
                owners.setdefault(at, []).append((position, k))
    where = [position for position, m in enumerate(declared) if not isinstance(m.statistic, Pooled)]
    frame: Any = samples.frame
    found: list[tuple[int, Metric]] = []
    # a pooled metric's position: each phrasing's (row set, value, resamples, the row set's scale, its fewest rows
    # a resample draws from)
    phrased: dict[int, dict[int, tuple[int, float, np.ndarray, float, int]]] = {}
    nulls: dict[int, tuple[float, str | None, float]] = {}  # a pooled metric's test: (p, its method, null mean)
    for index, building in enumerate(_built(samples, expanded, own)):
        row_set = building.row_set()
        values = frame.iloc[row_set.rows, [frame.columns.get_loc(c) for c in row_set.columns]].to_numpy(float)
        means, calls = None, None
        if building.apart:  # each ColumnRange's columns drawn as one measure call draws its languages
            calls = [tuple(row_set.columns.index(c) for c in expanded[p].statistic.columns)
                     for p in building.positions if isinstance(expanded[p].statistic, ColumnRange)]
            point, resampled = paired.resample_apart(row_set, values, calls, bootstrap=bootstrap, seed=seed)
        elif building.grouped:
            # an F's resamples are read only where phrasings pool it (one run's F has no interval, as trait_anova's)
            squares = any(p in owners and isinstance(expanded[p].statistic, FStatistic) for p in building.positions)
            point, resampled, means = paired.resample_groups(row_set, values, building.units, bootstrap=bootstrap,
                                                             seed=seed, squares=squares)
        else:
            point, resampled = paired.resample(row_set, values, bootstrap=bootstrap, seed=seed, measured=True)
        # the fewest rows a resample draws from, where a small-sample interval widens (null.interval_of)
        rows = len(row_set.rows) if building.apart else paired.smallest_stratum(row_set, building.units)
        drawn = resampled  # as drawn, for a reporter; an interval of recentred resamples where the row set asks
        facts = [expanded[position].facts(own) for position in building.positions]
        tested = [j for j, found in enumerate(facts) if found.judged == "test"]
        if bootstrap and row_set.recentre:
            resampled = paired.recentred(resampled, point)
        elif bootstrap and tested:  # a bounded statistic's resamples moved onto its value (null.interval_of)
            resampled = resampled.copy()
            resampled[:, tested] = paired.recentred(resampled[:, tested], point[tested])
        scale = null.scale_of(values)
        measured: dict[int, Metric] = {}  # this row set's plain metrics, by their place in the row set
        for j, (position, statistic) in enumerate(zip(building.positions, row_set.statistics)):
            for pooled, k in owners.get(position, []):
                phrased.setdefault(pooled, {})[k] = (index, float(point[j]), resampled[:, j], scale, rows)
            if position >= len(plain):  # a phrasing only pooled
                continue
            metric = expanded[position]
            # a value of one row has no interval: each resample draws that row again (an interval of no width)
            interval = None if building.read_by(metric.statistic) < 2 else \
                null.interval_of(resampled[:, j], float(point[j]), confidence, facts[j], rows)
            value = Metric(statistic.name, statistic.subset, float(point[j]), interval, facts=facts[j])
            # its own reporter, else its measure's (a gap's groups and test), which adds fields but keeps the value
            # the engine gives (the one compare and tiers read), not its own recomputation from plain means
            report = metric.report or (metric.measure.reports(metric.statistic) if metric.measure else None)
            if report is not None:
                engine = value.value
                report(value, reporters.Reading(
                    values, building.codes, building.levels, building.code, building.at, means, drawn[:, j],
                    functools.partial(_name, metric), confidence, n_permutations, seed), metric.statistic)
                if metric.report is None:
                    value.value = engine
            if value.value is None or not np.isfinite(value.value):
                value.details.setdefault("null_because", building.why_undefined(metric.statistic))
            null.note_widening(value, facts[j], rows, interval)
            null.cut_to_range(value, facts[j])
            null.snap(value, facts[j].neutral, scale)
            measured[j] = value
            found.append((where[position], value))
        if n_permutations:
            nulls.update(_tested(building, row_set, values, point, facts,
                                 [expanded[p].statistic for p in building.positions], calls, measured, owners,
                                 declared, own, n_permutations, np.random.SeedSequence(seed, spawn_key=(5, index))))
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[3])  # apart from the rows' draws
    for position, by_phrasing in phrased.items():
        metric = declared[position]
        assert isinstance(metric.statistic, Pooled)
        count = len(metric.statistic.statistics)
        if len(by_phrasing) < count:  # a phrasing whose statistic the data do not define: nothing to pool
            continue
        assert len({row_set for row_set, *_ in by_phrasing.values()}) == 1, "a pooled metric's phrasings share rows"
        made = _pooled(metric, [by_phrasing[k] for k in range(count)], metric.facts(own), confidence, rng)
        if position in nulls:  # its test against no difference (_tested)
            _set_test(made, *nulls[position])
        found.append((position, made))
    return [metric for _, metric in sorted(found, key=lambda pair: pair[0])]


def _tested(building: _Building, row_set: paired.RowSet, values: np.ndarray, point: np.ndarray, facts: list[Facts],
            statistics: list[Any], calls: list[tuple[int, ...]] | None, measured: dict[int, Metric],
            owners: dict[int, list[tuple[int, int]]], declared: list[Declared],
            own: Mapping[str, Facts | float] | None, n_permutations: int, seed: np.random.SeedSequence
            ) -> dict[int, tuple[float, str | None, float]]:
    """The test against no difference (:mod:`vlfair.measures.null`) of a row set's metrics judged by one: each
    plain one's p-value where its measure gave none and its null mean (its ``excess``), set on it; and each pooled
    metric's whose phrasings all lie in this row set, returned by the pooled metric's position (``statistics``:
    the row set's declared ones; ``calls``: the columns of each measure call of a row set of samples apart, whose
    relabellings permute each row's columns). One run's F keeps its F-test (its effect size says what a null mean
    would)."""
    from vlfair import paired
    from vlfair.measures import null

    plain = [j for j, metric in measured.items() if facts[j].judged == "test"
             and not isinstance(statistics[j], FStatistic) and metric.value is not None and np.isfinite(metric.value)]
    members: dict[int, dict[int, int]] = {}  # pooled position -> phrasing -> its place in the row set
    for j, position in enumerate(building.positions):
        for owner, k in owners.get(position, []):
            members.setdefault(owner, {})[k] = j
    pooled = [(position, [found[k] for k in sorted(found)]) for position, found in members.items()
              if declared[position].facts(own).judged == "test"
              and len(found) == len(declared[position].statistic.statistics)]  # type: ignore[union-attr]
    if (not plain and not pooled) or (calls is None and len(building.counts) < 2):
        return {}  # nothing tested; or one group, which no relabelling changes (epsilon has no such test)

    def derived(found: np.ndarray) -> np.ndarray:
        return np.concatenate([found[:, plain], *(found[:, js].mean(axis=1, keepdims=True) for _, js in pooled)],
                              axis=1)

    quantities = [facts[j] for j in plain] + [declared[position].facts(own) for position, _ in pooled]
    observed = derived(point[None])[0]
    asked = [measured[j].p_value is None for j in plain] + [True] * len(pooled)
    if calls is not None:
        count = float(len(row_set.rows))
        shift = null.column_means(values)

        def of_means(means: np.ndarray) -> np.ndarray:
            moments = paired.Moments(np.full((len(means), 1), count), (means - shift)[:, None, :] * count,
                                     np.full((len(means), 1, means.shape[1]), np.nan), shift)
            return derived(paired.statistics(row_set, moments))
        draw = null.columns_drawn(values, calls, of_means)
    else:
        keys = null.relabelling_keys(building.strata, building.units, len(row_set.rows))
        draw = null.rows_drawn(paired.relabeller(row_set, values), keys, derived)
    neutral = np.asarray([q.neutral for q in quantities], dtype=float)
    sides = np.asarray([[-1.0 in q.sides, 1.0 in q.sides] for q in quantities])
    found = null.test(draw, observed, neutral, sides, np.asarray(asked), permutations=n_permutations, seed=seed,
                      rows=len(row_set.rows))
    for i, j in enumerate(plain):
        metric = measured[j]
        if asked[i]:
            _set_test(metric, float(found.p_value[i]), found.method[i], float(found.mean[i]))
        else:
            metric.details.update(null.exceeding(metric.value, metric.ci, float(found.mean[i])))
    return {position: (float(found.p_value[len(plain) + i]), found.method[len(plain) + i],
                       float(found.mean[len(plain) + i])) for i, (position, _) in enumerate(pooled)}


def _set_test(metric: Metric, p: float, method: str | None, mean: float) -> None:
    """A metric's test against no difference and what it exceeds (:func:`_tested`)."""
    from vlfair.measures import null

    metric.p_value = None if not np.isfinite(p) else p
    metric.details.update({"log10_p_value": None if metric.p_value is None else float(np.log10(metric.p_value)),
                           "p_value_method": method, **null.exceeding(metric.value, metric.ci, mean)})


def _pooled(metric: Declared, phrasings: list[tuple[int, float, np.ndarray, float, int]], facts: Facts,
            confidence: float, rng: np.random.Generator) -> Metric:
    """A :class:`Pooled` metric from its phrasings' values and resamples on shared resamples of the rows: each
    resample's phrasings drawn with replacement (``rng``), the mean over them its value."""
    from vlfair.measures import null

    neutral = None if facts.lower_is_less_biased else facts.neutral
    values = np.asarray([value for _, value, *_ in phrasings])
    rows = min(fewest for *_, fewest in phrasings)  # one row set: the same for every phrasing
    value = float(values.mean())
    ci = None
    resampled = np.stack([found for _, _, found, *_ in phrasings], axis=1)  # (b, phrasings)
    if resampled.size:
        draws = rng.multinomial(len(phrasings), np.full(len(phrasings), 1 / len(phrasings)), size=len(resampled))
        with np.errstate(invalid="ignore"):
            ci = null.interval_of((resampled * draws).sum(axis=1) / len(phrasings), value, confidence, facts, rows)
    holds = None
    if neutral is not None and ci is not None:
        side = np.sign(value - neutral)
        intervals = [null.interval_of(found, phrased, confidence, facts, rows) for _, phrased, found, *_ in phrasings]
        # a phrasing holds the pooled verdict where its own interval excludes the neutral value on the same side
        holds = sum(i is not None and side != 0 and (i[0] > neutral if side > 0 else i[1] < neutral)
                    for i in intervals)
    pooled = Metric(metric.name, dict(metric.subset), value, ci,
                    details={"phrasings": len(phrasings), "phrasing_values": values.tolist(), "holds_in": holds},
                    facts=facts)
    null.note_widening(pooled, facts, rows, ci)
    null.cut_to_range(pooled, facts)
    null.snap(pooled, facts.neutral, max(scale for *_, scale, _ in phrasings))
    return pooled


@dataclasses.dataclass(frozen=True)
class Member:
    """A declared metric defined on a run's data, and the samples it reads: their positions in
    samples.parquet (a group's mean: its group's rows; any other statistic: every row of its row set)
    and the value columns its statistic reads."""

    name: str
    subset: Mapping[str, Any]
    rows: np.ndarray
    columns: tuple[str, ...]
    group: str | tuple[str, ...] | None


def members(samples: Samples, metrics: Iterable[Declared], own: Mapping[str, Facts | float] | None = None
            ) -> list[Member]:
    """Each declared metric defined on the data with the samples it reads (a run's instance-level
    records), in the order declared; a metric whose statistic re-ranks the rows (an ``engine``) reads
    every row's whole ranking and is left out."""
    declared = [m for m in once(metrics) if not (isinstance(m.statistic, Custom) and m.statistic.engine is not None)]
    found: list[tuple[int, Member]] = []
    for building in _built(samples, declared, own):
        for position in building.positions:
            metric = declared[position]
            rows = building.rows
            if isinstance(metric.statistic, Mean) and metric.statistic.group is not None:
                rows = rows[building.codes == building.code[metric.statistic.group]]
            columns = tuple(dict.fromkeys((*metric.statistic.columns, *metric.also)))
            found.append((position, Member(metric.name, metric.subset, rows, columns, metric.group)))
    return [member for _, member in sorted(found, key=lambda pair: pair[0])]


def table(metrics: Sequence[Metric]) -> Any:
    """The metrics as a table: one row each, its subset's entries as columns, then value and interval."""
    import pandas as pd

    return pd.DataFrame([{"metric": m.name, **m.subset, "value": m.value,
                          "CI low": m.ci[0] if m.ci else None, "CI high": m.ci[1] if m.ci else None}
                         for m in metrics]).set_index("metric")


__all__ = ["ColumnRange", "Custom", "Declared", "FStatistic", "Mean", "Member", "Pooled", "Range", "Ratio", "Statistic",
           "evaluate", "members", "once", "row_sets", "table", "too_small"]
