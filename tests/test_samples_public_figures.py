"""The public-figures probe's samples: what each image's row holds, how rows are named, and what
vlfair compare finds between the demo world's biased and control encoders."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vlfair.compare import compare_runs, load_run
from vlfair.probes import probe_class


def _samples(demo, encoder: str):
    return load_run(demo[0] / encoder / "public-figures")


def test_each_image_s_row_holds_its_class_probabilities_right_classes_and_name_scores(demo):
    run = _samples(demo, "biased")
    frame, facts = run.samples.frame, run.samples.facts
    assert list(frame.columns[:5]) == ["row", "id", "category", "gender", "name"]
    assert facts == {k: v for k, v in run.results["settings"].items() if k not in ("schema", "limit")}
    assert facts["score"] == "softmax"
    probe = probe_class("public-figures")(run.results["probe_settings"])
    for group, spec in probe.settings.groups.items():
        in_group = frame["category"].isin(spec.folders).to_numpy()
        if not in_group.any():
            continue
        for level, level_spec in spec.levels.items():
            columns = [f"probability {group} level {level}: {c}" for c in level_spec.classes]
            probabilities = frame[columns].to_numpy(float)
            np.testing.assert_allclose(probabilities[in_group].sum(axis=1), 1.0, rtol=1e-5)  # softmax over the level
            assert np.isnan(probabilities[~in_group]).all()  # other groups' images: null
            truth = frame[f"right class {group} level {level}"]
            assert truth[~in_group].isna().all()
            correct = frame[f"correct {group} level {level}"].to_numpy(float)
            known = in_group & truth.notna().to_numpy()
            predicted = np.asarray(level_spec.classes, dtype=object)[probabilities[known].argmax(axis=1)]
            right = predicted == truth[known].to_numpy(object)
            # the tie rule reads the cosines (vlfair.measures.ties), which the samples hold as a softmax: where the
            # best class's log-probability leads every other by far more than a tie's (logit scale 100 x the
            # tolerance, about 3e-4), the study's argmax; where two are that close, the share of right ones among
            # the tied (a right class outside the close ones: 0); on the demo world one image of level 3 ties
            # three offices (1/3)
            gaps = np.log(probabilities[known].max(axis=1, keepdims=True)) - np.log(probabilities[known])
            close = gaps <= 1e-3
            alone = close.sum(axis=1) == 1
            np.testing.assert_array_equal(correct[known][alone], right[alone].astype(float))
            rights = np.asarray(level_spec.classes, dtype=object)[None, :] == truth[known].to_numpy(object)[:, None]
            assert ((correct[known][~alone] > 0) <= (close & rights)[~alone].any(axis=1)).all()
            fractional = (correct[known] > 0) & (correct[known] < 1)
            assert not (fractional & alone).any()
            assert np.isnan(correct[~known]).all()
    # retention: each image's similarity to its folder's names (sorted), and its own name first or not
    for folder in set(frame["category"]):
        rows = frame[frame["category"] == folder]
        names = sorted(set(rows["name"]))
        scores = rows[[f"name score {j}" for j in range(len(names))]].to_numpy(float)
        assert np.isfinite(scores).all()
        if f"name score {len(names)}" in frame:
            assert rows[f"name score {len(names)}"].isna().all()
        own = np.array([names.index(n) for n in rows["name"]])
        np.testing.assert_array_equal(rows["own name first"].to_numpy(float), (scores.argmax(axis=1) == own))
        text_score = next(m for m in run.results["metrics"]
                          if m["name"] == "retention_text_score" and m["subset"] == {"folder": folder})
        assert text_score["value"] == pytest.approx(rows["own name first"].mean(), rel=1e-12)


def test_compare_finds_the_planted_bias_ratio_with_its_sign(demo):
    """The biased world encoder calls women 'politician' less often than men (b < 1), the control
    one does not: the paired difference biased - control is negative, its interval excludes 0 and
    the control run is the less biased."""
    biased, control = demo[0] / "biased" / "public-figures", demo[0] / "control" / "public-figures"
    content = compare_runs([biased, control]).content
    differences = {(d["metric"], json.dumps(d["subset"], sort_keys=True)): d for d in content["differences"]}
    ratio = differences[("bias_ratio", json.dumps({"folder": "politicians", "class": "politician"}, sort_keys=True))]
    assert ratio["value_a"] < 1 and ratio["difference"] < 0 and ratio["difference_ci"][1] < 0
    assert ratio["neutral"] == 1.0 and ratio["ratio"] < 1
    assert ratio["verdict"] == "b_less_biased"
    metrics = {d["metric"] for d in content["differences"]}
    assert {"class_score", "accuracy", "group_rate_gap", "bias_ratio", "retention_text_score"} <= metrics
    assert content["uncompared"] == [{"metric": "retention_image_score",
                                      "reason": probe_class("public-figures").uncompared["retention_image_score"]}]
    # one image per name: the metric has no interval; the paired one resamples the folder's images
    for entry in content["differences"]:
        if entry["metric"] == "retention_text_score":
            low, high = entry["difference_ci"]
            assert low < high, entry


def test_rows_are_named_by_their_images_not_their_order(clip_dir, tmp_path):
    """The same images in another order: the same ids, each with its own row index in the data as
    given and the same values."""
    import vlfair
    from vlfair.probes import run_probe

    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    data = vlfair.load_dataset("synthetic:pfi", size=20)
    reverse = data.select(list(range(data.num_rows))[::-1])
    frames = []
    for name, dataset in (("given", data), ("reversed", reverse)):
        run_probe("public-figures", encoder, dataset, tmp_path / name, cache_dir=None, settings={"bootstrap": 0})
        frames.append(load_run(tmp_path / name).samples.frame.set_index("id"))
    given, reversed_ = frames
    assert given.index.is_unique and set(given.index) == set(reversed_.index)
    reversed_ = reversed_.loc[given.index]
    np.testing.assert_array_equal(reversed_["row"].to_numpy(), data.num_rows - 1 - given["row"].to_numpy())
    for column in ("category", "gender", "name"):
        assert (given[column] == reversed_[column]).all()
    values = [c for c in given.columns if c.startswith(("probability ", "name score "))]
    np.testing.assert_allclose(reversed_[values].to_numpy(float), given[values].to_numpy(float), rtol=1e-4,
                               atol=1e-6)


def test_compare_declares_exactly_what_a_run_of_edge_cases_reports(demo):
    """A level of a folder with no image of a right class, a folder whose images are one person's (no
    retention), and a gender of one image (no bias ratio where it is): the run reports none of those
    metrics, and compare's declarations are the run's metrics, one for one (they crashed or declared a
    ratio the run did not report before the declarations checked what the measures check)."""
    import dataclasses

    from vlfair.testing import assert_statistics_are_metrics

    run = _samples(demo, "biased")
    frame = run.samples.frame.copy()
    probe = probe_class("public-figures")(run.results["probe_settings"])
    group, spec = next(iter(probe.settings.groups.items()))
    folder, level = spec.folders[0], max(spec.levels)
    in_folder = (frame["category"] == folder).to_numpy()
    frame.loc[in_folder, [f"correct {group} level {level}", f"right class {group} level {level}"]] = np.nan
    other = next(f for f in frame["category"].unique() if f != folder)
    in_other = (frame["category"] == other).to_numpy()  # one person's images: as a run writes them
    frame.loc[in_other, "name"] = frame.loc[in_other, "name"].iloc[0]
    frame.loc[in_other, "own name first"] = np.nan
    frame.loc[np.flatnonzero(in_folder)[0], "gender"] = "Nonbinary"
    samples = dataclasses.replace(run.samples, frame=frame)
    out = probe.analyze_samples(samples)
    metrics = [dataclasses.asdict(m) for m in out.metrics]
    assert not any(m["name"] == "accuracy" and m["subset"] == {"folder": folder, "level": level} for m in metrics)
    assert not any(m["name"] == "retention_text_score" and m["subset"] == {"folder": other} for m in metrics)
    assert not any(m["name"] == "bias_ratio" and m["subset"]["folder"] == folder for m in metrics)
    assert_statistics_are_metrics(probe, samples, metrics)
