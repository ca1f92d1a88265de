"""Every dual-encoder family the hf: backend claims, checked against transformers itself."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

import vlfair
from vlfair import testing
from vlfair.models.hf import TOKENIZATION

TOL = 1e-5  # max abs difference of normalised float32 embeddings
TEXTS = ["a photo of a doctor", "a nurse at the office", "ein foto von einer frau"]


@pytest.fixture(scope="module", params=sorted(testing.DUAL_ENCODER_BUILDERS))
def family(request, tmp_path_factory):
    path = testing.DUAL_ENCODER_BUILDERS[request.param](tmp_path_factory.mktemp(request.param) / "model")
    return request.param, path


def _unit(x):
    x = x.pooler_output.float()
    return (x / x.norm(dim=-1, keepdim=True)).numpy()


def test_embeddings_equal_transformers_per_item(family):
    name, path = family
    encoder = vlfair.load_encoder(str(path), dtype="float32")
    model = AutoModel.from_pretrained(path).eval()
    processor, tokenizer = AutoImageProcessor.from_pretrained(path, backend="pil"), AutoTokenizer.from_pretrained(path)
    assert model.config.model_type == name
    images = [testing.generated_image(i, size=(70 + 9 * i, 60)) for i in range(4)]
    tokenize = TOKENIZATION.get(name, {})
    with torch.inference_mode():
        image_ref = np.concatenate([_unit(model.get_image_features(
            pixel_values=processor(images=im, return_tensors="pt")["pixel_values"])) for im in images])
        text_ref = np.concatenate([_unit(model.get_text_features(
            **tokenizer([t], return_tensors="pt", **tokenize))) for t in TEXTS])
    np.testing.assert_allclose(encoder.encode_images(images), image_ref, atol=TOL)
    np.testing.assert_allclose(encoder.encode_texts(TEXTS), text_ref, atol=TOL)
    assert encoder.embedding_dim == image_ref.shape[1]


def test_logit_scale_is_the_models_temperature(family):
    name, path = family
    encoder = vlfair.load_encoder(str(path), dtype="float32")
    model = AutoModel.from_pretrained(path)
    expected = 1 / float(model.temperature.detach()) if name == "align" else float(model.logit_scale.detach().exp())
    assert encoder.logit_scale == pytest.approx(expected)
    assert encoder.loss == ("sigmoid" if name == "siglip" else "softmax")


@pytest.mark.parametrize("name", sorted(testing.DUAL_ENCODER_BUILDERS))
def test_logits_equal_the_models_forward(name, tmp_path):
    path = testing.DUAL_ENCODER_BUILDERS[name](tmp_path / name)
    encoder = vlfair.load_encoder(str(path), dtype="float32")
    model = AutoModel.from_pretrained(path).eval()
    processor, tokenizer = AutoImageProcessor.from_pretrained(path, backend="pil"), AutoTokenizer.from_pretrained(path)
    images = [testing.generated_image(i) for i in range(3)]
    with torch.inference_mode():
        out = model(pixel_values=processor(images=images, return_tensors="pt")["pixel_values"],
                    **tokenizer(TEXTS, return_tensors="pt", **TOKENIZATION.get(name, {"padding": True})))
    logits = encoder.logits(encoder.encode_images(images), encoder.encode_texts(TEXTS))
    np.testing.assert_allclose(logits, out.logits_per_image.numpy(), atol=1e-4)


def test_every_family_loads_on_a_gpu_as_transformers_chooses_its_attention(family, monkeypatch):
    """On an H200, ALIGN refused to load ("AlignModel does not support an attention implementation through
    torch.nn.functional.scaled_dot_product_attention") because vlfair asked for sdpa on every GPU: no attention
    implementation is asked for, so transformers takes sdpa where a family has it and eager where not. The load is
    traced up to the move to the device (this machine may have no GPU)."""
    from vlfair.models import hf

    _, path = family
    loaded = {}
    original = AutoModel.from_pretrained

    def traced(*args, **kwargs):
        loaded["kwargs"] = kwargs
        loaded["model"] = original(*args, **kwargs)
        return loaded["model"]

    monkeypatch.setattr(AutoModel, "from_pretrained", traced)
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *args, **kwargs: self)  # the device's part
    hf.load_pretrained(str(path), torch.device("cuda", 0), torch.float32, True, False)
    assert "attn_implementation" not in loaded["kwargs"]
    assert loaded["model"].config._attn_implementation in ("sdpa", "eager")
