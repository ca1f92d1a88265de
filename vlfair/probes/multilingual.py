"""The multilingual-fairness study: (a) Multi30K individual fairness and retrieval per language,
(b) FairFace zero-shot classification in eight languages with cross-lingual and group gaps."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, ValidationInfo, field_validator

from vlfair.outputs import Metric, metric_from, metrics_per
from vlfair.probes import register
from vlfair.probes.base import Context, Output, Probe, ProbeError, UploadSpec
from vlfair.probes.settings import Bootstrap, Flag, ProbeSettings, Settings

if TYPE_CHECKING:  # the probe imports its measures when it runs
    from vlfair import measures

Task = Literal["gender", "race", "age_group"]
# a zero-shot task's classes: class -> language -> prompt
PromptSet = dict[str, dict[str, dict[str, str]]]


class GroupGap(Settings):
    """The study's Eq. 5: accuracy of ``task`` between the groups of ``between`` (within each value
    of ``within``), per language; ``amplification``: minus the pivot's gap; ``difference``: the
    signed difference plotted (Figures 3-4)."""

    task: Task
    between: Task
    within: Task | None = None
    amplification: Flag = False
    difference: tuple[str, str] | None = None


class RateGap(Settings):
    """vlfair's extra: accuracy of ``task`` by each group of ``groups``, per language."""

    task: Task
    groups: Task


class MultilingualSettings(ProbeSettings, Bootstrap):
    languages: tuple[str, str] = Field(description="the Multi30K caption languages compared, e.g. [en, de]")
    independent_captions: Literal["first", "all"] = Field(
        description="the independent portion's caption pairs: first (one per image, the study's) or all five")
    pivot: str = Field(description="the language every other is compared with")
    # prompt_sets before prompt_set: the check of prompt_set reads them
    prompt_sets: dict[str, PromptSet] = Field(description="zero-shot prompts: set -> task -> class -> language -> text")
    prompt_set: str = Field(description="which of prompt_sets the zero-shot tasks use: study or vlfair")
    group_gaps: list[GroupGap] = Field(default_factory=list, description="the study's group gaps (task, between, "
                                                                         "within, amplification, difference)")
    rate_gaps: list[RateGap] = Field(default_factory=list, description="vlfair's extra gaps (task, groups)")

    @field_validator("prompt_set")
    @classmethod
    def _known_prompt_set(cls, value: str, info: ValidationInfo) -> str:
        sets = info.data.get("prompt_sets")
        if sets is not None and value not in sets:
            raise ValueError(f"is not one of {sorted(sets)}")
        return value


@register
class MultilingualProbe(Probe):
    name = "multilingual"
    Settings = MultilingualSettings
    position = 3  # study 003
    published_file = "multilingual.yaml"
    help = "English vs other languages: Multi30K fairness and FairFace in 8 languages"
    description = ("Multi30K: en-de text distances, individual fairness (epsilon) and retrieval gaps; FairFace: "
                   "zero-shot gender, race and age accuracy in 8 languages with group rate gaps (the multilingual "
                   "study). Data: the multi30k or fairface schema.")
    schemas = ("multi30k", "fairface")
    required_columns = {"multi30k": ("image", "image_file", "portion", "en", "de"),
                        "fairface": ("image", "age", "gender", "race")}
    upload = UploadSpec("multi30k", ("en", "de"), (), {"portion": "translation", "caption_index": 1},
                        file_column="image_file")
    settings: MultilingualSettings

    def default_subsets(self, schema: str) -> list[str | None]:
        return ["translation", "independent"] if schema == "multi30k" else [None]

    def run(self, ctx: Context, schema: str | None) -> Output:
        return self._multi30k(ctx) if schema == "multi30k" else self._fairface(ctx)

    # ---- (a) Multi30K ---------------------------------------------------------------------
    def _multi30k(self, ctx: Context) -> Output:
        import pandas as pd

        from vlfair import measures, stats
        from vlfair.figures import subplots
        from vlfair.report import plots
        from vlfair.report.numbers import format_value

        s = self.settings
        lang_a, lang_b = s.languages
        pairs = self._select_pairs(ctx)  # before embedding: only the pairs used are embedded
        images, rows = ctx.images()
        portions = ctx.column("portion", rows)
        files = ctx.column("image_file", rows)
        captions = {lang: [str(c) for c in ctx.column(lang, rows)] for lang in (lang_a, lang_b)}
        raw = {lang: ctx.texts(captions[lang], normalize=False) for lang in (lang_a, lang_b)}
        out = Output(settings={"languages": [lang_a, lang_b], "independent_captions": s.independent_captions,
                               "pairs": pairs}, notes=list(s.notes))
        summary: dict[str, dict] = {}
        scatter: dict[str, list] = {"x": [], "y": [], "label": []}
        slope = 0.0
        ratio_figure, ratio_axis = subplots(figsize=(5, 3.2))
        for portion in sorted(set(portions.tolist())):
            mask = portions == portion
            fairness = measures.individual_fairness(images[mask], raw[lang_a][mask], raw[lang_b][mask])
            pair = {"portion": portion, "languages": f"{lang_a}-{lang_b}"}
            out.metrics.append(metric_from("individual_fairness", pair, fairness, "epsilon", details=(
                                               "mean_ratio", "median_ratio", "bound_holds", "num_bound_violations",
                                               "max_bound", "num_pairs", "num_identical_pairs")))
            distances = np.asarray(fairness["text_distances"])

            def mean_distance(idx: np.ndarray, distances: np.ndarray = distances) -> np.ndarray:
                return distances[idx].mean(axis=1)

            distance_ci = (stats.bootstrap_interval(mean_distance, np.zeros(distances.size, int), s.bootstrap,
                                                    s.confidence, s.seed).tolist()
                           if s.bootstrap and distances.size > 1 else None)
            out.metrics.append(Metric("text_distance", pair, float(distances.mean()), distance_ci, None,
                                      {"median": float(np.median(distances)), "num_pairs": int(distances.size)}))
            scatter["x"] += fairness["text_distances"]
            scatter["y"] += fairness["similarity_gaps"]
            scatter["label"] += [portion] * fairness["num_pairs"]
            slope = max(slope, fairness["max_bound"])
            ratio_axis.hist(fairness["ratios"], bins=30, alpha=0.6, label=f"{portion} (eps {fairness['epsilon']:.3g})")
            row = {"pairs": fairness["num_pairs"], f"mean distance {lang_a}-{lang_b}": float(distances.mean()),
                   "epsilon": fairness["epsilon"], "mean ratio": fairness["mean_ratio"],
                   "bound holds": fairness["bound_holds"]}
            for direction in ("image_to_text", "text_to_image"):
                features = {lang: raw[lang][mask] for lang in (lang_a, lang_b)}
                gap = self._retrieval(images[mask], files[mask], features, direction)
                out.metrics.append(metric_from("cross_lingual_gap", {"portion": portion, "direction": direction}, gap,
                                               "gap", "gap_ci", details=("accuracy", "counts")))
                out.metrics += metrics_per("retrieval_accuracy", {"portion": portion, "direction": direction}, gap,
                                           "accuracy", "accuracy_ci", by="language")
                for lang, accuracy in gap["accuracy"].items():
                    row[f"{direction} {lang}"] = accuracy
                row[f"{direction} gap"] = gap["gap"]
            summary[portion] = row
        ratio_axis.set_xlabel("ratio |cos(v,t_a) - cos(v,t_b)| / ||t_a - t_b||")
        ratio_axis.set_ylabel("caption pairs")
        ratio_axis.legend(fontsize=8, title="portion", title_fontsize=8)
        ratio_axis.set_title(f"Individual fairness ratios, {lang_a} vs {lang_b}", fontsize=10)
        out.figures["ratio_distribution"] = ratio_figure
        out.figures["gap_vs_distance"] = plots.scatter_with_bound(
            scatter["x"], scatter["y"], slope, scatter["label"], f"Similarity gap vs text distance ({lang_a}/{lang_b})")
        out.tables["multi30k_summary"] = pd.DataFrame.from_dict(summary, orient="index").rename_axis("portion")
        out.notes.append(f"bound line: slope max 2/(||t_a||+||t_b||) = {format_value(slope)}; every point must lie "
                         "under its own bound")
        return out

    def _select_pairs(self, ctx: Context) -> dict[str, int]:
        """Keep the independent portion's first (en, de) caption pair per image (the study), or all."""
        choice = self.settings.independent_captions
        data = ctx.dataset
        if choice == "first" and "caption_index" in data.column_names:
            keep = [i for i, (portion, index) in enumerate(zip(data["portion"], data["caption_index"]))
                    if portion != "independent" or index == 1]
            if len(keep) < data.num_rows:
                ctx.dataset = data.select(keep)
        return dict(sorted(Counter(ctx.dataset["portion"]).items()))

    def _retrieval(self, images, files, raw, direction: str) -> measures.CrossLingualGap:
        """Top-1 matching per language; an image may own several captions (independent portion)."""
        from vlfair import measures

        unique, image_index = np.unique(files, return_inverse=True)
        first = np.array([np.flatnonzero(image_index == i)[0] for i in range(unique.size)])
        pictures = images[first]
        predictions, references, languages = [], [], []
        for lang, features in raw.items():
            texts = features / np.linalg.norm(features, axis=1, keepdims=True)
            similarity = pictures @ texts.T  # (images, captions)
            if direction == "image_to_text":
                predictions += image_index[similarity.argmax(axis=1)].astype(str).tolist()
                references += np.arange(unique.size).astype(str).tolist()
                languages += [lang] * unique.size
            else:
                predictions += similarity.argmax(axis=0).astype(str).tolist()
                references += image_index.astype(str).tolist()
                languages += [lang] * image_index.size
        return measures.cross_lingual_gap(predictions, references, languages, **self.settings.resampling)

    # ---- (b) FairFace in eight languages --------------------------------------------------
    def _fairface(self, ctx: Context) -> Output:
        import pandas as pd

        from vlfair import measures
        from vlfair.data.schemas import AGE_GROUP_OF_BIN
        from vlfair.report import plots

        s = self.settings
        images, rows = ctx.images()
        truth = {"gender": ctx.column("gender", rows), "race": ctx.column("race", rows),
                 "age_group": np.array([AGE_GROUP_OF_BIN[a] for a in ctx.column("age", rows)])}
        out = Output(settings={"pivot": s.pivot, "prompt_set": s.prompt_set}, notes=list(s.notes))
        predicted: dict[str, dict[str, np.ndarray]] = {}
        accuracy_table = {}
        for task, classes in s.prompt_sets[s.prompt_set].items():
            if task not in truth:
                raise ProbeError(f"multilingual: zero-shot task {task!r} has no label column; tasks: {sorted(truth)}")
            names = list(classes)
            languages = sorted(set.intersection(*(set(v) for v in classes.values())))
            predicted[task] = {}
            for lang in languages:
                text = ctx.texts([classes[c][lang] for c in names])
                predicted[task][lang] = np.asarray(names)[(images @ text.T).argmax(axis=1)]
            stacked_pred = np.concatenate([predicted[task][lang] for lang in languages])
            stacked_truth = np.tile(truth[task], len(languages))
            stacked_lang = np.repeat(languages, len(rows))
            gap = measures.cross_lingual_gap(stacked_pred, stacked_truth, stacked_lang,
                                             pivot=s.pivot if s.pivot in languages else None, **s.resampling)
            out.metrics.append(metric_from("cross_lingual_gap", {"task": task}, gap, "gap", "gap_ci",
                                           details=("accuracy", "gap_to_pivot")))
            out.metrics += metrics_per("accuracy", {"task": task}, gap, "accuracy", "accuracy_ci", by="language")
            accuracy_table[task] = gap["accuracy"]
        frame = pd.DataFrame(accuracy_table).rename_axis("language")
        out.tables["accuracy_by_language"] = frame
        out.figures["accuracy_by_language"] = plots.grouped_bars(frame, None, "Zero-shot accuracy per language",
                                                                 "accuracy", ylim=(0, 1), legend_title="task")
        for group_gap in s.group_gaps:
            self._group_gaps(out, group_gap, predicted, truth)
        for rate_gap in s.rate_gaps:  # vlfair's extras
            self._rate_gap(out, rate_gap, predicted, truth)
        tower = getattr(getattr(ctx.encoder, "image_encoder", None), "spec", ctx.encoder.spec)
        out.tables["image_towers"] = pd.DataFrame(
            {"model": [tower, "CLIP ResNet-50"],
             "status": ["this run", "not available: transformers has no CLIP ResNet image tower"]},
            index=pd.Index(["Vision Transformer", "ResNet-50"], name="the study's image towers"))
        return out

    def _group_gaps(self, out: Output, spec: GroupGap, predicted: dict, truth: dict) -> None:
        """The study's Eq. 5: accuracy of ``task`` between the groups of ``between``, within each
        value of ``within`` (or over all images), per language; with ``amplification``, each gap
        minus the pivot language's."""
        import pandas as pd

        from vlfair import measures
        from vlfair.report import plots

        s = self.settings
        task, between, within = spec.task, spec.between, spec.within
        if task not in predicted:
            raise ProbeError(f"multilingual: group_gaps task {task!r} is not a zero-shot task ({sorted(predicted)})")
        languages = sorted(predicted[task])
        correct = np.stack([predicted[task][lang] == truth[task] for lang in languages], axis=1)  # (rows, languages)
        values = sorted(set(truth[within].tolist()), key=str) if within else [None]
        minuend, subtrahend = spec.difference or (None, None)  # the signed difference plotted (Fig. 3-4)
        signed, accuracy, amplification = {}, {}, {}
        for value in values:
            mask = truth[within] == value if within else np.ones(len(truth[task]), dtype=bool)
            subset: dict[str, Any] = {"task": task, "groups": between, **({within: value} if within else {})}
            try:
                result = measures.group_rate_gap(np.concatenate([predicted[task][lang][mask] for lang in languages]),
                                                 np.tile(truth[task][mask], len(languages)),
                                                 np.tile(truth[between][mask], len(languages)),
                                                 languages=np.repeat(languages, int(mask.sum())), **s.resampling)
            except ValueError as exc:
                of = f" of {within} {value}" if within else ""
                out.warnings.append(f"{task} accuracy between {between} groups{of}: {exc}")
                continue
            label = value if within else "all"
            for lang in languages:
                out.metrics.append(metric_from("group_rate_gap", {**subset, "language": lang}, result, "gap", "gap_ci",
                                               details=("accuracy", "gap_pair"), key=lang))
                out.metrics += metrics_per("accuracy", {"task": task, "language": lang, between: None,
                                                        **({within: value} if within else {})},
                                           result, "accuracy", "accuracy_ci", by=between, key=lang)
                for group, rate in result["accuracy"][lang].items():
                    accuracy[(label, group, lang)] = rate
                if minuend in result["accuracy"][lang] and subtrahend in result["accuracy"][lang]:
                    signed[(label, lang)] = result["accuracy"][lang][minuend] - result["accuracy"][lang][subtrahend]
            if spec.amplification and s.pivot in languages:
                amplification[label] = self._amplification(out, subset, correct[mask], truth[between][mask], languages)
        if not accuracy:
            return
        wide = pd.Series(accuracy).unstack(level=2)
        wide.index.names = [within or "images", between]
        out.tables[f"{task}_accuracy_by_{within + '_and_' if within else ''}{between}"] = wide
        if within and signed:
            name = f"{task}_gap_by_{within}"
            out.tables[name] = differences = pd.Series(signed).unstack(level=1).rename_axis(within)
            out.figures[name] = plots.grouped_bars(differences, None, f"{task} accuracy, {minuend} minus "
                                                   f"{subtrahend}, by {within} and language", "accuracy difference",
                                                   neutral=0.0, legend_title="language")
        if amplification:
            out.tables[f"{task}_gap_amplification_by_{within}"] = pd.DataFrame(amplification).T.rename_axis(within)

    def _amplification(self, out: Output, subset: dict, correct: np.ndarray, groups: np.ndarray,
                       languages: list[str]) -> dict[str, float]:
        """Gap in each language minus the pivot's, with a bootstrap CI that resamples the same
        images for every language (stratified by group)."""
        from vlfair import stats

        s = self.settings
        names, codes = stats.encode_groups(groups.tolist(), "groups")
        pivot = languages.index(s.pivot)

        def statistic(idx: np.ndarray) -> np.ndarray:  # (b, languages)
            picked = correct[idx]  # (b, rows, languages)
            rates = np.stack([picked[:, codes == k].mean(axis=1) for k in range(len(names))], axis=1)
            gap = rates.max(axis=1) - rates.min(axis=1)
            return gap - gap[:, [pivot]]

        value = statistic(np.arange(len(codes))[None, :])[0]
        ci = stats.bootstrap_interval(statistic, codes, s.bootstrap, s.confidence, s.seed) if s.bootstrap else None
        result = {}
        for k, lang in enumerate(languages):
            if k == pivot:
                continue
            out.metrics.append(Metric("gap_amplification", {**subset, "language": lang, "pivot": s.pivot},
                                      float(value[k]), None if ci is None else [float(ci[0, k]), float(ci[1, k])]))
            result[lang] = float(value[k])
        return result

    def _rate_gap(self, out: Output, spec: RateGap, predicted: dict, truth: dict) -> None:
        import pandas as pd

        from vlfair import measures
        from vlfair.report import plots

        task, column = spec.task, spec.groups
        languages = sorted(predicted[task])
        try:
            gaps = measures.group_rate_gap(np.concatenate([predicted[task][lang] for lang in languages]),
                                           np.tile(truth[task], len(languages)), np.tile(truth[column], len(languages)),
                                           languages=np.repeat(languages, len(truth[task])),
                                           **self.settings.resampling)
        except ValueError as exc:
            out.warnings.append(f"{task} accuracy by {column}: {exc}")
            return
        for lang in languages:
            out.metrics.append(metric_from("group_rate_gap", {"task": task, "groups": column, "language": lang}, gaps,
                                           "gap", "gap_ci", details=("accuracy", "gap_pair"), key=lang))
        by_group = pd.DataFrame({lang: gaps["accuracy"][lang] for lang in languages}).rename_axis(column)
        out.tables[f"{task}_accuracy_by_{column}"] = by_group
        out.figures[f"{task}_accuracy_by_{column}"] = plots.grouped_bars(
            by_group, None, f"{task} accuracy by {column}, per language (vlfair's extra)", "accuracy", ylim=(0, 1),
            legend_title="language")
