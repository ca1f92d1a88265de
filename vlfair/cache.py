"""On-disk embedding cache: chunked, atomic, resumable.

Layout of one entry (``<root>/<kind>/<key[:2]>/<key>/``):
    meta.json                         the key's components, for people inspecting the cache
    rows-000000000-000000192.npz      one finished chunk, its rows' range (written by atomic rename)
    embeddings.npy + done.json        the final array; done.json is written last, so its presence
                                      means the entry is complete (the chunks are then removed)

A run killed midway leaves only whole chunks behind; the next run recomputes just the rows they do
not hold. A run writes what it finished every few seconds (``embed_images``' ``flush_seconds``), so
a chunk is as many rows as the model embeds in that time, at most ``chunk_size``. Any change in a
key component gives a different key, hence a fresh entry.

Checked, not trusted: each chunk records its row range and a SHA-256 of its arrays, done.json the
final array's shape, dtype and SHA-256. A file that fails to load or to match (another range's
chunk, zeroed or truncated bytes, a wrong-shaped array) is deleted with a CacheWarning naming it,
and what it held is recomputed.

Optional, never in the way: a cache file that cannot be written (a full disk, no permission) is a
CacheWarning naming it, and the run goes on without the cache; its results are not lost.

What an image key covers (``embed_images``): the images, not only their names. A cell that holds bytes, a
decoded image or an array is keyed by its content (a ``datasets.Dataset`` by its table fingerprint); a
cell that names a file (a list or column of paths, an ``Image()`` column built from paths, ``{"path": ...,
"bytes": None}``) by the file's path, size and modification time, so a file replaced under its name is
embedded again. The key also carries the decoding rules (``imageio.DECODING``, now 2): embeddings cached
by an earlier vlfair are of other pictures and are computed again, once. A model's part of every key is
its revision (:mod:`vlfair.models.hub`: a Hub commit, or a directory's content fingerprint).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from vlfair.atomic import atomic_write  # here too: the name other modules import from the cache

FORMAT = 2  # 2: chunks and done.json carry checksums
DEFAULT = "default"  # sentinel for cache_dir: $VLFAIR_CACHE or ~/.cache/vlfair


def cache_root(cache_dir: str | os.PathLike | None) -> Path | None:
    """``"default"`` -> $VLFAIR_CACHE or ~/.cache/vlfair; None -> caching disabled."""
    if cache_dir is None:
        return None
    if cache_dir == DEFAULT:
        return Path(os.environ.get("VLFAIR_CACHE") or Path.home() / ".cache" / "vlfair")
    return Path(cache_dir)


def cache_key(components: dict[str, Any]) -> str:
    payload = json.dumps({"format": FORMAT, **components}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


class CacheWarning(UserWarning):
    """A cache file was damaged or did not match (it is recomputed), or could not be written (the
    run goes on without the cache)."""


def write_or_warn(path: Path, write: Callable[[Any], None]) -> bool:
    """Write one cache file (all or nothing); False, after a CacheWarning naming it, when it cannot
    be written (a full disk, no permission): a cache is optional, the results it would keep are not."""
    try:
        atomic_write(path, write)
        return True
    except OSError as exc:
        warnings.warn(f"vlfair cache: cannot write {exc.filename or path} ({exc.strerror or exc}); going on "
                      "without the cache (what it would have kept is recomputed next time)", CacheWarning,
                      stacklevel=3)
        return False


def sha256_of(path: str | os.PathLike) -> str:
    """A file's SHA-256 (hex), read in blocks: a samples file's, a model file's."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _digest(*arrays: np.ndarray) -> str:
    sha = hashlib.sha256()
    for array in arrays:
        sha.update(str(array.dtype).encode() + str(array.shape).encode())
        # the buffer itself (.data: a memoryview of it): tobytes() would copy every cache hit
        sha.update(np.ascontiguousarray(array).data)
    return sha.hexdigest()


@dataclasses.dataclass
class BadRow:
    row: int
    path: str | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Chunk:
    """Embeddings of the good rows of one row range, and the rows that could not be read."""

    rows: np.ndarray  # int64, ascending
    embeddings: np.ndarray  # float32 (len(rows), D)
    bad: list[BadRow]


class ChunkStore:
    """One cache entry; every method is a no-op (or a miss) when ``directory`` is None."""

    def __init__(self, directory: Path | None, meta: dict[str, Any]):
        self.directory = directory
        if directory is not None and not (directory / "meta.json").exists():
            self._write(directory / "meta.json", lambda h: h.write(json.dumps(meta, indent=2, default=str).encode()))

    @classmethod
    def open(cls, cache_dir: str | os.PathLike | None, kind: str, components: dict[str, Any]) -> ChunkStore:
        root = cache_root(cache_dir)
        if root is None:
            return cls(None, components)
        key = cache_key(components)
        return cls(root / kind / key[:2] / key, components)

    def _chunk_path(self, start: int, end: int) -> Path:
        assert self.directory is not None, "a store without a directory has no files"  # callers check first
        return self.directory / f"rows-{start:09d}-{end:09d}.npz"

    def _write(self, path: Path, write: Callable[[Any], None]) -> bool:
        """Write one cache file; False (after a CacheWarning naming it) when it cannot be written.
        The store then writes nothing more: a cache is optional, the results it would keep are not."""
        if write_or_warn(path, write):
            return True
        self.directory = None
        return False

    def _discard(self, paths: list[Path], why: str) -> None:
        warnings.warn(f"vlfair cache: {paths[0]} {why}; recomputing what it held", CacheWarning, stacklevel=3)
        for path in paths:
            path.unlink(missing_ok=True)

    def read_chunk(self, start: int, end: int) -> Chunk | None:
        if self.directory is None or not self._chunk_path(start, end).exists():
            return None
        path = self._chunk_path(start, end)
        try:
            # our own handle: np.load leaves the file open when a damaged zip makes it raise
            with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as data:
                arrays = {k: data[k] for k in ("rows", "embeddings", "bad_rows", "bad_paths", "bad_reasons", "range",
                                               "sha256")}
        except Exception as exc:  # noqa: BLE001  (truncated, zeroed, not a zip, a key missing: all damage)
            self._discard([path], f"cannot be read ({type(exc).__name__})")
            return None
        rows, embeddings = arrays["rows"], arrays["embeddings"]
        checks = [
            (list(arrays["range"]) == [start, end], f"holds rows {list(arrays['range'])}, not [{start}, {end}]"),
            (str(arrays["sha256"]) == _digest(rows, embeddings, arrays["bad_rows"]), "does not match its checksum"),
            (embeddings.dtype == np.float32 and embeddings.ndim == 2 and len(embeddings) == len(rows),
             f"has embeddings of shape {embeddings.shape} for {len(rows)} rows"),
            (bool(((rows >= start) & (rows < end)).all()), "lists rows outside its range"),
        ]
        for ok, why in checks:
            if not ok:
                self._discard([path], why)
                return None
        bad = [BadRow(int(r), p or None, str(m))
               for r, p, m in zip(arrays["bad_rows"], arrays["bad_paths"], arrays["bad_reasons"])]
        return Chunk(rows, embeddings, bad)

    def read_chunks(self) -> dict[tuple[int, int], Chunk]:
        """Every finished chunk of this entry, by its row range, whatever ranges the runs that wrote them chose (a
        run flushes what it finished every few seconds: :func:`vlfair.embed.embed_images`); each checked as
        :meth:`read_chunk` checks it. Ranges that overlap (two runs of one entry at once) keep the first, the
        longest where two start together."""
        if self.directory is None or not self.directory.is_dir():
            return {}
        spans = []
        for path in self.directory.glob("rows-*-*.npz"):
            parts = path.stem.split("-")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit() and int(parts[1]) < int(parts[2]):
                spans.append((int(parts[1]), int(parts[2])))
        found: dict[tuple[int, int], Chunk] = {}
        reached = 0
        for start, end in sorted(spans, key=lambda span: (span[0], -span[1])):
            if start < reached:
                continue
            chunk = self.read_chunk(start, end)
            if chunk is not None:
                found[(start, end)] = chunk
                reached = end
        return found

    def write_chunk(self, start: int, end: int, chunk: Chunk) -> None:
        if self.directory is None:
            return
        rows, embeddings = chunk.rows.astype(np.int64), chunk.embeddings.astype(np.float32)
        bad_rows = np.array([b.row for b in chunk.bad], dtype=np.int64)
        bad_paths = np.array([b.path or "" for b in chunk.bad], dtype=str)
        bad_reasons = np.array([b.reason for b in chunk.bad], dtype=str)
        span, digest = np.array([start, end], dtype=np.int64), np.array(_digest(rows, embeddings, bad_rows))
        # the file's keys, in this order (named one by one: savez's own keywords cannot be shadowed)
        self._write(self._chunk_path(start, end),
                    lambda h: np.savez(h, rows=rows, embeddings=embeddings, bad_rows=bad_rows, bad_paths=bad_paths,
                                       bad_reasons=bad_reasons, range=span, sha256=digest))

    def read_final(self, expected_rows: int | None = None) -> tuple[np.ndarray, list[BadRow]] | None:
        """The final array and its bad rows; None (after a CacheWarning and deleting the files) when
        they are damaged, do not match done.json, or do not add up to ``expected_rows``."""
        if self.directory is None or not (self.directory / "done.json").exists():
            return None
        files = [self.directory / "done.json", self.directory / "embeddings.npy"]
        try:
            done = json.loads(files[0].read_text())
            embeddings = np.load(files[1], allow_pickle=False)
            bad = [BadRow(**b) for b in done["bad"]]
            shape, digest = tuple(done["shape"]), done["sha256"]
        except Exception as exc:  # noqa: BLE001  (garbage JSON, a truncated or pickled .npy: all damage)
            self._discard(files, f"cannot be read ({type(exc).__name__})")
            return None
        problem = (f"has shape {embeddings.shape}, not done.json's {shape}" if embeddings.shape != shape
                   else f"holds {embeddings.dtype}, not float32" if embeddings.dtype != np.float32
                   else "does not match done.json's checksum" if _digest(embeddings) != digest else None)
        if problem:
            self._discard([files[1], files[0]], problem)
            return None
        if expected_rows is not None and len(embeddings) + len(bad) != expected_rows:
            self._discard([files[1], files[0]], f"holds {len(embeddings) + len(bad)} rows, not {expected_rows}")
            return None
        return embeddings, bad

    def write_final(self, embeddings: np.ndarray, bad: list[BadRow]) -> None:
        if self.directory is None:
            return
        directory, embeddings = self.directory, embeddings.astype(np.float32)
        done = {"shape": list(embeddings.shape), "dtype": "float32", "sha256": _digest(embeddings),
                "bad": [b.as_dict() for b in bad]}
        if not (self._write(directory / "embeddings.npy", lambda h: np.save(h, embeddings))
                and self._write(directory / "done.json", lambda h: h.write(json.dumps(done).encode()))):
            return  # done.json is written last: without it the entry is incomplete, and read as such
        for chunk_file in directory.glob("rows-*.npz"):
            chunk_file.unlink(missing_ok=True)
