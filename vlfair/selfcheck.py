"""End-to-end self-check on a tiny encoder: what ``vlfair demo`` runs until the demo world lands.

It builds a tiny CLIP checkpoint, writes generated JPEGs, and checks on this machine, offline,
that the embedding engine agrees with a direct per-image transformers computation, that a
cached re-run returns the same array, and that text prompt ensembling is normalised.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

TOLERANCE = 1e-5  # max abs difference of L2-normalised float32 embeddings


def _reference_image_embeddings(checkpoint: Path, paths: list[Path]) -> np.ndarray:
    """Per-image embeddings straight from transformers (processor + model), no vlfair code."""
    import torch
    from PIL import Image
    from transformers import CLIPImageProcessor, CLIPModel

    model = CLIPModel.from_pretrained(checkpoint).eval()
    processor = CLIPImageProcessor.from_pretrained(checkpoint)
    rows = []
    with torch.inference_mode():
        for path in paths:
            pixels = processor(images=Image.open(path).convert("RGB"), return_tensors="pt")["pixel_values"]
            feature = model.get_image_features(pixel_values=pixels).pooler_output[0]
            rows.append((feature / feature.norm()).numpy())
    return np.stack(rows)


def run_selfcheck(out_dir: str | Path | None = None, num_images: int = 64) -> dict[str, Any]:
    """Run the checks; returns (and writes to ``out_dir/selfcheck.json``) what was measured."""
    import vlfair
    from vlfair.tiny import tiny_clip, write_jpegs

    with tempfile.TemporaryDirectory(prefix="vlfair-selfcheck-") as tmp:
        tmp_path = Path(tmp)
        checkpoint = tiny_clip(tmp_path / "tiny-clip")
        paths = write_jpegs(tmp_path / "images", num_images)
        encoder = vlfair.load_encoder(str(checkpoint), dtype="float32")  # the reference is float32

        start = time.perf_counter()
        embeddings = vlfair.embed_images(encoder, [str(p) for p in paths], cache_dir=tmp_path / "cache", batch_size=16)
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        cached = vlfair.embed_images(encoder, [str(p) for p in paths], cache_dir=tmp_path / "cache", progress=False)
        cached_s = time.perf_counter() - start
        max_diff = float(np.abs(embeddings - _reference_image_embeddings(checkpoint, paths)).max())
        texts = vlfair.embed_texts(encoder, ["doctor", "nurse"], templates=["a photo of a {}", "the {}"],
                                   cache_dir=None)

    checks = {
        "images_match_transformers": max_diff <= TOLERANCE,
        "cached_rerun_identical": bool(np.array_equal(embeddings, cached)),
        "rows_unit_norm": bool(np.allclose(np.linalg.norm(embeddings, axis=1), 1, atol=1e-5)),
        "text_ensemble_unit_norm": bool(np.allclose(np.linalg.norm(texts, axis=1), 1, atol=1e-5)),
    }
    report = {
        "vlfair_version": vlfair.__version__, "encoder": repr(encoder), "num_images": num_images,
        "max_abs_diff_vs_transformers": max_diff, "tolerance": TOLERANCE,
        "embed_seconds": round(first_s, 3), "cached_seconds": round(cached_s, 4), "checks": checks,
        "passed": all(checks.values()),
    }
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "selfcheck.json").write_text(json.dumps(report, indent=2))
    return report
