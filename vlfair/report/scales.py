"""Shared scales for figures read side by side (a biased and a control run of one probe).

Two figures drawn separately pick their own y-ranges and colour scales, so a small effect fills
one plot as much as a large one fills the other. :func:`share_scales` gives each pair of
corresponding axes the union of their limits and each pair of colour-mapped images one colour
range, then re-picks the heatmap annotations' text colours for the new range.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def share_scales(*figure_sets: dict[str, Any]) -> list[str]:
    """Give the same-named figures of every set shared axis limits and colour ranges (in place);
    returns the names shared. Figures whose layouts differ (another number of axes) are left alone."""
    shared = []
    for name in figure_sets[0]:
        figures = [figures[name] for figures in figure_sets if name in figures]
        if len(figures) < 2 or len({len(f.axes) for f in figures}) != 1:
            continue
        pairs = list(zip(*(f.axes for f in figures)))
        for axes in pairs:  # colours first: a colour bar follows its image's new range at once
            _share_colours(axes)
        for axes in pairs:
            _share_limits(axes)
        shared.append(name)
    return shared


def _share_limits(axes: tuple) -> None:
    if any(axis.images for axis in axes):  # image axes: pixel coordinates, not a data range to unite
        return
    for get, set_ in (("get_xlim", "set_xlim"), ("get_ylim", "set_ylim")):
        limits = np.array([getattr(axis, get)() for axis in axes])
        inverted = limits[0, 0] > limits[0, 1]
        low, high = limits.min(), limits.max()
        for axis in axes:
            getattr(axis, set_)((high, low) if inverted else (low, high))


def _share_colours(axes: tuple) -> None:
    # RGB images have no colour map
    images = [[im for im in axis.images if np.ndim(im.get_array()) == 2] for axis in axes]
    for layer in zip(*images):  # the union of the current ranges: a range fixed by the plot (0-1) stays
        low = min(im.get_clim()[0] for im in layer)
        high = max(im.get_clim()[1] for im in layer)
        for im, axis in zip(layer, axes):
            im.set_clim(low, high)
            _recolour_annotations(axis, im)


def _recolour_annotations(axis, image) -> None:
    """Annotations placed at cell centres take black or white by the cell's new colour."""
    from vlfair.report.plots import annotation_colour

    values = np.asarray(image.get_array())
    for text in axis.texts:
        column, row = (int(round(c)) for c in text.get_position())
        if 0 <= row < values.shape[0] and 0 <= column < values.shape[1] and np.isfinite(values[row, column]):
            text.set_color(annotation_colour(image.cmap(image.norm(values[row, column]))))
