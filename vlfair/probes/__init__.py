"""The studies as probes: a registry by name and ``run_probe``, shared by the CLI, the Spaces and
the docs.

Adding a probe: a module with a :class:`~vlfair.probes.base.Probe` subclass decorated with
``@register``, and its YAML beside it. Built-in probes are the modules of this package; other
packages register theirs with ``vlfair.register_probe(cls)`` or declare them in the entry-point
group ``vlfair.probes`` (``name = "package.module:ProbeClass"``), found on first use.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import pkgutil
from importlib import metadata
from pathlib import Path
from typing import Any

from vlfair.imageio import RejectedImageError
from vlfair.logging import get_logger, library_progress_bars
from vlfair.probes.base import Context, Option, Output, Probe, ProbeError, UploadSpec

log = get_logger(__name__)

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
    if probe.run is Probe.run and not probe.keeps_samples():
        raise TypeError(f"{probe.__qualname__} defines neither run(ctx, schema) nor score(ctx, schema) and "
                        "analyze(samples)")
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
        for info in pkgutil.iter_modules(__path__):
            module = importlib.import_module(f"{__name__}.{info.name}")
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


def _schema_of(spec: str, default: str) -> str:
    from vlfair.data.loading import prepared_schema

    if spec.startswith("synthetic:"):
        return spec.split(":", 1)[1]
    return (Path(spec).is_dir() and prepared_schema(spec)) or default


def resolve_dataset(probe: Probe, spec: Any, subset: str | None, split: str | None, schema: str | None):
    """A Dataset object is used as is; a spec string is loaded with the probe's schema."""
    if not isinstance(spec, (str, Path)):
        if schema is None:
            fitting = [s for s in probe.schemas
                       if all(c in spec.column_names for c in probe.required_columns.get(s, ()))]
            schema = fitting[0] if fitting else probe.schemas[0]
        from vlfair.data.conform import conform
        from vlfair.data.schemas import SCHEMAS

        # an in-memory dataset meets the same checks as a loaded one: labels by name, in the vocabulary
        if schema in SCHEMAS and all(c in spec.column_names for c in probe.required_columns.get(schema, ())):
            spec = conform(spec, SCHEMAS[schema], "the dataset given", partial=True)
        return spec, schema, schema
    from vlfair.data import load_dataset

    spec = str(spec)
    schema = schema or _schema_of(spec, probe.schemas[0])
    if schema not in probe.schemas:
        raise ProbeError(f"probe {probe.name!r} runs on {list(probe.schemas)} data, not {schema!r} ({spec})")
    name = spec if spec.startswith("synthetic:") else schema
    source = None if spec.startswith("synthetic:") else spec
    subsets = probe.default_subsets(schema) if subset is None else None
    if subsets:  # e.g. both Multi30K portions
        from datasets import concatenate_datasets

        parts = [load_dataset(name, source=source, subset=s, split=split) for s in subsets]
        return concatenate_datasets(parts), schema, spec
    return load_dataset(name, source=source, subset=subset, split=split), schema, spec


@dataclasses.dataclass
class ProbeRun:
    """A probe's measured results and its outputs (tables, figures, notes), not yet written."""

    name: str
    results: dict[str, Any]
    output: Output

    def write(self, out_dir: str | Path, without_figures: str | None = None) -> Path:
        """results.json, samples.parquet (where the probe keeps samples), tables, plots and
        report.html into ``out_dir`` (the main process only writes: under torchrun or accelerate
        launch there is one writer); returns report.html. The folder is written as a whole
        (``vlfair.atomic``): a run killed while writing leaves an earlier run there whole, and a
        second process writing the same folder is refused. ``without_figures``: no plot is drawn
        (drawing is most of a small run's writing time), and report.html says this sentence instead."""
        from vlfair.atomic import atomic_output
        from vlfair.distributed import current_world
        from vlfair.report.results import validate_results
        from vlfair.report.writer import RUN_OUTPUT, write_outputs
        from vlfair.samples import SAMPLES_FILE, write_samples

        if current_world().is_main:
            with atomic_output(out_dir, RUN_OUTPUT) as out:  # samples and the rest: one folder, swapped in at once
                if self.output.samples is not None:
                    header = {k: v for k, v in self.results.items() if k not in ("metrics", "published", "samples")}
                    self.results["samples"] = write_samples(self.output.samples, out / SAMPLES_FILE, header)
                    validate_results(self.results)
                figures, notes = self.output.figures, self.output.notes
                if without_figures:
                    figures, notes = {}, [*notes, without_figures]
                write_outputs(out, self.results, self.output.tables, figures, notes, f"vlfair {self.name} probe")
        return Path(out_dir) / "report.html"

    def failure(self) -> str | None:
        """Why this run is not a result to build on, or None: it measured nothing, or some of its
        values came out null (the CLI then writes it beside ``--out``, never over an earlier run)."""
        metrics = self.results["metrics"]
        if not metrics:
            warnings = self.results["warnings"]
            more = f"; and {len(warnings) - 3} more warnings, in results.json" if len(warnings) > 3 else ""
            return "measured nothing (" + ("; ".join(warnings[:3]) or "no metric came out") + more + ")"
        nulls = [m for m in metrics if m["value"] is None]
        if nulls:
            first = nulls[0]
            return (f"{len(nulls)} of {len(metrics)} values came out null (e.g. {first['name']} "
                    f"{json.dumps(first['subset'])}; see the run's warnings)")
        return None


def refuse_generative(probe: Any, model: Any) -> None:
    """A generative model (an ``lvlm:`` spec, before its weights load, or a loaded one) for a probe
    that only reads embeddings is refused by name."""
    from vlfair.models import parse_spec

    generative = (parse_spec(model)[0] == "lvlm" if isinstance(model, str)
                  else getattr(model, "kind", "contrastive") == "generative")
    if generative and not probe.asks_questions:
        asking = [name for name in probe_names() if probe_class(name).asks_questions]
        spec = model if isinstance(model, str) else model.name
        raise ProbeError(f"probe {probe.name!r} reads image and text embeddings; {spec!r} is a generative model, "
                         f"which answers questions instead (the probes that ask it: {', '.join(asking)})")


@library_progress_bars("datasets.utils.logging")  # its bar for every filter, select and flatten: short steps
def measure_probe(name: str, encoder: Any, dataset: Any = None, *, split: str | None = None, subset: str | None = None,
                  schema: str | None = None, limit: int | None = None, batch_size: int = 64, cache_dir: Any = "default",
                  settings: dict[str, Any] | None = None, components: dict[str, Any] | None = None) -> ProbeRun:
    """Run probe ``name`` and keep what it measured and drew, without writing anything (the demo
    draws a biased and a control run on shared scales before writing both); see :func:`run_probe`."""
    from vlfair.models import load_encoder

    probe = probe_class(name)(settings, components)
    refuse_generative(probe, encoder)
    encoder = load_encoder(encoder) if isinstance(encoder, str) else encoder
    refuse_generative(probe, encoder)
    if probe.needs_dataset:
        if dataset is None:
            raise ProbeError(f"probe {name!r} needs a dataset")
        data, schema, dataset_name = resolve_dataset(probe, dataset, subset, split, schema)
        probe.check_columns(data, schema)
        if limit is not None:
            data = data.select(range(min(int(limit), data.num_rows)))
        if data.num_rows == 0:
            raise ProbeError(f"probe {name!r}: the dataset has no rows")
    else:
        data = None
    ctx = Context(encoder, data, batch_size=batch_size, cache_dir=cache_dir)
    try:
        output = probe.run(ctx, schema)
    except RejectedImageError as exc:  # named by its row in the probe's sample: name the data's
        if exc.row is None:
            raise
        raise exc.at(ctx.given_rows([exc.row])[0]) from exc
    if output.dataset is not None:  # a probe that makes its own data says what it made
        described = output.dataset
    elif data is None:  # what it made follows from its settings
        made = json.dumps(probe.settings.model_dump(mode="json"), sort_keys=True)
        described = {"name": f"made by the {name} probe", "split": None, "subset": None,
                     "fingerprint": hashlib.sha256(made.encode()).hexdigest()[:16], "num_rows": 0}
    else:  # a probe may narrow it (multilingual keeps one caption pair per image): described as read
        described = {"name": str(dataset_name), "split": split, "subset": subset,
                     "fingerprint": ctx.dataset._fingerprint, "num_rows": ctx.dataset.num_rows}
    from vlfair.report.results import model_record

    return finish_run(probe, output, model_record(encoder), described, ctx.given_rows(ctx.skipped_rows),
                      {"schema": schema, "limit": limit})


def finish_run(probe: Probe, output: Output, model: dict[str, Any], dataset: dict[str, Any], skipped_rows: list[int],
               run_settings: dict[str, Any]) -> ProbeRun:
    """A probe's output as a run: the intervals' note, the study's published numbers beside the
    measured ones, and results.json (validated). ``run_settings``: how the data was read (schema,
    limit), reported among the settings."""
    from vlfair.report.results import build_results, validate_results

    output.notes.append(probe.intervals_note())
    published = []
    if probe.published_file:
        from vlfair.probes.published import attach

        published = attach(output, probe.directory(), probe.published_file, output.published_model or model["spec"])
    results = build_results(probe.name, probe.version, model, dataset, output.metrics, skipped_rows,
                            {**output.settings, **run_settings}, output.warnings, published,
                            probe.settings.model_dump(mode="json", exclude={"notes"}), probe.family_key(dataset))
    validate_results(results)
    return ProbeRun(probe.name, results, output)


def run_probe(name: str, encoder: Any, dataset: Any = None, out_dir: str | Path | None = "out", **options: Any
              ) -> dict[str, Any]:
    """Run probe ``name`` end to end; writes results.json, tables, plots and report.html into ``out_dir``.

    Args:
        name: a registered probe (:func:`probe_names`).
        encoder: an Encoder or a model spec.
        dataset: a ``datasets.Dataset`` with the probe's columns, or a dataset spec (Hub id,
            prepared directory, ``synthetic:<name>``).
        out_dir: where to write; None writes nothing.
        options: ``split``, ``subset``, ``schema``, ``limit`` (use only the first rows),
            ``batch_size``, ``cache_dir``, ``settings`` (overrides of the probe's YAML; an unknown
            key is an error) and ``components`` (objects replacing configured parts, e.g.
            word-influence's ``generator``: any object with ``generate`` and ``identity``,
            ``classifier`` or ``transmuter``).

    Returns:
        the results.json content.
    """
    run = measure_probe(name, encoder, dataset, **options)
    if out_dir is not None:
        run.write(out_dir)
    return run.results


__all__ = ["ENTRY_POINTS", "PROBES", "Context", "Option", "Output", "Probe", "ProbeError", "ProbeRun", "UploadSpec",
           "finish_run", "measure_probe", "probe_class", "probe_names", "refuse_generative", "register",
           "register_probe", "run_probe"]
