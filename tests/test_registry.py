"""vlfair.registry.Registry, the one registry of probes, datasets, model backends, scorers and measures:
lazy entries imported on first read only, entry-point plugins (a broken one named and left out), the type
check, an unknown name listing the known ones, the same name twice refused; and the registries built on it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from importlib import metadata

import pytest

from vlfair.registry import Registry, UnknownEntry, resolve

Thing = types.SimpleNamespace  # an entry of the registries below: Thing(name="a")


@pytest.fixture
def module(tmp_path, monkeypatch):
    """A module of its own on sys.path (vlfair_registry_fixture), not imported yet, holding a Thing and a class."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "vlfair_registry_fixture.py").write_text(textwrap.dedent("""
        import types

        THING = types.SimpleNamespace(name="lazy")
        NOT_A_THING = 3
    """))
    monkeypatch.delitem(sys.modules, "vlfair_registry_fixture", raising=False)
    yield "vlfair_registry_fixture"
    sys.modules.pop("vlfair_registry_fixture", None)


def test_a_lazy_entry_is_imported_when_first_read_and_not_before(module):
    things: Registry[Thing] = Registry("thing", Thing, name_of=lambda thing: thing.name)
    things.lazy("lazy", f"{module}:THING")
    assert things.names() == ["lazy"] and "lazy" in things and len(things) == 1
    assert module not in sys.modules and not things.loaded("lazy")
    thing = things.get("lazy")
    assert module in sys.modules and things.loaded("lazy") and thing is sys.modules[module].THING
    assert things["lazy"] is thing and things.items() == [("lazy", thing)]


def test_a_lazy_entry_is_type_checked_and_named_as_it_says_when_read(module):
    things: Registry[Thing] = Registry("thing", Thing, name_of=lambda thing: thing.name)
    things.lazy("number", f"{module}:NOT_A_THING")
    with pytest.raises(TypeError, match=r"a thing is a types\.SimpleNamespace, not 3"):
        things.get("number")
    things.lazy("misnamed", f"{module}:THING")
    with pytest.raises(ValueError, match=r"thing 'misnamed' \(vlfair_registry_fixture:THING\) is named 'lazy'"):
        things.get("misnamed")


def test_the_type_check_refuses_a_wrong_entry_naming_what_it_should_be():
    classes: Registry[type] = Registry("widget", Thing, subclass=True, name_of=lambda cls: cls.__name__)
    with pytest.raises(TypeError, match=r"a widget is a subclass of types\.SimpleNamespace, not <class 'int'>"):
        classes.add(int)
    checked: Registry[int] = Registry("count", int, check=lambda n: None if n >= 0 else _negative(n))
    with pytest.raises(TypeError, match="a count is a builtins.int, not 'x'"):
        checked.add("x", "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="-1 is negative"):
        checked.add(-1, "minus")
    assert checked.add(2, "two") == 2 and checked.names() == ["two"]


def _negative(n: int) -> None:
    raise ValueError(f"{n} is negative")


def test_an_unknown_name_lists_the_known_ones():
    things: Registry[Thing] = Registry("thing", Thing, name_of=lambda thing: thing.name)
    things.add(Thing(name="a"))
    things.lazy("b", "nowhere:B")
    with pytest.raises(UnknownEntry, match="unknown thing 'c'; known: a, b") as raised:
        things.get("c")
    assert isinstance(raised.value, KeyError) and isinstance(raised.value, ValueError)
    assert str(raised.value) == "unknown thing 'c'; known: a, b"  # (not KeyError's quoted repr)
    with pytest.raises(UnknownEntry, match="known: none"):
        Registry("thing").get("c")


def test_the_same_name_twice_is_an_error_but_the_same_entry_again_is_not():
    things: Registry[object] = Registry("thing")
    one, other = Thing(name="x", size=1), Thing(name="x", size=2)
    things.add(one, "x")
    things.add(one, "x")  # the same entry again
    with pytest.raises(ValueError, match="two things are named 'x'"):
        things.add(other, "x")
    assert things.add(other, "x", replace=True) is other and things["x"] is other
    things["x"] = one  # (registry[name] = entry replaces, as a mapping does)
    assert things["x"] is one
    del things["x"]
    assert "x" not in things

    classes: Registry[type] = Registry("class", name_of=lambda cls: cls.__name__)
    first = type("Twin", (), {"__module__": "plugin_a"})
    again = type("Twin", (), {"__module__": "plugin_a"})  # a module imported twice defines its class again
    classes.add(first)
    classes.add(again)
    with pytest.raises(ValueError, match="two classs are named 'Twin': plugin_a.Twin and plugin_b.Twin"):
        classes.add(type("Twin", (), {"__module__": "plugin_b"}))


def test_a_lazy_entry_and_the_class_it_names_registered_by_its_module_are_one_entry():
    classes: Registry[type] = Registry("class", name_of=lambda cls: cls.__name__)
    classes.lazy("Twin", "plugin_a:Twin")
    twin = type("Twin", (), {"__module__": "plugin_a"})
    assert classes.add(twin) is twin and classes.get("Twin") is twin  # (its module's decorator ran first)
    classes.lazy("Twin", "plugin_a:Twin")  # ... and the lazy line after it: still that class
    assert classes.get("Twin") is twin
    with pytest.raises(ValueError, match="two classs are named 'Twin': plugin_a.Twin and plugin_b:Twin"):
        classes.lazy("Twin", "plugin_b:Twin")
    classes.lazy("Other", "plugin_b:Other")
    with pytest.raises(ValueError, match="two classs are named 'Other': plugin_b:Other and plugin_c.Other"):
        classes.add(type("Other", (), {"__module__": "plugin_c"}))


def _entry_points(*points: metadata.EntryPoint):
    return lambda group: [point for point in points if point.group == group]


def test_an_entry_point_plugin_is_loaded_and_a_broken_one_is_named_and_left_out(module, monkeypatch, capsys):
    monkeypatch.setattr(metadata, "entry_points", _entry_points(
        metadata.EntryPoint("lazy", f"{module}:THING", "vlfair.things"),
        metadata.EntryPoint("broken", "vlfair_no_such_module:THING", "vlfair.things"),
        metadata.EntryPoint("number", f"{module}:NOT_A_THING", "vlfair.things"),
        metadata.EntryPoint("elsewhere", f"{module}:THING", "vlfair.others")))
    things: Registry[Thing] = Registry("thing", Thing, entry_points="vlfair.things", name_of=lambda t: t.name)
    things.add(Thing(name="own"))
    assert module not in sys.modules  # entry points are read on first read, not when the registry is made
    assert things.names() == ["own", "lazy"]
    assert things["lazy"] is sys.modules[module].THING
    said = capsys.readouterr().err  # (the vlfair logger writes to stderr)
    assert "thing plugin broken (vlfair_no_such_module:THING) was not loaded: ModuleNotFoundError" in said
    assert "thing plugin number" in said and "a thing is a types.SimpleNamespace, not 3" in said
    assert sorted(things.failed) == ["broken", "number"]
    things.names()
    assert capsys.readouterr().err == ""  # said once


def test_a_copy_is_a_registry_of_its_own():
    things: Registry[object] = Registry("thing")
    things.add(1, "one")
    copy = things.copy()
    copy.add(2, "two")
    assert things.names() == ["one"] and copy.names() == ["one", "two"]


def test_resolve_reads_module_colon_attribute():
    assert resolve("vlfair.registry:Registry.get") is Registry.get
    with pytest.raises(ValueError, match="does not name an attribute as 'module:attribute'"):
        resolve("vlfair.registry")


# ---- the registries built on it ------------------------------------------------------------------
def test_the_registries_name_their_built_in_entries_without_importing_them():
    """Listing the probes', datasets' and backends' names imports no probe module, no study dataset, no
    generative backend (the CLI lists datasets for --help; a probe's position needs its class)."""
    code = ("import sys\n"
            "from vlfair.probes.registry import PROBES\n"
            "from vlfair.data.registry import dataset_names\n"
            "from vlfair.models import BACKENDS\n"
            "names = PROBES.names(), dataset_names(), BACKENDS.names()\n"
            "imported = [m for m in ('vlfair.probes.professions', 'vlfair.probes.traits', 'vlfair.probes.retrieval',\n"
            "            'vlfair.data.studies', 'vlfair.models.lvlm') if m in sys.modules]\n"
            "print(names, imported)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == ("(['professions', 'traits', 'word-influence', 'multilingual', 'public-figures', "
                                  "'retrieval'], ['fairface', 'multi30k', 'pfi', 'professions'], "
                                  "['hf', 'mclip', 'lvlm']) []")


def test_probe_names_are_the_studies_in_order_then_the_others_by_name(monkeypatch):
    from vlfair.probes import registry
    from vlfair.probes.base import Probe

    monkeypatch.setattr(registry, "PROBES", registry.PROBES.copy())
    for name in ("zeta", "alpha"):
        registry.register(type(name.title(), (Probe,), {"name": name, "__module__": "plugin",
                                                       "run": lambda self, ctx, schema: None}))
    assert registry.probe_names() == ["professions", "traits", "word-influence", "multilingual", "public-figures",
                                      "alpha", "retrieval", "zeta"]
    with pytest.raises(registry.ProbeError, match=r"unknown probe 'nope'; probes: \['alpha', 'multilingual'"):
        registry.probe_class("nope")


def test_a_backend_registered_again_replaces_the_first(monkeypatch):
    from vlfair import models

    monkeypatch.setattr(models, "BACKENDS", models.BACKENDS.copy())
    models.register_backend("toy", lambda ref, **options: ("first", ref))
    models.register_backend("toy", lambda ref, **options: ("second", ref))
    assert models.BACKENDS["toy"]("x") == ("second", "x") and models.parse_spec("toy:x") == ("toy", "x")
    with pytest.raises(TypeError, match="a model backend is a loader"):
        models.register_backend("bad", "not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="registered prefixes: hf:, lvlm:, mclip:, toy:"):
        models.parse_spec("nope:x")


def test_the_demo_world_s_data_is_the_demo_s_registry_and_its_tables_follow_the_probe_registry():
    """The data layer names nothing of the demo: the demo registers its world's data by schema; the demo's
    per-probe tables and the demo Space's are held to the probe registry."""
    from vlfair.data.registry import DatasetSpec
    from vlfair.demo import datasets as world_data
    from vlfair.demo import entries
    from vlfair.probes import BUILT_IN, probe_class
    from vlfair.space import session

    assert "world" not in {field.name for field in __import__("dataclasses").fields(DatasetSpec)}
    assert world_data.BY_SCHEMA.names() == ["professions", "fairface", "multi30k", "pfi"]
    assert entries.WORLD_DATA == {probe: (probe_class(probe).schemas[0] if probe_class(probe).needs_dataset else None)
                                  for probe in BUILT_IN}
    assert [probe for probe, _ in entries.PROBES] == list(BUILT_IN)
    with pytest.raises(ValueError, match=r"no probe is named \['nope'\]; no runner for \['professions'"):
        entries.probe_table({"nope": lambda *args: None})
    session.space_tables_checked(list(BUILT_IN))
    with pytest.raises(ValueError, match=r"the demo Space's tables name probes the registry does not hold: \['re"):
        session.space_tables_checked([name for name in BUILT_IN if name != "retrieval"])


def test_a_value_registered_again_as_the_lazy_entry_names_it_is_one_entry():
    """A plugin registering a built-in dataset's own spec again (before anything read it) is that entry, not a
    second dataset of its name; another spec of the name is refused."""
    import dataclasses

    from vlfair.data.registry import DatasetSpec
    from vlfair.data.studies import FAIRFACE_SPEC

    def fresh() -> Registry[DatasetSpec]:
        return Registry("dataset", DatasetSpec, name_of=lambda spec: spec.name)

    lazy_first, value_first = fresh(), fresh()
    lazy_first.lazy("fairface", "vlfair.data.studies:FAIRFACE_SPEC")
    assert lazy_first.add(FAIRFACE_SPEC) is FAIRFACE_SPEC and lazy_first.get("fairface") is FAIRFACE_SPEC
    value_first.add(FAIRFACE_SPEC)
    value_first.lazy("fairface", "vlfair.data.studies:FAIRFACE_SPEC")  # the same spec, named after it was added
    assert value_first.get("fairface") is FAIRFACE_SPEC
    for specs in (lazy_first, value_first):
        with pytest.raises(ValueError, match="two datasets are named 'fairface'"):
            specs.add(dataclasses.replace(FAIRFACE_SPEC, twin_size=3))
