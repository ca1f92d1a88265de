"""Typed probe settings: every key's type, range, allowed values and a prompt's placeholders.

Each probe declares a pydantic model (a subclass of :class:`ProbeSettings`); its YAML holds the
study's values and is validated against it, and so are ``--set KEY=VALUE`` and Python
``settings=`` overrides, before any work. The statistics options every probe shares (bootstrap,
confidence, seed, permutations) are declared once here, with the defaults of ``vlfair.measures``.
An error names the key, the value given and what is allowed (:func:`describe_errors`).
"""

from __future__ import annotations

import copy
import string
import types
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Annotated, Any, Literal, NoReturn, TypeVar, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, Strict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError


def _python_number(value: Any) -> Any:
    """A numpy scalar as the Python number it holds: np.int64(100) from a script is 100 (np.bool_
    stays a bool, which a number setting refuses)."""
    return value.item() if type(value).__module__ == "numpy" and hasattr(value, "item") else value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or blank")
    return value


# Scalars are strict: YAML's `true` is not the integer 1, "3" is not 3 (a typo must not pass as a number);
# a float setting still takes an integer (temperature: 1), and any number setting a numpy scalar, but
# never inf or nan (no setting means "infinitely"); text is a str (123, true and bytes are not text).
Int = Annotated[int, Strict(), BeforeValidator(_python_number)]
Count = Annotated[int, Strict(), Field(ge=1), BeforeValidator(_python_number)]
NonNegative = Annotated[int, Strict(), Field(ge=0), BeforeValidator(_python_number)]
Float = Annotated[float, Strict(), Field(allow_inf_nan=False), BeforeValidator(_python_number)]
Flag = Annotated[bool, Strict(), BeforeValidator(_python_number)]
Text = Annotated[str, Strict()]
Name = Annotated[str, Strict(), AfterValidator(_not_blank)]  # a word, label, class or language: not blank

from vlfair.defaults import (  # noqa: E402  (shared with vlfair.measures)
    BOOTSTRAP,
    CONFIDENCE,
    CORRECTION,
    CORRECTIONS,
    MAX_BOOTSTRAP,
    MAX_PERMUTATIONS,
    PERMUTATIONS,
    SEED,
)
from vlfair.probes.errors import ProbeError  # noqa: E402


def placeholders(*fields: str) -> Callable[[str], str]:
    """A check that a prompt template's placeholders are exactly ``fields`` ("" for a positional
    ``{}``), each plain (``{trait}``: no conversion ``!r``, format spec ``:.3`` or ``.attribute``, which
    would change or break every prompt); literal braces are doubled (``{{`` ``}}``):
    ``Annotated[str, AfterValidator(placeholders("trait"))]``."""
    wanted = set(fields)
    example = " and ".join(_shown(f) for f in fields)

    def check(value: str) -> str:
        if not isinstance(value, str):  # a plugin's plain `str` field lets bytes through
            raise ValueError(f"must be a text (a template with {example}), not {type(value).__name__}")
        try:
            parsed = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(value)
                      if name is not None]
        except ValueError as exc:  # an unmatched brace
            raise ValueError(f"is not a valid template ({exc}; write a literal brace as {{{{ or }}}})") from None
        found = {name for name, _, _ in parsed}
        if found != wanted:
            shown = ", ".join(_shown(f) for f in sorted(found)) or "none"
            raise ValueError(f"must hold the placeholder {example} and no other (it has {shown})")
        positional = sum(name == "" for name, _, _ in parsed)
        if positional > 1:  # one value fills it: a second {} would fail every prompt
            raise ValueError(f"must hold the placeholder {{}} once (it has {positional}): one value fills it")
        decorated = [f"{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}"
                     for name, spec, conversion in parsed if spec or conversion]
        if decorated:
            raise ValueError(f"must hold the plain placeholder {example}: {', '.join(decorated)} has a conversion or "
                             "format spec, which would change or break every prompt")
        return value

    return check


def _shown(field: str) -> str:
    return "{}" if field == "" else "{" + field + "}"


def same_text(text: str) -> str:
    """What a text is to a tokenizer that lower-cases and collapses spaces (CLIP's): two texts with
    the same key are one prompt, whatever a setting calls them."""
    return " ".join(text.casefold().split())


T = TypeVar("T")


def distinct(key: Callable[[Any], Hashable] = lambda value: value,
             what: str = "") -> Callable[[Sequence[T]], Sequence[T]]:
    """A check that a list names each item once (two items with one ``key`` are the same: e.g.
    ``same_text``): a repeat would measure one thing twice and report it as two."""

    def check(values: Sequence[T]) -> Sequence[T]:
        seen: dict[Hashable, Any] = {}
        for value in values:
            known = key(value)
            if known in seen:
                first = seen[known]
                raise ValueError(f"names {value!r} twice: give each once" if first == value else
                                 f"names {first!r} and {value!r}, the same item ({what}): give each once")
            seen[known] = value
        return values

    return check


def refuse(record: str, location: tuple[str | int, ...], value: Any, message: str) -> NoReturn:
    """Fail a check of several keys (a model validator) as an error of the key at ``location``, so
    that the message names that key and its value (:func:`describe_errors`)."""
    raise ValidationError.from_exception_data(record, [InitErrorDetails(
        type=PydanticCustomError("vlfair_settings", message), loc=location, input=value)])


class Settings(BaseModel):
    """A settings record: unknown keys are an error."""

    model_config = ConfigDict(extra="forbid")


class ProbeSettings(Settings):
    """What every probe's settings hold: the YAML's ``version`` (bump it when a change alters
    results) and ``notes`` (copied into the report)."""

    version: Int = Field(description="the settings' version: part of results.json, bumped when a change alters results")
    notes: list[Text] = Field(default_factory=list, description="sentences copied into the report")


class Confidence(BaseModel):
    confidence: Float = Field(CONFIDENCE, gt=0, lt=1,
                              description="the confidence level of every interval, a number in (0, 1)")
    seed: NonNegative | None = Field(
        SEED, description="the random seed of every resampling and sample, a whole number >= 0 or null")
    correction: Literal[CORRECTIONS] = Field(  # type: ignore[valid-type]
        CORRECTION, description="the multiple-testing correction that decides 'detected' over a run's tests: holm "
                                "(the family-wise error rate), bh (Benjamini-Hochberg's false discovery rate) or none")


class Permutations(BaseModel):
    n_permutations: NonNegative = Field(
        PERMUTATIONS, le=MAX_PERMUTATIONS,
        description=f"relabellings of each permutation test, a whole number from 0 to {MAX_PERMUTATIONS:,}; 0 turns "
                    "p-values off")


class Bootstrap(Confidence, Permutations):
    """Intervals by the bootstrap and tests by relabelling: a statistic bounded at its neutral value (a gap) is
    judged by its test against no difference (DESIGN "Verdicts")."""

    bootstrap: NonNegative = Field(
        BOOTSTRAP, le=MAX_BOOTSTRAP,
        description=f"bootstrap resamples of every interval, a whole number from 0 to {MAX_BOOTSTRAP:,}; 0 turns "
                    "intervals off")

    @property
    def resampling(self) -> dict[str, Any]:
        """The options every vlfair.measures function with intervals takes."""
        return {"bootstrap": self.bootstrap, "confidence": self.confidence, "seed": self.seed}

    @property
    def evaluation(self) -> dict[str, Any]:
        """The options a probe's declared metrics are evaluated with (:func:`vlfair.probes.declared.evaluate`):
        the intervals' and the tests'."""
        return {**self.resampling, "n_permutations": self.n_permutations}


SHARED = ("bootstrap", "confidence", "seed", "n_permutations", "correction")
GROUPING = ("groups", "labels", "age_bins")  # one's own groups (vlfair.probes.grouping), where a probe reads labels


def keys(model: type[BaseModel]) -> list[str]:
    """The keys a user may set, the probe's own first, then the groups' and the shared statistics options
    (``version`` and ``notes`` belong to the YAML)."""
    own = [key for key in model.model_fields if key not in ("version", "notes", *GROUPING, *SHARED)]
    return own + [key for key in (*GROUPING, *SHARED) if key in model.model_fields]


def _record_at(model: type[BaseModel], location: list[str]) -> type[BaseModel] | None:
    """The settings record (a model) that ``location`` (keys, dict keys, list indices) points into,
    or None where the path leads to no record."""
    current: Any = model
    for part in location:
        if isinstance(current, type) and issubclass(current, BaseModel) and part in current.model_fields:
            current = current.model_fields[part].annotation
        else:  # a dict key or a list index: the container's values
            current = _values_of(current)
        current = _record_in(current) or current
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _values_of(annotation: Any) -> Any:
    args = [a for a in get_args(annotation) if a is not type(None)]
    return args[-1] if args else None  # list[X] -> X, dict[K, X] -> X


def _record_in(annotation: Any) -> type[BaseModel] | None:
    """The model inside Annotated / Optional (``GradCam | None``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Annotated, Union, types.UnionType):
        for arg in get_args(annotation):
            found = _record_in(arg)
            if found is not None:
                return found
    return None


def describe_errors(model: type[BaseModel], error: ValidationError, source: Callable[[str], str]) -> str:
    """One sentence per problem: where the key was set (``source(path)``: "setting", a flag such as
    "--per-cell", "professions.yaml"), the key, the value given, what is wrong and what the key takes."""
    problems = []
    for item in error.errors():
        location = [str(part) for part in item["loc"]]
        top = location[0] if location else ""
        path = ".".join(location)
        where = source(path)
        if item["type"] == "extra_forbidden":
            record = _record_at(model, location[:-1])
            takes = f"; keys: {list(record.model_fields)}" if record is not None else ""
            problems.append(f"{where} {path!r} is not a settings key of this probe; keys: {keys(model)}"
                            if len(location) == 1 else f"{where} {path}: not a key of {'.'.join(location[:-1])}{takes}")
            continue
        message = item["msg"].removeprefix("Value error, ") + _quoting_hint(item)
        field = model.model_fields.get(top)
        described = field is not None and field.description and len(location) == 1
        takes = f" ({top}: {field.description})" if described and field is not None else ""
        # a check of the whole record (no key) would otherwise print every setting as its value
        given = "missing" if item["type"] == "missing" else f"= {item['input']!r}" if location else ""
        named = f"{where} {given} (setting {path})" if where.startswith("-") else f"{where} {path} {given}"
        problems.append(f"{named}: {message}{takes}")
    return "; ".join(problems)


def _quoting_hint(item: Any) -> str:
    """``--set prompt={trait}`` is YAML's mapping {trait: null}, ``--set prompt=[x]`` its list: say to
    quote a text that starts with a brace or a bracket."""
    if item["type"] == "string_type" and isinstance(item["input"], (dict, list)):
        key = ".".join(str(part) for part in item["loc"]) or "KEY"
        return (" (--set reads a value as YAML, where {...} is a mapping and [...] a list: quote a text that "
                f"starts with one, e.g. --set \"{key}='{{x}} ...'\")")
    return ""


def read_override(item: str) -> tuple[str, Any]:
    """One ``--set KEY=VALUE`` as (key, value), the value read as YAML; a value that is not YAML is
    an error naming the key and the quoting that makes it a text."""
    import yaml

    key, sep, text = item.partition("=")
    key = key.strip()  # "--set ' seed=1'": the key is "seed"
    if not sep or not key:
        raise ValueError(f"--set takes KEY=VALUE, got {item!r}")
    if key == "version":  # it says which settings made a run's numbers: set by vlfair, never by a user
        raise ValueError("--set version: the probe's settings version is written by vlfair (it names the settings "
                         "that made the numbers), not a setting")
    if text.startswith("@"):
        return key, _read_value_file(key, text[1:])
    try:
        return key, yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ValueError(f"--set {key}: {text!r} is not a YAML value ({problem}); a text with braces, brackets or "
                         f"a colon is quoted, e.g. --set \"{key}='{text}'\"") from None


def _read_value_file(key: str, path: str) -> Any:
    """``--set KEY=@FILE``: a list kept in a file (a long concept or prompt list). A ``.txt`` file holds
    one item per line (blank lines and surrounding spaces dropped); any other file is one YAML value."""
    import yaml

    from vlfair.yamlfile import YAMLFileError, read_text

    try:
        text = read_text(path)  # as a person wrote it: no byte-order mark, any line ends; a regular file only
    except YAMLFileError as exc:
        raise ValueError(f"--set {key}=@{exc}") from None  # the reason, after the file's name
    if path.endswith(".txt"):
        return [line.strip() for line in text.splitlines() if line.strip()]
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"--set {key}=@{path}: the file is not YAML ({getattr(exc, 'problem', None) or exc}); "
                         "a .txt file holds one item per line") from None


__all__ = ["BOOTSTRAP", "CONFIDENCE", "PERMUTATIONS", "SEED", "Bootstrap", "Confidence", "Count", "Flag", "Float",
           "Int", "Name", "NonNegative", "Permutations", "ProbeSettings", "Settings", "Text", "describe_errors",
           "distinct", "keys", "placeholders", "read_override", "refuse", "same_text"]


# ---- overrides: the YAML with what a user set (settings=, --set, a probe's own flags) -------------------
def settings_with(model: type[ProbeSettings], defaults: dict[str, Any], overrides: Any,
                  sources: Mapping[str, str] | None, probe: str, yaml_path: str) -> ProbeSettings:
    """The probe's YAML (``defaults``) with ``overrides``, checked against ``model``: an error names where a
    key was set (``sources``: key or ``record.field`` -> "--per-cell"; else "setting"), the key, the value
    and what it takes."""
    try:
        model.model_validate(defaults)
    except ValidationError as exc:
        raise ProbeError(f"{probe}: {describe_errors(model, exc, lambda path: yaml_path)}") from None
    nested = _nested(_as_mapping(overrides, probe, model), defaults, probe, model)
    try:
        return model.model_validate({**defaults, **nested})
    except ValidationError as exc:
        named = dict(sources or {})

        def source(path: str) -> str:  # the flag that set this field or its record, else --set / settings=
            return named.get(path) or named.get(path.partition(".")[0]) or "setting"

        raise ProbeError(f"{probe}: {describe_errors(model, exc, source)}") from None


def _as_mapping(overrides: Any, probe: str, model: type[BaseModel]) -> dict[str, Any]:
    """``settings=`` / ``--set`` as a dict: a mapping whose keys are texts (else a sentence, not dict()'s
    TypeError)."""
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        raise ProbeError(f"{probe}: settings are a mapping of keys to values (e.g. {{'seed': 1}}), not "
                         f"{type(overrides).__name__} {overrides!r}")
    not_text = [key for key in overrides if not isinstance(key, str)]
    if not_text:
        raise ProbeError(f"{probe}: settings keys are texts, not {not_text!r}; keys: {keys(model)}")
    return dict(overrides)


def _nested(overrides: dict[str, Any], defaults: dict[str, Any], probe: str, model: type[BaseModel]
            ) -> dict[str, Any]:
    """``record.field`` keys (``--set generative.mode=generate``) as the record with that field changed (the
    record as given or as the YAML holds it)."""
    flat = {key: value for key, value in overrides.items() if "." not in key}
    for key, value in overrides.items():
        if "." not in key:
            continue
        path = key.split(".")
        if path[0] not in flat and path[0] not in defaults:
            raise ProbeError(f"{probe}: setting {key!r}: {path[0]!r} is not a settings key of this probe; "
                             f"keys: {keys(model)}")
        record: Any = flat.setdefault(path[0], copy.deepcopy(defaults.get(path[0])))
        for depth, part in enumerate(path[1:], start=1):
            if not isinstance(record, dict):
                raise ProbeError(f"{probe}: setting {key!r}: {'.'.join(path[:depth])!r} is not a record of "
                                 f"fields; keys: {keys(model)}")
            record = record.setdefault(part, {}) if depth < len(path) - 1 else record
        record[path[-1]] = value
    return flat


def overrides_from(options: Sequence[Any], values: Mapping[str, Any], defaults: Callable[[], dict[str, Any]]
                   ) -> tuple[dict[str, Any], dict[str, str]]:
    """(settings, key -> flag) from the parsed values of a probe's ``options`` (its flags; None and False: not
    given); a nested field is merged into the YAML's record (``defaults()``, read only where one is)."""
    settings: dict[str, Any] = {}
    sources: dict[str, str] = {}
    yaml = defaults() if any("." in option.setting for option in options) else {}
    for option in options:
        value = values.get(option.dest)
        if value is None or value is False or value == []:
            continue
        value = option.convert(value) if option.convert else value
        key, _, field = option.setting.partition(".")
        if field:
            record = settings.setdefault(key, dict(yaml.get(key) or {}))
            record[field] = value
        else:
            settings[key] = value
        sources[option.setting] = option.flag
    return settings, sources
