"""Where a run's numbers were computed (results.json's ``machine``): the CPU, the versions, the BLAS and
OpenMP libraries as loaded (threadpoolctl), torch's CPU kernels and BLAS, and the variables that choose
kernels. Two machines' float32 sums differ in their last bits, and a decision on a near-tie can follow
them (issue 62: OpenBLAS's Haswell kernels flipped a retrieval argmax that its SkylakeX ones did not), so
a record says what computed it, and ``vlfair compare`` says when two runs' records differ.

What a record holds: the CPU's model name, Python's version and each numerical library's the process
loaded, every BLAS and OpenMP library loaded as ``threadpoolctl.threadpool_info()`` sees it (its API,
version, kernels and threads, its file by name only: a public record never holds a folder of someone's
environment), torch's CPU kernels (``torch.backends.cpu.get_cpu_capability()``), its BLAS and LAPACK
(``torch.__config__``), its threads and the GPUs of a process that used CUDA (null where the process never
loaded torch), and the environment variables that choose kernels, each one's value or null.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import warnings
from collections.abc import Mapping
from typing import Any

# environment variables that choose the kernels, whatever the CPU could run: OpenBLAS's core type, ATen's
# vectorised kernels, MKL's instruction set and reproducibility mode, oneDNN's instruction set
KERNEL_VARIABLES = ("OPENBLAS_CORETYPE", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR",
                    "ONEDNN_MAX_CPU_ISA")
# the libraries whose versions a run's numbers depend on, recorded where this process loaded them
LIBRARIES = ("numpy", "scipy", "pandas", "torch", "transformers")
# of each threadpoolctl entry: what it is, which kernels it runs and on how many threads (its file by name
# alone: a full path says where someone's environment lives, not how it computes)
POOL_FIELDS = ("user_api", "internal_api", "prefix", "version", "architecture", "threading_layer", "num_threads")
# the environment the record reads: the process's own (a test stands in for it without setting a variable that
# a library loaded later would act on)
ENVIRONMENT: Mapping[str, str] = os.environ
# what two records are told apart by, each in a line for people (:func:`aspects`)
ASPECTS = ("CPU", "versions", "BLAS", "torch", "variables")
NOT_RECORDED = "not recorded (written before vlfair recorded it)"


def machine_record() -> dict[str, Any]:
    """This process's machine, as results.json's ``machine`` holds it (results.schema.json)."""
    return {"platform": {"machine": platform.machine(), "cpu": cpu_model()},
            "versions": {"python": platform.python_version(), **library_versions()},
            "threadpools": threadpools(), "torch": torch_record(),
            "variables": {name: ENVIRONMENT.get(name) for name in KERNEL_VARIABLES}}


def library_versions() -> dict[str, str]:
    """The versions of :data:`LIBRARIES` this process loaded (one it did not load computed nothing here)."""
    modules = [sys.modules[name] for name in LIBRARIES if name in sys.modules]
    return {module.__name__: str(module.__version__) for module in modules if hasattr(module, "__version__")}


def cpu_model() -> str | None:
    """The CPU's model name (Linux's /proc/cpuinfo; None where there is none, as on most Arm machines)."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip() or None
    except OSError:
        pass
    return None


def threadpools() -> list[dict[str, Any]]:
    """Each BLAS and OpenMP library this process has loaded (numpy's and scipy's BLAS; torch's own MKL is
    linked in and shows in :func:`torch_record` instead)."""
    from threadpoolctl import threadpool_info

    with warnings.catch_warnings():  # its warning of two OpenMP runtimes loaded together is not this record's
        warnings.simplefilter("ignore")
        found = threadpool_info()
    pools = [{**{field: pool.get(field) for field in POOL_FIELDS}, "file": os.path.basename(pool.get("filepath") or "")}
             for pool in found]
    # in a stable order: the order the libraries were loaded in says nothing of how they compute
    return sorted(pools, key=lambda pool: (str(pool["user_api"]), str(pool["internal_api"]), pool["file"]))


def torch_record() -> dict[str, Any] | None:
    """The CPU kernels torch runs (the instruction set ATen dispatches to), its BLAS and LAPACK, its threads and
    the GPUs this process used; None where this process never loaded torch (it computed nothing with it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    built = dict(re.findall(r"\b([A-Z_]+)=([^,\s]*)", torch.__config__.show()))  # its build settings, KEY=value
    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "blas": built.get("BLAS_INFO"), "lapack": built.get("LAPACK_INFO"),
            "num_threads": torch.get_num_threads(),
            # is_initialized, not is_available: a run that stayed on the CPU starts no CUDA here
            "gpus": [torch.cuda.get_device_name(k) for k in range(torch.cuda.device_count())]
            if torch.cuda.is_initialized() else []}


def aspects(record: dict[str, Any]) -> dict[str, str]:
    """A record in a few lines for people, by aspect (:data:`ASPECTS`): what two records are told apart by."""
    cpu = record.get("platform") or {}
    pools = "; ".join(" ".join(str(p[f]) for f in ("internal_api", "version", "architecture") if p.get(f))
                      + f" ({p.get('num_threads')} threads)" for p in record.get("threadpools") or [])
    torch = record.get("torch")
    kernels = ("not loaded" if torch is None else
               f"{torch.get('cpu_capability')} kernels, BLAS {torch.get('blas')}, {torch.get('num_threads')} threads"
               + (f", GPU {', '.join(torch['gpus'])}" if torch.get("gpus") else ""))
    variables = ", ".join(f"{k}={v}" for k, v in sorted((record.get("variables") or {}).items()) if v is not None)
    return {"CPU": f"{cpu.get('cpu') or 'unnamed'} ({cpu.get('machine')})",
            "versions": ", ".join(f"{k} {v}" for k, v in sorted((record.get("versions") or {}).items())),
            "BLAS": pools or "none loaded", "torch": kernels, "variables": variables or "none set"}


def differences(records: list[dict[str, Any] | None]) -> list[dict[str, Any]]:
    """The aspects in which runs' machine records differ, each with every run's value (``aspect``,
    ``values``); empty where they were computed alike, or where none records its machine. Where only some
    do, that is the one difference: what the others ran on is unknown."""
    recorded = [record for record in records if record]
    if not recorded:
        return []
    if len(recorded) < len(records):
        return [{"aspect": "machine", "values": ["recorded" if record else NOT_RECORDED for record in records]}]
    shown = [aspects(record) for record in recorded]
    return [{"aspect": aspect, "values": [s[aspect] for s in shown]} for aspect in ASPECTS
            if len({s[aspect] for s in shown}) > 1]


__all__ = ["KERNEL_VARIABLES", "aspects", "differences", "machine_record", "threadpools", "torch_record"]
