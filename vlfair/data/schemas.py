"""One validated schema per study dataset, with the label vocabularies the studies use (each
registered with its dataset: :mod:`vlfair.data.studies`).

Labels are joined by name, never by integer id: a column stored as a ClassLabel (as on the
Hub, in an order that differs between sources) is mapped to its names, spellings are unified
through ``ALIASES``, and every value is checked against the vocabulary.
"""

from __future__ import annotations

import dataclasses
from typing import Any

FAIRFACE_RACES = ("White", "Black", "Latino_Hispanic", "East Asian", "Southeast Asian", "Indian", "Middle Eastern")
GENDERS = ("Male", "Female")
FAIRFACE_AGE_BINS = ("0-2", "3-9", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69", "more than 70")
ADULT_AGE_BINS = ("20-29", "30-39", "40-49", "50-59")  # the FairFace-traits study's adults (20-60)
# The multilingual study's five age groups, derived from FairFace's bins.
AGE_GROUP_OF_BIN = {
    "0-2": "0-2", "3-9": "3-19", "10-19": "3-19", "20-29": "20-49", "30-39": "20-49", "40-49": "20-49",
    "50-59": "50-69", "60-69": "50-69", "more than 70": "70+",
}
AGE_GROUPS = ("0-2", "3-19", "20-49", "50-69", "70+")
PFI_CATEGORIES = ("senator", "representative", "mayor", "actor", "athlete")
MULTI30K_PORTIONS = ("translation", "independent")
MULTI30K_LANGUAGES = ("en", "de", "fr", "cs")

# Other sources' spellings -> the vocabulary's (compared after lower-casing and stripping).
ALIASES = {
    "latino hispanic": "Latino_Hispanic", "latino_hispanic": "Latino_Hispanic", "latino": "Latino_Hispanic",
    "east asian": "East Asian", "east_asian": "East Asian", "southeast asian": "Southeast Asian",
    "southeast_asian": "Southeast Asian", "middle eastern": "Middle Eastern", "middle_eastern": "Middle Eastern",
    "white": "White", "black": "Black", "indian": "Indian",
    "male": "Male", "man": "Male", "men": "Male", "female": "Female", "woman": "Female", "women": "Female",
    "70+": "more than 70", "more than 70": "more than 70",
    # the P-FI study's own folder names ("the images in each folder of 'senator', 'mayors',
    # 'representatives', 'athletes', and 'actors'"), beside vlfair's singular categories
    "senators": "senator", "mayors": "mayor", "representatives": "representative", "athletes": "athlete",
    "actors": "actor",
}


@dataclasses.dataclass(frozen=True)
class Column:
    """kind: "image", "string", "int" or "bool"; vocabulary: allowed values (None: any). Columns with a
    vocabulary, or marked ``label``, are class labels: prepared data stores them as ClassLabel.

    An optional (``required=False``) nullable column is always present after ``conform``:
    filled with None where a source lacks it (FairFace's Hub copy has no file names).
    """

    name: str
    kind: str = "string"
    vocabulary: tuple[str, ...] | None = None
    required: bool = True
    nullable: bool = False
    label: bool = False  # a class label whose names the schema leaves open (stored as ClassLabel too)


@dataclasses.dataclass(frozen=True)
class Schema:
    name: str
    columns: tuple[Column, ...]
    description: str

    @property
    def required(self) -> list[str]:
        return [c.name for c in self.columns if c.required]

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)


PROFESSIONS = Schema("professions", (
    Column("image", "image"), Column("profession", label=True), Column("gender", vocabulary=GENDERS),
    Column("race", label=True),
), "the professions study: images per profession x gender x race")
FAIRFACE = Schema("fairface", (
    Column("image", "image"), Column("file", required=False, nullable=True),
    # age and service_test are FairFace's, which one's own faces may lack: a probe that reads age says so
    # (traits' adults, retrieval's attributes); no probe reads service_test
    Column("age", vocabulary=FAIRFACE_AGE_BINS, required=False),
    Column("gender", vocabulary=GENDERS), Column("race", vocabulary=FAIRFACE_RACES),
    Column("service_test", "bool", required=False),
    Column("age_group", vocabulary=AGE_GROUPS, required=False),
), "FairFace faces with age bin, gender and race labels")
MULTI30K = Schema("multi30k", (
    Column("image", "image"), Column("image_file"), Column("portion", vocabulary=MULTI30K_PORTIONS),
    Column("caption_index", "int"), Column("en"), Column("de"),
    Column("fr", required=False, nullable=True), Column("cs", required=False, nullable=True),
), "Multi30K test 2016 images with captions per language")
PFI = Schema("pfi", (
    Column("image", "image"), Column("name"), Column("category", vocabulary=PFI_CATEGORIES),
    Column("gender", vocabulary=GENDERS),
    *(Column(c, required=False, nullable=True) for c in ("party", "state", "district", "city", "sport", "role")),
), "P-FI public-figure portraits with name, category and gender")


def label_problem(value: Any, column: Column) -> str | None:
    """What is wrong with ``value`` in ``column`` (the end of a sentence naming the column), or
    None: the one check of a label, for every source (``prepare``'s rows, a loaded dataset's).

    A missing value where the column is not nullable; in a class-label column, a blank string
    (it would become a group named '' or '  '); a value outside the vocabulary."""
    from vlfair.stats import is_blank  # the measures' own rule of a label that shows nothing

    if value is None:
        return None if column.nullable else "is empty"
    if (column.vocabulary is not None or column.label) and isinstance(value, str) and is_blank(value):
        return f"is blank ({value!r}): a label must name its group"
    if column.vocabulary is not None and value not in column.vocabulary:
        return f"has {value!r}, not one of {list(column.vocabulary)}"
    return None


def normalize_label(value: Any, column: Column) -> Any:
    """A label in the vocabulary's spelling (unchanged when there is no vocabulary or no alias)."""
    if column.vocabulary is None or value is None or value in column.vocabulary:
        return value
    alias = ALIASES.get(str(value).strip().lower())
    return alias if alias in column.vocabulary else value
