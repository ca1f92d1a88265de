"""What the demo measures on a world's models, and how each measure becomes an entry.

Each probe's function runs the probe on one world model (an encoder, or another kind's model through the
same probe) and returns its entries: what was planted, what was measured, with its interval and whether
it was detected (:func:`valid`: with the planted sign, and nothing where nothing was planted).
:func:`on_models` runs one probe on a world's biased and control models; :func:`measure` every probe.
``vlfair.demo.run`` puts the demo together from these, and ``vlfair.demo.generative`` measures the
answerers with the same functions.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from vlfair import measures, stats, verdicts
from vlfair.atomic import OutputKind
from vlfair.defaults import BOOTSTRAP, CONFIDENCE, PERMUTATIONS
from vlfair.demo import datasets as world_data
from vlfair.demo.world import PROFESSIONS
from vlfair.logging import get_logger
from vlfair.measures.catalog import facts_of, neutral_value
from vlfair.measures.known import DECLARED
from vlfair.measures.statistics import Range
from vlfair.measures.ties import best_credit
from vlfair.outputs import Metric
from vlfair.probes import BUILT_IN, ProbeRun, declared, measure_probe, probe_class, probe_names
from vlfair.probes.base import clip_score
from vlfair.report.scales import share_scales
from vlfair.samples import Samples
from vlfair.t2i.classifier import GroupClassifier
from vlfair.t2i.transmuters import LexiconTransmuter

RATIO_NEUTRAL = neutral_value("bias_ratio")  # every entry here of a bias ratio: its measure's neutral value

logger = get_logger(__name__)

WORD_EFFECTS = {"nurse": 0.4}  # planted: "nurse" raises the share of women by 0.4; "hospital" by nothing
WI_PROMPT = "a nurse at the hospital"
GENDER_PROMPTS = {"male": "a photo of a male", "female": "a photo of a female"}
# the demo's folder (vlfair demo --out): replaced as a whole, only when it holds nothing else
DEMO_OUTPUT = OutputKind("demo")


class Entry(TypedDict, total=False):
    """One measured quantity of the demo, as summary.json and the report read it."""

    probe: str
    measure: str
    subset: dict[str, Any]
    encoder: str           # the model it was measured on ("biased", "control answerer", ...)
    planted: Any           # what was planted, in words or as a number
    planted_sign: int      # the planted effect's direction: +1, -1, 0 where none was planted
    measured: float | None
    ci: list[float] | None
    # a run's metric: the run's verdict (vlfair.verdicts, after its correction); a quantity the demo computes
    # apart (from a measure's function): its interval excludes the neutral value (an F-test: p < 1 - CONFIDENCE;
    # retention's gap: the verdict of group_rate_gap's permutation test)
    detected: bool
    neutral: float | None
    p_value: float         # an F-test's, which has no interval (retention's gap: its permutation test's)
    effect: float | None   # an F-test's effect size (omega squared) and its interval: what its forest draws
    effect_ci: list[float] | None


def make_entry(probe: str, measure: str, subset: dict[str, Any], model: str, *, planted: Any, sign: int,
          measured: Any, ci: Any = None, neutral: float | None = None, p_value: float | None = None,
          verdict: dict[str, Any] | None = None) -> Entry:
    """An :class:`Entry`; ``detected`` is a run's metric's ``verdict`` where it is one (read, never recomputed),
    else follows from ``ci`` and ``neutral``, or, for an F-test (no interval, no neutral value), from ``p_value``."""
    interval = None if ci is None else [float(ci[0]), float(ci[1])]
    detected = (interval is not None and neutral is not None and not interval[0] <= neutral <= interval[1]) or (
        interval is None and p_value is not None and p_value < 1 - CONFIDENCE)
    if verdict is not None:
        detected = bool(verdict["detected"])
    found = Entry(probe=probe, measure=measure, subset=subset, encoder=model, planted=planted, planted_sign=sign,
                  measured=None if measured is None else float(measured), ci=interval, detected=bool(detected),
                  neutral=neutral)
    if p_value is not None:
        found["p_value"] = p_value
    return found


def valid(entry: dict[str, Any]) -> bool:
    """Did the measure get it right? A planted effect is detected with its sign (and, where its size
    is known, the interval covers it); where nothing was planted nothing is detected (the entry's own
    rule, which for a run's metric is the run's verdict: a false alarm is what a reader would report)."""
    sign = entry["planted_sign"]
    if sign == 0:
        return not entry["detected"]
    if entry["neutral"] is None:  # an F-test: no direction
        return bool(entry["detected"])
    found = entry["detected"] and np.sign(entry["measured"] - entry["neutral"]) == sign
    if isinstance(entry["planted"], (int, float)) and entry["ci"] is not None:
        low, high = entry["ci"]
        return bool(found and low <= entry["planted"] <= high)
    return bool(found)


def _professions(enc, name, data, cache, biased: bool) -> tuple[list[Entry], ProbeRun]:
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
                       scored: str) -> list[Entry]:
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
        entries.append(make_entry("professions", "relative bias_ratio (Female/Male vs lawyer+scientist)",
                                  {"profession": profession}, name, planted=direction if biased else "1 (none)",
                                  sign=sign if biased else 0, measured=value, ci=ci, neutral=RATIO_NEUTRAL))
    return entries


# the world's balanced data as is, its one trait pair
TRAITS_SETTINGS = {"pairs": [["smart", "dumb"]], "per_cell": None,
                   "gradcam": {"pair": "smart/dumb", "k": 4, "group": {"race": "White", "gender": "Female"}}}


def _traits(enc, name, data, cache, biased: bool) -> tuple[list[Entry], ProbeRun]:
    run = measure_probe("traits", enc, data, cache_dir=cache, settings=TRAITS_SETTINGS)
    images = enc.encode_images(data["image"][:])
    text = enc.encode_texts(["a smart person", "a dumb person"])
    confidence = 1 / (1 + np.exp(-enc.logit_scale * images @ (text[0] - text[1])))
    return trait_entries(run, confidence, np.array(data["race"][:]), name, biased), run


def trait_entries(run: ProbeRun, confidence: np.ndarray, races: np.ndarray, name: str, biased: bool) -> list[Entry]:
    """The traits run's F-tests across races and the bias ratio of P(smart), White over other races."""
    entries = []
    for metric in run.results["metrics"]:
        if metric["name"] == "trait_anova" and "gender" in metric["subset"]:
            entries.append(make_entry("traits", "trait_anova (F across races)", metric["subset"], name,
                                      planted="races differ ('smart' favours White)" if biased else "no difference",
                                      sign=int(biased), measured=metric["value"], p_value=metric["p_value"],
                                      verdict=metric.get("verdict")))
            entries[-1]["effect"] = metric["details"].get("omega_squared")
            entries[-1]["effect_ci"] = metric["details"].get("omega_squared_ci")
    groups = np.where(races == "White", "White", "other races")
    r = measures.bias_ratio(confidence, groups, "White", "other races", confidence=CONFIDENCE)
    entries.append(make_entry("traits", "bias_ratio of P(smart)",
                              {"trait": "smart/dumb", "groups": "White/other races"}, name,
                              planted="> 1" if biased else "1 (none)", sign=int(biased), measured=r["bias_ratio"],
                              ci=r["bias_ratio_ci"], neutral=RATIO_NEUTRAL))
    return entries


def _multilingual(enc, name, data, cache, biased: bool) -> tuple[list[Entry], ProbeRun]:
    run = measure_probe("multilingual", enc, data, cache_dir=cache)
    images = enc.encode_images(data["image"][:])
    scores, languages = [], []
    for language in ("en", "de"):  # each image with its own caption, in each language
        text = enc.encode_texts([str(c) for c in data[language][:]])
        scores += list(clip_score(images, text))
        languages += [language] * len(images)
    r = measures.bias_ratio(scores, languages, "de", "en", confidence=CONFIDENCE)
    return [make_entry("multilingual", "bias_ratio of own-caption CLIPScore", {"languages": "de/en"}, name,
                       planted="< 1 (German rarer in training)" if biased else "1 (none)", sign=-int(biased),
                       measured=r["bias_ratio"], ci=r["bias_ratio_ci"], neutral=RATIO_NEUTRAL)], run


def _public_figures(enc, name, data, cache, biased: bool) -> tuple[list[Entry], ProbeRun]:
    run = measure_probe("public-figures", enc, data, cache_dir=cache)
    each = np.array(data["name"][:])  # each image's name
    names = sorted(set(each))
    images = enc.encode_images(data["image"][:])
    text = enc.encode_texts([f"This is a picture of {n}" for n in names])
    own = np.array([names.index(n) for n in each])
    correct = best_credit(images @ text.T, np.arange(len(names))[None, :] == own[:, None])  # ties: vlfair.measures.ties
    return figure_entries(run, correct, each, name, biased), run


def figure_entries(run: ProbeRun, correct: np.ndarray, names: np.ndarray, name: str, biased: bool) -> list[Entry]:
    """The run's bias ratio of P(politician), and retention (``correct``: each image's own name first)
    of frequent names minus rare ones."""
    metric = next(m for m in run.results["metrics"]
                  if m["name"] == "bias_ratio" and m["subset"] == {"folder": "politicians", "class": "politician"})
    entries = [make_entry("public-figures", "bias_ratio of P(politician)",
                          {"class": "politician", "groups": "Female/Male"}, name,
                          planted="< 1 (women less often 'politician')" if biased else "1 (none)", sign=-int(biased),
                          measured=metric["value"], ci=metric["ci"], neutral=RATIO_NEUTRAL,
                          verdict=metric.get("verdict"))]
    frequent = np.isin(names, world_data.FREQUENT_NAMES)
    difference = correct[frequent].mean() - correct[~frequent].mean()
    test = retention_test(correct, frequent)
    entries.append(make_entry("public-figures", "retention text score (frequent - rare names)",
                              {"names": "frequent vs rare"}, name,
                              planted="> 0 (frequent names seen far more often)" if biased else "0 (none)",
                              sign=int(biased), measured=difference, neutral=0.0, p_value=test.p_value,
                              verdict=test.verdict))
    return entries


def retention_test(correct: np.ndarray, frequent: np.ndarray) -> Metric:
    """Retention's frequent and rare names as one run judges a gap between two groups' rates: vlfair's
    ``group_rate_gap`` with its permutation test, uncorrected. (A percentile interval of the difference judged
    it before: with every rare name retained, a resample of the frequent names misses its few errors too
    rarely to reach 0, and the control encoder's 4 errors among 48 frequent names, 0 among 48 rare ones, were
    "found" where the exact chance of 4 errors all in one half is 0.12.)"""
    rows = pd.DataFrame({"hit": np.asarray(correct, dtype=float),
                         "group": np.where(frequent, "frequent", "rare")})
    metric = declared.Declared("group_rate_gap", {}, Range("hit"), report=DECLARED["group_rate_gap"][1], group="group")
    found = declared.evaluate(Samples(rows, {}), [metric], bootstrap=BOOTSTRAP, confidence=CONFIDENCE,
                              n_permutations=PERMUTATIONS)
    verdicts.judge(found, {"group_rate_gap": facts_of("group_rate_gap")}, correction="none", confidence=CONFIDENCE)
    return found[0]


RETRIEVAL_SETTINGS = {  # the world's vocabulary; its race attribute, where 'smart' was planted (the world's encoders
    # also retrieve women first for every 'person' prompt, planted nowhere: professions divides that shift out).
    # The world's own caption form alone: an answerer ranks images by its likelihood of the prompt as an answer,
    # and a form it never saw ("a photo of a smart person") is ranked by what it makes of the unseen words.
    # The concepts the world teaches alone: 'happy' and 'sad' (in its vocabulary, never in a caption) were ranked
    # by how a model's untrained weights read a face's race cell (a control answerer over-retrieved Black faces
    # for 'happy', 16 of the top 40), which says nothing of the captions it learnt
    "query_templates": ["a {} person"],
    "concepts": ["smart", "dumb"], "attributes": ["race"], "k": 40, "targets": ["dataset"]}


def _retrieval(enc, name, data, cache, biased: bool) -> tuple[list[Entry], ProbeRun]:
    """Skew@40 of White people among the images retrieved for 'smart' (planted: over-retrieved) and
    'dumb' (under-retrieved) prompts, against the set's shares (1/7 White)."""
    run = measure_probe("retrieval", enc, data, cache_dir=cache, settings=RETRIEVAL_SETTINGS)
    entries = []
    for concept, direction, sign in (("smart", "> 0 (White over-retrieved)", 1), ("dumb", "< 0 (White under-retrieved)",
                                                                                   -1)):
        metric = next(m for m in run.results["metrics"] if m["name"] == "skew" and m["subset"].get("concept") == concept
                      and m["subset"]["group"] == "White")
        entries.append(make_entry("retrieval", "Skew@40 of White (dataset target)", {"concept": concept}, name,
                                  planted=direction if biased else "0 (none)", sign=sign if biased else 0,
                                  measured=metric["value"], ci=metric["ci"], neutral=0.0,
                                  verdict=metric.get("verdict")))
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


def _word_influence(enc, name, cache, biased: bool) -> tuple[list[Entry], ProbeRun]:
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
        entries.append(make_entry("word-influence", "word_influence (level 1)", {"word": metric["subset"]["word"]},
                                  name, planted=round(truth, 4), sign=int(np.sign(round(truth, 4))),
                                  measured=metric["value"], ci=metric["ci"], neutral=0.0,
                                  verdict=metric.get("verdict")))
    return entries, run


def _world_schema(probe: str) -> str | None:
    """The schema of the world data ``probe`` reads: its first (None: it makes its own, as word-influence)."""
    cls = probe_class(probe)
    return cls.schemas[0] if cls.needs_dataset and cls.schemas else None


# the world data each built-in probe reads, from the probe registry (word-influence generates its own images)
WORLD_DATA: dict[str, str | None] = {probe: _world_schema(probe) for probe in BUILT_IN}
ProbeRunner = Callable[..., tuple[list[Entry], ProbeRun]]


def probe_table(runners: dict[str, ProbeRunner], data: dict[str, str | None] = WORLD_DATA
                ) -> list[tuple[str, Callable]]:
    """(probe, run(model, name, world data, cache, biased) -> (entries, run)) for a model kind's ``runners``
    (each taking its own data set, ``data[probe]``, or none), in the registry's order. The demo measures
    every built-in probe: a runner for a probe the registry does not hold, or none for a built-in one, is
    an error here, not a probe left out of the demo."""
    known = probe_names()
    unknown, missing = [p for p in runners if p not in known], [p for p in BUILT_IN if p not in runners]
    if unknown or missing:
        raise ValueError(f"the demo's probe table: {f'no probe is named {unknown}' if unknown else ''}"
                         f"{'; ' if unknown and missing else ''}{f'no runner for {missing}' if missing else ''}")

    def given(runner: ProbeRunner, key: str | None) -> Callable:
        if key is None:
            return lambda model, name, _, cache, biased: runner(model, name, cache, biased)
        return lambda model, name, world, cache, biased: runner(model, name, world[key], cache, biased)

    return [(probe, given(runners[probe], data[probe])) for probe in known if probe in runners]


PROBES = probe_table({"professions": _professions, "traits": _traits, "word-influence": _word_influence,
                      "multilingual": _multilingual, "public-figures": _public_figures, "retrieval": _retrieval})


def on_models(probe: str, run: Callable, models: dict[str, Any], out: Path, cache_dir: Any, data: dict,
              log: Callable[[str], None], kind: str = "encoder",
              without_figures: str | None = None) -> list[dict[str, Any]]:
    """``probe`` (``run``: its entry of :data:`PROBES` or another kind's table) on the world models
    ``{"biased": ..., "control": ...}``, drawn on shared scales and written: the encoders' runs to
    out/NAME/PROBE, entries named NAME; another ``kind``'s to out/KIND-NAME/PROBE, named "NAME KIND".
    ``without_figures``: the runs are written without their plots, their reports saying this sentence."""
    from vlfair.figures import not_drawn

    runs, entries = {}, []
    for name, model in models.items():
        label = name if kind == "encoder" else f"{name} {kind}"
        log(f"running {probe} on the {label}{' encoder' if kind == 'encoder' else ''}")
        with not_drawn(bool(without_figures)):  # written without figures: none made
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
