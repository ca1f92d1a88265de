"""What every probe shares: versioned YAML settings, input checks, cached embeddings, outputs."""

from __future__ import annotations

import abc
import dataclasses
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd
import yaml

from vlfair.outputs import Metric


class ProbeError(ValueError):
    """A probe cannot run on this input; the message names the probe and the problem."""


def load_settings(probe: str, file: str, overrides: dict[str, Any] | None, allowed: set[str]) -> dict[str, Any]:
    """The probe's YAML (beside its module) with ``overrides``; an unknown key is an error."""
    settings = yaml.safe_load(resources.files("vlfair.probes").joinpath(file).read_text())
    for source, values in (("probes/" + file, settings), ("overrides", overrides or {})):
        unknown = sorted(set(values) - allowed - {"version", "notes"})
        if unknown:
            raise ProbeError(f"{probe}: invalid settings key(s) {unknown} in {source}; allowed: {sorted(allowed)}")
    if not isinstance(settings.get("version"), int):
        raise ProbeError(f"{probe}: probes/{file} must have an integer 'version'")
    merged = {**settings, **(overrides or {})}
    from vlfair.measures import check_options

    try:  # before any work: a bootstrap of -1 must not cost a run that then measures nothing
        check_options(**{k: merged[k] for k in ("bootstrap", "confidence", "seed", "n_permutations") if k in merged})
    except ValueError as exc:
        raise ProbeError(f"{probe}: setting {exc}") from None
    return merged


@dataclasses.dataclass
class Context:
    """One probe run's inputs; image embeddings are computed once (cached on disk) and reused."""

    encoder: Any
    dataset: Any
    batch_size: int = 64
    cache_dir: Any = "default"
    _embedded: tuple[np.ndarray, np.ndarray] | None = None
    skipped_rows: list[int] = dataclasses.field(default_factory=list)  # unreadable rows, for results.json

    def images(self) -> tuple[np.ndarray, np.ndarray]:
        """(embeddings of readable rows, their row indices); unreadable rows are skipped and reported."""
        if self._embedded is None:
            from vlfair.embed import embed_images

            result = embed_images(self.encoder, self.dataset, batch_size=self.batch_size, cache_dir=self.cache_dir,
                                  on_bad_image="skip")
            self._embedded = (result.embeddings, result.kept_rows)
            self.skipped_rows = result.skipped_rows
            self._check_dims(result.embeddings.shape[1])
        return self._embedded

    def texts(self, prompts: list[str], normalize: bool = True, templates: list[str] | None = None) -> np.ndarray:
        from vlfair.embed import embed_texts

        embeddings = embed_texts(self.encoder, prompts, templates=templates, cache_dir=self.cache_dir,
                                 normalize=normalize)
        if self._embedded is not None:
            self._check_dims(self._embedded[0].shape[1], embeddings.shape[1])
        return embeddings

    def _check_dims(self, image_dim: int, text_dim: int | None = None) -> None:
        text_dim = text_dim if text_dim is not None else self.encoder.embedding_dim
        if image_dim != text_dim:
            raise ProbeError(f"encoder {self.encoder.spec!r} embeds images into {image_dim} dims but texts into "
                             f"{text_dim}: image and text embeddings cannot be compared")

    def column(self, name: str, rows: np.ndarray) -> np.ndarray:
        values = self.dataset[name]
        return np.asarray([values[int(r)] for r in rows])


@dataclasses.dataclass
class Output:
    metrics: list[Metric] = dataclasses.field(default_factory=list)
    tables: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    dataset: dict[str, Any] | None = None  # set by probes that generate their data
    published_model: str | None = None  # the model the study's published numbers are matched on (default: the encoder)


class Probe(abc.ABC):
    """Subclasses set ``name``, ``settings_file``, ``allowed``, ``schemas`` and implement ``run``."""

    name: str
    settings_file: str
    allowed: set[str] = set()
    schemas: tuple[str, ...] = ()  # dataset schemas it accepts, the first is the default
    required_columns: dict[str, tuple[str, ...]] = {}
    published_file: str | None = None  # the study's published tables (published/<file>), if it has any

    needs_dataset = True  # False for probes that make their own data (word-influence generates images)

    def __init__(self, overrides: dict[str, Any] | None = None, components: dict[str, Any] | None = None):
        self.settings = load_settings(self.name, self.settings_file, overrides, self.allowed)
        self.components = components or {}  # objects that replace configured parts (a generator, a classifier)
        self.version = self.settings["version"]

    def check_columns(self, dataset: Any, schema: str) -> None:
        needed = self.required_columns.get(schema, ())
        missing = [c for c in needed if c not in dataset.column_names]
        if missing:
            raise ProbeError(f"probe {self.name!r} needs columns {missing} ({schema} schema); the dataset has "
                             f"{dataset.column_names}")

    @abc.abstractmethod
    def run(self, ctx: Context, schema: str) -> Output:
        """Compute the probe's metrics, tables and figures from ``ctx``."""


def clip_score(image_embeddings: np.ndarray, text_embeddings: np.ndarray) -> np.ndarray:
    """CLIPScore = max(100 cos, 0) of each image with its own text (rows paired)."""
    return np.maximum(100.0 * (image_embeddings * text_embeddings).sum(axis=1), 0.0)
