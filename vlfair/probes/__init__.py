"""The studies as probes: a registry by name (``registry``) and ``run_probe`` (``runner``), shared by the
CLI, the Spaces and the docs.

Adding a probe: a module with a :class:`~vlfair.probes.base.Probe` subclass decorated with
``@register`` (``from vlfair.probes.registry import register``), its YAML beside it, and one line of
:data:`BUILT_IN` below. Other packages register theirs with ``vlfair.register_probe(cls)`` or declare
them in the entry-point group ``vlfair.probes`` (``name = "package.module:ProbeClass"``), found on
first use.
"""

from __future__ import annotations

from vlfair.probes.base import Context, Option, Output, Probe, ProbeError, UploadSpec
from vlfair.probes.registry import ENTRY_POINTS, PROBES, probe_class, probe_names, register, register_probe
from vlfair.probes.runner import ProbeRun, finish_run, measure_probe, refuse_generative, resolve_dataset, run_probe

# the built-in probes, imported when first read (here, above the registry the probe modules import
# `register` from: the registry names no probe module); Python runs this before any import of the registry
# returns, so that every reader sees them
BUILT_IN = {
    "professions": "vlfair.probes.professions:ProfessionsProbe",
    "traits": "vlfair.probes.traits:TraitsProbe",
    "word-influence": "vlfair.probes.word_influence:WordInfluenceProbe",
    "multilingual": "vlfair.probes.multilingual:MultilingualProbe",
    "public-figures": "vlfair.probes.public_figures:PublicFiguresProbe",
    "retrieval": "vlfair.probes.retrieval:RetrievalProbe",
}
for _name, _target in BUILT_IN.items():
    PROBES.lazy(_name, _target)

__all__ = ["BUILT_IN", "ENTRY_POINTS", "PROBES", "Context", "Option", "Output", "Probe", "ProbeError", "ProbeRun",
           "UploadSpec", "finish_run", "measure_probe", "probe_class", "probe_names", "refuse_generative", "register",
           "register_probe", "resolve_dataset", "run_probe"]
