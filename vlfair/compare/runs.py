"""A finished run read back: results.json (validated) and its samples.parquet (checked)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from vlfair.samples import Samples, SamplesError, read_samples


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
        samples, _ = read_samples(folder / entry["file"], entry["sha256"])
    except SamplesError as exc:
        raise RunError(str(exc)) from None
    if len(samples.frame) != entry["rows"]:
        raise RunError(f"{folder / entry['file']}: {len(samples.frame)} rows, results.json says {entry['rows']}")
    return Run(folder, results, samples)


__all__ = ["Run", "RunError", "load_run"]
