"""A stopped run resumes from its last finished batch, whatever the data's size (issue 66): the embedding cache's
chunks are what a run finished every ``flush_seconds``, not 4,096 rows, so a killed run of a few dozen images
embeds only the rest, and its numbers are the uninterrupted run's, bit for bit. Runs are killed for real (a
forked child, tests/forking.py), never timed: ``flush_seconds=0`` writes after every batch."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import vlfair
from vlfair.cache import BadRow, Chunk, ChunkStore
from vlfair.embed import BatchTooLargeError, _missing_ranges

import forking


def _paths(jpeg_paths):
    return [str(p) for p in jpeg_paths]


def _cached_rows(cache: Path, kind: str = "images") -> int:
    """The rows the chunk files of every entry under ``cache`` hold, read from their names."""
    spans = [path.stem.split("-")[1:] for path in cache.glob(f"{kind}/*/*/rows-*.npz")]
    return sum(int(end) - int(start) for start, end in spans)


def _slowed(encoder_class) -> None:
    """Each forward batch slowed, in a child to be killed midway (the parent polls the cache, never a clock)."""
    original = encoder_class.encode_pixels

    def slow(self, batch, normalize=True):
        time.sleep(0.3)
        return original(self, batch, normalize)
    encoder_class.encode_pixels = slow


def _kill_once_cached(child: forking.Child, cache: Path, rows: int) -> int:
    """Kill ``child`` once its cache holds ``rows`` rows or more; the rows it had cached then."""
    deadline = time.time() + 240
    while _cached_rows(cache) < rows and time.time() < deadline:
        assert child.returncode is None, f"the run stopped by itself (exit {child.returncode}): {child.stderr}"
        time.sleep(0.05)
    child.kill()
    child.wait()
    assert not list(cache.glob("images/*/*/done.json")), "the run finished before it was killed"
    return _cached_rows(cache)


def _embedding(spec: str, paths: list[str], cache: str) -> None:
    encoder = vlfair.load_encoder(spec, dtype="float32")
    _slowed(type(encoder))
    vlfair.embed_images(encoder, paths, cache_dir=cache, batch_size=2, num_workers=0, progress=False,
                        flush_seconds=0)  # chunk_size left at 4,096: more than all 37 rows


def test_a_killed_run_smaller_than_a_chunk_resumes_from_its_last_batch(clip_encoder, jpeg_paths, tmp_path, counted):
    cache = tmp_path / "cache"
    child = forking.start(tmp_path, _embedding, str(Path(clip_encoder.spec)), _paths(jpeg_paths), str(cache))
    cached = _kill_once_cached(child, cache, 6)
    assert 6 <= cached < 37 and cached % 2 == 0, cached  # whole batches of 2, killed midway
    resumed = vlfair.embed_images(clip_encoder, _paths(jpeg_paths), cache_dir=cache, batch_size=2)
    assert counted["images"] == 37 - cached  # only the rows the killed run had not finished
    uninterrupted = vlfair.embed_images(clip_encoder, _paths(jpeg_paths), cache_dir=None, batch_size=2)
    # bit for bit where the killed run computed on this process's device; a child of a process that started CUDA
    # computes on the CPU (tests/forking.py), and float32 on a CPU and a GPU agree to rounding
    np.testing.assert_allclose(resumed, uninterrupted, rtol=0, atol=0 if clip_encoder.device.type == "cpu" else 1e-5)
    assert not list(cache.glob("images/*/*/rows-*.npz"))  # folded into the final array


def _command(clip_dir: str, out: str, cache: str) -> list[str]:
    return ["run", "professions", "--model", clip_dir, "--dataset", "synthetic:professions", "--limit", "96",
            "--batch-size", "8", "--no-figures", "--bootstrap", "50", "--permutations", "50", "--out", out,
            "--cache-dir", cache, "--device", "cpu", "--quiet"]  # on a GPU machine too: the killed child's device


def _killed_command(clip_dir: str, out: str, cache: str) -> int:
    import vlfair.embed
    from vlfair.cli import main
    from vlfair.models.hf import HFEncoder

    vlfair.embed.FLUSH_SECONDS = 0  # in this child only: every batch written as it finishes
    _slowed(HFEncoder)
    return main(_command(clip_dir, out, cache))


def test_a_killed_vlfair_run_of_96_images_resumes_and_measures_what_an_uninterrupted_one_does(
        clip_dir, clip_encoder, tmp_path, counted):
    from vlfair.cli import main

    cache = tmp_path / "cache"
    child = forking.start(tmp_path, _killed_command, str(clip_dir), str(tmp_path / "killed"), str(cache))
    cached = _kill_once_cached(child, cache, 24)
    assert 24 <= cached < 96 and cached % 8 == 0, cached
    assert main(_command(str(clip_dir), str(tmp_path / "resumed"), str(cache))) == 0
    resumed_images = counted["images"]
    assert main(_command(str(clip_dir), str(tmp_path / "whole"), str(tmp_path / "fresh-cache"))) == 0
    assert resumed_images == counted["images"] - resumed_images - cached  # the resumed run embedded only the rest
    runs = [json.loads((tmp_path / name / "results.json").read_text()) for name in ("resumed", "whole")]
    assert runs[0]["metrics"] == runs[1]["metrics"]
    samples = [pd.read_parquet(tmp_path / name / "samples.parquet") for name in ("resumed", "whole")]
    pd.testing.assert_frame_equal(*samples, check_exact=True)


def test_a_bad_image_stops_the_run_at_its_batch_with_what_it_finished_cached(clip_encoder, jpeg_paths,
                                                                             broken_files, tmp_path, counted):
    paths = _paths(jpeg_paths)[:12]
    paths[5] = str(broken_files["truncated"])
    with pytest.raises(vlfair.BadImageError, match="row 5"):
        vlfair.embed_images(clip_encoder, paths, cache_dir=tmp_path, batch_size=4)  # one chunk of 4,096 rows
    # batches [0, 4) and [4, 8) (its row 5 unreadable) cached, the chunk of 4,096 rows not waited for (the next
    # batch runs on the device while one is booked: it may have run, uncached)
    assert _cached_rows(tmp_path) == 8 and counted["images"] in (7, 11)
    before = counted["images"]
    vlfair.embed_images(clip_encoder, paths, cache_dir=tmp_path, batch_size=4, on_bad_image="skip")
    assert counted["images"] - before == 4  # only rows 8-11


@pytest.mark.parametrize("error", [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
                                   KeyboardInterrupt()])
def test_a_run_stopped_mid_chunk_caches_every_batch_it_finished(clip_encoder, jpeg_paths, tmp_path, monkeypatch,
                                                                counted, error):
    """A batch too large, or Ctrl-C: the batches finished before it are written as the run stops, not lost with
    the chunk they were part of (with the default flush, a fast run writes nothing before its end)."""
    original = type(clip_encoder).encode_pixels

    def stopped_after_two_batches(self, batch, normalize=True):
        if counted["images"] >= 16:
            raise error
        return original(self, batch, normalize)

    monkeypatch.setattr(type(clip_encoder), "encode_pixels", stopped_after_two_batches)
    with pytest.raises(BatchTooLargeError if isinstance(error, RuntimeError) else KeyboardInterrupt) as stopped:
        vlfair.embed_images(clip_encoder, _paths(jpeg_paths), batch_size=8, cache_dir=tmp_path, progress=False)
    if isinstance(error, RuntimeError):
        assert "the 16 images finished before it are cached and are not computed again" in str(stopped.value)
    assert _cached_rows(tmp_path) == 16
    monkeypatch.setattr(type(clip_encoder), "encode_pixels", original)
    counted["images"] = 0
    vlfair.embed_images(clip_encoder, _paths(jpeg_paths), batch_size=8, cache_dir=tmp_path, progress=False)
    assert counted["images"] == 37 - 16


def test_chunks_of_any_ranges_are_read_and_the_rest_is_planned(tmp_path):
    store = ChunkStore(tmp_path / "entry", {"k": 1})

    def chunk(start, end):
        rows = np.arange(start, end)
        return Chunk(rows, np.full((len(rows), 2), start, np.float32), [BadRow(start, None, "bad")])

    for start, end in [(0, 6), (0, 4), (6, 10), (8, 12), (20, 30)]:  # (0, 4) and (8, 12): runs at once
        store.write_chunk(start, end, chunk(start, end))
    assert sorted(store.read_chunks()) == [(0, 6), (6, 10), (20, 30)]
    assert _missing_ranges([(0, 16), (16, 32), (32, 35)], store.read_chunks()) == [(10, 16), (16, 20), (30, 32),
                                                                                 (32, 35)]
    assert _missing_ranges([(0, 5)], []) == [(0, 5)] and _missing_ranges([(0, 5)], [(0, 5)]) == []
    assert ChunkStore(None, {}).read_chunks() == {}


@pytest.mark.parametrize("seconds", [-1, float("nan"), True, "10"])
def test_flush_seconds_out_of_range_is_named(clip_encoder, jpeg_paths, seconds):
    with pytest.raises(ValueError, match=r"flush_seconds must be a number of seconds, 0 or more"):
        vlfair.embed_images(clip_encoder, _paths(jpeg_paths)[:2], cache_dir=None, flush_seconds=seconds)
