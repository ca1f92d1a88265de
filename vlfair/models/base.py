"""The one interface every encoder backend implements.

A new backend is its module (``load_<name>``) and one ``register_backend`` line (or a call from the
user's own package); encoders are found by their spec's prefix, never by an if/elif chain.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from vlfair.logging import get_logger
from vlfair.models.precision import in_asked_precision
from vlfair.models.preprocessing import ImagePreprocessing

logger = get_logger(__name__)


class Encoder(abc.ABC):
    """A dual encoder: images and texts into one embedding space.

    Attributes:
        spec: the spec it was loaded from (``"hf:openai/clip-vit-base-patch32"``).
        revision: resolved commit hash for Hub models, a content fingerprint for local
            directories (so a retrained checkpoint never reuses stale cached embeddings).
        device, dtype: where and in which precision the towers run.
        preprocessing: the image preprocessing; part of every cache key.
        embedding_dim: size of the joint embedding.
        logit_scale: the model's temperature (100 for OpenAI CLIP).
        logit_bias: SigLIP's learned bias; None for softmax (CLIP-style) models.
        loss: "softmax" (probabilities compete across texts) or "sigmoid" (each image-text
            pair is an independent yes/no, as SigLIP was trained).
        display_name: what reports and boards call it, when the spec is a path a person cannot
            read (the demo world's "demo-world biased"); None: its spec.
    """

    display_name: str | None = None
    kind = "contrastive"  # a probe reads its embeddings (a generative model answers questions instead)
    spec: str
    revision: str | None
    device: torch.device
    dtype: torch.dtype
    preprocessing: ImagePreprocessing
    embedding_dim: int
    logit_scale: float
    logit_bias: float | None
    loss: str

    @abc.abstractmethod
    def image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Unnormalised image features from model-ready pixels (B, 3, H, W) on the device."""

    @abc.abstractmethod
    def text_features(self, texts: list[str]) -> torch.Tensor:
        """Unnormalised text features for one batch of strings."""

    @property
    @abc.abstractmethod
    def text_settings(self) -> dict[str, Any]:
        """Everything besides the weights that changes text features (tokenisation); cache key."""

    def identity(self) -> dict[str, Any]:
        """The fields that make two encoders produce the same embeddings."""
        return {
            "spec": self.spec,
            "revision": self.revision,
            "dtype": str(self.dtype).removeprefix("torch."),
            "preprocessing": self.preprocessing.key(),
            "text": self.text_settings,
        }

    # ---- images --------------------------------------------------------------------------
    @torch.inference_mode()
    @in_asked_precision
    def encode_pixels(self, batch: torch.Tensor, normalize: bool = True) -> torch.Tensor:
        """(B, H, W, 3) uint8 from ``preprocessing.to_uint8`` -> (B, D) float32 on the device."""
        batch = batch.to(self.device, non_blocking=True)
        features = self.image_features(self.preprocessing.normalize(batch, self.dtype)).float()
        return _l2(features) if normalize else features

    def encode_images(self, images: Sequence[Any], batch_size: int = 32,
                      normalize: bool = True) -> npt.NDArray[np.float32]:
        """Embed a small in-memory list of images (PIL, paths or byte dicts); no cache.

        For datasets use ``vlfair.embed_images``: workers, caching, sharding, bad-image policy.
        """
        out = []
        for start in range(0, len(images), batch_size):
            chunk = images[start : start + batch_size]
            arrays = [self.preprocessing.load(image, start + i) for i, image in enumerate(chunk)]
            out.append(self.encode_pixels(torch.from_numpy(np.stack(arrays)), normalize).cpu().numpy())
        return concat_rows(out, self.embedding_dim)

    # ---- texts ---------------------------------------------------------------------------
    @torch.inference_mode()
    @in_asked_precision
    def encode_texts(self, texts: Sequence[str], batch_size: int = 256,
                     normalize: bool = True) -> npt.NDArray[np.float32]:
        """Embed strings; float32 (M, D), L2-normalised unless ``normalize=False``."""
        if isinstance(texts, str):
            raise TypeError("encode_texts takes a list of strings, not one string")
        out = []
        for start in range(0, len(texts), batch_size):
            features = self.text_features(list(texts[start : start + batch_size])).float()
            out.append((_l2(features) if normalize else features).cpu().numpy())
        return concat_rows(out, self.embedding_dim)

    # ---- scores --------------------------------------------------------------------------
    def logits(self, image_embeds: npt.ArrayLike, text_embeds: npt.ArrayLike) -> npt.NDArray[np.floating]:
        """The model's own logits: scale * cos (+ bias); inputs are normalised embeddings."""
        logits = self.logit_scale * (np.asarray(image_embeds) @ np.asarray(text_embeds).T)
        return logits + self.logit_bias if self.logit_bias is not None else logits

    def probabilities(self, image_embeds: npt.ArrayLike, text_embeds: npt.ArrayLike) -> npt.NDArray[np.floating]:
        """P(text | image) as the model was trained to give it.

        Softmax models: a distribution over the given texts (rows sum to 1). Sigmoid models
        (SigLIP): an independent probability per pair; rows do not sum to 1.
        """
        logits = self.logits(image_embeds, text_embeds)
        if self.loss == "sigmoid":
            return 1.0 / (1.0 + np.exp(-logits))
        shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return shifted / shifted.sum(axis=-1, keepdims=True)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(spec={self.spec!r}, revision={self.revision!r}, "
            f"device={self.device}, dtype={self.dtype}, embedding_dim={self.embedding_dim})"
        )


def distinct_rows(*tensors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of a tokenized batch to run (the first of each distinct input, in the batch's order) and, for
    every row, which of them it is: texts a tokenizer reads as one input (two words it does not know, each its
    unknown token) are embedded once, so their embeddings are one bit pattern on every machine (a batch's rows
    may take different kernels, and 1e-7 apart two prompts no longer tie)."""
    keys = torch.cat([t.reshape(len(t), -1).to(torch.int64) for t in tensors], dim=1).cpu().numpy()
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # the distinct rows in the order they first come
    place = np.empty_like(order)
    place[order] = np.arange(order.size)
    return torch.from_numpy(first[order]), torch.from_numpy(place[inverse.reshape(-1)])


def _l2(features: torch.Tensor) -> torch.Tensor:
    return features / features.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def concat_rows(parts: list[np.ndarray], dim: int) -> npt.NDArray[np.float32]:
    """Stacked float32 rows; an empty (0, dim) array when there are none."""
    return np.concatenate(parts).astype(np.float32, copy=False) if parts else np.zeros((0, dim), np.float32)


class DeviceError(ValueError):
    """A launch whose processes cannot each have a GPU of their own."""


class UnavailableDevice(DeviceError):
    """A device asked for that this machine or its PyTorch build does not have, or a value that names no device:
    ``asked`` as given, ``reason`` what is wrong and what to give instead (the CLI says ``--device ASKED: REASON``)."""

    def __init__(self, asked: str, reason: str):
        super().__init__(f"device {asked!r}: {reason}")
        self.asked, self.reason = asked, reason


DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"  # what a device is given as (help texts and every refusal)


def _cuda_problem(device: torch.device) -> str | None:
    """Why ``device`` (cuda or cuda:N) cannot run here, or None. Asked before any tensor goes there: a CPU build
    of PyTorch otherwise fails at the model's first ``.to`` with "AssertionError: Torch not compiled with CUDA
    enabled", and a GPU index past the last one with "invalid device ordinal" mid-run."""
    if not torch.backends.cuda.is_built():
        return f"this PyTorch build has no CUDA (torch {torch.__version__}); use auto or cpu"
    if not torch.cuda.is_available():
        return ("no CUDA GPU is visible (no NVIDIA driver answers, or CUDA_VISIBLE_DEVICES hides them); "
                "use auto or cpu")
    gpus = torch.cuda.device_count()
    if device.index is not None and device.index >= gpus:
        return (f"this machine has {gpus} CUDA GPU{'s' if gpus != 1 else ''} (cuda:0"
                f"{f' to cuda:{gpus - 1}' if gpus > 1 else ''}); use auto, cpu, cuda or one of them")
    return None


# the device types vlfair runs on, each with why a device of it cannot run here (None: it can); another type
# torch knows (xpu, mps, meta...) is refused by name: the pipeline (page-locked buffers, dtypes, forked
# workers) was written and measured for these two
DEVICE_TYPES: dict[str, Callable[[torch.device], str | None]] = {"cpu": lambda device: None, "cuda": _cuda_problem}


def checked_device(device: str | torch.device) -> torch.device:
    """A device asked for (not ``auto``) as a ``torch.device``, checked against this machine and its PyTorch build.

    Raises:
        UnavailableDevice: a value that names no device (``gpu``), a type vlfair does not run on, CUDA on a
            build or machine without it, or a GPU index past the last one.
    """
    asked = str(device)
    try:
        chosen = device if isinstance(device, torch.device) else torch.device(asked.strip())
    except (RuntimeError, TypeError, ValueError):  # torch's "Expected one of cpu, cuda, ... device type"
        raise UnavailableDevice(asked, f"not a device; use {DEVICE_CHOICES}") from None
    problem = DEVICE_TYPES.get(chosen.type, lambda _: f"vlfair runs on the CPU or CUDA GPUs; use {DEVICE_CHOICES}")
    reason = problem(chosen)
    if reason is not None:
        raise UnavailableDevice(asked, reason)
    return chosen


def pick_device(device: str | torch.device) -> torch.device:
    """``auto``: this process's GPU (under torchrun or accelerate launch, the one its ``LOCAL_RANK`` names),
    else the CPU; any other value is :func:`checked_device`'s.

    Raises:
        DeviceError: more processes on this machine than it has GPUs: every process says so (the one
            without a GPU of its own would otherwise fail on a CUDA error, "invalid device ordinal").
        UnavailableDevice: a device this machine or its PyTorch build does not have (:func:`checked_device`).
    """
    if str(device) != "auto":
        return checked_device(device)
    if torch.cuda.is_available():
        gpus = torch.cuda.device_count()
        local_rank = int(os.environ["LOCAL_RANK"]) if "LOCAL_RANK" in os.environ else torch.cuda.current_device()
        processes = max(int(os.environ.get("LOCAL_WORLD_SIZE", "1")), local_rank + 1)  # on this machine
        if processes > gpus:
            raise DeviceError(
                f"this machine runs {processes} processes of this launch but has {gpus} "
                f"GPU{'s' if gpus != 1 else ''}: vlfair gives each process a GPU of its own. Start at most {gpus} "
                f"per machine (torchrun --nproc_per_node {gpus}), or run them all on the CPU "
                "(CUDA_VISIBLE_DEVICES= torchrun ...)")
        # one GPU per process under torchrun / accelerate launch
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
           "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


def cpu_has_native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """True where the CPU multiplies bf16 in hardware (x86 AVX512-BF16 / AMX, Arm BF16).

    Only there is bf16 faster than float32 (3.7x for ViT-B/32 on a 2-core Zen 4); elsewhere
    PyTorch emulates it. ``auto`` measures in float32 on every CPU all the same (:func:`pick_dtype`):
    this only says, at debug level, what ``dtype="bfloat16"`` would gain.
    """
    try:
        with open(cpuinfo) as handle:
            flags = set(handle.read().split())
    except OSError:
        return False
    return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def pick_dtype(dtype: str | torch.dtype, device: torch.device) -> torch.dtype:
    """``auto``: float32 on every CPU; on a GPU, bf16 (float16 where it has no bf16).

    A CPU measures in float32 whatever its instruction set: bf16 there (where AVX512-BF16 or AMX
    make it fast) gave F values 29 % apart from float32's on one traits run, so the same command
    would give other numbers on another CPU (issue 62); bf16 on a CPU is only ever asked for. A GPU
    runs the half precision models are run in there, said in one info line. Any other device:
    float32. An explicit dtype is taken as it is.
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        if device.type == "cuda":
            chosen = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
            # said: the same command measures in float32 on a CPU, and the two precisions' numbers differ
            logger.info(f"dtype auto on {device}: {str(chosen).removeprefix('torch.')}, as models are run on a GPU "
                        "(a CPU measures in float32; --dtype float32 measures so here)")
            return chosen
        if device.type == "cpu" and cpu_has_native_bf16():
            logger.debug("dtype auto on the CPU: float32 (this CPU multiplies bf16 natively: dtype bfloat16 "
                         "runs faster, with other numbers)")
        return torch.float32
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; use 'auto' or one of {sorted(_DTYPES)}") from None
