"""The Spaces without a browser: leaderboard and demo functions, served apps through gradio_client,
and the metric widgets."""

from __future__ import annotations

import importlib.util
import json
import re
import runpy
import socket
from pathlib import Path

import pandas as pd
import pytest

from vlfair import measures
from vlfair.demo import datasets as world_data
from vlfair.metrics import metrics_dir
from vlfair.probes import run_probe
from vlfair.report.markup import markdown_text
from vlfair.space import session
from vlfair.space.limits import SpaceInputError
from vlfair.testing import assert_metrics_close

SPACES = Path(__file__).resolve().parents[1] / "spaces"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"space_{name}", SPACES / name / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results_dir(clip_encoder, tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("space-results")
    run_probe("public-figures", clip_encoder, "synthetic:pfi", base / "pfi", cache_dir=None,
              settings={"bootstrap": 100})
    run_probe("professions", clip_encoder, "synthetic:professions", base / "professions", cache_dir=None,
              settings={"bootstrap": 100, "n_permutations": 200})
    return base


def test_leaderboard_functions(results_dir):
    app = _load("leaderboard")
    board = app.load_board(str(results_dir))
    assert set(board["probe"]) == {"public-figures", "professions"}
    expected = ((board["probe"] == "public-figures") & (board["metric"] == "bias_ratio")).sum()
    ratios = app.filter_board(board, probe="public-figures", metric="bias_ratio")
    # all politicians, each folder, athletes, actors
    assert expected == 6 and len(ratios) == expected and set(ratios["metric"]) == {"bias_ratio"}
    nurse = app.filter_board(board, subset="NURSE")
    assert len(nurse) and all("nurse" in s for s in nurse["subset"])
    ordered = app.filter_board(board, metric="group_score_gap", sort_by="value", descending=True)["value"].tolist()
    assert ordered == sorted(ordered, reverse=True)
    figure = app.metric_chart(app.filter_board(board, metric="bias_ratio"), "bias_ratio")
    assert len(figure.axes[0].get_yticklabels()) == 6  # one line per (model, subset)
    assert "bias ratio compares how strongly" in app.explain("bias_ratio") and app.explain("(all)") == ""
    detail = app.model_detail(board, board["model"][0])
    assert len(detail) == len(board)
    board.to_parquet(results_dir / "board.parquet")
    assert len(app.load_board(str(results_dir / "board.parquet"))) == len(board)
    hub_clone = results_dir / "hub-clone"  # the layout push_to_hub(split="results") writes
    (hub_clone / "data").mkdir(parents=True)
    board.to_parquet(hub_clone / "data" / "results-00000-of-00001.parquet")
    assert app.load_board(str(hub_clone)).equals(board)
    (results_dir / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no results.json"):
        app.load_board(str(results_dir / "empty"))


def test_leaderboard_served_and_called_through_gradio_client(results_dir):
    from gradio_client import Client

    app = _load("leaderboard").build_app(str(results_dir))
    try:
        client = Client(_serve(app), verbose=False)
        table, _chart, explanation, _detail = client.predict("public-figures", "bias_ratio", "", "(all)", "value", True,
                                                             api_name="/filter")
        assert table["headers"] == ["metric", "subset", "value", "CI", "p", "bias detected", "rank", "tier",
                                    "no bias at", "model", "kind", "probe", "dataset", "family"]
        assert len(table["data"]) == 6 and {row[0] for row in table["data"]} == {"bias_ratio"}
        assert "bias_ratio" in explanation
    finally:
        app.close()


# ---- leaderboard Space: families, ranks, a Hub dataset, text from results files ---------------
@pytest.fixture
def family_runs(tmp_path) -> Path:
    """Two models in one family, a third model in another (another prompt), made by hand."""
    from test_push_results import BIASED, FAIR, make_results, write_run

    root = tmp_path / "runs"
    write_run(root / "biased", make_results("org/clip-b", BIASED))
    write_run(root / "fair", make_results("org/siglip", FAIR))
    write_run(root / "other", make_results("org/other", FAIR, settings={"prompt": "a {profession} at work"}))
    return root


def test_the_leaderboard_space_chooses_a_family_and_ranks_within_it(family_runs):
    from test_push_results import make_results

    app = _load("leaderboard")
    board = app.load_board(str(family_runs))
    family = make_results("x", {})["family"]
    other = make_results("x", {}, settings={"prompt": "a {profession} at work"})["family"]
    labels = dict((value, label) for label, value in app.family_choices(board))
    assert list(labels) == [app.ALL, family, other]  # the family with more models first
    # what sets each apart from the probe's other families: the prompt, and how many models it ranks
    assert labels[family] == f"professions v3 · professions (test) · prompt=a photo of a {{profession}} · 2 models · " \
                             f"{family[:8]}"
    assert "prompt=a {profession} at work · 1 model" in labels[other]
    detail = dict(app.family_detail(board, family).values)
    assert detail["setting: prompt"] == "a photo of a {profession}" and detail["models"] == "org/clip-b, org/siglip"
    assert "setting: bootstrap" not in detail  # the intervals' settings do not make a family
    rows = app.filter_board(board, family=family, sort_by="rank", descending=False)
    assert set(rows["family"]) == {family}
    shown = app.display(rows).set_index(["metric", "model"])
    assert shown.loc[("bias_ratio", "org/siglip"), "rank"] == "1" and shown.loc[("bias_ratio", "org/clip-b"), "rank"] \
        == "2"  # |0.9 - 1| < |1.2 - 1|
    assert shown.loc[("group_rate_gap", "org/siglip"), "rank"] == "1"  # |-0.1| < |0.3|
    assert shown.loc[("accuracy", "org/siglip"), "rank"] == "" and shown.loc[("accuracy", "org/siglip"),
                                                                              "no bias at"] == ""  # a level
    assert shown.loc[("bias_ratio", "org/siglip"), "no bias at"] == "1"
    ratios = rows[rows["metric"] == "bias_ratio"]
    assert ratios["rank"].tolist() == [1.0, 2.0]  # sorted best first
    assert app.filter_board(board, family=other)["rank"].isna().all()  # alone in its family: not ranked


def test_the_leaderboard_space_reads_a_hub_dataset_fed_by_pushes(family_runs, tmp_path, monkeypatch):
    from test_push_results import REPO, StandInHub

    from vlfair.cli import main

    hub = StandInHub(tmp_path).install(monkeypatch)
    hub.add_repo(REPO, files={"runs/someone/else/results.json": b"{truncated"})
    for run in ("biased", "fair", "other"):
        assert main(["push-results", str(family_runs / run), "--repo", REPO]) == 0
    app = _load("leaderboard")
    local = app.load_board(str(family_runs))
    for source in (f"hf://datasets/{REPO}", REPO):  # a bare id, as VLFAIR_RESULTS took it before
        board = app.load_board(source)
        order = ["run", "metric", "subset"]
        pd.testing.assert_frame_equal(board.sort_values(order).reset_index(drop=True),
                                      local.sort_values(order).reset_index(drop=True))
        assert board.attrs["skipped"] == [f"hf://datasets/{REPO}/runs/someone/else/results.json: Expecting property "
                                          "name enclosed in double quotes: line 1 column 2 (char 1)"]
    assert app.hub_source(f" {REPO} ") == f"hf://datasets/{REPO}"
    source, board, problem = app.visitor_board(f" {REPO} ")
    assert problem is None and len(board) == len(local)
    assert hub.tokens[-1] is False and hub.tokens[0] is None  # a visitor reads without the Space's token
    for path in (str(family_runs), "/etc", "../runs"):  # a visitor never reads the server's files
        with pytest.raises(Exception, match="give a Hub dataset"):
            app.hub_source(path)
    _, problem = app.read_source("hf://datasets/acme/missing")
    assert "no dataset repository acme/missing" in problem


def test_the_leaderboard_space_shows_text_from_results_files_as_text(tmp_path):
    from test_push_results import BIASED, make_results, write_run

    hostile = "<img src=x onerror=alert(1)>"
    root = tmp_path / "runs"
    write_run(root / "a", make_results(hostile, {**BIASED, ("[click](javascript:alert(1))", "**x**"): 1.0}))
    write_run(root / "b", make_results("org/fine", BIASED))
    (root / "<b>broken").mkdir()
    (root / "<b>broken" / "results.json").write_text("{")
    app = _load("leaderboard")
    board = app.load_board(str(root))
    text = app.summary(board, str(root), None)
    assert "<b>" not in text and markdown_text("<b>broken/results.json") in text
    assert not re.search(r"(?<!\\)<", app.summary(board, hostile, "ValueError: <script>"))  # every tag escaped
    explained = app.explain("[click](javascript:alert(1))")
    assert "](" not in explained and markdown_text("[click](javascript:alert(1))") in explained
    around = f"../{metrics_dir().name}/bias_ratio"  # a metric name that is a path to a card: not read
    assert (metrics_dir() / around / "README.md").exists() and "bias ratio compares" not in app.explain(around)
    assert hostile in app.display(app.filter_board(board))["model"].tolist()  # a table cell: text, as it is
    figure = app.metric_chart(app.filter_board(board, metric="bias_ratio"), "bias_ratio")
    figure.canvas.draw()  # a "$" in a name would start mathtext; none here, but the labels are drawn as given
    app_blocks = app.build_app(str(root))
    tabs = [b.label for b in app_blocks.blocks.values() if type(b).__name__ == "Tab"]
    assert tabs == ["leaderboard", "compare"]  # the compare tab is there, for a paired comparison of two runs


# ---- demo Space ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def world_pool(demo_cache):
    pool = session.EncoderPool(demo_cache)
    pool.get(session.WORLD_BIASED, log=pytest.fail)  # the shipped encoder: loaded, never trained
    return pool


def _world_uploads(directory: Path, data) -> tuple[list[Path], Path]:
    """The world's rows as PNG files (lossless) and a labels CSV, as a user would upload them."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, row in enumerate(data):
        paths.append(directory / f"face-{i:03d}.png")
        row["image"].save(paths[-1])
    csv = directory / "labels.csv"
    pd.DataFrame({"file": [p.name for p in paths], "race": data["race"],
                  "gender": data["gender"]}).to_csv(csv, index=False)
    return paths, csv


def test_uploaded_images_measure_what_the_same_dataset_measures(world_pool, tmp_path):
    from vlfair.space.uploads import read_labels_csv

    data = world_data.fairface(per_cell=4)
    paths, csv = _world_uploads(tmp_path / "up", data)
    steps = []
    output = session.run_request(world_pool, "traits", session.WORLD_BIASED, session.UPLOAD,
                                 uploads=[str(p) for p in paths],
                                 labels=read_labels_csv(csv), out_dir=tmp_path / "out",
                                 progress=lambda fraction, text: steps.append(fraction))
    encoder, _ = world_pool.get(session.WORLD_BIASED)
    # as the Space runs it
    direct = run_probe("traits", encoder, data, None, cache_dir=None, settings={"per_cell": None})
    assert_metrics_close(output.results["metrics"], direct["metrics"], rtol=1e-5)
    assert steps == sorted(steps) and steps[-1] > 0.9
    assert len(output.metrics) == len(direct["metrics"]) and "f_tests" in output.tables and output.plots
    assert json.loads(output.results_path.read_text())["probe"] == "traits" and output.report_path.exists()


def test_a_sample_of_a_configured_dataset_source(world_pool, tmp_path, monkeypatch):
    """A source laid out like a Hub dataset repository, sampled per race x gender cell."""
    source = tmp_path / "fairface-repo"
    (source / "data").mkdir(parents=True)
    world_data.fairface(per_cell=6).to_parquet(source / "data" / "validation-00000-of-00001.parquet")
    monkeypatch.setenv("VLFAIR_SPACE_DATASETS",
                       json.dumps({"fairface": {"source": str(source), "split": "validation"}}))
    label = session.data_choices("traits", hub=False)[1]
    output = session.run_request(world_pool, "traits", session.WORLD_BIASED, label, per_group=3,
                                 out_dir=tmp_path / "out")
    assert output.results["dataset"]["num_rows"] == 7 * 2 * 3


def test_word_influence_only_on_the_world(world_pool, tmp_path):
    output = session.run_request(world_pool, "word-influence", session.WORLD_CONTROL, session.GENERATED,
                                 prompt="a nurse at the office", out_dir=tmp_path / "wi")
    words = {m["subset"]["word"] for m in output.results["metrics"] if m["name"] == "word_influence"}
    assert words == {"nurse", "office"}
    with pytest.raises(SpaceInputError, match="word-influence: the lexicon has no replacements for 'work'"):
        session.run_request(world_pool, "word-influence", session.WORLD_BIASED, session.GENERATED,
                            prompt="a nurse at work")
    with pytest.raises(SpaceInputError, match="runs here only on a demo world encoder"):
        session._word_influence_parts(None, session.ENCODERS["openai/clip-vit-base-patch32"], "a nurse", None)
    with pytest.raises(SpaceInputError, match="give 2 to 12"):
        session.run_request(world_pool, "word-influence", session.WORLD_BIASED, session.GENERATED, prompt="nurse")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(app):
    port = _free_port()
    app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    return f"http://127.0.0.1:{port}/"


NO_TABLE = {"headers": ["file"], "data": [[""]]}  # the label table, left empty (labels come from a CSV or not at all)


def test_demo_space_through_gradio_client(world_pool, broken_files, jpeg_paths):
    from gradio_client import Client, handle_file

    app = _load("demo").build_app(cache_dir=world_pool.cache_dir, hub=False)
    try:
        client = Client(_serve(app), verbose=False)
        summary, metrics, plots, tables, downloads = client.predict(
            "public-figures", session.WORLD_BIASED, "", session.WORLD_DATA, 10, [], None, NO_TABLE, "", api_name="/run")
        assert markdown_text("public-figures") in summary and markdown_text(session.WORLD_BIASED) in summary
        # formatted for people, with the run's verdict
        assert metrics["headers"] == ["metric", "subset", "value", "CI", "p", "bias detected"]
        assert any(row[5] for row in metrics["data"]) and all(
            row[5] in ("yes (holm)", "no (holm)", "") for row in metrics["data"])
        assert any(row[0] == "bias_ratio" for row in metrics["data"])
        assert all(row[4] != "0" for row in metrics["data"])  # a p-value never reads 0
        assert plots and all(Path(p["image"]).exists() for p in plots) and "### capability" in tables
        results = json.loads(Path(next(d for d in downloads if d.endswith("results.json"))).read_text())
        assert results["probe"] == "public-figures" and any(d.endswith("report.html") for d in downloads)
        with pytest.raises(Exception, match="notes.jpg is not an image"):
            client.predict("traits", session.WORLD_BIASED, "", session.UPLOAD, 10,
                           [handle_file(str(jpeg_paths[0])), handle_file(str(broken_files["not_image"]))], None,
                           NO_TABLE, "", api_name="/run")
        with pytest.raises(Exception, match="runs only its listed encoders"):
            client.predict("traits", session.WORLD_BIASED, "someone/model", session.WORLD_DATA, 10, [], None, NO_TABLE,
                           "", api_name="/run")
    finally:
        app.close()


# ---- metric widgets (metrics/<name>/app.py) --------------------------------------------------
def _metric_app(name: str) -> dict:
    """Execute metrics/<name>/app.py as its Space would, offline (HF_HUB_OFFLINE=1): unpatched, its
    evaluate.load("vlfair/<name>") finds the module the app installed in evaluate's modules cache."""
    return runpy.run_path(str(metrics_dir() / name / "app.py"), run_name="space_app")


@pytest.mark.parametrize("name", sorted(p.parent.name for p in metrics_dir().glob("*/app.py")))
def test_every_metric_widget_builds_and_computes_its_example(name):
    from vlfair.widget import column_kinds, example_frame, parse_inputs

    space = _metric_app(name)
    import evaluate

    module = evaluate.load(f"vlfair/{name}")
    kinds = column_kinds(module)
    columns, options = parse_inputs(example_frame(space["EXAMPLE"], kinds), kinds, json.dumps(space["OPTIONS"]))
    assert columns == space["EXAMPLE"]  # a column the example leaves empty (an optional one) is left out
    assert options == space["OPTIONS"] and space["demo"].title == f"Metric: {name}"
    assert module.compute(**columns, **options)


def test_an_optional_column_left_empty_in_the_widget_is_left_out_and_a_partly_blank_one_is_named():
    import evaluate

    from vlfair.widget import column_kinds, example_frame, parse_inputs

    _metric_app("trait_anova")
    module = evaluate.load("vlfair/trait_anova")
    kinds = column_kinds(module)
    example = {"predictions": [0.7, 0.8, 0.6, 0.5, 0.7, 0.75, 0.65, 0.55], "references": ["a", "a", "b", "b"] * 2}
    columns, _ = parse_inputs(example_frame(example, kinds), kinds, "{}")
    assert "strata" not in columns
    assert module.compute(**columns, bootstrap=0) == module.compute(**example, bootstrap=0)
    table = example_frame({**example, "strata": ["f"] * 4 + ["m", "m", "m", ""]}, kinds)
    columns, _ = parse_inputs(table, kinds, "{}")
    with pytest.raises(ValueError, match=r"trait_anova: strata is blank at row 7; a blank strata means 'left out'"):
        module.compute(**columns, bootstrap=0)


def test_metric_widget_served_computes_like_the_measure_and_names_bad_cells():
    from gradio_client import Client

    space = _metric_app("bias_ratio")
    try:
        client = Client(_serve(space["demo"]), verbose=False)
        example = space["EXAMPLE"]
        table = {"headers": ["predictions", "references"], "data": [list(r) for r in zip(*example.values())]}
        result = client.predict(table, json.dumps(space["OPTIONS"]), api_name="/compute")
        expected = measures.bias_ratio(example["predictions"], example["references"], **space["OPTIONS"])
        assert result["bias_ratio"] == pytest.approx(expected["bias_ratio"])
        assert result["bias_ratio_ci"] == pytest.approx(expected["bias_ratio_ci"])
        table["data"][1][0] = "abc"
        with pytest.raises(Exception, match="row 2, column 'predictions': 'abc' is not a number"):
            client.predict(table, "{}", api_name="/compute")
        with pytest.raises(Exception, match="options are not valid JSON"):
            client.predict({"headers": ["predictions", "references"], "data": [[1.0, "a"]]}, "{bootstrap",
                           api_name="/compute")
    finally:
        space["demo"].close()


# The watchdog repeats its exception until the work stops; a copy that lands in a garbage-collector
# callback is reported by Python as "unraisable" (and ignored there), which is expected here.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_demo_space_stops_a_request_at_its_time_limit(tmp_path, monkeypatch):
    """Without shipped encoders the request trains the world encoder (a minute): deterministically too long."""
    from gradio_client import Client

    from vlfair.demo import shipped
    from vlfair.space.limits import Limits

    monkeypatch.setattr(shipped, "SHIPPED_DIR", tmp_path / "none-shipped")
    app = _load("demo").build_app(cache_dir=tmp_path, hub=False, limits=Limits(time_limit_s=0.5))
    try:
        client = Client(_serve(app), verbose=False)
        with pytest.raises(Exception, match="ran past this Space's time limit of 0.5 s"):
            client.predict("professions", session.WORLD_BIASED, "", session.WORLD_DATA, 10, [], None, NO_TABLE, "",
                           api_name="/run")
        assert not list(tmp_path.glob("demo/encoder-*/model.safetensors")), "training went on to the end"
    finally:
        app.close()


def test_a_progress_bar_made_before_the_demo_space_tracks_tqdm_still_closes():
    """The demo Space's run tracks tqdm (gr.Progress(track_tqdm=True)); Gradio's patch reads an
    attribute that only bars made after it have, so a bar made earlier raised when closed. In a fresh
    process: in this one an earlier test may have patched tqdm already."""
    import subprocess
    import sys

    code = ("import importlib.util, sys\nfrom tqdm.auto import tqdm\nearly = tqdm(total=2, disable=True)\n"
            "spec = importlib.util.spec_from_file_location('demo_app', sys.argv[1])\n"
            "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
            "from gradio.helpers import patch_tqdm\npatch_tqdm()\nearly.close()\nprint('closed')")
    done = subprocess.run([sys.executable, "-c", code, str(SPACES / "demo" / "app.py")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.split()[-1] == "closed", done.stderr[-2000:]


def test_retrieval_runs_on_a_space_sample_with_k_below_its_images(world_pool, tmp_path, monkeypatch):
    """The Space offers the retrieval probe: a world encoder measures the world's words with a k a
    fifth of the images; a Hub sample of 42 images gets k = 8 (the YAML's 1000 would be refused)."""
    assert "retrieval" in session.probe_choices(hub=False)
    output = session.run_request(world_pool, "retrieval", session.WORLD_BIASED, session.WORLD_DATA,
                                 out_dir=tmp_path / "world")
    assert output.results["probe_settings"]["k"] == 280 // 5 and output.results["probe_settings"]["concepts"] == [
        "smart", "dumb"]
    white = next(m for m in output.results["metrics"] if m["name"] == "skew" and m["subset"].get("concept") == "smart"
                 and m["subset"]["group"] == "White")
    assert white["ci"][0] > 0  # the planted smart -> White, found in the Space too
    source = tmp_path / "fairface-repo"
    (source / "data").mkdir(parents=True)
    world_data.fairface(per_cell=6).to_parquet(source / "data" / "validation-00000-of-00001.parquet")
    monkeypatch.setenv("VLFAIR_SPACE_DATASETS",
                       json.dumps({"fairface": {"source": str(source), "split": "validation"}}))
    label = session.data_choices("retrieval", hub=False)[1]
    settings, _ = session._retrieval_parts(None, session.ENCODERS["openai/clip-vit-base-patch32"], "",
                                           world_data.fairface(per_cell=3))
    assert settings == {"k": 42 // 5}  # DVL's prompts for a real model, k clamped
    output = session.run_request(world_pool, "retrieval", session.WORLD_CONTROL, label, per_group=3,
                                 out_dir=tmp_path / "sample")
    assert output.results["dataset"]["num_rows"] == 42 and output.results["probe_settings"]["k"] == 8


def test_the_demo_space_runs_the_world_s_answerers_through_the_probes(world_pool, tmp_path):
    """The Space offers the world's generative answerers (shipped: loaded, never trained): the biased
    one shows the planted doctor and nurse biases through professions and smart -> White through
    traits; a generative Hub model id is accepted as lvlm:owner/name where other ids are."""
    choices = session.encoder_choices(hub=False)
    assert session.WORLD_BIASED_ANSWERER in choices and session.WORLD_CONTROL_ANSWERER in choices
    assert "HuggingFaceTB/SmolVLM-256M-Instruct (generative)" not in choices  # a Hub model: offline, not offered
    world_pool.get(session.WORLD_BIASED_ANSWERER, log=pytest.fail)
    output = session.run_request(world_pool, "professions", session.WORLD_BIASED_ANSWERER, session.WORLD_DATA,
                                 out_dir=tmp_path / "professions")
    assert output.results["model"]["kind"] == "generative" and output.results["probe_settings"]["score"] == "likelihood"
    means = {(m["subset"]["profession"], m["subset"]["group"]): m["value"] for m in output.results["metrics"]
             if m["name"] == "mean_answer_likelihood" and m["subset"]["attribute"] == "gender"}
    assert (means[("doctor", "Male")] > means[("doctor", "Female")]
            and means[("nurse", "Female")] > means[("nurse", "Male")])
    traits = session.run_request(world_pool, "traits", session.WORLD_BIASED_ANSWERER, session.WORLD_DATA,
                                 out_dir=tmp_path / "traits")
    assert any(m["name"] == "trait_anova" and m["p_value"] < 1e-6 for m in traits.results["metrics"])
    spec, choice = session.EncoderPool._resolve("", "lvlm:HuggingFaceTB/SmolVLM-256M-Instruct", allow_other=True)
    assert spec == "lvlm:HuggingFaceTB/SmolVLM-256M-Instruct" and choice.needs_hub
    with pytest.raises(SpaceInputError, match="lvlm:owner/name"):
        session.EncoderPool._resolve("", "lvlm:/etc/passwd", allow_other=True)
