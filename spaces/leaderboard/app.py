"""vlfair leaderboard Space: many probe runs in one table, by model, probe, metric and subset.

Results come from VLFAIR_RESULTS: a directory of results.json files, a table written by
`vlfair leaderboard --out FILE`, or a Hub dataset pushed with `--push-to-hub` (split "results").
"""

import os
import re
from pathlib import Path

import gradio as gr
import pandas as pd

from vlfair.figures import subplots
from vlfair.metrics import metrics_dir
from vlfair.report.leaderboard import COLUMNS, read_results, read_table, readable, tidy
from vlfair.report.numbers import format_subset
from vlfair.report.plots import forest

ALL = "(all)"
SHOWN = ["model", "probe", "metric", "subset", "value", "ci_low", "ci_high", "p_value", "dataset", "created"]


def load_board(source: str) -> pd.DataFrame:
    """A results.json directory, a table file, or a dataset pushed by `vlfair leaderboard --push-to-hub`
    (a Hub id, or a local clone of that dataset repository: data/results-*.parquet)."""
    path = Path(source)
    if path.is_file():
        return read_table(path)
    if path.is_dir() and not list(path.glob("data/results-*.parquet")):
        files = sorted(path.rglob("results.json"))
        if not files:
            raise FileNotFoundError(f"no results.json under {path}, and it is not a leaderboard dataset "
                                    "(data/results-*.parquet)")
        skipped: list[str] = []  # one malformed file must not hide the board: listed, by name
        board = tidy(read_results(files, skipped))
        board.attrs["skipped"] = [problem.replace(f"{path}/", "", 1) for problem in skipped]
        return board
    import datasets

    return datasets.load_dataset(source, split="results").to_pandas()


def choices(board: pd.DataFrame, column: str) -> list[str]:
    return [ALL, *sorted(board[column].dropna().unique().tolist())]


def filter_board(board: pd.DataFrame, probe: str = ALL, metric: str = ALL, subset: str = "", model: str = ALL,
                 sort_by: str = "value", descending: bool = True) -> pd.DataFrame:
    """Rows matching every filter; ``subset`` is a case-insensitive text search in the subset."""
    rows = board
    for column, value in (("probe", probe), ("metric", metric), ("model", model)):
        if value and value != ALL:
            rows = rows[rows[column] == value]
    if subset:
        rows = rows[rows["subset"].str.contains(re.escape(subset), case=False)]
    if sort_by in rows.columns:  # values sort within their metric: an F never ranks against a CLIPScore
        keys = ["metric", sort_by] if sort_by in ("value", "p_value") else [sort_by]
        rows = rows.sort_values(keys, ascending=[True] * (len(keys) - 1) + [not descending], na_position="last")
    return rows[SHOWN].reset_index(drop=True)


def display(rows: pd.DataFrame) -> pd.DataFrame:
    """The table a person reads (``report.leaderboard.readable``). The numbers come before the
    model, whose name can be a long local path: they stay in view."""
    return readable(rows, extra=("model", "probe", "dataset"))


# the value that means "no bias" for the measures that have one: ratios 1, gaps and influences 0
NEUTRAL = {"bias_ratio": 1.0, "group_score_gap": 0.0, "group_rate_gap": 0.0, "cross_lingual_gap": 0.0,
           "word_influence": 0.0, "gap_amplification": 0.0}


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
    points = pd.DataFrame({"label": [format_subset(s) for s in rows["subset"]],
                           "series": [short_model_name(m) for m in rows["model"]] if several else "",
                           "value": rows["value"].to_numpy(float), "low": rows["ci_low"].to_numpy(float),
                           "high": rows["ci_high"].to_numpy(float)})
    title = f"{metric} with confidence intervals" + ("" if several else f" ({short_model_name(rows['model'].iloc[0])})")
    figure = forest(points, title, metric, neutral=NEUTRAL.get(metric))
    figure.tight_layout()
    return figure


def short_model_name(model: str) -> str:
    """The last part of a Hub id or path: the bars have no room for a cache directory."""
    return model.rstrip("/").split("/")[-1]


def model_detail(board: pd.DataFrame, model: str) -> pd.DataFrame:
    rows = board[board["model"] == model] if model and model != ALL else board.head(0)
    return display(rows).drop(columns=["model"]).reset_index(drop=True)


def explain(metric: str) -> str:
    """The metric's Description from its evaluate card, where vlfair has a module of that name."""
    card = metrics_dir() / metric / "README.md"
    if metric == ALL or not card.exists():
        return f"**{metric}**: reported by a probe; see the probe's report for its definition." if metric != ALL else ""
    text = card.read_text()
    match = re.search(r"## Description\n(.*?)\n## ", text, re.S)
    return f"### {metric}\n" + (match.group(1).strip() if match else "")


def build_app(source: str) -> gr.Blocks:
    try:
        board, problem = load_board(source), None
    except Exception as exc:  # noqa: BLE001  (a Space starts whatever its data source does)
        board, problem = pd.DataFrame(columns=COLUMNS), f"{type(exc).__name__}: {exc}"
    with gr.Blocks(title="vlfair leaderboard") as app:
        skipped = board.attrs.get("skipped", [])
        if problem:
            summary = (f"# vlfair leaderboard\nNo results: {source!r} could not be read ({problem}). Set "
                       "VLFAIR_RESULTS to a directory of results.json files, a table written by `vlfair leaderboard`, "
                       "or a Hub dataset it pushed, and restart the Space.")
        else:
            summary = (f"# vlfair leaderboard\n{len(board)} results from {board['model'].nunique()} models "
                       f"and {board['probe'].nunique()} probes."
                       + ("\n\nSkipped (unreadable): " + "; ".join(f"`{s}`" for s in skipped) if skipped else ""))
        gr.Markdown(summary, elem_id="summary")
        with gr.Row():
            probe = gr.Dropdown(choices(board, "probe"), value=ALL, label="probe")
            metric = gr.Dropdown(choices(board, "metric"), value=ALL, label="metric")
            model = gr.Dropdown(choices(board, "model"), value=ALL, label="model")
            subset = gr.Textbox(label="subset contains", placeholder="e.g. nurse")
        with gr.Row():
            sort_by = gr.Dropdown(["value", "p_value", "model", "metric"], value="value", label="sort by")
            descending = gr.Checkbox(value=True, label="descending")
        table = gr.Dataframe(display(filter_board(board)), label="results", interactive=False, elem_id="results-table",
                             wrap=True)
        chart = gr.Plot(label="metric with CIs", elem_id="chart")
        explanation = gr.Markdown(elem_id="explanation")
        # shown once a model is chosen: an empty table would show placeholder headers
        detail = gr.Dataframe(label="model detail", interactive=False, elem_id="model-detail", wrap=True, visible=False)

        def update(p, m, s, mo, sb, d):
            rows = filter_board(board, p, m, s, mo, sb, d)
            return (display(rows), metric_chart(rows, m), explain(m),
                    gr.update(value=model_detail(board, mo), visible=bool(mo) and mo != ALL))

        inputs = [probe, metric, subset, model, sort_by, descending]
        outputs = [table, chart, explanation, detail]
        for control in inputs:  # every control updates at once: no apply button
            control.change(update, inputs, outputs, api_name=False)
        subset.submit(update, inputs, outputs, api_name="filter")  # also the API's endpoint
    return app


if __name__ == "__main__":
    build_app(os.environ.get("VLFAIR_RESULTS", "results")).launch(server_name=os.environ.get("GRADIO_SERVER_NAME",
                                                                                             "127.0.0.1"))
