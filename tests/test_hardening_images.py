"""Hostile and careless images and model folders (issue 28, cases 8, 9, 13, 14 and 24): each is
decoded as ``datasets`` shows it, refused by name, or keyed by what it is; nothing is embedded or
compared wrong in silence."""

from __future__ import annotations

import csv
import io
import os
import shutil
from pathlib import Path

import datasets
import numpy as np
import pytest
from PIL import Image

import vlfair
from vlfair.cli import main
from vlfair.imageio import BadImageError, image_problem, load_rgb
from vlfair.probes import run_probe
from vlfair.probes.published import hub_id
from vlfair.space.limits import Limits, SpaceInputError
from vlfair.space.uploads import check_images


def _encoded(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _fairface_source(root: Path, files: dict[str, bytes]) -> Path:
    """A FairFace-style source folder for ``vlfair prepare``: the files and a labels CSV naming them."""
    source = root / "raw"
    for name, content in files.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes(content)
    with open(source / "fairface_label_val.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["file", "age", "gender", "race", "service_test"])
        writer.writerows([name, "20-29", "Male", "White", "False"] for name in files)
    return source


def _prepare_problems(tmp_path: Path, capsys, files: dict[str, bytes]) -> str:
    code = main(["prepare", "fairface", "--source", str(_fairface_source(tmp_path, files)),
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    return err


# ---- 8: a local folder named like a Hub id is not the study's model ------------------------------
@pytest.fixture
def folders_named_like_hub_ids(tmp_path, monkeypatch, clip_dir) -> Path:
    """The working directory holds ./openai/clip-vit-base-patch32 and ./M-CLIP/XLM-Roberta-Large-Vit-B-32
    (the tiny CLIP): transformers and vlfair load those folders for the bare ids."""
    for name in ("openai/clip-vit-base-patch32", "M-CLIP/XLM-Roberta-Large-Vit-B-32"):
        shutil.copytree(clip_dir, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


B32, MCLIP_B32 = "openai/clip-vit-base-patch32", "mclip:m-clip/xlm-roberta-large-vit-b-32+openai/clip-vit-base-patch32"
LOCAL_OR_HUB = {  # spec: the Hub model it names where no such folder is
    B32: B32, "hf:" + B32: B32, B32 + "@main": B32,
    "mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32": MCLIP_B32,  # the text tower is a folder here
    "mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32@main+openai/clip-vit-base-patch16":  # the text tower, pinned
        "mclip:m-clip/xlm-roberta-large-vit-b-32+openai/clip-vit-base-patch16",
    "mclip:M-CLIP/XLM-Roberta-Large-Vit-L-14+" + B32:  # the image tower is a folder here
        "mclip:m-clip/xlm-roberta-large-vit-l-14+" + B32,
}


@pytest.mark.parametrize("spec", list(LOCAL_OR_HUB))
def test_a_local_folder_named_like_a_hub_id_is_not_the_studys_model(folders_named_like_hub_ids, spec):
    assert hub_id(spec) is None
    os.chdir(folders_named_like_hub_ids.parent)  # no such folders: the same spec names the Hub's model
    assert hub_id(spec) == LOCAL_OR_HUB[spec]


def test_a_run_on_a_folder_named_like_the_study_model_gets_no_published_comparison(folders_named_like_hub_ids):
    encoder = vlfair.load_encoder(B32, dtype="float32")  # loads ./openai/clip-vit-base-patch32, as transformers would
    assert encoder.revision.startswith("local-")
    results = run_probe("professions", encoder, "synthetic:professions", None, cache_dir=None,
                        settings={"bootstrap": 0, "n_permutations": 0})
    assert results["published"] == []
    assert hub_id("./" + B32) is None and hub_id("hf:./" + B32) is None  # paths never were ids
    # beside those folders, the Hub's own ids are still the studies' models
    assert hub_id("openai/clip-vit-base-patch16") == "openai/clip-vit-base-patch16"
    assert hub_id("mclip:M-CLIP/XLM-Roberta-Large-Vit-L-14") == \
        "mclip:m-clip/xlm-roberta-large-vit-l-14+openai/clip-vit-large-patch14"


# ---- 9: a dataset's files are keyed by their content, in every input form ----------------------
def _dataset_forms(paths: list[str]) -> dict[str, datasets.Dataset]:
    strings = datasets.Dataset.from_dict({"image": paths})
    return {
        "path-strings": strings,
        "image-feature": strings.cast_column("image", datasets.Image()),
        "image-feature-undecoded": strings.cast_column("image", datasets.Image(decode=False)),
        "path-structs": datasets.Dataset.from_dict({"image": [{"bytes": None, "path": p} for p in paths]}),
        "a-selection": strings.cast_column("image", datasets.Image()).select([2, 0, 1]),
    }


@pytest.mark.parametrize("form", ["path-strings", "image-feature", "image-feature-undecoded", "path-structs",
                                  "a-selection"])
def test_a_file_replaced_under_its_name_is_embedded_again(clip_encoder, tmp_path, counted, form):
    paths = [str(tmp_path / f"{i}.png") for i in range(3)]
    for i, path in enumerate(paths):
        Image.new("RGB", (40, 30), (60 * i, 20, 200 - 60 * i)).save(path)
    data = _dataset_forms(paths)[form]
    cache = tmp_path / "cache"
    first = vlfair.embed_images(clip_encoder, data, cache_dir=cache, progress=False)
    assert np.array_equal(vlfair.embed_images(clip_encoder, data, cache_dir=cache, progress=False), first)
    assert counted["images"] == 3  # unchanged files: the cache answers

    stat = os.stat(paths[0])
    Image.new("RGB", (40, 30), (250, 250, 0)).save(paths[0])  # same name, same size, other picture
    os.utime(paths[0], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    again = vlfair.embed_images(clip_encoder, data, cache_dir=cache, progress=False)
    fresh = vlfair.embed_images(clip_encoder, data, cache_dir=None, progress=False)
    np.testing.assert_array_equal(again, fresh)
    assert not np.allclose(again, first)


# ---- 13: image modes PIL would clip are scaled, or refused by name -----------------------------
def _gradient(low: float, high: float, dtype) -> np.ndarray:
    """A left-to-right ramp, 96 wide and 20 high (landscape, so an orientation slip would show)."""
    return np.tile(np.linspace(low, high, 96), (20, 1)).astype(dtype)


WIDE_IMAGES = {  # name: (file bytes, the 8-bit ramp it shows)
    "I;16 png": lambda: _encoded(Image.fromarray(_gradient(0, 65535, np.uint16)), "PNG"),
    "I;16 png, 12 bits used": lambda: _encoded(Image.fromarray(_gradient(0, 4095, np.uint16) * 16), "PNG"),
    "I;16B tiff": lambda: _encoded(Image.frombytes("I;16B", (96, 20), _gradient(0, 65535, ">u2").tobytes()), "TIFF"),
    "I tiff": lambda: _encoded(Image.fromarray(_gradient(-70000, 900000, np.int32)), "TIFF"),
    "F tiff 0-1": lambda: _encoded(Image.fromarray(_gradient(0, 1, np.float32)), "TIFF"),
    "F tiff -3-7": lambda: _encoded(Image.fromarray(_gradient(-3, 7, np.float32)), "TIFF"),
}


def _assert_ramp(image: Image.Image, name: str) -> None:
    pixels = np.asarray(image)
    assert image.mode == "RGB" and pixels.shape == (20, 96, 3), name
    row = pixels[10, :, 0].astype(int)
    assert (pixels == pixels[:, :, :1]).all(), f"{name}: grey stays grey"
    assert row[0] <= 10 and row[-1] >= 235 and (np.diff(row) >= 0).all(), f"{name}: not the ramp: {row}"
    assert len(np.unique(row)) >= 40, f"{name}: the ramp lost its steps: {np.unique(row)}"


@pytest.mark.parametrize("name", list(WIDE_IMAGES))
def test_16_bit_and_float_images_keep_their_picture_in_runs_prepare_and_the_space(tmp_path, name):
    data = WIDE_IMAGES[name]()
    _assert_ramp(load_rgb({"bytes": data, "path": "ramp"}, 0), name)  # run's decode
    assert image_problem(data) is None  # prepare's check
    ramp = _write(tmp_path / "ramp.tif", data)
    _assert_ramp(load_rgb(str(ramp), 0), name)
    assert check_images([ramp, _write(tmp_path / "other.png", _encoded(Image.new("RGB", (8, 8)), "PNG"))],
                        Limits()) == [ramp, tmp_path / "other.png"]  # the Space's upload check


def test_a_16_bit_transparent_grey_value_becomes_white(tmp_path):
    ramp = Image.fromarray(_gradient(0, 65535, np.uint16))
    transparent = int(np.asarray(ramp)[0, 40])
    decoded = np.asarray(load_rgb({"bytes": _encoded(ramp, "PNG", transparency=transparent), "path": None}, 0))
    assert (decoded[:, 40] == 255).all() and decoded[0, 0, 0] == 0 and decoded[0, 60, 0] < 255


EVERYDAY_MODES = {  # name: (the image, the RGB it shows as transformers' processors show it)
    "palette with a transparent index": (lambda: _palette(transparency=1), [[0, 0, 0], [255, 255, 255]]),
    "palette with an alpha palette": (lambda: _palette(alpha_palette=True), [[0, 0, 0], [255, 255, 255]]),
    "LA": (lambda: Image.merge("LA", (Image.new("L", (2, 1), 90), Image.frombytes("L", (2, 1), bytes([255, 0])))),
           [[90, 90, 90], [255, 255, 255]]),
    "CMYK": (lambda: Image.new("CMYK", (2, 1), (0, 255, 255, 0)), [[255, 0, 0], [255, 0, 0]]),
    "1-bit": (lambda: Image.frombytes("1", (2, 1), bytes([0b01000000])), [[0, 0, 0], [255, 255, 255]]),
    "LAB (its a* band is no alpha)": (lambda: Image.new("LAB", (2, 1), (128, 128, 128)), [[119, 119, 119]] * 2),
}


def _palette(transparency: int | None = None, alpha_palette: bool = False) -> Image.Image:
    image = Image.frombytes("P", (2, 1), bytes([0, 1]))
    if alpha_palette:
        image.putpalette([0, 0, 0, 255, 200, 10, 10, 0], rawmode="RGBA")  # index 1: red, fully transparent
    else:
        image.putpalette([0, 0, 0, 200, 10, 10])
        image.info["transparency"] = transparency
    return image


def test_everyday_modes_show_their_picture_with_transparency_on_white():
    for name, (make, expected) in EVERYDAY_MODES.items():
        assert np.asarray(load_rgb(make(), 0))[0].tolist() == expected, name
        if not name.startswith("palette with an alpha"):  # a file of that mode reads the same
            data = _encoded(make(), "TIFF" if name.startswith(("CMYK", "LAB")) else "PNG")
            assert np.asarray(load_rgb({"bytes": data, "path": None}, 0))[0].tolist() == expected, name


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_float_image_with_nan_or_infinite_pixels_is_refused_by_name(tmp_path, capsys, bad):
    values = _gradient(0, 1, np.float32)
    values[3, 7] = bad
    data = _encoded(Image.fromarray(values), "TIFF")
    problem = "a float image (mode F) with NaN or infinite pixels"
    with pytest.raises(BadImageError, match=r"^row 4 \(scan.tif\): cannot read image: " + problem.replace("(", r"\(")
                       .replace(")", r"\)")):
        load_rgb({"bytes": data, "path": "scan.tif"}, 4)
    assert image_problem(data) == problem
    with pytest.raises(SpaceInputError, match=r"^scan.tif is a float image \(mode F\) with NaN"):
        check_images([_write(tmp_path / "scan.tif", data)], Limits())
    assert f"row 0: image 'val/scan.tif' is {problem}" in _prepare_problems(tmp_path, capsys,
                                                                            {"val/scan.tif": data})


# ---- 14: EXIF orientation, as datasets decodes -------------------------------------------------
def _oriented_jpeg(orientation: int) -> bytes:
    """A landscape picture, red with a blue block in one corner and a green bar along one edge, whose
    EXIF says how to turn it."""
    image = Image.new("RGB", (64, 32), (200, 30, 30))
    image.paste((20, 40, 220), (0, 0, 16, 12))
    image.paste((30, 200, 40), (0, 28, 64, 32))
    exif = Image.Exif()
    exif[0x0112] = orientation
    return _encoded(image, "JPEG", exif=exif.tobytes(), quality=95)


@pytest.mark.parametrize("orientation", [2, 3, 4, 5, 6, 7, 8])
def test_exif_orientation_is_applied_as_datasets_decodes(tmp_path, orientation):
    data = _oriented_jpeg(orientation)
    path = _write(tmp_path / "turned.jpg", data)
    shown = datasets.Image().decode_example({"bytes": data, "path": None}).convert("RGB")
    assert shown.size == ((32, 64) if orientation >= 5 else (64, 32))
    for cell in ({"bytes": data, "path": None}, str(path), Image.open(path)):
        np.testing.assert_array_equal(np.asarray(load_rgb(cell, 0)), np.asarray(shown), err_msg=repr(cell))


def test_an_image_feature_dataset_embeds_the_picture_datasets_shows(clip_encoder, tmp_path):
    paths = [str(_write(tmp_path / f"{o}.jpg", _oriented_jpeg(o))) for o in (1, 6, 8, 3)]
    data = datasets.Dataset.from_dict({"image": paths}).cast_column("image", datasets.Image())
    shown = [image.convert("RGB") for image in data["image"]]  # datasets' own decoding
    np.testing.assert_allclose(vlfair.embed_images(clip_encoder, data, cache_dir=None, progress=False),
                               clip_encoder.encode_images([np.asarray(image) for image in shown]), atol=1e-6)


def test_embeddings_cached_under_other_decoding_rules_are_not_served(clip_encoder, tmp_path, counted, monkeypatch):
    """A cache written before orientation was applied holds embeddings of another picture."""
    from vlfair import imageio

    rotated = [{"bytes": _oriented_jpeg(6), "path": None}]
    vlfair.embed_images(clip_encoder, rotated, cache_dir=tmp_path, progress=False)
    monkeypatch.setattr(imageio, "DECODING", imageio.DECODING - 1)  # as the earlier rules wrote it
    vlfair.embed_images(clip_encoder, rotated, cache_dir=tmp_path, progress=False)
    assert counted["images"] == 2


# ---- 24: an image too elongated for the encoder's resize is refused up front, with its row ------
ELONGATED = {"2,000,000x1": (2_000_000, 1), "1x2,000,000": (1, 2_000_000), "30,000x200": (30_000, 200)}


@pytest.mark.parametrize("size", list(ELONGATED))
def test_an_elongated_image_is_refused_in_prepare_and_the_space(tmp_path, capsys, size):
    width, height = ELONGATED[size]
    data = _encoded(Image.new("1", (width, height)), "PNG")  # a few kB, far under the pixel limit
    problem = image_problem(data)
    assert problem.startswith(f"too elongated ({width}x{height} pixels, aspect ratio ")
    assert "at most 100:1" in problem
    assert f"row 1: image 'val/strip.png' is {problem}" in _prepare_problems(
        tmp_path, capsys, {"val/ok.jpg": _encoded(Image.new("RGB", (30, 20)), "JPEG"), "val/strip.png": data})
    with pytest.raises(SpaceInputError, match=r"^strip.png is too elongated \(" + f"{width}x{height}"):
        check_images([_write(tmp_path / "strip.png", data)], Limits())


@pytest.mark.parametrize("size", [(30_000, 200), (150, 16_000)])  # safe to resize even where it is not refused
def test_an_elongated_image_in_a_run_names_its_row_and_file(clip_encoder, tmp_path, size):
    strip = _write(tmp_path / "strip.png", _encoded(Image.new("L", size, 128), "PNG"))
    at_limit = _write(tmp_path / "panorama.png", _encoded(Image.new("RGB", (3_000, 30), (90, 10, 10)), "PNG"))
    assert image_problem(at_limit.read_bytes()) is None  # 100:1 is still a picture
    ok = [str(_write(tmp_path / f"ok{i}.png", _encoded(Image.new("RGB", (40, 30), (9 * i, 0, 0)), "PNG")))
          for i in range(2)]
    rows = [ok[0], str(at_limit), str(strip), ok[1]]
    with pytest.raises(BadImageError, match=rf"^row 2 \({strip}\): cannot read image: too elongated \("):
        vlfair.embed_images(clip_encoder, rows, cache_dir=None, progress=False)
    skipped = vlfair.embed_images(clip_encoder, rows, cache_dir=None, progress=False, on_bad_image="skip")
    assert skipped.skipped_rows == [2] and skipped.kept_rows.tolist() == [0, 1, 3]
    assert skipped.skipped[0].reason.startswith(f"too elongated ({size[0]}x{size[1]} pixels")


def _tiff(values: np.ndarray, mode: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(values, mode=mode).save(buffer, format="TIFF")
    return buffer.getvalue()


@pytest.mark.parametrize("values, mode, expected", [
    # 8-bit values in a 32-bit or float image: read as they are (as PIL and vlfair before read them)
    (np.arange(10, 201, 5, dtype=np.int32), "I", np.arange(10, 201, 5)),
    (np.arange(10, 201, 5, dtype=np.float32), "F", np.arange(10, 201, 5)),
    # a float image in the unit range: a fraction of white
    (np.linspace(0.2, 0.6, 52, dtype=np.float32), "F", np.rint(np.linspace(0.2, 0.6, 52).astype(np.float32) * 255)),
], ids=["I-8bit-values", "F-8bit-values", "F-unit-range"])
def test_images_that_declare_their_range_keep_their_values(values, mode, expected):
    from vlfair.imageio import load_rgb

    grey = np.asarray(load_rgb({"bytes": _tiff(values.reshape(1, -1), mode), "path": None}, 0))[0, :, 0]
    assert grey.tolist() == expected.astype(int).tolist()


def test_a_float_image_spanning_float32s_range_is_scaled_without_overflow():
    from vlfair.imageio import load_rgb

    ramp = np.linspace(-3e38, 3e38, 64, dtype=np.float32).reshape(1, -1)
    grey = np.asarray(load_rgb({"bytes": _tiff(ramp, "F"), "path": None}, 0))[0, :, 0].astype(int)
    assert grey[0] == 0 and grey[-1] == 255 and (np.diff(grey) >= 0).all() and len(set(grey)) > 40
