"""What tests/test_torchrun.py runs under ``torchrun --nproc_per_node 2``: the multi-process scenarios
named (all of them by default), one after the other in the same process group, as a user's script that
calls vlfair several times would (each launch costs two interpreters importing torch and transformers,
~10 s of the suite's 2 cores apiece: the tests make two launches, each under 30 s).

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/torchrun_scenarios.py CONFIG.json [NAME...]

CONFIG names the inputs the test prepared (``clip``, ``llava``, ``paths``, ``out``). Each scenario
writes into ``out/<scenario>/``: its results, what each process printed (``stdout-<rank>.txt``) and,
where it raised, the traceback (``error-<rank>.txt``), so that one broken scenario fails its own test
and the others still run. Not collected by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch.distributed as dist

RANK = os.environ["RANK"]
CONFIG = json.loads(Path(sys.argv[1]).read_text())
OUT = Path(CONFIG["out"])

# registered first, so run last at exit: is the group vlfair formed closed by then?
atexit.register(lambda: (OUT / f"closed{RANK}").write_text(str(not dist.is_initialized())))

SCENARIOS: dict[str, Callable[[Path], None]] = {}


def scenario(function: Callable[[Path], None]) -> Callable[[Path], None]:
    SCENARIOS[function.__name__.replace("_", "-")] = function
    return function


def cli(*argv: str) -> None:
    """``vlfair ...`` as ``python -m vlfair`` runs it; a status other than 0 is this scenario's error."""
    from vlfair.cli import main

    code = main(list(argv))
    if code != 0:
        raise SystemExit(f"vlfair {' '.join(argv)}: exit status {code}")


@scenario
def embed(out: Path) -> None:
    """Uneven shares, an unreadable row in the second process's share, a cache the main process writes."""
    import vlfair

    encoder = vlfair.load_encoder(CONFIG["clip"], dtype="float32")
    seen = []
    original = encoder.encode_pixels

    def spy(batch, normalize=True):
        seen.append(batch.shape[0])
        return original(batch, normalize)

    encoder.encode_pixels = spy
    paths = CONFIG["paths"]
    result = vlfair.embed_images(encoder, paths, cache_dir=out / "cache", chunk_size=8, batch_size=3,
                                 on_bad_image="skip", progress=False)
    saved = {"all": result.embeddings, "all_skipped": np.array(result.skipped_rows), "work": np.array(sum(seen)),
             "world_size": np.array(dist.get_world_size())}
    # uneven shares: the last chunk holds one row, the second process none; then a dataset of one row
    for name, rows in [("last_chunk_of_one", paths[:33]), ("one_row", paths[:1])]:
        saved[name] = vlfair.embed_images(encoder, rows, cache_dir=None, chunk_size=8, batch_size=3,
                                          on_bad_image="skip", progress=False).embeddings
    try:  # the unreadable row is the second process's: every process must stop at it, none hang
        vlfair.embed_images(encoder, paths, cache_dir=None, chunk_size=8, batch_size=3, progress=False)
    except vlfair.BadImageError as exc:
        saved["error_row"] = np.array(exc.row)
    np.savez(out / f"rank{RANK}.npz", **saved)


@scenario
def professions(out: Path) -> None:
    cli("run", "professions", "--model", CONFIG["clip"], "--dataset", "synthetic:professions",
        *CONFIG["professions_options"], "--cache-dir", str(out / "cache"), "--out", str(out / "run"))


@scenario
def retrieval(out: Path) -> None:
    """Both embeddings (normalised, and the raw features DVL ranks by) computed by two processes."""
    cli("run", "retrieval", "--model", CONFIG["clip"], "--dataset", "synthetic:fairface", *CONFIG["retrieval_options"],
        "--cache-dir", str(out / "cache"), "--out", str(out / "run"))


@scenario
def generative_professions(out: Path) -> None:
    """Each process asks its share of every chunk's images."""
    cli("run", "professions", "--model", f"lvlm:{CONFIG['llava']}", "--dataset", "synthetic:professions",
        *CONFIG["generative_options"], "--cache-dir", str(out / "cache"), "--out", str(out / "run"))


@scenario
def generation(out: Path) -> None:
    """Text-to-image generation split over the processes; every process reads every image back."""
    from PIL import Image

    from vlfair.t2i.generators import CallableGenerator, ImageCache

    calls: list[str] = []

    def generate(prompts, seeds):
        calls.extend(prompts)
        return [Image.new("RGB", (4, 4), (s % 256, 0, 0)) for s in seeds]

    cache = ImageCache(CallableGenerator(generate, "sharded"), out / "cache")
    if RANK == "0":  # the main process arrives late (as after writing a run's report): the other one has
        time.sleep(1)  # written its share by then, and the two must still agree on what was missing
    images = cache.images([(f"prompt {i}", j) for i in range(5) for j in range(4)])
    (out / f"{RANK}.json").write_text(json.dumps({"calls": len(calls), "first": images[0].getpixel((0, 0))[0]}))


@scenario
def refused_row(out: Path) -> None:
    """An image processor refuses row 3 (the second process's share): both processes raise it.
    Last: it patches the processor classes for the rest of the process."""
    from transformers import CLIPImageProcessor, CLIPImageProcessorPil

    from vlfair.embed import score_answers
    from vlfair.imageio import RejectedImageError
    from vlfair.models.lvlm import GenerativeScorer
    from vlfair.tiny import generated_image

    images = [generated_image(i) for i in range(6)]
    refused = np.asarray(images[3]).tobytes()
    for processor_class in {CLIPImageProcessor, CLIPImageProcessorPil}:
        def preprocess(self, images, *args, _original=processor_class.preprocess, **kwargs):
            given = images if isinstance(images, list) else [images]
            if any(np.asarray(image).tobytes() == refused for image in given):
                raise ValueError("this image processor takes no such image")
            return _original(self, images, *args, **kwargs)
        processor_class.preprocess = preprocess
    scorer = GenerativeScorer.load(f"lvlm:{CONFIG['llava']}")
    try:
        score_answers(scorer, {"image": images}, "who is this ?", ["a man"], cache_dir=out / "cache", chunk_size=6,
                      progress=False)
    except RejectedImageError as exc:  # each process says what it raised
        (out / f"refused-by-{RANK}").write_text(str(exc.row))


def run(name: str) -> None:
    out = OUT / name
    out.mkdir(parents=True, exist_ok=True)
    with open(out / f"stdout-{RANK}.txt", "w") as printed, contextlib.redirect_stdout(printed):
        try:
            SCENARIOS[name](out)
        except BaseException:  # noqa: BLE001 (SystemExit included: the test reads why)
            (out / f"error-{RANK}.txt").write_text(traceback.format_exc())


if __name__ == "__main__":
    for name in sys.argv[2:] or SCENARIOS:
        run(name)
