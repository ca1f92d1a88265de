"""samples.parquet: every probe keeps its per-sample results, a rescore from them alone gives the
run's numbers, and each probe's paired statistics are its metrics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vlfair.compare import load_run, rescore
from vlfair.probes import probe_class
from vlfair.samples import IDENTITY, sha256_of
from vlfair.testing import assert_statistics_are_metrics

RUNS = [f"{encoder}/{probe}" for encoder in ("biased", "control")
        for probe in ("professions", "traits", "word-influence", "multilingual", "public-figures",
                      "retrieval")]


@pytest.mark.parametrize("run", RUNS)
def test_a_run_keeps_its_samples_beside_results_json(demo, run):
    import datasets

    folder = demo[0] / run
    results = json.loads((folder / "results.json").read_text())
    entry = results["samples"]
    assert entry["file"] == "samples.parquet" and entry["sha256"] == sha256_of(folder / "samples.parquet")
    loaded = datasets.load_dataset("parquet", data_files=str(folder / "samples.parquet"), split="train")
    assert loaded.num_rows == entry["rows"] > 0
    assert loaded.column_names[:2] == list(IDENTITY)
    assert len(set(loaded["id"])) == loaded.num_rows  # ids pair rows across runs: each names one sample


@pytest.mark.parametrize("run", RUNS)
def test_rescore_from_the_samples_alone_gives_the_run_s_numbers(demo, run, tmp_path):
    folder = demo[0] / run
    original = json.loads((folder / "results.json").read_text())
    again = rescore(folder, tmp_path / "again")
    # exactly: the same floats, not close ones; and the machine that scored the samples, not the rescore's
    for key in ("metrics", "settings", "warnings", "published", "family", "probe_settings", "dataset", "model",
                "machine"):
        assert again[key] == original[key], key
    written = json.loads((tmp_path / "again" / "results.json").read_text())
    assert written["samples"]["rows"] == original["samples"]["rows"]
    assert (tmp_path / "again" / "report.html").exists()


@pytest.mark.parametrize("run", RUNS)
def test_each_paired_statistic_is_the_run_s_metric(demo, run):
    """What vlfair compare differences is what the run reported: each statistic of the probe's row
    sets, on the run's own rows, equals the metric of that name and subset; every metric with a
    value is compared."""
    loaded = load_run(demo[0] / run)
    probe = probe_class(loaded.results["probe"])(loaded.results["probe_settings"])
    assert_statistics_are_metrics(probe, loaded.samples, loaded.results["metrics"])


def test_a_changed_samples_file_is_refused(demo, tmp_path):
    import shutil

    from vlfair.compare import RunError

    folder = tmp_path / "run"
    shutil.copytree(demo[0] / "biased" / "traits", folder)
    with open(folder / "samples.parquet", "ab") as handle:
        handle.write(b"\0")
    with pytest.raises(RunError, match="SHA-256"):
        load_run(folder)
    (folder / "samples.parquet").unlink()
    with pytest.raises(RunError, match="no such samples file"):
        load_run(folder)


def test_a_run_without_samples_says_how_to_get_them(demo, tmp_path):
    import shutil

    from vlfair.compare import RunError

    folder = tmp_path / "old"
    shutil.copytree(demo[0] / "biased" / "traits", folder)
    results = json.loads((folder / "results.json").read_text())
    del results["samples"]
    (folder / "results.json").write_text(json.dumps(results))
    with pytest.raises(RunError, match="kept no per-sample results; run it again"):
        load_run(folder)


def test_rescore_changes_only_interval_settings(demo, tmp_path):
    from vlfair.compare import RunError

    folder = demo[0] / "biased" / "traits"
    original = json.loads((folder / "results.json").read_text())
    changed = rescore(folder, None, {"bootstrap": 50, "seed": 3})
    assert [m["value"] for m in changed["metrics"]] == [m["value"] for m in original["metrics"]]
    assert [m["details"].get("group_means_ci") for m in changed["metrics"]] != \
        [m["details"].get("group_means_ci") for m in original["metrics"]]
    assert rescore(folder, None, {"bootstrap": 50, "confidence": 0.9})["family"] == original["family"]
    with pytest.raises(RunError, match=r"\['prompt'\] change what the model scored"):
        rescore(folder, None, {"prompt": "a {trait} face"})
    generated = demo[0] / "biased" / "word-influence"  # its seed drew the images: a rescore keeps them
    with pytest.raises(RunError, match="seed also drew its samples"):
        rescore(generated, None, {"seed": 4})


def test_samples_stay_small_at_the_study_size(tmp_path):
    """FairFace's 14,000 rows x 6 trait pairs: the size issue 27 asks to report (asserted loosely)."""
    import pandas as pd

    from vlfair.samples import Samples, write_samples

    rng = np.random.default_rng(0)
    n = 14_000
    frame = pd.DataFrame({"row": np.arange(n), "id": [f"{rng.integers(2**63):016x}" for _ in range(n)],
                          "race": rng.choice(["White", "Black", "Indian"], n),
                          "gender": rng.choice(["Male", "Female"], n),
                          **{f"confidence pair{j}": rng.random(n) for j in range(6)}})
    entry = write_samples(Samples(frame), tmp_path / "samples.parquet", {"probe": "traits"})
    size = Path(tmp_path / "samples.parquet").stat().st_size
    assert entry["rows"] == n and size < 1_500_000  # 6 float64 columns alone are 672 KB uncompressed
