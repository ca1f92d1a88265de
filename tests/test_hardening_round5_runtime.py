"""Issue 65, the fifth adversarial round, the runtime's cases: UNCLEAR 28 (compare's numpy warnings), UNCLEAR 29 (a
huge --batch-size and the allocator's message), UNCLEAR 30 (a thousand decode workers for six images). Each test's
docstring names its case."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import vlfair
from vlfair import embed
from vlfair.cli import main
from vlfair.embed import BatchTooLargeError
from vlfair.testing import reported_as_its_samples_give


@pytest.fixture
def six_images(jpeg_paths) -> list[str]:
    return [str(p) for p in jpeg_paths[:6]]


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


# ---- UNCLEAR 29: a batch no memory holds ---------------------------------------------------------------------------
def test_a_batch_size_past_the_images_allocates_only_the_images(clip_encoder, six_images):
    """UNCLEAR 29: `--batch-size 1000000000000` on six images ended in torch's "DefaultCPUAllocator: can't allocate
    memory" (the decode buffers were allocated for batch_size images, not for the largest batch); a buffer now holds
    the largest batch, so the run is the one of a batch of six."""
    huge = vlfair.embed_images(clip_encoder, six_images, batch_size=10**12, num_workers=0, cache_dir=None)
    six = vlfair.embed_images(clip_encoder, six_images, batch_size=6, num_workers=0, cache_dir=None)
    np.testing.assert_array_equal(huge, six)


def _numpy_refusal() -> MemoryError:
    """numpy's own MemoryError ("Unable to allocate 1 PiB for an array ..."), as a petabyte's array raises it."""
    try:
        np.empty((2**20, 2**20, 2**10), np.uint8)
    except MemoryError as exc:
        return exc
    raise AssertionError("a petabyte was allocated")


ALLOCATORS = {
    "cpu allocator": RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                                  "memory: you tried to allocate 1228800000000 bytes. Error code 12 (Cannot allocate "
                                  "memory)"),
    "python": MemoryError(),
    "numpy": _numpy_refusal(),
    "cuda": torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
    "cuda pinned": RuntimeError("CUDA error: out of memory"),
}


@pytest.mark.parametrize("kind", list(ALLOCATORS))
def test_every_allocators_refusal_in_the_forward_names_batch_size_and_a_size_to_try(clip_dir, tmp_path, monkeypatch,
                                                                                    capsys, kind):
    """UNCLEAR 29: only a GPU's OutOfMemoryError and the CPU allocator's exact text were named; Python's and numpy's
    MemoryError (and CUDA's pinned memory's RuntimeError) came out raw. Each is one line naming --batch-size and a
    size to try, exit 2."""
    from vlfair.models.hf import HFEncoder

    def refused(self, batch, normalize=True):
        raise ALLOCATORS[kind]

    monkeypatch.setattr(HFEncoder, "encode_pixels", refused)
    code, err = _cli(capsys, "run", "professions", "--model", str(clip_dir), "--dataset", "synthetic:professions",
                     "--batch-size", "16", "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"),
                     "--quiet")
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("vlfair run: a batch of 16 images does not fit in the device's memory (")
    assert "lower batch_size (now 16; --batch-size on the command line): try 8 (half the batch);" in err
    assert "--debug" not in err


def test_decode_buffers_no_memory_holds_are_said_naming_batch_size(clip_encoder, six_images, monkeypatch):
    """UNCLEAR 29: the buffers' allocation, outside the forward, was not named at all."""
    def refused(self, *args, **kwargs):
        raise ALLOCATORS["cpu allocator"]

    monkeypatch.setattr(embed._Slots, "__init__", refused)
    with pytest.raises(BatchTooLargeError, match=r"a batch of 6 images does not fit in this machine's memory \(the "
                                                 r"batches' decode buffers\) \(.*DefaultCPUAllocator.*\): lower "
                                                 r"batch_size \(now 64; --batch-size on the command line\): try 3 "
                                                 r"\(half the batch\);"):
        vlfair.embed_images(clip_encoder, six_images, num_workers=0, cache_dir=None)


def test_one_image_too_large_says_what_else_to_change(clip_encoder, six_images, monkeypatch):
    """UNCLEAR 29: half of one image is no size to try."""
    def refused(self, batch, normalize=True):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(type(clip_encoder), "encode_pixels", refused)
    with pytest.raises(BatchTooLargeError, match=r"now 1; --batch-size on the command line\): one image does not fit "
                                                 r"either \(use a smaller --dtype"):
        vlfair.embed_images(clip_encoder, six_images, batch_size=1, num_workers=0, cache_dir=None)


def test_a_runtime_error_that_is_no_allocators_is_left_as_it_is(clip_encoder, six_images, monkeypatch):
    """UNCLEAR 29's guard: a model's own RuntimeError is not called a memory problem."""
    def broken(self, batch, normalize=True):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (6x3 and 4x5)")

    monkeypatch.setattr(type(clip_encoder), "encode_pixels", broken)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied") as raised:
        vlfair.embed_images(clip_encoder, six_images, num_workers=0, cache_dir=None)
    assert not isinstance(raised.value, BatchTooLargeError)


# ---- UNCLEAR 30: decode workers ------------------------------------------------------------------------------------
def test_a_thousand_workers_for_six_images_start_what_helps_and_say_so(clip_encoder, six_images, monkeypatch, capsys):
    """UNCLEAR 30: `num_workers=1000` on 6 images forked a thousand decoders, then "can't start new thread"; the
    workers started are at most one per piece to decode and one per CPU, the cut said with why, the embeddings those
    of no workers."""
    started = []
    loader = torch.utils.data.DataLoader

    def spy(*args, num_workers=0, **kwargs):
        started.append(num_workers)
        assert num_workers <= 1, f"{num_workers} decode workers for one piece of six images"  # fails before forking
        return loader(*args, num_workers=num_workers, **kwargs)

    monkeypatch.setattr(torch.utils.data, "DataLoader", spy)
    found = vlfair.embed_images(clip_encoder, six_images, num_workers=1000, cache_dir=None, progress=False)
    assert started == [1]
    assert "warning: num_workers=1000 cut to 1, the most that help here: 1 piece of up to 64 images to decode" \
        in capsys.readouterr().err
    np.testing.assert_array_equal(found, vlfair.embed_images(clip_encoder, six_images, num_workers=0, cache_dir=None))


def test_workers_are_cut_to_the_cpus_this_process_may_use(monkeypatch, capsys):
    """UNCLEAR 30: past the CPUs, workers only contend for cores; a number that helps is not cut, nor said."""
    monkeypatch.setattr(embed, "available_cpus", lambda: 4)
    assert embed._decode_workers(1000, torch.device("cpu"), pieces=500, piece_size=64) == 4
    said = capsys.readouterr().err
    assert "num_workers=1000 cut to 4" in said and "500 pieces of up to 64 images to decode, and 4 CPUs" in said
    assert embed._decode_workers(3, torch.device("cpu"), pieces=500, piece_size=64) == 3
    assert embed._decode_workers(0, torch.device("cpu"), pieces=500, piece_size=64) == 0
    assert embed._decode_workers(None, torch.device("cuda", 0), pieces=2, piece_size=64) == 2
    assert capsys.readouterr().err == ""


# ---- UNCLEAR 28: compare's undefined statistics --------------------------------------------------------------------
@pytest.fixture(scope="module")
def traits_run(clip_dir, tmp_path_factory) -> Path:
    """A traits run of a tiny CLIP, 4 images per cell (its ANOVAs are F statistics across each race's genders)."""
    from vlfair.figures import not_drawn
    from vlfair.probes import run_probe

    out = tmp_path_factory.mktemp("round5-runtime") / "traits"
    with not_drawn():
        run_probe("traits", vlfair.load_encoder(str(clip_dir), dtype="float32"), "synthetic:fairface", out,
                  cache_dir=None, settings={"bootstrap": 50, "n_permutations": 50, "per_cell": 4, "allow_short": True})
    return out


def _edited(source: Path, target: Path, scores) -> Path:
    """Another run of ``source``'s rows whose confidence columns are ``scores(frame)`` (its samples' SHA-256
    and values recorded anew, as that run would have written them)."""
    from vlfair.samples import read_samples, write_samples

    shutil.copytree(source, target)
    content = json.loads((target / "results.json").read_text())
    samples, _ = read_samples(target / "samples.parquet")
    for column in [c for c in samples.frame.columns if c.startswith("confidence ")]:
        samples.frame[column] = scores(samples.frame)
    stored = {key: value for key, value in content.items() if key not in ("metrics", "published", "samples")}
    content["samples"] = write_samples(samples, target / "samples.parquet", stored)
    (target / "results.json").write_text(json.dumps(content))
    return reported_as_its_samples_give(target)  # its values those samples give (compare refuses others)


ALIKE = {  # scores that leave every F of a run without a value, and what compare calls it
    "undefined": (lambda frame: np.full(len(frame), 0.5), "undefined (0/0 on these rows"),
    "infinite": (lambda frame: np.where(frame["gender"] == "Male", 0.25, 0.75), "infinite (a division by zero"),
}


@pytest.mark.parametrize("kind", list(ALIKE))
def test_a_statistic_undefined_in_both_runs_is_said_in_words_not_as_numpys_warning(traits_run, tmp_path, capsys,
                                                                                  kind):
    """UNCLEAR 28: two runs whose F statistics are infinite (each gender's scores alike) or 0/0 (every score alike)
    printed numpy's "RuntimeWarning: invalid value encountered in subtract" (inf - inf in the paired permutation
    test) and called the difference "not assessed (no interval: bootstrap 0)" with 1,000 resamples; the warning
    is silenced where the difference is taken, and each kind is said once, in words, naming the differences."""
    scores, meaning = ALIKE[kind]
    a = _edited(traits_run, tmp_path / "a", scores)
    b = _edited(traits_run, tmp_path / "b", lambda frame: scores(frame) / 2)  # another run, alike in the same way
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # any numpy warning left stops the command (exit 2)
        code = main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp"), "--bootstrap", "100",
                     "--permutations", "100"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "RuntimeWarning" not in captured.out + captured.err and "bootstrap 0" not in captured.out
    notes = [line for line in captured.out.splitlines() if line.startswith("Not assessed: ")]
    said = [note for note in notes if f"whose statistic is {meaning}" in note]  # each kind once
    assert len(notes) == len({note.split(" whose statistic is ")[1][:9] for note in notes}) and len(said) == 1
    assert "trait_anova (trait = " in said[0]
    content = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    undefined = [entry for entry in content["differences"] if entry["metric"] == "trait_anova"]
    assert any(entry["undefined"] == {"a": kind, "b": kind} for entry in undefined)
    assert all(entry["verdict"] == "not_assessed" and entry["undefined"] for entry in undefined)
    assert f"not assessed ({kind} for " in (tmp_path / "cmp" / "differences.md").read_text() or \
        f"not assessed ({kind} for " in (tmp_path / "cmp" / "comparison.html").read_text()


def test_the_paired_difference_of_two_infinite_statistics_is_nan_without_a_warning():
    """UNCLEAR 28's root: A - B of statistics infinite in both runs, at the data, on the resamples and on the
    relabellings of the test, is nan (not assessed), numpy's warning silenced there alone."""
    from vlfair import paired

    groups = np.repeat([0, 1], 6)
    row_set = paired.RowSet(np.arange(12), ("score",), groups, (paired.Statistic("f", {}, paired.f_statistic(), 0.0),))
    a = np.where(groups == 0, 0.25, 0.75)  # no spread within either group, some between them: F is infinite
    b = np.where(groups == 0, 0.5, 0.125)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        found, = paired.compare(row_set, a, b, bootstrap=50, n_permutations=50, seed=0)
    assert found.value_a == found.value_b == np.inf and np.isnan(found.difference)
    assert found.difference_ci is None and found.p_method == "undefined"
    with pytest.warns(RuntimeWarning):  # elsewhere numpy still says it: nothing is silenced wholesale
        np.array([np.inf]) - np.array([np.inf])
