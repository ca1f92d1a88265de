"""Validity over retraining: are the demo world's planted effects found whatever the training seed?

    python benchmarks/validity_sweep.py --seeds 5 [--models encoders|answerers|both] [--jobs 2]
        [--device cpu|cuda] [--answerer KEY=VALUE ...] [--cache-dir DIR] [--json FILE]

For each seed it trains the biased and the control world model afresh, of each kind asked for:
the encoders (``TrainingConfig(seed=s)``) and the answerers (``AnswererConfig(seed=s)``, with
``--answerer`` changing a field of their training: an experiment over seeds), each seed drawing
other training captions, image noise, initial weights and batches; trainings are cached in
``--cache-dir``. It then runs the demo's measures on the demo's evaluation data and prints, per
kind, two tables: how often each planted effect is detected with its planted sign, and how often
each control interval covers its neutral value (with a binomial test of the pooled coverage against
the nominal 95 %), and how many trainings were valid on their own (every planted effect found, no
false alarm). Its last line is ``planted_detected=A/B control_coverage=C/D coverage_p=P
valid_trainings=V/T``, over every kind swept.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from scipy import stats as scipy_stats

from vlfair.defaults import CONFIDENCE
from vlfair.demo.entries import valid
from vlfair.demo.shipped import WORLDS

SWEPT = ("biased", "control")
KINDS = ("encoders", "answerers")


def _answerer_config(seed: int, overrides: dict[str, Any]):
    from vlfair.demo.generative import answerer_config

    return dataclasses.replace(answerer_config(seed), **overrides)


def _train(kind: str, world: str, seed: int, cache_dir: str, steps: int | None, threads: int,
           overrides: dict[str, Any], device: str) -> str:
    import torch

    torch.set_num_threads(threads)
    if kind == "encoders":
        from vlfair.demo.train import TrainingConfig, trained_encoder

        training = TrainingConfig(seed=seed, **({"steps": steps} if steps else {}))
        return str(trained_encoder(WORLDS[world], cache_dir, training, name=f"{world} (seed {seed})", progress=False,
                                   log=lambda _: None))
    from vlfair.demo.generative import answerer_path

    config = _answerer_config(seed, {**overrides, **({"steps": steps} if steps else {})})
    return str(answerer_path(WORLDS[world], cache_dir, retrain=True, config=config,
                             name=f"{world} answerer (seed {seed})", log=lambda _: None, device=device))


def _trained_and_measured(kind: str, world: str, seed: int, cache_dir: str, steps: int | None, threads: int,
                          overrides: dict[str, Any], device: str) -> list[dict]:
    """One training of one world's model of ``kind``, measured by the demo's measures of that kind."""
    from vlfair.logging import disable_progress_bars

    disable_progress_bars()  # many at once: the sweep says when each is done
    path = _train(kind, world, seed, cache_dir, steps, threads, overrides, device)
    model = _load(kind, path)
    with tempfile.TemporaryDirectory() as out:
        return _measure(kind, {world: model}, Path(out))


def sweep(seeds: int, cache_dir: str, jobs: int, steps: int | None, kinds: tuple[str, ...] = ("encoders",),
          overrides: dict[str, Any] | None = None, device: str = "cpu") -> dict[int, list[dict]]:
    """Every seed's entries: each (kind, world, seed) trained and measured, ``jobs`` at once (in
    processes of their own; in this one with ``jobs=1``)."""
    threads = max(1, (os.cpu_count() or 1) // jobs)
    tasks = [(kind, world, seed) for seed in range(seeds) for kind in kinds for world in SWEPT]
    arguments = (cache_dir, steps, threads, overrides or {}, device)
    runs: dict[int, list[dict]] = {seed: [] for seed in range(seeds)}

    def done(task: tuple[str, str, int], entries: list[dict]) -> None:
        runs[task[2]] += entries
        print(f"  trained and measured the {task[1]} {task[0][:-1]} of seed {task[2]}", file=sys.stderr, flush=True)

    if jobs == 1:
        for task in tasks:
            done(task, _trained_and_measured(*task, *arguments))
        return runs
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        futures = {task: pool.submit(_trained_and_measured, *task, *arguments) for task in tasks}
        for task, future in futures.items():
            done(task, future.result())
    return runs


def _load(kind: str, path: str) -> Any:
    from vlfair.models import load_encoder

    return load_encoder(path if kind == "encoders" else f"lvlm:{path}", dtype="float32", device="cpu")


# the sweep keeps each run's entries and drops its folder: drawing the runs' plots would be wasted work
NOT_DRAWN = "Figures: not drawn (benchmarks/validity_sweep.py keeps the numbers only)."


def _measure(kind: str, models: dict[str, Any], out: Path) -> list[dict]:
    if kind == "encoders":
        from vlfair.demo.entries import measure

        return measure(models, out, log=lambda _: None, without_figures=NOT_DRAWN)
    from vlfair.demo.generative import measure as measure_answerers

    return measure_answerers(models, out, log=lambda _: None, without_figures=NOT_DRAWN)


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
                          ("Control (and zero-effect) intervals: cover the neutral value",
                           lambda e: e["planted_sign"] == 0)):
        lines += ["", title, f"{'model':<17} {'probe':<15} {'measure and subset':<70} {'rate':>5}  per seed"]
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
            lines.append(f"{key[0]:<17} {key[1]:<15} {(key[2] + ' | ' + key[3])[:70]:<70} {hits}/{len(entries)}  "
                         + ("(equal in every seed, not pooled) " if fixed else "")
                         + "; ".join(_fmt(e) for e in entries))
    return lines, (planted[0], planted[1]), (covered[0], covered[1])


def valid_trainings(runs: dict[int, list[dict]]) -> list[tuple[int, str, bool]]:
    """(seed, model, valid on its own): a biased model that finds every planted effect with its sign, a
    control model with no false alarm."""
    found = []
    for seed, entries in runs.items():
        for model in dict.fromkeys(e["encoder"] for e in entries):
            own = [e for e in entries if e["encoder"] == model]
            found.append((seed, model, all(valid(e) for e in own)))
    return found


def _override(text: str) -> tuple[str, Any]:
    """``--answerer KEY=VALUE``: a field of AnswererConfig, its value read as its type."""
    from vlfair.demo.answerer import AnswererConfig

    key, _, value = text.partition("=")
    fields = {f.name: f for f in dataclasses.fields(AnswererConfig)}
    if key not in fields or key == "seed" or not value:
        raise argparse.ArgumentTypeError(f"{text!r}: give KEY=VALUE with KEY one of "
                                         f"{', '.join(k for k in fields if k != 'seed')}")
    default = getattr(AnswererConfig(), key)
    if isinstance(default, bool):
        if value.lower() not in ("true", "false"):
            raise argparse.ArgumentTypeError(f"{key} is true or false, not {value!r}")
        return key, value.lower() == "true"
    try:
        return key, type(default)(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{key} is a {type(default).__name__}, not {value!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="training seeds 0..N-1 (default 5)")
    parser.add_argument("--models", choices=[*KINDS, "both"], default="both",
                        help="which kind of world model to retrain (default both)")
    parser.add_argument("--jobs", type=int, default=2, help="trainings at once (default 2)")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: the shipped training's)")
    parser.add_argument("--answerer", action="append", type=_override, default=[], metavar="KEY=VALUE",
                        help="change one field of the answerers' training (repeatable), e.g. batch_size=128")
    parser.add_argument("--device", default="cpu", help="where the answerers train (default cpu; cuda on a GPU)")
    parser.add_argument("--cache-dir", default=None,
                        help="where the trained models are kept (default: a temporary folder)")
    parser.add_argument("--json", type=Path, default=None, help="also write every entry of every seed here")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1:
        parser.error("--seeds and --jobs must be at least 1")
    kinds = KINDS if args.models == "both" else (args.models,)
    start = time.perf_counter()
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="vlfair-sweep-")
    runs = sweep(args.seeds, cache_dir, args.jobs, args.steps, kinds, dict(args.answerer), args.device)
    lines, planted, covered = tally(runs)
    trainings = valid_trainings(runs)
    print(f"validity sweep of the {' and the '.join(kinds)}: {args.seeds} seeds, {time.perf_counter() - start:.0f} s "
          f"(trained and measured {args.jobs} at once)"
          + (f"; answerers' training changed: {dict(args.answerer)}" if args.answerer else ""))
    print("\n".join(lines))
    test = scipy_stats.binomtest(covered[0], covered[1], CONFIDENCE)
    low, high = test.proportion_ci(CONFIDENCE)
    print(f"\npooled control coverage {covered[0]}/{covered[1]} = {covered[0] / covered[1]:.1%} "
          f"(95 % Clopper-Pearson {low:.1%} to {high:.1%}; "
          f"binomial test against {CONFIDENCE:.0%}: p = {test.pvalue:.2g})")
    print("valid on its own (every planted effect found / no false alarm): "
          + "; ".join(f"{model} seed {seed}: {'yes' if ok else 'no'}" for seed, model, ok in trainings))
    if args.json:
        args.json.write_text(json.dumps({str(k): v for k, v in runs.items()}, indent=1))
    print(f"planted_detected={planted[0]}/{planted[1]} control_coverage={covered[0]}/{covered[1]} "
          f"coverage_p={test.pvalue:.3g} valid_trainings={sum(ok for *_, ok in trainings)}/{len(trainings)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
