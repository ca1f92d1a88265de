"""Tiny, randomly initialised checkpoints and generated images: what tests, the self-check
(`vlfair demo --selfcheck`) and the synthetic datasets build offline.

Each builder writes a complete checkpoint directory with ``save_pretrained`` (weights,
tokenizer, image processor), so loading it goes through exactly the code path a real Hub
checkpoint takes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
from PIL import Image, ImageDraw

__all__ = ["DUAL_ENCODER_BUILDERS", "SPECIAL", "WORDS", "generated_image", "llava_parts", "qwen2_vl_processor",
           "tiny_align", "tiny_altclip", "tiny_chinese_clip", "tiny_clip", "tiny_fill_mask", "tiny_gemma3",
           "tiny_idefics3", "tiny_llava", "tiny_mclip", "tiny_qwen2_vl", "tiny_siglip", "tiny_stable_diffusion",
           "word_tokenizer", "write_jpegs"]

WORDS = tuple(dict.fromkeys((  # unique and ordered: token ids must be dense
    "a photo of the an person man woman doctor nurse lawyer scientist smart dumb happy sad "
    "ein foto von einer der person arzt frau mann und with at in office gym hospital male female object "
    # the traits study's other pairs: a prompt pair the tokenizer cannot tell apart gives every image
    # a confidence of 0.5 and an undefined F, which a run refuses
    "hardworking lazy nice mean dominant agentic honest dishonest"
).split()))
SPECIAL = ["[PAD]", "[UNK]", "<bos>", "<eos>"]


def word_tokenizer(model_max_length: int = 32, extra_words: list[str] | None = None) -> Any:
    """A lower-casing word-level tokenizer that wraps every text in <bos> ... <eos>."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(dict.fromkeys([*SPECIAL, *WORDS, *(extra_words or [])]))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>", special_tokens=[("<bos>", vocab["<bos>"]), ("<eos>", vocab["<eos>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]", bos_token="<bos>", eos_token="<eos>",
        model_max_length=model_max_length,
    )


def _tower(hidden: int, layers: int, **extra: Any) -> dict[str, Any]:
    return {"hidden_size": hidden, "intermediate_size": 2 * hidden, "num_hidden_layers": layers,
            "num_attention_heads": 2, **extra}


class _TokenIds(TypedDict):
    pad_token_id: int
    bos_token_id: int
    eos_token_id: int


def _ids(tokenizer: Any) -> _TokenIds:
    return {"pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id}


def tiny_clip(path: str | Path, *, image_size: int = 64, patch_size: int = 16, hidden: int = 32,
              projection_dim: int = 16, layers: int = 2, seed: int = 0) -> Path:
    """A CLIPModel with OpenAI CLIP's preprocessing at ``image_size``, saved to ``path``."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    tokenizer = word_tokenizer()
    config = CLIPConfig(
        text_config=_tower(hidden, layers, vocab_size=len(tokenizer), max_position_embeddings=32, **_ids(tokenizer)),
        vision_config=_tower(hidden, layers, image_size=image_size, patch_size=patch_size),
        projection_dim=projection_dim,
    )
    torch.manual_seed(seed)
    CLIPModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    CLIPImageProcessor(size={"shortest_edge": image_size},
                       crop_size={"height": image_size, "width": image_size}).save_pretrained(path)
    return Path(path)


def tiny_siglip(path: str | Path, *, image_size: int = 48, patch_size: int = 16, hidden: int = 32,
                layers: int = 2, seed: int = 0) -> Path:
    """A SiglipModel (sigmoid loss, learned logit bias) with SigLIP preprocessing."""
    import torch
    from transformers import SiglipConfig, SiglipImageProcessor, SiglipModel

    tokenizer = word_tokenizer(model_max_length=64)
    config = SiglipConfig(
        text_config=_tower(hidden, layers, vocab_size=len(tokenizer), max_position_embeddings=64, **_ids(tokenizer)),
        vision_config=_tower(hidden, layers, image_size=image_size, patch_size=patch_size),
    )
    torch.manual_seed(seed)
    model = SiglipModel(config)
    with torch.no_grad():  # non-trivial temperature and bias, so tests can tell them apart
        model.logit_scale.fill_(np.log(10.0))
        model.logit_bias.fill_(-3.0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    SiglipImageProcessor(size={"height": image_size, "width": image_size}).save_pretrained(path)
    return Path(path)


def _save(model_class: Any, config: Any, processor: Any, tokenizer: Any, path: str | Path, seed: int,
          prepare: Any = None) -> Path:
    import torch

    torch.manual_seed(seed)
    model = model_class(config)
    if prepare is not None:
        prepare(model)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    processor.save_pretrained(path)
    return Path(path)


def tiny_altclip(path: str | Path, *, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """An AltCLIPModel (XLM-R text tower) with CLIP preprocessing at 32 px."""
    from transformers import AltCLIPConfig, AltCLIPModel, CLIPImageProcessor

    tokenizer = word_tokenizer()
    config = AltCLIPConfig(
        text_config=_tower(hidden, layers, vocab_size=len(tokenizer), max_position_embeddings=40, project_dim=16,
                           type_vocab_size=1, **_ids(tokenizer)),
        vision_config=_tower(hidden, layers, image_size=32, patch_size=16), projection_dim=16,
    )
    processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    return _save(AltCLIPModel, config, processor, tokenizer, path, seed)


def tiny_chinese_clip(path: str | Path, *, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """A ChineseCLIPModel (BERT text tower) with its own square-resize preprocessing."""
    from transformers import ChineseCLIPConfig, ChineseCLIPImageProcessor, ChineseCLIPModel

    tokenizer = word_tokenizer()
    config = ChineseCLIPConfig(
        text_config=_tower(hidden, layers, vocab_size=len(tokenizer), max_position_embeddings=40, **_ids(tokenizer)),
        vision_config=_tower(hidden, layers, image_size=32, patch_size=16), projection_dim=16,
    )
    processor = ChineseCLIPImageProcessor(size={"height": 32, "width": 32}, crop_size={"height": 32, "width": 32})
    return _save(ChineseCLIPModel, config, processor, tokenizer, path, seed)


def tiny_align(path: str | Path, *, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """An AlignModel (EfficientNet image tower, BERT text tower, learned temperature)."""
    from transformers import AlignConfig, AlignModel, EfficientNetImageProcessor

    tokenizer = word_tokenizer()
    vision = {"image_size": 32, "hidden_dim": 128, "width_coefficient": 0.25, "depth_coefficient": 0.25}
    config = AlignConfig(
        text_config=_tower(hidden, layers, vocab_size=len(tokenizer), max_position_embeddings=40, **_ids(tokenizer)),
        vision_config=vision, projection_dim=80,  # = the scaled EfficientNet's pooled width
    )
    processor = EfficientNetImageProcessor(size={"height": 40, "width": 40}, crop_size={"height": 32, "width": 32},
                                           do_center_crop=True, rescale_offset=True, rescale_factor=1 / 127.5)
    return _save(AlignModel, config, processor, tokenizer, path, seed, prepare=_kaiming_convs)


def _kaiming_convs(model: Any) -> None:
    """ALIGN's default init (std 0.02) shrinks activations through the EfficientNet to ~1e-27,
    whose norm underflows in float32; He initialisation keeps them of order one."""
    import torch

    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(module.weight, nonlinearity="relu")


def tiny_stable_diffusion(path: str | Path, *, seed: int = 0) -> Path:
    """A StableDiffusionPipeline (UNet, VAE, CLIP text encoder) small enough for CPU tests (32x32)."""
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    tokenizer = word_tokenizer(model_max_length=16)
    torch.manual_seed(seed)
    text = CLIPTextModel(CLIPTextConfig(vocab_size=len(tokenizer), max_position_embeddings=16, **_tower(32, 2),
                                        **_ids(tokenizer)))
    unet = UNet2DConditionModel(sample_size=4, in_channels=4, out_channels=4, layers_per_block=1,
                                block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                                attention_head_dim=8, norm_num_groups=8)
    vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 4,
                        up_block_types=("UpDecoderBlock2D",) * 4, block_out_channels=(8, 8, 16, 16), latent_channels=4,
                        layers_per_block=1, norm_num_groups=4, sample_size=32)
    pipeline = StableDiffusionPipeline(vae=vae, text_encoder=text, tokenizer=tokenizer, unet=unet,
                                       scheduler=DDIMScheduler(clip_sample=False, steps_offset=1), safety_checker=None,
                                       feature_extractor=None, requires_safety_checker=False)
    pipeline.save_pretrained(path)
    return Path(path)


def tiny_fill_mask(path: str | Path, *, seed: int = 0) -> Path:
    """A BertForMaskedLM whose vocabulary also holds subword pieces and punctuation (to be skipped)."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens = dict.fromkeys([*special, *WORDS, "##ing", "##s", ",", ".", "!", "surgeon", "clinic", "teacher"])
    vocab = {t: i for i, t in enumerate(tokens)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                        sep_token="[SEP]", mask_token="[MASK]", model_max_length=32)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), max_position_embeddings=32, **_tower(32, 2))
    BertForMaskedLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return Path(path)


# transformers model_type -> builder of a tiny checkpoint of that family
DUAL_ENCODER_BUILDERS = {
    "clip": lambda path: tiny_clip(path),
    "siglip": lambda path: tiny_siglip(path),
    "altclip": tiny_altclip,
    "chinese_clip": tiny_chinese_clip,
    "align": tiny_align,
}


def tiny_mclip(path: str | Path, *, projection_dim: int = 16, hidden: int = 24, layers: int = 2,
               seed: int = 0, safetensors: bool = True) -> Path:
    """An M-CLIP-layout text tower: ``transformer.*`` (XLM-R) + ``LinearTransformation.*``.

    Like the published checkpoints, config.json has ``model_type: M-CLIP`` and names the text
    architecture in ``modelBase`` (here a sibling directory holding an XLM-R config).
    """
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaModel

    path = Path(path)
    base = path.parent / f"{path.name}-base"
    tokenizer = word_tokenizer(model_max_length=30)
    text_config = XLMRobertaConfig(vocab_size=len(tokenizer), max_position_embeddings=34, type_vocab_size=1,
                                   **_tower(hidden, layers), **_ids(tokenizer))
    text_config.save_pretrained(base)
    torch.manual_seed(seed)
    transformer = XLMRobertaModel(text_config)
    linear = torch.nn.Linear(hidden, projection_dim)
    state = {f"transformer.{k}": v.contiguous() for k, v in transformer.state_dict().items()}
    state.update({"LinearTransformation.weight": linear.weight.data, "LinearTransformation.bias": linear.bias.data})
    path.mkdir(parents=True, exist_ok=True)
    if safetensors:
        from safetensors.torch import save_file

        save_file(state, str(path / "model.safetensors"))
    else:
        torch.save(state, path / "pytorch_model.bin")
    config = {"model_type": "M-CLIP", "architectures": ["MultilingualCLIP"], "modelBase": str(base),
              "transformerDimSize": hidden, "imageDimSize": projection_dim}
    (path / "config.json").write_text(json.dumps(config, indent=2))
    tokenizer.save_pretrained(path)
    return path


# A chat template in the form of LLaVA-1.5's ("USER: <image> question ASSISTANT: answer"), read by
# the processor's apply_chat_template exactly as a real checkpoint's is.
LLAVA_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'user' %}USER: {% for c in message['content'] %}"
    "{% if c['type'] == 'image' %}<image> {% else %}{{ c['text'] }} {% endif %}{% endfor %}"
    "{% else %}ASSISTANT: {% for c in message['content'] %}{{ c['text'] }} {% endfor %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}")
CHAT_WORDS = ("<image>", "USER:", "ASSISTANT:", "?", ".", ",", "is", "this", "or", "what", "who", "none", "these",
              "which", "does", "job", "have", "their", "occupation")


def tiny_llava(path: str | Path, *, image_size: int = 32, patch_size: int = 16, hidden: int = 32, layers: int = 2,
               seed: int = 0, heads: int = 2, positions: int = 256) -> Path:
    """A LlavaForConditionalGeneration (a CLIP vision tower, a projector, a Llama decoder) with a
    word-level tokenizer, an image token and a chat template, as ``AutoModelForImageTextToText`` and
    ``AutoProcessor`` load a real LLaVA checkpoint. ``heads`` and ``positions`` (the decoder's context) let a
    benchmark build the architecture at a real model's size (hidden 2048, 24 layers, 336 px: 1.8 B parameters)."""
    model, processor = llava_parts(image_size=image_size, patch_size=patch_size, hidden=hidden, layers=layers,
                                   heads=heads, positions=positions, seed=seed)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return Path(path)


def llava_parts(words: list[str] | None = None, *, image_size: int = 32, patch_size: int = 16, hidden: int = 32,
                layers: int = 2, heads: int = 2, positions: int = 256, seed: int = 0) -> tuple[Any, Any]:
    """A randomly initialised tiny LLaVA and its processor (the chat words, ``words`` and the tiny
    vocabulary as its word-level tokens), unsaved: :func:`tiny_llava` saves one, the demo world trains one."""
    import torch
    from transformers import (
        CLIPImageProcessorPil,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    tokenizer = _word_level([*CHAT_WORDS[1:], *(words or [])], "<eos>", {"image_token": "<image>"})
    tower = {**_tower(hidden, layers), "num_attention_heads": heads}
    vision = CLIPVisionConfig(**tower, image_size=image_size, patch_size=patch_size)
    text = LlamaConfig(vocab_size=len(tokenizer), max_position_embeddings=positions, num_key_value_heads=heads,
                       **tower, **_ids(tokenizer))
    config = LlavaConfig(vision_config=vision, text_config=text,
                         image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
                         vision_feature_layer=-1, vision_feature_select_strategy="default")
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": image_size},
                                            crop_size={"height": image_size, "width": image_size})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, chat_template=LLAVA_CHAT_TEMPLATE,
                               patch_size=patch_size, vision_feature_select_strategy="default",
                               num_additional_image_tokens=1)
    return model, processor


def _word_level(words: list[str], eos: str, specials: dict[str, str]) -> Any:
    """A whitespace word-level tokenizer whose ``specials`` (name -> token) match inside any text."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(dict.fromkeys([*SPECIAL, *specials.values(), *words, *WORDS]))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]",
                                        bos_token="<bos>", eos_token=eos, extra_special_tokens=specials)
    tokenizer.add_special_tokens({"additional_special_tokens": list(specials.values())})
    return tokenizer


# SmolVLM / Idefics3's form: "<bos>User: <image> question <end_of_utterance> Assistant: answer"
IDEFICS3_CHAT_TEMPLATE = (
    "<bos>{% for message in messages %}{{ message['role'] | capitalize }}:{% for c in message['content'] %}"
    "{% if c['type'] == 'image' %} <image>{% else %} {{ c['text'] }}{% endif %}{% endfor %} <end_of_utterance> "
    "{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}")


def tiny_idefics3(path: str | Path, *, image_size: int = 32, patch_size: int = 8, hidden: int = 32, layers: int = 2,
                  seed: int = 0) -> Path:
    """An Idefics3ForConditionalGeneration (SmolVLM's architecture: a SigLIP-style vision tower, a
    pixel-shuffle connector, a Llama decoder), one image tile, with its processor and chat template."""
    import torch
    from transformers import (
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3ImageProcessorPil,
        Idefics3Processor,
    )

    specials = {"image_token": "<image>", "fake_image_token": "<fake_token_around_image>",
                "global_image_token": "<global-img>", "end_of_utterance_token": "<end_of_utterance>"}
    tokenizer = _word_level(["User:", "Assistant:", *CHAT_WORDS[3:]], "<end_of_utterance>", specials)
    vision = _tower(hidden, layers, image_size=image_size, patch_size=patch_size)
    text = {"model_type": "llama", "vocab_size": len(tokenizer), "max_position_embeddings": 256,
            "num_key_value_heads": 2, **_tower(hidden, layers), **_ids(tokenizer)}
    config = Idefics3Config(vision_config=vision, text_config=text, scale_factor=2,
                            image_token_id=tokenizer.convert_tokens_to_ids("<image>"))
    torch.manual_seed(seed)
    Idefics3ForConditionalGeneration(config).save_pretrained(path)
    image_processor = Idefics3ImageProcessorPil(do_image_splitting=False, size={"longest_edge": image_size},
                                                max_image_size={"longest_edge": image_size})
    tokens_per_image = (image_size // patch_size // 2) ** 2  # the connector merges 2 x 2 patches
    Idefics3Processor(image_processor=image_processor, tokenizer=tokenizer, chat_template=IDEFICS3_CHAT_TEMPLATE,
                      image_seq_len=tokens_per_image).save_pretrained(path)
    return Path(path)


# Gemma 3's form: "<bos><start_of_turn>user\n<start_of_image> question<end_of_turn>\n<start_of_turn>model\n"
GEMMA3_CHAT_TEMPLATE = (
    "<bos>{% for message in messages %}<start_of_turn> {{ 'model' if message['role'] == 'assistant' else "
    "message['role'] }} {% for c in message['content'] %}{% if c['type'] == 'image' %}<start_of_image> "
    "{% else %}{{ c['text'] }} {% endif %}{% endfor %}<end_of_turn> {% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn> model{% endif %}")


def tiny_gemma3(path: str | Path, *, image_size: int = 32, patch_size: int = 8, hidden: int = 32, layers: int = 2,
                seed: int = 0) -> Path:
    """A Gemma3ForConditionalGeneration (a SigLIP vision tower, an average-pooling projector, a Gemma 3
    decoder) with its processor: image tokens between <start_of_image> and <end_of_image>."""
    import torch
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3ImageProcessorPil, Gemma3Processor

    specials = {"image_token": "<image_soft_token>", "boi_token": "<start_of_image>", "eoi_token": "<end_of_image>"}
    tokenizer = _word_level(["<start_of_turn>", "<end_of_turn>", "user", "model", *CHAT_WORDS[3:]], "<eos>",
                            specials)
    tokens_per_image = (image_size // patch_size // 2) ** 2  # pooled 2 x 2
    text = {"vocab_size": len(tokenizer), "max_position_embeddings": 256, "num_key_value_heads": 2, "head_dim": 16,
            "sliding_window": 64, **_tower(hidden, layers), **_ids(tokenizer)}
    config = Gemma3Config(text_config=text, vision_config=_tower(hidden, layers, image_size=image_size,
                                                                 patch_size=patch_size),
                          mm_tokens_per_image=tokens_per_image,
                          image_token_index=tokenizer.convert_tokens_to_ids("<image_soft_token>"),
                          boi_token_index=tokenizer.convert_tokens_to_ids("<start_of_image>"),
                          eoi_token_index=tokenizer.convert_tokens_to_ids("<end_of_image>"))
    torch.manual_seed(seed)
    model = Gemma3ForConditionalGeneration(config)
    with torch.no_grad():  # transformers initialises the projection at zero: random weights should see the image
        model.model.multi_modal_projector.mm_input_projection_weight.normal_(0.0, 0.5)
    model.save_pretrained(path)
    image_processor = Gemma3ImageProcessorPil(size={"height": image_size, "width": image_size})
    Gemma3Processor(image_processor=image_processor, tokenizer=tokenizer, chat_template=GEMMA3_CHAT_TEMPLATE,
                    image_seq_length=tokens_per_image).save_pretrained(path)
    return Path(path)


# Qwen2-VL's form: "<|im_start|> user <|vision_start|> <|image_pad|> <|vision_end|> question <|im_end|> ..."
QWEN2_VL_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|> {{ message['role'] }} {% for c in message['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|> <|image_pad|> <|vision_end|> {% else %}{{ c['text'] }} {% endif %}"
    "{% endfor %}<|im_end|> {% endfor %}{% if add_generation_prompt %}<|im_start|> assistant{% endif %}")


def tiny_qwen2_vl(path: str | Path, *, image_size: int = 32, patch_size: int = 8, hidden: int = 32, layers: int = 2,
                  seed: int = 0) -> Path:
    """A Qwen2VLForConditionalGeneration (a vision transformer over 2 x 2-merged patches, a Qwen2
    decoder with multimodal rotary positions, M-RoPE), with its tokenizer, image processor and chat
    template saved beside it; :func:`qwen2_vl_processor` loads the processor.

    Qwen2-VL's processor holds a video processor too, and transformers builds that one on
    torchvision, which vlfair does not depend on (the registry's build does not match the CPU torch):
    without it ``AutoProcessor`` cannot load the processor, so the parts for images are saved and put
    together by hand.
    """
    import torch
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessorPil

    specials = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                "vision_start_token": "<|vision_start|>", "vision_end_token": "<|vision_end|>"}
    tokenizer = _word_level(["<|im_start|>", "<|im_end|>", "user", "assistant", *CHAT_WORDS[3:]], "<|im_end|>",
                            specials)
    heads = 2
    # M-RoPE splits each head's rotary frequencies over time, height and width (half the head's size)
    rope = {"rope_type": "default", "mrope_section": [2, 2, hidden // heads // 2 - 4]}
    text = {"vocab_size": len(tokenizer), "max_position_embeddings": 256, "num_key_value_heads": heads,
            "rope_scaling": rope, **_tower(hidden, layers), **_ids(tokenizer)}
    vision = {"depth": layers, "embed_dim": hidden, "hidden_size": hidden, "num_heads": heads,
              "patch_size": patch_size, "spatial_merge_size": 2, "temporal_patch_size": 2}
    ids = {name.replace("_token", "_token_id"): tokenizer.convert_tokens_to_ids(token)
           for name, token in specials.items()}
    config = Qwen2VLConfig(text_config=text, vision_config=vision, **ids)
    torch.manual_seed(seed)
    Qwen2VLForConditionalGeneration(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    pixels = image_size * image_size  # one image becomes (image_size / patch_size / 2) ** 2 tokens
    Qwen2VLImageProcessorPil(min_pixels=pixels, max_pixels=pixels, patch_size=patch_size, merge_size=2,
                             temporal_patch_size=2).save_pretrained(path)
    (Path(path) / "chat_template.jinja").write_text(QWEN2_VL_CHAT_TEMPLATE)
    return Path(path)


def qwen2_vl_processor(path: str | Path) -> Any:
    """The processor of a :func:`tiny_qwen2_vl` checkpoint: Qwen2-VL's own processor class, built from the
    saved tokenizer, image processor and chat template, without the video processor (torchvision)."""
    from transformers import AutoTokenizer, Qwen2VLImageProcessorPil, Qwen2VLProcessor

    class ImagesOnlyQwen2VLProcessor(Qwen2VLProcessor):
        def check_argument_for_proper_class(self, argument_name: str, argument: Any) -> Any:
            if argument_name == "video_processor" and argument is None:  # no video: nothing to check
                return None
            return super().check_argument_for_proper_class(argument_name, argument)

    return ImagesOnlyQwen2VLProcessor(image_processor=Qwen2VLImageProcessorPil.from_pretrained(path),
                                      tokenizer=AutoTokenizer.from_pretrained(path, trust_remote_code=False),
                                      video_processor=None,
                                      chat_template=(Path(path) / "chat_template.jinja").read_text())


def generated_image(index: int, size: tuple[int, int] = (96, 80), seed: int = 0) -> Image.Image:
    """A deterministic RGB image with random coloured shapes; different for every index."""
    rng = np.random.default_rng([seed, index])
    image = Image.new("RGB", size, tuple(int(c) for c in rng.integers(0, 256, 3)))
    draw = ImageDraw.Draw(image)
    for _ in range(4):
        x0, y0 = rng.integers(0, size[0] - 8), rng.integers(0, size[1] - 8)
        x1, y1 = x0 + rng.integers(8, size[0]), y0 + rng.integers(8, size[1])
        draw.ellipse([int(x0), int(y0), int(x1), int(y1)], fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
    return image


def write_jpegs(directory: str | Path, count: int, size: tuple[int, int] = (96, 80), seed: int = 0,
                quality: int = 90) -> list[Path]:
    """Write ``count`` generated JPEGs named 00000.jpg, 00001.jpg, ...; returns their paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = directory / f"{i:05d}.jpg"
        generated_image(i, size, seed).save(path, quality=quality)
        paths.append(path)
    return paths
