"""What vlfair's evaluate modules share (imports datasets only, never torch).

- Labels of any kind: a module declares one ``datasets.Features`` per combination of string and
  integer label columns, as evaluate's own modules do, so ClassLabel ids, argmax predictions
  and names all pass (the measures compare labels by their text).
- ``evaluate.combine`` hands every keyword to every module: each module ignores the inputs and
  options that another vlfair module takes, and still rejects a name no vlfair module knows
  (a typo is an error, not a silently ignored option).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import datasets

LABEL_TYPES = ("string", "int64")

# Every input and option of every vlfair module (tests/test_metric_modules.py keeps it complete).
SHARED_NAMES = frozenset({
    "predictions", "references", "groups", "languages", "strata", "variants", "image_embeddings", "text_embeddings_a",
    "text_embeddings_b", "protected_group", "reference_group", "bootstrap", "confidence", "seed", "n_permutations",
    "pivot", "welch", "tolerance", "item_groups", "k", "target", "smoothing", "bias_pair", "num_words",
})


def label_features(fixed: dict[str, Any], labels: Sequence[str]) -> list[datasets.Features]:
    """One Features per string/integer combination of the ``labels`` columns (all strings first);
    ``fixed`` columns keep their feature. Column order: ``fixed`` then ``labels``."""
    return [datasets.Features({**fixed, **{name: datasets.Value(kind) for name, kind in zip(labels, kinds)}})
            for kinds in itertools.product(LABEL_TYPES, repeat=len(labels))]


def ignore_shared(module: str, options: dict[str, Any]) -> None:
    """Drop (accept) options meant for other vlfair modules; raise on names none of them takes."""
    unknown = sorted(set(options) - SHARED_NAMES)
    if unknown:
        raise TypeError(f"{module}: unknown option(s) {unknown}; the options of vlfair's modules are "
                        f"{sorted(SHARED_NAMES)}")


__all__ = ["LABEL_TYPES", "SHARED_NAMES", "ignore_shared", "label_features"]
