"""Writing files and output folders all at once: a run, a comparison, a demo, a prepared dataset.

:func:`atomic_write` writes one file through a temporary file beside it. :func:`atomic_output`
writes a whole folder: its body fills a staging folder beside the target (``.NAME.vlfair-new-*``,
on the same filesystem), which is renamed into place once every file is written (on Linux
exchanged with an earlier output in one step). An earlier output is kept until then and removed
after. A process killed midway (kill -9, a full disk) leaves the earlier output whole, never a mix
of two runs; what it left beside it is cleared by the next write into that folder.

One writer per folder: a lock (``filelock``) on ``.NAME.vlfair-lock`` beside the folder is held
while it is written. A second writer is refused at once, naming the folder and the lock, rather
than waiting to replace what the first one writes. The CLI takes the lock before any work
(:func:`claim_output`), so a second ``vlfair run`` into the same ``--out`` stops before it loads a
model.

A folder is replaced only when it is empty or holds an earlier output of the same kind and
nothing else: every output carries the list of the files vlfair wrote (``.vlfair-output.json``), and
a folder with any other file (a user's notes beside a run, another command's output, a run of a
vlfair without that list) is refused, never deleted.

The one write path of ``run``, ``rescore``, ``compare``, ``prepare`` and ``demo``, and of
``run_probe(..., out_dir)``, ``write_outputs``, ``write_comparison`` and ``write_prepared``. Every file
goes into a staging folder beside ``--out`` (``.NAME.vlfair-new-XXXXXXXX``, same filesystem), which takes
``--out``'s place only once the last file is written: on Linux exchanged with the earlier output in one
``renameat2(RENAME_EXCHANGE)``; elsewhere the earlier output is moved aside, the new one moved in, and the
earlier one removed. A command killed at any moment (kill -9, a full disk, Ctrl-C) leaves the earlier
output as it was, never a results.json of one run beside the tables of another. An earlier output is
replaced as a whole: a table the new run does not write does not stay behind. A write error that names no
file (``[Errno 28] No space left on device``) is reported with the folder and "the folder was left as it
was".

A command that fails after measuring leaves ``--out`` as it was too: ``ProbeRun.failure()`` says why a run
is no result to build on (it measured nothing; a value came out null), and the CLI's one write step for
``run`` and ``rescore`` (``cli._write_run``) then writes the run into ``OUT.failed`` beside ``--out``
(claimed like any output: a folder of someone else's files there is not touched, and the error says the
run could not be kept), never over the earlier run, and exits 2 naming both folders. A later run that
succeeds goes to ``--out`` as usual; ``OUT.failed`` stays until its owner removes it (vlfair deletes no
output a person may be reading).

The lock: the CLI holds it from before any work until the command ends (``--out runs/x is being written
by another vlfair command (it holds the lock ...); wait until it has finished, or give another folder``,
exit 2); library calls take it while they write and raise :class:`OutputError`. It refuses rather than
waits: a waiting run would, once it got the lock, silently replace the first one's output. Under torchrun
/ accelerate only rank 0 takes it. A process keeps one lock object per folder (it re-enters its own lock);
a forked child (a Space's worker, a sweep's multiprocessing pool) drops its parent's objects and takes
locks of its own (``os.register_at_fork``: filelock refuses an object used across a fork, and the parent's
claims are not the child's to release).

``--out`` may be a new folder, an empty one, or an earlier output of the same command holding only the
files it wrote: ``.vlfair-output.json`` holds its kind ("run", "comparison", "prepared dataset", "demo")
and every file written (relative paths, written last into the staging folder). A folder with any file the
list does not name (a user's notes.md or figure.png beside a run, even named like a run's tables), with
another kind's list, or with none (an output of a vlfair before the lists, a folder of one's own) is
refused before any work and left untouched (``--out mine holds files that are not a vlfair run's
(notes.txt): vlfair replaces its output folder as a whole, so it writes into a new or empty folder or an
earlier run's only (one that lists its files in .vlfair-output.json); give another folder``), as are a
file, the filesystem root, a mount point (it cannot be renamed: a folder inside it is named) and a folder
that is or holds the current folder. vlfair never deletes a folder it did not write. Leftovers are
recognised by their exact names (``.NAME.vlfair-new-`` or ``-old-`` and 8 hex digits), never by a prefix
another folder's name could share; where folders cannot be exchanged in one step, a failed move puts the
earlier output back before the error is raised.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import errno
import os
import secrets
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

NEW, OLD, LOCK = ".vlfair-new-", ".vlfair-old-", ".vlfair-lock"  # names beside a folder: .NAME<suffix>
MANIFEST = ".vlfair-output.json"  # inside an output: its kind and every file vlfair wrote there
SHOWN = 5  # entries named in a refusal


class OutputError(ValueError):
    """An output folder that cannot be written: a file, one holding other files, one another
    process is writing. The message starts with the folder as it was given."""


@dataclasses.dataclass(frozen=True)
class OutputKind:
    """What a command writes into its output folder: ``what`` names it in messages ("run") and in
    the folder's :data:`MANIFEST`, so an earlier output of another kind is not replaced."""

    what: str


def atomic_write(path: Path, write: Callable[[Any], None]) -> None:
    """Write through a temporary file in the same directory, then rename: all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _leftover_of_atomic_write(entry: Path) -> bool:
    """A temporary file :func:`atomic_write` left behind when it was killed (``.NAME.XXXX.tmp``)."""
    return entry.name.startswith(".") and entry.name.endswith(".tmp")


def _written_files(folder: Path) -> set[str]:
    """Every file under ``folder`` (relative, with "/"), but its manifest and what a killed
    :func:`atomic_write` left behind."""
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*")
            if not path.is_dir() and not _leftover_of_atomic_write(path) and path != folder / MANIFEST}


def _write_manifest(folder: Path, kind: OutputKind) -> None:
    import json

    content = {"kind": kind.what, "files": sorted(_written_files(folder))}
    (folder / MANIFEST).write_text(json.dumps(content, indent=1))


def _listed_files(folder: Path, kind: OutputKind) -> set[str] | None:
    """The files the manifest of an earlier output of ``kind`` lists; None without one."""
    import json

    try:
        content = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(content, dict) or content.get("kind") != kind.what or not isinstance(content.get("files"), list):
        return None
    return {str(name) for name in content["files"]}


def output_problem(out: str | os.PathLike, kind: OutputKind) -> str | None:
    """Why ``out`` cannot become an output of ``kind``, or None: it must be new, empty, or an
    earlier output of that kind holding nothing but the files its manifest lists. The text starts
    with ``out`` as given."""
    given, target = str(out), Path(out).resolve()
    if target.exists() and not target.is_dir():
        return f"{given} is a file, not a directory"
    if not target.name:
        return f"{given} is the root of the filesystem: give a folder for the {kind.what}"
    if Path.cwd().resolve().is_relative_to(target):  # the swap would move the folder the process works in
        return (f"{given} is, or holds, the current folder: vlfair replaces its output folder as a whole; give a "
                f"folder for the {kind.what} (e.g. {Path(given) / kind.what})")
    if target.is_dir() and os.path.ismount(target):  # a mount point cannot be renamed (EBUSY)
        return (f"{given} is a mount point: vlfair replaces its output folder as a whole, which a mount point "
                f"cannot be; give a folder inside it (e.g. {Path(given) / kind.what})")
    if not target.is_dir() or not any(target.iterdir()):
        return None
    present, listed = _written_files(target), _listed_files(target, kind)
    if listed is None:  # no list of this kind: every entry is foreign (a folder of empty folders too)
        foreign = sorted(present) or sorted(e.name for e in target.iterdir())
    else:
        foreign = sorted(present - listed)
        if not foreign:
            return None
    shown = ", ".join(foreign[:SHOWN]) + (f" and {len(foreign) - SHOWN} more" if len(foreign) > SHOWN else "")
    return (f"{given} holds files that are not a vlfair {kind.what}'s ({shown}): vlfair replaces its output "
            f"folder as a whole, so it writes into a new or empty folder or an earlier {kind.what}'s only (one "
            f"that lists its files in {MANIFEST}); give another folder")


def inside_problem(out: str | os.PathLike, sources: Iterable[str | os.PathLike] = (),
                   option: str = "--out") -> str | None:
    """Why a command that writes files into a place it does not own as a whole (``leaderboard --out FILE``,
    ``card-results --out DIR``) must not write at ``out``, or None: ``out`` is or lies inside a vlfair output
    (a folder with a :data:`MANIFEST`, or a run's results.json: its samples replaced, a run could never be
    rescored, compared or pushed again; a folder added inside it, no command could replace the run), or inside a
    local source the command reads (``sources``: files and folders; a Hub address is not local)."""
    given, target = str(out), Path(out).resolve()
    for folder in (target, *target.parents):
        if (folder / MANIFEST).is_file() or (folder / "results.json").is_file():
            where = "is" if folder == target else "lies inside"
            return (f"{option} {given} {where} the vlfair output {folder} (written and replaced only as a whole, by "
                    f"the command that made it): give a path outside it")
    for source in sources:
        if str(source).startswith("hf://"):
            continue
        read = Path(source).resolve()
        if target == read or target.is_relative_to(read):
            where = "is" if target == read else "lies inside"
            return f"{option} {given} {where} {source}, which the command reads: give a path outside it"
    return None


def _beside(target: Path, suffix: str) -> Path:
    return target.parent / f".{target.name}{suffix}"


# ---- the lock --------------------------------------------------------------------------------
_LOCKS: dict[Path, Any] = {}  # target -> its FileLock: one object per folder, so a process re-enters its own lock
_CLAIMED: list[Any] = []  # locks claim_output took, released by release_claims


def _forget_the_parents_locks() -> None:
    """In a forked child: the parent's lock objects are the parent's (filelock refuses one used across
    a fork, and the parent's claims are not the child's to release); the child takes its own."""
    _LOCKS.clear()
    _CLAIMED.clear()


if hasattr(os, "register_at_fork"):  # a Space's forked workers, a sweep's multiprocessing pool
    os.register_at_fork(after_in_child=_forget_the_parents_locks)


def _acquire(target: Path, given: str) -> Any:
    from filelock import FileLock, Timeout

    if target not in _LOCKS:
        _LOCKS[target] = FileLock(str(_beside(target, LOCK)), timeout=0)
    lock = _LOCKS[target]
    try:
        lock.acquire()
    except Timeout:
        raise OutputError(f"{given} is being written by another vlfair command (it holds the lock "
                          f"{_beside(target, LOCK)}); wait until it has finished, or give another folder") from None
    return lock


def claim_output(out: str | os.PathLike, kind: OutputKind) -> None:
    """Before any work: ``out`` can become an output of ``kind`` (:func:`output_problem`), the
    folder it goes in can be written, and this process holds its lock until
    :func:`release_claims` (so a second writer stops now, not after its run)."""
    problem = output_problem(out, kind)
    if problem:
        raise OutputError(problem)
    target = Path(out).resolve()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=target.parent):  # the staging folder is made there
            pass
    except OSError as exc:
        raise OutputError(f"{out} cannot be written: its folder {target.parent} is not writable "
                          f"({exc.strerror or exc})") from None
    if int(os.environ.get("RANK", "0")) == 0:  # under torchrun / accelerate launch only the main process writes
        _CLAIMED.append(_acquire(target, str(out)))


def release_claims() -> None:
    """Release every lock :func:`claim_output` took (the CLI, when a command ends)."""
    while _CLAIMED:
        _CLAIMED.pop().release()


# ---- the write -------------------------------------------------------------------------------
_STAGING: contextvars.ContextVar[tuple[Path, Path] | None] = contextvars.ContextVar("vlfair_staging", default=None)


def final_path(path: str | os.PathLike) -> Path:
    """Where ``path`` will be once the output being written is in place: a path inside the
    staging folder names its place in the target (for paths an output records, such as the runs
    a comparison read)."""
    active, path = _STAGING.get(), Path(path)
    if active is None:
        return path
    staging, out = active
    absolute = path.resolve()
    return out / absolute.relative_to(staging) if absolute.is_relative_to(staging) else path


@contextlib.contextmanager
def atomic_output(out: str | os.PathLike, kind: OutputKind) -> Iterator[Path]:
    """A staging folder to write an output of ``kind`` into; it replaces ``out`` when the block
    ends without an error (an error leaves ``out`` as it was).

    Inside another output's staging folder (a demo writes its runs into its own), the folder is
    written directly: the outer output is swapped in as a whole.

    Raises:
        OutputError: ``out`` is a file, holds other files, or another process is writing it.
        OSError: the write failed (a full disk); it names ``out``, which is unchanged.
    """
    target = Path(out).resolve()
    active = _STAGING.get()
    if active is not None and target.is_relative_to(active[0]):
        target.mkdir(parents=True, exist_ok=True)
        yield target
        _write_manifest(target, kind)
        return
    problem = output_problem(out, kind)
    if problem:
        raise OutputError(problem)
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = _acquire(target, str(out))
    try:
        _clear_leftovers(target)
        staging = _beside(target, NEW + secrets.token_hex(4))
        staging.mkdir()  # not mkdtemp: the folder keeps the user's usual permissions (umask), not 0700
        token = _STAGING.set((staging, Path(out)))  # paths recorded inside name the folder as it was given
        try:
            yield staging
            _write_manifest(staging, kind)
            problem = output_problem(out, kind)  # again, under the lock: nothing was added to it meanwhile
            if problem:
                raise OutputError(problem)
            _swap(staging, target)
        except OSError as exc:
            raise _naming(exc, out, kind) from exc
        finally:
            _STAGING.reset(token)
            shutil.rmtree(staging, ignore_errors=True)  # gone after the swap; what a failed write left
    finally:
        lock.release()


def _naming(exc: OSError, out: str | os.PathLike, kind: OutputKind) -> OSError:
    """``exc`` naming the output folder where it names no file (a full disk: ``[Errno 28]`` alone)."""
    if exc.filename:
        return exc
    reason = exc.strerror or str(exc) or type(exc).__name__
    return OSError(exc.errno or errno.EIO, f"{reason} (writing the {kind.what}; the folder was left as it was)",
                   str(out))


def _swap(staging: Path, target: Path) -> None:
    """Put ``staging`` in ``target``'s place. An earlier output is exchanged with it in one step
    where the system can (Linux); elsewhere it is moved aside first and removed once the new one
    is in place (killed between the two renames, the next write puts it back:
    :func:`_clear_leftovers`). The caller removes ``staging``, which then holds the earlier output."""
    if not target.exists():
        os.rename(staging, target)
        return
    os.chmod(staging, stat.S_IMODE(target.stat().st_mode))  # a private folder stays private
    if _exchange(staging, target):
        return
    old = _beside(target, OLD + secrets.token_hex(4))
    os.rename(target, old)
    try:
        os.rename(staging, target)
    except OSError:
        os.rename(old, target)  # the earlier output back in its place, as the error says
        raise
    shutil.rmtree(old, ignore_errors=True)


def _exchange(first: Path, second: Path) -> bool:
    """Swap two folders in one step (Linux's renameat2 with RENAME_EXCHANGE): a reader sees the
    old folder or the new one, never none. False where the system or filesystem cannot."""
    import ctypes

    if not sys.platform.startswith("linux"):  # renameat2 is Linux's (ctypes.CDLL(None) fails on Windows)
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # a C library without it
        return False
    at_cwd, rename_exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE from <fcntl.h> and <linux/fs.h>
    if renameat2(at_cwd, os.fsencode(first), at_cwd, os.fsencode(second), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):  # an old kernel, a filesystem without it
        return False
    raise OSError(code, os.strerror(code), str(second))


def _clear_leftovers(target: Path) -> None:
    """What killed writers left beside ``target`` (called under its lock, so none is still
    writing): their staging folders are removed; an earlier output moved aside is put back when
    the target is missing, else removed."""
    import re

    # exactly .NAME.vlfair-new-XXXXXXXX: never a sibling's own leftover (a folder named "NAME.vlfair-new-1")
    ours = re.compile(rf"\.{re.escape(target.name)}({re.escape(NEW)}|{re.escape(OLD)})[0-9a-f]{{8}}")
    left = [(entry, match[1]) for entry in target.parent.iterdir()
            if (match := ours.fullmatch(entry.name)) and entry.is_dir()]
    for entry, what in left:
        if what == NEW:
            shutil.rmtree(entry, ignore_errors=True)
    moved_aside = [entry for entry, what in left if what == OLD]
    for entry in sorted(moved_aside, key=lambda e: e.stat().st_mtime, reverse=True):  # the newest first
        if not target.exists():
            os.rename(entry, target)
        else:
            shutil.rmtree(entry, ignore_errors=True)


__all__ = ["OutputError", "OutputKind", "atomic_output", "atomic_write", "claim_output", "final_path",
           "inside_problem", "output_problem", "release_claims"]
