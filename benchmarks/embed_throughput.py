"""Embedding throughput: vlfair end to end vs the raw model forward, a naive loop, and the cache.

On generated JPEGs, with a randomly initialised encoder of exactly the
openai/clip-vit-base-patch32 architecture (saved with save_pretrained and loaded through
vlfair.load_encoder, so the same code path as the real checkpoint), it measures in one run:

  (a) vlfair.embed_images end to end (decode, resize, batch, forward, cache writes), images/s
  (b) the raw model forward on pre-batched, pre-normalised tensors, images/s
  ((a) and (b) measured in turn, ``--repeats`` times, the best of each kept)
  (c) a naive loop: per image, CLIPProcessor + model forward, images/s, at from_pretrained's
      default dtype (float32), as a hand-written script runs it; the same loop in vlfair's dtype
      is printed beside it, so that on a GPU (where auto is bf16) the share due to bf16 is visible
      (on a CPU auto is float32, and both loops run alike)
  (d) a cached re-run of (a)
  (e) the decode ceiling: the same files decoded and resized (what a decode worker does with a row) in a
      process pool of all the machine's CPUs, images/s
  and peak memory.

The last line is ``ratio_vs_forward=A ratio_vs_naive=B cache_speedup=C ratio_vs_ceiling=D`` with A = a/b,
B = a/c, C = time(a)/time(d) and D = a / min(b, e): the share of the rate that the slower of the model
and the machine's decoding allows. Runs unchanged on a GPU (bf16, sdpa) when one is present.

Usage: python benchmarks/embed_throughput.py [--quick] [--images N] [--batch-size B] [--workers W]
                                            [--repeats R] [--model vit-b32|tiny]
(``--model tiny``: vlfair's tiny CLIP, for a smoke run of the script itself; its ratios say nothing
of a real model's.)
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

import vlfair
from vlfair._cpu import available_cpus
from vlfair.embed import default_num_workers
from vlfair.tiny import tiny_clip, word_tokenizer, write_jpegs

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also where runpy runs this file (tests)
from input_pipeline import decode_ceiling  # noqa: E402  (the ceiling input_pipeline.py measures, defined once)


def build_vit_b32(directory: Path) -> Path:
    """openai/clip-vit-base-patch32's architecture and preprocessing, random weights."""
    torch.manual_seed(0)
    CLIPModel(CLIPConfig()).save_pretrained(directory)
    word_tokenizer(model_max_length=77).save_pretrained(directory)
    CLIPImageProcessor().save_pretrained(directory)  # shortest edge 224, center crop 224, bicubic
    return directory


MODELS = {"vit-b32": ("ViT-B/32 (random weights)", build_vit_b32),
          "tiny": ("vlfair's tiny CLIP (a smoke run: the ratios say nothing of a real model)", tiny_clip)}


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_vlfair(encoder, paths, batch_size, workers, cache_dir) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    embeddings = vlfair.embed_images(encoder, paths, batch_size=batch_size, num_workers=workers,
                                     cache_dir=cache_dir, progress=False)
    synchronize(encoder.device)
    return time.perf_counter() - start, embeddings


@torch.inference_mode()
def time_raw_forward(encoder, num_images: int, batch_size: int) -> float:
    """The model alone: tensors already decoded, resized, normalised, batched and on the device."""
    height, width = encoder.preprocessing.output_hw
    batch = torch.randn(batch_size, 3, height, width, device=encoder.device, dtype=encoder.dtype)
    encoder.model.get_image_features(pixel_values=batch)  # warm-up
    synchronize(encoder.device)
    start = time.perf_counter()
    done = 0
    while done < num_images:
        size = min(batch_size, num_images - done)
        encoder.model.get_image_features(pixel_values=batch[:size])
        done += size
    synchronize(encoder.device)
    return time.perf_counter() - start


@torch.inference_mode()
def time_naive(checkpoint: Path, paths, device, dtype) -> float:
    """What a script without vlfair typically does: processor + forward, one image at a time."""
    model = CLIPModel.from_pretrained(checkpoint, dtype=dtype).to(device).eval()
    processor = CLIPImageProcessor.from_pretrained(checkpoint)
    start = time.perf_counter()
    for path in paths:
        pixels = processor(images=Image.open(path).convert("RGB"), return_tensors="pt")["pixel_values"]
        model.get_image_features(pixel_values=pixels.to(device, dtype)).pooler_output.float().cpu()
    synchronize(device)
    return time.perf_counter() - start


def peak_memory() -> str:
    # this process only: a forked worker's maximum RSS counts the pages it shares with its parent
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    text = f"peak RSS {rss_mb:.0f} MiB (main process)"
    if torch.cuda.is_available():
        text += f", peak GPU {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer images (a smoke run)")
    parser.add_argument("--images", type=int, help="images for (a), (b), (d); default 512, quick 96")
    parser.add_argument("--naive-images", type=int, help="images for the naive loop; default images/4")
    parser.add_argument("--batch-size", type=int, help="default 64 on CPU, 256 on GPU")
    parser.add_argument("--workers", type=int, help="DataLoader workers; default: vlfair's choice")
    parser.add_argument("--image-size", type=int, nargs=2, default=(320, 240), metavar=("W", "H"))
    parser.add_argument("--repeats", type=int, default=3, help="best of how many rounds of (a) and (b) (default 3)")
    parser.add_argument("--model", choices=sorted(MODELS), default="vit-b32",
                        help="the encoder measured (default vit-b32; tiny: a smoke run of the script)")
    args = parser.parse_args()
    described, build = MODELS[args.model]
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    num_images = args.images or (96 if args.quick else 512)
    naive_images = args.naive_images or max(16, num_images // 4)
    with tempfile.TemporaryDirectory(prefix="vlfair-bench-") as tmp:
        tmp_path = Path(tmp)
        checkpoint = Path(build(tmp_path / f"{args.model}-random"))
        paths = [str(p) for p in write_jpegs(tmp_path / "jpegs", num_images, size=tuple(args.image_size))]
        encoder = vlfair.load_encoder(str(checkpoint))
        batch_size = args.batch_size or (256 if encoder.device.type == "cuda" else 64)
        workers = default_num_workers(encoder.device) if args.workers is None else args.workers
        print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, "
              f"device {encoder.device}, dtype {encoder.dtype}, torch {torch.__version__}")
        print(f"{num_images} JPEGs {args.image_size[0]}x{args.image_size[1]}, batch {batch_size}, "
              f"{workers} decode workers, {described}")

        # warm-up: worker start-up and first-call allocations are not what is being compared
        vlfair.embed_images(encoder, paths[:batch_size], batch_size=batch_size, num_workers=workers,
                            cache_dir=None, progress=False)
        # (a) and (b) in turn, best of --repeats each: a 2-core machine's speed drifts by a third within a minute,
        # so one of each, seconds apart, compared the machine's moods (0.79-1.13 in three runs of --quick)
        vlfair_s, forward_s = float("inf"), float("inf")
        for repeat in range(args.repeats):
            cache = tmp_path / f"cache-{repeat}"  # a new one each time: (a) writes it, (d) reads the last
            seconds, embeddings = time_vlfair(encoder, paths, batch_size, workers, cache)
            vlfair_s, forward_s = min(vlfair_s, seconds), min(forward_s, time_raw_forward(encoder, num_images,
                                                                                            batch_size))
        # as written by hand: from_pretrained's default float32; and in vlfair's dtype for comparison
        naive_s = time_naive(checkpoint, paths[:naive_images], encoder.device, torch.float32)
        naive_same_s = time_naive(checkpoint, paths[:naive_images], encoder.device, encoder.dtype)
        cached_s, cached = time_vlfair(encoder, paths, batch_size, workers, cache)
        assert np.array_equal(cached, embeddings)
        ceiling = decode_ceiling(paths, encoder.preprocessing, available_cpus())

    rates = {"vlfair": num_images / vlfair_s, "forward": num_images / forward_s, "naive": naive_images / naive_s,
             "naive_same": naive_images / naive_same_s}
    dtype = str(encoder.dtype).removeprefix("torch.")
    print(f"(a) vlfair end to end : {rates['vlfair']:9.1f} img/s  ({vlfair_s:.2f} s for {num_images}, best of "
          f"{args.repeats})")
    print(f"(b) raw model forward : {rates['forward']:9.1f} img/s  ({forward_s:.2f} s, best of {args.repeats})")
    print(f"(c) naive per-image   : {rates['naive']:9.1f} img/s  ({naive_s:.2f} s for {naive_images}; float32, "
          "from_pretrained's default)")
    print(f"    same, in {dtype:<9} : {rates['naive_same']:9.1f} img/s  -> vlfair / naive at equal dtype = "
          f"{rates['vlfair'] / rates['naive_same']:.2f}")
    print(f"(d) cached re-run     : {num_images / cached_s:9.1f} img/s  ({cached_s * 1000:.1f} ms)")
    print(f"(e) decode ceiling    : {ceiling:9.1f} img/s  ({available_cpus()} processes)")
    print(peak_memory())
    print(f"ratio_vs_forward={rates['vlfair'] / rates['forward']:.3f} "
          f"ratio_vs_naive={rates['vlfair'] / rates['naive']:.2f} cache_speedup={vlfair_s / cached_s:.0f} "
          f"ratio_vs_ceiling={rates['vlfair'] / min(rates['forward'], ceiling):.3f}")


if __name__ == "__main__":
    main()
