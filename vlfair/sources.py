"""Uniform, validated access to the image cells of whatever the user passes as a dataset."""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

_IMAGE_VALUE = "a PIL image, an {'bytes', 'path'} dict, a file path or an HWC uint8 array"


class ImageSource:
    """Rows of one image column: ``cell(i)``, ``len()``, and a fingerprint of the content (taken when
    first asked for: :func:`row_digests` never needs it, and a column of paths stats every file for it)."""

    def __init__(self, cells: Any, fingerprint: str | Callable[[], str], name: str):
        self._cells, self._fingerprint, self.name = cells, fingerprint, name

    @property
    def fingerprint(self) -> str:
        if callable(self._fingerprint):
            self._fingerprint = self._fingerprint()
        return self._fingerprint

    def __len__(self) -> int:
        return len(self._cells)

    def cell(self, row: int) -> Any:
        return self._cells[row]


def image_source(dataset: Any, image_column: str = "image", fingerprint: bool = True) -> ImageSource:
    """Wrap a ``datasets.Dataset``, a pandas DataFrame, a dict of columns or a list of images
    (``fingerprint=False``: its fingerprint taken only when asked for, as :func:`row_digests` never does).

    Raises:
        ValueError: empty dataset, missing column (the message lists the present ones), or a
            column whose type cannot hold images (the message names it); with ``fingerprint``,
            a cell that is not an image (the message names its row).
    """
    source = _wrap(dataset, image_column)
    if len(source) == 0:
        raise ValueError(f"dataset is empty: column {image_column!r} has no rows to embed")
    if fingerprint:
        source.fingerprint  # noqa: B018 - taken now: a cell that is not an image is an error before any work
    return source


def _wrap(dataset: Any, column: str) -> ImageSource:
    try:
        import datasets
    except ImportError:  # pragma: no cover - datasets is a core dependency
        datasets = None
    if datasets is not None and isinstance(dataset, datasets.IterableDataset):
        raise ValueError("streaming (Iterable) datasets cannot be cached by row; load the split or .take(n) it first")
    if datasets is not None and isinstance(dataset, datasets.Dataset):
        return _hf_source(dataset, column)
    if _is_dataframe(dataset) or isinstance(dataset, Mapping):
        if column not in dataset:
            raise ValueError(f"column {column!r} not found; columns are {list(dataset.keys())}")
        cells = list(dataset[column])
        return ImageSource(cells, lambda: _fingerprint_cells(cells, column), column)
    if isinstance(dataset, Sequence) and not isinstance(dataset, (str, bytes)):
        cells = list(dataset)
        return ImageSource(cells, lambda: _fingerprint_cells(cells, "<list>"), "<list>")
    raise ValueError(
        f"cannot read images from a {type(dataset).__name__}; pass a datasets.Dataset, a pandas "
        "DataFrame, a dict of columns, or a list of images / paths"
    )


def _is_dataframe(obj: Any) -> bool:
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "columns")


def _hf_source(dataset: Any, column: str) -> ImageSource:
    import datasets

    if column not in dataset.column_names:
        raise ValueError(f"column {column!r} not found; columns are {dataset.column_names}")
    feature = dataset.features[column]
    if isinstance(feature, datasets.Image):
        # Undecoded cells: decoding happens in our workers, where a bad file becomes a row error.
        dataset = dataset.cast_column(column, datasets.Image(decode=False))
    elif isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string"):
        pass  # file paths
    elif isinstance(feature, dict) and {"bytes", "path"} & set(feature):
        pass  # an image struct stored without the Image feature
    else:
        raise ValueError(
            f"column {column!r} has type {feature!r}, which cannot hold images; "
            "expected an Image feature, file path strings or {'bytes', 'path'} structs"
        )
    # Index the column once per row: dataset[row][column] would read every column.
    return ImageSource(_HFColumn(dataset, column), lambda: _hf_fingerprint(dataset, column), column)


def _hf_fingerprint(dataset: Any, column: str) -> str:
    """The table's fingerprint (``Dataset._fingerprint``) and, for each cell that names a file instead
    of holding its bytes (a path string, an image struct whose bytes are null), that file's digest,
    as a list of paths is keyed (``_cell_digest``: path, size, mtime). The table's fingerprint covers
    only the path strings, so a file replaced under its name would be served its old embeddings."""
    import pyarrow as pa
    import pyarrow.compute as pc

    digest = hashlib.sha256(dataset._fingerprint.encode())
    table = dataset.data.column(column)  # every row of the files, whatever a selection keeps: cheap to ask
    kind = table.type
    if pa.types.is_struct(kind) and kind.get_field_index("bytes") >= 0 and \
            pc.struct_field(table, "bytes").null_count == 0:
        return digest.hexdigest()  # every image is in the table: its fingerprint covers them
    rows = dataset.select_columns([column]).with_format("arrow")
    for start in range(0, len(rows), 1024):
        for offset, cell in enumerate(rows[start:start + 1024][column].to_pylist()):
            if isinstance(cell, str) or (isinstance(cell, Mapping) and cell.get("bytes") is None):
                digest.update(_cell_digest(cell, start + offset, column))
    return digest.hexdigest()


class _HFColumn:
    def __init__(self, dataset: Any, column: str):
        self.dataset = dataset.select_columns([column])
        self.column = column

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, row: int) -> Any:
        return self.dataset[row][self.column]


def _fingerprint_cells(cells: list[Any], where: str) -> str:
    """Content hash of in-memory cells; files are identified by path, size and mtime."""
    digest = hashlib.sha256()
    for row, cell in enumerate(cells):
        digest.update(_cell_digest(cell, row, where))
    return digest.hexdigest()


def _cell_digest(cell: Any, row: int, where: str) -> bytes:
    if isinstance(cell, Image.Image):
        return hashlib.sha256(f"{cell.mode}{cell.size}".encode() + cell.tobytes()).digest()
    if isinstance(cell, (str, os.PathLike)):
        try:
            stat = os.stat(cell)
            return f"{os.fspath(cell)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()
        except OSError:
            return f"{os.fspath(cell)}\0missing".encode()  # reported as a bad row when read
    if isinstance(cell, Mapping) and ("bytes" in cell or "path" in cell):
        if cell.get("bytes") is not None:
            return hashlib.sha256(cell["bytes"]).digest()
        return _cell_digest(cell.get("path") or "", row, where)
    if isinstance(cell, np.ndarray) and cell.dtype == np.uint8:
        return hashlib.sha256(str(cell.shape).encode() + cell.tobytes()).digest()
    raise ValueError(f"{where} row {row} holds a {type(cell).__name__}, expected {_IMAGE_VALUE}")


def _content_digest(cell: Any, row: int, where: str) -> bytes:
    """The digest a sample's id is made of: SHA-256 of the image file's bytes as stored, whether the
    cell holds them (a prepared dataset, an image struct) or names the file (a path, a struct whose
    bytes are null: a folder read by datasets' imagefolder), so one image has one id in every form
    of the data. An image only in memory (a PIL image, an array) has the digest of its pixels."""
    if isinstance(cell, Mapping) and cell.get("bytes") is None and cell.get("path"):
        cell = cell["path"]
    if isinstance(cell, (str, os.PathLike)):
        try:
            stat = os.stat(cell)
        except OSError:
            return f"{os.fspath(cell)}\0missing".encode()  # reported as a bad row when read
        return _file_digest(os.path.realpath(cell), stat.st_size, stat.st_mtime_ns)
    return _cell_digest(cell, row, where)


@functools.lru_cache(maxsize=2**16)
def _file_digest(path: str, size: int, mtime_ns: int) -> bytes:
    """SHA-256 of a file's bytes, remembered by its path, size and modification time: a probe asks
    for its rows' ids more than once (traits: each of its questions), a file is read for them once."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(2**20):
            digest.update(block)
    return digest.digest()


def row_digests(dataset: Any, rows: Any, image_column: str = "image") -> list[str]:
    """A stable key per row of ``rows``: 16 hex digits of SHA-256 over the SHA-256 of its image file's
    bytes as stored (:func:`_content_digest`: the same whether the cell holds the bytes or the file's
    path; an in-memory image: its pixels), ``#2``, ``#3`` appended to repeats (an image with several
    captions), so two runs over the same images, loaded raw or prepared, can be paired row by row."""
    source = image_source(dataset, image_column, fingerprint=False)
    keys: list[str] = []
    seen: dict[str, int] = {}
    for row in rows:
        key = hashlib.sha256(_content_digest(source.cell(int(row)), int(row), source.name)).hexdigest()[:16]
        seen[key] = seen.get(key, 0) + 1
        keys.append(key if seen[key] == 1 else f"{key}#{seen[key]}")
    return keys
