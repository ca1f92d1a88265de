"""Calibration: how often does each of vlfair's verdicts call a bias where there is none, and how often does it
find one that is there?

    python benchmarks/calibration.py [--quick] [--worlds N] [--groups G] [--size N] [--family M]
        [--items I] [--k K] [--bootstrap B] [--permutations P] [--alpha A] [--shift D] [--seed S] [--json FILE]

Each of ``--worlds`` null worlds draws every group's values from one distribution (``--groups`` groups of
``--size`` rows: normal scores, gamma scores for the bias ratio, 0/1 answers for the rate gap and for each of three
languages' accuracy on the same rows, a ranking of items of balanced groups by random scores for the skews), and
judges each bias measure as a run judges it: the run's own path (``vlfair.probes.declared.evaluate`` with the
measure's statistic and reporter, then ``vlfair.verdicts.judge``), each measure by its rule (DESIGN "Verdicts"): a
signed one (the bias ratio) by its interval, a bounded one (a largest gap, an F, a rate gap, a cross-lingual gap,
MaxSkew, NDKL) by its test against no difference. The skews' test is the relabelling of the items' groups, run here
by brute force on ``measures.ranking_skew`` (the probe's engine equals it: tests/test_verdicts.py). Beside each rule,
the rule it replaced ("old"): a bounded statistic's percentile interval excluding its neutral value, which calls a
bias in nearly every null world. A calibrated rule calls a bias in a share alpha of the null worlds (the goal:
0.6-1.4 alpha, 0.03-0.07 at alpha 0.05). A discrete statistic takes few values, and no exact test of it can
reject in more than its attainable size of the null worlds (the largest tail probability of its null distribution
at most alpha): MaxSkew (the top k's largest group count; drawn by brute force at this design: 0.005 at 4 groups x
10 items, k = 8) and the rate gap (the range of the groups' counts of ones; exact, multivariate hypergeometric given
a world's ones: 0.033 at 4 groups x 20 answers). Where that size is below 0.9 alpha, the goal is 0.6 times it up
to alpha.

Each world also holds a family of ``--family`` gaps judged together, as a run's tests are: the share of worlds
where any is called, raw, after Holm (the run's default: the goal <= alpha) and after Benjamini-Hochberg. The same
worlds with a bias planted (group g0 ``--shift`` standard deviations up, 30 % more in its ratio's scores, its rates
and one language's accuracy 0.25 higher, its items' scores ``--shift`` up in the ranking) give each rule's power.
Every rate is printed with its Clopper-Pearson interval.

Last line: ``gap=R ratio=R anova=R rate_gap=R cross_lingual=R max_skew=R ndkl=R old_gap_interval=R
old_max_skew_interval=R old_ndkl_interval=R family_raw=R family_holm=R family_bh=R power_gap=R ...
max_skew_attainable=S ndkl_attainable=S rate_gap_attainable=S worlds=N seconds=T``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from vlfair import measures, stats, verdicts
from vlfair.measures.catalog import facts_of
from vlfair.measures.known import DECLARED
from vlfair.measures.statistics import ColumnRange, FStatistic, Range, Ratio
from vlfair.probes import declared
from vlfair.samples import Samples

RUN_RULES = ("gap", "ratio", "anova", "rate_gap", "cross_lingual", "max_skew", "ndkl")
OLD_RULES = ("old_gap_interval", "old_max_skew_interval", "old_ndkl_interval")
FAMILY_RULES = ("family_raw", "family_holm", "family_bh")
LANGUAGES = ("l0", "l1", "l2")


def _world(rng: np.random.Generator, args: argparse.Namespace, planted: bool) -> pd.DataFrame:
    """One world's rows: its group, a normal score, a gamma score, a 0/1 answer and one per language, each with
    the planted bias in group g0 where ``planted``."""
    groups = np.repeat([f"g{i}" for i in range(args.groups)], args.size)
    first = (groups == "g0") if planted else np.zeros(groups.size, dtype=bool)
    frame = {"group": groups, "score": rng.normal(size=groups.size) + args.shift * first,
             "positive": rng.gamma(2.0, 1.0, groups.size) * np.where(first, 1.3, 1.0),
             "hit": (rng.random(groups.size) < 0.5 + 0.25 * first).astype(float)}
    for j in range(args.family):
        frame[f"family{j}"] = rng.normal(size=groups.size)
    for j, language in enumerate(LANGUAGES):  # every row's answers in three languages; l0 better where planted
        frame[language] = (rng.random(groups.size) < 0.6 + (0.25 if planted and j == 0 else 0.0)).astype(float)
    return pd.DataFrame(frame)


def _declared(name: str, statistic: object, subset: dict | None = None, **options: object) -> declared.Declared:
    return declared.Declared(name, subset or {}, statistic, report=DECLARED[name][1], **options)


def _run_verdicts(frame: pd.DataFrame, args: argparse.Namespace, seed: int) -> dict[str, bool]:
    """The world's measures as one run measures and judges them; whether each is detected (uncorrected: each
    rule's own rate), the old interval rule of the gap, and the family of gaps raw, after Holm and after BH."""
    metrics = [_declared("group_score_gap", Range("score"), group="group"),
               _declared("bias_ratio", Ratio("positive", "g0", "g1"), group="group"),
               _declared("trait_anova", FStatistic("score"), group="group"),
               _declared("group_rate_gap", Range("hit"), group="group"),
               declared.Declared("cross_lingual_gap", {}, ColumnRange(LANGUAGES), apart=True),
               *(_declared("group_score_gap", Range(f"family{j}"), {"member": j}, group="group")
                 for j in range(args.family))]
    found = declared.evaluate(Samples(frame, {}), metrics, bootstrap=args.bootstrap, confidence=1 - args.alpha,
                              seed=seed, n_permutations=args.permutations)
    facts = {m.name: facts_of(m.name) for m in found}
    alone, family = found[:5], found[5:]
    verdicts.judge(alone, facts, correction="none", confidence=1 - args.alpha)
    called = {rule: bool(m.verdict and m.verdict["detected"])
              for rule, m in zip(("gap", "ratio", "anova", "rate_gap", "cross_lingual"), alone)}
    called["old_gap_interval"] = _raw_excludes(frame, args, seed)
    for rule, correction in zip(FAMILY_RULES, ("none", "holm", "bh")):
        verdicts.judge(family, facts, correction=correction, confidence=1 - args.alpha)
        called[rule] = any(m.verdict and m.verdict["detected"] for m in family)
    return called


def _raw_excludes(frame: pd.DataFrame, args: argparse.Namespace, seed: int) -> bool:
    """The old rule of a largest gap: its percentile bootstrap interval (the measure's resamples, not moved onto
    the value) excludes 0."""
    codes = np.unique(frame["group"].to_numpy(), return_inverse=True)[1]
    values = frame["score"].to_numpy(float)

    def gap(rows: np.ndarray) -> np.ndarray:  # (B, N) rows drawn within the groups
        drawn, groups = values[rows], codes[rows]
        means = np.stack([np.where(groups == g, drawn, np.nan) for g in range(codes.max() + 1)])
        means = np.nanmean(means, axis=2)
        return means.max(axis=0) - means.min(axis=0)

    low, _ = stats.bootstrap_interval(gap, codes, args.bootstrap, 1 - args.alpha, seed)
    return bool(low > 0)


def _ranking(rng: np.random.Generator, args: argparse.Namespace, planted: bool, seed: int) -> dict[str, bool]:
    """A ranking of balanced groups' items by random scores (g0's ``--shift`` up where planted): MaxSkew@k and
    NDKL@k judged by the relabelling test of the items' groups (brute force on measures.ranking_skew), and by
    the old rule (their percentile interval excluding 0)."""
    items = np.repeat([f"g{i}" for i in range(args.groups)], args.items)
    scores = rng.normal(size=(1, items.size)) + args.shift * planted * (items == "g0")
    k = args.k
    found = measures.ranking_skew(scores, items, k, seed=seed, bootstrap=args.bootstrap, confidence=1 - args.alpha)
    relabel = np.random.default_rng([seed, 7])
    null = [measures.ranking_skew(scores, relabel.permutation(items), k, bootstrap=0)
            for _ in range(args.permutations)]
    called = {}
    for name in ("max_skew", "ndkl"):
        observed = float(np.atleast_1d(found[name])[0])
        beyond = sum(float(np.atleast_1d(n[name])[0]) >= observed - 1e-12 for n in null)
        called[name] = (1 + beyond) / (1 + len(null)) < args.alpha
        ci = np.atleast_2d(found[f"{name}_ci"])[0]
        called[f"old_{name}_interval"] = bool(ci[0] > 0)
    return called


def attainable_size(args: argparse.Namespace, draws: int = 20_000) -> dict[str, float]:
    """The largest false-alarm rate at most alpha that an exact test of each ranking statistic has at this
    design (``--groups`` x ``--items`` items, top ``--k``): MaxSkew takes few values (the top k's largest group
    count), so its test rejects only past an atom of its null distribution. Under no difference the top k is a
    random k of the items whatever the scores, so the null distribution is drawn once, by brute force."""
    rng = np.random.default_rng(12345)
    items = np.repeat([f"g{i}" for i in range(args.groups)], args.items)
    found: dict[str, list[float]] = {"max_skew": [], "ndkl": []}
    for _ in range(draws):
        drawn = measures.ranking_skew(rng.normal(size=(1, items.size)), items, args.k, bootstrap=0)
        for name in found:
            found[name].append(float(np.atleast_1d(drawn[name])[0]))
    sizes = {name: _largest_tail(np.asarray(values), args.alpha) for name, values in found.items()}
    sizes["rate_gap"] = _rate_gap_attainable(args)
    return sizes


def _largest_tail(null: np.ndarray, alpha: float) -> float:
    """The largest P(T >= t) at most ``alpha`` over the values t that a statistic's null draws ``null`` take."""
    null = np.sort(np.round(null, 12))
    return max([float(np.mean(null >= t)) for t in np.unique(null) if np.mean(null >= t) <= alpha], default=0.0)


def _rate_gap_attainable(args: argparse.Namespace) -> float:
    """The rate gap's attainable size over the null worlds: its test relabels a world's 0/1 answers, so given the
    world's m ones its null distribution is the range of the groups' counts of ones over their arrangements
    (multivariate hypergeometric, steps of 1 / ``--size``); its attainable size at m is averaged over m's binomial
    law (each answer 1 with probability 1/2, as drawn). Exact: the count of arrangements with every group's count in
    [lo, hi] is the coefficient of x^m in (sum_c C(size, c) x^c for c in [lo, hi]) ** groups."""
    groups, size, rows = args.groups, args.size, args.groups * args.size

    def within(low: int, high: int) -> list[int]:  # arrangements with every count in [low, high], by m
        one = [math.comb(size, c) if low <= c <= high else 0 for c in range(size + 1)]
        found = [1]
        for _ in range(groups):
            found = [sum(found[i] * one[m - i] for i in range(max(0, m - size), min(m, len(found) - 1) + 1))
                     for m in range(len(found) + size)]
        return found

    # arrangements whose range is at most r: the windows [low, low + r] whose lowest count is low (every low: a
    # window may pass the largest count)
    at_most = [[0] * (rows + 1) for _ in range(size + 1)]  # [r][m]
    for r in range(size + 1):
        for low in range(size + 1):
            for m, (inside, above_low) in enumerate(zip(within(low, low + r), within(low + 1, low + r))):
                at_most[r][m] += inside - above_low
    attained = 0.0
    for m in range(rows + 1):
        total = math.comb(rows, m)
        below = [at_most[r][m] / total for r in range(size + 1)]  # P(range <= r)
        tails = [1.0 - (below[r - 1] if r else 0.0) for r in range(size + 1)]  # P(range >= r)
        attained += math.comb(rows, m) / 2**rows * max([t for t in tails if t <= args.alpha + 1e-12], default=0.0)
    return attained


def _rates(called: dict[str, int], worlds: int) -> dict[str, tuple[float, float, float]]:
    return {name: (count / worlds, *stats.proportion_interval(count, worlds)) for name, count in called.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 worlds, 100 resamples")
    parser.add_argument("--worlds", type=int, default=200)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--size", type=int, default=20, help="rows per group")
    parser.add_argument("--family", type=int, default=10, help="gaps judged together in one world")
    parser.add_argument("--items", type=int, default=10, help="ranked items per group (MaxSkew, NDKL)")
    parser.add_argument("--k", type=int, default=8, help="the top k of the ranking (MaxSkew, NDKL)")
    parser.add_argument("--bootstrap", type=int, default=500)
    parser.add_argument("--permutations", type=int, default=500)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--shift", type=float, default=1.0, help="the planted bias, in standard deviations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the rates here")
    args = parser.parse_args(argv)
    if args.quick:
        args.worlds, args.bootstrap, args.permutations = 20, 100, 100
    if not 1 <= args.k < args.groups * args.items:
        parser.error(f"--k must be from 1 to {args.groups * args.items - 1} (one below the items ranked)")
    for option in ("worlds", "groups", "size", "family", "items", "bootstrap", "permutations"):
        if getattr(args, option) < (2 if option in ("groups", "size") else 1):
            parser.error(f"--{option} must be at least {2 if option in ('groups', 'size') else 1}")
    if not 0 < args.alpha < 1:
        parser.error("--alpha must be between 0 and 1")
    started = time.perf_counter()
    null = {name: 0 for name in (*RUN_RULES, *OLD_RULES, *FAMILY_RULES)}
    power = {f"power_{name}": 0 for name in RUN_RULES}
    judged: dict[bool, Callable[[int], dict[str, bool]]] = {
        planted: lambda seed, planted=planted: {
            **_run_verdicts(_world(np.random.default_rng([seed, 0]), args, planted), args, seed),
            **_ranking(np.random.default_rng([seed, 1]), args, planted, seed)} for planted in (False, True)}
    for world in range(args.worlds):
        seed = args.seed * 1_000_003 + world
        for name, found in judged[False](seed).items():
            null[name] += found
        for name, found in judged[True](seed).items():
            if name in RUN_RULES:
                power[f"power_{name}"] += found
    seconds = time.perf_counter() - started
    print(f"{args.worlds} worlds with no difference and {args.worlds} with one planted: {args.groups} groups x "
          f"{args.size} rows, {args.bootstrap} resamples, {args.permutations} permutations, alpha {args.alpha:g}; "
          f"families of {args.family} gaps; planted shift {args.shift:g}")
    print(f"{'rule':<24}{'called':>8}{'rate':>8}   95 % interval   goal")
    attainable = attainable_size(args)
    goals = {**{name: f"{0.6 * args.alpha:.2f}-{1.4 * args.alpha:.2f}" for name in RUN_RULES},
             # a discrete statistic's exact test rejects with probability its attainable size (Monte Carlo
             # p-values at the next atom add a little), never more than alpha: the goal is between the two
             **{name: f"{0.6 * size:.3f}-{args.alpha:.2f} (discrete: attainable size {size:.3f})"
                for name, size in attainable.items() if size < 0.9 * args.alpha},
             **{name: "(the rule replaced)" for name in OLD_RULES}, "family_raw": "(none: uncorrected)",
             "family_holm": "<= alpha", "family_bh": "<= alpha", **{name: "(power)" for name in power}}
    rates = _rates({**null, **power}, args.worlds)
    for name, (rate, low, high) in rates.items():
        count = {**null, **power}[name]
        print(f"{name:<24}{count:>8}{rate:>8.3f}   [{low:.3f}, {high:.3f}]   {goals[name]}")
    if args.json:
        args.json.write_text(json.dumps({"rates": {k: v[0] for k, v in rates.items()}, "attainable": attainable,
                                         "worlds": args.worlds,
                                         "options": {k: v for k, v in vars(args).items() if k != "json"}},
                                        indent=1) + "\n")
    print(" ".join(f"{name}={rate:.3f}" for name, (rate, _, _) in rates.items())
          + "".join(f" {name}_attainable={size:.3f}" for name, size in attainable.items())
          + f" worlds={args.worlds} seconds={seconds:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
