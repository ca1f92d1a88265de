"""What every probe shares: its self-description, typed settings from its YAML, input checks,
cached embeddings, outputs.

A probe is one module and one YAML beside it: a :class:`Probe` subclass decorated with
``vlfair.probes.register`` (or, from another package, ``vlfair.register_probe`` or the entry-point
group ``vlfair.probes``) declares everything the CLI, the Space, the docs and ``run_probe`` need.
Probe modules import their heavy libraries (pandas, scipy, torch) inside ``run``: the CLI imports
every probe to build ``vlfair run --help``.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import functools
import sys
import unicodedata
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import yaml

from vlfair.facts import Facts
from vlfair.outputs import Metric, Table
from vlfair.probes.asking import Answering, TextScores
from vlfair.probes.errors import ProbeError
from vlfair.probes.scorers import Scorer, scorer_for
from vlfair.probes.settings import CONFIDENCE, Bootstrap, ProbeSettings, overrides_from, settings_with
from vlfair.samples import Samples

if TYPE_CHECKING:
    import argparse

    import pandas as pd

    from vlfair.paired import RowSet
    from vlfair.probes.declared import Declared


@dataclasses.dataclass(frozen=True)
class Option:
    """A command-line option of ``vlfair run PROBE``: ``FLAG VALUE`` sets the setting ``setting``,
    or one field of a nested record (``generator.steps``: the YAML's record with that field changed)."""

    flag: str
    setting: str
    help: str
    type: Callable[[str], Any] = str
    action: str = "store"  # or "store_true", "append"
    convert: Callable[[Any], Any] | None = None  # the parsed value -> the setting's value

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def add_to(self, parser: argparse._ActionsContainer) -> None:
        if self.action == "store_true":
            parser.add_argument(self.flag, action="store_true", help=self.help)
        else:
            parser.add_argument(self.flag, type=self.type, action=self.action, help=self.help)


@dataclasses.dataclass(frozen=True)
class UploadSpec:
    """How a probe takes uploaded images (the demo Space): the labels a user gives per image and
    the groups compared."""

    schema: str                      # the dataset schema whose vocabularies check the labels
    labels: tuple[str, ...]          # one value per image, from the CSV or the label table
    groups: tuple[str, ...]          # compared groups: every value needs at least 2 images
    fixed: dict = dataclasses.field(default_factory=dict)  # columns the probe reads that uploads cannot vary
    file_column: str | None = None   # a schema column that holds the file name


@dataclasses.dataclass
class Context:
    """One probe run's inputs: the model, the dataset, and the model's scorer of that dataset
    (:mod:`vlfair.probes.scorers`: one per kind of model), which computes each image's embeddings or
    answers once (cached on disk) for every question the probe asks."""

    encoder: Any
    dataset: Any
    batch_size: int = 64
    cache_dir: Any = "default"
    # each row of ``dataset`` as a row of the data the run was given, where a probe drew a sample of it
    source_rows: list[int] | None = None
    _scorer: Scorer | None = None

    @property
    def scorer(self) -> Scorer:
        """The scorer of the model's kind for the current dataset (a probe that draws a sample of the
        data replaces ``dataset`` before it asks anything)."""
        if self._scorer is None or self._scorer.dataset is not self.dataset:
            self._scorer = scorer_for(self.encoder, self.dataset, self.batch_size, self.cache_dir)
        return self._scorer

    def given_rows(self, rows: Any) -> list[int]:
        """Rows of ``dataset`` as rows of the data given (what samples, skipped rows and errors name)."""
        return [int(self.source_rows[int(r)]) if self.source_rows is not None else int(r) for r in rows]

    @property
    def skipped_rows(self) -> list[int]:
        """The rows whose image could not be read (results.json names them; none where nothing was read)."""
        return self._scorer.skipped_rows if self._scorer is not None else []

    @property
    def unmatched(self) -> dict[str, tuple[int, int]]:
        """Per question, the open-ended answers that named no candidate, and the answers."""
        return self._scorer.unmatched if self._scorer is not None else {}

    def images(self) -> tuple[np.ndarray, np.ndarray]:
        """(embeddings of readable rows, their row indices); unreadable rows are skipped and reported."""
        return self.scorer.images()

    def raw_images(self) -> np.ndarray:
        """The model's image features before L2 normalisation, for the rows :meth:`images` keeps
        (cached apart from the normalised ones)."""
        return self.scorer.raw_images()

    def texts(self, prompts: list[str], normalize: bool = True, templates: list[str] | None = None) -> np.ndarray:
        return self.scorer.texts(prompts, normalize, templates)

    def rows(self) -> np.ndarray:
        """The dataset rows whose images can be read (the others are skipped and reported)."""
        return self.scorer.rows()

    def ask_together(self, asks: list[tuple[str, list[str]]], asked: Answering) -> None:
        """Every (question, answers) of ``asks``, said before any is read: a generative model answers them
        in one pass over the images (each image read once, the prompts' shared opening encoded once); a
        contrastive model has nothing to do here."""
        self.scorer.ask_together(asks, asked)

    def text_scores(self, texts: list[str], asked: Answering | None = None, answers: list[str] | None = None,
                    question: str | None = None, within: np.ndarray | None = None) -> TextScores:
        """s(image, text) of the model for every readable image (``within``: of those dataset rows
        only, all readable) and each of ``texts``.

        A contrastive encoder embeds ``texts``; a generative model is asked ``question`` (default
        ``asked.question``) with ``answers`` (default ``texts``) as the candidates, as ``asked`` says.
        """
        return self.scorer.text_scores(texts, asked, answers, question, within)

    def leave_out_unmatched(self, samples: Samples) -> Samples:
        """``samples`` without the images whose generated answer named no candidate (open-ended mode),
        each question's unmatched count in its facts and a warning saying how many were left out."""
        if not self.unmatched:
            return samples
        keep = ~samples.frame["id"].isin(self.scorer.unmatched_ids).to_numpy()  # (asked: a scorer holds them)
        facts = {**samples.facts, "unmatched": {q: {"unmatched": n, "answers": total}
                                                for q, (n, total) in self.unmatched.items()}}
        warnings = list(samples.warnings)
        if not keep.any():
            asked = "; ".join(f"{q!r}: {n} of {total}" for q, (n, total) in self.unmatched.items())
            raise ProbeError(f"model {self.encoder.name!r}: no image's open-ended answers all named a candidate "
                             f"(unmatched per question: {asked}), so nothing is left to measure; raise "
                             "generative.max_new_tokens, reword the question, or use generative.mode=likelihood")
        if not keep.all():
            warnings.append(f"open-ended answers: {int((~keep).sum())} of {len(keep)} images answered a question with "
                            "none of its candidates and are left out (unmatched_share per question)")
        return dataclasses.replace(samples, frame=samples.frame[keep].reset_index(drop=True), facts=facts,
                                   warnings=warnings)

    def column(self, name: str, rows: np.ndarray) -> np.ndarray:
        """Column ``name`` at ``rows``, read in one take (cell by cell was 0.2 ms a row)."""
        return np.asarray(self.dataset.select_columns([name])[[int(r) for r in rows]][name])

    def identity(self, rows: np.ndarray) -> dict[str, Any]:
        """The identity columns of samples.parquet for ``rows`` of the dataset: ``row`` (the index in
        the data as given: :meth:`given_rows`) and ``id`` (from the image's content, so another run's
        rows can be matched)."""
        from vlfair.sources import row_digests

        return {"row": np.asarray(self.given_rows(rows), dtype=np.int64), "id": row_digests(self.dataset, rows)}


@dataclasses.dataclass
class Output:
    metrics: list[Metric] = dataclasses.field(default_factory=list)
    tables: dict[str, Table | pd.DataFrame] = dataclasses.field(default_factory=dict)
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    dataset: dict[str, Any] | None = None  # set by probes that generate their data
    published_model: str | None = None  # the model the study's published numbers are matched on (default: the encoder)
    samples: Samples | None = None  # the per-sample results the metrics aggregate (samples.parquet)

    def figure(self, name: str, draw: Callable[..., Any], *args: Any, **options: Any) -> None:
        """Figure ``name``, as ``draw(*args, **options)`` makes it, unless figures are not drawn here
        (:func:`vlfair.figures.not_drawn`: a run written without them spends nothing on them)."""
        from vlfair.figures import drawing

        if drawing():
            self.figures[name] = draw(*args, **options)


class Probe(abc.ABC):
    """One study as a probe. A subclass declares, as class attributes, all that is known of it
    before it runs, and implements :meth:`run`."""

    name: ClassVar[str]                                   # as `vlfair run NAME` and results.json name it
    Settings: ClassVar[type[ProbeSettings]] = ProbeSettings  # the typed model of its YAML
    settings_file: ClassVar[str | None] = None            # beside the module; default <module>.yaml
    help: ClassVar[str] = ""                              # one line, for `vlfair run --help`
    description: ClassVar[str] = ""                       # what it reproduces, for `vlfair run NAME --help`
    schemas: ClassVar[tuple[str, ...]] = ()               # dataset schemas it accepts, the first is the default
    required_columns: ClassVar[dict[str, tuple[str, ...]]] = {}
    needs_dataset: ClassVar[bool] = True                  # False for probes that make their own data
    options: ClassVar[tuple[Option, ...]] = ()            # its own command-line options
    options_title: ClassVar[str | None] = None            # their heading in --help (default: the name)
    upload: ClassVar[UploadSpec | None] = None            # how the demo Space takes uploads, if it does
    published_file: ClassVar[str | None] = None           # the study's published tables (published/<file>)
    asks_questions: ClassVar[bool] = False                # it can measure a generative model (lvlm:) by
                                                          # asking it questions (Context.text_scores)
    facts: ClassVar[dict[str, Facts | float]] = {}       # its own metrics' facts (or neutral values) beyond
                                                          # the catalog's: "less biased" = closer
    model_settings: ClassVar[tuple[str, ...]] = ()        # settings that choose the model measured (word-
                                                          # influence's generator): runs that differ in them
                                                          # are of one family, compared and ranked together
    uncompared: ClassVar[dict[str, str]] = {}             # metrics declare() leaves out -> why (said
                                                          # by vlfair compare)
    _registered: ClassVar[bool] = False                   # set by vlfair.probes.register
    position: ClassVar[float] = float("inf")              # where listings put it (the studies in their order;
                                                          # others after them, by name)

    def __init__(self, overrides: Mapping[str, Any] | None = None, components: dict[str, Any] | None = None,
                 sources: Mapping[str, str] | None = None):
        self.settings = self.validate_settings(overrides, sources)
        self.components = components or {}  # objects that replace configured parts (a generator, a classifier)
        self.version = self.settings.version

    # ---- settings ------------------------------------------------------------------------
    @classmethod
    def directory(cls) -> Any:
        """The folder of the probe's module (its YAML and published/ tables live there)."""
        module = sys.modules[cls.__module__]
        if module.__package__:
            return resources.files(module.__package__)
        return Path(module.__file__ or ".").parent  # a top-level module of its own

    @classmethod
    def settings_path(cls) -> str:
        return cls.settings_file or cls.__module__.rpartition(".")[2] + ".yaml"

    @classmethod
    def default_settings(cls) -> dict[str, Any]:
        """The probe's YAML as written (validated by :meth:`validate_settings`); a copy to change."""
        return copy.deepcopy(_read_yaml(cls.directory(), cls.settings_path()))

    @classmethod
    def validate_settings(cls, overrides: Mapping[str, Any] | None = None,
                          sources: Mapping[str, str] | None = None) -> ProbeSettings:
        """The YAML with ``overrides``, checked against :attr:`Settings`
        (:func:`~vlfair.probes.settings.settings_with`)."""
        return settings_with(cls.Settings, cls.default_settings(), overrides, sources, cls.name, cls.settings_path())

    @classmethod
    def overrides_from(cls, values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        """(settings, key -> flag) from the parsed values of :attr:`options`
        (:func:`~vlfair.probes.settings.overrides_from`)."""
        return overrides_from(cls.options, values, cls.default_settings)

    def intervals_note(self) -> str:
        """What every interval and error bar of the report is (said under every report)."""
        s = self.settings
        level = f"{getattr(s, 'confidence', CONFIDENCE):.0%}"
        if not isinstance(s, Bootstrap):
            return f"Intervals: {level} confidence intervals."
        if not s.bootstrap:
            return "Intervals: none (bootstrap=0); p-values are shown where a test applies."
        return f"Intervals and error bars: {level} stratified-bootstrap CIs, {s.bootstrap} resamples (seed {s.seed})."

    # ---- data ----------------------------------------------------------------------------
    def default_subsets(self, schema: str) -> list[str | None] | None:
        """The subsets a dataset spec is read as when none is given (None: the whole dataset)."""
        return None

    def check_columns(self, dataset: Any, schema: str) -> None:
        needed = self.required_columns.get(schema, ())
        missing = [c for c in needed if c not in dataset.column_names]
        if missing:
            raise ProbeError(f"probe {self.name!r} needs columns {missing} ({schema} schema); the dataset has "
                             f"{dataset.column_names}")

    # ---- measuring: score (needs the model) -> analyze (the samples alone) ----------------
    def run(self, ctx: Context, schema: str | None) -> Output:
        """Compute the probe's metrics, tables and figures from ``ctx``.

        A probe defines :meth:`score` and :meth:`analyze` (and :meth:`illustrate` for figures made
        of the images themselves): the run then keeps its per-sample results, which ``vlfair
        rescore`` and ``vlfair compare`` read. A probe may instead override ``run`` alone; its
        runs then have no samples.

        Args:
            ctx: the run's encoder, dataset (None for a probe that makes its own data), cached
                image and text embeddings.
            schema: the dataset's schema (one of :attr:`schemas`; None without a dataset).

        Returns:
            The metrics, tables, figures, notes and warnings of the run.
        """
        # what the model can do decides the settings before anything is read (score never rewrites them):
        # the run records the settings it measured with, and warns first of any it replaced
        replaced: list[str] = []
        if isinstance(ctx, Context):
            self.settings, replaced = self.settings_for(ctx.scorer)
        samples = self.score(ctx, schema)
        if replaced:
            samples = dataclasses.replace(samples, warnings=[*replaced, *samples.warnings])
        if isinstance(ctx, Context):  # a generative model's unmatched open-ended answers left out
            samples = ctx.leave_out_unmatched(samples)
        out = self.analyze_samples(samples)
        self.illustrate(ctx, samples, out)
        out.samples = samples
        return out

    def settings_for(self, scorer: Scorer) -> tuple[ProbeSettings, list[str]]:
        """The settings a run with ``scorer``'s model measures with, and a warning for each one replaced:
        a probe refuses here, by name, the settings the model cannot take (by its scorer's
        :attr:`~vlfair.probes.scorers.Scorer.capabilities`), and replaces a default that does not apply to
        it. By default the settings as given."""
        return self.settings, []

    def score(self, ctx: Context, schema: str | None) -> Samples:
        """The model's part: every sample's quantities (one row per sample, with ``ctx.identity``'s
        columns first), the run's facts and the warnings scoring raised."""
        raise ProbeError(f"probe {self.name!r} defines neither run nor score and analyze (or declare) (register "
                         "refuses such a class; this one was used without it)")

    def analyze(self, samples: Samples) -> Output:
        """The metrics, tables and figures from the samples alone (no model, no dataset): by default
        the metrics :meth:`declare` states, each with its bootstrap interval, and their table."""
        from vlfair.probes import declared

        if type(self).declare is Probe.declare:
            raise ProbeError(f"probe {self.name!r} defines score but not analyze (nor declare): it cannot be measured "
                             "from samples")
        metrics = declared.evaluate(samples, self.declare(samples), self.facts,
                                   **getattr(self.settings, "evaluation", {}))
        if not metrics:
            raise ProbeError(f"probe {self.name!r}: no metric it declares is defined on these samples")
        return Output(metrics=metrics, tables={"metrics": declared.table(metrics)}, settings=dict(samples.facts),
                      notes=list(self.settings.notes), warnings=list(samples.warnings))

    def declare(self, samples: Samples) -> list[Declared]:
        """Each metric of the samples, declared once (:mod:`vlfair.probes.declared`): its rows,
        groups, strata and statistic. ``vlfair compare`` evaluates them on two runs' shared
        resamples; a probe without its own :meth:`analyze` reports them as its metrics."""
        return []

    def analyze_samples(self, samples: Samples) -> Output:
        """:meth:`analyze`, and the share of open-ended answers that named no candidate, per question
        (a run's and a rescore's alike)."""
        out = self.analyze(samples)
        for question, counts in (samples.facts.get("unmatched") or {}).items():
            share = counts["unmatched"] / counts["answers"] if counts["answers"] else float("nan")
            out.metrics.append(Metric("unmatched_share", {"question": question}, share, details=counts))
        return out

    def illustrate(self, ctx: Context, samples: Samples, out: Output) -> None:  # noqa: B027  (optional: most draw none)
        """Figures drawn from the images or the model themselves (median images, Grad-CAM): added
        to a run's report, absent from a rescored one."""

    def comparisons(self, samples: Samples) -> list[RowSet]:
        """The metrics as functions of per-sample values (:mod:`vlfair.paired`), for ``vlfair
        compare``: :meth:`declare`'s, each equal to the run's metric of the same name and subset."""
        from vlfair.probes import declared

        return declared.row_sets(samples, self.declare(samples), self.facts)

    # ---- comparability -------------------------------------------------------------------
    def draws_with_seed(self) -> bool:
        """Whether the seed draws the samples themselves (a per-cell sample, generated images), not
        only the intervals' resamples: runs with other seeds then measured other samples."""
        return False

    @classmethod
    def measuring_settings(cls, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The settings (as results.json's ``probe_settings``) that decide what a run measures: all
        but the intervals' (``defaults.INTERVAL_SETTINGS``), the seed (which draws samples only
        where the samples' ids show it), those choosing the model (:attr:`model_settings`) and the
        notes. Runs that differ in these are not compared."""
        from vlfair.defaults import INTERVAL_SETTINGS
        from vlfair.probes.grouping import at_defaults_left_out

        left_out = {*INTERVAL_SETTINGS, *cls.model_settings, "seed", "notes"}
        return at_defaults_left_out({key: value for key, value in settings.items() if key not in left_out})

    def family_key(self, dataset: Mapping[str, Any]) -> dict[str, Any]:
        """What runs must share to be ranked against each other (results.json's ``family`` is its
        hash): the probe and its version, the data (fingerprint, split, subset; for a probe that
        makes its own data with the model, split and subset alone), the measuring settings and, where
        it draws the samples, the seed."""
        settings = self.settings.model_dump(mode="json")
        key = self.measuring_settings(settings)
        if self.draws_with_seed():
            key["seed"] = settings.get("seed")
        described = ("fingerprint", "split", "subset") if self.needs_dataset else ("split", "subset")
        return {"probe": self.name, "probe_version": self.version,
                "dataset": {field: dataset.get(field) for field in described}, "settings": key}

    @classmethod
    def keeps_samples(cls) -> bool:
        """Whether the probe's runs write samples.parquet (it defines score, and analyze or declare)."""
        return cls.score is not Probe.score and (cls.analyze is not Probe.analyze or cls.declare is not Probe.declare)


@functools.cache
def _read_yaml(directory: Any, file: str) -> dict[str, Any]:
    text = directory.joinpath(file).read_text(encoding="utf-8")
    loaded = yaml.safe_load(text)
    if not isinstance(loaded, dict):
        raise ProbeError(f"{file}: a probe's settings file holds a mapping of keys to values")
    return loaded


# 1 - cosine below which two texts' embeddings are one input up to rounding: the same input at two
# places of a batch differs by ~1e-7 (float32) to ~1e-5 (bfloat16); different words, even close ones
# (smart / clever), are more than 1e-2 apart in CLIP's text space
INDISTINGUISHABLE = 1e-4


def indistinguishable(texts: list[str], embeddings: np.ndarray) -> str | None:
    """A sentence naming the first two texts the model cannot tell apart, or None. Such texts are
    one input after its tokenizer (case, spaces, Unicode forms; words outside its vocabulary, read
    as the same unknown token): a comparison of them measures rounding noise, not the model."""
    vectors = np.asarray(embeddings, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):  # a zero vector compares as nan: never "the same"
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine = unit @ unit.T
    same = np.argwhere(np.triu(cosine > 1 - INDISTINGUISHABLE, k=1))
    if not same.size:
        return None
    i, j = (int(k) for k in same[0])
    a, b = texts[i], texts[j]
    alike = unicodedata.normalize("NFKC", a) == unicodedata.normalize("NFKC", b)  # print what tells them apart
    shown = f"{ascii(a)} and {ascii(b)}" if alike else f"{a!r} and {b!r}"
    return (f"the model cannot tell {shown} apart (their text embeddings are the same up to rounding, cosine "
            f"{cosine[i, j]:.7f}: its tokenizer reads them as one input)")


def clip_score(image_embeddings: np.ndarray, text_embeddings: np.ndarray) -> np.ndarray:
    """CLIPScore = max(100 cos, 0) of each image with its own text (rows paired)."""
    return np.maximum(100.0 * (image_embeddings * text_embeddings).sum(axis=1), 0.0)
