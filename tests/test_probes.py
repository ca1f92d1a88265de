"""The four study probes end to end through the CLI, checked against the measures themselves."""

from __future__ import annotations

import gc
import json
import re
import warnings
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
import yaml

import vlfair
from vlfair import measures
from vlfair.cli import main
from vlfair.data import balanced_sample
from vlfair.explain import gradcam
from vlfair.measures import ties
from vlfair.probes import ProbeError, measure_probe, run_probe
from vlfair.report.leaderboard import read_results, read_table, tidy
from vlfair.report.results import family_problem, results_schema
from vlfair.testing import assert_same_numbers, comparable_results, recorded_numbers

# The probes embed all prompts in one batch, the references one by one: batched float32 matmuls
# round differently (~1e-7 on cosines, x100 in CLIPScore), hence a relative tolerance of 1e-5.
REL = 1e-5

FAST = ["--set", "bootstrap=200", "--set", "seed=1"]
RUNS = {
    "professions": ("professions", "synthetic:professions", [*FAST, "--set", "n_permutations=500"]),
    "traits": ("traits", "synthetic:fairface", [*FAST, "--per-cell", "6"]),  # adults, 6 drawn per race x gender
    "multilingual-multi30k": ("multilingual", "synthetic:multi30k", FAST),
    "multilingual-fairface": ("multilingual", "synthetic:fairface", FAST),
    "public-figures": ("public-figures", "synthetic:pfi", [*FAST, "--set", "seed=2"]),
    "retrieval": ("retrieval", "synthetic:fairface", [*FAST, "--set", "k=20"]),  # DVL's 319 prompts
}


def _live_figures() -> int:
    from matplotlib.figure import Figure

    gc.collect()
    return sum(type(thing) is Figure for thing in gc.get_objects())  # type(): isinstance wakes lazy modules


# The runs in two halves, each a loop of probe runs in one process (as a Space, the demo or a loop over models
# runs them) with its figures watched: a test waits for the half it reads, not for every probe (no setup
# over 30 s on 2 cores); the figure tests check each half
HALVES = {"studies": ["professions", "traits", "multilingual-multi30k", "multilingual-fairface"],
          "rankings": ["public-figures", "retrieval"]}
HALF_OF = {key: half for half, keys in HALVES.items() for key in keys}
FIXTURE_OF = {"studies": "study_runs", "rankings": "ranking_runs"}  # each half's module fixture, below


def _watched_runs(keys: list[str], clip_dir: Path, base: Path, cache: Path, drop_one: bool) -> dict:
    """The probes of ``keys`` through the CLI in this one process, and with ``drop_one`` one more measured
    and dropped unwritten; what their figures did is kept in ``figures``: how many were made, the
    warnings, the figures alive before and after, and for the first PNG of each kind written (the figures
    of one name's variants, heatmap_race and heatmap_gender, are drawn by one function) whether it was
    cropped to the box of matplotlib's own tight crop."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from vlfair.report import pages, writer

    figures: dict = {"drawn": 0, "crops": [], "kinds": set()}

    def counted(self, *args, _made=Figure.__init__, **kwargs):
        figures["drawn"] += 1
        _made(self, *args, **kwargs)

    def compared(figure, target, dpi, _save=pages.save_png):
        kind = Path(target).stem.split("_")[0]
        if kind in figures["kinds"]:
            return _save(figure, target, dpi)
        figures["kinds"].add(kind)
        ours = pages.tight_box(figure, dpi).extents
        _save(figure, target, dpi)
        # what savefig(bbox_inches="tight") crops to: the box after a drawing pass with the drawing off
        shown_at, figure.dpi = figure.dpi, dpi
        figure.draw_without_rendering()
        theirs = figure.get_tightbbox().padded(plt.rcParams["savefig.pad_inches"]).extents
        figure.dpi = shown_at
        figures["crops"].append((Path(target).name, np.allclose(ours, theirs, rtol=0, atol=1e-9)))

    outputs = {}
    figures["before"] = _live_figures()
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as caught:
        patch.setattr(Figure, "__init__", counted)
        patch.setattr(writer, "save_png", compared)
        warnings.simplefilter("always")
        for key in keys:
            probe, dataset, extra = RUNS[key]
            out = base / key
            argv = ["run", probe, "--model", str(clip_dir), "--dataset", dataset, "--out", str(out), "--dtype",
                    "float32", "--cache-dir", str(cache), *extra]
            assert main(argv) == 0
            outputs[key] = out
        if drop_one:
            encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
            dropped = measure_probe("traits", encoder, "synthetic:fairface", cache_dir=cache,
                                    settings={"bootstrap": 20, "per_cell": 4})
            assert dropped.output.figures  # drawn, never written
            del dropped, encoder
    figures["after"], figures["pyplot"] = _live_figures(), plt.get_fignums()
    figures["warnings"] = [str(w.message) for w in caught]
    return outputs | {"figures": figures}


@pytest.fixture(scope="module")
def runs_cache(tmp_path_factory) -> Path:
    """The embedding cache of both halves (three runs embed the same synthetic FairFace images)."""
    return tmp_path_factory.mktemp("probe-runs-cache")


@pytest.fixture(scope="module")
def study_runs(clip_dir, tmp_path_factory, runs_cache):
    return _watched_runs(HALVES["studies"], clip_dir, tmp_path_factory.mktemp("study-runs"), runs_cache, drop_one=True)


@pytest.fixture(scope="module")
def ranking_runs(clip_dir, tmp_path_factory, runs_cache):
    return _watched_runs(HALVES["rankings"], clip_dir, tmp_path_factory.mktemp("ranking-runs"), runs_cache,
                         drop_one=False)


class _Runs:
    """``runs[key]``: the folder of one of :data:`RUNS`, its half run when a test first reads it."""

    def __init__(self, request):
        self._request = request

    def __getitem__(self, key: str) -> Path:
        return self._request.getfixturevalue(FIXTURE_OF[HALF_OF[key]])[key]


@pytest.fixture
def runs(request) -> _Runs:
    return _Runs(request)


@pytest.mark.parametrize("half", sorted(HALVES))
def test_probe_runs_in_one_process_leave_no_figure_and_no_warning(request, half):
    """A Space, the demo or a loop over models runs probe after probe in one process: each run's
    figures go once written (or once its results are dropped), and matplotlib never warns that
    too many figures are open, however many were drawn."""
    import matplotlib.pyplot as plt

    figures = request.getfixturevalue(FIXTURE_OF[half])["figures"]
    if half == "studies":  # more than pyplot keeps open unwarned
        assert figures["drawn"] > plt.rcParams["figure.max_open_warning"]
    assert figures["pyplot"] == []  # pyplot's registry never saw them
    assert figures["after"] == figures["before"]  # and none is kept alive: memory stays flat
    assert figures["warnings"] == []


@pytest.mark.parametrize("half", sorted(HALVES))
def test_every_kind_of_png_a_probe_writes_is_cropped_as_matplotlib_crops_it(request, half):
    """save_png measures the tight box without matplotlib's extra drawing pass: the same box (so the
    same pixels: test_figures' test_a_png_has_the_pixels_of_matplotlib_s_tight_crop) for every kind of
    figure the probes draw (mosaics, heatmaps, overlays with colour bars, histograms, scatters, bars
    with legends, forests)."""
    figures = request.getfixturevalue(FIXTURE_OF[half])["figures"]
    kinds = {Path(name).stem.split("_")[0] for name, _ in figures["crops"]}
    expected = {"studies": {"median", "heatmap", "gradcam", "confidence", "ratio", "gap", "accuracy", "age"},
                "rankings": {"bias", "capability", "retention", "max", "skew"}}[half]
    assert expected <= kinds, kinds
    assert [name for name, same in figures["crops"] if not same] == []


@pytest.mark.parametrize("key", sorted(RUNS))
def test_probe_writes_valid_results_and_a_readable_report(runs, key):
    out = runs[key]
    results = json.loads((out / "results.json").read_text())
    jsonschema.validate(results, results_schema(), format_checker=jsonschema.FormatChecker())
    assert results["probe"] == RUNS[key][0] and results["metrics"]
    assert results["dataset"]["name"] == RUNS[key][1] and results["model"]["dtype"] == "float32"
    assert family_problem(results) is None and results["family_key"]["settings"]  # a board ranks it in its family
    pngs, tables = list(out.glob("*.png")), list(out.glob("*.csv"))
    assert pngs and tables and all((t.with_suffix(".md")).exists() for t in tables)
    report = (out / "report.html").read_text()
    assert report.count("data:image/png;base64,") == len(pngs) and "<table" in report  # self-contained
    assert "src='http" not in report and 'src="http' not in report


def test_a_run_without_figures_measures_the_same_and_its_report_says_why(runs, clip_dir, tmp_path):
    """``vlfair run --no-figures`` (a sweep that needs the numbers): the same results and tables, no plot."""
    from vlfair.cli import NOT_DRAWN

    probe, dataset, extra = RUNS["traits"]
    out = tmp_path / "numbers-only"
    assert main(["run", probe, "--model", str(clip_dir), "--dataset", dataset, "--out", str(out), "--dtype", "float32",
                 "--cache-dir", str(tmp_path / "cache"), "--no-figures", *extra]) == 0
    drawn = runs["traits"]
    assert not list(out.glob("*.png")) and list(drawn.glob("*.png"))
    assert sorted(p.name for p in out.glob("*.csv")) == sorted(p.name for p in drawn.glob("*.csv"))
    report = (out / "report.html").read_text()
    assert "data:image/png" not in report and NOT_DRAWN in report
    assert_same_numbers(comparable_results(json.loads((out / "results.json").read_text())),
                        comparable_results(json.loads((drawn / "results.json").read_text())), "traits")


def test_probes_measure_the_test_data_as_they_did_before_the_plugin_refactor(runs):
    """Issue 26's refactor changes structure, not numbers (tests/data/numbers/runs.json: recorded before
    it, and again where issue 62 made near-equal scores ties). Every run, the zero-shot and ranking ones
    included: a best candidate or a ranking on a random tiny model's nearly equal scores is decided by
    the tie rule (vlfair.measures.ties), not by which scores a CPU's kernel rounded higher, so its
    numbers are the same on every machine (continuous ones within float32's resolution). Retrieval's are
    recorded on the demo world's trained encoders (tests/test_demo.py): the random tiny model's cosines of
    FairFace's images lie so close together that its chains of near-ties split differently under torch's
    avx2 and avx512 kernels (measured: a MaxSkew bound 1.6 % apart), which is the model's noise, not a rule's."""
    keys = sorted(set(RUNS) - {"retrieval"})
    actual = {key: comparable_results(json.loads((runs[key] / "results.json").read_text())) for key in keys}
    recorded = recorded_numbers(Path(__file__).parent / "data" / "numbers" / "runs.json", actual)
    assert sorted(recorded) == keys
    for key, expected in recorded.items():
        assert_same_numbers(actual[key], expected, key)


def _embeddings(clip_dir, dataset):
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    return encoder, vlfair.embed_images(encoder, dataset, cache_dir=None)


def _metric(results, name, **subset):
    return next(m for m in results["metrics"] if m["name"] == name and m["subset"] == subset)


def test_professions_numbers_equal_the_measure(runs, clip_dir):
    results = json.loads((runs["professions"] / "results.json").read_text())
    data = vlfair.load_dataset("synthetic:professions")
    encoder, images = _embeddings(clip_dir, data)
    text = vlfair.embed_texts(encoder, ["A photo of a nurse"], cache_dir=None)[0]
    mask = np.array(data["profession"]) == "nurse"
    scores = np.maximum(100 * images[mask] @ text, 0)
    direct = measures.group_score_gap(scores, np.array(data["race"])[mask], bootstrap=200, seed=1, n_permutations=500)
    metric = _metric(results, "group_score_gap", profession="nurse", attribute="race")
    assert (metric["value"] == pytest.approx(rel=REL, expected=direct["max_gap"])
            and metric["ci"] == pytest.approx(rel=REL, expected=direct["max_gap_ci"]))
    assert (metric["p_value"] == pytest.approx(rel=REL, expected=direct["p_value"])
            and metric["details"]["top_group"] == direct["top_group"])
    gaps = pd.read_csv(runs["professions"] / "gaps_by_race.csv", index_col=0)
    assert gaps.loc["nurse", "most associated"] == direct["top_group"]
    # the study's Table 1 layout: a row per race, a column per profession (alphabetical, as printed)
    table = pd.read_csv(runs["professions"] / "clipscore_by_race.csv", index_col=0)
    assert list(table.index) == ["Asian", "Black", "Latin American", "White"]
    assert list(table.columns) == sorted(table.columns, key=str.lower) and len(table.columns) == 12
    for race, mean in direct["group_means"].items():
        assert table.loc[race, "nurse"] == pytest.approx(mean, rel=REL)
        assert _metric(results, "mean_clipscore", profession="nurse", attribute="race", group=race)["value"] == \
            pytest.approx(mean, rel=REL)


def test_traits_numbers_equal_the_measure_and_temperature_is_recorded(runs, clip_dir):
    results = json.loads((runs["traits"] / "results.json").read_text())
    data = balanced_sample(vlfair.load_dataset("synthetic:fairface", subset="adults"), 6, seed=1)  # what the run drew
    encoder, images = _embeddings(clip_dir, data)
    text = vlfair.embed_texts(encoder, ["a happy person", "a sad person"], cache_dir=None)
    confidence = 1 / (1 + np.exp(-encoder.logit_scale * images @ (text[0] - text[1])))
    direct = measures.trait_anova(confidence, data["race"], strata=data["gender"], bootstrap=200, seed=1)
    metric = _metric(results, "trait_anova", trait="happy/sad", gender="Female")
    assert metric["value"] == pytest.approx(rel=REL, expected=direct["f_statistic"]["Female"])
    assert metric["p_value"] == pytest.approx(rel=REL, expected=direct["p_value"]["Female"])
    cell = _metric(results, "trait_confidence", trait="happy/sad", race="Indian", gender="Male")
    assert cell["value"] == pytest.approx(rel=REL, expected=direct["group_means"]["Male"]["Indian"])
    assert results["settings"]["temperature"] == pytest.approx(encoder.logit_scale)
    assert results["settings"]["temperature_source"] == "logit_scale"
    f_tests = pd.read_csv(runs["traits"] / "f_tests.csv")
    assert len(f_tests) == 6 * (2 + 7)  # per pair: across races within 2 genders, across genders within 7 races
    # the study's degrees of freedom with N per cell: (6, 7N - 7) across races, (1, 2N - 2) across genders
    assert (metric["details"]["df_between"], metric["details"]["df_within"]) == (6, 7 * 6 - 7)
    across_genders = _metric(results, "trait_anova", trait="happy/sad", race="Indian")["details"]
    assert (across_genders["df_between"], across_genders["df_within"]) == (1, 2 * 6 - 2)
    sampling = results["settings"]["sampling"]
    assert sampling["per_cell"] == 6 and sampling["seed"] == 1 and sampling["short_cells"] == []
    assert all(n == 6 for cells in sampling["cell_counts"].values() for n in cells.values())
    assert sum(len(cells) for cells in sampling["cell_counts"].values()) == 14 and sampling["rows"] == 84


def test_traits_literal_temperature(clip_dir, tmp_path):
    results = run_probe("traits", vlfair.load_encoder(str(clip_dir), dtype="float32"), "synthetic:fairface", tmp_path,
                        cache_dir=None, settings={"temperature": 1, "bootstrap": 0, "gradcam": None, "per_cell": None})
    assert results["settings"]["temperature"] == 1.0 and results["settings"]["temperature_source"] == "settings"
    data = vlfair.load_dataset("synthetic:fairface", subset="adults")  # a dataset spec is read as its adults
    encoder, images = _embeddings(clip_dir, data)
    text = vlfair.embed_texts(encoder, ["a smart person", "a dumb person"], cache_dir=None)
    logits = np.stack([images @ text[0], images @ text[1]], axis=1)  # tau = 1: the literal formula
    literal = np.exp(logits[:, 0]) / np.exp(logits).sum(axis=1)
    cell = (np.array(data["race"]) == "White") & (np.array(data["gender"]) == "Female")
    metric = _metric(results, "trait_confidence", trait="smart/dumb", race="White", gender="Female")
    assert metric["value"] == pytest.approx(literal[cell].mean(), rel=REL)


# Typed from the study text (001): "six pairs of opposing traits: smart vs. dumb, happy vs. sad,
# hardworking vs. lazy, nice vs. mean, dominant vs. agentic, and honest vs. dishonest"; Figure 2:
# "Random sample of Indian men ... with a high predicted confidence (> 66%) of being smart", five images.
STUDY_TRAIT_PAIRS = [["smart", "dumb"], ["happy", "sad"], ["hardworking", "lazy"], ["nice", "mean"],
                     ["dominant", "agentic"], ["honest", "dishonest"]]


def test_traits_defaults_follow_the_study_text():
    from vlfair.probes import probe_class

    settings = probe_class("traits")().settings
    assert [list(pair) for pair in settings.pairs] == STUDY_TRAIT_PAIRS and settings.prompt == "a {trait} person"
    assert settings.gradcam is not None and settings.gradcam.model_dump() == {
        "pair": "smart/dumb", "group": {"race": "Indian", "gender": "Male"}, "k": 5, "min_confidence": 0.66}
    assert settings.version >= 4 and settings.per_cell == 2000 and settings.allow_short is False
    assert probe_class("traits")().default_subsets("fairface") == ["adults"]
    assert not any("submissive" in note for note in settings.notes)
    assert any("dominant vs. agentic" in note for note in settings.notes)
    assert any("(as opposed to silly)" in note for note in settings.notes)
    assert any("four positive traits" in note for note in settings.notes)  # the text's contradiction, quoted


def test_traits_gradcam_draws_random_images_above_the_threshold(clip_dir, tmp_path):
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    data = vlfair.load_dataset("synthetic:fairface")
    images = vlfair.embed_images(encoder, data, cache_dir=None)
    text = vlfair.embed_texts(encoder, ["a smart person", "a dumb person"], cache_dir=None)
    confidence = 1 / (1 + np.exp(-encoder.logit_scale * (images @ (text[0] - text[1]))))
    group = (np.array(data["race"]) == "Indian") & (np.array(data["gender"]) == "Male")
    threshold = float(np.median(confidence[group]))
    eligible = set(np.flatnonzero(group & (confidence > threshold)).tolist())
    spec = {"pair": "smart/dumb", "group": {"race": "Indian", "gender": "Male"}, "k": 3, "min_confidence": threshold}
    chosen = []
    for run in ("a", "b"):
        results = run_probe("traits", encoder, data, tmp_path / run, cache_dir=None,
                            settings={"bootstrap": 0, "pairs": [["smart", "dumb"]], "gradcam": spec, "per_cell": None})
        table = pd.read_csv(tmp_path / run / "gradcam.csv")
        assert len(table) == 3 and set(table["row"]) <= eligible, (table, eligible)
        np.testing.assert_allclose(table["confidence"], confidence[table["row"]], rtol=1e-4)
        # no warning but that its synthetic cells are small (the run says so of its F-tests)
        assert (tmp_path / run / "gradcam.png").exists() and [
            w for w in results["warnings"] if "have a group of fewer than 20 images" not in w] == []
        chosen.append(list(table["row"]))
    assert chosen[0] == chosen[1]  # seeded
    results = run_probe("traits", encoder, data, tmp_path / "none", cache_dir=None,
                        settings={"bootstrap": 0, "pairs": [["smart", "dumb"]], "per_cell": None,
                                  "gradcam": spec | {"min_confidence": float(confidence[group].max())}})
    assert any("0 image(s) of race=Indian, gender=Male have a confidence in 'smart' above" in w
               for w in results["warnings"])
    assert not (tmp_path / "none" / "gradcam.png").exists()


def _prepared_fairface(directory: Path) -> Path:
    """A `vlfair prepare`-style directory with a train and a validation split (synthetic rows)."""
    from vlfair.data.build import Built, write_prepared

    faces = vlfair.load_dataset("synthetic:fairface")
    halves = {"train": faces.select(range(0, faces.num_rows, 2)),
              "validation": faces.select(range(1, faces.num_rows, 2))}
    return write_prepared(Built("fairface", {"default": halves}, [], "synthetic:fairface"), directory)


def test_traits_samples_per_cell_and_stops_on_short_cells(clip_dir, tmp_path, capsys):
    prepared = _prepared_fairface(tmp_path / "fairface")
    common = ["run", "traits", "--model", str(clip_dir), "--dataset", str(prepared), "--dtype", "float32",
              "--cache-dir", str(tmp_path / "cache"), "--set", "bootstrap=0", "--set", "gradcam=null"]
    adults = vlfair.load_dataset("fairface", source=prepared, subset="adults", split="train+validation")
    sizes = {}
    for race, gender in zip(adults["race"], adults["gender"]):
        sizes[(race, gender)] = sizes.get((race, gender), 0) + 1
    smallest = min(sizes.values())
    # both splits together, drawn per cell
    assert main([*common, "--split", "train+validation", "--per-cell", str(smallest),
                 "--out", str(tmp_path / "ok")]) == 0
    sampling = json.loads((tmp_path / "ok" / "results.json").read_text())["settings"]["sampling"]
    assert sampling["of_rows"] == adults.num_rows and sampling["rows"] == 14 * smallest
    # one split alone is short: every short cell is named with its size
    train = vlfair.load_dataset("fairface", source=prepared, subset="adults", split="train")
    train_sizes = {}
    for race, gender in zip(train["race"], train["gender"]):
        train_sizes[(race, gender)] = train_sizes.get((race, gender), 0) + 1
    asked = max(train_sizes.values())
    short = {cell: n for cell, n in train_sizes.items() if n < asked}
    assert main([*common, "--split", "train", "--per-cell", str(asked), "--out", str(tmp_path / "short")]) == 2
    message = capsys.readouterr().err
    assert f"{len(short)} race x gender cell(s) have fewer than {asked} rows" in message and "--allow-short" in message
    for (race, gender), n in short.items():
        assert f"{race}/{gender}: {n}" in message
    # --allow-short takes every row of the short cells (both splits: every cell has the 2 rows a mean needs)
    most = max(sizes.values()) + 1
    assert main([*common, "--split", "train+validation", "--per-cell", str(most), "--allow-short", "--out",
                 str(tmp_path / "al")]) == 0
    results = json.loads((tmp_path / "al" / "results.json").read_text())
    assert len(results["settings"]["sampling"]["short_cells"]) == len(sizes) and results["metrics"]
    # with one split, a cell of one row leaves its strata's F-tests out, each named with the cell; the others stand
    lonely = {cell for cell, n in train_sizes.items() if n < 2}
    if lonely:
        assert main([*common, "--split", "train", "--per-cell", str(asked), "--allow-short", "--out",
                     str(tmp_path / "one")]) == 0
        one = json.loads((tmp_path / "one" / "results.json").read_text())
        tested = {(within, m["subset"][within]) for m in one["metrics"] if m["name"] == "trait_anova"
                  for within in ("gender", "race") if within in m["subset"]}
        for race, gender in lonely:
            assert ("gender", gender) not in tested and ("race", race) not in tested
            assert any(f"within gender {gender}: group with fewer than 2 samples: '{race}' (1)" in w
                       for w in one["warnings"])
        assert tested
    assert any(w.startswith("cells with fewer than the asked rows") for w in results["warnings"])
    with pytest.raises(ProbeError, match=r"traits: setting per_cell = 0: Input should be greater than or equal to 1"):
        run_probe("traits", vlfair.load_encoder(str(clip_dir), dtype="float32"), adults, None, cache_dir=None,
                  settings={"per_cell": 0})
    with pytest.raises(SystemExit):  # a traits option is not a professions option
        main(["run", "professions", "--model", str(clip_dir), "--dataset", "synthetic:professions", "--per-cell", "3"])


def test_multilingual_numbers_equal_the_measures(runs, clip_dir):
    results = json.loads((runs["multilingual-multi30k"] / "results.json").read_text())
    data = vlfair.load_dataset("synthetic:multi30k", subset="independent")
    first = data.select([i for i, index in enumerate(data["caption_index"]) if index == 1])  # the study's pair
    assert first.num_rows < data.num_rows
    encoder, images = _embeddings(clip_dir, first)
    a = vlfair.embed_texts(encoder, first["en"], normalize=False, cache_dir=None)
    b = vlfair.embed_texts(encoder, first["de"], normalize=False, cache_dir=None)
    direct = measures.individual_fairness(images, a, b)
    metric = _metric(results, "individual_fairness", portion="independent", languages="en-de")
    assert metric["value"] == pytest.approx(rel=REL, expected=direct["epsilon"]) and metric["details"]["bound_holds"]
    assert metric["details"]["num_pairs"] == first.num_rows
    distance = _metric(results, "text_distance", portion="independent", languages="en-de")
    assert distance["value"] == pytest.approx(np.linalg.norm(a - b, axis=1).mean(), rel=REL)
    assert distance["ci"][0] <= distance["value"] <= distance["ci"][1]
    assert {m["subset"]["portion"] for m in results["metrics"] if m["name"] == "individual_fairness"} == {
        "translation", "independent"}
    assert results["settings"]["pairs"] == {"independent": first.num_rows, "translation": first.num_rows}
    assert results["dataset"]["num_rows"] == 2 * first.num_rows  # what was measured: one pair per image and portion
    accuracy = _metric(results, "retrieval_accuracy", portion="independent", direction="image_to_text", language="de")
    normalized = b / np.linalg.norm(b, axis=1, keepdims=True)
    # the tiny model's German captions embed alike: ties count 1/ties (an argmax's result was the kernel's)
    similarity = images @ normalized.T
    assert accuracy["value"] == pytest.approx(float(ties.best_credit(similarity, np.eye(len(b), dtype=bool)).mean()))
    # the tiny model reads several German captions as one text (its tokenizer's unknown tokens): an image whose
    # best caption is one of them counts 1/ties, where an argmax took whichever a kernel rounded highest
    assert (ties.best_ties(similarity).sum(axis=1) > 1).any()
    zero_shot = json.loads((runs["multilingual-fairface"] / "results.json").read_text())
    languages = {m["subset"]["language"] for m in zero_shot["metrics"] if m["name"] == "accuracy"}
    assert languages == {"en", "de", "fr", "es", "ru", "tr", "ja", "zh"}
    gap = _metric(zero_shot, "cross_lingual_gap", task="gender")
    accuracies = gap["details"]["accuracy"]
    assert gap["value"] == pytest.approx(max(accuracies.values()) - min(accuracies.values()))
    assert any(m["name"] == "group_rate_gap" and m["subset"] == {"task": "gender", "groups": "race", "language": "ja"}
               for m in zero_shot["metrics"])


def test_multilingual_gender_gaps_within_races_as_the_study(clip_dir, tmp_path):
    """Eq. 5 within each race per language, and the amplification relative to English (Table 1)."""
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    data = vlfair.load_dataset("synthetic:fairface")
    results = run_probe("multilingual", encoder, data, tmp_path, cache_dir=None, settings={"bootstrap": 200, "seed": 3})
    from vlfair.probes import probe_class

    prompts = probe_class("multilingual")().settings.prompt_sets["study"]["gender"]
    images = vlfair.embed_images(encoder, data, cache_dir=None)
    black = np.array(data["race"]) == "Black"
    gaps = {}
    for lang in ("en", "tr"):
        text = vlfair.embed_texts(encoder, [prompts["Male"][lang], prompts["Female"][lang]], cache_dir=None)
        scores = images[black] @ text.T
        # the tiny model reads both Turkish prompts as one text (unknown tokens): every image ties, and each tie
        # counts 1/2 (vlfair.measures.ties), where an argmax said "Male" for all of them (a gap of 1, by rounding)
        # (one text to its tokenizer, yet not always one bit pattern: a batch's rows may take different kernels)
        assert ties.best_ties(scores).all(axis=1).all() == (lang == "tr")
        truth = np.array(data["gender"])[black]
        correct = ties.best_credit(scores, np.array(["Male", "Female"])[None, :] == truth[:, None])
        accuracy = {g: correct[truth == g].mean() for g in ("Female", "Male")}
        gaps[lang] = {"gap": max(accuracy.values()) - min(accuracy.values()), "accuracy": accuracy}
        metric = _metric(results, "group_rate_gap", task="gender", groups="gender", race="Black", language=lang)
        assert metric["value"] == pytest.approx(gaps[lang]["gap"])
        if lang == "en":  # no tie: the study's argmax, and the measure's interval on its predictions
            predicted = np.array(["Male", "Female"])[scores.argmax(axis=1)]
            direct = measures.group_rate_gap(predicted, truth, truth, bootstrap=200, seed=3)
            assert (metric["value"] == pytest.approx(direct["gap"]) and metric["ci"] == pytest.approx(direct["gap_ci"]))
        female = _metric(results, "accuracy", task="gender", language=lang, gender="Female", race="Black")
        assert female["value"] == pytest.approx(gaps[lang]["accuracy"]["Female"])
    assert gaps["tr"] == {"gap": 0.0, "accuracy": {"Female": 0.5, "Male": 0.5}}
    amplification = _metric(results, "gap_amplification", task="gender", groups="gender", race="Black", language="tr",
                            pivot="en")
    assert amplification["value"] == pytest.approx(gaps["tr"]["gap"] - gaps["en"]["gap"])
    assert amplification["ci"][0] <= amplification["value"] <= amplification["ci"][1]
    table = pd.read_csv(tmp_path / "gender_gap_by_race.csv", index_col=0)
    assert table.loc["Black", "tr"] == pytest.approx(gaps["tr"]["accuracy"]["Female"] - gaps["tr"]["accuracy"]["Male"])
    assert any(m["name"] == "group_rate_gap" and m["subset"] == {"task": "age_group", "groups": "gender",
                                                                   "age_group": "20-49", "language": "ja"}
               for m in results["metrics"])


def test_public_figures_numbers_equal_the_measures(runs, clip_dir):
    results = json.loads((runs["public-figures"] / "results.json").read_text())
    data = vlfair.load_dataset("synthetic:pfi")
    encoder, images = _embeddings(clip_dir, data)
    classes = ["scientist", "politician", "athlete", "teacher", "receptionist", "assistant", "salesperson"]
    text = vlfair.embed_texts(encoder, [f"This is a photo of a {c}" for c in classes], cache_dir=None)
    politicians = np.isin(data["category"], ["senator", "representative", "mayor"])
    probability = encoder.probabilities(images[politicians], text)[:, 1]
    direct = measures.bias_ratio(probability, np.array(data["gender"])[politicians], "Female", "Male",
                                 bootstrap=200, seed=2)
    metric = _metric(results, "bias_ratio", folder="politicians", **{"class": "politician"})
    assert (metric["value"] == pytest.approx(rel=REL, expected=direct["bias_ratio"])
            and metric["ci"] == pytest.approx(rel=REL, expected=direct["bias_ratio_ci"]))
    names = sorted(set(np.array(data["name"])[np.array(data["category"]) == "actor"]))
    name_text = vlfair.embed_texts(encoder, [f"This is a picture of {n}" for n in names], cache_dir=None)
    actors = np.array(data["category"]) == "actor"
    refs = np.array([names.index(n) for n in np.array(data["name"])[actors]])
    direct_retention = measures.retention(images[actors] @ name_text.T, refs, bootstrap=0)
    assert _metric(results, "retention_text_score", folder="actor")["value"] == direct_retention["text_score"]
    assert _metric(results, "retention_image_score", folder="actor")["value"] == direct_retention["image_score"]
    # the study's Table 1 cells: mean softmax x100 of every class per gender (rows sum to 100)
    genders = np.array(data["gender"])[politicians]
    probabilities = encoder.probabilities(images[politicians], text)
    table = pd.read_csv(runs["public-figures"] / "capability_politicians_level2.csv", index_col=[0, 1])
    for gender in ("Female", "Male"):
        expected = 100 * probabilities[genders == gender].mean(axis=0)
        assert table.loc[("politicians", gender)].to_numpy() == pytest.approx(expected, rel=REL)
        assert table.loc[("politicians", gender)].sum() == pytest.approx(100)
        cell = _metric(results, "class_score", folder="politicians", level=2, gender=gender,
                       **{"class": "receptionist"})
        assert cell["value"] == pytest.approx(expected[classes.index("receptionist")], rel=REL)
        assert cell["ci"][0] <= cell["value"] <= cell["ci"][1]
    assert list(table.columns) == classes


def test_gradcam_maps(clip_dir, siglip_dir):
    data = vlfair.load_dataset("synthetic:fairface", size=6)
    pictures = [data[i]["image"] for i in range(6)]
    for directory, grid in ((clip_dir, 4), (siglip_dir, 3)):
        encoder = vlfair.load_encoder(str(directory), dtype="float32")
        smart = vlfair.embed_texts(encoder, ["a smart person", "a dumb person"], cache_dir=None)
        happy = vlfair.embed_texts(encoder, ["a happy person", "a sad person"], cache_dir=None)
        maps, upsampled = gradcam(encoder, pictures, smart[0], smart[1])
        other, _ = gradcam(encoder, pictures, happy[0], happy[1])
        assert maps.shape == (6, grid, grid) and upsampled.shape == (6, *encoder.preprocessing.output_hw)
        assert (maps >= 0).all() and maps.max() > 0 and (upsampled >= -1e-6).all()
        assert not np.allclose(maps, other)


def test_leaderboard_round_trips_and_card_results(runs, tmp_path, capsys):
    from vlfair.compare.tiers import TIER_COLUMNS, add_tiers
    from vlfair.report.leaderboard import read_board

    paths = [runs[k] for k in sorted(RUNS)]
    frame = tidy(read_results(paths))
    assert len(frame) == sum(len(json.loads((p / "results.json").read_text())["metrics"]) for p in paths)
    board = read_board(paths)
    expected = add_tiers(board, board.attrs["paths"])  # what the command writes: the board with its tiers
    pd.testing.assert_frame_equal(expected.drop(columns=list(TIER_COLUMNS)), frame, check_dtype=False)
    for suffix in (".parquet", ".csv"):
        out = tmp_path / f"board{suffix}"
        assert main(["leaderboard", *map(str, paths), "--out", str(out)]) == 0
        back = read_table(out)
        pd.testing.assert_frame_equal(back.reset_index(drop=True), expected.reset_index(drop=True), check_dtype=False)
    capsys.readouterr()
    assert main(["card-results", str(runs["traits"])]) == 0
    card = yaml.safe_load(capsys.readouterr().out)
    metrics = card["model-index"][0]["results"][0]["metrics"]
    assert any(m["type"] == "trait_anova" for m in metrics)


def test_bad_input(clip_dir, tmp_path):
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    faces = vlfair.load_dataset("synthetic:fairface", size=40)
    with pytest.raises(ProbeError, match=r"probe 'traits' needs columns \['race'\]"):
        run_probe("traits", encoder, faces.remove_columns("race"), tmp_path, cache_dir=None)
    with pytest.raises(ProbeError, match=r"traits: setting 'temprature' is not a settings key of this probe; keys: "
                                         r"\['prompt', 'pairs', 'temperature'"):
        run_probe("traits", encoder, faces, tmp_path, cache_dir=None, settings={"temprature": 1})
    with pytest.raises(ProbeError, match="runs on \\['professions'\\] data, not 'fairface'"):
        run_probe("professions", encoder, "synthetic:fairface", tmp_path, cache_dir=None)
    original = type(encoder).encode_pixels
    try:
        type(encoder).encode_pixels = lambda self, batch, normalize=True: original(self, batch, normalize)[:, :8]
        with pytest.raises(ProbeError, match="embeds images into 8 dims but texts into 16"):
            run_probe("professions", encoder, "synthetic:professions", tmp_path, cache_dir=None)
    finally:
        type(encoder).encode_pixels = original


def test_small_groups_are_reported_not_averaged(clip_dir, tmp_path):
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    faces = vlfair.load_dataset("synthetic:fairface")
    keep = [i for i, (r, g) in enumerate(zip(faces["race"], faces["gender"])) if not (r == "Black" and g == "Female")]
    lonely = [i for i, (r, g) in enumerate(zip(faces["race"], faces["gender"])) if r == "Black" and g == "Female"][:1]
    results = run_probe("traits", encoder, faces.select(sorted(keep + lonely)), tmp_path, cache_dir=None,
                        settings={"bootstrap": 0, "gradcam": None, "pairs": [["smart", "dumb"]], "per_cell": None})
    assert any(re.search(r"fewer than 2 samples: 'Black' \(1\)", w) for w in results["warnings"])
    assert not any(m["name"] == "trait_anova" and m["subset"].get("gender") == "Female" for m in results["metrics"])
    assert json.loads((tmp_path / "results.json").read_text())["warnings"] == results["warnings"]


def test_limit(clip_dir, tmp_path):
    assert main(["run", "public-figures", "--model", str(clip_dir), "--dataset", "synthetic:pfi", "--limit", "12",
                 "--out", str(tmp_path), "--set", "bootstrap=0", "--dtype", "float32"]) == 0
    assert json.loads((tmp_path / "results.json").read_text())["dataset"]["num_rows"] == 12


def test_a_probe_registered_first_does_not_hide_the_builtin_ones(monkeypatch):
    from vlfair.probes import registry as probes
    from vlfair.probes.base import Probe

    monkeypatch.setattr(probes, "PROBES", probes.PROBES.copy())  # Custom leaves with the test

    class Custom(Probe):
        name, settings_file = "custom", "traits.yaml"

        def run(self, ctx, schema):
            raise NotImplementedError

    probes.register(Custom)
    # the studies in their order, then the others by name
    assert probes.probe_names() == ["professions", "traits", "word-influence", "multilingual", "public-figures",
                                    "custom", "retrieval"]
    assert probes.probe_class("traits").schemas == ("fairface",) and probes.probe_class("custom") is Custom
    with pytest.raises(probes.ProbeError, match="unknown probe 'nope'"):
        probes.probe_class("nope")


def test_jsonable_turns_numpy_values_and_non_finite_numbers_into_plain_json():
    from vlfair.report.results import jsonable

    value = {"a": np.array([[1.5, np.nan], [2.0, np.inf]]), "b": np.float32(0.25), 3: (np.int64(4), "x")}
    assert jsonable(value) == {"a": [[1.5, None], [2.0, None]], "b": 0.25, "3": [4, "x"]}
    assert json.dumps(jsonable(value), allow_nan=False)
