"""Writing a probe's outputs: results.json, tables (CSV + Markdown), PNG plots, report.html.

Tables are rendered by ``vlfair.report.tables`` (one path for CSV, Markdown and HTML), the page by
the Jinja2 template ``templates/report.html.j2`` (autoescaped). The names below that moved there
(``markdown_table``, ``html_table``, ``csv_safe``, ``page``, ...) stay importable from here.

A run's folder is written as a whole (``vlfair.atomic``): into a staging folder beside it, renamed
into place when every file is there, so a run killed while writing leaves the earlier run whole.

Table files are a registry (``TABLE_FILES``): a new output format for tables is its renderer in
``report/tables.py`` and one ``TABLE_FILES`` line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from vlfair.atomic import OutputKind, atomic_output
from vlfair.outputs import FOOTNOTES, MARK_COLUMN_MAX, Table
from vlfair.report.pages import inline_figure, inline_png, page, png_data, render, save_png
from vlfair.report.tables import column_maxima, csv_safe, grid, html_table, markdown_table, write_csv


def _write_markdown(table: Table | pd.DataFrame, path: Path) -> None:
    path.write_text(markdown_table(table))


# every table is written once per entry: a new format is a renderer in tables.py and one line here
# (a writer's return value, such as write_csv's path, is not used)
TABLE_FILES: dict[str, Callable[[Table | pd.DataFrame, Path], object]] = {"csv": write_csv, "md": _write_markdown}
# a run's folder (vlfair run --out, rescore --out): replaced as a whole, only when it holds nothing else
RUN_OUTPUT = OutputKind("run")


def write_outputs(out_dir: str | Path, results: dict[str, Any], tables: dict[str, Table | pd.DataFrame],
                  figures: dict[str, Any], notes: list[str], title: str) -> Path:
    """Everything into ``out_dir``, written as a whole (a folder that holds an earlier run is
    replaced once every file is written); returns the path of report.html.

    Args:
        out_dir: the run's folder: new, empty or an earlier run's (:data:`RUN_OUTPUT`).
        results: results.json's content.
        tables: name -> a Table, or a DataFrame whose attrs ask for marks and footnotes; each is
            written once per entry of :data:`TABLE_FILES` (``name.csv``, ``name.md``) and shown in
            report.html.
        figures: name -> a matplotlib figure, written as ``name.png`` and shown in report.html.
        notes: sentences listed at the top of report.html (with results' warnings).
        title: report.html's title.
    """
    with atomic_output(out_dir, RUN_OUTPUT) as out:
        (out / "results.json").write_text(json.dumps(results, indent=2, allow_nan=False))
        for name, table in tables.items():
            for suffix, write in TABLE_FILES.items():
                write(table, out / f"{name}.{suffix}")
        pngs = {}
        for name, figure in figures.items():
            path = out / f"{name}.png"
            save_png(figure, path, dpi=110)
            pngs[name] = path
        (out / "report.html").write_text(report_html(results, tables, pngs, notes, title))
    return Path(out_dir) / "report.html"


def report_html(results: dict[str, Any], tables: dict[str, Table | pd.DataFrame], pngs: dict[str, Path],
                notes: list[str], title: str) -> str:
    """report.html's text: the run (model, dataset, versions), notes and warnings, figures, tables."""
    model = results["model"]
    return render("report.html.j2", title=title, results=results, model=model, dataset=results["dataset"],
                  model_name=model.get("name") or model["spec"], notes=[*notes, *results.get("warnings", [])],
                  figures=[(name, png_data(path)) for name, path in pngs.items()],
                  tables=[(name, grid(table)) for name, table in tables.items()])


__all__ = ["FOOTNOTES", "MARK_COLUMN_MAX", "column_maxima", "csv_safe", "html_table", "inline_figure", "inline_png",
           "markdown_table", "page", "report_html", "RUN_OUTPUT", "TABLE_FILES", "write_outputs"]
