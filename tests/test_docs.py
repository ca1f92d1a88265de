"""The docs a newcomer reads (issue 63 item 6): README.md short enough to read, its links and worked
examples true; benchmarks/README.md a section per benchmark script, each saying how to run it."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BENCHMARKS = ROOT / "benchmarks"
MAX_README_LINES = 250
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
MAX_ARCHITECTURE_LINES = 200


def _section(text: str, heading: str) -> str:
    """The text under ``## heading`` up to the next ``## `` heading."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation but - and _ dropped, spaces as -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _own_registries(monkeypatch) -> None:
    """The test's own probes, scorers and datasets: what a doc's example registers leaves vlfair's alone."""
    from vlfair.data import registry as datasets
    from vlfair.probes import registry as probes
    from vlfair.probes import scorers

    monkeypatch.setattr(probes, "PROBES", probes.PROBES.copy())
    monkeypatch.setattr(scorers, "SCORERS", scorers.SCORERS.copy())
    monkeypatch.setattr(datasets, "DATASETS", datasets.DATASETS.copy())


def test_readme_is_short_enough_to_read():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines, more than {MAX_README_LINES}: move the detail to docs/DESIGN.md, "
        "docs/ARCHITECTURE.md or benchmarks/README.md and link it")


def test_benchmarks_readme_has_a_section_per_script():
    text = (BENCHMARKS / "README.md").read_text()
    scripts = sorted(path.name for path in BENCHMARKS.glob("*.py"))
    sections = re.findall(r"^## (\S+\.py)$", text, re.M)
    assert sorted(sections) == scripts, "benchmarks/README.md: one '## NAME.py' section per benchmarks/*.py"
    for script in scripts:
        assert f"python benchmarks/{script}" in _section(text, script), f"{script}'s section: how to run it"


@pytest.mark.parametrize("doc", ["README.md", "benchmarks/README.md"])
def test_relative_links_lead_to_files_and_headings_that_exist(doc):
    path = ROOT / doc
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked offline
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT)}")
        elif anchor and anchor not in {_slug(h) for h in re.findall(r"^#+ (.+)$", linked.read_text(), re.M)}:
            broken.append(f"{target}: no heading with that anchor in {linked.relative_to(ROOT)}")
    assert not broken, f"{doc}: broken links: {broken}"


def test_readme_names_every_command():
    import argparse

    from vlfair.cli import build_parser

    (commands,) = [a.choices for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    text = README.read_text()
    assert not [c for c in commands if f"vlfair {c}" not in text], "README.md names every vlfair command"


def test_readme_s_own_probe_runs_with_its_measure_s_facts(tmp_path, monkeypatch):
    """README's "Your own probe", its module and YAML written as a package: the probe runs on a synthetic
    FairFace with the demo world's shipped encoder, reports the declared metrics, and results.json carries
    the facts of its own measure (neutral 0, never below 0) under ``measures``."""
    from vlfair.probes.runner import measure_probe

    section = _section(README.read_text(), "Your own probe")
    (module,), (settings,) = _blocks(section, "python"), _blocks(section, "yaml")
    package = tmp_path / "my_package"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mood_gap.py").write_text(module)
    (package / "mood_gap.yaml").write_text(settings)
    monkeypatch.syspath_prepend(str(tmp_path))
    _own_registries(monkeypatch)
    try:
        probe_module = importlib.import_module("my_package.mood_gap")
        probe = probe_module.MoodGap({"bootstrap": 200})
        from vlfair.data.loading import load_dataset

        run = measure_probe(probe, str(ROOT / "vlfair" / "demo" / "encoders" / "biased"),
                            load_dataset("synthetic:fairface", size=40), cache_dir=tmp_path / "cache", dtype="float32")
    finally:
        for name in ("my_package.mood_gap", "my_package"):
            sys.modules.pop(name, None)
    metrics = {(m["name"], tuple(m["subset"].items())): m for m in run.results["metrics"]}
    assert sorted(metrics) == [("mean_clipscore", (("gender", "Female"),)), ("mean_clipscore", (("gender", "Male"),)),
                               ("mood_gap", ())]
    gap = metrics["mood_gap", ()]
    assert gap["value"] >= 0 and gap["ci"][0] <= gap["value"] <= gap["ci"][1]
    facts = run.results["measures"]["mood_gap"]
    assert (facts["neutral"], facts["low"], facts["high"]) == (0.0, 0.0, None)


def test_readme_s_training_script_runs():
    """README's "In a training script": evaluate.load of the shipped modules (installed into this session's
    modules cache), the number README states, and evaluate.combine fed batch by batch."""
    import numpy as np

    from vlfair.metrics import install_metrics

    install_metrics(["bias_ratio", "trait_anova"])
    (code,) = _blocks(_section(README.read_text(), "In a training script"), "python")
    lines = code.rstrip().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("bias_ratio.compute("))
    lines[first] = "FIRST = " + lines[first]
    lines[-1] = "LAST = " + lines[-1]
    rng = np.random.default_rng(0)
    batches = [{"gender": list(rng.choice(["Female", "Male"], 24))} for _ in range(3)]
    namespace = {"loader": batches, "clip_scores": lambda batch: list(rng.normal(30, 2, len(batch["gender"])))}
    exec(compile("\n".join(lines), "README.md (In a training script)", "exec"), namespace)
    stated = float(re.search(r"# (\d\.\d+)", "\n".join(lines[first:first + 2])).group(1))  # README's 0.8568
    assert namespace["FIRST"] == pytest.approx(stated, abs=5e-5)
    assert {"bias_ratio", "f_statistic"} <= set(namespace["LAST"])


def test_architecture_is_short_enough_to_read():
    lines = ARCHITECTURE.read_text().splitlines()
    assert len(lines) <= MAX_ARCHITECTURE_LINES, f"docs/ARCHITECTURE.md has {len(lines)} lines"


def test_architecture_s_four_examples_run(tmp_path, monkeypatch, clip_encoder):
    """ARCHITECTURE's worked examples, each as written: the probe registers and runs, reporting its declared
    metrics; the measure's statistic, declared on a row set, is the spread of the groups' standard deviations
    (brute force); the scorer kind registers with no capability; the dataset registers and its twin loads."""
    import numpy as np
    import pandas as pd

    from vlfair.data.loading import load_dataset
    from vlfair.probes import probe_class
    from vlfair.probes.declared import Declared, evaluate
    from vlfair.probes.runner import measure_probe
    from vlfair.probes.scorers import SCORERS
    from vlfair.samples import Samples

    probe_code, measure_code, scorer_code, dataset_code = _blocks(ARCHITECTURE.read_text(), "python")
    _own_registries(monkeypatch)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, code in (("arch_probe", probe_code), ("arch_measure", measure_code), ("arch_scorer", scorer_code),
                       ("arch_dataset", dataset_code)):
        (tmp_path / f"{name}.py").write_text(code)
        monkeypatch.delitem(sys.modules, name, raising=False)
    (tmp_path / "arch_probe.yaml").write_text("version: 1\nprompt: a photo of a calm person\nbootstrap: 100\n")
    # (each module stays in sys.modules until the test ends: monkeypatch takes them out again)
    probe_module = importlib.import_module("arch_probe")
    measure_module = importlib.import_module("arch_measure")
    scorer_module = importlib.import_module("arch_scorer")
    importlib.import_module("arch_dataset")

    assert probe_class("mood-gap") is probe_module.MoodGap
    run = measure_probe(probe_module.MoodGap(), clip_encoder, load_dataset("synthetic:fairface", size=40),
                        cache_dir=tmp_path / "cache")
    assert {m["name"] for m in run.results["metrics"]} == {"mean_clipscore", "group_score_gap"}
    assert run.results["measures"]["group_score_gap"]["neutral"] == 0.0

    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"score": rng.normal(size=45) * np.repeat([1.0, 2.0, 3.0], 15),
                          "gender": np.repeat(["a", "b", "c"], 15)})
    declared = Declared(measure_module.SCORE_SPREAD, {}, measure_module.spread("score"), group="gender")
    (spread,) = evaluate(Samples(frame, {}), [declared], bootstrap=50)
    deviations = frame.groupby("gender")["score"].std(ddof=1)
    assert spread.value == pytest.approx(deviations.max() - deviations.min(), rel=1e-12)
    assert spread.facts == measure_module.SCORE_SPREAD.facts and spread.ci[0] <= spread.value <= spread.ci[1]

    from vlfair.probes import scorers

    assert scorers.SCORERS.get("brightness") is scorer_module.Brightness
    assert scorer_module.Brightness.capabilities == frozenset() and "brightness" not in SCORERS  # ours alone

    moods = load_dataset("synthetic:moods", size=8)
    assert moods.num_rows == 8 and set(moods["mood"]) == {"calm", "tense"}
