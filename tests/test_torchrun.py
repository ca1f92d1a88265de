"""Two processes under torchrun (gloo, CPU) give what one process gives: embeddings, the probes'
numbers, the generative answers' scores, generated images, and the errors every process must raise.

The scenarios run in two launches (tests/torchrun_scenarios.py), three in each: a launch is two
interpreters that import torch and transformers, the most expensive thing these tests do, and one
launch of all six took 24-34 s on 2 cores.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import vlfair
from vlfair import testing
from vlfair.cli import main
from vlfair.imageio import RejectedImageError
from vlfair.probes.retrieval import SCORE
from vlfair.testing import assert_metrics_close
from vlfair.tiny import tiny_llava

SCENARIOS = Path(__file__).with_name("torchrun_scenarios.py")
SCENARIO_NAMES = ["embed", "professions", "retrieval", "generative-professions", "generation", "refused-row"]
UNREADABLE_ROW = 20  # chunk [16, 24) of 37 rows in chunks of 8: the second process's share
OPTIONS = {  # what each probe scenario passes after its model and dataset, here and in the one-process run
    # (the numbers are compared, not the plots: none is drawn, in either)
    "professions_options": ["--dtype", "float32", "--set", "bootstrap=20", "--set", "n_permutations=50",
                            "--no-figures"],
    "retrieval_options": ["--dtype", "float32", "--set", "bootstrap=20", "--set", "k=20", "--set", "ranking=dvl",
                          "--set", "concepts=[male, female]", "--no-figures"],
    "generative_options": ["--limit", "24", "--dtype", "float32", "--set", "bootstrap=20", "--no-figures"],
}


@dataclass
class Launch:
    out: Path
    config: dict
    stdout: str
    stderr: str

    def scenario(self, name: str) -> Path:
        """The scenario's folder, once both processes finished it without raising."""
        folder = self.out / name
        for rank in (0, 1):
            error = folder / f"error-{rank}.txt"
            assert not error.exists(), f"{name}, process {rank}:\n{error.read_text()[-3000:]}"
        return folder

    def printed(self, name: str) -> list[str]:
        return [(self.out / name / f"stdout-{rank}.txt").read_text() for rank in (0, 1)]


# two launches, each a module fixture a test waits for only when it reads one of its scenarios: one launch of
# all six was a 24-34 s setup on 2 cores
LAUNCHES = {"image_launch": ["embed", "generation", "refused-row"],
            "probe_launch": ["professions", "retrieval", "generative-professions"]}
LAUNCH_OF = {name: launch for launch, names in LAUNCHES.items() for name in names}
assert sorted(LAUNCH_OF) == sorted(SCENARIO_NAMES)


def _launch(names: list[str], base: Path, clip_dir: Path, llava_dir: Path, jpeg_paths: list[Path],
            broken_files: dict) -> Launch:
    paths = [str(p) for p in jpeg_paths]
    paths[UNREADABLE_ROW] = str(broken_files["not_image"])
    config = {"out": str(base / "out"), "clip": str(clip_dir), "llava": str(llava_dir), "paths": paths, **OPTIONS}
    (base / "config.json").write_text(json.dumps(config))
    # --standalone: a free port, so a test run beside this one (another worktree, another user) cannot collide
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(SCENARIOS),
               str(base / "config.json"), *names]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=testing.launch_env(2))
    assert done.returncode == 0, done.stderr[-3000:]
    return Launch(base / "out", config, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def llava_dir(tmp_path_factory) -> Path:
    return tiny_llava(tmp_path_factory.mktemp("torchrun-llava") / "llava")


@pytest.fixture(scope="module")
def image_launch(clip_dir, llava_dir, jpeg_paths, broken_files, tmp_path_factory) -> Launch:
    return _launch(LAUNCHES["image_launch"], tmp_path_factory.mktemp("torchrun-images"), clip_dir, llava_dir,
                   jpeg_paths, broken_files)


@pytest.fixture(scope="module")
def probe_launch(clip_dir, llava_dir, jpeg_paths, broken_files, tmp_path_factory) -> Launch:
    return _launch(LAUNCHES["probe_launch"], tmp_path_factory.mktemp("torchrun-probes"), clip_dir, llava_dir,
                   jpeg_paths, broken_files)


class _Launches:
    """The scenario's launch, made when a test first reads one of its scenarios."""

    def __init__(self, request):
        self._request = request

    def of(self, name: str) -> Launch:
        return self._request.getfixturevalue(LAUNCH_OF[name])

    def scenario(self, name: str) -> Path:
        return self.of(name).scenario(name)

    def printed(self, name: str) -> list[str]:
        return self.of(name).printed(name)


@pytest.fixture
def launch(request) -> _Launches:
    return _Launches(request)


@pytest.mark.parametrize("fixture", sorted(LAUNCHES))
def test_every_scenario_ran_in_both_processes(request, fixture):
    launch = request.getfixturevalue(fixture)
    assert sorted(p.name for p in launch.out.iterdir() if p.is_dir()) == sorted(LAUNCHES[fixture])
    for name in LAUNCHES[fixture]:
        launch.scenario(name)
        assert all((launch.out / name / f"stdout-{rank}.txt").exists() for rank in (0, 1)), name


@pytest.mark.parametrize("fixture", sorted(LAUNCHES))
def test_the_group_vlfair_formed_is_closed_before_the_processes_exit(request, fixture):
    launch = request.getfixturevalue(fixture)
    # closed before exit: gloo's teardown cannot abort a process whose work is done
    assert [(launch.out / f"closed{rank}").read_text() for rank in (0, 1)] == ["True", "True"]


def test_embeddings_of_two_processes_equal_one_s(launch, clip_encoder):
    folder = launch.scenario("embed")
    paths = launch.of("embed").config["paths"]
    single = vlfair.embed_images(clip_encoder, paths, cache_dir=None, chunk_size=8, batch_size=3, on_bad_image="skip")
    runs = [dict(np.load(folder / f"rank{rank}.npz")) for rank in (0, 1)]
    for run in runs:  # every process gets the full result, in dataset order
        np.testing.assert_allclose(run["all"], single.embeddings, atol=1e-5)
        assert run["all_skipped"].tolist() == [UNREADABLE_ROW]
        for name, rows in [("last_chunk_of_one", paths[:33]), ("one_row", paths[:1])]:
            alone = vlfair.embed_images(clip_encoder, rows, cache_dir=None, chunk_size=8, batch_size=3,
                                        on_bad_image="skip")
            np.testing.assert_allclose(run[name], alone.embeddings, atol=1e-5, err_msg=name)
        assert int(run["error_row"]) == UNREADABLE_ROW  # every process stopped at it, none hung
        assert int(run["world_size"]) == 2 and run["work"] <= 19  # its share of 37, not all of them
    assert sum(int(run["work"]) for run in runs) == 36  # every readable row once: no padding duplicates
    # the main process wrote the cache; a single-process run reads it without recomputing
    cached = vlfair.embed_images(clip_encoder, paths, cache_dir=folder / "cache", chunk_size=8, on_bad_image="skip")
    assert np.array_equal(cached.embeddings, runs[0]["all"])


def _one_process(tmp_path: Path, probe: str, model: str, dataset: str, options: str) -> Path:
    assert main(["run", probe, "--model", model, "--dataset", dataset, *OPTIONS[options],
                 "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "one")]) == 0
    return tmp_path / "one"


def test_a_probe_under_torchrun_equals_one_process(launch, clip_dir, tmp_path):
    folder = launch.scenario("professions")
    assert "".join(launch.printed("professions")).count("professions: ") == 1  # one process reports and writes
    one = _one_process(tmp_path, "professions", str(clip_dir), "synthetic:professions", "professions_options")
    assert_metrics_close(json.loads((folder / "run" / "results.json").read_text())["metrics"],
                         json.loads((one / "results.json").read_text())["metrics"], rtol=1e-4)


def test_retrieval_with_dvl_s_ranking_under_torchrun_equals_one_process(launch, clip_dir, tmp_path):
    """Both embeddings (normalised, and the raw features DVL ranks by) are computed by two processes."""
    folder = launch.scenario("retrieval")
    one = _one_process(tmp_path, "retrieval", str(clip_dir), "synthetic:fairface", "retrieval_options")
    two, one = pd.read_parquet(folder / "run" / "samples.parquet"), pd.read_parquet(one / "samples.parquet")
    columns = [c for c in one.columns if c.startswith(SCORE)]
    np.testing.assert_allclose(two[columns].to_numpy(), one[columns].to_numpy(), rtol=1e-5, atol=1e-6)
    assert len(list((folder / "cache").rglob("*.npy"))) >= 2


def test_answers_are_scored_by_two_processes_as_by_one(launch, tmp_path):
    folder = launch.scenario("generative-professions")
    llava = launch.of("generative-professions").config["llava"]
    one = _one_process(tmp_path, "professions", f"lvlm:{llava}", "synthetic:professions",
                       "generative_options")
    two, one = pd.read_parquet(folder / "run" / "samples.parquet"), pd.read_parquet(one / "samples.parquet")
    np.testing.assert_allclose(two["likelihood"], one["likelihood"], rtol=1e-5)
    assert list(two["row"]) == list(one["row"])


def test_generation_is_split_across_processes(launch):
    folder = launch.scenario("generation")
    ranks = [json.loads((folder / f"{rank}.json").read_text()) for rank in (0, 1)]
    assert [r["calls"] for r in ranks] == [10, 10]  # 20 images, half each
    assert ranks[0]["first"] == ranks[1]["first"]  # every process reads the same images back


def test_every_process_stops_at_the_row_an_image_processor_refuses(launch):
    """The refused image is in the second process's share: both processes raise it, row and all (none
    is left waiting for the other), and it pickles whole (gather_object sends it)."""
    again = pickle.loads(pickle.dumps(RejectedImageError("its processor rejects the image", 3, "a.jpg")))
    assert (again.row, again.path, str(again)) == (3, "a.jpg", "row 3 (a.jpg): its processor rejects the image")
    folder = launch.scenario("refused-row")
    assert [(folder / f"refused-by-{rank}").read_text() for rank in (0, 1)] == ["3", "3"]
