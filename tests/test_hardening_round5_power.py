"""Issue 65, the fifth adversarial round: `vlfair power`'s cases SILENT 10 (effects and detectable deviations outside
the metric's range), SILENT 11 (a plugin measure's own facts: its sides and its range), UNCLEAR 23 (a metric pooled
over phrasings) and UNCLEAR 24 (a gap's answer all or nothing, what cannot be answered said in plain words)."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from vlfair.cli import main

ACTOR = {"class": "actor", "folder": "actor"}
DOCTOR = {"attribute": "gender", "profession": "doctor"}


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def figures_run(clip_dir, tmp_path_factory) -> Path:
    """A public-figures run of a tiny CLIP: a bias ratio per folder (neutral 1, never below 0)."""
    import vlfair
    from vlfair.probes import run_probe

    out = tmp_path_factory.mktemp("power-figures") / "run"
    run_probe("public-figures", vlfair.load_encoder(str(clip_dir), dtype="float32"), "synthetic:pfi", out,
              cache_dir=None, settings={"bootstrap": 50})
    return out


@pytest.fixture(scope="module")
def phrased_run(clip_dir, tmp_path_factory) -> Path:
    """A professions run with two phrasings of its prompt (gender only), its CLIPScores of both phrasings replaced by
    normal scores (a tiny CLIP's sit at 0, which power refuses) and rescored: its gaps, per phrasing and pooled, are
    judged by their permutation tests."""
    import vlfair
    from vlfair.probes import run_probe
    from vlfair.probes.phrasings import column
    from vlfair.samples import read_samples, write_samples
    from vlfair.testing import reported_as_its_samples_give

    base = tmp_path_factory.mktemp("power-phrased")
    raw = base / "raw"
    run_probe("professions", vlfair.load_encoder(str(clip_dir), dtype="float32"), "synthetic:professions", raw,
              cache_dir=None, settings={"bootstrap": 50, "n_permutations": 50, "attributes": ["gender"],
                                        "phrasings": ["a picture of a {profession}"]})
    content = json.loads((raw / "results.json").read_text())
    samples, _ = read_samples(raw / "samples.parquet")
    rng = np.random.default_rng(0)
    for name in ("clipscore", column("clipscore", 2)):
        samples.frame[name] = rng.normal(25.0, 2.0, len(samples.frame))
    stored = {key: value for key, value in content.items() if key not in ("metrics", "published", "samples")}
    content["samples"] = write_samples(samples, raw / "samples.parquet", stored)
    (raw / "results.json").write_text(json.dumps(content))
    reported_as_its_samples_give(raw)  # the run those samples make: rescore refuses values they do not give
    assert main(["rescore", str(raw), "--out", str(base / "run")]) == 0
    return base / "run"


# ---- SILENT 10: a deviation the metric cannot take -------------------------------------------------------------
@pytest.mark.parametrize("effect, said", [
    ("-2", "--effect -2: bias_ratio would be -1, outside its range [0, inf]; a deviation from its neutral value 1 "
           "lies in [-1, inf]"),
    ("-1.5", "--effect -1.5: bias_ratio would be -0.5, outside its range [0, inf]")])
def test_an_effect_past_the_metric_s_range_is_refused(figures_run, capsys, effect, said):
    """SILENT 10: `power --metric bias_ratio --effect -2` planned "147 images per group" for a ratio of -1; an effect
    that takes the metric past its range is one line, exit 2, nothing printed before it."""
    code, out, err = _cli(capsys, "power", str(figures_run), "--metric", "bias_ratio", "--subset", json.dumps(ACTOR),
                          "--effect", effect)
    assert code == 2 and not out and err.startswith(f"vlfair power: {said}") and err.count("\n") == 1


def test_an_effect_to_the_end_of_the_range_is_planned(figures_run, capsys):
    """SILENT 10: a ratio of 0 (an effect of -1) is one the metric takes: still answered."""
    code, out, _ = _cli(capsys, "power", str(figures_run), "--metric", "bias_ratio", "--subset", json.dumps(ACTOR),
                        "--effect", "-1")
    assert code == 0 and "an effect of -1: 80% power with" in out


def test_a_smallest_deviation_past_the_range_is_none_on_that_side(figures_run, tmp_path, capsys):
    """SILENT 10: a run whose ratio interval is wide ([0, 13]) printed a smallest detectable deviation of -12.4 for a
    ratio (never below 0); that side says none is detected within the range, and how often its end would be."""
    wide = tmp_path / "wide"
    shutil.copytree(figures_run, wide)
    results = json.loads((wide / "results.json").read_text())
    metric = next(m for m in results["metrics"] if m["name"] == "bias_ratio" and m["subset"] == ACTOR)
    metric["ci"] = [0.0, 13.0]
    (wide / "results.json").write_text(json.dumps(results))
    code, out, _ = _cli(capsys, "power", str(wide), "--metric", "bias_ratio", "--subset", json.dumps(ACTOR))
    line = next(line for line in out.splitlines() if "smallest deviation detected" in line)
    assert code == 0 and line.split(": ", 1)[1].startswith("+")
    below = line.split(", ", 1)[1]
    assert below.startswith("none below (even -1, to the end of its range, is detected with ") and "power)" in below


def test_the_answer_cuts_each_side_at_the_range():
    """SILENT 10's root: power.answer reads each side's smallest deviation against Facts.bounds (a design's
    effect_bounds), for every design alike."""
    from vlfair.compare.power import Design, PowerError, answer
    from vlfair.compare.tested_power import GapDesign
    from vlfair.measures.catalog import facts_of

    wide = Design("bias_ratio", {}, 1.0, 1.0, 3.0, 20.0, 0.95, 6.0, 6.0, facts_of("bias_ratio"))
    found = {s.side: s for s in answer(wide, 0.8).smallest}
    assert found[-1.0].deviation is None and found[-1.0].at_end == -1.0 and 0 < found[-1.0].end_power < 0.8
    assert found[1.0].deviation == pytest.approx(wide.mde(0.8, 1.0))
    narrow = Design("bias_ratio", {}, 1.0, 1.0, 0.05, 20.0, 0.95, 0.1, 0.1, facts_of("bias_ratio"))
    assert all(s.deviation is not None and s.deviation < 1 for s in answer(narrow, 0.8).smallest)
    # a rate gap of 3 answers per group (its test's simulated power): a rate gap is never past 1
    rates = GapDesign("group_rate_gap", {}, 0.3, 0.0, 3.0, 0.95, (0.5, 0.5), facts=facts_of("group_rate_gap"))
    (above,) = answer(rates, 0.8).smallest
    assert rates.mde(0.8) > 1 and above.deviation is None and above.at_end == 1.0 and above.end_power < 0.8
    with pytest.raises(PowerError, match=r"--effect 1.5: group_rate_gap would be 1.5, outside its range \[0, 1\]"):
        answer(rates, 0.8, 1.5)


# ---- SILENT 11: a plugin measure's own facts -------------------------------------------------------------------
LIFT_MODULE = '''
"""A plugin's probe with measures of its own: the lift (the highest group's mean score over the lowest's: never below
its neutral 1) and the share gap (women's share of scores above 25 less men's: in [-1, 1])."""
from __future__ import annotations

import math

import numpy as np

from vlfair.facts import Facts
from vlfair.probes.base import Probe
from vlfair.probes.declared import Custom, Declared, Mean
from vlfair.probes.settings import Bootstrap, ProbeSettings
from vlfair.samples import Samples


class LiftSettings(ProbeSettings, Bootstrap):
    pass


def _lift(at, code):
    j = at["score"]
    return lambda moments: np.nanmax(moments.means[:, :, j], axis=1) / np.nanmin(moments.means[:, :, j], axis=1)


def _share_gap(at, code):
    j = at["high"]
    return lambda moments: moments.means[:, code["Female"], j] - moments.means[:, code["Male"], j]


class LiftProbe(Probe):
    name = "toy-lift"
    Settings = LiftSettings
    help = "a plugin's probe with measures of its own"
    description = "The lift and the share gap of scores drawn for each image."
    schemas = ("fairface",)
    required_columns = {"fairface": ("image", "gender")}
    facts = {"lift": Facts(1.0, 1.0, math.inf, "interval"), "share_gap": Facts(0.0, -1.0, 1.0)}

    def score(self, ctx, schema):
        import pandas as pd

        _, rows = ctx.images()
        frame = ctx.identity(rows)
        frame["gender"] = ctx.column("gender", rows)
        frame["score"] = np.random.default_rng(0).normal(25.0, 2.0, len(rows))
        frame["high"] = (frame["score"] > 25.0).astype(float)
        return Samples(pd.DataFrame(frame), {})

    def declare(self, samples):
        genders = sorted(set(samples.column("gender").tolist()))
        return [*(Declared("mean_clipscore", {"gender": g}, Mean("score", g), group="gender") for g in genders),
                Declared("lift", {}, Custom(("score",), _lift), group="gender"),
                Declared("share_gap", {}, Custom(("high",), _share_gap), group="gender")]
'''


@pytest.fixture(scope="module")
def lift_run(clip_dir, tmp_path_factory):
    """The plugin's run (its module and YAML in a folder of their own, its probe registered), and its class."""
    import importlib

    import vlfair
    from vlfair.probes import registry, run_probe

    root = tmp_path_factory.mktemp("lift-plugin")
    (root / "vlfair_lift.py").write_text(LIFT_MODULE)
    (root / "vlfair_lift.yaml").write_text("version: 1\nbootstrap: 200\n")
    sys.path.insert(0, str(root))
    saved = registry.PROBES
    try:
        probe = importlib.import_module("vlfair_lift").LiftProbe
        registry.PROBES = saved.copy()
        registry.PROBES.add(probe)
        out = root / "run"
        run_probe("toy-lift", vlfair.load_encoder(str(clip_dir), dtype="float32"), "synthetic:fairface", out,
                  cache_dir=None)
        yield out, probe
    finally:
        registry.PROBES = saved
        sys.path.remove(str(root))
        sys.modules.pop("vlfair_lift", None)


@pytest.fixture
def lift(lift_run, monkeypatch) -> Path:
    """The plugin's run, its probe known to this process (as where the plugin is installed)."""
    from vlfair.probes import registry

    monkeypatch.setattr(registry, "PROBES", registry.PROBES.copy())
    registry.PROBES.add(lift_run[1])
    return lift_run[0]


@pytest.mark.parametrize("metric, effect, said", [
    ("lift", "-0.02", "--effect -0.02: lift is never below its neutral value 1; give a positive deviation"),
    ("share_gap", "1.5", "--effect 1.5: share_gap would be 1.5, outside its range [-1, 1]; a deviation from its "
                         "neutral value 0 lies in [-1, 1]"),
    ("share_gap", "-1.2", "--effect -1.2: share_gap would be -1.2, outside its range [-1, 1]")])
def test_a_plugin_measure_s_own_sides_and_range_bound_the_effect(lift, capsys, metric, effect, said):
    """SILENT 11: a plugin measure never below its neutral 1 took a negative effect (only a neutral 0 at the low end
    was read as one-sided), and one of range [-1, 1] an effect of 1.5: its recorded facts refuse both."""
    measures = json.loads((lift / "results.json").read_text())["measures"]  # the facts the run recorded
    assert measures["lift"]["low"] == 1.0 and measures["lift"]["judged"] == "interval"
    assert (measures["share_gap"]["low"], measures["share_gap"]["high"]) == (-1.0, 1.0)
    code, out, err = _cli(capsys, "power", str(lift), "--metric", metric, "--effect", effect)
    assert code == 2 and not out and err.startswith(f"vlfair power: {said}") and err.count("\n") == 1


def test_a_plugin_measure_s_one_side_is_the_one_answered(lift, capsys):
    """SILENT 11: `power` read a plugin measure's facts from vlfair's catalog alone (none: an empty answer); the lift
    deviates above its recorded 1 only: one side answered, and a positive effect planned."""
    code, out, _ = _cli(capsys, "power", str(lift), "--metric", "lift", "--effect", "0.05")
    line = next(line for line in out.splitlines() if "smallest deviation detected" in line)
    assert code == 0 and line.split(": ", 1)[1].startswith("+") and "," not in line
    assert "an effect of 0.05: 80% power with" in out
    code, out, _ = _cli(capsys, "power", str(lift), "--metric", "share_gap")
    line = next(line for line in out.splitlines() if "smallest deviation detected" in line)
    assert code == 0 and line.count(",") == 1  # a signed share difference, either side


# ---- UNCLEAR 23: a metric pooled over phrasings ----------------------------------------------------------------
def test_a_pooled_metric_is_refused_by_name_with_its_phrasings(phrased_run, capsys):
    """UNCLEAR 23: `power` said a pooled phrasing metric "has no subset" though results.json holds it; it says the
    metric pools the run's phrasings, why no power is read from it, and names each phrasing's subset to ask."""
    pooled = {**DOCTOR, "phrasing": "pooled"}
    results = json.loads((phrased_run / "results.json").read_text())
    assert any(m["name"] == "group_score_gap" and m["subset"] == pooled for m in results["metrics"])
    code, out, err = _cli(capsys, "power", str(phrased_run), "--metric", "group_score_gap", "--subset",
                          json.dumps(pooled))
    shown = json.dumps(pooled, sort_keys=True)
    assert code == 2 and not out and err.count("\n") == 1
    assert err.startswith(f"vlfair power: group_score_gap on {shown} pools the run's 2 phrasings")
    assert "has no subset" not in err and err.rstrip().endswith(
        'ask for one phrasing\'s: {"attribute": "gender", "profession": "doctor"}; '
        '{"attribute": "gender", "phrasing": 2, "profession": "doctor"}')
    for phrasing in (DOCTOR, {**DOCTOR, "phrasing": 2}):  # each phrasing's own gap is answered
        code, out, _ = _cli(capsys, "power", str(phrased_run), "--metric", "group_score_gap", "--subset",
                            json.dumps(phrasing))
        assert code == 0 and "smallest deviation detected with 80% power: +" in out


# ---- UNCLEAR 24: a gap's answer, all or nothing ----------------------------------------------------------------
@pytest.mark.parametrize("arguments, said", [
    (["--power", "0.03"], "--power 0.03: with no bias at all, its test at alpha = 0.05 finds one in 5.0% of runs of "
                          "group_score_gap, so every deviation, even none, is detected with 3% power; give a power "
                          "above 0.05"),
    (["--power", "0.05"], "--power 0.05: with no bias at all, its test at alpha = 0.05 finds one in 5.0% of runs"),
    (["--effect", "1e-9"], "--effect 1e-09: even 2.14e+14 images per group (10^13 times this run's) do not detect "
                           "it with 80% power; plan for a larger effect"),
    (["--effect", "nan"], "--effect nan: give a finite deviation from the neutral value 0")])
def test_a_gap_power_cannot_answer_prints_nothing_but_why(phrased_run, capsys, arguments, said):
    """UNCLEAR 24: `power` on a gap judged by its permutation test printed its first lines, then "f(a) and f(b) must
    have different signs" (--power below the test's alpha), or its smallest deviation, then that no number of
    images detects a tiny effect: the whole answer is checked before a line is printed, and the reason said in plain
    words (exit 2, one line)."""
    code, out, err = _cli(capsys, "power", str(phrased_run), "--metric", "group_score_gap", "--subset",
                          json.dumps(DOCTOR), *arguments)
    assert code == 2 and not out and err.startswith(f"vlfair power: {said}") and err.count("\n") == 1


def test_an_interval_s_power_below_its_false_alarms_is_refused():
    """UNCLEAR 24's root for a metric judged by its interval: a power its interval reaches with no deviation at all
    (its false alarms and its estimate's bias) is refused in words, not read as a smallest deviation of 0."""
    from vlfair.compare.power import Design, PowerError, answer
    from vlfair.measures.catalog import facts_of

    found = Design("bias_ratio", {}, 1.0, 1.0, 0.05, 20.0, 0.95, 0.1, 0.1, facts_of("bias_ratio"))
    floor = found.no_bias_power()
    assert 0 < floor < 0.1 and answer(found, floor + 0.01).smallest
    with pytest.raises(PowerError, match=r"with no bias at all, its interval at this run's design \(its estimate's "
                                         r"bias included\) finds one in"):
        answer(found, floor)
    assert math.isfinite(answer(found, 0.8).smallest[0].deviation)


def test_a_pooled_level_is_said_to_be_a_level(phrased_run, capsys):
    """UNCLEAR 23: a pooled mean CLIPScore is a level first (no neutral value), as its phrasings' are."""
    code, _, err = _cli(capsys, "power", str(phrased_run), "--metric", "mean_clipscore", "--subset",
                        json.dumps({**DOCTOR, "group": "Male", "phrasing": "pooled"}))
    assert code == 2 and err == ("vlfair power: mean_clipscore is a level, not a bias measure (it has no neutral value "
                                 "to detect a deviation from)\n")


def test_a_metric_results_json_holds_but_the_probe_does_not_measure_is_said_so(phrased_run, tmp_path, capsys):
    """UNCLEAR 23's root: any metric results.json holds that the probe does not measure from the samples is named as
    such, never "has no subset"."""
    edited = tmp_path / "edited"
    shutil.copytree(phrased_run, edited)
    results = json.loads((edited / "results.json").read_text())
    gap = next(m for m in results["metrics"] if m["name"] == "group_score_gap" and m["subset"] == DOCTOR)
    results["metrics"].append({**gap, "subset": {**DOCTOR, "prompt": "other"}})
    (edited / "results.json").write_text(json.dumps(results))
    code, _, err = _cli(capsys, "power", str(edited), "--metric", "group_score_gap", "--subset",
                        json.dumps({**DOCTOR, "prompt": "other"}))
    assert code == 2 and "has no subset" not in err and err.startswith(
        'vlfair power: group_score_gap on {"attribute": "gender", "profession": "doctor", "prompt": "other"} is in the '
        "run's results.json, but its probe (professions) does not measure it from the samples")


@pytest.mark.parametrize("kind", ["gap", "f"])
def test_every_tested_design_refuses_a_power_at_or_below_its_alpha(kind):
    """UNCLEAR 24's root, for each design a test judges (a gap's simulated power, an F's noncentral F): brentq's
    "f(a) and f(b) must have different signs" became a sentence naming --power and alpha; above alpha, answered."""
    from vlfair.compare.power import PowerError, answer
    from vlfair.compare.tested_power import FDesign, GapDesign
    from vlfair.measures.catalog import facts_of

    found = (GapDesign("group_score_gap", {}, 1.0, 0.0, 25.0, 0.95, (1.0, 2.0, 1.0), facts=facts_of("group_score_gap"))
             if kind == "gap" else FDesign("trait_anova", {}, 3.0, 0.0, 30.0, 0.95, (30, 30, 30),
                                           facts_of("trait_anova")))
    with pytest.raises(PowerError, match=r"^--power 0.04: with no bias at all, its test at alpha = 0.05 finds one in "
                                         r"5.0% of runs"):
        answer(found, 0.04)
    assert answer(found, 0.5).smallest[0].deviation > 0
