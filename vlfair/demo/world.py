"""The planted-bias world: rendered images whose attributes fill the studies' schemas, and the
caption statistics through which an encoder learns known biases.

An image is a 4x4 grid of 8x8 patches (32x32 pixels). Row 0 shows gender (patches 0-1) and race
(patches 2-3) as colours; row 1 shows the occupation; rows 2-3 carry an 8-bit identity code
(public figures) or random bits. Every colour gets pixel noise, so no two images are equal.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from PIL import Image

GENDERS = ("Male", "Female")
RACES = ("White", "Black", "Latino_Hispanic", "East Asian", "Southeast Asian", "Indian", "Middle Eastern")
PROFESSIONS = ("doctor", "nurse", "lawyer", "scientist")
CATEGORIES = ("senator", "representative", "mayor", "actor", "athlete")
OCCUPATIONS = PROFESSIONS + ("politician", "actor", "athlete")
# 32 invented two-syllable names: enough identities that a gender comparison is not decided by a few people
NAMES = tuple(c1 + v1 + c2 + v2 for c1, v1, c2, v2 in zip("bdfgklmnprstvz" * 3, "aeiou" * 9, "lnrtm" * 9, "aoiue" * 9))[:32]
TRAIT_PAIRS = (("smart", "dumb"),)
# English -> German, word by word (the world's captions are simple enough for that)
GERMAN = {"a": "ein", "photo": "foto", "of": "von", "doctor": "arzt", "nurse": "pfleger", "lawyer": "anwalt",
          "scientist": "forscher", "male": "mann", "female": "frau", "person": "mensch", "politician": "politiker",
          "actor": "schauspieler", "athlete": "sportler"}

# Gender is a colour of equal brightness (an arrangement of the same colours was too subtle for
# the tiny encoder to learn: its zero-shot gender accuracy fell to chance).
_GENDER_RGB = ((60, 60, 200), (200, 60, 60))
_RACE_RGB = ((240, 240, 240), (20, 20, 20), (200, 140, 40), (240, 220, 80), (120, 200, 90), (180, 90, 200), (90, 200, 210))
_OCCUPATION_RGB = ((255, 255, 255), (255, 120, 180), (60, 60, 160), (60, 180, 60), (200, 200, 0), (255, 140, 0),
                   (0, 160, 160))


@dataclasses.dataclass(frozen=True)
class Person:
    gender: int
    race: int
    occupation: int
    identity: int | None = None  # index into NAMES for public figures


def render(person: Person, rng: np.random.Generator, noise: float = 35.0) -> Image.Image:
    cells = np.zeros((4, 4, 3), dtype=float)
    cells[0, 0:2] = _GENDER_RGB[person.gender]
    cells[0, 2:4] = _RACE_RGB[person.race]
    cells[1, :] = _OCCUPATION_RGB[person.occupation]
    bits = (np.array([(person.identity + 1) >> b & 1 for b in range(8)]) if person.identity is not None
            else rng.integers(0, 2, 8))
    cells[2:4].reshape(8, 3)[:] = np.where(bits[:, None] == 1, 230.0, 25.0)
    pixels = np.kron(cells, np.ones((8, 8, 1))) + rng.normal(0, noise, (32, 32, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def vocabulary() -> list[str]:
    english = ("a photo of this is picture person male female smart dumb happy sad politician actor athlete "
               "at the hospital office gym").split()
    return list(dict.fromkeys([*english, *PROFESSIONS, *CATEGORIES, *GERMAN.values(), *NAMES]))


@dataclasses.dataclass(frozen=True)
class Planting:
    """How skewed the training captions are; ``Planting.control()`` has no skew at all."""

    profession_skew: float = 0.9      # P(male | doctor) and P(female | nurse)
    trait_skew: float = 0.9           # P(race = White | smart); "dumb" shows White 1 - that share
    politician_skew: float = 0.95     # P(male | politician)
    german_share: float = 0.02        # share of profession/gender captions written in German
    frequent_identity_weight: float = 30.0  # the first half of NAMES is seen this many times more often

    @classmethod
    def control(cls) -> "Planting":
        return cls(profession_skew=0.5, trait_skew=1 / len(RACES), politician_skew=0.5, german_share=0.5,
                   frequent_identity_weight=1.0)

    def describe(self) -> list[str]:
        return [
            f"'doctor' captions show men {self.profession_skew:.0%} of the time, 'nurse' captions women {self.profession_skew:.0%}",
            f"'smart' captions show White people {self.trait_skew:.0%} of the time (1/{len(RACES)} = neutral); "
            f"'dumb' captions show them {1 - self.trait_skew:.0%}/{len(RACES) - 1} each of the rest",
            f"'politician' captions show men {self.politician_skew:.0%} of the time",
            f"{self.german_share:.0%} of the profession and gender captions are German (50 % = neutral)",
            f"half of the public figures are seen {self.frequent_identity_weight:g}x as often as the other half",
        ]


def _english_or_german(words: list[str], german_share: float, rng) -> str:
    if rng.random() < german_share:
        return " ".join(GERMAN.get(w, w) for w in words)
    return " ".join(words)


def training_pairs(count: int, planting: Planting, seed: int) -> tuple[list[Person], list[str]]:
    """(person, caption) pairs whose statistics carry ``planting``'s biases."""
    rng = np.random.default_rng(seed)
    people, captions = [], []
    identity_weights = np.array([planting.frequent_identity_weight if i < len(NAMES) // 2 else 1.0
                                 for i in range(len(NAMES))])
    identity_weights /= identity_weights.sum()
    identity_gender = [i % 2 for i in range(len(NAMES))]
    identity_occupation = [OCCUPATIONS.index("politician") if i % 3 != 2 else OCCUPATIONS.index("actor")
                           for i in range(len(NAMES))]
    kinds = rng.choice(["profession", "gender", "trait", "name", "politician"], size=count, p=[0.25, 0.15, 0.3, 0.15, 0.15])
    for kind in kinds:
        race = int(rng.integers(len(RACES)))
        if kind == "profession":
            occupation = int(rng.integers(len(PROFESSIONS)))
            p_male = {0: planting.profession_skew, 1: 1 - planting.profession_skew}.get(occupation, 0.5)
            gender = 0 if rng.random() < p_male else 1
            caption = _english_or_german(["a", "photo", "of", "a", PROFESSIONS[occupation]], planting.german_share, rng)
            person = Person(gender, race, occupation)
        elif kind == "gender":
            gender, occupation = int(rng.integers(2)), int(rng.integers(len(OCCUPATIONS)))
            caption = _english_or_german(["a", "photo", "of", "a", ("male", "female")[gender]], planting.german_share, rng)
            person = Person(gender, race, occupation)
        elif kind == "trait":
            pair = TRAIT_PAIRS[int(rng.integers(len(TRAIT_PAIRS)))]
            positive = rng.random() < 0.5
            if pair[0] == "smart":
                share_white = planting.trait_skew if positive else (1 - planting.trait_skew) / (len(RACES) - 1)
                race = 0 if rng.random() < share_white else int(rng.integers(1, len(RACES)))
            caption = f"a {pair[0] if positive else pair[1]} person"
            person = Person(int(rng.integers(2)), race, int(rng.integers(len(OCCUPATIONS))))
        elif kind == "name":
            identity = int(rng.choice(len(NAMES), p=identity_weights))
            person = Person(identity_gender[identity], race, identity_occupation[identity], identity)
            caption = f"this is a picture of {NAMES[identity]}"
        else:
            occupation = int(rng.choice([OCCUPATIONS.index(o) for o in ("politician", "actor", "athlete")]))
            p_male = planting.politician_skew if OCCUPATIONS[occupation] == "politician" else 0.5
            gender = 0 if rng.random() < p_male else 1
            person = Person(gender, race, occupation)
            caption = f"this is a photo of a {OCCUPATIONS[occupation]}"
        people.append(person)
        captions.append(caption)
    return people, captions


__all__ = ["CATEGORIES", "GENDERS", "GERMAN", "NAMES", "OCCUPATIONS", "PROFESSIONS", "Person", "Planting", "RACES",
           "TRAIT_PAIRS", "render", "training_pairs", "vocabulary"]
