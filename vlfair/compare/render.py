"""A comparison as people read it: comparison.json, a table of the differences (CSV, Markdown),
comparison.html with a forest plot per metric and pair, and the terminal's short table."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pandas as pd

from vlfair.atomic import OutputKind, atomic_output, final_path
from vlfair.compare.comparison import Comparison, undefined_notes, verdict_text
from vlfair.outputs import Table

# A is drawn in the first colour of the report's cycle, B in the second, as a report draws its
# first and second series (the demo's biased and control encoders); nothing detected: grey.
COLOURS = {"a": "C0", "b": "C1", "differ": "C4", "none": "0.55"}
FOREST_ROWS = 40  # a forest with more rows shows the 40 smallest p-values (the table has them all)
# a comparison's folder (vlfair compare --out): replaced as a whole, only when it holds nothing else
COMPARISON_OUTPUT = OutputKind("comparison")


def letters(count: int) -> list[str]:
    """A, B, C, ... (AA, AB after Z): how tables name the runs."""
    alphabet = string.ascii_uppercase
    return [alphabet[k] if k < 26 else alphabet[k // 26 - 1] + alphabet[k % 26] for k in range(count)]


def labels(comparison: Comparison) -> list[str]:
    return [run["label"] for run in comparison.content["runs"]]


def adjusted_column(comparison: Comparison) -> str:
    """The heading of the adjusted p-values' column: the correction the comparison ran ("p (Holm)", "q (BH)")."""
    from vlfair.verdicts import ADJUSTED_COLUMNS

    return ADJUSTED_COLUMNS[comparison.content["multiple_testing"]["method"]]


def differences_frame(comparison: Comparison, readable: bool = False) -> pd.DataFrame:
    """One row per difference: the pair, metric, subset, both values, A - B with its interval, the
    ratio, p and its adjustment (headed by the comparison's correction: :func:`adjusted_column`), the verdict (in
    words where ``readable``)."""
    from vlfair.report.numbers import format_interval, format_p, format_subset, format_value

    names = labels(comparison)
    rows = []
    for entry in comparison.content["differences"]:
        ci = entry["difference_ci"] or [None, None]
        row: dict[str, Any] = {"A": names[entry["a"]], "B": names[entry["b"]], "metric": entry["metric"],
                               "subset": format_subset(entry["subset"]) if readable else
                               json.dumps(entry["subset"], sort_keys=True, ensure_ascii=False)}
        if readable:
            row.update({"value A": format_value(entry["value_a"]), "value B": format_value(entry["value_b"]),
                        "A - B": format_value(entry["difference"]), "CI": format_interval(*ci),
                        "p": format_p(entry["p_value"], entry["log10_p_value"]),
                        adjusted_column(comparison): format_p(entry["p_adjusted"]),
                        "verdict": verdict_text(entry, names)})
        else:
            row.update({"value_a": entry["value_a"], "value_b": entry["value_b"], "difference": entry["difference"],
                        "ci_low": ci[0], "ci_high": ci[1], "ratio": entry["ratio"], "p_value": entry["p_value"],
                        "log10_p_value": entry["log10_p_value"], "p_adjusted": entry["p_adjusted"],
                        "neutral": entry["neutral"], "verdict": entry["verdict"]})
        rows.append(row)
    return pd.DataFrame(rows)


def forests(comparison: Comparison) -> dict[str, Any]:
    """A forest plot of A - B per pair of runs and metric: the zero line, each difference with its
    paired interval, coloured by the run found less biased (or higher), grey where nothing was."""
    from vlfair.report import plots
    from vlfair.report.numbers import format_subset

    names = labels(comparison)
    content = comparison.content
    figures: dict[str, Any] = {}
    frame = pd.DataFrame(content["differences"])
    if frame.empty:
        return figures
    for (a, b, metric), part in frame.groupby(["a", "b", "metric"], sort=False):
        if len(part) > FOREST_ROWS:
            part = part.sort_values("p_value", kind="stable").head(FOREST_ROWS)
        series = [_series(v, names[a], names[b]) for v in part["verdict"]]
        colours = {label: COLOURS[_side(v)] for v, label in zip(part["verdict"], series)}
        ci = [c if c else [float("nan")] * 2 for c in part["difference_ci"]]
        rows = pd.DataFrame({"label": [format_subset(s) or "(all)" for s in part["subset"]],
                             "value": part["difference"].astype(float), "low": [c[0] for c in ci],
                             "high": [c[1] for c in ci], "series": series})
        title = f"{metric}: {names[a]} - {names[b]}"
        figures[f"{metric} ({letters(len(names))[a]} - {letters(len(names))[b]})"] = plots.forest(
            rows, title, f"{metric}, A - B ({comparison.content['settings']['confidence']:.0%} paired CI)",
            neutral=0.0, colours=colours, neutral_label="no difference (0)")
    return figures


def _side(verdict_name: str) -> str:
    """Whose colour a difference takes: A's, B's, the colour of "they differ" or grey."""
    return {"a_less_biased": "a", "a_higher": "a", "b_less_biased": "b", "b_higher": "b",
            "differ": "differ"}.get(verdict_name, "none")


def _series(verdict_name: str, a: str, b: str) -> str:
    """A forest's legend entry for a verdict, naming the runs."""
    return {"a_less_biased": f"{a} less biased", "b_less_biased": f"{b} less biased", "a_higher": f"{a} higher",
            "b_higher": f"{b} higher", "differ": "differ; neither closer to no bias",
            "not_assessed": "not assessed"}.get(verdict_name, "no difference detected")


def notes(comparison: Comparison) -> list[str]:
    content = comparison.content
    settings, rows = content["settings"], content["rows"]
    said = [f"Probe {content['probe']} (version {content['probe_version']}); {rows['compared']} samples paired by id"
            + (" (only the rows every run holds: --on-common-rows)" if rows["on_common_rows"] else "") + ".",
            f"Intervals: {settings['confidence']:.0%} paired bootstrap ({settings['bootstrap']} resamples of the rows, "
            f"the same rows for every run, stratified as each metric's own interval; seed {settings['seed']}).",
            f"p: paired permutation test, each row's results swapped between the two runs or not "
            f"({settings['n_permutations']} relabellings at most; exact when all can be enumerated); "
            + _adjustment(content["multiple_testing"]),
            "Verdict: a difference is detected when the interval of A - B excludes 0 and p (adjusted, where "
            f"computed) is below {1 - settings['confidence']:.2g}; for a bias measure the run whose value is closer "
            "to the measure's neutral value (1 for a ratio, 0 for a gap or an F) is less biased when the interval "
            "of the two distances excludes 0; a level (a mean score, an accuracy) is only higher or lower."]
    said += [f"Not compared: {u['metric']} ({u['reason']})" for u in content["uncompared"]]
    said += undefined_notes(content["differences"])
    machines = machine_note(comparison)
    return said + ([machines] if machines else [])


def _adjustment(testing: dict[str, Any]) -> str:
    """What the comparison's adjustment ran over, in words (comparison.json's ``multiple_testing``)."""
    from vlfair.verdicts import CORRECTION_NAMES

    method = testing["method"]
    if "tests" not in testing:  # a comparison written before its families spanned the metrics: Holm over pairs
        return "Holm-adjusted over each metric's pairs of runs." if method == "holm" else "two runs: no adjustment."
    counted = f"{testing['tests']} differences of bias measures, and apart {testing.get('level_tests', 0)} of levels"
    if method == "none":
        return f"not adjusted ({counted}): with many metrics, some differences are found by chance."
    return f"adjusted by {CORRECTION_NAMES[method]} over {counted}."


def machine_note(comparison: Comparison) -> str | None:
    """One sentence naming how the runs' machines differ (results.json's ``machine``), or None where they ran
    alike: float32 sums differ in their last bits from one BLAS kernel or CPU to another, and so may a
    decision on a near-tie."""
    found = comparison.content.get("machine_differences") or []
    if not found:
        return None
    runs = letters(len(comparison.content["runs"]))
    parts = "; ".join(f"{entry['aspect']} (" + ", ".join(f"{run}: {value}" for run, value in zip(runs, entry["values"]))
                      + ")" for entry in found)
    return (f"The runs were computed on different machines: {parts}. A difference in the last digits of float32, "
            "or a near-tie decided the other way, may be the machine's, not the models'.")


def write_comparison(comparison: Comparison, out_dir: str | Path) -> Path:
    """comparison.json, differences.csv / .md and comparison.html into ``out_dir``, written as a
    whole (``vlfair.atomic``: an earlier comparison there is replaced once every file is written);
    returns the page."""
    with atomic_output(out_dir, COMPARISON_OUTPUT) as out:
        _write_comparison(comparison, out)
    return Path(out_dir) / "comparison.html"


def _write_comparison(comparison: Comparison, out: Path) -> None:
    from vlfair.report.pages import render, svg_data
    from vlfair.report.tables import grid
    from vlfair.report.writer import TABLE_FILES

    # the runs where they will be: a demo compares its runs in its staging folder, swapped in later
    content = {**comparison.content, "runs": [{**run, "path": str(final_path(run["path"]))}
                                              for run in comparison.content["runs"]]}
    (out / "comparison.json").write_text(json.dumps(content, indent=2, allow_nan=False, ensure_ascii=False))
    table = Table(differences_frame(comparison))
    for suffix, write in TABLE_FILES.items():
        write(table, out / f"differences.{suffix}")
    figures = forests(comparison)
    runs = [{**run, "letter": letter} for run, letter in zip(comparison.content["runs"],
                                                            letters(len(comparison.content["runs"])))]
    names = labels(comparison)
    title = f"vlfair comparison: {' vs '.join(names)} ({comparison.content['probe']})"
    page = render("comparison.html.j2", title=title, runs=runs, rows=comparison.content["rows"],
                  notes=notes(comparison), figures=[(name, svg_data(f)) for name, f in figures.items()],
                  tables=[("differences", grid(Table(differences_frame(comparison, readable=True))))])
    (out / "comparison.html").write_text(page)


def summary(comparison: Comparison, limit: int = 30) -> str:
    """The terminal's table: the bias measures' differences first (metric, subset, A, B, A - B
    [CI], p, verdict), then how many levels were compared; at most ``limit`` lines."""
    frame = differences_frame(comparison, readable=True)
    neutral = [entry["neutral"] is not None for entry in comparison.content["differences"]]
    bias = frame[neutral]
    shown = bias if len(bias) else frame
    columns = ["A", "B", "metric", "subset", "value A", "value B", "A - B", "CI", adjusted_column(comparison),
               "verdict"]
    if len(comparison.content["runs"]) == 2:
        columns = columns[2:]
    text = shown[columns].head(limit).to_string(index=False)
    left = len(frame) - min(len(shown), limit)
    if left:
        text += f"\n... and {left} more differences (levels such as mean scores among them): see differences.csv"
    return "\n".join([text, *undefined_notes(comparison.content["differences"])])  # shown in the table or not


__all__ = ["COLOURS", "COMPARISON_OUTPUT", "adjusted_column", "differences_frame", "forests", "letters",
           "machine_note", "notes", "summary", "write_comparison"]
