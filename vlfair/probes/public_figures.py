"""The P-FI study: capability at three category levels, gender bias ratio, name retention."""

from __future__ import annotations

import numpy as np
import pandas as pd

from vlfair import measures
from vlfair.probes import plots
from vlfair.probes.base import Context, Output, Probe
from vlfair.report.results import Metric


class PublicFiguresProbe(Probe):
    name = "public-figures"
    settings_file = "public_figures.yaml"
    allowed = {"prompt", "name_prompt", "sport_prompt", "politicians", "person", "occupation", "office", "bias_ratio",
               "bootstrap", "confidence", "seed"}
    schemas = ("pfi",)
    required_columns = {"pfi": ("image", "name", "category", "gender")}

    def run(self, ctx: Context, schema: str) -> Output:
        s = self.settings
        images, rows = ctx.images()
        categories, genders, names = (ctx.column(c, rows) for c in ("category", "gender", "name"))
        politicians = np.isin(categories, s["politicians"])
        occupation = np.where(politicians, "politician", categories)
        out = Output(settings={"prompt": s["prompt"], "name_prompt": s["name_prompt"]})
        capability = {}

        def classify(level: str, mask: np.ndarray, classes: list[str], truth: np.ndarray, prompt: str, label: str):
            text = ctx.texts([prompt.format(c) for c in classes])
            probabilities = ctx.encoder.probabilities(images[mask], text)
            predicted = np.asarray(classes)[probabilities.argmax(axis=1)]
            self._accuracy(out, level, label, predicted, truth[mask], genders[mask])
            capability.setdefault(label, {})[level] = float((predicted == truth[mask]).mean())
            return probabilities, predicted

        for category in sorted(set(occupation.tolist())):
            mask = occupation == category
            person_classes = s["person"].get(category, s["person"]["default"])
            classify("person", mask, person_classes, np.full(len(rows), "person"), s["prompt"], category)
            if category in s["occupation"]:
                classes = s["occupation"][category]
                probabilities, predicted = classify("occupation", mask, classes, occupation, s["prompt"], category)
                self._bias_ratio(out, category, probabilities[:, 0], genders[mask])
                shares = pd.crosstab(pd.Series(predicted, name="predicted class"), pd.Series(genders[mask], name="gender"),
                                     normalize="columns").reindex(classes, fill_value=0.0)
                out.tables[f"class_shares_{category}"] = shares
        if politicians.any():
            classify("office", politicians, s["office"], categories, s["prompt"], "politician")
        athletes = categories == "athlete"
        if "sport" in ctx.dataset.column_names and athletes.any():
            sports = ctx.column("sport", rows)
            known = athletes & np.array([v is not None and v != "None" for v in sports])
            classes = sorted(set(sports[known].tolist()))
            if len(classes) >= 2:
                classify("sport", known, classes, sports, s["sport_prompt"], "athlete")
        out.tables["capability"] = pd.DataFrame(capability).T.rename_axis("category")
        out.figures["capability"] = plots.grouped_bars(out.tables["capability"], None, "Top-1 accuracy per level", "accuracy")
        self._retention(ctx, out, images, categories, names)
        return out

    def _accuracy(self, out: Output, level: str, category: str, predicted, truth, genders) -> None:
        s = self.settings
        subset = {"level": level, "category": category}
        try:
            gap = measures.group_rate_gap(predicted, truth, genders, bootstrap=s["bootstrap"],
                                          confidence=s["confidence"], seed=s["seed"])
        except ValueError as exc:
            out.warnings.append(f"{level} accuracy of {category} by gender: {exc}")
            out.metrics.append(Metric("accuracy", subset, float((predicted == truth).mean())))
            return
        out.metrics.append(Metric("accuracy", subset, float((predicted == truth).mean()), None, None,
                                  {"by_gender": gap["accuracy"], "counts": gap["counts"]}))
        out.metrics.append(Metric("group_rate_gap", {**subset, "groups": "gender"}, gap["gap"], gap["gap_ci"], None,
                                  {"accuracy": gap["accuracy"], "gap_pair": gap["gap_pair"]}))

    def _bias_ratio(self, out: Output, category: str, scores, genders) -> None:
        s = self.settings
        try:
            ratio = measures.bias_ratio(scores, genders, s["bias_ratio"]["protected_group"],
                                        s["bias_ratio"]["reference_group"], bootstrap=s["bootstrap"],
                                        confidence=s["confidence"], seed=s["seed"])
        except ValueError as exc:
            out.warnings.append(f"bias ratio of the {category} class: {exc}")
            return
        out.metrics.append(Metric("bias_ratio", {"class": category}, ratio["bias_ratio"], ratio["bias_ratio_ci"],
                                  ratio["p_value"], {"group_means": ratio["group_means"], "group_counts": ratio["group_counts"]}))

    def _retention(self, ctx: Context, out: Output, images, categories, names) -> None:
        s = self.settings
        table = {}
        for category in sorted(set(categories.tolist())):
            mask = categories == category
            candidates = sorted(set(names[mask].tolist()))
            if len(candidates) < 2:
                out.warnings.append(f"retention of {category}: only {len(candidates)} name(s)")
                continue
            text = ctx.texts([s["name_prompt"].format(n) for n in candidates])
            references = np.array([candidates.index(n) for n in names[mask]])
            result = measures.retention(images[mask] @ text.T, references, bootstrap=s["bootstrap"],
                                        confidence=s["confidence"], seed=s["seed"])
            out.metrics.append(Metric("retention_text_score", {"category": category}, result["text_score"],
                                      result["text_score_ci"], None, {"num_names": result["num_names"]}))
            out.metrics.append(Metric("retention_image_score", {"category": category}, result["image_score"],
                                      result["image_score_ci"], None, {"num_names": result["num_names"]}))
            table[category] = {"text score": result["text_score"], "image score": result["image_score"],
                               "names": result["num_names"]}
        if table:
            out.tables["retention"] = pd.DataFrame.from_dict(table, orient="index").rename_axis("category")
