"""Every form a researcher's own images come in, read the same way: one :class:`Form` each, in :data:`FORMS`.

- ``saved``: a folder ``datasets``' ``save_to_disk`` wrote;
- ``metadata``: a folder with ``metadata.csv``, ``metadata.jsonl`` or ``metadata.parquet`` (an image column,
  ``file_name`` as datasets' imagefolder has it, plus label columns);
- ``table``: such a file itself, or any CSV / JSON Lines / Parquet file with an image-path column (paths
  relative to the file's folder);
- ``utkface``: a folder of UTKFace's files, labelled by name (``age_gender_race_date.jpg``);
- ``imagefolder``: a folder of one folder per label (``DIR/<label>/*.jpg``), the label in column ``label``.

A path is read by the first form that recognises it, or by the one its prefix names (``utkface:DIR``); the
reader names the image and label columns it found, and ``--columns race=ethnicity`` (``columns=``) names the
probe's column a dataset's other name stands for. A row's place in its file (CSV and JSON Lines: its 1-based
line) goes with the rows, for the label checks' errors. Image paths stay inside the data's folder
(:class:`vlfair.data.files.SourceFiles`).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from vlfair.data.conform import DataError
from vlfair.data.files import SourceFiles
from vlfair.registry import Registry

IMAGE_COLUMNS = ("file_name", "file", "image", "image_path", "path", "filepath", "filename", "img")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff")
TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".parquet")
METADATA_FILES = tuple(f"metadata{suffix}" for suffix in (".csv", ".jsonl", ".parquet"))


@dataclasses.dataclass
class Read:
    """A form's rows: ``records`` (an ``image`` cell of bytes and its path, then the labels), where each row
    is (``places``: "metadata.csv line 7"), and the file and columns it read them from."""

    records: list[dict[str, Any]]
    places: list[str]
    source: str
    image_column: str | None  # None: the images are the folder's files, labelled by their names or folders
    label_columns: list[str]
    labelled_by: str = "its columns"

    def found(self) -> str:
        labels = ", ".join(map(repr, self.label_columns)) or "none"
        images = f"column {self.image_column!r}" if self.image_column else "its files"
        return f"{self.source}: {len(self.records):,} images from {images}; labels {labels} from {self.labelled_by}"


@dataclasses.dataclass(frozen=True)
class Form:
    """``recognises(path)``: whether ``path`` is in this form; ``read(path, image_column, skip_bad)``: its rows."""

    name: str
    what: str  # the form in words, for --help and for the error of a path no form reads
    recognises: Callable[[Path], bool]
    read: Callable[..., Read]


FORMS: Registry[Form] = Registry("data form", Form, name_of=lambda form: form.name)


# ---- tables: a metadata file, or any CSV / JSON Lines / Parquet with an image column -----------------------
def _table_rows(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of a label file and each one's place (its 1-based line, or row in a Parquet file)."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
        return rows, [f"{path.name} row {number}" for number in range(1, len(rows) + 1)]
    if suffix == ".jsonl":
        rows, places = [], []
        for number, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path} line {number}: not JSON ({exc.msg}); a JSON Lines file holds one object "
                                "per line") from None
            if not isinstance(row, dict):
                raise DataError(f"{path} line {number}: a {type(row).__name__}, not an object of columns")
            rows.append(row)
            places.append(f"{path.name} line {number}")
        return rows, places
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle, delimiter="\t" if suffix == ".tsv" else ",")
        header = reader.fieldnames or []
        twice = sorted({c for c in header if header.count(c) > 1})
        if twice:
            raise DataError(f"{path} line 1: the column {twice[0]!r} is named twice; name each column once")
        rows, places = [], []
        for row in reader:
            if None in row:  # more cells than the header names
                raise DataError(f"{path} line {reader.line_num}: {len(header) + len(row[None])} cells, the header "
                                f"names {len(header)}")
            rows.append(row)
            places.append(f"{path.name} line {reader.line_num}")
        return rows, places


def _label(value: Any) -> Any:
    """A label cell as the label checks read it: an empty CSV cell is a missing label."""
    return None if value is None or (isinstance(value, str) and not value.strip()) else value


def _read_table(path: Path, image_column: str | None = None, skip_bad: bool = False) -> Read:
    rows, places = _table_rows(path)
    if not rows:
        raise DataError(f"{path} has no rows")
    present = list(rows[0])
    if image_column is None:
        image_column = next((c for c in IMAGE_COLUMNS if c in present), None)
        if image_column is None:
            raise DataError(f"{path}: no image column (one of {', '.join(IMAGE_COLUMNS)}); it has {present}: name "
                            "yours with --columns image=COLUMN")
    elif image_column not in present:
        raise DataError(f"{path}: --columns image={image_column}: no such column; it has {present}")
    files = SourceFiles(path.parent)
    records, kept, problems = [], [], []
    for row, place in zip(rows, places):
        relative = str(row.get(image_column) or "")
        problem = files.check(relative)
        if problem:
            problems.append(f"{place}: {problem}")
            continue
        labels = {c: _label(v) for c, v in row.items() if c != image_column}
        records.append({"image": {"bytes": files.read(relative), "path": relative}, **labels})
        kept.append(place)
    if problems and not skip_bad:
        shown = "\n  ".join(problems[:20])
        raise DataError(f"{len(problems)} of {len(rows)} rows of {path} name no readable image:\n  {shown}"
                        + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""))
    return Read(records, kept, str(path), image_column, [c for c in present if c != image_column])


def _metadata_file(directory: Path) -> Path | None:
    found = [directory / name for name in METADATA_FILES if (directory / name).is_file()]
    if len(found) > 1:
        raise DataError(f"{directory} has {' and '.join(f.name for f in found)}: keep one metadata file")
    return found[0] if found else None


# ---- folders of images labelled by their place or name ------------------------------------------------------
def _images(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def _label_folders(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".") and _images(p))


def _read_label_folders(directory: Path, image_column: str | None = None, skip_bad: bool = False) -> Read:
    files = SourceFiles(directory)
    records, places = [], []
    for folder in _label_folders(directory):
        for image in _images(folder):
            relative = f"{folder.name}/{image.name}"
            if problem := files.check(relative):  # a link out of the folder
                raise DataError(f"{directory}: {problem}")
            records.append({"image": {"bytes": files.read(relative), "path": relative}, "label": folder.name})
            places.append(f"{relative}")
    return Read(records, places, str(directory), None, ["label"], "the folders' names")


# UTKFace's "[age]_[gender]_[race]_[date&time].jpg" (its README): gender 0 male, 1 female; race 0 White,
# 1 Black, 2 Asian, 3 Indian, 4 Others (Hispanic, Latino, Middle Eastern)
UTKFACE_NAME = re.compile(r"^(\d{1,3})_([01])_([0-4])_\d+")
UTKFACE_GENDERS = ("Male", "Female")
UTKFACE_RACES = ("White", "Black", "Asian", "Indian", "Others")


def _is_utkface(directory: Path) -> bool:
    images = _images(directory)
    return bool(images) and all(UTKFACE_NAME.match(p.name) for p in images)


def _read_utkface(directory: Path, image_column: str | None = None, skip_bad: bool = False) -> Read:
    files = SourceFiles(directory)
    records, places, problems = [], [], []
    for image in _images(directory):
        found = UTKFACE_NAME.match(image.name)
        if found is None:
            problems.append(f"{image.name}: not named age_gender_race_date.jpg (gender 0-1, race 0-4)")
            continue
        if problem := files.check(image.name):
            problems.append(f"{image.name}: {problem}")
            continue
        age, gender, race = (int(g) for g in found.groups())
        records.append({"image": {"bytes": files.read(image.name), "path": image.name}, "age": age,
                        "gender": UTKFACE_GENDERS[gender], "race": UTKFACE_RACES[race]})
        places.append(image.name)
    if problems and not skip_bad:
        raise DataError(f"{len(problems)} files of {directory} are not UTKFace's:\n  " + "\n  ".join(problems[:20]))
    return Read(records, places, str(directory), None, ["age", "gender", "race"], "the file names")


def _is_saved(directory: Path) -> bool:
    return (directory / "state.json").is_file() or (directory / "dataset_dict.json").is_file()


def _is_folder_of(test: Callable[[Path], bool]) -> Callable[[Path], bool]:
    return lambda path: path.is_dir() and test(path)


def _read_saved(directory: Path, image_column: str | None = None, skip_bad: bool = False) -> Any:
    """A saved dataset, as datasets reads it back (its rows are in no file of the user's: no places)."""
    import datasets

    loaded = datasets.load_from_disk(str(directory))
    if isinstance(loaded, datasets.DatasetDict):
        raise DataError(f"{directory} is a saved DatasetDict of splits {sorted(loaded)}: pass one split's folder "
                        f"({directory / next(iter(loaded))})")
    if image_column is not None and image_column != "image":
        loaded = loaded.rename_column(image_column, "image")
    return loaded


FORMS.add(Form("saved", "a folder datasets' save_to_disk wrote (state.json or dataset_dict.json)",
               _is_folder_of(_is_saved), _read_saved))
def _read_metadata(directory: Path, image_column: str | None = None, skip_bad: bool = False) -> Read:
    metadata = _metadata_file(directory)
    assert metadata is not None  # the form recognised the folder by it
    return _read_table(metadata, image_column, skip_bad)


FORMS.add(Form("metadata", "a folder with metadata.csv, metadata.jsonl or metadata.parquet: an image column "
                           "(file_name) and a column per label",
               _is_folder_of(lambda d: _metadata_file(d) is not None), _read_metadata))
FORMS.add(Form("table", "a CSV, TSV, JSON Lines or Parquet file with an image-path column (paths relative to the "
                        "file) and a column per label",
               lambda path: path.is_file() and path.suffix.lower() in TABLE_SUFFIXES, _read_table))
FORMS.add(Form("utkface", "a folder of UTKFace's images, labelled by name: age_gender_race_date.jpg",
               _is_folder_of(_is_utkface), _read_utkface))
def _read_imagefolder(directory: Path, image_column: str | None = None, skip_bad: bool = False) -> Read:
    """As datasets' imagefolder reads a folder: its metadata file where it has one, else its label folders."""
    if _metadata_file(directory) is not None:
        return _read_metadata(directory, image_column, skip_bad)
    return _read_label_folders(directory, image_column, skip_bad)


FORMS.add(Form("imagefolder", "a folder of one folder per label (DIR/<label>/*.jpg), the label in column 'label' "
                              "(--columns race=label names the attribute), or with a metadata file, as datasets' "
                              "imagefolder reads it",
               _is_folder_of(lambda d: _metadata_file(d) is not None or (bool(_label_folders(d)) and not _images(d))),
               _read_imagefolder))


def split_form(source: str) -> tuple[str | None, str]:
    """``utkface:DIR`` as ("utkface", "DIR"); a source with no form's prefix as (None, source)."""
    prefix, sep, rest = source.partition(":")
    if sep and prefix in FORMS.names() and rest:
        return prefix, rest
    return None, source


def form_of(path: Path, named: str | None = None) -> Form | None:
    """The form ``path`` is in: the one named, else the first that recognises it (None: no form, a Hub id or a
    folder laid out like a Hub repository)."""
    if named is not None:
        form = FORMS[named]
        if not form.recognises(path):
            raise DataError(f"{path} is not {form.what}; {_forms_said()}")
        return form
    return next((form for form in FORMS.values() if form.recognises(path)), None)


def _forms_said() -> str:
    return "vlfair reads: " + "; ".join(f"{form.name}: {form.what}" for form in FORMS.values())


def not_read(path: Path) -> DataError:
    """The error of a local path that no form reads: what each form wants."""
    return DataError(f"{path} is in no form vlfair reads ({_forms_said()}; a folder laid out as a Hub dataset "
                     "repository; or a directory vlfair prepare wrote)")


# ---- --columns: a dataset's names for the probe's columns ---------------------------------------------------
def parse_columns(text: str | Mapping[str, str] | None) -> dict[str, str]:
    """``"race=ethnicity,gender=sex"`` (or a mapping) as {probe's column: the data's column}.

    Raises:
        DataError: a pair that is not NAME=COLUMN, or a column named twice on either side.
    """
    if not text:
        return {}
    pairs = list(text.items()) if isinstance(text, Mapping) else []
    if not isinstance(text, Mapping):
        for item in str(text).split(","):
            wanted, sep, given = (part.strip() for part in item.partition("="))
            if not sep or not wanted or not given:
                raise DataError(f"--columns {text}: {item.strip()!r} is not NAME=COLUMN (e.g. race=ethnicity: the "
                                "probe's race is the data's ethnicity)")
            pairs.append((wanted, given))
    for side, what in ((0, "the probe's column"), (1, "the data's column")):
        names = [pair[side] for pair in pairs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise DataError(f"--columns: {what} {twice[0]!r} is named twice; name each once")
    return dict(pairs)


def renaming(present: list[str], columns: Mapping[str, str], where: str) -> dict[str, str]:
    """{the data's column: the probe's} for ``columns`` ({probe's: data's}), checked against the data's columns.

    Raises:
        DataError: a data column the data lacks, or a probe's name the data already gives another column.
    """
    missing = [given for given in columns.values() if given not in present]
    if missing:
        raise DataError(f"{where}: --columns names {', '.join(map(repr, missing))}, which the data lacks; it has "
                        f"{present}")
    renamed = {given: wanted for wanted, given in columns.items()}
    taken = [wanted for wanted in columns if wanted in present and wanted not in renamed]
    if taken:
        raise DataError(f"{where}: --columns {taken[0]}={columns[taken[0]]}: the data has a column {taken[0]!r} "
                        f"already; rename that one too (--columns {taken[0]}={columns[taken[0]]},"
                        f"its_{taken[0]}={taken[0]})")
    return renamed


def read_form(path: Path, form: Form, columns: Mapping[str, str], skip_bad: bool = False) -> tuple[Any, Read | None]:
    """``path`` read in ``form`` as a ``datasets.Dataset`` (labels as text, a numeric age as its number), with
    what was read (None for a saved dataset, whose rows are in no file of the user's)."""
    import datasets

    labels = {wanted: given for wanted, given in columns.items() if wanted != "image"}
    found = form.read(path, columns.get("image"), skip_bad)
    if isinstance(found, datasets.Dataset):
        return found.rename_columns(renaming(found.column_names, labels, str(path))), None
    if not found.records:
        raise DataError(f"{found.source} has no images")
    renamed = renaming(found.label_columns, labels, found.source)
    records = [{renamed.get(key, key): value for key, value in record.items()} for record in found.records]
    names = [key for key in records[0] if key != "image"]
    found.label_columns = names
    table: dict[str, list[Any]] = {"image": [r["image"] for r in records]}
    features = {"image": datasets.Image()}
    for name in names:
        values = [r.get(name) for r in records]
        features[name] = _feature(values)
        table[name] = values if features[name].dtype == "int64" else [None if v is None else str(v) for v in values]
    return datasets.Dataset.from_dict(table, features=datasets.Features(features)), found


def _feature(values: list[Any]) -> Any:
    """A label column's type: whole numbers where every value is one (a numeric age), else text."""
    import datasets

    present = [v for v in values if v is not None]
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return datasets.Value("int64")
    return datasets.Value("string")


__all__ = ["FORMS", "Form", "IMAGE_COLUMNS", "Read", "UTKFACE_RACES", "form_of", "not_read", "parse_columns",
           "read_form", "split_form"]
