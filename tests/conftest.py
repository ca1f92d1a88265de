"""Shared fixtures: tiny checkpoints saved with save_pretrained, generated and broken images."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never touch the network
# pytest keeps the test modules it rewrote (their asserts) as .pyc in tests/__pycache__ unless bytecode is
# not to be written: where PYTHONDONTWRITEBYTECODE is set (the machines this suite runs on), each xdist worker
# rewrote all ~13,000 lines again at every run, 8 s of its collection. Only these test modules are written
# (vlfair is compiled by scripts/test, site-packages by pip); the tests' subprocesses keep the variable
sys.dont_write_bytecode = False
# pytest-xdist runs the suite in one process per core (scripts/test): torch's thread pool in each
# worker takes its share of the cores, not all of them, or the workers spend their time waiting on
# each other (set before anything imports torch; subprocesses of the tests inherit it)
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:  # the cores this process may run on (a container's share, not the host's count)
    _CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, _CORES // _WORKERS)))
# evaluate's modules cache (where `vlfair install-metrics` and the metric Spaces put modules): the
# session's own, so tests neither read a user's copies nor leave theirs behind
os.environ.setdefault("HF_MODULES_CACHE", tempfile.mkdtemp(prefix="vlfair-test-modules-"))
# vlfair's own default cache (embeddings, the file hashes of local models): the session's, not the user's
os.environ.setdefault("VLFAIR_CACHE", tempfile.mkdtemp(prefix="vlfair-test-cache-"))

from vlfair import logging as vlfair_logging  # noqa: E402
from vlfair import testing  # noqa: E402

# pytest-xdist hands each worker whole test files (scripts/test: --dist loadfile), in the order they are
# collected. Alphabetically, a 40 s file can come last and keep one core busy while the other has
# nothing left to do; the slowest files go first instead (longest first: the shorter ones fill in
# around them). First of all, two files whose first test needs the session's demo: one worker runs it
# (the demo forks a process per core) while the other waits for it, so the demo has the machine to
# itself instead of sharing it with a third process (on 2 cores: 34 s beside another worker's tests,
# about 20 s alone). Then the files that took more than 20 s of the suite's time on 2 cores, slowest first.
SLOW_FILES_FIRST = ["test_demo.py", "test_samples.py",
                    "test_lvlm_probes.py", "test_browser.py", "test_spaces.py", "test_probes.py", "test_studies.py",
                    "test_torchrun.py", "test_readable.py", "test_lvlm.py", "test_evaluate_idioms.py",
                    "test_hardening_writes.py", "test_retrieval.py"]


def pytest_collection_modifyitems(items) -> None:
    missing = [name for name in SLOW_FILES_FIRST if not (Path(__file__).parent / name).exists()]
    if missing:  # a renamed file would silently go back to its alphabetical place
        raise pytest.UsageError(f"tests/conftest.py: SLOW_FILES_FIRST names files that are not in tests/: {missing}")
    rank = {name: place for place, name in enumerate(SLOW_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's own order stays


@pytest.fixture(autouse=True)
def _library_verbosity():
    """Each test starts at the library's verbosity (warning) with bars on, whatever a test or fixture
    before it set (the CLI sets info, -q turns bars off): a test passes alone, in any order, on any
    xdist worker."""
    vlfair_logging.set_verbosity(vlfair_logging.env_level() or "warning")
    vlfair_logging.enable_progress_bars()


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def clip_dir(models_dir) -> Path:
    return testing.tiny_clip(models_dir / "tiny-clip")


@pytest.fixture(scope="session")
def siglip_dir(models_dir) -> Path:
    return testing.tiny_siglip(models_dir / "tiny-siglip")


@pytest.fixture(scope="session")
def mclip_dir(models_dir) -> Path:
    return testing.tiny_mclip(models_dir / "tiny-mclip")


@pytest.fixture(scope="session")
def clip_encoder(clip_dir):
    import vlfair

    return vlfair.load_encoder(str(clip_dir), dtype="float32")  # exact comparisons need float32


@pytest.fixture
def counted(clip_encoder, monkeypatch):
    """Count the images that actually go through the vision tower."""
    calls = {"images": 0}
    original = type(clip_encoder).encode_pixels

    def spy(self, batch, normalize=True):
        calls["images"] += batch.shape[0]
        return original(self, batch, normalize)

    monkeypatch.setattr(type(clip_encoder), "encode_pixels", spy)
    return calls


@pytest.fixture(scope="session")
def jpeg_paths(tmp_path_factory) -> list[Path]:
    """37 JPEGs of varying sizes (37: not a multiple of any batch or chunk size used)."""
    directory = tmp_path_factory.mktemp("jpegs")
    paths = []
    for i in range(37):
        size = (60 + 7 * (i % 5), 50 + 11 * (i % 3))
        paths.append(testing.write_jpegs(directory / f"s{i}", 1, size=size, seed=i)[0])
    return paths


@pytest.fixture(scope="session")
def broken_files(tmp_path_factory, jpeg_paths) -> dict[str, Path]:
    """A truncated JPEG and a text file with a .jpg name."""
    directory = tmp_path_factory.mktemp("broken")
    truncated = directory / "truncated.jpg"
    data = jpeg_paths[0].read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    not_image = directory / "notes.jpg"
    not_image.write_text("this is not an image\n")
    return {"truncated": truncated, "not_image": not_image}


def _session_dir(tmp_path_factory, worker_id: str) -> Path:
    """A folder of this test session that every xdist worker shares (the session's base temporary
    folder; without xdist, this process's)."""
    base = tmp_path_factory.getbasetemp()
    return base if worker_id == "master" else base.parent


@pytest.fixture(scope="session")
def demo_cache(tmp_path_factory, worker_id) -> Path:
    """The cache the demo and the demo Space are given: the shipped world models leave it empty."""
    path = _session_dir(tmp_path_factory, worker_id) / "demo-cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def demo(demo_cache, tmp_path_factory, worker_id) -> tuple[Path, list[dict]]:
    """One ``vlfair demo`` run for the whole session: its output folder and summary.json's entries.
    The first worker to ask runs it; the others wait for it (a file lock) and read what it wrote."""
    import json

    from filelock import FileLock

    from vlfair.cli import main

    shared = _session_dir(tmp_path_factory, worker_id)
    out = shared / "demo-out"
    with FileLock(str(shared / "demo-out.lock")):
        if not (out / "summary.json").exists():
            assert main(["demo", "--out", str(out), "--cache-dir", str(demo_cache)]) == 0
    return out, json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="session")
def browser():
    """One chromium per test process, for every test that drives a page: Playwright's sync API keeps its
    asyncio loop marked as running in this thread while a session is open, so a second
    ``sync_playwright()`` in a later test of the same worker would refuse to start."""
    from playwright.sync_api import sync_playwright

    from vlfair.browser import ARGS, ChromiumNotFound, find_chromium

    try:
        chromium = find_chromium()
    except ChromiumNotFound as error:
        pytest.fail(str(error))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=list(ARGS))
        yield browser
        browser.close()
