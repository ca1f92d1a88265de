"""The throughput benchmark runs and prints its contract line (no timing is asserted here)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "embed_throughput.py"


def test_benchmark_prints_its_ratios():
    result = subprocess.run([sys.executable, str(SCRIPT), "--images", "12", "--naive-images", "3", "--batch-size", "4"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    last = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"ratio_vs_forward=[\d.]+ ratio_vs_naive=[\d.]+ cache_speedup=\d+", last), last
    for label in ("(a) vlfair end to end", "(b) raw model forward", "(c) naive per-image", "(d) cached re-run", "peak RSS"):
        assert label in result.stdout
