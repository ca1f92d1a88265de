"""A board as every command reads it (``vlfair leaderboard``, the leaderboard Space): ``report.leaderboard``'s
:func:`~vlfair.report.leaderboard.read_board` with what only this layer knows, the installed probes.

- Each installed probe's own facts (``Probe.facts``: a plugin's neutral values and ranges), for runs that
  recorded none: a plugin's metric is then ranked and tiered as its probe says, in the Space as in the CLI.
- Each run whose samples lie beside its results.json is checked against them (``compare.runs.misreported``):
  a value edited beside untouched samples, or samples edited beside untouched values, would be ranked as
  results.json claims and tiered as the samples say; such a run is skipped and named (file and metric).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from pathlib import Path
from typing import Any

import pandas as pd

from vlfair.facts import Facts


def installed_facts() -> dict[str, dict[str, Facts | float]]:
    """Every installed probe's own facts, by probe name (``Probe.facts``; importing a plugin's probe registers its
    measures too), for a run that recorded none of a metric's: never a plugin's bias measure read as a level (a
    broken plugin is left out by the registry, with a warning)."""
    from vlfair.probes import probe_class, probe_names

    return {name: probe_class(name).facts for name in probe_names()}


def read_checked_board(sources: Iterable[str | Path], skipped: list[str] | None = None, token: str | None = None,
                       memo: MutableMapping[str, str | None] | None = None) -> pd.DataFrame:
    """The board of ``sources`` (``read_board``), with each installed probe's facts and each run checked against
    its samples where they are beside it; ``memo`` keeps each run's finding by its content hash (a Space that
    reads its board again checks only the runs it has not seen)."""
    from vlfair.report.hub import content_hash
    from vlfair.report.leaderboard import read_board

    def check(path: Path, results: dict[str, Any]) -> str | None:
        from vlfair.compare.runs import reported_problem

        if not (results.get("samples") or {}).get("file"):
            return None  # results.json alone: ranked from it, tiered unpaired
        key = content_hash(results)
        if memo is not None and key in memo:
            return memo[key]
        found = reported_problem(path)
        if memo is not None:
            memo[key] = found
        return found

    return read_board(sources, skipped, token=token, neutral=installed_facts(), check=check)


__all__ = ["installed_facts", "read_checked_board"]
