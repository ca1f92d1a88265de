"""``vlfair rescore``: every metric, table and report of a run again, from its samples alone."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vlfair.compare.runs import RunError, columns_named, load_run, refuse_misreported
from vlfair.defaults import INTERVAL_SETTINGS

if TYPE_CHECKING:  # the probes (and their imports) load when a rescore runs, not with the CLI's help
    from vlfair.probes import ProbeRun

# What a rescore may change: the intervals' settings, and the seed of every resampling. Any other
# setting changes what the model scored (a prompt, a temperature, a class list): that needs a new run.
RESCORE_SETTINGS = (*INTERVAL_SETTINGS, "seed")


def rescore(run_dir: str | Path, out_dir: str | Path | None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Recompute the run in ``run_dir`` from its samples.parquet, with ``overrides`` of
    :data:`RESCORE_SETTINGS`, and write it (results.json, samples.parquet, tables, report) into
    ``out_dir`` (None: write nothing). Under the run's own settings every number is the run's.

    Returns:
        The new results.json content.

    Raises:
        RunError: the run cannot be read, its probe's version changed, or an override is not
            one a rescore can apply.
    """
    finished = rescored(run_dir, overrides)
    if out_dir is not None:
        finished.write(out_dir)
    return finished.results


def rescored(run_dir: str | Path, overrides: dict[str, Any] | None = None,
             sources: Mapping[str, str] | None = None) -> ProbeRun:
    """The run in ``run_dir`` recomputed from its samples (:func:`rescore`), not yet written; ``sources``: the
    command-line flag that set an override (``{"n_permutations": "--permutations"}``), named where it is refused."""
    from vlfair.probes import ProbeError, probe_class, runner

    run = load_run(run_dir, check=False)  # its values checked after what says more (a metric its samples lost)
    results = run.results
    name = results["probe"]
    unknown = sorted(set(overrides or {}) - set(RESCORE_SETTINGS))
    if unknown:
        raise RunError(f"setting(s) {unknown} change what the model scored; a rescore changes only "
                       f"{list(RESCORE_SETTINGS)} (run the probe again for the others)")
    try:
        probe_type = probe_class(name)
    except ProbeError as exc:
        raise RunError(f"{run.path}: {exc} (is the plugin that made it installed?)") from None
    absent = {key: flag for key, flag in (sources or {}).items() if key not in probe_type.Settings.model_fields}
    if absent:  # a shared flag (--permutations) for a probe that has no such setting, named as the flag
        key, flag = next(iter(absent.items()))
        raise RunError(f"{run.path}: {flag} sets {key}, a setting the {name} probe does not have")
    if not probe_type.keeps_samples():
        raise RunError(f"{run.path}: probe {name!r} cannot analyse samples (it defines run, not score and analyze)")
    recorded = dict(results.get("probe_settings") or {})
    current = probe_type.validate_settings().version
    if recorded.get("version", results["probe_version"]) != current:
        raise RunError(f"{run.path}: made by {name} version {results['probe_version']}, this vlfair's {name} is "
                       f"version {current}: its analysis may differ; run the probe again")
    overrides = dict(overrides or {})
    probe = probe_type({**recorded, **overrides})
    if "seed" in overrides and overrides["seed"] != recorded.get("seed") and probe.draws_with_seed():
        raise RunError(f"{run.path}: {name}'s seed also drew its samples (the per-cell sample, the generated images); "
                       "a rescore keeps them, so it cannot change the seed: run the probe again with --set seed=...")
    with columns_named([run]):
        output = probe.analyze_samples(run.samples)
    _refuse_lost_metrics(run, output.metrics)
    refuse_misreported(run)  # a value its samples do not give: the rescore would replace it unsaid
    output.samples = run.samples
    output.notes.append("Rescored from samples.parquet (vlfair rescore): figures drawn from the images or the model "
                        "themselves (median images, Grad-CAM, generated images) are in the original run's report.")
    run_settings = {key: results["settings"].get(key) for key in ("schema", "limit")}
    finished = runner.finish_run(probe, output, results["model"], results["dataset"], results.get("skipped_rows", []),
                                 run_settings)
    # the machine that scored the samples, whose rounding they carry; a run that recorded none keeps none
    finished.results.pop("machine", None)
    if "machine" in results:
        finished.results["machine"] = results["machine"]
    return finished


def _refuse_lost_metrics(run: Any, metrics: list[Any]) -> None:
    """Every metric the run reported comes out of its samples again (what a rescore changes, the intervals and
    the seed, leaves which metrics there are as it was): one that does not was measured from samples the file no
    longer holds (a column removed, its column list edited alike), and a rescore without it would say nothing."""
    from vlfair.outputs import metric_key
    from vlfair.report.results import jsonable

    found = {metric_key(metric.name, jsonable(metric.subset)) for metric in metrics}  # as results.json lists them
    lost = [metric for metric in run.results["metrics"] if metric_key(metric["name"], metric["subset"]) not in found]
    if lost:
        first = metric_key(lost[0]["name"], lost[0]["subset"])
        more = f" and {len(lost) - 1} more" if len(lost) > 1 else ""
        raise RunError(f"{run.path / run.results['samples']['file']}: gives no {first[0]} {first[1]}{more}, which the "
                       "run reported: the samples no longer hold what it was measured from (changed since the run: a "
                       "column removed, a value made NaN); restore the file, or run the probe again")


__all__ = ["RESCORE_SETTINGS", "rescore", "rescored"]
