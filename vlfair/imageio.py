"""Reading one image cell, whatever form the dataset stores it in.

A cell may be a decoded PIL image, an undecoded Hugging Face ``Image`` feature
(``{"bytes": ..., "path": ...}``), a file path, or an HWC uint8 array. Failures name the row
(and the path when there is one) so a user can find the bad file among millions.
"""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np
from PIL import Image


class BadImageError(ValueError):
    """An image that cannot be decoded (unreadable, truncated, not an image)."""

    def __init__(self, row: int, path: str | None, reason: str):
        self.row = row
        self.path = path
        self.reason = reason
        where = f"row {row}" + (f" ({path})" if path else "")
        super().__init__(f"{where}: cannot read image: {reason}")


def cell_path(value: Any) -> str | None:
    """The file path a cell refers to, if any (for error messages and fingerprints)."""
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    if isinstance(value, dict):
        return value.get("path")
    return getattr(value, "filename", None) or None


def to_rgb(image: Image.Image) -> Image.Image:
    """RGB with transparency composited onto white, as transformers' image processors do."""
    if "A" in image.getbands() or image.info.get("transparency") is not None:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image if image.mode == "RGB" else image.convert("RGB")


def _open(value: Any) -> Image.Image:
    if isinstance(value, Image.Image):
        return value
    if isinstance(value, dict):
        if value.get("bytes") is not None:
            return Image.open(io.BytesIO(value["bytes"]))
        if value.get("path"):
            return Image.open(value["path"])
        raise ValueError("image dict has neither 'bytes' nor 'path'")
    if isinstance(value, (str, os.PathLike)):
        return Image.open(value)
    if isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim in (2, 3):
        return Image.fromarray(value)
    raise TypeError(
        f"expected a PIL image, an {{'bytes', 'path'}} dict, a file path or a uint8 array, "
        f"got {type(value).__name__}"
    )


def load_rgb(value: Any, row: int) -> Image.Image:
    """Decode one cell fully (so truncation is detected here, not later) and convert to RGB.

    Raises:
        BadImageError: the cell cannot be decoded; names ``row`` and the path.
        TypeError: the cell is not an image-like value at all; names ``row``.
    """
    image = None
    try:
        image = _open(value)
        image.load()
        return to_rgb(image)
    except TypeError as exc:
        raise TypeError(f"row {row}: {exc}") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        if image is not None:  # a file it failed to decode stays open until closed (PIL keeps the handle)
            image.close()
        raise BadImageError(row, cell_path(value), f"{type(exc).__name__}: {exc}") from None


def image_problem(data: bytes) -> str | None:
    """What is wrong with ``data`` as an image ("empty (0 bytes)", "not a readable image (...)",
    "a decompression bomb (...)" over PIL's pixel limit), or None. Decodes it fully, as embedding will."""
    if not data:
        return "empty (0 bytes)"
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
    except Image.DecompressionBombError as exc:
        return f"a decompression bomb ({exc})"
    except (OSError, ValueError, SyntaxError) as exc:
        return f"not a readable image ({type(exc).__name__}: {exc})"
    return None
