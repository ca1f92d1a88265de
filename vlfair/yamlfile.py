"""Text and YAML that people write (a dataset card's header, a settings file, a list for ``--set
KEY=@FILE``), read safely and named.

A file a person wrote is read as they wrote it, not as its bytes fall: a UTF-8 byte-order mark
(Notepad, Excel) is not part of the first word, Windows and old Mac line ends are line ends. It is
read only if it is a regular file of at most :data:`MAX_TEXT_BYTES` (``/dev/zero`` would fill the
memory, a FIFO would wait forever). ``yaml.safe_load`` refuses tags that would build Python objects
(``!!python/object/apply``), but its message points at ``<unicode string>``: the text, not the file it
came from. Every mistake here is a :class:`YAMLFileError` naming the file (and the line).

``--set KEY=@FILE`` reads a long list this way (``.txt``: one item a line; otherwise one YAML value); the
file is opened without waiting, and a folder, a larger or a non-UTF-8 file is refused in one line naming
the file and why.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import yaml

MAX_TEXT_BYTES = 16 * 2**20  # a settings file or a card is kilobytes; a list of prompts, hundreds of them


class YAMLFileError(ValueError):
    """A YAML file (or a card's YAML header) that cannot be read; the message names the file and line."""


def read_text(path: str | os.PathLike, max_bytes: int | None = None) -> str:
    """The text of the file a person wrote at ``path``: UTF-8, without a byte-order mark, with newline
    line ends; at most ``max_bytes`` (:data:`MAX_TEXT_BYTES`).

    Raises:
        YAMLFileError: not a regular file (a folder, a FIFO, a device), larger than ``max_bytes``,
            not UTF-8, or unreadable (its reason).
    """
    max_bytes = MAX_TEXT_BYTES if max_bytes is None else max_bytes
    try:
        # opened once, without waiting (a FIFO's open would block until someone writes to it): what is
        # checked is what is read
        with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if not stat.S_ISREG(mode):
                kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file (a pipe, a device)"
                raise YAMLFileError(f"{path}: {kind}; give a text file")
            data = handle.read(max_bytes + 1)
    except IsADirectoryError:
        raise YAMLFileError(f"{path}: a folder; give a text file") from None
    except OSError as exc:
        raise YAMLFileError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise YAMLFileError(f"{path}: larger than the {max_bytes:,} bytes a text file here may have")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise YAMLFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def load_yaml(text: str, where: str, first_line: int = 1) -> Any:
    """``text`` parsed with ``yaml.safe_load``; ``where`` names its file in an error, and
    ``first_line`` is the file's line number of the text's first line (a card's header starts on 2)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f", line {mark.line + first_line}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise YAMLFileError(f"{where}{line}: {problem}") from None


def read_yaml(path: str | os.PathLike) -> Any:
    """A YAML file's content."""
    return load_yaml(read_text(path), str(path))


def read_front_matter(path: str | os.PathLike) -> dict[str, Any]:
    """The YAML header of a Markdown card (between its first two ``---`` lines, as the Hub reads
    it), {} when it has none."""
    from huggingface_hub.repocard import REGEX_YAML_BLOCK

    match = REGEX_YAML_BLOCK.search(read_text(path))
    if match is None:
        return {}
    data = load_yaml(match.group(2), str(path), first_line=1 + match.group(1).count("\n"))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise YAMLFileError(f"{path}: its YAML header is a {type(data).__name__}, not a mapping of keys")
    return data


__all__ = ["MAX_TEXT_BYTES", "YAMLFileError", "load_yaml", "read_front_matter", "read_text", "read_yaml"]
