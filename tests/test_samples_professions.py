"""The professions probe's per-sample results: each image's CLIPScore with its own profession's
prompt, named by the image; what vlfair compare finds between the demo world's encoders, and
what a rescore keeps of the median images."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from vlfair.compare import compare_runs, rescore


def _by_subset(differences: list[dict], metric: str, **subset) -> dict:
    return next(d for d in differences if d["metric"] == metric and d["subset"] == subset)


def test_compare_finds_the_planted_gender_gaps_with_their_sign(demo):
    """The biased world encoder plants a gender gap in doctor and nurse (Female lower on doctor,
    Male lower on nurse), none in lawyer and scientist; the control plants none."""
    out = demo[0]
    comparison = compare_runs([out / "biased" / "professions", out / "control" / "professions"])
    content = comparison.content
    assert content["rows"]["compared"] == content["rows"]["per_run"][0] and content["uncompared"] == []
    differences = content["differences"]
    for profession in ("doctor", "nurse"):
        gap = _by_subset(differences, "group_score_gap", profession=profession, attribute="gender")
        assert gap["neutral"] == 0.0 and gap["difference"] > 0 and gap["difference_ci"][0] > 0, gap
        assert gap["verdict"] == "b_less_biased", gap  # the control is closer to no gap
    for profession in ("lawyer", "scientist"):
        gap = _by_subset(differences, "group_score_gap", profession=profession, attribute="gender")
        assert gap["verdict"] == "no_difference", gap
    doctor = _by_subset(differences, "mean_clipscore", profession="doctor", attribute="gender", group="Female")
    nurse = _by_subset(differences, "mean_clipscore", profession="nurse", attribute="gender", group="Male")
    assert doctor["neutral"] is None and doctor["verdict"] == "b_higher" and nurse["verdict"] == "b_higher"
    # every profession x group mean and every profession's gap, by race and by gender
    professions = {d["subset"]["profession"] for d in differences}
    groups = {"race": 4, "gender": 2}
    assert len(differences) == len(professions) * sum(count + 1 for count in groups.values())


def test_rows_are_named_by_their_image_not_their_position_or_spelling(clip_encoder, tmp_path):
    """The same images in reverse order, their labels spelt otherwise ("Latinx", upper case): the
    same ids, rows that index the data as given, the study's spellings, the same scores; compare
    pairs the two runs image by image and finds no difference."""
    import vlfair
    from vlfair.probes import measure_probe

    settings = {"bootstrap": 0, "n_permutations": 0}
    data = vlfair.load_dataset("synthetic:professions")
    respelt = data.select(range(data.num_rows - 1, -1, -1)).map(lambda row: {
        "race": "Latinx" if row["race"] == "Latin American" else row["race"],
        "profession": row["profession"].upper()})
    runs = {}
    for name, dataset in (("given", data), ("respelt", respelt)):
        run = measure_probe("professions", clip_encoder, dataset, cache_dir=None, settings=settings)
        run.write(tmp_path / name)
        runs[name] = run.output.samples.frame
    given, other = runs["given"], runs["respelt"]
    assert list(given.columns) == ["row", "id", "profession", "gender", "race", "clipscore"]
    assert given["row"].tolist() == list(range(data.num_rows))
    assert other["row"].tolist() == list(range(data.num_rows))  # the respelt data's own rows
    assert other["id"].tolist() == given["id"].tolist()[::-1]
    matched = other.set_index("id").loc[given["id"]]
    for column in ("profession", "gender", "race"):
        assert matched[column].tolist() == given[column].tolist(), column
    np.testing.assert_allclose(matched["clipscore"], given["clipscore"], rtol=1e-5)
    # the data's fingerprint differs (other labels, another order): compared on the ids they share, all of them
    comparison = compare_runs([tmp_path / "given", tmp_path / "respelt"], on_common_rows=True, bootstrap=50,
                              n_permutations=200)
    assert comparison.content["rows"]["compared"] == data.num_rows
    for difference in comparison.content["differences"]:
        assert abs(difference["difference"]) < 1e-3, difference
        assert difference["verdict"] == "no_difference", difference


def test_a_rescore_keeps_the_median_images_table_not_its_pictures(demo, tmp_path):
    """Which image is each cell's median follows from the scores: its table is rescored; the grid of
    pictures needs the images, so only the run itself draws it."""
    folder = demo[0] / "biased" / "professions"
    rescore(folder, tmp_path / "again")
    for attribute in ("race", "gender"):
        original = pd.read_csv(folder / f"median_images_{attribute}.csv")
        again = pd.read_csv(tmp_path / "again" / f"median_images_{attribute}.csv")
        pd.testing.assert_frame_equal(again, original)
        assert (folder / f"median_images_{attribute}.png").exists()
        assert not (tmp_path / "again" / f"median_images_{attribute}.png").exists()
        assert (tmp_path / "again" / f"heatmap_{attribute}.png").exists()
    assert "Rescored from samples.parquet" in (tmp_path / "again" / "report.html").read_text()


def test_a_profession_without_a_gap_still_compares_its_means():
    """A group of one image: the run reports its means without a gap (group_score_gap needs 2
    images a group), and so do the comparisons."""
    from vlfair import paired
    from vlfair.probes import probe_class
    from vlfair.samples import Samples

    probe = probe_class("professions")({"bootstrap": 0, "n_permutations": 0, "attributes": ["gender"]})
    frame = pd.DataFrame({"row": range(7), "id": [f"{i:016x}" for i in range(7)],
                          "profession": ["doctor"] * 3 + ["nurse"] * 4,
                          "gender": ["Female", "Male", "Male", "Female", "Female", "Male", "Male"],
                          "race": ["Asian"] * 7, "clipscore": [20.0, 22.0, 24.5, 30.0, 32.0, 26.0, 27.0]})
    samples = Samples(frame, {"prompt": "A photo of a {profession}", "layout": {}})
    output = probe.analyze(samples)
    reported = {(m.name, json.dumps(m.subset, sort_keys=True)): m.value for m in output.metrics}
    assert [json.loads(subset)["profession"] for name, subset in reported if name == "group_score_gap"] == ["nurse"]
    assert any(w.startswith("doctor by gender") for w in output.warnings)
    compared = {}
    for row_set in probe.comparisons(samples):
        values = frame.loc[row_set.rows, list(row_set.columns)].to_numpy(float)
        for found in paired.compare(row_set, values, values, bootstrap=0, n_permutations=0):
            compared[(found.name, json.dumps(found.subset, sort_keys=True))] = found.value_a
    assert compared.keys() == reported.keys() and len(reported) == 5  # 2 + 2 means, nurse's gap
    for key, value in reported.items():
        assert compared[key] == pytest.approx(value, rel=1e-12), key
