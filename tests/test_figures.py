"""Figures: drawn without pyplot (a long session keeps no figure it is done with), and the image mosaics."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlfair.figures import image_mosaic


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



@pytest.mark.parametrize("probe, dataset", [("professions", "synthetic:professions"),
                                            ("multilingual", "synthetic:multi30k")])
def test_a_run_written_without_figures_makes_none(probe, dataset, clip_dir, tmp_path, monkeypatch):
    """`vlfair run --no-figures` spends nothing on plots it never writes: within it no matplotlib figure is made
    (vlfair.figures.not_drawn), while the same run without the flag draws its figures."""
    import vlfair.figures
    from vlfair.cli import main

    made = []

    class Counted(vlfair.figures.Figure):
        def __init__(self, *args, **options):
            made.append(1)
            super().__init__(*args, **options)

    monkeypatch.setattr(vlfair.figures, "Figure", Counted)
    command = ["run", probe, "--model", str(clip_dir), "--dataset", dataset, "--set", "bootstrap=20",
               "--cache-dir", str(tmp_path / "cache")]
    assert main([*command, "--out", str(tmp_path / "bare"), "--no-figures"]) == 0
    assert not made and not list((tmp_path / "bare").glob("*.png"))
    assert vlfair.figures.drawing()  # the switch is the run's alone
    with vlfair.figures.not_drawn(False):
        assert vlfair.figures.drawing()
        with vlfair.figures.not_drawn():
            assert not vlfair.figures.drawing()
    assert main([*command, "--out", str(tmp_path / "drawn")]) == 0
    assert made and list((tmp_path / "drawn").glob("*.png"))
