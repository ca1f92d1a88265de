"""Per-sample results: what a probe's metrics aggregate, one row per sample, kept beside results.json.

A probe run writes ``samples.parquet``: each row's identity in the dataset (``row``, its index in
the data as given, and ``id``, a stable key from the image's content), its group columns and one
column per per-sample quantity (a CLIPScore, a trait confidence per pair, a prediction per
language). The file's metadata holds what the analysis needs besides the rows (the run's
``facts``: a temperature, a sampling record; its scoring ``warnings``), the run's header
(probe, settings, model, dataset) and the columns written (a file missing one is refused):
``vlfair rescore`` recomputes every metric from it with no model and no dataset, and ``vlfair
compare`` pairs two runs' rows by ``id``. It is plain Parquet: ``datasets.load_dataset("parquet",
data_files=...)`` and pandas read it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vlfair.cache import sha256_of  # noqa: F401  (part of this module's API: a samples file's SHA-256)

if TYPE_CHECKING:
    import pandas as pd

SAMPLES_FILE = "samples.parquet"
METADATA_KEY = b"vlfair"
IDENTITY = ("row", "id")  # the columns that name a sample in its dataset


class SamplesError(ValueError):
    """A samples file that cannot be used: missing, altered, or not vlfair's."""


class MissingColumn(SamplesError, KeyError):
    """A column the samples lack (``column``), asked for by name: a reader of several runs' samples names the run
    whose own file lacks it (:func:`vlfair.compare.runs.columns_named`)."""

    def __init__(self, message: str, column: str):
        super().__init__(message)
        self.column = column

    def __str__(self) -> str:  # the message, not a KeyError's quoted repr
        return str(self.args[0])


@dataclasses.dataclass
class Samples:
    """A probe's per-sample results: ``frame`` (one row per sample, starting with :data:`IDENTITY`),
    ``facts`` (the run-level values the analysis reads, reported as results.json's settings) and
    ``warnings`` (what scoring found: short cells, a sigmoid model)."""

    frame: pd.DataFrame
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)

    source: str | None = None  # the file it was read from, for messages

    def column(self, name: str) -> Any:
        """A column as a numpy array (object for text); a column the samples lack is named, with the file."""
        if name not in self.frame.columns:
            raise MissingColumn(f"{self.source or 'the samples'}: no column {name!r} (it holds "
                                f"{', '.join(map(str, self.frame.columns[:12]))}): not the samples this probe writes",
                                name)
        return self.frame[name].to_numpy()


def write_samples(samples: Samples, path: str | Path, header: dict[str, Any]) -> dict[str, Any]:
    """Write ``samples`` as Parquet (zstd) with ``header`` (results.json without its metrics) in
    its metadata; returns results.json's ``samples`` entry: file name, SHA-256 and row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vlfair.cache import atomic_write

    path = Path(path)
    table = pa.Table.from_pandas(samples.frame, preserve_index=False)
    # the columns written, so that a reader knows a file with one of them removed (its metrics would silently go)
    meta = {"header": header, "facts": samples.facts, "warnings": samples.warnings,
            "columns": [str(c) for c in samples.frame.columns]}
    text = json.dumps(meta, ensure_ascii=False, sort_keys=True, allow_nan=False, default=_plain)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), METADATA_KEY: text.encode()})
    atomic_write(path, lambda handle: pq.write_table(table, handle, compression="zstd"))
    return {"file": path.name, "sha256": sha256_of(path), "rows": int(table.num_rows),
            "content_sha256": content_sha256(pq.read_table(path))}


def content_sha256(table: Any) -> str:
    """SHA-256 of a samples table's rows alone: each column's name, Arrow type and values, in the file's
    column order (read back from the file, so a writer and a later reader hash the same table). The same
    rows written at another time (the file's metadata records when) give the same digest; any other value
    does not."""
    import pyarrow as pa

    digest = hashlib.sha256()
    for name, column in zip(table.column_names, table.columns):
        digest.update(f"{name}\0{column.type}\0{len(column)}\0".encode())
        chunk = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if pa.types.is_integer(chunk.type) or pa.types.is_floating(chunk.type) or pa.types.is_boolean(chunk.type):
            digest.update(chunk.is_null().to_numpy(zero_copy_only=False).tobytes())
            filled = chunk.fill_null(False if pa.types.is_boolean(chunk.type) else 0)
            digest.update(filled.to_numpy(zero_copy_only=False).tobytes())
        else:  # text, lists, nested values: as JSON, one row after another
            digest.update(json.dumps(chunk.to_pylist(), ensure_ascii=False, default=str).encode())
    return digest.hexdigest()


def read_samples(path: str | Path, sha256: str | None = None,
                 rows: int | None = None) -> tuple[Samples, dict[str, Any]]:
    """(samples, header) from a file :func:`write_samples` wrote; with ``sha256`` (results.json's),
    a file whose content changed since is refused; with ``rows``, one whose row count (its Parquet
    footer's) is not that is refused before any row is read (a few compressed bytes may unpack to
    gigabytes: the count a caller capped is the count read)."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise SamplesError(f"{path}: no such samples file")
    if sha256 is not None and sha256_of(path) != sha256:
        raise SamplesError(f"{path}: its SHA-256 is not the one results.json records: the file was changed or "
                           "replaced after the run (re-run the probe, or restore the file)")
    try:
        if rows is not None and pq.ParquetFile(path).metadata.num_rows != rows:
            raise SamplesError(f"{path}: {pq.ParquetFile(path).metadata.num_rows:,} rows, results.json says {rows:,}")
        table = pq.read_table(path)
    except SamplesError:
        raise
    except Exception as exc:  # noqa: BLE001  (pyarrow raises several types for a file that is not Parquet)
        raise SamplesError(f"{path}: not a Parquet file ({exc})") from None
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise SamplesError(f"{path}: a Parquet file without vlfair's metadata (not written by a vlfair run)")
    try:  # a file may come from anyone (a board, a download): its metadata is data, checked before use
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else f"{type(exc).__name__}: {exc}"[:200]
        raise SamplesError(f"{path}: its vlfair metadata is not readable JSON ({reason})") from None
    if not isinstance(meta, dict) or not all(isinstance(meta.get(key, {}), dict) for key in ("facts", "header")) \
            or not isinstance(meta.get("warnings", []), list) or not isinstance(meta.get("columns", []), list):
        raise SamplesError(f"{path}: its vlfair metadata is not the mapping vlfair writes (facts, header, warnings, "
                           "columns)")
    _check_columns(path, table.column_names, meta.get("columns"))
    frame = table.to_pandas()
    return (Samples(frame, meta.get("facts") or {}, list(meta.get("warnings") or []), str(path)),
            meta.get("header") or {})


def _check_columns(path: Path, found: list[str], written: list[Any] | None) -> None:
    """Every column the run wrote (its metadata lists them; a file of an earlier vlfair lists none) is in the
    file: a probe declares only the metrics whose columns its samples hold (a pair the model read as one text has
    none), so a column removed since would take its metrics out of a rescore or a comparison without a word."""
    missing = [str(column) for column in written or () if str(column) not in found]
    if missing:
        more = f" (and {len(missing) - 1} more: {', '.join(missing[1:6])})" if len(missing) > 1 else ""
        raise SamplesError(f"{path}: no column {missing[0]!r}{more}, which its run wrote: the file was changed "
                           "after the run (its metrics would be left out); restore it, or run the probe again")


def _plain(value: Any) -> Any:
    """Numpy scalars and arrays as JSON (the metadata's facts hold them)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")


__all__ = ["IDENTITY", "SAMPLES_FILE", "MissingColumn", "Samples", "SamplesError", "content_sha256", "read_samples",
           "sha256_of", "write_samples"]
