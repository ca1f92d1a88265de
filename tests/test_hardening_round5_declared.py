"""Issue 65, the fifth adversarial round: the cases of declared metrics, phrasings, multilingual and samples
files (SILENT 14, 18, 19, 20; UNCLEAR 25-26, 27), each tried as a hostile user would (the case's number in each
test's docstring)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vlfair.cli import main
from vlfair.probes import ProbeError, probe_class


@pytest.fixture(scope="module")
def run_dir(clip_dir, tmp_path_factory) -> Path:
    """A professions run of a tiny CLIP."""
    import vlfair
    from vlfair.probes import run_probe

    out = tmp_path_factory.mktemp("round5-declared") / "run"
    run_probe("professions", vlfair.load_encoder(str(clip_dir), dtype="float32"), "synthetic:professions", out,
              cache_dir=None, settings={"bootstrap": 50, "n_permutations": 50})
    return out


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


def _rewritten(run: Path, folder: Path, change, columns=None) -> Path:
    """A copy of ``run`` whose samples file ``change`` rewrote (a frame -> a frame), its vlfair metadata kept (its
    column list set to ``columns`` where given) and results.json's digests made the new file's, as a hand that
    knows the format would."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vlfair.samples import METADATA_KEY, content_sha256, sha256_of

    shutil.copytree(run, folder)
    path = folder / "samples.parquet"
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    frame = change(table.to_pandas())
    if columns is not None:
        meta["columns"] = columns(list(frame.columns))
    new = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(new.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}), path)
    results = json.loads((folder / "results.json").read_text())
    results["samples"].update(sha256=sha256_of(path), content_sha256=content_sha256(pq.read_table(path)))
    (folder / "results.json").write_text(json.dumps(results))
    return folder


# ---- SILENT 14: one metric declared twice ------------------------------------------------------------------------
def _declaring_twice(monkeypatch):
    """The professions probe as a plugin that states its first metric twice (the same name and subset)."""
    cls = probe_class("professions")
    declare = cls.declare
    monkeypatch.setattr(cls, "declare", lambda self, samples: [*declare(self, samples), declare(self, samples)[0]])


def test_a_metric_declared_twice_is_refused_naming_it_in_every_command(run_dir, tmp_path, capsys, monkeypatch):
    """SILENT 14: a plugin declaring one metric (name and subset) twice had two values everywhere (a board ranking
    a model against itself, compare's two rows, card-results' two entries of one task id); the declaration is
    refused, naming the metric, by the rescore and by compare alike (exit 2)."""
    _declaring_twice(monkeypatch)
    first = probe_class("professions")({}).declare  # the twice-declared metric is the first one declared
    from vlfair.compare.runs import load_run

    metric = first(load_run(run_dir).samples)[0]
    said = f"metric {metric.name!r} of subset {json.dumps(dict(metric.subset), sort_keys=True)} is declared twice"
    code, err = _cli(capsys, "rescore", str(run_dir), "--out", str(tmp_path / "again"))
    assert code == 2 and err.startswith("vlfair rescore: ") and said in err, err
    assert not (tmp_path / "again").exists()
    copy = _rewritten(run_dir, tmp_path / "copy", lambda frame: frame)  # the same scores in another file
    code, err = _cli(capsys, "compare", str(run_dir), str(copy), "--out", str(tmp_path / "cmp"))
    assert code == 2 and said in err, err


def test_a_metric_a_probe_reports_twice_is_refused_by_the_run(run_dir, tmp_path, capsys, monkeypatch):
    """SILENT 14: a probe's own analyze (not its declarations) reporting one metric twice is refused as the run is
    finished, whichever way the two were made."""
    import copy

    cls = probe_class("professions")
    analyze = cls.analyze

    def twice(self, samples):
        out = analyze(self, samples)
        out.metrics.append(copy.deepcopy(out.metrics[0]))
        return out

    monkeypatch.setattr(cls, "analyze", twice)
    code, err = _cli(capsys, "rescore", str(run_dir), "--out", str(tmp_path / "again"))
    assert code == 2 and "is reported twice: a probe reports each metric, a name and a subset, once" in err, err


def test_a_results_file_listing_a_metric_twice_is_skipped_by_the_board_and_refused_by_compare(run_dir, tmp_path,
                                                                                             capsys):
    """SILENT 14: a results.json listing one metric twice (a run of an older vlfair whose plugin declared it twice,
    or an edited file) is named and skipped by the board, which is built from the other runs, and refused by
    compare: the gate every reader passes a file through (report.results.load_results)."""
    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    results = json.loads((bad / "results.json").read_text())
    first = results["metrics"][0]
    results["metrics"].append({**first, "subset": dict(reversed(list(first["subset"].items())))})  # keys reordered
    (bad / "results.json").write_text(json.dumps(results))
    said = f"metric {first['name']!r} of subset {json.dumps(first['subset'], sort_keys=True)} is listed twice"
    code, err = _cli(capsys, "leaderboard", str(run_dir), str(bad), "--out", str(tmp_path / "board.csv"))
    assert code == 0 and f"skipped {bad / 'results.json'}: {said}" in err, err
    assert len(pd.read_csv(tmp_path / "board.csv")) > 0
    code, err = _cli(capsys, "compare", str(run_dir), str(bad), "--out", str(tmp_path / "cmp"))
    assert code == 2 and said in err, err


def test_declared_evaluates_each_metric_once_or_refuses():
    """SILENT 14: the engine itself (evaluate, row_sets, members) refuses a repeated declaration; one name with
    two subsets is two metrics."""
    from vlfair.probes.declared import Declared, Mean, evaluate, members, row_sets
    from vlfair.samples import Samples

    samples = Samples(pd.DataFrame({"row": range(8), "id": [str(i) for i in range(8)], "g": ["a", "b"] * 4,
                                    "score": np.arange(8.0)}))
    one = Declared("mean_clipscore", {"gender": "a"}, Mean("score", "a"), group="g")
    other = Declared("mean_clipscore", {"gender": "b"}, Mean("score", "b"), group="g")
    assert len(evaluate(samples, [one, other], bootstrap=20)) == 2
    for engine in (evaluate, row_sets, members):
        with pytest.raises(ProbeError, match=re.escape("metric 'mean_clipscore' of subset {\"gender\": \"a\"} is "
                                                       "declared twice")):
            engine(samples, [one, other, Declared("mean_clipscore", {"gender": "a"}, Mean("score", "b"),
                                                  group="g")])


# ---- SILENT 18: phrasings that are one text to the model ----------------------------------------------------------
@pytest.mark.parametrize(("probe", "settings", "message"), [
    ("professions", {"phrasings": ["a picture of a {profession}", "A  Picture of a {profession} "]},
     "names 'a picture of a {profession}' and 'A  Picture of a {profession} ', the same item (case and spaces "
     "aside: one text to the model)"),
    ("professions", {"phrasings": ["a photo of a  {profession}"]},
     "is the study's prompt ('A photo of a {profession}', case and spaces aside: one text to the model), "
     "phrasing 1 already"),
    ("professions", {"question_phrasings": ["which job is this?", "Which job is this?"]},
     "the same item (case and spaces aside"),
    ("traits", {"phrasings": ["someone {trait}", "SOMEONE {trait}"]}, "the same item (case and spaces aside"),
    ("traits", {"phrasings": ["A {trait} person"]}, "is the study's prompt ('a {trait} person', case and spaces"),
    ("public-figures", {"phrasings": ["a picture of a {}", "a picture of a  {}"]}, "the same item (case and spaces"),
    ("public-figures", {"phrasings": ["a picture of a {}"], "name_phrasings": ["this is a  picture of {}"]},
     "is name_prompt ('This is a picture of {}', case and spaces aside"),
    ("word-influence", {"phrasings": ["a {} person", "a {} Person"]}, "the same item (case and spaces aside"),
])
def test_phrasings_that_are_one_text_to_the_model_are_refused(probe, settings, message):
    """SILENT 18: phrasings that differ only in case or spaces (one text to CLIP's tokenizer) were taken as other
    phrasings (three identical columns, "found in 0 of 3"); refused as repeated pairs are, naming both."""
    with pytest.raises(ProbeError, match=re.escape(message)):
        probe_class(probe)(settings)


def test_a_phrasing_of_one_text_is_refused_by_the_command_in_one_line(tmp_path, capsys):
    """SILENT 18: from the command line, one line and exit 2, before any model loads."""
    code, err = _cli(capsys, "run", "professions", "--model", "no-model-needed", "--dataset",
                     "synthetic:professions", "--out", str(tmp_path / "out"), "--set",
                     'phrasings=["a picture of a {profession}", "A Picture of a  {profession}"]')
    assert code == 2 and len(err.strip().splitlines()) == 1 and "the same item (case and spaces aside" in err, err


# ---- SILENT 19: a multilingual run of identical caption pairs ------------------------------------------------------
@pytest.fixture(scope="module")
def multilingual_run(clip_dir, tmp_path_factory):
    import vlfair
    from vlfair.compare.runs import load_run
    from vlfair.probes import run_probe

    out = tmp_path_factory.mktemp("round5-multilingual") / "run"
    run_probe("multilingual", vlfair.load_encoder(str(clip_dir), dtype="float32"), "synthetic:multi30k", out,
              cache_dir=None, settings={"bootstrap": 50})
    return load_run(out)


def test_identical_caption_pairs_are_warned_of_and_counted_in_the_mean_distance(multilingual_run):
    """SILENT 19: with all but one caption pair of a portion identical, individual fairness came from one pair with
    no warning and the mean text distance left the zeros out (one pair's distance, an interval of no width); now a
    warning counts them, the mean distance is every pair's and no interval comes from one pair."""
    samples = multilingual_run.samples
    frame = samples.frame
    portion = sorted(set(frame["portion"]))[0]
    rows = np.flatnonzero(frame["portion"] == portion)
    frame.loc[rows[1:], "text_distance"] = 0.0
    probe = probe_class("multilingual")(multilingual_run.results["probe_settings"])
    out = probe.analyze_samples(samples)
    found = {m.name: m for m in out.metrics if m.subset.get("portion") == portion
             and m.name in ("individual_fairness", "text_distance")}
    assert found["individual_fairness"].details["num_pairs"] == 1 and found["individual_fairness"].ci is None
    distance = found["text_distance"]
    assert distance.value == pytest.approx(frame.loc[rows, "text_distance"].mean())
    assert distance.details["num_pairs"] == rows.size and distance.ci is not None and distance.ci[0] < distance.ci[1]
    said = [w for w in out.warnings if w.startswith(f"Multi30K {portion}: ")]
    assert said == [f"Multi30K {portion}: {rows.size - 1} of {rows.size} caption pairs have identical text features "
                    "(text distance 0: the same text to the model, no ratio); individual fairness is the one other "
                    "pair's ratio (a number of one pair)"]


def test_a_value_of_one_row_has_no_interval():
    """SILENT 19: a metric that reads one row (a mean of one caption pair, resampled within its portion) had an
    interval of no width, each resample drawing that row again; it has none now, the others theirs."""
    from vlfair.probes.declared import Declared, Mean, evaluate
    from vlfair.samples import Samples

    samples = Samples(pd.DataFrame({"row": range(7), "id": [str(i) for i in range(7)], "portion": ["p"] * 7,
                                    "distance": np.arange(7.0)}))
    alone, every = evaluate(samples, [
        Declared("text_distance", {"pairs": 1}, Mean("distance"), np.array([3]), strata="portion"),
        Declared("text_distance", {"pairs": 7}, Mean("distance"), strata="portion")], bootstrap=50)
    assert alone.value == 3.0 and alone.ci is None
    assert every.ci is not None and every.ci[0] < every.ci[1]


# ---- SILENT 20 and UNCLEAR 27: a samples file without one of its columns -------------------------------------------
def test_a_samples_file_without_a_column_its_run_wrote_is_refused_naming_both(run_dir, tmp_path, capsys):
    """SILENT 20: a samples file without a value column (its digests in results.json made the new file's) was
    rescored without that column's metrics, exit 0 and no warning; now exit 2, naming the file and the column."""
    column = "clipscore"  # the value column of every professions metric
    copy = _rewritten(run_dir, tmp_path / "cut", lambda frame: frame.drop(columns=[column]))
    code, err = _cli(capsys, "rescore", str(copy), "--out", str(tmp_path / "again"))
    assert code == 2 and err.startswith(f"vlfair rescore: {copy / 'samples.parquet'}: no column {column!r}"), err
    assert "which its run wrote" in err and not (tmp_path / "again").exists()
    code, err = _cli(capsys, "compare", str(run_dir), str(copy), "--out", str(tmp_path / "cmp"))
    assert code == 2 and f"{copy / 'samples.parquet'}: no column {column!r}" in err, err


def test_a_rescore_that_loses_a_reported_metric_is_refused_naming_it(run_dir, tmp_path, capsys, monkeypatch):
    """SILENT 20: whatever took a metric away (a probe that leaves out a metric whose column it no longer finds, a
    column list edited with the column), a rescore that gives fewer metrics than the run reported is refused,
    exit 2, naming the samples file and the metric, and writes nothing."""
    cls = probe_class("professions")
    analyze = cls.analyze

    def fewer(self, samples):
        out = analyze(self, samples)
        out.metrics = out.metrics[:-1]
        return out

    monkeypatch.setattr(cls, "analyze", fewer)
    last = json.loads((run_dir / "results.json").read_text())["metrics"][-1]
    code, err = _cli(capsys, "rescore", str(run_dir), "--out", str(tmp_path / "again"))
    assert code == 2 and err.startswith(f"vlfair rescore: {run_dir / 'samples.parquet'}: gives no {last['name']} "
                                        f"{json.dumps(last['subset'], sort_keys=True)}, which the run reported"), err
    assert not (tmp_path / "again").exists()


def test_a_missing_group_column_names_the_run_that_lacks_it(run_dir, tmp_path, capsys):
    """UNCLEAR 27: a samples file without a group column (its column list edited too) named every run's samples
    file, the wrong one first; now only the file that lacks it."""
    copy = _rewritten(run_dir, tmp_path / "nogender", lambda frame: frame.drop(columns=["gender"]),
                      columns=lambda found: found)
    code, err = _cli(capsys, "compare", str(run_dir), str(copy), "--out", str(tmp_path / "cmp"))
    assert code == 2 and "'gender'" in err, err
    assert str(copy / "samples.parquet") in err and str(run_dir / "samples.parquet") not in err, err
    code, err = _cli(capsys, "compare", str(copy), str(run_dir), "--out", str(tmp_path / "cmp2"))
    assert code == 2 and str(copy / "samples.parquet") in err and str(run_dir / "samples.parquet") not in err, err


# ---- UNCLEAR 25-26: "see the run's warnings" with no warning there --------------------------------------------------
def test_a_null_value_from_a_nan_score_is_said_in_the_warnings_and_the_message(clip_dir, tmp_path, capsys,
                                                                                monkeypatch):
    """UNCLEAR 25: a plugin's NaN score made a value null and the message said "see the run's warnings", which were
    empty; the run's warnings (kept beside --out) now hold the sentence the message says, with the column and the
    count of values that are not numbers."""
    cls = probe_class("professions")
    score = cls.score

    def with_a_nan(self, ctx, schema):
        samples = score(self, ctx, schema)
        samples.frame.loc[0, "clipscore"] = np.nan
        return samples

    monkeypatch.setattr(cls, "score", with_a_nan)
    out = tmp_path / "out"
    code, err = _cli(capsys, "run", "professions", "--model", str(clip_dir), "--dataset", "synthetic:professions",
                     "--out", str(out), "--bootstrap", "20", "--dtype", "float32", "--cache-dir", str(tmp_path / "c"))
    last = err.strip().splitlines()[-1]
    assert code == 2 and "values came out null (e.g. " in last, err
    assert "column 'clipscore' holds 1 value(s) that are not finite numbers (NaN or infinite)" in last, err
    kept = json.loads((tmp_path / "out.failed" / "results.json").read_text())
    said = [w for w in kept["warnings"] if "values came out null" in w]
    assert len(said) == 1 and said[0] in last


def test_a_rescore_of_a_value_made_nan_is_refused_naming_what_it_lost(run_dir, tmp_path, capsys):
    """UNCLEAR 25, SILENT 20: a samples file whose score was made NaN since (digests made the new file's) loses
    the gap the NaN leaves undefined: refused, naming the file and the metric, not rescored without it."""
    def spoilt(frame):
        frame.loc[0, "clipscore"] = np.nan
        return frame

    copy = _rewritten(run_dir, tmp_path / "nan", spoilt)
    code, err = _cli(capsys, "rescore", str(copy), "--out", str(tmp_path / "again"))
    assert code == 2 and err.startswith(f"vlfair rescore: {copy / 'samples.parquet'}: gives no group_score_gap"), err
    assert "which the run reported" in err and not (tmp_path / "again").exists()


def test_a_value_of_no_spread_says_why_it_is_null():
    """UNCLEAR 26: an answerer reading a pair's two words as one text gives one confidence everywhere, an F of no
    spread (null) with no warning; the null value says why, and the run's warning (the failure's message) with it."""
    from vlfair.probes.declared import Declared, FStatistic, evaluate
    from vlfair.probes.runner import null_values
    from vlfair.samples import Samples

    samples = Samples(pd.DataFrame({"row": range(12), "id": [str(i) for i in range(12)], "g": ["a", "b", "c"] * 4,
                                    "confidence": np.full(12, 0.5)}))
    [metric] = evaluate(samples, [Declared("trait_anova", {"trait": "kind"}, FStatistic("confidence"), group="g")],
                        bootstrap=20)
    records = [metric.record()]
    assert records[0]["value"] is None or not np.isfinite(records[0]["value"])
    assert null_values(records) == ('1 of 1 values came out null (e.g. trait_anova {"trait": "kind"}: every one of '
                                    "the 12 values of column 'confidence' is 0.5: no spread to measure (a model that "
                                    "reads the texts compared as one text gives one value))")


def test_a_quantity_left_out_by_a_run_without_warnings_is_not_sent_to_its_warnings(tmp_path):
    """UNCLEAR 26: compare named a quantity one run lacks with "see their warnings" where that run had none (its
    model read a pair's two words as one text and said nothing); the reason says "see their warnings" only where
    every run lacking it has warnings to see."""
    from vlfair.compare.comparison import _shared_columns
    from vlfair.compare.runs import Run
    from vlfair.samples import Samples

    frames = [pd.DataFrame({"id": ["1"], "confidence a/b": [0.5]}), pd.DataFrame({"id": ["1"]})]
    runs = [Run(tmp_path / name, {"warnings": warnings}, Samples(frame))
            for name, warnings, frame in (("a", [], frames[0]), ("b", [], frames[1]))]
    _, [unshared] = _shared_columns(runs, frames)
    assert unshared == {"metric": "confidence a/b", "reason": "measured only in a (the other runs left it out: their "
                                                              "samples hold no such column, and not every one of them "
                                                              "says why)"}
    runs[1].results["warnings"] = ["pair a/b: its two prompts are one text to the model; left out"]
    assert "see their warnings" in _shared_columns(runs, frames)[1][0]["reason"]
