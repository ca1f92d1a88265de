"""The error every probe raises on input it cannot run on (its settings, its data, its model)."""

from __future__ import annotations


class ProbeError(ValueError):
    """A probe cannot run on this input; the message names the probe and the problem."""
