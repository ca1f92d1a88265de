"""The bias_difference comparison (metrics/bias_difference, vlfair.measures.bias_difference): two models'
bias ratios and group gaps on the same rows, checked against a brute-force paired bootstrap and
scipy's paired permutation test, and loaded as a Hugging Face user loads it."""

from __future__ import annotations

import json

import evaluate
import numpy as np
import pytest
from scipy import stats as sps

import vlfair
from vlfair import measures, stats


@pytest.fixture(scope="module")
def module():
    return vlfair.load_metric("bias_difference")


def _two_models(n_per_group: int, seed: int, a_women: float = 0.85, b_women: float = 1.0):
    """Scores of the same images by two models: a per-image part both share (the pairing's point),
    each model's own noise, and each model's factor on women's scores (1 = unbiased)."""
    rng = np.random.default_rng(seed)
    groups = np.array(["women"] * n_per_group + ["men"] * n_per_group + ["other"] * n_per_group)
    image = rng.uniform(20, 30, groups.size)
    women = groups == "women"
    a = image * np.where(women, a_women, 1.0) + rng.normal(0, 0.3, groups.size)
    b = image * np.where(women, b_women, 1.0) + rng.normal(0, 0.3, groups.size)
    return a, b, groups


def _ratio(values: np.ndarray, groups: np.ndarray) -> float:
    return values[groups == "women"].mean() / values[groups == "men"].mean()


def _gap(values: np.ndarray, groups: np.ndarray) -> float:
    means = [values[groups == g].mean() for g in np.unique(groups)]
    return max(means) - min(means)


# ---- the numbers -------------------------------------------------------------------------------
def test_each_models_values_are_the_measures_own():
    a, b, groups = _two_models(30, seed=1)
    result = measures.bias_difference(a, b, groups, "women", "men", bootstrap=0, n_permutations=0)
    for values, side in ((a, "a"), (b, "b")):  # exactly what the one-model modules report
        assert result[f"ratio_{side}"] == measures.bias_ratio(values, groups, "women", "men", bootstrap=0,
                                                              n_permutations=0)["bias_ratio"]
        assert result[f"max_gap_{side}"] == measures.group_score_gap(values, groups, bootstrap=0,
                                                                     n_permutations=0)["max_gap"]
    assert result["ratio_difference"] == result["ratio_a"] - result["ratio_b"]
    assert result["ratio_distance_difference"] == pytest.approx(
        abs(result["ratio_a"] - 1) - abs(result["ratio_b"] - 1))
    assert result["max_gap_difference"] == result["max_gap_a"] - result["max_gap_b"]
    assert result["group_counts"] == {"men": 30, "other": 30, "women": 30}
    # without resampling or swaps: no interval, no p, no verdict
    assert result["ratio_difference_ci"] is None and result["ratio_p_value"] is None
    assert result["ratio_verdict"] is None and result["max_gap_verdict"] is None


def test_paired_interval_equals_a_brute_force_paired_bootstrap():
    """A loop over resamples: each draws rows within each group and evaluates both models on the
    same rows with the one-model measures; the percentile interval of A - B must be the module's."""
    a, b, groups = _two_models(7, seed=2)  # a third group ("other") takes part in the gap and the strata
    n_resamples, seed, confidence = 400, 11, 0.9
    result = measures.bias_difference(a, b, groups, "women", "men", bootstrap=n_resamples, confidence=confidence,
                                      seed=seed, n_permutations=0)
    _, codes = stats.encode_groups(groups)
    ratio_differences, gap_differences, distance_differences = [], [], []
    for block in stats.stratified_resamples(codes, n_resamples, seed):
        for rows in block:
            assert (groups[rows] == groups).all()  # stratified: every slot keeps its group
            ratio_a = measures.bias_ratio(a[rows], groups[rows], "women", "men", bootstrap=0,
                                          n_permutations=0)["bias_ratio"]
            ratio_b = measures.bias_ratio(b[rows], groups[rows], "women", "men", bootstrap=0,
                                          n_permutations=0)["bias_ratio"]
            gap_a = measures.group_score_gap(a[rows], groups[rows], bootstrap=0, n_permutations=0)["max_gap"]
            gap_b = measures.group_score_gap(b[rows], groups[rows], bootstrap=0, n_permutations=0)["max_gap"]
            ratio_differences.append(ratio_a - ratio_b)
            distance_differences.append(abs(ratio_a - 1) - abs(ratio_b - 1))
            gap_differences.append(gap_a - gap_b)
    assert len(ratio_differences) == n_resamples
    levels = [(1 - confidence) / 2, (1 + confidence) / 2]
    np.testing.assert_allclose(result["ratio_difference_ci"], np.quantile(ratio_differences, levels), rtol=1e-9)
    np.testing.assert_allclose(result["ratio_distance_difference_ci"], np.quantile(distance_differences, levels),
                               rtol=1e-9)
    np.testing.assert_allclose(result["max_gap_difference_ci"], np.quantile(gap_differences, levels), rtol=1e-9)
    # and vlfair.stats.paired_bootstrap, the looped reference, draws the same rows
    looped = stats.paired_bootstrap(lambda s, g: measures.bias_ratio(s, g, "women", "men", bootstrap=0,
                                                                     n_permutations=0)["bias_ratio"],
                                    a, b, groups, n_resamples=n_resamples, confidence=confidence, seed=seed)
    np.testing.assert_allclose(result["ratio_difference_ci"], looped.ci, rtol=1e-9)


def test_pairing_narrows_the_interval():
    """The models share each image's part of the score: resampled together, it cancels in A - B."""
    a, b, groups = _two_models(40, seed=3, a_women=0.95, b_women=0.97)
    paired = measures.bias_difference(a, b, groups, "women", "men", bootstrap=500, n_permutations=0)
    alone = [measures.bias_ratio(v, groups, "women", "men", bootstrap=500, n_permutations=0)["bias_ratio_ci"]
             for v in (a, b)]
    paired_width = np.diff(paired["ratio_difference_ci"])[0]
    assert paired_width < 0.25 * (np.diff(alone[0])[0] + np.diff(alone[1])[0])


@pytest.mark.parametrize("seed, women", [(4, 0.8), (5, 0.8), (6, 0.5)])  # p from 0.02 to 0.97
def test_exact_p_value_equals_scipys_paired_permutation_test(seed, women):
    """10 rows: all 2^10 = 1024 swaps fit in n_permutations, and scipy enumerates them too.

    The statistic handed to scipy is rounded to 12 decimals: the gap difference has many exact
    ties (while the top and bottom groups stay, swapping their rows keeps each group's sum over
    both models, so A - B does not move), which float arithmetic misses by ~1e-16; scipy's
    tolerance, 100 eps relative to a small observed value, does not always absorb that (seed 5:
    4 of 1024 tied swaps), vlfair's 1e-12 does."""
    rng = np.random.default_rng(seed)
    groups = np.array(["women"] * 4 + ["men"] * 4 + ["other"] * 2)
    a, b = rng.uniform(0.2, 0.4, groups.size), rng.uniform(0.2, 0.4, groups.size)
    a[groups == "women"] *= women  # some bias in A, so p is not 1
    result = measures.bias_difference(a, b, groups, "women", "men", bootstrap=0, n_permutations=2000)
    for key, measure in (("ratio", _ratio), ("max_gap", _gap)):
        expected = sps.permutation_test((a, b), lambda x, y, f=measure: round(f(x, groups) - f(y, groups), 12),
                                        permutation_type="samples", n_resamples=10**6, vectorized=False)
        assert result[f"{key}_p_value_method"] == "exact"
        assert result[f"{key}_p_value"] == pytest.approx(expected.pvalue, rel=1e-12, abs=0)
        assert result[f"{key}_log10_p_value"] == pytest.approx(np.log10(expected.pvalue))


def test_monte_carlo_p_value_agrees_with_scipys():
    """40 rows: 2^40 swaps, drawn at random by both; the two estimates agree within their error."""
    a, b, groups = _two_models(14, seed=6, a_women=0.97, b_women=0.96)
    result = measures.bias_difference(a, b, groups, "women", "men", bootstrap=0, n_permutations=20000, seed=1)
    expected = sps.permutation_test((a, b), lambda x, y: _ratio(x, groups) - _ratio(y, groups),
                                    permutation_type="samples", n_resamples=20000, vectorized=False,
                                    random_state=np.random.default_rng(0))
    assert result["ratio_p_value_method"] in ("monte_carlo", "sequential_monte_carlo")
    assert 0.05 < expected.pvalue < 0.95  # a p-value where a Monte Carlo estimate has something to estimate
    assert result["ratio_p_value"] == pytest.approx(expected.pvalue, rel=0.3)


@pytest.mark.parametrize("per_group", [3, 200], ids=["exact", "monte-carlo"])
def test_a_model_against_itself_shows_no_difference(per_group):
    a, _, groups = _two_models(per_group, seed=7)
    result = measures.bias_difference(a, a.copy(), groups, "women", "men", bootstrap=300)
    for key in ("ratio", "max_gap"):
        assert result[f"{key}_a"] == result[f"{key}_b"] and result[f"{key}_difference"] == 0.0
        assert result[f"{key}_difference_ci"] == [0.0, 0.0]
        assert result[f"{key}_p_value"] == 1.0 and result[f"{key}_log10_p_value"] == 0.0
        assert result[f"{key}_verdict"] == "no difference detected"
    assert result["ratio_p_value_method"] == ("exact" if per_group == 3 else "sequential_monte_carlo")


def test_a_planted_difference_is_found_with_its_sign():
    """A scores women 15 % lower; B does not: B is less biased, by both measures; swapping the
    models mirrors everything."""
    a, b, groups = _two_models(150, seed=8, a_women=0.85, b_women=1.0)
    result = measures.bias_difference(a, b, groups, "women", "men", n_permutations=2000)
    assert result["ratio_a"] == pytest.approx(0.85, abs=0.03)
    assert result["ratio_b"] == pytest.approx(1, abs=0.03)
    assert result["ratio_difference"] < 0 and result["ratio_difference_ci"][1] < 0
    assert result["ratio_distance_difference_ci"][0] > 0  # B closer to 1 over the whole interval
    assert result["max_gap_difference"] > 0 and result["max_gap_difference_ci"][0] > 0
    for key in ("ratio", "max_gap"):
        assert result[f"{key}_p_value"] < 0.01 and result[f"{key}_verdict"] == "B less biased"
    mirrored = measures.bias_difference(b, a, groups, "women", "men", n_permutations=2000)
    assert mirrored["ratio_difference"] == -result["ratio_difference"]
    mirror = -np.array(result["ratio_difference_ci"])[::-1]
    np.testing.assert_allclose(mirrored["ratio_difference_ci"], mirror, rtol=1e-12)
    assert mirrored["ratio_verdict"] == mirrored["max_gap_verdict"] == "A less biased"


def test_ratios_on_either_side_of_neutral_differ_without_a_less_biased_model():
    """0.9 against 1.1: the ratios differ, but neither is closer to 1; the gaps are alike too."""
    a, b, groups = _two_models(300, seed=9, a_women=0.9, b_women=1.1)
    result = measures.bias_difference(a, b, groups, "women", "men", n_permutations=2000)
    assert result["ratio_difference_ci"][1] < 0 and result["ratio_p_value"] < 0.01
    low, high = result["ratio_distance_difference_ci"]
    assert low < 0 < high
    assert result["ratio_verdict"] == "differ; neither closer to no bias"


def test_a_verdict_needs_the_interval_and_the_p_value():
    a, b, groups = _two_models(150, seed=8)
    found = measures.bias_difference(a, b, groups, "women", "men", n_permutations=2000)
    assert found["ratio_p_value"] < 0.01 and found["ratio_verdict"] == "B less biased"
    # the same interval with a test that cannot reach p < 1 - confidence (1 swap: p >= 1/2)
    weak_test = measures.bias_difference(a, b, groups, "women", "men", n_permutations=1)
    assert weak_test["ratio_difference_ci"] == found["ratio_difference_ci"]
    assert weak_test["ratio_verdict"] == "no difference detected"
    # no test at all: the interval alone decides
    assert measures.bias_difference(a, b, groups, "women", "men", n_permutations=0)["ratio_verdict"] == \
        "B less biased"


# ---- the evaluate module -------------------------------------------------------------------------
def test_the_module_returns_the_measures_dict_and_streams(module):
    a, b, groups = _two_models(10, seed=10)
    options = {"protected_group": "women", "reference_group": "men", "bootstrap": 50, "n_permutations": 500}
    whole = module.compute(predictions1=a.tolist(), predictions2=b.tolist(), references=groups.tolist(), **options)
    assert whole == measures.bias_difference(a, b, groups, **options).to_dict()
    json.dumps(whole)
    # evaluate.combine-free use as in a training loop: add_batch and add, then compute with the options
    module.add_batch(predictions1=a[:12].tolist(), predictions2=b[:12].tolist(), references=groups[:12].tolist())
    for x, y, g in zip(a[12:], b[12:], groups[12:]):
        module.add(predictions1=float(x), predictions2=float(y), reference=str(g))
    assert module.compute(**options) == whole


def test_integer_group_labels(module):
    result = module.compute(predictions1=[1.0, 2.0, 3.0, 4.0], predictions2=[2.0, 2.0, 3.0, 3.0],
                            references=[1, 1, 0, 0], protected_group=1, reference_group=0, bootstrap=0,
                            n_permutations=0)
    assert result["ratio_a"] == pytest.approx(1.5 / 3.5) and result["ratio_b"] == pytest.approx(2 / 3)
    assert result["group_counts"] == {"0": 2, "1": 2}


@pytest.mark.parametrize("change, error, message", [
    ({"predictions2": [0.3, 0.4, 0.5]}, ValueError,
     r"Mismatch in the number of predictions1 \(4\) and predictions2 \(3\)"),
    ({"references": ["a", "a", "b"]}, ValueError, r"Mismatch in the number of predictions1 \(4\) and references \(3\)"),
    ({"protected_group": "c"}, ValueError, r"protected_group 'c' does not occur in references; groups present"),
    ({"reference_group": None}, ValueError, "reference_group is required"),
    ({"bootstrapp": 10}, TypeError, "bias_difference does not take 'bootstrapp'; no vlfair module takes it"),
    ({"predictions2": [0.3, -0.4, 0.5, 0.6]}, ValueError, r"predictions2 must be >= 0 for a ratio of means .*; row 1 "),
    ({"predictions1": [0.3, float("nan"), 0.5, 0.6]}, ValueError, "predictions1 has NaN at row 1"),
    ({"predictions2": [0.3, 0.4, 0.0, 0.0]}, ValueError, "predictions2: the mean score of reference_group 'b' is 0"),
    ({"n_permutations": -1}, ValueError, r"n_permutations must be a whole number from 0 to 10,000,000"),
    ({"confidence": 95}, ValueError, r"confidence must be a number in \(0, 1\)"),
], ids=["length", "references-length", "absent-group", "no-group", "unknown-option", "negative", "nan",
        "zero-reference-mean", "permutations", "confidence"])
def test_bad_input_is_named(module, change, error, message):
    arguments = {"predictions1": [0.3, 0.4, 0.5, 0.6], "predictions2": [0.3, 0.4, 0.5, 0.6],
                 "references": ["a", "a", "b", "b"], "protected_group": "a", "reference_group": "b", **change}
    with pytest.raises(error, match=message):
        module.compute(**arguments)


def test_a_missing_model_column_is_named(module):
    with pytest.raises(ValueError, match=r"inputs are missing: \['predictions2'\]"):
        module.compute(predictions1=[0.3, 0.4, 0.5, 0.6], references=["a", "a", "b", "b"])


def test_publish_plans_its_space():
    from vlfair.publish import plan_spaces

    (plan,) = plan_spaces("acme", ["bias_difference"])
    assert plan.repo_id == "acme/bias_difference"
    assert plan.files == ("bias_difference.py", "README.md", "app.py", "requirements.txt")
    assert isinstance(evaluate.load(str(plan.source)), evaluate.Comparison)
