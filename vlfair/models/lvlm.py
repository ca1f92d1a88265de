"""Generative vision-language models (LLaVA, Qwen2-VL, Idefics3 / SmolVLM, ...) as scorers.

A probe needs s(image, text): for a generative model, the log-likelihood of the text as the answer
to the probe's question about the image, log p(answer | image, question) = the sum over the
answer's tokens of each token's log-probability (and, as lm-evaluation-harness's ``acc_norm``, that
sum over the answer's length). The image and the question (the model's own chat template, with its
generation prompt) are the prefix: it is encoded once per image, and every candidate answer is
scored from its key-value cache, the cache repeated over the answers of one batch, never one full
forward per (image, answer).

An answer's tokens are the tokens the full text (prefix + separator + answer) has after the
prefix's: the tokenizer reads the answer in context. A tokenizer that merges the prefix's last
token with the answer's first is refused, naming both (scoring such an answer from the prefix's
cache would score other tokens than a full forward does).

Scoring. ``GenerativeScorer.log_likelihoods(images, question, answers, batch_size)`` encodes the image
and question of ``batch_size`` images in one forward pass (the processor's chat template with its
generation prompt; a template is a checkpoint's text, so ``GenerativeScorer.prompt`` renders it within
10 s and 1,000,000 characters and refuses, naming the model, one that fails (a raise, a syntax error, an
include), loops, writes too much, leaves the image out, writes the image more than once or leaves the
question out) and reads every (image, answer) continuation on from that batch's key-value cache.

- Packed answers: where the decoder takes a 4D attention mask and position ids as given
  (``PACKED_DECODERS``: Llama, LLaVA-1.5's and Idefics3's, with no sliding window, sdpa or eager
  attention), every answer of every image goes into one continuation of the cache as it is
  (``_packed_answers``): the answers' tokens follow the prompt one after another, each placed and masked
  as if it alone followed it (it sees the prompt and its own earlier tokens), in groups of whole answers
  where one forward's logits would pass ``PACKED_LOGITS`` (2^27) numbers. Before it, each (image, answer)
  pair had its image's cache rows copied for its continuation: 44 GB per batch of 32 images for a 1.8 B
  LLaVA with 585 prompt tokens and 12 answers, and 12 forwards where packing runs one. Tested equal to the
  chunked path and to one full forward per answer (1e-5, LLaVA and Idefics3, in one and in several
  groups).
- The next batch's tensors (the processor's resizing and normalising of every image and tokenizing of
  every prompt) are made in a thread while this batch's forwards run (``_image_batches``; every use of the
  processor holds one lock, since a fast tokenizer sets its padding state on each call). Measured speeds:
  benchmarks/README.md (``lvlm_prefix_speed.py``, ``gpu_check.py``).
- Other decoders (Qwen2-VL's M-RoPE positions, Gemma 3's sliding window) read the continuations
  ``batch_size`` per forward pass: the cache's rows are indexed per continuation, never changed
  (``_rows_of``, which selects the model's per-image state with them: Qwen2-VL's M-RoPE offsets).
- Images whose prompts the processor makes of different lengths (a tiling processor, Qwen2-VL's dynamic
  resolution) would be padded, and a padded prefix is not the one the image has alone: such a batch is
  scored one image at a time. ``score`` is ``log_likelihoods`` of one image.
- Several questions about the same images (``log_likelihoods_many(images, [(question, answers), ...])``;
  traits' six pairs, multilingual's questions in eight languages) share the prompts' opening:
  ``GenerativeScorer.shared_head`` finds the text the templated prompts have in common up to and with the
  image (their common prefix, or a cut at a space back towards the image, up to ``HEAD_CUTS`` = 16 places
  tried) where the tokenizer reads each prompt's first tokens as the opening's, and uses it only where the
  processor's tokens for the opening with an image, followed by each prompt's remaining tokens, are its
  tokens for the prompt whole, and its other per-token inputs are the opening's followed by zeros
  (``_other_token_inputs_alike``: a prefix-LM's token types or text-to-image cross-attention marks would
  say more of the question than a continuation of ids does); checked once per set of prompts. A prompt
  asked several times is encoded once, and the opening's forward keeps only its last position's logits
  (``logits_to_keep=1``). The opening of ``batch_size`` images is encoded once (the vision tower's whole
  work and most of the prompt's tokens); each question's remaining tokens run on from a fork of its cache
  (``_forked``: the structure copied, not the tensors, which transformers' dynamic layers never write in
  place; any other layer copied whole) and its answers are read on from there as above. Prompts with no
  such opening (a template that puts the question before the image) are asked one by one. Tested equal to
  one full forward per (image, answer) to 1e-5 in the four families, with one vision forward per batch.
- The open-ended mode shares the opening the same way (``generate_questions``: transformers' ``generate``
  decodes each question on from a fork of the opening's cache; tested equal to each image's own answers in
  the four families). ``GenerativeScorer.generate_many`` is greedy decoding of at most ``max_new_tokens``
  (the prompt and ``max_new_tokens`` must fit the model's context, as the prompt and the longest answer
  must in the likelihood mode: ``GenerativeScorer._check_context``; a logits processor that changes
  nothing, ``_NonFiniteLogits``, notes a step whose scores hold a NaN or an infinity, and the batch is
  refused naming the step, the images and the dtype, not left to the probe's "raise max_new_tokens"
  advice for answers that name no candidate), images of one prompt length decoded together (tested equal
  to one at a time).
- The reference, ``score_by_full_forward``, runs one forward per answer (tested equal to 1e-5 for one
  image and for batches, four families).

Where a new family plugs in: ``lvlm:`` loads any checkpoint transformers' ``AutoModelForImageTextToText``
and ``AutoProcessor`` load, with its own chat template; nothing in vlfair names a family. A family whose
processor appends a token after the prompt, or whose tokenizer merges the prompt's end with an answer, is
refused by name; an image the processor refuses (``RejectedImageError``: a limit of its own on an image's
size or shape) stops the run with its row in the data given (``Context.given_rows``, through a probe's
drawn sample or ``within=``), the chunks already scored cached. The model's inputs go to its token
embeddings' device. On one process that sees several GPUs, ``load_lvlm`` asks transformers for
``device_map="auto"`` (``placement``): Accelerate spreads the layers over the GPUs, so a model larger than
one GPU loads; under torchrun each process holds the whole model on its own GPU instead. ``vlfair.tiny``
builds tiny LLaVA, Idefics3, Gemma 3 and Qwen2-VL checkpoints for tests. Qwen2-VL's processor holds a
video processor that transformers builds on torchvision, which cannot be imported here, so its tests load
the processor's image parts by hand (``vlfair.testing.qwen2_vl_processors_without_video``); its model,
M-RoPE positions included, runs through the code every other family does.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import dataclasses
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from vlfair.matching import match_answer, normalized
from vlfair.models.precision import in_asked_precision


class GenerativeModelError(ValueError):
    """A model, processor or answer the generative scorer cannot use (named in the message)."""


@dataclasses.dataclass(frozen=True)
class AnswerScores:
    """Per candidate answer: the summed log-probability of its tokens and its token count."""

    log_likelihood: npt.NDArray[np.float64]  # (answers,)
    tokens: npt.NDArray[np.int64]            # (answers,)

    @property
    def per_token(self) -> npt.NDArray[np.float64]:
        """The length-normalised log-likelihood (lm-evaluation-harness's acc_norm divides by length too)."""
        return self.log_likelihood / self.tokens

    def probabilities(self, normalized: bool = False) -> npt.NDArray[np.float64]:
        """The answers' probabilities renormalised over the candidates (a softmax of the log-likelihoods)."""
        scores = self.per_token if normalized else self.log_likelihood
        shifted = np.exp(scores - scores.max())
        return shifted / shifted.sum()


class _NonFiniteLogits:
    """A logits processor that changes nothing and notes the first generation step whose scores hold a NaN or
    an infinity (half precision overflowing; a broken checkpoint)."""

    def __init__(self) -> None:
        self.step: int | None = None
        self._steps = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.step is None and not bool(torch.isfinite(scores).all()):
            self.step = self._steps
        self._steps += 1
        return scores


TEMPLATE_SECONDS = 10  # a chat template renders one question in milliseconds
TEMPLATE_CHARACTERS = 1_000_000  # a question's prompt is hundreds of characters (a system prompt: thousands)
HEAD_CUTS = 16  # places tried for the end of the prompts' shared opening, back from where their texts part
# Decoders whose forward takes a 4D attention mask and position ids as given, with no sliding window: a batch's
# answers are packed into one continuation of its cache (:meth:`GenerativeScorer._packed_answers`). Llama is
# LLaVA-1.5's and Idefics3's; a family is added here once tests/test_lvlm.py compares its packed scores with
# one full forward per answer.
PACKED_DECODERS = frozenset({"llama"})
PACKED_LOGITS = 2**27  # elements of one packed forward's logits (512 MB in float32): answers beyond it go in turn


class GenerativeScorer:
    """``AutoModelForImageTextToText`` + ``AutoProcessor`` of one checkpoint, scoring answers.

    Args:
        model: the loaded model (eval mode).
        processor: its processor, with a chat template.
        name: the spec it was loaded from (for messages).
        separator: what joins the generation prompt and an answer.
    """

    def __init__(self, model: Any, processor: Any, name: str, separator: str = " ", revision: str | None = None):
        if not getattr(processor, "chat_template", None):
            raise GenerativeModelError(f"model {name!r}: its processor has no chat template, so a question cannot be "
                                       "put to it as the model was trained to read one")
        self.model, self.processor, self.name, self.separator = model, processor, name, separator
        self.revision = revision
        # where the inputs go: the token embeddings' device (the first of several under device_map="auto"), and
        # the precision the model computes in (its embeddings', not any parameter's: a quantized layer's is int8)
        self.device = model.get_input_embeddings().weight.device
        self.dtype = model.get_input_embeddings().weight.dtype
        self._asked: dict[tuple[str, tuple[str, ...]], tuple[str, list[list[int]]]] = {}
        self._last_token: dict[str, int] = {}
        self._heads: dict[tuple[str, ...], tuple[str, list[list[int]]] | None] = {}
        # a fast tokenizer's state (padding, truncation) is set by each call: two threads at once raise "Already
        # borrowed", so every use of the processor while a batch is made ahead in a thread holds this lock
        self._tokenizing = threading.Lock()
        self._pad_id = getattr(getattr(processor, "tokenizer", None), "pad_token_id", None)  # read once, here

    def identity(self) -> dict[str, Any]:
        """What makes two scorers give the same scores (the cache key's model part)."""
        return {"spec": self.name, "revision": self.revision,
                "dtype": str(self.dtype).removeprefix("torch."), "separator": self.separator}

    kind = "generative"  # what a probe asks of its model: answers' log-likelihoods, not embeddings

    @property
    def spec(self) -> str:
        """The spec it was loaded from (as an encoder's ``spec``)."""
        return self.name

    @classmethod
    def load(cls, spec: str, dtype: Any = None, device: Any = None, revision: str | None = None,
             use_safetensors: bool = True, device_map: str | None = None) -> GenerativeScorer:
        """``lvlm:ORG/NAME[@REV]`` (or a local directory) through transformers' auto classes; with
        ``device_map`` (``"auto"``), Accelerate places the layers over the devices instead of ``device``."""
        import torch
        from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

        from vlfair.models.hub import refusing_remote_code, resolve_model

        name = spec.removeprefix("lvlm:")
        # a local directory, the Hub cache, or a download, as encoders load
        resolved = resolve_model(name, revision, use_safetensors=use_safetensors)
        # trust_remote_code=False at every load, never left to transformers: left unset, a checkpoint whose
        # config names its own code (auto_map) makes transformers ask on stdin, and a "y" there runs it
        with refusing_remote_code(name, "lvlm: runs no code from a checkpoint, only transformers' own classes",
                                  GenerativeModelError):
            config = AutoConfig.from_pretrained(resolved.path, trust_remote_code=False)
        if type(config) not in AutoModelForImageTextToText._model_mapping:
            raise GenerativeModelError(f"model {name!r} is a {type(config).__name__.removesuffix('Config')} model, "
                                       "not a generative vision-language model (AutoModelForImageTextToText does not "
                                       "load it); give a contrastive encoder without lvlm:")
        from vlfair.logging import library_progress_bars

        # pickled weights only on request, as for encoders (transformers refuses them with this flag)
        with library_progress_bars("transformers.utils.logging"):  # its "Loading weights" bar: --verbose only
            model = AutoModelForImageTextToText.from_pretrained(resolved.path, dtype=dtype or torch.float32,
                                                                use_safetensors=use_safetensors or None,
                                                                device_map=device_map, trust_remote_code=False)
        model.eval()
        if device is not None and device_map is None:
            model.to(device)
        return cls(model, AutoProcessor.from_pretrained(resolved.path, trust_remote_code=False), spec,
                   revision=resolved.revision)

    # ---- text --------------------------------------------------------------------------------
    def prompt(self, question: str) -> str:
        """The question about one image in the model's chat template, ending with its generation prompt;
        refused where the template leaves the image out (a text-only template would ask the question
        without it, and every image would score the same)."""
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
        prompt = self._templated(messages)
        # the token the template writes for an image (Gemma 3's processor expands its begin-of-image token)
        marks = [str(m) for m in (getattr(self.processor, n, None) for n in ("image_token", "boi_token")) if m]
        written = max((prompt.count(mark) for mark in marks), default=1)
        if written == 0:
            raise GenerativeModelError(f"model {self.name!r}: its chat template leaves the image out of the question "
                                       f"(no {marks[0]} in {prompt[:200]!r}), so the model would answer without "
                                       "seeing it")
        if written > 1:  # the processor would take one image for two places: refused for every row, not one
            raise GenerativeModelError(f"model {self.name!r}: its chat template writes the image {written} times "
                                       f"for one image ({marks[0]} in {prompt[:200]!r}); one image is asked about")
        if question.strip() and question.strip() not in prompt:
            raise GenerativeModelError(f"model {self.name!r}: its chat template leaves the question out (no "
                                       f"{question.strip()[:80]!r} in {prompt[:200]!r}), so every image would be "
                                       "asked nothing")
        return prompt

    def _templated(self, messages: list[dict[str, Any]]) -> str:
        """The chat template applied (transformers' sandboxed Jinja), within :data:`TEMPLATE_SECONDS` and
        :data:`TEMPLATE_CHARACTERS`: a template is a checkpoint's text, and one that loops for ever, writes
        hundreds of MB or fails (an include, a syntax error, a raise) is said naming it and the model."""
        from vlfair.guards import TimeLimitExceeded, call_with_time_limit

        try:
            prompt = call_with_time_limit(lambda: str(self.processor.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False)), TEMPLATE_SECONDS)
        except TimeLimitExceeded:
            raise GenerativeModelError(f"model {self.name!r}: its chat template ran for more than {TEMPLATE_SECONDS} s "
                                       "on one question (a loop in the template?)") from None
        except MemoryError:
            raise GenerativeModelError(f"model {self.name!r}: its chat template wrote more than memory holds for "
                                       "one question") from None
        except Exception as exc:  # noqa: BLE001  (Jinja's and transformers' errors: the template is the checkpoint's)
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise GenerativeModelError(f"model {self.name!r}: its chat template fails on a question about one image "
                                       f"({type(exc).__name__}: {reason})") from None
        if len(prompt) > TEMPLATE_CHARACTERS:
            raise GenerativeModelError(f"model {self.name!r}: its chat template writes {len(prompt):,} characters "
                                       f"for one question (more than {TEMPLATE_CHARACTERS:,})")
        return prompt

    def prepared(self, question: str, answers: Sequence[str]) -> tuple[str, list[list[int]]]:
        """The question's prompt and each answer's tokens, templated and tokenized once per question
        and answers (a dataset asks every image the same)."""
        key = (question, tuple(answers))
        if key not in self._asked:
            prompt = self.prompt(question)
            self._asked[key] = (prompt, self._answer_tokens(prompt, answers))
        return self._asked[key]

    def _answer_tokens(self, prompt: str, answers: Sequence[str]) -> list[list[int]]:
        """Each answer's token ids as the tokenizer reads them after ``prompt``."""
        tokenizer = self.processor.tokenizer
        prefix = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        found = []
        for answer in answers:
            if not answer.strip():
                raise GenerativeModelError(f"model {self.name!r}: an empty answer has no tokens to score")
            full = tokenizer(prompt + self.separator + answer, add_special_tokens=False)["input_ids"]
            if full[:len(prefix)] != prefix:
                raise GenerativeModelError(f"model {self.name!r}: its tokenizer joins the answer {answer!r} to the "
                                           "end of the question's prompt (the tokens differ at the boundary), so the "
                                           "answer cannot be scored from the prompt's cache")
            found.append(full[len(prefix):])
        return found

    def _inputs(self, image: Any, text: str) -> Any:
        """The processor's tensors for ``text`` about one ``image`` (:meth:`_batch_inputs` of one)."""
        inputs = self._batch_inputs([image], text)
        assert inputs is not None  # one image: nothing to pad
        return inputs

    def _batch_inputs(self, images: Sequence[Any], text: str, check_end: bool = True) -> Any:
        """The processor's tensors for ``text`` about each of ``images`` (one row each), or None where
        their prompts come out of different lengths (the processor padded them: a padded prefix is
        not the prefix one image has alone) or the processor refuses one of several images (asked
        again one by one, the refusal names it).

        Special tokens are added only where the chat template has not put the tokenizer's BOS first
        already (as transformers' apply_chat_template decides); a processor that appends a token
        after the text (an EOS), which would sit between the prompt and every answer, is refused
        (``check_end``: a prompt's opening, whose end the processor may expand, is checked otherwise:
        :meth:`shared_head`)."""
        with self._tokenizing:  # the next batch's are made in a thread (:meth:`_image_batches`)
            return self._locked_batch_inputs(images, text, check_end)

    def _locked_batch_inputs(self, images: Sequence[Any], text: str, check_end: bool) -> Any:
        tokenizer = self.processor.tokenizer
        special = not (tokenizer.bos_token and text.startswith(tokenizer.bos_token))
        try:  # one list per text: the form every family's processor takes (Gemma 3 wants it)
            inputs = self.processor(images=[[image] for image in images], text=[text] * len(images),
                                    return_tensors="pt", padding=True, add_special_tokens=special)
        except ValueError as exc:  # the image's size or shape (the text is every image's)
            if len(images) > 1:
                return None
            from vlfair.imageio import RejectedImageError

            raise RejectedImageError(f"model {self.name!r}: its processor rejects the image ({exc})", 0) from exc
        if len(images) > 1 and not bool(inputs["attention_mask"].all()):
            return None
        if not check_end:
            return inputs.to(self.device)
        if text not in self._last_token:  # every image is asked the same texts: tokenized once
            self._last_token[text] = tokenizer(text, add_special_tokens=False)["input_ids"][-1]
        last = inputs["input_ids"][:, -1]
        if bool((last != self._last_token[text]).any()):
            appended = tokenizer.convert_ids_to_tokens(int(last[last != self._last_token[text]][0]))
            raise GenerativeModelError(f"model {self.name!r}: its processor appends {appended!r} after the text, "
                                       "between the question's prompt and any answer")
        return inputs.to(self.device)

    def _image_batches(self, images: Sequence[Any], text: str, batch_size: int,
                       check_end: bool = True) -> Iterator[tuple[int, Any]]:
        """(position of the first image, the processor's tensors) for ``images`` in batches of up to
        ``batch_size``; a batch the processor cannot take whole (:meth:`_batch_inputs`) goes one image
        at a time. A refused image is named by its position in ``images``.

        The next batch's tensors are made in a thread while the caller runs this one's forwards: the processor
        (resizing and normalising every image, tokenizing every prompt) is host work the device would otherwise
        wait for, as long as a batch's prefix forward on a GPU (a 1.8 B LLaVA at 336 px)."""
        from vlfair.imageio import RejectedImageError

        def prepare(start: int) -> Any:
            part = images[start:start + batch_size]
            return self._batch_inputs(part, text, check_end) if len(part) > 1 else None

        # the first batch is made here; the thread starts with the second (one batch, one image: no thread)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="vlfair-prompts") as ahead:
            coming = None
            for start in range(0, len(images), batch_size):
                inputs = coming.result() if coming is not None else prepare(start)
                coming = ahead.submit(prepare, start + batch_size) if start + batch_size < len(images) else None
                if inputs is not None:
                    yield start, inputs
                    continue
                for offset, image in enumerate(images[start:start + batch_size]):
                    try:
                        single = self._batch_inputs([image], text, check_end)
                    except RejectedImageError as exc:
                        raise RejectedImageError(exc.reason, start + offset) from exc
                    yield start + offset, single

    # ---- scoring -----------------------------------------------------------------------------
    def score(self, image: Any, question: str, answers: Sequence[str], batch_size: int = 32) -> AnswerScores:
        """The log-likelihood of every answer given the image and question (:meth:`log_likelihoods` of one image)."""
        values = self.log_likelihoods([image], question, answers, batch_size)[0]
        return AnswerScores(values, np.array([len(t) for t in self.prepared(question, answers)[1]], dtype=np.int64))

    def log_likelihoods(self, images: Sequence[Any], question: str, answers: Sequence[str],
                        batch_size: int = 32) -> npt.NDArray[np.float64]:
        """The log-likelihood of every answer given each image and the question, (images, answers).

        The prefixes (image and question) of ``batch_size`` images are encoded in one forward pass, and
        every (image, answer) continuation is read on from that batch's cache, ``batch_size`` of them
        per forward pass: the same numbers as one image at a time (float32: to 1e-5), without a forward
        per image. Images whose prompts differ in length (a processor that tiles large images) are
        scored one at a time."""
        return self.log_likelihoods_many(images, [(question, answers)], batch_size)[0]

    @in_asked_precision
    def log_likelihoods_many(self, images: Sequence[Any], asks: Sequence[tuple[str, Sequence[str]]],
                             batch_size: int = 32) -> list[npt.NDArray[np.float64]]:
        """:meth:`log_likelihoods` of each (question, answers) of ``asks`` about the same images, the part
        of the prompt they share (the chat template's opening and the image: most of the prompt's
        tokens, and the vision tower's whole work) encoded once per batch of images and each question's
        remaining tokens read on from its cache (:meth:`shared_head`): the numbers each question gets
        alone. Where the prompts share no such part, each question is asked by itself."""
        import torch

        for _, answers in asks:
            if not answers:
                raise GenerativeModelError(f"model {self.name!r}: no answers to score")
        prepared = [self.prepared(question, answers) for question, answers in asks]
        totals = [np.zeros((len(images), len(answers))) for _, answers in asks]
        for head, members in self._plan([prompt for prompt, _ in prepared], images):
            for start, inputs in self._image_batches(images, head, batch_size,
                                                     check_end=all(not tail for _, tail in members)):
                count, length = inputs["input_ids"].shape
                for ask, tail in members:
                    self._check_context(length + len(tail), max(len(t) for t in prepared[ask][1]),
                                        "the longest answer")
                with torch.no_grad():
                    opening = self.model(**inputs, use_cache=True, **self._last_logits_only())
                    for ask, tail in members:
                        asked = opening if not tail else self.model(  # the question's own tokens, if any
                            input_ids=torch.tensor([tail] * count, dtype=torch.long, device=self.device),
                            use_cache=True, **{_cache_argument(self.model): _forked(_cache_of(opening))})
                        self._answers_from(_cache_of(asked), asked.logits[:, -1], prepared[ask][1], batch_size,
                                           totals[ask][start:start + count])
        return totals

    def _answers_from(self, cache: Any, last_logits: Any, tokens: list[list[int]], batch_size: int,
                      into: npt.NDArray[np.float64]) -> None:
        """Every (image, answer) continuation of a batch whose prompt ends in ``cache`` (its last
        position's logits: ``last_logits``), ``batch_size`` per forward, written into ``into``
        (images, answers)."""
        import torch

        first = torch.log_softmax(last_logits.float(), dim=-1)  # each answer's first token
        if self._packs_answers():
            self._packed_answers(cache, first, tokens, into)
            return
        pairs = [(image, answer) for image in range(into.shape[0]) for answer in range(len(tokens))]
        for at in range(0, len(pairs), batch_size):
            chunk = pairs[at:at + batch_size]
            found = self._continuations(cache, first, [i for i, _ in chunk], [tokens[a] for _, a in chunk])
            for (image, answer), value in zip(chunk, found):
                into[image, answer] = value

    def _packs_answers(self) -> bool:
        """Whether this model's answers can be packed (:data:`PACKED_DECODERS`)."""
        text = getattr(self.model.config, "text_config", None) or self.model.config
        return (text.model_type in PACKED_DECODERS and getattr(text, "sliding_window", None) is None
                and getattr(text, "_attn_implementation", None) in ("sdpa", "eager"))

    def _packed_answers(self, cache: Any, first: Any, tokens: list[list[int]], into: npt.NDArray[np.float64]) -> None:
        """Every answer of every image of a batch in one continuation of the batch's ``cache``: the answers'
        tokens follow the prompt one after another, each placed (position ids) and masked (a 4D mask) as if it
        alone followed the prompt, so each reads the prompt and its own earlier tokens only. The cache is read
        as it is, with no copy of its rows per answer (the answers of a batch of 32 images at 1.8 B parameters
        and 585 prompt tokens had copied 44 GB); the numbers are the chunked path's (:meth:`_continuations`)."""
        into[:] = first[:, [t[0] for t in tokens]].double().cpu().numpy()
        longer = [a for a, t in enumerate(tokens) if len(t) > 1]
        count, prompt = first.shape[0], cache.get_seq_length()
        per_row = max(max((len(tokens[a]) - 1 for a in longer), default=1),  # tokens a group packs per image
                      PACKED_LOGITS // (count * first.shape[-1]))
        groups: list[list[int]] = [[]]
        packed = 0
        for a in longer:  # whole answers, in order, as many as fit
            if packed + len(tokens[a]) - 1 > per_row:
                groups.append([])
                packed = 0
            groups[-1].append(a)
            packed += len(tokens[a]) - 1
        for group in filter(None, groups):
            into[:, group] += self._packed_group(cache, prompt, count, [tokens[g] for g in group])

    def _packed_group(self, cache: Any, prompt: int, count: int, tokens: list[list[int]]) -> np.ndarray:
        """(images, answers): each answer's log-probability after its first token, read on from ``cache``."""
        import torch

        owner = torch.tensor([k for k, t in enumerate(tokens) for _ in t[:-1]])
        step = torch.tensor([j for t in tokens for j in range(len(t) - 1)])
        packed = len(owner)
        # a packed token sees the whole prompt (never padded: _batch_inputs) and its own answer's earlier tokens
        sees = torch.cat([torch.ones(packed, prompt, dtype=torch.bool),
                          (owner[:, None] == owner[None, :]) & (step[None, :] <= step[:, None])], dim=1)
        mask = torch.zeros(sees.shape, dtype=self.dtype).masked_fill(~sees, torch.finfo(self.dtype).min)
        ids = torch.tensor([token for t in tokens for token in t[:-1]], device=self.device)
        positions = (prompt + step).to(self.device)
        out = self.model(input_ids=ids.expand(count, packed), position_ids=positions.expand(count, packed),
                         attention_mask=mask.to(self.device)[None, None].expand(count, 1, packed, prompt + packed),
                         use_cache=True, **{_cache_argument(self.model): _forked(cache)})
        logs = torch.log_softmax(out.logits.float(), dim=-1)  # (images, packed, vocab)
        following = torch.tensor([token for t in tokens for token in t[1:]], device=logs.device)
        found = logs.gather(2, following.expand(count, packed)[:, :, None])[:, :, 0].double()
        sums = torch.zeros(count, len(tokens), dtype=torch.float64, device=found.device)
        return sums.index_add_(1, owner.to(found.device), found).cpu().numpy()

    def _plan(self, prompts: list[str], images: Sequence[Any]) -> list[tuple[str, list[tuple[int, list[int]]]]]:
        """How the prompts are encoded: [(the text encoded with the image, [(prompt's index, the token ids
        read on after it)])]: one opening shared by every prompt (:meth:`shared_head`), or each distinct
        prompt whole (a prompt asked twice is encoded once)."""
        distinct = list(dict.fromkeys(prompts))
        shared = self.shared_head(distinct, images[0]) if len(distinct) > 1 and len(images) else None
        if shared is None:
            return [(prompt, [(index, []) for index, asked in enumerate(prompts) if asked == prompt])
                    for prompt in distinct]
        head, tails = shared
        tail_of = dict(zip(distinct, tails))
        return [(head, [(index, tail_of[prompt]) for index, prompt in enumerate(prompts)])]

    def shared_head(self, prompts: Sequence[str], image: Any) -> tuple[str, list[list[int]]] | None:
        """The opening of ``prompts`` (their chat template's text up to and with the image) that the
        processor encodes into exactly the first tokens of each prompt, and each prompt's token ids
        after it; None where there is none (the prompts part before the image ends, or the tokenizer
        reads the boundary differently in each). Checked once per set of prompts against the
        processor's own encoding of each prompt with ``image``: a head that would change one token of
        one prompt is not used."""
        key = tuple(prompts)
        if key not in self._heads:
            self._heads[key] = self._find_head(list(prompts), image)
        return self._heads[key]

    def _find_head(self, prompts: list[str], image: Any) -> tuple[str, list[list[int]]] | None:
        tokenizer = self.processor.tokenizer
        common = os.path.commonprefix(prompts)
        marks = [str(m) for m in (getattr(self.processor, n, None) for n in ("image_token", "boi_token")) if m]
        image_end = max((prompts[0].rfind(mark) + len(mark) for mark in marks if mark in prompts[0]), default=-1)
        if image_end < 0 or len(common) < image_end:
            return None
        full = [tokenizer(prompt, add_special_tokens=False)["input_ids"] for prompt in prompts]
        # cut where the tokenizer agrees: the common text itself, else at a space back towards the image
        cuts = [len(common)] + [at for at in range(len(common) - 1, image_end - 1, -1)
                                if common[at].isspace() or common[at - 1].isspace()][:HEAD_CUTS]
        for cut in dict.fromkeys(cuts):
            head = common[:cut]
            ids = tokenizer(head, add_special_tokens=False)["input_ids"]
            if all(tokens[:len(ids)] == ids for tokens in full) and self._encodes_alike(head, prompts, full, len(ids),
                                                                                       image):
                return head, [tokens[len(ids):] for tokens in full]
        return None

    def _encodes_alike(self, head: str, prompts: list[str], full: list[list[int]], head_tokens: int,
                       image: Any) -> bool:
        """Whether the processor's tokens for ``head`` with ``image``, followed by each prompt's remaining
        tokens, are its tokens for that prompt whole (an image expanded alike, nothing appended)."""
        try:
            opening = self._batch_inputs([image], head, check_end=False)
            if opening is None:
                return False
            start = opening["input_ids"][0].tolist()
            for prompt, tokens in zip(prompts, full):
                whole = self._batch_inputs([image], prompt, check_end=False)
                if whole is None or whole["input_ids"][0].tolist() != start + tokens[head_tokens:]:
                    return False
                if not _other_token_inputs_alike(opening, whole):
                    return False
        except Exception:  # noqa: BLE001  (an image or template the processor refuses: asked whole, it is named)
            return False
        return True

    def _check_context(self, prompt_tokens: int, more: int, what: str) -> None:
        """The prompt and ``more`` tokens after it (the longest answer scored, or max_new_tokens generated) fit
        the model's context: past it, a model reads positions it never learned and answers or scores garbage."""
        limit = getattr(self.model.config.get_text_config(), "max_position_embeddings", None)
        if limit is not None and prompt_tokens + more > limit:
            raise GenerativeModelError(f"model {self.name!r}: the prompt ({prompt_tokens} tokens) and {what} ({more}) "
                                       f"exceed its context of {limit} tokens")

    def _continuations(self, cache: Any, first: Any, images: list[int], tokens: list[list[int]]) -> np.ndarray:
        """The summed log-probabilities of answers (right-padded to one length), each read on from the
        cache of its image (``images[k]``: a row of the batch ``cache`` and ``first`` hold)."""
        import torch

        width = max(len(t) for t in tokens)
        pad = self._pad_id or 0
        ids = torch.tensor([t + [pad] * (width - len(t)) for t in tokens], device=self.device)
        present = torch.tensor([[1] * len(t) + [0] * (width - len(t)) for t in tokens], device=self.device)
        rows = torch.tensor(images, device=first.device)
        totals = first[rows, ids[:, 0].to(first.device)].double().to(self.device)
        if width > 1:
            # no attention mask: the padding follows each answer's tokens, so causal attention never
            # lets a real token see it (and a mask over prefix + answers would make models that
            # derive positions from it, as Qwen2-VL's M-RoPE, read the prefix's length as new tokens)
            with _rows_of(self.model, cache, rows) as selected:
                out = self.model(input_ids=ids[:, :-1], use_cache=True, **{_cache_argument(self.model): selected})
            logs = torch.log_softmax(out.logits.float(), dim=-1)  # (answers, width - 1, vocab)
            following = logs.gather(2, ids[:, 1:, None])[:, :, 0].double() * present[:, 1:]
            totals = totals + following.sum(dim=1)
        return totals.cpu().numpy()

    def generate(self, image: Any, question: str, max_new_tokens: int = 16) -> str:
        """The model's own answer to ``question`` about ``image`` (:meth:`generate_many` of one image)."""
        return self.generate_many([image], question, max_new_tokens)[0]

    def generate_many(self, images: Sequence[Any], question: str, max_new_tokens: int = 16,
                      batch_size: int = 32) -> list[str]:
        """The model's own answer to ``question`` about each image: greedy decoding of at most
        ``max_new_tokens`` tokens, special tokens left out (the open-ended mode); ``batch_size`` images
        decoded together where their prompts are of one length (no padding: the same answers as one
        image at a time)."""
        return self.generate_questions(images, [question], max_new_tokens, batch_size)[0]

    @in_asked_precision
    def generate_questions(self, images: Sequence[Any], questions: Sequence[str], max_new_tokens: int = 16,
                           batch_size: int = 32) -> list[list[str]]:
        """:meth:`generate_many` of each of ``questions`` about the same images, the prompts' shared opening
        encoded once per batch of images and each question decoded on from a fork of its cache
        (:meth:`shared_head`, as :meth:`log_likelihoods_many`): the answers each question gets alone."""
        import torch

        prompts = [self.prepared(question, ())[0] for question in questions]  # templated once per question
        answers = [[""] * len(images) for _ in questions]
        for head, members in self._plan(prompts, images):
            whole = all(not tail for _, tail in members)
            for start, inputs in self._image_batches(images, head, batch_size, check_end=whole):
                count, length = inputs["input_ids"].shape
                for _, tail in members:
                    self._check_context(length + len(tail), max_new_tokens, "max_new_tokens")
                if whole:  # one prompt (however many times asked): decoded once
                    self._decode(dict(inputs), max_new_tokens, start, answers[members[0][0]])
                    for ask, _ in members[1:]:
                        answers[ask][start:start + count] = answers[members[0][0]][start:start + count]
                    continue
                with torch.no_grad():
                    opening = self.model(**inputs, use_cache=True, **self._last_logits_only())
                for ask, tail in members:
                    if not tail:  # a prompt that is the opening itself: generate() needs a token to start from
                        self._decode(dict(inputs), max_new_tokens, start, answers[ask])
                        continue
                    more = torch.tensor([tail] * count, dtype=torch.long, device=self.device)
                    ids = torch.cat([inputs["input_ids"], more], dim=1)
                    self._decode({"input_ids": ids, "attention_mask": torch.ones_like(ids),
                                  _cache_argument(self.model): _forked(_cache_of(opening))},
                                 max_new_tokens, start, answers[ask])
        return answers

    def _last_logits_only(self) -> dict[str, int]:
        """The argument that makes a prompt's forward compute its last position's logits only (what is read of
        them), where the model takes it: all positions' would be images x tokens x vocabulary (gigabytes)."""
        import inspect

        return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(self.model.forward).parameters else {}

    def _decode(self, inputs: dict[str, Any], max_new_tokens: int, start: int, into: list[str]) -> None:
        """Greedy decoding of one batch of images (``inputs``: the prompt's tensors, and the cache of its opening
        where it was encoded before), each answer's text written into ``into`` from position ``start``."""
        import torch
        from transformers import LogitsProcessorList

        watch = _NonFiniteLogits()
        with torch.no_grad():
            made = self.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                                       pad_token_id=self._pad_id,
                                       logits_processor=LogitsProcessorList([watch]))
        prompt_length = inputs["input_ids"].shape[1]
        if watch.step is not None:  # greedy decoding picks a token from NaN scores too: the answers are noise
            dtype = str(self.dtype).removeprefix("torch.")
            advice = ("its weights hold a NaN or an infinity?" if dtype == "float32" else
                      "load it in float32 (--dtype float32)")
            rows = f"images {start} to {start + inputs['input_ids'].shape[0] - 1}"
            raise GenerativeModelError(
                f"model {self.name!r}: its logits came out NaN or infinite at answer token {watch.step + 1} "
                f"({rows} of this question), in {dtype}: the answers would be noise, not too short; {advice}")
        with self._tokenizing:
            for row, new in enumerate(made[:, prompt_length:]):
                into[start + row] = str(self.processor.tokenizer.decode(new, skip_special_tokens=True)).strip()

    @in_asked_precision
    def score_by_full_forward(self, image: Any, question: str, answers: Sequence[str]) -> AnswerScores:
        """The same numbers, one full forward per answer: the reference the prefix-shared path must equal."""
        import torch

        prompt, tokens = self.prepared(question, answers)
        totals = []
        with torch.no_grad():
            for answer, answer_tokens in zip(answers, tokens):
                inputs = self._inputs(image, prompt + self.separator + answer)
                logs = torch.log_softmax(self.model(**inputs).logits[0].float(), dim=-1)
                ids = inputs["input_ids"][0]
                n = len(answer_tokens)
                positions = torch.arange(ids.shape[0] - n, ids.shape[0], device=self.device)
                totals.append(float(logs[positions - 1, ids[positions]].double().sum()))
        return AnswerScores(np.array(totals), np.array([len(t) for t in tokens], dtype=np.int64))


def _other_token_inputs_alike(opening: Any, whole: Any) -> bool:
    """Whether the processor's per-token inputs other than the ids and the attention mask (Gemma 3's
    ``token_type_ids``, mllama's ``cross_attention_mask``...) are, for the whole prompt, the opening's followed
    by zeros: what a continuation given only ids assumes. Where they say more of the question's tokens (a
    prefix-LM's attention, text attending to the image), the opening is not shared."""
    ids = whole["input_ids"]
    length = opening["input_ids"].shape[1]
    for key, value in whole.items():
        if key in ("input_ids", "attention_mask") or not hasattr(value, "shape") or value.shape[:2] != ids.shape:
            continue
        head = opening.get(key)
        if head is None or not bool((value[:, :length] == head).all()) or bool(value[:, length:].any()):
            return False
    return True


def _cache_argument(model: Any) -> str:
    """The keyword a model's forward takes its key-value cache by: ``cache`` since transformers 5.2x
    (which warns on the older name), ``past_key_values`` before."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _cache_of(output: Any) -> Any:
    """A forward's key-value cache, by its name in this transformers (``cache``, or ``past_key_values``
    before 5.2x: reading the old name warns in newer ones)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def _forked(cache: Any) -> Any:
    """``cache`` for a continuation that must leave it as it is (the opening every question of a batch reads on
    from): its structure copied, not its tensors. transformers' dynamic layers (full and sliding-window) take
    new tokens by concatenation, a new tensor bound to the copy's layer, so the opening's own tensors are never
    written and its memory is not held twice; any other layer (a static cache's writes in place) is copied
    whole."""
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    forked = copy.copy(cache)
    forked.layers = [copy.copy(layer) if type(layer) in (DynamicLayer, DynamicSlidingWindowLayer)
                     else copy.deepcopy(layer) for layer in cache.layers]
    return forked


# A model's state that holds one row per image of its last prefix forward, beside the key-value cache:
# Qwen2-VL keeps each image's M-RoPE offset (``rope_deltas``) to place the tokens that follow.
_PER_IMAGE_STATE = ("rope_deltas",)


@contextlib.contextmanager
def _rows_of(model: Any, cache: Any, rows: Any) -> Iterator[Any]:
    """``cache`` with its batch rows ``rows`` (an image's row repeated for each of its answers), and
    the model's per-image state (:data:`_PER_IMAGE_STATE`) selected alike while the continuation runs.
    The cache's tensors are indexed, never changed: the batch's cache serves every chunk of answers."""
    selected = copy.copy(cache)
    selected.layers = [copy.copy(layer) for layer in cache.layers]
    selected.batch_select_indices(rows)  # each layer's keys and values replaced by their rows (a new tensor)
    saved = []
    for owner in (model, getattr(model, "model", None)):
        for name in _PER_IMAGE_STATE:
            value = getattr(owner, name, None) if owner is not None else None
            if value is not None and hasattr(value, "index_select"):
                saved.append((owner, name, value))
                setattr(owner, name, value.index_select(0, rows.to(value.device)))
    try:
        yield selected
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def load_lvlm(ref: str, *, device: Any = "auto", dtype: Any = "auto", revision: str | None = None,
              trust_remote_code: bool = False, use_safetensors: bool = True,
              spec: str | None = None) -> GenerativeScorer:
    """The ``lvlm:`` backend of :func:`vlfair.models.load_encoder` (its arguments)."""
    from vlfair.models.base import pick_device, pick_dtype

    if trust_remote_code:
        raise GenerativeModelError(f"model {ref!r}: lvlm: loads transformers' own classes only (no remote code)")
    import torch

    device_map = placement(device, torch.cuda.device_count(), int(os.environ.get("WORLD_SIZE", "1")))
    device = pick_device(device)
    return GenerativeScorer.load(spec or f"lvlm:{ref}", dtype=pick_dtype(dtype, device), device=device,
                                 revision=revision, use_safetensors=use_safetensors, device_map=device_map)


def placement(device: Any, gpus: int, processes: int) -> str | None:
    """``"auto"`` (Accelerate spreads the model's layers over every GPU, so a model larger than one GPU
    loads) where one process sees several GPUs and the device was left to vlfair; None (the whole model
    on one device) under torchrun, which gives each process a GPU of its own, or on one GPU."""
    return "auto" if str(device) == "auto" and gpus > 1 and processes == 1 else None


__all__ = ["AnswerScores", "GenerativeModelError", "GenerativeScorer", "load_lvlm", "match_answer", "normalized",
           "placement"]
