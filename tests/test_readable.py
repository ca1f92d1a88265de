"""What a person reads (issue 17, first part): numbers, p-values, heatmap labels, a Space that starts."""

from __future__ import annotations

import pandas as pd
import pytest

from vlfair.report.numbers import format_interval, format_p, format_value


@pytest.mark.parametrize("p, text", [(0.0, "< 1e-308"), (3.4e-45, "3.4e-45"), (2.0e-238, "2e-238"), (0.0123, "0.0123"),
                                     (0.5, "0.5"), (None, ""), (float("nan"), "")])
def test_a_p_value_never_reads_zero(p, text):
    assert format_p(p) == text


def test_values_and_intervals_to_three_significant_digits():
    assert format_value(0.8568112400733048) == "0.857" and format_value(1181.74) == "1.18e+03"
    assert format_interval(0.8312575331458417, 0.8836651904488503) == "[0.831, 0.884]"
    assert format_interval(None, 1.0) == "" and format_value(None) == ""


def test_the_demo_space_metrics_table_is_readable():
    from vlfair.space.session import readable_metrics

    frame = pd.DataFrame({"metric": ["trait_anova"], "subset": ['{"trait": "smart/dumb"}'], "value": [1391.72345],
                          "ci_low": [None], "ci_high": [None], "p_value": [0.0]})
    shown = readable_metrics(frame)
    assert shown.loc[0, "value"] == "1.39e+03" and shown.loc[0, "p"] == "< 1e-308" and shown.loc[0, "CI"] == ""


def test_heatmap_labels_are_dark_on_light_cells_and_light_on_dark_ones():
    from vlfair.probes.plots import heatmap

    figure = heatmap(pd.DataFrame({"low": [50.0], "high": [65.1]}, index=["Female"]), "t", "CLIPScore")
    colours = {text.get_text(): text.get_color() for text in figure.axes[0].texts}
    assert colours == {"50.0": "white", "65.1": "black"}  # viridis: dark purple, then yellow


def test_the_leaderboard_space_starts_without_its_data(monkeypatch):
    from test_spaces import _load

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    app = _load("leaderboard").build_app("acme/no-such-results")  # offline: the Hub cannot answer
    summary = next(b for b in app.blocks.values() if getattr(b, "elem_id", None) == "summary")
    assert "No results: 'acme/no-such-results' could not be read" in summary.value and "VLFAIR_RESULTS" in summary.value


def test_the_leaderboard_chart_marks_the_neutral_value():
    from test_spaces import _load

    app = _load("leaderboard")
    rows = pd.DataFrame({"model": ["m"], "subset": ['{"a": 1}'], "metric": ["bias_ratio"], "value": [0.85],
                         "ci_low": [0.8], "ci_high": [0.9]})
    figure = app.metric_chart(rows, "bias_ratio")
    assert [tuple(line.get_ydata()) for line in figure.axes[0].get_lines() if line.get_linestyle() == "--"] == [(1.0, 1.0)]


def test_every_run_option_has_help():
    from vlfair.cli import build_parser

    parser = build_parser()
    run = parser._subparsers._group_actions[0].choices["run"]
    missing = [a.option_strings[0] for a in run._actions if a.option_strings and not a.help]
    assert missing == [] and parser._subparsers._group_actions[0].choices["demo"].description


def test_the_demo_summary_shows_subsets_a_legend_and_the_tally():
    from vlfair.demo.run import _entry, summary_table

    entries = [_entry("professions", "relative bias_ratio", {"profession": "doctor"}, "biased", "< 1", 0.88, [0.86, 0.9],
                      True, 1.0, -1),
               _entry("professions", "relative bias_ratio", {"profession": "nurse"}, "biased", "> 1", 1.15, [1.12, 1.18],
                      True, 1.0, 1),
               _entry("professions", "relative bias_ratio", {"profession": "doctor"}, "control", "1 (none)", 0.9,
                      [0.85, 0.95], True, 1.0, 0)]
    text = summary_table(entries)
    assert "profession=doctor" in text and "profession=nurse" in text  # the rows are told apart
    assert "detected: the interval excludes the neutral value" in text
    assert text.rstrip().endswith("biased: 2/2 planted biases found; control: 1/1 false alarms")


def test_the_leaderboard_table_reads_as_text_and_sorts_within_a_metric():
    from test_spaces import _load

    app = _load("leaderboard")
    board = pd.DataFrame({"model": ["m"] * 3, "probe": ["traits"] * 3, "metric": ["trait_anova", "bias_ratio", "trait_anova"],
                          "subset": ['{"trait": "smart/dumb", "gender": "Male"}', '{"a": 1}', '{"trait": "happy/sad"}'],
                          "value": [141.4812345, 0.8568112, 14.4], "ci_low": [None, 0.8312, None],
                          "ci_high": [None, 0.8837, None], "p_value": [0.0, 0.01, 1.9e-16], "dataset": ["d"] * 3,
                          "created": ["t"] * 3})
    rows = app.filter_board(board)
    assert list(rows["metric"]) == ["bias_ratio", "trait_anova", "trait_anova"]  # grouped by metric ...
    assert list(rows["value"][1:]) == [141.4812345, 14.4]  # ... and sorted within it
    shown = app.display(rows)
    assert shown.loc[1, "subset"] == "trait = smart/dumb · gender = Male" and shown.loc[1, "value"] == "141"
    assert shown.loc[0, "CI"] == "[0.831, 0.884]" and shown.loc[1, "p"] == "< 1e-308"


def test_demo_world_encoders_are_named_in_results(tmp_path, demo_cache):
    from vlfair.demo.shipped import WORLDS, display_name, world_encoder
    from vlfair.probes import run_probe

    encoder = world_encoder(WORLDS["biased"], demo_cache, name=display_name("biased"))
    results = run_probe("professions", encoder, "synthetic:professions", tmp_path, cache_dir=None,
                        settings={"bootstrap": 0, "n_permutations": 0})
    assert results["model"]["name"] == "demo-world biased" and results["model"]["spec"] != "demo-world biased"
    assert "<b>Model</b> demo-world biased" in (tmp_path / "report.html").read_text()


def test_report_headers_name_things_plainly(clip_dir, tmp_path):
    import vlfair
    from vlfair.probes import run_probe
    from vlfair.t2i.generators import CallableGenerator
    from PIL import Image

    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    run_probe("professions", encoder, "synthetic:professions", tmp_path / "p", cache_dir=None,
              settings={"bootstrap": 0, "n_permutations": 0})
    assert "split None" not in (tmp_path / "p" / "report.html").read_text()  # no split given: none shown
    red = CallableGenerator(lambda prompts, seeds: [Image.new("RGB", (8, 8), (200, 0, 0)) for _ in prompts], "red squares")
    results = run_probe("word-influence", encoder, None, tmp_path / "w", cache_dir=None,
                        settings={"prompts": ["a nurse"], "transmuter": {"name": "lexicon"}, "words": "content",
                                  "candidates": 1, "images_per_prompt": 2, "original_images": 2},
                        components={"generator": red, "classifier": lambda images: ["female"] * len(images)})
    assert results["dataset"]["name"] == "generated:red squares"  # not a Python dict


@pytest.mark.parametrize("settings, text", [
    ({"bootstrap": 200, "n_permutations": 0, "seed": 3}, "Intervals and error bars: 95% stratified-bootstrap CIs, 200 resamples (seed 3)."),
    ({"bootstrap": 0, "n_permutations": 0}, "Intervals: none (bootstrap=0)"),
])
def test_reports_say_what_every_interval_is(clip_dir, tmp_path, settings, text):
    import vlfair
    from vlfair.probes import run_probe

    run_probe("professions", vlfair.load_encoder(str(clip_dir), dtype="float32"), "synthetic:professions", tmp_path,
              cache_dir=None, settings=settings)
    assert text in (tmp_path / "report.html").read_text()
