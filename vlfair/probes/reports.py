"""The reporters, as probes name them (``reports.score_gap``): they live with the measures
(:mod:`vlfair.measures.reporters`), whose objects name each measure's own."""

from vlfair.measures.reporters import (
    Groups,
    Reading,
    Report,
    anova,
    by_group,
    group_rows,
    rate_gap,
    ratio,
    score_gap,
    top_k,
)

__all__ = ["Groups", "Reading", "Report", "anova", "by_group", "group_rows", "rate_gap", "ratio", "score_gap", "top_k"]
