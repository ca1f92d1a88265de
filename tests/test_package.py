"""The installed package: CLI contract, lazy imports, the self-check behind `vlfair demo`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import vlfair
from vlfair.cli import main
from vlfair.probes import probe_names

import forking


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vlfair", *args], capture_output=True, text=True, timeout=300)


def test_help_lists_every_design_subcommand():
    result = _run("--help")
    assert result.returncode == 0
    for command in ("demo", "run", "prepare", "leaderboard", "card-results", "publish-metrics"):
        assert command in result.stdout


def test_every_package_of_vlfair_is_in_the_wheel_s_list():
    """pyproject.toml lists vlfair's packages by name: one left out imports from a checkout (editable install)
    and is missing from the wheel, which a stale build/ folder can hide from the wheel test."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    block = re.search(r"^packages = \[(.*?)\]", (root / "pyproject.toml").read_text(), re.S | re.M)
    listed = set(re.findall(r'"([\w.]+)"', block.group(1)))
    found = {".".join(init.parent.relative_to(root).parts) for init in (root / "vlfair").rglob("__init__.py")
             if "__pycache__" not in init.parts}
    assert found <= listed, sorted(found - listed)


def test_version():
    result = _run("--version")
    assert result.stdout.strip() == f"vlfair {vlfair.__version__}"


def test_run_flags_are_checked_per_probe(capsys):
    with pytest.raises(SystemExit):
        main(["run", "traits", "--model", "m"])
    assert capsys.readouterr().err == ("vlfair run traits: the following arguments are required: --dataset (vlfair run "
                                       "traits --help lists what it takes)\n")
    with pytest.raises(SystemExit):
        main(["run", "traits", "--model", "m", "--dataset", "d", "--generator", "g"])
    assert "unrecognized arguments: --generator g" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # word-influence makes its own images: no --dataset at all
        main(["run", "word-influence", "--model", "m", "--dataset", "d"])
    assert "unrecognized arguments: --dataset d" in capsys.readouterr().err


def test_run_validates_probe_names(capsys):
    with pytest.raises(SystemExit):
        main(["run", "nonsense", "--model", "m", "--dataset", "d"])
    err = capsys.readouterr().err
    assert "invalid choice: 'nonsense'" in err and all(probe in err for probe in probe_names())


def test_importing_vlfair_does_not_import_torch():
    code = ("import sys, vlfair; assert 'torch' not in sys.modules and 'transformers' not in sys.modules; "
            "print(vlfair.__version__)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


HEAVY = ("torch", "transformers", "datasets", "scipy", "pandas", "matplotlib")
HELP_IMPORTS = """
import sys
from vlfair.cli import main
try:
    main(sys.argv[1:])
except SystemExit as done:
    assert done.code == 0, done.code
print("imported:", *sorted(name for name in {heavy} if name in sys.modules))
"""


@pytest.mark.parametrize("command", [["--help"], ["run", "--help"], ["run", "traits", "--help"], ["demo", "--help"],
                                     ["compare", "--help"], ["rescore", "--help"]])
def test_help_imports_no_model_or_data_library(command):
    """The CLI's help is read before anything else: it is built from the probes' declarations alone,
    without torch, transformers, datasets or the statistics behind a run (issue 42: 4.1 s before)."""
    code = HELP_IMPORTS.format(heavy=HEAVY)
    result = subprocess.run([sys.executable, "-c", code, *command], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "imported:"


CONSOLE = """
import atexit, logging, sys
from vlfair import cli
logging.getLogger("vlfair.test").addHandler(logging.FileHandler(sys.argv[2]))

def main():  # what a command does: prints, registers work for the exit, logs, returns its status
    atexit.register(lambda: open(sys.argv[1], "w").write("ran"))
    print("said")
    logging.getLogger("vlfair.test").warning("logged")
    return int(sys.argv[3])

cli.main = main
cli.console()
"""


@pytest.mark.parametrize("status", [0, 3])
def test_the_console_leaves_once_the_exit_functions_ran(tmp_path, status):
    """The vlfair command leaves the process without the interpreter's teardown (1.4 s after the
    demo): its status is main's, the exit functions a command registered ran, logging was shut
    down (its file handler flushed) and what it printed reached the pipe."""
    done = subprocess.run([sys.executable, "-c", CONSOLE, str(tmp_path / "ran"), str(tmp_path / "log"), str(status)],
                          capture_output=True, text=True)
    assert done.returncode == status, done.stderr
    assert done.stdout == "said\n" and (tmp_path / "ran").read_text() == "ran"
    assert (tmp_path / "log").read_text() == "logged\n"


def test_the_console_says_a_mistake_in_one_line_with_status_2():
    done = subprocess.run([sys.executable, "-m", "vlfair", "demo", "--no-such-flag"], capture_output=True, text=True)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("vlfair demo: unrecognized arguments: --no-such-flag")


def test_lazy_public_names_resolve():
    assert callable(vlfair.load_encoder) and callable(vlfair.embed_images) and callable(vlfair.embed_texts)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        vlfair.nope  # noqa: B018


def test_demo_selfcheck(tmp_path):
    """In a forked child (tests/forking.py): the check itself needs no new interpreter."""
    status, out, err = forking.run(tmp_path, main, ["demo", "--selfcheck", "--out", str(tmp_path / "out")])
    assert status == 0, err[-2000:]
    report = json.loads((tmp_path / "out" / "selfcheck.json").read_text())
    assert report["passed"] and report["max_abs_diff_vs_transformers"] <= report["tolerance"]
    assert "images_match_transformers  ok" in out


def test_metric_comparison_treats_undefined_values_as_values():
    from vlfair.testing import assert_metrics_close

    def metrics(*values):
        return [{"name": "trait_anova", "subset": {"trait": str(i)}, "value": v} for i, v in enumerate(values)]

    assert_metrics_close(metrics(1.0, None, 3.0), metrics(1.0 + 1e-7, None, 3.0))
    with pytest.raises(AssertionError, match=r"trait_anova \{'trait': '1'\}: 2.0 vs None"):
        assert_metrics_close(metrics(1.0, 2.0), metrics(1.0, None))
    with pytest.raises(AssertionError, match="trait_anova"):
        assert_metrics_close(metrics(1.0, 2.0), metrics(1.0, 2.1))
    with pytest.raises(AssertionError, match="different metrics"):
        assert_metrics_close(metrics(1.0), metrics(1.0, 2.0))


def test_a_probe_option_out_of_range_stops_before_any_work(capsys, tmp_path):
    code = main(["run", "traits", "--model", "/never/loaded", "--dataset", "synthetic:fairface", "--per-cell", "0",
                 "--out", str(tmp_path / "out")])
    assert code == 2 and ("vlfair run: traits: --per-cell = 0 (setting per_cell): "
                          "Input should be greater than or equal to 1") in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before the output directory or the model was touched


def test_word_influence_generator_flags_change_only_what_they_name():
    from vlfair.cli import build_parser
    from vlfair.probes import ProbeError, probe_class

    probe = probe_class("word-influence")

    def settings(*flags):
        args = build_parser().parse_args(["run", "word-influence", "--model", "m", *flags])
        overrides, sources = probe.overrides_from(vars(args))
        probe.validate_settings(overrides, sources)
        return overrides

    assert settings() == {}
    # without --generator, --steps still applies, to the study's generator; --batch-size stays the encoder's
    assert settings("--steps", "20", "--batch-size", "64")["generator"] == {
        "spec": "CompVis/stable-diffusion-v1-4", "steps": 20, "guidance": 7.5, "size": None, "batch_size": 8}
    assert settings("--generator", "my/sd", "--size", "256")["generator"]["spec"] == "my/sd"
    assert settings("--max-images", "5")["max_images"] == 5
    with pytest.raises(ProbeError, match=r"--max-images = 0 \(setting max_images\): Input should be greater than"):
        settings("--max-images", "0")
    assert settings("--transmuter", "mlm:my/bert")["transmuter"] == {"name": "mlm", "model": "my/bert"}
    with pytest.raises(ProbeError,
                       match=r"--transmuter = .*\(setting transmuter.name\): Input should be 'mlm' or 'lexicon'"):
        settings("--transmuter", "thesaurus")
