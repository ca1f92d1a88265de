"""Word influence of one prompt end to end: variants -> images -> groups -> k-level and Shapley."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from vlfair import measures
from vlfair.defaults import CONFIDENCE
from vlfair.logging import get_logger
from vlfair.t2i.classifier import NO_PERSON
from vlfair.t2i.generators import ImageCache
from vlfair.t2i.transmuters import Transmuter, content_positions, split_prompt

logger = get_logger(__name__)

ADJECTIVES = ("confident", "caring", "rational", "sensitive", "smart", "successful")
PERSONS = ("doctor", "scientist", "artist", "nurse", "lawyer")
PLACES = ("office", "gym", "salon", "spa", "mall")


def large_scale_prompts() -> list[str]:
    """The study's 150 prompts "a [ADJECTIVE] [PERSON] at the [PLACE]"."""
    return [f"a {a} {p} at the {pl}" for a in ADJECTIVES for p in PERSONS for pl in PLACES]


@dataclasses.dataclass
class Variant:
    replaced: tuple[int, ...]  # indices into the replaceable words
    prompts: list[str]


@dataclasses.dataclass(frozen=True)
class Request:
    """One image of a prompt's variants: the variant (its replaced word indices), the index of its
    transmuted prompt among the variant's (0 for the original), that prompt and the image's sample
    index (its seed follows from prompt, index and the base seed: ``generators.sample_seed``)."""

    replaced: tuple[int, ...]
    candidate: int
    prompt: str
    index: int


@dataclasses.dataclass
class PromptInfluence:
    prompt: str
    words: list[str]  # the replaceable words, in order
    variants: list[Variant]
    shares: dict[str, float]
    counts: dict[str, int]  # images classified into a group, per variant
    no_person: dict[str, int]
    group_counts: dict[str, dict[str, int]]  # images per variant and group (no person left out)
    result: measures.WordInfluence  # the word_influence measure's output (all levels)
    images: dict[str, list]  # a few images per variant, for the grids
    generator_calls: int
    images_used: int
    requests: list[Request] = dataclasses.field(default_factory=list)  # every image, in the order classified
    labels: list[str] = dataclasses.field(default_factory=list)  # each image's group (or NO_PERSON)
    # each image's group with each other phrasing of the classifier's texts (phrasings 2, 3, ...)
    phrased_labels: list[list[str]] = dataclasses.field(default_factory=list)


def plan_variants(prompt: str, transmuter: Transmuter, positions: Sequence[int] | Literal["all", "content"] | None,
                  max_level: int | None, candidates: int) -> tuple[list[str], list[int], list[Variant]]:
    """``positions``: word indices, "all" (every word, as the study's Table 1 scores "a", "at" and
    "the"), or "content"/None (articles and prepositions left out)."""
    words = split_prompt(prompt)
    if positions == "all":
        positions = list(range(len(words)))
    elif positions in (None, "content"):
        positions = content_positions(words)
    elif isinstance(positions, str):
        raise ValueError(f"positions must be word indices, 'all' or 'content'; got {positions!r}")
    else:
        positions = list(positions)
    if not positions:
        raise ValueError(f"prompt {prompt!r} has no word to replace")
    for p in positions:
        if not 0 <= p < len(words):
            raise ValueError(f"word position {p} is outside the prompt {prompt!r} ({len(words)} words)")
    n = len(positions)
    max_level = n if max_level is None else min(int(max_level), n)
    variants = [Variant((), [prompt])]
    for size in range(1, max_level + 1):
        for subset in itertools.combinations(range(n), size):
            proposals = transmuter.candidates(words, [positions[i] for i in subset], candidates)
            if not proposals:
                raise ValueError(f"the transmuter proposed no replacement for {[words[positions[i]] for i in subset]}")
            variants.append(Variant(subset, [" ".join(p) for p in proposals]))
    return [words[p] for p in positions], positions, variants


def cost(variants: Sequence[Variant], images_per_prompt: int, original_images: int) -> int:
    return sum(len(v.prompts) for v in variants if v.replaced) * images_per_prompt + original_images


def run_prompt(prompt: str, transmuter: Transmuter, cache: ImageCache, classify: Callable[[Sequence[Any]], list[str]],
               target: str, *, positions: Sequence[int] | Literal["all", "content"] | None = None,
               max_level: int | None = None, candidates: int = 3, images_per_prompt: int = 4,
               original_images: int | None = None, confidence: float = CONFIDENCE, max_images: int = 2000,
               log: Callable[[str], None] | None = None, keep_images: int = 4,
               every_phrasing: Callable[[Sequence[Any]], list[list[str]]] | None = None) -> PromptInfluence:
    """Influence of the words of ``prompt`` (``positions``, see :func:`plan_variants`) on the share
    of ``target`` images: ``images_per_prompt`` images of each of up to ``candidates`` transmuted
    prompts per variant, and ``original_images`` of the prompt itself (default: as many as a
    variant gets). ``every_phrasing``: labels the images with each phrasing of the classifier's texts
    (the first is ``classify``'s), the others kept as the result's ``phrased_labels``."""
    words, positions, variants = plan_variants(prompt, transmuter, positions, max_level, candidates)
    original_images = candidates * images_per_prompt if original_images is None else int(original_images)
    if original_images < 1 or images_per_prompt < 1:
        raise ValueError(f"original_images ({original_images}) and images_per_prompt ({images_per_prompt}) "
                         "must be >= 1")
    needed = cost(variants, images_per_prompt, original_images)
    (log or logger.info)(f"{prompt!r}: {len(variants) - 1} variants x up to {candidates} candidate prompts x "
        f"{images_per_prompt} image(s) + {original_images} of the original = {needed} images")
    if needed > max_images:
        raise ValueError(f"{prompt!r} needs {needed} images, more than max_images={max_images}; raise --max-images "
                         "or lower the candidates, images per prompt or maximum level")
    requests = [Request((), 0, prompt, j) for j in range(original_images)]
    for variant in variants[1:]:
        for candidate, text in enumerate(variant.prompts):
            requests.extend(Request(variant.replaced, candidate, text, j) for j in range(images_per_prompt))
    calls_before = cache.calls
    images = cache.images([(r.prompt, r.index) for r in requests])
    labels, *phrased = every_phrasing(images) if every_phrasing else [classify(images)]
    found = tally(prompt, words, variants, requests, labels, target, confidence=confidence, images=images,
                  keep_images=keep_images, generator_calls=cache.calls - calls_before)
    found.phrased_labels = phrased
    return found


def tally(prompt: str, words: list[str], variants: list[Variant], requests: Sequence[Request], labels: Sequence[str],
          target: str, *, confidence: float = CONFIDENCE, images: Sequence[Any] | None = None, keep_images: int = 4,
          generator_calls: int = 0) -> PromptInfluence:
    """The influence of ``prompt``'s ``words`` from each requested image's group (``labels``, one
    per request; ``NO_PERSON`` images are counted apart and left out of the shares): what
    :func:`run_prompt` computes once its images are classified, and what a probe recomputes from
    its samples alone (``images``: the images themselves, of which the first ``keep_images`` per
    variant are kept for the grids; None keeps none)."""
    predictions: list[int] = []
    variant_ids: list[str] = []
    kept: dict[str, list[Any]] = {}  # variant -> its first images (PIL)
    no_person: dict[str, int] = {}
    group_counts: dict[str, dict[str, int]] = {}
    shown = images if images is not None else [None] * len(requests)
    for request, label, image in zip(requests, labels, shown):
        key = ",".join(map(str, request.replaced))
        if label == NO_PERSON:
            no_person[key] = no_person.get(key, 0) + 1
            continue
        group_counts.setdefault(key, {})
        group_counts[key][label] = group_counts[key].get(label, 0) + 1
        predictions.append(int(label == target))
        variant_ids.append(key)
        kept.setdefault(key, [])
        if image is not None and len(kept[key]) < keep_images:
            kept[key].append(image)
    if not predictions:
        raise ValueError(f"{prompt!r}: no generated image was classified into a group (all show no person)")
    result = measures.word_influence(predictions, variant_ids, len(words), k=1, confidence=confidence)
    return PromptInfluence(prompt, words, variants, result["shares"], result["images_per_variant"],
                           {v: no_person.get(v, 0) for v in result["shares"]}, group_counts, result, kept,
                           generator_calls, len(requests), list(requests), list(labels))


def mean_word_influence(results: Sequence[PromptInfluence], key: str = "1") -> dict[str, float]:
    """Mean influence of each word over the prompts that contain it (level ``key`` or "shapley")."""
    collected: dict[str, list[float]] = {}
    for r in results:
        values = r.result["shapley"] if key == "shapley" else r.result["levels"][key]
        if values is None:
            continue
        for word, value in zip(r.words, values):
            collected.setdefault(word, []).append(value)
    return {w: float(np.mean(v)) for w, v in collected.items()}


__all__ = ["ADJECTIVES", "PERSONS", "PLACES", "PromptInfluence", "Request", "cost", "large_scale_prompts",
           "mean_word_influence", "plan_variants", "run_prompt", "tally"]
