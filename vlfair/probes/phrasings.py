"""Phrasings of a probe's prompt (issue 46): the study's prompt is phrasing 1, a probe's ``phrasings`` setting
holds the others. Each image is scored with every phrasing (samples.parquet's ``COLUMN@2``, ``COLUMN@3``,
...), every metric is reported per phrasing (subset ``"phrasing": k``) and pooled (``"phrasing": "pooled"``:
:class:`vlfair.probes.declared.Pooled`, the phrasings' mean with a two-level bootstrap interval), and a table
says in how many phrasings each bias is found. What a probe writes: the setting (:func:`setting`, checked
against its prompt by :func:`check_not_prompt`), its scores per phrasing, and its study's test per phrasing."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple

from pydantic import AfterValidator, BaseModel, Field, model_validator

from vlfair.outputs import Table
from vlfair.probes.declared import Custom, Declared, Pooled
from vlfair.probes.errors import ProbeError
from vlfair.probes.settings import Text, distinct, placeholders, refuse, same_text

if TYPE_CHECKING:
    from vlfair.probes.scorers import Scorer

POOLED = "pooled"  # the subset's "phrasing" of a metric pooled over every phrasing


# Two phrasings are one phrasing where they are one text to the model: :func:`vlfair.probes.settings.same_text`,
# the text case-folded and its spaces collapsed. That is what CLIP's tokenizer reads (it lower-cases and collapses
# whitespace), so two such prompts are one input and their columns identical; a model that reads case (a
# generative one's tokenizer) would see two texts, but ones that differ in no word, which rephrase nothing: a
# phrasing measures whether a bias holds in other words. The simple rule over each tokenizer's normalisation: it
# holds for every model the run might measure, and the refusal comes with the settings, before any model loads.
SAME_PHRASING = "case and spaces aside: one text to the model"


def setting(*fields: str) -> Any:
    """The ``phrasings`` setting's type for a prompt with the placeholders ``fields``: each phrasing holds them,
    and each is given once (two that are the same text, case and spaces aside, are one)."""
    return Annotated[list[Annotated[Text, AfterValidator(placeholders(*fields))]],
                     AfterValidator(distinct(same_text, SAME_PHRASING))]


def questions() -> Any:
    """A ``question_phrasings`` setting's type: texts, each given once (case and spaces aside, as :func:`setting`)."""
    return Annotated[list[Text], AfterValidator(distinct(same_text, SAME_PHRASING))]


def field(prompt: str) -> Any:
    """The ``phrasings`` setting's field (none by default: the study's prompt alone)."""
    return Field(default_factory=list, description=f"other phrasings of {prompt}: every metric is also reported per "
                                                   "phrasing and pooled over all, the study's first")


def check_new(record: str, key: str, first: str, phrasings: Sequence[str], named: str) -> None:
    """A phrasing of setting ``key`` that is ``first`` (phrasing 1 already, which ``named`` names), case and spaces
    aside, is refused, naming it."""
    same = [k for k, text in enumerate(phrasings) if same_text(text) == same_text(first)]
    if same:
        said = "" if phrasings[same[0]] == first else f" ({first!r}, {SAME_PHRASING})"
        refuse(record, (key, same[0]), phrasings[same[0]], f"is {named}{said}, phrasing 1 already: give each "
                                                           "phrasing once")


def check_not_prompt(record: str, prompt: str, phrasings: Sequence[str]) -> None:
    """A phrasing that is the study's prompt (phrasing 1 already), case and spaces aside, is refused, naming it."""
    check_new(record, "phrasings", prompt, phrasings, "the study's prompt")


class Phrased(BaseModel):
    """Settings with a ``prompt`` and its other ``phrasings`` (a probe's settings inherit it): a phrasing that is
    the prompt itself is refused, naming it."""

    @model_validator(mode="after")
    def _phrasings_are_not_the_prompt(self) -> Phrased:
        fields = getattr(self, "prompt"), getattr(self, "phrasings")  # noqa: B009  (a probe's settings' own fields)
        check_not_prompt(type(self).__name__, *fields)
        return self


Format = Literal["likelihood", "generate"]  # a generative model's answer format: scored candidates, or its own answer


def question_field(question: str) -> Any:
    """The ``question_phrasings`` setting's field: other phrasings of a generative model's question."""
    return Field(default_factory=list, description=f"other phrasings of a generative model's question ({question}): "
                                                   "every metric is also reported per phrasing and answer format and "
                                                   "pooled")


FORMATS_FIELD: Any = Field(default_factory=list, description="other answer formats of a generative model than "
                                                             "generative.mode (likelihood, generate): another "
                                                             "dimension of its phrasings")


class Asked(BaseModel):
    """Settings whose generative model (``generative``: an :class:`Asking`) may be asked several ways: its question
    and other phrasings of it (``question_phrasings``), each in its mode and other answer formats
    (``answer_formats``). Each way is a phrasing (:func:`ways`); one given twice, or that is the question or the
    mode itself, is refused by name."""

    @model_validator(mode="after")
    def _ways_are_new(self) -> Asked:
        asked: Any = getattr(self, "generative")  # noqa: B009  (a probe's settings' own fields)
        questions: list[str] = getattr(self, "question_phrasings")  # noqa: B009
        formats: list[str] = getattr(self, "answer_formats")  # noqa: B009
        record = type(self).__name__
        check_new(record, "question_phrasings", asked.question, questions, "generative.question")
        if asked.mode in formats:
            refuse(record, ("answer_formats", formats.index(asked.mode)), asked.mode,
                   "is generative.mode, the first answer format already: give each format once")
        return self


def ways(asked: Any, questions: Sequence[str], formats: Sequence[str]) -> list[tuple[str, Any]]:
    """Every way a generative model is asked, as (its label, its :class:`vlfair.probes.asking.Asking`): each
    question (generative.question first) in each answer format (generative.mode first); the first is the study's
    way (phrasing 1), the others phrasings 2, 3, ..."""
    return [(f"{question} [{FORMAT_NAMES[mode]}]", asked.model_copy(update={"question": question, "mode": mode}))
            for question in [asked.question, *questions] for mode in [asked.mode, *formats]]


FORMAT_NAMES = {"likelihood": "log-likelihood", "generate": "open-ended"}


class Way(NamedTuple):
    """One way a model is measured (:func:`ways_of`)."""

    label: str    # its name (the phrasings facts and tables)
    prompt: str   # the text a model that reads prompts reads (a model that is asked reads ``asked``'s answers)
    asked: Any    # how a model that is asked is asked (an :class:`vlfair.probes.asking.Asking`)


def ways_of(scorer: Scorer, settings: Any, prompts: Sequence[str]) -> list[Way]:
    """Every way ``scorer``'s model is measured, the study's first: a model that is asked
    (:attr:`~vlfair.probes.scorers.Scorer.asks`), settings.generative's question and its question_phrasings,
    each in each answer format (:func:`ways`), the study's prompt (``prompts[0]``) its texts; any other,
    each of ``prompts`` (the study's prompt and its phrasings), asked as settings.generative says."""
    if scorer.asks:
        return [Way(label, prompts[0], asked)
                for label, asked in ways(settings.generative, settings.question_phrasings, settings.answer_formats)]
    return [Way(prompt, prompt, settings.generative) for prompt in prompts]


def refuse_ways(probe: str, settings: Any, scorer: Scorer) -> None:
    """A model that is not asked reads no question: question phrasings and answer formats are for a model that
    is asked (a generative one), and the contrastive prompt's phrasings are not its (one line each)."""
    if not scorer.asks and (settings.question_phrasings or settings.answer_formats):
        raise ProbeError(f"{probe}: settings question_phrasings and answer_formats ask a generative model (lvlm:) "
                         "its question other ways; a contrastive model reads the prompt: use phrasings")
    if scorer.asks and settings.phrasings:
        raise ProbeError(f"{probe}: setting phrasings rephrases the contrastive prompt; a generative model is asked "
                         "generative.question: use question_phrasings (and answer_formats)")


def column(name: str, number: int) -> str:
    """samples.parquet's column of ``name`` scored with phrasing ``number`` (1: the study's, the column itself)."""
    return name if number == 1 else f"{name}@{number}"


def count(samples: Any) -> int:
    """How many phrasings the samples were scored with (1: the study's prompt alone)."""
    return max(len(samples.facts.get("phrasings") or []), 1)


def pooled(metrics: Sequence[Declared], samples: Any) -> list[Declared]:
    """The study's metrics (among ``metrics``, those of phrasing 1's columns) pooled over the samples' phrasings
    (none where the samples hold the study's prompt alone): each one's statistic on each phrasing's column, its
    subset's phrasing "pooled"; a metric with a phrasing the samples lack (a pair of prompts the model read as
    one text with it) is not pooled."""
    found: list[Declared] = []
    if count(samples) < 2:
        return found
    for metric in metrics:
        statistic: Any = metric.statistic
        if "phrasing" in metric.subset or isinstance(statistic, Custom):  # a probe's own: its columns are its own
            continue
        if hasattr(statistic, "column"):
            members = tuple(dataclasses.replace(statistic, column=column(statistic.column, k))
                            for k in range(1, count(samples) + 1))
        else:  # a gap across columns (one accuracy per language)
            members = tuple(dataclasses.replace(statistic, columns=tuple(column(c, k) for c in statistic.columns))
                            for k in range(1, count(samples) + 1))
        if any(c not in samples.frame.columns for member in members for c in member.columns):
            continue
        found.append(dataclasses.replace(metric, subset={**metric.subset, "phrasing": POOLED},
                                         statistic=Pooled(members)))
    return found


def pool(metrics: Sequence[Declared], count: int) -> list[Declared]:
    """Each metric measured with all ``count`` phrasings (among ``metrics``: the same name and subset but for its
    "phrasing", absent for phrasing 1), pooled: :class:`Pooled` of its statistic with each phrasing, in their
    order, its subset's phrasing "pooled" (a probe's own statistics too: each phrasing's reads its own columns).
    None with one phrasing, nor for a metric some phrasing lacks."""
    import json

    phrased: dict[tuple, dict[int, Declared]] = {}
    for metric in metrics:
        if isinstance(metric.statistic, Pooled):  # already pooled: no phrasing of its own
            continue
        key = (metric.name, json.dumps({k: v for k, v in metric.subset.items() if k != "phrasing"}, sort_keys=True))
        phrased.setdefault(key, {})[metric.subset.get("phrasing", 1)] = metric
    found: list[Declared] = []
    for by_phrasing in phrased.values():
        if count < 2 or sorted(by_phrasing) != list(range(1, count + 1)):
            continue
        same = [by_phrasing[k] for k in range(1, count + 1)]
        members = tuple(m.statistic for m in same if not isinstance(m.statistic, Pooled))  # (none is: skipped above)
        found.append(dataclasses.replace(same[0], subset={**same[0].subset, "phrasing": POOLED}, report=None,
                                         statistic=Pooled(members)))
    return found


def excludes_0(ci: Sequence[float] | None, side: float | None) -> bool:
    """Whether an interval excludes 0 on the side of ``side`` (a pooled value's): a signed bias found."""
    return bool(ci and side and (ci[0] > 0 if side > 0 else ci[1] < 0))


STUDY_FIRST = "1 is the study's"  # a phrasings table's word on its phrasings


def table(rows: list[dict[str, Any]], index: list[str], prompts: Sequence[str], what: str, test: str,
          study: str = STUDY_FIRST) -> Table:
    """The phrasings table: a row per bias measure (``index`` its columns), its value with each phrasing and
    pooled (``rows``: from :func:`row`), and the footnote naming the phrasings (``study``: which is the study's),
    ``what`` is measured and the ``test`` that finds it."""
    import pandas as pd

    named = "; ".join(f"{k}: '{p}'" for k, p in enumerate(prompts, 1))
    return Table(pd.DataFrame(rows).set_index(index), footnotes=[
        f"{what} with each phrasing ({named}; {study}) and pooled: their mean, with a "
        f"two-level bootstrap interval (phrasings and images resampled). Found in: the phrasings whose {test}."])


def found_table(metrics: Sequence[Any], name: str, keys: Callable[[Mapping[str, Any]], dict[str, Any]],
                prompts: Sequence[str], found: Callable[[Any, Any], bool], what: str, test: str,
                study: str = STUDY_FIRST) -> Table | None:
    """The phrasings table of the metrics called ``name`` (a probe's bias measure), one row per ``keys`` of their
    subsets (the table's index): its value with each phrasing and pooled, and in how many phrasings
    ``found(metric, pooled)`` holds, also the pooled metric's ``holds_in``; None where no measure has a value with
    every phrasing and pooled (``study``: the footnote's word on which phrasing is the study's)."""
    phrased: dict[tuple, dict[Any, Any]] = {}
    for metric in metrics:
        if metric.name == name:
            key = tuple(keys(metric.subset).items())
            phrased.setdefault(key, {})[metric.subset.get("phrasing", 1)] = metric
    rows = []
    for key, by_phrasing in phrased.items():
        pooled, held = by_phrasing.get(POOLED), [by_phrasing.get(k) for k in range(1, len(prompts) + 1)]
        if pooled is None or any(metric is None for metric in held):
            continue
        flags = [found(metric, pooled) for metric in held]
        pooled.details["holds_in"] = sum(flags)
        rows.append(row(dict(key), pooled, flags))
    return table(rows, [k for k, _ in next(iter(phrased))], prompts, what, test, study) if rows else None


def row(keys: dict[str, Any], metric: Any, found: Sequence[bool]) -> dict[str, Any]:
    """A row of :func:`table`: ``keys``, a pooled ``metric``'s value per phrasing and pooled with its interval,
    and in how many phrasings it is found (``found``: one flag per phrasing)."""
    values = metric.details["phrasing_values"]
    return {**keys, **{f"phrasing {k}": v for k, v in enumerate(values, 1)}, "pooled": metric.value,
            "pooled CI low": metric.ci[0] if metric.ci else None, "pooled CI high": metric.ci[1] if metric.ci else None,
            "found in": f"{sum(found)} of {len(values)} phrasings"}


__all__ = ["FORMATS_FIELD", "FORMAT_NAMES", "POOLED", "SAME_PHRASING", "STUDY_FIRST", "Asked", "Format", "Phrased",
           "Way", "check_new", "check_not_prompt", "column", "count", "excludes_0", "field", "found_table", "pool",
           "pooled", "question_field", "questions", "refuse_ways", "row", "setting", "table", "ways", "ways_of"]
