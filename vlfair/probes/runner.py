"""Running a probe: one request (:class:`RunRequest`, the CLI's or :func:`run_probe`'s), each part resolved once
(:func:`run_request`): the probe and its settings, its dataset read and checked, its model loaded (a generative
one refused where the probe only reads embeddings), its output made a run (results.json validated), written
where asked."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from vlfair.defaults import CONFIDENCE, CORRECTION
from vlfair.imageio import RejectedImageError
from vlfair.logging import library_progress_bars
from vlfair.probes.base import Context, Output, Probe, ProbeError
from vlfair.probes.registry import probe_class, probe_names
from vlfair.probes.scorers import capabilities_of


def _schema_of(spec: str, default: str) -> str:
    from vlfair.data.loading import prepared_schema

    if spec.startswith("synthetic:"):
        return spec.split(":", 1)[1]
    return (Path(spec).is_dir() and prepared_schema(spec)) or default


def _taxonomy(probe: Probe, schema: str) -> Any:
    """The groups the probe's settings name (:mod:`vlfair.probes.grouping`), each an attribute of ``schema``."""
    from vlfair.data.registry import SCHEMAS
    from vlfair.data.taxonomy import DEFAULT

    taxonomy = probe.settings.taxonomy() if hasattr(probe.settings, "taxonomy") else DEFAULT
    # an attribute is a column of labels: one with a vocabulary, or one the schema marks a label
    labelled = [c.name for c in SCHEMAS[schema].columns if c.vocabulary or c.label] if schema in SCHEMAS else None
    for key in ("groups", "labels"):
        for attribute in getattr(taxonomy, key):
            if labelled is not None and attribute not in labelled:
                raise ProbeError(f"{probe.name}: setting {key}.{attribute}: {schema} data has no attribute "
                                 f"{attribute!r}; its attributes: {', '.join(labelled)}")
    return taxonomy


def resolve_dataset(probe: Probe, spec: Any, subset: str | None, split: str | None, schema: str | None,
                    columns: Any = None):
    """A Dataset object is used as is; a spec string is loaded with the probe's schema, its groups (the probe's
    ``groups``, ``labels`` and ``age_bins``) and ``columns`` (the data's names for the probe's columns)."""
    if not isinstance(spec, (str, Path)):
        if schema is None:
            fitting = [s for s in probe.schemas
                       if all(c in spec.column_names for c in probe.required_columns.get(s, ()))]
            schema = fitting[0] if fitting else probe.schemas[0]
        from vlfair.data.conform import conform
        from vlfair.data.registry import SCHEMAS

        if columns:
            from vlfair.data.forms import parse_columns, renaming

            spec = spec.rename_columns(renaming(spec.column_names, parse_columns(columns), "the dataset given"))
        # an in-memory dataset meets the same checks as a loaded one: labels by name, in the vocabulary
        if schema in SCHEMAS and all(c in spec.column_names for c in probe.required_columns.get(schema, ())):
            spec = conform(spec, SCHEMAS[schema], "the dataset given", partial=True,
                           taxonomy=_taxonomy(probe, schema))
        return spec, schema, schema
    from vlfair.data import load_dataset

    spec = str(spec)
    schema = schema or _schema_of(spec, probe.schemas[0])
    if schema not in probe.schemas:
        raise ProbeError(f"probe {probe.name!r} runs on {list(probe.schemas)} data, not {schema!r} ({spec})")
    name = spec if spec.startswith("synthetic:") else schema
    source = None if spec.startswith("synthetic:") else spec
    options = {"taxonomy": _taxonomy(probe, schema), **({} if source is None else {"columns": columns})}
    subsets = probe.default_subsets(schema) if subset is None else None
    if subsets:  # e.g. both Multi30K portions
        from datasets import concatenate_datasets

        parts = [load_dataset(name, source=source, subset=s, split=split, **options) for s in subsets]
        return concatenate_datasets(parts), schema, spec
    return load_dataset(name, source=source, subset=subset, split=split, **options), schema, spec


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
                    # the samples' record is what is new: the metrics, checked when the run was finished
                    # (finish_run), are not checked again (a run of thousands of metrics spent seconds on it)
                    validate_results({**self.results, "metrics": [], "published": []})
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
        return null_values(metrics)  # the run's warning on them, said again (finish_run put it among its warnings)


def refuse_generative(probe: Any, model: Any) -> None:
    """A generative model (an ``lvlm:`` spec, before its weights load, or a loaded one) for a probe
    that only reads embeddings is refused by name."""
    from vlfair.models import parse_spec

    generative = parse_spec(model)[0] == "lvlm" if isinstance(model, str) else "asks" in capabilities_of(model)
    if generative and not probe.asks_questions:
        asking = [name for name in probe_names() if probe_class(name).asks_questions]
        spec = model if isinstance(model, str) else model.name
        raise ProbeError(f"probe {probe.name!r} reads image and text embeddings; {spec!r} is a generative model, "
                         f"which answers questions instead (the probes that ask it: {', '.join(asking)})")


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """What one run is asked to do, as given (the CLI's parsed command line, or :func:`run_probe`'s
    arguments): :func:`run_request` resolves each part once, the probe and its settings first.

    Attributes:
        probe: a registered probe's name, or a probe already built with its settings.
        model: a model spec (loaded by the runner, in ``dtype``, on ``device``) or a loaded model.
        dataset: a ``datasets.Dataset``, a dataset spec (Hub id, prepared directory,
            ``synthetic:<name>``), or None for a probe that makes its own data.
        split, subset, schema, limit: how the data is read (``limit``: only the first rows).
        batch_size, cache_dir, dtype, device: how the model is run (``device``: ``"auto"``, ``"cpu"``, ``"cuda"``,
            ``"cuda:N"``, for a spec the runner loads; one the machine lacks is refused before any work).
        settings: overrides of the probe's YAML (``--set``, ``settings=``; an unknown key is an error).
        components: objects replacing configured parts (e.g. word-influence's ``generator``).
        flags: the parsed values of the probe's own command-line options (dest -> value), made
            settings by the probe's declarations (:meth:`Probe.overrides_from`); they win over ``settings``.
        sources: setting -> the flag that set it (``{"bootstrap": "--bootstrap"}``), named by a settings error.
        out_dir: where :func:`run_probe` writes the run (None: nowhere).
        columns: the data's names for the probe's columns (``"race=ethnicity"``, ``{"race": "ethnicity"}``).
        label: the model's name for people (results.json's ``model.name``: reports and boards), its spec kept
            (``model.spec``: what identifies it); None: the model's own name.
    """

    probe: str | Probe
    model: Any
    dataset: Any = None
    split: str | None = None
    subset: str | None = None
    schema: str | None = None
    limit: int | None = None
    batch_size: int = 64
    cache_dir: Any = "default"
    dtype: Any = "auto"
    device: Any = "auto"
    settings: Any = None
    components: dict[str, Any] | None = None
    flags: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)
    out_dir: str | Path | None = None
    label: str | None = None
    columns: Any = None


def built_probe(request: RunRequest) -> Probe:
    """The request's probe, built once with its settings (YAML, ``settings``, ``flags``): its class looked up
    once, a settings error naming the key (or the flag) and the value."""
    if isinstance(request.probe, Probe):
        if request.settings is not None or request.components is not None or request.flags:
            raise TypeError("a built probe has its settings and components already")
        return request.probe
    probe_type = probe_class(request.probe)
    settings, sources = request.settings, dict(request.sources)
    if request.flags:
        from_flags, flag_sources = probe_type.overrides_from(request.flags)
        if from_flags:  # the CLI's settings are a dict (--set); a flag wins over them
            settings = {**(settings or {}), **from_flags}
            sources.update(flag_sources)
    fields = probe_type.Settings.model_fields
    absent = {key: flag for key, flag in sources.items() if key.partition(".")[0] not in fields}
    if absent:  # a shared flag (--permutations) for a probe that has no such setting
        from vlfair.probes.settings import keys

        key, flag = next(iter(absent.items()))
        raise ProbeError(f"{probe_type.name}: {flag} sets {key}, a setting this probe does not have; its settings: "
                         f"{', '.join(keys(probe_type.Settings))}")
    return probe_type(settings, request.components, sources=sources or None)


@library_progress_bars("datasets.utils.logging")  # its bar for every filter, select and flatten: short steps
def run_request(request: RunRequest, *, before_work: Callable[[], None] | None = None) -> ProbeRun:
    """Run ``request`` and keep what it measured and drew, without writing anything. Each part is
    resolved once, in this order: the probe and its settings; whether it takes the model (a spec:
    before its weights load); ``before_work`` (the CLI claims its --out there); the data (read, its
    columns and labels checked, ``limit`` applied: before the model loads); the model; then the probe runs."""
    from vlfair.models import load_encoder

    # a copy: what the run settles for its model (Probe.settings_for) is this run's, not the next one's of a probe
    # built once and run again
    probe = copy.copy(built_probe(request))
    name = probe.name
    refuse_generative(probe, request.model)  # a spec: before its weights load (or download)
    if str(request.device) != "auto":  # refused before --out is claimed, the data read or the weights loaded
        if not isinstance(request.model, str):
            raise ProbeError(f"device={str(request.device)!r} places a model the run loads from its spec; a loaded "
                             "model runs where it was loaded (vlfair.load_encoder(..., device=...))")
        from vlfair.models.base import checked_device

        checked_device(request.device)
    if before_work is not None:
        before_work()
    schema, dataset_name = request.schema, None
    if probe.needs_dataset:
        if request.dataset is None:
            raise ProbeError(f"probe {name!r} needs a dataset")
        data, schema, dataset_name = resolve_dataset(probe, request.dataset, request.subset, request.split, schema,
                                                     request.columns)
        probe.check_columns(data, schema)
        if request.limit is not None:
            data = data.select(range(min(int(request.limit), data.num_rows)))
        if data.num_rows == 0:
            raise ProbeError(f"probe {name!r}: the dataset has no rows")
    else:
        data = None
    model = request.model
    encoder = load_encoder(model, dtype=request.dtype, device=request.device) if isinstance(model, str) else model
    ctx = Context(encoder, data, batch_size=request.batch_size, cache_dir=request.cache_dir)
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
        described = {"name": str(dataset_name), "split": request.split, "subset": request.subset,
                     "fingerprint": ctx.dataset._fingerprint, "num_rows": ctx.dataset.num_rows}
    from vlfair.report.results import model_record

    model_described = model_record(encoder)
    if request.label is not None:
        model_described["name"] = request.label
    return finish_run(probe, output, model_described, described, ctx.given_rows(ctx.skipped_rows),
                      {"schema": schema, "limit": request.limit})


def measure_probe(name: str | Probe, encoder: Any, dataset: Any = None, *, split: str | None = None,
                  subset: str | None = None, schema: str | None = None, limit: int | None = None, batch_size: int = 64,
                  cache_dir: Any = "default", settings: dict[str, Any] | None = None,
                  components: dict[str, Any] | None = None, dtype: Any = "auto") -> ProbeRun:
    """Run probe ``name`` and keep what it measured and drew, without writing anything (the demo
    draws a biased and a control run on shared scales before writing both); see :func:`run_probe`.
    ``name`` may be a probe already built with its settings; ``encoder`` a spec, loaded here in
    ``dtype`` once the probe has taken it and the data is read (:func:`run_request`)."""
    if isinstance(name, Probe) and (settings is not None or components is not None):
        raise TypeError("measure_probe: a built probe has its settings and components already")
    return run_request(RunRequest(name, encoder, dataset, split=split, subset=subset, schema=schema, limit=limit,
                                  batch_size=batch_size, cache_dir=cache_dir, dtype=dtype, settings=settings,
                                  components=components))


def finish_run(probe: Probe, output: Output, model: dict[str, Any], dataset: dict[str, Any], skipped_rows: list[int],
               run_settings: dict[str, Any]) -> ProbeRun:
    """A probe's output as a run: the intervals' note, the study's published numbers beside the
    measured ones, and results.json (validated). ``run_settings``: how the data was read (schema,
    limit), reported among the settings."""
    from vlfair import verdicts
    from vlfair.report.results import build_results, validate_results

    reported_once(probe, output.metrics)
    output.notes.append(probe.intervals_note())
    measures = metric_facts(output.metrics, probe)
    s = probe.settings
    judged = verdicts.judge(output.metrics, measures, correction=getattr(s, "correction", CORRECTION),
                            confidence=float(getattr(s, "confidence", CONFIDENCE)),
                            tests_given=bool(getattr(s, "n_permutations", 0)))
    output.notes.append(f"Verdicts: {verdicts.summary_text(judged)}.")
    small = small_design(output.metrics)
    if small is not None:
        output.warnings.append(small)
    nulls = null_values([{"name": m.name, "subset": m.subset, "value": m.value, "details": m.details}
                         for m in output.metrics])
    if nulls is not None:  # a null number is said where it is, with why: no reader is left to guess
        output.warnings.append(nulls)
    found = _detections(output.metrics, judged, measures)
    if found is not None:
        output.tables[DETECTED] = found
    unseen = _read_detectable(output.metrics, measures, probe)
    if unseen is not None:
        output.tables[NOT_DETECTED] = unseen
    published = []
    if probe.published_file:
        from vlfair.probes.published import attach

        published = attach(output, probe.directory(), probe.published_file, output.published_model or model["spec"])
    results = build_results(probe.name, probe.version, model, dataset, output.metrics, skipped_rows,
                            {**output.settings, **run_settings}, output.warnings, published,
                            probe.settings.model_dump(mode="json", exclude={"notes"}), probe.family_key(dataset),
                            measures, judged)
    validate_results(results)
    return ProbeRun(probe.name, results, output)


def reported_once(probe: Probe, metrics: list[Any]) -> None:
    """A run reports each metric (a name and a subset) once, however its probe made them (its own analyze, or
    its declarations, which :func:`vlfair.probes.declared.once` checks first): one reported twice is two rows of a
    board ranked against each other, two rows of a comparison, two Hub entries of one task id."""
    from vlfair.outputs import metric_key, repeated

    twice = repeated(metric_key(metric.name, metric.subset) for metric in metrics)
    if twice is not None:
        raise ProbeError(f"{probe.name}: metric {twice[0]!r} of subset {twice[1]} is reported twice: a probe "
                         "reports each metric, a name and a subset, once")


def null_values(metrics: list[dict[str, Any]]) -> str | None:
    """One warning naming the metrics (as results.json lists them) whose value came out null, the first with why
    (its details' ``null_because``, set where the engine found it: :func:`vlfair.probes.declared.evaluate`), or
    None: what a failed run's message says too (:meth:`ProbeRun.failure`), so its claim is the warning's."""
    nulls = [m for m in metrics if m["value"] is None or not math.isfinite(m["value"])]
    if not nulls:
        return None
    first = nulls[0]
    why = (first.get("details") or {}).get("null_because") or "its samples gave no finite number"
    named = f"{first['name']} {json.dumps(first['subset'])}"
    return f"{len(nulls)} of {len(metrics)} values came out null (e.g. {named}: {why})"


SMALL_GROUP = 20  # images per group below which a bias metric's interval and test are rough (DESIGN "Verdicts")


def small_design(metrics: list[Any]) -> str | None:
    """One warning naming the judged bias metrics with a group of fewer than :data:`SMALL_GROUP` images (the
    smallest named), or None. Below it a percentile bootstrap interval covers less than its level (a mean of normal
    scores, 95 % asked: 0.74 at 3 images, 0.85 at 5, 0.88 at 10, 0.92 at 20) and a test has little power."""
    from vlfair.report.numbers import format_subset

    small = []
    for metric in metrics:
        counts = (metric.details or {}).get("group_counts")
        if metric.verdict is None or not isinstance(counts, dict) or not counts:
            continue
        sizes = _counts_in(counts)
        if sizes and min(sizes) < SMALL_GROUP:
            small.append((min(sizes), metric))
    if not small:
        return None
    fewest, metric = min(small, key=lambda found: found[0])
    return (f"{len(small)} bias metric(s) have a group of fewer than {SMALL_GROUP} images (the smallest: {fewest:.0f} "
            f"in {metric.name} {format_subset(metric.subset) or '(all)'}): below that an interval covers less than "
            "its level and a test detects little; read their verdicts as rough, or give more images per group")


NOT_DETECTED = "not_detected"  # the table of bias measures judged by their interval and not detected
DETECTED = "detected"  # the table of the bias the run detected, each with its rule and p-values


def _counts_in(counts: dict[str, Any]) -> list[float]:
    """Every group's images in ``group_counts``, flat or by stratum (``{stratum: {group: n}}``, as word influence
    counts each variant's groups)."""
    return [n for c in counts.values() for n in (_counts_in(c) if isinstance(c, dict) else [c])
            if isinstance(n, (int, float))]


def _detections(metrics: list[Any], judged: dict[str, Any], measures: dict[str, Any]) -> Any:
    """The table of every metric the run's verdicts detect (None: none): its value, its distance from no bias
    (a ratio of 0.99982 reads "1" at three digits, its -0.000183 does not), interval, rule, raw p and the
    adjusted p-values, under a footnote naming the family and its correction."""
    import pandas as pd  # here: `vlfair --help` imports this module, and no data library

    from vlfair import verdicts
    from vlfair.outputs import Table
    from vlfair.report.numbers import format_subset

    rows = [{"metric": m.name, "subset": format_subset(m.subset), "value": m.value,
             "value - no bias": m.value - measures[m.name].neutral,
             "CI low": m.ci[0] if m.ci else None, "CI high": m.ci[1] if m.ci else None,
             "judged by": m.verdict["rule"], "side": m.verdict["side"], "p": m.verdict["p_value"],
             "p (Holm)": m.verdict["p_holm"], "q (BH)": m.verdict["q_bh"]} for m in metrics if verdicts.detected(m)]
    if not rows:
        return None
    return Table(pd.DataFrame(rows).set_index(["metric", "subset"]), footnotes=[
        f"Bias detected: {verdicts.summary_text(judged)}. Judged by test: the p-value of a test against no "
        "difference (a statistic never on one side of its neutral value, such as a largest gap); by interval: the "
        "p-value of the metric's interval (DESIGN.md, Verdicts)."])


def metric_facts(metrics: list[Any], probe: Probe) -> dict[str, Any]:
    """Each metric name's facts (:class:`vlfair.facts.Facts`), as results.json records them: those its declaration's
    measure carries, else the probe's own or the catalog's (:func:`vlfair.measures.catalog.facts_of`). One name
    has one measure: two metrics of a name declared with different facts are refused (a reader could not tell
    which a value is judged by)."""
    from vlfair.measures.catalog import facts_of

    found: dict[str, Any] = {}
    for metric in metrics:
        facts = metric.facts if metric.facts is not None else facts_of(metric.name, probe.facts)
        if found.setdefault(metric.name, facts) != facts:
            raise ProbeError(f"{probe.name}: metric {metric.name!r} is declared with two facts ({found[metric.name]} "
                             f"and {facts}): one name is one measure")
    return found


def _read_detectable(metrics: list[Any], measures: dict[str, Any], probe: Probe) -> Any:
    """Each bias measure's smallest detectable deviations at the run's design (``Metric.mde``), from its interval;
    and the table of those that detect no bias, each with what it could not have seen (None: there are none)."""
    import pandas as pd  # here: `vlfair --help` imports this module, and no data library

    from vlfair import stats
    from vlfair.defaults import CONFIDENCE
    from vlfair.outputs import Table
    from vlfair.report.numbers import format_subset

    confidence = float(getattr(probe.settings, "confidence", CONFIDENCE))
    unseen = []
    for metric in metrics:
        facts = measures[metric.name]
        if facts.judged != "interval" or metric.value is None:  # a level; a measure judged by its test (a gap)
            continue
        # its arms read at the level its interval was (expanded for small groups: vlfair.measures.null.interval_of)
        level = stats.expanded_confidence(confidence, metric.details.get("ci_rows"))
        metric.mde = stats.interval_detectable(metric.value, metric.ci, level, facts.sides)
        if metric.mde is not None and metric.verdict is not None and metric.verdict["detected"] is False:
            unseen.append({"metric": metric.name, "subset": format_subset(metric.subset), "value": metric.value,
                           "CI low": metric.ci[0], "CI high": metric.ci[1], "unseen under": metric.mde[0],
                           "unseen over": metric.mde[1]})
    if not unseen:
        return None
    return Table(pd.DataFrame(unseen).set_index(["metric", "subset"]), footnotes=[
        f"No bias detected (after the run's correction for its many tests; most hold the neutral value in their "
        f"{confidence:.0%} interval). Unseen under and "
        f"over: the smallest deviations below and above it that a run of this design (its groups' sizes and "
        f"spread, its intervals) detects with {stats.DETECTION_POWER:.0%} power (empty: a side the metric cannot "
        "take); a bias smaller than that could be there unseen (vlfair power RUN --metric M --effect X: the "
        "images a given one needs)."])


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
            ``batch_size``, ``cache_dir``, ``dtype``, ``device``, ``settings`` (overrides of the probe's YAML; an
            unknown key is an error) and ``components`` (objects replacing configured parts, e.g.
            word-influence's ``generator``: any object with ``generate`` and ``identity``,
            ``classifier`` or ``transmuter``): the fields of :class:`RunRequest`, which
            :func:`run_request` resolves.

    Returns:
        the results.json content.
    """
    request = RunRequest(name, encoder, dataset, out_dir=out_dir, **options)
    run = run_request(request)
    if request.out_dir is not None:
        run.write(request.out_dir)
    return run.results
