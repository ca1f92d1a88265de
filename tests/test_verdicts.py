"""One calibrated verdict per metric (vlfair.verdicts, vlfair.measures.null): the rule of each statistic, its
p-value against brute-force references, its false alarms under no difference, the family's corrections, exact
zeros, and a run that carries them."""

import json
import math

import numpy as np
import pytest
import scipy.stats as sps

from vlfair import paired, stats, verdicts
from vlfair.facts import Facts
from vlfair.measures import null
from vlfair.measures.catalog import facts_of
from vlfair.outputs import Metric


@pytest.mark.parametrize("name, rule", [
    ("group_score_gap", "test"), ("group_rate_gap", "test"), ("cross_lingual_gap", "test"), ("trait_anova", "test"),
    ("max_skew", "test"), ("min_skew", "test"), ("ndkl", "test"), ("individual_fairness", "test"),
    ("bias_ratio", "interval"), ("skew", "interval"), ("word_influence", "interval"), ("bias_at_k", "interval"),
    ("gap_amplification", "interval"), ("accuracy", "level"), ("mean_clipscore", "level")])
def test_each_measure_is_judged_by_the_rule_its_range_calls_for(name, rule):
    """A statistic bounded at its neutral value is tested; a signed one read by its interval; a level not judged."""
    assert facts_of(name).judged == rule


def test_a_plugins_facts_take_their_rule_from_their_range_and_a_record_without_one_too():
    assert Facts(0.0, 0.0, None).judged == "test" and Facts(1.0, 0.0, math.inf).judged == "interval"
    assert Facts(0.0, -1.0, 1.0).judged == "interval" and Facts().judged == "level"
    assert Facts.from_record({"neutral": 0.0, "low": 0.0, "high": None}).judged == "test"
    assert Facts.from_record({"neutral": 0.0, "low": 0.0, "high": None, "judged": "interval"}).judged == "interval"


def test_an_intervals_p_value_is_below_alpha_exactly_where_it_excludes_the_neutral_value():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        value = rng.normal()
        low, high = sorted(value + rng.normal(scale=0.5, size=2) * [-1, 1] * np.sign(rng.normal()) - [0.5, -0.5])
        low, high = min(low, value), max(high, value)
        p = verdicts.interval_p(value, [low, high], 0.0, 0.95)
        if abs(low) > 1e-9 and abs(high) > 1e-9:  # away from the boundary, where a rounding decides
            assert (p < 0.05) == (not low <= 0.0 <= high), (value, low, high, p)
    assert verdicts.interval_p(0.0, [-1.0, 1.0], 0.0, 0.95) == 1.0
    assert verdicts.interval_p(2.0, [2.0, 2.0], 0.0, 0.95) == 0.0  # every resample at the value
    assert verdicts.interval_p(1.0, [0.0, 2.0], 0.0, 0.95) == pytest.approx(0.05)  # the boundary itself
    assert verdicts.interval_p(1.0, None, 0.0, 0.95) is None


def _gap_row_set(groups: np.ndarray) -> paired.RowSet:
    return paired.RowSet(np.arange(groups.size), ("score",), groups,
                         (paired.Statistic("group_score_gap", {}, paired.mean_range(0), 0.0),))


def _null_test(values, groups, permutations=2000, seed=0, asked=True):
    row_set = _gap_row_set(groups)
    draw = null.rows_drawn(paired.relabeller(row_set, values[:, None]), np.zeros(groups.size, dtype=np.int64))
    observed = np.ptp(stats.group_means(values, groups, int(groups.max()) + 1))
    return null.test(draw, np.asarray([observed]), np.zeros(1), np.asarray([[False, True]]), np.asarray([asked]),
                     permutations=permutations, seed=seed, rows=groups.size)


def test_a_relabelled_engine_equals_the_statistic_of_relabelled_groups_brute_force():
    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(3), [4, 6, 5])
    values = rng.normal(size=groups.size) * 10 + 50
    order = np.stack([rng.permutation(groups.size) for _ in range(40)])
    found = paired.relabeller(_gap_row_set(groups), values[:, None])(order)[:, 0]
    expected = [np.ptp(stats.group_means(values, groups[o], 3)) for o in order]
    np.testing.assert_allclose(found, expected, rtol=1e-12, atol=1e-12)


def test_the_relabelling_test_agrees_with_the_exact_permutation_test():
    """Against stats.permutation_test's exact enumeration (a brute-force reference): within Monte Carlo error."""
    rng = np.random.default_rng(2)
    for shift in (0.0, 0.8, 2.0):
        groups = np.repeat(np.arange(3), 3)
        values = rng.normal(size=9) + shift * (groups == 0)
        exact = stats.permutation_test(values, groups, stats.mean_range, n_permutations=10_000)
        assert exact.method == "exact"
        found = _null_test(values, groups, permutations=20_000, seed=3)
        if found.method[0] == "sequential_monte_carlo":  # stopped at its 50th extreme relabelling: h / L, 14 % sd
            assert abs(math.log(found.p_value[0] / exact.p_value)) < 0.45, (shift, found.p_value, exact.p_value)
        else:
            tolerance = 4 * math.sqrt(exact.p_value * (1 - exact.p_value) / 20_000) + 2 / 20_000
            assert abs(found.p_value[0] - exact.p_value) < tolerance, (shift, found.p_value, exact.p_value)


def test_the_relabelling_test_is_calibrated_under_no_difference_and_its_null_mean_is_the_gaps_bias():
    """200 worlds of 4 groups of 20 normal scores and no difference: false alarms at alpha 0.05 within 0.02-0.09
    (the binomial's 99.9 % range about 0.05), where the gap's percentile interval excluded 0 in all 200."""
    rng = np.random.default_rng(4)
    groups = np.repeat(np.arange(4), 20)
    alarms, gaps, means = 0, [], []
    for world in range(200):
        values = rng.normal(size=groups.size)
        found = _null_test(values, groups, permutations=999, seed=world)
        alarms += found.p_value[0] < 0.05
        gaps.append(np.ptp(stats.group_means(values, groups, 4)))
        means.append(found.mean[0])
    assert 0.02 <= alarms / 200 <= 0.09, alarms
    # what no difference gives is the gap's mean under no difference (about 2.06 sd of a group mean), not 0
    assert np.mean(means) == pytest.approx(np.mean(gaps), rel=0.1)
    assert np.mean(means) == pytest.approx(2.059 / math.sqrt(20), rel=0.1)


def test_the_expanded_percentile_level_is_a_t_intervals_width_and_tends_to_the_level_asked():
    """Hesterberg's expanded percentile interval: at n rows, the normal quantile sqrt(n / (n - 1)) t_{n-1}."""
    at_20 = stats.expanded_confidence(0.95, 20)
    assert sps.norm.ppf((1 + at_20) / 2) == pytest.approx(math.sqrt(20 / 19) * sps.t.ppf(0.975, 19), rel=1e-9)
    assert (1 - at_20) / 2 == pytest.approx(0.01588, abs=1e-5)  # the percentiles read: 1.59 % and 98.41 %
    levels = [stats.expanded_confidence(0.95, n) for n in (3, 5, 20, 100, 10_000)]
    assert levels == sorted(levels, reverse=True) and levels[-1] == pytest.approx(0.95, abs=1e-4)
    assert stats.expanded_confidence(0.95, 1) == stats.expanded_confidence(0.95, None) == 0.95  # nothing to widen
    assert 0.95 < stats.expanded_confidence(0.95, 2) < 1  # the resamples' whole range, never a level of 1
    with pytest.raises(ValueError, match="confidence must be in"):
        stats.expanded_confidence(1.0, 20)


def test_a_bias_ratios_interval_is_calibrated_in_groups_of_20_where_the_plain_percentile_one_was_not(monkeypatch):
    """2,000 worlds of two groups of 20 gamma(2) scores and no difference: the ratio's interval, which decides its
    verdict, excludes 1 in a share within the goal (0.03-0.07); read at the plain level it excluded 1 in more
    than 0.06 of the same worlds (its normal tails and plug-in spread too narrow for 20 rows)."""
    from vlfair import measures

    groups = np.repeat(["a", "b"], 20)
    rng = np.random.default_rng(0)
    worlds = [rng.gamma(2.0, 1.0, groups.size) for _ in range(2000)]

    def alarms() -> float:
        found = [measures.bias_ratio(values, groups, "a", "b", bootstrap=400, n_permutations=0, seed=w).bias_ratio_ci
                 for w, values in enumerate(worlds)]
        return float(np.mean([not low <= 1 <= high for low, high in found]))

    assert 0.03 <= alarms() <= 0.07
    monkeypatch.setattr(stats, "expanded_confidence", lambda confidence, rows: confidence)
    assert alarms() > 0.06


def test_a_declared_ratio_reads_its_interval_at_its_smallest_groups_level_and_records_those_rows(monkeypatch):
    """A run's bias ratio of groups of 12 and 30 rows: its interval is its resamples' percentile interval at the
    level expanded for 12 rows (the same resamples read at that level with no expansion), wider than at 95 %; its
    details name the 12 rows (what the run's detectable effects and vlfair power read its arms at); a gap, judged by
    its test, records none."""
    import pandas as pd

    from vlfair.measures.known import DECLARED
    from vlfair.measures.statistics import Ratio
    from vlfair.probes.declared import Declared, Range, evaluate
    from vlfair.samples import Samples

    groups = np.repeat(["a", "b"], [12, 30])
    samples = Samples(pd.DataFrame({"group": groups, "score": np.random.default_rng(3).gamma(2.0, 1.0, 42)}), {})
    metrics = [Declared("bias_ratio", {}, Ratio("score", "a", "b"), group="group", report=DECLARED["bias_ratio"][1]),
               Declared("group_score_gap", {}, Range("score"), group="group")]
    ratio, gap = evaluate(samples, metrics, bootstrap=400, seed=0)
    assert ratio.details["ci_rows"] == 12 and "ci_rows" not in gap.details
    level = stats.expanded_confidence(0.95, 12)
    monkeypatch.setattr(stats, "expanded_confidence", lambda confidence, rows: confidence)
    at_level, _ = evaluate(samples, metrics, bootstrap=400, seed=0, confidence=level)
    plain, _ = evaluate(samples, metrics, bootstrap=400, seed=0)
    assert ratio.ci == pytest.approx(at_level.ci, rel=1e-12)
    assert ratio.ci[0] < plain.ci[0] and ratio.ci[1] > plain.ci[1]


def test_a_quantity_not_asked_for_a_p_value_gets_only_its_null_mean_on_the_fewest_draws():
    groups = np.repeat(np.arange(2), 30)
    values = np.random.default_rng(5).normal(size=60) + 3 * groups  # far apart: a p-value would draw all
    found = _null_test(values, groups, permutations=50_000, asked=False)
    assert np.isnan(found.p_value[0]) and found.drawn == null.NULL_DRAWS
    asked = _null_test(values, groups, permutations=5_000)
    assert asked.drawn == 5_000 and asked.p_value[0] == pytest.approx(1 / 5001)


def _metric(name, value, ci=None, p=None, **subset):
    return Metric(name, dict(subset), value, ci, p)


def test_the_family_is_adjusted_by_holm_and_bh_and_the_correction_decides():
    facts = {name: facts_of(name) for name in ("group_score_gap", "bias_ratio", "mean_clipscore")}
    raw = [0.001, 0.02, 0.03, 0.2]
    metrics = [_metric("group_score_gap", 1.0, [0.5, 1.5], p, cell=i) for i, p in enumerate(raw)]
    metrics += [_metric("bias_ratio", 1.5, [1.2, 1.8]), _metric("mean_clipscore", 30.0, [29.0, 31.0])]
    ratio_p = verdicts.interval_p(1.5, [1.2, 1.8], 1.0, 0.95)
    family = [*raw, ratio_p]
    for correction, decided in (("holm", stats.holm(family)), ("none", family),
                                ("bh", sps.false_discovery_control(family, method="bh"))):
        summary = verdicts.judge(metrics, facts, correction=correction)
        assert summary["tests"] == 5 and summary["correction"] == correction and summary["alpha"] == 0.05
        assert summary["detected"] == sum(p < 0.05 for p in decided)
        assert [m.verdict["detected"] for m in metrics[:5]] == [bool(p < 0.05) for p in decided]
        np.testing.assert_allclose([m.verdict["p_holm"] for m in metrics[:5]], stats.holm(family))
        np.testing.assert_allclose([m.verdict["q_bh"] for m in metrics[:5]],
                                   sps.false_discovery_control(family, method="bh"))
        assert metrics[-1].verdict is None  # a level
    with pytest.raises(ValueError, match="correction is 'sidak', not one of holm, bh, none"):
        verdicts.judge(metrics, facts, correction="sidak")


def test_phrasings_of_a_pooled_metric_count_once_and_untested_metrics_are_said():
    facts = {"group_score_gap": facts_of("group_score_gap")}
    metrics = [_metric("group_score_gap", 2.0, [1.0, 3.0], 0.001, profession="doctor"),
               _metric("group_score_gap", 2.0, [1.0, 3.0], 0.002, profession="doctor", phrasing=2),
               _metric("group_score_gap", 2.0, [1.0, 3.0], 0.001, profession="doctor", phrasing="pooled"),
               _metric("group_score_gap", 2.0, [1.0, 3.0], None, profession="nurse")]
    summary = verdicts.judge(metrics, facts, tests_given=False)
    assert summary["tests"] == 1 and summary["detected"] == 1 and summary["not_judged"] == 1
    assert metrics[0].verdict["detected"] is None and "pooled" in metrics[0].verdict["not_judged"]
    assert metrics[2].verdict["detected"] is True and metrics[2].verdict["side"] == "over"
    assert metrics[3].verdict["not_judged"] == "no test (n_permutations 0)"


def test_an_exact_zero_is_a_zero():
    """A gap of identical groups computed as 8.88e-16 is 0; -0.0 is 0.0; a real deviation stays."""
    assert null.snapped(8.881784197001252e-16, 0.0, 1.0) == 0.0
    assert null.snapped(1.0 + 2e-16, 1.0, 1.0) == 1.0
    assert math.copysign(1.0, null.snapped(-0.0, None, 1.0)) == 1.0
    assert null.snapped(1e-6, 0.0, 100.0) == 1e-6


def test_a_gap_of_identical_groups_is_zero_with_no_detection():
    import pandas as pd

    from vlfair.probes.declared import Declared, Range, evaluate
    from vlfair.samples import Samples

    frame = pd.DataFrame({"sample_id": [f"s{i}" for i in range(12)], "row": range(12),
                          "group": ["a", "b", "c"] * 4, "score": [0.1 + 0.2] * 12})
    samples = Samples(frame, {})
    [gap] = evaluate(samples, [Declared("group_score_gap", {}, Range("score"), group="group")], n_permutations=500)
    assert gap.value == 0.0 and gap.ci == [0.0, 0.0] and gap.p_value == 1.0
    verdicts.judge([gap], {"group_score_gap": facts_of("group_score_gap")})
    assert gap.verdict["detected"] is False


def test_a_bounded_metrics_interval_holds_its_value_and_says_its_excess(clip_encoder, tmp_path):
    """A run of a tiny CLIP: every gap's interval holds its value, its null mean and excess are reported,
    results.json carries each verdict and the family's summary, and the report says it."""
    from vlfair.probes import run_probe

    results = run_probe("professions", clip_encoder, "synthetic:professions", out_dir=tmp_path, cache_dir=None,
                        settings={"bootstrap": 200, "n_permutations": 400})
    gaps = [m for m in results["metrics"] if m["name"] == "group_score_gap"]
    assert gaps
    for gap in gaps:
        low, high = gap["ci"]
        assert 0.0 <= low <= gap["value"] <= high
        assert gap["details"]["null_mean"] > 0 and gap["details"]["excess"] == pytest.approx(
            gap["value"] - gap["details"]["null_mean"])
        assert gap["verdict"]["rule"] == "test" and gap["verdict"]["p_value"] == gap["p_value"]
    summary = results["verdicts"]
    assert summary["tests"] == len(gaps) and summary["correction"] == "holm"
    assert json.loads((tmp_path / "results.json").read_text())["verdicts"] == summary
    assert f"of {summary['tests']} tests" in (tmp_path / "report.html").read_text()


def test_a_correction_not_one_of_the_three_is_refused_in_one_line(clip_dir, tmp_path, capsys):
    from vlfair.cli import main

    code = main(["run", "professions", "--model", str(clip_dir), "--dataset", "synthetic:professions", "--out",
                 str(tmp_path), "--set", "correction=sidak"])
    err = capsys.readouterr().err
    assert code == 2 and "correction" in err and "holm" in err and "Traceback" not in err


def test_a_rankings_relabelled_top_k_equals_the_resampled_top_k_of_relabelled_groups():
    """vlfair.measures.ranking.relabelled_top_k (all relabellings at once) against resampled_top_k run once per
    relabelling with the relabelled groups, each item held once: counts and NDKL equal."""
    from vlfair.measures import ranking

    rng = np.random.default_rng(6)
    items, queries, k, groups = 60, 5, 12, 3
    scores = rng.normal(size=(queries, items))
    codes = rng.integers(0, groups, items)
    codes[:groups] = np.arange(groups)
    p_stars = [np.full(groups, 1 / groups), np.bincount(codes, minlength=groups) / items]
    order = ranking.top_k_order(scores, ranking.prefix_length(k, items))
    relabellings = np.stack([rng.permutation(items) for _ in range(7)])
    counts, ndkl = ranking.relabelled_top_k(codes[relabellings][:, order[:, :k]], groups, p_stars)
    for r, relabelling in enumerate(relabellings):
        expected = ranking.resampled_top_k(scores, codes[relabelling], k, np.arange(items)[None], p_stars, order)
        np.testing.assert_array_equal(counts[r], expected[0][0])
        np.testing.assert_allclose(ndkl[r], expected[1][0], rtol=1e-12, atol=1e-14)


def test_an_f_tests_effect_size_and_its_interval_cover_the_population_s():
    """stats.f_effect: omega squared from F (0 at F <= 1), its interval the noncentral F's lambdas at which the
    observed F is the (1 +- confidence) / 2 quantile (scipy's ncf), and over simulated F-tests of 4 groups of 25
    it covers the population's share of variance between groups 95 % of the time (1 - alpha / 2 at none: its
    lower bound is 0 wherever F is small)."""
    estimate, (low, high) = stats.f_effect(5.0, 3, 100, 0.95)
    assert estimate == pytest.approx(3 * 4 / (3 * 4 + 104))
    total = 104
    for bound, level in ((low, 0.975), (high, 0.025)):
        lam = bound * total / (1 - bound)
        assert sps.ncf.cdf(5.0, 3, 100, lam) == pytest.approx(level, abs=1e-6)
    assert stats.f_effect(0.5, 3, 100)[0] == stats.f_effect(1.0, 3, 100)[0] == 0.0  # both no effect
    assert stats.f_effect(math.inf, 3, 100) == (None, None)
    huge, interval = stats.f_effect(1e12, 1, 10)  # scipy's noncentral F gives no number out there: no interval
    assert huge == pytest.approx(1.0) and interval is None
    rng = np.random.default_rng(0)
    for true, goal in ((0.0, 0.975), (0.05, 0.95), (0.2, 0.95)):
        offsets = np.asarray([-1.5, -0.5, 0.5, 1.5])
        offsets = offsets * math.sqrt(true / (1 - true)) / offsets.std()  # between-group variance / within's
        covered = 0
        for _ in range(400):
            found = stats.one_way_anova([rng.normal(mu, 1.0, 25) for mu in offsets])
            _, ci = stats.f_effect(found.f_statistic, found.df_between, found.df_within, 0.95)
            covered += ci[0] <= true <= ci[1]
        assert abs(covered / 400 - goal) <= 0.035, (true, covered / 400)


def test_a_board_ranks_f_tests_by_their_effect_size_and_carries_each_run_s_verdict():
    """rank(): F-tests by omega squared (an F of 0.5 and one of 1.0 both no effect: one rank), other bias
    measures by their distance to the neutral value; readable() shows the verdict with its correction."""
    import pandas as pd

    from vlfair.report.leaderboard import rank, readable

    frame = pd.DataFrame({
        "model": ["a", "b", "c", "a", "b"], "family": ["f"] * 5, "subset": ["{}"] * 5,
        "metric": ["trait_anova"] * 3 + ["bias_ratio"] * 2, "value": [0.5, 1.0, 9.0, 0.9, 1.2],
        "neutral": [0.0, 0.0, 0.0, 1.0, 1.0], "effect": [0.0, 0.0, 0.07, math.nan, math.nan],
        "ci_low": [math.nan] * 3 + [0.8, 1.1], "ci_high": [math.nan] * 3 + [1.0, 1.3],
        "p_value": [0.7, 0.4, 1e-5, 0.06, 0.001], "log10_p_value": [math.nan] * 5,
        "detected": [0.0, 0.0, 1.0, 0.0, 1.0], "correction": ["holm"] * 4 + ["bh"]})
    assert rank(frame).tolist() == [1.0, 1.0, 3.0, 1.0, 2.0]
    # a run written before effect sizes beside one with them: not one scale, so that group by distance to 0
    mixed = frame.assign(effect=[math.nan, 0.0, 0.07, math.nan, math.nan], value=[1.2, 500.0, 9.0, 0.9, 1.2])
    assert rank(mixed).tolist() == [1.0, 3.0, 2.0, 1.0, 2.0]
    assert readable(frame)["bias detected"].tolist() == ["no (holm)", "no (holm)", "yes (holm)", "no (holm)",
                                                         "yes (bh)"]


def test_a_trait_anova_reports_its_effect_size_with_an_interval_as_its_function_does():
    """trait_anova's omega squared and interval (stats.f_effect of its F and degrees of freedom), in the function
    and the board's effect column, the catalog naming it the measure's effect."""
    from vlfair import measures
    from vlfair.measures.catalog import CATALOG

    rng = np.random.default_rng(2)
    groups = np.repeat(list("abc"), 30)
    scores = rng.normal(size=groups.size) + (groups == "a") * 0.8
    found = measures.trait_anova(scores, groups, bootstrap=0)
    expected = stats.f_effect(found.f_statistic, found.df_between, found.df_within, 0.95)
    assert (found.omega_squared, found.omega_squared_ci) == expected and 0 < expected[1][0] < expected[0]
    assert CATALOG["trait_anova"].effect == "omega_squared"


def test_a_demo_entry_of_a_run_reads_the_run_s_verdict():
    """demo.entries.make_entry: an entry of a run's metric is detected where its verdict says (after the run's
    correction), not by its interval again; a quantity computed apart is judged by its interval."""
    from vlfair.demo.entries import make_entry

    common = {"planted": "> 1", "sign": 1, "measured": 1.04, "ci": [1.01, 1.07], "neutral": 1.0}
    assert make_entry("p", "m", {}, "biased", **common)["detected"]
    assert not make_entry("p", "m", {}, "biased", **common, verdict={"detected": False})["detected"]


def test_a_label_names_the_model_for_people_and_a_rescore_replaces_its_run_on_a_board(clip_dir, tmp_path, capsys):
    """--label: results.json's model.name and the report say it, the spec (the folder) kept; an empty or
    space-only label refused in one line, exit 2, before anything is written. A rescore of the same samples is the
    same model's scoring: the board keeps the newer one (one row per metric, ranks among models, not copies), and
    names the one it replaced."""
    from vlfair.cli import main
    from vlfair.report.leaderboard import read_board

    common = ["--model", str(clip_dir), "--dataset", "synthetic:professions", "--bootstrap", "50",
              "--permutations", "200"]
    for label in ("", "   "):
        with pytest.raises(SystemExit) as stopped:
            main(["run", "professions", *common, "--out", str(tmp_path / "none"), "--label", label])
        assert stopped.value.code == 2 and "--label" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()
    assert main(["run", "professions", *common, "--out", str(tmp_path / "run"), "--label", "  tiny CLIP  "]) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["model"]["name"] == "tiny CLIP" and results["model"]["spec"].endswith(clip_dir.name)
    assert "tiny CLIP" in (tmp_path / "run" / "report.html").read_text()
    assert main(["rescore", str(tmp_path / "run"), "--bootstrap", "80", "--out", str(tmp_path / "rescored")]) == 0
    skipped: list[str] = []
    board = read_board([tmp_path / "run", tmp_path / "rescored"], skipped)
    assert board.attrs["runs"] == 1 and board.attrs["replaced"] == 1 and set(board["model"]) == {"tiny CLIP"}
    assert len(skipped) == 1 and "a rescore" in skipped[0] and str(tmp_path / "run") in skipped[0]
    rescored = json.loads((tmp_path / "rescored" / "results.json").read_text())
    assert board["value"].tolist() == pytest.approx([m["value"] for m in rescored["metrics"]], nan_ok=True)
    assert board["rank"].isna().all()  # one model: nothing to rank it against



def test_one_wild_interval_runs_off_a_forests_axis_and_the_others_stay_readable():
    """plots.clipped_limits: an interval more than 10 times the median width (a tiny cell's [2753, 546084]) is cut
    off, every value, the neutral value and the ordinary intervals kept in view; none cut where none is wild."""
    import pandas as pd

    from vlfair.report import plots

    rows = pd.DataFrame({"label": list("abcd"), "value": [0.2, 0.3, 0.25, 5000.0],
                         "low": [0.1, 0.2, 0.15, 2753.0], "high": [0.4, 0.5, 0.35, 546084.0]})
    start, end = plots.clipped_limits(rows, neutral=0.0)
    assert start < 0.0 < 0.5 < end < 1.0  # the ordinary intervals fill the axis; the wild one runs past it
    assert plots.clipped_limits(rows.iloc[:3], neutral=0.0) is None
    figure = plots.forest(rows, "gaps", "gap", neutral=0.0)
    assert figure.axes[0].get_xlim()[1] < 546084.0 and "axis cut" in figure.axes[0].get_xlabel()


def test_a_run_warns_of_groups_too_small_for_their_intervals():
    """runner.small_design: one warning naming how many judged bias metrics have a group below 20 images and the
    smallest; none for levels or large groups."""
    from vlfair.probes.runner import SMALL_GROUP, small_design

    def judged(counts, name="group_score_gap"):
        metric = _metric(name, 1.0, [0.5, 1.5], 0.01)
        metric.details = {"group_counts": counts}
        metric.verdict = {"detected": True}
        return metric

    level = _metric("mean_clipscore", 20.0)
    level.details = {"group_counts": {"a": 2}}
    said = small_design([judged({"a": 30, "b": 7}), judged({"a": 12, "b": 40}), judged({"a": 50, "b": 50}), level])
    assert said is not None and said.startswith(f"2 bias metric(s) have a group of fewer than {SMALL_GROUP} images")
    assert "the smallest: 7 in group_score_gap" in said
    assert small_design([judged({"a": 50, "b": 50}), level]) is None
    nested = small_design([judged({"hospital": {"a": 40, "b": 5}, "school": {"a": 30, "b": 30}})])
    # counts by stratum, as word influence's
    assert nested is not None and "the smallest: 5 in group_score_gap" in nested


def test_a_detected_value_near_its_neutral_value_is_shown_apart_from_it():
    """A bias ratio of 0.99982 detected (p = 3e-11) reads "0.9998", not "1", in the terminal and the demo's tally;
    the report's detected table gives its distance from no bias."""
    from vlfair.probes.runner import _detections
    from vlfair.report.numbers import format_value

    assert format_value(0.9998170513218154) == "1" and format_value(0.9998170513218154, apart_from=1.0) == "0.9998"
    assert format_value(1.0, apart_from=1.0) == "1" and format_value(0.5, apart_from=1.0) == "0.5"
    assert format_value(1.0 + 1e-15, apart_from=1.0) == "1"  # past 12 digits: the same to people
    metric = _metric("bias_ratio", 0.9998170513218154, [0.99975, 0.99989], 3e-11)
    metric.verdict = {"rule": "interval", "side": "under", "p_value": 3e-11, "p_holm": 4e-10, "q_bh": 4e-10,
                      "detected": True}
    table = _detections([metric], {"tests": 1, "detected": 1, "correction": "holm", "alpha": 0.05},
                        {"bias_ratio": Facts(neutral=1.0, low=0.0, high=float("inf"))})
    assert table.frame["value - no bias"].iloc[0] == pytest.approx(-0.000183, abs=1e-6)


def test_a_trait_anova_of_groups_with_almost_no_spread_keeps_its_f_and_has_no_effect_interval():
    """An F past 1e9 (groups of almost no spread inside): the run measures it (F, p, omega squared near 1) and
    gives no effect interval where scipy's noncentral F has no number, rather than stopping."""
    from vlfair import measures

    found = measures.trait_anova([0.2, 0.2, 0.2 + 1e-7, 0.2 - 1e-7, 0.8, 0.8, 0.8 + 1e-7, 0.8 - 1e-7],
                                 ["a"] * 4 + ["b"] * 4, bootstrap=50)
    assert found.f_statistic > 1e9 and found.omega_squared == pytest.approx(1.0) and found.omega_squared_ci is None


def test_of_one_scoring_a_board_keeps_the_newest_and_of_two_both():
    """latest_scoring (which read_board applies to the runs it could read): of a run and its rescore (the same
    family, model and samples' content) the newer; runs of other samples are other scorings, both kept."""
    import copy

    from vlfair.report import leaderboard

    older = {"family": "f", "model": {"spec": "m", "revision": None, "dtype": "float32"},
             "samples": {"content_sha256": "abc"}, "created": "2026-01-01T00:00:00+00:00"}
    newer = copy.deepcopy(older) | {"created": "2026-02-01T00:00:00+00:00"}
    kept, replaced = leaderboard.latest_scoring([older, newer])
    assert kept == [newer] and replaced == [(older, newer)]
    assert leaderboard.latest_scoring([older]) == ([older], [])
    other = copy.deepcopy(newer) | {"samples": {"content_sha256": "def"}}  # other samples: another scoring
    assert leaderboard.latest_scoring([older, other]) == ([older, other], [])
