"""The demo Space's choices (encoders, data) and one request: run a probe, gather what to show."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from vlfair.space.limits import Limits, SpaceInputError

Progress = Callable[[float, str], None]
DEFAULT_LIMITS = Limits()  # the built-in limits, not the environment's (the app passes Limits.from_env())


# ---- encoders ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class EncoderChoice:
    spec: str | None = None     # a Hub model spec, or None for a demo-world encoder
    biased: bool | None = None  # demo world: the model trained on biased (True) or balanced captions
    answers: bool = False       # demo world: its answerer (a generative model), not its encoder

    @property
    def needs_hub(self) -> bool:
        return self.spec is not None


WORLD_BIASED = "demo world: biased encoder (offline)"
WORLD_CONTROL = "demo world: control encoder (offline)"
WORLD_BIASED_ANSWERER = "demo world: biased answerer (generative, offline)"
WORLD_CONTROL_ANSWERER = "demo world: control answerer (generative, offline)"
ENCODERS: dict[str, EncoderChoice] = {
    WORLD_BIASED: EncoderChoice(biased=True),
    WORLD_CONTROL: EncoderChoice(biased=False),
    WORLD_BIASED_ANSWERER: EncoderChoice(biased=True, answers=True),
    WORLD_CONTROL_ANSWERER: EncoderChoice(biased=False, answers=True),
    "openai/clip-vit-base-patch32": EncoderChoice("openai/clip-vit-base-patch32"),
    "laion/CLIP-ViT-H-14-laion2B-s32B-b79K": EncoderChoice("laion/CLIP-ViT-H-14-laion2B-s32B-b79K"),
    "google/siglip-base-patch16-256-multilingual": EncoderChoice("google/siglip-base-patch16-256-multilingual"),
    "M-CLIP/XLM-Roberta-Large-Vit-B-32": EncoderChoice("mclip:M-CLIP/XLM-Roberta-Large-Vit-B-32"),
    "HuggingFaceTB/SmolVLM-256M-Instruct (generative)": EncoderChoice("lvlm:HuggingFaceTB/SmolVLM-256M-Instruct"),
}
# Other ids (when the Space allows them) must be Hub ids: never a path on the Space's disk.
HUB_ID = re.compile(r"^(hf:|mclip:|lvlm:)?[A-Za-z0-9][\w.-]*/[\w.-]+(@[\w.-]+)?"
                    r"(\+[A-Za-z0-9][\w.-]*/[\w.-]+(@[\w.-]+)?)?$")


def hub_reachable() -> bool:
    """False when the Hub is switched off (HF_HUB_OFFLINE): then only the demo world is offered."""
    from vlfair.models.hub import hub_offline

    return not hub_offline()


def encoder_choices(hub: bool) -> list[str]:
    return [label for label, choice in ENCODERS.items() if hub or not choice.needs_hub]


class EncoderPool:
    """Loaded encoders, kept between requests (loading a Hub model takes longer than a small run)."""

    def __init__(self, cache_dir: Any, keep: int = 2):
        self.cache_dir, self.keep = cache_dir, keep
        self.loaded: dict[str, Any] = {}

    def get(self, label: str, other_id: str = "", allow_other: bool = False, log: Callable[[str], None] = print):
        spec, choice = self._resolve(label, other_id.strip(), allow_other)
        key = spec or label
        if key not in self.loaded:
            encoder = self._load(spec, choice, log)
            while len(self.loaded) >= self.keep:
                self.loaded.pop(next(iter(self.loaded)))
            self.loaded[key] = encoder
        return self.loaded[key], choice

    @staticmethod
    def _resolve(label: str, other_id: str, allow_other: bool) -> tuple[str | None, EncoderChoice]:
        if other_id:
            if not allow_other:
                raise SpaceInputError("this Space runs only its listed encoders (set VLFAIR_SPACE_ALLOW_ANY_MODEL=1 "
                                      "on a Space of your own to accept other Hub ids)")
            if not HUB_ID.match(other_id) or any(part in (".", "..") for part in re.split(r"[/@+:]", other_id)):
                raise SpaceInputError(f"{other_id!r} is not a Hub model id (owner/name, optionally @revision, or "
                                      "mclip:owner/name, or lvlm:owner/name for a generative model)")
            return other_id, EncoderChoice(other_id)
        if label not in ENCODERS:
            raise SpaceInputError(f"unknown encoder {label!r}; choose one of {list(ENCODERS)}")
        choice = ENCODERS[label]
        return choice.spec, choice

    def _load(self, spec: str | None, choice: EncoderChoice, log: Callable[[str], None]):
        from vlfair.models import load_encoder
        from vlfair.models.hub import ModelNotFoundError

        if spec is None:
            from vlfair.demo.shipped import WORLDS, display_name, world_encoder

            world = "biased" if choice.biased else "control"
            if choice.answers:
                from vlfair.demo.generative import answerer_name, world_answerer

                return world_answerer(WORLDS[world], self.cache_dir, name=answerer_name(world), log=log)
            return world_encoder(WORLDS[world], self.cache_dir, name=display_name(world), log=log)
        from vlfair.models.hub import hub_only

        try:
            with hub_only():  # a visitor's id resolves on the Hub only, never to a folder of the server
                return load_encoder(spec, trust_remote_code=False)  # never from user input: no code from the Hub runs
        except (ModelNotFoundError, ValueError, OSError) as exc:
            raise SpaceInputError(f"cannot load {spec}: {exc}") from None


# ---- data ----------------------------------------------------------------------------------
WORLD_DATA = "demo world sample (offline)"
UPLOAD = "my images + labels"
GENERATED = "generated by the probe (demo world generator)"
# Hub sources sampled for each schema: each registered dataset's own (DatasetSpec.hub);
# VLFAIR_SPACE_DATASETS (JSON {schema: source}) adds or replaces, e.g. a dataset pushed by
# `vlfair prepare professions ... --push-to-hub`.


def hub_datasets() -> dict[str, dict[str, Any]]:
    try:
        configured = json.loads(os.environ.get("VLFAIR_SPACE_DATASETS", "{}"))
    except json.JSONDecodeError as exc:
        raise SpaceInputError(f"VLFAIR_SPACE_DATASETS is not JSON ({exc}); expected e.g. "
                              '{"professions": "owner/dataset"}') from None
    from vlfair.data.registry import DATASETS, dataset_names

    own = {name: dict(hub) for name in dataset_names() if (hub := DATASETS[name].hub)}
    return {**own, **{k: v if isinstance(v, dict) else {"source": v} for k, v in configured.items()}}


def sample_label(schema: str, source: dict[str, Any]) -> str:
    return f"sample of {schema}: {source['source']}"


def data_choices(probe: str, hub: bool) -> list[str]:
    """The demo world (in the probe's first schema), Hub samples of any schema it runs on, uploads."""
    from vlfair.probes import probe_class
    from vlfair.space.uploads import UPLOADS

    schemas = probe_class(probe).schemas
    if not probe_class(probe).needs_dataset:  # word-influence makes its own images
        return [GENERATED]
    samples = [sample_label(schema, source) for schema, source in hub_datasets().items()
               if schema in schemas and (hub or Path(source["source"]).is_dir())]
    world = [WORLD_DATA] if schemas and _world_of(schemas[0]) is not None else []  # a dataset may have none
    return [*world, *samples, *([UPLOAD] if probe in UPLOADS else [])]


def probe_choices(hub: bool) -> list[str]:
    """The probes the Space offers: every registered probe with at least one data choice here (a
    plugin whose schema has no world data, Hub sample or upload spec is left out, not offered empty)."""
    from vlfair.probes import probe_names

    names = probe_names()
    space_tables_checked(names)
    return [probe for probe in names if data_choices(probe, hub)]


def space_tables_checked(names: Sequence[str]) -> None:
    """The Space's own per-probe tables (:data:`SPACE_PARTS`, :data:`PROMPTED`; the upload specs are each
    probe's own, read from the registry) name registered probes only: one renamed or gone is an error when
    the Space starts, not a table read by none."""
    stale = sorted({*SPACE_PARTS, *PROMPTED} - set(names))
    if stale:
        raise ValueError(f"the demo Space's tables name probes the registry does not hold: {stale}")


def _world_of(schema: str) -> Any:
    """The demo world's data maker of ``schema`` (None: the world has no data of it)."""
    from vlfair.demo.datasets import BY_SCHEMA

    return BY_SCHEMA[schema] if schema in BY_SCHEMA else None


def _world_dataset(probe: str):
    from vlfair.demo.datasets import BY_SCHEMA
    from vlfair.probes import probe_class

    return BY_SCHEMA[probe_class(probe).schemas[0]]()


def _sampled(probe: str, label: str, per_group: int, limits: Limits):
    import vlfair
    from vlfair.data.registry import dataset_names, dataset_spec

    for schema, source in hub_datasets().items():
        if label == sample_label(schema, source):
            options = {k: v for k, v in source.items() if k not in ("source", "split")}
            data = vlfair.load_dataset(schema, source=source["source"], split=source.get("split"), **options)
            per_group = max(2, min(int(per_group), limits.max_sample_per_group))
            by = dataset_spec(schema).sample_by if schema in dataset_names() else ()
            return vlfair.balanced_sample(data, per_group, by=by, allow_fewer=True) if by else \
                data.select(range(min(data.num_rows, per_group * 10)))
    raise SpaceInputError(f"unknown data choice {label!r} for {probe}; choose one of {data_choices(probe, True)}")


def build_dataset(probe: str, label: str, *, per_group: int = 10, uploads: Sequence[str] | None = None,
                  labels: pd.DataFrame | None = None, limits: Limits = DEFAULT_LIMITS):
    """The dataset a request runs on (None for word-influence, which generates its images)."""
    from vlfair.probes import probe_class
    from vlfair.space.uploads import uploads_to_dataset

    if not probe_class(probe).needs_dataset:  # word-influence generates its images
        return None
    if label == WORLD_DATA:
        return _world_dataset(probe)
    if label == UPLOAD:
        return uploads_to_dataset(uploads or [], labels, probe, limits)
    return _sampled(probe, label, per_group, limits)


# ---- one request ---------------------------------------------------------------------------
@dataclasses.dataclass
class RunOutput:
    results: dict[str, Any]
    metrics: pd.DataFrame       # one row per metric: name, subset, value, CI, p, the run's verdict
    tables: dict[str, str]  # name -> Markdown
    plots: list[Path]
    results_path: Path
    report_path: Path


def metrics_frame(results: dict[str, Any]) -> pd.DataFrame:
    """One row per metric, in the leaderboard's columns, with the run's verdict."""
    from vlfair.report.leaderboard import tidy

    return tidy([results])[["metric", "subset", "value", "ci_low", "ci_high", "p_value", "log10_p_value", "detected",
                            "correction"]]


def readable_metrics(frame: pd.DataFrame) -> pd.DataFrame:
    """The metrics as a person reads them (``report.leaderboard.readable``)."""
    from vlfair.report.leaderboard import readable

    return readable(frame)


def run_summary(results: dict[str, Any], encoder: str) -> str:
    """What a run measured, in Markdown. Every text in it (the encoder's name, the dataset's, the
    warnings, which can quote labels of uploads or of a Hub dataset) is shown as text."""
    from vlfair.report.markup import markdown_text

    skipped = results["skipped_rows"]
    return (f"**{markdown_text(results['probe'])}** on **{markdown_text(encoder)}** "
            f"({markdown_text(results['model']['dtype'])}), {results['dataset']['num_rows']} rows of "
            f"{markdown_text(results['dataset']['name'])}: {len(results['metrics'])} metrics"
            + (f"; skipped unreadable rows {markdown_text(skipped)}" if skipped else "")
            + "".join(f"\n- {markdown_text(warning)}" for warning in results.get("warnings", [])))


def _word_influence_parts(encoder, choice: EncoderChoice, prompt: str, dataset: Any) -> tuple[dict | None, dict | None]:
    """The demo's planted generator and gender classifier; Stable Diffusion is too slow for a CPU Space."""
    if choice.biased is None:
        raise SpaceInputError("word-influence runs here only on a demo world encoder (its images come from the "
                              "world's planted generator); for Stable Diffusion use `vlfair run word-influence "
                              "--generator MODEL` on a GPU")
    from vlfair.demo.run import word_influence_setup

    words = prompt.split()
    if not 2 <= len(words) <= 12:
        raise SpaceInputError(f"the prompt has {len(words)} words; give 2 to 12")
    return word_influence_setup(encoder, choice.biased, " ".join(words), images_per_prompt=40)


def _professions_parts(encoder, choice: EncoderChoice, prompt: str, dataset: Any) -> tuple[dict | None, dict | None]:
    """A world answerer is asked as the demo asks it (the world's captions are its answers)."""
    if choice.answers:
        from vlfair.demo.generative import PROFESSIONS_SETTINGS

        return dict(PROFESSIONS_SETTINGS), None
    return None, None


def _traits_parts(encoder, choice: EncoderChoice, prompt: str, dataset: Any) -> tuple[dict | None, dict | None]:
    """The Space draws its own sample (per_group) or measures the uploads as they are."""
    return {"per_cell": None}, None


def _retrieval_parts(encoder, choice: EncoderChoice, prompt: str, dataset: Any) -> tuple[dict | None, dict | None]:
    """A Space's sample holds hundreds of images, not FairFace's 10,954: k is a fifth of them (the
    probe refuses a k at or above the images measured); a world encoder gets the world's words."""
    from vlfair.demo.run import RETRIEVAL_SETTINGS
    from vlfair.probes import probe_class

    settings = dict(RETRIEVAL_SETTINGS) if choice.biased is not None else {}
    # balancing keeps twice the rarer gender's images: k stays below that
    genders = dataset["gender"][:] if "gender" in dataset.column_names else []
    images = 2 * min(genders.count(g) for g in set(genders)) if len(set(genders)) > 1 else dataset.num_rows
    settings["k"] = max(1, min(probe_class("retrieval").default_settings()["k"], images // 5))
    return settings, None


# probe -> (settings, components) the Space runs it with; a probe without an entry runs as configured (the
# Space's own, for the probes it knows: space_tables_checked holds them to the probe registry)
SPACE_PARTS: dict[str, Callable[[Any, EncoderChoice, str, Any], tuple[dict | None, dict | None]]] = {
    "word-influence": _word_influence_parts, "traits": _traits_parts, "retrieval": _retrieval_parts,
    "professions": _professions_parts}
PROMPTED = ("word-influence",)  # probes whose request carries a prompt (the Space shows its text box)


def run_request(pool: EncoderPool, probe: str, encoder_label: str, data_label: str, *, other_id: str = "",
                allow_other: bool = False, per_group: int = 10, uploads: Sequence[str] | None = None,
                labels: pd.DataFrame | None = None, prompt: str = "a nurse at the hospital",
                limits: Limits = DEFAULT_LIMITS, out_dir: str | Path | None = None,
                progress: Progress = lambda fraction, text: None) -> RunOutput:
    """Check the request, load the encoder and data, run the probe, read back its outputs (in ``out_dir``, else a
    ``vlfair-space-*`` folder of its own, removed if the request stops: refused, past its time limit, crashed)."""
    from vlfair.probes import run_probe

    made = out_dir is None  # a folder of its own: removed if the request stops, which leaves nothing to show
    out = Path(out_dir or tempfile.mkdtemp(prefix=REQUEST_PREFIX))
    try:
        progress(0.02, "checking the data")
        dataset = build_dataset(probe, data_label, per_group=per_group, uploads=uploads, labels=labels, limits=limits)
        progress(0.1, "loading the encoder")
        encoder, choice = pool.get(encoder_label, other_id, allow_other, log=lambda line: progress(0.15, line.strip()))
        parts = SPACE_PARTS.get(probe)
        settings, components = parts(encoder, choice, prompt, dataset) if parts else (None, None)
        progress(0.3, f"running the {probe} probe")
        results = run_probe(probe, encoder, dataset, out, cache_dir=pool.cache_dir, settings=settings,
                            components=components)
    except BaseException as exc:  # a refusal, a stop at the time limit, a crash
        if made:
            shutil.rmtree(out, ignore_errors=True)
        if isinstance(exc, ValueError) and not isinstance(exc, SpaceInputError):
            # ProbeError, DataError and the measures' own checks: all about this input
            raise SpaceInputError(f"{probe}: {exc}") from None
        raise
    progress(0.95, "reading the report")
    # the probe's own Markdown (the studies' tables keep their bold column maxima)
    tables = {p.stem: p.read_text() for p in sorted(out.glob("*.md"))}
    return RunOutput(results, metrics_frame(results), tables, sorted(out.glob("*.png")), out / "results.json",
                     out / "report.html")


# ---- what requests leave on disk -------------------------------------------------------------
REQUEST_PREFIX = "vlfair-space-"  # each request's folder: the probe's outputs, which the page shows


class RequestStore:
    """What the demo Space keeps on disk for its visitors, within :attr:`Limits.max_kept_bytes`.

    Each request runs in a folder of its own under ``cache/vlfair-space`` (``cache``: Gradio's, which serves a
    file inside it as it is, so the gallery and the downloads read the request's own files, not copies): a request
    that stops takes its folder with it, and an answered one's stays while the visitor's page shows it, until
    their next answer replaces it or their session ends (:meth:`forget`). Its uploads go once it is answered
    (:meth:`forget_uploads`). Before each request, and every minute (:meth:`keep_trimmed`), the whole of ``cache``
    (uploads never run too) is cut to the cap, the oldest first (:meth:`trim`): an upload folder of Gradio's or a
    request's folder at a time, never part of one.
    """

    def __init__(self, cache: str | Path, max_bytes: int):
        self.cache = Path(cache).resolve()
        self.root = self.cache / "vlfair-space"
        self.max_bytes = max_bytes

    def new_folder(self, spare: Sequence[str | Path] = ()) -> Path:
        """An empty folder for one request, made once the store is within its cap (``spare``: the request's
        own uploads, never removed for it)."""
        self.trim(spare)
        self.root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=REQUEST_PREFIX, dir=self.root))

    def forget(self, folder: str | Path | None) -> None:
        """Remove a request's folder (one of this store's, nothing else)."""
        if folder and self._holds(Path(folder)) and Path(folder).resolve().parent == self.root:
            shutil.rmtree(folder, ignore_errors=True)

    def forget_uploads(self, paths: Sequence[str | Path | None]) -> None:
        """Remove a request's uploaded files, and each folder Gradio made for one that is then empty. Only
        files in Gradio's cache outside the requests' folders (a path sent as an upload may name another
        visitor's plot)."""
        for path in (Path(p).resolve() for p in paths if p):
            if not self._holds(path) or path.is_relative_to(self.root) or not path.is_file():
                continue
            path.unlink(missing_ok=True)
            if path.parent != self.cache:
                with contextlib.suppress(OSError):  # not empty (another file of that upload), or gone meanwhile
                    path.parent.rmdir()

    def trim(self, spare: Sequence[str | Path] = ()) -> list[Path]:
        """Remove the oldest entries (by their newest file) until the cache holds at most ``max_bytes``;
        returns those removed. An entry holding a ``spare`` path stays."""
        kept = [Path(p).resolve() for p in spare]
        entries = sorted(self._entries(), key=lambda entry: entry[0])
        total = sum(size for _, size, _ in entries)
        removed = []
        for _, size, entry in entries:
            if total <= self.max_bytes:
                break
            if any(path == entry or path.is_relative_to(entry) for path in kept):
                continue
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            total -= size
            removed.append(entry)
        return removed

    def keep_trimmed(self, every_s: float) -> threading.Event:
        """:meth:`trim` every ``every_s`` seconds, in a daemon thread: files are uploaded to Gradio without any
        request (its upload route), so waiting for the next request would let them fill the disk meanwhile. Set
        the event returned to stop."""
        stop = threading.Event()

        def trimming() -> None:
            while not stop.wait(every_s):
                self.trim()

        threading.Thread(target=trimming, daemon=True, name="vlfair-space-trim").start()
        return stop

    def _holds(self, path: Path) -> bool:
        return path.resolve().is_relative_to(self.cache) and path.resolve() != self.cache

    def _entries(self) -> list[tuple[float, int, Path]]:
        """(newest modification, bytes, path) of each entry: every child of the cache, those of the requests'
        folder in its place."""
        if not self.cache.is_dir():
            return []
        children = [p for p in self.cache.iterdir() if p != self.root]
        children += list(self.root.iterdir()) if self.root.is_dir() else []
        entries = []
        for child in children:
            found = _files_of(child)
            if found is not None:  # gone meanwhile (Gradio's own deletion, another request's)
                times, sizes = found
                entries.append((max(times), sum(sizes), child))
        return entries


def _files_of(entry: Path) -> tuple[list[float], list[int]] | None:
    """The modification times (its own first) and sizes of ``entry`` and the files under it; None if it went."""
    try:
        files = [entry] if not entry.is_dir() else [entry, *(p for p in entry.rglob("*") if p.is_file())]
        stats = [p.lstat() for p in files]
    except FileNotFoundError:
        return None
    return [s.st_mtime for s in stats], [s.st_size if p.is_file() else 0 for p, s in zip(files, stats)]
