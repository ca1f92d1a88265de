"""Word influence for text-to-image models: planted truth, brute force, caching, the real paths."""

from __future__ import annotations

import itertools
import json
import os
from unittest import mock

import numpy as np
import pytest
from PIL import Image

import vlfair
from vlfair.cli import main
from vlfair.probes import run_probe
from vlfair.t2i.classifier import GroupClassifier
from vlfair.t2i.generators import CallableGenerator, ImageCache
from vlfair.t2i.influence import large_scale_prompts, run_prompt
from vlfair.t2i.transmuters import LexiconTransmuter, MLMTransmuter

# Planted world: P(female | prompt) = base + the effects of the words it contains.
EFFECTS = {"nurse": 0.35, "caring": 0.15, "hospital": 0.05, "confident": -0.1, "gym": -0.2, "doctor": -0.15,
           "salon": 0.2, "spa": 0.15, "smart": -0.05}
NO_PERSON_RATE = 0.05


def p_female(prompt: str) -> float:
    return float(np.clip(0.35 + sum(EFFECTS.get(w, 0.0) for w in prompt.split()), 0.02, 0.98))


class Planted:
    """Renders a red (female), blue (male) or green (no person) square; counts its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, prompts, seeds):
        images = []
        for prompt, seed in zip(prompts, seeds):
            rng = np.random.default_rng(seed)
            person, u = rng.random() >= NO_PERSON_RATE, rng.random()
            color = (0, 200, 0) if not person else (220, 0, 0) if u < p_female(prompt) else (0, 0, 220)
            images.append(Image.new("RGB", (8, 8), color))
        self.calls += len(images)
        return images


def by_colour(images):
    labels = []
    for image in images:
        r, g, b = image.getpixel((0, 0))[:3]
        labels.append("no_person" if g > 100 else "female" if r > b else "male")
    return labels


def _true_shares(r) -> dict[str, float]:
    return {",".join(map(str, v.replaced)): float(np.mean([p_female(p) for p in v.prompts])) for v in r.variants}


def _levels(shares: dict[str, float], n: int) -> dict[int, list[float]]:
    def P(subset):
        return shares[",".join(map(str, sorted(subset)))]

    out = {}
    for k in range(1, n + 1):
        out[k] = [float(np.mean([P(R) - P(R + (i,))
                                 for R in itertools.combinations([w for w in range(n) if w != i], k - 1)]))
                  for i in range(n)]
    return out


def _shapley(shares: dict[str, float], n: int) -> list[float]:
    def P(subset):
        return shares[",".join(map(str, sorted(subset)))]

    values = []
    for i in range(n):
        marginal = [P(order[: order.index(i)]) - P(order[: order.index(i)] + (i,))
                    for order in itertools.permutations(range(n))]
        values.append(float(np.mean(marginal)))
    return values


@pytest.mark.parametrize("prompt", ["a nurse at the hospital", "a confident caring nurse at the hospital gym"])
def test_planted_effects_lie_within_hoeffding_intervals_and_match_enumeration(prompt, tmp_path):
    cache = ImageCache(CallableGenerator(Planted(), "planted"), tmp_path)
    r = run_prompt(prompt, LexiconTransmuter(), cache, by_colour, "female", candidates=2, images_per_prompt=60,
                   max_images=10_000, log=lambda _: None)
    n = len(r.words)
    truth = _levels(_true_shares(r), n)
    for level, values in r.result["levels"].items():
        half = r.result["levels_ci_half_width"][level]
        for word, estimate, true in zip(r.words, values, truth[int(level)]):
            assert abs(estimate - true) <= half, (word, level, estimate, true, half)
    observed = _levels(r.shares, n)  # the pipeline's numbers are the enumeration over its own shares
    for level, values in r.result["levels"].items():
        np.testing.assert_allclose(values, observed[int(level)], atol=1e-12)
    np.testing.assert_allclose(r.result["shapley"], _shapley(r.shares, n), atol=1e-12)
    assert sum(r.no_person.values()) > 0  # some images showed nobody ...
    assert sum(r.counts.values()) + sum(r.no_person.values()) == r.images_used  # ... and were left out, not forced


def test_second_identical_run_makes_no_generator_calls(tmp_path, clip_encoder):
    planted = Planted()
    settings = {"prompts": ["a nurse at the hospital"], "candidates": 2, "images_per_prompt": 6,
                "transmuter": {"name": "lexicon"}, "words": "content",
                "max_level": None, "target_group": "female"}
    components = {"generator": CallableGenerator(planted, "planted"), "classifier": by_colour}
    first = run_probe("word-influence", clip_encoder, None, tmp_path / "one", cache_dir=tmp_path / "cache",
                      settings=settings, components=components)
    assert first["settings"]["generator_calls"] == planted.calls > 0
    second = run_probe("word-influence", clip_encoder, None, tmp_path / "two", cache_dir=tmp_path / "cache",
                       settings=settings, components=components)
    assert second["settings"]["generator_calls"] == 0 and planted.calls == first["settings"]["generator_calls"]
    assert [m["value"] for m in second["metrics"]] == [m["value"] for m in first["metrics"]]
    levels = [m for m in first["metrics"] if m["name"] == "word_influence"]
    assert {(m["subset"]["word"], m["subset"]["level"]) for m in levels} == {("nurse", 1), ("hospital", 1),
                                                                            ("nurse", 2), ("hospital", 2)}
    assert all(m["ci"][0] < m["value"] < m["ci"][1] for m in levels)
    assert (tmp_path / "one" / "variants_a_nurse_at_the_hospital.csv").exists()
    assert (tmp_path / "one" / "levels_a_nurse_at_the_hospital.png").exists()


def test_cost_is_printed_and_refused_beyond_max_images(tmp_path, capsys):
    from vlfair.logging import set_verbosity

    set_verbosity("info")  # the CLI's level: the cost line is information
    cache = ImageCache(CallableGenerator(Planted(), "planted"), tmp_path)
    with pytest.raises(ValueError, match="needs 48 images, more than max_images=40"):
        run_prompt("a nurse at the hospital", LexiconTransmuter(), cache, by_colour, "female", candidates=3,
                   images_per_prompt=4, max_images=40)
    assert ("3 variants x up to 3 candidate prompts x 4 image(s) + 12 of the original = 48 images"
            in capsys.readouterr().out)
    assert cache.calls == 0  # refused before generating anything


def test_transmuters(tmp_path):
    words = "a nurse at the hospital".split()
    lexicon = LexiconTransmuter()
    assert lexicon.candidates(words, [1], 2) == [["a", "doctor", "at", "the", "hospital"],
                                                  ["a", "caregiver", "at", "the", "hospital"]]
    with pytest.raises(ValueError, match="no replacements for 'banana'"):
        lexicon.candidates("a banana".split(), [1], 2)
    mlm = MLMTransmuter(str(vlfair.testing.tiny_fill_mask(tmp_path / "fill-mask")))
    for positions in ([1], [1, 4]):
        proposals = mlm.candidates(words, positions, 3)
        assert proposals and len({tuple(p) for p in proposals}) == len(proposals)
        for proposal in proposals:
            for p in positions:
                assert proposal[p] != words[p] and proposal[p].isalpha() and not proposal[p].startswith("##")
            assert [w for i, w in enumerate(proposal) if i not in positions] == [w for i, w in enumerate(words)
                                                                                 if i not in positions]


def test_group_classifier_counts_no_person_separately(clip_encoder):
    classifier = GroupClassifier(clip_encoder, crop=lambda image: None if image.getpixel((0, 0))[1] > 100 else image)
    labels = classifier([Image.new("RGB", (16, 16), (0, 200, 0)), Image.new("RGB", (16, 16), (200, 0, 0))])
    assert labels[0] == "no_person" and labels[1] in {"male", "female", "no_person"}
    strict = GroupClassifier(clip_encoder, {"male": "a photo of a male", "female": "a photo of a female"},
                             min_similarity=1.01)
    assert strict([Image.new("RGB", (16, 16), (90, 90, 90))]) == ["no_person"]


def test_diffusers_path_end_to_end_through_the_cli(tmp_path, clip_dir, capsys):
    pipeline = vlfair.testing.tiny_stable_diffusion(tmp_path / "tiny-sd")
    argv = ["run", "word-influence", "--model", str(clip_dir), "--generator", str(pipeline), "--steps", "2",
            "--size", "32", "--prompt", "a nurse at the hospital", "--set", "candidates=2",
            "--set", "images_per_prompt=2", "--transmuter", "lexicon", "--set", "words=content",
            "--set", "original_images=4", "--set", "max_level=null",
            "--dtype", "float32", "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]
    capsys.readouterr()
    assert main(argv) == 0
    printed = capsys.readouterr().err
    # the pipeline's own bars (its components, its text encoder's weights) only under --verbose
    assert "generating images" in printed and "Loading pipeline components" not in printed, printed
    assert main([*argv, "--verbose", "--out", str(tmp_path / "verbose")]) == 0
    verbose = capsys.readouterr().err
    assert "Loading pipeline components" in verbose and "Loading weights" in verbose
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["probe"] == "word-influence" and results["dataset"]["name"] == f"generated:{pipeline}"
    assert results["settings"]["generator"]["pipeline"] == str(pipeline)
    assert results["settings"]["generator_calls"] == results["dataset"]["num_rows"] == 16
    assert main(argv) == 0  # cached: the pipeline is not called again
    assert json.loads((tmp_path / "out" / "results.json").read_text())["settings"]["generator_calls"] == 0


def test_large_scale_mode(tmp_path, clip_encoder):
    assert len(large_scale_prompts()) == 150 and large_scale_prompts()[0] == "a confident doctor at the office"
    results = run_probe("word-influence", clip_encoder, None, tmp_path / "run", cache_dir=tmp_path / "cache",
                        settings={"large_scale": True, "candidates": 1, "images_per_prompt": 4, "original_images": 4,
                                  "transmuter": {"name": "lexicon"}, "words": "content", "max_level": None,
                                  "target_group": "female"},
                        components={"generator": CallableGenerator(Planted(), "planted"), "classifier": by_colour})
    means = {m["subset"]["word"]: m["value"] for m in results["metrics"] if m["name"] == "mean_word_influence"}
    assert len(means) == 16 and (tmp_path / "run" / "mean_word_influence.png").exists()
    per_prompt = [m for m in results["metrics"] if m["name"] == "word_influence" and m["subset"]["level"] == 1
                  and m["subset"]["word"] == "nurse"]
    assert len(per_prompt) == 30 and means["nurse"] == pytest.approx(np.mean([m["value"] for m in per_prompt]))


@pytest.mark.parametrize("code", [28, 13, 30])  # no space left, permission denied, read-only filesystem
def test_an_image_cache_that_cannot_be_written_is_a_warning_not_a_lost_run(tmp_path, monkeypatch, code):
    """The generated images are kept in memory and returned; the cache is named in one warning and
    not written again (the embedding cache does the same)."""
    from vlfair.cache import CacheWarning

    def full(path, write):
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr("vlfair.cache.atomic_write", full)  # the name cache.write_or_warn calls
    made = []
    cache = ImageCache(CallableGenerator(lambda prompts, seeds: made.extend(seeds) or [
        Image.new("RGB", (4, 4), (s % 256, 0, 0)) for s in seeds], "full"), tmp_path / "images")
    with pytest.warns(CacheWarning,
                      match=f"vlfair cache: cannot write .*{os.strerror(code)}.*going on without the cache"):
        images = cache.images([("a doctor", i) for i in range(3)])
    assert len(images) == 3 and len(made) == 3 and cache.directory is None
    assert sorted(image.getpixel((0, 0))[0] for image in images) == sorted(s % 256 for s in made)


def test_a_generator_s_precision_is_asked_for_on_a_cpu_never_chosen_by_its_instruction_set():
    """Issue 62: a CPU generates in float32 unless bf16 is asked for (it was float32 whatever was asked);
    float16 on a CPU is refused in one line; a GPU keeps bf16 (float16 without it)."""
    import torch

    from vlfair.t2i.generators import generator_dtype

    cpu = torch.device("cpu")
    assert generator_dtype("auto", cpu) == torch.float32
    assert generator_dtype("bfloat16", cpu) == torch.bfloat16
    with pytest.raises(ValueError, match="generator dtype float16 on the cpu: .* use a GPU for float16"):
        generator_dtype("float16", cpu)
    with mock.patch.object(torch.cuda, "is_bf16_supported", return_value=True):
        assert generator_dtype("auto", torch.device("cuda")) == torch.bfloat16
    with mock.patch.object(torch.cuda, "is_bf16_supported", return_value=False):
        assert generator_dtype("auto", torch.device("cuda")) == torch.float16
