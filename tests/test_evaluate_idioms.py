"""vlfair's modules as a Hugging Face user meets them: the literal `evaluate.load("vlfair/<name>")`
offline, options at load or at compute (none silently ignored), `evaluate.combine` over any of them
(compute, add_batch, add, optional columns left out), labels of any kind."""

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
from vlfair.metrics import available_metrics, load_metric, metrics_dir, module_columns, module_parameters, module_type

import forking

# What a new user does in a fresh Python with a fresh HF_HOME, the Hub offline, in a directory
# outside the checkout: the literal string before anything is installed; vlfair.load_metric, which
# installs its module on first use; the `vlfair install-metrics` command (its console entry point,
# vlfair.cli.main); then the literal string for every module; the comparison module (bias_difference)
# installed alone before the others. One process: evaluate's import alone takes several seconds.
FRESH_USER = """
import contextlib, io, json, os, sys
from pathlib import Path
import evaluate
seen = {}
try:
    evaluate.load("vlfair/bias_ratio")
except Exception as error:
    seen["before"] = f"{type(error).__name__}: {error}"
# the comparison module first, alone: installed with --only, loaded as a comparison, refused as a metric
try:
    evaluate.load("vlfair/bias_difference", module_type="comparison")
except Exception as error:
    seen["comparison_before"] = type(error).__name__
from vlfair.cli import main
with contextlib.redirect_stdout(io.StringIO()) as printed:
    seen["comparison_install_exit"] = main(["install-metrics", "--only", "vlfair/bias_difference"])
cache = Path(os.environ["HF_MODULES_CACHE"])
seen["comparison_installed"] = sorted(str(p.relative_to(cache)) for p in cache.rglob("bias_difference.py"))
module = evaluate.load("vlfair/bias_difference", module_type="comparison")
seen["comparison_type"] = [module.module_type, isinstance(module, evaluate.Comparison)]
seen["comparison_result"] = module.compute(predictions1=[70.0, 72.0, 68.0, 71.0, 82.0, 80.0, 83.0, 81.0],
                                           predictions2=[78.0, 79.0, 77.0, 80.0, 81.0, 80.0, 82.0, 79.0],
                                           references=["women"] * 4 + ["men"] * 4, protected_group="women",
                                           reference_group="men", bootstrap=200)
try:
    evaluate.load("vlfair/bias_difference", module_type="metric")
except TypeError as error:
    seen["comparison_as_metric"] = str(error)
import vlfair
vlfair.load_metric("vlfair/group_score_gap")
seen["first_use_gap"] = evaluate.load("vlfair/group_score_gap").compute(
    predictions=[1.0, 2, 3, 4], references=[0, 0, 1, 1], bootstrap=0, n_permutations=0)["max_gap"]
with contextlib.redirect_stdout(io.StringIO()) as printed:
    seen["install_exit"] = main(["install-metrics"])
seen["install_printed"] = printed.getvalue()
types = json.loads(sys.argv[1])  # each module's type: evaluate.load checks the one asked for
loaded = {name: evaluate.load(f"vlfair/{name}", module_type=kind) for name, kind in types.items()}
seen["types"] = {name: module.module_type for name, module in loaded.items()}
seen["modules"] = sorted(loaded)
seen["ratio"] = loaded["bias_ratio"].compute(predictions=[70.13, 70.13, 81.85, 81.85], references=["w", "w", "m", "m"],
                                            protected_group="w", reference_group="m", bootstrap=0)["bias_ratio"]
def installed():
    return sorted(str(p) for p in Path(os.environ["HF_MODULES_CACHE"]).rglob("*") if "__pycache__" not in p.parts)
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
    types = json.dumps({name: module_type(name) for name in available_metrics()})
    done = subprocess.run([sys.executable, "-c", FRESH_USER, types], env=env, cwd=cwd,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_literal_string_loads_offline_after_install_metrics(fresh_user, capsys):
    assert "Couldn't find a module script" in fresh_user["before"]  # evaluate's own error: nothing was there
    assert fresh_user["install_exit"] == 0
    assert f"{len(available_metrics())} module(s) installed" in fresh_user["install_printed"]
    assert fresh_user["modules"] == available_metrics() and fresh_user["ratio"] == 0.8568112400733048
    assert fresh_user["types"] == {name: module_type(name) for name in available_metrics()}
    assert {fresh_user["types"][name] for name in ("individual_fairness", "ranking_skew", "word_influence")} == {
        "measurement"} and fresh_user["types"]["bias_difference"] == "comparison"
    for name, kind in fresh_user["types"].items():  # install-metrics says each module's type
        assert f"vlfair/{name} ({kind}): " in fresh_user["install_printed"]
    assert fresh_user["again_exit"] == 0 and "1 module(s) installed" in fresh_user["again_printed"]
    assert fresh_user["again_unchanged"]  # installing again writes nothing new
    assert main(["install-metrics", "--only", "bias_ration"]) == 2
    assert capsys.readouterr().err.startswith("vlfair install-metrics: unknown vlfair metric 'bias_ration'")


def test_load_metric_installs_on_first_use_and_takes_the_namespaced_name(fresh_user):
    assert fresh_user["first_use_gap"] == 2.0
    with pytest.raises(ValueError, match="unknown vlfair metric 'other/bias_ratio'"):
        load_metric("other/bias_ratio")


def test_evaluate_load_as_a_comparison_offline_after_install_metrics(fresh_user):
    """evaluate 0.4.6 caches a community module ("vlfair/<name>") under evaluate_modules/metrics/
    whatever its type (its cache lookup takes no module_type), so install-metrics puts the comparison
    there too."""
    assert fresh_user["comparison_before"] == "FileNotFoundError" and fresh_user["comparison_install_exit"] == 0
    assert len(fresh_user["comparison_installed"]) == 1
    assert fresh_user["comparison_installed"][0].startswith("evaluate_modules/metrics/vlfair--bias_difference/")
    assert fresh_user["comparison_type"] == ["comparison", True]
    expected = vlfair.measures.bias_difference([70.0, 72.0, 68.0, 71.0, 82.0, 80.0, 83.0, 81.0],
                                               [78.0, 79.0, 77.0, 80.0, 81.0, 80.0, 82.0, 79.0],
                                               ["women"] * 4 + ["men"] * 4, "women", "men", bootstrap=200).to_dict()
    assert fresh_user["comparison_result"] == expected
    assert fresh_user["comparison_result"]["ratio_verdict"] == "B less biased"
    assert "Found module of module type 'comparison' instead" in fresh_user["comparison_as_metric"]


# ---- evaluate.combine ---------------------------------------------------------------------------
SCORES = {"predictions": np.round(np.random.default_rng(3).uniform(size=24)
                                  + np.repeat([0.5, 0.0, 0.25], 8), 3).tolist(),
          "references": ["a"] * 8 + ["b"] * 8 + ["c"] * 8}
LABELS = {"predictions": list("xyxxyyxxyxyxxxyyxyxxyxyx"), "references": list("xyyxyxxxyyxxxyxyxxyxxyyx"),
          "languages": ["en"] * 12 + ["de"] * 12}
MATRIX = {"predictions": np.random.default_rng(0).normal(size=(6, 3)).tolist(), "references": [0, 1, 2, 0, 1, 2]}
EMBEDDINGS = {name: np.random.default_rng(i).normal(size=(5, 4)).tolist()
              for i, name in enumerate(("image_embeddings", "text_embeddings_a", "text_embeddings_b"))}
OPTIONS = {"bootstrap": 20, "seed": 0}  # small but non-zero: confidence and seed change the intervals
CASES = {  # each module's inputs and options; modules whose shared names agree combine
    "bias_ratio": {**SCORES, **OPTIONS, "protected_group": "a", "reference_group": "b", "n_permutations": 20},
    "group_score_gap": {**SCORES, **OPTIONS, "n_permutations": 20},
    "trait_anova": {**SCORES, **OPTIONS, "strata": ["s", "t"] * 12},
    "cross_lingual_gap": {**LABELS, **OPTIONS, "pivot": "en"},
    "group_rate_gap": {**LABELS, **OPTIONS, "groups": ["f", "m"] * 12},
    "retention": {**MATRIX, **OPTIONS},
    "ranking_skew": {"predictions": np.random.default_rng(5).normal(size=(6, 12)).tolist(),
                     "item_groups": ["p", "q", "p"] * 4, "k": 4, **OPTIONS},
    "individual_fairness": dict(EMBEDDINGS),
    "word_influence": {"predictions": [1, 0, 1, 1, 0, 0, 0, 1], "variants": ["", "", "0", "0", "1", "1", "0,1", "0,1"],
                       "num_words": 2, "k": 1},
    "bias_difference": {"predictions1": SCORES["predictions"], "predictions2": SCORES["predictions"][::-1],
                        "references": SCORES["references"], "protected_group": "a", "reference_group": "b",
                        **OPTIONS, "n_permutations": 20},
}


def _compatible(a: dict, b: dict) -> bool:
    return all(np.array_equal(np.asarray(a[k], dtype=object), np.asarray(b[k], dtype=object)) for k in set(a) & set(b))


PAIRS = [pair for pair in itertools.combinations(sorted(CASES), 2) if _compatible(CASES[pair[0]], CASES[pair[1]])]


def test_the_combinable_pairs_are_many():
    expected = {("bias_ratio", "group_score_gap"), ("bias_ratio", "trait_anova"), ("group_score_gap", "trait_anova"),
                ("cross_lingual_gap", "group_rate_gap")}
    expected |= {tuple(sorted((name, "individual_fairness"))) for name in CASES if name != "individual_fairness"}
    expected |= {("bias_difference", "bias_ratio"), ("bias_difference", "group_score_gap")}
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


TRIPLES = [triple for triple in itertools.combinations(sorted(CASES), 3)
           if all(_compatible(CASES[a], CASES[b]) for a, b in itertools.combinations(triple, 2))]


@pytest.mark.parametrize("modules", PAIRS + TRIPLES, ids=lambda m: "+".join(m))
def test_a_combination_without_prefixes_loses_no_module_s_number(modules):
    """Issue 43, SILENT 15: evaluate.combine prefixes a key two modules share with each module's name; no
    module may return a key that such a prefixed key would overwrite (bias_difference's own "bias_ratio_p_value"
    took bias_ratio's p-value, without a word, beside trait_anova's)."""
    alone = {name: load_metric(name).compute(**CASES[name]) for name in modules}
    kwargs = {key: value for name in modules for key, value in CASES[name].items()}
    inputs = {key: kwargs.pop(key) for key in ("predictions", "references") if key in kwargs}
    combined = evaluate.combine([load_metric(name) for name in modules]).compute(**inputs, **kwargs)
    assert len(combined) == sum(len(result) for result in alone.values())  # every number kept, under some key
    shared = {key for a, b in itertools.combinations(modules, 2) for key in set(alone[a]) & set(alone[b])}
    for name, result in alone.items():
        for key, value in result.items():
            shown = combined[f"{name}_{key}" if key in shared else key]
            assert shown == value or (shown != shown and value != value), (name, key)  # (NaN is itself)


def test_module_parameters_are_what_each_module_takes():
    """The names the errors point to (read from the sources) are each module's columns and options."""
    for name in available_metrics():
        module = load_metric(name)
        taken = set(module._feature_names()) | set(module.option_names())
        assert module_parameters()[name] == taken and module_columns()[name] == set(module._feature_names()), name
        assert module.option_names() == _options(name)


# ---- options: at load or at compute, alone or combined; none silently ignored --------------------
ALTERNATIVE = {  # a value of each option that changes the case's result (or is refused: then that is the outcome)
    "bootstrap": 0, "confidence": 0.8, "seed": 1, "n_permutations": 0, "welch": True, "pivot": "de",
    "tolerance": -1.0, "k": 1, "target": "dataset", "smoothing": 0.0, "bias_pair": ("q", "p"),
    "item_groups": ["q", "p", "p"] * 4, "num_words": 3, "protected_group": "c", "reference_group": "c",
    "zero_count": "dvl",
}
ALTERNATIVE_FOR = {("word_influence", "k"): 2}
PARTNER = {  # a module each combines with (the case's shared names agree)
    "bias_ratio": "group_score_gap", "group_score_gap": "trait_anova", "trait_anova": "bias_ratio",
    "cross_lingual_gap": "group_rate_gap", "group_rate_gap": "cross_lingual_gap", "retention": "individual_fairness",
    "ranking_skew": "individual_fairness", "individual_fairness": "bias_ratio", "word_influence": "individual_fairness",
    "bias_difference": "bias_ratio",
}


def _options(name: str) -> list[str]:
    """The module's options, read from its ``_compute`` here (not from the code under test)."""
    module = load_metric(name)
    parameters = inspect.signature(module._compute).parameters.values()
    return [p.name for p in parameters if p.name not in module._feature_names() and p.kind is p.POSITIONAL_OR_KEYWORD]


MODULE_OPTIONS = [(name, option) for name in sorted(CASES) for option in _options(name)]


def _outcome(compute, **kwargs):
    """A compute's result, or the error it raised (its type and words): both are outcomes to compare."""
    try:
        return compute(**kwargs)
    except (TypeError, ValueError) as error:
        return f"{type(error).__name__}: {error}"


def _prefixed(result, name: str) -> dict:
    return {key.removeprefix(f"{name}_"): value for key, value in result.items() if key.startswith(f"{name}_")} \
        if isinstance(result, dict) else result


def test_every_module_and_option_is_covered():
    assert sorted(CASES) == available_metrics() and set(PARTNER) == set(CASES)
    assert {option for _, option in MODULE_OPTIONS} <= set(ALTERNATIVE)
    for name, partner in PARTNER.items():
        assert tuple(sorted((name, partner))) in PAIRS, (name, partner)


@pytest.mark.parametrize(("name", "option"), MODULE_OPTIONS, ids=lambda x: x)
def test_each_option_takes_effect_at_compute_at_load_and_combined(name, option):
    value = ALTERNATIVE_FOR.get((name, option), ALTERNATIVE[option])
    case, changed = CASES[name], {**CASES[name], option: value}
    default = _outcome(load_metric(name).compute, **case)
    alone = _outcome(load_metric(name).compute, **changed)
    assert alone != default, f"{name}: {option}={value!r} changed nothing"
    loaded = {k: v for k, v in changed.items() if k in _options(name)}
    if isinstance(alone, dict):  # a refused value is refused at load already (below)
        columns = {k: v for k, v in case.items() if k not in loaded}
        assert load_metric(name, **loaded).compute(**columns) == alone  # at load: the module's defaults
        original = case.get(option, inspect.signature(load_metric(name)._compute).parameters[option].default)
        assert load_metric(name, **loaded).compute(**{**case, option: original}) == default  # compute's value wins
    else:
        with pytest.raises((TypeError, ValueError)):
            load_metric(name, **loaded).compute(**{k: v for k, v in case.items() if k not in loaded})
    # combined: the option reaches this module, and the partner only if it takes the option too
    partner = PARTNER[name]
    modules = {name: load_metric(name), partner: load_metric(partner)}
    kwargs = {**CASES[partner], **changed}
    combined = _outcome(evaluate.combine(list(modules.values()), force_prefix=True).compute, **kwargs)
    partner_takes = option in _options(partner)
    partner_alone = _outcome(load_metric(partner).compute,
                             **{**CASES[partner], **({option: value} if partner_takes else {})})
    if isinstance(alone, dict) and isinstance(partner_alone, dict):
        assert _prefixed(combined, name) == alone and _prefixed(combined, partner) == partner_alone
    else:
        assert combined in (alone, partner_alone)  # the first module refusing it says why


def test_another_modules_option_alone_is_an_error_naming_who_takes_it():
    ratio = load_metric("bias_ratio")
    with pytest.raises(TypeError, match=r"bias_ratio does not take 'strata'; trait_anova takes it: leave it out here\. "
                                        r"bias_ratio takes predictions, references, protected_group"):
        ratio.compute(**CASES["bias_ratio"], strata=CASES["trait_anova"]["strata"])
    with pytest.raises(TypeError, match=r"does not take 'pivot'; cross_lingual_gap takes it"):
        ratio.compute(**CASES["bias_ratio"], pivot="en")
    with pytest.raises(TypeError, match=r"does not take 'k'; ranking_skew, word_influence take it"):
        ratio.compute(**CASES["bias_ratio"], k=5)
    with pytest.raises(TypeError, match=r"does not take 'welch'; trait_anova takes it"):
        load_metric("group_score_gap").compute(**CASES["group_score_gap"], welch=True)
    with pytest.raises(TypeError, match=r"does not take 'groups'; group_rate_gap takes it"):
        load_metric("cross_lingual_gap").compute(**CASES["cross_lingual_gap"], groups=["f", "m"] * 12)
    with pytest.raises(TypeError, match=r"does not take 'predictions'; .*bias_ratio.* take it"):
        load_metric("bias_difference").compute(**CASES["bias_difference"], predictions=SCORES["predictions"])
    with pytest.raises(TypeError, match=r"bias_ratio does not take 'bootstrapp'; "
                                        r"no vlfair module takes it \(a typo\?\)"):
        ratio.compute(**{**CASES["bias_ratio"], "bootstrapp": 0})
    assert ratio.compute(**CASES["bias_ratio"], strata=None)["bias_ratio"] > 1  # None is "not given"


def test_load_takes_options_only_and_checks_them_at_once():
    with pytest.raises(TypeError, match=r"trait_anova: strata is a column \(one value per row\): give columns to "
                                        r"compute or add_batch, not to evaluate.load"):
        evaluate.load(str(metrics_dir() / "trait_anova"), strata=["s"])
    with pytest.raises(TypeError, match=r"bias_ratio does not take 'pivot'; cross_lingual_gap takes it.*"
                                        r"bias_ratio takes the options protected_group, reference_group, bootstrap"):
        load_metric("bias_ratio", pivot="en")
    with pytest.raises(ValueError, match=r"bootstrap must be a whole number from 0 to 1,000,000 "
                                         r"\(0 turns it off\), got -1"):
        load_metric("bias_ratio", bootstrap=-1)
    seeded = load_metric("bias_ratio", seed=5)
    assert seeded.seed == 5 and dict(seeded.configured) == {"seed": 5}  # evaluate's own seed too
    assert seeded.compute(**{k: v for k, v in CASES["bias_ratio"].items() if k != "seed"}) == \
        load_metric("bias_ratio").compute(**{**CASES["bias_ratio"], "seed": 5})
    # evaluate's own arguments still reach evaluate
    assert load_metric("bias_ratio", experiment_id="two", keep_in_memory=True).experiment_id == "two"


def test_a_combination_refuses_what_none_of_its_modules_takes_before_computing():
    combined = evaluate.combine([load_metric("bias_ratio"), load_metric("trait_anova")])
    with pytest.raises(TypeError, match=r"'stratta': no module of this evaluate.combine \(bias_ratio, trait_anova\) "
                                        r"takes it \(a typo\?\)"):
        combined.compute(**CASES["bias_ratio"], stratta=CASES["trait_anova"]["strata"])
    with pytest.raises(TypeError, match=r"'pivot': no module of this evaluate.combine .* \(cross_lingual_gap would\)"):
        combined.compute(**CASES["bias_ratio"], pivot="en")
    combined.add_batch(predictions=SCORES["predictions"], references=SCORES["references"])
    with pytest.raises(TypeError, match="'pivot'"):
        combined.compute(protected_group="a", reference_group="b", pivot="en")
    kept = combined.compute(protected_group="a", reference_group="b", bootstrap=0)  # the rows added were kept
    assert kept["f_statistic"] == load_metric("trait_anova").compute(**SCORES, bootstrap=0)["f_statistic"]


def test_two_modules_get_different_values_of_one_option_at_load():
    ratio = load_metric("bias_ratio", protected_group="a", reference_group="b", bootstrap=0)
    gap = load_metric("group_score_gap", bootstrap=30, seed=2)
    combined = evaluate.combine([ratio, gap], force_prefix=True).compute(**SCORES)
    assert combined["bias_ratio_bias_ratio_ci"] is None
    assert (_prefixed(combined, "group_score_gap")
            == load_metric("group_score_gap").compute(**SCORES, bootstrap=30, seed=2))


# ---- evaluate.combine's add_batch and add, optional columns left out ------------------------------
def _streamed(combined, columns: dict, how: str) -> None:
    rows = len(next(iter(columns.values())))
    if how == "add_batch":
        for start, stop in ((0, rows // 3), (rows // 3, rows)):
            combined.add_batch(**{k: v[start:stop] for k, v in columns.items()})
    else:
        for row in range(rows):
            combined.add(**{k: v[row] for k, v in columns.items()})


COMBINED_STREAMS = {  # modules, the columns of their rows (an optional one left out or given), the compute options
    "strata left out": (["bias_ratio", "trait_anova"], SCORES, {"protected_group": "a", "reference_group": "b"}),
    "strata given": (["bias_ratio", "trait_anova"], {**SCORES, "strata": CASES["trait_anova"]["strata"]},
                     {"protected_group": "a", "reference_group": "b"}),
    "languages given": (["cross_lingual_gap", "group_rate_gap"],
                        {**LABELS, "groups": CASES["group_rate_gap"]["groups"]},
                        {"pivot": "en"}),
    "languages left out": (["group_rate_gap", "group_rate_gap"],
                           {k: v for k, v in CASES["group_rate_gap"].items()
                            if k in ("predictions", "references", "groups")},
                           {}),
    "three modules": (["trait_anova", "group_score_gap", "bias_ratio"], SCORES,
                      {"protected_group": "c", "reference_group": "b", "welch": True}),
}


@pytest.mark.parametrize("how", ["add_batch", "add"])
@pytest.mark.parametrize("stream", sorted(COMBINED_STREAMS))
def test_combined_streaming_equals_one_call(stream, how):
    names, columns, options = COMBINED_STREAMS[stream]
    options = {**options, "bootstrap": 10, "seed": 0, **({"n_permutations": 10} if "bias_ratio" in names else {})}
    if "group_score_gap" in names:
        options["n_permutations"] = 10
    one_call = evaluate.combine([load_metric(n) for n in names]).compute(**columns, **options)
    combined = evaluate.combine([load_metric(n) for n in names])
    _streamed(combined, columns, how)
    assert combined.compute(**options) == one_call
    _streamed(combined, columns, how)  # and again: the modules are ready for the next compute
    assert combined.compute(**options) == one_call


def test_combined_streaming_refuses_before_any_module_stores():
    combined = evaluate.combine([load_metric("bias_ratio"), load_metric("trait_anova")])
    half = {k: v[:12] for k, v in SCORES.items()}
    rest = {k: v[12:] for k, v in SCORES.items()}
    strata = CASES["trait_anova"]["strata"]
    combined.add_batch(**half, strata=strata[:12])
    with pytest.raises(ValueError, match=r"trait_anova: strata is left out in this batch \(from row 12\) but was given "
                                         r"for rows 0-11: give strata with every batch or with none"):
        combined.add_batch(**rest)
    with pytest.raises(ValueError, match=r"bootstrap: no module of this evaluate.combine \(bias_ratio, trait_anova\) "
                                         r"takes it as a column; options go to compute or to evaluate.load"):
        combined.add_batch(**rest, strata=strata[12:], bootstrap=0)
    with pytest.raises(ValueError, match=r"stratta: no module"):
        combined.add(predictions=0.5, references="a", stratta="s")
    combined.add_batch(**rest, strata=strata[12:])  # nothing of the refused batches was stored, by either module
    expected = evaluate.combine([load_metric("bias_ratio"), load_metric("trait_anova")]).compute(
        **SCORES, strata=strata, protected_group="a", reference_group="b", bootstrap=0, n_permutations=0)
    assert combined.compute(protected_group="a", reference_group="b", bootstrap=0, n_permutations=0) == expected


def test_a_combined_batch_one_module_refuses_is_stored_by_none():
    """Each vlfair module's part of a combined batch is checked before any module stores it."""
    ratio, rate = load_metric("bias_ratio"), load_metric("group_rate_gap")
    combined = evaluate.combine([ratio, rate])
    rows = {"predictions": [1.0, 2.0, 3.0, 4.0], "references": ["a", "a", "b", "b"]}
    with pytest.raises(ValueError, match=r"group_rate_gap: groups is required"):
        combined.add_batch(**rows)  # evaluate's own loop would have stored bias_ratio's part, then a KeyError
    assert len(ratio) == len(rate) == 0
    pair = evaluate.combine([load_metric("bias_difference"), load_metric("individual_fairness")])
    embeddings = {name: [[0.1, 0.2]] * 4 for name in EMBEDDINGS}
    with pytest.raises(ValueError, match=r"image_embeddings has NaN at row 0"):
        pair.add_batch(predictions1=rows["predictions"], predictions2=rows["predictions"],
                       references=rows["references"], **{**embeddings, "image_embeddings": [[float("nan"), 0.1]] * 4})
    assert [len(module) for module in pair.evaluation_modules] == [0, 0]
    with pytest.raises(ValueError, match=r"strata: no module of this evaluate.combine \(bias_ratio, group_rate_gap\) "
                                         r"takes it as a column \(trait_anova would\)"):
        combined.add_batch(**rows, groups=["f", "m"] * 2, strata=["s"] * 4)
    with pytest.raises(ValueError, match=r"pivot: no module .* as a column; options go to compute or to evaluate.load"):
        combined.add_batch(**rows, groups=["f", "m"] * 2, pivot="en")


def test_a_refused_compute_keeps_the_rows_added():
    anova = load_metric("trait_anova")
    anova.add_batch(predictions=SCORES["predictions"], references=SCORES["references"])
    refusals = [
        ({"confidence": 1.5}, ValueError, r"confidence must be a number in \(0, 1\)"),
        ({"strata": ["s"] * 24}, ValueError, r"trait_anova.compute: strata given without predictions, references: "
                                             r"columns given to compute are one more batch of rows"),
        ({"predictions": SCORES["predictions"], "references": SCORES["references"], "strata": ["s"] * 24}, ValueError,
         r"strata is given in this batch \(from row 24\) but was left out for rows 0-23"),
        ({"pivot": "en"}, TypeError, r"cross_lingual_gap takes it"),
    ]
    for call, error, message in refusals:
        with pytest.raises(error, match=message):
            anova.compute(**call)
        assert len(anova) == 24, call
    combined = evaluate.combine([load_metric("bias_ratio", protected_group="a", reference_group="b"), anova])
    combined.evaluation_modules[0].add_batch(predictions=SCORES["predictions"], references=SCORES["references"])
    with pytest.raises(ValueError, match=r"welch must be True or False, got 'yes'"):
        combined.compute(welch="yes", bootstrap=0)  # trait_anova's option, refused before bias_ratio computes
    assert [len(module) for module in combined.evaluation_modules] == [24, 24]
    assert combined.compute(bootstrap=0, n_permutations=0)["f_statistic"] == load_metric("trait_anova").compute(
        **SCORES, bootstrap=0)["f_statistic"]
    with pytest.raises(ValueError, match=r"trait_anova: no inputs: pass predictions, references to compute"):
        anova.compute()


def test_modules_pickle_and_copy_as_evaluates_do():
    import copy
    import pickle

    ratio = load_metric("bias_ratio", protected_group="a", reference_group="b", bootstrap=0)
    for twin in (pickle.loads(pickle.dumps(ratio)), copy.deepcopy(ratio)):
        assert twin.configured == {"protected_group": "a", "reference_group": "b", "bootstrap": 0}
        assert twin.compute(**SCORES, n_permutations=0) == ratio.compute(**SCORES, n_permutations=0)


def test_what_evaluate_load_would_take_and_ignore_is_refused():
    with pytest.raises(TypeError, match=r"trait_anova has no configurations \(config_name='welch'\); give options as "
                                        r"keywords: evaluate.load\(\.\.\., welch=\.\.\.\)"):
        evaluate.load(str(metrics_dir() / "trait_anova"), "welch")
    assert load_metric("trait_anova", config_name="default").config_name == "default"
    with pytest.raises(TypeError, match=r"individual_fairness does not take 'seed'; .*ranking_skew.* take it"):
        load_metric("individual_fairness", seed=3)  # it draws no random numbers: evaluate's numpy seed changes nothing


def test_a_blank_label_in_an_optional_column_is_refused():
    with pytest.raises(ValueError, match=r"trait_anova: strata is blank at row 3; a blank strata means 'left out'"):
        load_metric("trait_anova").compute(**SCORES, strata=["s", "t", "s", ""] + ["s"] * 20)


def _distributed(process: int, cache: str, cases: dict[str, list[bool]]) -> None:
    """One of two processes of evaluate's num_process/process_id (a forked child: tests/forking.py)."""
    rows = slice(0, 12) if process == 0 else slice(12, 24)
    outputs = {}
    for case, with_strata in cases.items():
        anova = load_metric("trait_anova", num_process=2, process_id=process, experiment_id=case, cache_dir=cache)
        anova.add_batch(predictions=SCORES["predictions"][rows], references=SCORES["references"][rows],
                        **({"strata": ["s", "t"] * 6} if with_strata[process] else {}))
        try:
            outputs[case] = anova.compute(bootstrap=0)
        except ValueError as error:
            outputs[case] = str(error)
    print(json.dumps(outputs))


def test_distributed_processes_that_disagree_on_an_optional_column_are_an_error(tmp_path):
    """evaluate's own num_process/process_id: process 0 gathers every process's rows; rows with and
    without strata would make "left out" a stratum of its own. Both cases in one pair of processes."""
    cases = {"both": [True, True], "one": [True, False]}  # which process gives strata
    runs = [forking.start(tmp_path, _distributed, process, str(tmp_path), cases, name=f"process-{process}")
            for process in (0, 1)]
    printed = [run.communicate(timeout=300) for run in runs]
    assert all(run.returncode == 0 for run in runs), [err[-2000:] for _, err in printed]
    by_process = [json.loads(out.splitlines()[-1]) for out, _ in printed]
    outputs = {case: [by_process[0][case], by_process[1][case]] for case in cases}
    assert outputs["both"][1] is None and outputs["both"][0]["f_statistic"] == load_metric("trait_anova").compute(
        **SCORES, strata=["s", "t"] * 12, bootstrap=0)["f_statistic"]
    assert outputs["one"][0] == ("strata is left out for 12 of 24 rows (row 12 first), given for the others: give "
                                 "strata with every batch on every process, or with none")


# ---- labels of any kind ------------------------------------------------------------------------
def test_integer_labels_give_what_their_names_give():
    gap = load_metric("cross_lingual_gap")
    as_text = gap.compute(**LABELS | {"bootstrap": 0})
    codes = {"x": 0, "y": 1}
    as_ids = gap.compute(predictions=[codes[p] for p in LABELS["predictions"]],
                         references=[codes[r] for r in LABELS["references"]], languages=LABELS["languages"],
                         bootstrap=0)
    assert as_ids["accuracy"] == as_text["accuracy"] and as_ids["gap"] == as_text["gap"]
    rate = load_metric("group_rate_gap").compute(predictions=[1, 0, 1, 1], references=[1, 1, 1, 1], groups=[0, 0, 1, 1],
                                                 bootstrap=0)
    assert rate["accuracy"] == {"0": 0.5, "1": 1.0} and rate["counts"] == {"0": 2, "1": 2}
    assert all(type(n) is int for n in rate["counts"].values())
    ratio = load_metric("bias_ratio").compute(predictions=[1.0, 2.0, 3.0, 4.0], references=[1, 1, 0, 0],
                                              protected_group=1, reference_group=0, bootstrap=0, n_permutations=0)
    assert ratio["bias_ratio"] == pytest.approx(1.5 / 3.5) and ratio["group_counts"] == {"0": 2, "1": 2}
    assert all(type(n) is int for n in ratio["group_counts"].values())
    anova = load_metric("trait_anova").compute(predictions=SCORES["predictions"],
                                               references=[0] * 8 + [1] * 8 + [2] * 8, bootstrap=0)
    assert anova["f_statistic"] == pytest.approx(
        load_metric("trait_anova").compute(**SCORES, bootstrap=0)["f_statistic"])


def test_class_label_columns_pass_by_id_or_name():
    from datasets import ClassLabel, Dataset, Features, Value

    data = Dataset.from_dict({"score": [0.9, 0.8, 0.4, 0.5], "gender": [0, 0, 1, 1]},
                             features=Features({"score": Value("float64"),
                                                "gender": ClassLabel(names=["Female", "Male"])}))
    ratio = load_metric("bias_ratio")
    by_id = ratio.compute(predictions=data["score"], references=data["gender"], protected_group=0, reference_group=1,
                          bootstrap=0, n_permutations=0)
    names = data.features["gender"].int2str(data["gender"])
    by_name = ratio.compute(predictions=data["score"], references=names, protected_group="Female",
                            reference_group="Male", bootstrap=0, n_permutations=0)
    assert by_id["bias_ratio"] == by_name["bias_ratio"] == pytest.approx(0.85 / 0.45)
    assert vlfair.measures.bias_ratio is not None  # the same measure behind both
