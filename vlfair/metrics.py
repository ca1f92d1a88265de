"""vlfair's evaluate modules, loadable offline as ``evaluate.load("vlfair/<name>")``.

evaluate 0.4 resolves ``"vlfair/<name>"`` on the Hub (the Spaces ``vlfair publish-metrics``
publishes) and, when the Hub cannot be reached or has no such module, falls back to its modules
cache: ``$HF_MODULES_CACHE/evaluate_modules/metrics/vlfair--<name>/<hash>/<name>.py``.
:func:`install_metrics` puts the modules shipped inside the wheel (``vlfair._metrics``) there,
keyed by their content hash as evaluate keys them, so the literal string works offline from any
directory. :func:`load_metric` installs on first use.

evaluate 0.4.6 caches every community module, comparisons too, under
``evaluate_modules/metrics/vlfair--<name>/``, so :func:`install_metrics` needs no case for
``bias_difference`` and ``evaluate.load("vlfair/bias_difference", module_type="comparison")`` works
offline.

One folder per module in ``metrics/``, as in huggingface/evaluate: ``_info()`` declares ``features``
(label columns as text, ``evaluate_support.label_features``), the class mixes in
``evaluate_support.CheckedInputs`` before evaluate's own (``class BiasRatio(CheckedInputs,
evaluate.Metric)``; a label column it may leave out is named in ``OPTIONAL``), ``_compute()`` calls the
``vlfair.measures`` function of the same name and returns a flat dict; ``_compute`` names every column and
option (no ``**kwargs``: evaluate's common module test, which ``tests/test_metric_modules.py`` runs step by
step over every folder in ``metrics/``); the module imports only ``datasets``, ``evaluate``,
``vlfair.evaluate_support`` and ``vlfair.measures``; the docstring carries at least two ``>>>`` examples
that a common test runs for every module; the card has a "Limitations and Bias" section and Space YAML;
``app.py`` installs its module (:func:`install_metrics`) and builds
``vlfair.widget.metric_widget(evaluate.load("vlfair/<name>"), EXAMPLE, OPTIONS)``, a Gradio 6 widget with
a worked example, the compute options as JSON and the card (evaluate's ``launch_gradio_widget`` is written
for Gradio 3 and fails under Gradio 6); ``requirements.txt`` lists ``vlfair`` (pinned to the release by
``vlfair publish-metrics``) and ``evaluate``.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from vlfair.measures import MEASURES

NAMESPACE = "vlfair"


def metrics_dir() -> Path:
    """The folder holding one evaluate module per measure (the checkout's metrics/ when editable)."""
    return Path(str(resources.files("vlfair._metrics")))


def available_metrics() -> list[str]:
    """The names of the evaluate modules vlfair ships, sorted."""
    return sorted(p.name for p in metrics_dir().iterdir() if (p / f"{p.name}.py").exists())


@functools.cache
def _module_tree(name: str) -> ast.Module:
    """The parsed source of the shipped module ``name`` (read, never imported: no evaluate import needed)."""
    return ast.parse((metrics_dir() / name / f"{name}.py").read_text(encoding="utf-8"))


def _compute_arguments(name: str) -> tuple[list[str], list[str]]:
    """The shipped module's ``_compute`` parameters: its columns (no default: evaluate passes every
    column) and its options (with a default)."""
    compute = next(node for node in ast.walk(_module_tree(name))
                   if isinstance(node, ast.FunctionDef) and node.name == "_compute")
    arguments = [a.arg for a in compute.args.args if a.arg != "self"]
    columns = len(arguments) - len(compute.args.defaults)
    return arguments[:columns], arguments[columns:] + [a.arg for a in compute.args.kwonlyargs]


def module_parameters() -> dict[str, frozenset[str]]:
    """Each shipped module's inputs and options (the parameters of its ``_compute``): to name, in
    an error, the modules that take a name."""
    return {name: frozenset(sum(_compute_arguments(name), [])) for name in available_metrics()}


def module_columns() -> dict[str, frozenset[str]]:
    """Each shipped module's columns (one value per row: what add_batch takes)."""
    return {name: frozenset(_compute_arguments(name)[0]) for name in available_metrics()}


def module_type(name: str) -> str:
    """``"metric"``, ``"comparison"`` or ``"measurement"``: the ``module_type`` the shipped module's
    ``_info()`` declares (what ``evaluate.load(..., module_type=...)`` checks)."""
    return next(str(keyword.value.value) for node in ast.walk(_module_tree(_module_name(name)))
                if isinstance(node, ast.Call) for keyword in node.keywords
                if keyword.arg == "module_type" and isinstance(keyword.value, ast.Constant))


def metric_card(name: str) -> Path | None:
    """The card (README.md) of vlfair's own module ``name``, or None for any other name.

    A name may come from a results file, which anyone can write: only a name in
    :func:`available_metrics` is looked up, never a path (``..``, ``/etc``), and a card that
    resolves outside :func:`metrics_dir` (a symlink) is not read."""
    if name not in available_metrics():
        return None
    root = metrics_dir().resolve()
    card = (root / name / "README.md").resolve()
    return card if card.is_relative_to(root) and card.is_file() else None


def _module_name(name: str) -> str:
    """``"bias_ratio"`` or ``"vlfair/bias_ratio"`` -> ``"bias_ratio"`` (anything else is an error)."""
    namespace, _, short = name.rpartition("/")
    if namespace not in ("", NAMESPACE) or short not in available_metrics():
        raise ValueError(f"unknown vlfair metric {name!r}; available: "
                         + ", ".join(f"{NAMESPACE}/{n}" for n in available_metrics()))
    return short


def install_metrics(names: list[str] | None = None) -> list[Path]:
    """Copy modules (default: all) into evaluate's modules cache as ``vlfair/<name>``; returns
    the installed scripts. Installing an unchanged module again is a no-op."""
    from evaluate.loading import files_to_hash, init_dynamic_modules
    from filelock import FileLock

    installed = []
    root = Path(init_dynamic_modules()) / "metrics"  # evaluate_modules/metrics, as evaluate's loader reads it
    for name in (names or available_metrics()):
        short = _module_name(name)
        script = metrics_dir() / short / f"{short}.py"
        folder = root / f"{NAMESPACE}--{short}"
        target = folder / files_to_hash([str(script)]) / script.name
        with FileLock(str(folder) + ".lock"):
            if not target.exists():
                for package in (root, folder, target.parent):  # each level is an importable package
                    package.mkdir(parents=True, exist_ok=True)
                    (package / "__init__.py").touch(exist_ok=True)
                meta = {"original file path": str(script), "local file path": str(target)}
                target.with_suffix(".json").write_text(json.dumps(meta))
                with tempfile.NamedTemporaryFile("wb", dir=target.parent, delete=False) as handle:
                    handle.write(script.read_bytes())
                os.replace(handle.name, target)  # atomic: a concurrent load never reads half a script
            else:
                os.utime(target)  # the newest copy is the one evaluate picks
        installed.append(target)
    return installed


def load_metric(name: str, **kwargs: Any) -> Any:
    """The module ``name`` (``"bias_ratio"`` or ``"vlfair/bias_ratio"``) as shipped with this
    vlfair, offline; also installs it so that ``evaluate.load("vlfair/<name>")`` works. ``kwargs``
    go to ``evaluate.load``: its own arguments and the module's options, which become its defaults
    (``load_metric("bias_ratio", protected_group="women", reference_group="men")``).

    Raises:
        ValueError: ``name`` is not one of vlfair's modules (the message lists them).
    """
    import evaluate

    short = _module_name(name)
    install_metrics([short])
    return evaluate.load(str(metrics_dir() / short), **kwargs)


__all__ = ["MEASURES", "NAMESPACE", "available_metrics", "install_metrics", "load_metric", "metric_card", "metrics_dir",
           "module_columns", "module_parameters", "module_type"]
