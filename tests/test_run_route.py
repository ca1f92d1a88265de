"""Issue 63, item 5: one route for ``vlfair run`` (the CLI parses, hands one request to the runner, which
resolves the probe, its settings, the data and the model once), and the resampling options spelled one way
in every command: ``--bootstrap``, ``--permutations`` and ``--seed`` on run, rescore, compare and
leaderboard, ``--set`` still taking them on run and rescore."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vlfair import cli
from vlfair.cli import main
from vlfair.defaults import MAX_BOOTSTRAP, MAX_PERMUTATIONS

NEVER_LOADED = "/never/loaded"  # refused before the model loads: it is never read
# a tiny professions run: 40 rows of the synthetic twin, no figures
TINY = ["--dataset", "synthetic:professions", "--limit", "40", "--no-figures", "--dtype", "float32", "--quiet"]


def _run(model: Path, out: Path, *extra: str) -> int:
    return main(["run", "professions", "--model", str(model), *TINY, "--out", str(out),
                 "--cache-dir", str(out.parent / "cache"), *extra])


def _numbers(folder: Path, name: str = "results.json") -> list:
    content = json.loads((folder / name).read_text())
    if name == "comparison.json":
        return [(d["metric"], d["subset"], d["difference"], d["difference_ci"], d["p_value"])
                for d in content["differences"]]
    return [(m["name"], m["subset"], m["value"], m["ci"], m.get("p_value")) for m in content["metrics"]]


def _error(capsys) -> str:
    error = capsys.readouterr().err.strip()
    assert "Traceback" not in error and len(error.splitlines()) == 1, error
    return error


# ---- one request, each part resolved once ---------------------------------------------------------------

def test_the_cli_hands_one_request_and_the_probe_class_is_looked_up_once(clip_dir, tmp_path, monkeypatch):
    """The CLI looked the probe class up twice (its flags' settings, then the probe) before the runner: now the
    parsed command line is one request, and the runner looks the class up once."""
    import vlfair.probes
    from vlfair.probes import registry, runner

    argv = ["run", "professions", "--model", str(clip_dir), *TINY, "--out", str(tmp_path / "run"),
            "--cache-dir", str(tmp_path / "cache"), "--bootstrap", "20", "--set", "n_permutations=0"]
    args, unknown = cli.build_parser().parse_known_args(argv)  # the parser reads every probe's class: not counted
    assert not unknown
    looked_up: list[str] = []
    for module in (vlfair.probes, registry, runner):  # every name the class is looked up by
        real = module.probe_class
        monkeypatch.setattr(module, "probe_class", lambda name, _real=real: looked_up.append(name) or _real(name))
    requests = []
    real_run = runner.run_request
    monkeypatch.setattr(runner, "run_request",
                        lambda request, **kw: requests.append(request) or real_run(request, **kw))
    assert args.handler(args) == 0
    assert looked_up == ["professions"]
    [request] = requests
    assert (request.probe, request.model, request.dataset, request.limit, request.dtype) == (
        "professions", str(clip_dir), "synthetic:professions", 40, "float32")
    assert request.settings == {"n_permutations": 0, "bootstrap": 20}
    assert request.sources == {"bootstrap": "--bootstrap"}
    assert request.out_dir == str(tmp_path / "run")
    with pytest.raises(AttributeError):  # frozen: what was asked is what runs
        request.limit = 1  # type: ignore[misc]
    recorded = json.loads((tmp_path / "run" / "results.json").read_text())["probe_settings"]
    assert (recorded["bootstrap"], recorded["n_permutations"]) == (20, 0)


@pytest.mark.parametrize(("extra", "said"), [
    (["--dataset", "./missing/professions"], "vlfair run: dataset directory ./missing/professions does not exist"),
    (["--dataset", "synthetic:professions", "--split", "test+test"],
     "vlfair run: split 'test+test' names 'test' more than once: its rows would be counted twice; name each split "
     "once"),
], ids=["missing-directory", "split-twice"])
def test_the_dataset_is_checked_once_before_the_model_loads(tmp_path, capsys, monkeypatch, extra, said):
    """The CLI checked the split and the source, then the runner checked them again as it read the data: now
    the runner reads (and so checks) the data once, before the model loads."""
    from vlfair.data import loading

    checked: list[str] = []
    for name in ("check_source", "split_parts"):
        real = getattr(loading, name)
        monkeypatch.setattr(loading, name, lambda *a, _real=real, _name=name, **k: checked.append(_name)
                            or _real(*a, **k))
    out = tmp_path / "out"
    assert main(["run", "professions", "--model", NEVER_LOADED, *extra, "--out", str(out)]) == 2
    assert _error(capsys) == said
    assert checked.count("split_parts") == 1 and checked.count("check_source") <= 1
    assert not out.exists()


def test_settings_are_refused_before_out_is_claimed_and_a_probe_without_the_setting_says_so(tmp_path, capsys):
    out = tmp_path / "out"
    # word influence's intervals are Hoeffding's and its measures signed: it has no permutation test
    assert main(["run", "word-influence", "--model", NEVER_LOADED, "--permutations", "10", "--out", str(out)]) == 2
    assert _error(capsys).startswith("vlfair run: word-influence: --permutations sets n_permutations, a setting this "
                                     "probe does not have; its settings: ")
    assert not out.exists() and not list(tmp_path.iterdir())  # nothing claimed, no lock left


def test_run_probe_still_takes_its_documented_arguments(clip_encoder, tmp_path):
    from vlfair.probes import run_probe, runner
    from vlfair.probes.runner import RunRequest

    results = run_probe("professions", clip_encoder, "synthetic:professions", None, limit=40, cache_dir=None,
                        settings={"bootstrap": 0, "n_permutations": 0})
    again = runner.run_request(RunRequest("professions", clip_encoder, "synthetic:professions", limit=40,
                                          cache_dir=None, settings={"bootstrap": 0, "n_permutations": 0}))
    assert [m["value"] for m in results["metrics"]] == [m["value"] for m in again.results["metrics"]]
    with pytest.raises(TypeError):
        run_probe("professions", clip_encoder, "synthetic:professions", None, no_such_option=1)


# ---- one spelling of the resampling options -------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(clip_dir, siglip_dir, tmp_path_factory) -> dict[str, Path]:
    """Tiny professions runs: the flags, the same by --set, another seed, and another model (to compare)."""
    base = tmp_path_factory.mktemp("route")
    made = {
        "flags": (clip_dir, ["--bootstrap", "50", "--permutations", "30", "--seed", "3"]),
        "set": (clip_dir, ["--set", "bootstrap=50", "--set", "n_permutations=30", "--set", "seed=3"]),
        "seed": (clip_dir, ["--bootstrap", "50", "--permutations", "30", "--seed", "4"]),
        "other": (siglip_dir, ["--bootstrap", "50", "--permutations", "30", "--seed", "3"]),
    }
    for name, (model, extra) in made.items():
        assert _run(model, base / name, *extra) == 0, name
    return {name: base / name for name in made}


def test_run_flags_are_the_settings_set_spells(runs):
    assert _numbers(runs["flags"]) == _numbers(runs["set"])
    assert _numbers(runs["flags"]) != _numbers(runs["seed"])  # they change the numbers
    settings = json.loads((runs["flags"] / "results.json").read_text())["probe_settings"]
    assert (settings["bootstrap"], settings["n_permutations"], settings["seed"]) == (50, 30, 3)


def test_rescore_flags_are_the_settings_set_spells(runs, tmp_path):
    assert main(["rescore", str(runs["flags"]), "--out", str(tmp_path / "flags"), "--bootstrap", "40",
                 "--permutations", "20", "--quiet"]) == 0
    assert main(["rescore", str(runs["flags"]), "--out", str(tmp_path / "set"), "--set", "bootstrap=40",
                 "--set", "n_permutations=20", "--quiet"]) == 0
    assert _numbers(tmp_path / "flags") == _numbers(tmp_path / "set") != _numbers(runs["flags"])
    # the run's own settings: the run's numbers
    assert main(["rescore", str(runs["flags"]), "--out", str(tmp_path / "own"), "--bootstrap", "50", "--quiet"]) == 0
    assert _numbers(tmp_path / "own") == _numbers(runs["flags"])


@pytest.mark.parametrize("command", ["run", "rescore"])
def test_a_setting_given_by_a_flag_and_by_set_is_refused_naming_both(runs, tmp_path, capsys, command):
    argv = (["run", "professions", "--model", NEVER_LOADED, "--dataset", "synthetic:professions"] if command == "run"
            else ["rescore", str(runs["flags"])])
    assert main([*argv, "--out", str(tmp_path / "out"), "--bootstrap", "10", "--set", "bootstrap=20"]) == 2
    assert _error(capsys) == (f"vlfair {command}: --bootstrap 10 and --set bootstrap=20 both set bootstrap: "
                              "give one")


def test_compare_takes_the_three_flags(runs, tmp_path):
    pair = [str(runs["flags"]), str(runs["other"])]
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        assert main(["compare", *pair, "--out", str(tmp_path / name), "--bootstrap", "60", "--permutations", "40",
                     "--seed", seed, "--quiet"]) == 0
    a, b, c = (_numbers(tmp_path / name, "comparison.json") for name in "abc")
    assert a == b != c and a


def test_leaderboard_takes_the_three_flags(runs, tmp_path, monkeypatch):
    from vlfair.compare import tiers

    asked = []
    real = tiers.add_tiers
    monkeypatch.setattr(tiers, "add_tiers", lambda *a, **k: asked.append(k) or real(*a, **k))
    assert main(["leaderboard", str(runs["flags"]), str(runs["other"]), "--out", str(tmp_path / "board.csv"),
                 "--bootstrap", "30", "--permutations", "25", "--seed", "7", "--quiet"]) == 0
    assert [(k["bootstrap"], k["n_permutations"], k["seed"]) for k in asked] == [(30, 25, 7)]
    assert (tmp_path / "board.csv").is_file()


@pytest.mark.parametrize("command", ["run", "rescore", "compare", "leaderboard"])
@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--bootstrap", "-1", f"--bootstrap must be a whole number from 0 to {MAX_BOOTSTRAP:,} (0: no intervals), got -1"),
    ("--bootstrap", str(MAX_BOOTSTRAP + 1), f"--bootstrap must be a whole number from 0 to {MAX_BOOTSTRAP:,} (0: no "
                                            f"intervals), got {MAX_BOOTSTRAP + 1:,}"),
    ("--permutations", str(MAX_PERMUTATIONS + 1),
     f"--permutations must be a whole number from 0 to {MAX_PERMUTATIONS:,} (0: no p-values), got "
     f"{MAX_PERMUTATIONS + 1:,}"),
    ("--seed", "-2", "--seed must be a whole number >= 0, got -2"),
])
def test_a_resampling_flag_out_of_range_is_refused_with_its_range(tmp_path, capsys, command, flag, value, said):
    missing = str(tmp_path / "no-run")
    argv = {"run": ["run", "professions", "--model", NEVER_LOADED, "--dataset", "synthetic:professions"],
            "rescore": ["rescore", missing], "compare": ["compare", missing, missing],
            "leaderboard": ["leaderboard", missing]}[command]
    assert main([*argv, "--out", str(tmp_path / "out"), flag, value]) == 2
    assert _error(capsys) == f"vlfair {command}: {said}"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["run", "rescore", "compare", "leaderboard"])
def test_every_command_lists_the_three_flags_with_default_and_range(capsys, command):
    argv = {"run": ["run", "professions"], "rescore": ["rescore"], "compare": ["compare"],
            "leaderboard": ["leaderboard"]}[command]
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for flag in ("--bootstrap N", "--permutations N", "--seed N"):
        assert flag in shown
    assert f"from 0 to {MAX_BOOTSTRAP:,}" in shown and f"from 0 to {MAX_PERMUTATIONS:,}" in shown
    default = {"run": "default the probe's YAML", "rescore": "default the run's own"}.get(command, "default 1,000")
    assert default in shown
