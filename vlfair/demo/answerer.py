"""The world's tiny generative model (an "answerer"): a LLaVA trained on the same captions as the
world's encoders, each read as the answer to a question about its image.

A caption and its image become one (image, question, answer) example (:func:`qa_pairs`): a
profession caption answers "what is this person's occupation ?" (its profession) or "what is this
a photo of ?" (the caption), a trait caption "is this person smart or dumb ?" (its word) or
"describe this image ." (the caption), a name caption "who is this ?", a public role "what is this
a photo of ?" (the role), a German caption the German question. The planted statistics are the
captions', so the answerer carries the same biases as the world's encoders; the loss is on the
answers' tokens and the end of the answer.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, cast

import numpy as np

from vlfair.demo.world import (
    CATEGORIES,
    NAMES,
    OCCUPATIONS,
    PROFESSIONS,
    TRAIT_PAIRS,
    Person,
    Planting,
    render_many,
    training_pairs,
    vocabulary,
)

# the questions the world's answerer is trained on, and the probes' generative settings in the demo ask
OCCUPATION_QUESTION = "what is this person's occupation ?"
WHAT_QUESTION = "what is this a photo of ?"
GERMAN_QUESTION = "wovon ist das ein foto ?"
TRAIT_QUESTION = "is this person {positive} or {negative} ?"
WHO_QUESTION = "who is this ?"
DESCRIBE_QUESTION = "describe this image ."
QUESTION_WORDS = sorted({w for q in (OCCUPATION_QUESTION, WHAT_QUESTION, GERMAN_QUESTION, TRAIT_QUESTION, WHO_QUESTION,
                                     DESCRIBE_QUESTION) for w in q.split() if "{" not in w} | {"none", "of", "these"})


@dataclasses.dataclass(frozen=True)
class AnswererConfig:
    """Everything that decides a world answerer besides its planting."""

    pairs: int = 24_000          # (image, caption) pairs drawn from the world, as the encoders'
    steps: int = 2000
    batch_size: int = 64
    learning_rate: float = 3e-3
    weight_decay: float = 0.01
    warmup: float = 0.1
    average: float = 0.25        # the weights are the mean over this last share of the steps (SWA): the
    # noise of the last steps averaged out, so a world without a bias gives an answerer without one
    # each pass over the pairs shows their people in new renders (pixel noise and random bits drawn
    # anew): a tiny model trained for epochs on one render per caption learns those images by heart,
    # and its answers about new images then carry gaps of its own (a control answerer trained 6000 steps
    # on fixed renders: doctor 0.88, nurse 0.90 where the world has 1)
    fresh_images: bool = True
    # each pass over the pairs is ordered so that every kind of example (its question and answer, its
    # person's gender, race, occupation and identity) is spread evenly through it: any run of steps
    # then holds each answer to each question about each kind of person in the world's own proportions.
    # Drawn at random, the last steps (which the weights remember best, and average) hold a random
    # draw around them, and a control answerer learnt that draw: gaps of 5-10 % in P(answer) between
    # genders and races where the world's captions have none
    stratified: bool = True
    # every token no training answer holds starts with one output row (zero), and every token no training
    # prompt or answer holds with one input embedding (zero): their gradients are then the same, so what the
    # world never taught stays one answer to the model. Drawn at random, those rows made each untaught word a
    # score of its own: P-FI's offices (never taught) were a near-tie among random logits, decided by gender
    # (16 of 16 women 'senator', 11 of 16 men 'mayor'), and untaught concepts were retrieved by race
    untaught_tied: bool = True
    hidden_size: int = 64        # vision tower and decoder
    layers: int = 2
    heads: int = 4
    seed: int = 0


def qa_pairs(people: list[Person], captions: list[str]) -> list[tuple[str, str]]:
    """Each caption as (question, answer) (the module's docstring). A caption that two questions fit
    is given them in turn among the pairs of one caption and one kind of person (gender and race),
    so that each question gets half of them (up to one): a random split would plant
    chance biases of a few percent (the world's captions are exact for the same reason)."""
    german_words = {"ein", "foto", "von"}
    seen: dict[tuple, int] = {}
    pairs = []
    for person, caption in zip(people, captions):
        words = caption.split()
        key = (caption, person.gender, person.race)
        either = seen.get(key, 0) % 2 == 0
        seen[key] = seen.get(key, 0) + 1
        if set(words[:3]) <= german_words:
            pairs.append((GERMAN_QUESTION, caption))
        elif words[:4] == ["a", "photo", "of", "a"] and words[-1] in PROFESSIONS and either:
            pairs.append((OCCUPATION_QUESTION, words[-1]))
        elif words[:4] == ["a", "photo", "of", "a"]:
            pairs.append((WHAT_QUESTION, caption))
        elif len(words) == 3 and words[0] == "a" and words[2] == "person":
            pair = next(p for p in TRAIT_PAIRS if words[1] in p)
            pairs.append((TRAIT_QUESTION.format(positive=pair[0], negative=pair[1]), words[1]) if either
                         else (DESCRIBE_QUESTION, caption))
        elif words[:4] == ["this", "is", "a", "picture"]:
            pairs.append((WHO_QUESTION, words[-1]))
        elif words[:4] == ["this", "is", "a", "photo"] and words[-1] in OCCUPATIONS:
            pairs.append((WHAT_QUESTION, words[-1]))
        else:
            raise ValueError(f"no question for the world's caption {caption!r}")
    return pairs


def answerer_words() -> list[str]:
    """The answerer's vocabulary beyond the chat's: the world's words, its questions' and the probes' classes."""
    return list(dict.fromkeys([*vocabulary(), *QUESTION_WORDS, *NAMES, *CATEGORIES, "person's"]))


def train_answerer(out: str | Path, planting: Planting, config: AnswererConfig = AnswererConfig(), *,
                   name: str | None = None, progress: bool = True,
                   data: tuple[list[str], np.ndarray, str] | None = None, device: str = "cpu") -> Path:
    """Train a tiny LLaVA on the world's captions as answers; save it as ``lvlm:`` loads it, with
    ``world.json``. ``data``: the world's training data (captions, images, hash) where rendered already;
    ``device``: where to train (a GPU trains the validity sweep's many answerers faster; the shipped
    ones were trained on a CPU, in float32)."""
    import torch
    from tqdm.auto import tqdm

    from vlfair.demo.train import TrainingConfig, _training_data, save_trained
    from vlfair.logging import progress_bars_enabled
    from vlfair.tiny import llava_parts

    start = time.perf_counter()
    c = config
    captions, images, data_hash = data or _training_data(planting, TrainingConfig(pairs=c.pairs, seed=c.seed))
    people, drawn = training_pairs(c.pairs, planting, c.seed)  # the people the captions describe (as rendered)
    assert drawn == captions, "the answerer's people and the rendered captions are one draw"
    model, processor = llava_parts(answerer_words(), image_size=32, patch_size=8, hidden=c.hidden_size,
                                   layers=c.layers, heads=c.heads, seed=c.seed)
    tokenizer = processor.tokenizer
    examples = qa_pairs(people, captions)
    ids, labels = (tensor.to(device) for tensor in _tokenized(processor, examples))
    if c.untaught_tied:
        tie_untaught(model, ids, labels)
    pixels = processor.image_processor(images=list(images), return_tensors="pt")["pixel_values"].to(device)
    shown = 0  # the pass over the pairs whose renders ``pixels`` holds
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=c.learning_rate, weight_decay=c.weight_decay)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=c.learning_rate, total_steps=c.steps,
                                                   pct_start=c.warmup)
    generator = torch.Generator().manual_seed(c.seed)
    averaged = torch.optim.swa_utils.AveragedModel(model)
    average_from = int(c.steps * (1 - c.average))
    model.train()
    bar = tqdm(range(c.steps), desc=f"training {name or 'world answerer'}", unit="step",
               disable=not (progress and progress_bars_enabled()), mininterval=1.0)
    strata = [(question, answer, p.gender, p.race, p.occupation, p.identity)
              for p, (question, answer) in zip(people, examples)]
    order = np.zeros(0, dtype=np.int64)  # the examples of this pass over the pairs, in the order shown
    for step in bar:
        if c.fresh_images and step * c.batch_size // len(examples) > shown:
            shown = step * c.batch_size // len(examples)
            pixels = _pixels(processor, render_many(people, np.random.default_rng([c.seed, shown]))).to(device)
        if not c.stratified:
            batch = torch.randint(0, len(examples), (c.batch_size,), generator=generator).to(device)
        else:
            while len(order) < c.batch_size:  # a pass's last examples, then the next pass's first
                order = np.concatenate([order, spread_order(strata, np.random.default_rng([c.seed, 1, step]))])
            batch, order = torch.from_numpy(order[:c.batch_size]).to(device), order[c.batch_size:]
        present = ids[batch] != tokenizer.pad_token_id
        width = int(present.sum(dim=1).max())
        result = model(input_ids=ids[batch, :width], attention_mask=present[:, :width].long(),
                       pixel_values=pixels[batch], labels=labels[batch, :width])
        optimizer.zero_grad()
        result.loss.backward()
        optimizer.step()
        schedule.step()
        if step >= average_from:
            averaged.update_parameters(model)
        if step % 50 == 0 or step == c.steps - 1:
            bar.set_postfix(loss=f"{result.loss.item():.3f}", refresh=False)
    bar.close()
    model = cast(Any, averaged.module).to("cpu")  # no batch norm: the averaged weights need no statistics updated
    model.eval()
    return save_trained(out, [model, processor], {"name": name, "config_hash": answerer_hash(planting, c),
                                                  "training_data_hash": data_hash},
                        answerer_config(planting, c), float(result.loss.item()), start)


def tie_untaught(model: Any, ids: Any, labels: Any) -> None:
    """Give every token no answer in ``labels`` holds one output row, and every token ``ids`` never holds one
    input embedding: zero (:attr:`AnswererConfig.untaught_tied`). Their gradients are equal, so they stay equal."""
    import torch

    vocabulary = model.get_output_embeddings().weight.shape[0]
    answered = torch.zeros(vocabulary, dtype=torch.bool)
    answered[labels[labels != -100].unique().cpu()] = True
    read = torch.zeros(vocabulary, dtype=torch.bool)
    read[ids.unique().cpu()] = True
    with torch.no_grad():
        model.get_output_embeddings().weight[~answered.to(model.device)] = 0.0
        model.get_input_embeddings().weight[~read.to(model.device)] = 0.0


def spread_order(strata: list[Any], rng: np.random.Generator) -> np.ndarray:
    """A permutation of the examples (``strata[i]``: example i's kind) that spreads each kind evenly:
    the k-th of a kind's n examples (in random order) is placed at (k + u) / n of the way through,
    u uniform in [0, 1) for each kind. Any run of m examples then holds m times each kind's share of
    them, give or take a little (one of each kind at either end of the run, where the kinds' own
    offsets u meet): a stratified ordering, as the world's captions carry its shares exactly
    (``vlfair.demo.world._exact``) rather than a random draw around them."""
    kinds: dict[Any, list[int]] = {}
    for index, kind in enumerate(strata):
        kinds.setdefault(kind, []).append(index)
    positions = np.empty(len(strata))
    for members in kinds.values():
        count = len(members)
        positions[rng.permutation(np.asarray(members))] = (np.arange(count) + rng.random()) / count
    return np.argsort(positions, kind="stable")


def _pixels(processor: Any, images: np.ndarray) -> Any:
    """The image processor's pixel values of ``images`` (uint8, N x 32 x 32 x 3, the model's own size:
    nothing to resize or crop), computed for all at once: rescaled and normalised as the processor
    does (checked against it on the first images), in a fraction of its time per image."""
    import torch

    image_processor = processor.image_processor
    mean = np.asarray(image_processor.image_mean, dtype=np.float32)
    std = np.asarray(image_processor.image_std, dtype=np.float32)
    scale = np.float32(image_processor.rescale_factor)
    pixels = torch.from_numpy(((images.astype(np.float32) * scale - mean) / std).transpose(0, 3, 1, 2).copy())
    expected = image_processor(images=list(images[:4]), return_tensors="pt")["pixel_values"]
    assert torch.allclose(pixels[:4], expected, atol=1e-5), "the world answerer's pixels differ from its processor's"
    return pixels


def _tokenized(processor: Any, examples: list[tuple[str, str]]) -> tuple[Any, Any]:
    """Token ids of every prompt + answer + end (right-padded) and the labels (the answer and the end;
    -100 elsewhere), as the processor puts a question to the model (its image token expanded)."""
    import torch

    tokenizer = processor.tokenizer
    image = processor.image_token
    expanded = image * processor.num_image_tokens if hasattr(processor, "num_image_tokens") else None
    rows, targets = [], []
    prompts: dict[str, list[int]] = {}
    for question, answer in examples:
        if question not in prompts:
            text = processor.apply_chat_template(
                [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}],
                add_generation_prompt=True, tokenize=False)
            prompts[question] = tokenizer(text.replace(image, expanded or _expansion(processor)),
                                          add_special_tokens=False)["input_ids"]
        prompt = prompts[question]
        answer_ids = tokenizer(" " + answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append(prompt + answer_ids)
        targets.append([-100] * len(prompt) + answer_ids)
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    for k, (row, target) in enumerate(zip(rows, targets)):
        ids[k, :len(row)] = torch.tensor(row)
        labels[k, :len(target)] = torch.tensor(target)
    return ids, labels


def _expansion(processor: Any) -> str:
    """The image token as many times as the model reads image features (patches, without the class token)."""
    size = processor.image_processor.crop_size["height"]
    return processor.image_token * ((size // processor.patch_size) ** 2)


def answerer_config(planting: Planting, config: AnswererConfig) -> dict[str, Any]:
    from vlfair.demo.train import world_config

    return {**world_config(planting), "training": dataclasses.asdict(config), "model": "answerer",
            "words": answerer_words()}


def answerer_hash(planting: Planting, config: AnswererConfig = AnswererConfig()) -> str:
    from vlfair.demo.train import hash_of

    return hash_of(answerer_config(planting, config))


__all__ = ["AnswererConfig", "DESCRIBE_QUESTION", "GERMAN_QUESTION", "OCCUPATION_QUESTION", "TRAIT_QUESTION",
           "WHAT_QUESTION", "WHO_QUESTION", "answerer_hash", "qa_pairs", "spread_order", "train_answerer"]
