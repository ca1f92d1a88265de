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


def build_results(probe: str, probe_version: int, encoder: Any, dataset: dict[str, Any], metrics: list[Metric],
                  skipped_rows: list[int], settings: dict[str, Any], warnings: list[str],
                  published: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    identity = encoder.identity()
    return jsonable({
        "schema": SCHEMA, "vlfair_version": __version__, "probe": probe, "probe_version": probe_version,
        "model": {"spec": identity["spec"], "name": getattr(encoder, "display_name", None) or identity["spec"],
                  "revision": identity["revision"], "dtype": identity["dtype"]},
        "dataset": dataset, "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": settings, "metrics": [dataclasses.asdict(m) for m in metrics],
        "skipped_rows": [int(r) for r in skipped_rows], "warnings": warnings, "published": published or [],
    })


def validate_results(results: dict[str, Any]) -> None:
    """Check against results.schema.json (raises jsonschema.ValidationError)."""
    import jsonschema

    jsonschema.validate(results, results_schema(), format_checker=jsonschema.FormatChecker())
