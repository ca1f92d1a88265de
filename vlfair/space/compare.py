"""The leaderboard Space's compare view: runs of one family, picked by a visitor, compared row by
row with ``vlfair compare`` on their samples (a directory of runs, or a Hub dataset fed by
``vlfair push-results``, whose chosen runs are downloaded).

The compare tab compares 2 to 4 runs of one family picked by the visitor: from a folder of runs, or from
the Hub dataset, of which it downloads, for each chosen run, nothing but its results.json (in a folder
named ``...--<the run's content hash>``, at most 4 such folders looked into, each results.json within its
cap and checked to hash to the run) and the one samples file that results.json names: a bare file name
beside it (word characters, ``.`` and ``-`` only: never a path, ``..`` or a name with a newline), within the
Space's 64 MiB (:data:`MAX_SAMPLES_BYTES`; ``download_chosen``'s own default is 512 MiB), sized before it
is fetched. Any other file in the folder, at any depth, of any size, is never downloaded; a run whose
samples file is named outside it, missing or too large is refused in one line naming the file in the
repository (never the server's cache). Each run holds at most 100,000 samples (:data:`MAX_ROWS`, read
from results.json before comparing: two runs of 200,000 took 101 s and 730 MB), and a comparison runs
within the Space's time limit (``VLFAIR_SPACE_TIME_LIMIT_S``, as every request), refused or stopped with
"compare the runs with vlfair compare on your own machine"; it shows the differences, a forest plot per
metric and the notes of ``vlfair compare``; the forest plots draw with mathtext off (a "$" in a name is
text).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from vlfair.compare import Comparison, compare_runs
from vlfair.compare.render import adjusted_column, differences_frame, forests, notes
from vlfair.defaults import BOOTSTRAP, CONFIDENCE
from vlfair.space.limits import MB, SpaceInputError, run_with_time_limit

MAX_RUNS = 4  # every pair is compared: 4 runs are 6 pairs
MAX_SAMPLES_BYTES = 64 * MB  # a run's samples file the compare tab downloads and reads (100,000s of rows)
MAX_ROWS = 100_000  # samples of one run the compare tab compares (two runs of 200,000: 101 s and 730 MB)
LOCAL_ADVICE = "compare the runs with vlfair compare on your own machine"


def run_choices(board: pd.DataFrame, family: str | None) -> list[tuple[str, str]]:
    """(label, run) for every run of ``family`` on the board: the model, when it ran, its id."""
    if not family or "run" not in board:
        return []
    rows = board[board["family"] == family].drop_duplicates("run")
    return [(f"{model} · {str(created)[:16]} · {run[:8]}", run)
            for model, created, run in zip(rows["model"], rows["created"], rows["run"])]


def run_folders(source: str, runs: list[str], token: str | bool | None = False) -> list[Path]:
    """The folder of each run (by its content hash) under the directory ``source``, or downloaded
    (results.json and samples) from the Hub dataset ``source``."""
    from vlfair.report.hub import content_hash, download_chosen, hub_repo, is_repo_id
    from vlfair.report.leaderboard import read_results

    if hub_repo(source) is None and not Path(source).exists() and is_repo_id(source):
        source = f"hf://datasets/{source}"  # a bare Hub id, as the board reads it
    if Path(source).is_file():
        raise SpaceInputError(f"the board was read from a table ({Path(source).name}), which keeps no samples: "
                              "comparisons need the runs (a folder of runs or a Hub dataset fed by vlfair "
                              "push-results)")
    if hub_repo(source) is not None:  # only each run's results.json and the samples it names, each within a cap
        found = download_chosen(source, runs, token, max_samples=MAX_SAMPLES_BYTES)
    else:
        found = {}
        for path in sorted(Path(source).rglob("results.json")):
            try:
                results = read_results([path])[0]
            except ValueError:
                continue  # a broken file is the board's to report; it cannot be one of the runs chosen
            found.setdefault(content_hash(results), path.parent)
    missing = [run[:8] for run in runs if run not in found]
    if missing:
        raise SpaceInputError(f"run(s) {', '.join(missing)} are not in {source} any more; reload the board")
    return [found[run] for run in runs]


def compare_chosen(source: str, runs: list[str], token: str | bool | None = False,
                   bootstrap: int = BOOTSTRAP) -> Comparison:
    """``vlfair compare`` of the chosen runs (2 to :data:`MAX_RUNS`), of at most :data:`MAX_ROWS` samples
    each, within the Space's time limit (``VLFAIR_SPACE_TIME_LIMIT_S``); every refusal is a
    :class:`SpaceInputError`, without the server's paths."""
    if not 2 <= len(runs) <= MAX_RUNS:
        raise SpaceInputError(f"pick 2 to {MAX_RUNS} runs of one family to compare (picked {len(runs)})")
    try:
        return _compared(source, runs, token, bootstrap)
    except SpaceInputError:
        raise
    except ValueError as exc:  # a run's own refusal names its files: in the Hub's cache, never shown to a visitor
        raise SpaceInputError(str(exc)) from None


def _compared(source: str, runs: list[str], token: str | bool | None, bootstrap: int) -> Comparison:
    from vlfair.guards import time_limit_from_env
    from vlfair.report.leaderboard import read_results

    folders = run_folders(source, runs, token)
    for folder in folders:  # what results.json says of its samples (compare checks it against the file)
        rows = (read_results([folder])[0].get("samples") or {}).get("rows", 0)
        if rows > MAX_ROWS:
            raise SpaceInputError(f"run {folder.name[-8:]} holds {rows:,} samples, more than the {MAX_ROWS:,} a "
                                  f"comparison here takes; {LOCAL_ADVICE}")
    return run_with_time_limit(lambda: compare_runs(folders, bootstrap=bootstrap, confidence=CONFIDENCE),
                               time_limit_from_env(), LOCAL_ADVICE)


def view(comparison: Comparison) -> dict[str, Any]:
    """What the view shows: the differences (formatted), a forest plot per metric and pair (an
    image), the notes."""
    table = differences_frame(comparison, readable=True)
    # what a person reads first: the difference, its interval and the verdict; the values after
    if len(table):
        first = ["metric", "subset", "A - B", "CI", "verdict", adjusted_column(comparison), "value A", "value B", "p"]
        table = table[(["A", "B"] if len(comparison.content["runs"]) > 2 else []) + first]
    # PNGs cut to what is drawn (tick labels and the legend sit outside the axes, which a plot
    # component's own rendering crops)
    from io import BytesIO

    import matplotlib
    from PIL import Image

    from vlfair.report.pages import figure_png

    with matplotlib.rc_context({"text.parse_math": False}):  # a "$" in a run's names is text, not mathtext
        figures = {name: Image.open(BytesIO(figure_png(figure, dpi=110)))
                   for name, figure in forests(comparison).items()}
    return {"table": table, "figures": figures, "notes": notes(comparison)}


__all__ = ["MAX_ROWS", "MAX_RUNS", "compare_chosen", "run_choices", "run_folders", "view"]
