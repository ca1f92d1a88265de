"""Retrieval skew at the scale of DVL's experiment: ranking_skew's bootstrap against re-ranking every resample.

oxai/debias-vision-lang ranks FairFace's 10,954 validation images for 319 prompts (11 templates x 29
concepts) and reports MaxSkew and NDKL at k=1000 for gender (2 groups), race (7) and age (9). This
times, in one run, on generated scores with those sizes and groups of FairFace's validation counts:

  vlfair     measures.ranking_skew(..., k, bootstrap=B): the point values and intervals of MaxSkew,
             MinSkew, NDKL and Bias@k, every query re-ranked in every resample (the items ranked once,
             each resample's top k walked with the items' multiplicities: measures.resampled_top_k)
  reference  per resample: the resampled score matrix gathered, every query fully sorted, and
             ranking_skew(bootstrap=0) on it, timed on --reference-resamples and scaled to B
  top k      measures.top_k_order (argpartition, then the k sorted) against a full stable sort
  probe      the retrieval probe's whole analysis of those scores as its samples (vlfair rescore's work once
             the embeddings are cached): the three attributes, both targets, every concept's and group's
             values, intervals over the images and over the prompts

and prints each time with the ratios. The last line:

  ratio_vs_full_rerank=A topk_vs_sort=B seconds_gender=C seconds_race=D seconds_age=E seconds_probe=F

A = vlfair / reference for all three attributes together (lower is faster), B = top_k_order / full
sort, C..E = vlfair seconds per attribute with B resamples, F = the probe's analysis.

Usage: python benchmarks/ranking_skew_speed.py [--queries 319] [--items 10954] [--k 1000] [--resamples 1000] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from vlfair import measures, stats

# FairFace validation (fairface_label_val.csv, 10,954 rows): rows per group. gender: Male, Female; race:
# White, Black, Latino_Hispanic, East Asian, Southeast Asian, Indian, Middle Eastern; age: 0-2 .. more than 70
GROUP_COUNTS = {
    "gender": [5792, 5162],
    "race": [2085, 1556, 1623, 1550, 1415, 1516, 1209],
    "age": [199, 1356, 1181, 3300, 2330, 1353, 796, 321, 118],
}


def _labels(counts: list[int], items: int, rng: np.random.Generator) -> np.ndarray:
    """``items`` labels in the proportions of ``counts``, shuffled."""
    shares = np.array(counts) / sum(counts)
    labels = np.repeat(np.arange(len(counts)), np.maximum(1, np.round(shares * items).astype(int)))[:items]
    labels = np.concatenate([labels, np.zeros(items - labels.size, dtype=int)])
    return rng.permutation(labels)


def _best(run, repeats: int = 1) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def _reference(scores: np.ndarray, groups: list[str], k: int, resamples: int, codes: np.ndarray) -> float:
    """Seconds per resample of re-ranking from scratch: gather the resample, sort every query, measure."""
    block = next(stats.stratified_resamples(codes, resamples, 0))
    start = time.perf_counter()
    for row in block:
        kept = np.sort(row)
        np.argsort(-scores[:, kept], axis=1, kind="stable")
        measures.ranking_skew(scores[:, kept], [groups[i] for i in kept], k=k, zero_count="dvl", bootstrap=0)
    return (time.perf_counter() - start) / len(block)


def _probe_seconds(scores: np.ndarray, labels: dict[str, np.ndarray], k: int, resamples: int) -> float:
    """The retrieval probe's analyze on ``scores`` as its samples: DVL's 29 concepts (fewer with fewer
    queries) in as many templates as the queries fill."""
    import pandas as pd

    from vlfair.probes import probe_class
    from vlfair.probes.retrieval import SCORE
    from vlfair.samples import Samples

    concepts = probe_class("retrieval").default_settings()["concepts"][:scores.shape[0]]
    templates = [f"template {t}: {{}}" for t in range(scores.shape[0] // len(concepts))]
    probe = probe_class("retrieval")({"k": k, "bootstrap": resamples, "concepts": concepts,
                                      "query_templates": templates})
    queries = probe.queries()  # templates outer, as the probe forms them
    frame = pd.DataFrame({"row": np.arange(scores.shape[1]), "id": [str(i) for i in range(scores.shape[1])],
                          **{attribute: [f"{attribute} {c}" for c in codes] for attribute, codes in labels.items()},
                          **{SCORE + prompt: scores[q] for q, (_, prompt) in enumerate(queries)}})
    samples = Samples(frame, {"queries": [p for _, p in queries], "concepts": [c for c, _ in queries],
                              "images": scores.shape[1]})
    return _best(lambda: probe.analyze(samples))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=319)
    parser.add_argument("--items", type=int, default=10954)
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--reference-resamples", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="40 queries x 2,000 items, k=100, 50 resamples")
    args = parser.parse_args(argv)
    if args.quick:
        args.queries, args.items, args.k, args.resamples, args.reference_resamples = 40, 2000, 100, 50, 3
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(args.queries, args.items))
    print(f"{args.queries} queries x {args.items:,} items, k={args.k}, {args.resamples} resamples; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    vlfair_total = reference_total = 0.0
    seconds, labels = {}, {}
    for attribute, counts in GROUP_COUNTS.items():
        codes = labels[attribute] = _labels(counts, args.items, rng)
        groups = [str(c) for c in codes]
        took = _best(lambda labels=groups: measures.ranking_skew(scores, labels, k=args.k, zero_count="dvl",
                                                                 bootstrap=args.resamples))
        per_resample = _reference(scores, groups, args.k, args.reference_resamples, codes)
        reference = per_resample * args.resamples
        seconds[attribute] = took
        vlfair_total, reference_total = vlfair_total + took, reference_total + reference
        print(f"  {attribute:<7} {len(counts)} groups: vlfair {took:8.2f} s   reference {reference:8.2f} s "
              f"({per_resample * 1000:.0f} ms x {args.resamples})   ratio {took / reference:.3f}")
    top_k = _best(lambda: measures.top_k_order(scores, args.k), 3)
    full = _best(lambda: np.argsort(-scores, axis=1, kind="stable")[:, :args.k], 3)
    print(f"  top k of every query: top_k_order {top_k:.3f} s, full stable sort {full:.3f} s")
    probe = _probe_seconds(scores, labels, args.k, args.resamples)
    print(f"  the retrieval probe's analysis (3 attributes, 2 targets, per concept and group, intervals over images "
          f"and prompts): {probe:.2f} s")
    print(f"ratio_vs_full_rerank={vlfair_total / reference_total:.3f} topk_vs_sort={top_k / full:.3f} "
          f"seconds_gender={seconds['gender']:.2f} seconds_race={seconds['race']:.2f} seconds_age={seconds['age']:.2f} "
          f"seconds_probe={probe:.2f}")


if __name__ == "__main__":
    main()
