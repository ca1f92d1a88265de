"""``vlfair`` command line: one subcommand per entry of a registry."""

from __future__ import annotations

import argparse
import atexit
import json
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from vlfair._version import __version__
from vlfair.defaults import BOOTSTRAP, MAX_BOOTSTRAP, MAX_PERMUTATIONS, PERMUTATIONS, SEED
from vlfair.logging import get_logger

if TYPE_CHECKING:  # the CLI imports its commands' modules when it runs them
    from collections.abc import Iterable

    from vlfair.atomic import OutputKind

log = get_logger(__name__)  # results and progress: stdout at info; warnings: stderr; --quiet leaves errors only



def _demo(args: argparse.Namespace) -> int:
    if args.selfcheck:
        given = [flag for flag, value in (("--retrain", args.retrain), ("--profile", args.profile),
                                          ("--full", args.full), ("--cache-dir", args.cache_dir),
                                          ("--label", args.label), ("--device", args.device != "auto")) if value]
        if given:
            raise UserError(f"--selfcheck checks the embedding engine instead of running the demo: "
                            f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} to the demo")
        return _selfcheck(args)
    _check_device(args.device)
    from vlfair.demo.timing import Timings

    timings = Timings()  # --profile: the imports are the demo's first step
    with timings("imports"):
        from vlfair.demo.run import DEMO_OUTPUT, run_demo
    _check_out_dir(Path(args.out or "vlfair-demo"), DEMO_OUTPUT)
    entries = run_demo(args.out or "vlfair-demo", cache_dir=args.cache_dir or "default", retrain=args.retrain,
                       timings=timings, profile=args.profile, full=args.full, labels=dict(args.label or []),
                       device=args.device)
    return 0 if entries else 1


def _selfcheck(args: argparse.Namespace) -> int:
    from vlfair.selfcheck import run_selfcheck

    log.info("vlfair self-check: the embedding engine against transformers on a tiny encoder.")
    report = run_selfcheck(args.out)
    width = max(len(name) for name in report["checks"])
    for name, ok in report["checks"].items():
        log.info(f"  {name:<{width}}  {'ok' if ok else 'FAILED'}")
    log.info(f"  max |vlfair - transformers| = {report['max_abs_diff_vs_transformers']:.2e} "
          f"(tolerance {report['tolerance']:.0e}); {report['num_images']} images embedded in "
          f"{report['embed_seconds']} s, cached re-run {report['cached_seconds']} s")
    if args.out:
        log.info(f"  written: {args.out}/selfcheck.json")
    return 0 if report["passed"] else 1


def _add_demo(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("demo", help="offline: every probe on a world with planted biases, biased vs control",
                            description="Run every probe, offline, on a synthetic world whose biases are known: a "
                                        "biased and a control encoder (shipped with vlfair), a summary table of what "
                                        "each measure found, and a report.")
    parser.add_argument("--out", help="directory for the demo's outputs (default vlfair-demo)")
    parser.add_argument("--retrain", action="store_true",
                        help="train the world encoders on this machine instead of loading the shipped ones")
    parser.add_argument("--cache-dir", help="where encoders trained with --retrain are cached")
    parser.add_argument("--profile", action="store_true",
                        help="also print where the time went: each probe on each kind of model, the comparisons, "
                             "loading and the report")
    parser.add_argument("--full", action="store_true",
                        help="also draw the figures of the answerers' own runs (the report shows their measures as "
                             "forest plots either way); slower")
    parser.add_argument("--label", type=demo_label, action="append", metavar="MODEL=NAME",
                        help=f"a name for people of one of the demo's models ({', '.join(DEMO_MODELS)}), in its "
                             "results, reports and boards (repeatable)")
    _add_device(parser, "where the demo's models run")
    parser.add_argument("--selfcheck", action="store_true",
                        help="instead, check the embedding engine on a tiny encoder")
    parser.set_defaults(handler=_demo)


DEMO_MODELS = ("biased", "control", "answerer-biased", "answerer-control")  # the demo's models, by their folders


def demo_label(text: str) -> tuple[str, str]:
    """A demo's ``--label MODEL=NAME``: one of :data:`DEMO_MODELS` and a name as ``--label`` takes it."""
    model, equals, name = text.partition("=")
    if not equals or model.strip() not in DEMO_MODELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not MODEL=NAME with MODEL one of {', '.join(DEMO_MODELS)}")
    return model.strip(), label_text(name)


LABEL_LIMIT = 200  # characters: a name a table and a plot can show


def label_text(text: str) -> str:
    """A ``--label``: a model's name for people, refused where it is empty, only spaces or too long to show."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is empty or only spaces: give the name people should read")
    if len(text) > LABEL_LIMIT:
        raise argparse.ArgumentTypeError(f"is {len(text):,} characters; at most {LABEL_LIMIT}")
    return text.strip()


def _run(args: argparse.Namespace) -> int:
    """``vlfair run PROBE``: the command line parsed into one request, which the runner resolves (the probe and
    its settings, the data, the model: each once) and runs; the run written here (beside --out if it failed)."""
    from vlfair.probes.runner import RunRequest, run_request

    _at_least_one(("--limit", args.limit), ("--batch-size", args.batch_size))
    _check_device(args.device)
    settings, sources = _settings_given(args)
    request = RunRequest(args.probe, args.model, getattr(args, "dataset", None), split=args.split, subset=args.subset,
                         limit=args.limit, batch_size=args.batch_size, cache_dir=args.cache_dir or "default",
                         dtype=args.dtype, device=args.device, settings=settings, flags=dict(vars(args)),
                         sources=sources, out_dir=args.out, label=args.label, columns=getattr(args, "columns", None))
    from vlfair.figures import not_drawn

    with not_drawn(args.no_figures):  # nothing spent on plots never written
        # --out claimed once the settings are checked, before the data is read or the model loads
        run = run_request(request, before_work=lambda: _check_out_dir(Path(args.out)))
    failure = _write_run(run, Path(args.out), NOT_DRAWN if args.no_figures else None)
    results = run.results
    from vlfair.distributed import current_world

    if current_world().is_main:
        if not failure:
            log.info(f"{args.probe}: {len(results['metrics'])} metrics -> {args.out}/results.json, "
                     f"{args.out}/report.html")
        if results["published"]:
            within = [e["within_ci"] for e in results["published"] if e["within_ci"] is not None]
            log.info(f"  published vs this run: {len(results['published'])} cells of "
                  f"{', '.join(dict.fromkeys(e['source'] for e in results['published']))}"
                  + (f"; {sum(within)} of {len(within)} inside this run's CI" if within else ""))
        _say_verdicts(results)
        _say_undetected(run.output.tables, args.out)
        for warning in results["warnings"]:
            log.warning(warning)
    if failure:
        raise UserError(failure)
    return 0


UNDETECTED_SHOWN = 8  # "no bias detected" lines in the terminal; every one is in report.html
DETECTED_SHOWN = 8  # "bias detected" lines likewise


def _say_verdicts(results: dict[str, Any]) -> None:
    """The run's verdicts in one line (the family, its correction), then each detection it names (the first few)."""
    from vlfair import verdicts
    from vlfair.report.numbers import format_p, format_subset, format_value

    log.info(f"  {verdicts.summary_text(results.get('verdicts'))}")
    found = [m for m in results["metrics"] if verdicts.detected(m)]
    neutral = {name: facts.get("neutral") for name, facts in (results.get("measures") or {}).items()}
    for metric in found[:DETECTED_SHOWN]:
        subset = format_subset(metric["subset"])
        value = format_value(metric["value"], apart_from=neutral.get(metric["name"]))
        log.info(f"    detected: {metric['name']}{f' ({subset})' if subset else ''} = {value}, "
                 f"p = {format_p(metric['verdict']['p_value'])}, Holm p = {format_p(metric['verdict']['p_holm'])}")
    if len(found) > DETECTED_SHOWN:
        log.info(f"    and {len(found) - DETECTED_SHOWN} more in report.html")


def _say_undetected(tables: dict[str, Any], out: str) -> None:
    """Each "no bias detected" with the smallest deviation the run could have seen (the first few; all in the
    report's not_detected table)."""
    from vlfair.probes.runner import NOT_DETECTED
    from vlfair.report.numbers import format_detectable, format_interval, format_value

    table = tables.get(NOT_DETECTED)
    if table is None:
        return
    frame = table.frame
    log.info(f"  no bias detected in {len(frame)} metrics; a deviation smaller than the one named could not be seen:")
    for (metric, subset), row in frame.head(UNDETECTED_SHOWN).iterrows():
        unseen = [None if row[side] != row[side] else row[side] for side in ("unseen under", "unseen over")]  # NaN
        log.info(f"    {metric}{f' ({subset})' if subset else ''}: {format_value(row['value'])} "
                 f"{format_interval(row['CI low'], row['CI high'])}; smaller than {format_detectable(unseen)} "
                 "could not be seen")
    if len(frame) > UNDETECTED_SHOWN:
        log.info(f"    and {len(frame) - UNDETECTED_SHOWN} more: {out}/report.html (not detected)")


FAILED = ".failed"  # beside --out: a run that is no result to build on (ProbeRun.failure)
# what report.html says of a run written with --no-figures (a sweep that needs the numbers only: drawing
# is about half of a small run's time)
NOT_DRAWN = "Figures: not drawn (vlfair run --no-figures); the tables and results.json hold every number."


def _write_run(run: Any, out: Path, without_figures: str | None = None) -> str | None:
    """Write ``run`` into ``out`` (``without_figures``: :meth:`ProbeRun.write`'s); a run that failed
    (:meth:`ProbeRun.failure`) goes beside it, into ``OUT.failed``, so a failed command leaves an earlier
    run in ``out`` as it was and loses nothing it measured. Returns the failure, saying where the run
    went, or None."""
    failure = run.failure()
    if failure is None:
        run.write(out, without_figures)
        return None
    out = Path(os.path.abspath(out))  # "runs/a/.." is runs: its sibling is runs.failed, not "runs/a/...failed"
    aside = out.with_name(out.name + FAILED)
    try:
        _check_out_dir(aside)
    except UserError as exc:  # nowhere to set it aside: said, and --out is still left as it was
        return f"{failure}; the run could not be kept ({exc}); {out} was left as it was"
    run.write(aside, without_figures)
    return f"{failure}; this run is in {aside}, {out} was left as it was"


def _check_out_dir(out: Path, kind: OutputKind | None = None) -> None:
    """``out`` can become the command's output folder (new, empty, or an earlier output of
    ``kind``, a run's by default) and no other process is writing it: the lock is taken now, before
    any work, and held until the command ends (``vlfair.atomic``)."""
    from vlfair.atomic import OutputError, claim_output
    from vlfair.report.writer import RUN_OUTPUT

    try:
        claim_output(out, kind or RUN_OUTPUT)
    except OutputError as exc:
        raise UserError(f"--out {exc}") from None


def _add_device(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--device", default="auto", metavar="DEVICE",
                        help=f"{what}: auto (a GPU where one is visible, one per process under torchrun; else the "
                             "CPU), cpu, cuda or cuda:N (default auto)")


def _check_device(device: str) -> None:
    """``--device``, refused in one line before any work (``--device cuda: this PyTorch build has no CUDA``), not
    at the model's first tensor, where a CPU build of torch raises "Torch not compiled with CUDA enabled"."""
    if device == "auto":  # today's choice, made where the model loads: nothing to import here
        return
    from vlfair.models.base import UnavailableDevice, checked_device

    try:
        checked_device(device)
    except UnavailableDevice as exc:
        raise UserError(f"--device {exc.asked}: {exc.reason}") from None


def _at_least_one(*flags: tuple[str, int | None]) -> None:
    for flag, value in flags:
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}")


# ---- resampling: --bootstrap, --permutations, --seed, spelled one way in run, rescore, compare and leaderboard ----
# flag, the setting it is (a probe's, a run's, the statistics' keyword), what it counts, its most (None: no most)
RESAMPLING: tuple[tuple[str, str, str, int | None], ...] = (
    ("--bootstrap", "bootstrap", "bootstrap resamples of every interval", MAX_BOOTSTRAP),
    ("--permutations", "n_permutations", "relabellings of every permutation test at most", MAX_PERMUTATIONS),
    ("--seed", "seed", "the seed of every resampling and relabelling", None),
)
ZERO = {"bootstrap": "0: no intervals", "n_permutations": "0: no p-values"}
# compare's and the leaderboard's defaults: the statistics' own (vlfair.defaults)
STATISTICS_DEFAULTS = {"bootstrap": BOOTSTRAP, "n_permutations": PERMUTATIONS, "seed": SEED}


def _range_of(key: str, most: int | None) -> str:
    return f"a whole number from 0 to {most:,} ({ZERO[key]})" if most is not None else "a whole number >= 0"


def _add_resampling(parser: argparse.ArgumentParser, defaults: dict[str, int] | None, owner: str = "",
                    has: Any = None) -> None:
    """--bootstrap N, --permutations N and --seed N on ``parser``. ``defaults``: each setting's default (compare,
    leaderboard); None: a flag not given leaves the ``owner``'s own value ("the probe's YAML", "the run's"), which
    ``--set KEY=N`` also changes. ``has``: the settings the command takes (a probe's): a flag for another is
    said, in its help, to be refused."""
    group = parser.add_argument_group("resampling (intervals and p-values)")
    for flag, key, what, most in RESAMPLING:
        if has is not None and key not in has:
            shown = f"not a setting of this probe (it has no {key}): refused"
        else:
            default = f"default {defaults[key]:,}" if defaults is not None else f"default {owner}; also --set {key}=N"
            shown = f"{what} ({default}): {_range_of(key, most)}"
        group.add_argument(flag, type=int, metavar="N", dest=f"resampling_{key}",
                           default=None if defaults is None else defaults[key], help=shown)


def _resampling(args: argparse.Namespace) -> dict[str, int]:
    """The resampling flags given (setting -> value), each in its range: the one place their ranges are checked."""
    given: dict[str, int] = {}
    for flag, key, _, most in RESAMPLING:
        value = getattr(args, f"resampling_{key}", None)
        if value is None:
            continue
        if value < 0 or (most is not None and value > most):
            raise UserError(f"{flag} must be {_range_of(key, most)}, got {value:,}")
        given[key] = value
    return given


def _settings_given(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
    """``--set`` with the resampling flags (run, rescore) as settings, and which flag set each (for a settings
    error to name it): a setting given by both is refused, naming both."""
    settings = _parse_sets(args.set)
    flags = _resampling(args)
    both = [key for key in flags if key in settings]
    if both:
        flag = {key: flag for flag, key, *_ in RESAMPLING}
        raise UserError("; ".join(f"{flag[key]} {flags[key]} and --set {key}={settings[key]!r} both set {key}: give "
                                  "one" for key in both))
    return {**settings, **flags}, {key: flag for flag, key, *_ in RESAMPLING if key in flags}


def _add_run(sub: argparse._SubParsersAction) -> None:
    """``vlfair run PROBE``: one subcommand per registered probe, its help, options and --set keys
    read from the probe class (built-in or a plugin's)."""
    from vlfair.probes import probe_class, probe_names

    parser = sub.add_parser("run", help="run a study probe end to end",
                            description="Run one study probe end to end: results.json, tables, plots and report.html. "
                                        "'vlfair run PROBE --help' lists the probe's own options.")
    probes = parser.add_subparsers(dest="probe", required=True, metavar="PROBE")
    taken = _run_flags()
    for name in probe_names():
        probe = probe_class(name)
        clashes = _clashing_options(probe, taken)
        if clashes:  # a plugin's flag that vlfair run already has: that probe is left out, every command still works
            log.warning(f"vlfair run {name}: left out, its option(s) {clashes} are vlfair run's own")
            continue
        command = probes.add_parser(name, help=probe.help, description=probe.description)
        _add_run_options(command, probe)
        if probe.options:
            group = command.add_argument_group(probe.options_title or name)
            for option in probe.options:
                option.add_to(group)
        _add_output_options(command, argparse.SUPPRESS)
        command.set_defaults(handler=_run, command_parser=command)


def _run_flags() -> set[str]:
    """The flags every ``vlfair run PROBE`` has (``--dataset`` included: a probe may not take it)."""
    from vlfair.probes.base import Probe

    common = argparse.ArgumentParser(add_help=True)
    _add_run_options(common, Probe)
    _add_output_options(common, argparse.SUPPRESS)
    return set(common._option_string_actions)


def _clashing_options(probe: Any, common: set[str]) -> list[str]:
    """The probe's flags that ``vlfair run`` already defines (``common``), or that it declares twice."""
    taken, clashes = set(common), []
    for option in probe.options:
        if option.flag in taken:
            clashes.append(option.flag)
        taken.add(option.flag)
    return clashes


def _add_run_options(parser: argparse.ArgumentParser, probe: Any) -> None:
    from vlfair.models import backend_prefixes
    from vlfair.probes.settings import keys

    parser.add_argument("--model", required=True,
                        help="model spec: a Hub id (ID[@REV]) or a directory, read as hf:, or PREFIX:ID with a "
                             f"registered prefix: {', '.join(backend_prefixes())} (a generative model: lvlm:ID)")
    parser.add_argument("--label", type=label_text, metavar="NAME",
                        help="the model's name in reports and boards (default: its own; a directory's spec is kept "
                             "in results.json)")
    if probe.needs_dataset:
        parser.add_argument("--dataset", required=True,
                            help="your own images (a folder with metadata.csv/jsonl/parquet, such a file or any table "
                                 "with an image-path column, DIR/<label>/*.jpg, UTKFace's named files, a saved "
                                 "dataset; FORM:PATH names the form: saved, metadata, table, utkface, imagefolder), "
                                 "a directory vlfair prepare wrote, a Hub id, or synthetic:NAME")
        parser.add_argument("--columns", metavar="NAME=COLUMN,...",
                            help="the data's names for the probe's columns: race=ethnicity,gender=sex,image=path")
    parser.add_argument("--subset", help="a named subset: FairFace adults/age_groups, Multi30K "
                                         "translation/independent, a P-FI category (traits reads adults by default)")
    parser.add_argument("--split", help="a split, or several joined by '+' (train+validation)")
    parser.add_argument("--out", default="out",
                        help="directory for results.json, tables, plots, report.html (default out)")
    parser.add_argument("--batch-size", type=int, default=64, help="images per forward pass (default 64)")
    parser.add_argument("--limit", type=int, help="use only the first N rows (quick runs)")
    parser.add_argument("--no-figures", action="store_true",
                        help="write the numbers and tables without drawing the plots (faster: a sweep over models)")
    parser.add_argument("--dtype", default="auto",
                        help="auto (float32 on a CPU; bf16 on a GPU, float16 where it has no bf16), float32 (exact), "
                             "bfloat16, float16")
    _add_device(parser, "where the model runs")
    parser.add_argument("--cache-dir", help="embedding cache (default $VLFAIR_CACHE or ~/.cache/vlfair)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help=f"override a setting of the probe's YAML: {', '.join(keys(probe.Settings))} "
                             "(repeatable; the value is read as YAML)")
    _add_resampling(parser, None, "the probe's YAML", has=probe.Settings.model_fields)


def _prepare(args: argparse.Namespace) -> int:
    from vlfair.data.build import PREPARED_OUTPUT, BuildError, prepare

    _check_out_dir(Path(args.out), PREPARED_OUTPUT)  # before the build, which reads every image
    options = {"images": args.images} if args.images else {}
    try:
        out = prepare(args.dataset, args.source, args.out, push_to_hub=args.push_to_hub, skip_bad=args.skip_bad,
                      pretty_name=args.name, **options)
    except BuildError as exc:
        print(f"vlfair prepare {args.dataset}: {exc}", file=sys.stderr)
        return 2  # a mistake in what was given, as every command says one
    log.info(f"wrote {out} (Parquet per config and split and a README.md card, as a Hub dataset repository)"
          + (f"; pushed to {args.push_to_hub}" if args.push_to_hub else ""))
    return 0


def prepare_files_help(names: list[str]) -> str:
    """What each dataset's builder reads from --source (its registry entry's ``expected_files``), for
    ``vlfair prepare --help``: a plugin's dataset states its own."""
    import textwrap

    from vlfair.data.registry import dataset_spec

    def wrapped(text: str, indent: str) -> list[str]:
        return textwrap.wrap(text, 100, initial_indent=indent, subsequent_indent=indent + "  ")

    lines = ["what each dataset reads from --source (a file, then its columns):"]
    for name in names:
        spec = dataset_spec(name)
        files = spec.expected_files()
        lines.append(f"  {name}:")
        if not files:  # a plugin's builder that states no files: its own words, at least
            doc = (getattr(spec.function("builder"), "__doc__", None) or "").strip().split("\n\n")[0]
            lines += wrapped(" ".join(doc.split()) or "its builder states no files", "    ")
        for file in files:
            columns = f": {', '.join(file.columns)}" if file.columns else ""
            optional = f" (optional: {', '.join(file.optional)})" if file.optional else ""
            lines += wrapped(f"{file.name}{columns}{optional}", "    ")
            lines += wrapped(file.note, "      ") if file.note else []
    lines += ["", *textwrap.wrap(
        "A card of one's own data is named --name (default: the --source folder's name) and states no licence; "
        "only a dataset's published release, as its builder recognises it (FairFace's own label files, "
        "Multi30K's own image lists), keeps the dataset's card and licence.", 100)]
    return "\n".join(lines)


class _PrepareHelp(argparse.Action):
    """-h/--help of vlfair prepare: the files each dataset reads, read from the registry when asked
    (the builders are imported then, not on every command); after a dataset (``prepare fairface
    --help``) that dataset's alone."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any):
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from vlfair.data.registry import buildable

        chosen = getattr(namespace, "dataset", None)
        parser.epilog = prepare_files_help([chosen] if chosen in buildable() else buildable())
        parser.print_help()
        parser.exit()


def _add_prepare(sub: argparse._SubParsersAction) -> None:
    from vlfair.data.registry import buildable

    parser = sub.add_parser("prepare", help="build a dataset from its raw files or one's own folder (Parquet + card)",
                            add_help=False, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-h", "--help", action=_PrepareHelp,
                        help="show this help (and the files each dataset reads: after DATASET, its own) and exit")
    parser.add_argument("dataset", choices=buildable(), metavar="DATASET",
                        help=f"a registered dataset with a builder (a plugin's too): {', '.join(buildable())}")
    parser.add_argument("--source", required=True, help="the raw release or one's own folder: the files listed below")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--images", help="image directory, when it is not inside --source (Multi30K: Flickr30K)")
    parser.add_argument("--name", help="what the card calls the data (default, for data other than a dataset's "
                                       "published release: the --source folder's name)")
    parser.add_argument("--skip-bad", action="store_true", help="leave bad rows out (listed in the card)")
    parser.add_argument("--push-to-hub", metavar="REPO")
    parser.set_defaults(handler=_prepare)


def _refuse_inside(out: str, sources: list[str]) -> None:
    """Before any work: an output that would change a run (its samples replaced, a folder inside it) or a source
    the command reads is refused (vlfair.atomic.inside_problem)."""
    from vlfair.atomic import inside_problem

    problem = inside_problem(out, sources)
    if problem:
        raise UserError(problem)


def _leaderboard(args: argparse.Namespace) -> int:
    from vlfair.compare.board import read_checked_board
    from vlfair.report.leaderboard import write_table

    if args.push_to_hub:  # it replaced the whole table on the Hub: a second person's push erased the first's
        raise UserError(f"--push-to-hub is gone (it replaced the board others fed): add each run with `vlfair "
                        f"push-results RUN_DIR --repo {args.push_to_hub}`, read them all with `vlfair leaderboard "
                        f"hf://datasets/{args.push_to_hub} --out FILE`")
    resampling = _resampling(args)
    _refuse_inside(args.out, args.results)
    if Path(args.out).suffix not in (".parquet", ".csv") or Path(args.out).is_dir():  # said before the board is read
        raise UserError(f"--out must be a file ending in .parquet or .csv (the table's format), got {args.out!r}")
    skipped: list[str] = []
    # plugins' bias measures too; each run's values checked against its samples where they are beside it
    frame = read_checked_board(args.results, skipped, token=args.token)
    for problem in skipped:
        log.warning(f"vlfair leaderboard: skipped {problem}")
    if frame.empty and not frame.attrs["runs"]:  # the reasons are part of the error: --quiet hides the warnings
        raise UserError("no readable results.json among the files given"
                        + (f" ({'; '.join(skipped[:3])}{'; ...' if len(skipped) > 3 else ''})" if skipped else ""))
    if not args.no_tiers:
        from vlfair.compare.tiers import add_tiers

        said: list[str] = []
        frame = add_tiers(frame, frame.attrs["paths"], bootstrap=resampling["bootstrap"],
                          n_permutations=resampling["n_permutations"], seed=resampling["seed"], said=said)
        for line in said:
            log.info(f"vlfair leaderboard: {line}")
    write_table(frame, args.out)
    duplicates = frame.attrs["duplicates"]
    log.info(f"{len(frame)} rows from {frame.attrs['runs']} runs in {len(frame.attrs['families'])} families"
             + (f" ({duplicates} identical cop{'ies' if duplicates > 1 else 'y'} left out)" if duplicates else "")
             + f" -> {args.out}")
    return 0


def _add_leaderboard(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("leaderboard", help="one table over many runs, ranked within families of comparable runs",
                            description="One table over many runs: a row per model, probe, metric and subset, with "
                                        "the run's family (runs of one probe version on the same data with the same "
                                        "settings) and its rank in the family: 1 is the value closest to the metric's "
                                        "neutral value (the least biased; a level such as an accuracy is not ranked), "
                                        "and its tier: the models the runs cannot tell apart from the least biased "
                                        "share its tier (paired on their samples, Holm over the family's pairs). "
                                        "Identical runs found twice count once.")
    parser.add_argument("results", nargs="+", metavar="SOURCE",
                        help="a results.json, a run's folder, a folder of runs (searched recursively) or a Hub "
                             "dataset fed by push-results: hf://datasets/ORG/NAME[@REVISION]")
    parser.add_argument("--out", required=True, help="FILE.parquet or FILE.csv")
    parser.add_argument("--token", help="Hub token for a private dataset (default: the logged-in one)")
    parser.add_argument("--no-tiers", action="store_true",
                        help="leave out the tiers (models whose bias the runs cannot tell apart share one; from "
                             "paired comparisons of each family's runs on their samples)")
    _add_resampling(parser, STATISTICS_DEFAULTS)  # of the paired comparisons behind the tiers
    parser.add_argument("--push-to-hub", metavar="REPO", help=argparse.SUPPRESS)  # gone: says what replaces it
    parser.set_defaults(handler=_leaderboard)


def _push_results(args: argparse.Namespace) -> int:
    from vlfair.compare.runs import reported_problem
    from vlfair.report.eval_results import benchmark_eval_yaml
    from vlfair.report.hub import push_run

    problem = reported_problem(args.run)  # every board would skip it: never pushed
    if problem:
        file = Path(args.run)
        raise UserError(f"{file if file.name == 'results.json' else file / 'results.json'}: {problem}")
    pushed = push_run(args.run, args.repo, token=args.token, benchmark=benchmark_eval_yaml if args.benchmark else None)
    for warning in pushed.warnings:
        log.warning(f"vlfair push-results: {warning}")
    if not pushed.added:
        log.info(f"already in datasets/{pushed.repo_id}: {pushed.folder} (the same run, pushed before); nothing added")
    else:
        log.info(f"added to datasets/{pushed.repo_id} in one commit: " + ", ".join(pushed.added)
                 + (f" ({pushed.commit_url})" if pushed.commit_url else ""))
    return 0


def _add_push_results(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "push-results", help="add one run to a Hub dataset that many people feed (the shared leaderboard)",
        description="Add one run (its results.json and the samples file it names, the SHA-256 checked) to a Hub "
                    "dataset repository as new files in one commit, under runs/PROBE/FAMILY/MODEL--HASH/: nothing "
                    "there is deleted or overwritten, and the same run pushed twice is added once. A results.json "
                    "that names no samples file (a probe that writes none, an older run) is pushed alone with a "
                    "warning: the board ranks results.json alone, only a paired comparison needs the samples. One "
                    "without a family (an older vlfair) is refused: nothing says what it may be ranked against.")
    parser.add_argument("run", metavar="RUN_DIR", help="a run's folder (vlfair run --out), holding results.json")
    parser.add_argument("--repo", required=True, metavar="ORG/NAME", help="an existing Hub dataset repository")
    parser.add_argument("--token", help="Hub token with write access (default: the logged-in one)")
    parser.add_argument("--benchmark", action="store_true",
                        help="also write the repository's eval.yaml (the Hub's benchmark declaration) from every run "
                             "in it, in the same commit")
    parser.set_defaults(handler=_push_results)


def _parse_sets(items: list[str] | None) -> dict[str, Any]:
    """``--set KEY=VALUE`` options as settings (each value read as YAML; one that is not YAML is an
    error naming its key)."""
    from vlfair.probes.settings import read_override

    return dict(read_override(item) for item in items or [])


def _rescore(args: argparse.Namespace) -> int:
    from vlfair.compare.rescore import rescored

    out, run = Path(args.out), Path(args.run)
    run = run.parent if run.name == "results.json" else run  # the run's folder, however it was named
    if out.resolve() == run.resolve():
        raise UserError(f"--out {out} is the run's own folder: its results would be replaced; give another folder")
    overrides, sources = _settings_given(args)
    _check_out_dir(out)
    rescored_run = rescored(run, overrides, sources)
    failure = _write_run(rescored_run, out)
    if failure:
        raise UserError(failure)
    results = rescored_run.results
    log.info(f"{results['probe']}: {len(results['metrics'])} metrics recomputed from "
             f"{run / results['samples']['file']} -> {out}/results.json, {out}/report.html")
    _say_undetected(rescored_run.output.tables, str(out))
    return 0


def _add_rescore(sub: argparse._SubParsersAction) -> None:
    from vlfair.compare.rescore import RESCORE_SETTINGS

    parser = sub.add_parser("rescore", help="recompute a run's metrics from its samples.parquet (no model, no data)",
                            description="Recompute every metric, table and report of a run from its samples.parquet "
                                        "alone: no model and no dataset are loaded. Under the run's own settings the "
                                        "numbers are the run's; --set changes how intervals and p-values are made.")
    parser.add_argument("run", help="a run's folder (vlfair run --out)")
    parser.add_argument("--out", required=True, help="folder for the rescored run (not the run's own)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help=f"change one of {', '.join(RESCORE_SETTINGS)} (repeatable)")
    _add_resampling(parser, None, "the run's own")
    parser.set_defaults(handler=_rescore)


def _compare(args: argparse.Namespace) -> int:
    from vlfair.compare import compare_runs
    from vlfair.compare.render import COMPARISON_OUTPUT, machine_note, summary, write_comparison

    resampling = _resampling(args)
    _check_out_dir(Path(args.out), COMPARISON_OUTPUT)
    comparison = compare_runs(args.runs, on_common_rows=args.on_common_rows, bootstrap=resampling["bootstrap"],
                              confidence=args.confidence, seed=resampling["seed"],
                              n_permutations=resampling["n_permutations"], correction=args.correction,
                              labels=args.label)
    report = write_comparison(comparison, args.out)
    content = comparison.content
    log.info(f"{content['probe']}: {len(content['runs'])} runs, {content['rows']['compared']} paired samples, "
             f"{len(content['differences'])} differences"
             + (" (on the rows every run holds)" if content["rows"]["on_common_rows"] else ""))
    log.info(summary(comparison))
    said = machine_note(comparison)
    if said:  # the runs' numbers may differ by the machines that computed them: said before the files
        log.info(said)
    log.info(f"-> {Path(args.out) / 'comparison.json'}, {report}")
    return 0


def _add_compare(sub: argparse._SubParsersAction) -> None:
    from vlfair.defaults import CONFIDENCE, CORRECTION, CORRECTIONS

    parser = sub.add_parser("compare", help="paired differences between runs of one probe on the same rows",
                            description="Compare two or more runs of one probe on the same rows (their samples."
                                        "parquet): each metric's difference A - B with a paired bootstrap interval, "
                                        "a paired permutation test, its p-values adjusted over the comparison's "
                                        "differences (--correction); runs that differ in data, probe version or "
                                        "settings are refused.")
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run folders (vlfair run --out), two or more")
    parser.add_argument("--out", required=True, help="folder for comparison.json, differences.csv and comparison.html")
    parser.add_argument("--on-common-rows", action="store_true",
                        help="compare runs that hold different rows on the rows they all hold")
    parser.add_argument("--confidence", type=float, default=CONFIDENCE,
                        help=f"the intervals' level (default {CONFIDENCE})")
    parser.add_argument("--label", type=label_text, action="append", metavar="NAME",
                        help="a run's model's name in the comparison, once per run in the runs' order (default: the "
                             "models' names, told apart by what differs)")
    parser.add_argument("--correction", choices=CORRECTIONS, default=CORRECTION,
                        help="the multiple-testing correction over the differences of the bias measures (and apart "
                             f"the levels'): holm (family-wise error), bh (false discovery rate) or none (default "
                             f"{CORRECTION})")
    _add_resampling(parser, STATISTICS_DEFAULTS)  # the paired bootstrap and the paired permutation test
    parser.set_defaults(handler=_compare)


def _card_results(args: argparse.Namespace) -> int:
    from vlfair.compare.board import installed_facts
    from vlfair.report.leaderboard import card_results
    from vlfair.report.results import read_files

    if args.out is None and (args.benchmark_repo or args.source_url):
        raise UserError("--benchmark-repo and --source-url go with --out DIR (where the files are written)")
    if args.out is not None and not args.benchmark_repo:
        raise UserError("--out needs --benchmark-repo ORG/NAME: the Hub dataset the .eval_results entries name")
    from vlfair.report.eval_results import RECORDS_DIR, write_card_results

    if args.instances and args.out is None:
        raise UserError("--instances goes with --out DIR (where the records are written)")
    if args.out is not None:
        _refuse_inside(args.out, args.results)
    found = read_files(args.results, None)
    _refuse_misreported(path for path, _ in found)
    results = [content for _, content in found]
    instances = _instance_files({id(content): path for path, content in found}) if args.instances else None
    # the files first: a mistake in them stops the command before anything is printed
    written = [] if args.out is None else write_card_results(results, args.out, args.benchmark_repo, args.source_url,
                                                             instances, installed_facts())
    print(card_results(results))
    if args.out is not None:
        # "# " lines: stdout stays the YAML it was (vlfair card-results ... > card.yaml)
        for path in written:
            log.info(f"# wrote {path}")
        if args.source_url is None:
            log.info(f"# each entry's source url is its record's path relative to {args.out} ({RECORDS_DIR}/...): "
                     "give --source-url with {record} for where the records will be online")
    return 0


def _refuse_misreported(paths: Iterable[Path]) -> None:
    """A run's values go onto a model card only as its samples give them (compare.runs.misreported, which
    push-results, compare and rescore apply too): MisreportedRun, exit 2, before anything is written. A results.json
    read without its samples (no run folder, or samples changed since) has nothing to be checked against."""
    from vlfair.compare import RunError, load_run
    from vlfair.compare.runs import MisreportedRun

    for path in paths:
        try:
            load_run(path)
        except MisreportedRun:
            raise
        except RunError:
            continue


def _instance_files(paths: dict[int, Path]) -> Any:
    """card-results' instance records: each run's from its samples.parquet (a results.json read without
    its run folder, or from a vlfair that kept no samples, has none: said, and its aggregate record kept)."""
    from vlfair.compare import RunError, load_run
    from vlfair.compare.instances import instance_file

    def instances(results: dict[str, Any], record: dict[str, Any], at: str) -> tuple[str, dict[str, Any]] | None:
        path = paths[id(results)]
        try:
            run = load_run(path)
        except RunError as exc:
            log.warning(f"vlfair card-results: no instance records for {path}: {exc}")
            return None
        found = instance_file(run, record, at)
        if found is None:
            log.warning(f"vlfair card-results: no instance records for {path}: no metric of its probe has a value "
                        "per sample (a ranking's re-ranks every image)")
        return found
    return instances


def _add_card_results(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("card-results", help="print model-index eval results for a model card",
                            description="Print model-index YAML for model cards; with --out also write the Hub's "
                                        ".eval_results entries per model and one Every Eval Ever record per run "
                                        "(the intervals and p-values an entry has no place for).")
    parser.add_argument("results", nargs="+", help="results.json files or the directories holding them")
    parser.add_argument("--out", metavar="DIR",
                        help="write DIR/<model>/.eval_results/vlfair-<probe>.yaml and each run's record, "
                             "DIR/every_eval_ever/data/<collection>/<developer>/<model>/<uuid>.json")
    parser.add_argument("--benchmark-repo", metavar="ORG/NAME",
                        help="the Hub benchmark dataset the entries belong to (with --out)")
    parser.add_argument("--source-url", metavar="TEMPLATE",
                        help="where the records will be online, {record} for a record's path under every_eval_ever "
                             "(data/.../<uuid>.json), e.g. "
                             "https://huggingface.co/datasets/ORG/NAME/blob/main/every_eval_ever/{record} "
                             "(default: the path relative to --out)")
    parser.add_argument("--instances", action="store_true",
                        help="with --out, also write each run's instance-level records from its samples.parquet "
                             "(beside its record, <uuid>_samples.jsonl: one line per sample and metric it enters; "
                             "large), linked from its record")
    parser.set_defaults(handler=_card_results)


def _publish(args: argparse.Namespace) -> int:
    from vlfair.publish import publish_metrics

    publish_metrics(args.namespace, dry_run=args.dry_run, names=args.only, token=args.token)
    return 0


def _add_publish_metrics(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("publish-metrics", help="push each evaluate module in metrics/ to its Space")
    parser.add_argument("--namespace", default="vlfair", help="Hub user or organisation (default: vlfair)")
    parser.add_argument("--dry-run", action="store_true", help="list files and target Spaces; no network")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="publish only these modules")
    parser.add_argument("--token", help="Hub token (default: the logged-in one)")
    parser.set_defaults(handler=_publish)


def _install_metrics(args: argparse.Namespace) -> int:
    from vlfair.metrics import NAMESPACE, install_metrics, module_type

    installed = install_metrics(args.only)  # an unknown name: one line from main's handler, exit 2
    for script in installed:  # the type is what evaluate.load(..., module_type=...) checks
        log.info(f"{NAMESPACE}/{script.stem} ({module_type(script.stem)}): {script}")
    log.info(f'{len(installed)} module(s) installed: evaluate.load("{NAMESPACE}/<name>") now works offline')
    return 0


def _add_install_metrics(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("install-metrics", help='make evaluate.load("vlfair/<name>") work offline')
    parser.add_argument("--only", nargs="+", metavar="NAME", help="install only these modules")
    parser.set_defaults(handler=_install_metrics)


def _power(args: argparse.Namespace) -> int:
    from vlfair.compare.power import answer, design
    from vlfair.report.numbers import format_value

    if not 0 < args.power < 1:
        raise UserError(f"--power must be between 0 and 1, got {args.power:g}")
    try:
        subset = json.loads(args.subset) if args.subset else {}
    except json.JSONDecodeError as exc:
        raise UserError(f"--subset is not JSON ({exc}); e.g. '{{\"profession\": \"doctor\"}}'") from None
    if not isinstance(subset, dict):
        raise UserError(f"--subset must be a JSON object of the metric's subset, got {args.subset}")
    found = design(args.run, args.metric, subset)
    told = answer(found, args.power, args.effect)  # the whole answer first: all of it is printed, or none
    level, power = f"{found.confidence:.0%}", f"{args.power:.0%}"
    print(f"{found.metric} on {json.dumps(found.subset, ensure_ascii=False)}: {format_value(found.value)} (no bias: "
          f"{format_value(found.neutral)})")
    effect = getattr(found, "effect_name", "deviation")  # an F's is eta squared
    if hasattr(found, "effect_name"):  # judged by its test (vlfair.compare.tested_power)
        family = (_read_json(Path(args.run) / "results.json") or {}).get("verdicts") or {}
        among = (f" (one test: the run corrects its {family['tests']} by {family['correction']}, which asks a smaller "
                 "p of most)" if family.get("tests", 0) > 1 and family.get("correction") != "none" else "")
        print(f"judged by its test at alpha = {1 - found.confidence:.2g}{among}, {found.per_group:,.0f} images per "
              f"group; the effect is its {effect}:")
    else:
        print(f"standard error {format_value(found.se)} at {found.per_group:,.0f} images per group; with {level} "
              "intervals:")
    print(f"  smallest {effect} detected with {power} power: " + ", ".join(map(_smallest_said, told.smallest)))
    if told.effect is not None and told.needed is not None:  # with --effect: the images it needs
        print(f"  an effect of {format_value(told.effect)}: {power} power with {math.ceil(told.needed):,} images per "
              f"group (this run: {found.per_group:,.0f}, power {told.power_at_run:.0%})")
    return 0


def _smallest_said(smallest: Any) -> str:
    """One side's smallest detected deviation, or what its range leaves (a bias ratio's none below 1 past its 0)."""
    from vlfair.report.numbers import format_value

    sign = "+" if smallest.side > 0 else "-"
    if smallest.deviation is not None:
        return f"{sign}{format_value(smallest.deviation)}"
    return (f"none {'above' if smallest.side > 0 else 'below'} (even {sign}{format_value(abs(smallest.at_end))}, to "
            f"the end of its range, is detected with {smallest.end_power:.0%} power)")


def _read_json(path: Path) -> Any:
    """A JSON file's content, or None where it cannot be read (what it adds is a sentence, never a result)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _add_power(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("power", help="how small a bias a run could see, and how many images an effect needs",
                            description="From a run's interval of one metric and its samples: the standard error, "
                                        "the smallest deviation from the neutral value the run's design detects with "
                                        "the given power, and with --effect how many images per group would detect "
                                        "that deviation (the interval excluding the neutral value; a normal reading "
                                        "of it, every group scaled alike).")
    parser.add_argument("run", help="a run's folder (vlfair run --out)")
    parser.add_argument("--metric", required=True, help="the metric, as results.json names it (e.g. group_score_gap)")
    parser.add_argument("--subset", help="its subset as JSON, as results.json writes it (default: none)")
    parser.add_argument("--effect", type=float, help="a deviation from the neutral value to plan for")
    parser.add_argument("--power", type=float, default=0.8, help="the power to plan for (default 0.8)")
    parser.set_defaults(handler=_power)


SUBCOMMANDS = [_add_demo, _add_run, _add_rescore, _add_compare, _add_prepare, _add_leaderboard, _add_push_results,
               _add_card_results, _add_power, _add_publish_metrics, _add_install_metrics]


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its mistakes said as every other mistake is: one line, ``vlfair <command>:
    <what is wrong>``, exit 2 (argparse prints the whole usage above its message)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message} ({self.prog} --help lists what it takes)", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vlfair", description="Measure social bias in vision-language models.")
    parser.add_argument("--version", action="version", version=f"vlfair {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(sub)
    _add_output_options(parser, argparse.SUPPRESS)
    for command in sub.choices.values():  # also after the command: vlfair run ... --debug
        _add_output_options(command, argparse.SUPPRESS)
        command.set_defaults(command_parser=command)  # whose mistake an unknown argument is (main)
    return parser


def _add_output_options(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument("--debug", action="store_true", default=default, help="show the traceback of an error")
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument("-q", "--quiet", action="store_true", default=default,
                          help="errors only, no progress bars (also: VLFAIR_VERBOSITY=error)")
    loudness.add_argument("-v", "--verbose", action="store_true", default=default,
                          help="debug messages too (also: VLFAIR_VERBOSITY=debug)")


def _set_verbosity(args: argparse.Namespace) -> None:
    """--quiet / --verbose, else VLFAIR_VERBOSITY, else info (a command says what it does)."""
    from vlfair import logging as vlfair_logging

    quiet = getattr(args, "quiet", False)
    (vlfair_logging.disable_progress_bars if quiet else vlfair_logging.enable_progress_bars)()
    if quiet:
        vlfair_logging.set_verbosity("error")
    elif getattr(args, "verbose", False):
        vlfair_logging.set_verbosity("debug")
    else:
        vlfair_logging.set_verbosity(vlfair_logging.env_level() or "info")


class UserError(ValueError):
    """A mistake in the command line; printed as ``vlfair <command>: <message>``."""


def describe(exc: BaseException) -> str:
    """What went wrong, for a person: the file of an OS error, the message of a user error."""
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror or type(exc).__name__}: {exc.filename}"
    if isinstance(exc, UnicodeDecodeError):
        return f"a file is not UTF-8 text ({exc.reason} at byte {exc.start})"
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, (ValueError, OSError)):  # data, options, files, models (a KeyError is vlfair's own bug)
        return text
    return f"{type(exc).__name__}: {text} (run with --debug for the traceback)"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the command that was given them: "vlfair demo: unrecognized arguments: --x"
        getattr(args, "command_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    _set_verbosity(args)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print(f"vlfair {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001  (one handler: a person reads a sentence, --debug the traceback)
        if getattr(args, "debug", False):
            raise
        print(f"vlfair {args.command}: {describe(exc)}", file=sys.stderr)
        return 2
    finally:
        from vlfair.atomic import release_claims

        release_claims()  # the --out locks the command took


def console() -> NoReturn:
    """The ``vlfair`` command (and ``python -m vlfair``): :func:`main`, leaving the process as soon as
    the interpreter's exit functions have run. The teardown that would follow (torch's, transformers'
    and datasets' modules and objects freed one by one) shows a person nothing and took 1.4 s after the
    demo's last line; what must happen at exit (temporary folders removed, a coverage file written)
    is an exit function, and each of those still runs: the ones registered from here on run before
    this one, and the one registered before it (logging's, at vlfair's import) is called here."""
    code: int = 1  # an exception out of main (--debug) is exit status 1, as Python's own
    atexit.register(lambda: _leave(code))  # registered first: run last, after every other exit function
    try:
        code = main()
    except SystemExit as exc:  # argparse's --help and its mistakes; Python prints a message given as text
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        raise
    raise SystemExit(code)


def _leave(code: int) -> NoReturn:
    import logging

    logging.shutdown()  # its exit function, registered before console's, would run after it: never
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (vlfair ... | head): nothing more to say
            pass
    os._exit(code)


if __name__ == "__main__":
    console()
