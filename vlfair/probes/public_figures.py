"""The P-FI study: capability at three category levels, the gender bias ratio, name retention."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, ConfigDict, Field

from vlfair.outputs import Metric, metric_from
from vlfair.probes import register
from vlfair.probes.base import Context, Output, Probe, ProbeError, UploadSpec
from vlfair.probes.settings import Bootstrap, Flag, ProbeSettings, Settings, placeholders

Prompt = Annotated[str, AfterValidator(placeholders(""))]


class Truth(Settings):
    """Each image's right class read from a column (``map``: the column's values -> classes)."""

    column: str
    map: dict[str, str] = Field(default_factory=dict)


class Level(Settings):
    classes: list[str] = Field(min_length=2)
    truth: str | Truth  # one class for every image, or read from a column


class FolderGroup(Settings):
    folders: list[str] = Field(min_length=1)
    pooled: str | None = None  # also reported over all its folders under this name
    own: Flag = False  # the class lists are vlfair's own, not the study's
    levels: dict[int, Level]


class BiasRatio(Settings):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    classes: dict[str, str] = Field(alias="class")  # folder group -> the class whose score is compared
    protected_group: str
    reference_group: str


class PublicFiguresSettings(ProbeSettings, Bootstrap):
    prompt: Prompt = Field(description="the class prompt, with {} for the class")
    name_prompt: Prompt = Field(description="the name-retention prompt, with {} for the name")
    groups: dict[str, FolderGroup] = Field(description="folder groups: folders, pooled, own, levels of classes")
    bias_ratio: BiasRatio = Field(description="the bias ratio's class per group and its protected and reference "
                                              "genders")


@register
class PublicFiguresProbe(Probe):
    name = "public-figures"
    Settings = PublicFiguresSettings
    position = 4  # study 004
    published_file = "public_figures.yaml"
    help = "P-FI public figures: class scores, the politician bias ratio, name retention"
    description = ("Class scores per folder and gender (the P-FI study's Table 1), the bias ratio b = s_w/s_m of each "
                   "folder's class, and name retention text and image scores (Table 2). Data: the pfi schema.")
    schemas = ("pfi",)
    required_columns = {"pfi": ("image", "name", "category", "gender")}
    upload = UploadSpec("pfi", ("name", "category", "gender"), ("gender",))
    settings: PublicFiguresSettings

    def run(self, ctx: Context, schema: str | None) -> Output:
        import pandas as pd

        from vlfair.report import plots

        s = self.settings
        images, rows = ctx.images()
        categories, genders = ctx.column("category", rows), ctx.column("gender", rows)
        out = Output(settings={"prompt": s.prompt, "name_prompt": s.name_prompt,
                               "score": "sigmoid" if ctx.encoder.loss == "sigmoid" else "softmax"},
                     notes=list(s.notes))
        if ctx.encoder.loss == "sigmoid":
            out.warnings.append("a sigmoid model: class scores are independent probabilities x100, rows do not "
                                "sum to 100")
        summary, ratios, present = {}, {}, set(categories.tolist())
        for group, spec in s.groups.items():
            folders = [f for f in spec.folders if f in present]
            if not folders:
                continue
            in_group = np.isin(categories, folders)
            pooled = {spec.pooled: in_group} if spec.pooled and len(folders) > 1 else {}
            views = {**{f: categories == f for f in folders}, **pooled}
            own = " (vlfair's own classes)" if spec.own else ""
            for level, level_spec in sorted(spec.levels.items()):
                classes = level_spec.classes
                text = ctx.texts([s.prompt.format(c) for c in classes])
                probabilities = ctx.encoder.probabilities(images[in_group], text)
                truth = self._truth(ctx, rows[in_group], level_spec.truth, classes, categories[in_group])
                table = {}
                for folder, mask in views.items():
                    selected = mask[in_group]
                    table.update(self._class_scores(out, folder, level, classes, probabilities[selected],
                                                    genders[in_group][selected]))
                    summary[(folder, level)] = self._top1(out, folder, level, classes, probabilities[selected],
                                                          truth[selected], genders[in_group][selected])
                    if level == 2 and group in s.bias_ratio.classes:
                        target = classes.index(s.bias_ratio.classes[group])
                        scores = probabilities[selected][:, target]
                        ratios[folder] = self._bias_ratio(out, folder, classes[target], scores,
                                                          genders[in_group][selected])
                frame = pd.DataFrame.from_dict(table, orient="index", columns=classes)
                frame.index = pd.MultiIndex.from_tuples(frame.index, names=["folder", "gender"])
                out.tables[f"capability_{group}_level{level}"] = frame
                if own:
                    out.notes.append(f"capability {group} level {level}: classes {classes}{own}")
        if not summary:
            raise ProbeError(f"public-figures: no row's category is in the settings' folder groups "
                             f"({sorted(f for g in s.groups.values() for f in g.folders)}); found {sorted(present)}")
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
    def _truth(ctx: Context, rows: np.ndarray, truth: str | Truth, classes: list[str], categories: np.ndarray
               ) -> np.ndarray:
        """Each row's right class (None where the data does not name one of ``classes``)."""
        if isinstance(truth, str):
            return np.full(len(rows), truth, dtype=object)
        column = truth.column
        if column not in ctx.dataset.column_names:
            return np.full(len(rows), None, dtype=object)
        values = categories if column == "category" else ctx.column(column, rows)
        mapping = {str(k).lower(): v for k, v in truth.map.items()}
        mapping.update({c.lower(): c for c in classes})
        return np.asarray([None if v is None else mapping.get(str(v).strip().lower()) for v in values], dtype=object)

    def _class_scores(self, out: Output, folder: str, level: int, classes: list[str], probabilities: np.ndarray,
                      genders: np.ndarray) -> dict[tuple[str, str], list[float]]:
        """The study's Table 1 cells: mean score x100 of every class per gender, with bootstrap CIs."""
        from vlfair import stats

        s = self.settings
        names, codes = stats.encode_groups(genders.tolist(), "gender")
        scores = 100.0 * probabilities
        means = np.stack([scores[codes == k].mean(axis=0) for k in range(len(names))])
        ci = None
        if s.bootstrap:
            def statistic(idx: np.ndarray) -> np.ndarray:  # (b, genders, classes)
                return np.stack([scores[idx[:, codes == k]].mean(axis=1) for k in range(len(names))], axis=1)

            ci = stats.bootstrap_interval(statistic, codes, s.bootstrap, s.confidence, s.seed)
        table = {}
        for k, gender in enumerate(names):
            for j, label in enumerate(classes):
                interval = None if ci is None else [float(ci[0, k, j]), float(ci[1, k, j])]
                out.metrics.append(Metric("class_score", {"folder": folder, "level": level, "class": label,
                                                          "gender": gender}, float(means[k, j]), interval, None,
                                          {"n": int((codes == k).sum())}))
            table[(folder, gender)] = means[k].tolist()
        return table

    def _top1(self, out: Output, folder: str, level: int, classes: list[str], probabilities: np.ndarray,
              truth: np.ndarray, genders: np.ndarray) -> dict[str, Any]:
        """Vlfair's extra: top-1 accuracy (rows with a right class), by gender; and the right class's mean score."""
        from vlfair import measures

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
            gap = measures.group_rate_gap(predicted, truth[known], genders[known], **self.settings.resampling)
        except ValueError as exc:
            out.warnings.append(f"level {level} top-1 accuracy of {folder} by gender: {exc}")
            out.metrics.append(Metric("accuracy", subset, accuracy))
            return row
        out.metrics.append(Metric("accuracy", subset, accuracy, None, None,
                                  {"by_gender": gap["accuracy"], "counts": gap["counts"]}))
        out.metrics.append(metric_from("group_rate_gap", {**subset, "groups": "gender"}, gap, "gap", "gap_ci",
                                       details=("accuracy", "gap_pair")))
        return row

    def _bias_ratio(self, out: Output, folder: str, label: str, scores: np.ndarray, genders: np.ndarray) -> dict | None:
        from vlfair import measures

        s = self.settings
        try:
            ratio = measures.bias_ratio(scores, genders, s.bias_ratio.protected_group, s.bias_ratio.reference_group,
                                        **s.resampling)
        except ValueError as exc:
            out.warnings.append(f"bias ratio of the {label} class in {folder}: {exc}")
            return None
        out.metrics.append(metric_from("bias_ratio", {"folder": folder, "class": label}, ratio, "bias_ratio",
                                       "bias_ratio_ci", "p_value",
                                       ("group_means", "group_counts", "log10_p_value", "p_value_method")))
        ci = ratio["bias_ratio_ci"] or [None, None]
        return {"class": label, "b = s_w / s_m": ratio["bias_ratio"], "CI low": ci[0], "CI high": ci[1],
                "p": ratio["p_value"]}

    def _retention(self, ctx: Context, out: Output, images, categories, names) -> None:
        """The study's Table 2 (its three politician folders; athletes and actors are vlfair's extra)."""
        import pandas as pd

        from vlfair import measures
        from vlfair.report import plots

        s = self.settings
        table = {}
        study_order = [f for group in s.groups.values() for f in group.folders]
        present = set(categories.tolist())
        for folder in [f for f in study_order if f in present] + sorted(present - set(study_order)):
            mask = categories == folder
            candidates = sorted(set(names[mask].tolist()))
            if len(candidates) < 2:
                out.warnings.append(f"retention of {folder}: only {len(candidates)} name(s)")
                continue
            text = ctx.texts([s.name_prompt.format(n) for n in candidates])
            references = np.array([candidates.index(n) for n in names[mask]])
            result = measures.retention(images[mask] @ text.T, references, **s.resampling)
            if "ci_note" in result:
                out.warnings.append(f"retention of {folder}: {result['ci_note']}")
            for score in ("text_score", "image_score"):
                out.metrics.append(metric_from(f"retention_{score}", {"folder": folder}, result, score, f"{score}_ci",
                                               details=("num_names",)))
            table[folder] = {"text score (%)": 100 * result["text_score"],
                             "image score (%)": 100 * result["image_score"],
                             "names": result["num_names"], "images": result["num_images"]}
        if table:
            out.tables["retention"] = pd.DataFrame.from_dict(table, orient="index").rename_axis("folder")
            scores = [m for m in out.metrics if m.name.startswith("retention_")]
            points = pd.DataFrame({"label": [m.subset["folder"] for m in scores],
                                 "series": [m.name.removeprefix("retention_").replace("_", " ") for m in scores],
                                 "value": [np.nan if m.value is None else 100 * m.value for m in scores],
                                 "low": [100 * m.ci[0] if m.ci else np.nan for m in scores],
                                 "high": [100 * m.ci[1] if m.ci else np.nan for m in scores]})
            out.figures["retention"] = plots.forest(points, "Retention of names: text and image scores per folder",
                                                    "score (%)")
