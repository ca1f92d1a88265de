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
"""

from __future__ import annotations

import dataclasses
import os
import re
import unicodedata
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt


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
        # where the inputs go: the token embeddings' device (the first of several under device_map="auto")
        self.device = model.get_input_embeddings().weight.device
        self._asked: dict[tuple[str, tuple[str, ...]], tuple[str, list[list[int]]]] = {}
        self._last_token: dict[str, int] = {}

    def identity(self) -> dict[str, Any]:
        """What makes two scorers give the same scores (the cache key's model part)."""
        return {"spec": self.name, "revision": self.revision,
                "dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."), "separator": self.separator}

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

        from vlfair.models.hub import resolve_model

        name = spec.removeprefix("lvlm:")
        # a local directory, the Hub cache, or a download, as encoders load
        resolved = resolve_model(name, revision, use_safetensors=use_safetensors)
        config = AutoConfig.from_pretrained(resolved.path)
        if type(config) not in AutoModelForImageTextToText._model_mapping:
            raise GenerativeModelError(f"model {name!r} is a {type(config).__name__.removesuffix('Config')} model, "
                                       "not a generative vision-language model (AutoModelForImageTextToText does not "
                                       "load it); give a contrastive encoder without lvlm:")
        from vlfair.logging import library_progress_bars

        # pickled weights only on request, as for encoders (transformers refuses them with this flag)
        with library_progress_bars("transformers.utils.logging"):  # its "Loading weights" bar: --verbose only
            model = AutoModelForImageTextToText.from_pretrained(resolved.path, dtype=dtype or torch.float32,
                                                                use_safetensors=use_safetensors or None,
                                                                device_map=device_map)
        model.eval()
        if device is not None and device_map is None:
            model.to(device)
        return cls(model, AutoProcessor.from_pretrained(resolved.path), spec, revision=resolved.revision)

    # ---- text --------------------------------------------------------------------------------
    def prompt(self, question: str) -> str:
        """The question about one image in the model's chat template, ending with its generation prompt;
        refused where the template leaves the image out (a text-only template would ask the question
        without it, and every image would score the same)."""
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
        prompt = str(self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
        # the token the template writes for an image (Gemma 3's processor expands its begin-of-image token)
        marks = [str(m) for m in (getattr(self.processor, n, None) for n in ("image_token", "boi_token")) if m]
        if marks and not any(mark in prompt for mark in marks):
            raise GenerativeModelError(f"model {self.name!r}: its chat template leaves the image out of the question "
                                       f"(no {marks[0]} in {prompt!r}), so the model would answer without seeing it")
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
        """The processor's tensors for ``text`` about ``image``: special tokens added only where the chat
        template has not put the tokenizer's BOS first already (as transformers' apply_chat_template
        decides), and refused where the processor appends a token after the text (an EOS), which would
        sit between the prompt and every answer."""
        tokenizer = self.processor.tokenizer
        special = not (tokenizer.bos_token and text.startswith(tokenizer.bos_token))
        try:
            inputs = self.processor(images=image, text=text, return_tensors="pt", add_special_tokens=special)
        except ValueError as exc:  # the image's size or shape (the text is every image's)
            from vlfair.imageio import RejectedImageError

            raise RejectedImageError(f"model {self.name!r}: its processor rejects the image ({exc})") from exc
        if text not in self._last_token:  # every image is asked the same texts: tokenized once
            self._last_token[text] = tokenizer(text, add_special_tokens=False)["input_ids"][-1]
        if int(inputs["input_ids"][0, -1]) != self._last_token[text]:
            appended = tokenizer.convert_ids_to_tokens(int(inputs["input_ids"][0, -1]))
            raise GenerativeModelError(f"model {self.name!r}: its processor appends {appended!r} after the text, "
                                       "between the question's prompt and any answer")
        return inputs.to(self.device)

    # ---- scoring -----------------------------------------------------------------------------
    def score(self, image: Any, question: str, answers: Sequence[str], batch_size: int = 32) -> AnswerScores:
        """The log-likelihood of every answer given the image and question: the prefix encoded once, the answers
        scored from its cache in batches of ``batch_size``."""
        import torch

        if not answers:
            raise GenerativeModelError(f"model {self.name!r}: no answers to score")
        prompt, tokens = self.prepared(question, answers)
        inputs = self._inputs(image, prompt)
        limit = getattr(self.model.config.get_text_config(), "max_position_embeddings", None)
        longest = max(len(t) for t in tokens)
        if limit is not None and inputs["input_ids"].shape[1] + longest > limit:
            raise GenerativeModelError(f"model {self.name!r}: the prompt ({inputs['input_ids'].shape[1]} tokens) and "
                                       f"the longest answer ({longest}) exceed its context of {limit} tokens")
        totals = np.zeros(len(answers))
        with torch.no_grad():
            prefix = self.model(**inputs, use_cache=True)
            first = torch.log_softmax(prefix.logits[0, -1].float(), dim=-1)  # each answer's first token
            for start in range(0, len(answers), batch_size):
                chunk = tokens[start:start + batch_size]
                totals[start:start + len(chunk)] = self._continuations(prefix.past_key_values, first, chunk)
        return AnswerScores(totals, np.array([len(t) for t in tokens], dtype=np.int64))

    def _continuations(self, cache: Any, first: Any, tokens: list[list[int]]) -> np.ndarray:
        """The summed log-probabilities of answers (right-padded to one length) read on from ``cache``."""
        import copy

        import torch

        width = max(len(t) for t in tokens)
        pad = self.processor.tokenizer.pad_token_id or 0
        ids = torch.tensor([t + [pad] * (width - len(t)) for t in tokens], device=self.device)
        present = torch.tensor([[1] * len(t) + [0] * (width - len(t)) for t in tokens], device=self.device)
        totals = first[ids[:, 0]].double()
        if width > 1:
            repeated = copy.deepcopy(cache)
            repeated.batch_repeat_interleave(len(tokens))
            # no attention mask: the padding follows each answer's tokens, so causal attention never
            # lets a real token see it (and a mask over prefix + answers would make models that
            # derive positions from it, as Qwen2-VL's M-RoPE, read the prefix's length as new tokens)
            with warnings.catch_warnings():  # transformers 5.2x renames past_key_values to cache (5.0 has only it)
                warnings.filterwarnings("ignore", message=".*past_key_values.*deprecated", category=FutureWarning)
                out = self.model(input_ids=ids[:, :-1], past_key_values=repeated, use_cache=True)
            logs = torch.log_softmax(out.logits.float(), dim=-1)  # (answers, width - 1, vocab)
            following = logs.gather(2, ids[:, 1:, None])[:, :, 0].double() * present[:, 1:]
            totals = totals + following.sum(dim=1)
        return totals.cpu().numpy()

    def generate(self, image: Any, question: str, max_new_tokens: int = 16) -> str:
        """The model's own answer to ``question`` about ``image``: greedy decoding of at most
        ``max_new_tokens`` tokens, special tokens left out (the open-ended mode)."""
        import torch

        inputs = self._inputs(image, self.prepared(question, ())[0])  # the prompt, templated once per question
        with torch.no_grad():
            made = self.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                                       pad_token_id=self.processor.tokenizer.pad_token_id)
        new = made[0, inputs["input_ids"].shape[1]:]
        return str(self.processor.tokenizer.decode(new, skip_special_tokens=True)).strip()

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


_ARTICLES = re.compile(r"^(?:a|an|the)\s+")


def normalized(text: str) -> str:
    """Text as answers are matched: Unicode-compatible form, case folded, punctuation dropped (letters
    of every script kept), spaces collapsed, a leading English article dropped."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(c if c.isalnum() or c.isspace() else " " for c in text)
    return _ARTICLES.sub("", " ".join(text.split()))


def match_answer(answer: str, candidates: list[str]) -> int:
    """The candidate a generated answer names, or -1: the candidate equal to the whole answer once
    both are :func:`normalized`, else the one candidate the answer contains as whole words (the
    longest where one contains another: "dishonest" over "honest"); -1 where none, or where two
    unrelated candidates both appear (the answer names no single one)."""
    said = normalized(answer)
    forms = [normalized(c) for c in candidates]
    if said in forms:
        return forms.index(said)
    found = [j for j, form in enumerate(forms) if form and _contains(said, form)]
    # a candidate inside a longer one found too ("honest" in "dishonest" does not count: whole words;
    # "player" in "tennis player" does) is the longer one's part, not a second answer
    found = [j for j in found if not any(k != j and _contains(forms[k], forms[j]) for k in found)]
    return found[0] if len(found) == 1 else -1


def _contains(text: str, words: str) -> bool:
    """``words`` in ``text`` as whole words; in a script written without spaces (Chinese, Japanese),
    as characters."""
    if any(unicodedata.east_asian_width(c) == "W" for c in words):
        return words in text
    return f" {words} " in f" {text} "


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
