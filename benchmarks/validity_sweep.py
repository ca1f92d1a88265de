"""Validity over retraining: are the demo world's planted effects found whatever the training seed?

    python benchmarks/validity_sweep.py --seeds 5 [--jobs 2] [--cache-dir DIR] [--json FILE]

For each seed it trains the biased and the control world encoder afresh (``TrainingConfig(seed=s)``:
other training captions, image noise, initialisation and batches; cached in ``--cache-dir``), runs
the demo's measures on the demo's evaluation data, and prints two tables: how often each planted
effect is detected with its planted sign, and how often each control interval covers its neutral
value (with a binomial test of the pooled coverage against the nominal 95 %). Its last line is
``planted_detected=A/B control_coverage=C/D coverage_p=P``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from scipy import stats as scipy_stats

from vlfair.demo.run import CONFIDENCE, measure, valid
from vlfair.demo.shipped import WORLDS
from vlfair.demo.train import TrainingConfig, trained_encoder

SWEPT = ("biased", "control")


def _train(world: str, seed: int, cache_dir: str, steps: int | None, threads: int) -> str:
    import torch

    torch.set_num_threads(threads)
    training = TrainingConfig(seed=seed, **({"steps": steps} if steps else {}))
    return str(trained_encoder(WORLDS[world], cache_dir, training, name=f"{world} (seed {seed})", progress=False,
                               log=lambda _: None))


def train_all(seeds: int, cache_dir: str, jobs: int, steps: int | None) -> dict[tuple[str, int], str]:
    threads = max(1, (os.cpu_count() or 1) // jobs)
    tasks = [(world, seed) for seed in range(seeds) for world in SWEPT]
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        futures = {task: pool.submit(_train, *task, cache_dir, steps, threads) for task in tasks}
        paths = {}
        for task, future in futures.items():
            paths[task] = future.result()
            print(f"  trained {task[0]} seed {task[1]}: {paths[task]}", file=sys.stderr, flush=True)
    return paths


def _key(entry: dict) -> tuple[str, str, str, str]:
    subset = ", ".join(f"{k}={v}" for k, v in entry["subset"].items())
    return entry["encoder"], entry["probe"], entry["measure"], subset


def _fmt(entry: dict) -> str:
    if entry["ci"] is None:
        return f"{entry['measured']:.3g} (p={entry['p_value']:.2g})"
    return f"{entry['measured']:.3g} [{entry['ci'][0]:.3g}, {entry['ci'][1]:.3g}]"


def tally(runs: dict[int, list[dict]]) -> tuple[list[str], tuple[int, int], tuple[int, int]]:
    rows: dict[tuple, list[dict]] = defaultdict(list)
    for entries in runs.values():
        for entry in entries:
            rows[_key(entry)].append(entry)
    lines, planted, covered = [], [0, 0], [0, 0]
    for title, wanted in (("Planted effects: detected with the planted sign", lambda e: e["planted_sign"] != 0),
                          ("Control (and zero-effect) intervals: cover the neutral value", lambda e: e["planted_sign"] == 0)):
        lines += ["", title, f"{'encoder':<8} {'probe':<15} {'measure and subset':<70} {'rate':>5}  per seed"]
        for key, entries in rows.items():
            if not wanted(entries[0]):
                continue
            hits = sum(valid(e) for e in entries)
            # An entry equal in every seed does not depend on the training (word influence: the
            # generator is planted, and the classifier reads gender without error); pooling its
            # copies would count one interval several times.
            fixed = len(entries) > 1 and all(_fmt(e) == _fmt(entries[0]) for e in entries)
            if not fixed:
                counter = planted if entries[0]["planted_sign"] != 0 else covered
                counter[0] += hits
                counter[1] += len(entries)
            lines.append(f"{key[0]:<8} {key[1]:<15} {(key[2] + ' | ' + key[3])[:70]:<70} {hits}/{len(entries)}  "
                         + ("(equal in every seed, not pooled) " if fixed else "") + "; ".join(_fmt(e) for e in entries))
    return lines, (planted[0], planted[1]), (covered[0], covered[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="training seeds 0..N-1 (default 5)")
    parser.add_argument("--jobs", type=int, default=2, help="trainings at once (default 2)")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: the shipped training's)")
    parser.add_argument("--cache-dir", default=None, help="where the trained encoders are kept (default: a temporary folder)")
    parser.add_argument("--json", type=Path, default=None, help="also write every entry of every seed here")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1:
        parser.error("--seeds and --jobs must be at least 1")
    start = time.perf_counter()
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="vlfair-sweep-")
    paths = train_all(args.seeds, cache_dir, args.jobs, args.steps)
    trained = time.perf_counter() - start

    from vlfair.models import load_encoder

    runs = {}
    with tempfile.TemporaryDirectory() as out:
        for seed in range(args.seeds):
            encoders = {world: load_encoder(paths[world, seed], dtype="float32") for world in SWEPT}
            runs[seed] = measure(encoders, Path(out) / str(seed), log=lambda _: None)
    lines, planted, covered = tally(runs)
    print(f"validity sweep: {args.seeds} seeds, {time.perf_counter() - start:.0f} s "
          f"({trained:.0f} s training, {args.jobs} at once)")
    print("\n".join(lines))
    test = scipy_stats.binomtest(covered[0], covered[1], CONFIDENCE)
    low, high = test.proportion_ci(CONFIDENCE)
    print(f"\npooled control coverage {covered[0]}/{covered[1]} = {covered[0] / covered[1]:.1%} "
          f"(95 % Clopper-Pearson {low:.1%} to {high:.1%}; binomial test against {CONFIDENCE:.0%}: p = {test.pvalue:.2g})")
    if args.json:
        args.json.write_text(json.dumps({str(k): v for k, v in runs.items()}, indent=1))
    print(f"planted_detected={planted[0]}/{planted[1]} control_coverage={covered[0]}/{covered[1]} "
          f"coverage_p={test.pvalue:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
