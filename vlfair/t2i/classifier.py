"""Zero-shot group classification of generated images with any vlfair encoder."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

import numpy as np
import yaml
from PIL import Image

from vlfair.measures.ties import best_index, reaches

NO_PERSON = "no_person"


class GroupClassifier:
    """Label each image with the group whose prompt it matches best, or ``no_person``.

    ``crop``: an optional hook (e.g. a person or face detector) returning the region to classify,
    or None when the image shows nobody. Without it the whole image is classified.

    ``asks``: whether the model is asked ``question`` about each image, the texts its candidate answers (a
    generative model, ``lvlm:``: its scorer's ``asks``, which word influence passes), the group the most likely
    answer (``min_similarity``, a cosine, does not apply); otherwise it embeds the images and texts. None: it is
    asked where it answers questions (``log_likelihoods``) and embeds no text.

    ``phrasings``: other phrasings of the groups' texts, each a template with ``{}`` where a group's text goes
    (the no-person text stays itself); ``questions``: other phrasings of a generative model's question. Each
    question with each phrasing of the texts is one way of classifying (:attr:`ways`, the question with the
    texts themselves first); :meth:`every_phrasing` labels images every way, each image encoded once.
    """

    def __init__(self, encoder: Any, groups: dict[str, str] | None = None, no_person: str | None = None,
                 min_similarity: float | None = None, crop: Callable[[Image.Image], Image.Image | None] | None = None,
                 question: str = "what is this a photo of ?", phrasings: Sequence[str] = (),
                 questions: Sequence[str] = (), asks: bool | None = None):
        if groups is None:  # the study's classifier texts; no_person and min_similarity stay the caller's if given
            settings = yaml.safe_load(resources.files("vlfair.t2i").joinpath("groups.yaml").read_text())
            groups = settings["groups"]
            no_person = settings["no_person"] if no_person is None else no_person
            min_similarity = settings["min_similarity"] if min_similarity is None else min_similarity
        if len(groups) < 2:
            raise ValueError(f"a group classifier needs at least 2 groups, got {list(groups)}")
        self.encoder, self.groups, self.crop = encoder, dict(groups), crop
        self.no_person, self.min_similarity = no_person, min_similarity
        self.question = question
        self.asks = asks if asks is not None else (hasattr(encoder, "log_likelihoods")
                                                   and not hasattr(encoder, "encode_texts"))
        if questions and not self.asks:
            raise ValueError("a contrastive encoder is asked no question: other questions are a generative model's")
        # each way: a question (a generative model's) and the texts of one phrasing, the no-person text unphrased
        self.ways = [(asked, [template.format(text) for text in self.groups.values()]
                      + ([no_person] if no_person else []))
                     for asked in [question, *questions] for template in ["{}", *phrasings]]
        self.prompts = self.ways[0][1]
        # an encoder's texts embedded once (each image is then one product per way); a model asked scores them
        self.texts = [] if self.asks else [encoder.encode_texts(prompts) for _, prompts in self.ways]
        self.labels = list(self.groups) + ([NO_PERSON] if no_person else [])

    def __call__(self, images: Sequence[Image.Image]) -> list[str]:
        return self.every_phrasing(images)[0]

    def every_phrasing(self, images: Sequence[Image.Image]) -> list[list[str]]:
        """Each image's label each way (:attr:`ways`): the groups' texts first, then each other phrasing."""
        crops = [self.crop(im) if self.crop else im for im in images]
        present = [i for i, c in enumerate(crops) if c is not None]
        found = [[NO_PERSON] * len(images) for _ in self.ways]
        if not present:
            return found
        shown = [c for c in crops if c is not None]
        similarities = self._answer_scores(shown) if self.asks else self._cosines(shown)
        for labels, similarity in zip(found, similarities):
            # one label per image (word influence counts whole images): of the texts tied with the best
            # (vlfair.measures.ties), the first, and a best within the tolerance of min_similarity reaches it
            best = best_index(similarity)
            shown_person = (np.ones(len(present), dtype=bool) if self.min_similarity is None or self.asks
                            else reaches(similarity[:, :len(self.groups)].max(axis=1), self.min_similarity))
            for row, i in enumerate(present):
                labels[i] = self.labels[best[row]] if shown_person[row] else NO_PERSON
        return found

    def _cosines(self, shown: list[Image.Image]) -> list[np.ndarray]:
        """Each way's (images, texts) cosines of the images with its texts."""
        embedded = self.encoder.encode_images(shown)
        return [embedded @ text.T for text in self.texts]

    def _answer_scores(self, shown: list[Image.Image]) -> list[np.ndarray]:
        """Each way's (images, texts) log-likelihoods of its texts as the answers to its question: each
        question's answers (every phrasing's) at once."""
        asks = [(asked, list(dict.fromkeys(a for question, texts in self.ways if question == asked for a in texts)))
                for asked in dict.fromkeys(question for question, _ in self.ways)]
        many = getattr(self.encoder, "log_likelihoods_many", None)  # the image read once for every question
        answered = many(shown, asks) if many and len(asks) > 1 else [
            self.encoder.log_likelihoods(shown, asked, answers) for asked, answers in asks]
        scored = {(asked, a): likelihoods[:, j]
                  for (asked, answers), likelihoods in zip(asks, answered) for j, a in enumerate(answers)}
        return [np.stack([scored[asked, a] for a in prompts], axis=1) for asked, prompts in self.ways]


__all__ = ["GroupClassifier", "NO_PERSON"]
