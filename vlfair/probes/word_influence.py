"""The text-to-image study: which prompt word skews the generated group distribution."""

from __future__ import annotations

import hashlib
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from vlfair.probes.base import Context, Output, Probe, ProbeError
from vlfair.report.results import Metric
from vlfair.t2i.classifier import GroupClassifier
from vlfair.t2i.generators import DiffusersGenerator, ImageCache
from vlfair.t2i.influence import ADJECTIVES, PERSONS, PLACES, large_scale_prompts, mean_word_influence, run_prompt
from vlfair.t2i.transmuters import make_transmuter


class WordInfluenceProbe(Probe):
    name = "word-influence"
    settings_file = "word_influence.yaml"
    allowed = {"prompts", "large_scale", "generator", "transmuter", "target_group", "groups", "no_person", "candidates",
               "images_per_prompt", "max_level", "max_images", "confidence", "seed"}
    schemas = ()
    needs_dataset = False

    def run(self, ctx: Context, schema: str | None) -> Output:
        s = self.settings
        generator = self.components.get("generator") or DiffusersGenerator(**s["generator"])
        transmuter = self.components.get("transmuter") or make_transmuter(**s["transmuter"])
        classify = self.components.get("classifier") or GroupClassifier(ctx.encoder, s["groups"], s["no_person"])
        groups = getattr(classify, "groups", None)
        if groups is not None and s["target_group"] not in groups:
            raise ProbeError(f"word-influence: target_group {s['target_group']!r} is not one of the groups {list(groups)}")
        cache = ImageCache(generator, ctx.cache_dir, base_seed=s["seed"])
        prompts = large_scale_prompts() if s["large_scale"] else list(s["prompts"])
        out = Output(settings={"generator": generator.identity(), "transmuter": transmuter.identity(),
                               "target_group": s["target_group"], "candidates": s["candidates"],
                               "images_per_prompt": s["images_per_prompt"], "large_scale": s["large_scale"]})
        results = []
        for prompt in prompts:
            r = run_prompt(prompt, transmuter, cache, classify, s["target_group"], max_level=s["max_level"],
                           candidates=s["candidates"], images_per_prompt=s["images_per_prompt"],
                           confidence=s["confidence"], max_images=s["max_images"], log=print)
            results.append(r)
            self._report_prompt(r, out, len(prompts) == 1 or not s["large_scale"])
        out.settings["generator_calls"] = cache.calls
        out.settings["images_used"] = sum(r.images_used for r in results)
        out.notes.append(f"{cache.calls} images generated, {out.settings['images_used'] - cache.calls} read from the "
                         "image cache; images showing no person are counted per variant and left out of the shares.")
        if s["large_scale"]:
            self._large_scale(results, out)
        out.dataset = {"name": f"generated:{generator.identity().get('pipeline', generator.identity())}",
                       "split": None, "subset": None, "num_rows": out.settings["images_used"],
                       "fingerprint": hashlib.sha256(json.dumps([prompts, generator.identity(), transmuter.identity()],
                                                                sort_keys=True, default=str).encode()).hexdigest()[:16]}
        return out

    def _report_prompt(self, r, out: Output, detailed: bool) -> None:
        result = r.result
        half = result["levels_ci_half_width"]
        for level, values in result["levels"].items():
            for word, value in zip(r.words, values):
                out.metrics.append(Metric("word_influence", {"prompt": r.prompt, "word": word, "level": int(level)},
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
            rows.append({"variant": replaced, "example prompt": variant.prompts[0], "images": r.counts.get(key, 0),
                         "no person": r.no_person.get(key, 0), f"share {self.settings['target_group']}": r.shares.get(key),
                         "influence (level 1)": influence})
            out.metrics.append(Metric("target_share", {"prompt": r.prompt, "variant": replaced}, r.shares.get(key), None,
                                      None, {"images": r.counts.get(key, 0), "no_person": r.no_person.get(key, 0),
                                             "prompts": variant.prompts}))
        if not detailed:
            return
        slug = "_".join(r.prompt.split())[:40]
        out.tables[f"variants_{slug}"] = pd.DataFrame(rows).set_index("variant")
        out.figures[f"levels_{slug}"] = self._level_plot(r)
        out.figures[f"images_{slug}"] = self._grid(r)

    def _level_plot(self, r):
        result = r.result
        figure, axis = plt.subplots(figsize=(1.5 + 1.2 * len(r.words), 3.2))
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
        axis.set_ylabel(f"influence on share {self.settings['target_group']}")
        axis.set_title(f"'{r.prompt}'", fontsize=10)
        axis.legend(fontsize=7)
        return figure

    def _grid(self, r):
        shown = [v for v in r.variants if len(v.replaced) <= 1]
        columns = max(len(r.images.get(",".join(map(str, v.replaced)), [])) for v in shown) or 1
        figure, axes = plt.subplots(len(shown), columns, figsize=(1.6 * columns, 1.7 * len(shown)), squeeze=False)
        for row, variant in enumerate(shown):
            pictures = r.images.get(",".join(map(str, variant.replaced)), [])
            for col in range(columns):
                axis = axes[row][col]
                axis.axis("off")
                if col < len(pictures):
                    axis.imshow(pictures[col])
            axes[row][0].set_title(variant.prompts[0], fontsize=7, loc="left")
        figure.suptitle(f"original vs transmuted prompts of '{r.prompt}'", fontsize=9)
        return figure

    def _large_scale(self, results, out: Output) -> None:
        level = mean_word_influence(results, "1")
        shapley = mean_word_influence(results, "shapley") if all(r.result["shapley"] for r in results) else {}
        rows = []
        for kind, vocabulary in (("adjective", ADJECTIVES), ("person", PERSONS), ("place", PLACES)):
            for word in vocabulary:
                if word in level:
                    rows.append({"kind": kind, "word": word, "mean influence (level 1)": level[word],
                                 "mean Shapley": shapley.get(word)})
                    out.metrics.append(Metric("mean_word_influence", {"word": word, "kind": kind}, level[word], None, None,
                                              {"mean_shapley": shapley.get(word), "level": 1}))
        frame = pd.DataFrame(rows).set_index("word")
        out.tables["mean_word_influence"] = frame
        figure, axis = plt.subplots(figsize=(9, 3.2))
        colors = {"adjective": "tab:blue", "person": "tab:orange", "place": "tab:green"}
        axis.bar(range(len(frame)), frame["mean influence (level 1)"], color=[colors[k] for k in frame["kind"]])
        axis.set_xticks(range(len(frame)), frame.index, rotation=45, ha="right")
        axis.axhline(0, color="gray", linewidth=0.8)
        axis.set_ylabel(f"mean influence on share {self.settings['target_group']}")
        axis.set_title("Mean influence of each word over the prompts that contain it", fontsize=10)
        out.figures["mean_word_influence"] = figure
