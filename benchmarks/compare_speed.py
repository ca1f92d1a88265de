"""vlfair compare and vlfair rescore at the traits study's size, against re-running the probe.

Two encoders (the demo world's biased and control ones, shipped with vlfair) run the traits probe
on FairFace-shaped data of the study's size: 7 races x 2 genders x 1,000 images = 14,000 rows,
6 trait pairs (the study's number; of its words the world's encoders read only "smart" and "dumb",
and the probe leaves out a pair whose prompts a model reads as one, so the other five pairs are
words of the world's vocabulary: the work is the study's, the words are not). It measures in one run:

  (a) re-running the probe from cached embeddings (the image embeddings are on disk: the second
      run of each encoder), the way to get the numbers again without samples.parquet
  (b) ``vlfair rescore`` of one run: every metric and table from samples.parquet (not written, as (a))
  (c) ``vlfair compare`` of the two runs: all metrics, 1,000 paired resamples, the paired test
  and the size of samples.parquet.

The last line is ``compare_seconds=C rescore_seconds=R compare_vs_rerun=X rescore_vs_rerun=Y
samples_bytes=S`` with X = c / (a of both runs) and Y = b / (a of one run).

Usage: python benchmarks/compare_speed.py [--quick] [--per-cell N] [--bootstrap B]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

from vlfair.compare import compare_runs, rescore
from vlfair.compare.render import write_comparison
from vlfair.demo import datasets as world_data
from vlfair.demo.shipped import WORLDS, display_name, world_encoder
from vlfair.logging import disable_progress_bars
from vlfair.probes import measure_probe

# six pairs the world's encoders read as different words (see the docstring)
PAIRS = [["smart", "dumb"], ["happy", "sad"], ["politician", "actor"], ["athlete", "politician"],
         ["hospital", "gym"], ["actor", "athlete"]]


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    value = function(*args, **kwargs)
    return value, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-cell", type=int, default=1000, help="images per race x gender cell (default 1000)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="paired resamples (default 1000)")
    parser.add_argument("--quick", action="store_true",
                        help="20 images per cell, 2 trait pairs, 100 resamples (a smoke test)")
    args = parser.parse_args(argv)
    per_cell, bootstrap, pairs = (20, 100, PAIRS[:2]) if args.quick else (args.per_cell, args.bootstrap, PAIRS)
    disable_progress_bars()
    print(f"machine: {platform.processor() or platform.machine()}, {platform.system()}; traits study size: "
          f"{per_cell} images per cell x 14 cells, {len(pairs)} trait pairs, {bootstrap} paired resamples")
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        data = world_data.fairface(per_cell=per_cell)
        encoders = {}
        for name in ("biased", "control"):
            encoders[name] = world_encoder(WORLDS[name], root / "cache", name=display_name(name))
        settings = {"per_cell": None, "gradcam": None, "bootstrap": bootstrap, "pairs": pairs}  # the study's prompt
        rerun = {}
        for name, encoder in encoders.items():
            measure_probe("traits", encoder, data, cache_dir=root / "cache", settings=settings)  # embeddings cached
            run, rerun[name] = timed(measure_probe, "traits", encoder, data, cache_dir=root / "cache",
                                     settings=settings)
            run.write(root / name)
        samples_bytes = (root / "biased" / "samples.parquet").stat().st_size
        _, rescore_seconds = timed(rescore, root / "biased", None)  # as (a): measured, not written
        comparison, compare_seconds = timed(compare_runs, [root / "biased", root / "control"], bootstrap=bootstrap)
        _, write_seconds = timed(write_comparison, comparison, root / "comparison")
        rows = comparison.content["rows"]["compared"]
        print(f"(a) re-run from cached embeddings: biased {rerun['biased']:.2f} s, control {rerun['control']:.2f} s")
        print(f"(b) rescore from samples.parquet: {rescore_seconds:.2f} s")
        print(f"(c) compare: {compare_seconds:.2f} s for {len(comparison.content['differences'])} differences on "
              f"{rows} paired rows (writing comparison.json, tables and comparison.html: {write_seconds:.2f} s more)")
        print(f"samples.parquet: {samples_bytes / 1e6:.2f} MB for {rows} rows")
    both = rerun["biased"] + rerun["control"]
    print(f"compare_seconds={compare_seconds:.2f} rescore_seconds={rescore_seconds:.2f} "
          f"compare_vs_rerun={compare_seconds / both:.3f} rescore_vs_rerun={rescore_seconds / rerun['biased']:.3f} "
          f"samples_bytes={samples_bytes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
