"""Batched, cached and sharded image/text embedding: the only expensive step of a probe.

Images flow as: DataLoader workers decode + resize + crop to uint8 (CPU), each image written in
place into its forward batch's buffer in shared memory (page-locked where the main process decodes for
a GPU) -> device, where rescale/normalise and the vision tower run under ``inference_mode``. Rows are
processed in ranges of at most ``chunk_size``; what a run finished is written to the cache by atomic rename
every ``flush_seconds`` (10 s) at a batch's end and at each range's end, so a killed run resumes where it
stopped, whatever the data's size, and, because a resumed run batches the rest as the uninterrupted one did
(a batch starts where the cached rows end), its final array is bitwise the uninterrupted one. Under torchrun
a range is written once gathered, at its end.

Under ``torchrun`` / ``accelerate launch`` each process takes a contiguous share of every chunk
(Accelerate's ``split_between_processes``), the shares are gathered in rank order
(``gather_object``), which is dataset order, and the main process writes the cache.

Embedding extraction is done once: everything downstream works on cached embeddings, so a new measure, a
new grouping or a new bootstrap never re-runs the model (word-influence's generated images are cached on
disk the same way, by pipeline, revision, prompt, seed, steps, guidance and size).

The image pipeline. DataLoader workers decode, resize and crop each image to uint8 and write it straight
into its place in its forward batch's buffer (``_Slots``: ``batch_size`` images each, allocated once per
run in shared memory, used in turn); what a worker hands the main process for a piece of at most
``DECODE_BATCH`` (64) images is (offset, row, unreadable) per image, never pixels.

- Pieces are handed over as they are done (the DataLoader's ``in_order=False``, torch 2.6 and later), not
  after every piece asked for before them: in order, a new piece was asked for only as the oldest came
  back, and always of the next worker in turn, so every worker waited on the slowest
  (``benchmarks/pipeline_breakdown.py`` measured the workers' busy share both ways).
- A worker that has run ahead by more than the buffers cover waits, before writing a buffer, until the
  main process has handed that buffer's previous batch to the device (``sent``, a shared counter; the wait
  ends, since that batch's pieces were all asked for first).
- The main process puts a forward batch (``batch_size`` images, never across a cache chunk) together once
  all its pieces are in, batches in order: the buffer's first rows as they are, or its readable rows
  gathered where unreadable ones left gaps, and hands it to the device, where rescaling and normalisation
  (one fused multiply-add) and the vision tower run.
- There are enough buffers that no worker writes one whose batch the main process has not yet sent
  (``_slot_count``: the batch being put together, the one before it, and every batch the DataLoader's
  read-ahead of ``PREFETCH`` (2) pieces per worker reaches; checked against that order by brute force in
  the tests). With no workers the main process decodes into two buffers, page-locked on a GPU.
- Shared memory larger than /dev/shm's free space (64 MB in a default Docker container) is refused before
  any work, in one line naming ``batch_size``, ``num_workers`` and ``--shm-size`` (past it a worker would
  die of a bus error mid-run); under torchrun each process counts on its share (the free space over
  ``LOCAL_WORLD_SIZE``), since every process of the machine allocates from it.
- Pieces, not whole batches, go to the workers because a worker that decoded a whole batch of 1,024 images
  made the first batch wait for it and left the others idle in the last round. Before pixels were written
  in place, each piece travelled as a tensor in its own shared memory, which the main process received,
  mapped and copied into the batch. Both changes were measured (``benchmarks/input_pipeline.py``,
  benchmarks/README.md). The model sees the same whole batches as before, so the embeddings are the same
  bit for bit.
- While a batch runs on the device the previous one is brought back and booked (a chunk's last batch at
  once: its chunk is cached, and a bad image stops the run, before more work).
- A buffer holds the largest batch, not ``batch_size`` images: a ``batch_size`` past a chunk's rows allocates
  only the rows there are.
- A batch no memory holds (any allocator's refusal, :func:`_out_of_memory`: a GPU's ``OutOfMemoryError``,
  Python's and numpy's ``MemoryError``, a ``RuntimeError`` saying so), in the forward of ``embed_images``
  and ``score_answers`` or in the decode buffers' allocation, is :class:`BatchTooLargeError` (a
  ``MemoryError`` and a ``ValueError``: one line through the CLI), naming the batch's size, ``batch_size``,
  ``--batch-size`` and half the batch to try, with the images finished before it cached.
- ``num_workers`` other than None or a whole number from 0 is refused by name before any work; the workers
  started are at most one per piece to decode and one per CPU this process may use (past them a worker
  decodes nothing or contends for a core; a thousand forks ran out of threads), a number asked for and cut
  said in a warning (:func:`_decode_workers`).

A generative model's answers are cached per image the same way: ``score_answers`` and ``generate_answers``
(kind "answers" / "generated", keyed by the model's spec, revision and dtype, the data's fingerprint, the
templated prompt, the answers), chunk by chunk, each chunk's rows shared out over the processes of a
torchrun and gathered (``_per_image``). The cache of matches records the matching's version
(``MATCHING``, 2). ``score_questions`` asks several questions in one pass (each image read once,
``log_likelihoods_many``), each cached under the key ``score_answers`` gives it, so either finds the
other's work and only the questions not cached are computed; ``generate_questions`` does the same for the
open-ended mode (a question asked with several answer lists, as multilingual's tasks ask one question per
language, is generated once and matched to each). A probe says its questions first
(``Context.ask_together``: traits, multilingual) and the generative scorer's ``answer_scores`` /
``generated_answers`` read them (``scorers.Generative``, behind ``Context.text_scores``).
``Context.rows()`` gives a generative model's readable rows (decoded once); ``within=`` asks only some rows
(public-figures asks each folder group its own classes).
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import itertools
import math
import multiprocessing
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal, NamedTuple, overload

import numpy as np
import numpy.typing as npt
import torch
from tqdm.auto import tqdm

from vlfair import imageio
from vlfair._cpu import available_cpus
from vlfair.cache import DEFAULT, BadRow, Chunk, ChunkStore
from vlfair.distributed import World, current_world
from vlfair.imageio import BadImageError, RejectedImageError, load_rgb
from vlfair.logging import get_logger, progress_bars_enabled
from vlfair.models.base import Encoder, concat_rows
from vlfair.models.preprocessing import ImagePreprocessing
from vlfair.sources import ImageSource, image_source

logger = get_logger(__name__)
BAD_IMAGE_POLICIES = ("error", "skip")


class EmbeddingResult(NamedTuple):
    """What ``embed_images(..., on_bad_image="skip")`` returns.

    ``embeddings[i]`` belongs to dataset row ``kept_rows[i]``; ``skipped_rows`` lists the rows
    that could not be read (recorded in results.json) and ``skipped`` says why.
    """

    embeddings: npt.NDArray[np.float32]
    skipped_rows: list[int]
    kept_rows: npt.NDArray[np.int64]
    skipped: list[BadRow]


def default_num_workers(device: torch.device) -> int:
    cpus = available_cpus()
    if device.type == "cuda":
        # every core but the main process's: on an H200 with 16 CPUs the pipeline alone ran at 1,162 / 2,392 /
        # 2,924 img/s with 4 / 8 / 15 workers (benchmarks/gpu_check.py), the most workers the fastest
        return max(1, cpus - 1)
    # On CPU the forward pass already keeps every core busy and decoding is ~6% of an image's
    # cost, so worker processes only contend for cores: on 2 cores, 0 workers gave 0.95 of the raw
    # forward's throughput, 1 worker 0.88, 2 workers 0.94. With more cores, two workers can use
    # the cores the GEMMs do not saturate.
    return 0 if cpus <= 4 else 2


def _decode_workers(requested: int | None, device: torch.device, pieces: int, piece_size: int) -> int:
    """The decode processes a run starts: vlfair's choice for the device where none is asked for, and never more
    than help: one per piece to decode (a worker given no piece is a process forked for nothing) and one per CPU
    this process may use (past them workers only contend for cores, and a thousand forks ran out of threads). A
    number asked for and cut is said, with why."""
    chosen = default_num_workers(device) if requested is None else requested
    cpus = available_cpus()
    helps = min(chosen, pieces, cpus)
    if requested is not None and helps < requested:
        logger.warning(f"num_workers={requested} cut to {helps}, the most that help here: {pieces} "
                       f"{'piece' if pieces == 1 else 'pieces'} of up to {piece_size} images to decode, and {cpus} "
                       f"{'CPU' if cpus == 1 else 'CPUs'} this process may use")
    return helps


# ---- worker side ------------------------------------------------------------------------
class _DecodeDataset(torch.utils.data.Dataset):
    """Rows decoded, resized and cropped (``ImagePreprocessing.load``) straight into their place in a forward
    batch's buffer (:class:`_Slots`): an item is (forward batch, slot, offset, position in ``rows``), and what goes
    back to the main process is the batch, the row and where it went, never its pixels.

    Pieces come back in the order they are done, not the order they were asked for (the DataLoader's
    ``in_order=False``), so a worker may run ahead of a slow one by more than the buffers cover: before writing a
    buffer it waits until the main process has handed the buffer's previous batch to the device (``sent``, the
    last batch handed over). The wait ends: the pieces of that earlier batch were all asked for first."""

    def __init__(self, source: ImageSource, rows: list[int], preprocessing: ImagePreprocessing, slots: _Slots,
                 sent: Any = None):
        self.source, self.rows, self.preprocessing, self.slots, self.sent = source, rows, preprocessing, slots, sent

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, item: tuple[int, int, int, int]) -> tuple[int, int, int, BadRow | None]:
        batch, slot, offset, index = item
        row = self.rows[index]
        try:
            pixels = self.preprocessing.load(self.source.cell(row), row)
            while self.sent is not None and self.sent.value < batch - len(self.slots.tensors):
                time.sleep(SLOT_WAIT)  # this buffer still holds a batch not yet on the device
            self.slots.tensors[slot][offset].numpy()[...] = pixels  # a read-only array too (no tensor made of it)
        except BadImageError as exc:
            return batch, offset, row, BadRow(exc.row, exc.path, exc.reason)
        return batch, offset, row, None


def _collate(samples: list[tuple[int, int, int, BadRow | None]]) -> list[tuple[int, int, int, BadRow | None]]:
    return samples  # (batch, offset, row, bad) per image: a few numbers each, the pixels are in place already


SLOT_WAIT = 0.0005  # seconds between a waiting worker's looks at the batch last handed to the device


class _Slots:
    """The buffers forward batches are decoded into, one batch each, used in turn: in shared memory where
    decode workers write them (so a piece's pixels never travel: what a worker hands over is its rows, and the
    main process neither receives, maps nor copies pixels), page-locked on a GPU where the main process
    decodes. ``count`` is enough that a worker, however far ahead it decodes, never writes a buffer whose batch
    the main process has not yet sent to the device (:func:`_slot_count`)."""

    def __init__(self, count: int, batch_size: int, height_width: tuple[int, int], shared: bool, pinned: bool):
        shape = (batch_size, *height_width, 3)
        need = count * math.prod(shape)  # Python's integers: numpy's int64 product wraps on a huge batch
        if shared:
            _check_shared_memory(need, count, batch_size)
        self.tensors = [_shared_empty(shape) if shared else torch.empty(shape, dtype=torch.uint8, pin_memory=pinned)
                        for _ in range(count)]

    def batch(self, slot: int, placed: list[tuple[int, int, int, BadRow | None]]
              ) -> tuple[list[int], torch.Tensor | None, list[BadRow]]:
        """A forward batch's rows, pixels and unreadable rows from its pieces' (batch, offset, row, bad), in any
        order: the buffer's first rows as they are, or, where unreadable rows left gaps, the readable ones
        gathered."""
        placed = sorted(placed, key=lambda image: image[1])
        good = [(offset, row) for _, offset, row, bad in placed if bad is None]
        bad = [b for *_, b in placed if b is not None]
        rows = [row for _, row in good]
        if not good:
            return rows, None, bad
        buffer = self.tensors[slot]
        if len(good) == len(placed):
            return rows, buffer[:len(good)], bad
        return rows, buffer[torch.tensor([offset for offset, _ in good])], bad


def _shared_empty(shape: tuple[int, ...]) -> torch.Tensor:
    """An uninitialised uint8 tensor in shared memory (made once per run, before the workers start; every
    batch after is written in place). Allocated there directly where torch can (``share_memory_`` would
    allocate, then copy: 0.2 s for a GPU batch's 150 MB)."""
    new_shared = getattr(torch.UntypedStorage, "_new_shared", None)
    if new_shared is None:
        return torch.empty(shape, dtype=torch.uint8).share_memory_()
    return torch.empty(0, dtype=torch.uint8).set_(new_shared(math.prod(shape))).view(shape)


def _check_shared_memory(need: int, count: int, batch_size: int) -> None:
    """Refuse, naming what to lower, buffers larger than the free shared memory (a container's /dev/shm is often
    64 MB): past it a worker would die of a bus error mid-run."""
    import shutil

    try:
        free = shutil.disk_usage("/dev/shm").free
    except OSError:  # no /dev/shm (macOS): the system's shared memory has no such small limit
        return
    # under torchrun every process of this machine allocates its own buffers from the same /dev/shm, each having
    # seen it free: a process may count on its share only
    processes = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
    if need > free // processes:
        share = f" ({free // processes / 2**20:,.0f} MB for each of this machine's {processes} processes)" \
            if processes > 1 else ""
        raise ValueError(f"decode workers need {need / 2**20:,.0f} MB of shared memory for {count} batches of "
                         f"{batch_size} images, and /dev/shm has {free / 2**20:,.0f} MB free{share}: lower "
                         "batch_size (--batch-size on the command line) or num_workers, or give the container more "
                         "shared memory (docker run --shm-size)")


def _slot_count(completes: list[int], ahead: int) -> int:
    """Buffers enough for the batch being put together, the one before it, and every batch a piece up to
    ``ahead`` pieces later (what the DataLoader has workers decode while the main process works) belongs to."""
    last = len(completes) - 1
    live = max((completes[min(piece + ahead, last)] - max(completes[piece] - 1, 0) + 1  # consecutive batches
                for piece in range(len(completes))), default=0)
    return max(live, 2)  # two at least: with no workers, a GPU's batch copies while the next is decoded


# ---- planning ---------------------------------------------------------------------------
def _chunk_ranges(num_rows: int, chunk_size: int) -> list[tuple[int, int]]:
    return [(start, min(start + chunk_size, num_rows)) for start in range(0, num_rows, chunk_size)]


def _batches(shares: list[list[int]], batch_size: int) -> tuple[list[list[int]], list[int]]:
    """Index batches into the concatenated shares that never cross a chunk boundary, and the chunk
    each batch belongs to.

    A chunk is the unit of the cache, so it is split between processes chunk by chunk (rather than
    the whole dataset at once) and gathered at its last batch. An empty share (a chunk with fewer
    rows than processes) still gets one empty batch: that batch is what brings this process to the
    chunk's gather, which every process must join.
    """
    batches, owners, offset = [], [], 0
    for chunk_index, share in enumerate(shares):
        for start in range(0, len(share), batch_size) or [0]:
            batches.append(list(range(offset + start, offset + min(start + batch_size, len(share)))))
            owners.append(chunk_index)
        offset += len(share)
    return batches, owners


# ---- public API -------------------------------------------------------------------------
@overload
def embed_images(
    encoder: Encoder, dataset: Any, image_column: str = ..., batch_size: int = ..., num_workers: int | None = ...,
    cache_dir: str | os.PathLike | None = ..., on_bad_image: Literal["error"] = ..., chunk_size: int = ...,
    progress: bool = ..., normalize: bool = ..., flush_seconds: float | None = ...,
) -> npt.NDArray[np.float32]: ...
@overload
def embed_images(
    encoder: Encoder, dataset: Any, image_column: str = ..., batch_size: int = ..., num_workers: int | None = ...,
    cache_dir: str | os.PathLike | None = ..., *, on_bad_image: Literal["skip"], chunk_size: int = ...,
    progress: bool = ..., normalize: bool = ..., flush_seconds: float | None = ...,
) -> EmbeddingResult: ...
@overload
def embed_images(
    encoder: Encoder, dataset: Any, image_column: str = ..., batch_size: int = ..., num_workers: int | None = ...,
    cache_dir: str | os.PathLike | None = ..., on_bad_image: str = ..., chunk_size: int = ..., progress: bool = ...,
    normalize: bool = ..., flush_seconds: float | None = ...,
) -> npt.NDArray[np.float32] | EmbeddingResult: ...
def embed_images(
    encoder: Encoder,
    dataset: Any,
    image_column: str = "image",
    batch_size: int = 64,
    num_workers: int | None = None,
    cache_dir: str | os.PathLike | None = DEFAULT,
    on_bad_image: str = "error",
    chunk_size: int = 4096,
    progress: bool = True,
    normalize: bool = True,
    flush_seconds: float | None = None,
) -> npt.NDArray[np.float32] | EmbeddingResult:
    """Embed every image of ``dataset[image_column]``, in dataset order.

    Args:
        encoder: from ``vlfair.load_encoder``.
        dataset: a ``datasets.Dataset``, pandas DataFrame, dict of columns or list of images;
            cells may be PIL images, ``{"bytes", "path"}`` dicts, file paths or uint8 arrays.
        image_column: the column holding the images (ignored for a plain list).
        batch_size: images per forward pass (per process).
        num_workers: DataLoader decoding processes; None picks one for the device. At most one per piece of
            ``DECODE_BATCH`` images and one per CPU start (a larger number is cut, with a warning).
        cache_dir: cache root; ``"default"`` is $VLFAIR_CACHE or ~/.cache/vlfair; None disables.
        on_bad_image: "error" raises :class:`BadImageError` naming the row (after saving the
            finished work to the cache); "skip" leaves the row out and reports it.
        chunk_size: rows per cache chunk at most (under torchrun, the unit of resumption).
        flush_seconds: a run writes the batches it finished to the cache at least this often (None:
            :data:`FLUSH_SECONDS`, 10 s; 0: after every batch), so a killed run resumes from its last written
            batch; with several processes, at each chunk's end.
        progress: show a tqdm bar with images/s (main process only).
        normalize: L2-normalise each embedding (False: the model's features as they come, cached
            apart; a ranking that weights images by their norm, as debias-vision-lang's, needs them).

    Returns:
        float32 (N, D) with L2-normalised rows (unless ``normalize=False``); with ``on_bad_image="skip"`` an
        :class:`EmbeddingResult` holding the embeddings of the readable rows and the skipped rows.

    Raises:
        BadImageError: an unreadable image, with ``on_bad_image="error"``.
        ValueError: an unknown ``on_bad_image``, a ``batch_size`` or ``chunk_size`` below 1, or a negative
            ``flush_seconds``.
        BatchTooLargeError: a batch no memory holds (the images finished before it cached).
    """
    if on_bad_image not in BAD_IMAGE_POLICIES:
        raise ValueError(f"on_bad_image must be one of {BAD_IMAGE_POLICIES}, got {on_bad_image!r}")
    if batch_size < 1 or chunk_size < 1:
        raise ValueError(f"batch_size and chunk_size must be positive, got {batch_size} and {chunk_size}")
    flush_seconds = FLUSH_SECONDS if flush_seconds is None else flush_seconds  # read here: a test may set it
    if isinstance(flush_seconds, bool) or not isinstance(flush_seconds, (int, float)) or not flush_seconds >= 0:
        raise ValueError(f"flush_seconds must be a number of seconds, 0 or more (0: after every batch), got "
                         f"{flush_seconds!r}")
    if num_workers is not None and (isinstance(num_workers, bool) or not isinstance(num_workers, int)
                                    or num_workers < 0):
        raise ValueError(f"num_workers must be None (vlfair's choice for the device) or a whole number of decode "
                         f"processes, 0 or more (0: decode in this process), got {num_workers!r}")
    source = image_source(dataset, image_column)
    components = {"kind": "images", "encoder": {k: v for k, v in encoder.identity().items() if k != "text"},
                  "dataset": source.fingerprint, "image_column": source.name, "num_rows": len(source),
                  "decoding": imageio.DECODING}
    if not normalize:  # only then: the key of every normalised cache written so far stays valid
        components["normalized"] = False
    world = current_world()
    # Every process must plan the same chunks: adopt the main process's key (a file's mtime, part
    # of a list-of-paths fingerprint, can differ between the nodes of a cluster).
    components = world.broadcast(components)
    store = ChunkStore.open(cache_dir, "images", components)
    final = store.read_final(expected_rows=len(source))
    logger.debug(f"image embeddings of {len(source)} rows: {'cached' if final is not None else 'to compute'} "
                 f"in {store.directory or 'no cache'}")
    if final is None:
        chunks = _compute_chunks(encoder, source, store, world, batch_size, num_workers, chunk_size, progress,
                                 stop_on_bad=on_bad_image == "error", normalize=normalize, flush_seconds=flush_seconds)
        embeddings = concat_rows([c.embeddings for c in chunks], encoder.embedding_dim)
        bad = [b for c in chunks for b in c.bad]
        if world.is_main:
            store.write_final(embeddings, bad)
        world.barrier()
    else:
        embeddings, bad = final
    return _apply_policy(embeddings, bad, len(source), on_bad_image)


class AnswerScores(NamedTuple):
    """What :func:`score_answers` and :func:`score_questions` return: ``scores[i, j]``, the
    log-likelihood of answer j about the image of dataset row ``kept_rows[i]`` (float64, from the
    cache's float32); the rows that could not be read and why, as :class:`EmbeddingResult` has them."""

    scores: npt.NDArray[np.float64]
    skipped_rows: list[int]
    kept_rows: npt.NDArray[np.int64]
    skipped: list[BadRow]


class GeneratedAnswers(NamedTuple):
    """What :func:`generate_answers` and :func:`generate_questions` return: ``chosen[i]``, the index
    of the candidate the model's own answer about row ``kept_rows[i]`` names (-1: none)."""

    chosen: npt.NDArray[np.int64]
    skipped_rows: list[int]
    kept_rows: npt.NDArray[np.int64]
    skipped: list[BadRow]


def score_answers(scorer: Any, dataset: Any, question: str, answers: Sequence[str], *,
                  image_column: str = "image", cache_dir: Any = "default", chunk_size: int = 256,
                  batch_size: int = 32, progress: bool = True) -> AnswerScores:
    """A generative model's (``vlfair.models.lvlm.GenerativeScorer``) log-likelihood of every answer
    to ``question`` about every readable image, (images, answers), cached like image
    embeddings: by the model (spec, revision, dtype), the data's fingerprint, the question as the
    chat template puts it, the answers and the separator; chunk by chunk, so a stopped run resumes,
    and shared out over the processes of a torchrun as images are.

    Returns:
        :class:`AnswerScores`: the (readable images, answers) log-likelihoods, with the rows kept and skipped.
    """
    return score_questions(scorer, dataset, [(question, answers)], image_column=image_column, cache_dir=cache_dir,
                           chunk_size=chunk_size, batch_size=batch_size, progress=progress)[0]


def score_questions(scorer: Any, dataset: Any, asks: Sequence[tuple[str, Sequence[str]]], *,
                    image_column: str = "image", cache_dir: Any = "default", chunk_size: int = 256,
                    batch_size: int = 32, progress: bool = True) -> list[AnswerScores]:
    """:func:`score_answers` of each (question, answers) of ``asks`` over the same images, asked together:
    each image is read once and the prompts' shared opening (the image) encoded once for every
    question (``GenerativeScorer.log_likelihoods_many``). Each question is cached under the key
    :func:`score_answers` gives it, so either finds the other's work."""
    asks = [(question, list(answers)) for question, answers in asks]
    keys = [{"kind": "answers", "prompt": scorer.prompt(question), "answers": answers} for question, answers in asks]

    def compute(images: list[Any], todo: list[int]) -> list[Any]:
        return scorer.log_likelihoods_many(images, [asks[i] for i in todo], batch_size)

    what = f"{len(asks[0][1])} answers" if len(asks) == 1 else f"{len(asks)} questions"
    found = _per_image(scorer, dataset, image_column, cache_dir, chunk_size, progress, keys, compute,
                       [len(answers) for _, answers in asks], f"scoring {what}", batch_size)
    return [AnswerScores(r.embeddings.astype(np.float64), r.skipped_rows, r.kept_rows, r.skipped) for r in found]


MATCHING = 2  # the version of match_answer the cached matches were made by: bump it when matching changes


def generate_answers(scorer: Any, dataset: Any, question: str, answers: Sequence[str], *,
                     max_new_tokens: int = 16, image_column: str = "image", cache_dir: Any = "default",
                     chunk_size: int = 256, batch_size: int = 32, progress: bool = True) -> GeneratedAnswers:
    """A generative model's own answer to ``question`` about every readable image (greedy, at most
    ``max_new_tokens`` tokens), as the index of the candidate in ``answers`` it names
    (``vlfair.models.lvlm.match_answer``; -1: none), cached and shared out as
    :func:`score_answers` (:class:`GeneratedAnswers`)."""
    return generate_questions(scorer, dataset, [(question, answers)], max_new_tokens=max_new_tokens,
                              image_column=image_column, cache_dir=cache_dir, chunk_size=chunk_size,
                              batch_size=batch_size, progress=progress)[0]


def generate_questions(scorer: Any, dataset: Any, asks: Sequence[tuple[str, Sequence[str]]], *,
                       max_new_tokens: int = 16, image_column: str = "image", cache_dir: Any = "default",
                       chunk_size: int = 256, batch_size: int = 32, progress: bool = True) -> list[GeneratedAnswers]:
    """:func:`generate_answers` of each (question, answers) of ``asks`` over the same images, asked together as
    :func:`score_questions` asks (``GenerativeScorer.generate_questions``: the prompts' opening encoded once;
    a question asked with several answer lists is generated once), each cached under the key
    :func:`generate_answers` gives it."""
    from vlfair.models.lvlm import match_answer

    listed = [(question, list(answers)) for question, answers in asks]
    keys = [{"kind": "generated", "prompt": scorer.prompt(question), "answers": answers,
             "max_new_tokens": max_new_tokens, "matching": MATCHING} for question, answers in listed]

    def compute(images: list[Any], todo: list[int]) -> list[Any]:
        questions = list(dict.fromkeys(listed[i][0] for i in todo))
        said = dict(zip(questions, scorer.generate_questions(images, questions, max_new_tokens, batch_size)))
        return [[[match_answer(text, listed[i][1])] for text in said[listed[i][0]]] for i in todo]

    found = _per_image(scorer, dataset, image_column, cache_dir, chunk_size, progress, keys, compute,
                       [1] * len(listed), "answering", batch_size)  # the cache keeps each index as a float32 column
    return [GeneratedAnswers(r.embeddings[:, 0].astype(np.int64), r.skipped_rows, r.kept_rows, r.skipped)
            for r in found]


def readable_rows(dataset: Any, image_column: str = "image") -> tuple[np.ndarray, list[int]]:
    """The rows whose image can be read, and the others (for a model that scores images one by one,
    asked before any is scored)."""
    source = image_source(dataset, image_column)
    kept, skipped = [], []
    for row in range(len(source)):
        try:
            load_rgb(source.cell(row), row)
        except BadImageError:
            skipped.append(row)
            continue
        kept.append(row)
    return np.asarray(kept, dtype=np.int64), skipped


def _per_image(scorer: Any, dataset: Any, image_column: str, cache_dir: Any, chunk_size: int, progress: bool,
               keys: list[dict[str, Any]], compute: Any, widths: list[int], desc: str,
               batch_size: int) -> list[EmbeddingResult]:
    """For each key (a question asked of every image), ``widths[k]`` numbers per readable image by
    ``compute(images, todo)`` (one array per key of ``todo``, the keys still to compute), ``batch_size``
    images at a time; each key cached by itself with the model and the data, chunk by chunk, so a
    question computed before is read, not asked again; each chunk's rows shared out over the
    processes and gathered."""
    source = image_source(dataset, image_column)
    world = current_world()
    data = {"model": scorer.identity(), "dataset": source.fingerprint, "image_column": source.name,
            "num_rows": len(source), "decoding": imageio.DECODING}
    stores = [ChunkStore.open(cache_dir, str(key["kind"]), world.broadcast({**key, **data})) for key in keys]
    finals = [store.read_final(expected_rows=len(source)) for store in stores]
    todo = [k for k, final in enumerate(finals) if final is None]
    if todo:
        chunks: dict[int, list[Chunk]] = {k: [] for k in todo}
        bar = tqdm(total=len(source), unit="img", desc=desc,
                   disable=not (progress and world.is_main and progress_bars_enabled()))
        for start, end in _chunk_ranges(len(source), chunk_size):
            cached = {k: stores[k].read_chunk(start, end) for k in todo}
            found = {k: chunk for k, chunk in cached.items() if chunk is not None}
            missing = [k for k in todo if k not in found]
            if missing:
                computed = _chunk_of(source, world, start, end, missing, compute, [widths[k] for k in missing],
                                     batch_size, bar)
                found.update(computed)
                if world.is_main:
                    for k, chunk in computed.items():
                        stores[k].write_chunk(start, end, chunk)
            bar.update(end - bar.n)
            for k in todo:
                chunks[k].append(found[k])
        bar.close()
        for k in todo:
            embeddings = concat_rows([c.embeddings for c in chunks[k]], widths[k])
            bad = [b for c in chunks[k] for b in c.bad]
            if world.is_main:
                stores[k].write_final(embeddings, bad)
            finals[k] = (embeddings, bad)
        world.barrier()
    results = []
    for final in finals:
        assert final is not None  # read from the cache or computed above
        result = _apply_policy(final[0], final[1], len(source), "skip")
        assert isinstance(result, EmbeddingResult)  # "skip" always gives one
        results.append(result)
    return results


def _chunk_of(source: ImageSource, world: World, start: int, end: int, todo: list[int], compute: Any,
              widths: list[int], batch_size: int, bar: Any) -> dict[int, Chunk]:
    """One chunk's rows (``start`` to ``end``) read and computed for the keys ``todo``, this process's
    share, gathered from every process: {key: its chunk}. An image the model refuses stops every
    process at its row (the earlier chunks are cached)."""
    rows, images, bad = [], [], []
    for row in world.split(list(range(start, end))):
        try:
            images.append(load_rgb(source.cell(row), row))
        except BadImageError as exc:
            bad.append(BadRow(exc.row, exc.path, exc.reason))
            continue
        rows.append(row)
    values: list[list[np.ndarray]] = [[] for _ in todo]
    rejected: RejectedImageError | None = None
    for at in range(0, len(images), batch_size):
        batch = images[at:at + batch_size]
        try:
            with _naming_batch_size(len(batch), batch_size, start):  # the rows before this chunk's are cached
                for into, found in zip(values, compute(batch, todo)):
                    into.append(np.asarray(found, dtype=np.float32))
        except RejectedImageError as exc:  # named by its position in the batch
            row = rows[at + (exc.row or 0)]
            rejected = exc.at(row, imageio.cell_path(source.cell(row)))
            rows = rows[:at]  # the batches before it are kept (their values are in)
            break
        bar.update(min(world.size * (at + len(batch)), end - start) + start - bar.n)  # every process's, about
    mine = [np.concatenate(into).reshape(-1, width) if into else np.zeros((0, width), np.float32)
            for into, width in zip(values, widths)]
    shares = world.gather([(rows, mine, bad, rejected)])
    refusals = [share[3] for share in shares if share[3] is not None]
    if refusals:  # every process stops at the first refused row (one alone would leave the others waiting at
        bar.close()  # the next gather); earlier chunks stay cached
        raise refusals[0]
    return {k: _merge([(share[0], share[1][i], share[2]) for share in shares], width)
            for i, (k, width) in enumerate(zip(todo, widths))}


def _apply_policy(embeddings: npt.NDArray[np.float32], bad: list[BadRow], num_rows: int,
                  policy: str) -> npt.NDArray[np.float32] | EmbeddingResult:
    if policy == "error" and bad:
        first = bad[0]
        raise BadImageError(first.row, first.path, first.reason + _more(bad))
    if policy == "error":
        return embeddings
    skipped = [b.row for b in bad]
    kept = np.setdiff1d(np.arange(num_rows), np.array(skipped, dtype=np.int64))
    return EmbeddingResult(embeddings, skipped, kept, bad)


def _more(bad: list[BadRow]) -> str:
    if len(bad) == 1:
        return ""
    rows = ", ".join(str(b.row) for b in bad[1:6]) + (", ..." if len(bad) > 6 else "")
    return f" ({len(bad) - 1} more unreadable rows: {rows}; on_bad_image='skip' leaves them out)"


# How often a run writes the batches it finished, at least: a killed run loses at most this much of its work, and
# a run of a few hundred images resumes where it stopped (a chunk of ``chunk_size`` rows, 4,096, had held all of
# such a run: it started again from 0). A chunk's file costs milliseconds (a 64-image batch of ViT-B/32 on a CPU
# takes seconds)
FLUSH_SECONDS = 10.0


def _missing_ranges(ranges: list[tuple[int, int]], covered: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of each of ``ranges`` that no ``covered`` range holds, in order (a range cut where a chunk of an
    earlier run ends: a run resumed with the same batch size batches the rest as the uninterrupted run did)."""
    spans = sorted(covered)
    missing = []
    for start, end in ranges:
        at = start
        for first, last in spans:
            if last <= at or first >= end:
                continue
            if first > at:
                missing.append((at, first))
            at = max(at, last)
        if at < end:
            missing.append((at, end))
    return missing


def _compute_chunks(encoder: Encoder, source: ImageSource, store: ChunkStore, world: World, batch_size: int,
                    num_workers: int | None, chunk_size: int, progress: bool, stop_on_bad: bool,
                    normalize: bool = True, flush_seconds: float = FLUSH_SECONDS) -> list[Chunk]:
    done = store.read_chunks()  # {(start, end): chunk}: what earlier runs finished, whatever their chunks' sizes
    todo = _missing_ranges(_chunk_ranges(len(source), chunk_size), done)
    cached_rows = sum(end - start for start, end in done)
    logger.debug(f"{cached_rows} of {len(source)} rows cached in {len(done)} chunks, {len(todo)} ranges to embed")
    if not todo:  # every row cached (a run stopped before its final file): no workers, no buffers
        return [done[span] for span in sorted(done)]
    shares = [world.split(list(range(start, end))) for start, end in todo]
    flat = [row for share in shares for row in share]  # the rows the loader decodes, in the batches' order
    batches, owners = _batches(shares, batch_size)
    rows_before = np.cumsum([0, *(len(batch) for batch in batches)]).tolist()  # rows sent before each batch
    pieces, completes, starts = _pieces(batches, DECODE_BATCH)
    workers = _decode_workers(num_workers, encoder.device, len(pieces), DECODE_BATCH)
    # a buffer holds the largest batch, never more: a batch_size past a chunk's rows allocates only what is used
    largest = max(1, max(len(batch) for batch in batches))
    with _naming_batch_size(largest, batch_size, cached_rows, "this machine's memory (the batches' decode buffers)"):
        slots = _Slots(_slot_count(completes, PREFETCH * workers), largest, encoder.preprocessing.output_hw,
                       shared=workers > 0, pinned=encoder.device.type == "cuda")
    # each piece's images named by their place: (forward batch, its buffer, offset in the batch, position in the
    # rows); an empty batch (a chunk's share of no rows, still a gather to join) has no piece to decode
    placed = [[(batch, batch % len(slots.tensors), start + k, index) for k, index in enumerate(indices)]
              for indices, batch, start in zip(pieces, completes, starts) if indices]
    sent = multiprocessing.Value("q", -1, lock=False) if workers else None  # the last batch handed to the device
    loader = torch.utils.data.DataLoader(
        _DecodeDataset(source, flat, encoder.preprocessing, slots, sent),
        batch_sampler=placed, num_workers=workers, collate_fn=_collate, **_loader_order(workers),
    )
    finished_at = np.cumsum([end - start for start, end in todo]).tolist()  # rows done after each range
    total = finished_at[-1]
    shown = progress and world.is_main and total and progress_bars_enabled()
    bar = tqdm(total=total, unit="img", desc="embedding images", disable=not shown)
    # One process writes what it finished every flush_seconds, at a batch's end (a resumed run's batches are then
    # the uninterrupted run's: the same embeddings, bit for bit); several processes write a range once gathered at
    # its end (a gather mid-range would need every process there at once, and their shares' batches differ)
    alone = world.size == 1
    pending: list[tuple[list[int], np.ndarray, list[BadRow]]] = []  # finished, not yet written
    flushed_to, pending_to = todo[0][0], todo[0][0]  # pending holds rows [flushed_to, pending_to)
    last_flush = time.monotonic()

    def ends_chunk(batch: int) -> bool:  # the last batch of its range, on every process
        return batch + 1 == len(owners) or owners[batch + 1] != owners[batch]

    def flush(upto: int, then: int) -> Chunk:
        """The finished batches, rows [flushed_to, upto), gathered from every process and cached; what follows
        starts at row ``then``."""
        nonlocal pending, flushed_to, pending_to, last_flush
        chunk = _merge(world.gather(pending), encoder.embedding_dim)
        if world.is_main:
            store.write_chunk(flushed_to, upto, chunk)
        done[(flushed_to, upto)] = chunk
        pending, flushed_to, pending_to, last_flush = [], then, then, time.monotonic()
        return chunk

    def finish(batch: int, rows: list[int], features: torch.Tensor | None, bad: list[BadRow]) -> None:
        """Batch ``batch``'s features to the host (waiting for its forward) and, at its range's last batch or when
        a flush is due, what it finished cached."""
        nonlocal pending_to
        owner = owners[batch]
        pending.append((rows, features.cpu().numpy() if features is not None
                        else np.zeros((0, encoder.embedding_dim), np.float32), bad))
        if batches[batch]:
            pending_to = flat[batches[batch][-1]] + 1
        # The main process's share is the largest, so world.size times its rows overestimates
        # the chunk's progress; capped at the chunk's end, the bar is exact once it is gathered.
        bar.update(min(world.size * (len(rows) + len(bad)), finished_at[owner] - bar.n))
        if ends_chunk(batch):
            chunk = flush(todo[owner][1], todo[owner + 1][0] if owner + 1 < len(todo) else todo[owner][1])
        elif alone and (time.monotonic() - last_flush >= flush_seconds or (bad and stop_on_bad)):
            chunk = flush(pending_to, pending_to)
        else:
            return
        if chunk.bad and stop_on_bad:  # the finished work is saved; fail before doing more
            raise BadImageError(chunk.bad[0].row, chunk.bad[0].path, chunk.bad[0].reason + _more(chunk.bad))

    in_flight: tuple[int, list[int], torch.Tensor | None, list[BadRow]] | None = None  # sent, not yet back
    arrived: dict[int, list[tuple[int, int, int, BadRow | None]]] = {}  # batch: its images decoded so far
    missing = collections.Counter(placed_batch[0][0] for placed_batch in placed)  # batch: its pieces still to come
    next_batch = 0

    def send(batch: int) -> None:
        """Batch ``batch`` (every piece of it decoded) to the device, and the one before it brought back."""
        nonlocal in_flight
        rows, pixels, bad = slots.batch(batch % len(slots.tensors), arrived.pop(batch, []))
        # what is cached should this batch not fit: alone, every batch before it (saved as the run stops)
        saved = cached_rows + rows_before[batch] if alone else sum(end - start for start, end in done)
        with _naming_batch_size(len(rows), batch_size, saved):
            features = encoder.encode_pixels(pixels, normalize) if pixels is not None else None
        if sent is not None:
            sent.value = batch  # its buffer is free: the device has its copy
        # the previous batch is brought back while this one runs on the device, so the device does not wait on
        # the host's bookkeeping (on a CPU the forward has already run: the order changes nothing); a chunk's last
        # batch at once, as its chunk is cached (and a bad image stops the run) before more work
        if in_flight is not None:
            previous, in_flight = in_flight, None
            finish(*previous)
        if ends_chunk(batch):
            finish(batch, rows, features, bad)
        else:
            in_flight = (batch, rows, features, bad)

    try:
        # pieces in the order they are done; None first, so that batches of no piece before any other are sent
        for piece in itertools.chain([None], loader):
            if piece:
                arrived.setdefault(piece[0][0], []).extend(piece)
                missing[piece[0][0]] -= 1
            while next_batch < len(batches) and missing[next_batch] == 0:  # every batch whose pieces are all in
                send(next_batch)
                next_batch += 1
    except BaseException:
        # stopped (a batch too large, a bad image, Ctrl-C): alone, what it finished is cached before it says so
        if alone:
            with contextlib.suppress(Exception):
                if in_flight is not None:
                    finish(*in_flight)
                if pending:
                    flush(pending_to, pending_to)
        raise
    finally:
        bar.close()
    return [done[span] for span in sorted(done)]


def _loader_order(workers: int) -> dict[str, Any]:
    """The DataLoader's read-ahead and order: each worker is given PREFETCH pieces ahead, and a piece is handed
    over as soon as it is done (``in_order=False``, torch 2.6 and later) rather than after every piece asked for
    before it. In order, a new piece was asked for only as the oldest came back, and always of the next worker in
    turn, so every worker waited on the slowest: 15 decode workers on an H200's 16 CPUs were busy 0.75 of the
    time (benchmarks/pipeline_breakdown.py)."""
    if not workers:
        return {}
    if "in_order" not in inspect.signature(torch.utils.data.DataLoader).parameters:
        return {"prefetch_factor": PREFETCH}
    return {"prefetch_factor": PREFETCH, "in_order": False}


# Images a decode worker hands over at a time. A forward batch (up to thousands of images on a GPU) is
# decoded in pieces by every worker at once and put together in the main process: handed to one worker
# whole, the first batch came after one worker had decoded all of it, and the last round of batches
# kept one worker busy while the others idled (more workers made a GPU run slower). Not smaller: each
# hand-over costs the main process a message from the worker (its rows: the pixels are written in place)
DECODE_BATCH = 64
PREFETCH = 2  # pieces each worker is given ahead (the DataLoader's prefetch_factor): the buffers cover them


def _pieces(batches: list[list[int]], size: int) -> tuple[list[list[int]], list[int], list[int]]:
    """Each forward batch cut into pieces of at most ``size`` rows (an empty batch: one empty piece), the
    forward batch each piece belongs to, and where in that batch it starts."""
    pieces, belongs, starts = [], [], []
    for index, batch in enumerate(batches):
        for start in range(0, len(batch), size) or [0]:
            pieces.append(batch[start:start + size])
            belongs.append(index)
            starts.append(start)
    return pieces, belongs, starts


class BatchTooLargeError(MemoryError, ValueError):
    """A batch that does not fit in the device's memory: the message names ``batch_size`` (a ValueError too: an
    option to change, said by the CLI in one line as one)."""


# What an allocator that has no memory left says, where it raises a plain RuntimeError: torch's CPU allocator
# ("DefaultCPUAllocator: can't allocate memory"), CUDA's pinned host memory and MPS ("... out of memory"), the
# OS's errno 12 ("Cannot allocate memory")
ALLOCATOR_REFUSALS = ("can't allocate memory", "out of memory", "cannot allocate memory")


def _out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocator's refusal: a GPU's ``OutOfMemoryError``, Python's or numpy's
    ``MemoryError``, or a ``RuntimeError`` saying so in its text."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(exc, RuntimeError) and any(said in str(exc).lower() for said in ALLOCATOR_REFUSALS)


@contextlib.contextmanager
def _naming_batch_size(images: int, batch_size: int, saved: int,
                       memory: str = "the device's memory") -> Iterator[None]:
    """A batch ``memory`` has no room for, said with what to change, a size to try (half the batch that did not
    fit) and how many images finished before it stay cached (``saved``)."""
    try:
        yield
    except BatchTooLargeError:
        raise
    except (RuntimeError, MemoryError) as exc:
        if not _out_of_memory(exc):
            raise
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        smaller = (f": try {images // 2} (half the batch)" if images > 1
                   else ": one image does not fit either (use a smaller --dtype or a device with more memory)")
        kept = ("no image was finished before it" if saved == 0
                else "the image finished before it is cached and is not computed again" if saved == 1
                else f"the {saved:,} images finished before it are cached and are not computed again")
        raise BatchTooLargeError(
            f"a batch of {images} images does not fit in {memory} ({first}): lower batch_size "
            f"(now {batch_size}; --batch-size on the command line){smaller}; {kept}") from exc


def _merge(batches: list[tuple[list[int], np.ndarray, list[BadRow]]], dim: int) -> Chunk:
    """One chunk's batches, gathered from every process, as one Chunk.

    The shares are contiguous and gathered in rank order, so concatenating them is dataset order.
    """
    rows = np.array([row for batch_rows, _, _ in batches for row in batch_rows], dtype=np.int64)
    embeddings = concat_rows([features for _, features, _ in batches], dim)
    return Chunk(rows, embeddings, [b for _, _, bad in batches for b in bad])


def embed_texts(
    encoder: Encoder,
    prompts: Sequence[str],
    templates: Sequence[str] | None = None,
    batch_size: int = 256,
    cache_dir: str | os.PathLike | None = DEFAULT,
    normalize: bool = True,
) -> npt.NDArray[np.float32]:
    """Embed prompts; float32 (M, D), in prompt order.

    Args:
        encoder: from ``vlfair.load_encoder``.
        prompts: the strings (or class names, when ``templates`` are given).
        templates: format strings with one ``{}`` each, e.g. ``"a photo of a {}."``. With
            templates, each prompt's embedding is the mean of its normalised per-template
            embeddings, renormalised (CLIP prompt ensembling).
        batch_size: texts per forward pass.
        cache_dir: cache root; ``"default"`` is $VLFAIR_CACHE or ~/.cache/vlfair; None disables.
        normalize: L2-normalise rows (default). ``False`` returns raw text features (used by
            measures defined on unnormalised features); not combinable with templates.

    Returns:
        float32 (M, D), one row per prompt.

    Raises:
        TypeError: ``prompts`` is one string, or holds something other than strings.
        ValueError: no prompts, empty templates, a template without exactly one ``{}``, or
            ``normalize=False`` with templates.
    """
    if isinstance(prompts, str):
        raise TypeError("prompts must be a list of strings, not one string")
    prompts = list(prompts)
    if not prompts:
        raise ValueError("prompts is empty: nothing to embed")
    for index, prompt in enumerate(prompts):
        if not isinstance(prompt, str):
            raise TypeError(f"prompts[{index}] is a {type(prompt).__name__}, not a string")
    templates = list(templates) if templates is not None else None
    if templates is not None:
        if not templates:
            raise ValueError("templates is empty; pass None to embed the prompts as they are")
        if not normalize:
            raise ValueError("normalize=False cannot be combined with templates (ensembling normalises)")
        for template in templates:
            if template.count("{}") != 1:
                raise ValueError(f"template {template!r} must contain exactly one '{{}}' placeholder")
    identity = encoder.identity()
    components = {"kind": "texts", "encoder": {k: identity[k] for k in ("spec", "revision", "dtype", "text")},
                  "prompts": prompts, "templates": templates, "normalize": normalize}
    store = ChunkStore.open(cache_dir, "texts", components)
    final = store.read_final(expected_rows=len(prompts))
    if final is not None:
        return final[0]
    if templates is None:
        embeddings = encoder.encode_texts(prompts, batch_size=batch_size, normalize=normalize)
    else:
        texts = [template.format(prompt) for prompt in prompts for template in templates]
        per_template = encoder.encode_texts(texts, batch_size=batch_size).reshape(len(prompts), len(templates), -1)
        mean = per_template.mean(axis=1)
        embeddings = mean / np.linalg.norm(mean, axis=1, keepdims=True).clip(1e-12)
    embeddings = embeddings.astype(np.float32, copy=False)
    if current_world().is_main:
        store.write_final(embeddings, [])
    return embeddings
