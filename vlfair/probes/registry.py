"""The probes by name: the registry the CLI, the Spaces, the docs and the runner read (a
:class:`vlfair.registry.Registry` of :class:`~vlfair.probes.base.Probe` subclasses, :data:`PROBES`).

The built-in probes are lazy entries (``"vlfair.probes.professions:ProfessionsProbe"``), named in
:mod:`vlfair.probes` (the package, above this module: a probe module imports ``register`` from here,
and this module names no probe module, so no import goes round in a circle); each class is also
decorated with ``@register``. Other packages register theirs with ``vlfair.register_probe(cls)`` or
declare them in the entry-point group ``vlfair.probes`` (``name = "package.module:ProbeClass"``),
loaded on first use; one that fails to load is named in a warning and left out.
"""

from __future__ import annotations

from vlfair.probes.base import Probe, ProbeError
from vlfair.registry import Registry, UnknownEntry

ENTRY_POINTS = "vlfair.probes"


def _check(probe: type[Probe]) -> None:
    """What a probe class must be beyond a named Probe subclass."""
    if "neutral" in vars(probe):  # read by nothing since each metric's facts are declared once
        raise TypeError(f"{probe.__qualname__} sets neutral: a probe's own metrics' neutral values (and ranges) are "
                        "its facts now: facts = {'my_metric': 0.0} or {'my_metric': "
                        "vlfair.facts.Facts(0.0, 0.0, None)}")
    if probe.run is Probe.run and not probe.keeps_samples():
        raise TypeError(f"{probe.__qualname__} defines neither run(ctx, schema) nor score(ctx, schema) and "
                        "analyze(samples) (or declare(samples))")


def _name_of(probe: type[Probe]) -> str:
    name = getattr(probe, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{probe.__qualname__} declares no name (a class attribute: name = 'my-probe')")
    return name


# name -> class; the built-in probes' entries are added by vlfair/probes/__init__.py, which Python runs
# before this module whenever it is imported
PROBES: Registry[type[Probe]] = Registry("probe", Probe, subclass=True, entry_points=ENTRY_POINTS, name_of=_name_of,
                                         check=_check)


def register(probe: type[Probe]) -> type[Probe]:
    """Register ``probe`` under its ``name`` (a class decorator); another class of that name is an error
    (the same module's class defined again, by a module imported twice, is the same probe)."""
    PROBES.add(probe)
    probe._registered = True
    return probe


register_probe = register  # the public name: vlfair.register_probe


def probe_class(name: str) -> type[Probe]:
    """The probe ``name`` (imported on first use); an unknown name is a ProbeError naming the known ones."""
    try:
        return PROBES.get(name)
    except UnknownEntry:
        raise ProbeError(f"unknown probe {name!r}; probes: {sorted(PROBES.names())}") from None


def probe_names() -> list[str]:
    """Every probe's name: the studies' in their order (``position``, read from each class: this imports
    them), then the others by name."""
    return sorted(PROBES.names(), key=lambda name: (probe_class(name).position, name))


__all__ = ["ENTRY_POINTS", "PROBES", "probe_class", "probe_names", "register", "register_probe"]
