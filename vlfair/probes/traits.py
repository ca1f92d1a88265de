"""The FairFace-traits study: trait confidences per race x gender, F-tests, Grad-CAM."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, Field

from vlfair.measures import reporters
from vlfair.outputs import Table
from vlfair.probes import phrasings as phrasing
from vlfair.probes.asking import Asking
from vlfair.probes.base import Context, Option, Output, Probe, ProbeError, UploadSpec, indistinguishable
from vlfair.probes.declared import Declared, FStatistic, Mean, evaluate, too_small
from vlfair.probes.grouping import Grouped
from vlfair.probes.registry import register
from vlfair.probes.scorers import Scorer, was_asked
from vlfair.probes.settings import (
    SEED,
    Bootstrap,
    Count,
    Flag,
    Float,
    Name,
    NonNegative,
    ProbeSettings,
    Settings,
    Text,
    distinct,
    placeholders,
    same_text,
)
from vlfair.samples import Samples


def _trait(value: str) -> str:
    if "/" in value:  # a pair is named positive/negative: smart/dumb
        raise ValueError("must not hold '/' (a pair is named positive/negative, e.g. smart/dumb)")
    return value


Trait = Annotated[Name, AfterValidator(_trait)]


def _opposed(pair: tuple[str, str]) -> tuple[str, str]:
    """Two different traits: a pair whose prompts are one text has confidences of 0.5 up to rounding,
    and its F-tests would test that noise."""
    positive, negative = pair
    if same_text(positive) == same_text(negative):
        raise ValueError(f"names one trait twice ({positive!r} and {negative!r}, case and spaces aside): its two "
                         "prompts are one text and its F-tests would measure rounding noise; give two different "
                         "traits")
    return pair


Pair = Annotated[tuple[Trait, Trait], AfterValidator(_opposed)]


def _pair(value: str) -> str:
    if value.count("/") != 1 or not all(word.strip() for word in value.split("/")):
        raise ValueError("must be two traits joined by '/', e.g. smart/dumb")
    positive, negative = value.split("/")
    _opposed((positive, negative))
    return value


class GradCam(Settings):
    """Grad-CAM overlays of the study's Figure 2: ``k`` random images of ``group`` whose confidence
    in the pair's positive trait exceeds ``min_confidence``."""

    pair: Annotated[Text, AfterValidator(_pair)]
    group: dict[Literal["race", "gender"], Name] = Field(default_factory=dict)
    k: Count = 5
    min_confidence: Float = Field(0.0, ge=0, le=1)


class GenerativeQuestion(Asking):
    """How a generative model is asked (the study measured CLIP only): ``question`` about each image,
    its two candidate answers the pair's two words, their probabilities renormalised over the pair
    (per answer token with ``normalize_length``, as lm-evaluation-harness's acc_norm); in the
    open-ended mode, the word its answer names (confidence 1 or 0)."""

    question: Annotated[Text, AfterValidator(placeholders("positive", "negative"))]


class TraitsSettings(ProbeSettings, Bootstrap, Grouped, phrasing.Phrased, phrasing.Asked):
    prompt: Annotated[Text, AfterValidator(placeholders("trait"))] = Field(
        description="the trait prompt, with {trait}")
    pairs: Annotated[list[Pair], AfterValidator(distinct(lambda pair: tuple(map(same_text, pair)),
                                                         "case and spaces aside"))] = Field(
        min_length=1, description="(positive, negative) trait pairs")
    temperature: Float | None = Field(gt=0, description="the softmax scale, a number > 0; null: the model's logit "
                                                        "scale; 1: the study's literal formula")
    per_cell: Count | None = Field(description="rows drawn per race x gender cell, a whole number >= 1; null: "
                                               "every row")
    allow_short: Flag = Field(description="take every row of a cell with fewer than per_cell rows instead of stopping")
    gradcam: GradCam | None = Field(description="Grad-CAM overlays (pair, group, k, min_confidence); null: none")
    generative: GenerativeQuestion = Field(description="the question a generative model (lvlm:) answers about each "
                                                       "image, with {positive} and {negative}")
    seed: NonNegative = Field(
        SEED, description="the random seed of the per-cell sample and of every resampling, a whole number >= 0 "
                          "(not null: a run must draw the same sample again)")
    phrasings: phrasing.setting("trait") = phrasing.field("prompt, each with {trait}")  # type: ignore[valid-type]
    question_phrasings: phrasing.setting("positive", "negative") = phrasing.question_field(  # type: ignore[valid-type]
        "with {positive} and {negative}")
    answer_formats: Annotated[list[phrasing.Format], AfterValidator(distinct())] = phrasing.FORMATS_FIELD


@register
class TraitsProbe(Probe):
    name = "traits"
    Settings = TraitsSettings
    position = 1  # study 001
    published_file = "traits.yaml"
    asks_questions = True  # traits.yaml's generative section
    model_settings = ("generative",)  # how a generative model is asked belongs to that model, as its spec does
    help = "trait confidences on FairFace with F-tests across races and genders"
    description = ("Confidence in each positive trait over its negative ('smart' over 'dumb') per race and gender on "
                   "FairFace adults, one-way F-tests within each stratum (the traits study's Tables 1-4) and Grad-CAM "
                   "overlays. Data: the fairface schema.")
    schemas = ("fairface",)
    required_columns = {"fairface": ("image", "race", "gender")}
    options = (
        Option("--temperature", "temperature", "softmax temperature (default: the model's logit scale)", float),
        Option("--per-cell", "per_cell", "rows drawn per race x gender cell (default 2000, the study's)", int),
        Option("--allow-short", "allow_short", "take every row of a cell with fewer than --per-cell rows instead of "
                                               "stopping", action="store_true"),
    )
    upload = UploadSpec("fairface", ("race", "gender"), ("race", "gender"), file_column="file")
    settings: TraitsSettings

    def default_subsets(self, schema: str) -> list[str | None]:
        return ["adults"]  # the study's adults aged 20-60

    def draws_with_seed(self) -> bool:
        return self.settings.per_cell is not None  # the seed draws the per-cell sample

    def settings_for(self, scorer: Scorer) -> tuple[TraitsSettings, list[str]]:
        phrasing.refuse_ways("traits", self.settings, scorer)
        return self.settings, []

    def score(self, ctx: Context, schema: str | None) -> Samples:
        sampling = self._sample(ctx)  # before embedding: only the drawn rows are embedded
        return ctx.scorer.pick({"asks": self._score_generative, "embeds": self._score_embedded})(ctx, sampling)

    def _score_embedded(self, ctx: Context, sampling: dict | None) -> Samples:
        """The study's: the confidence in the positive trait is the softmax of the image's cosines with the
        pair's prompts, at the model's logit scale (or ``temperature``)."""
        import pandas as pd

        s = self.settings
        images, rows = ctx.images()
        tau = float(ctx.encoder.logit_scale if s.temperature is None else s.temperature)
        if not tau > 0:  # tau = 0 makes every confidence 0.5: nothing would be measured
            raise ProbeError(f"traits: temperature must be > 0 (the softmax scale; 1 is the study's literal formula), "
                             f"got {tau:g}")
        columns = {**ctx.identity(rows), "race": ctx.column("race", rows),
                   "gender": ctx.column("gender", rows)}
        warnings, unread = [], []
        for positive, negative in s.pairs:
            prompts = [s.prompt.format(trait=positive), s.prompt.format(trait=negative)]
            text = ctx.texts(prompts)
            same = indistinguishable(prompts, text)
            if same:  # its confidences would be 0.5 up to rounding, and its F-tests would test that noise
                unread.append(f"pair {positive}/{negative}: {same}")
                continue
            logits = -tau * (images @ (text[0] - text[1]))
            columns[_confidence_column(positive, negative)] = 1.0 / (1.0 + np.exp(logits))
            for number, other in enumerate(s.phrasings, start=2):  # the same images with each other phrasing
                prompts = [other.format(trait=positive), other.format(trait=negative)]
                text = ctx.texts(prompts)
                if indistinguishable(prompts, text):
                    warnings.append(f"pair {positive}/{negative}, phrasing {number}: its two prompts are one text to "
                                    "the model; left out of that phrasing and of the pooled metrics")
                    continue
                logits = -tau * (images @ (text[0] - text[1]))
                columns[phrasing.column(_confidence_column(positive, negative), number)] = 1.0 / (1.0 + np.exp(logits))
        if len(unread) == len(s.pairs):  # nothing left to measure: a run must not end with no number
            raise ProbeError(f"traits: {'; '.join(unread)}; its F-tests would measure rounding noise: give two "
                             "traits the model reads as different words")
        warnings += [f"{reason}; left out (its F-tests would measure rounding noise)" for reason in unread]
        if sampling and sampling["short_cells"]:
            warnings.append("cells with fewer than the asked rows (all taken, --allow-short): "
                            + _listed(sampling["short_cells"]))
        self._scored: tuple[np.ndarray, np.ndarray] | None = (images, rows)  # Grad-CAM
        facts: dict[str, Any] = {"temperature": tau,
                                 "temperature_source": "logit_scale" if s.temperature is None else "settings",
                 "prompt": s.prompt, "sampling": sampling}
        if s.phrasings:
            facts["phrasings"] = [s.prompt, *s.phrasings]
        return Samples(pd.DataFrame(columns), facts, warnings)

    def _score_generative(self, ctx: Context, sampling: dict | None) -> Samples:
        """Each pair asked as the question, the two words its answers: the confidence in the positive
        trait is its probability renormalised over the pair."""
        import pandas as pd

        s, asked = self.settings, self.settings.generative
        columns: dict = {}
        # the question in its answer format (phrasing 1), then every other phrasing of it in every format
        ways = phrasing.ways(asked, s.question_phrasings, s.answer_formats)
        for mode in dict.fromkeys(way.mode for _, way in ways):  # every pair and question of a mode in one pass
            ctx.ask_together([(way.question.format(positive=positive, negative=negative), [positive, negative])
                              for _, way in ways if way.mode == mode for positive, negative in s.pairs],
                             next(way for _, way in ways if way.mode == mode))
        for number, (_label, way) in enumerate(ways, start=1):
            questions = [way.question.format(positive=positive, negative=negative) for positive, negative in s.pairs]
            for (positive, negative), question in zip(s.pairs, questions):
                found = ctx.text_scores([positive, negative], way, question=question)
                if not columns:
                    columns = {**ctx.identity(found.rows), "race": ctx.column("race", found.rows),
                               "gender": ctx.column("gender", found.rows)}
                columns[phrasing.column(_confidence_column(positive, negative), number)] = found.probabilities[:, 0]
        warnings = []
        if sampling and sampling["short_cells"]:
            warnings.append("cells with fewer than the asked rows (all taken, --allow-short): "
                            + _listed(sampling["short_cells"]))
        if s.gradcam:
            warnings.append("Grad-CAM: skipped, it reads a contrastive encoder's image tower (a generative model has "
                            "none to explain this way)")
        if s.temperature is not None:
            warnings.append(f"temperature {s.temperature:g}: not used, it scales a contrastive model's similarities")
        self._scored = None  # Grad-CAM reads a contrastive encoder's image tower
        facts = ctx.scorer.asked_facts(question=asked.question, normalize_length=asked.normalize_length,
                                       mode=asked.mode, prompt=s.prompt, sampling=sampling)
        if len(ways) > 1:
            facts["phrasings"] = [label for label, _ in ways]
        return Samples(pd.DataFrame(columns), facts, warnings)

    def analyze(self, samples: Samples) -> Output:
        import pandas as pd

        from vlfair.report import plots

        s = self.settings
        out = Output(settings=dict(samples.facts), notes=list(s.notes), warnings=list(samples.warnings))
        if was_asked(samples.facts):
            if samples.facts.get("mode") == "generate":
                out.notes.append(f"confidence = 1 where the model's own answer to {samples.facts['question']!r} names "
                                 "the positive word, 0 where it names the negative one")
            else:
                out.notes.append(f"confidence = P(positive) / (P(positive) + P(negative)), P(word) the model's "
                                 f"probability of the word as its answer to {samples.facts['question']!r}"
                                 + (" per answer token" if samples.facts["normalize_length"] else ""))
        else:
            tau = samples.facts["temperature"]
            out.notes.append(f"confidence = softmax({tau:g} * [cos(x, pos), cos(x, neg)])[0]"
                             + (" (the model's logit scale)" if samples.facts["temperature_source"] == "logit_scale"
                                else ""))
        declared = self.declare(samples)
        metrics = evaluate(samples, [*declared, *phrasing.pooled(declared, samples)], self.facts, **s.evaluation)
        out.metrics = [m for m in metrics if "phrasing" not in m.subset]  # the study's, then each other phrasing's
        out.metrics += [m for m in metrics if "phrasing" in m.subset]
        tests = [m for m in out.metrics if m.name == "trait_anova" and "phrasing" not in m.subset]
        measured = {_subset_key(m.subset) for m in tests}
        for metric in declared:
            if metric.name == "trait_anova" and "phrasing" not in metric.subset and _subset_key(
                    metric.subset) not in measured:
                within = _within(metric.subset)
                statistic = metric.statistic
                assert isinstance(statistic, FStatistic), "traits declares its F-tests as FStatistic"
                rows = metric.rows
                why = too_small(samples.column(_ACROSS[within])[rows], samples.column(statistic.column)[rows])
                out.warnings.append(f"{metric.subset['trait']} across {_ACROSS[within]}s within {within} "
                                    f"{metric.subset[within]}: {why}; no F-test")
        for within, across in _ACROSS.items():  # a stratum of one group has nothing to compare: not declared
            labels, groups = samples.column(within), samples.column(across)
            for stratum in sorted(set(labels.tolist()), key=str):
                if len(set(groups[labels == stratum].tolist())) < 2:
                    out.warnings.append(f"across {across}s within {within} {stratum}: "
                                        f"{too_small(groups[labels == stratum])}; no F-test")
        f_rows = [{"trait": m.subset["trait"], "within": f"{_within(m.subset)}={m.subset[_within(m.subset)]}",
                   "across": _ACROSS[_within(m.subset)], "F": m.value,
                   # the study prints 0.00e+00 for p below float64's range; the report reads the log10
                   "p": m.p_value, "log10 p": m.details["log10_p_value"], "eta_squared": m.details["eta_squared"]}
                  for m in tests]
        for positive, negative in _measured_pairs(s.pairs, samples):
            # the study's figure: race x gender cells' mean confidences, from the F-tests across races
            within_gender = [m for m in tests if m.subset["trait"] == f"{positive}/{negative}" and "gender" in m.subset]
            if not within_gender:
                continue
            means = pd.DataFrame({m.subset["gender"]: m.details["group_means"] for m in within_gender})
            cis = {m.subset["gender"]: m.details["group_means_ci"] for m in within_gender}
            out.tables[f"confidence_{positive}_{negative}"] = means.rename_axis("race")
            errors = None if not all(cis.values()) else pd.DataFrame(
                {g: pd.Series(ci) for g, ci in cis.items()}).reindex(means.index)
            out.figure(f"confidence_{positive}_{negative}", plots.grouped_bars, means, errors,
                       f"P('{positive}' over '{negative}') by race and gender", "confidence", xlabel="race",
                       ylim=(0, 1), legend_title="gender")
        if phrasing.count(samples) > 1:
            self._phrasings(samples, out)
        undefined = [f"{r['trait']} {r['within']}" for r in f_rows if np.isnan(r["F"])]
        out.tables["f_tests"] = Table(pd.DataFrame(f_rows), footnotes=[  # 0/0: said under the table, not a bare NaN
            f"F and p are NaN for {', '.join(undefined)}: every confidence there is the same (zero variance within "
            "and between the groups), so F = 0/0 and there is no test."] if undefined else [])
        return out

    def _phrasings(self, samples: Samples, out: Output) -> None:
        """An extension of vlfair's (issue 46): the phrasings table, each F-test's F with every phrasing and pooled
        (:mod:`vlfair.probes.phrasings`), found in a phrasing where its test finds a difference (p < 1 -
        confidence)."""
        alpha = 1 - self.settings.confidence
        found = phrasing.found_table(
            out.metrics, "trait_anova",
            lambda subset: {"trait": subset["trait"], "within": f"{_within(subset)}={subset[_within(subset)]}"},
            samples.facts["phrasings"], lambda metric, _pooled: metric.p_value is not None and metric.p_value < alpha,
            "Each F-test's F", f"F-test finds a difference (p < {alpha:g})")
        if found is not None:
            out.tables["phrasings"] = found

    def illustrate(self, ctx: Context, samples: Samples, out: Output) -> None:
        if self.settings.gradcam and self._scored is not None:
            images, rows = self._scored
            self._gradcam(ctx, rows, samples.column("race"), samples.column("gender"), images,
                          samples.facts["temperature"], out)

    def declare(self, samples: Samples) -> list[Declared]:
        """Per pair: F across races within each gender, then each race's mean confidence within each gender (the
        study's figure), then F across genders within each race, each resampled within its groups as
        trait_anova is; with other phrasings of the prompt, the same of each (compared phrasing by phrasing)."""
        metrics = []
        for number in range(1, phrasing.count(samples) + 1):
            metrics += self._declared(samples, number)
        return metrics

    def _declared(self, samples: Samples, number: int) -> list[Declared]:
        phrased = {} if number == 1 else {"phrasing": number}
        metrics = []
        for positive, negative in _measured_pairs(self.settings.pairs, samples):
            column = phrasing.column(_confidence_column(positive, negative), number)
            if column not in samples.frame.columns:  # its two prompts were one text with this phrasing
                continue
            trait = f"{positive}/{negative}"
            for within, across in _ACROSS.items():
                labels, groups = samples.column(within), samples.column(across)
                confidences = []
                for stratum in sorted(set(labels.tolist()), key=str):
                    rows = np.flatnonzero(labels == stratum)
                    present = sorted(set(groups[rows].tolist()))
                    if len(present) < 2:  # nothing to compare across
                        continue
                    metrics.append(Declared("trait_anova", {"trait": trait, within: stratum, **phrased},
                                            FStatistic(column), rows, across, report=reporters.anova))
                    if within == "gender":  # the study's figure: each race's mean confidence within a gender
                        confidences += [Declared("trait_confidence", {"trait": trait, "race": race, "gender": stratum,
                                                                      **phrased}, Mean(column, race), rows, across)
                                        for race in present]
                metrics += confidences
        return metrics

    def _sample(self, ctx: Context) -> dict | None:
        """Draw ``per_cell`` rows from every race x gender cell (the study's n = 2000); the record
        (n per cell, seed, the drawn rows' counts, short cells) goes into results.json; each drawn row's
        index in the dataset given becomes ``ctx.source_rows``."""
        from vlfair.data import balanced_sample, sampling_record

        n, seed = self.settings.per_cell, self.settings.seed
        if n is None:
            return None
        indexed = ctx.dataset.add_column("_vlfair_row", list(range(ctx.dataset.num_rows)))
        sample = balanced_sample(indexed, n, ("race", "gender"), seed=seed, allow_fewer=True)
        record = sampling_record(sample)
        assert record is not None  # balanced_sample's output always carries its record
        if record["short_cells"] and not self.settings.allow_short:
            raise ProbeError(f"traits: {len(record['short_cells'])} race x gender cell(s) have fewer than {n} rows "
                             f"({_listed(record['short_cells'])}); use more data (e.g. --split train+validation), a "
                             "smaller --per-cell (setting per_cell), or --allow-short (allow_short) to take every row "
                             "of the short cells")
        counts: dict[str, dict[str, int]] = {}
        for (race, gender), count in Counter(zip(sample["race"][:], sample["gender"][:])).items():
            counts.setdefault(str(gender), {})[str(race)] = count
        ctx.dataset = sample.remove_columns("_vlfair_row")
        ctx.source_rows = sample["_vlfair_row"][:]  # what samples, skipped rows and refusals name
        return {"per_cell": n, "seed": seed, "rows": sample.num_rows, "of_rows": indexed.num_rows,
                "cell_counts": counts, "short_cells": record["short_cells"]}

    def _gradcam(self, ctx, rows, races, genders, images, tau: float, out: Output) -> None:
        """Overlays for ``k`` images of the group drawn at random (seeded) among those whose
        confidence in the positive trait exceeds ``min_confidence``, as in the study's Figure 2."""
        import pandas as pd

        from vlfair.explain import NotAViT, gradcam, overlay_figure
        from vlfair.measures.ties import exceeds

        spec = self.settings.gradcam
        assert spec is not None  # run() calls this only with Grad-CAM settings
        positive, negative = spec.pair.split("/")
        wanted = spec.group
        k, threshold = spec.k, spec.min_confidence
        mask = np.ones(len(rows), dtype=bool)
        for column, value in wanted.items():
            mask &= {"race": races, "gender": genders}[column] == value
        group = ", ".join(f"{column}={value}" for column, value in wanted.items())
        if not mask.any():
            out.warnings.append(f"Grad-CAM skipped: no image of group {wanted}")
            return
        text = ctx.texts([self.settings.prompt.format(trait=positive), self.settings.prompt.format(trait=negative)])
        confidence = 1.0 / (1.0 + np.exp(-tau * (images @ (text[0] - text[1]))))
        # the study's "> 66 %", on which no rounding moves an image across (vlfair.measures.ties)
        eligible = np.flatnonzero(mask & exceeds(confidence, threshold))
        if eligible.size < k:
            out.warnings.append(f"Grad-CAM: {eligible.size} image(s) of {group} have a confidence in '{positive}' "
                                f"above {threshold:g}; {k} were asked for")
            if eligible.size == 0:
                return
        chosen = np.sort(np.random.default_rng(self.settings.seed).choice(eligible, min(k, eligible.size),
                                                                            replace=False))
        pictures = [ctx.dataset[int(rows[i])]["image"] for i in chosen]
        try:
            _, maps = gradcam(ctx.encoder, pictures, text[0], text[1])
        except NotAViT as exc:
            out.warnings.append(f"Grad-CAM skipped: {exc}")
            return
        original = ctx.given_rows([rows[i] for i in chosen])  # rows of the dataset given, before sampling
        out.tables["gradcam"] = pd.DataFrame({"row": original,
                                              "confidence": [float(confidence[i]) for i in chosen]}).set_index("row")
        out.figure("gradcam", overlay_figure, ctx.encoder, pictures, maps,
                   [f"row {r}: {confidence[i]:.1%}" for r, i in zip(original, chosen)],
                   f"Grad-CAM of '{positive}' over '{negative}' ({group}; random, confidence > {threshold:g})")


_ACROSS = {"gender": "race", "race": "gender"}  # each F-test's stratum column -> the groups it compares


def _within(subset: Mapping[str, Any]) -> str:
    """The stratum column an F-test's subset names."""
    return next(key for key in _ACROSS if key in subset)


def _subset_key(subset: Mapping[str, Any]) -> tuple[str, str, str]:
    """(trait, within, stratum) of an F-test's subset."""
    within = _within(subset)
    return subset["trait"], within, str(subset[within])


def _confidence_column(positive: str, negative: str) -> str:
    """samples.parquet's column of each image's confidence in ``positive`` over ``negative``."""
    return f"confidence {positive}/{negative}"


def _measured_pairs(pairs: list, samples: Samples) -> list:
    """The pairs ``samples`` hold confidences for: a pair whose two prompts the model read as one
    was left out when scoring (and said so in the run's warnings)."""
    return [(p, n) for p, n in pairs if _confidence_column(p, n) in samples.frame.columns]


def _listed(short_cells: list[dict]) -> str:
    """``balanced_sample``'s short cells as "race/gender: rows; ..."."""
    return "; ".join(f"{c['cell'][0]}/{c['cell'][1]}: {c['rows']}" for c in short_cells)
