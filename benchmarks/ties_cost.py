"""What deciding on scores through the tie rule (vlfair.measures.ties) costs, measured in one run.

Issue 62 bounds it at 5 % of two computations; each is timed with the tie rule and with the plain
decision it replaced (ties by index alone: a stable sort; a plain argmax), on generated float32 scores:

  retrieval skew  measures.ranking_skew at DVL's scale: 319 queries x 10,954 images, k = 1000, 1,000
                  resamples, gender's two groups in FairFace's validation counts (the items ranked once by
                  measures.top_k_order, canonical within tie blocks, against argpartition and a stable sort)
  multilingual    the study's size: Multi30K's test split (1,000 images, one English and one German caption
                  each: top-1 retrieval both ways) and FairFace's validation set (10,954 images) in 8
                  languages, zero-shot race (7 classes), gender (2) and age (9); per direction and task the
                  cross-lingual accuracy gap's bootstrap as the probe resamples it; the tie-aware top-1
                  credit (ties.best_credit) against argmax == truth

The last line:

  ranking_skew_overhead=A multilingual_overhead=B seconds_ranking_skew=C seconds_multilingual=D

A, B = (seconds with the tie rule - seconds with the plain decision) / seconds with the plain decision
(0.05 is the issue's bound; negative: faster), C, D = the seconds with the tie rule.

Usage: python benchmarks/ties_cost.py [--quick] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import numpy as np

from vlfair import measures, stats
from vlfair.measures import ranking, ties

GENDER_COUNTS = [5792, 5162]  # FairFace validation: Male, Female
LANGUAGES = 8
TASK_CLASSES = {"race": 7, "gender": 2, "age": 9}


def _index_order(scores: np.ndarray, k: int, exact: bool = False) -> np.ndarray:
    """The top k as before issue 62: argpartition, equal scores by index (a stable sort of the k)."""
    if k >= scores.shape[1]:
        return np.argsort(-scores, axis=1, kind="stable")[:, :k]
    kth = np.partition(-scores, k - 1, axis=1)[:, k - 1:k]
    better, tied = -scores < kth, -scores == kth
    take = better | (tied & (np.cumsum(tied, axis=1) <= k - better.sum(axis=1, keepdims=True)))
    chosen = np.nonzero(take)[1].reshape(scores.shape[0], k)
    picked = np.take_along_axis(scores, chosen, axis=1)
    return np.take_along_axis(chosen, np.argsort(-picked, axis=1, kind="stable"), axis=1)


@contextmanager
def _plain_ranking():
    tie_aware = ranking.top_k_order
    ranking.top_k_order = _index_order
    try:
        yield
    finally:
        ranking.top_k_order = tie_aware


def _argmax_credit(scores: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """Top-1 as before issue 62: right where the argmax is."""
    best = scores.argmax(axis=-1)
    return np.take_along_axis(np.broadcast_to(correct, scores.shape), best[..., None], axis=-1)[..., 0].astype(float)


def _paired_best(plain: Callable[[], Any], tied: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """The fastest of ``repeats`` timed calls of each, taken in turn (plain, tied, plain, ...: a machine whose
    speed drifts during the run slows both alike), after one untimed call of each (caches, pages)."""
    plain()
    tied()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for run, kept in zip((plain, tied), times):
            start = time.perf_counter()
            run()
            kept.append(time.perf_counter() - start)
    return min(times[0]), min(times[1])


def _unit(rng: np.random.Generator, rows: int, dim: int) -> np.ndarray:
    x = rng.normal(size=(rows, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _accuracy_gap(correct: list[np.ndarray], resamples: int) -> None:
    """Each language's accuracy (the mean of its 1, 0 or tie shares) and their bootstrap, as the probe's
    cross-lingual gap resamples each language's answers on their own (stats.bootstrap_group_means)."""
    values = np.concatenate(correct)
    codes = np.repeat(np.arange(len(correct)), [c.size for c in correct])
    draws = stats.bootstrap_group_means(values, codes, len(correct), resamples, 0)
    stats.percentile_interval(draws.max(axis=1) - draws.min(axis=1), 0.95)


def _multilingual(credit: Callable[[np.ndarray, np.ndarray], np.ndarray], data: dict[str, Any], resamples: int) -> None:
    """Top-1 decisions and the study's gaps on them: Multi30K's retrieval both ways, FairFace's zero-shot tasks."""
    images, captions = data["multi30k_images"], data["multi30k_captions"]
    owns = np.eye(len(images), dtype=bool)
    for direction in (lambda s: s, lambda s: s.T):
        _accuracy_gap([credit(direction(images @ text.T), owns) for text in captions.values()], resamples)
    faces = data["fairface_images"]
    for task, classes in TASK_CLASSES.items():
        right = np.arange(classes)[None, :] == data["truth"][task][:, None]
        _accuracy_gap([credit(faces @ prompts.T, right) for prompts in data["prompts"][task]], resamples)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="40 queries x 2,000 items, k=100, 50 resamples")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    queries, items, k, resamples, faces, pairs = (40, 2000, 100, 50, 1000, 200) if args.quick else (
        319, 10954, 1000, 1000, 10954, 1000)
    rng = np.random.default_rng(0)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; retrieval skew: {queries} queries "
          f"x {items:,} images, k={k}, {resamples} resamples; multilingual: {pairs:,} Multi30K pairs, {faces:,} "
          f"FairFace images x {LANGUAGES} languages")
    # cosines of unit vectors in float32, as a model gives them (their ties: rounding-close and exact ones)
    scores = (_unit(rng, queries, 64) @ _unit(rng, items, 64).T).astype(np.float32)
    shares = np.array(GENDER_COUNTS) / sum(GENDER_COUNTS)
    groups = rng.permutation(np.repeat(["Male", "Female"], np.round(shares * items).astype(int))[:items])
    groups = np.concatenate([groups, ["Male"] * (items - groups.size)])

    def skew() -> None:
        measures.ranking_skew(scores, groups, k=k, zero_count="dvl", bootstrap=resamples)

    def plain_skew_run() -> None:
        with _plain_ranking():
            skew()

    plain_skew, tied_skew = _paired_best(plain_skew_run, skew, args.repeats)
    data = {"multi30k_images": _unit(rng, pairs, 512),
            "multi30k_captions": {lang: _unit(rng, pairs, 512) for lang in ("en", "de")},
            "fairface_images": _unit(rng, faces, 512),
            "truth": {task: rng.integers(0, n, faces) for task, n in TASK_CLASSES.items()},
            "prompts": {task: [_unit(rng, n, 512) for _ in range(LANGUAGES)] for task, n in TASK_CLASSES.items()}}
    lingual_repeats = max(args.repeats, 7)  # under a second each: more repeats, less noise in the ratio
    plain_lingual, tied_lingual = _paired_best(lambda: _multilingual(_argmax_credit, data, resamples),
                                               lambda: _multilingual(ties.best_credit, data, resamples),
                                               lingual_repeats)
    for name, plain, tied in (("retrieval skew", plain_skew, tied_skew), ("multilingual", plain_lingual, tied_lingual)):
        print(f"{name:15} plain decision {plain:8.3f} s   tie rule {tied:8.3f} s   overhead {tied / plain - 1:+.1%}")
    print(f"ranking_skew_overhead={tied_skew / plain_skew - 1:.4f} "
          f"multilingual_overhead={tied_lingual / plain_lingual - 1:.4f} seconds_ranking_skew={tied_skew:.3f} "
          f"seconds_multilingual={tied_lingual:.3f}")


if __name__ == "__main__":
    main()
