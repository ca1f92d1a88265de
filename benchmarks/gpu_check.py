"""What anyone with a GPU runs before trusting vlfair there: the benchmarks at GPU scale and the GPU-relevant tests,
one contract line each.

Steps (each a fresh process, as a person runs it; --steps picks some):

  embed       benchmarks/embed_throughput.py: CLIP ViT-B/32 end to end against its raw forward and against the
              decode ceiling of all the machine's CPUs, 16,384 JPEGs in batches of 1,024
  pipeline    benchmarks/input_pipeline.py (4,096 JPEGs) at each decode-worker count of --workers (default: 4,
              8, 12 and the machine's CPUs less one): the fastest, and the main process's CPU time per image
  generative  benchmarks/lvlm_prefix_speed.py with the LLaVA architecture at 1.8 B parameters: the dataset
              path (images batched) against the loop of one image at a time and the prefix ceiling
  tests       pytest on the files whose code runs on the device (models and every encoder family, their
              preprocessing, embedding, generative models, torchrun, the demo against its recorded numbers), on
              this machine's GPU, in --jobs processes

Each step prints ``gpu_check STEP: key=value ...`` (a step that failed: ``gpu_check STEP: failed (exit N)``
and the end of its output); the exit status is 1 if any failed. --log-dir keeps each step's whole output
(STEP.log; the pipeline's one per worker count). Without CUDA it says so and stops (exit 2),
unless --cpu (a smoke run of the script itself at small sizes, with --quick).

Usage: python benchmarks/gpu_check.py [--steps embed,pipeline,generative,tests] [--workers 4,8,12]
                                      [--tests PATH...] [--jobs N] [--log-dir DIR] [--quick] [--cpu]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STEPS = ("embed", "pipeline", "generative", "tests")
TESTS = ["tests/test_models.py", "tests/test_families.py", "tests/test_preprocessing.py", "tests/test_embed.py",
         "tests/test_lvlm.py", "tests/test_torchrun.py", "tests/test_demo.py"]
SIZES = {  # full: the sizes of issue 44's H200 measurement; quick: a smoke run of this script
    "embed": {"full": ["--images", "16384", "--naive-images", "2048", "--batch-size", "1024", "--repeats", "2"],
              "quick": ["--model", "tiny", "--images", "16", "--naive-images", "4", "--batch-size", "8"]},
    "pipeline": {"full": ["--images", "4096", "--batch-size", "1024", "--repeats", "1"],  # 1 worker: ~9 s a round
                 "quick": ["--images", "24", "--batch-size", "8", "--repeats", "1"]},
    "generative": {"full": ["--hidden", "2048", "--layers", "24", "--heads", "16", "--image-size", "336",
                            "--patch-size", "14", "--positions", "1024", "--images", "256", "--batch-size", "32",
                            "--skip-full"],
                   "quick": ["--quick", "--batch-size", "2"]},
}


def contract(output: str) -> dict[str, str]:
    """The ``key=value`` fields of a benchmark's last line."""
    last = output.strip().splitlines()[-1] if output.strip() else ""
    return dict(field.split("=", 1) for field in last.split() if "=" in field)


LOG_DIR: list[Path] = []  # --log-dir, where given


def run(command: list[str], log: str = "") -> tuple[int, str, str]:
    """(exit status, standard output, standard error) of ``command`` run from the project's root; kept in
    --log-dir's ``log``.log where both are given."""
    done = subprocess.run(command, capture_output=True, text=True, cwd=HERE.parent)
    if LOG_DIR and log:
        (LOG_DIR[0] / f"{log}.log").write_text(f"$ {' '.join(command)}\n{done.stdout}\n{done.stderr}")
    return done.returncode, done.stdout, done.stderr


def say(step: str, fields: dict[str, object]) -> None:
    print(f"gpu_check {step}: " + " ".join(f"{key}={value}" for key, value in fields.items()), flush=True)


def failed(step: str, code: int, output: str) -> bool:
    print(f"gpu_check {step}: failed (exit {code})\n" + "\n".join(output.strip().splitlines()[-15:]), flush=True)
    return False


def benchmark(step: str, script: str, args: list[str], log: str = "") -> tuple[bool, dict[str, str]]:
    code, output, errors = run([sys.executable, str(HERE / script), *args], log or step)
    if code != 0:
        return failed(step, code, output + errors), {}
    return True, contract(output)


def embed_step(size: str, _: argparse.Namespace) -> bool:
    ok, fields = benchmark("embed", "embed_throughput.py", SIZES["embed"][size])
    if ok:
        say("embed", {"ratio_vs_forward": fields["ratio_vs_forward"], "ratio_vs_ceiling": fields["ratio_vs_ceiling"],
                      "ratio_vs_naive": fields["ratio_vs_naive"]})
    return ok


def pipeline_step(size: str, args: argparse.Namespace) -> bool:
    rates: dict[int, float] = {}
    main_ms = None
    for workers in args.workers:
        ok, fields = benchmark("pipeline", "input_pipeline.py", [*SIZES["pipeline"][size], "--workers", str(workers)],
                               f"pipeline-{workers}")
        if not ok:
            return False
        rates[workers] = float(fields["pipeline_img_s"])
        main_ms = fields["main_ms_per_image"]
    fastest = max(rates, key=rates.__getitem__)
    say("pipeline", {"fastest_workers": fastest, "img_s_at_fastest": f"{rates[fastest]:.0f}",
                     "main_ms_per_image": main_ms,
                     "img_s_by_workers": ",".join(f"{w}:{r:.0f}" for w, r in sorted(rates.items()))})
    return True


def generative_step(size: str, _: argparse.Namespace) -> bool:
    ok, fields = benchmark("generative", "lvlm_prefix_speed.py", SIZES["generative"][size])
    if ok:
        say("generative", {"dataset_vs_loop": fields["dataset_vs_loop"],
                           "dataset_vs_ceiling": fields["dataset_vs_ceiling"],
                           "dataset_max_abs_difference": fields["dataset_max_abs_difference"],
                           "questions_together_vs_apart": fields["questions_together_vs_apart"],
                           "dataset_img_s": fields["dataset_img_s"], "ceiling_img_s": fields["ceiling_img_s"],
                           "processor_img_s": fields["processor_img_s"]})
    return ok


def tests_step(_: str, args: argparse.Namespace) -> bool:
    jobs = ["-n", str(args.jobs)] if args.jobs > 1 else []  # pytest-xdist, a test dependency
    code, output, errors = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark",
                                *jobs, *args.tests], "tests")
    counts = dict((name, int(number)) for number, name in re.findall(r"(\d+) (passed|failed|errors?)", output))
    say("tests", {"passed": counts.get("passed", 0), "failed": counts.get("failed", 0),
                  "errors": counts.get("error", 0) + counts.get("errors", 0), "files": len(args.tests)})
    return code == 0 or failed("tests", code, output + errors)


RUNNERS = {"embed": embed_step, "pipeline": pipeline_step, "generative": generative_step, "tests": tests_step}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {', '.join(STEPS)}")
    parser.add_argument("--workers", help="decode-worker counts the pipeline step compares (comma-separated)")
    parser.add_argument("--tests", nargs="+", default=TESTS, help="test files of the tests step")
    parser.add_argument("--jobs", type=int, help="pytest processes of the tests step (default: half the CPUs)")
    parser.add_argument("--log-dir", type=Path, help="keep each step's whole output here (STEP.log)")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of this script")
    parser.add_argument("--cpu", action="store_true", help="run without CUDA (a smoke run: with --quick)")
    args = parser.parse_args(argv)
    steps = [step.strip() for step in args.steps.split(",") if step.strip()]
    unknown = [step for step in steps if step not in RUNNERS]
    if unknown or not steps:
        parser.error(f"--steps: {', '.join(unknown) or 'none given'}; the steps are {', '.join(STEPS)}")
    import torch

    if not torch.cuda.is_available() and not args.cpu:
        print("gpu_check.py: no CUDA device here (torch.cuda.is_available() is False): this check is for a GPU "
              "machine; --cpu --quick runs it here as a smoke run", file=sys.stderr)
        return 2
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        args.workers = ([int(w) for w in args.workers.split(",")] if args.workers
                        else sorted({w for w in (4, 8, 12, cpus - 1) if 1 <= w <= max(1, cpus - 1)}) or [1])
    except ValueError:
        parser.error(f"--workers: {args.workers!r} is not a comma-separated list of whole numbers")
    if min(args.workers) < 1:
        parser.error("--workers: each count must be at least 1")
    args.jobs = max(1, cpus // 2) if args.jobs is None else args.jobs
    if args.jobs < 1:
        parser.error(f"--jobs: {args.jobs} is not a number of processes (1 or more)")
    if args.log_dir:
        args.log_dir.mkdir(parents=True, exist_ok=True)
        LOG_DIR[:] = [args.log_dir]
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU (--cpu)"
    print(f"gpu_check: {device}, {cpus} CPUs, torch {torch.__version__}; steps {', '.join(steps)}", flush=True)
    size = "quick" if args.quick else "full"
    results = [RUNNERS[step](size, args) for step in steps]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
