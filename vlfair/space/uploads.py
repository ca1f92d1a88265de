"""Uploaded images with group labels -> a dataset a probe accepts; each problem is named."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import datasets
import pandas as pd
from PIL import Image, UnidentifiedImageError

from vlfair.data.registry import SCHEMAS
from vlfair.data.schemas import normalize_label
from vlfair.data.synthetic import columns_to_dataset
from vlfair.imageio import UnusableImage, decode, file_type
from vlfair.probes.base import UploadSpec
from vlfair.space.limits import MB, Limits, SpaceInputError

# what PIL decodes without plugins, by file type (imageio.file_type: a phone's MPO is the JPEG it is)
IMAGE_FORMATS = ("JPEG", "PNG", "WEBP", "BMP", "GIF", "TIFF")
# said of an upload sent again after its run was answered (session.RequestStore.forget_uploads)
UPLOADS_GONE = "a run's uploads are removed once it is answered; upload them again"
FILE_COLUMN = "file"
FILE_COLUMN_ALIASES = ("file", "file_name", "filename", "image")


class _Uploads(Mapping[str, UploadSpec]):
    """probe -> its :class:`UploadSpec` (``Probe.upload``), for every registered probe that takes
    uploads, plugins included: read from the registry on each use."""

    @staticmethod
    def _specs() -> dict[str, UploadSpec]:
        from vlfair.probes import probe_class, probe_names

        return {name: spec for name in probe_names() if (spec := probe_class(name).upload) is not None}

    def __getitem__(self, probe: str) -> UploadSpec:
        return self._specs()[probe]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs())

    def __len__(self) -> int:
        return len(self._specs())


UPLOADS = _Uploads()


def upload_spec(probe: str) -> UploadSpec:
    if probe not in UPLOADS:
        raise SpaceInputError(f"the {probe} probe takes no uploaded images here; probes that do: {sorted(UPLOADS)}")
    return UPLOADS[probe]


def check_images(paths: Sequence[str | Path], limits: Limits) -> list[Path]:
    """Every upload is a decodable image of an allowed type within the caps; else the first problem, named."""
    files = [Path(p) for p in paths or []]
    if not files:
        raise SpaceInputError("no images were uploaded")
    if len(files) > limits.max_files:
        raise SpaceInputError(f"{len(files)} files were uploaded; this Space takes at most {limits.max_files}")
    seen: dict[str, Path] = {}
    for path in files:
        if path.name in seen:
            raise SpaceInputError(f"two uploaded files are named {path.name!r}; labels are matched by file name, "
                                  "so names must be unique")
        seen[path.name] = path
    gone = [p.name for p in files if not p.is_file()]
    if gone:  # a page (or an API call) sending again what an earlier answer had read
        raise SpaceInputError(f"{len(gone)} uploaded file(s) are no longer on this Space ({', '.join(gone[:5])}): "
                              f"{UPLOADS_GONE}")
    sizes = {p: p.stat().st_size for p in files}
    if sum(sizes.values()) > limits.max_total_bytes:
        raise SpaceInputError(f"the uploads total {sum(sizes.values()) / MB:.1f} MB; the limit is "
                              f"{limits.max_total_bytes / MB:g} MB")
    for path in files:
        if sizes[path] > limits.max_file_bytes:
            raise SpaceInputError(f"{path.name} is {sizes[path] / MB:.1f} MB; the limit is "
                                  f"{limits.max_file_bytes / MB:g} MB per image")
        _check_image(path, limits)
    return files


def _check_image(path: Path, limits: Limits) -> None:
    try:
        with Image.open(path) as image:
            if file_type(image) not in IMAGE_FORMATS:
                raise SpaceInputError(f"{path.name} is a {image.format} image; "
                                      f"accepted types: {', '.join(IMAGE_FORMATS)}")
            if image.width * image.height > limits.max_pixels:
                raise SpaceInputError(f"{path.name} has {image.width}x{image.height} pixels; the limit is "
                                      f"{limits.max_pixels / 1e6:g} megapixels")
            decode(image)  # as a run decodes it: a truncated, corrupt or unusable file fails here, not mid-run
    except UnusableImage as exc:  # decodes, but not to a picture a model can be shown
        raise SpaceInputError(f"{path.name} is {exc.problem}") from None
    except UnidentifiedImageError:
        raise SpaceInputError(f"{path.name} is not an image (accepted types: {', '.join(IMAGE_FORMATS)})") from None
    except Image.DecompressionBombError:  # PIL refuses to even open it: far over this Space's limit
        raise SpaceInputError(f"{path.name} declares more pixels than this Space accepts ({limits.max_pixels / 1e6:g} "
                              "megapixels at most): a decompression bomb?") from None
    except (OSError, SyntaxError, ValueError) as exc:
        if isinstance(exc, SpaceInputError):
            raise
        raise SpaceInputError(f"{path.name} cannot be decoded as an image ({exc}); is it truncated or corrupt?") \
            from None


def read_labels_csv(path: str | Path) -> pd.DataFrame:
    """A CSV with a file-name column (file, file_name, filename or image) and one column per label."""
    if not Path(path).is_file():
        raise SpaceInputError(f"the labels file {Path(path).name} is no longer on this Space: {UPLOADS_GONE}")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise SpaceInputError(f"the labels file {Path(path).name} cannot be read as CSV: {exc}") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def label_template(paths: Sequence[str | Path], probe: str) -> pd.DataFrame:
    """One row per uploaded image, its label columns empty: the table users fill in the UI."""
    spec = upload_spec(probe)
    return pd.DataFrame({FILE_COLUMN: [Path(p).name for p in paths or []], **{c: "" for c in spec.labels}})


def uploads_to_dataset(paths: Sequence[str | Path], labels: pd.DataFrame | None, probe: str,
                       limits: Limits) -> datasets.Dataset:
    """The checked uploads with their labels as a dataset in the probe's columns (rows in upload order)."""
    spec = upload_spec(probe)
    files = check_images(paths, limits)
    table = _label_rows(labels, spec, [p.name for p in files])
    schema = SCHEMAS[spec.schema]
    for column in spec.labels:
        definition = schema.column(column)
        assert definition is not None, f"{spec.schema} has no column {column!r}"  # UPLOADS names schema columns
        values = [normalize_label(v, definition) for v in table[column]]
        if definition.vocabulary is not None:
            wrong = [(f, v) for f, v in zip(table[FILE_COLUMN], values) if v not in definition.vocabulary]
            if wrong:
                listed = "; ".join(f"{f}: {v!r}" for f, v in wrong[:5])
                raise SpaceInputError(f"{len(wrong)} label(s) in column '{column}' are not among "
                                      f"{list(definition.vocabulary)} ({listed})")
        table[column] = values
    _check_groups(table, spec)
    columns = {"image": [{"bytes": p.read_bytes(), "path": p.name} for p in files],
               **{c: table[c].tolist() for c in spec.labels},
               **{c: [v] * len(files) for c, v in spec.fixed.items()}}
    if spec.file_column:
        columns[spec.file_column] = [p.name for p in files]
    return columns_to_dataset(columns, f"{len(files)} uploaded images labelled by the user ({probe} probe)")


def _label_rows(labels: pd.DataFrame | None, spec: UploadSpec, names: list[str]) -> pd.DataFrame:
    """The label rows in upload order, with every uploaded image labelled exactly once."""
    if labels is None or len(labels.columns) == 0:
        raise SpaceInputError(f"no labels: upload a CSV with columns {[FILE_COLUMN, *spec.labels]} or fill in the "
                              "label table")
    labels = labels.rename(columns={c: str(c).strip() for c in labels.columns})
    file_column = next((c for c in FILE_COLUMN_ALIASES if c in labels.columns), None)
    if file_column is None:
        raise SpaceInputError(f"the labels have no file-name column (one of {list(FILE_COLUMN_ALIASES)}); "
                              f"columns: {list(labels.columns)}")
    missing = [c for c in spec.labels if c not in labels.columns]
    if missing:
        raise SpaceInputError(f"the labels lack column(s) {missing}; this probe needs {[FILE_COLUMN, *spec.labels]}, "
                              f"the labels have {list(labels.columns)}")
    table = labels[[file_column, *spec.labels]].rename(columns={file_column: FILE_COLUMN})
    table = table.fillna("").astype(str).apply(lambda column: column.str.strip())
    table[FILE_COLUMN] = [Path(f).name for f in table[FILE_COLUMN]]
    table = table[table.ne("").any(axis=1)]  # blank rows (the UI table's trailing row) carry nothing
    repeated = sorted(table[FILE_COLUMN][table[FILE_COLUMN].duplicated()].unique())
    if repeated:
        raise SpaceInputError(f"the labels list these files more than once: {repeated[:5]}")
    unknown = sorted(set(table[FILE_COLUMN]) - set(names))
    if unknown:
        raise SpaceInputError(f"the labels name {len(unknown)} file(s) that were not uploaded: {unknown[:5]}")
    unlabelled = [n for n in names if n not in set(table[FILE_COLUMN])]
    if unlabelled:
        raise SpaceInputError(f"missing labels for {len(unlabelled)} uploaded image(s): {unlabelled[:5]}; "
                              "give every image a row")
    table = table.set_index(FILE_COLUMN).loc[names].reset_index()
    empty = [(f, c) for c in spec.labels for f, v in zip(table[FILE_COLUMN], table[c]) if v == ""]
    if empty:
        listed = "; ".join(f"{f} has no {c!r}" for f, c in empty[:5])
        raise SpaceInputError(f"missing labels: {len(empty)} empty cell(s) ({listed})")
    return table


def _check_groups(table: pd.DataFrame, spec: UploadSpec) -> None:
    if len(table) < 2:
        raise SpaceInputError("at least 2 images are needed")
    for column in spec.groups:
        counts = table[column].value_counts()
        if len(counts) < 2:
            raise SpaceInputError(f"all images have {column} = {counts.index[0]!r}; the probe compares {column} "
                                  "groups, so at least two are needed")
        small = counts[counts < 2]
        if len(small):
            listed = "; ".join(f"{column} = {value!r}: {n} image ({table[FILE_COLUMN][table[column] == value].iloc[0]})"
                               for value, n in small.items())
            raise SpaceInputError(f"fewer than 2 images in a group ({listed}); every compared group needs at least 2")


UPLOAD_HELP = ("Upload up to {max_files} images (JPEG, PNG, WEBP, BMP, GIF or TIFF; at most {max_mb:g} MB each) "
               "and give each a label: a CSV with a `file` column (the image's file name) and the probe's label "
               "columns, or the table below. Columns per probe: "
               + "; ".join(f"{probe}: {', '.join(spec.labels)}" for probe, spec in UPLOADS.items())
               + ". Every compared group needs at least 2 images.")
