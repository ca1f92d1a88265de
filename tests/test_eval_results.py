"""The Hub's eval results for vlfair runs: .eval_results entries, the benchmark's eval.yaml, and one
Every Eval Ever record per run carrying what an entry cannot (the interval, its level, the p-value)."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from huggingface_hub import eval_result_entries_to_yaml, parse_eval_result_entries

from vlfair.cli import main
from vlfair.report import eval_results
from vlfair.report.eval_results import (
    benchmark_eval_yaml,
    eval_result_entries,
    eval_results_yaml,
    every_eval_ever_record,
    every_eval_ever_schema,
    model_repo_id,
    model_slug,
    record_name,
    task_id,
    validate_record,
    write_card_results,
)

BENCHMARK = "acme/vlfair-bias"
TEMPLATE = "https://huggingface.co/datasets/acme/vlfair-bias/blob/main/every_eval_ever/{record}"


@pytest.fixture(scope="module")
def runs(demo_cache, tmp_path_factory) -> dict[str, Path]:
    """Traits on the demo world's biased and control encoders, professions on the biased one: real
    runs (a few seconds), with a small bootstrap so every interval has its resample count."""
    from vlfair.demo import datasets as world_data
    from vlfair.demo.shipped import WORLDS, display_name, world_encoder
    from vlfair.probes import run_probe

    base = tmp_path_factory.mktemp("eval-results-runs")
    encoders = {name: world_encoder(WORLDS[name], demo_cache, name=display_name(name))
                for name in ("biased", "control")}
    traits = {"pairs": [["smart", "dumb"]], "per_cell": None, "gradcam": None, "bootstrap": 200}
    faces = world_data.fairface()
    for name, encoder in encoders.items():
        run_probe("traits", encoder, faces, base / f"{name}-traits", cache_dir=None, settings=traits)
    run_probe("professions", encoders["biased"], world_data.professions(), base / "biased-professions", cache_dir=None,
              settings={"bootstrap": 200, "n_permutations": 200})
    return {path.name: path for path in base.iterdir() if path.is_dir()}  # not the lock files beside the runs


def _results(path: Path) -> dict:
    return json.loads((path / "results.json").read_text())


def test_the_vendored_schema_is_every_eval_ever_0_3_0_as_copied():
    path = Path(eval_results.__file__).with_name(eval_results.SCHEMA_FILE)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest in eval_results.__doc__  # the docstring says where the copy came from: still true
    assert every_eval_ever_schema()["version"] == eval_results.SCHEMA_VERSION == "0.3.0"
    jsonschema.Draft7Validator.check_schema(every_eval_ever_schema())
    import tomllib  # the wheel ships it: vlfair.report's package data takes its JSON files

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "*.json" in pyproject["tool"]["setuptools"]["package-data"]["vlfair.report"]


def test_a_record_holds_every_metric_with_its_interval_and_validates(runs):
    results = _results(runs["biased-traits"])
    record = every_eval_ever_record(results)
    validate_record(record)
    assert record["eval_library"]["name"] == "vlfair" and record["eval_library"]["version"] == results["vlfair_version"]
    assert record["source_metadata"]["source_type"] == "evaluation_run"
    assert record["model_info"]["name"] == "demo-world biased"
    assert record["model_info"]["additional_details"]["revision"] == results["model"]["revision"]
    by_id = {r["evaluation_result_id"]: r for r in record["evaluation_results"]}
    assert len(by_id) == len(results["metrics"])
    for m in results["metrics"]:
        result = by_id[task_id("traits", m["name"], m["subset"])]
        assert result["score_details"]["score"] == m["value"]
        assert result["metric_config"]["metric_parameters"] == m["subset"]
        assert result["source_data"]["additional_details"]["fingerprint"] == results["dataset"]["fingerprint"]
        uncertainty = result["score_details"].get("uncertainty")
        if m["ci"] is None:  # trait_anova: an F and its p-value, no interval
            assert uncertainty is None and float(result["score_details"]["details"]["p_value"]) == m["p_value"]
        else:
            assert uncertainty["confidence_interval"] == {"lower": m["ci"][0], "upper": m["ci"][1],
                                                          "confidence_level": 0.95, "method": "stratified bootstrap"}
            assert uncertainty["num_bootstrap_samples"] == 200
    anova = next(r for r in record["evaluation_results"] if r["metric_config"]["metric_name"] == "trait_anova")
    assert anova["metric_config"]["lower_is_better"] is True and anova["metric_config"]["max_score"] == "Infinity"
    level = next(r for r in record["evaluation_results"] if r["metric_config"]["metric_name"] == "trait_confidence")
    assert level["metric_config"]["lower_is_better"] is False
    assert "neither higher nor lower" in level["metric_config"]["additional_details"]["direction"]
    # the run's verdict, as the run made it (detected, rule, raw p, Holm's p, the correction and family), on a bias
    # metric and on no level
    details = anova["score_details"]["details"]
    verdict = next(m for m in results["metrics"] if m["name"] == "trait_anova")["verdict"]
    assert details["bias_detected"] == json.dumps(verdict["detected"]) and details["verdict_rule"] == "test"
    assert float(details["p_holm"]) == verdict["p_holm"] and details["correction"] == "holm"
    assert int(details["family_tests"]) == results["verdicts"]["tests"]
    assert "bias_detected" not in level["score_details"]["details"]


def test_a_broken_record_fails_validation(runs):
    record = every_eval_ever_record(_results(runs["biased-traits"]))
    for breaks in (lambda r: r.pop("model_info"),
                   lambda r: r["evaluation_results"][0]["score_details"].__setitem__("score", "high"),
                   lambda r: r["source_metadata"].__setitem__("evaluator_relationship", "self"),
                   lambda r: r["eval_library"]["additional_details"].__setitem__("probe_version", 8)):
        broken = copy.deepcopy(record)
        breaks(broken)
        with pytest.raises(jsonschema.ValidationError):
            validate_record(broken)


def test_entries_parse_back_with_huggingface_hub_to_the_same_values(runs):
    results = _results(runs["biased-professions"])
    name = record_name(results)
    text = eval_results_yaml(eval_result_entries(results, BENCHMARK, TEMPLATE.format(record=name)))
    parsed = parse_eval_result_entries(yaml.safe_load(text))
    metrics = [m for m in results["metrics"] if m["value"] is not None]
    assert len(parsed) == len(metrics)
    for entry, m in zip(parsed, metrics):
        assert entry.dataset_id == BENCHMARK and entry.task_id == task_id("professions", m["name"], m["subset"])
        assert entry.value == m["value"]  # the float itself, not a rounding of it
        assert entry.date == results["created"] and entry.source_url.endswith(f"/every_eval_ever/{name}")
        assert "95% confidence interval [" in entry.notes and "200 resamples" in entry.notes
        assert ("p-value " in entry.notes) == (m["p_value"] is not None)
        if m.get("verdict") and m["verdict"]["detected"] is not None:  # the run's verdict, in words
            said = "bias detected (Holm's p " if m["verdict"]["detected"] else "no bias detected (Holm's p "
            assert said in entry.notes and f"over {results['verdicts']['tests']} tests)" in entry.notes


def test_the_yaml_written_by_hand_matches_huggingface_hubs():
    from huggingface_hub import EvalResultEntry

    entries = [{"dataset_id": BENCHMARK, "task_id": "traits/trait_anova", "value": 1.5,
                "date": "2026-01-02T00:00:00+00:00", "source_url": "every_eval_ever/x.json",
                "source_name": "vlfair traits run", "notes": "no p-value"},
               {"dataset_id": BENCHMARK, "task_id": "traits/trait_anova", "value": 2.0, "date": None,
                "source_url": None, "source_name": None, "notes": None}]
    assert eval_results._yaml_data_by_hand(entries) == eval_result_entries_to_yaml(
        [EvalResultEntry(**e) for e in entries])


def test_eval_yaml_tasks_are_the_entries_task_ids(runs):
    results = [_results(path) for path in runs.values()]
    document = yaml.safe_load(benchmark_eval_yaml(results, BENCHMARK))
    assert set(document) == {"name", "description", "evaluation_framework", "tasks"}
    assert document["evaluation_framework"] == "vlfair" and "traits" in document["description"]
    ids = [t["id"] for t in document["tasks"]]
    assert ids == sorted(set(ids))
    assert all(t == {"id": t["id"], "config": "default", "split": "train"} for t in document["tasks"])
    entries = {e["task_id"] for r in results for e in eval_result_entries(r, BENCHMARK, "x")}
    assert set(ids) == entries
    assert "traits/trait_anova/gender-female.trait-smart_dumb" in ids
    with pytest.raises(ValueError, match="must be a Hub dataset id ORG/NAME, got 'vlfair-bias'"):
        benchmark_eval_yaml(results, "vlfair-bias")


def test_task_ids_are_readable_stable_and_never_shared():
    assert task_id("word-influence", "word_influence", {"word": "doctor", "level": 1, "prompt": "a Doctor, at work"}) \
        == "word-influence/word_influence/level-1.prompt-a_doctor_at_work.word-doctor"
    assert task_id("traits", "trait_anova", {"trait": "smart/dumb", "gender": "Male"}) \
        == task_id("traits", "trait_anova", {"gender": "Male", "trait": "smart/dumb"})
    assert task_id("multilingual", "accuracy", {"language": "Français"}) == "multilingual/accuracy/language-francais"
    assert task_id("multilingual", "accuracy", {}) == "multilingual/accuracy"
    assert task_id("m", "a", {"language": "中文"}) != task_id("m", "a", {"language": "日本語"})  # hashed, not dropped
    clash = {"probe": "traits", "vlfair_version": "0", "dataset": {"name": "d"},
             "metrics": [{"name": "trait_anova", "subset": {"trait": "smart/dumb"}, "value": 1.0},
                         {"name": "trait_anova", "subset": {"trait": "Smart-Dumb"}, "value": 2.0}]}
    with pytest.raises(ValueError, match="two numbers share the task id 'traits/trait_anova/trait-smart_dumb'"):
        benchmark_eval_yaml([clash], BENCHMARK)


def test_a_metric_without_a_value_or_an_interval(runs):
    results = _results(runs["biased-traits"])
    confidence = [m for m in results["metrics"] if m["name"] == "trait_confidence"]
    confidence[0]["value"] = None   # a group too small to measure
    confidence[1]["ci"] = None      # no interval
    confidence[2]["ci"] = [None, 0.5]  # a bound the resamples could not give
    record = every_eval_ever_record(results)
    ids = {r["evaluation_result_id"]: r for r in record["evaluation_results"]}
    assert task_id("traits", "trait_confidence", confidence[0]["subset"]) not in ids
    assert "trait_confidence on" in record["source_metadata"]["additional_details"]["metrics_without_a_value"]
    for m in confidence[1:3]:
        assert "uncertainty" not in ids[task_id("traits", "trait_confidence", m["subset"])]["score_details"]
    entries = {e["task_id"]: e for e in eval_result_entries(results, BENCHMARK, "x")}
    assert len(entries) == len(results["metrics"]) - 1
    assert entries[task_id("traits", "trait_confidence", confidence[1]["subset"])]["notes"].endswith(
        "no confidence interval; no p-value")
    assert task_id("traits", "trait_confidence", confidence[0]["subset"]) not in yaml.safe_load(
        benchmark_eval_yaml([results], BENCHMARK))["tasks"]


def test_a_hub_model_is_named_by_its_repository(runs):
    results = _results(runs["biased-traits"])
    results["model"] = {"spec": "hf:acme/clip-vit@0123abc", "name": "hf:acme/clip-vit@0123abc",
                        "revision": "0123abc", "dtype": "float32"}
    assert model_repo_id(results["model"]) == "acme/clip-vit" and model_slug(results["model"]) == "acme--clip-vit"
    record = every_eval_ever_record(results)
    assert record["model_info"]["id"] == "acme/clip-vit" and record["model_info"]["developer"] == "acme"
    assert record["model_info"]["additional_details"]["model_availability"] == "open_weights"
    assert record["evaluation_id"].startswith("vlfair.traits/acme/clip-vit/")
    local = _results(runs["biased-traits"])["model"]
    assert model_repo_id(local) is None and re.fullmatch(r"demo-world_biased-[0-9a-f]{8}", model_slug(local))


def _folder(runs, key: str) -> str:
    return model_slug(_results(runs[key])["model"])


def test_card_results_writes_entries_and_records_beside_the_model_index(runs, tmp_path, capsys):
    out = tmp_path / "card"
    argv = ["card-results", *map(str, runs.values()), "--out", str(out), "--benchmark-repo", BENCHMARK,
            "--source-url", TEMPLATE]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    cards = [doc for doc in yaml.safe_load_all(printed) if doc]  # the "# wrote" lines are YAML comments
    assert sorted(Path(c["model-index"][0]["name"]).name for c in cards) == ["biased", "control"]  # as before
    records = sorted((out / "every_eval_ever").rglob("*.json"))
    assert len(records) == 3 and all(f"# wrote {path}" in printed for path in records)
    for path in records:
        validate_record(json.loads(path.read_text()))
    biased = out / _folder(runs, "biased-traits") / ".eval_results"
    assert sorted(p.name for p in biased.iterdir()) == ["vlfair-professions.yaml", "vlfair-traits.yaml"]
    control = out / _folder(runs, "control-traits") / ".eval_results"
    assert sorted(p.name for p in control.iterdir()) == ["vlfair-traits.yaml"]
    results = _results(runs["control-traits"])
    entries = parse_eval_result_entries(yaml.safe_load((control / "vlfair-traits.yaml").read_text()))
    assert [e.value for e in entries] == [m["value"] for m in results["metrics"]]
    assert {e.source_url for e in entries} == {TEMPLATE.format(record=record_name(results))}
    record = json.loads((out / "every_eval_ever" / record_name(results)).read_text())
    assert {e.task_id for e in entries} == {r["evaluation_result_id"] for r in record["evaluation_results"]}
    assert record["source_metadata"]["source_organization_name"] == "acme"


def test_the_board_page_links_each_row_to_the_record_card_results_writes(runs, tmp_path, monkeypatch):
    """The board names each row's run's record as card-results writes it; the leaderboard Space, given where
    the records are (VLFAIR_RECORDS: card-results' --source-template), links every row to it, its own run's."""
    from vlfair.report.hub import content_hash
    from vlfair.report.leaderboard import read_board

    from test_spaces import _load

    out = tmp_path / "card"
    assert main(["card-results", *map(str, runs.values()), "--out", str(out), "--benchmark-repo", BENCHMARK,
                 "--source-url", TEMPLATE]) == 0
    records = out / "every_eval_ever"
    written = {path.relative_to(records).as_posix() for path in records.rglob("*.json")}
    board = read_board([str(path) for path in runs.values()])
    assert set(board["record"]) == written and len(written) == 3
    for key, path in runs.items():  # every row of a run names that run's record
        results = _results(path)
        assert set(board.loc[board["run"] == content_hash(results), "record"]) == {record_name(results)}, key
    monkeypatch.setenv("VLFAIR_RECORDS", TEMPLATE)
    app = _load("leaderboard")
    rows = app.filter_board(board)
    shown = app.display(rows)
    assert len(shown) == len(board)
    assert list(shown["record"]) == [f"[record]({TEMPLATE.format(record=name)})" for name in rows["record"]]
    assert app.datatypes(shown)[list(shown.columns).index("record")] == "markdown"
    monkeypatch.delenv("VLFAIR_RECORDS")
    assert "record" not in _load("leaderboard").display(rows)  # nowhere to link: no column


def test_without_a_template_the_source_is_the_records_path_under_out(runs, tmp_path, capsys):
    argv = ["card-results", str(runs["biased-traits"]), "--out", str(tmp_path), "--benchmark-repo", BENCHMARK]
    assert main(argv) == 0
    assert "give --source-url with {record}" in capsys.readouterr().out
    entry = yaml.safe_load((tmp_path / _folder(runs, "biased-traits") / ".eval_results/vlfair-traits.yaml")
                           .read_text())[0]
    assert (tmp_path / entry["source"]["url"]).is_file()


def test_two_runs_of_one_model_on_one_task_are_refused_before_anything_is_written(runs, tmp_path):
    first = _results(runs["biased-traits"])
    again = {**copy.deepcopy(first), "created": "2027-01-01T00:00:00+00:00"}
    with pytest.raises(ValueError, match="two runs give demo-world_biased-[0-9a-f]{8} the task traits/trait_anova/"):
        write_card_results([first, again], tmp_path, BENCHMARK)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(("extra", "message"), [
    (["--instances"], "--instances goes with --out DIR"),
    ([], "cannot read {missing}/results.json: No such file or directory"),
    (["--out", "{tmp}"], "--out needs --benchmark-repo ORG/NAME"),
    (["--benchmark-repo", BENCHMARK], "--benchmark-repo and --source-url go with --out DIR"),
    (["--out", "{tmp}", "--benchmark-repo", "acme"], "--benchmark-repo must be a Hub dataset id ORG/NAME, got 'acme'"),
    (["--out", "{tmp}", "--benchmark-repo", BENCHMARK, "--source-url", "https://x/{run}"],
     "--source-url must hold {record}"),
    # issue 43, UNCLEAR: a link a card shows: an address, of a link's length, the record's name as it is
    (["--out", "{tmp}", "--benchmark-repo", BENCHMARK, "--source-url", "javascript:alert(1)//{record}"],
     "--source-url must be an https:// (or http://) address"),
    (["--out", "{tmp}", "--benchmark-repo", BENCHMARK, "--source-url", "data:text/html,{record}"],
     "--source-url must be an https:// (or http://) address"),
    (["--out", "{tmp}", "--benchmark-repo", BENCHMARK, "--source-url", "https:///{record}"],
     "--source-url must be an https:// (or http://) address"),
    (["--out", "{tmp}", "--benchmark-repo", BENCHMARK, "--source-url", "https://x/" + "a" * 2_000_000 + "{record}"],
     "--source-url is 2,000,018 characters long"),
    (["--out", "{tmp}", "--benchmark-repo", BENCHMARK, "--source-url", "https://x/{record:>2000000}"],
     "--source-url must hold {record} (the record's file name, as it is"),
    (["--out", "{tmp}", "--benchmark-repo", BENCHMARK, "--source-url", "https://x/{record!r}"],
     "--source-url must hold {record} (the record's file name, as it is"),
])
def test_a_mistake_is_one_line_and_exit_2(runs, tmp_path, capsys, extra, message):
    missing = tmp_path / "no-run"  # a folder without a results.json
    missing.mkdir()
    given = str(missing) if "cannot read" in message else str(runs["biased-traits"])
    extra = [e.replace("{tmp}", str(tmp_path / "out")) for e in extra]
    assert main(["card-results", given, *extra]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("vlfair card-results: " + message.replace("{missing}", str(missing)))
    assert captured.err.count("\n") == 1 and captured.out == ""
    assert not (tmp_path / "out").exists()


def test_a_second_card_results_into_one_folder_keeps_the_first_s_entries(runs, tmp_path):
    """The same model and probe written twice (here: a run whose subsets differ, as on other data):
    the first call's entries on other tasks stay, those on the same task are replaced."""
    first = _results(runs["biased-traits"])
    other = copy.deepcopy(first)
    other["created"] = "2027-01-01T00:00:00+00:00"
    for metric in other["metrics"]:
        metric["subset"] = {**metric["subset"], "trait": "kind/cruel"}
    write_card_results([first], tmp_path, BENCHMARK)
    path = tmp_path / _folder(runs, "biased-traits") / ".eval_results" / "vlfair-traits.yaml"
    before = yaml.safe_load(path.read_text())
    write_card_results([other], tmp_path, BENCHMARK)
    after = yaml.safe_load(path.read_text())
    tasks = [item["dataset"]["task_id"] for item in after]
    assert len(tasks) == len(set(tasks)) == 2 * len(before)
    assert {item["dataset"]["task_id"] for item in before} <= set(tasks)
    write_card_results([other], tmp_path, BENCHMARK)  # the same run again: nothing doubles
    assert len(yaml.safe_load(path.read_text())) == len(after)


def test_a_full_disk_leaves_a_merged_entries_file_whole_and_names_it(runs, tmp_path, capsys, monkeypatch):
    """Issue 65, LOSS 4: a second card-results whose last file (the model's merged .eval_results, which later calls
    merge into) meets a full disk midway exits 2 naming that file; the file holds every entry it held (it was cut
    between entries, in place) and nothing is left beside it."""
    import errno
    import os

    from vlfair import atomic

    out = tmp_path / "out"
    given = [str(runs["biased-traits"]), "--out", str(out), "--benchmark-repo", BENCHMARK]
    assert main(["card-results", *given]) == 0
    path = out / _folder(runs, "biased-traits") / ".eval_results" / "vlfair-traits.yaml"
    before = path.read_bytes()
    files = sum(1 for found in out.rglob("*") if found.is_file())
    capsys.readouterr()
    synced = []

    def full_at_the_last(fd: int) -> None:  # the records, then the entries file: the disk fills on the last
        synced.append(fd)
        if len(synced) == files:
            os.ftruncate(fd, len(before) // 2)  # half of it on the disk, as a full disk leaves a file
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full_at_the_last)
    assert main(["card-results", *given]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"vlfair card-results: {path}: could not be written (No space left on device); it was "
                          f"left as it was; written before it: {files - 1} files, whole") and err.count("\n") == 1
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["vlfair-traits.yaml"]


@pytest.mark.parametrize("names", [("CLIP v2", "CLIP_v2"), ("clip_v2", "CLIP_v2"), ("CLIP/v2", "CLIP--v2"),
                                   ("modèle", "mod le"), ("a" * 90 + "1", "a" * 90 + "2"), ("._x", "x")],
                         ids=["space-underscore", "case", "slash", "accent", "long", "stripped"])
@pytest.mark.parametrize("calls", ["one call", "two calls"])
def test_models_whose_names_read_alike_in_a_path_keep_their_own_entries(runs, tmp_path, names, calls):
    """Issue 43, LOSS 5: each model its own folder, whatever its name, on a filesystem blind to case too."""
    made = []
    for number, name in enumerate(names):
        results = _results(runs["biased-traits"])
        results["model"]["name"] = name
        results["created"] = f"2027-01-0{number + 1}T00:00:00+00:00"
        for metric in results["metrics"]:  # each model's own numbers
            metric["value"] = None if metric["value"] is None else metric["value"] + number
        made.append(results)
    if calls == "one call":
        write_card_results(made, tmp_path, BENCHMARK)
    else:
        for results in made:
            write_card_results([results], tmp_path, BENCHMARK)
    folders = [model_slug(results["model"]) for results in made]
    assert len({folder.lower() for folder in folders}) == 2  # apart even where case is not
    for results, folder in zip(made, folders):
        entries = yaml.safe_load((tmp_path / folder / ".eval_results" / "vlfair-traits.yaml").read_text())
        assert [e["value"] for e in entries] == [m["value"] for m in results["metrics"] if m["value"] is not None]
    assert len(list((tmp_path / "every_eval_ever").rglob("*.json"))) == 2


def test_a_plugin_probe_named_like_a_built_in_one_keeps_its_own_files_and_tasks(runs, tmp_path):
    built_in = _results(runs["biased-traits"])
    plugin = copy.deepcopy(built_in)
    plugin["probe"], plugin["created"] = "Traits", "2027-01-01T00:00:00+00:00"
    write_card_results([built_in, plugin], tmp_path, BENCHMARK)
    files = sorted(p.name for p in (tmp_path / _folder(runs, "biased-traits") / ".eval_results").iterdir())
    assert "vlfair-traits.yaml" in files and len(files) == 2
    assert re.fullmatch(r"vlfair-traits-[0-9a-f]{8}\.yaml", next(f for f in files if f != "vlfair-traits.yaml"))
    assert task_id("traits", "trait_anova", {}) != task_id("Traits", "trait_anova", {})


# ---- instance-level records (issue 46) -----------------------------------------------------------------
def test_instance_records_re_analyse_to_the_run_s_metrics_and_validate(runs, tmp_path, capsys):
    """card-results --instances writes each run's instance-level records beside its aggregate record: every
    line valid against Every Eval Ever's vendored instance schema, the file where the record's
    detailed_evaluation_results says, with its sha256 and line count; each line joins its aggregate result
    (evaluation_result_id), and the mean of a metric's lines is that metric's value in results.json (a
    re-analysis from the records alone). A run whose results.json is read without its samples gets none."""
    from vlfair.compare import instances

    schema_path = Path(eval_results.__file__).with_name(instances.INSTANCE_SCHEMA_FILE)
    assert hashlib.sha256(schema_path.read_bytes()).hexdigest() in instances.__doc__  # where the copy came from
    validator = jsonschema.Draft7Validator(instances.instance_schema())
    alone = tmp_path / "alone"  # a results.json without its run folder's samples
    alone.mkdir()
    (alone / "results.json").write_text((runs["control-traits"] / "results.json").read_text())
    out = tmp_path / "out"
    assert main(["card-results", str(runs["biased-professions"]), str(runs["biased-traits"]), str(alone), "--out",
                 str(out), "--benchmark-repo", BENCHMARK, "--instances"]) == 0
    assert f"no instance records for {alone / 'results.json'}" in capsys.readouterr().err
    records = {path: json.loads(path.read_text()) for path in (out / "every_eval_ever").rglob("*.json")}
    linked = [record for record in records.values() if "detailed_evaluation_results" in record]
    assert len(records) == 3 and len(linked) == 2
    for record in linked:
        details = record["detailed_evaluation_results"]
        data = (out / "every_eval_ever" / details["file_path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == details["checksum"] and details["hash_algorithm"] == "sha256"
        lines = [json.loads(line) for line in data.decode().splitlines()]
        assert len(lines) == details["total_rows"] > 0
        results = {r["evaluation_result_id"]: r["score_details"]["score"] for r in record["evaluation_results"]}
        by_result: dict[str, list[float]] = {}
        for line in lines:
            validator.validate(line)
            assert line["evaluation_id"] == record["evaluation_id"] and line["model_id"] == record["model_info"]["id"]
            assert line["evaluation_result_id"] in results
            by_result.setdefault(line["evaluation_result_id"], []).append(line["evaluation"]["score"])
        means = [task for task in by_result if "/mean_clipscore/" in task or "/trait_confidence/" in task]
        assert means
        for task in means:  # a group's mean: its samples' values
            assert sum(by_result[task]) / len(by_result[task]) == pytest.approx(results[task], rel=1e-9)
    again = tmp_path / "again"  # the same runs make the same files, byte for byte
    assert main(["card-results", str(runs["biased-professions"]), "--out", str(again), "--benchmark-repo", BENCHMARK,
                 "--instances"]) == 0
    first = sorted((out / "every_eval_ever" / "data").rglob("*.jsonl"))
    second = sorted((again / "every_eval_ever" / "data").rglob("*.jsonl"))
    assert second[0].name in {path.name for path in first}
    assert second[0].read_bytes() == next(p for p in first if p.name == second[0].name).read_bytes()
