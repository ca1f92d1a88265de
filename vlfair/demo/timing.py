"""Where the demo's time goes: wall time of each step, by probe and model kind (``vlfair demo --profile``)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator

# the columns of the profile's table: the steps a probe takes in the demo
STEPS = ("encoders", "phrasings", "answerers", "compared", "report")


@dataclasses.dataclass
class Timings:
    """Seconds spent per (step, probe); a step without a probe (loading, the report) is the demo's own.

    ``encoders`` and ``answerers``: the probe run on both world models of that kind (measured and
    written); ``phrasings``: the encoders again with other phrasings of its prompt (vlfair.demo.spread);
    ``compared``: its paired comparisons (biased vs control, encoder vs answerer);
    ``report``: its section of the demo's report. Probes that ran side by side (in worker
    processes) each count their own time: the probes' total can exceed the demo's wall clock."""

    seconds: dict[tuple[str, str | None], float] = dataclasses.field(default_factory=dict)
    started: float = dataclasses.field(default_factory=time.perf_counter)

    @contextlib.contextmanager
    def __call__(self, step: str, probe: str | None = None) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            key = (step, probe)
            self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - start

    def add(self, seconds: dict[tuple[str, str | None], float]) -> None:
        """Another process's timings, added to these."""
        for key, spent in seconds.items():
            self.seconds[key] = self.seconds.get(key, 0.0) + spent

    def elapsed(self) -> float:
        """Seconds since the timings started."""
        return time.perf_counter() - self.started

    def table(self) -> str:
        """The profile a person reads: a row per probe (its steps and total), the demo's own steps, the total."""
        probes = list(dict.fromkeys(probe for _, probe in self.seconds if probe is not None))
        header = ("probe", *STEPS, "total")
        rows: list[tuple[str, ...]] = [header]
        for probe in probes:
            spent = [self.seconds.get((step, probe), 0.0) for step in STEPS]
            rows.append((probe, *(f"{s:.1f}" for s in spent), f"{sum(spent):.1f}"))
        per_step = [sum(self.seconds.get((step, p), 0.0) for p in probes) for step in STEPS]
        rows.append(("all probes", *(f"{s:.1f}" for s in per_step), f"{sum(per_step):.1f}"))
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = ["demo time by probe and model kind (seconds, wall clock):"]
        lines += ["  " + "  ".join(cell.rjust(width) if column else cell.ljust(width)
                                   for column, (cell, width) in enumerate(zip(row, widths))) for row in rows]
        own = [(step, s) for (step, probe), s in self.seconds.items() if probe is None]
        lines.append("  the demo's own steps: " + ", ".join(f"{step} {s:.1f}" for step, s in own))
        lines.append(f"  total {self.elapsed():.1f} s")
        return "\n".join(lines)


__all__ = ["STEPS", "Timings"]
