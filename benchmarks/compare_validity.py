"""Validity of vlfair compare: does a control encoder differ from itself retrained with another seed?

    python benchmarks/compare_validity.py --seeds 3 [--jobs 2] [--cache-dir DIR]

The demo world's control encoder (no planted bias) is trained with seed 0 and with seeds 1..N
(``TrainingConfig(seed=s)``: other captions, image noise, initialisation and batches; cached in
``--cache-dir``). Every probe runs on the demo's evaluation data with each, and ``vlfair
compare`` sets seed 0 against each other seed. Neither encoder has a bias, so a bias measure
should differ at no more than the nominal rate: it prints, per probe, how many bias-measure
differences were declared (a verdict other than "no difference detected") and how often the
paired 95 % interval of A - B covers 0, with a binomial test of the pooled coverage against 95 %
(the two encoders are different models, so their true values need not be equal: coverage can
only fall short of 95 % for that reason, which the test then shows). Its last line is
``differences=N declared=K paired_covers_zero=C median_width_ratio=R``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

from vlfair.compare import compare_runs
from vlfair.defaults import CONFIDENCE
from vlfair.demo.entries import PROBES, measure

sys.path.insert(0, str(Path(__file__).parent))
from validity_sweep import _train  # noqa: E402  (the sweep's training of one encoder, one process each)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="retrained seeds 1..N set against seed 0 (default 3)")
    parser.add_argument("--jobs", type=int, default=2, help="trainings at once (default 2)")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: the shipped training's)")
    parser.add_argument("--cache-dir", default=None,
                        help="where trained encoders are kept (default: a temporary folder)")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1:
        parser.error("--seeds and --jobs must be at least 1")
    start = time.perf_counter()
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="vlfair-compare-validity-")
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
        futures = {seed: pool.submit(_train, "control", seed, cache_dir, args.steps, 1)
                   for seed in range(args.seeds + 1)}
        paths = {seed: future.result() for seed, future in futures.items()}
    trained = time.perf_counter() - start

    from vlfair.models import load_encoder

    tally: dict[str, Counter] = {}
    widths, covered, total = [], 0, 0
    with tempfile.TemporaryDirectory() as work:
        out = Path(work)
        encoders = {f"seed{seed}": load_encoder(path, dtype="float32") for seed, path in paths.items()}
        measure(encoders, out, log=lambda _: None)  # every name but "biased" runs the control world's probes
        for seed in range(1, args.seeds + 1):
            for probe, _ in PROBES:
                comparison = compare_runs([out / "seed0" / probe, out / f"seed{seed}" / probe])
                for entry in comparison.content["differences"]:
                    if entry["neutral"] is None:
                        continue
                    counts = tally.setdefault(probe, Counter())
                    counts["differences"] += 1
                    counts["declared"] += entry["verdict"] != "no_difference"
                    ci, apart = entry["difference_ci"], entry["unpaired_ci"]
                    if ci:
                        total += 1
                        covered += ci[0] <= 0 <= ci[1]
                        counts["covers"] += ci[0] <= 0 <= ci[1]
                        if apart and apart[1] > apart[0]:
                            widths.append((ci[1] - ci[0]) / (apart[1] - apart[0]))
    print(f"compare validity: control seed 0 vs seeds 1..{args.seeds}, {time.perf_counter() - start:.0f} s "
          f"({trained:.0f} s training)")
    for probe, counts in tally.items():
        print(f"  {probe:<15} {counts['differences']:>4} bias-measure differences, {counts['declared']:>3} declared, "
              f"paired CI covers 0 in {counts['covers']}")
    differences = sum(c["differences"] for c in tally.values())
    declared = sum(c["declared"] for c in tally.values())
    test = scipy_stats.binomtest(covered, total, CONFIDENCE) if total else None
    if test is not None:
        print(f"pooled: {declared}/{differences} declared ({declared / max(differences, 1):.1%}); "
              f"paired CI covers 0 in {covered}/{total} = {covered / total:.1%} "
              f"(binomial test against {CONFIDENCE:.0%}: p = {test.pvalue:.2g})")
    ratio = float(np.median(widths)) if widths else float("nan")
    print(f"differences={differences} declared={declared} paired_covers_zero={covered}/{total} "
          f"median_width_ratio={ratio:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
