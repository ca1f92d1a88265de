"""Issue 66, items 4 and 5: ``vlfair prepare`` for one's own data (the files each dataset reads in its
--help, a missing file said as that, a folder's metadata.csv|jsonl|parquet as ``vlfair run`` reads it,
a card that names one's own data and claims no licence), and sample ids from the image's bytes, so the
same images raw and prepared compare row by row."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import datasets
import pandas as pd
import pytest
import yaml
from PIL import Image

import vlfair
from vlfair.cli import main
from vlfair.data.build import build_fairface, prepare
from vlfair.sources import row_digests

DATA = Path(__file__).resolve().parent / "data"
FAIRFACE_CSV = DATA / "fairface" / "fairface_label_val.csv"
PROFESSIONS = [(p, g, r) for p in ("doctor", "nurse") for g in ("Female", "Male") for r in ("White", "Black", "Asian")]


def _png(seed: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (12, 12), (seed * 37 % 256, seed * 91 % 256, seed * 13 % 256)).save(buffer, format="PNG")
    return buffer.getvalue()


def _card(folder: Path) -> tuple[dict, str]:
    text = (folder / "README.md").read_text()
    return yaml.safe_load(re.match(r"^---\n(.*?)\n---\n", text, re.S).group(1)), text


def _professions_folder(folder: Path, per_cell: int = 2) -> tuple[Path, list[dict[str, str]]]:
    """Images and a metadata.csv as datasets' imagefolder reads a folder: file_name and the labels."""
    folder.mkdir(parents=True)
    rows = []
    for number, (profession, gender, race) in enumerate(PROFESSIONS * per_cell):
        name = f"img{number}.png"
        (folder / name).write_bytes(_png(number))
        rows.append({"file_name": name, "profession": profession, "gender": gender, "race": race})
    with open(folder / "metadata.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, ["file_name", "profession", "gender", "race"])
        writer.writeheader()
        writer.writerows(rows)
    return folder, rows


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    said = capsys.readouterr()
    assert "Traceback" not in said.err
    return code, said.out, said.err


# ---- 4: --help lists each dataset's files ------------------------------------------------------
def test_prepare_help_lists_each_dataset_s_files_and_columns_from_the_registry(capsys):
    from vlfair.data.registry import buildable, dataset_spec

    with pytest.raises(SystemExit) as exited:
        main(["prepare", "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    for name in buildable():
        assert f"  {name}:" in text
        for file in dataset_spec(name).expected_files():  # the registry's entries, not a text of the CLI's
            assert file.name in text
    assert "fairface_label_train.csv, fairface_label_val.csv (one or both): file, age, gender, race," in text
    assert "metadata.csv | metadata.jsonl | metadata.parquet: file_name, profession, gender, race" in text
    with pytest.raises(SystemExit):
        main(["prepare", "fairface", "--help"])  # after the dataset: its files alone
    alone = capsys.readouterr().out
    assert "  fairface:" in alone and "  professions:" not in alone and "  multi30k:" not in alone


# ---- 4: a missing file is that file missing ----------------------------------------------------
def _labels_without_images(tmp_path: Path) -> list[str]:
    source = tmp_path / "faces"
    source.mkdir()
    (source / "fairface_label_val.csv").write_text("file,age,gender,race,service_test\n"
                                                   "val/1.jpg,20-29,Male,White,False\nval/2.jpg,3-9,Female,Black,True\n")
    return ["fairface", "--source", str(source)]


def _empty_folder(tmp_path: Path, dataset: str) -> list[str]:
    (tmp_path / "faces").mkdir()
    return [dataset, "--source", str(tmp_path / "faces")]


@pytest.mark.parametrize("given, said", [
    (lambda t: _empty_folder(t, "fairface"),
     "vlfair prepare fairface: {t}/faces has no fairface_label_val.csv or fairface_label_train.csv (FairFace's label "
     "files, one or both)"),
    (lambda t: _empty_folder(t, "pfi"),
     "vlfair prepare pfi: {t}/faces has no metadata.csv, metadata.jsonl or metadata.parquet"),
    (lambda t: _empty_folder(t, "professions"),
     "vlfair prepare professions: {t}/faces has no metadata.csv, metadata.jsonl, metadata.parquet or "
     "profession/gender/race/*.jpg tree"),
    (lambda t: ["pfi", "--source", str(t / "nowhere")], "vlfair prepare pfi: --source {t}/nowhere does not exist"),
    (lambda t: _empty_folder(t, "multi30k"),
     "vlfair prepare multi30k: --images: Multi30K needs the Flickr30K image directory (--images DIR)"),
    (lambda t: [*_empty_folder(t, "multi30k"), "--images", str(t / "flickr")],
     "vlfair prepare multi30k: --images {t}/flickr does not exist"),
    (_labels_without_images,
     "vlfair prepare fairface: none of the 2 images fairface_label_val.csv lists is in {t}/faces (the first: "
     "'val/1.jpg'); is --source the folder that holds them?"),
], ids=["fairface-labels", "pfi-metadata", "professions-metadata-or-tree", "no-source", "multi30k-images-option",
        "multi30k-images-folder", "no-image-at-all"])
def test_a_missing_file_is_said_as_that_file_missing_in_one_line(tmp_path, capsys, given, said):
    """Not "1 bad rows in the source (pass --skip-bad ...)": the file and the folder, one line, exit 2, and
    --skip-bad does not make it pass; nothing is written."""
    argv = given(tmp_path)
    for extra in ([], ["--skip-bad"]):
        code, _, err = _run(capsys, "prepare", *argv, "--out", str(tmp_path / "out"), "-q", *extra)
        assert code == 2 and err.startswith(said.format(t=tmp_path)) and err.count("\n") == 1, err
        assert "bad rows" not in err and "--skip-bad" not in err
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("content, said", [
    ("", "metadata.csv: has no image column (file_name or file: each image's path inside the folder); it has []"),
    ("file_name,profession,gender,race\n", "metadata.csv: has no rows"),
    ("file_name,file,profession,gender,race\na.png,a.png,doctor,Male,White\n",
     "metadata.csv: has both file_name and file: name each image in one column"),
    ("name,profession,gender,race\na.png,doctor,Male,White\n",
     "metadata.csv: has no image column (file_name or file: each image's path inside the folder)"),
])
def test_a_metadata_file_it_cannot_use_is_one_line_naming_it(tmp_path, capsys, content, said):
    source = tmp_path / "mine"
    source.mkdir()
    (source / "a.png").write_bytes(_png(1))
    (source / "metadata.csv").write_text(content)
    code, _, err = _run(capsys, "prepare", "professions", "--source", str(source), "--out", str(tmp_path / "out"),
                        "-q")
    assert code == 2 and said in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_two_metadata_files_are_refused_naming_both(tmp_path, capsys):
    source, _ = _professions_folder(tmp_path / "mine", per_cell=1)
    (source / "metadata.jsonl").write_text('{"file_name": "img0.png", "profession": "doctor"}\n')
    code, _, err = _run(capsys, "prepare", "professions", "--source", str(source), "--out", str(tmp_path / "out"))
    assert code == 2 and f"{source} has metadata.csv and metadata.jsonl: keep one metadata file" in err


def test_a_jsonl_line_that_is_not_an_object_names_its_line(tmp_path, capsys):
    source = tmp_path / "mine"
    source.mkdir()
    (source / "metadata.jsonl").write_text('{"file_name": "a.png", "profession": "doctor", "gender": "Male", '
                                           '"race": "White"}\n\n[1, 2]\n')
    code, _, err = _run(capsys, "prepare", "professions", "--source", str(source), "--out", str(tmp_path / "out"))
    assert code == 2 and "metadata.jsonl line 3: is a JSON list, not an object of column: value" in err


# ---- 4: prepare reads a folder's metadata as vlfair run does ----------------------------------------
def test_prepare_professions_reads_metadata_csv_jsonl_and_parquet_alike(tmp_path):
    """The folder datasets' imagefolder (and so `vlfair run --dataset DIR`) reads, in each of its
    metadata forms: file_name and the labels; the same rows prepared from each."""
    csv_folder, rows = _professions_folder(tmp_path / "csv")
    jsonl_folder, parquet_folder = tmp_path / "jsonl", tmp_path / "parquet"
    for folder in (jsonl_folder, parquet_folder):
        shutil.copytree(csv_folder, folder)
        (folder / "metadata.csv").unlink()
    (jsonl_folder / "metadata.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    datasets.Dataset.from_list(rows).to_parquet(str(parquet_folder / "metadata.parquet"))
    prepared = {}
    for folder in (csv_folder, jsonl_folder, parquet_folder):
        prepare("professions", folder, tmp_path / f"{folder.name}-out")
        prepared[folder.name] = vlfair.load_dataset("professions", tmp_path / f"{folder.name}-out")
    for name, ds in prepared.items():
        assert ds.num_rows == len(rows), name
        assert ds["profession"] == [r["profession"] for r in rows] and ds["race"] == [r["race"] for r in rows]
        assert row_digests(ds, range(ds.num_rows)) == row_digests(prepared["csv"], range(len(rows)))
    # the name vlfair's builders read before (FairFace's `file`) still works
    legacy = tmp_path / "legacy"
    shutil.copytree(csv_folder, legacy)
    text = (legacy / "metadata.csv").read_text()
    (legacy / "metadata.csv").write_text(text.replace("file_name,", "file,", 1))
    prepare("professions", legacy, tmp_path / "legacy-out")
    assert vlfair.load_dataset("professions", tmp_path / "legacy-out")["profession"] == prepared["csv"]["profession"]


# ---- 4: the card of one's own data ------------------------------------------------------------
def _own_fairface(tmp_path: Path, lines: list[str]) -> Path:
    source = tmp_path / "my-faces"
    (source / "val").mkdir(parents=True)
    (source / "fairface_label_val.csv").write_text("file,age,gender,race,service_test\n" + "".join(lines))
    for line in lines:
        (source / line.split(",")[0]).write_bytes(_png(len(line)))
    return source


def test_a_card_of_one_s_own_data_names_it_and_states_no_licence(tmp_path, capsys):
    """FairFace's format, not FairFace's label files (two rows of one's own): the card is named for the
    folder (or --name), its licence unknown, FairFace's name, licence and citation nowhere."""
    source = _own_fairface(tmp_path, ["val/1.jpg,20-29,Male,White,False\n", "val/2.jpg,3-9,Female,Black,True\n"])
    assert main(["prepare", "fairface", "--source", str(source), "--out", str(tmp_path / "out"), "-q"]) == 0
    front, text = _card(tmp_path / "out")
    assert front["pretty_name"] == "my-faces" and front["license"] == "unknown"
    assert front["vlfair"]["published_release"] is False and front["vlfair"]["schema"] == "fairface"
    assert "# my-faces (prepared by vlfair)" in text and "cc-by" not in text.lower()
    assert "FairFace (prepared by vlfair)" not in text and "karkkainen2021fairface" not in text
    assert "in FairFace's format but not FairFace's own" in text and "## Licence" in text
    assert main(["prepare", "fairface", "--source", str(source), "--out", str(tmp_path / "named"), "-q",
                 "--name", "Clinic portraits: 2024"]) == 0
    front, text = _card(tmp_path / "named")
    assert front["pretty_name"] == "Clinic portraits: 2024" and front["license"] == "unknown"
    assert "# Clinic portraits: 2024 (prepared by vlfair)" in text
    capsys.readouterr()


def test_only_fairface_s_own_label_files_keep_fairface_s_card(tmp_path):
    """The rule: FairFace's header, its release's row count and its images numbered in order. The first
    rows of FairFace's own validation labels are a subset, not the release: a card of one's own data."""
    with open(FAIRFACE_CSV) as handle:
        lines = handle.readlines()[1:6]
    built = build_fairface(_own_fairface(tmp_path, lines))
    assert built.published is False and "not FairFace's own" in built.provenance


def test_a_published_release_s_card_states_the_rule_that_gave_it_its_licence():
    """FairFace's and Multi30K's templates (cards/, installed as vlfair._cards) say why the card is theirs: the
    builder's provenance, the rule that recognised the release (read from the repository's cards, which an
    editable install of another checkout would not serve)."""
    from vlfair.data.build import FAIRFACE_PROVENANCE

    cards = Path(__file__).resolve().parent.parent / "cards"
    for name in ("fairface", "multi30k"):
        text = (cards / f"{name}.md").read_text()
        assert "because ${provenance}" in text and "one's own data" in text, name
    assert "## Licence\n\nCC BY 4.0, FairFace's licence" in (cards / "fairface.md").read_text()
    assert "86,744 (train) and 10,954 (val) rows" in FAIRFACE_PROVENANCE


@pytest.mark.parametrize("dataset", ["professions", "pfi"])
def test_the_studies_images_vlfair_cannot_recognise_always_get_a_card_of_one_s_own(tmp_path, dataset):
    source, _ = _professions_folder(tmp_path / "study-images", per_cell=1)
    if dataset == "pfi":
        (source / "metadata.csv").write_text("file_name,name,category,gender\nimg0.png,Ann A,senator,Female\n"
                                             "img1.png,Bob B,actor,Male\n")
    prepare(dataset, source, tmp_path / "out")
    front, text = _card(tmp_path / "out")
    assert front["pretty_name"] == "study-images" and front["license"] == "unknown"
    assert "license_name" not in front and "vlfair cannot tell" in text


# ---- 5: the same images raw and prepared have the same ids -----------------------------------------
def test_a_sample_s_id_is_the_hash_of_its_image_file_s_bytes_in_every_form(tmp_path):
    """A path, an image struct whose bytes are null (datasets' imagefolder of a local folder), the bytes
    themselves (a prepared dataset) and a datasets.Dataset of paths: one id per image."""
    folder, rows = _professions_folder(tmp_path / "mine", per_cell=1)
    paths = [str(folder / r["file_name"]) for r in rows]
    by_bytes = row_digests([{"bytes": Path(p).read_bytes(), "path": None} for p in paths], range(len(paths)))
    assert len(set(by_bytes)) == len(paths)
    assert row_digests(paths, range(len(paths))) == by_bytes
    assert row_digests([{"bytes": None, "path": p} for p in paths], range(len(paths))) == by_bytes
    assert row_digests(datasets.Dataset.from_dict({"image": paths}), range(len(paths))) == by_bytes
    imagefolder = datasets.load_dataset("imagefolder", data_dir=str(folder), split="train")
    assert imagefolder.data.column("image").to_pylist()[0]["bytes"] is None  # cells that name their files
    assert row_digests(imagefolder, range(len(paths))) == by_bytes
    ours = vlfair.load_dataset("imagefolder", folder, columns=["profession", "gender", "race"])
    assert row_digests(ours, range(len(paths))) == by_bytes
    # the same bytes under another name and time are the same image; other bytes under the old name are not
    copy = tmp_path / "elsewhere.png"
    shutil.copy(paths[0], copy)
    assert row_digests([str(copy)], [0]) == by_bytes[:1]
    Path(paths[0]).write_bytes(_png(99))
    assert row_digests([paths[0]], [0]) != by_bytes[:1]


def test_the_same_images_raw_and_prepared_compare_row_by_row(clip_dir, tmp_path, capsys):
    """A folder with metadata.csv run as it is (`--dataset DIR`: datasets' imagefolder, cells naming the
    files) and prepared (`vlfair prepare` then `--dataset OUT`: the bytes in Parquet): the same ids, and
    `vlfair compare` pairs every row of the two runs."""
    folder, rows = _professions_folder(tmp_path / "mine")
    assert main(["prepare", "professions", "--source", str(folder), "--out", str(tmp_path / "prepared"), "-q"]) == 0
    runs = {}
    for form, dataset in (("raw", folder), ("prepared", tmp_path / "prepared")):
        runs[form] = tmp_path / "runs" / form
        assert main(["run", "professions", "--model", str(clip_dir), "--dataset", str(dataset), "--out",
                     str(runs[form]), "--cache-dir", str(tmp_path / "cache"), "--set", "bootstrap=0",
                     "--set", "n_permutations=0", "-q"]) == 0
    ids = {form: pd.read_parquet(run / "samples.parquet")["id"].tolist() for form, run in runs.items()}
    assert ids["raw"] == ids["prepared"] and len(set(ids["raw"])) == len(rows)
    # the data's fingerprints differ (another form): refused as such, saying the images are the same
    code, _, err = _run(capsys, "compare", str(runs["raw"]), str(runs["prepared"]), "--out", str(tmp_path / "cmp"))
    assert code == 2 and "dataset fingerprint differs" in err and "though every sample id is in each run" in err
    assert "0 in all of them" not in err
    code, _, err = _run(capsys, "compare", str(runs["raw"]), str(runs["prepared"]), "--on-common-rows",
                        "--bootstrap", "50", "--permutations", "50", "--out", str(tmp_path / "cmp"), "-q")
    assert code == 0, err
    content = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert content["rows"] == {"compared": len(rows), "per_run": [len(rows), len(rows)], "on_common_rows": True}
    assert content["differences"]
    for difference in content["differences"]:  # one model on the same images: nothing differs
        assert abs(difference["difference"]) < 1e-5, difference
