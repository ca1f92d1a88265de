"""Tiers on a board: models whose bias the data cannot tell apart share a tier.

Within a family, metric and subset (runs that measured the same rows the same way), the least
biased model (its value closest to the metric's neutral value) opens tier 1, with every model whose
difference from it is not significant; the least biased of the models left opens tier 2, and so on.
"Not significantly different" is not transitive (A ~ B and B ~ C while A and C differ), so a tier
is read from its leader: ``tied_with`` lists, for each model, every model it is not told apart from,
whatever their tiers.

The differences are ``vlfair compare``'s: paired, from the runs' samples, Holm-adjusted over the
family's pairs (per metric and subset), "not significant" its verdict "no difference". Where a run of
the family has no samples here, the family is tiered unpaired, from each value's interval: a normal
approximation (standard error = width / 2z), a z-test of the difference, Holm over the same pairs;
``tier_method`` says which. A family of one model, a level (no neutral value), a metric the paired
comparison leaves out (``vlfair compare``'s "uncompared"), and, unpaired, a metric some value of which
has no interval (an F) have no tier.

A tier is read from its leader, and a model can be tied with a model of another tier. The unpaired
standard error is read at the interval's own level, the board's ``confidence`` column (runs of one family
may differ in it, an interval setting), and the z-test is of the difference of the two distances to the
neutral value. The command says which families were tiered unpaired, and that a family of one model has
no tiers. The leaderboard Space tests each family once per process (``add_tiers(memo=...)``, keyed by the
runs' content hashes and the tests' options), not on every load of the board.

The pairs' tests are compare's, made cheaper: each run is resampled once for all its pairs
(``paired.resample``), and the swaps of the permutation tests, the same for every pair of a row set (the
same rows and seed), are drawn once and multiplied once by every run's values (``_SharedSwaps``: a
relabelling's moments are linear in the swaps); the values are centred on all the runs' mean rather than
the pair's, so the p-values are the ones ``paired.compare`` finds for each pair alone except where
rounding moves a relabelling across the test's tie tolerance (equal on the demo's runs, tested; a few
relabellings in thousands apart for runs whose scales differ a hundredfold). Before, each pair drew its
own 10,000 x 7,000 swaps and turned them into floats; the speeds, before and after:
``benchmarks/tiers_speed.py`` in benchmarks/README.md.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vlfair.defaults import BOOTSTRAP, CONFIDENCE, PERMUTATIONS, SEED
from vlfair.logging import progress_bars_enabled
from vlfair.report.leaderboard import run_labels

PAIRED = "paired (vlfair compare on the runs' samples, Holm over the family's pairs)"
LESS_BIASED = ("a_less_biased", "b_less_biased")  # compare's verdicts that put one model of a pair below the other
UNPAIRED = "unpaired (from each value's interval: a normal approximation, Holm over the family's pairs)"
TIER_COLUMNS = ("tier", "tied_with", "tier_method")
# the most runs of one family a board tiers: every pair is tested (unpaired, 300 runs took 394 s and 2 GB; paired,
# each pair is a comparison), so a family of more has no tiers, said; vlfair compare tells chosen runs apart
MAX_RUNS = 40


def add_tiers(board: pd.DataFrame, paths: Mapping[str, str | Path], *, confidence: float = CONFIDENCE,
              bootstrap: int = BOOTSTRAP, n_permutations: int = PERMUTATIONS, seed: int | None = SEED,
              said: list[str] | None = None, memo: MutableMapping[tuple, Any] | None = None,
              max_runs: int = MAX_RUNS) -> pd.DataFrame:
    """``board`` (:func:`vlfair.report.leaderboard.read_board`'s) with ``tier`` (1, 2, ...; NaN where
    none), ``tied_with`` (the models not told apart from the row's, as JSON) and ``tier_method``.

    Args:
        board: the board's rows; ``run`` is each row's run (content hash), ``family`` its family.
        paths: each run's results.json (or folder) where its samples can be read beside it.
        confidence: the level of the tests (alpha = 1 - confidence) and of the intervals.
        bootstrap: the paired comparisons' resamples.
        n_permutations: their relabellings.
        seed: their seed.
        said: where a family tiered unpaired, or not at all, is described (one line each).
        memo: each family's tests by its runs (their content hashes) and these options, kept from one call to
            the next (a Space that reads its board again tests only the families it has not seen).
        max_runs: the most runs of a family tiered; a family of more has no tiers, said in ``said``.
    """
    attrs, board = board.attrs, board.copy()
    # pandas deep-copies a frame's attrs (the board's families and paths) into every slice and group: half of the
    # tiers' time on the demo's board; they are put back on the result
    board.attrs = {}
    board["tier"] = float("nan")
    board["tied_with"] = None
    board["tier_method"] = None
    for family, rows in board.groupby("family", dropna=True):
        runs = list(dict.fromkeys(rows["run"]))
        labels = run_labels(rows)
        if len(runs) < 2:
            _say(said, f"family {family}: one model ({labels[runs[0]]}), so no tiers")
            continue
        if len(runs) > max_runs:  # every pair is tested: the time and memory grow with the square of the runs
            _say(said, f"family {family}: {len(runs)} runs, more than the {max_runs} a board tiers "
                       f"({_pairs(max_runs):,} pairs; these would be {_pairs(len(runs)):,}), so no tiers: compare the "
                       "runs to tell apart with vlfair compare")
            continue
        # a run's content hash names everything measured: the same runs and options give the same tests
        # (with whether their samples are here: the same runs read from results alone are tiered unpaired)
        tests = (tuple(sorted(runs)), all(run in paths for run in runs), confidence, bootstrap, n_permutations, seed)
        if memo is None or tests not in memo:
            differs, why = _paired(runs, paths, confidence, bootstrap, n_permutations, seed, str(family))
            method = PAIRED
            if differs is None:
                differs, method = _unpaired(rows, runs, confidence), UNPAIRED
            if memo is not None:
                memo[tests] = differs, method, why
        else:
            differs, method, why = memo[tests]
        if method == UNPAIRED:
            _say(said, f"family {family}: tiered unpaired (from the intervals): {why}")
        for (metric, subset), group in rows.groupby(["metric", "subset"]):
            if group["neutral"].isna().all():
                continue  # a level: no model is less biased
            if method == UNPAIRED and not np.isfinite(group[["ci_low", "ci_high"]].to_numpy(float)).all():
                continue  # a value without an interval: nothing tells the models apart (an F: its test is paired)
            key = (str(metric), str(subset))
            if group.loc[group["value"].notna(), "run"].nunique() < 2:
                continue  # one run with a value: no rank (report.leaderboard.rank), so no tier either
            if key not in differs:
                continue  # a metric the runs' comparison leaves out (said by vlfair compare): not told apart, nor tied
            tiers, tied = _tiers(group, differs[key])
            for index, tier in tiers.items():
                board.at[index, "tier"] = float(tier)
                board.at[index, "tied_with"] = json.dumps(sorted(labels[r] for r in tied[index]), ensure_ascii=False)
                board.at[index, "tier_method"] = method
    board.attrs = attrs
    return board


def _pairs(runs: int) -> int:
    return runs * (runs - 1) // 2


def _say(said: list[str] | None, text: str) -> None:
    if said is not None:
        said.append(text)


# (metric, subset) -> {runs a, b} -> the run of the two shown less biased (the test's direction), None: not told apart
Differs = dict[tuple[str, str], dict[frozenset[str], str | None]]


def _paired(runs: list[str], paths: Mapping[str, str | Path], confidence: float, bootstrap: int, n_permutations: int,
            seed: int | None, family: str = "") -> tuple[Differs | None, str]:
    """Every pair of the family's runs compared as ``vlfair compare`` compares them (its verdicts, Holm
    over the pairs per metric and subset), each run resampled once for all its pairs (the same
    resamples for every run); or None and why not (a run without samples here, one compare refuses).
    A bar counts the pairs' comparisons (a family of many runs takes minutes)."""
    from tqdm.auto import tqdm

    from vlfair import paired
    from vlfair.compare.comparison import ComparisonError, prepare_runs, verdict
    from vlfair.compare.runs import RunError
    from vlfair.stats import holm

    if any(run not in paths for run in runs):
        return None, "not every run's samples are here"
    folders = [Path(paths[run]) for run in runs]
    try:
        prepared = prepare_runs([f.parent if f.name == "results.json" else f for f in folders])
    except (RunError, ComparisonError, ValueError) as exc:  # (a ValueError: a probe not installed here, say)
        return None, f"not compared on its samples ({exc})"
    entries: dict[tuple[str, str], list[tuple[tuple[str, str], paired.Difference]]] = {}  # (run A, run B), A - B
    pairs = list(itertools.combinations(range(len(runs)), 2))
    bar = tqdm(total=len(pairs) * len(prepared.row_sets), unit="pair",
               desc=f"tiers of family {family[:8]} ({len(runs)} runs, {len(pairs):,} pairs; --no-tiers skips them)",
               disable=not progress_bars_enabled())
    for k, row_set in enumerate(prepared.row_sets):
        values = [run_values[k] for run_values in prepared.values]
        resampled = [paired.resample(row_set, v, bootstrap=bootstrap, seed=seed) for v in values]
        shared = _SharedSwaps(row_set, values, seed) if n_permutations and not (row_set.values or row_set.engine) \
            else None
        for a, b in pairs:
            bar.update()
            tests = shared.tests(a, b, n_permutations) if shared is not None else None
            for found in paired.compare(row_set, values[a], values[b], bootstrap=bootstrap, confidence=confidence,
                                        seed=seed, n_permutations=n_permutations,
                                        resampled=(resampled[a], resampled[b]), tests=tests):
                key = (found.name, json.dumps(found.subset, sort_keys=True, ensure_ascii=False))
                entries.setdefault(key, []).append(((runs[a], runs[b]), found))
    bar.close()
    differs: Differs = {}
    for key, found_pairs in entries.items():  # Holm over the family's pairs, per metric and subset, as compare
        for ((run_a, run_b), difference), adjusted in zip(found_pairs, holm([d.p_value for _, d in found_pairs])):
            entry = {"difference": difference.difference, "difference_ci": difference.difference_ci,
                     "distance_difference_ci": difference.distance_difference_ci, "p_adjusted": adjusted,
                     "neutral": difference.neutral}
            # told apart: one of the two shown less biased (closer to the neutral value), that one kept; "differ"
            # (the values differ, neither shown closer) and "no difference" leave them tied
            less = dict(zip(LESS_BIASED, (run_a, run_b))).get(verdict(entry, 1 - confidence))
            differs.setdefault(key, {})[frozenset((run_a, run_b))] = less
    return differs, ""


class _SharedSwaps:
    """The paired permutation tests of every pair of a family's runs on one row set, on the swaps
    ``paired.compare`` draws (the same for every pair: the same rows and seed), each block drawn once and
    multiplied once by every run's values (a relabelling's moments are linear in the swaps: A' holds A's
    sums plus the swapped rows' B minus A), where each pair drew and multiplied its own. The values are
    centred on every run's mean, not the pair's (compare's): the moments agree to rounding, so a pair's
    p-values are compare's except where rounding moves a relabelling across the tie tolerance (equal on the
    demo's runs; a few relabellings in thousands apart for runs whose scales differ a hundredfold)."""

    def __init__(self, row_set: Any, values: list[np.ndarray], seed: int | None):
        from vlfair import paired

        self.row_set, self.seed = row_set, seed
        self.rng = np.random.default_rng(paired.relabelling_stream(seed))  # as each pair's test would draw them
        centred = np.stack([np.asarray(v, dtype=float).reshape(len(row_set.rows), -1) for v in values])  # (R, n, k)
        self.shift = np.nanmean(centred.reshape(-1, centred.shape[-1]), axis=0)
        centred = centred - self.shift
        groups = int(row_set.groups.max()) + 1
        onehot = np.eye(groups)[row_set.groups]  # (n, G)
        runs, n, k = centred.shape
        spread = (onehot[None, :, :, None] * centred[:, :, None, :]).reshape(runs, n, groups * k)
        squares = (onehot[None, :, :, None] * (centred**2)[:, :, None, :]).reshape(runs, n, groups * k)
        self.first = np.concatenate(list(spread), axis=1)  # (n, R*G*k): each run's row values in its slots
        self.second = np.concatenate(list(squares), axis=1)
        self.width, self.groups, self.k = groups * k, groups, k
        self.count = onehot.sum(axis=0)
        self.blocks: list[tuple[np.ndarray, np.ndarray]] = []  # each drawn block's products with every run

    def _block(self, index: int, size: int) -> tuple[np.ndarray, np.ndarray]:
        while len(self.blocks) <= index:
            swaps = self.rng.integers(0, 2, size=(size, len(self.row_set.rows)), dtype=np.uint8).astype(float)
            self.blocks.append((swaps @ self.first, swaps @ self.second))
        return self.blocks[index]

    def tests(self, a: int, b: int, n_permutations: int) -> list[Any]:
        """Runs ``a`` and ``b``'s tests, as ``paired.compare`` makes them (``stats.sign_flip_tests``)."""
        from vlfair import paired
        from vlfair.stats import sign_flip_tests

        span = [slice(r * self.width, (r + 1) * self.width) for r in (a, b)]
        totals = [(self.first[:, s].sum(axis=0), self.second[:, s].sum(axis=0)) for s in span]
        drawn = [0]

        def draw(_rng: Any, size: int, rows: int) -> Any:
            token = _Drawn(drawn[0], (size, rows))
            drawn[0] += 1
            return token

        def statistic(swaps: Any) -> np.ndarray:
            if isinstance(swaps, _Drawn):
                first, second = self._block(swaps.index, swaps.shape[0])
                moved = (first[:, span[1]] - first[:, span[0]], second[:, span[1]] - second[:, span[0]])
            else:  # the data (no swap), or every relabelling of a few rows: multiplied here
                s = np.asarray(swaps, dtype=float)
                moved = (s @ (self.first[:, span[1]] - self.first[:, span[0]]),
                         s @ (self.second[:, span[1]] - self.second[:, span[0]]))
            size = moved[0].shape[0]
            count = np.broadcast_to(self.count, (size, self.groups))
            first_a, second_a = totals[0][0] + moved[0], totals[0][1] + moved[1]
            first_b, second_b = totals[1][0] - moved[0], totals[1][1] - moved[1]
            return self._evaluate(count, first_a, second_a) - self._evaluate(count, first_b, second_b)

        return sign_flip_tests(statistic, len(self.row_set.rows), len(self.row_set.statistics), n_permutations,
                               paired.relabelling_stream(self.seed), draw=draw)

    def _evaluate(self, count: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        from vlfair.paired import Moments

        size = first.shape[0]
        moments = Moments(count, first.reshape(size, self.groups, self.k), second.reshape(size, self.groups, self.k),
                          self.shift)
        return np.stack([np.asarray(s.function(moments), dtype=float) for s in self.row_set.statistics], axis=1)


class _Drawn:
    """A block of swaps several tests share: its place in the draws and its shape."""

    def __init__(self, index: int, shape: tuple[int, int]):
        self.index, self.shape = index, shape


def _unpaired(rows: pd.DataFrame, runs: list[str], confidence: float) -> Differs:
    """Each pair told apart or not from the two values and their intervals (a normal approximation:
    standard error = width / 2z, z of each interval's own level: runs of one family may differ in it, the
    board's ``confidence`` where a row does not say), Holm over the family's pairs per metric and subset, at
    ``confidence``."""
    from scipy import stats as sps

    from vlfair.stats import holm

    differs: Differs = {}
    for (metric, subset), group in rows.groupby(["metric", "subset"]):
        values = group.drop_duplicates("run").set_index("run")
        levels = values["confidence"].fillna(confidence) if "confidence" in values else pd.Series(
            confidence, index=values.index)
        z = {run: float(sps.norm.ppf((1 + level) / 2)) for run, level in levels.items()}
        pairs, closer_by, p_values = [], [], []  # closer_by: A's distance to the neutral value minus B's
        for a, b in itertools.combinations([r for r in runs if r in values.index], 2):
            errors = [(values.at[r, "ci_high"] - values.at[r, "ci_low"]) / (2 * z[r]) for r in (a, b)]
            spread = math.hypot(*errors)
            # the difference of their distances to the neutral value: whether one is less biased
            neutral = values.at[a, "neutral"]
            difference = abs(values.at[a, "value"] - neutral) - abs(values.at[b, "value"] - neutral)
            if not (np.isfinite(spread) and np.isfinite(difference)) or spread == difference == 0:
                p = float("nan")  # nothing to test: not told apart
            elif spread == 0:  # two exact values, different distances
                p = 0.0
            else:
                p = float(2 * sps.norm.sf(abs(difference) / spread))
            pairs.append((a, b))
            closer_by.append(difference)
            p_values.append(p)
        adjusted = holm(p_values) if p_values else []
        differs[(str(metric), str(subset))] = {frozenset(pair): _closer(pair, closer, p < 1 - confidence)
                                               for pair, closer, p in zip(pairs, closer_by, adjusted)}
    return differs


def _closer(pair: tuple[str, str], closer_by: float, told_apart: bool) -> str | None:
    """The run of ``pair`` shown less biased (``closer_by``: A's distance to the neutral value minus B's), where the
    test told them apart."""
    return (pair[0] if closer_by < 0 else pair[1]) if told_apart else None


def _tiers(group: pd.DataFrame, differs: dict[frozenset[str], str | None]
           ) -> tuple[dict[Any, int], dict[Any, set[str]]]:
    """Each row's tier and the runs it is not told apart from (a pair not compared counts as not told apart); a
    model joins the leader's tier unless the test shows the leader less biased than it."""
    rows = group[group["value"].notna()]
    # the board's order: by effect size where every row has one (an F-test's omega squared), the distance to the
    # neutral value breaking its ties (omega squared is cut at 0: F = 0.5 and F = 1.0 are both no effect). On the
    # same rows (one family: the same degrees of freedom) omega squared grows with F, so a paired test of F
    # differences tells apart the runs it would
    effect = rows["effect"] if "effect" in rows and rows["effect"].notna().all() else pd.Series(0.0, index=rows.index)
    order = pd.DataFrame({"effect": effect, "distance": (rows["value"] - rows["neutral"]).abs()})
    distance = order.sort_values(["effect", "distance"], kind="stable")["distance"]
    run_of = rows["run"].to_dict()

    def less_biased(i: Any, j: Any) -> str | None:
        return differs.get(frozenset((run_of[i], run_of[j])))

    tied = {i: {run_of[j] for j in distance.index if j != i and less_biased(i, j) is None} for i in distance.index}
    tiers: dict[Any, int] = {}
    left = list(distance.index)
    tier = 0
    while left:
        tier += 1
        leader = left[0]
        # the test's direction decides, not the order: a model the paired test shows less biased than the leader
        # (the samples disagreeing with the values the order came from) is never put below it
        members = [i for i in left if i == leader or less_biased(i, leader) != run_of[leader]]
        for i in members:
            tiers[i] = tier
        left = [i for i in left if i not in members]
    return tiers, tied


__all__ = ["MAX_RUNS", "PAIRED", "TIER_COLUMNS", "UNPAIRED", "add_tiers"]
