"""The Hub's own evaluation results for vlfair runs, with their intervals in Every Eval Ever records.

The Hub shows results natively (hub-docs ``docs/hub/eval-results.md``): a benchmark dataset carries
an ``eval.yaml`` (:func:`benchmark_eval_yaml`) and a model repository ``.eval_results/*.yaml``
entries (:func:`eval_result_entries`), each one scalar on one task of the benchmark. An entry has
no place for an interval, so every run also becomes one Every Eval Ever record
(:func:`every_eval_ever_record`: each metric with its confidence interval, level, resample count
and p-value), and each entry's ``source.url`` links to its run's record.

Task ids (one per measured number; the same in the entries and in eval.yaml):
``<probe>/<metric>[/<key>-<value>.<key>-<value>...]``, the subset's keys sorted, every key and
value lower case with each run of other characters as ``_`` (``traits/trait_anova/gender-female.
trait-smart_dumb``); see :func:`task_id`.

Task ids: accents dropped, a value with no Latin letter or digit named by a hash; two numbers that would
share an id are refused. ``vlfair card-results --out DIR --benchmark-repo ORG/NAME`` writes, per model
(its Hub id with ``/`` as ``--``, which no Hub id holds; else its name made safe for a path and 8 hex digits
of the name's SHA-256, so "CLIP v2", "CLIP_v2" and "clip_v2" never share a folder, even on a filesystem
blind to case, and a second call never replaces another model's entries) and probe (a plugin probe whose
name had to change to be a path, "Traits", "word_influence", carries the hash too),
``DIR/<model>/.eval_results/vlfair-<probe>.yaml`` through huggingface_hub's ``EvalResultEntry`` /
``eval_result_entries_to_yaml`` (value as measured, date = the run's ``created``, notes = the subset, the
interval with its level and method, the p-value); two runs of one model on one task are refused (the Hub
shows one number per model and task). The Every Eval Ever record (schema 0.3.0, every record validated) is
``DIR/every_eval_ever/data/<collection>/<developer>/<model>/<uuid>.json``, the path Every Eval Ever's datastore
and validator take (its instance-level records, ``--instances``, beside it as ``<uuid>_samples.jsonl``): the
collection ``vlfair-<probe>``, the developer and model the record's model id split at its ``/`` (``unknown``
for an id with none), each segment made a portable folder name, a reserved one (a Windows device, ``CON``,
``nul.x``, ``LPT1``, or the datastore's ``data``) marked with a leading ``_`` as a model folder is, and a UUID
made from the run (:func:`record_name`). Each entry's ``source.url`` links to the record (``--source-url`` with
``{record}``, the record's path under ``every_eval_ever``; without it the path relative to DIR; a card shows it
as a link, so it
must be an http(s) address with a host, at most 2,000 characters, holding ``{record}`` as it is: no other
placeholder, format spec or conversion, so neither ``javascript:`` nor a ``{record:>2000000}`` that would
write megabytes per entry).

In a record: ``eval_library`` = vlfair and the run's version (probe, probe version and settings in its
details); one result per number with ``evaluation_result_id`` = its task id, the subset as
``metric_parameters``, ``uncertainty.confidence_interval`` (lower, upper, the run's ``confidence``, the
method: "stratified bootstrap", or the measure's own, Hoeffding for word influence) and
``num_bootstrap_samples`` (``probe_settings.bootstrap``), the p-value and details as strings; ``min_score`` and
``max_score`` the measure's range as the run recorded it (a run that recorded none: its probe's own facts, then
the catalog's, a plugin's among them), an open side as "Infinity"/"-Infinity" (Every Eval Ever's model requires
both sides of a continuous metric); a local model as its directory's name and a hash of its path, never the path
(the weights named by their fingerprint, the revision); the dataset
as ``source_type: other`` with its fingerprint (a results.json's dataset name may be a Hub id or a local
folder: nothing tells them apart). ``lower_is_better`` and ``direction``: docs/DESIGN.md.

``benchmark_eval_yaml(results, repo_id)`` is the benchmark's ``eval.yaml`` (``vlfair push-results
--benchmark``): name, description, ``evaluation_framework: vlfair``, and every task id in the default
config's ``train`` split (the results.json files push-results adds). "vlfair" is not yet in the Hub's
list of evaluation frameworks (huggingface.js ``packages/tasks/src/eval.ts``; hub-docs: eval.yaml is
validated when pushed): it has to be added there before the Hub takes the file.

``every_eval_ever.schema.json`` beside this module is Every Eval Ever's aggregate schema, version
0.3.0, copied unchanged from https://github.com/evaleval/every_eval_ever, file
``every_eval_ever/schemas/eval.schema.json`` at commit 9bce4136e789ec006c62582f5f9d107d20f8b398
(last changed in 805ef1eb4859207dddf3ea0933644dfc8586b11d; sha256 of the copy:
215f04c9a0d7a13f83c49ccd85f97018f39ad1e49af7a3a561841418e9ee08c9). It is under the MIT License:

    Copyright (c) 2026 EvalEval

    Permission is hereby granted, free of charge, to any person obtaining a copy of this software
    and associated documentation files (the "Software"), to deal in the Software without
    restriction, including without limitation the rights to use, copy, modify, merge, publish,
    distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
    Software is furnished to do so, subject to the following conditions:

    The above copyright notice and this permission notice shall be included in all copies or
    substantial portions of the Software.

    THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING
    BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
    NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
    DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
    OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import re
import string
import unicodedata
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from vlfair.facts import Facts
from vlfair.measures.catalog import facts_in
from vlfair.report.numbers import format_interval, format_p, format_subset

SCHEMA_FILE = "every_eval_ever.schema.json"
SCHEMA_VERSION = "0.3.0"
FRAMEWORK = "vlfair"  # eval.yaml's evaluation_framework
# Where a task's numbers are in the benchmark repository: `vlfair push-results` adds each run as
# runs/<probe>/<family>/<model>--<hash>/results.json, paths that name no split: the default config's
# "train" split. (The repository's card should say so, configs: default, train: runs/**/results.json;
# without it the datasets library's file patterns take the root eval.yaml, "eval*", for a test split.)
RESULTS_CONFIG, RESULTS_SPLIT = "default", "train"
RECORDS_DIR = "every_eval_ever"  # under card-results' --out; the default source url is relative to --out

_GLOBAL_METRIC_IDS = {"accuracy": "accuracy"}  # Every Eval Ever's canonical ids; the rest are vlfair's own
_HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*$")
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


# ---- names ----------------------------------------------------------------------------------------

def _slug(value: Any) -> str:
    """Lower-case ASCII letters, digits and ``_`` (accents dropped: "Français" -> "francais"); a
    value with none of those (a name in another script) is named by a short hash of itself."""
    text = unicodedata.normalize("NFKD", str(value)).encode("ascii", "ignore").decode().lower()
    slug = re.sub(r"[^a-z0-9]+", "_", text).strip("_")
    return slug or "h" + hashlib.sha256(str(value).encode()).hexdigest()[:8]


def _probe_slug(probe: str) -> str:
    """A probe's name in a file name or task id: itself where it is already one (every built-in probe); a
    plugin's name that had to change ("word_influence", "Traits") also carries a short hash of itself, so
    it never takes a built-in probe's files or tasks."""
    slug = _slug(probe).replace("_", "-")  # probes are named with "-" (word-influence), measures with "_"
    return slug if slug == probe else f"{slug}-{_short_hash(probe)}"


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def task_id(probe: str, metric: str, subset: dict[str, Any]) -> str:
    """The benchmark task of one number: ``<probe>/<metric>`` and, for a subset, ``/<key>-<value>``
    pairs joined by ``.`` in the keys' sorted order (a probe reordering its subset keeps its ids).
    A slug holds only ``[a-z0-9_]``, so ``-``, ``.`` and ``/`` always separate; two subsets that
    differ only in case or punctuation name one task, which :func:`task_ids` refuses."""
    head = f"{_probe_slug(probe)}/{_slug(metric)}"
    pairs = ".".join(f"{_slug(k)}-{_slug(v)}" for k, v in sorted(subset.items()))
    return f"{head}/{pairs}" if pairs else head


def task_ids(results: Iterable[dict[str, Any]]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """Every task id of the metrics with a value -> (probe, metric, subset), in first-seen order.

    Raises:
        ValueError: two different numbers would share a task id.
    """
    seen: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for r in results:
        for m in r["metrics"]:
            if m["value"] is None:
                continue
            key = (r["probe"], m["name"], m["subset"])
            other = seen.setdefault(task_id(*key), key)
            if other[:2] != key[:2] or _subset_key(other[2]) != _subset_key(key[2]):
                raise ValueError(f"two numbers share the task id {task_id(*key)!r}: {other[1]} on "
                                 f"{format_subset(other[2])!r} and {key[1]} on {format_subset(key[2])!r}")
    return seen


def _subset_key(subset: dict[str, Any]) -> str:
    return json.dumps(subset, sort_keys=True, ensure_ascii=False)


def model_repo_id(model: dict[str, Any]) -> str | None:
    """The Hub model repository a run measured (``hf:ID[@REV]`` or a bare id), None for a local
    directory (its revision is ``local-<fingerprint>``) or another backend's spec (``mclip:``)."""
    spec = model["spec"]
    if (model.get("revision") or "").startswith("local-"):
        return None
    ref = spec.removeprefix("hf:").split("@", 1)[0]
    return ref if _HUB_ID.match(ref) and "--" not in ref and ".." not in ref else None  # the Hub's own rules


def model_slug(model: dict[str, Any]) -> str:
    """A folder name for a model, one per model: its Hub id with ``/`` as ``--`` (a Hub id holds no
    ``--``), else its name for people made safe for a path, and a short hash of the name itself, so two
    names that read alike there ("CLIP v2", "CLIP_v2", "clip_v2" on a filesystem blind to case) never
    share a folder and one model's entries never replace another's."""
    repo = model_repo_id(model)
    if repo:
        return _marked(repo.replace("/", "--"))
    name = model.get("name") or model["spec"]
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:80].strip("._-") or "model"
    return _marked(f"{readable}-{_short_hash(name)}")


# Names no folder may have: Windows' devices (whatever follows a dot: "con.v2" is CON too, in any case), and the
# name Every Eval Ever's datastore keeps for its root ("data"); its validator refuses a path through either.
_RESERVED_NAMES = frozenset({"CON", "PRN", "AUX", "NUL", *(f"{device}{n}" for device in ("COM", "LPT")
                                                            for n in range(1, 10)), "DATA"})


def _marked(segment: str) -> str:
    """``segment``, or ``_segment`` where it is a reserved name (the datastore's own convention): no Hub id or
    name made safe for a path begins with ``_``, so a marked name is never another's."""
    return f"_{segment}" if segment.split(".", 1)[0].upper() in _RESERVED_NAMES else segment


def path_segment(text: str) -> str:
    """``text`` as one folder name any filesystem and Every Eval Ever's validator take: runs of characters other
    than letters, digits, ``.``, ``_`` and ``-`` as ``_``, no ``.`` or ``_`` at either end (so never ``.`` or
    ``..``: nothing is left of them, ``unknown`` instead), a reserved name marked (:func:`_marked`)."""
    return _marked(re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "unknown")


def _local(model: dict[str, Any]) -> bool:
    return (model.get("revision") or "").startswith("local-")


def _local_name(model: dict[str, Any]) -> str:
    """A local model's name as a record publishes it: its name, or where that is its directory (the default),
    the directory's own name, never the path above it (a user's home, their machine's layout)."""
    name = model.get("name") or model["spec"]
    if name != model["spec"]:
        return name
    return re.split(r"[\\/]", name.rstrip("\\/"))[-1] or name


def model_id(model: dict[str, Any]) -> str:
    """The model's id in a record: its Hub repository; else, for a local directory, its name (never its path,
    :func:`_local_name`) and 8 hex digits of the name the run gave, so two directories of one name are two
    models; else (another backend's spec) its name."""
    repo = model_repo_id(model)
    if repo:
        return repo
    if _local(model):
        return f"{path_segment(_local_name(model))}-{_short_hash(model.get('name') or model['spec'])}"
    return model.get("name") or model["spec"]


def record_uuid(results: dict[str, Any]) -> str:
    """The run's record's UUID (version 4, as the datastore asks), made from its probe, creation time, model and
    samples digest, not at random: the same run always makes the same files."""
    digest = hashlib.sha256(json.dumps([results["probe"], results["created"], results["model"],
                                        (results.get("samples") or {}).get("sha256")],
                                       sort_keys=True).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def datastore_folder(results: dict[str, Any]) -> str:
    """``data/<collection>/<developer>/<model>``, where Every Eval Ever's datastore files a run's records: the
    collection is vlfair's probe (``vlfair-professions``), the developer and model the record's model id split at
    its ``/`` (``unknown`` developer for an id without one), each a :func:`path_segment`."""
    developer, _, model = model_id(results["model"]).rpartition("/")
    return "/".join(("data", path_segment(f"vlfair-{_probe_slug(results['probe'])}"),
                     path_segment(developer or "unknown"), path_segment(model)))


def record_name(results: dict[str, Any]) -> str:
    """Where a run's Every Eval Ever record is under card-results' ``every_eval_ever``, the datastore's own path:
    ``data/<collection>/<developer>/<model>/<uuid>.json`` (:func:`datastore_folder`, :func:`record_uuid`)."""
    return f"{datastore_folder(results)}/{record_uuid(results)}.json"


def samples_name(record: str) -> str:
    """The path of the instance-level records beside the record at ``record`` (its UUID, ``_samples.jsonl``):
    the one place the datastore takes them."""
    return record.removesuffix(".json") + "_samples.jsonl"


def _created(results: dict[str, Any]) -> datetime.datetime:
    created = datetime.datetime.fromisoformat(results["created"].replace("Z", "+00:00"))
    if created.tzinfo is None:  # vlfair writes UTC; a naive time must not take this machine's zone
        created = created.replace(tzinfo=datetime.timezone.utc)
    return created.astimezone(datetime.timezone.utc)


def check_repo_id(repo_id: str, what: str = "the benchmark repository") -> str:
    """``repo_id`` if it is a Hub ``ORG/NAME``; else a ValueError naming ``what`` and the value."""
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id) or ".." in repo_id or "--" in repo_id:
        raise ValueError(f"{what} must be a Hub dataset id ORG/NAME, got {repo_id!r}")
    return repo_id


# ---- Every Eval Ever ------------------------------------------------------------------------------

# a run's instance-level records: (results, its aggregate record, their datastore path) -> (JSON lines, the record's
# detailed_evaluation_results) or None
Instances = Callable[[dict[str, Any], dict[str, Any], str], "tuple[str, dict[str, Any]] | None"]

def every_eval_ever_schema() -> dict[str, Any]:
    """The vendored Every Eval Ever aggregate schema (version :data:`SCHEMA_VERSION`)."""
    return json.loads(resources.files("vlfair.report").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def validate_record(record: dict[str, Any]) -> None:
    """Check a record against the vendored schema (raises jsonschema.ValidationError)."""
    import jsonschema

    jsonschema.Draft7Validator(every_eval_ever_schema()).validate(record)


def _strings(mapping: dict[str, Any]) -> dict[str, str]:
    """The schema's additional_details take strings only: text as it is, everything else as JSON;
    None (nothing recorded) is left out."""
    return {k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)
            for k, v in mapping.items() if v is not None}


def _bound(value: float) -> float | str:
    """A side of a range: a number, or "Infinity"/"-Infinity" for an open side (the schema's spelling; Every Eval
    Ever requires both sides of a continuous metric, null being "not provided")."""
    if math.isfinite(value):
        return value
    return "Infinity" if value > 0 else "-Infinity"


def _interval(results: dict[str, Any], metric: dict[str, Any]) -> tuple[str | None, int | None]:
    """How the metric's interval was computed, and the resamples of a bootstrap: a measure that says
    (word influence: "hoeffding") is taken at its word; else the run's bootstrap setting, when it
    resampled (vlfair's group statistics resample within each group)."""
    method = metric["details"].get("method")
    if isinstance(method, str):
        return method, None
    resamples = (results.get("probe_settings") or {}).get("bootstrap")
    if isinstance(resamples, int) and not isinstance(resamples, bool) and resamples > 0:
        return "stratified bootstrap", resamples
    return None, None


def _confidence(results: dict[str, Any]) -> float | None:
    level = (results.get("probe_settings") or {}).get("confidence")
    return float(level) if isinstance(level, (int, float)) and not isinstance(level, bool) else None


# each probe's own facts (Probe.facts: metric -> Facts or neutral value) by probe name, for runs that recorded none
OwnFacts = Mapping[str, Mapping[str, Facts | float]]


def _metric_config(results: dict[str, Any], metric: dict[str, Any], own: OwnFacts | None = None) -> dict[str, Any]:
    name = metric["name"]
    # as the run recorded them (a plugin's own hold where it is not installed); a run that recorded none: its
    # probe's own, then the catalog's (a plugin's measures among them)
    facts = facts_in(results, name, (own or {}).get(results["probe"]))
    # The schema asks for a direction; vlfair's is "closer to the neutral value is less biased", which
    # is "lower" only for a bias measure never below its neutral 0 (an F, a gap, epsilon). Every Eval Ever
    # asks a continuous metric for min_score and max_score: an open side (None in the facts) is infinite.
    lower_is_better = facts.lower_is_less_biased
    direction = facts.direction
    if not lower_is_better:
        direction += ("; neither higher nor lower is better" if facts.neutral is not None else "") + \
            "; lower_is_better is false only because the schema asks for a direction"
    subset = format_subset(metric["subset"])
    return {
        "evaluation_description": f"{name}{f' on {subset}' if subset else ''} (vlfair's {results['probe']} probe)",
        "metric_id": _GLOBAL_METRIC_IDS.get(name, f"vlfair.{name}"), "metric_name": name,
        "metric_parameters": metric["subset"],  # what the number was computed on (a trait, a group, a language)
        "lower_is_better": lower_is_better, "score_type": "continuous",
        "min_score": _bound(facts.bounds[0]), "max_score": _bound(facts.bounds[1]),
        "additional_details": _strings({"neutral_value": facts.neutral, "direction": direction}),
    }


def _score_details(results: dict[str, Any], metric: dict[str, Any]) -> dict[str, Any]:
    scored: dict[str, Any] = {"score": metric["value"],
                              "details": _strings({"p_value": metric["p_value"], **metric["details"],
                                                   **_verdict_details(results, metric)})}
    ci = metric["ci"]
    if ci is not None and None not in ci:  # a bound the resamples could not give is no interval
        method, resamples = _interval(results, metric)
        interval: dict[str, Any] = {"lower": ci[0], "upper": ci[1]}
        level = _confidence(results)
        if level is not None:
            interval["confidence_level"] = level
        if method is not None:
            interval["method"] = method
        scored["uncertainty"] = {"confidence_interval": interval}
        if resamples is not None:
            scored["uncertainty"]["num_bootstrap_samples"] = resamples
    return scored


def _verdict_details(results: dict[str, Any], metric: dict[str, Any]) -> dict[str, Any]:
    """The run's verdict on a bias metric (``vlfair.verdicts``), as read, never recomputed: detected, its rule,
    raw p, Holm's p, BH's q, the correction that decided it and the size of the run's family."""
    verdict = metric.get("verdict")
    if not verdict:
        return {}
    family = results.get("verdicts") or {}
    return {"bias_detected": verdict.get("detected"), "verdict_rule": verdict.get("rule"),
            "verdict_p_value": verdict.get("p_value"), "p_holm": verdict.get("p_holm"), "q_bh": verdict.get("q_bh"),
            "correction": family.get("correction"), "family_tests": family.get("tests")}


def verdict_sentence(results: dict[str, Any], metric: dict[str, Any]) -> str | None:
    """The run's verdict in words ("bias detected (Holm's p 0.003 over 24 tests)"), or None for a level."""
    from vlfair.report.numbers import format_p

    verdict = metric.get("verdict")
    if not verdict:
        return None
    if verdict.get("detected") is None:
        return f"not judged ({verdict.get('not_judged') or 'no interval or test'})"
    family = results.get("verdicts") or {}
    correction = family.get("correction", "holm")
    from vlfair.verdicts import DECIDING, DECIDING_NAMES

    said = "bias detected" if verdict["detected"] else "no bias detected"
    return (f"{said} ({DECIDING_NAMES[correction]} {format_p(verdict.get(DECIDING[correction]))} over "
            f"{family.get('tests', '?')} tests)")


def _model_info(model: dict[str, Any]) -> dict[str, Any]:
    repo = model_repo_id(model)
    local = _local(model)
    name = _local_name(model) if local else model.get("name") or model["spec"]
    info: dict[str, Any] = {"name": name, "id": model_id(model)}
    if repo and "/" in repo:
        info["developer"] = repo.split("/", 1)[0]
    info["additional_details"] = {
        "deployment_type": "self_deployed",  # vlfair loads the weights into its own process
        # a Hub repository's weights can be downloaded; a local directory's may be anyone's
        "model_availability": "open_weights" if repo else "unknown",
        # a local directory's spec is its path on the user's machine: its revision (the weights' fingerprint) says
        # which weights it was
        **_strings({"spec": None if local else model["spec"], "revision": model.get("revision"),
                    "dtype": model.get("dtype")}),
    }
    return info


def _source_data(dataset: dict[str, Any]) -> dict[str, Any]:
    # results.json's dataset name is the spec the run was given: a Hub id, a prepared folder
    # ("out/fairface", which reads like a Hub id) or "synthetic:NAME"; nothing tells them apart,
    # so the record claims no Hub repository and keeps the name and the fingerprint.
    return {"dataset_name": dataset["name"], "source_type": "other",
            "additional_details": _strings({k: dataset.get(k) for k in ("fingerprint", "num_rows", "split", "subset")})}


def every_eval_ever_record(results: dict[str, Any], *, organization: str | None = None,
                           evaluator_relationship: str = "third_party",
                           retrieved: datetime.datetime | None = None, own: OwnFacts | None = None) -> dict[str, Any]:
    """One results.json as one Every Eval Ever record (schema 0.3.0), validated.

    Every metric with a value is one evaluation result: its value as the score, its interval as
    ``uncertainty.confidence_interval`` with the run's confidence level and method, the bootstrap's
    resamples (``probe_settings.bootstrap``) as ``num_bootstrap_samples``, its subset as
    ``metric_parameters``, its p-value and details as strings in ``score_details.details``, and
    ``evaluation_result_id`` its :func:`task_id` (the join key with the .eval_results entries).

    Args:
        results: a results.json's content (as :func:`vlfair.report.leaderboard.read_results` reads it).
        organization: who publishes the record (``source_organization_name``); default "unknown".
        evaluator_relationship: who ran vlfair relative to the model's developer; vlfair measures
            models others trained, so "third_party"; a developer measuring their own passes "first_party".
        retrieved: when the record is made (default now); the run's time is ``created``.
        own: each probe's own facts by probe name (``Probe.facts``), for a metric the run recorded none of.

    Raises:
        jsonschema.ValidationError: the record breaks the schema (a vlfair bug).
    """
    created = _created(results)
    retrieved = retrieved or datetime.datetime.now(datetime.timezone.utc)
    model_info = _model_info(results["model"])
    source_data = _source_data(results["dataset"])
    left_out = [f"{m['name']} on {format_subset(m['subset']) or 'everything'}"
                for m in results["metrics"] if m["value"] is None]
    record = {
        "schema_version": SCHEMA_VERSION,
        # keyed on the run's time, not on now: the same run always makes the same record
        "evaluation_id": f"vlfair.{results['probe']}/{model_info['id']}/{int(created.timestamp())}",
        "evaluation_timestamp": str(int(created.timestamp())),
        "retrieved_timestamp": str(retrieved.timestamp()),
        "source_metadata": {
            "source_name": "vlfair", "source_type": "evaluation_run",  # the run itself, not a report of it
            "source_organization_name": organization or "unknown",
            **({"source_organization_url": f"https://huggingface.co/{organization}"} if organization else {}),
            "evaluator_relationship": evaluator_relationship,
            "additional_details": _strings({
                "results_schema": results["schema"], "created": results["created"], "family": results.get("family"),
                "samples": results.get("samples"), "warnings": results.get("warnings") or None,
                "skipped_rows": len(results["skipped_rows"]) or None,
                "metrics_without_a_value": left_out or None}),
        },
        "eval_library": {"name": "vlfair", "version": results["vlfair_version"],
                         "additional_details": _strings({
                             "probe": results["probe"], "probe_version": results["probe_version"],
                             "probe_settings": results.get("probe_settings"), "settings": results.get("settings")})},
        "model_info": model_info,
        "evaluation_results": [
            {"evaluation_result_id": task_id(results["probe"], m["name"], m["subset"]),
             "evaluation_name": f"vlfair.{results['probe']}", "source_data": source_data,
             "metric_config": _metric_config(results, m, own), "score_details": _score_details(results, m)}
            for m in results["metrics"] if m["value"] is not None],
    }
    validate_record(record)
    return record


# ---- .eval_results entries ------------------------------------------------------------------------

def _notes(results: dict[str, Any], metric: dict[str, Any]) -> str:
    """The subset, the interval with its level and method, and the p-value, as a sentence each."""
    parts = [format_subset(metric["subset"])] if metric["subset"] else []
    ci = metric["ci"]
    if ci is not None and None not in ci:
        level, (method, resamples) = _confidence(results), _interval(results, metric)
        how = f"{method}, {resamples} resamples" if resamples else method
        parts.append(f"{f'{level:.0%} ' if level is not None else ''}confidence interval "
                     f"{format_interval(*ci)}{f' ({how})' if how else ''}")
    else:
        parts.append("no confidence interval")
    if metric["p_value"] is None:
        parts.append("no p-value")
    else:
        method = metric["details"].get("p_value_method")
        parts.append(f"p-value {format_p(metric['p_value'], metric['details'].get('log10_p_value'))}"
                     + (f" ({method.replace('_', ' ')})" if isinstance(method, str) else ""))
    said = verdict_sentence(results, metric)
    if said:
        parts.append(said)
    return "; ".join(parts)


MAX_URL_CHARACTERS = 2000  # browsers and the Hub keep links shorter than this


def source_url(template: str | None, record: str) -> str:
    """Where an entry's Every Eval Ever record is: ``template`` with ``{record}`` (the record's file
    name) filled in, or without a template the record's path relative to card-results' --out.

    Raises:
        ValueError: the template is not one (:func:`check_source_template`).
    """
    if template is None:
        return f"{RECORDS_DIR}/{record}"
    check_source_template(template)
    return template.format(record=record)


def check_source_template(template: str, name: str = "--source-url") -> None:
    """``template`` is a link to every record: an http(s) address with a host, at most
    :data:`MAX_URL_CHARACTERS` long, holding ``{record}`` as it is and no other placeholder (card-results'
    ``--source-url``, the leaderboard Space's ``VLFAIR_RECORDS``: ``name`` is the one the message names).

    Raises:
        ValueError: what is wrong with it, naming ``name``.
    """
    shown = repr(template) if len(template) <= 120 else repr(template[:119] + "…")
    if len(template) > MAX_URL_CHARACTERS:
        raise ValueError(f"{name} is {len(template):,} characters long ({shown}); a link is at most "
                         f"{MAX_URL_CHARACTERS:,}")
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"{name} {shown} is not a template: {exc}") from None
    fields = [(field, spec, conversion) for _, field, spec, conversion in parts if field is not None]
    if {field for field, _, _ in fields} != {"record"} or any(spec or conversion for _, spec, conversion in fields):
        raise ValueError(f"{name} must hold {{record}} (the record's file name, as it is: no format spec or "
                         f"conversion) and no other placeholder, got {shown}; e.g. "
                         f"https://huggingface.co/datasets/ORG/NAME/blob/main/{RECORDS_DIR}/{{record}}")
    # a record's path (word characters, "." and "-", "/" between its parts: record_name) has no ":" and starts
    # with none of "/", so where the template puts it cannot make an address of one that is none: a path of its
    # shape standing in for it shows what every link will be
    where = urllib.parse.urlsplit(template.format(record="data/collection/developer/model/record.json"))
    if where.scheme not in ("https", "http") or not where.netloc:  # a card shows it as a link: never javascript:
        raise ValueError(f"{name} must be an https:// (or http://) address where the records will be, "
                         f"got {shown}")


def eval_result_entries(results: dict[str, Any], benchmark_repo: str, source: str) -> list[dict[str, Any]]:
    """One run's ``.eval_results`` entries as the keyword arguments of huggingface_hub's
    ``EvalResultEntry``: one per metric with a value, on task :func:`task_id` of ``benchmark_repo``,
    dated with the run's ``created``, its source ``source`` (the run's record), its notes the
    interval and p-value (:func:`eval_results_yaml` writes them)."""
    check_repo_id(benchmark_repo)
    return [{"dataset_id": benchmark_repo, "task_id": task_id(results["probe"], m["name"], m["subset"]),
             "value": m["value"], "date": results["created"], "source_url": source,
             "source_name": f"vlfair {results['probe']} run (Every Eval Ever record)", "notes": _notes(results, m)}
            for m in results["metrics"] if m["value"] is not None]


def _yaml_data_by_hand(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """eval_result_entries_to_yaml's layout, for a huggingface_hub without it (before .eval_results)."""
    data = []
    for e in entries:
        item: dict[str, Any] = {"dataset": {"id": e["dataset_id"], "task_id": e["task_id"]}, "value": e["value"]}
        item |= {"date": e["date"]} if e.get("date") is not None else {}
        if e.get("source_url") is not None:
            item["source"] = {"url": e["source_url"], **({"name": e["source_name"]} if e.get("source_name") else {})}
        item |= {"notes": e["notes"]} if e.get("notes") is not None else {}
        data.append(item)
    return data


def eval_results_yaml(entries: list[dict[str, Any]]) -> str:
    """A ``.eval_results/*.yaml`` file, written by huggingface_hub's ``eval_result_entries_to_yaml``."""
    import yaml

    try:
        from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml
    except ImportError:
        data = _yaml_data_by_hand(entries)
    else:
        data = eval_result_entries_to_yaml([EvalResultEntry(**e) for e in entries])
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


# ---- the benchmark's eval.yaml --------------------------------------------------------------------

def benchmark_eval_yaml(results: list[dict[str, Any]], repo_id: str) -> str:
    """The ``eval.yaml`` of the benchmark dataset ``repo_id`` that holds these runs' results: its
    name, a description, ``evaluation_framework: vlfair`` and one task per measured number, with
    the ids of :func:`eval_result_entries` (sorted), each in the repository's ``default`` config,
    ``train`` split (where the Hub finds the results.json files ``vlfair push-results`` adds).

    Raises:
        ValueError: ``repo_id`` is not ORG/NAME, there are no numbers, or two would share a task id.
    """
    import yaml

    check_repo_id(repo_id)
    tasks = task_ids(results)
    if not tasks:
        raise ValueError(f"no metric with a value among the {len(results)} results: {repo_id} would have no tasks")
    probes = sorted({f"{r['probe']} ({r['dataset']['name']})" for r in results})
    versions = sorted({r["vlfair_version"] for r in results})
    description = (
        f"Social bias in vision-language models, measured with vlfair {', '.join(versions)}: "
        f"{'; '.join(probes)}. Each task is one measure of one probe on one subset "
        "(<probe>/<metric>/<key>-<value>...). A bias measure is best at its neutral value (no difference between "
        "groups), not at its highest or lowest; intervals and p-values are in each result's notes and in the "
        "Every Eval Ever record its source links to.")
    document = {"name": f"vlfair: {repo_id.split('/', 1)[1]}", "description": description,
                "evaluation_framework": FRAMEWORK,
                "tasks": [{"id": t, "config": RESULTS_CONFIG, "split": RESULTS_SPLIT} for t in sorted(tasks)]}
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


# ---- card-results --out ---------------------------------------------------------------------------

def write_card_results(results: list[dict[str, Any]], out_dir: str | Path, benchmark_repo: str,
                       source_template: str | None = None, instances: Instances | None = None,
                       own: OwnFacts | None = None) -> list[Path]:
    """Write ``out_dir/every_eval_ever/data/.../<uuid>.json`` (:func:`record_name`) for every run and
    ``out_dir/<model-slug>/.eval_results/vlfair-<probe>.yaml`` for every model and probe; returns
    the files written, records first. Everything is checked before anything is written.

    ``instances(results, record, path)``: a run's instance-level records, to be written at ``path`` (beside the
    record, :func:`samples_name`, under ``out_dir/every_eval_ever``): (the JSON-lines text, the record's
    ``detailed_evaluation_results``), or None for a run without them (``vlfair.compare.instances.instance_file``
    reads a run's samples). ``own``: each probe's own facts by probe name (:func:`every_eval_ever_record`).

    Raises:
        ValueError: a bad ``benchmark_repo`` or ``source_template``, two runs with one record name,
            or two runs of one model giving one task (the Hub shows one number per model and task).
    """
    check_repo_id(benchmark_repo, "--benchmark-repo")
    task_ids(results)  # two numbers on one task id: refused before anything is written
    organization = benchmark_repo.split("/", 1)[0]
    records: dict[str, dict[str, Any]] = {}
    samples_files: dict[str, str] = {}  # instance records: datastore path -> JSON lines
    files: dict[Path, list[dict[str, Any]]] = {}
    owner: dict[tuple[str, str], dict[str, Any]] = {}  # (model folder, task) -> the run that gave it
    for r in results:
        name = record_name(r)
        if name in records:
            raise ValueError(f"two runs make the record {name} (one model, probe and second): give one of them")
        records[name] = every_eval_ever_record(r, organization=organization, own=own)
        found = instances(r, records[name], samples_name(name)) if instances is not None else None
        if found is not None:
            text, details = found
            records[name]["detailed_evaluation_results"] = details
            validate_record(records[name])
            samples_files[samples_name(name)] = text
        folder = model_slug(r["model"])
        for entry in eval_result_entries(r, benchmark_repo, source_url(source_template, name)):
            first = owner.setdefault((folder, entry["task_id"]), r)
            if first is not r:
                raise ValueError(f"two runs give {folder} the task {entry['task_id']} (created {first['created']} "
                                 f"and {r['created']}): the Hub shows one number per model and task; give one run")
            file = Path(folder) / ".eval_results" / f"vlfair-{_probe_slug(r['probe'])}.yaml"
            files.setdefault(file, []).append(entry)
    out = Path(out_dir)
    # every file's text first (an earlier .eval_results file merged in, or refused, before anything is written)
    texts = {**{out / RECORDS_DIR / name: json.dumps(record, indent=2, ensure_ascii=False) + "\n"
                for name, record in records.items()},
             **{out / RECORDS_DIR / stored: text for stored, text in samples_files.items()},
             **{out / relative: _merged(out / relative, eval_results_yaml(entries))
                for relative, entries in files.items()}}
    written: list[Path] = []
    for path, text in texts.items():
        _write_whole(path, text, written)
        written.append(path)
    return written


def _write_whole(path: Path, text: str, written: list[Path]) -> None:
    """``text`` into ``path`` through a file beside it, renamed into place: a full disk or a kill leaves an
    earlier file (a merged .eval_results, which later calls merge into) whole, never cut between entries."""
    from vlfair.atomic import atomic_write

    try:
        atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))
    except OSError as exc:
        done = f"; written before it: {len(written)} files, whole" if written else ""
        raise OSError(f"{path}: could not be written ({exc.strerror or exc}); it was left as it was{done}") from None


def _merged(path: Path, text: str) -> str:
    """``text``'s entries, then those of the file already at ``path`` on other tasks (an earlier
    card-results of the same model and probe on other data): nothing written before is lost; an
    entry on the same task is replaced."""
    import yaml

    if not path.exists():
        return text
    new = yaml.safe_load(text) or []

    def key(item: Any) -> tuple[Any, Any]:
        dataset = item.get("dataset") if isinstance(item, dict) else None
        return (dataset.get("id"), dataset.get("task_id")) if isinstance(dataset, dict) else (None, None)

    given = {key(item) for item in new}
    try:
        old = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not the YAML of .eval_results entries ({exc}); move it away first") from None
    kept = [item for item in old if isinstance(item, dict) and key(item) not in given] if isinstance(old, list) else []
    return yaml.safe_dump(new + kept, sort_keys=False, allow_unicode=True, width=1000) if kept else text


__all__ = ["OwnFacts", "benchmark_eval_yaml", "check_repo_id", "check_source_template", "datastore_folder",
           "eval_result_entries", "eval_results_yaml", "every_eval_ever_record", "every_eval_ever_schema", "model_id",
           "model_repo_id", "model_slug", "path_segment", "record_name", "record_uuid", "samples_name", "source_url",
           "task_id", "task_ids", "validate_record", "write_card_results"]
