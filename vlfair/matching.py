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


# Words that negate what follows them (within NEGATION_REACH words), in the languages the probes ask in and
# their neighbours, as normalized() leaves them ("isn't" -> "isn t"): "not smart" names no "smart"
NEGATING_BEFORE = frozenset({
    "not", "no", "never", "neither", "nor", "isn", "aren", "wasn", "weren", "doesn", "don", "didn", "cannot",  # en
    "nicht", "kein", "keine", "keinen", "keiner", "keinem", "nie", "weder",  # de
    "pas", "ne", "non", "jamais", "ni", "aucun", "aucune",  # fr (ne ... pas), it (non, né)
    "nunca", "tampoco", "não", "nem", "mai", "né",  # es, pt, it
    "не", "нет", "ни",  # ru
    "ليس", "ليست", "لا", "غير",  # ar
})
NEGATION_REACH = 3  # "not a very smart", "is not the smart"
# words after which a negation no longer reaches: "not dumb but smart" is smart
NEGATION_ENDS = frozenset({"but", "aber", "sondern", "mais", "pero", "sino", "ma", "mas", "но"})
# ... and those that follow what they negate: tr "doktor değil", hi "डॉक्टर नहीं"
NEGATING_AFTER = frozenset({"değil", "degil", "nahin", "नहीं", "नही"})
# scripts written without spaces: a negation in the 2 characters before (zh 不是医生, 没有, 非) or the 5 after
# (ja 医者ではない, ko 의사가 아니다) the candidate's characters
NEGATING_CHARS_BEFORE = ("不", "没", "沒", "非", "无", "無", "未", "别", "別")
NEGATING_CHARS_AFTER = ("ではな", "じゃな", "でな", "ではあり", "じゃあり", "아니", "아님", "않")
NOT_NEGATING_BEFORE = ("非常",)  # "very": 非常聪明 is very smart


def match_answer(answer: str, candidates: list[str]) -> int:
    """The candidate a generated answer names, or -1: the candidate equal to the whole answer once
    both are :func:`normalized`, else the one candidate the answer says as whole words and does not
    negate (:func:`_said`: "not smart", "不是医生" name neither; the longest where one contains another:
    "dishonest" over "honest"); -1 where none, where two unrelated candidates are both said (the answer
    names no single one), or where the answer is empty (a candidate that is only punctuation is never
    said)."""
    said = normalized(answer)
    forms = [normalized(c) for c in candidates]
    if not said:
        return -1
    if said in forms:
        return forms.index(said)
    clauses = [normalized(part).split() for part in _CLAUSE_END.split(answer)]  # a negation ends with its clause
    found = [j for j, form in enumerate(forms) if form and _said(said, form, clauses)]
    # a candidate inside a longer one found too ("honest" in "dishonest" does not count: whole words;
    # "player" in "tennis player" does) is the longer one's part, not a second answer
    found = [j for j in found if not any(k != j and _contains(forms[k], forms[j]) for k in found)]
    return found[0] if len(found) == 1 else -1


_CLAUSE_END = re.compile(r"[.,;:!?\n。，、；：！？]+")


def _said(text: str, words: str, clauses: list[list[str]]) -> bool:
    """Whether ``text`` says ``words`` at least once without negating it (:data:`NEGATING_BEFORE` within
    :data:`NEGATION_REACH` words before in its clause: "No, smart" is smart; :data:`NEGATING_AFTER` just
    after; in a script without spaces, the characters around it)."""
    if _unspaced(words):
        start = text.find(words)
        while start >= 0:
            # a particle may sit between (ko 의사가 아니다, ja 医者ではない)
            before, after = text[max(0, start - 2):start], text[start + len(words):start + len(words) + 5]
            before = "" if before.endswith(NOT_NEGATING_BEFORE) else before
            negated = any(c in before for c in NEGATING_CHARS_BEFORE) or any(c in after for c in NEGATING_CHARS_AFTER)
            if not negated:
                return True
            start = text.find(words, start + 1)
        return False
    # the answer's words clause by clause (a clause's leading article dropped, as the whole answer's is)
    tokens = [token for clause in clauses for token in clause]
    clause_of = [k for k, clause in enumerate(clauses) for _ in clause]
    target = words.split()
    for i in range(len(tokens) - len(target) + 1):
        if tokens[i:i + len(target)] != target:
            continue
        reach = [t for t, k in zip(tokens[max(0, i - NEGATION_REACH):i], clause_of[max(0, i - NEGATION_REACH):i])
                 if k == clause_of[i]]
        ends = [j for j, token in enumerate(reach) if token in NEGATION_ENDS]
        reach = reach[ends[-1] + 1:] if ends else reach
        following = tokens[i + len(target):i + len(target) + 1]
        if not NEGATING_BEFORE.intersection(reach) and not NEGATING_AFTER.intersection(following):
            return True
    return False


def _unspaced(words: str) -> bool:
    return any(unicodedata.east_asian_width(c) == "W" for c in words)


def _contains(text: str, words: str) -> bool:
    """``words`` in ``text`` as whole words; in a script written without spaces (Chinese, Japanese),
    as characters."""
    if _unspaced(words):
        return words in text
    return f" {words} " in f" {text} "


__all__ = ["match_answer", "normalized"]
