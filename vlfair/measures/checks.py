"""What every measure shares: its result type, how numbers, labels and options are read and checked (one
rule each), and the checks on groups."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from vlfair import stats
from vlfair.defaults import MAX_BOOTSTRAP, MAX_PERMUTATIONS, MIN_GROUP_SIZE

# a column of labels (groups, languages, strata, class predictions): a list, a numpy array, a pandas Series;
# any iterable of values, compared as strings
Labels = Iterable[Any]


# ---- results ----------------------------------------------------------------------------
# Field metadata for a key that the dicts held only in some cases: out of the mapping while None.
ABSENT_WHEN_NONE = {"absent_when_none": True}
# Field metadata for a number that may be infinite or NaN by its definition (its docstring says when:
# an F without variance within groups, a ratio over a zero mean, the skew of an absent group without
# smoothing). Every other number of a result is finite for finite inputs: one that is not means float64
# overflowed on the way, and the result is refused (MeasureResult.__post_init__).
MAY_BE_UNDEFINED = {"may_be_undefined": True}


class MeasureResult(Mapping[str, Any]):
    """What a measure returns: a frozen dataclass (one per measure) read by attribute, and by key
    as the dict the measure returned before.

    Why a Mapping: the measures returned plain dicts, and ``result["key"]``, ``.get``, ``in``,
    ``.items()``, ``dict(result)`` and ``{**result}`` were their public contract (probes, notebooks,
    the evaluate modules); all of them keep working, with the same keys in the same order. A field
    whose metadata says ``absent_when_none`` (a key the dicts held only in some cases, such as
    retention's ``ci_note``) is left out of the mapping while it is None. Equality is the mapping's, so a
    result equals the dict it was. :meth:`to_dict` is the JSON boundary (``json.dumps`` needs a
    real dict; the evaluate modules return it).
    """

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # set by @dataclass on each subclass

    def _keys(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self)
                if not (f.metadata.get("absent_when_none") and getattr(self, f.name) is None)]

    def __getitem__(self, key: str) -> Any:
        field = self.__dataclass_fields__.get(key)  # one lookup: probes read results key by key
        value = getattr(self, key) if field is not None else None
        if field is None or (value is None and field.metadata.get("absent_when_none")):
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def to_dict(self) -> dict[str, Any]:
        """The result as a plain dict: the keys of the mapping, in order (values are not copied)."""
        return {key: getattr(self, key) for key in self._keys()}

    def __post_init__(self) -> None:
        """Refuse a number no finite input can give: the one check, where every measure assembles its
        result, that no sum, square or ratio overflowed on the way (a bias ratio of inf, a p of 0)."""
        for field in dataclasses.fields(self):
            if not field.metadata.get("may_be_undefined"):
                found = _not_finite(getattr(self, field.name), field.name)
                if found is not None:
                    raise stats.not_finite(*found)


def _not_finite(value: Any, path: str) -> tuple[str, float] | None:
    """The first number inside ``value`` (a number, or lists and dicts of them) that is not finite, with
    its path (``group_means['a']``); None where every one is."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, value)
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _not_finite(item, f"{path}[{key!r}]")
        if found is not None:
            return found
    return None


_Result = TypeVar("_Result", bound=MeasureResult)


def by_stratum(per: Mapping[str, _Result], **extra: Any) -> _Result:
    """One result whose every key holds a dict by stratum (or language) of the results in ``per``,
    plus ``extra`` (the list of strata)."""
    first = next(iter(per.values()))
    return dataclasses.replace(first, **{key: {s: r[key] for s, r in per.items()} for key in first}, **extra)


# ---- input validation -------------------------------------------------------------------
_SHAPES = {1: "one number per row (a list of numbers)", 2: "one list of numbers per row (a 2-D array)"}


def float_column(values: npt.ArrayLike, name: str, ndim: int | tuple[int, ...] = 1,
                 first_row: int = 0) -> npt.NDArray[np.float64]:
    """The one number path of the measures and the evaluate modules: ``values`` as a float array of
    ``ndim`` dimensions (or one of them), finite, not empty. Bad input is a ValueError naming ``name``
    and the row (counted from ``first_row``): text, a number too large for float64 (a 400-digit int),
    NaN or infinity, rows of different lengths, a single number or the wrong number of dimensions."""
    if isinstance(values, (str, bytes, Mapping)):
        raise ValueError(f"{name} must be {_shapes(ndim)}; got {type(values).__name__}")
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(_not_numbers(values, name, first_row)) from None
    if array.ndim not in ((ndim,) if isinstance(ndim, int) else ndim):
        got = f"a single number ({values!r})" if array.ndim == 0 else f"shape {array.shape}"
        raise ValueError(f"{name} must be {_shapes(ndim)}; got {got}")
    if array.size == 0:
        raise ValueError(f"{name} is empty")
    rows = array.reshape(array.shape[0], -1)
    bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))  # the rows holding a NaN or an infinity
    if len(bad):
        kind = "NaN" if np.isnan(rows[bad[0]]).any() else "an infinite value"
        more = f" (and {len(bad) - 1} more rows)" if len(bad) > 1 else ""
        raise ValueError(f"{name} has {kind} at row {first_row + int(bad[0])}" + more)
    return array


def whole_column(values: npt.ArrayLike, name: str, first_row: int = 0) -> npt.NDArray[np.int64]:
    """:func:`float_column` of whole numbers, as integers: 1.0 is 1, 0.7 is refused by row (never
    truncated to 0)."""
    array = float_column(values, name, first_row=first_row)
    fractional = np.flatnonzero(array != np.round(array))
    if fractional.size:
        raise ValueError(f"{name} must be whole numbers; row {first_row + int(fractional[0])} is "
                         f"{array[fractional[0]]:g}")
    return array.astype(np.int64)


def _shapes(ndim: int | tuple[int, ...]) -> str:
    return " or ".join(_SHAPES[n] for n in ((ndim,) if isinstance(ndim, int) else ndim))


def _not_numbers(values: Any, name: str, first_row: int) -> str:
    """Why ``values`` are not an array of numbers, by row: a value that is no number, one too large
    for float64, or rows of different lengths."""
    rows = list(values) if isinstance(values, Iterable) else [values]
    lengths = {}
    for row, value in enumerate(rows):
        try:
            lengths[np.asarray(value, dtype=float).shape] = row
        except OverflowError:
            return (f"{name} row {first_row + row} holds a number too large for float64 "
                    f"(largest {np.finfo(np.float64).max:.3g}): {stats.shown(value)}; rescale the values")
        except (TypeError, ValueError):
            return f"{name} row {first_row + row} is {stats.shown(value)}, not a number"
    if len(lengths) > 1:  # rows of different lengths
        (shape_a, row_a), (shape_b, row_b) = sorted(lengths.items(), key=lambda item: item[1])[:2]
        return (f"{name} rows differ in length: row {first_row + row_a} has shape {shape_a}, row {first_row + row_b} "
                f"has shape {shape_b}")
    return f"{name} must be numbers"


def label_array(values: Labels, name: str) -> npt.NDArray[np.str_]:
    """Labels as text, by the one label rule (:func:`vlfair.stats.label_column`): a missing label is an
    error naming its rows, never a group "None", "nan" or "<NA>"; 1 and 1.0 are one group."""
    return stats.label_column(values, name)


# ---- options: one table of every measure's options, each with its type and range ------------
class _Rule(NamedTuple):
    accepts: Callable[[Any], bool]
    valid: str
    """What a valid value is: the message reads "<option> must be <valid>, got <value>"."""


def _whole(low: int, high: float = math.inf) -> Callable[[Any], bool]:
    """Whole numbers from ``low`` to ``high``; a bool is not a number here (True would be 1 silently)."""
    return lambda v: (isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                      and bool(low <= v <= high))


def finite_at_least_0(v: Any) -> bool:
    return (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
            and math.isfinite(v) and bool(v >= 0))


def _one_label(v: Any) -> bool:
    return not stats.is_missing(v) and not isinstance(v, (list, tuple, dict, set, np.ndarray))


def _two_groups(v: Any) -> bool:
    return (isinstance(v, (list, tuple, np.ndarray)) and len(v) == 2 and all(_one_label(g) for g in v)
            and stats.label_text(v[0]) != stats.label_text(v[1]))


OPTIONS: dict[str, _Rule] = {
    "bootstrap": _Rule(_whole(0, MAX_BOOTSTRAP), f"a whole number from 0 to {MAX_BOOTSTRAP:,} (0 turns it off)"),
    "n_permutations": _Rule(_whole(0, MAX_PERMUTATIONS),
                            f"a whole number from 0 to {MAX_PERMUTATIONS:,} (0 turns it off)"),
    "confidence": _Rule(lambda v: finite_at_least_0(v) and 0 < v < 1, "a number in (0, 1), e.g. 0.95"),
    "seed": _Rule(lambda v: v is None or _whole(0)(v),
                  "a whole number or None (a whole number >= 0; None: fresh randomness each call)"),
    "welch": _Rule(lambda v: isinstance(v, (bool, np.bool_)), "True or False"),
    "k": _Rule(_whole(1), "a whole number >= 1"),
    "num_words": _Rule(_whole(1), "a whole number >= 1"),
    "smoothing": _Rule(lambda v: v is None or finite_at_least_0(v),
                       "None or a finite number >= 0 (None: 0.5 with zero_count='smoothed'; 0: no smoothing)"),
    "zero_count": _Rule(lambda v: isinstance(v, str) and v in ("smoothed", "dvl"), "'smoothed' or 'dvl'"),
    "tolerance": _Rule(finite_at_least_0, "a finite number >= 0"),
    "target": _Rule(lambda v: v in ("uniform", "dataset") if isinstance(v, str) else isinstance(v, Mapping),
                    "'uniform', 'dataset' or a dict of each group's share"),
    "pivot": _Rule(lambda v: v is None or _one_label(v), "None or one language label"),
    "bias_pair": _Rule(lambda v: v is None or _two_groups(v), "None or two different groups, e.g. ('women', 'men')"),
}
"""Every option of every measure (a keyword argument that is neither data nor a group the data must
hold) with its type and range; :func:`checked` validates them before a measure runs. Ranges that
depend on the data (k <= the number of items or words, a pivot that occurs) the measure checks."""


def check_options(**options: Any) -> None:
    """Validate options by :data:`OPTIONS`, naming the option and what a valid value is.

    Raises:
        ValueError: a value of the wrong type or outside its range.
        TypeError: an option that :data:`OPTIONS` does not know (a programming error).
    """
    for name, value in options.items():
        if name not in OPTIONS:
            raise TypeError(f"check_options: no rule for option {name!r}; known: {sorted(OPTIONS)}")
        try:
            accepted = bool(OPTIONS[name].accepts(value))
        except (TypeError, ValueError, OverflowError):  # cannot even be compared (an array, a 400-digit int)
            accepted = False
        if not accepted:
            raise ValueError(f"{name} must be {OPTIONS[name].valid}, got {stats.shown(value)}")


_Measure = TypeVar("_Measure", bound=Callable[..., Any])


def checked(measure: _Measure) -> _Measure:
    """``measure`` with its options (those of its parameters that :data:`OPTIONS` names) validated
    before it runs: one place for every option of every measure, so none is forgotten."""
    signature = inspect.signature(measure)
    names = [name for name in signature.parameters if name in OPTIONS]

    @functools.wraps(measure)
    def validated(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        check_options(**{name: bound.arguments[name] for name in names})
        return measure(*args, **kwargs)

    return validated  # type: ignore[return-value]


def same_length(**arrays: Any) -> None:
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError("inputs differ in length: " + ", ".join(f"{n}={length}" for n, length in lengths.items()))


def require_present(group: str, names: list[str], role: str, column: str = "references") -> None:
    if group not in names:
        raise ValueError(f"{role} {group!r} does not occur in {column}; groups present: {names}")


def require_sizes(names: list[str], counts: np.ndarray, what: str = "group") -> None:
    small = [(n, int(c)) for n, c in zip(names, counts) if c < MIN_GROUP_SIZE]
    if small:
        listed = ", ".join(f"{n!r} ({c})" for n, c in small)
        raise ValueError(f"{what} with fewer than {MIN_GROUP_SIZE} samples: {listed}; "
                         f"a mean needs at least {MIN_GROUP_SIZE}")


def as_interval(ci: npt.NDArray[np.float64] | None, index: Any = None) -> list[float] | None:
    if ci is None:
        return None
    lo, hi = (ci[0], ci[1]) if index is None else (ci[0][index], ci[1][index])
    return [float(lo), float(hi)]
