"""Issue 65, the fifth adversarial round, the board's cases: SECURITY 3 (a board's tiers capped, the Space's load
within its time limit), SILENT 6 and 7 (a run's reported values checked against its samples wherever they meet;
tiers by the paired test's direction), SILENT 9 (rank and tier count runs; runs of one model named by what
differs), SILENT 13 (the Space reads a probe's own facts) and UNCLEAR 22 (a paired board's progress bar). The
case's number is in each test's docstring."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from vlfair.cli import main


def _run(clip: Path, out: Path) -> Path:
    import vlfair
    from vlfair.probes import run_probe

    run_probe("professions", vlfair.load_encoder(str(clip), dtype="float32"), "synthetic:professions", out,
              cache_dir=None, settings={"bootstrap": 50, "n_permutations": 50})
    return out


@pytest.fixture(scope="module")
def runs(clip_dir, tmp_path_factory) -> dict[str, Path]:
    """Two professions runs of one family: the session's tiny CLIP and another one (another seed)."""
    from vlfair.tiny import tiny_clip

    base = tmp_path_factory.mktemp("round5-board")
    other = tiny_clip(base / "other-clip", seed=1)
    return {"a": _run(clip_dir, base / "a"), "b": _run(other, base / "b")}


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


def _gap(results: dict) -> tuple[int, dict]:
    return next((i, m) for i, m in enumerate(results["metrics"]) if m["name"] == "group_score_gap")


def _edited_value(run: Path, tmp_path: Path) -> tuple[Path, str]:
    """A copy of ``run`` whose first gap is set to 0.001 in results.json beside its untouched samples."""
    bad = tmp_path / "edited"
    shutil.copytree(run, bad)
    results = json.loads((bad / "results.json").read_text())
    position, metric = _gap(results)
    was = metric["value"]
    metric["value"] = 0.001
    (bad / "results.json").write_text(json.dumps(results))
    subset = ", ".join(f"{k}={v}" for k, v in metric["subset"].items())
    return bad, (f"metrics[{position}] (group_score_gap, {subset}) reports 0.001, its samples give {was:.6g} "
                 "(samples.parquet): results.json or the samples were edited since the run")


def _edited_samples(run: Path, tmp_path: Path) -> Path:
    """A copy of ``run`` whose samples' scores were changed (their header kept) and whose results.json names the
    new file's hashes, its numbers untouched: the samples' hashes alone say nothing is wrong."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vlfair.samples import content_sha256, sha256_of

    bad = tmp_path / "samples-edited"
    shutil.copytree(run, bad)
    table = pq.read_table(bad / "samples.parquet")
    scores = table.column("clipscore").to_numpy()
    changed = table.set_column(table.schema.get_field_index("clipscore"), "clipscore",
                               pa.array(scores * (1 + (table.column("gender").to_numpy() == "Female"))))
    pq.write_table(changed.replace_schema_metadata(table.schema.metadata), bad / "samples.parquet")
    results = json.loads((bad / "results.json").read_text())
    results["samples"].update(sha256=sha256_of(bad / "samples.parquet"),
                              content_sha256=content_sha256(pq.read_table(bad / "samples.parquet")))
    (bad / "results.json").write_text(json.dumps(results))
    return bad


def test_a_board_skips_a_run_whose_values_its_samples_do_not_give(runs, tmp_path, capsys):
    """SILENT 6: a gap edited to 0.001 beside untouched samples ranked 1; the board skips the run, naming the file
    and the metric, and ranks the others."""
    bad, said = _edited_value(runs["a"], tmp_path)
    code, err = _cli(capsys, "leaderboard", str(bad), str(runs["b"]), "--out", str(tmp_path / "board.csv"))
    assert code == 0 and f"skipped {bad / 'results.json'}: {said}" in err
    board = pd.read_csv(tmp_path / "board.csv")
    assert board["value"].ne(0.001).all() and board["model"].nunique() == 1


@pytest.mark.parametrize("command", ["compare", "rescore", "push-results"])
def test_compare_rescore_and_push_refuse_a_run_whose_values_its_samples_do_not_give(runs, tmp_path, capsys,
                                                                                    command):
    """SILENT 6: compare and rescore silently used the samples' numbers and push-results checked only the samples'
    hashes; each refuses the run, naming the file and the metric, exit 2 (push-results before the Hub is asked)."""
    bad, said = _edited_value(runs["a"], tmp_path)
    argv = {"compare": ["compare", str(bad), str(runs["b"]), "--out", str(tmp_path / "compared")],
            "rescore": ["rescore", str(bad), "--out", str(tmp_path / "rescored")],
            "push-results": ["push-results", str(bad), "--repo", "acme/bias"]}[command]
    code, err = _cli(capsys, *argv)
    assert code == 2 and err == f"vlfair {command}: {bad / 'results.json'}: {said}\n"
    assert not (tmp_path / "compared").exists() and not (tmp_path / "rescored").exists()


def test_an_untouched_run_is_compared_rescored_and_boarded(runs, tmp_path, capsys):
    """SILENT 6: the check passes every value a run computed from its samples (float noise is not an edit)."""
    from vlfair.compare.runs import load_run, misreported

    for run in runs.values():
        assert misreported(load_run(run)) is None
    code, err = _cli(capsys, "rescore", str(runs["a"]), "--out", str(tmp_path / "rescored"))
    assert code == 0
    code, err = _cli(capsys, "leaderboard", str(runs["a"]), str(runs["b"]), str(tmp_path / "rescored"),
                     "--out", str(tmp_path / "board.csv"), "--bootstrap", "50", "--permutations", "50")
    assert code == 0 and "reports" not in err


def test_edited_samples_under_untouched_values_are_refused_by_every_reader(runs, tmp_path, capsys):
    """SILENT 7: after a samples edit (their hashes updated in results.json) a board tiered from the samples and
    ranked from results.json, and compare disagreed with the board; the samples no longer give the reported
    values, so the board skips the run and compare refuses it: one source for values, ranks and tiers."""
    bad = _edited_samples(runs["a"], tmp_path)
    code, err = _cli(capsys, "leaderboard", str(bad), str(runs["b"]), "--out", str(tmp_path / "board.csv"),
                     "--bootstrap", "50", "--permutations", "50")
    assert code == 0 and f"skipped {bad / 'results.json'}: metrics[" in err and "its samples give" in err
    code, err = _cli(capsys, "compare", str(bad), str(runs["b"]), "--out", str(tmp_path / "compared"))
    assert code == 2 and "its samples give" in err


def test_a_tier_follows_the_paired_test_s_direction():
    """SILENT 7: a model the paired test shows less biased than the tier's leader (the order, from the values,
    disagreeing with the samples) was put in a tier below it; it shares the leader's tier."""
    from vlfair.compare.tiers import _tiers

    group = pd.DataFrame({"run": ["r1", "r2", "r3"], "value": [0.1, 0.2, 0.9], "neutral": 0.0})
    differs = {frozenset(("r1", "r2")): "r2", frozenset(("r1", "r3")): "r1", frozenset(("r2", "r3")): "r2"}
    tiers, tied = _tiers(group, differs)
    assert tiers == {0: 1, 1: 1, 2: 2} and tied[1] == set()


def _family_rows(dtypes: list[str], model: str = "m") -> pd.DataFrame:
    from vlfair.report.leaderboard import COLUMNS

    rows = [{**dict.fromkeys(COLUMNS), "model": model, "revision": "main", "dtype": dtype, "kind": "contrastive",
             "probe": "professions", "metric": "group_score_gap", "subset": "{}", "value": 1.0 + i,
             "ci_low": 0.0, "ci_high": 3.0 + i, "confidence": 0.95, "neutral": 0.0, "family": "f" * 16,
             "run": f"{i:064x}"} for i, dtype in enumerate(dtypes)]
    return pd.DataFrame(rows)


def test_two_runs_of_one_model_are_ranked_and_tiered_and_named_by_what_differs():
    """SILENT 9: two runs of one model in a family got no rank (it counted models) but a tier (it counted runs),
    labelled by a hash; both count runs, and the runs are named by what differs ("m (float32)")."""
    from vlfair.compare.tiers import add_tiers
    from vlfair.report.leaderboard import rank, run_labels

    frame = _family_rows(["float32", "float16"])
    assert rank(frame).tolist() == [1.0, 2.0]
    assert run_labels(frame) == {frame.at[0, "run"]: "m (float32)", frame.at[1, "run"]: "m (float16)"}
    tiered = add_tiers(frame, {})
    assert tiered["tier"].notna().all() and json.loads(tiered.at[0, "tied_with"]) == ["m (float16)"]
    alike = _family_rows(["float32", "float32"])  # nothing differs but the samples: the hash's start
    assert run_labels(alike)[alike.at[1, "run"]] == f"m ({alike.at[1, 'run'][:8]})"


def test_a_metric_one_run_has_a_value_for_is_neither_ranked_nor_tiered():
    """SILENT 9: rank and tier count the same things: a group where one run has a value has neither."""
    from vlfair.compare.tiers import add_tiers
    from vlfair.report.leaderboard import rank

    frame = _family_rows(["float32", "float16"])
    frame.loc[1, "value"] = math.nan  # its interval kept: nothing else leaves the group out
    assert rank(frame).isna().all() and add_tiers(frame, {})["tier"].isna().all()


def test_a_family_of_more_runs_than_a_board_tiers_is_named_and_not_tiered():
    """SECURITY 3: unpaired tiers grew with the square of the runs (300 runs: 394 s, 2 GB); a family of more runs
    than the cap is not tiered, and said."""
    from vlfair.compare.tiers import MAX_RUNS, add_tiers

    frame = _family_rows([f"float{i}" for i in range(MAX_RUNS + 1)])
    said: list[str] = []
    tiered = add_tiers(frame, {}, said=said)
    assert tiered["tier"].isna().all()
    assert said == [f"family {'f' * 16}: {MAX_RUNS + 1} runs, more than the {MAX_RUNS} a board tiers "
                    f"({MAX_RUNS * (MAX_RUNS - 1) // 2:,} pairs; these would be {(MAX_RUNS + 1) * MAX_RUNS // 2:,}), "
                    "so no tiers: compare the runs to tell apart with vlfair compare"]
    assert add_tiers(frame, {}, max_runs=MAX_RUNS + 1)["tier"].notna().all()


def _space():
    spec = importlib.util.spec_from_file_location("space_leaderboard_board", Path(__file__).resolve().parents[1] /
                                                  "spaces" / "leaderboard" / "app.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_space_stops_a_board_load_at_its_time_limit(runs, monkeypatch):
    """SECURITY 3: a board load in the Space had no time limit; past VLFAIR_SPACE_TIME_LIMIT_S it stops and says
    so (the Space starts with an empty board and the reason)."""
    space = _space()

    def slow(*args, **kwargs):
        while True:
            time.sleep(0.01)

    monkeypatch.setattr(space, "read_checked_board", slow)
    monkeypatch.setenv("VLFAIR_SPACE_TIME_LIMIT_S", "0.3")
    board, problem = space.read_source(str(runs["a"].parent))
    assert board.empty and "ran past this Space's time limit of 0.3 s" in problem


def test_the_space_reads_a_probe_s_own_facts_and_skips_an_edited_run(runs, tmp_path, monkeypatch):
    """SILENT 13: the Space read a board without the installed probes' own facts (the CLI's: a plugin's neutral
    values), so a run that recorded none of its metric's facts got the catalog's; SILENT 6: it skips an edited run."""
    from vlfair.facts import Facts
    from vlfair.probes import probe_class

    folder = tmp_path / "board"
    older = folder / "older"
    shutil.copytree(runs["b"], older)
    results = json.loads((older / "results.json").read_text())
    results.get("measures", {}).pop("group_score_gap", None)  # as a run written before runs carried their facts
    (older / "results.json").write_text(json.dumps(results))
    _edited_value(runs["a"], folder)
    probe = probe_class("professions")
    monkeypatch.setattr(probe, "facts", {**probe.facts, "group_score_gap": Facts(0.5, 0.0, None)})
    board = _space().load_board(str(folder))
    gaps = board[board["metric"] == "group_score_gap"]
    assert len(gaps) and gaps["neutral"].eq(0.5).all() and board["model"].nunique() == 1
    assert any("edited" in line and "reports 0.001" in line for line in board.attrs["skipped"])


def test_a_paired_board_shows_its_progress(runs, tmp_path, capsys):
    """UNCLEAR 22: a paired board of many runs ran for minutes with no progress bar; a bar counts its pairs and
    says how to skip them."""
    code, err = _cli(capsys, "leaderboard", str(runs["a"]), str(runs["b"]), "--out", str(tmp_path / "board.csv"),
                     "--bootstrap", "50", "--permutations", "50")
    assert code == 0 and "(2 runs, 1 pairs; --no-tiers skips them)" in err and "pair/s" in err


def test_the_space_names_a_family_it_does_not_tier(runs, tmp_path, monkeypatch):
    """SECURITY 3: a family of more runs than a board tiers is named on the Space's page (under "Tiers")."""
    import functools

    from vlfair.compare import tiers
    from vlfair.report.markup import markdown_text

    folder = tmp_path / "board"
    for name, run in runs.items():
        shutil.copytree(run, folder / name)
    space = _space()
    monkeypatch.setattr(space, "add_tiers", functools.partial(tiers.add_tiers, max_runs=1))
    board = space.load_board(str(folder))
    family = board["family"].iloc[0]
    assert board["tier"].isna().all()
    assert markdown_text(f"family {family}: 2 runs, more than the 1 a board tiers") in space.summary(board, "x", None)


def test_card_results_refuses_a_run_whose_values_its_samples_do_not_give(runs, tmp_path, capsys):
    """SILENT 6: card-results put a run's edited values onto model cards (only its instance records were left out);
    it refuses the run as push-results does, naming the file and the metric, exit 2, before any file is written. A
    results.json read without its samples has nothing to check against and is still carded."""
    bad, said = _edited_value(runs["a"], tmp_path)
    out = tmp_path / "card"
    code, err = _cli(capsys, "card-results", str(bad), "--out", str(out), "--benchmark-repo", "acme/bias")
    assert code == 2 and err == f"vlfair card-results: {bad / 'results.json'}: {said}\n"
    assert not out.exists()
    alone = tmp_path / "alone" / "results.json"
    alone.parent.mkdir()
    shutil.copy(bad / "results.json", alone)
    code, err = _cli(capsys, "card-results", str(alone))
    assert code == 0, err
