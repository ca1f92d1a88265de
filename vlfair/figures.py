"""matplotlib figures drawn without pyplot, and the image mosaics the probes show.

pyplot keeps every figure it makes in a registry until ``plt.close``: a Space, the demo or a loop
over models in Python would hold every figure it ever drew (and warn past 20). A
:class:`~matplotlib.figure.Figure` made directly belongs to whoever holds it and is freed with it;
``savefig`` needs no backend (it renders PNGs with Agg).

Every figure is made on :func:`subplots`, never pyplot, so a Space or a loop over models keeps its memory
flat. A probe makes each figure through ``Output.figure(name, draw, ...)``, which draws nothing within
:func:`not_drawn`: a run written without its plots (``vlfair run --no-figures``, the demo's answerers and
runs with phrasings) spends nothing on them (``tests/test_figures.py`` counts the figures made).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np
from matplotlib.figure import Figure

WHITE = 255
_DRAWING = contextvars.ContextVar("vlfair_drawing", default=True)


@contextlib.contextmanager
def not_drawn(when: bool = True) -> Iterator[None]:
    """Within it a probe makes no figure (``Output.figure`` skips them): a run written without its plots
    (``vlfair run --no-figures``, the demo's answerers and runs with phrasings) spends nothing on drawing them.
    ``when`` False: figures are drawn as around it."""
    token = _DRAWING.set(_DRAWING.get() and not when)
    try:
        yield
    finally:
        _DRAWING.reset(token)


def drawing() -> bool:
    """Whether figures are made here (not within :func:`not_drawn`)."""
    return _DRAWING.get()


def subplots(rows: int = 1, columns: int = 1, *, figsize: tuple[float, float],
             layout: Literal["constrained", "compressed", "tight"] | None = None, **options: Any) -> tuple[Figure, Any]:
    """``plt.subplots`` without pyplot: (figure, axes); ``options`` go to ``Figure.subplots``
    (``squeeze``, ``sharex``...)."""
    figure = Figure(figsize=figsize, layout=layout)
    return figure, figure.subplots(rows, columns, **options)


def image_mosaic(cells: Sequence[Sequence[Any]], title: str, *, row_labels: Sequence[str] | None = None,
                 column_labels: Sequence[str] | None = None, row_titles: Sequence[str] | None = None,
                 captions: Sequence[Sequence[str]] | None = None, empty: str = "", cell_inches: float = 1.5,
                 cell_pixels: int = 160) -> Figure:
    """A grid of images on one axes: ``cells[i][j]`` is a PIL image or None (``empty`` is written
    there). Rows are named by ``row_labels`` (left) or ``row_titles`` (above each row, left-aligned),
    columns by ``column_labels`` (on top); ``captions[i][j]`` goes under its image.

    One image on one axes, not an axes per picture (each with its own layout and resampling): a
    professions grid of 12 x 4 pictures of 224 px builds and saves in about half the time (0.6 s
    against 1.2 s here; the rest is the PNG's encoding), and each picture is resized once, to the
    size it is shown at.
    """
    from PIL import Image, ImageOps

    if not cells:
        raise ValueError(f"image_mosaic({title!r}): no rows of pictures to draw")
    rows, columns = len(cells), max(len(row) for row in cells) or 1
    gap, title_px, caption_px = cell_pixels // 16, (cell_pixels // 8 if row_titles else 0), (
        cell_pixels // 8 if captions else 0)
    cell_w, cell_h = cell_pixels + gap, title_px + cell_pixels + caption_px + gap
    mosaic = np.full((rows * cell_h, columns * cell_w, 3), WHITE, dtype=np.uint8)
    tops = [i * cell_h + title_px for i in range(rows)]  # each image square's top edge, in pixels
    for i, row in enumerate(cells):
        for j, picture in enumerate(row):
            if picture is None:
                continue
            picture = picture.convert("RGB")
            # fit the square: small pictures (the demo world's) enlarged pixel by pixel, large ones smoothly
            enlarging = max(picture.size) < cell_pixels
            thumb = ImageOps.contain(picture, (cell_pixels, cell_pixels),
                                     Image.Resampling.NEAREST if enlarging else Image.Resampling.LANCZOS)
            y = tops[i] + (cell_pixels - thumb.height) // 2
            x = j * cell_w + (cell_pixels - thumb.width) // 2
            mosaic[y:y + thumb.height, x:x + thumb.width] = np.asarray(thumb)
    # the axes keeps the mosaic's aspect: size the figure to it, with room for the labels and the title
    # (margins in inches, whatever the number of rows: the title sits in the top one, above the labels)
    left, right, top, bottom = (1.2 if row_labels else 0.1), 0.1, (0.75 if column_labels else 0.45), 0.1
    width = cell_inches * columns
    height = width * mosaic.shape[0] / mosaic.shape[1]
    figure_width, figure_height = left + width + right, top + height + bottom
    figure, axis = subplots(figsize=(figure_width, figure_height))
    figure.subplots_adjust(left=left / figure_width, right=1 - right / figure_width, top=1 - top / figure_height,
                           bottom=bottom / figure_height)
    # shown near its own size (cell_pixels ~ cell_inches at the reports' 100-110 dpi), already resampled
    # with LANCZOS above: nearest is enough, and a fraction of the cost of matplotlib's smoothing
    axis.imshow(mosaic, extent=(0, mosaic.shape[1], mosaic.shape[0], 0), interpolation="nearest")
    axis.tick_params(length=0, labelsize=9)
    for spine in axis.spines.values():
        spine.set_visible(False)
    centres_x = [j * cell_w + cell_pixels / 2 for j in range(columns)]
    axis.set_xticks(centres_x, list(column_labels) if column_labels else [""] * columns)
    axis.xaxis.tick_top()
    axis.set_yticks([y + cell_pixels / 2 for y in tops], list(row_labels) if row_labels else [""] * rows)
    for i, row in enumerate(cells):
        if row_titles:
            axis.text(0, tops[i] - title_px / 2, row_titles[i], fontsize=7, ha="left", va="center")
        for j in range(columns):
            picture = row[j] if j < len(row) else None
            if picture is None and empty:
                axis.text(centres_x[j], tops[i] + cell_pixels / 2, empty, fontsize=8, ha="center", va="center")
            if captions and picture is not None:
                axis.text(centres_x[j], tops[i] + cell_pixels + caption_px / 2, captions[i][j], fontsize=8,
                          ha="center", va="center")
    figure.suptitle(title, fontsize=10, y=1 - 0.08 / figure_height, va="top")
    return figure


__all__ = ["image_mosaic", "subplots"]
