"""How small a bias a run could see, and how many images a given one needs (``vlfair power``).

For a metric judged by its interval (DESIGN "Verdicts"), a run "detects" a bias when the interval excludes its
neutral value; one judged by its test has its test's power (:mod:`vlfair.compare.tested_power`). From the run's
samples, the interval the run reports gives the two arms at the run's design (``below`` = value - low end,
``above`` = high end - value: a ratio's interval is not symmetric) and the standard error
``se = (below + above) / 2z`` (z: the normal quantile the interval was read at, widened for small groups:
:func:`vlfair.stats.expanded_confidence`); the metric's bootstrap resamples (its declaration's,
:mod:`vlfair.probes.declared`, with the run's resamples and seed) give the estimate's bias ``b``.
With the estimate read as normal around the deviation plus its bootstrap bias ``b`` (a ratio of means
is biased away from the truth in small groups), a deviation ``d > 0`` from the neutral value is detected
when the estimate lies more than ``below`` above the neutral value (and ``d < 0`` likewise with ``above``):

    power(d, n) = Phi((d + b(n) - below(n)) / se(n)) + Phi((-d - b(n) - above(n)) / se(n)),

each of se, below and above going as sqrt(n_run / n) (the arms also as the widening at n over the run's) and
b as n_run / n (held at the run's below its size), ``n`` the images per group (every group scaled alike: a
mean's, a gap's, a ratio of means' or a rate's spread goes as 1 / sqrt(n)). The smallest
deviation detected with power ``p`` at the run's design (its minimum detectable effect) is the ``d`` at
which the power is ``p`` (without the bias, ``below + Phi^-1(p) * se``), and the images per group a
deviation needs the ``n`` at which it is (both found numerically). A ranking's metrics (top k: their
spread does not go as 1 / sqrt(n)) are refused, and a metric pooled over phrasings (its spread holds the
phrasings'). :func:`answer` gives all ``vlfair power`` says, or why it cannot, before a line is printed: each side's
smallest deviation within the measure's range (Facts.bounds), an effect checked against its sides and range.
``tests/test_power.py`` checks the predicted power against
the share of simulated runs (drawn from the planted world's samples, every group scaled alike) that
detect the world's bias.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from vlfair.compare.tested_power import PowerError, deviation_bounds, tested_design, too_many_images
from vlfair.defaults import BOOTSTRAP, CONFIDENCE, SEED
from vlfair.facts import Facts
from vlfair.stats import DETECTION_POWER, detection_power, expanded_confidence, smallest_detectable

POWER = DETECTION_POWER  # the power an audit plans for
_LEVEL = "{metric} is a level, not a bias measure (it has no neutral value to detect a deviation from)"


@dataclasses.dataclass(frozen=True)
class Design:
    """A metric of a run and what its precision is: its value and neutral value, its standard error at
    the run's images per group, and the confidence of the run's intervals."""

    metric: str
    subset: dict[str, Any]
    value: float
    neutral: float
    se: float
    per_group: float  # the run's images per group (the mean over the metric's groups)
    confidence: float
    below: float  # the interval's arms at the run's design: value - its low end, its high end - value
    above: float
    # the metric's facts as the run recorded them (which sides of the neutral value it can take)
    facts: Facts = Facts()
    bias: float = 0.0  # the estimate's bias at the run's design (the resamples' mean - the value): a ratio's
    # the fewest rows of a stratum the run's resamples draw from (0: not known): its interval is read at a level
    # widened for them (vlfair.stats.expanded_confidence), less so as they grow
    fewest: float = 0.0

    def power(self, effect: float, per_group: float) -> float:
        """The probability that a run of ``per_group`` images per group (every group scaled alike) detects a
        deviation ``effect``: its estimate falls farther from the neutral value than the interval's arm
        on that side (an arm as long as the run's, over the square root of the images' ratio, and over the
        small-sample widening its interval had at the run's design and has at ``per_group``)."""
        scale = math.sqrt(self.per_group / per_group)
        arm = scale * self._widening(per_group) / self._widening(self.per_group)
        # a bias goes as 1 / n; below the run's size it is held at the run's (extrapolated down, it would
        # grow without bound and make a few images look as good as many)
        return detection_power(effect, self.below * arm, self.above * arm, self.se * scale,
                               self.bias * min(scale**2, 1.0))

    def _widening(self, per_group: float) -> float:
        """The normal quantile an interval-judged metric's interval is read at with ``per_group`` images per group."""
        from scipy.stats import norm

        rows = self.fewest * per_group / self.per_group if self.fewest else None
        return float(norm.ppf((1 + expanded_confidence(self.confidence, rows)) / 2))

    def mde(self, power: float = POWER, sign: float = 1.0) -> float:
        """The smallest deviation from the neutral value (on the side of ``sign``) detected with ``power``
        at the run's design.

        Raises:
            PowerError: the estimate's bias alone reaches the interval's arm (no deviation is "smallest").
        """
        found = smallest_detectable(self.below, self.above, self.se, power, sign, self.bias)
        if found is None:
            raise PowerError(f"{self.metric}: at this run's design the estimate's bias alone makes its interval miss "
                             f"the neutral value {power:.0%} of the time: no smallest deviation to read")
        return found

    def images_per_group(self, effect: float, power: float = POWER) -> float:
        """The images per group that detect a deviation ``effect`` with ``power`` (the arms and the
        standard error shrink as 1 / sqrt(n), the bias as 1 / n).

        Raises:
            PowerError: no number of images up to 10^13 times the run's reaches ``power``.
        """
        from scipy.optimize import brentq

        def short(log_n: float) -> float:
            return self.power(effect, math.exp(log_n)) - power

        low, high = math.log(self.per_group) - 20, math.log(self.per_group) + 30
        if short(high) < 0:
            raise PowerError(too_many_images(effect, power, math.exp(high)))
        if short(low) > 0:
            return math.exp(low)
        return math.exp(brentq(short, low, high))

    def no_bias_power(self) -> float:
        """How often the run's interval misses the neutral value with no deviation at all (its false alarms, and
        its estimate's bias): a power at or below it is reached by no deviation."""
        return self.power(0.0, self.per_group)

    @property
    def effect_bounds(self) -> tuple[float, float]:
        """The deviations the metric can take: its range less its neutral value."""
        return deviation_bounds(self.facts, self.neutral)


def design(run_dir: str | Path, metric: str, subset: dict[str, Any] | None = None) -> Design:
    """The :class:`Design` of ``metric`` on ``subset`` in the run in ``run_dir``, from its samples.

    Raises:
        RunError: the run cannot be read.
        PowerError: the metric is not one the run's probe declares there (the ones it does are named),
            it is a level (no neutral value), or it does not vary over the resamples.
    """
    from scipy.stats import norm

    from vlfair import paired
    from vlfair.compare.runs import load_run
    from vlfair.measures.catalog import facts_in
    from vlfair.probes import probe_class
    from vlfair.probes.declared import row_sets

    run = load_run(run_dir)
    probe = probe_class(run.results["probe"])(run.results["probe_settings"])
    facts = facts_in(run.results, metric, probe.facts)  # as the run recorded them (a plugin's own)
    samples = run.samples
    wanted = json.dumps(subset or {}, sort_keys=True)
    frame: Any = samples.frame
    _refuse_pooled(run.results, metric, wanted, facts)
    found = []
    for row_set in row_sets(samples, probe.declare(samples), probe.facts):
        for j, statistic in enumerate(row_set.statistics):
            found.append((statistic.name, json.dumps(statistic.subset, sort_keys=True)))
            if statistic.name != metric or found[-1][1] != wanted:
                continue
            if facts.neutral is None:
                raise PowerError(_LEVEL.format(metric=metric))
            if row_set.engine is not None:
                raise PowerError(f"{metric} ranks the images (its top k): its spread does not shrink as the square "
                                 "root of the images, so no power is read from it")
            if facts.judged == "test":  # its test's power (vlfair.compare.tested_power)
                return _tested(run, probe, samples, row_set, metric, json.loads(wanted), facts)
            reported = [m for m in run.results["metrics"]
                        if m["name"] == metric and json.dumps(m["subset"], sort_keys=True) == wanted]
            ci = reported[0]["ci"] if reported else None
            if ci is None or None in ci:
                raise PowerError(f"{metric} on {wanted} has no interval in the run (an F is judged by its test's "
                                 "p-value): no interval's power to read")
            settings = run.results.get("probe_settings") or {}
            confidence = float(settings.get("confidence", CONFIDENCE))
            value = float(reported[0]["value"])
            below, above = max(value - float(ci[0]), 0.0), max(float(ci[1]) - value, 0.0)
            # the rows its interval was widened for, as the run recorded them (none: read at the level asked)
            fewest = float((reported[0].get("details") or {}).get("ci_rows") or 0)
            z = float(norm.ppf((1 + expanded_confidence(confidence, fewest or None)) / 2))  # the arms' level
            if not below + above > 0:
                raise PowerError(f"{metric} on {wanted} does not vary over the run's resamples (its interval has no "
                                 "width): it has no spread to read a power from")
            values = frame.iloc[row_set.rows, [frame.columns.get_loc(c) for c in row_set.columns]].to_numpy(float)
            point, resampled = paired.resample(row_set, values, bootstrap=int(settings.get("bootstrap", BOOTSTRAP)),
                                               seed=settings.get("seed", SEED))
            finite = resampled[:, j][np.isfinite(resampled[:, j])]
            bias = float(finite.mean() - point[j]) if finite.size else 0.0
            counts = np.bincount(row_set.groups)
            return Design(metric, json.loads(wanted), value, float(facts.neutral), (below + above) / (2 * z),
                          float(counts[counts > 0].mean()), confidence, below, above, facts, bias, fewest)
    names = sorted({name for name, _ in found})
    if metric not in names:
        raise PowerError(f"metric {metric!r} is not one the run's probe ({run.results['probe']}) compares; its "
                         f"metrics: {', '.join(names)}")
    if any(m["name"] == metric and json.dumps(m["subset"], sort_keys=True) == wanted for m in run.results["metrics"]):
        raise PowerError(f"{metric} on {wanted} is in the run's results.json, but its probe ({run.results['probe']}) "
                         "does not measure it from the samples, so vlfair power has no design to read for it")
    subsets = [s for name, s in found if name == metric]
    raise PowerError(f"{metric} has no subset {wanted}; its subsets: {'; '.join(subsets[:8])}"
                     + (f"; and {len(subsets) - 8} more" if len(subsets) > 8 else ""))


def _refuse_pooled(results: dict[str, Any], metric: str, wanted: str, facts: Facts) -> None:
    """A metric the run pooled over its phrasings (its subset's phrasing "pooled", as every probe writes it) is
    refused in plain words, naming its phrasings' subsets: its spread holds the phrasings' own, which more images
    do not shrink, so no power is read from it."""
    from vlfair.probes.phrasings import POOLED

    pooled = next((m for m in results["metrics"] if m["name"] == metric and m["subset"].get("phrasing") == POOLED
                   and json.dumps(m["subset"], sort_keys=True) == wanted), None)
    if pooled is None:
        return
    if facts.neutral is None:
        raise PowerError(_LEVEL.format(metric=metric))
    shared = {key: value for key, value in pooled["subset"].items() if key != "phrasing"}
    phrasings = [json.dumps(m["subset"], sort_keys=True, ensure_ascii=False) for m in results["metrics"]
                 if m["name"] == metric and m["subset"].get("phrasing") != POOLED
                 and {key: value for key, value in m["subset"].items() if key != "phrasing"} == shared]
    raise PowerError(f"{metric} on {wanted} pools the run's {len(phrasings)} phrasings (their values' mean, its "
                     "interval drawn over the phrasings as well as the images): more images do not shrink the "
                     "phrasings' spread, so no power is read from it; ask for one phrasing's: " + "; ".join(phrasings))


def _tested(run: Any, probe: Any, samples: Any, row_set: Any, metric: str, subset: dict[str, Any], facts: Facts
            ) -> Any:
    """The design of a metric the run judges by its test: its declared statistic on its row set's values."""
    declared = next(m for m in probe.declare(samples) if m.name == metric and dict(m.subset) == subset)
    frame: Any = samples.frame
    columns = list(declared.statistic.columns)
    values = frame.iloc[row_set.rows, [frame.columns.get_loc(c) for c in columns]].to_numpy(float)
    reported = [m for m in run.results["metrics"] if m["name"] == metric and m["subset"] == subset]
    confidence = float((run.results.get("probe_settings") or {}).get("confidence", CONFIDENCE))
    value = float(reported[0]["value"]) if reported and reported[0]["value"] is not None else math.nan
    return tested_design(metric, subset, declared.statistic, values, np.asarray(row_set.groups), value, facts,
                         confidence)


def check_effect(found: Any, effect: float) -> None:
    """An effect ``power`` can plan for: finite, not zero, on a side of the neutral value the metric can take (a gap,
    an F or epsilon is never below its neutral 0: Facts.sides) and within its range (a bias ratio is never below 0:
    Facts.bounds), or for an F's eta squared in (0, 1)."""
    if not math.isfinite(effect):
        raise PowerError(f"--effect {effect:g}: give a finite deviation from the neutral value {found.neutral:g} (the "
                         "size of the bias to detect)")
    if effect == 0:
        raise PowerError(f"--effect {effect:g}: give a deviation from the neutral value {found.neutral:g} other than "
                         "0 (the size of the bias to detect)")
    if getattr(found, "effect_name", None) == "eta squared":
        if not 0 < effect < 1:
            raise PowerError(f"--effect {effect:g}: {found.metric}'s effect is eta squared (the share of the score's "
                             "variance between the groups), a number in (0, 1)")
        return
    side = math.copysign(1.0, effect)
    if side not in found.facts.sides:
        raise PowerError(f"--effect {effect:g}: {found.metric} is never {'below' if side < 0 else 'above'} its neutral "
                         f"value {found.neutral:g}; give a {'positive' if side < 0 else 'negative'} deviation")
    low, high = found.facts.bounds
    if not low <= found.neutral + effect <= high:
        reach_low, reach_high = found.effect_bounds
        raise PowerError(f"--effect {effect:g}: {found.metric} would be {found.neutral + effect:g}, outside its range "
                         f"[{low:g}, {high:g}]; a deviation from its neutral value {found.neutral:g} lies in "
                         f"[{reach_low:g}, {reach_high:g}]")


def check_power(found: Any, power: float) -> None:
    """A power ``power`` can plan for: above how often the run's rule finds a bias where there is none (a test's
    alpha; an interval's misses of the neutral value, its estimate's bias included), which no deviation is needed
    to reach (so none is "smallest")."""
    floor = found.no_bias_power()
    if power > floor:
        return
    rule = (f"its test at alpha = {1 - found.confidence:.2g}" if hasattr(found, "effect_name") else
            "its interval at this run's design (its estimate's bias included)")
    raise PowerError(f"--power {power:g}: with no bias at all, {rule} finds one in {floor:.1%} of runs of "
                     f"{found.metric}, so every deviation, even none, is detected with {power:.0%} power; give a "
                     f"power above {floor:.3g}")


@dataclasses.dataclass(frozen=True)
class Smallest:
    """The smallest deviation on one side of the neutral value detected with the power asked, or None where none
    inside the metric's range is (``at_end``: the deviation to its end of the range, and ``end_power`` its power)."""

    side: float
    deviation: float | None
    at_end: float = math.nan
    end_power: float = math.nan


@dataclasses.dataclass(frozen=True)
class Answer:
    """Everything ``vlfair power`` says of a design, computed before a word is printed (all or nothing): the
    smallest deviation on each side the metric can take, and for an effect the images per group it needs and its
    power at the run."""

    power: float
    smallest: tuple[Smallest, ...]
    effect: float | None = None
    needed: float | None = None
    power_at_run: float | None = None


def answer(found: Any, power: float = POWER, effect: float | None = None) -> Answer:
    """The whole answer for ``found`` at ``power`` (and ``effect``), or a :class:`PowerError` saying what cannot be
    answered and why before any of it is given."""
    check_power(found, power)
    if effect is not None:
        check_effect(found, effect)
    sides = sorted(found.facts.sides, reverse=True)  # above, then below (a gap or an F: above only)
    smallest = tuple(_smallest(found, power, side) for side in sides)
    if effect is None:
        return Answer(power, smallest)
    return Answer(power, smallest, effect, found.images_per_group(effect, power),
                  found.power(effect, found.per_group))


def _smallest(found: Any, power: float, side: float) -> Smallest:
    """The smallest deviation on ``side`` detected with ``power``, None where it lies past the metric's range (a
    bias ratio's below 1 past its 0): a deviation the metric cannot take is not one a run could see."""
    low, high = found.effect_bounds
    end = abs(low if side < 0 else high)
    deviation = found.mde(power, side)
    if deviation > end:
        return Smallest(side, None, side * end, found.power(side * end, found.per_group))
    return Smallest(side, deviation)


__all__ = ["Answer", "Design", "POWER", "PowerError", "Smallest", "answer", "check_effect", "check_power",
           "design"]
