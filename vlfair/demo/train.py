"""Training the world's tiny CLIP encoders contrastively (deterministic, CPU, seconds)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

from vlfair.demo.world import Planting, render, training_pairs, vocabulary


def train_encoder(out: str | Path, planting: Planting, *, pairs: int = 12_000, steps: int = 600, batch_size: int = 128,
                  seed: int = 0, log=print) -> Path:
    """Train a CLIPModel on the world's captions and save it (weights, tokenizer, processor)."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    from vlfair.testing import word_tokenizer

    start = time.perf_counter()
    torch.manual_seed(seed)
    tokenizer = word_tokenizer(model_max_length=12, extra_words=vocabulary())
    tower = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
    config = CLIPConfig(
        text_config={**tower, "vocab_size": len(tokenizer), "max_position_embeddings": 12,
                     "pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.bos_token_id,
                     "eos_token_id": tokenizer.eos_token_id},
        vision_config={**tower, "image_size": 32, "patch_size": 8}, projection_dim=32)
    model = CLIPModel(config)
    processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    people, captions = training_pairs(pairs, planting, seed)
    rng = np.random.default_rng(seed + 1)
    pixels = processor(images=[render(p, rng) for p in people], return_tensors="pt")["pixel_values"]
    tokens = tokenizer(captions, padding="max_length", max_length=12, truncation=True, return_tensors="pt")
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=2e-3, total_steps=steps, pct_start=0.1)
    generator = torch.Generator().manual_seed(seed)
    model.train()
    for step in range(steps):
        batch = torch.randint(0, pairs, (batch_size,), generator=generator)
        result = model(input_ids=tokens["input_ids"][batch], attention_mask=tokens["attention_mask"][batch],
                    pixel_values=pixels[batch], return_loss=True)
        optimizer.zero_grad()
        result.loss.backward()
        optimizer.step()
        schedule.step()
        if step % 200 == 0 or step == steps - 1:
            log(f"  step {step:4d}  loss {result.loss.item():.3f}")
    model.eval()
    out_dir = Path(out)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    log(f"  trained in {time.perf_counter() - start:.1f} s -> {out_dir}")
    return out_dir


DEMO_VERSION = 4  # bump when the world or the training changes: cached encoders are retrained


def trained_encoder(planting: Planting, cache_dir: str | Path | None = "default", steps: int = 2400, seed: int = 0,
                    log=print) -> Path:
    """The encoder for ``planting``: trained on first use, then read from the cache."""
    from vlfair.cache import cache_root

    key = hashlib.sha256(json.dumps({"planting": dataclasses.asdict(planting), "steps": steps, "seed": seed,
                                     "version": DEMO_VERSION}, sort_keys=True).encode()).hexdigest()[:16]
    root = cache_root(cache_dir) or Path(tempfile.mkdtemp(prefix="vlfair-demo-"))
    path = root / "demo" / f"encoder-{key}"
    with _TRAINING:  # one training per process: a second caller (another Space request) waits, then reads it
        if (path / "model.safetensors").exists():
            return path
        log(f"training the world encoder ({'control' if planting == Planting.control() else 'planted'} captions, "
            f"{steps} steps; cached afterwards)")
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{path.name}.partial-", dir=path.parent))
        train_encoder(staging, planting, steps=steps, seed=seed, log=log)
        try:
            os.replace(staging, path)  # complete or absent: an interrupted training is redone
        except OSError:
            if not (path / "model.safetensors").exists():
                raise
            shutil.rmtree(staging)  # another process finished the same training first
    return path


_TRAINING = threading.Lock()


def world_encoder(planting: Planting, cache_dir: str | Path | None = "default", log=print):
    """The trained world encoder, loaded in float32 (its measurements are compared exactly)."""
    from vlfair.models import load_encoder

    return load_encoder(str(trained_encoder(planting, cache_dir, log=log)), dtype="float32")
