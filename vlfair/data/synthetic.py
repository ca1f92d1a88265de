"""Synthetic twins: small, seeded datasets with each schema's columns and real label vocabularies.

Images are generated in memory (coloured shapes, not people); ``dataset.info.description``
says so. Tests and the demo use them where the real data cannot be shipped.
"""

from __future__ import annotations

import copy
import functools
import itertools

import datasets
import numpy as np

from vlfair.data.registry import dataset_names, dataset_spec
from vlfair.data.schemas import FAIRFACE_AGE_BINS, FAIRFACE_RACES, GENDERS, PFI_CATEGORIES
from vlfair.tiny import generated_image

# the professions study's layout: 12 professions x 2 genders x 4 races, 5 images per cell
PROFESSIONS = ("doctor", "teacher", "scientist", "nurse", "police officer", "CEO", "construction worker", "lawyer",
               "criminal", "janitor", "model", "athlete")
PROFESSION_RACES = ("White", "Black", "Asian", "Latin American")
SPORTS = ("basketball", "tennis", "soccer", "hockey", "golf", "softball", "baseball")  # P-FI's level 3
# word-for-word translations, so the synthetic translation portion is aligned like Multi30K's
_NOUNS = {"en": ["man", "woman", "dog", "child"], "de": ["Mann", "Frau", "Hund", "Kind"],
          "fr": ["homme", "femme", "chien", "enfant"], "cs": ["muž", "žena", "pes", "dítě"]}
_VERBS = {"en": ["runs", "sits", "plays", "waits"], "de": ["läuft", "sitzt", "spielt", "wartet"],
          "fr": ["court", "est assis", "joue", "attend"], "cs": ["běží", "sedí", "hraje si", "čeká"]}
_ARTICLE = {"en": "A", "de": "Ein", "fr": "Un", "cs": "Jeden"}


def _images(count: int, seed: int, size: tuple[int, int] = (32, 32)) -> list:
    return [generated_image(i, size, seed) for i in range(count)]


def _cycle(values: list[tuple], count: int, rng: np.random.Generator) -> list[tuple]:
    """Full factorial cycles (so every combination appears), shuffled within each cycle."""
    rows: list[tuple] = []
    while len(rows) < count:
        rows.extend(values[i] for i in rng.permutation(len(values)))
    return rows[:count]


def fairface(size: int, rng, seed: int, subset: str | None) -> dict[str, list]:
    rows = _cycle(list(itertools.product(FAIRFACE_AGE_BINS, GENDERS, FAIRFACE_RACES)), size, rng)
    return {"image": _images(size, seed), "file": [f"synthetic/{i + 1}.jpg" for i in range(size)],
            "age": [r[0] for r in rows], "gender": [r[1] for r in rows], "race": [r[2] for r in rows],
            "service_test": [bool(rng.integers(0, 2)) for _ in range(size)]}


def professions(size: int, rng, seed: int, subset: str | None) -> dict[str, list]:
    rows = _cycle(list(itertools.product(PROFESSIONS, GENDERS, PROFESSION_RACES)), size, rng)
    return {"image": _images(size, seed), "profession": [r[0] for r in rows], "gender": [r[1] for r in rows],
            "race": [r[2] for r in rows]}


def _caption(language: str, noun: int, verb: int) -> str:
    return f"{_ARTICLE[language]} {_NOUNS[language][noun]} {_VERBS[language][verb]}."


def multi30k(size: int, rng, seed: int, subset: str | None) -> dict[str, list]:
    portion = subset or "translation"
    images = _images(size, seed)
    columns: dict[str, list] = {k: [] for k in ("image", "image_file", "portion", "caption_index",
                                                "en", "de", "fr", "cs")}
    for i in range(size):
        for index in ([1] if portion == "translation" else range(1, 6)):
            noun, verb = int(rng.integers(0, 4)), int(rng.integers(0, 4))
            # the independent portion describes the same image with different words per language
            de_noun, de_verb = (noun, verb) if portion == "translation" else \
                (int(rng.integers(0, 4)), int(rng.integers(0, 4)))
            columns["image"].append(images[i])
            columns["image_file"].append(f"{1000000000 + i}.jpg")
            columns["portion"].append(portion)
            columns["caption_index"].append(index)
            columns["en"].append(_caption("en", noun, verb))
            columns["de"].append(_caption("de", de_noun, de_verb))
            columns["fr"].append(_caption("fr", noun, verb) if portion == "translation" else None)
            columns["cs"].append(_caption("cs", noun, verb) if portion == "translation" else None)
    return columns


def pfi(size: int, rng, seed: int, subset: str | None) -> dict[str, list]:
    rows = _cycle(list(itertools.product(PFI_CATEGORIES, GENDERS)), size, rng)
    politician = {"senator", "representative", "mayor"}
    return {
        "image": _images(size, seed), "name": [f"Person {i + 1:04d}" for i in range(size)],
        "category": [r[0] for r in rows], "gender": [r[1] for r in rows],
        "party": [str(rng.choice(["D", "R"])) if r[0] in politician else None for r in rows],
        "state": [f"S{int(rng.integers(1, 51)):02d}" if r[0] in ("senator", "representative") else None for r in rows],
        "district": [str(int(rng.integers(1, 20))) if r[0] == "representative" else None for r in rows],
        "city": [f"City {int(rng.integers(1, 100))}" if r[0] == "mayor" else None for r in rows],
        "sport": [str(rng.choice(SPORTS)) if r[0] == "athlete" else None for r in rows],
        "role": ["lead" if r[0] == "actor" else None for r in rows],
    }


def make_synthetic(name: str, size: int | None = None, seed: int = 0, subset: str | None = None) -> datasets.Dataset:
    """A deterministic synthetic twin of ``name`` (``size`` rows, or images for Multi30K: by default its
    spec's ``twin_size``)."""
    spec = dataset_spec(name)
    if spec.twin is None:
        raise ValueError(f"no synthetic twin for {name!r}; available: "
                         f"{[n for n in dataset_names() if dataset_spec(n).twin is not None]}")
    size = spec.twin_size if size is None else int(size)
    if size < 1:
        raise ValueError(f"size must be positive, got {size}")
    # a copy of this process's one build: the same rows every time (drawing and encoding 480 images took
    # 0.2 s at each load, and a Space, a sweep or a test suite loads the same twins again and again); a copy
    # shares the Arrow table, so a caller's set_format never reaches the next caller
    return copy.deepcopy(_built(name, size, seed, subset))


@functools.lru_cache(maxsize=16)
def _built(name: str, size: int, seed: int, subset: str | None) -> datasets.Dataset:
    columns = dataset_spec(name).function("twin")(size, np.random.default_rng(seed), seed, subset)
    return columns_to_dataset(columns, (
        f"SYNTHETIC twin of {name} made by vlfair (seed={seed}, size={size}): labels drawn from the real "
        "vocabularies, images are generated shapes, not photographs of people. For tests and demos only."))


def columns_to_dataset(columns: dict[str, list], description: str) -> datasets.Dataset:
    """An in-memory dataset: "image" holds PIL images; other features follow their first non-None value."""
    features = {"image": datasets.Image()}
    for key, values in columns.items():
        if key != "image":
            sample = next((v for v in values if v is not None), "")
            dtype = "bool" if isinstance(sample, bool) else "int64" if isinstance(sample, int) else "string"
            features[key] = datasets.Value(dtype)
    info = datasets.DatasetInfo(features=datasets.Features(features), description=description)
    return datasets.Dataset.from_dict(columns, features=datasets.Features(features), info=info)
