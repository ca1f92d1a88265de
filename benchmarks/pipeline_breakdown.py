"""Where the decode workers' time goes: why does the image pipeline not scale with workers on a machine of many
cores?

For each configuration (decode workers, images per piece handed to a worker, pieces read ahead per worker,
and whether the forward batches' shared buffers are touched by the main process before the workers start), it
runs ``vlfair.embed_images`` over generated JPEGs with a device step that returns at once (as
``input_pipeline.py`` (a)) and records, in every worker:

  decode   ms per image in ``ImagePreprocessing.load`` (decode, resize, crop)
  write    ms per image for the rest of the worker's item (the copy into the shared buffer, page faults included)
  faults   minor page faults per image (``getrusage``), and the share of the worker's CPU time spent in the kernel
  busy     the workers' time in items over (workers x the steady state: first item started to last item ended)

and the start (the call's start to the first item in any worker: workers forked, buffers made). The decode
ceiling (``input_pipeline.decode_ceiling``: the same decoding in a process pool) is printed for each worker
count. A configuration slower than its ceiling with busy workers and a decode time per image above one worker's
points at contention in the workers; idle workers point at the hand-over (pieces, read-ahead, the main process).

The last line is ``breakdown: best=CONFIG img_s=R vs_ceiling=S``.

Usage: python benchmarks/pipeline_breakdown.py [--images 4096] [--batch-size 1024] [--workers 1,8,15]
                                               [--pieces 64] [--prefetch 2] [--quick]
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vlfair  # noqa: E402
from vlfair import embed  # noqa: E402
from vlfair.tiny import tiny_clip, write_jpegs  # noqa: E402

from input_pipeline import NoDeviceStep, decode_ceiling  # noqa: E402

FIELDS = ("load", "item", "count", "first", "last", "faults0", "faults1", "system0", "system1", "user0", "user1")
MAX_WORKERS = 256


class WorkerClock:
    """Per-worker sums in a lock-free shared array (each worker writes its own row), inherited by the forked
    workers: the decode's time, the item's time, the items, when the first started and the last ended, and the
    worker's page faults and CPU times at its first item and after its last."""

    def __init__(self, encoder):
        self.encoder = encoder
        self.table = multiprocessing.RawArray(ctypes.c_double, MAX_WORKERS * len(FIELDS))

    def __enter__(self):
        table, width = self.table, len(FIELDS)
        preprocessing_class = type(self.encoder.preprocessing)
        original_load, original_item = preprocessing_class.load, embed._DecodeDataset.__getitem__
        self.restore = (preprocessing_class, original_load, original_item)

        def row() -> int:
            info = torch.utils.data.get_worker_info()
            return (info.id if info is not None else MAX_WORKERS - 1) * width

        def load(preprocessing, value, row_number):
            start = time.perf_counter()
            try:
                return original_load(preprocessing, value, row_number)
            finally:
                table[row() + 0] += time.perf_counter() - start

        def item(dataset, key):
            at = row()
            usage = resource.getrusage(resource.RUSAGE_SELF)
            start = time.perf_counter()
            if not table[at + 2]:
                table[at + 3] = start
                table[at + 5], table[at + 7], table[at + 9] = usage.ru_minflt, usage.ru_stime, usage.ru_utime
            try:
                return original_item(dataset, key)
            finally:
                end = time.perf_counter()
                usage = resource.getrusage(resource.RUSAGE_SELF)
                table[at + 1] += end - start
                table[at + 2] += 1
                table[at + 4] = end
                table[at + 6], table[at + 8], table[at + 10] = usage.ru_minflt, usage.ru_stime, usage.ru_utime

        preprocessing_class.load = load
        embed._DecodeDataset.__getitem__ = item
        return self

    def __exit__(self, *exc) -> None:
        preprocessing_class, original_load, original_item = self.restore
        preprocessing_class.load = original_load
        embed._DecodeDataset.__getitem__ = original_item

    def rows(self) -> list[dict[str, float]]:
        width = len(FIELDS)
        found = [dict(zip(FIELDS, self.table[k * width:(k + 1) * width])) for k in range(MAX_WORKERS)]
        return [r for r in found if r["count"]]


def touched_buffers():
    """``embed._shared_empty`` whose buffers the main process writes once (every page allocated before the workers
    start, so a worker's first write to a page maps it but never allocates it)."""
    original = embed._shared_empty

    def touched(shape):
        tensor = original(shape)
        tensor.fill_(0)
        return tensor

    return original, touched


def measure(encoder, paths, batch_size, workers, pieces, prefetch, touch) -> dict[str, float]:
    saved = embed.DECODE_BATCH, embed.PREFETCH, embed._shared_empty
    embed.DECODE_BATCH, embed.PREFETCH = pieces, prefetch
    if touch:
        embed._shared_empty = touched_buffers()[1]
    try:
        with NoDeviceStep(encoder), WorkerClock(encoder) as clock:
            start = time.perf_counter()
            vlfair.embed_images(encoder, paths, batch_size=batch_size, num_workers=workers, cache_dir=None,
                                progress=False)
            end = time.perf_counter()
    finally:
        embed.DECODE_BATCH, embed.PREFETCH, embed._shared_empty = saved
    rows = clock.rows()
    images = sum(r["count"] for r in rows)
    first, last = min(r["first"] for r in rows), max(r["last"] for r in rows)
    cpu = sum(r["system1"] - r["system0"] + r["user1"] - r["user0"] for r in rows)
    return {
        "img_s": len(paths) / (end - start), "start_s": first - start, "steady_img_s": images / (last - first),
        "busy": sum(r["item"] for r in rows) / (len(rows) * (last - first)),
        "decode_ms": 1000 * sum(r["load"] for r in rows) / images,
        "write_ms": 1000 * sum(r["item"] - r["load"] for r in rows) / images,
        "faults": sum(r["faults1"] - r["faults0"] for r in rows) / images,
        "system": sum(r["system1"] - r["system0"] for r in rows) / max(cpu, 1e-9),
        "workers_seen": len(rows),
    }


def environment() -> str:
    lines = [f"cpus {os.cpu_count()}, affinity {len(os.sched_getaffinity(0))}"]
    for path in ("/sys/fs/cgroup/cpu.max", "/sys/kernel/mm/transparent_hugepage/shmem_enabled"):
        try:
            lines.append(f"{path}: {Path(path).read_text().strip()}")
        except OSError:
            lines.append(f"{path}: absent")
    shm = os.statvfs("/dev/shm")
    lines.append(f"/dev/shm free {shm.f_bavail * shm.f_frsize / 2**30:.1f} GiB")
    return "; ".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--workers", default="", help="comma-separated worker counts (default 1 and the CPUs less one)")
    parser.add_argument("--pieces", default="64", help="comma-separated images per piece (vlfair's: 64)")
    parser.add_argument("--prefetch", default="2", help="comma-separated pieces read ahead per worker (vlfair's: 2)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 48 images in batches of 16")
    args = parser.parse_args()
    if args.quick:
        args.images, args.batch_size = 48, 16
    cpus = len(os.sched_getaffinity(0))
    worker_counts = [int(w) for w in args.workers.split(",")] if args.workers else sorted({1, max(1, cpus - 1)})
    piece_sizes = [int(p) for p in args.pieces.split(",")]
    prefetches = [int(p) for p in args.prefetch.split(",")]
    print(environment(), flush=True)
    with tempfile.TemporaryDirectory(prefix="vlfair-bench-") as tmp:
        checkpoint = tiny_clip(Path(tmp) / "tiny-clip-224", image_size=224, patch_size=32)
        encoder = vlfair.load_encoder(str(checkpoint), dtype="float32")
        paths = [str(p) for p in write_jpegs(Path(tmp) / "jpegs", args.images, size=(320, 240))]
        measure(encoder, paths[:args.batch_size], args.batch_size, worker_counts[-1], 64, 2, False)  # warm
        print(f"{args.images} JPEGs 320x240, batches of {args.batch_size}, device {encoder.device}")
        print(f"{'workers':>7} {'piece':>5} {'ahead':>5} {'touch':>5} {'img/s':>7} {'ceiling':>7} {'steady':>7} "
              f"{'start s':>7} {'busy':>5} {'dec ms':>6} {'wr ms':>6} {'faults':>6} {'sys':>5}", flush=True)
        best = ("", 0.0, 1.0)
        for workers in worker_counts:
            ceiling = decode_ceiling(paths, encoder.preprocessing, workers)
            for pieces in piece_sizes:
                for prefetch in prefetches:
                    for touch in (False, True):
                        found = measure(encoder, paths, args.batch_size, workers, pieces, prefetch, touch)
                        print(f"{workers:7d} {pieces:5d} {prefetch:5d} {str(touch):>5} {found['img_s']:7.0f} "
                              f"{ceiling:7.0f} {found['steady_img_s']:7.0f} {found['start_s']:7.2f} "
                              f"{found['busy']:5.2f} {found['decode_ms']:6.2f} {found['write_ms']:6.3f} "
                              f"{found['faults']:6.1f} {found['system']:5.2f}", flush=True)
                        if found["img_s"] > best[1]:
                            best = (f"workers{workers}_piece{pieces}_ahead{prefetch}_touch{int(touch)}",
                                    found["img_s"], ceiling)
    print(f"breakdown: best={best[0]} img_s={best[1]:.0f} vs_ceiling={best[1] / best[2]:.2f}")


if __name__ == "__main__":
    main()
