"""results.json's machine record (issue 62): the BLAS and OpenMP libraries loaded, torch's CPU kernels and
BLAS, the versions, and the variables that choose kernels, so two records of other machines can be told apart.
No test sets OPENBLAS_CORETYPE or ATEN_CPU_CAPABILITY in the process: a BLAS loaded after it (scipy's own) would
run other kernels for the rest of the session. The record reads the environment through
``machine.ENVIRONMENT``, which a test stands in for."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import torch
from threadpoolctl import threadpool_info

from vlfair.report import machine
from vlfair.report.results import build_results, validate_results


def _results() -> dict:
    return build_results("professions", 3, {"spec": "m", "revision": None, "dtype": "float32"},
                         {"name": "d", "split": None, "subset": None, "fingerprint": "f00d", "num_rows": 1},
                         [], [], {}, [])


def test_a_run_records_its_blas_its_cpu_kernels_and_its_versions():
    np.ones((4, 4)) @ np.ones((4, 4))  # numpy's BLAS in use
    results = _results()
    validate_results(results)
    record = results["machine"]
    assert set(record) == {"platform", "versions", "threadpools", "torch", "variables"}
    assert isinstance(record["platform"]["machine"], str) and isinstance(record["platform"]["cpu"], (str, type(None)))
    assert record["versions"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert record["versions"]["numpy"] == np.__version__ and record["versions"]["torch"] == str(torch.__version__)
    pools = record["threadpools"]
    assert len(pools) == len(threadpool_info()) and any(pool["user_api"] == "blas" for pool in pools)
    for pool in pools:
        assert isinstance(pool["internal_api"], str) and isinstance(pool["num_threads"], int)
        assert isinstance(pool["version"], (str, type(None))) and isinstance(pool["architecture"], (str, type(None)))
        assert pool["file"] and "/" not in pool["file"] and os.sep not in pool["file"]  # a name, not a path
    blas = {pool["file"]: pool for pool in pools}
    for pool in threadpool_info():  # each as threadpoolctl sees it
        assert blas[os.path.basename(pool["filepath"])]["internal_api"] == pool["internal_api"]
        assert blas[os.path.basename(pool["filepath"])]["architecture"] == pool.get("architecture")
    kernels = record["torch"]
    assert kernels["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert kernels["num_threads"] == torch.get_num_threads() and isinstance(kernels["blas"], (str, type(None)))
    assert f"BLAS_INFO={kernels['blas']}" in torch.__config__.show()
    assert kernels["gpus"] == [] or all(isinstance(name, str) for name in kernels["gpus"])
    assert set(record["variables"]) == set(machine.KERNEL_VARIABLES)
    assert "/" not in json.dumps(record["threadpools"])  # no folder of anyone's environment in a public record


def test_the_record_holds_each_kernel_variable_as_it_is_set(monkeypatch):
    """Each variable's value where it is set (OpenBLAS's core type, ATen's capability), null where not."""
    environment = {key: value for key, value in os.environ.items() if key not in machine.KERNEL_VARIABLES}
    monkeypatch.setattr(machine, "ENVIRONMENT", {**environment, "OPENBLAS_CORETYPE": "Haswell",
                                                 "ATEN_CPU_CAPABILITY": "avx2"})
    results = _results()
    validate_results(results)
    assert results["machine"]["variables"] == {**dict.fromkeys(machine.KERNEL_VARIABLES),
                                               "OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2"}
    assert machine.aspects(results["machine"])["variables"] == "ATEN_CPU_CAPABILITY=avx2, OPENBLAS_CORETYPE=Haswell"
    monkeypatch.setattr(machine, "ENVIRONMENT", environment)
    assert set(machine.machine_record()["variables"].values()) == {None}


def test_the_record_reads_the_process_s_own_environment(monkeypatch):
    """ENVIRONMENT is os.environ itself: a variable set in the process is what the record says (a harmless
    one stands in for the kernels' own, which no test sets)."""
    assert machine.ENVIRONMENT is os.environ
    monkeypatch.setattr(machine, "KERNEL_VARIABLES", (*machine.KERNEL_VARIABLES, "VLFAIR_TEST_KERNELS"))
    monkeypatch.setenv("VLFAIR_TEST_KERNELS", "stand-in")
    assert machine.machine_record()["variables"]["VLFAIR_TEST_KERNELS"] == "stand-in"


def test_two_records_are_told_apart_by_what_differs():
    record = _results()["machine"]
    other = json.loads(json.dumps(record))
    # a capability other than this machine's own (an AMD EPYC's torch picks AVX2: then AVX512 differs)
    capability = "AVX512" if record["torch"]["cpu_capability"] == "AVX2" else "AVX2"
    other["torch"] = {**record["torch"], "cpu_capability": capability}
    other["variables"]["ATEN_CPU_CAPABILITY"] = capability.lower()
    found = machine.differences([record, other])
    assert [entry["aspect"] for entry in found] == ["torch", "variables"]
    assert found[0]["values"][1].startswith(f"{capability} kernels, BLAS ")
    assert machine.differences([record, json.loads(json.dumps(record))]) == []
    assert machine.differences([None, None]) == []  # neither recorded: nothing to tell


def test_a_process_that_never_loaded_torch_records_no_torch_and_loads_none():
    """A rescore or a board read needs no torch: the record does not import it to describe it."""
    code = ("import sys; from vlfair.report.machine import machine_record; record = machine_record(); "
            "print(record['torch'] is None, 'torch' in sys.modules, 'torch' in record['versions'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False", "False"]
