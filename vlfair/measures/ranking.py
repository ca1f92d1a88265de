"""ranking_skew and its top-k engine: each group's share of the top k against a target, with resampled
intervals."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from vlfair import stats
from vlfair.defaults import BOOTSTRAP, CONFIDENCE, SEED
from vlfair.measures.checks import (
    MAY_BE_UNDEFINED,
    Labels,
    MeasureResult,
    checked,
    finite_at_least_0,
    float_column,
    label_array,
    require_present,
)
from vlfair.measures.ties import canonical_order

# ---- ranking_skew -----------------------------------------------------------------------
SMOOTHING = 0.5
"""The count ``ranking_skew`` adds to every group under ``zero_count="smoothed"`` (Jeffreys)."""


@dataclasses.dataclass(frozen=True, eq=False)
class RankingSkew(MeasureResult):
    """The result of :func:`ranking_skew`: means over queries, then each query's values."""

    max_skew: float = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    """MaxSkew@k: the largest Skew@k(a) = ln(p_k(a) / p*(a)) over groups (-inf: see ``smoothing``)."""
    min_skew: float = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    """MinSkew@k: the smallest Skew@k over groups."""
    ndkl: float
    """Normalised discounted KL divergence of the top-k prefixes from the target (0: every prefix matches)."""
    bias_at_k: float | None
    """Bias@k = (n_a - n_b) / k for ``bias_pair``; None without a pair."""
    skew: dict[str, float] = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    """Skew@k by group."""
    max_skew_per_query: list[float] = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    min_skew_per_query: list[float] = dataclasses.field(metadata=MAY_BE_UNDEFINED)
    ndkl_per_query: list[float]
    bias_at_k_per_query: list[float] | None
    target: dict[str, float]
    """The target distribution p*, by group."""
    bias_pair: list[str] | None
    """The two groups (a, b) of Bias@k."""
    k: int
    num_queries: int
    zero_count: str
    """How a group absent from the top k counts for Skew: "smoothed" or "dvl" (see :func:`ranking_skew`)."""
    smoothing: float | None
    """The count added to every group for Skew under "smoothed" (0: an absent group has Skew -inf); None under "dvl"."""
    max_skew_ci: list[float] | None = dataclasses.field(default=None, metadata=MAY_BE_UNDEFINED)
    """Stratified-bootstrap interval of ``max_skew`` (items resampled within their group, re-ranked); None without
    a bootstrap. So are the intervals below."""
    min_skew_ci: list[float] | None = dataclasses.field(default=None, metadata=MAY_BE_UNDEFINED)
    ndkl_ci: list[float] | None = None
    bias_at_k_ci: list[float] | None = None
    skew_ci: dict[str, list[float]] | None = dataclasses.field(default=None, metadata=MAY_BE_UNDEFINED)
    confidence: float = CONFIDENCE


@checked
def ranking_skew(scores: npt.ArrayLike, item_groups: Labels, k: int, target: str | Mapping[str, float] = "uniform",
                 smoothing: float | None = None, bias_pair: Sequence[Any] | None = None,
                 zero_count: str = "smoothed", bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                 seed: int | None = SEED) -> RankingSkew:
    """Skew of the top-k items a text query retrieves, averaged over queries.

    ``scores``: (queries, items) or one query's (items,). Items are ranked by score, scores within
    the tie tolerance of each other (:mod:`vlfair.measures.ties`) by index. Target p*: "uniform" over
    the groups present, "dataset" (each group's share of all items), or a dict of shares. Skew@k(a) =
    ln(p_k(a) / p*(a)); MaxSkew@k and MinSkew@k are its max and min over groups. Zero counts: a group
    absent from the top k would have Skew -inf.
    ``zero_count="smoothed"`` (the default) smooths every count by ``smoothing`` (default 0.5,
    Jeffreys): p_k(a) = (n_a + s) / (k + s |A|); ``smoothing=0`` reports -inf.
    ``zero_count="dvl"`` is oxai/debias-vision-lang's convention (``measuring_bias.py``,
    ``compute_skew_metrics``): p_k(a) = n_a / k and an absent group counts as 1 / k (DVL's maximum
    starts at 0, which never binds: these shares sum to at least 1, so some group's Skew is >= 0);
    MinSkew, which DVL does not compute, uses the same counts. NDKL = (1/Z) sum_{i<=k}
    KL(p_i || p*) / log2(i + 1) with Z = sum 1/log2(i + 1), on raw counts and 0 ln 0 = 0, so it
    is >= 0 and 0 when every prefix matches the target. Bias@k = (n_a - n_b) / k for two groups
    (``bias_pair``, default the two groups in sorted order), in [-1, 1]. Intervals: a stratified
    bootstrap over items (each item drawn within its group, so the target is unchanged), every
    query re-ranked in every resample (:func:`resampled_top_k`), percentile intervals of the
    means over queries.

    Args:
        scores: (queries, items) or (items,) retrieval scores.
        item_groups: each item's group.
        k: how many top items each query retrieves.
        target: the target distribution p*: "uniform", "dataset" or a dict of shares by group.
        smoothing: the count added to every group for Skew under "smoothed" (None: 0.5; 0: none).
        bias_pair: the two groups (a, b) of Bias@k; None: the two groups present, if there are two.
        zero_count: "smoothed" or "dvl": how a group absent from the top k counts for Skew.
        bootstrap: resamples of the items for the intervals (0: none).
        confidence: the intervals' level.
        seed: seeds the resampling.

    Returns:
        A :class:`RankingSkew`; means over queries: ``max_skew``, ``min_skew``, ``ndkl``, ``bias_at_k`` (None without a
        pair) and ``skew`` by group; per query: ``max_skew_per_query``, ``min_skew_per_query``,
        ``ndkl_per_query``, ``bias_at_k_per_query``; ``target`` (p* by group), ``bias_pair``,
        ``k``, ``num_queries``, ``zero_count``, ``smoothing``; intervals ``max_skew_ci``,
        ``min_skew_ci``, ``ndkl_ci``, ``bias_at_k_ci``, ``skew_ci`` (None with ``bootstrap=0``) and ``confidence``.

    Raises:
        ValueError: bad input, named: shapes, k outside 1..items, a bad target or bias_pair, a
            ``smoothing`` with ``zero_count="dvl"`` (which does not smooth).
    """
    if zero_count == "dvl" and smoothing is not None:
        raise ValueError(f"smoothing={smoothing!r} applies to zero_count='smoothed'; zero_count='dvl' counts a group "
                         "absent from the top k as 1/k: leave smoothing out")
    smoothing = SMOOTHING if smoothing is None and zero_count == "smoothed" else smoothing
    matrix = float_column(scores, "predictions", ndim=(1, 2))
    matrix = matrix[None, :] if matrix.ndim == 1 else matrix
    groups = label_array(item_groups, "item_groups")
    if groups.size != matrix.shape[1]:
        raise ValueError(f"item_groups has {groups.size} entries but each query scores {matrix.shape[1]} items")
    if k > groups.size:
        raise ValueError(f"k={k} is larger than the number of items ({groups.size})")
    names, codes = stats.encode_groups(groups)
    if len(names) < 2:  # one group has every share: its skew is 0 whatever the ranking
        raise ValueError(f"a skew needs at least 2 groups; item_groups hold only {names}")
    problem = top_k_groups_problem(k, len(names))
    if problem:
        raise ValueError(f"k={k}: {problem}")
    p_star = _target(target, names, codes)
    # the best m of each query, m a little above k where intervals re-rank resamples: one ranking for both
    prefix = top_k_order(matrix, prefix_length(k, groups.size) if bootstrap else k)
    ranked = codes[prefix[:, :k]]  # (Q, k)
    prefix_counts = np.stack([np.cumsum(ranked == g, axis=1) for g in range(len(names))], axis=2)  # (Q, k, G)
    counts_k = prefix_counts[:, -1, :].astype(float)
    skew = top_k_skew(counts_k, k, p_star, zero_count, smoothing)
    max_skew = skew.max(axis=1)
    positions = np.arange(1, k + 1)
    shares = prefix_counts / positions[None, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(shares > 0, shares * np.log(shares / p_star), 0.0).sum(axis=2)
    discount = 1 / np.log2(positions + 1)
    ndkl = (kl * discount).sum(axis=1) / discount.sum()
    bias = None
    pair = ([stats.label_text(g) for g in bias_pair] if bias_pair is not None  # two different groups (OPTIONS)
            else (names if len(names) == 2 else None))
    if pair is not None:
        for group in pair:
            require_present(group, names, "bias_pair group", "item_groups")
        bias = bias_at_k(counts_k, k, (names.index(pair[0]), names.index(pair[1])))
    intervals = {}
    if bootstrap:
        pair_codes = None if pair is None else (names.index(pair[0]), names.index(pair[1]))
        points = {"max": max_skew.mean(), "min": skew.min(axis=1).mean(), "ndkl": ndkl.mean(),
                  "bias": None if bias is None else bias.mean(), "skew": skew.mean(axis=0)}
        intervals = _ranking_skew_intervals(matrix, codes, k, p_star, zero_count, smoothing, pair_codes, bootstrap,
                                            confidence, seed, prefix, points)
        intervals["skew_ci"] = {n: bounds for n, bounds in zip(names, intervals["skew_ci"])}
    return RankingSkew(
        max_skew=float(max_skew.mean()), min_skew=float(skew.min(axis=1).mean()),
        ndkl=float(ndkl.mean()), bias_at_k=None if bias is None else float(bias.mean()),
        skew={n: float(skew[:, i].mean()) for i, n in enumerate(names)},
        max_skew_per_query=max_skew.tolist(), min_skew_per_query=skew.min(axis=1).tolist(),
        ndkl_per_query=ndkl.tolist(), bias_at_k_per_query=None if bias is None else bias.tolist(),
        target={n: float(p) for n, p in zip(names, p_star)}, bias_pair=pair, k=int(k),
        num_queries=int(matrix.shape[0]), zero_count=zero_count, smoothing=smoothing, confidence=confidence,
        **intervals,
    )


def _interval_with_infinities(samples: npt.NDArray[np.float64], confidence: float) -> npt.NDArray[np.float64]:
    """A percentile interval where a bound next to a Skew of -inf (``smoothing=0``, a group absent from the
    top k) is -inf: numpy's interpolation would make it nan (-inf + inf * t)."""
    bounds = stats.percentile_interval(samples, confidence)
    return np.where(np.isnan(bounds) & np.isneginf(samples).any(axis=0), -np.inf, bounds)


def top_k_interval(samples: npt.NDArray[np.float64], point: npt.ArrayLike,
                   confidence: float) -> npt.NDArray[np.float64]:
    """The interval of a top-k statistic (Skew, MaxSkew, NDKL, Bias@k) from its resampled values.

    A resample holds some items twice or more, and their copies sit side by side in its ranking, as
    no fresh draw of items ever puts two images: the first ranks, which NDKL weighs most, become
    more one-sided, and the resampled values lie above the point value (NDKL's 95 % percentile
    interval held the value a fresh draw gives on average in about 55 % of simulated draws). The
    resamples' spread is kept, their shift is not: the percentile interval is moved by the point
    value minus the resamples' mean (where both are finite; a Skew of -inf keeps its percentiles)."""
    bounds = _interval_with_infinities(samples, confidence)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a column of nan resamples (an undefined statistic)
        shift = np.asarray(point, dtype=float) - np.nanmean(samples, axis=0)
        return np.where(np.isfinite(shift), bounds + shift, bounds)


def _ranking_skew_intervals(matrix: npt.NDArray[np.float64], codes: npt.NDArray[np.int64], k: int,
                            p_star: npt.NDArray[np.float64], zero_count: str, smoothing: float | None,
                            pair: tuple[int, int] | None, bootstrap: int, confidence: float,
                            seed: int | None, order: npt.NDArray[np.int64],
                            points: dict[str, Any]) -> dict[str, Any]:
    """:func:`ranking_skew`'s intervals (:func:`top_k_interval`): each statistic's mean over queries in
    every resample (``order``: each query's best :func:`prefix_length` items), placed at ``points``."""
    columns: dict[str, list[npt.NDArray[np.float64]]] = {"max": [], "min": [], "ndkl": [], "bias": [], "skew": []}
    for indices in stats.stratified_resamples(codes, bootstrap, seed):
        counts, ndkl = resampled_top_k(matrix, codes, k, indices, [p_star], order)
        skew = top_k_skew(counts, k, p_star, zero_count, smoothing)  # (b, queries, G)
        columns["max"].append(skew.max(axis=2).mean(axis=1))
        columns["min"].append(skew.min(axis=2).mean(axis=1))
        columns["skew"].append(skew.mean(axis=1))
        columns["ndkl"].append(ndkl[:, :, 0].mean(axis=1))
        if pair is not None:
            columns["bias"].append(bias_at_k(counts, k, pair).mean(axis=1))
    bounds = {name: top_k_interval(np.concatenate(values), points[name], confidence)
              for name, values in columns.items() if values}
    return {"max_skew_ci": bounds["max"].tolist(), "min_skew_ci": bounds["min"].tolist(),
            "ndkl_ci": bounds["ndkl"].tolist(), "bias_at_k_ci": bounds["bias"].tolist() if "bias" in bounds else None,
            "skew_ci": bounds["skew"].T.tolist()}


def top_k_groups_problem(k: int, groups: int) -> str | None:
    """Why a top ``k`` cannot measure a skew over ``groups`` groups, or None: below the number of groups,
    some group is absent from every top k whatever the model, and its share is the zero-count convention's
    alone (under "dvl" at k = 1 every group's share is 1, so every group has the same skew for any model)."""
    if k < groups:
        return (f"below the {groups} groups: a top {k} cannot hold every group, so an absent group's share is the "
                f"zero-count rule's, whatever the model ranks; use k of {groups} or more")
    return None


def top_k_shares(counts: npt.NDArray[np.float64], k: int, zero_count: str,
                 smoothing: float | None) -> npt.NDArray[np.float64]:
    """p_k(a) of each group from its count in the top k, by the zero-count convention (see :func:`ranking_skew`)."""
    if zero_count == "dvl":
        return np.where(counts > 0, counts, 1.0) / k
    assert smoothing is not None  # set by ranking_skew under "smoothed"
    return (counts + smoothing) / (k + smoothing * counts.shape[-1])


def top_k_skew(counts: npt.NDArray[np.float64], k: int, target: npt.ArrayLike, zero_count: str,
               smoothing: float | None) -> npt.NDArray[np.float64]:
    """Skew@k = ln(p_k(a) / p*(a)) of each group from its (..., G) counts in the top k (:func:`top_k_shares`),
    against one ``target`` (G,): (..., G), or several (G, T): (..., G, T). -inf for a share of 0 (smoothing 0)."""
    shares = top_k_shares(counts, k, zero_count, smoothing)
    target = np.asarray(target, dtype=float)
    with np.errstate(divide="ignore"):
        return np.log((shares if target.ndim == 1 else shares[..., None]) / target)


def bias_at_k(counts: npt.NDArray[np.float64], k: int, pair: tuple[int, int]) -> npt.NDArray[np.float64]:
    """Bias@k = (n_a - n_b) / k of the groups ``pair`` (their codes) from their (..., G) counts in the top k."""
    return (counts[..., pair[0]] - counts[..., pair[1]]) / k


# resampled_top_k's blocks: (resamples, queries, m) arrays of about this many entries
_TOP_K_BLOCK_ENTRIES = 2**18


def prefix_length(k: int, items: int) -> int:
    """How many of each query's best items a resample's top k is looked for among: a resample holds
    each item about once (multiplicities with mean 1 and variance about 1), so the best m items hold
    about m copies give or take sqrt(m); 8 standard deviations and 64 spare make a shortfall (then
    handled by ranking all items) practically never happen."""
    return min(items, k + int(8 * math.sqrt(k)) + 64)


def top_k_order(scores: npt.NDArray[np.float64], k: int, exact: bool = False) -> npt.NDArray[np.int64]:
    """Each row's k highest-scoring columns, best first; scores within the tie tolerance of each other
    (:mod:`vlfair.measures.ties`) by column index, so that no kernel's rounding reorders them
    (``exact``: only equal scores are ties, for scores that are exact whole numbers, as ranks are).
    ``argpartition`` finds the k (and a few more), then only those are sorted, so a query over N items
    costs O(N + k log k), not a sort of all N."""
    if exact:
        return canonical_order(scores, k, tol=np.zeros((scores.shape[0], 1)))
    return canonical_order(scores, k)


def resampled_top_k(scores: npt.NDArray[np.float64], codes: npt.NDArray[np.int64], k: int,
                    indices: npt.NDArray[np.int64], p_stars: Sequence[npt.NDArray[np.float64]],
                    order: npt.NDArray[np.int64] | None = None, exact: bool = False,
                    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The top k of every query in resamples of the items, re-ranked: group counts and NDKL.

    A resample (a row of ``indices``, as :func:`vlfair.stats.stratified_resamples` draws them)
    holds item j c_j times; its top k is the original ranking walked with those multiplicities
    (copies of one item are adjacent; equal scores keep index order, as :func:`ranking_skew`
    ranks them). So the items are ranked once (``order``: the best m of each query, m a little
    above k, found by :func:`top_k_order`), and a resample costs a gather and a cumulative sum
    over m, not a gather and a ranking of all N items; resamples go in blocks (arrays of a few MB),
    every step for the whole block at once. Should a resample need more than m (multiplicities far
    below 1 in a query's best items), the items are ranked afresh over all N.

    NDKL over every prefix without a (k, groups) table: KL(p_i || q) = (1/i) sum_g c_ig ln c_ig
    - ln i - (1/i) sum_g c_ig ln q_g, and each term grows by one item's group at each rank, so
    sum_i w_i KL_i (w_i = 1 / log2(i + 1)) is sum_r x_r U_r with U_r = sum_{i>=r} w_i / i and x_r
    item r's increment, minus sum_i w_i ln i.

    Args:
        scores: (queries, N) scores.
        codes: (N,) each item's group code, 0..G-1.
        k: the top list's size, 1..N.
        indices: (b, N) item indices of b resamples.
        p_stars: target distributions (each (G,), every share > 0) for NDKL.
        order: ``top_k_order(scores, m)`` for some m >= k, to reuse over blocks (default: computed).
        exact: the scores are exact whole numbers (ranks): only equal ones tie (:func:`top_k_order`).

    Returns:
        ``counts`` (b, queries, G): each group's count in each resample's top k; ``ndkl`` (b,
        queries, len(p_stars)): NDKL@k against each target.
    """
    queries, items = scores.shape
    groups = int(codes.max()) + 1
    if order is None or order.shape[1] < min(items, k):
        order = top_k_order(scores, prefix_length(k, items), exact)
    ranked = codes[order]  # (queries, m)
    positions = np.arange(1, k + 1)
    weights = 1 / np.log2(positions + 1)
    tail = np.cumsum((weights / positions)[::-1])[::-1]  # U_r
    constant = float((weights * np.log(positions)).sum())
    c_ln_c = np.zeros(k + 1)
    c_ln_c[1:] = np.arange(1, k + 1) * np.log(np.arange(1, k + 1))
    log_targets = np.stack([np.log(p_star) for p_star in p_stars], axis=1)  # (G, targets)
    prefix_tail = np.concatenate([[0.0], np.cumsum(tail)])  # sum of U over ranks 1..r
    # each query's items grouped by group (rank order kept within one), and where each one's group begins
    # (flat positions in a (queries, m) list of lists)
    within = np.argsort(ranked, axis=1, kind="stable")
    in_order = np.take_along_axis(ranked, within, axis=1)
    begins = np.concatenate([np.ones((queries, 1), dtype=bool), in_order[:, 1:] != in_order[:, :-1]], axis=1)
    rows_at = (np.arange(queries) * ranked.shape[1])[:, None]
    by_group = (within + rows_at).ravel()
    group_starts = (np.maximum.accumulate(np.where(begins, np.arange(ranked.shape[1]), 0), axis=1) + rows_at).ravel()
    flat_groups = ranked.ravel()
    counts = np.empty((len(indices), queries, groups))
    ndkl = np.empty((len(indices), queries, len(p_stars)))
    # resamples in blocks: every (queries, m) step for a whole block at once, a block's arrays a few MB
    block = max(1, _TOP_K_BLOCK_ENTRIES // max(queries * ranked.shape[1], 1))
    for start in range(0, len(indices), block):
        rows = indices[start:start + block]
        held = np.bincount((rows + (np.arange(len(rows)) * items)[:, None]).ravel(),
                           minlength=len(rows) * items).reshape(len(rows), items)
        copies = held[:, order]  # (b, queries, m): copies of each ranked item in each resample
        before = np.cumsum(copies, axis=2) - copies
        if (before[..., -1] + copies[..., -1] < k).any():  # a resample needs more than the best m: all N
            if order.shape[1] == items:
                raise ValueError(f"k={k} is larger than a resample's {int(copies.sum(axis=2).min())} items")
            return resampled_top_k(scores, codes, k, indices, p_stars, top_k_order(scores, items, exact), exact)
        taken = np.clip(k - before, 0, copies)  # copies of each ranked item inside the top k
        # the items inside a top k, flat, in each top list's rank order: their list (resample, query),
        # group, copies and the ranks before them
        inside = np.flatnonzero(taken > 0)
        lists = inside // ranked.shape[1]
        group = flat_groups[inside % flat_groups.size]
        held_copies, first = taken.ravel()[inside], before.ravel()[inside]
        counts[start:start + len(rows)] = np.bincount(lists * groups + group, weights=held_copies,
                                                      minlength=len(rows) * queries * groups
                                                      ).reshape(len(rows), queries, groups)
        # the copies of each item's group ranked before it in its list: a running count over each query's
        # items taken group by group (in rank order within a group), less the count where its group begins
        grouped = taken.reshape(len(rows), -1)[:, by_group].reshape(taken.shape)
        running = np.cumsum(grouped, axis=2) - grouped
        running = (running.reshape(len(rows), -1) - running.reshape(len(rows), -1)[:, group_starts])
        earlier = np.empty_like(running)
        earlier[:, by_group] = running
        seen = earlier.ravel()[inside]
        # NDKL: a copy at rank r that is its group's c-th adds U_r (c ln c - (c-1) ln (c-1)) - U_r ln q_g
        own = np.zeros(len(rows) * queries)
        for copy in range(1, int(held_copies.max(initial=0)) + 1):
            more = np.flatnonzero(held_copies >= copy)
            count = seen[more] + copy
            own += np.bincount(lists[more], weights=tail[first[more] + copy - 1] * (c_ln_c[count] - c_ln_c[count - 1]),
                               minlength=own.size)
        spans = prefix_tail[first + held_copies] - prefix_tail[first]  # U over the ranks each item's copies take
        targeted = np.stack([np.bincount(lists, weights=spans * log_targets[group, t], minlength=own.size)
                             for t in range(log_targets.shape[1])], axis=1)
        ndkl[start:start + len(rows)] = (own[:, None] - targeted - constant).reshape(len(rows), queries, -1)
    return counts, ndkl / weights.sum()


def relabelled_top_k(ranked: npt.NDArray[np.int64], groups: int, p_stars: Sequence[npt.NDArray[np.float64]]
                     ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The top k of every query under relabellings of the items' groups, the ranking kept: ``ranked`` (b, queries,
    k) the group of each query's k best items, best first, under each of b relabellings. Returns each group's
    count (b, queries, G) and NDKL@k against each target (b, queries, len(p_stars)), as :func:`resampled_top_k`
    gives them for a resample holding each item once (NDKL by the same sum over ranks: an item at rank r that is
    its group's c-th adds U_r (c ln c - (c-1) ln (c-1)) - U_r ln q_g), for all b at once."""
    b, queries, k = ranked.shape
    positions = np.arange(1, k + 1)
    weights = 1 / np.log2(positions + 1)
    tail = np.cumsum((weights / positions)[::-1])[::-1]  # U_r
    constant = float((weights * np.log(positions)).sum())
    c_ln_c = np.zeros(k + 1)
    c_ln_c[1:] = positions * np.log(positions)
    step = np.diff(c_ln_c)  # step[c - 1]: what a group's c-th copy adds, c ln c - (c-1) ln (c-1)
    # each ranked item's (list, group) cell, flat: one bincount gives the counts, one the U_r summed per group
    cells = ((np.arange(b * queries) * groups).reshape(b, queries, 1) + ranked).ravel()
    counts = np.bincount(cells, minlength=b * queries * groups).reshape(b, queries, groups).astype(float)
    tail_of_group = np.bincount(cells, weights=np.broadcast_to(tail, ranked.shape).ravel(),
                                minlength=b * queries * groups).reshape(b, queries, groups)
    # each item's place among its group's items in its list, 1 for the first (int32: 4 of int64's 8 bytes
    # to sum, the loop's cost; a top k is far below 2^31)
    place = np.zeros(ranked.shape, dtype=np.int32)
    for group in range(groups):
        mask = ranked == group
        place += np.cumsum(mask, axis=2, dtype=np.int32) * mask
    own = step[place - 1] @ tail  # (b, queries)
    log_targets = np.stack([np.log(p_star) for p_star in p_stars], axis=1)  # (G, targets)
    return counts, (own[..., None] - tail_of_group @ log_targets - constant) / weights.sum()


def _target(target: str | Mapping[str, float], names: list[str],
            codes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    if isinstance(target, str):
        if target == "uniform":
            return np.full(len(names), 1 / len(names))
        if target == "dataset":
            return np.bincount(codes, minlength=len(names)) / codes.size
        raise ValueError(f"target must be 'uniform', 'dataset' or a dict of group shares, got {target!r}")
    shares = {}
    for group, share in target.items():
        if not finite_at_least_0(share):
            raise ValueError(f"target share of group {group!r} must be a number >= 0, got {stats.shown(share)}")
        shares[stats.label_text(group)] = float(share)
    missing = [n for n in names if n not in shares]
    if missing:
        raise ValueError(f"target gives no share for groups {missing}")
    p = np.array([shares[n] for n in names])
    if (p <= 0).any() or not math.isclose(sum(shares.values()), 1.0, abs_tol=1e-6):
        raise ValueError(f"target shares must be positive for every group present and sum to 1, got {shares}")
    return p
