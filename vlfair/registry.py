"""One generic registry for everything vlfair lets a package add: probes, scorers, datasets, model
backends and measures are each a :class:`Registry` of their type (as lm-evaluation-harness's
``Registry[T]``).

An entry is registered as a value (``add``), or lazily as ``"module:attribute"`` text (``lazy``),
imported when first read, so that a registry names what it holds without importing its libraries.
An installed package adds entries through the registry's entry-point group, loaded on first read; a
broken plugin is named in a warning and left out, never taking the others with it. Every entry is
type-checked (``kind``, and the registry's own ``check``) when it is registered or first loaded, so a
wrong value is refused naming it, not found later as an AttributeError; another entry under a taken
name is refused (the same class defined again by a module imported twice, or the class a lazy entry
names, is the same entry). A registry reads as a mapping (``registry[name]``, ``in``, ``get(name,
default)``, ``items()``); an unknown name is an :class:`UnknownEntry` listing the known ones.

Where the built-in entries are named matters: a module that a registered module imports must not
name it back (an import circle through importlib), so each built-in table lives above the modules
it names (tests/test_code_quality.py counts every such string as an import). ``copy()`` gives a test
a registry of its own.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterator
from importlib import metadata
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_UNSET: Any = object()  # no default given


class UnknownEntry(KeyError, ValueError):
    """A name no entry of a registry has; its message lists the known names (a KeyError for a mapping's
    readers, a ValueError for the callers that refuse a user's name)."""

    def __str__(self) -> str:
        return str(self.args[0])


def resolve(text: Any) -> Any:
    """The attribute ``"package.module:attribute"`` names (``attribute`` may be dotted); anything but text is
    itself (a function given as the function, not as its name)."""
    if not isinstance(text, str):
        return text
    module, sep, attribute = text.partition(":")
    if not sep or not module or not attribute:
        raise ValueError(f"{text!r} does not name an attribute as 'module:attribute'")
    found: Any = importlib.import_module(module)
    for part in attribute.split("."):
        found = getattr(found, part)
    return found


class Registry(Generic[T]):
    """Entries of one type by name, in the order registered.

    Args:
        what: what an entry is, in words ("probe", "dataset"): every message names it.
        kind: the type every entry is an instance of (``subclass=True``: a subclass of).
        entry_points: the entry-point group installed packages add entries through (None: none).
        name_of: an entry's name where it carries one (a probe's ``name``): :meth:`add` then takes the
            entry alone, and an entry point's value is registered under its own name.
        check: more checks of an entry (raises TypeError or ValueError naming what is wrong).
        subclass: entries are classes, subclasses of ``kind``.
    """

    def __init__(self, what: str, kind: type | tuple[type, ...] | None = None, *, entry_points: str | None = None,
                 name_of: Callable[[T], str] | None = None, check: Callable[[T], None] | None = None,
                 subclass: bool = False):
        self.what, self.kind, self.entry_points = what, kind, entry_points
        self._name_of, self._check, self._subclass = name_of, check, subclass
        self._entries: dict[str, T | _Lazy] = {}  # name -> the entry, or the text naming it until first read
        self._plugins_read = entry_points is None
        self.failed: dict[str, str] = {}  # a plugin that did not load -> why (said once, in a warning)

    # ---- registering -------------------------------------------------------------------------
    def add(self, entry: T, name: str | None = None, *, replace: bool = False) -> T:
        """Register ``entry`` under ``name`` (default: its own name); another entry of that name is an
        error unless ``replace`` (the same entry again, or one class defined again by a module imported
        twice, is not another). Returns the entry, so that a class decorator is ``registry.add``."""
        self._validate(entry)
        name = self._named(entry, name)
        known = self._entries.get(name)
        if isinstance(known, _Lazy) and not replace and _path(entry) is None:
            known = resolve(known.target)  # a value (a spec) has no path: it is known by what the text names
        if known is not None and not replace and not _same(known, entry):
            raise ValueError(f"two {self.what}s are named {name!r}: {_shown(known)} and {_shown(entry)}")
        self._entries[name] = entry
        return entry

    def lazy(self, name: str, target: str) -> None:
        """Register the entry ``target`` names (``"module:attribute"``) under ``name``, imported when first
        read (its module may have registered it already: the same entry, not another)."""
        if not isinstance(name, str) or not name or target.count(":") != 1:
            raise ValueError(f"a lazy {self.what} is a name and 'module:attribute', not {name!r}, {target!r}")
        known = self._entries.get(name)
        if known is not None and not _same(known, _Lazy(target)) and not _names(target, known):
            raise ValueError(f"two {self.what}s are named {name!r}: {_shown(known)} and {target}")
        if known is None:
            self._entries[name] = _Lazy(target)

    def __setitem__(self, name: str, entry: T) -> None:
        """``registry[name] = entry``: register it in place of any entry of that name."""
        self.add(entry, name, replace=True)

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def copy(self) -> Registry[T]:
        """An independent registry with these entries, reading its entry points again on first read (a
        test's own registry, restored by putting this one back)."""
        other: Registry[T] = Registry(self.what, self.kind, entry_points=self.entry_points, name_of=self._name_of,
                                      check=self._check, subclass=self._subclass)
        other._entries = dict(self._entries)
        return other

    def _named(self, entry: T, name: str | None) -> str:
        if name is None:
            if self._name_of is None:
                raise TypeError(f"a {self.what} is registered under a name: add(entry, name)")
            name = self._name_of(entry)
        if not isinstance(name, str) or not name:
            raise TypeError(f"{_shown(entry)} declares no name: a {self.what} is named by a non-empty string")
        return name

    def _validate(self, entry: Any) -> None:
        if self.kind is not None:
            fits = (isinstance(entry, type) and issubclass(entry, self.kind)) if self._subclass \
                else isinstance(entry, self.kind)
            if not fits:
                expected = " or ".join(f"{k.__module__}.{k.__qualname__}" for k in
                                       (self.kind if isinstance(self.kind, tuple) else (self.kind,)))
                raise TypeError(f"a {self.what} is {'a subclass of ' if self._subclass else 'a '}{expected}, "
                                f"not {entry!r}")
        if self._check is not None:
            self._check(entry)

    # ---- reading -----------------------------------------------------------------------------
    def _read_plugins(self) -> None:
        if self._plugins_read:
            return
        self._plugins_read = True
        from vlfair.logging import get_logger

        for point in metadata.entry_points(group=str(self.entry_points)):
            try:
                loaded = point.load()
                self.add(loaded, None if self._name_of is not None else point.name)
            except Exception as exc:  # noqa: BLE001  (a third party's module: any error is theirs)
                self.failed[point.name] = f"{type(exc).__name__}: {exc}"
                get_logger().warning(f"vlfair: {self.what} plugin {point.name} ({point.value}) was not loaded: "
                                     f"{type(exc).__name__}: {exc}")

    def _load(self, name: str, lazy: _Lazy) -> T:
        entry = resolve(lazy.target)  # (a module that registers its entry on import has replaced the text)
        self._validate(entry)
        if self._name_of is not None and self._name_of(entry) != name:
            raise ValueError(f"{self.what} {name!r} ({lazy.target}) is named {self._name_of(entry)!r}")
        self._entries[name] = entry
        return entry

    def get(self, name: str, default: Any = _UNSET) -> T:
        """The entry ``name``; an unknown name is an :class:`UnknownEntry` listing the known ones (or
        ``default``, where one is given, as a mapping's ``get``)."""
        if name not in self._entries:
            self._read_plugins()
        if name not in self._entries:
            if default is not _UNSET:
                return default
            raise UnknownEntry(f"unknown {self.what} {name!r}; known: {', '.join(self.names()) or 'none'}")
        found = self._entries[name]
        return self._load(name, found) if isinstance(found, _Lazy) else found

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def loaded(self, name: str) -> bool:
        """Whether the entry ``name`` is imported (False for one still named by text only, or unknown)."""
        return name in self._entries and not isinstance(self._entries[name], _Lazy)

    def names(self) -> list[str]:
        """Every entry's name, in the order registered (built-in entries first), without importing a lazy one."""
        self._read_plugins()
        return list(self._entries)

    keys = names

    def items(self) -> list[tuple[str, T]]:
        """(name, entry) of every entry, lazy ones imported."""
        return [(name, self.get(name)) for name in self.names()]

    def values(self) -> list[T]:
        return [entry for _, entry in self.items()]

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name not in self._entries:
            self._read_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self.names())})"


@dataclasses.dataclass(frozen=True)
class _Lazy:
    """An entry named by its ``"module:attribute"`` text, not imported yet."""

    target: str


def _same(known: Any, entry: Any) -> bool:
    """One entry registered twice: the same object, one class defined again by a module imported twice, or
    the entry that a lazy entry's text names."""
    if known is entry or known == entry:
        return True
    if isinstance(known, _Lazy) or isinstance(entry, _Lazy) or (isinstance(known, type) and isinstance(entry, type)):
        return _path(known) is not None and _path(known) == _path(entry)
    return False


def _names(target: str, known: Any) -> bool:
    """Whether lazy ``target`` text names ``known``, a value with no path (a spec registered before the text)."""
    if _path(known) is not None or isinstance(known, _Lazy):
        return False
    try:
        return _same(known, resolve(target))
    except (ImportError, AttributeError):  # text naming nothing: another entry, said as such
        return False


def _path(entry: Any) -> str | None:
    """``"module:qualname"`` of a class or function (a lazy entry: its text)."""
    if isinstance(entry, _Lazy):
        return entry.target
    module, qualname = getattr(entry, "__module__", None), getattr(entry, "__qualname__", None)
    return f"{module}:{qualname}" if isinstance(module, str) and isinstance(qualname, str) else None


def _shown(entry: Any) -> str:
    if isinstance(entry, _Lazy):
        return entry.target
    return f"{entry.__module__}.{entry.__qualname__}" if isinstance(entry, type) else repr(entry)[:80]


__all__ = ["Registry", "UnknownEntry", "resolve"]
