"""Retrieval skew (WORK IN PROGRESS, issue 31): the images a model retrieves for a text query, by group.

oxai/debias-vision-lang's experiment (DVL, "A Prompt Array Keeps the Bias Away", 2022): for each of
its 319 prompts (11 templates x 29 concepts), rank FairFace's validation images by similarity and
measure how far the gender, race and age shares of the top k are from a target: MaxSkew@k and
NDKL@k against the uniform target (DVL's eq_opp) and the evaluated set's shares (dem_par), the mean
over prompts as DVL reports it, with vlfair's intervals (measures.ranking_skew: items resampled
within their group, every prompt re-ranked) and a per-concept table beside it.

Still to do (see the issue): DVL's unnormalised ranking as a setting, per-concept intervals and the
over-retrieved group, figures, comparisons() for vlfair compare, the demo world's planted skew, the
bad-input messages, README.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

import numpy as np
from pydantic import AfterValidator, Field

from vlfair.outputs import Metric
from vlfair.probes import register
from vlfair.probes.base import Context, Output, Probe, ProbeError, indistinguishable
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


class RetrievalSettings(ProbeSettings, Bootstrap):
    query_templates: Annotated[list[Annotated[Text, AfterValidator(placeholders(""))]],
                               AfterValidator(distinct(same_text))] = Field(
        min_length=1, description="query templates, each with one {} for the concept")
    concepts: Annotated[list[Name], AfterValidator(distinct(same_text))] = Field(
        min_length=1, description="the concepts put into every template")
    attributes: Annotated[list[Attribute], AfterValidator(distinct())] = Field(
        min_length=1, description="the attributes whose shares in the top k are measured: gender, race, age")
    k: Count = Field(description="images retrieved per query, below the number of images evaluated")
    targets: Annotated[list[Target], AfterValidator(distinct())] = Field(
        min_length=1, description="uniform (DVL's eq_opp) and/or dataset (dem_par: the evaluated set's shares)")
    zero_count: Literal["dvl", "smoothed"] = Field(
        description="a group absent from the top k: dvl counts it as 1/k; smoothed adds 0.5 to every count")
    balance_gender: Flag = Field(description="as many men as women, the larger gender drawn down (DVL's equal_split)")
    ranking: Literal["cosine"] = Field(description="how images are ranked for a query (cosine of the embeddings)")


@register
class RetrievalProbe(Probe):
    name = "retrieval"
    Settings = RetrievalSettings
    help = "skew of the images retrieved for text queries, by gender, race and age (DVL)"
    description = ("MaxSkew@k and NDKL@k of the gender, race and age of the k images a model retrieves for each of "
                   "debias-vision-lang's 319 prompts, against uniform and dataset targets, with intervals. "
                   "Data: the fairface schema (vlfair prepare fairface, or synthetic:fairface).")
    schemas = ("fairface",)
    required_columns = {"fairface": ("image", "gender", "race", "age")}
    settings: RetrievalSettings

    def draws_with_seed(self) -> bool:
        return self.settings.balance_gender  # the seed draws which men are kept

    def queries(self) -> list[tuple[str, str]]:
        """(concept, prompt) of every query, templates outer (as DVL forms them)."""
        s = self.settings
        return [(concept, template.format(concept)) for template in s.query_templates for concept in s.concepts]

    def score(self, ctx: Context, schema: str | None) -> Samples:
        import pandas as pd

        s = self.settings
        if s.balance_gender:
            ctx.dataset = _balanced_gender(ctx.dataset, 1 if s.seed is None else s.seed)
        images, rows = ctx.images()
        if s.k >= len(rows):
            raise ProbeError(f"setting k = {s.k}: MaxSkew needs k below the number of images evaluated ({len(rows)}): "
                             "with every image retrieved the shares are the dataset's, whatever the model; use a k "
                             f"of at most {len(rows) - 1}")
        queries = self.queries()
        text = ctx.texts([prompt for _, prompt in queries])
        warnings = []
        if (same := indistinguishable([p for _, p in queries], text)) is not None:
            warnings.append(same)
        frame = ctx.identity(rows)
        for attribute in s.attributes:
            frame[attribute] = ctx.column(attribute, rows)
        scores = images @ text.T  # (images, queries): cosine, both sides unit vectors
        for q, (_, prompt) in enumerate(queries):
            frame[prompt] = scores[:, q]
        return Samples(pd.DataFrame(frame), {"queries": [p for _, p in queries], "images": int(len(rows))}, warnings)

    def analyze(self, samples: Samples) -> Output:
        import pandas as pd

        from vlfair import stats
        from vlfair.report import plots

        s = self.settings
        prompts = samples.facts["queries"]
        concepts = [concept for concept, _ in self.queries()]
        scores = np.stack([samples.column(p) for p in prompts])  # (queries, images)
        out = Output(settings=dict(samples.facts), notes=list(s.notes), warnings=list(samples.warnings))
        for attribute in s.attributes:
            bars, errors = {}, {}
            names, codes = stats.encode_groups(samples.column(attribute).tolist())
            if len(names) < 2:
                out.warnings.append(f"{attribute}: only {names} among the images evaluated: no skew to measure")
                continue
            found = _skews(scores, codes, s.k, s.targets, s.zero_count, concepts, s.bootstrap, s.confidence, s.seed)
            for t, target in enumerate(s.targets):
                subset = {"attribute": attribute, "target": target, "k": s.k}
                for name in ("max_skew", "min_skew", "ndkl"):
                    value, ci = found[name]
                    out.metrics.append(Metric(name, subset, float(value[t]), None if ci is None else ci[:, t].tolist()))
                by_concept = found["by_concept"]
                rows = []
                for c, concept in enumerate(found["concepts"]):
                    value, ci = by_concept
                    rows.append({"concept": concept, "max_skew": value[c, t],
                                 "CI low": None if ci is None else ci[0, c, t],
                                 "CI high": None if ci is None else ci[1, c, t]})
                    out.metrics.append(Metric("max_skew", {**subset, "concept": concept}, float(value[c, t]),
                                              None if ci is None else ci[:, c, t].tolist()))
                table = pd.DataFrame(rows).set_index("concept")
                out.tables[f"skew_by_concept_{attribute}_{target}"] = table
                bars[target] = table["max_skew"]
                errors[target] = [[low, high] for low, high in zip(table["CI low"], table["CI high"])]
                skew = found["skew"][:, :, t]  # (queries, groups), point values
                out.tables[f"over_retrieved_{attribute}_{target}"] = pd.DataFrame(
                    {"prompt": prompts, "group": [names[g] for g in skew.argmax(axis=1)], "skew": skew.max(axis=1)}
                ).set_index("prompt")
            if bars:  # the figure's name and layout do not depend on the model: the report shares its scale
                frame = pd.DataFrame(bars).rename_axis("concept")
                intervals = None if s.bootstrap == 0 else pd.DataFrame(errors, index=frame.index)
                out.figures[f"max_skew_by_concept_{attribute}"] = plots.grouped_bars(
                    frame, intervals, f"MaxSkew@{s.k} of {attribute} per concept (mean over its templates)",
                    "MaxSkew@k (0: the target's shares)", xlabel="concept", neutral=0.0, legend_title="target")
        return out


def _skews(scores: np.ndarray, codes: np.ndarray, k: int, targets: Sequence[str], zero_count: str, concepts: list[str],
           bootstrap: int, confidence: float, seed: int | None) -> dict:
    """MaxSkew, MinSkew and NDKL: means over queries, MaxSkew per concept (mean over its templates)
    and each query's Skew per group, for every target, with intervals from one stratified bootstrap
    over the images (every query re-ranked in every resample)."""
    from vlfair import measures, stats

    groups = int(codes.max()) + 1
    p_stars = [np.full(groups, 1 / groups) if t == "uniform" else np.bincount(codes, minlength=groups) / codes.size
               for t in targets]
    names = list(dict.fromkeys(concepts))
    member = np.array([[concept == name for concept in concepts] for name in names], dtype=float)
    member /= member.sum(axis=1, keepdims=True)  # (concepts, queries): the mean over a concept's templates
    order = measures.top_k_order(scores, min(codes.size, k + int(8 * np.sqrt(k)) + 64))

    def statistics(indices: np.ndarray) -> dict[str, np.ndarray]:
        counts, ndkl = measures.resampled_top_k(scores, codes, k, indices, p_stars, order)
        shares = (np.where(counts > 0, counts, 1.0) / k if zero_count == "dvl"
                  else (counts + measures.SMOOTHING) / (k + measures.SMOOTHING * groups))
        skew = np.log(shares[..., None] / np.stack(p_stars, axis=1))  # (b, queries, groups, targets)
        maximum = skew.max(axis=2)
        return {"max_skew": maximum.mean(axis=1), "min_skew": skew.min(axis=2).mean(axis=1),
                "ndkl": ndkl.mean(axis=1), "by_concept": np.einsum("cq,bqt->bct", member, maximum), "skew": skew}

    point = statistics(np.arange(codes.size)[None])
    found: dict = {"concepts": names, "skew": point["skew"][0]}
    resampled: dict[str, list] = {name: [] for name in ("max_skew", "min_skew", "ndkl", "by_concept")}
    if bootstrap:
        for indices in stats.stratified_resamples(codes, bootstrap, seed):
            values = statistics(indices)
            for name in resampled:
                resampled[name].append(values[name])
    for name in resampled:
        ci = stats.percentile_interval(np.concatenate(resampled[name]), confidence) if bootstrap else None
        found[name] = (point[name][0], ci)
    return found


def _balanced_gender(dataset, seed: int):
    """As many men as women: the larger gender drawn down, seeded (DVL's equal_split, DS:66-78)."""
    genders = np.asarray(dataset["gender"])
    kept = []
    rng = np.random.default_rng(seed)
    size = min(int((genders == g).sum()) for g in np.unique(genders))
    for gender in np.unique(genders):
        rows = np.flatnonzero(genders == gender)
        kept.append(np.sort(rng.choice(rows, size=size, replace=False)))
    return dataset.select(np.sort(np.concatenate(kept)).tolist())
