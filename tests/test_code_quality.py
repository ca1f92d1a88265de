"""The maintained project's checks, run by the test command and CI: the layer contract
(import-linter), ruff (on vlfair/, metrics/, spaces/, tests/ and benchmarks/) and mypy on vlfair/, the
Spaces' imports, matplotlib's backend left alone."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _tool(*argv: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def _script(name: str) -> str:
    """A console script of this interpreter's environment (ruff, mypy, lint-imports)."""
    return str(Path(sys.executable).with_name(name))


def test_the_layer_contract_holds():
    result = _tool(_script("lint-imports"))
    assert result.returncode == 0, result.stdout[-3000:]
    assert "4 kept, 0 broken" in result.stdout


def test_the_layer_contract_fails_on_a_report_module_that_imports_probes(tmp_path):
    """The contract is not a formality: a copy of vlfair whose report imports probes breaks it."""
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "vlfair", copy / "vlfair",
                    ignore=shutil.ignore_patterns("encoders", "__pycache__", "*.yaml"))
    numbers = copy / "vlfair" / "report" / "numbers.py"
    numbers.write_text(numbers.read_text() + "\nfrom vlfair.probes import probe_names  # noqa: E402\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    result = _tool(_script("lint-imports"), cwd=tmp_path, env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 1 and "BROKEN" in result.stdout
    assert "vlfair.report.numbers -> vlfair.probes" in result.stdout


def _circles(graph) -> list[str]:
    """Every import circle of ``graph`` (grimp's), one per module and module it imports back through others."""
    circles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back and imported != module:
                circles.append(" -> ".join([module, *back]))
    return circles


def test_no_module_of_vlfair_imports_itself_back_through_others():
    """No import circle anywhere in vlfair, counting imports inside functions and under TYPE_CHECKING (grimp,
    import-linter's graph, sees both): a circle hidden in a function is still two modules that cannot be read,
    tested or moved apart. The three there were (demo.run <-> demo.generative, probes.base <-> probes.asking,
    report.hub <-> report.leaderboard) were broken by moving what both needed into one place."""
    import grimp

    graph = grimp.build_graph("vlfair")
    circles = _circles(graph)
    assert not circles, "\n".join(circles[:10])


def test_the_architecture_s_layout_names_every_module():
    """ARCHITECTURE.md's layout is the map a newcomer reads: every module of vlfair (its packages' modules too) is
    named there, so a new one cannot go in unmentioned (a review found compare/, paired.py and samples.py missing;
    every benchmark is named in benchmarks/README.md: tests/test_docs.py)."""
    import re

    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    layout = text[text.index("## Layout"):]
    layout = layout[layout.index("```") + 3:]
    named = set(re.findall(r"[\w.]+\.py|\w+/", layout[:layout.index("```")]))
    modules = [path for path in sorted((ROOT / "vlfair").rglob("*.py"))
               if path.name != "__init__.py" and "__pycache__" not in path.parts and path.parent.name != "encoders"]
    missing = [str(path.relative_to(ROOT)) for path in modules if path.name not in named]
    missing += [f"{package.relative_to(ROOT)}/" for package in sorted((ROOT / "vlfair").iterdir())
                if (package / "__init__.py").exists() and f"{package.name}/" not in named]
    assert not missing, f"name these in ARCHITECTURE.md's layout: {missing}"


def test_design_names_every_built_in_probe_where_it_lists_them():
    """"PROBE is one of ..." in DESIGN.md lists the probes vlfair ships (retrieval was missing from it)."""
    import re

    from vlfair.probes import probe_class, probe_names

    text = (ROOT / "docs" / "DESIGN.md").read_text()
    listed = text[text.index("PROBE is one of"):]
    listed = re.findall(r"`([\w-]+)`", listed[:listed.index("plugin's")])
    shipped = [name for name in probe_names() if probe_class(name).__module__.startswith("vlfair.probes.")]
    assert listed == shipped, listed


def test_ruff_is_clean():
    result = _tool(_script("ruff"), "check", "vlfair", "metrics", "spaces", "tests", "benchmarks", "--no-cache")
    assert result.returncode == 0, result.stdout[-3000:]


def test_mypy_is_clean():
    result = _tool(_script("mypy"), "--cache-dir", str(ROOT / ".mypy_cache"))
    assert result.returncode == 0, result.stdout[-3000:]
    assert result.stdout.startswith("Success: no issues found")


# what each Space shows, and so may import from vlfair
SPACE_IMPORTS = {
    "demo": {"vlfair.logging", "vlfair.space", "vlfair.space.session", "vlfair.space.limits",
             "vlfair.space.uploads", "vlfair.report.numbers", "vlfair.figures"},
    "leaderboard": {"vlfair.figures", "vlfair.metrics", "vlfair.report.leaderboard", "vlfair.report.plots",
                    "vlfair.report.numbers", "vlfair.space.compare", "vlfair.compare.tiers",
                    # every board's reading (the installed probes' facts, runs checked against their samples) and
                    # the time limit its loads run within
                    "vlfair.compare.board", "vlfair.space.limits"},
}


def _vlfair_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vlfair"):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.startswith("vlfair"))
    return names


def test_the_spaces_import_only_what_they_show():
    for space, allowed in SPACE_IMPORTS.items():
        imported = _vlfair_imports(ROOT / "spaces" / space / "app.py")
        assert imported and imported <= allowed, f"spaces/{space}/app.py imports {sorted(imported - allowed)}"


def test_importing_vlfair_and_drawing_leaves_matplotlib_s_backend_alone():
    code = (
        "import matplotlib\n"
        "matplotlib.use('svg')\n"
        "import vlfair, vlfair.probes, vlfair.report.plots, vlfair.report.writer, vlfair.demo.run\n"
        "import pandas as pd\n"
        "vlfair.report.plots.heatmap(pd.DataFrame({'a': [1.0, 2.0]}), 'title', 'label')\n"
        "print(matplotlib.get_backend(), matplotlib.rcParams['backend'])\n"
    )
    result = _tool(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["svg", "svg"]


def _loads_code_unless_told(call: ast.Call) -> bool:
    """A ``from_pretrained`` whose class may run a checkpoint's own code: an Auto class, a diffusers
    pipeline, or any receiver that is not a plain concrete class (``(auto_class or AutoModel)``)."""
    receiver = call.func.value  # type: ignore[attr-defined]
    name = receiver.id if isinstance(receiver, ast.Name) else \
        receiver.attr if isinstance(receiver, ast.Attribute) else None
    return name is None or name.startswith("Auto") or name == "DiffusionPipeline"


def test_every_loader_says_whether_a_checkpoint_s_code_may_run():
    """trust_remote_code is passed at every load that could run code: left unset, transformers asks on
    stdin (a "y" piped in runs the checkpoint's file), so no loader may leave the choice to it."""
    unsaid = []
    for path in sorted((ROOT / "vlfair").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "from_pretrained" and _loads_code_unless_told(node) \
                    and not any(keyword.arg == "trust_remote_code" for keyword in node.keywords):
                unsaid.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert unsaid == []


# a string is a module's name where it is read as one (importlib, resolve, a registry's lazy entry), not where a
# package's files are read (resources.files, jinja2's PackageLoader), a logger is named, or an entry-point group
# is (a group may be spelled as a module, "vlfair.probes")
_NOT_AN_IMPORT = {"files", "PackageLoader", "get_logger", "getLogger"}
_GROUPS = {"entry_points", "group"}


def _not_module_names(tree: ast.AST) -> set[int]:
    """The ids of the string constants of ``tree`` that are no module's name (see _NOT_AN_IMPORT)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if node.args and getattr(node.func, "attr", getattr(node.func, "id", None)) in _NOT_AN_IMPORT:
                skipped.add(id(node.args[0]))
            skipped.update(id(keyword.value) for keyword in node.keywords if keyword.arg in _GROUPS)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id.endswith("ENTRY_POINTS") for t in targets):
                skipped.add(id(node.value))
    return skipped


def _modules_named_by_strings(modules: set[str]) -> list[tuple[str, str, str]]:
    """(module, the vlfair module one of its string constants names, the string) for every ``"vlfair.x.y"`` or
    ``"vlfair.x.y:attribute"`` in vlfair's sources that names a module of the graph."""
    import re

    found = []
    for path in sorted((ROOT / "vlfair").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text())
        resources = _not_module_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in resources:
                match = re.fullmatch(r"(vlfair(?:\.\w+)+)(?::[\w.]+)?", node.value)
                if match and match.group(1) in modules and match.group(1) != module:
                    found.append((module, match.group(1), node.value))
    return found


def test_no_import_circle_counting_the_modules_named_by_strings():
    """Issue 63: 0 import circles counting importlib. grimp's graph, plus an edge for every string naming a vlfair
    module (what importlib, ``vlfair.registry.resolve`` and the registries' lazy entries import): no circle, and no
    module names by string a module of a higher layer than its own ([tool.importlinter]). The two there were
    (data.registry <-> data.studies, probes.registry <-> each probe module) and the data layer naming
    ``vlfair.demo.datasets:*`` were broken by one generic registry (vlfair.registry) whose built-in entries are
    named above the modules they name, and by the demo registering its world's data itself."""
    import grimp
    import tomllib

    graph = grimp.build_graph("vlfair")
    named = _modules_named_by_strings(set(graph.modules))
    assert any(text == "vlfair.models.lvlm:load_lvlm" for *_, text in named)  # the scan sees the lazy entries
    for importer, imported, _ in named:
        graph.add_import(importer=importer, imported=imported)
    circles = _circles(graph)
    assert not circles, "\n".join(circles[:10])

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(contract["layers"] for contract in contracts if contract["type"] == "layers")
    rank = {package.strip(): i for i, layer in enumerate(layers) for package in layer.split("|")}

    def layer(module: str) -> int | None:
        for end in range(module.count(".") + 1, 0, -1):
            found = rank.get(".".join(module.split(".")[:end]))
            if found is not None:
                return found
        return None

    upward = [f"{importer} names {text!r}" for importer, imported, text in named
              if layer(importer) is not None and layer(imported) is not None and layer(imported) < layer(importer)]
    assert not upward, "\n".join(upward)
