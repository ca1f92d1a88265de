"""YAML that people write (a dataset card's header, a settings file), read safely and named.

``yaml.safe_load`` refuses tags that would build Python objects (``!!python/object/apply``), but
its message points at ``<unicode string>``: the text, not the file it came from. Every mistake
here is a :class:`YAMLFileError` naming the file and the line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml


class YAMLFileError(ValueError):
    """A YAML file (or a card's YAML header) that cannot be read; the message names the file and line."""


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
    return load_yaml(Path(path).read_text(encoding="utf-8"), str(path))


def read_front_matter(path: str | os.PathLike) -> dict[str, Any]:
    """The YAML header of a Markdown card (between its first two ``---`` lines, as the Hub reads
    it), {} when it has none."""
    from huggingface_hub.repocard import REGEX_YAML_BLOCK

    match = REGEX_YAML_BLOCK.search(Path(path).read_text(encoding="utf-8"))
    if match is None:
        return {}
    data = load_yaml(match.group(2), str(path), first_line=1 + match.group(1).count("\n"))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise YAMLFileError(f"{path}: its YAML header is a {type(data).__name__}, not a mapping of keys")
    return data


__all__ = ["YAMLFileError", "load_yaml", "read_front_matter", "read_yaml"]
