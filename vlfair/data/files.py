"""Reading a raw source's files safely: only inside its directory (or its image zip)."""

from __future__ import annotations

import posixpath
import zipfile
from pathlib import Path

# An image file's size at most, as stored or as a zip member unpacks: read whole into memory (a
# study's images are kilobytes; 40 megapixels of 16-bit RGBA, uncompressed, is 320 MB)
MAX_FILE_BYTES = 512 * 2**20
# A zip member that unpacks to more than this many times its packed size is refused (images are
# compressed already: FairFace's JPEGs pack to about 1:1; a bomb of zeros packs to 1:1000)...
MAX_RATIO = 100
RATIO_FROM_BYTES = 2**20  # ...when it unpacks to more than 1 MiB (a tiny file may pack at any ratio)


def _mib(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB" if size >= 2**20 else f"{size / 2**10:,.1f} KiB"


class SourceFiles:
    """Files of a raw source, addressed by the relative paths its metadata uses.

    A path that is absolute or escapes the root (``..``) is refused: metadata is data, and a
    spreadsheet must not make the builder read ``/etc/passwd``. Images may also sit in a zip
    next to the metadata (FairFace's release), under any common prefix. A file is read whole:
    one larger than :data:`MAX_FILE_BYTES` (a zip member by the size it declares, before it is
    unpacked) or a member that unpacks to more than :data:`MAX_RATIO` times its packed size is
    refused, never read.
    """

    def __init__(self, root: str | Path, archive: str | Path | None = None):
        self.root = Path(root).resolve()
        self.archive = Path(archive) if archive else None
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
        return self._size_problem(normal)

    def _size_problem(self, normal: str) -> str | None:
        """Why the file is too large to read, or None; a zip member is judged by its declared
        size and its compression ratio before a byte of it is unpacked."""
        path = self.root / normal
        if path.is_file():
            size, packed = path.stat().st_size, None
        else:
            member = self._members.get(normal)
            if self._zip is None or member is None:  # missing: check() says so, read() raises FileNotFoundError
                return None
            info = self._zip.getinfo(member)
            size, packed = info.file_size, info.compress_size
        if size > MAX_FILE_BYTES:
            return (f"image {normal!r} is {_mib(size)}{' unpacked' if packed is not None else ''}, more than the "
                    f"{_mib(MAX_FILE_BYTES)} an image may have")
        if packed is not None and size > RATIO_FROM_BYTES and size > MAX_RATIO * max(packed, 1):
            return (f"zip member {normal!r} unpacks to {size / max(packed, 1):,.0f} times its packed size "
                    f"({_mib(size)} from {_mib(packed)}), more than {MAX_RATIO} times: a decompression bomb, not an "
                    "image")
        return None

    def exists(self, relative: str) -> bool:
        normal = self.key(relative)
        if (self.root / normal).is_file():
            return True
        return normal in self._members

    def read(self, relative: str) -> bytes:
        normal = self.key(relative)
        if problem := self._size_problem(normal):  # checked again at the read itself
            raise ValueError(problem)
        path = self.root / normal
        if path.is_file():
            if not path.resolve().is_relative_to(self.root):  # checked again at the read itself
                raise ValueError(f"path {relative!r} is a link that leaves the source directory")
            return path.read_bytes()
        if self._zip is None:  # not reached through check(), which reports the file missing first
            raise FileNotFoundError(path)
        return self._zip.read(self._members[normal])
