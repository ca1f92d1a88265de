"""What vlfair knows of each metric beside its value, declared once: its neutral value, its range
and so the direction a reader takes it in. The leaderboard's ranks, ``vlfair compare``'s "less
biased", the Hub's eval results and Every Eval Ever's records all read them from here."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True)
class Facts:
    """A metric's facts.

    ``neutral``: the value it takes when the groups do not differ; "less biased" means closer to it
    (|value - neutral|), never "higher is better". A level, not a bias (a group's mean score, an
    accuracy), has none: two models differ in it, neither is "less biased". ``low`` and ``high``:
    the range its values can take (None: not bounded, or not known)."""

    neutral: float | None = None
    low: float | None = None
    high: float | None = None

    @property
    def lower_is_less_biased(self) -> bool:
        """A bias measure that is never below its neutral 0 (an F, a gap, epsilon): lower is closer."""
        return self.neutral == 0.0 and self.low == 0.0

    @property
    def sides(self) -> tuple[float, ...]:
        """The sides of the neutral value a bias measure can deviate to (-1 under, 1 over): not past an end of
        its range that is the neutral value itself (a gap, an F are never under their 0)."""
        return tuple(side for side, bound in ((-1.0, self.low), (1.0, self.high)) if bound != self.neutral)

    @property
    def direction(self) -> str:
        """How a person reads the metric, in words."""
        if self.lower_is_less_biased:
            return "lower is less biased: 0 is no difference between the groups"
        if self.neutral is not None:
            return f"closer to {self.neutral:g} (no difference between the groups) is less biased"
        return "a level, not a bias measure: neither higher nor lower is better"


_FRACTION = Facts(None, 0.0, 1.0)                # a share of images, an accuracy
_FRACTION_GAP = Facts(0.0, 0.0, 1.0)            # the largest minus the smallest of fractions
_PERCENT = Facts(None, 0.0, 100.0)              # CLIPScore; probabilities x100
_SIGNED_SHARE_DIFFERENCE = Facts(0.0, -1.0, 1.0)  # a difference of fractions
_SKEW = Facts(0.0)                              # a log ratio of shares, unbounded either way

# The built-in metrics. A probe adds its own with its class attribute ``facts`` (metric -> Facts, or
# its neutral value alone).
FACTS: dict[str, Facts] = {
    **dict.fromkeys(("accuracy", "retrieval_accuracy", "trait_confidence", "target_share", "group_share",
                     "retention_text_score", "retention_image_score", "unmatched_share"), _FRACTION),
    **dict.fromkeys(("group_rate_gap", "cross_lingual_gap"), _FRACTION_GAP),
    **dict.fromkeys(("mean_clipscore", "class_score", "mean_probability", "mean_answer_likelihood"), _PERCENT),
    "bias_ratio": Facts(1.0, 0.0, math.inf),     # s_w / s_m, a ratio of positive means
    "trait_anova": Facts(0.0, 0.0, math.inf),    # F across groups
    "group_score_gap": Facts(0.0, 0.0, None),    # largest minus smallest group mean
    "individual_fairness": Facts(0.0, 0.0, None),  # epsilon: the largest ratio of similarity gap to text distance
    "text_distance": Facts(0.0, 0.0, None),      # distance between a caption and its translation
    **dict.fromkeys(("word_influence", "word_influence_shapley", "mean_word_influence", "gap_amplification"),
                    _SIGNED_SHARE_DIFFERENCE),   # a language's gap minus the pivot's, too
    **dict.fromkeys(("max_skew", "min_skew", "skew"), _SKEW),  # skew: ln(a group's share of the top k / its target)
    "ndkl": Facts(0.0, 0.0, None),
    "bias_at_k": Facts(0.0, -1.0, 1.0),          # (n_a - n_b) / k
}


def facts_of(metric: str, own: Mapping[str, Facts | float] | None = None) -> Facts:
    """The facts of ``metric``: a probe's ``own`` (its facts, or bare neutral values) first, then the
    built-in ones; a metric neither knows is a level without a known range."""
    found = (own or {}).get(metric)
    if isinstance(found, Facts):
        return found
    if found is not None:  # a plugin's neutral value alone
        return dataclasses.replace(FACTS.get(metric, Facts()), neutral=float(found))
    return FACTS.get(metric, Facts())


def neutral_value(metric: str, own: Mapping[str, Facts | float] | None = None) -> float | None:
    """The neutral value of ``metric`` (None for a level such as an accuracy)."""
    return facts_of(metric, own).neutral


__all__ = ["FACTS", "Facts", "facts_of", "neutral_value"]
