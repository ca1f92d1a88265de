"""Reading one image cell, whatever form the dataset stores it in.

A cell may be a decoded PIL image, an undecoded Hugging Face ``Image`` feature
(``{"bytes": ..., "path": ...}``), a file path, or an HWC uint8 array. Failures name the row
(and the path when there is one) so a user can find the bad file among millions.

Every image is decoded one way (:func:`decode`), in runs, in ``prepare``'s check and in the demo Space's
upload check, so what passes a check is what a run embeds:

- Its shape is checked from the header first: more elongated than ``MAX_ASPECT_RATIO`` = 100:1 is refused
  (an encoder scales the short side to its input size, so a 2 KB strip of 2,000,000 x 1 pixels would
  become 448,000,000 x 224), by row and file.
- EXIF orientation is applied (``ImageOps.exif_transpose``), as ``datasets``' Image feature and every
  viewer do.
- 16-bit greyscale (``I;16``, ``I;16B``, ...) is scaled by its bit depth (65535 -> 255); a 32-bit integer
  (``I``) or float (``F``) image, which declares no range, keeps its values where they are 8-bit ones
  already (0-255, as PIL reads them), a float image in 0-1 is read as fractions of white, and any other has
  its own min-max range scaled to 0-255 in float64 (PIL, and so transformers' image processors, clip them:
  16-bit pictures came out white, float ones black); a float image with NaN or infinite pixels is refused.
- Transparency is composited onto white; a mode PIL cannot convert is refused by name.
- ``prepare`` reads an image whole, so a file above 512 MiB is a bad row, and a zip member is judged by the
  size it declares (and, above 1 MiB, by its ratio: more than 100 times its packed size is a decompression
  bomb) before a byte of it is unpacked.

The rules carry a version, ``DECODING`` (now 2), part of the image cache key (:mod:`vlfair.cache`).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import ExifTags, Image, ImageOps

# What decoding does to a file, part of every image cache key: embeddings cached under other rules
# are of other pictures. 2: EXIF orientation applied; 16-bit, 32-bit and float greyscale scaled, not clipped.
DECODING = 2
# Encoders scale an image's short side to their input size (224-448 pixels), so a long thin image
# grows to input size x aspect ratio: a 2,000,000 x 1 strip of 2 KB would need 10^11 pixels. Real
# photographs, panoramas included, stay far below this ratio.
MAX_ASPECT_RATIO = 100
_TYPICAL_INPUT = 224  # the example in the message
# Greyscale modes PIL converts to 8 bits by clipping, not scaling (16-bit would come out white):
# vlfair scales them itself (to_rgb)
_WIDE_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I", "F")
# Formats PIL names apart that are one file type to the person who has the file: an MPO (a multi-picture
# JPEG, which many phone cameras write) is a JPEG whose first frame is the photograph, and PIL opens it at
# that frame, as it opens every JPEG
FILE_TYPES = {"MPO": "JPEG"}


def file_type(image: Image.Image) -> str | None:
    """The file type of an opened image as its owner calls it: PIL's format, an MPO named as the JPEG it is
    (what a check of file types compares, so a camera's JPEG is never refused as another type)."""
    return FILE_TYPES.get(image.format or "", image.format)


class UnusableImage(ValueError):
    """An image that decodes but cannot be embedded faithfully; ``problem`` says why, phrased to
    follow "the image is" ("too elongated (...)", "in mode LAB, which ...")."""

    def __init__(self, problem: str):
        self.problem = problem
        super().__init__(problem)


class BadImageError(ValueError):
    """An image that cannot be decoded (unreadable, truncated, not an image) or embedded (too elongated,
    a mode that cannot be converted to RGB)."""

    def __init__(self, row: int, path: str | None, reason: str):
        self.row = row
        self.path = path
        self.reason = reason
        where = f"row {row}" + (f" ({path})" if path else "")
        super().__init__(f"{where}: cannot read image: {reason}")


class RejectedImageError(ValueError):
    """A decoded image that a model's own preprocessing refuses (a generative model's processor): the
    run stops there and the message names the row; the chunks already scored stay cached.

    Raised without a row by the model, and again with one by the loop over the dataset (``at``)."""

    def __init__(self, reason: str, row: int | None = None, path: str | None = None):
        self.reason, self.row, self.path = reason, row, path
        where = "" if row is None else f"row {row}" + (f" ({path})" if path else "") + ": "
        super().__init__(where + reason)

    def __reduce__(self) -> tuple:  # whole across processes (torchrun gathers it): row and path kept
        return (RejectedImageError, (self.reason, self.row, self.path))

    def at(self, row: int, path: str | None = None) -> RejectedImageError:
        """The same refusal, of ``row`` (a subset's row renamed as the dataset's)."""
        return RejectedImageError(self.reason, row, path or self.path)


def cell_path(value: Any) -> str | None:
    """The file path a cell refers to, if any (for error messages and fingerprints)."""
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    if isinstance(value, dict):
        return value.get("path")
    return getattr(value, "filename", None) or None


def shape_problem(width: int, height: int) -> str | None:
    """Why an image of ``width`` x ``height`` cannot be embedded (no pixels, or so elongated that the
    encoder's resize would exhaust memory), or None. Checked from the header, before decoding."""
    short, long = sorted((width, height))
    if short < 1:
        return f"without pixels ({width}x{height})"
    if long > MAX_ASPECT_RATIO * short:
        grown = _TYPICAL_INPUT * long // short
        return (f"too elongated ({width}x{height} pixels, aspect ratio {long / short:,.0f}:1; at most "
                f"{MAX_ASPECT_RATIO}:1): an encoder scales the short side to its input size, so at "
                f"{_TYPICAL_INPUT} pixels it would become {grown:,}x{_TYPICAL_INPUT} pixels")
    return None


def upright(image: Image.Image) -> Image.Image:
    """The picture as it is meant to be seen: its EXIF orientation applied, as ``datasets``' Image
    feature decodes it (and as every viewer shows it), so vlfair embeds the picture datasets shows."""
    if image.getexif().get(ExifTags.Base.Orientation) is not None:
        return ImageOps.exif_transpose(image)
    return image


def to_rgb(image: Image.Image) -> Image.Image:
    """RGB with transparency composited onto white, as transformers' image processors do.

    16-bit greyscale (``I;16``, ``I;16B``, ...) is scaled by its bit depth (65535 -> 255); 32-bit
    integer (``I``) and float (``F``) images, which declare no range, have their own range (min to
    max) scaled to 0-255. PIL (and so transformers) would clip those to 0-255: 16-bit pictures
    came out white, float ones black.

    Raises:
        UnusableImage: a float image with NaN or infinite pixels, or a mode PIL cannot convert.
    """
    if image.mode in _WIDE_MODES:
        image = _to_8bit(image)
    elif image.mode == "La":  # premultiplied grey + alpha (in-memory only): PIL converts it to LA alone
        image = image.convert("LA")
    try:
        if image.has_transparency_data:  # an alpha band, a palette with alpha, or a transparent colour
            rgba = image.convert("RGBA")
            background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
            return Image.alpha_composite(background, rgba).convert("RGB")
        return image if image.mode == "RGB" else image.convert("RGB")
    except ValueError:
        raise UnusableImage(f"in mode {image.mode}, which vlfair cannot convert to RGB") from None


def _to_8bit(image: Image.Image) -> Image.Image:
    """A 16-bit, 32-bit or float greyscale image as 8-bit "L" (or "LA" where one value is transparent)."""
    pixels = np.asarray(image)
    if image.mode.startswith("I;16"):  # the bit depth: 0-65535 -> 0-255, rounded
        grey = ((pixels.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)
    else:
        values = pixels.astype(np.float64)  # float32 would overflow on a float image near its range's ends
        if not np.isfinite(values).all():
            raise UnusableImage(f"a float image (mode {image.mode}) with NaN or infinite pixels")
        low, high = float(values.min()), float(values.max())
        if image.mode == "F" and low >= 0 and high <= 1:  # a float image in the unit range: as a fraction of white
            grey = np.rint(values * 255).astype(np.uint8)
        elif low >= 0 and high <= 255 or high == low:  # 8-bit values already (or one value): PIL's own reading
            return image.convert("L")
        else:  # no declared range: its own range, low to high, becomes black to white
            grey = np.rint((values - low) * (255 / (high - low))).astype(np.uint8)
    converted = Image.fromarray(grey)
    transparent = image.info.get("transparency")
    if isinstance(transparent, (int, float)):  # PNG's tRNS: one grey value, at the image's own depth
        alpha = Image.fromarray(np.where(pixels == transparent, 0, 255).astype(np.uint8))
        converted = Image.merge("LA", (converted, alpha))
    return converted


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


def decode(image: Image.Image, smallest: Callable[[int, int], tuple[int, int] | None] | None = None) -> Image.Image:
    """An opened image as the RGB picture it shows: its size checked from the header
    (:func:`shape_problem`), decoded fully (so truncation is detected here, not later), EXIF
    orientation applied, converted faithfully (:func:`to_rgb`). The one decode path of runs,
    ``prepare`` (:func:`image_problem`) and the Space's upload check.

    ``smallest``: from the image's (width, height), the smallest size its user needs (a model's
    preprocessing, :meth:`~vlfair.models.preprocessing.ImagePreprocessing.smallest_decode`), or None. A
    JPEG at least twice that size is then decoded at a half, a quarter or an eighth of its size, never
    below it (libjpeg's DCT scaling, ``PIL.Image.draft``): the model's resize has less to do and the
    decoding is several times faster.

    Raises:
        UnusableImage: too elongated, a mode that cannot be converted, NaN pixels.
        OSError, ValueError, SyntaxError, Image.DecompressionBombError: PIL cannot decode it.
    """
    if problem := shape_problem(*image.size):
        raise UnusableImage(problem)
    if smallest is not None and image.format == "JPEG" and (size := smallest(*image.size)) is not None:
        image.draft(None, size)
    image.load()
    return to_rgb(upright(image))


def load_rgb(value: Any, row: int, smallest: Callable[[int, int], tuple[int, int] | None] | None = None
             ) -> Image.Image:
    """Decode one cell (:func:`decode`, ``smallest`` passed on) to RGB.

    Raises:
        BadImageError: the cell cannot be decoded or embedded; names ``row`` and the path.
        TypeError: the cell is not an image-like value at all; names ``row``.
    """
    image = None
    try:
        image = _open(value)
        return decode(image, smallest)
    except TypeError as exc:
        raise TypeError(f"row {row}: {exc}") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:  # UnusableImage too
        if image is not None and image is not value:  # a file it opened stays open until closed (PIL keeps it)
            image.close()
        reason = exc.problem if isinstance(exc, UnusableImage) else f"{type(exc).__name__}: {exc}"
        raise BadImageError(row, cell_path(value), reason) from None


def image_problem(data: bytes) -> str | None:
    """What is wrong with ``data`` as an image ("empty (0 bytes)", "not a readable image (...)",
    "a decompression bomb (...)" over PIL's pixel limit, "too elongated (...)", a mode it cannot
    convert), or None. Decodes it fully, as embedding will (:func:`decode`)."""
    if not data:
        return "empty (0 bytes)"
    try:
        with Image.open(io.BytesIO(data)) as image:
            decode(image)
    except UnusableImage as exc:
        return exc.problem
    except Image.DecompressionBombError as exc:
        return f"a decompression bomb ({exc})"
    except (OSError, ValueError, SyntaxError) as exc:
        return f"not a readable image ({type(exc).__name__}: {exc})"
    return None
