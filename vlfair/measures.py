"""Every bias measure of vlfair as a pure function of arrays; numpy and scipy only.

Each returns a frozen dataclass, one per measure (:class:`BiasRatio`, :class:`GroupScoreGap`, ...),
whose fields are read as attributes (``gap.max_gap``). Every one is also a :class:`MeasureResult`,
a read-only mapping that reads exactly as the flat dict the measures returned before (JSON-friendly:
floats, lists, dicts of floats), with at least the keys of the evaluate table in DESIGN.md, plus
confidence intervals (``<key>_ci``), sample counts and p-values; ``to_dict()`` gives that dict.
Group statistics take ``bootstrap`` (stratified resamples; 0 turns intervals off), ``confidence``
and ``seed``. Accuracies and shares are fractions in [0, 1].
Group labels are read by one rule (:func:`vlfair.stats.label_column`): compared as text, a number by its
value (1 and 1.0 are one group), a missing label (None, NaN, NaT, pandas' NA) an error naming its row.
Numbers are read by one rule (:func:`float_column`), options by one table (:data:`OPTIONS`), and a result
holding a number that no finite input can give (an overflow) is refused where it is assembled. Bad input
raises a ValueError that names the problem.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from vlfair import stats
from vlfair.defaults import BOOTSTRAP, CONFIDENCE, MAX_BOOTSTRAP, MAX_PERMUTATIONS, PERMUTATIONS, SEED

MIN_GROUP_SIZE = 2  # never report a group mean from fewer samples
# a column of labels (groups, languages, strata, class predictions): a list, a numpy array, a pandas Series;
# any iterable of values, compared as strings
Labels = Iterable[Any]


# ---- results ----------------------------------------------------------------------------
# Field metadata for a key that the dicts held only in some cases: out of the mapping while None.
_ABSENT_WHEN_NONE = {"absent_when_none": True}
# Field metadata for a number that may be infinite or NaN by its definition (its docstring says when:
# an F without variance within groups, a ratio over a zero mean, the skew of an absent group without
# smoothing). Every other number of a result is finite for finite inputs: one that is not means float64
# overflowed on the way, and the result is refused (MeasureResult.__post_init__).
_MAY_BE_UNDEFINED = {"may_be_undefined": True}


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


def _by_stratum(per: Mapping[str, _Result], **extra: Any) -> _Result:
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


def _labels(values: Labels, name: str) -> npt.NDArray[np.str_]:
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


def _finite_at_least_0(v: Any) -> bool:
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
    "confidence": _Rule(lambda v: _finite_at_least_0(v) and 0 < v < 1, "a number in (0, 1), e.g. 0.95"),
    "seed": _Rule(lambda v: v is None or _whole(0)(v),
                  "a whole number or None (a whole number >= 0; None: fresh randomness each call)"),
    "welch": _Rule(lambda v: isinstance(v, (bool, np.bool_)), "True or False"),
    "k": _Rule(_whole(1), "a whole number >= 1"),
    "num_words": _Rule(_whole(1), "a whole number >= 1"),
    "smoothing": _Rule(lambda v: v is None or _finite_at_least_0(v),
                       "None or a finite number >= 0 (None: 0.5 with zero_count='smoothed'; 0: no smoothing)"),
    "zero_count": _Rule(lambda v: isinstance(v, str) and v in ("smoothed", "dvl"), "'smoothed' or 'dvl'"),
    "tolerance": _Rule(_finite_at_least_0, "a finite number >= 0"),
    "target": _Rule(lambda v: v in ("uniform", "dataset") if isinstance(v, str) else isinstance(v, Mapping),
                    "'uniform', 'dataset' or a dict of each group's share"),
    "pivot": _Rule(lambda v: v is None or _one_label(v), "None or one language label"),
    "bias_pair": _Rule(lambda v: v is None or _two_groups(v), "None or two different groups, e.g. ('women', 'men')"),
}
"""Every option of every measure (a keyword argument that is neither data nor a group the data must
hold) with its type and range; :func:`_checked` validates them before a measure runs. Ranges that
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


def _checked(measure: _Measure) -> _Measure:
    """``measure`` with its options (those of its parameters that :data:`OPTIONS` names) validated
    before it runs: one place for every option of every measure, so none is forgotten."""
    signature = inspect.signature(measure)
    names = [name for name in signature.parameters if name in OPTIONS]

    @functools.wraps(measure)
    def checked(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        check_options(**{name: bound.arguments[name] for name in names})
        return measure(*args, **kwargs)

    return checked  # type: ignore[return-value]


def _same_length(**arrays: Any) -> None:
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError("inputs differ in length: " + ", ".join(f"{n}={length}" for n, length in lengths.items()))


def _require_present(group: str, names: list[str], role: str, column: str = "references") -> None:
    if group not in names:
        raise ValueError(f"{role} {group!r} does not occur in {column}; groups present: {names}")


def _require_sizes(names: list[str], counts: np.ndarray, what: str = "group") -> None:
    small = [(n, int(c)) for n, c in zip(names, counts) if c < MIN_GROUP_SIZE]
    if small:
        listed = ", ".join(f"{n!r} ({c})" for n, c in small)
        raise ValueError(f"{what} with fewer than {MIN_GROUP_SIZE} samples: {listed}; "
                         f"a mean needs at least {MIN_GROUP_SIZE}")


def _interval(ci: npt.NDArray[np.float64] | None, index: Any = None) -> list[float] | None:
    if ci is None:
        return None
    lo, hi = (ci[0], ci[1]) if index is None else (ci[0][index], ci[1][index])
    return [float(lo), float(hi)]


class _GroupMeans:
    """Group means of one score column, with stratified-bootstrap resamples of them."""

    def __init__(self, values: np.ndarray, labels: np.ndarray, bootstrap: int, seed: int | None, what: str = "group"):
        self.names, self.codes = stats.encode_groups(labels)
        self.counts = np.bincount(self.codes, minlength=len(self.names))
        _require_sizes(self.names, self.counts, what)
        self.values = values
        self.means = stats.group_means(values, self.codes, len(self.names))
        self.samples = None
        if bootstrap:
            self.samples = stats.bootstrap_group_means(values, self.codes, len(self.names), bootstrap, seed)

    def index(self, name: str) -> int:
        return self.names.index(name)

    def interval(self, derived: Any, confidence: float) -> np.ndarray | None:
        """CI of ``derived(means)`` where ``means`` is (B, G) over the resamples."""
        if self.samples is None:
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            return stats.percentile_interval(derived(self.samples), confidence)

    def as_dict(self, values: np.ndarray) -> dict[str, Any]:
        """Plain Python per group: counts stay ints, means floats; numpy label types become Python's."""
        return {(n.item() if hasattr(n, "item") else n): v.item() for n, v in zip(self.names, values)}

    def cis(self, confidence: float) -> dict[str, list[float] | None] | None:
        ci = self.interval(lambda m: m, confidence)
        return None if ci is None else {n: _interval(ci, i) for i, n in enumerate(self.names)}


# ---- bias_ratio, group_score_gap, trait_anova -------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class BiasRatio(MeasureResult):
    """The result of :func:`bias_ratio`."""

    bias_ratio: float
    """mean(score | protected) / mean(score | reference); 1.0 is neutral."""
    bias_ratio_ci: list[float] | None = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    """Its bootstrap interval [low, high]; None without resampling (a bound is inf where resamples of the
    reference group's mean reach 0)."""
    p_value: float | None
    """Two-sided permutation test of the two groups' mean difference; None without permutations."""
    log10_p_value: float | None
    """log10 of ``p_value``, finite where the p-value underflows float64."""
    p_value_method: str | None
    """How ``p_value`` was obtained: "exact", "monte_carlo", "sequential_monte_carlo" or "normal_limit"."""
    protected_group: str
    reference_group: str
    group_means: dict[str, float]
    group_means_ci: dict[str, list[float] | None] | None
    group_counts: dict[str, int]
    confidence: float
    """The intervals' level."""


@_checked
def bias_ratio(scores: npt.ArrayLike, groups: Labels, protected_group: Any, reference_group: Any,
               bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE, seed: int | None = SEED,
               n_permutations: int = PERMUTATIONS) -> BiasRatio:
    """The bias ratio b = mean(score | protected) / mean(score | reference); 1.0 is neutral.

    ``p_value``: permutation test of the two groups' mean difference (two-sided).

    Args:
        scores: one score >= 0 per sample (e.g. CLIP scores or probabilities).
        groups: each sample's group label.
        protected_group: the group whose mean is the numerator.
        reference_group: the group whose mean is the denominator.
        bootstrap: stratified-bootstrap resamples for the intervals (0: no intervals).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling and the permutations (None: fresh randomness each call).
        n_permutations: label permutations for ``p_value`` (0: no test).

    Returns:
        A :class:`BiasRatio`: ``bias_ratio`` and ``bias_ratio_ci``; ``p_value``, ``log10_p_value``
        and ``p_value_method``; ``protected_group`` and ``reference_group``; ``group_means``,
        ``group_means_ci`` and ``group_counts`` by group; ``confidence``.

    Raises:
        ValueError: bad input, named: a negative or non-finite score, a missing label, lengths that
            differ, a group that is absent or has fewer than 2 samples, a reference mean of 0.
    """
    values, labels = float_column(scores, "predictions"), _labels(groups, "references")
    _same_length(predictions=values, references=labels)
    negative = np.flatnonzero(values < 0)
    if negative.size:  # a ratio of means says nothing when scores can cancel or flip its sign
        raise ValueError(f"predictions must be >= 0 for a ratio of means (e.g. CLIP scores, probabilities); row "
                         f"{int(negative[0])} is {values[negative[0]]:g}"
                         + (f" and {negative.size - 1} more rows are negative" if negative.size > 1 else "")
                         + "; for signed scores use group_score_gap")
    for option, value in (("protected_group", protected_group), ("reference_group", reference_group)):
        if value is None:
            raise ValueError(f"{option} is required: name the group to put in the "
                             + ("numerator" if option == "protected_group" else "denominator"))
    protected, reference = stats.label_text(protected_group), stats.label_text(reference_group)
    names = sorted(set(labels.tolist()))
    _require_present(protected, names, "protected_group")
    _require_present(reference, names, "reference_group")
    if protected == reference:
        raise ValueError(f"protected_group and reference_group are the same group ({protected!r})")
    g = _GroupMeans(values, labels, bootstrap, seed)
    p_i, r_i = g.index(protected), g.index(reference)
    if g.means[r_i] == 0:
        raise ValueError(f"the mean score of reference_group {reference!r} is 0: the ratio is undefined")
    ci = g.interval(lambda m: m[:, p_i] / m[:, r_i], confidence)
    pair = np.isin(labels, [protected, reference])
    test = None
    if n_permutations:
        codes = (labels[pair] == protected).astype(np.int64)
        test = stats.permutation_test(values[pair], codes, stats.mean_difference, n_permutations, seed)
    return BiasRatio(
        bias_ratio=float(g.means[p_i] / g.means[r_i]), bias_ratio_ci=_interval(ci), **_p_fields(test),
        protected_group=protected, reference_group=reference,
        group_means=g.as_dict(g.means), group_means_ci=g.cis(confidence), group_counts=g.as_dict(g.counts),
        confidence=confidence,
    )


@dataclasses.dataclass(frozen=True, eq=False)
class GroupScoreGap(MeasureResult):
    """The result of :func:`group_score_gap`."""

    group_means: dict[str, float]
    group_means_ci: dict[str, list[float] | None] | None
    group_counts: dict[str, int]
    top_group: str
    """The group with the highest mean (the most associated)."""
    bottom_group: str
    """The group with the lowest mean."""
    max_gap: float
    """The top group's mean minus the bottom group's."""
    max_gap_ci: list[float] | None
    min_max_ratio: float = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    """The bottom group's mean over the top group's (NaN where the top mean is 0)."""
    min_max_ratio_ci: list[float] | None = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    p_value: float | None
    """Permutation test of the range of group means; None without permutations."""
    log10_p_value: float | None
    """log10 of ``p_value``, finite where the p-value underflows float64."""
    p_value_method: str | None
    """How ``p_value`` was obtained: "exact", "monte_carlo", "sequential_monte_carlo" or "normal_limit"."""
    confidence: float
    """The intervals' level."""


@_checked
def group_score_gap(scores: npt.ArrayLike, groups: Labels, bootstrap: int = BOOTSTRAP,
                    confidence: float = CONFIDENCE, seed: int | None = SEED,
                    n_permutations: int = PERMUTATIONS) -> GroupScoreGap:
    """Group means, the most associated group, and the gap between the highest and lowest mean.

    ``p_value`` tests the range of group means against label permutations, so it accounts for
    the top and bottom groups being picked after looking at the data.

    Args:
        scores: one score per sample (any sign).
        groups: each sample's group label; at least 2 groups.
        bootstrap: stratified-bootstrap resamples for the intervals (0: no intervals).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling and the permutations (None: fresh randomness each call).
        n_permutations: label permutations for ``p_value`` (0: no test).

    Returns:
        A :class:`GroupScoreGap`: ``group_means``, ``group_means_ci`` and ``group_counts`` by group;
        ``top_group`` and ``bottom_group``; ``max_gap`` and ``min_max_ratio`` (bottom / top mean) with
        their ``_ci``; ``p_value``, ``log10_p_value`` and ``p_value_method``; ``confidence``.

    Raises:
        ValueError: bad input, named (as for :func:`bias_ratio`), or fewer than 2 groups.
    """
    values, labels = float_column(scores, "predictions"), _labels(groups, "references")
    _same_length(predictions=values, references=labels)
    g = _GroupMeans(values, labels, bootstrap, seed)
    if len(g.names) < 2:
        raise ValueError(f"a gap needs at least 2 groups; references hold only {g.names}")
    top, bottom = int(np.argmax(g.means)), int(np.argmin(g.means))
    test = stats.permutation_test(values, g.codes, stats.mean_range, n_permutations, seed) if n_permutations else None
    ratio = float(g.means[bottom] / g.means[top]) if g.means[top] != 0 else float("nan")
    return GroupScoreGap(
        group_means=g.as_dict(g.means), group_means_ci=g.cis(confidence), group_counts=g.as_dict(g.counts),
        top_group=g.names[top], bottom_group=g.names[bottom],
        max_gap=float(g.means[top] - g.means[bottom]),
        max_gap_ci=_interval(g.interval(lambda m: m.max(axis=1) - m.min(axis=1), confidence)),
        min_max_ratio=ratio,
        min_max_ratio_ci=_interval(g.interval(lambda m: m.min(axis=1) / m.max(axis=1), confidence)),
        **_p_fields(test), confidence=confidence,
    )


def _p_fields(test: stats.PermutationResult | None) -> dict[str, Any]:
    """p_value, its log10 (finite below float64's 1e-308) and the method that gave it."""
    if test is None:
        return {"p_value": None, "log10_p_value": None, "p_value_method": None}
    return {"p_value": test.p_value, "log10_p_value": test.log10_p_value, "p_value_method": test.method}


@dataclasses.dataclass(frozen=True, eq=False)
class TraitAnova(MeasureResult):
    """The result of :func:`trait_anova`. With strata every field but ``strata`` holds a dict by stratum."""

    f_statistic: float | dict[str, float] = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    """F = mean square between groups / mean square within (inf without variance within groups, NaN
    without any variance)."""
    p_value: float | dict[str, float] = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    """From the F distribution's survival function (NaN where F is)."""
    log10_p_value: float | dict[str, float] = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    """log10 of ``p_value``, finite where the p-value underflows float64 (-inf where F is inf)."""
    df_between: float | dict[str, float]
    df_within: float | dict[str, float]
    eta_squared: float | dict[str, float] = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    """Effect size: the share of the scores' variance between groups (NaN where every score is equal)."""
    welch: bool | dict[str, bool]
    """Whether Welch's ANOVA (unequal variances) was run."""
    group_means: dict[str, float] | dict[str, dict[str, float]]
    group_means_ci: dict[str, list[float] | None] | None | dict[str, dict[str, list[float] | None] | None]
    group_counts: dict[str, int] | dict[str, dict[str, int]]
    strata: list[str] | None = dataclasses.field(default=None, metadata=_ABSENT_WHEN_NONE)
    """The strata, sorted; None (and no key) without strata."""


@_checked
def trait_anova(scores: npt.ArrayLike, groups: Labels, strata: Labels | None = None,
                welch: bool = False, bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                seed: int | None = SEED) -> TraitAnova:
    """One-way ANOVA of scores across groups (e.g. races), optionally within each stratum (e.g.
    gender): F, p, degrees of freedom, eta squared and group means with CIs.

    Without strata every key holds one value; with strata every key holds a dict by stratum.
    ``welch=True`` runs Welch's ANOVA (unequal variances).

    Args:
        scores: one score per sample.
        groups: each sample's group label; at least 2 groups of at least 2 samples.
        strata: each sample's stratum, or None for one ANOVA over all samples.
        welch: Welch's ANOVA instead of the classic (equal-variance) one.
        bootstrap: stratified-bootstrap resamples for the intervals (0: no intervals).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling (None: fresh randomness each call).

    Returns:
        A :class:`TraitAnova`: ``f_statistic``, ``p_value``, ``log10_p_value``, ``df_between``, ``df_within``,
        ``eta_squared``, ``welch``, and ``group_means``, ``group_means_ci`` and ``group_counts`` by
        group; with ``strata`` each of them by stratum, plus ``strata`` (the strata, sorted).

    Raises:
        ValueError: bad input, named; the stratum is named where a stratum's groups are too small.
    """
    values, labels = float_column(scores, "predictions"), _labels(groups, "references")
    _same_length(predictions=values, references=labels)
    if strata is None:
        return _anova_one(values, labels, welch, bootstrap, confidence, seed)
    strata_labels = _labels(strata, "strata")
    _same_length(predictions=values, strata=strata_labels)
    per = {s: _anova_one(values[strata_labels == s], labels[strata_labels == s], welch, bootstrap, confidence, seed,
                         where=f" in stratum {s!r}")
           for s in sorted(set(strata_labels.tolist()))}
    return _by_stratum(per, strata=list(per))


def _anova_one(values, labels, welch, bootstrap, confidence, seed, where: str = "") -> TraitAnova:
    try:
        g = _GroupMeans(values, labels, bootstrap, seed)
        result = stats.one_way_anova([values[g.codes == i] for i in range(len(g.names))], welch=welch)
    except ValueError as exc:
        raise ValueError(f"{exc}{where}") from None
    return TraitAnova(
        f_statistic=result.f_statistic, p_value=result.p_value, log10_p_value=result.log10_p_value,
        df_between=result.df_between, df_within=result.df_within, eta_squared=result.eta_squared, welch=welch,
        group_means=g.as_dict(g.means), group_means_ci=g.cis(confidence), group_counts=g.as_dict(g.counts),
    )


# ---- word_influence ---------------------------------------------------------------------
def parse_variant(variant: Any, num_words: int, row: int) -> tuple[int, ...]:
    """``"0,2"`` / ``(0, 2)`` / ``""`` -> sorted word positions; positions must be < num_words. A
    single whole number is one position; a missing variant (None, NaN) is an error naming its row."""
    if stats.is_missing(variant):
        raise ValueError(f"variants row {row} is missing (None or NaN): give the replaced word positions, "
                         '"" (or ()) for the original prompt')
    if isinstance(variant, (int, float, np.integer, np.floating)):
        variant = (variant,)  # one position, checked as every position is
    elif not isinstance(variant, (str, Iterable)):
        raise ValueError(f"variants row {row}: {stats.shown(variant)} is not a list of word positions "
                         '(e.g. "0,2" or (0, 2))')
    if isinstance(variant, str):
        parts = [p.strip() for p in variant.split(",") if p.strip()]
        try:
            positions = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"variants row {row}: {variant!r} is not a comma-separated list of word positions") \
                from None
    else:
        positions = []
        for p in variant:  # 0.7 is not a position (int() would quietly make it 0)
            if isinstance(p, bool) or not isinstance(p, (int, np.integer, float)) or float(p) != int(p):
                raise ValueError(f"variants row {row}: {p!r} is not a word position (a whole number)")
            positions.append(int(p))
    for p in positions:
        if not 0 <= p < num_words:
            raise ValueError(f"variants row {row}: word position {p} is outside 0..{num_words - 1} "
                             f"(num_words={num_words})")
    if len(set(positions)) != len(positions):
        raise ValueError(f"variants row {row}: {variant!r} repeats a word position")
    return tuple(sorted(positions))


@dataclasses.dataclass(frozen=True, eq=False)
class WordInfluence(MeasureResult):
    """The result of :func:`word_influence`."""

    influence: list[float]
    """Level-``k`` influence of each word, in word order."""
    k: int
    ci_half_width: float
    """Hoeffding half-width of ``influence`` (the least-sampled variant level ``k`` uses)."""
    levels: dict[str, list[float]]
    """Influence of each word by level ("1", "2", ...), for every level whose variants are all present."""
    levels_ci_half_width: dict[str, float]
    shapley: list[float] | None
    """Mean of the n levels (the Shapley value of v(S) = -P(S)); None unless every level is complete."""
    shares: dict[str, float]
    """Share of images classified as the target group, by variant ("0,2": words 0 and 2 replaced)."""
    images_per_variant: dict[str, int]
    min_images_per_variant: int
    """Images of the least-sampled variant level ``k`` uses."""
    num_words: int
    confidence: float
    """The Hoeffding bound's level."""


@_checked
def word_influence(predictions: npt.ArrayLike, variants: Sequence[Any] | npt.NDArray[Any], num_words: int,
                   k: int = 1, confidence: float = CONFIDENCE) -> WordInfluence:
    """k-level word influence on the share of images classified as the target group.

    P(R) = share of images with prediction 1 when the words in R are replaced. Influence of
    word i at level k = mean over R within the other words, |R| = k - 1, of P(R) - P(R + {i}).
    Level 1 is P(original) - P(i replaced). ``levels`` holds every level whose variants are
    all present; ``shapley`` is the mean of the n levels when all are present (it equals the
    Shapley value of the game v(S) = -P(S)). ``ci_half_width``: Hoeffding half-width at
    ``confidence`` for the least-sampled variant that level k uses.

    Args:
        predictions: one 0/1 per generated image (1 = classified as the target group).
        variants: each image's prompt variant: the replaced word positions, as ``"0,2"``,
            ``(0, 2)`` or ``""`` / ``()`` for the original prompt.
        num_words: the number of words in the prompt that may be replaced.
        k: the level reported as ``influence``, in 1..num_words.
        confidence: the Hoeffding bound's level, in (0, 1).

    Returns:
        A :class:`WordInfluence`: ``influence`` (one value per word) and ``k``; ``ci_half_width``; ``levels`` and
        ``levels_ci_half_width`` by level (as text); ``shapley`` (None unless every level is
        complete); ``shares`` and ``images_per_variant`` by variant; ``min_images_per_variant``;
        ``num_words``; ``confidence``.

    Raises:
        ValueError: bad input, named: a prediction other than 0/1, a malformed variant, or a
            variant level k needs that has no images.
    """
    if k > num_words:
        raise ValueError(f"k must be in 1..num_words={num_words}, got {k}")
    if isinstance(variants, (str, bytes, Mapping)) or not isinstance(variants, Iterable):
        raise ValueError(f"variants must be a sequence with one variant per row, got {type(variants).__name__}")
    values = float_column(predictions, "predictions")
    if not np.isin(values, (0.0, 1.0)).all():
        row = int(np.flatnonzero(~np.isin(values, (0.0, 1.0)))[0])
        raise ValueError(f"predictions must be 0 or 1 (1 = classified as the target group); row {row} is {values[row]}")
    _same_length(predictions=values, variants=list(variants))
    keys = [parse_variant(v, num_words, row) for row, v in enumerate(variants)]
    sums: dict[tuple[int, ...], float] = {}
    counts: dict[tuple[int, ...], int] = {}
    for key, value in zip(keys, values):
        sums[key] = sums.get(key, 0.0) + value
        counts[key] = counts.get(key, 0) + 1
    shares = {key: sums[key] / counts[key] for key in sums}

    def level(level_k: int) -> tuple[list[float], int] | None:
        result, least = [], math.inf
        for word in range(num_words):
            others = [w for w in range(num_words) if w != word]
            terms = []
            for subset in itertools.combinations(others, level_k - 1):
                with_word = tuple(sorted(subset + (word,)))
                if subset not in shares or with_word not in shares:
                    return None
                terms.append(shares[subset] - shares[with_word])
                least = min(least, counts[subset], counts[with_word])
            result.append(float(np.mean(terms)))
        return result, int(least)

    levels = {j: level(j) for j in range(1, num_words + 1)}
    if levels[k] is None:
        missing = _missing_variant(shares, num_words, k)
        raise ValueError(f"level {k} needs variant {_describe(missing)}, which has no images")
    complete = {j: v for j, v in levels.items() if v is not None}
    shapley = ([float(np.mean([complete[j][0][w] for j in complete])) for w in range(num_words)]
               if len(complete) == num_words else None)
    influence, least = complete[k]
    return WordInfluence(
        influence=influence, k=k, ci_half_width=stats.hoeffding_half_width(least, 1 - confidence),
        levels={str(j): v[0] for j, v in complete.items()},
        levels_ci_half_width={str(j): stats.hoeffding_half_width(v[1], 1 - confidence) for j, v in complete.items()},
        shapley=shapley, shares={",".join(map(str, key)): float(s) for key, s in sorted(shares.items())},
        images_per_variant={",".join(map(str, key)): int(c) for key, c in sorted(counts.items())},
        min_images_per_variant=least, num_words=num_words, confidence=confidence,
    )


def _missing_variant(shares: Mapping, num_words: int, k: int) -> tuple[int, ...]:
    for word in range(num_words):
        others = [w for w in range(num_words) if w != word]
        for subset in itertools.combinations(others, k - 1):
            for key in (subset, tuple(sorted(subset + (word,)))):
                if key not in shares:
                    return key
    raise AssertionError("unreachable: level was incomplete")


def _describe(variant: tuple[int, ...]) -> str:
    if not variant:
        return '"" (the original prompt)'
    return f'"{",".join(map(str, variant))}" (words {list(variant)} replaced)'


# ---- cross_lingual_gap, group_rate_gap ---------------------------------------------------
def _correct(predictions: Labels, references: Labels) -> npt.NDArray[np.float64]:
    # answers, not groups: a blank or odd answer is a wrong one, scored as such (the label rule's blank and
    # read-alike checks are for the texts that name groups)
    preds = stats.label_column(predictions, "predictions", groups=False)
    refs = stats.label_column(references, "references", groups=False)
    _same_length(predictions=preds, references=refs)
    return (preds == refs).astype(float)


@dataclasses.dataclass(frozen=True, eq=False)
class CrossLingualGap(MeasureResult):
    """The result of :func:`cross_lingual_gap`."""

    accuracy: dict[str, float]
    """Share of correct samples, by language."""
    accuracy_ci: dict[str, list[float] | None] | None
    counts: dict[str, int]
    """Samples by language."""
    gap: float
    """The best language's accuracy minus the worst's."""
    gap_ci: list[float] | None
    best_language: str
    worst_language: str
    pivot: str | None
    gap_to_pivot: dict[str, float] | None
    """acc(pivot) - acc(language), by language; None without a pivot."""
    gap_to_pivot_ci: dict[str, list[float] | None] | None
    confidence: float
    """The intervals' level."""


@_checked
def cross_lingual_gap(predictions: Labels, references: Labels, languages: Labels,
                      pivot: Any = None, bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                      seed: int | None = SEED) -> CrossLingualGap:
    """Accuracy per language; gap = max - min accuracy; ``gap_to_pivot`` = acc(pivot) - acc(l).

    Args:
        predictions: each sample's predicted label (a sample is correct where it equals the reference).
        references: each sample's true label.
        languages: each sample's language; at least 2 languages.
        pivot: a language to compare every language with, or None.
        bootstrap: stratified-bootstrap resamples for the intervals (0: no intervals).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling (None: fresh randomness each call).

    Returns:
        A :class:`CrossLingualGap`: ``accuracy``, ``accuracy_ci`` and ``counts`` by language; ``gap`` and ``gap_ci``;
        ``best_language`` and ``worst_language``; ``pivot``, ``gap_to_pivot`` and
        ``gap_to_pivot_ci`` (by language; None without a pivot); ``confidence``.

    Raises:
        ValueError: bad input, named, fewer than 2 languages, or a pivot that does not occur.
    """
    correct = _correct(predictions, references)
    langs = _labels(languages, "languages")
    _same_length(predictions=correct, languages=langs)
    g = _GroupMeans(correct, langs, bootstrap, seed, what="language")
    if len(g.names) < 2:  # as group_score_gap refuses one group: one language has no gap
        raise ValueError(f"a cross-lingual gap needs at least 2 languages; languages hold only {g.names}")
    to_pivot: dict[str, Any] = {"pivot": None, "gap_to_pivot": None, "gap_to_pivot_ci": None}
    if pivot is not None:
        pivot = stats.label_text(pivot)
        _require_present(pivot, g.names, "pivot language", "languages")
        p = g.index(pivot)
        ci = g.interval(lambda m: m[:, [p]] - m, confidence)
        to_pivot = {"pivot": pivot, "gap_to_pivot": g.as_dict(g.means[p] - g.means),
                    "gap_to_pivot_ci": None if ci is None else {n: _interval(ci, i) for i, n in enumerate(g.names)}}
    return CrossLingualGap(
        accuracy=g.as_dict(g.means), accuracy_ci=g.cis(confidence), counts=g.as_dict(g.counts),
        gap=float(g.means.max() - g.means.min()),
        gap_ci=_interval(g.interval(lambda m: m.max(axis=1) - m.min(axis=1), confidence)),
        best_language=g.names[int(np.argmax(g.means))], worst_language=g.names[int(np.argmin(g.means))],
        **to_pivot, confidence=confidence,
    )


@dataclasses.dataclass(frozen=True, eq=False)
class GroupRateGap(MeasureResult):
    """The result of :func:`group_rate_gap`. With languages every field but ``languages`` holds a dict by language."""

    accuracy: dict[str, float] | dict[str, dict[str, float]]
    """Share of correct samples, by group."""
    accuracy_ci: dict[str, list[float] | None] | None | dict[str, dict[str, list[float] | None] | None]
    counts: dict[str, int] | dict[str, dict[str, int]]
    """Samples by group."""
    gap: float | dict[str, float]
    """The largest pairwise gap: the highest group's accuracy minus the lowest's."""
    gap_pair: list[str] | dict[str, list[str]]
    """The highest and the lowest group."""
    gap_ci: list[float] | None | dict[str, list[float] | None]
    confidence: float | dict[str, float]
    """The intervals' level."""
    languages: list[str] | None = dataclasses.field(default=None, metadata=_ABSENT_WHEN_NONE)
    """The languages, sorted; None (and no key) without languages."""


@_checked
def group_rate_gap(predictions: Labels, references: Labels, groups: Labels, languages: Labels | None = None,
                   bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                   seed: int | None = SEED) -> GroupRateGap:
    """Accuracy per group and the largest pairwise gap |acc(g1) - acc(g2)|, per language if given.

    Without languages every key holds one value; with languages every key holds a dict by language.

    Args:
        predictions: each sample's predicted label (a sample is correct where it equals the reference).
        references: each sample's true label.
        groups: each sample's group; at least 2 groups (in each language).
        languages: each sample's language, or None for one result over all samples.
        bootstrap: stratified-bootstrap resamples for the intervals (0: no intervals).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling (None: fresh randomness each call).

    Returns:
        A :class:`GroupRateGap`: ``accuracy``, ``accuracy_ci`` and ``counts`` by group; ``gap``,
        ``gap_pair`` (the highest and lowest group) and ``gap_ci``; ``confidence``; with
        ``languages`` each of them by language, plus ``languages`` (sorted).

    Raises:
        ValueError: bad input, named (the language too, where one language's groups are too small).
    """
    correct = _correct(predictions, references)
    group_labels = _labels(groups, "groups")
    _same_length(predictions=correct, groups=group_labels)
    if languages is None:
        return _rate_gap_one(correct, group_labels, bootstrap, confidence, seed)
    langs = _labels(languages, "languages")
    _same_length(predictions=correct, languages=langs)
    per = {lang: _rate_gap_one(correct[langs == lang], group_labels[langs == lang], bootstrap, confidence, seed,
                               where=f" in language {lang!r}")
           for lang in sorted(set(langs.tolist()))}
    return _by_stratum(per, languages=list(per))


def _rate_gap_one(correct, labels, bootstrap, confidence, seed, where: str = "") -> GroupRateGap:
    try:
        g = _GroupMeans(correct, labels, bootstrap, seed)
    except ValueError as exc:
        raise ValueError(f"{exc}{where}") from None
    if len(g.names) < 2:
        raise ValueError(f"a gap needs at least 2 groups; groups{where} hold only {g.names}")
    top, bottom = int(np.argmax(g.means)), int(np.argmin(g.means))
    return GroupRateGap(
        accuracy=g.as_dict(g.means), accuracy_ci=g.cis(confidence), counts=g.as_dict(g.counts),
        gap=float(g.means[top] - g.means[bottom]), gap_pair=[g.names[top], g.names[bottom]],
        gap_ci=_interval(g.interval(lambda m: m.max(axis=1) - m.min(axis=1), confidence)),
        confidence=confidence,
    )


# ---- individual_fairness ----------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class IndividualFairness(MeasureResult):
    """The result of :func:`individual_fairness`."""

    epsilon: float
    """The largest ratio |cos(v, t_a) - cos(v, t_b)| / ||t_a - t_b||."""
    epsilon_row: int
    """The row (image) of ``epsilon``."""
    mean_ratio: float
    median_ratio: float
    bound_holds: bool
    """Whether every ratio is within its Dunkl-Williams bound 2 / (||t_a|| + ||t_b||), up to the tolerance."""
    num_bound_violations: int
    max_bound: float
    """The largest bound over the pairs."""
    num_pairs: int
    """Pairs with a ratio (identical text features left out)."""
    num_identical_pairs: int
    """Pairs left out: their two captions have identical text features."""
    ratios: list[float]
    similarity_gaps: list[float]
    """|cos(v, t_a) - cos(v, t_b)| per pair."""
    text_distances: list[float]
    """||t_a - t_b|| per pair."""


@_checked
def individual_fairness(image_embeddings: npt.ArrayLike, text_embeddings_a: npt.ArrayLike,
                        text_embeddings_b: npt.ArrayLike, tolerance: float = 1e-6) -> IndividualFairness:
    """Individual fairness across two languages' captions of the same images.

    ratio = |cos(v, t_a) - cos(v, t_b)| / ||t_a - t_b|| on unnormalised text features;
    epsilon = max ratio. Every sample must satisfy ratio <= 2 / (||t_a|| + ||t_b||) (the
    Dunkl-Williams inequality); ``bound_holds`` checks it up to ``tolerance``. Pairs with
    identical text features (distance 0) have no ratio: they are left out and counted.

    Args:
        image_embeddings: (N, D) image features v, one row per image.
        text_embeddings_a: (N, D) unnormalised text features of each image's caption in language a.
        text_embeddings_b: (N, D) the same captions' features in language b.
        tolerance: relative and absolute slack of the bound check (float rounding).

    Returns:
        An :class:`IndividualFairness`: ``epsilon`` and ``epsilon_row``; ``mean_ratio`` and
        ``median_ratio``; ``bound_holds``, ``num_bound_violations`` and ``max_bound``; ``num_pairs``
        and ``num_identical_pairs``; per pair (identical ones left out) ``ratios``,
        ``similarity_gaps`` and ``text_distances``.

    Raises:
        ValueError: bad input, named: shapes, non-finite values, a zero vector, or every pair identical.
    """
    images = float_column(image_embeddings, "image_embeddings", ndim=2)
    a = float_column(text_embeddings_a, "text_embeddings_a", ndim=2)
    b = float_column(text_embeddings_b, "text_embeddings_b", ndim=2)
    _same_length(image_embeddings=images, text_embeddings_a=a, text_embeddings_b=b)
    if not images.shape[1] == a.shape[1] == b.shape[1]:
        raise ValueError(f"embedding sizes differ: images {images.shape[1]}, a {a.shape[1]}, b {b.shape[1]}")
    norm_v, norm_a, norm_b = (np.linalg.norm(x, axis=1) for x in (images, a, b))
    distance = np.linalg.norm(a - b, axis=1)
    norms = {"image_embeddings": norm_v, "text_embeddings_a": norm_a, "text_embeddings_b": norm_b}
    for name, values in {**norms, "text_embeddings_a - text_embeddings_b": distance}.items():
        if not np.isfinite(values).all():  # an overflowed norm would make every cosine 0, and epsilon 0
            row = int(np.flatnonzero(~np.isfinite(values))[0])
            raise stats.not_finite(f"the norm of {name} at row {row}", values[row])
    for name, values in norms.items():
        if (values == 0).any():
            raise ValueError(f"{name} has a zero vector at row {int(np.flatnonzero(values == 0)[0])}: "
                             "its cosine is undefined")
    v = images / norm_v[:, None]
    gap = np.abs((v * a).sum(axis=1) / norm_a - (v * b).sum(axis=1) / norm_b)
    bound = 2.0 / (norm_a + norm_b)
    usable = distance > 0
    if not usable.any():
        raise ValueError("every caption pair has identical text features: no ratio is defined")
    ratio = gap[usable] / distance[usable]
    violations = ratio > bound[usable] * (1 + tolerance) + tolerance
    rows = np.flatnonzero(usable)
    return IndividualFairness(
        epsilon=float(ratio.max()), epsilon_row=int(rows[int(np.argmax(ratio))]),
        mean_ratio=float(ratio.mean()), median_ratio=float(np.median(ratio)),
        bound_holds=bool(not violations.any()), num_bound_violations=int(violations.sum()),
        max_bound=float(bound.max()), num_pairs=int(usable.sum()), num_identical_pairs=int((~usable).sum()),
        ratios=ratio.tolist(), similarity_gaps=gap[usable].tolist(), text_distances=distance[usable].tolist(),
    )


# ---- retention --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class Retention(MeasureResult):
    """The result of :func:`retention`."""

    text_score: float
    """Share of images whose best-scoring name is their own."""
    image_score: float
    """Share of names (with at least one image) whose best-scoring image is one of theirs."""
    text_score_ci: list[float] | None
    image_score_ci: list[float] | None
    num_images: int
    num_names: int
    """Names with at least one image."""
    num_candidates: int
    """Candidate names each image was scored against."""
    confidence: float
    """The intervals' level."""
    ci_note: str | None = dataclasses.field(default=None, metadata=_ABSENT_WHEN_NONE)
    """Why the intervals are None though resampling was asked for; None (and no key) otherwise."""


@_checked
def retention(scores: npt.ArrayLike, references: npt.ArrayLike, bootstrap: int = BOOTSTRAP,
              confidence: float = CONFIDENCE, seed: int | None = SEED) -> Retention:
    """Name retention of public figures.

    ``scores[i, j]``: similarity of image i to candidate name j; ``references[i]``: the index
    of image i's own name. Text score = share of images whose best-scoring name is theirs;
    image score = share of names (those with at least one image) whose best-scoring image is
    one of theirs. Ties go to the lowest index. CIs resample images within each name; where every
    name has a single image there is nothing to resample, so the CIs are None and ``ci_note`` says why.

    Args:
        scores: (images, candidate names) similarities.
        references: each image's own name, as an integer column index of ``scores``.
        bootstrap: stratified-bootstrap resamples for the intervals (0: no intervals).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling (None: fresh randomness each call).

    Returns:
        A :class:`Retention`: ``text_score`` and ``image_score`` with their ``_ci``; ``num_images``, ``num_names`` and
        ``num_candidates``; ``confidence``; ``ci_note`` where the intervals are None for want of
        variation.

    Raises:
        ValueError: bad input, named: shapes, non-finite scores, a reference that is not an index.
    """
    matrix = float_column(scores, "predictions", ndim=2)
    refs = whole_column(references, "references")  # name indices: 1.0 is 1, 0.7 an error (never name 0)
    _same_length(predictions=matrix, references=refs)
    outside = np.flatnonzero((refs < 0) | (refs >= matrix.shape[1]))
    if outside.size:
        raise ValueError(f"references row {int(outside[0])} is {int(refs[outside[0]])}, outside the "
                         f"{matrix.shape[1]} candidate names")
    names = np.unique(refs)

    def scores_of(rows: np.ndarray) -> tuple[float, float]:
        text = float((matrix[rows].argmax(axis=1) == refs[rows]).mean())
        image = float((refs[rows][matrix[rows][:, names].argmax(axis=0)] == names).mean())
        return text, image

    text_score, image_score = scores_of(np.arange(refs.size))
    text_ci = image_ci = note = None
    if bootstrap and np.bincount(refs).max() < 2:  # one image per name: every resample is the data itself
        note = ("no interval: every name has one image, so resampling images within names cannot vary "
                "(a zero-width interval would claim a certainty the data does not have)")
    elif bootstrap:
        samples = stats.bootstrap_samples(lambda idx: np.array([scores_of(rows) for rows in idx]), refs, bootstrap,
                                          seed)
        ci = stats.percentile_interval(samples, confidence)
        text_ci, image_ci = _interval(ci, 0), _interval(ci, 1)
    return Retention(
        text_score=text_score, image_score=image_score, text_score_ci=text_ci, image_score_ci=image_ci,
        num_images=int(refs.size), num_names=int(names.size), num_candidates=int(matrix.shape[1]),
        confidence=confidence, ci_note=note,
    )


# ---- ranking_skew -----------------------------------------------------------------------
SMOOTHING = 0.5
"""The count ``ranking_skew`` adds to every group under ``zero_count="smoothed"`` (Jeffreys)."""


@dataclasses.dataclass(frozen=True, eq=False)
class RankingSkew(MeasureResult):
    """The result of :func:`ranking_skew`: means over queries, then each query's values."""

    max_skew: float = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    """MaxSkew@k: the largest Skew@k(a) = ln(p_k(a) / p*(a)) over groups (-inf: see ``smoothing``)."""
    min_skew: float = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    """MinSkew@k: the smallest Skew@k over groups."""
    ndkl: float
    """Normalised discounted KL divergence of the top-k prefixes from the target (0: every prefix matches)."""
    bias_at_k: float | None
    """Bias@k = (n_a - n_b) / k for ``bias_pair``; None without a pair."""
    skew: dict[str, float] = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    """Skew@k by group."""
    max_skew_per_query: list[float] = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    min_skew_per_query: list[float] = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    ndkl_per_query: list[float]
    bias_at_k_per_query: list[float] | None
    target: dict[str, float]
    """The target distribution p*, by group."""
    bias_pair: list[str] | None
    """The two groups (a, b) of Bias@k."""
    k: int
    num_queries: int
    zero_count: str
    """How a group absent from the top k counts for Skew: "smoothed" or "dvl" (see :func:`ranking_skew`)."""
    smoothing: float | None
    """The count added to every group for Skew under "smoothed" (0: an absent group has Skew -inf); None under "dvl"."""
    max_skew_ci: list[float] | None = dataclasses.field(default=None, metadata=_MAY_BE_UNDEFINED)
    """Stratified-bootstrap interval of ``max_skew`` (items resampled within their group, re-ranked); None without
    a bootstrap. So are the intervals below."""
    min_skew_ci: list[float] | None = dataclasses.field(default=None, metadata=_MAY_BE_UNDEFINED)
    ndkl_ci: list[float] | None = None
    bias_at_k_ci: list[float] | None = None
    skew_ci: dict[str, list[float]] | None = dataclasses.field(default=None, metadata=_MAY_BE_UNDEFINED)
    confidence: float = CONFIDENCE


@_checked
def ranking_skew(scores: npt.ArrayLike, item_groups: Labels, k: int, target: str | Mapping[str, float] = "uniform",
                 smoothing: float | None = None, bias_pair: Sequence[Any] | None = None,
                 zero_count: str = "smoothed", bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                 seed: int | None = SEED) -> RankingSkew:
    """Skew of the top-k items a text query retrieves, averaged over queries.

    ``scores``: (queries, items) or one query's (items,). Items are ranked by score, ties by
    index. Target p*: "uniform" over the groups present, "dataset" (each group's share of all
    items), or a dict of shares. Skew@k(a) = ln(p_k(a) / p*(a)); MaxSkew@k and MinSkew@k are its
    max and min over groups. Zero counts: a group absent from the top k would have Skew -inf.
    ``zero_count="smoothed"`` (the default) smooths every count by ``smoothing`` (default 0.5,
    Jeffreys): p_k(a) = (n_a + s) / (k + s |A|); ``smoothing=0`` reports -inf.
    ``zero_count="dvl"`` is oxai/debias-vision-lang's convention (``measuring_bias.py``,
    ``compute_skew_metrics``): p_k(a) = n_a / k and an absent group counts as 1 / k (DVL's maximum
    starts at 0, which never binds: these shares sum to at least 1, so some group's Skew is >= 0);
    MinSkew, which DVL does not compute, uses the same counts. NDKL = (1/Z) sum_{i<=k}
    KL(p_i || p*) / log2(i + 1) with Z = sum 1/log2(i + 1), on raw counts and 0 ln 0 = 0, so it
    is >= 0 and 0 when every prefix matches the target. Bias@k = (n_a - n_b) / k for two groups
    (``bias_pair``, default the two groups in sorted order), in [-1, 1]. Intervals: a stratified
    bootstrap over items (each item drawn within its group, so the target is unchanged), every
    query re-ranked in every resample (:func:`resampled_top_k`), percentile intervals of the
    means over queries.

    Args:
        scores: (queries, items) or (items,) retrieval scores.
        item_groups: each item's group.
        k: how many top items each query retrieves.
        target: the target distribution p*: "uniform", "dataset" or a dict of shares by group.
        smoothing: the count added to every group for Skew under "smoothed" (None: 0.5; 0: none).
        bias_pair: the two groups (a, b) of Bias@k; None: the two groups present, if there are two.
        zero_count: "smoothed" or "dvl": how a group absent from the top k counts for Skew.
        bootstrap: resamples of the items for the intervals (0: none).
        confidence: the intervals' level.
        seed: seeds the resampling.

    Returns:
        A :class:`RankingSkew`; means over queries: ``max_skew``, ``min_skew``, ``ndkl``, ``bias_at_k`` (None without a
        pair) and ``skew`` by group; per query: ``max_skew_per_query``, ``min_skew_per_query``,
        ``ndkl_per_query``, ``bias_at_k_per_query``; ``target`` (p* by group), ``bias_pair``,
        ``k``, ``num_queries``, ``zero_count``, ``smoothing``; intervals ``max_skew_ci``,
        ``min_skew_ci``, ``ndkl_ci``, ``bias_at_k_ci``, ``skew_ci`` (None with ``bootstrap=0``) and ``confidence``.

    Raises:
        ValueError: bad input, named: shapes, k outside 1..items, a bad target or bias_pair, a
            ``smoothing`` with ``zero_count="dvl"`` (which does not smooth).
    """
    if zero_count == "dvl" and smoothing is not None:
        raise ValueError(f"smoothing={smoothing!r} applies to zero_count='smoothed'; zero_count='dvl' counts a group "
                         "absent from the top k as 1/k: leave smoothing out")
    smoothing = SMOOTHING if smoothing is None and zero_count == "smoothed" else smoothing
    matrix = float_column(scores, "predictions", ndim=(1, 2))
    matrix = matrix[None, :] if matrix.ndim == 1 else matrix
    groups = _labels(item_groups, "item_groups")
    if groups.size != matrix.shape[1]:
        raise ValueError(f"item_groups has {groups.size} entries but each query scores {matrix.shape[1]} items")
    if k > groups.size:
        raise ValueError(f"k={k} is larger than the number of items ({groups.size})")
    names, codes = stats.encode_groups(groups)
    if len(names) < 2:  # one group has every share: its skew is 0 whatever the ranking
        raise ValueError(f"a skew needs at least 2 groups; item_groups hold only {names}")
    problem = top_k_groups_problem(k, len(names))
    if problem:
        raise ValueError(f"k={k}: {problem}")
    p_star = _target(target, names, codes)
    # the best m of each query, m a little above k where intervals re-rank resamples: one ranking for both
    prefix = top_k_order(matrix, prefix_length(k, groups.size) if bootstrap else k)
    ranked = codes[prefix[:, :k]]  # (Q, k)
    prefix_counts = np.stack([np.cumsum(ranked == g, axis=1) for g in range(len(names))], axis=2)  # (Q, k, G)
    counts_k = prefix_counts[:, -1, :].astype(float)
    with np.errstate(divide="ignore"):
        skew = np.log(top_k_shares(counts_k, k, zero_count, smoothing) / p_star)
    max_skew = skew.max(axis=1)
    positions = np.arange(1, k + 1)
    shares = prefix_counts / positions[None, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(shares > 0, shares * np.log(shares / p_star), 0.0).sum(axis=2)
    discount = 1 / np.log2(positions + 1)
    ndkl = (kl * discount).sum(axis=1) / discount.sum()
    bias = None
    pair = ([stats.label_text(g) for g in bias_pair] if bias_pair is not None  # two different groups (OPTIONS)
            else (names if len(names) == 2 else None))
    if pair is not None:
        for group in pair:
            _require_present(group, names, "bias_pair group", "item_groups")
        bias = (counts_k[:, names.index(pair[0])] - counts_k[:, names.index(pair[1])]) / k
    intervals = {}
    if bootstrap:
        pair_codes = None if pair is None else (names.index(pair[0]), names.index(pair[1]))
        points = {"max": max_skew.mean(), "min": skew.min(axis=1).mean(), "ndkl": ndkl.mean(),
                  "bias": None if bias is None else bias.mean(), "skew": skew.mean(axis=0)}
        intervals = _ranking_skew_intervals(matrix, codes, k, p_star, zero_count, smoothing, pair_codes, bootstrap,
                                            confidence, seed, prefix, points)
        intervals["skew_ci"] = {n: bounds for n, bounds in zip(names, intervals["skew_ci"])}
    return RankingSkew(
        max_skew=float(max_skew.mean()), min_skew=float(skew.min(axis=1).mean()),
        ndkl=float(ndkl.mean()), bias_at_k=None if bias is None else float(bias.mean()),
        skew={n: float(skew[:, i].mean()) for i, n in enumerate(names)},
        max_skew_per_query=max_skew.tolist(), min_skew_per_query=skew.min(axis=1).tolist(),
        ndkl_per_query=ndkl.tolist(), bias_at_k_per_query=None if bias is None else bias.tolist(),
        target={n: float(p) for n, p in zip(names, p_star)}, bias_pair=pair, k=int(k),
        num_queries=int(matrix.shape[0]), zero_count=zero_count, smoothing=smoothing, confidence=confidence,
        **intervals,
    )


def _interval_with_infinities(samples: npt.NDArray[np.float64], confidence: float) -> npt.NDArray[np.float64]:
    """A percentile interval where a bound next to a Skew of -inf (``smoothing=0``, a group absent from the
    top k) is -inf: numpy's interpolation would make it nan (-inf + inf * t)."""
    bounds = stats.percentile_interval(samples, confidence)
    return np.where(np.isnan(bounds) & np.isneginf(samples).any(axis=0), -np.inf, bounds)


def top_k_interval(samples: npt.NDArray[np.float64], point: npt.ArrayLike,
                   confidence: float) -> npt.NDArray[np.float64]:
    """The interval of a top-k statistic (Skew, MaxSkew, NDKL, Bias@k) from its resampled values.

    A resample holds some items twice or more, and their copies sit side by side in its ranking, as
    no fresh draw of items ever puts two images: the first ranks, which NDKL weighs most, become
    more one-sided, and the resampled values lie above the point value (NDKL's 95 % percentile
    interval held the value a fresh draw gives on average in about 55 % of simulated draws). The
    resamples' spread is kept, their shift is not: the percentile interval is moved by the point
    value minus the resamples' mean (where both are finite; a Skew of -inf keeps its percentiles)."""
    bounds = _interval_with_infinities(samples, confidence)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a column of nan resamples (an undefined statistic)
        shift = np.asarray(point, dtype=float) - np.nanmean(samples, axis=0)
        return np.where(np.isfinite(shift), bounds + shift, bounds)


def _ranking_skew_intervals(matrix: npt.NDArray[np.float64], codes: npt.NDArray[np.int64], k: int,
                            p_star: npt.NDArray[np.float64], zero_count: str, smoothing: float | None,
                            pair: tuple[int, int] | None, bootstrap: int, confidence: float,
                            seed: int | None, order: npt.NDArray[np.int64],
                            points: dict[str, Any]) -> dict[str, Any]:
    """:func:`ranking_skew`'s intervals (:func:`top_k_interval`): each statistic's mean over queries in
    every resample (``order``: each query's best :func:`prefix_length` items), placed at ``points``."""
    columns: dict[str, list[npt.NDArray[np.float64]]] = {"max": [], "min": [], "ndkl": [], "bias": [], "skew": []}
    for indices in stats.stratified_resamples(codes, bootstrap, seed):
        counts, ndkl = resampled_top_k(matrix, codes, k, indices, [p_star], order)
        with np.errstate(divide="ignore"):
            skew = np.log(top_k_shares(counts, k, zero_count, smoothing) / p_star)  # (b, queries, G)
        columns["max"].append(skew.max(axis=2).mean(axis=1))
        columns["min"].append(skew.min(axis=2).mean(axis=1))
        columns["skew"].append(skew.mean(axis=1))
        columns["ndkl"].append(ndkl[:, :, 0].mean(axis=1))
        if pair is not None:
            columns["bias"].append(((counts[:, :, pair[0]] - counts[:, :, pair[1]]) / k).mean(axis=1))
    bounds = {name: top_k_interval(np.concatenate(values), points[name], confidence)
              for name, values in columns.items() if values}
    return {"max_skew_ci": bounds["max"].tolist(), "min_skew_ci": bounds["min"].tolist(),
            "ndkl_ci": bounds["ndkl"].tolist(), "bias_at_k_ci": bounds["bias"].tolist() if "bias" in bounds else None,
            "skew_ci": bounds["skew"].T.tolist()}


def top_k_groups_problem(k: int, groups: int) -> str | None:
    """Why a top ``k`` cannot measure a skew over ``groups`` groups, or None: below the number of groups,
    some group is absent from every top k whatever the model, and its share is the zero-count convention's
    alone (under "dvl" at k = 1 every group's share is 1, so every group has the same skew for any model)."""
    if k < groups:
        return (f"below the {groups} groups: a top {k} cannot hold every group, so an absent group's share is the "
                f"zero-count rule's, whatever the model ranks; use k of {groups} or more")
    return None


def top_k_shares(counts: npt.NDArray[np.float64], k: int, zero_count: str,
                 smoothing: float | None) -> npt.NDArray[np.float64]:
    """p_k(a) of each group from its count in the top k, by the zero-count convention (see :func:`ranking_skew`)."""
    if zero_count == "dvl":
        return np.where(counts > 0, counts, 1.0) / k
    assert smoothing is not None  # set by ranking_skew under "smoothed"
    return (counts + smoothing) / (k + smoothing * counts.shape[-1])


# resampled_top_k's blocks: (resamples, queries, m) arrays of about this many entries
_TOP_K_BLOCK_ENTRIES = 2**18


def prefix_length(k: int, items: int) -> int:
    """How many of each query's best items a resample's top k is looked for among: a resample holds
    each item about once (multiplicities with mean 1 and variance about 1), so the best m items hold
    about m copies give or take sqrt(m); 8 standard deviations and 64 spare make a shortfall (then
    handled by ranking all items) practically never happen."""
    return min(items, k + int(8 * math.sqrt(k)) + 64)


def top_k_order(scores: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.int64]:
    """Each row's k highest-scoring columns, best first; equal scores by column index (as a stable
    sort of every column would rank them). ``argpartition`` finds the k, then only those are sorted,
    so a query over N items costs O(N + k log k), not a sort of all N."""
    if k >= scores.shape[1]:
        return np.argsort(-scores, axis=1, kind="stable")[:, :k]
    kth = np.partition(-scores, k - 1, axis=1)[:, k - 1:k]  # the k-th best score of each row, negated
    # every column better than the k-th, then the ties at the k-th by index, up to k in all
    better = -scores < kth
    tied = -scores == kth
    take = better | (tied & (np.cumsum(tied, axis=1) <= k - better.sum(axis=1, keepdims=True)))
    rows, columns = np.nonzero(take)
    chosen = columns.reshape(scores.shape[0], k)
    picked = np.take_along_axis(scores, chosen, axis=1)
    return np.take_along_axis(chosen, np.argsort(-picked, axis=1, kind="stable"), axis=1)


def resampled_top_k(scores: npt.NDArray[np.float64], codes: npt.NDArray[np.int64], k: int,
                    indices: npt.NDArray[np.int64], p_stars: Sequence[npt.NDArray[np.float64]],
                    order: npt.NDArray[np.int64] | None = None,
                    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The top k of every query in resamples of the items, re-ranked: group counts and NDKL.

    A resample (a row of ``indices``, as :func:`vlfair.stats.stratified_resamples` draws them)
    holds item j c_j times; its top k is the original ranking walked with those multiplicities
    (copies of one item are adjacent; equal scores keep index order, as :func:`ranking_skew`
    ranks them). So the items are ranked once (``order``: the best m of each query, m a little
    above k, found by :func:`top_k_order`), and a resample costs a gather and a cumulative sum
    over m, not a gather and a ranking of all N items; resamples go in blocks (arrays of a few MB),
    every step for the whole block at once. Should a resample need more than m (multiplicities far
    below 1 in a query's best items), the items are ranked afresh over all N.

    NDKL over every prefix without a (k, groups) table: KL(p_i || q) = (1/i) sum_g c_ig ln c_ig
    - ln i - (1/i) sum_g c_ig ln q_g, and each term grows by one item's group at each rank, so
    sum_i w_i KL_i (w_i = 1 / log2(i + 1)) is sum_r x_r U_r with U_r = sum_{i>=r} w_i / i and x_r
    item r's increment, minus sum_i w_i ln i.

    Args:
        scores: (queries, N) scores.
        codes: (N,) each item's group code, 0..G-1.
        k: the top list's size, 1..N.
        indices: (b, N) item indices of b resamples.
        p_stars: target distributions (each (G,), every share > 0) for NDKL.
        order: ``top_k_order(scores, m)`` for some m >= k, to reuse over blocks (default: computed).

    Returns:
        ``counts`` (b, queries, G): each group's count in each resample's top k; ``ndkl`` (b,
        queries, len(p_stars)): NDKL@k against each target.
    """
    queries, items = scores.shape
    groups = int(codes.max()) + 1
    if order is None or order.shape[1] < min(items, k):
        order = top_k_order(scores, prefix_length(k, items))
    ranked = codes[order]  # (queries, m)
    positions = np.arange(1, k + 1)
    weights = 1 / np.log2(positions + 1)
    tail = np.cumsum((weights / positions)[::-1])[::-1]  # U_r
    constant = float((weights * np.log(positions)).sum())
    c_ln_c = np.zeros(k + 1)
    c_ln_c[1:] = np.arange(1, k + 1) * np.log(np.arange(1, k + 1))
    log_targets = np.stack([np.log(p_star) for p_star in p_stars], axis=1)  # (G, targets)
    prefix_tail = np.concatenate([[0.0], np.cumsum(tail)])  # sum of U over ranks 1..r
    # each query's items grouped by group (rank order kept within one), and where each one's group begins
    # (flat positions in a (queries, m) list of lists)
    within = np.argsort(ranked, axis=1, kind="stable")
    in_order = np.take_along_axis(ranked, within, axis=1)
    begins = np.concatenate([np.ones((queries, 1), dtype=bool), in_order[:, 1:] != in_order[:, :-1]], axis=1)
    rows_at = (np.arange(queries) * ranked.shape[1])[:, None]
    by_group = (within + rows_at).ravel()
    group_starts = (np.maximum.accumulate(np.where(begins, np.arange(ranked.shape[1]), 0), axis=1) + rows_at).ravel()
    flat_groups = ranked.ravel()
    counts = np.empty((len(indices), queries, groups))
    ndkl = np.empty((len(indices), queries, len(p_stars)))
    # resamples in blocks: every (queries, m) step for a whole block at once, a block's arrays a few MB
    block = max(1, _TOP_K_BLOCK_ENTRIES // max(queries * ranked.shape[1], 1))
    for start in range(0, len(indices), block):
        rows = indices[start:start + block]
        held = np.bincount((rows + (np.arange(len(rows)) * items)[:, None]).ravel(),
                           minlength=len(rows) * items).reshape(len(rows), items)
        copies = held[:, order]  # (b, queries, m): copies of each ranked item in each resample
        before = np.cumsum(copies, axis=2) - copies
        if (before[..., -1] + copies[..., -1] < k).any():  # a resample needs more than the best m: all N
            if order.shape[1] == items:
                raise ValueError(f"k={k} is larger than a resample's {int(copies.sum(axis=2).min())} items")
            return resampled_top_k(scores, codes, k, indices, p_stars, top_k_order(scores, items))
        taken = np.clip(k - before, 0, copies)  # copies of each ranked item inside the top k
        # the items inside a top k, flat, in each top list's rank order: their list (resample, query),
        # group, copies and the ranks before them
        inside = np.flatnonzero(taken > 0)
        lists = inside // ranked.shape[1]
        group = flat_groups[inside % flat_groups.size]
        held_copies, first = taken.ravel()[inside], before.ravel()[inside]
        counts[start:start + len(rows)] = np.bincount(lists * groups + group, weights=held_copies,
                                                      minlength=len(rows) * queries * groups
                                                      ).reshape(len(rows), queries, groups)
        # the copies of each item's group ranked before it in its list: a running count over each query's
        # items taken group by group (in rank order within a group), less the count where its group begins
        grouped = taken.reshape(len(rows), -1)[:, by_group].reshape(taken.shape)
        running = np.cumsum(grouped, axis=2) - grouped
        running = (running.reshape(len(rows), -1) - running.reshape(len(rows), -1)[:, group_starts])
        earlier = np.empty_like(running)
        earlier[:, by_group] = running
        seen = earlier.ravel()[inside]
        # NDKL: a copy at rank r that is its group's c-th adds U_r (c ln c - (c-1) ln (c-1)) - U_r ln q_g
        own = np.zeros(len(rows) * queries)
        for copy in range(1, int(held_copies.max(initial=0)) + 1):
            more = np.flatnonzero(held_copies >= copy)
            count = seen[more] + copy
            own += np.bincount(lists[more], weights=tail[first[more] + copy - 1] * (c_ln_c[count] - c_ln_c[count - 1]),
                               minlength=own.size)
        spans = prefix_tail[first + held_copies] - prefix_tail[first]  # U over the ranks each item's copies take
        targeted = np.stack([np.bincount(lists, weights=spans * log_targets[group, t], minlength=own.size)
                             for t in range(log_targets.shape[1])], axis=1)
        ndkl[start:start + len(rows)] = (own[:, None] - targeted - constant).reshape(len(rows), queries, -1)
    return counts, ndkl / weights.sum()


def _target(target: str | Mapping[str, float], names: list[str],
            codes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    if isinstance(target, str):
        if target == "uniform":
            return np.full(len(names), 1 / len(names))
        if target == "dataset":
            return np.bincount(codes, minlength=len(names)) / codes.size
        raise ValueError(f"target must be 'uniform', 'dataset' or a dict of group shares, got {target!r}")
    shares = {}
    for group, share in target.items():
        if not _finite_at_least_0(share):
            raise ValueError(f"target share of group {group!r} must be a number >= 0, got {stats.shown(share)}")
        shares[stats.label_text(group)] = float(share)
    missing = [n for n in names if n not in shares]
    if missing:
        raise ValueError(f"target gives no share for groups {missing}")
    p = np.array([shares[n] for n in names])
    if (p <= 0).any() or not math.isclose(sum(shares.values()), 1.0, abs_tol=1e-6):
        raise ValueError(f"target shares must be positive for every group present and sum to 1, got {shares}")
    return p


# ---- bias_difference: two models on the same rows ----------------------------------------
# What a verdict says (``*_verdict``); "less biased" = closer to the measure's neutral value.
A_LESS_BIASED = "A less biased"
B_LESS_BIASED = "B less biased"
NEITHER_CLOSER = "differ; neither closer to no bias"
NO_DIFFERENCE = "no difference detected"


@dataclasses.dataclass(frozen=True, eq=False)
class BiasDifference(MeasureResult):
    """The result of :func:`bias_difference`: model A (``predictions1``) against model B
    (``predictions2``) on the same rows."""

    ratio_a: float
    """A's bias ratio, mean(protected) / mean(reference), as :func:`bias_ratio` computes it."""
    ratio_b: float
    ratio_difference: float
    """A's ratio minus B's."""
    ratio_difference_ci: list[float] | None = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    """Its paired bootstrap interval (both models on the same resampled rows); None without resampling (a
    bound is infinite where resamples of a reference mean reach 0)."""
    ratio_distance_difference: float
    """|A's ratio - 1| - |B's ratio - 1|: negative where A is closer to the neutral 1."""
    ratio_distance_difference_ci: list[float] | None = dataclasses.field(metadata=_MAY_BE_UNDEFINED)
    ratio_p_value: float | None
    """Paired permutation (sign-flip) test of "the two models' ratios do not differ"; None without permutations."""
    ratio_log10_p_value: float | None
    ratio_p_value_method: str | None
    """"exact", "monte_carlo" or "sequential_monte_carlo"."""
    ratio_verdict: str | None
    """"A less biased", "B less biased", "differ; neither closer to no bias" or "no difference detected"
    (:func:`bias_difference` gives the rule); None without resampling."""
    max_gap_a: float
    """A's largest minus smallest group mean, as :func:`group_score_gap` computes it (neutral 0)."""
    max_gap_b: float
    max_gap_difference: float
    """A's gap minus B's (also the difference of their distances to the neutral 0)."""
    max_gap_difference_ci: list[float] | None
    max_gap_p_value: float | None
    max_gap_log10_p_value: float | None
    max_gap_p_value_method: str | None
    max_gap_verdict: str | None
    protected_group: str
    reference_group: str
    group_counts: dict[str, int]
    confidence: float
    """The intervals' level; a verdict's p-value must also be below 1 - confidence."""


@_checked
def bias_difference(scores_a: npt.ArrayLike, scores_b: npt.ArrayLike, groups: Labels, protected_group: Any,
                    reference_group: Any, bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                    seed: int | None = SEED, n_permutations: int = PERMUTATIONS) -> BiasDifference:
    """Two models scored on the same rows: the difference of their bias ratios and of their largest
    group gaps, each with a paired bootstrap interval and a paired permutation test.

    The bootstrap draws rows within each group (stratified, as the measures' own intervals) and
    evaluates both models on the same drawn rows (:func:`vlfair.stats.stratified_resamples`, so it
    is :func:`vlfair.stats.paired_bootstrap` vectorised). The test swaps the two models' scores in
    random sets of rows (:func:`vlfair.stats.sign_flip_tests`: exact over all 2^N swaps when they
    number at most ``n_permutations``).

    The verdict of each measure: "no difference detected" unless the interval of A - B excludes 0
    and (when computed) the p-value is below 1 - ``confidence``; then "A less biased" where the
    interval of |A - neutral| - |B - neutral| lies below 0, "B less biased" where it lies above 0,
    else "differ; neither closer to no bias" (e.g. ratios 0.9 and 1.08). Neutral: 1 for the ratio,
    0 for the gap. None without an interval (``bootstrap=0``).

    Args:
        scores_a: model A's score >= 0 per row (the module's ``predictions1``).
        scores_b: model B's score >= 0 per row, the same rows in the same order (``predictions2``).
        groups: each row's group label (``references``).
        protected_group: the group whose mean is the ratio's numerator.
        reference_group: the group whose mean is the ratio's denominator.
        bootstrap: paired stratified resamples for the intervals (0: no intervals, no verdicts).
        confidence: the intervals' level, in (0, 1).
        seed: seeds the resampling and the swaps (None: fresh randomness each call).
        n_permutations: swaps for the p-values (0: no test).

    Returns:
        A :class:`BiasDifference`: ``ratio_*`` and ``max_gap_*`` (A, B, difference with its
        interval, p-value, its log10 and method, verdict), the ratio's distance difference,
        ``protected_group``, ``reference_group``, ``group_counts`` and ``confidence``.

    Raises:
        ValueError: bad input, named by its column or option: lengths that differ, a negative or
            non-finite score, a missing label, an absent group or one with fewer than 2 rows, a model
            whose reference group's mean is 0.
    """
    a, b = float_column(scores_a, "predictions1"), float_column(scores_b, "predictions2")
    labels = _labels(groups, "references")
    _same_length(predictions1=a, predictions2=b, references=labels)
    for option, value in (("protected_group", protected_group), ("reference_group", reference_group)):
        if value is None:
            raise ValueError(f"{option} is required: name the group to put in the "
                             + ("numerator" if option == "protected_group" else "denominator"))
    protected, reference = stats.label_text(protected_group), stats.label_text(reference_group)
    names, codes = stats.encode_groups(labels)
    _require_present(protected, names, "protected_group")
    _require_present(reference, names, "reference_group")
    if protected == reference:
        raise ValueError(f"protected_group and reference_group are the same group ({protected!r})")
    counts = np.bincount(codes, minlength=len(names))
    _require_sizes(names, counts)
    p_i, r_i, num_groups = names.index(protected), names.index(reference), len(names)
    means = []
    for column, values in (("predictions1", a), ("predictions2", b)):
        negative = np.flatnonzero(values < 0)
        if negative.size:  # as bias_ratio: a ratio of means needs scores that cannot cancel
            raise ValueError(f"{column} must be >= 0 for a ratio of means (e.g. CLIP scores, probabilities); row "
                             f"{int(negative[0])} is {values[negative[0]]:g}")
        means.append(stats.group_means(values, codes, num_groups))
        if means[-1][r_i] == 0:
            raise ValueError(f"{column}: the mean score of reference_group {reference!r} is 0: the ratio is undefined")
    neutral = np.array([1.0, 0.0])  # of the ratio and the gap

    def measured(group_means: np.ndarray) -> np.ndarray:
        """(b, G) group means -> (b, 2) the bias ratio and the largest gap (the same arithmetic as
        bias_ratio and group_score_gap, so the point values equal theirs)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.stack([group_means[:, p_i] / group_means[:, r_i],
                             group_means.max(axis=1) - group_means.min(axis=1)], axis=1)

    point_a, point_b = measured(means[0][None])[0], measured(means[1][None])[0]
    difference_ci = distance_ci = None
    if bootstrap:
        # every slot of a stratified resample keeps its group, so the codes hold for the resampled rows
        blocks = [(measured(stats.group_means(a[rows], codes, num_groups)),
                   measured(stats.group_means(b[rows], codes, num_groups)))
                  for rows in stats.stratified_resamples(codes, bootstrap, seed)]
        samples_a = np.concatenate([block[0] for block in blocks])
        samples_b = np.concatenate([block[1] for block in blocks])
        with np.errstate(invalid="ignore"):  # inf - inf where a resample's reference mean is 0
            difference_ci = stats.percentile_interval(samples_a - samples_b, confidence)
            distance_ci = stats.percentile_interval(np.abs(samples_a - neutral) - np.abs(samples_b - neutral),
                                                    confidence)
    tests: list[stats.PermutationResult | None] = [None, None]
    if n_permutations:
        # swapping row i moves A's mean of its group by (b_i - a_i) / n_g and B's by the opposite:
        # a block of swaps is one matrix product, never a pass over the rows per relabelling
        moves = np.eye(num_groups)[codes] * ((b - a) / counts[codes])[:, None]

        def swapped(swaps: np.ndarray) -> np.ndarray:
            shift = swaps.astype(float) @ moves
            return measured(means[0] + shift) - measured(means[1] - shift)

        tests = list(stats.sign_flip_tests(swapped, a.size, 2, n_permutations, seed))
    fields: dict[str, Any] = {}
    for j, key in enumerate(("ratio", "max_gap")):
        interval = _interval(difference_ci, j)
        p = _p_fields(tests[j])
        fields |= {f"{key}_a": float(point_a[j]), f"{key}_b": float(point_b[j]),
                   f"{key}_difference": float(point_a[j] - point_b[j]), f"{key}_difference_ci": interval}
        if key == "ratio":
            fields |= {"ratio_distance_difference": float(abs(point_a[j] - 1.0) - abs(point_b[j] - 1.0)),
                       "ratio_distance_difference_ci": _interval(distance_ci, j)}
        fields |= {f"{key}_{name}": value for name, value in p.items()}
        fields[f"{key}_verdict"] = _verdict(float(point_a[j] - point_b[j]), interval, _interval(distance_ci, j),
                                            p["p_value"], 1 - confidence, 1.0 if key == "ratio" else 0.0)
    return BiasDifference(**fields, protected_group=protected, reference_group=reference,
                          group_counts={n: int(c) for n, c in zip(names, counts)}, confidence=confidence)


def _verdict(difference: float, difference_ci: list[float] | None, distance_ci: list[float] | None,
             p_value: float | None, alpha: float, neutral: float) -> str | None:
    """Which model is less biased, by ``stats.paired_verdict`` (the rule of ``vlfair compare``);
    None without an interval (bootstrap=0)."""
    found = stats.paired_verdict(difference, difference_ci, distance_ci, p_value, alpha, neutral)
    return {"not_assessed": None, "no_difference": NO_DIFFERENCE, "a_less_biased": A_LESS_BIASED,
            "b_less_biased": B_LESS_BIASED, "differ": NEITHER_CLOSER}[found]


MEASURES = {
    "bias_ratio": bias_ratio, "group_score_gap": group_score_gap, "trait_anova": trait_anova,
    "word_influence": word_influence, "cross_lingual_gap": cross_lingual_gap, "group_rate_gap": group_rate_gap,
    "individual_fairness": individual_fairness, "retention": retention, "ranking_skew": ranking_skew,
    "bias_difference": bias_difference,
}
