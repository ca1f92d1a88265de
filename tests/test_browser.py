"""The Spaces in a real browser: Playwright drives chromium against apps served on 127.0.0.1.

Screenshots of every checked state are kept in $VLFAIR_TEST_ARTIFACTS (default: test-artifacts/ in
the checkout). The chromium is the one ``vlfair.browser`` finds ($VLFAIR_CHROMIUM, Debian's, or
Playwright's); ``scripts/test`` installs Debian's where there is none.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd
import pytest
from playwright.sync_api import expect

from vlfair.demo import datasets as world_data
from vlfair.space import session

from test_spaces import _load, _metric_app, _serve, _world_uploads, results_dir, world_pool  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_MS = 120_000


@pytest.fixture(scope="session")
def artifacts() -> Path:
    directory = Path(os.environ.get("VLFAIR_TEST_ARTIFACTS", REPO / "test-artifacts")) / "screenshots"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture()
def page(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    yield page
    page.close()


def _choose(page, label: str, option: str) -> None:
    page.get_by_role("combobox", name=label).click()
    page.get_by_role("option", name=option, exact=True).click()
    _settled(page)


def _settled(page) -> None:
    """Wait until no event is running (Gradio shows "processing | 0.1s" on every pending output)."""
    page.wait_for_timeout(300)
    expect(page.get_by_text(re.compile(r"processing \|"))).to_have_count(0, timeout=60_000)


@pytest.fixture(scope="module")
def demo_url(world_pool):  # noqa: F811  (the world encoder is loaded before the browser waits on it)
    app = _load("demo").build_app(cache_dir=world_pool.cache_dir, hub=False)
    yield _serve(app)
    app.close()


def test_demo_runs_a_probe_with_one_progress_bar_then_an_error_clears_its_results(page, demo_url, artifacts, capfd,
                                                                                jpeg_paths, broken_files):
    """A person's first run (the professions probe on the world: plots, tables, downloads, one progress
    bar), then a mistake (a file that is not an image): one line naming the file, the earlier results
    gone, no traceback in the server's log."""
    page.goto(demo_url)
    expect(page.locator("#summary")).to_contain_text("No run yet")
    expect(page.locator("#metrics")).to_be_hidden()  # no empty table with placeholder headers before a run
    page.get_by_role("button", name="run").click()
    progress = page.locator(".progress-text")
    progress.first.wait_for(timeout=30_000)
    owners = progress.evaluate_all("els => els.map(e => (e.closest('[id]') || {}).id)")
    assert progress.count() == 1, owners  # over the summary only, not over every output
    page.screenshot(path=artifacts / "demo-progress.png")
    page.wait_for_selector("#plots img", timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#metrics")).to_contain_text("group_score_gap", timeout=30_000)
    expect(page.locator("#metrics")).to_contain_text("profession = doctor")  # subsets read as text
    assert "professions" in page.locator("#summary").inner_text()
    # the study's two tables (by gender, by race), the gaps and median images of each, its two published
    # tables as references (the world encoder is not the study's model), and the bias the run detected
    assert page.locator("#tables table").count() == 9
    expect(page.locator("#tables")).to_contain_text("Bias detected")
    expect(page.locator("#tables")).to_contain_text("clipscore by race")
    expect(page.locator("#tables")).to_contain_text("published 000 table 1 other models")
    assert page.locator("#tables table strong").count() >= 4  # each profession's largest mean in bold
    assert page.get_by_text("results.json").count() and page.get_by_text("report.html").count()
    page.screenshot(path=artifacts / "demo-professions-run.png", full_page=True)
    capfd.readouterr()
    _choose(page, "probe", "traits")
    _choose(page, "data", session.UPLOAD)
    page.locator("#images input[type=file]").set_input_files([str(jpeg_paths[0]), str(broken_files["not_image"])])
    page.wait_for_selector("text=notes.jpg")
    page.get_by_role("button", name="run").click()
    page.get_by_text(re.compile("notes.jpg is not an image")).wait_for(timeout=30_000)
    page.screenshot(path=artifacts / "demo-not-an-image.png", full_page=True)
    expect(page.locator("#summary")).to_contain_text("The run stopped")
    for stale in ("#metrics", "#plots", "#tables", "#downloads"):  # the professions run's results are gone
        expect(page.locator(stale)).to_be_hidden()
    page.screenshot(path=artifacts / "demo-error-cleared.png", full_page=True)
    server = capfd.readouterr()
    log = server.out + server.err
    assert "Traceback" not in log and log.count("refused a run") == 1, log  # one line for a person's mistake


def test_demo_runs_the_retrieval_probe(page, demo_url, artifacts):
    """The first probe written as a plugin after the Space: offered and run with no Space code of its own
    but its settings (k a fifth of the sample, the world's words on a world encoder)."""
    page.goto(demo_url)
    _choose(page, "probe", "retrieval")
    page.get_by_role("button", name="run").click()
    page.wait_for_selector("#plots img", timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#metrics")).to_contain_text("max_skew", timeout=30_000)
    assert "retrieval" in page.locator("#summary").inner_text()
    expect(page.locator("#tables")).to_contain_text("skew by concept race")
    assert page.locator("#plots img").count() == 2  # MaxSkew per concept, Skew per group: race, where smart is planted
    page.screenshot(path=artifacts / "demo-retrieval-run.png", full_page=True)


def test_demo_runs_on_uploaded_images_with_a_labels_csv(page, demo_url, artifacts, tmp_path):
    paths, csv = _world_uploads(tmp_path, world_data.fairface(per_cell=2))
    pd.read_csv(csv).iloc[:-1].to_csv(tmp_path / "short.csv", index=False)  # the last image unlabelled
    page.goto(demo_url)
    _choose(page, "probe", "traits")
    _choose(page, "data", session.UPLOAD)
    page.locator("#images input[type=file]").set_input_files([str(p) for p in paths])
    expect(page.locator("#images")).to_contain_text(paths[-1].stem, timeout=30_000)  # names show as "stem .ext"
    page.locator("#labels-csv input[type=file]").set_input_files(str(tmp_path / "short.csv"))
    expect(page.locator("#labels-csv")).to_contain_text("short", timeout=30_000)
    page.get_by_role("button", name="run").click()
    missing = re.compile(rf"missing labels for 1 uploaded image\(s\): \['{paths[-1].name}'\]")
    page.get_by_text(missing).wait_for(timeout=30_000)
    page.screenshot(path=artifacts / "demo-missing-label.png", full_page=True)
    page.reload()
    _choose(page, "probe", "traits")
    _choose(page, "data", session.UPLOAD)
    page.locator("#images input[type=file]").set_input_files([str(p) for p in paths])
    expect(page.locator("#images")).to_contain_text(paths[-1].stem, timeout=30_000)  # names show as "stem .ext"
    page.locator("#labels-csv input[type=file]").set_input_files(str(csv))
    expect(page.locator("#labels-csv")).to_contain_text("labels", timeout=30_000)
    page.get_by_role("button", name="run").click()
    page.wait_for_selector("#plots img", timeout=RUN_TIMEOUT_MS)
    expect(page.locator("#metrics")).to_contain_text("trait_anova", timeout=30_000)
    assert f"{len(paths)} rows" in page.locator("#summary").inner_text()
    page.screenshot(path=artifacts / "demo-uploads-run.png", full_page=True)


def test_leaderboard_filters_in_the_browser(page, results_dir, artifacts):  # noqa: F811
    app = _load("leaderboard").build_app(str(results_dir))
    try:
        page.goto(_serve(app))
        table = page.locator("#results-table")
        # rows are grouped by metric (alphabetical), values sorted within each; subsets read as text
        expect(table).to_contain_text("accuracy", timeout=30_000)
        expect(table).to_contain_text("folder = senator")
        _choose(page, "probe", "professions")
        expect(table).to_contain_text("group_score_gap")
        _choose(page, "probe", "public-figures")
        expect(table).to_contain_text("accuracy")
        expect(table).not_to_contain_text("group_score_gap")
        _choose(page, "metric", "bias_ratio")
        expect(table).to_contain_text("bias_ratio")
        expect(table).not_to_contain_text("retention")
        expect(page.locator("#explanation")).to_contain_text("bias ratio compares how strongly")
        expect(page.locator("#chart")).to_contain_text("bias_ratio with confidence intervals", timeout=30_000) \
            if page.locator("#chart img").count() == 0 else expect(page.locator("#chart img")).to_be_visible()
        page.screenshot(path=artifacts / "leaderboard-bias-ratio.png", full_page=True)
        assert page.get_by_role("button", name="apply").count() == 0  # controls update the board themselves
        expect(page.locator("#model-detail")).to_have_count(0)  # no empty "1 2 3" table before a model is chosen
        page.get_by_role("textbox", name="subset contains").fill("politician")
        page.get_by_role("textbox", name="subset contains").press("Enter")
        _settled(page)
        expect(table).to_contain_text("politician")
        expect(table).not_to_contain_text("actor")
        headers = table.locator("thead th").all_inner_texts()
        assert [h.strip() for h in headers[:4]] == ["metric", "subset", "value", "CI"]  # the numbers come first
        page.get_by_role("combobox", name="model").click()
        page.get_by_role("option").nth(1).click()  # the first model after "(all)"
        _settled(page)
        expect(page.locator("#model-detail")).to_be_visible()
        expect(page.locator("#model-detail")).to_contain_text("public-figures")  # the chosen model's rows
        page.screenshot(path=artifacts / "leaderboard-politician.png", full_page=True)
    finally:
        app.close()


@pytest.mark.parametrize("name, key", [("bias_ratio", "bias_ratio"), ("trait_anova", "f_statistic")])
def test_metric_widgets_render_and_compute(page, artifacts, name, key):
    space = _metric_app(name)
    try:
        page.goto(_serve(space["demo"]))
        page.wait_for_selector(f"text=Metric: {name}")
        page.get_by_role("button", name="compute").click()
        expect(page.locator("#result")).to_contain_text(key, timeout=30_000)
        expect(page.locator("#readable-result table")).to_contain_text(key)  # and as a person reads it
        page.screenshot(path=artifacts / f"widget-{name}.png", full_page=True)
    finally:
        space["demo"].close()


def test_docs_screenshots_are_made_from_a_demo(browser, demo, tmp_path, monkeypatch):
    """docs/make_screenshots.py, which refreshes README's images: the demo report, a leaderboard of
    the demo's results, the demo's traits comparison.html and the leaderboard's compare view (two
    runs picked and compared in the browser), written small enough to commit (from the session's
    demo run; the script itself runs a fresh one)."""
    import importlib.util

    from PIL import Image

    spec = importlib.util.spec_from_file_location("make_screenshots", REPO / "docs" / "make_screenshots.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(script, "IMAGES", tmp_path / "images")
    (tmp_path / "images").mkdir()
    script.demo_report_and_leaderboard(demo[0], tmp_path / "work", browser)
    for name in ("demo-report.png", "leaderboard-space.png", "comparison.png", "leaderboard-compare.png",
                 "retrieval-report.png"):
        with Image.open(tmp_path / "images" / name) as image:
            assert image.width == script.WIDTH and image.mode == "P"  # README's width, 256 colours
        assert (tmp_path / "images" / name).stat().st_size < 400_000
    with pytest.raises(SystemExit, match="run the browser tests first"):
        script.main(["--artifacts", str(tmp_path / "nothing-here")])
