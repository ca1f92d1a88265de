"""The uint8 worker half + device half reproduce each transformers image processor exactly."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import (  # PIL's resize, as vlfair's: torchvision's (where installed) is another resizer
    ChineseCLIPImageProcessorPil,
    CLIPImageProcessorPil,
    EfficientNetImageProcessorPil,
    SiglipImageProcessorPil,
)

from vlfair.models.preprocessing import ImagePreprocessing, UnsupportedPreprocessing

SHAPES = [(300, 200), (17, 500), (640, 3), (100, 100), (224, 224), (225, 401), (5, 5)]


def _images(modes):
    rng = np.random.default_rng(0)
    for (width, height) in SHAPES:
        for mode in modes:
            channels = 4 if mode == "RGBA" else 3
            yield Image.fromarray(rng.integers(0, 256, (height, width, channels), dtype=np.uint8)).convert(mode)


PROCESSORS = {
    "clip": (CLIPImageProcessorPil(), ("RGB", "RGBA", "L", "P")),
    "siglip": (SiglipImageProcessorPil(), ("RGB", "RGBA", "L")),
    "chinese_clip": (ChineseCLIPImageProcessorPil(), ("RGB", "L")),
    # ALIGN's processor: rescale with offset and include_top (its own code cannot take RGBA)
    "align": (EfficientNetImageProcessorPil(rescale_offset=True, rescale_factor=1 / 127.5, do_center_crop=True),
              ("RGB",)),
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
        ImagePreprocessing.from_image_processor(CLIPImageProcessorPil(size={"shortest_edge": 224, "longest_edge": 400}))
    with pytest.raises(UnsupportedPreprocessing, match="cannot be batched"):
        ImagePreprocessing.from_image_processor(CLIPImageProcessorPil(do_center_crop=False))


def test_key_changes_with_any_setting():
    base = ImagePreprocessing.from_image_processor(CLIPImageProcessorPil())
    other = ImagePreprocessing.from_image_processor(CLIPImageProcessorPil(crop_size={"height": 200, "width": 200}))
    assert (base.key() != other.key()
            and base.key() == ImagePreprocessing.from_image_processor(CLIPImageProcessorPil()).key())


def test_a_reduced_decode_keeps_twice_the_resize_s_input_and_only_when_asked():
    clip = ImagePreprocessing.from_image_processor(CLIPImageProcessorPil())  # shortest edge 224
    siglip = ImagePreprocessing.from_image_processor(SiglipImageProcessorPil())  # exactly 224 x 224
    assert clip.smallest_decode(1792, 1344) is None  # off unless asked: embeddings as transformers makes them
    clip, siglip = (dataclasses.replace(prep, jpeg_draft=True) for prep in (clip, siglip))
    assert clip.smallest_decode(1792, 1344) == (598, 448)  # the short side at twice 224, the aspect kept
    assert clip.smallest_decode(1344, 1792) == (448, 598)
    assert siglip.smallest_decode(2000, 500) == (1792, 448)  # each side at least twice 224, turned either way
    assert "jpeg_draft" not in ImagePreprocessing.from_image_processor(CLIPImageProcessorPil()).key()  # caches kept
    assert clip.key()["jpeg_draft"] is True


def test_a_large_jpeg_is_decoded_reduced_close_to_whole_and_other_files_whole(tmp_path):
    from vlfair.tiny import generated_image

    whole = ImagePreprocessing.from_image_processor(CLIPImageProcessorPil(size={"shortest_edge": 64},
                                                                       crop_size={"height": 64, "width": 64}))
    reduced = dataclasses.replace(whole, jpeg_draft=True)
    picture = generated_image(0, size=(640, 520))  # shapes: edges a reduced decode could blur
    picture.save(tmp_path / "large.jpg", quality=95)
    picture.save(tmp_path / "large.png")
    picture.resize((200, 160)).save(tmp_path / "small.jpg", quality=95)
    seen = []
    original = ImagePreprocessing.to_uint8
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ImagePreprocessing, "to_uint8",
                      lambda self, image: seen.append(image.size) or original(self, image))
        reduced_pixels = reduced.load(str(tmp_path / "large.jpg"), 0)
        for name in ("large.png", "small.jpg"):  # a PNG has no DCT to scale; 160 < 4 x 64: nothing to gain
            assert np.array_equal(reduced.load(str(tmp_path / name), 0), whole.load(str(tmp_path / name), 0))
    assert seen[0] == (160, 130)  # a quarter of 640 x 520: 130 >= 2 x 64, an eighth (65) would not be
    assert seen[1:] == [(640, 520), (640, 520), (200, 160), (200, 160)]
    difference = np.abs(reduced_pixels.astype(int) - whole.load(str(tmp_path / "large.jpg"), 0).astype(int))
    assert difference.mean() < 2 and 0 < difference.max()  # the same picture, not the same pixels
