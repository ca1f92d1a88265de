"""Every measure vlfair reports, one :class:`Measure` object each, in one registry (:data:`CATALOG`).

A measure is what a metric of a run is an instance of: its name, its facts (neutral value, range, how a
run's verdict on it is read: :class:`vlfair.facts.Facts`), and, where it has them, its public function
(``vlfair.measures.group_score_gap``) and evaluate module (``metrics/group_score_gap``). A probe's
declaration points to the measure object; a plugin adds one with :func:`register_measure` (or the
entry-point group ``vlfair.measures``), and the run writes each metric's facts into results.json, so
that every reader (compare, tiers, power, the leaderboard and its Space, the Hub's eval results and
Every Eval Ever) takes them from the run, even where it cannot import the plugin.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from vlfair.facts import Facts
from vlfair.measures.known import BIASES, DECLARED, LEVELS
from vlfair.registry import Registry, resolve


@dataclasses.dataclass(frozen=True)
class Measure:
    """One measure.

    ``name``: a metric's, in results.json. ``facts``: its neutral value, range and how a run's verdict on it is
    read. ``statistic``: the statistic it is declared with (:mod:`vlfair.measures.statistics`: a :class:`Range`
    for a gap; None: a probe's own), and ``report`` what one run reports beside its value (the details and test
    its study's measure gives: :mod:`vlfair.measures.reporters`), used where a declaration names none.
    ``effect``: the detail that holds its effect size (an F's eta squared). ``function``: its public function
    of arrays (or ``"module:attribute"`` naming it, imported when first called), and ``module`` its evaluate
    module's name (``metrics/<module>``); None: reported by probes only."""

    name: str
    facts: Facts = Facts()
    description: str = ""
    statistic: type | None = None
    report: Callable[..., None] | None = None
    effect: str | None = None
    function: Callable[..., Any] | str | None = dataclasses.field(default=None, compare=False)
    module: str | None = None

    @property
    def neutral(self) -> float | None:
        return self.facts.neutral

    def callable(self) -> Callable[..., Any]:
        """The measure's function of arrays, imported where it is named by text (a TypeError where it has none)."""
        if self.function is None:
            raise TypeError(f"measure {self.name!r} is reported by probes only: it has no function of arrays")
        return resolve(self.function)

    def compute(self, *args: Any, **options: Any) -> Any:
        """The measure's function on ``args`` (a TypeError for a measure that has none)."""
        return self.callable()(*args, **options)

    def reports(self, statistic: Any) -> Callable[..., None] | None:
        """The reporter of a metric declared with ``statistic`` and no reporter of its own: the measure's, where
        the statistic is the measure's kind (a gap's details are a Range's)."""
        if self.report is not None and self.statistic is not None and isinstance(statistic, self.statistic):
            return self.report
        return None


def _check(measure: Measure) -> None:
    if not measure.name.isidentifier():
        raise ValueError(f"a measure's name is a Python identifier (it names a metric and a module), not "
                         f"{measure.name!r}")


CATALOG: Registry[Measure] = Registry("measure", Measure, entry_points="vlfair.measures",
                                      name_of=lambda measure: measure.name, check=_check)


def register_measure(measure: Measure, *, replace: bool = False) -> Measure:
    """Add ``measure`` to the catalog (another of its name is an error unless ``replace``); returns it."""
    return CATALOG.add(measure, replace=replace)


# ---- the built-in measures ---------------------------------------------------------------------
_EFFECTS = {"trait_anova": "omega_squared"}  # an F grows with the images; its effect size does not
_FUNCTIONS = {  # the measures users call: each a function of arrays (named in full: a test reads these names)
    "bias_ratio": "vlfair.measures.groups:bias_ratio",
    "group_score_gap": "vlfair.measures.groups:group_score_gap",
    "trait_anova": "vlfair.measures.groups:trait_anova",
    "word_influence": "vlfair.measures.groups:word_influence",
    "cross_lingual_gap": "vlfair.measures.groups:cross_lingual_gap",
    "group_rate_gap": "vlfair.measures.groups:group_rate_gap",
    "individual_fairness": "vlfair.measures.groups:individual_fairness",
    "retention": "vlfair.measures.groups:retention",
    "ranking_skew": "vlfair.measures.ranking:ranking_skew",
    "bias_difference": "vlfair.measures.comparison:bias_difference",
}
for _name, _facts in LEVELS.items():
    register_measure(Measure(_name, _facts))
for _name, (_facts, _what) in BIASES.items():
    _statistic, _report = DECLARED.get(_name, (None, None))
    _function = _FUNCTIONS.get(_name)
    register_measure(Measure(_name, _facts, _what, _statistic, _report, _EFFECTS.get(_name), _function,
                             _name if _function else None))


class _Functions(Mapping[str, Callable[..., Any]]):
    """Each measure users call by its evaluate module's name -> its function (imported when first read)."""

    def __getitem__(self, name: str) -> Callable[..., Any]:
        measure = CATALOG.get(name, None)
        if measure is None or measure.module is None or measure.function is None:
            raise KeyError(name)
        return measure.callable()

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, measure in CATALOG.items() if measure.module is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


MEASURES: Mapping[str, Callable[..., Any]] = _Functions()  # what vlfair.measures.MEASURES was: module -> function


def facts_of(metric: str, own: Mapping[str, Facts | float] | None = None) -> Facts:
    """The facts of ``metric``: a probe's ``own`` (its facts, or bare neutral values) first, then the
    measure's in the catalog; a metric neither knows is a level without a known range."""
    found = (own or {}).get(metric)
    known = CATALOG.get(metric).facts if metric in CATALOG else Facts()
    if isinstance(found, Facts):
        return found
    if found is not None:  # a plugin's neutral value alone
        return dataclasses.replace(known, neutral=float(found),
                                   judged=None if known.judged == "level" else known.judged)
    return known


def neutral_value(metric: str, own: Mapping[str, Facts | float] | None = None) -> float | None:
    """The neutral value of ``metric`` (None for a level such as an accuracy)."""
    return facts_of(metric, own).neutral


def facts_in(results: Mapping[str, Any], metric: str, own: Mapping[str, Facts | float] | None = None) -> Facts:
    """The facts of ``metric`` as the run ``results`` recorded them (results.json's ``measures``); a run
    written before runs carried them, or a metric it holds none for, reads ``own`` (its probe's facts) and
    the catalog's (:func:`facts_of`)."""
    measures = results.get("measures") if isinstance(results, Mapping) else None
    recorded = measures.get(metric) if isinstance(measures, Mapping) else None
    if isinstance(recorded, Mapping):
        return Facts.from_record(recorded, f"results.json measures.{metric}")
    return facts_of(metric, own)


__all__ = ["CATALOG", "MEASURES", "Measure", "facts_in", "facts_of", "neutral_value", "register_measure"]
