"""Where a model runs (``--device``, ``load_encoder(device=)``, ``run_probe(device=)``) and what a model spec
may be: a device the machine or its PyTorch build lacks is one line before any work, a generative checkpoint
given as a dual encoder is told to be written ``lvlm:``, and ``vlfair run --help`` lists every backend prefix.

CUDA is mocked (``torch.backends.cuda.is_built``, ``torch.cuda.is_available``, ``device_count``) wherever a test
asserts a refusal, so each one holds on a CPU build and on a GPU machine alike; the one test of the real build
checks what that build really has, either way."""

from __future__ import annotations

import json

import pytest
import torch

import vlfair
from vlfair import testing
from vlfair.cli import main
from vlfair.models.base import UnavailableDevice, checked_device, pick_device


def _cuda(monkeypatch, built: bool, gpus: int) -> None:
    """This process's PyTorch as a build with (``built``) or without CUDA, seeing ``gpus`` GPUs."""
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: built)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: built and gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus if built else 0)


def _run(tmp_path, *flags: str, model: str = "unused-model", probe: str = "professions") -> list[str]:
    return ["run", probe, "--model", model, "--dataset", "synthetic:professions", "--out", str(tmp_path / "out"),
            "--cache-dir", str(tmp_path / "cache"), "--quiet", *flags]


def _said_once(capsys, code: int) -> str:
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1, error
    assert "Traceback" not in error and "AssertionError" not in error and "--debug" not in error
    return error.strip()


def test_cuda_on_a_build_without_it_is_one_line_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    _cuda(monkeypatch, built=False, gpus=0)
    for device in ("cuda", "cuda:0"):
        error = _said_once(capsys, main(_run(tmp_path, "--device", device)))
        assert error.startswith(f"vlfair run: --device {device}: this PyTorch build has no CUDA (torch "), error
        assert error.endswith("use auto or cpu"), error
    error = _said_once(capsys, main(["demo", "--out", str(tmp_path / "demo"), "--device", "cuda"]))
    assert error.startswith("vlfair demo: --device cuda: this PyTorch build has no CUDA"), error
    assert not (tmp_path / "out").exists() and not (tmp_path / "demo").exists() and not (tmp_path / "cache").exists()


def test_a_gpu_index_past_the_last_and_a_hidden_gpu_are_said(tmp_path, capsys, monkeypatch):
    _cuda(monkeypatch, built=True, gpus=1)
    error = _said_once(capsys, main(_run(tmp_path, "--device", "cuda:3")))
    assert error == ("vlfair run: --device cuda:3: this machine has 1 CUDA GPU (cuda:0); use auto, cpu, cuda or one "
                     "of them")
    assert checked_device("cuda:0") == torch.device("cuda", 0) and checked_device("cuda") == torch.device("cuda")
    _cuda(monkeypatch, built=True, gpus=4)
    assert checked_device("cuda:3") == torch.device("cuda", 3)
    with pytest.raises(UnavailableDevice, match=r"this machine has 4 CUDA GPUs \(cuda:0 to cuda:3\)"):
        checked_device("cuda:4")
    _cuda(monkeypatch, built=True, gpus=0)  # a CUDA build on a machine whose GPUs are hidden or absent
    error = _said_once(capsys, main(_run(tmp_path, "--device", "cuda")))
    assert error.startswith("vlfair run: --device cuda: no CUDA GPU is visible (") and "use auto or cpu" in error
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("device", "reason"), [("gpu", "not a device"), ("cuda:x", "not a device"),
                                                ("cuda:-1", "not a device"), ("", "not a device"),
                                                ("xpu", "vlfair runs on the CPU or CUDA GPUs")])
def test_a_value_that_names_no_device_is_said_with_the_valid_ones(tmp_path, capsys, device, reason):
    error = _said_once(capsys, main(_run(tmp_path, "--device", device)))
    assert error == f"vlfair run: --device {device}: {reason}; use auto, cpu, cuda or cuda:N"
    assert not (tmp_path / "out").exists()


def test_the_real_build_s_cuda_is_refused_only_where_it_lacks_it():
    """What this machine's PyTorch really has: cuda refused by name on a CPU build, taken where a GPU is visible."""
    if torch.cuda.is_available():
        assert checked_device("cuda") == torch.device("cuda")
        assert pick_device("cuda:0") == torch.device("cuda", 0)
    else:
        with pytest.raises(UnavailableDevice, match=r"device 'cuda': (this PyTorch build has no CUDA|no CUDA GPU)"):
            pick_device("cuda")
    assert pick_device("cpu") == torch.device("cpu") and checked_device(torch.device("cpu")) == torch.device("cpu")


def test_the_python_api_raises_a_value_error_before_any_weights_load(clip_dir, tmp_path, monkeypatch):
    import vlfair.models.hf as hf

    def never(*args, **kwargs):
        raise AssertionError("the weights were loaded")

    monkeypatch.setattr(hf, "load_pretrained", never)
    _cuda(monkeypatch, built=False, gpus=0)
    with pytest.raises(ValueError, match=r"^device 'cuda': this PyTorch build has no CUDA"):
        vlfair.load_encoder(str(clip_dir), device="cuda")
    with pytest.raises(ValueError, match=r"^device 'gpu': not a device; use auto, cpu, cuda or cuda:N"):
        vlfair.load_encoder("lvlm:" + str(clip_dir), device="gpu")
    with pytest.raises(ValueError, match=r"^device 'cuda:1': this PyTorch build has no CUDA"):
        vlfair.run_probe("professions", str(clip_dir), "synthetic:professions", out_dir=tmp_path / "out",
                         device="cuda:1", cache_dir=None)
    assert not (tmp_path / "out").exists()


def test_a_device_for_a_model_already_loaded_is_refused(clip_encoder, tmp_path):
    with pytest.raises(ValueError, match=r"device='cpu' places a model the run loads from its spec; a loaded model "
                                         r"runs where it was loaded"):
        vlfair.run_probe("professions", clip_encoder, "synthetic:professions", out_dir=None, device="cpu")


def test_device_cpu_runs_the_model_there(clip_dir, tmp_path, monkeypatch):
    import vlfair.models.hf as hf

    placed = []
    original = hf.load_pretrained

    def spy(path, device, *args, **kwargs):
        placed.append(device)
        return original(path, device, *args, **kwargs)

    monkeypatch.setattr(hf, "load_pretrained", spy)
    assert main(_run(tmp_path, "--device", "cpu", "--limit", "48", "--no-figures", "--bootstrap", "0",
                     "--permutations", "0", model=str(clip_dir))) == 0
    assert placed == [torch.device("cpu")]
    assert json.loads((tmp_path / "out" / "results.json").read_text())["metrics"]


def test_a_generative_checkpoint_given_as_a_directory_is_told_to_write_lvlm(tmp_path, capsys):
    llava = testing.tiny_llava(tmp_path / "llava")
    capsys.readouterr()
    error = _said_once(capsys, main(_run(tmp_path, "--limit", "4", model=str(llava))))
    assert error == (f"vlfair run: {str(llava)!r} is a generative vision-language model "
                     "(LlavaForConditionalGeneration), not an image-text dual encoder: write "
                     f"lvlm:{llava} to ask it each probe's questions")
    assert "LOAD REPORT" not in capsys.readouterr().out  # refused from its config, before transformers loads weights
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match=r"write lvlm:"):
        vlfair.load_encoder(str(llava))


def test_run_help_lists_every_backend_prefix_from_the_registry(monkeypatch, capsys):
    import vlfair.models as models

    monkeypatch.setattr(models, "BACKENDS", models.BACKENDS.copy())  # the plugin's prefix gone after the test
    models.register_backend("toy-backend", lambda ref, **options: None)
    with pytest.raises(SystemExit):
        main(["run", "professions", "--help"])
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    for prefix in ("hf:", "mclip:", "lvlm:", "toy-backend:"):
        assert prefix in shown, shown
    assert models.backend_prefixes() == ["hf:", "lvlm:", "mclip:", "toy-backend:"]
