"""A finished run read back: results.json (validated) and its samples.parquet (checked)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vlfair.samples import MissingColumn, Samples, SamplesError, read_samples


class RunError(ValueError):
    """A run folder that cannot be re-analysed; the message names the folder and what to do."""


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


def load_run(path: str | Path) -> Run:
    """The run in folder ``path`` (or the folder of a results.json).

    Raises:
        RunError: no results.json, one that breaks the schema, a run from a vlfair that kept no
            samples, a samples file that is missing or changed since the run.
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
    return Run(folder, results, samples)


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


__all__ = ["Run", "RunError", "columns_named", "load_run"]
