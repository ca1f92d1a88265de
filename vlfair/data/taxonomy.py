"""A researcher's groups: which values an attribute may take, a map folding a dataset's labels into them, and
the bins numeric ages fall into. The studies' lists (the schemas' vocabularies) are the default; a probe's
settings (``groups``, ``labels``, ``age_bins``: :mod:`vlfair.probes.grouping`) give others, so UTKFace's five
races, a skin-tone scale or one's own groups run every probe that reads labels.

Applied where a dataset is brought to its schema (:func:`vlfair.data.conform.conform`): a label is first
looked up in the map (as written, then case and spaces aside), then in the schema's own spellings
(``ALIASES``), then checked against the groups.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from vlfair.data.schemas import FAIRFACE_AGE_BINS, Column, Schema

AGE = "age"
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-|–|to)\s*(\d+)\s*$")
_OPEN = re.compile(r"^\s*(?:more than\s+(\d+)|(\d+)\s*\+|(\d+)\s+and over)\s*$", re.IGNORECASE)


def age_range(label: str) -> tuple[int, float] | None:
    """The ages (whole years, both ends included) a bin's label covers: "20-29" is (20, 29), "more than 70",
    "70+" and "70 and over" (70, inf); None for a label that names no range."""
    text = str(label)
    if found := _RANGE.match(text):
        low, high = int(found.group(1)), int(found.group(2))
        return (low, high) if low <= high else None
    if found := _OPEN.match(text):
        return int(next(g for g in found.groups() if g is not None)), math.inf
    return None


def check_age_bins(bins: Sequence[str]) -> list[str]:
    """The problems of ``bins`` as age bins (each a range, no two overlapping), as sentences; [] when none."""
    problems, ranges = [], []
    for label in bins:
        covered = age_range(label)
        if covered is None:
            problems.append(f"{label!r} is not an age range: write 'LOW-HIGH' (whole years, both included), "
                            "'N+' or 'more than N'")
        else:
            ranges.append((covered, label))
    ranges.sort()
    for (first, a), (second, b) in zip(ranges, ranges[1:]):
        if second[0] <= first[1]:
            problems.append(f"{a!r} and {b!r} overlap: an age must fall in one bin")
    return problems


def numeric_age(value: Any) -> float | None:
    """``value`` as a number of years where it is one (23, 23.0, "23"), else None (a bin's label)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def bin_of(age: float, bins: Sequence[str]) -> str | None:
    """The bin an age in years falls in (a fractional age by its whole years: 29.5 is 29), else None."""
    years = math.floor(age)
    for label in bins:
        covered = age_range(label)
        if covered is not None and covered[0] <= years <= covered[1]:
            return label
    return None


def _key(value: Any) -> str:
    return " ".join(str(value).casefold().split())


@dataclasses.dataclass(frozen=True)
class Taxonomy:
    """``groups``: attribute -> the values it may take (replacing the schema's vocabulary); ``labels``:
    attribute -> {a dataset's label: the group it is}; ``age_bins``: the bins a numeric age falls in (None: the
    schema's, FairFace's nine)."""

    groups: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)
    labels: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    age_bins: Sequence[str] | None = None

    @property
    def is_default(self) -> bool:
        return not self.groups and not self.labels and self.age_bins is None

    def schema(self, schema: Schema) -> Schema:
        """``schema`` with each attribute's vocabulary its groups (the age column's its bins)."""
        columns = []
        for column in schema.columns:
            vocabulary = column.vocabulary
            if column.name in self.groups:
                vocabulary = tuple(self.groups[column.name])
            elif column.name == AGE and self.age_bins is not None and column.vocabulary is not None:
                vocabulary = tuple(self.age_bins)
            columns.append(dataclasses.replace(column, vocabulary=vocabulary))
        return dataclasses.replace(schema, columns=tuple(columns))

    def bins(self, column: Column) -> Sequence[str]:
        """The bins a numeric value of ``column`` falls in (age only; its vocabulary where no bins are set)."""
        if self.age_bins is not None:
            return self.age_bins
        return column.vocabulary if column.vocabulary is not None else FAIRFACE_AGE_BINS

    def fold(self, value: Any, column: Column) -> Any:
        """``value`` as the group it is: through the map (as written, then case and spaces aside), a numeric age
        into its bin; unchanged otherwise (the vocabulary check then names it)."""
        if value is None:
            return None
        mapping = self.labels.get(column.name) or {}
        if value in mapping:
            return mapping[value]
        keyed = {_key(label): group for label, group in mapping.items()}
        if _key(value) in keyed:
            return keyed[_key(value)]
        if column.name == AGE and column.vocabulary is not None and value not in column.vocabulary:
            years = numeric_age(value)
            if years is not None:
                return bin_of(years, self.bins(column)) or value
        return value

    def map_problem(self, column: Column) -> str | None:
        """What is wrong with the map of ``column`` against its groups, or None: a map into no group, or one
        that sends a group's own label to another group (two groups the probe tells apart made one)."""
        mapping = self.labels.get(column.name) or {}
        groups = column.vocabulary
        if groups is None:
            return None
        outside = sorted({str(g) for g in mapping.values() if g not in groups})
        if outside:
            return (f"labels.{column.name} maps to {', '.join(map(repr, outside))}, not one of the groups "
                    f"{list(groups)}")
        merged = sorted(str(label) for label, group in mapping.items() if label in groups and label != group)
        if merged:
            return (f"labels.{column.name} sends the group {merged[0]!r} to {mapping[merged[0]]!r}: two groups the "
                    "probe tells apart would be one; map only labels that are not groups")
        return None


DEFAULT = Taxonomy()

__all__ = ["AGE", "DEFAULT", "Taxonomy", "age_range", "bin_of", "check_age_bins", "numeric_age"]
