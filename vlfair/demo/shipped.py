"""The demo world's encoders: shipped inside the package, or trained on this machine.

vlfair ships one trained encoder per world below (``vlfair/demo/encoders/<world>/``, safetensors
with tokenizer, processor and ``world.json``), so the demo, the Space and the tests measure the
same fixed models on every machine instead of each CPU training a slightly different one.
``python -m vlfair.demo.shipped`` re-trains and re-ships them (run it after changing the world or
the training; a test fails until you do).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vlfair.demo.train import Log, TrainingConfig, config_hash, read_record, train_encoder, trained_encoder
from vlfair.demo.world import Planting
from vlfair.logging import get_logger

logger = get_logger(__name__)

SHIPPED_DIR = Path(__file__).resolve().parent / "encoders"
# The shipped worlds: the demo's biased and control encoders, and a moderately biased one for
# the dose-response check (more skew in the captions -> more measured bias).
WORLDS: dict[str, Planting] = {
    "biased": Planting(),
    "moderate": Planting.moderate(),
    "control": Planting.control(),
}


DEFAULT_TRAINING = TrainingConfig()  # the training every shipped world had (frozen: one instance serves every call)


def display_name(world: str) -> str:
    return f"demo-world {world}"


def shipped_path(planting: Planting, training: TrainingConfig = DEFAULT_TRAINING) -> Path | None:
    """The shipped encoder made from exactly this planting and training, if vlfair ships one."""
    wanted = config_hash(planting, training)
    for world in WORLDS:
        record = read_record(SHIPPED_DIR / world)
        if record and record["config_hash"] == wanted:
            return SHIPPED_DIR / world
    return None


def encoder_path(planting: Planting, cache_dir: Any = "default", *, retrain: bool = False,
                 training: TrainingConfig = DEFAULT_TRAINING, name: str | None = None, log: Log = logger.info) -> Path:
    """The shipped encoder for ``planting``; with ``retrain`` (or a world vlfair does not ship),
    one trained on this machine and cached."""
    if not retrain:
        shipped = shipped_path(planting, training)
        if shipped is not None:
            return shipped
    return trained_encoder(planting, cache_dir, training, name=name, log=log)


def world_encoder(planting: Planting, cache_dir: Any = "default", *, retrain: bool = False, name: str | None = None,
                  log: Log = logger.info):
    """The world encoder, loaded in float32 (its measurements are compared exactly)."""
    from vlfair.models import load_encoder

    encoder = load_encoder(str(encoder_path(planting, cache_dir, retrain=retrain, name=name, log=log)), dtype="float32")
    encoder.display_name = name  # boards and reports say "demo-world biased", not a cache path
    return encoder


def ship(dest: Path = SHIPPED_DIR, worlds: list[str] | None = None, log: Log = logger.info,
         training: TrainingConfig = DEFAULT_TRAINING) -> dict[str, Path]:
    """Train every shipped world (with the default training: only that one is looked up) and
    write it under ``dest``, replacing what was there only once the new encoder is complete."""
    return ship_models(dest, worlds or list(WORLDS), lambda path, world: train_encoder(
        path, WORLDS[world], training, name=display_name(world)), display_name, log)


def ship_models(dest: Path, worlds: list[str], train: Callable[[Path, str], Any], name: Callable[[str], str],
                log: Log = logger.info) -> dict[str, Path]:
    """``train(path, world)`` for each world, each written to ``dest/world`` once complete (a world
    model of any kind: the encoders here, the answerers of ``vlfair.demo.generative``)."""
    written = {}
    dest.mkdir(parents=True, exist_ok=True)
    for world in worlds:
        with tempfile.TemporaryDirectory(dir=dest) as staging:
            train(Path(staging) / world, world)
            shutil.rmtree(dest / world, ignore_errors=True)
            (Path(staging) / world).rename(dest / world)
        record = read_record(dest / world)
        assert record is not None, f"{dest / world} has no record"  # the training wrote it
        log(f"shipped {name(world)} (config {record['config_hash']}, final loss {record['final_loss']}, "
            f"{record['trained_seconds']:.0f} s): {dest / world}")
        written[world] = dest / world
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vlfair.demo.shipped", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=SHIPPED_DIR, help="where to write (default: inside the package)")
    parser.add_argument("--world", action="append", choices=list(WORLDS), help="only this world (repeatable)")
    args = parser.parse_args(argv)
    from vlfair.logging import env_level, set_verbosity

    set_verbosity(env_level() or "info")  # a command says what it does
    ship(args.dest, args.world)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
