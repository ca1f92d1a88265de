"""Plots the probes share; each returns a matplotlib Figure."""

from __future__ import annotations

from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def heatmap(frame: pd.DataFrame, title: str, label: str):
    values = frame.to_numpy(dtype=float)
    figure, axis = plt.subplots(figsize=(1.2 + 0.9 * values.shape[1], 1.0 + 0.4 * values.shape[0]))
    image = axis.imshow(values, cmap="viridis", aspect="auto")
    axis.set_xticks(range(values.shape[1]), [str(c) for c in frame.columns], rotation=30, ha="right")
    axis.set_yticks(range(values.shape[0]), [str(i) for i in frame.index])
    for (i, j), v in np.ndenumerate(values):
        if np.isfinite(v):
            axis.text(j, i, f"{v:.1f}", ha="center", va="center", color="white", fontsize=8)
    figure.colorbar(image, ax=axis, label=label)
    axis.set_title(title, fontsize=10)
    return figure


def median_images(dataset: Any, rows: np.ndarray, groups: np.ndarray, scores: np.ndarray, title: str):
    """For each group, the image whose score is that group's median (the study's Figures 3-4)."""
    names = sorted(set(groups.tolist()))
    figure, axes = plt.subplots(1, len(names), figsize=(2.2 * len(names), 2.6), squeeze=False)
    for axis, group in zip(axes[0], names):
        members = np.flatnonzero(groups == group)
        pick = members[np.argsort(scores[members])[len(members) // 2]]
        axis.imshow(dataset[int(rows[pick])]["image"].convert("RGB"))
        axis.set_title(f"{group}\n{scores[pick]:.1f}", fontsize=9)
        axis.axis("off")
    figure.suptitle(title, fontsize=10)
    return figure


def grouped_bars(means: pd.DataFrame, errors: pd.DataFrame | None, title: str, ylabel: str):
    """Bars per index entry (x), one colour per column, with CI error bars."""
    figure, axis = plt.subplots(figsize=(1.5 + 0.8 * len(means.index) * max(1, len(means.columns)) / 2, 3.4))
    width = 0.8 / max(1, len(means.columns))
    x = np.arange(len(means.index))
    for k, column in enumerate(means.columns):
        yerr = None if errors is None else np.abs(np.stack(errors[column].to_list()).T - means[column].to_numpy())
        axis.bar(x + k * width - 0.4 + width / 2, means[column], width, yerr=yerr, capsize=2, label=str(column))
    axis.set_xticks(x, [str(i) for i in means.index], rotation=30, ha="right")
    axis.set_ylabel(ylabel)
    axis.set_title(title, fontsize=10)
    axis.legend(fontsize=8)
    return figure


def scatter_with_bound(x: Sequence[float], y: Sequence[float], slope: float, labels: Sequence[str], title: str):
    figure, axis = plt.subplots(figsize=(5, 3.6))
    labels = np.asarray(labels)
    for label in sorted(set(labels.tolist())):
        mask = labels == label
        axis.scatter(np.asarray(x)[mask], np.asarray(y)[mask], s=8, alpha=0.6, label=label)
    line = np.linspace(0, max(x) if len(x) else 1, 50)
    axis.plot(line, slope * line, "k--", label=f"bound (slope {slope:.3g})")
    axis.set_xlabel("||t_a - t_b||")
    axis.set_ylabel("|cos(v, t_a) - cos(v, t_b)|")
    axis.set_title(title, fontsize=10)
    axis.legend(fontsize=8)
    return figure
