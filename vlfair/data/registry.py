"""Datasets as plugins: everything vlfair knows of a dataset in one registered :class:`DatasetSpec`.

A spec names the dataset's schema (its columns and label vocabularies), and what else the dataset
has: its synthetic twin (``synthetic:NAME``), its named subsets, the builder ``vlfair prepare`` runs
on its raw release with the card it writes, and the columns the demo Space balances a sample of it by.
:data:`DATASETS` is a :class:`vlfair.registry.Registry` of them: the studies' four are its lazy
entries (named in :mod:`vlfair.data`, the package, and defined in :mod:`vlfair.data.studies`); another
package registers its own with :func:`register_dataset`, or through the entry-point group
``vlfair.datasets`` (an entry point names a :class:`DatasetSpec`). A new dataset is one module: its
spec, and the functions the spec names. (The demo world's data of a schema is the demo's own:
``vlfair.demo.datasets.BY_SCHEMA``.)

Functions may be named as ``"module:attribute"`` (read when first used): a spec is light to
register, and the builders' libraries load only when they run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from vlfair.data.schemas import Schema
from vlfair.registry import Registry, UnknownEntry, resolve

ENTRY_POINTS = "vlfair.datasets"
Function = Callable[..., Any] | str  # a function, or "module:attribute" naming one


@dataclasses.dataclass(frozen=True)
class SourceFile:
    """A file (or a set of files) that a dataset's builder reads from ``vlfair prepare --source``:
    ``name`` as a person would find it ("metadata.csv | metadata.jsonl | metadata.parquet", a
    folder pattern), the ``columns`` it must have, those read where present (``optional``), and a
    ``note`` (what a column holds, what may replace the file). ``vlfair prepare --help`` lists them."""

    name: str
    columns: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    note: str = ""

    def __str__(self) -> str:
        columns = f": {', '.join(self.columns)}" if self.columns else ""
        optional = f" (optional: {', '.join(self.optional)})" if self.optional else ""
        return f"{self.name}{columns}{optional}" + (f"; {self.note}" if self.note else "")


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """One dataset.

    ``twin(size, rng, seed, subset) -> columns``: its synthetic twin's columns (labels from the real
    vocabularies, generated images), ``twin_size`` rows by default. ``subsets``: name -> a filter of
    the dataset (``default_subset`` read when none is named). ``builder(source, skip_bad=..., **options)``:
    what ``vlfair prepare`` runs on the raw release (a :class:`vlfair.data.build.Built`); ``card()``: the
    text of the card template it fills (None: a plain card), ``license`` the card's (name, link) where the
    Hub lists no id for it, ``languages`` the languages of its text. ``sample_by``: the columns whose
    combinations the demo Space draws a balanced sample over; ``hub``: where the Space samples it from
    (``source``, ``config``, ``split``). ``source_files``: what the builder reads from ``--source``
    (:class:`SourceFile`; none given: what the builder function states in its own ``source_files``
    attribute, as :func:`vlfair.data.build.metadata_builder`'s does), listed by ``vlfair prepare --help``.
    """

    schema: Schema
    twin: Function | None = None
    twin_size: int = 40
    subsets: Mapping[str, Callable[[Any], Any]] = dataclasses.field(default_factory=dict)
    default_subset: str | None = None
    builder: Function | None = None
    card: Function | None = None
    license: tuple[str, str] | None = None
    languages: tuple[str, ...] = ()
    sample_by: tuple[str, ...] = ()
    hub: Mapping[str, str] | None = None
    source_files: tuple[SourceFile, ...] = ()

    @property
    def name(self) -> str:
        return self.schema.name

    def function(self, field: str) -> Callable[..., Any]:
        """The spec's function ``field`` (twin, builder, card), imported where it is named by text."""
        found = getattr(self, field)
        if found is None:
            raise ValueError(f"dataset {self.name!r} has no {field}")
        return resolve(found)

    def expected_files(self) -> tuple[SourceFile, ...]:
        """What ``vlfair prepare`` reads from ``--source`` for this dataset: the spec's ``source_files``,
        else its builder's own (its ``source_files`` attribute; the builder is imported for it), else none."""
        if self.source_files or self.builder is None:
            return tuple(self.source_files)
        return tuple(getattr(self.function("builder"), "source_files", ()))


def _check(spec: DatasetSpec) -> None:
    if spec.default_subset is not None and spec.default_subset not in spec.subsets:
        raise ValueError(f"dataset {spec.name!r}: default_subset {spec.default_subset!r} is not one of its subsets "
                         f"{sorted(spec.subsets)}")


# name -> spec; the studies' four are added (lazily) by vlfair/data/__init__.py, which Python runs
# before this module whenever it is imported
DATASETS: Registry[DatasetSpec] = Registry("dataset", DatasetSpec, entry_points=ENTRY_POINTS,
                                           name_of=lambda spec: spec.name, check=_check)


def register_dataset(spec: DatasetSpec) -> DatasetSpec:
    """Register ``spec`` under its schema's name; another spec of that name is an error."""
    return DATASETS.add(spec)


def dataset_names() -> list[str]:
    """Every registered dataset, sorted (none of them imported)."""
    return sorted(DATASETS.names())


def dataset_spec(name: str) -> DatasetSpec:
    """The spec of dataset ``name``; an unknown name is a ValueError naming the known ones."""
    try:
        return DATASETS.get(name)
    except UnknownEntry:
        raise ValueError(f"unknown dataset {name!r}; known: {dataset_names()}, imagefolder, "
                         "synthetic:<name>") from None


def buildable() -> list[str]:
    """The registered datasets ``vlfair prepare`` builds (those with a builder)."""
    return [name for name in dataset_names() if dataset_spec(name).builder is not None]


class _Schemas(Mapping[str, Schema]):
    """Each registered dataset's schema by name (read through the registry, so a plugin's is there too)."""

    def __getitem__(self, name: str) -> Schema:
        return DATASETS[name].schema

    def __iter__(self) -> Iterator[str]:
        return iter(dataset_names())

    def __len__(self) -> int:
        return len(dataset_names())


SCHEMAS: Mapping[str, Schema] = _Schemas()

__all__ = ["DATASETS", "DatasetSpec", "ENTRY_POINTS", "SCHEMAS", "SourceFile", "buildable", "dataset_names",
           "dataset_spec", "register_dataset", "resolve"]
