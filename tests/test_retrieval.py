"""The retrieval probe (debias-vision-lang's experiment): its numbers against an item-by-item
reference, its intervals against the measure's, its paired engine against re-ranking from scratch,
its data handling and its refusals."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import vlfair
from vlfair import measures, paired
from vlfair.cli import main
from vlfair.probes import ProbeError, measure_probe, probe_class
from vlfair.probes.retrieval import SCORE, RetrievalProbe
from vlfair.samples import Samples
from vlfair.testing import assert_statistics_are_metrics

TEMPLATES = ["a {} person", "this is {}"]
CONCEPTS = ["good", "bad", "odd"]


def _probe(**settings) -> RetrievalProbe:
    return RetrievalProbe({"query_templates": TEMPLATES, "concepts": CONCEPTS, "bootstrap": 0, **settings})


def _samples(seed: int = 0, images: int = 40, ties: bool = True) -> Samples:
    """A small score matrix (6 prompts x ``images``) with planted structure and exact ties."""
    rng = np.random.default_rng(seed)
    gender = np.array(["Female", "Male"] * (images // 2))
    race = rng.choice(["A", "B", "C"], size=images)
    age = rng.choice(["0-2", "3-9"], size=images)
    frame = {"row": np.arange(images), "id": [f"id{i}" for i in range(images)], "gender": gender, "race": race,
             "age": age}
    prompts, concepts = [], []
    for template in TEMPLATES:
        for concept in CONCEPTS:
            prompts.append(template.format(concept))
            concepts.append(concept)
            scores = rng.normal(size=images) + (concept == "good") * (race == "A") + 0.5 * (gender == "Male")
            if ties:
                scores = np.round(scores, 1)  # ties at the cut, broken by the image's row
            frame[SCORE + prompts[-1]] = scores
    return Samples(pd.DataFrame(frame), {"queries": prompts, "concepts": concepts, "images": images})


def _reference(scores: np.ndarray, groups: np.ndarray, k: int, target: str, zero_count: str) -> dict[str, np.ndarray]:
    """Per query, item by item: the top k by a stable sort, each group's Skew@k, NDKL@k (DVL's
    measuring_bias.py written out), Bias@k of the first two groups in sorted order."""
    names = sorted(set(groups))
    p_star = {g: 1 / len(names) if target == "uniform" else float(np.mean(groups == g)) for g in names}
    found = {"skew": [], "ndkl": [], "bias": []}
    for row in scores:
        top = [int(i) for i in sorted(range(len(row)), key=lambda i: -row[i])[:k]]
        counts = {g: sum(groups[i] == g for i in top) for g in names}
        if zero_count == "dvl":
            shares = {g: (counts[g] if counts[g] else 1) / k for g in names}
        else:
            shares = {g: (counts[g] + 0.5) / (k + 0.5 * len(names)) for g in names}
        found["skew"].append([math.log(shares[g] / p_star[g]) for g in names])
        total, z = 0.0, 0.0
        for i in range(1, k + 1):
            prefix = [groups[j] for j in top[:i]]
            kl = sum((prefix.count(g) / i) * math.log((prefix.count(g) / i) / p_star[g]) for g in names
                     if prefix.count(g))
            total += kl / math.log2(i + 1)
            z += 1 / math.log2(i + 1)
        found["ndkl"].append(total / z)
        found["bias"].append((counts[names[0]] - counts[names[1]]) / k)
    return {key: np.array(value) for key, value in found.items()} | {"names": names}


def _metric(out, name, **subset):
    matches = [m for m in out.metrics if m.name == name and all(m.subset.get(k) == v for k, v in subset.items())
               and ("concept" in m.subset) == ("concept" in subset)]
    assert len(matches) == 1, (name, subset, len(matches))
    return matches[0]


@pytest.mark.parametrize("zero_count", ["dvl", "smoothed"])
def test_every_number_equals_an_item_by_item_reference(zero_count):
    samples = _samples()
    k = 7
    out = _probe(k=k, zero_count=zero_count, attributes=["gender", "race"]).analyze(samples)
    prompts = samples.facts["queries"]
    scores = np.stack([samples.column(SCORE + p) for p in prompts])
    for attribute in ("gender", "race"):
        groups = samples.column(attribute).astype(str)
        for target in ("uniform", "dataset"):
            ref = _reference(scores, groups, k, target, zero_count)
            subset = {"attribute": attribute, "target": target, "k": k}
            assert _metric(out, "max_skew", **subset).value == pytest.approx(ref["skew"].max(axis=1).mean(), abs=1e-12)
            assert _metric(out, "min_skew", **subset).value == pytest.approx(ref["skew"].min(axis=1).mean(), abs=1e-12)
            assert _metric(out, "ndkl", **subset).value == pytest.approx(ref["ndkl"].mean(), abs=1e-12)
            concepts = np.array(samples.facts["concepts"])
            for concept in CONCEPTS:
                mine = concepts == concept
                assert _metric(out, "max_skew", **subset, concept=concept).value == pytest.approx(
                    ref["skew"][mine].max(axis=1).mean(), abs=1e-12)
                for g, group in enumerate(ref["names"]):
                    assert _metric(out, "skew", **subset, concept=concept, group=group).value == pytest.approx(
                        ref["skew"][mine, g].mean(), abs=1e-12)
            table = out.tables[f"over_retrieved_{attribute}_{target}"]
            assert table["over-retrieved group"].tolist() == [ref["names"][g] for g in ref["skew"].argmax(axis=1)]
        if attribute == "gender":
            bias = _metric(out, "bias_at_k", attribute="gender")
            assert bias.subset["groups"] == "Female - Male"
            assert bias.value == pytest.approx(ref["bias"].mean(), abs=1e-12)
    assert not any(m.name == "bias_at_k" and m.subset["attribute"] == "race" for m in out.metrics)


@pytest.mark.parametrize("zero_count", ["dvl", "smoothed"])
def test_intervals_over_images_are_the_measure_s(zero_count):
    """The run's mean over prompts and its interval over the images equal measures.ranking_skew's
    (the same resamples: items drawn within their group, every prompt re-ranked)."""
    samples = _samples(seed=3)
    out = _probe(k=9, zero_count=zero_count, attributes=["gender"], bootstrap=150, seed=4).analyze(samples)
    scores = np.stack([samples.column(SCORE + p) for p in samples.facts["queries"]])
    for target in ("uniform", "dataset"):
        expected = measures.ranking_skew(scores, samples.column("gender").tolist(), 9, target=target,
                                         zero_count=zero_count, bootstrap=150, seed=4)
        subset = {"attribute": "gender", "target": target, "k": 9}
        for name, value, ci in (("max_skew", expected.max_skew, expected.max_skew_ci),
                                ("min_skew", expected.min_skew, expected.min_skew_ci),
                                ("ndkl", expected.ndkl, expected.ndkl_ci)):
            metric = _metric(out, name, **subset)
            assert metric.value == pytest.approx(value, abs=1e-12)
            np.testing.assert_allclose(metric.ci, ci, atol=1e-12)
        bias = _metric(out, "bias_at_k", attribute="gender")
        np.testing.assert_allclose(bias.ci, expected.bias_at_k_ci, atol=1e-12)


def test_the_interval_over_prompts_resamples_templates_and_concepts():
    """The interval over the prompts draws templates and concepts independently (the prompts are
    their cross), with the seed's second stream: written out here with the same draws."""
    samples = _samples(seed=5)
    out = _probe(k=9, attributes=["gender"], bootstrap=400, seed=2).analyze(samples)
    metric = _metric(out, "max_skew", attribute="gender", target="uniform", k=9)
    per_prompt = out.tables["over_retrieved_gender_uniform"]["MaxSkew@9"].to_numpy()  # templates outer
    assert per_prompt.mean() == pytest.approx(metric.value)
    rng = np.random.default_rng(np.random.SeedSequence(2).spawn(2)[1])
    templates = rng.integers(0, 2, size=(400, 2))
    concepts = rng.integers(0, 3, size=(400, 3))
    grid = per_prompt.reshape(2, 3)
    means = [grid[np.ix_(t, c)].mean() for t, c in zip(templates, concepts)]
    np.testing.assert_allclose(metric.details["ci_over_prompts"], np.percentile(means, [2.5, 97.5]), atol=1e-12)
    assert ("ci_over_prompts"
            not in _metric(out, "max_skew", attribute="gender", target="uniform", concept="good").details)


def _mixed_ranks(a: np.ndarray, b: np.ndarray, swaps: np.ndarray) -> np.ndarray:
    """A' of a relabelling, written out: each model's scores become ranks (0 = best, ties by row),
    A' keeps A's rank in unswapped rows and takes B's in swapped ones, B's rank counting as just
    behind A's equal rank."""
    def ranks(s):
        out = np.empty_like(s)
        for q in range(s.shape[1]):
            out[np.argsort(-s[:, q], kind="stable"), q] = np.arange(s.shape[0])
        return out

    return -np.where(swaps[:, None], 2 * ranks(b) + 1, 2 * ranks(a))


@pytest.mark.parametrize("zero_count", ["dvl", "smoothed"])
def test_the_paired_engine_equals_re_ranking_from_scratch(zero_count):
    """Compare's engine: at the data, on resamples and on relabellings, each statistic equals the
    probe's own analysis of the (resampled or relabelled) scores, ranked afresh."""
    samples_a, samples_b = _samples(seed=1), _samples(seed=2)
    samples_b.frame[["gender", "race", "age"]] = samples_a.frame[["gender", "race", "age"]]
    probe = _probe(k=6, zero_count=zero_count, attributes=["race"])
    row_set = probe.comparisons(samples_a)[0]
    a = samples_a.frame[list(row_set.columns)].to_numpy(float)
    b = samples_b.frame[list(row_set.columns)].to_numpy(float)
    engine = row_set.engine(row_set, a, b)

    def analysed(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
        frame = samples_a.frame.iloc[rows].reset_index(drop=True).copy()
        frame[list(row_set.columns)] = values
        out = probe.analyze(Samples(frame, samples_a.facts))
        return np.array([_metric(out, s.name, **s.subset).value for s in row_set.statistics])

    every = np.arange(len(a))
    point_a, point_b = engine.point()
    np.testing.assert_allclose(point_a, analysed(a, every), atol=1e-12)
    np.testing.assert_allclose(point_b, analysed(b, every), atol=1e-12)
    rng = np.random.default_rng(0)
    codes = row_set.groups
    for _ in range(3):
        indices = np.array([rng.choice(np.flatnonzero(codes == codes[j])) for j in every])
        got_a, got_b = engine.resampled(indices[None])
        # a resample's copies of one image sit together, in the order of their rows
        order = np.argsort(indices, kind="stable")
        np.testing.assert_allclose(got_a[0], analysed(a[indices[order]], indices[order]), atol=1e-12)
        np.testing.assert_allclose(got_b[0], analysed(b[indices[order]], indices[order]), atol=1e-12)
        swaps = rng.integers(0, 2, size=len(a)).astype(bool)
        expected = (analysed(_mixed_ranks(a, b, swaps), every) - analysed(_mixed_ranks(b, a, swaps), every))
        np.testing.assert_allclose(engine.swapped_difference(swaps[None])[0], expected, atol=1e-12)
    found = paired.compare(row_set, a, b, bootstrap=50, n_permutations=40, seed=1)
    assert [d.name for d in found] == [s.name for s in row_set.statistics]
    assert all(d.difference_ci is not None and 0 < d.p_value <= 1 for d in found)
    # the paired intervals are the run's kind (measures.top_k_interval): each model's resamples moved
    # onto its point value, then the percentiles of A - B
    from vlfair import stats

    draws = [engine.resampled(block) for block in
             stats.stratified_resamples(codes, 50, np.random.SeedSequence(1).spawn(3)[0])]
    values_a = np.concatenate([d[0] for d in draws])
    values_b = np.concatenate([d[1] for d in draws])
    moved = (values_a - values_a.mean(0) + point_a) - (values_b - values_b.mean(0) + point_b)
    expected = np.percentile(moved, [2.5, 97.5], axis=0)
    np.testing.assert_allclose([d.difference_ci for d in found], expected.T, atol=1e-12)
    assert row_set.recentre


def test_each_paired_statistic_is_the_run_s_metric_on_hand_made_samples():
    samples = _samples(seed=7)
    probe = _probe(k=8, attributes=["gender", "race", "age"])
    out = probe.analyze(samples)
    metrics = [{"name": m.name, "subset": m.subset, "value": m.value} for m in out.metrics]
    assert len(assert_statistics_are_metrics(probe, samples, metrics)) == len(metrics)


def test_too_small_groups_are_named_for_the_uniform_target():
    samples = _samples(seed=8, images=40)
    out = _probe(k=30, attributes=["race"], targets=["uniform"]).analyze(samples)
    assert any("k = 30 asks each of its 3 groups for 10 images" in w for w in out.warnings), out.warnings
    quiet = _probe(k=30, attributes=["race"], targets=["dataset"]).analyze(samples)
    assert not any("asks each" in w for w in quiet.warnings)


def test_defaults_are_dvl_s_319_prompts_templates_first():
    probe = probe_class("retrieval")()
    queries = probe.queries()
    assert len(queries) == 319 and len(probe.settings.query_templates) == 11 and len(probe.settings.concepts) == 29
    assert queries[0] == ("good", "This is the face of a good person")
    assert queries[29] == ("good", "This is a photo of a good person")  # the next template
    assert queries[-1] == ("villainous", "A villainous")
    s = probe.settings
    assert (s.k, s.targets, s.zero_count, s.balance_gender, s.ranking) == (1000, ["uniform", "dataset"], "dvl", True,
                                                                          "cosine")
    assert any("MB:54-70" in note for note in s.notes) and any("k = 1000" in note for note in s.notes)


# ---- end to end, through the CLI --------------------------------------------------------------
def _run(clip_dir, tmp_path, *extra, name="out", dataset="synthetic:fairface"):
    return main(["run", "retrieval", "--model", str(clip_dir), "--dataset", dataset, "--out", str(tmp_path / name),
                 "--dtype", "float32", "--cache-dir", str(tmp_path / "cache"), "--set", "bootstrap=50",
                 "--set", "k=20", *extra])


def test_a_run_balances_the_genders_ranks_by_cosine_and_reports_per_concept(clip_dir, tmp_path, capsys):
    assert _run(clip_dir, tmp_path, "--set", "concepts=[male, female]", "--set", "seed=3") == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    balancing = results["settings"]["balancing"]
    data = vlfair.load_dataset("synthetic:fairface")
    assert balancing["per_gender_before"] == {g: data["gender"].count(g) for g in ("Female", "Male")}
    assert results["settings"]["images"] == 2 * balancing["per_gender_after"]
    assert results["settings"]["ranking"] == "cosine"
    assert "Ranking: cosine similarity" in (tmp_path / "out" / "report.html").read_text()
    # a MaxSkew keeps its test's facts (its null mean, its excess over it) beside its interval over the prompts
    for metric in (m for m in results["metrics"] if m["name"] in ("max_skew", "ndkl") and "concept" not in m["subset"]):
        details = metric["details"]
        assert details["p_value_method"] and "ci_over_prompts" in details, metric
        assert details["excess"] == pytest.approx(metric["value"] - details["null_mean"]), metric
    table = pd.read_csv(tmp_path / "out" / "skew_by_concept_race_dataset.csv", index_col=0)
    assert list(table.index) == ["male", "female"] and "Skew White" in table.columns
    for png in ("max_skew_by_concept_race", "skew_by_group_gender"):
        assert (tmp_path / "out" / f"{png}.png").stat().st_size > 0
    # the samples hold each prompt's scores: the cosines of the model's embeddings
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    samples = pd.read_parquet(tmp_path / "out" / "samples.parquet")
    images = encoder.encode_images([data["image"][int(r)] for r in samples["row"]])
    text = encoder.encode_texts(["This is a photo of a male person"])
    np.testing.assert_allclose(samples[SCORE + "This is a photo of a male person"], (images @ text.T)[:, 0],
                               rtol=1e-5, atol=1e-6)


def test_dvl_ranking_weights_images_by_their_norm_and_caches_them_apart(clip_dir, tmp_path):
    assert _run(clip_dir, tmp_path, "--set", "concepts=[male]", "--set", "ranking=dvl", "--set",
                "balance_gender=false", name="dvl") == 0
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    data = vlfair.load_dataset("synthetic:fairface")
    raw = encoder.encode_images(list(data["image"]), normalize=False)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)  # the test means something
    text = encoder.encode_texts(["This is a photo of a male person"])
    samples = pd.read_parquet(tmp_path / "dvl" / "samples.parquet")
    np.testing.assert_allclose(samples[SCORE + "This is a photo of a male person"], (raw @ text.T)[:, 0],
                               rtol=1e-5, atol=1e-6)
    results = json.loads((tmp_path / "dvl" / "results.json").read_text())
    assert results["settings"]["ranking"] == "dvl"
    assert "the unnormalised image embedding . the L2-normalised text" in (tmp_path / "dvl" / "report.html").read_text()
    cached = vlfair.embed_images(encoder, data, cache_dir=tmp_path / "cache", progress=False)
    assert np.allclose(np.linalg.norm(cached, axis=1), 1.0)  # the normalised cache is not the raw one


def test_concepts_from_a_file(clip_dir, tmp_path):
    listed = tmp_path / "concepts.txt"
    listed.write_text("male\n\n  female  \n")
    assert _run(clip_dir, tmp_path, "--set", f"concepts=@{listed}", "--set", "attributes=[gender]") == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["probe_settings"]["concepts"] == ["male", "female"]
    assert main(["run", "retrieval", "--model", str(clip_dir), "--dataset", "synthetic:fairface", "--out",
                 str(tmp_path / "x"), "--set", f"concepts=@{tmp_path / 'missing.txt'}"]) == 2


def test_rescore_and_compare_two_models(clip_dir, tmp_path, capsys):
    from vlfair import testing
    from vlfair.compare import compare_runs, rescore

    other = testing.tiny_clip(tmp_path / "other-clip", seed=5)
    assert _run(clip_dir, tmp_path, "--set", "concepts=[male, female]", name="a") == 0
    assert _run(other, tmp_path, "--set", "concepts=[male, female]", name="b") == 0
    original = json.loads((tmp_path / "a" / "results.json").read_text())
    assert rescore(tmp_path / "a", tmp_path / "again")["metrics"] == original["metrics"]
    comparison = compare_runs([tmp_path / "a", tmp_path / "b"], bootstrap=60, n_permutations=60)
    differences = comparison.content["differences"]
    compared = {(d["metric"], json.dumps(d["subset"], sort_keys=True)) for d in differences}
    reported = {(m["name"], json.dumps(m["subset"], sort_keys=True)) for m in original["metrics"]}
    assert compared == reported
    assert all(d["difference_ci"] is not None and d["p_value"] > 0 for d in differences)


@pytest.mark.parametrize(("extra", "message"), [
    (["--set", "k=252"], "setting k = 252: MaxSkew needs k below the number of images evaluated \\(252\\).*use a k "
                         "from 1 to 251"),
    (["--set", "k=0"], "setting k = 0: Input should be greater than or equal to 1"),
    (["--set", "k=ten"], "setting k = 'ten'"),
    (["--set", "concepts=[]"], "setting concepts = \\[\\]: List should have at least 1 item"),
    (["--set", "query_templates=['a photo']"], "query_templates.0 = 'a photo': .*must hold the placeholder \\{\\}"),
    (["--set", "query_templates=['{} and {}']"], "query_templates.0 = '\\{\\} and \\{\\}': must hold the placeholder "
                                                "\\{\\} once \\(it has 2\\)"),
    (["--set", "attributes=[height]"], "setting attributes.0 = 'height': Input should be 'gender', 'race' or 'age'"),
    (["--set", "query_templates=['a {}', 'a {} x']", "--set", "concepts=['b x', b]"],
     "the prompt 'a b x' is formed twice"),
])
def test_bad_settings_are_one_line_naming_the_setting(clip_dir, tmp_path, capsys, extra, message):
    import re

    argv = [arg for item in extra for arg in ([item] if item == "--set" else [item])]
    assert _run(clip_dir, tmp_path, *argv, "--set", "balance_gender=false") == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # after the progress bars
    assert last.startswith("vlfair run: retrieval: ") and re.search(message, last), last
    assert "Traceback" not in err


def test_a_refused_k_keeps_the_embeddings_computed(clip_dir, tmp_path, capsys, monkeypatch):
    """k is checked against the images once they are read: the embeddings made on the way are
    cached, and the run with a valid k computes none again."""
    from vlfair import embed

    assert _run(clip_dir, tmp_path, "--set", "k=252", "--set", "balance_gender=false") == 2
    computed = []
    original = embed._compute_chunks
    monkeypatch.setattr(embed, "_compute_chunks", lambda *a, **k: computed.append(1) or original(*a, **k))
    assert _run(clip_dir, tmp_path, "--set", "k=20", "--set", "balance_gender=false", "--set",
                "concepts=[male]") == 0
    assert computed == []


def test_a_dataset_without_an_attribute_is_refused_naming_the_column(tmp_path, capsys, clip_dir):
    data = tmp_path / "data"
    data.mkdir()
    vlfair.load_dataset("synthetic:fairface").remove_columns("age").to_parquet(str(data / "validation.parquet"))
    assert _run(clip_dir, tmp_path, dataset=str(data)) == 2
    # FairFace's age is optional (one's own faces may lack it): the probe's own check names the setting that reads it
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "vlfair run: retrieval: setting attributes: the dataset has no column 'age'; it has ['image', 'file', "
        "'gender', 'race', 'service_test']; attributes takes gender, race and age, those the dataset holds")
    # a dataset handed over in Python meets the same check
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    plain = vlfair.load_dataset("synthetic:fairface").remove_columns(["age", "gender"])
    with pytest.raises(ProbeError, match="retrieval: setting attributes: the dataset has no column 'gender', 'age';"):
        measure_probe("retrieval", encoder, plain, schema="fairface", cache_dir=None)
    with pytest.raises(ProbeError, match="setting balance_gender: the dataset has no column 'gender' to balance.*"
                                         "set balance_gender=false"):
        measure_probe("retrieval", encoder, plain, schema="fairface", cache_dir=None, settings={"attributes": ["race"]})


def _relabelled(**columns):
    """synthetic:fairface with columns computed from each row's index."""
    data = vlfair.load_dataset("synthetic:fairface")
    return data.map(lambda row, i: {c: f(i, row) for c, f in columns.items()}, with_indices=True)


def test_balancing_refuses_one_gender_and_a_group_it_empties(clip_dir):
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    settings = {"k": 7, "bootstrap": 0, "concepts": ["male"]}  # 7: the races' number
    with pytest.raises(ProbeError, match="balance_gender: the images hold one gender only \\(\\['Male'\\]\\): "
                                         "there is nothing to balance; set balance_gender=false"):
        measure_probe("retrieval", encoder, _relabelled(gender=lambda i, row: "Male"), cache_dir=None,
                      settings=settings)
    # ten women of six races; ten men of 242 kept, with seed 0 none of rows 20-22, the only White people
    others = ["Black", "Latino_Hispanic", "East Asian", "Southeast Asian", "Indian", "Middle Eastern"]
    data = _relabelled(gender=lambda i, row: "Female" if i < 10 else "Male",
                       race=lambda i, row: "White" if 20 <= i <= 22 else others[i % 6])
    settings["attributes"] = ["race"]
    with pytest.raises(ProbeError, match="after balancing the genders, race group\\(s\\) \\['White'\\] have no "
                                         "images"):
        measure_probe("retrieval", encoder, data, cache_dir=None, settings=settings)
    run = measure_probe("retrieval", encoder, data, cache_dir=None, settings={**settings, "balance_gender": False})
    assert run.results["settings"]["images"] == 252


def test_balancing_picks_rows_of_the_embeddings_named_by_their_row_in_the_data(clip_dir, tmp_path, monkeypatch):
    """samples.parquet's row is the image's row in the data as given; every image is embedded once,
    so another seed (another balanced set) or no balancing embeds nothing again."""
    from vlfair import embed

    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    data = _relabelled(gender=lambda i, row: "Female" if i % 3 == 0 else "Male")  # 84 women, 168 men
    settings = {"k": 10, "bootstrap": 0, "concepts": ["male"], "seed": 1}
    first = measure_probe("retrieval", encoder, data, cache_dir=tmp_path / "cache", settings=settings)
    frame = first.output.samples.frame
    assert len(frame) == 2 * 84 and first.results["settings"]["balancing"]["per_gender_before"] == {
        "Female": 84, "Male": 168}
    assert frame["gender"].tolist() == [data["gender"][r] for r in frame["row"]]
    assert sorted(r for r in frame["row"] if r % 3 == 0) == list(range(0, 252, 3))  # every woman kept
    computed = []
    original = embed._compute_chunks
    monkeypatch.setattr(embed, "_compute_chunks", lambda *a, **k: computed.append(1) or original(*a, **k))
    other = measure_probe("retrieval", encoder, data, cache_dir=tmp_path / "cache", settings={**settings, "seed": 2})
    every = measure_probe("retrieval", encoder, data, cache_dir=tmp_path / "cache",
                          settings={**settings, "balance_gender": False})
    assert computed == [] and len(every.output.samples.frame) == 252
    assert set(other.output.samples.frame["row"]) != set(frame["row"])


def test_non_finite_scores_are_refused_naming_the_row_and_prompt(clip_dir, monkeypatch):
    from vlfair.probes.base import Context

    original = Context.images

    def overflowing(self):
        images, rows = original(self)
        images = images.copy()
        images[7] = np.inf
        return images, rows

    monkeypatch.setattr(Context, "images", overflowing)
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    with pytest.raises(ProbeError, match="scores the image of row 7 against 'This is the face of a male person' as "
                                         "(nan|inf) .*not finite.*try --dtype float32"):
        measure_probe("retrieval", encoder, vlfair.load_dataset("synthetic:fairface"), cache_dir=None,
                      settings={"k": 10, "bootstrap": 0, "concepts": ["male"], "balance_gender": False})


@pytest.mark.parametrize(("k", "attribute", "groups"), [(1, "gender", 2), (6, "race", 7), (8, "age", 9)])
def test_a_top_k_smaller_than_the_groups_is_refused_before_any_image_is_scored(clip_dir, tmp_path, capsys, k,
                                                                               attribute, groups):
    """Issue 43, SILENT 11: at k below the groups, some group is absent from every top k for any model."""
    argv = ["run", "retrieval", "--model", str(clip_dir), "--dataset", "synthetic:fairface", "--out",
            str(tmp_path / "out"), "--set", f"k={k}", "--set", f"attributes=[{attribute}]", "--set", "zero_count=dvl"]
    if attribute == "age":
        argv += ["--subset", "age_groups"]
    assert main(argv) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"vlfair run: retrieval: setting k = {k}, {attribute} (") and \
        f"below the {groups} groups" in error
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_compare_refuses_runs_that_share_no_more_images_than_k():
    samples = _samples(images=12)
    with pytest.raises(ProbeError, match="the runs share 12 images, not more than k = 12"):
        _probe(k=12).comparisons(samples)
    assert _probe(k=11).comparisons(samples)
    with pytest.raises(ValueError, match="k=5 is larger than a resample's 4 items"):
        measures.resampled_top_k(np.zeros((1, 4)), np.array([0, 1, 0, 1]), 5, np.arange(4)[None],
                                 [np.array([0.5, 0.5])])


def test_the_evaluate_module_on_the_run_s_score_matrix(clip_dir, tmp_path, capsys):
    """samples.parquet's score columns are the matrix `evaluate.load("vlfair/ranking_skew")` takes:
    its numbers and intervals are the run's."""
    import evaluate

    assert _run(clip_dir, tmp_path, "--set", "concepts=[male, female]", "--set", "seed=2") == 0
    assert main(["install-metrics", "--only", "vlfair/ranking_skew"]) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    samples = pd.read_parquet(tmp_path / "out" / "samples.parquet")
    scores = samples[[c for c in samples.columns if c.startswith(SCORE)]].to_numpy().T  # (prompts, images)
    skew = evaluate.load("vlfair/ranking_skew")
    for target in ("uniform", "dataset"):
        found = skew.compute(predictions=scores.tolist(), item_groups=samples["race"].tolist(), k=20, target=target,
                             zero_count="dvl", bootstrap=50, seed=2)
        for name in ("max_skew", "ndkl"):
            metric = next(m for m in results["metrics"] if m["name"] == name and m["subset"] == {
                "attribute": "race", "target": target, "k": 20})
            assert found[name] == pytest.approx(metric["value"], abs=1e-9)
            np.testing.assert_allclose(found[f"{name}_ci"], metric["ci"], atol=1e-9)


def test_per_template_finds_a_skew_planted_in_one_template_there_only():
    """Issue 46 for retrieval: its templates are the phrasings of each concept's query. With per_template, a
    race's over-retrieval planted in the second template's "bad" query only is found with that template alone ("1
    of 2 phrasings"); each concept's skew per template equals its one query's skew, pooled is their mean (the study's
    per-concept value) with an interval over the templates and images; the study's metrics are as without it."""
    rng = np.random.default_rng(5)
    images = 120
    race = np.array(["A", "B", "C"] * (images // 3))
    frame = {"row": np.arange(images), "id": [f"id{i}" for i in range(images)], "race": race}
    prompts, concepts = [], []
    for t, template in enumerate(TEMPLATES):
        for concept in CONCEPTS:
            prompts.append(template.format(concept))
            concepts.append(concept)
            planted = 3.0 * (race == "A") if (t, concept) == (1, "bad") else 0.0
            frame[SCORE + prompts[-1]] = rng.normal(size=images) + planted
    samples = Samples(pd.DataFrame(frame), {"queries": prompts, "concepts": concepts, "images": images})
    settings = {"k": 20, "attributes": ["race"], "bootstrap": 300, "targets": ["uniform"]}
    out = _probe(per_template=True, **settings).analyze(samples)
    plain = _probe(**settings).analyze(samples)
    study = [m for m in out.metrics if "phrasing" not in m.subset]
    assert [(m.name, m.subset, m.value, m.ci) for m in study] == [(m.name, m.subset, m.value, m.ci)
                                                                   for m in plain.metrics]
    cell = {"attribute": "race", "target": "uniform", "k": 20, "concept": "bad", "group": "A"}
    found = {m.subset["phrasing"]: m for m in out.metrics if m.name == "skew" and "phrasing" in m.subset
             and {k: v for k, v in m.subset.items() if k != "phrasing"} == cell}
    assert found[2].ci[0] > 0 and found[1].ci[0] < 0  # over-retrieved with the planted template only
    reference = _reference(np.stack([frame[SCORE + p] for p in prompts]), race, 20, "uniform", "dvl")
    assert [found[1].value, found[2].value] == pytest.approx(reference["skew"][[1, 4], 0])  # "a bad ...", "this is bad"
    assert found["pooled"].value == pytest.approx(_metric(plain, "skew", **cell).value)
    assert found["pooled"].details["phrasing_values"] == [found[1].value, found[2].value]
    table = out.tables["phrasings"].frame.reset_index()
    row = table[(table["concept"] == "bad") & (table["group"] == "A")]
    assert row["found in"].tolist() == ["1 of 2 phrasings"]
    assert set(table["found in"]) >= {"0 of 2 phrasings"}
    # compare pairs each template's metrics
    metrics = [{"name": m.name, "subset": m.subset, "value": m.value} for m in out.metrics
               if m.subset.get("phrasing") != "pooled"]
    assert len(assert_statistics_are_metrics(_probe(per_template=True, **settings), samples, metrics)) == len(metrics)
    assert "every template is the study's" in out.tables["phrasings"].footnotes[0]
    assert "phrasings" not in _probe(per_template=True, **{**settings, "bootstrap": 0}).analyze(samples).tables
    with pytest.raises(ProbeError, match="per_template reads each template's query of each concept"):
        _probe(per_template=True, concepts=["good", "odd", "bad"], **settings).declare(samples)
