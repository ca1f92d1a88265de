"""Text-to-image generators and the image cache that makes re-runs and higher levels free.

Seeds are derived from (prompt, sample index, base seed), so the same prompt always gets the
same images, whichever variants and levels ask for it, and whatever order they are asked in.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from PIL import Image
from tqdm.auto import tqdm

from vlfair.cache import cache_root, write_or_warn
from vlfair.distributed import current_world
from vlfair.logging import library_progress_bars, progress_bars_enabled


class Generator(Protocol):
    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Image.Image]:
        """One image per (prompt, seed) pair."""

    def identity(self) -> dict[str, Any]:
        """Everything that changes the images besides prompt and seed (cache key)."""


def generator_dtype(dtype: str, device: Any) -> Any:
    """A diffusion pipeline's precision: on a GPU bf16 (``auto``, where it has bf16) or float16; on a CPU
    float32, or bf16 where asked (issue 62: a CPU's precision is the user's, never its instruction set's).
    float16 on a CPU is refused: its convolutions are missing or emulated there."""
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        return torch.bfloat16 if dtype in ("auto", "bfloat16") and torch.cuda.is_bf16_supported() else torch.float16
    if dtype == "float16":
        raise ValueError(f"generator dtype float16 on the {device}: a CPU runs diffusion in float32 (auto) or "
                         "bfloat16; use a GPU for float16")
    return torch.bfloat16 if dtype == "bfloat16" else torch.float32


class DiffusersGenerator:
    """Any diffusers text-to-image pipeline (default CompVis/stable-diffusion-v1-4)."""

    def __init__(self, spec: str = "CompVis/stable-diffusion-v1-4", steps: int = 50, guidance: float = 7.5,
                 size: int | None = None, batch_size: int = 8, device: str = "auto", dtype: str = "auto",
                 use_safetensors: bool = True):
        from diffusers import DiffusionPipeline

        from vlfair.models.base import pick_device
        from vlfair.models.hub import resolve_model

        self.device = pick_device(device)
        self.dtype = generator_dtype(dtype, self.device)
        resolved = resolve_model(spec, use_safetensors=use_safetensors)
        self.spec, self.revision = spec, resolved.revision
        # "Loading pipeline components", and transformers' "Loading weights" of its text encoder: --verbose only
        with library_progress_bars("diffusers.utils.logging", "transformers.utils.logging"):
            self.pipeline = DiffusionPipeline.from_pretrained(resolved.path, dtype=self.dtype,
                                                              use_safetensors=use_safetensors,
                                                              trust_remote_code=False).to(self.device)
        if hasattr(self.pipeline, "set_progress_bar_config"):
            self.pipeline.set_progress_bar_config(disable=True)
        self.steps, self.guidance, self.size, self.batch_size = steps, guidance, size, batch_size

    def identity(self) -> dict[str, Any]:
        return {"pipeline": self.spec, "revision": self.revision, "steps": self.steps, "guidance": self.guidance,
                "size": self.size, "dtype": str(self.dtype)}

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Image.Image]:
        import torch

        images = []
        for start in range(0, len(prompts), self.batch_size):
            chunk_prompts = list(prompts[start:start + self.batch_size])
            generators = [torch.Generator(device="cpu").manual_seed(int(s))
                          for s in seeds[start:start + self.batch_size]]
            size = {"height": self.size, "width": self.size} if self.size else {}
            out = self.pipeline(chunk_prompts, num_inference_steps=self.steps, guidance_scale=self.guidance,
                                generator=generators, **size)
            images.extend(out.images)
        return images


class CallableGenerator:
    """Any other generator: ``fn(prompts, seeds) -> images``; ``name`` identifies it in the cache."""

    def __init__(self, fn: Callable[[Sequence[str], Sequence[int]], list[Image.Image]], name: str):
        self.fn, self.name = fn, name

    def identity(self) -> dict[str, Any]:
        return {"callable": self.name}

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Image.Image]:
        return list(self.fn(prompts, seeds))


def sample_seed(prompt: str, index: int, base_seed: int) -> int:
    digest = hashlib.sha256(f"{prompt}\0{index}\0{base_seed}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


class ImageCache:
    """Generated images on disk, keyed by (generator identity, prompt, seed); counts real calls."""

    def __init__(self, generator: Generator, cache_dir: str | os.PathLike | None = "default", base_seed: int = 0):
        self.generator, self.base_seed = generator, base_seed
        root = cache_root(cache_dir)
        key = hashlib.sha256(json.dumps(generator.identity(), sort_keys=True, default=str).encode()).hexdigest()
        self.directory = root / "t2i" / key[:2] / key if root is not None else None
        self.memory: dict[tuple[str, int], Image.Image] = {}
        self.calls = 0  # images the generator actually produced in this process

    def _path(self, prompt: str, seed: int) -> Path:
        assert self.directory is not None, "an image cache without a directory has no files"  # callers check first
        name = hashlib.sha256(f"{prompt}\0{seed}".encode()).hexdigest()
        return self.directory / name[:2] / f"{name}.png"

    def _cached(self, prompt: str, seed: int) -> Image.Image | None:
        if (prompt, seed) in self.memory:
            return self.memory[(prompt, seed)]
        if self.directory is not None and self._path(prompt, seed).exists():
            image = Image.open(self._path(prompt, seed))
            image.load()
            return image
        return None

    def images(self, requests: Sequence[tuple[str, int]]) -> list[Image.Image]:
        """Images for (prompt, sample index) pairs; missing ones are generated (sharded over processes)."""
        keyed = [(prompt, sample_seed(prompt, index, self.base_seed)) for prompt, index in requests]
        world = current_world()
        if world.size > 1 and self.directory is None:
            raise ValueError("generating under several processes needs an image cache directory to share the images")
        # the main process's list: a process that arrives later (the main one writes the reports) would
        # find the others' images already cached and split a shorter list, leaving images to no one
        missing = world.broadcast(sorted({k for k in keyed if self._cached(*k) is None}))
        mine = world.split(missing)  # Accelerate's split_between_processes, as embedding shares its rows
        # generation is the long step: a bar with its ETA (the main process's share: every process
        # gets an equal share, and one bar is what a person reads), images saved as each batch is done
        batch = max(1, int(getattr(self.generator, "batch_size", 8)))
        shown = bool(mine) and world.is_main and progress_bars_enabled()
        with tqdm(total=len(mine), desc="generating images", unit="img", disable=not shown) as bar:
            for start in range(0, len(mine), batch):
                chunk = mine[start:start + batch]
                generated = self.generator.generate([p for p, _ in chunk], [s for _, s in chunk])
                self.calls += len(generated)
                for (prompt, seed), image in zip(chunk, generated):
                    self.memory[(prompt, seed)] = image
                    if self.directory is not None and not write_or_warn(
                            self._path(prompt, seed), functools.partial(image.save, format="PNG")):
                        if world.size > 1:  # the other processes read this image from the cache
                            raise OSError(f"cannot write the image cache {self.directory}, which the processes "
                                          "share their images through")
                        self.directory = None  # the images stay in memory: the run goes on without the cache
                bar.update(len(chunk))
        world.barrier()  # every process sees every image once all are written
        # each one is in memory or on disk now (generated here or by another process)
        return cast(list[Image.Image], [self._cached(*k) for k in keyed])
