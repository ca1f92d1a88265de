"""The generative scorer (issue 32, first step): answers scored from the prompt's cache equal one full
forward per answer, option probabilities equal a computation from the model's logits, a real model
id resolves to a tiny checkpoint offline, and what it cannot use is refused by name."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from vlfair.models.lvlm import GenerativeModelError, GenerativeScorer
from vlfair.testing import float32_switches, lower_float32_precision, qwen2_vl_processors_without_video
from vlfair.tiny import generated_image, tiny_clip, tiny_gemma3, tiny_idefics3, tiny_llava, tiny_qwen2_vl

import forking

ANSWERS = ["smart", "dumb", "a smart person", "a dumb person", "happy", "doctor", "nurse", "a photo of a nurse",
           "lawyer", "none of these", "man", "woman"]  # twelve, of one to five tokens
QUESTION = "is this person smart or dumb ?"


# Qwen2-VL's processor is put together without its video part (torchvision): see the fixture below
FAMILIES = {"llava": tiny_llava, "idefics3": tiny_idefics3, "gemma3": tiny_gemma3, "qwen2_vl": tiny_qwen2_vl}


@pytest.fixture(autouse=True)
def qwen2_vl_loads_without_torchvision():
    with qwen2_vl_processors_without_video():
        yield


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("lvlm")
    return {family: build(base / family) for family, build in FAMILIES.items()}


@pytest.fixture(scope="module")
def llava(checkpoints) -> Path:
    return checkpoints["llava"]


@pytest.fixture(scope="module")
def scorer(llava) -> GenerativeScorer:
    return GenerativeScorer.load(f"lvlm:{llava}")


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("batch_size", [32, 5, 1])
def test_prefix_shared_scores_equal_one_full_forward_per_answer(checkpoints, family, batch_size):
    scorer = GenerativeScorer.load(f"lvlm:{checkpoints[family]}")
    for index in range(3):
        image = generated_image(index)
        shared = scorer.score(image, QUESTION, ANSWERS, batch_size=batch_size)
        full = scorer.score_by_full_forward(image, QUESTION, ANSWERS)
        np.testing.assert_allclose(shared.log_likelihood, full.log_likelihood, rtol=1e-5, atol=1e-5)
        assert shared.tokens.tolist() == [1, 1, 3, 3, 1, 1, 1, 5, 1, 3, 1, 1]
    assert len(set(np.round(shared.log_likelihood, 6))) > 6  # random weights still tell the answers apart


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("batch_size", [32, 5])
def test_images_scored_together_equal_one_full_forward_per_image_and_answer(checkpoints, family, batch_size):
    """log_likelihoods: the prefixes of several images in one forward pass and their (image, answer)
    continuations read on from that batch's cache give each image's numbers (float32, 1e-5); the
    open-ended answers of several images decoded together are each image's own."""
    scorer = GenerativeScorer.load(f"lvlm:{checkpoints[family]}")
    images = [generated_image(index) for index in range(7)]
    together = scorer.log_likelihoods(images, QUESTION, ANSWERS, batch_size=batch_size)
    for image, found in zip(images, together):
        np.testing.assert_allclose(found, scorer.score_by_full_forward(image, QUESTION, ANSWERS).log_likelihood,
                                   rtol=1e-5, atol=1e-5)
    assert scorer.generate_many(images, QUESTION, 4, batch_size=batch_size) == [
        scorer.generate(image, QUESTION, 4) for image in images]


def test_the_next_batch_of_prompts_is_made_while_this_one_is_scored(scorer, monkeypatch):
    """Issue 44: the processor's work for batch k + 1 (resizing, normalising, tokenizing) runs in a thread while
    the caller runs batch k's forwards, so a GPU does not wait for the host between batches; the batches come
    in order, and a batch the processor cannot take whole still goes one image at a time."""
    made: list[tuple[int, str]] = []
    second_made = threading.Event()
    original = GenerativeScorer._batch_inputs

    def recording(self, images, text, check_end=True):
        made.append((len(images), threading.current_thread().name))
        if len(made) == 2:
            second_made.set()
        return original(self, images, text, check_end)

    monkeypatch.setattr(GenerativeScorer, "_batch_inputs", recording)
    images = [generated_image(index) for index in range(7)]
    batches = scorer._image_batches(images, scorer.prompt(QUESTION), 3)
    first = next(batches)
    assert second_made.wait(timeout=30), "the second batch was not made while the first was in the caller's hands"
    rest = list(batches)
    assert [start for start, _ in [first, *rest]] == [0, 3, 6]
    # the first batch is made by the caller, the next in the thread while the caller has it; the last, of one
    # image, is made as it is asked for (nothing to pad)
    assert [(count, name.split("_")[0]) for count, name in made] == [(3, "MainThread"), (3, "vlfair-prompts"),
                                                                     (1, "MainThread")]
    np.testing.assert_array_equal(rest[0][1]["input_ids"].cpu(), original(scorer, images[3:6], scorer.prompt(QUESTION))[
        "input_ids"].cpu())


ASKS = [("is this person smart or dumb ?", ["smart", "dumb", "a smart person"]),
        ("is this person happy or sad ?", ["happy", "sad"]),
        ("who is this ?", ["a doctor", "a nurse", "none of these"])]


def _image_forwards(model) -> list[int]:
    """The batch size of every forward pass ``model`` runs with images (the vision tower's work)."""
    seen: list[int] = []
    model.register_forward_hook(lambda module, args, kwargs, output: seen.append(kwargs["input_ids"].shape[0])
                                if kwargs.get("pixel_values") is not None else None, with_kwargs=True)
    return seen


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("batch_size", [32, 5])
def test_questions_asked_together_share_the_image_and_equal_each_asked_alone(checkpoints, family, batch_size):
    """Issue 44: several questions about the same images (traits' pairs, multilingual's languages) encode
    the prompts' shared opening, the image with it, once per batch of images; each question's numbers
    are those of one full forward per (image, answer) (float32, 1e-5), in every family."""
    scorer = GenerativeScorer.load(f"lvlm:{checkpoints[family]}")
    images = [generated_image(index) for index in range(7)]
    seen = _image_forwards(scorer.model)
    together = scorer.log_likelihoods_many(images, ASKS, batch_size=batch_size)
    assert seen == [min(batch_size, 7 - at) for at in range(0, 7, batch_size)]  # not once per question
    head, tails = scorer.shared_head([scorer.prompt(question) for question, _ in ASKS], images[0])
    assert scorer.prompt(ASKS[0][0]).startswith(head) and len(tails) == 3 and all(tails)
    for (question, answers), found in zip(ASKS, together):
        assert found.shape == (7, len(answers))
        for image, row in zip(images, found):
            np.testing.assert_allclose(row, scorer.score_by_full_forward(image, question, answers).log_likelihood,
                                       rtol=1e-5, atol=1e-5)
    # the open-ended mode alike: each question decoded on from the opening's cache, each image's own answers
    seen.clear()
    said = scorer.generate_questions(images, [question for question, _ in ASKS], 3, batch_size=batch_size)
    assert seen == [min(batch_size, 7 - at) for at in range(0, 7, batch_size)]
    assert said == [[scorer.generate(image, question, 3) for image in images] for question, _ in ASKS]


def test_a_question_asked_twice_is_encoded_once_and_answered_alike(scorer):
    """The same question in several asks (multilingual with one language asks it once per task): its prompt is
    the whole opening, encoded once, and each ask gets the numbers it gets alone."""
    images = [generated_image(index) for index in range(3)]
    seen = _image_forwards(scorer.model)
    found = scorer.log_likelihoods_many(images, [(QUESTION, ANSWERS[:2]), (QUESTION, ANSWERS[2:5])])
    assert seen == [3]
    np.testing.assert_allclose(found[0], scorer.log_likelihoods(images, QUESTION, ANSWERS[:2]), rtol=1e-6)
    np.testing.assert_allclose(found[1], scorer.log_likelihoods(images, QUESTION, ANSWERS[2:5]), rtol=1e-6)
    seen.clear()
    said = scorer.generate_questions(images, [QUESTION, QUESTION, "who is this ?"], 3)
    assert said[0] == said[1] == scorer.generate_many(images, QUESTION, 3)
    assert said[2] == scorer.generate_many(images, "who is this ?", 3)


def test_an_opening_is_not_shared_where_other_per_token_inputs_say_more_of_the_question():
    """A continuation is given ids only: where the processor marks the question's tokens too (a prefix-LM's
    token types, text attending to an image), the opening is not shared; zeros after it (Gemma 3's text tokens)
    and the opening's own values before it are what a continuation assumes."""
    from vlfair.models.lvlm import _other_token_inputs_alike

    opening = {"input_ids": torch.tensor([[5, 6, 7]]), "token_type_ids": torch.tensor([[0, 1, 1]])}
    whole = {"input_ids": torch.tensor([[5, 6, 7, 8, 9]]), "attention_mask": torch.ones(1, 5),
             "token_type_ids": torch.tensor([[0, 1, 1, 0, 0]]), "pixel_values": torch.zeros(1, 3, 4, 4)}
    assert _other_token_inputs_alike(opening, whole)
    assert not _other_token_inputs_alike(opening, {**whole, "token_type_ids": torch.tensor([[0, 1, 1, 1, 0]])})
    assert not _other_token_inputs_alike(opening, {**whole, "token_type_ids": torch.tensor([[1, 1, 1, 0, 0]])})
    assert not _other_token_inputs_alike({"input_ids": opening["input_ids"]}, whole)  # the opening lacks them


QUESTION_FIRST_TEMPLATE = ("{% for message in messages %}USER: {% for c in message['content'] | reverse %}"
                           "{% if c['type'] == 'image' %}<image> {% else %}{{ c['text'] }} {% endif %}"
                           "{% endfor %}{% endfor %}ASSISTANT:")


def test_questions_that_come_before_the_image_are_asked_one_by_one(llava, tmp_path):
    """A template that writes the question before the image leaves no opening to share: each question is
    encoded whole, with the same numbers."""
    first = tmp_path / "question-first"
    shutil.copytree(llava, first)
    (first / "chat_template.jinja").write_text(QUESTION_FIRST_TEMPLATE)
    scorer = GenerativeScorer.load(f"lvlm:{first}")
    images = [generated_image(index) for index in range(3)]
    assert scorer.prompt(ASKS[0][0]) == "USER: is this person smart or dumb ? <image> ASSISTANT:"
    assert scorer.shared_head([scorer.prompt(question) for question, _ in ASKS], images[0]) is None
    seen = _image_forwards(scorer.model)
    together = scorer.log_likelihoods_many(images, ASKS, batch_size=32)
    assert seen == [3, 3, 3]  # each question's prompt with the images
    for (question, answers), found in zip(ASKS, together):
        for image, row in zip(images, found):
            np.testing.assert_allclose(row, scorer.score_by_full_forward(image, question, answers).log_likelihood,
                                       rtol=1e-5, atol=1e-5)


def test_an_opening_the_processor_encodes_otherwise_is_not_shared(scorer, monkeypatch):
    """The opening is used only where the processor's tokens for it, followed by each question's
    remaining tokens, are its tokens for the whole prompt: a processor that reads the opening
    otherwise (here: one token more at its end) makes each question be asked whole."""
    prompts = [scorer.prompt(question) for question, _ in ASKS]
    image = generated_image(0)
    fresh = GenerativeScorer(scorer.model, scorer.processor, scorer.name)
    original = fresh._batch_inputs

    def longer_opening(images, text, check_end=True):
        inputs = original(images, text, check_end)
        if text not in prompts:  # the opening: a token appended
            inputs["input_ids"] = torch.cat([inputs["input_ids"], inputs["input_ids"][:, -1:]], dim=1)
        return inputs

    monkeypatch.setattr(fresh, "_batch_inputs", longer_opening)
    assert fresh.shared_head(prompts, image) is None
    assert scorer.shared_head(prompts, image) is not None


def _forwards(model) -> list[int]:
    """The batch size of every forward pass ``model`` runs (a list that grows)."""
    seen: list[int] = []
    model.register_forward_hook(lambda module, args, kwargs, output: seen.append(
        kwargs["input_ids"].shape[0]), with_kwargs=True)
    return seen


@pytest.mark.parametrize(("family", "forwards"), [("llava", [7, 7]), ("qwen2_vl", [7, 32, 32, 20])])
def test_images_of_one_prompt_length_share_their_forward_passes(checkpoints, family, forwards):
    """Seven images, twelve answers, batches of 32: one prefix forward of 7 images, then the 84 continuations.
    LLaVA's decoder (Llama) packs every answer of an image into one continuation of its cache: one forward of 7
    rows. Qwen2-VL's (M-RoPE positions; not in PACKED_DECODERS) reads them in chunks of 32 (image, answer)
    pairs: 3 forwards. Never a prefix and a continuation per image."""
    scorer = GenerativeScorer.load(f"lvlm:{checkpoints[family]}")
    assert scorer._packs_answers() == (family == "llava")
    seen = _forwards(scorer.model)
    scorer.log_likelihoods([generated_image(index) for index in range(7)], QUESTION, ANSWERS, batch_size=32)
    assert seen == forwards


@pytest.mark.parametrize("family", ["llava", "idefics3"])
def test_packed_answers_in_several_groups_equal_the_chunked_path(checkpoints, family, monkeypatch):
    """Where one forward's logits would hold more than PACKED_LOGITS numbers, the answers go in groups of whole
    answers; packed in any grouping, and at any batch of images, the scores are the chunked path's."""
    from vlfair.models import lvlm

    scorer = GenerativeScorer.load(f"lvlm:{checkpoints[family]}")
    images = [generated_image(index) for index in range(5)]
    monkeypatch.setattr(GenerativeScorer, "_packs_answers", lambda self: False)
    chunked = scorer.log_likelihoods(images, QUESTION, ANSWERS, batch_size=3)
    monkeypatch.undo()
    vocab = scorer.model.get_output_embeddings().weight.shape[0]
    for groups_of, batch_size in ((None, 5), (4, 5), (1, 2)):  # all at once; 4 tokens a row; the least (the longest)
        if groups_of:
            monkeypatch.setattr(lvlm, "PACKED_LOGITS", groups_of * batch_size * vocab)
        seen = _forwards(scorer.model)
        packed = scorer.log_likelihoods(images, QUESTION, ANSWERS, batch_size=batch_size)
        np.testing.assert_allclose(packed, chunked, rtol=1e-5, atol=1e-5)
        if groups_of == 4:  # following tokens 2, 2, 4, 2 (answers of 3, 3, 5, 3 tokens): three groups
            assert len(seen) == 1 + 3


def test_images_whose_prompts_differ_in_length_are_scored_one_at_a_time(checkpoints):
    """Qwen2-VL gives a larger image more image tokens: the processor would pad the shorter prompt,
    and a padded prefix is not the prefix that image has alone, so each is scored by itself (with
    the same numbers)."""
    scorer = GenerativeScorer.load(f"lvlm:{checkpoints['qwen2_vl']}")
    images = [generated_image(0, size=(32, 32)), generated_image(1, size=(96, 64)), generated_image(2, size=(32, 32))]
    seen = _forwards(scorer.model)
    together = scorer.log_likelihoods(images, QUESTION, ANSWERS[:4], batch_size=32)
    assert seen[0] == 1 and seen.count(1) == 3  # three prefixes of one image each
    for image, found in zip(images, together):
        np.testing.assert_allclose(found, scorer.score_by_full_forward(image, QUESTION, ANSWERS[:4]).log_likelihood,
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_option_probabilities_equal_the_model_s_logits_written_out(checkpoints, family):
    """P(option) renormalised over the options, from each full text's logits: the product of the
    softmax probabilities of the answer's tokens, each at the position before it."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    scorer = GenerativeScorer.load(f"lvlm:{checkpoints[family]}")
    model = AutoModelForImageTextToText.from_pretrained(str(checkpoints[family])).eval()
    processor = AutoProcessor.from_pretrained(str(checkpoints[family]))
    image = generated_image(4)
    prompt = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}],
        add_generation_prompt=True, tokenize=False)
    options = ["smart", "dumb", "a smart person"]
    likelihoods, lengths = [], []
    for option in options:
        prefix = processor(images=image, text=prompt, return_tensors="pt")["input_ids"][0]
        inputs = processor(images=image, text=f"{prompt} {option}", return_tensors="pt")
        with torch.no_grad():
            probabilities = torch.softmax(model(**inputs).logits[0].double(), dim=-1)
        ids = inputs["input_ids"][0]
        product = 1.0
        for position in range(len(prefix), len(ids)):
            product *= float(probabilities[position - 1, ids[position]])
        likelihoods.append(product)
        lengths.append(len(ids) - len(prefix))
    expected = np.array(likelihoods) / sum(likelihoods)
    found = scorer.score(image, QUESTION, options)
    np.testing.assert_allclose(found.probabilities(), expected, rtol=1e-5)
    per_token = np.exp(np.log(likelihoods) / np.array(lengths))
    np.testing.assert_allclose(found.probabilities(normalized=True), per_token / per_token.sum(), rtol=1e-5)


@pytest.mark.parametrize("family", ["llava", "qwen2_vl"])
def test_no_third_party_deprecation_reaches_the_terminal(checkpoints, family, capfd, monkeypatch):
    """Issue 44: transformers 5.2x says "`past_key_values` is deprecated" (a FutureWarning, and a logged warning
    once per process) where a cache is passed or read by its old name; every generative path (answers scored,
    questions asked together, answers generated) passes and reads it by the name the installed transformers
    takes. Python's warnings are all recorded and the log's once-per-process memory is cleared, so neither a
    filter nor an earlier test can hide one."""
    import logging
    import warnings

    scorer = GenerativeScorer.load(f"lvlm:{checkpoints[family]}")
    images = [generated_image(index) for index in range(2)]

    def said(work) -> str:
        logging.Logger.warning_once.cache_clear()  # transformers' warning_once: an lru_cache on the Logger class
        capfd.readouterr()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            work()
        return " ".join(str(w.message) for w in caught) + capfd.readouterr().err

    def every_path():
        scorer.log_likelihoods(images, QUESTION, ANSWERS[:3])
        scorer.log_likelihoods_many(images, [(QUESTION, ANSWERS[:2]), ("who is this ?", ANSWERS[2:4])])
        scorer.generate_many(images, QUESTION, 3)

    assert "deprecated" not in said(every_path)
    # the check itself: the old name passed again is said
    monkeypatch.setattr("vlfair.models.lvlm._cache_argument", lambda model: "past_key_values")
    assert "deprecated" in said(lambda: scorer.log_likelihoods(images, QUESTION, ANSWERS[:3]))


def test_a_real_model_id_resolves_to_the_tiny_checkpoint_offline(llava, tmp_path):
    """llava-hf/llava-1.5-7b-hf laid out in a local Hub cache: the id loads under HF_HUB_OFFLINE=1
    through the same auto classes a user's online run takes."""
    repo = tmp_path / "hub" / "models--llava-hf--llava-1.5-7b-hf"
    shutil.copytree(llava, repo / "snapshots" / ("d" * 40))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("d" * 40)
    code = ("from vlfair.models.lvlm import GenerativeScorer; from vlfair.tiny import generated_image; "
            "s = GenerativeScorer.load('lvlm:llava-hf/llava-1.5-7b-hf'); "
            "print(type(s.model).__name__, s.score(generated_image(0), 'who is this ?', ['a man', 'a woman']).tokens)")
    status, out, err = forking.run(tmp_path, forking.python, code,
                                   env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")})
    assert status == 0, err[-3000:]
    assert out.split()[0] == "LlavaForConditionalGeneration" and "[2 2]" in out


TEXT_ONLY_TEMPLATE = ("{% for message in messages %}USER: {% for c in message['content'] %}{% if c['type'] == 'text' %}"
                      "{{ c['text'] }} {% endif %}{% endfor %}{% endfor %}ASSISTANT:")


@pytest.mark.parametrize("case", ["clip as lvlm", "no chat template", "answer longer than the context"])
def test_what_the_scorer_cannot_use_is_one_line_from_the_cli(llava, tmp_path, capsys, case):
    """The refusals above, as a user meets them: `vlfair run ...` prints one line naming the model, exit 2."""
    from vlfair.cli import main

    model, extra = f"lvlm:{llava}", []
    if case == "clip as lvlm":
        model = f"lvlm:{tiny_clip(tmp_path / 'clip')}"
        message = "is a CLIP model, not a generative vision-language model"
    elif case == "no chat template":
        bare = tmp_path / "bare-llava"
        shutil.copytree(llava, bare)
        (bare / "chat_template.jinja").unlink()
        model, message = f"lvlm:{bare}", "its processor has no chat template"
    else:
        extra, message = ["--set", f"pairs=[[{' '.join(['smart'] * 300)}, dumb]]"], "exceed its context of 256 tokens"
    capsys.readouterr()  # what building the models printed
    code = main(["run", "traits", "--model", model, "--dataset", "synthetic:fairface", "--per-cell", "2", "--quiet",
                 "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), *extra])
    error = capsys.readouterr().err.strip()
    assert code == 2 and len(error.splitlines()) == 1 and error.startswith("vlfair run: ") and message in error, error
    assert not (tmp_path / "run" / "results.json").exists()


def test_a_checkpoint_s_own_code_never_runs_even_when_stdin_says_yes(llava, tmp_path, capsys, monkeypatch):
    """A config naming its own code (auto_map, a model_type transformers does not know): left to
    transformers, trust_remote_code unset asks on stdin and a "y" runs the file. lvlm: passes False at
    every load: one line naming the model, exit 2, the file never imported."""
    import io

    from vlfair.cli import main
    from vlfair.testing import checkpoint_with_its_own_code

    ran = tmp_path / "the-checkpoint-s-code-ran"
    custom = checkpoint_with_its_own_code(llava, tmp_path / "custom-llava", ran, "AutoModelForImageTextToText")
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n" * 10))  # as `echo y | vlfair run ...`
    with pytest.raises(GenerativeModelError, match="ships Python code of its own"):
        GenerativeScorer.load(f"lvlm:{custom}")
    capsys.readouterr()
    code = main(["run", "traits", "--model", f"lvlm:{custom}", "--dataset", "synthetic:fairface", "--per-cell", "2",
                 "--quiet", "--out", str(tmp_path / "run")])
    error = capsys.readouterr().err.strip()
    assert code == 2 and error.splitlines() == [
        f"vlfair run: model '{custom}' ships Python code of its own (its config names it in auto_map); lvlm: runs "
        "no code from a checkpoint, only transformers' own classes"], error
    assert not ran.exists() and not (tmp_path / "run").exists()


def test_inputs_go_to_the_device_of_the_token_embeddings(scorer):
    """Under device_map="auto" the first parameter (the vision tower's) and the token embeddings may sit
    on different GPUs: the prompt's tokens must go where the embeddings are."""
    class Placed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.vision = torch.nn.Linear(2, 2)  # first: on the CPU
            self.embeddings = torch.nn.Embedding(4, 2, device="meta")  # a device of its own

        def get_input_embeddings(self):
            return self.embeddings

    assert GenerativeScorer(Placed(), scorer.processor, "placed").device == torch.device("meta")


def test_a_chat_template_that_leaves_the_image_out_is_refused_by_name(llava, tmp_path, capsys):
    """A text-only template would put the question without the image: every image would score the
    same. The scorer refuses it, and the CLI says so in one line, exit 2."""
    from vlfair.cli import main

    blind = tmp_path / "blind-llava"
    shutil.copytree(llava, blind)
    (blind / "chat_template.jinja").write_text(TEXT_ONLY_TEMPLATE)
    scorer = GenerativeScorer.load(f"lvlm:{blind}")
    with pytest.raises(GenerativeModelError, match=r"its chat template leaves the image out of the question "
                                                   r"\(no <image> in 'USER: who is this \? ASSISTANT:'\)"):
        scorer.score(generated_image(0), "who is this ?", ["a man"])
    code = main(["run", "traits", "--model", f"lvlm:{blind}", "--dataset", "synthetic:fairface", "--per-cell", "2",
                 "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), "--quiet"])
    error = capsys.readouterr().err.strip()
    assert code == 2 and len(error.splitlines()) == 1 and "leaves the image out of the question" in error, error


# Issue 43, SILENT 12 and UNCLEAR: a chat template is a checkpoint's text; what it does wrong is said naming it
_EACH = "{% for message in messages %}USER: {% for c in message['content'] %}"
TEMPLATES = {
    "drops the question": (_EACH + "{% if c['type'] == 'image' %}<image>{% endif %}{% endfor %}{% endfor %}ASSISTANT:",
                           "its chat template leaves the question out"),
    "image twice": (_EACH + "{% if c['type'] == 'image' %}<image> <image>{% else %}{{ c['text'] }}{% endif %}"
                    "{% endfor %}{% endfor %}ASSISTANT:", "its chat template writes the image 2 times for one image"),
    "raises": ("{{ raise_exception('no images here') }}", r"its chat template fails on a question about one image "
                                                          r"\(TemplateError: no images here\)"),
    "syntax error": ("{% for message in messages %}", "its chat template fails on a question about one image"),
    "includes a file": ("{% include '/etc/passwd' %}", "its chat template fails on a question about one image"),
    "loops for ever": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                       "its chat template ran for more than 1 s on one question"),
    "writes megabytes": ("{% for i in range(100000) %}" + "x" * 30 + "{% endfor %}",
                         "its chat template writes 3,000,000 characters for one question"),
}


@pytest.mark.parametrize("case", TEMPLATES, ids=list(TEMPLATES))
def test_a_chat_template_that_misbehaves_is_refused_naming_the_model(scorer, case, monkeypatch):
    import copy

    from vlfair.models import lvlm

    monkeypatch.setattr(lvlm, "TEMPLATE_SECONDS", 1)
    template, said = TEMPLATES[case]
    processor = copy.copy(scorer.processor)
    processor.chat_template = template
    crafted = GenerativeScorer(scorer.model, processor, "lvlm:acme/crafted")
    with pytest.raises(GenerativeModelError, match=r"^model 'lvlm:acme/crafted': " + said):
        crafted.prompt("who is this ?")


def test_the_open_ended_mode_checks_the_model_s_context_as_the_likelihood_mode_does(scorer):
    limit = scorer.model.config.get_text_config().max_position_embeddings
    with pytest.raises(GenerativeModelError, match=rf"and max_new_tokens \({limit}\) exceed its context of {limit} "):
        scorer.generate(generated_image(0), "who is this ?", max_new_tokens=limit)


def test_nan_logits_in_the_open_ended_mode_are_said_as_such_not_as_answers_too_short(llava):
    """Issue 43, UNCLEAR: greedy decoding picks a token from NaN scores too; the answers would be noise."""
    broken = GenerativeScorer.load(f"lvlm:{llava}")
    with torch.no_grad():
        broken.model.lm_head.weight[0, 0] = float("nan")
    with pytest.raises(GenerativeModelError, match=r"its logits came out NaN or infinite at answer token 1 \(images 0 "
                                                   r"to 1 of this question\), in float32: the answers would be noise, "
                                                   r"not too short; its weights hold a NaN"):
        broken.generate_many([generated_image(0), generated_image(1)], "who is this ?", max_new_tokens=3)


def test_one_process_with_several_gpus_spreads_the_model_over_them():
    from vlfair.models.lvlm import placement

    assert placement("auto", gpus=2, processes=1) == "auto"  # Accelerate places the layers
    assert placement("auto", gpus=2, processes=2) is None  # torchrun: a GPU per process
    assert placement("auto", gpus=1, processes=1) is None and placement("auto", gpus=0, processes=1) is None
    assert placement("cuda:1", gpus=4, processes=1) is None  # the user named one device


def test_a_model_placed_by_accelerate_scores_as_on_one_device(llava, monkeypatch):
    """Where one process sees several GPUs, load_lvlm asks transformers for device_map="auto" and the
    scorer sends its inputs to the embeddings' device; on this CPU Accelerate places every layer on
    it, and the scores equal an unplaced model's."""
    from transformers import AutoModelForImageTextToText

    from vlfair.models.lvlm import load_lvlm

    asked = []
    original = AutoModelForImageTextToText.from_pretrained

    def recording(path, *args, **kwargs):
        asked.append(kwargs.get("device_map"))
        return original(path, *args, **kwargs)

    monkeypatch.setattr(AutoModelForImageTextToText, "from_pretrained", recording)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)  # Accelerate places on the CPU alone
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    placed = load_lvlm(str(llava), dtype="float32")
    monkeypatch.setenv("WORLD_SIZE", "2")
    whole = load_lvlm(str(llava), dtype="float32")
    assert asked == ["auto", None]
    image = generated_image(2)
    np.testing.assert_allclose(placed.score(image, QUESTION, ANSWERS).log_likelihood,
                               whole.score(image, QUESTION, ANSWERS).log_likelihood, rtol=1e-6)


def test_what_the_scorer_cannot_use_is_refused_by_name(tmp_path, llava, scorer):
    clip = tiny_clip(tmp_path / "clip")
    with pytest.raises(GenerativeModelError, match="is a CLIP model, not a generative vision-language model"):
        GenerativeScorer.load(f"lvlm:{clip}")
    with pytest.raises(GenerativeModelError, match="its processor has no chat template"):
        GenerativeScorer(scorer.model, type("Bare", (), {"chat_template": None})(), "bare")
    with pytest.raises(GenerativeModelError, match="an empty answer has no tokens"):
        scorer.score(generated_image(0), QUESTION, ["smart", " "])
    with pytest.raises(GenerativeModelError, match=r"exceed its context of 256 tokens"):
        scorer.score(generated_image(0), QUESTION, [" ".join(["smart"] * 300)])


def test_scores_of_a_dataset_are_cached_like_embeddings(scorer, tmp_path, monkeypatch):
    """score_dataset: each readable image's answers scored as score() scores them, an unreadable row
    skipped and named, and a second call (the same model, data, question and answers) computes
    nothing; another question is another cache entry."""
    from vlfair.embed import score_answers as score_dataset

    images = [generated_image(i) for i in range(5)]
    images[3] = {"bytes": b"not an image", "path": "broken.jpg"}
    data = {"image": images}
    first = score_dataset(scorer, data, QUESTION, ANSWERS[:4], cache_dir=tmp_path / "cache", chunk_size=2,
                          progress=False)
    assert first.skipped_rows == [3] and first.kept_rows.tolist() == [0, 1, 2, 4]
    for position, row in enumerate(first.kept_rows):
        np.testing.assert_allclose(first.scores[position],
                                   scorer.score(images[row], QUESTION, ANSWERS[:4]).log_likelihood, rtol=1e-6)
    calls = _images_scored(scorer, monkeypatch)
    again = score_dataset(scorer, data, QUESTION, ANSWERS[:4], cache_dir=tmp_path / "cache", progress=False)
    assert calls == [] and np.array_equal(again.scores, first.scores)
    score_dataset(scorer, data, "who is this ?", ANSWERS[:4], cache_dir=tmp_path / "cache", progress=False)
    assert sum(calls) == 4  # the four readable images, for the new question


def test_questions_asked_of_a_dataset_together_are_cached_each_as_asked_alone(scorer, tmp_path, monkeypatch):
    """score_questions: each question's scores are those score_answers gives it, cached under the same
    key (either finds the other's work), an unreadable row skipped; asked again with one question
    new, only the new one is computed, each image read once for all."""
    from vlfair.embed import score_answers, score_questions

    images = [generated_image(i) for i in range(5)]
    images[1] = {"bytes": b"not an image", "path": "broken.jpg"}
    data = {"image": images}
    together = score_questions(scorer, data, ASKS[:2], cache_dir=tmp_path / "cache", chunk_size=3, batch_size=2,
                               progress=False)
    alone = [score_answers(scorer, data, question, answers, cache_dir=None, progress=False)
             for question, answers in ASKS[:2]]
    for found, expected in zip(together, alone):
        assert found.skipped_rows == [1] and found.kept_rows.tolist() == [0, 2, 3, 4]
        np.testing.assert_allclose(found.scores, expected.scores, rtol=1e-6)
    asked: list[int] = []
    original = scorer.log_likelihoods_many
    monkeypatch.setattr(scorer, "log_likelihoods_many", lambda images, asks, *a: asked.append(len(asks))
                        or original(images, asks, *a))
    cached = score_answers(scorer, data, *ASKS[1], cache_dir=tmp_path / "cache", progress=False)
    assert asked == [] and np.array_equal(cached.scores, together[1].scores)
    again = score_questions(scorer, data, ASKS, cache_dir=tmp_path / "cache", chunk_size=3, batch_size=2,
                            progress=False)
    assert asked == [1, 1]  # the third question only, one batch per chunk (rows 0-2 and 3-4: 2 readable each)
    assert [np.array_equal(a.scores, b.scores) for a, b in zip(again[:2], together)] == [True, True]
    np.testing.assert_allclose(again[2].scores, score_answers(scorer, data, *ASKS[2], cache_dir=None,
                                                                  progress=False).scores, rtol=1e-6)


def test_questions_generated_together_are_matched_and_cached_each_as_asked_alone(scorer, tmp_path, monkeypatch):
    """generate_questions: a question asked with two answer lists is generated once and matched to each; each
    (question, answers) is cached under the key generate_answers gives it."""
    from vlfair.embed import generate_answers, generate_questions

    data = {"image": [generated_image(i) for i in range(4)]}
    monkeypatch.setattr(type(scorer), "generate_questions", lambda self, images, questions, *a: [
        [f"{question[-5:]} smart" if i % 2 else "dumb" for i, _ in enumerate(images)] for question in questions])
    asked: list[list[str]] = []
    original = scorer.generate_questions
    monkeypatch.setattr(scorer, "generate_questions", lambda images, questions, *a: asked.append(list(questions))
                        or original(images, questions, *a))
    asks = [("who is this ?", ["smart", "dumb"]), ("who is this ?", ["smart", "lazy"]), ("and this ?", ["dumb", "x"])]
    found = generate_questions(scorer, data, asks, max_new_tokens=4, cache_dir=tmp_path, progress=False)
    assert asked == [["who is this ?", "and this ?"]]  # each question once, for its two answer lists
    assert [result.chosen.tolist() for result in found] == [[1, 0, 1, 0], [-1, 0, -1, 0], [0, -1, 0, -1]]
    again = generate_answers(scorer, data, *asks[1], max_new_tokens=4, cache_dir=tmp_path, progress=False)
    assert len(asked) == 1 and np.array_equal(again.chosen, found[1].chosen)


def _images_scored(scorer, monkeypatch) -> list[int]:
    """The number of images each call of the scorer's log_likelihoods_many is given (a list that grows)."""
    calls: list[int] = []
    original = scorer.log_likelihoods_many
    monkeypatch.setattr(scorer, "log_likelihoods_many", lambda images, *a, **k: calls.append(len(images))
                        or original(images, *a, **k))
    return calls


def _rejecting(monkeypatch, rejected: set[bytes]) -> None:
    """The image processor refuses the images in ``rejected`` (their pixels), as a processor with limits
    of its own would (Qwen2-VL's refuses an aspect ratio over 200, which vlfair's decoding already
    refuses over 100): the images decode, the model's own preprocessing raises."""
    from transformers import CLIPImageProcessor, CLIPImageProcessorPil

    for processor_class in {CLIPImageProcessor, CLIPImageProcessorPil}:  # one class without torchvision, two with
        def preprocess(self, images, *args, _original=processor_class.preprocess, **kwargs):
            for image in images if isinstance(images, list) else [images]:
                if np.asarray(image).tobytes() in rejected:
                    raise ValueError("this image processor takes no such image")
            return _original(self, images, *args, **kwargs)

        monkeypatch.setattr(processor_class, "preprocess", preprocess)


def test_an_image_the_processor_rejects_stops_the_run_at_its_row_and_keeps_the_cache(scorer, tmp_path, monkeypatch):
    from vlfair.embed import score_answers as score_dataset
    from vlfair.imageio import RejectedImageError

    images = [generated_image(i) for i in range(5)]
    data = {"image": images}
    with monkeypatch.context() as patched:
        _rejecting(patched, {np.asarray(images[3]).tobytes()})
        with pytest.raises(RejectedImageError, match=r"^row 3: model 'lvlm:.*': its processor rejects the image "
                                                     r"\(this image processor takes no such image\)$"):
            score_dataset(scorer, data, QUESTION, ANSWERS[:4], cache_dir=tmp_path / "cache", chunk_size=2,
                          progress=False)
    calls = _images_scored(scorer, monkeypatch)
    again = score_dataset(scorer, data, QUESTION, ANSWERS[:4], cache_dir=tmp_path / "cache", chunk_size=2,
                          progress=False)
    assert sum(calls) == 3 and again.kept_rows.tolist() == [0, 1, 2, 3, 4]  # rows 0 and 1 were kept


def test_the_cli_names_the_row_an_image_processor_rejects(llava, tmp_path, monkeypatch, capsys):
    """The row in the user's dataset (the probe asks about a balanced subset of it), in one line, exit 2."""
    import pandas as pd

    import vlfair
    from vlfair.cli import main

    def run(name: str) -> int:
        return main(["run", "traits", "--model", f"lvlm:{llava}", "--dataset", "synthetic:fairface", "--per-cell", "3",
                     "--dtype", "float32", "--out", str(tmp_path / name),
                     "--cache-dir", str(tmp_path / f"{name}-cache"),
                     "--set", "pairs=[[smart, dumb]]", "--set", "bootstrap=20", "--quiet"])

    assert run("whole") == 0
    row = int(pd.read_parquet(tmp_path / "whole" / "samples.parquet")["row"].iloc[5])  # a row the probe asks about
    data = vlfair.load_dataset("synthetic:fairface", subset="adults")
    _rejecting(monkeypatch, {np.asarray(data["image"][row].convert("RGB")).tobytes()})
    capsys.readouterr()
    code = run("refused")
    error = capsys.readouterr().err.strip()
    assert code == 2 and len(error.splitlines()) == 1, error
    assert error.startswith(f"vlfair run: row {row}: model 'lvlm:{llava}': its processor rejects the image"), error
    assert not (tmp_path / "refused" / "results.json").exists()


def test_an_unreadable_image_in_a_drawn_sample_is_named_by_its_row_in_the_data_given(tmp_path):
    """traits draws --per-cell rows of the data: a skipped image is reported by its row in the data, as
    samples.parquet names rows, not by its place in the sample."""
    import datasets

    import vlfair
    from vlfair.probes import measure_probe

    clip = str(tiny_clip(tmp_path / "clip"))
    settings = {"per_cell": 2, "bootstrap": 20, "pairs": [["smart", "dumb"]]}
    data = vlfair.load_dataset("synthetic:fairface", subset="adults").cast_column("image", datasets.Image(decode=False))
    whole = measure_probe("traits", clip, data, settings=settings, cache_dir=tmp_path / "whole")
    drawn = whole.output.samples.frame["row"].tolist()
    broken = drawn[3]
    images = list(data["image"])
    images[broken] = {"bytes": b"not an image", "path": "broken.jpg"}
    data = data.remove_columns("image").add_column("image", images).cast_column("image", datasets.Image(decode=False))
    run = measure_probe("traits", clip, data, settings=settings, cache_dir=tmp_path / "broken")
    assert run.results["skipped_rows"] == [broken] and broken not in run.output.samples.frame["row"].tolist()


def test_traits_runs_on_a_generative_model_through_the_cli(llava, tmp_path, monkeypatch):
    """`vlfair run traits --model lvlm:...`: each confidence is the positive word's probability as the
    answer to the YAML's question, renormalised over the pair; the study's F-tests follow unchanged.
    The pairs are asked together (issue 44): one pass over the images for all of them."""
    import json

    import pandas as pd

    import vlfair
    import vlfair.embed
    from vlfair.cli import main

    asked: list[int] = []
    original = vlfair.embed.score_questions
    monkeypatch.setattr(vlfair.embed, "score_questions", lambda scorer, data, asks, **k: asked.append(len(asks))
                        or original(scorer, data, asks, **k))
    assert main(["run", "traits", "--model", f"lvlm:{llava}", "--dataset", "synthetic:fairface", "--per-cell", "3",
                 "--dtype", "float32", "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"),
                 "--set", "bootstrap=50", "--set", "pairs=[[smart, dumb], [happy, sad]]"]) == 0
    assert asked == [2]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["model"]["spec"] == f"lvlm:{llava}" and results["settings"]["scorer"] == "generative"
    assert any(m["name"] == "trait_anova" for m in results["metrics"])
    samples = pd.read_parquet(tmp_path / "run" / "samples.parquet")
    data = vlfair.load_dataset("synthetic:fairface", subset="adults")
    scorer = GenerativeScorer.load(f"lvlm:{llava}")
    for positive, negative in [("smart", "dumb"), ("happy", "sad")]:
        for row, confidence in zip(samples["row"][:5], samples[f"confidence {positive}/{negative}"][:5]):
            found = scorer.score(data["image"][int(row)], f"is this person {positive} or {negative} ?",
                                 [positive, negative])
            assert confidence == pytest.approx(found.probabilities()[0], rel=1e-5)


def test_a_clip_run_and_a_generative_run_of_traits_compare_on_the_same_rows(llava, tmp_path):
    """Issue 32's question, in small: is the generative model more biased than the CLIP model on the
    same images? The question belongs to the scorer (left out of the family), so the runs compare,
    and each run's kind is named."""
    from vlfair.cli import main
    from vlfair.compare import compare_runs

    common = ["--dataset", "synthetic:fairface", "--per-cell", "3", "--dtype", "float32", "--cache-dir",
              str(tmp_path / "cache"), "--set", "bootstrap=40", "--set", "pairs=[[smart, dumb]]",
              "--set", "gradcam=null"]
    clip = tiny_clip(tmp_path / "clip")
    assert main(["run", "traits", "--model", str(clip), "--out", str(tmp_path / "clip-run"), *common]) == 0
    assert main(["run", "traits", "--model", f"lvlm:{llava}", "--out", str(tmp_path / "lvlm-run"), *common]) == 0
    comparison = compare_runs([tmp_path / "clip-run", tmp_path / "lvlm-run"], bootstrap=40, n_permutations=40)
    kinds = [run["model"]["kind"] for run in comparison.content["runs"]]
    assert kinds == ["contrastive", "generative"]
    assert comparison.content["rows"]["compared"] == 42
    assert any(d["metric"] == "trait_anova" and d["difference_ci"] for d in comparison.content["differences"])


def test_a_probe_without_questions_refuses_a_generative_model_by_name(tmp_path, capsys):
    """Every built-in probe asks questions now; a plugin probe that reads embeddings only refuses an
    lvlm: model before its weights load (a model that does not exist is not even looked for)."""
    from vlfair.cli import main
    from vlfair.probes import Probe, ProbeError, refuse_generative

    class EmbeddingsOnly(Probe):
        name = "embeddings-only"

    with pytest.raises(ProbeError) as refused:
        refuse_generative(EmbeddingsOnly, "lvlm:acme/no-such-model")
    assert str(refused.value) == (
        "probe 'embeddings-only' reads image and text embeddings; 'lvlm:acme/no-such-model' is a generative model, "
        "which answers questions instead (the probes that ask it: professions, traits, word-influence, multilingual, "
        "public-figures, retrieval)")
    assert main(["run", "traits", "--model", "lvlm:acme/no-such-model", "--dataset", "synthetic:fairface",
                 "--out", str(tmp_path / "run")]) == 2
    assert "acme/no-such-model" in capsys.readouterr().err


def test_pickled_weights_load_only_on_request(llava, tmp_path):
    import shutil

    import safetensors.torch

    pickled = tmp_path / "pickled"
    shutil.copytree(llava, pickled)
    torch.save(safetensors.torch.load_file(str(pickled / "model.safetensors")), pickled / "pytorch_model.bin")
    (pickled / "model.safetensors").unlink()
    with pytest.raises(Exception, match="safetensors|pickled|model.safetensors"):
        GenerativeScorer.load(f"lvlm:{pickled}")
    assert GenerativeScorer.load(f"lvlm:{pickled}", use_safetensors=False).model is not None


def test_a_template_that_starts_with_bos_gets_no_second_one(checkpoints):
    """Idefics3's template writes <bos> itself: the processor must not add another (as transformers'
    apply_chat_template decides), in the shared path and in the reference alike."""
    scorer = GenerativeScorer.load(f"lvlm:{checkpoints['idefics3']}")
    scorer.processor.tokenizer._tokenizer.post_processor = __import__("tokenizers").processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", scorer.processor.tokenizer.bos_token_id)])
    inputs = scorer._inputs(generated_image(0), scorer.prompt(QUESTION))
    ids = inputs["input_ids"][0].tolist()
    assert ids[0] == scorer.processor.tokenizer.bos_token_id and ids[1] != ids[0]
    shared = scorer.score(generated_image(0), QUESTION, ANSWERS[:4])
    np.testing.assert_allclose(shared.log_likelihood,
                               scorer.score_by_full_forward(generated_image(0), QUESTION, ANSWERS[:4]).log_likelihood,
                               rtol=1e-5, atol=1e-5)


def test_a_float32_scorer_scores_and_generates_in_ieee_float32_whatever_the_process_set(llava):
    """As an encoder's (tests/test_models.py): with the process asking for TF32 and bf16, every forward of a float32
    scorer runs with each switch at "ieee", and the switches are given back."""
    scorer = GenerativeScorer.load(f"lvlm:{llava}", dtype=torch.float32)
    seen = []
    scorer.model.register_forward_pre_hook(lambda *_: seen.append(float32_switches()))
    image = generated_image(0)
    with lower_float32_precision() as asked:
        scorer.score(image, "who is this?", ["a doctor", "a nurse"])
        scorer.generate(image, "who is this?", max_new_tokens=2)
        scorer.score_by_full_forward(image, "who is this?", ["a doctor"])
        assert float32_switches() == asked
    assert len(seen) >= 4 and all(found == dict.fromkeys(asked, "ieee") for found in seen), seen
