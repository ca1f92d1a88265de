"""The studies' published numbers beside each run's own.

Each probe with a study table ships ``published/<probe>.yaml``: the tables typed as printed
(tab-separated rows), the label translations (printed -> vlfair's) and the printed model names
with the transformers Hub id of the same model where there is one. A run whose model is one of
those ids gets, for every published cell it measured, ``{source, model, metric, subset,
published, printed, measured, ci, within_ci}`` in results.json's ``published`` list and a "published
vs this run" table; every other model's published rows are shown as references. Tables show each
number as printed (``printed``: "7.60", "+0.373", "8.88e-175"), never in vlfair's digits.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from importlib import resources
from typing import TYPE_CHECKING, Any

import yaml

from vlfair.outputs import Metric

if TYPE_CHECKING:  # imported where a table is built: the probes' descriptions load without pandas
    import pandas as pd


@dataclasses.dataclass(frozen=True)
class PublishedCell:
    source: str            # e.g. "001 Table 1"
    model: str             # as printed
    hub_id: str | None     # the same model on the Hub (transformers), None when there is none
    metric: str            # the vlfair metric it compares with
    field: str             # "value" or "p_value" of that metric
    subset: dict[str, Any]
    published: float       # as printed
    scale: float = 1.0     # printed = scale x vlfair's value (100 for percentages)
    row: tuple = ()        # the printed table's row labels as (key, label) pairs, model included
    column: str = ""       # the printed table's column label
    printed: str = ""      # the number exactly as printed ("7.60", "8.88e-175"): what tables show
    # an F-test's degrees of freedom in the study ({df_between, df_within}): its effect size is read from them
    design: dict[str, float] | None = None


BUILTIN = resources.files("vlfair.probes")  # the built-in probes' folder


@functools.cache
def _read(file: str, directory: Any = BUILTIN) -> dict[str, Any]:
    """``published/<file>`` in the probe's folder, parsed once per process."""
    return yaml.safe_load(directory.joinpath("published", file).read_text(encoding="utf-8"))


def load_published(file: str, directory: Any = BUILTIN) -> list[PublishedCell]:
    """Every cell of ``published/<file>``."""
    spec = _read(file, directory)
    labels, models = spec.get("labels", {}), spec["models"]
    cells = []
    for table in spec["tables"]:
        cells += _table_cells(table, labels, models)
    return cells


def _table_cells(table: dict[str, Any], labels: dict[str, str], models: dict[str, str | None]) -> list[PublishedCell]:
    header, *rows = [line.split("\t") for line in table["text"].strip("\n").splitlines()]
    row_keys, column_key = table["row_keys"], table.get("column_key")
    columns = header[len(row_keys):]  # the header's first cells name the row keys
    if not column_key and len(columns) != 1:
        raise ValueError(f"{table['source']}: a table without a column_key has one value column, not {columns}")
    cells = []
    for number, row in enumerate(rows, start=1):
        names, values = row[:len(row_keys)], row[len(row_keys):]
        if len(values) != len(columns):
            raise ValueError(f"{table['source']}: row {number} has {len(values)} values for {len(columns)} columns")
        keyed = dict(zip(row_keys, names))
        row_labels = tuple((k, labels.get(v, v)) for k, v in keyed.items())
        model = keyed.pop("model", table.get("model"))
        if model not in models:
            raise ValueError(f"{table['source']}: model {model!r} is not in the file's models")
        for column, value in zip(columns, values):
            subset = {**table.get("subset", {}), **{k: labels.get(v, v) for k, v in keyed.items()}}
            if column_key:
                subset[column_key] = labels.get(column, column)
            cells.append(PublishedCell(table["source"], model, models[model], table["metric"],
                                       table.get("field", "value"), subset, float(value), float(table.get("scale", 1)),
                                       row_labels, labels.get(column, column), value.strip(), table.get("design")))
    return cells


def hub_id(spec: str) -> str | None:
    """The model a spec loads, as the published files write it: ``hf:ORG/NAME@REV`` -> ``org/name``;
    ``mclip:TEXT[+IMAGE]`` -> ``mclip:text+image`` (the default image tower filled in); None for
    anything else, and for a spec any part of which loads from a local directory, whatever its
    name (``./openai/clip-vit-base-patch32``, or ``openai/clip-vit-base-patch32`` where such a
    folder is in the working directory): the studies' numbers are about the Hub's model, and a
    folder's weights may be anything (``hub.hub_reference`` decides, by the rule loading follows)."""
    from vlfair.models import parse_spec
    from vlfair.models.hub import hub_reference

    def hub(ref: str) -> str | None:
        found = hub_reference(ref)
        return found[0].lower() if found else None

    try:
        prefix, ref = parse_spec(spec)
    except ValueError:
        return None
    if prefix == "mclip":
        from vlfair.models.mclip import IMAGE_TOWERS

        text, _, image = ref.partition("+")
        text_id, image_id = hub(text), hub(image or IMAGE_TOWERS.get(text.partition("@")[0], ""))
        return f"mclip:{text_id}+{image_id}" if text_id and image_id else None
    return hub(ref) if prefix == "hf" else None


def _key(subset: dict[str, Any]) -> tuple:
    return tuple(sorted((str(k), str(v)) for k, v in subset.items()))


def compare(cells: list[PublishedCell], metrics: list[Metric], spec: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(the ``published`` list of results.json, warnings) for the cells of the run's own model."""
    model = hub_id(spec)
    measured = {(m.name, _key(m.subset)): m for m in metrics}
    rows: list[dict[str, Any]] = []
    unmeasured: dict[str, list[PublishedCell]] = {}
    for cell in cells:
        if cell.hub_id is None or cell.hub_id.lower() != model:
            continue
        metric = measured.get((cell.metric, _key(cell.subset)))
        if metric is None:
            unmeasured.setdefault(cell.source, []).append(cell)
            continue
        value = getattr(metric, cell.field)
        scaled = cell.field == "value" and metric.ci and None not in metric.ci
        ci = [b * cell.scale for b in metric.ci] if scaled and metric.ci else None
        rows.append({"source": cell.source, "model": cell.model, "metric": cell.metric, "field": cell.field,
                     "subset": cell.subset, "published": cell.published, "printed": cell.printed,
                     "measured": None if value is None else value * (cell.scale if cell.field == "value" else 1),
                     "ci": ci, "within_ci": None if ci is None else bool(ci[0] <= cell.published <= ci[1]),
                     **_effects(cell, metric)})
    warnings = [f"{source}: {len(missing)} published cell(s) of {missing[0].model} were not measured by this run "
                f"(e.g. {missing[0].metric} {_label(missing[0].subset)})" for source, missing in unmeasured.items()]
    return rows, warnings


def _effects(cell: PublishedCell, metric: Metric) -> dict[str, Any]:
    """An F's comparison by effect size, where the study states its design: F and p grow with the images, so the
    study's F from 2,000 images a cell and a run's from 50 are not comparable, while their omega squared is
    (``stats.f_effect``). The study's effect (from its F and degrees of freedom), the run's with its interval,
    whether the study's lies inside it, and whether the designs differ (other degrees of freedom)."""
    from vlfair import stats

    if cell.design is None or cell.field != "value" or metric.value is None:
        return {}
    published, _ = stats.f_effect(cell.published, cell.design["df_between"], cell.design["df_within"])
    effect = (metric.details or {}).get("omega_squared")
    effect_ci = (metric.details or {}).get("omega_squared_ci")
    run_design = [(metric.details or {}).get("df_between"), (metric.details or {}).get("df_within")]
    return {"published_effect": published, "effect": effect, "effect_ci": effect_ci,
            "effect_within_ci": None if effect_ci is None or published is None
            else bool(effect_ci[0] <= published <= effect_ci[1]),
            "design": {"published": [cell.design["df_between"], cell.design["df_within"]], "this_run": run_design},
            "design_differs": run_design != [cell.design["df_between"], cell.design["df_within"]]}


def attach(output: Any, directory: Any, file: str, spec: str) -> list[dict[str, Any]]:
    """Compare ``output``'s metrics with ``published/<file>`` of the probe's ``directory``; adds the
    tables, notes and warnings to ``output`` and returns results.json's ``published`` list."""
    cells = load_published(file, directory)
    rows, warnings = compare(cells, output.metrics, spec)
    output.warnings.extend(warnings)
    study = _read(file, directory)["study"]
    if rows:
        output.tables["published_vs_this_run"] = comparison_table(rows)
        within = [r["within_ci"] for r in rows if r["within_ci"] is not None]
        output.notes.append(f"Published: {study}. This run's model is the study's {rows[0]['model']}: "
                            f"{len(rows)} published cells compared" + (
                                f", {sum(within)} of {len(within)} inside this run's CI" if within else ""))
        differ = [r for r in rows if r.get("design_differs")]
        if differ:  # an F and its p grow with the images: the two are compared by effect size
            study_df, run_df = differ[0]["design"]["published"], differ[0]["design"]["this_run"]
            effects = [r["effect_within_ci"] for r in differ if r["effect_within_ci"] is not None]
            output.notes.append(
                f"{len(differ)} of the published F-tests had another design than this run's (the study's degrees of "
                f"freedom {_df(study_df)}, this run's {_df(run_df)}, e.g.): their F and p are not comparable, and are "
                "compared by effect size (omega squared, which does not grow with the images)"
                + (f": the study's inside this run's interval in {sum(effects)} of {len(effects)}." if effects
                   else "."))
    else:
        output.notes.append(f"Published: {study}. This run's model is none of the study's, so its published "
                            "numbers are shown as references only.")
    for source, table in reference_tables(cells, spec).items():  # e.g. published_004_table_1_ratio_other_models
        output.tables["_".join(["published", *re.findall(r"[a-z0-9]+", source.lower()), "other_models"])] = table
    return rows


def _df(pair: list[Any]) -> str:
    return "(" + ", ".join("?" if d is None else f"{d:,.0f}" for d in pair) + ")"


def _label(subset: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in subset.items())


def comparison_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """"Published vs this run": one row per published cell the run measured; the study's number as
    it printed it (text: never rounded to vlfair's digits), this run's as a number."""
    import pandas as pd

    from vlfair.report.numbers import format_interval, format_value

    def yes(found: bool | None) -> str:
        return "" if found is None else ("yes" if found else "no")

    frame = pd.DataFrame([{
        "source": r["source"],
        "quantity": f"{r['metric']}{' p' if r['field'] == 'p_value' else ''}: {_label(r['subset'])}",
        "published": r["printed"], "this run": r["measured"],
        "CI": "" if r["ci"] is None else format_interval(*r["ci"]), "within CI": yes(r["within_ci"]),
        # an F's effect size (omega squared): the study's beside the run's, which other designs compare by
        "effect published": format_value(r.get("published_effect")), "effect this run": format_value(r.get("effect")),
        "effect CI": "" if r.get("effect_ci") is None else format_interval(*r["effect_ci"]),
        "effect within CI": yes(r.get("effect_within_ci")),
        "same design": "" if "design_differs" not in r else yes(not r["design_differs"])} for r in rows])
    effect_columns = ["effect published", "effect this run", "effect CI", "effect within CI", "same design"]
    if not any("design_differs" in r for r in rows):  # no F-test with a stated design: the columns say nothing
        frame = frame.drop(columns=effect_columns)
    return frame.set_index("source")


def reference_tables(cells: list[PublishedCell], spec: str) -> dict[str, pd.DataFrame]:
    """The published rows of the models other than the run's, each table laid out and its numbers
    written as printed."""
    import pandas as pd

    model = hub_id(spec)
    tables: dict[str, list[PublishedCell]] = {}
    for cell in cells:
        if cell.hub_id is None or cell.hub_id.lower() != model:
            tables.setdefault(cell.source, []).append(cell)
    frames = {}
    for source, members in tables.items():
        keys = [k for k, _ in members[0].row]
        frame = pd.DataFrame([{**dict(c.row), "model": c.model, "column": c.column, "v": c.printed}
                              for c in members])
        index = keys if "model" in keys else ["model", *keys]
        table = frame.pivot_table(index=index, columns="column", values="v", aggfunc="first", sort=False)
        # "published by" names the level: "model" can be a column (000's profession)
        frames[source] = table[list(dict.fromkeys(frame["column"]))].rename_axis(columns=None).rename_axis(
            index={"model": "published by"})
    return frames
