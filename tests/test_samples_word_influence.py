"""word-influence's samples: one row per generated image, identified by what made it (so two
generators or two classifiers pair image by image), a rescore from them alone, and paired
differences between two models with the planted sign."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from test_t2i import by_colour

from vlfair.compare import compare_runs, load_run, rescore
from vlfair.probes import ProbeError, probe_class, run_probe
from vlfair.t2i.generators import CallableGenerator, sample_seed
from vlfair.testing import assert_statistics_are_metrics


def _planted(effects: dict[str, float], no_person=lambda prompt: False):
    """Red (female), blue (male) or green (no person) squares: P(female) = 0.35 + the prompt's effects."""
    def generate(prompts, seeds):
        images = []
        for prompt, seed in zip(prompts, seeds):
            rng = np.random.default_rng(seed)
            person, u = rng.random() >= 0.05 and not no_person(prompt), rng.random()
            p = float(np.clip(0.35 + sum(effects.get(w, 0.0) for w in prompt.split()), 0.02, 0.98))
            colour = (0, 200, 0) if not person else (220, 0, 0) if u < p else (0, 0, 220)
            images.append(Image.new("RGB", (8, 8), colour))
        return images
    return generate


SETTINGS = {"prompts": ["a nurse at the hospital"], "transmuter": {"name": "lexicon"}, "words": "content",
            "candidates": 3, "images_per_prompt": 20, "original_images": 60, "target_group": "female",
            "max_level": None}


def _run(encoder, folder, effects, settings=None, **generator):
    components = {"generator": CallableGenerator(_planted(effects, **generator), f"planted {sorted(effects.items())}"),
                  "classifier": by_colour}
    return run_probe("word-influence", encoder, None, folder, cache_dir=None, settings={**SETTINGS, **(settings or {})},
                     components=components)


def _assert_statistics_are_metrics(folder):
    """Each paired statistic on the run's own rows is the run's metric; every metric is compared,
    those without a value too (as nan)."""
    loaded = load_run(folder)
    probe = probe_class("word-influence")(loaded.results["probe_settings"])
    seen = assert_statistics_are_metrics(probe, loaded.samples, loaded.results["metrics"])
    assert seen == {(m["name"], json.dumps(m["subset"], sort_keys=True)) for m in loaded.results["metrics"]}
    assert not probe.uncompared
    return loaded


def test_a_sample_is_a_generated_image_named_by_what_made_it(clip_encoder, tmp_path):
    results = _run(clip_encoder, tmp_path / "a", {"nurse": 0.4})
    frame = load_run(tmp_path / "a").samples.frame
    assert list(frame.columns) == ["row", "id", "prompt", "variant", "replaced", "candidate", "variant_prompt",
                                   "image_index", "seed", "is female", "is male", "no person"]
    assert len(frame) == results["settings"]["images_used"] == 60 + 3 * 3 * 20  # nurse, hospital, both
    assert frame["row"].tolist() == list(range(len(frame))) and frame["id"].is_unique
    assert frame["variant"].unique().tolist() == ["(original)", "nurse", "hospital", "nurse + hospital"]
    made = zip(frame["variant_prompt"], frame["image_index"])
    assert frame["seed"].tolist() == [sample_seed(prompt, j, 0) for prompt, j in made]
    labels = frame[["is female", "is male", "no person"]].to_numpy()
    assert (labels.sum(axis=1) == 1).all() and frame["no person"].sum() == results["settings"]["no_person_images"] > 0
    # another generator (and no image in common) run with the same settings: the same ids, row by row
    _run(clip_encoder, tmp_path / "b", {})
    other = load_run(tmp_path / "b").samples.frame
    assert other["id"].tolist() == frame["id"].tolist()
    assert not other["is female"].equals(frame["is female"])
    # another seed draws other images: other ids
    _run(clip_encoder, tmp_path / "c", {"nurse": 0.4}, {"seed": 1})
    assert not set(load_run(tmp_path / "c").samples.frame["id"]) & set(frame["id"])


def test_rescore_is_exact_and_an_empty_variant_stays_undefined(clip_encoder, tmp_path):
    """A variant whose every image shows no person has no share (None in the run, nan in the
    paired statistics), its level is incomplete, and a rescore gives every number again."""
    original = _run(clip_encoder, tmp_path / "run", {"nurse": 0.4},
                    no_person=lambda prompt: "nurse" not in prompt and "hospital" not in prompt)
    empty = [m for m in original["metrics"] if m["value"] is None]
    assert empty and {m["subset"]["variant"] for m in empty} == {"nurse + hospital"}
    assert {m["subset"]["level"] for m in original["metrics"] if m["name"] == "word_influence"} == {1}
    again = rescore(tmp_path / "run", tmp_path / "again")
    for key in ("metrics", "settings", "warnings", "published", "dataset"):
        assert again[key] == original[key], key
    assert not list((tmp_path / "again").glob("images_*.png")) and list((tmp_path / "run").glob("images_*.png"))
    assert sorted(p.name for p in (tmp_path / "again").glob("*.csv")) == \
        sorted(p.name for p in (tmp_path / "run").glob("*.csv"))
    _assert_statistics_are_metrics(tmp_path / "run")


def test_large_scale_mean_influence_is_compared(clip_encoder, tmp_path):
    settings = {"large_scale": True, "candidates": 1, "images_per_prompt": 4, "original_images": 4, "max_level": 1}
    original = _run(clip_encoder, tmp_path / "run", {"nurse": 0.4}, settings)
    assert rescore(tmp_path / "run", None)["metrics"] == original["metrics"]
    _assert_statistics_are_metrics(tmp_path / "run")


def test_the_planted_word_is_found_more_influential_in_the_biased_world(demo):
    """The demo world's biased generator and encoder against the control ones, on the same
    generated prompts and seeds: 'nurse' moves the share of women in the biased world only."""
    out, _ = demo
    runs = [out / world / "word-influence" for world in ("biased", "control")]
    comparison = compare_runs(runs).content
    assert comparison["rows"]["compared"] == load_run(runs[0]).results["samples"]["rows"]
    found = {(d["metric"], d["subset"].get("word"), d["subset"].get("variant")): d for d in comparison["differences"]}
    nurse = found[("word_influence", "nurse", None)]
    assert nurse["difference"] > 0 and nurse["difference_ci"][0] > 0 and nurse["verdict"] == "b_less_biased"
    assert found[("word_influence", "hospital", None)]["verdict"] == "no_difference"
    original = found[("target_share", None, "(original)")]
    assert original["value_a"] > original["value_b"] and original["verdict"] == "a_higher"


def test_a_repeated_prompt_is_refused(clip_encoder, tmp_path):
    with pytest.raises(ProbeError, match="given more than once"):
        _run(clip_encoder, tmp_path, {}, {"prompts": ["a nurse at the hospital", "a nurse at the hospital"]})
