"""Issue 65, the fifth adversarial round, cases SILENT 12, 15, 16 and 17: vlfair's Every Eval Ever records as that
project's own validator (every-eval-ever 0.3.0, installed by scripts/install for the tests) takes them, their
place in its datastore, and the facts a record carries (the case's number in each test's docstring)."""

from __future__ import annotations

import copy
import json
import math
import sys
from importlib import metadata
from pathlib import Path

import pytest
import test_setup
from every_eval_ever.eval_types import EvaluationLog  # the official validator: missing, this file fails
from every_eval_ever.validator import check_path_structure, validate_file

from vlfair.cli import main
from vlfair.report import eval_results
from vlfair.report.eval_results import every_eval_ever_record, model_slug, record_name, write_card_results

BENCHMARK = "acme/vlfair-bias"
sandbox = test_setup.sandbox  # the stand-in tools scripts/install is run with (tests/test_setup.py)


@pytest.fixture(scope="module")
def runs(clip_dir, tmp_path_factory) -> dict[str, Path]:
    """A professions run of a tiny CLIP with its samples (seconds)."""
    import vlfair
    from vlfair.probes import run_probe

    base = tmp_path_factory.mktemp("round5-eee")
    run_probe("professions", vlfair.load_encoder(str(clip_dir), dtype="float32"), "synthetic:professions",
              base / "professions", cache_dir=None, settings={"bootstrap": 50, "n_permutations": 50})
    return {"professions": base / "professions"}


@pytest.fixture(scope="module")
def card(runs, tmp_path_factory) -> Path:
    """What `card-results RUN --out DIR --instances` writes for the professions run."""
    out = tmp_path_factory.mktemp("round5-eee-card") / "card"
    assert main(["card-results", str(runs["professions"]), "--out", str(out), "--benchmark-repo", BENCHMARK,
                 "--instances"]) == 0
    return out


def _results(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())


def _official(out: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Every file under ``out/every_eval_ever`` as Every Eval Ever's own validator reports it (its CLI's checks:
    the pydantic models, the datastore path, the record and its samples file naming each other): path ->
    (errors, warnings)."""
    root = out / "every_eval_ever"
    files = {path.relative_to(root).as_posix(): path for path in root.rglob("*") if path.is_file()}
    found = {}
    for relative, path in files.items():
        report = validate_file(path, repo_path=relative, available_files=set(files),
                               read_repo_file=lambda name: (root / name).read_text(encoding="utf-8"),
                               run_semantic_checks=True)
        found[relative] = ([f"{e['loc']}: {e['msg']}" for e in report.errors],
                           [f"{w['loc']}: {w['msg']}" for w in report.warnings])
    return found


def test_the_installed_validator_is_the_schema_version_vlfair_writes():
    """SILENT 15: the tests check records with every-eval-ever of the version vlfair writes (scripts/install)."""
    assert metadata.version("every-eval-ever") == eval_results.SCHEMA_VERSION


def _one_metric(results: dict, name: str, facts) -> dict:
    """``results`` holding one metric ``name`` of a value inside its range, its facts the catalog's (none recorded)."""
    low, high = facts.bounds
    value = facts.neutral if facts.neutral is not None else (low if math.isfinite(low) else 0.0)
    return {**copy.deepcopy(results), "measures": {}, "verdicts": None,
            "metrics": [{"name": name, "subset": {}, "value": value, "ci": None, "p_value": None, "details": {}}]}


def test_a_record_of_every_measure_passes_every_eval_ever_s_own_model(runs):
    """SILENT 15: every measure vlfair has (the catalog's: multilingual's, retrieval's, professions' and the rest)
    and one no facts name gives a record Every Eval Ever's pydantic model takes: a continuous metric has both sides
    of its range, an open side as "Infinity"/"-Infinity" (null, which vlfair wrote, fails it)."""
    from vlfair.facts import Facts
    from vlfair.measures.catalog import CATALOG

    base = _results(runs["professions"])
    measures = {name: measure.facts for name, measure in CATALOG.items()} | {"a_plugin_s_unknown_metric": Facts()}
    for name, facts in measures.items():
        record = every_eval_ever_record(_one_metric(base, name, facts))
        EvaluationLog.model_validate(record)  # raises, naming the field, where the official model refuses it
        config = record["evaluation_results"][0]["metric_config"]
        assert config["min_score"] == (facts.low if facts.low is not None and math.isfinite(facts.low)
                                       else "-Infinity"), name
        assert config["max_score"] == (facts.high if facts.high is not None and math.isfinite(facts.high)
                                       else "Infinity"), name


def test_card_results_records_and_instances_pass_the_official_validator(runs, card):
    """SILENT 15 and 16: `card-results --instances` on a real run writes files Every Eval Ever's validator takes
    with no error: the record at data/<collection>/<developer>/<model>/<uuid>.json beside its <uuid>_samples.jsonl,
    naming it (they failed with up to 102 errors: no max_score, a path outside the datastore's layout)."""
    reports = _official(card)
    assert {path: errors for path, (errors, _) in reports.items()} == {path: [] for path in reports}
    name = record_name(_results(runs["professions"]))
    assert name.startswith("data/vlfair-professions/unknown/")
    assert sorted(reports) == [name, name.removesuffix(".json") + "_samples.jsonl"]
    # a local model names no developer: the one thing the validator warns of (it asks a person to name one)
    assert all(all("developer is required" in w for w in warnings) for _, warnings in reports.values())


def test_a_local_model_s_record_publishes_no_path_of_the_user_s_machine(runs, card, clip_dir):
    """SILENT 16: a local model's id (and name, spec) in a record was the user's directory path; now its directory's
    own name and a hash of the path, the weights named by their fingerprint (the revision)."""
    results = _results(runs["professions"])
    assert results["model"]["name"] == str(clip_dir)  # the run's own name for it is the path
    text = "".join(path.read_text() for path in (card / "every_eval_ever").rglob("*") if path.is_file())
    assert str(clip_dir.parent) not in text
    record = json.loads((card / "every_eval_ever" / record_name(results)).read_text())
    assert record["model_info"]["name"] == clip_dir.name
    assert record["model_info"]["id"].startswith(f"{clip_dir.name}-") and "/" not in record["model_info"]["id"]
    assert record["model_info"]["additional_details"]["revision"] == results["model"]["revision"]


@pytest.mark.parametrize("spec, name", [("hf:acme/CON", None), ("hf:nul", None), ("hf:data/clip", None),
                                        ("hf:acme/Aux.v2", None), ("hf:LPT1/model", None),
                                        ("/models/con", "con"), ("/models/x", "data"), ("/models/y", "COM9.final")])
def test_a_model_named_as_a_reserved_name_gets_paths_the_validator_and_windows_take(runs, tmp_path, spec, name):
    """SILENT 17: a model id the datastore reserves (CON, nul, data: a Windows device in any case and with any
    suffix, the datastore's root) made a folder the validator refuses and Windows cannot hold; such a segment is
    marked (a leading "_", which no Hub id or other name made safe begins with), in the record's path and in the
    model's .eval_results folder."""
    results = _results(runs["professions"])
    local = spec.startswith("/")
    results["model"] = {"spec": spec, "name": name or spec, "revision": "local-0123456789abcdef" if local else "0abc",
                        "dtype": "float32", "kind": "contrastive"}
    write_card_results([results], tmp_path, BENCHMARK)
    path = record_name(results)
    assert check_path_structure(path) == []
    assert (tmp_path / "every_eval_ever" / path).is_file()
    folder = model_slug(results["model"])
    assert (tmp_path / folder / ".eval_results").is_dir()
    reserved = {"CON", "PRN", "AUX", "NUL", "DATA", *(f"{d}{n}" for d in ("COM", "LPT") for n in range(1, 10))}
    for segment in [*path.split("/")[1:4], folder]:
        assert segment.split(".", 1)[0].upper() not in reserved, segment


PLUGIN = '''
"""A plugin's probe with facts of its own (a ratio), and a measure of its own registered when it is imported (a
gap), both declared by name."""
from __future__ import annotations

import math

from vlfair.facts import Facts
from vlfair.measures.catalog import Measure, register_measure
from vlfair.probes.base import Probe
from vlfair.probes.settings import Bootstrap, ProbeSettings

register_measure(Measure("toy_gap", Facts(0.0, 0.0, None), "a plugin's gap"), replace=True)


class ToySettings(ProbeSettings, Bootstrap):
    prompt: str = "a photo of a calm person"


class ToyProbe(Probe):
    name = "toy-facts"
    Settings = ToySettings
    help = "a plugin's probe with facts of its own"
    description = "A ratio with facts of its own, and a gap of a measure of its own."
    schemas = ("fairface",)
    required_columns = {"fairface": ("image", "gender")}
    facts = {"toy_ratio": Facts(1.0, 0.0, math.inf)}

    def score(self, ctx, schema):  # card-results reads this probe's facts; no test runs it
        raise RuntimeError("toy-facts is a probe whose facts are read, never run")

    def declare(self, samples):
        return []
'''


@pytest.fixture()
def toy_plugin(tmp_path, monkeypatch) -> None:
    """The plugin installed: its module on sys.path, its probe an entry point, read by a registry of this test's."""
    from vlfair.measures import catalog
    from vlfair.probes import registry

    root = tmp_path / "plugin"
    root.mkdir()
    (root / "vlfair_toy_facts.py").write_text(PLUGIN)
    (root / "vlfair_toy_facts.yaml").write_text('version: 1\nprompt: "a photo of a calm person"\nbootstrap: 50\n')
    info = root / "vlfair_toy_facts-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vlfair-toy-facts\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vlfair.probes]\ntoy-facts = vlfair_toy_facts:ToyProbe\n")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(registry, "PROBES", registry.PROBES.copy())
    monkeypatch.setattr(catalog, "CATALOG", catalog.CATALOG.copy())
    monkeypatch.delitem(sys.modules, "vlfair_toy_facts", raising=False)
    yield
    sys.modules.pop("vlfair_toy_facts", None)


def test_card_results_reads_a_plugin_s_own_facts_for_a_run_that_recorded_none(runs, tmp_path, toy_plugin, capsys):
    """SILENT 12: a run that recorded no facts of its metrics (a results.json of a vlfair before runs carried them):
    card-results took a plugin's bias measures for levels of no range (lower_is_better false, no bounds: the record
    failed the validator); it reads the installed probe's own facts and the measures its package registers, as the
    leaderboard does."""
    results = _results(runs["professions"])
    renamed = {"group_score_gap": "toy_gap", "mean_clipscore": "toy_ratio"}
    results["probe"] = "toy-facts"
    results.pop("measures")
    for metric in results["metrics"]:
        metric["name"] = renamed[metric["name"]]
    given = tmp_path / "run"
    given.mkdir()
    (given / "results.json").write_text(json.dumps(results))
    out = tmp_path / "card"
    assert main(["card-results", str(given), "--out", str(out), "--benchmark-repo", BENCHMARK]) == 0
    capsys.readouterr()
    record = json.loads((out / "every_eval_ever" / record_name(results)).read_text())
    EvaluationLog.model_validate(record)
    configs = {r["metric_config"]["metric_name"]: r["metric_config"] for r in record["evaluation_results"]}
    gap, ratio = configs["toy_gap"], configs["toy_ratio"]
    assert gap["lower_is_better"] is True and (gap["min_score"], gap["max_score"]) == (0.0, "Infinity")
    assert gap["additional_details"]["neutral_value"] == "0.0"
    assert ratio["lower_is_better"] is False and (ratio["min_score"], ratio["max_score"]) == (0.0, "Infinity")
    assert ratio["additional_details"]["neutral_value"] == "1.0" and "closer to 1" in \
        ratio["additional_details"]["direction"]
    assert {path: errors for path, (errors, _) in _official(out).items()} == {record_name(results): []}


def test_the_test_install_brings_every_eval_ever_s_validator_and_a_plain_one_does_not(sandbox):
    """SILENT 15: scripts/install test (scripts/test, CI) installs the official validator, of the schema version
    vlfair writes, alone (its wheel declares Python >= 3.12 and pins libraries the validator does not import); a
    plain install does not."""
    pinned = f"every-eval-ever=={eval_results.SCHEMA_VERSION}"
    done, calls = sandbox("install", "test")
    assert done.returncode == 0, done.stderr
    assert calls[-1] == f"python -m pip install -qq --no-deps --ignore-requires-python {pinned}"
    assert calls.index("python -m pip install -qq -e .[test]") < len(calls) - 1
    done, calls = sandbox("install")
    assert done.returncode == 0 and not any("every-eval-ever" in c for c in calls)
