"""``vlfair power`` for a metric judged by a test (DESIGN "Verdicts"): a statistic bounded at its neutral value,
whose run detects a bias when its test's p-value is below 1 - confidence.

- An F (``trait_anova``): the noncentral F. With G groups of ``n`` images and an effect of eta squared e, the
  F-test's F has noncentrality lambda = N e / (1 - e) (N = G n), and the power is P(F' > F_crit) with F_crit the
  F distribution's 1 - alpha quantile on (G - 1, N - G) degrees of freedom (Cohen's f^2 = e / (1 - e)). The
  effect is eta squared, the effect size the run reports beside its F: F and p grow with the images, e does not.
- A largest gap between group means (a score's, a rate's): by simulation from the run's samples. Each group's
  mean is drawn normal around its population mean with the run's spread in that group over the square root of
  ``n`` (a rate's spread its p (1 - p)); the test's critical value is the 1 - alpha quantile of the largest gap
  with every population mean equal (what the permutation test compares with), and a deviation ``d`` is one group
  ``d`` above the others. The same draws serve every ``d`` and ``n`` (the power is smooth in both, and its inverses
  are found numerically). Refused where the run's scores do not vary within the groups, or where most of a
  group's scores sit at one end of their range (clipped: a CLIPScore's 0), where no normal reading holds.

``tests/test_power.py`` checks both against simulated runs of the permutation test and the F-test.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any

import numpy as np

from vlfair.facts import Facts

DRAWS = 20_000  # simulated runs of a gap's power: its error is at most 0.0035 (at a power of 0.5)
CLIPPED = 0.5  # a group whose scores sit at one end of their range this often is clipped to it


class PowerError(ValueError):
    """A question ``vlfair power`` cannot answer; the message names the metric, the subset or the effect."""


@dataclasses.dataclass(frozen=True)
class _Numerical(abc.ABC):
    """What every design of a tested metric shares (the metric, its value and neutral value at the run, the run's
    images per group and alpha) and the inverses of :meth:`power`, found numerically: the smallest effect detected
    with a power, and the images per group an effect needs."""

    metric: str
    subset: dict[str, Any]
    value: float
    neutral: float
    per_group: float
    confidence: float

    @abc.abstractmethod
    def power(self, effect: float, per_group: float) -> float:
        """The chance that the run's test detects an ``effect`` with ``per_group`` images in each group."""

    def _top(self) -> float:
        return math.inf

    def mde(self, power: float = 0.8, sign: float = 1.0) -> float:
        from scipy.optimize import brentq

        def short(effect: float) -> float:
            return self.power(effect, self.per_group) - power

        high = 1.0
        while short(high) < 0:
            high *= 2
            if high > self._top():
                high = self._top()
                if short(high) < 0:
                    raise PowerError(f"{self.metric}: no effect is detected with {power:.0%} power at this "
                                     "run's design")
                break
        return float(brentq(short, 1e-12, high, xtol=1e-10))

    def images_per_group(self, effect: float, power: float = 0.8) -> float:
        from scipy.optimize import brentq

        def short(log_n: float) -> float:
            return self.power(effect, math.exp(log_n)) - power

        low, high = math.log(2.0), math.log(self.per_group) + 30
        if short(high) < 0:
            raise PowerError(too_many_images(effect, power, math.exp(high)))
        if short(low) > 0:
            return math.exp(low)
        return math.exp(brentq(short, low, high, xtol=1e-9))

    def no_bias_power(self) -> float:
        """How often the test rejects with no difference at all: its alpha (a power at or below it is reached by no
        effect)."""
        return 1 - self.confidence

    @property
    @abc.abstractmethod
    def effect_bounds(self) -> tuple[float, float]:
        """The effects the design reads (``vlfair power`` refuses one outside them, and a smallest one past them)."""


@dataclasses.dataclass(frozen=True)
class FDesign(_Numerical):
    """An F-test's design: its groups' images at the run (``counts``), alpha, and the effect as eta squared."""

    counts: tuple[int, ...]
    facts: Facts = Facts()
    effect_name: str = "eta squared"

    @property
    def se(self) -> float:
        """What the F's effect size is known to at the run: eta squared's standard error under no difference,
        sqrt(2 (G - 1)) / N (its null's spread)."""
        groups, total = len(self.counts), sum(self.counts)
        return math.sqrt(2 * (groups - 1)) / total

    def power(self, effect: float, per_group: float) -> float:
        from scipy.stats import f, ncf

        groups = len(self.counts)
        total = groups * per_group
        if total <= groups or not 0 < effect < 1:
            return 0.0 if effect <= 0 else 1.0
        critical = f.ppf(self.confidence, groups - 1, total - groups)
        return float(ncf.sf(critical, groups - 1, total - groups, total * effect / (1 - effect)))

    def _top(self) -> float:
        return 1 - 1e-9

    @property
    def effect_bounds(self) -> tuple[float, float]:
        """Eta squared, a share of the variance: in (0, 1), whatever the F's own range."""
        return (0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class GapDesign(_Numerical):
    """A largest gap's design: each group's spread (standard deviation) at the run, alpha, and the group that is
    ``d`` above the others (the run's top group)."""

    spreads: tuple[float, ...]
    top: int = 0
    facts: Facts = Facts()
    seed: int = 0
    effect_name: str = "deviation"

    @property
    def se(self) -> float:
        """A group mean's standard error at the run (the mean over the groups)."""
        return float(np.mean(self.spreads)) / math.sqrt(self.per_group)

    @property
    def effect_bounds(self) -> tuple[float, float]:
        """A deviation of the gap's value: within its range less its neutral value (a rate gap's up to 1)."""
        return deviation_bounds(self.facts, self.neutral)

    @property
    def _draws(self) -> np.ndarray:
        return np.random.default_rng(self.seed).standard_normal((DRAWS, len(self.spreads)))

    def power(self, effect: float, per_group: float) -> float:
        draws = self._draws * (np.asarray(self.spreads) / math.sqrt(per_group))
        critical = np.quantile(np.ptp(draws, axis=1), self.confidence)
        draws[:, self.top] += effect
        return float(np.mean(np.ptp(draws, axis=1) > critical))


def tested_design(metric: str, subset: dict[str, Any], statistic: Any, values: np.ndarray, codes: np.ndarray,
                  value: float, facts: Facts, confidence: float, column: int = 0) -> FDesign | GapDesign:
    """The design of a metric judged by a test, from its row set's ``values`` and group ``codes`` (a
    :class:`~vlfair.compare.power.PowerError` naming it where no power is read: a statistic that is neither an F
    nor a largest gap, no variance within the groups, scores clipped to an end of their range)."""
    from vlfair.measures.statistics import ColumnRange, FStatistic, Range

    shown = json_subset(subset)
    if isinstance(statistic, ColumnRange):  # the columns (languages) are the groups, each row in every one
        columns = [j for j in range(values.shape[1])]
        groups = [values[:, j] for j in columns]
    elif isinstance(statistic, (Range, FStatistic)):
        groups = [values[codes == g, column] for g in np.unique(codes)]
    else:
        raise PowerError(f"{metric} is judged by a test of a statistic vlfair has no power for (an F and a largest gap "
                         "between group means have one)")
    counts = tuple(int(g.size) for g in groups)
    spreads = tuple(float(np.std(g, ddof=1)) if g.size > 1 else 0.0 for g in groups)
    if not any(s > 0 for s in spreads):
        raise PowerError(f"{metric} on {shown} has no variance within its groups in the run: no spread to read a power "
                         "from")
    for g in groups:
        if np.isin(g, (0.0, 1.0)).all():
            continue  # a rate's 0s and 1s are its values, not a clipping
        ends = max(np.mean(g == g.min()), np.mean(g == g.max()))
        if g.size > 2 and ends > CLIPPED:
            raise PowerError(f"{metric} on {shown}: {ends:.0%} of a group's scores sit at one end of their range "
                             "(clipped): no normal reading of the run's spread holds, so no power is read from it")
    per_group = float(np.mean(counts))
    if isinstance(statistic, FStatistic):
        return FDesign(metric, subset, value, 0.0, per_group, confidence, counts, facts)
    means = np.asarray([g.mean() for g in groups])
    return GapDesign(metric, subset, value, float(facts.neutral or 0.0), per_group, confidence, spreads,
                     int(np.argmax(means)), facts)


def deviation_bounds(facts: Facts, neutral: float) -> tuple[float, float]:
    """The deviations from ``neutral`` a metric of these facts can take: its range (Facts.bounds) less it."""
    low, high = facts.bounds
    return low - neutral, high - neutral


def too_many_images(effect: float, power: float, most: float) -> str:
    """Why no images per group are named for ``effect``: even ``most`` (10^13 times the run's) fall short."""
    return (f"--effect {effect:g}: even {most:,.3g} images per group (10^13 times this run's) do not detect it with "
            f"{power:.0%} power; plan for a larger effect")


def json_subset(subset: dict[str, Any]) -> str:
    import json

    return json.dumps(subset, sort_keys=True, ensure_ascii=False)


__all__ = ["DRAWS", "FDesign", "GapDesign", "deviation_bounds", "tested_design", "too_many_images"]
