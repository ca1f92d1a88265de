"""The demo's generative path: every probe asks the world's answerers (tiny LLaVAs trained on the
world's captions, :mod:`vlfair.demo.answerer`, one per world) its questions, tallies what the biased
one found and the control's false alarms as the encoders' are, and sets the biased answerer beside
the biased encoder with ``vlfair compare`` on the same rows. Each shipped answerer is valid on its
own; how often a training of either world is, over training seeds, is
``benchmarks/validity_sweep.py --models answerers``."""

from __future__ import annotations

import dataclasses
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
from vlfair.demo import entries
from vlfair.demo.answerer import (
    GERMAN_QUESTION,
    WHAT_QUESTION,
    AnswererConfig,
    answerer_hash,
    train_answerer,
)
from vlfair.demo.entries import (
    TRAITS_SETTINGS,
    WORLD_DATA,
    Entry,
    _retrieval,
    _word_influence,
    figure_entries,
    make_entry,
    probe_table,
    profession_entries,
    trait_entries,
)
from vlfair.demo.shipped import WORLDS, ship_models
from vlfair.demo.train import TrainingConfig, _training_data, cached_training, read_record
from vlfair.demo.world import Planting
from vlfair.logging import get_logger
from vlfair.measures.catalog import neutral_value
from vlfair.probes import ProbeRun, measure_probe

logger = get_logger(__name__)
SHIPPED_ANSWERERS = Path(__file__).resolve().parent / "answerers"
DEFAULT_ANSWERER = AnswererConfig()
KIND = "answerer"  # the demo's runs of the answerers: out/answerer-biased/PROBE, out/answerer-control/PROBE
LABELS = (f"biased {KIND}", f"control {KIND}")  # what the demo's entries call them


def answerer_name(world: str, seed: int = 0) -> str:
    """Its display name ("demo-world biased answerer"; another training seed than the shipped one's is named)."""
    return f"demo-world {world} answerer" + (f" (seed {seed})" if seed else "")


def answerer_config(seed: int = 0) -> AnswererConfig:
    """The shipped answerers' training, with another seed (the validity sweep's trainings)."""
    return dataclasses.replace(DEFAULT_ANSWERER, seed=seed)


def answerer_path(planting: Planting, cache_dir: Any = "default", *, retrain: bool = False,
                  config: AnswererConfig = DEFAULT_ANSWERER, name: str | None = None,
                  log: Callable[[str], None] = logger.info, device: str = "cpu") -> Path:
    """The shipped answerer for ``planting`` and ``config``; with ``retrain`` (or one vlfair does not
    ship), one trained on this machine (on ``device``) and cached."""
    wanted = answerer_hash(planting, config)
    if not retrain:
        for world in WORLDS:
            record = read_record(SHIPPED_ANSWERERS / world)
            if record and record["config_hash"] == wanted:
                return SHIPPED_ANSWERERS / world
    data = _training_data(planting, TrainingConfig(pairs=config.pairs, seed=config.seed))
    return cached_training(f"answerer-{wanted}-{data[2]}", cache_dir,
                           lambda staging: train_answerer(staging, planting, config, name=name, data=data,
                                                          device=device),
                           name or "world answerer", f"{config.steps} steps", log)


def world_answerer(planting: Planting, cache_dir: Any = "default", *, retrain: bool = False, name: str | None = None,
                   log: Callable[[str], None] = logger.info, config: AnswererConfig = DEFAULT_ANSWERER,
                   device: Any = "auto") -> Any:
    """The world answerer, loaded as a generative scorer (``lvlm:``) in float32, the precision it was trained and
    shipped in, on ``device`` (auto: a GPU where there is one, as the world's encoders: the verdicts are the same)."""
    from vlfair.models import load_encoder

    path = answerer_path(planting, cache_dir, retrain=retrain, config=config, name=name, log=log)
    scorer = load_encoder(f"lvlm:{path}", dtype="float32", device=device)
    scorer.display_name = name  # boards and reports name it, not its folder
    return scorer


# ---- each probe on an answerer -------------------------------------------------------------------

def _frame(run: ProbeRun) -> Any:
    """The run's samples (every probe the demo runs keeps them)."""
    assert run.output.samples is not None, f"{run.name} kept no samples"
    return run.output.samples.frame


# the answerer describes an image with the world's captions: "a photo of a doctor" or "a photo of a female"
PROFESSIONS_SETTINGS = {"generative.question": WHAT_QUESTION, "generative.answer": "a photo of a {profession}"}


def _professions(model, name, data, cache, biased: bool) -> tuple[list[Entry], ProbeRun]:
    """The encoders' measure, of each image's probability of being described by its own profession's
    caption (score=likelihood, a generative model's per-pair score: the biased answerer describes a
    woman doctor as "a photo of a female" where it calls a man "a photo of a doctor")."""
    run = measure_probe("professions", model, data, cache_dir=cache, settings=PROFESSIONS_SETTINGS)
    frame = _frame(run)
    return profession_entries(frame["likelihood"].to_numpy(float), frame["profession"].to_numpy(),
                              frame["gender"].to_numpy(), name, biased, "women described by it"), run


def _traits(model, name, data, cache, biased: bool) -> tuple[list[Entry], ProbeRun]:
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


def _multilingual(model, name, data, cache, biased: bool) -> tuple[list[Entry], ProbeRun]:
    """German was rare in the biased world's captions: its zero-shot gender accuracy falls below English's."""
    run = measure_probe("multilingual", model, data, cache_dir=cache, settings=MULTILINGUAL_SETTINGS)
    metric = next(m for m in run.results["metrics"]
                  if m["name"] == "cross_lingual_gap" and m["subset"] == {"task": "gender"})
    return [make_entry("multilingual", "cross_lingual_gap of gender accuracy (en vs de)", {"task": "gender"}, name,
                       planted="> 0 (German rarer in training)" if biased else "0 (none)", sign=int(biased),
                       measured=metric["value"], ci=metric["ci"], neutral=neutral_value("cross_lingual_gap"),
                       verdict=metric.get("verdict"))], run


def _public_figures(model, name, data, cache, biased: bool) -> tuple[list[Entry], ProbeRun]:
    """The probe's run and retention; the bias ratio of P("politician" as the answer), not renormalised
    over the level's classes: renormalised, every politician is one to a few parts in 10^4 (the
    answerer names no other class of the level), a scale on which training noise is significant."""
    run = measure_probe("public-figures", model, data, cache_dir=cache)
    frame = _frame(run)
    entries = figure_entries(run, frame["own name first"].to_numpy(float), frame["name"].to_numpy(), name, biased)
    politicians = [i for i, c in enumerate(data["category"][:]) if c in world_data.POLITICIAN_OFFICES]
    said = np.exp(model.log_likelihoods([data["image"][i] for i in politicians], WHAT_QUESTION, ["politician"])[:, 0])
    r = measures.bias_ratio(said, np.array(data["gender"][:])[politicians], "Female", "Male", confidence=CONFIDENCE)
    entries[0] = make_entry("public-figures", "bias_ratio of P('politician' as the answer)",
                            {"class": "politician", "groups": "Female/Male"}, name,
                            planted="< 1 (women less often 'politician')" if biased else "1 (none)", sign=-int(biased),
                            measured=r["bias_ratio"], ci=r["bias_ratio_ci"], neutral=neutral_value("bias_ratio"))
    return entries, run


# the encoders' table, with the answerers' own functions where they ask questions; multilingual reads the
# FairFace-schema data (MULTILINGUAL_SETTINGS: its Multi30K part reads embeddings, which an answerer has none of)
PROBES = probe_table({"professions": _professions, "traits": _traits, "word-influence": _word_influence,
                      "multilingual": _multilingual, "public-figures": _public_figures, "retrieval": _retrieval},
                     {**WORLD_DATA, "multilingual": "fairface"})
# the probes whose encoder and answerer runs measure one quantity on the same rows (professions: the
# encoder's CLIPScore, the answerer's answer likelihood; multilingual: Multi30K vs FairFace; word-influence:
# other generated images)
COMPARED = ("traits", "public-figures", "retrieval")


def measure(answerers: dict[str, Any], out: Path, cache_dir: Any = None, data: dict | None = None,
            log: Callable[[str], None] = logger.info, without_figures: str | None = None) -> list[dict[str, Any]]:
    """Every probe's entries for the world answerers ``{"biased": ..., "control": ...}``; runs are
    written to out/answerer-NAME/PROBE (``without_figures``: as :func:`vlfair.demo.run.on_models`).
    Entries name the answerer ("biased answerer")."""
    return entries.measure(answerers, out, cache_dir, data, log, PROBES, KIND, without_figures)


def compare_kind(out: Path, probe: str) -> list[dict[str, Any]]:
    """The biased encoder's and the biased answerer's runs of ``probe`` (one of :data:`COMPARED`), row
    by row (out/compare-kinds/PROBE): which of the two is more biased, with a paired interval; a
    comparison refused is one row saying why."""
    try:
        comparison = compare_runs([out / "biased" / probe, out / f"{KIND}-biased" / probe], bootstrap=BOOTSTRAP,
                                  confidence=CONFIDENCE)
    except ComparisonError as exc:  # said in the report, the rest compared
        return [{"probe": probe, "refused": str(exc)}]
    write_comparison(comparison, out / "compare-kinds" / probe)
    return [{"probe": probe, "metric": entry["metric"], "subset": entry["subset"], "encoder": entry["value_a"],
             "answerer": entry["value_b"], "difference": entry["difference"], "ci": entry["difference_ci"],
             "verdict": entry["verdict"], "verdict_text": verdict_text(entry, ["the encoder", "the answerer"])}
            for entry in comparison.content["differences"]]


def ship(dest: Path = SHIPPED_ANSWERERS, worlds: tuple[str, ...] = ("biased", "control"),
         log: Callable[[str], None] = logger.info) -> dict[str, Path]:
    """Train the shipped worlds' answerers and write them under ``dest``, replacing what was there
    only once the new one is complete (``python -m vlfair.demo.generative``)."""
    return ship_models(dest, list(worlds), lambda path, world: train_answerer(
        path, WORLDS[world], DEFAULT_ANSWERER, name=answerer_name(world)), answerer_name, log)


def kinds_line(compared: list[dict[str, Any]]) -> str:
    """The encoder-vs-answerer verdicts, counted, for the terminal."""
    verdicts: dict[str, int] = {}
    for row in compared:
        if "verdict" in row:
            verdicts[row["verdict"]] = verdicts.get(row["verdict"], 0) + 1
    return (f"encoder vs answerer (vlfair compare on the same rows of {', '.join(COMPARED)}, biased worlds): "
            + (", ".join(f"{count} {verdict.replace('_', ' ')}" for verdict, count in sorted(verdicts.items()))
               or "nothing compared"))


def main(argv: list[str] | None = None) -> int:
    import argparse

    from vlfair.logging import env_level, set_verbosity

    parser = argparse.ArgumentParser(prog="python -m vlfair.demo.generative",
                                     description="Train and ship the demo world's answerers.")
    parser.add_argument("--dest", type=Path, default=SHIPPED_ANSWERERS, help="where to write (default: the package)")
    parser.add_argument("--world", action="append", choices=["biased", "control"], help="only this world (repeatable)")
    args = parser.parse_args(argv)
    set_verbosity(env_level() or "info")
    ship(args.dest, tuple(args.world or ("biased", "control")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["COMPARED", "LABELS", "PROBES", "answerer_config", "answerer_name", "answerer_path", "compare_kind",
           "kinds_line", "measure", "ship", "world_answerer"]
