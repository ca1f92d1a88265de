"""The nine measures: published arithmetic, brute-force references, properties, bad input."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from vlfair import measures as M

finite = st.floats(min_value=0.01, max_value=100, allow_nan=False, allow_infinity=False)


# ---- published arithmetic from the studies ----------------------------------------------
def test_pfi_politician_bias_ratio():
    result = M.bias_ratio([70.13] * 3 + [81.85] * 3, ["women"] * 3 + ["men"] * 3, "women", "men", bootstrap=0)
    assert round(result["bias_ratio"], 4) == 0.8568


def test_multilingual_cross_lingual_gap_of_4_8_points():
    predictions = ["ok"] * 504 + ["no"] * 496 + ["ok"] * 456 + ["no"] * 544
    result = M.cross_lingual_gap(predictions, ["ok"] * 2000, ["en"] * 1000 + ["de"] * 1000, pivot="en", bootstrap=0)
    assert result["accuracy"] == {"de": 0.456, "en": 0.504}
    assert result["gap"] == pytest.approx(0.048) and result["gap_to_pivot"]["de"] == pytest.approx(0.048)
    assert (result["best_language"], result["worst_language"]) == ("en", "de")


def test_measures_module_imports_no_torch():
    code = "import sys, vlfair.measures, vlfair.stats, vlfair.metrics; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ---- brute force ------------------------------------------------------------------------
def _variant_data(shares: dict, m: int, rng):
    predictions, variants = [], []
    for subset, p in shares.items():
        hits = rng.binomial(1, p, m)
        predictions += hits.tolist()
        variants += [",".join(map(str, subset))] * m
    return predictions, variants


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_word_influence_levels_and_shapley_against_enumeration(n):
    rng = np.random.default_rng(n)
    subsets = [s for r in range(n + 1) for s in itertools.combinations(range(n), r)]
    predictions, variants = _variant_data({s: rng.uniform(0.1, 0.9) for s in subsets}, 7, rng)
    observed = {}
    for s in subsets:
        key = ",".join(map(str, s))
        observed[s] = np.mean([p for p, v in zip(predictions, variants) if v == key])
    for k in range(1, n + 1):
        result = M.word_influence(predictions, variants, n, k=k)
        for word in range(n):
            others = [w for w in range(n) if w != word]
            expected = np.mean([observed[R] - observed[tuple(sorted(R + (word,)))]
                                for R in itertools.combinations(others, k - 1)])
            assert result["influence"][word] == pytest.approx(expected)
    # Shapley by its definition: mean marginal contribution over all orderings, v(S) = -P(S)
    shapley = M.word_influence(predictions, variants, n)["shapley"]
    for word in range(n):
        marginals = []
        for order in itertools.permutations(range(n)):
            before = tuple(sorted(order[: order.index(word)]))
            marginals.append(observed[before] - observed[tuple(sorted(before + (word,)))])
        assert shapley[word] == pytest.approx(np.mean(marginals))


def test_word_influence_hoeffding_uses_least_sampled_variant():
    predictions = [1, 0] * 10 + [1] * 4
    variants = [""] * 20 + ["0"] * 4
    result = M.word_influence(predictions, variants, num_words=1)
    assert result["influence"] == [pytest.approx(0.5 - 1.0)]
    assert result["ci_half_width"] == pytest.approx(math.sqrt(2 * math.log(4 / 0.05) / 4))
    assert result["min_images_per_variant"] == 4


def test_retention_against_loops():
    rng = np.random.default_rng(0)
    refs = np.repeat(np.arange(6), [1, 2, 3, 1, 2, 3])
    scores = rng.normal(size=(refs.size, 8))
    scores[np.arange(refs.size), refs] += 1.0
    result = M.retention(scores, refs, bootstrap=0)
    text = np.mean([int(np.argmax(scores[i]) == refs[i]) for i in range(refs.size)])
    image = np.mean([int(refs[int(np.argmax(scores[:, j]))] == j) for j in range(6)])
    assert (result["text_score"], result["image_score"]) == (pytest.approx(text), pytest.approx(image))
    assert result["num_names"] == 6 and result["num_candidates"] == 8
    with_ci = M.retention(scores, refs, bootstrap=200)
    assert (with_ci["text_score_ci"][0] <= result["text_score"] <= with_ci["text_score_ci"][1]
            and "ci_note" not in with_ci)
    single = M.retention(scores[[0, 3]], refs[[0, 3]], bootstrap=200)  # one image per name: nothing to resample
    assert single["text_score_ci"] is None and single["image_score_ci"] is None and "one image" in single["ci_note"]


def test_ranking_skew_by_hand():
    scores = [[0.9, 0.8, 0.7, 0.6, 0.1, 0.0]]
    groups = ["m", "m", "w", "m", "w", "w"]
    result = M.ranking_skew(scores, groups, k=4, smoothing=0.0)
    assert result["skew"]["m"] == pytest.approx(math.log(0.75 / 0.5))
    assert result["skew"]["w"] == pytest.approx(math.log(0.25 / 0.5))
    assert result["bias_at_k"] == pytest.approx((3 - 1) / 4)
    prefix_shares = [(1, 0), (1, 0), (2 / 3, 1 / 3), (3 / 4, 1 / 4)]
    kl = [sum(p * math.log(p / 0.5) for p in share if p > 0) for share in prefix_shares]
    weights = [1 / math.log2(i + 2) for i in range(4)]
    assert result["ndkl"] == pytest.approx(sum(k * w for k, w in zip(kl, weights)) / sum(weights))
    absent = M.ranking_skew([[3, 2, 1, 0]], ["m", "m", "w", "w"], k=2)
    assert absent["min_skew"] == pytest.approx(math.log((0 + 0.5) / (2 + 1.0) / 0.5))
    assert M.ranking_skew([[3, 2, 1, 0]], ["m", "m", "w", "w"], k=2, smoothing=0)["min_skew"] == -math.inf
    dataset = M.ranking_skew([[3, 2, 1, 0]], ["m", "w", "w", "w"], k=4, target="dataset", smoothing=0)
    assert dataset["max_skew"] == pytest.approx(0) and dataset["target"] == {"m": 0.25, "w": 0.75}


def test_top_k_skew_and_bias_at_k_by_hand_against_one_target_and_several():
    """The skew and Bias@k that ranking_skew, its intervals and the retrieval probe share: ln(p_k / p*) of counts
    in a top 4 (3 of m, 1 of w) against one target (G,) and against two at once (G, T), -inf for a share of 0."""
    counts = np.array([[3.0, 1.0], [4.0, 0.0]])  # (queries, groups)
    uniform, skewed = np.array([0.5, 0.5]), np.array([0.75, 0.25])
    found = M.top_k_skew(counts, 4, uniform, "smoothed", 0.0)
    np.testing.assert_allclose(found[0], [math.log(0.75 / 0.5), math.log(0.25 / 0.5)])
    assert found[1, 1] == -math.inf
    both = M.top_k_skew(counts, 4, np.stack([uniform, skewed], axis=1), "smoothed", 0.0)  # (queries, groups, 2)
    assert both.shape == (2, 2, 2) and both[0, 0, 1] == pytest.approx(0.0) and both[0, 1, 1] == pytest.approx(0.0)
    np.testing.assert_allclose(both[..., 0], found)
    assert M.top_k_skew(counts, 4, uniform, "dvl", None)[1, 1] == pytest.approx(math.log(0.25 / 0.5))  # 1/k
    np.testing.assert_allclose(M.bias_at_k(counts, 4, (0, 1)), [0.5, 1.0])


def _brute_force_skews(scores, groups, k, target, zero_count, smoothing=0.5):
    """MaxSkew@k, MinSkew@k and NDKL@k of one query, written out item by item as their definitions
    read (DVL's for zero_count="dvl": oxai/debias-vision-lang, measuring_bias.py): no numpy."""
    names = sorted(set(groups))
    ranked = [groups[i] for i in sorted(range(len(scores)), key=lambda i: (-scores[i], i))][:k]
    share = {n: 1 / len(names) if target == "uniform" else groups.count(n) / len(groups) for n in names}
    skews = {}
    for n in names:
        count = ranked.count(n)
        if zero_count == "dvl":
            p = (count if count > 0 else 1) / k
        else:
            p = (count + smoothing) / (k + smoothing * len(names))
        skews[n] = math.log(p) - math.log(share[n])
    max_skew = max(0, *skews.values()) if zero_count == "dvl" else max(skews.values())
    ndkl = z = 0.0
    for i in range(1, k + 1):
        prefix = ranked[:i]
        kl = sum((prefix.count(n) / i) * math.log((prefix.count(n) / i) / share[n]) for n in names if n in prefix)
        ndkl += kl / math.log2(i + 1)
        z += 1 / math.log2(i + 1)
    return max_skew, min(skews.values()), ndkl / z


@pytest.mark.parametrize("zero_count", ["dvl", "smoothed"])
@pytest.mark.parametrize("target", ["uniform", "dataset"])
def test_ranking_skew_equals_a_brute_force_reference(target, zero_count):
    rng = np.random.default_rng(7)
    for trial in range(40):
        items, queries = int(rng.integers(4, 30)), int(rng.integers(1, 5))
        groups = [str(g) for g in rng.choice(["a", "b", "c"][: int(rng.integers(2, 4))], size=items)]
        if len(set(groups)) < 2:
            continue
        # whole-number scores in half the trials: ties, ranked by index
        scores = (rng.integers(0, 5, size=(queries, items)).astype(float) if trial % 2
                  else rng.normal(size=(queries, items)))
        k = int(rng.integers(len(set(groups)), items + 1))  # a top k holding every group (issue 43)
        result = M.ranking_skew(scores, groups, k=k, target=target, zero_count=zero_count, bootstrap=0)
        for q in range(queries):
            max_skew, min_skew, ndkl = _brute_force_skews(scores[q].tolist(), groups, k, target, zero_count)
            assert result["max_skew_per_query"][q] == pytest.approx(max_skew, abs=1e-12)
            assert result["min_skew_per_query"][q] == pytest.approx(min_skew, abs=1e-12)
            assert result["ndkl_per_query"][q] == pytest.approx(ndkl, abs=1e-12)


def test_ranking_skew_dvl_convention_by_hand():
    # k=2 of four items: both men retrieved, no woman: DVL counts the women as 1/k
    result = M.ranking_skew([[3, 2, 1, 0]], ["m", "m", "w", "w"], k=2, zero_count="dvl")
    assert result["skew"] == {"m": pytest.approx(math.log(1 / 0.5)), "w": pytest.approx(math.log(0.5 / 0.5))}
    assert result["max_skew"] == pytest.approx(math.log(2)) and result["min_skew"] == 0.0
    assert result["zero_count"] == "dvl" and result["smoothing"] is None
    with pytest.raises(ValueError, match=r"smoothing=0.0 applies to zero_count='smoothed'"):
        M.ranking_skew([[3, 2, 1, 0]], ["m", "m", "w", "w"], k=2, zero_count="dvl", smoothing=0.0)
    with pytest.raises(ValueError, match=r"zero_count must be 'smoothed' or 'dvl', got 'raw'"):
        M.ranking_skew([[3, 2, 1, 0]], ["m", "m", "w", "w"], k=2, zero_count="raw")


@pytest.mark.parametrize("zero_count", ["dvl", "smoothed"])
@pytest.mark.parametrize("target", ["uniform", "dataset"])
def test_ranking_skew_intervals_equal_resampling_and_reranking_by_hand(target, zero_count):
    """Each resample (the same draws: stats.stratified_resamples with the seed) re-ranked from scratch
    by ranking_skew itself: the intervals are the percentiles of those means over queries."""
    from vlfair import stats

    rng = np.random.default_rng(11)
    for trial in range(6):
        items, queries = int(rng.integers(6, 40)), int(rng.integers(1, 4))
        groups = [str(g) for g in rng.choice(["a", "b", "c"], size=items)]
        if len(set(groups)) < 2:
            continue
        scores = (rng.integers(0, 4, size=(queries, items)).astype(float) if trial % 2
                  else rng.normal(size=(queries, items)))
        k = int(rng.integers(len(set(groups)), items + 1))  # a top k holding every group (issue 43)
        result = M.ranking_skew(scores, groups, k=k, target=target, zero_count=zero_count, bootstrap=30, seed=trial,
                                confidence=0.9)
        names, codes = stats.encode_groups(groups)
        by_hand = {"max_skew": [], "min_skew": [], "ndkl": [], "skew": []}
        for block in stats.stratified_resamples(codes, 30, trial):
            for row in block:
                kept = np.sort(row)  # a resample's items in their original order: equal scores rank as before
                share = {n: groups.count(n) / items for n in names}  # stratified: the dataset target is unchanged
                again = M.ranking_skew(scores[:, kept], [groups[i] for i in kept], k=k, zero_count=zero_count,
                                       target=share if target == "dataset" else target, bootstrap=0)
                for key in ("max_skew", "min_skew", "ndkl"):
                    by_hand[key].append(again[key])
                by_hand["skew"].append([again["skew"].get(n, math.nan) for n in names])
        # the percentiles moved by the point value minus the resamples' mean (M.top_k_interval)
        for key in ("max_skew", "min_skew", "ndkl"):
            shift = result[key] - np.mean(by_hand[key])
            assert result[f"{key}_ci"] == pytest.approx((np.quantile(by_hand[key], [0.05, 0.95]) + shift).tolist(),
                                                        abs=1e-12)
        skews = np.array(by_hand["skew"])
        bounds = np.quantile(skews, [0.05, 0.95], axis=0) + np.array([result["skew"][n] for n in names]) - skews.mean(0)
        assert result["skew_ci"] == {n: pytest.approx(bounds[:, i].tolist(), abs=1e-12) for i, n in enumerate(names)}


def test_ranking_skew_without_a_bootstrap_has_no_intervals():
    result = M.ranking_skew([[3, 2, 1, 0]], ["m", "m", "w", "w"], k=2, bootstrap=0)
    assert result["max_skew_ci"] is None and result["ndkl_ci"] is None and result["skew_ci"] is None


def test_top_k_order_is_the_stable_sorts_first_k():
    rng = np.random.default_rng(3)
    for trial in range(200):
        rows, items = int(rng.integers(1, 5)), int(rng.integers(1, 60))
        k = int(rng.integers(1, items + 1))
        scores = rng.integers(0, 4, size=(rows, items)).astype(float) if trial % 2 else rng.normal(size=(rows, items))
        assert (M.top_k_order(scores, k) == np.argsort(-scores, axis=1, kind="stable")[:, :k]).all()


def test_trait_anova_per_stratum_equals_scipy():
    rng = np.random.default_rng(1)
    races = np.tile(["Black", "East Asian", "White", "Indian"], 30)
    genders = np.repeat(["Female", "Male"], 60)
    scores = rng.normal(0.6, 0.05, 120) + (races == "Black") * 0.02
    result = M.trait_anova(scores, races, strata=genders, bootstrap=100)
    for gender in ("Female", "Male"):
        mask = genders == gender
        reference = sps.f_oneway(*[scores[mask & (races == r)] for r in sorted(set(races))])
        assert result["f_statistic"][gender] == pytest.approx(reference.statistic)
        assert result["p_value"][gender] == pytest.approx(reference.pvalue)
        assert result["df_within"][gender] == 60 - 4
    assert result["strata"] == ["Female", "Male"]
    lo, hi = result["group_means_ci"]["Male"]["Black"]
    assert lo <= result["group_means"]["Male"]["Black"] <= hi


def test_group_rate_gap_per_language():
    result = M.group_rate_gap(["a", "a", "b", "a"] * 2, ["a"] * 8, ["x", "x", "y", "y"] * 2,
                              languages=["en"] * 4 + ["ja"] * 4, bootstrap=0)
    assert result["gap"] == {"en": 0.5, "ja": 0.5} and result["gap_pair"]["en"] == ["x", "y"]


# ---- properties -------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.lists(finite, min_size=4, max_size=30), st.randoms())
def test_row_order_never_changes_a_result(values, random):
    groups = ([("a", "b", "c")[i % 3] for i in range(len(values))] if len(values) >= 6
              else ["a", "b"] * (len(values) // 2))
    values = values[: len(groups)]
    order = list(range(len(values)))
    random.shuffle(order)
    shuffled_v, shuffled_g = [values[i] for i in order], [groups[i] for i in order]
    for measure, kwargs in ((M.group_score_gap, {}), (M.bias_ratio, {"protected_group": "a", "reference_group": "b"})):
        first = measure(values, groups, bootstrap=0, n_permutations=0, **kwargs)
        second = measure(shuffled_v, shuffled_g, bootstrap=0, n_permutations=0, **kwargs)
        for key, value in first.items():
            if isinstance(value, float):
                assert second[key] == pytest.approx(value)
    if len(set(groups)) == 3:
        assert M.trait_anova(values, groups, bootstrap=0)["f_statistic"] == pytest.approx(
            M.trait_anova(shuffled_v, shuffled_g, bootstrap=0)["f_statistic"], nan_ok=True)


@settings(max_examples=40, deadline=None)
@given(st.lists(finite, min_size=2, max_size=20))
def test_identical_groups_are_neutral(values):
    scores, groups = values + values, ["a"] * len(values) + ["b"] * len(values)
    assert M.bias_ratio(scores, groups, "a", "b", bootstrap=0, n_permutations=0)["bias_ratio"] == pytest.approx(1.0)
    assert M.group_score_gap(scores, groups, bootstrap=0, n_permutations=0)["max_gap"] == pytest.approx(0.0, abs=1e-9)


vectors = st.lists(st.floats(min_value=-10, max_value=10, allow_nan=False), min_size=4, max_size=4)


def test_individual_fairness_is_its_terms_and_their_reading():
    """individual_fairness is individual_fairness_of_terms of individual_fairness_terms, field for field, and each
    half checks what it reads: a zero vector and a bad tolerance are named."""
    rng = np.random.default_rng(2)
    v, a, b = rng.normal(size=(3, 12, 5))
    b[3] = a[3]  # one identical pair, left out and counted
    gap, distance, bound = M.individual_fairness_terms(v, a, b)
    assert distance[3] == 0 and gap[3] == pytest.approx(0)
    np.testing.assert_allclose(bound, 2 / (np.linalg.norm(a, axis=1) + np.linalg.norm(b, axis=1)))
    assert M.individual_fairness_of_terms(gap, distance, bound) == M.individual_fairness(v, a, b)
    assert M.individual_fairness(v, a, b)["num_identical_pairs"] == 1
    with pytest.raises(ValueError, match="zero vector at row 0"):
        M.individual_fairness_terms(np.zeros((2, 5)), a[:2], b[:2])
    with pytest.raises(ValueError, match="tolerance"):
        M.individual_fairness_of_terms(gap, distance, bound, tolerance=-1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(vectors, vectors, vectors), min_size=1, max_size=10))
def test_individual_fairness_bound_holds_for_random_vectors(rows):
    v, a, b = (np.array([r[i] for r in rows]) for i in range(3))
    norms_ok = ((np.linalg.norm(v, axis=1) > 1e-3) & (np.linalg.norm(a, axis=1) > 1e-3)
                & (np.linalg.norm(b, axis=1) > 1e-3))
    distinct = np.linalg.norm(a - b, axis=1) > 1e-6
    keep = norms_ok & distinct
    if not keep.any():
        return
    result = M.individual_fairness(v[keep], a[keep], b[keep])
    assert result["bound_holds"] and result["num_bound_violations"] == 0
    assert 0 <= result["epsilon"] <= result["max_bound"] * (1 + 1e-6) + 1e-6


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c"]), min_size=2, max_size=25), st.integers(0, 2**32 - 1), st.data())
def test_ndkl_nonnegative_and_bias_bounded(groups, seed, data):
    assume(len(set(groups)) >= 2)  # one group has no skew: refused (tests/test_hardening_measures.py)
    k = data.draw(st.integers(len(set(groups)), len(groups)))  # a top k that can hold every group
    scores = np.random.default_rng(seed).normal(size=(2, len(groups)))
    result = M.ranking_skew(scores, groups, k=k, bias_pair=["a", "b"] if {"a", "b"} <= set(groups) else None)
    assert result["ndkl"] >= -1e-12
    if result["bias_at_k"] is not None:
        assert -1 <= result["bias_at_k"] <= 1


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 20), st.integers(1, 20))
def test_one_group_has_no_skew_and_is_refused(count, k_extra):
    # Every prefix of one group matches its target (all of the mass): NDKL and every skew would be 0
    # whatever the ranking, a number that says nothing, so the measure refuses it (issue 28, case 17).
    with pytest.raises(ValueError, match=r"a skew needs at least 2 groups; item_groups hold only \['a'\]"):
        M.ranking_skew(np.arange(count, 0, -1.0), ["a"] * count, k=min(count, k_extra))


# ---- bootstrap coverage -----------------------------------------------------------------
def test_bootstrap_interval_covers_a_known_gap_93_to_97_percent():
    """500 simulated datasets with a true gap of 0.3: the 95 % interval must cover it 93-97 %."""
    rng = np.random.default_rng(2024)
    covered, simulations = 0, 500
    groups = np.repeat(["a", "b"], 150)
    for i in range(simulations):
        scores = np.concatenate([rng.normal(1.0, 1.0, 150), rng.normal(1.3, 1.0, 150)])
        lo, hi = M.group_score_gap(scores, groups, bootstrap=1000, seed=i, n_permutations=0)["max_gap_ci"]
        # the range of two means is |gap|; with a true gap of 0.3 the sign is almost never flipped
        covered += lo <= 0.3 <= hi
    assert 0.93 <= covered / simulations <= 0.97, covered / simulations


# ---- bad input --------------------------------------------------------------------------
@pytest.mark.parametrize("call, message", [
    (lambda: M.bias_ratio([1, 2, 3], ["a", "b"], "a", "b"), "differ in length: predictions=3, references=2"),
    (lambda: M.bias_ratio([1, float("nan"), 3, 4], list("aabb"), "a", "b"), "predictions has NaN at row 1"),
    (lambda: M.group_score_gap([1, 2, float("inf"), 4], list("aabb")), "predictions has an infinite value at row 2"),
    (lambda: M.bias_ratio([1, 2, 3], list("aab"), "a", "b"), r"fewer than 2 samples: 'b' \(1\)"),
    (lambda: M.trait_anova([1, 2, 3, 4, 5], list("aabbc")), r"fewer than 2 samples: 'c' \(1\)"),
    (lambda: M.bias_ratio([1, 2, 3, 4], list("aabb"), "c", "b"),
     r"protected_group 'c' does not occur in references; groups present: \['a', 'b'\]"),
    (lambda: M.bias_ratio([1, 2, 3, 4], list("aabb"), "a", "z"), "reference_group 'z' does not occur"),
    (lambda: M.bias_ratio([1, 2, 3, 4], list("aabb"), None, "b"), "protected_group is required"),
    (lambda: M.bias_ratio([], [], "a", "b"), "predictions is empty"),
    (lambda: M.ranking_skew([[1, 2, 3]], list("abc"), k=4), r"k=4 is larger than the number of items \(3\)"),
    (lambda: M.ranking_skew([[1, 2, 3]], list("ab"), k=1), "item_groups has 2 entries but each query scores 3 items"),
    (lambda: M.ranking_skew([[1, 2]], list("ab"), k=2, target={"a": 1.0}), r"no share for groups \['b'\]"),
    # issue 43, SILENT 11: a top k smaller than the number of groups cannot hold every group
    (lambda: M.ranking_skew([[1, 2]], list("ab"), k=1), "k=1: below the 2 groups: a top 1 cannot hold every group"),
    (lambda: M.ranking_skew([[1, 2, 3, 4]], list("abcc"), k=2, zero_count="dvl"), "k=2: below the 3 groups"),
    (lambda: M.word_influence([1, 0], ["", "2"], num_words=2), r"variants row 1: word position 2 is outside 0..1"),
    (lambda: M.word_influence([1, 0], ["", "x"], num_words=2), "not a comma-separated list"),
    (lambda: M.word_influence([1, 2], ["", "0"], num_words=1), "predictions must be 0 or 1.*row 1 is 2"),
    (lambda: M.word_influence([1, 0], ["", ""], num_words=1),
     r'level 1 needs variant "0" \(words \[0\] replaced\), which has no images'),
    (lambda: M.word_influence([1, 0, 1], ["", "0"], num_words=1), "differ in length"),
    (lambda: M.cross_lingual_gap(["a"] * 4, ["a"] * 4, ["en", "en", "fr", "fr"], pivot="de"),
     "pivot language 'de' does not occur in languages"),
    (lambda: M.cross_lingual_gap(["a"] * 3, ["a"] * 3, ["en", "en", "de"]),
     r"language with fewer than 2 samples: 'de' \(1\)"),
    (lambda: M.group_rate_gap(["a"] * 4, ["a"] * 4, ["x"] * 4), "a gap needs at least 2 groups"),
    (lambda: M.individual_fairness([[1.0, 0]], [[1.0, 0]], [[1.0, 0]]), "every caption pair has identical"),
    (lambda: M.individual_fairness([[0.0, 0]], [[1.0, 0]], [[0.0, 1]]), "image_embeddings has a zero vector at row 0"),
    (lambda: M.individual_fairness([[1.0, 0]], [[1.0, 0, 0]], [[0.0, 1, 0]]), "embedding sizes differ"),
    (lambda: M.retention([[0.1, 0.2]], [2]), "references row 0 is 2, outside the 2 candidate names"),
    (lambda: M.bias_ratio([0, 0, 1, 2], list("aabb"), "b", "a"), "mean score of reference_group 'a' is 0"),
])
def test_bad_input_names_the_problem(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_measures_say_which_method_gave_the_p_value_and_its_log10():
    rng = np.random.default_rng(8)
    small = M.bias_ratio(rng.random(60) + 0.1, np.repeat(["a", "b"], 30), "a", "b", bootstrap=0)
    assert small["p_value_method"] in ("sequential_monte_carlo", "monte_carlo")
    assert small["log10_p_value"] == pytest.approx(np.log10(small["p_value"]))
    groups = np.repeat(["a", "b"], 4000)
    large = M.bias_ratio(rng.random(8000) + 0.5 * (groups == "a"), groups, "a", "b", bootstrap=0)
    assert large["p_value_method"] == "normal_limit" and large["p_value"] == 0.0 and large["log10_p_value"] < -308
    gap = M.group_score_gap(rng.random(8000), np.repeat(list("abcd"), 2000), bootstrap=0)
    assert gap["p_value_method"] == "normal_limit" and 0 < gap["p_value"] <= 1
    anova = M.trait_anova(rng.random(6000) + 1.0 * (np.repeat(list("ab"), 3000) == "a"), np.repeat(list("ab"), 3000),
                          strata=np.tile(["F", "M"], 3000), bootstrap=0)
    assert all(v == 0.0 for v in anova["p_value"].values()) and all(v < -308 for v in anova["log10_p_value"].values())
