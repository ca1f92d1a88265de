"""Datasets: the real FairFace and Multi30K files built with placeholder images, loaders, twins."""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import shutil
from pathlib import Path

import datasets
import pytest
import yaml
from PIL import Image

import vlfair
from vlfair.cli import main
from vlfair.data import DataError, balanced_sample, load_dataset, sampling_record
from vlfair.data.build import BuildError, build_fairface, prepare
from vlfair.data.schemas import AGE_GROUP_OF_BIN, FAIRFACE_AGE_BINS

DATA = Path(__file__).resolve().parent / "data"  # real label and caption files; see its README
FAIRFACE_CSV = DATA / "fairface" / "fairface_label_val.csv"
MULTI30K = DATA / "multi30k"


def _jpeg(color=(120, 80, 40)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(buffer, format="JPEG")
    return buffer.getvalue()


def _placeholders(directory: Path, names, data: bytes | None = None) -> None:
    data = data or _jpeg()
    for name in names:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _card_yaml(card: str) -> dict:
    return yaml.safe_load(re.match(r"^---\n(.*?)\n---\n", card, re.S).group(1))


@pytest.fixture(scope="module")
def fairface_source(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("fairface-raw")
    shutil.copy(FAIRFACE_CSV, source / "fairface_label_val.csv")
    with open(FAIRFACE_CSV) as handle:
        _placeholders(source, [row["file"] for row in csv.DictReader(handle)])
    return source


@pytest.fixture(scope="module")
def fairface_out(fairface_source, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fairface-prepared")
    assert main(["prepare", "fairface", "--source", str(fairface_source), "--out", str(out)]) == 0
    return out


def test_fairface_validation_builds_with_every_label(fairface_out):
    ds = load_dataset("fairface", source=fairface_out, split="validation")
    assert ds.num_rows == 10_954
    assert len(set(ds["race"])) == 7 and set(ds["gender"]) == {"Male", "Female"}
    assert set(ds["age"]) == set(FAIRFACE_AGE_BINS)
    with open(FAIRFACE_CSV) as handle:
        raw = list(csv.DictReader(handle))
    assert ds["file"] == [r["file"] for r in raw] and ds["race"] == [r["race"] for r in raw]
    assert ds["service_test"] == [r["service_test"] == "True" for r in raw]
    assert isinstance(ds.features["image"], datasets.Image) and ds[0]["image"].size == (8, 8)


def test_fairface_adults_and_age_groups(fairface_out):
    adults = load_dataset("fairface", source=fairface_out, subset="adults", split="validation")
    assert adults.num_rows == 7_779 and set(adults["age"]) == {"20-29", "30-39", "40-49", "50-59"}
    assert set(AGE_GROUP_OF_BIN) == set(FAIRFACE_AGE_BINS)  # the mapping covers every bin
    grouped = load_dataset("fairface", source=fairface_out, subset="age_groups", split="validation")
    assert grouped.num_rows == 10_954 and set(grouped["age_group"]) == {"0-2", "3-19", "20-49", "50-69", "70+"}
    assert all(AGE_GROUP_OF_BIN[a] == g for a, g in zip(grouped["age"], grouped["age_group"]))


def test_balanced_sampling(fairface_out):
    adults = load_dataset("fairface", source=fairface_out, subset="adults", split="validation")
    sample = balanced_sample(adults, 50, seed=3)
    cells = {}
    for race, gender in zip(sample["race"], sample["gender"]):
        cells[(race, gender)] = cells.get((race, gender), 0) + 1
    assert len(cells) == 14 and set(cells.values()) == {50}
    assert balanced_sample(adults, 50, seed=3)["file"] == sample["file"]
    assert balanced_sample(adults, 50, seed=4)["file"] != sample["file"]
    with pytest.raises(DataError) as info:
        balanced_sample(adults, 2000)
    assert "14 cells have fewer than 2000 rows" in str(info.value) and "Middle Eastern/Female: 291" in str(info.value)
    relaxed = balanced_sample(adults, 300, allow_fewer=True)
    record = sampling_record(relaxed)
    assert record["short_cells"] == [{"cell": ["Middle Eastern", "Female"], "rows": 291}]
    assert relaxed.num_rows == 13 * 300 + 291


def test_fairface_card_lists_configs(fairface_out):
    card = (fairface_out / "README.md").read_text()
    config = _card_yaml(card)
    assert [c["config_name"] for c in config["configs"]] == ["default", "adults"]
    assert config["configs"][0]["default"] is True
    # every path of the card is a file of the directory, which is laid out as the Hub repository
    for entry in config["configs"]:
        for data_file in entry["data_files"]:
            assert (fairface_out / data_file["path"]).is_file(), data_file
    assert config["configs"][1]["data_files"] == [{"split": "validation",
                                                   "path": "adults/validation-00000-of-00001.parquet"}]
    assert config["license"] == "cc-by-4.0" and config["size_categories"] == ["10K<n<100K"]
    assert config["vlfair"]["schema"] == "fairface" and not (fairface_out / "vlfair.json").exists()
    # FairFace's own label file (issue 66): FairFace's card, its name and licence, and why
    assert config["pretty_name"] == "FairFace (prepared by vlfair)" and config["vlfair"]["published_release"] is True
    info = {i["config_name"]: i for i in config["dataset_info"]}
    assert {f["name"] for f in info["default"]["features"]} >= {"image", "file", "age", "gender", "race"}
    split = info["adults"]["splits"][0]
    assert split["name"] == "validation" and split["num_examples"] == 7_779 and split["num_bytes"] > 0
    assert (info["adults"]["download_size"]
            == (fairface_out / "adults" / "validation-00000-of-00001.parquet").stat().st_size)
    gender = next(f for f in info["default"]["features"] if f["name"] == "gender")
    assert gender["dtype"] == {"class_label": {"names": {"0": "Male", "1": "Female"}}}  # the schema's names
    for section in ("## Intended use", "## Known biases and limitations", "## Citation",
                    "| adults | validation | 7779 |"):
        assert section in card


PLAIN_LOAD = """
import sys, datasets
directory = sys.argv[1]
default = datasets.load_dataset(directory, split="validation")
adults = datasets.load_dataset(directory, "adults", split="validation")
names = default.features["gender"].names
split = default.train_test_split(test_size=0.2, stratify_by_column="gender", seed=0)
print(default.num_rows, adults.num_rows, names, split["test"].num_rows)
"""


def test_prepared_data_loads_with_plain_datasets_without_warnings(fairface_out, tmp_path):
    """As a user of the Hub copy would: labels are ClassLabels (stratified splits work), no warning."""
    import subprocess
    import sys

    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", PLAIN_LOAD, str(fairface_out)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[:2] == ["10954", "7779"] and "['Male', 'Female']" in done.stdout
    assert "Ignoring part of dataset_info" not in done.stderr
    assert not [line for line in done.stderr.splitlines() if "warn" in line.lower()], done.stderr[-2000:]


def test_hub_format_twin_with_classlabels_maps_to_the_same_names(tmp_path, fairface_out):
    """HuggingFaceM4/FairFace stores labels as ClassLabel ids in its own order: map by name."""
    ours = load_dataset("fairface", source=fairface_out, split="validation").select(range(300))
    hub_order = {"age": ["0-2", "3-9", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69",
                         "more than 70"],
                 "gender": ["Male", "Female"],
                 "race": ["East Asian", "Indian", "Black", "White", "Middle Eastern", "Latino_Hispanic",
                          "Southeast Asian"]}
    features = datasets.Features({"image": datasets.Image(),
                                  **{c: datasets.ClassLabel(names=n) for c, n in hub_order.items()},
                                  "service_test": datasets.Value("bool")})
    twin = datasets.Dataset.from_dict({"image": ours["image"],
                                       **{c: [hub_order[c].index(v) for v in ours[c]] for c in hub_order},
                                       "service_test": ours["service_test"]}, features=features)
    repo = tmp_path / "FairFace"
    (repo / "0.25").mkdir(parents=True)
    twin.to_parquet(str(repo / "0.25" / "validation-00000-of-00001.parquet"))
    (repo / "README.md").write_text("---\nconfigs:\n- config_name: '0.25'\n  data_files:\n  - split: validation\n"
                                    "    path: 0.25/validation-*\n---\n")
    loaded = load_dataset("fairface", source=str(repo), config="0.25", split="validation")
    assert loaded.features["race"] == datasets.Value("string")
    for column in ("age", "gender", "race"):
        assert loaded[column] == ours[column]
    assert loaded["file"] == [None] * 300  # the Hub copy has no file names


@pytest.fixture(scope="module")
def multi30k_out(tmp_path_factory) -> Path:
    images = tmp_path_factory.mktemp("flickr30k")
    names = set((MULTI30K / "task1" / "test_2016_flickr.images.txt").read_text().split())
    names |= set((MULTI30K / "task2" / "test_2016.images.txt").read_text().split())
    _placeholders(images, sorted(names))
    out = tmp_path_factory.mktemp("multi30k-prepared")
    prepare("multi30k", MULTI30K, out, images=images)
    return out


def _raw(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def test_multi30k_translation_portion_is_aligned(multi30k_out):
    ds = load_dataset("multi30k", source=multi30k_out, subset="translation")
    assert ds.num_rows == 1000 and set(ds["portion"]) == {"translation"} and set(ds["caption_index"]) == {1}
    for language in ("en", "de", "fr", "cs"):
        assert ds[language] == _raw(MULTI30K / "task1" / f"test_2016_flickr.{language}.gz")
    assert ds["image_file"] == (MULTI30K / "task1" / "test_2016_flickr.images.txt").read_text().split()


def test_multi30k_independent_portion_has_five_captions_per_image(multi30k_out):
    ds = load_dataset("multi30k", source=multi30k_out, subset="independent")
    assert ds.num_rows == 5000 and len(set(ds["image_file"])) == 1000
    images = (MULTI30K / "task2" / "test_2016.images.txt").read_text().split()
    # read once, not cell by cell
    table = ds.select_columns(["caption_index", "image_file", "en", "de", "fr"]).to_dict()
    for j in range(1, 6):
        rows = [i for i, index in enumerate(table["caption_index"]) if index == j]
        assert [table["image_file"][i] for i in rows] == images
        assert [table["en"][i] for i in rows] == _raw(MULTI30K / "task2" / f"test_2016.{j}.en.gz")
        assert [table["de"][i] for i in rows] == _raw(MULTI30K / "task2" / f"test_2016.{j}.de.gz")
    assert set(table["fr"]) == {None}
    config = _card_yaml((multi30k_out / "README.md").read_text())
    assert [c["config_name"] for c in config["configs"]] == ["translation", "independent"]


def _small_fairface(tmp_path: Path, rows: list[tuple[str, str, str, str]], make_files=True) -> Path:
    source = tmp_path / "raw"
    source.mkdir()
    with open(source / "fairface_label_val.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["file", "age", "gender", "race", "service_test"])
        for file, age, gender, race in rows:
            writer.writerow([file, age, gender, race, "False"])
    if make_files:
        _placeholders(source, [r[0] for r in rows if not r[0].startswith(("/", ".."))
                               and "missing" not in r[0]])
    return source


BAD_ROWS = [
    ("val/1.jpg", "20-29", "Male", "White"),
    ("../outside.jpg", "20-29", "Male", "White"),
    ("/etc/passwd", "20-29", "Male", "White"),
    ("val/missing.jpg", "30-39", "Female", "Black"),
    ("val/1.jpg", "30-39", "Female", "Black"),
    ("val/5.jpg", "03-Sep", "Female", "Indian"),
    ("val/6.jpg", "40-49", "Female", "Martian"),
    ("val/7.jpg", "40-49", "female", "latino hispanic"),
]


def test_every_bad_row_is_reported_with_its_row(tmp_path):
    source = _small_fairface(tmp_path, BAD_ROWS)
    with pytest.raises(BuildError) as info:
        build_fairface(source)
    message = str(info.value)
    assert "6 bad rows" in message
    for expected in ("row 1: path '../outside.jpg' leaves the source directory",
                     "row 2: absolute path '/etc/passwd' is not allowed",
                     "row 3: image 'val/missing.jpg' is listed but missing",
                     "row 4: duplicate file name 'val/1.jpg' (also row 0)",
                     "row 5: column 'age' has '03-Sep'",
                     "row 6: column 'race' has 'Martian'"):
        assert expected in message


def test_skip_bad_leaves_rows_out_and_lists_them_in_the_card(tmp_path):
    source = _small_fairface(tmp_path, BAD_ROWS)
    out = tmp_path / "out"
    # refused, as every command refuses what it was given: exit 2
    assert main(["prepare", "fairface", "--source", str(source), "--out", str(out)]) == 2
    assert main(["prepare", "fairface", "--source", str(source), "--out", str(out), "--skip-bad"]) == 0
    ds = load_dataset("fairface", source=out, split="validation")
    assert ds["file"] == ["val/1.jpg", "val/7.jpg"]
    assert ds["gender"] == ["Male", "Female"] and ds["race"][1] == "Latino_Hispanic"  # spellings unified
    card = (out / "README.md").read_text()
    assert "fairface_label_val.csv row 5: column 'age' has '03-Sep'" in card
    assert _card_yaml(card)["vlfair"]["skipped_rows"] == 6


def test_fairface_images_from_the_release_zip(tmp_path):
    import zipfile

    source = _small_fairface(tmp_path, [("val/1.jpg", "20-29", "Male", "White"),
                                        ("val/2.jpg", "3-9", "Female", "Black")],
                             make_files=False)
    with zipfile.ZipFile(source / "fairface-img-margin025-trainval.zip", "w") as archive:
        archive.writestr("val/1.jpg", _jpeg((255, 0, 0)))
        archive.writestr("val/2.jpg", _jpeg((0, 0, 255)))
    built = build_fairface(source)
    images = built.configs["default"]["validation"]["image"]
    assert images[0].getpixel((4, 4))[0] > 200 and images[1].getpixel((4, 4))[2] > 200


def test_pfi_and_professions_builders(tmp_path):
    pfi = tmp_path / "pfi"
    pfi.mkdir()
    _placeholders(pfi, ["a.jpg", "b.jpg", "c.jpg"])
    (pfi / "metadata.csv").write_text("file,name,category,gender,party,state,sport\n"
                                      "a.jpg,Ann A,Senator,Female,D,OH,\nb.jpg,Bob B,senator,Male,R,TX,\n"
                                      "c.jpg,Cy C,athlete,Male,,,tennis\n")
    prepare("pfi", pfi, tmp_path / "pfi-out")
    senators = load_dataset("pfi", source=tmp_path / "pfi-out", subset="senator")
    assert senators["name"] == ["Ann A", "Bob B"] and senators["party"] == ["D", "R"]
    assert load_dataset("pfi", source=tmp_path / "pfi-out")["sport"] == [None, None, "tennis"]
    # the study's own folder names ('senator', 'mayors', 'representatives', 'athletes', 'actors') as categories
    study = tmp_path / "pfi-study"
    _placeholders(study, [f"{n}.jpg" for n in range(5)])
    (study / "metadata.csv").write_text("file,name,category,gender\n" + "".join(
        f"{n}.jpg,P {n},{folder},Female\n" for n, folder in
        enumerate(["senator", "mayors", "representatives", "athletes", "actors"])))
    prepare("pfi", study, tmp_path / "study-out")
    assert load_dataset("pfi", source=tmp_path / "study-out")["category"] == [
        "senator", "mayor", "representative", "athlete", "actor"]
    assert load_dataset("pfi", source=tmp_path / "study-out", subset="mayor")["name"] == ["P 1"]
    tree = tmp_path / "professions"
    _placeholders(tree, ["doctor/female/Black/1.jpg", "doctor/male/White/1.jpg", "nurse/female/Asian/2.jpg"])
    prepare("professions", tree, tmp_path / "prof-out")
    professions = load_dataset("professions", source=tmp_path / "prof-out")
    assert (professions["profession"] == ["doctor", "doctor", "nurse"]
            and professions["gender"] == ["Female", "Male", "Female"])


def test_prepare_draws_its_own_bar_over_the_images_and_datasets_bars_only_when_verbose(tmp_path, capsys):
    pfi = tmp_path / "pfi"
    _placeholders(pfi, ["a.jpg", "b.jpg"])
    (pfi / "metadata.csv").write_text("file,name,category,gender\na.jpg,Ann A,senator,Female\nb.jpg,Bob B,actor,Male\n")
    assert main(["prepare", "pfi", "--source", str(pfi), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "reading metadata.csv" in err and "2/2" in err  # vlfair's bar over the long step: every image decoded
    assert not any(bar in err for bar in ("Filter", "Casting", "Creating parquet", "examples/s")), err
    assert main(["prepare", "pfi", "--source", str(pfi), "--out", str(tmp_path / "verbose"), "--verbose"]) == 0
    assert "Filter" in capsys.readouterr().err  # datasets' own, under --verbose


def test_push_to_hub_uploads_every_file_the_card_names(tmp_path, monkeypatch):
    """The push is captured at the commit: every path of the card, every config (default
    included), is among the uploaded files, and the uploaded card is the local one."""
    import huggingface_hub
    from huggingface_hub import CommitOperationAdd

    commits, repos = [], []
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", lambda self, repo_id, **kw: repos.append((repo_id, kw)))
    monkeypatch.setattr(huggingface_hub.HfApi, "create_commit",
                        lambda self, repo_id, operations, **kw: commits.append((repo_id, list(operations), kw)))
    source = _small_fairface(tmp_path, [("val/1.jpg", "20-29", "Male", "White"),
                                        ("val/2.jpg", "3-9", "Female", "Black")])
    prepare("fairface", source, tmp_path / "out", push_to_hub="acme/fairface")
    assert repos == [("acme/fairface", {"repo_type": "dataset", "exist_ok": True})]
    assert len(commits) == 1 and commits[0][0] == "acme/fairface" and commits[0][2]["repo_type"] == "dataset"
    assert not [op for op in commits[0][1] if not isinstance(op, CommitOperationAdd)]
    uploaded = {op.path_in_repo: op for op in commits[0][1] if isinstance(op, CommitOperationAdd)}
    card = (tmp_path / "out" / "README.md").read_text()
    paths = [f["path"] for c in _card_yaml(card)["configs"] for f in c["data_files"]]
    assert paths == ["default/validation-00000-of-00001.parquet", "adults/validation-00000-of-00001.parquet"]
    assert set(paths) | {"README.md"} == set(uploaded)
    assert Path(uploaded["README.md"].path_or_fileobj).read_text() == card
    assert all(Path(op.path_or_fileobj).is_file() for op in uploaded.values())


def test_synthetic_twins():
    for name, rows in (("fairface", 252), ("professions", 480), ("multi30k", 40), ("pfi", 40)):
        ds = vlfair.load_dataset(f"synthetic:{name}")
        assert ds.num_rows == rows and ds.info.description.startswith("SYNTHETIC")
    first = vlfair.load_dataset("synthetic:fairface", size=30, seed=1)
    assert first["race"] == vlfair.load_dataset("synthetic:fairface", size=30, seed=1)["race"]
    assert first["race"] != vlfair.load_dataset("synthetic:fairface", size=30, seed=2)["race"]
    assert vlfair.load_dataset("synthetic:multi30k", subset="independent", size=3).num_rows == 15
    twin = vlfair.load_dataset("synthetic:fairface")
    cells = {(r, g) for r, g in zip(twin["race"], twin["gender"])}
    assert len(cells) == 14 and balanced_sample(twin, 18).num_rows == 14 * 18


def test_a_synthetic_twin_is_built_once_a_process_and_each_load_is_a_copy_of_its_own(monkeypatch):
    import dataclasses

    from vlfair.data import registry, synthetic

    built = []
    spec = registry.dataset_spec("pfi")
    generate = spec.function("twin")
    monkeypatch.setitem(registry.DATASETS, "pfi",
                        dataclasses.replace(spec, twin=lambda *args: built.append(args) or generate(*args)))
    synthetic._built.cache_clear()
    try:
        first = vlfair.load_dataset("synthetic:pfi")
        first.set_format("numpy")  # in place: on this copy only
        second = vlfair.load_dataset("synthetic:pfi")
        assert len(built) == 1 and second.format["type"] is None
        assert second["name"] == first.with_format(None)["name"] and isinstance(second[0]["name"], str)
        vlfair.load_dataset("synthetic:pfi", seed=1)
        assert len(built) == 2  # another seed is another twin
    finally:
        synthetic._built.cache_clear()  # the next test builds with the real generator


def test_imagefolder(tmp_path):
    _placeholders(tmp_path, ["x/1.png", "x/2.png"])
    (tmp_path / "metadata.jsonl").write_text('{"file_name": "x/1.png", "group": "a"}\n'
                                             '{"file_name": "x/2.png", "group": "b"}\n')
    ds = vlfair.load_dataset("imagefolder", source=tmp_path, columns=["group"])
    assert ds["group"] == ["a", "b"] and isinstance(ds.features["image"], datasets.Image)
    with pytest.raises(DataError, match=r"needs a file column .* and \['label'\]"):
        vlfair.load_dataset("imagefolder", source=tmp_path, columns=["label"])


def test_loader_errors(tmp_path, fairface_out):
    with pytest.raises(ValueError, match="unknown dataset 'coco'"):
        load_dataset("coco", source="x")
    with pytest.raises(ValueError, match="fairface has no subset 'kids'; subsets: \\['adults', 'age_groups'\\]"):
        load_dataset("fairface", source=fairface_out, subset="kids", split="validation")
    with pytest.raises(ValueError, match="needs a source"):
        load_dataset("fairface")
    broken = datasets.Dataset.from_dict({"image": [Image.new("RGB", (4, 4))] * 2, "file": ["a", "b"],
                                         "age": ["20-29", "03-Sep"], "gender": ["Male", "Male"], "race": ["White"] * 2,
                                         "service_test": [True, False]})
    with pytest.raises(DataError, match="fairface column 'age' row 1 has '03-Sep'"):
        vlfair.data.conform(broken, vlfair.data.SCHEMAS["fairface"])
    with pytest.raises(DataError, match=r"lacks columns \['race'\]"):
        vlfair.data.conform(broken.remove_columns("race"), vlfair.data.SCHEMAS["fairface"])
    # FairFace's own columns no probe needs to read (service_test) or only some do (age) may be absent
    kept = vlfair.data.conform(broken.remove_columns(["service_test", "age"]), vlfair.data.SCHEMAS["fairface"])
    assert kept.column_names == ["image", "file", "gender", "race"]


def test_datasets_scripts_entry_point(tmp_path):
    import subprocess
    import sys

    tree = tmp_path / "professions"
    _placeholders(tree, ["pilot/male/White/1.jpg", "pilot/female/Black/2.jpg"])
    (tree / "metadata.csv").write_text("file,profession,gender,race\npilot/male/White/1.jpg,pilot,male,White\n"
                                       "pilot/female/Black/2.jpg,pilot,female,Black\n")
    script = Path(__file__).resolve().parents[1] / "datasets_scripts" / "professions" / "build.py"
    result = subprocess.run([sys.executable, str(script), "--source", str(tree), "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert load_dataset("professions", source=tmp_path / "out")["gender"] == ["Male", "Female"]
