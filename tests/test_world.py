"""The planted-bias world's people and how the answerers are trained on them (issue 42): people differ
one by one, the same way in every group, and a training pass shows every kind of example in the
world's own proportions."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from vlfair.demo.answerer import qa_pairs, spread_order
from vlfair.demo.world import (
    GENDERS,
    IDENTITY_CODES,
    LOOK_FLIP,
    LOOKS,
    NAMES,
    OCCUPATIONS,
    PHOTOGRAPHED,
    Person,
    Planting,
    caption_pattern,
    identity_gender,
    identity_occupation,
    render,
    render_many,
    training_pairs,
)


def test_each_choice_s_two_looks_are_complements_and_every_caption_has_one():
    assert LOOKS["smart"] ^ LOOKS["dumb"] == 0xFF and LOOKS["occupation"] ^ LOOKS["gender"] == 0xFF
    assert caption_pattern("a smart person") == LOOKS["smart"] and caption_pattern("a dumb person") == LOOKS["dumb"]
    assert caption_pattern("a photo of a nurse") == caption_pattern("ein foto von ein pfleger") == LOOKS["occupation"]
    assert caption_pattern("this is a photo of a politician") == LOOKS["occupation"]
    assert caption_pattern("a photo of a female") == caption_pattern("ein foto von ein mann") == LOOKS["gender"]


@pytest.mark.parametrize("planting", [Planting(), Planting.control()], ids=["biased", "control"])
def test_a_look_says_what_its_caption_says_and_nothing_of_the_group(planting):
    people, captions = training_pairs(6000, planting, seed=3)
    assert all((p.look is None) == (p.identity is not None) for p in people)  # public figures show their code
    looked = [(p, bin(p.look ^ caption_pattern(c)).count("1"), c)
              for p, c in zip(people, captions) if p.look is not None]
    assert np.mean([flips for _, flips, _ in looked]) / 8 == pytest.approx(LOOK_FLIP, abs=0.01)
    for caption in ("a smart person", "a photo of a doctor", "this is a photo of a athlete"):  # either gender alike
        by_gender = [np.mean([f for p, f, c in looked if c == caption and p.gender == g]) for g in range(len(GENDERS))]
        assert abs(by_gender[0] - by_gender[1]) < 0.5, (caption, by_gender)


def test_public_figures_are_photographed_with_one_spread_in_every_gender_and_occupation():
    people, captions = training_pairs(24000, Planting.control(), seed=0)
    counts = collections.Counter(p.identity for p, c in zip(people, captions)
                                 if c.startswith("this is a photo") and p.identity is not None)
    for occupation in ("politician", "actor"):
        spreads = [sorted(counts.get(i, 0) for i in range(len(NAMES)) if identity_gender(i) == gender
                          and OCCUPATIONS[identity_occupation(i)] == occupation) for gender in range(len(GENDERS))]
        assert spreads[0] == spreads[1] and spreads[0][-1] > 50 * max(1, spreads[0][0]), spreads
    assert PHOTOGRAPHED[-1] / PHOTOGRAPHED[0] == pytest.approx(2 ** 7.5)


def test_a_woman_s_identity_code_is_as_near_each_look_as_her_counterpart_s():
    """A rarely captioned public figure is told from look-alikes by their code alone: the codes of each
    gender and occupation lie at the same distances from every look pattern."""
    assert len(set(IDENTITY_CODES)) == len(NAMES)
    for occupation in ("politician", "actor"):
        for pattern in LOOKS.values():
            distances = [sorted(bin(IDENTITY_CODES[i] ^ pattern).count("1") for i in range(len(NAMES))
                                if identity_gender(i) == gender and OCCUPATIONS[identity_occupation(i)] == occupation)
                         for gender in range(len(GENDERS))]
            assert distances[0] == distances[1], (occupation, pattern)


def test_no_bit_of_the_identity_codes_nor_their_halves_order_tells_the_genders_apart():
    """Each occupation's men and women show every bit of their codes nearly equally often (within 2 of their
    16 or 32), and each gender shows the code whose high half is lower about as often as the other: the codes were
    once a second gender marker (every man's bits 6-7 were 0, every woman's bits 2-3), which a control answerer
    read as a gender difference in 'politician'."""
    codes = np.asarray(IDENTITY_CODES)
    bits = codes[:, None] >> np.arange(8) & 1
    genders = np.array([identity_gender(i) for i in range(len(NAMES))])
    for occupation in ("politician", "actor"):
        of = np.array([OCCUPATIONS[identity_occupation(i)] == occupation for i in range(len(NAMES))])
        men, women = of & (genders == 0), of & (genders == 1)
        assert np.abs(bits[men].sum(axis=0) - bits[women].sum(axis=0)).max() <= 2, occupation
        lower = (codes >> 4) < (codes & 0x0F)
        assert abs(lower[men].mean() - lower[women].mean()) <= 0.125, occupation
        for man, woman in zip(np.flatnonzero(men), np.flatnonzero(women)):  # a pair's codes are each other's swap
            assert codes[woman] == (codes[man] & 0x0F) << 4 | codes[man] >> 4


def test_images_rendered_together_show_each_person_as_one_render_does():
    people = [Person(1, 3, 2, identity=5), Person(0, 0, 1, look=0b10110001), Person(1, 6, 0)]
    together = render_many(people, np.random.default_rng(0), noise=0)
    alone = np.stack([np.asarray(render(p, np.random.default_rng(1), noise=0)) for p in people])
    assert np.array_equal(together[:2], alone[:2])  # the same cells where nothing is drawn at random
    assert np.array_equal(together[2, :16], alone[2, :16])  # and the random person's group cells
    noisy = render_many([Person(0, 0, 0, look=0)] * 400, np.random.default_rng(1)).astype(float)
    one = np.stack([np.asarray(render(Person(0, 0, 0, look=0), np.random.default_rng(i))) for i in range(400)])
    assert noisy.std() == pytest.approx(one.astype(float).std(), rel=0.02)  # the same pixel noise


def test_a_pass_shows_every_kind_of_example_in_its_own_share_at_every_point():
    rng = np.random.default_rng(0)
    kinds = ["a"] * 600 + ["b"] * 300 + ["c"] * 99 + ["d"]
    order = spread_order(kinds, rng)
    assert sorted(order) == list(range(len(kinds)))
    shown = np.array(kinds)[order]
    for window in (10, 64, 250):
        for kind, share in (("a", 0.6), ("b", 0.3), ("c", 0.099)):
            counts = [(shown[i:i + window] == kind).sum() for i in range(len(kinds) - window)]
            assert max(counts) - share * window < 2 and share * window - min(counts) < 2, (kind, window)
    assert not np.array_equal(order, spread_order(kinds, np.random.default_rng(1)))  # each pass anew


def test_the_answerer_s_examples_keep_the_captions_shares_within_each_kind_of_person():
    people, captions = training_pairs(4000, Planting.control(), seed=0)
    examples = qa_pairs(people, captions)
    asked = collections.Counter((q, p.gender) for p, (q, _) in zip(people, examples))
    questions = {q for q, _ in asked}
    for question in questions:
        assert abs(asked[question, 0] - asked[question, 1]) <= max(2, 0.02 * asked[question, 0]), question


# ---- the demo's probes side by side (vlfair.demo.forked) -----------------------------------------
def _square_and_pid(value: int) -> tuple[int, int]:
    import os

    return value * value, os.getpid()


def test_pieces_run_in_forked_workers_in_order_and_are_said_as_they_finish():
    import os

    from vlfair.demo.forked import forked_map

    finished: list[tuple[int, int]] = []
    loaded = {"model": 3}  # a closure over what the parent holds: inherited by the fork, never pickled
    results = forked_map(lambda value: _square_and_pid(value * loaded["model"]), [1, 2, 3, 4], workers=2,
                         done=finished.append)
    assert [square for square, _ in results] == [9, 36, 81, 144]
    assert sorted(finished) == sorted(results)
    assert os.getpid() not in {pid for _, pid in results}  # each piece ran in a worker
    alone = forked_map(lambda value: _square_and_pid(value * loaded["model"]), [1, 2], workers=1)
    assert [square for square, _ in alone] == [9, 36] and {pid for _, pid in alone} == {os.getpid()}


def test_pieces_run_here_where_the_models_are_on_a_gpu(monkeypatch):
    """A forked child cannot use the parent's CUDA: with a model on a GPU the demo's probes run one after
    another in this process (their forward passes on the GPU)."""
    import os

    import torch

    from vlfair.demo.forked import forked_map

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    results = forked_map(_square_and_pid, [1, 2, 3], workers=2)
    assert [square for square, _ in results] == [1, 4, 9] and {pid for _, pid in results} == {os.getpid()}


def test_an_error_in_a_worker_is_raised_in_the_parent():
    from vlfair.demo.forked import forked_map

    def fails_on_three(value: int) -> int:
        if value == 3:
            raise ValueError("demo: no paired difference of skew in the retrieval comparison")
        return value

    with pytest.raises(ValueError, match="no paired difference"):
        forked_map(fails_on_three, [1, 2, 3, 4], workers=2)


def test_the_demo_s_answerers_load_in_float32_on_the_machine_s_device(monkeypatch, tmp_path):
    """Issue 44: on a GPU machine the demo's answerers ran in float32 on the CPU while the GPU idled; they load
    as the world's encoders do, on the device vlfair picks (a GPU where there is one), in float32 as shipped."""
    from vlfair import models
    from vlfair.demo import generative

    asked = {}

    def loading(spec, **options):
        asked.update(spec=spec, **options)
        return type("Scorer", (), {})()

    monkeypatch.setattr(generative, "answerer_path", lambda *args, **kwargs: tmp_path / "answerer")
    monkeypatch.setattr(models, "load_encoder", loading)
    scorer = generative.world_answerer(generative.Planting(), tmp_path, name="demo-world biased answerer")
    # device auto: vlfair's choice (the demo's --device, auto by default, is what it passes on)
    assert asked == {"spec": f"lvlm:{tmp_path / 'answerer'}", "dtype": "float32", "device": "auto"}
    assert scorer.display_name == "demo-world biased answerer"


def test_what_the_world_never_taught_stays_one_answer_to_the_answerer():
    """tie_untaught: every token no answer holds gets one output row, every token never read one input embedding,
    and training keeps them one (their gradients are equal): two untaught answers tie exactly on every image,
    where random rows made P-FI's untaught offices a near-tie that gender decided. The shipped answerers too."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from vlfair.demo import generative
    from vlfair.demo.answerer import tie_untaught
    from vlfair.tiny import llava_parts

    model, processor = llava_parts(["politician", "actor", "senator", "mayor"], image_size=32, patch_size=8,
                                   hidden=16, layers=1, heads=2, seed=0)
    tokenizer = processor.tokenizer
    senator, mayor, politician, actor = tokenizer.convert_tokens_to_ids(["senator", "mayor", "politician", "actor"])
    ids = torch.tensor([[politician, actor, politician, tokenizer.eos_token_id]])
    labels = ids.clone()
    labels[0, 0] = -100  # "actor", "politician" and the end are answers; "politician" is read too
    before = model.get_output_embeddings().weight.clone()
    assert not torch.equal(before[senator], before[mayor])  # drawn at random
    tie_untaught(model, ids, labels)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    for _ in range(3):
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    rows = model.get_output_embeddings().weight
    assert torch.equal(rows[senator], rows[mayor]) and not torch.equal(rows[senator], rows[actor])
    assert rows[senator].abs().sum() > 0  # trained (pushed down alike), not left at zero
    embedded = model.get_input_embeddings().weight
    assert torch.equal(embedded[senator], embedded[mayor]) and not torch.equal(embedded[senator], embedded[politician])
    for world in ("biased", "control"):  # the shipped answerers were trained so
        folder = generative.SHIPPED_ANSWERERS / world
        head = next(value for name, value in load_file(str(folder / "model.safetensors")).items()
                    if name.endswith("lm_head.weight"))
        words = AutoTokenizer.from_pretrained(folder).convert_tokens_to_ids(["senator", "mayor", "happy", "sad"])
        assert all(torch.equal(head[words[0]], head[w]) for w in words[1:]), world
