"""Caps on what one request may upload and how long it may run."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
MB = 2**20


class SpaceInputError(ValueError):
    """A request the Space refuses; the message is shown to the user as is."""


class TimeLimitExceeded(Exception):
    """Raised inside the worker thread when a request runs past its time limit."""


@dataclasses.dataclass(frozen=True)
class Limits:
    max_files: int = 200
    max_file_bytes: int = 10 * MB
    max_total_bytes: int = 100 * MB
    max_pixels: int = 40_000_000  # PIL's own decompression-bomb threshold is 89 M; a face photo needs far fewer
    time_limit_s: float = 600.0
    max_sample_per_group: int = 50  # rows per group cell when sampling a dataset

    @classmethod
    def from_env(cls) -> Limits:
        """Defaults, overridden by VLFAIR_SPACE_MAX_FILES, _MAX_FILE_MB, _MAX_TOTAL_MB, _TIME_LIMIT_S."""
        env = os.environ.get
        return cls(max_files=int(env("VLFAIR_SPACE_MAX_FILES", cls.max_files)),
                   max_file_bytes=int(float(env("VLFAIR_SPACE_MAX_FILE_MB", cls.max_file_bytes / MB)) * MB),
                   max_total_bytes=int(float(env("VLFAIR_SPACE_MAX_TOTAL_MB", cls.max_total_bytes / MB)) * MB),
                   time_limit_s=float(env("VLFAIR_SPACE_TIME_LIMIT_S", cls.time_limit_s)))


def run_with_time_limit(work: Callable[[], T], seconds: float) -> T:
    """``work()`` in this thread, stopped with :class:`TimeLimitExceeded` after ``seconds``.

    A watchdog thread raises the exception asynchronously in this thread. Python delivers it at
    the next bytecode, so a long C call (one batch through the model) finishes first: the request
    stops within one batch of the limit instead of running on in the background, which a plain
    ``future.result(timeout=)`` would let it do while the next request waits. An exception that
    lands in a finaliser or weakref callback is swallowed by Python, so the watchdog repeats it
    until the work has really stopped.
    """
    target = ctypes.c_ulong(threading.get_ident())
    lock = threading.Lock()
    done = threading.Event()

    def watchdog() -> None:
        if done.wait(seconds):
            return
        while True:
            with lock:
                if done.is_set():
                    return
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(TimeLimitExceeded))
            done.wait(0.1)

    threading.Thread(target=watchdog, daemon=True, name="vlfair-time-limit").start()
    try:
        try:
            return work()
        finally:
            with lock:
                done.set()
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None)  # drop one still pending
    except TimeLimitExceeded:
        raise SpaceInputError(f"the request ran past this Space's time limit of {seconds:g} s and was stopped; "
                              "use fewer images, a smaller sample or a smaller model, or run vlfair locally") from None
