"""``vlfair demo``: every probe on a world with planted biases, biased encoder vs control."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from vlfair.atomic import atomic_output
from vlfair.demo import datasets as world_data
from vlfair.demo import generative
from vlfair.demo.entries import (  # noqa: F401  (names read from here before vlfair.demo.entries)
    DEMO_OUTPUT,
    PROBES,
    RETRIEVAL_SETTINGS,
    WORD_EFFECTS,
    _professions,
    _traits,
    measure,
    on_models,
    valid,
    word_influence_setup,
)
from vlfair.demo.shipped import SHIPPED_DIR, WORLDS, display_name, encoder_path
from vlfair.demo.spread import PHRASED, measure_spread
from vlfair.demo.timing import Timings
from vlfair.demo.train import read_record
from vlfair.demo.verdicts import every_verdict, every_verdict_lines
from vlfair.demo.world import Planting
from vlfair.logging import get_logger, progress_bars_enabled
from vlfair.models import load_encoder
from vlfair.outputs import Table
from vlfair.report.numbers import format_interval, format_p, format_subset, format_value
from vlfair.report.pages import inline_figure, inline_png, render
from vlfair.report.tables import grid

logger = get_logger(__name__)
@dataclasses.dataclass
class WorldModels:
    """What every probe of the demo measures: each world's encoder and answerer, the world's data,
    where the runs go and the embedding cache."""

    encoders: dict[str, Any]
    answerers: dict[str, Any]
    data: dict[str, Any]
    out: Path
    cache_dir: Any
    full: bool = False  # the answerers' runs written with their figures too (vlfair demo --full)


# what an answerer's run of the default demo says in place of its figures: the demo's report shows each
# measure of the answerers as a forest plot, and drawing every run's own plots again took 10-20 % of the
# demo's time (the encoders' runs keep theirs: the report shows them)
ANSWERER_FIGURES_LEFT_OUT = ("Figures: not drawn by the demo's default run, whose report shows the answerers' measures "
                             "as forest plots; vlfair demo --full draws them.")


@dataclasses.dataclass
class ProbeResults:
    """One probe on the world's models: its entries of each kind (written to out/), its comparisons
    (biased vs control; the biased encoder vs the biased answerer) and its part of the report, with
    the time each step took and the lines it logged (said once it is done, in one piece)."""

    probe: str
    entries: list[dict[str, Any]]    # the encoders'
    asked: list[dict[str, Any]]      # the answerers'
    paired: dict[str, Any]           # paired.compare_probe
    kinds: list[dict[str, Any]]      # generative.compare_kind (none where the kinds measure other things)
    section: dict[str, Any]          # the report's section of the probe
    forests: list[Any]               # the report's figures of the answerers' measures of the probe
    seconds: dict[tuple[str, str | None], float]
    said: list[str]


def measure_probe_on_world(probe: str, world: WorldModels) -> ProbeResults:
    """``probe`` on both world encoders and both answerers, compared and drawn for the report."""
    from vlfair.demo.paired import compare_probe

    said: list[str] = []
    timings = Timings()
    with timings("encoders", probe):
        entries = on_models(probe, dict(PROBES)[probe], world.encoders, world.out, world.cache_dir, world.data,
                            said.append)
    with timings("compared", probe):
        paired = compare_probe(world.out, probe)
    with timings("phrasings", probe):
        spread = measure_spread(probe, world.encoders, world.data, world.out, world.cache_dir)
        said += spread["said"] if spread else []
    with timings("answerers", probe):
        asked = on_models(probe, dict(generative.PROBES)[probe], world.answerers, world.out, world.cache_dir,
                          world.data, said.append, generative.KIND, None if world.full else ANSWERER_FIGURES_LEFT_OUT)
    with timings("compared", probe):
        kinds = generative.compare_kind(world.out, probe) if probe in generative.COMPARED else []
    with timings("report", probe):
        section = _probe_section(probe, entries, world.out, spread)
        forests = _forests(asked)
    return ProbeResults(probe, entries, asked, paired, kinds, section, forests, timings.seconds, said)


# the probes by the time each takes on both kinds of model (--profile, 2 cores: public figures 10-12 s,
# retrieval and professions 7-9 s, traits and word influence 5-6 s, multilingual 3-4 s): started
# longest first, two workers end within a few seconds of each other
LONGEST_FIRST = ["public-figures", "retrieval", "professions", "traits", "word-influence", "multilingual"]


def run_demo(out_dir: str | Path = "vlfair-demo", cache_dir: Any = "default", planting: Planting | None = None,
             retrain: bool = False, log: Callable[[str], None] = logger.info, timings: Timings | None = None,
             profile: bool = False, workers: int | None = None, full: bool = False,
             labels: Mapping[str, str] | None = None, device: Any = "auto") -> list[dict[str, Any]]:
    """Load the shipped biased and control world encoders and answerers (or train them on this
    machine with ``retrain`` or a ``planting`` vlfair does not ship), run every probe on both kinds,
    compare, write the summary and the report; with ``profile``, log where the time went
    (``timings``: the caller's, which may hold its own steps already). The probes run side by side
    in ``workers`` processes (default: one per core, up to one per probe; :mod:`vlfair.demo.forked`).
    ``out_dir`` is written as a whole (``vlfair.atomic``): an earlier demo there is replaced once
    the new one is complete, a demo stopped midway leaves it as it was. With ``full``, the answerers'
    runs are written with their figures too (by default: :data:`ANSWERER_FIGURES_LEFT_OUT`). ``labels``: names
    for people of the models, by their folders (``control``, ``answerer-biased``), in place of the world's own.
    ``device``: where the models run (``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"``; on a GPU the probes run one
    after another, :mod:`vlfair.demo.forked`)."""
    from vlfair.demo.forked import default_workers, forked_map
    from vlfair.demo.paired import paired_summary

    timings = timings or Timings()
    probes = [probe for probe, _ in PROBES]
    with atomic_output(out_dir, DEMO_OUTPUT) as out:
        worlds = plantings(planting)
        with timings("models"):
            paths, encoders, answerers = world_models(worlds, cache_dir, retrain, log, labels, device)
        with timings("world data"):
            data = {schema: build() for schema, build in world_data.BY_SCHEMA.items()}
        world = WorldModels(encoders, answerers, data, out, cache_dir, full)
        bar = tqdm(total=len(probes), desc="probes on both kinds of model", unit="probe",
                   disable=not progress_bars_enabled())

        def done(result: ProbeResults) -> None:
            with bar.external_write_mode():
                for line in result.said:
                    log(line)
            timings.add(result.seconds)
            bar.update()

        with timings("probes (wall clock)"):
            started = sorted(probes, key=LONGEST_FIRST.index)  # no long probe left to run alone at the end
            results = forked_map(lambda probe: measure_probe_on_world(probe, world), started,
                                 default_workers(len(probes)) if workers is None else workers, done)
            results.sort(key=lambda result: probes.index(result.probe))  # reported in the probes' order
        bar.close()
        entries = [entry for result in results for entry in result.entries]
        (out / "summary.json").write_text(json.dumps(entries, indent=2))
        log(summary_table(entries))
        paired = paired_summary({result.probe: result.paired for result in results}, log)  # biased vs control
        (out / "paired.json").write_text(json.dumps(paired, indent=2))
        asked = {"entries": [entry for result in results for entry in result.asked],
                 "compared": [row for result in results for row in result.kinds]}
        (out / "generative.json").write_text(json.dumps(asked, indent=2))
        log(summary_table(asked["entries"], generative.LABELS))
        log(generative.kinds_line(asked["compared"]))
        judged = every_verdict(out)
        (out / "verdicts.json").write_text(json.dumps(judged, indent=2))
        for line in every_verdict_lines(judged):
            log(line)
        with timings("report"):
            (out / "report.html").write_text(_report(entries, worlds, paths, timings.elapsed(), paired, asked, results,
                                                     judged))
    out = Path(out_dir)
    log(f"demo finished in {timings.elapsed():.0f} s: {out / 'summary.json'}, {out / 'report.html'}")
    if profile:
        log(timings.table())
    return entries


def plantings(planting: Planting | None = None) -> dict[str, Planting]:
    """The demo's worlds: the biased one (``planting``, or the shipped one) and the control."""
    return {"biased": planting or WORLDS["biased"], "control": WORLDS["control"]}


def world_models(worlds: dict[str, Planting], cache_dir: Any = "default", retrain: bool = False,
                 log: Callable[[str], None] = logger.info, labels: Mapping[str, str] | None = None,
                 device: Any = "auto") -> tuple[dict[str, Path], dict[str, Any], dict[str, Any]]:
    """Each world's encoder (its folder, and loaded in float32) and answerer: the shipped ones, or,
    with ``retrain`` or a planting vlfair does not ship, trained on this machine and cached; named by
    ``labels`` (by the runs' folders: ``control``, ``answerer-control``) where given; on ``device``."""
    labels = labels or {}
    paths = {name: encoder_path(p, cache_dir, retrain=retrain, name=display_name(name), log=log)
             for name, p in worlds.items()}
    for name, path in paths.items():
        log(f"{display_name(name)} encoder: {path}")
    encoders = {name: load_encoder(str(path), dtype="float32", device=device) for name, path in paths.items()}
    for name, encoder in encoders.items():
        encoder.display_name = labels.get(name, display_name(name))  # its results name it, not its cache path
    answerers = {name: generative.world_answerer(p, cache_dir, retrain=retrain, name=generative.answerer_name(name),
                                                 log=log, device=device) for name, p in worlds.items()}
    for name, answerer in answerers.items():
        answerer.display_name = labels.get(f"{generative.KIND}-{name}", answerer.display_name)
    return paths, encoders, answerers


def summary_table(entries: list[dict], names: tuple[str, str] = ("biased", "control")) -> str:
    """The terminal's summary: every entry with its subset, a legend, and the tally a person wants
    (of the biased and the control model ``names``)."""
    rows = []
    for e in entries:
        ci = _interval_or_p(e)
        subset = format_subset(e["subset"])
        rows.append((e["probe"], e["measure"], subset, e["encoder"], str(e["planted"]), format_value(e['measured']), ci,
                     "yes" if e["detected"] else "no", "ok" if valid(e) else "WRONG"))
    header = ("probe", "measure", "subset", "encoder", "planted", "measured", "95 % CI / p", "detected", "valid")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
    lines += ["", "detected: the run's verdict, after its correction (a quantity the demo computes apart from a run: "
              "its interval excludes the neutral value; a rate gap: its permutation test); valid: the measure found "
              "what was planted, with its sign, and nothing where nothing was"]
    counts = tally(entries, *names)
    lines.append(f"{names[0]}: {counts['found']}/{counts['planted']} planted biases found; "
                     f"{names[1]}: {counts['false_alarms']}/{counts['controls']} false alarms")
    return "\n".join(lines)


def tally(entries: list[dict], biased: str = "biased", control: str = "control") -> dict[str, int]:
    """What the model ``biased`` found (planted biases detected with their sign: ``found`` of
    ``planted``) and the false alarms of the model ``control`` (entries it got wrong, of ``controls``)."""
    planted = [e for e in entries if e["encoder"] == biased and e["planted_sign"] != 0]
    controls = [e for e in entries if e["encoder"] == control]
    return {"found": sum(valid(e) for e in planted), "planted": len(planted),
            "false_alarms": sum(not valid(e) for e in controls), "controls": len(controls)}


def _encoder(name: str, path: Path) -> dict[str, Any]:
    """What the report says of an encoder: its name, where it comes from, its configuration hash and final loss."""
    record = read_record(path) or {}
    origin = "shipped with vlfair" if path.parent == SHIPPED_DIR else f"trained on this machine ({path})"
    return {"name": display_name(name), "origin": origin, "config_hash": record.get("config_hash"),
            "final_loss": record.get("final_loss")}


def _interval_or_p(entry: dict) -> str:
    if entry["ci"]:
        return format_interval(*entry["ci"])
    return f"p = {format_p(entry['p_value'])}" if "p_value" in entry else ""


def _forest_png(rows: list[dict], title: str) -> str:
    """One measure of one probe, biased and control on one axis, with the neutral value marked."""
    import pandas as pd

    from vlfair.report.plots import forest

    # an F-test is drawn by its effect size (omega squared, 0 = no difference, as F's neutral value is 0): F and
    # its p grow with the images, and an F near 1 is no effect though it is not 0
    is_f_test = all("effect" in e for e in rows)
    value, interval = ("effect", "effect_ci") if is_f_test else ("measured", "ci")
    frame = pd.DataFrame({"label": [format_subset(e["subset"]) for e in rows],
                          "series": [display_name(e["encoder"]) for e in rows],
                          "value": [e[value] for e in rows],
                          "low": [e[interval][0] if e[interval] else np.nan for e in rows],
                          "high": [e[interval][1] if e[interval] else np.nan for e in rows]})
    xlabel = "effect size (omega squared), with its 95 % CI" if is_f_test else "measured, with its 95 % CI"
    figure = forest(frame, title, xlabel, neutral=0.0 if is_f_test else rows[0]["neutral"])
    return inline_figure(figure, title)


ENTRY_COLUMNS = ["measure", "subset", "encoder", "planted", "measured", "95 % CI / p", "detected", "valid"]


def _probe_section(probe: str, entries: list[dict], out: Path, spread: dict[str, Any] | None = None) -> dict[str, Any]:
    """The probe's entries (table and one figure per measure, biased and control on shared axes)
    and the probe's own figures side by side, drawn on shared scales, with links to both reports, and
    each encoder's phrasings table where the demo rephrases the probe (``spread``): the data of one section
    of demo.html.j2."""
    import pandas as pd

    rows = [(e["measure"], format_subset(e["subset"]), display_name(e["encoder"]), e["planted"], e["measured"],
             _interval_or_p(e), "yes" if e["detected"] else "no", "ok" if valid(e) else "WRONG") for e in entries]
    figures = []
    for stem in [png.stem for png in sorted((out / "biased" / probe).glob("*.png"))]:
        figures.append([{"image": inline_png(out / name / probe / f"{stem}.png", stem, "max-width:100%"),
                         "href": f"{name}/{probe}/{stem}.png",
                         "caption": f"{display_name(name)}: {stem.replace('_', ' ')}"}
                        for name in ("biased", "control") if (out / name / probe / f"{stem}.png").exists()])
    return {"probe": probe,
            "entries": grid(Table(pd.DataFrame(rows, columns=ENTRY_COLUMNS, dtype=object))),  # numbers: 3 digits
            "forests": _forests(entries),
            "reports": [{"href": f"{name}/{probe}/report.html", "text": f"{display_name(name)}: full {probe} report"}
                        for name in ("biased", "control")],
            "figures": figures,
            "spread": None if spread is None else {
                "phrasings": len(PHRASED[probe]) + 1,
                "tables": [{**found, "table": grid(found["table"])} for found in spread["tables"]]}}


def _paired_section(paired: dict[str, Any]) -> dict[str, Any]:
    """The demo report's paired comparison: each planted bias as a difference biased - control."""
    import pandas as pd

    rows = [(e["probe"], e["metric"], format_subset(e["subset"]), format_value(e["biased"]), format_value(e["control"]),
             format_value(e["difference"]), format_interval(*(e["ci"] or [None, None])),
             format_interval(*(e["unpaired_ci"] or [None, None])), format_p(e["p"]),
             "yes" if e["found"] else "no") for e in paired["planted"]]
    columns = ["probe", "metric", "subset", "biased", "control", "biased - control", "paired 95 % CI",
               "unpaired 95 % CI", "p", "found (control less biased)"]
    return {"found": sum(e["found"] for e in paired["planted"]), "planted": len(paired["planted"]),
            "ratio": format_value(paired["median_width_ratio"]), "differences": paired["differences"],
            "table": grid(Table(pd.DataFrame(rows, columns=columns, dtype=object))),
            "links": [{"href": href, "text": probe} for probe, href in paired["comparisons"].items()],
            "not_a_probe_metric": paired["not_a_probe_metric"]}


def _forests(entries: list[dict]) -> list[Any]:
    """One forest plot per measure of ``entries`` (both models of a kind on one axis)."""
    return [_forest_png([e for e in entries if e["measure"] == name], name)
            for name in dict.fromkeys(e["measure"] for e in entries)]


def _generative_section(asked: dict[str, Any], forests: list[Any]) -> dict[str, Any]:
    """The demo report's generative path: its tally, entries, forest plots (drawn with each probe)
    and the encoder-vs-answerer comparison."""
    import pandas as pd

    entries = asked["entries"]
    rows = [(e["probe"], e["measure"], format_subset(e["subset"]), e["encoder"], e["planted"], e["measured"],
             _interval_or_p(e), "yes" if e["detected"] else "no", "ok" if valid(e) else "WRONG") for e in entries]
    compared = [(c["probe"], c["metric"], format_subset(c["subset"]), format_value(c["encoder"]),
                 format_value(c["answerer"]), format_value(c["difference"]),
                 format_interval(*(c["ci"] or [None, None])), c["verdict_text"]) for c in asked["compared"]
                if "verdict" in c]
    return {**tally(entries, *generative.LABELS),
            "entries": grid(Table(pd.DataFrame(rows, columns=["probe", *ENTRY_COLUMNS], dtype=object))),
            "forests": forests,
            "compared": grid(Table(pd.DataFrame(compared, columns=[
                "probe", "metric", "subset", "biased encoder", "biased answerer", "encoder - answerer",
                "paired 95 % CI", "verdict"], dtype=object))),
            "refused": [f"{c['probe']}: {c['refused']}" for c in asked["compared"] if "refused" in c]}


def _report(entries: list[dict], worlds: dict[str, Planting], paths: dict[str, Path], seconds: float,
            paired: dict[str, Any], asked: dict[str, Any], results: list[ProbeResults],
            judged: dict[str, dict[str, Any]] | None = None) -> str:
    """The demo's report.html (templates/demo.html.j2, autoescaped: every label is text); each probe's
    section and figures were drawn with the probe (``results``)."""
    return render("demo.html.j2", title="vlfair demo", **tally(entries), every_verdict=judged or {},
                  planting=worlds["biased"].describe(), nurse_effect=WORD_EFFECTS["nurse"],
                  encoders=[_encoder(name, path) for name, path in paths.items()], seconds=seconds,
                  probes=[probe for probe, _ in PROBES], paired=_paired_section(paired),
                  generative=_generative_section(asked, [forest for r in results for forest in r.forests]),
                  sections=[result.section for result in results])
