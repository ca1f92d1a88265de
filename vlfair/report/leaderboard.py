"""One tidy table over many results.json (model x probe x metric x subset), ranked within
families of comparable runs, and model-card results.

Reading runs. Runs with one content hash are counted once (the CLI says how many copies it left out); a
file that cannot be read is skipped and named (a downloaded one by its path in the repository). Anyone
can write a results.json, so every one passes one gate (``_load_results``): a file larger than 64 MiB,
not UTF-8, not JSON, nested more than 64 levels, a number beyond a float's range (``1e400``, an integer of
more than 308 digits), NaN or Infinity, or a file that breaks results.schema.json is skipped, with the
field the schema names ("metrics[0].details.log10_p_value: 'oops' is not of type 'number', 'null'") in
one line of at most 300 characters; so is a run whose numbers the table cannot take, and one whose family
is not the one its own record makes (``results.family_problem``: docs/DESIGN.md, "The shared
leaderboard"); a run that records no key (written before vlfair recorded one) is skipped with "run it
again"; and, read through ``vlfair.compare.board`` (every board: the CLI's, the Space's), a run whose reported
values its samples beside it do not give, naming the metric. The schema types ``details.log10_p_value`` (a
number or null), and ``created`` is checked as an RFC 3339 date-time (a real day and time with an offset) by
vlfair itself: jsonschema checks "date-time" only where the optional package rfc3339-validator is installed.
``vlfair leaderboard`` warns ``vlfair leaderboard: skipped FILE: REASON`` and writes the table of the other
runs; the Space lists them under "Skipped (unreadable)". A table read as a board (CSV, Parquet, an older pushed
board) keeps a row found twice once, and the Space says how many it left out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from vlfair.facts import Facts
from vlfair.measures.catalog import facts_in, neutral_value
from vlfair.report.eval_results import record_name
from vlfair.report.hub import (  # noqa: F401  (the Space's)
    BOARD_FILES,
    Wanted,
    content_hash,
    dedupe,
    download_runs,
    hub_repo,
    is_repo_id,
)
from vlfair.report.markup import markdown_text  # noqa: F401  (the Space's: text from results files)
from vlfair.report.results import (  # noqa: F401  (read_results: its home before vlfair.report.results)
    family_problem,
    read_files,
    read_results,
    short_reason,
    skip_or_raise,
)
from vlfair.verdicts import DECIDING

COLUMNS = ["model", "revision", "dtype", "kind", "probe", "probe_version", "dataset", "split", "metric", "subset",
           # confidence: the interval's level (the run's; runs of one family may differ in it)
           "value", "ci_low", "ci_high", "confidence", "p_value", "log10_p_value",
           # the measure's effect size where it has one (an F's omega squared: what F-tests are ranked by) and the
           # run's verdict, read from results.json (vlfair.verdicts): detected (1, 0; NaN: a level, or a run written
           # before verdicts), the p that decided it and the run's correction
           "effect", "detected", "p_adjusted", "correction", "created", "vlfair_version",
           # what may be ranked against what: the run's family, the run (its content hash), the metric's
           # neutral value (NaN: a level, not a bias) and the rank within family, metric and subset
           "family", "run", "neutral", "rank",
           # the run's Every Eval Ever record's path under every_eval_ever (card-results'): a board page links it
           "record"]
NUMBERS = {"value": float, "ci_low": float, "ci_high": float, "confidence": float, "p_value": float,
           "log10_p_value": float, "effect": float, "detected": float, "p_adjusted": float,
           "neutral": float, "rank": float}
HEX = {"family": str, "run": str}  # hex digits that a CSV reader would otherwise take for numbers
# a probe's own facts (Probe.facts: metric -> Facts or neutral value) by probe name, for runs that recorded none
# (written before results.json carried its metrics' facts), beyond the catalog's (vlfair.measures.catalog)
Neutrals = Mapping[str, Mapping[str, Facts | float]]


def tidy(results: list[dict[str, Any]], neutral: Neutrals | None = None) -> pd.DataFrame:
    """One row per metric of every results.json (as :func:`read_results` returns them), in :data:`COLUMNS`.

    Args:
        results: parsed results.json contents.
        neutral: each probe's own facts (``Probe.facts`` by probe name).

    Returns:
        The leaderboard's rows: the model, probe, dataset and metric, the subset as sorted JSON,
        the value with its CI and p-value (NaN where there is none), the run's date and version,
        its family and content hash, the metric's neutral value and the rank (:func:`rank`).

    Raises:
        ValueError, TypeError: a run holds something no row can (a p-value's log10 that is text).
    """
    return _frame([row for r in results for row in _rows(r, neutral)])


def _rows(r: dict[str, Any], neutral: Neutrals | None) -> list[dict[str, Any]]:
    """The rows of one run; its numbers are made floats here, so that a bad one names its run."""
    problem = family_problem(r)
    if problem:  # claims a family its own record does not make: ranked with runs it did not measure like
        raise ValueError(problem)
    run, own = content_hash(r), (neutral or {}).get(r["probe"])
    try:
        record: str | None = record_name(r)
    except (ValueError, TypeError, KeyError):  # a creation time record_name cannot read: a row without a record
        record = None
    rows = []
    correction = (r.get("verdicts") or {}).get("correction")
    for m in r["metrics"]:
        ci = m["ci"] or [None, None]
        verdict = m.get("verdict") or {}
        rows.append({"model": r["model"].get("name") or r["model"]["spec"], "revision": r["model"]["revision"],
                     "dtype": r["model"]["dtype"], "kind": model_kind(r),
                     "probe": r["probe"], "probe_version": r["probe_version"], "dataset": r["dataset"]["name"],
                     "split": r["dataset"]["split"], "metric": m["name"],
                     "subset": json.dumps(m["subset"], sort_keys=True, ensure_ascii=False), "value": m["value"],
                     "ci_low": ci[0], "ci_high": ci[1],
                     "confidence": (r.get("probe_settings") or {}).get("confidence") if m["ci"] else None,
                     "p_value": m["p_value"],
                     # the p-value's log10 where the measure gives one: a p below 1e-308 keeps its size
                     "log10_p_value": (m.get("details") or {}).get("log10_p_value"),
                     "effect": _effect(m), "detected": verdict.get("detected"),
                     "p_adjusted": verdict.get(DECIDING.get(correction or "", "p_value")) if verdict else None,
                     "correction": correction if verdict else None, "created": r["created"],
                     "vlfair_version": r["vlfair_version"], "family": r.get("family"), "run": run,
                     "neutral": facts_in(r, m["name"], own).neutral, "record": record})
    for row in rows:
        for column in NUMBERS:
            if column in row:
                row[column] = math.nan if row[column] is None else float(row[column])
    return rows


def _effect(metric: dict[str, Any]) -> float | None:
    """A metric's effect size, where its measure names one (``Measure.effect``: an F's omega squared)."""
    from vlfair.measures.catalog import CATALOG

    measure = CATALOG.get(metric["name"], None)
    name = getattr(measure, "effect", None)
    return (metric.get("details") or {}).get(name) if name else None


def model_kind(results: dict[str, Any]) -> str:
    """How a run's model scores: contrastive (embeddings) or generative (answers); runs written
    before generative models have no kind and are contrastive."""
    return str(results["model"].get("kind") or "contrastive")


# the Hub's task of a model card's results: a contrastive model classifies images by texts; a
# generative one answers questions about images; a plugin's kind of model is named as its kind
TASK_TYPES = {"contrastive": "zero-shot-image-classification", "generative": "image-text-to-text"}


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = _texts(pd.DataFrame(rows, columns=COLUMNS).astype(NUMBERS))
    frame["rank"] = rank(frame)
    return frame


def _texts(frame: pd.DataFrame) -> pd.DataFrame:
    """The text columns that may be missing hold None (as Python objects): the same table whether
    it was made here or read back from CSV, which turns a missing string into NaN."""
    for column in ("revision", "split", "family", "run", "record", "correction"):
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return frame


def rank(frame: pd.DataFrame) -> pd.Series:
    """Each row's rank among the rows of its family, metric and subset: 1 is the value closest to
    the metric's neutral value (the least biased: a bias ratio of 0.9 before 1.2, a gap of -0.1
    before 0.3), ties share the better rank; a metric with an effect size (an F) by its effect size,
    never by F (an F of 0.5 and one of 1.0 are both no effect: omega squared 0, one rank). NaN where
    ranking means nothing: a metric without a neutral value (a level, such as an accuracy), a run
    without a family, a missing value, or fewer than two runs with a value in the group (two runs of one model,
    in two precisions say, are two runs: as a board's tiers count them, :func:`run_labels` names them apart)."""
    keys = [frame["family"], frame["metric"], frame["subset"]]
    # by effect size only where every row of the group has one (a run written before omega squared has none: its
    # F and another's effect size are not on one scale, so the group is ranked by distance, as it was)
    every = frame["effect"].notna().groupby(keys, dropna=False).transform("all")
    distance = (frame["value"] - frame["neutral"]).abs().where(~every, frame["effect"])
    distance = distance.where(frame["neutral"].notna())
    ranks = distance.groupby(keys, dropna=True).rank(method="min")
    # a table written before the run's hash (no column, or rows without one): its models
    runs = frame["run"].fillna(frame["model"]) if "run" in frame else frame["model"]
    counted = runs.where(distance.notna()).groupby(keys, dropna=True).transform("nunique")
    return ranks.where(counted >= 2).astype(float)


# what tells runs of one model apart on a board, in this order ("M (float16)", "M (revision abc1234)")
TOLD_APART_BY = {"dtype": "{}", "revision": "revision {}", "kind": "{}"}


def run_labels(rows: pd.DataFrame) -> dict[str, str]:
    """Each run of ``rows`` (by its content hash, ``run``) named for people: its model's name, and where one
    model has several runs, what differs between them (:data:`TOLD_APART_BY`); runs alike in all of that
    (other samples of one model) by their hash's start."""
    runs = rows.drop_duplicates("run").set_index("run")
    labels: dict[str, str] = {}
    for model, same in runs.groupby("model", sort=False):
        differ = [column for column in TOLD_APART_BY if column in same and same[column].astype(str).nunique() > 1]
        for run, row in same.iterrows():
            parts = [TOLD_APART_BY[column].format(row[column]) for column in differ]
            labels[str(run)] = f"{model} ({', '.join(parts)})" if parts else str(model)
        alike = same.index.to_series().map(labels).duplicated(keep=False)
        for run in same.index[alike.to_numpy()]:
            parts = [*(TOLD_APART_BY[column].format(same.at[run, column]) for column in differ), str(run)[:8]]
            labels[str(run)] = f"{model} ({', '.join(parts)})"
    return labels


def result_files(sources: Iterable[str | Path], skipped: list[str] | None = None,
                 token: str | None = None) -> tuple[list[Path], dict[str, str]]:
    """The results.json files the ``sources`` name, and how to name a downloaded one for people.

    A source is a results.json, a directory (every results.json in its tree), or a Hub dataset
    ``hf://datasets/ORG/NAME[@REVISION]`` (its runs, downloaded). A directory without any is
    described in ``skipped`` (an error without it); a Hub source that cannot be read is an error.

    Returns:
        The files, and each downloaded copy's folder -> the source it came from.
    """
    files: list[Path] = []
    names: dict[str, str] = {}
    for source in map(str, sources):
        if hub_repo(source) is not None:
            root = download_runs(source, token, skipped=skipped)
            names[str(root)] = source.split("@")[0].rstrip("/")
            found = sorted(root.rglob("results.json"))
            if not found:
                skip_or_raise(skipped, f"{source}: no runs in it yet (runs/.../results.json)")
        elif Path(source).is_dir():
            found = sorted(Path(source).rglob("results.json"))
            if not found:
                skip_or_raise(skipped, f"{source}: no results.json in it or below")
        else:
            found = [Path(source)]  # read_results names it if it is missing
        files.extend(found)
    return files, names


# a run's check against what lies beside its results.json (its path and content): what is wrong, or None
RunCheck = Callable[[Path, dict[str, Any]], str | None]


def read_board(sources: Iterable[str | Path], skipped: list[str] | None = None, token: str | None = None,
               neutral: Neutrals | None = None, check: RunCheck | None = None) -> pd.DataFrame:
    """:func:`tidy` over every run the ``sources`` name (:func:`result_files`), one copy of each
    (by content hash: the same run found twice is counted once). A file that cannot be read, or
    whose run gives no rows (:func:`read_results`, :func:`tidy`), is named in ``skipped`` (an
    error without it).

    A run and its rescores (the same model's scoring of the same samples: :func:`latest_scoring`) give one
    run, the newest; each replaced one is named in ``skipped``. A run ``check`` finds a problem in (its values
    against its samples: ``vlfair.compare.board``, which every board reads through) is skipped and named.

    ``attrs`` of the table: ``runs`` (how many distinct runs), ``duplicates`` (copies left out), ``replaced``
    (runs a newer rescore of theirs replaced),
    ``families`` (:func:`families`), ``paths`` (each run's results.json, by its content hash)."""
    files, names = result_files(sources, skipped, token)
    problems: list[str] = []
    report = problems if skipped is not None else None
    loaded = read_files(files, report)
    runs, duplicates = dedupe([results for _, results in loaded])
    where = {id(results): path for path, results in loaded}
    readable: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for results in runs:
        try:
            found = _rows(results, neutral)
        except (ValueError, TypeError, KeyError, OverflowError, RecursionError) as exc:  # whatever the schema let by
            skip_or_raise(report, f"{where[id(results)]}: {short_reason(exc)}")
            continue
        problem = check(Path(where[id(results)]), results) if check is not None else None
        if problem:
            skip_or_raise(report, f"{where[id(results)]}: {problem}")
        else:
            readable.append((results, found))
    # of the runs that could be read (a newer rescore that could not is no replacement)
    kept, replaced = latest_scoring([results for results, _ in readable])
    for old, new in replaced:  # named where the board is read (no error: the newer one is the board's row)
        if skipped is not None:
            skipped.append(f"{where[id(old)]}: the same model's scoring of the same samples as {where[id(new)]} (a "
                           "rescore), which is newer: the newer one is the board's row")
    chosen = {id(results) for results in kept}
    rows = [row for results, found in readable if id(results) in chosen for row in found]
    for problem in problems:  # a downloaded file is named by its repository, not by the cache's folder
        for root, source in names.items():
            problem = problem.replace(root, source, 1) if problem.startswith(root) else problem
        skip_or_raise(skipped, problem)
    board = _frame(rows)
    for problem in _disputed_facts(board):
        skip_or_raise(skipped, problem)
    # each run's results.json, where its samples may be read beside it (vlfair.compare.tiers pairs them)
    paths = {content_hash(results): str(where[id(results)]) for results in kept}
    board.attrs.update(runs=len(kept), duplicates=duplicates, families=families(kept), paths=paths,
                       replaced=len(replaced))
    return board


def scoring_identity(results: dict[str, Any]) -> tuple | None:
    """What makes two runs one scoring of one model: its family, model (spec, revision, dtype) and the content of
    its samples (``samples.content_sha256``: the scores themselves, whatever the file's header); None for a run
    without samples. A rescore keeps all of them and changes only the numbers read from the samples."""
    samples = results.get("samples") or {}
    content = samples.get("content_sha256")
    if not content:
        return None
    model = results["model"]
    return results.get("family"), model.get("spec"), model.get("revision"), model.get("dtype"), content


def latest_scoring(runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[tuple[dict, dict]]]:
    """One run per scoring (:func:`scoring_identity`): of a run and its rescores, the newest (by ``created``, the
    later one given where they tie); a rescore replaces its run on a board, never adds a second row of one model.
    Returns the runs kept (in the order given) and each (replaced, replacing) pair."""
    newest: dict[tuple, dict[str, Any]] = {}
    for results in runs:
        key = scoring_identity(results)
        if key is None:
            continue
        held = newest.get(key)
        if held is None or str(results.get("created", "")) >= str(held.get("created", "")):
            newest[key] = results
    chosen = {id(r) for r in newest.values()}
    kept = [r for r in runs if scoring_identity(r) is None or id(r) in chosen]
    replaced = [(r, newest[key]) for r in runs if (key := scoring_identity(r)) is not None and id(r) not in chosen]
    return kept, replaced


def _disputed_facts(board: pd.DataFrame) -> list[str]:
    """Runs of one family that record a metric with other neutral values (results.json's ``measures``): "less
    biased" would mean two things among them, so that metric is neither ranked nor tiered in that family
    (its rows' neutral and rank set to NaN, here); one line each, to name where the board is read."""
    recorded = board["neutral"].map(lambda v: "none" if pd.isna(v) else repr(float(v)))
    keys = [board["family"], board["metric"]]
    disputed = recorded.groupby(keys, dropna=True).transform("nunique").gt(1).reindex(board.index, fill_value=False)
    problems = []
    for (family, metric), rows in board[disputed].groupby(["family", "metric"]):
        shown = ", ".join(sorted(set(recorded[rows.index])))
        problems.append(f"family {str(family)[:8]}: its runs record {metric} with other neutral values ({shown}): "
                        "not ranked or tiered")
    board.loc[disputed, ["neutral", "rank"]] = math.nan
    return problems


def families(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each family of the runs measured, for people: one entry per family, with its probe and
    version, dataset (name, fingerprint, split, subset), the settings that make it (every one but
    the intervals'), the models' dtype, its models and runs."""
    from vlfair.defaults import INTERVAL_SETTINGS

    found: dict[str, dict[str, Any]] = {}
    for r in results:
        if not r.get("family"):
            continue
        entry = found.setdefault(r["family"], {
            "family": r["family"], "probe": r["probe"], "probe_version": r["probe_version"],
            "dataset": r["dataset"]["name"], "fingerprint": r["dataset"]["fingerprint"],
            "split": r["dataset"].get("split"), "subset": r["dataset"].get("subset"),
            "settings": {k: v for k, v in (r.get("probe_settings") or {}).items()
                         if k not in INTERVAL_SETTINGS and k not in ("notes", "version")},
            "dtype": r["model"].get("dtype"), "models": [], "runs": 0})
        entry["runs"] += 1
        model = r["model"].get("name") or r["model"]["spec"]
        if model not in entry["models"]:
            entry["models"].append(model)
    return sorted(found.values(), key=lambda e: (e["probe"], e["dataset"], -len(e["models"]), e["family"]))


def write_table(frame: pd.DataFrame, out: str | Path) -> Path:
    """Write a :func:`tidy` table as Parquet or CSV (by ``out``'s suffix); returns ``out``.

    Raises:
        ValueError: ``out`` ends in neither .parquet nor .csv.
    """
    from vlfair.atomic import atomic_write

    out = Path(out)
    if out.suffix == ".csv":
        from vlfair.report.tables import csv_safe

        # a model or label named "=..." stays text in a spreadsheet
        atomic_write(out, lambda handle: csv_safe(frame).to_csv(handle, index=False))
    elif out.suffix == ".parquet":
        atomic_write(out, lambda handle: frame.to_parquet(handle, index=False))
    else:
        raise ValueError(f"leaderboard output must end in .parquet or .csv, got {out.name!r}")
    return out  # written whole beside it, then renamed: an earlier table stays whole if the disk fills


def read_table(path: str | Path) -> pd.DataFrame:
    """A table :func:`write_table` wrote (.csv, else Parquet), with its column types restored."""
    path = Path(path)
    return normalise(pd.read_csv(path, dtype=HEX) if path.suffix == ".csv" else pd.read_parquet(path))


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """A table as :func:`tidy` makes it, from one an older vlfair wrote: a column it did not keep
    is added (a missing neutral value from vlfair's own; no family, so no rank). A row found
    twice (tables pasted together) is kept once; ``attrs["duplicate_rows"]`` counts those left out."""
    if "log10_p_value" not in frame:  # a table written before vlfair kept it
        position = frame.columns.get_loc("p_value")
        assert isinstance(position, int), "a results table's columns are unique"
        frame.insert(position + 1, "log10_p_value", float("nan"))
    for column in ("family", "run", "record"):
        if column not in frame:
            frame[column] = None
    for column in ("effect", "detected", "p_adjusted", "correction"):  # a table written before verdicts
        if column not in frame:
            position = frame.columns.get_loc("log10_p_value")
            assert isinstance(position, int), "a results table's columns are unique"
            frame.insert(position + 1 + ("effect", "detected", "p_adjusted", "correction").index(column), column,
                         None if column == "correction" else float("nan"))
    if "confidence" not in frame:  # a table written before the board kept its intervals' level
        position = frame.columns.get_loc("ci_high")
        assert isinstance(position, int), "a results table's columns are unique"
        frame.insert(position + 1, "confidence", float("nan"))
    if "kind" not in frame:  # a table written before generative models: every model an encoder
        position = frame.columns.get_loc("dtype")
        assert isinstance(position, int), "a results table's columns are unique"
        frame.insert(position + 1, "kind", "contrastive")
    if "neutral" not in frame:
        frame["neutral"] = [neutral_value(metric) for metric in frame["metric"]]
    if "rank" not in frame:
        frame["rank"] = float("nan")
    if "tier" in frame:  # a board written with tiers (vlfair.compare.tiers): read back as written
        frame["tier"] = frame["tier"].astype(float)
        for column in ("tied_with", "tier_method"):
            frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    # the columns in the board's order (those an older table lacked were added above), then any others (tiers)
    frame = frame[[*COLUMNS, *(c for c in frame.columns if c not in COLUMNS)]]
    frame = _texts(frame.astype(NUMBERS))
    unique = frame.drop_duplicates(ignore_index=True)
    unique.attrs["duplicate_rows"] = len(frame) - len(unique)
    return unique


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
                    task_type=TASK_TYPES.get(model_kind(r), model_kind(r)), task_name=f"vlfair {r['probe']}",
                    dataset_type=r["dataset"]["name"], dataset_name=r["dataset"]["name"],
                    dataset_split=r["dataset"]["split"], metric_type=m["name"], metric_value=m["value"],
                    metric_name=f"{m['name']} ({subset})" if subset else m["name"],
                    metric_config=json.dumps(m["subset"], sort_keys=True)))
        name = model.split(":", 1)[-1]
        blocks.append(ModelCardData(model_name=name, eval_results=evals).to_yaml())
    return "\n---\n".join(blocks)


def readable(rows: pd.DataFrame, extra: Iterable[str] = ()) -> pd.DataFrame:
    """Tidy rows as a person reads them (the Spaces' tables): subsets as text, 3 significant digits,
    the CI beside the value, a p-value that never reads 0, the run's verdict ("yes" or "no", with the correction
    that decided it; empty for a level or a run written before verdicts), then the ``extra`` columns as they are."""
    from vlfair.report.numbers import format_interval, format_p, format_subset, format_value

    detected = rows["detected"] if "detected" in rows else pd.Series(math.nan, index=rows.index)
    corrections = rows["correction"] if "correction" in rows else pd.Series(None, index=rows.index, dtype=object)
    return pd.DataFrame({
        "metric": rows["metric"], "subset": rows["subset"].map(format_subset), "value": rows["value"].map(format_value),
        "CI": [format_interval(lo, hi) for lo, hi in zip(rows["ci_low"], rows["ci_high"])],
        "p": [format_p(p, log10) for p, log10 in zip(rows["p_value"], rows.get("log10_p_value", [None] * len(rows)))],
        "bias detected": ["" if pd.isna(found) else f"{'yes' if found else 'no'} ({correction})"
                          for found, correction in zip(detected, corrections)],
        **{column: rows[column] for column in extra}})
