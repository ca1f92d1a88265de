"""The studies as probes: a registry by name (``registry``) and ``run_probe`` (``runner``), shared by the
CLI, the Spaces and the docs.

Adding a probe: a module with a :class:`~vlfair.probes.base.Probe` subclass decorated with
``@register``, and its YAML beside it. Built-in probes are the modules of this package; other
packages register theirs with ``vlfair.register_probe(cls)`` or declare them in the entry-point
group ``vlfair.probes`` (``name = "package.module:ProbeClass"``), found on first use.
"""

from __future__ import annotations

from vlfair.probes.base import Context, Option, Output, Probe, ProbeError, UploadSpec
from vlfair.probes.registry import ENTRY_POINTS, PROBES, probe_class, probe_names, register, register_probe
from vlfair.probes.runner import ProbeRun, finish_run, measure_probe, refuse_generative, resolve_dataset, run_probe

__all__ = ["ENTRY_POINTS", "PROBES", "Context", "Option", "Output", "Probe", "ProbeError", "ProbeRun", "UploadSpec",
           "finish_run", "measure_probe", "probe_class", "probe_names", "refuse_generative", "register",
           "register_probe", "resolve_dataset", "run_probe"]
