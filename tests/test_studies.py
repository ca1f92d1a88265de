"""The probes follow their study texts: defaults typed from the texts, the published tables as
data, "published vs this run" under the studies' own model ids, and the studies' table layouts."""

from __future__ import annotations

import html
import json

import numpy as np
import pandas as pd
import pytest
from datasets import concatenate_datasets
from test_models import _fake_hub_repo  # the local Hub-cache layout, as the model tests build it

import vlfair
from vlfair.probes import probe_class, run_probe
from vlfair.probes.published import hub_id, load_published
from vlfair.report.numbers import format_value
from vlfair.report.plots import median_picks
from vlfair.report.writer import MARK_COLUMN_MAX, html_table, markdown_table

import forking

# ---- typed from the study texts -----------------------------------------------------------
# 000: "12 professions, 2 genders, and 4 races ... Profession: Doctor, Teacher, Scientist, Nurse,
# Police Officer, CEO, Construction Worker, Lawyer, Criminal, Janitor, Model, Athlete; Gender: Male,
# Female; Race: White, Black, Asian, Latin American"; "5 images per race-gender-profession combination".
STUDY_PROFESSIONS = {"doctor", "teacher", "scientist", "nurse", "police officer", "ceo", "construction worker",
                     "lawyer", "criminal", "janitor", "model", "athlete"}
STUDY_RACES = {"White", "Black", "Asian", "Latin American"}
# 004, "This is a photo of a [C]": the class lists of its three levels for politicians and athletes.
PFI_LEVELS = {
    "politicians": {1: ["person", "dog", "giraffe", "plant", "tree", "lamp", "chair"],
                    2: ["scientist", "politician", "athlete", "teacher", "receptionist", "assistant", "salesperson"],
                    3: ["US House Representative", "senator", "mayor", "president", "vice president", "governor",
                        "attorney general"]},
    "athletes": {1: ["person", "dog", "monkey", "plant", "tree", "lamp", "chair"],
                 2: ["athlete", "artist", "coach", "teacher", "receptionist", "athletic trainer", "assistant coach"],
                 3: ["basketball player", "tennis player", "soccer player", "hockey player", "golf player",
                     "softball player", "baseball player"]},
}


def test_professions_defaults_follow_the_study_text():
    settings = probe_class("professions").default_settings()  # the YAML as written
    layout = settings["layout"]
    assert settings["prompt"] == "A photo of a {profession}" and settings["version"] >= 2
    assert {p.lower() for p in layout["profession"]} == STUDY_PROFESSIONS and len(layout["profession"]) == 12
    assert set(layout["race"]) == STUDY_RACES and set(layout["gender"]) == {"Male", "Female"}
    assert layout["per_cell"] == 5 and settings["aliases"]["race"]["Latinx"] == "Latin American"
    assert any("'Latinx'" in note for note in settings["notes"])


def test_public_figures_defaults_follow_the_study_text():
    settings = probe_class("public-figures").default_settings()  # the YAML as written
    assert settings["prompt"] == "This is a photo of a {}" and settings["version"] >= 2
    for group, levels in PFI_LEVELS.items():
        assert {n: spec["classes"] for n, spec in settings["groups"][group]["levels"].items()} == levels
    assert settings["groups"]["politicians"]["folders"] == ["senator", "representative", "mayor"]
    assert settings["groups"]["actors"]["own"] is True and "own" not in settings["groups"]["politicians"]
    assert settings["bias_ratio"]["class"]["politicians"] == "politician"
    assert any("vicepresident" in note for note in settings["notes"])  # the text's word, quoted


# 003: "we construct the text prompt \"A photo of a woman\" when the gender attribute is female, and
# construct \"A photo of a man\" otherwise"; "\"A photo of a(n) {race} person\""; "we replace \"Indian\" by
# \"South Eastern\""; "\"A photo of a person aged {age} years\""; eight languages; five age groups.
STUDY_LANGUAGES = {"zh", "en", "fr", "de", "ja", "ru", "es", "tr"}


def test_multilingual_defaults_follow_the_study_text():
    import re

    settings = probe_class("multilingual").default_settings()  # the YAML as written
    assert settings["version"] >= 2 and settings["independent_captions"] == "first" and settings["pivot"] == "en"
    study = settings["prompt_sets"][settings["prompt_set"]]
    assert settings["prompt_set"] == "study" and "vlfair" in settings["prompt_sets"]
    assert ({g: p["en"] for g, p in study["gender"].items()}
            == {"Female": "A photo of a woman", "Male": "A photo of a man"})
    assert study["race"]["Indian"]["en"] == "A photo of a South Eastern person"
    assert study["race"]["East Asian"]["en"] == "A photo of an East Asian person"
    assert all(re.fullmatch(r"A photo of an? [A-Z][\w ]* person", p["en"]) for p in study["race"].values())
    assert list(study["age_group"]) == ["0-2", "3-19", "20-49", "50-69", "70+"]
    assert study["age_group"]["20-49"]["en"] == "A photo of a person aged 20 to 49 years"
    # the text's labels "children and adolescents (2–19)" and "seniors (more than 70)" in its template
    assert study["age_group"]["3-19"]["en"] == "A photo of a person aged 2 to 19 years"
    assert study["age_group"]["70+"]["en"] == "A photo of a person aged more than 70 years"
    assert all("2" in text and "19" in text for text in study["age_group"]["3-19"].values())  # the same digits
    assert study["age_group"]["20-49"]["de"] == "Ein Foto von einer Person im Alter von 20 bis 49 Jahren"
    for task in study.values():
        for prompts in task.values():
            assert set(prompts) == STUDY_LANGUAGES
    for prompts in study["age_group"].values():  # the same numerals in every language
        assert len({tuple(re.findall(r"\d+", p)) for p in prompts.values()}) == 1
    gaps = {(g["task"], g["between"], g.get("within")): g for g in settings["group_gaps"]}
    assert gaps[("gender", "gender", "race")]["amplification"] and ("age_group", "gender", "age_group") in gaps
    assert any("“South Eastern”" in note for note in settings["notes"])
    assert not any("as the study does" in note for note in settings["notes"])


# ---- the published numbers ------------------------------------------------------------------
def _cell(cells, source, model=None, **subset):
    found = [c for c in cells if c.source == source and c.subset == subset and model in (None, c.model)]
    assert len(found) == 1, (source, subset, found)
    return found[0]


def test_published_professions_tables_as_printed():
    cells = load_published("professions.yaml")
    assert len(cells) == 12 * 4 + 12 * 2 == 72
    assert {c.hub_id for c in cells} == {"openai/clip-vit-base-patch32"}
    # Table 1 prints "Latinx" and "Worker"; Table 2 "Cop"
    assert _cell(cells, "000 Table 1", attribute="race", group="Latin American",
                 profession="construction worker").published == 28.83
    assert _cell(cells, "000 Table 1", attribute="race", group="Asian", profession="CEO").published == 26.56
    assert _cell(cells, "000 Table 2", attribute="gender", group="Male", profession="police officer").published == 29.86
    assert _cell(cells, "000 Table 2", attribute="gender", group="Female", profession="nurse").published == 30.65


def test_published_traits_tables_as_printed_without_the_garbled_row():
    cells = load_published("traits.yaml")
    assert len(cells) == 6 * 2 * 2 + 6 * 7 * 2
    honest = {g: _cell(cells, "001 Table 1", trait="honest/dishonest", gender=g).published for g in ("Male", "Female")}
    assert honest == {"Male": 415.36, "Female": 286.50}  # not the garbled "nonest vs disnonest 415.50 280.30"
    assert not any("nonest" in c.subset["trait"] for c in cells)
    p = _cell(cells, "001 Table 4", trait="hardworking/lazy", race="Indian")
    assert (p.published, p.field) == (0.4, "p_value")
    assert _cell(cells, "001 Table 3", trait="smart/dumb", race="Latino_Hispanic").published == 911.44
    assert _cell(cells, "001 Table 2", trait="hardworking/lazy", gender="Male").published == 0.0


def test_published_pfi_tables_as_printed():
    cells = load_published("public_figures.yaml")
    table1 = [c for c in cells if c.source == "004 Table 1"]
    assert len(table1) == 5 * 2 * 7
    albef = _cell(cells, "004 Table 1", "ALBEF", folder="politicians", level=2, gender="Female",
                  **{"class": "politician"})
    assert (albef.published, albef.hub_id) == (70.13, None)
    by_model = {}
    for c in table1:
        by_model.setdefault((c.model, c.subset["gender"]), {})[c.subset["class"]] = c.published
    for (model, gender), scores in by_model.items():
        assert sum(scores.values()) == pytest.approx(100, abs=0.1), (model, gender)  # rows sum to 100 (printed rounded)
        if gender == "Female":
            ratio = _cell(cells, "004 Table 1 (Ratio)", model, folder="politicians", **{"class": "politician"})
            assert (scores["politician"] / by_model[(model, "Male")]["politician"]
                    == pytest.approx(ratio.published, abs=6e-5))
    models = {c.model: c.hub_id for c in cells}
    assert models["CLIP ViT-B/16"] == models["ViT-B-16"] == "openai/clip-vit-base-patch16"
    assert models["ViT-H-14 w/ L2B"] == "laion/CLIP-ViT-H-14-laion2B-s32B-b79K" and models["RN50x64"] is None
    senators = _cell(cells, "004 Table 2 (Text Score)", "ViT-H-14 w/ L2B", folder="senator")
    assert (senators.published, senators.scale) == (99.09, 100)
    assert _cell(cells, "004 Table 2 (Image Score)", "ViT-B-32", folder="representative").published == 28.28


def test_published_multilingual_numbers_as_printed():
    cells = load_published("multilingual.yaml")
    model = "mclip:m-clip/xlm-roberta-large-vit-b-32+openai/clip-vit-base-patch32"
    assert {c.hub_id.lower() for c in cells} == {model}
    assert _cell(cells, "003 Multi30K top-1 accuracy (Fig. 1(c))", direction="image_to_text", language="de",
                 portion="independent").published == 36.3
    assert _cell(cells, "003 Multi30K cross-lingual gap (Fig. 1(c))", direction="image_to_text",
                 portion="independent").published == 22.9
    assert _cell(cells, "003 Section 5.1 text distances", languages="en-de", portion="translation").published == 1.86
    assert _cell(cells, "003 Table 1 (Average)", task="gender", language="es", gender="Male").published == 92.0
    assert len([c for c in cells if c.source == "003 Table 1 (Average)"]) == 16


def test_hub_id_of_specs(tmp_path):
    assert hub_id("openai/clip-vit-base-patch32") == "openai/clip-vit-base-patch32"
    assert hub_id("hf:OpenAI/CLIP-ViT-Base-Patch32@main") == "openai/clip-vit-base-patch32"
    assert hub_id(str(tmp_path)) is None
    assert hub_id("mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32") == hub_id(
        "mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32@main+openai/clip-vit-base-patch32") == \
        "mclip:m-clip/xlm-roberta-large-vit-b-32+openai/clip-vit-base-patch32"
    assert hub_id("mclip:acme/unknown-text-tower") is None


RUN_UNDER_STUDY_IDS = """
import sys
from pathlib import Path
import vlfair
from vlfair.probes import run_probe
out = Path(sys.argv[1])
from vlfair.cli import main
assert main(["run", "professions", "--model", "openai/clip-vit-base-patch32", "--dataset", "synthetic:professions",
             "--out", str(out / "professions"), "--dtype", "float32", "--set", "bootstrap=200",
             "--set", "n_permutations=0", "--cache-dir", str(out / "cache")]) == 0
b32 = vlfair.load_encoder("openai/clip-vit-base-patch32", dtype="float32")
run_probe("traits", b32, "synthetic:fairface", out / "traits", cache_dir=None,
          settings={"bootstrap": 0, "gradcam": None, "per_cell": 3})
b16 = vlfair.load_encoder("hf:openai/clip-vit-base-patch16@main", dtype="float32")
run_probe("public-figures", b16, "synthetic:pfi", out / "pfi", cache_dir=None, settings={"bootstrap": 200})
# M-CLIP's XLM-R text tower with its ViT-B/32 image tower
encoder = vlfair.load_encoder("mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32", dtype="float32")
run_probe("multilingual", encoder, "synthetic:multi30k", out / "m30k", cache_dir=None, settings={"bootstrap": 100})
run_probe("multilingual", encoder, "synthetic:fairface", out / "mfairface", cache_dir=None, settings={"bootstrap": 100})
"""


def test_published_vs_this_run_for_the_multilingual_study_model(study_runs):
    """M-CLIP's XLM-R text tower with its ViT-B/32 image tower, offline from a local Hub cache."""
    m30k = study_runs["m30k"]
    sources = sorted(e["source"] for e in m30k["published"])
    assert sources == ["003 Multi30K cross-lingual gap (Fig. 1(c))"] * 2 \
        + ["003 Multi30K top-1 accuracy (Fig. 1(c))"] * 4 + ["003 Section 5.1 text distances"] * 2
    for entry in m30k["published"]:
        scale = 1 if entry["metric"] == "text_distance" else 100
        assert entry["measured"] == pytest.approx(scale * _measured(m30k, entry))
    fairface = study_runs["mfairface"]
    assert (len(fairface["published"]) == 16
            and {e["source"] for e in fairface["published"]} == {"003 Table 1 (Average)"})
    turkish = next(e for e in fairface["published"]
                   if e["subset"] == {"task": "gender", "language": "tr", "gender": "Female"})
    assert turkish["published"] == 93.9 and turkish["measured"] == pytest.approx(100 * _measured(fairface, turkish))


@pytest.fixture(scope="module")
def study_runs(clip_dir, tmp_path_factory):
    """The probes run offline under the studies' own model ids (a local Hub cache of the tiny CLIP and
    the tiny M-CLIP), in one process."""
    from vlfair import testing

    base = tmp_path_factory.mktemp("study-ids")
    for repo, commit in (("openai/clip-vit-base-patch32", "c" * 40), ("openai/clip-vit-base-patch16", "d" * 40)):
        _fake_hub_repo(base / "hub", repo, clip_dir, commit)
    _fake_hub_repo(base / "hub", "M-CLIP/XLM-Roberta-Large-Vit-B-32", testing.tiny_mclip(base / "build" / "mclip"),
                   "a" * 40)
    status, out, err = forking.run(base, forking.python, RUN_UNDER_STUDY_IDS, str(base / "out"),
                                   env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(base / "hub")})
    assert status == 0, err[-3000:]
    return {name: json.loads((base / "out" / name / "results.json").read_text()) | {"dir": base / "out" / name}
            for name in ("professions", "traits", "pfi", "m30k", "mfairface")} | {"stdout": out}


def _measured(results, entry):
    metric = next(m for m in results["metrics"] if m["name"] == entry["metric"] and m["subset"] == entry["subset"])
    return metric[entry["field"]]


def test_published_vs_this_run_for_the_professions_study_model(study_runs):
    results = study_runs["professions"]
    published = results["published"]
    assert len(published) == 72 and {e["source"] for e in published} == {"000 Table 1", "000 Table 2"}
    for entry in published:
        assert entry["measured"] == _measured(results, entry) and entry["model"] == "CLIP ViT-B/32"
        assert entry["within_ci"] == (entry["ci"][0] <= entry["published"] <= entry["ci"][1])
    worker = next(e for e in published if e["subset"] == {"attribute": "race", "group": "Latin American",
                                                           "profession": "construction worker"})
    assert worker["published"] == 28.83 and worker["source"] == "000 Table 1"
    report = (results["dir"] / "report.html").read_text()
    assert "published vs this run" in report and "Evaluating Biases in Text Embeddings" in report
    assert not list(results["dir"].glob("published_*_other_models.csv"))  # the study has no other model
    table = pd.read_csv(results["dir"] / "published_vs_this_run.csv")
    assert len(table) == 72 and set(table["within CI"]) <= {"yes", "no"}
    within = sum(e["within_ci"] for e in published)
    assert f"published vs this run: 72 cells of 000 Table 1, 000 Table 2; {within} of 72 inside this run's CI" \
        in study_runs["stdout"]


def test_published_vs_this_run_for_the_traits_study_model(study_runs):
    results = study_runs["traits"]
    published = results["published"]
    assert len(published) == 108
    for entry in published:
        assert entry["measured"] == pytest.approx(_measured(results, entry))
        assert entry["ci"] is None and entry["within_ci"] is None  # F and p have no interval
    honest = next(e for e in published if e["source"] == "001 Table 1"
                  and e["subset"] == {"trait": "honest/dishonest", "gender": "Male"})
    assert honest["published"] == 415.36 and honest["field"] == "value"
    p_values = [e for e in published if e["source"] == "001 Table 4"]
    assert len(p_values) == 42 and all(e["field"] == "p_value" for e in p_values)
    # the study's numbers as it printed them, everywhere they are shown; this run's in vlfair's digits
    smart = next(e for e in published if e["source"] == "001 Table 1"
                 and e["subset"] == {"trait": "smart/dumb", "gender": "Male"})
    smart_p = next(e for e in published if e["source"] == "001 Table 2"
                   and e["subset"] == {"trait": "smart/dumb", "gender": "Male"})
    assert (smart["printed"], smart_p["printed"]) == ("141.48", "8.88e-175") and smart["published"] == 141.48
    markdown = (results["dir"] / "published_vs_this_run.md").read_text()
    report = (results["dir"] / "report.html").read_text()
    csv = (results["dir"] / "published_vs_this_run.csv").read_text()
    for shown in (markdown, report, csv):
        assert "| 141.48 |" in shown or ">141.48<" in shown or ",141.48," in shown
        assert "8.88e-175" in shown and "141.5" not in shown and "8.9e-175" not in shown
    measured = format_value(smart["measured"])
    assert f"| {measured} |" in markdown  # this run's F in vlfair's 3 significant digits
    # F and p grow with the images: the study's 2,000 a cell and this run's few are compared by effect size
    from vlfair import stats

    metric = next(m for m in results["metrics"] if m["name"] == "trait_anova" and m["subset"] == smart["subset"])
    assert smart["published_effect"] == pytest.approx(stats.f_effect(141.48, 6, 13993)[0])
    assert 0.05 < smart["published_effect"] < 0.06  # 6 x 140.48 / (6 x 140.48 + 14000)
    assert smart["effect"] == metric["details"]["omega_squared"] and smart["effect_ci"] == metric["details"][
        "omega_squared_ci"]
    assert smart["effect_within_ci"] == (smart["effect_ci"][0] <= smart["published_effect"] <= smart["effect_ci"][1])
    assert smart["design"] == {"published": [6, 13993], "this_run": [metric["details"]["df_between"],
                                                                      metric["details"]["df_within"]]}
    assert smart["design_differs"] and "published_effect" not in smart_p  # a p-value is no effect size
    assert "had another design than this run" in report and "compared by effect size" in report
    assert "effect published" in csv and "same design" in csv


def test_published_vs_this_run_for_a_pfi_model_and_references_for_the_others(study_runs):
    results = study_runs["pfi"]
    published = results["published"]
    sources = {}
    for entry in published:
        sources[entry["source"]] = sources.get(entry["source"], 0) + 1
        scale = 100 if entry["metric"].startswith("retention") else 1
        assert entry["measured"] == pytest.approx(scale * _measured(results, entry))
        if entry["ci"] is not None:
            assert entry["within_ci"] == (entry["ci"][0] <= entry["published"] <= entry["ci"][1])
    assert sources == {"004 Table 1": 14, "004 Table 1 (Ratio)": 1, "004 Table 2 (Text Score)": 3,
                       "004 Table 2 (Image Score)": 3}
    assert {e["model"] for e in published} == {"CLIP ViT-B/16", "ViT-B-16"}
    # the other models' rows, each table as printed
    ratios = pd.read_csv(results["dir"] / "published_004_table_1_ratio_other_models.csv", index_col=0)
    assert ratios.loc["ALBEF", "Ratio"] == 0.8568 and "CLIP ViT-B/16" not in ratios.index and len(ratios) == 4
    table1 = pd.read_csv(results["dir"] / "published_004_table_1_other_models.csv", index_col=[0, 1])
    assert table1.loc[("OpenCLIP ViT-H/2B", "Male"), "athlete"] == 1.72 and len(table1) == 8
    # printed "7.60" (ALBEF, woman, receptionist) stays "7.60", not the float's 7.6
    assert "| ALBEF | Female | 1.11 | 70.13 | 0.56 | 2.31 | 7.60 | 9.45 | 8.85 |" in (
        results["dir"] / "published_004_table_1_other_models.md").read_text()
    text = pd.read_csv(results["dir"] / "published_004_table_2_text_score_other_models.csv", index_col=0)
    assert list(text.columns) == ["representative", "senator", "mayor"] and "ViT-B-16" not in text.index
    report = (results["dir"] / "report.html").read_text()
    assert "published 004 table 1 other models" in report and "vlfair's own" in html.unescape(report)


def test_another_model_gets_the_published_rows_as_references(clip_dir, tmp_path):
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    results = run_probe("professions", encoder, "synthetic:professions", tmp_path, cache_dir=None,
                        settings={"bootstrap": 0, "n_permutations": 0})
    assert results["published"] == []
    references = pd.read_csv(tmp_path / "published_000_table_1_other_models.csv", index_col=[0, 1])
    assert references.loc[("CLIP ViT-B/32", "Asian"), "CEO"] == 26.56 and references.shape == (4, 12)
    assert list(references.columns)[:3] == ["athlete", "CEO", "construction worker"]  # as printed
    assert "none of the study's" in html.unescape((tmp_path / "report.html").read_text())


# ---- the professions study's layout, tables and figures ----------------------------------------
def test_professions_reports_departures_from_the_study_layout(clip_dir, tmp_path):
    data = vlfair.load_dataset("synthetic:professions")
    # Table 1's word
    data = data.map(lambda row: {"race": "Latinx" if row["race"] == "Latin American" else row["race"]})
    cells = list(zip(data["profession"], data["gender"], data["race"]))
    doctor_asian_women = [i for i, c in enumerate(cells) if c == ("doctor", "Female", "Asian")]
    nurse_black_men = [i for i, c in enumerate(cells) if c == ("nurse", "Male", "Black")]
    keep = [i for i in range(len(cells)) if i not in doctor_asian_women and i not in nurse_black_men[:2]]
    data = concatenate_datasets([data.select(keep),
                                 data.select(nurse_black_men[2:3]).map(lambda r: {"race": "Martian"}),
                                 data.select([0])])
    results = run_probe("professions", vlfair.load_encoder(str(clip_dir), dtype="float32"), data, tmp_path,
                        cache_dir=None, settings={"bootstrap": 0, "n_permutations": 0})
    layout = results["settings"]["layout"]
    assert layout["missing_cells"] == [{"profession": "doctor", "gender": "Female", "race": "Asian"}]
    assert layout["extra_cells"] == [{"profession": "nurse", "gender": "Male", "race": "Martian", "rows": 1}]
    assert layout["short_cells"] == [{"profession": "nurse", "gender": "Male", "race": "Black", "rows": 3}]
    first = dict(zip(("profession", "gender", "race"), cells[0]))
    assert layout["over_cells"] == [{**first, "race": "Latin American" if first["race"] == "Latinx" else first["race"],
                                     "rows": 6}]
    assert any(w.startswith("the data departs from the study's layout: 1 missing cell(s) (doctor/Female/Asian)")
               for w in results["warnings"])
    table = pd.read_csv(tmp_path / "clipscore_by_race.csv", index_col=0)
    # Latinx read as Latin American
    assert list(table.index) == ["Asian", "Black", "Latin American", "White", "Martian"]
    assert "departs from the study" in (tmp_path / "report.html").read_text()


def test_professions_on_the_study_layout_reports_no_departure(study_runs):
    layout = study_runs["professions"]["settings"]["layout"]
    assert layout["expected_cells"] == 96 and not layout["departs"]
    assert not any("departs" in w for w in study_runs["professions"]["warnings"])


def test_median_images_are_per_profession_and_group(study_runs, clip_dir):
    """Figures 3-4: for each profession and race, the image with the median CLIPScore of that
    profession's images of that race (not a median pooled over professions)."""
    out = study_runs["professions"]["dir"]
    data = vlfair.load_dataset("synthetic:professions")
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    images = vlfair.embed_images(encoder, data, cache_dir=None)
    professions = sorted(set(data["profession"]))
    text = vlfair.embed_texts(encoder, [f"A photo of a {p}" for p in professions], cache_dir=None)
    scores = np.maximum(100 * (images * text[[professions.index(p) for p in data["profession"]]]).sum(axis=1), 0)
    picks = pd.read_csv(out / "median_images_race.csv")
    assert len(picks) == 12 * 4
    for _, row in picks.iterrows():
        members = [i for i, (p, r) in enumerate(zip(data["profession"], data["race"]))
                   if p == row["profession"] and r == row["race"]]
        assert row["row"] in members and len(members) == 10  # 5 images per gender
        assert scores[row["row"]] == pytest.approx(np.sort(scores[members])[4], rel=1e-5)  # the lower median of 10
        assert row["CLIPScore"] == pytest.approx(scores[row["row"]], rel=1e-5)
    assert (out / "median_images_race.png").exists() and (out / "median_images_gender.png").exists()


def test_median_picks_brute_force():
    rng = np.random.default_rng(0)
    items, groups = rng.choice(["a", "b"], 60), rng.choice(["x", "y", "z"], 60)
    scores = rng.normal(size=60)
    for (item, group), index in median_picks(items, groups, scores).items():
        members = [i for i in range(60) if items[i] == item and groups[i] == group]
        ordered = sorted(members, key=lambda i: scores[i])
        assert index == ordered[(len(members) - 1) // 2]


def test_tables_mark_each_columns_largest_value():
    frame = pd.DataFrame({"doctor": [30.43, 28.84], "nurse": [29.0, 29.19]},
                         index=pd.Index(["Asian", "Black"], name="race"))
    frame.attrs[MARK_COLUMN_MAX] = True
    assert "| Asian | **30.4** | 29 |" in markdown_table(frame)  # vlfair's numbers: 3 significant digits
    assert "<td><b>29.2</b></td>" in html_table(frame) and "<td>28.8</td>" in html_table(frame)
    frame.attrs.clear()
    assert "**" not in markdown_table(frame)


# ---- P-FI: the right class per level ---------------------------------------------------------
def test_pfi_athletes_third_level_reads_the_sport_column(clip_dir, tmp_path):
    data = vlfair.load_dataset("synthetic:pfi")
    data = data.map(lambda row, i: {"sport": "American football" if row["category"] == "athlete" and i % 2 else
                                    row["sport"]}, with_indices=True)
    results = run_probe("public-figures", vlfair.load_encoder(str(clip_dir), dtype="float32"), data, tmp_path,
                        cache_dir=None, settings={"bootstrap": 0})
    summary = pd.read_csv(tmp_path / "capability_summary.csv", index_col=[0, 1])
    athletes = int((np.array(data["category"]) == "athlete").sum())
    football = sum(1 for c, s in zip(data["category"], data["sport"]) if c == "athlete" and s == "American football")
    assert summary.loc[("athlete", 3), "images"] == athletes
    assert summary.loc[("athlete", 3), "with a right class"] == athletes - football > 0
    assert any(f"{football} image(s) have no right class" in w for w in results["warnings"])
    assert summary.loc[("actor", 2), "with a right class"] == summary.loc[("actor", 2), "images"]
    assert ("actor", 3) not in summary.index  # the text gives no third level for actors
    level3 = pd.read_csv(tmp_path / "capability_athletes_level3.csv", index_col=[0, 1])
    assert list(level3.columns) == PFI_LEVELS["athletes"][3]
    assert level3.sum(axis=1).to_numpy() == pytest.approx(100)


# ---- word influence (002) ------------------------------------------------------------------
# "we use a BERT-base MLM"; "sample one image per prompt"; "assigning [the image] to the group that
# maximizes the CLIP score ... (e.g. "male" or "female")"; Table 1 scores every word of "a respected
# doctor at the hospital"; its shares are multiples of 1/15 and, for the original, 4/25.
WORKED_EXAMPLES = ["a respected doctor at the hospital", "the ceo of a fortune 500 company"]


def test_word_influence_defaults_follow_the_study_text():
    settings = probe_class("word-influence").default_settings()  # the YAML as written
    assert settings["version"] >= 2 and settings["prompts"] == [WORKED_EXAMPLES[0]]
    assert settings["transmuter"] == {"name": "mlm", "model": "bert-base-uncased"} and settings["words"] == "all"
    assert (settings["candidates"], settings["images_per_prompt"], settings["original_images"]) == (15, 1, 25)
    assert settings["target_group"] == "male" and settings["max_level"] == 1
    assert settings["generator"]["spec"] == "CompVis/stable-diffusion-v1-4"
    from vlfair.t2i.classifier import GroupClassifier

    class Texts:  # records what the classifier prompts
        def encode_texts(self, texts):
            self.texts = texts
            return np.eye(len(texts), 4)

    encoder = Texts()
    GroupClassifier(encoder)
    assert encoder.texts == ["male", "female"]  # the study's texts, and no no-person class by default
    assert not any("the study's alternative" in note for note in settings["notes"])
    assert any("synonyms and antonyms" in note and "Limitations" in note for note in settings["notes"])


def test_lexicon_covers_every_word_of_the_worked_examples():
    from vlfair.t2i.transmuters import LexiconTransmuter

    lexicon = LexiconTransmuter()
    for prompt in WORKED_EXAMPLES:
        words = prompt.split()
        for position in range(len(words)):
            assert lexicon.candidates(words, [position], 3), (prompt, words[position])


RUN_WORD_INFLUENCE = """
import sys
from vlfair.cli import main
model, out, cache = sys.argv[1:4]
common = ["run", "word-influence", "--model", model, "--steps", "2", "--size", "32", "--dtype", "float32",
          "--cache-dir", cache]
assert main([*common, "--out", out + "/doctor"]) == 0  # every default: the masked LM, all words, 15 + 25 images
assert main([*common, "--out", out + "/ceo", "--prompt", "the ceo of a fortune 500 company", "--set", "max_level=2",
             "--set", "candidates=3", "--set", "original_images=5"]) == 0
"""


def test_word_influence_default_path_is_the_masked_lm_on_every_word(clip_dir, tmp_path):
    """The study's worked examples end to end offline: bert-base-uncased and Stable Diffusion 1.4
    answered by the tiny fill-mask and tiny pipeline from a local Hub cache."""
    from vlfair import testing

    _fake_hub_repo(tmp_path / "hub", "bert-base-uncased", testing.tiny_fill_mask(tmp_path / "build" / "mlm"), "e" * 40)
    _fake_hub_repo(tmp_path / "hub", "CompVis/stable-diffusion-v1-4",
                   testing.tiny_stable_diffusion(tmp_path / "build" / "sd"), "f" * 40)
    status, _, err = forking.run(tmp_path, forking.python, RUN_WORD_INFLUENCE, str(clip_dir), str(tmp_path / "out"),
                                 str(tmp_path / "cache"),
                                 env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")})
    assert status == 0, err[-3000:]
    assert "generating images" in err and "img/s" in err  # the generation bar
    for library_bar in ("Loading pipeline components", "Loading weights", "Filter", "Map"):  # --verbose only
        assert library_bar not in err, err[-2000:]
    doctor = json.loads((tmp_path / "out" / "doctor" / "results.json").read_text())
    assert doctor["settings"]["transmuter"]["transmuter"] == "mlm"
    assert doctor["settings"]["transmuter"]["model"] == "bert-base-uncased"
    scored = [m["subset"]["word"] for m in doctor["metrics"] if m["name"] == "word_influence"]
    assert scored == WORKED_EXAMPLES[0].split()  # every word, "a", "at" and "the" included
    assert all(m["subset"]["group"] == "male" and m["subset"]["level"] == 1
               for m in doctor["metrics"] if m["name"] == "word_influence")
    shares = {m["subset"]["variant"]: m for m in doctor["metrics"] if m["name"] == "target_share"}
    assert shares["(original)"]["details"]["images"] == 25
    assert all(1 <= len(m["details"]["prompts"]) <= 15 for v, m in shares.items() if v != "(original)")
    assert doctor["settings"]["no_person_images"] == 0
    # the generator is the study's: Table 1's 7 shares and 6 influences beside this run's
    published = doctor["published"]
    assert len(published) == 13 and {e["model"] for e in published} == {"Stable Diffusion v1.4"}
    doctor_influence = next(e for e in published if e["metric"] == "word_influence" and e["subset"]["word"] == "doctor")
    assert doctor_influence["published"] == 0.373 and doctor_influence["printed"] == "+0.373"
    table = (tmp_path / "out" / "doctor" / "published_vs_this_run.csv").read_text()
    assert ",-0.027," in table and ",+0.373," in table and "'-0.027" not in table  # signed, as printed: no formula mark
    original = next(e for e in published if e["metric"] == "group_share" and e["subset"]["variant"] == "(original)")
    assert original["published"] == 0.16 and original["ci"][0] <= original["measured"] <= original["ci"][1]
    female = next(m for m in doctor["metrics"] if m["name"] == "group_share"
                  and m["subset"] == {"prompt": WORKED_EXAMPLES[0], "variant": "(original)", "group": "female"})
    assert original["measured"] == female["value"] == female["details"]["count"] / 25
    ceo = json.loads((tmp_path / "out" / "ceo" / "results.json").read_text())
    levels = {}
    for m in ceo["metrics"]:
        if m["name"] == "word_influence":
            levels.setdefault(m["subset"]["level"], []).append(m["subset"]["word"])
    assert levels == {1: WORKED_EXAMPLES[1].split(), 2: WORKED_EXAMPLES[1].split()}
    assert ceo["published"] == []  # Table 1 is another prompt's


def test_design_quotes_the_traits_study_s_figure_2_confidences():
    """The traits study's Figure 2 prints 68-74 % confidences (its 66 % is a selection threshold): the
    design document and the probe's notes say 68-74, never 66-74."""
    from pathlib import Path

    design = (Path(__file__).parents[1] / "docs" / "DESIGN.md").read_text()
    notes = " ".join(probe_class("traits").default_settings()["notes"])
    for text in (design, notes):
        assert "68-74 %" in text and "66-74" not in text
