"""Refresh the screenshots README shows (docs/images/): the demo report, the demo Space, the
leaderboard Space, a metric Space and the retrieval probe's report.

Run after the browser tests (``python -m pytest tests/test_browser.py``), which save the demo and
metric Spaces' screenshots in test-artifacts/screenshots/; this script runs ``vlfair demo`` and
shows its report.html and a leaderboard of its results (the demo world's biased and control
encoders, by name) itself.
Needs playwright and a chromium, as the browser tests do (``vlfair.browser`` finds it).

    python docs/make_screenshots.py [--artifacts test-artifacts/screenshots]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

DOCS = Path(__file__).resolve().parent
IMAGES = DOCS / "images"
FROM_BROWSER_TESTS = {"demo-professions-run.png": "demo-space.png", "widget-bias_ratio.png": "metric-space.png"}
MAX_HEIGHT = 1500  # the top of a page: what a person sees first
WIDTH = 1000


def _save(image: Image.Image, path: Path) -> None:
    """Cropped to the top, scaled to README's width, 256 colours: a few hundred KB at most."""
    image = image.convert("RGB").crop((0, 0, image.width, min(image.height, MAX_HEIGHT)))
    image = image.resize((WIDTH, round(image.height * WIDTH / image.width)), Image.LANCZOS)
    image.quantize(256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    print(f"{path}: {path.stat().st_size // 1024} KB")


def run_demo(out: Path) -> Path:
    """A fresh ``vlfair demo`` into ``out``; returns ``out``."""
    subprocess.run([sys.executable, "-m", "vlfair", "-q", "demo", "--out", str(out)], check=True)
    return out


def demo_report_and_leaderboard(demo: Path, work: Path, browser) -> None:
    """Screenshots with ``browser`` (a Playwright chromium) of the report of the demo output ``demo``
    and of a leaderboard of its results; ``work`` holds the full-size screenshots."""
    import importlib.util

    from playwright.sync_api import expect

    work.mkdir(parents=True, exist_ok=True)
    spec = importlib.util.spec_from_file_location("leaderboard_app", DOCS.parent / "spaces" / "leaderboard" / "app.py")
    leaderboard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(leaderboard)
    app = leaderboard.build_app(str(demo))
    _, url, _ = app.launch(prevent_thread_lock=True, server_name="127.0.0.1")
    try:
        page = browser.new_page(viewport={"width": 1200, "height": MAX_HEIGHT})
        page.goto((demo / "report.html").as_uri())
        page.evaluate("window.scrollTo(0, document.getElementById('professions').offsetTop - 20)")
        page.screenshot(path=str(work / "report.png"))
        page.close()
        page = browser.new_page(viewport={"width": 1280, "height": 1100})
        page.goto(url)
        page.get_by_role("combobox", name="metric").click()
        page.get_by_role("option", name="bias_ratio", exact=True).click()
        # the board once filtered: only bias_ratio rows, and their chart drawn
        expect(page.locator("#results-table")).not_to_contain_text("group_score_gap", timeout=30_000)
        expect(page.locator("#chart img")).to_be_visible(timeout=30_000)
        page.screenshot(path=str(work / "leaderboard.png"), full_page=True)
        compare_view(page, work / "leaderboard-compare.png")
        page.close()
        page = browser.new_page(viewport={"width": 1200, "height": MAX_HEIGHT})
        page.goto((demo / "compare" / "traits" / "comparison.html").as_uri())
        page.screenshot(path=str(work / "comparison.png"))
        page.close()
    finally:
        app.close()
    _save(Image.open(work / "report.png"), IMAGES / "demo-report.png")
    _save(Image.open(work / "leaderboard.png"), IMAGES / "leaderboard-space.png")
    _save(Image.open(work / "comparison.png"), IMAGES / "comparison.png")
    _save(Image.open(work / "leaderboard-compare.png"), IMAGES / "leaderboard-compare.png")
    retrieval_report(demo, work, browser)


def retrieval_report(demo: Path, work: Path, browser) -> None:
    """The retrieval probe's own report on the demo world's biased encoder: its figures first."""
    page = browser.new_page(viewport={"width": 1200, "height": MAX_HEIGHT})
    page.goto((demo / "biased" / "retrieval" / "report.html").as_uri())
    page.evaluate("window.scrollTo(0, document.querySelector('img').offsetTop - 60)")
    page.screenshot(path=str(work / "retrieval.png"))
    page.close()
    _save(Image.open(work / "retrieval.png"), IMAGES / "retrieval-report.png")


def compare_view(page, path: Path) -> None:
    """The leaderboard Space's compare tab: the traits family, both demo encoders, compared."""
    from playwright.sync_api import expect

    page.get_by_role("tab", name="compare").click()
    page.get_by_role("combobox", name="family").click()
    page.get_by_role("option", name=re.compile(r"^traits ")).first.click()
    runs = page.get_by_role("combobox", name=re.compile(r"^runs"))
    for model in ("demo-world biased", "demo-world control"):
        runs.click()
        page.get_by_role("option", name=re.compile(f"^{model} ")).first.click()
    page.locator("#compare-go").click()
    expect(page.locator("#compare-table")).to_contain_text("trait_anova", timeout=60_000)
    expect(page.locator("#compare-forest img")).to_be_visible(timeout=30_000)
    page.keyboard.press("Escape")
    page.wait_for_timeout(1500)  # Gradio fades a new plot in
    page.screenshot(path=str(path), full_page=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifacts", type=Path, default=DOCS.parent / "test-artifacts" / "screenshots")
    args = parser.parse_args(argv)
    IMAGES.mkdir(exist_ok=True)
    missing = [name for name in FROM_BROWSER_TESTS if not (args.artifacts / name).exists()]
    if missing:
        raise SystemExit(f"make_screenshots: {missing} not in {args.artifacts}; run the browser tests first")
    for source, target in FROM_BROWSER_TESTS.items():
        _save(Image.open(args.artifacts / source), IMAGES / target)
    from playwright.sync_api import sync_playwright

    from vlfair.browser import ARGS, find_chromium

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=find_chromium(), args=list(ARGS))
        demo_report_and_leaderboard(run_demo(Path(tmp) / "demo"), Path(tmp) / "screens", browser)
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
