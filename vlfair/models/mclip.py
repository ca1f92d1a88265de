"""``mclip:`` backend: Multilingual-CLIP text towers paired with their CLIP image tower.

An M-CLIP checkpoint (e.g. ``M-CLIP/XLM-Roberta-Large-Vit-B-32``) is a transformers text model
(``transformer.*``) plus a linear map into CLIP's space (``LinearTransformation.*``); its
config names the text architecture in ``modelBase``. The weights are read directly, so the
unmaintained ``multilingual-clip`` package is not needed. Text features: mean of the last
hidden states over non-padding tokens, then the linear map (as the M-CLIP authors do).

Spec: ``mclip:TEXT[@REV][+IMAGE[@REV]]``. IMAGE defaults to the CLIP the checkpoint was
distilled from (see ``IMAGE_TOWERS``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from vlfair.models.base import Encoder, distinct_rows
from vlfair.models.hf import load_hf, load_tokenizer
from vlfair.models.hub import resolve_model, weight_files

# The CLIP image tower each published M-CLIP text tower was trained against (transformers ids).
IMAGE_TOWERS = {
    "M-CLIP/XLM-Roberta-Large-Vit-B-32": "openai/clip-vit-base-patch32",
    "M-CLIP/XLM-Roberta-Large-Vit-L-14": "openai/clip-vit-large-patch14",
    "M-CLIP/LABSE-Vit-L-14": "openai/clip-vit-large-patch14",
}
# Weights of the text model's pooler are unused by M-CLIP; their absence is fine.
_IGNORABLE = ("pooler.", "embeddings.position_ids")


class MCLIPEncoder(Encoder):
    """Multilingual text tower + CLIP image tower (delegated to an ``hf:`` encoder)."""

    def __init__(self, transformer: Any, projection: torch.nn.Linear, tokenizer: Any, image_encoder: Encoder,
                 *, spec: str, revision: str):
        self.transformer, self.projection, self.tokenizer = transformer, projection, tokenizer
        self.image_encoder = image_encoder
        self.spec, self.revision = spec, revision
        self.device, self.dtype = image_encoder.device, image_encoder.dtype
        self.preprocessing = image_encoder.preprocessing
        self.logit_scale, self.logit_bias, self.loss = image_encoder.logit_scale, None, "softmax"
        self.embedding_dim = projection.out_features
        limit = getattr(tokenizer, "model_max_length", 512)
        self._max_length = min(limit if limit < 10**6 else 512, transformer.config.max_position_embeddings - 2)

    @property
    def text_settings(self) -> dict[str, Any]:
        return {"tokenizer": type(self.tokenizer).__name__, "pooling": "mean", "max_length": self._max_length}

    def image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.image_encoder.image_features(pixel_values)

    @torch.inference_mode()
    def text_features(self, texts: list[str]) -> torch.Tensor:
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self._max_length,
                               return_tensors="pt")
        rows, inverse = distinct_rows(batch["input_ids"], batch["attention_mask"])  # one input embedded once
        ids, attention = batch["input_ids"][rows].to(self.device), batch["attention_mask"][rows].to(self.device)
        hidden = self.transformer(input_ids=ids, attention_mask=attention)[0]
        mask = attention.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1)
        return self.projection(pooled)[inverse.to(self.device)]


def _read_state_dict(path: str, use_safetensors: bool) -> dict[str, torch.Tensor]:
    state: dict[str, torch.Tensor] = {}
    for file in weight_files(path, use_safetensors):
        if file.suffix == ".safetensors":
            from safetensors.torch import load_file

            state.update(load_file(str(file)))
        else:
            state.update(torch.load(file, map_location="cpu", weights_only=True))
    return state


def _text_config(mclip_config: dict[str, Any], trust_remote_code: bool) -> Any:
    """The text architecture: fields inline in config.json, else the ``modelBase`` config."""
    from transformers import AutoConfig, XLMRobertaConfig

    if "hidden_size" in mclip_config and "num_hidden_layers" in mclip_config:
        fields = {k: v for k, v in mclip_config.items() if k not in ("model_type", "architectures", "auto_map")}
        return XLMRobertaConfig(**fields)
    base = mclip_config.get("modelBase")
    if not base:
        raise ValueError("M-CLIP config.json names no text architecture (no 'modelBase')")
    # only the architecture: the weights are M-CLIP's own, so the base's weights are never fetched
    return AutoConfig.from_pretrained(resolve_model(base, config_only=True).path, trust_remote_code=trust_remote_code)


def load_mclip(ref: str, *, device: str | torch.device = "auto", dtype: str | torch.dtype = "auto",
               revision: str | None = None, trust_remote_code: bool = False, use_safetensors: bool = True,
               spec: str | None = None) -> MCLIPEncoder:
    """Load ``TEXT[@REV][+IMAGE[@REV]]`` as an :class:`MCLIPEncoder`."""
    from transformers import AutoModel

    text_ref, _, image_ref = ref.partition("+")
    resolved = resolve_model(text_ref, revision, use_safetensors=use_safetensors)
    config_file = Path(resolved.path) / "config.json"
    config = json.loads(config_file.read_text()) if config_file.exists() else {}
    if config.get("model_type") != "M-CLIP":
        raise ValueError(f"{text_ref!r} is not an M-CLIP checkpoint "
                         f"(config model_type is {config.get('model_type')!r})")
    if not image_ref:
        known = IMAGE_TOWERS.get(resolved.ref)
        if known is None:
            raise ValueError(
                f"no known CLIP image tower for {resolved.ref!r}; name it as mclip:{resolved.ref}+IMAGE_ID. "
                f"Known pairs: {IMAGE_TOWERS}"
            )
        image_ref = known
    image_encoder = load_hf(image_ref, device=device, dtype=dtype, trust_remote_code=trust_remote_code,
                            use_safetensors=use_safetensors)

    state = _read_state_dict(resolved.path, use_safetensors)
    transformer = AutoModel.from_config(_text_config(config, trust_remote_code))
    text_state = {k.removeprefix("transformer."): v for k, v in state.items() if k.startswith("transformer.")}
    missing, unexpected = transformer.load_state_dict(text_state, strict=False)
    missing = [k for k in missing if not k.startswith(_IGNORABLE)]
    if missing or unexpected:
        raise ValueError(f"M-CLIP weights do not fit the text model: missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    if "LinearTransformation.weight" not in state:
        raise ValueError(f"{resolved.path} has no LinearTransformation weights: not an M-CLIP checkpoint")
    weight = state["LinearTransformation.weight"]
    projection = torch.nn.Linear(weight.shape[1], weight.shape[0])
    projection.load_state_dict({"weight": weight, "bias": state["LinearTransformation.bias"]})
    if projection.out_features != image_encoder.embedding_dim:
        raise ValueError(
            f"M-CLIP text tower maps to {projection.out_features} dims but the image tower "
            f"{image_ref!r} embeds into {image_encoder.embedding_dim}: not a matching pair"
        )
    target = image_encoder.device
    transformer = transformer.to(target, image_encoder.dtype).eval()
    projection = projection.to(target, image_encoder.dtype).eval()
    revision_id = f"{resolved.revision}+{image_encoder.revision}"
    return MCLIPEncoder(transformer, projection, load_tokenizer(resolved.path, trust_remote_code), image_encoder,
                        spec=spec or f"mclip:{ref}", revision=revision_id)


__all__ = ["IMAGE_TOWERS", "MCLIPEncoder", "load_mclip"]
