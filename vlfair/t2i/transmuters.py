"""Transmuters: replacement words for chosen positions of a prompt.

A prompt is split on whitespace into words; a transmuter proposes ``c`` alternative word lists
in which the words at ``positions`` are replaced (never by themselves).
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import yaml

from vlfair.measures.ties import canonical_order

STOPWORDS = frozenset("a an the at in on of to for with and or by from is are this that".split())


def split_prompt(prompt: str) -> list[str]:
    words = prompt.split()
    if not words:
        raise ValueError("the prompt is empty")
    return words


def content_positions(words: Sequence[str]) -> list[int]:
    """Positions of the words worth replacing (not articles or prepositions)."""
    return [i for i, w in enumerate(words) if w.lower().strip(string.punctuation) not in STOPWORDS]


class Transmuter(Protocol):
    name: str

    def candidates(self, words: Sequence[str], positions: Sequence[int], count: int) -> list[list[str]]:
        """Up to ``count`` word lists with the words at ``positions`` replaced."""

    def identity(self) -> dict[str, Any]:
        """What makes its candidates what they are (part of the image cache key of a prompt)."""


class LexiconTransmuter:
    """Replacements from a YAML lexicon (default: the one shipped for the study's vocabulary)."""

    name = "lexicon"

    def __init__(self, path: str | Path | None = None):
        text = Path(path).read_text() if path else resources.files("vlfair.t2i").joinpath("lexicon.yaml").read_text()
        data = yaml.safe_load(text)
        self.words = {str(k).lower(): [str(v) for v in vs] for k, vs in data["words"].items()}
        self.source = str(path) if path else f"vlfair lexicon v{data['version']}"

    def identity(self) -> dict[str, Any]:
        return {"transmuter": self.name, "source": self.source}

    def candidates(self, words: Sequence[str], positions: Sequence[int], count: int) -> list[list[str]]:
        options = []
        for p in positions:
            key = words[p].lower().strip(string.punctuation)
            if key not in self.words:
                raise ValueError(f"the lexicon has no replacements for {words[p]!r} (position {p}); "
                                 f"add it to the lexicon or use the mlm transmuter")
            options.append([w for w in self.words[key] if w.lower() != key])
        out = []
        for combination in itertools.islice(itertools.product(*options), count):
            replaced = list(words)
            for p, w in zip(positions, combination):
                replaced[p] = w
            out.append(replaced)
        return out


class MLMTransmuter:
    """A fill-mask model proposes replacements (default bert-base-uncased; any id or directory).

    Several positions are filled one after another, left to right, each with the earlier ones
    already filled: a masked LM predicts every mask independently of the others, so filling
    them jointly from those marginals pairs words that do not fit together ("a brave nurse at
    the surgery"); sequential filling keeps each combination coherent. Candidate j takes the
    j-th best word at the first position and the best fitting word at the later ones.
    Subword pieces, punctuation, special tokens and the original word are never proposed; words
    and numbers are.
    """

    name = "mlm"

    def __init__(self, model: str = "bert-base-uncased", device: str = "cpu", top_k: int = 50):
        import torch
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        from vlfair.models.hf import load_pretrained
        from vlfair.models.hub import resolve_model

        resolved = resolve_model(model)
        self.spec, self.revision = model, resolved.revision
        self.tokenizer = AutoTokenizer.from_pretrained(resolved.path, trust_remote_code=False)
        # the encoders' loader: safetensors (all resolve_model fetched), its "Loading weights" bar only under --verbose
        self.model = load_pretrained(resolved.path, torch.device(device), torch.float32, use_safetensors=True,
                                     trust_remote_code=False, auto_class=AutoModelForMaskedLM)
        self.device, self.top_k = device, top_k
        if self.tokenizer.mask_token is None:
            raise ValueError(f"{model!r} has no mask token: not a fill-mask model")

    def identity(self) -> dict[str, Any]:
        return {"transmuter": self.name, "model": self.spec, "revision": self.revision}

    def _usable(self, token: str | None, original: str) -> bool:
        if token is None:
            return False
        word = token.strip()
        return (bool(word) and not token.startswith("##") and token not in self.tokenizer.all_special_tokens
                and not all(ch in string.punctuation for ch in word) and word.isalnum()  # "500" may become "100"
                and word.lower() != original.lower())

    def _ranked(self, words: Sequence[str], position: int, original: str) -> list[str]:
        import torch

        masked = list(words)
        masked[position] = self.tokenizer.mask_token
        batch = self.tokenizer(" ".join(masked), return_tensors="pt").to(self.device)
        with torch.inference_mode():
            logits = self.model(**batch).logits[0]
        where = (batch["input_ids"][0] == self.tokenizer.mask_token_id).nonzero()[0, 0]
        # the words in an order no kernel's rounding changes: near-equal logits by token id (vlfair.measures.ties)
        scores = logits[where].float().cpu().numpy()[None, :]
        top = canonical_order(scores, min(self.top_k, scores.shape[1]))[0].tolist()
        return [t for t in self.tokenizer.convert_ids_to_tokens(top) if self._usable(t, original)]

    def candidates(self, words: Sequence[str], positions: Sequence[int], count: int) -> list[list[str]]:
        positions = sorted(positions)
        first = self._ranked(words, positions[0], words[positions[0]])[:count]
        out = []
        for word in first:
            replaced = list(words)
            replaced[positions[0]] = word
            for p in positions[1:]:
                options = self._ranked(replaced, p, words[p])
                if not options:
                    break
                replaced[p] = options[0]
            else:
                out.append(replaced)
        return out


TRANSMUTERS = {"lexicon": LexiconTransmuter, "mlm": MLMTransmuter}


def make_transmuter(name: str, **options: Any) -> Transmuter:
    if name not in TRANSMUTERS:
        raise ValueError(f"unknown transmuter {name!r}; transmuters: {sorted(TRANSMUTERS)}")
    return TRANSMUTERS[name](**options)
