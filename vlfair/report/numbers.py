"""Numbers for people: significant digits, p-values that never read 0.

Every number a person reads goes through here: 3 significant digits, an integer part of four or more
digits kept whole (1392); p-values through :func:`format_p`, never 0 ("< 1e-308", or the log10's value,
"2.5e-347"). Tables go through :mod:`vlfair.report.tables` (one path to Markdown and HTML: bold column
maxima, p columns, footnotes; CSV keeps full precision); pages come from Jinja2 templates with autoescape
(``report/templates/``); subsets read ``key = value · key = value``, models by name (results.json
``model.name``). Tables have one header row and no 0..n-1 column; a cell that cannot be computed (an F of
0/0) gets a footnote (``Table(footnotes=...)``).
"""

from __future__ import annotations

import json
import math
from typing import Any

TINIEST = 5e-324  # the smallest float64 above 0; a p-value below it is stored as 0


MOST_DIGITS = 12  # significant digits at most where a value is told apart from its neutral value


def format_value(value: Any, digits: int = 3, apart_from: float | None = None) -> str:
    """``digits`` significant digits ("0.0891", "-117", "4.52e-05"), but a number of more integer
    digits keeps them all ("1392", not "1.39e+03": a person reads an F of 1392 at a glance) up to
    1e15; "" for a missing value. ``apart_from``: a neutral value the number must not read as where it
    differs from it (a bias ratio of 0.99982 detected beside p = 3e-11 reads "0.99982", not "1")."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    number = float(value)
    if 10**digits <= abs(number) < 1e15:
        return f"{number:.0f}"
    text = f"{number:.{digits}g}"
    if apart_from is not None and number != apart_from:
        while digits < MOST_DIGITS and text == format_value(apart_from, digits):
            digits += 1
            text = f"{number:.{digits}g}"
    return text


def format_p(p: Any, log10_p: Any = None) -> str:
    """A p-value as people read it: 0.0123, 3.4e-45; below float64's range (p stored as 0) its
    ``log10_p`` gives the number ("2.5e-347"), else "< 1e-308": a p-value is never 0; "" when
    there is none."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return ""
    p = float(p)
    if p < TINIEST:
        if log10_p is None or not math.isfinite(float(log10_p)):
            return "< 1e-308"
        exponent = math.floor(float(log10_p))
        mantissa = 10 ** (float(log10_p) - exponent)
        if round(mantissa, 1) >= 10:  # 9.96 rounds up to the next power of ten
            mantissa, exponent = mantissa / 10, exponent + 1
        return f"{mantissa:.2g}e{exponent}"
    return f"{p:.2g}" if p < 1e-3 else f"{p:.3g}"


def format_interval(low: Any, high: Any, digits: int = 3) -> str:
    """"[low, high]" with ``digits`` significant digits; "" when the interval is missing."""
    if format_value(low) == "" or format_value(high) == "":
        return ""
    return f"[{format_value(low, digits)}, {format_value(high, digits)}]"


def format_subset(subset: Any) -> str:
    """What a number was computed on, as text: {"trait": "smart/dumb", "gender": "Male"} (or its
    JSON) -> 'trait = smart/dumb · gender = Male'. Anything else is shown as it is."""
    if isinstance(subset, str):
        try:
            subset = json.loads(subset)
        except ValueError:
            return subset
    if not isinstance(subset, dict):
        return str(subset)
    return " · ".join(f"{k} = {v}" for k, v in subset.items())


def format_detectable(mde: Any) -> str:
    """A metric's smallest detectable deviations ([under, over] its neutral value, ``Metric.mde``) as a person
    reads them: "0.031" on one side, "0.029 under, 0.031 over" on both ("" where there are none)."""
    if not mde:
        return ""
    under, over = mde
    if under is None or over is None:
        return format_value(over if under is None else under)
    if format_value(under) == format_value(over):
        return format_value(under)
    return f"{format_value(under)} under, {format_value(over)} over"


__all__ = ["format_detectable", "format_interval", "format_p", "format_subset", "format_value"]
