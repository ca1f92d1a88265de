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


def _hub_board(demo, tmp_path, monkeypatch, extra: dict[str, bytes] | None = None):
    """The demo's two traits runs pushed to a stand-in Hub dataset (tests/test_push_results.py), beside
    ``extra`` files; the stand-in and the runs' ids."""
    import json

    from test_push_results import REPO, StandInHub

    from vlfair.report.hub import content_hash, run_folder

    hub = StandInHub(tmp_path).install(monkeypatch)
    files, runs = dict(extra or {}), []
    for encoder in ("biased", "control"):
        source = demo[0] / encoder / "traits"
        results = json.loads((source / "results.json").read_text())
        folder = run_folder(results)
        files.update({f"{folder}/{name}": (source / name).read_bytes() for name in ("results.json", "samples.parquet")})
        runs.append(content_hash(results))
    hub.add_repo(REPO, files=files)
    return hub, f"hf://datasets/{REPO}", runs


def test_runs_of_a_hub_dataset_are_downloaded_with_their_samples(demo, tmp_path, monkeypatch):
    """From a Hub dataset fed by vlfair push-results, only the chosen runs' results.json and the samples
    file each names are fetched, then compared."""
    hub, source, runs = _hub_board(demo, tmp_path, monkeypatch, {"runs/x/y/other--0123/results.json": b"{}"})
    comparison = compare_chosen(source, runs, token=False, bootstrap=50)
    assert len(comparison.content["runs"]) == 2 and comparison.content["differences"]
    assert sorted(path.rsplit("/", 1)[1] for path in hub.downloaded) == ["results.json", "results.json",
                                                                          "samples.parquet", "samples.parquet"]
    assert set(hub.tokens) == {False}  # a visitor's comparison reads without the Space's token


# Issue 43, SECURITY 2: whoever can push to a board must not be able to fill the Space's disk through it
@pytest.mark.parametrize("planted", ["large file beside", "deep file beside", "many files beside", "named like a run"])
def test_a_comparison_downloads_nothing_but_what_each_run_names(demo, tmp_path, monkeypatch, planted):
    hub, source, runs = _hub_board(demo, tmp_path, monkeypatch)
    folder = next(path for path in hub.files() if path.endswith(f"--{runs[0]}/results.json")).rsplit("/", 1)[0]
    extra = {"large file beside": {f"{folder}/weights.bin": b"0" * 3_000_000},
             "deep file beside": {f"{folder}/a/b/c/d/results.json": b"{}"},
             "many files beside": {f"{folder}/junk-{i}.parquet": b"PAR1" for i in range(50)},
             "named like a run": {f"runs/p/f/fake--{runs[0]}/samples.parquet": b"0" * 1000,
                                  f"runs/p/f/fake--{runs[0]}/results.json": b'{"not": "this run"}'}}[planted]
    hub.repos[("dataset", "acme/board")]["files"].update(extra)
    compare_chosen(source, runs, token=False, bootstrap=20)
    assert not set(hub.downloaded) & (set(extra) - {f"runs/p/f/fake--{runs[0]}/results.json"})
    assert all(path.endswith(("/results.json", "/samples.parquet")) for path in hub.downloaded)


@pytest.mark.parametrize("named", ["../../../etc/passwd", "sub/samples.parquet", "..", "", 7, "samples.parquet\n"])
def test_a_samples_file_named_outside_its_run_is_refused_and_not_fetched(demo, tmp_path, monkeypatch, named):
    import json

    from vlfair.report.hub import content_hash

    hub, source, runs = _hub_board(demo, tmp_path, monkeypatch)
    files = hub.repos[("dataset", "acme/board")]["files"]
    path = next(p for p in files if p.endswith(f"--{runs[0]}/results.json"))
    results = json.loads(files.pop(path))
    results["samples"]["file"] = named
    runs[0] = content_hash(results)  # the run as the board lists it, in a folder named by it
    crafted = f"{path.rsplit('--', 1)[0]}--{runs[0]}/results.json"
    files[crafted] = json.dumps(results).encode()
    with pytest.raises(ValueError) as refused:
        compare_chosen(source, runs, token=False, bootstrap=20)
    message = str(refused.value)
    assert message.startswith(f"{source}/{crafted}: ") and len(message.splitlines()) == 1
    assert str(tmp_path) not in message  # the repository's path, not the server's cache
    assert "is not a file name beside it" in message or "samples.file" in message  # vlfair's words, or the schema's
    assert all(p.endswith("results.json") for p in hub.downloaded)


def test_a_samples_file_over_the_space_s_cap_is_refused_before_it_is_fetched(demo, tmp_path, monkeypatch):
    from vlfair.space import compare

    hub, source, runs = _hub_board(demo, tmp_path, monkeypatch)
    monkeypatch.setattr(compare, "MAX_SAMPLES_BYTES", 1000)
    with pytest.raises(ValueError, match=r"samples.parquet: [\d,]+ bytes, more than the 1,000 a comparison here reads"):
        compare_chosen(source, runs, token=False, bootstrap=20)
    assert not any(path.endswith("samples.parquet") for path in hub.downloaded)


# Issue 43, UNCLEAR: the compare tab has a row cap and a time limit, as every other request of a Space
def test_runs_of_more_samples_than_the_tab_takes_are_refused_before_comparing(app, board, demo, monkeypatch):
    from vlfair.space import compare

    runs = [run for _, run in run_choices(board, _traits(app, board))]
    monkeypatch.setattr(compare, "MAX_ROWS", 100)
    with pytest.raises(SpaceInputError, match=r"holds [\d,]+ samples, more than the 100 a comparison here takes; "
                                              "compare the runs with vlfair compare"):
        compare_chosen(str(demo[0]), runs)


def test_a_comparison_past_the_space_s_time_limit_is_stopped_and_said(app, board, demo, monkeypatch):
    import time

    from vlfair.space import compare

    def slow(*args, **kwargs):
        while True:  # Python work the limit interrupts (as the paired bootstrap's loops are)
            time.sleep(0.01)

    runs = [run for _, run in run_choices(board, _traits(app, board))]
    monkeypatch.setenv("VLFAIR_SPACE_TIME_LIMIT_S", "0.5")
    monkeypatch.setattr(compare, "compare_runs", slow)
    started = time.monotonic()
    with pytest.raises(SpaceInputError, match=r"ran past this Space's time limit of 0.5 s and was stopped; compare"):
        compare_chosen(str(demo[0]), runs)
    assert time.monotonic() - started < 10


def test_a_run_s_own_refusal_reaches_a_visitor_without_the_server_s_paths(demo, tmp_path, monkeypatch):
    """Issue 43 (review): a crafted run's refusal names its files, in the Hub's cache on the server."""
    import hashlib
    import json

    hub, source, runs = _hub_board(demo, tmp_path, monkeypatch)
    files = hub.repos[("dataset", "acme/board")]["files"]
    first = next(p for p in files if p.endswith(f"--{runs[0]}/results.json"))
    other = next(p for p in files if p.endswith(f"--{runs[1]}/samples.parquet"))
    files[first.replace("results.json", "samples.parquet")] = files[other]  # another run's samples, its SHA-256 set
    results = json.loads(files[first])
    results["samples"]["sha256"] = hashlib.sha256(files[other]).hexdigest()  # (outside the run's content hash)
    files[first] = json.dumps(results).encode()
    with pytest.raises(SpaceInputError) as refused:
        compare_chosen(source, runs, token=False, bootstrap=20)
    message = str(refused.value)
    assert "was written by another run than the results.json beside it" in message
    assert str(tmp_path) not in message and "hub-cache" not in message
