"""Hostile and careless input (issue 16's cases): every one is refused with a message that names
it, or handled and reported; nothing is measured wrong in silence."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pytest
from PIL import Image

from vlfair.cli import main
from vlfair.data import load_dataset
from vlfair.data.build import BuildError, build_fairface


def _jpeg(color=(120, 80, 40), size=(8, 8)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="JPEG")
    return buffer.getvalue()


def _fairface_source(root: Path, files: dict[str, bytes | Path | None], rows: list[str] | None = None) -> Path:
    """A FairFace-style source: ``files`` maps a relative path to its bytes, to a link target (a
    Path), or None (no file); ``rows`` are the labels file's file names (default: the keys)."""
    source = root / "raw"
    source.mkdir(parents=True)
    for name, content in files.items():
        path = source / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            path.symlink_to(content)
        elif content is not None:
            path.write_bytes(content)
    with open(source / "fairface_label_val.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["file", "age", "gender", "race", "service_test"])
        for name in rows or list(files):
            writer.writerow([name, "20-29", "Male", "White", "False"])
    return source


def _problems(source: Path) -> str:
    with pytest.raises(BuildError) as info:
        build_fairface(source)
    return str(info.value)


# ---- prepare: files that leave the source -------------------------------------------------------
def test_a_symlinked_file_out_of_the_source_is_refused(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    source = _fairface_source(tmp_path, {"val/1.jpg": _jpeg(), "val/2.jpg": secret})
    assert "fairface_label_val.csv row 1: path 'val/2.jpg' is a link that leaves the source directory" in _problems(source)
    out = tmp_path / "out"
    assert main(["prepare", "fairface", "--source", str(source), "--out", str(out), "--skip-bad"]) == 0
    built = load_dataset("fairface", source=out, split="validation")
    assert built["file"] == ["val/1.jpg"]
    assert not any(b"root:x:0:0" in p.read_bytes() for p in out.rglob("*.parquet"))


def test_a_symlinked_folder_out_of_the_source_is_refused(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "2.jpg").write_bytes(_jpeg())
    source = _fairface_source(tmp_path, {"val/1.jpg": _jpeg(), "other": outside}, rows=["val/1.jpg", "other/2.jpg"])
    assert "row 1: path 'other/2.jpg' is a link that leaves the source directory" in _problems(source)


def test_a_link_inside_the_source_is_fine(tmp_path):
    source = _fairface_source(tmp_path, {"val/1.jpg": _jpeg()})
    (source / "val" / "2.jpg").symlink_to(source / "val" / "1.jpg")
    with open(source / "fairface_label_val.csv", "a", newline="") as handle:
        handle.write("val/2.jpg,30-39,Female,Black,False\n")
    assert build_fairface(source).configs["default"]["validation"].num_rows == 2


# ---- prepare: one file under several spellings ----------------------------------------------------
@pytest.mark.parametrize("spelling", ["val/./2.jpg", "val//2.jpg", "val\\2.jpg", "val/../val/2.jpg"])
def test_one_file_spelled_twice_is_a_duplicate(tmp_path, spelling):
    source = _fairface_source(tmp_path, {"val/2.jpg": _jpeg()}, rows=["val/2.jpg", spelling])
    assert f"row 1: duplicate file name {spelling!r} (also row 0)" in _problems(source)


# ---- prepare: images that do not decode --------------------------------------------------------
def _bomb() -> bytes:
    buffer = io.BytesIO()
    Image.new("1", (20000, 20000)).save(buffer, format="PNG")  # 400 M pixels, a few kB on disk
    return buffer.getvalue()


@pytest.mark.parametrize("content, expected", [
    (b"", "is empty (0 bytes)"),
    (b"this is a text file, not a picture", "is not a readable image (UnidentifiedImageError"),
    (_jpeg(size=(64, 64))[:200], "is not a readable image (OSError"),
    (None, "is a decompression bomb (Image size (400000000 pixels) exceeds limit"),
], ids=["zero-byte", "not-an-image", "truncated", "bomb"])
def test_an_image_that_does_not_decode_fails_the_build_with_its_row(tmp_path, content, expected):
    source = _fairface_source(tmp_path, {"val/1.jpg": _jpeg(), "val/2.png": _bomb() if content is None else content})
    assert f"row 1: image 'val/2.png' {expected}" in _problems(source)
    out = tmp_path / "out"
    assert main(["prepare", "fairface", "--source", str(source), "--out", str(out), "--skip-bad"]) == 0
    assert f"image 'val/2.png' {expected}" in (out / "README.md").read_text()  # listed among the skipped rows
    assert load_dataset("fairface", source=out, split="validation")["file"] == ["val/1.jpg"]
