"""Issue 65, the fifth adversarial round: each case's guard, tried as a hostile user would (the case's number in
each test's docstring). Cases tested where their code lives: LOSS 4 in tests/test_eval_results.py."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from vlfair.cli import main


@pytest.fixture(scope="module")
def run_dir(clip_dir, tmp_path_factory) -> Path:
    """A professions run of a tiny CLIP, with a paired test so it has samples a board tiers."""
    import vlfair
    from vlfair.probes import run_probe

    out = tmp_path_factory.mktemp("round5") / "run"
    run_probe("professions", vlfair.load_encoder(str(clip_dir), dtype="float32"), "synthetic:professions", out,
              cache_dir=None, settings={"bootstrap": 50, "n_permutations": 50})
    return out


def _digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


@pytest.mark.parametrize("where", ["samples.parquet", "results.json", "board.csv", "tables/board.parquet"])
def test_a_board_written_into_a_run_is_refused_and_the_run_kept(run_dir, capsys, where):
    """LOSS 5: `leaderboard RUN --out RUN/samples.parquet` replaced the run's samples with exit 0 (the run could never
    be rescored, compared or pushed again); any path inside a run, a file of it or a new one, is refused before the
    board is read, exit 2, the run as it was."""
    before = _digests(run_dir)
    code, err = _cli(capsys, "leaderboard", str(run_dir), "--out", str(run_dir / where))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"vlfair leaderboard: --out {run_dir / where} lies inside the vlfair output {run_dir}")
    assert _digests(run_dir) == before


def test_a_board_written_inside_a_folder_of_runs_it_reads_is_refused(run_dir, tmp_path, capsys):
    """LOSS 5: a source being read holds no output (a later board would read the table among its runs)."""
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(run_dir, runs / "a")
    code, err = _cli(capsys, "leaderboard", str(runs), "--out", str(runs / "board.csv"))
    assert code == 2 and err.startswith(f"vlfair leaderboard: --out {runs / 'board.csv'} lies inside {runs}, which "
                                        "the command reads")
    assert not (runs / "board.csv").exists()
    code, _ = _cli(capsys, "leaderboard", str(runs), "--out", str(tmp_path / "board.csv"))
    assert code == 0 and (tmp_path / "board.csv").is_file()


@pytest.mark.parametrize("out, message", [("board.txt", "--out must be a file ending in .parquet or .csv"),
                                          ("a-folder.csv", "--out must be a file ending in .parquet or .csv")])
def test_a_board_output_vlfair_cannot_write_is_said_before_the_board_is_read(run_dir, tmp_path, capsys, out,
                                                                             message):
    (tmp_path / "a-folder.csv").mkdir()
    code, err = _cli(capsys, "leaderboard", str(run_dir), "--out", str(tmp_path / out))
    assert code == 2 and err.startswith(f"vlfair leaderboard: {message}")


@pytest.mark.parametrize("inside", ["", "cards"])
def test_card_results_into_a_run_is_refused(run_dir, capsys, inside):
    """UNCLEAR 33: `card-results --out RUN` wrote a model folder and every_eval_ever/ into the run, which then no
    command could replace (files not in its manifest); refused, exit 2, the run as it was."""
    before = _digests(run_dir)
    out = run_dir / inside if inside else run_dir
    code, err = _cli(capsys, "card-results", str(run_dir), "--out", str(out), "--benchmark-repo", "acme/bias")
    where = "lies inside" if inside else "is"
    assert code == 2 and err.startswith(f"vlfair card-results: --out {out} {where} the vlfair output {run_dir}")
    assert _digests(run_dir) == before


@pytest.mark.parametrize("where", ["model.name", "dataset.name", "metrics[0].subset.profession", "settings (a key)"])
def test_a_results_file_with_a_huge_text_is_skipped_by_the_board_naming_it(run_dir, tmp_path, capsys, where):
    """SECURITY 2: a results.json with a 5 MB model.name (or dataset name, subset value, key) made the board repeat
    it in every row (a 690 MB table payload); the file is skipped, named with the field and its length, and the
    board is built from the other runs."""
    import json
    import shutil

    import pandas as pd

    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    results = json.loads((bad / "results.json").read_text())
    huge = "m" * 5_000_000
    if where == "model.name":
        results["model"]["name"] = huge
    elif where == "dataset.name":
        results["dataset"]["name"] = huge
    elif where.startswith("metrics"):
        results["metrics"][0]["subset"]["profession"] = huge
    else:
        results["settings"][huge] = 1
    (bad / "results.json").write_text(json.dumps(results))
    code, err = _cli(capsys, "leaderboard", str(run_dir), str(bad), "--out", str(tmp_path / "board.csv"))
    assert code == 0
    assert f"skipped {bad / 'results.json'}: {where}: a text of 5,000,000 characters, longer than any results.json " \
           "holds (4,096 at most)" in err
    board = pd.read_csv(tmp_path / "board.csv")
    assert len(board) > 0 and board.map(lambda cell: len(str(cell))).to_numpy().max() < 4096


@pytest.mark.parametrize("name, field, number, range_", [
    ("group_score_gap", "value", -3.0, "[0, inf]"), ("mean_clipscore", "value", 250.0, "[0, 100]"),
    ("group_score_gap", "ci", -0.5, "[0, inf]"), ("mean_clipscore", "ci", 100.5, "[0, 100]")])
def test_a_value_outside_its_measures_range_is_a_bad_file(run_dir, tmp_path, capsys, name, field, number, range_):
    """SILENT 8: an edited value outside its measure's range (a gap of -3, a CLIPScore of 250, an interval past a
    bound) was ranked and written to cards: every reader refuses the file (a board skips it, naming the metric)."""
    import json
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    results = json.loads((bad / "results.json").read_text())
    position, metric = next((i, m) for i, m in enumerate(results["metrics"]) if m["name"] == name)
    if field == "value":
        metric["value"] = number
    else:
        metric["ci"] = [number, max(metric["value"], 0.0) + 1] if number < 0 else [0.0, number]
    (bad / "results.json").write_text(json.dumps(results))
    subset = ", ".join(f"{k}={v}" for k, v in metric["subset"].items())
    said = f"metrics[{position}] ({name}, {subset}): its {field} {number:g} lies outside the measure's range {range_}"
    code, err = _cli(capsys, "leaderboard", str(run_dir), str(bad), "--out", str(tmp_path / "board.csv"))
    assert code == 0 and f"skipped {bad / 'results.json'}: {said}" in err
    code, err = _cli(capsys, "card-results", str(bad))
    assert code == 2 and said in err


def test_every_interval_a_run_writes_lies_in_its_measures_range():
    """SILENT 8's root: a top k statistic's interval (its resamples' percentiles moved onto its value) went below
    MaxSkew's 0 in the demo's control retrieval; a declared metric's interval is cut to its measure's range (the
    demo's recorded numbers hold the cut one: tests/data/numbers/demo.json)."""
    from vlfair.measures import null
    from vlfair.measures.catalog import facts_of
    from vlfair.outputs import Metric

    metric = Metric("max_skew", {}, 0.2, [-0.07, 0.55])
    null.cut_to_range(metric, facts_of("max_skew"))
    assert metric.ci == [0.0, 0.55]
    influence = Metric("word_influence", {}, 0.9, [0.6, 1.2])  # a Hoeffding bound either side of the value
    null.cut_to_range(influence, facts_of("word_influence"))
    assert influence.ci == [0.6, 1.0]
    unbounded = Metric("skew", {}, -0.3, [-2.0, 1.5])  # a skew has no bound: left as it is
    null.cut_to_range(unbounded, facts_of("skew"))
    assert unbounded.ci == [-2.0, 1.5]
