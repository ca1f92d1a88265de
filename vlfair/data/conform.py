"""Bring a ``datasets.Dataset`` from any source to a schema: names for labels, checked values."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vlfair.data.schemas import Schema, label_problem, normalize_label
from vlfair.data.taxonomy import DEFAULT, Taxonomy

if TYPE_CHECKING:
    import datasets


class DataError(ValueError):
    """Data that does not fit its schema; the message names the column, row and value."""


def conform(dataset: datasets.Dataset, schema: Schema, where: str = "", partial: bool = False,
            taxonomy: Taxonomy = DEFAULT, located: Callable[[int], str] | None = None) -> datasets.Dataset:
    """Check columns, map ClassLabel ids to names, fold labels into the groups, unify spellings, validate every
    label. ``partial``: the columns a caller needs were checked already; validate those present. ``taxonomy``:
    the groups, label map and age bins in place of the schema's lists. ``located``: a row's place in the user's
    file ("metadata.csv line 7"), which an error names instead of the row's index."""
    import datasets  # here: vlfair.data's own import stays light (the CLI lists the datasets for --help)

    schema = taxonomy.schema(schema)
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
        if problem := taxonomy.map_problem(column):
            raise DataError(f"{schema.name} data{where}: {problem}")
        if column.vocabulary is not None:
            values = dataset.unique(column.name)
            named = {v: normalize_label(taxonomy.fold(v, column), column) for v in values}
            if any(group != v for v, group in named.items()):
                folded = [named[v] for v in dataset[column.name][:]]
                feature = dataset.features[column.name]
                if any(isinstance(v, str) for v in folded) and getattr(feature, "dtype", "string") != "string":
                    feature = datasets.Value("string")  # numeric ages, now their bins
                dataset = _replace_column(dataset, column.name, folded, feature)
        _check_values(dataset, schema, column, where, located)
    return dataset


def _replace_column(dataset: datasets.Dataset, name: str, values: list, feature: Any) -> datasets.Dataset:
    """``name`` with new values, in its place. A ``map`` would rewrite every column, image bytes
    included, into a cache file on each load; this swaps one column of the Arrow table."""
    order = dataset.column_names
    return dataset.remove_columns(name).add_column(name, values, feature=feature).select_columns(order)


def _check_values(dataset: datasets.Dataset, schema: Schema, column, where: str,
                  located: Callable[[int], str] | None) -> None:
    values = dataset[column.name][:]  # one take: a Column read row by row costs ~25 us a row

    def place(row: int) -> str:  # the user's file and line where it is known, else the dataset's row index
        if located is not None:
            return f"{located(row)}, column '{column.name}'"
        return f"{schema.name} column '{column.name}' row {row}{where}"

    for row, value in enumerate(values):
        problem = label_problem(value, column)
        if problem:
            raise DataError(f"{place(row)} {problem}{_fold_hint(column, value)}")
        if value is None:
            continue
        if column.kind == "bool" and not isinstance(value, bool):
            raise DataError(f"{place(row)} has {value!r}, not a bool")
        if column.kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            raise DataError(f"{place(row)} has {value!r}, not an integer")


def _fold_hint(column, value: Any) -> str:
    """How a label outside the groups is run: a map folding it, or groups of one's own."""
    if column.vocabulary is None or value is None or (isinstance(value, str) and not value.strip()):
        return ""
    if column.name == "age":
        return ("; a numeric age falls in the age bins (--set 'age_bins=[0-19,20-39,40-59,60+]'), a bin's label must "
                "be one of them")
    return (f"; fold it into a group with a label map (--set labels.{column.name}=@map.yaml, a line "
            f"'{value}: GROUP' each) or name your own groups (--set 'groups.{column.name}=[...]')")
