"""The uint8 worker half + device half reproduce each transformers image processor exactly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import CLIPImageProcessor, ChineseCLIPImageProcessor, EfficientNetImageProcessor, SiglipImageProcessor

from vlfair.models.preprocessing import ImagePreprocessing, UnsupportedPreprocessing

SHAPES = [(300, 200), (17, 500), (640, 3), (100, 100), (224, 224), (225, 401), (5, 5)]


def _images(modes):
    rng = np.random.default_rng(0)
    for (width, height) in SHAPES:
        for mode in modes:
            channels = 4 if mode == "RGBA" else 3
            yield Image.fromarray(rng.integers(0, 256, (height, width, channels), dtype=np.uint8)).convert(mode)


PROCESSORS = {
    "clip": (CLIPImageProcessor(), ("RGB", "RGBA", "L", "P")),
    "siglip": (SiglipImageProcessor(), ("RGB", "RGBA", "L")),
    "chinese_clip": (ChineseCLIPImageProcessor(), ("RGB", "L")),
    # ALIGN's processor: rescale with offset and include_top (its own code cannot take RGBA)
    "align": (EfficientNetImageProcessor(rescale_offset=True, rescale_factor=1 / 127.5, do_center_crop=True), ("RGB",)),
}


@pytest.mark.parametrize("name", sorted(PROCESSORS))
def test_matches_processor(name):
    processor, modes = PROCESSORS[name]
    prep = ImagePreprocessing.from_image_processor(processor)
    for image in _images(modes):
        reference = processor(images=image, return_tensors="np")["pixel_values"][0]
        uint8 = prep.to_uint8(image)
        assert uint8.dtype == np.uint8 and uint8.shape[:2] == prep.output_hw
        ours = prep.normalize(torch.from_numpy(uint8[None].copy()), torch.float32)[0].numpy()
        np.testing.assert_allclose(ours, reference, atol=1e-6, err_msg=f"{name} {image.size} {image.mode}")


def test_unsupported_processor_settings_are_named():
    with pytest.raises(UnsupportedPreprocessing, match="longest_edge"):
        ImagePreprocessing.from_image_processor(CLIPImageProcessor(size={"shortest_edge": 224, "longest_edge": 400}))
    with pytest.raises(UnsupportedPreprocessing, match="cannot be batched"):
        ImagePreprocessing.from_image_processor(CLIPImageProcessor(do_center_crop=False))


def test_key_changes_with_any_setting():
    base = ImagePreprocessing.from_image_processor(CLIPImageProcessor())
    other = ImagePreprocessing.from_image_processor(CLIPImageProcessor(crop_size={"height": 200, "width": 200}))
    assert base.key() != other.key() and base.key() == ImagePreprocessing.from_image_processor(CLIPImageProcessor()).key()
