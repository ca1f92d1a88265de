"""Shipping the evaluate modules: inside the wheel, loadable offline, publishable to Spaces."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import vlfair
from vlfair.cli import main
from vlfair.measures import MEASURES
from vlfair.publish import publish_metrics

REPO = Path(__file__).resolve().parents[1]


def test_load_metric_unknown_name_lists_the_modules():
    with pytest.raises(ValueError, match="unknown vlfair metric 'accuracy'; available: vlfair/bias_difference, "
                                         "vlfair/bias_ratio, vlfair/cross_lingual_gap"):
        vlfair.load_metric("accuracy")


def test_dry_run_lists_every_space_and_touches_no_network(monkeypatch, capsys):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", lambda *a, **k: pytest.fail("dry run must not reach the Hub"))
    assert main(["publish-metrics", "--namespace", "acme", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(MEASURES)
    for name in MEASURES:
        line = next(line for line in out if f"metrics/{name} ->" in line)
        assert f"spaces/acme/{name}" in line and f"{name}.py, README.md, app.py, requirements.txt" in line
        assert f"vlfair=={vlfair.__version__}" in line


class FakeHub:
    def __init__(self):
        self.created, self.uploaded = [], {}

    def create_repo(self, repo_id, repo_type, space_sdk, exist_ok):
        self.created.append((repo_id, repo_type, space_sdk, exist_ok))

    def upload_folder(self, folder_path, repo_id, repo_type, commit_message):
        folder = Path(folder_path)
        self.uploaded[repo_id] = {p.name: p.read_text() for p in folder.iterdir()}


def test_publish_pins_vlfair_and_points_app_at_the_namespace():
    hub = FakeHub()
    publish_metrics("acme", api=hub, names=["bias_ratio", "ranking_skew"])
    assert hub.created == [("acme/bias_ratio", "space", "gradio", True), ("acme/ranking_skew", "space", "gradio", True)]
    files = hub.uploaded["acme/bias_ratio"]
    assert sorted(files) == ["README.md", "app.py", "bias_ratio.py", "requirements.txt"]
    assert files["requirements.txt"].splitlines()[0] == f"vlfair=={vlfair.__version__}"
    assert "vlfair\n" not in files["requirements.txt"]
    assert 'evaluate.load("acme/bias_ratio")' in files["app.py"]
    assert files["bias_ratio.py"] == (REPO / "metrics/bias_ratio/bias_ratio.py").read_text()
    assert "vlfair\n" in (REPO / "metrics/bias_ratio/requirements.txt").read_text()  # the checkout is untouched


def test_publish_rejects_bad_namespace():
    with pytest.raises(ValueError, match="namespace must be a Hub user"):
        publish_metrics("acme/x", dry_run=True)


def test_wheel_ships_metrics_and_loads_them_offline(tmp_path):
    """Build the wheel, install it alone into a directory, and load a metric from there offline."""
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "dist"), "-q"], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("vlfair-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for measure in MEASURES:
        for file in (f"{measure}.py", "README.md", "app.py", "requirements.txt"):
            assert f"vlfair/_metrics/{measure}/{file}" in names
    # every module and data file of the package, subpackages included (a package list once missed t2i and demo)
    package_files = {p.relative_to(REPO).as_posix() for p in (REPO / "vlfair").rglob("*")
                     if p.suffix in (".py", ".yaml", ".json") and "__pycache__" not in p.parts}
    # and the shipped demo world encoders, every file of them (weights, tokenizer, processor, world.json)
    package_files |= {p.relative_to(REPO).as_posix() for p in (REPO / "vlfair" / "demo" / "encoders").rglob("*")
                      if p.is_file()}
    assert any(name.endswith("encoders/biased/model.safetensors") for name in package_files)
    assert package_files <= names, sorted(package_files - names)
    target = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target),
                              str(wheel), "-q"],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-2000:]
    site = repr(str(target))
    code = (f"import vlfair; assert vlfair.__file__.startswith({site}), vlfair.__file__; "
            "m = vlfair.load_metric('bias_ratio'); "
            "print(round(m.compute(predictions=[70.13, 70.13, 81.85, 81.85], references=['w', 'w', 'm', 'm'], "
            "protected_group='w', reference_group='m', bootstrap=0)['bias_ratio'], 4)); "
            "import runpy, evaluate; from vlfair.metrics import metrics_dir; "
            "space = runpy.run_path(str(metrics_dir() / 'group_rate_gap' / 'app.py'), run_name='space'); "
            f"assert str(metrics_dir()).startswith({site}) and space['demo'].title == 'Metric: group_rate_gap'; "
            "assert evaluate.load('vlfair/group_rate_gap').compute(**space['EXAMPLE'], bootstrap=0)['gap']; "
            "from vlfair.demo.shipped import WORLDS, shipped_path; "
            f"assert all(str(shipped_path(p)).startswith({site}) for p in WORLDS.values()), "
            f"'demo encoders not shipped'")
    env = {**os.environ, "PYTHONPATH": str(target), "HF_HUB_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1",
           "HF_HOME": str(tmp_path / "hf-home"), "HF_MODULES_CACHE": str(tmp_path / "hf-home" / "modules")}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "0.8568"


def test_evaluate_load_from_a_checkout_path(monkeypatch):
    import evaluate

    monkeypatch.chdir(REPO)
    module = evaluate.load("metrics/group_score_gap")
    result = module.compute(predictions=[1.0, 2.0, 5.0, 6.0], references=["a", "a", "b", "b"], bootstrap=0)
    assert result["top_group"] == "b" and result["max_gap"] == 4.0
