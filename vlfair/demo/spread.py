"""The demo's spread over phrasings (issue 46): each world encoder measured again with two more phrasings of
the professions' and traits' prompts. Does a verdict hold whichever wording asks? The planted biases
should be found with every phrasing, and nothing where nothing was planted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlfair.demo.entries import TRAITS_SETTINGS, WORLD_DATA
from vlfair.demo.shipped import display_name
from vlfair.outputs import Table

# the probes the demo rephrases, with the phrasings it adds to each study's prompt (phrasing 1). Public figures
# takes phrasings too, but its runs with them took 2.7 s more of the demo's longest probe (10 s), so the demo
# leaves it to `vlfair run public-figures --set phrasings=...`
PHRASED = {"professions": ["a picture of a {profession}", "an image of a {profession}"],
           "traits": ["a {trait} human", "someone {trait}"]}
# the settings of the demo's own run of the probe (vlfair.demo.entries), less its figures' (Grad-CAM)
SETTINGS: dict[str, dict[str, Any]] = {"traits": {**TRAITS_SETTINGS, "gradcam": None}}
FOLDER = "{probe}-phrasings"  # each encoder's run, beside its study's: out/NAME/PROBE-phrasings
WITHOUT_FIGURES = ("Figures: not drawn for the demo's runs with phrasings (its report shows their phrasings tables; "
                   "the study's figures are in the encoder's run of the study's prompt alone).")


def measure_spread(probe: str, encoders: dict[str, Any], data: dict[str, Any], out: Path, cache_dir: Any
                   ) -> dict[str, Any] | None:
    """``probe`` with its :data:`PHRASED` phrasings on each encoder (``{"biased": ..., "control": ...}``), written
    to out/NAME/PROBE-phrasings: each encoder's phrasings table and one line saying where its biases are found
    (None for a probe the demo does not rephrase)."""
    from vlfair.figures import not_drawn
    from vlfair.probes import measure_probe

    if probe not in PHRASED:
        return None
    tables, said = [], []
    for name, encoder in encoders.items():
        with not_drawn():  # written without its figures: none made
            run = measure_probe(probe, encoder, data[str(WORLD_DATA[probe])], cache_dir=cache_dir,
                                settings={**SETTINGS.get(probe, {}), "phrasings": PHRASED[probe]})
        run.write(out / name / FOLDER.format(probe=probe), WITHOUT_FIGURES)
        if "phrasings" not in run.output.tables:  # no bias measure defined with every phrasing: nothing to show
            said.append(f"{probe} with {len(PHRASED[probe]) + 1} phrasings, {display_name(name)}: no phrasings table")
            continue
        table = Table.of(run.output.tables["phrasings"])
        tables.append({"encoder": display_name(name), "table": table,
                       "href": f"{name}/{FOLDER.format(probe=probe)}/report.html"})
        said.append(f"{probe} with {len(PHRASED[probe]) + 1} phrasings, {display_name(name)}: " + found_in(table))
    return {"probe": probe, "tables": tables, "said": said}


def found_in(table: Table) -> str:
    """Where a phrasings table finds its biases: each row found in any phrasing, with how many."""
    frame = table.frame
    found = [f"{' '.join(map(str, key if isinstance(key, tuple) else (key,)))} in {text}"
             for key, text in frame["found in"].items() if not str(text).startswith("0 of")]
    return "; ".join(found) if found else "found in no phrasing"


__all__ = ["PHRASED", "found_in", "measure_spread"]
