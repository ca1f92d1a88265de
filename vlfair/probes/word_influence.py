"""The text-to-image study: which prompt word skews the generated group distribution."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

import numpy as np
from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from vlfair.outputs import Metric
from vlfair.probes import register
from vlfair.probes.base import Context, Option, Output, Probe, ProbeError
from vlfair.probes.settings import SEED, Confidence, Count, Flag, Float, NonNegative, ProbeSettings, Settings


class Generator(Settings):
    """The text-to-image pipeline (``vlfair.t2i.generators.DiffusersGenerator``'s arguments)."""

    spec: str
    steps: Count = 50
    guidance: Float = 7.5
    size: Count | None = None
    batch_size: Count = 8
    device: str = "auto"
    dtype: str = "auto"
    use_safetensors: Flag = True


class Transmuter(Settings):
    """Which transmuter rewrites a word (``vlfair.t2i.transmuters``): mlm with its masked LM, or lexicon;
    other keys are passed to it."""

    model_config = ConfigDict(extra="allow")

    name: Literal["mlm", "lexicon"]
    model: str | None = None


def _transmuter_option(value: str) -> dict[str, Any]:
    """--transmuter mlm, mlm:MODEL or lexicon."""
    name, _, model = value.partition(":")
    return {"name": name, **({"model": model} if model else {})}


class WordInfluenceSettings(ProbeSettings, Confidence):
    prompts: list[str] = Field(min_length=1, description="the prompts whose words are scored")
    large_scale: Flag = Field(description="the study's 150 prompts 'a [ADJECTIVE] [PERSON] at the [PLACE]' instead")
    generator: Generator = Field(description="the pipeline: spec, steps, guidance, size, batch_size")
    transmuter: Transmuter = Field(description="{name: mlm, model: ID} or {name: lexicon}")
    words: Literal["all", "content"] = Field(description="all: every word is scored; content: not articles and "
                                                         "prepositions")
    groups: dict[str, str] | None = Field(description="group -> classifier text; null: the study's male / female")
    target_group: str = Field(description="influence = P_target(original) - P_target(word replaced); one of the "
                                          "groups")
    no_person: str | None = Field(description="with groups: a text that marks an image without a person")
    candidates: Count = Field(description="transmuted prompts per replaced word")
    images_per_prompt: Count = Field(description="images per transmuted prompt")
    original_images: Count = Field(description="images of the original prompt")
    max_level: Count | None = Field(description="the highest level scored; null: every level and the Shapley value")
    max_images: Count = Field(description="refuse configurations that would generate more images per prompt")
    seed: NonNegative = Field(
        SEED, description="the random seed of the generated images and of every resampling, a whole number >= 0 "
                          "(not null: a run must draw the same images again)")

    @field_validator("target_group")
    @classmethod
    def _a_known_group(cls, value: str, info: ValidationInfo) -> str:
        groups = info.data.get("groups")  # null: the classifier's own (the study's), checked when it loads
        if groups is not None and value not in groups:
            raise ValueError(f"is not one of the groups {list(groups)}")
        return value


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

    def intervals_note(self) -> str:  # no resampling: Hoeffding's bound and exact binomial intervals
        return (f"Intervals: {self.settings.confidence:.0%} Hoeffding bounds on each influence (the least-sampled "
                "variant's image count); shares have exact Clopper-Pearson intervals.")

    def run(self, ctx: Context, schema: str | None) -> Output:
        from vlfair.t2i.classifier import GroupClassifier
        from vlfair.t2i.generators import DiffusersGenerator, ImageCache
        from vlfair.t2i.influence import large_scale_prompts, run_prompt
        from vlfair.t2i.transmuters import make_transmuter

        s = self.settings
        generator = self.components.get("generator") or DiffusersGenerator(**s.generator.model_dump())
        transmuter = self.components.get("transmuter") or make_transmuter(**s.transmuter.model_dump(exclude_none=True))
        classify = self.components.get("classifier") or GroupClassifier(ctx.encoder, s.groups, s.no_person)
        groups = getattr(classify, "groups", None)
        self._known_groups = list(groups) if groups is not None else None
        if groups is not None and s.target_group not in groups:
            raise ProbeError(f"word-influence: target_group {s.target_group!r} is not one of the groups {list(groups)}")
        cache = ImageCache(generator, ctx.cache_dir, base_seed=s.seed)
        prompts = large_scale_prompts() if s.large_scale else list(s.prompts)
        out = Output(settings={"generator": generator.identity(), "transmuter": transmuter.identity(),
                               "target_group": s.target_group, "words": s.words, "candidates": s.candidates,
                               "images_per_prompt": s.images_per_prompt, "original_images": s.original_images,
                               "groups": groups, "large_scale": s.large_scale},
                     notes=list(s.notes))
        # the published Table 1 is Stable Diffusion's: compare by the generator, not the classifier
        out.published_model = generator.identity().get("pipeline")
        results = []
        for prompt in prompts:
            r = run_prompt(prompt, transmuter, cache, classify, s.target_group, positions=s.words,
                           max_level=s.max_level, candidates=s.candidates, images_per_prompt=s.images_per_prompt,
                           original_images=s.original_images, confidence=s.confidence, max_images=s.max_images)
            results.append(r)
            self._report_prompt(r, out, len(prompts) == 1 or not s.large_scale)
        out.settings["generator_calls"] = cache.calls
        out.settings["images_used"] = sum(r.images_used for r in results)
        removed = sum(sum(r.no_person.values()) for r in results)
        out.settings["no_person_images"] = removed
        out.notes.append(f"{cache.calls} images generated, {out.settings['images_used'] - cache.calls} read from the "
                         "image cache. " + (f"vlfair's no-person class removed {removed} image(s) from the shares."
                                            if getattr(classify, "no_person", None) or removed else
                                            "Every image was assigned to a group (no no-person class), as in the "
                                            "study."))
        out.notes.append(f"Influence for {s.target_group}: P_{s.target_group}(original) - P_{s.target_group}"
                         "(word replaced); positive = the word pushes the images toward the target group. The study's "
                         "Table 1: 'doctor' +0.373 for male, its share of female images rising from 0.160 to 0.533 "
                         "without it.")
        if s.large_scale:
            self._large_scale(results, out)
        identity = generator.identity()  # a readable name: the pipeline, or the callable's name, never a dict
        source = identity.get("pipeline") or identity.get("callable") or type(generator).__name__
        out.dataset = {"name": f"generated:{source}",
                       "split": None, "subset": None, "num_rows": out.settings["images_used"],
                       "fingerprint": hashlib.sha256(json.dumps([prompts, generator.identity(), transmuter.identity()],
                                                                sort_keys=True, default=str).encode()).hexdigest()[:16]}
        return out

    def _report_prompt(self, r, out: Output, detailed: bool) -> None:
        import pandas as pd

        from vlfair import stats

        result = r.result
        target = self.settings.target_group
        half = result["levels_ci_half_width"]
        for level, values in result["levels"].items():
            for word, value in zip(r.words, values):
                out.metrics.append(Metric("word_influence", {"prompt": r.prompt, "word": word, "level": int(level),
                                                             "group": target},
                                          value, [value - half[level], value + half[level]], None,
                                          {"ci_half_width": half[level], "method": "hoeffding"}))
        if result["shapley"] is not None:
            width = float(np.mean(list(half.values())))  # the mean of levels errs by at most their mean bound
            for word, value in zip(r.words, result["shapley"]):
                out.metrics.append(Metric("word_influence_shapley", {"prompt": r.prompt, "word": word}, value,
                                          [value - width, value + width], None, {"ci_half_width": width}))
        rows = []
        for variant in r.variants:
            key = ",".join(map(str, variant.replaced))
            replaced = "(original)" if not variant.replaced else " + ".join(r.words[i] for i in variant.replaced)
            influence = (result["levels"]["1"][variant.replaced[0]] if len(variant.replaced) == 1 else None)
            counted, by_group = r.counts.get(key, 0), r.group_counts.get(key, {})
            rows.append({"variant": replaced, "example prompt": variant.prompts[0], "prompts": len(variant.prompts),
                         "images": counted, "no person": r.no_person.get(key, 0),
                         **{f"share {g}": (by_group.get(g, 0) / counted if counted else None) for g in self._groups(r)},
                         "influence (level 1)": influence})
            out.metrics.append(Metric("target_share", {"prompt": r.prompt, "variant": replaced}, r.shares.get(key),
                                      stats.proportion_interval(by_group.get(target, 0), counted,
                                                                self.settings.confidence),
                                      None, {"images": counted, "no_person": r.no_person.get(key, 0),
                                             "prompts": variant.prompts, "group": target}))
            for group in self._groups(r):  # every group's share, as the study's Table 1 prints the female one
                out.metrics.append(Metric("group_share", {"prompt": r.prompt, "variant": replaced, "group": group},
                                          by_group.get(group, 0) / counted if counted else None,
                                          stats.proportion_interval(by_group.get(group, 0), counted,
                                                                    self.settings.confidence),
                                          None, {"images": counted, "count": by_group.get(group, 0)}))
        if not detailed:
            return
        slug = "_".join(r.prompt.split())[:40]
        out.tables[f"variants_{slug}"] = pd.DataFrame(rows).set_index("variant")
        out.figures[f"levels_{slug}"] = self._level_plot(r)
        out.figures[f"images_{slug}"] = self._grid(r)

    def _groups(self, r) -> list[str]:
        """The classifier's groups (its ``groups``, else those seen), the target first."""
        known = self._known_groups or sorted({g for counts in r.group_counts.values() for g in counts})
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

    def _large_scale(self, results, out: Output) -> None:
        import pandas as pd

        from vlfair.figures import subplots
        from vlfair.t2i.influence import ADJECTIVES, PERSONS, PLACES, mean_word_influence

        level = mean_word_influence(results, "1")
        shapley = mean_word_influence(results, "shapley") if all(r.result["shapley"] for r in results) else {}
        rows = []
        for kind, vocabulary in (("adjective", ADJECTIVES), ("person", PERSONS), ("place", PLACES)):
            for word in vocabulary:
                if word in level:
                    rows.append({"kind": kind, "word": word, "mean influence (level 1)": level[word],
                                 "mean Shapley": shapley.get(word)})
                    out.metrics.append(Metric("mean_word_influence", {"word": word, "kind": kind}, level[word], None,
                                              None, {"mean_shapley": shapley.get(word), "level": 1}))
        frame = pd.DataFrame(rows).set_index("word")
        out.tables["mean_word_influence"] = frame
        figure, axis = subplots(figsize=(9, 3.2))
        colors = {"adjective": "tab:blue", "person": "tab:orange", "place": "tab:green"}
        axis.bar(range(len(frame)), frame["mean influence (level 1)"], color=[colors[k] for k in frame["kind"]])
        axis.set_xticks(range(len(frame)), frame.index, rotation=45, ha="right")
        axis.set_xlabel("word (colour: adjective, person, place)")
        axis.axhline(0, color="gray", linewidth=0.8)
        axis.set_ylabel(f"mean influence on share {self.settings.target_group}")
        axis.set_title("Mean influence of each word over the prompts that contain it", fontsize=10)
        out.figures["mean_word_influence"] = figure
