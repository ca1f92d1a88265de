"""HTML pages from the Jinja2 templates in ``vlfair/report/templates``, autoescaped.

Every value a template shows is text: a label "<img onerror=...>" in a dataset reaches the page
escaped, with no ``html.escape`` at each place it is shown. HTML that is meant as HTML (an image,
a table from :func:`vlfair.report.tables.html_table`) comes from the templates' macros as
``Markup``, which autoescaping leaves as it is.

A figure shown in a page (comparison.html's forest plot) is an SVG whose text the browser sets
(:func:`figure_svg`): twice as fast to draw as a PNG.
"""

from __future__ import annotations

import base64
import functools
import io
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

# how every figure vlfair writes is saved as a PNG: cropped to what it draws (save_png), and compressed at
# zlib's fastest level (a tall comparison forest: 0.90 s instead of 1.39 s, its file 5 % larger)
PNG_OPTIONS: dict[str, Any] = {"format": "png", "pil_kwargs": {"compress_level": 1}}
# a figure only a page shows (a comparison's forests, the demo's) is an SVG whose text is text, set by the
# browser: no glyph rasterized, no PNG encoded (a forest of 40 rows: 0.37 s instead of 0.76 s), sharp at any
# zoom; the salt makes its clip paths' ids, and so the file, the same at every run
SVG_OPTIONS: dict[str, Any] = {"format": "svg", "metadata": {"Date": None}}
SVG_DPI = 72  # matplotlib's SVG backend lays a figure out at 72 dpi, whatever the figure's own


@functools.cache
def environment() -> jinja2.Environment:
    """The one Jinja2 environment of vlfair's pages (templates read from the installed package)."""
    return jinja2.Environment(loader=jinja2.PackageLoader("vlfair.report", "templates"), autoescape=True,
                              undefined=jinja2.StrictUndefined,  # a misspelt name fails, not an empty cell
                              trim_blocks=True, lstrip_blocks=True)


def render(template: str, **context: Any) -> str:
    """The template ``template`` (a file name in ``templates/``) filled with ``context``."""
    return environment().get_template(template).render(**context)


def macros() -> Any:
    """The macros of ``macros.html.j2`` (``table``, ``png``, ``svg``), callable from Python; each returns Markup."""
    return environment().get_template("macros.html.j2").module


def page(title: str, body: str) -> str:
    """A self-contained HTML page (no external assets) around ``body``, which is HTML the caller
    built and trusts; ``title`` is text."""
    return render("page.html.j2", title=title, body=Markup(body))


def png_data(png: Path | str | bytes) -> str:
    """A PNG (a file, or its bytes) as base64 text for a ``data:`` URL."""
    return base64.b64encode(png if isinstance(png, bytes) else Path(png).read_bytes()).decode()


def inline_png(path: Path | str | bytes, alt: str, style: str = "max-width:100%") -> Markup:
    """An <img> carrying the PNG (a file, or its bytes) in the page itself."""
    return macros().png(png_data(path), alt, style)


def tight_box(figure: Any, dpi: float, renderer: Any = None) -> Any:
    """The box ``bbox_inches="tight"`` crops a figure saved at ``dpi`` to (inches, padded as savefig pads),
    measured without drawing it.

    matplotlib measures it by drawing the whole figure once with the drawing switched off, which still
    resamples every image and lays out every glyph: 40 % of a save (a mosaic of 12 x 4 pictures: 0.93 s
    with it, 0.56 s without). Measuring the artists' extents needs none of that. The same box where no
    layout engine moves the artists at draw time (none of vlfair's figures has one; tests compare the
    pixels with matplotlib's own crop). ``renderer``: what measures the text (default: Agg's, as a PNG
    is drawn)."""
    import matplotlib
    from matplotlib.backends.backend_agg import RendererAgg

    width, height = figure.get_size_inches() * dpi
    shown_at = figure.dpi
    figure.dpi = dpi  # the extents in pixels at the saving dpi, turned into inches by the figure's dpi
    try:
        box = figure.get_tightbbox(renderer or RendererAgg(int(width), int(height), dpi))
    finally:
        figure.dpi = shown_at
    return box.padded(matplotlib.rcParams["savefig.pad_inches"])


def _crop(figure: Any, dpi: float, renderer: Any = None) -> Any:
    """The ``bbox_inches`` a figure is saved with: :func:`tight_box`, or matplotlib's own "tight" for a figure
    with a layout engine (which draws it first to lay it out)."""
    return "tight" if figure.get_layout_engine() is not None else tight_box(figure, dpi, renderer)


def save_png(figure: Any, target: Any, dpi: int) -> None:
    """``figure`` as a PNG in ``target`` (a path or a binary file), cropped to what it draws."""
    figure.savefig(target, dpi=dpi, bbox_inches=_crop(figure, dpi), **PNG_OPTIONS)


def figure_png(figure: Any, dpi: int = 100) -> bytes:
    """A matplotlib figure as PNG bytes."""
    buffer = io.BytesIO()
    save_png(figure, buffer, dpi)
    return buffer.getvalue()


def figure_svg(figure: Any) -> bytes:
    """A matplotlib figure as SVG bytes, its text as text."""
    import matplotlib
    from matplotlib.backends.backend_svg import RendererSVG

    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "vlfair"}):
        width, height = figure.get_size_inches() * SVG_DPI  # the text measured as the SVG renderer sets it
        crop = _crop(figure, SVG_DPI, RendererSVG(width, height, io.StringIO(), image_dpi=SVG_DPI))
        figure.savefig(buffer, bbox_inches=crop, **SVG_OPTIONS)
    return buffer.getvalue()


def svg_data(figure: Any) -> str:
    """A matplotlib figure as base64 SVG text for a ``data:`` URL."""
    return base64.b64encode(figure_svg(figure)).decode()


def inline_figure(figure: Any, alt: str, style: str = "max-width:100%") -> Markup:
    """A matplotlib figure as an <img> in the page (an SVG: :func:`figure_svg`)."""
    return macros().svg(svg_data(figure), alt, style)


__all__ = ["PNG_OPTIONS", "SVG_DPI", "SVG_OPTIONS", "environment", "figure_png", "figure_svg", "inline_figure",
           "inline_png", "macros", "page", "png_data", "render", "save_png", "svg_data", "tight_box"]
