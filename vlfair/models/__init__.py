"""Encoders: one interface (:class:`Encoder`), one module per backend, a registry of spec prefixes.

Adding a backend is one module with a ``load_<name>(ref, **options)`` function plus one line below
(:data:`BACKENDS`, a :class:`vlfair.registry.Registry` of loaders: a lazy entry, ``"module:function"``,
imports its module only when a spec names its prefix), or ``register_backend`` from another package.

Importing this package imports no torch (the classes are resolved when first read): ``vlfair run --help``
lists the registered prefixes from :data:`BACKENDS` without loading a model library.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vlfair._lazy import lazy_getattr
from vlfair.models.hub import ModelNotFoundError, is_local_directory, refusing_remote_code
from vlfair.registry import Registry

if TYPE_CHECKING:  # the lazy names' types ("x as x": a re-export)
    import torch

    from vlfair.models.base import Encoder as Encoder
    from vlfair.models.hf import HFEncoder as HFEncoder
    from vlfair.models.mclip import MCLIPEncoder as MCLIPEncoder
    from vlfair.models.preprocessing import ImagePreprocessing as ImagePreprocessing
    from vlfair.models.preprocessing import UnsupportedPreprocessing as UnsupportedPreprocessing

__getattr__ = lazy_getattr(__name__, {"Encoder": ".base", "HFEncoder": ".hf", "MCLIPEncoder": ".mclip",
                                      "ImagePreprocessing": ".preprocessing",
                                      "UnsupportedPreprocessing": ".preprocessing"})

Loader = Callable[..., Any]  # loader(REF, **options) -> Encoder


def _is_loader(loader: Loader) -> None:
    if not callable(loader):
        raise TypeError(f"a model backend is a loader, loader(REF, **options) -> Encoder, not {loader!r}")


BACKENDS: Registry[Loader] = Registry("model backend", check=_is_loader)  # spec prefix -> loader
DEFAULT_BACKEND = "hf"  # bare Hub ids and local directories


def register_backend(prefix: str, loader: Loader) -> None:
    """Make ``"prefix:REF"`` specs load through ``loader(REF, **options)``.

    Args:
        prefix: the spec prefix, without the colon (``"mclip"``); an existing one is replaced.
        loader: called as ``loader(REF, device=, dtype=, revision=, trust_remote_code=,
            use_safetensors=, spec=)`` (the arguments of :func:`load_encoder`; ``spec`` is the
            whole spec) and returns an :class:`Encoder`.
    """
    BACKENDS.add(loader, prefix, replace=True)


# lazy, every one: a prefix's module (and torch, transformers) loads only when a spec names it
BACKENDS.lazy("hf", "vlfair.models.hf:load_hf")
BACKENDS.lazy("mclip", "vlfair.models.mclip:load_mclip")
BACKENDS.lazy("lvlm", "vlfair.models.lvlm:load_lvlm")


def backend_prefixes() -> list[str]:
    """Every registered spec prefix with its colon (``hf:``, ``lvlm:``, ``mclip:``, a plugin's), sorted."""
    return [f"{prefix}:" for prefix in sorted(BACKENDS.names())]


def parse_spec(spec: str) -> tuple[str, str]:
    """``"mclip:ID"`` -> ``("mclip", "ID")``; bare ids and directories go to the ``hf`` backend."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"a model spec must be a non-empty string, got {spec!r}")
    if is_local_directory(spec):  # never under hub_only: a Space's visitor never names a server folder
        return DEFAULT_BACKEND, spec
    prefix, sep, ref = spec.partition(":")
    if not sep:
        return DEFAULT_BACKEND, spec
    if prefix not in BACKENDS:
        raise ValueError(
            f"unknown model spec prefix {prefix!r} in {spec!r}; registered prefixes: " + ", ".join(backend_prefixes())
        )
    if not ref:
        raise ValueError(f"model spec {spec!r} names no model after '{prefix}:'")
    return prefix, ref


def load_encoder(spec: str, device: str | torch.device = "auto", dtype: str | torch.dtype = "auto",
                 revision: str | None = None, trust_remote_code: bool = False,
                 use_safetensors: bool = True, jpeg_draft: bool = False) -> Encoder:
    """Load a dual encoder from a spec.

    Args:
        spec: ``"hf:ID[@REV]"``, a bare Hub id, a local directory, or ``"mclip:TEXT[+IMAGE]"``.
        device: ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a torch device;
            one this machine or its PyTorch build lacks is refused before any weights load.
        dtype: ``"auto"`` (float32 on every CPU, whatever its instruction set; on a GPU bf16, float16
            where it has none, said in one info line), or a dtype such as ``"float32"`` for exact results
            (``"bfloat16"`` on a CPU only when asked).
        revision: a Hub revision; the same as ``@REV`` in the spec.
        trust_remote_code: run code shipped with the checkpoint. Never on unless you pass it.
        use_safetensors: refuse pickled weights (the default). ``False`` allows ``.bin`` files,
            read with ``torch.load(weights_only=True)``.
        jpeg_draft: decode a JPEG at least four times the model's input at a half, a quarter or an eighth of
            its size, never below twice the input (libjpeg's DCT scaling): decoding 1792x1344 photographs
            for ViT-B/32 ran 1.9x faster, and it moved their embeddings by 1 - cos ~ 6e-6 (docs/DESIGN.md: 15
            times what the choice between PIL's and torch's resize moves them, so it is not the default).

    Returns:
        The encoder, loaded by the backend its spec names.

    Raises:
        ValueError: unknown spec prefix (the message lists the registered ones), or a model
            that is not an image-text dual encoder (a generative one: the message says to write ``lvlm:``).
        vlfair.models.base.UnavailableDevice: a ``device`` this machine or its PyTorch build lacks (a
            ValueError), or one that names no device.
        ModelNotFoundError: not a directory, not cached, and the Hub is offline or unreachable.
    """
    from vlfair.models.base import checked_device

    prefix, ref = parse_spec(spec)
    if str(device) != "auto":  # refused before any backend reads a file or downloads weights
        checked_device(device)
    # every backend's loads (a plugin's too): a checkpoint that names its own code, refused by transformers
    # under trust_remote_code=False, is said in one line naming the model
    with refusing_remote_code(ref, "vlfair runs it only when asked: vlfair.load_encoder(..., trust_remote_code=True)"):
        encoder = BACKENDS.get(prefix)(ref, device=device, dtype=dtype, revision=revision,
                                   trust_remote_code=trust_remote_code, use_safetensors=use_safetensors, spec=spec)
    if jpeg_draft:  # the preprocessing is part of the cache key: these embeddings are cached apart
        encoder.preprocessing = dataclasses.replace(encoder.preprocessing, jpeg_draft=True)
    return encoder


__all__ = [
    "BACKENDS", "Encoder", "HFEncoder", "backend_prefixes", "MCLIPEncoder", "ImagePreprocessing", "ModelNotFoundError",
    "UnsupportedPreprocessing", "load_encoder", "parse_spec", "register_backend",
]
