"""The benchmarks run and print their contract lines (no timing is asserted here)."""

from __future__ import annotations

import itertools
import math
import re
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def run_benchmark(monkeypatch, capsys):
    """``python benchmarks/NAME ARGS...`` as a user runs it (its ``__main__`` block, its exit status), in
    this process: a fresh interpreter would spend seconds importing torch and transformers again. (Not named
    ``benchmark``: where pytest-benchmark is installed, as on the GPU machines, its plugin takes a fixture of that
    name for its own and stops the whole run.)"""

    def run(name: str, *args: str) -> SimpleNamespace:
        monkeypatch.setattr(sys, "argv", [str(BENCHMARKS / name), *args])
        capsys.readouterr()
        try:
            runpy.run_path(str(BENCHMARKS / name), run_name="__main__")
        except SystemExit as exit:
            assert exit.code in (0, None), f"{name} exited with {exit.code}"
        return SimpleNamespace(stdout=capsys.readouterr().out)

    return run


def test_benchmark_prints_its_ratios(run_benchmark):
    result = run_benchmark("embed_throughput.py", "--images", "12", "--naive-images", "3", "--batch-size", "4",
                           "--model", "tiny", "--repeats", "2")
    last = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"ratio_vs_forward=[\d.]+ ratio_vs_naive=[\d.]+ cache_speedup=\d+ ratio_vs_ceiling=[\d.]+",
                        last), last
    for label in ("(a) vlfair end to end", "(b) raw model forward", "(c) naive per-image", "(d) cached re-run",
                  "(e) decode ceiling", "peak RSS", "vlfair's tiny CLIP"):
        assert label in result.stdout
    assert result.stdout.count("best of 2)") == 2  # (a) and (b), each the best of --repeats rounds


def test_calibration_benchmark_prints_each_rule_s_false_alarm_rate(run_benchmark):
    """benchmarks/calibration.py --quick: every verdict rule's share of null worlds called biased (judged as a run
    judges them), the rules they replaced, the family raw, after Holm and after BH, each rule's power on a planted
    world, and the contract line. Holm can only call fewer worlds than the raw family, and BH no fewer than Holm;
    a bounded statistic's old interval rule calls more null worlds than its test; the rates are a quick run's (20
    worlds), so none is asserted but by its bounds."""
    result = run_benchmark("calibration.py", "--quick")
    last = result.stdout.strip().splitlines()[-1]
    names = ("gap", "ratio", "anova", "rate_gap", "cross_lingual", "max_skew", "ndkl", "old_gap_interval",
             "old_max_skew_interval", "old_ndkl_interval", "family_raw", "family_holm", "family_bh",
             *(f"power_{name}" for name in ("gap", "ratio", "anova", "rate_gap", "cross_lingual", "max_skew", "ndkl")))
    pattern = (" ".join(f"{name}=[01]\\.\\d{{3}}" for name in names)
               + r" max_skew_attainable=0\.\d{3} ndkl_attainable=0\.\d{3} rate_gap_attainable=0\.\d{3} worlds=20"
               + r" seconds=[\d.]+")
    assert re.fullmatch(pattern, last), last
    rates = {key: float(value) for key, value in (item.split("=") for item in last.split())}
    # MaxSkew@8 of 4 groups x 10 items grows with the top 8's largest group count: the exact (hypergeometric) tail
    # of 5 or more is above alpha, so the attainable size is that of 6 or more, beside the benchmark's brute force

    def tail(at_least: int) -> float:
        counts = [c for c in itertools.product(range(9), repeat=3) if sum(c) <= 8]
        return sum(math.prod(math.comb(10, n) for n in (*c, 8 - sum(c))) for c in counts
                   if max(*c, 8 - sum(c)) >= at_least) / math.comb(40, 8)

    assert tail(5) > 0.05 and rates["max_skew_attainable"] == pytest.approx(tail(6), abs=0.002)
    assert re.search(r"max_skew .* 0\.00\d-0\.05 \(discrete: attainable size 0\.00\d\)", result.stdout)
    # the rate gap of 4 groups x 20 answers (each 1 with probability 1/2): every arrangement of the groups' counts
    # of ones enumerated, weighted by its hypergeometric count, its exact test's attainable size at each total m
    counts = np.asarray(list(itertools.product(range(21), repeat=4)))
    weights = np.asarray([float(math.prod(math.comb(20, c) for c in row)) for row in counts])  # past int64
    totals, ranges = counts.sum(axis=1), np.ptp(counts, axis=1)
    attained = 0.0
    for m in range(81):
        at_m = totals == m
        tails = [weights[at_m & (ranges >= r)].sum() / math.comb(80, m) for r in np.unique(ranges[at_m])]
        attained += math.comb(80, m) / 2**80 * max([t for t in tails if t <= 0.05], default=0.0)
    assert rates["rate_gap_attainable"] == pytest.approx(attained, abs=0.0006)  # printed to 3 decimals
    assert f"{0.6 * attained:.3f}-0.05 (discrete: attainable size {attained:.3f})" in result.stdout
    assert rates["family_holm"] <= rates["family_bh"] <= rates["family_raw"]
    assert rates["old_gap_interval"] > rates["gap"] and rates["power_gap"] > rates["gap"]
    assert all(f"{name} " in result.stdout for name in names) and "95 % interval" in result.stdout


def test_verdicts_cost_benchmark_prints_its_contract_line(run_benchmark):
    """benchmarks/verdicts_cost.py --quick: the traits study's analysis with and without verdicts, a board with and
    without the rescore rule, each timed, and the contract line."""
    result = run_benchmark("verdicts_cost.py", "--quick")
    last = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"analysis_without=[\d.]+ analysis_with=[\d.]+ analysis_ratio=[\d.]+ board_without=[\d.]+ "
                        r"board_with=[\d.]+ board_ratio=[\d.]+ rows=1400", last), last
    assert "138 metrics" in result.stdout and "read_board over 3 runs" in result.stdout


def test_stats_scaling_benchmark_prints_its_ratios(run_benchmark):
    """benchmarks/stats_scaling.py --quick: every method timed on 1e3 rows (Monte Carlo p) and 2e4
    rows (the normal limit), fairlearn's MetricFrame bootstrap included, and its contract line."""
    result = run_benchmark("stats_scaling.py", "--quick")
    lines = result.stdout.strip().splitlines()
    assert re.fullmatch(r"speedup_vs_fairlearn=[\d.]+ speedup_vs_scipy=[\d.]+ speedup_vs_naive=[\d.]+ "
                        r"seconds_1e6=[\d.]+", lines[-1]), lines[-1]
    rows = {line.split()[0]: line.split() for line in lines if line.strip().startswith(("1e+03", "2e+04"))}
    assert rows["1e+03"][4] in ("exact", "sequential_monte_carlo", "monte_carlo") and rows["2e+04"][4] == "normal_limit"
    assert rows["1e+03"][5] != "not" and rows["2e+04"][5] == "not"  # fairlearn timed at 1e3 only in a quick run


def test_compare_benchmark_prints_its_ratios(run_benchmark):
    """benchmarks/compare_speed.py --quick: the traits probe on a small world run twice (the re-run
    from cached embeddings), rescored and compared, and its contract line."""
    result = run_benchmark("compare_speed.py", "--quick")
    lines = result.stdout.strip().splitlines()
    assert re.fullmatch(r"compare_seconds=[\d.]+ rescore_seconds=[\d.]+ compare_vs_rerun=[\d.]+ "
                        r"rescore_vs_rerun=[\d.]+ samples_bytes=\d+", lines[-1]), lines[-1]
    for label in ("(a) re-run from cached embeddings", "(b) rescore", "(c) compare: ", "46 differences on 280"):
        assert label in result.stdout


def test_ranking_skew_benchmark_prints_its_ratios(run_benchmark):
    """benchmarks/ranking_skew_speed.py --quick: ranking_skew's bootstrap for three attributes against
    re-ranking every resample from scratch, and its contract line."""
    result = run_benchmark("ranking_skew_speed.py", "--quick")
    lines = result.stdout.strip().splitlines()
    assert re.fullmatch(r"ratio_vs_full_rerank=[\d.]+ topk_vs_sort=[\d.]+ seconds_gender=[\d.]+ seconds_race=[\d.]+ "
                        r"seconds_age=[\d.]+ seconds_probe=[\d.]+", lines[-1]), lines[-1]
    assert [line.split()[0] for line in lines[1:4]] == ["gender", "race", "age"]


@pytest.mark.parametrize("family", ["llava", "qwen2_vl"])
def test_lvlm_prefix_benchmark_prints_its_ratio(run_benchmark, family):
    """benchmarks/lvlm_prefix_speed.py --quick: answers scored through the prompt's cache against one
    full forward per answer and against the dataset path (images batched), and its contract line (the
    speedups themselves are measured, never asserted)."""
    result = run_benchmark("lvlm_prefix_speed.py", "--quick", "--family", family, "--batch-size", "3")
    assert result.stdout.startswith({"llava": "tiny LLaVA", "qwen2_vl": "tiny Qwen2-VL"}[family]), result.stdout
    assert "dataset, batch 3" in result.stdout
    last = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"speedup_vs_full_forward=[\d.]+ shared_images_per_second=[\d.]+ "
                        r"max_abs_difference=[\d.e+-]+ dataset_vs_loop=[\d.]+ dataset_max_abs_difference=[\d.e+-]+ "
                        r"dataset_vs_ceiling=[\d.]+ questions_together_vs_apart=[\d.]+ "
                        r"questions_max_abs_difference=[\d.e+-]+ processor_img_s=[\d.]+ ceiling_img_s=[\d.]+ "
                        r"dataset_img_s=[\d.]+", last), last
    assert "prefix ceiling" in result.stdout and "cpu float32" in result.stdout
    numbers = dict(field.split("=") for field in last.split())
    # every path gives the same log-likelihoods (the batched one pads 4 images into batches of 3 and 1)
    assert float(numbers["max_abs_difference"]) < 1e-4 and float(numbers["dataset_max_abs_difference"]) < 1e-4
    assert float(numbers["questions_max_abs_difference"]) < 1e-4  # six questions together: each one's numbers


def test_input_pipeline_benchmark_prints_its_ratios(run_benchmark):
    """benchmarks/input_pipeline.py --quick: the pipeline without its device step on 1 and 2 decode workers,
    the decode ceiling of a process pool, the main process's time per image, and its contract line."""
    result = run_benchmark("input_pipeline.py", "--quick", "--images", "24", "--batch-size", "8")
    last = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"workers_speedup=[\d.]+ vs_decode_ceiling=[\d.]+ main_ms_per_image=[\d.]+ "
                        r"main_cap_img_s=\d+ pipeline_img_s=\d+", last), last
    for label in ("(a) pipeline, 1 worker", "pipeline, 2 workers", "(b) decode ceiling, 2 processes",
                  "(c) main process, model on", "-> (224, 224)"):
        assert label in result.stdout


def test_pipeline_breakdown_accounts_for_every_image_in_the_workers(run_benchmark):
    """benchmarks/pipeline_breakdown.py --quick: for each configuration, every image passed through a worker's
    clock (decode and write times per image, the workers' busy share), and its contract line names the best."""
    result = run_benchmark("pipeline_breakdown.py", "--quick", "--workers", "2")
    rows = [line.split() for line in result.stdout.splitlines() if re.match(r"\s+2\s+64\s+2\s+(True|False)", line)]
    assert [row[3] for row in rows] == ["False", "True"], result.stdout  # the buffers touched beforehand, and not
    for row in rows:
        img_s, busy, decode_ms = float(row[4]), float(row[8]), float(row[9])
        assert img_s > 0 and 0 < busy <= 1.0 and decode_ms > 0
    assert re.fullmatch(r"breakdown: best=workers2_piece64_ahead2_touch[01] img_s=\d+ vs_ceiling=[\d.]+",
                        result.stdout.strip().splitlines()[-1])


def test_jpeg_draft_benchmark_prints_its_ratios(run_benchmark):
    """benchmarks/jpeg_draft.py --quick: large JPEGs decoded whole and reduced, timed, and their embeddings'
    distance set beside the one between PIL's resize and torch's, and its contract line."""
    result = run_benchmark("jpeg_draft.py", "--quick")
    last = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"decode_speedup=[\d.]+ reduced_median=[\d.e+-]+ reduced_max=[\d.e+-]+ "
                        r"resizer_median=[\d.e+-]+ resizer_max=[\d.e+-]+", last), last
    assert "(decoded at 600x450)" in result.stdout  # 1200x900 for a 224 input: halved, twice the input kept
    numbers = {key: float(value) for key, value in (field.split("=") for field in last.split())}
    assert 0 < numbers["reduced_max"] < 1e-3 and numbers["resizer_max"] < 1e-4  # other pixels, nearly one picture


def test_gpu_check_prints_a_contract_line_per_step_and_refuses_a_machine_without_cuda(capsys, monkeypatch):
    """benchmarks/gpu_check.py: without CUDA it stops in one line (exit 2) unless --cpu; with --cpu --quick a
    step runs and prints its contract line (the tests step here: the benchmarks' steps read their contract
    lines, below); a step that fails is said and the exit is 1."""
    import torch

    check = runpy.run_path(str(BENCHMARKS / "gpu_check.py"), run_name="gpu_check")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert check["main"]([]) == 2
    assert capsys.readouterr().err.count("no CUDA device here") == 1
    with pytest.raises(SystemExit) as exit:
        check["main"](["--steps", "embed,warp"])
    assert exit.value.code == 2 and "--steps: warp" in capsys.readouterr().err
    # one quick test by its node id: the step runs pytest on what it is given; what it runs is not under test here
    code = check["main"](["--cpu", "--quick", "--steps", "tests", "--tests",
                          "tests/test_world.py::test_a_look_says_what_its_caption_says_and_nothing_of_the_group"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"^gpu_check tests: passed=\d+ failed=0 errors=0 files=1$", out, re.M), out
    assert check["main"](["--cpu", "--quick", "--steps", "tests", "--tests", "tests/no_such_file.py"]) == 1
    assert "gpu_check tests: failed (exit 4)" in capsys.readouterr().out


def test_gpu_check_names_the_fastest_worker_count_and_reads_each_benchmark_s_contract(capsys):
    """The embed, pipeline and generative steps read what embed_throughput.py, input_pipeline.py and
    lvlm_prefix_speed.py print last (their contract lines, as the tests above check them); the fastest worker
    count by images/s."""
    check = runpy.run_path(str(BENCHMARKS / "gpu_check.py"), run_name="gpu_check")
    rates = {"4": 900, "8": 1500, "15": 1200}
    logs = []

    def fake_run(command, log=""):
        logs.append(log)
        if command[1].endswith("embed_throughput.py"):
            return 0, ("(a) ...\nratio_vs_forward=0.812 ratio_vs_naive=9.10 cache_speedup=3000 "
                       "ratio_vs_ceiling=0.903\n"), "a bar\n"
        if command[1].endswith("lvlm_prefix_speed.py"):
            return 0, ("speedup_vs_full_forward=nan shared_images_per_second=13.1 max_abs_difference=0.00e+00 "
                       "dataset_vs_loop=7.40 dataset_max_abs_difference=3.1e-02 dataset_vs_ceiling=0.61 "
                       "questions_together_vs_apart=4.10 questions_max_abs_difference=2.0e-02 "
                       "processor_img_s=210.5 ceiling_img_s=151.2 dataset_img_s=92.2\n"), ""
        workers = command[command.index("--workers") + 1]
        return 0, (f"workers_speedup=1.9 vs_decode_ceiling=0.85 main_ms_per_image=0.040 main_cap_img_s=25000 "
                   f"pipeline_img_s={rates[workers]}\n"), ""

    check["pipeline_step"].__globals__["run"] = fake_run
    namespace = SimpleNamespace(workers=[4, 8, 15])
    assert all(check[f"{step}_step"]("full", namespace) for step in ("embed", "pipeline", "generative"))
    out = capsys.readouterr().out.splitlines()
    assert out == ["gpu_check embed: ratio_vs_forward=0.812 ratio_vs_ceiling=0.903 ratio_vs_naive=9.10",
                   "gpu_check pipeline: fastest_workers=8 img_s_at_fastest=1500 main_ms_per_image=0.040 "
                   "img_s_by_workers=4:900,8:1500,15:1200",
                   "gpu_check generative: dataset_vs_loop=7.40 dataset_vs_ceiling=0.61 "
                   "dataset_max_abs_difference=3.1e-02 questions_together_vs_apart=4.10 dataset_img_s=92.2 "
                   "ceiling_img_s=151.2 processor_img_s=210.5"]
    assert logs == ["embed", "pipeline-4", "pipeline-8", "pipeline-15", "generative"]  # --log-dir's file names


def test_gpu_check_keeps_each_step_s_output_and_refuses_a_count_of_no_processes(capsys, tmp_path):
    check = runpy.run_path(str(BENCHMARKS / "gpu_check.py"), run_name="gpu_check")
    with pytest.raises(SystemExit) as exit:
        check["main"](["--cpu", "--quick", "--steps", "tests", "--jobs", "0"])
    assert exit.value.code == 2 and "--jobs: 0 is not a number of processes (1 or more)" in capsys.readouterr().err
    one = tmp_path / "test_one.py"  # a test file of one test: what is checked is how the step runs pytest
    one.write_text("def test_one():\n    assert sum([1, 1]) == 2\n")
    assert check["main"](["--cpu", "--quick", "--steps", "tests", "--tests", str(one), "--jobs", "2",
                          "--log-dir", str(tmp_path / "logs")]) == 0
    log = (tmp_path / "logs" / "tests.log").read_text()
    assert f" -n 2 {one}" in log.splitlines()[0] and "1 passed" in log, log


def test_tiers_benchmark_prints_its_contract_line(run_benchmark):
    """benchmarks/tiers_speed.py --quick: a family of 4 models made from one traits run, tiered on their
    samples, and its contract line."""
    result = run_benchmark("tiers_speed.py", "--quick")
    lines = result.stdout.strip().splitlines()
    assert re.fullmatch(r"tiers_seconds=[\d.]+ models=4 rows_per_run=280 pairs=6 tiered_rows=\d+", lines[-1]), lines[-1]
    assert sum(line.startswith("trait_anova ") for line in lines) == 2  # one per gender


def test_power_benchmark_prints_its_contract_line(run_benchmark):
    """benchmarks/power_speed.py --quick: `vlfair power` on a small professions run of the demo's biased encoder,
    its answer and its contract line."""
    result = run_benchmark("power_speed.py", "--quick")
    lines = result.stdout.strip().splitlines()
    assert re.fullmatch(r"power_seconds=[\d.]+ power_cli_seconds=nan rows=320", lines[-1]), lines[-1]
    assert any(line.startswith("  smallest deviation detected with 80% power: +") for line in lines), lines


def test_ties_cost_benchmark_prints_both_overheads(run_benchmark):
    """benchmarks/ties_cost.py --quick: the tie rule's cost in retrieval skew and multilingual (issue 62)."""
    result = run_benchmark("ties_cost.py", "--quick", "--repeats", "1")
    last = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"ranking_skew_overhead=-?[\d.]+ multilingual_overhead=-?[\d.]+ "
                        r"seconds_ranking_skew=[\d.]+ seconds_multilingual=[\d.]+", last), last
