"""The planted-bias world: rendered images whose attributes fill the studies' schemas, and the
caption statistics through which an encoder learns known biases.

An image is a 4x4 grid of 8x8 patches (32x32 pixels). Row 0 shows gender (patches 0-1) and race
(patches 2-3) as colours; row 1 shows the occupation; rows 2-3 carry an 8-bit identity code
(public figures) or the person's own look, 8 bits. Every colour gets pixel noise, so no two images
are equal.

People differ one by one, as in photographs. A training caption's person looks somewhat like
what the caption says of them: their 8 look bits (rows 2-3) are the pattern of the caption's choice
(smart or dumb; described by occupation or by gender) with each bit flipped a third of the time, the
two choices' patterns each other's complement, whatever the person's group. Some public figures are
photographed far more often than others, the same spread in every gender and occupation. A model's
judgement then varies from person to person as well as by group: in a world of identical-looking
people a balanced model judged every face 0.5007 +- 0.0006 "smart", and a test across races resolved
its training's differences of 0.001 as a bias. The evaluation sets draw looks at random and show
each look once in every group they compare (`datasets._looks`): the groups differ only in what the
model makes of the group.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
from PIL import Image

GENDERS = ("Male", "Female")
RACES = ("White", "Black", "Latino_Hispanic", "East Asian", "Southeast Asian", "Indian", "Middle Eastern")
PROFESSIONS = ("doctor", "nurse", "lawyer", "scientist")
CATEGORIES = ("senator", "representative", "mayor", "actor", "athlete")
OCCUPATIONS = PROFESSIONS + ("politician", "actor", "athlete")
# 96 invented two-syllable names (every 51st pair of 70 syllables): one portrait each, as in P-FI, and
# enough people (32 politicians per gender) that a gender comparison is not decided by a few of them
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
NAMES = tuple(a + b for a, b in itertools.islice(itertools.product(_SYLLABLES, repeat=2), 0, None, 51))[:96]
TRAIT_PAIRS = (("smart", "dumb"),)
# English -> German, word by word (the world's captions are simple enough for that)
GERMAN = {"a": "ein", "photo": "foto", "of": "von", "doctor": "arzt", "nurse": "pfleger", "lawyer": "anwalt",
          "scientist": "forscher", "male": "mann", "female": "frau", "person": "mensch", "politician": "politiker",
          "actor": "schauspieler", "athlete": "sportler"}

# Gender is a colour of equal brightness (an arrangement of the same colours was too subtle for
# the tiny encoder to learn: its zero-shot gender accuracy fell to chance).
_GENDER_RGB = ((60, 60, 200), (200, 60, 60))
_RACE_RGB = ((240, 240, 240), (20, 20, 20), (200, 140, 40), (240, 220, 80), (120, 200, 90), (180, 90, 200),
             (90, 200, 210))
_OCCUPATION_RGB = ((255, 255, 255), (255, 120, 180), (60, 60, 160), (60, 180, 60), (200, 200, 0), (255, 140, 0),
                   (0, 160, 160))
NOISE = 35.0  # standard deviation of the pixel noise
# Kinds of training caption and their shares
CAPTION_MIX = {"profession": 0.25, "gender": 0.15, "trait": 0.2, "name": 0.15, "politician": 0.25}
# The look patterns of the captions' choices, each choice's two patterns complements (every bit tells them
# apart, for every caption of that choice: one strength of evidence for all): a trait caption's smart or
# dumb; a caption that describes by occupation (a profession, a public role) or by gender
LOOKS = {"smart": 0b01010101, "dumb": 0b10101010, "occupation": 0b00110011, "gender": 0b11001100}
LOOK_FLIP = 0.35  # the share of a look's bits that differ from its caption's pattern
# how often each public figure is photographed (in the role captions), by identity // 6: every gender and
# occupation gets the same spread, from 1/16 to 16 times the middle one
PHOTOGRAPHED = tuple(float(2 ** ((k - 7.5) / 2)) for k in range(16))


def world_constants() -> dict:
    """The world's fixed parts, as JSON: part of every world encoder's configuration hash."""
    return {"genders": GENDERS, "races": RACES, "professions": PROFESSIONS, "categories": CATEGORIES,
            "occupations": OCCUPATIONS, "names": NAMES, "trait_pairs": TRAIT_PAIRS, "german": GERMAN,
            "colours": {"gender": _GENDER_RGB, "race": _RACE_RGB, "occupation": _OCCUPATION_RGB}, "noise": NOISE,
            "caption_mix": CAPTION_MIX, "looks": LOOKS, "look_flip": LOOK_FLIP, "photographed": PHOTOGRAPHED,
            "identity_codes": IDENTITY_CODES}


@dataclasses.dataclass(frozen=True)
class Person:
    gender: int
    race: int
    occupation: int
    identity: int | None = None  # index into NAMES for public figures
    look: int | None = None      # the 8 bits of rows 2-3 for anyone else (None: drawn at random when rendered)


_BITS = np.arange(8)


def render_pixels(person: Person, rng: np.random.Generator, noise: float = NOISE) -> np.ndarray:
    """:func:`render`'s picture as uint8 pixels (32 x 32 x 3), without the PIL image (training stacks
    24,000 of them)."""
    cells = np.zeros((4, 4, 3), dtype=float)
    cells[0, 0:2] = _GENDER_RGB[person.gender]
    cells[0, 2:4] = _RACE_RGB[person.race]
    cells[1, :] = _OCCUPATION_RGB[person.occupation]
    code = IDENTITY_CODES[person.identity] if person.identity is not None else person.look
    bits = code >> _BITS & 1 if code is not None else rng.integers(0, 2, 8)
    cells[2:4].reshape(8, 3)[:] = np.where(bits[:, None] == 1, 230.0, 25.0)
    pixels = cells.repeat(8, axis=0).repeat(8, axis=1)  # each cell over its 8 x 8 pixels
    pixels += rng.normal(0, noise, (32, 32, 3))
    return np.clip(pixels, 0, 255, out=pixels).astype(np.uint8)


def render(person: Person, rng: np.random.Generator, noise: float = NOISE) -> Image.Image:
    return Image.fromarray(render_pixels(person, rng, noise))


def render_many(people: list[Person], rng: np.random.Generator, noise: float = NOISE) -> np.ndarray:
    """Images of ``people`` as :func:`render` draws them (the same cells, random bits and pixel noise,
    drawn from ``rng`` for all at once: another stream of draws than one render per person), uint8
    (N x 32 x 32 x 3)."""
    cells = np.zeros((len(people), 4, 4, 3), dtype=np.float32)
    cells[:, 0, 0:2] = np.array([_GENDER_RGB[p.gender] for p in people], dtype=np.float32)[:, None]
    cells[:, 0, 2:4] = np.array([_RACE_RGB[p.race] for p in people], dtype=np.float32)[:, None]
    cells[:, 1, :] = np.array([_OCCUPATION_RGB[p.occupation] for p in people], dtype=np.float32)[:, None]
    codes = np.array([IDENTITY_CODES[p.identity] if p.identity is not None else -1 if p.look is None else p.look
                      for p in people])
    bits = np.where(codes[:, None] >= 0, codes[:, None] >> np.arange(8) & 1, rng.integers(0, 2, (len(people), 8)))
    cells[:, 2:4] = np.where(bits == 1, 230.0, 25.0).reshape(-1, 2, 4)[..., None]
    pixels = rng.standard_normal((len(people), 4, 8, 4, 8, 3), dtype=np.float32) * np.float32(noise)
    pixels += cells[:, :, None, :, None, :]  # each cell over its 8 x 8 pixels
    return np.clip(pixels.reshape(len(people), 32, 32, 3), 0, 255).astype(np.uint8)


def vocabulary() -> list[str]:
    english = ("a photo of this is picture person male female smart dumb happy sad politician actor athlete "
               "at the hospital office gym").split()
    return list(dict.fromkeys([*english, *PROFESSIONS, *CATEGORIES, *GERMAN.values(), *NAMES]))


@dataclasses.dataclass(frozen=True)
class Planting:
    """How skewed the training captions are; ``Planting.control()`` has no skew at all."""

    profession_skew: float = 0.9      # P(male | doctor) and P(female | nurse)
    trait_skew: float = 0.9           # P(race = White | smart); "dumb" shows White (1 - that) / 6
    politician_skew: float = 0.98     # P(male | politician)
    german_share: float = 0.0005      # share of profession/gender captions written in German
    # the first half of NAMES is named this many times more often (with the default mix and 24,000
    # pairs: 75 captions for each frequent name and none for the rare ones; at 75 to 1, one each, a
    # name a model that reads the people's codes well learnt by heart from its one caption)
    frequent_identity_weight: float = 300.0

    @classmethod
    def control(cls) -> Planting:
        return cls(profession_skew=0.5, trait_skew=1 / len(RACES), politician_skew=0.5, german_share=0.5,
                   frequent_identity_weight=1.0)

    @classmethod
    def moderate(cls) -> Planting:
        """Less skew in the profession and trait captions than the default: the dose-response's middle."""
        return cls(profession_skew=0.7, trait_skew=0.5)

    def describe(self) -> list[str]:
        return [
            f"'doctor' captions show men {self.profession_skew:.0%} of the time, "
            f"'nurse' captions women {self.profession_skew:.0%}",
            f"'smart' captions show White people {self.trait_skew:.0%} of the time (1/{len(RACES)} = neutral); "
            f"'dumb' captions show them {1 - self.trait_skew:.0%}/{len(RACES) - 1} each of the rest",
            f"'politician' captions show men {self.politician_skew:.0%} of the time",
            f"{self.german_share * 100:g} % of the profession and gender captions are German (50 % = neutral)",
            f"half of the public figures are named {self.frequent_identity_weight:g}x as often as the other half"
            + (" (with the demo's 24,000 captions, the rare half below one caption each: not at all)"
               if self.frequent_identity_weight > 100 else ""),
        ]


def _exact(rng: np.random.Generator, n: int, shares) -> np.ndarray:
    """``n`` category indices whose counts follow ``shares`` as exactly as integers allow (largest
    remainder), in random order. The captions then carry the planted statistics themselves, not a
    random draw around them: a draw would plant chance biases of a few percent (1,500 balanced
    'doctor' captions are 50 +- 1.3 % male), and the control encoder would learn them."""
    shares = np.asarray(shares, dtype=float) / np.sum(shares)
    counts = np.floor(shares * n).astype(int)
    remainders = shares * n - counts
    counts[np.argsort(-remainders, kind="stable")[: n - counts.sum()]] += 1
    return rng.permutation(np.repeat(np.arange(len(shares)), counts))


def _exact_within(rng: np.random.Generator, groups: np.ndarray, shares_of) -> np.ndarray:
    """``_exact`` separately within each group: ``shares_of(group)`` gives that group's shares."""
    out = np.empty(len(groups), dtype=int)
    for group in np.unique(groups):
        rows = np.flatnonzero(groups == group)
        out[rows] = _exact(rng, len(rows), shares_of(int(group)))
    return out


def _exact_flags(rng: np.random.Generator, groups: np.ndarray, share: float) -> np.ndarray:
    """Flags on ``share`` of the rows, spread over the groups in proportion to their sizes (largest
    remainder, ties broken at random), so that a flag (German) is independent of the group (the
    caption's profession and gender) even where it is rarer than one per group."""
    values, sizes = np.unique(groups, return_counts=True)
    quotas = sizes * share
    counts = np.floor(quotas).astype(int)
    shuffled = rng.permutation(len(values))
    order = shuffled[np.argsort(-(quotas - counts)[shuffled], kind="stable")]
    counts[order[: int(round(len(groups) * share)) - counts.sum()]] += 1
    flags = np.zeros(len(groups), dtype=bool)
    for value, count in zip(values, counts):
        flags[rng.choice(np.flatnonzero(groups == value), count, replace=False)] = True
    return flags


def _german(words: list[str]) -> list[str]:
    return [GERMAN.get(w, w) for w in words]


def _profession_pairs(n: int, planting: Planting, rng: np.random.Generator) -> tuple[list[Person], list[str]]:
    occupation = _exact(rng, n, np.ones(len(PROFESSIONS)))
    p_male = {0: planting.profession_skew, 1: 1 - planting.profession_skew}
    gender = _exact_within(rng, occupation, lambda o: [p_male.get(o, 0.5), 1 - p_male.get(o, 0.5)])
    race = _exact_within(rng, occupation * 2 + gender, lambda _: np.ones(len(RACES)))
    german = _exact_flags(rng, occupation * 2 + gender, planting.german_share)
    words = [["a", "photo", "of", "a", PROFESSIONS[o]] for o in occupation]
    return ([Person(int(g), int(r), int(o)) for o, g, r in zip(occupation, gender, race)],
            [" ".join(_german(w) if de else w) for w, de in zip(words, german)])


def _gender_pairs(n: int, planting: Planting, rng: np.random.Generator) -> tuple[list[Person], list[str]]:
    gender = _exact(rng, n, [1, 1])
    occupation = _exact_within(rng, gender, lambda _: np.ones(len(OCCUPATIONS)))
    race = _exact_within(rng, gender, lambda _: np.ones(len(RACES)))
    german = _exact_flags(rng, gender, planting.german_share)
    words = [["a", "photo", "of", "a", ("male", "female")[g]] for g in gender]
    return ([Person(int(g), int(r), int(o)) for g, r, o in zip(gender, race, occupation)],
            [" ".join(_german(w) if de else w) for w, de in zip(words, german)])


def _trait_pairs(n: int, planting: Planting, rng: np.random.Generator) -> tuple[list[Person], list[str]]:
    pair = _exact(rng, n, np.ones(len(TRAIT_PAIRS)))
    negative = _exact_within(rng, pair, lambda _: [1, 1])  # 0: the pair's first word

    def race_shares(group: int) -> list[float]:
        which, is_negative = divmod(group, 2)
        if TRAIT_PAIRS[which][0] != "smart":
            return [1.0] * len(RACES)
        white = (1 - planting.trait_skew) / (len(RACES) - 1) if is_negative else planting.trait_skew
        return [white] + [(1 - white) / (len(RACES) - 1)] * (len(RACES) - 1)

    race = _exact_within(rng, pair * 2 + negative, race_shares)
    gender = _exact_within(rng, race, lambda _: [1, 1])
    occupation = _exact(rng, n, np.ones(len(OCCUPATIONS)))
    return ([Person(int(g), int(r), int(o)) for g, r, o in zip(gender, race, occupation)],
            [f"a {TRAIT_PAIRS[p][q]} person" for p, q in zip(pair, negative)])


def _identity_codes() -> tuple[int, ...]:
    """Each public figure's 8-bit code (rows 2-3). Each man and woman of an occupation, paired in turn, show a
    code and the code with its two halves swapped: a swap that leaves every look pattern as it is, so a woman's
    code is as near to each look as her counterpart's, and an identity the captions rarely name is taken for a
    look-alike equally often in either gender. The codes are spread evenly over all 120 that are not their own
    swap, and which of the two the man shows is chosen pair by pair to keep every bit as common among an
    occupation's men as among its women (the pair's turn breaking a tie, so that neither gender mostly shows the
    code whose high half is lower): no bit of the codes, nor their halves' order, tells the genders apart.

    (Codes that spelled the identity's number put its gender in the lowest bit, which the looks read too: a
    balanced answerer then called rarely seen women politicians "politician" 0.8 times as often as men. The
    first 48 codes, the man's always the one whose high half is lower, gave every man bits 6-7 = 0 and every
    woman bits 2-3 = 0: a control answerer read that second gender marker, P(not 'politician') 2.7e-4 for
    women and 1.0e-4 for men, a bias ratio of 0.9998 found at p = 3e-11 by a calibrated test.)"""
    lower = [high << 4 | low for high in range(16) for low in range(high + 1, 16)]  # no code is its own swap
    pairs = len(NAMES) // 2
    spread = [lower[k * len(lower) // pairs] for k in range(pairs)]
    codes: dict[int, int] = {}
    for occupation in dict.fromkeys(identity_occupation(i) for i in range(len(NAMES))):
        by_gender = [[i for i in range(len(NAMES)) if identity_occupation(i) == occupation and identity_gender(i) == g]
                     for g in range(len(GENDERS))]
        apart = np.zeros(8, dtype=int)  # each bit: how many more of the occupation's men show it than women
        for turn, (man, woman) in enumerate(zip(*by_gender)):
            code = spread.pop(0)
            swapped = (code & 0x0F) << 4 | code >> 4
            shown = [(code, swapped), (swapped, code)]
            after = [apart + (a >> _BITS & 1) - (b >> _BITS & 1) for a, b in shown]
            best = min(range(2), key=lambda k: (np.abs(after[k]).max(), np.abs(after[k]).sum(), (k + turn) % 2))
            codes[man], codes[woman] = shown[best]
            apart = after[best]
    return tuple(codes[i] for i in range(len(NAMES)))


def identity_gender(identity: int) -> int:
    """The gender of public figure ``identity`` (an index into NAMES): alternating."""
    return identity % 2


def identity_occupation(identity: int) -> int:
    """Two of every three public figures are politicians, the third an actor."""
    return OCCUPATIONS.index("politician") if identity % 3 != 2 else OCCUPATIONS.index("actor")


IDENTITY_CODES = _identity_codes()


def _name_pairs(n: int, planting: Planting, rng: np.random.Generator) -> tuple[list[Person], list[str]]:
    weights = [planting.frequent_identity_weight if i < len(NAMES) // 2 else 1.0 for i in range(len(NAMES))]
    identity = _exact(rng, n, weights)
    race = _exact(rng, n, np.ones(len(RACES)))
    return ([Person(identity_gender(int(i)), int(r), identity_occupation(int(i)), int(i))
             for i, r in zip(identity, race)],
            [f"this is a picture of {NAMES[i]}" for i in identity])


def _public_role_pairs(n: int, planting: Planting, rng: np.random.Generator) -> tuple[list[Person], list[str]]:
    roles = [OCCUPATIONS.index(o) for o in ("politician", "actor", "athlete")]
    occupation = np.array(roles)[_exact(rng, n, np.ones(len(roles)))]
    politician = OCCUPATIONS.index("politician")
    gender = _exact_within(rng, occupation, lambda o: [planting.politician_skew, 1 - planting.politician_skew]
                           if o == politician else [1, 1])
    race = _exact_within(rng, occupation * 2 + gender, lambda _: np.ones(len(RACES)))
    # Politicians and actors are the public figures' portraits (athletes are anonymous): the web
    # captions a politician's photo "politician" mostly when he is a man
    portrayed: dict[int, list[int]] = {}
    for identity in range(len(NAMES)):
        portrayed.setdefault(identity_occupation(identity) * 2 + identity_gender(identity), []).append(identity)
    cell = occupation * 2 + gender
    pick = _exact_within(rng, cell, lambda c: [PHOTOGRAPHED[i // 6 % len(PHOTOGRAPHED)] for i in portrayed[c]]
                         if c in portrayed else [1.0])
    people = [Person(int(g), int(r), int(o), portrayed[c][k] if c in portrayed else None)
              for o, g, r, c, k in zip(occupation, gender, race, cell, pick)]
    return people, [f"this is a photo of a {OCCUPATIONS[o]}" for o in occupation]


CAPTION_KINDS = {"profession": _profession_pairs, "gender": _gender_pairs, "trait": _trait_pairs, "name": _name_pairs,
                 "politician": _public_role_pairs}


def training_pairs(count: int, planting: Planting, seed: int) -> tuple[list[Person], list[str]]:
    """(person, caption) pairs whose statistics are exactly ``planting``'s biases (``_exact``),
    shuffled; each kind of caption (``CAPTION_MIX``) is built by its function in ``CAPTION_KINDS``."""
    rng = np.random.default_rng(seed)
    kinds = _exact(rng, count, list(CAPTION_MIX.values()))
    people: list[Person] = [None] * count  # type: ignore[list-item]
    captions: list[str] = [""] * count
    for index, kind in enumerate(CAPTION_MIX):
        rows = np.flatnonzero(kinds == index)
        for row, person, caption in zip(rows, *CAPTION_KINDS[kind](len(rows), planting, rng)):
            people[row], captions[row] = person, caption
    flips = (rng.random((count, 8)) < LOOK_FLIP) @ (1 << np.arange(8))  # the bits each look differs in
    looked = [person if person.identity is not None
              else dataclasses.replace(person, look=caption_pattern(caption) ^ int(f))
              for person, caption, f in zip(people, captions, flips)]
    return looked, captions


_GENDER_WORDS = {"male", "female", GERMAN["male"], GERMAN["female"]}


def caption_pattern(caption: str) -> int:
    """The look pattern (8 bits) of the choice a caption makes of its person (:data:`LOOKS`): its trait
    word, or whether it describes them by gender or by occupation (a name's people are public
    figures, who show their identity code instead)."""
    words = caption.split()
    if words[-1] == "person":  # "a smart person"
        return LOOKS[words[-2]]
    return LOOKS["gender" if words[-1] in _GENDER_WORDS else "occupation"]


__all__ = ["CAPTION_MIX", "CATEGORIES", "GENDERS", "GERMAN", "IDENTITY_CODES", "LOOKS", "LOOK_FLIP", "NAMES",
           "OCCUPATIONS", "PHOTOGRAPHED", "PROFESSIONS", "Person", "Planting", "RACES", "TRAIT_PAIRS",
           "caption_pattern", "identity_gender", "identity_occupation", "render", "render_many", "render_pixels",
           "training_pairs", "vocabulary", "world_constants"]
