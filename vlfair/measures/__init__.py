"""Every bias measure of vlfair as a pure function of arrays; numpy and scipy only.

Each returns a frozen dataclass, one per measure (:class:`BiasRatio`, :class:`GroupScoreGap`, ...),
whose fields are read as attributes (``gap.max_gap``). Every one is also a :class:`MeasureResult`,
a read-only mapping that reads exactly as the flat dict the measures returned before (JSON-friendly:
floats, lists, dicts of floats), with at least the keys of the evaluate table in DESIGN.md, plus
confidence intervals (``<key>_ci``), sample counts and p-values; ``to_dict()`` gives that dict.
Group statistics take ``bootstrap`` (stratified resamples; 0 turns intervals off), ``confidence``
and ``seed``. Accuracies and shares are fractions in [0, 1].
Group labels are read by one rule (:func:`vlfair.stats.label_column`): compared as text, a number by its
value (1 and 1.0 are one group), a missing label (None, NaN, NaT, pandas' NA) an error naming its row.
Numbers are read by one rule (:func:`float_column`), options by one table (:data:`OPTIONS`), and a result
holding a number that no finite input can give (an overflow) is refused where it is assembled. Bad input
raises a ValueError that names the problem.

The package's rooms: ``checks`` (the result type; how numbers, labels and options are read; the checks
on groups), ``groups`` (the group statistics; those of group means evaluated by ``arrays``, the engine and
reporters a probe's declarations use), ``ranking`` (ranking_skew and
its top-k engine), ``comparison`` (bias_difference) and ``ties`` (every decision on scores: a best
candidate, a ranking, a threshold, with near-equal scores as ties, so that no CPU's rounding flips it);
every public name of the first four is importable from here, with ``catalog`` (every measure as one
:class:`Measure` object: its facts, statistic, reporter, function and evaluate module) and ``statistics``
(the statistics a metric is declared with). The names load when first read: a probe's declarations (the
catalog, the statistics) import neither scipy nor the measures' functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vlfair._lazy import lazy_getattr
from vlfair.defaults import BOOTSTRAP, CONFIDENCE, MAX_BOOTSTRAP, MAX_PERMUTATIONS, PERMUTATIONS, SEED

if TYPE_CHECKING:  # the lazy names' types, for type checkers (nothing is imported here at run time)
    from vlfair.measures.catalog import CATALOG, MEASURES, Measure, facts_in, facts_of, neutral_value, register_measure
    from vlfair.measures.checks import (
        MIN_GROUP_SIZE,
        OPTIONS,
        Labels,
        MeasureResult,
        check_options,
        float_column,
        whole_column,
    )
    from vlfair.measures.comparison import (
        A_LESS_BIASED,
        B_LESS_BIASED,
        NEITHER_CLOSER,
        NO_DIFFERENCE,
        BiasDifference,
        bias_difference,
    )
    from vlfair.measures.groups import (
        BiasRatio,
        CrossLingualGap,
        GroupRateGap,
        GroupScoreGap,
        IndividualFairness,
        Retention,
        TraitAnova,
        WordInfluence,
        bias_ratio,
        cross_lingual_gap,
        group_rate_gap,
        group_score_gap,
        individual_fairness,
        individual_fairness_of_terms,
        individual_fairness_terms,
        parse_variant,
        retention,
        trait_anova,
        word_influence,
    )
    from vlfair.measures.ranking import (
        SMOOTHING,
        RankingSkew,
        bias_at_k,
        prefix_length,
        ranking_skew,
        resampled_top_k,
        top_k_groups_problem,
        top_k_interval,
        top_k_order,
        top_k_shares,
        top_k_skew,
    )
    from vlfair.measures.statistics import ColumnRange, Custom, FStatistic, Mean, Pooled, Range, Ratio, Statistic

_LAZY = {
    **dict.fromkeys((
        'CATALOG', 'MEASURES', 'Measure', 'facts_in', 'facts_of', 'neutral_value', 'register_measure'
    ), ".catalog"),
    **dict.fromkeys((
        'Labels', 'MIN_GROUP_SIZE', 'MeasureResult', 'OPTIONS', 'check_options', 'float_column', 'whole_column'
    ), ".checks"),
    **dict.fromkeys((
        'A_LESS_BIASED', 'B_LESS_BIASED', 'BiasDifference', 'NEITHER_CLOSER', 'NO_DIFFERENCE', 'bias_difference'
    ), ".comparison"),
    **dict.fromkeys((
        'BiasRatio', 'CrossLingualGap', 'GroupRateGap', 'GroupScoreGap', 'IndividualFairness', 'Retention',
        'TraitAnova', 'WordInfluence', 'bias_ratio', 'cross_lingual_gap', 'group_rate_gap', 'group_score_gap',
        'individual_fairness', 'individual_fairness_of_terms', 'individual_fairness_terms', 'parse_variant',
        'retention', 'trait_anova', 'word_influence'
    ), ".groups"),
    **dict.fromkeys((
        'RankingSkew', 'SMOOTHING', 'prefix_length', 'ranking_skew', 'resampled_top_k', 'top_k_groups_problem',
        'top_k_interval', 'top_k_order', 'top_k_shares', 'top_k_skew', 'bias_at_k'
    ), ".ranking"),
    **dict.fromkeys((
        'ColumnRange', 'Custom', 'FStatistic', 'Mean', 'Pooled', 'Range', 'Ratio', 'Statistic'
    ), ".statistics"),
}
__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = [
    "A_LESS_BIASED", "BOOTSTRAP", "B_LESS_BIASED", "BiasDifference", "BiasRatio", "CATALOG", "CONFIDENCE",
    "ColumnRange", "CrossLingualGap", "Custom", "FStatistic", "GroupRateGap", "GroupScoreGap", "IndividualFairness",
    "Labels", "MAX_BOOTSTRAP", "MAX_PERMUTATIONS", "MEASURES", "MIN_GROUP_SIZE", "Mean", "Measure", "MeasureResult",
    "NEITHER_CLOSER", "NO_DIFFERENCE", "OPTIONS", "PERMUTATIONS", "Pooled", "Range", "RankingSkew", "Ratio",
    "Retention", "SEED", "SMOOTHING", "Statistic", "TraitAnova", "WordInfluence", "bias_at_k", "bias_difference",
    "bias_ratio", "check_options", "cross_lingual_gap", "facts_in", "facts_of", "float_column", "group_rate_gap",
    "group_score_gap", "individual_fairness", "individual_fairness_of_terms", "individual_fairness_terms",
    "neutral_value", "parse_variant", "prefix_length", "ranking_skew", "register_measure", "resampled_top_k",
    "retention", "top_k_groups_problem", "top_k_interval", "top_k_order", "top_k_shares", "top_k_skew", "trait_anova",
    "whole_column", "word_influence",
]
