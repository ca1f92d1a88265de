"""Builders: raw study sources -> Parquet (images embedded), a dataset card, optionally the Hub.

Used by ``vlfair prepare NAME --source PATH --out DIR`` and by ``datasets_scripts/<name>/build.py``.
Every problem in the raw data (a path outside the source, a listed but missing image, a
duplicate file, a label outside the vocabulary such as an age bin a spreadsheet turned into
"03-Sep") is reported with its row; the build fails unless ``skip_bad`` is set, and then the
skipped rows are listed in the card.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets

from vlfair._version import __version__
from vlfair.atomic import OutputKind, atomic_output
from vlfair.data.files import SourceFiles
from vlfair.data.registry import SCHEMAS, buildable, dataset_spec
from vlfair.data.schemas import (
    ADULT_AGE_BINS,
    AGE_GROUP_OF_BIN,
    MULTI30K_LANGUAGES,
    PFI_CATEGORIES,
    label_problem,
    normalize_label,
)
from vlfair.imageio import image_problem
from vlfair.logging import library_progress_bars, progress_bars_enabled
from vlfair.yamlfile import load_yaml, read_front_matter


@dataclasses.dataclass(frozen=True)
class Problem:
    where: str  # "fairface_label_val.csv row 17" or a file name
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class BuildError(ValueError):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        shown = "\n  ".join(str(p) for p in problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"{len(problems)} bad rows in the source (pass --skip-bad / skip_bad=True to leave "
                         f"them out and list them in the card):\n  {shown}{more}")


class SourceError(BuildError):
    """The source itself cannot be read (a missing or malformed file): --skip-bad cannot help."""

    def __init__(self, problems: list[Problem]):
        super().__init__(problems)
        self.args = ("the source cannot be read:\n  " + "\n  ".join(str(p) for p in problems[:20])
                     + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""),)


@dataclasses.dataclass
class Built:
    name: str
    configs: dict[str, dict[str, datasets.Dataset]]  # config -> split -> rows
    skipped: list[Problem]
    source: str


def _reading(rows: list, where: str) -> Any:
    """``rows`` with vlfair's bar: reading and decoding every image is the long step of a build."""
    from tqdm.auto import tqdm

    return tqdm(rows, desc=f"reading {where}", unit="img", disable=not progress_bars_enabled())


class RowCollector:
    """Turns raw metadata rows into records, collecting every problem with its row."""

    def __init__(self, schema_name: str, files: SourceFiles, where: str):
        self.schema = SCHEMAS[schema_name]
        self.files, self.where = files, where
        self.problems: list[Problem] = []
        self.seen: dict[str, int] = {}

    def record(self, row: int, file: str, labels: dict[str, Any], extra: dict[str, Any] | None = None) -> dict | None:
        where = f"{self.where} row {row}"
        problem = self.files.check(file)
        key = self.files.key(file) if file else file
        if problem is None and key in self.seen:
            problem = f"duplicate file name {file!r} (also row {self.seen[key]})"
        data = self.files.read(file) if problem is None else b""
        if problem is None and (bad := image_problem(data)):  # decoded now: a bad image fails the build
            problem = f"image {file!r} is {bad}"
        out = {}
        for name, value in labels.items():
            column = self.schema.column(name)
            value = normalize_label(value, column) if column is not None else value
            if problem is None and column is not None and (wrong := label_problem(value, column)):
                problem = f"column '{name}' {wrong}"
            out[name] = value
        if problem is not None:
            self.problems.append(Problem(where, problem))
            return None
        self.seen[key] = row
        return {"image": {"bytes": data, "path": file}, **out, **(extra or {})}


def _dataset(records: list[dict], schema_name: str) -> datasets.Dataset:
    schema = SCHEMAS[schema_name]
    kinds = {"image": datasets.Image(), "string": datasets.Value("string"), "int": datasets.Value("int64"),
             "bool": datasets.Value("bool")}
    columns = [c for c in schema.columns if records and c.name in records[0]]
    features = datasets.Features({c.name: kinds[c.kind] for c in columns})
    data = {c.name: [r[c.name] for r in records] for c in columns}
    return datasets.Dataset.from_dict(data, features=features)


def _finish(name: str, configs: dict, problems: list[Problem], skip_bad: bool, source: Path) -> Built:
    if problems and not skip_bad:
        raise BuildError(problems)
    return Built(name, configs, problems, str(source))


def _read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a UTF-8 CSV; a missing file, another encoding or a row with the wrong number of
    fields is a BuildError naming the file (and every such row)."""
    if not path.is_file():
        raise SourceError([Problem(str(path), "is missing")])
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
    except UnicodeDecodeError as exc:
        raise SourceError([Problem(path.name, f"is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as "
                                              "UTF-8")]) from None
    width = len(reader.fieldnames or [])
    ragged = [Problem(f"{path.name} row {number}",
                      f"has {width - list(row.values()).count(None) + len(row.get(None, []))} fields, "
                      f"the header has {width}")
              for number, row in enumerate(rows) if None in row or None in row.values()]
    if ragged:
        raise SourceError(ragged)
    return rows


def _require_columns(rows: list[dict], columns: list[str], path: Path) -> None:
    present = list(rows[0].keys()) if rows else []
    missing = [c for c in columns if c not in present]
    if missing:
        raise SourceError([Problem(path.name, f"lacks columns {missing}; it has {present}")])


# ---- FairFace -----------------------------------------------------------------------------
FAIRFACE_SPLITS = {"train": "train", "val": "validation"}


def build_fairface(source: str | Path, skip_bad: bool = False, **_: Any) -> Built:
    """From the official release: fairface_label_{train,val}.csv beside train/ and val/ (or the zip)."""
    source = Path(source)
    archives = sorted(source.glob("*.zip"))
    files = SourceFiles(source, archives[0] if archives else None)
    splits, problems = {}, []
    for raw, split in FAIRFACE_SPLITS.items():
        path = source / f"fairface_label_{raw}.csv"
        if not path.exists():
            continue
        rows = _read_csv(path)
        _require_columns(rows, ["file", "age", "gender", "race", "service_test"], path)
        collector = RowCollector("fairface", files, path.name)
        records = []
        for row, values in enumerate(_reading(rows, path.name)):
            service = values["service_test"].strip().lower()
            if service not in ("true", "false"):
                collector.problems.append(Problem(f"{path.name} row {row}",
                                                  f"service_test {values['service_test']!r} is not True/False"))
                continue
            record = collector.record(row, values["file"], {"age": values["age"], "gender": values["gender"],
                                                            "race": values["race"]},
                                      {"file": values["file"], "service_test": service == "true"})
            if record is not None:
                record["age_group"] = AGE_GROUP_OF_BIN[record["age"]]
                records.append(record)
        problems += collector.problems
        splits[split] = _dataset(records, "fairface")
    if not splits:
        raise BuildError([Problem(str(source), "no fairface_label_train.csv or fairface_label_val.csv")])
    adults = {s: d.filter(lambda b: [a in ADULT_AGE_BINS for a in b["age"]], batched=True) for s, d in splits.items()}
    return _finish("fairface", {"default": splits, "adults": adults}, problems, skip_bad, source)


# ---- Multi30K -----------------------------------------------------------------------------
def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def _find(source: Path, name: str) -> Path | None:
    for candidate in (f"{name}.gz", name):
        found = sorted(source.rglob(candidate))
        if found:
            return found[0]
    return None


def build_multi30k(source: str | Path, images: str | Path | None = None, skip_bad: bool = False, **_: Any) -> Built:
    """From the raw caption files (gzipped, one line per image), the split lists and Flickr30K images.

    translation: test_2016_flickr.{en,de,fr,cs}(.gz) + test_2016_flickr.images.txt;
    independent: test_2016.{1..5}.{en,de}(.gz) + test_2016.images.txt.
    """
    source = Path(source)
    if images is None:
        raise BuildError([Problem("--images", "Multi30K needs the Flickr30K image directory (--images DIR)")])
    files = SourceFiles(images)
    configs, problems = {}, []
    portions = {
        "translation": ("test_2016_flickr.images.txt",
                        [(1, {lang: f"test_2016_flickr.{lang}" for lang in MULTI30K_LANGUAGES})]),
        "independent": ("test_2016.images.txt",
                        [(j, {lang: f"test_2016.{j}.{lang}" for lang in ("en", "de")}) for j in range(1, 6)]),
    }
    for portion, (list_name, captions) in portions.items():
        list_path = _find(source, list_name)
        if list_path is None:
            continue
        names = [n.strip() for n in _lines(list_path) if n.strip()]
        collector = RowCollector("multi30k", files, list_path.name)
        columns = {}
        for index, per_language in captions:
            for language, stem in per_language.items():
                path = _find(source, stem)
                if path is None:
                    if language in ("en", "de"):
                        problems.append(Problem(stem, f"caption file for {language} is missing"))
                    continue
                lines = _lines(path)
                if len(lines) != len(names):
                    problems.append(Problem(path.name, f"{len(lines)} lines but {list_name} lists {len(names)} images"))
                    continue
                columns[(index, language)] = lines
        records = []
        for row, image_file in enumerate(_reading(names, list_path.name)):
            image = collector.record(row, image_file, {"portion": portion}, {"image_file": image_file})
            if image is None:
                continue  # its problem is reported once, not once per caption
            for index, per_language in captions:
                texts = {lang: columns[(index, lang)][row] for lang in per_language if (index, lang) in columns}
                records.append({**image, "caption_index": index, **texts})
        problems += collector.problems
        configs[portion] = {"test": _dataset(records, "multi30k")}
    if not configs:
        raise BuildError([Problem(str(source), "no test_2016_flickr.images.txt or test_2016.images.txt found")])
    return _finish("multi30k", configs, problems, skip_bad, source)


# ---- P-FI and professions -------------------------------------------------------------------
PFI_OPTIONAL = ("party", "state", "district", "city", "sport", "role")


def build_pfi(source: str | Path, skip_bad: bool = False, metadata: str = "metadata.csv", **_: Any) -> Built:
    """From a portrait directory and a metadata CSV: file, name, category, gender (+ party, state, ...)."""
    source = Path(source)
    path = source / metadata
    rows = _read_csv(path)
    _require_columns(rows, ["file", "name", "category", "gender"], path)
    collector = RowCollector("pfi", SourceFiles(source), path.name)
    records = []
    for row, values in enumerate(_reading(rows, path.name)):
        extra = {"name": values["name"], **{c: (values.get(c) or None) for c in PFI_OPTIONAL}}
        record = collector.record(row, values["file"], {"category": values["category"].strip().lower(),
                                                        "gender": values["gender"]}, extra)
        if record is not None:
            records.append(record)
    default = _dataset(records, "pfi")
    configs = {"default": {"test": default}}
    for category in PFI_CATEGORIES:
        subset = default.filter(lambda b, c=category: [x == c for x in b["category"]], batched=True)
        if subset.num_rows:
            configs[category] = {"test": subset}
    return _finish("pfi", configs, collector.problems, skip_bad, source)


def metadata_builder(name: str, metadata: str = "metadata.csv") -> Callable[..., Built]:
    """The builder of a dataset whose raw release is a folder holding its images and a CSV
    (``metadata``) with each image's ``file`` (relative to the folder) and one column per column of
    the schema; every image is read and checked, every label checked against the schema, as the
    studies' builders do. A plugin's dataset takes it as its ``DatasetSpec.builder``."""
    def build(source: str | Path, skip_bad: bool = False, **options: Any) -> Built:
        if options:
            raise ValueError(f"{name}: unexpected options {sorted(options)}")
        source = Path(source)
        path = source / metadata
        rows = _read_csv(path)
        columns = [c for c in SCHEMAS[name].columns if c.kind != "image"]
        _require_columns(rows, ["file", *(c.name for c in columns if c.required)], path)
        collector = RowCollector(name, SourceFiles(source), path.name)
        records = [r for row, values in enumerate(_reading(rows, path.name))
                   if (r := collector.record(row, values["file"], {c.name: _typed(values.get(c.name), c.kind)
                                                                   for c in columns})) is not None]
        return _finish(name, {"default": {"test": _dataset(records, name)}}, collector.problems, skip_bad, source)
    return build


def _typed(text: str | None, kind: str) -> Any:
    """A CSV cell as its column's kind: a whole number, a flag (true/false, 1/0, yes/no) or text; empty: None.
    A cell that is not of its kind stays text, and the schema's check names it."""
    if text is None or not text.strip():
        return None
    if kind == "int" and text.strip().lstrip("-").isdigit():
        return int(text)
    flags = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
    if kind == "bool" and text.strip().lower() in flags:
        return flags[text.strip().lower()]
    return text


# the images a professions tree holds, by suffix; ".mpo": a camera's multi-picture JPEG, read at its first frame
TREE_IMAGES = (".jpg", ".jpeg", ".png", ".mpo")


def build_professions(source: str | Path, skip_bad: bool = False, metadata: str = "metadata.csv", **_: Any) -> Built:
    """From a ``profession/gender/race/*.jpg`` tree, or a metadata CSV (file, profession, gender, race)."""
    source = Path(source)
    files = SourceFiles(source)
    if (source / metadata).exists():
        rows = _read_csv(source / metadata)
        _require_columns(rows, ["file", "profession", "gender", "race"], source / metadata)
        where = metadata
    else:
        rows = [{"file": p.relative_to(source).as_posix(), "profession": p.parts[-4], "gender": p.parts[-3],
                 "race": p.parts[-2]}
                for p in sorted(source.rglob("*")) if p.suffix.lower() in TREE_IMAGES
                and len(p.relative_to(source).parts) == 4]
        if not rows:
            raise BuildError([Problem(str(source), "no metadata.csv and no profession/gender/race/*.jpg images")])
        where = "tree"
    collector = RowCollector("professions", files, where)
    records = [r for row, v in enumerate(_reading(rows, where))
               if (r := collector.record(row, v["file"], {"gender": v["gender"], "profession": v["profession"],
                                                          "race": v["race"]})) is not None]
    return _finish("professions", {"default": {"test": _dataset(records, "professions")}}, collector.problems,
                   skip_bad, source)


# ---- output -------------------------------------------------------------------------------
DATA_FILE = "{config}/{split}-00000-of-00001.parquet"  # the Hub's shard naming; the card points at these files
def size_category(rows: int) -> str:
    """The Hub's size_categories bucket of a row count."""
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                         (10_000_000, "1M<n<10M")):
        if rows < limit:
            return label
    return "n>10M"


def with_class_labels(dataset: datasets.Dataset, schema_name: str) -> datasets.Dataset:
    """Label columns as ClassLabel: the schema's vocabulary as names, or (labels the schema leaves
    open, e.g. the professions) the names present, sorted."""
    for column in SCHEMAS[schema_name].columns:
        if column.name in dataset.column_names and (column.vocabulary or column.label):
            names = list(column.vocabulary or sorted({v for v in dataset[column.name][:] if v is not None}))
            dataset = dataset.cast_column(column.name, datasets.ClassLabel(names=names))
    return dataset


def render_card(built: Built, files: dict[str, dict[str, str]], infos: dict[str, datasets.DatasetInfo]) -> str:
    """The dataset card: cards/<name>.md's YAML completed with huggingface_hub's DatasetCardData
    (configs pointing at ``files``, dataset_info, size and licence fields), and its body."""
    from huggingface_hub import DatasetCardData

    spec = dataset_spec(built.name)
    template = spec.function("card")() if spec.card is not None else PLAIN_CARD.replace("$name", built.name)
    where = f"the card template of dataset {built.name!r}"
    meta_end = template.index("\n---\n", 4)
    front, body = load_yaml(template[4:meta_end], where, first_line=2), template[meta_end + 5:]
    rows = sum(info.splits.total_num_examples for config, info in infos.items() if config == "default") or \
        sum(info.splits.total_num_examples for info in infos.values())
    card = DatasetCardData(**front, size_categories=[size_category(rows)])
    if spec.languages:
        card.language = list(spec.languages)
    # keys DatasetCardData has no field for are set through its dict interface (the YAML keeps this order);
    # a licence the Hub does not list by id is named, and linked to the card's own section stating its terms
    if card.license == "other" and spec.license:
        card["license_name"], card["license_link"] = spec.license
    card["configs"] = [{"config_name": config, "data_files": [{"split": s, "path": p} for s, p in splits.items()],
                        **({"default": True} if config == "default" else {})} for config, splits in files.items()]
    datasets.info.DatasetInfosDict(infos).to_dataset_card_data(card)
    card["vlfair"] = {"schema": built.name, "version": __version__, "skipped_rows": len(built.skipped)}
    table = "\n".join(f"| {config} | {split} | {info.splits[split].num_examples} |" for config, info in infos.items()
                      for split in info.splits)
    skipped = ("\n".join(f"- {p}" for p in built.skipped) if built.skipped
               else "None: every row of the source was used.")
    body = string.Template(body).safe_substitute(
        configs_table="| config | split | rows |\n|---|---|---|\n" + table, skipped_rows=skipped,
        vlfair_version=__version__, source=built.source)
    return f"---\n{card.to_yaml()}\n---\n{body}"


# a dataset without a card template of its own gets this one: its name, the configs, what was skipped
PLAIN_CARD = """---
license: unknown
pretty_name: $name
---
# $name (prepared by vlfair)

$configs_table

Rows left out: $skipped_rows

Built from `$source` by vlfair $vlfair_version (`vlfair prepare $name`).
"""

# a prepared dataset's folder (vlfair prepare --out): replaced as a whole, only when it holds nothing else
PREPARED_OUTPUT = OutputKind("prepared dataset")


def write_prepared(built: Built, out: str | Path, push_to_hub: str | None = None) -> Path:
    """Parquet per config and split (labels as ClassLabel) and the card, laid out as a Hub dataset
    repository: plain ``datasets.load_dataset(out[, config])`` reads it, and the Hub gets the same files.

    ``out`` is written as a whole (``vlfair.atomic``): built in a folder beside it and swapped in
    when complete, so a prepare stopped midway leaves an earlier prepared dataset there whole."""
    with atomic_output(out, PREPARED_OUTPUT) as staging:
        _write_prepared(built, staging)
    if push_to_hub:
        push(out, push_to_hub)
    return Path(out)


def _write_prepared(built: Built, out: Path) -> None:
    files: dict[str, dict[str, str]] = {}
    infos: dict[str, datasets.DatasetInfo] = {}
    for config, splits in built.configs.items():
        split_infos, features = datasets.SplitDict(), None
        for split, ds in splits.items():
            ds = with_class_labels(ds, built.name)
            relative = DATA_FILE.format(config=config, split=split)
            (out / relative).parent.mkdir(parents=True, exist_ok=True)
            ds.to_parquet(str(out / relative))
            files.setdefault(config, {})[split] = relative
            split_infos.add(datasets.SplitInfo(name=split, num_bytes=ds.data.nbytes, num_examples=ds.num_rows))
            features = ds.features
        infos[config] = datasets.DatasetInfo(
            features=features, splits=split_infos, dataset_size=sum(i.num_bytes for i in split_infos.values()),
            download_size=sum((out / path).stat().st_size for path in files[config].values()))
    (out / "README.md").write_text(render_card(built, files, infos))


def push(directory: str | Path, repo_id: str) -> None:
    """Upload a prepared directory in one commit: its card and every file the card names."""
    from huggingface_hub import CommitOperationAdd, HfApi

    directory = Path(directory)
    card = read_front_matter(directory / "README.md")  # a prepared directory's card always has its configs
    paths = [f["path"] for c in card["configs"] for f in c["data_files"]]
    operations = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(directory / path))
                  for path in ["README.md", *paths]]
    api = HfApi()
    api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
    api.create_commit(repo_id, operations, repo_type="dataset", commit_message="vlfair prepare")


@library_progress_bars("datasets.utils.logging")  # "Filter", "Casting the dataset", "Creating parquet": short steps
def prepare(name: str, source: str | Path, out: str | Path, push_to_hub: str | None = None, skip_bad: bool = False,
            **options: Any) -> Path:
    """Build ``name`` from its raw source into ``out`` (and the Hub when ``push_to_hub`` names a repo)."""
    if name not in buildable():
        raise ValueError(f"no builder for {name!r}; builders: {buildable()}")
    built = dataset_spec(name).function("builder")(source, skip_bad=skip_bad, **options)
    return write_prepared(built, out, push_to_hub)
