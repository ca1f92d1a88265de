"""retention: text and image scores of name retention for public figures (vlfair)."""

import datasets
import evaluate

import vlfair.evaluate_support
import vlfair.measures

_CITATION = """\
@misc{flores_pfi,
  title = {The {P-FI} Benchmark: Probing Vision-Language Models for Societal Bias and Retention across Domains},
  author = {Flores, Veronica}
}
"""

_DESCRIPTION = """\
How well a vision-language model has retained who public figures are. Each image is scored
against every candidate name. Text score: share of images whose best-scoring name is their own.
Image score: share of names whose best-scoring image is one of their own (names with at least
one image). Intervals resample images within each name (stratified bootstrap). Scores within
2^-17 of the largest compared are ties, counted as the expected value under random tie-breaking (an
own name tied with t - 1 others counts 1/t), so no CPU's rounding changes a score.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `float` sequences): one image's scores against every candidate name.
    references (`list` of `int`): the index of each image's own name.
    bootstrap (`int`, defaults to 1000), confidence (`float`, defaults to 0.95), seed (`int`, defaults to 0).
Returns:
    text_score (`float`), text_score_ci (`list`); image_score (`float`), image_score_ci (`list`).
    num_images, num_names, num_candidates (`int`).
Examples:
    >>> import vlfair
    >>> retention = vlfair.load_metric("retention")
    >>> scores = [[0.9, 0.1, 0.0], [0.2, 0.7, 0.1], [0.1, 0.8, 0.1]]
    >>> results = retention.compute(predictions=scores, references=[0, 1, 2], bootstrap=0)
    >>> round(results["text_score"], 4), round(results["image_score"], 4)  # name 2's best images tie: 1/2
    (0.6667, 0.5)

    >>> results = retention.compute(predictions=[[1.0, 0.0], [0.0, 1.0]], references=[0, 1], bootstrap=0)
    >>> results["text_score"], results["image_score"]
    (1.0, 1.0)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Retention(vlfair.evaluate_support.CheckedInputs, evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Sequence(datasets.Value("float64")),
                                        "references": datasets.Value("int64")}),
        )

    def _compute(self, predictions, references, bootstrap=vlfair.measures.BOOTSTRAP,
                 confidence=vlfair.measures.CONFIDENCE, seed=vlfair.measures.SEED):
        # the typed result as a plain dict: evaluate's outputs are JSON-ready dicts
        return vlfair.measures.retention(predictions, references, bootstrap=bootstrap, confidence=confidence,
                                         seed=seed).to_dict()
