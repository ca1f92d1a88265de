"""The embedding engine: input forms, order, cache keys and resumption, bad input, sharding."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

import vlfair
from vlfair import testing
from vlfair.cache import ChunkStore
from vlfair.embed import EmbeddingResult

import forking

REPO = Path(__file__).resolve().parents[1]


def _paths(jpeg_paths):
    return [str(p) for p in jpeg_paths]


def test_equals_per_image_encoding_in_dataset_order(clip_encoder, jpeg_paths):
    embeddings = vlfair.embed_images(clip_encoder, _paths(jpeg_paths), cache_dir=None, batch_size=4, chunk_size=10)
    assert embeddings.dtype == np.float32 and embeddings.shape == (37, clip_encoder.embedding_dim)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-6)
    one_by_one = np.concatenate([clip_encoder.encode_images([p]) for p in _paths(jpeg_paths)])
    np.testing.assert_allclose(embeddings, one_by_one, atol=1e-5)
    reversed_rows = vlfair.embed_images(clip_encoder, _paths(jpeg_paths)[::-1], cache_dir=None, batch_size=8)
    np.testing.assert_allclose(reversed_rows[::-1], embeddings, atol=1e-5)


def test_every_input_form_gives_the_same_embeddings(clip_encoder, jpeg_paths):
    paths = _paths(jpeg_paths)
    expected = vlfair.embed_images(clip_encoder, paths, cache_dir=None)
    pil = [Image.open(p) for p in paths]
    byte_dicts = [{"bytes": Path(p).read_bytes(), "path": None} for p in paths]
    arrays = [np.asarray(Image.open(p).convert("RGB")) for p in paths]
    hf_decoded = datasets.Dataset.from_dict({"img": paths}).cast_column("img", datasets.Image())
    hf_paths = datasets.Dataset.from_dict({"file": paths, "label": list(range(37))})
    forms = {
        "pil": (pil, "image"), "bytes": (byte_dicts, "image"), "arrays": (arrays, "image"),
        "hf_image": (hf_decoded, "img"),
        "hf_undecoded": (hf_decoded.cast_column("img", datasets.Image(decode=False)), "img"),
        "hf_paths": (hf_paths, "file"), "dataframe": (pd.DataFrame({"p": paths}), "p"), "dict": ({"p": paths}, "p"),
    }
    for name, (data, column) in forms.items():
        got = vlfair.embed_images(clip_encoder, data, image_column=column, cache_dir=None, num_workers=0)
        np.testing.assert_allclose(got, expected, atol=1e-6, err_msg=name)


def test_workers_and_batching_do_not_change_results(clip_encoder, jpeg_paths):
    runs = [vlfair.embed_images(clip_encoder, _paths(jpeg_paths), cache_dir=None, batch_size=b, num_workers=w,
                                chunk_size=c)
            for b, w, c in [(1, 0, 5), (16, 2, 100), (64, 1, 37)]]
    for run in runs[1:]:
        np.testing.assert_allclose(run, runs[0], atol=1e-5)


def test_cached_rerun_does_no_model_work(clip_encoder, jpeg_paths, tmp_path, counted):
    first = vlfair.embed_images(clip_encoder, _paths(jpeg_paths), cache_dir=tmp_path, chunk_size=10)
    assert counted["images"] == 37
    second = vlfair.embed_images(clip_encoder, _paths(jpeg_paths), cache_dir=tmp_path, chunk_size=10)
    assert counted["images"] == 37 and np.array_equal(first, second)
    entries = list((tmp_path / "images").glob("*/*"))
    assert len(entries) == 1 and not list(entries[0].glob("rows-*.npz"))  # chunks folded into the final file
    assert (entries[0] / "embeddings.npy").exists() and (entries[0] / "meta.json").exists()


def test_cache_dir_none_writes_nothing_and_env_chooses_default(clip_encoder, jpeg_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("VLFAIR_CACHE", str(tmp_path / "env-cache"))
    vlfair.embed_images(clip_encoder, _paths(jpeg_paths)[:3], cache_dir=None)
    assert not (tmp_path / "env-cache").exists()
    vlfair.embed_images(clip_encoder, _paths(jpeg_paths)[:3])
    assert list((tmp_path / "env-cache" / "images").glob("*/*/done.json"))


def _variants(clip_dir, tmp_path, jpeg_paths):
    """One change per cache-key component: each must recompute."""
    paths = _paths(jpeg_paths)[:6]
    retrained = testing.tiny_clip(tmp_path / "retrained", seed=1)
    resized = testing.tiny_clip(tmp_path / "resized", image_size=48, patch_size=16)
    two_columns = {"a": paths, "b": paths[::-1]}
    return {
        "spec/revision": (vlfair.load_encoder(str(retrained), dtype="float32"), paths, "image"),
        "dtype": (vlfair.load_encoder(str(clip_dir), dtype="bfloat16"), paths, "image"),
        "preprocessing": (vlfair.load_encoder(str(resized), dtype="float32"), paths, "image"),
        "dataset": (None, _paths(jpeg_paths)[1:7], "image"),
        "image_column": (None, two_columns, "b"),
    }, (paths, two_columns)


def test_each_key_component_invalidates(clip_encoder, clip_dir, jpeg_paths, tmp_path, counted):
    variants, (paths, two_columns) = _variants(clip_dir, tmp_path, jpeg_paths)
    cache = tmp_path / "cache"
    vlfair.embed_images(clip_encoder, paths, cache_dir=cache)
    vlfair.embed_images(clip_encoder, two_columns, image_column="a", cache_dir=cache)
    for name, (encoder, data, column) in variants.items():
        before = counted["images"]
        vlfair.embed_images(encoder or clip_encoder, data, image_column=column, cache_dir=cache)
        assert counted["images"] - before == 6, f"changing {name} did not recompute"
        vlfair.embed_images(encoder or clip_encoder, data, image_column=column, cache_dir=cache)
        assert counted["images"] - before == 6, f"{name}: the new entry was not reused"
    assert len(list((cache / "images").glob("*/*/done.json"))) == 2 + len(variants)


def _slow_embedding(spec: str, paths: list[str], cache: str) -> None:
    """A run to kill midway (a forked child: tests/forking.py)."""
    encoder = vlfair.load_encoder(spec, dtype="float32")
    original = encoder.encode_pixels

    def slow(batch, normalize=True):
        time.sleep(0.3)  # slow enough for the parent to kill this run midway
        return original(batch, normalize)
    encoder.encode_pixels = slow
    vlfair.embed_images(encoder, paths, cache_dir=cache, chunk_size=4, batch_size=2, num_workers=0, progress=False)


def test_resume_after_kill_equals_uninterrupted_run(clip_encoder, jpeg_paths, tmp_path, counted):
    cache = tmp_path / "cache"
    process = forking.start(tmp_path, _slow_embedding, str(Path(clip_encoder.spec)), _paths(jpeg_paths), str(cache))
    deadline = time.time() + 120
    while len(list(cache.glob("images/*/*/rows-*.npz"))) < 3 and time.time() < deadline:
        assert process.returncode is None, f"the run stopped by itself (exit {process.returncode}): {process.stderr}"
        time.sleep(0.05)
    process.kill()
    process.wait()
    finished = len(list(cache.glob("images/*/*/rows-*.npz")))
    assert 3 <= finished < 10, "the run was not killed midway"
    assert not list(cache.glob("images/*/*/done.json"))
    resumed = vlfair.embed_images(clip_encoder, _paths(jpeg_paths), cache_dir=cache, chunk_size=4, batch_size=2)
    assert counted["images"] == 37 - 4 * finished  # only the missing chunks were computed
    uninterrupted = vlfair.embed_images(clip_encoder, _paths(jpeg_paths), cache_dir=None, chunk_size=4, batch_size=2)
    # bit for bit where the killed run computed on this process's device; a child of a process that started CUDA
    # computes on the CPU (tests/forking.py), and float32 on a CPU and a GPU agree to rounding
    np.testing.assert_allclose(resumed, uninterrupted, rtol=0, atol=0 if clip_encoder.device.type == "cpu" else 1e-5)


@pytest.mark.parametrize(("cpus", "cuda", "cpu"), [(16, 15, 2), (4, 3, 0), (2, 1, 0), (1, 1, 0)])
def test_default_decode_workers_are_every_core_but_the_main_process_s_on_a_gpu(monkeypatch, cpus, cuda, cpu):
    """On a GPU the most workers were the fastest (an H200's 16 CPUs: 15 workers 1.22x 8); on a CPU the forward
    keeps the cores busy, so none up to 4 cores and 2 beyond."""
    from vlfair import embed

    monkeypatch.setattr(embed, "available_cpus", lambda: cpus)
    assert embed.default_num_workers(torch.device("cuda", 0)) == cuda
    assert embed.default_num_workers(torch.device("cpu")) == cpu


def test_a_child_of_a_process_that_started_cuda_runs_on_the_cpu(tmp_path, monkeypatch):
    """On a GPU machine the resume test's child was forked from a test process that had started CUDA, which a
    forked child cannot start again: it failed at its first CUDA call, and the test waited for it for two minutes.
    Such a child now sees no GPU (nor do the processes it starts); a child of a process without CUDA is left alone."""
    code = ("import os, torch; "
            "print(torch.cuda.is_available(), torch.cuda.device_count(), repr(os.environ.get('CUDA_VISIBLE_DEVICES')))")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    status, out, err = forking.run(tmp_path, forking.python, code, name="after-cuda")
    assert status == 0, err
    assert out.split() == ["False", "0", "''"]
    # a process without CUDA (on a GPU machine, an earlier test of this process may have started it)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    status, out, err = forking.run(tmp_path, forking.python, code, name="without-cuda")
    assert status == 0, err
    assert out.split()[2:] == [repr(os.environ.get("CUDA_VISIBLE_DEVICES"))]


def _with_broken(jpeg_paths, broken_files):
    paths = _paths(jpeg_paths)[:12]
    paths[5] = str(broken_files["truncated"])
    paths[9] = str(broken_files["not_image"])
    return paths


def test_bad_image_error_names_row_and_path_and_keeps_finished_work(clip_encoder, jpeg_paths, broken_files,
                                                                    tmp_path, counted):
    paths = _with_broken(jpeg_paths, broken_files)
    with pytest.raises(vlfair.BadImageError) as info:
        vlfair.embed_images(clip_encoder, paths, cache_dir=tmp_path, chunk_size=4)
    assert info.value.row == 5 and str(broken_files["truncated"]) in str(info.value)
    assert "row 5" in str(info.value) and "truncated" in str(info.value)
    assert counted["images"] == 7  # chunks [0,4) and [4,8) were done, then it stopped
    result = vlfair.embed_images(clip_encoder, paths, cache_dir=tmp_path, chunk_size=4, on_bad_image="skip")
    assert counted["images"] == 7 + 3  # only chunk [8,12) was left to compute
    assert isinstance(result, EmbeddingResult)
    assert result.skipped_rows == [5, 9]
    assert result.kept_rows.tolist() == [r for r in range(12) if r not in (5, 9)]
    assert result.embeddings.shape == (10, clip_encoder.embedding_dim)
    assert "cannot identify image file" in result.skipped[1].reason
    clean = vlfair.embed_images(clip_encoder, [paths[r] for r in result.kept_rows], cache_dir=None)
    np.testing.assert_allclose(result.embeddings, clean, atol=1e-5)
    with pytest.raises(vlfair.BadImageError, match=r"row 5 .*1 more unreadable rows: 9"):
        vlfair.embed_images(clip_encoder, paths, cache_dir=tmp_path, chunk_size=4)  # cached, still an error


def test_bad_bytes_and_missing_file_are_bad_rows(clip_encoder, jpeg_paths, broken_files):
    data = datasets.Dataset.from_dict({"image": [{"bytes": b"not a jpeg", "path": "x.jpg"},
                                                 {"bytes": Path(jpeg_paths[0]).read_bytes(), "path": None},
                                                 {"bytes": None, "path": "/no/such/file.jpg"}]})
    data = data.cast_column("image", datasets.Image(decode=False))
    result = vlfair.embed_images(clip_encoder, data, cache_dir=None, on_bad_image="skip")
    assert result.skipped_rows == [0, 2] and result.skipped[1].path == "/no/such/file.jpg"


def test_invalid_input_is_a_clear_value_error(clip_encoder, jpeg_paths):
    with pytest.raises(ValueError, match="dataset is empty"):
        vlfair.embed_images(clip_encoder, [], cache_dir=None)
    with pytest.raises(ValueError, match=r"column 'image' not found; columns are \['file', 'label'\]"):
        vlfair.embed_images(clip_encoder, datasets.Dataset.from_dict({"file": ["a"], "label": [1]}), cache_dir=None)
    with pytest.raises(ValueError, match="column 'label' has type .*int64.* cannot hold images"):
        vlfair.embed_images(clip_encoder, datasets.Dataset.from_dict({"label": [1, 2]}), image_column="label",
                            cache_dir=None)
    with pytest.raises(ValueError, match="row 1 holds a int, expected"):
        vlfair.embed_images(clip_encoder, [str(jpeg_paths[0]), 7], cache_dir=None)
    with pytest.raises(ValueError, match="on_bad_image must be one of"):
        vlfair.embed_images(clip_encoder, [str(jpeg_paths[0])], on_bad_image="ignore")
    with pytest.raises(ValueError, match="streaming"):
        vlfair.embed_images(clip_encoder, datasets.Dataset.from_dict({"image": ["a"]}).to_iterable_dataset())


def test_progress_bar_reports_images_per_second(clip_encoder, jpeg_paths, capsys):
    vlfair.embed_images(clip_encoder, _paths(jpeg_paths), cache_dir=None, progress=True)
    err = capsys.readouterr().err
    assert "embedding images" in err and "img/s" in err and "37/37" in err


SPAWNED_SCRIPT = textwrap.dedent("""
    import sys, torch.distributed as dist, torch.multiprocessing as mp
    from vlfair.distributed import current_world  # imported once, before the processes are forked
    def run(rank):
        # a group formed without torchrun's RANK / WORLD_SIZE / LOCAL_RANK: Accelerate cannot see it
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=rank, world_size=2)
        try:
            current_world()
        except RuntimeError as exc:
            print(f"rank {rank}: {exc}", flush=True)
        dist.destroy_process_group()
    if __name__ == "__main__":
        mp.start_processes(run, nprocs=2, start_method="fork")  # as mp.spawn, without importing torch twice more
""")


def test_a_group_accelerate_cannot_see_is_an_error_not_a_silent_world_of_one(tmp_path):
    (tmp_path / "spawned.py").write_text(SPAWNED_SCRIPT)
    with socket.socket() as probe:  # a free port, as in the torchrun test
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run([sys.executable, str(tmp_path / "spawned.py"), str(port)], capture_output=True, text=True,
                          timeout=300, env=testing.launch_env(2))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("has 2 processes but Accelerate's state sees 1") == 2


def test_batches_stay_inside_a_chunk_and_an_empty_share_still_joins_its_gather():
    from vlfair.embed import _batches

    batches, owners = _batches([[0, 1, 2], [], [3]], batch_size=2)
    assert batches == [[0, 1], [2], [], [3]] and owners == [0, 0, 1, 2]


def test_a_forward_batch_is_decoded_in_pieces_and_put_together_in_order(clip_encoder, jpeg_paths, broken_files,
                                                                         monkeypatch):
    """Workers hand over pieces of at most DECODE_BATCH images (a large batch no longer waits on one worker);
    the model still sees the same whole batches, so the embeddings are bit for bit those of whole batches."""
    from vlfair import embed

    paths = _paths(jpeg_paths)  # 37 rows, 5 and 9 unreadable: pieces with fewer images than rows
    paths[5], paths[9] = str(broken_files["truncated"]), str(broken_files["not_image"])
    whole = vlfair.embed_images(clip_encoder, paths, batch_size=12, chunk_size=30, num_workers=0, cache_dir=None,
                                on_bad_image="skip")
    seen = []
    original = type(clip_encoder).encode_pixels
    def spy(self, batch, normalize=True):
        seen.append(batch.shape[0])
        return original(self, batch, normalize)

    monkeypatch.setattr(type(clip_encoder), "encode_pixels", spy)
    monkeypatch.setattr(embed, "DECODE_BATCH", 5)
    pieces = vlfair.embed_images(clip_encoder, paths, batch_size=12, chunk_size=30, num_workers=2, cache_dir=None,
                                 on_bad_image="skip")
    assert seen == [10, 12, 6, 7]  # rows [0,12) less 5 and 9, [12,24), [24,30) (the first chunk's end), [30,37)
    assert np.array_equal(pieces.embeddings, whole.embeddings) and pieces.skipped_rows == whole.skipped_rows


def test_workers_write_pixels_in_place_and_hand_over_only_rows(clip_encoder, jpeg_paths, broken_files):
    """A decode worker writes each image into its place in its forward batch's shared buffer and hands the main
    process (offset, row, unreadable) only: no pixels travel; a batch with unreadable rows is its readable ones."""
    from vlfair import embed

    paths = _paths(jpeg_paths)[:4]
    paths[1] = str(broken_files["not_image"])
    source = embed.image_source(paths, "image")
    slots = embed._Slots(2, 4, clip_encoder.preprocessing.output_hw, shared=True, pinned=False)
    assert all(tensor.is_shared() for tensor in slots.tensors)
    dataset = embed._DecodeDataset(source, [0, 1, 2, 3], clip_encoder.preprocessing, slots)
    handed = embed._collate([dataset[(7, 1, offset, offset)] for offset in range(4)])
    assert [(batch, offset, row) for batch, offset, row, _ in handed] == [(7, 0, 0), (7, 1, 1), (7, 2, 2), (7, 3, 3)]
    assert [bad is None for *_, bad in handed] == [True, False, True, True]
    rows, pixels, bad = slots.batch(1, handed[::-1])  # pieces come in the order they are done
    assert rows == [0, 2, 3] and [b.row for b in bad] == [1]
    for row, image in zip(rows, pixels):
        np.testing.assert_array_equal(image.numpy(), clip_encoder.preprocessing.load(paths[row], row))
    whole_rows, whole, _ = slots.batch(1, [handed[0], handed[2]])
    assert whole.data_ptr() == slots.tensors[1].data_ptr()  # no gap: the buffer itself, not a copy


def test_pieces_are_handed_over_as_they_are_done_and_batches_still_go_in_order(clip_encoder, jpeg_paths,
                                                                              monkeypatch):
    """Issue 44: a piece is handed over when it is done, not after every piece asked for before it (in order, every
    worker waited on the slowest: 15 workers on an H200 were busy 0.75 of the time); the main process puts each
    batch together from its pieces in whatever order they came, and the embeddings are bit for bit the same."""
    from vlfair import embed
    from vlfair.models.preprocessing import ImagePreprocessing

    assert embed._loader_order(2) == {"prefetch_factor": embed.PREFETCH, "in_order": False}
    paths = _paths(jpeg_paths)[:24]
    whole = vlfair.embed_images(clip_encoder, paths, batch_size=12, num_workers=0, cache_dir=None)
    original_load, original_batch = ImagePreprocessing.load, embed._Slots.batch
    first_offsets = []

    def slow_first_row(self, value, row):  # in the workers (forked after this patch)
        if row == 0:
            time.sleep(1.0)
        return original_load(self, value, row)

    def recording(self, slot, placed):
        first_offsets.append(placed[0][1])  # the first image handed over of this batch
        return original_batch(self, slot, placed)

    monkeypatch.setattr(ImagePreprocessing, "load", slow_first_row)
    monkeypatch.setattr(embed._Slots, "batch", recording)
    monkeypatch.setattr(embed, "DECODE_BATCH", 3)
    found = vlfair.embed_images(clip_encoder, paths, batch_size=12, num_workers=2, cache_dir=None)
    assert first_offsets[0] != 0  # row 0's piece came after a later one of its batch
    assert np.array_equal(found, whole)


def test_a_worker_waits_to_write_a_buffer_until_its_previous_batch_is_on_the_device(clip_encoder, jpeg_paths):
    """Pieces handed over out of order let a worker run further ahead than the buffers cover; it then waits until
    the main process has handed the buffer's previous batch to the device before it writes over it."""
    import multiprocessing
    import threading

    from vlfair import embed

    paths = _paths(jpeg_paths)[:2]
    slots = embed._Slots(2, 2, clip_encoder.preprocessing.output_hw, shared=True, pinned=False)
    slots.tensors[0].fill_(7)
    sent = multiprocessing.Value("q", -1, lock=False)
    dataset = embed._DecodeDataset(embed.image_source(paths, "image"), [0, 1], clip_encoder.preprocessing, slots, sent)
    handed = []
    worker = threading.Thread(target=lambda: handed.append(dataset[(2, 0, 0, 0)]))  # batch 2, in batch 0's buffer
    worker.start()
    worker.join(0.5)
    assert worker.is_alive() and not handed and bool((slots.tensors[0][0] == 7).all())  # batch 0 not yet sent
    sent.value = 1  # batch 0 and 1 handed to the device
    worker.join(10)
    assert handed == [(2, 0, 0, None)]
    np.testing.assert_array_equal(slots.tensors[0][0].numpy(), clip_encoder.preprocessing.load(paths[0], 0))


@pytest.mark.parametrize("seed", range(20))
def test_no_worker_writes_a_buffer_whose_batch_the_main_process_still_reads(seed):
    """_slot_count against the DataLoader's order, brute force: while the main process holds piece p (the batch
    it is putting together and the batch before it, on its way to the device), the pieces up to p + ahead may be
    decoded; no two of those batches may share a buffer. One buffer fewer is not enough."""
    from vlfair.embed import _batches, _pieces, _slot_count

    rng = np.random.default_rng(seed)
    shares = [list(range(int(rng.integers(0, 40)))) for _ in range(int(rng.integers(1, 5)))]
    batches, _ = _batches(shares, int(rng.integers(1, 20)))
    _, completes, _ = _pieces(batches, int(rng.integers(1, 8)))
    ahead = int(rng.integers(0, 9))

    def clashes(count: int) -> bool:  # two batches live at once in one buffer
        for piece, batch in enumerate(completes):
            live = {b for b in (batch - 1, batch, *completes[piece + 1:piece + ahead + 1]) if b >= 0}
            if len({b % count for b in live}) < len(live):
                return True
        return False

    count = _slot_count(completes, ahead)
    assert not clashes(count)
    assert count == 2 or clashes(count - 1)


def test_too_little_shared_memory_for_the_workers_is_said_before_any_work(clip_dir, tmp_path, monkeypatch, capsys):
    """A container's /dev/shm (64 MB by default in Docker) smaller than the workers' buffers: one line naming what
    to lower, exit 2, before a worker would die of a bus error mid-run."""
    import shutil

    from vlfair import embed
    from vlfair.cli import main

    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(2**30, 2**30 - 2**20, 2**20))
    monkeypatch.setattr(embed, "default_num_workers", lambda device: 2)
    code = main(["run", "professions", "--model", str(clip_dir), "--dataset", "synthetic:professions", "--batch-size",
                 "16", "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "--quiet"])
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1, error
    assert re.match(r"vlfair run: decode workers need \d+ MB of shared memory for \d+ batches of 16 images, and "
                    r"/dev/shm has 1 MB free: lower batch_size \(--batch-size on the command line\)", error), error
    assert "--shm-size" in error and not (tmp_path / "out" / "results.json").exists()


def test_under_torchrun_each_process_counts_on_its_share_of_shared_memory(monkeypatch):
    """Every process of a machine allocates its buffers from the same /dev/shm, each having seen it free: 100 MB
    of buffers fit 256 MB free for one process, not for each of four."""
    import shutil

    from vlfair.embed import _check_shared_memory

    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(2**30, 2**30 - 2**28, 2**28))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    _check_shared_memory(100 * 2**20, 4, 256)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    with pytest.raises(ValueError, match=r"need 100 MB of shared memory for 4 batches of 256 images, and /dev/shm has "
                                         r"256 MB free \(64 MB for each of this machine's 4 processes\): lower"):
        _check_shared_memory(100 * 2**20, 4, 256)
    _check_shared_memory(60 * 2**20, 4, 256)


def test_a_reduced_jpeg_decode_is_asked_for_at_load_and_cached_apart(clip_dir, tmp_path):
    """load_encoder(..., jpeg_draft=True): a large JPEG decoded at a reduced size, through every path that
    embeds images (a dataset, an in-memory list), its embeddings close to the whole decode's, cached apart."""
    path = tmp_path / "large.jpg"
    testing.generated_image(0, size=(640, 520)).save(path, quality=95)
    whole = vlfair.load_encoder(str(clip_dir), dtype="float32")
    reduced = vlfair.load_encoder(str(clip_dir), dtype="float32", jpeg_draft=True)
    assert reduced.identity() != whole.identity() and reduced.preprocessing.jpeg_draft
    first = vlfair.embed_images(whole, [str(path)], cache_dir=tmp_path / "cache")
    second = vlfair.embed_images(reduced, [str(path)], cache_dir=tmp_path / "cache")  # not the first's entry
    assert not np.array_equal(first, second)
    np.testing.assert_allclose(second, first, atol=0.05)
    np.testing.assert_array_equal(reduced.encode_images([str(path)]), second)


def test_pieces_cut_each_batch_and_an_empty_batch_is_one_empty_piece():
    from vlfair.embed import _pieces

    assert _pieces([[0, 1, 2, 3, 4], [], [5]], 2) == ([[0, 1], [2, 3], [4], [], [5]], [0, 0, 0, 1, 2],
                                                       [0, 2, 4, 0, 0])


def test_texts_ensemble_and_raw_features(clip_encoder, tmp_path):
    templates = ["a photo of a {}", "the {} at the office"]
    ensembled = vlfair.embed_texts(clip_encoder, ["doctor", "nurse"], templates=templates, cache_dir=tmp_path)
    for row, word in enumerate(["doctor", "nurse"]):
        per_template = clip_encoder.encode_texts([t.format(word) for t in templates])
        mean = per_template.mean(axis=0)
        np.testing.assert_allclose(ensembled[row], mean / np.linalg.norm(mean), atol=1e-6)
    plain = vlfair.embed_texts(clip_encoder, ["a photo of a doctor"], cache_dir=None)
    np.testing.assert_allclose(plain, clip_encoder.encode_texts(["a photo of a doctor"]), atol=1e-6)
    raw = vlfair.embed_texts(clip_encoder, ["a photo of a doctor"], normalize=False, cache_dir=None)
    assert abs(np.linalg.norm(raw) - 1) > 1e-3
    np.testing.assert_allclose(raw / np.linalg.norm(raw), plain, atol=1e-6)


def test_texts_cache_and_errors(clip_encoder, tmp_path, monkeypatch):
    first = vlfair.embed_texts(clip_encoder, ["doctor"], templates=["a {}"], cache_dir=tmp_path)
    monkeypatch.setattr(clip_encoder, "text_features", lambda texts: pytest.fail("cache miss"))
    assert np.array_equal(vlfair.embed_texts(clip_encoder, ["doctor"], templates=["a {}"], cache_dir=tmp_path), first)
    with pytest.raises(ValueError, match="exactly one"):
        vlfair.embed_texts(clip_encoder, ["doctor"], templates=["a photo"], cache_dir=None)
    with pytest.raises(TypeError, match=r"prompts\[1\] is a int"):
        vlfair.embed_texts(clip_encoder, ["doctor", 3], cache_dir=None)
    with pytest.raises(ValueError, match="prompts is empty"):
        vlfair.embed_texts(clip_encoder, [], cache_dir=None)


def test_chunk_store_writes_are_atomic(tmp_path):
    store = ChunkStore(tmp_path / "entry", {"k": 1})
    assert store.read_chunk(0, 4) is None and store.read_final() is None
    assert not [p for p in (tmp_path / "entry").iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("error", [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
                                   RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: "
                                                "can't allocate memory: you tried to allocate 99 bytes.")])
def test_a_batch_the_device_has_no_memory_for_names_batch_size_and_keeps_the_finished_chunks(
        clip_encoder, jpeg_paths, tmp_path, monkeypatch, counted, error):
    from vlfair.embed import BatchTooLargeError

    original = type(clip_encoder).encode_pixels

    def out_of_memory_after_two_batches(self, batch, normalize=True):
        if counted["images"] >= 16:
            raise error
        return original(self, batch, normalize)

    monkeypatch.setattr(type(clip_encoder), "encode_pixels", out_of_memory_after_two_batches)
    with pytest.raises(BatchTooLargeError, match=r"a batch of 8 images does not fit in the device's memory \(.*"
                                                 r"(out of memory|can't allocate memory).*\): lower batch_size \(now "
                                                 r"8; --batch-size .*\); the 16 images finished before it are cached"):
        vlfair.embed_images(clip_encoder, _paths(jpeg_paths), batch_size=8, chunk_size=8, cache_dir=tmp_path)
    monkeypatch.setattr(type(clip_encoder), "encode_pixels", original)
    counted["images"] = 0
    vlfair.embed_images(clip_encoder, _paths(jpeg_paths), batch_size=8, chunk_size=8, cache_dir=tmp_path)
    assert counted["images"] == 37 - 16  # the two chunks done before the failure came from the cache


@pytest.mark.parametrize("workers", [-1, 1.5, True, "2"])
def test_a_worker_count_out_of_range_is_named(clip_encoder, jpeg_paths, workers):
    """Named before any work, not left to the DataLoader's own message."""
    with pytest.raises(ValueError, match=r"num_workers must be None .* 0 or more .*got " + re.escape(repr(workers))):
        vlfair.embed_images(clip_encoder, _paths(jpeg_paths), num_workers=workers, cache_dir=None)


def test_a_generative_batch_the_device_has_no_memory_for_names_batch_size(jpeg_paths, tmp_path):
    from vlfair.embed import BatchTooLargeError, score_answers

    class Scorer:  # the part of a GenerativeScorer score_answers uses; its second batch is too large
        calls = 0

        def identity(self):
            return {"spec": "lvlm:fake", "revision": None, "dtype": "float32"}

        def prompt(self, question):
            return question

        def log_likelihoods_many(self, images, asks, batch_size):
            Scorer.calls += 1
            if Scorer.calls > 1:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB")
            return [np.zeros((len(images), len(answers))) for _, answers in asks]

    with pytest.raises(BatchTooLargeError, match=r"a batch of 4 images does not fit .* lower batch_size \(now 4;"
                                                 r".* the 4 images finished before it are cached"):
        score_answers(Scorer(), _paths(jpeg_paths)[:12], "who ?", ["a", "b"], batch_size=4, chunk_size=4,
                      cache_dir=tmp_path, progress=False)


def test_the_command_line_says_a_batch_too_large_in_one_line(clip_dir, tmp_path, monkeypatch, capsys):
    from vlfair.cli import main
    from vlfair.models.hf import HFEncoder

    def out_of_memory(self, batch, normalize=True):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(HFEncoder, "encode_pixels", out_of_memory)
    code = main(["run", "professions", "--model", str(clip_dir), "--dataset", "synthetic:professions", "--batch-size",
                 "16", "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "--quiet"])
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1, error
    assert error.startswith("vlfair run: a batch of 16 images does not fit in the device's memory (CUDA out of memory")
    assert "lower batch_size (now 16; --batch-size on the command line)" in error and "--debug" not in error


def test_autograd_s_device_threads_are_seen_and_then_children_are_fresh_interpreters(tmp_path, monkeypatch):
    """On a GPU machine a backward pass starts autograd's per-device threads (named pt_autograd_N), after which a
    forked child's own backward pass fails ("Unable to handle autograd's threading in combination with fork-based
    multiprocessing": the demo's shared-training test on an H200). Such threads are seen by name; the demo's
    forked pieces then run in the process, and a test's child is a fresh interpreter."""
    import ctypes
    import threading

    from vlfair.demo import forked

    already = forked.autograd_threads_started()  # on a GPU machine, after an earlier test's backward pass
    named, release = threading.Event(), threading.Event()

    def pretend() -> None:  # a thread whose name the kernel holds is what torch's are
        ctypes.CDLL(None).prctl(15, b"pt_autograd_0", 0, 0, 0)  # PR_SET_NAME: the calling thread's name
        named.set()
        release.wait(30)

    thread = threading.Thread(target=pretend)
    thread.start()
    try:
        assert named.wait(30) and forked.autograd_threads_started() and not forked.fork_safe()
        ran_here = forked.forked_map(lambda item: os.getpid(), [1, 2], workers=2)
        assert ran_here == [os.getpid(), os.getpid()]
        monkeypatch.setattr(forking, "python", None)  # a fork would see this; a fresh interpreter imports its own
        status, out, err = forking.run(tmp_path, _print_python_of_forking, name="fresh")
        assert status == 0, err
        assert out.split() == ["function"]
    finally:
        release.set()
        thread.join()
    # seen while such a thread runs, not after: the OS thread ends just after join() returns (Python's own end of it)
    deadline = time.monotonic() + 10
    while forked.autograd_threads_started() != already and time.monotonic() < deadline:
        time.sleep(0.02)
    assert forked.autograd_threads_started() == already


def _print_python_of_forking() -> None:
    print(type(forking.python).__name__)
