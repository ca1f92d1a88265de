"""HTML pages from the Jinja2 templates in ``vlfair/report/templates``, autoescaped.

Every value a template shows is text: a label "<img onerror=...>" in a dataset reaches the page
escaped, with no ``html.escape`` at each place it is shown. HTML that is meant as HTML (an image,
a table from :func:`vlfair.report.tables.html_table`) comes from the templates' macros as
``Markup``, which autoescaping leaves as it is.
"""

from __future__ import annotations

import base64
import functools
import io
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

# how every figure vlfair writes is saved as a PNG: cropped to what it draws, and compressed at zlib's
# fastest level (a tall comparison forest: 0.90 s instead of 1.39 s, its file 5 % larger)
PNG_OPTIONS: dict[str, Any] = {"format": "png", "bbox_inches": "tight", "pil_kwargs": {"compress_level": 1}}


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
    """The macros of ``macros.html.j2`` (``table``, ``png``), callable from Python; each returns Markup."""
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


def figure_png(figure: Any, dpi: int = 100) -> bytes:
    """A matplotlib figure as PNG bytes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, dpi=dpi, **PNG_OPTIONS)
    return buffer.getvalue()


def inline_figure(figure: Any, alt: str, style: str = "max-width:100%") -> Markup:
    """A matplotlib figure as an <img> in the page."""
    return inline_png(figure_png(figure), alt, style)


__all__ = ["PNG_OPTIONS", "environment", "figure_png", "inline_figure", "inline_png", "macros", "page", "png_data",
           "render"]
