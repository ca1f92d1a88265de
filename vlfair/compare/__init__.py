"""Finished runs analysed again, without the model: ``rescore`` (every metric of one run from its
samples.parquet, under other interval settings) and ``compare`` (two or more runs on the same
rows: paired differences, intervals and tests)."""

from vlfair.compare.comparison import Comparison, ComparisonError, compare_runs
from vlfair.compare.rescore import rescore
from vlfair.compare.runs import Run, RunError, load_run

__all__ = ["Comparison", "ComparisonError", "Run", "RunError", "compare_runs", "load_run", "rescore"]
