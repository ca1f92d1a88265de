"""vlfair: measure social bias in vision-language models.

Public names are resolved lazily so that ``from vlfair.measures import ...`` (what every
evaluate module does) never imports torch or transformers.

Code conventions: type hints on public functions (``numpy.typing.ArrayLike`` where arrays are meant,
``@overload`` where a flag changes the return type), Google-style docstrings, short comments that say
why. ``ruff check vlfair metrics spaces tests benchmarks``, ``mypy`` and ``lint-imports`` are clean and
run by the test command (``tests/test_code_quality.py``) and by pre-commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vlfair._lazy import lazy_getattr
from vlfair._version import __version__
from vlfair.logging import silence_torchvision_fallback

silence_torchvision_fallback()  # before anything imports transformers' image processors

# The lazy names' types, for type checkers and editors (nothing is imported at run time); "x as x"
# marks a re-export, as __all__ would if a tool could read it from _LAZY.
if TYPE_CHECKING:
    from vlfair.data import balanced_sample as balanced_sample
    from vlfair.data import load_dataset as load_dataset
    from vlfair.data import register_dataset as register_dataset
    from vlfair.embed import EmbeddingResult as EmbeddingResult
    from vlfair.embed import embed_images as embed_images
    from vlfair.embed import embed_texts as embed_texts
    from vlfair.imageio import BadImageError as BadImageError
    from vlfair.metrics import load_metric as load_metric
    from vlfair.models import Encoder as Encoder
    from vlfair.models import load_encoder as load_encoder
    from vlfair.models import register_backend as register_backend
    from vlfair.probes import register_probe as register_probe
    from vlfair.probes import run_probe as run_probe
    from vlfair.probes.scorers import register_scorer as register_scorer

# public name -> module that defines it
_LAZY = {
    "load_encoder": "vlfair.models",
    "register_backend": "vlfair.models",
    "Encoder": "vlfair.models",
    "embed_images": "vlfair.embed",
    "embed_texts": "vlfair.embed",
    "EmbeddingResult": "vlfair.embed",
    "BadImageError": "vlfair.imageio",
    "load_metric": "vlfair.metrics",
    "load_dataset": "vlfair.data",
    "balanced_sample": "vlfair.data",
    "run_probe": "vlfair.probes",
    "register_probe": "vlfair.probes",
    "register_dataset": "vlfair.data",
    "register_scorer": "vlfair.probes.scorers",
}

__all__ = ["__version__", *_LAZY]


__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(__all__)
