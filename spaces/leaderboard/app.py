"""vlfair leaderboard Space: many people's probe runs, ranked only against comparable runs.

Results come from VLFAIR_RESULTS, set by whoever runs the Space: a Hub dataset fed by
`vlfair push-results` (hf://datasets/ORG/NAME, or ORG/NAME), a directory of runs, or a table written
by `vlfair leaderboard --out FILE`. A visitor may load another Hub dataset in the page (never a path
on the server). Every text in a results.json is data: it is shown through components that render
text (tables, dropdowns), and escaped where Markdown shows it. VLFAIR_RECORDS, a URL with {record}
(`vlfair card-results --source-url`'s), links each row to its run's Every Eval Ever record; it and the
compare tab's VLFAIR_SPACE_TIME_LIMIT_S are checked when the Space starts: a bad one stops it, named.

Built with Gradio 6's own components. VLFAIR_RESULTS may also be a board an older vlfair pushed
(`data/results-*.parquet`). A family selector (probe and version, dataset, split and subset, the settings
and model dtype that set it apart from the probe's other families, how many models) with what its runs
share; filters by probe, metric, model and subset text, the table's own search and column filters,
sorting by rank within a family (chosen with the family), the metric's chart and card. The tier is shown
beside the rank, a family's metric sorted by tier, then rank, and each model's tier named in the chart.
A row's record link is the board's `record` column (the file name card-results writes, from the run
alone); the link's text is fixed and the name URL-quoted. Where Markdown shows a text from a results file
(the summary, the skipped files, a metric without a card, the compare tab's notes and refusals),
`vlfair.report.markup.markdown_text` escapes every ASCII punctuation character with a backslash
(CommonMark makes each one literal) and puts it on one line, so no tag, link, bare address, code,
emphasis, LaTeX or block can come from it; error toasts, which Gradio renders as HTML, are
`html.escape`d. A metric's card is read only for a name in `metrics.available_metrics()` whose card
resolves inside the metrics folder (`metrics.metric_card`): never a path, `..` or a symlink out. The
compare tab: `vlfair.space.compare`.

A scorer filter picks contrastive or generative models (the board's `kind` column).

A board is read as `vlfair leaderboard` reads it (`vlfair.compare.board`: the installed probes' facts, a plugin's
too; a run whose values its samples beside it do not give, skipped and named), each load within the Space's time
limit (`VLFAIR_SPACE_TIME_LIMIT_S`: past it, the load stops and says so), and a family of more runs than
`vlfair.compare.tiers.MAX_RUNS` is not tiered (said under "Tiers", with the families tiered unpaired).
"""

import json
import os
import re
import urllib.parse
import warnings
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from vlfair.compare.board import read_checked_board
from vlfair.compare.tiers import add_tiers
from vlfair.figures import subplots
from vlfair.metrics import metric_card
from vlfair.report.leaderboard import (
    BOARD_FILES,
    COLUMNS,
    Wanted,
    download_runs,
    hub_repo,
    is_repo_id,
    markdown_text,
    neutral_value,
    normalise,
    read_table,
    readable,
)
from vlfair.report.numbers import format_subset, format_value
from vlfair.report.plots import forest
from vlfair.space.compare import MAX_RUNS, compare_chosen, run_choices, view
from vlfair.space.limits import (
    RECORDS_VARIABLE,
    LimitSettingError,
    check_leaderboard_settings,
    run_with_time_limit,
    time_limit_from_env,
)

ALL = "(all)"
# a URL with {record} where the runs' Every Eval Ever records are (card-results' --source-url): each row of the
# board links its run's record; checked when the Space starts (space.limits.check_leaderboard_settings)
RECORDS = os.environ.get(RECORDS_VARIABLE)
TIERS: dict[tuple, Any] = {}  # each family's tests, by its runs and the options (vlfair.compare.tiers.add_tiers)
TIERS_KEPT = 256  # families whose tests are kept (the oldest forgotten first: a visitor may load many datasets)
CHECKED: dict[str, str | None] = {}  # each run's values against its samples, by its content hash (compare.board)
CHECKED_KEPT = 100_000
LOAD_ADVICE = "load a dataset of fewer runs, or read it with vlfair leaderboard locally"
SHOWN = ["model", "kind", "probe", "metric", "subset", "value", "ci_low", "ci_high", "p_value", "log10_p_value",
         "detected", "correction", "dataset", "created", "rank", "tier", "neutral", "family", "record"]
SORTS = ["value", "rank", "p_value", "model", "metric"]
LEGACY = "data/results-*.parquet"  # the table an older `vlfair leaderboard --push-to-hub` replaced on each push
LEGACY_BYTES = 256 * 2**20  # such a table: one row per number of every run (hundreds of thousands of rows)
WIDTHS = {"metric": "150px", "subset": "260px", "value": "80px", "CI": "130px", "p": "80px", "bias detected": "110px",
          "rank": "60px",
          "tier": "50px",
          "no bias at": "90px", "model": "220px", "kind": "110px", "probe": "120px", "dataset": "120px",
          "family": "160px", "record": "90px"}


def load_board(source: str, token: str | bool | None = None) -> pd.DataFrame:
    """A Hub dataset of runs (hf://datasets/ORG/NAME, or ORG/NAME where no such local path exists),
    a directory of runs, a table file, or a board an older vlfair pushed (data/results-*.parquet).
    ``token`` reads the Hub (None: the Space's HF_TOKEN; False: none)."""
    path = Path(source)
    if hub_repo(source) is None and not path.exists() and is_repo_id(source):
        source = f"hf://datasets/{source}"  # a bare Hub id, as VLFAIR_RESULTS took it before
    if hub_repo(source) is not None:
        skipped: list[str] = []  # a file over its cap is not downloaded: listed, by name
        root = download_runs(source, token, (*BOARD_FILES, Wanted(LEGACY, LEGACY_BYTES, "leaderboard table")), skipped)
        return _board_in(root, source, skipped)
    if path.is_file():
        return read_table(path)
    return _board_in(path, None)


def _board_in(path: Path, source: str | None, skipped: list[str] | None = None) -> pd.DataFrame:
    """The runs under ``path`` (or its older pushed table); files are named relative to it (or to
    the Hub ``source`` it was downloaded from), never by the server's folders. ``skipped``: what the
    download left out."""
    tables = sorted(path.glob(LEGACY))
    if path.is_dir() and tables and not list(path.rglob("results.json")):
        return normalise(pd.concat([pd.read_parquet(t) for t in tables], ignore_index=True))
    if not path.is_dir() or not list(path.rglob("results.json")):
        raise FileNotFoundError(f"no results.json under {source or path}, and it is not a leaderboard dataset "
                                f"({LEGACY})")
    problems: list[str] = []  # one malformed file must not hide the board: listed, by name
    # the installed probes' facts (a plugin's), each run's values checked against its samples beside it
    board = read_checked_board([path], problems, memo=CHECKED)
    for run in list(CHECKED)[:max(0, len(CHECKED) - CHECKED_KEPT)]:
        del CHECKED[run]
    # tiers: paired from the runs' samples where they are here (a folder of runs), else from the intervals; each
    # family's tests once per process (by its runs' content hashes), not on every load of the board
    said: list[str] = []  # a family tiered unpaired, or not at all (one model, more runs than a board tiers)
    board = add_tiers(board, board.attrs["paths"], memo=TIERS, said=said)
    board.attrs["tiers_said"] = said
    for family in list(TIERS)[:max(0, len(TIERS) - TIERS_KEPT)]:  # a dict keeps its keys in insertion order
        del TIERS[family]
    board.attrs["skipped"] = [*(skipped or []),
                              *(problem.replace(f"{path}/", f"{source}/" if source else "", 1) for problem in problems)]
    return board


# ---- families --------------------------------------------------------------------------------
def family_entries(board: pd.DataFrame) -> list[dict]:
    """Each family of the board (``report.leaderboard.families``); for a table file, which keeps
    no settings, what its rows say."""
    if board.attrs.get("families") is not None:
        return board.attrs["families"]
    entries = []
    for family, rows in board[board["family"].notna()].groupby("family", sort=False):
        first = rows.iloc[0]
        entries.append({"family": family, "probe": first["probe"], "probe_version": int(first["probe_version"]),
                        "dataset": first["dataset"], "fingerprint": None, "split": first["split"], "subset": None,
                        "settings": {}, "dtype": first["dtype"], "models": list(dict.fromkeys(rows["model"])),
                        "runs": rows["run"].nunique()})
    return entries


def family_choices(board: pd.DataFrame) -> list[tuple[str, str]]:
    """The family selector: (label, family); the label names the probe and its version, the
    dataset, the split and subset, the settings (and dtype) that set it apart from the probe's other
    families, and how many models it ranks."""
    entries = family_entries(board)
    made = {id(entry): _makes(entry) for entry in entries}
    choices = [("(all families)", ALL)]
    for entry in entries:
        siblings = [made[id(e)] for e in entries if e["probe"] == entry["probe"] and e is not entry]
        own = made[id(entry)]
        differ = sorted({k for e in siblings for k in {*e, *own} if e.get(k) != own.get(k)})
        data = entry["dataset"] + (f"/{entry['subset']}" if entry["subset"] else "") + (
            f" ({entry['split']})" if entry["split"] else "")
        settings = ", ".join(f"{k}={_short(own.get(k))}" for k in differ)
        parts = (f"{entry['probe']} v{entry['probe_version']}", data, settings, _count(len(entry["models"]), "model"),
                 entry["family"][:8])
        label = " · ".join(part for part in parts if part)
        choices.append((label, entry["family"]))
    return choices


def _makes(entry: dict) -> dict:
    """The settings that make a family, with its models' dtype (runs in two precisions are two families;
    named apart from a probe's own ``dtype`` setting, word-influence's generator's)."""
    return {**entry["settings"], **({"model dtype": entry["dtype"]} if entry.get("dtype") else {})}


def _short(value, limit: int = 40) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def family_detail(board: pd.DataFrame, family: str) -> pd.DataFrame:
    """What the runs of ``family`` share, one field a row (text): probe, dataset, settings."""
    entry = next((e for e in family_entries(board) if e["family"] == family), None)
    if entry is None:
        return pd.DataFrame(columns=["field", "value"])
    fields = [("family", entry["family"]), ("probe", f"{entry['probe']} (version {entry['probe_version']})"),
              ("dataset", entry["dataset"]), ("fingerprint", entry["fingerprint"]), ("split", entry["split"]),
              ("subset", entry["subset"]), ("model dtype", entry.get("dtype")),
              *((f"setting: {k}", v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
                for k, v in entry["settings"].items()),
              ("models", ", ".join(entry["models"])), ("runs", entry["runs"])]
    return pd.DataFrame([(k, "" if v is None else str(v)) for k, v in fields], columns=["field", "value"])


# ---- the table -------------------------------------------------------------------------------
def choices(board: pd.DataFrame, column: str) -> list[str]:
    return [ALL, *sorted(board[column].dropna().unique().tolist())]


def filter_board(board: pd.DataFrame, probe: str = ALL, metric: str = ALL, subset: str = "", model: str = ALL,
                 sort_by: str = "value", descending: bool = True, family: str = ALL, kind: str = ALL
                 ) -> pd.DataFrame:
    """Rows matching every filter; ``subset`` is a case-insensitive text search in the subset.
    Values and ranks sort within their metric (and subset, for ranks): an F never ranks against a
    CLIPScore."""
    rows = board.reindex(columns=list(dict.fromkeys([*board.columns, *SHOWN])))  # an old table lacks rank
    for column, value in (("probe", probe), ("metric", metric), ("model", model), ("family", family),
                          ("kind", kind)):
        if value and value != ALL:
            rows = rows[rows[column] == value]
    if subset:
        rows = rows[rows["subset"].str.contains(re.escape(subset), case=False)]
    if sort_by in rows.columns:
        keys = {"value": ["metric", "value"], "p_value": ["metric", "p_value"],
                "rank": ["family", "metric", "subset", "tier", "rank"]}.get(sort_by, [sort_by])
        rows = rows.sort_values(keys, ascending=[True] * (len(keys) - 1) + [not descending], na_position="last")
    return rows[SHOWN].reset_index(drop=True)


def display(rows: pd.DataFrame) -> pd.DataFrame:
    """The table a person reads (``report.leaderboard.readable``). The numbers come before the
    model, whose name can be a long local path: they stay in view."""
    shown = readable(rows, extra=("model", "kind", "probe", "dataset", "family"))
    shown.insert(6, "rank", rows["rank"].map(lambda r: "" if pd.isna(r) else f"{r:.0f}").to_numpy())
    # models whose bias the runs cannot tell apart share a tier (vlfair.compare.tiers)
    shown.insert(7, "tier", rows["tier"].map(lambda t: "" if pd.isna(t) else f"{t:.0f}").to_numpy())
    shown.insert(8, "no bias at", rows["neutral"].map(format_value).to_numpy())
    if RECORDS:  # each row's run's Every Eval Ever record: its interval, level and resamples, for other tools
        shown["record"] = [record_link(name, RECORDS) for name in rows["record"]]
    return shown


# what vlfair.report.eval_results.record_name makes: the datastore's data/<collection>/<developer>/<model>/<uuid>.json
# (a board made before: one file name)
RECORD_NAME = re.compile(r"(?:data(?:/[\w.\-]+){3}/)?[\w.\-]+\.json")


def record_link(name: str | None, template: str) -> str:
    """A Markdown link to the record ``name`` where ``template`` (a URL with {record}) puts it; "" for a row of
    a table that kept no record name, or whose name is not one a run's record has (a table a visitor loaded may
    hold any text there: never a path out of the records' folder, no part of it . or .. or hidden)."""
    if not name or not RECORD_NAME.fullmatch(name) or any(part.startswith(".") for part in name.split("/")):
        return ""
    return f"[record]({template.format(record=urllib.parse.quote(name, safe='/'))})"  # as card-results fills it


def datatypes(shown: pd.DataFrame) -> list[str]:
    """How the table renders each column: the record's link as Markdown, everything else as text (a results
    file's text is data, never markup)."""
    return ["markdown" if column == "record" else "str" for column in shown.columns]


def metric_chart(rows: pd.DataFrame, metric: str):
    """Each (model, subset) of ``metric`` with its confidence interval, one line each: the labels
    read horizontally, and a dashed line marks where no bias reads."""
    rows = rows[rows["metric"] == metric].head(40) if metric != ALL else rows.head(0)
    if rows.empty:
        figure, axis = subplots(figsize=(8, 1.2))
        axis.text(0.5, 0.5, "choose a metric to plot", ha="center", va="center")
        axis.axis("off")
        return figure
    several = rows["model"].nunique() > 1
    tiers = rows["tier"] if "tier" in rows else pd.Series(float("nan"), index=rows.index)
    points = pd.DataFrame({"label": [_plain(format_subset(s)) for s in rows["subset"]],
                           "series": [_plain(short_model_name(m)) + ("" if pd.isna(t) else f" (tier {t:.0f})")
                                      for m, t in zip(rows["model"], tiers)] if several else "",
                           "value": rows["value"].to_numpy(float), "low": rows["ci_low"].to_numpy(float),
                           "high": rows["ci_high"].to_numpy(float)})
    title = f"{metric} with confidence intervals" + ("" if several else f" ({short_model_name(rows['model'].iloc[0])})")
    neutral = rows["neutral"].dropna() if "neutral" in rows else pd.Series(dtype=float)
    figure = forest(points, _plain(title), _plain(metric),
                    neutral=float(neutral.iloc[0]) if len(neutral) else neutral_value(metric))
    with warnings.catch_warnings():  # labels too long to fit (a results file's subset) keep the default margins
        warnings.filterwarnings("ignore", "Tight layout not applied", UserWarning)
        figure.tight_layout()
    return figure


def _plain(text: str) -> str:
    """Text matplotlib draws as it is: a "$" would start mathtext."""
    return text.replace("$", r"\$")


def short_model_name(model: str) -> str:
    """The last part of a Hub id or path: the bars have no room for a cache directory."""
    return model.rstrip("/").split("/")[-1]


def model_detail(board: pd.DataFrame, model: str) -> pd.DataFrame:
    rows = filter_board(board, model=model, sort_by="metric") if model and model != ALL else filter_board(board.head(0))
    return display(rows).drop(columns=["model"]).reset_index(drop=True)


def explain(metric: str) -> str:
    """The metric's Description from its evaluate card, where it is one of vlfair's modules
    (``metrics.metric_card``: a name from a results file is never a path)."""
    if metric == ALL:
        return ""
    card = metric_card(metric)
    if card is None:
        return f"**{markdown_text(metric)}**: reported by a probe; see the probe's report for its definition."
    match = re.search(r"## Description\n(.*?)\n## ", card.read_text(), re.S)
    return f"### {metric}\n" + (match.group(1).strip() if match else "")


def _count(number: int, noun: str, plural: str | None = None) -> str:
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def summary(board: pd.DataFrame, source: str, problem: str | None) -> str:
    if problem:
        return (f"# vlfair leaderboard\nNo results: {markdown_text(repr(source))} could not be read "
                f"({markdown_text(problem)}). Set VLFAIR_RESULTS to a Hub dataset fed by `vlfair push-results` "
                "(hf://datasets/ORG/NAME), a directory of runs or a table written by `vlfair leaderboard`, and "
                "restart the Space, or load a Hub dataset above.")
    skipped, tiers_said = board.attrs.get("skipped", []), board.attrs.get("tiers_said", [])
    duplicates, rows = board.attrs.get("duplicates", 0), board.attrs.get("duplicate_rows", 0)
    return (f"# vlfair leaderboard\n{_count(len(board), 'result')} from {_count(board['model'].nunique(), 'model')} "
            f"and {_count(board['probe'].nunique(), 'probe')}, in "
            f"{_count(len(family_entries(board)), 'family', 'families')} of comparable runs: rank 1 is the value "
            "closest to its measure's neutral value (no bias), among the runs of one family only; a level (an "
            "accuracy, a mean score) has no rank."
            + (f" {_count(duplicates, 'identical copy', 'identical copies')} of runs left out." if duplicates else "")
            + (f" {_count(rows, 'identical row')} of the table left out." if rows else "")
            + ("\n\nSkipped (unreadable): " + "; ".join(markdown_text(s) for s in skipped) if skipped else "")
            + ("\n\nTiers: " + "; ".join(markdown_text(s) for s in tiers_said) if tiers_said else ""))


def read_source(source: str, token: str | bool | None = None) -> tuple[pd.DataFrame, str | None]:
    """The board of ``source`` and None, or an empty board and what went wrong (a Space starts
    whatever its data source does); read within the Space's time limit (``VLFAIR_SPACE_TIME_LIMIT_S``)."""
    try:
        return run_with_time_limit(lambda: load_board(source, token), time_limit_from_env(), LOAD_ADVICE), None
    except Exception as exc:  # noqa: BLE001
        return normalise(pd.DataFrame(columns=COLUMNS)), f"{type(exc).__name__}: {exc}"


def hub_source(text: str) -> str:
    """A visitor's source: a Hub dataset only, never a path on the server."""
    text = text.strip()
    if hub_repo(text) is None and not is_repo_id(text):
        raise gr.Error("give a Hub dataset: hf://datasets/ORG/NAME or ORG/NAME")
    return text if hub_repo(text) is not None else f"hf://datasets/{text}"


def visitor_board(text: str) -> tuple[str, pd.DataFrame, str | None]:
    """The board of the Hub dataset a visitor names, read without the Space's token: a visitor
    sees only what anyone may read, never a private dataset the Space's HF_TOKEN can."""
    source = hub_source(text)
    return (source, *read_source(source, token=False))


def build_app(source: str) -> gr.Blocks:
    check_leaderboard_settings()
    board, problem = read_source(source)
    with gr.Blocks(title="vlfair leaderboard") as app:
        state = gr.State(board)
        source_state = gr.State((source, None))  # where the board came from, and the token to read it with
        heading = gr.Markdown(summary(board, source, problem), elem_id="summary")
        with gr.Row():
            hub = gr.Textbox(label="Hub dataset", placeholder="hf://datasets/ORG/NAME", scale=4, elem_id="source")
            load = gr.Button("load", scale=1)
        with gr.Tab("leaderboard"):
            family = gr.Dropdown(family_choices(board), value=ALL, label="family (what may be ranked together)",
                                 elem_id="family")
            detail_of_family = gr.Dataframe(label="the family's runs share", interactive=False, visible=False,
                                            elem_id="family-detail", wrap=True)
            with gr.Row():
                probe = gr.Dropdown(choices(board, "probe"), value=ALL, label="probe")
                metric = gr.Dropdown(choices(board, "metric"), value=ALL, label="metric")
                model = gr.Dropdown(choices(board, "model"), value=ALL, label="model")
                kind = gr.Dropdown(choices(board, "kind"), value=ALL, label="scorer (contrastive or generative)",
                                   elem_id="kind")
                subset = gr.Textbox(label="subset contains", placeholder="e.g. nurse")
            with gr.Row():
                sort_by = gr.Dropdown(SORTS, value="value", label="sort by")
                descending = gr.Checkbox(value=True, label="descending")
            shown = display(filter_board(board))
            table = gr.Dataframe(shown, label="results", interactive=False, elem_id="results-table", wrap=True,
                                 show_search="filter", column_widths=[WIDTHS[c] for c in shown.columns],
                                 datatype=datatypes(shown))
            chart = gr.Plot(label="metric with CIs", elem_id="chart")
            explanation = gr.Markdown(elem_id="explanation")
            # shown once a model is chosen: an empty table would show placeholder headers
            detail = gr.Dataframe(label="model detail", interactive=False, elem_id="model-detail", wrap=True,
                                  visible=False, show_search="filter",
                                  column_widths=[WIDTHS[c] for c in shown.columns if c != "model"],
                                  datatype=[d for c, d in zip(shown.columns, datatypes(shown)) if c != "model"])
        with gr.Tab("compare", elem_id="compare"):
            gr.Markdown("Pick 2 to 4 runs of one family: `vlfair compare` sets them side by side on the same "
                        "samples (their samples.parquet): each metric's difference A - B with a paired bootstrap "
                        "interval (the same resampled rows for both), a paired permutation test (Holm-adjusted "
                        "over the comparison's differences) and which run is less biased, closer to the metric's "
                        "neutral value.")
            with gr.Row():
                compare_family = gr.Dropdown(family_choices(board)[1:], value=None, label="family",
                                             elem_id="compare-family", scale=3)
                chosen = gr.Dropdown([], value=[], multiselect=True, label=f"runs (2 to {MAX_RUNS})",
                                     elem_id="compare-runs", scale=3)
                go = gr.Button("compare", elem_id="compare-go", scale=1)
            compare_notes = gr.Markdown(elem_id="compare-notes")
            forest_choice = gr.Dropdown([], label="forest plot", elem_id="compare-forest-choice", visible=False)
            forest_plot = gr.Image(label="A - B with its paired interval", elem_id="compare-forest", visible=False,
                                   type="pil", interactive=False)
            compare_table = gr.Dataframe(label="differences", interactive=False, wrap=True, visible=False,
                                         elem_id="compare-table", show_search="filter")
            figures = gr.State({})

        def pick_family(f, b):
            return gr.update(choices=run_choices(b, f), value=[])

        compare_family.change(pick_family, [compare_family, state], [chosen], api_name=False)

        def run_comparison(runs, where):
            try:
                shown = view(compare_chosen(where[0], list(runs or []), token=where[1]))
            except ValueError as exc:  # a refusal, a run without samples: said, as text
                return ({}, f"**Cannot compare:** {markdown_text(exc)}", gr.update(visible=False),
                        gr.update(visible=False), gr.update(visible=False))
            names = list(shown["figures"])
            return (shown["figures"], "\n".join(f"- {markdown_text(note)}" for note in shown["notes"]),
                    gr.update(choices=names, value=names[0] if names else None, visible=bool(names)),
                    gr.update(value=shown["figures"][names[0]] if names else None, visible=bool(names)),
                    gr.update(value=shown["table"], visible=True))

        go.click(run_comparison, [chosen, source_state], [figures, compare_notes, forest_choice, forest_plot,
                                                          compare_table], api_name="compare")
        forest_choice.change(lambda name, f: f.get(name), [forest_choice, figures], [forest_plot], api_name=False)

        def update(p, m, s, mo, sb, d, f, k, b):
            rows = filter_board(b, p, m, s, mo, sb, d, f, k)
            return (display(rows), metric_chart(rows, m), explain(m),
                    gr.update(value=model_detail(b, mo), visible=bool(mo) and mo != ALL))

        inputs = [probe, metric, subset, model, sort_by, descending, family, kind, state]
        outputs = [table, chart, explanation, detail]
        for control in inputs[:-1]:  # every control updates at once: no apply button
            control.change(update, inputs, outputs, api_name=False)
        subset.submit(update, inputs, outputs, api_name="filter")  # also the API's endpoint

        def choose_family(f, b):  # a family's table reads best by rank: closest to no bias first
            chosen = bool(f) and f != ALL
            return (gr.update(value=family_detail(b, f), visible=chosen),
                    gr.update(value="rank") if chosen else gr.update(),
                    gr.update(value=False) if chosen else gr.update())

        family.change(choose_family, [family, state], [detail_of_family, sort_by, descending], api_name=False)

        def reload(text):
            wanted, new, trouble = visitor_board(text)
            families = family_choices(new)
            return (new, (wanted, False), summary(new, wanted, trouble), gr.update(choices=families, value=ALL),
                    *(gr.update(choices=choices(new, c), value=ALL) for c in ("probe", "metric", "model", "kind")),
                    display(filter_board(new)), gr.update(choices=families[1:], value=None),
                    gr.update(choices=[], value=[]))

        for trigger in (load.click, hub.submit):
            trigger(reload, [hub], [state, source_state, heading, family, probe, metric, model, kind, table,
                                    compare_family, chosen], api_name=False)
    return app


if __name__ == "__main__":
    try:
        check_leaderboard_settings()
    except LimitSettingError as exc:  # the Space's own settings: said at start-up, not by every row or comparison
        raise SystemExit(f"vlfair leaderboard Space: {exc}") from None
    build_app(os.environ.get("VLFAIR_RESULTS", "results")).launch(server_name=os.environ.get("GRADIO_SERVER_NAME",
                                                                                             "127.0.0.1"))
