"""``hf:`` backend: any transformers dual encoder with ``get_image_features``/``get_text_features``.

Covers CLIP (OpenAI and LAION checkpoints), SigLIP / SigLIP 2 (fixed resolution), AltCLIP,
ChineseCLIP and ALIGN through AutoModel, AutoTokenizer and AutoImageProcessor.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from vlfair.logging import get_logger, library_progress_bars
from vlfair.models.base import Encoder, distinct_rows, pick_device, pick_dtype
from vlfair.models.hub import ModelNotFoundError, resolve_model
from vlfair.models.preprocessing import ImagePreprocessing

logger = get_logger(__name__)

# Tokenisation each family was trained with, where it differs from "pad to the longest".
# SigLIP's text tower saw every caption padded to 64 tokens and has no attention mask, so
# shorter padding changes its embeddings.
TOKENIZATION: dict[str, dict[str, Any]] = {
    "siglip": {"padding": "max_length", "max_length": 64},
    "siglip2": {"padding": "max_length", "max_length": 64},
}
# Families trained with a pairwise sigmoid loss: probabilities are per pair, not a softmax.
SIGMOID_FAMILIES = {"siglip", "siglip2"}
_TEXT_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")


def _pooled(output: Any) -> torch.Tensor:
    """Transformers 5 returns an output object whose ``pooler_output`` is the projected embedding."""
    return output if isinstance(output, torch.Tensor) else output.pooler_output


def scale_and_bias(model: Any) -> tuple[float, float | None]:
    """The model's temperature (CLIP/SigLIP ``logit_scale``, ALIGN ``1/temperature``) and bias."""
    if hasattr(model, "logit_scale"):
        scale = float(model.logit_scale.detach().float().exp())
    elif hasattr(model, "temperature"):
        scale = 1.0 / float(model.temperature.detach().float())
    else:
        scale = 1.0
    bias = getattr(model, "logit_bias", None)
    return scale, (float(bias.detach().float().reshape(-1)[0]) if bias is not None else None)


def load_tokenizer(path: str, trust_remote_code: bool) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)


def load_image_preprocessing(path: str, trust_remote_code: bool) -> ImagePreprocessing:
    from transformers import AutoImageProcessor
    from transformers.utils import logging as hf_logging

    # The torchvision backend is optional; without it transformers falls back to the PIL one
    # (which the uint8 pipeline reproduces) and warns on every load.
    previous = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        processor = AutoImageProcessor.from_pretrained(path, trust_remote_code=trust_remote_code)
    finally:
        hf_logging.set_verbosity(previous)
    return ImagePreprocessing.from_image_processor(processor)


def load_pretrained(path: str, device: torch.device, dtype: torch.dtype, use_safetensors: bool,
                    trust_remote_code: bool, auto_class: Any = None) -> Any:
    """``from_pretrained`` with vlfair's safety and speed defaults, in eval mode on ``device``."""
    from transformers import AutoModel

    kwargs: dict[str, Any] = {"dtype": dtype}
    if use_safetensors:
        kwargs["use_safetensors"] = True
    # no attention implementation is asked for: transformers takes sdpa where a family has it, and a family
    # without it (ALIGN) refused to load on a GPU when sdpa was asked for there
    logger.debug(f"loading {path} ({dtype}, {device})")
    with library_progress_bars("transformers.utils.logging"):  # its "Loading weights" bar: --verbose only
        return (auto_class or AutoModel).from_pretrained(path, trust_remote_code=trust_remote_code,
                                                         **kwargs).to(device).eval()


class HFEncoder(Encoder):
    """A transformers dual encoder."""

    def __init__(self, model: Any, tokenizer: Any, preprocessing: ImagePreprocessing, *, spec: str,
                 revision: str | None, device: torch.device, dtype: torch.dtype):
        self.model, self.tokenizer, self.preprocessing = model, tokenizer, preprocessing
        self.spec, self.revision, self.device, self.dtype = spec, revision, device, dtype
        family = model.config.model_type
        self.family = family
        self.loss = "sigmoid" if family in SIGMOID_FAMILIES else "softmax"
        self.logit_scale, self.logit_bias = scale_and_bias(model)
        self._tokenization = {"padding": True, "truncation": True, **TOKENIZATION.get(family, {})}
        self._tokenization.setdefault("max_length", _max_text_length(model, tokenizer))
        accepted = inspect.signature(model.get_text_features).parameters
        self._text_inputs = [name for name in _TEXT_INPUTS if name in accepted]
        self.embedding_dim = int(self.text_features(["a"]).shape[-1])

    @property
    def text_settings(self) -> dict[str, Any]:
        return {"tokenizer": type(self.tokenizer).__name__, **self._tokenization}

    def image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return _pooled(self.model.get_image_features(pixel_values=pixel_values))

    @torch.inference_mode()
    def text_features(self, texts: list[str]) -> torch.Tensor:
        batch = self.tokenizer(texts, return_tensors="pt", **self._tokenization)
        names = [name for name in self._text_inputs if name in batch]
        rows, inverse = distinct_rows(*(batch[name] for name in names))
        inputs = {name: batch[name][rows].to(self.device) for name in names}
        return _pooled(self.model.get_text_features(**inputs))[inverse.to(self.device)]


def _max_text_length(model: Any, tokenizer: Any) -> int:
    text_config = getattr(model.config, "text_config", model.config)
    positions = getattr(text_config, "max_position_embeddings", None) or 512
    if getattr(text_config, "model_type", "") in ("roberta", "xlm-roberta", "altclip_text_model"):
        positions -= 2  # RoBERTa position ids start after the padding index
    limit = getattr(tokenizer, "model_max_length", None)
    return min(positions, limit) if limit and limit < 10**6 else positions


EMBEDDING_METHODS = ("get_image_features", "get_text_features")  # what a dual encoder's transformers class has


def refuse_unembedding(ref: str, path: str, trust_remote_code: bool) -> None:
    """Refuse, from its config alone (before its weights load, and transformers' load report of a class that is
    not the checkpoint's), a checkpoint whose AutoModel class embeds no images and texts; a generative
    vision-language model (one AutoModelForImageTextToText loads: LLaVA, Idefics3, Qwen2-VL) is told to be written
    ``lvlm:REF``. A config transformers cannot map (a checkpoint's own code) is left to the load."""
    from transformers import AutoConfig, AutoModel, AutoModelForImageTextToText

    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    try:
        model_class = AutoModel._model_mapping[type(config)]
    except (KeyError, ValueError):
        return
    missing = [method for method in EMBEDDING_METHODS if not hasattr(model_class, method)]
    if not missing:
        return
    if type(config) in AutoModelForImageTextToText._model_mapping:
        named = ", ".join(getattr(config, "architectures", None) or [type(config).__name__.removesuffix("Config")])
        raise ValueError(f"{ref!r} is a generative vision-language model ({named}), not an image-text dual encoder: "
                         f"write lvlm:{ref} to ask it each probe's questions")
    raise ValueError(f"{ref!r} loads as {model_class.__name__}, which has no {missing[0]}: it is not an image-text "
                     f"dual encoder (model spec prefixes: vlfair run --help)")


def load_hf(ref: str, *, device: str | torch.device = "auto", dtype: str | torch.dtype = "auto",
            revision: str | None = None, trust_remote_code: bool = False, use_safetensors: bool = True,
            spec: str | None = None) -> HFEncoder:
    """Load ``ref`` (Hub id, ``ID@REV`` or local directory) as an :class:`HFEncoder`."""
    resolved = resolve_model(ref, revision, use_safetensors=use_safetensors)
    device = pick_device(device)
    dtype = pick_dtype(dtype, device)
    refuse_unembedding(ref, resolved.path, trust_remote_code)
    try:
        model = load_pretrained(resolved.path, device, dtype, use_safetensors, trust_remote_code)
    except OSError as exc:
        raise ModelNotFoundError(f"cannot load model weights of {ref!r} from {resolved.path}: {exc}") from None
    for method in EMBEDDING_METHODS:  # a checkpoint's own class, which its config did not tell
        if not hasattr(model, method):
            raise ValueError(
                f"{ref!r} loads as {type(model).__name__}, which has no {method}: "
                "it is not an image-text dual encoder"
            )
    return HFEncoder(
        model, load_tokenizer(resolved.path, trust_remote_code),
        load_image_preprocessing(resolved.path, trust_remote_code),
        spec=spec or f"hf:{ref}", revision=resolved.revision, device=device, dtype=dtype,
    )
