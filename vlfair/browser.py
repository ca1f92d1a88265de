"""The chromium that the Spaces' browser tests and ``docs/make_screenshots.py`` drive through Playwright.

Looked for in this order: ``$VLFAIR_CHROMIUM``; ``chromium`` or ``chromium-browser`` on PATH (Debian's
package); the chromium that ``playwright install chromium`` downloaded. The one found must run
(``--version``: a downloaded build without its system libraries does not). ``python -m vlfair.browser``
prints it, or says in one line what to install and exits 1 (``scripts/test`` runs it before any test).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

ENV = "VLFAIR_CHROMIUM"
# Chromium's background services reach for Google's hosts at every start; on a closed network their
# refused connections slow it down. No sandbox: CI runs as root.
ARGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run")
INSTALL_HINT = ("install Debian's chromium (apt-get install -y chromium), or Playwright's "
                "(python -m playwright install --with-deps chromium), or set VLFAIR_CHROMIUM to a chromium binary")
LOOKUP_TIMEOUT_S = 60


class ChromiumNotFound(RuntimeError):
    pass


def _playwright_chromium() -> str | None:
    """Where Playwright's own chromium would be (None without playwright or that download)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    paths = []

    def ask() -> None:
        with sync_playwright() as playwright:
            paths.append(playwright.chromium.executable_path)

    # a thread of its own: Playwright's sync API refuses to start in a thread whose asyncio loop runs
    # (a browser session already open in this one, a Gradio app)
    thread = threading.Thread(target=ask, name="vlfair-find-chromium", daemon=True)
    thread.start()
    thread.join(LOOKUP_TIMEOUT_S)  # a driver that hangs is no answer
    return paths[0] if paths and Path(paths[0]).is_file() else None


def _check_runs(path: str) -> str:
    """``path``, once ``path --version`` succeeds; else ChromiumNotFound saying why and what to install."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=LOOKUP_TIMEOUT_S)
        problem = None if done.returncode == 0 else \
            (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    except (OSError, subprocess.TimeoutExpired) as error:
        problem = str(error)
    if problem is not None:
        raise ChromiumNotFound(f"{path} does not run ({problem}): {INSTALL_HINT}")
    return path


# where a chromium may be, in the order looked in (Playwright's last: asking it starts its driver)
LOOKUPS = (lambda: shutil.which("chromium"), lambda: shutil.which("chromium-browser"), _playwright_chromium)


def find_chromium() -> str:
    """The path of a chromium binary that runs, or ChromiumNotFound saying what to install."""
    configured = os.environ.get(ENV)
    if configured:
        found = shutil.which(configured)
        if found is None:
            raise ChromiumNotFound(f"{ENV}={configured} is not an executable file: {INSTALL_HINT}")
        return _check_runs(found)
    for lookup in LOOKUPS:
        found = lookup()
        if found:
            return _check_runs(found)
    raise ChromiumNotFound(f"no chromium for the browser tests: {INSTALL_HINT}")


def main() -> int:
    try:
        print(find_chromium())
    except ChromiumNotFound as error:
        print(f"vlfair browser: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
