"""The results.json every probe writes (schema ``vlfair.results/1``, see results.schema.json)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from importlib import resources
from typing import Any

from vlfair._version import __version__
from vlfair.outputs import Metric  # noqa: F401  (its home before vlfair.outputs)

SCHEMA = "vlfair.results/1"


def results_schema() -> dict[str, Any]:
    return json.loads(resources.files("vlfair.report").joinpath("results.schema.json").read_text())


def jsonable(value: Any) -> Any:
    """Plain JSON: numpy scalars to Python, NaN and infinities to None (JSON has neither)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or getattr(value, "ndim", 0) > 0:  # numpy arrays too
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def model_record(encoder: Any) -> dict[str, Any]:
    """results.json's ``model``: the encoder's spec, its name for people, revision and dtype."""
    identity = encoder.identity()
    return {"spec": identity["spec"], "name": getattr(encoder, "display_name", None) or identity["spec"],
            "revision": identity["revision"], "dtype": identity["dtype"]}


def build_results(probe: str, probe_version: int, model: dict[str, Any], dataset: dict[str, Any],
                  metrics: list[Metric], skipped_rows: list[int], settings: dict[str, Any], warnings: list[str],
                  published: list[dict[str, Any]] | None = None, probe_settings: dict[str, Any] | None = None,
                  family_key: dict[str, Any] | None = None) -> dict[str, Any]:
    """results.json's content; ``family_key`` (``Probe.family_key``) names its family."""
    results = {
        "schema": SCHEMA, "vlfair_version": __version__, "probe": probe, "probe_version": probe_version,
        "model": model,
        "dataset": dataset, "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": settings, "metrics": [dataclasses.asdict(m) for m in metrics],
        "skipped_rows": [int(r) for r in skipped_rows], "warnings": warnings, "published": published or [],
    }
    if probe_settings is not None:
        results["probe_settings"] = probe_settings
    if family_key is not None:
        results["family"] = family_of(family_key)
    return jsonable(results)


def family_of(key: dict[str, Any]) -> str:
    """16 hex digits of a run's family key (``Probe.family_key``: the probe, its version, the data
    and the settings that decide what it measures): runs of one family may be ranked together."""
    import hashlib

    text = json.dumps(jsonable(key), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def validate_results(results: dict[str, Any]) -> None:
    """Check against results.schema.json (raises jsonschema.ValidationError)."""
    import jsonschema

    jsonschema.validate(results, results_schema(), format_checker=jsonschema.FormatChecker())
