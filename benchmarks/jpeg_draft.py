"""Large JPEGs decoded at a reduced size (libjpeg's DCT scaling): how much faster, and how much it moves embeddings
against what the choice of resizer already moves them.

On generated photographs (coloured shapes over a blurred noise texture, saved as JPEG at --image-size), through
openai/clip-vit-base-patch32's preprocessing (shortest edge 224, bicubic, centre crop) and a randomly initialised
ViT-B/32 (its architecture: real layers, so a change of pixels moves the embedding as that model's would):

  whole     the JPEG decoded at full size, then resized by PIL (bicubic, antialiased): vlfair before, and
            transformers' image processor
  reduced   decoded at a half, a quarter or an eighth of its size, never below twice the resize's input
            (``vlfair.load_encoder(..., jpeg_draft=True)``)
  torch     decoded whole, resized by torch (bicubic, antialiased: the resize of transformers' "fast"
            image processors, built on torchvision), a second resizer as standard as PIL's

It prints the decode-and-resize rate of whole and reduced, and 1 - cosine between the embeddings of
whole and reduced, and of whole and torch (median and largest over the images). The last line:

  decode_speedup=A reduced_median=B reduced_max=C resizer_median=D resizer_max=E

Usage: python benchmarks/jpeg_draft.py [--images 48] [--image-size 1792 1344] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFilter


def photograph(index: int, size: tuple[int, int]) -> Image.Image:
    """Shapes over a texture: edges and fine detail at several scales, as in a photograph."""
    rng = np.random.default_rng(index)
    noise = Image.fromarray(rng.integers(0, 256, (size[1] // 4, size[0] // 4, 3), dtype=np.uint8))
    image = noise.resize(size, Image.Resampling.BICUBIC).filter(ImageFilter.GaussianBlur(3))
    draw = ImageDraw.Draw(image)
    for _ in range(6):
        x0, y0 = (int(v) for v in rng.integers(0, (size[0] - 16, size[1] - 16)))
        x1, y1 = x0 + int(rng.integers(16, size[0] // 2)), y0 + int(rng.integers(16, size[1] // 2))
        draw.ellipse([x0, y0, x1, y1], fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
    detail = rng.normal(0, 12, (size[1], size[0], 3))
    return Image.fromarray(np.clip(np.asarray(image, dtype=np.float64) + detail, 0, 255).astype(np.uint8))


def torch_resized(preprocessing, path: str) -> np.ndarray:
    """Decoded whole, resized by torch's antialiased bicubic, centre-cropped as the preprocessing crops."""
    from vlfair.imageio import load_rgb
    from vlfair.models.preprocessing import _center_crop

    image = torch.from_numpy(np.array(load_rgb(path, 0))).permute(2, 0, 1)[None].float()
    height, width = image.shape[-2:]
    short = preprocessing.size[0]
    size = (short, int(short * width / height)) if height <= width else (int(short * height / width), short)
    resized = torch.nn.functional.interpolate(image, size=size, mode="bicubic", antialias=True, align_corners=False)
    array = resized[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy()
    return _center_crop(array, preprocessing.crop)


def one_minus_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return 1 - np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=48)
    parser.add_argument("--image-size", type=int, nargs=2, default=(1792, 1344), metavar=("W", "H"))
    parser.add_argument("--quick", action="store_true", help="6 images, a tiny tower (a smoke run of the script)")
    args = parser.parse_args()
    if args.quick:
        args.images, args.image_size = 6, (1200, 900)
    if args.images < 1:
        parser.error("--images must be at least 1")
    import vlfair
    from vlfair.imageio import load_rgb
    from vlfair.tiny import tiny_clip

    with tempfile.TemporaryDirectory(prefix="vlfair-bench-") as tmp:
        tmp_path = Path(tmp)
        if args.quick:
            checkpoint = tiny_clip(tmp_path / "tiny-224", image_size=224, patch_size=32)
        else:
            from embed_throughput import build_vit_b32  # noqa: PLC0415  (this folder's sibling)

            checkpoint = build_vit_b32(tmp_path / "vit-b32")
        encoder = vlfair.load_encoder(str(checkpoint), dtype="float32")
        whole_prep = encoder.preprocessing
        reduced_prep = dataclasses.replace(whole_prep, jpeg_draft=True)
        paths = []
        for index in range(args.images):
            paths.append(str(tmp_path / f"{index}.jpg"))
            photograph(index, tuple(args.image_size)).save(paths[-1], quality=90)
        print(f"machine: {platform.processor() or platform.machine()}; {args.images} JPEGs "
              f"{args.image_size[0]}x{args.image_size[1]} -> {reduced_prep.output_hw}; "
              f"{'tiny tower (smoke run)' if args.quick else 'ViT-B/32, random weights'}")
        rates, pixels = {}, {}
        for name, prep in (("whole", whole_prep), ("reduced", reduced_prep), ("whole", whole_prep),
                           ("reduced", reduced_prep)):  # in turn, twice: the best of each
            start = time.perf_counter()
            pixels[name] = np.stack([prep.load(path, row) for row, path in enumerate(paths)])
            rates[name] = max(rates.get(name, 0.0), len(paths) / (time.perf_counter() - start))
        pixels["torch"] = np.stack([torch_resized(whole_prep, path) for path in paths])
        with torch.inference_mode():
            embeddings = {name: encoder.encode_pixels(torch.from_numpy(array)).numpy()
                          for name, array in pixels.items()}
        decoded_at = load_rgb(paths[0], 0, reduced_prep.smallest_decode).size
    reduced = one_minus_cosine(embeddings["whole"], embeddings["reduced"])
    resizer = one_minus_cosine(embeddings["whole"], embeddings["torch"])
    print(f"  decode + resize, whole   : {rates['whole']:7.1f} img/s")
    print(f"  decode + resize, reduced : {rates['reduced']:7.1f} img/s  (decoded at {decoded_at[0]}x{decoded_at[1]})")
    print(f"  1 - cos(whole, reduced)  : median {np.median(reduced):.2e}, largest {reduced.max():.2e}")
    print(f"  1 - cos(whole, torch)    : median {np.median(resizer):.2e}, largest {resizer.max():.2e}  "
          "(PIL's resize against torch's)")
    print(f"decode_speedup={rates['reduced'] / rates['whole']:.2f} reduced_median={np.median(reduced):.2e} "
          f"reduced_max={reduced.max():.2e} resizer_median={np.median(resizer):.2e} resizer_max={resizer.max():.2e}")


if __name__ == "__main__":
    main()
