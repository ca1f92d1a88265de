"""Issue 66: a researcher's own images, in every form they come in, in their own groups (vlfair.data.forms,
vlfair.data.taxonomy, vlfair.probes.grouping), through load_dataset and `vlfair run`."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import datasets
import numpy as np
import pytest

from vlfair import logging as vlfair_logging
from vlfair.cli import main
from vlfair.data import DataError, load_dataset
from vlfair.data.taxonomy import Taxonomy, age_range, bin_of, check_age_bins
from vlfair.testing import write_jpegs

RACES = ("White", "Black", "East Asian", "Indian")
UTK_RACES = ("White", "Black", "Asian", "Indian", "Others")
ROWS = 16


def _labels(index: int) -> dict[str, str]:
    return {"race": RACES[index % 4], "gender": ("Male", "Female")[index // 4 % 2], "age": "20-29"}


def _write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> list[Path]:
    return write_jpegs(tmp_path_factory.mktemp("own-images"), ROWS)


def _folder(root: Path, images: list[Path], sub: str = "") -> Path:
    (root / sub).mkdir(parents=True, exist_ok=True)
    for image in images:
        shutil.copy(image, root / sub / image.name)
    return root


def _rows(dataset: datasets.Dataset) -> list[tuple]:
    """Each row as (image bytes, race, gender), in the dataset's order."""
    cells = dataset.cast_column("image", datasets.Image(decode=False))
    return [(cell["bytes"], race, gender) for cell, race, gender in
            zip(cells["image"][:], dataset["race"][:], dataset["gender"][:])]


# ---- every form read the same way --------------------------------------------------------------------------
def _every_form(root: Path, images: list[Path]) -> dict[str, str]:
    """The same images and labels in each form a user has; form -> the source to pass."""
    names = [image.name for image in images]
    labels = [_labels(i) for i in range(len(images))]
    sources = {}
    for suffix in ("csv", "jsonl", "parquet"):  # a folder with its metadata file
        folder = _folder(root / f"meta-{suffix}", images)
        table = [{"file_name": name, **label} for name, label in zip(names, labels)]
        if suffix == "csv":
            _write_csv(folder / "metadata.csv", list(table[0]), [list(row.values()) for row in table])
        elif suffix == "jsonl":
            (folder / "metadata.jsonl").write_text("".join(json.dumps(row) + "\n" for row in table))
        else:
            datasets.Dataset.from_list(table).to_parquet(str(folder / "metadata.parquet"))
        sources[f"metadata.{suffix} folder"] = str(folder)
    sources["the metadata file itself"] = str(root / "meta-csv" / "metadata.csv")
    # a label file of another name, its images in a folder beside it, under a column of its own name
    other = _folder(root / "labels-table", images, "photos")
    _write_csv(other / "people.csv", ["path", "ethnicity", "gender", "age"],
               [[f"photos/{name}", label["race"], label["gender"], label["age"]] for name, label in zip(names, labels)])
    sources["a table with an image column"] = str(other / "people.csv")
    saved = root / "saved"
    load_dataset("fairface", sources["metadata.csv folder"]).save_to_disk(str(saved))
    sources["a saved dataset"] = str(saved)
    return sources


def test_every_form_of_the_same_images_reads_as_the_same_rows(images, tmp_path, capsys):
    sources = _every_form(tmp_path, images)
    expected = [(image.read_bytes(), _labels(i)["race"], _labels(i)["gender"]) for i, image in enumerate(images)]
    for form, source in sources.items():
        columns = "race=ethnicity" if form == "a table with an image column" else None
        vlfair_logging.set_verbosity("info")
        capsys.readouterr()
        dataset = load_dataset("fairface", source, columns=columns)
        assert _rows(dataset) == expected, form
        if form != "a saved dataset":  # the reader says what it read
            assert f"{ROWS} images from column" in capsys.readouterr().out, form
    # the same rows, the same fingerprint: runs of one folder share a family whatever the run
    again = load_dataset("fairface", sources["metadata.csv folder"])
    assert again._fingerprint == load_dataset("fairface", sources["metadata.csv folder"])._fingerprint


def test_label_folders_and_a_named_form(images, tmp_path):
    root = tmp_path / "by-race"
    for i, image in enumerate(images):
        _folder(root, [image], RACES[i % 4])
    # one attribute per layout (the folders' names), named as the probe's column with --columns; FairFace's
    # other required column is then said to be missing, by name
    with pytest.raises(DataError, match=r"lacks columns \['gender'\]"):
        load_dataset("fairface", str(root), columns="race=label")
    from vlfair.data.forms import FORMS, read_form

    table, found = read_form(root, FORMS["imagefolder"], {"race": "label"})
    assert sorted(table["race"][:]) == sorted(RACES[i % 4] for i in range(ROWS))
    assert found is not None and "from the folders' names" in found.found()
    with pytest.raises(DataError, match=r"is not a folder of UTKFace's images"):
        load_dataset("fairface", f"utkface:{root}")


def test_a_path_no_form_reads_says_what_each_form_wants(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    for source in (tmp_path, tmp_path / "notes.txt"):
        with pytest.raises(DataError, match=r"is in no form vlfair reads \(vlfair reads: saved: .*metadata: .*table: "
                                            r".*utkface: .*imagefolder: "):
            load_dataset("fairface", str(source))


# ---- UTKFace: labels in its file names ---------------------------------------------------------------------
def _utkface(root: Path, images: list[Path], ages=(23, 35, 47, 8, 66)) -> Path:
    """UTKFace's layout: [age]_[gender]_[race]_[date&time].jpg.chip.jpg (gender 0 male 1 female, race 0-4)."""
    root.mkdir(parents=True, exist_ok=True)
    for i, image in enumerate(images):
        shutil.copy(image, root / f"{ages[i % len(ages)]}_{i // 5 % 2}_{i % 5}_2017010{i:06d}.jpg.chip.jpg")
    return root


def test_utkface_names_are_read_as_its_labels_and_its_ages_binned(images, tmp_path):
    root = _utkface(tmp_path / "utk", images)
    with pytest.raises(DataError, match=r"_2_2017010000002.jpg.chip.jpg, column 'race' has 'Asian', not one of .*"
                                        r"fold it into a group with a label map \(--set labels.race=@map.yaml"):
        load_dataset("fairface", str(root))
    own = Taxonomy(groups={"race": list(UTK_RACES)})
    dataset = load_dataset("fairface", str(root), taxonomy=own, subset="default")
    files = sorted(root.iterdir())
    by_name = {Path(cell["path"]).name: (race, gender, age) for cell, race, gender, age in zip(
        dataset.cast_column("image", datasets.Image(decode=False))["image"][:], dataset["race"][:],
        dataset["gender"][:], dataset["age"][:])}
    for file in files:
        age, gender, race = (int(part) for part in file.name.split("_")[:3])
        assert by_name[file.name] == (UTK_RACES[race], ("Male", "Female")[gender], bin_of(age, own.bins(
            datasets_column("age"))))
    assert set(dataset["age"][:]) == {"20-29", "30-39", "40-49", "3-9", "60-69"}  # FairFace's bins by default
    adults = load_dataset("fairface", str(root), taxonomy=own, subset="adults")
    assert sorted(set(adults["age"][:])) == ["20-29", "30-39", "40-49"]
    # bins of one's own: the adults are the bins whose every age lies in 20-59
    own_bins = Taxonomy(groups={"race": list(UTK_RACES)}, age_bins=["0-19", "20-39", "40-59", "60+"])
    binned = load_dataset("fairface", str(root), subset="adults", taxonomy=own_bins)
    assert sorted(set(binned["age"][:])) == ["20-39", "40-59"]
    assert binned.num_rows == adults.num_rows


def datasets_column(name: str):
    from vlfair.data.registry import SCHEMAS

    return SCHEMAS["fairface"].column(name)


def test_a_label_map_folds_labels_into_the_groups(images, tmp_path):
    root = _utkface(tmp_path / "utk", images)
    fold = {"Asian": "East Asian", "Others": "Middle Eastern"}
    dataset = load_dataset("fairface", str(root), subset="default", taxonomy=Taxonomy(labels={"race": fold}))
    assert set(dataset["race"][:]) == {"White", "Black", "East Asian", "Indian", "Middle Eastern"}
    # numeric codes in a label file are folded by the map's text keys (YAML's 2: Asian is "2")
    with pytest.raises(DataError, match=r"labels.race maps to 'Klingon', not one of the groups"):
        load_dataset("fairface", str(root), taxonomy=Taxonomy(labels={"race": {"Asian": "Klingon"}}))
    with pytest.raises(DataError, match=r"labels.race sends the group 'White' to 'Black': two groups the probe tells "
                                        r"apart would be one"):
        load_dataset("fairface", str(root), taxonomy=Taxonomy(labels={"race": {"White": "Black", **fold}}))


@pytest.mark.parametrize("bins, problem", [
    (["0-19", "15-39"], "'0-19' and '15-39' overlap"), (["adults"], "'adults' is not an age range"),
    (["40-20"], "'40-20' is not an age range")])
def test_age_bins_that_cannot_bin_an_age_are_refused(bins, problem):
    assert any(problem in found for found in check_age_bins(bins))


def test_an_age_falls_in_the_one_bin_that_holds_it():
    bins = ["0-2", "3-9", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69", "more than 70"]
    assert not check_age_bins(bins)
    for age in np.arange(0, 100, 0.5):  # brute force: the bins whose ranges hold the age's whole years
        holding = [b for b in bins if age_range(b)[0] <= math.floor(age) <= age_range(b)[1]]
        assert [bin_of(float(age), bins)] == holding
    assert age_range("70+") == age_range("70 and over") == (70, math.inf)


# ---- errors in the user's terms ----------------------------------------------------------------------------
def test_a_label_files_errors_name_its_file_line_and_column(images, tmp_path):
    folder = _folder(tmp_path / "own", images[:4])
    rows = [[image.name, *_labels(i).values()] for i, image in enumerate(images[:4])]
    rows[2][1] = "Martian"  # line 4 of the file: the header is line 1
    _write_csv(folder / "metadata.csv", ["file_name", "race", "gender", "age"], rows)
    with pytest.raises(DataError, match=r"^metadata.csv line 4, column 'race' has 'Martian', not one of"):
        load_dataset("fairface", str(folder))
    rows[2][1], rows[1][3] = "White", "twenty"
    _write_csv(folder / "metadata.csv", ["file_name", "race", "gender", "age"], rows)
    with pytest.raises(DataError, match=r"^metadata.csv line 3, column 'age' has 'twenty', not one of .*a numeric age "
                                        r"falls in the age bins"):
        load_dataset("fairface", str(folder))
    (folder / "metadata.csv").unlink()
    (folder / "metadata.jsonl").write_text(json.dumps({"file_name": images[0].name, **_labels(0)}) + "\n\n"
                                           + json.dumps({"file_name": images[1].name, **_labels(1), "race": "?"}))
    with pytest.raises(DataError, match=r"^metadata.jsonl line 3, column 'race' has '\?'"):
        load_dataset("fairface", str(folder))


@pytest.mark.parametrize("case, match", [
    ("header twice", r"metadata.csv line 1: the column 'race' is named twice"),
    ("columns twice", r"--columns: the data's column 'ethnicity' is named twice"),
    ("outside", r"1 of 1 rows of .*metadata.csv name no readable image:\n  metadata.csv line 2: path '../x.jpg' "
                r"leaves the source directory"),
    ("no image column", r"metadata.csv: no image column \(one of file_name, .*\); it has \['picture', 'race', "
                        r"'gender'\]: name yours with --columns image=COLUMN"),
    ("split", r"--split train: .* is one set of images \(metadata\), with no splits"),
])
def test_bad_own_data_is_one_line_naming_it(images, tmp_path, case, match):
    folder = _folder(tmp_path / "own", images[:1])
    header, row = ["file_name", "race", "gender"], [images[0].name, "White", "Male"]
    options: dict = {}
    if case == "header twice":
        header, row = ["file_name", "race", "race"], [images[0].name, "White", "Black"]
    elif case == "columns twice":
        header, options = ["file_name", "ethnicity", "gender"], {"columns": "race=ethnicity,gender=ethnicity"}
    elif case == "outside":
        row[0] = "../x.jpg"
    elif case == "no image column":
        header = ["picture", "race", "gender"]
    elif case == "split":
        options = {"split": "train"}
    _write_csv(folder / "metadata.csv", header, [row])
    with pytest.raises(DataError, match=match):
        load_dataset("fairface", str(folder), **options)


# ---- the CLI: one command per probe, from README's own-data section ----------------------------------------
def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


FAST = ("--set", "bootstrap=20", "--set", "n_permutations=20", "--no-figures")


def test_a_utkface_folder_runs_traits_retrieval_and_professions(images, tmp_path, clip_dir, capsys):
    root = _utkface(tmp_path / "utk", images)
    groups = f"groups.race=[{','.join(UTK_RACES)}]"
    code, _ = _cli(capsys, "run", "traits", "--model", str(clip_dir), "--dataset", str(root), "--out",
                   str(tmp_path / "traits"), "--per-cell", "1", "--set", groups, *FAST)
    assert code == 0
    traits = json.loads((tmp_path / "traits" / "results.json").read_text())
    assert {m["subset"].get("race") for m in traits["metrics"]} - {None} <= set(UTK_RACES)
    assert traits["probe_settings"]["groups"] == {"race": list(UTK_RACES)}
    code, err = _cli(capsys, "run", "retrieval", "--model", str(clip_dir), "--dataset", f"utkface:{root}", "--out",
                     str(tmp_path / "retrieval"), "--set", "k=8", "--set", groups, *FAST)
    assert code == 0, err
    retrieval = json.loads((tmp_path / "retrieval" / "results.json").read_text())
    assert {m["subset"].get("group") for m in retrieval["metrics"]
            if m["subset"].get("attribute") == "race"} - {None} <= set(UTK_RACES)
    # professions: a label file of the researcher's names, mapped to the probe's with --columns
    _write_csv(root / "jobs.csv", ["path", "job", "sex", "ethnicity"],
               [[p.name, ("doctor", "nurse")[i % 2], ("Male", "Female")[i // 2 % 2], UTK_RACES[i % 5]]
                for i, p in enumerate(sorted(root.glob("*.jpg")))])
    code, _ = _cli(capsys, "run", "professions", "--model", str(clip_dir), "--dataset", str(root / "jobs.csv"),
                   "--columns", "image=path,profession=job,gender=sex,race=ethnicity", "--out",
                   str(tmp_path / "professions"), *FAST)
    assert code == 0
    professions = json.loads((tmp_path / "professions" / "results.json").read_text())
    assert {m["subset"].get("profession") for m in professions["metrics"]} - {None} == {"doctor", "nurse"}
    # another taxonomy is another family; the study's groups (the defaults) are the family every run had
    code, _ = _cli(capsys, "run", "traits", "--model", str(clip_dir), "--dataset", str(root), "--out",
                   str(tmp_path / "folded"), "--per-cell", "1", *FAST,
                   "--set", "labels.race={Asian: East Asian, Others: Middle Eastern}")
    assert code == 0
    folded = json.loads((tmp_path / "folded" / "results.json").read_text())
    assert folded["family"] != traits["family"]


def test_the_default_groups_leave_a_runs_family_as_it_was(clip_dir):
    from vlfair.probes.registry import probe_class

    for name in ("traits", "retrieval", "professions"):
        probe = probe_class(name)()
        settings = probe.settings.model_dump(mode="json")
        assert {"groups", "labels", "age_bins"} <= set(settings)
        measured = probe.measuring_settings(settings)
        assert not {"groups", "labels", "age_bins"} & set(measured), name
        changed = probe_class(name)({"groups": {"gender": ["Male", "Female", "Non-binary"]}})
        assert changed.measuring_settings(changed.settings.model_dump(mode="json"))["groups"] == {
            "gender": ["Male", "Female", "Non-binary"]}


@pytest.mark.parametrize("argv, match", [
    (["--set", "groups.colour=[a,b]"], r"setting groups.colour: fairface data has no attribute 'colour'"),
    (["--set", "age_bins=[0-19,15-39]"], r"'0-19' and '15-39' overlap"),
    (["--set", "groups.race=[White]"], r"groups"),
    (["--columns", "race=ethnicity"], r"--columns names 'ethnicity', which the data lacks"),
    (["--columns", "race"], r"'race' is not NAME=COLUMN"),
])
def test_bad_grouping_on_the_command_line_is_one_line_and_writes_nothing(images, tmp_path, clip_dir, capsys, argv,
                                                                          match):
    root = _utkface(tmp_path / "utk", images)
    out = tmp_path / "out"
    code, err = _cli(capsys, "run", "traits", "--model", str(clip_dir), "--dataset", str(root), "--out", str(out),
                     *argv)
    assert code == 2 and not out.exists()
    assert err.startswith("vlfair run: ") and len(err.strip().splitlines()) == 1
    assert __import__("re").search(match, err), err


def test_readmes_own_data_commands_run_as_written(images, tmp_path, clip_dir, capsys):
    """README's own-data section, each command run as written but for its sizes (a tiny model, 16 images): the
    folder names, flags and settings a reader copies."""
    import shlex

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text[text.index("## Your own data"):]
    block = section[section.index("```bash") + len("```bash"):section.index("```", section.index("```bash") + 7)]
    commands = [shlex.split(line, comments=True) for line in block.replace("\\\n", " ").splitlines()
                if line.strip().startswith("vlfair run")]
    assert [command[2] for command in commands] == ["traits", "retrieval", "professions"]
    utk = _utkface(tmp_path / "UTKFace", images)
    photos = _folder(tmp_path / "my-photos", images)
    _write_csv(photos / "jobs.csv", ["path", "job", "sex", "ethnicity"],
               [[p.name, ("doctor", "nurse")[i % 2], ("Male", "Female")[i // 2 % 2], UTK_RACES[i % 5]]
                for i, p in enumerate(images)])
    places = {"UTKFace/": str(utk), "my-photos/jobs.csv": str(photos / "jobs.csv")}
    sizes = {"traits": ["--per-cell", "1"], "retrieval": ["--set", "k=8"], "professions": []}
    for command in commands:
        argv = command[1:]
        argv[argv.index("--model") + 1] = str(clip_dir)
        dataset = argv.index("--dataset") + 1
        argv[dataset] = places[argv[dataset]]
        out = argv.index("--out") + 1
        argv[out] = str(tmp_path / argv[out])
        if "--per-cell" in argv:
            del argv[argv.index("--per-cell"):argv.index("--per-cell") + 2]
        code, err = _cli(capsys, *argv, *sizes[command[2]], *FAST)
        assert code == 0, (command, err)
        assert (Path(argv[out]) / "results.json").is_file()
