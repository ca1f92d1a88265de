"""Issue 65, the fifth adversarial round, the Spaces: the demo Space deletes what its requests leave on disk and
caps the rest (SECURITY 1), a camera's MPO is the JPEG it is (UNCLEAR 31), the leaderboard Space checks
VLFAIR_RECORDS when it starts (UNCLEAR 32). Each test's docstring names its case."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from vlfair.space import session
from vlfair.space.limits import MB, Limits, LimitSettingError, SpaceInputError

from test_spaces import NO_TABLE, _load, _serve, _world_uploads

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def world_pool(demo_cache):
    pool = session.EncoderPool(demo_cache)
    pool.get(session.WORLD_BIASED, log=pytest.fail)  # the shipped encoder: loaded, never trained
    return pool


# ---- SECURITY 1: what the demo Space keeps on disk ----------------------------------------------
def _requests(cache: Path) -> list[Path]:
    return sorted((cache / "vlfair-space").glob(f"{session.REQUEST_PREFIX}*"))


def test_an_answered_request_keeps_only_what_its_page_shows(world_pool, tmp_path, monkeypatch):
    """SECURITY 1: every request's uploads (Gradio's cache) and its vlfair-space-* folder stayed for good (eleven
    1700x1700 PNGs: 92 MB a request). Answered, a request's uploads are gone and its folder is what the page shows
    (the gallery and downloads read it, not copies: they stay readable); the page's next answer removes it, as
    does the end of its session; a refused request leaves no folder; Gradio's own delete_cache is on."""
    import gradio as gr
    from gradio_client import Client, handle_file

    from vlfair.demo import datasets as world_data

    cache = tmp_path / "gradio"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(cache))
    paths, csv = _world_uploads(tmp_path / "up", world_data.fairface(per_cell=2))
    module = _load("demo")
    app = module.build_app(cache_dir=world_pool.cache_dir, hub=False)
    assert app.delete_cache == module.DELETE_CACHE
    try:
        client = Client(_serve(app), verbose=False)
        _, _, plots, _, downloads = client.predict(
            "traits", session.WORLD_BIASED, "", session.UPLOAD, 10, [handle_file(str(p)) for p in paths],
            handle_file(str(csv)), NO_TABLE, "", api_name="/run")
        first = _requests(cache)
        assert len(first) == 1 and (first[0] / "results.json").is_file()
        assert plots and all(Path(p["image"]).is_file() for p in plots) and len(downloads) == 2
        assert list(cache.rglob("results.json")) == [first[0] / "results.json"]  # served as it is: no copy
        uploaded = [p for p in cache.rglob("*") if p.is_file() and not p.is_relative_to(cache / "vlfair-space")]
        assert not [p for p in uploaded if p.name in {q.name for q in [*paths, csv]}], "the uploads stayed"
        # the page's next answer replaces the last one: one folder, the new one
        client.predict("public-figures", session.WORLD_BIASED, "", session.WORLD_DATA, 10, [], None, NO_TABLE, "",
                       api_name="/run")
        second = _requests(cache)
        assert len(second) == 1 and second != first
        # the page's session ends (the tab closed): Gradio deletes its state, and the folder with it
        state = next(block for block in app.blocks.values() if isinstance(block, gr.State))
        state.delete_callback(str(second[0]))
        assert _requests(cache) == []
        client.predict("public-figures", session.WORLD_BIASED, "", session.WORLD_DATA, 10, [], None, NO_TABLE, "",
                       api_name="/run")
        assert len(_requests(cache)) == 1
        # a refused request keeps no folder of its own (the last answer's goes: the page cleared it)
        with pytest.raises(Exception, match="runs only its listed encoders"):
            client.predict("traits", session.WORLD_BIASED, "someone/model", session.WORLD_DATA, 10, [], None,
                           NO_TABLE, "", api_name="/run")
        assert _requests(cache) == []
    finally:
        app.close()


def _entry(path: Path, size: int, age_s: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    when = time.time() - age_s
    os.utime(path, (when, when))
    os.utime(path.parent, (when, when))
    return path


def test_the_store_cuts_the_cache_to_its_cap_oldest_first(tmp_path):
    """SECURITY 1: the total kept is capped (VLFAIR_SPACE_MAX_KEPT_MB): before a request the oldest entries go
    first, an upload folder of Gradio's or a request's folder whole, never the request's own uploads."""
    cache = tmp_path / "gradio"
    store = session.RequestStore(cache, max_bytes=2 * MB + MB // 2)
    oldest = _entry(cache / "aaa" / "old.png", MB, 500)
    old_request = _entry(cache / "vlfair-space" / f"{session.REQUEST_PREFIX}1" / "plot.png", MB, 400)
    spared = _entry(cache / "bbb" / "mine.png", MB, 300)  # this request's upload: old, but in use
    recent = _entry(cache / "ccc" / "recent.png", MB, 10)
    folder = store.new_folder(spare=[spared])
    assert not oldest.parent.exists() and not old_request.parent.exists()
    assert spared.is_file() and recent.is_file() and folder.is_dir() and folder.parent == cache / "vlfair-space"
    assert store.trim() == []  # within the cap now


def test_the_store_keeps_to_its_cap_between_requests(tmp_path):
    """SECURITY 1: files reach Gradio's upload route without any request; the cap holds between requests too."""
    cache = tmp_path / "gradio"
    store = session.RequestStore(cache, max_bytes=MB)
    stop = store.keep_trimmed(0.02)
    try:
        first = _entry(cache / "h1" / "a.png", MB, 60)
        second = _entry(cache / "h2" / "b.png", MB, 0)
        for _ in range(500):
            if not first.exists():
                break
            time.sleep(0.01)
        assert not first.exists() and second.is_file()
    finally:
        stop.set()


def test_uploads_go_once_answered_and_only_uploads(tmp_path):
    """SECURITY 1: forget_uploads removes a request's uploads and the folders Gradio made for them, never a
    request's own files (a path sent as an upload may name another visitor's plot) nor anything outside the
    cache; a folder is forgotten only if it is one of the store's."""
    cache = tmp_path / "gradio"
    store = session.RequestStore(cache, max_bytes=MB)
    upload = _entry(cache / "hash1" / "face.png", 10, 0)
    plot = _entry(store.new_folder() / "plot.png", 10, 0)
    outside = _entry(tmp_path / "elsewhere" / "face.png", 10, 0)
    store.forget_uploads([str(upload), str(plot), str(outside), None])
    assert not upload.parent.exists() and plot.is_file() and outside.is_file()
    store.forget(outside.parent)
    store.forget(cache / "hash1" / "..")
    assert outside.is_file() and cache.is_dir()
    store.forget(plot.parent)
    assert not plot.parent.exists()


def test_an_upload_sent_again_after_its_answer_is_named(tmp_path):
    """SECURITY 1: an upload removed once its run was answered, sent again (an API client, a stale page), is
    named in one line, not a raw FileNotFoundError."""
    from vlfair.space.uploads import check_images, read_labels_csv

    image = tmp_path / "face.png"
    Image.new("RGB", (8, 8)).save(image)
    with pytest.raises(SpaceInputError, match=r"^1 uploaded file\(s\) are no longer on this Space \(gone.png\): "
                                              "a run's uploads are removed once it is answered; upload them again"):
        check_images([image, tmp_path / "gone.png"], Limits())
    with pytest.raises(SpaceInputError, match="the labels file labels.csv is no longer on this Space"):
        read_labels_csv(tmp_path / "labels.csv")


def test_a_request_that_stops_takes_its_own_folder_with_it(world_pool, tmp_path, monkeypatch):
    """SECURITY 1: run_request without an out_dir made a vlfair-space-* folder that stayed when the request was
    refused; it is removed (an answered one's is the caller's)."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(SpaceInputError, match="give 2 to 12"):
        session.run_request(world_pool, "word-influence", session.WORLD_BIASED, session.GENERATED, prompt="nurse")
    assert not list(tmp_path.glob(f"{session.REQUEST_PREFIX}*"))


@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan", ""])
def test_the_kept_cap_is_checked_at_start(value, monkeypatch):
    """SECURITY 1: the cap on what the Space keeps is a limit variable like the others, checked at start."""
    monkeypatch.setenv("VLFAIR_SPACE_MAX_KEPT_MB", value)
    with pytest.raises(LimitSettingError, match=f"^VLFAIR_SPACE_MAX_KEPT_MB={value!r} is not a number above 0 "
                                                r"\(unset, it is 2048\)$"):
        Limits.from_env()
    monkeypatch.setenv("VLFAIR_SPACE_MAX_KEPT_MB", "0.5")
    assert Limits.from_env().max_kept_bytes == MB // 2


# ---- UNCLEAR 31: a camera's MPO --------------------------------------------------------------
def _mpo(path: Path) -> Path:
    """A two-picture MPO as phones write it: the photograph first (red), a second picture (blue)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (40, 30), (220, 20, 20)).save(path, format="MPO", save_all=True,
                                                    append_images=[Image.new("RGB", (40, 30), (20, 20, 220))])
    with Image.open(path) as image:
        assert image.format == "MPO" and image.n_frames == 2
    return path


def test_a_camera_mpo_upload_is_the_jpeg_it_is(tmp_path):
    """UNCLEAR 31: the demo Space refused a phone's JPEG that PIL reads as MPO ("is a MPO image; accepted types:
    JPEG, ..."); it is accepted, and what the run embeds is its first picture."""
    from vlfair.imageio import load_rgb
    from vlfair.space.uploads import check_images

    photo = _mpo(tmp_path / "IMG_0001.jpg")
    assert check_images([photo], Limits()) == [photo]
    pixel = load_rgb({"bytes": photo.read_bytes(), "path": photo.name}, 0).getpixel((20, 15))
    assert pixel[0] > 200 and pixel[2] < 50  # the first picture, red


def test_the_demo_space_takes_an_mpo_named_as_such(world_pool):
    """UNCLEAR 31: a file named .mpo (a 3D camera's) has no image MIME type, so Gradio refused it as an upload."""
    from gradio_client.utils import is_valid_file

    app = _load("demo").build_app(cache_dir=world_pool.cache_dir, hub=False)
    images = next(block for block in app.blocks.values() if getattr(block, "elem_id", None) == "images")
    assert is_valid_file("DSCF0001.MPO", images.file_types) and is_valid_file("a.jpg", images.file_types)
    assert not is_valid_file("notes.txt", images.file_types)


def test_a_professions_tree_reads_mpo_files(tmp_path):
    """UNCLEAR 31: `vlfair prepare professions` from a profession/gender/race tree left .mpo files out, silently."""
    from vlfair.data.build import build_professions

    for i, profession in enumerate(["nurse", "nurse", "doctor"]):
        _mpo(tmp_path / profession / "female" / "asian" / f"{i}.mpo")
    built = build_professions(tmp_path)
    rows = built.configs["default"]["test"]
    assert rows.num_rows == 3 and not built.skipped


# ---- UNCLEAR 32: the leaderboard Space's VLFAIR_RECORDS ----------------------------------------
BAD_RECORDS = {  # id: (value, what the message starts with)
    "no placeholder": ("https://huggingface.co/datasets/acme/bias/blob/main/records",
                       "VLFAIR_RECORDS must hold {record}"),
    "javascript": ("javascript:alert(1)//{record}", "VLFAIR_RECORDS must be an https:// (or http://) address"),
    "another placeholder": ("https://x/{record}/{run}", "VLFAIR_RECORDS must hold {record}"),
    "a format spec": ("https://x/{record:>99999}", "VLFAIR_RECORDS must hold {record}"),
    "unclosed": ("https://x/{record", "VLFAIR_RECORDS 'https://x/{record' is not a template"),
    "empty": ("", "VLFAIR_RECORDS must hold {record}"),
    "too long": ("https://x/" + "a" * 3000 + "/{record}", "VLFAIR_RECORDS is 3,019 characters long"),
}


@pytest.mark.parametrize("case", list(BAD_RECORDS))
def test_a_bad_records_variable_is_named_when_read(case, monkeypatch):
    """UNCLEAR 32: the leaderboard Space took any VLFAIR_RECORDS (no {record}: every row linked one address; a
    javascript: link); it is held to card-results' --source-url rules, the variable named."""
    from vlfair.space.limits import check_leaderboard_settings, records_from_env

    value, said = BAD_RECORDS[case]
    monkeypatch.setenv("VLFAIR_RECORDS", value)
    with pytest.raises(LimitSettingError) as raised:
        records_from_env()
    message = str(raised.value)
    assert message.startswith(said) and message.endswith("(unset, rows link no record)")
    assert "\n" not in message
    with pytest.raises(LimitSettingError):
        check_leaderboard_settings()  # what the leaderboard Space checks when it starts


def test_a_good_records_variable_links_rows_as_card_results_fills_it(monkeypatch):
    """UNCLEAR 32: a good VLFAIR_RECORDS is read (unset: None), and a row's link is the one card-results writes
    (a doubled brace is one brace there, and now here too)."""
    from vlfair.report.eval_results import source_url
    from vlfair.space.limits import records_from_env

    template = "https://x.org/{{v1}}/every_eval_ever/{record}"
    monkeypatch.setenv("VLFAIR_RECORDS", template)
    assert records_from_env() == template
    name = "data/vlfair-traits/org/clip/0b8e4f2c-1d2a-5c3e-9f00-123456789abc.json"  # a record's datastore path
    assert _load("leaderboard").record_link(name, template) == f"[record]({source_url(template, name)})"
    monkeypatch.delenv("VLFAIR_RECORDS")
    assert records_from_env() is None


@pytest.mark.parametrize("variable, value, said", [
    ("VLFAIR_RECORDS", "https://x/records", "VLFAIR_RECORDS must hold {record}"),
    ("VLFAIR_SPACE_TIME_LIMIT_S", "ten", "VLFAIR_SPACE_TIME_LIMIT_S='ten' is not a number above 0"),
])
def test_the_leaderboard_space_does_not_start_with_a_bad_setting(variable, value, said, tmp_path):
    """UNCLEAR 32: with a bad VLFAIR_RECORDS the leaderboard Space started and linked every row wrongly; it does not
    start, one line naming the variable and what is wrong, as the demo Space does with a bad limit."""
    done = subprocess.run([sys.executable, str(REPO / "spaces" / "leaderboard" / "app.py")], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, variable: value, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"vlfair leaderboard Space: {said}")


def test_an_mpo_bytes_cell_decodes_like_its_first_frame():
    """UNCLEAR 31: a dataset cell holding a camera's MPO decodes to its first picture, as the same JPEG would."""
    from vlfair.imageio import file_type, load_rgb

    buffer = io.BytesIO()
    first = Image.new("RGB", (32, 24), (10, 200, 10))
    first.save(buffer, format="MPO", save_all=True, append_images=[Image.new("RGB", (32, 24), (200, 10, 10))])
    with Image.open(io.BytesIO(buffer.getvalue())) as image:
        assert file_type(image) == "JPEG"
    jpeg = io.BytesIO()
    first.save(jpeg, format="JPEG")
    decoded = load_rgb({"bytes": buffer.getvalue(), "path": None}, 0)
    assert decoded.tobytes() == load_rgb({"bytes": jpeg.getvalue(), "path": None}, 0).tobytes()
