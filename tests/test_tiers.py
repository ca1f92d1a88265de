"""Tiers on the board (issue 46): models whose bias the runs cannot tell apart share a tier, paired
from their samples where they are here, unpaired from the intervals where not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vlfair.cli import main
from vlfair.compare.tiers import PAIRED, UNPAIRED, add_tiers
from vlfair.report.leaderboard import read_board

PLANTED = "trait_anova"  # the biased world's faces: smart/dumb confidence differs by race within each gender


TWIN = Path(__file__).parent / "data" / "encoders" / "biased-seed-1"  # the biased encoder trained with seed 1


@pytest.fixture(scope="module")
def three(demo, tmp_path_factory) -> list[Path]:
    """The biased encoder's traits run, its twin's (the same world trained again from another seed:
    tests/data/README.md) on the same faces with the same settings, and the control's."""
    import vlfair
    from vlfair.demo import datasets
    from vlfair.demo.entries import TRAITS_SETTINGS
    from vlfair.probes import run_probe

    out, _ = demo
    twin = vlfair.load_encoder(str(TWIN), dtype="float32")
    twin.display_name = "demo-world biased, seed 1"
    folder = tmp_path_factory.mktemp("twin") / "traits"
    run_probe("traits", twin, datasets.fairface(), out_dir=folder, cache_dir=None, settings=TRAITS_SETTINGS)
    return [out / "biased" / "traits", folder, out / "control" / "traits"]


def _tiers(board: pd.DataFrame, metric: str) -> dict[str, dict[str, float]]:
    """subset -> model -> tier, for ``metric``."""
    rows = board[board["metric"] == metric]
    return {subset: dict(zip(group["model"], group["tier"])) for subset, group in rows.groupby("subset")}


def test_two_runs_apart_only_by_noise_share_a_tier_and_the_third_does_not(three, tmp_path):
    """The planted F across races within each gender: the biased encoder and its twin, trained alike from
    another seed, are tied (tier 2, the control being less biased, tier 1); the rows say paired, and each
    lists the other as tied. Across genders within a race nothing was planted: the twins share a tier there
    too."""
    assert main(["leaderboard", *map(str, three), "--out", str(tmp_path / "board.csv"), "--permutations", "2000"]) == 0
    board = pd.read_csv(tmp_path / "board.csv")
    planted = {subset: tiers for subset, tiers in _tiers(board, PLANTED).items() if "gender" in json.loads(subset)}
    assert len(planted) == 2
    for subset, tiers in planted.items():
        assert tiers == {"demo-world control": 1.0, "demo-world biased": 2.0, "demo-world biased, seed 1": 2.0}, subset
    for subset, tiers in _tiers(board, PLANTED).items():
        assert tiers["demo-world biased"] == tiers["demo-world biased, seed 1"], subset
    planted = board[board["metric"] == PLANTED]
    assert set(planted["tier_method"]) == {PAIRED}
    twin = planted[(planted["model"] == "demo-world biased") & planted["subset"].str.contains("gender")]
    assert all("demo-world biased, seed 1" in json.loads(tied) and "demo-world control" not in json.loads(tied)
               for tied in twin["tied_with"])
    assert board.loc[board["neutral"].isna(), "tier"].isna().all()  # a level (a mean confidence) has no tier


def test_without_samples_a_family_is_tiered_from_its_intervals_and_says_so(demo, three):
    """No samples to pair: the family is tiered from its intervals, said. The professions gaps planted by
    gender (doctor, nurse) put the biased encoder below the control; an F, without an interval, has no
    tier unpaired."""
    out, _ = demo
    board = read_board([str(out / encoder / "professions") for encoder in ("biased", "control")])
    said: list[str] = []
    tiered = add_tiers(board, {}, said=said)
    assert said == [f"family {board['family'].iloc[0]}: tiered unpaired (from the intervals): not every run's "
                    "samples are here"]
    gaps = tiered[tiered["metric"] == "group_score_gap"]
    assert set(gaps["tier_method"]) == {UNPAIRED}
    for profession in ("doctor", "nurse"):
        subset = json.dumps({"attribute": "gender", "profession": profession})
        assert _tiers(tiered, "group_score_gap")[subset] == {"demo-world control": 1.0, "demo-world biased": 2.0}
    traits = add_tiers(read_board([str(p) for p in three]), {})
    assert traits.loc[traits["metric"] == PLANTED, "tier"].isna().all()


def test_the_unpaired_test_is_a_normal_approximation_with_holm():
    """Three models of one family: A and B one standard error apart (tied), C eight apart from both
    (told apart, after Holm over the three pairs)."""
    z = 1.959963984540054
    rows = [{"model": m, "run": m * 8, "family": "f", "metric": "gap", "subset": "{}", "value": v, "neutral": 0.0,
             "ci_low": v - z * 0.1, "ci_high": v + z * 0.1} for m, v in (("a", 0.10), ("b", 0.24), ("c", 1.3))]
    tiered = add_tiers(pd.DataFrame(rows), {})
    assert tiered["tier"].tolist() == [1.0, 1.0, 2.0]
    assert [json.loads(t) for t in tiered["tied_with"]] == [["b"], ["a"], []]


def test_the_unpaired_test_reads_each_interval_at_its_own_level(demo):
    """Runs of one family may differ in their intervals' level (an interval setting, not a measuring one): B's
    50 % interval of half-width 0.101 is a standard error of 0.15, and 0.3 from A (standard error 0.1) is then
    not told apart (p = 0.096); read at the board's 95 %, the same interval would tell them apart (p = 0.008).
    The board holds each row's level, its run's."""
    rows = [{"model": m, "run": m * 8, "family": "f", "metric": "gap", "subset": "{}", "value": v, "neutral": 0.0,
             "ci_low": v - half, "ci_high": v + half, "confidence": level}
            for m, v, half, level in (("a", 0.10, 1.959964 * 0.1, 0.95), ("b", 0.40, 0.6744898 * 0.15, 0.5))]
    assert add_tiers(pd.DataFrame(rows), {})["tier"].tolist() == [1.0, 1.0]
    at_the_board_s_level = pd.DataFrame(rows).drop(columns="confidence")
    assert add_tiers(at_the_board_s_level, {})["tier"].tolist() == [1.0, 2.0]
    board = read_board([str(demo[0] / "biased" / "traits")])
    with_interval = board[board["ci_low"].notna()]
    assert len(with_interval) and (with_interval["confidence"] == 0.95).all()
    assert board.loc[board["ci_low"].isna(), "confidence"].isna().all()  # no interval, no level


def test_a_family_of_one_model_has_no_tiers_and_says_so(demo):
    board = read_board([str(demo[0] / "biased" / "traits")])
    said: list[str] = []
    tiered = add_tiers(board, board.attrs["paths"], said=said)
    assert tiered["tier"].isna().all() and said == [f"family {board['family'].iloc[0]}: one model (demo-world "
                                                     "biased), so no tiers"]


def test_a_bad_permutation_count_is_one_line_and_exit_2(demo, tmp_path, capsys):
    assert main(["leaderboard", str(demo[0] / "biased" / "traits"), "--out", str(tmp_path / "b.csv"),
                 "--permutations", "-1"]) == 2
    assert capsys.readouterr().err == ("vlfair leaderboard: --permutations must be a whole number from 0 to 10,000,000 "
                                       "(0: no p-values), got -1\n")
    assert not (tmp_path / "b.csv").exists()


def test_the_demo_s_biased_and_control_encoders_fall_in_different_tiers_on_every_planted_metric(demo, tmp_path):
    """Every planted bias the demo finds as a paired difference (paired.json's planted metrics, all six
    probes): on the board of its two encoders' runs, the control is in tier 1 and the biased encoder in
    tier 2."""
    out, _ = demo
    assert main(["leaderboard", str(out / "biased"), str(out / "control"), "--out", str(tmp_path / "b.csv")]) == 0
    board = pd.read_csv(tmp_path / "b.csv")
    planted = json.loads((out / "paired.json").read_text())["planted"]
    assert len(planted) == 8
    for entry in planted:
        rows = board[(board["probe"] == entry["probe"]) & (board["metric"] == entry["metric"])
                     & (board["subset"] == json.dumps(entry["subset"], sort_keys=True))]
        tiers = dict(zip(rows["model"], rows["tier"]))
        assert tiers == {"demo-world control": 1.0, "demo-world biased": 2.0}, entry


def test_the_leaderboard_space_shows_tiers_and_sorts_by_them(demo, tmp_path, monkeypatch):
    """The leaderboard Space over a folder of runs tiers each family (paired: the samples are there),
    shows the tier beside the rank, sorts a family's metric by tier, and names each model's tier in the
    chart's legend. Reading the board again tests no family again (the same runs: the same tests)."""
    from vlfair.compare import tiers

    from test_spaces import _load

    out, _ = demo
    for encoder in ("biased", "control"):
        shutil.copytree(out / encoder / "professions", tmp_path / "runs" / encoder)
    app = _load("leaderboard")
    tested = []
    paired = tiers._paired
    monkeypatch.setattr(tiers, "_paired", lambda *args: tested.append(args[0]) or paired(*args))
    board = app.load_board(str(tmp_path / "runs"))
    again = app.load_board(str(tmp_path / "runs"))
    assert len(tested) == 1 and again[list(tiers.TIER_COLUMNS)].equals(board[list(tiers.TIER_COLUMNS)])
    gaps = app.filter_board(board, metric="group_score_gap", sort_by="rank", descending=False)
    doctor = gaps[gaps["subset"] == json.dumps({"attribute": "gender", "profession": "doctor"})]
    assert doctor["model"].tolist() == ["demo-world control", "demo-world biased"]
    assert doctor["tier"].tolist() == [1.0, 2.0]
    shown = app.display(doctor)
    assert shown["tier"].tolist() == ["1", "2"] and list(shown.columns[6:9]) == ["rank", "tier", "no bias at"]
    figure = app.metric_chart(doctor, "group_score_gap")
    legend = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert legend == ["no bias (0)", "demo-world control (tier 1)", "demo-world biased (tier 2)"]


def test_the_pairs_behind_the_tiers_are_vlfair_compare_s_verdicts(three):
    """Tiers resample each run once for all its pairs; the pairs they tell apart are exactly those `vlfair
    compare` of the same runs shows one less biased, metric by metric, its p-values adjusted as a board's tiers
    adjust them (Holm over the pairs of one metric and subset: a board ranks one metric at a time; compare's own
    family spans every metric): "differ" (the values differ, neither closer to no bias) ties."""
    from vlfair import stats
    from vlfair.compare import compare_runs
    from vlfair.compare.comparison import verdict
    from vlfair.compare.tiers import _paired

    runs = ["biased", "twin", "control"]
    differs, why = _paired(runs, dict(zip(runs, map(str, three))), 0.95, 300, 500, 0)
    content = compare_runs(three, bootstrap=300, n_permutations=500, correction="none").content
    by_metric: dict = {}
    for entry in content["differences"]:
        by_metric.setdefault((entry["metric"], json.dumps(entry["subset"], sort_keys=True)), []).append(entry)
    expected: dict = {}
    for key, entries in by_metric.items():
        for entry, adjusted in zip(entries, stats.holm([e["p_value"] for e in entries])):
            # the run shown less biased (the test's direction), None where neither is
            expected.setdefault(key, {})[frozenset((runs[entry["a"]], runs[entry["b"]]))] = {
                "a_less_biased": runs[entry["a"]], "b_less_biased": runs[entry["b"]]}.get(
                verdict({**entry, "p_adjusted": adjusted}, 0.05))
    assert why == "" and differs == expected
    assert any(any(pairs.values()) for pairs in expected.values())  # some pairs are told apart


@pytest.mark.parametrize("probe", ["traits", "professions", "public-figures"])
def test_shared_swaps_give_each_pair_compare_s_own_p_values(demo, probe):
    """The tiers' permutation tests draw each block of swaps once for all pairs and multiply it once by
    every run's values; every p-value (and how it was found) is the one paired.compare finds alone."""
    from vlfair import paired
    from vlfair.compare.comparison import prepare_runs
    from vlfair.compare.tiers import _SharedSwaps

    prepared = prepare_runs([demo[0] / encoder / probe for encoder in ("biased", "control")])
    compared = 0
    for k, row_set in enumerate(prepared.row_sets):
        values = [run_values[k] for run_values in prepared.values]
        alone = paired.compare(row_set, values[0], values[1], bootstrap=0, n_permutations=2000)
        shared = _SharedSwaps(row_set, values, 0).tests(0, 1, 2000)
        assert [(d.p_value, d.p_method, d.permutations) for d in alone] == [
            (t.p_value, t.method, t.permutations) for t in shared] or all(np.isnan(d.p_value) for d in alone)
        compared += len(alone)
    assert compared > 20


def test_values_that_differ_with_neither_closer_to_no_bias_share_a_tier():
    """0.8 and 1.25 around a neutral 1, far apart but equally biased: told apart as values, tied as biases
    (the unpaired test is on the distances to the neutral value)."""
    z = 1.959963984540054
    rows = [{"model": m, "run": m * 8, "family": "f", "metric": "ratio", "subset": "{}", "value": v, "neutral": 1.0,
             "ci_low": v - z * 0.02, "ci_high": v + z * 0.02} for m, v in (("a", 0.8), ("b", 1.2), ("c", 1.6))]
    tiered = add_tiers(pd.DataFrame(rows), {})
    assert tiered["tier"].tolist() == [1.0, 1.0, 2.0]


def test_runs_that_cannot_be_compared_here_are_tiered_unpaired_and_said(demo, monkeypatch):
    """A run whose probe is not installed here (compare refuses it with a ProbeError) leaves its family
    tiered from the intervals, said; the board is still made."""
    from vlfair.compare import comparison
    from vlfair.probes import ProbeError

    def refuse(*args, **kwargs):
        raise ProbeError("unknown probe 'plugin-traits'")

    monkeypatch.setattr(comparison, "prepare_runs", refuse)
    out, _ = demo
    board = read_board([str(out / encoder / "professions") for encoder in ("biased", "control")])
    said: list[str] = []
    tiered = add_tiers(board, board.attrs["paths"], said=said)
    family = board["family"].iloc[0]
    assert said == [f"family {family}: tiered unpaired (from the intervals): not compared on its samples (unknown "
                    "probe 'plugin-traits')"]
    assert set(tiered.loc[tiered["tier"].notna(), "tier_method"]) == {UNPAIRED}


def test_f_tests_are_tiered_in_the_board_s_order_of_effect_size():
    """An F of 0.5 and one of 1.0 are both no effect (omega squared 0): with nothing telling them apart they share
    tier 1, led by the smaller F (the tie broken as the board breaks it); a larger effect opens tier 2 where the
    test tells it apart. Rows without an effect each are ordered by their distance to the neutral value."""
    from vlfair.compare.tiers import _tiers as tiers_of

    group = pd.DataFrame({"run": ["a", "b", "c"], "value": [1.0, 0.5, 40.0], "neutral": [0.0, 0.0, 0.0],
                          "effect": [0.0, 0.0, 0.3]})
    # each pair told apart names the run its test shows less biased (None: not told apart)
    differs = {frozenset(("a", "c")): "a", frozenset(("b", "c")): "b", frozenset(("a", "b")): None}
    tiers, tied = tiers_of(group, differs)
    assert tiers == {1: 1, 0: 1, 2: 2} and list(tiers) == [1, 0, 2] and tied[1] == {"a"}
    group["effect"] = [0.05, 0.1, 0.02]  # the effects' order, not F's (rows of unlike designs, as a board reads them)
    tiers, _ = tiers_of(group, {frozenset(("a", "c")): "c", frozenset(("b", "c")): "c", frozenset(("a", "b")): "a"})
    assert list(tiers) == [2, 0, 1] and tiers == {2: 1, 0: 2, 1: 3}
    group["effect"] = [0.2, 0.1, None]  # one row has no effect: all by their distance
    tiers, _ = tiers_of(group, {frozenset(("a", "b")): "b", frozenset(("a", "c")): "a", frozenset(("b", "c")): "b"})
    assert list(tiers) == [1, 0, 2] and tiers == {1: 1, 0: 2, 2: 3}
