"""What every Space guards a request with: a time limit on its work, and limits read from the
environment, checked when the Space starts.

Shared by the demo Space (``vlfair.space.limits``) and the metric Spaces (``vlfair.widget``); it
sits below both in the layers, so it imports nothing of vlfair.
"""

from __future__ import annotations

import ctypes
import math
import os
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
TIME_LIMIT_VARIABLE = "VLFAIR_SPACE_TIME_LIMIT_S"
TIME_LIMIT_S = 600.0  # one request of any Space, unless TIME_LIMIT_VARIABLE says otherwise
LONGEST_TIME_LIMIT_S = 86_400.0  # a day; a thread's wait takes no more than threading.TIMEOUT_MAX


class LimitSettingError(ValueError):
    """A limit variable of a Space that is not a usable number; the message names it."""


class TimeLimitExceeded(Exception):
    """Raised inside the worker thread when a request runs past its time limit."""


def env_number(name: str, default: float, *, whole: bool = False, maximum: float = math.inf) -> float:
    """The environment variable ``name`` as a number above 0 (a whole number with ``whole``) and at
    most ``maximum``; ``default`` where it is unset. Anything else ("abc", "nan", "inf", "-1",
    "0", "1.5" for a count) is a :class:`LimitSettingError` naming the variable: a Space that
    starts with it would crash on its first request, or refuse every one."""
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        number = float(text.strip())
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and 0 < number <= maximum and (number.is_integer() or not whole)):
        kind = "a whole number" if whole else "a number"
        bound = "" if math.isinf(maximum) else f" and at most {maximum:g}"
        raise LimitSettingError(f"{name}={text!r} is not {kind} above 0{bound} (unset, it is {default:g})")
    return number


def time_limit_from_env(default: float = TIME_LIMIT_S) -> float:
    """A Space's time limit on one request: :data:`TIME_LIMIT_VARIABLE` (at most a day), else ``default``."""
    return env_number(TIME_LIMIT_VARIABLE, default, maximum=LONGEST_TIME_LIMIT_S)


def call_with_time_limit(work: Callable[[], T], seconds: float) -> T:
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
        return work()
    finally:
        with lock:
            done.set()
            ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None)  # drop one still pending


__all__ = ["LONGEST_TIME_LIMIT_S", "LimitSettingError", "TIME_LIMIT_S", "TIME_LIMIT_VARIABLE", "TimeLimitExceeded",
           "call_with_time_limit", "env_number", "time_limit_from_env"]
