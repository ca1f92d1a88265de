"""The P-FI study: capability at three category levels, the gender bias ratio, name retention."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from vlfair import measures, stats
from vlfair.report import plots
from vlfair.probes.base import Context, Output, Probe, ProbeError
from vlfair.outputs import Metric


class PublicFiguresProbe(Probe):
    name = "public-figures"
    settings_file = "public_figures.yaml"
    published_file = "public_figures.yaml"
    allowed = {"prompt", "name_prompt", "groups", "bias_ratio", "bootstrap", "confidence", "seed"}
    schemas = ("pfi",)
    required_columns = {"pfi": ("image", "name", "category", "gender")}

    def run(self, ctx: Context, schema: str) -> Output:
        s = self.settings
        images, rows = ctx.images()
        categories, genders = ctx.column("category", rows), ctx.column("gender", rows)
        out = Output(settings={"prompt": s["prompt"], "name_prompt": s["name_prompt"],
                               "score": "sigmoid" if ctx.encoder.loss == "sigmoid" else "softmax"},
                     notes=list(s.get("notes", [])))
        if ctx.encoder.loss == "sigmoid":
            out.warnings.append("a sigmoid model: class scores are independent probabilities x100, rows do not sum to 100")
        summary, ratios, present = {}, {}, set(categories.tolist())
        for group, spec in s["groups"].items():
            folders = [f for f in spec["folders"] if f in present]
            if not folders:
                continue
            in_group = np.isin(categories, folders)
            pooled = {spec["pooled"]: in_group} if spec.get("pooled") and len(folders) > 1 else {}
            views = {**{f: categories == f for f in folders}, **pooled}
            own = " (vlfair's own classes)" if spec.get("own") else ""
            for level, level_spec in sorted(spec["levels"].items()):
                classes = level_spec["classes"]
                text = ctx.texts([s["prompt"].format(c) for c in classes])
                probabilities = ctx.encoder.probabilities(images[in_group], text)
                truth = self._truth(ctx, rows[in_group], level_spec["truth"], classes, categories[in_group])
                table = {}
                for folder, mask in views.items():
                    selected = mask[in_group]
                    table.update(self._class_scores(out, folder, level, classes, probabilities[selected],
                                                    genders[in_group][selected]))
                    summary[(folder, level)] = self._top1(out, folder, level, classes, probabilities[selected],
                                                          truth[selected], genders[in_group][selected])
                    if level == 2 and group in s["bias_ratio"]["class"]:
                        target = classes.index(s["bias_ratio"]["class"][group])
                        ratios[folder] = self._bias_ratio(out, folder, classes[target],
                                                          probabilities[selected][:, target], genders[in_group][selected])
                frame = pd.DataFrame.from_dict(table, orient="index", columns=classes)
                frame.index = pd.MultiIndex.from_tuples(frame.index, names=["folder", "gender"])
                out.tables[f"capability_{group}_level{level}"] = frame
                if own:
                    out.notes.append(f"capability {group} level {level}: classes {classes}{own}")
        if not summary:
            raise ProbeError(f"public-figures: no row's category is in the settings' folder groups "
                             f"({sorted(f for g in s['groups'].values() for f in g['folders'])}); found {sorted(present)}")
        ratios = {folder: row for folder, row in ratios.items() if row}
        if ratios:
            out.tables["bias_ratio"] = frame = pd.DataFrame.from_dict(ratios, orient="index").rename_axis("folder")
            points = pd.DataFrame({"label": [f"{folder}: {label}" for folder, label in frame["class"].items()],
                                 "value": frame["b = s_w / s_m"].to_numpy(float),
                                 "low": frame["CI low"].to_numpy(float), "high": frame["CI high"].to_numpy(float)})
            out.figures["bias_ratio"] = plots.forest(points,
                                                     "Bias ratio b = s_w / s_m of each folder's own class",
                                                     "b (women's mean score / men's)", neutral=1.0)
        capability = pd.DataFrame.from_dict(summary, orient="index")
        capability.index = pd.MultiIndex.from_tuples(capability.index, names=["folder", "level"])
        out.tables["capability_summary"] = capability
        right = capability["right class score"].unstack("level").rename(columns=lambda level: f"level {level}")
        out.figures["capability"] = plots.grouped_bars(right, None, "Mean score (softmax x100) of the right class "
                                                       "per folder and level", "score x100",
                                                       ylim=(0, 100), legend_title="class level")
        self._retention(ctx, out, images, categories, ctx.column("name", rows))
        return out

    @staticmethod
    def _truth(ctx: Context, rows: np.ndarray, truth: Any, classes: list[str], categories: np.ndarray) -> np.ndarray:
        """Each row's right class (None where the data does not name one of ``classes``)."""
        if isinstance(truth, str):
            return np.full(len(rows), truth, dtype=object)
        column = truth["column"]
        if column not in ctx.dataset.column_names:
            return np.full(len(rows), None, dtype=object)
        values = categories if column == "category" else ctx.column(column, rows)
        mapping = {str(k).lower(): v for k, v in truth.get("map", {}).items()}
        mapping.update({c.lower(): c for c in classes})
        return np.asarray([mapping.get(str(v).strip().lower()) if v is not None else None for v in values], dtype=object)

    def _class_scores(self, out: Output, folder: str, level: int, classes: list[str], probabilities: np.ndarray,
                      genders: np.ndarray) -> dict[tuple[str, str], list[float]]:
        """The study's Table 1 cells: mean score x100 of every class per gender, with bootstrap CIs."""
        s = self.settings
        names, codes = stats.encode_groups(genders.tolist(), "gender")
        scores = 100.0 * probabilities
        means = np.stack([scores[codes == k].mean(axis=0) for k in range(len(names))])
        ci = None
        if s["bootstrap"]:
            def statistic(idx: np.ndarray) -> np.ndarray:  # (b, genders, classes)
                return np.stack([scores[idx[:, codes == k]].mean(axis=1) for k in range(len(names))], axis=1)

            ci = stats.bootstrap_interval(statistic, codes, s["bootstrap"], s["confidence"], s["seed"])
        table = {}
        for k, gender in enumerate(names):
            for j, label in enumerate(classes):
                out.metrics.append(Metric("class_score", {"folder": folder, "level": level, "class": label, "gender": gender},
                                          float(means[k, j]), None if ci is None else [float(ci[0, k, j]), float(ci[1, k, j])],
                                          None, {"n": int((codes == k).sum())}))
            table[(folder, gender)] = means[k].tolist()
        return table

    def _top1(self, out: Output, folder: str, level: int, classes: list[str], probabilities: np.ndarray,
              truth: np.ndarray, genders: np.ndarray) -> dict[str, Any]:
        """vlfair's extra: top-1 accuracy (rows with a right class), by gender; and the right class's mean score."""
        s = self.settings
        known = np.array([t is not None for t in truth])
        subset = {"folder": folder, "level": level}
        row = {"images": int(len(truth)), "with a right class": int(known.sum()), "top-1 accuracy": np.nan,
               "right class score": np.nan}
        if not known.any():
            out.warnings.append(f"level {level} of {folder}: no image has one of {classes} as its right class")
            return row
        predicted = np.asarray(classes, dtype=object)[probabilities[known].argmax(axis=1)]
        accuracy = float((predicted == truth[known]).mean())
        right = probabilities[known][np.arange(int(known.sum())), [classes.index(t) for t in truth[known]]]
        row.update({"top-1 accuracy": accuracy, "right class score": float(100 * right.mean())})
        if not known.all():
            out.warnings.append(f"level {level} of {folder}: {int((~known).sum())} image(s) have no right class among "
                                f"{classes} (left out of top-1 accuracy)")
        try:
            gap = measures.group_rate_gap(predicted, truth[known], genders[known], bootstrap=s["bootstrap"],
                                          confidence=s["confidence"], seed=s["seed"])
        except ValueError as exc:
            out.warnings.append(f"level {level} top-1 accuracy of {folder} by gender: {exc}")
            out.metrics.append(Metric("accuracy", subset, accuracy))
            return row
        out.metrics.append(Metric("accuracy", subset, accuracy, None, None,
                                  {"by_gender": gap["accuracy"], "counts": gap["counts"]}))
        out.metrics.append(Metric("group_rate_gap", {**subset, "groups": "gender"}, gap["gap"], gap["gap_ci"], None,
                                  {"accuracy": gap["accuracy"], "gap_pair": gap["gap_pair"]}))
        return row

    def _bias_ratio(self, out: Output, folder: str, label: str, scores: np.ndarray, genders: np.ndarray) -> dict | None:
        s = self.settings
        try:
            ratio = measures.bias_ratio(scores, genders, s["bias_ratio"]["protected_group"],
                                        s["bias_ratio"]["reference_group"], bootstrap=s["bootstrap"],
                                        confidence=s["confidence"], seed=s["seed"])
        except ValueError as exc:
            out.warnings.append(f"bias ratio of the {label} class in {folder}: {exc}")
            return None
        out.metrics.append(Metric("bias_ratio", {"folder": folder, "class": label}, ratio["bias_ratio"],
                                  ratio["bias_ratio_ci"], ratio["p_value"],
                                  {k: ratio[k] for k in ("group_means", "group_counts", "log10_p_value", "p_value_method")}))
        ci = ratio["bias_ratio_ci"] or [None, None]
        return {"class": label, "b = s_w / s_m": ratio["bias_ratio"], "CI low": ci[0], "CI high": ci[1],
                "p": ratio["p_value"]}

    def _retention(self, ctx: Context, out: Output, images, categories, names) -> None:
        """The study's Table 2 (its three politician folders; athletes and actors are vlfair's extra)."""
        s = self.settings
        table = {}
        study_order = [f for group in s["groups"].values() for f in group["folders"]]
        present = set(categories.tolist())
        for folder in [f for f in study_order if f in present] + sorted(present - set(study_order)):
            mask = categories == folder
            candidates = sorted(set(names[mask].tolist()))
            if len(candidates) < 2:
                out.warnings.append(f"retention of {folder}: only {len(candidates)} name(s)")
                continue
            text = ctx.texts([s["name_prompt"].format(n) for n in candidates])
            references = np.array([candidates.index(n) for n in names[mask]])
            result = measures.retention(images[mask] @ text.T, references, bootstrap=s["bootstrap"],
                                        confidence=s["confidence"], seed=s["seed"])
            if "ci_note" in result:
                out.warnings.append(f"retention of {folder}: {result['ci_note']}")
            for score in ("text_score", "image_score"):
                out.metrics.append(Metric(f"retention_{score}", {"folder": folder}, result[score],
                                          result[f"{score}_ci"], None, {"num_names": result["num_names"]}))
            table[folder] = {"text score (%)": 100 * result["text_score"], "image score (%)": 100 * result["image_score"],
                             "names": result["num_names"], "images": result["num_images"]}
        if table:
            out.tables["retention"] = pd.DataFrame.from_dict(table, orient="index").rename_axis("folder")
            scores = [m for m in out.metrics if m.name.startswith("retention_")]
            points = pd.DataFrame({"label": [m.subset["folder"] for m in scores],
                                 "series": [m.name.removeprefix("retention_").replace("_", " ") for m in scores],
                                 "value": [100 * m.value for m in scores],
                                 "low": [100 * m.ci[0] if m.ci else np.nan for m in scores],
                                 "high": [100 * m.ci[1] if m.ci else np.nan for m in scores]})
            out.figures["retention"] = plots.forest(points, "Retention of names: text and image scores per folder",
                                                    "score (%)")
