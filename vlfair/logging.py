"""vlfair's logger, with Hugging Face-style verbosity.

Every module logs to a child of the ``vlfair`` logger (``get_logger(__name__)``). The level comes
from ``VLFAIR_VERBOSITY`` (debug, info, warning, error, critical), else from ``set_verbosity``;
the library's default is ``warning``, and the CLI's is ``info`` (``--verbose``: debug, ``--quiet``:
error and no progress bars). Messages below warning go to stdout, warnings and errors to stderr,
so ``vlfair demo > log.txt`` keeps the progress lines and the terminal still shows what went wrong.

Messages go through :func:`get_logger`, never ``print``: info (what a command does and wrote) on stdout,
warnings and errors on stderr. Level: ``--quiet``/``--verbose``, else ``VLFAIR_VERBOSITY``, else info for
the CLI and warning for the library. ``print`` is left for a command's data output (``card-results``
YAML) and the CLI's one-line error. A mistake argparse finds (an unknown flag, a missing argument) is one
line, as every other: ``vlfair demo: unrecognized arguments: --x (vlfair demo --help lists what it
takes)``, exit 2.

Long work shows progress (tqdm, one bar per long step, main process only). The libraries' own bars
(datasets' "Filter" and "Flattening the indices", transformers' "Loading weights", diffusers' "Loading
pipeline components") mark short steps between vlfair's lines: ``measure_probe``, ``prepare`` (whose own
bar reads and decodes every image), model and pipeline loading hide them through
:func:`library_progress_bars` unless vlfair logs at debug (``--verbose``); Hub downloads keep theirs.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
import threading
import warnings
from collections.abc import Iterator

VERBOSITY_ENV = "VLFAIR_VERBOSITY"
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR,
          "critical": logging.CRITICAL}
ROOT = "vlfair"

_lock = threading.Lock()
_configured = False
_progress_bars = True
_said: set[str] = set()  # unknown VLFAIR_VERBOSITY values already reported


class _Below(logging.Filter):
    def __init__(self, level: int):
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < self.level


class _Console(logging.StreamHandler):
    """Writes to whatever ``sys.stdout``/``sys.stderr`` is at the time (pytest and Spaces swap them)."""

    def __init__(self, stream_name: str):
        self._stream_name = stream_name
        super().__init__()

    @property
    def stream(self):
        return getattr(sys, self._stream_name)

    @stream.setter
    def stream(self, _value) -> None:  # StreamHandler.__init__ assigns one; the current one is used instead
        pass


class _Formatter(logging.Formatter):
    """Plain lines for a person: "message", "warning: message", "debug [vlfair.embed]: message"."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.levelno == logging.INFO:
            return message
        prefix = record.levelname.lower() + (f" [{record.name}]" if record.levelno < logging.INFO else "")
        return f"{prefix}: {message}"


class _TorchvisionFallback(logging.Filter):
    """transformers warns, on the first use of each image processor, that torchvision is missing and
    it falls back to the PIL backend. vlfair's preprocessing reproduces the PIL backend exactly, so
    the warning says nothing to a vlfair user; every other transformers message passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        # "`CLIPImageProcessor` requires torchvision (not installed); falling back to ..."
        message = record.getMessage()
        return not ("torchvision" in message and "falling back" in message.lower())


def silence_torchvision_fallback() -> None:
    """Install the filter on the transformers logger that emits the warning (idempotent; imports nothing)."""
    source = logging.getLogger("transformers.utils.import_utils")
    if not any(isinstance(f, _TorchvisionFallback) for f in source.filters):
        source.addFilter(_TorchvisionFallback())


def env_level() -> int | None:
    """The level ``VLFAIR_VERBOSITY`` asks for; None when unset. An unknown value is said once, on stderr."""
    value = os.environ.get(VERBOSITY_ENV, "").strip().lower()
    if not value:
        return None
    if value not in LEVELS:
        if value not in _said:
            _said.add(value)
            print(f"vlfair: {VERBOSITY_ENV}={value!r} is not one of {', '.join(LEVELS)}; using warning",
                  file=sys.stderr)
        return logging.WARNING
    return LEVELS[value]


def _configure() -> logging.Logger:
    global _configured
    root = logging.getLogger(ROOT)
    with _lock:
        if _configured:
            return root
        out = _Console("stdout")
        out.addFilter(_Below(logging.WARNING))
        err = _Console("stderr")
        err.setLevel(logging.WARNING)
        for handler in (out, err):
            handler.setFormatter(_Formatter())
            root.addHandler(handler)
        root.setLevel(env_level() or logging.WARNING)
        root.propagate = False  # one line per message, also when the application configured the root logger
        _configured = True
    return root


def get_logger(name: str | None = None) -> logging.Logger:
    """The ``vlfair`` logger or one of its children (pass ``__name__``)."""
    _configure()
    return logging.getLogger(name if name and name.startswith(ROOT) else ROOT)


def set_verbosity(level: int | str) -> None:
    """Set the level of every vlfair logger: a ``logging`` level or one of :data:`LEVELS`' names."""
    if isinstance(level, str):
        if level.lower() not in LEVELS:
            raise ValueError(f"verbosity {level!r} is not one of {', '.join(LEVELS)}")
        level = LEVELS[level.lower()]
    _configure().setLevel(level)


def get_verbosity() -> int:
    return _configure().getEffectiveLevel()


def disable_progress_bars() -> None:
    global _progress_bars
    _progress_bars = False


def enable_progress_bars() -> None:
    global _progress_bars
    _progress_bars = True


def progress_bars_enabled() -> bool:
    return _progress_bars


@contextlib.contextmanager
def library_progress_bars(*logging_modules: str) -> Iterator[None]:
    """Hide, for the duration, the progress bars that libraries draw themselves, each named by its
    logging module ("datasets.utils.logging", "transformers.utils.logging", "diffusers.utils.logging":
    the same switches in each), unless vlfair logs at debug (``--verbose``); each is restored after.

    Their bars mark short steps between vlfair's lines (datasets' "Filter" and "Flattening the
    indices", transformers' "Loading weights", diffusers' "Loading pipeline components"); vlfair
    draws one bar per long step itself. Hub downloads keep theirs: vlfair downloads before these
    steps, and draws no bar of its own for a download. A library whose environment variable decides
    (HF_DATASETS_DISABLE_PROGRESS_BARS=0) keeps its bars, as that variable says.
    """
    if get_verbosity() <= logging.DEBUG:
        yield
        return
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars

    modules = [importlib.import_module(name) for name in logging_modules]
    shown = [module.is_progress_bar_enabled() for module in modules]
    hub_hidden = are_progress_bars_disabled()  # transformers' switch turns the Hub's too: restored below
    with warnings.catch_warnings():  # "cannot disable: the environment variable has priority", at every call
        warnings.simplefilter("ignore")
        for module in modules:
            module.disable_progress_bar()
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for module, was_shown in zip(modules, shown):
                if was_shown:
                    module.enable_progress_bar()
            if hub_hidden and not are_progress_bars_disabled():
                disable_progress_bars()


__all__ = ["LEVELS", "VERBOSITY_ENV", "disable_progress_bars", "enable_progress_bars", "get_logger", "get_verbosity",
           "library_progress_bars", "progress_bars_enabled", "set_verbosity", "silence_torchvision_fallback"]
