"""What a probe hands to the report: its numbers (:class:`Metric`) and its tables (:class:`Table`).

This module sits below both ``vlfair.probes`` (which fills these) and ``vlfair.report`` (which
writes them), so neither imports the other for its types (the layer contract in pyproject.toml).
:func:`metric_from` and :func:`metrics_per` are the one way a measure's result becomes metrics.

Results are typed inside the library (:class:`Metric`, :class:`Table`, ``ProbeRun``, the measures'
results) and plain dicts at the JSON boundary (results.json, the evaluate modules' output).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from vlfair.facts import Facts

if TYPE_CHECKING:  # pandas is imported by whoever builds a table; probes' descriptions load without it
    import pandas as pd

# DataFrame.attrs keys a table may still carry (the form before Table; read by Table.of)
MARK_COLUMN_MAX = "mark_column_max"
FOOTNOTES = "footnotes"


def metric_key(name: str, subset: Mapping[str, Any]) -> tuple[str, str]:
    """What makes a metric one metric to every reader (a board's row, a comparison's, a Hub entry's task id): its
    name and its subset as one text, the keys sorted. A run holds each key once."""
    import json

    return name, json.dumps(dict(subset), sort_keys=True, ensure_ascii=False, default=str)


def repeated(keys: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """The first :func:`metric_key` met a second time, or None."""
    seen: set[tuple[str, str]] = set()
    for key in keys:
        if key in seen:
            return key
        seen.add(key)
    return None


@dataclasses.dataclass
class Metric:
    """One number of a probe: ``name`` is the measure, ``subset`` says what it was computed on."""

    name: str
    subset: dict[str, Any]
    value: float | None
    ci: list[float] | None = None
    p_value: float | None = None
    details: dict[str, Any] = dataclasses.field(default_factory=dict)
    # [under, over]: the smallest deviations from the neutral value this run's design detects with 80 % power
    # (``stats.interval_detectable``), None on a side the metric cannot take; None without a neutral value or interval
    mde: list[float | None] | None = None
    # the run's verdict on it (vlfair.verdicts.judge): its rule, raw p, Holm's p, BH's q, detected, on which side;
    # None for a level, or before the run judged it
    verdict: dict[str, Any] | None = None
    # the facts of the measure it is an instance of, where its declaration named them (results.json keeps
    # them once per metric name, under ``measures``; None: the catalog's, or its probe's own)
    facts: Facts | None = dataclasses.field(default=None, repr=False, compare=False)

    def record(self) -> dict[str, Any]:
        """The metric as results.json lists it (its facts are kept once per name, apart)."""
        return {field.name: copy.deepcopy(getattr(self, field.name)) for field in dataclasses.fields(self)
                if field.name != "facts"}


@dataclasses.dataclass
class Table:
    """A table of a report: its data and how to show it. Rendered to CSV, Markdown and HTML by
    ``vlfair.report.tables`` (one number formatter for all three)."""

    frame: pd.DataFrame
    mark_column_max: bool = False  # bold each column's largest value, as the studies print
    footnotes: list[str] = dataclasses.field(default_factory=list)  # sentences under the table (why a cell is NaN)

    @classmethod
    def of(cls, table: Table | pd.DataFrame) -> Table:
        """A Table as it is; a DataFrame with what its ``attrs`` ask for (the older form)."""
        if isinstance(table, Table):
            return table
        return cls(table, bool(table.attrs.get(MARK_COLUMN_MAX)), list(table.attrs.get(FOOTNOTES, [])))


def _pick(result: Mapping[str, Any], field: str | None, key: Any = None) -> Any:
    """``result[field]``, or its entry ``key`` (a group, a stratum); None where the field is None
    (an interval that was not computed) or absent."""
    if field is None:
        return None
    value = result.get(field)
    if key is None or value is None:
        return value
    return value.get(key) if isinstance(value, Mapping) else value[key]


def metric_from(name: str, subset: dict[str, Any], result: Mapping[str, Any], value: str, ci: str | None = None,
                p: str | None = None, details: Iterable[str] = (), *, key: Any = None) -> Metric:
    """The metric ``name`` from a measure's result: its ``value`` field, interval ``ci``, p-value
    ``p`` and the ``details`` fields; with ``key``, each field's entry for that group or stratum
    (``trait_anova``'s F per stratum)."""
    return Metric(name, subset, _pick(result, value, key), _pick(result, ci, key), _pick(result, p, key),
                  {field: _pick(result, field, key) for field in details})


def metrics_per(name: str, subset: dict[str, Any], result: Mapping[str, Any], value: str, ci: str | None = None,
                *, by: str = "group", key: Any = None) -> list[Metric]:
    """One metric per entry of ``result[value]`` (a mapping such as group -> mean; with ``key``,
    of ``result[value][key]``), its subset with ``{by: entry}`` (where ``subset`` already holds
    ``by``, in that place) and its interval from the same entry of ``result[ci]``."""
    values, intervals = _pick(result, value, key), _pick(result, ci, key)
    return [Metric(name, {**subset, by: entry}, number, None if not intervals else intervals.get(entry))
            for entry, number in values.items()]


__all__ = ["FOOTNOTES", "MARK_COLUMN_MAX", "Metric", "Table", "metric_from", "metric_key", "metrics_per", "repeated"]
