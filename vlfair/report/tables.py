"""A report's tables (:class:`vlfair.outputs.Table`) as CSV, Markdown and HTML, through one path.

CSV is data for spreadsheets: full-precision numbers, formulas defused (:func:`csv_safe`).
Markdown and HTML are for people, and both are drawn from one :class:`Grid` (:func:`grid`), which
makes every decision once: which cells are bold, how a p-value reads, how a number is rounded,
which index becomes columns, and the footnotes. The two renderers only lay the grid out and escape.

Numbers (floats) are vlfair's own and read to 3 significant digits (``numbers.format_value``); a
study's published numbers are text in the frames ("7.60", "8.88e-175") and are shown exactly as
printed.
"""

from __future__ import annotations

import dataclasses
import html
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from markupsafe import Markup

from vlfair.outputs import Table
from vlfair.report.numbers import format_p, format_value

P_COLUMNS = {"p", "p_value", "p-value", "p value"}
LOG10_P_COLUMNS = ("log10 p", "log10_p_value")  # beside a p column: a p below float64's range keeps its size


@dataclasses.dataclass(frozen=True)
class Cell:
    """One shown cell: its text as a person reads it, and whether it is bold."""

    text: str
    bold: bool = False


@dataclasses.dataclass(frozen=True)
class Grid:
    """A table as it is shown: one header row, rows of cells, footnotes under it."""

    header: list[str]
    rows: list[list[Cell]]
    footnotes: list[str]


def format_cell(value: Any) -> str:
    """A table value as text: numbers to 3 significant digits, a missing value empty, text as it is
    (published numbers are text: never re-rounded)."""
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, (float, np.floating)):
        return format_value(value)
    return str(value)


def is_p_column(column: Any) -> bool:
    """Is ``column`` a p-value column (shown through ``format_p``)?"""
    return str(column).strip().lower() in P_COLUMNS


def _p_texts(frame: pd.DataFrame, column: Any) -> list[str]:
    """A p column as text that never reads 0: from the frame's log10 column where it has one
    ("2.5e-347"), else "< 1e-308" where float64 underflowed. Text (a published p) stays as it is."""
    log10 = next((frame[c] for c in LOG10_P_COLUMNS if c in frame.columns), [None] * len(frame))
    return [format_p(v, lg) if isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))
            else format_cell(v) for v, lg in zip(frame[column], log10)]


def column_maxima(table: Table | pd.DataFrame) -> pd.DataFrame:
    """True where a cell holds its column's largest value (ties: all of them), if the table asks
    for it (``mark_column_max``); numbers written as text count by their value."""
    table = Table.of(table)
    frame = table.frame
    if not table.mark_column_max:
        return pd.DataFrame(False, index=frame.index, columns=frame.columns)
    numeric = frame.apply(pd.to_numeric, errors="coerce")
    return numeric.eq(numeric.max()) & numeric.notna()


def _header(column: Any) -> str:
    return " / ".join(map(str, column)) if isinstance(column, tuple) else str(column)


def _index_columns(frame: pd.DataFrame) -> list[tuple[str, list[Any]]]:
    """The index as leading columns (header, values) where it means something (a name, or labels);
    a plain 0..n-1 index means nothing to a reader and is dropped. Unnamed levels are called as
    pandas' ``reset_index`` calls them."""
    index = frame.index
    if not (index.name or any(index.names[1:]) or not isinstance(index, pd.RangeIndex)):
        return []
    unnamed = ["index"] if index.nlevels == 1 else [f"level_{i}" for i in range(index.nlevels)]
    return [(str(name) if name is not None else unnamed[i], list(index.get_level_values(i)))
            for i, name in enumerate(index.names)]


def grid(table: Table | pd.DataFrame) -> Grid:
    """What a person sees of ``table`` (a Table, or a DataFrame whose attrs ask for marks and
    footnotes): every formatting and bolding decision of Markdown and HTML, made here once."""
    table = Table.of(table)
    frame = table.frame
    marked = column_maxima(table)
    labels = _index_columns(frame)
    columns: list[list[Cell]] = [[Cell(format_cell(v)) for v in values] for _, values in labels]
    for position, column in enumerate(frame.columns):
        texts = (_p_texts(frame, column) if is_p_column(column)
                 else [format_cell(v) for v in frame.iloc[:, position]])
        bold = marked.iloc[:, position]
        columns.append([Cell(text, bool(b) and text != "") for text, b in zip(texts, bold)])
    header = [name for name, _ in labels] + [_header(c) for c in frame.columns]
    return Grid(header, [list(row) for row in zip(*columns)], list(table.footnotes))


def _markdown_text(text: str) -> str:
    """Markdown viewers render raw HTML: a label "<img onerror=...>" must stay text; a pipe would
    end the cell."""
    return html.escape(text, quote=False).replace("|", "\\|")


def markdown_table(table: Table | pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table: column maxima in bold where marked, footnotes in italics under it."""
    def cell(shown: Cell) -> str:
        return f"**{_markdown_text(shown.text)}**" if shown.bold else _markdown_text(shown.text)

    shown = grid(table)
    lines = ["| " + " | ".join(map(_markdown_text, shown.header)) + " |",
             "|" + "|".join("---" for _ in shown.header) + "|"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in shown.rows]
    lines += [""] * bool(shown.footnotes) + [f"*{_markdown_text(note)}*" for note in shown.footnotes]
    return "\n".join(lines) + "\n"


def html_table(table: Table | pd.DataFrame) -> Markup:
    """The table as HTML (the templates' ``table`` macro, autoescaped): the same cells as :func:`markdown_table`."""
    from vlfair.report.pages import macros

    return macros().table(grid(table))


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# a number written as text (a study's "-0.027" as printed): a spreadsheet reads it as the number it is
NUMBER_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def csv_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Text cells that a spreadsheet would run as a formula ("=HYPERLINK(...)") get a leading
    apostrophe; numbers, and numbers written as text ("-0.027"), are left alone."""
    def safe(value: Any) -> Any:
        formula = isinstance(value, str) and value.startswith(FORMULA_STARTS) and not NUMBER_TEXT.fullmatch(value)
        return "'" + value if formula else value

    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object or pd.api.types.is_string_dtype(out[column]):
            out[column] = out[column].map(safe)
    if isinstance(out.index, pd.MultiIndex):
        out.index = pd.MultiIndex.from_tuples([tuple(safe(v) for v in key) for key in out.index], names=out.index.names)
    else:
        out.index = pd.Index([safe(v) for v in out.index], name=out.index.name)
    return out.rename(columns=safe)


def write_csv(table: Table | pd.DataFrame, path: str | Path) -> Path:
    """The table's data as CSV (full precision, index included, formulas defused); returns ``path``."""
    csv_safe(Table.of(table).frame).to_csv(path)
    return Path(path)


__all__ = ["Cell", "Grid", "column_maxima", "csv_safe", "format_cell", "grid", "html_table", "is_p_column",
           "markdown_table", "write_csv"]
