"""Turning a model reference (local directory, ``ID``, ``ID@REVISION``) into files on disk.

An encoder's ``revision`` is the resolved commit (Hub) or the directory's content fingerprint, and is
part of every cache key. A directory's fingerprint is each file's name and SHA-256, remembered in
``$VLFAIR_CACHE/file-hashes.json`` by device, inode, size, mtime and ctime, so weights swapped in with
their times kept (``cp -p``, ``rsync -a``) are another model, a copy of the folder elsewhere the same
one, and an unchanged model is read once.

Loading is safe by default: safetensors, ``trust_remote_code`` only when the user asks, and passed at
every load that could run a checkpoint's code (Auto classes, diffusers pipelines): left unset,
transformers asks on stdin and a piped "y" runs the checkpoint's file
(``test_every_loader_says_whether_a_checkpoint_s_code_may_run`` walks vlfair's ``from_pretrained``
calls). A checkpoint that names its own code (``auto_map``) is refused in one line naming the model
(:func:`refusing_remote_code`); ``lvlm:`` never runs such code. A checkpoint that ships only pickled
``.bin`` weights is refused, for every kind of model, in one line naming the folder and
``use_safetensors=False``, which reads them with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

# Files a dual encoder needs; never TF/Flax/ONNX weights, and pickled .bin weights only on request.
# (*.jinja: a generative model's chat template)
_BASE_PATTERNS = ["*.json", "*.jinja", "*.txt", "*.model", "*.tiktoken", "*.py", "tokenizer*", "vocab*", "merges*",
                  "spiece*"]
_SAFE_WEIGHTS = ["*.safetensors", "*.safetensors.index.json"]
_PICKLED_WEIGHTS = ["pytorch_model*.bin", "pytorch_model.bin.index.json"]


class ModelNotFoundError(OSError):
    """The model is neither a local directory nor obtainable from the Hub (cache or network)."""


@contextlib.contextmanager
def refusing_remote_code(name: str, how: str, error: type[ValueError] = ValueError) -> Iterator[None]:
    """The refusal by transformers of a checkpoint's own code, met inside (``trust_remote_code=False`` and a config
    whose ``auto_map`` names a file of the checkpoint's), raised as one ``error`` line naming the model and
    saying ``how`` it could run; any other error as it is. transformers' own text spans three lines and
    shows a local folder as an "https://hf.co/" link."""
    try:
        yield
    except ValueError as refused:
        if "trust_remote_code" not in str(refused):
            raise
        raise error(f"model {name!r} ships Python code of its own (its config names it in auto_map); {how}") from None


@dataclasses.dataclass(frozen=True)
class ResolvedModel:
    """Where a model's files are and which exact version they are.

    Attributes:
        ref: what the user named (local path or Hub id, without revision).
        path: local directory holding the files.
        revision: the commit hash (Hub) or ``local-<fingerprint>`` (directory).
    """

    ref: str
    path: str
    revision: str | None


def split_revision(ref: str, revision: str | None = None) -> tuple[str, str | None]:
    """``"org/name@abc123"`` -> ``("org/name", "abc123")``; conflicting revisions are an error."""
    if "@" in ref and not is_local_directory(ref):  # a folder named "x@y" is that folder
        ref, _, pinned = ref.rpartition("@")
        if revision is not None and revision != pinned:
            raise ValueError(f"revision given twice and differently: {pinned!r} in the spec and {revision!r}")
        revision = pinned
    return ref, revision


def directory_fingerprint(path: str | os.PathLike) -> str:
    """Hash of every file's name and content, so weights swapped in change the cache key and the run's
    revision, even with their times kept (``cp -p``, ``rsync -a``: a fingerprint of names, sizes and times
    reused the old model's embeddings), and a copy of the folder elsewhere keeps its revision. A file's
    content hash is remembered by what no copy or edit keeps (:class:`_ContentHashes`): read once."""
    digest = hashlib.sha256()
    root = Path(path)
    hashes = _ContentHashes.load()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(f"{file.relative_to(root).as_posix()}\0{hashes.of(file)}\n".encode())
    hashes.save()
    return "local-" + digest.hexdigest()[:16]


class _ContentHashes:
    """Files' SHA-256 remembered (``$VLFAIR_CACHE/file-hashes.json``) by device, inode, size, modification
    and status-change time: a file written again, or another file put in its place, changes its inode or
    its status-change time, which no tool sets back (``cp -p`` and ``rsync -a`` keep the modification time
    only), so its content is hashed again; an unchanged model is not read at every load."""

    KEEP = 20_000  # entries: the newest are kept
    _seen: dict[str, str] = {}  # this process's, whatever could be written (under _lock: loads may be concurrent)
    _lock = threading.Lock()

    def __init__(self, path: Path | None, known: dict[str, str]):
        self.path, self.known, self.added = path, known, False

    @classmethod
    def load(cls) -> _ContentHashes:
        import json

        from vlfair.cache import cache_root

        path = cache_root("default")
        path = path / "file-hashes.json" if path is not None else None
        known: dict[str, str] = {}
        try:
            loaded = json.loads(path.read_text(encoding="utf-8")) if path is not None and path.is_file() else {}
            known = {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            pass  # unreadable: hashed again, and written anew
        with cls._lock:
            return cls(path, {**known, **cls._seen})

    def of(self, file: Path) -> str:
        from vlfair.cache import sha256_of

        stat = file.stat()
        key = f"{stat.st_dev}:{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ctime_ns}"
        if key not in self.known:
            self.known[key] = sha256_of(file)
            self.added = True
        with _ContentHashes._lock:
            _ContentHashes._seen[key] = self.known[key]
        return self.known[key]

    def save(self) -> None:
        import json

        from vlfair.atomic import atomic_write

        if not self.added or self.path is None:
            return
        kept = dict(list(self.known.items())[-self.KEEP:])
        try:
            atomic_write(self.path, lambda handle: handle.write(json.dumps(kept).encode()))
        except OSError:
            pass  # a cache that cannot be written: hashed again next time, nothing else lost




_HUB_ONLY = contextvars.ContextVar("vlfair_hub_only", default=False)


@contextlib.contextmanager
def hub_only():
    """Within this block a model id is resolved on the Hub (or its cache) only, never as a local
    folder: for ids typed by someone else (a Space's visitor), "acme/clip" must not load ./acme/clip."""
    token = _HUB_ONLY.set(True)
    try:
        yield
    finally:
        _HUB_ONLY.reset(token)


def hub_only_active() -> bool:
    return _HUB_ONLY.get()


def is_local_directory(ref: str) -> bool:
    """Whether ``ref`` loads from a folder of this machine: any existing directory, also one named like
    a Hub id (transformers loads ``openai/clip-vit-base-patch32`` from the working directory when such
    a folder is there), except within :func:`hub_only`."""
    return not hub_only_active() and os.path.isdir(ref)


def is_hub_id(ref: str) -> bool:
    """``owner/name`` with no path syntax (no leading ``.``, ``/`` or ``~``, no empty, ``.`` or ``..`` part)."""
    parts = ref.split("/")
    return not ref.startswith((".", "/", "~")) and len(parts) == 2 and all(p not in ("", ".", "..") for p in parts)


def hub_reference(ref: str, revision: str | None = None) -> tuple[str, str | None] | None:
    """``(owner/name, revision)`` when ``ref`` (``ID``, ``ID@REV``) loads the Hub model of that id, None
    when it loads something else: a local directory (whatever its name looks like) or a path. The
    one rule for "this is the Hub model X": :func:`resolve_model` loads by it, and the studies'
    published numbers are compared only with the models it names.

    Raises:
        ValueError: two different revisions (one in ``ref``, one given).
    """
    ref, revision = split_revision(ref, revision)
    if is_local_directory(ref) or not is_hub_id(ref):
        return None
    return ref, revision


def hub_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def resolve_model(ref: str, revision: str | None = None, *, use_safetensors: bool = True,
                  config_only: bool = False) -> ResolvedModel:
    """Find a model's files locally or fetch them (only the files an encoder needs).

    ``config_only`` fetches just config.json (to build an architecture whose weights come
    from elsewhere, as M-CLIP's ``modelBase``).

    Raises:
        ModelNotFoundError: not a directory, not in the local Hub cache, and the Hub is
            offline or unreachable; or the repository or revision does not exist.
    """
    ref, revision = split_revision(ref, revision)
    if hub_only_active() and not is_hub_id(ref):
        raise ModelNotFoundError(f"{ref!r} is not a Hub model id (owner/name)")
    if is_local_directory(ref):
        if revision is not None:
            raise ValueError(f"{ref!r} is a local directory; a revision ({revision!r}) applies only to Hub ids")
        if use_safetensors and not config_only:
            _refuse_pickled_only(ref)
        return ResolvedModel(ref, os.path.abspath(ref), directory_fingerprint(ref))
    if ref.startswith((".", "/", "~")) or ref.count("/") > 1:
        raise ModelNotFoundError(f"model directory {ref!r} does not exist")

    from huggingface_hub import constants, errors, snapshot_download

    patterns = _BASE_PATTERNS + _SAFE_WEIGHTS + ([] if use_safetensors else _PICKLED_WEIGHTS)
    if config_only:
        patterns = ["config.json"]
    offline = hub_offline()
    try:
        path = snapshot_download(ref, revision=revision, allow_patterns=patterns, local_files_only=offline)
    except errors.RepositoryNotFoundError:
        raise ModelNotFoundError(f"{ref!r} is not a local directory and no such model exists on the Hub") from None
    except errors.RevisionNotFoundError:
        raise ModelNotFoundError(f"model {ref!r} has no revision {revision!r}") from None
    except (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled) as exc:
        why = "the Hub is offline (HF_HUB_OFFLINE=1)" if offline else f"the Hub could not be reached ({exc})"
        at = f"@{revision}" if revision else ""
        raise ModelNotFoundError(
            f"model {ref + at!r} is not a local directory and is not in the local Hub cache "
            f"({constants.HF_HUB_CACHE}), and {why}. Download it once with network access "
            f"(hf download {ref}) or pass the path of a saved checkpoint."
        ) from None
    if use_safetensors and not config_only:  # a cached snapshot may hold what an earlier use_safetensors=False fetched
        _refuse_pickled_only(path)
    return ResolvedModel(ref, path, Path(path).name)


def _refuse_pickled_only(path: str) -> None:
    """A folder whose weights are pickled only (``pytorch_model*.bin``) is refused with the one way to load
    it, before transformers refuses it in its own words (it names neither the folder nor the way)."""
    root = Path(path)
    if not any(root.glob("*.safetensors")) and any(root.glob("pytorch_model*.bin")):
        weight_files(path, use_safetensors=True)  # raises, naming use_safetensors=False


def weight_files(path: str, use_safetensors: bool) -> list[Path]:
    """The weight files of a resolved model, safetensors first; pickled ones only when allowed."""
    root = Path(path)
    safe = sorted(root.glob("*.safetensors"))
    if safe:
        return safe
    pickled = sorted(root.glob("pytorch_model*.bin"))
    if pickled and use_safetensors:
        raise ModelNotFoundError(
            f"{path} has only pickled PyTorch weights ({pickled[0].name}) and no safetensors file; vlfair loads "
            "those only when asked: use_safetensors=False (Python: vlfair.load_encoder(..., use_safetensors=False)), "
            "which reads them with torch.load(weights_only=True)"
        )
    if not pickled:
        raise ModelNotFoundError(f"{path} holds no model weights (*.safetensors or pytorch_model*.bin)")
    return pickled
