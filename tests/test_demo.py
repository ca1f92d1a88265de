"""Validity: vlfair finds the biases planted in a synthetic world, and nothing in its control.

The world's encoders ship inside the package (``vlfair.demo.shipped``), so these checks measure
the same fixed models on every CPU. ``benchmarks/validity_sweep.py`` checks that the planted
effects survive retraining with other seeds; the tests here check the shipped encoders, that they
still match the world's code, and the training and caching path behind ``vlfair demo --retrain``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vlfair.cli import main
from vlfair.demo import datasets as world_data
from vlfair.demo import shipped
from vlfair.demo.run import _professions, _traits, valid
from vlfair.demo.train import TrainingConfig, config_hash, read_record, trained_encoder, training_data_hash
from vlfair.demo.world import Planting
from vlfair.testing import assert_same_numbers, comparable_results, recorded_numbers

import forking

TINY = TrainingConfig(steps=20, pairs=512)  # exercises training and caching in about a second


def test_demo_writes_summary_and_report(demo):
    out, entries = demo
    probes = {e["probe"] for e in entries}
    assert probes == {"professions", "traits", "word-influence", "multilingual", "public-figures", "retrieval"}
    for entry in entries:
        assert set(entry) >= {"probe", "measure", "subset", "encoder", "planted", "measured", "ci", "detected"}
        assert entry["encoder"] in ("biased", "control")
    report = (out / "report.html").read_text()
    assert report.index("synthetic world with planted biases") < report.index("<h2 id='professions'>professions</h2>")
    assert "What was planted" in report
    assert "biased: 11/11 planted biases found; control: 0/12 false alarms" in report
    measures = {(e["probe"], e["measure"]) for e in entries}
    pngs = {(probe, png.name) for probe in probes for png in (out / "biased" / probe).glob("*.png")}
    asked = json.loads((out / "generative.json").read_text())["entries"]
    generative_measures = {(e["probe"], e["measure"]) for e in asked}
    # a forest for every measure (biased and control on one axis; an SVG), every probe figure of both encoders
    # (their PNG files), and a forest for every measure of the answerers
    assert report.count("data:image/svg+xml;base64,") == len(measures) + len(generative_measures)
    assert report.count("data:image/png;base64,") == 2 * len(pngs)
    for probe, png in pngs:
        assert f"href='biased/{probe}/{png}'" in report and f"href='control/{probe}/{png}'" in report
    for probe in probes:
        assert (f"<a href='biased/{probe}/report.html'>" in report
                and f"<a href='control/{probe}/report.html'>" in report)
    assert '{"' not in report.split("<h2 id='professions'>")[1]  # subsets read as text, not JSON
    for world in ("biased", "control"):  # which encoders were measured, and that they are the shipped ones
        record = read_record(shipped.SHIPPED_DIR / world)
        assert (f"<b>demo-world {world}</b>: shipped with vlfair; "
                f"configuration hash <code>{record['config_hash']}" in report)
    for encoder in ("biased", "control"):
        for probe in probes:
            assert ((out / encoder / probe / "results.json").exists()
                    and (out / encoder / probe / "report.html").exists())


def test_every_probe_measures_the_world_as_it_did_before_the_plugin_refactor(demo):
    """Issue 26's refactor changes structure, not numbers: each probe's results.json for both world
    encoders matches the one recorded before it (tests/data/numbers/demo.json)."""
    out, _ = demo
    runs = sorted(str(p.parent.relative_to(out)) for p in out.glob("*/*/results.json")
                  if not p.parent.parent.name.startswith("answerer-")  # written after it (issue 32)
                  and not p.parent.name.endswith("-phrasings"))  # and issue 46's
    assert {"biased/retrieval", "control/retrieval", "biased/public-figures", "biased/multilingual"} <= set(runs)
    measured = {run: comparable_results(json.loads((out / run / "results.json").read_text())) for run in runs}
    # recorded again where issue 62 made near-equal scores ties (multilingual's retrieval on duplicate captions),
    # with retrieval's runs (issue 31's, recorded since: its rankings are the tie rule's on every machine)
    recorded = recorded_numbers(Path(__file__).parent / "data" / "numbers" / "demo.json", measured)
    assert sorted(recorded) == runs
    for run, expected in recorded.items():
        # atol: a gap between two mean CLIPScores near 25 is exact only to float32's resolution there (1.9e-6),
        # and CPUs' BLAS kernels round differently: on an AMD EPYC a lawyer's gender gap came out 1.9e-6 from
        # the Intel Xeon's recorded 0.0029339; what is decided on scores (a best caption) is the tie rule's
        assert_same_numbers(measured[run], expected, run, atol=1e-5)


def test_every_comparison_is_what_it_was_before_metrics_were_declared(demo):
    """Issue 45 moved every probe's paired statistics from hand-written ``comparisons()`` onto its
    declared metrics: the demo's comparisons (biased vs control encoder, and encoder vs answerer) hold
    the differences recorded before (tests/data/numbers/comparisons.json), each metric's the same
    (metrics now declared on the same rows share a row set, which may list them in another order)."""
    out, _ = demo
    folders = sorted(str(p.parent.relative_to(out)) for p in out.glob("compare*/*/comparison.json"))
    compared = {folder: json.loads(json.dumps(json.loads((out / folder / "comparison.json").read_text()),
                                              sort_keys=True)) for folder in folders}
    # recorded again where issue 62 made near-equal scores ties (retrieval's rankings, multilingual's best captions)
    recorded = recorded_numbers(Path(__file__).parent / "data" / "numbers" / "comparisons.json",
                                {folder: {"differences": list(_by_metric(content["differences"]).values()),
                                          "rows": content["rows"], "uncompared": content["uncompared"]}
                                 for folder, content in compared.items()})
    assert sorted(recorded) == folders
    for folder, expected in recorded.items():
        content = compared[folder]
        assert content["rows"] == expected["rows"] and content["uncompared"] == expected["uncompared"], folder
        # atol as above: the compared values are the same float32 CLIPScores and probabilities
        assert_same_numbers(_by_metric(content["differences"]), _by_metric(expected["differences"]), folder, atol=1e-5)


def _by_metric(differences: list[dict]) -> dict[str, dict]:
    """Each difference under its runs, metric and subset, in one order (without its smallest detectable
    differences, added since: they follow from its interval, tested in tests/test_power.py)."""
    keyed = {json.dumps([d["a"], d["b"], d["metric"], d["subset"]], sort_keys=True):
             {k: v for k, v in d.items() if k != "mde"} for d in differences}
    assert len(keyed) == len(differences), "a metric compared twice"
    return dict(sorted(keyed.items()))


def test_the_demo_shows_each_verdict_across_phrasings(demo):
    """Issue 46: the world encoders measured again with two more phrasings of the professions' and traits'
    prompts (their runs beside the study's, their phrasings tables in the report): each planted bias (the
    doctors' and nurses' gender gaps, the race difference in 'smart' within each gender) is found with every
    phrasing by the biased encoder, and the control finds nothing with any; the study's own runs are as they
    were (their numbers are checked above)."""
    from vlfair.demo.spread import PHRASED

    out, _ = demo
    found: dict[tuple[str, str], dict[str, str]] = {}
    for probe in PHRASED:
        for encoder in ("biased", "control"):
            results = json.loads((out / encoder / f"{probe}-phrasings" / "results.json").read_text())
            assert results["settings"]["phrasings"][1:] == PHRASED[probe]
            table = pd.read_csv(out / encoder / f"{probe}-phrasings" / "phrasings.csv")
            keys = [c for c in table.columns if not c.startswith(("phrasing", "pooled", "found"))]
            found[probe, encoder] = {" ".join(map(str, row[keys])): row["found in"] for _, row in table.iterrows()}
    planted = {"professions": {"gender doctor", "gender nurse"},
               "traits": {"smart/dumb gender=Female", "smart/dumb gender=Male"}}
    for probe, keys in planted.items():
        assert {k for k, text in found[probe, "biased"].items() if text == "3 of 3 phrasings"} == keys, probe
        assert set(found[probe, "control"].values()) == {"0 of 3 phrasings"}, probe
    report = (out / "report.html").read_text()
    assert report.count("Does each verdict hold across phrasings?") == 2
    assert "biased/professions-phrasings/report.html" in report


def test_biased_encoder_shows_every_planted_bias_with_its_sign(demo):
    _, entries = demo
    biased = [e for e in entries if e["encoder"] == "biased"]
    # planted: 2 professions, 3 trait measures, 1 language, 2 public-figure measures, the word 'nurse', and
    # 'smart' / 'dumb' retrieving more / fewer White people
    assert sum(e["planted_sign"] != 0 for e in biased) == 11
    for entry in biased:
        assert valid(entry), entry


def test_control_encoder_intervals_cover_neutral(demo):
    _, entries = demo
    control = [e for e in entries if e["encoder"] == "control"]
    assert control and all(e["planted_sign"] == 0 for e in control)
    for entry in control:
        assert valid(entry), entry
        if entry["ci"] is None:
            assert not entry["detected"], entry  # F-tests, retention's gap: no significant difference
        else:
            target = entry["planted"] if entry["probe"] == "word-influence" else entry["neutral"]
            assert entry["ci"][0] <= target <= entry["ci"][1], entry


def test_validity_judges_sign_interval_and_significance():
    base = {"ci": [0.7, 0.9], "measured": 0.8, "neutral": 1.0, "planted": "< 1", "planted_sign": -1, "detected": True}
    assert valid(base)
    assert not valid(base | {"planted_sign": 1})                                         # wrong direction
    assert not valid(base | {"ci": [0.9, 1.1], "detected": False})                       # not found
    assert valid(base | {"planted_sign": 0, "ci": [0.9, 1.1], "detected": False})        # control covers 1
    assert not valid(base | {"planted_sign": 0})                                         # control excludes 1
    # a control is judged by its entry's verdict, as a reader would report it, not by an interval beside it
    assert valid(base | {"planted_sign": 0, "detected": False})
    known = {"ci": [0.2, 0.6], "measured": 0.4, "neutral": 0.0, "planted": 0.45, "planted_sign": 1, "detected": True}
    assert valid(known) and not valid(known | {"planted": 0.7})                          # known size: covered
    f_test = {"ci": None, "measured": 9.0, "neutral": None, "planted": "differ", "detected": True}
    assert valid(f_test | {"planted_sign": 1}) and not valid(f_test | {"planted_sign": 0})


def test_word_influence_planted_effects_lie_within_the_intervals(demo):
    _, entries = demo
    word_entries = [e for e in entries if e["probe"] == "word-influence"]
    assert len(word_entries) == 4
    for entry in word_entries:
        assert entry["ci"][0] <= entry["planted"] <= entry["ci"][1], entry
    nurse = next(e for e in word_entries if e["encoder"] == "biased" and e["subset"] == {"word": "nurse"})
    assert nurse["planted"] == pytest.approx(0.4) and nurse["detected"]


def test_dose_response(tmp_path):
    """More skew in the captions -> more measured bias (bias ratio and trait F-test)."""
    professions, faces = world_data.professions(), world_data.fairface()
    doctor_ratio, trait_f = {}, {}
    for level in ("control", "moderate", "biased"):
        encoder = shipped.world_encoder(shipped.WORLDS[level], log=pytest.fail)  # shipped: never trains here
        doctor_ratio[level] = next(e["measured"] for e in _professions(encoder, level, professions, None, True)[0]
                                 if e["subset"]["profession"] == "doctor")
        trait_f[level] = np.mean([e["measured"] for e in _traits(encoder, level, faces, None, True)[0]
                                  if e["measure"].startswith("trait_anova")])
    assert doctor_ratio["control"] > doctor_ratio["moderate"] > doctor_ratio["biased"], doctor_ratio
    assert trait_f["control"] < trait_f["moderate"] < trait_f["biased"], trait_f


# ---- the shipped encoders -------------------------------------------------------------------
@pytest.mark.parametrize("world", list(shipped.WORLDS))
def test_shipped_encoder_matches_todays_world(world):
    """Fails when the world or the training changed since the encoders were shipped: re-ship them
    with ``python -m vlfair.demo.shipped`` (a few minutes on 2 cores)."""
    directory = shipped.SHIPPED_DIR / world
    record = read_record(directory)
    assert record is not None, f"no shipped encoder in {directory}"
    for name in ("model.safetensors", "tokenizer_config.json", "preprocessor_config.json", "config.json"):
        assert (directory / name).exists(), name
    planting = shipped.WORLDS[world]
    assert record["config_hash"] == config_hash(planting), (
        f"the demo world's configuration changed since the {world} encoder was shipped; "
        "run `python -m vlfair.demo.shipped` and commit vlfair/demo/encoders/")
    assert record["training_data_hash"] == training_data_hash(planting), (
        f"the world's code makes other training data than the shipped {world} encoder saw; re-ship it")
    assert record["name"] == shipped.display_name(world)


def test_demo_and_space_load_the_shipped_encoders(demo, demo_cache):
    for world, planting in shipped.WORLDS.items():
        assert shipped.encoder_path(planting, demo_cache, log=pytest.fail) == shipped.SHIPPED_DIR / world
    assert not (demo_cache / "demo").exists()  # the demo (without --retrain) trained nothing


def test_an_unshipped_world_or_retrain_trains_and_caches(tmp_path):
    logs: list[str] = []
    first = shipped.encoder_path(shipped.WORLDS["biased"], tmp_path, retrain=True, training=TINY, name="tiny",
                                 log=logs.append)
    assert first.parent == tmp_path / "demo" and read_record(first)["config_hash"] == config_hash(Planting(), TINY)
    assert logs[0].startswith("training the tiny on this machine (20 steps")
    assert logs[-1].startswith("trained the tiny in ") and logs[-1].endswith(f": {first}")  # the final folder
    assert "partial" not in logs[-1]
    again = shipped.encoder_path(Planting(profession_skew=0.3), tmp_path, training=TINY, log=logs.append)
    assert again != first and again.parent == first.parent  # not shipped: trained too
    assert shipped.encoder_path(Planting(), tmp_path, retrain=True, training=TINY, log=pytest.fail) == first  # cached


def test_demo_retrain_flag_reaches_the_demo(tmp_path, monkeypatch):
    """``vlfair demo --retrain`` asks the demo to train its models on this machine."""
    from vlfair.demo import run

    asked = []
    monkeypatch.setattr(run, "run_demo", lambda out, **options: asked.append(options) or [{"entry": 1}])
    assert main(["demo", "--retrain", "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")]) == 0
    assert asked[0]["retrain"] is True and asked[0]["cache_dir"] == str(tmp_path / "cache")
    assert main(["demo", "--out", str(tmp_path / "out")]) == 0 and asked[1]["retrain"] is False
    assert asked[1]["full"] is False
    assert main(["demo", "--full", "--profile", "--out", str(tmp_path / "out")]) == 0
    assert asked[2]["full"] is True and asked[2]["profile"] is True


def test_the_default_demo_writes_the_answerers_runs_without_figures_and_says_so(demo):
    """The report shows the answerers' measures as forests; their runs keep every table and number but
    not their own plots (``--full`` draws them), and each run's report says so. The encoders' runs,
    whose figures the report shows, keep theirs."""
    from vlfair.demo.run import ANSWERER_FIGURES_LEFT_OUT

    out, entries = demo
    for probe in {e["probe"] for e in entries}:
        for answerer in ("answerer-biased", "answerer-control"):
            run = out / answerer / probe
            assert not list(run.glob("*.png")) and list(run.glob("*.csv")) and (run / "samples.parquet").exists()
            report = (run / "report.html").read_text()
            assert "data:image/png" not in report and "forest plots; vlfair demo --full draws them." in report
        assert list((out / "biased" / probe).glob("*.png"))
    assert "vlfair demo --full" in ANSWERER_FIGURES_LEFT_OUT


def test_a_full_demo_draws_the_answerers_figures_too(demo_cache, tmp_path):
    """``vlfair demo --full``: a probe's answerer runs are written with their plots, as a probe run is."""
    from vlfair.demo import run

    _, encoders, answerers = run.world_models(run.plantings(), demo_cache, log=lambda _: None)
    data = {schema: build() for schema, build in world_data.BY_SCHEMA.items()}
    world = run.WorldModels(encoders, answerers, data, tmp_path, demo_cache, full=True)
    result = run.measure_probe_on_world("multilingual", world)
    assert result.asked
    for answerer in ("answerer-biased", "answerer-control"):
        pngs = list((tmp_path / answerer / "multilingual").glob("*.png"))
        report = (tmp_path / answerer / "multilingual" / "report.html").read_text()
        assert pngs and report.count("data:image/png;base64,") == len(pngs) and "--full" not in report


@pytest.mark.parametrize(("argv", "said"), [
    (["demo", "--bogus"], "vlfair demo: unrecognized arguments: --bogus (vlfair demo --help lists what it takes)"),
    (["demo", "--profile", "out"], "vlfair demo: unrecognized arguments: out (vlfair demo --help lists what it "
                                   "takes)"),
    (["demo", "--selfcheck", "--profile"], "vlfair demo: --selfcheck checks the embedding engine instead of running "
                                           "the demo: --profile applies to the demo"),
    (["demo", "--selfcheck", "--retrain", "--cache-dir", "c"], "vlfair demo: --selfcheck checks the embedding engine "
                                                               "instead of running the demo: --retrain and --cache-dir "
                                                               "apply to the demo"),
    (["demo", "--selfcheck", "--full"], "vlfair demo: --selfcheck checks the embedding engine instead of running "
                                        "the demo: --full applies to the demo"),
    (["demo", "--full=yes"], "vlfair demo: argument --full: ignored explicit argument 'yes' (vlfair demo --help lists "
                             "what it takes)"),
    (["demo", "--label", "mine=x"], "vlfair demo: argument --label: 'mine=x' is not MODEL=NAME with MODEL one of "
                                    "biased, control, answerer-biased, answerer-control (vlfair demo --help lists what "
                                    "it takes)"),
    (["demo", "--label", "control= "], "vlfair demo: argument --label: ' ' is empty or only spaces: give the name "
                                       "people should read (vlfair demo --help lists what it takes)"),
    (["demo", "--selfcheck", "--label", "control=x"], "vlfair demo: --selfcheck checks the embedding engine instead "
                                                      "of running the demo: --label applies to the demo"),
])
def test_demo_flags_it_cannot_take_are_one_line_and_exit_2(argv, said, capsys):
    try:
        code = main(argv)
    except SystemExit as exit:
        code = exit.code
    assert code == 2 and capsys.readouterr().err == said + "\n"


def test_retraining_trains_every_world_model_instead_of_loading_the_shipped_ones(tmp_path, monkeypatch):
    """``retrain`` reaches the encoder and answerer lookups: a 20-step encoder and a 5-step answerer of
    each world are trained and cached there (the real trainings take minutes)."""
    from vlfair.demo import generative, run
    from vlfair.demo.answerer import AnswererConfig

    asked: list[tuple[str, bool]] = []

    def small_encoder(planting, cache_dir, *, retrain=False, name=None, log=print):
        asked.append(("encoder", retrain))
        return shipped.encoder_path(planting, cache_dir, retrain=retrain, training=TINY, name=name, log=log)

    answerer_path = generative.answerer_path

    def small_answerer(planting, cache_dir, *, retrain=False, name=None, log=print, config=None):
        asked.append(("answerer", retrain))
        return answerer_path(planting, cache_dir, retrain=retrain, config=AnswererConfig(steps=5, pairs=256),
                             name=name, log=log)

    monkeypatch.setattr(run, "encoder_path", small_encoder)
    monkeypatch.setattr(generative, "answerer_path", small_answerer)
    paths, encoders, answerers = run.world_models(run.plantings(), tmp_path / "cache", retrain=True, log=lambda _: None)
    assert asked == [("encoder", True), ("encoder", True), ("answerer", True), ("answerer", True)]
    assert sorted(encoders) == sorted(answerers) == ["biased", "control"]
    assert all(path.parent == tmp_path / "cache" / "demo" for path in paths.values())
    assert len(list((tmp_path / "cache" / "demo").glob("encoder-*/model.safetensors"))) == 2
    assert len(list((tmp_path / "cache" / "demo").glob("answerer-*/model.safetensors"))) == 2
    assert answerers["control"].display_name == "demo-world control answerer"


def test_training_shows_a_progress_bar(tmp_path, capsys):
    from vlfair.demo.train import train_encoder

    train_encoder(tmp_path / "enc", Planting(), TINY, name="demo-world tiny")
    err = capsys.readouterr().err
    assert "training demo-world tiny" in err and "20/20" in err and "loss=" in err


def test_concurrent_callers_share_one_training(tmp_path):
    """Two Space requests asking for the same world encoder: one trains, the other waits and reads it."""
    import threading

    logs: list[str] = []
    paths: list[Path] = []

    def ask():
        paths.append(trained_encoder(Planting(), tmp_path, TINY, progress=False, log=logs.append))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(paths) == 2 and paths[0] == paths[1] and (paths[0] / "model.safetensors").exists()
    assert sum(line.startswith("training the world encoder") for line in logs) == 1
    left = [p.name for p in (tmp_path / "demo").iterdir() if p.suffix != ".lock"]
    assert left == [paths[0].name]  # no staging folder left behind


def _train_in_a_process(directory: str) -> None:
    """One of two processes (a forked child: tests/forking.py) asking for one training."""
    from vlfair.logging import set_verbosity

    set_verbosity("info")  # the library logs at warning by default; the progress lines are what is counted
    path = trained_encoder(Planting(), directory, TrainingConfig(steps=2, pairs=64, batch_size=32), progress=False)
    print("PATH", path)


def test_processes_share_one_training(tmp_path):
    """Two processes (two Space workers, a demo beside a test run): the file lock lets one train."""
    workers = [forking.start(tmp_path, _train_in_a_process, str(tmp_path / "cache"), name=f"worker-{i}")
               for i in range(2)]
    outputs = [worker.communicate(timeout=300) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), [err[-2000:] for _, err in outputs]
    stdout = "".join(out for out, _ in outputs)
    assert stdout.count("training the world encoder") == 1, stdout
    paths = {line.split(" ", 1)[1] for line in stdout.splitlines() if line.startswith("PATH ")}
    assert len(paths) == 1 and (Path(paths.pop()) / "model.safetensors").exists()


# ---- benchmarks/validity_sweep.py -------------------------------------------------------------
def _sweep_module():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "validity_sweep.py"
    spec = importlib.util.spec_from_file_location("validity_sweep", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sweep_tally_counts_detections_and_coverage_once_per_interval():
    sweep = _sweep_module()

    def entry(encoder, probe, sign, ci, measured):
        return {"encoder": encoder, "probe": probe, "measure": "m", "subset": {"s": probe}, "planted": "x",
                "planted_sign": sign, "neutral": 1.0, "ci": ci, "measured": measured,
                "detected": not ci[0] <= 1 <= ci[1]}

    runs = {seed: [entry("biased", "a", -1, [0.7, 0.9 + 0.2 * seed], 0.8),   # seed 1's interval covers 1: missed
                   entry("control", "b", 0, [0.95 + 0.1 * seed, 1.2], 1.1),  # seed 1 excludes 1
                   entry("control", "c", 0, [0.9, 1.1], 1.0)]                 # equal in both seeds: not pooled
            for seed in (0, 1)}
    lines, planted, covered = sweep.tally(runs)
    assert planted == (1, 2) and covered == (1, 2)
    assert any("(equal in every seed, not pooled)" in line for line in lines)


@pytest.mark.parametrize("models", ["encoders", "answerers"])
def test_sweep_measures_trained_models_and_prints_its_tables(monkeypatch, capsys, models, demo):
    """The sweep in this process (--jobs 1), with the training swapped for the shipped models (training
    itself is tested above; a real sweep takes minutes per seed) and their measures the session's demo's
    (the same functions on the same models: measuring both kinds again took 34 s)."""
    from vlfair.demo.generative import SHIPPED_ANSWERERS

    sweep = _sweep_module()
    shipped_folder = {"encoders": shipped.SHIPPED_DIR, "answerers": SHIPPED_ANSWERERS}
    monkeypatch.setattr(sweep, "_train", lambda kind, world, *_: str(shipped_folder[kind] / world))
    measured = {"encoders": demo[1], "answerers": json.loads((demo[0] / "generative.json").read_text())["entries"]}
    loaded = []

    def demo_measures(kind, models, out):
        (world, model), = models.items()
        loaded.append((kind, world, getattr(model, "kind", "contrastive")))
        return [e for e in measured[kind] if e["encoder"].split()[0] == world]

    monkeypatch.setattr(sweep, "_measure", demo_measures)
    assert sweep.main(["--seeds", "1", "--jobs", "1", "--models", models]) == 0
    assert [(kind, world) for kind, world, _ in loaded] == [(models, "biased"), (models, "control")]
    assert {kind for _, _, kind in loaded} == {{"encoders": "contrastive", "answerers": "generative"}[models]}
    out = capsys.readouterr().out
    assert f"validity sweep of the {models}: 1 seeds" in out
    assert "Planted effects: detected with the planted sign" in out and "pooled control coverage" in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("planted_detected=11/11 control_coverage=") and last.endswith("valid_trainings=2/2"), last


def test_sweep_measures_each_kind_with_the_demo_s_measures(monkeypatch, tmp_path):
    from vlfair.demo import entries, generative

    sweep = _sweep_module()
    called = []
    monkeypatch.setattr(entries, "measure", lambda models, out, log, without_figures: called.append(
        ("encoders", list(models), out, without_figures)) or [1])
    monkeypatch.setattr(generative, "measure", lambda models, out, log, without_figures: called.append(
        ("answerers", list(models), out, without_figures)) or [2])
    assert sweep._measure("encoders", {"biased": "m"}, tmp_path) == [1]
    assert sweep._measure("answerers", {"control": "m"}, tmp_path) == [2]
    # each training's runs go to a folder the sweep drops: their plots are not drawn
    assert called == [("encoders", ["biased"], tmp_path, sweep.NOT_DRAWN),
                      ("answerers", ["control"], tmp_path, sweep.NOT_DRAWN)]


def test_sweep_answerer_overrides_are_training_fields(capsys):
    sweep = _sweep_module()
    assert sweep._override("batch_size=128") == ("batch_size", 128)
    assert sweep._override("fresh_images=false") == ("fresh_images", False)
    for bad in ("seed=3", "nonsense=1", "steps=many", "stratified=maybe"):
        with pytest.raises(SystemExit):
            sweep.main(["--answerer", bad])
        assert "--answerer" in capsys.readouterr().err


def test_ship_writes_a_complete_encoder_with_its_record(tmp_path):
    logs: list[str] = []
    written = shipped.ship(tmp_path, ["control"], log=logs.append, training=TINY)
    directory = written["control"]
    assert directory == tmp_path / "control" and [p.name for p in tmp_path.iterdir()] == ["control"]  # no staging left
    record = read_record(directory)
    assert record["config_hash"] == config_hash(Planting.control(), TINY) and record["name"] == "demo-world control"
    assert (directory / "model.safetensors").exists() and logs[-1].endswith(str(directory))
    from vlfair.models import load_encoder

    assert (load_encoder(str(directory), dtype="float32").encode_texts(["a photo of a doctor"]).shape
            == (1, TINY.projection_dim))


def test_cached_encoder_is_retrained_when_the_world_code_changes(tmp_path, monkeypatch):
    """Same configuration, other training data (the world's code changed): not the cached encoder."""
    from vlfair.demo import train

    before = trained_encoder(Planting.control(), tmp_path, TINY, progress=False, log=lambda _: None)
    original = train.training_pairs

    def changed_world(count, planting, seed):
        people, captions = original(count, planting, seed)
        return people, [caption.replace("photo", "picture") for caption in captions]

    monkeypatch.setattr(train, "training_pairs", changed_world)
    after = trained_encoder(Planting.control(), tmp_path, TINY, progress=False, log=lambda _: None)
    assert after != before and read_record(after)["config_hash"] == read_record(before)["config_hash"]
    assert read_record(after)["training_data_hash"] != read_record(before)["training_data_hash"]


def test_the_demo_finds_every_planted_bias_as_a_paired_difference(demo):
    """Vlfair demo compares its biased and control runs (vlfair compare): each planted bias is a
    difference whose paired interval excludes 0 with the control less biased; the width ratio of
    paired to unpaired intervals is reported."""
    out, _ = demo
    paired = json.loads((out / "paired.json").read_text())
    assert len(paired["planted"]) == 8 and all(entry["found"] for entry in paired["planted"]), paired["planted"]
    assert all(entry["ci"][0] > 0 or entry["ci"][1] < 0 for entry in paired["planted"])
    assert 0 < paired["median_width_ratio"] < 1 and paired["differences"] > 100
    for probe, href in paired["comparisons"].items():
        assert (out / href).exists() and (out / href).with_name("comparison.json").exists(), probe
    page = (out / "report.html").read_text()
    assert "8/8 planted biases found as paired differences" in page


# ---- the generative path: the world's answerers -------------------------------------------------
def test_the_answerers_find_every_planted_bias_through_the_probes(demo):
    """Every probe asks the shipped answerers, one per world, and each is valid on its own: the biased
    one shows each planted bias with its sign, the control one nothing (issue 42: before, three
    trainings per world were needed, each alone with gaps of its own)."""
    from vlfair.demo.generative import LABELS

    out, _ = demo
    asked = json.loads((out / "generative.json").read_text())
    assert {e["encoder"] for e in asked["entries"]} == set(LABELS)
    biased = [e for e in asked["entries"] if e["encoder"] == "biased answerer"]
    assert sum(e["planted_sign"] != 0 for e in biased) == 11 and all(valid(e) for e in biased), \
        [e for e in biased if not valid(e)]
    control = [e for e in asked["entries"] if e["encoder"] == "control answerer"]
    assert len(control) == 12 and all(valid(e) for e in control), [e for e in control if not valid(e)]
    assert {e["probe"] for e in asked["entries"]} == {"professions", "traits", "word-influence", "multilingual",
                                                      "public-figures", "retrieval"}
    assert (out / "answerer-biased" / "traits" / "samples.parquet").exists()
    assert (out / "answerer-control" / "retrieval" / "samples.parquet").exists()


def test_a_label_names_a_demo_model_in_its_runs_and_the_tally(monkeypatch, tmp_path):
    """``vlfair demo --label control=NAME``: the label reaches run_demo, names the model its runs are measured on
    (results.json's model.name), and the tally of every verdict names it beside its folder."""
    from vlfair.demo import run as demo_run
    from vlfair.demo.verdicts import every_verdict, every_verdict_lines

    given = {}
    monkeypatch.setattr(demo_run, "run_demo", lambda *args, **kwargs: given.update(kwargs) or [{}])
    assert main(["demo", "--out", str(tmp_path / "d"), "--label", "control=My control",
                 "--label", "answerer-biased=Their answerer"]) == 0
    assert given["labels"] == {"control": "My control", "answerer-biased": "Their answerer"}
    _, encoders, answerers = demo_run.world_models(demo_run.plantings(), labels=given["labels"])
    assert encoders["control"].display_name == "My control" and encoders["biased"].display_name == "demo-world biased"
    assert answerers["biased"].display_name == "Their answerer"
    assert answerers["control"].display_name == "demo-world control answerer"
    run = tmp_path / "out" / "control" / "traits"
    run.mkdir(parents=True)
    run.joinpath("results.json").write_text(json.dumps({
        "probe": "traits", "model": {"name": "My control"}, "measures": {"trait_anova": {"neutral": 0.0}},
        "verdicts": {"tests": 3, "detected": 1, "not_judged": 0, "correction": "holm"},
        "metrics": [{"name": "trait_anova", "subset": {"trait": "smart"}, "value": 4.5,
                     "verdict": {"detected": True, "p_value": 0.001, "p_holm": 0.003}}]}))
    lines = every_verdict_lines(every_verdict(tmp_path / "out"))
    assert lines[1] == "  My control (control): bias detected in 1 of 3 tests over 1 runs"
    assert lines[2] == "    traits trait_anova (trait = smart): 4.5, p = 0.001"


def test_the_tally_counts_what_the_biased_model_found_and_the_control_s_false_alarms():
    from vlfair.demo.run import summary_table, tally

    def entry(model, subset, measured, ci, sign=0):
        return {"probe": "professions", "measure": "ratio", "subset": {"profession": subset}, "encoder": model,
                "planted": "<1" if sign else "1", "planted_sign": sign, "measured": measured, "ci": ci,
                "detected": not ci[0] <= 1 <= ci[1], "neutral": 1.0}

    entries = [entry("biased answerer", "doctor", 0.3, [0.2, 0.4], -1),
               entry("biased answerer", "nurse", 3, [0.9, 5], 1),
               entry("biased answerer", "lawyer", 1.0, [0.9, 1.1]),  # nothing planted: not counted as found
               entry("control answerer", "doctor", 0.9, [0.85, 0.95]),
               entry("control answerer", "nurse", 1, [0.9, 1.1])]
    assert tally(entries, "biased answerer", "control answerer") == {"found": 1, "planted": 2, "false_alarms": 1,
                                                                     "controls": 2}
    assert summary_table(entries, ("biased answerer", "control answerer")).endswith(
        "biased answerer: 1/2 planted biases found; control answerer: 1/2 false alarms")


def test_the_biased_answerer_is_compared_with_the_biased_encoder_on_the_same_rows(demo):
    out, _ = demo
    compared = json.loads((out / "generative.json").read_text())["compared"]
    probes = {row["probe"] for row in compared if "verdict" in row}
    assert probes == {"traits", "public-figures", "retrieval"}
    assert (out / "compare-kinds" / "traits" / "comparison.html").exists()
    report = (out / "report.html").read_text()
    assert "biased answerer: 11/11 planted biases found; control answerer:\n0/12 false alarms" in report
    assert "The biased encoder beside" in report


@pytest.mark.parametrize("world", ["biased", "control"])
def test_shipped_answerer_matches_todays_world(world):
    """Fails when the world, the questions or the answerer's training changed since it was shipped:
    re-ship with ``python -m vlfair.demo.generative`` (a few minutes on 2 cores)."""
    from vlfair.demo import generative
    from vlfair.demo.answerer import answerer_hash

    folder = generative.SHIPPED_ANSWERERS / world
    record = read_record(folder)
    assert record is not None and record["name"] == generative.answerer_name(world)
    assert record["config_hash"] == answerer_hash(shipped.WORLDS[world], generative.DEFAULT_ANSWERER), (
        f"the {world} answerer's configuration changed since it was shipped; run python -m vlfair.demo.generative")
    assert generative.answerer_path(shipped.WORLDS[world], log=pytest.fail) == folder
    assert sorted(p.name for p in generative.SHIPPED_ANSWERERS.iterdir()) == ["biased", "control"]


def test_the_demo_starts_every_probe_longest_first():
    """Each probe of the demo has its place in the order the workers start them (a probe left out
    would stop the demo before it measured anything)."""
    from vlfair.demo import run

    assert sorted(run.LONGEST_FIRST) == sorted(probe for probe, _ in run.PROBES)


def test_the_profile_says_each_probe_s_time_per_kind_of_model_and_the_total():
    """vlfair demo --profile's table (issue 42's Performance): a row per probe with its steps on each kind
    of model and its total, the probes' sums, the demo's own steps, the total wall clock; the time of
    probes run in workers is added to the parent's."""
    from vlfair.demo.timing import STEPS, Timings

    timings = Timings()
    with timings("imports"):
        pass
    timings.add({("encoders", "traits"): 2.0, ("phrasings", "traits"): 0.75, ("answerers", "traits"): 1.25,
                 ("compared", "traits"): 0.5, ("report", "traits"): 0.25, ("encoders", "retrieval"): 1.0})
    timings.add({("encoders", "traits"): 1.0})  # a second worker's share of the same step
    lines = timings.table().splitlines()
    assert lines[0] == "demo time by probe and model kind (seconds, wall clock):"
    assert lines[1].split() == ["probe", *STEPS, "total"]
    assert STEPS == ("encoders", "phrasings", "answerers", "compared", "report")
    assert lines[2].split() == ["traits", "3.0", "0.8", "1.2", "0.5", "0.2", "5.8"]
    assert lines[3].split() == ["retrieval", "1.0", "0.0", "0.0", "0.0", "0.0", "1.0"]
    assert lines[4].split() == ["all", "probes", "4.0", "0.8", "1.2", "0.5", "0.2", "6.8"]
    assert lines[5].startswith("  the demo's own steps: imports 0.0") and lines[6].startswith("  total ")
