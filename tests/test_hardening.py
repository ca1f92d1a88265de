"""Hostile and careless input (issue 16's cases): every one is refused with a message that names
it, or handled and reported; nothing is measured wrong in silence."""

from __future__ import annotations

import csv
import io
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
    assert ("fairface_label_val.csv row 1: path 'val/2.jpg' is a link that leaves the source directory"
            in _problems(source))
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


# ---- errors a person can read --------------------------------------------------------------------
def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("argv, message", [
    (["--model", "/nonexistent/clip"], "vlfair run: model directory '/nonexistent/clip' does not exist"),
    (["--limit", "0"], "vlfair run: --limit must be at least 1, got 0"),
    (["--batch-size", "0"], "vlfair run: --batch-size must be at least 1, got 0"),
    (["--dataset", "synthetic:pfi"], "vlfair run: probe 'traits' runs on ['fairface'] data, not 'pfi' (synthetic:pfi)"),
], ids=["unknown-model", "limit-0", "batch-size-0", "wrong-schema"])
def test_run_mistakes_are_one_line_and_exit_2(clip_dir, tmp_path, capsys, argv, message):
    base = {"--model": str(clip_dir), "--dataset": "synthetic:fairface", "--out": str(tmp_path / "out")}
    options = dict(zip(argv[::2], argv[1::2]))
    args = [item for key, value in {**base, **options}.items() for item in (key, value)]
    code, err = _cli(capsys, "run", "traits", *args, "--per-cell", "2", "--set", "gradcam=null")
    assert code == 2 and err.strip().splitlines()[-1] == message  # after any progress bar


def test_a_folder_that_is_not_a_checkpoint(tmp_path, capsys):
    (tmp_path / "not-a-model").mkdir()
    (tmp_path / "not-a-model" / "notes.txt").write_text("hello")
    code, err = _cli(capsys, "run", "traits", "--model", str(tmp_path / "not-a-model"), "--dataset",
                     "synthetic:fairface", "--out", str(tmp_path / "out"))
    assert code == 2 and err.startswith("vlfair run: ") and "not-a-model" in err


def test_a_bad_out_is_refused_before_any_work(clip_dir, tmp_path, capsys):
    file = tmp_path / "results.txt"
    file.write_text("not a directory")
    code, err = _cli(capsys, "run", "traits", "--model", "/never/loaded", "--dataset", "synthetic:fairface",
                     "--out", str(file))
    # the model is never loaded
    assert code == 2 and err.strip() == f"vlfair run: --out {file} is a file, not a directory"


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(Exception, match="model directory '/nonexistent/clip' does not exist"):
        main(["run", "traits", "--model", "/nonexistent/clip", "--dataset", "synthetic:fairface", "--out",
              str(tmp_path / "out"), "--debug"])
    with pytest.raises(Exception, match="does not exist"):
        main(["--debug", "run", "traits", "--model", "/nonexistent/clip", "--dataset", "synthetic:fairface", "--out",
              str(tmp_path / "out")])


@pytest.mark.parametrize("content, message", [
    (b"file,age,gender,race,service_test\nval/1.jpg,20-29,Male,Caf\xe9,False\n",
     "fairface_label_val.csv: is not UTF-8 text (invalid continuation byte at byte 58); save it as UTF-8"),
    (b"file,age,gender,race,service_test\nval/1.jpg,20-29\n",
     "fairface_label_val.csv row 0: has 2 fields, the header has 5"),
    (b"file,age,gender\nval/1.jpg,20-29,Male\n", "fairface_label_val.csv: lacks columns ['race', 'service_test']"),
], ids=["latin-1", "short-row", "missing-columns"])
def test_prepare_names_the_file_and_row_of_a_malformed_csv(tmp_path, capsys, content, message):
    source = tmp_path / "raw"
    (source / "val").mkdir(parents=True)
    (source / "val" / "1.jpg").write_bytes(_jpeg())
    (source / "fairface_label_val.csv").write_bytes(content)
    code = main(["prepare", "fairface", "--source", str(source), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and message in err and "--skip-bad" not in err


def test_prepare_without_its_metadata_file(tmp_path, capsys):
    (tmp_path / "portraits").mkdir()
    code = main(["prepare", "pfi", "--source", str(tmp_path / "portraits"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    # the folder and the files it lacks, in one line (issue 66: not "1 bad rows")
    assert code == 2 and err == (f"vlfair prepare pfi: {tmp_path / 'portraits'} has no metadata.csv, metadata.jsonl "
                                 "or metadata.parquet (the metadata file: an image's path and its labels a row)\n")


# ---- the leaderboard ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def one_result(clip_dir, tmp_path_factory) -> Path:
    import vlfair
    from vlfair.probes import run_probe

    out = tmp_path_factory.mktemp("one-result")
    run_probe("professions", vlfair.load_encoder(str(clip_dir), dtype="float32"), "synthetic:professions", out,
              cache_dir=None, settings={"bootstrap": 0, "n_permutations": 0})
    return out / "results.json"


def test_the_leaderboard_reads_a_file_once_however_often_it_is_given(one_result, tmp_path, capsys):
    import pandas as pd

    assert main(["leaderboard", str(one_result), str(one_result), str(one_result.parent), "--out",
                 str(tmp_path / "board.csv")]) == 0
    rows = len(pd.read_csv(tmp_path / "board.csv"))
    assert main(["leaderboard", str(one_result), "--out", str(tmp_path / "once.csv")]) == 0
    assert rows == len(pd.read_csv(tmp_path / "once.csv")) > 0


@pytest.mark.parametrize("text, reason", [
    ("{not json", "Expecting property name"),
    ('{"schema": "vlfair.results/1"}', "is a required property"),
    (None, "NaN is not a number JSON allows"),
], ids=["not-json", "not-the-schema", "nan"])
def test_one_bad_results_file_is_skipped_and_named(one_result, tmp_path, capsys, text, reason):
    bad = tmp_path / "bad" / "results.json"
    bad.parent.mkdir()
    bad.write_text(one_result.read_text().replace('"value": 1', '"value": NaN', 1) if text is None else text)
    if text is None:
        assert "NaN" in bad.read_text()
    code = main(["leaderboard", str(one_result), str(bad), "--out", str(tmp_path / "board.csv")])
    err = capsys.readouterr().err
    assert code == 0 and f"vlfair leaderboard: skipped {bad}: " in err and reason in err
    code = main(["leaderboard", str(bad), "--out", str(tmp_path / "none.csv"), "--quiet"])
    err = capsys.readouterr().err  # --quiet hides the warning; the error still says why
    assert code == 2 and "no readable results.json" in err and f"({bad}: " in err and reason in err


def test_the_leaderboard_space_shows_the_board_and_names_a_bad_file(one_result, tmp_path):
    import shutil

    from test_spaces import _load

    (tmp_path / "good").mkdir()
    shutil.copy(one_result, tmp_path / "good" / "results.json")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "results.json").write_text("{truncated")
    board = _load("leaderboard").load_board(str(tmp_path))
    assert len(board) > 0 and board.attrs["skipped"][0].startswith("broken/results.json: ")
    assert str(tmp_path) not in board.attrs["skipped"][0]  # names the file, not the server's folders


# ---- silent wrong numbers become errors ----------------------------------------------------------
from vlfair import measures as M  # noqa: E402


@pytest.mark.parametrize("scores, row", [([1.0, -2.0, 3.0, 4.0], 1), ([-1.0, -2.0, -3.0, -4.0], 0)],
                         ids=["mixed-sign", "all-negative"])
def test_bias_ratio_refuses_negative_scores(scores, row):
    with pytest.raises(ValueError, match=rf"predictions must be >= 0 for a ratio of means .*row {row} is"):
        M.bias_ratio(scores, list("aabb"), "a", "b", bootstrap=0, n_permutations=0)


@pytest.mark.parametrize("missing", [None, float("nan")], ids=["None", "NaN"])
@pytest.mark.parametrize("measure", [
    lambda labels: M.group_score_gap([1.0, 2, 3, 4, 5], labels, bootstrap=0, n_permutations=0),
    lambda labels: M.trait_anova([1.0, 2, 3, 4, 5], labels, bootstrap=0),
    lambda labels: M.group_rate_gap(["a"] * 5, ["a"] * 5, labels, bootstrap=0),
], ids=["group_score_gap", "trait_anova", "group_rate_gap"])
def test_a_missing_label_is_an_error_naming_its_row_not_a_group(measure, missing):
    with pytest.raises(ValueError, match=r"is missing \(None or NaN\) at row 2"):
        measure(["a", "a", missing, "b", "b"])


@pytest.mark.parametrize("options, message", [
    ({"n_permutations": -5}, "n_permutations must be a whole number from 0 to 10,000,000"),
    ({"n_permutations": -1}, "n_permutations must be a whole number from 0 to 10,000,000"),
    ({"bootstrap": -1}, "bootstrap must be a whole number from 0 to 1,000,000"),
    ({"bootstrap": 1.5}, "bootstrap must be a whole number from 0 to 1,000,000"),
    ({"bootstrap": 0, "confidence": 1.5}, r"confidence must be a number in \(0, 1\)"),
    ({"seed": "x"}, "seed must be a whole number or None"),
])
def test_options_out_of_range_are_refused_by_name(options, message):
    with pytest.raises(ValueError, match=message):
        M.group_score_gap([1.0, 2, 3, 4], list("aabb"), **options)


def test_a_fractional_word_position_is_refused():
    with pytest.raises(ValueError, match=r"variants row 0: 0.7 is not a word position"):
        M.word_influence([1, 0], [[0.7], []], 2)


def test_one_language_has_no_cross_lingual_gap():
    with pytest.raises(ValueError, match=r"needs at least 2 languages; languages hold only \['en'\]"):
        M.cross_lingual_gap(["a", "b"], ["a", "a"], ["en", "en"], bootstrap=0)


@pytest.mark.parametrize("argv, message", [
    (["--set", "bootstrap=-1"], "traits: setting bootstrap = -1: Input should be greater than or equal to 0 "
                                "(bootstrap: bootstrap resamples of every interval, a whole number from 0 to "
                                "1,000,000; 0 turns intervals off)"),
    (["--temperature", "0"], "traits: --temperature = 0.0 (setting temperature): Input should be greater than 0"),
], ids=["bootstrap", "temperature"])
def test_a_run_that_would_measure_nothing_fails(clip_dir, tmp_path, capsys, argv, message):
    code, err = _cli(capsys, "run", "traits", "--model", str(clip_dir), "--dataset", "synthetic:fairface",
                     "--out", str(tmp_path / "out"), "--per-cell", "2", "--set", "gradcam=null", *argv)
    assert code == 2 and message in err.strip().splitlines()[-1]


def test_unknown_labels_of_an_in_memory_dataset_are_refused(clip_dir, tmp_path):
    import vlfair
    from vlfair.probes import ProbeError, run_probe  # noqa: F401

    faces = vlfair.load_dataset("synthetic:fairface").map(lambda row, i: {"race": "Martian" if i == 3 else row["race"]},
                                                          with_indices=True)
    with pytest.raises(ValueError, match=r"fairface column 'race' row 3 in the dataset given has 'Martian'"):
        run_probe("traits", vlfair.load_encoder(str(clip_dir), dtype="float32"), faces, tmp_path, cache_dir=None,
                  settings={"per_cell": None, "bootstrap": 0, "gradcam": None})


@pytest.mark.parametrize("spec", ["./missing/fairface", "{tmp}/missing", "{tmp}/fairface"], ids=["dot", "absolute",
                                                                                                 "existing-parent"])
def test_a_missing_local_dataset_is_not_taken_for_a_hub_id(tmp_path, capsys, spec):
    spec = spec.format(tmp=tmp_path)
    code, err = _cli(capsys, "run", "traits", "--model", "/never/loaded", "--dataset", spec,
                     "--out", str(tmp_path / "o"))
    assert code == 2 and err.strip() == f"vlfair run: dataset directory {spec} does not exist"


def test_offline_a_hub_id_that_is_not_cached_is_said_at_once(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, err = _cli(capsys, "run", "traits", "--model", "/never/loaded", "--dataset", "acme/no-such-faces", "--out",
                     str(tmp_path / "o"))
    assert code == 2 and "acme/no-such-faces is not a local directory, and the Hub is offline" in err


# ---- formulas and raw HTML in labels ---------------------------------------------------------------
def test_numbers_written_as_text_are_no_formulas_but_formulas_are():
    import pandas as pd

    from vlfair.report.writer import csv_safe

    cells = ["-0.027", "+0.107", "8.88e-175", "-.5", "1.", "=1+2", "-1+2", "+cmd|' /C calc'!A0", "@SUM(A1)", "-", "- 1"]
    safe = csv_safe(pd.DataFrame({"cell": cells}))["cell"].tolist()
    assert safe[:5] == cells[:5]
    assert safe[5:] == ["'" + cell for cell in cells[5:]]


def test_formula_and_html_labels_stay_text_in_csv_markdown_and_html(clip_dir, tmp_path):
    import vlfair
    from vlfair.probes import run_probe

    formula, markup = '=HYPERLINK("http://example.invalid")', "<img src=x onerror=alert(1)>"
    data = vlfair.load_dataset("synthetic:professions").map(lambda row: {
        "profession": formula if row["profession"] == "nurse" else row["profession"],
        "race": markup if row["race"] == "Asian" else row["race"]})
    run_probe("professions", vlfair.load_encoder(str(clip_dir), dtype="float32"), data, tmp_path, cache_dir=None,
              settings={"bootstrap": 0, "n_permutations": 0})
    csv_text = (tmp_path / "clipscore_by_race.csv").read_text()
    assert ("'" + formula.replace('"', '""') in csv_text and "\n" + formula not in csv_text
            and "," + formula not in csv_text)
    markdown = (tmp_path / "clipscore_by_race.md").read_text()
    assert "&lt;img src=x onerror=alert(1)&gt;" in markdown and markup not in markdown
    report = (tmp_path / "report.html").read_text()
    assert markup not in report and "&lt;img src=x onerror=alert(1)&gt;" in report


# ---- the demo Space --------------------------------------------------------------------------------
def test_a_space_visitors_hub_id_never_loads_a_server_folder(clip_dir, tmp_path, monkeypatch):
    import shutil

    from vlfair.space.session import EncoderPool, SpaceInputError

    shutil.copytree(clip_dir, tmp_path / "acme" / "clip")  # a folder named like the id, where the server runs
    monkeypatch.chdir(tmp_path)
    pool = EncoderPool(cache_dir=None)
    with pytest.raises(SpaceInputError) as info:
        pool.get("", other_id="acme/clip", allow_other=True)
    message = str(info.value)
    assert message.startswith("cannot load acme/clip: ") and str(tmp_path) not in message and "/root" not in message
    for hostile in ("acme/..", "../acme", "./acme/clip", "acme/clip/../../etc"):
        with pytest.raises(SpaceInputError, match="is not a Hub model id"):
            pool.get("", other_id=hostile, allow_other=True)


def test_a_decompression_bomb_upload_is_named_with_the_limit(tmp_path):
    from vlfair.space.limits import Limits
    from vlfair.space.uploads import SpaceInputError, check_images

    bomb = tmp_path / "huge.png"
    Image.new("1", (20000, 20000)).save(bomb)  # 400 M pixels in a few kB
    with pytest.raises(SpaceInputError, match=r"huge.png declares more pixels than this Space accepts \(\d"):
        check_images([bomb], Limits())


# ---- a cache that is checked, not trusted ----------------------------------------------------------
import numpy as np  # noqa: E402

from vlfair.cache import CacheWarning, Chunk, ChunkStore  # noqa: E402


def _chunk(start: int, end: int, seed: int) -> Chunk:
    rows = np.arange(start, end)
    return Chunk(rows, np.random.default_rng(seed).normal(size=(len(rows), 4)).astype(np.float32), [])


@pytest.mark.parametrize("damage", ["another-range", "zeroed", "truncated", "not-a-zip"])
def test_a_damaged_chunk_is_recomputed_with_a_warning_naming_it(tmp_path, damage):
    store = ChunkStore.open(tmp_path, "images", {"case": damage})
    store.write_chunk(0, 4, _chunk(0, 4, 0))
    store.write_chunk(4, 8, _chunk(4, 8, 1))
    path, other = store._chunk_path(0, 4), store._chunk_path(4, 8)
    data = path.read_bytes()
    path.write_bytes({"another-range": other.read_bytes(), "zeroed": bytes(len(data)),
                      "truncated": data[: len(data) // 2], "not-a-zip": b"garbage"}[damage])
    with pytest.warns(CacheWarning, match=rf"vlfair cache: {path}"):
        assert store.read_chunk(0, 4) is None
    assert not path.exists()  # removed, so the recomputed chunk replaces it
    assert store.read_chunk(4, 8) is not None  # an intact chunk is used


@pytest.fixture()
def embedded(clip_dir, tmp_path):
    import vlfair
    from vlfair.testing import generated_image

    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    images = [generated_image(i, (32, 32)) for i in range(30)]
    first = vlfair.embed_images(encoder, images, cache_dir=tmp_path / "cache")
    entry = next((tmp_path / "cache").rglob("done.json")).parent
    return encoder, images, first, entry


@pytest.mark.parametrize("damage", ["wrong-shape", "all-nan", "garbage-done", "truncated-npy", "pickled-npy"])
def test_a_damaged_final_array_is_recomputed(embedded, tmp_path, damage):
    import vlfair

    encoder, images, first, entry = embedded
    array, done = entry / "embeddings.npy", entry / "done.json"
    if damage == "wrong-shape":
        np.save(array, np.zeros((10, first.shape[1]), dtype=np.float32))
    elif damage == "all-nan":
        np.save(array, np.full(first.shape, np.nan, dtype=np.float32))
    elif damage == "garbage-done":
        done.write_text("{not json")
    elif damage == "truncated-npy":
        array.write_bytes(array.read_bytes()[:100])
    else:
        np.save(array, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    why = {"wrong-shape": r"has shape \(10, ", "all-nan": "does not match done.json's checksum"}.get(damage, "")
    with pytest.warns(CacheWarning, match=f"vlfair cache: .*(embeddings.npy|done.json).*{why}"):  # says what is wrong
        again = vlfair.embed_images(encoder, images, cache_dir=tmp_path / "cache")
    np.testing.assert_array_equal(again, first)
    assert again.shape == (30, first.shape[1])


def test_a_dataset_without_a_column_the_probe_needs(clip_dir, tmp_path, capsys):
    import vlfair
    from vlfair.data.build import Built, write_prepared

    faces = vlfair.load_dataset("synthetic:fairface").remove_columns("race")
    prepared = write_prepared(Built("fairface", {"default": {"validation": faces}}, [], "test"), tmp_path / "faces")
    code, err = _cli(capsys, "run", "traits", "--model", str(clip_dir), "--dataset", str(prepared), "--out",
                     str(tmp_path / "o"), "--split", "validation")
    assert code == 2 and "lacks columns ['race']" in err.strip().splitlines()[-1]


def test_a_dataset_under_home_is_found_with_its_tilde(tmp_path, monkeypatch):
    """'~/data' (quoted, or from Python: no shell expanded it) is the home's data, not a missing directory."""
    from vlfair.data.loading import check_source

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "faces").mkdir()
    check_source("~/faces")  # exists once expanded: no error
    with pytest.raises(ValueError, match="dataset directory ~/absent does not exist"):
        check_source("~/absent")
