"""How many CPUs this process may use (affinity and container limits included, where the OS says)."""

from __future__ import annotations

import os


def available_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
