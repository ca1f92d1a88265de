"""Group statistics at scale: vlfair's measures against fairlearn, scipy and a naive loop.

For n rows (default 1e3, 1e4, 1e5, 1e6) of scores in two groups, and in seven groups x two
strata, it times in one run, with defaults (1000 bootstrap resamples, 10,000 permutations):

  vlfair   bias_ratio (2 groups), group_score_gap (7 groups), trait_anova (7 groups x 2 strata)
  fairlearn MetricFrame(metrics=mean score, n_boot=1000, ci_quantiles=[0.025, 0.975]) by group
  scipy    scipy.stats.bootstrap of the ratio of the two group means (percentile, 1000 resamples)
  naive    a loop of 1000 resamples: numpy draws with replacement within each group, then means

--resamples sets the bootstrap resamples of all four alike (--quick: 100), so the ratios stay
like for like.

and prints each time with the ratios. fairlearn's bootstrap refits a MetricFrame per resample and
is run up to --fairlearn-max-rows (default 1e5; its 1e6 time is not extrapolated). The last line:

  speedup_vs_fairlearn=A speedup_vs_scipy=B speedup_vs_naive=C seconds_1e6=D

A = fairlearn / vlfair bias_ratio at the largest n fairlearn ran; B and C = scipy / vlfair and
naive / vlfair bias_ratio at the largest n; D = vlfair bias_ratio seconds at the largest n (1e6
unless --sizes says otherwise). vlfair's time includes its p-value, which the others do not compute.

Usage: python benchmarks/stats_scaling.py [--sizes 1000 10000 ...] [--fairlearn-max-rows N] [--resamples B] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

BOOTSTRAP = 1000  # vlfair's default
RACES = np.array(["Black", "East Asian", "Indian", "Latino_Hispanic", "Middle Eastern", "Southeast Asian", "White"])


def data(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Scores in [0, 1] (probabilities, as the probes measure) with a small group effect."""
    rng = np.random.default_rng(seed)
    gender = np.where(rng.random(n) < 0.5, "Female", "Male")
    race = RACES[rng.integers(0, RACES.size, n)]
    scores = np.clip(rng.beta(2, 5, n) + 0.01 * (gender == "Female") + 0.005 * (race == "White"), 0, 1)
    return {"scores": scores, "gender": gender, "race": race}


def timed(function) -> tuple[float, object]:
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def vlfair_times(d: dict[str, np.ndarray], resamples: int) -> dict[str, float]:
    from vlfair import measures

    ratio_s, ratio = timed(lambda: measures.bias_ratio(d["scores"], d["gender"], "Female", "Male", bootstrap=resamples))
    gap_s, gap = timed(lambda: measures.group_score_gap(d["scores"], d["race"], bootstrap=resamples))
    anova_s, _ = timed(lambda: measures.trait_anova(d["scores"], d["race"], strata=d["gender"], bootstrap=resamples))
    return {"bias_ratio": ratio_s, "group_score_gap": gap_s, "trait_anova": anova_s,
            "ratio_method": ratio["p_value_method"], "gap_method": gap["p_value_method"]}


def fairlearn_seconds(d: dict[str, np.ndarray], resamples: int) -> float:
    from fairlearn.metrics import MetricFrame

    def mean_score(y_true, y_pred):
        return float(np.mean(y_pred))

    seconds, frame = timed(lambda: MetricFrame(metrics=mean_score, y_true=d["scores"], y_pred=d["scores"],
                                               sensitive_features=d["gender"], n_boot=resamples,
                                               ci_quantiles=[0.025, 0.975], random_state=0))
    assert frame.by_group_ci is not None
    return seconds


def scipy_seconds(d: dict[str, np.ndarray], resamples: int) -> float:
    from scipy import stats

    female, male = d["scores"][d["gender"] == "Female"], d["scores"][d["gender"] == "Male"]

    def ratio(a, b, axis):
        return a.mean(axis=axis) / b.mean(axis=axis)

    batch = max(1, 5_000_000 // d["scores"].size)  # keeps its (batch, n) resample arrays in memory
    seconds, _ = timed(lambda: stats.bootstrap((female, male), ratio, n_resamples=resamples, vectorized=True,
                                               method="percentile", batch=batch, random_state=0))
    return seconds


def naive_seconds(d: dict[str, np.ndarray], resamples: int) -> float:
    rng = np.random.default_rng(0)
    groups = [d["scores"][d["gender"] == g] for g in ("Female", "Male")]

    def loop():
        ratios = np.empty(resamples)
        for b in range(resamples):
            female, male = (g[rng.integers(0, g.size, g.size)].mean() for g in groups)
            ratios[b] = female / male
        return np.quantile(ratios, [0.025, 0.975])

    return timed(loop)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--fairlearn-max-rows", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=BOOTSTRAP,
                        help=f"bootstrap resamples of every method (default {BOOTSTRAP}, vlfair's default; "
                             "--quick: 100)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 1e3 rows (Monte Carlo p) and 2e4 (normal limit), fairlearn at 1e3 only, "
                             "100 resamples")
    args = parser.parse_args(argv)
    sizes = [1_000, 20_000] if args.quick else sorted(args.sizes)
    if args.quick:
        args.fairlearn_max_rows = 1_000
        args.resamples = min(args.resamples, 100)
    resamples = args.resamples
    print(f"stats_scaling: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU(s); "
          f"bootstrap {resamples} resamples, permutations 10000 (vlfair's default)")
    header = ("rows", "bias_ratio s", "gap s (7 groups)", "anova s (7x2)", "p method", "fairlearn s", "scipy s",
              "naive s", "fairlearn/vlfair", "scipy/vlfair", "naive/vlfair")
    print("  ".join(f"{h:>16}" for h in header))
    warm = data(6_000)  # first calls import and set up (scipy's distributions, thread pools): not timed
    vlfair_times(warm, resamples), scipy_seconds(warm, resamples), naive_seconds(warm, resamples)
    last = {}
    for n in sizes:
        d = data(n)
        ours = vlfair_times(d, resamples)
        fair = fairlearn_seconds(d, resamples) if n <= args.fairlearn_max_rows else float("nan")
        sci, naive = scipy_seconds(d, resamples), naive_seconds(d, resamples)
        ratio = ours["bias_ratio"]
        row = (f"{n:.0e}", f"{ratio:.3f}", f"{ours['group_score_gap']:.3f}", f"{ours['trait_anova']:.3f}",
               ours["ratio_method"], f"{fair:.3f}" if fair == fair else "not run", f"{sci:.3f}", f"{naive:.3f}",
               f"{fair / ratio:.1f}" if fair == fair else "-", f"{sci / ratio:.1f}", f"{naive / ratio:.1f}")
        print("  ".join(f"{cell:>16}" for cell in row), flush=True)
        last[n] = {"vlfair": ratio, "fairlearn": fair, "scipy": sci, "naive": naive}
    fair_n = max((n for n in last if last[n]["fairlearn"] == last[n]["fairlearn"]), default=None)
    top = last[max(last)]
    speedup_fair = last[fair_n]["fairlearn"] / last[fair_n]["vlfair"] if fair_n else float("nan")
    print(f"speedup_vs_fairlearn={speedup_fair:.1f} speedup_vs_scipy={top['scipy'] / top['vlfair']:.1f} "
          f"speedup_vs_naive={top['naive'] / top['vlfair']:.1f} seconds_1e6={top['vlfair']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
