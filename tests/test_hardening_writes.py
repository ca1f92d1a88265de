"""Hardening, third round (issue 28): what vlfair reads from a folder and how it writes one.

A prepared dataset is read only from inside its folder (3); an output folder (a run, a rescore, a
comparison, a prepared dataset, the demo) is written as a whole, so a process killed while writing
leaves the earlier output whole (4, 5), and one writer at a time (19); a split named twice (6), a
blank label (12), a zip bomb (25), a full disk (30) and a card's unsafe YAML (31) are refused or
said, naming what is wrong.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import re
import shutil
import signal
import threading
import time
import zipfile
from pathlib import Path

import pytest
from PIL import Image

import vlfair
from vlfair.atomic import MANIFEST
from vlfair.cli import main
from vlfair.compare import load_run
from vlfair.data import DataError
from vlfair.data.build import BuildError, Built, prepare, write_prepared

import forking


# A forked child (tests/forking.py) running the real CLI, with a hook that kills it (SIGKILL, as
# kill -9) at one moment of its write phase, or makes it wait there until the test lets it go.
def _hooked_cli(hook: str, argv: list[str]) -> int:
    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    from vlfair.report import writer
    table_writer = writer.TABLE_FILES["csv"]
    if hook == "after-first-table":  # results.json and one table of the new run written
        def write(table, path):
            table_writer(table, path)
            die()
        writer.TABLE_FILES["csv"] = write
    elif hook == "after-samples":  # samples.parquet of the new run written, nothing else
        import vlfair.samples
        write_samples = vlfair.samples.write_samples

        def killing(*args, **kwargs):
            write_samples(*args, **kwargs)
            die()
        vlfair.samples.write_samples = killing
    elif hook == "in-report":  # every table and figure written, report.html about to be
        def report_html(*args, **kwargs):
            die()
        writer.report_html = report_html
    elif hook == "mid-parquet":  # a prepared dataset's first Parquet file half written
        import datasets

        def to_parquet(self, path, *args, **kwargs):
            with open(path, "wb") as handle:
                handle.write(b"PAR1 half a file")
                handle.flush()
            die()
        datasets.Dataset.to_parquet = to_parquet
    elif hook == "before-card":  # every Parquet file written, the card not yet
        import vlfair.data.build

        def render_card(*args, **kwargs):
            die()
        vlfair.data.build.render_card = render_card
    elif hook == "wait":  # in the write phase until the test creates the file GO
        def write(table, path):
            Path(os.environ["READY"]).touch()
            while not Path(os.environ["GO"]).exists():
                time.sleep(0.05)
            table_writer(table, path)
        writer.TABLE_FILES["csv"] = write
    return main(argv)


def _child(tmp_path: Path, hook: str, *argv: str, env: dict | None = None, wait: bool = True) -> forking.Child:
    child = forking.start(tmp_path, _hooked_cli, hook, [*argv, "-q"], env=env, name=f"child-{hook}")
    if wait:
        child.communicate(timeout=300)
    return child


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes: two equal snapshots are the same output."""
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file()}


def _staged(folder: Path) -> list[str]:
    """What writers left beside ``folder`` (staging folders, earlier outputs moved aside)."""
    return sorted(e.name for e in folder.parent.iterdir()
                  if e.name.startswith(f".{folder.name}.vlfair-") and not e.name.endswith("-lock"))


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err.strip()


# ---- runs to write over ------------------------------------------------------------------------
FAST = ["--set", "bootstrap=0", "--set", "n_permutations=0"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def _run(clip: Path, out: Path, cache: Path, *options: str) -> Path:
    assert main(["run", "professions", "--model", str(clip), "--dataset", "synthetic:professions", "--out", str(out),
                 "--cache-dir", str(cache), "-q", *FAST, *options]) == 0
    return out


@pytest.fixture(scope="module")
def base_run(clip_dir, cache, tmp_path_factory) -> Path:
    """A finished professions run (with samples.parquet: rescore and compare read it)."""
    return _run(clip_dir, tmp_path_factory.mktemp("runs") / "clip", cache)


@pytest.fixture(scope="module")
def other_run(cache, tmp_path_factory) -> Path:
    """The same probe on the same rows with another tiny model: a run to compare with."""
    from vlfair import testing

    models = tmp_path_factory.mktemp("other-model")
    return _run(testing.tiny_clip(models / "clip-1", seed=1), tmp_path_factory.mktemp("runs") / "clip-1", cache)


def _earlier(run: Path, out: Path) -> dict[str, bytes]:
    shutil.copytree(run, out)
    return _files(out)


# ---- issue 43, LOSS 4: a command that fails after measuring leaves --out as it was ----------------
def _failing(monkeypatch, how: str) -> None:
    """Every run made from here on fails as ``how`` says, the way a measure that cannot compute leaves it."""
    from vlfair.probes import runner

    finish_run = runner.finish_run  # what measure_probe and rescore both call

    def failing(*args, **kwargs):
        run = finish_run(*args, **kwargs)
        if how == "a null value":
            run.results["metrics"][1]["value"] = None
        else:  # nothing measured: every metric left out, with the probe's warning of why
            run.results["metrics"] = []
            run.results["warnings"].append("every cell had fewer than 2 rows")
        return run

    monkeypatch.setattr(runner, "finish_run", failing)


@pytest.mark.parametrize("how", ["a null value", "nothing measured"])
@pytest.mark.parametrize("command", ["run", "rescore"])
@pytest.mark.parametrize("before", ["an earlier run", "no folder"])
def test_a_command_that_fails_after_measuring_leaves_out_as_it_was_and_keeps_the_run_beside_it(
        base_run, clip_dir, cache, tmp_path, capsys, monkeypatch, how, command, before):
    out = tmp_path / "out"
    earlier = _earlier(base_run, out) if before == "an earlier run" else None
    _failing(monkeypatch, how)
    argv = (["run", "professions", "--model", str(clip_dir), "--dataset", "synthetic:professions", "--cache-dir",
             str(cache), *FAST] if command == "run" else ["rescore", str(base_run)])
    code, err = _cli(capsys, *argv, "--out", str(out))
    err = err.splitlines()[-1]  # after the run's own warnings (a run's, not a rescore's)
    assert code == 2 and err.startswith(f"vlfair {command}: ")
    assert ("values came out null" if how == "a null value" else "measured nothing") in err
    assert f"this run is in {out}.failed, {out} was left as it was" in err
    assert (_files(out) if out.exists() else None) == earlier  # the earlier run, byte for byte (or still no folder)
    kept = json.loads((tmp_path / "out.failed" / "results.json").read_text())  # nothing measured is lost
    assert kept["metrics"] == [] if how == "nothing measured" else kept["metrics"][1]["value"] is None
    assert _staged(out) == []


def test_a_failed_run_that_cannot_be_set_aside_still_leaves_out_as_it_was(base_run, clip_dir, cache, tmp_path,
                                                                          capsys, monkeypatch):
    out, aside = tmp_path / "out", tmp_path / "out.failed"
    earlier = _earlier(base_run, out)
    aside.mkdir()
    (aside / "notes.txt").write_text("a person's file")
    _failing(monkeypatch, "a null value")
    code, err = _cli(capsys, "rescore", str(base_run), "--out", str(out))
    assert (code == 2 and "values came out null" in err
            and f"the run could not be kept (--out {aside} holds files" in err)
    assert err.endswith(f"{out} was left as it was") and _files(out) == earlier
    assert _files(aside) == {"notes.txt": b"a person's file"}


def test_a_run_that_succeeds_after_a_failed_one_goes_to_out(base_run, clip_dir, cache, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        _failing(patch, "nothing measured")
        assert _cli(capsys, "rescore", str(base_run), "--out", str(out))[0] == 2
    assert not out.exists()
    assert _cli(capsys, "rescore", str(base_run), "--out", str(out))[0] == 0
    assert json.loads((out / "results.json").read_text())["metrics"]


# ---- 5, 19: a run's folder is written as a whole, by one writer -------------------------------
def test_a_run_killed_while_writing_leaves_the_earlier_run_whole(base_run, clip_dir, cache, tmp_path):
    out = tmp_path / "out"
    before = _earlier(base_run, out)
    child = _child(tmp_path, "after-first-table", "run", "professions", "--model", str(clip_dir), "--dataset",
                   "synthetic:professions", "--out", str(out), "--cache-dir", str(cache), "--set", "confidence=0.9",
                   *FAST)
    assert child.returncode == -9, child.stderr  # killed in its write phase, after results.json and a table
    assert _files(out) == before  # every file of the earlier run, byte for byte, and nothing of the new one
    assert main(["rescore", str(base_run), "--out", str(out), "-q"]) == 0  # the next write clears what was left
    assert not _staged(out) and load_run(out).results["probe"] == "professions"


@pytest.mark.parametrize("hook", ["after-samples", "after-first-table", "in-report"])
def test_a_rescore_killed_at_any_moment_of_its_write_leaves_the_earlier_run_whole(base_run, tmp_path, hook):
    out = tmp_path / "out"
    before = _earlier(base_run, out)
    child = _child(tmp_path, hook, "rescore", str(base_run), "--out", str(out), "--set", "confidence=0.9")
    assert child.returncode == -9, child.stderr
    assert _files(out) == before


def test_a_comparison_killed_while_writing_leaves_the_earlier_one_whole(base_run, other_run, tmp_path):
    out = tmp_path / "cmp"
    options = ["--bootstrap", "20", "--permutations", "20"]
    assert main(["compare", str(base_run), str(other_run), "--out", str(out), "-q", *options]) == 0
    before = _files(out)
    child = _child(tmp_path, "after-first-table", "compare", str(base_run), str(other_run), "--out", str(out),
                   "--bootstrap", "30", "--permutations", "30")
    assert child.returncode == -9, child.stderr
    assert _files(out) == before


def test_an_earlier_run_is_replaced_whole_not_merged(base_run, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(base_run, out)
    (out / "gaps_by_age.csv").write_text("a table an earlier version wrote\n")  # a run's file, not this run's
    (out / "gaps_by_age.md").write_text("| a |\n")
    manifest = json.loads((out / MANIFEST).read_text())  # as that version listed them
    (out / MANIFEST).write_text(json.dumps({**manifest, "files": [*manifest["files"], "gaps_by_age.csv",
                                                                  "gaps_by_age.md"]}))
    assert main(["rescore", str(base_run), "--out", str(out), "-q"]) == 0
    assert main(["rescore", str(base_run), "--out", str(tmp_path / "fresh"), "-q"]) == 0
    assert sorted(_files(out)) == sorted(_files(tmp_path / "fresh"))  # nothing of the earlier run stays beside it
    assert not _staged(out)


def test_a_second_writer_into_one_folder_is_refused_and_the_first_one_completes(base_run, tmp_path, capsys):
    out = tmp_path / "out"
    ready, go = tmp_path / "ready", tmp_path / "go"
    first = _child(tmp_path, "wait", "rescore", str(base_run), "--out", str(out), env={"READY": str(ready),
                                                                                      "GO": str(go)}, wait=False)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():  # the first one is in its write phase
            assert first.returncode is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        code, err = _cli(capsys, "rescore", str(base_run), "--out", str(out), "--set", "confidence=0.9")
    finally:
        go.touch()
        first.communicate(timeout=120)
    lock = out.parent / ".out.vlfair-lock"
    assert code == 2 and err == (f"vlfair rescore: --out {out} is being written by another vlfair command (it holds "
                                 f"the lock {lock}); wait until it has finished, or give another folder")
    assert first.returncode == 0
    run = load_run(out)  # one complete run: its samples are the ones its results.json names
    assert run.results["probe_settings"]["confidence"] == 0.95 and not _staged(out)  # the first one's


def test_a_process_forked_after_writing_a_folder_writes_it_again_with_a_lock_of_its_own(base_run, tmp_path):
    """A Space's forked worker, a sweep's multiprocessing pool: the parent's lock object for a folder it
    wrote is not the child's (filelock refuses one used across a fork); the child takes its own."""
    out = tmp_path / "out"
    assert main(["rescore", str(base_run), "--out", str(out), "-q"]) == 0  # this process now has out's lock object
    code, _, err = forking.run(tmp_path, main, ["rescore", str(base_run), "--out", str(out), "--set",
                                                "confidence=0.9", "-q"])
    assert code == 0, err
    assert load_run(out).results["probe_settings"]["confidence"] == 0.9 and not _staged(out)


def test_a_second_thread_writing_one_folder_is_refused(base_run, tmp_path, monkeypatch):
    import pandas as pd

    from vlfair.outputs import Table
    from vlfair.report import writer

    results = load_run(base_run).results
    inside, go = threading.Event(), threading.Event()

    def waiting(table, path):
        inside.set()
        go.wait(30)
        path.write_text("table\n")

    monkeypatch.setitem(writer.TABLE_FILES, "csv", waiting)
    table = {"t": Table(pd.DataFrame({"a": [1]}))}
    first = threading.Thread(target=writer.write_outputs, args=(tmp_path / "out", results, table, {}, [], "first"))
    first.start()
    assert inside.wait(30)
    try:
        with pytest.raises(ValueError, match="is being written by another vlfair command"):
            writer.write_outputs(tmp_path / "out", results, table, {}, [], "second")
    finally:
        go.set()
        first.join(30)
    assert "first" in (tmp_path / "out" / "report.html").read_text()


@pytest.mark.parametrize("fallback", [False, True], ids=["exchange", "two-renames"])
def test_what_a_killed_swap_left_is_put_right_by_the_next_write(base_run, tmp_path, monkeypatch, fallback):
    """Killed between the two renames of the fallback swap (no RENAME_EXCHANGE), the earlier run
    sits beside its folder: the next write puts it back, or replaces it when it completes."""
    import vlfair.report.writer

    if fallback:
        monkeypatch.setattr("vlfair.atomic._exchange", lambda first, second: False)
    out = tmp_path / "out"
    before = _earlier(base_run, out)
    out.rename(tmp_path / ".out.vlfair-old-00000000")  # moved aside, the new one not yet in place
    (tmp_path / ".out.vlfair-new-11111111").mkdir()  # a staging folder of the killed writer
    (tmp_path / ".out.vlfair-new-11111111" / "results.json").write_text("{")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setitem(vlfair.report.writer.TABLE_FILES, "csv", full)
        assert main(["rescore", str(base_run), "--out", str(out), "-q"]) == 2
    assert _files(out) == before and not _staged(out)  # the earlier run back in its place
    assert main(["rescore", str(base_run), "--out", str(out), "-q"]) == 0
    assert not _staged(out) and load_run(out)


# ---- the folders vlfair writes into: never one holding other files -----------------------------
@pytest.mark.parametrize("content", [
    {"notes.txt": "my notes"},
    {"results.json": "{}", "thesis.pdf": "%PDF"},  # a run's name among a user's files
    {"data/README.md": "---\n---\n"},
    {"README.md": "# a folder of mine\n"},  # a name a run writes, but no results.json
], ids=["a-file", "a-file-beside-results", "a-folder", "markdown-only"])
@pytest.mark.parametrize("command", ["run", "compare", "prepare", "demo"])
def test_a_folder_holding_other_files_is_refused_before_any_work_and_left_alone(tmp_path, capsys, content,
                                                                               command):
    out = tmp_path / "mine"
    for name, text in content.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    before = _files(out)
    argv = {"run": ["run", "traits", "--model", "/never/loaded", "--dataset", "synthetic:fairface"],
            "compare": ["compare", "/no/run/a", "/no/run/b"],
            "prepare": ["prepare", "pfi", "--source", "/no/source"],
            "demo": ["demo", "--cache-dir", str(tmp_path / "cache")]}[command]
    code, err = _cli(capsys, *argv, "--out", str(out))
    what = {"prepare": "prepared dataset"}.get(command, {"compare": "comparison"}.get(command, command))
    assert code == 2 and err.startswith(f"vlfair {command}: --out {out} holds files that are not a vlfair {what}'s (")
    assert "give another folder" in err and _files(out) == before


@pytest.mark.parametrize("added", [
    {"notes.md": "# my notes"}, {"survey_data.csv": "a,b\n1,2\n"}, {"figure1.png": "png"},  # a run's suffixes
    {"results.json.bak": "{}"}, {"biased/notes.txt": "mine"},
], ids=["md", "csv", "png", "other", "in-a-subfolder"])
def test_a_users_files_beside_an_earlier_run_are_never_replaced(base_run, tmp_path, capsys, added):
    """Only the files an output's manifest lists are vlfair's: a user's table or figure beside a run,
    though named like a run's, makes the folder one vlfair does not replace."""
    out = tmp_path / "out"
    shutil.copytree(base_run, out)
    for name, text in added.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    before = _files(out)
    code, err = _cli(capsys, "rescore", str(base_run), "--out", str(out))
    assert code == 2 and err.startswith(f"vlfair rescore: --out {out} holds files that are not a vlfair run's "
                                        f"({next(iter(added))}")
    assert f"lists its files in {MANIFEST}" in err and _files(out) == before


@pytest.mark.parametrize("manifest", [None, "not json", '{"kind": "comparison", "files": []}', '{"kind": "run"}'],
                         ids=["none", "unreadable", "another-kind", "no-list"])
def test_an_output_without_its_own_list_of_files_is_not_replaced(base_run, tmp_path, capsys, manifest):
    """A folder that looks like a run but carries no run manifest (a vlfair before manifests, a
    comparison's folder, a damaged list) is left alone."""
    out = tmp_path / "out"
    shutil.copytree(base_run, out)
    if manifest is None:
        (out / MANIFEST).unlink()
    else:
        (out / MANIFEST).write_text(manifest)
    before = _files(out)
    code, err = _cli(capsys, "rescore", str(base_run), "--out", str(out))
    assert code == 2 and "holds files that are not a vlfair run's (" in err and _files(out) == before


def test_a_mount_point_is_refused_naming_a_folder_inside_it(tmp_path, capsys, monkeypatch):
    out = tmp_path / "volume"
    out.mkdir()
    real = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda path: Path(path) == out or real(path))
    code, err = _cli(capsys, "run", "traits", "--model", "/never/loaded", "--dataset", "synthetic:fairface", "--out",
                     str(out))
    assert code == 2 and err == (f"vlfair run: --out {out} is a mount point: vlfair replaces its output folder as a "
                                 f"whole, which a mount point cannot be; give a folder inside it (e.g. {out / 'run'})")


def test_a_siblings_leftovers_are_not_taken_for_this_folders(base_run, tmp_path):
    """Leftovers are named exactly .NAME.vlfair-new-XXXXXXXX: a folder whose own name starts like
    them (a sibling "out.vlfair-new-1", or its staging folder) is another folder's, left alone."""
    out = tmp_path / "out"
    siblings = [tmp_path / "out.vlfair-new-1", tmp_path / ".out.vlfair-new-1.vlfair-new-0123abcd",
                tmp_path / ".out.vlfair-old-x"]
    for sibling in siblings:
        sibling.mkdir()
        (sibling / "keep.txt").write_text("a user's")
    assert main(["rescore", str(base_run), "--out", str(out), "-q"]) == 0
    assert main(["rescore", str(base_run), "--out", str(out), "-q"]) == 0
    assert all((sibling / "keep.txt").read_text() == "a user's" for sibling in siblings)


def test_where_folders_cannot_be_exchanged_a_failed_move_puts_the_earlier_output_back(base_run, tmp_path,
                                                                                      monkeypatch):
    """Off Linux the earlier output is moved aside, then the new one moved in: when that second move
    fails, the earlier output is back in its place, as the error says."""
    from vlfair import atomic

    out = tmp_path / "out"
    assert main(["rescore", str(base_run), "--out", str(out), "-q"]) == 0
    before = _files(out)
    monkeypatch.setattr(atomic, "_exchange", lambda first, second: False)
    real, moves = os.rename, []

    def rename(source, target):
        moves.append(Path(source).name)
        if len(moves) == 2:  # the new output into place
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(target))
        real(source, target)

    monkeypatch.setattr(atomic.os, "rename", rename)
    with pytest.raises(OSError):
        vlfair.compare.rescore(base_run, out)
    assert _files(out) == before and not _staged(out)


def test_the_current_folder_is_not_an_output_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, err = _cli(capsys, "run", "traits", "--model", "/never/loaded", "--dataset", "synthetic:fairface", "--out",
                     ".")
    assert code == 2 and err.startswith("vlfair run: --out . is, or holds, the current folder")


# ---- 4: prepare builds beside and swaps ---------------------------------------------------------
def _jpeg(color=(120, 80, 40)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(buffer, format="JPEG")
    return buffer.getvalue()


def _professions(root: Path, rows: list[tuple[str, str, str, str]]) -> Path:
    """A professions source: metadata.csv (file, profession, gender, race) and its images."""
    root.mkdir(parents=True)
    with open(root / "metadata.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["file", "profession", "gender", "race"])
        writer.writerows(rows)
    for index, (file, *_) in enumerate(rows):
        (root / file).write_bytes(_jpeg((index * 40 % 255, 80, 40)))
    return root


ROWS = [(f"{i}.jpg", profession, gender, "Black") for i, (profession, gender) in
        enumerate([("doctor", "Female"), ("doctor", "Male"), ("nurse", "Female"), ("nurse", "Male")])]


@pytest.mark.parametrize("hook", ["mid-parquet", "before-card"])
def test_a_prepare_killed_while_writing_leaves_the_earlier_dataset_whole(tmp_path, hook):
    out = tmp_path / "prepared"
    prepare("professions", _professions(tmp_path / "first", ROWS), out)
    before = _files(out)
    second = _professions(tmp_path / "second", ROWS + [("9.jpg", "lawyer", "Male", "White")])
    child = _child(tmp_path, hook, "prepare", "professions", "--source", str(second), "--out", str(out))
    assert child.returncode == -9, child.stderr
    assert _files(out) == before
    assert vlfair.load_dataset("professions", source=out).num_rows == 4  # and it still loads
    assert main(["prepare", "professions", "--source", str(second), "--out", str(out), "-q"]) == 0
    assert vlfair.load_dataset("professions", source=out).num_rows == 5 and not _staged(out)


# ---- 3: a dataset folder is read only from inside itself ---------------------------------------
@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> tuple[Path, Path]:
    """A prepared FairFace folder, and another one outside it with the same rows (so that a card
    pointing there reads without a size mismatch: only the guard can tell)."""
    faces = vlfair.load_dataset("synthetic:fairface").select(range(20))
    root = tmp_path_factory.mktemp("prepared")
    built = Built("fairface", {"default": {"validation": faces}}, [], "test")
    return write_prepared(built, root / "faces"), write_prepared(built, root / "outside")


PARQUET = "default/validation-00000-of-00001.parquet"


def _escape(folder: Path, outside: Path, how: str) -> None:
    """Make ``folder``'s card (or its files) lead to ``outside``'s data."""
    card = folder / "README.md"
    path = {"dotdot": f"../outside/{PARQUET}", "absolute": str(outside / PARQUET),
            "glob": f"../outsid*/{PARQUET}", "deep-glob": "../**/outside/default/*.parquet",
            "url": "https://example.com/x.parquet", "home": f"~/{PARQUET}"}.get(how)
    if path is not None:
        card.write_text(card.read_text().replace(f"path: {PARQUET}", f"path: {path}"))
    elif how == "linked-file":
        (folder / PARQUET).unlink()
        (folder / PARQUET).symlink_to(outside / PARQUET)
    elif how == "linked-folder":
        shutil.rmtree(folder / "default")
        (folder / "default").symlink_to(outside / "default")
    elif how == "linked-card":
        card.unlink()
        card.symlink_to(outside / "README.md")


ESCAPES = ["dotdot", "absolute", "glob", "deep-glob", "url", "home", "linked-file", "linked-folder", "linked-card"]


@pytest.mark.parametrize("how", ESCAPES)
def test_a_dataset_folder_is_read_only_from_inside_itself(prepared, tmp_path, how):
    folder, outside = tmp_path / "faces", tmp_path / "outside"
    shutil.copytree(prepared[0], folder)
    shutil.copytree(prepared[1], outside)
    _escape(folder, outside, how)
    with pytest.raises(DataError, match="outside") as info:
        vlfair.load_dataset("fairface", source=folder, split="validation")
    assert str(folder) in str(info.value)


def _snapshot(prepared: Path, cache: Path) -> Path:
    """``prepared`` laid out as the Hub's cache keeps a download: snapshots/<commit>/ holds links
    into the repository's blobs/."""
    repo = cache / "datasets--org--faces"
    snapshot = repo / "snapshots" / ("0" * 40)
    for file in sorted(p for p in prepared.rglob("*") if p.is_file() and not p.name.startswith(".")):
        blob = repo / "blobs" / file.relative_to(prepared).as_posix().replace("/", "_")
        blob.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, blob)
        link = snapshot / file.relative_to(prepared)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path("../" * (len(file.relative_to(prepared).parts) + 1), "blobs", blob.name))
    return snapshot


def test_a_snapshot_of_the_hub_cache_reads_its_own_blobs_but_no_other(prepared, tmp_path):
    """Links into the same download's blobs/ are inside; a link from a snapshot anywhere else is not."""
    snapshot = _snapshot(prepared[0], tmp_path / "hub")
    assert vlfair.load_dataset("fairface", source=snapshot, split="validation").num_rows == 20
    (snapshot / PARQUET).unlink()
    (snapshot / PARQUET).symlink_to(prepared[1] / PARQUET)
    with pytest.raises(DataError, match="leads outside the folder"):
        vlfair.load_dataset("fairface", source=snapshot, split="validation")


def test_a_card_pointing_outside_is_said_by_the_cli(prepared, tmp_path, clip_dir, capsys):
    folder = tmp_path / "faces"
    shutil.copytree(prepared[0], folder)
    shutil.copytree(prepared[1], tmp_path / "outside")
    _escape(folder, tmp_path / "outside", "dotdot")
    code, err = _cli(capsys, "run", "traits", "--model", str(clip_dir), "--dataset", str(folder), "--split",
                     "validation", "--out", str(tmp_path / "out"))
    assert code == 2 and err.splitlines()[-1] == (
        f"vlfair run: {folder}/README.md: config 'default' names '../outside/{PARQUET}', outside {folder}; a dataset "
        "folder's card may name only files inside it")


# ---- 6: a split named twice ---------------------------------------------------------------------
@pytest.mark.parametrize("split", ["validation+validation", "validation + validation", "validation+validation[:5]",
                                   "validation[:5]+validation[5:]", "validation+"])
def test_a_split_named_twice_is_refused(prepared, split):
    assert vlfair.load_dataset("fairface", source=prepared[0], split="validation").num_rows == 20  # named once
    with pytest.raises(DataError, match="more than once: its rows would be counted twice|has an empty part"):
        vlfair.load_dataset("fairface", source=prepared[0], split=split)


def test_a_split_named_twice_is_refused_before_the_model_loads(capsys, tmp_path):
    code, err = _cli(capsys, "run", "traits", "--model", "/never/loaded", "--dataset", "synthetic:fairface",
                     "--split", "test+test", "--out", str(tmp_path / "out"))
    assert code == 2 and err == ("vlfair run: split 'test+test' names 'test' more than once: its rows would be "
                                 "counted twice; name each split once")


# ---- 12: blank labels ---------------------------------------------------------------------------
@pytest.mark.parametrize("column, value", [("race", ""), ("race", "  "), ("profession", "  "), ("profession", "\t"),
                                           ("gender", " "), ("profession", "\u200b"), ("race", "\ufeff ")])
def test_a_blank_label_is_a_bad_row_naming_its_row_and_column(tmp_path, column, value):
    rows = [list(row) for row in ROWS]
    rows[2][{"profession": 1, "gender": 2, "race": 3}[column]] = value
    source = _professions(tmp_path / "raw", [tuple(row) for row in rows])
    with pytest.raises(BuildError) as info:
        prepare("professions", source, tmp_path / "out")
    assert f"metadata.csv row 2: column '{column}' is blank ({value!r}): a label must name its group" in str(info.value)
    prepare("professions", source, tmp_path / "out", skip_bad=True)  # left out, and listed in the card
    assert vlfair.load_dataset("professions", source=tmp_path / "out").num_rows == 3


def test_a_blank_label_in_loaded_data_is_refused():
    from vlfair.data.conform import conform
    from vlfair.data.registry import SCHEMAS

    rows = vlfair.load_dataset("synthetic:professions").select(range(4))
    blank = rows.map(lambda row, index: {"race": " " if index == 1 else row["race"]}, with_indices=True)
    with pytest.raises(DataError, match=r"professions column 'race' row 1 in test is blank \(' '\)"):
        conform(blank, SCHEMAS["professions"], "test")


# ---- 25: a zip member is judged by its declared size before it is read -------------------------
def _fairface_zip(root: Path, member: bytes, compression: int) -> Path:
    root.mkdir()
    with open(root / "fairface_label_val.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["file", "age", "gender", "race", "service_test"])
        writer.writerow(["val/1.jpg", "20-29", "Male", "White", "False"])
        writer.writerow(["val/2.jpg", "20-29", "Female", "White", "False"])
    with zipfile.ZipFile(root / "fairface-img-margin025-trainval.zip", "w") as archive:
        archive.writestr("val/1.jpg", _jpeg())
        archive.writestr(zipfile.ZipInfo("val/2.jpg"), member, compress_type=compression)
    return root


@pytest.mark.parametrize("kind", ["bomb", "huge", "huge-stored"])
def test_a_zip_member_too_large_to_read_is_a_bad_row_and_never_read(tmp_path, monkeypatch, kind):
    import vlfair.data.files

    if kind == "bomb":  # 4 MiB of zeros, packed a thousandfold
        member, compression = bytes(4 * 2**20), zipfile.ZIP_DEFLATED
    else:  # over the size limit (lowered here: a real one is half a gigabyte), at any packing
        monkeypatch.setattr(vlfair.data.files, "MAX_FILE_BYTES", 2**20)
        member = os.urandom(2 * 2**20)
        compression = zipfile.ZIP_STORED if kind == "huge-stored" else zipfile.ZIP_DEFLATED
    source = _fairface_zip(tmp_path / "raw", member, compression)
    opened: list[str] = []
    real_open = zipfile.ZipFile.open

    def recording(self, name, *args, **kwargs):
        opened.append(name if isinstance(name, str) else name.filename)
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", recording)
    with pytest.raises(BuildError) as info:
        prepare("fairface", source, tmp_path / "out")
    expected = ("zip member 'val/2.jpg' unpacks to" if kind == "bomb" else
                "image 'val/2.jpg' is 2.0 MiB unpacked, more than the 1.0 MiB an image may have")
    assert f"fairface_label_val.csv row 1: {expected}" in str(info.value)
    assert "val/2.jpg" not in opened and "val/1.jpg" in opened


def test_a_file_too_large_to_read_is_a_bad_row(tmp_path, monkeypatch):
    import vlfair.data.files

    monkeypatch.setattr(vlfair.data.files, "MAX_FILE_BYTES", 2**20)
    rows = ROWS[:2]
    source = _professions(tmp_path / "raw", rows)
    (source / "1.jpg").write_bytes(os.urandom(2 * 2**20))
    with pytest.raises(BuildError, match=r"metadata.csv row 1: image '1.jpg' is 2.0 MiB, more than the 1.0 MiB"):
        prepare("professions", source, tmp_path / "out")


# ---- 30: a full disk -----------------------------------------------------------------------------
@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EDQUOT, errno.EIO])
def test_a_full_disk_names_the_folder_and_leaves_the_earlier_run(base_run, tmp_path, capsys, monkeypatch, error):
    from vlfair.report import writer

    out = tmp_path / "out"
    before = _earlier(base_run, out)

    def full(*args, **kwargs):
        raise OSError(error, os.strerror(error))  # as a write() fails: no file name

    monkeypatch.setitem(writer.TABLE_FILES, "csv", full)
    code, err = _cli(capsys, "rescore", str(base_run), "--out", str(out))
    assert code == 2 and err == (f"vlfair rescore: {os.strerror(error)} (writing the run; the folder was left as it "
                                 f"was): {out}")
    assert _files(out) == before and not _staged(out)


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EACCES, errno.EROFS])
def test_a_cache_that_cannot_be_written_is_a_warning_not_a_lost_run(clip_dir, tmp_path, monkeypatch, error):
    import vlfair.cache

    real = vlfair.cache.atomic_write

    def full(path, write):  # the cache's disk is full (or read-only); the run's folder is not
        if path.is_relative_to(tmp_path / "cache"):
            raise OSError(error, os.strerror(error))
        real(path, write)

    monkeypatch.setattr(vlfair.cache, "atomic_write", full)
    out = tmp_path / "out"
    with pytest.warns(vlfair.cache.CacheWarning, match=rf"vlfair cache: cannot write {re.escape(str(tmp_path))}/cache/"
                                                       rf".* \({os.strerror(error)}\); going on without the cache"):
        _run(clip_dir, out, tmp_path / "cache")
    assert load_run(out).results["metrics"]  # the run is written, whole


# ---- 31: a card's YAML is read safely and named ---------------------------------------------------
@pytest.mark.parametrize("line, problem", [
    ("evil: !!python/object/apply:os.system ['echo pwned']",
     "could not determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system'"),
    ("evil: !!python/name:os.system ''",
     "could not determine a constructor for the tag 'tag:yaml.org,2002:python/name"),
    ("evil: [unclosed", "expected ',' or ']', but got"),
    ("evil: {a: 1", "expected ',' or '}', but got"),
], ids=["object-apply", "python-name", "unclosed-list", "unclosed-mapping"])
def test_a_card_s_bad_yaml_names_the_card_and_its_line(prepared, tmp_path, clip_dir, capsys, line, problem):
    folder = tmp_path / "faces"
    shutil.copytree(prepared[0], folder)
    lines = (folder / "README.md").read_text().splitlines()
    at = lines.index("vlfair:")  # a line of the YAML header
    lines.insert(at, line)
    (folder / "README.md").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError) as info:
        vlfair.load_dataset("fairface", source=folder, split="validation")
    message = str(info.value)
    assert message.startswith(f"{folder / 'README.md'}, line ") and problem in message
    number = int(message.split(", line ")[1].split(":")[0])
    assert number in (at + 1, at + 2) and "<unicode string>" not in message  # the line of the file, 1-based
    code, err = _cli(capsys, "run", "traits", "--model", str(clip_dir), "--dataset", str(folder), "--split",
                     "validation", "--out", str(tmp_path / "out"))
    assert code == 2 and err.splitlines()[-1] == f"vlfair run: {message}"
