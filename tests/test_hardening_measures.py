"""Issue 28 (hardening, third round), the measures and their evaluate modules: one label rule, one
number rule, one table of options, results that refuse an overflow, modules that stay usable.

Cases: 10 (missing labels in pandas form), 11 (float labels cast to int by the modules), 16
(overflow), 17 (options out of range or of the wrong type), 18 (1 and 1.0 two groups), 26 (a module
broken by a refused compute), 27 (evaluate errors that do not explain themselves), 28 (data of the
wrong shape or size for a measure).
"""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pandas as pd
import pytest

from vlfair import measures as M
from vlfair import paired, stats
from vlfair.metrics import load_metric

OFF = {"bootstrap": 0}  # no intervals: these tests are about what is accepted, not about resampling


# ---- 10: a missing label in any of its forms is an error naming its row, never a group --------------
MISSING = {  # a group column whose row 2 is missing, as pandas, numpy and Python spell it
    "None": lambda: ["a", "a", None, "b", "b"],
    "float-nan": lambda: ["a", "a", float("nan"), "b", "b"],
    "pd.NA-object": lambda: pd.Series(["a", "a", pd.NA, "b", "b"], dtype=object),
    "pd.NaT-object": lambda: pd.Series(["a", "a", pd.NaT, "b", "b"], dtype=object),
    "nan-object": lambda: pd.Series(["a", "a", np.nan, "b", "b"], dtype=object),
    "string-dtype": lambda: pd.Series(["a", "a", None, "b", "b"], dtype="string"),
    "categorical": lambda: pd.Series(pd.Categorical(["a", "a", None, "b", "b"])),
    "Int64": lambda: pd.array([1, 1, None, 2, 2], dtype="Int64"),
    "numpy-object-nan": lambda: np.array(["a", "a", np.nan, "b", "b"], dtype=object),
    "numpy-float32-nan": lambda: np.array([1, 1, np.nan, 2, 2], dtype=np.float32),
    "numpy-NaT": lambda: np.array(["a", "a", np.datetime64("NaT"), "b", "b"], dtype=object),
}
SCORES = [1.0, 2.0, 3.0, 4.0, 5.0]
COLUMN_OF = {  # each measure with the labels under test in one of its label columns, and that column's name
    "group_score_gap": (lambda labels: M.group_score_gap(SCORES, labels, n_permutations=0, **OFF), "references"),
    "bias_ratio": (lambda labels: M.bias_ratio(SCORES, labels, "a", "b", n_permutations=0, **OFF), "references"),
    "trait_anova-strata": (lambda labels: M.trait_anova(SCORES, list("ababa"), strata=labels, **OFF), "strata"),
    "group_rate_gap": (lambda labels: M.group_rate_gap(list("xxxxx"), list("xxxxx"), labels, **OFF), "groups"),
    "cross_lingual_gap": (lambda labels: M.cross_lingual_gap(list("xyxyx"), list("xxxxx"), labels, **OFF),
                          "languages"),
    "ranking_skew": (lambda labels: M.ranking_skew([SCORES], labels, k=2), "item_groups"),
    "bias_difference": (lambda labels: M.bias_difference(SCORES, SCORES, labels, "a", "b", n_permutations=0, **OFF),
                        "references"),
    "stats.encode_groups": (lambda labels: stats.encode_groups(labels, "groups"), "groups"),
}


@pytest.mark.parametrize("missing", MISSING, ids=list(MISSING))
@pytest.mark.parametrize("measure", COLUMN_OF, ids=list(COLUMN_OF))
def test_a_missing_label_in_any_form_is_refused_by_row(measure, missing):
    call, column = COLUMN_OF[measure]
    with pytest.raises(ValueError, match=rf"^{column} is missing \(None or NaN\) at row 2 .*give them a label"):
        call(MISSING[missing]())


@pytest.mark.parametrize("missing", MISSING, ids=list(MISSING))
def test_a_missing_label_is_refused_by_the_evaluate_modules_too(missing):
    with pytest.raises(ValueError, match=r"^references is missing \(None or NaN\) at row 2 "):
        load_metric("group_score_gap").compute(predictions=SCORES, references=MISSING[missing](), n_permutations=0,
                                               **OFF)


# ---- 18: a number is one label however it is typed; text that spells one number two ways is refused ----
ONE_AND_TWO = {  # the groups 1 and 2, three rows each, in the spellings a column of numbers arrives in
    "int-and-float": [1, 1, 1.0, 2, 2.0, 2],
    "numpy-scalars": [np.int64(1), np.float32(1.0), 1, np.uint8(2), np.float64(2.0), 2],
    "float-array": np.array([1.0, 1.0, 1.0, 2.0, 2.0, 2.0]),
    "pandas-float": pd.Series([1, 1, 1, 2, 2, 2], dtype=float),
    "Int64": pd.array([1, 1, 1, 2, 2, 2], dtype="Int64"),
}


@pytest.mark.parametrize("labels", ONE_AND_TWO, ids=list(ONE_AND_TWO))
def test_one_number_is_one_group_in_every_measure_and_module(labels):
    labels = ONE_AND_TWO[labels]
    scores = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    expected = {"1": 3, "2": 3}
    assert M.group_score_gap(scores, labels, n_permutations=0, **OFF)["group_counts"] == expected
    ratio = M.bias_ratio(scores, labels, 1.0, 2, n_permutations=0, **OFF)  # a group named as either spelling
    assert ratio["group_counts"] == expected and ratio["bias_ratio"] == pytest.approx(2.0 / 5.0)
    assert M.group_rate_gap(list("aaaaaa"), list("aaaaaa"), labels, **OFF)["counts"] == expected
    assert stats.encode_groups(labels)[0] == ["1", "2"]
    module = load_metric("group_score_gap").compute(predictions=scores, references=labels, n_permutations=0, **OFF)
    assert module["group_counts"] == expected


@pytest.mark.parametrize("labels, message", [
    (["1", "1", "1.0", "2", "2", "2"], r"references spells one number two ways: '1' \(row 0\) and '1.0' \(row 2\)"),
    (["2", "2", " 2", "1", "1", "1"], r"references spells one number two ways: ' 2' \(row 2\) and '2' \(row 0\)"),
    ([1, 1, "1", 2, 2, 2], r"references mixes kinds of label: number \(row 0: 1\) and text \(row 2: '1'\)"),
    ([0, 0, "Female", 1, 1, 1], r"references mixes kinds of label: number \(row 0: 0\) and text \(row 2: 'Female'\)"),
    ([True, True, 1, 2, 2, 2], r"references mixes kinds of label: bool \(row 0: True\) and number \(row 2: 1\)"),
], ids=["1-and-1.0-as-text", "blank-padded", "number-and-its-text", "id-and-name", "bool-and-number"])
def test_two_spellings_of_one_group_are_refused(labels, message):
    with pytest.raises(ValueError, match=message):
        M.group_score_gap([1.0, 2, 3, 4, 5, 6], labels, n_permutations=0, **OFF)


# ---- 11: evaluate modules keep float labels (0.2 and 0.8 are two groups, not "0") -------------------
FLOAT_GROUPS = [0.2, 0.2, 0.8, 0.8]
MODULE_CALLS = {
    "group_score_gap": ("group_score_gap", {"predictions": [1.0, 2, 3, 4], "references": FLOAT_GROUPS,
                                            "n_permutations": 0}, "group_counts"),
    "bias_ratio": ("bias_ratio", {"predictions": [1.0, 2, 3, 4], "references": FLOAT_GROUPS, "protected_group": 0.2,
                                  "reference_group": 0.8, "n_permutations": 0}, "group_counts"),
    "trait_anova": ("trait_anova", {"predictions": [1.0, 2, 3, 4.5], "references": FLOAT_GROUPS}, "group_counts"),
    "trait_anova-strata": ("trait_anova", {"predictions": [1.0, 2, 3, 4.5, 1.5, 2.5, 3.5, 4], "references": [1, 2] * 4,
                                           "strata": FLOAT_GROUPS * 2}, "strata"),
    "group_rate_gap": ("group_rate_gap", {"predictions": [1, 0, 1, 1], "references": [1, 1, 1, 1],
                                          "groups": FLOAT_GROUPS}, "counts"),
    "cross_lingual_gap": ("cross_lingual_gap", {"predictions": [1.5, 0.5, 1.5, 1.5], "references": [1.5] * 4,
                                                "languages": FLOAT_GROUPS}, "counts"),
}


@pytest.mark.parametrize("call", MODULE_CALLS, ids=list(MODULE_CALLS))
def test_float_labels_stay_what_they_are_in_the_modules(call):
    name, inputs, key = MODULE_CALLS[call]
    result = load_metric(name).compute(**inputs, **OFF)
    assert set(result[key]) == {"0.2", "0.8"}


def test_cross_lingual_gap_compares_float_predictions_by_value():
    result = load_metric("cross_lingual_gap").compute(predictions=[1.5, 1.2, 1.5, 1.5], references=[1.5] * 4,
                                                      languages=["en", "en", "de", "de"], **OFF)
    assert result["accuracy"] == {"de": 1.0, "en": 0.5}  # 1.2 is not 1.5, though both truncate to 1


# ---- issue 43, SILENT 16: a label that shows nothing, or two that show alike, is never a group -------------
BLANK = {"empty": "", "space": " ", "tab": "\t", "spaces-and-newline": "  \n", "zero-width-space": "\u200b",
         "byte-order-mark": "\ufeff", "no-break-space": "\u00a0", "word-joiner": "\u2060"}


@pytest.mark.parametrize("blank", BLANK, ids=list(BLANK))
@pytest.mark.parametrize("measure", COLUMN_OF, ids=list(COLUMN_OF))
def test_a_label_that_shows_nothing_is_refused_by_row(measure, blank):
    call, column = COLUMN_OF[measure]
    with pytest.raises(ValueError, match=rf"^{column} is blank at row 2 \({re.escape(repr(BLANK[blank]))}\): a label"):
        call(["a", "a", BLANK[blank], "b", "b"])


ALIKE = {"trailing-space": ("Male", "Male "), "zero-width": ("smart", "smart\u200b"), "leading-tab": ("b", "\tb"),
         "soft-hyphen": ("doctor", "doc\u00adtor")}


@pytest.mark.parametrize("pair", ALIKE, ids=list(ALIKE))
@pytest.mark.parametrize("measure", COLUMN_OF, ids=list(COLUMN_OF))
def test_two_labels_that_show_alike_are_refused(measure, pair):
    call, column = COLUMN_OF[measure]
    a, b = ALIKE[pair]
    with pytest.raises(ValueError, match=rf"^{column} holds .* which read alike \(they differ in spaces or invisible"):
        call([a, a, b, "z", "z"])


LABEL_COLUMN = {"group_score_gap": "references", "bias_ratio": "references", "trait_anova": "references",
                "trait_anova-strata": "strata", "group_rate_gap": "groups", "cross_lingual_gap": "languages"}


@pytest.mark.parametrize("blank", ["", " ", "\t", "\u200b"], ids=["empty", "space", "tab", "zero-width-space"])
@pytest.mark.parametrize("call", MODULE_CALLS, ids=list(MODULE_CALLS))
def test_every_evaluate_module_refuses_a_label_that_shows_nothing(call, blank):
    """The F that moved from 16 to 26.7 with a blank group: refused instead, naming the column and row."""
    name, inputs, _ = MODULE_CALLS[call]
    column = LABEL_COLUMN[call]
    labels = [str(value) for value in inputs[column]]
    labels[1] = blank
    given = {**inputs, column: labels}
    if name == "bias_ratio":  # its groups as the labels now spell them
        given.update(protected_group="0.2", reference_group="0.8")
    with pytest.raises(ValueError, match=f"{column} is blank at row 1"):
        load_metric(name).compute(**given, **OFF)


@pytest.mark.parametrize("name, inputs, message", [
    ("retention", {"predictions": [[0.9, 0.1], [0.2, 0.8]], "references": [0.4, 1.6]},
     r"references must be whole numbers; row 0 is 0.4"),
    ("word_influence", {"predictions": [1, 0.7, 1, 0], "variants": ["", "", "0", "0"], "num_words": 1},
     r"predictions must be whole numbers; row 1 is 0.7"),
], ids=["retention-index", "word_influence-prediction"])
def test_an_integer_column_refuses_a_fraction_instead_of_truncating_it(name, inputs, message):
    with pytest.raises(ValueError, match=message):
        load_metric(name).compute(**inputs)


# ---- 16: an overflow is an error naming it, never inf, [nan, nan] or an "exact" p of 0 -------------------
OVERFLOWS = {
    "bias_ratio": lambda: M.bias_ratio([1e308, 1e308, 1.0, 1.0], list("aabb"), "a", "b", bootstrap=50,
                                       n_permutations=50),
    "bias_ratio-tiny-reference": lambda: M.bias_ratio([1e300, 1e300, 1e-300, 1e-300], list("aabb"), "a", "b", **OFF,
                                                      n_permutations=0),
    "group_score_gap": lambda: M.group_score_gap([1e308, 1e308, -1e308, -1e308], list("aabb"), bootstrap=50,
                                                 n_permutations=50),
    "trait_anova-squares": lambda: M.trait_anova([1e200, -1e200, 1.0, 2.0, 3.0, 4.0], list("aabbcc"), **OFF),
    "trait_anova-means": lambda: M.trait_anova([1e308, 1e308, -1e308, -1e308, 0.0, 1.0], list("aabbcc"), **OFF),
    "bias_difference": lambda: M.bias_difference([1e308, 1e308, 1.0, 1.0], [1.0] * 4, list("aabb"), "a", "b",
                                                 bootstrap=50, n_permutations=50),
    "individual_fairness": lambda: M.individual_fairness([[1e200, 1e200]], [[1.0, 0.0]], [[0.0, 1.0]]),
    "individual_fairness-distance": lambda: M.individual_fairness([[1.0, 0.0]], [[1.7e308, 1.0]], [[-1.7e308, 1.0]]),
    "stats.one_way_anova": lambda: stats.one_way_anova([[1e200, -1e200], [1.0, 2.0]]),
    "paired.compare": lambda: paired.compare(
        paired.RowSet(rows=np.arange(4), columns=("score",), groups=np.array([0, 0, 1, 1]),
                      statistics=(paired.Statistic("gap", {}, paired.mean_range(), 0.0),)),
        np.array([[1e308], [-1e308], [1.0], [2.0]]), np.array([[1.0], [2.0], [3.0], [4.0]]), bootstrap=20,
        n_permutations=20),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy says "overflow encountered"; the error says more
@pytest.mark.parametrize("case", OVERFLOWS, ids=list(OVERFLOWS))
def test_an_overflow_is_refused_naming_it(case):
    with pytest.raises(ValueError, match=r" is (inf|-inf|nan): the inputs are too large for float64 arithmetic .*"
                                         r"rescale them"):
        OVERFLOWS[case]()


def test_only_an_overflow_loses_its_number():
    """A permutation statistic that overflowed has no p (not an "exact" p of 0.0, log10 -inf); what may
    be infinite or NaN by its definition stays so: F without variance within groups, the skew of a
    group absent from the top k without smoothing, a min/max ratio over a top mean of 0."""
    result = stats.permutation_test([1e308, 1e308, -1e308, -1e308], np.array([0, 0, 1, 1]), stats.mean_difference)
    assert result.method == "undefined" and math.isnan(result.p_value)
    assert M.trait_anova([1.0, 1, 2, 2], list("aabb"), **OFF)["f_statistic"] == math.inf
    assert M.ranking_skew([[3, 2, 1, 0]], list("mmww"), k=2, smoothing=0)["min_skew"] == -math.inf
    assert math.isnan(M.group_score_gap([0.0, 0, -1, -1], list("aabb"), n_permutations=0, **OFF)["min_max_ratio"])


# ---- 17: every option of every measure is type- and range-checked, in one table -------------------------
VALID = {  # one valid call of every measure: its data, positionally or by keyword
    "bias_ratio": ([1.0, 2, 3, 4], list("aabb"), "a", "b"),
    "group_score_gap": ([1.0, 2, 3, 4], list("aabb")),
    "trait_anova": ([1.0, 2, 3, 4.5], list("aabb")),
    "word_influence": ([1, 0, 1, 1], ["", "", "0", "0"], 1),
    "cross_lingual_gap": (list("xyxx"), list("xxxx"), ["en", "en", "de", "de"]),
    "group_rate_gap": (list("xyxx"), list("xxxx"), list("ppqq")),
    "individual_fairness": ([[1.0, 0.0]], [[1.0, 0.5]], [[0.5, 1.0]]),
    "retention": ([[0.9, 0.1], [0.2, 0.8]], [0, 1]),
    "ranking_skew": ([[0.4, 0.3, 0.2, 0.1]], list("aabb"), 2),
    "bias_difference": ([1.0, 2, 3, 4], [1.0, 2, 3, 5], list("aabb"), "a", "b"),
}
DATA = {"strata", "languages"}  # keyword arguments that are columns of data, not options
BAD = {  # values each option must refuse: wrong types (a bool is not a number), out of range, not finite
    "bootstrap": [True, -1, 1.5, "10", None, 10**6 + 1],
    "n_permutations": [True, -1, 2.5, "100", 10**13],  # issue 43: 40 rows and 1e13 enumerated 2^40 relabellings
    "confidence": [True, 0, 1, 95, math.nan, "0.95", None],
    "seed": [True, -1, 1.5, "x"],
    "welch": [1, "yes", None],
    "k": [True, 0, -1, 2.5, "2", None],
    "num_words": [True, 0, 1.5, None],
    "smoothing": [math.nan, math.inf, -0.5, True, "0.5"],
    "zero_count": ["DVL", "raw", None, 0],
    "tolerance": [-1e-6, math.nan, math.inf, True, None],
    "target": ["Uniform", 3, None, ["a", "b"]],
    "pivot": [math.nan, ["en"]],
    "bias_pair": [("a", "a"), ("a",), "ab", ("a", None), (1, 1.0), ("a", "b", "c")],
}


def _options(measure) -> list[str]:
    return [name for name, p in inspect.signature(measure).parameters.items()
            if p.default is not p.empty and name not in DATA] + (["k"] if measure is M.ranking_skew else []) + (
        ["num_words"] if measure is M.word_influence else [])


def test_every_option_of_every_measure_has_a_rule():
    assert set(VALID) == set(M.MEASURES)
    options = {name for measure in M.MEASURES.values() for name in _options(measure)}
    assert options == set(M.OPTIONS) == set(BAD)
    for name, data in VALID.items():  # and the rules pass every measure's defaults
        M.MEASURES[name](*data)


@pytest.mark.parametrize("name, option, value", [
    (name, option, value) for name, measure in M.MEASURES.items() for option in _options(measure)
    for value in BAD[option]], ids=str)
def test_a_bad_option_is_refused_naming_it_and_its_range(name, option, value):
    measure, data = M.MEASURES[name], VALID[name]
    positional = list(inspect.signature(measure).parameters)[:len(data)]
    arguments = {**dict(zip(positional, data)), option: value}
    with pytest.raises(ValueError, match=rf"^{option} must be {re.escape(M.OPTIONS[option].valid)}, got "):
        measure(**arguments)


def test_one_group_has_no_skew():
    with pytest.raises(ValueError, match=r"a skew needs at least 2 groups; item_groups hold only \['a'\]"):
        M.ranking_skew([[0.4, 0.3, 0.2, 0.1]], list("aaaa"), 2)


# ---- 26, 27: the evaluate modules explain a refusal and stay usable after it ----------------------------
GOOD = {"predictions": [1.0, 2.0, 3.0, 5.0], "references": list("aabb"), "n_permutations": 0, **OFF}
REFUSED = {  # a compute that must fail, with what its message must say
    "None-first-row": ({"references": [None, "a", "b", "b"]}, r"references is missing \(None or NaN\) at row 0"),
    "nan-later-row": ({"references": ["a", "a", float("nan"), "b"]}, r"references is missing .* at row 2"),
    "empty": ({"predictions": [], "references": []}, r"predictions is empty"),
    "a-single-number": ({"predictions": 5.0, "references": "a"}, r"predictions must be a list with one value per row"),
    "400-digit-score": ({"predictions": [10**400, 2.0, 3.0, 5.0]}, r"predictions row 0 holds a number too large"),
    "text-score": ({"predictions": [1.0, "high", 3.0, 5.0]}, r"predictions row 1 is 'high', not a number"),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_a_refused_compute_explains_itself_and_leaves_the_module_usable(case):
    module = load_metric("group_score_gap")
    change, message = REFUSED[case]
    with pytest.raises(ValueError, match=message):
        module.compute(**{**GOOD, **change})
    assert module.compute(**GOOD) == M.group_score_gap([1.0, 2, 3, 5], list("aabb"), n_permutations=0, **OFF)
    assert module.compute(**GOOD)["max_gap"] == 2.5  # and the next one


@pytest.mark.parametrize("name, good, bad", [
    ("trait_anova", {"predictions": [1.0, 2, 3, 4.5], "references": list("aabb")}, {"strata": [None, "s", "s", "s"]}),
    ("bias_ratio", {"predictions": [1.0, 2, 3, 4], "references": list("aabb"), "protected_group": "a",
                    "reference_group": "b", "n_permutations": 0}, {"references": [None, "a", "b", "b"]}),
    ("word_influence", {"predictions": [1, 0, 1, 1], "variants": ["", "", "0", "0"], "num_words": 1},
     {"variants": [None, "", "0", "0"]}),
    ("retention", {"predictions": [[0.9, 0.1], [0.2, 0.8]], "references": [0, 1]}, {"references": [None, 1]}),
    ("bias_difference", {"predictions1": [1.0, 2, 3, 4], "predictions2": [1.0, 2, 3, 5], "references": list("aabb"),
                         "protected_group": "a", "reference_group": "b", "n_permutations": 0},
     {"references": [None, "a", "b", "b"]}),
], ids=["trait_anova", "bias_ratio", "word_influence", "retention", "bias_difference"])
def test_every_module_is_usable_after_a_refused_first_row(name, good, bad):
    options = OFF if name not in ("word_influence",) else {}
    fresh = load_metric(name).compute(**good, **options)
    module = load_metric(name)
    with pytest.raises(ValueError, match=r"is missing|has NaN"):
        module.compute(**{**good, **bad}, **options)
    assert module.compute(**good, **options) == fresh


def test_a_pandas_series_with_its_own_index_reads_by_position():
    index = [10, 11, 12, 13]
    module = load_metric("group_score_gap")
    result = module.compute(predictions=pd.Series([1.0, 2, 3, 5], index=index),
                            references=pd.Series(list("aabb"), index=index), n_permutations=0, **OFF)
    assert result["max_gap"] == 2.5


@pytest.mark.parametrize("first, refused, second, message", [
    ([0, 0], ["b", "b"], [1, 1], r"references: this batch holds text labels \(row 2: 'b'\) but the rows added "
                                 r"before hold number labels; give every batch the same kind"),
    (["a", "a"], [1, 1], ["b", "b"], r"references: this batch holds number labels \(row 2: 1\) but the rows added "
                                     r"before hold text labels"),
], ids=["ints-then-strings", "strings-then-ints"])
def test_add_batch_names_a_change_of_label_kind_and_keeps_the_rows_before(first, refused, second, message):
    module = load_metric("group_score_gap")
    module.add_batch(predictions=[1.0, 2.0], references=first)
    with pytest.raises(ValueError, match=message):
        module.add_batch(predictions=[3.0, 5.0], references=refused)
    module.add_batch(predictions=[3.0, 5.0], references=second)
    assert module.compute(n_permutations=0, **OFF)["max_gap"] == 2.5


def test_rows_are_counted_over_batches_and_add_takes_one_row():
    module = load_metric("group_score_gap")
    module.add_batch(predictions=[1.0, 2.0], references=["a", "a"])
    with pytest.raises(ValueError, match=r"references is missing \(None or NaN\) at row 3"):
        module.add_batch(predictions=[3.0, 5.0], references=["b", None])
    module.add(prediction=3.0, reference="b")
    module.add(prediction=5.0, reference="b")
    assert module.compute(n_permutations=0, **OFF)["max_gap"] == 2.5


def test_compute_without_any_input_says_what_to_pass():
    with pytest.raises(ValueError, match=r"group_score_gap: no inputs: pass predictions, references to compute"):
        load_metric("group_score_gap").compute(**OFF)


# ---- 28: the measures name the argument of a bad shape or size ------------------------------------------
@pytest.mark.parametrize("call, message", [
    (lambda: M.word_influence([1, 0, 1, 0], ["", None, "0", "0"], 1), r"variants row 1 is missing \(None or NaN\)"),
    (lambda: M.word_influence([1, 0, 1, 0], ["", math.nan, "0", "0"], 1), r"variants row 1 is missing"),
    (lambda: M.word_influence([1, 0], 5, 1), r"variants must be a sequence with one variant per row, got int"),
    (lambda: M.group_score_gap(5.0, ["a"]), r"predictions must be one number per row .*; got a single number \(5.0\)"),
    (lambda: M.bias_ratio([[1.0, 2], [3, 4], [5, 6], [7, 8]], list("aabb"), "a", "b"),
     r"predictions must be one number per row .*; got shape \(4, 2\)"),
    (lambda: M.trait_anova(np.ones((4, 1)), list("aabb")), r"predictions must be one number per row .*; got shape"),
    (lambda: M.bias_difference([1.0, 2, 3, 4], [[1.0]] * 4, list("aabb"), "a", "b"),
     r"predictions2 must be one number per row"),
    (lambda: M.group_score_gap([10**400, 1, 2, 3], list("aabb")),
     r"predictions row 0 holds a number too large for float64 .*an integer of about 401 digits"),
    (lambda: M.retention([[0.1, 10**400], [0.2, 0.3]], [0, 1]), r"predictions row 0 holds a number too large"),
    (lambda: M.retention([0.1, 0.2], [0, 1]), r"predictions must be one list of numbers per row .*; got shape \(2,\)"),
    (lambda: M.individual_fairness([1.0, 0.0], [[1.0, 0.0]], [[0.0, 1.0]]), r"image_embeddings must be one list"),
    (lambda: M.ranking_skew(np.ones((1, 2, 2)), list("ab"), 1), r"predictions must be one number per row .* or one "
                                                                 r"list of numbers per row .*; got shape \(1, 2, 2\)"),
    (lambda: M.ranking_skew([[0.1, 0.2], [0.3]], list("ab"), 1), r"predictions rows differ in length"),
    (lambda: M.group_score_gap([1.0, 2, 3, 4], "aabb"), r"references must be a sequence of labels, one per row; got "
                                                        r"str"),
    (lambda: M.group_score_gap([1.0, 2, 3, 4], [["a"], "a", "b", "b"]), r"references row 0 is a list"),
    (lambda: M.retention([[0.9, 0.1], [0.2, 0.8]], [0.5, 1]), r"references must be whole numbers; row 0 is 0.5"),
], ids=["variants-None", "variants-nan", "variants-scalar", "scalar-scores", "2-D-scores", "2-D-anova",
        "2-D-second-model", "400-digit-int", "400-digit-in-a-matrix", "1-D-matrix", "1-D-embeddings", "3-D-ranking",
        "ragged-ranking", "labels-as-one-string", "a-list-as-a-label", "fractional-index"])
def test_data_of_the_wrong_shape_or_size_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()



# ---- the one label rule keeps what is not one group apart (review of the rule) -------------------------
@pytest.mark.parametrize("labels, groups", [
    ([True, False, True, False], ["False", "True"]),                 # a bool column: never "missing"
    (np.array([True, False, True, False]), ["False", "True"]),
    (["01234", "1234", "01234", "1234"], ["01234", "1234"]),          # codes with a leading zero: two groups
    (["12345678901234567890", "12345678901234567891"] * 2,            # beyond 2**53: two numbers, not one float
     ["12345678901234567890", "12345678901234567891"]),
    (["inf", "Infinity", "inf", "Infinity"], ["Infinity", "inf"]),    # text, not a finite number
])
def test_labels_that_only_look_alike_stay_two_groups(labels, groups):
    result = M.group_score_gap([1.0, 2, 3, 4], labels, n_permutations=0, **OFF)
    assert sorted(result["group_means"]) == groups


def test_a_target_share_of_zero_is_allowed_for_a_group_absent_from_the_items():
    scores = np.random.default_rng(0).random((3, 6))
    groups = ["a"] * 3 + ["b"] * 3
    absent = M.ranking_skew(scores, item_groups=groups, k=4, target={"a": 0.5, "b": 0.5, "c": 0.0})
    assert absent["ndkl"] == M.ranking_skew(scores, item_groups=groups, k=4, target={"a": 0.5, "b": 0.5})["ndkl"]
    with pytest.raises(ValueError, match="target shares must be positive for every group present"):
        M.ranking_skew(scores, item_groups=groups, k=4, target={"a": 1.0, "b": 0.0})
    with pytest.raises(ValueError, match="target share of group 'c' must be a number >= 0, got -0.1"):
        M.ranking_skew(scores, item_groups=groups, k=4, target={"a": 0.5, "b": 0.5, "c": -0.1})


@pytest.mark.parametrize("answer", ["", " ", "cat "], ids=["empty", "space", "trailing-space"])
def test_an_answer_that_shows_nothing_is_a_wrong_answer_not_a_refusal(answer):
    """Predictions and references name classes, not groups: a blank answer is scored as wrong."""
    predictions, references, groups = ["cat", answer, "dog", "dog"], ["cat", "cat", "dog", "dog"], list("aabb")
    assert M.group_rate_gap(predictions, references, groups, **OFF)["accuracy"] == {"a": 0.5, "b": 1.0}
    module = load_metric("group_rate_gap").compute(predictions=predictions, references=references, groups=groups,
                                                   **OFF)
    assert module["accuracy"] == {"a": 0.5, "b": 1.0}
