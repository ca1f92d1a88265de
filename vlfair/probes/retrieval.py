"""Retrieval skew: which people a model retrieves for a text query, by gender, race and age.

oxai/debias-vision-lang's experiment (DVL, "A Prompt Array Keeps the Bias Away", 2022): for each of
its 319 prompts (11 templates x 29 concepts), rank FairFace's validation images by their similarity
to the prompt and measure how far the gender, race and age shares of the top k are from a target:
MaxSkew@k and NDKL@k against the uniform target (DVL's eq_opp) and the evaluated set's shares
(dem_par), the mean over prompts as DVL reports it. Beside DVL's numbers: MinSkew and Bias@k, each
concept's MaxSkew and Skew per group (a concept's value is the mean over its templates), the group
each prompt over-retrieves, and intervals from a bootstrap over the images (drawn within their
group, every prompt re-ranked in every resample: :func:`vlfair.measures.resampled_top_k`) and over
the prompts.

The statistics of a resample are functions of each query's top-k group counts and NDKL, which
``resampled_top_k`` gives for a whole block of resamples at once; the same function serves the
run's point values, its intervals and ``vlfair compare`` (:class:`_PairedRanking`), so the three
cannot disagree.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import AfterValidator, Field

from vlfair.measures import reporters
from vlfair.measures.catalog import neutral_value
from vlfair.probes import phrasings as phrasing
from vlfair.probes.asking import Asking
from vlfair.probes.base import Context, Output, Probe, ProbeError, indistinguishable
from vlfair.probes.declared import Custom, Declared, evaluate
from vlfair.probes.grouping import Grouped
from vlfair.probes.registry import register
from vlfair.probes.scorers import Scorer
from vlfair.probes.settings import (
    Bootstrap,
    Count,
    Flag,
    Name,
    ProbeSettings,
    Text,
    distinct,
    placeholders,
    same_text,
)
from vlfair.samples import Samples

Attribute = Literal["gender", "race", "age"]
Target = Literal["uniform", "dataset"]
SCORE = "score: "  # samples.parquet's column of a prompt's scores is SCORE + the prompt (never an identity column)


class RetrievalSettings(ProbeSettings, Bootstrap, Grouped):
    query_templates: Annotated[list[Annotated[Text, AfterValidator(placeholders(""))]],
                               AfterValidator(distinct(same_text, "case and spaces aside"))] = Field(
        min_length=1, description="query templates, each with one {} for the concept")
    concepts: Annotated[list[Name], AfterValidator(distinct(same_text, "case and spaces aside"))] = Field(
        min_length=1, description="the concepts put into every template")
    attributes: Annotated[list[Attribute], AfterValidator(distinct())] = Field(
        min_length=1, description="the attributes whose shares in the top k are measured: gender, race, age")
    k: Count = Field(description="images retrieved per query: 1 up to one below the number of images evaluated")
    targets: Annotated[list[Target], AfterValidator(distinct())] = Field(
        min_length=1, description="uniform (DVL's eq_opp) and/or dataset (dem_par: the evaluated set's shares)")
    zero_count: Literal["dvl", "smoothed"] = Field(
        description="a group absent from the top k: dvl counts it as 1/k; smoothed adds 0.5 to every count")
    balance_gender: Flag = Field(description="as many men as women, the larger gender drawn down (DVL's equal_split)")
    ranking: Literal["cosine", "dvl"] = Field(
        description="cosine of the embeddings, or dvl: the unnormalised image embedding . the normalised text")
    generative: Asking = Field(description="how a generative model (lvlm:) is asked: images are ranked by each "
                                           "prompt's log-likelihood as the answer to the question")
    per_template: Flag = Field(
        False, description="the templates are the study's phrasings of each concept's query: each concept's MaxSkew "
                           "and Skew per group also per template and pooled over the templates (an interval that "
                           "resamples the templates as well as the images), and a table of in how many templates "
                           "each concept's skew of each group is found")


@dataclasses.dataclass(frozen=True)
class _Design:
    """What turns each query's top-k counts and NDKL into the probe's statistics."""

    k: int
    p_stars: tuple[np.ndarray, ...]   # one target distribution per target
    zero_count: str
    member: np.ndarray                # (concepts, queries): the mean over a concept's templates
    pair: tuple[int, int] | None      # Bias@k's two group codes (gender), None elsewhere

    def statistics(self, counts: np.ndarray, ndkl: np.ndarray) -> dict[str, np.ndarray]:
        """From ``resampled_top_k``'s (b, queries, groups) counts and (b, queries, targets) NDKL:
        means over queries (b, targets), per concept (b, concepts, targets, ...), per query."""
        from vlfair import measures

        k = self.k
        skew = measures.top_k_skew(counts, k, np.stack(self.p_stars, axis=1), self.zero_count,
                                   measures.SMOOTHING)  # (b, queries, groups, targets)
        maximum = skew.max(axis=2)
        per_query = {"max_skew": maximum, "min_skew": skew.min(axis=2), "ndkl": ndkl}  # (b, queries, targets)
        if self.pair is not None:
            per_query["bias_at_k"] = measures.bias_at_k(counts, k, self.pair)  # (b, queries)
        found = {name: values.mean(axis=1) for name, values in per_query.items()}
        found.update({"concept_max_skew": np.einsum("cq,bqt->bct", self.member, maximum),
                      "concept_skew": np.einsum("cq,bqgt->bcgt", self.member, skew), "skew": skew,
                      "per_query": per_query})
        return found


@dataclasses.dataclass(frozen=True)
class _Quantity:
    """One reported number: its metric name and subset, and where it sits in the statistics."""

    name: str
    subset: dict[str, Any]
    read: Callable[[dict[str, np.ndarray]], np.ndarray]  # statistics -> (b,)


@register
class RetrievalProbe(Probe):
    name = "retrieval"
    Settings = RetrievalSettings
    help = "skew of the images retrieved for text queries, by gender, race and age (debias-vision-lang)"
    description = ("MaxSkew@k and NDKL@k of the gender, race and age of the k images a model retrieves for each of "
                   "debias-vision-lang's 319 prompts, against uniform and dataset targets, with intervals over the "
                   "images and the prompts; per concept and per group beside them. Data: the fairface schema "
                   "(vlfair prepare fairface, or synthetic:fairface).")
    schemas = ("fairface",)
    required_columns = {"fairface": ("image",)}  # and the attributes measured: check_columns
    asks_questions = True  # retrieval.yaml's generative section
    model_settings = ("generative",)  # how a generative model is asked belongs to it, as its spec does
    settings: RetrievalSettings

    def check_columns(self, dataset: Any, schema: str) -> None:
        super().check_columns(dataset, schema)
        s = self.settings
        missing = [c for c in s.attributes if c not in dataset.column_names]
        if missing:
            raise ProbeError(f"retrieval: setting attributes: the dataset has no column "
                             f"{', '.join(map(repr, missing))}; it has {dataset.column_names}; attributes takes "
                             "gender, race and age, those the dataset holds")
        if s.balance_gender and "gender" not in dataset.column_names:
            raise ProbeError(f"retrieval: setting balance_gender: the dataset has no column 'gender' to balance; it "
                             f"has {dataset.column_names}; set balance_gender=false to go without")

    def draws_with_seed(self) -> bool:
        return self.settings.balance_gender  # the seed draws which men are kept

    def queries(self) -> list[tuple[str, str]]:
        """(concept, prompt) of every query, templates outer (as DVL forms them)."""
        s = self.settings
        return [(concept, template.format(concept)) for template in s.query_templates for concept in s.concepts]

    # ---- the model's part --------------------------------------------------------------------
    def score(self, ctx: Context, schema: str | None) -> Samples:
        import pandas as pd

        s = self.settings
        queries = self.queries()
        prompts = [prompt for _, prompt in queries]
        if len(set(prompts)) < len(prompts):
            twice = next(p for p in prompts if prompts.count(p) > 1)
            raise ProbeError(f"retrieval: settings query_templates and concepts: the prompt {twice!r} is formed "
                             "twice (by two template and concept pairs); every prompt must be a distinct query")
        self.check_columns(ctx.dataset, schema or self.schemas[0])
        facts: dict[str, Any] = {"queries": prompts, "concepts": [c for c, _ in queries], "ranking": s.ranking}
        # every image is embedded (and cached) once; balancing then picks rows of the embeddings, so
        # another seed or balance_gender=false embeds nothing again
        rows = ctx.rows()
        labels = {attribute: ctx.column(attribute, rows) for attribute in s.attributes}
        kept = np.arange(len(rows))
        if s.balance_gender:
            kept, facts["balancing"] = _balance_gender(ctx.column("gender", rows), s.seed)
            for attribute, values in labels.items():
                _refuse_emptied(attribute, values, values[kept])
        rows = rows[kept]
        for attribute, values in labels.items():  # before any image is scored
            _check_k(s.k, attribute, sorted(set(values[kept].tolist())))
        if s.k >= len(rows):
            raise ProbeError(f"retrieval: setting k = {s.k}: MaxSkew needs k below the number of images evaluated "
                             f"({len(rows)}): with every image retrieved the shares are the evaluated set's, whatever "
                             f"the model (debias-vision-lang's default, k = all); use a k from 1 to {len(rows) - 1}")
        frame = ctx.identity(rows)
        for attribute, values in labels.items():
            frame[attribute] = values[kept]
        warnings: list[str] = []
        scores = ctx.scorer.pick({"asks": self._asked_scores, "embeds": self._embedded_scores})(
            ctx, prompts, kept, facts, warnings)
        if not np.isfinite(scores).all():  # a ranking would put them last without a word
            bad_image, bad_query = np.argwhere(~np.isfinite(scores))[0]
            raise ProbeError(f"retrieval: model {ctx.encoder.spec!r} scores the image of row {int(rows[bad_image])} "
                             f"against {prompts[bad_query]!r} as {scores[bad_image, bad_query]} "
                             f"({int((~np.isfinite(scores)).sum())} scores not finite in all): its embeddings overflow "
                             "(try --dtype float32)")
        for q, prompt in enumerate(prompts):
            frame[SCORE + prompt] = scores[:, q]
        facts["images"] = int(len(rows))
        return Samples(pd.DataFrame(frame), facts, warnings)

    def _asked_scores(self, ctx: Context, prompts: list[str], kept: np.ndarray, facts: dict[str, Any],
                      warnings: list[str]) -> np.ndarray:
        """Each kept image's log-likelihood of each prompt as its answer to the question: every image asked
        once (cached), balancing picks rows of the answers."""
        asked = self.settings.generative
        facts.update(ctx.scorer.asked_facts(question=asked.question, ranking="log_likelihood"))
        return ctx.text_scores(prompts, asked).values[kept]

    def _embedded_scores(self, ctx: Context, prompts: list[str], kept: np.ndarray, facts: dict[str, Any],
                         warnings: list[str]) -> np.ndarray:
        """Each kept image's cosine with each prompt (DVL's ranking: its unnormalised features')."""
        images = ctx.images()[0][kept]
        text = ctx.texts(prompts)
        if (same := indistinguishable(prompts, text)) is not None:
            warnings.append(same)
        if self.settings.ranking == "dvl":  # DVL's measuring_bias.py:79,95,114: unnormalised image . normalised text
            images = ctx.raw_images()[kept]
        with np.errstate(invalid="ignore", over="ignore"):  # refused by score, naming an image and a prompt
            return images @ text.T  # (images, queries)

    def settings_for(self, scorer: Scorer) -> tuple[RetrievalSettings, list[str]]:
        """A model that is asked ranks images by the log-likelihood of each prompt as its answer: a ranking
        needs a score per image, which its open-ended answer and DVL's image norms are not."""
        s = self.settings
        if scorer.asks and s.generative.mode == "generate":
            raise ProbeError("retrieval: setting generative.mode = 'generate': a ranking needs every image's score for "
                             "every prompt, which one generated answer per image does not give; use 'likelihood'")
        if s.ranking == "dvl":
            scorer.require("embeds", "setting ranking = 'dvl' weights images by the norm of a contrastive model's "
                                     "image features", "retrieval",
                           "use ranking=cosine (a generative model ranks by the prompts' log-likelihoods)")
        return s, []

    # ---- the samples' part -------------------------------------------------------------------
    def _measured(self, samples: Samples) -> list[tuple[str, list[str], np.ndarray]]:
        """(attribute, group names, each image's group code) of every attribute with two groups or more."""
        from vlfair import stats

        found: list[tuple[str, list[str], np.ndarray]] = []
        for attribute in self.settings.attributes:
            names, codes = stats.encode_groups(samples.column(attribute).tolist())
            if len(names) >= 2:
                _check_k(self.settings.k, attribute, names)
                found.append((attribute, names, codes))
        return found

    def _design(self, names: list[str], codes: np.ndarray, attribute: str, concepts: list[str]) -> _Design:
        s = self.settings
        groups = len(names)
        p_stars = tuple(np.full(groups, 1 / groups) if t == "uniform"
                        else np.bincount(codes, minlength=groups) / codes.size for t in s.targets)
        distinct_concepts = list(dict.fromkeys(concepts))
        member = np.array([[c == name for c in concepts] for name in distinct_concepts], dtype=float)
        member /= member.sum(axis=1, keepdims=True)
        pair = (0, 1) if attribute == "gender" and groups == 2 else None  # Bias@k = (first - second) / k, sorted names
        return _Design(s.k, p_stars, s.zero_count, member, pair)

    def _quantities(self, attribute: str, names: list[str], design: _Design, concepts: list[str]) -> list[_Quantity]:
        """Every metric of one attribute, as the run reports it and compare compares it."""
        s = self.settings
        found: list[_Quantity] = []
        for t, target in enumerate(s.targets):
            subset = {"attribute": attribute, "target": target, "k": s.k}
            for name in ("max_skew", "min_skew", "ndkl"):
                found.append(_Quantity(name, subset, _read(name, t)))
            distinct_concepts = list(dict.fromkeys(concepts))
            for c, concept in enumerate(distinct_concepts):
                found.append(_Quantity("max_skew", {**subset, "concept": concept}, _read("concept_max_skew", c, t)))
                for g, group in enumerate(names):
                    found.append(_Quantity("skew", {**subset, "concept": concept, "group": group},
                                           _read("concept_skew", c, g, t)))
            if s.per_template:  # each template's query of each concept (templates outer: query j * C + c)
                for j in range(len(concepts) // len(distinct_concepts)):
                    for c, concept in enumerate(distinct_concepts):
                        query = j * len(distinct_concepts) + c
                        cell = {**subset, "concept": concept, "phrasing": j + 1}
                        found.append(_Quantity("max_skew", cell, _read_query("max_skew", query, t)))
                        found += [_Quantity("skew", {**cell, "group": group}, _read("skew", query, g, t))
                                  for g, group in enumerate(names)]
        if design.pair is not None:
            found.append(_Quantity("bias_at_k", {"attribute": attribute, "groups": f"{names[0]} - {names[1]}",
                                                 "k": s.k}, _read("bias_at_k")))
        return found

    def _prompt_intervals(self, point: dict[str, Any], quantities: list[_Quantity]) -> list[dict[str, Any]]:
        """Each mean over all prompts also gets an interval over the prompts (the images as they are):
        how much the number owes to which templates and concepts were asked. The prompts are a cross
        of the two, each with its own effects, so both are resampled, independently (the pigeonhole
        bootstrap, Owen 2007, mildly conservative); resampling the 319 prompts one by one would treat
        the 11 prompts of one concept as 11 independent draws. In the metric's details."""
        from vlfair import stats

        s = self.settings
        if not s.bootstrap:
            return [{} for _ in quantities]
        templates, concepts = len(s.query_templates), len(s.concepts)
        rng = np.random.default_rng(np.random.SeedSequence(s.seed).spawn(2)[1])
        rows = rng.integers(0, templates, size=(s.bootstrap, templates))[:, :, None]
        columns = rng.integers(0, concepts, size=(s.bootstrap, concepts))[:, None, :]
        found: list[dict[str, Any]] = []
        for quantity in quantities:
            if "concept" in quantity.subset:  # a concept's (or one template's) query: no cross of prompts
                found.append({})
                continue
            values = point["per_query"][quantity.name][0]  # (queries[, targets]), templates outer
            if values.ndim == 2:
                values = values[:, s.targets.index(quantity.subset["target"])]
            grid = values.reshape(templates, concepts)
            low, high = stats.percentile_interval(grid[rows, columns].mean(axis=(1, 2)), s.confidence)
            found.append({"ci_over_prompts": [float(low), float(high)]})
        return found

    def analyze(self, samples: Samples) -> Output:
        from vlfair import measures

        s = self.settings
        prompts, concepts = samples.facts["queries"], samples.facts["concepts"]
        scores = np.stack([samples.column(SCORE + p) for p in prompts])  # (queries, images)
        out = Output(settings={k: v for k, v in samples.facts.items() if k not in ("queries", "concepts")},
                     notes=[*s.notes, _ranking_note(samples.facts.get("ranking", s.ranking),
                                                    samples.facts.get("question"))],
                     warnings=list(samples.warnings))
        measured = self._measured(samples)
        for unmeasured in s.attributes:
            if unmeasured not in [m[0] for m in measured]:
                out.warnings.append(f"{unmeasured}: one group only among the images evaluated: no skew to measure")
        # every prompt re-ranked in every resample of the images, drawn within the attribute's groups
        declared = self.declare(samples)
        out.metrics = evaluate(samples, [*declared, *self._pooled(declared)], self.facts, **s.evaluation)
        by_template = phrasing.found_table(
            [m for m in out.metrics if "phrasing" in m.subset], "skew",
            lambda subset: {k: subset[k] for k in ("attribute", "target", "concept", "group")}, s.query_templates,
            lambda metric, pooled: phrasing.excludes_0(metric.ci, pooled.value),
            f"Each concept's Skew@{s.k} of each group (> 0: over-retrieved)", "interval excludes 0",
            "every template is the study's, and pooled is its per-concept value")
        if by_template is not None and s.bootstrap:  # (without intervals nothing is found, nor tested)
            out.tables["phrasings"] = by_template
        # every image's order by each prompt, the same for every attribute (the groups do not rank)
        order = measures.top_k_order(scores, measures.prefix_length(s.k, len(samples.frame)))
        found = {(m.name, repr(m.subset)): m for m in out.metrics}
        for attribute, names, codes in measured:
            _warn_small_groups(out.warnings, attribute, names, codes, s.k, s.targets)
            design = self._design(names, codes, attribute, concepts)
            point = design.statistics(*measures.resampled_top_k(scores, codes, s.k, np.arange(codes.size)[None],
                                                                design.p_stars, order))
            quantities = self._quantities(attribute, names, design, concepts)
            for quantity, details in zip(quantities, self._prompt_intervals(point, quantities)):
                metric = found.get((quantity.name, repr(quantity.subset)))
                if metric is not None:  # beside what evaluate gave it (a test's p-value method, its null mean)
                    metric.details = {**(metric.details or {}), **details}
            self._tables(out, attribute, names, prompts, point, s.k)
        self._figures(out)
        return out

    def _tables(self, out: Output, attribute: str, names: list[str], prompts: list[str], point: dict,
                k: int) -> None:
        """Per concept (MaxSkew and Skew per group, with intervals) and per prompt (the group it over-retrieves)."""
        import pandas as pd

        for t, target in enumerate(self.settings.targets):
            rows = []
            for metric in out.metrics:
                subset = metric.subset
                if (subset.get("attribute") != attribute or subset.get("target") != target or "concept" not in subset
                        or "phrasing" in subset):
                    continue
                column = "MaxSkew" if metric.name == "max_skew" else f"Skew {subset['group']}"
                rows.append({"concept": subset["concept"], "column": column, "value": metric.value,
                             "low": None if metric.ci is None else metric.ci[0],
                             "high": None if metric.ci is None else metric.ci[1]})
            frame = pd.DataFrame(rows)
            table = frame.pivot(index="concept", columns="column", values="value")
            table = table[["MaxSkew", *[f"Skew {g}" for g in names]]].loc[list(dict.fromkeys(frame["concept"]))]
            if self.settings.bootstrap:
                bounds = frame[frame["column"] == "MaxSkew"].set_index("concept")
                table.insert(1, "MaxSkew CI low", bounds["low"])
                table.insert(2, "MaxSkew CI high", bounds["high"])
            out.tables[f"skew_by_concept_{attribute}_{target}"] = table
            skew = point["skew"][0, :, :, t]  # (queries, groups)
            out.tables[f"over_retrieved_{attribute}_{target}"] = pd.DataFrame(
                {"prompt": prompts, "over-retrieved group": [names[g] for g in skew.argmax(axis=1)],
                 f"MaxSkew@{k}": skew.max(axis=1), "under-retrieved group": [names[g] for g in skew.argmin(axis=1)],
                 f"MinSkew@{k}": skew.min(axis=1)}).set_index("prompt")

    def _figures(self, out: Output) -> None:
        """Per attribute: MaxSkew per concept for each target (intervals as error bars), and each
        concept's Skew per group for the first target. Names and layouts do not depend on the
        model, so the report puts runs on shared scales."""
        import pandas as pd

        from vlfair.report import plots

        s = self.settings
        for attribute in dict.fromkeys(m.subset["attribute"] for m in out.metrics):
            per_concept = [m for m in out.metrics if m.name == "max_skew" and "concept" in m.subset
                           and m.subset["attribute"] == attribute and "phrasing" not in m.subset]
            concepts = list(dict.fromkeys(m.subset["concept"] for m in per_concept))
            bars = pd.DataFrame({t: [m.value for m in per_concept if m.subset["target"] == t] for t in s.targets},
                                index=pd.Index(concepts, name="concept"))
            errors = None if not s.bootstrap else pd.DataFrame(
                {t: [m.ci for m in per_concept if m.subset["target"] == t] for t in s.targets}, index=bars.index)
            out.figure(f"max_skew_by_concept_{attribute}", plots.grouped_bars, bars, errors,
                       f"MaxSkew@{s.k} of {attribute} per concept (mean over its templates)",
                       "MaxSkew@k (0: the target's shares)", xlabel="concept", neutral=neutral_value("max_skew"),
                       legend_title="target")
            target = s.targets[0]
            cells = [m for m in out.metrics if m.name == "skew" and m.subset["attribute"] == attribute
                     and m.subset["target"] == target and "phrasing" not in m.subset]
            grid = pd.DataFrame([{"concept": m.subset["concept"], "group": m.subset["group"], "skew": m.value}
                                 for m in cells]).pivot(index="concept", columns="group", values="skew")
            out.figure(f"skew_by_group_{attribute}", plots.heatmap, grid.loc[concepts],
                       f"Skew@{s.k} of each {attribute} group per concept ({target} target; > 0: over-retrieved)",
                       f"Skew@{s.k}", xlabel=attribute, ylabel="concept")

    # ---- two models on the same images --------------------------------------------------------
    def declare(self, samples: Samples) -> list[Declared]:
        """Per attribute, every metric of the run, recomputed from the scores by :class:`_PairedRanking`
        (each resample and relabelling re-ranks every prompt)."""
        prompts, concepts = samples.facts["queries"], samples.facts["concepts"]
        columns = tuple(SCORE + p for p in prompts)
        if len(samples.frame) <= self.settings.k:  # the runs' common rows (compare --on-common-rows) can be few
            raise ProbeError(f"retrieval: the runs share {len(samples.frame)} images, not more than k = "
                             f"{self.settings.k}: their top k would be every image; compare runs that share more")
        if self.settings.per_template and concepts != list(self.settings.concepts) * len(self.settings.query_templates):
            raise ProbeError("retrieval: setting per_template reads each template's query of each concept, templates "
                             "outer; these samples' queries are not the settings' query_templates x concepts")
        metrics = []
        for attribute, names, codes in self._measured(samples):
            design = self._design(names, codes, attribute, concepts)
            engine = functools.partial(_PairedRanking, design)
            metrics += [Declared(q.name, q.subset, Custom(columns, _reading(q.read), engine=engine, recentre=True),
                                 group=attribute, report=reporters.top_k)
                        for q in self._quantities(attribute, names, design, concepts)]
        return metrics

    def _pooled(self, declared: list[Declared]) -> list[Declared]:
        """With ``per_template``: each concept's per-template metrics pooled over the templates."""
        return phrasing.pool([m for m in declared if "phrasing" in m.subset], len(self.settings.query_templates))


def _read_query(key: str, query: int, target: int) -> Callable[[dict[str, Any]], np.ndarray]:
    """The (b,) values of one query's statistic ``key`` (max_skew, min_skew, ndkl) for one target."""
    return lambda statistics: statistics["per_query"][key][:, query, target]


def _reading(read: Callable[[dict[str, np.ndarray]], np.ndarray]) -> Callable[..., Callable]:
    """A quantity's reading of the engine's statistics, as a Custom statistic makes it."""
    return lambda at, code: read


def _read(key: str, *index: int) -> Callable[[dict[str, Any]], np.ndarray]:
    """The (b,) values of one statistic: ``key``'s array at ``index`` after its resample axis."""
    where = (slice(None),) + index
    return lambda statistics: statistics[key][where]


class _PairedRanking:
    """paired.compare's engine for rankings: models A and B (their (n, queries) scores) on the same
    images. A resample re-ranks both by :func:`vlfair.measures.resampled_top_k` on the same draws. A
    relabelling gives A' model B's score in the swapped rows: the scores of two models are on
    different scales, so each model's scores become its ranks first (a ranking's statistics depend
    on nothing else), and A' ranks 2n virtual items (A's n images at places 0, 2, 4, ... in A's order,
    B's at 1, 3, 5, ... in B's: at an equal rank, the model relabelled comes first) of which it
    holds A's unswapped rows and B's swapped ones; B' likewise, B's images first."""

    def __init__(self, design: _Design, row_set: Any, a: np.ndarray, b: np.ndarray):
        from vlfair import measures

        self.design, self.row_set = design, row_set
        self.one = b is a  # one model (a run's own numbers): ranked once, never relabelled
        self.codes = np.asarray(row_set.groups)
        self.scores = (np.ascontiguousarray(a.T), np.ascontiguousarray(b.T))  # (queries, n) each
        n = self.codes.size
        m = measures.prefix_length(design.k, n)
        self.orders = tuple(measures.top_k_order(s, m) for s in self.scores[:1 if self.one else 2])
        if self.one:
            return
        ranks = [np.empty(s.shape) for s in self.scores]
        for rank, s in zip(ranks, self.scores):  # each image's place in the model's ranking of each query
            np.put_along_axis(rank, measures.top_k_order(s, n), np.arange(n, dtype=float)[None], axis=1)
        self.virtual = (np.concatenate([-2 * ranks[0], -2 * ranks[1] - 1], axis=1),  # (queries, 2n): A' ranks
                        np.concatenate([-2 * ranks[0] - 1, -2 * ranks[1]], axis=1))  # B' ranks
        self.virtual_codes = np.concatenate([self.codes, self.codes])
        # whole-number ranks, all different: only equal ones would tie, never a rounding (exact)
        self.virtual_orders = tuple(measures.top_k_order(v, min(2 * n, 2 * m), exact=True) for v in self.virtual)

    def _evaluate(self, statistics: dict[str, np.ndarray]) -> np.ndarray:
        return np.stack([np.asarray(s.function(statistics), dtype=float) for s in self.row_set.statistics], axis=1)

    def _ranked(self, model: int, indices: np.ndarray) -> np.ndarray:
        from vlfair import measures

        d = self.design
        return self._evaluate(d.statistics(*measures.resampled_top_k(self.scores[model], self.codes, d.k, indices,
                                                                      d.p_stars, self.orders[model])))

    def point(self) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.resampled(np.arange(self.codes.size)[None])
        return a[0], b[0]

    def resampled(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        first = self._ranked(0, indices)
        return first, first if self.one else self._ranked(1, indices)  # one model (a run): ranked once

    def relabelled(self, order: np.ndarray) -> np.ndarray:
        """(b, M) statistics of model A with its images' groups permuted (image i takes image ``order[r, i]``'s):
        each query's ranking stays, only who is in its top k changes."""
        from vlfair.measures.ranking import relabelled_top_k

        d = self.design
        best = self.orders[0][:, :d.k]  # each query's top k at the data (its ranking, kept)
        groups = int(self.codes.max()) + 1
        return self._evaluate(d.statistics(*relabelled_top_k(self.codes[order][:, best], groups, d.p_stars)))

    def swapped_difference(self, swaps: np.ndarray) -> np.ndarray:
        from vlfair import measures

        d, n = self.design, self.codes.size
        own = np.arange(n)[None]
        values = []
        for model, held in enumerate((np.where(swaps, own + n, own), np.where(swaps, own, own + n))):  # A', B'
            values.append(self._evaluate(d.statistics(*measures.resampled_top_k(
                self.virtual[model], self.virtual_codes, d.k, held, d.p_stars, self.virtual_orders[model],
                exact=True))))
        return values[0] - values[1]


_RANKINGS = {
    "cosine": "cosine similarity of the L2-normalised image and text embeddings.",
    "dvl": "debias-vision-lang's: the unnormalised image embedding . the L2-normalised text embedding "
           "(measuring_bias.py:79,95,114), so images with larger features rank higher.",
    "log_likelihood": "a generative model's log-likelihood of the prompt as its answer to {question!r} about each "
                      "image.",
}


def _ranking_note(ranking: str, question: str | None) -> str:
    return "Ranking: " + _RANKINGS[ranking].format(question=question)


def _balance_gender(genders: np.ndarray, seed: int | None) -> tuple[np.ndarray, dict[str, Any]]:
    """As many images of each gender as of the rarest, the others drawn down with ``seed`` (DVL's
    equal_split, datasets.py:53-78). Returns the positions kept (in order) and the record for
    results.json: the count per gender before, and after."""
    genders = np.asarray(genders).astype(str)
    present, counts = np.unique(genders, return_counts=True)
    if present.size < 2:
        raise ProbeError(f"retrieval: setting balance_gender: the images hold one gender only ({present.tolist()}): "
                         "there is nothing to balance; set balance_gender=false")
    size = int(counts.min())
    rng = np.random.default_rng(seed)
    kept = np.sort(np.concatenate([rng.choice(np.flatnonzero(genders == g), size=size, replace=False)
                                   for g in present]))
    return kept, {"seed": seed, "per_gender_before": dict(zip(present.tolist(), counts.tolist())),
                  "per_gender_after": size}


def _refuse_emptied(attribute: str, before: np.ndarray, after: np.ndarray) -> None:
    gone = sorted(set(map(str, before)) - set(map(str, after)))
    if gone:
        raise ProbeError(f"retrieval: setting balance_gender: after balancing the genders, {attribute} group(s) "
                         f"{gone} have no images (they were all of the drawn-down gender); set balance_gender=false "
                         f"or measure attributes without {attribute}")


def _check_k(k: int, attribute: str, names: list[str]) -> None:
    from vlfair.measures import top_k_groups_problem

    problem = top_k_groups_problem(k, len(names))
    if problem:
        raise ProbeError(f"retrieval: setting k = {k}, {attribute} ({', '.join(map(str, names))}): {problem}")


def _warn_small_groups(warnings: list[str], attribute: str, names: list[str], codes: np.ndarray, k: int,
                       targets: Sequence[str]) -> None:
    """A group with fewer images than the uniform target's share of k cannot reach that share, however
    a model ranks: its Skew@k against that target is below 0 for every model."""
    if "uniform" not in targets:
        return
    counts = np.bincount(codes, minlength=len(names))
    short = [f"{names[g]} ({counts[g]})" for g in range(len(names)) if counts[g] < k / len(names)]
    if short:
        warnings.append(f"{attribute}: k = {k} asks each of its {len(names)} groups for {k / len(names):g} images "
                        f"against the uniform target, but {', '.join(short)} have fewer: their Skew@k is below 0 for "
                        "any model; a smaller k lets every group reach its share")

