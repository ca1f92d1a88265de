"""Zero-shot group classification of generated images with any vlfair encoder."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

import yaml
from PIL import Image

NO_PERSON = "no_person"


class GroupClassifier:
    """Label each image with the group whose prompt it matches best, or ``no_person``.

    ``crop``: an optional hook (e.g. a person or face detector) returning the region to classify,
    or None when the image shows nobody. Without it the whole image is classified.

    A generative model (``lvlm:``) is asked ``question`` about each image, the texts its candidate
    answers: the group is the most likely answer (``min_similarity``, a cosine, does not apply).
    """

    def __init__(self, encoder: Any, groups: dict[str, str] | None = None, no_person: str | None = None,
                 min_similarity: float | None = None, crop: Callable[[Image.Image], Image.Image | None] | None = None,
                 question: str = "what is this a photo of ?"):
        if groups is None:  # the study's classifier texts; no_person and min_similarity stay the caller's if given
            settings = yaml.safe_load(resources.files("vlfair.t2i").joinpath("groups.yaml").read_text())
            groups = settings["groups"]
            no_person = settings["no_person"] if no_person is None else no_person
            min_similarity = settings["min_similarity"] if min_similarity is None else min_similarity
        if len(groups) < 2:
            raise ValueError(f"a group classifier needs at least 2 groups, got {list(groups)}")
        self.encoder, self.groups, self.crop = encoder, dict(groups), crop
        self.no_person, self.min_similarity = no_person, min_similarity
        self.prompts = list(self.groups.values()) + ([no_person] if no_person else [])
        self.question = question
        self.generative = getattr(encoder, "kind", "contrastive") == "generative"
        self.text = None if self.generative else encoder.encode_texts(self.prompts)
        self.labels = list(self.groups) + ([NO_PERSON] if no_person else [])

    def __call__(self, images: Sequence[Image.Image]) -> list[str]:
        crops = [self.crop(im) if self.crop else im for im in images]
        present = [i for i, c in enumerate(crops) if c is not None]
        labels = [NO_PERSON] * len(images)
        if present:
            if self.generative:  # each answer's log-likelihood, from one prefix per image
                similarity = self.encoder.log_likelihoods([crops[i] for i in present], self.question, self.prompts)
            else:
                assert self.text is not None  # embedded in __init__ for a contrastive encoder
                similarity = self.encoder.encode_images([crops[i] for i in present]) @ self.text.T
            best = similarity.argmax(axis=1)
            for row, i in enumerate(present):
                label = self.labels[best[row]]
                if (self.min_similarity is not None and not self.generative
                        and similarity[row, :len(self.groups)].max() < self.min_similarity):
                    label = NO_PERSON
                labels[i] = label
        return labels


__all__ = ["GroupClassifier", "NO_PERSON"]
