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
  questions  the traits study's six pairs asked of the same images (2 answers each, "is this person X or
             Y ?", traits.yaml's generative question): vlfair.embed.score_questions, the prompts' shared
             opening (the image) encoded once for the six, against score_answers once per question

and checks that all paths give the same log-likelihoods. The last line:

  speedup_vs_full_forward=A shared_images_per_second=B max_abs_difference=C dataset_vs_loop=D
  dataset_max_abs_difference=E dataset_vs_ceiling=F questions_together_vs_apart=G questions_max_abs_difference=H
  processor_img_s=I ceiling_img_s=J dataset_img_s=K

with D = the dataset path's images/s over the loop of ``score`` (shared), E its largest difference from it,
F = the dataset path's images/s over the prefix ceiling: the prompt's forward alone (image and question)
on batches of the same size, its tensors prepared before the clock; G = the six questions' time apart over
their time together, H the largest difference between the two, I the rate of the processor alone (the prompts'
tensors made on the host, one thread: the dataset path makes the next batch's while this one runs), J and K the
ceiling's and the dataset path's images/s. On a GPU the model runs there in
vlfair's dtype (bf16); --hidden 2048 --layers 24 --heads 16 --image-size 336 --patch-size 14
--positions 1024 builds the LLaVA architecture at 1.8 B parameters (random weights).

Usage: python benchmarks/lvlm_prefix_speed.py [--family llava|idefics3|gemma3|qwen2_vl] [--images 20] [--hidden 64]
       [--layers 4] [--image-size 64] [--patch-size P] [--heads H] [--positions N] [--batch-size 32]
       [--skip-full] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ANSWERS = ["smart", "dumb", "a smart person", "a dumb person", "happy", "sad", "doctor", "nurse",
           "a photo of a nurse", "lawyer", "none of these", "scientist"]
QUESTION = "is this person smart or dumb ?"
PAIRS = [("smart", "dumb"), ("happy", "sad"), ("hardworking", "lazy"), ("nice", "mean"),  # the traits study's
         ("dominant", "agentic"), ("honest", "dishonest")]                                  # six pairs
FAMILIES = {"llava": "LLaVA", "idefics3": "Idefics3", "gemma3": "Gemma 3", "qwen2_vl": "Qwen2-VL"}  # vlfair.tiny


def _synchronized(device: Any) -> float:
    import torch

    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def prefix_ceiling(scorer: Any, images: list, batch_size: int) -> tuple[float, float]:
    """Images/s of the prompt's forward alone (image and question, no answer), ``batch_size`` images in each
    forward, their tensors prepared before the clock: no pipeline can score faster; and images/s of preparing
    those tensors (the processor, on the host, one thread): the rate the host alone would allow."""
    import torch

    prompt = scorer.prompt(QUESTION)
    start = _synchronized(scorer.device)
    batches = [scorer._batch_inputs(images[at:at + batch_size], prompt) for at in range(0, len(images), batch_size)]
    processor = len(images) / (_synchronized(scorer.device) - start)
    if any(batch is None for batch in batches):
        raise SystemExit("lvlm_prefix_speed.py: the prompts came out of different lengths; no ceiling to time")
    with torch.inference_mode():
        scorer.model(**batches[0])  # warm-up
        start = _synchronized(scorer.device)
        for batch in batches:
            scorer.model(**batch)
        return len(images) / (_synchronized(scorer.device) - start), processor


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", choices=sorted(FAMILIES), default="llava")
    parser.add_argument("--images", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--patch-size", type=int, help="llava only (default: the tiny model's)")
    parser.add_argument("--heads", type=int, help="llava only: attention heads (default: the tiny model's, 2)")
    parser.add_argument("--positions", type=int, help="llava only: the decoder's context (default 256)")
    parser.add_argument("--batch-size", type=int, default=32,
                        help="images per forward on the dataset path (default: score_answers' own)")
    parser.add_argument("--skip-full", action="store_true", help="leave out the full forward per answer (slow at size)")
    parser.add_argument("--quick", action="store_true", help="4 images, the smallest model")
    args = parser.parse_args(argv)
    if min(args.images, args.batch_size) < 1:
        parser.error("--images and --batch-size must be at least 1")
    if args.quick:
        args.images, args.hidden, args.layers, args.image_size = 4, 32, 2, 32
    import torch

    from vlfair import tiny
    from vlfair.embed import score_answers, score_questions
    from vlfair.models.base import pick_device, pick_dtype
    from vlfair.models.lvlm import GenerativeScorer
    from vlfair.testing import qwen2_vl_processors_without_video

    # a GPU where there is one, in the dtype vlfair picks there (bf16), as a user's run; float32 on a CPU
    device = pick_device("auto")
    dtype = pick_dtype("auto", device) if device.type == "cuda" else torch.float32
    sized = {key: value for key, value in (("patch_size", args.patch_size), ("heads", args.heads),
                                           ("positions", args.positions)) if value is not None}
    if sized and args.family != "llava":
        parser.error("--patch-size, --heads and --positions size the llava family only")
    with tempfile.TemporaryDirectory() as tmp, qwen2_vl_processors_without_video():  # Qwen2-VL: no torchvision
        build = getattr(tiny, f"tiny_{args.family}")
        path = build(Path(tmp) / args.family, image_size=args.image_size, hidden=args.hidden, layers=args.layers,
                     **sized)
        scorer = GenerativeScorer.load(f"lvlm:{path}", dtype=dtype, device=device)
        parameters = sum(p.numel() for p in scorer.model.parameters())
        images = [tiny.generated_image(i) for i in range(args.images)]
        print(f"tiny {FAMILIES[args.family]} (hidden {args.hidden}, {args.layers} layers, {args.image_size} px, "
              f"{parameters / 1e6:,.1f} M parameters), {args.images} images x {len(ANSWERS)} answers; "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads "
              f"{torch.get_num_threads()}, {device} {str(dtype).removeprefix('torch.')}")
        scorer.score(images[0], QUESTION, ANSWERS)  # warm-up: first calls allocate
        start = _synchronized(device)
        shared = [scorer.score(image, QUESTION, ANSWERS).log_likelihood for image in images]
        shared_seconds = _synchronized(device) - start
        full_seconds, full = float("nan"), shared
        if not args.skip_full:
            start = _synchronized(device)
            full = [scorer.score_by_full_forward(image, QUESTION, ANSWERS).log_likelihood for image in images]
            full_seconds = _synchronized(device) - start
        score_answers(scorer, images[:args.batch_size], QUESTION, ANSWERS, cache_dir=None, progress=False,
                      batch_size=args.batch_size)  # warm-up of the batched shapes
        start = _synchronized(device)
        dataset = score_answers(scorer, images, QUESTION, ANSWERS, cache_dir=None, progress=False,
                                batch_size=args.batch_size).scores
        dataset_seconds = _synchronized(device) - start
        ceiling, processor = prefix_ceiling(scorer, images, args.batch_size)
        asks = [(f"is this person {a} or {b} ?", [a, b]) for a, b in PAIRS]
        start = _synchronized(device)
        apart = [score_answers(scorer, images, question, answers, cache_dir=None, progress=False,
                               batch_size=args.batch_size).scores for question, answers in asks]
        apart_seconds = _synchronized(device) - start
        start = _synchronized(device)
        together = [found.scores for found in score_questions(scorer, images, asks, cache_dir=None,
                                                              progress=False, batch_size=args.batch_size)]
        together_seconds = _synchronized(device) - start
    questions_difference = max(float(np.max(np.abs(a - b))) for a, b in zip(apart, together))
    difference = float(np.max(np.abs(np.array(shared) - np.array(full))))
    dataset_difference = float(np.max(np.abs(np.array(shared) - dataset)))
    dataset_rate = args.images / dataset_seconds
    print(f"  shared prefix      {shared_seconds:7.2f} s  ({args.images / shared_seconds:.1f} images/s)")
    full_rate = f"{full_seconds:7.2f} s  ({args.images / full_seconds:.1f} images/s)"
    print(f"  full forward each  {'skipped (--skip-full)' if args.skip_full else full_rate}")
    print(f"  dataset, batch {args.batch_size:<3} {dataset_seconds:7.2f} s  ({dataset_rate:.1f} images/s)")
    print(f"  prefix ceiling     {ceiling:.1f} images/s (the prompt's forward alone, batch {args.batch_size})")
    print(f"  prompts made       {processor:.1f} images/s (the processor alone, on the host)")
    print(f"  6 questions apart  {apart_seconds:7.2f} s  ({args.images / apart_seconds:.1f} images/s)")
    print(f"  6 asked together   {together_seconds:7.2f} s  ({args.images / together_seconds:.1f} images/s)")
    print(f"speedup_vs_full_forward={full_seconds / shared_seconds:.2f} "
          f"shared_images_per_second={args.images / shared_seconds:.2f} max_abs_difference={difference:.2e} "
          f"dataset_vs_loop={shared_seconds / dataset_seconds:.2f} dataset_max_abs_difference={dataset_difference:.2e} "
          f"dataset_vs_ceiling={dataset_rate / ceiling:.2f} questions_together_vs_apart="
          f"{apart_seconds / together_seconds:.2f} questions_max_abs_difference={questions_difference:.2e} "
          f"processor_img_s={processor:.1f} ceiling_img_s={ceiling:.1f} dataset_img_s={dataset_rate:.1f}")


if __name__ == "__main__":
    main()
