"""A leaderboard many people feed: each run is added to a Hub dataset repository as new files in
one commit (``vlfair push-results``), and boards read every run back (``vlfair leaderboard
hf://datasets/ORG/NAME``, the leaderboard Space).

Layout of the repository, one folder per run, never rewritten::

    runs/<probe>/<family>/<model>--<content hash>/results.json
                                                 /samples.parquet   (the file results.json names)

The folder is named by what the run measured (its family: see :func:`vlfair.report.results.family_of`)
and by its content hash (:func:`content_hash`), so two people's runs never share a path, and the
same run pushed twice lands on a path that is already there and is not added again.

A run's folder holds ``results.json`` (the bytes the run wrote) and the samples file it names
(``samples.parquet``, its SHA-256 checked before the push). ``<model>`` is the model's name for people
with every character but letters, digits, ``.``, ``_``, ``-`` as ``-``; the content hash (what counts as
one run: docs/DESIGN.md, "The shared leaderboard") is checked against the samples file's rows at the push.
``vlfair leaderboard --push-to-hub`` used to upload one whole table and replace the last person's: it is
now an error that names ``push-results``.

Pushing (:func:`push_run`) reads the repository's head commit, lists its files at that commit, adds only
the paths that are free (``CommitOperationAdd``, one commit) and names the head as ``parent_commit``: a
commit another person made in between makes the Hub refuse (412), and the push looks again (3 tries). A
run already there is said and exits 0; a repository that is missing, a model or Space repository, no
write access, a missing results.json, a samples file missing or not the one the run wrote: one line, exit
2, nothing written. A results.json without a samples entry (a probe that writes none, a run before
samples) is pushed alone with a warning: the board ranks results.json alone, only a paired comparison
needs the samples. One without a family (an older vlfair) is refused: nothing says what it may be ranked
against. ``--benchmark`` also writes the repository's ``eval.yaml`` (``eval_results.benchmark_eval_yaml``
over every run at the head commit and this one) in the same commit, only where it changes. A run there
that eval.yaml cannot hold (anyone may push one whose numbers collide on a task id, within it or with
another run) never blocks a later push: the runs are taken in path order, the new one last, and each that
cannot join those before it is left out of eval.yaml and named in a warning, with the run it collides
with (``_benchmarkable``); the runs already there keep their place.

Reading. A SOURCE is a results.json, a folder (every results.json in its tree) or
``hf://datasets/ORG/NAME[@REV]``. Anyone who can push to a board chooses what is in it, so a read
downloads only files it names, each within a cap, sized before anything is fetched (:func:`download_runs`,
:func:`download_chosen`): huggingface_hub's dry run (``snapshot_download(..., dry_run=True)``, the
repository's tree with each file's size, cached per commit) lists the files matching the read's patterns
at the commit the revision is now, and only those within their caps are then fetched, each by its exact
path (a ``*``, ``?`` or ``[`` in a name is itself), at that commit. A board read takes every
``runs/**/results.json`` of at most ``MAX_RESULTS_BYTES`` (64 MiB; the leaderboard Space also an older
pushed table ``data/results-*.parquet`` of at most 256 MiB) and 1 GiB in all (``MAX_BOARD_BYTES``, in
path order); a file over its cap, or past the total, is not downloaded and is named among the skipped
files with its size (``hf://datasets/acme/board/runs/x/results.json: 70,000,000 bytes, larger than any
results.json (67,108,864 at most): not downloaded``). Where the Hub cannot be reached, the cached copy is
read as it is (nothing is downloaded then); with none, one line says so. The Hub's cache keeps what was
fetched.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import glob
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vlfair.cache import sha256_of
from vlfair.report.results import MAX_RESULTS_BYTES, read_results

HUB_PREFIX = "hf://datasets/"
RUNS = "runs"
RESULTS_PATTERN = "runs/**/results.json"
EVAL_FILE = "eval.yaml"
ATTEMPTS = 3  # a push looks again when another person's commit landed between its look and its commit


class HubError(ValueError):
    """A run that cannot be pushed, or a repository that cannot be read, in one line."""


def content_hash(results: dict[str, Any]) -> str:
    """SHA-256 of a run's canonical JSON (sorted keys, no spaces) without what differs between two
    runs of the same numbers: its ``created`` time, the ``machine`` it ran on (the same numbers from two
    machines are one run), and its samples file's SHA-256 (the samples
    file records the time too, so a re-run's bytes differ while every number is the same). The
    samples' rows stay in it (``samples.content_sha256``): a run with other samples behind the same
    numbers is another run, in a folder of its own, never "already there" under the first push's."""
    content = {key: value for key, value in results.items() if key not in ("created", "machine")}
    if isinstance(content.get("samples"), dict):
        content["samples"] = {key: value for key, value in content["samples"].items() if key != "sha256"}
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def dedupe(runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The runs with one copy of each content hash (the first given), and how many were left out."""
    seen: set[str] = set()
    unique = []
    for results in runs:
        digest = content_hash(results)
        if digest not in seen:
            seen.add(digest)
            unique.append(results)
    return unique, len(runs) - len(unique)


def slug(text: str, limit: int = 60) -> str:
    """A path component from a name a person chose: letters, digits, '.', '_' and '-' kept, any
    other run of characters one '-' (a model's Hub id "org/name" becomes "org-name")."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:limit].strip("-.")
    return cleaned or "run"


def run_folder(results: dict[str, Any]) -> str:
    """Where a run lives in the repository (module docstring)."""
    model = results["model"].get("name") or results["model"]["spec"]
    return f"{RUNS}/{slug(results['probe'])}/{results['family']}/{slug(model)}--{content_hash(results)}"


def is_repo_id(text: str) -> bool:
    """``text`` is a Hub ORG/NAME: each part starts with a letter or digit, no ".." (never a path)."""
    return bool(re.fullmatch(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*", text)) and ".." not in text


def hub_repo(source: str) -> tuple[str, str | None] | None:
    """``(repo_id, revision)`` of ``hf://datasets/ORG/NAME[@REVISION]``; None for anything else."""
    if not source.startswith(HUB_PREFIX):
        return None
    repo, _, revision = source[len(HUB_PREFIX):].strip("/").partition("@")
    if not is_repo_id(repo):
        raise HubError(f"{source}: a Hub dataset is hf://datasets/ORG/NAME[@REVISION]")
    return repo, revision or None


def repo_id_of(text: str) -> str:
    """ORG/NAME, given as it is or as hf://datasets/ORG/NAME."""
    found = hub_repo(text) if text.startswith(HUB_PREFIX) else (text.strip("/"), None)
    assert found is not None
    repo, revision = found
    if revision or not is_repo_id(repo):
        raise HubError(f"--repo {text}: a dataset repository is ORG/NAME (or hf://datasets/ORG/NAME), no revision")
    return repo


# ---- push ------------------------------------------------------------------------------------
@dataclass
class LocalRun:
    """A finished run on disk, checked: its results, and the files to upload (name -> bytes or path)."""

    results: dict[str, Any]
    files: dict[str, bytes | Path]
    warnings: list[str] = field(default_factory=list)


def local_run(run_dir: str | Path) -> LocalRun:
    """RUN_DIR's results.json (schema-checked) and the samples file it names (its SHA-256 checked).

    A results.json without a family (written before vlfair recorded one) is refused: nothing says
    which runs it may be ranked against. One without samples is pushed alone, with a warning: a
    probe may write none (a plugin's, an older run), and the board ranks results.json alone; only a
    paired comparison of two runs needs the samples."""
    given = Path(run_dir)
    path = given / "results.json" if given.is_dir() else given
    if not path.is_file():
        raise HubError(f"no results.json in {given}" if given.is_dir() or not given.suffix else f"no file {given}")
    data = path.read_bytes()  # uploaded as it is: the bytes checked are the bytes pushed
    results = read_results([path])[0]
    if json.loads(data) != results:
        raise HubError(f"{path} changed while it was read; push again")
    if "family" not in results:
        raise HubError(f"{path} has no family (written by an older vlfair): nothing says which runs it may be "
                       "ranked against; run it again with this vlfair")
    files: dict[str, bytes | Path] = {"results.json": data}
    samples = results.get("samples")
    if not samples:
        return LocalRun(results, files, [f"{path} names no samples file: only results.json is pushed, and a paired "
                                         "comparison with this run will not be possible"])
    sample_path = path.parent / samples["file"]
    if not sample_path.is_file():
        raise HubError(f"{sample_path} is missing (results.json names it as the run's samples)")
    digest = sha256_of(sample_path)
    if digest != samples["sha256"]:
        raise HubError(f"{sample_path} is not the file the run wrote: its SHA-256 is {digest[:12]}..., results.json "
                       f"records {samples['sha256'][:12]}...")
    recorded = samples.get("content_sha256")
    if recorded is not None:  # the folder's name is made from it: it must be these rows'
        import pyarrow.parquet as pq

        from vlfair.samples import content_sha256

        if content_sha256(pq.read_table(sample_path)) != recorded:
            raise HubError(f"{sample_path}: its rows are not the ones results.json records (content_sha256); the "
                           "run was edited after it was written: run it again")
    files[samples["file"]] = sample_path
    return LocalRun(results, files)


@dataclass
class Pushed:
    """What a push did: the run's folder, the paths it added (none: the run was already there)."""

    repo_id: str
    folder: str
    added: list[str]
    commit_url: str | None
    warnings: list[str]


def push_run(run_dir: str | Path, repo: str, token: str | None = None,
             benchmark: Callable[[list[dict[str, Any]], str], str] | None = None) -> Pushed:
    """Add the run in ``run_dir`` to the Hub dataset ``repo`` as new files in one commit.

    Nothing in the repository is deleted or overwritten: the files are added only where their
    paths are free, and the commit names the revision they were checked against
    (``parent_commit``), so a commit another person made in between is not overwritten: the push
    looks again. With ``benchmark`` (``eval_results.benchmark_eval_yaml``), the commit also writes
    the repository's eval.yaml from every run in it, this one included.

    Raises:
        HubError: the run is not complete (above), or the repository is missing, not a dataset, or
            not writable with the token.
    """
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    repo_id = repo_id_of(repo)
    run = local_run(run_dir)
    folder = run_folder(run.results)
    api = HfApi(token=token)
    for attempt in range(ATTEMPTS):
        head = _dataset_head(api, repo_id)
        # asked path by path at the commit the push builds on: a board of many runs is not listed
        paths = [f"{folder}/{name}" for name in run.files] + ([EVAL_FILE] if benchmark else [])
        present = {path for path in paths if api.file_exists(repo_id, path, repo_type="dataset", revision=head)}
        operations = [CommitOperationAdd(f"{folder}/{name}", content)
                      for name, content in run.files.items() if f"{folder}/{name}" not in present]
        warnings = list(run.warnings)
        if benchmark is not None:
            eval_yaml = _benchmark_file(api, repo_id, head, EVAL_FILE in present, run.results, benchmark, warnings)
            if eval_yaml is not None:
                operations.append(CommitOperationAdd(EVAL_FILE, eval_yaml))
        if not operations:
            return Pushed(repo_id, folder, [], None, warnings)
        try:
            commit = api.create_commit(repo_id, operations, commit_message=_message(run.results),
                                       repo_type="dataset", parent_commit=head)
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else None
            if status == 412 and attempt < ATTEMPTS - 1:  # someone committed since we looked: look again
                continue
            raise HubError(_refused(repo_id, status, exc)) from None
        return Pushed(repo_id, folder, [op.path_in_repo for op in operations], getattr(commit, "commit_url", None),
                      warnings)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _message(results: dict[str, Any]) -> str:
    model = results["model"].get("name") or results["model"]["spec"]
    return f"vlfair push-results: {results['probe']} of {model}"[:200]


def _dataset_head(api: Any, repo_id: str) -> str:
    """The commit the dataset repository ``repo_id`` is at; a one-line error where there is none."""
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    try:
        return api.repo_info(repo_id, repo_type="dataset").sha
    except RepositoryNotFoundError:
        pass
    except HfHubHTTPError as exc:
        raise HubError(_refused(repo_id, exc.response.status_code if exc.response is not None else None, exc)) from None
    for kind in ("model", "space"):
        if api.repo_exists(repo_id, repo_type=kind):
            raise HubError(f"{repo_id} is a {kind} repository, not a dataset: runs go to a dataset repository "
                           f"(hf repos create ORG/NAME --repo-type dataset)")
    raise HubError(f"no dataset repository {repo_id} on the Hub, or the token cannot see it "
                   f"(create it with: hf repos create {repo_id} --repo-type dataset)")


def _refused(repo_id: str, status: int | None, exc: Exception) -> str:
    if status == 401:
        return f"the Hub wants a token to write to datasets/{repo_id}: hf auth login, or --token"
    if status == 403:
        return f"no write access to datasets/{repo_id} with this token (HTTP 403)"
    if status == 412:
        return f"datasets/{repo_id} kept changing while this run was being added ({ATTEMPTS} tries); push again"
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"the Hub refused the commit to datasets/{repo_id}: {first_line}"


def _benchmark_file(api: Any, repo_id: str, head: str, exists: bool, results: dict[str, Any],
                    benchmark: Callable[[list[dict[str, Any]], str], str], warnings: list[str]) -> bytes | None:
    """eval.yaml made from every run at ``head`` and this one; None when it would not change. A
    file in the repository that is not a readable results.json is left out and named in ``warnings``."""
    from huggingface_hub import hf_hub_download

    problems: list[str] = []  # a file too large to read, or not a results.json: left out, and named
    root = download_runs(f"{HUB_PREFIX}{repo_id}@{head}", api.token, skipped=problems)
    named = [(f"datasets/{repo_id}/{path.relative_to(root).as_posix()}", read)
             for path in sorted(root.rglob("results.json")) for read in read_results([path], problems)]
    runs = _benchmarkable([*named, ("this run", results)], repo_id, benchmark, problems)
    warnings.extend(f"eval.yaml leaves out {problem.replace(str(root), f'datasets/{repo_id}', 1)}"
                    for problem in problems)
    text = benchmark(runs, repo_id).encode("utf-8")
    if exists:
        current = Path(hf_hub_download(repo_id, EVAL_FILE, repo_type="dataset", revision=head, token=api.token))
        if current.read_bytes() == text:
            return None
    return text


def _benchmarkable(named: list[tuple[str, dict[str, Any]]], repo_id: str,
                   benchmark: Callable[[list[dict[str, Any]], str], str], problems: list[str]) -> list[dict[str, Any]]:
    """The runs eval.yaml is made from (one copy of each): all of them where they make one together; else
    each in turn, in path order, kept where it adds to those before it and left out, named in
    ``problems``, where it cannot (a crafted run whose numbers collide with others' task ids must not
    block every later push)."""
    runs, _ = dedupe([results for _, results in named])
    try:
        benchmark(runs, repo_id)
        return runs
    except (ValueError, TypeError, KeyError) as exc:  # whatever a run the schema let by makes the benchmark raise
        first = exc
    kept: list[tuple[str, dict[str, Any]]] = []
    for name, results in named:
        try:
            benchmark(dedupe([*(r for _, r in kept), results])[0], repo_id)
        except (ValueError, TypeError, KeyError) as exc:
            # the run it cannot stand beside, if it is not its own problem
            partner = next((other for other, earlier in kept
                            if not _benchmarks(benchmark, [earlier, results], repo_id)), None)
            problems.append(f"{name}: {' '.join(str(exc).split())[:300]}" + (f" (with {partner})" if partner else ""))
            continue
        kept.append((name, results))
    if not problems:  # the runs fail only together, and no one of them can be named
        raise HubError(f"eval.yaml cannot be made from the runs in datasets/{repo_id}: {first}")
    return dedupe([results for _, results in kept])[0]


def _benchmarks(benchmark: Callable[[list[dict[str, Any]], str], str], runs: list[dict[str, Any]],
                repo_id: str) -> bool:
    try:
        benchmark(dedupe(runs)[0], repo_id)
    except (ValueError, TypeError, KeyError):
        return False
    return True


# ---- read ------------------------------------------------------------------------------------
# What a read downloads from a board anyone can push to: only files it names, each within a cap, found by
# listing the repository (paths and sizes) at one commit first, so no file is fetched to learn its size.
MAX_SAMPLES_BYTES = 512 * 2**20  # a run's samples.parquet: 200,000 rows of a probe are tens of MB
MAX_BOARD_BYTES = 2**30  # every results.json of one board read together (a run's is kilobytes)
CANDIDATES = 4  # folders of one run id a comparison looks into (more are another push's copies, or a trap)


@dataclass(frozen=True)
class Wanted:
    """Files a read takes: repository paths matching ``pattern`` (fnmatch: ``*`` crosses ``/``), each of
    at most ``max_bytes``."""

    pattern: str
    max_bytes: int
    what: str = "results.json"


BOARD_FILES = (Wanted(RESULTS_PATTERN, MAX_RESULTS_BYTES),)


def download_runs(source: str, token: str | bool | None = None, wanted: tuple[Wanted, ...] | None = None,
                  skipped: list[str] | None = None, max_total: int | None = None) -> Path:
    """A local copy of the files ``wanted`` from the Hub dataset ``source``
    (hf://datasets/ORG/NAME[@REVISION]): by default (:data:`BOARD_FILES`) every run's results.json. A file
    over its cap, and every file past ``max_total`` bytes in all (:data:`MAX_BOARD_BYTES`; in path order),
    is not downloaded and is named in
    ``skipped`` (an error without it). The Hub's cache keeps the copy between calls (and serves it where
    the Hub cannot be reached). ``token``: huggingface_hub's (None: the logged-in one; False: none, as
    anyone reads it)."""
    wanted = wanted or BOARD_FILES
    max_total = MAX_BOARD_BYTES if max_total is None else max_total
    listing = _listing(source, token, [w.pattern for w in wanted])
    taken, total, over = [], 0, []
    for path, size in sorted(listing.sizes.items()):
        rule = next(w for w in wanted if fnmatch.fnmatchcase(path, w.pattern))
        if size > rule.max_bytes:
            _too_large(skipped, f"{source}/{path}: {size:,} bytes, larger than any {rule.what} "
                                f"({rule.max_bytes:,} at most): not downloaded")
        elif total + size > max_total:
            over.append(path)
        else:
            taken.append(path)
            total += size
    if over:
        _too_large(skipped, f"{source}: {len(over):,} more files ({over[0]} and on) not downloaded: a board read "
                            f"takes {max_total:,} bytes at most")
    return listing.fetch(taken)


def download_chosen(source: str, runs: list[str], token: str | bool | None = None,
                    max_samples: int = MAX_SAMPLES_BYTES) -> dict[str, Path]:
    """The folder of each run in ``runs`` (by its content hash) found in the Hub dataset ``source``, with
    only its results.json and the one samples file that names, each within its cap, downloaded.

    Raises:
        HubError: a run's samples file is not a file beside it, is missing, or is over ``max_samples`` bytes.
    """
    listing = _listing(source, token, [f"{RUNS}/*--{run}/results.json" for run in runs])
    candidates = {run: [path for path in sorted(listing.sizes) if path.endswith(f"--{run}/results.json")
                        and listing.sizes[path] <= MAX_RESULTS_BYTES][:CANDIDATES] for run in runs}
    root = listing.fetch([path for paths in candidates.values() for path in paths])
    folders: dict[str, Path] = {}
    samples: list[str] = []
    for run, paths in candidates.items():
        problems: list[str] = []
        for path in paths:
            read = read_results([root / path], problems)  # a copy that cannot be read is said as the board says it
            if not read:
                continue  # the run may have another copy; if not, the first problem is why it cannot be compared
            results = read[0]
            if content_hash(results) != run:
                continue  # a folder named like the run holding another one
            folder = path.rsplit("/", 1)[0]
            named = (results.get("samples") or {}).get("file")
            if named is not None:
                samples.append(_samples_path(source, folder, named, listing, max_samples))
            folders[run] = root / folder
            break
        if run not in folders and problems:
            raise HubError(problems[0].replace(str(root), source, 1))  # named in the repository, not the server's cache
    listing.fetch(samples)
    return folders


def _samples_path(source: str, folder: str, named: Any, listing: _Listing, max_samples: int) -> str:
    """The repository path of the samples file a run's results.json names, checked to be within its cap."""
    if not isinstance(named, str) or not re.fullmatch(r"[\w.-]+", named) or set(named) == {"."}:
        raise HubError(f"{source}/{folder}/results.json: its samples file {str(named)[:80]!r} is not a file name "
                       "beside it")
    path = f"{folder}/{named}"
    size = listing.size(path)
    if size is None:
        raise HubError(f"{source}/{folder}: no {named} in it (its results.json names it as the samples)")
    if size > max_samples:
        raise HubError(f"{source}/{path}: {size:,} bytes, more than the {max_samples:,} a comparison here "
                       "reads; compare the runs where they are (vlfair compare)")
    return path


def _too_large(skipped: list[str] | None, problem: str) -> None:
    if skipped is None:
        raise HubError(problem)
    skipped.append(problem)


@dataclass
class _Listing:
    """The files of a Hub dataset at one commit that a read asked about, with their sizes, known before
    anything is downloaded (huggingface_hub's dry run: the repository's tree at that commit);
    where the Hub cannot be reached, the cached snapshot's, which nothing then adds to."""

    source: str
    repo_id: str
    commit: str
    token: str | bool | None
    sizes: dict[str, int]
    cached: Path | None = None  # the snapshot folder, offline

    def size(self, path: str) -> int | None:
        """The size of ``path`` at this commit (one the read did not ask about: a dry run of that path alone),
        None where there is no such file."""
        if self.cached is not None:
            return _local_size(self.cached / path)
        if path not in self.sizes:
            self.sizes.update(_listing(f"{HUB_PREFIX}{self.repo_id}@{self.commit}", self.token,
                                       [glob.escape(path)]).sizes)
        return self.sizes.get(path)

    def fetch(self, paths: list[str]) -> Path:
        """The files ``paths`` downloaded (each one named exactly: a "*", "?" or "[" a pusher put in a name is
        itself, never a wildcard); the snapshot's folder."""
        from huggingface_hub import snapshot_download

        if self.cached is not None:
            return self.cached
        with _hub_errors(self.source, self.repo_id, self.commit):
            root = Path(snapshot_download(self.repo_id, repo_type="dataset", revision=self.commit, token=self.token,
                                          allow_patterns=[glob.escape(path) for path in paths]))
        root.mkdir(parents=True, exist_ok=True)  # a snapshot of no file has no folder of its own
        return root


def _local_size(path: Path) -> int | None:
    return path.stat().st_size if path.is_file() else None


def _listing(source: str, token: str | bool | None, patterns: list[str]) -> _Listing:
    """The files of the Hub dataset ``source`` matching ``patterns`` (fnmatch), at the commit its revision
    is now (and later fetched at that commit: a push in between changes nothing)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import DryRunError

    found = hub_repo(source)
    if found is None:
        raise HubError(f"{source}: not a Hub dataset (hf://datasets/ORG/NAME)")
    repo_id, revision = found
    _quiet_empty_patterns()
    with _hub_errors(source, repo_id, revision):
        try:
            infos = snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=patterns,
                                      token=token, dry_run=True)
        except DryRunError as exc:  # the Hub cannot be reached: the copy in the cache as it is (asking for no
            # file: what earlier reads left out over its cap is not there, and is no reason to refuse the rest)
            _raise_unless_unreachable(exc)
            root = Path(snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=[],
                                          token=token, local_files_only=True))
            sizes = {path.relative_to(root).as_posix(): path.stat().st_size for path in root.rglob("*")
                     if path.is_file()}
            return _Listing(source, repo_id, root.name, token,
                            {path: size for path, size in sizes.items()
                             if any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)}, root)
        commit = infos[0].commit_hash if infos else _head(repo_id, revision, token)
    return _Listing(source, repo_id, commit, token, {info.filename: int(info.file_size or 0) for info in infos})


def _raise_unless_unreachable(exc: Exception) -> None:
    """huggingface_hub's dry run turns every answer of the Hub into a DryRunError: a missing repository or
    revision, or a refused token, is raised as what it is (named by ``_hub_errors``), not read as "offline"."""
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    cause = exc.__cause__
    status = cause.response.status_code if isinstance(cause, HfHubHTTPError) and cause.response is not None else None
    if isinstance(cause, (RepositoryNotFoundError, RevisionNotFoundError)) or (
            isinstance(cause, HfHubHTTPError) and status in (401, 403)):
        raise cause  # (the Hub down, 5xx, is read as unreachable: the cached copy serves)


@functools.cache
def _quiet_empty_patterns() -> None:
    """huggingface_hub warns "No files matched" where a read asks for files a board does not hold (yet): an
    answer vlfair gives in its own words, not a notice for its users."""
    import logging

    logging.getLogger("huggingface_hub._snapshot_download").addFilter(
        lambda record: not record.getMessage().startswith("No files matched"))


def _head(repo_id: str, revision: str | None, token: str | bool | None) -> str:
    from huggingface_hub import HfApi

    return str(HfApi(token=token).repo_info(repo_id, repo_type="dataset", revision=revision).sha)


@contextlib.contextmanager
def _hub_errors(source: str, repo_id: str, revision: str | None) -> Iterator[None]:
    """huggingface_hub's errors as one line naming ``source``."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        yield
    except RepositoryNotFoundError:
        api = HfApi()
        kind = next((k for k in ("model", "space") if api.repo_exists(repo_id, repo_type=k)), None)
        raise HubError(f"{source}: {repo_id} is a {kind} repository, not a dataset" if kind else
                       f"{source}: no dataset repository {repo_id} on the Hub, or the token cannot see it") from None
    except RevisionNotFoundError:
        raise HubError(f"{source}: the repository has no revision {revision!r}") from None
    except LocalEntryNotFoundError:
        raise HubError(f"{source}: the Hub cannot be reached and no copy is in the cache") from None
    except HfHubHTTPError as exc:
        raise HubError(f"{source}: the Hub answered {exc.response.status_code if exc.response is not None else exc}"
                       ) from None


__all__ = ["BOARD_FILES", "HUB_PREFIX", "MAX_BOARD_BYTES", "MAX_SAMPLES_BYTES", "HubError", "LocalRun", "Pushed",
           "Wanted", "content_hash", "dedupe", "download_chosen", "download_runs", "hub_repo", "is_repo_id",
           "local_run", "push_run", "repo_id_of", "run_folder", "slug"]
