"""The leaderboard Space's compare view (vlfair.space.compare): runs of a family found, compared, refused."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from vlfair.space.compare import compare_chosen, run_choices, run_folders, view
from vlfair.space.limits import SpaceInputError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def app():
    spec = importlib.util.spec_from_file_location("leaderboard_app_compare", REPO / "spaces" / "leaderboard" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def board(app, demo):
    """The demo's encoders' runs (its answerers' runs of traits share their family: compared elsewhere)."""
    found = app.load_board(str(demo[0]))
    return found[found["kind"] == "contrastive"].reset_index(drop=True)


def _traits(app, board):
    return next(family for label, family in app.family_choices(board)[1:] if label.startswith("traits "))


def test_a_family_s_runs_are_offered_by_model_and_compared(app, board, demo):
    choices = run_choices(board, _traits(app, board))
    assert [label.split(" · ")[0] for label, _ in choices] == ["demo-world biased", "demo-world control"]
    runs = [run for _, run in choices]
    folders = run_folders(str(demo[0]), runs)
    assert [f.relative_to(demo[0]).as_posix() for f in folders] == ["biased/traits", "control/traits"]
    shown = view(compare_chosen(str(demo[0]), runs, bootstrap=100))
    assert list(shown["table"].columns[:5]) == ["metric", "subset", "A - B", "CI", "verdict"]
    assert "demo-world control less biased" in set(shown["table"]["verdict"])
    assert shown["figures"] and all(image.width > 300 for image in shown["figures"].values())
    assert any("paired bootstrap" in note for note in shown["notes"])
    assert run_choices(board, None) == [] and run_choices(board, "0" * 16) == []


def test_the_view_refuses_what_it_cannot_compare(app, board, demo, tmp_path):
    runs = [run for _, run in run_choices(board, _traits(app, board))]
    with pytest.raises(SpaceInputError, match="pick 2 to 4 runs"):
        compare_chosen(str(demo[0]), runs[:1])
    with pytest.raises(SpaceInputError, match="not in .* any more"):
        compare_chosen(str(demo[0]), [runs[0], "f" * 64])
    table = tmp_path / "board.csv"
    table.write_text("model\n")
    with pytest.raises(SpaceInputError, match="keeps no samples"):
        compare_chosen(str(table), runs)
    copy = tmp_path / "runs"
    shutil.copytree(demo[0] / "biased" / "traits", copy / "a")
    shutil.copytree(demo[0] / "control" / "traits", copy / "b")
    (copy / "b" / "samples.parquet").unlink()
    with pytest.raises(ValueError, match="no such samples file"):
        compare_chosen(str(copy), runs)


def test_runs_of_a_hub_dataset_are_downloaded_with_their_samples(app, board, demo, tmp_path, monkeypatch):
    """From a Hub dataset fed by vlfair push-results, only the chosen runs' folders are fetched
    (results.json and samples.parquet), then compared."""
    import json

    import huggingface_hub

    from vlfair.report.hub import run_folder

    repo = tmp_path / "repo"
    for encoder in ("biased", "control"):
        source = demo[0] / encoder / "traits"
        target = repo / run_folder(json.loads((source / "results.json").read_text()))
        shutil.copytree(source, target)
    asked = []

    def snapshot_download(repo_id, repo_type, revision, allow_patterns, token):
        asked.append((repo_id, repo_type, token, list(allow_patterns)))
        return str(repo)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    runs = [run for _, run in run_choices(board, _traits(app, board))]
    comparison = compare_chosen("hf://datasets/acme/board", runs, token=False, bootstrap=50)
    assert asked == [("acme/board", "dataset", False, [f"runs/**/*--{run}/*" for run in runs])]
    assert len(comparison.content["runs"]) == 2 and comparison.content["differences"]
