"""``imagefolder``: any image directory with a metadata file whose columns the caller names."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Sequence
from pathlib import Path

import datasets

from vlfair.data.conform import DataError
from vlfair.data.files import SourceFiles

FILE_COLUMNS = ("file_name", "file", "image")


def load_imagefolder(source: str | os.PathLike, columns: Sequence[str] = (), metadata: str | None = None,
                     skip_bad: bool = False) -> datasets.Dataset:
    """Rows of ``metadata.csv`` / ``metadata.jsonl`` (a ``file_name`` column plus ``columns``)."""
    source = Path(source)
    candidates = [metadata] if metadata else ["metadata.csv", "metadata.jsonl"]
    path = next((source / c for c in candidates if (source / c).exists()), None)
    if path is None:
        raise DataError(f"{source} has no metadata file ({' or '.join(candidates)})")
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    else:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.DictReader(handle))
    if not rows:
        raise DataError(f"{path} has no rows")
    file_column = next((c for c in FILE_COLUMNS if c in rows[0]), None)
    missing = [c for c in columns if c not in rows[0]]
    if file_column is None or missing:
        raise DataError(f"{path.name} needs a file column ({'/'.join(FILE_COLUMNS)}) and {list(columns)}; "
                        f"it has {list(rows[0])}")
    files = SourceFiles(source)
    records, problems = [], []
    for row, values in enumerate(rows):
        problem = files.check(str(values[file_column]))
        if problem:
            problems.append(f"{path.name} row {row}: {problem}")
            continue
        records.append({"image": {"bytes": files.read(str(values[file_column])), "path": str(values[file_column])},
                        **{c: values[c] for c in columns}})
    if problems and not skip_bad:
        raise DataError(f"{len(problems)} bad rows:\n  " + "\n  ".join(problems[:20]))
    features = datasets.Features({"image": datasets.Image(), **{c: datasets.Value("string") for c in columns}})
    return datasets.Dataset.from_dict({k: [r[k] if k == "image" else str(r[k]) for r in records] for k in features},
                                      features=features)
