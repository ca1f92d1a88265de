"""Names a package resolves when first read: its import stays light (the CLI's --help imports no
datasets, scipy or torch), and ``from package import name`` still works.

The help (``vlfair --help``, ``vlfair run [PROBE] --help``, every command's) is built from the probes'
declarations and imports no torch, transformers, datasets, scipy, pandas or matplotlib (about half a
second; ``test_help_imports_no_model_or_data_library``): the commands import what they run.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``name`` is imported from ``table[name]`` (a module;
    with a leading ".", relative to the package) when first read, and kept as a plain attribute."""
    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value
    return __getattr__


__all__ = ["lazy_getattr"]
