"""Calibration: how often does each verdict rule call a bias where there is none?

    python benchmarks/calibration.py [--quick] [--worlds N] [--groups G] [--size N] [--family M]
        [--bootstrap B] [--permutations P] [--alpha A] [--seed S] [--json FILE]

Each of ``--worlds`` null worlds draws every group's scores from one distribution (no difference between
groups: ``--groups`` groups of ``--size`` rows; gamma scores for the bias ratio, 0/1 outcomes for the rate
gaps, a ranking of items of balanced groups by random scores for the skews), and applies each rule vlfair
judges a measure by to it: an interval that excludes the neutral value ("interval", at 1 - alpha), or a
permutation or F test's p below alpha ("test"). A calibrated rule calls a bias in a share alpha of the null
worlds (the goal: 0.03-0.07 at alpha 0.05). Each world also holds ``--family`` gaps tested together (a run's
several professions): the share of worlds where at least one is called, raw, after Holm (family-wise error,
the goal <= alpha) and after Benjamini-Hochberg. Every rate is printed with its Clopper-Pearson interval.

Last line: ``gap_interval=R gap_test=R ratio_interval=R ratio_test=R anova_test=R rate_gap_interval=R
cross_lingual_interval=R max_skew_interval=R ndkl_interval=R family_raw=R family_holm=R family_bh=R worlds=N
seconds=T``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from vlfair import measures, stats


def _excludes(ci: list[float] | None, neutral: float) -> bool:
    """Whether an interval lies wholly on one side of the neutral value (what the interval rule calls a bias)."""
    return ci is not None and (ci[0] > neutral or ci[1] < neutral)


def _rules(args: argparse.Namespace) -> dict[str, Callable[[np.random.Generator, int], bool]]:
    """Each rule: (one null world's random generator, its seed) -> whether it calls a bias there."""
    groups = np.repeat([f"g{i}" for i in range(args.groups)], args.size)
    resampling = {"bootstrap": args.bootstrap, "confidence": 1 - args.alpha}
    tested = {**resampling, "n_permutations": args.permutations}

    def gap(rng: np.random.Generator, seed: int) -> measures.GroupScoreGap:
        return measures.group_score_gap(rng.normal(size=groups.size), groups, seed=seed, **tested)

    def ratio(rng: np.random.Generator, seed: int) -> measures.BiasRatio:
        return measures.bias_ratio(rng.gamma(2.0, 1.0, groups.size), groups, "g0", "g1", seed=seed, **tested)

    def correct(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return np.where(rng.random(groups.size) < 0.6, "y", "n"), np.full(groups.size, "y")

    def ranking(rng: np.random.Generator, seed: int) -> measures.RankingSkew:
        items = np.repeat([f"g{i}" for i in range(args.groups)], 10)
        return measures.ranking_skew(rng.normal(size=(5, items.size)), items, 2 * args.groups, seed=seed,
                                     **resampling)

    return {
        "gap_interval": lambda rng, seed: _excludes(gap(rng, seed).max_gap_ci, 0.0),
        "gap_test": lambda rng, seed: gap(rng, seed).p_value < args.alpha,
        "ratio_interval": lambda rng, seed: _excludes(ratio(rng, seed).bias_ratio_ci, 1.0),
        "ratio_test": lambda rng, seed: ratio(rng, seed).p_value < args.alpha,
        "anova_test": lambda rng, seed: measures.trait_anova(rng.normal(size=groups.size), groups,
                                                             bootstrap=0).p_value < args.alpha,
        "rate_gap_interval": lambda rng, seed: _excludes(
            measures.group_rate_gap(*correct(rng), groups, seed=seed, **resampling).gap_ci, 0.0),
        "cross_lingual_interval": lambda rng, seed: _excludes(
            measures.cross_lingual_gap(*correct(rng), groups, seed=seed, **resampling).gap_ci, 0.0),
        "max_skew_interval": lambda rng, seed: _excludes(ranking(rng, seed).max_skew_ci, 0.0),
        "ndkl_interval": lambda rng, seed: _excludes(ranking(rng, seed).ndkl_ci, 0.0),
    }


def _family(args: argparse.Namespace, rng: np.random.Generator, seed: int) -> dict[str, bool]:
    """``--family`` gaps of one null world tested together: whether any is called raw, after Holm, after BH."""
    groups = np.repeat([f"g{i}" for i in range(args.groups)], args.size)
    p = [measures.group_score_gap(rng.normal(size=groups.size), groups, bootstrap=0, seed=seed + j,
                                  n_permutations=args.permutations).p_value for j in range(args.family)]
    return {"family_raw": min(p) < args.alpha, "family_holm": min(stats.holm(p)) < args.alpha,
            "family_bh": min(stats.benjamini_hochberg(p)) < args.alpha}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 worlds, 100 resamples")
    parser.add_argument("--worlds", type=int, default=200)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--size", type=int, default=20, help="rows per group")
    parser.add_argument("--family", type=int, default=10, help="gaps tested together in one world")
    parser.add_argument("--bootstrap", type=int, default=500)
    parser.add_argument("--permutations", type=int, default=500)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the rates here")
    args = parser.parse_args(argv)
    if args.quick:
        args.worlds, args.bootstrap, args.permutations = 20, 100, 100
    for option in ("worlds", "groups", "size", "family", "bootstrap", "permutations"):
        if getattr(args, option) < (2 if option in ("groups", "size") else 1):
            parser.error(f"--{option} must be at least {2 if option in ('groups', 'size') else 1}")
    if not 0 < args.alpha < 1:
        parser.error("--alpha must be between 0 and 1")
    started = time.perf_counter()
    rules = _rules(args)
    called = {name: 0 for name in [*rules, "family_raw", "family_holm", "family_bh"]}
    for world in range(args.worlds):
        seed = args.seed * 1_000_003 + world
        for k, (name, rule) in enumerate(rules.items()):
            called[name] += bool(rule(np.random.default_rng([seed, k]), seed))
        for name, found in _family(args, np.random.default_rng([seed, len(rules)]), seed).items():
            called[name] += found
    seconds = time.perf_counter() - started
    print(f"{args.worlds} null worlds: {args.groups} groups x {args.size} rows, {args.bootstrap} resamples, "
          f"{args.permutations} permutations, alpha {args.alpha:g}; families of {args.family} gaps")
    print(f"{'rule':<24}{'called':>8}{'rate':>8}   95 % interval   goal")
    rates = {}
    for name, count in called.items():
        rates[name] = count / args.worlds
        low, high = stats.proportion_interval(count, args.worlds)
        goal = "<= alpha" if name in ("family_holm", "family_bh") else (
            "(none: uncorrected)" if name == "family_raw" else f"{0.6 * args.alpha:.2f}-{1.4 * args.alpha:.2f}")
        print(f"{name:<24}{count:>8}{rates[name]:>8.3f}   [{low:.3f}, {high:.3f}]   {goal}")
    if args.json:
        args.json.write_text(json.dumps({"rates": rates, "worlds": args.worlds, "options": {
            k: v for k, v in vars(args).items() if k != "json"}}, indent=1) + "\n")
    print(" ".join(f"{name}={rate:.3f}" for name, rate in rates.items())
          + f" worlds={args.worlds} seconds={seconds:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
