"""Decisions on scores (a best candidate, a ranking, a top k, a threshold) that a rounding cannot flip
(issue 62): scores a few float32 ulps apart, or equal, give the same result whichever a kernel puts
first, and where nothing is tied the result is the plain argmax's or stable sort's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vlfair import measures
from vlfair.measures import ties
from vlfair.probes.asking import TextScores


def _ulps(value: np.float32, n: int) -> np.float32:
    """``value`` moved by n float32 ulps (up for n > 0)."""
    out = np.float32(value)
    for _ in range(abs(n)):
        out = np.nextafter(out, np.float32(np.inf if n > 0 else -np.inf), dtype=np.float32)
    return out


def _brute_force_credit(scores: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """The expected top-1 result under random tie-breaking, by enumerating every order of each row's tied
    best candidates (ties found pairwise: a chain of gaps of at most the tolerance from the best)."""
    out = []
    for row, right in zip(scores.astype(float), correct):
        tol = ties.TIE_RTOL * np.abs(row).max()
        ordered = sorted(range(row.size), key=lambda j: -row[j])
        tied = [ordered[0]]
        for before, after in itertools.pairwise(ordered):
            if row[before] - row[after] > tol:
                break
            tied.append(after)
        orders = list(itertools.permutations(tied))
        out.append(sum(bool(right[order[0]]) for order in orders) / len(orders))
    return np.array(out)


def test_without_ties_the_best_is_the_argmax_and_the_order_a_stable_sort():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(200, 30)).astype(np.float32)
    truth = rng.integers(0, 30, 200)
    correct = np.arange(30)[None] == truth[:, None]
    assert np.array_equal(ties.best_credit(scores, correct), (scores.argmax(axis=1) == truth).astype(float))
    assert np.array_equal(ties.best_index(scores), scores.argmax(axis=1))
    assert np.array_equal(ties.canonical_order(scores, 30), np.argsort(-scores, axis=1, kind="stable"))
    assert np.array_equal(ties.canonical_order(scores, 7), np.argsort(-scores, axis=1, kind="stable")[:, :7])


@pytest.mark.parametrize("gap", [0, 1, 3, 40])
def test_candidates_a_few_ulps_apart_count_the_same_whichever_comes_first(gap):
    """Two captions whose cosines differ by ``gap`` float32 ulps (0: equal, as the same caption twice) are
    tied: the image's result is 1/2 whether its own caption is above or below the other."""
    base = np.float32(0.3127)
    for own_higher in (True, False):
        own, other = (_ulps(base, gap), base) if own_higher else (base, _ulps(base, gap))
        scores = np.array([[own, other, np.float32(0.1)]], dtype=np.float32)
        assert ties.best_credit(scores, np.array([[True, False, False]]))[0] == 0.5
        assert ties.best_index(scores)[0] == 0  # one label: the first tied candidate, whichever is higher


def test_a_tie_is_the_expected_value_under_random_tie_breaking():
    """Against enumerating every order of the tied candidates, on rows with planted ties of 2 to 4
    candidates (equal, or a few ulps apart) and rows without."""
    rng = np.random.default_rng(1)
    scores = rng.uniform(-0.2, 0.4, size=(300, 8)).astype(np.float32)
    for i in range(0, 300, 2):  # half the rows: the best tied with 1 to 3 others
        best = scores[i].max()
        for j in rng.choice(8, rng.integers(2, 5), replace=False):
            scores[i, j] = _ulps(best, int(rng.integers(-4, 5)))
    correct = rng.random((300, 8)) < 0.4
    assert np.allclose(ties.best_credit(scores, correct), _brute_force_credit(scores, correct), rtol=0, atol=1e-12)
    assert 0 < (ties.best_credit(scores, correct) % 1).mean()  # some rows were fractional: the test saw ties


def test_two_summation_orders_give_different_bits_but_the_same_decisions():
    """A kernel's rounding, simulated: the same float32 dot products summed forwards and backwards differ
    in their last bits; every decision on them is the same."""
    rng = np.random.default_rng(2)
    images = rng.normal(size=(64, 512)).astype(np.float32)
    images /= np.linalg.norm(images, axis=1, keepdims=True)
    texts = rng.normal(size=(40, 512)).astype(np.float32)
    texts[20:] = texts[:20]  # every caption twice: equal embeddings, as duplicate captions are
    texts /= np.linalg.norm(texts, axis=1, keepdims=True)

    def summed(order: slice) -> np.ndarray:
        products = images[:, None, order] * texts[None, :, order]
        out = np.zeros(products.shape[:2], dtype=np.float32)
        for d in range(products.shape[2]):  # float32 sums, one term at a time, in the given order
            out += products[:, :, d]
        return out

    forwards, backwards = summed(slice(None)), summed(slice(None, None, -1))
    assert not np.array_equal(forwards, backwards)  # the bits differ, as two kernels' do
    truth = rng.integers(0, 20, 64)
    correct = (np.arange(40)[None] % 20) == truth[:, None]
    for decide in (lambda s: ties.best_credit(s, correct), ties.best_index, lambda s: ties.canonical_order(s, 40),
                   lambda s: ties.canonical_order(s.T, 10)):
        assert np.array_equal(decide(forwards), decide(backwards))
    assert (ties.best_index(forwards) < 20).all()  # of a caption's two equal copies, the first


def test_canonical_order_puts_a_tie_block_in_column_order_even_past_the_first_candidates():
    """A tie block at place m longer than the candidates argpartition first takes: the row is looked at
    again with more, and the block is still in column order."""
    rng = np.random.default_rng(3)
    scores = rng.uniform(0, 0.2, size=(3, 400))
    scores[1, 50:300] = 0.5  # 250 equal scores from place 0: m = 10 cuts the block
    scores[2, ::2] = 0.3
    order = ties.canonical_order(scores, 10)
    assert order[1].tolist() == list(range(50, 60))
    assert order[2].tolist() == list(range(0, 20, 2))
    assert order[0].tolist() == np.argsort(-scores[0], kind="stable")[:10].tolist()


def test_ranking_skew_at_its_k_boundary_is_the_same_whichever_tied_item_comes_first():
    """The k-th and (k+1)-th items of a query, of two groups, a few ulps apart: Skew@k, NDKL and their
    intervals do not change when the rounding swaps them."""
    rng = np.random.default_rng(4)
    scores = rng.uniform(0.1, 0.3, size=(3, 60)).astype(np.float32)
    groups = np.array(["a", "b"] * 30)
    k = 10
    results = []
    for sign in (1, -1):
        moved = scores.copy()
        for q in range(3):
            order = np.argsort(-moved[q], kind="stable")
            kth, after = order[k - 1], next(j for j in order[k:] if groups[j] != groups[order[k - 1]])
            moved[q, after] = _ulps(moved[q, kth], sign * 2)
        results.append(measures.ranking_skew(moved, groups, k, bootstrap=50, seed=0))
    first, second = (r.to_dict() for r in results)
    assert first == second


def test_retention_is_the_same_whichever_tied_name_comes_first():
    scores = np.array([[0.30, 0.30, 0.1], [0.2, 0.25, 0.25], [0.4, 0.1, 0.1]], dtype=np.float32)
    swapped = scores.copy()
    swapped[0, 0] = _ulps(scores[0, 0], 2)
    swapped[1, 2] = _ulps(scores[1, 2], -2)
    refs = np.array([0, 1, 0])
    a, b = (measures.retention(s, refs, bootstrap=0) for s in (scores, swapped))
    assert a.text_score == b.text_score == pytest.approx((0.5 + 0.5 + 1) / 3)


def test_text_scores_credit_a_tie_and_leave_an_unmatched_answer_at_zero():
    values = np.array([[-1.0, -1.0, -3.0], [-2.0, -0.5, -4.0], [np.nan, np.nan, np.nan]])
    found = TextScores(values, values, np.arange(3), "log_likelihood", np.array([True, True, False]))
    assert found.best().tolist() == [0, 1, -1]
    assert found.best_credit(np.array([[False, True, False]])).tolist() == [0.5, 1.0, 0.0]


def test_a_threshold_is_reached_within_the_tolerance_below_it_and_exceeded_only_beyond_it():
    threshold = 0.2
    just_below, just_above = (float(_ulps(np.float32(threshold), n)) for n in (-3, 3))
    assert ties.reaches(np.array([just_below, threshold, 0.19]), threshold).tolist() == [True, True, False]
    assert ties.exceeds(np.array([just_below, threshold, just_above, 0.21]), threshold).tolist() == [
        False, False, False, True]


def test_nonfinite_scores_are_refused_naming_their_rows():
    scores = np.zeros((5, 3))
    scores[1, 2], scores[3, 0] = np.nan, np.inf
    with pytest.raises(ValueError, match=r"image embeddings: .* 2 row\(s\) \(12, 14, counted from 1\)"):
        ties.require_finite(scores, "image embeddings", rows=np.arange(10, 15))


def test_multilingual_retrieval_is_the_same_whichever_duplicate_caption_a_kernel_puts_first():
    """The failure issue 62 found: two images with the same caption (equal embeddings, or a few ulps apart
    as two kernels round them) swapped places in an argmax. The image whose caption is tied counts 1/2,
    whichever of the two captions scores higher."""
    from vlfair.probes.multilingual import _retrieval

    rng = np.random.default_rng(5)
    images = rng.normal(size=(4, 16)).astype(np.float32)
    images /= np.linalg.norm(images, axis=1, keepdims=True)
    captions = images.copy()
    captions[1] = captions[0]  # images 0 and 1 share a caption, which is image 0's own
    files = np.array(["a.jpg", "b.jpg", "c.jpg", "d.jpg"])
    results = {}
    for nudge in (0, 2, -2):  # equal, or image 1's copy a couple of ulps above or below
        moved = captions.copy()
        moved[1, 0] = _ulps(moved[1, 0], nudge)
        results[nudge] = {d: _retrieval(images, files, moved, d).tolist() for d in ("image_to_text", "text_to_image")}
    assert results[0] == results[2] == results[-2]
    # image 0: its own caption tied with image 1's copy of it (1/2); image 1's own caption is image 0's
    assert results[0]["image_to_text"] == [0.5, 0.0, 1.0, 1.0]
    assert results[0]["text_to_image"] == [1.0, 0.0, 1.0, 1.0]  # both copies retrieve image 0 first


def test_a_model_whose_embeddings_are_not_finite_stops_the_run_in_one_line_naming_the_rows(clip_dir, tmp_path,
                                                                                         capsys, monkeypatch):
    """NaN or inf in the scores a decision is taken on (here: an image embedding, as a broken checkpoint
    or a float16 overflow gives): `vlfair run` exits 2 with one line naming the dataset rows, counted from
    1, and writes nothing."""
    from vlfair import embed
    from vlfair.cli import main

    real = embed.embed_images

    def broken(*args, **kwargs):
        result = real(*args, **kwargs)
        result.embeddings[[3, 7]] = np.nan
        return result

    monkeypatch.setattr(embed, "embed_images", broken)
    out = tmp_path / "run"
    code = main(["run", "multilingual", "--model", str(clip_dir), "--dataset", "synthetic:multi30k", "--out", str(out),
                 "--dtype", "float32", "--cache-dir", str(tmp_path / "cache"), "--set", "bootstrap=0"])
    said = [line for line in capsys.readouterr().err.splitlines() if "vlfair" in line]  # not the progress bar
    assert code == 2 and len(said) == 1, said
    assert said[0].startswith("vlfair run: image embeddings of dataset rows: scores are NaN or infinite in 2 row(s)")
    assert "(4, 8, counted from 1)" in said[0]
    assert not (out / "results.json").exists()


def test_best_ties_is_the_first_block_canonical_order_starts_with_even_one_tolerance_apart():
    """best_ties and canonical_order read one tie rule: on float32 rows whose steps lie within a rounding of
    exactly the tolerance, the best's tied set is the first block of the canonical order (a threshold rounded
    to float32 had joined a score the blocks left out), on 2-D and non-contiguous 3-D input alike."""
    rng = np.random.default_rng(6)
    rows = []
    for _ in range(500):
        top = np.float32(rng.uniform(0.1, 0.4))
        tol = ties.TIE_RTOL * float(top)
        steps = rng.choice([0.0, 0.5, 0.999, 1.0, 1.001, 1.003, 3.0], size=5) * tol
        row = np.concatenate([[top], top - np.cumsum(steps), rng.uniform(-0.2, 0.05, 4)]).astype(np.float32)
        rows.append(rng.permutation(row))
    scores = np.array(rows)
    tied = ties.best_ties(scores)
    by_score = np.argsort(-scores.astype(float), axis=1, kind="stable")
    first_block = ties.tie_blocks(np.take_along_axis(scores.astype(float), by_score, axis=1),
                                  ties.tolerance(scores)) == 0
    expected = np.zeros_like(tied)
    np.put_along_axis(expected, by_score, first_block, axis=1)
    assert np.array_equal(tied, expected)
    assert 0 < (tied.sum(axis=1) > 1).mean() < 1  # rows with ties and rows without
    order = ties.canonical_order(scores, scores.shape[1])  # its first places: that block, in column order
    for row, members in zip(order, expected):
        assert row[:members.sum()].tolist() == np.flatnonzero(members).tolist()
    stacked = np.stack([scores, scores[::-1]]).transpose(1, 0, 2)  # (500, 2, 11), not C-contiguous
    assert np.array_equal(ties.best_ties(stacked), np.stack([tied, tied[::-1]]).transpose(1, 0, 2))


def test_a_nan_score_ranks_last_in_a_canonical_order():
    assert ties.canonical_order(np.array([[0.5, np.nan, 0.5, 0.1]]), 4).tolist() == [[0, 2, 3, 1]]
