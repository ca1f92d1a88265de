"""Caps on what one request may upload and how long it may run, and on what the demo Space keeps on disk; the
Spaces' settings, read when they start (a bad one stops the Space, named: :class:`LimitSettingError`).

Every request of a Space runs within ``VLFAIR_SPACE_TIME_LIMIT_S`` (:mod:`vlfair.guards`), the
leaderboard Space's compare tab too (:mod:`vlfair.space.compare`: its own caps on a run's samples file
and rows).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from typing import TypeVar

from vlfair.guards import (
    TIME_LIMIT_S,
    LimitSettingError,
    TimeLimitExceeded,
    call_with_time_limit,
    env_number,
    time_limit_from_env,
)

T = TypeVar("T")
MB = 2**20


def without_paths(text: str) -> str:
    """``text`` with absolute file paths replaced: errors shown to visitors do not map the server. A path
    glued to a URL's host counts too: transformers shows a local folder as "https://hf.co//root/.cache/...",
    whose path the lookbehind below (not inside a URL's own path) would otherwise let through."""
    text = re.sub(r"\b[a-z][\w+.-]*://[^\s/]*/(?=/)", "", text)  # the URL before a path glued to it
    # two parts at least (/tmp/x, /root/.cache/...): a lone "/y" in what a visitor typed is shown as typed
    return re.sub(r"(?<![\w.:/])/(?:[\w.@+-]+/)+[\w.@+-]+", "<server path>", text)


class SpaceInputError(ValueError):
    """A request the Space refuses; the message is shown to the user as is, without the server's paths
    (whatever raised it: a library's message may name the server's cache or temporary folders)."""

    def __init__(self, message: str):
        super().__init__(without_paths(message))


@dataclasses.dataclass(frozen=True)
class Limits:
    max_files: int = 200
    max_file_bytes: int = 10 * MB
    max_total_bytes: int = 100 * MB
    max_pixels: int = 40_000_000  # PIL's own decompression-bomb threshold is 89 M; a face photo needs far fewer
    time_limit_s: float = TIME_LIMIT_S
    max_sample_per_group: int = 50  # rows per group cell when sampling a dataset
    # what the demo Space keeps on disk at once, every visitor's uploads and answers together (the oldest removed
    # first: session.RequestStore); eleven 1700x1700 PNGs are 92 MB a request
    max_kept_bytes: int = 2048 * MB

    @classmethod
    def from_env(cls) -> Limits:
        """Defaults, overridden by VLFAIR_SPACE_MAX_FILES, _MAX_FILE_MB, _MAX_TOTAL_MB, _TIME_LIMIT_S,
        _MAX_KEPT_MB.

        Raises:
            LimitSettingError: a variable that is not a number above 0 (a whole one for the
                count of files; a time limit of at most a day), named: the Space does not start.
        """
        return cls(max_files=int(env_number("VLFAIR_SPACE_MAX_FILES", cls.max_files, whole=True)),
                   max_file_bytes=_megabytes("VLFAIR_SPACE_MAX_FILE_MB", cls.max_file_bytes),
                   max_total_bytes=_megabytes("VLFAIR_SPACE_MAX_TOTAL_MB", cls.max_total_bytes),
                   time_limit_s=time_limit_from_env(cls.time_limit_s),
                   max_kept_bytes=_megabytes("VLFAIR_SPACE_MAX_KEPT_MB", cls.max_kept_bytes))


def _megabytes(name: str, default: int) -> int:
    """A size in MB (a fraction too) as bytes; at least one byte."""
    return max(1, int(env_number(name, default / MB) * MB))


RECORDS_VARIABLE = "VLFAIR_RECORDS"


def records_from_env() -> str | None:
    """The leaderboard Space's ``VLFAIR_RECORDS``: where its rows link each run's Every Eval Ever record (a URL
    with ``{record}``, card-results' ``--source-url``, held to the same rules:
    ``report.eval_results.check_source_template``), or None where it is unset (no links).

    Raises:
        LimitSettingError: a value that is no such link, named: the Space does not start, as with a bad limit.
    """
    from vlfair.report.eval_results import check_source_template

    template = os.environ.get(RECORDS_VARIABLE)
    if template is None:
        return None
    try:
        check_source_template(template, RECORDS_VARIABLE)
    except ValueError as exc:
        raise LimitSettingError(f"{exc} (unset, rows link no record)") from None
    return template


def check_leaderboard_settings() -> None:
    """The leaderboard Space's own settings, read when it starts, as the demo Space reads its limits:
    VLFAIR_RECORDS (:func:`records_from_env`) and its compare tab's VLFAIR_SPACE_TIME_LIMIT_S.

    Raises:
        LimitSettingError: a bad value, named: the Space does not start (else every row would link nowhere, or
            every comparison be refused).
    """
    records_from_env()
    time_limit_from_env()


DEMO_ADVICE = "use fewer images, a smaller sample or a smaller model, or run vlfair locally"


def run_with_time_limit(work: Callable[[], T], seconds: float, advice: str = DEMO_ADVICE) -> T:
    """``work()`` in this thread, stopped after ``seconds`` (``guards.call_with_time_limit``): a
    :class:`SpaceInputError` that says so, with ``advice``."""
    try:
        return call_with_time_limit(work, seconds)
    except TimeLimitExceeded:
        raise SpaceInputError(f"the request ran past this Space's time limit of {seconds:g} s and was stopped; "
                              f"{advice}") from None


__all__ = ["MB", "RECORDS_VARIABLE", "LimitSettingError", "Limits", "SpaceInputError", "TimeLimitExceeded",
           "check_leaderboard_settings", "records_from_env", "run_with_time_limit"]
