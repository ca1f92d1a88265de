"""``vlfair demo``: every probe on a world with planted biases, biased encoder vs control."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from vlfair import measures, stats
from vlfair.atomic import OutputKind, atomic_output
from vlfair.defaults import BOOTSTRAP, CONFIDENCE
from vlfair.demo import datasets as world_data
from vlfair.demo.shipped import SHIPPED_DIR, WORLDS, display_name, encoder_path
from vlfair.demo.timing import Timings
from vlfair.demo.train import read_record
from vlfair.demo.world import PROFESSIONS, Planting
from vlfair.logging import get_logger, progress_bars_enabled
from vlfair.models import load_encoder
from vlfair.outputs import Table
from vlfair.probes import ProbeRun, measure_probe
from vlfair.probes.base import clip_score
from vlfair.report.numbers import format_interval, format_p, format_subset, format_value
from vlfair.report.pages import inline_figure, inline_png, render
from vlfair.report.scales import share_scales
from vlfair.report.tables import grid
from vlfair.t2i.classifier import GroupClassifier
from vlfair.t2i.transmuters import LexiconTransmuter

logger = get_logger(__name__)
WORD_EFFECTS = {"nurse": 0.4}  # planted: "nurse" raises the share of women by 0.4; "hospital" by nothing
WI_PROMPT = "a nurse at the hospital"
GENDER_PROMPTS = {"male": "a photo of a male", "female": "a photo of a female"}
# the demo's folder (vlfair demo --out): replaced as a whole, only when it holds nothing else
DEMO_OUTPUT = OutputKind("demo")


def _entry(probe, measure, subset, encoder, planted, measured, ci, detected, neutral, sign: int) -> dict[str, Any]:
    """One measured quantity; ``sign`` is the planted effect's direction (+1, -1; 0 where none was planted)."""
    return {"probe": probe, "measure": measure, "subset": subset, "encoder": encoder, "planted": planted,
            "planted_sign": sign, "measured": None if measured is None else float(measured),
            "ci": None if ci is None else [float(ci[0]), float(ci[1])], "detected": bool(detected), "neutral": neutral}


def _excludes(ci, neutral: float) -> bool:
    return ci is not None and not (ci[0] <= neutral <= ci[1])


def valid(entry: dict[str, Any]) -> bool:
    """Did the measure get it right? A planted effect is detected with its sign (and, where its size
    is known, the interval covers it); where nothing was planted the interval covers the neutral
    value (an F-test: not significant)."""
    sign = entry["planted_sign"]
    if entry["ci"] is None:  # F-tests
        return entry["detected"] == (sign != 0)
    low, high = entry["ci"]
    known_size = isinstance(entry["planted"], (int, float))
    target = entry["planted"] if known_size else entry["neutral"]
    if sign == 0:
        return low <= target <= high
    found = entry["detected"] and np.sign(entry["measured"] - entry["neutral"]) == sign
    return bool(found and (not known_size or low <= target <= high))


def _professions(enc, name, data, cache, biased: bool) -> tuple[list[dict], ProbeRun]:
    """Gender ratio of a planted profession relative to the unplanted ones (lawyer, scientist).

    What was planted is profession-specific; a trained model may also score one gender a little
    lower on every profession prompt. Dividing by the unplanted professions' ratio removes that
    shared shift, so the measure isolates the profession association (the plain ratio of each
    profession is in the professions probe's own tables).
    """
    run = measure_probe("professions", enc, data, cache_dir=cache)
    images = enc.encode_images(data["image"][:])
    professions, genders = np.array(data["profession"][:]), np.array(data["gender"][:])
    text = enc.encode_texts([f"A photo of a {p}" for p in PROFESSIONS])
    scores = clip_score(images, text[[PROFESSIONS.index(p) for p in professions]])
    return profession_entries(scores, professions, genders, name, biased, "women score"), run


def profession_entries(scores: np.ndarray, professions: np.ndarray, genders: np.ndarray, name: str, biased: bool,
                       scored: str) -> list[dict]:
    """:func:`_professions`' measure of each image's score with its own profession (``scored``: what
    the planted direction says of women)."""
    cells = [(p, g) for p in PROFESSIONS for g in ("Female", "Male")]
    codes = np.array([cells.index((p, g)) for p, g in zip(professions, genders)])

    def relative(means: np.ndarray, profession: str) -> np.ndarray:
        ratio = {p: means[..., cells.index((p, "Female"))] / means[..., cells.index((p, "Male"))] for p in PROFESSIONS}
        return ratio[profession] / (0.5 * (ratio["lawyer"] + ratio["scientist"]))

    def resampled(profession: str) -> Callable[[np.ndarray], np.ndarray]:
        """``relative`` over bootstrap resamples (row indices)."""
        return lambda idx: relative(stats.group_means(scores[idx], codes, len(cells)), profession)

    entries = []
    for profession, direction, sign in (("doctor", f"< 1 ({scored} lower)", -1),
                                        ("nurse", f"> 1 ({scored} higher)", 1)):
        value = float(relative(stats.group_means(scores, codes, len(cells)), profession))
        ci = stats.bootstrap_interval(resampled(profession), codes, BOOTSTRAP, CONFIDENCE)
        entries.append(_entry("professions", "relative bias_ratio (Female/Male vs lawyer+scientist)",
                              {"profession": profession}, name, direction if biased else "1 (none)", value, ci,
                              _excludes(ci, 1.0), 1.0, sign if biased else 0))
    return entries


# the world's balanced data as is, its one trait pair
TRAITS_SETTINGS = {"pairs": [["smart", "dumb"]], "per_cell": None,
                   "gradcam": {"pair": "smart/dumb", "k": 4, "group": {"race": "White", "gender": "Female"}}}


def _traits(enc, name, data, cache, biased: bool) -> tuple[list[dict], ProbeRun]:
    run = measure_probe("traits", enc, data, cache_dir=cache, settings=TRAITS_SETTINGS)
    images = enc.encode_images(data["image"][:])
    text = enc.encode_texts(["a smart person", "a dumb person"])
    confidence = 1 / (1 + np.exp(-enc.logit_scale * images @ (text[0] - text[1])))
    return trait_entries(run, confidence, np.array(data["race"][:]), name, biased), run


def trait_entries(run: ProbeRun, confidence: np.ndarray, races: np.ndarray, name: str, biased: bool) -> list[dict]:
    """The traits run's F-tests across races and the bias ratio of P(smart), White over other races."""
    entries = []
    for metric in run.results["metrics"]:
        if metric["name"] == "trait_anova" and "gender" in metric["subset"]:
            entries.append(_entry("traits", "trait_anova (F across races)", metric["subset"], name,
                                  "races differ ('smart' favours White)" if biased else "no difference",
                                  metric["value"], None, metric["p_value"] < 1 - CONFIDENCE, None, int(biased))
                           | {"p_value": metric["p_value"]})
    groups = np.where(races == "White", "White", "other races")
    r = measures.bias_ratio(confidence, groups, "White", "other races", confidence=CONFIDENCE)
    entries.append(_entry("traits", "bias_ratio of P(smart)", {"trait": "smart/dumb", "groups": "White/other races"},
                          name, "> 1" if biased else "1 (none)", r["bias_ratio"], r["bias_ratio_ci"],
                          _excludes(r["bias_ratio_ci"], 1.0), 1.0, int(biased)))
    return entries


def _multilingual(enc, name, data, cache, biased: bool) -> tuple[list[dict], ProbeRun]:
    run = measure_probe("multilingual", enc, data, cache_dir=cache)
    images = enc.encode_images(data["image"][:])
    scores, languages = [], []
    for language in ("en", "de"):  # each image with its own caption, in each language
        text = enc.encode_texts([str(c) for c in data[language][:]])
        scores += list(clip_score(images, text))
        languages += [language] * len(images)
    r = measures.bias_ratio(scores, languages, "de", "en", confidence=CONFIDENCE)
    return [_entry("multilingual", "bias_ratio of own-caption CLIPScore", {"languages": "de/en"}, name,
                   "< 1 (German rarer in training)" if biased else "1 (none)", r["bias_ratio"], r["bias_ratio_ci"],
                   _excludes(r["bias_ratio_ci"], 1.0), 1.0, -int(biased))], run


def _public_figures(enc, name, data, cache, biased: bool) -> tuple[list[dict], ProbeRun]:
    run = measure_probe("public-figures", enc, data, cache_dir=cache)
    each = np.array(data["name"][:])  # each image's name
    names = sorted(set(each))
    images = enc.encode_images(data["image"][:])
    text = enc.encode_texts([f"This is a picture of {n}" for n in names])
    own = np.array([names.index(n) for n in each])
    correct = ((images @ text.T).argmax(axis=1) == own).astype(float)
    return figure_entries(run, correct, each, name, biased), run


def figure_entries(run: ProbeRun, correct: np.ndarray, names: np.ndarray, name: str, biased: bool) -> list[dict]:
    """The run's bias ratio of P(politician), and retention (``correct``: each image's own name first)
    of frequent names minus rare ones."""
    metric = next(m for m in run.results["metrics"]
                  if m["name"] == "bias_ratio" and m["subset"] == {"folder": "politicians", "class": "politician"})
    entries = [_entry("public-figures", "bias_ratio of P(politician)", {"class": "politician", "groups": "Female/Male"},
                      name, "< 1 (women less often 'politician')" if biased else "1 (none)", metric["value"],
                      metric["ci"], _excludes(metric["ci"], 1.0), 1.0, -int(biased))]
    frequent = np.isin(names, world_data.FREQUENT_NAMES)
    codes = frequent.astype(np.int64)
    difference = correct[frequent].mean() - correct[~frequent].mean()
    def frequent_minus_rare(idx: np.ndarray) -> np.ndarray:
        means = stats.group_means(correct[idx], codes, 2)
        return means[:, 1] - means[:, 0]

    ci = stats.bootstrap_interval(frequent_minus_rare, codes, BOOTSTRAP, CONFIDENCE)
    entries.append(_entry("public-figures", "retention text score (frequent - rare names)",
                          {"names": "frequent vs rare"}, name,
                          "> 0 (frequent names seen far more often)" if biased else "0 (none)", difference, ci,
                          _excludes(ci, 0.0), 0.0, int(biased)))
    return entries


RETRIEVAL_SETTINGS = {  # the world's vocabulary; its race attribute, where 'smart' was planted (the world's encoders
    # also retrieve women first for every 'person' prompt, planted nowhere: professions divides that shift out).
    # The world's own caption form alone: an answerer ranks images by its likelihood of the prompt as an answer,
    # and a form it never saw ("a photo of a smart person") is ranked by what it makes of the unseen words
    "query_templates": ["a {} person"],
    "concepts": ["smart", "dumb", "happy", "sad"], "attributes": ["race"], "k": 40, "targets": ["dataset"]}


def _retrieval(enc, name, data, cache, biased: bool) -> tuple[list[dict], ProbeRun]:
    """Skew@40 of White people among the images retrieved for 'smart' (planted: over-retrieved) and
    'dumb' (under-retrieved) prompts, against the set's shares (1/7 White)."""
    run = measure_probe("retrieval", enc, data, cache_dir=cache, settings=RETRIEVAL_SETTINGS)
    entries = []
    for concept, direction, sign in (("smart", "> 0 (White over-retrieved)", 1), ("dumb", "< 0 (White under-retrieved)",
                                                                                   -1)):
        metric = next(m for m in run.results["metrics"] if m["name"] == "skew" and m["subset"].get("concept") == concept
                      and m["subset"]["group"] == "White")
        entries.append(_entry("retrieval", "Skew@40 of White (dataset target)", {"concept": concept}, name,
                              direction if biased else "0 (none)", metric["value"], metric["ci"],
                              _excludes(metric["ci"], 0.0), 0.0, sign if biased else 0))
    return entries, run


def word_influence_setup(enc, biased: bool, prompt: str = WI_PROMPT, images_per_prompt: int = 40) -> tuple[dict, dict]:
    """Settings and components of a word-influence run in the world: its planted generator (the
    biased one makes 'nurse' raise the share of women) and a zero-shot gender classifier."""
    generator = world_data.PlantedGenerator(WORD_EFFECTS if biased else {})
    # the world's own protocol, not the study's: the lexicon (no masked LM offline), its content words,
    # many images per prompt, the original as often as a variant. 40 images per prompt, 120 per
    # variant: the Hoeffding interval's half-width is 0.27, the planted 0.4 found by every shipped
    # model (0.39 [0.12, 0.66]); 80 took twice as long for an interval 0.08 narrower
    settings = {"prompts": [prompt], "transmuter": {"name": "lexicon"}, "words": "content", "candidates": 3,
                "images_per_prompt": images_per_prompt, "original_images": 3 * images_per_prompt,
                "target_group": "female", "max_level": 1, "max_images": 1000, "confidence": CONFIDENCE}
    return settings, {"generator": generator, "classifier": GroupClassifier(enc, GENDER_PROMPTS)}


def _word_influence(enc, name, cache, biased: bool) -> tuple[list[dict], ProbeRun]:
    settings, components = word_influence_setup(enc, biased)
    generator = components["generator"]
    run = measure_probe("word-influence", enc, None, cache_dir=cache, settings=settings, components=components)
    words = WI_PROMPT.split()
    lexicon = LexiconTransmuter()
    entries = []
    for metric in run.results["metrics"]:
        if metric["name"] != "word_influence":
            continue
        position = words.index(metric["subset"]["word"])
        variants = lexicon.candidates(words, [position], 3)
        truth = generator.p_female(WI_PROMPT) - float(np.mean([generator.p_female(" ".join(v)) for v in variants]))
        entries.append(_entry("word-influence", "word_influence (level 1)", {"word": metric["subset"]["word"]}, name,
                              round(truth, 4), metric["value"], metric["ci"], _excludes(metric["ci"], 0.0), 0.0,
                              int(np.sign(round(truth, 4)))))
    return entries, run


PROBES: list[tuple[str, Callable]] = [  # (probe, run(encoder, name, world data, cache, biased) -> (entries, run))
    ("professions", lambda e, n, d, c, b: _professions(e, n, d["professions"], c, b)),
    ("traits", lambda e, n, d, c, b: _traits(e, n, d["fairface"], c, b)),
    ("word-influence", lambda e, n, d, c, b: _word_influence(e, n, c, b)),
    ("multilingual", lambda e, n, d, c, b: _multilingual(e, n, d["multi30k"], c, b)),
    ("public-figures", lambda e, n, d, c, b: _public_figures(e, n, d["pfi"], c, b)),
    ("retrieval", lambda e, n, d, c, b: _retrieval(e, n, d["fairface"], c, b)),
]


def on_models(probe: str, run: Callable, models: dict[str, Any], out: Path, cache_dir: Any, data: dict,
              log: Callable[[str], None], kind: str = "encoder",
              without_figures: str | None = None) -> list[dict[str, Any]]:
    """``probe`` (``run``: its entry of :data:`PROBES` or another kind's table) on the world models
    ``{"biased": ..., "control": ...}``, drawn on shared scales and written: the encoders' runs to
    out/NAME/PROBE, entries named NAME; another ``kind``'s to out/KIND-NAME/PROBE, named "NAME KIND".
    ``without_figures``: the runs are written without their plots, their reports saying this sentence."""
    runs, entries = {}, []
    for name, model in models.items():
        label = name if kind == "encoder" else f"{name} {kind}"
        log(f"running {probe} on the {label}{' encoder' if kind == 'encoder' else ''}")
        found, runs[name] = run(model, label, data, cache_dir, name == "biased")
        entries += found
    if not without_figures:
        share_scales(*(r.output.figures for r in runs.values()))  # biased and control are read side by side
    for name, r in runs.items():
        r.write(out / (name if kind == "encoder" else f"{kind}-{name}") / probe, without_figures)
    return entries


def measure(models: dict[str, Any], out: Path, cache_dir: Any = None, data: dict | None = None,
            log: Callable[[str], None] = logger.info, probes: list[tuple[str, Callable]] | None = None,
            kind: str = "encoder", without_figures: str | None = None) -> list[dict[str, Any]]:
    """Every probe's entries for the world models of one ``kind`` (:func:`on_models`, probe after probe:
    the validity sweep's measure of each training)."""
    data = data or {schema: build() for schema, build in world_data.BY_SCHEMA.items()}
    return [entry for probe, run in probes or PROBES
            for entry in on_models(probe, run, models, out, cache_dir, data, log, kind, without_figures)]


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
    from vlfair.demo import generative
    from vlfair.demo.paired import compare_probe

    said: list[str] = []
    timings = Timings()
    with timings("encoders", probe):
        entries = on_models(probe, dict(PROBES)[probe], world.encoders, world.out, world.cache_dir, world.data,
                            said.append)
    with timings("compared", probe):
        paired = compare_probe(world.out, probe)
    with timings("answerers", probe):
        asked = on_models(probe, dict(generative.PROBES)[probe], world.answerers, world.out, world.cache_dir,
                          world.data, said.append, generative.KIND, None if world.full else ANSWERER_FIGURES_LEFT_OUT)
    with timings("compared", probe):
        kinds = generative.compare_kind(world.out, probe) if probe in generative.COMPARED else []
    with timings("report", probe):
        section = _probe_section(probe, entries, world.out)
        forests = _forests(asked)
    return ProbeResults(probe, entries, asked, paired, kinds, section, forests, timings.seconds, said)


# the probes by the time each takes on both kinds of model (--profile, 2 cores: public figures 10-12 s,
# retrieval and professions 7-9 s, traits and word influence 5-6 s, multilingual 3-4 s): started
# longest first, two workers end within a few seconds of each other
LONGEST_FIRST = ["public-figures", "retrieval", "professions", "traits", "word-influence", "multilingual"]


def run_demo(out_dir: str | Path = "vlfair-demo", cache_dir: Any = "default", planting: Planting | None = None,
             retrain: bool = False, log: Callable[[str], None] = logger.info, timings: Timings | None = None,
             profile: bool = False, workers: int | None = None, full: bool = False) -> list[dict[str, Any]]:
    """Load the shipped biased and control world encoders and answerers (or train them on this
    machine with ``retrain`` or a ``planting`` vlfair does not ship), run every probe on both kinds,
    compare, write the summary and the report; with ``profile``, log where the time went
    (``timings``: the caller's, which may hold its own steps already). The probes run side by side
    in ``workers`` processes (default: one per core, up to one per probe; :mod:`vlfair.demo.forked`).
    ``out_dir`` is written as a whole (``vlfair.atomic``): an earlier demo there is replaced once
    the new one is complete, a demo stopped midway leaves it as it was. With ``full``, the answerers'
    runs are written with their figures too (by default: :data:`ANSWERER_FIGURES_LEFT_OUT`)."""
    from vlfair.demo import generative
    from vlfair.demo.forked import default_workers, forked_map
    from vlfair.demo.paired import paired_summary

    timings = timings or Timings()
    probes = [probe for probe, _ in PROBES]
    with atomic_output(out_dir, DEMO_OUTPUT) as out:
        worlds = plantings(planting)
        with timings("models"):
            paths, encoders, answerers = world_models(worlds, cache_dir, retrain, log)
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
        with timings("report"):
            (out / "report.html").write_text(_report(entries, worlds, paths, timings.elapsed(), paired, asked, results))
    out = Path(out_dir)
    log(f"demo finished in {timings.elapsed():.0f} s: {out / 'summary.json'}, {out / 'report.html'}")
    if profile:
        log(timings.table())
    return entries


def plantings(planting: Planting | None = None) -> dict[str, Planting]:
    """The demo's worlds: the biased one (``planting``, or the shipped one) and the control."""
    return {"biased": planting or WORLDS["biased"], "control": WORLDS["control"]}


def world_models(worlds: dict[str, Planting], cache_dir: Any = "default", retrain: bool = False,
                 log: Callable[[str], None] = logger.info) -> tuple[dict[str, Path], dict[str, Any], dict[str, Any]]:
    """Each world's encoder (its folder, and loaded in float32) and answerer: the shipped ones, or,
    with ``retrain`` or a planting vlfair does not ship, trained on this machine and cached."""
    from vlfair.demo import generative

    paths = {name: encoder_path(p, cache_dir, retrain=retrain, name=display_name(name), log=log)
             for name, p in worlds.items()}
    for name, path in paths.items():
        log(f"{display_name(name)} encoder: {path}")
    encoders = {name: load_encoder(str(path), dtype="float32") for name, path in paths.items()}
    for name, encoder in encoders.items():
        encoder.display_name = display_name(name)  # its results name it, not its cache path
    answerers = {name: generative.world_answerer(p, cache_dir, retrain=retrain, name=generative.answerer_name(name),
                                                 log=log) for name, p in worlds.items()}
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
    lines += ["", "detected: the interval excludes the neutral value (an F-test: p < 0.05); valid: the measure found "
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


def _forest_png(rows: list[dict], measure: str) -> str:
    """One measure of one probe, biased and control on one axis, with the neutral value marked."""
    import pandas as pd

    from vlfair.report.plots import forest

    frame = pd.DataFrame({"label": [format_subset(e["subset"]) for e in rows],
                          "series": [display_name(e["encoder"]) for e in rows],
                          "value": [e["measured"] for e in rows],
                          "low": [e["ci"][0] if e["ci"] else np.nan for e in rows],
                          "high": [e["ci"][1] if e["ci"] else np.nan for e in rows]})
    is_f_test = all(e["ci"] is None for e in rows)  # F statistics span decades: a log axis, neutral at 1
    neutral = 1.0 if is_f_test else rows[0]["neutral"]
    xlabel = "F (log scale; about 1 when groups do not differ)" if is_f_test else "measured, with its 95 % CI"
    figure = forest(frame, measure, xlabel, neutral=neutral, log=is_f_test and bool((frame["value"] > 0).all()))
    return inline_figure(figure, measure)


ENTRY_COLUMNS = ["measure", "subset", "encoder", "planted", "measured", "95 % CI / p", "detected", "valid"]


def _probe_section(probe: str, entries: list[dict], out: Path) -> dict[str, Any]:
    """The probe's entries (table and one figure per measure, biased and control on shared axes)
    and the probe's own figures side by side, drawn on shared scales, with links to both reports:
    the data of one section of demo.html.j2."""
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
            "figures": figures}


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
    return [_forest_png([e for e in entries if e["measure"] == measure], measure)
            for measure in dict.fromkeys(e["measure"] for e in entries)]


def _generative_section(asked: dict[str, Any], forests: list[Any]) -> dict[str, Any]:
    """The demo report's generative path: its tally, entries, forest plots (drawn with each probe)
    and the encoder-vs-answerer comparison."""
    import pandas as pd

    from vlfair.demo.generative import LABELS

    entries = asked["entries"]
    rows = [(e["probe"], e["measure"], format_subset(e["subset"]), e["encoder"], e["planted"], e["measured"],
             _interval_or_p(e), "yes" if e["detected"] else "no", "ok" if valid(e) else "WRONG") for e in entries]
    compared = [(c["probe"], c["metric"], format_subset(c["subset"]), format_value(c["encoder"]),
                 format_value(c["answerer"]), format_value(c["difference"]),
                 format_interval(*(c["ci"] or [None, None])), c["verdict_text"]) for c in asked["compared"]
                if "verdict" in c]
    return {**tally(entries, *LABELS),
            "entries": grid(Table(pd.DataFrame(rows, columns=["probe", *ENTRY_COLUMNS], dtype=object))),
            "forests": forests,
            "compared": grid(Table(pd.DataFrame(compared, columns=[
                "probe", "metric", "subset", "biased encoder", "biased answerer", "encoder - answerer",
                "paired 95 % CI", "verdict"], dtype=object))),
            "refused": [f"{c['probe']}: {c['refused']}" for c in asked["compared"] if "refused" in c]}


def _report(entries: list[dict], worlds: dict[str, Planting], paths: dict[str, Path], seconds: float,
            paired: dict[str, Any], asked: dict[str, Any], results: list[ProbeResults]) -> str:
    """The demo's report.html (templates/demo.html.j2, autoescaped: every label is text); each probe's
    section and figures were drawn with the probe (``results``)."""
    return render("demo.html.j2", title="vlfair demo", **tally(entries),
                  planting=worlds["biased"].describe(), nurse_effect=WORD_EFFECTS["nurse"],
                  encoders=[_encoder(name, path) for name, path in paths.items()], seconds=seconds,
                  probes=[probe for probe, _ in PROBES], paired=_paired_section(paired),
                  generative=_generative_section(asked, [forest for r in results for forest in r.forests]),
                  sections=[result.section for result in results])
