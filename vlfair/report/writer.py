"""Writing a probe's outputs: results.json, tables (CSV + Markdown), PNG plots, report.html.

Tables are rendered by ``vlfair.report.tables`` (one path for CSV, Markdown and HTML), the page by
the Jinja2 template ``templates/report.html.j2`` (autoescaped). The names below that moved there
(``markdown_table``, ``html_table``, ``csv_safe``, ``page``, ...) stay importable from here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from vlfair.outputs import FOOTNOTES, MARK_COLUMN_MAX, Table
from vlfair.report.pages import inline_figure, inline_png, page, png_data, render
from vlfair.report.tables import column_maxima, csv_safe, grid, html_table, markdown_table, write_csv


def _write_markdown(table: Table | pd.DataFrame, path: Path) -> None:
    path.write_text(markdown_table(table))


# every table is written once per entry: a new format is a renderer in tables.py and one line here
# (a writer's return value, such as write_csv's path, is not used)
TABLE_FILES: dict[str, Callable[[Table | pd.DataFrame, Path], object]] = {"csv": write_csv, "md": _write_markdown}


def write_outputs(out_dir: str | Path, results: dict[str, Any], tables: dict[str, Table | pd.DataFrame],
                  figures: dict[str, Any], notes: list[str], title: str) -> Path:
    """Everything into ``out_dir``; returns the path of report.html.

    Args:
        out_dir: the run's folder (made if missing).
        results: results.json's content.
        tables: name -> a Table, or a DataFrame whose attrs ask for marks and footnotes; each is
            written once per entry of :data:`TABLE_FILES` (``name.csv``, ``name.md``) and shown in
            report.html.
        figures: name -> a matplotlib figure, written as ``name.png`` and shown in report.html.
        notes: sentences listed at the top of report.html (with results' warnings).
        title: report.html's title.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, allow_nan=False))
    for name, table in tables.items():
        for suffix, write in TABLE_FILES.items():
            write(table, out / f"{name}.{suffix}")
    pngs = {}
    for name, figure in figures.items():
        path = out / f"{name}.png"
        figure.savefig(path, dpi=110, bbox_inches="tight")
        pngs[name] = path
    report = out / "report.html"
    report.write_text(report_html(results, tables, pngs, notes, title))
    return report


def report_html(results: dict[str, Any], tables: dict[str, Table | pd.DataFrame], pngs: dict[str, Path],
                notes: list[str], title: str) -> str:
    """report.html's text: the run (model, dataset, versions), notes and warnings, figures, tables."""
    model = results["model"]
    return render("report.html.j2", title=title, results=results, model=model, dataset=results["dataset"],
                  model_name=model.get("name") or model["spec"], notes=[*notes, *results.get("warnings", [])],
                  figures=[(name, png_data(path)) for name, path in pngs.items()],
                  tables=[(name, grid(table)) for name, table in tables.items()])


__all__ = ["FOOTNOTES", "MARK_COLUMN_MAX", "column_maxima", "csv_safe", "html_table", "inline_figure", "inline_png",
           "markdown_table", "page", "report_html", "TABLE_FILES", "write_outputs"]
