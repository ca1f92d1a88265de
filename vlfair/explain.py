"""Grad-CAM for vision-transformer encoders, native (no grad-cam package).

The map for an image is ReLU(sum_c w_c * A_c) over the patch tokens A entering the last
transformer block, with w_c the mean over patches of d(logit difference)/dA_c. (The tokens leaving
the last block get no gradient in CLIP, which pools only its CLS token; the last block's
attention is what mixes the patches into it.) The logit difference is
``scale * (cos(x, t_pos) - cos(x, t_neg))``: the evidence for the positive over the negative
text. It lives on the patch grid and is upsampled bilinearly to the model's input size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from vlfair.models.precision import ieee_float32

CAM_COLOURMAP = "inferno"  # perceptually uniform and readable in grey: brighter means more evidence, unlike jet


class NotAViT(ValueError):
    """Grad-CAM here needs a transformer vision tower with a patch grid."""


def _vision(encoder: Any) -> tuple[Any, Any, int, int]:
    """(model with get_image_features, last block, number of prefix tokens, patch grid side)."""
    inner = getattr(encoder, "image_encoder", encoder)  # mclip: the CLIP image tower
    model = getattr(inner, "model", None)
    vision = getattr(model, "vision_model", None)
    layers = getattr(getattr(vision, "encoder", None), "layers", None)
    config = getattr(getattr(model, "config", None), "vision_config", None)
    if layers is None or config is None or not hasattr(config, "patch_size"):
        raise NotAViT(f"Grad-CAM is native for ViT image towers; {encoder.spec!r} has none")
    grid = config.image_size // config.patch_size
    model_type = getattr(getattr(model, "config", None), "model_type", "")
    prefix = 0 if model_type in ("siglip", "siglip2") else 1  # SigLIP has no CLS token
    return model, layers[-1], prefix, grid


def gradcam(encoder: Any, images: Sequence[Any], text_pos: np.ndarray, text_neg: np.ndarray,
            scale: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Maps for ``images`` explaining ``text_pos`` over ``text_neg`` (normalised text embeddings).

    Returns:
        (patch-grid maps (N, g, g), maps upsampled to the input size (N, H, W)); non-negative.
    """
    model, block, prefix, grid = _vision(encoder)
    scale = encoder.logit_scale if scale is None else scale
    batch = torch.from_numpy(np.stack([encoder.preprocessing.load(im, i) for i, im in enumerate(images)]))
    pixels = encoder.preprocessing.normalize(batch.to(encoder.device), encoder.dtype)
    captured = {}

    def keep(_module, args, kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        hidden.retain_grad()
        captured["tokens"] = hidden

    direction = torch.as_tensor(np.asarray(text_pos) - np.asarray(text_neg), dtype=torch.float32, device=encoder.device)
    handle = block.register_forward_pre_hook(keep, with_kwargs=True)
    try:
        with torch.enable_grad(), ieee_float32(encoder.dtype):  # float32 asked for is float32 computed
            output = model.get_image_features(pixel_values=pixels)
            features = (output if isinstance(output, torch.Tensor) else output.pooler_output).float()
            features = features / features.norm(dim=-1, keepdim=True)
            (scale * features @ direction).sum().backward()
    finally:
        handle.remove()
        model.zero_grad(set_to_none=True)
    tokens = captured["tokens"][:, prefix:, :].float()
    grads = captured["tokens"].grad[:, prefix:, :].float()
    if tokens.shape[1] != grid * grid:
        raise NotAViT(f"expected {grid * grid} patch tokens, found {tokens.shape[1]}")
    cam = torch.relu((grads.mean(dim=1, keepdim=True) * tokens).sum(dim=-1)).reshape(-1, 1, grid, grid)
    size = encoder.preprocessing.output_hw
    upsampled = torch.nn.functional.interpolate(cam, size=size, mode="bilinear", align_corners=False)
    return cam[:, 0].detach().cpu().numpy(), upsampled[:, 0].detach().cpu().numpy()


def overlay_figure(encoder: Any, images: Sequence[Any], maps: np.ndarray, titles: Sequence[str], title: str):
    """Each image (as the model saw it) with its map on top."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    from vlfair.figures import subplots

    figure, axes = subplots(1, len(images), figsize=(2.4 * len(images), 2.7), squeeze=False)
    for axis, image, cam, caption in zip(axes[0], images, maps, titles):
        axis.imshow(encoder.preprocessing.load(image, 0))
        peak = cam.max()
        axis.imshow(cam / peak if peak > 0 else cam, cmap=CAM_COLOURMAP, alpha=0.45, vmin=0, vmax=1)
        axis.set_title(caption, fontsize=8)
        axis.axis("off")
    figure.suptitle(title, fontsize=10)
    scale = ScalarMappable(cmap=CAM_COLOURMAP, norm=Normalize(0, 1))
    figure.colorbar(scale, ax=axes[0].tolist(), fraction=0.025, pad=0.02,
                    label="activation (share of the image's peak)")
    return figure
