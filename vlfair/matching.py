"""Open-ended answers matched to the candidates a probe asks about (the generative scorer's
``generate`` mode): plain text functions, importable without torch (the CLI and probes import them)."""

from __future__ import annotations

import re
import unicodedata

_ARTICLES = re.compile(r"^(?:a|an|the)\s+")


def normalized(text: str) -> str:
    """Text as answers are matched: Unicode-compatible form, case folded, punctuation dropped (letters
    of every script kept), spaces collapsed, a leading English article dropped."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(c if c.isalnum() or c.isspace() else " " for c in text)
    return _ARTICLES.sub("", " ".join(text.split()))


def match_answer(answer: str, candidates: list[str]) -> int:
    """The candidate a generated answer names, or -1: the candidate equal to the whole answer once
    both are :func:`normalized`, else the one candidate the answer contains as whole words (the
    longest where one contains another: "dishonest" over "honest"); -1 where none, or where two
    unrelated candidates both appear (the answer names no single one)."""
    said = normalized(answer)
    forms = [normalized(c) for c in candidates]
    if said in forms:
        return forms.index(said)
    found = [j for j, form in enumerate(forms) if form and _contains(said, form)]
    # a candidate inside a longer one found too ("honest" in "dishonest" does not count: whole words;
    # "player" in "tennis player" does) is the longer one's part, not a second answer
    found = [j for j in found if not any(k != j and _contains(forms[k], forms[j]) for k in found)]
    return found[0] if len(found) == 1 else -1


def _contains(text: str, words: str) -> bool:
    """``words`` in ``text`` as whole words; in a script written without spaces (Chinese, Japanese),
    as characters."""
    if any(unicodedata.east_asian_width(c) == "W" for c in words):
        return words in text
    return f" {words} " in f" {text} "


__all__ = ["match_answer", "normalized"]
