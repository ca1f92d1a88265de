"""Figures: drawn without pyplot (a long session keeps no figure it is done with), and the image mosaics."""

from __future__ import annotations

import gc
import io
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import vlfair
from vlfair.figures import image_mosaic
from vlfair.probes import run_probe

# every probe that reads a dataset, each drawing its figures: image grids and heatmaps (professions),
# Grad-CAM overlays and bars (traits), a histogram, a scatter and bars (multilingual), forest plots
# (public figures). Each twice in a row: measured and dropped (where pyplot leaked), then written (the
# slow part); 32 figures in all, more than pyplot lets a process keep open before it warns.
PROBES = [("professions", "synthetic:professions", {"bootstrap": 20, "n_permutations": 0}),
          ("traits", "synthetic:fairface", {"bootstrap": 20, "per_cell": 4}),
          ("multilingual", "synthetic:multi30k", {"bootstrap": 20}),
          ("public-figures", "synthetic:pfi", {"bootstrap": 20})]
RUNS = [run for run in PROBES for _ in range(2)]


def _live_figures() -> int:
    from matplotlib.figure import Figure

    gc.collect()
    return sum(type(thing) is Figure for thing in gc.get_objects())  # type(): isinstance wakes lazy modules


@pytest.fixture(scope="module")
def probe_runs(clip_dir, tmp_path_factory) -> dict:
    """The runs above in one process: the figures made, the warnings, the figures alive before and
    after, and for each PNG written, whether it was cropped to the box of matplotlib's own tight crop."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from vlfair.report import pages, writer

    tmp_path = tmp_path_factory.mktemp("figure-runs")
    seen: dict = {"drawn": 0, "crops": []}

    def counted(self, *args, _made=Figure.__init__, **kwargs):
        seen["drawn"] += 1
        _made(self, *args, **kwargs)

    def compared(figure, target, dpi, _save=pages.save_png):
        ours = pages.tight_box(figure, dpi).extents
        _save(figure, target, dpi)
        # what savefig(bbox_inches="tight") crops to: the box after a drawing pass with the drawing off
        shown_at, figure.dpi = figure.dpi, dpi
        figure.draw_without_rendering()
        theirs = figure.get_tightbbox().padded(plt.rcParams["savefig.pad_inches"]).extents
        figure.dpi = shown_at
        seen["crops"].append((Path(target).name, np.allclose(ours, theirs, rtol=0, atol=1e-9)))

    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    seen["before"] = _live_figures()
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as caught:
        patch.setattr(Figure, "__init__", counted)
        patch.setattr(writer, "save_png", compared)
        warnings.simplefilter("always")
        for i, (probe, dataset, settings) in enumerate(RUNS):
            out = tmp_path / f"run-{i}" if i % 2 == 1 else None
            run_probe(probe, encoder, dataset, out, cache_dir=tmp_path / "cache", settings=settings)
            if i == 1:
                seen["written"] = any((tmp_path / "run-1").glob("median_images_*.png"))
    seen["after"], seen["pyplot"] = _live_figures(), plt.get_fignums()
    seen["warnings"] = [str(w.message) for w in caught]
    return seen


def test_probe_runs_in_one_process_leave_no_figure_and_no_warning(probe_runs):
    """A Space, the demo or a loop over models runs probe after probe in one process: each run's
    figures go once written (or once its results are dropped), and matplotlib never warns that
    too many figures are open, however many were drawn."""
    import matplotlib.pyplot as plt

    assert probe_runs["written"]  # figures were drawn and written
    assert probe_runs["drawn"] > plt.rcParams["figure.max_open_warning"]  # more than pyplot keeps open unwarned
    assert probe_runs["pyplot"] == []  # pyplot's registry never saw them
    assert probe_runs["after"] == probe_runs["before"]  # and none is kept alive: memory stays flat
    assert probe_runs["warnings"] == []


def test_every_png_a_probe_writes_is_cropped_as_matplotlib_crops_it(probe_runs):
    """save_png measures the tight box without matplotlib's extra drawing pass: the same box (so the
    same pixels: test_a_png_has_the_pixels_of_matplotlib_s_tight_crop) for every kind of figure the
    probes draw (mosaics, heatmaps, overlays with colour bars, histograms, scatters, bars with legends,
    forests)."""
    names = {name for name, _ in probe_runs["crops"]}
    assert len(names) == 16 and any(n.startswith("median_images_") for n in names)
    assert [name for name, same in probe_runs["crops"] if not same] == []


def _solid(colour: tuple[int, int, int], size: tuple[int, int]) -> Image.Image:
    return Image.new("RGB", size, colour)


def test_an_image_mosaic_is_one_axes_with_every_picture_in_its_cell():
    red, blue, green = _solid((255, 0, 0), (20, 10)), _solid((0, 0, 255), (300, 300)), _solid((0, 255, 0), (8, 8))
    figure = image_mosaic([[red, None], [blue, green]], "a title", row_labels=["doctor", "nurse"],
                          column_labels=["Female", "Male"], captions=[["1.00", ""], ["2.00", "3.00"]], empty="no image",
                          cell_pixels=64)
    assert len(figure.axes) == 1 and figure._suptitle.get_text() == "a title"
    axis = figure.axes[0]
    assert [t.get_text() for t in axis.get_xticklabels()] == ["Female", "Male"]
    assert [t.get_text() for t in axis.get_yticklabels()] == ["doctor", "nurse"]
    assert sorted(t.get_text() for t in axis.texts) == ["1.00", "2.00", "3.00", "no image"]
    mosaic = np.asarray(axis.images[0].get_array())
    cell_w, cell_h = 64 + 4, 64 + 8 + 4  # picture, caption strip, gap
    centre = lambda row, column: tuple(mosaic[row * cell_h + 32, column * cell_w + 32])  # noqa: E731
    assert centre(0, 0) == (255, 0, 0) and centre(1, 0) == (0, 0, 255) and centre(1, 1) == (0, 255, 0)
    assert centre(0, 1) == (255, 255, 255)  # the empty cell stays blank, with its text
    # every picture fills its square along its longer side, small ones enlarged, large ones shrunk
    assert (mosaic[32, :64] == (255, 0, 0)).all(axis=1).sum() == 64  # 20 x 10 -> 64 x 32
    assert (mosaic[cell_h + 32, :cell_w] == (0, 0, 255)).all(axis=1).sum() == 64


@pytest.mark.parametrize("rows", [1, 7])
def test_a_mosaic_with_row_titles_keeps_the_pictures_aspect(rows):
    cells = [[_solid((9, 9, 9), (16, 16))] * 4 for _ in range(rows)]
    figure = image_mosaic(cells, "prompts", row_titles=[f"prompt {i}" for i in range(rows)], cell_inches=1.6)
    width, height = figure.get_size_inches()
    axis = figure.axes[0]
    box = axis.get_position()  # the axes fills the figure's width: no band of white beside or above it
    mosaic = axis.images[0].get_array()
    assert box.width * width == pytest.approx(1.6 * 4) and box.height * height == pytest.approx(
        1.6 * 4 * mosaic.shape[0] / mosaic.shape[1])
    assert [t.get_text() for t in axis.texts] == [f"prompt {i}" for i in range(rows)]


@pytest.mark.parametrize("rows", [1, 12, 40])
def test_the_title_and_the_column_labels_never_overlap_the_pictures_however_many_rows(rows):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figure = image_mosaic([[_solid((9, 9, 9), (16, 16))] * 4 for _ in range(rows)], "a title",
                          row_labels=[f"row {i}" for i in range(rows)], column_labels=["A", "B", "C", "D"])
    renderer = FigureCanvasAgg(figure).get_renderer()
    axis = figure.axes[0]
    title = figure._suptitle.get_window_extent(renderer)
    labels = [label.get_window_extent(renderer) for label in axis.get_xticklabels()]
    pictures = axis.get_window_extent(renderer)
    assert all(title.y0 > label.y1 for label in labels) and all(label.y0 >= pictures.y1 for label in labels)
    assert title.y1 <= figure.bbox.y1  # inside the figure


def test_a_mosaic_without_rows_says_so():
    with pytest.raises(ValueError, match="image_mosaic\\('empty'\\): no rows of pictures to draw"):
        image_mosaic([], "empty")


LEAK = textwrap.dedent("""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def test_leaves_figures_open():
        for _ in range(21):
            plt.figure()
""")


def test_the_suite_fails_a_test_that_leaves_more_than_20_figures_open(tmp_path):
    """The project's pytest configuration makes matplotlib's "More than 20 figures" warning an error,
    so a figure left open (memory that grows with every run of a Space or a sweep) cannot come back."""
    (tmp_path / "test_leak.py").write_text(LEAK)
    config = Path(__file__).resolve().parents[1] / "pyproject.toml"
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(config),
                             "--rootdir", str(tmp_path), str(tmp_path / "test_leak.py")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "RuntimeWarning: More than 20 figures have been opened" in result.stdout, \
        result.stdout[-2000:]


def test_a_png_has_the_pixels_of_matplotlib_s_tight_crop(tmp_path):
    """A mosaic with long row labels and a plot whose legend and colour bar stand outside its axes:
    save_png's PNG is pixel for pixel the one savefig(bbox_inches="tight") writes, figure_svg's SVG
    byte for byte; a figure with a layout engine too."""
    import matplotlib

    from vlfair.figures import subplots
    from vlfair.report.pages import figure_svg, save_png

    mosaic = image_mosaic([[_solid((200, 10, 10), (30, 40)), None]], "a title", empty="none",
                          row_labels=["a rather long profession name"], column_labels=["Female", "Male"])
    plot, axis = subplots(figsize=(3, 2))
    shown = axis.imshow(np.arange(12.0).reshape(3, 4))
    axis.plot([0, 3], [0, 2], label="a line with a long label")
    axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    plot.colorbar(shown, ax=axis, label="value")
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "vlfair"}):
        theirs_svg = io.BytesIO()
        plot.savefig(theirs_svg, format="svg", bbox_inches="tight", metadata={"Date": None})
    assert figure_svg(plot) == theirs_svg.getvalue()  # the SVG too, byte for byte
    laid_out, axis = subplots(figsize=(3, 2), layout="constrained")  # a layout engine: matplotlib crops it
    axis.set_ylabel("a label the layout makes room for")
    for name, figure in (("mosaic", mosaic), ("plot", plot), ("laid-out", laid_out)):
        save_png(figure, tmp_path / f"{name}.png", dpi=110)
        figure.savefig(tmp_path / f"{name}-tight.png", dpi=110, bbox_inches="tight")
        ours, theirs = (np.asarray(Image.open(tmp_path / f"{name}{end}.png")) for end in ("", "-tight"))
        assert ours.shape == theirs.shape and np.array_equal(ours, theirs), name

