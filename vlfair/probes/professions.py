"""The professions study: which race and gender a model associates most with each profession."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, Field

from vlfair.measures import reporters
from vlfair.outputs import Table
from vlfair.probes import phrasings as phrasing
from vlfair.probes.asking import Asking
from vlfair.probes.base import Context, Output, Probe, ProbeError, UploadSpec, clip_score
from vlfair.probes.declared import Declared, Mean, Range, evaluate, too_small
from vlfair.probes.grouping import Grouped
from vlfair.probes.registry import register
from vlfair.probes.scorers import Scorer, was_asked
from vlfair.probes.settings import (
    Bootstrap,
    Count,
    Name,
    ProbeSettings,
    Settings,
    Text,
    distinct,
    placeholders,
)
from vlfair.samples import Samples

Attribute = Literal["race", "gender"]
Column = Literal["profession", "gender", "race"]
COLUMNS: tuple[Column, ...] = ("profession", "gender", "race")


@dataclasses.dataclass(frozen=True)
class Quantity:
    """What each image is scored by against its own profession: samples.parquet's column, the metric
    of a group's mean, and how a person reads it."""

    column: str
    metric: str
    label: str     # axis and table label
    meaning: str   # the report's note


# setting `score`: the study's CLIPScore (a contrastive model's only); the probability of the image's own
# profession among all the professions x100 (a contrastive model's softmax over the prompts, at its logit
# scale; a generative model's answer probabilities renormalised over them), which both kinds give; or a
# generative model's probability of answering with the own profession x100, not renormalised: a score of
# one (image, text) pair, as CLIPScore is (a generative model's default)
QUANTITIES = {
    "clipscore": Quantity("clipscore", "mean_clipscore", "CLIPScore",
                          "CLIPScore = max(100 cos(image, prompt), 0) with each image's own profession prompt"),
    "probability": Quantity("probability", "mean_probability", "probability x100",
                            "probability x100 of each image's own profession among the professions present (a "
                            "contrastive model: the softmax over their prompts at its logit scale; a generative "
                            "model: its answers' probabilities renormalised over the professions)"),
    "likelihood": Quantity("likelihood", "mean_answer_likelihood", "P(answer) x100",
                           "P(answer) x100: a generative model's probability of answering with each image's own "
                           "profession, not renormalised (the answer's tokens' probabilities multiplied)"),
}


class ProfessionQuestion(Asking):
    """A generative model is asked ``question``; its candidate answers are ``answer`` with each profession."""

    answer: Annotated[Text, AfterValidator(placeholders("profession"))] = Field(
        description="a candidate answer, with {profession}")


def _key(value: str) -> str:
    return " ".join(str(value).replace("_", " ").replace("-", " ").lower().split())


# a layout's labels, each once as the probe reads labels (case, '_' and '-' ignored)
Labels = Annotated[list[Name], AfterValidator(distinct(_key, "case, '_' and '-' aside"))]


class Layout(Settings):
    """The study's data: every profession x gender x race cell holds ``per_cell`` images."""

    profession: Labels
    gender: Labels
    race: Labels
    per_cell: Count

    def values(self, column: str) -> list[str]:
        return list(getattr(self, column, []))


class ProfessionsSettings(ProbeSettings, Bootstrap, Grouped, phrasing.Phrased, phrasing.Asked):
    prompt: Annotated[Text, AfterValidator(placeholders("profession"))] = Field(
        description="the CLIPScore prompt, with {profession}")
    attributes: Annotated[list[Attribute], AfterValidator(distinct())] = Field(
        min_length=1, description="the attributes compared within every profession: race, gender or both")
    layout: Layout = Field(description="the study's professions, genders, races and images per cell")
    aliases: dict[Column, dict[Name, Name] | None] = Field(
        default_factory=dict, description="other spellings of the study's labels, per column")
    score: Literal["clipscore", "probability", "likelihood"] = Field(
        description="clipscore: the study's CLIPScore (contrastive models); probability: of the image's own "
                    "profession among the professions x100 (both kinds); likelihood: a generative model's probability "
                    "of answering with it x100 (a generative model's default in place of clipscore)")
    generative: ProfessionQuestion = Field(description="how a generative model (lvlm:) is asked: the question and "
                                                       "the answer with {profession}")
    phrasings: phrasing.setting("profession") = phrasing.field("prompt, each with {profession}")  # type: ignore[valid-type]
    question_phrasings: phrasing.questions() = phrasing.question_field(  # type: ignore[valid-type]
        "its candidate answers each profession")
    answer_formats: Annotated[list[phrasing.Format], AfterValidator(distinct())] = phrasing.FORMATS_FIELD

    @property
    def all_phrasings(self) -> list[str]:
        """The study's prompt, then the other phrasings."""
        return [self.prompt, *self.phrasings]


@register
class ProfessionsProbe(Probe):
    name = "professions"
    Settings = ProfessionsSettings
    position = 0  # study 000
    published_file = "professions.yaml"
    help = "CLIPScore of profession prompts by gender and race"
    description = ("Mean CLIPScore of 'A photo of a {profession}' per profession and gender or race, as the "
                   "professions study's Tables 1-2, with the median image of every cell and permutation-tested gaps. "
                   "Data: the professions schema (vlfair prepare professions, or synthetic:professions).")
    schemas = ("professions",)
    required_columns = {"professions": ("image", "profession", "gender", "race")}
    upload = UploadSpec("professions", ("profession", "gender", "race"), ("gender", "race"))
    asks_questions = True  # professions.yaml's generative section
    model_settings = ("generative",)  # how a generative model is asked belongs to it, as its spec does
    settings: ProfessionsSettings

    def settings_for(self, scorer: Scorer) -> tuple[ProfessionsSettings, list[str]]:
        s, warnings = self.settings, []
        if s.score == "clipscore" and scorer.asks and not scorer.embeds:
            # a model that is asked has no CLIPScore: its per-pair counterpart is the answer's probability;
            # its runs record the quantity measured, so that they are compared and ranked with runs of
            # the same quantity only
            s = s.model_copy(update={"score": "likelihood"})
            warnings.append("a generative model has no CLIPScore: measured by its probability of answering with each "
                            "image's own profession (score=likelihood)")
        phrasing.refuse_ways("professions", s, scorer)
        if s.score == "likelihood" and ("generate" in (s.generative.mode, *s.answer_formats)
                                        or s.generative.normalize_length):
            raise ProbeError("professions: setting score = 'likelihood' is the probability of the whole answer: it "
                             "takes generative.mode = 'likelihood', no answer_formats = ['generate'] and "
                             "normalize_length = false (or use score=probability)")
        if s.score == "likelihood":
            scorer.require("asks", "setting score = 'likelihood' is a generative model's probability of an answer",
                           "professions", "use clipscore or probability")
        if s.phrasings and s.score != "clipscore":  # (a generative model's phrasings: refused just above)
            raise ProbeError("professions: setting phrasings rephrases the CLIPScore prompt (score = 'clipscore', a "
                             "contrastive model); leave it empty for score = 'probability' or 'likelihood'")
        return s, warnings

    def score(self, ctx: Context, schema: str | None) -> Samples:
        import pandas as pd

        s = self.settings
        warnings = []
        phrased = {}
        generative_phrasings: list[str] = []
        if s.score == "clipscore":  # the study's: each image with its own profession's prompt
            images, rows = ctx.images()
            columns = {c: self._canonical(c, ctx.column(c, rows)) for c in COLUMNS}
            names = self._ordered("profession", set(columns["profession"].tolist()))
            mine = [names.index(p) for p in columns["profession"]]  # each image's own profession
            text = ctx.texts([s.prompt.format(profession=p) for p in names])
            scores = clip_score(images, text[mine])
            for number, other in enumerate(s.phrasings, start=2):  # the same images with each other phrasing
                phrased[phrasing.column("clipscore", number)] = clip_score(
                    images, ctx.texts([other.format(profession=p) for p in names])[mine])
        else:  # the own profession's probability (among every profession present) or answer likelihood
            present = self._canonical("profession", ctx.column("profession", ctx.rows()))  # readable rows only
            names = self._ordered("profession", set(present.tolist()))
            prompts = [s.prompt.format(profession=p) for p in names]
            answers = [s.generative.answer.format(profession=p) for p in names]
            # a generative model's question in its answer format (phrasing 1), then its other ways (phrasings 2, ...)
            ways = phrasing.ways_of(ctx.scorer, s, [s.prompt])
            for number, (_label, _prompt, way) in enumerate(ways, start=1):
                found = ctx.text_scores(prompts, way, answers)
                if number == 1:
                    rows = found.rows
                    columns = {c: self._canonical(c, ctx.column(c, rows)) for c in COLUMNS}
                    own = np.array([names.index(p) for p in columns["profession"]], dtype=np.int64)
                if s.score == "likelihood":  # exp(log-likelihood) of the own answer: no other answer in it
                    way_scores = 100.0 * np.exp(found.values[np.arange(len(rows)), own])
                else:
                    way_scores = 100.0 * found.probabilities[np.arange(len(rows)), own]
                if number == 1:
                    scores = way_scores
                else:
                    phrased[phrasing.column(QUANTITIES[s.score].column, number)] = way_scores
            if len(ways) > 1:
                generative_phrasings = [way.label for way in ways]
        layout = self._layout(columns)
        if layout["departs"]:
            warnings.append("the data departs from the study's layout: " + layout["summary"])
        frame: dict[str, Any] = ctx.identity(rows)
        for column in COLUMNS:
            frame[column] = columns[column]
        frame[QUANTITIES[s.score].column] = scores
        frame.update(phrased)
        facts = {"prompt": s.prompt, "layout": layout, "score": s.score}
        if s.phrasings:
            facts["phrasings"] = s.all_phrasings
        if generative_phrasings:
            facts["phrasings"] = generative_phrasings
        facts.update(ctx.scorer.asked_facts(question=s.generative.question, answer=s.generative.answer,
                                            mode=s.generative.mode))
        return Samples(pd.DataFrame(frame), facts, warnings)

    def analyze(self, samples: Samples) -> Output:
        import pandas as pd

        from vlfair.report import plots

        s = self.settings
        quantity = _quantity(samples)
        rows, scores = samples.column("row"), samples.column(quantity.column)
        professions = samples.column("profession")
        names = self._ordered("profession", set(professions.tolist()))
        out = Output(settings=dict(samples.facts), notes=list(s.notes), warnings=list(samples.warnings))
        declared = self.declare(samples)
        metrics = evaluate(samples, [*declared, *phrasing.pooled(declared, samples)], self.facts,
                           **s.evaluation)
        out.metrics = [m for m in metrics if "phrasing" not in m.subset]  # the study's, then each other phrasing's
        out.metrics += [m for m in metrics if "phrasing" in m.subset]
        for attribute in s.attributes:
            groups = samples.column(attribute)
            means: dict[str, dict] = {}
            gaps = {}
            for metric in out.metrics:
                subset = metric.subset
                if subset.get("attribute") != attribute or "phrasing" in subset:
                    continue
                if metric.name == quantity.metric:
                    means.setdefault(subset["profession"], {})[subset["group"]] = metric.value
                else:
                    low, high = metric.ci or (None, None)
                    gaps[subset["profession"]] = {"most associated": metric.details["top_group"],
                                                  "max gap": metric.value, "CI low": low, "CI high": high,
                                                  "p": metric.p_value}
            for profession in names:
                if profession not in gaps:  # a profession of one group, or a group of one image: no gap
                    mine = professions == profession
                    out.warnings.append(f"{profession} by {attribute}: {too_small(groups[mine], scores[mine])}; "
                                        "its means are shown without a gap")
            if not means:
                continue
            # the study's Tables 1-2: a row per group, a column per profession, each column's largest marked
            table = pd.DataFrame(means)
            table = table.reindex(self._ordered(attribute, set(table.index))).rename_axis(attribute)
            out.tables[f"{quantity.column}_by_{attribute}"] = Table(table, mark_column_max=True)
            out.tables[f"gaps_by_{attribute}"] = pd.DataFrame.from_dict(gaps, orient="index").rename_axis("profession")
            out.figure(f"heatmap_{attribute}", plots.heatmap, table, _title(samples, quantity, attribute),
                       quantity.label, xlabel="profession", ylabel=attribute)
            # which image is each cell's median is a matter of scores: its table stands in a rescore, its
            # picture (illustrate) needs the images
            picks = plots.median_picks(professions, groups, scores)
            out.tables[f"median_images_{attribute}"] = pd.DataFrame(
                [{"profession": p, attribute: g, "row": int(rows[i]), quantity.label: float(scores[i])}
                 for (p, g), i in sorted(picks.items(), key=lambda kv: (names.index(kv[0][0]), str(kv[0][1])))]
            ).set_index(["profession", attribute])
        if phrasing.count(samples) > 1:
            self._phrasings(samples, out)
        out.notes.append(f"{quantity.meaning}; the largest mean per profession is in bold. vlfair's extensions: "
                         "bootstrap CIs of the means (results.json) and, per profession, the largest gap with a "
                         "permutation p-value (gaps tables).")
        return out

    def _phrasings(self, samples: Samples, out: Output) -> None:
        """An extension of vlfair's (issue 46): the phrasings table, each profession's gap with every phrasing and
        pooled (:mod:`vlfair.probes.phrasings`), found in a phrasing where its permutation test finds it
        (p < 1 - confidence)."""
        alpha = 1 - self.settings.confidence
        found = phrasing.found_table(
            out.metrics, "group_score_gap", lambda subset: {k: subset[k] for k in ("attribute", "profession")},
            samples.facts["phrasings"], lambda metric, _pooled: metric.p_value is not None and metric.p_value < alpha,
            "Each profession's largest gap", f"permutation test finds the gap (p < {alpha:g})")
        if found is not None:
            out.tables["phrasings"] = found

    def illustrate(self, ctx: Context, samples: Samples, out: Output) -> None:
        """The image with the median CLIPScore of every profession per group (the study's Figures
        3-4), each grid placed after its attribute's heatmap."""
        from vlfair.report import plots

        quantity = _quantity(samples)
        rows, scores = samples.column("row"), samples.column(quantity.column)
        professions = samples.column("profession")
        figures = {}
        for key, figure in out.figures.items():
            figures[key] = figure
            attribute = key.removeprefix("heatmap_")
            table = out.tables.get(f"{quantity.column}_by_{attribute}")
            if attribute == key or table is None:
                continue
            frame = Table.of(table).frame
            figures[f"median_images_{attribute}"] = plots.median_image_grid(
                ctx.dataset, rows, professions, samples.column(attribute), scores, list(frame.columns),
                list(frame.index), f"Image with the median {quantity.label} of each profession per {attribute}")
        out.figures = figures

    def declare(self, samples: Samples) -> list[Declared]:
        """Per attribute, over every image, grouped by profession x group cell (each resampled within
        itself, as group_score_gap resamples within the groups of each profession): each cell's mean
        score, and each profession's group_score_gap, the range of its cells' means; with other phrasings
        of the prompt, the same of each (compared phrasing by phrasing)."""
        quantity = _quantity(samples)
        metrics = self._declared(samples, quantity.column, {})
        for number in range(2, phrasing.count(samples) + 1):
            metrics += self._declared(samples, phrasing.column(quantity.column, number), {"phrasing": number})
        return metrics

    def _declared(self, samples: Samples, column: str, phrased: dict[str, Any]) -> list[Declared]:
        quantity = _quantity(samples)
        professions = samples.column("profession")
        metrics = []
        for attribute in self.settings.attributes:
            groups = samples.column(attribute)
            cells = [(p, g) for p in self._ordered("profession", set(professions.tolist()))
                     for g in sorted(set(groups[professions == p].tolist()))]
            # each profession resampled apart, as the study's measure (group_score_gap) is called per profession
            on: dict[str, Any] = {"group": ("profession", attribute), "order": cells, "unit": "profession"}
            for profession in dict.fromkeys(p for p, _ in cells):
                own = tuple(c for c in cells if c[0] == profession)
                subset = {"profession": profession, "attribute": attribute}
                metrics += [Declared(quantity.metric, {**subset, "group": c[1], **phrased}, Mean(column, c), **on)
                            for c in own]
                metrics.append(Declared("group_score_gap", {**subset, **phrased}, Range(column, own),
                                        report=reporters.score_gap, **on))
        return metrics

    def _canonical(self, column: Column, values: np.ndarray) -> np.ndarray:
        """Labels in the study's spelling: case, '_' and '-' ignored; ``aliases`` (Latinx -> Latin American)."""
        known = {_key(v): v for v in self.settings.layout.values(column)}
        known.update({_key(a): v for a, v in (self.settings.aliases.get(column) or {}).items()})
        return np.asarray([known.get(_key(v), v) for v in values], dtype=object)

    def _ordered(self, column: str, present: set) -> list:
        """The study's order (its tables' columns are alphabetical), then values it does not have."""
        study = [v for v in self.settings.layout.values(column) if v in present]
        return study + sorted(present - set(study), key=str)

    def _layout(self, columns: dict[Column, np.ndarray]) -> dict:
        """Cells missing, extra, short or over against the study's profession x gender x race layout."""
        layout = self.settings.layout
        keys = COLUMNS
        expected = set(itertools.product(*(layout.values(k) for k in keys)))
        counts = Counter(zip(*(columns[k].tolist() for k in keys)))
        n = layout.per_cell
        cell = lambda c: {"profession": c[0], "gender": c[1], "race": c[2]}  # noqa: E731
        missing = [cell(c) for c in sorted(expected - set(counts))]
        extra = [{**cell(c), "rows": counts[c]} for c in sorted(set(counts) - expected, key=str)]
        short = [{**cell(c), "rows": counts[c]} for c in sorted(expected & set(counts)) if counts[c] < n]
        over = [{**cell(c), "rows": counts[c]} for c in sorted(expected & set(counts)) if counts[c] > n]
        parts = [f"{len(found)} {what} ({_cells(found)})" for found, what in (
            (missing, "missing cell(s)"), (extra, "cell(s) not in the study"),
            (short, f"cell(s) with fewer than {n} images"), (over, f"cell(s) with more than {n} images")) if found]
        return {"expected_cells": len(expected), "per_cell": n, "missing_cells": missing, "extra_cells": extra,
                "short_cells": short, "over_cells": over, "departs": bool(parts), "summary": "; ".join(parts)}


def _quantity(samples: Samples) -> Quantity:
    """The quantity the samples hold (runs before setting ``score`` hold CLIPScores)."""
    return QUANTITIES[samples.facts.get("score", "clipscore")]


def _title(samples: Samples, quantity: Quantity, attribute: str) -> str:
    """The heatmap's title: the prompt a contrastive model read, or the question a generative one answered."""
    if was_asked(samples.facts):
        return f"Mean {quantity.label} of the own profession, asked '{samples.facts['question']}', by {attribute}"
    return f"Mean {quantity.label} of '{samples.facts['prompt']}' by {attribute}"


def _cells(cells: list[dict], shown: int = 6) -> str:
    text = ", ".join("/".join(str(c[k]) for k in ("profession", "gender", "race"))
                     + (f": {c['rows']}" if "rows" in c else "") for c in cells[:shown])
    return text + (f", and {len(cells) - shown} more" if len(cells) > shown else "")
