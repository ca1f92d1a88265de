"""Phrasings (issue 46 item 3): a metric measured with several phrasings of a prompt, per phrasing and
pooled, its pooled interval a two-level bootstrap (phrasings and images resampled), and a verdict that
says in how many phrasings it holds."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import scipy.stats as sps

from vlfair import stats
from vlfair.cli import main
from vlfair.probes import declared, probe_class
from vlfair.probes.phrasings import column as phrasing_column
from vlfair.samples import Samples


def test_the_pooled_interval_is_a_brute_force_two_level_bootstrap():
    """Three phrasings of a ratio of two groups' means scored on the same 240 rows: the pooled value is the
    phrasings' mean, and its interval the percentiles of, for each resample, the mean over phrasings drawn with
    replacement of each drawn phrasing's ratio on the same resampled rows (the rows' draws the measures', each
    group's rows drawn within it by ``stats.bootstrap_group_means`` on the run's seed, the same rows for every
    column; the phrasings' a stream of their own), recomputed here with numpy."""
    rng = np.random.default_rng(3)
    groups = np.repeat(["a", "b"], 120)
    # a ratio of about 1, 1.05 and 1.1: the phrasings disagree, as a pooled interval must show
    columns = {f"s{k}": rng.normal(20, 2, 240) + k * (groups == "a") for k in range(3)}
    samples = Samples(pd.DataFrame({"group": groups, **columns}), {})
    members = tuple(declared.Ratio(f"s{k}", "a", "b") for k in range(3))
    metrics = [declared.Declared("bias_ratio", {}, declared.Pooled(members), group="group"),
               declared.Declared("bias_ratio", {"phrasing": 2}, members[1], group="group")]
    pooled, second = declared.evaluate(samples, metrics, bootstrap=500, seed=11)

    codes = (groups == "b").astype(np.int64)
    values = np.stack(list(columns.values()), axis=1)

    ratios = values[codes == 0].mean(axis=0) / values[codes == 1].mean(axis=0)
    means = [stats.bootstrap_group_means(values[:, k], codes, 2, 500, 11) for k in range(3)]  # (500, 2) each
    resampled = np.stack([m[:, 0] / m[:, 1] for m in means], axis=1)  # (500, 3): each phrasing's ratio per resample
    draws = np.random.default_rng(np.random.SeedSequence(11).spawn(4)[3]).multinomial(3, [1 / 3] * 3, size=500)
    replicates = (resampled * draws).sum(axis=1) / 3
    # a ratio is judged by its interval, read at the level of a t interval's width at 120 rows a group
    # (Hesterberg's expanded percentile: the normal quantile sqrt(n / (n - 1)) t_{n-1})
    half = sps.norm.sf(math.sqrt(120 / 119) * sps.t.ppf(0.975, 119))
    assert pooled.value == pytest.approx(ratios.mean(), rel=1e-12)
    np.testing.assert_allclose(pooled.ci, np.quantile(replicates, [half, 1 - half]), rtol=1e-12)
    assert pooled.details["phrasing_values"] == pytest.approx(list(ratios), rel=1e-12)
    np.testing.assert_allclose(second.ci, np.quantile(resampled[:, 1], [half, 1 - half]), rtol=1e-12)  # its own
    assert pooled.ci[1] - pooled.ci[0] > second.ci[1] - second.ci[0]  # the phrasings' spread widens it
    # every column's resamples draw the same rows: the resampled means of a sum of two columns are the sums of theirs
    np.testing.assert_allclose(stats.bootstrap_group_means(values[:, 0] + values[:, 1], codes, 2, 500, 11),
                               means[0] + means[1], rtol=1e-12)
    # a ratio holds in a phrasing whose own interval excludes 1 on the pooled value's side: the second and third
    own = [np.quantile(resampled[:, k], [0.025, 0.975]) for k in range(3)]
    assert [bool(low > 1) for low, _ in own] == [False, True, True] and pooled.details["holds_in"] == 2


def test_a_bias_planted_in_one_phrasing_is_found_in_that_phrasing_only():
    """The professions probe's samples with three phrasings of the prompt, a gender gap of 3 CLIPScore points
    planted for doctors with phrasing 2 alone: the gap is found (permutation p) with phrasing 2 and with no
    other, for doctors only, and the pooled gap says it holds in 1 of 3 phrasings."""
    probe = probe_class("professions")({"phrasings": ["a picture of a {profession}", "an image of a {profession}"],
                                        "attributes": ["gender"], "bootstrap": 300, "n_permutations": 999})
    rng = np.random.default_rng(0)
    professions, genders = np.repeat(["doctor", "nurse"], 80), np.tile(np.repeat(["Female", "Male"], 40), 2)
    frame = pd.DataFrame({"row": np.arange(160), "id": [str(i) for i in range(160)], "profession": professions,
                          "gender": genders, "race": np.tile(["Asian", "Black", "White", "Latin American"], 40)})
    for number in (1, 2, 3):
        scores = rng.normal(25, 1.5, 160)
        if number == 2:
            scores[(professions == "doctor") & (genders == "Male")] += 3.0
        frame[phrasing_column("clipscore", number)] = scores
    phrasings = [probe.settings.prompt, *probe.settings.phrasings]
    samples = Samples(frame, {"prompt": probe.settings.prompt, "score": "clipscore", "phrasings": phrasings,
                              "layout": {}})
    out = probe.analyze(samples)
    gaps = {(m.subset["profession"], m.subset.get("phrasing", 1)): m for m in out.metrics
            if m.name == "group_score_gap"}
    found = {key: m.p_value < 0.05 for key, m in gaps.items() if key[1] != "pooled"}
    assert found == {("doctor", 1): False, ("doctor", 2): True, ("doctor", 3): False,
                     ("nurse", 1): False, ("nurse", 2): False, ("nurse", 3): False}
    assert gaps["doctor", "pooled"].details["holds_in"] == 1 and gaps["nurse", "pooled"].details["holds_in"] == 0
    assert gaps["doctor", "pooled"].value == pytest.approx(np.mean([gaps["doctor", k].value for k in (1, 2, 3)]))
    table = out.tables["phrasings"].frame
    assert table.loc[("gender", "doctor"), "found in"] == "1 of 3 phrasings"
    assert list(table.columns[:4]) == ["phrasing 1", "phrasing 2", "phrasing 3", "pooled"]


@pytest.mark.parametrize(("probe", "phrasings", "message"), [
    ("professions", '["a picture of a person"]', "setting phrasings.0 = 'a picture of a person': must hold the "
                                                 "placeholder {profession}"),
    ("professions", '["a picture of a {profession}", "a picture of a {profession}"]',
     "names 'a picture of a {profession}' twice"),
    ("professions", '["A photo of a {profession}"]', "setting phrasings.0 = 'A photo of a {profession}': is the "
                                                     "study's prompt, phrasing 1 already"),
    ("traits", '["someone {trait}", "a {profession}"]', "setting phrasings.1 = 'a {profession}': must hold the "
                                                       "placeholder {trait}"),
    ("traits", '["a {trait} person"]', "is the study's prompt, phrasing 1 already"),
    ("public-figures", '["a portrait"]', "setting phrasings.0 = 'a portrait': must hold the placeholder {}"),
    ("public-figures", '["This is a photo of a {}"]', "is the study's prompt, phrasing 1 already"),
])
def test_a_phrasing_without_its_placeholder_or_given_twice_is_refused_by_name(probe, phrasings, message, tmp_path,
                                                                              capsys):
    data = {"professions": "synthetic:professions", "traits": "synthetic:fairface", "public-figures": "synthetic:pfi"}[
        probe]
    assert main(["run", probe, "--model", "no-model-needed", "--dataset", data,
                 "--out", str(tmp_path / "out"), "--set", f"phrasings={phrasings}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vlfair run") and len(err.strip().splitlines()) == 1, err
    assert message in err, err


def test_phrasings_are_part_of_the_family():
    """Runs with other phrasings are not ranked together: the phrasings are in the family key (the settings'
    version of the probes that take them went up with them)."""
    cls = probe_class("professions")
    dataset = {"fingerprint": "f", "split": None, "subset": None}
    alone = cls({}).family_key(dataset)
    assert alone["settings"]["phrasings"] == [] and alone["probe_version"] == 9
    asked = cls({"question_phrasings": ["which job is this ?"], "answer_formats": ["generate"]}).family_key(dataset)
    assert asked["settings"]["question_phrasings"] == ["which job is this ?"] and asked != alone
    phrased = cls({"phrasings": ["a picture of a {profession}"]}).family_key(dataset)
    assert phrased["settings"]["phrasings"] == ["a picture of a {profession}"] and phrased != alone
    figures = probe_class("public-figures")
    assert figures({}).family_key(dataset)["probe_version"] == 12
    assert figures({"phrasings": ["a picture of a {}"]}).family_key(dataset) != figures({}).family_key(dataset)
    influence = probe_class("word-influence")
    assert influence({}).family_key(dataset)["probe_version"] == 9
    for other in ({"phrasings": ["a {}"]}, {"question_phrasings": ["is this a man ?"]}):
        assert influence(other).family_key(dataset) != influence({}).family_key(dataset)
    retrieval = probe_class("retrieval")
    assert retrieval({}).family_key(dataset)["probe_version"] == 7
    assert retrieval({"per_template": True}).family_key(dataset) != retrieval({}).family_key(dataset)


def test_phrasings_from_a_file_run_rescore_and_compare_end_to_end(clip_dir, siglip_dir, tmp_path):
    """`--set phrasings=@FILE` (one per line): a run reports each metric per phrasing and pooled, with the
    phrasings table in its report; rescoring reproduces it from the samples; vlfair compare compares two models'
    runs phrasing by phrasing (pooled metrics are compared through their phrasings)."""
    listed = tmp_path / "phrasings.txt"
    listed.write_text("a picture of a {profession}\n\nan image of a {profession} at work\n")
    runs = {}
    for name, model in (("clip", clip_dir), ("siglip", siglip_dir)):
        runs[name] = tmp_path / name
        assert main(["run", "professions", "--model", str(model), "--dataset", "synthetic:professions", "--out",
                     str(runs[name]), "--no-figures", "--dtype", "float32", "--cache-dir", str(tmp_path / "cache"),
                     "--set", f"phrasings=@{listed}", "--set", "bootstrap=200", "--set", "n_permutations=99"]) == 0
    results = json.loads((runs["clip"] / "results.json").read_text())
    by_phrasing: dict[str, int] = {}
    for metric in results["metrics"]:
        key = str(metric["subset"].get("phrasing", 1))
        by_phrasing[key] = by_phrasing.get(key, 0) + 1
    assert by_phrasing == {"1": 96, "2": 96, "3": 96, "pooled": 96}
    assert results["settings"]["phrasings"] == ["A photo of a {profession}", "a picture of a {profession}",
                                                "an image of a {profession} at work"]
    assert "found in" in (runs["clip"] / "phrasings.csv").read_text()
    assert "phrasings" in (runs["clip"] / "report.html").read_text()
    assert main(["rescore", str(runs["clip"]), "--out", str(tmp_path / "rescored")]) == 0
    assert json.loads((tmp_path / "rescored" / "results.json").read_text())["metrics"] == results["metrics"]
    assert main(["compare", str(runs["clip"]), str(runs["siglip"]), "--out", str(tmp_path / "compared"),
                 "--bootstrap", "100", "--permutations", "99"]) == 0
    comparison = json.loads((tmp_path / "compared" / "comparison.json").read_text())
    assert {str(d["subset"].get("phrasing", 1)) for d in comparison["differences"]} == {"1", "2", "3"}
    pooled = [u["metric"] for u in comparison["uncompared"] if "pooled over phrasings" in u["metric"]]
    assert pooled == ["group_score_gap (pooled over phrasings)", "mean_clipscore (pooled over phrasings)"]


def test_traits_find_a_race_difference_planted_in_one_phrasing_there_only():
    """The traits probe's samples, one pair and three phrasings, the White women's confidence raised by 0.1 with
    phrasing 3 alone: the F across races within women is found (p < 0.05) with phrasing 3 only, and the pooled
    F says it holds in 1 of 3 phrasings; within men, in none."""
    probe = probe_class("traits")({"pairs": [["smart", "dumb"]], "phrasings": ["a {trait} human", "someone {trait}"],
                                   "bootstrap": 200, "per_cell": None})
    rng = np.random.default_rng(1)
    races = np.tile(np.repeat(["Black", "White", "Indian"], 60), 2)
    genders = np.repeat(["Female", "Male"], 180)
    frame = pd.DataFrame({"row": np.arange(360), "id": [str(i) for i in range(360)], "race": races, "gender": genders})
    for number in (1, 2, 3):
        confidence = rng.normal(0.5, 0.05, 360)
        if number == 3:
            confidence[(races == "White") & (genders == "Female")] += 0.1
        frame[phrasing_column("confidence smart/dumb", number)] = confidence
    samples = Samples(frame, {"temperature": 100.0, "temperature_source": "logit_scale", "prompt": "a {trait} person",
                              "sampling": None, "phrasings": ["a {trait} person", "a {trait} human",
                                                              "someone {trait}"]})
    out = probe.analyze(samples)
    women = {m.subset.get("phrasing", 1): m for m in out.metrics
             if m.name == "trait_anova" and m.subset.get("gender") == "Female"}
    assert {k: m.p_value < 0.05 for k, m in women.items() if k != "pooled"} == {1: False, 2: False, 3: True}
    assert women["pooled"].details["holds_in"] == 1
    men = next(m for m in out.metrics if m.name == "trait_anova" and m.subset.get("gender") == "Male"
               and m.subset.get("phrasing") == "pooled")
    assert men.details["holds_in"] == 0
    assert out.tables["phrasings"].frame.loc[("smart/dumb", "gender=Female"), "found in"] == "1 of 3 phrasings"


def test_public_figures_find_a_bias_ratio_planted_in_one_phrasing_there_only(clip_dir, tmp_path):
    """A public-figures run with three phrasings of the class prompt, its bias ratios' class scores then spread
    alike over 0.3-0.5 for both genders of each folder (a ratio of 1) with every phrasing, the women's politician
    scores halved with the second: each politician folder's bias ratio excludes 1 (below it) with phrasing 2
    alone, the pooled ratio says it holds in 1 of 3 phrasings, and the phrasings table says so; the athletes' and
    actors' ratios, planted nowhere, hold in none."""
    import vlfair
    from vlfair.probes import run_probe
    from vlfair.samples import read_samples

    settings = {"phrasings": ["a picture of a {}", "an image of a {}"], "bootstrap": 300}
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    run_probe("public-figures", encoder, "synthetic:pfi", tmp_path / "run", cache_dir=None, settings=settings)
    samples, _ = read_samples(tmp_path / "run" / "samples.parquet")
    frame, rng = samples.frame, np.random.default_rng(3)
    women = (frame["gender"] == "Female").to_numpy()
    for column in ("probability politicians level 2: politician", "probability athletes level 2: athlete",
                   "probability actors level 2: actor"):
        scored = frame[column].notna().to_numpy()
        for number in (1, 2, 3):
            values = np.empty(len(frame))
            for folder in set(frame["category"]):  # in each folder, each gender's spread evenly: equal means
                for gender in (women, ~women):
                    rows = np.flatnonzero(scored & gender & (frame["category"] == folder).to_numpy())
                    values[rng.permutation(rows)] = np.linspace(0.3, 0.5, rows.size)
            if number == 2 and "politician" in column:
                values[women] *= 0.5
            frame.loc[scored, phrasing_column(column, number)] = values[scored]
    out = probe_class("public-figures")(settings).analyze(samples)
    ratios = {(m.subset["folder"], m.subset.get("phrasing", 1)): m for m in out.metrics if m.name == "bias_ratio"}
    folders = sorted({folder for folder, _ in ratios})
    assert {"politicians", "athlete"} <= set(folders)
    for folder in folders:
        below = [ratios[folder, k].ci[1] < 1 for k in (1, 2, 3)]
        politician = ratios[folder, 1].subset["class"] == "politician"
        assert below == ([False, True, False] if politician else [False, False, False]), folder
        assert ratios[folder, "pooled"].details["holds_in"] == (1 if politician else 0), folder
    table = out.tables["phrasings"].frame
    assert table.loc[("politicians", "politician"), "found in"] == "1 of 3 phrasings"
    assert table.loc[("athlete", "athlete"), "found in"] == "0 of 3 phrasings"


def test_a_pair_a_phrasing_makes_one_text_is_left_out_of_that_phrasing_and_the_pooled_metrics():
    """Where a phrasing's two prompts of a pair were one text to the model, its confidences were left out when
    scoring: the pair is measured with the other phrasings and not pooled; the other pair is pooled."""
    probe = probe_class("traits")({"pairs": [["smart", "dumb"], ["happy", "sad"]], "phrasings": ["someone {trait}"],
                                   "bootstrap": 100, "per_cell": None})
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"row": np.arange(120), "id": [str(i) for i in range(120)],
                          "race": np.tile(["Black", "White"], 60), "gender": np.repeat(["Female", "Male"], 60),
                          "confidence smart/dumb": rng.uniform(0, 1, 120),
                          "confidence happy/sad": rng.uniform(0, 1, 120),
                          "confidence happy/sad@2": rng.uniform(0, 1, 120)})  # smart/dumb@2: one text
    samples = Samples(frame, {"temperature": 100.0, "temperature_source": "logit_scale", "prompt": "a {trait} person",
                              "sampling": None, "phrasings": ["a {trait} person", "someone {trait}"]})
    out = probe.analyze(samples)
    phrased = {(m.subset["trait"], str(m.subset.get("phrasing", 1))) for m in out.metrics if m.name == "trait_anova"}
    assert phrased == {("smart/dumb", "1"), ("happy/sad", "1"), ("happy/sad", "2"), ("happy/sad", "pooled")}


def test_multilingual_takes_other_prompt_sets_as_phrasings(clip_dir, tmp_path, capsys):
    """Multilingual's FairFace part asked with its prompt set and another one (the YAML's vlfair set): every metric
    per prompt set and pooled, a phrasings table of each task's cross-lingual gap, and phrasing 2's metrics those
    of a run with that prompt set alone. The Multi30K part, a prompt set that is the prompt set or none of the
    sets, and one with other classes are refused in one line."""
    import vlfair
    from vlfair.probes import ProbeError, run_probe

    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    common = {"bootstrap": 100}
    both = run_probe("multilingual", encoder, "synthetic:fairface", tmp_path / "both", cache_dir=None,
                     settings={**common, "phrasings": ["vlfair"]})
    alone = run_probe("multilingual", encoder, "synthetic:fairface", tmp_path / "alone", cache_dir=None,
                      settings={**common, "prompt_set": "vlfair"})
    assert both["settings"]["phrasings"] == ["study", "vlfair"]
    second = {(m["name"], json.dumps({k: v for k, v in m["subset"].items() if k != "phrasing"}, sort_keys=True)):
              (m["value"], m["ci"]) for m in both["metrics"] if m["subset"].get("phrasing") == 2}
    own = {(m["name"], json.dumps(m["subset"], sort_keys=True)): (m["value"], m["ci"]) for m in alone["metrics"]
           if m["name"] != "unmatched_share"}
    assert second.keys() == own.keys() and all(
        second[key][0] == pytest.approx(own[key][0], rel=1e-12, nan_ok=True) for key in own)
    assert {str(m["subset"].get("phrasing", 1)) for m in both["metrics"] if m["name"] == "cross_lingual_gap"} == {
        "1", "2", "pooled"}
    assert "of 2 phrasings" in (tmp_path / "both" / "phrasings.csv").read_text()
    # found in a phrasing where its test against no difference finds the gap (a largest gap's interval, which
    # holds the value, lies above 0 wherever the gap is above 0, found or not)
    gaps = {(m["subset"]["task"], m["subset"].get("phrasing", 1)): m for m in both["metrics"]
            if m["name"] == "cross_lingual_gap"}
    for (task, number), gap in gaps.items():
        if number == "pooled":
            tested = [gaps[(task, k)] for k in (1, 2)]
            assert gap["details"]["holds_in"] == sum(m["p_value"] is not None and m["p_value"] < 0.05 for m in tested)
    assert "test against no difference finds the gap" in (tmp_path / "both" / "phrasings.md").read_text()
    for settings, message in (({"phrasings": ["study"]}, "is prompt_set, phrasing 1 already"),
                              ({"phrasings": ["other"]}, "is not one of ['study', 'vlfair']")):
        with pytest.raises(ProbeError, match=re.escape(message)):
            probe_class("multilingual")(settings)
    sets = probe_class("multilingual").default_settings()["prompt_sets"]
    narrowed = {**sets["vlfair"], "gender": {label: {"en": prompts["en"], "de": prompts["de"]}
                                             for label, prompts in sets["vlfair"]["gender"].items()}}
    with pytest.raises(ProbeError, match="asks other tasks, classes or languages than prompt set 'study'"):
        probe_class("multilingual")({"prompt_sets": {**sets, "narrow": narrowed}, "phrasings": ["narrow"]})
    capsys.readouterr()  # the runs' progress bars above
    assert main(["run", "multilingual", "--model", str(clip_dir), "--dataset", "synthetic:multi30k", "--out",
                 str(tmp_path / "m30k"), "--set", "phrasings=[vlfair]", "--dtype", "float32"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "the Multi30K part asks no prompt" in error, error


def test_public_figures_rewords_its_name_prompt_with_each_phrasing(clip_dir, tmp_path):
    """name_phrasings reword name_prompt, one per phrasing of the class prompt: each folder's retention text score
    per phrasing and pooled, phrasing 2's that of a run asking with that name prompt alone. As many as the class
    prompt's phrasings (or none) and never the name prompt itself: else refused by name."""
    import vlfair
    from vlfair.probes import ProbeError, run_probe

    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    phrased = run_probe("public-figures", encoder, "synthetic:pfi", tmp_path / "phrased", cache_dir=None,
                        settings={"bootstrap": 50, "phrasings": ["a picture of a {}"],
                                  "name_phrasings": ["a picture of {}"]})
    alone = run_probe("public-figures", encoder, "synthetic:pfi", tmp_path / "alone", cache_dir=None,
                      settings={"bootstrap": 50, "name_prompt": "a picture of {}"})
    texts = {(m["subset"]["folder"], str(m["subset"].get("phrasing", 1))): m["value"] for m in phrased["metrics"]
             if m["name"] == "retention_text_score"}
    own = {m["subset"]["folder"]: m["value"] for m in alone["metrics"] if m["name"] == "retention_text_score"}
    assert own and {folder: texts[folder, "2"] for folder in own} == own
    assert all((folder, "pooled") in texts for folder in own)
    for settings, message in (({"phrasings": ["a picture of a {}"], "name_phrasings": []}, None),
                              ({"phrasings": [], "name_phrasings": ["a picture of {}"]}, "for 0 of the class prompt"),
                              ({"phrasings": ["a picture of a {}"], "name_phrasings": ["This is a picture of {}"]},
                               "is name_prompt, phrasing 1 already")):
        if message is None:
            probe_class("public-figures")(settings)
            continue
        with pytest.raises(ProbeError, match=re.escape(message)):
            probe_class("public-figures")(settings)


class _MarkedNurses:
    """A generator whose images are red (female) with probability 0.35 whatever the prompt, blue (male) otherwise,
    and whose images of a prompt with "nurse" carry a white mark: a classifier that reads the mark as female sees a
    word influence the images' colours do not hold."""

    def __call__(self, prompts, seeds):
        from PIL import Image

        images = []
        for prompt, seed in zip(prompts, seeds):
            female = np.random.default_rng(seed).random() < 0.35
            image = Image.new("RGB", (8, 8), (220, 0, 0) if female else (0, 0, 220))
            if "nurse" in prompt.split():
                image.putpixel((7, 7), (255, 255, 255))
            images.append(image)
        return images


class _ReadsTheMarkWithPhrasing2:
    """A classifier with three phrasings of its texts: each labels by colour, the second reads the mark as female."""

    groups = {"female": "female", "male": "male"}

    def __call__(self, images):
        return self.every_phrasing(images)[0]

    def every_phrasing(self, images):
        colour = ["female" if image.getpixel((0, 0))[0] > 100 else "male" for image in images]
        marked = ["female" if image.getpixel((7, 7)) == (255, 255, 255) else label
                  for image, label in zip(images, colour)]
        return [colour, marked, colour]


def _word_influence(tmp_path, name, settings, clip_dir, classifier=None):
    import vlfair
    from vlfair.probes import run_probe
    from vlfair.t2i.generators import CallableGenerator

    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")  # the classifier's (a component may stand in)
    components = {"generator": CallableGenerator(_MarkedNurses(), "marked nurses")}
    if classifier is not None:
        components["classifier"] = classifier
    return run_probe("word-influence", encoder, None, tmp_path / name, cache_dir=tmp_path / "cache", settings={
        "prompts": ["a nurse at the hospital"], "transmuter": {"name": "lexicon"}, "words": "content",
        "candidates": 3, "images_per_prompt": 20, "original_images": 60, "target_group": "female", "max_level": None,
        "phrasings_bootstrap": 200, **settings}, components=components)


def test_word_influence_finds_an_influence_planted_in_one_phrasing_of_its_classifier_there_only(clip_dir, tmp_path):
    """Issue 46 for the word-influence probe: its classifier's group texts are its template, rephrased by
    ``phrasings`` (each with {}). The images hold no influence of "nurse" (P(female) 0.35 for every prompt); a
    classifier that reads them as female with phrasing 2 only finds the influence (its Hoeffding interval above 0)
    with phrasing 2 alone: "1 of 3 phrasings", every other word 0 of 3; each metric per phrasing and pooled, the
    pooled value the phrasings' mean with a resampled interval."""
    results = _word_influence(tmp_path, "run", {"phrasings": ["a photo of a {} person", "a {}"]}, clip_dir,
                              _ReadsTheMarkWithPhrasing2())
    influence = {(m["subset"]["word"], m["subset"].get("phrasing", 1)): m for m in results["metrics"]
                 if m["name"] == "word_influence" and m["subset"]["level"] == 1}
    assert influence["nurse", 2]["ci"][0] > 0 and influence["nurse", 2]["value"] == pytest.approx(0.65, abs=0.15)
    for phrasing in (1, 3):
        low, high = influence["nurse", phrasing]["ci"]
        assert low < 0 < high
    pooled = influence["nurse", "pooled"]
    values = [influence["nurse", k]["value"] for k in (1, 2, 3)]
    assert pooled["value"] == pytest.approx(np.mean(values)) and pooled["details"]["phrasing_values"] == values
    assert pooled["ci"][0] < pooled["value"] < pooled["ci"][1]
    table = pd.read_csv(tmp_path / "run" / "phrasings.csv")
    found = dict(zip(table["word"], table["found in"]))
    assert found == {"nurse": "1 of 3 phrasings", "hospital": "0 of 3 phrasings"}
    assert results["settings"]["phrasings"] == ["{}", "a photo of a {} person", "a {}"]
    shares = {m["subset"].get("phrasing", 1) for m in results["metrics"] if m["name"] == "target_share"}
    assert shares == {1, 2, 3, "pooled"}


def test_word_influence_s_second_phrasing_measures_what_its_texts_alone_measure(clip_dir, tmp_path):
    """The CLIP classifier with phrasings labels each image with every phrasing of its texts: phrasing 2's metrics
    are those of a run whose group texts are that phrasing's (the tiny CLIP, its images encoded once), and a rescore
    from the samples reproduces the run."""
    from vlfair.compare import load_run, rescore
    from vlfair.testing import assert_statistics_are_metrics

    phrased = _word_influence(tmp_path, "phrased", {"phrasings": ["a photo of a {}"]}, clip_dir)
    texts = {"female": "a photo of a female", "male": "a photo of a male"}
    alone = _word_influence(tmp_path, "alone", {"groups": texts, "target_group": "female"}, clip_dir)
    second = {(m["name"], json.dumps({k: v for k, v in m["subset"].items() if k != "phrasing"}, sort_keys=True)):
              (m["value"], m["ci"]) for m in phrased["metrics"] if m["subset"].get("phrasing") == 2}
    own = {(m["name"], json.dumps(m["subset"], sort_keys=True)): (m["value"], m["ci"]) for m in alone["metrics"]}
    assert second and second.keys() == own.keys()
    for key, (value, ci) in own.items():
        assert second[key][0] == pytest.approx(value, abs=1e-12, nan_ok=True), key
        assert second[key][1] == pytest.approx(ci, abs=1e-12, nan_ok=True), key
    again = rescore(tmp_path / "phrased", tmp_path / "again")
    assert again["metrics"] == phrased["metrics"]
    # vlfair compare pairs every phrasing's metrics (a pooled one is compared phrasing by phrasing)
    run = load_run(tmp_path / "phrased")
    compared = assert_statistics_are_metrics(probe_class("word-influence")(run.results["probe_settings"]), run.samples,
                                             [m for m in phrased["metrics"] if m["subset"].get("phrasing") != "pooled"])
    assert {json.loads(subset).get("phrasing", 1) for _, subset in compared} == {1, 2}


@pytest.mark.parametrize("settings, message", [
    ({"phrasings": ["a photo"]}, "setting phrasings.0 = 'a photo': must hold the placeholder {}"),
    ({"phrasings": ["{}"]}, "is the study's prompt, phrasing 1 already"),
    ({"phrasings": ["a {}", "a {}"]}, "phrasings"),
])
def test_a_bad_phrasing_of_the_classifier_s_texts_is_refused_by_name(settings, message):
    from vlfair.probes import ProbeError

    with pytest.raises(ProbeError, match=re.escape(message)):
        probe_class("word-influence")(settings)


def test_a_classifier_that_cannot_label_with_each_phrasing_is_refused(clip_dir, tmp_path):
    from vlfair.probes import ProbeError

    def colour_only(images):
        return ["female" if image.getpixel((0, 0))[0] > 100 else "male" for image in images]

    with pytest.raises(ProbeError, match="has no every_phrasing"):
        _word_influence(tmp_path, "run", {"phrasings": ["a {}"]}, clip_dir, colour_only)


class _PhrasingTwoSeesNobody(_ReadsTheMarkWithPhrasing2):
    """Phrasing 2 labels every image "no person": the study's influence is undefined with it."""

    def every_phrasing(self, images):
        colour, _, again = super().every_phrasing(images)
        return [colour, ["no_person"] * len(images), again]


def test_a_phrasing_that_leaves_no_image_of_a_person_is_said_and_nothing_is_pooled(clip_dir, tmp_path):
    results = _word_influence(tmp_path, "run", {"phrasings": ["a photo of a {} person", "a {}"]}, clip_dir,
                              _PhrasingTwoSeesNobody())
    phrasings = {m["subset"].get("phrasing", 1) for m in results["metrics"]}
    assert phrasings == {1, 3}
    assert any(w.startswith("phrasing 2 (a photo of a {} person): ") and "no metric is pooled" in w
               for w in results["warnings"]), results["warnings"]
    assert not (tmp_path / "run" / "phrasings.csv").exists()


class _OneWayShort(_ReadsTheMarkWithPhrasing2):
    def every_phrasing(self, images):
        return super().every_phrasing(images)[:2]


def test_a_classifier_that_labels_fewer_ways_than_asked_is_refused_by_name(clip_dir, tmp_path):
    from vlfair.probes import ProbeError

    with pytest.raises(ProbeError, match=r"_OneWayShort's every_phrasing labelled 240 images 2 way\(s\).*3 ways"):
        _word_influence(tmp_path, "run", {"phrasings": ["a photo of a {} person", "a {}"]}, clip_dir, _OneWayShort())


def test_the_study_s_150_prompts_with_phrasings_table_each_word_once(clip_dir, tmp_path):
    """Large-scale mode with phrasings: each word's mean influence per phrasing and pooled, its table and figure
    the study's (phrasing 1) alone."""
    import vlfair
    from vlfair.probes import run_probe
    from vlfair.t2i.generators import CallableGenerator

    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    results = run_probe("word-influence", encoder, None, tmp_path / "run", cache_dir=tmp_path / "cache", settings={
        "large_scale": True, "candidates": 1, "images_per_prompt": 1, "original_images": 1, "max_level": 1,
        "transmuter": {"name": "lexicon"}, "words": "content", "target_group": "female", "phrasings_bootstrap": 20,
        "phrasings": ["a {}", "one {}"]}, components={"generator": CallableGenerator(_MarkedNurses(), "marked"),
                                                     "classifier": _ReadsTheMarkWithPhrasing2()})
    means = [m for m in results["metrics"] if m["name"] == "mean_word_influence"]
    assert {m["subset"].get("phrasing", 1) for m in means} == {1, 2, 3, "pooled"}
    table = pd.read_csv(tmp_path / "run" / "mean_word_influence.csv", index_col="word")
    assert table.index.is_unique and len(table) == sum("phrasing" not in m["subset"] for m in means)
