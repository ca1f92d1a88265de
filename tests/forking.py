"""Child processes forked from the test process, for tests that need a second process (one to kill
while it writes, two that share a file lock or evaluate's cache) but not a fresh interpreter.

A fresh ``python -c ...`` imports torch, transformers, datasets and vlfair again: 4-8 s of CPU per
process, a minute of the suite's for its dozen such children. A forked child starts with them
imported. It is still a process of its own: it can be killed with SIGKILL, it holds its own file
locks, its monkeypatches stay in it. What it prints goes to two files of its own (the test
process's output is pytest's capture). A test about what a *new* interpreter does (what it imports,
the variables read at import time, a console script) starts one with ``subprocess`` instead.

Linux only (fork), as the suite's machines are. torch runs on one thread in the child, as in
vlfair's own forked workers (``vlfair.demo.forked``): libgomp's thread pool is not one a fork may use.
A child of a test process that has started CUDA runs on the CPU: CUDA cannot be started again in a
forked child ("Cannot re-initialize CUDA in forked subprocess"), so the child sees no GPU, and neither
do the processes it starts. After a backward pass on a machine with a GPU, a forked child cannot run a
backward pass (autograd's device threads), so the child is then started as a fresh interpreter.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from vlfair.demo.forked import autograd_threads_started, cuda_started


class Child:
    """A forked child: ``communicate`` waits for it and gives what it printed; ``returncode`` (None while
    it runs) and ``kill`` as a ``subprocess.Popen``'s."""

    def __init__(self, process: Any, out: Path, err: Path):
        self.process, self.out, self.err = process, out, err

    @property
    def returncode(self) -> int | None:
        return self.process.exitcode

    @property
    def stderr(self) -> str:
        """What it has written to stderr so far (nothing before it opened its file)."""
        return _text(self.err)

    def kill(self) -> None:
        self.process.kill()

    def wait(self, timeout: float | None = 300) -> int:
        self.process.join(timeout)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join()
            raise TimeoutError(f"a forked child ran over {timeout} s: {self.stderr[-2000:]}")
        return self.process.exitcode

    def communicate(self, timeout: float | None = 300) -> tuple[str, str]:
        self.wait(timeout)
        return _text(self.out), self.stderr


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _run(target: Callable[..., int | None], args: tuple, env: dict[str, str], out: Path, err: Path,
         without_gpu: bool) -> None:
    os.environ.update(env)
    if without_gpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # for the processes it starts
        import torch

        torch.cuda.is_available = lambda: False  # read before any CUDA call: vlfair picks the CPU
        torch.cuda.device_count = lambda: 0
    if "huggingface_hub.constants" in sys.modules:  # read once, at import: read again from this environment
        importlib.reload(sys.modules["huggingface_hub.constants"])
    for fd, path in ((1, out), (2, err)):  # C-level writes too (a warning printed by a library's C code)
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(handle, fd)
        os.close(handle)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115  (the process's own, for its life)
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    import torch

    torch.set_num_threads(1)
    sys.exit(target(*args))  # an exception: multiprocessing prints its traceback to err, exit code 1


def python(code: str, *argv: str) -> None:
    """What ``python -c CODE ARGV...`` runs, as a target of :func:`start` or :func:`run`."""
    sys.argv = ["-c", *argv]
    exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})


def start(directory: Path, target: Callable[..., int | None], *args: Any, env: dict[str, str] | None = None,
          name: str = "child") -> Child:
    """``target(*args)`` in a forked child, with ``env`` added to its environment; its exit code is
    what ``target`` returns (None: 0). Its stdout and stderr go to ``directory/NAME.out`` and ``.err``."""
    out, err = directory / f"{name}.out", directory / f"{name}.err"
    sys.stdout.flush()
    sys.stderr.flush()
    # after a backward pass on a machine with a GPU a forked child cannot run one (autograd's device threads): the
    # child is then a fresh interpreter, ``target`` imported by name (a module's function)
    context = get_context("spawn" if autograd_threads_started() else "fork")
    process = context.Process(target=_run, args=(target, args, env or {}, out, err, cuda_started()))
    process.start()
    return Child(process, out, err)


def run(directory: Path, target: Callable[..., int | None], *args: Any, env: dict[str, str] | None = None,
        name: str = "child", timeout: float = 300) -> tuple[int, str, str]:
    """:func:`start`, waited for: its exit code, stdout and stderr."""
    child = start(directory, target, *args, env=env, name=name)
    out, err = child.communicate(timeout)
    return child.returncode, out, err
