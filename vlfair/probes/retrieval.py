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

from typing import Annotated, Literal

import numpy as np
from pydantic import AfterValidator, Field

from vlfair.outputs import Metric, metric_from
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

        from vlfair import measures

        s = self.settings
        prompts = samples.facts["queries"]
        concepts = [concept for concept, _ in self.queries()]
        scores = np.stack([samples.column(p) for p in prompts])  # (queries, images)
        out = Output(settings=dict(samples.facts), notes=list(s.notes), warnings=list(samples.warnings))
        for attribute in s.attributes:
            groups = samples.column(attribute)
            for target in s.targets:
                subset = {"attribute": attribute, "target": target, "k": s.k}
                result = measures.ranking_skew(scores, groups.tolist(), k=s.k, target=target, zero_count=s.zero_count,
                                               **s.resampling)
                out.metrics.append(metric_from("max_skew", subset, result, "max_skew", "max_skew_ci"))
                out.metrics.append(metric_from("ndkl", subset, result, "ndkl", "ndkl_ci"))
                out.metrics.append(metric_from("min_skew", subset, result, "min_skew", "min_skew_ci"))
                if result["bias_at_k"] is not None and target == "uniform":
                    out.metrics.append(metric_from("bias_at_k", {**subset, "pair": "/".join(result["bias_pair"])},
                                                   result, "bias_at_k", "bias_at_k_ci"))
                per_concept = pd.DataFrame({"concept": concepts, "max_skew": result["max_skew_per_query"],
                                            "ndkl": result["ndkl_per_query"]}).groupby("concept", sort=False).mean()
                out.tables[f"skew_by_concept_{attribute}_{target}"] = per_concept
                out.metrics += [Metric("max_skew", {**subset, "concept": c}, float(v))
                                for c, v in per_concept["max_skew"].items()]
        return out


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
