"""float32 asked for is float32 computed.

PyTorch lets some float32 work run at lower precision by default or by a global switch: cuDNN's
convolutions use TF32 (a 10-bit mantissa) on Ampere and later GPUs unless told otherwise, and a
training script's ``torch.set_float32_matmul_precision("high")`` makes every float32 matmul TF32 (on
a CPU, ``torch.backends.mkldnn.*.fp32_precision = "bf16"`` does the same with bf16). Measured on an
H200, a CLIP tower's patch embedding in TF32 moved its embeddings by ~1e-4 from a CPU's float32 and
from one batch size to another, enough to change a demo number in its fourth digit. So a model vlfair
runs in float32 runs its forwards with every such switch at "ieee" (full float32), and gives each
switch back as it found it: the precision is the user's choice (``dtype``), not the process's.
bf16 and float16 forwards are left as they are.

On the H200, a tiny CLIP's float32 embeddings moved by up to 9e-5. The forwards guarded are
an encoder's ``encode_pixels`` / ``encode_texts``, a generative scorer's ``log_likelihoods_many``,
``generate_questions`` and ``score_by_full_forward``, and Grad-CAM (``explain.gradcam``), with every
``fp32_precision`` switch (cuBLAS, cuDNN convolutions and RNNs, oneDNN) that asks for less than float32
set to "ieee" when the model is float32 (at torch's defaults, only cuDNN's; on torch before 2.9, the two
``allow_tf32`` flags off).

Nor is the precision the instruction set's: ``dtype="auto"`` (``models.base.pick_dtype``) is float32 on
every CPU (bf16, fast where AVX512-BF16 or AMX multiply it, gave traits F values up to 29 % from
float32's, so the same command gave other numbers on another CPU), and bf16 on a CPU only when asked for;
on a GPU it is bf16 (float16 without it), as models are run there, said in one info line. The dtype is part
of every run's family key (``report.results.build_results``): runs in two precisions are never ranked
against each other.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import torch

# (torch.backends' module, operation): the switches of torch 2.9 and later (``fp32_precision``)
SWITCHES = (("cuda", "matmul"), ("cudnn", "conv"), ("cudnn", "rnn"), ("mkldnn", "matmul"), ("mkldnn", "conv"),
            ("mkldnn", "rnn"))

Method = TypeVar("Method", bound=Callable[..., Any])


def _switches() -> list[Any]:
    import torch

    found = (getattr(getattr(torch.backends, backend, None), op, None) for backend, op in SWITCHES)
    return [switch for switch in found if switch is not None and hasattr(switch, "fp32_precision")]


@contextmanager
def ieee_float32(dtype: torch.dtype) -> Iterator[None]:
    """Within it, float32 work is IEEE float32 (no TF32, no bf16), where ``dtype`` is float32."""
    import torch  # here, not at import: a module that only declares a model's methods need not load torch

    if dtype != torch.float32:
        yield
        return
    switches = _switches()
    if not switches:  # torch before 2.9: the two TF32 flags of that time
        saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
        try:
            yield
        finally:
            torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
        return
    # only the switches that ask for less are set: one at "none" under a process-wide "none" computes IEEE float32
    # already, so a process at torch's defaults changes only cuDNN's convolutions (TF32 by default)
    inherited = getattr(torch.backends, "fp32_precision", "none")
    lowered = [switch for switch in switches
               if switch.fp32_precision not in ("none", "ieee")
               or (switch.fp32_precision == "none" and inherited not in ("none", "ieee"))]
    before = [switch.fp32_precision for switch in lowered]
    for switch in lowered:
        switch.fp32_precision = "ieee"
    try:
        yield
    finally:
        for switch, value in zip(lowered, before):
            switch.fp32_precision = value


def in_asked_precision(method: Method) -> Method:
    """A model's method that runs its forwards under :func:`ieee_float32` of the model's ``dtype``."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with ieee_float32(self.dtype):
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
