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


def compare_probe(out: Path, probe: str) -> dict[str, Any]:
    """out/biased/PROBE against out/control/PROBE (written to out/compare/PROBE): the planted biases'
    paired differences (``planted``), the paired/unpaired width ratio of every difference
    (``widths``) and the comparison's page (``page``)."""
    comparison = compare_runs([out / "biased" / probe, out / "control" / probe], bootstrap=BOOTSTRAP,
                              confidence=CONFIDENCE)
    write_comparison(comparison, out / "compare" / probe)
    differences = comparison.content["differences"]
    widths = [(paired[1] - paired[0]) / (apart[1] - apart[0])
              for paired, apart in ((d["difference_ci"], d["unpaired_ci"]) for d in differences)
              if paired and apart and apart[1] - apart[0] > 0]
    found = []
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
    return {"planted": found, "widths": widths, "page": f"compare/{probe}/comparison.html"}


def paired_summary(compared: dict[str, dict[str, Any]], log: Callable[[str], None]) -> dict[str, Any]:
    """paired.json from every probe's :func:`compare_probe` (``{probe: ...}``, in the probes' order):
    the planted differences found, the median width ratio, each comparison's page."""
    found = [entry for probe in compared.values() for entry in probe["planted"]]
    widths = [width for probe in compared.values() for width in probe["widths"]]
    ratio = float(np.median(widths)) if widths else float("nan")
    log(f"paired (biased vs control, vlfair compare): {sum(f['found'] for f in found)}/{len(found)} planted biases "
        f"found as paired differences with their sign (the control less biased); paired/unpaired interval width: "
        f"median {ratio:.2f} over {len(widths)} differences")
    return {"planted": found, "median_width_ratio": ratio, "differences": len(widths),
            "comparisons": {probe: result["page"] for probe, result in compared.items()},
            "not_a_probe_metric": NOT_A_PROBE_METRIC}


__all__ = ["EXPECTED", "PLANTED", "compare_probe", "paired_summary"]
