"""The multilingual-fairness study: (a) Multi30K individual fairness and retrieval per language,
(b) FairFace zero-shot classification in eight languages with cross-lingual and group gaps.

samples.parquet: (a) one row per caption pair (portion, image file; the pair's similarity gap,
text distance and bound; whether top-1 retrieval is right per direction and language); (b) one row
per image (gender, race, age group; whether each task's zero-shot prediction is right per language).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from vlfair.outputs import Metric, metric_from, metrics_per
from vlfair.probes import phrasings as phrasing
from vlfair.probes import register
from vlfair.probes.asking import Answering
from vlfair.probes.base import Context, Output, Probe, ProbeError, UploadSpec, indistinguishable
from vlfair.probes.declared import ColumnRange, Custom, Declared, Mean, Range, evaluate
from vlfair.probes.settings import Bootstrap, Flag, Name, ProbeSettings, Settings, Text, distinct, refuse, same_text
from vlfair.samples import Samples

if TYPE_CHECKING:  # the probe imports its measures when it runs
    from vlfair import measures, paired

Task = Literal["gender", "race", "age_group"]
# a zero-shot task's classes: class -> language -> prompt
PromptSet = dict[Name, dict[Name, dict[Name, Name]]]
# two different values (languages, groups): the same one twice compares it with itself
Two = Annotated[tuple[Name, Name], AfterValidator(distinct())]


class GroupGap(Settings):
    """The study's Eq. 5: accuracy of ``task`` between the groups of ``between`` (within each value
    of ``within``), per language; ``amplification``: minus the pivot's gap; ``difference``: the
    signed difference plotted (Figures 3-4)."""

    task: Task
    between: Task
    within: Task | None = None
    amplification: Flag = False
    difference: Two | None = None

    @model_validator(mode="after")
    def _within_is_not_between(self) -> GroupGap:
        if self.within is not None and self.within == self.between:  # one group per stratum: no gap anywhere
            refuse("GroupGap", ("within",), self.within, f"is the column of the groups compared (between: "
                   f"{self.between}): each {self.within} holds one group; give another column or none")
        return self


class RateGap(Settings):
    """vlfair's extra: accuracy of ``task`` by each group of ``groups``, per language."""

    task: Task
    groups: Task


class LanguageQuestions(Answering):
    """How a generative model is asked in each language: ``questions[lang]``, whose candidate answers
    are the prompt set's texts in that language (the zero-shot prompts, read as answers)."""

    questions: dict[Name, Text] = Field(min_length=1, description="language -> the question in it")


class MultilingualSettings(ProbeSettings, Bootstrap):
    languages: Two = Field(description="the Multi30K caption languages compared, e.g. [en, de]")
    independent_captions: Literal["first", "all"] = Field(
        description="the independent portion's caption pairs: first (one per image, the study's) or all five")
    pivot: Name = Field(description="the language every other is compared with")
    # prompt_sets before prompt_set: the check of prompt_set reads them
    prompt_sets: dict[str, PromptSet] = Field(description="zero-shot prompts: set -> task -> class -> language -> text")
    prompt_set: Name = Field(description="which of prompt_sets the zero-shot tasks use: study or vlfair")
    group_gaps: list[GroupGap] = Field(default_factory=list, description="the study's group gaps (task, between, "
                                                                         "within, amplification, difference)")
    rate_gaps: list[RateGap] = Field(default_factory=list, description="vlfair's extra gaps (task, groups)")
    generative: LanguageQuestions = Field(description="how a generative model (lvlm:) is asked, per language: the "
                                                      "question; its candidate answers are the prompts")
    phrasings: Annotated[list[Name], AfterValidator(distinct())] = Field(
        default_factory=list, description="other prompt sets (of prompt_sets, with prompt_set's tasks, classes and "
                                          "languages) the zero-shot tasks are also asked with: every FairFace metric "
                                          "is also reported per prompt set and pooled over them")

    @field_validator("prompt_set")
    @classmethod
    def _known_prompt_set(cls, value: str, info: ValidationInfo) -> str:
        sets = info.data.get("prompt_sets")
        if sets is not None and value not in sets:
            raise ValueError(f"is not one of {sorted(sets)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> MultilingualSettings:
        """Every prompt set well formed (:func:`_check_prompt_set`); in the set used, the pivot among
        every task's languages and the gaps' tasks among its tasks."""
        for name, tasks in self.prompt_sets.items():
            _check_prompt_set(name, tasks)
        used = self.prompt_sets[self.prompt_set]
        for task, classes in used.items():
            if self.pivot not in _languages(classes):
                refuse("MultilingualSettings", ("pivot",), self.pivot, f"is not a language of task {task!r} in "
                       f"prompt set {self.prompt_set!r} (its languages: {_languages(classes)})")
        gaps = [*(("group_gaps", i, gap.task) for i, gap in enumerate(self.group_gaps)),
                *(("rate_gaps", i, gap.task) for i, gap in enumerate(self.rate_gaps))]
        for key, index, task in gaps:
            if task not in used:
                refuse("MultilingualSettings", (key, index, "task"), task,
                       f"is not a zero-shot task of prompt set {self.prompt_set!r} ({list(used)})")

        def shape(tasks: PromptSet) -> dict[str, dict[str, list[str]]]:  # each task's classes and their languages
            return {task: {label: sorted(prompts) for label, prompts in classes.items()}
                    for task, classes in tasks.items()}

        for index, name in enumerate(self.phrasings):  # other prompt sets of the same tasks, classes and languages
            if name == self.prompt_set:
                refuse("MultilingualSettings", ("phrasings", index), name,
                       "is prompt_set, phrasing 1 already: give each prompt set once")
            if name not in self.prompt_sets:
                refuse("MultilingualSettings", ("phrasings", index), name, f"is not one of {sorted(self.prompt_sets)}")
            if shape(self.prompt_sets[name]) != shape(used):
                refuse("MultilingualSettings", ("phrasings", index), name,
                       f"asks other tasks, classes or languages than prompt set {self.prompt_set!r}: a phrasing asks "
                       "the same questions in other words")
        return self


def _check_prompt_set(name: str, tasks: dict[str, dict[str, dict[str, str]]]) -> None:
    """Tasks that are FairFace label columns, each with 2 classes or more whose prompts share 2
    languages or more (a cross-lingual gap compares languages) and differ in each of them."""
    for task, classes in tasks.items():
        where = ("prompt_sets", name, task)
        if task not in TASKS:
            refuse("MultilingualSettings", where, task, f"is not a zero-shot task; tasks: {list(TASKS)} (FairFace's "
                   "label columns)")
        languages = _languages(classes) if classes else []
        if len(classes) < 2 or len(languages) < 2:
            refuse("MultilingualSettings", where, classes, "needs 2 classes or more with prompts in 2 languages or "
                   f"more (it has {len(classes)} class(es), languages they share: {languages})")
        for lang in languages:
            seen: dict[str, str] = {}
            for label, prompts in classes.items():
                other = seen.setdefault(same_text(prompts[lang]), label)
                if other != label:
                    refuse("MultilingualSettings", (*where, label, lang), prompts[lang],
                           f"is {other!r}'s prompt too (case and spaces aside): the model could not tell the two "
                           "classes apart; give each class its own prompt")


@register
class MultilingualProbe(Probe):
    name = "multilingual"
    Settings = MultilingualSettings
    position = 3  # study 003
    asks_questions = True  # multilingual.yaml's generative section (FairFace; Multi30K reads embeddings)
    model_settings = ("generative",)  # how a generative model is asked belongs to it, as its spec does
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

    def score(self, ctx: Context, schema: str | None) -> Samples:
        if schema == "multi30k" and self.settings.phrasings:
            raise ProbeError("multilingual: setting phrasings holds other prompt sets of the FairFace zero-shot tasks; "
                             "the Multi30K part asks no prompt: leave phrasings empty")
        return self._score_multi30k(ctx) if schema == "multi30k" else self._score_fairface(ctx)

    def analyze(self, samples: Samples) -> Output:
        return self._multi30k(samples) if _schema_of(samples) == "multi30k" else self._fairface(samples)

    def illustrate(self, ctx: Context, samples: Samples, out: Output) -> None:
        if _schema_of(samples) == "fairface":  # the study's two image towers: which one this model is
            import pandas as pd

            tower = getattr(getattr(ctx.encoder, "image_encoder", None), "spec", ctx.encoder.spec)
            out.tables["image_towers"] = pd.DataFrame(
                {"model": [tower, "CLIP ResNet-50"],
                 "status": ["this run", "not available: transformers has no CLIP ResNet image tower"]},
                index=pd.Index(["Vision Transformer", "ResNet-50"], name="the study's image towers"))

    def declare(self, samples: Samples) -> list[Declared]:
        """Multi30K, per portion: epsilon (a maximum over the caption pairs: the pairs' values) and
        the mean text distance; per direction both languages' retrieval accuracies and their gap
        (the same images, or captions, for both languages). FairFace: per task the accuracies per
        language and their gap; per group gap and rate gap the group accuracies per language, each
        language's gap and its amplification over the pivot's, resampled within the groups."""
        return (self._multi30k_metrics(samples) if _schema_of(samples) == "multi30k"
                else self._fairface_metrics(samples))

    # ---- (a) Multi30K ---------------------------------------------------------------------
    def _score_multi30k(self, ctx: Context) -> Samples:
        import pandas as pd

        s = self.settings
        lang_a, lang_b = s.languages
        missing = [lang for lang in s.languages if lang not in ctx.dataset.column_names]
        if missing:
            raise ProbeError(f"multilingual: setting languages {list(s.languages)}: the data has no caption column "
                             f"{missing}; its columns: {ctx.dataset.column_names}")
        if ctx.generative:
            raise ProbeError(f"multilingual: model {ctx.encoder.name!r} is a generative model: the Multi30K part "
                             "measures distances between caption embeddings (its individual-fairness bound), which a "
                             "generative model does not give; it is measured on the FairFace part (the fairface "
                             "schema, e.g. --dataset synthetic:fairface)")
        pairs = self._select_pairs(ctx)  # before embedding: only the pairs used are embedded
        images, rows = ctx.images()
        portions = ctx.column("portion", rows)
        files = ctx.column("image_file", rows)
        captions = {lang: [str(c) for c in ctx.column(lang, rows)] for lang in (lang_a, lang_b)}
        raw = {lang: ctx.texts(captions[lang], normalize=False) for lang in (lang_a, lang_b)}
        columns: dict[str, Any] = {**ctx.identity(rows), "portion": portions, "image_file": files}
        terms = {name: np.zeros(len(rows)) for name in ("similarity_gap", "text_distance", "bound")}
        retrieved = {_retrieval_column(direction, lang): np.zeros(len(rows), dtype=bool)
                     for direction in DIRECTIONS for lang in (lang_a, lang_b)}
        for portion in sorted(set(portions.tolist())):
            mask = portions == portion
            gap, distance, bound = _pair_terms(images[mask], raw[lang_a][mask], raw[lang_b][mask])
            terms["similarity_gap"][mask], terms["text_distance"][mask], terms["bound"][mask] = gap, distance, bound
            for direction in DIRECTIONS:
                for lang in (lang_a, lang_b):
                    retrieved[_retrieval_column(direction, lang)][mask] = _retrieval(images[mask], files[mask],
                                                                                     raw[lang][mask], direction)
        frame = pd.DataFrame({**columns, **terms, **retrieved})
        return Samples(frame, {"languages": [lang_a, lang_b], "independent_captions": s.independent_captions,
                               "pairs": pairs})

    def _multi30k(self, samples: Samples) -> Output:
        import pandas as pd

        from vlfair import stats
        from vlfair.figures import subplots
        from vlfair.report import plots
        from vlfair.report.numbers import format_value

        s = self.settings
        lang_a, lang_b = samples.facts["languages"]
        portions = samples.column("portion")
        files = samples.column("image_file")
        out = Output(settings=dict(samples.facts), notes=list(s.notes), warnings=list(samples.warnings))
        summary: dict[str, dict] = {}
        scatter: dict[str, list] = {"x": [], "y": [], "label": []}
        slope = 0.0
        ratio_figure, ratio_axis = subplots(figsize=(5, 3.2))
        for portion in sorted(set(portions.tolist())):
            mask = portions == portion
            fairness = _individual_fairness(*(samples.column(name)[mask]
                                              for name in ("similarity_gap", "text_distance", "bound")))
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
            for direction in DIRECTIONS:
                rows = _retrieval_rows(files, mask, direction)
                correct = {lang: samples.column(_retrieval_column(direction, lang))[rows] for lang in (lang_a, lang_b)}
                gap = _cross_lingual_gap(correct, None, s.resampling)
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

    def _multi30k_metrics(self, samples: Samples) -> list[Declared]:
        lang_a, lang_b = samples.facts["languages"]
        portions, files = samples.column("portion"), samples.column("image_file")
        distances = samples.column("text_distance")
        metrics = []
        for portion in sorted(set(portions.tolist())):
            mask = portions == portion
            rows = np.flatnonzero(mask & (distances > 0))  # the pairs with a ratio (identical ones left out)
            pair = {"portion": portion, "languages": f"{lang_a}-{lang_b}"}
            if rows.size:  # (bound: a per-pair quantity too, read so that vlfair compare pairs it, not checks it)
                metrics += [Declared("text_distance", pair, Mean("text_distance"), rows, also=("bound",)),
                            Declared("individual_fairness", pair, EPSILON, rows)]
            for direction in DIRECTIONS:
                subset = {"portion": portion, "direction": direction}
                columns = tuple(_retrieval_column(direction, lang) for lang in (lang_a, lang_b))
                # sorted: the same rows as text_to_image's where each image has one caption (one row set)
                rows = np.sort(_retrieval_rows(files, mask, direction))
                metrics += [Declared("cross_lingual_gap", subset, ColumnRange(columns), rows),
                            *(Declared("retrieval_accuracy", {**subset, "language": lang}, Mean(column), rows)
                              for lang, column in zip((lang_a, lang_b), columns))]
        return metrics

    def _select_pairs(self, ctx: Context) -> dict[str, int]:
        """Keep the independent portion's first (en, de) caption pair per image (the study), or all (the
        kept rows' indices in the data as given become ``ctx.source_rows``); the pairs per portion."""
        choice = self.settings.independent_captions
        data = ctx.dataset
        if choice == "first" and "caption_index" in data.column_names:
            keep = [i for i, (portion, index) in enumerate(zip(data["portion"][:], data["caption_index"][:]))
                    if portion != "independent" or index == 1]
            if len(keep) < data.num_rows:
                ctx.dataset = data.select(keep)
                ctx.source_rows = keep  # what samples, skipped rows and refusals name
        return dict(sorted(Counter(ctx.dataset["portion"]).items()))

    # ---- (b) FairFace in eight languages --------------------------------------------------
    def _score_fairface(self, ctx: Context) -> Samples:
        import pandas as pd

        from vlfair.data.schemas import AGE_GROUP_OF_BIN

        s = self.settings
        rows = ctx.rows()
        truth = {"gender": ctx.column("gender", rows), "race": ctx.column("race", rows),
                 "age_group": np.array([AGE_GROUP_OF_BIN[a] for a in ctx.column("age", rows)])}
        columns: dict[str, Any] = {**ctx.identity(rows), **truth}
        warnings: list[str] = []
        for task, classes in s.prompt_sets[s.prompt_set].items():  # what is refused, refused before any work
            if task not in truth:
                raise ProbeError(f"multilingual: zero-shot task {task!r} has no label column; tasks: {sorted(truth)}")
            if ctx.generative:
                for lang in _languages(classes):
                    self._question(lang)
        sets = [s.prompt_set, *s.phrasings]  # the prompt set (phrasing 1), then each other one
        if ctx.generative:  # every set, task and language asked of an image in one pass, the image encoded once
            asks = dict.fromkeys((s.generative.questions[lang], tuple(classes[c][lang] for c in classes))
                                 for name in sets for classes in s.prompt_sets[name].values()
                                 for lang in _languages(classes))
            ctx.ask_together([(question, list(answers)) for question, answers in asks], s.generative)
        for number, name in enumerate(sets, start=1):
            for task, classes in s.prompt_sets[name].items():
                names = list(classes)
                for lang in _languages(classes):
                    prompts = [classes[c][lang] for c in names]
                    column = phrasing.column(_correct_column(task, lang), number)
                    if ctx.generative:
                        best = self._asked(ctx, lang, prompts)
                        columns[column] = np.asarray(names)[best] == truth[task]
                        continue
                    images = ctx.images()[0]
                    text = ctx.texts(prompts)
                    same = indistinguishable(prompts, text)
                    if same:  # e.g. words outside an English tokenizer's vocabulary: a finding, said, not refused
                        warnings.append(f"{task} prompts in {lang}{f' ({name})' if number > 1 else ''}: {same}; its "
                                        f"{lang} predictions pick between them by rounding noise")
                    predicted = np.asarray(names)[(images @ text.T).argmax(axis=1)]
                    columns[column] = predicted == truth[task]
        facts: dict[str, Any] = {"pivot": s.pivot, "prompt_set": s.prompt_set}
        if s.phrasings:
            facts["phrasings"] = sets
        if ctx.generative:
            facts.update(scorer="generative", questions=s.generative.questions, mode=s.generative.mode)
        return Samples(pd.DataFrame(columns), facts, warnings)

    def _asked(self, ctx: Context, lang: str, prompts: list[str]) -> np.ndarray:
        """Each image's answer among ``prompts`` to the question in ``lang`` (its index; -1 where an
        open-ended answer named none: the run leaves that image out)."""
        return ctx.text_scores(prompts, self.settings.generative, question=self._question(lang)).best()

    def _question(self, lang: str) -> str:
        """The question a generative model is asked in ``lang`` (refused by name where the settings have none)."""
        asked = self.settings.generative
        if lang not in asked.questions:
            raise ProbeError(f"multilingual: setting generative.questions has no question in {lang!r} (it has "
                             f"{sorted(asked.questions)}): a generative model is asked in every language of the "
                             "prompts")
        return asked.questions[lang]

    def _fairface(self, samples: Samples) -> Output:
        """The study's measures with the prompt set (phrasing 1), then with each other prompt set (its metrics'
        subsets say which: "phrasing": 2, ...), pooled over them, and the phrasings table (issue 46)."""
        out = self._fairface_with(samples, 1)
        count = phrasing.count(samples)
        if count < 2:
            return out
        for number in range(2, count + 1):  # the same measures on that prompt set's predictions (no figures)
            out.metrics += [dataclasses.replace(m, subset={**m.subset, "phrasing": number})
                            for m in self._fairface_with(samples, number).metrics]
        s = self.settings
        out.metrics += evaluate(samples, phrasing.pooled(self._fairface_metrics(samples, 1), samples), self.facts,
                                **s.resampling)
        found = phrasing.found_table(
            out.metrics, "cross_lingual_gap", lambda subset: {"task": subset["task"]}, samples.facts["phrasings"],
            lambda metric, _pooled: bool(metric.ci and metric.ci[0] > 0), "Each task's cross-lingual accuracy gap",
            "interval lies above 0")
        if found is not None:
            out.tables["phrasings"] = found
        return out

    def _fairface_with(self, samples: Samples, number: int) -> Output:
        """The study's measures on the predictions with prompt set ``number`` (1: prompt_set, its tables and
        figures too)."""
        import pandas as pd

        from vlfair.report import plots

        s = self.settings
        out = Output(settings=dict(samples.facts), notes=list(s.notes), warnings=list(samples.warnings))
        correct: dict[str, dict[str, np.ndarray]] = {}
        truth = {task: samples.column(task) for task in TASKS}
        accuracy_table = {}
        for task, classes in s.prompt_sets[s.prompt_set].items():
            languages = _languages(classes)
            correct[task] = {lang: samples.column(phrasing.column(_correct_column(task, lang), number))
                             for lang in languages}
            gap = _cross_lingual_gap(correct[task], s.pivot if s.pivot in languages else None, s.resampling)
            out.metrics.append(metric_from("cross_lingual_gap", {"task": task}, gap, "gap", "gap_ci",
                                           details=("accuracy", "gap_to_pivot")))
            out.metrics += metrics_per("accuracy", {"task": task}, gap, "accuracy", "accuracy_ci", by="language")
            accuracy_table[task] = gap["accuracy"]
        frame = pd.DataFrame(accuracy_table).rename_axis("language")
        out.tables["accuracy_by_language"] = frame
        if number == 1:
            out.figures["accuracy_by_language"] = plots.grouped_bars(frame, None, "Zero-shot accuracy per language",
                                                                     "accuracy", ylim=(0, 1), legend_title="task")
        for group_gap in s.group_gaps:
            self._group_gaps(out, group_gap, correct, truth, draw=number == 1)
        for rate_gap in s.rate_gaps:  # vlfair's extras
            self._rate_gap(out, rate_gap, correct, truth, draw=number == 1)
        return out

    def _group_gaps(self, out: Output, spec: GroupGap, correct: dict, truth: dict, draw: bool = True) -> None:
        """The study's Eq. 5: accuracy of ``task`` between the groups of ``between``, within each
        value of ``within`` (or over all images), per language; with ``amplification``, each gap
        minus the pivot language's."""
        import pandas as pd

        from vlfair import measures
        from vlfair.report import plots

        s = self.settings
        task, between, within = spec.task, spec.between, spec.within
        if task not in correct:
            raise ProbeError(f"multilingual: group_gaps task {task!r} is not a zero-shot task ({sorted(correct)})")
        languages = sorted(correct[task])
        hits = np.stack([correct[task][lang] for lang in languages], axis=1)  # (rows, languages)
        values = sorted(set(truth[within].tolist()), key=str) if within else [None]
        minuend, subtrahend = spec.difference or (None, None)  # the signed difference plotted (Fig. 3-4)
        signed, accuracy, amplification = {}, {}, {}
        for value in values:
            mask = truth[within] == value if within else np.ones(len(truth[task]), dtype=bool)
            subset: dict[str, Any] = {"task": task, "groups": between, **({within: value} if within else {})}
            try:
                result = measures.group_rate_gap(*_as_labels(hits[mask].T.ravel()),
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
                amplification[label] = self._amplification(out, subset, hits[mask], truth[between][mask], languages)
        if not accuracy:
            return
        wide = pd.Series(accuracy).unstack(level=2)
        wide.index.names = [within or "images", between]
        out.tables[f"{task}_accuracy_by_{within + '_and_' if within else ''}{between}"] = wide
        if within and signed:
            name = f"{task}_gap_by_{within}"
            out.tables[name] = differences = pd.Series(signed).unstack(level=1).rename_axis(within)
        if within and signed and draw:
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

    def _rate_gap(self, out: Output, spec: RateGap, correct: dict, truth: dict, draw: bool = True) -> None:
        import pandas as pd

        from vlfair import measures
        from vlfair.report import plots

        task, column = spec.task, spec.groups
        languages = sorted(correct[task])
        try:
            gaps = measures.group_rate_gap(*_as_labels(np.concatenate([correct[task][lang] for lang in languages])),
                                           np.tile(truth[column], len(languages)),
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
        if not draw:
            return
        out.figures[f"{task}_accuracy_by_{column}"] = plots.grouped_bars(
            by_group, None, f"{task} accuracy by {column}, per language (vlfair's extra)", "accuracy", ylim=(0, 1),
            legend_title="language")

    def _fairface_metrics(self, samples: Samples, numbers: int | None = None) -> list[Declared]:
        """The FairFace metrics with each prompt set (``numbers``: the first that many; None: every one)."""
        count = phrasing.count(samples) if numbers is None else numbers
        metrics = []
        for number in range(1, count + 1):
            phrased = [dataclasses.replace(m, subset={**m.subset, "phrasing": number}) if number > 1 else m
                       for m in self._fairface_declared(samples, number)]
            metrics += phrased
        return metrics

    def _fairface_declared(self, samples: Samples, number: int) -> list[Declared]:
        s = self.settings
        truth = {task: samples.column(task) for task in TASKS}
        metrics = []
        languages_of = {}
        for task, classes in s.prompt_sets[s.prompt_set].items():
            languages_of[task] = languages = _languages(classes)
            columns = _correct_columns(task, languages, number)
            metrics += [Declared("cross_lingual_gap", {"task": task}, ColumnRange(columns)),
                        *(Declared("accuracy", {"task": task, "language": lang}, Mean(column))
                          for lang, column in zip(languages, columns))]
        for spec in s.group_gaps:
            task, between, within = spec.task, spec.between, spec.within
            languages = sorted(languages_of[task])
            columns = _correct_columns(task, languages, number)
            # one row set per value of `within` (one over all cells would cost a matrix product per cell)
            for value in sorted(set(truth[within].tolist()), key=str) if within else [None]:
                rows = np.flatnonzero(truth[within] == value) if within else None
                names = _gap_groups(truth[between] if rows is None else truth[between][rows])
                if names is None:  # the measure refused these rows (the run's warning says why)
                    continue
                cell: dict[str, Any] = {within: value} if within else {}
                subset: dict[str, Any] = {"task": task, "groups": between, **cell}
                for lang, column in zip(languages, columns):
                    metrics.append(Declared("group_rate_gap", {**subset, "language": lang}, Range(column), rows,
                                            between))
                    metrics += [Declared("accuracy", {"task": task, "language": lang, between: name, **cell},
                                         Mean(column, name), rows, between) for name in names]
                if spec.amplification and s.pivot in languages:
                    pivot = phrasing.column(_correct_column(task, s.pivot), number)
                    metrics += [Declared("gap_amplification", {**subset, "language": lang, "pivot": s.pivot},
                                         _amplification(column, pivot), rows, between)
                                for lang, column in zip(languages, columns) if lang != s.pivot]
        for rate_gap in s.rate_gaps:
            task, column = rate_gap.task, rate_gap.groups
            languages = sorted(languages_of[task])
            if _gap_groups(truth[column]) is not None:
                metrics += [Declared("group_rate_gap", {"task": task, "groups": column, "language": lang},
                                     Range(correct), group=column)
                            for lang, correct in zip(languages, _correct_columns(task, languages, number))]
        return metrics


# ---- samples.parquet's columns, and the measures on them -------------------------------------
DIRECTIONS = ("image_to_text", "text_to_image")
TASKS = ("gender", "race", "age_group")  # FairFace's label columns a zero-shot task predicts


def _schema_of(samples: Samples) -> str:
    """multi30k's samples are caption pairs (a portion each), fairface's images."""
    return "multi30k" if "portion" in samples.frame.columns else "fairface"


def _retrieval_column(direction: str, lang: str) -> str:
    """Whether top-1 retrieval in ``direction`` with ``lang``'s captions is right: per caption for
    text_to_image; for image_to_text the image's own result, the same on each of its captions."""
    return f"{direction} correct {lang}"


def _correct_column(task: str, lang: str) -> str:
    """Whether the zero-shot prediction of ``task`` with ``lang``'s prompts is the true label."""
    return f"{task} correct {lang}"


def _correct_columns(task: str, languages: list[str], number: int = 1) -> tuple[str, ...]:
    """The correct columns of ``task`` in ``languages`` with prompt set ``number`` (1: prompt_set)."""
    return tuple(phrasing.column(_correct_column(task, lang), number) for lang in languages)


def _languages(classes: dict[str, dict[str, str]]) -> list[str]:
    """A task's languages: those every class has a prompt in, sorted."""
    return sorted(set.intersection(*(set(v) for v in classes.values())))


def _pair_terms(images: np.ndarray, text_a: np.ndarray, text_b: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per caption pair: the similarity gap |cos(v, t_a) - cos(v, t_b)|, the text distance
    ||t_a - t_b|| and the bound 2 / (||t_a|| + ||t_b||), computed as ``measures.individual_fairness``
    computes them (which also checks the inputs)."""
    from vlfair import measures

    measures.individual_fairness(images, text_a, text_b)  # its errors: shapes, non-finite values, zero vectors
    v, a, b = (np.asarray(x, dtype=float) for x in (images, text_a, text_b))
    norm_v, norm_a, norm_b = (np.linalg.norm(x, axis=1) for x in (v, a, b))
    v = v / norm_v[:, None]
    gap = np.abs((v * a).sum(axis=1) / norm_a - (v * b).sum(axis=1) / norm_b)
    return gap, np.linalg.norm(a - b, axis=1), 2.0 / (norm_a + norm_b)


def _individual_fairness(gap: np.ndarray, distance: np.ndarray, bound: np.ndarray,
                         tolerance: float = 1e-6) -> measures.IndividualFairness:
    """``measures.individual_fairness``'s result from the pairs' terms (:func:`_pair_terms`)."""
    from vlfair import measures

    usable = distance > 0
    ratio = gap[usable] / distance[usable]
    violations = ratio > bound[usable] * (1 + tolerance) + tolerance
    rows = np.flatnonzero(usable)
    return measures.IndividualFairness(
        epsilon=float(ratio.max()), epsilon_row=int(rows[int(np.argmax(ratio))]),
        mean_ratio=float(ratio.mean()), median_ratio=float(np.median(ratio)),
        bound_holds=bool(not violations.any()), num_bound_violations=int(violations.sum()),
        max_bound=float(bound.max()), num_pairs=int(usable.sum()), num_identical_pairs=int((~usable).sum()),
        ratios=ratio.tolist(), similarity_gaps=gap[usable].tolist(), text_distances=distance[usable].tolist(),
    )


def _retrieval(images: np.ndarray, files: np.ndarray, raw: np.ndarray, direction: str) -> np.ndarray:
    """Top-1 matching with one language's captions, right or wrong per caption (an image may own
    several captions, as in the independent portion; image_to_text: each image's result on its
    captions)."""
    unique, image_index = np.unique(files, return_inverse=True)
    first = np.array([np.flatnonzero(image_index == i)[0] for i in range(unique.size)])
    pictures = images[first]
    texts = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    similarity = pictures @ texts.T  # (images, captions)
    if direction == "image_to_text":
        return (image_index[similarity.argmax(axis=1)] == np.arange(unique.size))[image_index]
    return similarity.argmax(axis=0) == image_index


def _retrieval_rows(files: np.ndarray, mask: np.ndarray, direction: str) -> np.ndarray:
    """The frame's rows a retrieval accuracy counts, in the measure's order: the captions of
    ``mask`` (text_to_image), or each image's first caption, images by file name (image_to_text)."""
    rows = np.flatnonzero(mask)
    if direction == "image_to_text":
        return rows[np.unique(files[rows], return_index=True)[1]]
    return rows


def _as_labels(correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(predictions, references) whose matches are ``correct``: what the accuracy measures take."""
    return np.where(correct, "right", "wrong"), np.full(len(correct), "right")


def _cross_lingual_gap(correct: dict[str, np.ndarray], pivot: str | None,
                       resampling: dict[str, Any]) -> measures.CrossLingualGap:
    """``measures.cross_lingual_gap`` of each language's right/wrong samples (stacked in order)."""
    from vlfair import measures

    hits = np.concatenate([correct[lang] for lang in correct])
    languages = np.concatenate([[lang] * len(correct[lang]) for lang in correct])
    return measures.cross_lingual_gap(*_as_labels(hits), languages, pivot=pivot, **resampling)


def _gap_groups(labels: np.ndarray) -> list[str] | None:
    """The groups a group rate gap compares, or None where the measure refuses them (fewer than 2
    groups, a group too small for a mean): their accuracies are not reported either."""
    from vlfair import measures, stats

    names, codes = stats.encode_groups(labels.tolist(), "groups")
    counts = np.bincount(codes, minlength=len(names))
    if len(names) < 2 or (counts < measures.MIN_GROUP_SIZE).any():
        return None
    return names


# ---- the statistics only this probe declares -----------------------------------------------------
def _amplification(column: str, pivot: str) -> Custom:
    """The gap between the groups in ``column`` minus the same gap in the pivot language's column."""
    def make(at: Mapping[str, int], code: Mapping[Any, int]) -> Callable[[paired.Moments], np.ndarray]:
        picked = [at[column], at[pivot]]

        def statistic(m: paired.Moments) -> np.ndarray:
            means = m.means[:, :, picked]  # (b, groups, [language, pivot])
            gaps = np.nanmax(means, axis=1) - np.nanmin(means, axis=1)
            return gaps[:, 0] - gaps[:, 1]
        return statistic
    return Custom((column, pivot), make)


def _epsilon(values: np.ndarray) -> np.ndarray:
    """Epsilon from the pairs' (b, n, [similarity gap, text distance]): the largest ratio."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = values[:, :, 0] / values[:, :, 1]
    ratio = np.where(values[:, :, 1] > 0, ratio, np.nan)  # another model's identical pair has no ratio
    return np.nanmax(ratio, axis=1)


# epsilon from the caption pairs' (b, n, [similarity gap, text distance]) values: the largest ratio
EPSILON = Custom(("similarity_gap", "text_distance"), lambda at, code: _epsilon, values=True)
