"""Decisions on scores that a rounding cannot flip: near-equal scores are ties, resolved by one rule.

A similarity is a float32 dot product whose last bits depend on the order of its sums: numpy's
OpenBLAS picks its kernel by CPU (``OPENBLAS_CORETYPE=Haswell`` and ``SkylakeX`` round differently),
and torch's by instruction set (``ATEN_CPU_CAPABILITY``). Two captions whose scores differ only there
swap places from one machine to the next, and a plain ``argmax`` turns that into a different
retrieval accuracy. So every decision vlfair takes on scores (a best candidate, a ranking, a top k, a
threshold) reads them through this module:

- **Ties.** Scores are sorted from the highest; a new tie block starts where a score is more than the
  tolerance below the one before it (``tie_blocks``). The tolerance is ``TIE_RTOL`` (2^-17, 64 float32
  ulps) times the largest magnitude among the scores compared (a row's, per row): OpenBLAS's and
  torch's kernels moved the demo world's float32 cosines by at most 0.07 of it (DESIGN, "Decisions on
  scores"), and two genuinely different scores are rarely that close. Exact equality is a tie too, so equal
  embeddings (the same caption twice) never depend on which one a kernel puts first.
- **A best candidate** (top-1 retrieval, a zero-shot prediction, a name retrieved first) counts, for a
  question with a right answer, as the expected value under random tie-breaking: a correct candidate
  among t tied best ones counts 1/t (McSherry and Najork, ECIR 2008). Where there is no tie this is
  the study's plain argmax, to the bit. Where a label must be one label (a generated image's group),
  the first tied candidate in the candidates' order is taken (``best_index``).
- **A ranking or a top k** orders a tie block by the items' index (``canonical_order``): the same
  order on every machine, for the point value and every resample alike (see
  :func:`vlfair.measures.top_k_order`).
- **A threshold** is reached by a score within the tolerance below it (``reaches``), and exceeded only by
  one more than the tolerance above it (``exceeds``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

TIE_RTOL = 2.0 ** -17
"""Scores closer than this times the largest magnitude compared are ties (64 float32 ulps)."""


_FEW = 32  # candidates few enough that a loop over them beats numpy's reduction along a short last axis


def _row_reduce(values: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
    """``ufunc.reduce`` over the last axis, kept: a pass per candidate where there are few (a reduction along a
    short last axis walks it element by element: 10x slower for 9 classes), numpy's own otherwise."""
    if values.shape[-1] > _FEW:
        return ufunc.reduce(values, axis=-1, keepdims=True)
    out = values[..., 0].copy()
    for j in range(1, values.shape[-1]):
        ufunc(out, values[..., j], out=out)
    return out[..., None]


def _row_counts(mask: np.ndarray) -> np.ndarray:
    """How many of each row's candidates (the last axis) ``mask`` holds."""
    if mask.shape[-1] > _FEW:
        return np.count_nonzero(mask, axis=-1)
    return _row_reduce(mask.astype(np.intp), np.add)[..., 0]


def _floats(scores: npt.ArrayLike) -> np.ndarray:
    """The scores as a floating array, in their own precision where they have one (float32 stays float32)."""
    values = np.asarray(scores)
    return values if np.issubdtype(values.dtype, np.floating) else values.astype(float)


def tolerance(scores: npt.ArrayLike, top: np.ndarray | None = None) -> npt.NDArray[np.float64]:
    """The tie tolerance of each row (the last axis), kept as a trailing axis of length 1: ``TIE_RTOL``
    times the row's largest finite magnitude (0 for a row of zeros or of no finite score); ``top``: each
    row's maximum, where the caller has it already."""
    values = _floats(scores)
    if values.shape[-1] == 0:
        return np.zeros(values.shape[:-1] + (1,))
    top = _row_reduce(values, np.maximum) if top is None else top
    largest = np.maximum(top, -_row_reduce(values, np.minimum)).astype(float)
    if not np.isfinite(largest).all():  # an infinite score (a masked candidate) is not a magnitude compared
        largest = np.max(np.where(np.isfinite(values), np.abs(values), 0), axis=-1, keepdims=True,
                         initial=0).astype(float)
    return TIE_RTOL * largest


def nonfinite_rows(scores: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The rows (0-based, first axis) holding a NaN or an infinite score."""
    values = np.asarray(scores, dtype=float)
    bad = ~np.isfinite(values)
    return np.flatnonzero(bad.reshape(len(values), -1).any(axis=1) if values.ndim > 1 else bad)


def require_finite(scores: npt.ArrayLike, what: str, rows: npt.ArrayLike | None = None) -> None:
    """ValueError naming the rows (``rows``: each row's own name, e.g. the dataset's 0-based rows; shown
    1-based) where ``scores`` hold NaN or inf: a decision on them would be a decision on nothing."""
    bad = nonfinite_rows(scores)
    if bad.size:
        named = bad if rows is None else np.asarray(rows)[bad]
        shown = ", ".join(str(int(r) + 1) for r in named[:10]) + (f" and {bad.size - 10} more" if bad.size > 10 else "")
        raise ValueError(f"{what}: scores are NaN or infinite in {bad.size} row(s) ({shown}, counted from 1): "
                         "a best candidate or a ranking cannot be taken on them")


def tie_blocks(descending: npt.ArrayLike, tol: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Each position's tie block (0, 1, ...) along the last axis of scores sorted from the highest: a new
    block starts where a score is more than ``tol`` (per row, broadcast) below the one before it."""
    values = np.asarray(descending, dtype=float)
    with np.errstate(invalid="ignore"):  # -inf after -inf: one block
        drops = -np.diff(values, axis=-1) > np.asarray(tol)
    return np.concatenate([np.zeros(values.shape[:-1] + (1,), dtype=np.int64),
                           np.cumsum(drops, axis=-1, dtype=np.int64)], axis=-1)


def best_ties(scores: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Which candidates (the last axis) are tied with each row's best: its first tie block (:func:`tie_blocks`),
    found without sorting. The scores within the tolerance of the best join it; in a row where another did,
    the scores within the tolerance below the lowest joined one join too, until none does."""
    values = _floats(scores)
    if values.shape[-1] == 0:
        return np.zeros(values.shape, dtype=bool)
    top = _row_reduce(values, np.maximum)
    tol = tolerance(values, top)
    # the drop from the best, as tie_blocks measures it: a difference of two close floats is exact in their own
    # precision (Sterbenz), compared with the float64 tolerance (rounding the threshold to float32 instead
    # would join a score one tolerance and a rounding below, where canonical_order starts a new block)
    with np.errstate(invalid="ignore"):  # -inf - -inf: a row of masked candidates ties nothing
        joined = np.ascontiguousarray(top - values <= tol)
    if np.count_nonzero(joined) == joined.size // joined.shape[-1]:  # every best alone: nothing ties
        return joined
    flat, joined_flat = values.reshape(-1, values.shape[-1]), joined.reshape(-1, values.shape[-1])  # a view
    crowded = np.flatnonzero(_row_counts(joined_flat) > 1)  # rows where the best is not alone
    if crowded.size:
        rows, row_tol = flat[crowded], tol.reshape(-1, 1)[crowded]
        lowest = np.min(np.where(joined_flat[crowded], rows, top.reshape(-1, 1)[crowded]), axis=1, keepdims=True)
        while True:  # the chain goes on below the lowest joined score (a few passes over these rows alone)
            with np.errstate(invalid="ignore"):
                lower = np.min(np.where(lowest - rows <= row_tol, rows, lowest), axis=1, keepdims=True)
            if np.array_equal(lower, lowest, equal_nan=True):
                break
            lowest = lower
        joined_flat[crowded] = rows >= lowest
    return joined


def best_credit(scores: npt.ArrayLike, correct: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Each row's top-1 result as the expected value under random tie-breaking: the share of its tied
    best candidates that are correct (``correct``: a boolean of the scores' shape, or broadcast to it).
    1 or 0 where the best is alone, as an argmax gives."""
    tied = best_ties(scores)
    hits = _row_counts(tied & np.asarray(correct, dtype=bool))
    return hits / np.maximum(_row_counts(tied), 1)


def best_index(scores: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Each row's best candidate, the first in the candidates' order among those tied with the best."""
    return np.argmax(best_ties(scores), axis=-1)


def reaches(scores: npt.ArrayLike, threshold: float) -> npt.NDArray[np.bool_]:
    """Whether each score reaches ``threshold``, a score within the tolerance below it included (the
    tolerance of the threshold's and the score's magnitudes)."""
    values = np.asarray(scores, dtype=float)
    return values >= threshold - TIE_RTOL * np.maximum(np.abs(values), abs(threshold))


def exceeds(scores: npt.ArrayLike, threshold: float) -> npt.NDArray[np.bool_]:
    """Whether each score is above ``threshold`` by more than the tolerance (a score within it is equal to the
    threshold, which does not exceed it): the strict threshold a rounding cannot move a score across."""
    values = np.asarray(scores, dtype=float)
    return values > threshold + TIE_RTOL * np.maximum(np.abs(values), abs(threshold))


def canonical_order(scores: npt.NDArray[np.float64], m: int,
                    tol: npt.NDArray[np.float64] | None = None) -> npt.NDArray[np.int64]:
    """Each row's ``m`` best columns, best first, a tie block (:func:`tie_blocks`; ``tol`` per row, by
    default :func:`tolerance`) in column order: the order no kernel's rounding changes. ``argpartition``
    finds a few more than m, so a row costs O(N + m log m); a row whose block at place m runs past them
    is looked at again with twice as many."""
    rows, items = scores.shape
    m = min(m, items)
    if m == 0:
        return np.empty((rows, 0), dtype=np.int64)
    if np.isnan(scores).any():  # a NaN (a float16 overflow in a masked LM's logits) ranks last, never in a block
        scores = np.where(np.isnan(scores), -np.inf, scores)
    tol = tolerance(scores) if tol is None else np.asarray(tol, dtype=float)
    order = np.empty((rows, m), dtype=np.int64)
    spare = min(items, m + 16 + m // 8)
    again = np.arange(rows)
    while again.size:
        part = scores[again]
        chosen = (np.argpartition(-part, spare - 1, axis=1)[:, :spare] if spare < items
                  else np.broadcast_to(np.arange(items), part.shape))
        picked = np.take_along_axis(part, chosen, axis=1)
        by_score = np.argsort(-picked, axis=1, kind="stable")
        chosen, picked = np.take_along_axis(chosen, by_score, axis=1), np.take_along_axis(picked, by_score, axis=1)
        blocks = tie_blocks(picked, tol[again])
        # within a block by column: the key (block, column) sorted
        canonical = np.take_along_axis(chosen, np.argsort(blocks * items + chosen, axis=1, kind="stable"), axis=1)
        # the block at place m must lie whole among the candidates, or a column left out might belong in it
        whole = (spare == items) | (blocks[:, m - 1] < blocks[:, -1])
        order[again[whole]] = canonical[whole, :m]
        again = again[~whole]
        spare = min(items, 2 * spare)
    return order


__all__ = ["TIE_RTOL", "best_credit", "best_index", "best_ties", "canonical_order", "exceeds", "nonfinite_rows",
           "reaches", "require_finite", "tie_blocks", "tolerance"]
