"""The P-FI study: capability at three category levels, the gender bias ratio, name retention.

samples.parquet holds one row per image: its folder (``category``), ``gender`` and ``name``; per
folder group and level, its probability of each class (``probability GROUP level L: CLASS``), its
right class (``right class GROUP level L``) and whether its top class is that one (``correct
GROUP level L``: 1.0, 0.0, null without a right class), null in the rows of other groups; per
folder with two names or more, its similarity to each of the folder's names in sorted order
(``name score J``, null past the folder's number of names) and whether its own name scores
highest (``own name first``). Facts: the two prompts and the score (softmax or sigmoid).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, ConfigDict, Field, model_validator

from vlfair.measures import reporters
from vlfair.measures.catalog import neutral_value
from vlfair.outputs import Metric, metric_from
from vlfair.probes import phrasings as phrasing
from vlfair.probes.asking import Asking
from vlfair.probes.base import Context, Output, Probe, ProbeError, UploadSpec
from vlfair.probes.declared import Declared, Mean, Range, Ratio, evaluate, too_small
from vlfair.probes.registry import register
from vlfair.probes.scorers import Scorer
from vlfair.probes.settings import (
    Bootstrap,
    Flag,
    Name,
    ProbeSettings,
    Settings,
    Text,
    distinct,
    placeholders,
    refuse,
    same_text,
)
from vlfair.samples import Samples

Prompt = Annotated[Text, AfterValidator(placeholders(""))]


class Truth(Settings):
    """Each image's right class read from a column (``map``: the column's values -> classes)."""

    column: Name
    map: dict[Name, Name] = Field(default_factory=dict)


class Level(Settings):
    # each class once (case and spaces aside: one prompt): a softmax over a class twice splits its score
    classes: Annotated[list[Name], AfterValidator(distinct(same_text, "case and spaces aside"))] = Field(min_length=2)
    truth: Name | Truth  # one class for every image, or read from a column

    @model_validator(mode="after")
    def _truth_is_a_class(self) -> Level:
        """The right class is one of the level's classes (else top-1 accuracy has no column to read)."""
        truth = self.truth
        named = ([(("truth",), truth)] if isinstance(truth, str) else
                 [(("truth", "map", value), label) for value, label in truth.map.items()])
        for location, label in named:
            if label not in self.classes:
                refuse("Level", location, label, f"is not one of the level's classes {self.classes}")
        return self


class FolderGroup(Settings):
    folders: Annotated[list[Name], AfterValidator(distinct())] = Field(min_length=1)
    pooled: Name | None = None  # also reported over all its folders under this name
    own: Flag = False  # the class lists are vlfair's own, not the study's
    # a level's number: 1, 2, ... (not strict: results.json, read back by rescore and compare, holds "1")
    levels: dict[Annotated[int, Field(ge=1)], Level] = Field(min_length=1)


class BiasRatio(Settings):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    classes: dict[Name, Name] = Field(alias="class")  # folder group -> the class whose score is compared
    protected_group: Name
    reference_group: Name

    @model_validator(mode="after")
    def _two_groups(self) -> BiasRatio:
        if self.protected_group == self.reference_group:  # b = s / s = 1 whatever the model does
            refuse("BiasRatio", ("reference_group",), self.reference_group,
                   "is the protected_group too: the ratio would be 1 whatever the scores; give two groups")
        return self


class FigureQuestions(Asking):
    """How a generative model is asked: ``question`` with each class as ``answer`` (capability), and
    ``name_question`` with the folder's names as ``name_answer`` and ``none_answer`` (retention)."""

    answer: Prompt = Field(description="a class as an answer, with {}")
    name_question: Text = Field(description="the question of name retention")
    name_answer: Prompt = Field(description="a name as an answer, with {}")
    none_answer: Text | None = Field(description="an answer naming no one among the names (null: none offered)")


class PublicFiguresSettings(ProbeSettings, Bootstrap, phrasing.Phrased, phrasing.Asked):
    prompt: Prompt = Field(description="the class prompt, with {} for the class")
    name_prompt: Prompt = Field(description="the name-retention prompt, with {} for the name")
    groups: dict[Name, FolderGroup] = Field(min_length=1, description="folder groups: folders, pooled, own, levels "
                                                                    "of classes")
    bias_ratio: BiasRatio = Field(description="the bias ratio's class per group and its protected and reference "
                                              "genders")
    generative: FigureQuestions = Field(description="how a generative model (lvlm:) is asked about classes and names")
    phrasings: phrasing.setting("") = phrasing.field("the class prompt, each with {}")  # type: ignore[valid-type]
    name_phrasings: phrasing.setting("") = Field(  # type: ignore[valid-type]
        default_factory=list, description="other phrasings of name_prompt, each with {}, one per phrasing of the class "
                                          "prompt (phrasing k rewords both); empty: name retention keeps name_prompt")
    question_phrasings: phrasing.questions() = phrasing.question_field(  # type: ignore[valid-type]
        "about the classes; name retention keeps name_question")
    answer_formats: Annotated[list[phrasing.Format], AfterValidator(distinct())] = phrasing.FORMATS_FIELD

    @model_validator(mode="after")
    def _consistent(self) -> PublicFiguresSettings:
        """Each folder in one group and no pooled name that is a folder's (their rows would be one
        table row); the bias ratio's class of each group is among that group's level-2 classes."""
        seen: dict[str, str] = {}
        for group, spec in self.groups.items():
            for folder in spec.folders:
                other = seen.setdefault(folder, group)
                if other != group:
                    refuse("PublicFiguresSettings", ("groups", group, "folders"), spec.folders,
                           f"names folder {folder!r}, a folder of group {other!r} too: give each folder one group")
        for group, spec in self.groups.items():
            if spec.pooled is not None and spec.pooled in seen:
                refuse("PublicFiguresSettings", ("groups", group, "pooled"), spec.pooled,
                       "is a folder's name: the pooled rows would be reported as that folder's")
        if self.name_phrasings and len(self.name_phrasings) != len(self.phrasings):
            refuse("PublicFiguresSettings", ("name_phrasings",), self.name_phrasings,
                   f"holds {len(self.name_phrasings)} phrasing(s) of name_prompt for {len(self.phrasings)} of the "
                   "class prompt: phrasing k rewords both prompts, so give as many (or none)")
        phrasing.check_new("PublicFiguresSettings", "name_phrasings", self.name_prompt, self.name_phrasings,
                           "name_prompt")
        for group, label in self.bias_ratio.classes.items():
            where = ("bias_ratio", "class", group)
            if group not in self.groups:
                refuse("PublicFiguresSettings", where, label, f"{group!r} is not a folder group ({list(self.groups)})")
            level = self.groups[group].levels.get(2)
            if level is None or label not in level.classes:
                refuse("PublicFiguresSettings", where, label, f"is not a level-2 class of {group!r} "
                       f"({level.classes if level else 'it has no level 2'})")
        return self


@register
class PublicFiguresProbe(Probe):
    name = "public-figures"
    Settings = PublicFiguresSettings
    position = 4  # study 004
    asks_questions = True  # public_figures.yaml's generative section
    model_settings = ("generative",)  # how a generative model is asked belongs to it, as its spec does
    published_file = "public_figures.yaml"
    help = "P-FI public figures: class scores, the politician bias ratio, name retention"
    description = ("Class scores per folder and gender (the P-FI study's Table 1), the bias ratio b = s_w/s_m of each "
                   "folder's class, and name retention text and image scores (Table 2). Data: the pfi schema.")
    schemas = ("pfi",)
    required_columns = {"pfi": ("image", "name", "category", "gender")}
    upload = UploadSpec("pfi", ("name", "category", "gender"), ("gender",))
    uncompared = {"retention_image_score": (
        "a top-1 down each name's column of the folder's images x names score matrix: no per-image value, and a "
        "paired resample of the whole matrix costs images x names values per resample and relabelling (minutes and "
        "gigabytes for a folder of 400 representatives); compare retention_text_score (each image's own name "
        "first or not), or set the runs' image scores side by side")}
    settings: PublicFiguresSettings

    # ---- the model's part ------------------------------------------------------------------
    def score(self, ctx: Context, schema: str | None) -> Samples:
        """Per image: its folder (category), gender and name; per folder group and level, its
        probability of every class, its right class and whether the top class is it (rows of
        other groups: null); per folder with 2 names or more, its similarity to each of the
        folder's names (sorted; ``name score j``) and whether its own name scores highest."""
        import pandas as pd

        s, asked = self.settings, self.settings.generative
        # what the model's scores are (said in the facts), refused before any image is read where it is neither
        scored = ctx.scorer.pick({"asks": self._asked_score, "embeds": self._embedded_score})
        rows = ctx.rows()
        categories, genders = ctx.column("category", rows), ctx.column("gender", rows)
        names = ctx.column("name", rows)
        self._check_folders(categories)
        n = len(rows)
        columns: dict[str, Any] = {**ctx.identity(rows), "category": categories, "gender": genders, "name": names}
        # each phrasing: the class prompt and how a generative model is asked (the study's first): a contrastive
        # model's other prompts, or a generative model's other ways (question_phrasings x answer_formats)
        ways = phrasing.ways_of(ctx.scorer, s, [s.prompt, *s.phrasings])
        for group, spec, in_group, _views in self._folder_groups(categories):
            for level, level_spec in sorted(spec.levels.items()):
                classes = level_spec.classes
                truth = self._truth(ctx, rows[in_group], level_spec.truth, classes, categories[in_group])
                known = np.array([t is not None for t in truth], dtype=bool)
                columns[_truth_column(group, level)] = _spread(truth, in_group, n)
                # the study's prompt (phrasing 1), then each other phrasing of it on the same images
                for number, (_label, prompt, way) in enumerate(ways, start=1):
                    found = ctx.text_scores([prompt.format(c) for c in classes], way,
                                            [way.answer.format(c) for c in classes], within=rows[in_group])
                    probabilities = found.probabilities
                    for j, label in enumerate(classes):
                        columns[phrasing.column(_probability_column(group, level, label), number)] = _spread(
                            probabilities[:, j], in_group, n)
                    correct = np.full(len(truth), np.nan)
                    # a tie of the best classes counts as the expected value (vlfair.measures.ties), taken on
                    # the scores themselves: a softmax multiplies their differences, and a kernel's rounding
                    # with them, by the logit scale (~100)
                    right = np.asarray(classes, dtype=object)[None, :] == truth[:, None]
                    correct[known] = found.best_credit(right)[known]
                    columns[phrasing.column(_correct_column(group, level), number)] = _spread(correct, in_group, n)
        name_scores: list[np.ndarray] = []
        own_first = np.full(n, np.nan)
        for folder in self._retention_folders(categories):
            mask = categories == folder
            candidates = sorted(set(names[mask].tolist()))
            if len(candidates) < 2:
                continue  # analyze warns
            # a generative model may also answer "none of these" (its own answer, not a name: it never
            # makes an image's own name first); a model that reads prompts reads the names' prompts alone
            none = [asked.none_answer] if asked.none_answer else []
            found = ctx.text_scores([s.name_prompt.format(name) for name in candidates], asked,
                                    [asked.name_answer.format(name) for name in candidates] + none,
                                    question=asked.name_question, within=rows[mask])
            matrix = found.values[:, :len(candidates)]
            references = np.array([candidates.index(name) for name in names[mask]])
            own_first[mask] = found.best_credit(np.arange(found.values.shape[1])[None, :] == references[:, None])
            while len(name_scores) < len(candidates):
                name_scores.append(np.full(n, np.nan, dtype=matrix.dtype))
            for j in range(len(candidates)):
                name_scores[j][mask] = matrix[:, j]
        if name_scores:
            columns[OWN_NAME_FIRST] = own_first
            columns.update({_name_score_column(j): values for j, values in enumerate(name_scores)})
            # each image's own name first or not with each other phrasing of the name prompt (phrasings 2, ...)
            for number, prompt in enumerate(s.name_phrasings, start=2):
                columns[phrasing.column(OWN_NAME_FIRST, number)] = self._own_name_first(ctx, rows, categories, names,
                                                                                       prompt)
        warnings: list[str] = []
        labels = {"phrasings": [way.label for way in ways]} if len(ways) > 1 else {}
        facts = {"prompt": s.prompt, "name_prompt": s.name_prompt, **scored(ctx, warnings), **labels}
        return Samples(pd.DataFrame(columns), facts, warnings)

    def settings_for(self, scorer: Scorer) -> tuple[PublicFiguresSettings, list[str]]:
        # before any image is read (name_phrasings come with as many phrasings: a generative model refuses both)
        phrasing.refuse_ways("public-figures", self.settings, scorer)
        return self.settings, []

    def _asked_score(self, ctx: Context, warnings: list[str]) -> dict[str, Any]:
        """The facts of what a model that is asked scored: the answers' probabilities, asked as the samples say."""
        return {"score": ctx.scorer.kind, **ctx.scorer.asked_facts(**self.settings.generative.model_dump(mode="json"))}

    def _embedded_score(self, ctx: Context, warnings: list[str]) -> dict[str, Any]:
        """The facts of what an encoder scored: a softmax over the classes, or a sigmoid model's own probabilities."""
        if ctx.encoder.loss == "sigmoid":
            warnings.append("a sigmoid model: class scores are independent probabilities x100, rows do not sum to 100")
        return {"score": "sigmoid" if ctx.encoder.loss == "sigmoid" else "softmax"}

    def _own_name_first(self, ctx: Context, rows: np.ndarray, categories: np.ndarray, names: np.ndarray,
                        prompt: str) -> np.ndarray:
        """1.0 where each image's own name scores highest among its folder's names read with ``prompt`` (a
        contrastive model's), 0.0 where not, 1/t where it is one of t names tied for the best, null in a
        folder of fewer than 2 names."""
        first = np.full(len(rows), np.nan)
        for folder in self._retention_folders(categories):
            mask = categories == folder
            candidates = sorted(set(names[mask].tolist()))
            if len(candidates) < 2:
                continue
            found = ctx.text_scores([prompt.format(name) for name in candidates], within=rows[mask])
            own = np.array([candidates.index(name) for name in names[mask]])
            first[mask] = found.best_credit(np.arange(found.values.shape[1])[None, :] == own[:, None])
        return first

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

    # ---- the samples' part -----------------------------------------------------------------
    def analyze(self, samples: Samples) -> Output:
        import pandas as pd

        from vlfair.report import plots

        s = self.settings
        categories, genders = _texts(samples.column("category")), _texts(samples.column("gender"))
        self._check_folders(categories)
        out = Output(settings=dict(samples.facts), notes=list(s.notes), warnings=list(samples.warnings))
        declared = self.declare(samples)
        # the bias ratio's test takes the measure's relabellings (bias_ratio's default: the study has no test)
        out.metrics = evaluate(samples, [*declared, *phrasing.pooled(declared, samples)], self.facts,
                               **s.evaluation)
        measured = {(m.name, _key(m.subset)): m for m in out.metrics}
        summary, ratios = {}, {}
        for group, spec, _in_group, views in self._folder_groups(categories):
            own = " (vlfair's own classes)" if spec.own else ""
            for level, level_spec in sorted(spec.levels.items()):
                classes = level_spec.classes
                probabilities = _floats(samples, [_probability_column(group, level, c) for c in classes])
                truth = _texts(samples.column(_truth_column(group, level)))
                table = {}
                for folder, mask in views.items():
                    for gender in sorted(set(genders[mask].tolist())):  # the study's Table 1 cells
                        table[(folder, gender)] = [measured[("class_score", _key(
                            {"folder": folder, "level": level, "class": label, "gender": gender}))].value
                            for label in classes]
                    summary[(folder, level)] = self._top1(out, folder, level, classes, probabilities[mask],
                                                          truth[mask], genders[mask], measured)
                    if level == 2 and group in s.bias_ratio.classes:
                        label = s.bias_ratio.classes[group]
                        ratio = measured.get(("bias_ratio", _key({"folder": folder, "class": label})))
                        if ratio is None:
                            why = self._ratio_undefined(genders[mask], probabilities[mask, classes.index(label)])
                            out.warnings.append(f"bias ratio of the {label} class in {folder}: {why}")
                            continue
                        low, high = ratio.ci or (None, None)
                        ratios[folder] = {"class": label, "b = s_w / s_m": ratio.value, "CI low": low,
                                          "CI high": high, "p": ratio.p_value}
                frame = pd.DataFrame.from_dict(table, orient="index", columns=classes)
                frame.index = pd.MultiIndex.from_tuples(frame.index, names=["folder", "gender"])
                out.tables[f"capability_{group}_level{level}"] = frame
                if own:
                    out.notes.append(f"capability {group} level {level}: classes {classes}{own}")
        if ratios:
            out.tables["bias_ratio"] = frame = pd.DataFrame.from_dict(ratios, orient="index").rename_axis("folder")
            points = pd.DataFrame({"label": [f"{folder}: {label}" for folder, label in frame["class"].items()],
                                 "value": frame["b = s_w / s_m"].to_numpy(float),
                                 "low": frame["CI low"].to_numpy(float), "high": frame["CI high"].to_numpy(float)})
            out.figure("bias_ratio", plots.forest, points, "Bias ratio b = s_w / s_m of each folder's own class",
                       "b (women's mean score / men's)", neutral=neutral_value("bias_ratio"))
        capability = pd.DataFrame.from_dict(summary, orient="index")
        capability.index = pd.MultiIndex.from_tuples(capability.index, names=["folder", "level"])
        out.tables["capability_summary"] = capability
        right = capability["right class score"].unstack("level").rename(columns=lambda level: f"level {level}")
        out.figure("capability", plots.grouped_bars, right, None, "Mean score (softmax x100) of the right class per "
                   "folder and level", "score x100", ylim=(0, 100), legend_title="class level")
        self._retention(samples, out, categories, _texts(samples.column("name")))
        if phrasing.count(samples) > 1:
            self._phrasings(samples, out)
        return out

    def _phrasings(self, samples: Samples, out: Output) -> None:
        """An extension of vlfair's (issue 46): the phrasings table, each folder's bias ratio with every phrasing of
        the class prompt and pooled (:mod:`vlfair.probes.phrasings`), found in a phrasing whose interval excludes 1
        on the pooled ratio's side."""
        def found(metric: Metric, pooled: Metric) -> bool:
            side = np.sign((pooled.value or 1.0) - 1.0)
            return bool(metric.ci and side and (metric.ci[0] > 1.0 if side > 0 else metric.ci[1] < 1.0))

        table = phrasing.found_table(out.metrics, "bias_ratio",
                                     lambda subset: {k: subset[k] for k in ("folder", "class")},
                                     samples.facts["phrasings"], found, "Each folder's bias ratio b = s_w / s_m",
                                     "interval excludes 1 on the pooled ratio's side")
        if table is not None:
            out.tables["phrasings"] = table

    def _top1(self, out: Output, folder: str, level: int, classes: list[str], probabilities: np.ndarray,
              truth: np.ndarray, genders: np.ndarray, measured: dict[tuple[str, str], Metric]) -> dict[str, Any]:
        """Vlfair's extra: top-1 accuracy (rows with a right class) and its gap between genders (declared), and the
        capability summary's row: the images, those with a right class, the accuracy and the right class's mean
        score."""
        known = np.array([t is not None for t in truth])
        subset = {"folder": folder, "level": level}
        row: dict[str, Any] = {"images": int(len(truth)), "with a right class": int(known.sum()),
                               "top-1 accuracy": np.nan, "right class score": np.nan}
        if not known.any():
            out.warnings.append(f"level {level} of {folder}: no image has one of {classes} as its right class")
            return row
        right = probabilities[known][np.arange(int(known.sum())), [classes.index(t) for t in truth[known]]]
        row.update({"top-1 accuracy": measured[("accuracy", _key(subset))].value,
                    "right class score": float(100 * right.mean())})
        if not known.all():
            out.warnings.append(f"level {level} of {folder}: {int((~known).sum())} image(s) have no right class among "
                                f"{classes} (left out of top-1 accuracy)")
        if ("group_rate_gap", _key({**subset, "groups": "gender"})) not in measured:
            out.warnings.append(f"level {level} top-1 accuracy of {folder} by gender: {too_small(genders[known])}")
        return row

    def _ratio_undefined(self, genders: np.ndarray, scores: np.ndarray) -> str:
        """Why a folder has no bias ratio (``scores``: its images' probabilities of the class): a gender absent, too
        few images of one, a score that is not a finite number, or the reference gender's mean score of 0."""
        names = set(genders.tolist())
        ratio = self.settings.bias_ratio
        absent = [g for g in (ratio.protected_group, ratio.reference_group) if g not in names]
        if absent:
            return f"no image of {' or '.join(map(repr, absent))} (genders present: {sorted(names, key=str)})"
        return too_small(genders, scores) or "the reference group's mean score is 0: the ratio is undefined"

    def _retention(self, samples: Samples, out: Output, categories: np.ndarray, names: np.ndarray) -> None:
        """The study's Table 2 (its three politician folders; athletes and actors are vlfair's extra)."""
        import pandas as pd

        from vlfair import measures
        from vlfair.report import plots

        s = self.settings
        table = {}
        for folder in self._retention_folders(categories):
            mask = categories == folder
            candidates = sorted(set(names[mask].tolist()))
            if len(candidates) < 2:
                out.warnings.append(f"retention of {folder}: only {len(candidates)} name(s)")
                continue
            matrix = _floats(samples, [_name_score_column(j) for j in range(len(candidates))])[mask]
            references = np.array([candidates.index(n) for n in names[mask]])
            # the image score (a top-1 down each name's column: no per-image value to declare) from the measure;
            # the text score is the declared one, on the same draws
            result = measures.retention(matrix, references, **s.resampling)
            text = next(m for m in out.metrics if m.name == "retention_text_score" and m.subset == {"folder": folder})
            text.details = {"num_names": result["num_names"]}
            if "ci_note" in result:  # every name one image: no interval, with any phrasing or pooled
                out.warnings.append(f"retention of {folder}: {result['ci_note']}")
                for metric in out.metrics:
                    if metric.name == "retention_text_score" and metric.subset["folder"] == folder:
                        metric.ci = None
            out.metrics.insert(out.metrics.index(text) + 1, metric_from(
                "retention_image_score", {"folder": folder}, result, "image_score", "image_score_ci",
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
            out.figure("retention", plots.forest, points, "Retention of names: text and image scores per folder",
                       "score (%)")

    # ---- vlfair compare ----------------------------------------------------------------------
    def declare(self, samples: Samples) -> list[Declared]:
        """Per folder group, level and folder (and its pooled folders): every class's score by gender, each
        gender's rows resampled within it as the study's table; top-1 accuracy and its gap between genders on the
        images with a right class (each image right or not); at level 2, the bias ratio of the group's class. Per
        folder, the retention text score (each image's own name first or not, resampled within names). The
        retention image score is not declared (:attr:`uncompared` says why)."""
        categories = _texts(samples.column("category"))
        metrics = self._class_metrics(samples, categories, 1)
        if OWN_NAME_FIRST in samples.frame.columns:
            first = samples.column(OWN_NAME_FIRST).astype(float)
            for folder in self._retention_folders(categories):
                rows = np.flatnonzero((categories == folder) & ~np.isnan(first))  # none: fewer than 2 names
                # the folder's name scores ride along: they are the model's values (vlfair compare checks
                # that every other column is the same data in both runs)
                width = 0
                while rows.size and _name_score_column(width) in samples.frame.columns and np.isfinite(
                        samples.frame[_name_score_column(width)].iloc[rows[0]]):
                    width += 1
                metrics.append(Declared("retention_text_score", {"folder": folder}, Mean(OWN_NAME_FIRST), rows,
                                        strata="name", also=tuple(map(_name_score_column, range(width)))))
                # with each other phrasing of the name prompt, where the run had them
                metrics += [Declared("retention_text_score", {"folder": folder, "phrasing": number},
                                     Mean(phrasing.column(OWN_NAME_FIRST, number)), rows, strata="name",
                                     also=tuple(map(_name_score_column, range(width))))
                            for number in range(2, phrasing.count(samples) + 1)
                            if phrasing.column(OWN_NAME_FIRST, number) in samples.frame.columns]
        for number in range(2, phrasing.count(samples) + 1):  # the class prompt's other phrasings
            metrics += self._class_metrics(samples, categories, number)
        return metrics

    def _class_metrics(self, samples: Samples, categories: np.ndarray, number: int) -> list[Declared]:
        """The class scores, top-1 accuracies and gaps, and bias ratios with phrasing ``number`` of the class
        prompt (1: the study's)."""
        s = self.settings
        genders = samples.column("gender")
        phrased = {} if number == 1 else {"phrasing": number}
        metrics = []
        for group, spec, _in_group, views in self._folder_groups(categories):
            for level, level_spec in sorted(spec.levels.items()):
                column = phrasing.column(_correct_column(group, level), number)
                answered = ~np.isnan(samples.column(column).astype(float))
                for folder, mask in views.items():
                    rows = np.flatnonzero(mask)
                    subset = {"folder": folder, "level": level}
                    metrics += [Declared("class_score", {**subset, "class": label, "gender": gender, **phrased},
                                         Mean(phrasing.column(_probability_column(group, level, label), number),
                                              gender, 100.0), rows, "gender", strata="gender",
                                         report=reporters.group_rows)
                                for gender in sorted(set(genders[rows].tolist())) for label in level_spec.classes]
                    known = np.flatnonzero(mask & answered)  # the images with a right class
                    metrics += [Declared("accuracy", {**subset, **phrased}, Mean(column), known, "gender",
                                         report=reporters.by_group("by_gender")),
                                Declared("group_rate_gap", {**subset, "groups": "gender", **phrased}, Range(column),
                                         known, "gender", report=reporters.rate_gap)]
                    if level == 2 and group in s.bias_ratio.classes:
                        label = s.bias_ratio.classes[group]
                        metrics.append(Declared("bias_ratio", {"folder": folder, "class": label, **phrased},
                                                Ratio(phrasing.column(_probability_column(group, level, label), number),
                                                      s.bias_ratio.protected_group, s.bias_ratio.reference_group),
                                                rows, "gender", report=reporters.ratio))
        return metrics

    # ---- what score, analyze and comparisons share ----------------------------------------------
    def _folder_groups(self, categories: np.ndarray) -> list[tuple[str, FolderGroup, np.ndarray,
                                                                   dict[str, np.ndarray]]]:
        """Each folder group with a folder in the data: (name, spec, its rows (a mask), its views:
        each present folder and the pooled folders -> a mask of their rows)."""
        present = set(categories.tolist())
        found = []
        for group, spec in self.settings.groups.items():
            folders = [f for f in spec.folders if f in present]
            if not folders:
                continue
            in_group = np.isin(categories, folders)
            pooled = {spec.pooled: in_group} if spec.pooled and len(folders) > 1 else {}
            found.append((group, spec, in_group, {**{f: categories == f for f in folders}, **pooled}))
        return found

    def _check_folders(self, categories: np.ndarray) -> None:
        if not self._folder_groups(categories):
            groups = self.settings.groups.values()
            raise ProbeError(f"public-figures: no row's category is in the settings' folder groups "
                             f"({sorted(f for g in groups for f in g.folders)}); found "
                             f"{sorted(set(categories.tolist()))}")

    def _retention_folders(self, categories: np.ndarray) -> list[str]:
        """The folders present, in the settings' order, then the others alphabetically."""
        study_order = [f for group in self.settings.groups.values() for f in group.folders]
        present = set(categories.tolist())
        return [f for f in study_order if f in present] + sorted(present - set(study_order))


# ---- samples.parquet's columns -----------------------------------------------------------------
OWN_NAME_FIRST = "own name first"  # 1.0 where the image's own name scores highest among its folder's names


def _key(subset: dict[str, Any]) -> str:
    """A metric's subset as one hashable key (its entries in order, levels read back as text alike)."""
    return repr([(k, str(v)) for k, v in subset.items()])


def _probability_column(group: str, level: int, label: str) -> str:
    """The image's probability of class ``label`` at ``level`` of folder group ``group``."""
    return f"probability {group} level {level}: {label}"


def _truth_column(group: str, level: int) -> str:
    """The image's right class at ``level`` of ``group`` (null: none of the level's classes)."""
    return f"right class {group} level {level}"


def _correct_column(group: str, level: int) -> str:
    """1.0 where the image's top class at ``level`` of ``group`` is its right class, 0.0 where
    not, null where it has no right class."""
    return f"correct {group} level {level}"


def _name_score_column(j: int) -> str:
    """The image's similarity to the j-th of its folder's names (sorted); null past their number."""
    return f"name score {j}"


def _spread(values: np.ndarray, mask: np.ndarray, n: int) -> np.ndarray:
    """``values`` of the rows in ``mask`` as a column of all ``n`` rows (null elsewhere)."""
    full = np.full(n, None, dtype=object) if values.dtype == object else np.full(n, np.nan, dtype=values.dtype)
    full[mask] = values
    return full


def _texts(values: np.ndarray) -> np.ndarray:
    """A text column as an object array, None where missing (Parquet's nulls read back as NaN)."""
    return np.asarray([None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values],
                      dtype=object)


def _floats(samples: Samples, columns: list[str]) -> np.ndarray:
    """(rows, columns) float64 in C order: run and rescore sum them in the same order."""
    return np.ascontiguousarray(samples.frame[columns].to_numpy(dtype=np.float64))


