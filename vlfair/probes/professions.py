"""The professions study: which race and gender a model associates most with each profession."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pandas as pd

from vlfair import measures
from vlfair.report import plots
from vlfair.probes.base import Context, Output, Probe, clip_score
from vlfair.outputs import Metric
from vlfair.outputs import MARK_COLUMN_MAX


def _key(value: str) -> str:
    return " ".join(str(value).replace("_", " ").replace("-", " ").lower().split())


class ProfessionsProbe(Probe):
    name = "professions"
    settings_file = "professions.yaml"
    published_file = "professions.yaml"
    allowed = {"prompt", "attributes", "layout", "aliases", "bootstrap", "confidence", "seed", "n_permutations"}
    schemas = ("professions",)
    required_columns = {"professions": ("image", "profession", "gender", "race")}

    def run(self, ctx: Context, schema: str) -> Output:
        s = self.settings
        images, rows = ctx.images()
        columns = {c: self._canonical(c, ctx.column(c, rows)) for c in ("profession", "gender", "race")}
        professions = columns["profession"]
        names = self._ordered("profession", set(professions.tolist()))
        prompts = [s["prompt"].format(profession=p) for p in names]
        text = ctx.texts(prompts)
        scores = clip_score(images, text[[names.index(p) for p in professions]])
        layout = self._layout(columns)
        out = Output(settings={"prompt": s["prompt"], "layout": layout}, notes=list(s.get("notes", [])))
        if layout["departs"]:
            out.warnings.append("the data departs from the study's layout: " + layout["summary"])
        for attribute in s["attributes"]:
            groups = columns[attribute]
            means, gaps = {}, {}
            for profession in names:
                mask = professions == profession
                subset = {"profession": profession, "attribute": attribute}
                try:
                    gap = measures.group_score_gap(scores[mask], groups[mask], bootstrap=s["bootstrap"],
                                                   confidence=s["confidence"], seed=s["seed"],
                                                   n_permutations=s["n_permutations"])
                except ValueError as exc:  # e.g. a group of one image: its mean stands, without CI or gap
                    out.warnings.append(f"{profession} by {attribute}: {exc}; its means are shown without CIs or gap")
                    means[profession] = pd.Series(scores[mask]).groupby(groups[mask]).mean().to_dict()
                    out.metrics += [Metric("mean_clipscore", {**subset, "group": group}, mean)
                                    for group, mean in means[profession].items()]
                    continue
                for group, mean in gap["group_means"].items():
                    out.metrics.append(Metric("mean_clipscore", {**subset, "group": group}, mean,
                                              gap["group_means_ci"][group] if gap["group_means_ci"] else None))
                out.metrics.append(Metric("group_score_gap", subset, gap["max_gap"], gap["max_gap_ci"], gap["p_value"],
                                          {k: gap[k] for k in ("group_means", "group_means_ci", "group_counts",
                                                               "top_group", "bottom_group", "min_max_ratio",
                                                               "log10_p_value", "p_value_method")}))
                means[profession] = gap["group_means"]
                gaps[profession] = {"most associated": gap["top_group"], "max gap": gap["max_gap"],
                                    "CI low": gap["max_gap_ci"][0] if gap["max_gap_ci"] else None,
                                    "CI high": gap["max_gap_ci"][1] if gap["max_gap_ci"] else None, "p": gap["p_value"]}
            if not means:
                continue
            # the study's Tables 1-2: a row per group, a column per profession, each column's largest marked
            table = pd.DataFrame(means)
            table = table.reindex(self._ordered(attribute, set(table.index))).rename_axis(attribute)
            table.attrs[MARK_COLUMN_MAX] = True
            out.tables[f"clipscore_by_{attribute}"] = table
            out.tables[f"gaps_by_{attribute}"] = pd.DataFrame.from_dict(gaps, orient="index").rename_axis("profession")
            out.figures[f"heatmap_{attribute}"] = plots.heatmap(
                table, f"Mean CLIPScore of '{s['prompt']}' by {attribute}", "CLIPScore", xlabel="profession", ylabel=attribute)
            picks = plots.median_picks(professions, groups, scores)
            out.tables[f"median_images_{attribute}"] = pd.DataFrame(
                [{"profession": p, attribute: g, "row": int(rows[i]), "CLIPScore": float(scores[i])}
                 for (p, g), i in sorted(picks.items(), key=lambda kv: (names.index(kv[0][0]), str(kv[0][1])))]
            ).set_index(["profession", attribute])
            out.figures[f"median_images_{attribute}"] = plots.median_image_grid(
                ctx.dataset, rows, professions, groups, scores, list(table.columns), list(table.index),
                f"Image with the median CLIPScore of each profession per {attribute}")
        out.notes.append("CLIPScore = max(100 cos(image, prompt), 0) with each image's own profession prompt; "
                         "the largest mean per profession is in bold. vlfair's extensions: bootstrap CIs of the "
                         "means (results.json) and, per profession, the largest gap with a permutation p-value "
                         "(gaps tables).")
        return out

    def _canonical(self, column: str, values: np.ndarray) -> np.ndarray:
        """Labels in the study's spelling: case, '_' and '-' ignored; ``aliases`` (Latinx -> Latin American)."""
        layout = self.settings["layout"]
        known = {_key(v): v for v in layout.get(column, [])}
        known.update({_key(a): v for a, v in (self.settings.get("aliases", {}).get(column) or {}).items()})
        return np.asarray([known.get(_key(v), v) for v in values], dtype=object)

    def _ordered(self, column: str, present: set) -> list:
        """The study's order (its tables' columns are alphabetical), then values it does not have."""
        study = [v for v in self.settings["layout"].get(column, []) if v in present]
        return study + sorted(present - set(study), key=str)

    def _layout(self, columns: dict[str, np.ndarray]) -> dict:
        """Cells missing, extra, short or over against the study's profession x gender x race layout."""
        layout = self.settings["layout"]
        keys = ("profession", "gender", "race")
        expected = set(itertools.product(*(layout[k] for k in keys)))
        counts = Counter(zip(*(columns[k].tolist() for k in keys)))
        n = layout["per_cell"]
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


def _cells(cells: list[dict], shown: int = 6) -> str:
    text = ", ".join("/".join(str(c[k]) for k in ("profession", "gender", "race"))
                     + (f": {c['rows']}" if "rows" in c else "") for c in cells[:shown])
    return text + (f", and {len(cells) - shown} more" if len(cells) > shown else "")
