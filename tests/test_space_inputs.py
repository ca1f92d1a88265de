"""The demo Space's input checks, limits and choices (vlfair.space), without a browser."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from vlfair import testing
from vlfair.space import session
from vlfair.space.limits import MB, Limits, SpaceInputError, run_with_time_limit
from vlfair.space.uploads import check_images, label_template, read_labels_csv, uploads_to_dataset

LIMITS = Limits()


@pytest.fixture()
def images(tmp_path) -> list[Path]:
    return testing.write_jpegs(tmp_path / "up", 6, size=(40, 32))


def _labels(paths, **columns) -> pd.DataFrame:
    return pd.DataFrame({"file": [p.name for p in paths], **columns})


TRAITS_LABELS = {"race": ["White", "White", "Black", "Black", "east asian", "East Asian"],
                 "gender": ["Male", "Female", "Male", "Female", "man", "woman"]}


def test_uploads_become_a_dataset_in_upload_order_with_normalised_labels(images):
    labels = _labels(images, **TRAITS_LABELS).iloc[::-1]  # the label table's order does not matter
    data = uploads_to_dataset([str(p) for p in images], labels, "traits", LIMITS)
    assert data.num_rows == 6 and data["file"] == [p.name for p in images]
    assert data["race"] == ["White", "White", "Black", "Black", "East Asian", "East Asian"]
    assert data["gender"] == ["Male", "Female", "Male", "Female", "Male", "Female"]
    assert data[0]["image"].size == (40, 32)
    assert data[0]["image"].tobytes() == Image.open(images[0]).convert(data[0]["image"].mode).tobytes()


def test_multilingual_uploads_carry_their_captions_and_fixed_columns(images):
    data = uploads_to_dataset(images[:2], _labels(images[:2], en=["a doctor", "a nurse"],
                                                  de=["ein arzt", "ein pfleger"]),
                              "multilingual", LIMITS)
    assert data["portion"] == ["translation"] * 2 and data["image_file"] == [p.name for p in images[:2]]
    assert data["de"] == ["ein arzt", "ein pfleger"]


def test_labels_from_a_csv_with_another_file_column_name(images, tmp_path):
    csv = tmp_path / "labels.csv"
    _labels(images, **TRAITS_LABELS).rename(columns={"file": "file_name"}).to_csv(csv, index=False)
    data = uploads_to_dataset(images, read_labels_csv(csv), "traits", LIMITS)
    assert data.num_rows == 6
    (tmp_path / "bad.csv").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(SpaceInputError, match="cannot be read as CSV"):
        read_labels_csv(tmp_path / "bad.csv")


def test_label_template_lists_every_upload_with_the_probe_columns(images):
    template = label_template(images[:3], "professions")
    assert list(template.columns) == ["file", "profession", "gender", "race"]
    assert template["file"].tolist() == [p.name for p in images[:3]] and set(template["race"]) == {""}
    with pytest.raises(SpaceInputError, match="word-influence probe takes no uploaded images"):
        label_template(images, "word-influence")


@pytest.mark.parametrize("problem, message", [
    ("not_image", "notes.jpg is not an image"),
    ("truncated", "truncated.jpg cannot be decoded as an image"),
])
def test_broken_files_are_named(images, broken_files, problem, message):
    with pytest.raises(SpaceInputError, match=message):
        check_images([*images, broken_files[problem]], LIMITS)


def test_upload_caps_count_size_pixels_type_and_unique_names(images, tmp_path):
    with pytest.raises(SpaceInputError, match="6 files were uploaded; this Space takes at most 5"):
        check_images(images, Limits(max_files=5))
    with pytest.raises(SpaceInputError, match=f"{images[0].name} is .* MB; the limit is .* MB per image"):
        check_images(images, Limits(max_file_bytes=100))
    with pytest.raises(SpaceInputError, match="the uploads total .* MB; the limit is"):
        check_images(images, Limits(max_total_bytes=int(0.001 * MB)))
    with pytest.raises(SpaceInputError, match="has 40x32 pixels; the limit is"):
        check_images(images, Limits(max_pixels=1000))
    icon = tmp_path / "icon.ico"
    Image.new("RGB", (16, 16)).save(icon)
    with pytest.raises(SpaceInputError, match="icon.ico is a ICO image; accepted types: JPEG"):
        check_images([icon], LIMITS)
    twin = tmp_path / "other" / images[0].name
    twin.parent.mkdir()
    twin.write_bytes(images[0].read_bytes())
    with pytest.raises(SpaceInputError, match="two uploaded files are named '00000.jpg'"):
        check_images([images[0], twin], LIMITS)
    with pytest.raises(SpaceInputError, match="no images were uploaded"):
        check_images([], LIMITS)


@pytest.mark.parametrize("change, message", [
    (lambda t: t.iloc[:5], r"missing labels for 1 uploaded image\(s\): \['00005.jpg'\]"),
    (lambda t: t.assign(gender=["", *t["gender"][1:]]),
     r"missing labels: 1 empty cell\(s\) \(00000.jpg has no 'gender'\)"),
    (lambda t: t.drop(columns="race"), r"the labels lack column\(s\) \['race'\]"),
    (lambda t: t.drop(columns="file"), "the labels have no file-name column"),
    (lambda t: pd.concat([t, t.iloc[:1]]), r"list these files more than once: \['00000.jpg'\]"),
    (lambda t: pd.concat([t, pd.DataFrame({"file": ["ghost.jpg"], "race": ["White"], "gender": ["Male"]})]),
     r"name 1 file\(s\) that were not uploaded: \['ghost.jpg'\]"),
    (lambda t: t.assign(race=["Martian", *t["race"][1:]]), r"column 'race' are not among .* \(00000.jpg: 'Martian'\)"),
    (lambda t: t.assign(race=["Indian", *t["race"][1:]]),
     r"fewer than 2 images in a group \(race = 'Indian': 1 image \(00000.jpg\); "
     r"race = 'White': 1 image \(00001.jpg\)\)"),
    (lambda t: t.assign(gender=["Male"] * 6), "all images have gender = 'Male'; .* at least two are needed"),
    (lambda t: t.iloc[0:0, 0:0], "no labels: upload a CSV with columns"),
])
def test_label_problems_are_named(images, change, message):
    with pytest.raises(SpaceInputError, match=message):
        uploads_to_dataset(images, change(_labels(images, **TRAITS_LABELS)), "traits", LIMITS)


def test_blank_rows_of_the_ui_table_are_ignored(images):
    table = pd.concat([_labels(images, **TRAITS_LABELS), pd.DataFrame({"file": [""], "race": [""], "gender": [""]})])
    assert uploads_to_dataset(images, table, "traits", LIMITS).num_rows == 6


def test_time_limit_stops_the_work_and_names_the_limit():
    steps = []

    def endless():
        while True:
            steps.append(1)
            time.sleep(0.01)

    start = time.perf_counter()
    with pytest.raises(SpaceInputError, match="ran past this Space's time limit of 0.3 s"):
        run_with_time_limit(endless, 0.3)
    assert time.perf_counter() - start < 2
    count = len(steps)
    time.sleep(0.1)
    assert len(steps) == count, "the work went on after the limit"


def test_time_limit_leaves_fast_work_and_later_code_alone():
    assert run_with_time_limit(lambda: 41 + 1, 0.2) == 42
    time.sleep(0.4)  # the cancelled timer must not fire into this thread afterwards
    result = []
    worker = threading.Thread(target=lambda: result.append(run_with_time_limit(lambda: "other thread", 5)))
    worker.start()
    worker.join()
    assert result == ["other thread"]


def test_encoder_choices_hub_ids_only_and_never_remote_code(monkeypatch):
    assert session.encoder_choices(hub=False) == [session.WORLD_BIASED, session.WORLD_CONTROL,
                                                  session.WORLD_BIASED_ANSWERER, session.WORLD_CONTROL_ANSWERER]
    assert "openai/clip-vit-base-patch32" in session.encoder_choices(hub=True)
    pool = session.EncoderPool(None)
    with pytest.raises(SpaceInputError, match="runs only its listed encoders"):
        pool.get(session.WORLD_BIASED, "someone/model")
    for bad in ("/etc/passwd", "../models/x", "~/weights", "a/b/c", "file:///x", "lvlm:/etc/x", "lvlm:../x/y"):
        with pytest.raises(SpaceInputError, match="is not a Hub model id"):
            pool.get(session.WORLD_BIASED, bad, allow_other=True)
    with pytest.raises(SpaceInputError, match="unknown encoder 'gpt'"):
        pool.get("gpt")
    calls = []
    monkeypatch.setattr("vlfair.models.load_encoder", lambda spec, **kwargs: calls.append((spec, kwargs)) or "encoder")
    assert pool.get(session.WORLD_BIASED, "someone/model@v1", allow_other=True)[0] == "encoder"
    assert pool.get("openai/clip-vit-base-patch32")[0] == "encoder"
    assert [spec for spec, _ in calls] == ["someone/model@v1", "openai/clip-vit-base-patch32"]
    assert all(kwargs["trust_remote_code"] is False for _, kwargs in calls)


def test_hub_model_that_cannot_be_loaded_is_a_clear_message(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SpaceInputError, match="cannot load openai/clip-vit-base-patch32: .*offline"):
        session.EncoderPool(None).get("openai/clip-vit-base-patch32")


def test_no_server_path_reaches_a_visitor_whatever_raised_the_error(tmp_path, clip_dir, monkeypatch):
    """Every refusal a visitor reads is a SpaceInputError, which drops the server's paths from any message,
    a library's included: transformers shows a local folder as "https://hf.co//root/.cache/..."."""
    import huggingface_hub
    from test_models import _fake_hub_repo

    folder = tmp_path / "hub" / "models--acme--clip" / "snapshots" / ("a" * 40)
    transformers_text = (f"The repository {folder} contains custom code which must be executed to correctly load "
                         f"the model. You can inspect the repository content at {folder} .\n You can inspect the "
                         f"repository content at https://hf.co/{folder}.\nPlease pass the argument "
                         f"`trust_remote_code=True`")
    shown = str(SpaceInputError(f"cannot load acme/clip: {transformers_text}"))
    assert str(tmp_path) not in shown and "hf.co" not in shown and shown.count("<server path>") == 3, shown
    kept = "see https://huggingface.co/org/name, labels.csv or 3/4"  # a Hub link, a file name: not the server's
    assert str(SpaceInputError(kept)) == kept
    # a visitor's id whose checkpoint (here in the Space's Hub cache) names its own code
    ran = tmp_path / "the-checkpoint-s-code-ran"
    custom = testing.checkpoint_with_its_own_code(clip_dir, tmp_path / "build" / "custom", ran, "AutoModel")
    _fake_hub_repo(tmp_path / "hub", "acme/custom-clip", custom, "b" * 40)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(SpaceInputError) as refused:
        session.EncoderPool(None).get(session.WORLD_BIASED, "acme/custom-clip", allow_other=True)
    assert str(refused.value) == ("cannot load acme/custom-clip: model 'acme/custom-clip' ships Python code of its own "
                                  "(its config names it in auto_map); vlfair runs it only when asked: "
                                  "vlfair.load_encoder(..., trust_remote_code=True)")
    assert not ran.exists()


def test_data_choices_per_probe(monkeypatch, tmp_path):
    assert session.data_choices("word-influence", hub=False) == [session.GENERATED]
    assert session.data_choices("traits", hub=False) == [session.WORLD_DATA, session.UPLOAD]
    assert session.data_choices("traits", hub=True)[1] == "sample of fairface: HuggingFaceM4/FairFace"
    monkeypatch.setenv("VLFAIR_SPACE_DATASETS", f'{{"professions": "{tmp_path}"}}')
    assert session.data_choices("professions", hub=False)[1] == f"sample of professions: {tmp_path}"
    with pytest.raises(SpaceInputError, match="unknown data choice 'elsewhere'"):
        session.build_dataset("traits", "elsewhere")
    monkeypatch.setenv("VLFAIR_SPACE_DATASETS", "{professions: x}")
    with pytest.raises(SpaceInputError, match="VLFAIR_SPACE_DATASETS is not JSON"):
        session.data_choices("professions", hub=True)
