"""vlfair power (issue 46): the smallest bias a run could see, and the images an effect needs, checked
against simulated runs of the planted world."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil

import numpy as np
import pytest

from vlfair.cli import main
from vlfair.compare.power import design
from vlfair.samples import read_samples, write_samples
from vlfair.testing import reported_as_its_samples_give

DOCTOR = {"attribute": "gender", "profession": "doctor"}
ACTORS = {"class": "actor", "folder": "actor"}  # the biased world's planted actor bias ratio (women called actors more)


def test_predicted_power_is_the_share_of_simulated_runs_that_detect_the_bias(demo):
    """Runs drawn from the biased world's public-figures samples (its actor folder, every gender scaled
    alike from half to three times the run's images, with replacement), each with its own bootstrap
    interval: the share whose interval excludes 1 is the predicted power within 10 percentage points,
    at every size."""
    from vlfair.compare.runs import load_run
    from vlfair.probes import probe_class
    from vlfair.probes.declared import evaluate

    run_dir = demo[0] / "biased" / "public-figures"
    found = design(run_dir, "bias_ratio", ACTORS)
    run = load_run(run_dir)
    probe = probe_class("public-figures")(run.results["probe_settings"])
    frame = run.samples.frame
    rows = np.flatnonzero((frame["category"] == "actor").to_numpy())
    genders = frame["gender"].to_numpy()[rows]
    rng = np.random.default_rng(0)
    effect = found.value - found.neutral
    for scale in (0.5, 1.0, 2.0, 3.0):
        detected, simulations = 0, 400
        for i in range(simulations):
            drawn = np.concatenate([rng.choice(rows[genders == g], size=round(scale * (genders == g).sum()))
                                    for g in sorted(set(genders))])
            samples = dataclasses.replace(run.samples, frame=frame.iloc[drawn].reset_index(drop=True))
            declared = [m for m in probe.declare(samples) if m.name == "bias_ratio" and dict(m.subset) == ACTORS]
            low, high = evaluate(samples, declared, bootstrap=200, seed=i)[0].ci
            detected += not low <= found.neutral <= high
        predicted = found.power(effect, scale * found.per_group)
        assert abs(detected / simulations - predicted) <= 0.10, (scale, detected / simulations, predicted)


def test_the_smallest_detectable_effect_and_the_images_it_needs_are_the_power_s_inverses(demo):
    found = design(demo[0] / "biased" / "public-figures", "bias_ratio", ACTORS)
    for sign in (1.0, -1.0):
        assert found.power(found.mde(0.8, sign) * sign, found.per_group) == pytest.approx(0.8, abs=1e-6)
    for effect in (0.1, -0.1, 0.6):
        needed = found.images_per_group(effect)
        assert found.power(effect, needed) == pytest.approx(0.8, abs=1e-6)
    assert found.images_per_group(0.1) > found.per_group > found.images_per_group(0.6)


def test_the_command_says_the_mde_and_the_images_an_effect_needs(demo, capsys):
    assert main(["power", str(demo[0] / "biased" / "public-figures"), "--metric", "bias_ratio", "--subset",
                 json.dumps(ACTORS), "--effect", "0.1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    found = design(demo[0] / "biased" / "public-figures", "bias_ratio", ACTORS)
    assert lines[0] == 'bias_ratio on {"class": "actor", "folder": "actor"}: 1.19 (no bias: 1)'
    assert lines[1] == "standard error 0.169 at 16 images per group; with 95% intervals:"
    assert lines[2] == (f"  smallest deviation detected with 80% power: +{found.mde(0.8, 1):.3f}, "
                        f"-{found.mde(0.8, -1):.3f}")
    assert lines[3] == (f"  an effect of 0.1: 80% power with {int(np.ceil(found.images_per_group(0.1))):,} images per "
                        f"group (this run: 16, power {found.power(0.1, 16):.0%})")


@pytest.fixture(scope="module")
def flat(demo, tmp_path_factory):
    """The biased professions run with every CLIPScore the same, rescored: its gaps do not vary."""
    base = tmp_path_factory.mktemp("flat")
    folder = base / "raw"
    shutil.copytree(demo[0] / "biased" / "professions", folder)
    content = json.loads((folder / "results.json").read_text())
    samples, _ = read_samples(folder / "samples.parquet")
    samples.frame["clipscore"] = 25.0
    stored = {key: value for key, value in content.items() if key not in ("metrics", "published", "samples")}
    content["samples"] = write_samples(samples, folder / "samples.parquet", stored)
    (folder / "results.json").write_text(json.dumps(content))
    reported_as_its_samples_give(folder)  # the run that held these samples (rescore refuses one that does not)
    assert main(["rescore", str(folder), "--out", str(base / "run")]) == 0
    return base / "run"


@pytest.mark.parametrize(("probe", "arguments", "said"), [
    ("retrieval", ["--metric", "max_skew", "--subset", json.dumps({"attribute": "race", "k": 40, "target": "dataset"})],
     "max_skew ranks the images (its top k): its spread does not shrink as the square root of the images"),
    ("professions", ["--metric", "gap"],
     "metric 'gap' is not one the run's probe (professions) compares; its metrics: group_score_gap, mean_clipscore"),
    ("professions", ["--metric", "group_score_gap", "--subset", '{"profession": "doctor"}'],
     'group_score_gap has no subset {"profession": "doctor"}; its subsets: {"attribute": "race", '),
    ("professions", ["--metric", "mean_clipscore", "--subset", json.dumps({**DOCTOR, "group": "Male"})],
     "mean_clipscore is a level, not a bias measure (it has no neutral value to detect a deviation from)"),
    ("professions", ["--metric", "group_score_gap", "--subset", json.dumps(DOCTOR), "--effect", "0"],
     "--effect 0: give a deviation from the neutral value 0 other than 0"),
    ("professions", ["--metric", "group_score_gap", "--subset", json.dumps(DOCTOR), "--effect", "-1"],
     "--effect -1: group_score_gap is never below its neutral value 0; give a positive deviation"),
    ("professions", ["--metric", "group_score_gap", "--power", "1.2"], "--power must be between 0 and 1, got 1.2"),
    ("traits", ["--metric", "trait_anova", "--subset", '{"gender": "Female", "trait": "smart/dumb"}', "--effect", "2"],
     "--effect 2: trait_anova's effect is eta squared (the share of the score's variance between the groups), a "
     "number in (0, 1)"),
    ("professions", ["--metric", "group_score_gap", "--subset", "{doctor"], "--subset is not JSON"),
    ("professions", ["--metric", "group_score_gap", "--subset", "[1]"], "--subset must be a JSON object"),
])
def test_a_question_power_cannot_answer_is_one_line_and_exit_2(demo, capsys, probe, arguments, said):
    assert main(["power", str(demo[0] / "biased" / probe), *arguments]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"vlfair power: {said}") and captured.err.count("\n") == 1 and not captured.out


def test_a_metric_without_variance_is_refused(flat, capsys):
    assert main(["power", str(flat), "--metric", "group_score_gap", "--subset",
                 '{"attribute": "gender", "profession": "doctor"}']) == 2
    said = capsys.readouterr().err
    assert said == ('vlfair power: group_score_gap on {"attribute": "gender", "profession": "doctor"} has no variance '
                    "within its groups in the run: no spread to read a power from\n")


def test_the_smallest_detectable_deviation_is_detected_80_percent_of_the_time_by_brute_force():
    """stats.interval_detectable from one run's percentile-bootstrap interval of a mean difference (two groups
    of 150, neutral 0): 600 new runs of that design with the true difference set to it, each with its own
    bootstrap interval, exclude 0 in 80 % of them (within 6 points: the simulation's own error is 1.6)."""
    from vlfair import stats

    rng = np.random.default_rng(7)
    n, resamples = 150, 300

    def interval(a: np.ndarray, b: np.ndarray) -> tuple[float, list[float]]:
        picks_a = rng.integers(0, n, (resamples, n))
        picks_b = rng.integers(0, n, (resamples, n))
        differences = a[picks_a].mean(axis=1) - b[picks_b].mean(axis=1)
        return float(a.mean() - b.mean()), list(np.quantile(differences, [0.025, 0.975]))

    value, ci = interval(rng.normal(0, 1, n), rng.normal(0, 1, n))
    under, over = stats.interval_detectable(value, ci, 0.95)
    assert under == pytest.approx(over, rel=0.2) and 0.25 < over < 0.5  # about 2.8 standard errors (0.115)
    detected = 0
    for _ in range(600):
        value, (low, high) = interval(rng.normal(over, 1, n), rng.normal(0, 1, n))
        detected += not low <= 0 <= high
    assert abs(detected / 600 - stats.DETECTION_POWER) < 0.06, detected / 600


def test_every_bias_measure_of_a_run_says_what_it_could_not_have_seen(demo, tmp_path, caplog, capsys):
    """Issue 46: each metric with a neutral value and an interval carries its smallest detectable deviations at
    the run's design (a one-sided measure on its one side, a level none); every "no bias detected" is listed
    with it in the report (not_detected) and said in the terminal."""
    from vlfair import stats
    from vlfair.measures.catalog import facts_of
    from vlfair.probes import probe_class

    run_dir = demo[0] / "control" / "public-figures"
    with caplog.at_level("INFO", logger="vlfair"):
        assert main(["rescore", str(run_dir), "--out", str(tmp_path / "rescored")]) == 0
    results = json.loads((tmp_path / "rescored" / "results.json").read_text())
    probe = probe_class("public-figures")
    unseen = []
    for metric in results["metrics"]:
        facts = facts_of(metric["name"], probe.facts)
        if facts.judged != "interval" or not metric["ci"] or metric["ci"][0] == metric["ci"][1]:
            assert metric["mde"] is None, metric  # a level, a gap (its test judges it), an interval of no width
            continue
        # its arms read at the level its interval was: expanded for the rows it names (a ratio's smallest group)
        level = stats.expanded_confidence(0.95, metric["details"].get("ci_rows"))
        assert metric["details"]["ci_rows"] >= 2 and level > 0.95
        assert metric["mde"] == pytest.approx(stats.interval_detectable(metric["value"], metric["ci"], level,
                                                                         facts.sides))
        assert metric["mde"][0] > 0 and metric["mde"][1] > 0  # a ratio is either side of its 1
        if metric["verdict"]["detected"] is False:
            unseen.append(metric)
    assert unseen, "the control world's public figures hold measures that detect no bias"
    table = (tmp_path / "rescored" / "not_detected.csv").read_text()
    assert len(table.strip().splitlines()) == len(unseen) + 1
    # vlfair's console handler writes to stdout where it is set up (propagating nothing), pytest's log capture
    # where it is not yet: either holds the terminal's lines
    text = caplog.text + capsys.readouterr().out
    assert f"no bias detected in {len(unseen)} metrics" in text and "could not be seen" in text
    report = (tmp_path / "rescored" / "report.html").read_text()
    assert "not detected" in report and "unseen over" in report


def test_compare_says_what_a_no_difference_could_not_have_seen():
    """A "no difference detected" of vlfair compare names the smallest difference its design detects."""
    from vlfair.compare.comparison import verdict_text

    entry = {"a": 0, "b": 1, "verdict": "no_difference", "mde": [0.031, 0.029]}
    assert verdict_text(entry, ["A", "B"]) == "no difference detected (smaller than 0.031 under, 0.029 over could " \
                                              "not be seen)"
    assert verdict_text({**entry, "mde": None}, ["A", "B"]) == "no difference detected"


def test_a_measure_s_sides_are_those_its_range_leaves_open_at_its_neutral_value():
    """Where a run's and vlfair power's smallest detectable deviations are read: a gap or an F above its 0 only,
    a ratio, a skew or a signed share difference on both sides; a level on neither (it has no neutral value)."""
    from vlfair.measures.catalog import facts_of

    assert facts_of("group_score_gap").sides == facts_of("trait_anova").sides == (1.0,)
    assert facts_of("bias_ratio").sides == facts_of("skew").sides == facts_of("bias_at_k").sides == (-1.0, 1.0)
    assert facts_of("accuracy").neutral is None


def test_an_f_tests_power_is_the_share_of_simulated_f_tests_that_detect_its_effect():
    """The noncentral F against brute force: 4 groups of 30 normal scores whose means spread to an eta squared of
    e, scipy's F-test on each of 2,000 simulated runs: the share with p < 0.05 is the predicted power within 0.03;
    the smallest effect and the images it needs are the power's inverses."""
    import scipy.stats as sps

    from vlfair.compare.tested_power import FDesign

    found = FDesign("trait_anova", {}, 3.0, 0.0, 30.0, 0.95, (30, 30, 30, 30))
    rng = np.random.default_rng(0)
    for effect in (0.02, 0.06, 0.12):
        offsets = np.asarray([-1.5, -0.5, 0.5, 1.5])
        offsets *= math.sqrt(effect / (1 - effect)) / offsets.std()  # between-group sd over within-group sd: f
        detected = sum(sps.f_oneway(*(rng.normal(mu, 1.0, 30) for mu in offsets)).pvalue < 0.05 for _ in range(2000))
        expected = found.power(effect, 30)
        assert abs(detected / 2000 - expected) <= 0.03, (effect, detected / 2000, expected)
    assert found.power(found.mde(0.8), 30) == pytest.approx(0.8, abs=1e-6)
    assert found.power(0.05, found.images_per_group(0.05)) == pytest.approx(0.8, abs=1e-6)


def test_a_gaps_power_is_the_share_of_simulated_permutation_tests_that_detect_it():
    """A largest gap's simulated power against the test itself: runs of 3 groups of 25 normal scores (sd 1, 2, 1),
    one group d above the others, each judged by vlfair's relabelling test (499 relabellings): the share with p <
    0.05 is the predicted power within 0.08 at every d and size."""
    from vlfair import paired
    from vlfair.compare.tested_power import GapDesign
    from vlfair.measures import null

    found = GapDesign("group_score_gap", {}, 1.0, 0.0, 25.0, 0.95, (1.0, 2.0, 1.0), top=0)
    rng = np.random.default_rng(1)
    for effect, size in ((0.5, 25), (1.0, 25), (1.0, 50)):
        groups = np.repeat(np.arange(3), size)
        row_set = paired.RowSet(np.arange(groups.size), ("score",), groups,
                                (paired.Statistic("group_score_gap", {}, paired.mean_range(0), 0.0),))
        detected, simulations = 0, 300
        for world in range(simulations):
            values = rng.normal(0.0, np.asarray([1.0, 2.0, 1.0])[groups]) + effect * (groups == 0)
            draw = null.rows_drawn(paired.relabeller(row_set, values[:, None]), np.zeros(groups.size, dtype=np.int64))
            observed = np.ptp([values[groups == g].mean() for g in range(3)])
            p = null.test(draw, np.asarray([observed]), np.zeros(1), np.asarray([[False, True]]), np.asarray([True]),
                          permutations=499, seed=world, minimum=0).p_value[0]
            detected += p < 0.05
        predicted = found.power(effect, size)
        assert abs(detected / simulations - predicted) <= 0.08, (effect, size, detected / simulations, predicted)


def test_power_answers_for_a_tested_gap_and_an_f_in_one_command(demo, capsys):
    assert main(["power", str(demo[0] / "biased" / "professions"), "--metric", "group_score_gap", "--subset",
                 json.dumps(DOCTOR), "--effect", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("judged by its test at alpha = 0.05 (one test: the run corrects its 8 by holm") \
        and lines[1].endswith("its deviation:")
    assert lines[2].startswith("  smallest deviation detected with 80% power: +")
    assert main(["power", str(demo[0] / "biased" / "traits"), "--metric", "trait_anova", "--subset",
                 '{"gender": "Female", "trait": "smart/dumb"}', "--effect", "0.05"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("  smallest eta squared detected with 80% power: +0.")
    assert "an effect of 0.05: 80% power with" in lines[3]
