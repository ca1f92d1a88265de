"""The professions study: which race and gender a model associates most with each profession."""

from __future__ import annotations

import pandas as pd

from vlfair import measures
from vlfair.probes import plots
from vlfair.probes.base import Context, Output, Probe, clip_score
from vlfair.report.results import Metric


class ProfessionsProbe(Probe):
    name = "professions"
    settings_file = "professions.yaml"
    allowed = {"prompt", "attributes", "bootstrap", "confidence", "seed", "n_permutations"}
    schemas = ("professions",)
    required_columns = {"professions": ("image", "profession", "gender", "race")}

    def run(self, ctx: Context, schema: str) -> Output:
        s = self.settings
        images, rows = ctx.images()
        professions = ctx.column("profession", rows)
        names = sorted(set(professions.tolist()))
        prompts = [s["prompt"].format(profession=p) for p in names]
        text = ctx.texts(prompts)
        scores = clip_score(images, text[[names.index(p) for p in professions]])
        out = Output(settings={"prompt": s["prompt"]})
        for attribute in s["attributes"]:
            groups = ctx.column(attribute, rows)
            table = {}
            for profession in names:
                mask = professions == profession
                subset = {"profession": profession, "attribute": attribute}
                try:
                    gap = measures.group_score_gap(scores[mask], groups[mask], bootstrap=s["bootstrap"],
                                                   confidence=s["confidence"], seed=s["seed"],
                                                   n_permutations=s["n_permutations"])
                except ValueError as exc:  # reported, never averaged over silently
                    out.warnings.append(f"{profession} by {attribute}: {exc}")
                    continue
                out.metrics.append(Metric("group_score_gap", subset, gap["max_gap"], gap["max_gap_ci"], gap["p_value"],
                                          {k: gap[k] for k in ("group_means", "group_means_ci", "group_counts",
                                                               "top_group", "bottom_group", "min_max_ratio")}))
                for group, mean in gap["group_means"].items():
                    out.metrics.append(Metric("mean_clipscore", {**subset, "group": group}, mean,
                                              gap["group_means_ci"][group] if gap["group_means_ci"] else None))
                table[profession] = {**{g: round(m, 2) for g, m in gap["group_means"].items()},
                                     "most associated": gap["top_group"], "max gap": round(gap["max_gap"], 2),
                                     "p": gap["p_value"]}
            frame = pd.DataFrame.from_dict(table, orient="index").rename_axis("profession")
            out.tables[f"profession_by_{attribute}"] = frame
            group_columns = [c for c in frame.columns if c not in ("most associated", "max gap", "p")]
            out.figures[f"heatmap_{attribute}"] = plots.heatmap(
                frame[group_columns], f"Mean CLIPScore of '{s['prompt']}' by {attribute}", "CLIPScore")
            out.figures[f"median_images_{attribute}"] = plots.median_images(
                ctx.dataset, rows, groups, scores, f"Image with the median CLIPScore per {attribute}")
        out.notes.append("CLIPScore = max(100 cos(image, prompt), 0) with each image's own profession prompt; "
                         "p-values permute group labels within the profession (range of group means).")
        return out
