"""cross_lingual_gap: accuracy per language and the gap between the best and worst (vlfair)."""

import evaluate

import vlfair.evaluate_support
import vlfair.measures

_CITATION = """\
@article{wang2021multilingual,
  title = {Assessing Multilingual Fairness in Pre-trained Multimodal Representations},
  author = {Wang, Jialu and Liu, Yang and Wang, Xin Eric},
  journal = {arXiv preprint arXiv:2106.06683},
  year = {2021}
}
"""

_DESCRIPTION = """\
Multilingual group fairness: a multilingual vision-language model should be equally accurate
whatever the language of its prompts. This module gives the accuracy in each language (share of
predictions equal to the reference), the cross-lingual gap max_l acc_l - min_l acc_l and, with a
pivot language, acc_pivot - acc_l for every language, all with stratified-bootstrap intervals.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): predicted labels (e.g. zero-shot classes).
    references (`list` of `str`): true labels.
    languages (`list` of `str`): the language of each prediction's prompts.
    pivot (`str`, optional): the language the others are compared with (e.g. "en").
    bootstrap (`int`, defaults to 1000), confidence (`float`, defaults to 0.95), seed (`int`, defaults to 0).
Returns:
    accuracy (`dict`): per language, in [0, 1]; accuracy_ci, counts (`dict`).
    gap (`float`), gap_ci (`list`): best minus worst accuracy; best_language, worst_language (`str`).
    gap_to_pivot (`dict` or None), gap_to_pivot_ci (`dict` or None): acc_pivot - acc_l.
Examples:
    The multilingual study's zero-shot accuracies: 50.4 % in English, 45.6 % in German.

    >>> import vlfair
    >>> gap = vlfair.load_metric("cross_lingual_gap")
    >>> predictions = ["a"] * 504 + ["b"] * 496 + ["a"] * 456 + ["b"] * 544
    >>> results = gap.compute(predictions=predictions, references=["a"] * 2000,
    ...     languages=["en"] * 1000 + ["de"] * 1000, pivot="en", bootstrap=0)
    >>> round(results["gap"], 3), results["accuracy"]["en"], round(results["gap_to_pivot"]["de"], 3)
    (0.048, 0.504, 0.048)

    >>> results = gap.compute(predictions=["x", "y", "x", "y"], references=["x", "y", "x", "y"],
    ...     languages=["en", "en", "fr", "fr"], bootstrap=0)
    >>> results["gap"], results["accuracy"]
    (0.0, {'en': 1.0, 'fr': 1.0})
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class CrossLingualGap(vlfair.evaluate_support.CheckedInputs, evaluate.Metric):
    NOT_GROUPS = ("predictions", "references")  # classes answered and true: a blank answer is a wrong one, not a group

    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=vlfair.evaluate_support.label_features({}, ["predictions", "references", "languages"]),
            reference_urls=["https://arxiv.org/abs/2106.06683"],
        )

    def _compute(self, predictions, references, languages, pivot=None, bootstrap=vlfair.measures.BOOTSTRAP,
                 confidence=vlfair.measures.CONFIDENCE, seed=vlfair.measures.SEED):
        # the typed result as a plain dict: evaluate's outputs are JSON-ready dicts
        return vlfair.measures.cross_lingual_gap(predictions, references, languages, pivot=pivot, bootstrap=bootstrap,
                                                 confidence=confidence, seed=seed).to_dict()
