"""Training the world's tiny CLIP encoders contrastively (deterministic for one CPU, seconds to minutes).

An encoder is made from a ``Planting`` (what its captions are biased towards) and a
``TrainingConfig``; their canonical JSON, with the world's constants, hashes to the encoder's
``config_hash``. The encoders vlfair ships (``vlfair.demo.shipped``) and those trained on this
machine (``trained_encoder``, cached under ``$VLFAIR_CACHE/demo``) record that hash and the hash
of the exact training data in ``world.json`` beside the weights.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from vlfair.demo.world import Planting, render_pixels, training_pairs, vocabulary, world_constants
from vlfair.logging import get_logger

Log = Callable[[str], None]
logger = get_logger(__name__)
RECORD = "world.json"  # beside the weights: what the encoder was made from
# Bump when the training code changes in a way the configuration below does not show
# (the loss, the optimiser, the batching). World code changes show in the training-data hash.
TRAINING_CODE_VERSION = 1


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """Everything that decides a world encoder besides its planting."""

    pairs: int = 24_000          # (image, caption) pairs drawn from the world
    steps: int = 2400
    batch_size: int = 128
    learning_rate: float = 2e-3
    weight_decay: float = 0.01
    warmup: float = 0.1          # share of the steps of OneCycleLR's rising phase
    hidden_size: int = 64        # both towers
    intermediate_size: int = 128
    layers: int = 2
    heads: int = 4
    projection_dim: int = 32
    max_length: int = 12         # caption tokens, <bos> and <eos> included
    seed: int = 0                # training data, image noise, initialisation and batches


def world_config(planting: Planting, training: TrainingConfig = TrainingConfig()) -> dict[str, Any]:
    """The canonical description an encoder is made from (JSON-ready)."""
    return {"planting": dataclasses.asdict(planting), "training": dataclasses.asdict(training),
            "world": world_constants(), "vocabulary": vocabulary(), "training_code_version": TRAINING_CODE_VERSION}


def config_hash(planting: Planting, training: TrainingConfig = TrainingConfig()) -> str:
    return hash_of(world_config(planting, training))


def hash_of(config: dict[str, Any]) -> str:
    """16 hex digits of a model's canonical configuration (JSON)."""
    payload = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def write_record(out_dir: Path, record: dict[str, Any]) -> None:
    """``world.json`` beside a world model's weights: what it was made from."""
    (out_dir / RECORD).write_text(json.dumps(record, indent=1) + "\n")


def _training_data(planting: Planting, training: TrainingConfig) -> tuple[list[str], np.ndarray, str]:
    """Captions, rendered images (uint8, N x 32 x 32 x 3) and the hash of both.

    numpy's generators and integer rendering give the same bytes on every machine, so the hash
    catches any change of the world's code (rendering, caption statistics) that its constants miss.
    """
    people, captions = training_pairs(training.pairs, planting, training.seed)
    rng = np.random.default_rng(training.seed + 1)
    images = np.stack([render_pixels(p, rng) for p in people])
    digest = hashlib.sha256()
    digest.update("\n".join(captions).encode())
    digest.update(images.tobytes())
    return captions, images, digest.hexdigest()[:16]


def training_data_hash(planting: Planting, training: TrainingConfig = TrainingConfig()) -> str:
    return _training_data(planting, training)[2]


def train_encoder(out: str | Path, planting: Planting, training: TrainingConfig = TrainingConfig(), *,
                  name: str | None = None, progress: bool = True,
                  data: tuple[list[str], np.ndarray, str] | None = None) -> Path:
    """Train a CLIPModel on the world's captions; save weights, tokenizer, processor and ``world.json``.

    ``data``: the training data (``_training_data``) where the caller has rendered it already.
    """
    import torch
    from tqdm.auto import tqdm
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    from vlfair.logging import progress_bars_enabled
    from vlfair.tiny import word_tokenizer

    start = time.perf_counter()
    t = training
    torch.manual_seed(t.seed)
    tokenizer = word_tokenizer(model_max_length=t.max_length, extra_words=vocabulary())
    tower = {"hidden_size": t.hidden_size, "intermediate_size": t.intermediate_size, "num_hidden_layers": t.layers,
             "num_attention_heads": t.heads}
    config = CLIPConfig(
        text_config={**tower, "vocab_size": len(tokenizer), "max_position_embeddings": t.max_length,
                     "pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.bos_token_id,
                     "eos_token_id": tokenizer.eos_token_id},
        vision_config={**tower, "image_size": 32, "patch_size": 8}, projection_dim=t.projection_dim)
    model = CLIPModel(config)
    processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    captions, images, data_hash = data or _training_data(planting, t)
    pixels = processor(images=list(images), return_tensors="pt")["pixel_values"]
    tokens = tokenizer(captions, padding="max_length", max_length=t.max_length, truncation=True, return_tensors="pt")
    optimizer = torch.optim.AdamW(model.parameters(), lr=t.learning_rate, weight_decay=t.weight_decay)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=t.learning_rate, total_steps=t.steps,
                                                   pct_start=t.warmup)
    generator = torch.Generator().manual_seed(t.seed)
    model.train()
    bar = tqdm(range(t.steps), desc=f"training {name or 'world encoder'}", unit="step",
               disable=not (progress and progress_bars_enabled()), mininterval=1.0)
    for step in bar:
        batch = torch.randint(0, t.pairs, (t.batch_size,), generator=generator)
        result = model(input_ids=tokens["input_ids"][batch], attention_mask=tokens["attention_mask"][batch],
                       pixel_values=pixels[batch], return_loss=True)
        optimizer.zero_grad()
        result.loss.backward()
        optimizer.step()
        schedule.step()
        if step % 50 == 0 or step == t.steps - 1:
            bar.set_postfix(loss=f"{result.loss.item():.3f}", refresh=False)
    bar.close()
    model.eval()
    return save_trained(out, [model, tokenizer, processor], {"name": name, "config_hash": config_hash(planting, t),
                                                             "training_data_hash": data_hash},
                        world_config(planting, t), float(result.loss.item()), start)


def save_trained(out: str | Path, parts: list[Any], identity: dict[str, Any], config: dict[str, Any], loss: float,
                 start: float) -> Path:
    """A trained world model (an encoder or an answerer): its ``parts`` saved to ``out`` beside its
    ``world.json`` (``identity``, the final loss, the training time, torch's version and ``config``)."""
    import torch

    out_dir = Path(out)
    for part in parts:
        part.save_pretrained(out_dir)
    write_record(out_dir, {**identity, "final_loss": round(loss, 4),
                           "trained_seconds": round(time.perf_counter() - start, 1), "torch": torch.__version__,
                           "config": config})
    return out_dir


def read_record(path: str | Path) -> dict[str, Any] | None:
    """The ``world.json`` of an encoder directory, or None where there is none."""
    try:
        return json.loads((Path(path) / RECORD).read_text())
    except FileNotFoundError:
        return None


def trained_encoder(planting: Planting, cache_dir: str | Path | None = "default",
                    training: TrainingConfig = TrainingConfig(), *, name: str | None = None, progress: bool = True,
                    log: Log = logger.info) -> Path:
    """The encoder trained on this machine for ``planting``: trained on first use, then read from the
    cache (:func:`cached_training`)."""
    # The training data's hash as well: it changes with the world's code (how captions are drawn,
    # how images are rendered), which the configuration alone does not show.
    data = _training_data(planting, training)  # rendered once: hashed here, trained on below
    return cached_training(f"encoder-{config_hash(planting, training)}-{data[2]}", cache_dir,
                           lambda staging: train_encoder(staging, planting, training, name=name, progress=progress,
                                                         data=data),
                           name or "world encoder", f"{training.steps} steps", log)


def cached_training(folder: str, cache_dir: str | Path | None, train: Callable[[Path], Any], label: str,
                    detail: str, log: Log = logger.info) -> Path:
    """``$VLFAIR_CACHE/demo/<folder>``, made by ``train(staging)`` on first use.

    A file lock makes one process (or thread) train while any other asking for the same model
    waits, then reads what the first one wrote; a training that dies leaves nothing behind but its
    staging folder's removal.
    """
    from filelock import FileLock

    from vlfair.cache import cache_root

    root = cache_root(cache_dir) or Path(tempfile.mkdtemp(prefix="vlfair-demo-"))
    path = root / "demo" / folder
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):  # a fresh lock object per call: threads exclude each other too
        if (path / RECORD).exists():
            return path
        log(f"training the {label} on this machine ({detail}; cached afterwards in {path})")
        staging = Path(tempfile.mkdtemp(prefix=f"{path.name}.partial-", dir=path.parent))
        try:
            train(staging)
            if path.exists():  # an incomplete folder (no world.json) from an older vlfair
                shutil.rmtree(path)
            os.replace(staging, path)  # complete or absent
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        record = read_record(path)
        assert record is not None, f"{path} has no {RECORD}"  # train wrote it
        log(f"trained the {label} in {record['trained_seconds']:.0f} s: {path}")
    return path


__all__ = ["RECORD", "TrainingConfig", "cached_training", "config_hash", "hash_of", "read_record", "train_encoder",
           "trained_encoder", "training_data_hash", "world_config", "write_record"]
