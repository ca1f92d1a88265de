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
spread does not go as 1 / sqrt(n)) are refused. ``tests/test_power.py`` checks the predicted power against
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

from vlfair.compare.tested_power import PowerError, tested_design
from vlfair.defaults import BOOTSTRAP, CONFIDENCE, SEED
from vlfair.facts import Facts
from vlfair.stats import DETECTION_POWER, detection_power, expanded_confidence, smallest_detectable

POWER = DETECTION_POWER  # the power an audit plans for


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
            raise PowerError(f"no number of images detects a deviation of {effect:g} with {power:.0%} power")
        if short(low) > 0:
            return math.exp(low)
        return math.exp(brentq(short, low, high))


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
    found = []
    for row_set in row_sets(samples, probe.declare(samples), probe.facts):
        for j, statistic in enumerate(row_set.statistics):
            found.append((statistic.name, json.dumps(statistic.subset, sort_keys=True)))
            if statistic.name != metric or found[-1][1] != wanted:
                continue
            if facts.neutral is None:
                raise PowerError(f"{metric} is a level, not a bias measure (it has no neutral value to detect a "
                                 "deviation from)")
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
    subsets = [s for name, s in found if name == metric]
    raise PowerError(f"{metric} has no subset {wanted}; its subsets: {'; '.join(subsets[:8])}"
                     + (f"; and {len(subsets) - 8} more" if len(subsets) > 8 else ""))


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
    """An effect ``power`` can plan for: not zero, and on the side of the neutral value the metric can
    take (a gap, an F or epsilon is never below its neutral 0)."""
    if not math.isfinite(effect) or effect == 0:
        raise PowerError(f"--effect {effect:g}: give a deviation from the neutral value {found.neutral:g} other than "
                         "0 (the size of the bias to detect)")
    if effect < 0 and found.facts.lower_is_less_biased:
        raise PowerError(f"--effect {effect:g}: {found.metric} is never below its neutral value {found.neutral:g}; "
                         "give a positive deviation")
    if getattr(found, "effect_name", None) == "eta squared" and not 0 < effect < 1:
        raise PowerError(f"--effect {effect:g}: {found.metric}'s effect is eta squared (the share of the score's "
                         "variance between the groups), a number in (0, 1)")


__all__ = ["Design", "POWER", "PowerError", "check_effect", "design"]
