"""What calibrated verdicts cost: a traits run's analysis at the study's size with and without them, and a board.

    python benchmarks/verdicts_cost.py [--quick] [--per-cell N] [--bootstrap B] [--runs R] [--repeats K]

(a) The traits study's declared metrics (6 trait pairs: an F across the 7 races within each gender, an F across
the 2 genders within each race, each race's mean confidence within each gender) on ``--per-cell`` rows of each of
its 14 cells (the study's 2,000: 28,000 rows), evaluated as a run evaluates them (``declared.evaluate``,
``--bootstrap`` resamples), first without what issue 64 added (no relabellings: ``n_permutations=0``, no
verdicts), then with it (the relabellings of each bounded metric's null mean, the run's default count, and
``verdicts.judge`` with its Holm and BH adjustments). (b) ``read_board`` over ``--runs`` copies of one run (each
another model), with and without a board's verdict-era reading (``latest_scoring``: a rescore replaces its
run). Each is the best of ``--repeats`` rounds, timed in turn in one process.

Last line: ``analysis_without=S analysis_with=S analysis_ratio=X board_without=S board_with=S board_ratio=Y
rows=N`` (the goal: both ratios <= 1.2).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from vlfair import verdicts
from vlfair.defaults import PERMUTATIONS
from vlfair.measures import reporters
from vlfair.measures.catalog import facts_of
from vlfair.measures.statistics import FStatistic, Mean
from vlfair.probes import declared
from vlfair.samples import Samples

RACES = ("White", "Black", "East Asian", "Southeast Asian", "Indian", "Middle Eastern", "Latino_Hispanic")
GENDERS = ("Female", "Male")
PAIRS = 6


def _traits(per_cell: int, seed: int = 0) -> tuple[Samples, list[declared.Declared]]:
    rng = np.random.default_rng(seed)
    race = np.repeat(RACES, 2 * per_cell)
    gender = np.tile(np.repeat(GENDERS, per_cell), len(RACES))
    frame = pd.DataFrame({"race": race, "gender": gender,
                          **{f"pair{j}": rng.random(race.size) for j in range(PAIRS)}})
    metrics = []
    for j in range(PAIRS):
        column, trait = f"pair{j}", f"trait{j}"
        for within, across in (("gender", "race"), ("race", "gender")):
            for stratum in sorted(set(frame[within])):
                rows = np.flatnonzero(frame[within].to_numpy() == stratum)
                metrics.append(declared.Declared("trait_anova", {"trait": trait, within: stratum}, FStatistic(column),
                                                 rows, across, report=reporters.anova))
                if within == "gender":
                    metrics += [declared.Declared("trait_confidence", {"trait": trait, "race": r, "gender": stratum},
                                                  Mean(column, r), rows, across) for r in RACES]
    return Samples(frame, {}), metrics


def _best(work: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def _board(runs: int, folder: Path) -> list[Path]:
    """``runs`` copies of one small run of the tiny CLIP, each another model's (its name and spec changed)."""
    from vlfair import testing
    from vlfair.probes import run_probe

    model = testing.tiny_clip(folder / "tiny-clip")
    first = folder / "run0"
    run_probe("professions", str(model), "synthetic:professions", out_dir=first, cache_dir=None,
              settings={"bootstrap": 50, "n_permutations": 200})
    paths = [first]
    for k in range(1, runs):
        copy = folder / f"run{k}"
        shutil.copytree(first, copy)
        results = json.loads((copy / "results.json").read_text())
        results["model"].update(name=f"model {k}", spec=f"org/model-{k}")
        (copy / "results.json").write_text(json.dumps(results))
        paths.append(copy)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 100 rows a cell, 100 resamples")
    parser.add_argument("--per-cell", type=int, default=2000)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    if args.quick:
        args.per_cell, args.bootstrap, args.runs, args.repeats = 100, 100, 3, 1
    samples, metrics = _traits(args.per_cell)

    def without() -> object:
        return declared.evaluate(samples, metrics, bootstrap=args.bootstrap, seed=0, n_permutations=0)

    def with_verdicts() -> object:
        found = declared.evaluate(samples, metrics, bootstrap=args.bootstrap, seed=0, n_permutations=PERMUTATIONS)
        return verdicts.judge(found, {m.name: facts_of(m.name) for m in found})

    analysis = {"without": _best(without, args.repeats), "with": _best(with_verdicts, args.repeats)}
    from vlfair.report import leaderboard

    with tempfile.TemporaryDirectory() as folder:
        paths = _board(args.runs, Path(folder))
        kept = leaderboard.latest_scoring
        board = {"with": _best(lambda: leaderboard.read_board(paths, []), args.repeats)}
        leaderboard.latest_scoring = lambda runs: (runs, [])  # type: ignore[assignment]
        try:
            board["without"] = _best(lambda: leaderboard.read_board(paths, []), args.repeats)
        finally:
            leaderboard.latest_scoring = kept
    rows = samples.frame.shape[0]
    print(f"traits study analysis, {rows:,} rows, {len(metrics)} metrics, {args.bootstrap} resamples: "
          f"{analysis['without']:.2f} s without verdicts, {analysis['with']:.2f} s with "
          f"({analysis['with'] / analysis['without']:.2f}x)")
    print(f"read_board over {args.runs} runs: {board['without']:.2f} s without the rescore rule, "
          f"{board['with']:.2f} s with ({board['with'] / board['without']:.2f}x)")
    print(f"analysis_without={analysis['without']:.3f} analysis_with={analysis['with']:.3f} "
          f"analysis_ratio={analysis['with'] / analysis['without']:.3f} board_without={board['without']:.3f} "
          f"board_with={board['with']:.3f} board_ratio={board['with'] / board['without']:.3f} rows={rows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
