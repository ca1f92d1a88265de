"""Issue 28, the Spaces and the boards: a metric card only for vlfair's own modules (1), text from
results files shown as text everywhere the Spaces show it (2), copies counted once (20), `created`
a real date-time on any install (21), a crafted results.json skipped and named (22), the metric
Spaces' caps and time limit (23), the Space's limit variables checked at start-up (32)."""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import jsonschema
import pandas as pd
import pytest
from markdown_it import MarkdownIt
from test_push_results import BIASED, FAIR, make_results, write_run

from vlfair.cli import main
from vlfair.report.markup import markdown_text
from vlfair.report.results import validate_results

from test_spaces import _load

REPO = Path(__file__).resolve().parents[1]
# what an attacker puts in a results file: a form, an image beacon, a link (Markdown, bare and
# www), code, emphasis, LaTeX, an entity, HTML that a Markdown block would start, a list
PAYLOADS = ["<form action=x><input></form>", "<img src=http://x/beacon>", "[click](http://phish)",
            "`code` and ``more``", "http://bare.example/x and www.phish.example and me@phish.example",
            "$$\\href{http://k}{k}$$", "*em* _u_ ~~s~~ **b**", "&lt;b&gt; &#60;i&#62;", "<!-- c --> <script>x</script>",
            "line\n# heading\n- item\n1. one\n    code\n\n> quote", "| a | b |\n|---|---|"]
HOSTILE = " ".join(PAYLOADS)
# markdown-it-py tokens that are markup rather than text
MARKUP = {"link_open", "image", "html_inline", "html_block", "code_inline", "code_block", "fence", "em_open",
          "strong_open", "s_open", "heading_open", "bullet_list_open", "ordered_list_open", "blockquote_open",
          "table_open", "hr"}


def _tokens(markdown: str) -> list:
    tokens = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).parse(markdown)
    return [*tokens, *(child for token in tokens for child in token.children or [])]


def _text_of(markdown: str) -> str:
    return "".join(t.content for t in _tokens(markdown) if t.type in ("text", "text_special", "softbreak"))


def _markup(markdown: str) -> list[str]:
    return sorted(t.type for t in _tokens(markdown) if t.type in MARKUP)


def _assert_only_text(markdown: str, allowed: set[str] = frozenset()) -> None:
    """No markup in ``markdown`` beyond ``allowed`` token types (the Space's own bold, heading,
    list), and no address GitHub-flavoured Markdown (Gradio's) would turn into a link by itself."""
    found = {t.type for t in _tokens(markdown)} & (MARKUP - set(allowed))
    assert not found, f"markup {found} in {markdown!r}"
    assert not re.search(r"(?i)\b(https?|ftp|mailto):|\bwww\.|\w@\w", markdown), markdown


# ---- 1: a metric's card, only for vlfair's own modules ----------------------------------------
@pytest.fixture
def fake_metrics(tmp_path, monkeypatch) -> Path:
    """A metrics folder with one module, a folder that is no module, and a symlink to a module
    outside it; ``vlfair.metrics.metrics_dir`` points there."""
    import vlfair.metrics

    root = tmp_path / "metrics"
    (root / "bias_ratio").mkdir(parents=True)
    (root / "bias_ratio" / "bias_ratio.py").write_text("")
    (root / "bias_ratio" / "README.md").write_text("## Description\nOWN CARD\n## Usage\n")
    (root / "notes").mkdir()
    (root / "notes" / "README.md").write_text("## Description\nNOT A MODULE\n## Usage\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.py").write_text("")
    (outside / "README.md").write_text("## Description\nSECRET\n## Usage\n")
    (root / "evil").symlink_to(outside, target_is_directory=True)
    monkeypatch.setattr(vlfair.metrics, "metrics_dir", lambda: root)
    return root


def test_only_vlfairs_own_modules_resolve_to_a_card(fake_metrics, monkeypatch):
    app = _load("leaderboard")
    monkeypatch.setattr(app, "metrics_dir", lambda: fake_metrics, raising=False)  # the Space's own binding, if any
    assert "OWN CARD" in app.explain("bias_ratio")
    outside = fake_metrics.parent / "outside"
    names = ["evil", "notes", "..", "../outside", str(outside), str(outside / "README.md"), "bias_ratio/../notes",
             "./bias_ratio", "bias_ratio/", "BIAS_RATIO", "bias_ratio\n", ""]
    for name in names:
        shown = app.explain(name)
        assert "SECRET" not in shown and "NOT A MODULE" not in shown and "OWN CARD" not in shown, name
        assert shown.endswith("reported by a probe; see the probe's report for its definition.")
    from vlfair.metrics import metric_card

    assert metric_card("bias_ratio") == fake_metrics / "bias_ratio" / "README.md"
    assert all(metric_card(name) is None for name in names)


# ---- 2: text from results files is text, everywhere the Spaces show it ------------------------
@pytest.mark.parametrize("text", [*PAYLOADS, HOSTILE, "\\*not em\\*", "a\tb\x00c\u2028d"])
def test_markdown_text_renders_to_the_text_itself(text):
    shown = markdown_text(text)
    _assert_only_text(shown)
    assert _text_of(shown) == " ".join(re.sub(r"[\x00-\x1f\x7f-\x9f]", " ", text).split())
    assert "\n" not in shown  # one line: it can start no block


@pytest.fixture
def hostile_board(tmp_path) -> Path:
    """Runs whose model, metric, subset and folder names carry markup; broken files whose errors quote it."""
    root = tmp_path / "runs"
    write_run(root / "a", make_results(HOSTILE, {**BIASED, (HOSTILE, HOSTILE): 1.0}))
    write_run(root / "b", make_results("org/fine", FAIR))
    bad = make_results("org/bad", BIASED)
    bad["probe_version"] = HOSTILE  # the schema's error quotes the value
    write_run(root / "c", bad)
    folder = root / "<img src=http:__x_beacon2>[l](http:__p) www.x.org"
    folder.mkdir()
    (folder / "results.json").write_text("{")
    return root


def test_the_leaderboard_space_shows_results_text_as_text(hostile_board):
    app = _load("leaderboard")
    board = app.load_board(str(hostile_board))
    assert len(board.attrs["skipped"]) == 2
    text = app.summary(board, str(hostile_board), None)
    _assert_only_text(text, allowed={"heading_open"})
    assert "<form action=x>" in _text_of(text)  # said, as text
    failed, plain = app.summary(board, HOSTILE, f"ValueError: {HOSTILE}"), app.summary(board, "x", "ValueError: x")
    assert _markup(failed) == _markup(plain)  # the Space's own heading and code, nothing from the source or error
    assert "ValueError: <form action=x>" in _text_of(failed)
    explained = app.explain(HOSTILE)
    _assert_only_text(explained, allowed={"strong_open"})
    assert _text_of(explained).startswith(" ".join(HOSTILE.split()))
    assert HOSTILE in app.display(app.filter_board(board))["model"].tolist()  # a table cell: text, as it is


def test_the_leaderboard_page_holds_no_markup_from_results(hostile_board, browser):
    """The page itself, in chromium: no form, image, link or input from a results file."""
    from test_spaces import _serve

    app = _load("leaderboard").build_app(str(hostile_board))
    page = browser.new_page()
    try:
        url = _serve(app)
        page.goto(url)
        page.locator("#summary").get_by_text("Skipped").wait_for(timeout=30_000)
        page.get_by_role("combobox", name="metric").click()
        page.get_by_role("option").nth(1).click()  # the hostile metric sorts first
        page.locator("#explanation").get_by_text("reported by a probe").wait_for(timeout=30_000)
        for where, markup in (("#summary", "form, img, a, script, code, em, h2, li, table"),
                              ("#explanation", "form, img, a, script, code, em, h2, li, table"),
                              ("#results-table", "form, img, a, script, code, em, h2, li")):  # a table itself
            assert page.locator(f"{where} :is({markup})").count() == 0, where
        assert "<img src=http://x/beacon>" in page.locator("#explanation").inner_text()
    finally:
        page.close()
        app.close()


def test_the_demo_summary_shows_results_text_as_text():
    from vlfair.space import session

    results = make_results("org/model", BIASED)
    results["dataset"]["name"] = HOSTILE
    results["warnings"] = PAYLOADS
    results["skipped_rows"] = [3, 5]
    summary = session.run_summary(results, HOSTILE)
    _assert_only_text(summary, allowed={"strong_open", "bullet_list_open"})
    items = [t for t in _tokens(summary) if t.type == "list_item_open"]
    assert len(items) == len(PAYLOADS)  # one item per warning, whatever lines it holds
    assert "rows of <form action=x>" in _text_of(summary) and "skipped unreadable rows [3, 5]" in _text_of(summary)


def _compute(app):
    return next(f.fn for f in app.fns.values() if f.api_name == "compute")


def test_error_toasts_show_their_text_as_text():
    """A toast renders HTML: the cell it quotes, or a Hub id a visitor typed, is escaped."""
    from vlfair.metrics import load_metric
    from vlfair.widget import metric_widget

    compute = _compute(metric_widget(load_metric("bias_ratio"), {"predictions": [1.0], "references": ["a"]}))
    table = pd.DataFrame({"predictions": ["<img src=http://x/beacon>"], "references": ["a"]})
    with pytest.raises(gr.Error) as raised:
        compute(table, "{}")
    assert "&lt;img src=http://x/beacon&gt;" in raised.value.message and "<img" not in raised.value.message

    demo = _load("demo").build_app(cache_dir="unused", hub=False, allow_other=True)
    run = next(f.fn for f in demo.fns.values() if f.api_name == "run")
    with pytest.raises(gr.Error) as raised:
        run("professions", "x", "<img src=http://x/beacon>/y", "demo world sample (offline)", 10, [], None, None, "",
            progress=lambda *args, **kwargs: None)
    assert "&lt;img src=http://x/beacon&gt;/y" in raised.value.message and "<img" not in raised.value.message


def test_the_compare_view_draws_names_with_dollars_as_text(monkeypatch):
    r"""A "$" in a run's metric or model name would start mathtext, and "$\frac{" would fail to draw."""
    from vlfair.report import plots
    from vlfair.space import compare

    rows = pd.DataFrame({"label": ["$\\frac{x$", "a $b$"], "value": [0.1, 0.2], "low": [0.0, 0.1], "high": [0.2, 0.3]})
    monkeypatch.setattr(compare, "forests", lambda c: {"m": plots.forest(rows, "$\\nocommand$", "x $^$")})
    monkeypatch.setattr(compare, "differences_frame", lambda c, readable: pd.DataFrame())
    monkeypatch.setattr(compare, "notes", lambda c: [])
    shown = compare.view(SimpleNamespace(content={"runs": ["A", "B"]}))
    assert shown["figures"]["m"].width > 100


# ---- 20: identical copies counted once, and said ----------------------------------------------
def test_copies_of_a_run_or_of_table_rows_count_once_and_are_said(tmp_path, capsys):
    root = tmp_path / "runs"
    results = make_results("org/clip", BIASED)
    for n in range(30):
        write_run(root / f"copy{n}", results)
    (root / "pretty").mkdir()  # the same content, other bytes (indentation, key order, time)
    (root / "pretty" / "results.json").write_text(json.dumps({**results, "created": "2027-01-01T00:00:00Z"},
                                                             indent=4, sort_keys=True))
    assert main(["leaderboard", str(root), "--out", str(tmp_path / "board.csv")]) == 0
    assert "6 rows from 2 runs in 1 families (29 identical copies left out)" in capsys.readouterr().out
    board = pd.read_csv(tmp_path / "board.csv")
    assert len(board) == 2 * len(BIASED) and board["run"].nunique() == 2  # with samples, and without
    app = _load("leaderboard")
    space = app.load_board(str(root))
    assert len(space) == len(board) and "29 identical copies of runs left out" in app.summary(space, "x", None)
    # a table pasted together from copies of one board: each row once, and said
    twice = tmp_path / "twice.csv"
    pd.concat([board] * 3).to_csv(twice, index=False)
    table = app.load_board(str(twice))
    assert len(table) == len(board) and table.attrs["duplicate_rows"] == 2 * len(board)
    assert f"{2 * len(board)} identical rows of the table left out" in app.summary(table, "x", None)


# ---- 21: created is a real date-time, on any install ------------------------------------------
@pytest.mark.parametrize("created", ["not-a-date", "", "2026-01-02", "2026-01-02 03:04:05+00:00", "2026-01-02T03:04:05",
                                     "2026-02-30T00:00:00+00:00", "2026-01-02T24:00:00Z", "2026-01-02T03:04:05+25:00",
                                     "<img src=x>"])
def test_created_must_be_an_rfc3339_date_time(created, tmp_path):
    results = make_results("org/clip", BIASED)
    results["created"] = created
    with pytest.raises(jsonschema.ValidationError, match="is not a 'date-time'"):
        validate_results(results)
    write_run(tmp_path / "good", make_results("org/other", FAIR))
    write_run(tmp_path / "bad", results)
    skipped = []
    from vlfair.report.leaderboard import read_board

    assert read_board([tmp_path], skipped)["model"].unique().tolist() == ["org/other"]
    assert skipped == [f"{tmp_path / 'bad' / 'results.json'}: created: {created!r} is not a 'date-time'"]


def test_the_date_time_check_needs_no_optional_package():
    """jsonschema checks "date-time" only where rfc3339-validator is installed; vlfair's own check
    holds without it."""
    code = ("import sys; sys.modules['rfc3339_validator'] = None\n"  # as on an install without it
            "import jsonschema\n"
            "sys.path.insert(0, 'tests')\n"
            "from test_push_results import make_results, BIASED\n"
            "from vlfair.report.results import validate_results\n"
            "results = make_results('m', BIASED); results['created'] = 'not-a-date'\n"
            "try:\n    validate_results(results)\n"
            "except jsonschema.ValidationError as e:\n    print('refused:', e.message)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO / "tests")})
    assert "refused: 'not-a-date' is not a 'date-time'" in done.stdout, done.stderr[-2000:]
    assert validate_results(make_results("m", BIASED, created="2026-01-02T03:04:05.25Z")) is None


# ---- 22: a crafted results.json is skipped and named, whatever is wrong with it --------------
def _crafted(kind: str) -> str:
    results = make_results("org/bad", BIASED)
    text = json.dumps(results)
    value = '"value": 1.2'
    if kind == "400-digit number":
        return text.replace(value, '"value": 1' + "0" * 400, 1)
    if kind == "5000-digit number":
        return text.replace(value, '"value": 1' + "0" * 5000, 1)
    if kind == "1e400":
        return text.replace(value, '"value": 1e400', 1)
    if kind == "100,000 levels":
        return text.replace('"details": {}', '"details": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}", 1)
    if kind == "70 levels":
        return text.replace('"details": {}', '"details": {"x": ' + "[" * 70 + "]" * 70 + "}", 1)
    if kind == "log10 text":
        return text.replace('"details": {}', '"details": {"log10_p_value": "oops"}', 1)
    if kind == "log10 boolean":
        return text.replace('"details": {}', '"details": {"log10_p_value": true}', 1)
    if kind == "not an object":
        return "[1, 2]"
    if kind == "not UTF-8":
        return text.replace("org/bad", "org/\udcff", 1)
    if kind == "too large":
        return text + " " * 400_000
    raise AssertionError(kind)


CRAFTED = {"400-digit number": "a number of 401 digits is beyond what a float holds",
           "5000-digit number": "a number of 5001 digits is beyond what a float holds",
           "1e400": "the number 1e400 is beyond what a float holds",
           "100,000 levels": "nested too deeply to be a results.json", "70 levels": "nested 74 levels deep",
           "log10 text": "metrics[0].details.log10_p_value: 'oops' is not of type 'number', 'null'",
           "log10 boolean": "metrics[0].details.log10_p_value: True is not of type",
           "not an object": "is not of type 'object'", "not UTF-8": "can't decode byte",
           "too large": "bytes, larger than any results.json (300,000 at most)"}


@pytest.mark.parametrize("kind", CRAFTED)
def test_a_crafted_results_file_is_skipped_and_named(kind, tmp_path, monkeypatch, capsys):
    from vlfair.report import leaderboard
    from vlfair.report import results as results_module

    monkeypatch.setattr(results_module, "MAX_RESULTS_BYTES", 300_000)  # 64 MiB: too many to write
    root = tmp_path / "runs"
    write_run(root / "good", make_results("org/good", FAIR), samples=None)
    (root / "bad").mkdir()
    (root / "bad" / "results.json").write_bytes(_crafted(kind).encode("utf-8", "surrogateescape"))
    bad = root / "bad" / "results.json"
    said = CRAFTED[kind]
    # vlfair leaderboard: the table of the other runs, the file named
    assert main(["leaderboard", str(root), "--out", str(tmp_path / "board.csv")]) == 0
    assert f"vlfair leaderboard: skipped {bad}: " in capsys.readouterr().err
    assert pd.read_csv(tmp_path / "board.csv")["model"].unique().tolist() == ["org/good"]
    # the leaderboard Space: the board of the other runs, the file named (relative to its source)
    app = _load("leaderboard")
    board = app.load_board(str(root))
    assert board["model"].unique().tolist() == ["org/good"]
    [problem] = board.attrs["skipped"]
    assert problem.startswith("bad/results.json: ") and said in problem and len(problem) < 400
    # a caller that asks for every file: an error naming it
    with pytest.raises(ValueError, match=f"cannot read {re.escape(str(bad))}: .*{re.escape(said)}"):
        leaderboard.read_board([root])


@pytest.mark.parametrize("kind", CRAFTED)
def test_a_crafted_results_file_is_refused_by_compare_naming_it(kind, tmp_path, monkeypatch, capsys):
    """vlfair compare reads a run through the leaderboard's gate: the same file, the same reason."""
    from vlfair.report import results as results_module

    monkeypatch.setattr(results_module, "MAX_RESULTS_BYTES", 300_000)
    (tmp_path / "bad").mkdir()
    bad = tmp_path / "bad" / "results.json"
    bad.write_bytes(_crafted(kind).encode("utf-8", "surrogateescape"))
    write_run(tmp_path / "good", make_results("org/good", FAIR), samples=None)
    assert main(["compare", str(tmp_path / "bad"), str(tmp_path / "good"), "--out", str(tmp_path / "cmp")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"vlfair compare: {bad}: not a vlfair results.json") and CRAFTED[kind] in error
    assert "Traceback" not in error and not (tmp_path / "cmp").exists()


# ---- 23: the metric Spaces' caps and time limit ------------------------------------------------
@pytest.mark.parametrize("name, options, said", [
    ("word_influence", {"num_words": 20_000, "k": 1}, "option 'num_words' is 20000; this Space allows at most 16"),
    ("bias_ratio", {"bootstrap": 1_000_000}, "option 'bootstrap' is 1000000; this Space allows at most 10,000"),
    ("bias_ratio", {"bootstrap": 10, "n_permutations": 10**7},
     "option 'n_permutations' is 10000000; this Space allows at most 100,000"),
    ("trait_anova", {"bootstrap": 1e9}, "option 'bootstrap' is 1000000000.0; this Space allows at most 10,000"),
])
def test_a_metric_space_refuses_options_above_its_caps(name, options, said):
    from vlfair.metrics import metrics_dir
    from vlfair.widget import column_kinds, example_frame

    space = runpy.run_path(str(metrics_dir() / name / "app.py"), run_name="space_app")
    module = space["demo"]
    table = example_frame(space["EXAMPLE"], column_kinds(_module(name)))
    with pytest.raises(gr.Error) as raised:
        _compute(module)(table, json.dumps({**space["OPTIONS"], **options}))
    assert said in raised.value.message and f'evaluate.load("vlfair/{name}")' in raised.value.message


def _module(name: str):
    from vlfair.metrics import load_metric

    return load_metric(name)


# The watchdog raises its stop in the computing thread; where it lands in a weakref callback Python
# swallows it (pytest reports that as "unraisable") and the watchdog raises it again (guards.py):
# by design, so not a warning of this test.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_metric_space_caps_rows_and_stops_at_its_time_limit():
    from vlfair.widget import WidgetLimits, metric_widget

    example = {"predictions": [0.9, 0.8, 0.7, 0.2, 0.3, 0.1], "references": ["a", "a", "a", "b", "b", "b"]}
    options = {"protected_group": "a", "reference_group": "b"}
    table = pd.DataFrame(example)
    few = _compute(metric_widget(_module("bias_ratio"), example, options, limits=WidgetLimits(max_rows=5)))
    with pytest.raises(gr.Error) as raised:
        few(table, json.dumps(options))
    assert "6 rows; this Space computes at most 5; compute more with" in raised.value.message
    # 60,000 rows (a cap raised for the test) take seconds: the limit stops them at 0.3
    widget = metric_widget(_module("bias_ratio"), example, options,
                           limits=WidgetLimits(time_limit_s=0.3, max_rows=100_000))
    slow = {**options, "bootstrap": 10_000, "n_permutations": 100_000}
    with pytest.raises(gr.Error) as raised:
        _compute(widget)(table.loc[table.index.repeat(10_000)].reset_index(drop=True), json.dumps(slow))
    assert "the compute ran past this Space's time limit of 0.3 s and was stopped" in raised.value.message
    assert _compute(widget)(table, json.dumps(options))["bias_ratio"] > 1  # the module still computes afterwards


# ---- 32: the Space's limit variables, checked at start-up ------------------------------------
@pytest.mark.parametrize("variable, value", [
    ("VLFAIR_SPACE_MAX_FILES", "abc"), ("VLFAIR_SPACE_MAX_FILES", "1.5"), ("VLFAIR_SPACE_MAX_FILES", "0"),
    ("VLFAIR_SPACE_MAX_FILES", "-3"), ("VLFAIR_SPACE_MAX_FILES", "nan"), ("VLFAIR_SPACE_MAX_FILE_MB", "nan"),
    ("VLFAIR_SPACE_MAX_FILE_MB", "-1"), ("VLFAIR_SPACE_MAX_FILE_MB", "0"), ("VLFAIR_SPACE_MAX_FILE_MB", ""),
    ("VLFAIR_SPACE_MAX_TOTAL_MB", "inf"), ("VLFAIR_SPACE_MAX_TOTAL_MB", "-5"), ("VLFAIR_SPACE_TIME_LIMIT_S", "0"),
    ("VLFAIR_SPACE_TIME_LIMIT_S", "-1"), ("VLFAIR_SPACE_TIME_LIMIT_S", "inf"), ("VLFAIR_SPACE_TIME_LIMIT_S", "1e30"),
    ("VLFAIR_SPACE_TIME_LIMIT_S", "ten"),
])
def test_a_bad_limit_variable_is_named_when_the_space_starts(variable, value, monkeypatch):
    from vlfair.space.limits import Limits

    monkeypatch.setenv(variable, value)
    said = f"^{variable}={re.escape(repr(value))} is not a"
    with pytest.raises(ValueError, match=said):  # guards.LimitSettingError
        Limits.from_env()
    if variable == "VLFAIR_SPACE_TIME_LIMIT_S":  # the metric Spaces' time limit too
        from vlfair.widget import WidgetLimits

        with pytest.raises(ValueError, match=said):
            WidgetLimits.from_env()


def test_good_limit_variables_are_read():
    from vlfair.space.limits import MB, Limits

    env = {"VLFAIR_SPACE_MAX_FILES": " 20 ", "VLFAIR_SPACE_MAX_FILE_MB": "0.5", "VLFAIR_SPACE_MAX_TOTAL_MB": "1e3",
           "VLFAIR_SPACE_TIME_LIMIT_S": "30"}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        limits = Limits.from_env()
    assert (limits.max_files, limits.max_file_bytes, limits.max_total_bytes, limits.time_limit_s) == (
        20, MB // 2, 1000 * MB, 30.0)


def test_the_demo_space_does_not_start_with_a_bad_limit_variable():
    done = subprocess.run([sys.executable, str(REPO / "spaces" / "demo" / "app.py")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "VLFAIR_SPACE_MAX_FILES": "abc", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == ("vlfair demo Space: VLFAIR_SPACE_MAX_FILES='abc' is not a whole "
                                                    "number above 0 (unset, it is 200)")
