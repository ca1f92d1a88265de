"""One glob-driven test over every evaluate module in metrics/ (and any future one): huggingface/evaluate's
own common module test, doctests, card, Space YAML, API, module type."""

from __future__ import annotations

import ast
import doctest
import importlib.util
import inspect
import re
from pathlib import Path
from unittest.mock import patch

import evaluate
import pytest
import yaml

from vlfair.measures import MEASURES
from vlfair.metrics import available_metrics, metrics_dir, module_type

MODULES = sorted(p.parent for p in Path(__file__).resolve().parents[1].glob("metrics/*/*.py")
                 if p.stem == p.parent.name)
SECTIONS = ["## Description", "## How to Use", "### Inputs", "### Output Values", "### Examples",
            "## Limitations and Bias", "## Citation", "## Further References"]  # evaluate's card template
SPACE_COLORS = {"red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray"}


def _load(folder: Path):
    spec = importlib.util.spec_from_file_location(f"vlfair_metric_{folder.name}", folder / f"{folder.name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_module_per_measure_and_all_packaged():
    assert [m.name for m in MODULES] == sorted(MEASURES)
    assert available_metrics() == sorted(MEASURES)
    assert metrics_dir().resolve() == MODULES[0].parent.resolve()


@pytest.mark.parametrize("folder", MODULES, ids=lambda f: f.name)
def test_doctests_pass(folder):
    module = _load(folder)
    examples = doctest.DocTestParser().get_examples(module._KWARGS_DESCRIPTION)
    assert len(examples) >= 2, "at least two >>> examples"
    test = doctest.DocTestParser().get_doctest(module._KWARGS_DESCRIPTION, {}, folder.name, str(folder), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} doctest failures in {folder.name} (see output above)"


@pytest.mark.parametrize("folder", MODULES, ids=lambda f: f.name)
def test_evaluates_own_common_module_test(folder, monkeypatch):
    """huggingface/evaluate's tests/test_metric_common.py, LocalModuleTest.test_load, step by step, for a
    module folder of this project: evaluate's loader finds the module in its local folder (offline) and
    its main class; ``_compute`` takes no ``**kwargs``; the module's doctests run with evaluate.load
    answering from the local folders and pass (more than one example)."""
    doctest.ELLIPSIS_MARKER = "[...]"  # as evaluate's test sets it
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    declared = module_type(folder.name)
    factory = evaluate.loading.evaluation_module_factory(str(folder), module_type=declared)
    module = importlib.import_module(factory.module_path)
    main_class = evaluate.loading.import_main_class(module.__name__)
    parameters = inspect.signature(main_class._compute).parameters
    assert all(p.kind != p.VAR_KEYWORD for p in parameters.values()), "no **kwargs"
    local = evaluate.load  # evaluate's use_local_metrics: every evaluate.load reads the local folders
    with patch("evaluate.load", side_effect=lambda name, *a, **k: local(str(MODULES[0].parent / name.split("/")[-1]),
                                                                         *a, **k)):
        results = doctest.testmod(module, verbose=False, raise_on_error=True)
    assert results.failed == 0 and results.attempted > 1
    instance = evaluate.load(str(folder), module_type=declared)  # the loader checks the type asked for
    assert instance.module_type == declared and instance.features is not None
    wrong = next(t for t in ("metric", "comparison", "measurement") if t != declared)
    with pytest.raises(TypeError, match=f"Found module of module type '{declared}'"):
        evaluate.load(str(folder), module_type=wrong)


@pytest.mark.parametrize("folder", MODULES, ids=lambda f: f.name)
def test_module_contract(folder):
    module = _load(folder)
    classes = [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]
    assert len(classes) == 1
    cls = classes[0]
    info = cls()._info()
    assert info.features is not None and info.citation.strip().startswith("@")
    parameters = inspect.signature(cls._compute).parameters.values()
    assert [p.name for p in parameters if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)] == []
    source = (folder / f"{folder.name}.py").read_text()
    # one module type, said alike by the class, _info, vlfair.metrics (install-metrics prints it) and the card
    kind = {"metric": evaluate.Metric, "measurement": evaluate.Measurement, "comparison": evaluate.Comparison}
    assert info.module_type == module_type(folder.name) and kind[info.module_type] in cls.__mro__
    assert type(info).__name__ == f"{info.module_type.capitalize()}Info"
    card = (folder / "README.md").read_text()
    front = yaml.safe_load(re.match(r"^---\n(.*?)\n---\n", card, re.S).group(1))
    assert info.module_type in front["tags"] and not {"metric", "measurement", "comparison"} - {info.module_type} & set(
        front["tags"]), "the card's tags name the module type, and no other"
    assert f"# {info.module_type.capitalize()} Card for {folder.name}" in card
    if info.module_type != "metric":  # evaluate.load's default type is metric: the card shows the type to ask for
        assert f'evaluate.load("vlfair/{folder.name}", module_type="{info.module_type}")' in card
    assert f"vlfair.measures.{folder.name}(" in source, "_compute must call the measure of the same name"
    # evaluate finds requirements by parsing imports: one plain `import x` per line, nothing heavier
    imports = {alias.name for node in ast.parse(source).body if isinstance(node, ast.Import) for alias in node.names}
    assert {"evaluate", "vlfair.evaluate_support", "vlfair.measures"} <= imports <= {
        "datasets", "evaluate", "vlfair.evaluate_support", "vlfair.measures"}
    assert not [n for n in ast.parse(source).body if isinstance(n, ast.ImportFrom)]


@pytest.mark.parametrize("folder", MODULES, ids=lambda f: f.name)
def test_card_and_space_files(folder):
    card = (folder / "README.md").read_text()
    match = re.match(r"^---\n(.*?)\n---\n", card, re.S)
    assert match, "the card starts with YAML front matter"
    config = yaml.safe_load(match.group(1))
    assert config["sdk"] == "gradio" and config["app_file"] == "app.py" and (folder / config["app_file"]).exists()
    assert config["title"] == folder.name and isinstance(config["sdk_version"], str)
    assert config["colorFrom"] in SPACE_COLORS and config["colorTo"] in SPACE_COLORS
    assert {"evaluate", "fairness"} <= set(config["tags"]) and config["description"]
    positions = [card.find(section) for section in SECTIONS]
    assert -1 not in positions, f"missing sections: {[s for s, p in zip(SECTIONS, positions) if p < 0]}"
    assert positions == sorted(positions), "sections out of order"
    assert "```bibtex" in card
    app = (folder / "app.py").read_text()
    assert "metric_widget" in app and f'evaluate.load("vlfair/{folder.name}")' in app
    requirements = (folder / "requirements.txt").read_text().split()
    assert "vlfair" in requirements and any(r.startswith("evaluate") for r in requirements)


def test_streaming_batches_equal_one_call_and_optional_columns_may_be_omitted():
    """Training loops feed modules with add_batch/add; optional columns can be left out."""
    import vlfair

    anova = vlfair.load_metric("trait_anova")
    scores = [0.71, 0.74, 0.69, 0.62, 0.60, 0.65, 0.70, 0.72]
    races = ["East Asian"] * 3 + ["Black"] * 3 + ["White"] * 2
    anova.add_batch(predictions=scores[:4], references=races[:4])
    anova.add_batch(predictions=scores[4:7], references=races[4:7])
    anova.add(prediction=scores[7], reference=races[7])
    streamed = anova.compute(bootstrap=0)
    assert streamed == anova.compute(predictions=scores, references=races, bootstrap=0)
    assert streamed["df_within"] == 5.0

    rate_gap = vlfair.load_metric("group_rate_gap")
    rate_gap.add_batch(predictions=["a", "b"], references=["a", "a"], groups=["x", "x"])
    rate_gap.add_batch(predictions=["a", "a"], references=["a", "a"], groups=["y", "y"])
    assert rate_gap.compute(bootstrap=0)["gap"] == 0.5
    with_languages = rate_gap.compute(predictions=["a", "b", "a", "a"], references=["a"] * 4,
                                      groups=["x", "x", "y", "y"], languages=["de"] * 4, bootstrap=0)
    assert with_languages["gap"] == {"de": 0.5}
