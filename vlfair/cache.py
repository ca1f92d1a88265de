"""On-disk embedding cache: chunked, atomic, resumable.

Layout of one entry (``<root>/<kind>/<key[:2]>/<key>/``):
    meta.json                         the key's components, for people inspecting the cache
    rows-000000000-000004096.npz      one finished chunk (written by atomic rename)
    embeddings.npy + done.json        the final array; done.json is written last, so its presence
                                      means the entry is complete (the chunks are then removed)

A run killed midway leaves only whole chunks behind; the next run recomputes just the missing
ones. Any change in a key component gives a different key, hence a fresh entry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

FORMAT = 1
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


def atomic_write(path: Path, write: Callable[[Any], None]) -> None:
    """Write through a temporary file in the same directory, then rename: all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
            atomic_write(directory / "meta.json", lambda h: h.write(json.dumps(meta, indent=2, default=str).encode()))

    @classmethod
    def open(cls, cache_dir: str | os.PathLike | None, kind: str, components: dict[str, Any]) -> "ChunkStore":
        root = cache_root(cache_dir)
        if root is None:
            return cls(None, components)
        key = cache_key(components)
        return cls(root / kind / key[:2] / key, components)

    def _chunk_path(self, start: int, end: int) -> Path:
        return self.directory / f"rows-{start:09d}-{end:09d}.npz"

    def read_chunk(self, start: int, end: int) -> Chunk | None:
        if self.directory is None or not self._chunk_path(start, end).exists():
            return None
        with np.load(self._chunk_path(start, end), allow_pickle=False) as data:
            bad = [BadRow(int(r), p or None, str(m)) for r, p, m in zip(data["bad_rows"], data["bad_paths"], data["bad_reasons"])]
            return Chunk(data["rows"], data["embeddings"], bad)

    def write_chunk(self, start: int, end: int, chunk: Chunk) -> None:
        if self.directory is None:
            return
        arrays = {
            "rows": chunk.rows.astype(np.int64), "embeddings": chunk.embeddings.astype(np.float32),
            "bad_rows": np.array([b.row for b in chunk.bad], dtype=np.int64),
            "bad_paths": np.array([b.path or "" for b in chunk.bad], dtype=str),
            "bad_reasons": np.array([b.reason for b in chunk.bad], dtype=str),
        }
        atomic_write(self._chunk_path(start, end), lambda h: np.savez(h, **arrays))

    def read_final(self) -> tuple[np.ndarray, list[BadRow]] | None:
        if self.directory is None or not (self.directory / "done.json").exists():
            return None
        done = json.loads((self.directory / "done.json").read_text())
        return np.load(self.directory / "embeddings.npy"), [BadRow(**b) for b in done["bad"]]

    def write_final(self, embeddings: np.ndarray, bad: list[BadRow]) -> None:
        if self.directory is None:
            return
        atomic_write(self.directory / "embeddings.npy", lambda h: np.save(h, embeddings.astype(np.float32)))
        done = {"shape": list(embeddings.shape), "bad": [b.as_dict() for b in bad]}
        atomic_write(self.directory / "done.json", lambda h: h.write(json.dumps(done).encode()))
        for chunk_file in self.directory.glob("rows-*.npz"):
            chunk_file.unlink(missing_ok=True)
