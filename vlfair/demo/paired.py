"""The demo's runs compared: biased vs control with ``vlfair compare``, each planted bias sought as
a paired difference with its sign, and how much narrower pairing makes the intervals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from vlfair.compare import compare_runs
from vlfair.compare.render import write_comparison
from vlfair.defaults import BOOTSTRAP, CONFIDENCE
from vlfair.demo.timing import Timings

# Each planted bias as a probe metric (the metric's subset holds these keys), biased = run A,
# control = run B: the control must come out less biased, with the planted sign.
PLANTED: list[tuple[str, str, dict[str, Any]]] = [
    ("professions", "group_score_gap", {"profession": "doctor", "attribute": "gender"}),
    ("professions", "group_score_gap", {"profession": "nurse", "attribute": "gender"}),
    ("traits", "trait_anova", {"trait": "smart/dumb", "gender": "Female"}),
    ("traits", "trait_anova", {"trait": "smart/dumb", "gender": "Male"}),
    ("word-influence", "word_influence", {"word": "nurse", "level": 1}),
    ("multilingual", "text_distance", {"portion": "translation"}),
    ("public-figures", "bias_ratio", {"folder": "politicians", "class": "politician"}),
    ("retrieval", "skew", {"attribute": "race", "concept": "smart", "group": "White"}),
]
EXPECTED = "b_less_biased"
NOT_A_PROBE_METRIC = ["public-figures: frequent vs rare names' retention (the demo's own measure; no probe metric "
                      "splits names by how often they were seen)"]


def compare_world(out: Path, probes: list[str], log: Callable[[str], None], timings: Timings | None = None
                  ) -> dict[str, Any]:
    """Compare out/biased/PROBE with out/control/PROBE for every probe (written to
    out/compare/PROBE, each probe's time the step ``compared`` of ``timings``); returns the planted
    differences found and the width ratios."""
    found, widths, comparisons = [], [], {}
    timings = timings or Timings()
    for probe in probes:
        with timings("compared", probe):
            comparison = compare_runs([out / "biased" / probe, out / "control" / probe], bootstrap=BOOTSTRAP,
                                      confidence=CONFIDENCE)
            write_comparison(comparison, out / "compare" / probe)
        comparisons[probe] = f"compare/{probe}/comparison.html"
        differences = comparison.content["differences"]
        for entry in differences:
            paired, apart = entry["difference_ci"], entry["unpaired_ci"]
            if paired and apart and apart[1] - apart[0] > 0:
                widths.append((paired[1] - paired[0]) / (apart[1] - apart[0]))
        for name, metric, subset in (p for p in PLANTED if p[0] == probe):
            matches = [d for d in differences if d["metric"] == metric
                       and all(d["subset"].get(k) == v for k, v in subset.items())]
            if not matches:
                raise ValueError(f"demo: no paired difference of {metric} {subset} in the {probe} comparison")
            entry = matches[0]
            found.append({"probe": name, "metric": metric, "subset": entry["subset"], "biased": entry["value_a"],
                          "control": entry["value_b"], "difference": entry["difference"],
                          "ci": entry["difference_ci"], "unpaired_ci": entry["unpaired_ci"],
                          "p": entry["p_value"], "verdict": entry["verdict"], "found": entry["verdict"] == EXPECTED})
    ratio = float(np.median(widths)) if widths else float("nan")
    log(f"paired (biased vs control, vlfair compare): {sum(f['found'] for f in found)}/{len(found)} planted biases "
        f"found as paired differences with their sign (the control less biased); paired/unpaired interval width: "
        f"median {ratio:.2f} over {len(widths)} differences")
    return {"planted": found, "median_width_ratio": ratio, "differences": len(widths), "comparisons": comparisons,
            "not_a_probe_metric": NOT_A_PROBE_METRIC}


__all__ = ["EXPECTED", "PLANTED", "compare_world"]
