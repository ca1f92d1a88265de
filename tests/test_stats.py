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
    result = stats.permutation_test(values, codes, statistic, n_permutations=10_000)
    assert result.p_value == pytest.approx(reference) and result.method == "exact"
    assert result.log10_p_value == pytest.approx(np.log10(reference))


def test_monte_carlo_permutation_test_agrees_with_exact_and_is_never_zero():
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.normal(0, 1, 9), rng.normal(0.8, 1, 9)])
    codes = np.repeat([0, 1], 9)
    exact = stats.permutation_test(values, codes, stats.mean_difference, n_permutations=10**5)
    monte_carlo = stats.permutation_test(values, codes, stats.mean_difference, n_permutations=20_000, seed=1,
                                         sequential=False)
    assert exact.method == "exact" and monte_carlo.method == "monte_carlo" and monte_carlo.permutations == 20_000
    assert monte_carlo.p_value == pytest.approx(exact.p_value, abs=0.01)
    far_apart = np.concatenate([np.zeros(40), np.ones(40) * 5]) + rng.normal(0, 0.01, 80)
    p = stats.permutation_test(far_apart, np.repeat([0, 1], 40), stats.mean_difference, n_permutations=999)
    assert p.p_value == 1 / 1000 and p.method == "monte_carlo"  # never settled early: nothing was as extreme


def test_sequential_permutation_test_stops_once_settled_and_agrees_with_the_full_one():
    """Besag-Clifford: a p far from significance stops after about h / p relabellings."""
    rng = np.random.default_rng(11)
    estimates = []
    for repeat in range(40):  # a null dataset: p is uniform, mostly far from 0
        values = rng.normal(size=400)
        codes = np.repeat([0, 1], 200)
        full = stats.permutation_test(values, codes, stats.mean_difference, 10_000, seed=repeat, sequential=False)
        early = stats.permutation_test(values, codes, stats.mean_difference, 10_000, seed=repeat)
        if early.method == "sequential_monte_carlo":
            assert early.permutations < 10_000
            assert early.p_value == pytest.approx(stats.SEQUENTIAL_EXCEEDANCES / early.permutations)
            estimates.append((early.p_value, full.p_value))
        else:  # never reached h: all relabellings drawn, the same estimate as the full test
            assert early.p_value == full.p_value
    assert len(estimates) >= 30
    relative = np.array([abs(e - f) / f for e, f in estimates])
    assert np.median(relative) < 0.15 and relative.max() < 0.6  # relative error about 1 / sqrt(h)


@pytest.mark.parametrize("statistic, shifts", [(stats.mean_difference, [0.0, 0.035]),
                                               (stats.mean_range, [0.0, 0.015, 0.03])])
def test_the_normal_limit_agrees_with_monte_carlo_above_its_size(statistic, shifts):
    rng = np.random.default_rng(5)
    n = 7_000  # per group: above the limit's thresholds
    assert n * len(shifts) >= stats.ASYMPTOTIC_MIN_ROWS and n >= stats.ASYMPTOTIC_MIN_GROUP
    codes = np.repeat(np.arange(len(shifts)), n)
    values = rng.exponential(1.0, codes.size) + np.repeat(shifts, n)  # skewed scores: the limit is the mean's
    limit = stats.permutation_test(values, codes, statistic)
    monte_carlo = stats.permutation_test(values, codes, statistic, 4000, seed=2, sequential=False, asymptotic=False)
    assert limit.method == "normal_limit" and limit.permutations is None
    assert 0.005 < monte_carlo.p_value < 0.5  # a p the Monte Carlo resolves
    assert limit.p_value == pytest.approx(monte_carlo.p_value, abs=4 * np.sqrt(monte_carlo.p_value / 4000) + 0.003)


def test_the_normal_limit_keeps_p_values_below_float64_in_log_space():
    codes = np.repeat([0, 1], 20_000)
    values = np.random.default_rng(1).normal(size=codes.size) + codes * 0.5  # |z| about 50
    result = stats.permutation_test(values, codes, stats.mean_difference)
    observed = float(stats.mean_difference(values, codes[None])[0])
    sd = np.sqrt(values.var(ddof=1) * codes.size / (20_000 * 20_000))
    assert result.p_value < 1e-300 or result.p_value == 0.0
    # brute-force reference: mpmath's normal tail at 50 digits
    import mpmath

    with mpmath.workdps(50):
        reference = float(mpmath.log10(mpmath.erfc(mpmath.mpf(observed / sd) / mpmath.sqrt(2))))
    assert result.log10_p_value == pytest.approx(reference, rel=1e-9)
    ranged = stats.permutation_test(values, codes, stats.mean_range)  # two groups: the range is the difference
    assert ranged.log10_p_value == pytest.approx(reference, rel=1e-9)


def test_f_test_log10_p_below_float64_matches_mpmath_and_scipy_above():
    import mpmath
    from scipy import stats as sps

    assert stats.f_test_log10_p(3.0, 2, 30) == pytest.approx(np.log10(sps.f.sf(3.0, 2, 30)))
    with mpmath.workdps(60):  # the F tail by direct integration of its density
        d1, d2, f = 6, 13993, 1392.0
        density = lambda x: (mpmath.sqrt((d1 * x) ** d1 * d2 ** d2 / (d1 * x + d2) ** (d1 + d2))  # noqa: E731
                             / (x * mpmath.beta(d1 / 2, d2 / 2)))
        steps = [f * r for r in (1, 1.001, 1.01, 1.05, 1.2, 2)] + [mpmath.inf]  # the density falls off steeply
        reference = float(mpmath.log10(mpmath.quad(density, steps)))
    assert stats.f_test_log10_p(f, d1, d2) == pytest.approx(reference, abs=1e-6)
    assert sps.f.sf(f, d1, d2) == 0.0  # what a float64 p-value says: nothing


def test_bootstrap_group_means_is_the_stratified_bootstrap():
    rng = np.random.default_rng(4)
    codes = np.repeat([0, 1, 2], [30, 500, 7])
    values = rng.gamma(2.0, size=codes.size) + codes
    fast = stats.bootstrap_group_means(values, codes, 3, 4000, seed=1)
    assert fast.shape == (4000, 3) and np.array_equal(fast, stats.bootstrap_group_means(values, codes, 3, 4000, seed=1))
    assert not np.array_equal(fast, stats.bootstrap_group_means(values, codes, 3, 4000, seed=2))
    reference = stats.bootstrap_samples(lambda idx: stats.group_means(values[idx], codes, 3), codes, 4000, 1)
    # the same resampling distribution: means and spreads agree within Monte Carlo error
    assert fast.mean(axis=0) == pytest.approx(reference.mean(axis=0), rel=0.01)
    assert fast.std(axis=0) == pytest.approx(reference.std(axis=0), rel=0.06)
    for g, size in enumerate([30, 500, 7]):  # and the textbook standard error of a mean
        member = values[codes == g]
        assert fast[:, g].std() == pytest.approx(member.std() / np.sqrt(size), rel=0.06)


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


def test_f_test_log10_p_where_mpmaths_incomplete_beta_does_not_converge():
    """df_between = 1 (the traits probe's gender F-tests) with a huge df_within and p near 1e-2968: F(1, d) is
    t(d) squared, so the reference is twice the t tail, integrated from its own density."""
    import mpmath

    d, f = 10**6, 13750.0
    with mpmath.workdps(40):
        t = mpmath.sqrt(f)
        density = lambda x: mpmath.gamma((d + 1) / 2) / (mpmath.sqrt(d * mpmath.pi) * mpmath.gamma(d / 2)) \
            * (1 + x**2 / d) ** (-(d + 1) / 2)  # noqa: E731
        reference = float(mpmath.log10(
            2 * mpmath.quad(density, [t * r for r in (1, 1.001, 1.01, 1.1, 2)] + [mpmath.inf])))
    assert stats.f_test_log10_p(f, 1, d) == pytest.approx(reference, abs=1e-6)
    groups = np.repeat(["a", "b"], 100_000)  # and through the measure, which used to raise NoConvergence
    values = np.random.default_rng(0).normal(size=groups.size) + 0.53 * (groups == "a")
    assert stats.one_way_anova([values[groups == "a"], values[groups == "b"]]).log10_p_value < -1000


def test_monte_carlo_blocks_stay_within_their_memory_cap():
    """A big dataset with one small group (no normal limit) draws relabellings in capped blocks."""
    import tracemalloc

    codes = np.zeros(300_000, dtype=np.int64)
    codes[:200] = 1  # 200 rows: below ASYMPTOTIC_MIN_GROUP, so Monte Carlo
    values = np.random.default_rng(2).normal(size=codes.size)
    tracemalloc.start()
    result = stats.permutation_test(values, codes, stats.mean_difference, n_permutations=200)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert result.method in ("sequential_monte_carlo", "monte_carlo")
    assert peak < 3 * stats._BLOCK_ENTRIES * 8  # a 100-relabelling first block would take 240 MB


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_proportion_interval_equals_scipy_s_exact_interval(confidence):
    """Clopper-Pearson in its closed form against scipy's root-finding, at the edges (none or every
    trial a success) and in between, for few trials and many."""
    for trials in [*range(1, 40), 100, 1000, 5000]:
        for successes in sorted({0, 1, trials // 3, trials // 2, trials - 1, trials}):
            expected = sps.binomtest(successes, trials).proportion_ci(confidence_level=confidence, method="exact")
            low, high = stats.proportion_interval(successes, trials, confidence)
            assert low == pytest.approx(expected.low, abs=1e-9) and high == pytest.approx(expected.high, abs=1e-9)
    assert stats.proportion_interval(0, 0) is None
    with pytest.raises(ValueError, match=r"successes \(5\) must be between 0 and trials \(4\)"):
        stats.proportion_interval(5, 4)
