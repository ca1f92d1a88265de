"""One scorer interface under every probe that matches images with texts: s(image, text).

A contrastive encoder gives the cosine of the two embeddings (cached embeddings: as fast as
before); a generative model (``lvlm:``) gives the log-likelihood of the text as its answer to the
probe's question about the image (cached like embeddings), or, in the open-ended mode, its own
greedy answer mapped to a candidate. Either way a probe reads :class:`TextScores`: the scores, the
probabilities across the texts (the study's softmax; a sigmoid model's per-pair probability), the
best text of each image, and the rows whose answer matched no text.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from vlfair.imageio import RejectedImageError
from vlfair.matching import match_answer, normalized
from vlfair.probes.settings import Count, Flag, Settings, Text

if TYPE_CHECKING:
    from vlfair.probes.base import Context


class Answering(Settings):
    """How a generative model's answers are read (every probe's ``generative`` section, with its question
    or questions: :class:`Asking`).

    ``likelihood``: each candidate answer's log-likelihood given the image and question (summed over
    its tokens; per token with ``normalize_length``, as lm-evaluation-harness's acc_norm).
    ``generate``: the model's own greedy answer (at most ``max_new_tokens`` tokens) mapped to the
    candidate it names (:func:`match_answer`); rows whose answer names none are left out and counted.
    """

    normalize_length: Flag = Field(False, description="compare answers by log-likelihood per token")
    mode: Literal["likelihood", "generate"] = Field(
        "likelihood", description="likelihood: score every candidate answer; generate: the model's own answer, "
                                  "matched to a candidate")
    max_new_tokens: Count = Field(16, description="generate: the longest answer read, in tokens")


class Asking(Answering):
    """One question put to the model about each image."""

    question: Text = Field(description="the question put to the model about each image")


@dataclasses.dataclass(frozen=True)
class TextScores:
    """s(image, text) for the readable images (``rows``) and the texts, with its meaning.

    ``values``: the cosine (contrastive), the log-likelihood (generative), or 1 for the answer
    given and 0 for the others (generated: nan where the answer named no text, ``matched`` False).
    ``probabilities``: per image across the texts: the encoder's softmax (or per-pair sigmoid), the
    answers' renormalised probabilities, or the answer given.
    """

    values: np.ndarray         # (images, texts)
    probabilities: np.ndarray  # (images, texts)
    rows: np.ndarray           # the dataset rows of the images
    kind: str                  # "cosine", "log_likelihood" or "generated"
    matched: np.ndarray        # (images,) bool: False where a generated answer named no text

    def best(self) -> np.ndarray:
        """Each image's highest-scoring text (its index; -1 where its generated answer named none)."""
        best = np.argmax(np.where(np.isnan(self.values), -np.inf, self.values), axis=1)
        return np.where(self.matched, best, -1)


def text_scores(ctx: Context, texts: list[str], asked: Answering | None = None, answers: list[str] | None = None,
                question: str | None = None, within: np.ndarray | None = None) -> TextScores:
    """s(image, text) of ``ctx``'s model for every readable image (``within``: of those dataset rows
    only, all readable) and each of ``texts``.

    A contrastive encoder embeds ``texts``; a generative model is asked ``question`` (default
    ``asked.question``) with ``answers`` (default ``texts``) as the candidates, as ``asked`` says.
    """
    if within is not None and ctx.generative:  # ask only these images (a model's forward per image is dear)
        # its rows map through ``within``; nothing asked of the whole data is this part's
        part = dataclasses.replace(ctx, dataset=ctx.dataset.select(np.asarray(within).tolist()), unmatched={},
                                   _unmatched_ids=set(), _answered={}, source_rows=None)
        try:
            found = text_scores(part, texts, asked, answers, question)
        except RejectedImageError as exc:  # named by its row in the subset: name the dataset's
            if exc.row is None:
                raise
            raise exc.at(int(np.asarray(within)[exc.row])) from exc
        for asked_question, (none, total) in part.unmatched.items():
            before = ctx.unmatched.get(asked_question, (0, 0))
            ctx.unmatched[asked_question] = (before[0] + none, before[1] + total)
        ctx._unmatched_ids.update(part._unmatched_ids)
        return dataclasses.replace(found, rows=np.asarray(within)[found.rows])
    if not ctx.generative:
        images, rows = ctx.images()
        if within is not None:
            positions = np.searchsorted(rows, within)
            images, rows = images[positions], rows[positions]
        text = ctx.texts(texts)
        values = (images @ text.T).astype(np.float64)
        probabilities = np.asarray(ctx.encoder.probabilities(images, text), dtype=np.float64)
        return TextScores(values, probabilities, rows, "cosine", np.ones(len(rows), dtype=bool))
    if asked is None:
        raise ValueError("a generative model is asked: give the probe's generative section")
    answers = list(texts if answers is None else answers)
    if question is None:
        if not isinstance(asked, Asking):
            raise ValueError("a generative model is asked: give the question")
        question = asked.question
    if asked.mode == "generate":
        chosen, rows = ctx.generated_answers(question, answers, asked.max_new_tokens)
        matched = chosen >= 0
        values = np.full((len(rows), len(answers)), np.nan)
        values[matched] = 0.0
        values[np.flatnonzero(matched), chosen[matched]] = 1.0
        return TextScores(values, values.copy(), rows, "generated", matched)
    scores, rows = ctx.answer_scores(question, answers)
    if asked.normalize_length:
        lengths = np.array([len(t) for t in ctx.encoder.prepared(question, answers)[1]], dtype=float)
        scores = scores / lengths
    shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
    return TextScores(scores, shifted / shifted.sum(axis=1, keepdims=True), rows, "log_likelihood",
                      np.ones(len(rows), dtype=bool))


__all__ = ["Answering", "Asking", "TextScores", "match_answer", "normalized", "text_scores"]
