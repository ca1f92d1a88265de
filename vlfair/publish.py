"""Publishing the evaluate modules in metrics/ as Hugging Face Spaces (one Space each)."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

from vlfair._version import __version__
from vlfair.logging import get_logger
from vlfair.metrics import available_metrics, metrics_dir

log = get_logger(__name__)

FILES = ("{name}.py", "README.md", "app.py", "requirements.txt")


@dataclasses.dataclass(frozen=True)
class SpacePlan:
    name: str
    repo_id: str
    source: Path
    files: tuple[str, ...]


def plan_spaces(namespace: str, names: list[str] | None = None) -> list[SpacePlan]:
    """What would be pushed where; raises if a module lacks one of its files."""
    if not namespace or "/" in namespace:
        raise ValueError(f"namespace must be a Hub user or organisation name, got {namespace!r}")
    plans = []
    for name in names or available_metrics():
        folder = metrics_dir() / name
        files = tuple(pattern.format(name=name) for pattern in FILES)
        missing = [f for f in files if not (folder / f).exists()]
        if missing:
            raise ValueError(f"metrics/{name} lacks {missing}")
        plans.append(SpacePlan(name, f"{namespace}/{name}", folder, files))
    return plans


def stage(plan: SpacePlan, directory: Path, namespace: str) -> Path:
    """Copy a module into ``directory``, pinning vlfair and pointing app.py at ``namespace``."""
    target = directory / plan.name
    target.mkdir(parents=True)
    for file in plan.files:
        shutil.copy2(plan.source / file, target / file)
    requirements = [line for line in (target / "requirements.txt").read_text().splitlines()
                    if line.strip() and not line.strip().startswith("vlfair")]
    (target / "requirements.txt").write_text("\n".join([f"vlfair=={__version__}", *requirements]) + "\n")
    app = (target / "app.py").read_text().replace(f'"vlfair/{plan.name}"', f'"{namespace}/{plan.name}"')
    (target / "app.py").write_text(app)
    return target


def publish_metrics(namespace: str = "vlfair", dry_run: bool = False, names: list[str] | None = None,
                    api: Any = None, token: str | None = None) -> list[SpacePlan]:
    """Create or update one Gradio Space per module; ``dry_run`` only reports (no network)."""
    plans = plan_spaces(namespace, names)
    for plan in plans:
        log.info(f"{'would push' if dry_run else 'pushing'} metrics/{plan.name} -> spaces/{plan.repo_id}: "
              f"{', '.join(plan.files)} (requirements pin vlfair=={__version__})")
    if dry_run:
        return plans
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
    with tempfile.TemporaryDirectory(prefix="vlfair-publish-") as tmp:
        for plan in plans:
            staged = stage(plan, Path(tmp), namespace)
            api.create_repo(plan.repo_id, repo_type="space", space_sdk="gradio", exist_ok=True)
            api.upload_folder(folder_path=str(staged), repo_id=plan.repo_id, repo_type="space",
                              commit_message=f"vlfair {__version__}: {plan.name}")
    return plans
