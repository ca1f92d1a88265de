"""The results.json every probe writes (schema ``vlfair.results/1``, see results.schema.json)."""

from __future__ import annotations

import datetime
import functools
import json
import math
import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from vlfair._version import __version__
from vlfair.facts import Facts
from vlfair.outputs import Metric  # noqa: F401  (its home before vlfair.outputs)
from vlfair.report.machine import machine_record

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
    """results.json's ``model``: the encoder's spec, its name for people, revision, dtype and kind
    (contrastive: a dual encoder's embeddings; generative: a model answering questions; a plugin's own)."""
    identity = encoder.identity()
    return {"spec": identity["spec"], "name": getattr(encoder, "display_name", None) or identity["spec"],
            "revision": identity["revision"], "dtype": identity["dtype"],
            "kind": getattr(encoder, "kind", "contrastive")}


def build_results(probe: str, probe_version: int, model: dict[str, Any], dataset: dict[str, Any],
                  metrics: list[Metric], skipped_rows: list[int], settings: dict[str, Any], warnings: list[str],
                  published: list[dict[str, Any]] | None = None, probe_settings: dict[str, Any] | None = None,
                  family_key: dict[str, Any] | None = None, measures: dict[str, Facts] | None = None,
                  verdicts: dict[str, Any] | None = None) -> dict[str, Any]:
    """results.json's content; ``family_key`` (``Probe.family_key``) with the model's dtype names its family
    (:func:`run_family_key`), and ``machine`` records where it ran (:func:`vlfair.report.machine.machine_record`)."""
    results = {
        "schema": SCHEMA, "vlfair_version": __version__, "probe": probe, "probe_version": probe_version,
        "model": model,
        "dataset": dataset, "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": settings, "metrics": [m.record() for m in metrics],
        "skipped_rows": [int(r) for r in skipped_rows], "warnings": warnings, "published": published or [],
        "machine": machine_record(),
    }
    if measures:  # each metric's facts, so that a reader that cannot import the probe still has them
        results["measures"] = {name: facts.record() for name, facts in measures.items()}
    if verdicts is not None:  # the run's family of tests: its correction, size and detections (vlfair.verdicts)
        results["verdicts"] = verdicts
    if probe_settings is not None:
        results["probe_settings"] = probe_settings
    if family_key is not None:  # the key kept beside its hash: a board checks the family a run claims against it
        key = run_family_key(family_key, model)
        results["family"], results["family_key"] = family_of(key), key
    return jsonable(results)


def run_family_key(probe_key: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    """A run's family key: the probe's (what it measured: ``Probe.family_key``) and the precision the model
    measured it in. One model's float32 and bf16 runs differ by more than a bias (a traits F 29 % apart), so
    runs in two dtypes are never ranked against each other."""
    return {**probe_key, "dtype": model.get("dtype")}


def family_of(key: dict[str, Any]) -> str:
    """16 hex digits of a run's family key (:func:`run_family_key`: the probe, its version, the data,
    the settings that decide what it measures and the model's dtype): runs of one family may be ranked
    together."""
    import hashlib

    text = json.dumps(jsonable(key), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def family_problem(results: dict[str, Any]) -> str | None:
    """Why the family a results.json claims is not the one its own record makes, or None: the family must
    be the hash of the family key recorded beside it, and that key must say what the run says of itself
    (its probe and version, its data, and each setting the key holds as ``probe_settings`` holds it), so
    a run edited or made to claim another family (a temperature-1 run in the default temperature's) is
    never ranked with runs it did not measure like."""
    family = results.get("family")
    if not family:
        return None  # no family: ranked against nothing
    key = results.get("family_key")
    if not isinstance(key, dict):
        return "records a family but not the key it is made from (written before vlfair recorded it): run it again"
    if family_of(key) != family:
        return f"its family {family} is not the hash of the family key it records"
    for field in ("probe", "probe_version"):
        if key.get(field) != results.get(field):
            return f"its family is of {field} {key.get(field)!r}, the run is of {results.get(field)!r}"
    dtype = (results.get("model") or {}).get("dtype")
    if "dtype" in key and key["dtype"] != dtype:  # a key written before the dtype was in it has none
        return f"its family is of dtype {key['dtype']!r}, the run's model is in {dtype!r}"
    dataset, settings = results.get("dataset") or {}, results.get("probe_settings") or {}
    for field, value in (key.get("dataset") or {}).items():
        if dataset.get(field) != value:
            return f"its family is of the dataset's {field} {value!r}, the run's is {dataset.get(field)!r}"
    for name, value in (key.get("settings") or {}).items():
        if settings.get(name) != value:
            return (f"its family is of {name} = {json_shown(value)}, the run's probe_settings say "
                    f"{json_shown(settings.get(name, '(none)'))}")
    return None


def json_shown(value: Any, limit: int = 60) -> str:
    """A results.json value in a message, as JSON (null, not None), cut to ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


# RFC 3339's date-time, which JSON Schema's "date-time" format means: a date, "T", a time and an offset
DATE_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))")


def is_date_time(value: object) -> bool:
    """Whether ``value`` is an RFC 3339 date-time of a real day and time ("2026-01-02T03:04:05+00:00");
    anything but a string passes (the schema's "type" checks those)."""
    if not isinstance(value, str):
        return True
    match = DATE_TIME.fullmatch(value)
    if not match:
        return False
    # the calendar from the parts (no 30 February, no hour 24): datetime.fromisoformat takes
    # neither "Z" nor every length of fraction before Python 3.11
    year, month, day, hour, minute, second, *offset = match.groups()
    try:
        datetime.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second))
    except ValueError:
        return False
    return offset[0] is None or (int(offset[0]) < 24 and int(offset[1]) < 60)


@functools.cache
def _validator() -> Any:
    """results.schema.json's validator, built once (a board reads thousands of files). Its formats
    are checked by vlfair itself: jsonschema checks "date-time" only where the optional package
    rfc3339-validator happens to be installed, and lets every string pass where it is not."""
    import jsonschema

    schema = results_schema()
    return jsonschema.validators.validator_for(schema)(schema, format_checker=format_checker())


@functools.cache
def format_checker() -> Any:
    """The formats vlfair's schemas use, checked by vlfair itself: "date-time" (:func:`is_date_time`)."""
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    checker.checks("date-time")(is_date_time)
    return checker


def validate_results(results: dict[str, Any]) -> None:
    """Check against results.schema.json, formats included (raises jsonschema.ValidationError:
    the most relevant error, as ``jsonschema.validate`` picks it)."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(results))
    if error is not None:
        raise error


MAX_RESULTS_BYTES = 64 * 2**20  # a results.json is kilobytes; a board reads thousands, from anyone
MAX_DEPTH = 64  # levels of nesting: a results.json has a few, and hashing or showing a deep one recurses
# characters of one text of a results.json (a model's or dataset's name, a subset's value, a setting): a path is at
# most 4,096 (PATH_MAX), and a board repeats a run's names in each of its rows (a 5 MB name made a 690 MB table)
MAX_TEXT = 4096
FREE_TEXT = ("warnings", "skipped_rows")  # a run's own sentences about its data: bounded by the file alone


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows (vlfair writes null there)")


def _json_int(text: str) -> int:
    """A JSON integer that a float holds (the table's numbers are floats): never one of 400 digits."""
    if len(text.lstrip("-")) > 308:
        raise ValueError(f"a number of {len(text.lstrip('-'))} digits is beyond what a float holds")
    return int(text)


def _json_float(text: str) -> float:
    """A JSON number that is finite as a float: 1e400 would read as infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is beyond what a float holds")
    return value


def _shape(results: Any) -> tuple[int, int]:
    """How deeply lists and objects nest in ``results``, and its longest text (a string or a key) outside
    :data:`FREE_TEXT`: one walk, without recursion, before anything else walks it."""
    deepest, longest = 0, 0
    stack = [(results, 1, True)]  # (item, its level, whether its texts count)
    while stack:
        item, level, counted = stack.pop()
        if isinstance(item, str):
            longest = max(longest, len(item) if counted else 0)
        elif isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if isinstance(item, dict):
                longest = max(longest, max(map(len, item), default=0) if counted else 0)
                top = item is results
                stack.extend((inner, level + 1, counted and not (top and key in FREE_TEXT))
                             for key, inner in item.items())
            else:
                stack.extend((inner, level + 1, counted) for inner in item)
    return deepest, longest


def _long_text_at(results: dict[str, Any]) -> str:
    """Where the first text longer than :data:`MAX_TEXT` is ("model.name", "settings (a key)"), its length beside:
    walked only once :func:`_shape` found one."""
    stack: list[tuple[Any, str]] = [(value, key) for key, value in results.items() if key not in FREE_TEXT]
    stack += [(key, "(a key)") for key in results if len(key) > MAX_TEXT]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str) and len(item) > MAX_TEXT:
            return f"{where}: a text of {len(item):,} characters"
        if isinstance(item, dict):
            for key, inner in item.items():
                if len(key) > MAX_TEXT:
                    return f"{where} (a key): a text of {len(key):,} characters"
                stack.append((inner, f"{where}.{key}"))
        elif isinstance(item, list):
            stack.extend((inner, f"{where}[{i}]") for i, inner in enumerate(item))
    raise AssertionError("no long text, though _shape found one")


def load_results(path: Path) -> dict[str, Any]:
    """One results.json, parsed and checked against the schema; ValueError with what is wrong: the
    one gate every reader (the leaderboard, compare) passes a file from anyone through."""
    import jsonschema

    if path.stat().st_size > MAX_RESULTS_BYTES:
        raise ValueError(f"{path.stat().st_size:,} bytes, larger than any results.json ({MAX_RESULTS_BYTES:,} at most)")
    try:
        results = json.loads(path.read_text(encoding="utf-8"), parse_constant=_reject_constant,
                             parse_int=_json_int, parse_float=_json_float)
    except RecursionError:  # json's own limit, near a thousand levels
        raise ValueError(f"nested too deeply to be a results.json ({MAX_DEPTH} levels at most)") from None
    depth, longest = _shape(results)
    if depth > MAX_DEPTH:  # before anything walks it
        raise ValueError(f"nested {depth} levels deep, too deep to be a results.json ({MAX_DEPTH} at most)")
    if longest > MAX_TEXT and isinstance(results, dict):  # before the schema, whose message would quote it
        raise ValueError(f"{_long_text_at(results)}, longer than any results.json holds ({MAX_TEXT:,} at most)")
    try:
        validate_results(results)
    except jsonschema.ValidationError as exc:  # named by where it is: "metrics[0].details.log10_p_value: ..."
        where = "" if exc.json_path == "$" else exc.json_path.removeprefix("$.") + ": "
        raise ValueError(where + exc.message) from None
    outside = _outside_range(results) or _repeated_metric(results)
    if outside:
        raise ValueError(outside)
    return results


def _repeated_metric(results: dict[str, Any]) -> str | None:
    """A metric (a name and a subset) listed twice: no run writes one (a probe reports each once), and every reader
    would take the two for two metrics (a board ranking the model against itself, two Hub entries of one task)."""
    from vlfair.outputs import metric_key, repeated

    twice = repeated(metric_key(m.get("name", ""), m.get("subset") or {}) for m in results.get("metrics") or [])
    return None if twice is None else f"metric {twice[0]!r} of subset {twice[1]} is listed twice (a run reports " \
                                      "each metric once)"


def _outside_range(results: dict[str, Any]) -> str | None:
    """The first metric whose value or interval lies outside its measure's range (as the run recorded its facts,
    else the catalog's): a number no run writes (every interval is cut to the range), so an edited one, which a
    board would rank and a card publish (a gap of -3, a CLIPScore of 250, a bias ratio of -2.5)."""
    from vlfair.measures.catalog import facts_in

    for position, metric in enumerate(results.get("metrics") or []):
        try:
            facts = facts_in(results, metric["name"])
        except (KeyError, ValueError):  # a plugin's measure this vlfair does not know: its range is not known
            continue
        low, high = facts.bounds
        slack = 1e-9 * max(1.0, abs(low) if math.isfinite(low) else 0.0, abs(high) if math.isfinite(high) else 0.0)
        for field, number in (("value", metric.get("value")), *(("ci", bound) for bound in metric.get("ci") or [])):
            if isinstance(number, (int, float)) and not low - slack <= number <= high + slack:
                subset = ", ".join(f"{k}={v}" for k, v in (metric.get("subset") or {}).items())
                return (f"metrics[{position}] ({metric['name']}{f', {subset}' if subset else ''}): its {field} "
                        f"{number:g} lies outside the measure's range [{low:g}, {high:g}]")
    return None


MAX_REASON = 300  # characters of a reason a skipped file is named with (a schema error quotes the bad value)


def read_files(paths: Iterable[str | Path], skipped: list[str] | None) -> list[tuple[Path, dict[str, Any]]]:
    """(file, content) of each readable results.json (:func:`read_results`)."""
    loaded, seen = [], set()
    for given in paths:
        path = Path(given)
        path = path / "results.json" if path.is_dir() else path
        if path.resolve() in seen:
            continue
        seen.add(path.resolve())
        try:
            loaded.append((path, load_results(path)))
        except (OSError, ValueError) as exc:
            skip_or_raise(skipped, f"{path}: {short_reason(exc)}")
    return loaded


def short_reason(exc: Exception) -> str:
    """What is wrong, in one line of at most :data:`MAX_REASON` characters."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 1] + "…"


def read_results(paths: Iterable[str | Path], skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """results.json files (a directory means its results.json), each checked against the schema,
    each read once however often it is given. A file that is missing, not JSON, nested too deeply,
    holds NaN, Infinity or a number beyond a float's range, is larger than any results.json or
    breaks the schema is an error naming it; with ``skipped`` (a list) it is left out and
    described there instead, so one bad file does not hide the others."""
    return [results for _, results in read_files(paths, skipped)]


def skip_or_raise(skipped: list[str] | None, problem: str) -> None:
    """``problem`` added to ``skipped`` (a list), or raised where there is none to say it in."""
    if skipped is None:
        raise ValueError(f"cannot read {problem}")
    skipped.append(problem)
