"""Every Eval Ever instance-level records of a run, from its samples.parquet: so that other tools
can re-analyse a vlfair run sample by sample.

One record per (sample, metric the sample enters), as the schema asks where one sample feeds
several aggregate results: its ``evaluation_result_id`` is the metric's task id (the aggregate
record's join key), its score the sample's value in the column the metric's statistic reads (the
metric's own declaration: :func:`vlfair.probes.declared.members`), its labels and the other
columns' values beside it. A metric that re-ranks every sample (retrieval's skews) has no per-sample
value and no instance records; the aggregate record says so.

Written by ``card-results --instances`` for each run with its samples.parquet (every line validated).
Which samples a metric reads (``declared.members``): a group's mean its group's samples, any other
statistic every sample of its row set. A line's ``evaluation.score`` is the sample's value in the first
column the statistic reads (``output.raw`` all of them, ``input.raw`` the sample's id and group labels),
``is_correct`` true only for a sample valued 1 in a column of 0s and 1s (an accuracy's right answer;
elsewhere false, and ``metadata`` says it does not apply). The file is
``data/<collection>/<developer>/<model>/<uuid>_samples.jsonl`` under ``DIR/every_eval_ever``, beside its
aggregate record ``<uuid>.json`` (the one place Every Eval Ever's validator takes it:
:func:`vlfair.report.eval_results.samples_name`). A run read
without its samples, or whose metrics all re-rank every sample, gets no file, said as a warning.

``every_eval_ever_instance.schema.json`` beside :mod:`vlfair.report.eval_results` is Every Eval Ever's
instance-level schema, version 0.3.0, copied unchanged from https://github.com/evaleval/every_eval_ever,
file ``every_eval_ever/schemas/instance_level_eval.schema.json`` at commit
9bce4136e789ec006c62582f5f9d107d20f8b398 (last changed in 805ef1eb4859207dddf3ea0933644dfc8586b11d;
sha256 of the copy: b16b7fa7f0aa32763444179d94ffb2336ddb12c3fd2903835fe491666c1ff3e6), under the MIT
License quoted in :mod:`vlfair.report.eval_results`.

The records go into one JSON-lines file beside the run's aggregate record, which names it in its
``detailed_evaluation_results`` with its sha256 and line count (the same run always makes the same file).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from vlfair.compare.runs import Run

INSTANCE_SCHEMA_FILE = "every_eval_ever_instance.schema.json"
# the metrics whose samples are right (1) or wrong (0): each sample's is_correct is its value
RIGHT_OR_WRONG = frozenset({"accuracy", "retrieval_accuracy", "group_rate_gap", "cross_lingual_gap",
                            "gap_amplification", "retention_text_score"})  # vendored beside vlfair.report.eval_results'


def instance_schema() -> dict[str, Any]:
    """The vendored Every Eval Ever instance-level schema (0.3.0, the aggregate's commit and licence)."""
    from importlib import resources

    return json.loads(resources.files("vlfair.report").joinpath(INSTANCE_SCHEMA_FILE).read_text(encoding="utf-8"))


def instance_records(run: Run, record: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The instance-level records of ``run`` whose aggregate record is ``record`` (its evaluation id and
    model id are theirs)."""
    from vlfair.probes import probe_class
    from vlfair.probes.declared import members
    from vlfair.report.eval_results import SCHEMA_VERSION, task_id

    probe = probe_class(run.results["probe"])(run.results["probe_settings"])
    samples = run.samples
    frame = samples.frame
    ids = frame["id"].astype(str).to_numpy()
    base = {"schema_version": SCHEMA_VERSION, "evaluation_id": record["evaluation_id"],
            "model_id": record["model_info"]["id"], "evaluation_name": f"vlfair.{run.results['probe']}"}
    for member in members(samples, probe.declare(samples), probe.facts):
        labels = [member.group] if isinstance(member.group, str) else list(member.group or ())
        result_id = task_id(run.results["probe"], member.name, dict(member.subset))
        values = frame[list(member.columns)].to_numpy(float)[member.rows]
        labelled = {label: frame[label].astype(str).to_numpy()[member.rows] for label in labels}
        finite = values[:, 0][np.isfinite(values[:, 0])]
        # right or wrong per sample: an accuracy's 0s and 1s (a 1 in a group's column is a label, not a right answer)
        binary = member.name in RIGHT_OR_WRONG and bool(np.isin(finite, (0.0, 1.0)).all())
        for i, row in enumerate(member.rows):
            score = values[i, 0]
            if not math.isfinite(score):
                continue  # a value a run holds as missing enters no statistic
            shown = {column: _number(value) for column, value in zip(member.columns, values[i])}
            sample = {"id": ids[row], **{label: texts[i] for label, texts in labelled.items()}}
            yield {**base, "evaluation_result_id": result_id, "sample_id": str(ids[row]),
                   "interaction_type": "single_turn",
                   "input": {"raw": json.dumps(sample, ensure_ascii=False, sort_keys=True), "reference": []},
                   "output": {"raw": [json.dumps(shown, sort_keys=True)]},
                   "answer_attribution": [{"turn_idx": 0, "source": "output.raw", "extracted_value": repr(float(score)),
                                           "extraction_method": f"samples.parquet column {member.columns[0]!r}",
                                           "is_terminal": True}],
                   "evaluation": {"score": float(score), "is_correct": bool(binary and score == 1.0)},
                   "metadata": {"metric": member.name, "subset": json.dumps(dict(member.subset), sort_keys=True),
                                "is_correct": "the sample's answer is right (its value is 1)" if binary else
                                              "not applicable: a score, not a right or wrong answer (false)"}}


def _number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def instance_file(run: Run, record: dict[str, Any], path: str) -> tuple[str, dict[str, Any]] | None:
    """``run``'s instance records as one JSON-lines text, each line checked against the vendored instance
    schema: (the text; the aggregate record's ``detailed_evaluation_results`` for it, naming ``path``, its
    datastore path beside the record, with its sha256 and line count); None where no metric has per-sample
    values (a file of no lines is refused by Every Eval Ever's datastore)."""
    import jsonschema

    validator = jsonschema.Draft7Validator(instance_schema())
    lines = []
    for line in instance_records(run, record):
        validator.validate(line)
        lines.append(json.dumps(line, ensure_ascii=False, sort_keys=True))
    if not lines:
        return None
    text = "".join(line + "\n" for line in lines)
    return text, {"format": "jsonl", "file_path": path, "hash_algorithm": "sha256",
                  "checksum": hashlib.sha256(text.encode("utf-8")).hexdigest(), "total_rows": len(lines)}


__all__ = ["instance_file", "instance_records", "instance_schema"]
