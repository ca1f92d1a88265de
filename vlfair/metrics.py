"""Loading vlfair's evaluate modules from the installed package, offline.

``evaluate.load("vlfair/<name>")`` needs the Hub; ``vlfair.load_metric("<name>")`` loads the
same module from the copy shipped inside the wheel (``vlfair._metrics``), with no network.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from vlfair.measures import MEASURES


def metrics_dir() -> Path:
    """The folder holding one evaluate module per measure (the checkout's metrics/ when editable)."""
    return Path(str(resources.files("vlfair._metrics")))


def available_metrics() -> list[str]:
    return sorted(p.name for p in metrics_dir().iterdir() if (p / f"{p.name}.py").exists())


def load_metric(name: str, **kwargs: Any) -> Any:
    """``evaluate.load`` of the module ``name`` shipped with vlfair; works offline.

    Raises:
        ValueError: ``name`` is not one of vlfair's modules (the message lists them).
    """
    import evaluate

    folder = metrics_dir() / name
    if not (folder / f"{name}.py").exists():
        raise ValueError(f"unknown vlfair metric {name!r}; available: {', '.join(available_metrics())}")
    return evaluate.load(str(folder), **kwargs)


__all__ = ["MEASURES", "available_metrics", "load_metric", "metrics_dir"]
