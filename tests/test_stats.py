"""vlfair.stats against scipy and brute-force references."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from vlfair import stats


@pytest.mark.parametrize("sizes", [(5, 5, 5), (3, 9, 4, 12), (2, 2), (50, 7)])
@pytest.mark.parametrize("welch", [False, True])
def test_anova_equals_scipy(sizes, welch):
    rng = np.random.default_rng(sum(sizes))
    samples = [rng.normal(loc=0.3 * i, scale=1 + 0.5 * i, size=n) for i, n in enumerate(sizes)]
    ours = stats.one_way_anova(samples, welch=welch)
    reference = sps.f_oneway(*samples, equal_var=not welch)
    assert ours.f_statistic == pytest.approx(reference.statistic, rel=1e-10)
    assert ours.p_value == pytest.approx(reference.pvalue, rel=1e-8)
    values = np.concatenate(samples)
    ss_between = sum(len(s) * (s.mean() - values.mean()) ** 2 for s in samples)
    assert ours.eta_squared == pytest.approx(ss_between / ((values - values.mean()) ** 2).sum())
    if not welch:
        assert (ours.df_between, ours.df_within) == (len(sizes) - 1, len(values) - len(sizes))


def test_anova_p_value_is_not_rounded_to_zero():
    rng = np.random.default_rng(0)
    samples = [rng.normal(0, 1, 3000), rng.normal(0.85, 1, 3000)]
    result = stats.one_way_anova(samples)
    assert 1e-300 < result.p_value < 1e-200  # the order of the study's 1e-238
    assert result.p_value == pytest.approx(sps.f.sf(result.f_statistic, 1, 5998), rel=1e-9)
    assert 1 - sps.f.cdf(result.f_statistic, 1, 5998) == 0.0  # what a cdf-based p would have said


def test_anova_degenerate_and_bad_input():
    assert stats.one_way_anova([[1.0, 1.0], [2.0, 2.0]]).f_statistic == math.inf
    assert stats.one_way_anova([[1.0, 1.0], [2.0, 2.0]]).p_value == 0.0
    assert math.isnan(stats.one_way_anova([[1.0, 1.0], [1.0, 1.0]]).f_statistic)
    with pytest.raises(ValueError, match="at least 2 groups"):
        stats.one_way_anova([[1.0, 2.0]])
    with pytest.raises(ValueError, match=r"at least 2 values per group; group sizes are \[2, 1\]"):
        stats.one_way_anova([[1.0, 2.0], [3.0]])
    with pytest.raises(ValueError, match="non-zero variance"):
        stats.one_way_anova([[1.0, 1.0], [2.0, 3.0]], welch=True)


@pytest.mark.parametrize("sizes", [(4, 5), (6, 3), (3, 3, 3)])
def test_exact_permutation_test_equals_scipy(sizes):
    rng = np.random.default_rng(7)
    samples = [rng.normal(0.5 * i, 1, n) for i, n in enumerate(sizes)]
    values = np.concatenate(samples)
    codes = np.concatenate([np.full(n, i) for i, n in enumerate(sizes)])
    statistic = stats.mean_difference if len(sizes) == 2 else stats.mean_range

    def reference_statistic(*groups):
        means = [np.mean(g) for g in groups]
        return max(means) - min(means)

    reference = sps.permutation_test(samples, reference_statistic, permutation_type="independent",
                                     n_resamples=np.inf, alternative="greater").pvalue
    assert stats.permutation_test(values, codes, statistic, n_permutations=10_000) == pytest.approx(reference)


def test_monte_carlo_permutation_test_agrees_with_exact_and_is_never_zero():
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.normal(0, 1, 9), rng.normal(0.8, 1, 9)])
    codes = np.repeat([0, 1], 9)
    exact = stats.permutation_test(values, codes, stats.mean_difference, n_permutations=10**5)
    monte_carlo = stats.permutation_test(values, codes, stats.mean_difference, n_permutations=20_000, seed=1)
    assert monte_carlo == pytest.approx(exact, abs=0.01)
    far_apart = np.concatenate([np.zeros(40), np.ones(40) * 5]) + rng.normal(0, 0.01, 80)
    p = stats.permutation_test(far_apart, np.repeat([0, 1], 40), stats.mean_difference, n_permutations=999)
    assert p == 1 / 1000


def test_stratified_resamples_keep_every_group_and_its_size():
    codes = np.array([0] * 3 + [1] * 1 + [2] * 5)
    for block in stats.stratified_resamples(codes, 500, seed=0):
        assert np.array_equal(codes[block], np.broadcast_to(codes, block.shape))


def test_bootstrap_is_seeded():
    values = np.random.default_rng(0).normal(size=40)
    codes = np.repeat([0, 1], 20)

    def mean_of(idx):
        return values[idx].mean(axis=1)

    first = stats.bootstrap_interval(mean_of, codes, 200, seed=5)
    assert np.array_equal(first, stats.bootstrap_interval(mean_of, codes, 200, seed=5))
    assert not np.array_equal(first, stats.bootstrap_interval(mean_of, codes, 200, seed=6))


def test_hoeffding_half_width_inverts_the_bound():
    for m in (1, 10, 250):
        eps = stats.hoeffding_half_width(m, delta=0.05)
        assert 4 * math.exp(-m * eps**2 / 2) == pytest.approx(0.05)
    with pytest.raises(ValueError, match="at least 1 image"):
        stats.hoeffding_half_width(0)


def test_paired_bootstrap_detects_a_shift_and_not_a_copy():
    rng = np.random.default_rng(2)
    groups = np.repeat(["women", "men"], 100)
    base = rng.normal(30, 3, 200)
    model_b = base + np.where(groups == "women", -2.0, 0.0) + rng.normal(0, 0.5, 200)

    def ratio(scores, labels):
        return scores[labels == "women"].mean() / scores[labels == "men"].mean()

    shifted = stats.paired_bootstrap(ratio, base, model_b, groups, n_resamples=500)
    assert shifted.difference == pytest.approx(ratio(base, groups) - ratio(model_b, groups))
    assert shifted.ci[0] > 0 and shifted.p_value < 0.01
    same = stats.paired_bootstrap(ratio, base, base.copy(), groups, n_resamples=200)
    assert same.difference == 0 and same.ci == (0.0, 0.0)
    with pytest.raises(ValueError, match="differ in length"):
        stats.paired_bootstrap(ratio, base, base[:-1], groups)


def test_all_relabellings_enumerates_each_assignment_once():
    codes = np.array([0, 0, 1, 1, 1, 2])
    blocks = stats._all_relabellings(codes, limit=1000)
    rows = {tuple(r) for r in blocks[0]}
    expected = {p for p in itertools.permutations(codes.tolist())}
    assert rows == expected and len(blocks[0]) == len(expected) == 60
