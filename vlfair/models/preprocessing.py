"""Image preprocessing split into a CPU half (workers) and a device half.

The CPU half (decode, resize, center crop) yields uint8 HWC arrays, 4x smaller than float
tensors to move between processes and to the GPU; the device half (rescale, normalise) is a
fused multiply-add on the accelerator. Together they reproduce the model's transformers image
processor exactly: the geometry follows its PIL backend (same size rule, resampling filter and
crop/pad arithmetic), so the uint8 values are identical and only float rounding differs.

Reduced JPEG decoding (``load_encoder(..., jpeg_draft=True)``, off by default): a JPEG whose short side is
at least four times the resize's input is decoded at a half, a quarter or an eighth of its size
(libjpeg's DCT scaling, ``PIL.Image.draft``), never below twice the input (``DRAFT_MARGIN``), so the
resize still antialiases a reduction of at least 2. It moves embeddings about 15 times more than the
choice between PIL's and torch's antialiased bicubic resize does (``benchmarks/jpeg_draft.py``; the
numbers in benchmarks/README.md), so it is not the default (issue 44 asked for it where it moves them no
more than resizing already does); decoded down to the input itself, not twice it, they moved twice as far
again. Only JPEGs are reduced; other files and smaller JPEGs decode whole, the same pixels as without it.
The setting is part of the preprocessing's cache key only when on, so every cache written before it stays
valid.
"""

from __future__ import annotations

import dataclasses
from math import ceil
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from vlfair.imageio import load_rgb, to_rgb

if TYPE_CHECKING:  # torch is imported where it is used: the CPU half runs without it
    import torch


# With jpeg_draft, a JPEG is decoded at a reduced size no smaller than this many times the resize's input, so
# that the resize still antialiases a reduction of at least 2: decoded down to the input itself, the embeddings
# of 1792x1344 photographs (ViT-B/32, benchmarks/jpeg_draft.py) moved twice as far (1 - cos 1.1e-5, not 5.9e-6)
DRAFT_MARGIN = 2


class UnsupportedPreprocessing(ValueError):
    """The model's image processor does something the batched uint8 pipeline cannot express."""


@dataclasses.dataclass(frozen=True)
class ImagePreprocessing:
    """What is done to an image before the vision tower; part of every cache key.

    Attributes:
        resize: "shortest_edge" (keep aspect, shortest side = size[0]), "exact" (size = (h, w))
            or "none".
        size: see ``resize``.
        resample: PIL resampling filter id.
        crop: (height, width) of the center crop (zero-padded when the image is smaller), or None.
        scale, offset: pixel = uint8 * scale + offset.
        mean, std: per-channel normalisation applied after scaling (None: none).
        extra_std: a second division by std (EfficientNet/ALIGN ``include_top``), or None.
        jpeg_draft: a JPEG at least twice the size :meth:`smallest_decode` gives is decoded at a reduced
            size (``load_encoder(..., jpeg_draft=True)``; in the key only when on, so that every cache
            written before it stays valid).
    """

    resize: str
    size: tuple[int, ...]
    resample: int
    crop: tuple[int, int] | None
    scale: float
    offset: float
    mean: tuple[float, ...] | None
    std: tuple[float, ...] | None
    extra_std: tuple[float, ...] | None = None
    jpeg_draft: bool = False  # large JPEGs decoded at a reduced size (smallest_decode)

    @property
    def output_hw(self) -> tuple[int, int]:
        if self.crop is not None:
            return self.crop
        if self.resize == "exact":
            return (self.size[0], self.size[1])
        raise UnsupportedPreprocessing("images without a fixed output size cannot be batched")

    def key(self) -> dict[str, Any]:
        key = dataclasses.asdict(self)
        if not self.jpeg_draft:
            del key["jpeg_draft"]
        return key

    # ---- CPU half: runs in DataLoader workers -------------------------------------------
    def smallest_decode(self, width: int, height: int) -> tuple[int, int] | None:
        """The smallest (width, height) an image of ``width`` x ``height`` may be decoded at before the resize
        (:data:`DRAFT_MARGIN` times the resize's own input, the aspect ratio kept), or None: decode it whole."""
        if not self.jpeg_draft or self.resize == "none":
            return None
        # shortest_edge: the short side at its target; exact: each side at least the larger target side,
        # whichever way the EXIF orientation turns the picture afterwards
        side = self.size[0] if self.resize == "shortest_edge" else max(self.size)
        scale = DRAFT_MARGIN * side / min(width, height)
        return ceil(width * scale), ceil(height * scale)

    def load(self, value: Any, row: int) -> np.ndarray:
        """Decode one cell (:func:`vlfair.imageio.load_rgb`, at a reduced size where it can) and resize and crop
        it: the (H, W, 3) uint8 array the model's device half takes."""
        return self.to_uint8(load_rgb(value, row, self.smallest_decode))

    def to_uint8(self, image: Image.Image) -> np.ndarray:
        """Resize and crop one image; returns an (H, W, 3) uint8 array."""
        image = to_rgb(image)
        if self.resize == "shortest_edge":
            width, height = image.size
            short, long = (width, height) if width <= height else (height, width)
            new_long = int(self.size[0] * long / short)
            new_w, new_h = (self.size[0], new_long) if width <= height else (new_long, self.size[0])
            image = image.resize((new_w, new_h), resample=self.resample)
        elif self.resize == "exact":
            image = image.resize((self.size[1], self.size[0]), resample=self.resample)
        array = np.asarray(image)
        return _center_crop(array, self.crop) if self.crop is not None else array

    # ---- device half --------------------------------------------------------------------
    def affine(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Per-channel (gain, bias) with model input = uint8 * gain + bias.

        Rescale, offset, mean/std and ALIGN's second std division folded into one step, so the
        device does one fused multiply-add instead of five passes over the batch.
        """
        gain, bias = [], []
        for c in range(3):
            g, b = self.scale, self.offset
            if self.mean is not None and self.std is not None:  # set together
                g, b = g / self.std[c], (b - self.mean[c]) / self.std[c]
            if self.extra_std is not None:
                g, b = g / self.extra_std[c], b / self.extra_std[c]
            gain.append(g)
            bias.append(b)
        return tuple(gain), tuple(bias)

    def normalize(self, batch: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """(B, H, W, 3) uint8 on the device -> (B, 3, H, W) model input in ``dtype``.

        The result is a channels-last view (convolutions take it as is): no transpose copy.
        """
        import torch

        gain, bias = self.affine()
        # cast first, then in-place: a mixed uint8/float op takes PyTorch's slow casting path
        x = batch.to(torch.float32).mul_(batch.new_tensor(gain, dtype=torch.float32))
        x = x.add_(batch.new_tensor(bias, dtype=torch.float32))
        return x.to(dtype).permute(0, 3, 1, 2)

    @classmethod
    def from_image_processor(cls, processor: Any) -> ImagePreprocessing:
        """Read a transformers image processor's settings (PIL or torchvision backend)."""
        name = type(processor).__name__
        if getattr(processor, "do_pad", False):
            raise UnsupportedPreprocessing(f"{name} pads images (do_pad=True); not supported")
        size = _as_dict(getattr(processor, "size", None))
        dims: tuple[int, ...]
        if not getattr(processor, "do_resize", True):
            resize, dims = "none", ()
        elif size.get("shortest_edge") and not size.get("longest_edge"):
            resize, dims = "shortest_edge", (int(size["shortest_edge"]),)
        elif size.get("height") and size.get("width"):
            resize, dims = "exact", (int(size["height"]), int(size["width"]))
        else:
            raise UnsupportedPreprocessing(
                f"{name} resizes with size={size}; only shortest_edge or height/width are supported"
            )
        crop = None
        if getattr(processor, "do_center_crop", False):
            crop_size = _as_dict(processor.crop_size)
            crop = (int(crop_size["height"]), int(crop_size["width"]))
        do_rescale = getattr(processor, "do_rescale", True)
        scale = float(processor.rescale_factor) if do_rescale else 1.0
        offset = -1.0 if do_rescale and getattr(processor, "rescale_offset", False) else 0.0
        mean = std = None
        if getattr(processor, "do_normalize", False):
            mean, std = _triple(processor.image_mean), _triple(processor.image_std)
        extra = _triple(processor.image_std) if getattr(processor, "include_top", False) else None
        resample = getattr(processor, "resample", None)
        resample = int(resample) if resample is not None else int(Image.Resampling.BILINEAR)
        prep = cls(resize, dims, resample, crop, scale, offset, mean, std, extra)
        _ = prep.output_hw  # fail now, not in the middle of a run
        return prep


def _as_dict(size: Any) -> dict[str, Any]:
    if size is None:
        return {}
    if isinstance(size, dict):
        return size
    return {k: v for k, v in vars(size).items() if v is not None} if hasattr(size, "__dict__") else dict(size)


def _triple(value: Any) -> tuple[float, ...]:
    values = [float(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    return tuple(values * 3) if len(values) == 1 else tuple(values)


def _center_crop(array: np.ndarray, crop: tuple[int, int]) -> np.ndarray:
    """Center crop with zero padding, the same arithmetic as transformers' ``center_crop``."""
    height, width = array.shape[:2]
    crop_h, crop_w = crop
    top, left = (height - crop_h) // 2, (width - crop_w) // 2
    if top >= 0 and left >= 0:
        return array[top : top + crop_h, left : left + crop_w]
    new_h, new_w = max(crop_h, height), max(crop_w, width)
    padded = np.zeros((new_h, new_w, array.shape[2]), dtype=array.dtype)
    top_pad, left_pad = ceil((new_h - height) / 2), ceil((new_w - width) / 2)
    padded[top_pad : top_pad + height, left_pad : left_pad + width] = array
    top, left = top + top_pad, left + left_pad
    return padded[max(0, top) : min(new_h, top + crop_h), max(0, left) : min(new_w, left + crop_w)]
