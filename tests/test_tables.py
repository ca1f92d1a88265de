"""One rendering path (issue 26, item 5): a Table reads the same in Markdown and HTML, numbers to 3
significant digits, published numbers as printed, p-values never 0, every label escaped."""

from __future__ import annotations

import html
import json
import re
import types
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from vlfair.outputs import FOOTNOTES, MARK_COLUMN_MAX, Table
from vlfair.report.tables import Cell, csv_safe, grid, html_table, markdown_table, write_csv

MARKUP = "<img onerror=x>"


def _study_table() -> Table:
    """A table with every kind of cell: labels in a named two-level index (one of them markup), a
    marked column of vlfair's numbers, a published column of text, a p column with its log10."""
    index = pd.MultiIndex.from_tuples([("CLIP", "Female"), ("CLIP", "Male"), (MARKUP, "a|b")],
                                      names=["model", "gender"])
    frame = pd.DataFrame({"score": [30.4321, 29.1, float("nan")], "published": ["7.60", "8.88e-175", "0.00e+00"],
                          "p": [0.0, 0.01234, 0.0], "log10 p": [-346.6, -1.9087, float("-inf")],
                          "rows": [12, 3, 4]}, index=index)
    return Table(frame, mark_column_max=True, footnotes=[f"a note about {MARKUP}"])


def _markdown_cells(text: str) -> tuple[list[str], list[list[Cell]], list[str]]:
    """Header, cells and footnotes read back from a Markdown table (escapes undone, bold noted)."""
    def split(line: str) -> list[str]:
        return [html.unescape(c.replace("\\|", "|")) for c in re.split(r"(?<!\\) \| ", line[2:-2])]

    lines = text.rstrip("\n").split("\n")
    rows = [split(line) for line in lines[2:] if line.startswith("| ")]
    cells = [[Cell(c[2:-2], True) if c.startswith("**") and c.endswith("**") and len(c) > 4 else Cell(c) for c in row]
             for row in rows]
    notes = [html.unescape(line[1:-1]) for line in lines[2:] if line.startswith("*")]
    return split(lines[0]), cells, notes


class _HtmlCells(HTMLParser):
    """Header, cells and footnotes read back from an HTML table."""

    def __init__(self, text: str):
        super().__init__()
        self.header, self.rows, self.notes = [], [], []
        self.where, self.bold = None, False
        self.feed(str(text))

    def handle_starttag(self, tag, attrs):
        if tag == "th":
            self.header.append("")
        elif tag == "tr" and self.header:
            self.rows.append([])
        elif tag == "td":
            self.rows[-1].append(Cell(""))
        elif tag == "p":
            self.notes.append("")
        self.bold = self.bold or tag == "b"
        self.where = tag if tag in ("th", "td", "p") else self.where

    def handle_endtag(self, tag):
        if tag in ("th", "td", "p"):
            self.where, self.bold = None, False

    def handle_data(self, data):
        if self.where == "th":
            self.header[-1] += data
        elif self.where == "td":
            self.rows[-1][-1] = Cell(self.rows[-1][-1].text + data, self.bold)
        elif self.where == "p":
            self.notes[-1] += data


def test_markdown_and_html_show_the_same_cells_from_one_grid():
    table = _study_table()
    shown = grid(table)
    header, cells, notes = _markdown_cells(markdown_table(table))
    parsed = _HtmlCells(html_table(table))
    assert header == parsed.header == shown.header
    assert cells == parsed.rows == shown.rows
    assert notes == parsed.notes == shown.footnotes == [f"a note about {MARKUP}"]
    assert shown.header == ["model", "gender", "score", "published", "p", "log10 p", "rows"]
    assert shown.rows[0][2] == Cell("30.4", bold=True) and shown.rows[1][2] == Cell("29.1")  # the column's largest
    assert shown.rows[2][2] == Cell("")  # missing: empty, never bold
    assert [row[3] for row in shown.rows] == [Cell("7.60", True), Cell("8.88e-175"), Cell("0.00e+00")]
    assert [row[4].text for row in shown.rows] == ["2.5e-347", "0.0123", "< 1e-308"]  # a p-value never reads 0
    assert [row[6].text for row in shown.rows] == ["12", "3", "4"]  # counts are integers: as they are


def test_vlfair_s_numbers_read_to_three_significant_digits_and_published_ones_as_printed():
    frame = pd.DataFrame({"value": [0.08905123, 1391.945, -116.6676, 4.523e-05, np.float32(0.98146)],
                          "published": ["141.48", "7.60", "8.88e-175", "-0.027", "1.11"]})
    shown = grid(frame)
    assert [row[0].text for row in shown.rows] == ["0.0891", "1392", "-117", "4.52e-05", "0.981"]
    assert [row[1].text for row in shown.rows] == list(frame["published"])
    markdown = markdown_table(frame)
    assert "| 0.0891 | 141.48 |" in markdown and "| 1392 | 7.60 |" in markdown and "1391.9" not in markdown
    assert "<td>8.88e-175</td>" in html_table(frame) and "<td>0.0891</td>" in html_table(frame)


@pytest.mark.parametrize("column", ["p", "p_value", "p-value", "P value"])
def test_a_p_column_never_reads_zero(column):
    frame = pd.DataFrame({"F": [2.0, 3.0, 4.0], column: [0.0, 0.0, 3.507e-119],
                          "log10_p_value": [-400.3, None, -118.455]})
    assert [row[1].text for row in grid(frame).rows] == ["5e-401", "< 1e-308", "3.5e-119"]
    assert "| 0 |" not in markdown_table(frame) and "<td>0</td>" not in html_table(frame)


def test_a_dataframe_with_attrs_renders_as_its_table():
    table = _study_table()
    frame = table.frame.copy()
    frame.attrs[MARK_COLUMN_MAX], frame.attrs[FOOTNOTES] = True, list(table.footnotes)
    assert markdown_table(frame) == markdown_table(table) and html_table(frame) == html_table(table)
    assert grid(table.frame) != grid(table)  # without the attrs: no marks, no footnotes


def test_indexes_become_columns_only_where_they_mean_something():
    plain = pd.DataFrame({"a": [1.5, 2.5]})
    assert grid(plain).header == ["a"] and "<th></th>" not in html_table(plain)  # no 0..n-1 column
    labelled = pd.DataFrame({"a": [1.5]}, index=["senator"])
    assert grid(labelled).header == ["index", "a"]
    # an index level named like a column: both shown, no clash
    clash = pd.DataFrame({"race": ["x"], "v": [1.0]}, index=pd.Index(["Asian"], name="race"))
    assert grid(clash).header == ["race", "race", "v"] and grid(clash).rows[0][0].text == "Asian"
    wide = pd.DataFrame([[1.0, 2.0]], columns=pd.MultiIndex.from_tuples([("image", "de"), ("image", "en")]))
    assert grid(wide).header == ["image / de", "image / en"]
    assert markdown_table(wide).splitlines()[0] == "| image / de | image / en |"
    wide.index = pd.Index(["translation"], name="portion")  # one header row: the index's name, not "portion / "
    assert grid(wide).header == ["portion", "image / de", "image / en"]
    two = pd.DataFrame({"v": [1.0]}, index=pd.MultiIndex.from_tuples([("a", "b")]))  # unnamed levels: pandas' names
    assert grid(two).header == ["level_0", "level_1", "v"] and grid(two).rows[0][:2] == [Cell("a"), Cell("b")]


def test_markdown_escapes_html_and_pipes_and_html_autoescapes():
    table = _study_table()
    markdown, page = markdown_table(table), html_table(table)
    assert MARKUP not in markdown and "&lt;img onerror=x&gt;" in markdown and "a\\|b" in markdown
    assert MARKUP not in page and page.count("&lt;img onerror=x&gt;") == 2  # the label and the footnote
    assert "*a note about &lt;img onerror=x&gt;*" in markdown


def test_csv_is_data_full_precision_and_formulas_defused(tmp_path):
    frame = pd.DataFrame({"label": ["=1+2", "-0.027", "ok"], "value": [1391.9452141526972, 0.0, 2.5e-347]})
    write_csv(Table(frame, mark_column_max=True), tmp_path / "t.csv")
    back = pd.read_csv(tmp_path / "t.csv", index_col=0)
    assert back["label"].tolist() == ["'=1+2", "-0.027", "ok"]  # a formula stays text, a number written as text too
    assert back["value"].tolist() == [1391.9452141526972, 0.0, 2.5e-347]  # numbers as stored, not as shown
    assert (tmp_path / "t.csv").read_text() == csv_safe(frame).to_csv()


def _results(label: str) -> dict:
    return {"schema": "vlfair.results/1", "vlfair_version": "0", "probe": "traits", "probe_version": 1,
            "model": {"spec": "/models/x", "name": label, "revision": None, "dtype": "float32"},
            "dataset": {"name": label, "num_rows": 3, "split": label}, "created": "today", "metrics": [],
            "skipped_rows": [2], "warnings": [f"warning {label}"]}


def test_report_html_keeps_every_label_text(tmp_path):
    from vlfair.report.writer import write_outputs

    results = _results(MARKUP)
    report = write_outputs(tmp_path, results, {f"t{MARKUP}": _study_table()}, {}, [f"note {MARKUP}"], MARKUP)
    text = report.read_text()
    assert MARKUP not in text and "<script" not in text
    # title, h1, model name, dataset name, split, note, warning, table heading, index label, footnote
    assert text.count("&lt;img onerror=x&gt;") == 10
    assert "<b>Model</b> &lt;img onerror=x&gt; (/models/x) (revision None, float32)" in text
    assert "Skipped unreadable rows: [2]" in text and "<td><b>7.60</b></td>" in text
    assert (tmp_path / "results.json").read_text() == json.dumps(results, indent=2, allow_nan=False)
    assert (tmp_path / f"t{MARKUP}.md").read_text() == markdown_table(_study_table())


def test_the_demo_report_keeps_every_label_text(tmp_path):
    from vlfair.demo import run

    entry = {"probe": "traits", "measure": f"measure {MARKUP}", "subset": {"trait": MARKUP}, "encoder": "biased",
             "planted": MARKUP, "planted_sign": 1, "measured": 1.23456, "ci": [1.1, 1.3], "detected": True,
             "neutral": 1.0}
    planting = types.SimpleNamespace(describe=lambda: [f"planted {MARKUP}"])
    paired = {"planted": [{"probe": "traits", "metric": f"m {MARKUP}", "subset": {"trait": MARKUP}, "biased": 2.0,
                           "control": 1.0, "difference": 1.0, "ci": [0.5, 1.5], "unpaired_ci": [0.4, 1.6], "p": 0.01,
                           "found": True}],
              "median_width_ratio": 0.9, "differences": 1, "comparisons": {f"t{MARKUP}": "compare/x.html"},
              "not_a_probe_metric": [f"n {MARKUP}"]}
    asked = {"entries": [entry | {"encoder": "biased answerer"}],
             "compared": [{"probe": "traits", "metric": f"m {MARKUP}", "subset": {"trait": MARKUP}, "encoder": 1.0,
                           "answerer": 2.0, "difference": -1.0, "ci": [-1.5, -0.5], "verdict": "a_less_biased",
                           "verdict_text": f"the encoder {MARKUP} less biased"},
                          {"probe": "retrieval", "refused": f"refused {MARKUP}"}]}
    drawn = run.ProbeResults("traits", [entry], asked["entries"], {}, asked["compared"],
                             run._probe_section("traits", [entry], tmp_path), run._forests(asked["entries"]), {}, [])
    text = run._report([entry], {"biased": planting}, {"biased": tmp_path / MARKUP}, 3.0, paired, asked, [drawn])
    assert MARKUP not in text and "<script" not in text
    assert "the encoder &lt;img onerror=x&gt; less biased" in text and "refused &lt;img onerror=x&gt;" in text
    assert "&lt;img onerror=x&gt;" in text.split("<h2>What was planted</h2>")[1].split("</ul>")[0]
    assert f"trained on this machine ({tmp_path}/&lt;img onerror=x&gt;)" in text
    row = "<td>measure &lt;img onerror=x&gt;</td><td>trait = &lt;img onerror=x&gt;</td><td>demo-world biased</td>"
    assert row in text and "<td>1.23</td><td>[1.1, 1.3]</td><td>yes</td><td>ok</td>" in text  # 3 significant digits
    assert "alt='measure &lt;img onerror=x&gt;'" in text  # the forest plot's alt text too
    assert "biased: 1/1 planted biases found; control: 0/0 false alarms" in text


def test_pages_escape_text_and_keep_the_caller_s_html():
    from vlfair.report.writer import inline_png, page

    image = inline_png(b"\x89PNG", "a 'quoted' <alt>")
    assert image == ("<img alt='a &#39;quoted&#39; &lt;alt&gt;' src='data:image/png;base64,iVBORw==' "
                     "style='max-width:100%'>")
    text = page("a <title>", f"<p>{image}</p>")
    assert "<title>a &lt;title&gt;</title>" in text and f"<p>{image}</p>" in text and "<style>" in text
