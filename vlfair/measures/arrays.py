"""A measure of plain arrays evaluated as a probe's declared metric of one run is: the measure's statistic
(:mod:`vlfair.measures.statistics`) through the one paired engine (:func:`vlfair.paired.resample_groups`: its
value and its interval, each group's mean resampled within its group), then the measure's reporter
(:mod:`vlfair.measures.reporters`: the groups, the test and the details its study reports). The public
functions of group means (``group_score_gap``, ``bias_ratio``, ``trait_anova``, ``group_rate_gap``,
``cross_lingual_gap``) are this call on the arrays they were given, after their checks: the arithmetic of a
measure exists once, and a function's numbers are, on the same rows and seed and bit for bit, those of a probe's
declaration that names the same reporter, as every study's does (one that names none keeps the engine's value,
which ``vlfair compare`` reads: :func:`vlfair.probes.declared.evaluate`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from vlfair import stats
from vlfair.facts import Facts
from vlfair.measures.checks import require_sizes
from vlfair.measures.reporters import Reading, Report
from vlfair.measures.statistics import Statistic


@dataclasses.dataclass
class Reported:
    """A measure's value, interval, test p-value and details, as a reporter sets them (:class:`reporters.Metric`)."""

    value: float | None = None
    ci: list[float] | None = None
    p_value: float | None = None
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def number(self) -> float:
        """The value, which a measure of arrays always has (its reporter sets a number)."""
        assert self.value is not None, "a measure of arrays has a value"
        return self.value


@dataclasses.dataclass(frozen=True)
class Groups:
    """Each row's group as a measure reads labels: the groups' names (sorted, by :func:`vlfair.stats.label_text`)
    and each row's code (0..G-1 in that order)."""

    names: list[str]
    codes: np.ndarray


def groups_of(labels: Any, what: str = "group") -> Groups:
    """``labels`` as :class:`Groups`, each holding rows enough for a mean (a ValueError naming the small ones,
    each a ``what``)."""
    names, codes = stats.encode_groups(labels)
    require_sizes(names, np.bincount(codes, minlength=len(names)), what)
    return Groups(names, codes)


def evaluate(statistic: Statistic, report: Report, columns: Mapping[str, np.ndarray], groups: Groups, *,
             bootstrap: int, confidence: float, seed: int | None, n_permutations: int = 0,
             facts: Facts | None = None) -> Reported:
    """``statistic`` of the rows' ``columns`` (name -> one value per row) across ``groups``, with its interval
    (``bootstrap`` resamples; 0: none) and what ``report`` adds (a test of ``n_permutations`` relabellings). With
    the measure's ``facts``, the interval is the one its rule reports (:func:`vlfair.measures.null.interval_of`:
    a bounded statistic's resamples moved onto its value) and a rounding residue of the neutral value is it, as
    a probe's declaration reports them."""
    from vlfair import paired
    from vlfair.measures import null

    at = {column: j for j, column in enumerate(columns)}
    code = {name: j for j, name in enumerate(groups.names)}
    values = np.stack([np.asarray(columns[column], dtype=float) for column in columns], axis=1)
    row_set = paired.RowSet(np.arange(len(values)), tuple(columns), groups.codes,
                            (paired.Statistic("measure", {}, statistic.function(at, code)),))
    # the value is the reporter's (each of the measures' sets it), as a study's declaration reports it: the engine
    # runs for the interval alone, and not at all where nothing is resampled (a training script's every step)
    resampled, means = np.empty(0), None
    found = Reported()
    if bootstrap:
        _, drawn, means = paired.resample_groups(row_set, values, bootstrap=bootstrap, seed=seed)
        resampled = drawn[:, 0]
        found.ci = paired.resampled_interval(resampled, confidence)
    report(found, Reading(values, groups.codes, groups.names, code, at, means, resampled, _as_named, confidence,
                          n_permutations, seed), statistic)
    if facts is not None:
        if resampled.size and found.ci is not None and found.value is not None:
            found.ci = null.interval_of(resampled, found.value, confidence, facts, paired.smallest_stratum(row_set))
        null.cut_to_range(found, facts)
        null.snap(found, facts.neutral, null.scale_of(values))
    return found


def _as_named(group: Any) -> Any:
    return group  # the groups are named by their labels' text already (groups_of)


__all__ = ["Groups", "Reported", "evaluate", "groups_of"]
