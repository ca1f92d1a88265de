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

    @staticmethod
    def key(relative: str) -> str:
        r"""One spelling per file: "val/./2.jpg", "val//2.jpg" and "val\2.jpg" are "val/2.jpg"."""
        return posixpath.normpath(relative.replace("\\", "/"))

    def check(self, relative: str) -> str | None:
        """The problem with ``relative`` as a path inside the source, or None."""
        if not relative:
            return "empty file name"
        if relative.startswith(("/", "\\")) or (len(relative) > 1 and relative[1] == ":"):
            return f"absolute path {relative!r} is not allowed; paths are relative to the source directory"
        normal = self.key(relative)
        if normal == ".." or normal.startswith("../"):
            return f"path {relative!r} leaves the source directory"
        path = self.root / normal
        # a symbolic link (to a file, or a folder on the way) must not lead out of the source either
        if (path.exists() or path.is_symlink()) and not path.resolve().is_relative_to(self.root):
            return f"path {relative!r} is a link that leaves the source directory"
        if not self.exists(normal):
            return f"image {relative!r} is listed but missing"
        return None

    def exists(self, relative: str) -> bool:
        normal = self.key(relative)
        if (self.root / normal).is_file():
            return True
        return normal in self._members

    def read(self, relative: str) -> bytes:
        normal = self.key(relative)
        path = self.root / normal
        if path.is_file():
            if not path.resolve().is_relative_to(self.root):  # checked again at the read itself
                raise ValueError(f"path {relative!r} is a link that leaves the source directory")
            return path.read_bytes()
        if self._zip is None:  # not reached through check(), which reports the file missing first
            raise FileNotFoundError(path)
        return self._zip.read(self._members[normal])
