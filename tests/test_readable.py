"""What a person reads (issue 17, first part): numbers, p-values, heatmap labels, a Space that starts."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from vlfair.report.numbers import format_interval, format_p, format_value


@pytest.mark.parametrize("p, text", [(0.0, "< 1e-308"), (3.4e-45, "3.4e-45"), (2.0e-238, "2e-238"), (0.0123, "0.0123"),
                                     (0.5, "0.5"), (None, ""), (float("nan"), "")])
def test_a_p_value_never_reads_zero(p, text):
    assert format_p(p) == text


def test_values_and_intervals_to_three_significant_digits():
    assert (format_value(0.8568112400733048) == "0.857" and format_value(1181.74) == "1182"
            and format_value(2.5e16) == "2.5e+16")
    assert format_interval(0.8312575331458417, 0.8836651904488503) == "[0.831, 0.884]"
    assert format_interval(None, 1.0) == "" and format_value(None) == ""


def test_the_demo_space_metrics_table_is_readable():
    from vlfair.space.session import readable_metrics

    frame = pd.DataFrame({"metric": ["trait_anova"], "subset": ['{"trait": "smart/dumb"}'], "value": [1391.72345],
                          "ci_low": [None], "ci_high": [None], "p_value": [0.0]})
    shown = readable_metrics(frame)
    assert shown.loc[0, "value"] == "1392" and shown.loc[0, "p"] == "< 1e-308" and shown.loc[0, "CI"] == ""


def test_heatmap_labels_are_dark_on_light_cells_and_light_on_dark_ones():
    from vlfair.report.plots import heatmap

    figure = heatmap(pd.DataFrame({"low": [50.0], "high": [65.1]}, index=["Female"]), "t", "CLIPScore")
    colours = {text.get_text(): text.get_color() for text in figure.axes[0].texts}
    assert colours == {"50.0": "white", "65.1": "black"}  # viridis: dark purple, then yellow


def test_the_leaderboard_space_starts_without_its_data(monkeypatch):
    from test_spaces import _load

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    app = _load("leaderboard").build_app("acme/no-such-results")  # offline: the Hub cannot answer
    summary = next(b for b in app.blocks.values() if getattr(b, "elem_id", None) == "summary")
    from vlfair.report.markup import markdown_text

    said = f"No results: {markdown_text(repr('acme/no-such-results'))} could not be read"  # a name from outside: text
    assert said in summary.value and "VLFAIR_RESULTS" in summary.value


def test_the_leaderboard_chart_marks_the_neutral_value():
    from test_spaces import _load

    app = _load("leaderboard")
    rows = pd.DataFrame({"model": ["m"], "subset": ['{"a": 1}'], "metric": ["bias_ratio"], "value": [0.85],
                         "ci_low": [0.8], "ci_high": [0.9]})
    figure = app.metric_chart(rows, "bias_ratio")
    assert [tuple(line.get_xdata()) for line in figure.axes[0].get_lines()
            if line.get_linestyle() == "--"] == [(1.0, 1.0)]
    assert [t.get_text() for t in figure.axes[0].get_yticklabels()] == ["a = 1"]  # horizontal, readable labels
    assert figure.axes[0].get_title() == "bias_ratio with confidence intervals (m)"


def test_every_probe_has_its_own_help_with_its_own_options(capsys):
    from vlfair.cli import build_parser, main
    from vlfair.probes import probe_class, probe_names

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    probes = commands["run"]._subparsers._group_actions[0].choices
    assert list(probes) == probe_names()  # the commands are the registry's probes
    for name, probe in probes.items():
        assert ("--dataset" in probe._option_string_actions) == probe_class(name).needs_dataset, name
        missing = [a.option_strings[0] for a in probe._actions if a.option_strings and not a.help]
        assert missing == [] and probe.description == probe_class(name).description, name
        settings_keys = set(probe_class(name).Settings.model_fields) - {"version", "notes"}
        set_help = next(a.help for a in probe._actions if "--set" in a.option_strings)
        listed = set_help.split(": ", 1)[1].removesuffix(" (repeatable; the value is read as YAML)").split(", ")
        assert set(listed) == settings_keys, name
    assert commands["demo"].description
    helps = {}
    for name in probes:
        with pytest.raises(SystemExit):
            main(["run", name, "--help"])
        helps[name] = capsys.readouterr().out
    assert "--per-cell" in helps["traits"] and "--generator" not in helps["traits"]
    assert "--generator" in helps["word-influence"] and "--dataset" not in helps["word-influence"]
    assert all("--per-cell" not in helps[n] and "--generator" not in helps[n]
               for n in probes if n not in ("traits", "word-influence"))
    assert len(set(helps.values())) == len(helps)


def test_the_demo_summary_shows_subsets_a_legend_and_the_tally():
    from vlfair.demo.entries import make_entry
    from vlfair.demo.run import summary_table

    entries = [make_entry("professions", "relative bias_ratio", {"profession": "doctor"}, "biased", planted="< 1",
                          sign=-1, measured=0.88, ci=[0.86, 0.9], neutral=1.0),
               make_entry("professions", "relative bias_ratio", {"profession": "nurse"}, "biased", planted="> 1",
                          sign=1, measured=1.15, ci=[1.12, 1.18], neutral=1.0),
               make_entry("professions", "relative bias_ratio", {"profession": "doctor"}, "control", planted="1 (none)",
                          sign=0, measured=0.9, ci=[0.85, 0.95], neutral=1.0)]
    text = summary_table(entries)
    assert "profession = doctor" in text and "profession = nurse" in text  # the rows are told apart
    assert "detected: the run's verdict, after its correction" in text
    assert text.rstrip().endswith("biased: 2/2 planted biases found; control: 1/1 false alarms")


def test_the_leaderboard_table_reads_as_text_and_sorts_within_a_metric():
    from test_spaces import _load

    app = _load("leaderboard")
    board = pd.DataFrame({"model": ["m"] * 3, "probe": ["traits"] * 3,
                          "metric": ["trait_anova", "bias_ratio", "trait_anova"],
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
    from PIL import Image

    import vlfair
    from vlfair.probes import run_probe
    from vlfair.t2i.generators import CallableGenerator

    encoder = vlfair.load_encoder(str(clip_dir), dtype="float32")
    run_probe("professions", encoder, "synthetic:professions", tmp_path / "p", cache_dir=None,
              settings={"bootstrap": 0, "n_permutations": 0})
    assert "split None" not in (tmp_path / "p" / "report.html").read_text()  # no split given: none shown
    red = CallableGenerator(lambda prompts, seeds: [Image.new("RGB", (8, 8), (200, 0, 0)) for _ in prompts],
                            "red squares")
    results = run_probe("word-influence", encoder, None, tmp_path / "w", cache_dir=None,
                        settings={"prompts": ["a nurse"], "transmuter": {"name": "lexicon"}, "words": "content",
                                  "candidates": 1, "images_per_prompt": 2, "original_images": 2},
                        components={"generator": red, "classifier": lambda images: ["female"] * len(images)})
    assert results["dataset"]["name"] == "generated:red squares"  # not a Python dict


@pytest.mark.parametrize("settings, text", [
    ({"bootstrap": 200, "n_permutations": 0, "seed": 3}, "Intervals and error bars: 95% stratified-bootstrap CIs, "
                                                         "200 resamples (seed 3)."),
    ({"bootstrap": 0, "n_permutations": 0}, "Intervals: none (bootstrap=0)"),
])
def test_reports_say_what_every_interval_is(clip_dir, tmp_path, settings, text):
    import vlfair
    from vlfair.probes import run_probe

    run_probe("professions", vlfair.load_encoder(str(clip_dir), dtype="float32"), "synthetic:professions", tmp_path,
              cache_dir=None, settings=settings)
    assert text in (tmp_path / "report.html").read_text()


def test_figures_read_side_by_side_share_their_scales():
    import matplotlib.colors as mcolors

    from vlfair.report import plots
    from vlfair.report.scales import share_scales

    strong = pd.DataFrame([[52.1, 59.3], [59.0, 51.9]], index=["Female", "Male"], columns=["doctor", "nurse"])
    flat = pd.DataFrame([[57.7, 58.0], [58.4, 58.5]], index=["Female", "Male"], columns=["doctor", "nurse"])
    bars = {name: pd.DataFrame({"Female": values, "Male": values}, index=["Black", "White"])
            for name, values in (("biased", [0.1, 0.98]), ("control", [0.5, 0.49]))}
    biased = {"heatmap": plots.heatmap(strong, "t", "CLIPScore"),
              "bars": plots.grouped_bars(bars["biased"], None, "t", "accuracy difference")}
    control = {"heatmap": plots.heatmap(flat, "t", "CLIPScore"),
               "bars": plots.grouped_bars(bars["control"], None, "t", "accuracy difference"),
               "only_here": plots.heatmap(flat, "t", "x")}
    assert control["heatmap"].axes[0].images[0].get_clim() == (57.7, 58.5)  # drawn alone: its own range
    assert share_scales(biased, control) == ["heatmap", "bars"]
    for figure in (biased["heatmap"], control["heatmap"]):
        assert figure.axes[0].images[0].get_clim() == (51.9, 59.3)
    assert biased["bars"].axes[0].get_ylim() == control["bars"].axes[0].get_ylim()
    assert control["only_here"].axes[0].images[0].get_clim() == (57.7, 58.5)  # no partner: left alone
    # the annotations follow the shared range: 57.7 is now a light (yellow-green) cell, so black text
    image = control["heatmap"].axes[0].images[0]
    text = next(t for t in control["heatmap"].axes[0].texts if t.get_text() == "57.7")
    assert mcolors.to_hex(text.get_color()) == mcolors.to_hex(plots.annotation_colour(image.cmap(image.norm(57.7))))
    assert text.get_color() == "black"


def test_charts_label_their_axes_and_keep_legends_off_the_bars():
    from vlfair.report import plots

    means = pd.DataFrame({"Female": [0.1, 0.9], "Male": [0.2, 0.8]}, index=pd.Index(["Black", "White"], name="race"))
    figure = plots.grouped_bars(means, None, "t", "confidence", ylim=(0, 1), legend_title="gender")
    axis = figure.axes[0]
    assert axis.get_xlabel() == "race" and axis.get_ylabel() == "confidence" and axis.get_ylim() == (0, 1)
    figure.canvas.draw()
    legend = axis.get_legend().get_window_extent()
    assert legend.x0 >= axis.get_window_extent().x1  # outside the axes: it covers no bar
    heat = plots.heatmap(means, "t", "score", xlabel="gender")
    assert heat.axes[0].get_xlabel() == "gender" and heat.axes[0].get_ylabel() == "race"


def test_tables_have_one_header_row_no_counter_column_and_footnotes():
    from vlfair.report.writer import FOOTNOTES, html_table, markdown_table

    plain = pd.DataFrame({"trait": ["smart/dumb"], "F": [float("nan")]})
    plain.attrs[FOOTNOTES] = ["F is NaN: zero variance"]
    html = html_table(plain)
    assert html.count("<tr") == 2 and "<th></th>" not in html and ">0<" not in html  # header + one row, no 0..n-1
    assert html.endswith("<p class='note'>F is NaN: zero variance</p>")
    assert markdown_table(plain).splitlines()[-1] == "*F is NaN: zero variance*"
    named = pd.DataFrame({"value": [1.5]}, index=pd.Index(["senator"], name="folder"))
    assert html_table(named).count("<tr") == 2 and "<th>folder</th>" in html_table(named)
    tests = pd.DataFrame({"F": [1392.0, 0.7], "p": [0.0, 3.507e-119]})  # a p-value in a table never reads 0
    assert "<td>&lt; 1e-308</td>" in html_table(tests) and "<td>3.5e-119</td>" in html_table(tests)
    assert "| 1392 | &lt; 1e-308 |" in markdown_table(tests)  # vlfair's numbers: 3 significant digits


def test_a_zero_variance_f_test_gets_a_footnote(clip_dir, tmp_path):
    import vlfair
    from vlfair.data.synthetic import make_synthetic
    from vlfair.probes import run_probe

    faces = make_synthetic("fairface", size=56)
    same = faces[0]["image"]  # one picture for every row: every confidence is equal, F = 0/0
    faces = faces.map(lambda row: {"image": same}, features=faces.features)
    results = run_probe("traits", vlfair.load_encoder(str(clip_dir), dtype="float32"), faces, tmp_path, cache_dir=None,
                        settings={"per_cell": None, "gradcam": None, "bootstrap": 0})
    assert all(m["value"] is None for m in results["metrics"] if m["name"] == "trait_anova")
    note = "every confidence there is the same (zero variance within and between the groups), so F = 0/0"
    assert note in (tmp_path / "report.html").read_text() and note in (tmp_path / "f_tests.md").read_text()


@pytest.mark.parametrize("flags, env, shown", [([], None, True), (["-q"], None, False), ([], "warning", False),
                                               (["--verbose"], "error", True)])
def test_the_cli_logs_through_vlfair_s_logger_with_its_verbosity(capsys, monkeypatch, flags, env, shown):
    from vlfair.cli import main
    from vlfair.logging import get_logger, progress_bars_enabled

    if env:
        monkeypatch.setenv("VLFAIR_VERBOSITY", env)
    else:
        monkeypatch.delenv("VLFAIR_VERBOSITY", raising=False)
    assert main(["install-metrics", "--only", "bias_ratio", *flags]) == 0
    out = capsys.readouterr().out
    assert ("1 module(s) installed" in out) == shown
    assert progress_bars_enabled() == ("-q" not in flags)  # set by each command: a quiet one does not silence the next
    get_logger("vlfair.test").debug("a debug line")
    get_logger("vlfair.test").warning("a warning")
    captured = capsys.readouterr()
    assert ("debug [vlfair.test]: a debug line" in captured.out) == ("--verbose" in flags)
    assert captured.err == ("" if "-q" in flags else "warning: a warning\n")  # warnings on stderr, also under info


def test_a_run_draws_its_own_bar_and_the_libraries_bars_only_when_verbose(clip_dir, tmp_path, capsys):
    """datasets' "Filter" and "Flattening the indices" and transformers' "Loading weights" are short
    steps between vlfair's lines: shown under --verbose, never otherwise."""
    from vlfair.cli import main

    common = ["run", "traits", "--model", str(clip_dir), "--dataset", "synthetic:fairface", "--per-cell", "4",
              "--set", "bootstrap=0", "--dtype", "float32"]
    assert main([*common, "--out", str(tmp_path / "plain"), "--cache-dir", str(tmp_path / "a")]) == 0
    printed = capsys.readouterr()
    assert "embedding images" in printed.err and "traits: " in printed.out  # vlfair's bar and its result line
    for library_bar in ("Filter", "Flattening the indices", "Loading weights", "examples/s", "it/s"):
        assert library_bar not in printed.err + printed.out, printed.err
    assert main([*common, "--verbose", "--out", str(tmp_path / "verbose"), "--cache-dir", str(tmp_path / "b")]) == 0
    verbose = capsys.readouterr().err
    assert all(bar in verbose for bar in ("embedding images", "Filter", "Flattening the indices", "Loading weights"))
    assert main([*common, "--out", str(tmp_path / "again"), "--cache-dir", str(tmp_path / "c")]) == 0
    assert "Filter" not in capsys.readouterr().err  # --verbose did not leave them on


def test_hiding_library_bars_restores_each_switch_as_it_was_and_respects_their_variables():
    """Inside: the libraries' bars off. After: each as before, the Hub's too (transformers' switch flips
    it); a library whose environment variable decides is left to it, without a warning per call."""
    import subprocess
    import sys

    code = """
import warnings
warnings.simplefilter("error")
import datasets.utils.logging as datasets_logging, transformers.utils.logging as transformers_logging
import huggingface_hub.utils as hub
from vlfair.logging import library_progress_bars
hub.disable_progress_bars()  # the person's own choice
with library_progress_bars("datasets.utils.logging", "transformers.utils.logging"):
    inside = (datasets_logging.is_progress_bar_enabled(), transformers_logging.is_progress_bar_enabled())
print(inside, datasets_logging.is_progress_bar_enabled(), transformers_logging.is_progress_bar_enabled(),
      hub.are_progress_bars_disabled())
"""
    env = {**os.environ, "HF_DATASETS_DISABLE_PROGRESS_BARS": "0"}  # datasets' bars: always, says the variable
    env.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["(True,", "False)", "True", "True", "True"]


def test_an_unknown_verbosity_is_said_and_the_library_default_is_warning(capsys):
    import subprocess
    import sys

    code = "from vlfair.logging import get_logger; log = get_logger('vlfair.x'); log.info('info'); log.warning('warn')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**__import__("os").environ, "VLFAIR_VERBOSITY": "loud"})
    assert result.stdout == "" and result.stderr.splitlines() == [
        "vlfair: VLFAIR_VERBOSITY='loud' is not one of debug, info, warning, error, critical; using warning",
        "warning: warn"]
    command = subprocess.run([sys.executable, "-m", "vlfair", "install-metrics", "--only", "bias_ratio"],
                             capture_output=True, text=True,
                             env={**__import__("os").environ, "VLFAIR_VERBOSITY": "loud"})
    assert command.returncode == 0 and command.stderr.count("VLFAIR_VERBOSITY='loud'") == 1  # said once, not per reader


def test_the_torchvision_fallback_warning_is_silenced():
    """One fresh process: an image processor taken before vlfair is imported warns (without
    torchvision), one taken after does not (the filter is what removed it)."""
    import subprocess
    import sys

    code = ("import sys, transformers\nprint(transformers.SiglipImageProcessor.__name__)\nsys.stderr.flush()\n"
            "print('-- vlfair --', file=sys.stderr, flush=True)\nimport vlfair\n"
            "print(transformers.CLIPImageProcessor.__name__)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    before, after = result.stderr.split("-- vlfair --\n")
    torchvision_missing = result.stdout.split() == ["SiglipImageProcessorPil", "CLIPImageProcessorPil"]
    assert ("requires torchvision" in before) == torchvision_missing  # transformers' warning, before vlfair
    assert "requires torchvision" not in after and "torchvision" not in after, after


def test_a_metric_space_shows_its_result_for_people_beside_the_json():
    from vlfair.widget import readable_result

    text = readable_result({"bias_ratio": 0.8570846905537459, "bias_ratio_ci": [0.8312575331458417, 0.8836651904488503],
                            "p_value": 0.0, "protected_group": "Female",
                            "group_means": {"Female": 70.1666, "Male": 81.8666},
                            "group_means_ci": {"Female": [68.4, 72.0], "Male": [80.2, 83.5]},
                            "f_statistic": {"Male": 3.25}, "influence": [0.1234, -0.5], "label": "a|b"})
    lines = text.splitlines()
    assert lines[:2] == ["| quantity | value | interval |", "|---|---|---|"]
    assert "| bias_ratio | 0.857 | [0.831, 0.884] |" in lines and "| p_value | &lt; 1e-308 |  |" in lines
    assert "| group_means · Female | 70.2 | [68.4, 72] |" in lines and "| f_statistic · Male | 3.25 |  |" in lines
    assert "| influence | 0.123, -0.5 |  |" in lines and "| label | a\\|b |  |" in lines
    assert not any("_ci" in line for line in lines) and readable_result(None) == ""
    assert "&lt;img onerror=x&gt;" in readable_result({"group_means": {"<img onerror=x>": 1.0}})  # labels are data
    tiny = readable_result({"p_value": 0.0, "log10_p_value": -400.3, "f": {"M": 2.0},
                            "p_value_method": "normal_limit"}).splitlines()
    assert "| p_value | 5e-401 |  |" in tiny and "| log10_p_value | -400 |  |" in tiny  # the log10 is a number, not a p
    nested = readable_result({"p_value": {"M": 0.0}, "log10_p_value": {"M": -350.5}}).splitlines()
    assert "| p_value · M | 3.2e-351 |  |" in nested and "| log10_p_value · M | -350 |  |" in nested  # per stratum


def test_subsets_read_as_text_wherever_they_come_from():
    from vlfair.report.numbers import format_subset

    assert format_subset('{"trait": "smart/dumb", "gender": "Male"}') == "trait = smart/dumb · gender = Male"
    assert format_subset({"folder": "senator"}) == "folder = senator"
    assert format_subset("not json") == "not json" and format_subset("[1, 2]") == "[1, 2]"


@pytest.mark.parametrize("p, log10_p, text", [(0.0, -346.6, "2.5e-347"), (0.0, -608.4559, "3.5e-609"),
                                              (0.0, -400.0, "1e-400"), (0.0, float("-inf"), "< 1e-308"),
                                              (2e-5, -4.69897, "2e-05")])
def test_a_p_value_below_float64_reads_from_its_log10(p, log10_p, text):
    assert format_p(p, log10_p) == text


def test_tables_and_boards_read_a_tiny_p_from_its_log10():
    from vlfair.report.leaderboard import readable
    from vlfair.report.writer import html_table, markdown_table

    f_tests = pd.DataFrame({"F": [1392.0, 0.7], "p": [0.0, 0.5], "log10 p": [-346.6, -0.30103]})  # the traits table
    assert "<td>2.5e-347</td>" in html_table(f_tests) and "| 1392 | 2.5e-347 | -347 |" in markdown_table(f_tests)
    rows = pd.DataFrame({"metric": ["trait_anova", "bias_ratio"], "subset": ['{"gender": "Male"}', "{}"],
                         "value": [1392.0, 0.9], "ci_low": [None, 0.8], "ci_high": [None, 1.0], "p_value": [0.0, 0.0],
                         "log10_p_value": [-608.4559, None]})
    assert readable(rows)["p"].tolist() == ["3.5e-609", "< 1e-308"]  # without a log10, still never 0
