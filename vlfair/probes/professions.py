"""The professions study: which race and gender a model associates most with each profession."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, Field

from vlfair.outputs import Metric, Table, metric_from, metrics_per, neutral_value
from vlfair.probes import register
from vlfair.probes.base import Context, Output, Probe, UploadSpec, clip_score
from vlfair.probes.settings import (
    Bootstrap,
    Count,
    Name,
    Permutations,
    ProbeSettings,
    Settings,
    Text,
    distinct,
    placeholders,
)
from vlfair.samples import Samples

if TYPE_CHECKING:
    from vlfair.paired import Moments, RowSet

Attribute = Literal["race", "gender"]
Column = Literal["profession", "gender", "race"]
COLUMNS: tuple[Column, ...] = ("profession", "gender", "race")
SCORE = "clipscore"  # samples.parquet's column of each image's CLIPScore with its own profession's prompt


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


class ProfessionsSettings(ProbeSettings, Bootstrap, Permutations):
    prompt: Annotated[Text, AfterValidator(placeholders("profession"))] = Field(
        description="the CLIPScore prompt, with {profession}")
    attributes: Annotated[list[Attribute], AfterValidator(distinct())] = Field(
        min_length=1, description="the attributes compared within every profession: race, gender or both")
    layout: Layout = Field(description="the study's professions, genders, races and images per cell")
    aliases: dict[Column, dict[Name, Name] | None] = Field(
        default_factory=dict, description="other spellings of the study's labels, per column")


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
    settings: ProfessionsSettings

    def score(self, ctx: Context, schema: str | None) -> Samples:
        import pandas as pd

        s = self.settings
        images, rows = ctx.images()
        columns = {c: self._canonical(c, ctx.column(c, rows)) for c in COLUMNS}
        professions = columns["profession"]
        names = self._ordered("profession", set(professions.tolist()))
        text = ctx.texts([s.prompt.format(profession=p) for p in names])
        scores = clip_score(images, text[[names.index(p) for p in professions]])
        layout = self._layout(columns)
        warnings = ["the data departs from the study's layout: " + layout["summary"]] if layout["departs"] else []
        frame: dict[str, Any] = ctx.identity(rows)
        for column in COLUMNS:
            frame[column] = columns[column]
        frame[SCORE] = scores
        return Samples(pd.DataFrame(frame), {"prompt": s.prompt, "layout": layout}, warnings)

    def analyze(self, samples: Samples) -> Output:
        import pandas as pd

        from vlfair import measures
        from vlfair.report import plots

        s = self.settings
        rows, scores = samples.column("row"), samples.column(SCORE)
        professions = samples.column("profession")
        names = self._ordered("profession", set(professions.tolist()))
        prompt = samples.facts["prompt"]
        out = Output(settings=dict(samples.facts), notes=list(s.notes), warnings=list(samples.warnings))
        for attribute in s.attributes:
            groups = samples.column(attribute)
            means, gaps = {}, {}
            for profession in names:
                mask = professions == profession
                subset = {"profession": profession, "attribute": attribute}
                try:
                    gap = measures.group_score_gap(scores[mask], groups[mask], n_permutations=s.n_permutations,
                                                   **s.resampling)
                except ValueError as exc:  # e.g. a group of one image: its mean stands, without CI or gap
                    out.warnings.append(f"{profession} by {attribute}: {exc}; its means are shown without CIs or gap")
                    means[profession] = pd.Series(scores[mask]).groupby(groups[mask]).mean().to_dict()
                    out.metrics += [Metric("mean_clipscore", {**subset, "group": group}, mean)
                                    for group, mean in means[profession].items()]
                    continue
                out.metrics += metrics_per("mean_clipscore", subset, gap, "group_means", "group_means_ci")
                out.metrics.append(metric_from("group_score_gap", subset, gap, "max_gap", "max_gap_ci", "p_value", (
                    "group_means", "group_means_ci", "group_counts", "top_group", "bottom_group", "min_max_ratio",
                    "log10_p_value", "p_value_method")))
                means[profession] = gap["group_means"]
                gaps[profession] = {"most associated": gap["top_group"], "max gap": gap["max_gap"],
                                    "CI low": gap["max_gap_ci"][0] if gap["max_gap_ci"] else None,
                                    "CI high": gap["max_gap_ci"][1] if gap["max_gap_ci"] else None, "p": gap["p_value"]}
            if not means:
                continue
            # the study's Tables 1-2: a row per group, a column per profession, each column's largest marked
            table = pd.DataFrame(means)
            table = table.reindex(self._ordered(attribute, set(table.index))).rename_axis(attribute)
            out.tables[f"clipscore_by_{attribute}"] = Table(table, mark_column_max=True)
            out.tables[f"gaps_by_{attribute}"] = pd.DataFrame.from_dict(gaps, orient="index").rename_axis("profession")
            out.figures[f"heatmap_{attribute}"] = plots.heatmap(
                table, f"Mean CLIPScore of '{prompt}' by {attribute}", "CLIPScore", xlabel="profession",
                ylabel=attribute)
            # which image is each cell's median is a matter of scores: its table stands in a rescore, its
            # picture (illustrate) needs the images
            picks = plots.median_picks(professions, groups, scores)
            out.tables[f"median_images_{attribute}"] = pd.DataFrame(
                [{"profession": p, attribute: g, "row": int(rows[i]), "CLIPScore": float(scores[i])}
                 for (p, g), i in sorted(picks.items(), key=lambda kv: (names.index(kv[0][0]), str(kv[0][1])))]
            ).set_index(["profession", attribute])
        out.notes.append("CLIPScore = max(100 cos(image, prompt), 0) with each image's own profession prompt; "
                         "the largest mean per profession is in bold. vlfair's extensions: bootstrap CIs of the "
                         "means (results.json) and, per profession, the largest gap with a permutation p-value "
                         "(gaps tables).")
        return out

    def illustrate(self, ctx: Context, samples: Samples, out: Output) -> None:
        """The image with the median CLIPScore of every profession per group (the study's Figures
        3-4), each grid placed after its attribute's heatmap."""
        from vlfair.report import plots

        rows, scores = samples.column("row"), samples.column(SCORE)
        professions = samples.column("profession")
        figures = {}
        for key, figure in out.figures.items():
            figures[key] = figure
            attribute = key.removeprefix("heatmap_")
            table = out.tables.get(f"clipscore_by_{attribute}")
            if attribute == key or table is None:
                continue
            frame = Table.of(table).frame
            figures[f"median_images_{attribute}"] = plots.median_image_grid(
                ctx.dataset, rows, professions, samples.column(attribute), scores, list(frame.columns),
                list(frame.index), f"Image with the median CLIPScore of each profession per {attribute}")
        out.figures = figures

    def comparisons(self, samples: Samples) -> list[RowSet]:
        """Per attribute, one row set of every image: its groups are the profession x group cells
        (each resampled within itself, as group_score_gap resamples within the groups of each
        profession); each cell's mean_clipscore is its mean, each profession's group_score_gap the
        range of its cells' means (where the run reported one: at least 2 groups of 2 images)."""
        from vlfair import measures, paired, stats

        professions = samples.column("profession")
        row_sets = []
        for attribute in self.settings.attributes:
            groups = samples.column(attribute)
            cells: list[tuple[str, str]] = []
            codes = np.empty(len(professions), dtype=np.int64)
            statistics = []
            for profession in self._ordered("profession", set(professions.tolist())):
                rows = np.flatnonzero(professions == profession)
                names, local = stats.encode_groups(groups[rows].tolist())  # sorted, as the measure's
                first = len(cells)
                codes[rows] = first + local
                cells += [(profession, name) for name in names]
                subset = {"profession": profession, "attribute": attribute}
                statistics += [paired.Statistic("mean_clipscore", {**subset, "group": name},
                                                paired.group_mean(first + g), neutral_value("mean_clipscore"))
                               for g, name in enumerate(names)]
                counts = np.bincount(local, minlength=len(names))
                if len(names) >= 2 and counts.min() >= measures.MIN_GROUP_SIZE:  # as group_score_gap raises
                    statistics.append(paired.Statistic("group_score_gap", subset,
                                                       _range_of(range(first, len(cells))),
                                                       neutral_value("group_score_gap")))
            if statistics:
                row_sets.append(paired.RowSet(np.arange(len(professions)), (SCORE,), codes, tuple(statistics)))
        return row_sets

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


def _range_of(groups: Iterable[int]) -> Callable[[Moments], np.ndarray]:
    """The largest minus the smallest mean of some of a row set's groups (one profession's cells):
    group_score_gap's max_gap."""
    index = np.asarray(list(groups), dtype=np.int64)

    def statistic(m: Moments) -> np.ndarray:
        means = m.means[:, index, 0]
        return np.nanmax(means, axis=1) - np.nanmin(means, axis=1)
    return statistic


def _cells(cells: list[dict], shown: int = 6) -> str:
    text = ", ".join("/".join(str(c[k]) for k in ("profession", "gender", "race"))
                     + (f": {c['rows']}" if "rows" in c else "") for c in cells[:shown])
    return text + (f", and {len(cells) - shown} more" if len(cells) > shown else "")
