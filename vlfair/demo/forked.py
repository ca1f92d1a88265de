"""Independent pieces of the demo side by side, in forked worker processes.

The demo's probes do not depend on each other, and most of a probe's time is single-threaded
(resampling, drawing figures), so on a machine with two cores two probes at once take half the
time. Workers are forked (Linux): they start with the parent's loaded models and data, without
importing anything again; each runs torch on one thread, so that the workers share the cores
instead of each spreading over all of them. Where fork is not the platform's way (macOS, Windows),
with one worker, where the models are on a GPU (a forked child cannot use the parent's CUDA), or after a
backward pass on a machine with a GPU (a forked child cannot run one), the pieces run one after another in
this process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path
from typing import Any, TypeVar

from vlfair._cpu import available_cpus

Item = TypeVar("Item")
Result = TypeVar("Result")

# The work of the pool being run, inherited by its forked workers (so it need not be pickled: a closure
# over loaded models is what it usually is)
_WORK: Callable[[int], Any] | None = None


def default_workers(pieces: int) -> int:
    """As many workers as there are pieces or cores, whichever is fewer (1 where fork is unavailable)."""
    return min(pieces, available_cpus()) if sys.platform == "linux" else 1


def cuda_started() -> bool:
    """Whether this process has started CUDA (a model on a GPU): a forked child cannot use it ("Cannot
    re-initialize CUDA in forked subprocess"), so the pieces run here, one after another, their forward
    passes on the GPU."""
    torch = sys.modules.get("torch")
    return torch is not None and bool(torch.cuda.is_initialized())


def autograd_threads_started() -> bool:
    """Whether torch's autograd engine runs its per-device threads in this process: after a backward pass on a
    machine with a GPU (whatever device the tensors were on), a forked child that runs a backward pass of its own
    (a training, Grad-CAM) fails ("Unable to handle autograd's threading in combination with fork-based
    multiprocessing"). torch names those threads ``pt_autograd_N``; read from /proc (Linux, where fork is used)."""
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:
        return False
    names = []
    for thread in threads:
        try:
            names.append(Path(f"/proc/self/task/{thread}/comm").read_text())
        except OSError:  # a thread that ended meanwhile
            continue
    return any(name.startswith("pt_autograd") for name in names)


def fork_safe() -> bool:
    """Whether a forked child can do what this process does: not after CUDA started (:func:`cuda_started`) or
    autograd's device threads did (:func:`autograd_threads_started`)."""
    return not cuda_started() and not autograd_threads_started()


def _worker_started() -> None:
    import torch

    from vlfair.logging import disable_progress_bars

    torch.set_num_threads(1)  # the workers share the cores (and libgomp's pool is not one a fork may use)
    disable_progress_bars()  # bars of several processes would overwrite each other: the parent shows one


def _run(index: int) -> Any:
    assert _WORK is not None, "a forked worker runs the work of the pool that forked it"
    return _WORK(index)


def forked_map(work: Callable[[Item], Result], items: Sequence[Item], workers: int,
               done: Callable[[Result], None] = lambda _: None) -> list[Result]:
    """``work(item)`` for each item, in order; ``done(result)`` is called in this process as each
    finishes (in the order they finish). ``workers`` > 1 forks that many worker processes (Linux);
    an exception in a worker is raised here once the pieces already running have stopped."""
    global _WORK
    if workers <= 1 or len(items) <= 1 or sys.platform != "linux" or not fork_safe():
        results = []
        for item in items:
            results.append(work(item))
            done(results[-1])
        return results
    _WORK = lambda index: work(items[index])  # noqa: E731  (the workers inherit it: nothing to pickle)
    pool = ProcessPoolExecutor(min(workers, len(items)), mp_context=get_context("fork"), initializer=_worker_started)
    try:
        futures: dict[Future, int] = {pool.submit(_run, index): index for index in range(len(items))}
        found: dict[int, Result] = {}
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                result = future.result()  # a worker's exception, raised here: the others are cancelled below
                found[futures[future]] = result
                done(result)
        return [found[index] for index in range(len(items))]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _WORK = None


__all__ = ["default_workers", "forked_map"]
