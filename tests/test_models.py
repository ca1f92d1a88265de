"""Encoders: every backend agrees with a direct transformers computation, and loading is safe.

Tolerance: 1e-5 max abs difference on L2-normalised float32 embeddings (the only differences
are float rounding in normalisation and batched matmuls; observed values are ~3e-7). The references
resize with PIL, as vlfair does: where torchvision is installed (a GPU machine's torch), transformers'
default image processors resize with torch instead, which moved a tiny CLIP's embeddings by 1.8e-5.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import transformers
from PIL import Image
from transformers import (
    AutoTokenizer,
    CLIPImageProcessorPil,
    CLIPModel,
    SiglipImageProcessorPil,
    SiglipModel,
    XLMRobertaConfig,
    XLMRobertaModel,
)

import vlfair
from vlfair import testing
from vlfair.models import BACKENDS, ModelNotFoundError, parse_spec
from vlfair.models.hub import split_revision

import forking

TOL = 1e-5
PROMPTS = ["a photo of a doctor", "a nurse", "ein foto von einer frau", "smart person at the office"]


def _unit(x: torch.Tensor) -> np.ndarray:
    x = x.float()
    return (x / x.norm(dim=-1, keepdim=True)).numpy()


def _images(count: int = 5) -> list[Image.Image]:
    return [testing.generated_image(i, size=(90 + 13 * i, 70 + 5 * i)) for i in range(count)]


def _reference_images(model, processor, images) -> np.ndarray:
    with torch.inference_mode():
        return np.concatenate([
            _unit(model.get_image_features(
                pixel_values=processor(images=image, return_tensors="pt")["pixel_values"]).pooler_output)
            for image in images
        ])


def _reference_texts(model, tokenizer, texts, **tokenize) -> np.ndarray:
    with torch.inference_mode():
        return np.concatenate([
            _unit(model.get_text_features(**tokenizer([text], return_tensors="pt", **tokenize)).pooler_output)
            for text in texts
        ])


def test_clip_matches_transformers_per_item(clip_dir):
    encoder = vlfair.load_encoder(f"hf:{clip_dir}", dtype="float32")
    model, processor = CLIPModel.from_pretrained(clip_dir).eval(), CLIPImageProcessorPil.from_pretrained(clip_dir)
    tokenizer = AutoTokenizer.from_pretrained(clip_dir)
    images = _images()
    np.testing.assert_allclose(encoder.encode_images(images), _reference_images(model, processor, images), atol=TOL)
    np.testing.assert_allclose(encoder.encode_texts(PROMPTS), _reference_texts(model, tokenizer, PROMPTS), atol=TOL)
    assert encoder.loss == "softmax" and encoder.logit_bias is None
    assert encoder.logit_scale == pytest.approx(float(model.logit_scale.detach().exp()))
    assert encoder.embedding_dim == model.config.projection_dim == 16
    assert encoder.revision.startswith("local-")
    assert encoder.preprocessing.crop == (64, 64) and encoder.preprocessing.resize == "shortest_edge"


def test_clip_logits_and_probabilities_match_model_forward(clip_encoder, clip_dir):
    model, processor = CLIPModel.from_pretrained(clip_dir).eval(), CLIPImageProcessorPil.from_pretrained(clip_dir)
    tokenizer = AutoTokenizer.from_pretrained(clip_dir)
    images = _images(3)
    with torch.inference_mode():
        out = model(pixel_values=processor(images=images, return_tensors="pt")["pixel_values"],
                    **tokenizer(PROMPTS, padding=True, return_tensors="pt"))
    logits = clip_encoder.logits(clip_encoder.encode_images(images), clip_encoder.encode_texts(PROMPTS))
    np.testing.assert_allclose(logits, out.logits_per_image.numpy(), atol=1e-4)
    probs = clip_encoder.probabilities(clip_encoder.encode_images(images), clip_encoder.encode_texts(PROMPTS))
    np.testing.assert_allclose(probs, out.logits_per_image.softmax(-1).numpy(), atol=1e-5)


def test_siglip_matches_transformers_and_uses_sigmoid(siglip_dir):
    encoder = vlfair.load_encoder(str(siglip_dir), dtype="float32")
    model = SiglipModel.from_pretrained(siglip_dir).eval()
    processor = SiglipImageProcessorPil.from_pretrained(siglip_dir)
    tokenizer = AutoTokenizer.from_pretrained(siglip_dir)
    images = _images(4)
    np.testing.assert_allclose(encoder.encode_images(images), _reference_images(model, processor, images), atol=TOL)
    texts = _reference_texts(model, tokenizer, PROMPTS, padding="max_length", max_length=64)
    np.testing.assert_allclose(encoder.encode_texts(PROMPTS), texts, atol=TOL)
    assert encoder.loss == "sigmoid"
    assert encoder.logit_scale == pytest.approx(10.0) and encoder.logit_bias == pytest.approx(-3.0)
    with torch.inference_mode():
        out = model(pixel_values=processor(images=images, return_tensors="pt")["pixel_values"],
                    **tokenizer(PROMPTS, padding="max_length", max_length=64, return_tensors="pt"))
    probs = encoder.probabilities(encoder.encode_images(images), encoder.encode_texts(PROMPTS))
    np.testing.assert_allclose(probs, torch.sigmoid(out.logits_per_image).numpy(), atol=1e-5)
    assert not np.allclose(probs.sum(axis=1), 1.0)  # independent per pair, not a softmax


def _mclip_reference(mclip_dir: Path, texts: list[str]) -> np.ndarray:
    """M-CLIP's published forward: mean-pool the XLM-R states over the mask, then the linear map."""
    from safetensors.torch import load_file

    config = json.loads((mclip_dir / "config.json").read_text())
    state = load_file(str(mclip_dir / "model.safetensors"))
    transformer = XLMRobertaModel(XLMRobertaConfig.from_pretrained(config["modelBase"])).eval()
    transformer.load_state_dict({k[len("transformer."):]: v for k, v in state.items() if k.startswith("transformer.")},
                                strict=False)
    linear = torch.nn.Linear(config["transformerDimSize"], config["imageDimSize"])
    linear.load_state_dict({"weight": state["LinearTransformation.weight"], "bias": state["LinearTransformation.bias"]})
    tokenizer = AutoTokenizer.from_pretrained(mclip_dir)
    rows = []
    with torch.inference_mode():
        for text in texts:
            batch = tokenizer([text], return_tensors="pt")
            hidden = transformer(**batch)[0]
            mask = batch["attention_mask"].unsqueeze(-1).float()
            rows.append(_unit(linear((hidden * mask).sum(1) / mask.sum(1))))
    return np.concatenate(rows)


def test_mclip_text_tower_matches_reference_and_image_tower_is_clip(mclip_dir, clip_dir, clip_encoder):
    encoder = vlfair.load_encoder(f"mclip:{mclip_dir}+{clip_dir}", dtype="float32")
    np.testing.assert_allclose(encoder.encode_texts(PROMPTS), _mclip_reference(mclip_dir, PROMPTS), atol=TOL)
    images = _images(3)
    np.testing.assert_allclose(encoder.encode_images(images), clip_encoder.encode_images(images), atol=TOL)
    assert encoder.embedding_dim == 16 and encoder.logit_scale == pytest.approx(clip_encoder.logit_scale)
    assert encoder.preprocessing == clip_encoder.preprocessing
    assert "+" in encoder.revision  # both towers' versions are part of the cache key


def test_mclip_pickled_weights_need_explicit_opt_in(models_dir, clip_dir):
    pickled = testing.tiny_mclip(models_dir / "tiny-mclip-bin", safetensors=False)
    with pytest.raises(ModelNotFoundError, match="use_safetensors=False"):
        vlfair.load_encoder(f"mclip:{pickled}+{clip_dir}")
    encoder = vlfair.load_encoder(f"mclip:{pickled}+{clip_dir}", use_safetensors=False)
    assert encoder.encode_texts(["a nurse"]).shape == (1, 16)


@pytest.mark.parametrize("kind", ["clip", "lvlm"])
def test_a_checkpoint_of_pickled_weights_only_is_refused_naming_the_way_to_load_it(tmp_path, clip_dir, capsys, kind):
    """Issue 43, UNCLEAR: vlfair's one line with use_safetensors=False, not transformers' own refusal."""
    from vlfair.cli import main

    if kind == "clip":
        model = transformers.CLIPModel.from_pretrained(clip_dir)
        source, spec = clip_dir, str(tmp_path / "pickled")
    else:
        source = testing.tiny_llava(tmp_path / "llava")
        model = transformers.LlavaForConditionalGeneration.from_pretrained(source)
        spec = f"lvlm:{tmp_path / 'pickled'}"
    pickled = tmp_path / "pickled"
    shutil.copytree(source, pickled, ignore=shutil.ignore_patterns("*.safetensors"))
    torch.save(model.state_dict(), pickled / "pytorch_model.bin")
    capsys.readouterr()  # (transformers' bars of the loads above)
    code = main(["run", "traits", "--model", spec, "--dataset", "synthetic:fairface", "--out", str(tmp_path / "out")])
    error = capsys.readouterr().err.strip()
    assert code == 2 and len(error.splitlines()) == 1 and error.startswith("vlfair run: ")
    assert (f"{pickled} has only pickled PyTorch weights (pytorch_model.bin)" in error
            and "use_safetensors=False" in error)


def test_mclip_errors_name_the_problem(mclip_dir, clip_dir, siglip_dir):
    with pytest.raises(ValueError, match="no known CLIP image tower.*mclip:.*\\+IMAGE_ID"):
        vlfair.load_encoder(f"mclip:{mclip_dir}")
    with pytest.raises(ValueError, match="not an M-CLIP checkpoint"):
        vlfair.load_encoder(f"mclip:{clip_dir}+{clip_dir}")
    with pytest.raises(ValueError, match="maps to 16 dims.*embeds into 32"):
        vlfair.load_encoder(f"mclip:{mclip_dir}+{siglip_dir}")


def test_unknown_prefix_lists_registered_prefixes():
    with pytest.raises(ValueError) as info:
        vlfair.load_encoder("openclip:ViT-B-32")
    message = str(info.value)
    assert "'openclip'" in message and all(f"{prefix}:" in message for prefix in BACKENDS)


def test_spec_parsing(clip_dir):
    assert parse_spec("openai/clip-vit-base-patch32") == ("hf", "openai/clip-vit-base-patch32")
    assert parse_spec("hf:google/siglip-base-patch16-224@main") == ("hf", "google/siglip-base-patch16-224@main")
    assert parse_spec("mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32") == ("mclip", "M-CLIP/XLM-Roberta-Large-Vit-B-32")
    assert parse_spec(str(clip_dir)) == ("hf", str(clip_dir))
    assert split_revision("org/name@abc123") == ("org/name", "abc123")
    assert split_revision("org/name", "v1") == ("org/name", "v1")
    with pytest.raises(ValueError, match="revision given twice"):
        split_revision("org/name@a", "b")
    with pytest.raises(ValueError, match="non-empty"):
        parse_spec("")
    with pytest.raises(ValueError, match="a revision .* applies only to Hub ids"):
        vlfair.load_encoder(str(clip_dir), revision="abc")


def test_missing_local_directory_is_named():
    with pytest.raises(ModelNotFoundError, match="model directory './no/such/dir' does not exist"):
        vlfair.load_encoder("./no/such/dir")


def test_offline_uncached_model_error_says_exactly_that(tmp_path):
    code = "import vlfair; vlfair.load_encoder('openai/clip-vit-base-patch32@main')"
    status, _, err = forking.run(tmp_path, forking.python, code, env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)})
    assert status != 0
    assert "ModelNotFoundError: model 'openai/clip-vit-base-patch32@main' is not a local directory and is not in " \
           "the local Hub cache" in err
    assert "the Hub is offline (HF_HUB_OFFLINE=1)" in err


def test_hub_cache_snapshot_loads_offline_with_its_commit_as_revision(tmp_path, clip_dir):
    """A model in the local Hub cache layout loads offline; the commit hash is its revision."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    _fake_hub_repo(tmp_path / "hub", "acme/tiny-clip", clip_dir, commit)
    code = ("import vlfair; e = vlfair.load_encoder('hf:acme/tiny-clip'); print(e.revision); "
            "print(vlfair.load_encoder('acme/tiny-clip@main').revision)")
    status, out, err = forking.run(tmp_path, forking.python, code,
                                   env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")})
    assert status == 0, err
    assert out.split() == [commit, commit]


def test_not_a_dual_encoder_is_rejected(tmp_path):
    config = XLMRobertaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                              intermediate_size=32)
    XLMRobertaModel(config).save_pretrained(tmp_path / "text-only")
    with pytest.raises(ValueError, match="has no get_image_features: it is not an image-text dual encoder"):
        vlfair.load_encoder(str(tmp_path / "text-only"))


def test_trust_remote_code_only_when_passed(clip_dir, monkeypatch):
    import transformers

    seen = []
    original = transformers.AutoModel.from_pretrained

    def spy(*args, **kwargs):
        seen.append((kwargs["trust_remote_code"], kwargs.get("use_safetensors")))
        return original(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", spy)
    vlfair.load_encoder(str(clip_dir))
    vlfair.load_encoder(str(clip_dir), trust_remote_code=True)
    assert seen == [(False, True), (True, True)]


def test_an_encoder_s_own_code_is_refused_in_one_line_naming_the_model(tmp_path, clip_dir, monkeypatch):
    """A checkpoint whose config names its own code: without trust_remote_code=True vlfair refuses it in one
    line (not transformers' three, which show a local folder as an https://hf.co/ link), asking no one."""
    import io

    ran = tmp_path / "the-checkpoint-s-code-ran"
    custom = testing.checkpoint_with_its_own_code(clip_dir, tmp_path / "custom-clip", ran, "AutoModel")
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n" * 10))
    with pytest.raises(ValueError) as refused:
        vlfair.load_encoder(str(custom))
    assert str(refused.value) == (f"model '{custom}' ships Python code of its own (its config names it in auto_map); "
                                  "vlfair runs it only when asked: vlfair.load_encoder(..., trust_remote_code=True)")
    assert not ran.exists()


def _swap_keeping_times(weights, other, how: str) -> None:
    """``other``'s bytes put in ``weights``' place, its times set back as ``cp -p`` or ``rsync -a`` leave them."""
    before = weights.stat()
    if how == "cp -p over it":
        shutil.copy2(other, weights)
    elif how == "rsync -a (a new file renamed in)":
        staged = weights.with_name(".staged")
        shutil.copy2(other, staged)
        os.replace(staged, weights)
    else:  # written in place
        weights.write_bytes(other.read_bytes())
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert weights.stat().st_size == before.st_size and weights.stat().st_mtime_ns == before.st_mtime_ns


@pytest.mark.parametrize("how", ["cp -p over it", "rsync -a (a new file renamed in)", "written in place"])
def test_weights_swapped_with_their_times_kept_are_another_model(tmp_path, clip_dir, how):
    """Issue 43, SILENT 13: a local model's revision (and cache key) is its files' content."""
    from vlfair import testing

    copy = shutil.copytree(clip_dir, tmp_path / "clip")
    other = testing.tiny_clip(tmp_path / "other", seed=3)
    data = vlfair.load_dataset("synthetic:fairface").select(range(6))
    encoder = vlfair.load_encoder(str(copy), dtype="float32")
    first = vlfair.embed_images(encoder, data, cache_dir=tmp_path / "cache", progress=False)
    _swap_keeping_times(copy / "model.safetensors", other / "model.safetensors", how)
    swapped = vlfair.load_encoder(str(copy), dtype="float32")
    assert swapped.revision != encoder.revision
    again = vlfair.embed_images(swapped, data, cache_dir=tmp_path / "cache", progress=False)
    fresh = vlfair.embed_images(vlfair.load_encoder(str(other), dtype="float32"), data, cache_dir=None, progress=False)
    np.testing.assert_allclose(again, fresh, rtol=1e-5, atol=1e-6)  # the new weights' embeddings, not the cached ones
    assert not np.allclose(again, first)


def test_a_local_model_keeps_its_revision_when_copied_or_touched(tmp_path, clip_dir):
    before = vlfair.load_encoder(str(clip_dir)).revision
    copy = shutil.copytree(clip_dir, tmp_path / "clip")
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes())  # the same bytes written again, a new time
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))
    assert vlfair.load_encoder(str(copy)).revision == before  # same content, same model: its cache is reused


@pytest.mark.parametrize("native_bf16", [True, False])
def test_auto_dtype_is_float32_on_every_cpu_and_bf16_only_when_asked(clip_dir, monkeypatch, native_bf16):
    """Issue 62: auto picked bf16 on a CPU with AVX512-BF16 or AMX, whose traits F values came out up to 29 %
    from float32's: the instruction set chose the numbers. A CPU measures in float32 whatever it multiplies."""
    from vlfair.models import base

    monkeypatch.setattr(base, "cpu_has_native_bf16", lambda: native_bf16)
    encoder = vlfair.load_encoder(str(clip_dir), device="cpu")  # the CPU's rule, on a machine with a GPU too
    assert encoder.dtype == torch.float32
    assert next(encoder.model.parameters()).dtype == torch.float32
    assert encoder.identity()["dtype"] == "float32"
    asked = vlfair.load_encoder(str(clip_dir), device="cpu", dtype="bfloat16")  # asked for: taken as it is
    assert asked.dtype == torch.bfloat16 and next(asked.model.parameters()).dtype == torch.bfloat16
    assert asked.identity()["dtype"] == "bfloat16"


def test_the_cpu_s_bf16_is_read_from_its_flags(monkeypatch, tmp_path):
    """cpu_has_native_bf16 reads /proc/cpuinfo's flags; auto is float32 even where they say bf16."""
    from vlfair.models import base

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_bf16\n")
    assert base.cpu_has_native_bf16(str(cpuinfo)) and not base.cpu_has_native_bf16(str(tmp_path / "none"))
    flags = base.cpu_has_native_bf16
    monkeypatch.setattr(base, "cpu_has_native_bf16", lambda: flags(str(cpuinfo)))  # this machine's CPU, so flagged
    assert base.pick_dtype("auto", torch.device("cpu")) == torch.float32
    assert base.pick_dtype("bfloat16", torch.device("cpu")) == torch.bfloat16


@pytest.mark.parametrize("bf16, expected", [(True, torch.bfloat16), (False, torch.float16)])
def test_auto_dtype_on_a_gpu_is_what_it_was_and_said(monkeypatch, capsys, bf16, expected):
    """On a GPU auto keeps the half precision models are run in there (bf16, float16 without it), and says so
    in one info line: the same command measures in float32 on a CPU. A GPU is stood in for: the device path
    from pick_device("auto") on, with torch.cuda's answers."""
    from vlfair.logging import set_verbosity
    from vlfair.models.base import pick_device, pick_dtype

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: bf16)
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    set_verbosity("info")  # the CLI's level
    device = pick_device("auto")
    assert device == torch.device("cuda", 0)
    assert pick_dtype("auto", device) == expected
    name = str(expected).removeprefix("torch.")
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith(f"dtype auto on cuda:0: {name}, as models are run on a GPU")
    assert pick_dtype("float32", device) == torch.float32 and pick_dtype(torch.bfloat16, device) == torch.bfloat16
    assert capsys.readouterr().out == ""  # a dtype asked for is not said


def test_bf16_matches_transformers_in_bf16(clip_dir):
    """bf16 tolerance: 2e-2 max abs on normalised embeddings (bf16 keeps 8 mantissa bits)."""
    encoder = vlfair.load_encoder(str(clip_dir), dtype="bfloat16")
    model = CLIPModel.from_pretrained(clip_dir, dtype=torch.bfloat16).eval()
    processor, tokenizer = CLIPImageProcessorPil.from_pretrained(clip_dir), AutoTokenizer.from_pretrained(clip_dir)
    images = _images(4)
    with torch.inference_mode():
        reference = np.concatenate([_unit(model.get_image_features(
            pixel_values=processor(images=image, return_tensors="pt")["pixel_values"].bfloat16()).pooler_output)
            for image in images])
    got = encoder.encode_images(images)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, reference, atol=2e-2)
    np.testing.assert_allclose(encoder.encode_texts(PROMPTS), _reference_texts(model, tokenizer, PROMPTS), atol=2e-2)


@pytest.mark.parametrize("local_processes, local_rank", [(2, 0), (2, 1), (1, 1)])
def test_more_processes_than_gpus_is_one_sentence_on_every_process(clip_dir, tmp_path, monkeypatch, capsys,
                                                                 local_processes, local_rank):
    """torchrun --nproc_per_node 2 on a machine with one GPU: every process says why in one line (exit 2);
    the second process used to fail on 'CUDA error: invalid device ordinal', the first to wait for it."""
    from vlfair.cli import main
    from vlfair.models.base import DeviceError, pick_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_processes))
    monkeypatch.setenv("LOCAL_RANK", str(local_rank))
    with pytest.raises(DeviceError, match=r"this machine runs 2 processes of this launch but has 1 GPU: .* "
                                          r"\(torchrun --nproc_per_node 1\), or run them all on the CPU"):
        pick_device("auto")
    assert pick_device("cpu") == torch.device("cpu")  # a device asked for is taken as it is
    code = main(["run", "professions", "--model", str(clip_dir), "--dataset", "synthetic:professions",
                 "--out", str(tmp_path / "out"), "--quiet"])
    error = capsys.readouterr().err
    assert code == 2 and error.startswith("vlfair run: this machine runs 2 processes") and error.count("\n") == 1
    assert not (tmp_path / "out").exists()
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert pick_device("auto") == torch.device("cuda", 0)  # one process per GPU: its own


def test_explicit_dtypes(clip_dir):
    assert vlfair.load_encoder(str(clip_dir), dtype="float32").dtype == torch.float32
    assert vlfair.load_encoder(str(clip_dir), dtype=torch.bfloat16).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="unknown dtype 'float8'"):
        vlfair.load_encoder(str(clip_dir), dtype="float8")


@pytest.fixture
def lower_precision_set() -> Iterator[dict[str, str]]:
    with testing.lower_float32_precision() as asked:
        yield asked


def test_float32_forwards_are_ieee_float32_whatever_the_process_set(clip_dir, lower_precision_set):
    """On a GPU, cuDNN's TF32 convolutions moved a CLIP tower's float32 embeddings by ~1e-4 from the CPU's: a model
    vlfair runs in float32 computes in float32 (every switch at "ieee" while its forwards run) and leaves the
    switches as it found them; a bf16 model's forwards are left as the process set them."""
    seen = {}
    for dtype in ("float32", "bfloat16"):
        encoder = vlfair.load_encoder(str(clip_dir), dtype=dtype)
        for tower in ("image_features", "text_features"):
            forward = getattr(encoder, tower)

            def watched(*args, forward=forward, key=(dtype, tower)):
                seen[key] = testing.float32_switches()
                return forward(*args)
            setattr(encoder, tower, watched)
        encoder.encode_images(_images(2))
        encoder.encode_texts(PROMPTS[:2])
        assert testing.float32_switches() == lower_precision_set  # given back
    ieee = dict.fromkeys(lower_precision_set, "ieee")
    assert seen == {("float32", "image_features"): ieee, ("float32", "text_features"): ieee,
                    ("bfloat16", "image_features"): lower_precision_set,
                    ("bfloat16", "text_features"): lower_precision_set}


def test_grad_cam_of_a_float32_encoder_runs_in_ieee_float32(clip_dir, lower_precision_set):
    """Grad-CAM's forward and backward (vlfair.explain) follow the same rule as the embeddings."""
    from vlfair.explain import _vision, gradcam

    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    seen = []
    _vision(encoder)[1].register_forward_pre_hook(lambda *_: seen.append(testing.float32_switches()))
    text = encoder.encode_texts(PROMPTS[:2])
    gradcam(encoder, _images(2), text[0], text[1])
    assert seen == [dict.fromkeys(lower_precision_set, "ieee")]
    assert testing.float32_switches() == lower_precision_set


def test_at_torch_s_defaults_only_cudnn_s_tf32_convolutions_are_turned_off(clip_dir):
    """A switch at "none" under a process-wide "none" computes IEEE float32 already and is left as it is."""
    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    before, seen = testing.float32_switches(), []
    forward = encoder.image_features
    encoder.image_features = lambda pixels: seen.append(testing.float32_switches()) or forward(pixels)
    encoder.encode_images(_images(1))
    assert seen == [{**before, "cudnn.conv": "ieee", "cudnn.rnn": "ieee"}] and before["mkldnn.matmul"] == "none"
    assert testing.float32_switches() == before


def test_before_torch_2_9_float32_turns_off_the_two_tf32_flags_of_that_time(monkeypatch):
    """torch 2.2-2.8 have no fp32_precision switches, only cuDNN's and cuBLAS's allow_tf32 (stand-ins here: this
    torch refuses the old flags once the new switches were used in the process)."""
    from vlfair.models import precision

    monkeypatch.setattr(precision, "_switches", lambda: [])
    cudnn, matmul = SimpleNamespace(allow_tf32=True), SimpleNamespace(allow_tf32=True)
    monkeypatch.setattr(torch.backends, "cudnn", cudnn)
    monkeypatch.setattr(torch.backends.cuda, "matmul", matmul)
    with precision.ieee_float32(torch.float32):
        assert (cudnn.allow_tf32, matmul.allow_tf32) == (False, False)
    assert (cudnn.allow_tf32, matmul.allow_tf32) == (True, True)
    with precision.ieee_float32(torch.bfloat16):
        assert (cudnn.allow_tf32, matmul.allow_tf32) == (True, True)


def _fake_hub_repo(hub: Path, repo_id: str, source: Path, commit: str) -> None:
    """Lay out ``source`` as a snapshot of ``repo_id`` in a local Hub cache."""
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    shutil.copytree(source, repo / "snapshots" / commit)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)


def test_published_mclip_layout_offline_pairs_its_clip_tower(tmp_path, clip_dir):
    """The real-world path: M-CLIP repo whose config names a Hub ``modelBase`` (only its config
    is in the cache, no weights), and the default image tower chosen from the known pairs."""
    built = testing.tiny_mclip(tmp_path / "build" / "mclip")
    hub = tmp_path / "hub"
    config = json.loads((built / "config.json").read_text())
    config["modelBase"] = "acme/xlmr-base"
    (built / "config.json").write_text(json.dumps(config))
    _fake_hub_repo(hub, "M-CLIP/XLM-Roberta-Large-Vit-B-32", built, "a" * 40)
    _fake_hub_repo(hub, "acme/xlmr-base", tmp_path / "build" / "mclip-base", "b" * 40)
    _fake_hub_repo(hub, "openai/clip-vit-base-patch32", clip_dir, "c" * 40)
    code = ("import vlfair; e = vlfair.load_encoder('mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32', dtype='float32'); "
            "print(e.revision); print(e.image_encoder.spec); print(e.encode_texts(['a nurse']).shape)")
    status, out, err = forking.run(tmp_path, forking.python, code,
                                   env={"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub)})
    assert status == 0, err[-3000:]
    assert out.split() == ["a" * 40 + "+" + "c" * 40, "hf:openai/clip-vit-base-patch32", "(1,", "16)"]


def test_texts_a_tokenizer_reads_as_one_input_are_embedded_once_and_equal_bit_for_bit(clip_encoder):
    """distinct_rows keeps each distinct input's first row, in order; an encoder embeds the two Turkish prompts
    the tiny tokenizer reads as one (unknown tokens) once, so they tie exactly on every machine."""
    import torch

    from vlfair.models.base import distinct_rows

    ids = torch.tensor([[5, 1], [3, 2], [5, 1], [4, 4], [3, 2]])
    mask = torch.ones_like(ids)
    rows, inverse = distinct_rows(ids, mask)
    assert rows.tolist() == [0, 1, 3] and inverse.tolist() == [0, 1, 0, 2, 1]
    texts = ["Bu bir erkeğin fotoğrafı", "Bu bir kadının fotoğrafı", "a photo of a man"]
    batch = clip_encoder.tokenizer(texts[:2], return_tensors="pt", padding=True)
    assert torch.equal(batch["input_ids"][0], batch["input_ids"][1])  # the tiny vocabulary knows neither word
    embedded = clip_encoder.encode_texts(texts)
    assert np.array_equal(embedded[0], embedded[1]) and not np.array_equal(embedded[0], embedded[2])
