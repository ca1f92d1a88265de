"""A probe from outside vlfair: one module and one YAML, found through the entry-point group
``vlfair.probes`` (or ``vlfair.register_probe``), listed by the CLI, run end to end, reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

TOY_MODULE = '''
"""A toy probe: mean CLIPScore of one prompt per gender, with its gap's interval and p-value."""
from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from vlfair.outputs import metric_from, metrics_per
from vlfair.probes.base import Option, Output, Probe, clip_score
from vlfair.probes.settings import Bootstrap, Permutations, ProbeSettings, placeholders


class ToySettings(ProbeSettings, Bootstrap, Permutations):
    prompt: Annotated[str, AfterValidator(placeholders("person"))] = Field(description="the prompt, with {person}")
    person: str = Field(description="the word put into the prompt")


class ToyProbe(Probe):
    name = "toy"
    Settings = ToySettings
    help = "a toy probe from a plugin"
    description = "Mean CLIPScore of one prompt per gender (a plugin's probe)."
    schemas = ("fairface",)
    required_columns = {"fairface": ("image", "gender")}
    options = (Option("--person", "person", "the word put into the prompt"),)

    def run(self, ctx, schema):
        import pandas as pd

        from vlfair import measures

        s = self.settings
        images, rows = ctx.images()
        text = ctx.texts([s.prompt.format(person=s.person)])
        scores = clip_score(images, text[[0] * len(rows)])
        gap = measures.group_score_gap(scores, ctx.column("gender", rows), n_permutations=s.n_permutations,
                                       **s.resampling)
        out = Output(settings={"prompt": s.prompt, "person": s.person}, notes=list(s.notes))
        out.metrics += metrics_per("mean_clipscore", {"person": s.person}, gap, "group_means", "group_means_ci")
        out.metrics.append(metric_from("group_score_gap", {"person": s.person}, gap, "max_gap", "max_gap_ci",
                                       "p_value"))
        out.tables["means"] = pd.DataFrame({"mean CLIPScore": gap["group_means"]}).rename_axis("gender")
        return out
'''

TOY_YAML = """\
version: 1
prompt: "a photo of a {person}"
person: doctor
notes:
  - "A toy probe, shipped by a plugin."
"""


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    """A folder holding the toy probe's module, its YAML and the distribution metadata that declares
    the entry point, as `pip install` of a plugin package would leave them on sys.path."""
    root = tmp_path_factory.mktemp("plugin")
    (root / "vlfair_toy.py").write_text(TOY_MODULE)
    (root / "vlfair_toy.yaml").write_text(TOY_YAML)
    info = root / "vlfair_toy-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vlfair-toy\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vlfair.probes]\ntoy = vlfair_toy:ToyProbe\n")
    return root


def _vlfair(plugin: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "vlfair", *argv], capture_output=True, text=True, env=env, timeout=300)


def test_a_plugin_probe_is_listed_run_and_reported_with_no_vlfair_file_changed(plugin, clip_dir, tmp_path):
    listed = _vlfair(plugin, "run", "--help")
    assert listed.returncode == 0 and "toy" in listed.stdout and "a toy probe from a plugin" in listed.stdout
    own = _vlfair(plugin, "run", "toy", "--help")
    assert own.returncode == 0 and "--person" in own.stdout and "--dataset" in own.stdout
    assert "prompt, person, bootstrap, confidence, seed, n_permutations" in " ".join(own.stdout.split())

    out = tmp_path / "out"
    run = _vlfair(plugin, "run", "toy", "--model", str(clip_dir), "--dataset", "synthetic:fairface", "--out", str(out),
                  "--dtype", "float32", "--cache-dir", str(tmp_path / "cache"), "--person", "nurse",
                  "--set", "bootstrap=50", "--set", "n_permutations=200")
    assert run.returncode == 0, run.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["probe"] == "toy" and results["probe_version"] == 1 and results["settings"]["person"] == "nurse"
    names = [m["name"] for m in results["metrics"]]
    assert names.count("mean_clipscore") == 2 and names[-1] == "group_score_gap"
    gap = results["metrics"][-1]
    assert gap["ci"] is not None and 0 < gap["p_value"] <= 1
    report = (out / "report.html").read_text()
    assert "vlfair toy probe" in report and "A toy probe, shipped by a plugin." in report
    assert "Intervals and error bars: 95% stratified-bootstrap CIs, 50 resamples" in report
    assert (out / "means.csv").exists() and (out / "means.md").exists()


def test_a_plugin_probe_s_settings_are_checked_before_any_work(plugin, tmp_path):
    bad = _vlfair(plugin, "run", "toy", "--model", "/never/loaded", "--dataset", "synthetic:fairface",
                  "--out", str(tmp_path / "out"), "--set", "prompt=a photo of a {job}")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == ("vlfair run: toy: setting prompt = 'a photo of a {job}': must hold the placeholder "
                                  "{person} and no other (it has {job}) (prompt: the prompt, with {person})")
    assert not (tmp_path / "out").exists()


def test_a_broken_plugin_is_named_and_the_others_still_run(plugin, tmp_path):
    broken = tmp_path / "broken"
    info = broken / "vlfair_broken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vlfair-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vlfair.probes]\nbroken = vlfair_missing_module:Probe\n")
    listed = _vlfair(Path(f"{broken}{os.pathsep}{plugin}"), "run", "--help")
    assert listed.returncode == 0 and "toy" in listed.stdout and "professions" in listed.stdout
    assert "probe plugin broken (vlfair_missing_module:Probe) was not loaded: ModuleNotFoundError" in listed.stderr


def test_register_probe_in_python_shows_the_probe_everywhere(tmp_path, monkeypatch):
    """vlfair.register_probe: the registry, the demo Space's choices and the generated reference."""
    import vlfair
    from vlfair.probes import registry as probes
    from vlfair.probes.reference import reference
    from vlfair.space import session

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "vlfair_toy_inline.py").write_text(TOY_MODULE.replace('name = "toy"', 'name = "toy-inline"'))
    (tmp_path / "vlfair_toy_inline.yaml").write_text(TOY_YAML)
    import importlib

    module = importlib.import_module("vlfair_toy_inline")
    probes.probe_names()  # the built-in probes found first: the registry the test restores holds them
    monkeypatch.setattr(probes, "PROBES", probes.PROBES.copy())  # the test's own registry
    assert vlfair.register_probe(module.ToyProbe) is module.ToyProbe
    assert probes.probe_names()[-1] == "toy-inline" and probes.probe_class("toy-inline").needs_dataset
    assert session.data_choices("toy-inline", hub=False) == [session.WORLD_DATA]  # no uploads declared
    assert "## `toy-inline`" not in reference()  # docs/PROBES.md is vlfair's own probes
    assert "## `toy-inline`" in reference(plugins=True) and "| `person` | `str` | `\"doctor\"` |" in reference(True)
    with pytest.raises(ValueError, match="two probes are named 'traits'"):
        vlfair.register_probe(type("Impostor", (module.ToyProbe,), {"name": "traits"}))


def test_the_probe_reference_is_generated_from_the_registry():
    """docs/PROBES.md is what `python -m vlfair.probes.reference` prints (rewrite it after changing a probe)."""
    from vlfair.probes.reference import reference

    documented = (Path(__file__).parents[1] / "docs" / "PROBES.md").read_text()
    assert documented == reference(), "docs/PROBES.md is stale: python -m vlfair.probes.reference > docs/PROBES.md"


def test_every_probe_yaml_holds_valid_settings():
    """Each probe's YAML is validated against its settings model (as every run does first)."""
    from vlfair.probes import probe_class, probe_names

    for name in probe_names():
        settings = probe_class(name).validate_settings()
        assert settings.version == probe_class(name).default_settings()["version"]


@pytest.mark.parametrize("probe, key, value, message", [
    ("professions", "prompt", 123, "setting prompt = 123: Input should be a valid string"),
    ("professions", "attributes", "race", "setting attributes = 'race': Input should be a valid list"),
    ("professions", "attributes", ["age"], "setting attributes.0 = 'age': Input should be 'race' or 'gender'"),
    ("traits", "bootstrap", True, "setting bootstrap = True: Input should be a valid integer"),
    ("traits", "confidence", 1.5, "setting confidence = 1.5: Input should be less than 1"),
    ("traits", "prompt", "a {trait} {person}", "must hold the placeholder {trait} and no other (it has {person}, "
                                              "{trait})"),
    ("multilingual", "prompt_set", "mine", "setting prompt_set = 'mine': is not one of ['study', 'vlfair'] "
                                           "(prompt_set: "),
    ("word-influence", "groups", {"a": "x", "b": "y"}, "target_group = 'male': is not one of the groups ['a', 'b']"),
    ("word-influence", "generator", {"spec": "sd", "stepz": 3}, "setting generator.stepz: not a key of generator; "
                                                                "keys: ['spec', 'steps', 'guidance', 'size',"),
    ("multilingual", "group_gaps", [{"task": "gender", "between": "race", "whithin": "race"}],
     "setting group_gaps.0.whithin: not a key of group_gaps.0; keys: ['task', 'between', 'within',"),
    ("multilingual", "independent_captions", "some", "Input should be 'first' or 'all'"),
    ("public-figures", "name_prompt", "a picture", "must hold the placeholder {} and no other (it has none)"),
    ("word-influence", "words", "nouns", "setting words = 'nouns': Input should be 'all' or 'content'"),
    ("word-influence", "seed", -1, "setting seed = -1: Input should be greater than or equal to 0"),
])
def test_a_bad_setting_names_the_key_the_value_and_what_is_allowed(probe, key, value, message):
    from vlfair.probes import ProbeError, probe_class

    with pytest.raises(ProbeError) as raised:
        probe_class(probe)({key: value})
    text = str(raised.value)
    assert text.startswith(f"{probe}: ") and message in text and len(text) < 400  # one sentence, not a dump


def test_a_bad_yaml_names_its_file(tmp_path, monkeypatch):
    import importlib

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "vlfair_toy_bad.py").write_text(TOY_MODULE)
    (tmp_path / "vlfair_toy_bad.yaml").write_text(textwrap.dedent(TOY_YAML).replace("version: 1", "version: one"))
    module = importlib.import_module("vlfair_toy_bad")
    from vlfair.probes import ProbeError

    with pytest.raises(ProbeError, match=r"toy: vlfair_toy_bad.yaml version = 'one': Input should be a valid integer"):
        module.ToyProbe()


def test_numpy_numbers_from_a_script_are_settings_but_flags_are_not_numbers():
    import numpy as np

    from vlfair.probes import ProbeError, probe_class

    settings = probe_class("traits")({"bootstrap": np.int64(100), "confidence": np.float64(0.9), "seed": np.int32(3),
                                      "per_cell": np.int64(50)}).settings
    assert settings.resampling == {"bootstrap": 100, "confidence": 0.9, "seed": 3} and settings.per_cell == 50
    assert type(settings.bootstrap) is int
    for flag in (True, np.bool_(True)):
        with pytest.raises(ProbeError, match="setting bootstrap = True: Input should be a valid integer"):
            probe_class("traits")({"bootstrap": flag})


def test_a_probe_that_makes_its_data_without_describing_it_still_writes_valid_results(tmp_path, clip_encoder):
    import vlfair
    from vlfair.outputs import Metric
    from vlfair.probes.base import Output, Probe

    class Counting(Probe):
        name = "counting"
        needs_dataset = False

        @classmethod
        def default_settings(cls):
            return {"version": 1}

        def run(self, ctx, schema):
            return Output(metrics=[Metric("count", {"what": "nothing"}, 0.0)])

    from vlfair.probes import registry as probes

    original = probes.PROBES
    probes.PROBES = original.copy()  # the test's own registry
    try:
        vlfair.register_probe(Counting)
        results = vlfair.run_probe("counting", clip_encoder, None, tmp_path)
    finally:
        probes.PROBES = original
    assert results["dataset"]["name"] == "made by the counting probe" and results["dataset"]["num_rows"] == 0
    assert len(results["dataset"]["fingerprint"]) == 16 and (tmp_path / "report.html").exists()
    assert "Intervals: 95% confidence intervals." in (tmp_path / "report.html").read_text()


def test_a_plugin_option_that_clashes_leaves_that_probe_out_and_every_command_working(plugin, tmp_path):
    clash = tmp_path / "clash"
    clash.mkdir()
    (clash / "vlfair_clash.py").write_text(TOY_MODULE.replace('name = "toy"', 'name = "clash"').replace(
        'Option("--person", "person"', 'Option("--limit", "person"').replace("class ToyProbe", "class ClashProbe"))
    (clash / "vlfair_clash.yaml").write_text(TOY_YAML)
    info = clash / "vlfair_clash-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vlfair-clash\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vlfair.probes]\nclash = vlfair_clash:ClashProbe\n")
    demo = _vlfair(Path(f"{clash}{os.pathsep}{plugin}"), "demo", "--help")
    assert demo.returncode == 0 and "vlfair run clash: left out, its option(s) ['--limit'] are vlfair run's own" \
        in demo.stderr
    listed = _vlfair(Path(f"{clash}{os.pathsep}{plugin}"), "run", "--help")
    assert listed.returncode == 0 and "toy" in listed.stdout and "clash" not in listed.stdout


def test_word_influence_says_its_intervals_are_hoeffding_bounds():
    from vlfair.probes import probe_class

    note = probe_class("word-influence")({"confidence": 0.9}).intervals_note()
    assert note.startswith("Intervals: 90% Hoeffding bounds on each influence") and "Clopper-Pearson" in note


def test_two_classes_of_one_name_are_refused_but_one_class_imported_twice_is_one_probe(monkeypatch):
    from vlfair.probes import registry as probes
    from vlfair.probes.base import Probe

    probes.probe_names()
    monkeypatch.setattr(probes, "PROBES", probes.PROBES.copy())  # the test's own registry
    first = type("Twin", (Probe,), {"name": "twin", "__module__": "plugin_a", "run": lambda self, ctx, schema: None})
    again = type("Twin", (Probe,), {"name": "twin", "__module__": "plugin_a", "run": lambda self, ctx, schema: None})
    other = type("Twin", (Probe,), {"name": "twin", "__module__": "plugin_b", "run": lambda self, ctx, schema: None})
    probes.register(first)
    probes.register(again)  # the same module's class, defined again (a module imported twice)
    with pytest.raises(ValueError, match="two probes are named 'twin': plugin_a.Twin and plugin_b.Twin"):
        probes.register(other)


def test_a_probe_setting_neutral_is_told_it_is_facts_now(monkeypatch):
    """Probe.neutral became Probe.facts (each metric's facts declared once): a class still setting it is
    refused at registration, naming what to write, rather than losing its neutral values in silence."""
    import vlfair.probes.traits as traits_module
    from vlfair.probes import register
    from vlfair.probes import registry as probes

    monkeypatch.setattr(probes, "PROBES", probes.PROBES.copy())  # the test's own registry
    old = type("OldStyle", (traits_module.TraitsProbe,), {"name": "old-style", "neutral": {"trait_anova": 0.0},
                                                         "__module__": traits_module.__name__})
    with pytest.raises(TypeError, match=r"OldStyle sets neutral: .* its facts now: facts = \{'my_metric': 0.0\}"):
        register(old)


def test_a_probe_must_define_run_or_score_and_analyze():
    """register refuses a class that can measure nothing; a class used without registering says
    what it lacks, and a probe with score but no analyze has no samples path."""
    import vlfair.probes.traits as traits_module
    from vlfair.probes import register
    from vlfair.probes.base import Probe, ProbeError

    class Nothing(Probe):
        name = "nothing-defined"
        settings_file = "traits.yaml"
        Settings = traits_module.TraitsSettings

    class ScoreOnly(Nothing):
        name = "score-only"

        def score(self, ctx, schema):
            return None

    Nothing.__module__ = ScoreOnly.__module__ = traits_module.__name__  # read traits.yaml as its settings
    for probe in (Nothing, ScoreOnly):
        with pytest.raises(TypeError, match="defines neither run"):
            register(probe)
    assert not ScoreOnly.keeps_samples()
    with pytest.raises(ProbeError, match="defines neither run nor score and analyze"):
        Nothing().run(None, None)
    with pytest.raises(ProbeError, match="defines score but not analyze"):
        ScoreOnly().run(None, None)


# ---- a probe that declares its metrics and nothing else (issue 45) --------------------------------
DECLARED_MODULE = '''
"""A toy probe that declares its metrics: each image's CLIPScore with one prompt; its mean per gender
and the gap between those means. No analyze, no comparisons: vlfair evaluates the declarations."""
from __future__ import annotations

from pydantic import Field

from vlfair.probes.base import Probe, clip_score
from vlfair.probes.declared import Declared, Mean, Range
from vlfair.probes.settings import Bootstrap, ProbeSettings
from vlfair.samples import Samples


class DeclaredSettings(ProbeSettings, Bootstrap):
    prompt: str = Field(description="the prompt every image is scored with")


class DeclaredProbe(Probe):
    name = "toy-declared"
    Settings = DeclaredSettings
    help = "a plugin's probe that only declares its metrics"
    description = "Mean CLIPScore of one prompt per gender and their gap, declared."
    schemas = ("fairface",)
    required_columns = {"fairface": ("image", "gender")}

    def score(self, ctx, schema):
        import pandas as pd

        images, rows = ctx.images()
        frame = ctx.identity(rows)
        frame["gender"] = ctx.column("gender", rows)
        frame["clipscore"] = clip_score(images, ctx.texts([self.settings.prompt])[[0] * len(rows)])
        return Samples(pd.DataFrame(frame), {"prompt": self.settings.prompt})

    def declare(self, samples):
        genders = sorted(set(samples.column("gender").tolist()))
        return [*(Declared("mean_clipscore", {"gender": g}, Mean("clipscore", g), group="gender") for g in genders),
                Declared("group_score_gap", {}, Range("clipscore"), group="gender")]
'''

DECLARED_YAML = """\
version: 1
prompt: "a photo of a doctor"
bootstrap: 400
"""


@pytest.fixture(scope="module")
def declared_plugin(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("declared-plugin")
    (root / "vlfair_declared.py").write_text(DECLARED_MODULE)
    (root / "vlfair_declared.yaml").write_text(DECLARED_YAML)
    info = root / "vlfair_declared-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vlfair-declared\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vlfair.probes]\ntoy-declared = vlfair_declared:DeclaredProbe\n")
    return root


def test_a_probe_that_only_declares_its_metrics_runs_rescores_and_compares(declared_plugin, clip_dir, siglip_dir,
                                                                          tmp_path, monkeypatch):
    """Issue 45: one module and one YAML, two metrics declared and nothing else. Its runs report each
    metric (the value is the samples' group mean and the measures' gap, the interval a bootstrap's),
    rescoring reproduces them, and vlfair compare compares two models' runs with paired intervals."""
    import pandas as pd

    from vlfair import measures
    from vlfair.cli import main
    from vlfair.probes import registry
    from vlfair.samples import read_samples

    # found through its entry point as an installed plugin is, in this process (a subprocess per command
    # took 21 s, most of it importing torch four times); the registry is the test's own
    monkeypatch.syspath_prepend(str(declared_plugin))
    monkeypatch.setattr(registry, "PROBES", registry.PROBES.copy())  # (a copy reads the entry points again)
    assert "toy-declared" in registry.probe_names()
    runs = {}
    for model, path in (("clip", clip_dir), ("siglip", siglip_dir)):
        runs[model] = tmp_path / model
        assert main(["run", "toy-declared", "--model", str(path), "--dataset", "synthetic:fairface", "--out",
                     str(runs[model]), "--dtype", "float32", "--cache-dir", str(tmp_path / "cache")]) == 0
    results = json.loads((runs["clip"] / "results.json").read_text())
    samples, _ = read_samples(runs["clip"] / "samples.parquet")
    frame = samples.frame
    means = frame["clipscore"].astype(float).groupby(frame["gender"]).mean()  # (the column is float32)
    gap = measures.group_score_gap(frame["clipscore"].to_numpy(), frame["gender"].to_numpy(), bootstrap=0,
                                   n_permutations=0)
    found = {(m["name"], m["subset"].get("gender")): m for m in results["metrics"]}
    assert sorted(found) == [("group_score_gap", None), *(("mean_clipscore", g) for g in sorted(means.index))]
    for gender, mean in means.items():
        assert found["mean_clipscore", gender]["value"] == pytest.approx(mean, rel=1e-12)
    assert found["group_score_gap", None]["value"] == pytest.approx(gap["max_gap"], rel=1e-12)
    for metric in found.values():  # 400 resamples: an interval around the value, of some width
        low, high = metric["ci"]
        assert low < metric["value"] < high
    assert pd.read_csv(runs["clip"] / "metrics.csv").shape[0] == len(found)

    assert main(["rescore", str(runs["clip"]), "--out", str(tmp_path / "rescored")]) == 0
    assert json.loads((tmp_path / "rescored" / "results.json").read_text())["metrics"] == results["metrics"]

    assert main(["compare", str(runs["clip"]), str(runs["siglip"]), "--out", str(tmp_path / "compared"),
                 "--bootstrap", "300", "--permutations", "200"]) == 0
    differences = json.loads((tmp_path / "compared" / "comparison.json").read_text())["differences"]
    assert sorted((d["metric"], d["subset"].get("gender")) for d in differences) == sorted(found)
    other = {(m["name"], m["subset"].get("gender")): m["value"]
             for m in json.loads((runs["siglip"] / "results.json").read_text())["metrics"]}
    for d in differences:
        key = (d["metric"], d["subset"].get("gender"))
        assert d["value_a"] == pytest.approx(found[key]["value"]) and d["value_b"] == pytest.approx(other[key])
        assert d["difference_ci"][0] <= d["difference"] <= d["difference_ci"][1] and 0 < d["p_value"] <= 1
    gap_entry = next(d for d in differences if d["metric"] == "group_score_gap")
    assert gap_entry["neutral"] == 0.0 and gap_entry["distance_difference_ci"] is not None  # the facts: a bias


# ---- a kind of model of its own (issue 45) --------------------------------------------------------
class _BrightnessModel:
    """A model of a kind no vlfair module knows: it scores an image against the i-th of n texts by how
    near the image's mean brightness is to i / (n - 1)."""

    kind = "brightness"
    name = spec = "toy:brightness"

    def identity(self) -> dict:
        return {"spec": self.spec, "revision": None, "dtype": "float64"}


def _brightness(dataset, rows) -> np.ndarray:
    return np.array([np.asarray(dataset[int(r)]["image"].convert("L"), dtype=float).mean() / 255 for r in rows])


def _brightness_scorer():
    from vlfair.probes.asking import TextScores
    from vlfair.probes.scorers import Scorer

    class BrightnessScorer(Scorer):
        """One module's worth: the rows it reads and s(image, text); embeddings it has none of."""

        kind = "brightness"

        def rows(self):
            return np.arange(len(self.dataset))

        def text_scores(self, texts, asked=None, answers=None, question=None, within=None):
            rows = self.rows() if within is None else np.asarray(within)
            values = -np.abs(_brightness(self.dataset, rows)[:, None] - np.linspace(0, 1, len(texts))[None])
            shifted = np.exp(10 * (values - values.max(axis=1, keepdims=True)))
            return TextScores(values, shifted / shifted.sum(axis=1, keepdims=True), rows, "brightness",
                              np.ones(len(rows), dtype=bool))
    return BrightnessScorer


def test_a_kind_of_model_of_its_own_is_one_scorer(tmp_path, monkeypatch):
    """Issue 45: a new kind of model is a Scorer subclass registered under its kind. The professions
    probe measures it by the probability of each image's own profession (what the scorer gives), its
    results name the kind, a part that reads embeddings refuses it by name, and a kind without a scorer
    is refused naming the kinds known."""
    from vlfair.data.synthetic import make_synthetic
    from vlfair.probes import ProbeError, run_probe, scorers
    from vlfair.samples import read_samples

    monkeypatch.setattr(scorers, "SCORERS", scorers.SCORERS.copy())
    scorers.register_scorer(_brightness_scorer())
    data = make_synthetic("professions", size=48)
    settings = {"score": "probability", "bootstrap": 50, "n_permutations": 50, "attributes": ["gender"]}
    results = run_probe("professions", _BrightnessModel(), data, out_dir=tmp_path / "run", settings=settings)
    assert results["model"]["kind"] == "brightness"
    samples, _ = read_samples(tmp_path / "run" / "samples.parquet")
    frame = samples.frame
    names = sorted(set(frame["profession"]), key=[p for p in results["probe_settings"]["layout"]["profession"]].index)
    values = -np.abs(_brightness(data, frame["row"])[:, None] - np.linspace(0, 1, len(names))[None])
    probabilities = np.exp(10 * (values - values.max(axis=1, keepdims=True)))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    own = probabilities[np.arange(len(frame)), [names.index(p) for p in frame["profession"]]]
    np.testing.assert_allclose(frame["probability"], 100 * own, rtol=1e-12)
    assert any(m["name"] == "mean_probability" for m in results["metrics"])

    with pytest.raises(ProbeError, match="is a brightness model: this part of the probe reads image and text "
                                         "embeddings"):
        run_probe("professions", _BrightnessModel(), data, out_dir=None, settings={"score": "clipscore"})
    half = type("Half", (scorers.Scorer,), {"kind": "half", "rows": lambda self: np.arange(0)})
    with pytest.raises(TypeError, match="Half does not define text_scores"):
        scorers.register_scorer(half)
    with pytest.raises(TypeError, match="declares no kind"):
        scorers.register_scorer(type("Kindless", (_brightness_scorer(),), {"kind": ""}))
    unknown = type("Unknown", (_BrightnessModel,), {"kind": "telepathic"})()
    with pytest.raises(ProbeError, match=r"of kind 'telepathic', which no scorer serves \(known kinds: brightness, "
                                         r"contrastive, generative\)"):
        run_probe("professions", unknown, data, out_dir=None, settings=settings)


# ---- a dataset of its own (issue 45) --------------------------------------------------------------
def _toy_dataset_spec():
    """A plugin's dataset in one spec: portraits labelled with a mood, its synthetic twin, a subset,
    and a builder of its raw release (a folder of images and a metadata.csv)."""
    from vlfair.data.build import metadata_builder
    from vlfair.data.registry import DatasetSpec
    from vlfair.data.schemas import Column, Schema
    from vlfair.tiny import generated_image

    moods = ("calm", "tense")

    def twin(size, rng, seed, subset):
        return {"image": [generated_image(seed * 1000 + i) for i in range(size)],
                "mood": [moods[i % 2] for i in range(size)], "gender": [("Male", "Female")[i // 2 % 2]
                                                                         for i in range(size)]}

    schema = Schema("moods", (Column("image", "image"), Column("mood", vocabulary=moods),
                              Column("gender", vocabulary=("Male", "Female"))), "portraits by mood")
    return DatasetSpec(schema, twin=twin, twin_size=24,
                       subsets={"calm": lambda ds: ds.filter(lambda b: [m == "calm" for m in b["mood"]], batched=True)},
                       builder=metadata_builder("moods"), sample_by=("mood", "gender"))


MOODS_PROBE = '''
from vlfair.probes.base import Probe, clip_score
from vlfair.probes.declared import Declared, Range
from vlfair.probes.settings import ProbeSettings
from vlfair.samples import Samples


class MoodProbe(Probe):
    name, Settings, schemas = "moods-gap", ProbeSettings, ("moods",)
    required_columns = {"moods": ("image", "mood")}

    def score(self, ctx, schema):
        import pandas as pd

        images, rows = ctx.images()
        frame = ctx.identity(rows)
        frame["mood"] = ctx.column("mood", rows)
        frame["score"] = clip_score(images, ctx.texts(["a calm face"])[[0] * len(rows)])
        return Samples(pd.DataFrame(frame), {})

    def declare(self, samples):
        return [Declared("group_score_gap", {"between": "mood"}, Range("score"), group="mood")]
'''


def test_a_dataset_of_its_own_is_one_registered_spec(tmp_path, monkeypatch, clip_encoder, capsys):
    """Issue 45: a new dataset is one DatasetSpec. Its twin loads as synthetic:moods (checked against
    its schema), its subset and an unknown one are what its spec says, `vlfair prepare moods` builds its
    raw release into a prepared folder with a card that load_dataset reads back, a bad label there is one
    line and exit 2, and a probe runs on it."""
    import vlfair
    from vlfair.cli import main
    from vlfair.data import registry
    from vlfair.probes import measure_probe
    from vlfair.tiny import generated_image

    monkeypatch.setattr(registry, "DATASETS", registry.DATASETS.copy())
    registry.dataset_names()  # the studies' found first
    vlfair.data.register_dataset(_toy_dataset_spec())
    assert "moods" in registry.dataset_names() and "moods" in registry.buildable()

    twin = vlfair.load_dataset("synthetic:moods")
    assert twin.num_rows == 24 and set(twin["mood"]) == {"calm", "tense"}
    assert set(vlfair.load_dataset("synthetic:moods", subset="calm")["mood"]) == {"calm"}
    with pytest.raises(ValueError, match=r"moods has no subset 'happy'; subsets: \['calm'\]"):
        vlfair.load_dataset("synthetic:moods", subset="happy")

    raw = tmp_path / "raw"
    raw.mkdir()
    rows = ["file,mood,gender"]
    for i in range(8):
        generated_image(i).save(raw / f"{i}.png")
        rows.append(f"{i}.png,{('calm', 'tense')[i % 2]},{('Male', 'Female')[i // 2 % 2]}")
    (raw / "metadata.csv").write_text("\n".join(rows) + "\n")
    assert main(["prepare", "moods", "--source", str(raw), "--out", str(tmp_path / "prepared")]) == 0
    prepared = vlfair.load_dataset("moods", tmp_path / "prepared")
    assert prepared.num_rows == 8 and prepared["mood"][:2] == ["calm", "tense"]
    card = (tmp_path / "prepared" / "README.md").read_text()
    # one's own data (issue 66): named for its folder, its licence unknown, in the schema of moods
    assert "# raw (prepared by vlfair)" in card and "schema: moods" in card and "license: unknown" in card
    with pytest.raises(SystemExit) as exited:  # the files its builder reads, stated by metadata_builder
        main(["prepare", "moods", "--help"])
    assert exited.value.code == 0
    assert "metadata.csv | metadata.jsonl | metadata.parquet: file_name, mood, gender" in capsys.readouterr().out

    generated_image(8).save(raw / "8.png")
    (raw / "metadata.csv").write_text("\n".join([*rows, "8.png,sleepy,Male"]) + "\n")
    capsys.readouterr()
    assert main(["prepare", "moods", "--source", str(raw), "--out", str(tmp_path / "again")]) == 2
    said = capsys.readouterr().err
    assert "vlfair prepare moods: 1 bad rows" in said and "metadata.csv row 8: column 'mood' has 'sleepy'" in said
    assert not (tmp_path / "again").exists()

    monkeypatch.syspath_prepend(str(tmp_path))  # a probe of the new dataset's schema, one module and its YAML
    (tmp_path / "vlfair_moods.py").write_text(MOODS_PROBE)
    (tmp_path / "vlfair_moods.yaml").write_text("version: 1\n")
    import vlfair_moods

    run = measure_probe(vlfair_moods.MoodProbe(), clip_encoder, tmp_path / "prepared", schema="moods",
                        cache_dir=tmp_path)
    gap = run.results["metrics"][0]
    assert gap["name"] == "group_score_gap" and gap["value"] > 0 and run.results["dataset"]["num_rows"] == 8
