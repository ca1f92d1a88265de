"""Plots the probes share; each returns a matplotlib Figure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from vlfair.figures import image_mosaic, subplots


def annotation_colour(rgba: Sequence[float]) -> str:
    """Black on light cells, white on dark ones (relative luminance of the cell's colour, WCAG)."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgba[:3])
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.179 else "white"


def heatmap(frame: pd.DataFrame, title: str, label: str, xlabel: str | None = None,
            ylabel: str | None = None) -> Figure:
    """Cells coloured by value (viridis), each annotated; axes named by ``xlabel``/``ylabel`` or the
    frame's column and index names."""
    values = frame.to_numpy(dtype=float)
    figure, axis = subplots(figsize=(1.2 + 0.9 * values.shape[1], 1.0 + 0.4 * values.shape[0]))
    image = axis.imshow(values, cmap="viridis", aspect="auto")
    axis.set_xticks(range(values.shape[1]), [str(c) for c in frame.columns], rotation=30, ha="right")
    axis.set_yticks(range(values.shape[0]), [str(i) for i in frame.index])
    for (i, j), v in np.ndenumerate(values):
        if np.isfinite(v):
            axis.text(j, i, f"{v:.1f}", ha="center", va="center", color=annotation_colour(image.cmap(image.norm(v))),
                      fontsize=8)
    figure.colorbar(image, ax=axis, label=label)
    axis.set_xlabel(xlabel or frame.columns.name or "")
    axis.set_ylabel(ylabel or frame.index.name or "")
    axis.set_title(title, fontsize=10)
    return figure


def median_picks(items: np.ndarray, groups: np.ndarray, scores: np.ndarray) -> dict[tuple, int]:
    """{(item, group): the index of the image with the median score among that item's images of that
    group} (the lower median for an even count; ties keep the earlier image)."""
    picks = {}
    for cell in dict.fromkeys(zip(items.tolist(), groups.tolist())):
        members = np.flatnonzero((items == cell[0]) & (groups == cell[1]))
        picks[cell] = int(members[np.argsort(scores[members], kind="stable")[(members.size - 1) // 2]])
    return picks


def median_image_grid(dataset: Any, rows: np.ndarray, items: np.ndarray, groups: np.ndarray, scores: np.ndarray,
                      item_order: Sequence, group_order: Sequence, title: str) -> Figure:
    """A row per item (profession), a column per group: the image whose score is the median of that
    item's images of that group (the study's Figures 3-4, for every profession)."""
    picks = median_picks(items, groups, scores)
    cells = [[None if picks.get((item, group)) is None else dataset[int(rows[picks[item, group]])]["image"]
              for group in group_order] for item in item_order]
    captions = [["" if picks.get((item, group)) is None else f"{scores[picks[item, group]]:.2f}"
                 for group in group_order] for item in item_order]
    return image_mosaic(cells, title, row_labels=[str(i) for i in item_order],
                        column_labels=[str(g) for g in group_order], captions=captions, empty="no image")


def grouped_bars(means: pd.DataFrame, errors: pd.DataFrame | None, title: str, ylabel: str, xlabel: str | None = None,
                 ylim: tuple[float, float] | None = None, neutral: float | None = None,
                 legend_title: str | None = None) -> Figure:
    """Bars per index entry (x), one colour per column, with CI error bars.

    ``ylim`` fixes the range of a bounded quantity (a probability on 0-1), so runs compare at a
    glance; ``neutral`` draws the no-bias line. The legend sits outside the axes: it never covers a bar.
    """
    figure, axis = subplots(figsize=(2.5 + 0.8 * len(means.index) * max(1, len(means.columns)) / 2, 3.4))
    width = 0.8 / max(1, len(means.columns))
    x = np.arange(len(means.index))
    for k, column in enumerate(means.columns):
        yerr = None if errors is None else np.abs(np.stack(errors[column].to_list()).T - means[column].to_numpy())
        axis.bar(x + k * width - 0.4 + width / 2, means[column], width, yerr=yerr, capsize=2, label=str(column))
    if neutral is not None:
        axis.axhline(neutral, color="0.3", linewidth=0.8, linestyle="--", label=f"no bias ({neutral:g})")
    axis.set_xticks(x, [str(i) for i in means.index], rotation=30, ha="right")
    axis.set_xlabel(xlabel or means.index.name or "")
    axis.set_ylabel(ylabel)
    if ylim is not None:
        axis.set_ylim(*ylim)
    axis.set_title(title, fontsize=10)
    if len(means.columns) > 1 or neutral is not None:
        axis.legend(fontsize=8, title=legend_title or means.columns.name, title_fontsize=8, loc="upper left",
                    bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return figure


def scatter_with_bound(x: Sequence[float], y: Sequence[float], slope: float, labels: Sequence[str],
                       title: str) -> Figure:
    """Points (x, y) coloured by label, with the line y = slope * x (a bound the points must stay under)."""
    figure, axis = subplots(figsize=(5, 3.6))
    label_array = np.asarray(labels)
    for label in sorted(set(label_array.tolist())):
        mask = label_array == label
        axis.scatter(np.asarray(x)[mask], np.asarray(y)[mask], s=8, alpha=0.6, label=label)
    line = np.linspace(0, max(x) if len(x) else 1, 50)
    axis.plot(line, slope * line, "k--", label=f"bound (slope {slope:.3g})")
    axis.set_xlabel("||t_a - t_b||")
    axis.set_ylabel("|cos(v, t_a) - cos(v, t_b)|")
    axis.set_title(title, fontsize=10)
    axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return figure


WILD = 10.0  # an interval this many times wider than the median one is cut off by a forest's axis


def clipped_limits(rows: pd.DataFrame, neutral: float | None = None) -> tuple[float, float] | None:
    """A forest's x limits where one interval is more than :data:`WILD` times as wide as the median (a cell of
    a few images: [2753, 546084] beside [0.1, 0.4]): the neutral value and every interval no wider than that, with
    its estimate, kept in view, with a margin (the wild ones run past the axis); None where no interval is so wide
    (the axis is matplotlib's)."""
    values = rows["value"].to_numpy(dtype=float)
    low, high = rows["low"].to_numpy(dtype=float), rows["high"].to_numpy(dtype=float)
    width = high - low
    finite = np.isfinite(width)
    if finite.sum() < 3 or not np.isfinite(values).any():
        return None
    typical = float(np.median(width[finite]))
    if typical <= 0 or width[finite].max() <= WILD * typical:
        return None
    kept = finite & (width <= WILD * typical)
    plain = kept | ~finite  # a wild interval's own estimate is cut too: it is as far out as its interval says
    shown = np.concatenate([values[plain & np.isfinite(values)], low[kept], high[kept],
                            [neutral] if neutral is not None else []])
    start, end = float(shown.min()), float(shown.max())
    margin = 0.05 * (end - start or 1.0)
    return start - margin, end + margin


def forest(rows: pd.DataFrame, title: str, xlabel: str, neutral: float | None = None, log: bool = False,
           colours: dict[str, str] | None = None, neutral_label: str | None = None) -> Figure:
    """Point estimates with their intervals, one line per ``label``; a ``series`` column (biased,
    control) draws each series in its own colour on the same axis (``colours``: series -> colour;
    default the colour cycle, in order of appearance). ``rows`` has columns label, value, low,
    high (NaN where there is no interval) and optionally series."""
    rows = rows.assign(series=rows["series"] if "series" in rows else "")
    labels = list(dict.fromkeys(rows["label"]))
    series = list(dict.fromkeys(rows["series"]))
    figure, axis = subplots(figsize=(6.4, 0.9 + 0.38 * len(labels) * max(1, len(series)) ** 0.5))
    step = 0.5 / max(1, len(series))
    for k, name in enumerate(series):
        part = rows[rows["series"] == name]
        y = np.array([labels.index(label) for label in part["label"]]) + (k - (len(series) - 1) / 2) * step
        values = part["value"].to_numpy(dtype=float)
        low, high = part["low"].to_numpy(dtype=float), part["high"].to_numpy(dtype=float)
        spans = np.where(np.isfinite(low), [values - low, high - values], 0.0)
        axis.errorbar(values, y, xerr=np.abs(spans), fmt="o", markersize=4, capsize=3, label=name or None,
                      color=(colours or {}).get(name))
    if neutral is not None:
        axis.axvline(neutral, color="0.3", linewidth=0.8, linestyle="--",
                     label=neutral_label or f"no bias ({neutral:g})")
    if log:
        axis.set_xscale("log")
    else:
        limits = clipped_limits(rows, neutral)
        if limits is not None:  # one wild interval (a tiny cell's) would flatten every other: it runs off the axis
            axis.set_xlim(*limits)
            xlabel = f"{xlabel} (axis cut at {limits[0]:.3g} to {limits[1]:.3g}: wider intervals run past it)"
    axis.set_yticks(range(len(labels)), labels, fontsize=8)
    axis.set_ylim(len(labels) - 0.5, -0.5)  # the first label on top
    axis.set_xlabel(xlabel)
    axis.set_title(title, fontsize=10)
    if any(series) or neutral is not None:
        axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return figure
