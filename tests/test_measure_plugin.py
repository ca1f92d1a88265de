"""A measure is one object whose facts travel with the run (issue 63): a plugin probe, one module and one
YAML, declares a ratio and a gap with facts of its own and a measure of its own (one module), and every
reader takes those facts from the run: rescore, compare, the leaderboard in the CLI and in its Space (which
cannot import the plugin), tiers, Every Eval Ever and power."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

SPREAD_MODULE = '''
"""A measure of its own, in one module: the largest minus the smallest group's standard deviation of a score
(no difference between the groups' spreads: 0; never below it)."""
from __future__ import annotations

import numpy as np

from vlfair.facts import Facts
from vlfair.measures.catalog import Measure
from vlfair.probes.declared import Custom

SCORE_SPREAD = Measure("score_spread", Facts(0.0, 0.0, None),
                       "the largest minus the smallest group's standard deviation of a score")


def spread(column: str) -> Custom:
    """SCORE_SPREAD's statistic of ``column``: a function of each resample's group moments."""
    def make(at, code):
        j = at[column]

        def statistic(moments):
            with np.errstate(invalid="ignore", divide="ignore"):
                deviation = np.sqrt(moments.within[:, :, j] / (moments.count - 1))
            return np.nanmax(deviation, axis=1) - np.nanmin(deviation, axis=1)
        return statistic
    return Custom((column,), make)
'''

PROBE_MODULE = '''
"""A plugin's probe: each image's CLIPScore with one prompt; a ratio and a gap of the genders' means, each
with facts of its own, and the spread of their scores (a measure of its own)."""
from __future__ import annotations

import math

from pydantic import Field

from vlfair.facts import Facts
from vlfair.probes.base import Probe, clip_score
from vlfair.probes.declared import Declared, Mean, Range, Ratio
from vlfair.probes.settings import Bootstrap, ProbeSettings
from vlfair.samples import Samples
from vlfair_spread import SCORE_SPREAD, spread


class MoodSettings(ProbeSettings, Bootstrap):
    prompt: str = Field(description="the prompt every image is scored with")


class MoodProbe(Probe):
    name = "toy-mood"
    Settings = MoodSettings
    help = "a plugin's probe with facts and a measure of its own"
    description = "A ratio and a gap of the genders' mean CLIPScore, and their spread."
    schemas = ("fairface",)
    required_columns = {"fairface": ("image", "gender")}
    facts = {"mood_ratio": Facts(1.0, 0.0, math.inf), "mood_gap": Facts(0.0, 0.0, None)}

    def score(self, ctx, schema):
        import pandas as pd

        images, rows = ctx.images()
        frame = ctx.identity(rows)
        frame["gender"] = ctx.column("gender", rows)
        frame["clipscore"] = clip_score(images, ctx.texts([self.settings.prompt])[[0] * len(rows)])
        return Samples(pd.DataFrame(frame), {"prompt": self.settings.prompt})

    def declare(self, samples):
        genders = sorted(set(samples.column("gender").tolist()))
        return [*(Declared("mean_clipscore", {"gender": g}, Mean("clipscore", g), group="gender") for g in genders),
                Declared("mood_ratio", {}, Ratio("clipscore", "Female", "Male"), group="gender"),
                Declared("mood_gap", {}, Range("clipscore"), group="gender"),
                Declared(SCORE_SPREAD, {}, spread("clipscore"), group="gender")]
'''

PROBE_YAML = """\
version: 1
prompt: "a photo of a cheerful person"
bootstrap: 300
"""

OWN = ("mood_ratio", "mood_gap", "score_spread")


@pytest.fixture(scope="module")
def mood_plugin(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mood-plugin")
    (root / "vlfair_spread.py").write_text(SPREAD_MODULE)
    (root / "vlfair_mood.py").write_text(PROBE_MODULE)
    (root / "vlfair_mood.yaml").write_text(PROBE_YAML)
    info = root / "vlfair_mood-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vlfair-mood\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vlfair.probes]\ntoy-mood = vlfair_mood:MoodProbe\n")
    return root


def _forget_plugin(monkeypatch) -> None:
    """This process as one where the plugin is not installed: its modules gone, its probe unknown."""
    from vlfair.measures.catalog import CATALOG
    from vlfair.probes import ProbeError, probe_class

    for name in ("vlfair_mood", "vlfair_spread"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "mood-plugin" not in p])
    _isolated_probes(monkeypatch)
    with pytest.raises(ProbeError):
        probe_class("toy-mood")
    assert not any(name in CATALOG for name in OWN)  # vlfair's catalog knows none of the plugin's facts


def _isolated_probes(monkeypatch) -> None:
    """A registry of probes of this test's own (found again from the entry points on sys.path)."""
    from vlfair.probes import registry

    monkeypatch.setattr(registry, "PROBES", registry.PROBES.copy())


def _space(name: str):
    spec = importlib.util.spec_from_file_location(f"space_{name}", Path(__file__).resolve().parents[1] / "spaces" /
                                                  name / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def mood_runs(mood_plugin, clip_dir, siglip_dir, tmp_path_factory) -> dict[str, Path]:
    """The plugin's runs of two models, made with the plugin installed."""
    from vlfair.cli import main
    from vlfair.probes import registry

    base = tmp_path_factory.mktemp("mood-runs")
    saved = registry.PROBES
    sys.path.insert(0, str(mood_plugin))
    registry.PROBES = registry.PROBES.copy()  # this fixture's own, reading the entry points on sys.path again
    try:
        runs = {}
        for model, path in (("clip", clip_dir), ("siglip", siglip_dir)):
            runs[model] = base / model
            assert main(["run", "toy-mood", "--model", str(path), "--dataset", "synthetic:fairface", "--out",
                         str(runs[model]), "--dtype", "float32", "--cache-dir", str(base / "cache")]) == 0
        assert main(["rescore", str(runs["clip"]), "--out", str(base / "rescored")]) == 0
        runs["rescored"] = base / "rescored"
        assert main(["compare", str(runs["clip"]), str(runs["siglip"]), "--out", str(base / "compared"),
                     "--bootstrap", "300", "--permutations", "200"]) == 0
        runs["compared"] = base / "compared"
    finally:
        sys.path.remove(str(mood_plugin))
        for name in ("vlfair_mood", "vlfair_spread"):
            sys.modules.pop(name, None)
        registry.PROBES = saved
    return runs


def _results(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())


def test_the_run_carries_each_metric_s_facts_and_rescoring_keeps_them(mood_runs):
    results = _results(mood_runs["clip"])
    measures = results["measures"]
    assert measures["mood_ratio"] == {"neutral": 1.0, "low": 0.0, "high": "Infinity", "judged": "interval",
                                      "direction": "closer to 1 (no difference between the groups) is less biased"}
    assert measures["mood_gap"]["neutral"] == 0.0 and measures["mood_gap"]["high"] is None
    assert measures["score_spread"]["direction"].startswith("lower is less biased")  # the measure object's facts
    assert measures["mean_clipscore"] == {"neutral": None, "low": 0.0, "high": 100.0, "judged": "level",
                                          "direction": "a level, not a bias measure: neither higher nor lower is "
                                                       "better"}
    assert set(measures) == {m["name"] for m in results["metrics"]}
    spread = next(m for m in results["metrics"] if m["name"] == "score_spread")
    assert spread["value"] > 0 and spread["ci"][0] <= spread["value"] <= spread["ci"][1]
    # never below its neutral 0, as its facts say: judged by its test against no difference, not by an interval
    assert spread["mde"] is None and spread["verdict"]["rule"] == "test" and spread["p_value"] is not None
    rescored = _results(mood_runs["rescored"])
    assert rescored["metrics"] == results["metrics"] and rescored["measures"] == measures


def test_compare_reads_the_recorded_facts(mood_runs):
    differences = json.loads((mood_runs["compared"] / "comparison.json").read_text())["differences"]
    neutral = {d["metric"]: d["neutral"] for d in differences}
    assert neutral == {"mean_clipscore": None, "mood_ratio": 1.0, "mood_gap": 0.0, "score_spread": 0.0}
    for d in differences:  # a bias measure's verdict reads the distance to its neutral value; a level has none
        assert (d["distance_difference_ci"] is not None) == (d["neutral"] is not None)


def test_runs_that_record_other_facts_for_a_metric_are_not_compared(mood_runs, tmp_path, monkeypatch, mood_plugin,
                                                                   capsys):
    import shutil

    from vlfair.cli import main

    other = tmp_path / "other"
    shutil.copytree(mood_runs["siglip"], other)
    results = _results(other)
    results["measures"]["mood_gap"]["neutral"] = 0.5
    (other / "results.json").write_text(json.dumps(results))
    monkeypatch.syspath_prepend(str(mood_plugin))
    _isolated_probes(monkeypatch)
    assert main(["compare", str(mood_runs["clip"]), str(other), "--out", str(tmp_path / "compared")]) == 2
    error = capsys.readouterr().err
    assert "vlfair compare: the runs are not comparable: metric 'mood_gap' is recorded with other facts" in error
    assert not (tmp_path / "compared").exists()


def test_a_board_where_the_plugin_is_not_installed_ranks_by_the_recorded_facts(mood_runs, tmp_path, monkeypatch,
                                                                                 capsys):
    import pandas as pd

    from vlfair.cli import main

    _forget_plugin(monkeypatch)
    board_dir = tmp_path / "runs"
    for model in ("clip", "siglip"):
        (board_dir / model).mkdir(parents=True)
        for name in ("results.json", "samples.parquet"):
            (board_dir / model / name).write_bytes((mood_runs[model] / name).read_bytes())
    assert main(["leaderboard", str(board_dir), "--out", str(tmp_path / "board.csv")]) == 0
    board = pd.read_csv(tmp_path / "board.csv")
    for frame in (board, _space("leaderboard").load_board(str(board_dir))):
        for metric, expected in (("mood_ratio", 1.0), ("mood_gap", 0.0), ("score_spread", 0.0)):
            rows = frame[frame["metric"] == metric]
            assert (rows["neutral"] == expected).all(), metric
            assert sorted(rows["rank"].tolist()) == [1.0, 2.0], metric  # ranked by |value - neutral|
            distance = (rows["value"] - expected).abs()
            assert rows.loc[distance.idxmin(), "rank"] == 1.0
        levels = frame[frame["metric"] == "mean_clipscore"]
        assert levels["neutral"].isna().all() and levels["rank"].isna().all()  # a level is not ranked
        assert "tier" in frame and frame.loc[frame["metric"] == "score_spread", "tier"].notna().all()


def test_every_eval_ever_and_the_hub_get_the_recorded_direction_and_range(mood_runs, tmp_path, monkeypatch):
    from vlfair.cli import main

    _forget_plugin(monkeypatch)
    assert main(["card-results", str(mood_runs["clip"]), "--out", str(tmp_path / "card"), "--benchmark-repo",
                 "org/board"]) == 0
    records = list((tmp_path / "card").rglob("*.json"))
    configs = {}
    for path in records:
        record = json.loads(path.read_text())
        for result in record.get("evaluation_results", []):
            configs[result["metric_config"]["metric_name"]] = result["metric_config"]
    assert configs["mood_gap"]["lower_is_better"] is True and configs["mood_gap"]["min_score"] == 0.0
    assert configs["mood_gap"]["max_score"] == "Infinity"  # an open side, as Every Eval Ever spells it
    ratio = configs["mood_ratio"]
    assert ratio["min_score"] == 0.0 and ratio["max_score"] == "Infinity"
    assert ratio["additional_details"]["neutral_value"] == "1.0"
    assert "closer to 1" in ratio["additional_details"]["direction"]
    assert configs["score_spread"]["lower_is_better"] is True
    assert "a level" in configs["mean_clipscore"]["additional_details"]["direction"]


def test_power_answers_for_the_plugin_s_gap(mood_runs, mood_plugin, monkeypatch, capsys):
    from vlfair.cli import main

    monkeypatch.syspath_prepend(str(mood_plugin))
    _isolated_probes(monkeypatch)
    assert main(["power", str(mood_runs["clip"]), "--metric", "mood_gap", "--effect", "2"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "smallest deviation detected" in line)
    assert line.rstrip().split(": ")[1].startswith("+")  # a gap is never below its 0: one side, above
    assert "images per group" in out
    assert main(["power", str(mood_runs["clip"]), "--metric", "mood_ratio"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "smallest deviation detected" in line)
    assert line.count(",") == 1 and "+" in line and "-" in line  # a ratio deviates either way


def test_a_results_file_s_facts_are_checked_when_read():
    from vlfair.facts import Facts
    from vlfair.measures.catalog import facts_in

    assert facts_in({"measures": {"x": {"neutral": 1, "low": 0, "high": "Infinity", "judged": "interval"}}},
                    "x") == Facts(1.0, 0.0, math.inf)
    assert facts_in({}, "group_score_gap") == Facts(0.0, 0.0, None)  # a run written before runs carried them
    with pytest.raises(ValueError, match=r"measures.x: neutral is 'one'"):
        facts_in({"measures": {"x": {"neutral": "one", "low": 0, "high": None, "judged": "interval"}}}, "x")
    with pytest.raises(ValueError, match=r"measures.x: judged is 'vibes'"):
        facts_in({"measures": {"x": {"neutral": 0, "low": 0, "high": None, "judged": "vibes"}}}, "x")


# ---- the catalog: one Measure object per measure ------------------------------------------------
def test_every_built_in_measure_is_one_object_whose_function_and_module_are_the_evaluate_ones():
    from vlfair import measures
    from vlfair.measures.catalog import CATALOG, MEASURES
    from vlfair.metrics import available_metrics

    assert sorted(MEASURES) == available_metrics()  # each measure users call is an evaluate module of its name
    for name in MEASURES:
        measure = CATALOG.get(name)
        assert measure.module == name and MEASURES[name] is getattr(measures, name)
    gap = CATALOG.get("group_score_gap")
    assert gap.compute([1.0, 2.0, 3.0, 4.0], ["a", "a", "b", "b"], bootstrap=0, n_permutations=0)["max_gap"] == 2.0
    assert CATALOG.get("trait_anova").effect == "omega_squared" and CATALOG.get("trait_anova").facts.judged == "test"
    assert CATALOG.get("accuracy").facts.judged == "level"
    with pytest.raises(TypeError, match="reported by probes only"):
        CATALOG.get("ndkl").compute([])
    with pytest.raises(KeyError, match="unknown measure 'no_such'; known: .*group_score_gap"):
        CATALOG.get("no_such")


def test_a_declaration_takes_its_facts_and_reporter_from_its_measure():
    """A Range declared as the catalog's group_score_gap reports what the measure reports (its groups, its test:
    a declaration need not say), a measure object's facts are the metric's, and a probe's own facts for its
    name come first."""
    import numpy as np
    import pandas as pd

    from vlfair import measures
    from vlfair.facts import Facts
    from vlfair.measures.catalog import CATALOG, Measure
    from vlfair.probes.declared import Declared, Mean, Range, evaluate
    from vlfair.samples import Samples

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"score": rng.normal(size=60) + np.repeat([0.0, 0.5, 1.0], 20),
                          "group": np.repeat(["a", "b", "c"], 20)})
    own = Measure("spread_of_mine", Facts(0.0, 0.0, None))
    declared = [Declared("group_score_gap", {}, Range("score"), group="group"),
                Declared(own, {}, Range("score"), group="group"),
                Declared("mean_clipscore", {"group": "a"}, Mean("score", "a"), group="group")]
    assert declared[0].measure is CATALOG.get("group_score_gap") and declared[1].measure is own
    gap, mine, mean = evaluate(Samples(frame, {}), declared, {"mean_clipscore": 1.0}, bootstrap=200,
                               n_permutations=500)
    expected = measures.group_score_gap(frame["score"], frame["group"], bootstrap=0, n_permutations=500)
    assert gap.value == pytest.approx(expected["max_gap"], rel=1e-12) and gap.p_value == expected["p_value"]
    assert gap.details["top_group"] == "c" and gap.details["bottom_group"] == "a"
    # a measure of its own reports nothing it did not declare, but its test: bounded at its neutral 0, it is judged
    # by relabelling the groups, and says what no difference gives
    assert mine.details["p_value_method"] and mine.p_value == pytest.approx(gap.p_value, abs=0.02)
    assert set(mine.details) == {"log10_p_value", "p_value_method", "null_mean", "excess", "excess_ci"}
    assert gap.value == mine.value  # the measure's reporter adds its fields; the value is the engine's, to the bit
    assert mine.facts == own.facts and gap.facts == CATALOG.get("group_score_gap").facts
    assert mean.facts == Facts(1.0, 0.0, 100.0)  # the probe's own neutral value first, the catalog's range kept
    with pytest.raises(TypeError, match="names its measure"):
        Declared(3, {}, Range("score"))


def test_a_measure_registered_by_a_plugin_is_found_by_its_name(monkeypatch):
    from vlfair.facts import Facts
    from vlfair.measures import catalog
    from vlfair.probes.declared import Declared, Range

    monkeypatch.setattr(catalog.CATALOG, "_entries", dict(catalog.CATALOG._entries))
    catalog.register_measure(catalog.Measure("tone_gap", Facts(0.0, 0.0, 1.0), "a gap of tones"))
    assert catalog.facts_of("tone_gap") == Facts(0.0, 0.0, 1.0)
    assert Declared("tone_gap", {}, Range("x"), group="g").facts() == Facts(0.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="two measures are named 'tone_gap'"):
        catalog.register_measure(catalog.Measure("tone_gap", Facts(0.0)))
    with pytest.raises(ValueError, match="a Python identifier"):
        catalog.register_measure(catalog.Measure("tone gap", Facts(0.0)))


def _board_of(mood_runs, root: Path, edit=None) -> Path:
    """The two models' runs in a folder of their own, ``edit(results)`` applied to the second's results.json."""
    for model in ("clip", "siglip"):
        (root / model).mkdir(parents=True)
        for name in ("results.json", "samples.parquet"):
            (root / model / name).write_bytes((mood_runs[model] / name).read_bytes())
    if edit is not None:
        results = _results(root / "siglip")
        edit(results)
        (root / "siglip" / "results.json").write_text(json.dumps(results))
    return root


def test_a_board_does_not_rank_a_metric_its_runs_record_with_other_neutral_values(mood_runs, tmp_path, capsys):
    """A run whose results.json says the gap's neutral value is 0.5 (hand-edited, or a plugin changed without a
    version bump): ranked against the other's 0, the more biased model could come first. The metric is neither
    ranked nor tiered in that family, said in one line; the family's other metrics are ranked as before."""
    import pandas as pd

    from vlfair.cli import main

    def edit(results):
        results["measures"]["mood_gap"]["neutral"] = 0.5

    board_dir = _board_of(mood_runs, tmp_path / "runs", edit)
    assert main(["leaderboard", str(board_dir), "--out", str(tmp_path / "board.csv")]) == 0
    assert "its runs record mood_gap with other neutral values (0.0, 0.5): not ranked or tiered" in \
        capsys.readouterr().err
    board = pd.read_csv(tmp_path / "board.csv")
    gap = board[board["metric"] == "mood_gap"]
    assert gap["neutral"].isna().all() and gap["rank"].isna().all() and gap["tier"].isna().all()
    ratio = board[board["metric"] == "mood_ratio"]
    assert sorted(ratio["rank"]) == [1.0, 2.0] and (ratio["neutral"] == 1.0).all()


@pytest.mark.parametrize("facts, problem", [
    ({"neutral": 0.0, "low": 5.0, "high": -5.0, "judged": "interval"}, "low 5.0 is above high -5.0"),
    ({"neutral": 2.0, "low": 0.0, "high": 1.0, "judged": "interval"}, "neutral 2.0 lies outside the range"),
    ({"neutral": 1.0, "low": 0.0, "high": 100.0, "judged": "level"}, "a level has no neutral value"),
])
def test_recorded_facts_that_cannot_be_are_refused_naming_the_file(mood_runs, tmp_path, capsys, facts, problem):
    from vlfair.cli import main

    def edit(results):
        results["measures"]["mood_ratio"] = facts

    board_dir = _board_of(mood_runs, tmp_path / "runs", edit)
    assert main(["leaderboard", str(board_dir), "--out", str(tmp_path / "board.csv")]) == 0
    err = capsys.readouterr().err
    assert "siglip/results.json" in err and f"measures.mood_ratio: {problem}" in err  # that run skipped, named
    assert main(["card-results", str(board_dir / "siglip"), "--out", str(tmp_path / "card"), "--benchmark-repo",
                 "org/board"]) == 2
    assert f"measures.mood_ratio: {problem}" in capsys.readouterr().err
    assert not (tmp_path / "card").exists()



def test_a_plugins_bounded_measures_are_tested_and_rescore_sets_their_permutations(mood_runs, mood_plugin, tmp_path,
                                                                                    monkeypatch):
    """A plugin's probe whose settings take vlfair's Bootstrap has its tests too: a gap of its own facts (bounded
    at its neutral 0) is judged by a relabelling test, and rescore's --permutations sets how many."""
    from vlfair.cli import main

    monkeypatch.syspath_prepend(str(mood_plugin))
    _isolated_probes(monkeypatch)
    assert main(["rescore", str(mood_runs["clip"]), "--out", str(tmp_path / "again"), "--permutations", "200"]) == 0
    results = json.loads((tmp_path / "again" / "results.json").read_text())
    gap = next(m for m in results["metrics"] if m["name"] == "mood_gap")
    assert results["probe_settings"]["n_permutations"] == 200
    assert gap["verdict"]["rule"] == "test" and gap["p_value"] >= 1 / 201 and gap["details"]["p_value_method"]
    assert gap["ci"][0] <= gap["value"] <= gap["ci"][1]
