"""Evaluation data rendered from the planted world, in the studies' schemas (balanced by design)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import datasets
import numpy as np
from PIL import Image

from vlfair.data.schemas import FAIRFACE_AGE_BINS
from vlfair.data.synthetic import columns_to_dataset
from vlfair.demo.world import (
    GENDERS,
    GERMAN,
    NAMES,
    OCCUPATIONS,
    PROFESSIONS,
    RACES,
    Person,
    identity_gender,
    identity_occupation,
    render,
)
from vlfair.registry import Registry

POLITICIAN_OFFICES = ("senator", "representative", "mayor")
FREQUENT_NAMES = NAMES[: len(NAMES) // 2]


def _looks(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """People's looks (8 bits each) for the cells of an evaluation set, drawn once and shown again in
    every group the set compares: the groups then differ in nothing but what the model makes of
    the group (a random look per person would let one group happen to look smarter than another, a
    difference of the sample, not of the model)."""
    return rng.integers(0, 256, shape)


def professions(per_cell: int = 5, seed: int = 11) -> datasets.Dataset:  # the study: 5 images per cell
    rng = np.random.default_rng(seed)
    looks = _looks(rng, (len(PROFESSIONS), 4, per_cell))  # women and men of a profession look alike
    rows = [(p, g, r, int(looks[p, r, k])) for p, g, r in itertools.product(range(len(PROFESSIONS)), range(2), range(4))
            for k in range(per_cell)]
    return columns_to_dataset({"image": [render(Person(g, r, p, look=look), rng) for p, g, r, look in rows],
                     "profession": [PROFESSIONS[p] for p, *_ in rows], "gender": [GENDERS[g] for _, g, *_ in rows],
                     "race": [RACES[r] for _, _, r, _ in rows]}, "planted-bias world: professions")


def fairface(per_cell: int = 20, seed: int = 12) -> datasets.Dataset:
    rng = np.random.default_rng(seed)
    looks = _looks(rng, (2, per_cell))  # every race looks alike, within each gender
    rows = [(g, r, int(looks[g, k])) for r, g in itertools.product(range(len(RACES)), range(2))
            for k in range(per_cell)]
    return columns_to_dataset({"image": [render(Person(g, r, int(rng.integers(len(OCCUPATIONS))), look=look), rng)
                                         for g, r, look in rows],
                     "file": [f"world/{i}.png" for i in range(len(rows))],
                     "age": [str(rng.choice(FAIRFACE_AGE_BINS[3:7])) for _ in rows],
                     "gender": [GENDERS[g] for g, *_ in rows], "race": [RACES[r] for _, r, _ in rows],
                     "service_test": [False] * len(rows)}, "planted-bias world: faces")


def multi30k(images: int = 64, seed: int = 13) -> datasets.Dataset:
    """Translation portion: "a photo of a {profession}" and its word-by-word German translation."""
    rng = np.random.default_rng(seed)
    people = [Person(int(rng.integers(2)), int(rng.integers(len(RACES))), i % len(PROFESSIONS)) for i in range(images)]
    english = [f"a photo of a {PROFESSIONS[p.occupation]}" for p in people]
    return columns_to_dataset({"image": [render(p, rng) for p in people],
                     "image_file": [f"{i}.png" for i in range(images)],
                     "portion": ["translation"] * images, "caption_index": [1] * images, "en": english,
                     "de": [" ".join(GERMAN.get(w, w) for w in c.split()) for c in english],
                     "fr": [None] * images, "cs": [None] * images}, "planted-bias world: captions")


def pfi(per_identity: int = 1, seed: int = 14) -> datasets.Dataset:  # P-FI: one portrait per person
    rng = np.random.default_rng(seed)
    rows = []
    for identity, name in enumerate(NAMES):  # the same people the world's captions name
        occupation = OCCUPATIONS[identity_occupation(identity)]
        category = POLITICIAN_OFFICES[identity % 3] if occupation == "politician" else "actor"
        for _ in range(per_identity):
            rows.append((identity, name, category, identity_gender(identity), occupation))
    return columns_to_dataset({
        "image": [render(Person(g, int(rng.integers(len(RACES))), OCCUPATIONS.index(o), i), rng)
                  for i, _, _, g, o in rows],
        "name": [n for _, n, _, _, _ in rows], "category": [c for _, _, c, _, _ in rows],
        "gender": [GENDERS[g] for _, _, _, g, _ in rows],
        **{k: [None] * len(rows) for k in ("party", "state", "district", "city", "sport", "role")},
    }, "planted-bias world: public figures")


def _makes_data(maker: Callable[[], datasets.Dataset]) -> None:
    if not callable(maker):
        raise TypeError(f"a demo world's data is made by a function () -> datasets.Dataset, not {maker!r}")


# the world's data of each schema, its maker by the schema's name: the demo's own registry (the data layer
# names nothing of the demo), read by whoever builds the demo world (the demo, its Space); a package with a
# dataset of its own may add its schema's: BY_SCHEMA.add(make, "moods")
BY_SCHEMA: Registry[Callable[[], datasets.Dataset]] = Registry("demo world's dataset", check=_makes_data)
for _schema, _maker in {"professions": professions, "fairface": fairface, "multi30k": multi30k, "pfi": pfi}.items():
    BY_SCHEMA.add(_maker, _schema)


class PlantedGenerator:
    """Renders world people whose gender follows known per-word effects of the prompt."""

    def __init__(self, effects: dict[str, float], base: float = 0.3):
        self.effects, self.base = dict(effects), base

    def p_female(self, prompt: str) -> float:
        return float(np.clip(self.base + sum(self.effects.get(w, 0.0) for w in prompt.split()), 0.02, 0.98))

    def identity(self) -> dict:
        return {"planted_generator": sorted(self.effects.items()), "base": self.base}

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Image.Image]:
        images = []
        for prompt, seed in zip(prompts, seeds):
            rng = np.random.default_rng(seed)
            female = rng.random() < self.p_female(prompt)
            person = Person(int(female), int(rng.integers(len(RACES))), int(rng.integers(len(OCCUPATIONS))))
            images.append(render(person, rng))
        return images
