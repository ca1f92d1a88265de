"""Finished runs analysed again, without the model: ``rescore`` (every metric of one run from its
samples.parquet, under other interval settings) and ``compare`` (two or more runs on the same
rows: paired differences, intervals and tests).

Names are resolved on first use: the CLI reads ``vlfair.compare.rescore``'s settings to build its
help without importing the statistics (scipy) behind a comparison."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vlfair.compare.comparison import Comparison as Comparison
    from vlfair.compare.comparison import ComparisonError as ComparisonError
    from vlfair.compare.comparison import compare_runs as compare_runs
    from vlfair.compare.rescore import rescore as rescore
    from vlfair.compare.runs import Run as Run
    from vlfair.compare.runs import RunError as RunError
    from vlfair.compare.runs import load_run as load_run

_LAZY = {"Comparison": "comparison", "ComparisonError": "comparison", "compare_runs": "comparison",
         "rescore": "rescore", "Run": "runs", "RunError": "runs", "load_run": "runs"}

__all__ = ["Comparison", "ComparisonError", "Run", "RunError", "compare_runs", "load_run", "rescore"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vlfair.compare' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
