"""The built-in measures' facts, what each is in words, and the statistic and reporter each is declared with:
the table :mod:`vlfair.measures.catalog` makes its :class:`~vlfair.measures.catalog.Measure` objects of (kept
apart so that a measure's own module, which the catalog names, reads its facts, statistic and reporter without a
circle through the catalog)."""

from __future__ import annotations

import math

from vlfair.facts import Facts
from vlfair.measures.reporters import anova, rate_gap, ratio, score_gap
from vlfair.measures.statistics import ColumnRange, FStatistic, Range, Ratio

_FRACTION = Facts(None, 0.0, 1.0)                # a share of images, an accuracy
_FRACTION_GAP = Facts(0.0, 0.0, 1.0)            # the largest minus the smallest of fractions
_PERCENT = Facts(None, 0.0, 100.0)              # CLIPScore; probabilities x100
_SIGNED_SHARE_DIFFERENCE = Facts(0.0, -1.0, 1.0)  # a difference of fractions
_SKEW = Facts(0.0)                              # a log ratio of shares, unbounded either way

LEVELS = {
    **dict.fromkeys(("accuracy", "retrieval_accuracy", "trait_confidence", "target_share", "group_share",
                     "retention_text_score", "retention_image_score", "unmatched_share"), _FRACTION),
    **dict.fromkeys(("mean_clipscore", "class_score", "mean_probability", "mean_answer_likelihood"), _PERCENT),
    "text_distance": Facts(0.0, 0.0, None),      # distance between a caption and its translation
}
BIASES = {
    "group_rate_gap": (_FRACTION_GAP, "the largest minus the smallest group's rate (an accuracy)"),
    "cross_lingual_gap": (_FRACTION_GAP, "the largest minus the smallest language's accuracy on the same images"),
    "bias_ratio": (Facts(1.0, 0.0, math.inf), "one group's mean score over another's (s_w / s_m)"),
    # F across groups: judged by its F-test, as every statistic bounded at its neutral value is by a test
    "trait_anova": (Facts(0.0, 0.0, math.inf), "the one-way ANOVA F of a score across groups"),
    "group_score_gap": (Facts(0.0, 0.0, None), "the largest minus the smallest group mean of a score"),
    "individual_fairness": (Facts(0.0, 0.0, None), "epsilon: the largest ratio of a similarity gap to a text "
                                                   "distance"),
    "word_influence": (_SIGNED_SHARE_DIFFERENCE, "a word's change of a group's share of generated images"),
    "word_influence_shapley": (_SIGNED_SHARE_DIFFERENCE, "a word's Shapley value on a group's share of generated "
                                                         "images"),
    "mean_word_influence": (_SIGNED_SHARE_DIFFERENCE, "a word's mean change of a group's share over prompts"),
    "gap_amplification": (_SIGNED_SHARE_DIFFERENCE, "a language's gap minus the pivot language's"),
    # skew: ln(a group's share of the top k / its target)
    # the top k's shares sum to 1 as the targets do, so one group's share is at least its target: MaxSkew >= 0
    "max_skew": (Facts(0.0, 0.0, None), "the largest log ratio of a group's share of the top k to its target"),
    # MinSkew is below 0 but where an absent group's 1/k (DVL's count) passes its target: not bounded, yet
    # biased below 0 under no difference as MaxSkew is above, so judged by a test too
    "min_skew": (Facts(0.0, judged="test"), "the smallest log ratio of a group's share of the top k to its target"),
    "skew": (_SKEW, "the log ratio of a group's share of the top k to its target"),
    "ndkl": (Facts(0.0, 0.0, None), "the normalised discounted KL divergence of the top-k groups from the target"),
    "bias_at_k": (Facts(0.0, -1.0, 1.0), "(n_a - n_b) / k in the top k"),
    # the measures users call (evaluate modules) whose results hold several metrics
    "ranking_skew": (_SKEW, "MaxSkew, MinSkew and NDKL of a ranking's top k"),
    "retention": (_FRACTION, "the share of a model's best text (or image) scores an intervention keeps"),
    "bias_difference": (Facts(0.0), "A's distance to the neutral value minus B's, on the same rows (paired)"),
}

# what each measure is declared with and reports, where a probe need not say (a study's declarations name theirs);
# the functions of arrays evaluate these reporters (vlfair.measures.arrays; cross_lingual_gap's, whose languages are
# groups there, reporters.languages)
DECLARED = {"group_score_gap": (Range, score_gap), "group_rate_gap": (Range, rate_gap),
            "bias_ratio": (Ratio, ratio), "trait_anova": (FStatistic, anova),
            "cross_lingual_gap": (ColumnRange, None)}

__all__ = ["BIASES", "DECLARED", "LEVELS"]
