"""What vlfair's evaluate modules share (imports datasets, evaluate and the measures, never torch).

- :class:`CheckedInputs`, mixed into every module: each column is read by the measures' own rules
  before evaluate sees it (labels by :func:`vlfair.stats.label_column`, numbers by
  :func:`vlfair.measures.float_column`), so that evaluate's encoding never truncates a float label
  or index to an int, never turns a missing label into a group "nan", and a bad input is an error
  naming its column and row; and a module stays usable after a refused input.
- Labels of any kind: label columns are declared as text (:func:`label_features`) and arrive as
  text, numbers by their value (a ClassLabel id 1, 1.0 and "1" are one group), so ClassLabel ids,
  argmax predictions and names all pass.
- ``evaluate.combine`` hands every keyword to every module: each module ignores the inputs and
  options that another vlfair module takes, and still rejects a name no vlfair module knows
  (a typo is an error, not a silently ignored option).
"""

from __future__ import annotations

import contextlib
import os
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import datasets
import evaluate

from vlfair import measures, stats

# Every input and option of every vlfair module (tests/test_metric_modules.py keeps it complete).
SHARED_NAMES = frozenset({
    "predictions", "references", "groups", "languages", "strata", "variants", "image_embeddings", "text_embeddings_a",
    "text_embeddings_b", "protected_group", "reference_group", "bootstrap", "confidence", "seed", "n_permutations",
    "pivot", "welch", "tolerance", "item_groups", "k", "target", "smoothing", "bias_pair", "num_words",
})
TEXT = datasets.Value("string")


def label_features(fixed: dict[str, Any], labels: Sequence[str]) -> datasets.Features:
    """The module's columns: ``fixed`` columns keep their feature, the ``labels`` columns are text
    (:class:`CheckedInputs` turns every label into its text first). Column order: ``fixed`` then ``labels``."""
    return datasets.Features({**fixed, **{name: TEXT for name in labels}})


def ignore_shared(module: str, options: dict[str, Any]) -> None:
    """Drop (accept) options meant for other vlfair modules; raise on names none of them takes."""
    unknown = sorted(set(options) - SHARED_NAMES)
    if unknown:
        raise TypeError(f"{module}: unknown option(s) {unknown}; the options of vlfair's modules are "
                        f"{sorted(SHARED_NAMES)}")


class CheckedInputs(evaluate.EvaluationModule):
    """Mixed into each vlfair module before evaluate's class (``class BiasRatio(CheckedInputs, evaluate.Metric)``).

    evaluate 0.4.6 picks a column's type from its first row and casts the rest to it, so a float
    label or index became an int (0.2 and 0.8 one group "0"), a missing label the text "nan", an
    empty input an IndexError, a pandas Series with another index a ``KeyError: 0``; and a first
    batch it could not store left the module unable to store any other. Here every batch is
    checked and converted by the measures' rules first (rows counted over the batches added so
    far), a label column keeps one kind (numbers or text) over all batches, and a compute that
    fails, as a successful one, discards the rows added for it: the module is ready for the next.
    """

    # evaluate's own state (set by EvaluationModule.__init__), which _discard_inputs resets
    writer: Any
    buf_writer: Any
    data: Any
    selected_feature_format: Any
    cache_file_name: str | None
    filelock: Any
    file_paths: list[str] | None
    filelocks: list[Any] | None

    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    """Label columns that may be left out: filled with "" (which the module reads as "not given")."""
    _rows_added: int = 0  # rows stored since the last compute (row numbers of the next batch start here)
    _label_kinds: Mapping[str, str] = types.MappingProxyType({})  # each label column's kind over the batches

    def add_batch(self, *, predictions=None, references=None, **columns):
        """Add a batch of rows (an optional column may be left out)."""
        batch = self._checked({"predictions": predictions, "references": references, **columns})
        stored = self.writer is not None
        try:
            super().add_batch(**batch)
        except BaseException:
            if not stored:  # evaluate keeps a writer typed by a batch it could not store
                self._discard_inputs()
            raise
        first = next((column for column in batch.values() if column is not None), [])
        self._rows_added += len(first)

    def add(self, *, prediction=None, reference=None, **columns):
        """Add one row (an optional column may be left out)."""
        row = {"predictions": prediction, "references": reference, **columns}
        names = self._feature_names()
        return self.add_batch(**{name: None if value is None and (name in self.OPTIONAL or name not in names)
                                 else [value] for name, value in row.items()})

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Compute the module (an optional column may be left out); the module is ready for the next
        compute whether this one succeeds or is refused."""
        given = {"predictions": predictions, "references": references, **kwargs}
        if any(given.get(name) is not None for name in self._feature_names()):
            for name in self.OPTIONAL:  # evaluate requires every column: an omitted one is filled by add_batch
                kwargs.setdefault(name, None)
        elif self.writer is None:
            raise ValueError(f"{self.name}: no inputs: pass {', '.join(self._feature_names())} to compute "
                             "(or add them with add_batch first)")
        try:
            return super().compute(predictions=predictions, references=references, **kwargs)
        except BaseException:
            self._discard_inputs()
            raise
        finally:
            self._rows_added, self._label_kinds = 0, types.MappingProxyType({})

    def _checked(self, batch: dict[str, Any]) -> dict[str, Any]:
        """The batch's columns checked and converted by their features; a refused batch stores nothing."""
        features = self.features  # one Features (label_features): never evaluate's list of formats
        given = {name: _rows(batch[name], name) for name in features if batch.get(name) is not None}
        lengths = {name: len(column) for name, column in given.items()}
        size = next(iter(lengths.values()), 0)
        for name, length in lengths.items():
            if length != size:  # evaluate's own words (it says them only where its encoding fails)
                raise ValueError(f"Mismatch in the number of {next(iter(lengths))} ({size}) and {name} ({length})")
        kinds = dict(self._label_kinds)
        for name, feature in features.items():
            column = given.get(name)
            if column is None:
                if name not in self.OPTIONAL:
                    raise ValueError(f"{self.name}: {name} is required (one value per row)")
                column = [""] * size
            batch[name] = self._column(name, feature, column, kinds)
        self._label_kinds = kinds
        return batch

    def _column(self, name: str, feature: Any, column: Any, kinds: dict[str, str]) -> Any:
        """One column as evaluate should store it, by the measures' rules (rows counted from the rows added)."""
        first_row = self._rows_added
        if feature == TEXT:
            texts = stats.label_column(column, name, first_row)
            kind = stats.label_kind(column[0])
            if kinds.setdefault(name, kind) != kind:
                raise ValueError(f"{name}: this batch holds {kind} labels (row {first_row}: {stats.shown(column[0])}) "
                                 f"but the rows added before hold {kinds[name]} labels; give every batch the same "
                                 "kind (e.g. all ClassLabel ids or all names)")
            return texts.tolist()
        if feature == datasets.Value("int64"):
            return measures.whole_column(column, name, first_row=first_row)
        if feature == datasets.Value("float64"):
            return measures.float_column(column, name, first_row=first_row)
        if isinstance(feature, (datasets.Sequence, datasets.List)):  # one vector of numbers per row
            return measures.float_column(column, name, ndim=2, first_row=first_row)
        return column

    def _discard_inputs(self) -> None:
        """Forget every stored row, evaluate's writer and cache file with them, as evaluate does
        after a successful compute (it does not after a failed one, nor after a first batch it
        could not store)."""
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.close()
        for lock in [self.filelock, *(self.filelocks or [])]:
            if lock is not None:
                lock.release()
        for path in [self.cache_file_name, *(self.file_paths or [])]:
            if path is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
        self.writer = self.buf_writer = self.data = self.selected_feature_format = None
        self.cache_file_name = self.filelock = self.file_paths = self.filelocks = None
        self._rows_added, self._label_kinds = 0, types.MappingProxyType({})


def _rows(column: Any, name: str) -> Any:
    """A column as something indexed by position: a pandas Series or array by its values (evaluate
    reads ``column[0]``, which is a Series' index label), an iterator as a list."""
    if isinstance(column, (str, bytes)) or not isinstance(column, Iterable):
        raise ValueError(f"{name} must be a list with one value per row, got {type(column).__name__}")
    if hasattr(column, "to_numpy"):  # pandas
        column = column.to_numpy()
    elif not hasattr(column, "__len__") or not hasattr(column, "__getitem__"):
        column = list(column)
    if len(column) == 0:
        raise ValueError(f"{name} is empty")
    return column


__all__ = ["SHARED_NAMES", "CheckedInputs", "ignore_shared", "label_features"]
