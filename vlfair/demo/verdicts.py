"""The demo's tally over every bias metric of every run, as each run judged it (``vlfair.verdicts``, after the
run's own correction): not a chosen few entries, every metric with a verdict, for every model, and each
detection named, so a control's detections are there to read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vlfair.report.numbers import format_p, format_subset, format_value
from vlfair.verdicts import DECIDING


def every_verdict(out: Path) -> dict[str, dict[str, Any]]:
    """Each model's runs under ``out`` (``<model>/<probe>/results.json``): the tests its runs made, the bias
    detected, the metrics not judged, and each detection (probe, metric, subset, value, raw and adjusted p)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(out.glob("*/*/results.json")):
        results = json.loads(path.read_text())
        model = path.parent.parent.name
        tally = found.setdefault(model, {"name": results["model"]["name"], "runs": 0, "tests": 0, "detected": 0,
                                         "not_judged": 0, "detections": []})
        summary = results.get("verdicts") or {}
        tally["runs"] += 1
        for key in ("tests", "detected", "not_judged"):
            tally[key] += int(summary.get(key, 0))
        neutral = {name: facts.get("neutral") for name, facts in (results.get("measures") or {}).items()}
        tally["detections"] += [
            {"probe": results["probe"], "metric": metric["name"], "subset": metric["subset"], "value": metric["value"],
             "neutral": neutral.get(metric["name"]),
             "p_value": metric["verdict"]["p_value"], "adjusted": metric["verdict"][DECIDING[summary["correction"]]],
             "correction": summary["correction"]}
            for metric in results["metrics"] if (metric.get("verdict") or {}).get("detected")]
    return found


def every_verdict_lines(found: dict[str, dict[str, Any]], shown: int = 6) -> list[str]:
    """The tally for the terminal: one line per model, then the detections of each model named control."""
    lines = ["every bias metric of every run, as each run judged it (its correction over its tests):"]
    for model, tally in found.items():
        named = model if tally.get("name") in (None, model) else f"{tally['name']} ({model})"
        lines.append(f"  {named}: bias detected in {tally['detected']} of {tally['tests']} tests over {tally['runs']} "
                     f"runs" + (f"; {tally['not_judged']} not judged" if tally["not_judged"] else ""))
        if "control" in model:
            for detection in tally["detections"][:shown]:
                lines.append(f"    {detection['probe']} {detection['metric']} ({format_subset(detection['subset'])}):"
                             f" {format_value(detection['value'], apart_from=detection.get('neutral'))},"
                             f" p = {format_p(detection['p_value'])}")
            if len(tally["detections"]) > shown:
                lines.append(f"    and {len(tally['detections']) - shown} more: verdicts.json")
    return lines


__all__ = ["every_verdict", "every_verdict_lines"]
