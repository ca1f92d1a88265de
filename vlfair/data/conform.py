"""Bring a ``datasets.Dataset`` from any source to a schema: names for labels, checked values."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vlfair.data.schemas import Schema, label_problem, normalize_label

if TYPE_CHECKING:
    import datasets


class DataError(ValueError):
    """Data that does not fit its schema; the message names the column, row and value."""


def conform(dataset: datasets.Dataset, schema: Schema, where: str = "", partial: bool = False) -> datasets.Dataset:
    """Check columns, map ClassLabel ids to names, unify spellings, validate every label.
    ``partial``: the columns a caller needs were checked already; validate those present."""
    import datasets  # here: vlfair.data's own import stays light (the CLI lists the datasets for --help)

    where = f" in {where}" if where else ""
    missing = [] if partial else [c for c in schema.required if c not in dataset.column_names]
    if missing:
        raise DataError(f"{schema.name} data{where} lacks columns {missing}; it has {dataset.column_names}")
    for column in schema.columns:
        if not column.required and column.nullable and column.name not in dataset.column_names:
            dataset = dataset.add_column(column.name, [None] * dataset.num_rows,
                                         feature=datasets.Value("string"))
    image = dataset.features.get("image")
    if not partial and not isinstance(image, datasets.Image):  # partial: any image column embed_images reads
        raise DataError(f"column 'image'{where} must be an Image feature, got {image!r}")
    for column in schema.columns:
        if column.name not in dataset.column_names or column.kind == "image":
            continue
        feature = dataset.features[column.name]
        if isinstance(feature, datasets.ClassLabel):  # Hub sources store labels as ids: map by name
            names = feature.names
            ids = dataset[column.name][:]
            dataset = _replace_column(dataset, column.name, [names[i] if i is not None and i >= 0 else None
                                                             for i in ids], datasets.Value("string"))
        if column.vocabulary is not None:
            values = dataset.unique(column.name)
            if any(normalize_label(v, column) != v for v in values):
                dataset = _replace_column(dataset, column.name,
                                          [normalize_label(v, column) for v in dataset[column.name][:]],
                                          dataset.features[column.name])
        _check_values(dataset, schema, column, where)
    return dataset


def _replace_column(dataset: datasets.Dataset, name: str, values: list, feature: Any) -> datasets.Dataset:
    """``name`` with new values, in its place. A ``map`` would rewrite every column, image bytes
    included, into a cache file on each load; this swaps one column of the Arrow table."""
    order = dataset.column_names
    return dataset.remove_columns(name).add_column(name, values, feature=feature).select_columns(order)


def _check_values(dataset: datasets.Dataset, schema: Schema, column, where: str) -> None:
    values = dataset[column.name][:]  # one take: a Column read row by row costs ~25 us a row
    for row, value in enumerate(values):
        problem = label_problem(value, column)
        if problem:
            raise DataError(f"{schema.name} column '{column.name}' row {row}{where} {problem}")
        if value is None:
            continue
        if column.kind == "bool" and not isinstance(value, bool):
            raise DataError(f"{schema.name} column '{column.name}' row {row}{where} has {value!r}, not a bool")
        if column.kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            raise DataError(f"{schema.name} column '{column.name}' row {row}{where} has {value!r}, not an integer")
