"""Validity: vlfair finds the biases planted in a synthetic world, and nothing in its control.

The world's two encoders are trained once per session (about a minute each on 2 cores) into a
shared cache (conftest's ``demo_cache``); the demo, the validity checks, the dose-response and the
demo Space tests reuse them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vlfair.cli import main
from vlfair.demo import datasets as world_data
from vlfair.demo.run import _professions, _traits
from vlfair.demo.train import trained_encoder, world_encoder
from vlfair.demo.world import Planting


@pytest.fixture(scope="session")
def demo(demo_cache, tmp_path_factory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("demo-out")
    assert main(["demo", "--out", str(out), "--cache-dir", str(demo_cache)]) == 0
    return out, json.loads((out / "summary.json").read_text())


def test_demo_writes_summary_and_report(demo):
    out, entries = demo
    probes = {e["probe"] for e in entries}
    assert probes == {"professions", "traits", "word-influence", "multilingual", "public-figures"}
    for entry in entries:
        assert set(entry) >= {"probe", "measure", "subset", "encoder", "planted", "measured", "ci", "detected"}
        assert entry["encoder"] in ("biased", "control")
    report = (out / "report.html").read_text()
    assert report.index("synthetic world with planted biases") < report.index("<h2>professions</h2>")
    assert "What was planted" in report and report.count("data:image/png;base64,") >= 10
    for encoder in ("biased", "control"):
        for probe in probes:
            assert (out / encoder / probe / "results.json").exists() and (out / encoder / probe / "report.html").exists()


def _direction(planted: str) -> int:
    return -1 if str(planted).startswith("<") else 1 if str(planted).startswith(">") else 0


def test_biased_encoder_shows_every_planted_bias_with_its_sign(demo):
    _, entries = demo
    for entry in (e for e in entries if e["encoder"] == "biased"):
        if entry["probe"] == "word-influence":
            continue  # checked against the planted values below
        if entry["ci"] is None:  # F-tests
            assert entry["detected"], entry
            continue
        sign = _direction(entry["planted"])
        assert sign != 0, entry
        assert entry["detected"] and np.sign(entry["measured"] - entry["neutral"]) == sign, entry


def test_control_encoder_intervals_cover_neutral(demo):
    _, entries = demo
    for entry in (e for e in entries if e["encoder"] == "control"):
        if entry["ci"] is None:
            assert not entry["detected"], entry  # F-tests: no significant difference between races
        else:
            assert entry["ci"][0] <= entry["neutral"] <= entry["ci"][1], entry


def test_word_influence_planted_effects_lie_within_the_intervals(demo):
    _, entries = demo
    word_entries = [e for e in entries if e["probe"] == "word-influence"]
    assert len(word_entries) == 4
    for entry in word_entries:
        assert entry["ci"][0] <= entry["planted"] <= entry["ci"][1], entry
    nurse = next(e for e in word_entries if e["encoder"] == "biased" and e["subset"] == {"word": "nurse"})
    assert nurse["planted"] == pytest.approx(0.4) and nurse["detected"]


def test_dose_response(demo, demo_cache, tmp_path):
    """More skew in the captions -> more measured bias (bias ratio and trait F-test)."""
    worlds = {"none": Planting.control(), "some": Planting(profession_skew=0.7, trait_skew=0.5),
              "strong": Planting()}
    professions, faces = world_data.professions(), world_data.fairface()
    doctor_ratio, trait_f = {}, {}
    for level, planting in worlds.items():
        encoder = world_encoder(planting, demo_cache, log=lambda _: None)
        doctor_ratio[level] = next(e["measured"] for e in _professions(encoder, level, professions, tmp_path / level,
                                                                        None, True) if e["subset"]["profession"] == "doctor")
        trait_f[level] = np.mean([e["measured"] for e in _traits(encoder, level, faces, tmp_path / level, None, True)
                                  if e["measure"].startswith("trait_anova")])
    assert doctor_ratio["none"] > doctor_ratio["some"] > doctor_ratio["strong"], doctor_ratio
    assert trait_f["none"] < trait_f["some"] < trait_f["strong"], trait_f


def test_concurrent_callers_share_one_training(tmp_path):
    """Two Space requests asking for the same world encoder: one trains, the other waits and reads it."""
    import threading

    logs: list[str] = []
    paths: list[Path] = []

    def ask():
        paths.append(trained_encoder(Planting(), tmp_path, steps=20, log=logs.append))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(paths) == 2 and paths[0] == paths[1] and (paths[0] / "model.safetensors").exists()
    assert sum(line.startswith("training the world encoder") for line in logs) == 1
    assert [p.name for p in (tmp_path / "demo").iterdir()] == [paths[0].name]  # no staging left behind
