"""A finished run read back: results.json (validated) and its samples.parquet (checked)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vlfair.outputs import metric_key
from vlfair.samples import MissingColumn, Samples, SamplesError, read_samples


class RunError(ValueError):
    """A run folder that cannot be re-analysed; the message names the folder and what to do."""


class MisreportedRun(RunError):
    """A run whose results.json reports a value its samples do not give (:func:`misreported`): ``problem``."""

    def __init__(self, file: Path, problem: str):
        super().__init__(f"{file}: {problem}")
        self.problem = problem


@dataclasses.dataclass
class Run:
    """A run's folder, its results.json and its per-sample results."""

    path: Path
    results: dict[str, Any]
    samples: Samples

    @property
    def label(self) -> str:
        """The model's name, as reports name it."""
        model = self.results["model"]
        return str(model.get("name") or model["spec"])


def load_run(path: str | Path, check: bool = True) -> Run:
    """The run in folder ``path`` (or the folder of a results.json), its reported values checked against its
    samples (:func:`refuse_misreported`; ``check=False``: by the caller, after checks that say more, as compare's).

    Raises:
        RunError: no results.json, one that breaks the schema, a run from a vlfair that kept no
            samples, a samples file that is missing or changed since the run; :class:`MisreportedRun`: a value
            its samples do not give.
    """
    from vlfair.report.results import load_results

    folder = Path(path)
    folder = folder.parent if folder.name == "results.json" else folder
    file = folder / "results.json"
    if not file.is_file():
        raise RunError(f"{folder}: no results.json (give the --out folder of a vlfair run)")
    try:
        results = load_results(file)  # the leaderboard's gate: a run may come from anyone
    except ValueError as exc:
        raise RunError(f"{file}: not a vlfair results.json ({exc})") from None
    entry = results.get("samples")
    if entry is None:
        raise RunError(f"{folder}: this run (vlfair {results.get('vlfair_version')}, probe {results['probe']}) kept no "
                       f"per-sample results; run it again with this vlfair (vlfair run {results['probe']} ...) to get "
                       "samples.parquet")
    try:
        samples, header = read_samples(folder / entry["file"], entry["sha256"], entry["rows"])
    except SamplesError as exc:
        raise RunError(str(exc)) from None
    if len(samples.frame) != entry["rows"]:
        raise RunError(f"{folder / entry['file']}: {len(samples.frame)} rows, results.json says {entry['rows']}")
    _check_same_run(folder / entry["file"], header, results)
    run = Run(folder, results, samples)
    if check:
        refuse_misreported(run)
    return run


def refuse_misreported(run: Run) -> None:
    """:class:`MisreportedRun` where :func:`misreported` finds a value the run's samples do not give."""
    problem = misreported(run)
    if problem:
        raise MisreportedRun(run.path / "results.json", problem)


def reported_problem(path: str | Path) -> str | None:
    """What :func:`misreported` finds in the run at ``path`` (a folder or its results.json) where its samples
    are beside it, else None: a run without samples here, or whose samples cannot be read, is another
    problem, said where those samples are read (a board ranks results.json alone; its tiers say why unpaired)."""
    try:
        load_run(path)
    except MisreportedRun as exc:
        return exc.problem
    except RunError:
        return None
    return None


# What the samples file records of its run (results.json without its numbers, as the run wrote both) and must
# agree with results.json on: what was measured, how, on what, on which machine, and when
SAME_RUN = ("probe", "probe_version", "model", "dataset", "created", "settings", "probe_settings", "family",
            "skipped_rows", "machine")


def _check_same_run(path: Path, header: dict[str, Any], results: dict[str, Any]) -> None:
    """The samples file was written by the run whose results.json names it: another run's samples (copied
    in, with its SHA-256), or a results.json edited since (another temperature, another family), would
    report one run's numbers under the other's name."""
    from vlfair.report.results import json_shown

    if not header:
        raise RunError(f"{path}: the samples file records no run (not written by a vlfair run's write)")
    differ = [key for key in SAME_RUN if header.get(key) != results.get(key)]
    if differ:
        key = differ[0]
        ours, theirs = json_shown(results.get(key), 80), json_shown(header.get(key), 80)
        raise RunError(f"{path} was written by another run than the results.json beside it, or results.json was "
                       f"edited since: they differ in {', '.join(differ)} ({key}: {ours} in results.json, {theirs} in "
                       "the samples file)")


# float noise only: the point values are recomputed from the same samples by the same arithmetic
REPORTED_TOLERANCE = 1e-9


def misreported(run: Run) -> str | None:
    """Where results.json reports a point value its samples do not give (a number edited beside untouched
    samples, or samples edited beside untouched numbers): the first such metric and both values, else None.

    The point values are recomputed as ``vlfair rescore`` does, without its intervals and tests (which
    depend on resampling), by the run's probe under its recorded settings; a run whose probe is not installed
    here, or is installed at another version (whose analysis may differ), cannot be checked and is not
    (nothing here can read its samples either: compare and rescore refuse it, a board tiers it unpaired)."""
    results = run.results
    recomputed = point_values(run)
    if recomputed is None:
        return None
    for position, metric in enumerate(results["metrics"]):
        key = metric_key(metric["name"], metric["subset"])
        if key not in recomputed:
            continue  # a metric this analysis does not make from samples (a probe's note): nothing to check
        reported, expected = metric["value"], recomputed[key]
        if not _same_value(reported, expected):
            subset = ", ".join(f"{k}={v}" for k, v in metric["subset"].items())
            return (f"metrics[{position}] ({metric['name']}{', ' + subset if subset else ''}) "
                    f"reports {_shown(reported)}, its samples give {_shown(expected)} "
                    f"({results['samples']['file']}): results.json or the samples were edited since the run")
    return None


def point_values(run: Run) -> dict[tuple[str, str], Any] | None:
    """Each metric's point value (by name and subset as sorted JSON) as the run's probe makes it from the run's
    samples under its recorded settings, without intervals or tests; None where that cannot be done here (the
    probe not installed, or at another version; samples it cannot analyse, said where they are analysed)."""
    from vlfair.figures import not_drawn
    from vlfair.probes import ProbeError, probe_class
    from vlfair.report.results import jsonable

    results = run.results
    try:
        probe_type = probe_class(results["probe"])
    except ProbeError:
        return None
    settings = dict(results.get("probe_settings") or {})
    if not probe_type.keeps_samples() or settings.get("version", results["probe_version"]) != \
            probe_type.validate_settings().version:
        return None
    fields = probe_type.Settings.model_fields
    probe = probe_type({**settings, **{key: 0 for key in ("bootstrap", "n_permutations") if key in fields}})
    try:
        with not_drawn():  # the values alone: drawing a run's figures took 3/4 of this on a professions run
            found = probe.analyze_samples(run.samples).metrics
    except (ValueError, TypeError, KeyError, ZeroDivisionError):
        return None
    # the subsets as results.json holds them (a numpy integer's phrasing number an int, not its text)
    return {metric_key(m.name, jsonable(m.subset)): m.value for m in found}


def _same_value(reported: Any, expected: Any) -> bool:
    """Equal to float noise; both without a value counts as equal (null, NaN, or an infinity, which results.json
    holds as null: JSON has neither)."""
    missing = [value is None or not math.isfinite(float(value)) for value in (reported, expected)]
    if any(missing):
        return all(missing)
    return math.isclose(float(reported), float(expected), rel_tol=REPORTED_TOLERANCE, abs_tol=1e-12)


def _shown(value: Any) -> str:
    return "null" if value is None else f"{float(value):.6g}"


@contextlib.contextmanager
def columns_named(runs: list[Run]) -> Iterator[None]:
    """A column a run's samples lack, met while they are analysed, as a RunError naming the file and the
    column (a KeyError would reach a user, or a Space's visitor, as a traceback)."""
    try:
        yield
    except KeyError as exc:  # (a MissingColumn too: the samples' reader asked for a column by name)
        column = exc.column if isinstance(exc, MissingColumn) else exc.args[0] if exc.args else None
        # the runs whose own samples lack it: the frame asked may be several runs' shared columns, named after the
        # first run, whose file holds the column
        lacking = [run for run in runs if column not in run.samples.frame.columns]
        if not lacking and isinstance(exc, MissingColumn):
            raise RunError(str(exc)) from None
        files = ", ".join(str(run.path / run.results["samples"]["file"]) for run in lacking or runs)
        raise RunError(f"{files}: no column {column!r} in the samples (not the samples this probe writes)") from None


__all__ = ["MisreportedRun", "Run", "RunError", "columns_named", "load_run", "misreported",
           "point_values", "refuse_misreported", "reported_problem"]
