"""What a model gives a probe: one :class:`Scorer` per kind of model, each a type.

A probe asks its :class:`~vlfair.probes.base.Context` for s(image, text) (``text_scores``), the
rows it can read, and, where it reads embeddings, the images' and texts' embeddings; the Context
hands each question to the scorer of its model's kind. A contrastive encoder embeds (cached
embeddings); a generative model (``lvlm:``) answers questions about each image (cached answers:
:class:`vlfair.embed.AnswerScores`, :class:`vlfair.embed.GeneratedAnswers`). A new kind of model is
one module: a :class:`Scorer` subclass registered with :func:`register_scorer` under the ``kind``
its models carry (``model.kind``; a model without one is contrastive), in :data:`SCORERS` (a
:class:`vlfair.registry.Registry`).

What a probe asks of a model is a capability its scorer declares (:attr:`Scorer.capabilities`), never
its kind: every scorer scores texts; one that ``embeds`` gives embeddings; one that ``asks`` is asked a
question with candidate answers. A probe that measures the two ways picks its way by capability
(:meth:`Scorer.pick`), and a part the model cannot do is refused by name (:meth:`Scorer.refusal`).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

import numpy as np

from vlfair.imageio import RejectedImageError
from vlfair.probes.asking import Answering, Asking, TextScores
from vlfair.probes.errors import ProbeError
from vlfair.registry import Registry

T = TypeVar("T")

# what a scorer may give beyond s(image, text), each as the part of a probe that reads it (a refusal names it)
CAPABILITIES = {
    "embeds": "this part of the probe reads image and text embeddings",   # images, raw_images, texts
    "asks": "this part of the probe reads answers to questions about each image",  # question, answers, Asking
}


def _check(scorer: type[Scorer]) -> None:
    """What a scorer class must be beyond a Scorer subclass with a kind."""
    if scorer.__abstractmethods__:
        raise TypeError(f"{scorer.__qualname__} does not define {', '.join(sorted(scorer.__abstractmethods__))}")
    unknown = sorted(set(scorer.capabilities) - set(CAPABILITIES))
    if unknown:  # a probe would never pick a way by it
        raise TypeError(f"{scorer.__qualname__} declares capabilities {unknown}; the known ones: "
                        f"{', '.join(sorted(CAPABILITIES))}")
    kept = [m for m in ("images", "raw_images", "texts") if getattr(scorer, m) is getattr(Scorer, m)]
    if "embeds" in scorer.capabilities and kept:  # it would be picked to embed, then refuse to
        raise TypeError(f"{scorer.__qualname__} declares it embeds but does not define {', '.join(kept)}")


def _kind_of(scorer: type[Scorer]) -> str:
    if not isinstance(getattr(scorer, "kind", None), str) or not scorer.kind:
        raise TypeError(f"{scorer.__qualname__} declares no kind (a class attribute: kind = 'my-kind')")
    return scorer.kind


def register_scorer(scorer: type[Scorer]) -> type[Scorer]:
    """Register ``scorer`` for the models whose ``kind`` is its ``kind`` (a class decorator); a class
    without a kind, or with a method left to define, is refused naming it, as is another class of a kind
    already served."""
    return SCORERS.add(scorer)


def model_kind(model: Any) -> str:
    """The kind of ``model``: its ``kind`` attribute, "contrastive" for a model without one."""
    return getattr(model, "kind", "contrastive")


def capabilities_of(model: Any) -> frozenset[str]:
    """What ``model``'s scorer gives (:attr:`Scorer.capabilities`), before any scorer is built; none for a
    kind no scorer serves (:func:`scorer_for` refuses it by name)."""
    scorer = SCORERS.get(model_kind(model), None)
    return scorer.capabilities if scorer is not None else frozenset()


def was_asked(facts: Mapping[str, Any]) -> bool:
    """Whether samples' facts say their model was asked questions (:meth:`Scorer.asked_facts` records the
    scorer of a model that is asked, and of no other)."""
    return "scorer" in facts


def scorer_for(model: Any, dataset: Any, batch_size: int = 64, cache_dir: Any = "default") -> Scorer:
    """The scorer of ``model``'s kind for ``dataset``; an unknown kind is refused, naming the known ones."""
    kind = model_kind(model)
    if kind not in SCORERS:
        raise ProbeError(f"model {getattr(model, 'name', model)!r} is of kind {kind!r}, which no scorer serves "
                         f"(known kinds: {', '.join(sorted(SCORERS.names()))}); register one with "
                         "vlfair.probes.scorers.register_scorer")
    return SCORERS.get(kind)(model, dataset, batch_size, cache_dir)


class Scorer(abc.ABC):
    """One model's scores of one dataset's images. A subclass defines :meth:`rows` and
    :meth:`text_scores`; one that embeds also :meth:`images`, :meth:`raw_images` and :meth:`texts`, and
    says so in :attr:`capabilities` (as one that is asked questions does)."""

    kind: ClassVar[str]
    # what it gives beyond text_scores (CAPABILITIES' names): probes choose their way of measuring by these
    capabilities: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, model: Any, dataset: Any, batch_size: int = 64, cache_dir: Any = "default"):
        self.model, self.dataset, self.batch_size, self.cache_dir = model, dataset, batch_size, cache_dir
        self.skipped_rows: list[int] = []  # unreadable rows, for results.json
        self.unmatched: dict[str, tuple[int, int]] = {}  # question -> (answers naming no candidate, answers)
        self.unmatched_ids: set[str] = set()  # the samples whose answer named no candidate (left out of the run)

    @abc.abstractmethod
    def rows(self) -> np.ndarray:
        """The dataset rows whose images can be read (the others are skipped and reported)."""

    @abc.abstractmethod
    def text_scores(self, texts: list[str], asked: Answering | None = None, answers: list[str] | None = None,
                    question: str | None = None, within: np.ndarray | None = None) -> TextScores:
        """s(image, text) for every readable image (``within``: of those dataset rows only) and each text."""

    def ask_together(self, asks: list[tuple[str, list[str]]], asked: Answering) -> None:  # noqa: B027
        """Questions a probe will ask of every image, said at once (a model that answers asks them in one pass)."""

    @property
    def embeds(self) -> bool:
        """Whether it gives image and text embeddings (:meth:`images`, :meth:`raw_images`, :meth:`texts`)."""
        return "embeds" in self.capabilities

    @property
    def asks(self) -> bool:
        """Whether the model is asked a question about each image, its candidate answers scored (or its own
        answer matched to one) as an :class:`~vlfair.probes.asking.Answering` says."""
        return "asks" in self.capabilities

    def pick(self, ways: Mapping[str, T]) -> T:
        """Of a probe's ways of measuring, keyed by the capability each needs, the first this scorer has; a
        scorer with none of them is refused naming the last (the probe's own way, the study's)."""
        for capability, way in ways.items():
            if capability in self.capabilities:
                return way
        raise self.refusal(list(ways)[-1])

    def require(self, capability: str, part: str | None = None, probe: str | None = None,
                instead: str | None = None) -> None:
        """Refuse (:meth:`refusal`) unless the scorer has ``capability``."""
        if capability not in self.capabilities:
            raise self.refusal(capability, part, probe, instead)

    def refusal(self, capability: str, part: str | None = None, probe: str | None = None,
                instead: str | None = None) -> ProbeError:
        """The one-line error of a ``part`` of ``probe`` (default: CAPABILITIES' words) that needs
        ``capability``, naming the model and its kind, and what to do ``instead``."""
        name = getattr(self.model, "name", None) or getattr(self.model, "spec", None) or self.model  # as people name it
        return ProbeError(f"{f'{probe}: ' if probe else ''}model {name!r} is a {self.kind} model: "
                          f"{part or CAPABILITIES[capability]}, which a {self.kind} model does not give"
                          + (f"; {instead}" if instead else ""))

    def asked_facts(self, **facts: Any) -> dict[str, Any]:
        """The samples' facts of how the model was asked (``facts``), with the scorer: for a model that is
        asked; none for another (its samples say what it read in their own facts)."""
        return {"scorer": self.kind, **facts} if self.asks else {}

    def images(self) -> tuple[np.ndarray, np.ndarray]:
        """(L2-normalised image embeddings of the readable rows, their rows)."""
        raise self._no_embeddings()

    def raw_images(self) -> np.ndarray:
        """The image features before L2 normalisation, for the rows :meth:`images` keeps."""
        raise self._no_embeddings()

    def texts(self, prompts: list[str], normalize: bool = True, templates: list[str] | None = None) -> np.ndarray:
        """The texts' embeddings."""
        raise self._no_embeddings()

    def _no_embeddings(self) -> ProbeError:
        return self.refusal("embeds")


def _require_finite(values: np.ndarray, what: str, rows: np.ndarray) -> None:
    """A ProbeError naming the rows (1-based) whose embeddings or scores hold NaN or inf: every score made of
    them, and every best candidate, ranking or threshold taken on those scores, would be noise."""
    from vlfair.measures.ties import require_finite

    try:
        require_finite(values, what, rows)
    except ValueError as exc:
        raise ProbeError(f"{exc} (the model gave them: a broken checkpoint, or an overflow in float16)") from None


# a model's kind -> its scorer
SCORERS: Registry[type[Scorer]] = Registry("scorer", Scorer, subclass=True, name_of=_kind_of, check=_check)


@register_scorer
class Contrastive(Scorer):
    """A dual encoder: s(image, text) is the cosine of their embeddings; both cached."""

    kind = "contrastive"
    capabilities = frozenset({"embeds"})

    def __init__(self, model: Any, dataset: Any, batch_size: int = 64, cache_dir: Any = "default"):
        super().__init__(model, dataset, batch_size, cache_dir)
        self._embedded: tuple[np.ndarray, np.ndarray] | None = None
        self._raw: np.ndarray | None = None

    def images(self) -> tuple[np.ndarray, np.ndarray]:
        if self._embedded is None:
            from vlfair.embed import embed_images

            result = embed_images(self.model, self.dataset, batch_size=self.batch_size, cache_dir=self.cache_dir,
                                  on_bad_image="skip")
            _require_finite(result.embeddings, "image embeddings of dataset rows", result.kept_rows)
            self._embedded = (result.embeddings, result.kept_rows)
            self.skipped_rows = result.skipped_rows
            self._check_dims(result.embeddings.shape[1])
        return self._embedded

    def raw_images(self) -> np.ndarray:
        if self._raw is None:
            from vlfair.embed import embed_images

            _, rows = self.images()
            result = embed_images(self.model, self.dataset, batch_size=self.batch_size, cache_dir=self.cache_dir,
                                  on_bad_image="skip", normalize=False)
            self._raw = result.embeddings
            assert np.array_equal(result.kept_rows, rows)  # the same images, read the same way
        return self._raw

    def texts(self, prompts: list[str], normalize: bool = True, templates: list[str] | None = None) -> np.ndarray:
        from vlfair.embed import embed_texts

        embeddings = embed_texts(self.model, prompts, templates=templates, cache_dir=self.cache_dir,
                                 normalize=normalize)
        _require_finite(embeddings, "text embeddings of prompts", np.arange(len(prompts)))
        if self._embedded is not None:
            self._check_dims(self._embedded[0].shape[1], embeddings.shape[1])
        return embeddings

    def _check_dims(self, image_dim: int, text_dim: int | None = None) -> None:
        text_dim = text_dim if text_dim is not None else self.model.embedding_dim
        if image_dim != text_dim:
            raise ProbeError(f"encoder {self.model.spec!r} embeds images into {image_dim} dims but texts into "
                             f"{text_dim}: image and text embeddings cannot be compared")

    def rows(self) -> np.ndarray:
        return self.images()[1]

    def text_scores(self, texts: list[str], asked: Answering | None = None, answers: list[str] | None = None,
                    question: str | None = None, within: np.ndarray | None = None) -> TextScores:
        images, rows = self.images()
        if within is not None:
            positions = np.searchsorted(rows, within)
            images, rows = images[positions], rows[positions]
        text = self.texts(texts)
        values = (images @ text.T).astype(np.float64)
        probabilities = np.asarray(self.model.probabilities(images, text), dtype=np.float64)
        return TextScores(values, probabilities, rows, "cosine", np.ones(len(rows), dtype=bool))


@register_scorer
class Generative(Scorer):
    """A model that answers questions about an image (``lvlm:``): s(image, text) is the
    log-likelihood of the text as its answer to the probe's question, or, in the open-ended mode,
    1 for the candidate its own answer names; both cached per (question, answers)."""

    kind = "generative"
    capabilities = frozenset({"asks"})

    def __init__(self, model: Any, dataset: Any, batch_size: int = 64, cache_dir: Any = "default"):
        super().__init__(model, dataset, batch_size, cache_dir)
        self._readable: np.ndarray | None = None
        # (question, answers, max_new_tokens: None where scored) -> the scores (or chosen candidates), their rows
        # and the rows skipped
        self._answered: dict[tuple[str, tuple[str, ...], int | None], tuple[np.ndarray, np.ndarray, list[int]]] = {}

    def rows(self) -> np.ndarray:
        if self._readable is None:
            from vlfair.embed import readable_rows

            self._readable, self.skipped_rows = readable_rows(self.dataset)
        return self._readable

    def answer_scores(self, question: str, answers: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The log-likelihood of each answer to ``question`` about each readable image, (images,
        answers), and those images' rows."""
        key = (question, tuple(answers), None)
        if key not in self._answered:
            self._ask([(question, answers)], None)
        scores, rows, self.skipped_rows = self._answered[key]
        return scores, rows

    def generated_answers(self, question: str, answers: list[str], max_new_tokens: int
                          ) -> tuple[np.ndarray, np.ndarray]:
        """The model's own answer to ``question`` about each readable image, as the index of the
        candidate it names (-1: none), and those images' rows. Rows whose answer names none are
        recorded (:attr:`unmatched`, :attr:`unmatched_ids`): the run leaves them out."""
        from vlfair.sources import row_digests

        key = (question, tuple(answers), max_new_tokens)
        if key not in self._answered:
            self._ask([(question, answers)], max_new_tokens)
        chosen, rows, self.skipped_rows = self._answered[key]
        self._count_unmatched(question, int((chosen < 0).sum()), len(chosen))
        self.unmatched_ids.update(row_digests(self.dataset, rows[chosen < 0]))
        return chosen, rows

    def _count_unmatched(self, question: str, none: int, total: int) -> None:
        before = self.unmatched.get(question, (0, 0))  # one question may be asked with several answer lists
        self.unmatched[question] = (before[0] + none, before[1] + total)

    def ask_together(self, asks: list[tuple[str, list[str]]], asked: Answering) -> None:
        """Every (question, answers) of ``asks`` in one pass over the images
        (:func:`vlfair.embed.score_questions`, or :func:`vlfair.embed.generate_questions` in the open-ended
        mode: each image read once, the prompts' shared opening encoded once)."""
        self._ask(asks, asked.max_new_tokens if asked.mode == "generate" else None)

    def _ask(self, asks: list[tuple[str, list[str]]], max_new_tokens: int | None) -> None:
        """Score (``max_new_tokens`` None) or generate the answers of ``asks`` not asked yet."""
        todo = list(dict.fromkeys((question, tuple(answers)) for question, answers in asks
                                  if (question, tuple(answers), max_new_tokens) not in self._answered))
        if not todo:
            return
        from vlfair import embed

        if max_new_tokens is None:
            scored = embed.score_questions(self.model, self.dataset, todo, batch_size=self.batch_size,
                                           cache_dir=self.cache_dir)
            for (question, answers), found in zip(todo, scored):
                self._answered[(question, answers, None)] = (found.scores, found.kept_rows, found.skipped_rows)
        else:
            said = embed.generate_questions(self.model, self.dataset, todo, max_new_tokens=max_new_tokens,
                                            batch_size=self.batch_size, cache_dir=self.cache_dir)
            for (question, answers), answered in zip(todo, said):
                self._answered[(question, answers, max_new_tokens)] = (answered.chosen, answered.kept_rows,
                                                                       answered.skipped_rows)

    def text_scores(self, texts: list[str], asked: Answering | None = None, answers: list[str] | None = None,
                    question: str | None = None, within: np.ndarray | None = None) -> TextScores:
        if within is not None:  # ask only these images (a model's forward per image is dear)
            return self._text_scores_within(np.asarray(within), texts, asked, answers, question)
        if asked is None:
            raise ValueError("a generative model is asked: give the probe's generative section")
        answers = list(texts if answers is None else answers)
        if question is None:
            if not isinstance(asked, Asking):
                raise ValueError("a generative model is asked: give the question")
            question = asked.question
        if asked.mode == "generate":
            chosen, rows = self.generated_answers(question, answers, asked.max_new_tokens)
            matched = chosen >= 0
            values = np.full((len(rows), len(answers)), np.nan)
            values[matched] = 0.0
            values[np.flatnonzero(matched), chosen[matched]] = 1.0
            return TextScores(values, values.copy(), rows, "generated", matched)
        scores, rows = self.answer_scores(question, answers)
        _require_finite(scores, f"answers' log-likelihoods to {question!r} of dataset rows", rows)
        if asked.normalize_length:
            lengths = np.array([len(t) for t in self.model.prepared(question, answers)[1]], dtype=float)
            scores = scores / lengths
        shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
        return TextScores(scores, shifted / shifted.sum(axis=1, keepdims=True), rows, "log_likelihood",
                          np.ones(len(rows), dtype=bool))

    def _text_scores_within(self, within: np.ndarray, texts: list[str], asked: Answering | None,
                            answers: list[str] | None, question: str | None) -> TextScores:
        """:meth:`text_scores` of the ``within`` rows alone, asked of a scorer of those rows: its rows map
        back through ``within``, its unmatched answers are this scorer's, nothing else it asked is."""
        part = type(self)(self.model, self.dataset.select(within.tolist()), self.batch_size, self.cache_dir)
        try:
            found = part.text_scores(texts, asked, answers, question)
        except RejectedImageError as exc:  # named by its row in the subset: name the dataset's
            if exc.row is None:
                raise
            raise exc.at(int(within[exc.row])) from exc
        for asked_question, (none, total) in part.unmatched.items():
            self._count_unmatched(asked_question, none, total)
        self.unmatched_ids.update(part.unmatched_ids)
        return dataclasses.replace(found, rows=within[found.rows])


__all__ = ["CAPABILITIES", "SCORERS", "Contrastive", "Generative", "Scorer", "capabilities_of", "model_kind",
           "register_scorer", "scorer_for", "was_asked"]
