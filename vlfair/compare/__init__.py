"""Finished runs analysed again, without the model: ``rescore`` (every metric of one run from its
samples.parquet, under other interval settings) and ``compare`` (two or more runs on the same
rows: paired differences, intervals and tests).

A comparison's names are resolved on first use: the CLI reads ``vlfair.compare.rescore``'s settings
to build its help without importing the statistics (scipy) behind a comparison. ``rescore`` and
the runs' names are light and imported here (``rescore`` is also a module's name: imported lazily,
the module would answer for the function once the CLI had read its settings)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vlfair._lazy import lazy_getattr
from vlfair.compare.rescore import rescore
from vlfair.compare.runs import Run, RunError, load_run

if TYPE_CHECKING:
    from vlfair.compare.comparison import Comparison as Comparison
    from vlfair.compare.comparison import ComparisonError as ComparisonError
    from vlfair.compare.comparison import compare_runs as compare_runs

_LAZY = {"Comparison": "comparison", "ComparisonError": "comparison", "compare_runs": "comparison"}

__all__ = ["Comparison", "ComparisonError", "Run", "RunError", "compare_runs", "load_run", "rescore"]


__getattr__ = lazy_getattr(__name__, {name: f".{module}" for name, module in _LAZY.items()})
