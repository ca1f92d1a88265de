"""The Gradio widget of a vlfair evaluate module's Space.

evaluate 0.4.6's ``launch_gradio_widget`` is written against Gradio 3 (``gr.inputs``) and fails on
import of the API under Gradio 6; it also cannot pass compute options (``protected_group``,
``bootstrap``...). This widget takes both: one table row per example (list columns as JSON text)
and the options as JSON, pre-filled with a worked example.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from vlfair.guards import TIME_LIMIT_S, TimeLimitExceeded, call_with_time_limit, time_limit_from_env
from vlfair.logging import get_logger
from vlfair.report.results import jsonable

FRONT_MATTER = re.compile(r"^---\n.*?\n---\n", re.S)
# a compute's cost grows with these options (word_influence's with the square of its words): a
# Space caps them, as the demo Space caps its uploads (bootstrap=1e9 asked for 15 GiB)
OPTION_CAPS = {"bootstrap": 10_000, "n_permutations": 100_000, "num_words": 16}


class OverCap(ValueError):
    """A compute larger than a metric Space runs; the message names the cap."""


@dataclasses.dataclass(frozen=True)
class WidgetLimits:
    """What one compute of a metric Space may ask for, and how long it may run."""

    max_rows: int = 10_000
    max_values: int = 1_000_000  # the numbers in all list cells together (embeddings)
    options: dict[str, int] = dataclasses.field(default_factory=lambda: dict(OPTION_CAPS))
    time_limit_s: float = TIME_LIMIT_S

    @classmethod
    def from_env(cls) -> WidgetLimits:
        """Defaults, with the demo Space's time limit (VLFAIR_SPACE_TIME_LIMIT_S; a bad value is a
        ``guards.LimitSettingError`` naming it, when the Space starts)."""
        return cls(time_limit_s=time_limit_from_env())


def check_request(columns: dict[str, list], options: dict[str, Any], limits: WidgetLimits) -> None:
    """Refuse a compute this Space will not run (:class:`OverCap`, naming the cap): more rows or
    list values than it takes, or an option above its cap. (The module checks the options' types
    and ranges.)"""
    rows = max((len(values) for values in columns.values()), default=0)
    if rows > limits.max_rows:
        raise OverCap(f"{rows:,} rows; this Space computes at most {limits.max_rows:,}")
    values = sum(len(cell) for column in columns.values() for cell in column if isinstance(cell, list))
    if values > limits.max_values:
        raise OverCap(f"{values:,} numbers in the list columns; this Space takes at most {limits.max_values:,}")
    for option, cap in limits.options.items():
        value = options.get(option)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > cap:
            raise OverCap(f"option {option!r} is {value!r}; this Space allows at most {cap:,}")


def column_kinds(module) -> dict[str, str]:
    """Each feature's name -> "int", "float", "str" or "json" (anything that is not a scalar: typed as JSON text)."""
    import datasets

    features = module.features[0] if isinstance(module.features, list) else module.features
    kinds = {}
    for name, feature in features.items():
        dtype = feature.dtype if isinstance(feature, datasets.Value) else None
        kinds[name] = ("int" if dtype.startswith("int") else "float" if dtype.startswith("float")
                       else "str" if dtype == "string" else "json") if dtype else "json"
    return kinds


def example_frame(example: dict[str, list], kinds: dict[str, str]) -> pd.DataFrame:
    """The example columns as table cells (JSON text for list columns)."""
    rows = len(next(iter(example.values()), []))
    return pd.DataFrame({c: [json.dumps(v) if kinds[c] == "json" else v for v in example[c]] if c in example
                         else [""] * rows for c in kinds})  # an optional column left out stays empty


def parse_inputs(table: pd.DataFrame, kinds: dict[str, str], options_text: str) -> tuple[dict[str, list], dict]:
    """Table rows and options JSON -> compute arguments; a bad cell is named by row and column."""
    rows = table.astype(object).where(table.notna(), "")
    rows = rows[rows.astype(str).apply(lambda c: c.str.strip()).ne("").any(axis=1)]
    blank = [name for name in kinds if name not in rows or rows[name].astype(str).str.strip().eq("").all()]
    columns = {name: [_cell(cell, kind, row, name) for row, cell in zip(rows.index, rows[name])]
               for name, kind in kinds.items() if name not in blank}  # an empty column is left out (optional ones)
    try:
        options = json.loads(options_text) if options_text and options_text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"options are not valid JSON: {exc}") from None
    if not isinstance(options, dict):
        raise ValueError("options must be a JSON object, e.g. {\"bootstrap\": 200}")
    return columns, options


def _cell(cell: Any, kind: str, row: int, column: str) -> Any:
    text = str(cell).strip()
    try:
        if kind == "float":
            return float(text)
        if kind == "int":
            number = float(text)
            if not number.is_integer():
                raise ValueError
            return int(number)
        if kind == "json":
            return json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: JSON nested a thousand levels deep
        expected = {"float": "a number", "int": "a whole number"}.get(kind, "JSON, e.g. [0.1, 0.2]")
        raise ValueError(f"row {row + 1}, column {column!r}: {text!r} is not {expected}") from None
    return text.strip('"')


def readable_result(result: dict[str, Any] | None) -> str:
    """The result as a person reads it: a Markdown table of every number (3 significant digits,
    its interval beside it, p-values that never read 0), nested groups flattened as "key · group".
    The JSON below it keeps full precision for machines."""
    from vlfair.report.numbers import format_interval, format_p, format_value

    if not result:
        return ""
    rows = []

    def add(label: str, key: str, value: Any, ci: Any, log10: Any = None) -> None:
        if isinstance(value, dict):
            for name, inner in value.items():
                add(f"{label} · {name}", key, inner, ci.get(name) if isinstance(ci, dict) else None,
                    log10.get(name) if isinstance(log10, dict) else None)
        elif isinstance(value, bool) or isinstance(value, str):
            rows.append((label, str(value), ""))
        elif isinstance(value, (int, float)) or value is None:
            shown = (format_p(value, log10) if key == "p_value"
                     else format_value(value) if isinstance(value, float) else str(value))
            interval = format_interval(*ci) if isinstance(ci, (list, tuple)) and len(ci) == 2 else ""
            rows.append((label, shown or "—", interval))
        elif isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value):
            rows.append((label, ", ".join(format_value(float(v)) for v in value), ""))

    for key, value in result.items():
        if not key.endswith("_ci"):
            add(key, key, value, result.get(f"{key}_ci"), result.get("log10_p_value") if key == "p_value" else None)
    from vlfair.report.writer import markdown_table  # escapes HTML and pipes: a group name is data

    return markdown_table(pd.DataFrame(rows, columns=["quantity", "value", "interval"])).rstrip("\n")


def metric_widget(module, example: dict[str, list], options: dict[str, Any] | None = None,
                  card: str | Path | None = None, limits: WidgetLimits | None = None):
    """A Blocks app: the example table, options, a compute button, the result and the module's
    card. Each compute is checked against ``limits`` (default :meth:`WidgetLimits.from_env`)."""
    import gradio as gr

    limits = limits or WidgetLimits.from_env()
    kinds = column_kinds(module)
    card = Path(card) if card else Path(sys.argv[0]).resolve().parent / "README.md"
    article = FRONT_MATTER.sub("", card.read_text()) if card.exists() else ""

    def compute(table: pd.DataFrame, options_text: str) -> dict:
        def work() -> dict:
            columns, kwargs = parse_inputs(table, kinds, options_text)
            check_request(columns, kwargs, limits)
            return jsonable(module.compute(**columns, **kwargs))

        local = f"compute more with evaluate.load(\"vlfair/{module.name}\") on your own machine"
        try:
            return call_with_time_limit(work, limits.time_limit_s)
        except TimeLimitExceeded:
            problem = (f"the compute ran past this Space's time limit of {limits.time_limit_s:g} s and was stopped; "
                       f"use fewer rows or smaller options, or {local}")
        except OverCap as exc:
            problem = f"{exc}; {local}"
        except (ValueError, TypeError) as exc:  # the person's input: one server line, not a traceback
            problem = str(exc)
        get_logger(__name__).warning(f"metric Space {module.name}: refused: {problem}")
        # a toast renders HTML: a cell quoted in the message is text
        raise gr.Error(html.escape(f"{module.name}: {problem}", quote=False), print_exception=False) from None

    with gr.Blocks(title=f"Metric: {module.name}") as app:
        gr.Markdown(f"# Metric: {module.name}\n{module.info.description.strip()}")
        table = gr.Dataframe(example_frame(example, kinds), headers=list(kinds), interactive=True, type="pandas",
                             datatype=["number" if k in ("int", "float") else "str" for k in kinds.values()],
                             label="inputs, one row per example (list columns as JSON)", elem_id="inputs")
        options_box = gr.Code(json.dumps(options or {}, indent=1), language="json", label="options (compute keyword "
                              "arguments)")
        button = gr.Button("compute", variant="primary")
        readable = gr.Markdown(elem_id="readable-result")
        result = gr.JSON(label=f"{module.name} (full precision)", elem_id="result")
        button.click(compute, [table, options_box], result, api_name="compute").success(
            readable_result, result, readable, api_name=False)
        if article:
            gr.Markdown(article)
    return app
