"""The probes by name: the registry the CLI, the Spaces, the docs and the runner read.

Built-in probes are the modules of ``vlfair.probes`` (each class decorated with ``@register``); other
packages register theirs with ``vlfair.register_probe(cls)`` or declare them in the entry-point group
``vlfair.probes`` (``name = "package.module:ProbeClass"``), found on first use.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib import metadata
from pathlib import Path

from vlfair.logging import get_logger
from vlfair.probes.base import Probe, ProbeError

log = get_logger(__name__)
PACKAGE = "vlfair.probes"  # the built-in probes' modules

ENTRY_POINTS = "vlfair.probes"
PROBES: dict[str, type[Probe]] = {}  # name -> class, as the registry is read
_REGISTERED: list[type[Probe]] = []  # every class registered in Python (register / register_probe)
_FOUND: list[type[Probe]] | None = None  # the built-in modules' and the entry points' classes, found once


def register(probe: type[Probe]) -> type[Probe]:
    """Register ``probe`` under its ``name`` (a class decorator); the same name twice is an error."""
    if not (isinstance(probe, type) and issubclass(probe, Probe)):
        raise TypeError(f"register takes a subclass of vlfair.probes.base.Probe, not {probe!r}")
    name = getattr(probe, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{probe.__qualname__} declares no name (a class attribute: name = 'my-probe')")
    if "neutral" in vars(probe):  # read by nothing since each metric's facts are declared once
        raise TypeError(f"{probe.__qualname__} sets neutral: a probe's own metrics' neutral values (and ranges) are "
                        "its facts now: facts = {'my_metric': 0.0} or {'my_metric': "
                        "vlfair.facts.Facts(0.0, 0.0, None)}")
    if probe.run is Probe.run and not probe.keeps_samples():
        raise TypeError(f"{probe.__qualname__} defines neither run(ctx, schema) nor score(ctx, schema) and "
                        "analyze(samples) (or declare(samples))")
    known = PROBES.get(name)
    same = known is not None and (known.__module__, known.__qualname__) == (probe.__module__, probe.__qualname__)
    if known is not None and known is not probe and not same:  # (a module imported twice defines its class again)
        raise ValueError(f"two probes are named {name!r}: {known.__module__}.{known.__qualname__} and "
                         f"{probe.__module__}.{probe.__qualname__}")
    PROBES[name] = probe
    _REGISTERED.append(probe)
    probe._registered = True  # what discovery looks for in the built-in modules
    return probe


register_probe = register  # the public name: vlfair.register_probe


def _found() -> list[type[Probe]]:
    """The probes of the built-in modules (the classes each decorated with ``@register``) and of the
    installed packages' entry points, found once per process. A plugin that fails to load is named
    in a warning and left out: one broken package does not take the others with it."""
    global _FOUND
    if _FOUND is None:
        found: list[type[Probe]] = []
        for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
            module = importlib.import_module(f"{PACKAGE}.{info.name}")
            found += [value for value in vars(module).values() if isinstance(value, type)
                      and value.__module__ == module.__name__ and value.__dict__.get("_registered")]
        for entry in metadata.entry_points(group=ENTRY_POINTS):
            try:
                loaded = entry.load()
                if not isinstance(loaded, type):
                    raise TypeError(f"it names {type(loaded).__name__} {loaded!r}, not a Probe subclass")
                found.append(register(loaded))
            except Exception as exc:  # noqa: BLE001  (a third party's module: any error is theirs)
                log.warning(f"probe plugin {entry.name} ({entry.value}) was not loaded: {type(exc).__name__}: {exc}")
        _FOUND = found
    return _FOUND


def _registry() -> dict[str, type[Probe]]:
    for probe in [*_found(), *_REGISTERED]:
        PROBES.setdefault(probe.name, probe)
    return PROBES


def probe_class(name: str) -> type[Probe]:
    probes = _registry()
    if name not in probes:
        raise ProbeError(f"unknown probe {name!r}; probes: {sorted(probes)}")
    return probes[name]


def probe_names() -> list[str]:
    """Every probe's name: the studies' in their order, then the others by name."""
    return sorted(_registry(), key=lambda name: (PROBES[name].position, name))
