"""Tiers for a family of 20 models at the traits study's size (issue 46: at most 30 s on 2 cores).

The demo world's biased encoder runs the traits probe (smart/dumb) once on FairFace-shaped data of
the study's size, 7 races x 2 genders x 1,000 images = 14,000 rows. Each of the other models is that
run with its own noise on every confidence and its own shift of one race's (so the models differ by
degrees), rescored from its samples into a run of its own: a family of ``--models`` runs. Then
``vlfair.compare.tiers.add_tiers`` tiers the board of the family, paired from the runs' samples
(``vlfair compare`` of every pair of runs, Holm over the pairs) with ``--bootstrap`` resamples and
``--permutations`` relabellings, and it is timed alone (making the runs is not).

The last line is ``tiers_seconds=T models=M rows_per_run=R pairs=P tiered_rows=N`` (P pairs of runs,
N board rows given a tier).

Usage: python benchmarks/tiers_speed.py [--quick] [--models M] [--per-cell N] [--bootstrap B] [--permutations P]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from vlfair.compare import rescore
from vlfair.compare.tiers import add_tiers
from vlfair.demo import datasets as world_data
from vlfair.demo.shipped import WORLDS, display_name, world_encoder
from vlfair.logging import disable_progress_bars
from vlfair.probes import measure_probe
from vlfair.report.leaderboard import read_board
from vlfair.samples import read_samples, write_samples
from vlfair.testing import reported_as_its_samples_give


def _model(base: Path, folder: Path, index: int) -> Path:
    """Run ``index`` of the family: the base run's confidences with noise and one race's shift, rescored."""
    raw = folder / f"raw-{index}"
    shutil.copytree(base, raw)
    content = json.loads((raw / "results.json").read_text())
    samples, _ = read_samples(raw / "samples.parquet")
    rng = np.random.default_rng(index)
    frame = samples.frame
    column = "confidence smart/dumb"
    shift = np.where(frame["race"].to_numpy() == "White", 0.002 * index, 0.0)
    frame[column] = np.clip(frame[column].to_numpy(float) + shift + rng.normal(0, 0.01, len(frame)), 0.0, 1.0)
    content["model"] = {**content["model"], "name": f"model {index:02d}", "spec": f"model-{index:02d}"}
    stored = {key: value for key, value in content.items() if key not in ("metrics", "published", "samples")}
    content["samples"] = write_samples(samples, raw / "samples.parquet", stored)
    (raw / "results.json").write_text(json.dumps(content))
    reported_as_its_samples_give(raw)  # the run those samples make: rescore refuses values they do not give
    rescore(raw, folder / f"model-{index:02d}")
    return folder / f"model-{index:02d}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=20, help="models in the family (default 20)")
    parser.add_argument("--per-cell", type=int, default=1000, help="images per race x gender cell (default 1000)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="paired resamples (default 1000)")
    parser.add_argument("--permutations", type=int, default=10_000, help="paired relabellings (default 10,000)")
    parser.add_argument("--quick", action="store_true",
                        help="4 models, 20 images per cell, 100 resamples (a smoke test)")
    args = parser.parse_args(argv)
    models, per_cell, bootstrap, permutations = ((4, 20, 100, 200) if args.quick else
                                                 (args.models, args.per_cell, args.bootstrap, args.permutations))
    disable_progress_bars()
    print(f"machine: {platform.processor() or platform.machine()}, {platform.system()}; {models} models x "
          f"{per_cell * 14:,} rows (traits, smart/dumb), {bootstrap} paired resamples, {permutations:,} relabellings")
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        encoder = world_encoder(WORLDS["biased"], root / "cache", name=display_name("biased"))
        settings = {"per_cell": None, "gradcam": None, "pairs": [["smart", "dumb"]], "bootstrap": 200}
        measure_probe("traits", encoder, world_data.fairface(per_cell=per_cell), cache_dir=root / "cache",
                      settings=settings).write(root / "base")
        family = [_model(root / "base", root / "family", i) for i in range(models)]
        board = read_board([str(path) for path in family])
        start = time.perf_counter()
        tiered = add_tiers(board, board.attrs["paths"], bootstrap=bootstrap, n_permutations=permutations)
        seconds = time.perf_counter() - start
    planted = tiered[(tiered["metric"] == "trait_anova") & tiered["subset"].str.contains('"gender"')]
    for subset, rows in planted.groupby("subset"):
        print(f"trait_anova {subset}, model: tier: "
              + ", ".join(f"{m[-2:]}:{t:.0f}" for m, t in zip(rows["model"], rows["tier"])))
    print(f"tiers_seconds={seconds:.2f} models={models} rows_per_run={per_cell * 14} "
          f"pairs={models * (models - 1) // 2} tiered_rows={int(tiered['tier'].notna().sum())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
