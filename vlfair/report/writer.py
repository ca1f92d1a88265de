"""Writing a probe's outputs: results.json, tables (CSV + Markdown), PNG plots, report.html."""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd


from vlfair.outputs import FOOTNOTES, MARK_COLUMN_MAX


def column_maxima(frame: pd.DataFrame) -> pd.DataFrame:
    """True where a cell holds its column's largest value (ties: all of them), if the frame asks for it."""
    if not frame.attrs.get(MARK_COLUMN_MAX):
        return pd.DataFrame(False, index=frame.index, columns=frame.columns)
    numeric = frame.apply(pd.to_numeric, errors="coerce")
    return numeric.eq(numeric.max()) & numeric.notna()


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (no extra dependency); column maxima in bold where marked,
    footnotes in italics under it."""
    marked = column_maxima(frame)
    text = frame.astype(object).copy()
    for column in frame.columns:
        shown = _p_values(frame, column) if _is_p_column(column) else frame[column]
        text[column] = [f"**{_cell(v)}**" if m else v for v, m in zip(shown, marked[column])]
    text = _flat(text)
    cells = [[_cell(v) for v in row] for row in text.itertuples(index=False)]
    header = [_cell(c) for c in text.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    notes = frame.attrs.get(FOOTNOTES, [])
    lines += [""] * bool(notes) + [f"*{html.escape(note, quote=False)}*" for note in notes]
    return "\n".join(lines) + "\n"


def _flat(frame: pd.DataFrame) -> pd.DataFrame:
    """A named or labelled index becomes leading columns (one header row, no stray index-name row);
    a plain 0..n-1 index is dropped (it means nothing to a reader)."""
    if frame.index.name or any(frame.index.names[1:]) or not isinstance(frame.index, pd.RangeIndex):
        frame = frame.reset_index()
    columns = [" / ".join(map(str, c)) if isinstance(c, tuple) else c for c in frame.columns]
    return frame.set_axis(columns, axis=1).rename_axis(columns=None)


P_COLUMNS = {"p", "p_value", "p-value", "p value"}


def _is_p_column(column: Any) -> bool:
    return str(column).strip().lower() in P_COLUMNS


LOG10_P_COLUMNS = ("log10 p", "log10_p_value")


def _p_values(frame: pd.DataFrame, column: Any) -> list:
    """A p column as text that never reads 0: from its log10 column where the frame has one
    ("2.5e-347"), else "< 1e-308" where float64 underflowed."""
    from vlfair.report.numbers import format_p

    log10 = next((frame[c] for c in LOG10_P_COLUMNS if c in frame.columns), [None] * len(frame))
    return [format_p(v, lg) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
            for v, lg in zip(frame[column], log10)]


def _text(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)  # numbers to 4 significant digits


def _escaped(value: Any) -> str:
    return html.escape(_text(value))


def _cell(value: Any) -> str:
    """A Markdown cell, its HTML and pipes escaped (Markdown viewers render raw HTML: a label
    "<img onerror=...>" must stay text)."""
    return html.escape(_text(value), quote=False).replace("|", "\\|")


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


def write_outputs(out_dir: str | Path, results: dict[str, Any], tables: dict[str, pd.DataFrame],
                  figures: dict[str, Any], notes: list[str], title: str) -> Path:
    """Everything into ``out_dir``; returns the path of report.html."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, allow_nan=False))
    for name, frame in tables.items():
        csv_safe(frame).to_csv(out / f"{name}.csv")
        (out / f"{name}.md").write_text(markdown_table(frame))
    pngs = {}
    for name, figure in figures.items():
        path = out / f"{name}.png"
        figure.savefig(path, dpi=110, bbox_inches="tight")
        pngs[name] = path
    report = out / "report.html"
    report.write_text(_html(results, tables, pngs, notes, title))
    return report


def html_table(frame: pd.DataFrame) -> str:
    """The frame as HTML, numbers to 4 significant digits, column maxima in bold where marked; one
    header row, no 0..n-1 index column, footnotes under the table."""
    marked = column_maxima(frame)
    text = frame.astype(object).copy()
    for column in frame.columns:
        shown = _p_values(frame, column) if _is_p_column(column) else frame[column]
        text[column] = [("<b>{}</b>" if m else "{}").format(html.escape(_text(v))) for v, m in zip(shown, marked[column])]
    if not isinstance(text.index, pd.RangeIndex):  # labels are data: escaped like every cell
        text.index = text.index.map(lambda i: tuple(map(_escaped, i)) if isinstance(i, tuple) else _escaped(i))
    text = _flat(text.rename(columns=lambda c: html.escape(str(c))))
    body = text.to_html(escape=False, index=False)
    notes = "".join(f"<p class='note'>{html.escape(note)}</p>" for note in frame.attrs.get(FOOTNOTES, []))
    return body + notes


STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
         "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px}")


def page(title: str, body: str) -> str:
    """A self-contained HTML page (no external assets)."""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{body}</body></html>")


def inline_png(path: Path | bytes, alt: str, style: str = "max-width:100%") -> str:
    """An <img> carrying the PNG (a file, or its bytes) in the page itself."""
    data = base64.b64encode(path if isinstance(path, bytes) else Path(path).read_bytes()).decode()
    return f"<img alt='{html.escape(alt)}' src='data:image/png;base64,{data}' style='{style}'>"


def inline_figure(figure: Any, alt: str, style: str = "max-width:100%") -> str:
    """A matplotlib figure as an <img> in the page."""
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return inline_png(buffer.getvalue(), alt, style)


def _html(results: dict[str, Any], tables: dict[str, pd.DataFrame], pngs: dict[str, Path], notes: list[str],
          title: str) -> str:
    model, dataset = results["model"], results["dataset"]
    parts = [f"<h1>{html.escape(title)}</h1>",
             f"<p><b>Model</b> {html.escape(model.get('name') or model['spec'])}"
             + (f" ({html.escape(model['spec'])})" if model.get("name", model["spec"]) != model["spec"] else "")
             + f" (revision {html.escape(str(model['revision']))}, "
             f"{html.escape(model['dtype'])}) &middot; <b>Dataset</b> {html.escape(dataset['name'])} "
             f"({dataset['num_rows']} rows" + (f", split {html.escape(str(dataset['split']))}" if dataset["split"] else "")
             + ") &middot; "
             f"vlfair {html.escape(results['vlfair_version'])}, probe v{results['probe_version']}, {results['created']}</p>"]
    if notes or results.get("warnings"):
        parts.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in [*notes, *results.get("warnings", [])]) + "</ul>")
    if results["skipped_rows"]:
        parts.append(f"<p>Skipped unreadable rows: {results['skipped_rows']}</p>")
    for name, path in pngs.items():
        parts.append(f"<h2>{html.escape(name.replace('_', ' '))}</h2>{inline_png(path, name)}")
    for name, frame in tables.items():
        parts.append(f"<h2>{html.escape(name.replace('_', ' '))}</h2>" + html_table(frame))
    return page(title, "".join(parts))
