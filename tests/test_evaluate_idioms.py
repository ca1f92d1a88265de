"""vlfair's modules as a Hugging Face user meets them: the literal `evaluate.load("vlfair/<name>")`
offline, `evaluate.combine` over any of them, labels of any kind."""

from __future__ import annotations

import inspect
import itertools
import json
import os
import subprocess
import sys

import evaluate
import numpy as np
import pytest

import vlfair
from vlfair.cli import main
from vlfair.evaluate_support import SHARED_NAMES
from vlfair.metrics import available_metrics, load_metric

# What a new user does in a fresh Python with a fresh HF_HOME, the Hub offline, in a directory
# outside the checkout: the literal string before anything is installed; vlfair.load_metric, which
# installs its module on first use; the `vlfair install-metrics` command (its console entry point,
# vlfair.cli.main); then the literal string for every module. One process: evaluate's import alone
# takes several seconds.
FRESH_USER = """
import contextlib, io, json, sys
import evaluate
seen = {}
try:
    evaluate.load("vlfair/bias_ratio")
except Exception as error:
    seen["before"] = f"{type(error).__name__}: {error}"
import vlfair
vlfair.load_metric("vlfair/group_score_gap")
seen["first_use_gap"] = evaluate.load("vlfair/group_score_gap").compute(
    predictions=[1.0, 2, 3, 4], references=[0, 0, 1, 1], bootstrap=0, n_permutations=0)["max_gap"]
from vlfair.cli import main
with contextlib.redirect_stdout(io.StringIO()) as printed:
    seen["install_exit"] = main(["install-metrics"])
seen["install_printed"] = printed.getvalue()
loaded = {name: evaluate.load(f"vlfair/{name}") for name in sys.argv[1].split(",")}
seen["modules"] = sorted(loaded)
seen["ratio"] = loaded["bias_ratio"].compute(predictions=[70.13, 70.13, 81.85, 81.85], references=["w", "w", "m", "m"],
                                            protected_group="w", reference_group="m", bootstrap=0)["bias_ratio"]
import os
from pathlib import Path
installed = lambda: sorted(str(p) for p in Path(os.environ["HF_MODULES_CACHE"]).rglob("*") if "__pycache__" not in p.parts)
before = installed()
with contextlib.redirect_stdout(io.StringIO()) as printed:
    seen["again_exit"] = main(["install-metrics", "--only", "vlfair/bias_ratio"])
seen["again_printed"], seen["again_unchanged"] = printed.getvalue(), installed() == before
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def fresh_user(tmp_path_factory) -> dict:
    tmp_path = tmp_path_factory.mktemp("fresh-user")
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_OFFLINE": "1",
           "HF_MODULES_CACHE": str(tmp_path / "hf-home" / "modules")}
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    done = subprocess.run([sys.executable, "-c", FRESH_USER, ",".join(available_metrics())], env=env, cwd=cwd,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_literal_string_loads_offline_after_install_metrics(fresh_user, capsys):
    assert "Couldn't find a module script" in fresh_user["before"]  # evaluate's own error: nothing was there
    assert fresh_user["install_exit"] == 0
    assert f"{len(available_metrics())} module(s) installed" in fresh_user["install_printed"]
    assert fresh_user["modules"] == available_metrics() and fresh_user["ratio"] == 0.8568112400733048
    assert fresh_user["again_exit"] == 0 and "1 module(s) installed" in fresh_user["again_printed"]
    assert fresh_user["again_unchanged"]  # installing again writes nothing new
    assert main(["install-metrics", "--only", "bias_ration"]) == 2
    assert capsys.readouterr().err.startswith("vlfair install-metrics: unknown vlfair metric 'bias_ration'")


def test_load_metric_installs_on_first_use_and_takes_the_namespaced_name(fresh_user):
    assert fresh_user["first_use_gap"] == 2.0
    with pytest.raises(ValueError, match="unknown vlfair metric 'other/bias_ratio'"):
        load_metric("other/bias_ratio")


# ---- evaluate.combine ---------------------------------------------------------------------------
SCORES = {"predictions": [0.9, 0.8, 0.85, 0.95, 0.4, 0.5, 0.45, 0.35, 0.6, 0.7, 0.65, 0.55],
          "references": ["a"] * 4 + ["b"] * 4 + ["c"] * 4}
LABELS = {"predictions": ["x", "y", "x", "x", "y", "y", "x", "x"], "references": ["x", "y", "y", "x", "y", "x", "x", "x"],
          "languages": ["en"] * 4 + ["de"] * 4, "groups": ["f", "m"] * 4}
MATRIX = {"predictions": np.random.default_rng(0).normal(size=(6, 3)).tolist(), "references": [0, 1, 2, 0, 1, 2]}
EMBEDDINGS = {name: np.random.default_rng(i).normal(size=(5, 4)).tolist()
              for i, name in enumerate(("image_embeddings", "text_embeddings_a", "text_embeddings_b"))}
OPTIONS = {"bootstrap": 0, "seed": 0}
CASES = {  # each module's inputs and options; modules whose shared names agree combine
    "bias_ratio": {**SCORES, **OPTIONS, "protected_group": "a", "reference_group": "b", "n_permutations": 0},
    "group_score_gap": {**SCORES, **OPTIONS, "n_permutations": 0},
    "trait_anova": {**SCORES, **OPTIONS, "strata": ["s", "s", "t", "t"] * 3},
    "cross_lingual_gap": {**LABELS, **OPTIONS, "pivot": "en"},
    "group_rate_gap": {**LABELS, **OPTIONS},
    "retention": {**MATRIX, **OPTIONS},
    "ranking_skew": {"predictions": MATRIX["predictions"], "item_groups": ["p", "q", "p"], "k": 2},
    "individual_fairness": dict(EMBEDDINGS),
    "word_influence": {"predictions": [1, 0, 1, 1, 0, 0], "variants": ["", "", "0", "0", "1", "1"], "num_words": 2,
                       "k": 1},
}


def _compatible(a: dict, b: dict) -> bool:
    return all(np.array_equal(np.asarray(a[k], dtype=object), np.asarray(b[k], dtype=object)) for k in set(a) & set(b))


PAIRS = [pair for pair in itertools.combinations(sorted(CASES), 2) if _compatible(CASES[pair[0]], CASES[pair[1]])]


def test_the_combinable_pairs_are_many():
    expected = {("bias_ratio", "group_score_gap"), ("bias_ratio", "trait_anova"), ("group_score_gap", "trait_anova"),
                ("cross_lingual_gap", "group_rate_gap"), ("ranking_skew", "retention")}
    expected |= {tuple(sorted((name, "individual_fairness"))) for name in CASES if name != "individual_fairness"}
    assert expected <= set(PAIRS)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: "+".join(p))
def test_every_compatible_pair_combines(pair):
    modules = {name: load_metric(name) for name in pair}
    kwargs = {**CASES[pair[0]], **CASES[pair[1]]}
    inputs = {k: kwargs.pop(k) for k in ("predictions", "references") if k in kwargs}
    combined = evaluate.combine(list(modules.values()), force_prefix=True).compute(**inputs, **kwargs)
    for name in pair:
        alone = load_metric(name).compute(**CASES[name])
        module_name = modules[name].name
        for key, value in alone.items():
            assert combined[f"{module_name}_{key}"] == value, (name, key)


def test_an_option_no_module_takes_is_still_an_error():
    with pytest.raises(TypeError, match=r"bias_ratio: unknown option\(s\) \['bootstrapp'\]"):
        load_metric("bias_ratio").compute(**{**CASES["bias_ratio"], "bootstrapp": 0})


def test_shared_names_are_every_modules_inputs_and_options():
    names = set()
    for name in available_metrics():
        module = load_metric(name)
        if module.module_type == "comparison":  # two models' columns: not combined, takes explicit options only
            continue
        names |= set(module._feature_names())
        names |= {p for p in inspect.signature(module._compute).parameters if p not in ("self", "shared")}
    assert names == SHARED_NAMES


# ---- labels of any kind ------------------------------------------------------------------------
def test_integer_labels_give_what_their_names_give():
    gap = load_metric("cross_lingual_gap")
    as_text = gap.compute(**LABELS | {"bootstrap": 0})
    codes = {"x": 0, "y": 1}
    as_ids = gap.compute(predictions=[codes[p] for p in LABELS["predictions"]],
                         references=[codes[r] for r in LABELS["references"]], languages=LABELS["languages"], bootstrap=0)
    assert as_ids["accuracy"] == as_text["accuracy"] and as_ids["gap"] == as_text["gap"]
    rate = load_metric("group_rate_gap").compute(predictions=[1, 0, 1, 1], references=[1, 1, 1, 1], groups=[0, 0, 1, 1],
                                                 bootstrap=0)
    assert rate["accuracy"] == {"0": 0.5, "1": 1.0} and rate["counts"] == {"0": 2, "1": 2}
    assert all(type(n) is int for n in rate["counts"].values())
    ratio = load_metric("bias_ratio").compute(predictions=[1.0, 2.0, 3.0, 4.0], references=[1, 1, 0, 0],
                                              protected_group=1, reference_group=0, bootstrap=0, n_permutations=0)
    assert ratio["bias_ratio"] == pytest.approx(1.5 / 3.5) and ratio["group_counts"] == {"0": 2, "1": 2}
    assert all(type(n) is int for n in ratio["group_counts"].values())
    anova = load_metric("trait_anova").compute(predictions=SCORES["predictions"], references=[0] * 4 + [1] * 4 + [2] * 4,
                                               bootstrap=0)
    assert anova["f_statistic"] == pytest.approx(
        load_metric("trait_anova").compute(**SCORES, bootstrap=0)["f_statistic"])


def test_class_label_columns_pass_by_id_or_name():
    from datasets import ClassLabel, Dataset, Features, Value

    data = Dataset.from_dict({"score": [0.9, 0.8, 0.4, 0.5], "gender": [0, 0, 1, 1]},
                             features=Features({"score": Value("float64"), "gender": ClassLabel(names=["Female", "Male"])}))
    ratio = load_metric("bias_ratio")
    by_id = ratio.compute(predictions=data["score"], references=data["gender"], protected_group=0, reference_group=1,
                          bootstrap=0, n_permutations=0)
    names = data.features["gender"].int2str(data["gender"])
    by_name = ratio.compute(predictions=data["score"], references=names, protected_group="Female",
                            reference_group="Male", bootstrap=0, n_permutations=0)
    assert by_id["bias_ratio"] == by_name["bias_ratio"] == pytest.approx(0.85 / 0.45)
    assert vlfair.measures.bias_ratio is not None  # the same measure behind both
