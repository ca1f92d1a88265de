"""One scorer interface under every probe that matches images with texts: s(image, text).

A contrastive encoder gives the cosine of the two embeddings (cached embeddings: as fast as
before); a generative model (``lvlm:``) gives the log-likelihood of the text as its answer to the
probe's question about the image (cached like embeddings), or, in the open-ended mode, its own
greedy answer mapped to a candidate. Either way a probe reads :class:`TextScores`: the scores, the
probabilities across the texts (the study's softmax; a sigmoid model's per-pair probability), the
best text of each image, and the rows whose answer matched no text (``Context.text_scores`` gives
them, whichever the model's kind).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np
from pydantic import Field

from vlfair.matching import match_answer, normalized
from vlfair.probes.settings import Count, Flag, Settings, Text


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
        """Each image's highest-scoring text (its index; -1 where its generated answer named none): of the
        texts tied with the best (:mod:`vlfair.measures.ties`), the first."""
        from vlfair.measures.ties import best_index

        return np.where(self.matched, best_index(self._decided()), -1)

    def best_credit(self, correct: np.ndarray) -> np.ndarray:
        """Each image's top-1 result against ``correct`` ((images, texts) booleans, or broadcast to them):
        1 or 0, or the share of correct texts among those tied with the best (the expected value under
        random tie-breaking, :func:`vlfair.measures.ties.best_credit`); 0 where a generated answer named
        none (the run leaves those images out)."""
        from vlfair.measures.ties import best_credit

        return np.where(self.matched, best_credit(self._decided(), correct), 0.0)

    def _decided(self) -> np.ndarray:
        """The values a best text is taken on: a generated answer's nan (it named none) below every text."""
        return np.where(np.isnan(self.values), -np.inf, self.values)


__all__ = ["Answering", "Asking", "TextScores", "match_answer", "normalized"]
