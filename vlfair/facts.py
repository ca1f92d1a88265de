"""What vlfair knows of a metric beside its value: its neutral value, its range, and so the direction a
reader takes it in, and how one run's verdict on it is read. Each measure's are declared once, with the
measure (:mod:`vlfair.measures.catalog`); a run writes them into results.json beside its metrics, and
the leaderboard's ranks, ``vlfair compare``'s "less biased", ``power``, the Hub's eval results and Every
Eval Ever's records read them from the run (:meth:`Facts.from_record`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class Facts:
    """A metric's facts.

    ``neutral``: the value it takes when the groups do not differ; "less biased" means closer to it
    (|value - neutral|), never "higher is better". A level, not a bias (a group's mean score, an
    accuracy), has none: two models differ in it, neither is "less biased". ``low`` and ``high``:
    the range its values can take (None: not bounded, or not known)."""

    neutral: float | None = None
    low: float | None = None
    high: float | None = None
    # how one run's verdict on it is read (DESIGN "Verdicts"): "interval" (a signed statistic whose neutral value
    # lies inside its range: its interval), "test" (a statistic bounded at its neutral value, a gap or an F, whose
    # estimate is biased away from it under no difference: its test against no difference), "level" (no verdict: it
    # has no neutral value). None: by its range, as :func:`rule_of` says
    judged: str | None = None

    def __post_init__(self) -> None:
        if self.judged is None:
            object.__setattr__(self, "judged", rule_of(self.neutral, self.low, self.high))
        if self.neutral is None and self.judged != "level":
            object.__setattr__(self, "judged", "level")  # a level is never judged, whatever was said
        if self.judged not in JUDGED:
            raise ValueError(f"judged is {self.judged!r}, not one of {', '.join(JUDGED)}")
        if self.judged == "level" and self.neutral is not None:
            raise ValueError(f"a level has no neutral value, but neutral is {self.neutral!r}")
        if self.low is not None and self.high is not None and not self.low <= self.high:
            raise ValueError(f"low {self.low!r} is above high {self.high!r}")
        if self.neutral is not None and ((self.low is not None and self.neutral < self.low)
                                         or (self.high is not None and self.neutral > self.high)):
            raise ValueError(f"neutral {self.neutral!r} lies outside the range [{self.low!r}, {self.high!r}]")

    def record(self) -> dict[str, Any]:
        """The facts as results.json keeps them beside a run's metrics (``measures``): what a reader that
        cannot import the probe (a Space, another machine) takes them from."""
        return {"neutral": self.neutral, "low": _bound_record(self.low), "high": _bound_record(self.high),
                "judged": self.judged, "direction": self.direction}

    @classmethod
    def from_record(cls, record: Mapping[str, Any], where: str = "facts") -> Facts:
        """The facts a :meth:`record` holds; a field of the wrong type is a ValueError naming it."""
        neutral = record.get("neutral")
        if neutral is not None and (isinstance(neutral, bool) or not isinstance(neutral, (int, float))
                                    or not math.isfinite(neutral)):
            raise ValueError(f"{where}: neutral is {neutral!r}, not a finite number or null")
        judged = record.get("judged")
        if judged is not None and judged not in JUDGED:
            raise ValueError(f"{where}: judged is {judged!r}, not one of {', '.join(JUDGED)}")
        try:
            return cls(None if neutral is None else float(neutral), _bound_read(record.get("low"), f"{where}: low"),
                       _bound_read(record.get("high"), f"{where}: high"), judged)
        except ValueError as exc:
            raise ValueError(exc if str(exc).startswith(where) else f"{where}: {exc}") from None

    @property
    def lower_is_less_biased(self) -> bool:
        """A bias measure that is never below its neutral 0 (an F, a gap, epsilon): lower is closer."""
        return self.neutral == 0.0 and self.low == 0.0

    @property
    def bounds(self) -> tuple[float, float]:
        """The range as numbers: an open end (None) is -inf or inf."""
        return (-math.inf if self.low is None else self.low, math.inf if self.high is None else self.high)

    @property
    def sides(self) -> tuple[float, ...]:
        """The sides of the neutral value a bias measure can deviate to (-1 under, 1 over): not past an end of
        its range that is the neutral value itself (a gap, an F are never under their 0)."""
        return tuple(side for side, bound in ((-1.0, self.low), (1.0, self.high)) if bound != self.neutral)

    @property
    def direction(self) -> str:
        """How a person reads the metric, in words."""
        if self.lower_is_less_biased:
            return "lower is less biased: 0 is no difference between the groups"
        if self.neutral is not None:
            return f"closer to {self.neutral:g} (no difference between the groups) is less biased"
        return "a level, not a bias measure: neither higher nor lower is better"


JUDGED = ("interval", "test", "level")  # how a run's verdict on a metric is read (Facts.judged)


def rule_of(neutral: float | None, low: float | None, high: float | None) -> str:
    """How a metric of these facts is judged where its measure does not say: a level (no neutral value) not at
    all; a statistic bounded at its neutral value (never on one side of it: a largest gap, NDKL, an F) by a test
    against no difference; any other (a ratio, a signed difference, a skew) by its interval."""
    if neutral is None:
        return "level"
    return "test" if neutral in (low, high) else "interval"


def _bound_record(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return "Infinity" if value > 0 else "-Infinity"  # strict JSON has no infinity (results.json's spelling)


def _bound_read(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if value in ("Infinity", "-Infinity"):
        return math.inf if value == "Infinity" else -math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{field} is {value!r}, not a number, null, 'Infinity' or '-Infinity'")
    return float(value)


__all__ = ["JUDGED", "Facts", "rule_of"]
