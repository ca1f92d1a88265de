"""``vlfair compare``: two or more runs of one probe on the same rows, metric by metric.

For each pair of runs (A, B) and each metric the probe can express per sample
(``Probe.comparisons``): A, B, A - B with a paired bootstrap interval (the same resampled rows
for both models, stratified as the metric's own interval), A / B for a ratio, and a paired
permutation test (each row's two results swapped or not). With more than two runs every pair is
compared. The differences' tests are two families, adjusted by the correction asked for (Holm's by default,
as a run's verdicts are; ``vlfair.verdicts.ADJUSTED``): every difference of a bias measure (each metric and
subset, every pair of runs: the "less biased" verdicts), and apart every difference of a level (a mean score,
an accuracy: "higher"), so that a comparison of many metrics finds a difference by chance no more often than
the correction allows. Runs that did not measure the same rows the same way are refused, every difference
named.

Two runs of one model are labelled by what differs between them (:func:`distinct_labels`: the spec,
revision or dtype, then a model setting such as ``generative``, then the time: "M (dtype float32)" and
"M (dtype bfloat16)", never "M vs M").
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vlfair import paired, stats, verdicts
from vlfair._version import __version__
from vlfair.compare.runs import Run, RunError, columns_named, load_run, refuse_misreported
from vlfair.defaults import BOOTSTRAP, CONFIDENCE, CORRECTION, PERMUTATIONS, SEED
from vlfair.report import machine
from vlfair.report.results import jsonable

SCHEMA = "vlfair.comparison/1"
FAMILY = ("every difference of a bias measure the comparison tests (each metric and subset, every pair of runs), "
          "and apart every difference of a level")


class ComparisonError(RunError):
    """Runs that cannot be compared; the message lists every reason."""


@dataclasses.dataclass
class Comparison:
    """What ``compare_runs`` found: comparison.json's content, and what the report draws."""

    content: dict[str, Any]
    runs: list[Run]


@dataclasses.dataclass
class Prepared:
    """Runs made ready to compare: read and checked, their frames aligned on the rows they share, the
    probe's row sets, and each run's values of each row set (``values[run][row set]``)."""

    runs: list[Run]
    probe: Any
    common: list[str]
    counts: list[int]
    frames: list[Any]
    row_sets: list[Any]
    values: list[list[Any]]
    unshared: list[dict[str, str]]


def prepare_runs(paths: Sequence[str | Path], on_common_rows: bool = False) -> Prepared:
    """The runs in ``paths`` read, checked as :func:`compare_runs` checks them, and made ready to compare.

    Raises:
        RunError: a run cannot be read.
        ComparisonError: fewer than two runs, a run given twice, runs that are not comparable, or that
            share too few rows.
    """
    from vlfair.probes import probe_class

    if len(paths) < 2:
        raise ComparisonError(f"compare needs at least two runs, got {len(paths)}")
    runs = [load_run(path, check=False) for path in paths]  # their values checked after what says more (below)
    _refuse_duplicates(runs)
    problems = _incomparable(runs, on_common_rows)
    if problems:
        raise ComparisonError("the runs are not comparable: " + "; ".join(problems))
    probe = probe_class(runs[0].results["probe"])(runs[0].results["probe_settings"])
    common, counts = _common_ids(runs)
    if len(common) < 2:  # not even one pair of rows to compare: said as such, not as a probe's limitation
        raise ComparisonError("the runs share no rows (no sample id is in all of them)" if not len(common) else
                              f"the runs share only 1 row ({common[0]}): a paired comparison needs 2 or more")
    frames = [run.samples.frame.set_index("id").loc[common].reset_index() for run in runs]
    frames, unshared = _shared_columns(runs, frames)
    reference = dataclasses.replace(runs[0].samples, frame=frames[0])
    with columns_named(runs):
        row_sets = _with_recorded_facts(runs, probe, probe.comparisons(reference))
    fewer = max(counts) > len(common)  # compared on the rows they share, fewer than a run holds
    if not any(row_set.statistics for row_set in row_sets):
        raise ComparisonError(f"probe {probe.name!r} gives no per-sample form of its metrics to compare"
                              + (f" in every run ({'; '.join(u['metric'] + ': ' + u['reason'] for u in unshared)})"
                                 if unshared else "")
                              + (f" on the {len(common)} rows the runs share (too few for its groups; compare runs "
                                 "that share more rows)" if fewer else ""))
    # each run's values of each row set, read once (rows are positions in the aligned frames)
    values = [[frame.iloc[row_set.rows, [frame.columns.get_loc(c) for c in row_set.columns]].to_numpy(float)
               for row_set in row_sets] for frame in frames]
    # a value that is not a number first (it also leaves a statistic undefined in its run: not "other data")
    _refuse_missing_values(runs, frames, row_sets, values)
    with columns_named(runs):
        _check_groups(probe, runs, frames, row_sets)
    for run in runs:  # a value its samples do not give: the board's values and the comparison's would differ
        refuse_misreported(run)
    if fewer:  # the runs' own rows made their own numbers; fewer shared ones may leave a group too small
        kept, small = _without_small_groups(row_sets, len(common))
        values = [[v for row_set, v in zip(row_sets, run_values) if any(row_set is k for k in kept)]
                  for run_values in values]
        row_sets, unshared = kept, [*unshared, *small]
    return Prepared(runs, probe, common, counts, frames, row_sets, values, unshared)


def compare_runs(paths: Sequence[str | Path], *, on_common_rows: bool = False, bootstrap: int = BOOTSTRAP,
                 confidence: float = CONFIDENCE, seed: int | None = SEED,
                 n_permutations: int = PERMUTATIONS, correction: str = CORRECTION,
                 labels: Sequence[str] | None = None) -> Comparison:
    """Compare the runs in ``paths`` (run folders), every pair, every comparable metric.

    Args:
        paths: two or more run folders (``vlfair run --out``) of one probe.
        on_common_rows: compare runs that share only some rows on the rows they share (said in
            the output); otherwise runs must hold the same rows.
        bootstrap: paired bootstrap resamples (0: no intervals).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling and the relabellings.
        n_permutations: relabellings of the paired permutation test (0: no p-values).
        correction: the multiple-testing correction of the differences' p-values (``holm``, ``bh`` or
            ``none``; :data:`vlfair.verdicts.ADJUSTED`), over each of the two families (:data:`FAMILY`).
        labels: each run's name for people, in the order of ``paths`` (None: the models' names, told apart by
            :func:`distinct_labels`); the runs' records keep their models' specs.

    Returns:
        The comparison (comparison.json's content and the runs).

    Raises:
        RunError: a run cannot be read (no results.json, no samples, a changed samples file).
        ComparisonError: fewer than two runs, a run given twice, or runs that differ in what
            makes numbers comparable (every difference listed).
    """
    from vlfair.measures import check_options

    check_options(bootstrap=bootstrap, confidence=confidence, seed=seed, n_permutations=n_permutations)
    if correction not in verdicts.ADJUSTED:  # before the runs are read
        raise ComparisonError(f"correction is {correction!r}, not one of {', '.join(verdicts.ADJUSTED)}")
    if labels is not None and (len(labels) != len(paths) or len(set(labels)) != len(labels)):
        raise ComparisonError(f"{len(labels)} labels for {len(paths)} runs: give one label per run, in the runs' "
                              "order, each another" if len(labels) != len(paths) else
                              f"labels {list(labels)} name two runs alike: give each run another")
    prepared = prepare_runs(paths, on_common_rows)
    runs, probe, common, counts = prepared.runs, prepared.probe, prepared.common, prepared.counts
    row_sets, values, unshared = prepared.row_sets, prepared.values, prepared.unshared
    pairs = list(itertools.combinations(range(len(runs)), 2))
    differences = []
    for a, b in pairs:
        for k, row_set in enumerate(row_sets):
            for found in paired.compare(row_set, values[a][k], values[b][k], bootstrap=bootstrap,
                                        confidence=confidence, seed=seed, n_permutations=n_permutations):
                differences.append({"a": a, "b": b, **_entry(found)})
    tests = _adjust(differences, correction)
    for entry in differences:
        entry["verdict"] = verdict(entry, 1 - confidence)
        undefined = _undefined(entry, bootstrap)
        if undefined:  # said in words (verdict_text, undefined_notes): no number stands for it
            entry["undefined"] = undefined
        # what a "no difference detected" could not have seen: the smallest differences this design detects
        entry["mde"] = stats.interval_detectable(entry["difference"], entry["difference_ci"], confidence) \
            if entry["difference"] is not None else None
    content = {
        "schema": SCHEMA, "vlfair_version": __version__, "probe": probe.name,
        "probe_version": runs[0].results["probe_version"],
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "runs": [_describe(run, label) for run, label in zip(runs, labels or distinct_labels(runs))],
        "rows": {"compared": int(len(common)), "per_run": counts, "on_common_rows": bool(on_common_rows)},
        "settings": {"bootstrap": bootstrap, "confidence": confidence, "seed": seed, "n_permutations": n_permutations},
        "multiple_testing": {"method": correction, "family": FAMILY, "pairs": len(pairs), **tests},
        "differences": differences,
        "uncompared": [{"metric": name, "reason": why} for name, why in sorted(probe.uncompared.items())] + unshared
        + _pooled_over_phrasings(runs),
        # where the runs' machines differ: a difference near float32's resolution may be theirs, not the models'
        "machine_differences": machine.differences([run.results.get("machine") for run in runs]),
    }
    content = jsonable(content)
    validate_comparison(content)
    return Comparison(content, runs)


def _with_recorded_facts(runs: list[Run], probe: Any, row_sets: list[Any]) -> list[Any]:
    """The row sets with each metric's neutral value as the runs recorded it (results.json's ``measures``: a
    plugin's own facts hold though the reader imports another version of it); runs that judge one metric by
    different facts are refused, naming it: "less biased" would mean two things."""
    from vlfair.measures.catalog import facts_in

    names = {statistic.name for row_set in row_sets for statistic in row_set.statistics}
    facts = {}
    for name in sorted(names):
        found = [facts_in(run.results, name, probe.facts) for run in runs]
        if any(f != found[0] for f in found[1:]):
            shown = "; ".join(f"{run.path.name or run.path}: {f.record()}" for run, f in zip(runs, found))
            raise ComparisonError(f"the runs are not comparable: metric {name!r} is recorded with other facts "
                                  f"({shown})")
        facts[name] = found[0]
    return [dataclasses.replace(row_set, statistics=tuple(
        dataclasses.replace(statistic, neutral=facts[statistic.name].neutral) for statistic in row_set.statistics))
        for row_set in row_sets]


def _without_small_groups(row_sets: list[Any], shared: int) -> tuple[list[Any], list[dict[str, str]]]:
    """The row sets whose every group holds 2 rows or more (as each measure asks of its groups: with fewer,
    a mean has no spread and a resample nothing to draw: numpy's warnings, then every interval "not
    assessed"), and the others' metrics as uncompared, with the reason; none left is an error."""
    kept: list[Any] = []
    left_out: list[dict[str, str]] = []
    for row_set in row_sets:
        counts = np.bincount(row_set.groups) if row_set.statistics and row_set.groups.size else np.array([2])
        if counts.min() >= 2:
            kept.append(row_set)
            continue
        reason = (f"a group holds {int(counts.min())} of the {shared} rows the runs share; a paired comparison needs "
                  "2 rows of every group")
        left_out.extend({"metric": name, "reason": reason}
                        for name in dict.fromkeys(statistic.name for statistic in row_set.statistics))
    if not any(row_set.statistics for row_set in kept):
        raise ComparisonError(f"the runs share {shared} rows: {left_out[0]['reason']} (compare runs that share more "
                              "rows)")
    return kept, left_out


def _refuse_missing_values(runs: list[Run], frames: list[Any], row_sets: list[Any], values: list[list[Any]]) -> None:
    """A value a run's samples hold as NaN or infinite is refused, naming the file, the column and the
    first sample: a resample holding that row would have no difference, and every interval and p-value
    came out "not assessed" without saying why."""
    for run, frame, run_values in zip(runs, frames, values):
        for row_set, block in zip(row_sets, run_values):
            bad = ~np.isfinite(block)
            if bad.any():
                rows, columns = np.nonzero(bad)
                sample = frame["id"].iloc[row_set.rows[rows[0]]]
                count = int(bad.any(axis=1).sum())
                raise ComparisonError(
                    f"{run.path / run.results['samples']['file']}: {row_set.columns[columns[0]]} is "
                    f"{block[rows[0], columns[0]]} at {count} row(s) (the first: sample {sample}); a paired comparison "
                    "needs every compared row's value in every run, so nothing was compared (re-run the probe)")


def _refuse_duplicates(runs: list[Run]) -> None:
    """A run given twice (its folder, or a copy of its samples file) compares with nothing."""
    seen: dict[Any, Path] = {}
    for run in runs:
        for key in (run.path.resolve(), run.results["samples"]["sha256"]):
            if key in seen:
                raise ComparisonError(f"{run.path} is given twice (the same run as {seen[key]}): compare two "
                                      "different runs")
        seen.update({run.path.resolve(): run.path, run.results["samples"]["sha256"]: run.path})


def _incomparable(runs: list[Run], on_common_rows: bool) -> list[str]:
    """Every reason the runs' numbers cannot be set side by side."""
    first, problems = runs[0], []

    def differ(what: str, get: Any) -> None:
        values = [get(run) for run in runs]
        if any(value != values[0] for value in values[1:]):
            shown = ", ".join(f"{run.path.name or run.path}: {value!r}" for run, value in zip(runs, values))
            problems.append(f"{what} differs ({shown})")

    differ("probe", lambda run: run.results["probe"])
    if problems:
        return problems  # another probe measures other things: nothing else is worth listing
    differ("probe version", lambda run: run.results["probe_version"])
    from vlfair.probes import probe_class

    # A probe that makes its own data (word-influence generates images) makes other data with each
    # model: its rows are paired by what made them (prompt, variant, seed), not by the data's name
    # or fingerprint, which name the generator.
    probe_type = probe_class(first.results["probe"])
    # the data is known by its fingerprint and its rows' ids, not by the name it was given (a path
    # on one machine, a Hub id on another); a probe that makes its own data with each model (word-
    # influence generates images) pairs its rows by what made them (prompt, variant, seed)
    made = not probe_type.needs_dataset
    differ("split", lambda run: run.results["dataset"].get("split"))
    differ("subset", lambda run: run.results["dataset"].get("subset"))
    settings = [probe_type.measuring_settings(run.results.get("probe_settings") or {}) for run in runs]
    keys = sorted({key for s in settings for key in s})
    for key in keys:
        values = [s.get(key) for s in settings]
        if any(value != values[0] for value in values[1:]):
            shown = ", ".join(f"{run.path.name or run.path}: {json.dumps(v, default=str)[:80]}"
                              for run, v in zip(runs, values))
            problems.append(f"setting {key} differs ({shown})")
    if not on_common_rows:
        ids = [list(run.samples.frame["id"]) for run in runs]
        same_images = all(set(other) == set(ids[0]) for other in ids[1:])
        if not made:
            before = len(problems)
            differ("dataset fingerprint", lambda run: run.results["dataset"]["fingerprint"])
            if len(problems) > before and same_images:  # ids are of the images' bytes: the same images
                problems[-1] += (", though every sample id is in each run: the same images in another form (a folder "
                                 "and its prepared copy) or labelled otherwise; compare them row by row with "
                                 "--on-common-rows (it refuses them grouped otherwise)")
        if not same_images:
            shared = set(ids[0]).intersection(*map(set, ids[1:]))
            problems.append(f"the runs hold different rows ({', '.join(str(len(i)) for i in ids)} rows, {len(shared)} "
                            "in all of them): compare them on the rows they share with --on-common-rows")
    return problems


def _common_ids(runs: list[Run]) -> tuple[list[str], list[int]]:
    """The ids in every run, in the first run's order, and each run's row count."""
    others = [set(run.samples.frame["id"]) for run in runs[1:]]
    common = [i for i in runs[0].samples.frame["id"] if all(i in other for other in others)]
    return common, [len(run.samples.frame) for run in runs]


def _shared_columns(runs: list[Run], frames: list[Any]) -> tuple[list[Any], list[dict[str, str]]]:
    """The frames with only the columns every run has, and an ``uncompared`` entry for each other
    one: a run may leave a quantity out where its model cannot measure it (a trait pair whose two
    prompts it reads as one), and what one run lacks has nothing to be compared with."""
    shared = set.intersection(*(set(frame.columns) for frame in frames))
    unshared = []
    for column in dict.fromkeys(c for frame in frames for c in frame.columns if c not in shared):
        holding = [run.path.name or str(run.path) for run, frame in zip(runs, frames) if column in frame.columns]
        lacking = [run for run, frame in zip(runs, frames) if column not in frame.columns]
        # "see their warnings" only where each of them has warnings to see
        why = "see their warnings" if all(run.results.get("warnings") for run in lacking) else \
            "their samples hold no such column, and not every one of them says why"
        unshared.append({"metric": column, "reason": f"measured only in {', '.join(holding)} (the other runs left "
                                                     f"it out: {why})"})
    return [frame[[c for c in frame.columns if c in shared]] for frame in frames], unshared


def _check_groups(probe: Any, runs: list[Run], frames: list[Any], row_sets: list[Any]) -> None:
    """Runs of the same rows must read them alike: each run's row sets (built from its own samples)
    take the same rows, groups and strata as the first run's; a difference means different data
    (other labels for the same images). Columns no row set reads (a model's predicted labels) may
    differ."""
    for k in range(1, len(runs)):
        own = probe.comparisons(dataclasses.replace(runs[k].samples, frame=frames[k]))
        same = len(own) == len(row_sets) and all(
            np.array_equal(a.rows, b.rows) and np.array_equal(a.groups, b.groups)
            and np.array_equal(a.resampling_strata, b.resampling_strata)
            and [s.name for s in a.statistics] == [s.name for s in b.statistics]
            and [s.subset for s in a.statistics] == [s.subset for s in b.statistics]
            for a, b in zip(row_sets, own))
        if not same:
            raise ComparisonError(f"{runs[0].path} and {runs[k].path} hold the same samples but label or group them "
                                  "differently: not the same data")


def _pooled_over_phrasings(runs: list[Run]) -> list[dict[str, str]]:
    """The metrics the runs pooled over phrasings (``"phrasing": "pooled"``), said as compared through their
    phrasings: each phrasing's value is compared on the shared rows; a pooled one resamples the phrasings too."""
    from vlfair.probes.phrasings import POOLED

    names = sorted({m["name"] for m in runs[0].results["metrics"] if m["subset"].get("phrasing") == POOLED})
    return [{"metric": f"{name} (pooled over phrasings)",
             "reason": "compared phrasing by phrasing (subset phrasing 1, 2, ...): a pooled value's interval resamples "
                       "the phrasings as well as the rows, which a paired difference of two runs does not"}
            for name in names]


def _entry(found: Any) -> dict[str, Any]:
    return {"metric": found.name, "subset": found.subset, "neutral": found.neutral, "value_a": found.value_a,
            "value_b": found.value_b, "difference": found.difference, "difference_ci": found.difference_ci,
            "unpaired_ci": found.unpaired_ci, "ratio": found.ratio, "ratio_ci": found.ratio_ci,
            "distance_difference": found.distance_difference, "distance_difference_ci": found.distance_difference_ci,
            "p_value": found.p_value, "log10_p_value": found.log10_p_value, "p_method": found.p_method,
            "permutations": found.permutations}


def _adjust(differences: list[dict[str, Any]], correction: str) -> dict[str, int]:
    """Each difference's p adjusted by ``correction`` within its family (:data:`FAMILY`: the bias measures'
    differences, the levels' apart); how many tests each family holds (a difference without a p is none)."""
    tests = {}
    for family, members in (("tests", [e for e in differences if e["neutral"] is not None]),
                            ("level_tests", [e for e in differences if e["neutral"] is None])):
        raw = [math.nan if m["p_value"] is None else float(m["p_value"]) for m in members]
        for entry, adjusted in zip(members, verdicts.ADJUSTED[correction](raw)):
            entry["p_adjusted"] = None if math.isnan(adjusted) else adjusted
        tests[family] = sum(1 for p in raw if not math.isnan(p))
    return tests


def verdict(entry: dict[str, Any], alpha: float) -> str:
    """The verdict of one difference (``stats.paired_verdict``) from its adjusted p."""
    return stats.paired_verdict(entry["difference"], entry["difference_ci"], entry["distance_difference_ci"],
                                entry["p_adjusted"], alpha, entry["neutral"])


# What a statistic without a value means, once per kind (comparison.json's ``undefined``: each run's value, or
# every resample's difference)
UNDEFINED_MEANINGS = {
    "undefined": "undefined (0/0 on these rows: e.g. every group's scores alike, or a group with no rows)",
    "infinite": "infinite (a division by zero on these rows: e.g. a ratio over a zero mean, or an F of groups "
                "with no spread within them)",
    "resamples": "undefined in every resample of the rows (a run's groups too small or too alike to resample)",
}


def _undefined(entry: dict[str, Any], bootstrap: int) -> dict[str, str]:
    """Why a difference is not assessed where a statistic has no value: each run's value (``a``, ``b``) that is
    "undefined" (nan) or "infinite", or, both finite, every resample's difference undefined (``resamples``).
    Empty where the difference is assessed, or where only ``bootstrap`` 0 left it without an interval."""
    if entry["verdict"] != "not_assessed":
        return {}
    found = {side: "infinite" if math.isinf(value) else "undefined"
             for side, value in (("a", entry["value_a"]), ("b", entry["value_b"])) if not math.isfinite(value)}
    if not found and bootstrap:
        found["resamples"] = "resamples"
    return found


def verdict_text(entry: dict[str, Any], labels: list[str]) -> str:
    """The verdict for a person, naming the models."""
    a, b = labels[entry["a"]], labels[entry["b"]]
    return {"a_less_biased": f"{a} less biased", "b_less_biased": f"{b} less biased",
            "a_higher": f"{a} higher", "b_higher": f"{b} higher",
            "differ": "differ; neither closer to no bias", "no_difference": _no_difference(entry.get("mde")),
            "not_assessed": _not_assessed(entry.get("undefined") or {}, a, b)}[entry["verdict"]]


def _not_assessed(undefined: dict[str, str], a: str, b: str) -> str:
    """"not assessed" and why, in short (what each kind means: :func:`undefined_notes`)."""
    if not undefined:
        return "not assessed (no interval: bootstrap 0)"
    if "resamples" in undefined:
        return "not assessed (undefined in every resample)"
    names = {"a": a, "b": b}
    return "not assessed (" + "; ".join(
        f"{how} for {' and '.join(names[side] for side in ('a', 'b') if undefined.get(side) == how)}"
        for how in ("undefined", "infinite") if how in undefined.values()) + ")"


def undefined_notes(differences: list[dict[str, Any]], shown: int = 5) -> list[str]:
    """One sentence per kind of statistic without a value (:data:`UNDEFINED_MEANINGS`): what it means and the
    differences it left not assessed (the first ``shown`` named)."""
    from vlfair.report.numbers import format_subset

    said = []
    for kind, meaning in UNDEFINED_MEANINGS.items():
        found = [entry for entry in differences if kind in (entry.get("undefined") or {}).values()]
        if not found:
            continue
        named = [entry["metric"] + (f" ({format_subset(entry['subset'])})" if entry["subset"] else "")
                 for entry in found[:shown]]
        more = f" and {len(found) - shown} more" if len(found) > shown else ""
        said.append(f"Not assessed: {len(found)} difference{'s' if len(found) != 1 else ''} whose statistic is "
                    f"{meaning}{'' if kind == 'resamples' else ' in a run'}: {', '.join(named)}{more}.")
    return said


def _no_difference(mde: list[float | None] | None) -> str:
    """"no difference detected", with the smallest difference the comparison could have seen where it has one."""
    from vlfair.report.numbers import format_detectable

    seen = format_detectable(mde)
    return f"no difference detected (smaller than {seen} could not be seen)" if seen else "no difference detected"


def distinct_labels(runs: list[Run]) -> list[str]:
    """Each run's label (its model's name), told apart where runs share one by what differs between them:
    two runs of one model with another setting (a temperature, a generative question), revision or dtype
    are "M (temperature 1)" and "M (temperature 0.5)", never "M vs M"."""
    labels = [run.label for run in runs]
    for label in set(labels):
        same = [k for k, other in enumerate(labels) if other == label]
        if len(same) < 2:
            continue
        facts = [_facts(runs[k]) for k in same]
        differing = [key for key in dict.fromkeys(key for fact in facts for key in fact)
                     if len({json.dumps(fact.get(key), sort_keys=True, default=str) for fact in facts}) > 1]
        for k, fact in zip(same, facts):
            labels[k] = f"{label} ({', '.join(f'{key} {_shown_value(fact.get(key))}' for key in differing[:3])})"
    for k, label in enumerate(labels):  # still alike (more differences than shown, or none): the folder tells
        if labels.count(label) > 1:
            labels[k] = f"{label} [{runs[k].path.name}]"
    return labels


def _facts(run: Run) -> dict[str, Any]:
    """What may tell two runs of one model apart, the model's own first, the run's time last."""
    model = run.results["model"]
    return {"spec": model.get("spec"), "revision": model.get("revision"), "dtype": model.get("dtype"),
            **(run.results.get("probe_settings") or {}), "created": run.results.get("created")}


def _shown_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def _describe(run: Run, label: str) -> dict[str, Any]:
    text = (run.path / "results.json").read_bytes()
    return {"label": label, "path": str(run.path), "model": run.results["model"],
            "dataset": run.results["dataset"], "created": run.results["created"],
            "results_sha256": hashlib.sha256(text).hexdigest(), "samples_sha256": run.results["samples"]["sha256"]}


def comparison_schema() -> dict[str, Any]:
    from importlib import resources

    return json.loads(resources.files("vlfair.compare").joinpath("comparison.schema.json").read_text())


@functools.cache
def _validator() -> Any:
    """comparison.schema.json's validator, built (and the schema checked) once: ``jsonschema.validate``
    checks the schema itself at every call, 0.1 s of each comparison. Formats as results.json's."""
    import jsonschema

    from vlfair.report.results import format_checker

    schema = comparison_schema()
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    return validator(schema, format_checker=format_checker())


def validate_comparison(content: dict[str, Any]) -> None:
    """Check against comparison.schema.json (raises jsonschema.ValidationError: the most relevant
    error, as ``jsonschema.validate`` picks it)."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(content))
    if error is not None:
        raise error


__all__ = ["FAMILY", "SCHEMA", "Comparison", "ComparisonError", "compare_runs", "undefined_notes",
           "validate_comparison", "verdict", "verdict_text"]
