"""Builders: raw study sources -> Parquet (images embedded), a dataset card, optionally the Hub.

Used by ``vlfair prepare NAME --source PATH --out DIR`` and by ``datasets_scripts/<name>/build.py``.
Every problem in the raw data (a path outside the source, a listed but missing image, a
duplicate file, a label outside the vocabulary such as an age bin a spreadsheet turned into
"03-Sep") is reported with its row; the build fails unless ``skip_bad`` is set, and then the
skipped rows are listed in the card. A problem of the source itself (a missing label or metadata
file, a file that cannot be read, no listed image found at all) is a :class:`SourceError`, which
``skip_bad`` cannot help.

The card is the dataset's own (its name, its licence: cards/<name>.md) only when the builder
recognised the dataset's published release in the source (``Built.published``: FairFace's own label
files, Multi30K's own image lists); otherwise, and always where vlfair cannot tell the published data
from any other (P-FI's and the professions study's images, a plugin's folder), the card is one of
one's own data: named for it (``pretty_name``, by default the source folder's name), its licence
``unknown``.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import json
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets

from vlfair._version import __version__
from vlfair.atomic import OutputKind, atomic_output
from vlfair.data.files import SourceFiles
from vlfair.data.registry import SCHEMAS, SourceFile, buildable, dataset_spec
from vlfair.data.schemas import (
    ADULT_AGE_BINS,
    AGE_GROUP_OF_BIN,
    MULTI30K_LANGUAGES,
    PFI_CATEGORIES,
    label_problem,
    normalize_label,
)
from vlfair.imageio import image_problem
from vlfair.logging import library_progress_bars, progress_bars_enabled
from vlfair.yamlfile import load_yaml, read_front_matter


@dataclasses.dataclass(frozen=True)
class Problem:
    where: str  # "fairface_label_val.csv row 17", a file name, or "" (the message names it)
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class BuildError(ValueError):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        shown = "\n  ".join(str(p) for p in problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"{len(problems)} bad rows in the source (pass --skip-bad / skip_bad=True to leave "
                         f"them out and list them in the card):\n  {shown}{more}")


class SourceError(BuildError):
    """The source itself cannot be read (a missing or malformed file): --skip-bad cannot help. One
    problem is said in one line; several (a CSV's ragged rows) listed."""

    def __init__(self, problems: list[Problem]):
        super().__init__(problems)
        self.args = (str(problems[0]) if len(problems) == 1 else
                     "the source cannot be read:\n  " + "\n  ".join(str(p) for p in problems[:20])
                     + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""),)


def _missing(folder: Path, names: list[str], what: str) -> SourceError:
    """The source lacks a file it needs: one line naming the file(s) and the folder."""
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" or {names[-1]}"
    return SourceError([Problem("", f"{folder} has no {listed} ({what})")])


@dataclasses.dataclass
class Built:
    name: str
    configs: dict[str, dict[str, datasets.Dataset]]  # config -> split -> rows
    skipped: list[Problem]
    source: str
    # the source is the dataset's published release, as the builder recognised it: the card is the
    # dataset's own (its name and licence); False: a card of one's own data (module docstring)
    published: bool = False
    provenance: str = ""  # how the builder told (or why it cannot tell), for the card


def _reading(rows: list, where: str) -> Any:
    """``rows`` with vlfair's bar: reading and decoding every image is the long step of a build."""
    from tqdm.auto import tqdm

    return tqdm(rows, desc=f"reading {where}", unit="img", disable=not progress_bars_enabled())


class RowCollector:
    """Turns raw metadata rows into records, collecting every problem with its row."""

    def __init__(self, schema_name: str, files: SourceFiles, where: str):
        self.schema = SCHEMAS[schema_name]
        self.files, self.where = files, where
        self.problems: list[Problem] = []
        self.seen: dict[str, int] = {}
        self.rows = 0  # rows recorded
        self.missing: list[str] = []  # the files of those whose image is not there

    def record(self, row: int, file: str, labels: dict[str, Any], extra: dict[str, Any] | None = None) -> dict | None:
        where = f"{self.where} row {row}"
        problem = self.files.check(file)
        self.rows += 1
        if problem == f"image {file!r} is listed but missing":
            self.missing.append(file)
        key = self.files.key(file) if file else file
        if problem is None and key in self.seen:
            problem = f"duplicate file name {file!r} (also row {self.seen[key]})"
        data = self.files.read(file) if problem is None else b""
        if problem is None and (bad := image_problem(data)):  # decoded now: a bad image fails the build
            problem = f"image {file!r} is {bad}"
        out = {}
        for name, value in labels.items():
            column = self.schema.column(name)
            value = normalize_label(value, column) if column is not None else value
            if problem is None and column is not None and (wrong := label_problem(value, column)):
                problem = f"column '{name}' {wrong}"
            out[name] = value
        if problem is not None:
            self.problems.append(Problem(where, problem))
            return None
        self.seen[key] = row
        return {"image": {"bytes": data, "path": file}, **out, **(extra or {})}

    def check_found(self) -> None:
        """Not one listed image in the source (the images are elsewhere, or --source is the wrong
        folder): a SourceError, not every row a bad one that --skip-bad would leave out."""
        if self.rows and len(self.missing) == self.rows:
            inside = f"{self.files.root}" + (" or its zip" if self.files.archive else "")
            raise SourceError([Problem("", f"none of the {self.rows} images {self.where} lists is in {inside} (the "
                                           f"first: {self.missing[0]!r}); is --source the folder that holds them?")])


def _dataset(records: list[dict], schema_name: str) -> datasets.Dataset:
    schema = SCHEMAS[schema_name]
    kinds = {"image": datasets.Image(), "string": datasets.Value("string"), "int": datasets.Value("int64"),
             "bool": datasets.Value("bool")}
    columns = [c for c in schema.columns if records and c.name in records[0]]
    features = datasets.Features({c.name: kinds[c.kind] for c in columns})
    data = {c.name: [r[c.name] for r in records] for c in columns}
    return datasets.Dataset.from_dict(data, features=features)


def _finish(name: str, configs: dict, problems: list[Problem], skip_bad: bool, source: Path,
            published: bool = False, provenance: str = "") -> Built:
    if problems and not skip_bad:
        raise BuildError(problems)
    return Built(name, configs, problems, str(source), published, provenance)


def _read_table(path: Path) -> tuple[list[dict[str, str]], list[str]]:
    """The rows of a metadata file (CSV, JSON Lines or Parquet, by its suffix), every cell as text ("" for a
    missing or null one, as an empty CSV cell reads), and its columns; a file that is missing or cannot be
    read is a SourceError naming it (a CSV's rows of the wrong width, a JSON line that is not an object: each)."""
    if not path.is_file():
        raise _missing(path.parent, [path.name], "the file the builder reads")
    if path.suffix == ".jsonl":
        return _read_jsonl(path)
    if path.suffix == ".parquet":
        return _read_parquet(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            rows, header = list(reader), list(reader.fieldnames or [])  # (read from the file: an empty one has none)
    except UnicodeDecodeError as exc:
        raise SourceError([Problem(path.name, f"is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as "
                                              "UTF-8")]) from None
    width = len(header)
    ragged = [Problem(f"{path.name} row {number}",
                      f"has {width - list(row.values()).count(None) + len(row.get(None, []))} fields, "
                      f"the header has {width}")
              for number, row in enumerate(rows) if None in row or None in row.values()]
    if ragged:
        raise SourceError(ragged)
    return rows, header


def _text(value: Any) -> str:
    """A JSON or Parquet cell as a CSV would hold it: None -> "", true -> "true", 3 -> "3"."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def _read_jsonl(path: Path) -> tuple[list[dict[str, str]], list[str]]:
    rows, columns = [], {}  # columns in the order they first appear
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise SourceError([Problem(path.name, f"is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as "
                                              "UTF-8")]) from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SourceError([Problem(f"{path.name} line {number}", f"is not JSON ({exc.msg})")]) from None
        if not isinstance(row, dict):
            raise SourceError([Problem(f"{path.name} line {number}", f"is a JSON {type(row).__name__}, not an object "
                                                                     "of column: value")])
        columns.update(dict.fromkeys(row))
        rows.append(row)
    return [{c: _text(row.get(c)) for c in columns} for row in rows], list(columns)


def _read_parquet(path: Path) -> tuple[list[dict[str, str]], list[str]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow's ArrowInvalid and OSError alike: the file is not Parquet
        raise SourceError([Problem(path.name, f"cannot be read as Parquet ({exc})")]) from None
    return [{c: _text(v) for c, v in row.items()} for row in table.to_pylist()], list(table.column_names)


def _require_columns(rows: list[dict], columns: list[str], path: Path, present: list[str] | None = None) -> None:
    present = present if present is not None else (list(rows[0]) if rows else [])
    missing = [c for c in columns if c not in present]
    if missing:
        raise SourceError([Problem(path.name, f"lacks columns {missing}; it has {present}")])
    if not rows:
        raise SourceError([Problem(path.name, "has no rows")])


# a folder's metadata file, as datasets' imagefolder (and so vlfair run --dataset DIR) reads one
METADATA_FILES = ("metadata.csv", "metadata.jsonl", "metadata.parquet")
# the column of an image's path: datasets' imagefolder's name, and the name vlfair's builders read before
FILE_COLUMNS = ("file_name", "file")


def _metadata(source: Path, metadata: str | None, columns: list[str]) -> tuple[list[dict[str, str]], str, str]:
    """The rows of the folder's metadata file (``metadata``, or the one of :data:`METADATA_FILES` it
    holds), its name, and its image column (``file_name`` or ``file``). No such file, two of them, a
    file with neither column (or both), without one of ``columns``, or with no rows is a SourceError
    naming the file (and the folder)."""
    names = [metadata] if metadata else list(METADATA_FILES)
    found = [source / name for name in names if (source / name).is_file()]
    if not found:
        raise _missing(source, names, "the metadata file: an image's path and its labels a row")
    if len(found) > 1:
        raise SourceError([Problem("", f"{source} has {' and '.join(p.name for p in found)}: keep one metadata file")])
    path = found[0]
    rows, header = _read_table(path)
    named = [c for c in FILE_COLUMNS if c in header]
    if len(named) > 1:
        raise SourceError([Problem(path.name, f"has both {' and '.join(named)}: name each image in one column "
                                              "(file_name, as datasets' imagefolder reads it)")])
    if not named:
        raise SourceError([Problem(path.name, f"has no image column ({' or '.join(FILE_COLUMNS)}: each image's path "
                                              f"inside the folder); it has {header}")])
    _require_columns(rows, [named[0], *columns], path, header)
    return rows, path.name, named[0]


# ---- FairFace -----------------------------------------------------------------------------
FAIRFACE_SPLITS = {"train": "train", "val": "validation"}
FAIRFACE_COLUMNS = ["file", "age", "gender", "race", "service_test"]
# FairFace's own label files (github.com/joojs/fairface, CC BY 4.0): their header is FAIRFACE_COLUMNS, their
# rows these many, their images {train,val}/1.jpg .. numbered in order. A label file that is all three is
# taken for FairFace's (its card is FairFace's, its licence FairFace's); any other in their format (one's own
# faces labelled in FairFace's vocabulary, a subset, rows re-ordered) is one's own data, carded as such.
FAIRFACE_RELEASE_ROWS = {"train": 86_744, "val": 10_954}
FAIRFACE_PROVENANCE = ("FairFace's own label files have its header, its 86,744 (train) and 10,954 (val) rows and "
                       "their images train|val/1.jpg .. numbered in order")


def _fairface_own(raw: str, rows: list[dict[str, str]], header: list[str]) -> bool:
    return (header == FAIRFACE_COLUMNS and len(rows) == FAIRFACE_RELEASE_ROWS[raw]
            and all(values["file"] == f"{raw}/{number}.jpg" for number, values in enumerate(rows, start=1)))


def build_fairface(source: str | Path, skip_bad: bool = False, **_: Any) -> Built:
    """From the official release: fairface_label_{train,val}.csv beside train/ and val/ (or the zip)."""
    source = Path(source)
    labels = {raw: source / f"fairface_label_{raw}.csv" for raw in FAIRFACE_SPLITS}
    if not any(path.exists() for path in labels.values()):
        raise _missing(source, [p.name for p in labels.values()][::-1], "FairFace's label files, one or both")
    archives = sorted(source.glob("*.zip"))
    files = SourceFiles(source, archives[0] if archives else None)
    splits, problems, own = {}, [], []
    for raw, split in FAIRFACE_SPLITS.items():
        path = labels[raw]
        if not path.exists():
            continue
        rows, header = _read_table(path)
        _require_columns(rows, FAIRFACE_COLUMNS, path, header)
        own.append(_fairface_own(raw, rows, header))
        collector = RowCollector("fairface", files, path.name)
        records = []
        for row, values in enumerate(_reading(rows, path.name)):
            service = values["service_test"].strip().lower()
            if service not in ("true", "false"):
                collector.problems.append(Problem(f"{path.name} row {row}",
                                                  f"service_test {values['service_test']!r} is not True/False"))
                continue
            record = collector.record(row, values["file"], {"age": values["age"], "gender": values["gender"],
                                                            "race": values["race"]},
                                      {"file": values["file"], "service_test": service == "true"})
            if record is not None:
                record["age_group"] = AGE_GROUP_OF_BIN[record["age"]]
                records.append(record)
        collector.check_found()
        problems += collector.problems
        splits[split] = _dataset(records, "fairface")
    adults = {s: d.filter(lambda b: [a in ADULT_AGE_BINS for a in b["age"]], batched=True) for s, d in splits.items()}
    published = all(own)
    provenance = (f"vlfair recognised FairFace's release: {FAIRFACE_PROVENANCE}" if published else
                  f"its label files are in FairFace's format but not FairFace's own: {FAIRFACE_PROVENANCE}, "
                  "and only those are taken for FairFace's")
    return _finish("fairface", {"default": splits, "adults": adults}, problems, skip_bad, source, published,
                   provenance)


# ---- Multi30K -----------------------------------------------------------------------------
# SHA-256 of Multi30K's published image list of the 2016 test set (task1 test_2016_flickr.images.txt and
# task2 test_2016.images.txt list the same 1,000 Flickr30K images), over its names joined by "\n": a source
# whose lists are it is Multi30K's release (its card is Multi30K's); any other list is one's own data.
MULTI30K_IMAGE_LIST = "871e8ecafc66fb13e044ecccf669d04a865b4c58553227df86b933f0337a1563"


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def _find(source: Path, name: str) -> Path | None:
    for candidate in (f"{name}.gz", name):
        found = sorted(source.rglob(candidate))
        if found:
            return found[0]
    return None


def build_multi30k(source: str | Path, images: str | Path | None = None, skip_bad: bool = False, **_: Any) -> Built:
    """From the raw caption files (gzipped, one line per image), the split lists and Flickr30K images.

    translation: test_2016_flickr.{en,de,fr,cs}(.gz) + test_2016_flickr.images.txt;
    independent: test_2016.{1..5}.{en,de}(.gz) + test_2016.images.txt.
    """
    source = Path(source)
    if images is None:
        raise SourceError([Problem("--images", "Multi30K needs the Flickr30K image directory (--images DIR)")])
    files = SourceFiles(images)
    configs, problems, own = {}, [], []
    portions = {
        "translation": ("test_2016_flickr.images.txt",
                        [(1, {lang: f"test_2016_flickr.{lang}" for lang in MULTI30K_LANGUAGES})]),
        "independent": ("test_2016.images.txt",
                        [(j, {lang: f"test_2016.{j}.{lang}" for lang in ("en", "de")}) for j in range(1, 6)]),
    }
    if not any(_find(source, list_name) for list_name, _captions in portions.values()):
        raise _missing(source, [list_name for list_name, _captions in portions.values()],
                       "Multi30K's image lists, one or both, anywhere under it")
    for portion, (list_name, captions) in portions.items():
        list_path = _find(source, list_name)
        if list_path is None:
            continue
        names = [n.strip() for n in _lines(list_path) if n.strip()]
        own.append(hashlib.sha256("\n".join(names).encode()).hexdigest() == MULTI30K_IMAGE_LIST)
        collector = RowCollector("multi30k", files, list_path.name)
        columns = {}
        for index, per_language in captions:
            for language, stem in per_language.items():
                path = _find(source, stem)
                if path is None:
                    if language in ("en", "de"):  # a file the portion needs: the source lacks it, no row is bad
                        raise _missing(source, [f"{stem}.gz", stem], f"the {language} captions of {list_name}")
                    continue
                lines = _lines(path)
                if len(lines) != len(names):
                    raise SourceError([Problem(path.name, f"has {len(lines)} lines but {list_name} lists {len(names)} "
                                                          "images (line i describes image i)")])
                columns[(index, language)] = lines
        records = []
        for row, image_file in enumerate(_reading(names, list_path.name)):
            image = collector.record(row, image_file, {"portion": portion}, {"image_file": image_file})
            if image is None:
                continue  # its problem is reported once, not once per caption
            for index, per_language in captions:
                texts = {lang: columns[(index, lang)][row] for lang in per_language if (index, lang) in columns}
                records.append({**image, "caption_index": index, **texts})
        collector.check_found()
        problems += collector.problems
        configs[portion] = {"test": _dataset(records, "multi30k")}
    published = all(own)
    provenance = ("vlfair recognised Multi30K's release: its image lists are Multi30K's own (their SHA-256)"
                  if published else "its image lists are not Multi30K's own (their SHA-256 differs)")
    return _finish("multi30k", configs, problems, skip_bad, source, published, provenance)


# ---- P-FI and professions -------------------------------------------------------------------
PFI_OPTIONAL = ("party", "state", "district", "city", "sport", "role")
# the studies' images are not published where vlfair could recognise them: a card of these is always one of
# one's own data (named for it, its licence unknown)
UNKNOWABLE = "vlfair cannot tell the {study}'s own images from any others in its format"


def build_pfi(source: str | Path, skip_bad: bool = False, metadata: str | None = None, **_: Any) -> Built:
    """From a portrait directory and a metadata file (metadata.csv, .jsonl or .parquet): file_name (or
    file), name, category, gender (+ party, state, ...)."""
    source = Path(source)
    rows, where, file = _metadata(source, metadata, ["name", "category", "gender"])
    collector = RowCollector("pfi", SourceFiles(source), where)
    records = []
    for row, values in enumerate(_reading(rows, where)):
        extra = {"name": values["name"], **{c: (values.get(c) or None) for c in PFI_OPTIONAL}}
        record = collector.record(row, values[file], {"category": values["category"].strip().lower(),
                                                      "gender": values["gender"]}, extra)
        if record is not None:
            records.append(record)
    collector.check_found()
    default = _dataset(records, "pfi")
    configs = {"default": {"test": default}}
    for category in PFI_CATEGORIES:
        subset = default.filter(lambda b, c=category: [x == c for x in b["category"]], batched=True)
        if subset.num_rows:
            configs[category] = {"test": subset}
    return _finish("pfi", configs, collector.problems, skip_bad, source,
                   provenance=UNKNOWABLE.format(study="P-FI study"))


def metadata_builder(name: str, metadata: str | None = None, published: bool = False) -> Callable[..., Built]:
    """The builder of a dataset whose raw release is a folder holding its images and a metadata file
    (``metadata``, else metadata.csv, .jsonl or .parquet, as datasets' imagefolder reads a folder) with
    each image's ``file_name`` (or ``file``, relative to the folder) and one column per column of the
    schema; every image is read and checked, every label checked against the schema, as the studies'
    builders do. ``published``: every such folder is the dataset's own release (its card is the
    dataset's, with its licence); by default vlfair cannot tell, and the card is one of one's own data.
    A plugin's dataset takes it as its ``DatasetSpec.builder``; it states its files (``source_files``)."""
    return _MetadataBuilder(name, metadata, published)


@dataclasses.dataclass(frozen=True)
class _MetadataBuilder:
    name: str
    metadata: str | None
    published: bool

    def __call__(self, source: str | Path, skip_bad: bool = False, **options: Any) -> Built:
        if options:
            raise ValueError(f"{self.name}: unexpected options {sorted(options)}")
        source = Path(source)
        columns = [c for c in SCHEMAS[self.name].columns if c.kind != "image"]
        rows, where, file = _metadata(source, self.metadata, [c.name for c in columns if c.required])
        collector = RowCollector(self.name, SourceFiles(source), where)
        records = [r for row, values in enumerate(_reading(rows, where))
                   if (r := collector.record(row, values[file], {c.name: _typed(values.get(c.name), c.kind)
                                                                 for c in columns})) is not None]
        collector.check_found()
        provenance = (f"its builder takes every such folder for {self.name}'s own release" if self.published else
                      f"vlfair cannot tell {self.name}'s own data from any other folder in its format")
        return _finish(self.name, {"default": {"test": _dataset(records, self.name)}}, collector.problems, skip_bad,
                       source, self.published, provenance)

    @property
    def source_files(self) -> tuple[SourceFile, ...]:
        """What it reads, for ``vlfair prepare --help``: the metadata file and the schema's columns."""
        columns = [c for c in SCHEMAS[self.name].columns if c.kind != "image"]
        return (SourceFile(self.metadata or " | ".join(METADATA_FILES),
                           ("file_name", *(c.name for c in columns if c.required)),
                           tuple(c.name for c in columns if not c.required),
                           note="file_name (or file): each image's path inside --source"),)


def _typed(text: str | None, kind: str) -> Any:
    """A CSV cell as its column's kind: a whole number, a flag (true/false, 1/0, yes/no) or text; empty: None.
    A cell that is not of its kind stays text, and the schema's check names it."""
    if text is None or not text.strip():
        return None
    if kind == "int" and text.strip().lstrip("-").isdigit():
        return int(text)
    flags = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
    if kind == "bool" and text.strip().lower() in flags:
        return flags[text.strip().lower()]
    return text


# the images a professions tree holds, by suffix; ".mpo": a camera's multi-picture JPEG, read at its first frame
TREE_IMAGES = (".jpg", ".jpeg", ".png", ".mpo")


def build_professions(source: str | Path, skip_bad: bool = False, metadata: str | None = None, **_: Any) -> Built:
    """From a metadata file (metadata.csv, .jsonl or .parquet: file_name or file, profession, gender, race),
    or, with none, a ``profession/gender/race/*.jpg`` tree."""
    source = Path(source)
    files = SourceFiles(source)
    names = [metadata] if metadata else list(METADATA_FILES)
    if any((source / name).is_file() for name in names):
        rows, where, file = _metadata(source, metadata, ["profession", "gender", "race"])
    else:
        file = "file"
        rows = [{"file": p.relative_to(source).as_posix(), "profession": p.parts[-4], "gender": p.parts[-3],
                 "race": p.parts[-2]}
                for p in sorted(source.rglob("*")) if p.suffix.lower() in TREE_IMAGES
                and len(p.relative_to(source).parts) == 4]
        if not rows:
            raise _missing(source, names + ["profession/gender/race/*.jpg tree"],
                           "the professions' metadata file, or their images in folders named for their labels")
        where = "tree"
    collector = RowCollector("professions", files, where)
    records = [r for row, v in enumerate(_reading(rows, where))
               if (r := collector.record(row, v[file], {"gender": v["gender"], "profession": v["profession"],
                                                        "race": v["race"]})) is not None]
    collector.check_found()
    return _finish("professions", {"default": {"test": _dataset(records, "professions")}}, collector.problems,
                   skip_bad, source, provenance=UNKNOWABLE.format(study="professions study"))


# ---- output -------------------------------------------------------------------------------
DATA_FILE = "{config}/{split}-00000-of-00001.parquet"  # the Hub's shard naming; the card points at these files
def size_category(rows: int) -> str:
    """The Hub's size_categories bucket of a row count."""
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                         (10_000_000, "1M<n<10M")):
        if rows < limit:
            return label
    return "n>10M"


def with_class_labels(dataset: datasets.Dataset, schema_name: str) -> datasets.Dataset:
    """Label columns as ClassLabel: the schema's vocabulary as names, or (labels the schema leaves
    open, e.g. the professions) the names present, sorted."""
    for column in SCHEMAS[schema_name].columns:
        if column.name in dataset.column_names and (column.vocabulary or column.label):
            names = list(column.vocabulary or sorted({v for v in dataset[column.name][:] if v is not None}))
            dataset = dataset.cast_column(column.name, datasets.ClassLabel(names=names))
    return dataset


def render_card(built: Built, files: dict[str, dict[str, str]], infos: dict[str, datasets.DatasetInfo],
                pretty_name: str | None = None) -> str:
    """The dataset card: cards/<name>.md's YAML completed with huggingface_hub's DatasetCardData
    (configs pointing at ``files``, dataset_info, size and licence fields), and its body.

    The card is the dataset's own (its template: its name and licence) only when the builder
    recognised its published release (``built.published``); any other data gets :data:`OWN_CARD`:
    named ``pretty_name`` (by default the source folder's name), its licence ``unknown``."""
    from huggingface_hub import DatasetCardData

    spec = dataset_spec(built.name)
    own = not built.published or spec.card is None
    template = OWN_CARD if own else spec.function("card")()
    where = f"the card template of dataset {built.name!r}"
    meta_end = template.index("\n---\n", 4)
    front, body = load_yaml(template[4:meta_end], where, first_line=2), template[meta_end + 5:]
    rows = sum(info.splits.total_num_examples for config, info in infos.items() if config == "default") or \
        sum(info.splits.total_num_examples for info in infos.values())
    card = DatasetCardData(**front, size_categories=[size_category(rows)])
    if own or pretty_name:
        card.pretty_name = pretty_name or Path(built.source).resolve().name or built.source
    if spec.languages:
        card.language = list(spec.languages)
    # keys DatasetCardData has no field for are set through its dict interface (the YAML keeps this order);
    # a licence the Hub does not list by id is named, and linked to the card's own section stating its terms
    if not own and card.license == "other" and spec.license:
        card["license_name"], card["license_link"] = spec.license
    card["configs"] = [{"config_name": config, "data_files": [{"split": s, "path": p} for s, p in splits.items()],
                        **({"default": True} if config == "default" else {})} for config, splits in files.items()]
    datasets.info.DatasetInfosDict(infos).to_dataset_card_data(card)
    card["vlfair"] = {"schema": built.name, "version": __version__, "skipped_rows": len(built.skipped),
                      "published_release": built.published}
    table = "\n".join(f"| {config} | {split} | {info.splits[split].num_examples} |" for config, info in infos.items()
                      for split in info.splits)
    skipped = ("\n".join(f"- {p}" for p in built.skipped) if built.skipped
               else "None: every row of the source was used.")
    body = string.Template(body).safe_substitute(
        configs_table="| config | split | rows |\n|---|---|---|\n" + table, skipped_rows=skipped,
        vlfair_version=__version__, source=built.source, dataset=built.name, pretty_name=card.pretty_name,
        provenance=built.provenance or "its builder says nothing of where the data comes from")
    return f"---\n{card.to_yaml()}\n---\n{body}"


# The card of one's own data: anything but a dataset's published release as its builder recognised it (and
# a dataset without a card template of its own). Named for the data (--name, else the source folder's
# name); no licence, for vlfair knows none.
OWN_CARD = """---
license: unknown
tags:
- vlfair
---
# ${pretty_name} (prepared by vlfair)

Images and labels from `${source}`, prepared by vlfair ${vlfair_version} (`vlfair prepare ${dataset}`)
in the columns of vlfair's `${dataset}` dataset. The card names the data for what it is, not for
`${dataset}`: ${provenance}.

${configs_table}

## Licence

Not known to vlfair, so the card states none (`license: unknown`). Whoever holds these images and
labels knows their terms: write them here, and in `license`, before sharing the dataset.

## Skipped rows

${skipped_rows}
"""

# a prepared dataset's folder (vlfair prepare --out): replaced as a whole, only when it holds nothing else
PREPARED_OUTPUT = OutputKind("prepared dataset")


def write_prepared(built: Built, out: str | Path, push_to_hub: str | None = None,
                   pretty_name: str | None = None) -> Path:
    """Parquet per config and split (labels as ClassLabel) and the card (:func:`render_card`, naming the
    data ``pretty_name``), laid out as a Hub dataset repository: plain ``datasets.load_dataset(out[, config])``
    reads it, and the Hub gets the same files.

    ``out`` is written as a whole (``vlfair.atomic``): built in a folder beside it and swapped in
    when complete, so a prepare stopped midway leaves an earlier prepared dataset there whole."""
    with atomic_output(out, PREPARED_OUTPUT) as staging:
        _write_prepared(built, staging, pretty_name)
    if push_to_hub:
        push(out, push_to_hub)
    return Path(out)


def _write_prepared(built: Built, out: Path, pretty_name: str | None = None) -> None:
    files: dict[str, dict[str, str]] = {}
    infos: dict[str, datasets.DatasetInfo] = {}
    for config, splits in built.configs.items():
        split_infos, features = datasets.SplitDict(), None
        for split, ds in splits.items():
            ds = with_class_labels(ds, built.name)
            relative = DATA_FILE.format(config=config, split=split)
            (out / relative).parent.mkdir(parents=True, exist_ok=True)
            ds.to_parquet(str(out / relative))
            files.setdefault(config, {})[split] = relative
            split_infos.add(datasets.SplitInfo(name=split, num_bytes=ds.data.nbytes, num_examples=ds.num_rows))
            features = ds.features
        infos[config] = datasets.DatasetInfo(
            features=features, splits=split_infos, dataset_size=sum(i.num_bytes for i in split_infos.values()),
            download_size=sum((out / path).stat().st_size for path in files[config].values()))
    (out / "README.md").write_text(render_card(built, files, infos, pretty_name))


def push(directory: str | Path, repo_id: str) -> None:
    """Upload a prepared directory in one commit: its card and every file the card names."""
    from huggingface_hub import CommitOperationAdd, HfApi

    directory = Path(directory)
    card = read_front_matter(directory / "README.md")  # a prepared directory's card always has its configs
    paths = [f["path"] for c in card["configs"] for f in c["data_files"]]
    operations = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(directory / path))
                  for path in ["README.md", *paths]]
    api = HfApi()
    api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
    api.create_commit(repo_id, operations, repo_type="dataset", commit_message="vlfair prepare")


@library_progress_bars("datasets.utils.logging")  # "Filter", "Casting the dataset", "Creating parquet": short steps
def prepare(name: str, source: str | Path, out: str | Path, push_to_hub: str | None = None, skip_bad: bool = False,
            pretty_name: str | None = None, **options: Any) -> Path:
    """Build ``name`` from its raw source into ``out`` (and the Hub when ``push_to_hub`` names a repo).
    ``pretty_name``: what the card calls the data (by default, for data other than the dataset's
    published release, the source folder's name). A source (or ``images``) that is not a folder is
    a SourceError, before anything is read."""
    if name not in buildable():
        raise ValueError(f"no builder for {name!r}; builders: {buildable()}")
    for option, folder in (("--source", source), ("--images", options.get("images"))):
        if folder is not None and not Path(folder).is_dir():
            said = "is a file, not a folder" if Path(folder).exists() else "does not exist"
            raise SourceError([Problem("", f"{option} {folder} {said}")])
    built = dataset_spec(name).function("builder")(source, skip_bad=skip_bad, **options)
    return write_prepared(built, out, push_to_hub, pretty_name)
