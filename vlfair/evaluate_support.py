"""What vlfair's evaluate modules share (imports datasets, evaluate and the measures, never torch).

- :class:`CheckedInputs`, mixed into every module: each column is read by the measures' own rules
  before evaluate sees it (labels by :func:`vlfair.stats.label_column`, numbers by
  :func:`vlfair.measures.float_column`), so that evaluate's encoding never truncates a float label
  or index to an int, never turns a missing label into a group "nan", and a bad input is an error
  naming its column and row; and a module stays usable after a refused input.
- Labels of any kind: label columns are declared as text (:func:`label_features`) and arrive as
  text, numbers by their value (a ClassLabel id 1, 1.0 and "1" are one group), so ClassLabel ids,
  argmax predictions and names all pass.
- Options reach a module two ways, and none is ever silently ignored: at load
  (``evaluate.load("vlfair/bias_ratio", protected_group="women", reference_group="men")``, the module's
  defaults from then on) and at ``compute`` (for that call; it wins over the load's). ``_compute``
  declares every input and option by name (evaluate's common test: no ``**kwargs``).
- ``evaluate.combine`` hands every keyword of ``compute`` to every module and picks each module's
  columns for ``add_batch``/``add`` from one batch. A vlfair module recognises those calls of
  evaluate's ``CombinedEvaluations`` (by their code objects: evaluate tells a module nothing else) and
  then leaves out what another module of that combination takes, and the optional columns the batch
  does not hold. A name no module of the combination takes, and, outside a combination, a name the
  module does not take, is an error naming it and the vlfair modules that do take it.

Why: evaluate 0.4.6 types a column by its first row and casts the rest to it, and keeps a half-made writer
after a batch it could not store. :class:`CheckedInputs` reads each batch by the measures' rules before
evaluate sees it (labels by ``stats.label_column``, stored as their text; float columns by
``float_column``; integer columns by ``whole_column``), counting rows over the batches added so far. So
0.2 and 0.8 stay two groups (not "0"); a fraction in an integer column (retention's index,
word_influence's 0/1) is refused by row; a missing label is refused by row; empty inputs say "predictions
is empty", a single value "must be a list with one value per row"; a pandas Series with its own index is
read by position; a label column keeps one kind over all batches (a batch of another kind is refused and
not stored; the rows before it are kept); ``compute()`` with no input says what to pass. A compute that is
refused, like one that succeeds, discards the rows added for it, so the module is ready for the next.

How options reach a module. An option is a parameter of ``_compute`` with a default
(``CheckedInputs.option_names()``); a column is one without (evaluate passes every column). An option is
given either at load, ``evaluate.load("vlfair/<name>", **options)`` / ``vlfair.load_metric(name,
**options)``, checked there against ``measures.OPTIONS`` and kept as the module's defaults
(``module.configured``; ``seed`` is also evaluate's own seed), or to ``compute``, for that call, winning
over the load's value. At load, a column, a name the module does not take, ``seed`` for a module that
draws no random numbers and a ``config_name`` (no vlfair module has configurations) are a TypeError:
evaluate itself would take them and change nothing. ``compute`` on a module alone refuses a name it does
not take with a TypeError naming the vlfair modules that take it (``vlfair.metrics.module_parameters()`` /
``module_columns()``, read from the modules' sources) and saying to leave it out; before issue 30 such an
option was silently ignored (``bias_ratio.compute(..., strata=...)``). Everything a compute can be refused
for without computing (names, option values, columns given to compute that are not one whole batch or
that add_batch would refuse after rows were added) is refused before evaluate stores or computes
anything, so the rows added are kept; only a measure refusing the rows themselves (a group too small)
discards them, as evaluate discards them after a successful compute.

``evaluate.combine`` hands every ``compute`` keyword to every module and tells a module nothing, so a
vlfair module recognises evaluate's ``CombinedEvaluations.compute``, ``.add_batch`` and ``.add`` as its
caller by their code objects (evaluate 0.4 is in maintenance mode: they do not move; checked on Python
3.11 to 3.13) and reads that combination. In ``compute`` it leaves to the others a name another module of
the combination takes; the first vlfair module refuses, for all of them and before any computes, a name no
module takes and every option value or column their own compute would refuse. In ``add_batch``/``add``
(which pick each module's columns by ``_feature_names()`` from one batch: a KeyError for a left-out
optional column) ``_feature_names()`` lists only the optional columns that batch holds, and the first
vlfair module first checks the batch for all of them: no name is a stray (an option or a typo evaluate
would drop), and each vlfair module's part passes its add_batch's checks (required columns, lengths,
values, an optional column given with every batch or with none), so a refused batch is stored by no
vlfair module. A left-out optional column is stored as ``LEFT_OUT`` (""), which is refused as a label of
that column; ``_compute`` reads it with :func:`optional_column`, which refuses rows that mix both
(processes of a distributed evaluation that disagree). Two modules that need different values of one
option (``bootstrap``) get them at load. A module of another library in the same combination is only read
(its ``_compute`` signature and columns), never changed; one that precedes every vlfair module stores its
rows before a vlfair module can refuse a batch, and one whose ``_compute`` takes ``**kwargs`` is taken to
take every name.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import datasets
import evaluate
from evaluate.module import CombinedEvaluations
from evaluate.naming import camelcase_to_snakecase

from vlfair import measures, metrics, stats

TEXT = datasets.Value("string")
# evaluate.EvaluationModule's own __init__ parameters (evaluate.load passes them with the user's options);
# "seed" is taken only by a module whose own option it is (evaluate's seed of numpy's generator would
# change nothing in the others), "config_name" only as "default" (no vlfair module has configurations)
_EVALUATE_INIT = frozenset(inspect.signature(evaluate.EvaluationModule.__init__).parameters) - {"self", "kwargs",
                                                                                                 "seed"}
_COMBINED_ADDS = frozenset({CombinedEvaluations.add.__code__, CombinedEvaluations.add_batch.__code__})
LEFT_OUT = ""
"""What fills an optional column that was left out (a label no user may give in that column)."""


def label_features(fixed: dict[str, Any], labels: Sequence[str]) -> datasets.Features:
    """The module's columns: ``fixed`` columns keep their feature, the ``labels`` columns are text
    (:class:`CheckedInputs` turns every label into its text first). Column order: ``fixed`` then ``labels``."""
    return datasets.Features({**fixed, **{name: TEXT for name in labels}})


def takers(name: str, columns_only: bool = False) -> list[str]:
    """The vlfair modules that take ``name`` as an input or option (or, ``columns_only``, as a column), sorted."""
    table = metrics.module_columns() if columns_only else metrics.module_parameters()
    return sorted(module for module, names in table.items() if name in names)


def _taken_by(module: Any) -> tuple[list[str], bool]:
    """What ``module`` (any evaluate module) takes in ``compute``: its columns and its ``_compute``'s
    named parameters (in that order), and whether its ``_compute`` takes any keyword (``**kwargs``)."""
    parameters = inspect.signature(module._compute).parameters.values()
    named = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    columns = module._feature_names()
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters)
    return [*columns, *(name for name in named if name not in columns)], takes_any


def _not_taken(name: str, module: str, takes: Iterable[str], what: str = "") -> str:
    """Why ``name`` is refused by ``module`` (which takes ``takes``, ``what`` they are), and what to write instead."""
    others = [m for m in takers(name) if m != module]
    where = (f"{', '.join(others)} take{'s' if len(others) == 1 else ''} it: leave it out here" if others
             else "no vlfair module takes it (a typo?)")
    return f"{module} does not take {name!r}; {where}. {module} takes {what}{', '.join(takes)}"


def _who_would(name: str, columns_only: bool = False) -> str:
    """`` (trait_anova would)`` after a name that no module of a combination takes, or `` (a typo?)``."""
    found = takers(name, columns_only)
    return f" ({', '.join(found)} would)" if found else " (a typo?)"


def _stray_hint(name: str) -> str:
    """What a name given to evaluate.combine's add_batch that none of its modules takes as a column is."""
    if takers(name) and not takers(name, columns_only=True):
        return "; options go to compute or to evaluate.load"
    return _who_would(name, columns_only=True)


def optional_column(values: Sequence[str], name: str) -> Sequence[str] | None:
    """An optional label column as a module's ``_compute`` receives it, for its measure: None where
    every row left it out, the column where every row gave it. Rows that mix both (batches added by
    processes of a distributed evaluation, some with the column and some without) are an error:
    the left-out rows would become a group of their own."""
    blank = [row for row, value in enumerate(values) if value == LEFT_OUT]
    if len(blank) == len(values):
        return None
    if blank:
        raise ValueError(f"{name} is left out for {len(blank)} of {len(values)} rows (row {blank[0]} first), "
                         f"given for the others: give {name} with every batch on every process, or with none")
    return values


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
    # text columns that name no groups (answers and classes, word_influence's variants, where "" is the prompt
    # with no word replaced): a blank or odd value there is data, not a group no table can name
    NOT_GROUPS: ClassVar[tuple[str, ...]] = ()
    """Label columns that may be left out: filled with "" (which the module reads as "not given")."""
    _rows_added: int = 0  # rows stored since the last compute (row numbers of the next batch start here)
    _label_kinds: Mapping[str, str] = types.MappingProxyType({})  # each label column's kind over the batches
    _optional_given: Mapping[str, bool] = types.MappingProxyType({})  # which optional columns the batches hold
    configured: Mapping[str, Any] = types.MappingProxyType({})
    """The options given at load (``evaluate.load(..., bootstrap=0)``): this module's defaults (read them;
    on the instance they are a plain dict, so that a module pickles and deep-copies as evaluate's do)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Take evaluate's own arguments, and this module's options as its defaults
        (``evaluate.load(path, **options)``)."""
        names = self.option_names()
        options = {name: kwargs.pop(name) for name in list(kwargs) if name in names}
        columns = sorted(set(kwargs) & set(self._info().features))
        if columns:
            kind = "is a column" if len(columns) == 1 else "are columns"
            raise TypeError(f"{self._module()}: {', '.join(columns)} {kind} (one value per row): give columns to "
                            "compute or add_batch, not to evaluate.load")
        unknown = sorted(set(kwargs) - _EVALUATE_INIT)
        if unknown:  # evaluate itself would accept and ignore them
            raise TypeError("; ".join(_not_taken(name, self._module(), names, "the options ") for name in unknown))
        config_name = args[0] if args else kwargs.get("config_name")
        if config_name not in (None, "default"):  # evaluate would take it and change nothing
            raise TypeError(f"{self._module()} has no configurations (config_name={config_name!r}); give options "
                            f"as keywords: evaluate.load(..., {names[0]}=...); its options are {', '.join(names)}")
        measures.check_options(**{name: value for name, value in options.items() if name in measures.OPTIONS})
        if "seed" in options:  # evaluate's own seed (numpy's during compute) is the module's seed too
            kwargs["seed"] = options["seed"]
        super().__init__(*args, **kwargs)
        self.configured = dict(options)

    @classmethod
    def option_names(cls) -> list[str]:
        """This module's options: the parameters of its ``_compute`` that are not columns."""
        columns = cls._info(cls).features  # _info reads no instance state
        return [name for name in list(inspect.signature(cls._compute).parameters)[1:] if name not in columns]

    @classmethod
    def _module(cls) -> str:
        """The module's name before evaluate sets ``self.name`` (evaluate's own rule: BiasRatio -> bias_ratio)."""
        return camelcase_to_snakecase(cls.__name__)

    def _feature_names(self) -> list[str]:
        """Return evaluate's column names; to evaluate.combine's add/add_batch (which picks each module's
        columns from its batch by these names) only the optional columns that batch holds."""
        names = super()._feature_names()
        caller = sys._getframe(1)
        if caller.f_code in _COMBINED_ADDS:
            batch, combination = caller.f_locals["batch"], caller.f_locals["self"]
            if self is _first_vlfair(combination):  # once per batch, before any vlfair module stores it
                _check_combined_batch(combination, batch, one_row=caller.f_code is CombinedEvaluations.add.__code__)
            names = [name for name in names if name not in self.OPTIONAL or batch.get(name) is not None]
        return names

    def add_batch(self, *, predictions=None, references=None, **columns):
        """Add a batch of rows (an optional column may be left out: from every batch, or from none)."""
        batch, kinds, optional_given = self._checked({"predictions": predictions, "references": references, **columns})
        stored = self.writer is not None
        try:
            super().add_batch(**batch)
        except BaseException:
            if not stored:  # evaluate keeps a writer typed by a batch it could not store
                self._discard_inputs()
            raise
        first = next((column for column in batch.values() if column is not None), [])
        self._rows_added += len(first)
        self._label_kinds, self._optional_given = kinds, optional_given

    def add(self, *, prediction=None, reference=None, **columns):
        """Add one row (an optional column may be left out). evaluate.combine passes ``predictions``
        and ``references`` (its batch's names) for ``prediction`` and ``reference``: both are read."""
        row = {"predictions": prediction, "references": reference, **columns}
        names = self._feature_names()
        return self.add_batch(**{name: None if value is None and (name in self.OPTIONAL or name not in names)
                                 else [value] for name, value in row.items()})

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Compute the module (an optional column may be left out); the module is ready for the next
        compute whether this one succeeds or is refused. Options given here win over those given at load."""
        caller = sys._getframe(1)
        combination = caller.f_locals["self"] if caller.f_code is CombinedEvaluations.compute.__code__ else None
        everything = {"predictions": predictions, "references": references, **kwargs}
        given = self._taken(dict(everything), combination)
        # what can be refused is refused here, before anything is computed: the rows added are kept
        if combination is None:
            self._check_compute(given, columns_too=self.writer is not None)  # else a refused batch loses nothing
        elif self is _first_vlfair(combination):  # for every vlfair module, before the first computes
            for module in combination.evaluation_modules:
                if isinstance(module, CheckedInputs):
                    module._check_compute(module._taken(dict(everything), combination), columns_too=True)
        if any(given.get(name) is not None for name in self._feature_names()):
            for name in self.OPTIONAL:  # evaluate requires every column: an omitted one is filled by add_batch
                given.setdefault(name, None)
        try:  # a measure that refuses the rows: evaluate has read them, as after a successful compute
            return super().compute(**{**self.configured, **given})
        except BaseException:
            self._discard_inputs()
            raise
        finally:
            self._forget_batches()

    def _check_compute(self, given: dict[str, Any], columns_too: bool) -> None:
        """Refuse, before evaluate stores or computes anything, a compute call that would fail on what
        it was given: option values out of range, no rows at all, columns that are not one whole batch,
        and (``columns_too``) columns that add_batch would refuse."""
        options = {**self.configured, **{name: given[name] for name in self.option_names() if name in given}}
        measures.check_options(**{name: value for name, value in options.items() if name in measures.OPTIONS})
        required = [name for name in self._feature_names() if name not in self.OPTIONAL]
        columns = [name for name in self._feature_names() if given.get(name) is not None]
        if not columns:
            if self.writer is None:
                raise ValueError(f"{self.name}: no inputs: pass {', '.join(required)} to compute "
                                 "(or add them with add_batch first)")
            return
        missing = [name for name in required if name not in columns]
        if missing and self.writer is not None:
            raise ValueError(f"{self.name}.compute: {', '.join(columns)} given without {', '.join(missing)}: columns "
                             "given to compute are one more batch of rows; give each column of the rows added with "
                             "add_batch, or every column to compute")
        if columns_too:
            self._checked({name: given.get(name) for name in self._feature_names()})  # as add_batch: stores nothing

    def _taken(self, given: dict[str, Any], combination: CombinedEvaluations | None) -> dict[str, Any]:
        """The keywords of a compute call this module takes. Called by evaluate.combine's compute, a
        name another module of that combination takes is left to it; any other name is an error
        (raised before anything is computed, the rows added so far kept)."""
        mine, _ = _taken_by(self)
        others = [_taken_by(module) for module in combination.evaluation_modules if module is not self] \
            if combination is not None else []
        refused = []
        for name, value in list(given.items()):
            if name in mine:
                continue
            del given[name]
            if value is None:  # evaluate.combine's predictions=None, references=None: not given
                continue
            if combination is not None and any(name in names or any_name for names, any_name in others):
                continue
            refused.append(name)
        if refused and combination is None:
            raise TypeError(f"{self.name}.compute: " + "; ".join(_not_taken(name, self.name, mine) for name in refused))
        if refused and combination is not None:
            modules = ", ".join(combination.evaluation_module_names)
            raise TypeError("; ".join(f"{name!r}: no module of this evaluate.combine ({modules}) takes it"
                                      + _who_would(name) for name in refused))
        return given

    def _checked(self, batch: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str], dict[str, bool]]:
        """The batch's columns checked and converted by their features, and the label kinds and optional
        columns the module holds once the batch is stored. Changes nothing: a refused batch stores nothing."""
        features = self.features  # one Features (label_features): never evaluate's list of formats
        given = {name: _rows(batch[name], name) for name in features if batch.get(name) is not None}
        lengths = {name: len(column) for name, column in given.items()}
        size = next(iter(lengths.values()), 0)
        for name, length in lengths.items():
            if length != size:  # evaluate's own words (it says them only where its encoding fails)
                raise ValueError(f"Mismatch in the number of {next(iter(lengths))} ({size}) and {name} ({length})")
        kinds, optional_given = dict(self._label_kinds), self._optional_columns(set(given))
        for name, feature in features.items():
            column = given.get(name)
            if column is None:
                if name not in self.OPTIONAL:
                    raise ValueError(f"{self.name}: {name} is required (one value per row)")
                column = [LEFT_OUT] * size
            batch[name] = self._column(name, feature, column, kinds)
            if name in self.OPTIONAL and name in given and LEFT_OUT in batch[name]:
                row = self._rows_added + batch[name].index(LEFT_OUT)
                raise ValueError(f"{self.name}: {name} is blank at row {row}; a blank {name} means 'left out': "
                                 f"name every row's {name}, or leave the column out")
        return batch, kinds, optional_given

    def _optional_columns(self, given: set[str]) -> dict[str, bool]:
        """Which optional columns the rows added so far and this batch hold; an error where a column
        is given for some batches and left out of others ("" fills a left-out one: the rows would mix)."""
        optional_given = dict(self._optional_given)
        for name in self.OPTIONAL:
            if optional_given.setdefault(name, name in given) != (name in given):
                rows = f"rows 0-{self._rows_added - 1}" if self._rows_added > 1 else "row 0"
                raise ValueError(f"{self.name}: {name} is {'given' if name in given else 'left out'} in this batch "
                                 f"(from row {self._rows_added}) but was {'given' if name not in given else 'left out'}"
                                 f" for {rows}: give {name} with every batch or with none")
        return optional_given

    def _column(self, name: str, feature: Any, column: Any, kinds: dict[str, str]) -> Any:
        """One column as evaluate should store it, by the measures' rules (rows counted from the rows added)."""
        first_row = self._rows_added
        if feature == TEXT:
            texts = stats.label_column(column, name, first_row, groups=name not in self.NOT_GROUPS,
                                       left_out=LEFT_OUT if name in self.OPTIONAL else None)
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
        self._forget_batches()

    def _forget_batches(self) -> None:
        """Start counting rows, label kinds and optional columns afresh (after a compute or a discard)."""
        self._rows_added, self._label_kinds, self._optional_given = 0, {}, {}


def _first_vlfair(combination: CombinedEvaluations) -> CheckedInputs | None:
    """The combination's first vlfair module: the one that checks a call for all of them."""
    return next((module for module in combination.evaluation_modules if isinstance(module, CheckedInputs)), None)


def _check_combined_batch(combination: CombinedEvaluations, batch: dict[str, Any], one_row: bool) -> None:
    """Refuse a batch of evaluate.combine's add_batch (or add: ``one_row``) that some module would not
    store, before any vlfair module stores it: a name no module takes as a column (evaluate would drop
    it unseen), and each vlfair module's part of it as that module's add_batch would check it."""
    columns = set().union(*(module._feature_names() for module in combination.evaluation_modules))
    strays = sorted(name for name, value in batch.items() if value is not None and name not in columns)
    if strays:
        modules = ", ".join(combination.evaluation_module_names)
        raise ValueError("; ".join(f"{name}: no module of this evaluate.combine ({modules}) takes it as a column"
                                   + _stray_hint(name) for name in strays))
    for module in combination.evaluation_modules:
        if isinstance(module, CheckedInputs):
            part = {name: batch.get(name) for name in module.features}
            module._checked({name: [value] if one_row and value is not None else value for name, value in part.items()})


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


__all__ = ["LEFT_OUT", "CheckedInputs", "label_features", "optional_column", "takers"]
