"""The leaderboard Space: its functions, and the served app through gradio_client."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

import pytest

from vlfair.probes import run_probe

SPACES = Path(__file__).resolve().parents[1] / "spaces"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"space_{name}", SPACES / name / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results_dir(clip_encoder, tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("space-results")
    run_probe("public-figures", clip_encoder, "synthetic:pfi", base / "pfi", cache_dir=None, settings={"bootstrap": 100})
    run_probe("professions", clip_encoder, "synthetic:professions", base / "professions", cache_dir=None,
              settings={"bootstrap": 100, "n_permutations": 200})
    return base


def test_leaderboard_functions(results_dir):
    app = _load("leaderboard")
    board = app.load_board(str(results_dir))
    assert set(board["probe"]) == {"public-figures", "professions"}
    expected = ((board["probe"] == "public-figures") & (board["metric"] == "bias_ratio")).sum()
    ratios = app.filter_board(board, probe="public-figures", metric="bias_ratio")
    assert expected == 3 and len(ratios) == expected and set(ratios["metric"]) == {"bias_ratio"}
    nurse = app.filter_board(board, subset="NURSE")
    assert len(nurse) and all("nurse" in s for s in nurse["subset"])
    ordered = app.filter_board(board, metric="group_score_gap", sort_by="value", descending=True)["value"].tolist()
    assert ordered == sorted(ordered, reverse=True)
    figure = app.metric_chart(app.filter_board(board, metric="bias_ratio"), "bias_ratio")
    assert len(figure.axes[0].patches) == 3
    assert "bias ratio compares how strongly" in app.explain("bias_ratio") and app.explain("(all)") == ""
    detail = app.model_detail(board, board["model"][0])
    assert len(detail) == len(board)
    board.to_parquet(results_dir / "board.parquet")
    assert len(app.load_board(str(results_dir / "board.parquet"))) == len(board)
    (results_dir / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no results.json"):
        app.load_board(str(results_dir / "empty"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_leaderboard_served_and_called_through_gradio_client(results_dir):
    from gradio_client import Client

    app = _load("leaderboard").build_app(str(results_dir))
    port = _free_port()
    app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        table, _chart, explanation, _detail = client.predict("public-figures", "bias_ratio", "", "(all)", "value", True,
                                                             api_name="/filter")
        assert table["headers"][:3] == ["model", "probe", "metric"]
        assert len(table["data"]) == 3 and {row[2] for row in table["data"]} == {"bias_ratio"}
        assert "bias_ratio" in explanation
    finally:
        app.close()
