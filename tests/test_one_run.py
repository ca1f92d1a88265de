"""One run's declared metrics on the measures' streams (issue 45): what the studies' probes report when their
data hold a group too small, a value that is not a number, or no seed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from vlfair import paired
from vlfair.probes import probe_class
from vlfair.samples import Samples


def _professions(scores: np.ndarray, genders: np.ndarray, professions: np.ndarray) -> Samples:
    frame = pd.DataFrame({"row": np.arange(len(scores)), "id": [str(i) for i in range(len(scores))],
                          "profession": professions, "gender": genders, "race": "White", "clipscore": scores})
    return Samples(frame, {"prompt": "A photo of a {profession}", "score": "clipscore", "layout": {}})


def _analyze(samples: Samples, **settings):
    return probe_class("professions")({"attributes": ["gender"], "bootstrap": 200, "n_permutations": 99,
                                       **settings}).analyze(samples)


def test_a_profession_of_one_group_has_its_mean_without_interval_or_gap_and_says_why():
    """As group_score_gap refused a profession of one gender, its mean stands without an interval or a gap, and a
    warning names why; the other professions are measured as ever."""
    rng = np.random.default_rng(0)
    professions = np.repeat(["doctor", "nurse"], 40)
    genders = np.where(professions == "nurse", "Female", np.tile(["Female", "Male"], 40))
    out = _analyze(_professions(rng.normal(25, 1, 80), genders, professions))
    nurse = [m for m in out.metrics if m.subset.get("profession") == "nurse"]
    assert [(m.name, m.ci) for m in nurse] == [("mean_clipscore", None)]
    assert any(w.startswith("nurse by gender: a comparison needs at least 2 groups") for w in out.warnings)
    doctor = {m.name: m for m in out.metrics if m.subset.get("profession") == "doctor"}
    assert doctor["group_score_gap"].ci is not None and doctor["group_score_gap"].p_value is not None


def test_a_score_that_is_not_a_number_leaves_its_profession_s_gap_out_and_says_so():
    rng = np.random.default_rng(1)
    professions = np.repeat(["doctor", "nurse"], 40)
    scores = rng.normal(25, 1, 80)
    scores[0] = np.nan  # a doctor's
    out = _analyze(_professions(scores, np.tile(["Female", "Male"], 40), professions))
    gaps = {m.subset["profession"]: m for m in out.metrics if m.name == "group_score_gap"}
    assert list(gaps) == ["nurse"] and np.isfinite([gaps["nurse"].value, *gaps["nurse"].ci]).all()  # not spoilt
    assert any(w.startswith("doctor by gender: a value is not a finite number") for w in out.warnings)


def test_traits_say_a_stratum_of_one_group_has_no_f_test():
    probe = probe_class("traits")({"pairs": [["smart", "dumb"]], "bootstrap": 50, "per_cell": None})
    rng = np.random.default_rng(2)
    races = np.array(["Black", "White"] * 30 + ["White"] * 20)  # men: White only
    genders = np.array(["Female"] * 60 + ["Male"] * 20)
    frame = pd.DataFrame({"row": np.arange(80), "id": [str(i) for i in range(80)], "race": races, "gender": genders,
                          "confidence smart/dumb": rng.uniform(0, 1, 80)})
    out = probe.analyze(Samples(frame, {"temperature": 100.0, "temperature_source": "logit_scale",
                                        "prompt": "a {trait} person", "sampling": None}))
    tested = {m.subset.get("gender") for m in out.metrics if m.name == "trait_anova" and "gender" in m.subset}
    assert tested == {"Female"}
    assert any(w.startswith("across races within gender Male: a comparison needs at least 2 groups")
               for w in out.warnings)


def _row_set(groups: np.ndarray) -> paired.RowSet:
    return paired.RowSet(np.arange(groups.size), ("x", "y"), groups, (
        paired.Statistic("x", {}, paired.mean_range(0), 0.0), paired.Statistic("y", {}, paired.mean_range(1), 0.0),
        paired.Statistic("F", {}, paired.f_statistic(0), 0.0)))


def test_without_a_seed_every_column_and_the_squares_are_drawn_on_the_same_rows():
    """A run without a seed (fresh randomness) still resamples its columns together: two equal columns get equal
    resamples, and the F's sums of squares are the means' draws (an F of a column equal to its neighbour equals
    the F computed from it)."""
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(3), 20)
    column = rng.normal(size=60) + groups
    values = np.stack([column, column], axis=1)
    _, resampled, means = paired.resample_groups(_row_set(groups), values, bootstrap=200, seed=None, squares=True)
    np.testing.assert_array_equal(resampled[:, 0], resampled[:, 1])
    np.testing.assert_array_equal(means[:, :, 0], means[:, :, 1])
    assert np.isfinite(resampled[:, 2]).all() and resampled[:, 2].std() > 0


def test_a_group_in_two_units_is_refused():
    groups = np.repeat(np.arange(2), 10)
    units = np.tile(np.arange(2), 10)  # each group in both units
    with pytest.raises(ValueError, match="lies in two units"):
        paired.resample_groups(_row_set(groups), np.ones((20, 2)), units, bootstrap=10, seed=0)
