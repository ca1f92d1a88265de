"""The studies' four datasets, each one spec (:mod:`vlfair.data.registry`): its schema, synthetic twin,
subsets, builder and card, and the Space's sampling. They are the registry's lazy entries, named in
:mod:`vlfair.data` (this module registers nothing: it is read when one of them is first asked for)."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any

from vlfair.data.conform import DataError
from vlfair.data.registry import DatasetSpec, SourceFile
from vlfair.data.schemas import (
    ADULT_AGE_BINS,
    AGE_GROUP_OF_BIN,
    FAIRFACE,
    MULTI30K,
    MULTI30K_LANGUAGES,
    MULTI30K_PORTIONS,
    PFI,
    PFI_CATEGORIES,
    PROFESSIONS,
)
from vlfair.data.taxonomy import age_range


def _card(name: str) -> Callable[[], str]:
    """The card template shipped for ``name`` (cards/<name>.md, installed as vlfair._cards)."""
    return lambda: resources.files("vlfair._cards").joinpath(f"{name}.md").read_text(encoding="utf-8")


# ---- subsets: name -> function of a conformed dataset -------------------------------------
def _needs_age(ds: Any, subset: str, reads: str) -> None:
    if "age" not in ds.column_names:
        raise DataError(f"the subset {subset} {reads} column 'age', which the data lacks (it has {ds.column_names}): "
                        "name your age column with --columns age=COLUMN, or read every row with --subset default")


def _adult(label: Any) -> bool:
    """A bin of adults aged 20-59, as the FairFace-traits study's "adults (20-60)": FairFace's four bins
    ``ADULT_AGE_BINS``, and of other bins (``age_bins``) those whose every age lies in 20-59."""
    covered = age_range(label) if label is not None else None
    return label in ADULT_AGE_BINS or (covered is not None and covered[0] >= 20 and covered[1] <= 59)


def _adults(ds: Any) -> Any:
    _needs_age(ds, "adults", "keeps ages 20-59: it reads")
    return ds.filter(lambda batch: [_adult(a) for a in batch["age"]], batched=True)


def _age_groups(ds: Any) -> Any:
    _needs_age(ds, "age_groups", "groups FairFace's age bins: it reads")
    other = sorted({str(a) for a in ds.unique("age")} - set(AGE_GROUP_OF_BIN))
    if other:
        raise DataError(f"the subset age_groups groups FairFace's nine age bins into the multilingual study's five; "
                        f"the data's ages {other} are not FairFace's bins")
    return ds.map(lambda batch: {"age_group": [AGE_GROUP_OF_BIN[a] for a in batch["age"]]}, batched=True)


def _equal(column: str, value: str) -> Callable[[Any], Any]:
    return lambda ds: ds.filter(lambda batch: [v == value for v in batch[column]], batched=True)


# what each builder reads from --source (vlfair prepare --help lists them); a folder's metadata file as
# datasets' imagefolder (and vlfair run) reads one: metadata.csv, .jsonl or .parquet, the image in file_name
METADATA = "metadata.csv | metadata.jsonl | metadata.parquet"
IMAGE_PATH = "file_name (or file): each image's path inside --source"
PROFESSIONS_FILES = (
    SourceFile(METADATA, ("file_name", "profession", "gender", "race"), note=IMAGE_PATH),
    SourceFile("or, with no metadata file, profession/gender/race/*.jpg", note="the labels are the folders' names "
               "(.jpg, .jpeg, .png, .mpo)"))
FAIRFACE_FILES = (
    SourceFile("fairface_label_train.csv, fairface_label_val.csv (one or both)",
               ("file", "age", "gender", "race", "service_test"),
               note="FairFace's label files; file: each image's path (val/1.jpg) inside --source or in a .zip "
                    "beside the label files (FairFace's image zip)"),)
MULTI30K_FILES = (
    SourceFile("test_2016_flickr.images.txt + test_2016_flickr.{en,de,fr,cs}(.gz)",
               note="the translation portion: an image file name a line; line i of each caption file describes "
                    "image i (fr, cs optional)"),
    SourceFile("test_2016.images.txt + test_2016.{1..5}.{en,de}(.gz)",
               note="the independent portion, five captions per image; one portion or both, anywhere under --source"),
    SourceFile("--images DIR", note="the Flickr30K images the lists name"))
PFI_FILES = (SourceFile(METADATA, ("file_name", "name", "category", "gender"),
                        ("party", "state", "district", "city", "sport", "role"), note=IMAGE_PATH),)

PROFESSIONS_SPEC = DatasetSpec(
    PROFESSIONS, twin="vlfair.data.synthetic:professions", twin_size=480,  # 12 x 2 x 4 x 5, as in the study
    builder="vlfair.data.build:build_professions", card=_card("professions"),
    license=("professions-images-terms", "README.md"), sample_by=("profession", "gender", "race"),
    source_files=PROFESSIONS_FILES)
FAIRFACE_SPEC = DatasetSpec(
    FAIRFACE, twin="vlfair.data.synthetic:fairface", twin_size=252,  # every age x gender x race cell twice
    subsets={"adults": _adults, "age_groups": _age_groups},
    builder="vlfair.data.build:build_fairface", card=_card("fairface"), sample_by=("race", "gender"),
    hub={"source": "HuggingFaceM4/FairFace", "config": "0.25", "split": "validation"}, source_files=FAIRFACE_FILES)
MULTI30K_SPEC = DatasetSpec(
    MULTI30K, twin="vlfair.data.synthetic:multi30k", twin_size=40,
    subsets={portion: _equal("portion", portion) for portion in MULTI30K_PORTIONS},
    default_subset="translation",  # its two portions have different rows: never mixed by default
    builder="vlfair.data.build:build_multi30k", card=_card("multi30k"),
    license=("multi30k-and-flickr30k-terms", "README.md"), languages=MULTI30K_LANGUAGES,
    source_files=MULTI30K_FILES)
PFI_SPEC = DatasetSpec(
    PFI, twin="vlfair.data.synthetic:pfi", twin_size=40,
    subsets={category: _equal("category", category) for category in PFI_CATEGORIES},
    builder="vlfair.data.build:build_pfi", card=_card("pfi"), license=("p-fi-sources-terms", "README.md"),
    sample_by=("category", "gender"), source_files=PFI_FILES)
