"""What vlfair's tests (and a user's tests of their own probes) use: the tiny checkpoints and
generated images of :mod:`vlfair.tiny`, and comparisons of two runs' numbers. Library code never
imports this module (the layer contract in pyproject.toml says so).

How the tests are written. No network in tests. Tests build tiny models with ``save_pretrained`` in a
temporary directory (``vlfair.tiny``, re-exported here) and load them through the same code path as real
checkpoints; raw data files the tests need are in ``tests/data/``. A test that needs a second process (one
to kill while it writes, two that share a lock or evaluate's cache) forks it from the test process
(``tests/forking.py``: torch, transformers and datasets already imported, where a fresh interpreter spends
4-8 s of CPU importing them), as does a run under a real model id from a local Hub cache
(``forking.python`` runs a ``python -c`` body in the child; the child reads the Hub's variables,
``HF_HUB_CACHE``, ``HF_HOME``, ``HF_HUB_OFFLINE``, again, as a new interpreter would); a test about what a
new interpreter does (what it imports, variables vlfair or evaluate read at import time, a console script,
entry points, torchrun) starts one. The suite's multi-process tests run every process on the CPU
(``CUDA_VISIBLE_DEVICES=``) where a machine has fewer GPUs than processes (:func:`launch_env`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from vlfair.tiny import *  # noqa: F403  (the names tests have always taken from here)
from vlfair.tiny import __all__ as _TINY
from vlfair.tiny import qwen2_vl_processor

__all__ = [*_TINY, "NUMBERS_KEYS", "RECORD_NUMBERS", "assert_metrics_close", "assert_same_numbers",
           "assert_statistics_are_metrics", "checkpoint_with_its_own_code", "comparable_results", "launch_env",
           "qwen2_vl_processors_without_video", "recorded_numbers", "reported_as_its_samples_give"]


def reported_as_its_samples_give(run: Path) -> Path:
    """``run``'s results.json with each metric's point value as its samples give it (a test that edits a run's
    samples makes the run that held them: compare, rescore and every board refuse a run whose values its samples
    do not give, ``vlfair.compare.runs.misreported``)."""
    from vlfair.compare.runs import load_run, point_values
    from vlfair.outputs import metric_key
    from vlfair.report.results import jsonable

    values = point_values(load_run(run, check=False)) or {}
    content = json.loads((run / "results.json").read_text())
    for metric in content["metrics"]:
        metric["value"] = jsonable(values.get(metric_key(metric["name"], metric["subset"]), metric["value"]))
    (run / "results.json").write_text(json.dumps(content))
    return run


def assert_metrics_close(actual: list[dict[str, Any]], expected: list[dict[str, Any]], rtol: float = 1e-5,
                         atol: float = 0.0) -> None:
    """Two runs' metric lists agree: same names and subsets in the same order, numbers within
    tolerance, and an undefined value (``None``: an F-test with zero variance, a ratio over an
    empty group) exactly where the other run has one too."""
    assert [(m["name"], m["subset"]) for m in actual] == [(m["name"], m["subset"]) for m in expected], \
        "the runs measured different metrics or subsets"
    for got, want in zip(actual, expected):
        where = f"{got['name']} {got['subset']}"
        if got["value"] is None or want["value"] is None:
            assert got["value"] is None and want["value"] is None, f"{where}: {got['value']} vs {want['value']}"
        else:
            np.testing.assert_allclose(got["value"], want["value"], rtol=rtol, atol=atol, err_msg=where)


NUMBERS_KEYS = ("probe", "probe_version", "settings", "metrics", "skipped_rows", "warnings", "published")

RECORD_NUMBERS = "VLFAIR_RECORD_NUMBERS"
"""Set (to anything) in a developer's shell, a recorded-numbers test writes what it measured to its file
and fails, saying so: a change of the numbers' definition is recorded on purpose, never by a run that
passes."""


def _kept_where_unchanged(new: Any, old: Any) -> Any:
    """``new``, with each number that differs from ``old``'s only in float noise (1e-5 relative, a tenth of
    the tests' tolerance) kept as recorded: a file recorded anew changes where the numbers did."""
    if isinstance(new, dict) and isinstance(old, dict):
        return {key: _kept_where_unchanged(value, old[key]) if key in old else value for key, value in new.items()}
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [_kept_where_unchanged(a, b) for a, b in zip(new, old)]
    numbers = (int, float)
    if (isinstance(new, numbers) and isinstance(old, numbers) and not isinstance(new, bool)
            and not isinstance(old, bool) and np.isclose(new, old, rtol=1e-5, atol=1e-12)):
        return old
    return new


def _as_recorded(numbers: dict[str, Any], before: str) -> str:
    """``numbers`` as JSON laid out as the file was (compact, or indented by 0 or 1), so that a diff of a
    file recorded anew shows the numbers that changed, not a new layout."""
    if not before.startswith("{\n"):
        return json.dumps(numbers, separators=(",", ":"))
    return json.dumps(numbers, indent=1 if before.startswith("{\n ") else 0)


def recorded_numbers(path: Path, actual: dict[str, Any]) -> dict[str, Any]:
    """The numbers recorded in ``path`` (JSON), to compare ``actual`` with; under :data:`RECORD_NUMBERS`,
    ``actual`` written there instead, and the test failed."""
    import os

    import pytest

    if os.environ.get(RECORD_NUMBERS):
        before = path.read_text() if path.exists() else "{\n"
        kept = _kept_where_unchanged(actual, json.loads(before))
        path.write_text(_as_recorded(kept, before) + "\n")
        pytest.fail(f"{RECORD_NUMBERS} is set: {path.name} recorded anew, not compared (unset it and run again)")
    recorded: dict[str, Any] = json.loads(path.read_text())
    return recorded


def comparable_results(results: dict[str, Any]) -> dict[str, Any]:
    """What a refactor must not change in a results.json: everything measured and said, without
    what names this run (creation time, vlfair version, the model's path, the data's fingerprint)."""
    dataset = {k: v for k, v in results["dataset"].items() if k != "fingerprint"}
    # how many images word-influence generated is how many its image cache lacked: it depends on
    # the runs before it (the test suite's shared cache), not on what was measured
    settings = {k: v for k, v in results["settings"].items() if k != "generator_calls"}
    compared = {k: results[k] for k in NUMBERS_KEYS}
    if "metrics" in compared:  # a metric's smallest detectable deviations follow from its interval (tested apart)
        compared["metrics"] = [{k: v for k, v in m.items() if k != "mde"} for m in compared["metrics"]]
    return {**compared, "settings": settings, "dataset": dataset}


def assert_same_numbers(actual: Any, expected: Any, where: str = "", rtol: float = 1e-4, atol: float = 1e-6) -> None:
    """Two results (or parts of them) hold the same keys, texts and flags and numbers within
    tolerance (p-values, which amplify a float's last digits in an F's tail, within 10 x ``rtol``;
    an interval's bounds within 1 % of its width: a bootstrap percentile is one of the resamples'
    values, and float32 embeddings rounded otherwise by another CPU's instructions can make it the
    neighbouring one, 2e-4 of the bound apart where the tolerance was relative)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and list(actual) == list(expected), \
            f"{where}: keys {list(actual)} vs {list(expected)}"
        for key in expected:
            bounds = expected[key]
            if key.endswith("ci") and isinstance(bounds, list) and len(bounds) == 2 and all(
                    isinstance(b, (int, float)) for b in bounds):
                assert_same_numbers(actual[key], bounds, f"{where}.{key}", rtol,
                                    max(atol, 0.01 * abs(bounds[1] - bounds[0])))
                continue
            assert_same_numbers(actual[key], expected[key], f"{where}.{key}", rtol * (10 if "p_value" in key else 1),
                                atol)
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), \
            f"{where}: {len(actual)} vs {len(expected)} items"
        for i, (got, want) in enumerate(zip(actual, expected)):
            assert_same_numbers(got, want, f"{where}[{i}]", rtol, atol)
    elif isinstance(expected, float) and not isinstance(actual, bool) and isinstance(actual, (int, float)):
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=where)
    else:
        assert actual == expected, f"{where}: {actual!r} vs {expected!r}"


def assert_statistics_are_metrics(probe: Any, samples: Any, metrics: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """Each statistic of ``probe.comparisons(samples)``, on the samples' own values (both "runs"
    the same), is the metric of that name and subset in ``metrics`` (results.json's; a metric
    without a value gives nan), and every metric with a value is compared unless the probe lists
    it in ``uncompared``. Returns the (name, subset JSON) keys compared."""
    import json
    import math

    from vlfair import paired

    reported = {(m["name"], json.dumps(m["subset"], sort_keys=True)): m["value"] for m in metrics}
    frame = samples.frame
    seen = set()
    for row_set in probe.comparisons(samples):
        values = frame.iloc[row_set.rows, [frame.columns.get_loc(c) for c in row_set.columns]].to_numpy(float)
        for found in paired.compare(row_set, values, values, bootstrap=0, n_permutations=0):
            key = (found.name, json.dumps(found.subset, sort_keys=True))
            assert key in reported, key
            if reported[key] is None:
                assert math.isnan(found.value_a), key
            else:
                np.testing.assert_allclose(found.value_a, reported[key], rtol=1e-9, atol=1e-12, err_msg=str(key))
            seen.add(key)
    assert all(probe.uncompared.values())  # each metric left out says why
    missing = {key for key, value in reported.items() if value is not None and key[0] not in probe.uncompared} - seen
    assert not missing, sorted(missing)[:5]
    return seen


@contextmanager
def qwen2_vl_processors_without_video() -> Iterator[None]:
    """Within it, ``AutoProcessor.from_pretrained`` of a :func:`tiny_qwen2_vl` directory returns
    :func:`qwen2_vl_processor` (Qwen2-VL's processor class without its video part, which needs
    torchvision); every other checkpoint loads as before. Only the processor's loading is replaced:
    the model, the chat template and vlfair's code run as for any checkpoint."""
    from transformers import AutoProcessor

    original = AutoProcessor.from_pretrained

    def from_pretrained(path: Any, *args: Any, **kwargs: Any) -> Any:
        config = Path(path) / "config.json"
        if config.is_file() and json.loads(config.read_text()).get("model_type") == "qwen2_vl":
            return qwen2_vl_processor(path)
        return original(path, *args, **kwargs)

    with mock.patch.object(AutoProcessor, "from_pretrained", from_pretrained):
        yield


# what a process may ask of float32 work: TF32 on a GPU (cuDNN's default for convolutions;
# set_float32_matmul_precision("high") for matmuls), bf16 on a CPU
LOWER_FLOAT32 = {"cuda.matmul": "tf32", "cudnn.conv": "tf32", "cudnn.rnn": "tf32", "mkldnn.matmul": "bf16"}


def _switch(name: str) -> Any:
    """The ``fp32_precision`` switch ``backend.op`` of torch (``cudnn.conv``)."""
    import torch

    backend, op = name.split(".")
    return getattr(getattr(torch.backends, backend), op)


def float32_switches() -> dict[str, str]:
    """The ``fp32_precision`` switches of :data:`LOWER_FLOAT32`, as they stand."""
    return {name: _switch(name).fp32_precision for name in LOWER_FLOAT32}


@contextmanager
def lower_float32_precision() -> Iterator[dict[str, str]]:
    """The process asks for :data:`LOWER_FLOAT32` within it (torch 2.9's switches; each given back after)."""
    switches = {name: _switch(name) for name in LOWER_FLOAT32}
    before = float32_switches()
    try:
        for name, value in LOWER_FLOAT32.items():
            switches[name].fp32_precision = value
        yield dict(LOWER_FLOAT32)
    finally:
        for name, value in before.items():
            switches[name].fp32_precision = value


def launch_env(processes: int) -> dict[str, str]:
    """The environment for a test that starts ``processes`` processes of one run (torchrun, a spawned group):
    one thread each, and, where the machine has fewer GPUs than processes, no GPU at all, so that every
    process runs on the CPU and the group on gloo (a process without a GPU of its own is an error)."""
    import os

    import torch

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if torch.cuda.device_count() < processes:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def checkpoint_with_its_own_code(source: str | Path, target: str | Path, ran: Path, auto_class: str) -> Path:
    """A copy of the checkpoint ``source`` in ``target`` whose config names a file of its own (``auto_map``,
    a ``model_type`` transformers does not know) for ``AutoConfig`` and ``auto_class``; importing that file
    creates ``ran``, so a test can tell whether the checkpoint's code ever ran."""
    import shutil

    copy = Path(shutil.copytree(source, target))
    config = json.loads((copy / "config.json").read_text())
    config.update(model_type=f"custom_{config['model_type']}",
                  auto_map={"AutoConfig": "custom.CustomConfig", auto_class: "custom.CustomModel"})
    (copy / "config.json").write_text(json.dumps(config))
    (copy / "custom.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
    return copy

