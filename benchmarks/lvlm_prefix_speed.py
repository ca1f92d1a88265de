"""Scoring candidate answers with a generative vision-language model: through the prompt's cache
against one full forward per (image, answer).

A tiny LLaVA (vlfair.tiny.tiny_llava: a CLIP vision tower, a Llama decoder; random weights), or another
family's tiny model (--family), scores 12 candidate answers of one to five tokens for each of --images
generated images, in one run:

  shared     GenerativeScorer.score: the image and question encoded once per image, the answers read
             on from its key-value cache, repeated over the batch of answers
  reference  GenerativeScorer.score_by_full_forward: image, question and answer encoded again for
             every answer
  dataset    vlfair.embed.score_answers over the same images as a dataset (no cache), --batch-size images
             in each forward: what a probe runs

and checks that all three give the same log-likelihoods. The last line:

  speedup_vs_full_forward=A shared_images_per_second=B max_abs_difference=C dataset_vs_loop=D
  dataset_max_abs_difference=E

with D = the dataset path's images/s over the loop of ``score`` (shared), E its largest difference from it.

Usage: python benchmarks/lvlm_prefix_speed.py [--family llava|idefics3|gemma3|qwen2_vl] [--images 20] [--hidden 64]
       [--layers 4] [--image-size 64] [--batch-size 32] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

ANSWERS = ["smart", "dumb", "a smart person", "a dumb person", "happy", "sad", "doctor", "nurse",
           "a photo of a nurse", "lawyer", "none of these", "scientist"]
QUESTION = "is this person smart or dumb ?"
FAMILIES = {"llava": "LLaVA", "idefics3": "Idefics3", "gemma3": "Gemma 3", "qwen2_vl": "Qwen2-VL"}  # vlfair.tiny


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", choices=sorted(FAMILIES), default="llava")
    parser.add_argument("--images", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32,
                        help="images per forward on the dataset path (default: score_answers' own)")
    parser.add_argument("--quick", action="store_true", help="4 images, the smallest model")
    args = parser.parse_args(argv)
    if min(args.images, args.batch_size) < 1:
        parser.error("--images and --batch-size must be at least 1")
    if args.quick:
        args.images, args.hidden, args.layers, args.image_size = 4, 32, 2, 32
    import torch

    from vlfair import tiny
    from vlfair.embed import score_answers
    from vlfair.models.lvlm import GenerativeScorer
    from vlfair.testing import qwen2_vl_processors_without_video

    with tempfile.TemporaryDirectory() as tmp, qwen2_vl_processors_without_video():  # Qwen2-VL: no torchvision
        build = getattr(tiny, f"tiny_{args.family}")
        path = build(Path(tmp) / args.family, image_size=args.image_size, hidden=args.hidden, layers=args.layers)
        scorer = GenerativeScorer.load(f"lvlm:{path}")
        images = [tiny.generated_image(i) for i in range(args.images)]
        print(f"tiny {FAMILIES[args.family]} (hidden {args.hidden}, {args.layers} layers, {args.image_size} px), "
              f"{args.images} images x {len(ANSWERS)} answers; {platform.processor() or platform.machine()}, "
              f"{os.cpu_count()} cores, torch threads {torch.get_num_threads()}")
        scorer.score(images[0], QUESTION, ANSWERS)  # warm-up: first calls allocate
        start = time.perf_counter()
        shared = [scorer.score(image, QUESTION, ANSWERS).log_likelihood for image in images]
        shared_seconds = time.perf_counter() - start
        start = time.perf_counter()
        full = [scorer.score_by_full_forward(image, QUESTION, ANSWERS).log_likelihood for image in images]
        full_seconds = time.perf_counter() - start
        score_answers(scorer, images[:args.batch_size], QUESTION, ANSWERS, cache_dir=None, progress=False,
                      batch_size=args.batch_size)  # warm-up of the batched shapes
        start = time.perf_counter()
        dataset = score_answers(scorer, images, QUESTION, ANSWERS, cache_dir=None, progress=False,
                                batch_size=args.batch_size).embeddings
        dataset_seconds = time.perf_counter() - start
    difference = float(np.max(np.abs(np.array(shared) - np.array(full))))
    dataset_difference = float(np.max(np.abs(np.array(shared) - dataset)))
    print(f"  shared prefix      {shared_seconds:7.2f} s  ({args.images / shared_seconds:.1f} images/s)")
    print(f"  full forward each  {full_seconds:7.2f} s  ({args.images / full_seconds:.1f} images/s)")
    print(f"  dataset, batch {args.batch_size:<3} {dataset_seconds:7.2f} s  "
          f"({args.images / dataset_seconds:.1f} images/s)")
    print(f"speedup_vs_full_forward={full_seconds / shared_seconds:.2f} "
          f"shared_images_per_second={args.images / shared_seconds:.2f} max_abs_difference={difference:.2e} "
          f"dataset_vs_loop={shared_seconds / dataset_seconds:.2f} dataset_max_abs_difference={dataset_difference:.2e}")


if __name__ == "__main__":
    main()
