"""Reading a raw source's files safely: only inside its directory (or its image zip)."""

from __future__ import annotations

import posixpath
import zipfile
from pathlib import Path


class SourceFiles:
    """Files of a raw source, addressed by the relative paths its metadata uses.

    A path that is absolute or escapes the root (``..``) is refused: metadata is data, and a
    spreadsheet must not make the builder read ``/etc/passwd``. Images may also sit in a zip
    next to the metadata (FairFace's release), under any common prefix.
    """

    def __init__(self, root: str | Path, archive: str | Path | None = None):
        self.root = Path(root).resolve()
        self._zip = zipfile.ZipFile(archive) if archive else None
        self._members: dict[str, str] = {}
        if self._zip is not None:
            for member in self._zip.namelist():
                parts = member.split("/")
                for start in range(len(parts)):  # "fairface/val/1.jpg" answers "val/1.jpg" too
                    self._members.setdefault("/".join(parts[start:]), member)

    def check(self, relative: str) -> str | None:
        """The problem with ``relative`` as a path inside the source, or None."""
        if not relative:
            return "empty file name"
        if relative.startswith(("/", "\\")) or (len(relative) > 1 and relative[1] == ":"):
            return f"absolute path {relative!r} is not allowed; paths are relative to the source directory"
        normal = posixpath.normpath(relative.replace("\\", "/"))
        if normal == ".." or normal.startswith("../"):
            return f"path {relative!r} leaves the source directory"
        if not self.exists(normal):
            return f"image {relative!r} is listed but missing"
        return None

    def exists(self, relative: str) -> bool:
        normal = posixpath.normpath(relative.replace("\\", "/"))
        if (self.root / normal).is_file():
            return True
        return normal in self._members

    def read(self, relative: str) -> bytes:
        normal = posixpath.normpath(relative.replace("\\", "/"))
        path = self.root / normal
        if path.is_file():
            return path.read_bytes()
        return self._zip.read(self._members[normal])
