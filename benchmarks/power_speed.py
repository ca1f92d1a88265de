"""`vlfair power` on a run of a study's size (issue 46: at most 10 s on 2 cores).

The demo world's biased encoder runs the professions probe once on professions data of about 14,000 rows
(4 professions x 2 genders x 4 races x ``--per-cell`` images), with the probe's default 1,000 resamples.
Then `vlfair power RUN --metric group_score_gap --subset {doctor, gender} --effect X` is timed: in this
process (reading the run, declaring its metrics, resampling the one asked about, the answer), and, unless
``--quick``, as a user runs it, in a fresh interpreter (imports included). Making the run is not timed.

The last line is ``power_seconds=T power_cli_seconds=C rows=N`` (C: nan with ``--quick``).

Usage: python benchmarks/power_speed.py [--quick] [--per-cell N] [--effect X]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vlfair.cli import main as vlfair_main
from vlfair.demo import datasets as world_data
from vlfair.demo.shipped import WORLDS, display_name, world_encoder
from vlfair.logging import disable_progress_bars
from vlfair.probes import measure_probe

SUBSET = {"attribute": "gender", "profession": "doctor"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-cell", type=int, default=440, help="images per profession x gender x race cell "
                                                                  "(default 440: 14,080 rows)")
    parser.add_argument("--effect", type=float, default=0.5, help="the gap to plan for (default 0.5)")
    parser.add_argument("--quick", action="store_true", help="10 images per cell, no fresh interpreter (a smoke test)")
    args = parser.parse_args(argv)
    per_cell = 10 if args.quick else args.per_cell
    disable_progress_bars()
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        encoder = world_encoder(WORLDS["biased"], root / "cache", name=display_name("biased"))
        data = world_data.professions(per_cell=per_cell)
        print(f"machine: {platform.processor() or platform.machine()}, {platform.system()}; professions run of "
              f"{data.num_rows:,} rows, 1,000 resamples")
        measure_probe("professions", encoder, data, cache_dir=root / "cache").write(root / "run")
        command = ["power", str(root / "run"), "--metric", "group_score_gap", "--subset", json.dumps(SUBSET),
                   "--effect", str(args.effect)]
        said = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(said):
            status = vlfair_main(command)
        seconds = time.perf_counter() - start
        assert status == 0, f"vlfair power exited with {status}"
        print(said.getvalue().rstrip())
        cold = float("nan")
        if not args.quick:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "vlfair", *command], check=True, capture_output=True)
            cold = time.perf_counter() - start
    print(f"power_seconds={seconds:.2f} power_cli_seconds={cold:.2f} rows={data.num_rows}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
