"""The measures' typed results: a frozen dataclass per measure that still reads as the dict it was."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

import pytest

import vlfair
from vlfair import measures as M

ANOVA = {"scores": [0.7, 0.8, 0.6, 0.5, 0.7, 0.7, 0.6, 0.6], "groups": ["Black", "Black", "White", "White"] * 2}
RATE = {"predictions": ["a", "b", "a", "a", "a", "a", "b", "a"], "references": ["a"] * 8,
        "groups": ["x", "x", "y", "y"] * 2}
# one call per measure: its class and its arguments
CASES = {
    "bias_ratio": (M.BiasRatio, {"scores": [0.2, 0.4, 0.3, 0.9], "groups": list("aabb"), "protected_group": "a",
                                 "reference_group": "b", "bootstrap": 20, "n_permutations": 0}),
    "group_score_gap": (M.GroupScoreGap, {"scores": [30.0, 32.0, 25.0, 27.0, 20.0, 22.0], "groups": list("aabbcc"),
                                          "bootstrap": 20}),
    "trait_anova": (M.TraitAnova, {**ANOVA, "strata": ["Female"] * 4 + ["Male"] * 4, "bootstrap": 20}),
    "word_influence": (M.WordInfluence, {"predictions": [1, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 0, 0],
                                         "variants": [""] * 4 + ["0"] * 4 + ["1"] * 4 + ["0,1"] * 4, "num_words": 2}),
    "cross_lingual_gap": (M.CrossLingualGap, {"predictions": ["x", "y", "x", "x"], "references": ["x", "y", "y", "x"],
                                              "languages": ["en", "en", "fr", "fr"], "pivot": "en", "bootstrap": 20}),
    "group_rate_gap": (M.GroupRateGap, {**RATE, "languages": ["de"] * 4 + ["en"] * 4, "bootstrap": 20}),
    "individual_fairness": (M.IndividualFairness, {"image_embeddings": [[1.0, 0.0], [0.0, 1.0]],
                                                   "text_embeddings_a": [[2.0, 0.0], [1.0, 1.0]],
                                                   "text_embeddings_b": [[0.0, 2.0], [1.0, 0.5]]}),
    "retention": (M.Retention, {"scores": [[1.0, 0.0], [0.0, 1.0]], "references": [0, 1], "bootstrap": 20}),
    "ranking_skew": (M.RankingSkew, {"scores": [[0.9, 0.8, 0.7, 0.1]], "item_groups": ["m", "m", "w", "w"], "k": 2}),
    "bias_difference": (M.BiasDifference, {"scores_a": [0.2, 0.4, 0.3, 0.9], "scores_b": [0.3, 0.4, 0.3, 0.8],
                                           "groups": list("aabb"), "protected_group": "a", "reference_group": "b",
                                           "bootstrap": 20}),
}


def _evaluate(name: str, arguments: dict) -> dict:
    """The evaluate module's output; its columns are predictions (predictions1 and 2) and references where the
    measure's are scores (scores_a and _b) and groups (group_rate_gap's groups are a column of their own)."""
    names = ({"scores": "predictions", "scores_a": "predictions1", "scores_b": "predictions2"}
             | ({} if "references" in arguments else {"groups": "references"}))
    return vlfair.load_metric(name).compute(**{names.get(k, k): v for k, v in arguments.items()})


def test_every_measure_has_a_case():
    assert set(CASES) == set(M.MEASURES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_result_is_a_frozen_dataclass_that_reads_as_its_dict(name):
    cls, arguments = CASES[name]
    result = M.MEASURES[name](**arguments)
    assert type(result) is cls and dataclasses.is_dataclass(result)
    assert isinstance(result, M.MeasureResult) and isinstance(result, Mapping) and not isinstance(result, dict)
    plain = result.to_dict()
    assert type(plain) is dict and plain == dict(result) == {**result} and result == plain
    assert list(plain) == list(dict(result)) == list(result) == list(result.keys())  # the same key order
    assert list(result.items()) == list(plain.items()) and len(result) == len(plain)
    for key in result:
        assert getattr(result, key) is result[key] is result.get(key)
    assert "no such key" not in result and result.get("no such key", 0) == 0
    with pytest.raises(KeyError):
        result["no such key"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(result, next(iter(result)), None)
    with pytest.raises(TypeError):
        result[next(iter(result))] = None  # type: ignore[index]
    json.dumps(plain)  # the JSON boundary


@pytest.mark.parametrize("name", sorted(CASES))
def test_evaluate_module_returns_the_plain_dict(name):
    _, arguments = CASES[name]
    output = _evaluate(name, arguments)
    expected = M.MEASURES[name](**arguments).to_dict()
    assert type(output) is dict and output == expected and list(output) == list(expected)


def test_ci_note_is_a_key_only_where_no_interval_could_be_drawn():
    one_each = {"scores": [[1.0, 0.0], [0.0, 1.0]], "references": [0, 1]}
    two_each = {"scores": [[1.0, 0.0], [0.8, 0.3], [0.0, 1.0], [0.4, 0.5]], "references": [0, 0, 1, 1]}
    for arguments, bootstrap, noted in ((one_each, 20, True), (one_each, 0, False), (two_each, 20, False)):
        result = M.retention(**arguments, bootstrap=bootstrap)
        assert ("ci_note" in result) is noted and ("ci_note" in result.to_dict()) is noted
        assert ("ci_note" in _evaluate("retention", {**arguments, "bootstrap": bootstrap})) is noted
        assert list(result)[-1] == ("ci_note" if noted else "confidence")
        assert (result.ci_note is not None) is noted and len(result) == 8 + noted


def test_strata_and_languages_are_keys_only_when_given():
    pooled, stratified = M.trait_anova(**ANOVA, bootstrap=0), M.trait_anova(**CASES["trait_anova"][1])
    assert "strata" not in pooled and pooled.strata is None and isinstance(pooled.f_statistic, float)
    assert list(stratified)[-1] == "strata" and stratified.strata == ["Female", "Male"]
    assert list(stratified)[:-1] == list(pooled) and set(stratified.f_statistic) == {"Female", "Male"}
    one, by_language = M.group_rate_gap(**RATE, bootstrap=0), M.group_rate_gap(**CASES["group_rate_gap"][1])
    assert "languages" not in one and list(by_language) == [*one, "languages"]
    assert by_language.gap == {"de": 0.5, "en": 0.5} and by_language["languages"] == ["de", "en"]


def test_keys_that_are_none_stay_keys():
    """Only the conditional keys leave the mapping when None: an absent test or pivot is a None value."""
    untested = M.group_score_gap([1.0, 2.0, 3.0, 4.0], list("aabb"), bootstrap=0, n_permutations=0)
    assert untested["p_value"] is None and untested["max_gap_ci"] is None and "p_value" in untested
    no_pivot = M.cross_lingual_gap(["x", "y", "x", "x"], ["x", "y", "y", "x"], ["en", "en", "fr", "fr"], bootstrap=0)
    assert {"pivot", "gap_to_pivot", "gap_to_pivot_ci"} <= set(no_pivot) and no_pivot.gap_to_pivot is None
    three = M.ranking_skew([[0.9, 0.8, 0.7, 0.6]], ["a", "b", "c", "c"], k=3)
    assert three["bias_at_k"] is None and three["bias_pair"] is None and len(three) == len(dataclasses.fields(three))
