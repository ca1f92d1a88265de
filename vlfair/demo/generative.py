"""The demo's generative path: every probe asks the world's answerers (tiny LLaVAs trained on the
world's captions, :mod:`vlfair.demo.answerer`, three trainings per world) its questions, counts the
planted biases every biased training shows and the gaps every control training shows
(:func:`tally`), and sets seed 0's answerers beside the world's encoders with ``vlfair compare``
on the same rows."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from vlfair import measures
from vlfair.compare import ComparisonError, compare_runs
from vlfair.compare.comparison import verdict_text
from vlfair.compare.render import write_comparison
from vlfair.defaults import BOOTSTRAP, CONFIDENCE
from vlfair.demo import datasets as world_data
from vlfair.demo.answerer import (
    GERMAN_QUESTION,
    WHAT_QUESTION,
    AnswererConfig,
    answerer_hash,
    train_answerer,
)
from vlfair.demo.run import (
    TRAITS_SETTINGS,
    _entry,
    _excludes,
    _retrieval,
    _word_influence,
    figure_entries,
    profession_entries,
    trait_entries,
)
from vlfair.demo.shipped import WORLDS, ship_models
from vlfair.demo.train import TrainingConfig, _training_data, cached_training, read_record
from vlfair.demo.world import Planting
from vlfair.logging import get_logger
from vlfair.probes import ProbeRun, measure_probe

logger = get_logger(__name__)
SHIPPED_ANSWERERS = Path(__file__).resolve().parent / "answerers"
DEFAULT_ANSWERER = AnswererConfig()
KIND = "answerer"  # the demo's runs of the answerers: out/answerer-biased/PROBE, out/answerer-control/PROBE


# The trainings of each world's answerer. An answerer trained once carries small gaps of its own (its
# seed draws the world's captions and the initial weights), which intervals over images do not
# cover: the control answerer showed a doctor gap of 0.93 with seed 0 and five gaps with seed 1. A
# world's bias is therefore one that the answerers of every seed show (:func:`tally`). Seed 0's is
# the world's answerer: the one compared with the encoder and offered in the Space.
SEEDS = (0, 1, 2)


def answerer_name(world: str, seed: int = 0) -> str:
    return f"demo-world {world} answerer" + (f" (seed {seed})" if seed else "")


def shipped_name(world: str, seed: int = 0) -> str:
    """Its folder under vlfair/demo/answerers/ and its runs' name in the demo (``biased-seed1``)."""
    return world if seed == 0 else f"{world}-seed{seed}"


def answerer_config(seed: int) -> AnswererConfig:
    return dataclasses.replace(DEFAULT_ANSWERER, seed=seed)


def answerer_path(planting: Planting, cache_dir: Any = "default", *, retrain: bool = False,
                  config: AnswererConfig = DEFAULT_ANSWERER, name: str | None = None,
                  log: Callable[[str], None] = logger.info) -> Path:
    """The shipped answerer for ``planting`` and ``config`` (its seed); with ``retrain`` (or one vlfair
    does not ship), one trained on this machine and cached."""
    wanted = answerer_hash(planting, config)
    if not retrain:
        for world in WORLDS:
            for seed in SEEDS:
                record = read_record(SHIPPED_ANSWERERS / shipped_name(world, seed))
                if record and record["config_hash"] == wanted:
                    return SHIPPED_ANSWERERS / shipped_name(world, seed)
    data = _training_data(planting, TrainingConfig(pairs=config.pairs, seed=config.seed))
    return cached_training(f"answerer-{wanted}-{data[2]}", cache_dir,
                           lambda staging: train_answerer(staging, planting, config, name=name, data=data),
                           name or "world answerer", f"{config.steps} steps", log)


def world_answerer(planting: Planting, cache_dir: Any = "default", *, retrain: bool = False, name: str | None = None,
                   log: Callable[[str], None] = logger.info, seed: int = 0) -> Any:
    """The world answerer (of training ``seed``), loaded in float32 as a generative scorer (``lvlm:``)."""
    from vlfair.models import load_encoder

    path = answerer_path(planting, cache_dir, retrain=retrain, config=answerer_config(seed), name=name, log=log)
    scorer = load_encoder(f"lvlm:{path}", dtype="float32", device="cpu")
    scorer.display_name = name  # boards and reports name it, not its folder
    return scorer


# ---- each probe on an answerer -------------------------------------------------------------------

def _frame(run: ProbeRun) -> Any:
    """The run's samples (every probe the demo runs keeps them)."""
    assert run.output.samples is not None, f"{run.name} kept no samples"
    return run.output.samples.frame


# the answerer describes an image with the world's captions: "a photo of a doctor" or "a photo of a female"
PROFESSIONS_SETTINGS = {"generative.question": WHAT_QUESTION, "generative.answer": "a photo of a {profession}"}


def _professions(model, name, data, cache, biased: bool) -> tuple[list[dict], ProbeRun]:
    """The encoders' measure, of each image's probability of being described by its own profession's
    caption (score=likelihood, a generative model's per-pair score: the biased answerer describes a
    woman doctor as "a photo of a female" where it calls a man "a photo of a doctor")."""
    run = measure_probe("professions", model, data, cache_dir=cache, settings=PROFESSIONS_SETTINGS)
    frame = _frame(run)
    return profession_entries(frame["likelihood"].to_numpy(float), frame["profession"].to_numpy(),
                              frame["gender"].to_numpy(), name, biased, "women described by it"), run


def _traits(model, name, data, cache, biased: bool) -> tuple[list[dict], ProbeRun]:
    # the encoders' settings (Grad-CAM is skipped, with a warning): the runs are of one family, compared
    run = measure_probe("traits", model, data, cache_dir=cache, settings=TRAITS_SETTINGS)
    frame = _frame(run)
    return trait_entries(run, frame["confidence smart/dumb"].to_numpy(float), frame["race"].to_numpy(), name,
                         biased), run


# FairFace-schema zero-shot gender in the world's two languages: its captions as the answers, its
# questions; the Multi30K part reads embeddings, which an answerer has none of
MULTILINGUAL_SETTINGS = {
    "prompt_sets": {"world": {"gender": {"Male": {"en": "a photo of a male", "de": "ein foto von ein mann"},
                                         "Female": {"en": "a photo of a female", "de": "ein foto von ein frau"}}}},
    "prompt_set": "world", "pivot": "en", "group_gaps": [{"task": "gender", "between": "gender"}], "rate_gaps": [],
    "generative": {"questions": {"en": WHAT_QUESTION, "de": GERMAN_QUESTION}, "normalize_length": False,
                   "mode": "likelihood", "max_new_tokens": 16}}


def _multilingual(model, name, data, cache, biased: bool) -> tuple[list[dict], ProbeRun]:
    """German was rare in the biased world's captions: its zero-shot gender accuracy falls below English's."""
    run = measure_probe("multilingual", model, data, cache_dir=cache, settings=MULTILINGUAL_SETTINGS)
    metric = next(m for m in run.results["metrics"]
                  if m["name"] == "cross_lingual_gap" and m["subset"] == {"task": "gender"})
    return [_entry("multilingual", "cross_lingual_gap of gender accuracy (en vs de)", {"task": "gender"}, name,
                   "> 0 (German rarer in training)" if biased else "0 (none)", metric["value"], metric["ci"],
                   _excludes(metric["ci"], 0.0), 0.0, int(biased))], run


def _public_figures(model, name, data, cache, biased: bool) -> tuple[list[dict], ProbeRun]:
    """The probe's run and retention; the bias ratio of P("politician" as the answer), not renormalised
    over the level's classes: renormalised, every politician is one to a few parts in 10^4 (the
    answerer names no other class of the level), a scale on which training noise is significant."""
    run = measure_probe("public-figures", model, data, cache_dir=cache)
    frame = _frame(run)
    entries = figure_entries(run, frame["own name first"].to_numpy(float), frame["name"].to_numpy(), name, biased)
    politicians = [i for i, c in enumerate(data["category"]) if c in world_data.POLITICIAN_OFFICES]
    said = np.exp(model.log_likelihoods([data["image"][i] for i in politicians], WHAT_QUESTION, ["politician"])[:, 0])
    r = measures.bias_ratio(said, np.array(data["gender"])[politicians], "Female", "Male", confidence=CONFIDENCE)
    entries[0] = _entry("public-figures", "bias_ratio of P('politician' as the answer)",
                        {"class": "politician", "groups": "Female/Male"}, name,
                        "< 1 (women less often 'politician')" if biased else "1 (none)", r["bias_ratio"],
                        r["bias_ratio_ci"], _excludes(r["bias_ratio_ci"], 1.0), 1.0, -int(biased))
    return entries, run


PROBES: list[tuple[str, Callable]] = [  # (probe, run(model, name, world data, cache, biased) -> (entries, run))
    ("professions", lambda m, n, d, c, b: _professions(m, n, d["professions"], c, b)),
    ("traits", lambda m, n, d, c, b: _traits(m, n, d["fairface"], c, b)),
    ("word-influence", lambda m, n, d, c, b: _word_influence(m, n, c, b)),
    ("multilingual", lambda m, n, d, c, b: _multilingual(m, n, d["fairface"], c, b)),
    ("public-figures", lambda m, n, d, c, b: _public_figures(m, n, d["pfi"], c, b)),
    ("retrieval", lambda m, n, d, c, b: _retrieval(m, n, d["fairface"], c, b)),
]
# the probes whose encoder and answerer runs measure one quantity on the same rows (professions: the
# encoder's CLIPScore, the answerer's answer likelihood; multilingual: Multi30K vs FairFace; word-influence:
# other generated images)
COMPARED = ("traits", "public-figures", "retrieval")


def measure(answerers: dict[str, Any], out: Path, cache_dir: Any = None, data: dict | None = None,
            log: Callable[[str], None] = logger.info) -> list[dict[str, Any]]:
    """Every probe's entries for the world answerers ``{"biased": ..., "control": ...}``; runs are
    written to out/answerer-NAME/PROBE. Entries name the answerer ("biased answerer")."""
    from vlfair.demo import run

    return run.measure(answerers, out, cache_dir, data, log, PROBES, KIND)


def compare_kinds(out: Path, log: Callable[[str], None] = logger.info) -> list[dict[str, Any]]:
    """The biased encoder's and the biased answerer's runs of each probe in :data:`COMPARED`, row by
    row (out/compare-kinds/PROBE): which of the two is more biased, with a paired interval."""
    rows = []
    for probe in COMPARED:
        try:
            comparison = compare_runs([out / "biased" / probe, out / f"{KIND}-biased" / probe], bootstrap=BOOTSTRAP,
                                      confidence=CONFIDENCE)
        except ComparisonError as exc:  # said in the report, the rest compared
            rows.append({"probe": probe, "refused": str(exc)})
            continue
        write_comparison(comparison, out / "compare-kinds" / probe)
        for entry in comparison.content["differences"]:
            rows.append({"probe": probe, "metric": entry["metric"], "subset": entry["subset"],
                         "encoder": entry["value_a"], "answerer": entry["value_b"], "difference": entry["difference"],
                         "ci": entry["difference_ci"], "verdict": entry["verdict"],
                         "verdict_text": verdict_text(entry, ["the encoder", "the answerer"])})
    kinds = sum("verdict" in r for r in rows)
    log(f"encoder vs answerer (vlfair compare, same rows): {kinds} differences in {', '.join(COMPARED)}")
    return rows


def ship(dest: Path = SHIPPED_ANSWERERS, worlds: tuple[str, ...] = ("biased", "control"),
         seeds: tuple[int, ...] = SEEDS, log: Callable[[str], None] = logger.info) -> dict[str, Path]:
    """Train the shipped worlds' answerers (one per seed) and write them under ``dest``, replacing what
    was there only once the new one is complete (``python -m vlfair.demo.generative``)."""
    trainings = {shipped_name(world, seed): (world, seed) for world in worlds for seed in seeds}
    return ship_models(dest, list(trainings), lambda path, folder: train_answerer(
        path, WORLDS[trainings[folder][0]], answerer_config(trainings[folder][1]),
        name=answerer_name(*trainings[folder])), lambda folder: answerer_name(*trainings[folder]), log)


def tally(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The answerers' counts. Across trainings (:data:`SEEDS`): a planted bias is found where every
    seed's biased answerer finds it with its sign; a control false alarm is a gap every seed's
    control answerer shows, on one side of neutral (an F-test: significant in all). Per answerer:
    ``seeds``, each training's own counts."""
    from vlfair.demo.run import valid

    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for entry in entries:  # one measured quantity of one world, across its trainings
        world = entry["encoder"].split()[0]  # "biased answerer (seed 1)"
        key = (world, entry["probe"], entry["measure"], json.dumps(entry["subset"], sort_keys=True))
        groups.setdefault(key, []).append(entry)
    planted = [group for (world, *_), group in groups.items() if world == "biased" and group[0]["planted_sign"]]
    control = [group for (world, *_), group in groups.items() if world == "control"]
    trainings = {world: len({e["encoder"] for e in entries if e["encoder"].split()[0] == world})
                 for world in ("biased", "control")}

    def every(world: str, group: list[dict[str, Any]]) -> bool:  # a quantity some training lacks is not counted
        return len({e["encoder"] for e in group}) == trainings[world]

    def same_gap(group: list[dict[str, Any]]) -> bool:
        sides = {np.sign(e["measured"] - e["neutral"]) for e in group if e["ci"] is not None}
        return every("control", group) and all(not valid(e) for e in group) and len(sides) <= 1

    labels = {e["encoder"] for e in entries}
    seeds = []
    for seed in (s for s in SEEDS if {answerer_label("biased", s), answerer_label("control", s)} & labels):
        biased = [e for e in entries if e["encoder"] == answerer_label("biased", seed) and e["planted_sign"]]
        controls = [e for e in entries if e["encoder"] == answerer_label("control", seed)]
        seeds.append({"seed": seed, "found": sum(valid(e) for e in biased), "planted": len(biased),
                      "false_alarms": sum(not valid(e) for e in controls), "controls": len(controls)})
    return {"found": sum(every("biased", group) and all(valid(e) for e in group) for group in planted),
            "planted": len(planted), "false_alarms": sum(same_gap(group) for group in control),
            "controls": len(control), "trainings": max(trainings.values()), "seeds": seeds}


def answerer_label(world: str, seed: int = 0) -> str:
    """What the demo's entries call the answerer (``vlfair.demo.run.measure``)."""
    return f"{world} {KIND}" + (f" (seed {seed})" if seed else "")


def summary_lines(entries: list[dict[str, Any]], compared: list[dict[str, Any]]) -> list[str]:
    """The generative path's tally and the encoder-vs-answerer verdicts, for the terminal."""
    counts = tally(entries)
    verdicts: dict[str, int] = {}
    for row in compared:
        if "verdict" in row:
            verdicts[row["verdict"]] = verdicts.get(row["verdict"], 0) + 1
    each = "; ".join(f"seed {s['seed']}: {s['found']}/{s['planted']} found, {s['false_alarms']}/{s['controls']} "
                     "false alarms" for s in counts["seeds"])
    return [f"generative (the world's answerers, {counts['trainings']} trainings each): biased {counts['found']}/"
            f"{counts['planted']} planted biases found by every training; control {counts['false_alarms']}/"
            f"{counts['controls']} false alarms in every training ({each})",
            "encoder vs answerer (biased worlds, same rows): "
            + (", ".join(f"{count} {verdict.replace('_', ' ')}" for verdict, count in sorted(verdicts.items()))
               or "nothing compared")]


def main(argv: list[str] | None = None) -> int:
    import argparse

    from vlfair.logging import env_level, set_verbosity

    parser = argparse.ArgumentParser(prog="python -m vlfair.demo.generative",
                                     description="Train and ship the demo world's answerers.")
    parser.add_argument("--dest", type=Path, default=SHIPPED_ANSWERERS, help="where to write (default: the package)")
    parser.add_argument("--world", action="append", choices=["biased", "control"], help="only this world (repeatable)")
    parser.add_argument("--seed", action="append", type=int, choices=SEEDS, help="only this seed (repeatable)")
    args = parser.parse_args(argv)
    set_verbosity(env_level() or "info")
    ship(args.dest, tuple(args.world or ("biased", "control")), tuple(args.seed or SEEDS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["COMPARED", "PROBES", "SEEDS", "answerer_label", "answerer_path", "compare_kinds", "measure", "ship",
           "shipped_name", "summary_lines", "tally", "world_answerer"]
