"""Finished runs analysed again, without the model: ``rescore`` (every metric of one run from its
samples.parquet, under other interval settings) and ``compare`` (two or more runs on the same
rows: paired differences, intervals and tests).

A comparison's names are resolved on first use: the CLI reads ``vlfair.compare.rescore``'s settings
to build its help without importing the statistics (scipy) behind a comparison. ``rescore`` and
the runs' names are light and imported here (``rescore`` is also a module's name: imported lazily,
the module would answer for the function once the CLI had read its settings)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vlfair.compare.rescore import rescore
from vlfair.compare.runs import Run, RunError, load_run

if TYPE_CHECKING:
    from vlfair.compare.comparison import Comparison as Comparison
    from vlfair.compare.comparison import ComparisonError as ComparisonError
    from vlfair.compare.comparison import compare_runs as compare_runs

_LAZY = {"Comparison": "comparison", "ComparisonError": "comparison", "compare_runs": "comparison"}

__all__ = ["Comparison", "ComparisonError", "Run", "RunError", "compare_runs", "load_run", "rescore"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vlfair.compare' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
