"""``vlfair.load_dataset``: one entry point for Hub ids, prepared directories and synthetic twins."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import datasets
import numpy as np

from vlfair.data.conform import DataError, conform
from vlfair.data.forms import form_of, not_read, parse_columns, read_form, split_form
from vlfair.data.registry import dataset_spec
from vlfair.data.taxonomy import DEFAULT
from vlfair.logging import get_logger
from vlfair.yamlfile import read_front_matter

CARD = "README.md"  # a prepared directory's card: its YAML names the configs, files and vlfair schema
SAMPLING_MARK = "vlfair.balanced_sample: "
log = get_logger(__name__)


# ---- sources ------------------------------------------------------------------------------
def split_parts(split: str | None) -> list[str]:
    """The splits ``split`` joins with '+' ("train+validation" reads both, as datasets does).

    Raises:
        DataError: an empty part, or a split named twice ("test+test" would count every row twice).
    """
    if split is None:
        return []
    parts = [part.strip() for part in split.split("+")]
    if not all(parts):
        raise DataError(f"split {split!r} has an empty part: name splits joined by '+', e.g. train+validation")
    names = [part.split("[")[0].strip() for part in parts]  # "train[:10%]" is a part of the split train
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise DataError(f"split {split!r} names {', '.join(map(repr, twice))} more than once: its rows would be "
                        "counted twice; name each split once")
    return parts


def _pick_split(splits: dict[str, Any], split: str | None, where: str) -> Any:
    if split is None:
        if len(splits) == 1:
            return next(iter(splits.values()))
        raise DataError(f"{where} has splits {sorted(splits)}; pass split=")
    if split not in splits:
        raise DataError(f"{where} has no split {split!r}; splits are {sorted(splits)}")
    return splits[split]


def prepared_schema(directory: str | os.PathLike) -> str | None:
    """The schema of a directory ``vlfair prepare`` wrote (its card's ``vlfair.schema``), else None."""
    card = Path(directory) / CARD
    if not card.is_file():
        return None
    return (read_front_matter(card).get("vlfair") or {}).get("schema")


def read_prepared(directory: Path, config: str | None, split: str | None) -> datasets.Dataset:
    """A directory written by ``vlfair prepare``, read as the Hub would: through its card's configs."""
    card = read_front_matter(directory / CARD)  # prepared_schema() found its vlfair schema
    if not isinstance(card.get("configs"), list) or not card["configs"]:
        raise DataError(f"{directory / CARD} lists no configs (a card `vlfair prepare` wrote lists each config's "
                        "files)")
    configs = {c["config_name"]: [f["split"] for f in c["data_files"]] for c in card["configs"]}
    name = config if config in configs else "default" if "default" in configs else next(iter(configs))
    where = f"{directory} (config {name!r})"
    for part in split_parts(split):
        _pick_split(dict.fromkeys(configs[name]), part, where)
    return read_hub(str(directory), name, split)


def read_hub(source: str, config: str | None, split: str | None) -> datasets.Dataset:
    """A Hub dataset id (or a directory laid out like a Hub repository: read only from inside itself)."""
    if Path(source).is_dir():
        check_inside(Path(source), config)
    loaded = datasets.load_dataset(source, config, split=split)
    if isinstance(loaded, datasets.DatasetDict):
        loaded = _pick_split(dict(loaded), None, source)
    return loaded


def _outward(pattern: str) -> bool:
    """A card's file pattern that points outside its folder: absolute, a URL, or through '..'."""
    parts = pattern.replace("\\", "/").split("/")
    return pattern.startswith(("/", "\\", "~")) or "://" in pattern or ":" in parts[0] or ".." in parts


def _strings(value: Any) -> list[str]:
    """Every string in a card's ``data_files`` / ``data_dir`` value, however nested."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def check_inside(directory: Path, config: str | None) -> None:
    """A local dataset folder is read only from inside itself: no file its card names (a path
    that is absolute, a URL or goes through '..') and no file datasets would read for ``config``
    (a glob's matches, a link to a file or a folder) may lie outside it.

    Raises:
        DataError: naming the card's entry or the file, and where it leads.
    """
    root, card = directory.resolve(), directory / CARD
    entries = read_front_matter(card).get("configs") if card.is_file() else None
    for entry in entries if isinstance(entries, list) else []:
        named = _strings(entry.get("data_files")) + _strings(entry.get("data_dir")) if isinstance(entry, dict) else []
        for pattern in named:
            if _outward(pattern):
                raise DataError(f"{card}: config {entry.get('config_name')!r} names {pattern!r}, outside {directory}; "
                                "a dataset folder's card may name only files inside it")
    builder = datasets.load_dataset_builder(str(directory), config)
    files = [file for listed in (builder.config.data_files or {}).values() for file in listed]
    # A snapshot of the Hub's cache (.../datasets--ORG--NAME/snapshots/<commit>) is links into its
    # repository's blobs/: inside the same download, so read as inside the folder.
    blobs = root.parent.parent / "blobs" if root.parent.name == "snapshots" else None
    for file in [str(card), *files] if card.exists() else files:
        resolved = Path(file).resolve()
        if not resolved.is_relative_to(root) and not (blobs is not None and resolved.parent == blobs):
            raise DataError(f"{directory}: {file} leads outside the folder (to {Path(file).resolve()}): a dataset "
                            "folder is read only from inside itself")


def load_dataset(name: str, source: str | os.PathLike | None = None, subset: str | None = None,
                 split: str | None = None, **options: Any) -> datasets.Dataset:
    """Load a study dataset and check it against its schema.

    Args:
        name: a registered dataset ("professions", "fairface", "multi30k", "pfi", a plugin's:
            :mod:`vlfair.data.registry`), "imagefolder", or "synthetic:<name>".
        source: a Hub id, a directory written by ``vlfair prepare`` (or laid out like a Hub repo), one
            of :mod:`vlfair.data.forms`' forms (a folder with a metadata file, the file itself, a table
            with an image column, label folders, UTKFace's named files, a saved dataset; ``FORM:PATH`` names
            the form), or, for "imagefolder", an image directory with a metadata file. Omitted for synthetic.
        subset: a named subset: FairFace "adults" / "age_groups", Multi30K "translation" /
            "independent", P-FI a category. On a prepared directory or Hub repo with a config of
            that name, the config is read; the subset's filter is applied in any case.
        split: the split to read (required when the source has several).
        options: "config" (a Hub config, e.g. FairFace's "0.25"); "taxonomy" (a
            :class:`vlfair.data.taxonomy.Taxonomy`: one's own groups, a label map, age bins); for a local
            source, "columns" (the data's names for the schema's columns: ``{"race": "ethnicity"}`` or
            ``"race=ethnicity"``) and "skip_bad"; for synthetic twins "size" and "seed"; for imagefolder
            "columns" (the label columns to keep) and "metadata".

    Returns:
        The rows: a study's checked against (and conformed to) its schema, with the subset applied;
        an imagefolder's as its metadata gives them.

    Raises:
        DataError: a source that is not there, a split that is not (or is named twice), a dataset
            folder whose card names files outside it, or rows the schema refuses.
        ValueError: an unknown name or subset, or a missing source.
        TypeError: options the dataset does not take.
    """
    split_parts(split)  # before any reading: a split named twice would count its rows twice
    if name.startswith("synthetic:"):
        from vlfair.data.synthetic import make_synthetic

        base = name.split(":", 1)[1]
        schema = _schema(base)
        taxonomy = options.pop("taxonomy", None) or DEFAULT
        dataset = make_synthetic(base, subset=subset, **options)
        return _apply_subset(base, conform(dataset, schema, name, taxonomy=taxonomy), subset)
    if name == "imagefolder":
        from vlfair.data.imagefolder import load_imagefolder

        if source is None:
            raise ValueError("imagefolder needs source=DIRECTORY")
        return load_imagefolder(source, **options)
    schema = _schema(name)
    if source is None:
        raise ValueError(f"{name} needs a source (Hub id or prepared directory); or use name='synthetic:{name}'")
    config = options.pop("config", None)
    columns = parse_columns(options.pop("columns", None))
    taxonomy = options.pop("taxonomy", None) or DEFAULT
    skip_bad = options.pop("skip_bad", False)
    if options:
        raise TypeError(f"unexpected options for {name}: {sorted(options)}")
    named, path = split_form(str(source))
    directory = Path(path).expanduser()
    check_source(path, directory)
    form = None if directory.is_dir() and prepared_schema(directory) else form_of(directory, named)
    if form is not None:
        if split is not None:
            raise DataError(f"--split {split}: {directory} is one set of images ({form.name}), with no splits")
        dataset, found = read_form(directory, form, columns, skip_bad)
        if found is not None:
            log.info(f"read {found.found()}")
        dataset = conform(dataset, schema, str(directory), taxonomy=taxonomy,
                          located=found.places.__getitem__ if found is not None else None)
        return _apply_subset(name, dataset, subset or dataset_spec(name).default_subset)
    if columns:
        raise DataError(f"--columns: {source} is a prepared or Hub dataset, read with its own column names")
    if directory.is_file():
        raise not_read(directory)
    if directory.is_dir() and prepared_schema(directory):
        dataset = read_prepared(directory, config or subset, split)
    elif directory.is_dir() and not _hub_layout(directory):
        raise not_read(directory)
    elif config is not None or subset is None:
        dataset = read_hub(str(source), config, split)
    else:  # a vlfair-prepared dataset on the Hub has one config per subset; others have none
        try:
            dataset = read_hub(str(source), subset, split)
        except ValueError as exc:
            if "config" not in str(exc).lower():
                raise
            dataset = read_hub(str(source), None, split)
    dataset = conform(dataset, schema, str(source), taxonomy=taxonomy)
    return _apply_subset(name, dataset, subset or dataset_spec(name).default_subset)


def _hub_layout(directory: Path) -> bool:
    """A folder datasets reads as a Hub repository would: a card, or data files (Parquet, Arrow, CSV, JSON)."""
    data = ("*.parquet", "*.arrow", "*.csv", "*.json", "*.jsonl")
    return (directory / CARD).is_file() or any(next(directory.rglob(p), None) is not None for p in data)


def check_source(source: str, directory: Path | None = None) -> None:
    """A source that looks like a path (./, ../, /, ~, or under an existing folder) and is not a
    directory is an error now, not five Hub retries later; so is any non-directory offline."""
    directory = Path(source).expanduser() if directory is None else directory
    if directory.exists():
        return
    looks_local = source.startswith(("./", "../", "/", "~", ".\\")) or (
        len(directory.parts) > 1 and directory.parent.is_dir() and str(directory.parent) not in ("", "."))
    if looks_local:
        raise DataError(f"dataset directory {source} does not exist")
    # the variable itself, not huggingface_hub's constant: that one is read once, at import
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise DataError(f"{source} is not a local directory, and the Hub is offline (HF_HUB_OFFLINE) so it cannot "
                        "be read as a Hub dataset id")


def _schema(name: str):
    return dataset_spec(name).schema


def _apply_subset(name: str, dataset: datasets.Dataset, subset: str | None) -> datasets.Dataset:
    if subset is None or subset == "default":
        return dataset
    subsets = dataset_spec(name).subsets
    if subset not in subsets:
        raise ValueError(f"{name} has no subset {subset!r}; subsets: {sorted(subsets) or 'none'}")
    return subsets[subset](dataset)


# ---- balanced sampling ------------------------------------------------------------------
def balanced_sample(dataset: datasets.Dataset, n_per_cell: int, by: tuple[str, ...] = ("race", "gender"),
                    seed: int = 0, allow_fewer: bool = False) -> datasets.Dataset:
    """Exactly ``n_per_cell`` rows from every combination of the ``by`` columns, seeded.

    A cell with fewer rows is an error listing every short cell, unless ``allow_fewer=True``:
    then all its rows are taken and the shortfall is recorded in ``dataset.info.description``
    (read it back with :func:`sampling_record`, for results.json).

    Args:
        dataset: the rows to sample from.
        n_per_cell: rows per combination of the ``by`` values, at least 1.
        by: the columns whose combinations are the cells (e.g. race x gender).
        seed: seeds the draw; the same seed draws the same rows.
        allow_fewer: take every row of a short cell instead of failing.

    Returns:
        The sample, cell by cell in sorted order (rows within a cell in dataset order), its
        sampling recorded in ``info.description``.

    Raises:
        ValueError: ``n_per_cell`` < 1, or a ``by`` column the dataset lacks.
        DataError: short cells, without ``allow_fewer``.
    """
    if n_per_cell < 1:
        raise ValueError(f"n_per_cell must be positive, got {n_per_cell}")
    missing = [c for c in by if c not in dataset.column_names]
    if missing:
        raise ValueError(f"cannot balance by {missing}: columns are {dataset.column_names}")
    keys = list(zip(*(dataset[c][:] for c in by)))
    cells: dict[tuple, list[int]] = {}
    for row, key in enumerate(keys):
        cells.setdefault(key, []).append(row)
    short = {key: len(rows) for key, rows in sorted(cells.items()) if len(rows) < n_per_cell}
    if short and not allow_fewer:
        listed = "; ".join(f"{'/'.join(map(str, k))}: {n}" for k, n in short.items())
        raise DataError(f"{len(short)} cells have fewer than {n_per_cell} rows ({listed}); "
                        "pass allow_fewer=True to take all their rows")
    rng = np.random.default_rng(seed)
    chosen = []
    for key in sorted(cells):
        rows = np.array(cells[key])
        take = min(n_per_cell, rows.size)
        chosen.extend(sorted(rng.choice(rows, size=take, replace=False).tolist()))
    sample = dataset.select(chosen)
    record = {"n_per_cell": n_per_cell, "by": list(by), "seed": seed,
              "short_cells": [{"cell": list(k), "rows": n} for k, n in short.items()]}
    sample.info.description = (sample.info.description or "") + "\n" + SAMPLING_MARK + json.dumps(record)
    return sample


def sampling_record(dataset: datasets.Dataset) -> dict[str, Any] | None:
    """What :func:`balanced_sample` recorded (None when the dataset was not sampled by it)."""
    for line in reversed((dataset.info.description or "").splitlines()):
        if line.startswith(SAMPLING_MARK):
            return json.loads(line[len(SAMPLING_MARK):])
    return None
