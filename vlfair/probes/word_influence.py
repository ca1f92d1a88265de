"""The text-to-image study: which prompt word skews the generated group distribution."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from vlfair.defaults import BOOTSTRAP, MAX_BOOTSTRAP
from vlfair.measures import reporters
from vlfair.outputs import Metric
from vlfair.probes import phrasings as phrasing
from vlfair.probes.asking import Asking
from vlfair.probes.base import Context, Option, Output, Probe, ProbeError
from vlfair.probes.declared import Custom, Declared, evaluate
from vlfair.probes.registry import register
from vlfair.probes.scorers import Scorer
from vlfair.probes.settings import (
    SEED,
    Confidence,
    Count,
    Flag,
    Float,
    Name,
    NonNegative,
    ProbeSettings,
    Settings,
    same_text,
)
from vlfair.samples import Samples

if TYPE_CHECKING:
    import pandas as pd

    from vlfair.paired import Moments
    from vlfair.t2i.influence import PromptInfluence


class Generator(Settings):
    """The text-to-image pipeline (``vlfair.t2i.generators.DiffusersGenerator``'s arguments)."""

    spec: Name
    steps: Count = 50
    guidance: Float = 7.5
    size: Count | None = None
    batch_size: Count = 8
    device: Name = "auto"
    # generators.generator_dtype: auto is bf16 (or float16) on a GPU and float32 on a CPU; bfloat16 is honoured on
    # a CPU too, float16 there refused
    dtype: Literal["auto", "bfloat16", "float16"] = "auto"
    use_safetensors: Flag = True


class Transmuter(Settings):
    """Which transmuter rewrites a word (``vlfair.t2i.transmuters``): mlm with its masked LM, or lexicon;
    other keys are passed to it."""

    model_config = ConfigDict(extra="allow")

    name: Literal["mlm", "lexicon"]
    model: Name | None = None


def _transmuter_option(value: str) -> dict[str, Any]:
    """--transmuter mlm, mlm:MODEL or lexicon."""
    name, _, model = value.partition(":")
    return {"name": name, **({"model": model} if model else {})}


class WordInfluenceSettings(ProbeSettings, Confidence):
    prompts: list[Name] = Field(min_length=1, description="the prompts whose words are scored")
    large_scale: Flag = Field(description="the study's 150 prompts 'a [ADJECTIVE] [PERSON] at the [PLACE]' instead")
    generator: Generator = Field(description="the pipeline: spec, steps, guidance, size, batch_size")
    transmuter: Transmuter = Field(description="{name: mlm, model: ID} or {name: lexicon}")
    words: Literal["all", "content"] = Field(description="all: every word is scored; content: not articles and "
                                                         "prepositions")
    groups: dict[Name, Name] | None = Field(description="group -> classifier text; null: the study's male / female")
    target_group: Name = Field(description="influence = P_target(original) - P_target(word replaced); one of the "
                                          "groups")
    no_person: Name | None = Field(description="with groups: a text that marks an image without a person")
    candidates: Count = Field(description="transmuted prompts per replaced word")
    images_per_prompt: Count = Field(description="images per transmuted prompt")
    original_images: Count = Field(description="images of the original prompt")
    max_level: Count | None = Field(description="the highest level scored; null: every level and the Shapley value")
    max_images: Count = Field(description="refuse configurations that would generate more images per prompt")
    generative: Asking = Field(description="how a generative classifier (--model lvlm:...) is asked: the question, "
                                           "the groups' texts its candidate answers")
    seed: NonNegative = Field(
        SEED, description="the random seed of the generated images and of every resampling, a whole number >= 0 "
                          "(not null: a run must draw the same images again)")
    phrasings_bootstrap: NonNegative = Field(
        BOOTSTRAP, le=MAX_BOOTSTRAP,
        description=f"bootstrap resamples of a metric pooled over phrasings, a whole number from 0 to "
                    f"{MAX_BOOTSTRAP:,} (the study's own intervals, and so every other one, are Hoeffding's and "
                    "exact binomial ones)")
    phrasings: phrasing.setting("") = phrasing.field(  # type: ignore[valid-type]
        "the classifier's group texts, each with {} where a group's text goes")
    question_phrasings: phrasing.questions() = Field(  # type: ignore[valid-type]
        default_factory=list, description="other phrasings of a generative classifier's question "
                                          "(generative.question): each with each phrasing of the texts is one more "
                                          "way of labelling the images, every metric reported per way and pooled")

    @model_validator(mode="after")
    def _phrasings_are_new(self) -> WordInfluenceSettings:
        phrasing.check_not_prompt(type(self).__name__, STUDY_TEXTS, self.phrasings)
        phrasing.check_new(type(self).__name__, "question_phrasings", self.generative.question,
                           self.question_phrasings, "generative.question")
        return self

    @property
    def ways(self) -> list[str]:
        """Each way the classifier labels the images, named: each question (a generative classifier's) with each
        phrasing of the texts, the study's first ("{}": the texts themselves)."""
        templates = [STUDY_TEXTS, *self.phrasings]
        if not self.question_phrasings:
            return templates
        return [f"{question} [{template}]" for question in [self.generative.question, *self.question_phrasings]
                for template in templates]

    @field_validator("groups")
    @classmethod
    def _distinct_texts(cls, groups: dict[str, str] | None) -> dict[str, str] | None:
        """At least two groups, each with its own text: groups with one text (case and spaces aside)
        split every image between them by rounding noise."""
        if groups is None:
            return groups
        if len(groups) < 2:
            raise ValueError(f"needs at least 2 groups to classify images into, got {list(groups)}")
        _check_texts_differ(list(groups.items()))
        return groups

    @field_validator("no_person")
    @classmethod
    def _not_a_group_text(cls, value: str | None, info: ValidationInfo) -> str | None:
        groups = info.data.get("groups")
        if value is not None and groups:
            _check_texts_differ([*groups.items(), ("no person", value)])
        return value

    @field_validator("target_group")
    @classmethod
    def _a_known_group(cls, value: str, info: ValidationInfo) -> str:
        groups = info.data.get("groups")  # null: the classifier's own (the study's), checked when it loads
        if groups is not None and value not in groups:
            raise ValueError(f"is not one of the groups {list(groups)}")
        return value


def _check_texts_differ(texts: list[tuple[str, str]]) -> None:
    """(name, classifier text) pairs whose texts all differ (case and spaces aside)."""
    seen: dict[str, str] = {}
    for name, text in texts:
        other = seen.setdefault(same_text(text), name)
        if other != name:
            raise ValueError(f"{other!r} and {name!r} have one classifier text ({text!r}, case and spaces aside): "
                             "the classifier could not tell them apart; give each its own text")


@register
class WordInfluenceProbe(Probe):
    name = "word-influence"
    Settings = WordInfluenceSettings
    position = 2  # study 002
    published_file = "word_influence.yaml"
    help = "word-level influence on a text-to-image model's group skew"
    description = ("Generates images for a prompt and for prompts with one word replaced, classifies each image's "
                   "group with --model, and reports each word's influence on the share of the target group (the "
                   "word-influence study's Table 1). No dataset: it makes its own images.")
    needs_dataset = False
    model_settings = ("generator", "generative")  # the text-to-image model measured, as --model is for the other
    # probes; and how a generative classifier is asked, which belongs to that classifier
    asks_questions = True  # word_influence.yaml's generative section: a generative model can be the classifier
    options = (
        Option("--generator", "generator.spec", "text-to-image pipeline id or directory (default "
                                                "CompVis/stable-diffusion-v1-4)"),
        Option("--steps", "generator.steps", "diffusion steps per image (default 50)", int),
        Option("--guidance", "generator.guidance", "classifier-free guidance scale (default 7.5)", float),
        Option("--size", "generator.size", "image height and width (default: the pipeline's)", int),
        Option("--prompt", "prompts", "a prompt to explain (repeatable; default the study's)", action="append"),
        Option("--large-scale", "large_scale", "the study's 150 prompts", action="store_true"),
        Option("--transmuter", "transmuter", "mlm (default, bert-base-uncased), mlm:MODEL, or lexicon",
               convert=_transmuter_option),
        Option("--max-images", "max_images", "refuse configurations needing more images per prompt", int),
    )
    options_title = "word-influence (--model is the group classifier's encoder)"
    settings: WordInfluenceSettings

    def draws_with_seed(self) -> bool:
        return True  # the seed draws every generated image

    def intervals_note(self) -> str:  # no resampling: Hoeffding's bound and exact binomial intervals
        return (f"Intervals: {self.settings.confidence:.0%} Hoeffding bounds on each influence (the least-sampled "
                "variant's image count); shares have exact Clopper-Pearson intervals"
                + ("; a metric pooled over phrasings, a two-level bootstrap interval (the images within their "
                   "variants, and the phrasings)." if len(self.settings.ways) > 1 else "."))

    def settings_for(self, scorer: Scorer) -> tuple[WordInfluenceSettings, list[str]]:
        s = self.settings
        if scorer.asks and s.generative.mode == "generate":
            raise ProbeError("word-influence: setting generative.mode = 'generate': the classifier picks the most "
                             "likely group text; use 'likelihood'")
        if s.question_phrasings and not scorer.asks:
            raise ProbeError("word-influence: setting question_phrasings asks a generative classifier (lvlm:) its "
                             "question other ways; a contrastive classifier reads the texts: use phrasings")
        return s, []

    def score(self, ctx: Context, schema: str | None) -> Samples:
        """Generate every prompt's images (original and transmuted) and classify them: one sample per
        image, with its prompt, variant, transmuted prompt, sample index and seed, and the group the
        classifier gave (one indicator column per group, and ``no person``)."""
        from vlfair.t2i.classifier import GroupClassifier
        from vlfair.t2i.generators import DiffusersGenerator, ImageCache
        from vlfair.t2i.influence import large_scale_prompts, run_prompt
        from vlfair.t2i.transmuters import make_transmuter

        s = self.settings
        generator = self.components.get("generator") or DiffusersGenerator(**s.generator.model_dump())
        transmuter = self.components.get("transmuter") or make_transmuter(**s.transmuter.model_dump(exclude_none=True))
        classify = self.components.get("classifier")
        if classify is None:  # the model's own: a generative model's answers, or an encoder's cosines
            classify = GroupClassifier(ctx.encoder, s.groups, s.no_person, question=s.generative.question,
                                       phrasings=s.phrasings, questions=s.question_phrasings,
                                       asks=ctx.scorer.pick({"asks": True, "embeds": False}))
        phrased = len(s.ways) > 1
        every_phrasing = getattr(classify, "every_phrasing", None) if phrased else None
        if phrased and every_phrasing is None:
            raise ProbeError(f"word-influence: settings phrasings and question_phrasings rephrase the classifier's "
                             f"texts and question; the classifier {type(classify).__name__} has no "
                             "every_phrasing(images) to label the images each way: leave them empty, or give it "
                             "that method")
        groups = getattr(classify, "groups", None)
        if groups is not None and s.target_group not in groups:
            raise ProbeError(f"word-influence: target_group {s.target_group!r} is not one of the groups {list(groups)}")
        prompts = large_scale_prompts() if s.large_scale else list(s.prompts)
        repeated = sorted({p for p in prompts if prompts.count(p) > 1})
        if repeated:  # a prompt's samples are its images: a repeat would measure the same images twice
            raise ProbeError(f"word-influence: prompt(s) {repeated} given more than once; give each prompt once")
        cache = ImageCache(generator, ctx.cache_dir, base_seed=s.seed)
        results = [run_prompt(prompt, transmuter, cache, classify, s.target_group, positions=s.words,
                              max_level=s.max_level, candidates=s.candidates, images_per_prompt=s.images_per_prompt,
                              original_images=s.original_images, confidence=s.confidence, max_images=s.max_images,
                              every_phrasing=every_phrasing)
                   for prompt in prompts]
        facts = {"generator": generator.identity(), "transmuter": transmuter.identity(),
                 "target_group": s.target_group, "words": s.words, "candidates": s.candidates,
                 "images_per_prompt": s.images_per_prompt, "original_images": s.original_images,
                 "groups": groups, "large_scale": s.large_scale, "generator_calls": cache.calls,
                 "images_used": sum(r.images_used for r in results),
                 "no_person_images": sum(sum(r.no_person.values()) for r in results)}
        if phrased:
            facts["phrasings"] = s.ways
        identity = generator.identity()  # a readable name: the pipeline, or the callable's name, never a dict
        self._scored = (results, identity.get("pipeline") or identity.get("callable") or type(generator).__name__)
        for r in results:  # a classifier component's every_phrasing: one label per image each way
            if phrased and [len(found) for found in r.phrased_labels] != [len(r.labels)] * (len(s.ways) - 1):
                raise ProbeError(f"word-influence: the classifier {type(classify).__name__}'s every_phrasing labelled "
                                 f"{len(r.labels)} images {len(r.phrased_labels) + 1} way(s), with "
                                 f"{[len(r.labels), *map(len, r.phrased_labels)]} labels; the settings ask for "
                                 f"{len(s.ways)} ways ({s.ways}), each labelling every image")
        known = list(groups) if groups is not None else None
        return Samples(_frame(results, known, s.target_group, s.seed, len(s.ways)), facts)

    def analyze(self, samples: Samples) -> Output:
        s = self.settings
        facts = samples.facts
        out = Output(settings=dict(facts), notes=list(s.notes), warnings=list(samples.warnings))
        # the published Table 1 is Stable Diffusion's: compare by the generator, not the classifier
        out.published_model = facts["generator"].get("pipeline")
        known = _known_groups(samples)
        prompts = self._prompts(samples)
        declared, untallied = self._every_phrasing(samples, prompts)
        out.warnings += untallied
        pooled = [] if untallied else phrasing.pool(declared, phrasing.count(samples))
        # each metric's reporter gives the study's Hoeffding or exact binomial interval; only a metric pooled over
        # phrasings has its interval resampled (the images within their variants, and the phrasings)
        out.metrics = evaluate(samples, [*declared, *pooled], self.facts,
                               bootstrap=s.phrasings_bootstrap if pooled else 0, confidence=s.confidence, seed=s.seed)
        found = phrasing.found_table(
            out.metrics, "word_influence", lambda subset: {k: subset[k] for k in ("prompt", "word", "level")},
            facts.get("phrasings") or [], lambda metric, pooled: phrasing.excludes_0(metric.ci, pooled.value),
            f"Each word's influence on the share of {s.target_group}", "Hoeffding interval excludes 0")
        if found is not None:
            out.tables["phrasings"] = found
        results = [r for _, r in prompts]
        if len(results) == 1 or not s.large_scale:
            for r in results:
                self._variants(r, out, known)
        removed = facts["no_person_images"]
        calls, used = facts["generator_calls"], facts["images_used"]
        # the classifier's no-person class: its text (the settings' no_person; the study's classifier has none)
        out.notes.append(f"{calls} images generated, {used - calls} read from the image cache. "
                         + (f"vlfair's no-person class removed {removed} image(s) from the shares."
                            if s.no_person or removed else
                            "Every image was assigned to a group (no no-person class), as in the study."))
        out.notes.append(f"Influence for {s.target_group}: P_{s.target_group}(original) - P_{s.target_group}"
                         "(word replaced); positive = the word pushes the images toward the target group. The study's "
                         "Table 1: 'doctor' +0.373 for male, its share of female images rising from 0.160 to 0.533 "
                         "without it.")
        if s.large_scale:
            self._large_scale(out)
        # what was generated, from the facts (a rescore keeps the run's own description of it)
        scored = getattr(self, "_scored", None)
        source = (facts["generator"].get("pipeline") or facts["generator"].get("callable")
                  or (scored[1] if scored else "generator"))
        texts = [r.prompt for r in results]
        out.dataset = {"name": f"generated:{source}",
                       "split": None, "subset": None, "num_rows": used,
                       "fingerprint": hashlib.sha256(json.dumps([texts, facts["generator"], facts["transmuter"]],
                                                                sort_keys=True, default=str).encode()).hexdigest()[:16]}
        return out

    def illustrate(self, ctx: Context, samples: Samples, out: Output) -> None:
        """The generated images of each detailed prompt's original and single-word variants, each
        mosaic after its prompt's level plot."""
        from vlfair.figures import drawing

        results, _ = self._scored
        if not (len(results) == 1 or not self.settings.large_scale) or not drawing():
            return
        mosaics = {f"images_{_slug(r.prompt)}": self._grid(r) for r in results}
        figures: dict = {}
        for name, figure in out.figures.items():
            figures[name] = figure
            if name.startswith("levels_"):
                mosaic = "images_" + name.removeprefix("levels_")
                if mosaic in mosaics:
                    figures[mosaic] = mosaics.pop(mosaic)
        out.figures = {**figures, **mosaics}

    def declare(self, samples: Samples) -> list[Declared]:
        """Per prompt, over its images grouped by variant (each resampled within its variant): every
        variant's share of each group among its images of a person, and the word influences
        (differences of target shares, every level scored) and Shapley values made of them. With the
        study's 150 prompts, the mean influence of each word over the prompts that contain it, over all
        the images."""
        return self._every_phrasing(samples, self._prompts(samples))[0]

    def _every_phrasing(self, samples: Samples, prompts: list[tuple[np.ndarray, PromptInfluence]]
                        ) -> tuple[list[Declared], list[str]]:
        """The metrics with every phrasing of the classifier's texts (phrasing 1's of ``prompts``), and why a
        phrasing has none: its labels leave a variant no image of a person (the study's influence is then
        undefined), said, and then no metric is pooled over the phrasings."""
        declared = self._declared(samples, prompts)
        untallied = []
        for number in range(2, phrasing.count(samples) + 1):
            try:
                declared += self._declared(samples, self._prompts(samples, number), number)
            except ValueError as exc:
                untallied.append(f"phrasing {number} ({samples.facts['phrasings'][number - 1]}): {exc}; its metrics "
                                 "are left out, and no metric is pooled over the phrasings")
        return declared, untallied

    def _declared(self, samples: Samples, prompts: list[tuple[np.ndarray, PromptInfluence]], number: int = 1
                  ) -> list[Declared]:
        """:meth:`declare`'s metrics of ``prompts`` (each one's rows and tally) with phrasing ``number`` of the
        classifier's texts (its subsets say which from 2 on), each with the interval its study gives one run:
        Hoeffding's bound on an influence, an exact binomial interval on a share."""
        s = self.settings
        known = _known_groups(samples)
        target = s.target_group
        metrics: list[Declared] = []
        for rows, r in prompts:
            shown = self._groups(r, known)
            groups = [target] + [g for g in shown if g != target]
            # one _VariantShares per prompt: its statistics read the shares computed once per resample
            shares = _VariantShares(tuple(phrasing.column(c, number) for c in (*map(_group_column, groups),
                                                                                 NO_PERSON_COLUMN)))
            keys = [_key(v.replaced) for v in r.variants]
            on: dict[str, Any] = {"rows": rows, "group": "replaced", "order": keys}
            half = r.result["levels_ci_half_width"]
            levels: dict[str, list[Custom]] = {}
            for level in r.result["levels"]:
                levels[level] = [shares.influence(int(level), i, len(r.words), keys) for i in range(len(r.words))]
                metrics += [Declared("word_influence", {"prompt": r.prompt, "word": word, "level": int(level),
                                                        "group": target}, influence,
                                     report=_within(half[level], method="hoeffding"), **on)
                            for word, influence in zip(r.words, levels[level])]
            if r.result["shapley"] is not None:
                width = float(np.mean(list(half.values())))  # the mean of levels errs by at most their mean bound
                metrics += [Declared("word_influence_shapley", {"prompt": r.prompt, "word": word},
                                     shares.mean_of([levels[level][i] for level in r.result["levels"]]),
                                     report=_within(width), **on)
                            for i, word in enumerate(r.words)]
            for v, (key, variant) in enumerate(zip(keys, r.variants)):
                name = _variant_name(variant.replaced, r.words)
                counted, by_group = r.counts.get(key, 0), r.group_counts.get(key, {})
                metrics.append(Declared("target_share", {"prompt": r.prompt, "variant": name}, shares.share(v, 0),
                                        report=_share(by_group.get(target, 0), counted, {
                                            "images": counted, "no_person": r.no_person.get(key, 0),
                                            "prompts": variant.prompts, "group": target}), **on))
                metrics += [Declared("group_share", {"prompt": r.prompt, "variant": name, "group": g},
                                     shares.share(v, groups.index(g)), report=_share(by_group.get(g, 0), counted, {
                                         "images": counted, "count": by_group.get(g, 0)}), **on) for g in shown]
        if s.large_scale:
            metrics += self._mean_influences(samples, prompts, number)
        if number > 1:
            metrics = [dataclasses.replace(m, subset={**m.subset, "phrasing": number}) for m in metrics]
        return metrics

    def _mean_influences(self, samples: Samples, prompts: list[tuple[np.ndarray, PromptInfluence]], number: int
                         ) -> list[Declared]:
        """mean_word_influence: per word, over the images of the prompts that contain it, their
        original's and the word's level-1 variant's (each resampled within its prompt and variant, as
        the per-prompt metrics): the mean over those prompts of the difference of the two target shares."""
        from vlfair.t2i.influence import ADJECTIVES, PERSONS, PLACES, mean_word_influence

        results = [r for _, r in prompts]
        shapley = mean_word_influence(results, "shapley") if all(r.result["shapley"] for r in results) else {}
        pairs: dict[str, list[tuple[tuple, tuple]]] = {}  # word -> [(original's cell, variant's cell)]
        for _rows, r in prompts:
            for i, word in enumerate(r.words):
                pairs.setdefault(word, []).append(((r.prompt, ""), (r.prompt, _key((i,)))))
        prompt_of, replaced = samples.column("prompt"), samples.column("replaced")
        shares = _VariantShares(tuple(phrasing.column(c, number) for c in (
            _group_column(self.settings.target_group), NO_PERSON_COLUMN)))
        metrics = []
        for kind, vocabulary in (("adjective", ADJECTIVES), ("person", PERSONS), ("place", PLACES)):
            for word in vocabulary:
                if word not in pairs:
                    continue
                cells = list(dict.fromkeys(cell for pair in pairs[word] for cell in pair))  # an original may serve
                rows = np.concatenate([np.flatnonzero((prompt_of == p) & (replaced == k)) for p, k in cells])  # two
                metrics.append(Declared("mean_word_influence", {"word": word, "kind": kind},
                                        shares.mean_difference(*map(list, zip(*pairs[word]))),
                                        rows, ("prompt", "replaced"), order=cells,
                                        report=_within(None, mean_shapley=shapley.get(word), level=1)))
        return metrics

    def _prompts(self, samples: Samples, number: int = 1) -> list[tuple[np.ndarray, PromptInfluence]]:
        """Each prompt's rows (positions in the frame, in order) and its influence, recomputed from
        the samples alone exactly as the run computed it (with phrasing ``number``'s labels)."""
        from vlfair.t2i.influence import Request, Variant, tally

        frame = samples.frame
        prompts = frame["prompt"].to_numpy()
        replaced, candidate, variant = (frame[c].to_numpy() for c in ("replaced", "candidate", "variant"))
        texts, index = frame["variant_prompt"].to_numpy(), frame["image_index"].to_numpy()
        labels = _labels(samples, number)
        found = []
        for prompt in dict.fromkeys(prompts.tolist()):
            rows = np.flatnonzero(prompts == prompt)
            texts_of: dict[str, dict[int, str]] = {}
            names: dict[str, str] = {}
            requests = []
            for row in rows:
                key, k = str(replaced[row]), int(candidate[row])
                texts_of.setdefault(key, {})[k] = str(texts[row])
                names.setdefault(key, str(variant[row]))
                requests.append(Request(_positions(key), k, str(texts[row]), int(index[row])))
            variants = [Variant(_positions(key), [by[k] for k in sorted(by)]) for key, by in texts_of.items()]
            words = [names[str(i)] for i in range(sum(1 for key in texts_of if key and "," not in key))]
            r = tally(str(prompt), words, variants, requests, [str(labels[row]) for row in rows],
                      self.settings.target_group, confidence=self.settings.confidence)
            found.append((rows, r))
        return found

    def _variants(self, r: PromptInfluence, out: Output, known: list[str] | None) -> None:
        """A detailed prompt's table of its variants (images, shares, level-1 influence) and its level plot."""
        import pandas as pd

        rows = []
        for variant in r.variants:
            key = _key(variant.replaced)
            influence = (r.result["levels"]["1"][variant.replaced[0]] if len(variant.replaced) == 1 else None)
            counted, by_group = r.counts.get(key, 0), r.group_counts.get(key, {})
            rows.append({"variant": _variant_name(variant.replaced, r.words), "example prompt": variant.prompts[0],
                         "prompts": len(variant.prompts), "images": counted, "no person": r.no_person.get(key, 0),
                         **{f"share {g}": (by_group.get(g, 0) / counted if counted else None)
                            for g in self._groups(r, known)},
                         "influence (level 1)": influence})
        slug = _slug(r.prompt)
        out.tables[f"variants_{slug}"] = pd.DataFrame(rows).set_index("variant")
        out.figure(f"levels_{slug}", self._level_plot, r)

    def _groups(self, r: PromptInfluence, known: list[str] | None) -> list[str]:
        """The classifier's groups (its ``groups``, else those seen), the target first."""
        known = known or sorted({g for counts in r.group_counts.values() for g in counts})
        target = self.settings.target_group
        return [target] + [g for g in known if g != target] if target in known else list(known)

    def _level_plot(self, r):
        from vlfair.figures import subplots

        result = r.result
        figure, axis = subplots(figsize=(1.5 + 1.2 * len(r.words), 3.2))
        levels = sorted(result["levels"], key=int)
        width = 0.8 / len(levels)
        for k, level in enumerate(levels):
            x = np.arange(len(r.words)) + k * width - 0.4 + width / 2
            axis.bar(x, result["levels"][level], width, yerr=result["levels_ci_half_width"][level], capsize=2,
                     label=f"level {level}")
        if result["shapley"] is not None:
            axis.scatter(np.arange(len(r.words)), result["shapley"], color="k", zorder=3, label="Shapley")
        axis.axhline(0, color="gray", linewidth=0.8)
        axis.set_xticks(range(len(r.words)), r.words)
        axis.set_xlabel("word replaced")
        axis.set_ylabel(f"influence on share {self.settings.target_group}")
        axis.set_title(f"'{r.prompt}'", fontsize=10)
        axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        return figure

    def _grid(self, r):
        from vlfair.figures import image_mosaic

        shown = [v for v in r.variants if len(v.replaced) <= 1]
        cells = [r.images.get(",".join(map(str, v.replaced)), []) for v in shown]
        return image_mosaic(cells, f"original vs transmuted prompts of '{r.prompt}'",
                            row_titles=[v.prompts[0] for v in shown], cell_inches=1.6)

    def _large_scale(self, out: Output) -> None:
        import pandas as pd

        frame = pd.DataFrame([{"kind": m.subset["kind"], "word": m.subset["word"], "mean influence (level 1)": m.value,
                               "mean Shapley": m.details["mean_shapley"]}
                              for m in out.metrics if m.name == "mean_word_influence" and "phrasing" not in m.subset
                              ]).set_index("word")
        out.tables["mean_word_influence"] = frame
        out.figure("mean_word_influence", _mean_influence_bars, frame, self.settings.target_group)


def _mean_influence_bars(frame: pd.DataFrame, target: str) -> Any:
    """Each word's mean influence (``frame``: the mean_word_influence table), coloured by its kind."""
    from vlfair.figures import subplots

    figure, axis = subplots(figsize=(9, 3.2))
    colors = {"adjective": "tab:blue", "person": "tab:orange", "place": "tab:green"}
    axis.bar(range(len(frame)), frame["mean influence (level 1)"], color=[colors[k] for k in frame["kind"]])
    axis.set_xticks(range(len(frame)), frame.index, rotation=45, ha="right")
    axis.set_xlabel("word (colour: adjective, person, place)")
    axis.axhline(0, color="gray", linewidth=0.8)
    axis.set_ylabel(f"mean influence on share {target}")
    axis.set_title("Mean influence of each word over the prompts that contain it", fontsize=10)
    return figure


# ---- what one run reports beside its metrics: the study's intervals, not resamples -------------------
def _within(half: float | None, **details: Any) -> reporters.Report:
    """An interval of ``half`` either side of the value (Hoeffding's bound on an influence; None: no interval, as
    the study gives a mean influence none), its half-width and ``details`` beside it."""
    def report(metric: Metric, reading: reporters.Reading, statistic: Any) -> None:
        metric.ci = None if half is None or metric.value is None else [metric.value - half, metric.value + half]
        metric.details = {**({} if half is None else {"ci_half_width": half}), **details}
    return report


def _share(successes: int, trials: int, details: dict[str, Any]) -> reporters.Report:
    """A share of ``trials`` images with its exact (Clopper-Pearson) interval and ``details``; no value without
    images."""
    def report(metric: Metric, reading: reporters.Reading, statistic: Any) -> None:
        from vlfair import stats

        metric.value = metric.value if trials else None
        metric.ci = stats.proportion_interval(successes, trials, reading.confidence)
        metric.details = details
    return report


# ---- samples.parquet: one row per generated image -------------------------------------------
GROUP_PREFIX = "is "              # a group's indicator column: "is female" (the image was classified female)
NO_PERSON_COLUMN = "no person"    # the classifier found no person (left out of the shares)
PHRASED = re.compile(r"@\d+$")     # a column's suffix with another phrasing of the classifier's texts
STUDY_TEXTS = "{}"                # the study's phrasing of the classifier's texts: each group's text itself


def _group_column(group: str) -> str:
    return f"{GROUP_PREFIX}{group}"


def _key(replaced: tuple[int, ...]) -> str:
    """A variant's key as the word_influence measure takes it: the replaced word indices, "0,2"."""
    return ",".join(map(str, replaced))


def _positions(key: str) -> tuple[int, ...]:
    return tuple(int(i) for i in key.split(",")) if key else ()


def _variant_name(replaced: tuple[int, ...], words: list[str]) -> str:
    """A variant as the report names it: "(original)", "doctor", "doctor + hospital"."""
    return "(original)" if not replaced else " + ".join(words[i] for i in replaced)


def _slug(prompt: str) -> str:
    return "_".join(prompt.split())[:40]


def _sample_id(prompt: str, key: str, candidate: int, text: str, index: int, seed: int) -> str:
    """A generated image's stable key: what it was generated from (the prompt, the variant and its
    transmuted prompt, the sample index and seed), not the generator, so that two generators (or
    two classifiers) run with the same settings pair image by image."""
    record = json.dumps([prompt, key, candidate, text, index, seed], ensure_ascii=False)
    return hashlib.sha256(record.encode()).hexdigest()[:16]


def _frame(results: list[PromptInfluence], known: list[str] | None, target: str, base_seed: int, count: int = 1
           ) -> pd.DataFrame:
    """The samples of a run: identity, what each image was generated from, and its group as one
    indicator column per group (the classifier's groups in its order, then any other label seen,
    and the target) and ``no person``; with ``count`` phrasings, those columns again with each other
    phrasing's labels (``is female@2``, ``no person@2``, ...)."""
    import pandas as pd

    from vlfair.t2i.classifier import NO_PERSON
    from vlfair.t2i.generators import sample_seed

    records: dict[str, list[Any]] = {name: [] for name in ("prompt", "variant", "replaced", "candidate",
                                                           "variant_prompt", "image_index", "seed")}
    labels: list[str] = []
    phrased: list[list[str]] = [[] for _ in range(count - 1)]
    for r in results:
        for k, found in enumerate(r.phrased_labels):
            phrased[k] += map(str, found)
        for request, label in zip(r.requests, r.labels):
            records["prompt"].append(r.prompt)
            records["variant"].append(_variant_name(request.replaced, r.words))
            records["replaced"].append(_key(request.replaced))
            records["candidate"].append(request.candidate)
            records["variant_prompt"].append(request.prompt)
            records["image_index"].append(request.index)
            records["seed"].append(sample_seed(request.prompt, request.index, base_seed))
            labels.append(str(label))
    ids = [_sample_id(*values) for values in zip(records["prompt"], records["replaced"], records["candidate"],
                                                 records["variant_prompt"], records["image_index"], records["seed"])]
    given = list(known or [])
    seen = {label for found in (labels, *phrased) for label in found if label != NO_PERSON}
    groups = given + sorted(seen.union([target]) - set(given))
    indicators = {}
    for number, found in enumerate([labels, *phrased], start=1):
        assigned = np.asarray(found, dtype=object)
        indicators.update({phrasing.column(_group_column(g), number): assigned == g for g in groups})
        indicators[phrasing.column(NO_PERSON_COLUMN, number)] = assigned == NO_PERSON
    return pd.DataFrame({"row": np.arange(len(labels), dtype=np.int64), "id": ids, **records,
                         **indicators}).astype({"candidate": np.int64, "image_index": np.int64, "seed": np.int64})


def _group_names(samples: Samples) -> list[str]:
    """The groups with an indicator column, in the frame's order."""
    return [c[len(GROUP_PREFIX):] for c in samples.frame.columns
            if c.startswith(GROUP_PREFIX) and not PHRASED.search(c)]


def _known_groups(samples: Samples) -> list[str] | None:
    """The classifier's own groups in its order (None: it names none, the groups are those seen)."""
    given = samples.facts.get("groups")
    return None if given is None else [g for g in _group_names(samples) if g in given]


def _labels(samples: Samples, number: int = 1) -> np.ndarray:
    """Each image's label as the classifier gave it with phrasing ``number``: its group, or NO_PERSON."""
    from vlfair.t2i.classifier import NO_PERSON

    names = _group_names(samples)
    indicators = samples.frame[[phrasing.column(_group_column(g), number) for g in names]].to_numpy(bool)
    labels = np.asarray(names, dtype=object)[indicators.argmax(axis=1)] if names else np.full(len(indicators), "")
    return np.where(samples.frame[phrasing.column(NO_PERSON_COLUMN, number)].to_numpy(bool), NO_PERSON, labels)


# ---- the metrics as functions of per-image values (vlfair compare) ----------------------------
class _VariantShares:
    """(b, G, k) shares: each variant's share of each group column among its images of a person
    (the last column: no person). The counts are whole numbers, rounded off the moments' float
    noise, so a share is the run's own quotient (nan where no image shows a person). Computed once
    per moments: every statistic of a row set reads the same ones, each a
    :class:`vlfair.probes.declared.Custom` statistic of ``columns`` (the groups', the target's first,
    then the no-person column), read where the row set holds them (each phrasing's shares have their own columns
    in a row set the phrasings share)."""

    def __init__(self, columns: tuple[str, ...]):
        self.columns = columns
        self.person = len(columns) - 1
        self._last: tuple[Moments, tuple[int, ...], np.ndarray] | None = None

    def shares(self, m: Moments, index: tuple[int, ...]) -> np.ndarray:
        """The shares from moments whose columns ``index`` are this object's ``columns``."""
        if self._last is not None and self._last[0] is m and self._last[1] == index:
            return self._last[2]
        count = m.count[:, :, None]
        sums = np.rint(m.total[:, :, list(index)] + count * m.shift[list(index)])
        persons = count - sums[:, :, self.person:]
        with np.errstate(invalid="ignore", divide="ignore"):
            shares = np.where(persons > 0, sums[:, :, :self.person] / persons, np.nan)
        self._last = (m, index, shares)
        return shares

    def _custom(self, make: Callable[[Callable[[Moments], np.ndarray], Mapping[Any, int]],
                                     Callable[[Moments], np.ndarray]]) -> Custom:
        """A statistic of the shares: ``make(shares, code)`` returns its function (``shares``: the moments'
        shares, read from where the row set holds the columns; ``code``: each variant's)."""
        def located(at: Mapping[str, int], code: Mapping[Any, int]) -> Callable[[Moments], np.ndarray]:
            index = tuple(at[c] for c in self.columns)
            return make(lambda m: self.shares(m, index), code)
        return Custom(self.columns, located)

    def share(self, variant: int, column: int) -> Custom:
        return self._custom(lambda shares, code: lambda m: shares(m)[:, variant, column])

    def influence(self, level: int, word: int, num_words: int, keys: list[str]) -> Custom:
        """Word ``word``'s influence at ``level``, as the word_influence measure: the mean over subsets
        R of the other words, |R| = level - 1, of P_target(R) - P_target(R + word) (column 0: the target)."""
        others = [w for w in range(num_words) if w != word]
        left, right = [], []
        for subset in itertools.combinations(others, level - 1):
            left.append(keys.index(_key(subset)))
            right.append(keys.index(_key(tuple(sorted(subset + (word,))))))
        return self._custom(lambda shares, code: lambda m: (shares(m)[:, left, 0] - shares(m)[:, right, 0]).mean(
            axis=1))

    def mean_of(self, statistics: list[Custom]) -> Custom:
        """The mean of statistics (the Shapley value: the mean of every level)."""
        def make(at: Mapping[str, int], code: Mapping[Any, int]) -> Callable[[Moments], np.ndarray]:
            functions = [s.make(at, code) for s in statistics]
            return lambda m: np.mean([f(m) for f in functions], axis=0)
        return Custom(self.columns, make)

    def mean_difference(self, left: list[tuple], right: list[tuple]) -> Custom:
        """The mean of the target share differences of the cells ``left`` and ``right``, pair by pair
        (a word's mean influence: each prompt's original minus its variant without the word)."""
        def make(shares: Callable[[Moments], np.ndarray], code: Mapping[Any, int]) -> Callable[[Moments], np.ndarray]:
            first, second = [code[c] for c in left], [code[c] for c in right]
            return lambda m: (shares(m)[:, first, 0] - shares(m)[:, second, 0]).mean(axis=1)
        return self._custom(make)

