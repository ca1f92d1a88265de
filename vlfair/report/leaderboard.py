"""One tidy table over many results.json (model x probe x metric x subset), and model-card results."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

COLUMNS = ["model", "revision", "dtype", "probe", "probe_version", "dataset", "split", "metric", "subset", "value",
           "ci_low", "ci_high", "p_value", "log10_p_value", "created", "vlfair_version"]
NUMBERS = {"value": float, "ci_low": float, "ci_high": float, "p_value": float, "log10_p_value": float}


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows (vlfair writes null there)")


def read_results(paths: Iterable[str | Path], skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """results.json files (a directory means its results.json), each checked against the schema,
    each read once however often it is given. A file that is missing, not JSON, holds NaN or
    Infinity, or breaks the schema is an error naming it; with ``skipped`` (a list) it is left
    out and described there instead, so one bad file does not hide the others."""
    import jsonschema

    from vlfair.report.results import validate_results

    loaded, seen = [], set()
    for given in paths:
        path = Path(given)
        path = path / "results.json" if path.is_dir() else path
        if path.resolve() in seen:
            continue
        seen.add(path.resolve())
        try:
            results = json.loads(path.read_text(encoding="utf-8"), parse_constant=_reject_constant)
            validate_results(results)
        except (OSError, ValueError, jsonschema.ValidationError) as exc:
            reason = exc.message if isinstance(exc, jsonschema.ValidationError) else (
                exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc))
            problem = f"{path}: {reason}"
            if skipped is None:
                raise ValueError(f"cannot read {problem}") from None
            skipped.append(problem)
            continue
        loaded.append(results)
    return loaded


def tidy(results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per metric of every results.json (as :func:`read_results` returns them), in :data:`COLUMNS`.

    Args:
        results: parsed results.json contents.

    Returns:
        The leaderboard's rows: the model, probe, dataset and metric, the subset as sorted JSON,
        the value with its CI and p-value (NaN where there is none), the run's date and version.
    """
    rows = []
    for r in results:
        for m in r["metrics"]:
            ci = m["ci"] or [None, None]
            rows.append({"model": r["model"].get("name") or r["model"]["spec"], "revision": r["model"]["revision"],
                         "dtype": r["model"]["dtype"],
                         "probe": r["probe"], "probe_version": r["probe_version"], "dataset": r["dataset"]["name"],
                         "split": r["dataset"]["split"], "metric": m["name"],
                         "subset": json.dumps(m["subset"], sort_keys=True, ensure_ascii=False), "value": m["value"],
                         "ci_low": ci[0], "ci_high": ci[1], "p_value": m["p_value"],
                         # the p-value's log10 where the measure gives one: a p below 1e-308 keeps its size
                         "log10_p_value": (m.get("details") or {}).get("log10_p_value"), "created": r["created"],
                         "vlfair_version": r["vlfair_version"]})
    return pd.DataFrame(rows, columns=COLUMNS).astype(NUMBERS)


def write_table(frame: pd.DataFrame, out: str | Path) -> Path:
    """Write a :func:`tidy` table as Parquet or CSV (by ``out``'s suffix); returns ``out``.

    Raises:
        ValueError: ``out`` ends in neither .parquet nor .csv.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".csv":
        from vlfair.report.tables import csv_safe

        csv_safe(frame).to_csv(out, index=False)  # a model or label named "=..." stays text in a spreadsheet
    elif out.suffix == ".parquet":
        frame.to_parquet(out, index=False)
    else:
        raise ValueError(f"leaderboard output must end in .parquet or .csv, got {out.name!r}")
    return out


def read_table(path: str | Path) -> pd.DataFrame:
    """A table :func:`write_table` wrote (.csv, else Parquet), with its column types restored."""
    path = Path(path)
    frame = pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
    if "log10_p_value" not in frame:  # a table written before vlfair kept it
        position = frame.columns.get_loc("p_value")
        assert isinstance(position, int), "a results table's columns are unique"
        frame.insert(position + 1, "log10_p_value", float("nan"))
    frame = frame.astype(NUMBERS)
    for column in ("revision", "split"):  # CSV turns a missing string into NaN: back to None
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return frame


def push_table(frame: pd.DataFrame, repo_id: str) -> None:
    """Upload a :func:`tidy` table to the Hub dataset ``repo_id`` as its "results" split."""
    import datasets

    datasets.Dataset.from_pandas(frame, preserve_index=False).push_to_hub(repo_id, split="results")


def card_results(results: list[dict[str, Any]]) -> str:
    """model-index YAML (huggingface_hub EvalResult) for the model card of each model."""
    from huggingface_hub import EvalResult, ModelCardData

    blocks = []
    for model in sorted({r["model"]["spec"] for r in results}):
        evals = []
        for r in (r for r in results if r["model"]["spec"] == model):
            for m in r["metrics"]:
                if m["value"] is None:
                    continue
                subset = ", ".join(f"{k}={v}" for k, v in m["subset"].items())
                evals.append(EvalResult(
                    task_type="zero-shot-image-classification", task_name=f"vlfair {r['probe']}",
                    dataset_type=r["dataset"]["name"], dataset_name=r["dataset"]["name"],
                    dataset_split=r["dataset"]["split"], metric_type=m["name"], metric_value=m["value"],
                    metric_name=f"{m['name']} ({subset})" if subset else m["name"],
                    metric_config=json.dumps(m["subset"], sort_keys=True)))
        name = model.split(":", 1)[-1]
        blocks.append(ModelCardData(model_name=name, eval_results=evals).to_yaml())
    return "\n---\n".join(blocks)


def readable(rows: pd.DataFrame, extra: Iterable[str] = ()) -> pd.DataFrame:
    """Tidy rows as a person reads them (the Spaces' tables): subsets as text, 3 significant digits,
    the CI beside the value, a p-value that never reads 0, then the ``extra`` columns as they are."""
    from vlfair.report.numbers import format_interval, format_p, format_subset, format_value

    return pd.DataFrame({
        "metric": rows["metric"], "subset": rows["subset"].map(format_subset), "value": rows["value"].map(format_value),
        "CI": [format_interval(lo, hi) for lo, hi in zip(rows["ci_low"], rows["ci_high"])],
        "p": [format_p(p, log10) for p, log10 in zip(rows["p_value"], rows.get("log10_p_value", [None] * len(rows)))],
        **{column: rows[column] for column in extra}})
