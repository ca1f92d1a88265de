"""Text from outside (a results file, a folder's name, an error about either) shown in Markdown as
the text it is.

Escaping HTML alone is not enough in Markdown: a link ``[click](http://x)``, a bare address
(GitHub-flavoured Markdown, and so Gradio, links ``http://x`` and ``www.x.org`` by themselves),
emphasis, code spans and list markers are markup without a single ``<``. CommonMark lets every
ASCII punctuation character be escaped with a backslash, and an escaped character is always
literal text: escaping all of them leaves no markup, no tag and no address a renderer could
link. Line breaks become spaces, so the text cannot start a block (a heading, a list, a code
block) either.
"""

from __future__ import annotations

import re
from typing import Any

_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character, as CommonMark lists them
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\s]+")  # line breaks, tabs and other control characters


def markdown_text(value: Any) -> str:
    """``str(value)`` as Markdown that renders to exactly that text, on one line (runs of
    whitespace and control characters read as one space); an escaped ``$$`` is no LaTeX to
    Gradio's Markdown either."""
    return _PUNCTUATION.sub(r"\\\1", _BREAKS.sub(" ", str(value)).strip())


__all__ = ["markdown_text"]
