"""group_rate_gap: accuracy per group and the largest gap between two groups, per language (vlfair)."""

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
Whether a model's errors depend on who is in the image: accuracy per group (e.g. gender
classification accuracy for each race) and the largest pairwise gap |acc(g1) - acc(g2)|. With
`languages`, everything is computed per language, as the multilingual study does for zero-shot
prompts in eight languages. Intervals are stratified bootstrap.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): predicted labels.
    references (`list` of `str`): true labels.
    groups (`list` of `str`): the group of the person in each image.
    languages (`list` of `str`, optional): compute per language.
    bootstrap (`int`, defaults to 1000), confidence (`float`, defaults to 0.95), seed (`int`, defaults to 0).
Returns:
    accuracy (`dict` by group, or by language then group), accuracy_ci, counts.
    gap (`float`, or `dict` by language), gap_pair (the best and worst group), gap_ci.
Examples:
    >>> import vlfair
    >>> rate_gap = vlfair.load_metric("group_rate_gap")
    >>> results = rate_gap.compute(predictions=["Male", "Male", "Female", "Male", "Female", "Female"],
    ...     references=["Male", "Male", "Female", "Female", "Female", "Female"],
    ...     groups=["White", "White", "White", "Black", "Black", "Black"], bootstrap=0)
    >>> results["accuracy"], round(results["gap"], 4), results["gap_pair"]
    ({'Black': 0.6666666666666666, 'White': 1.0}, 0.3333, ['White', 'Black'])

    >>> results = rate_gap.compute(predictions=["a", "b", "a", "a"], references=["a", "a", "a", "a"],
    ...     groups=["x", "x", "y", "y"], languages=["de", "de", "de", "de"], bootstrap=0)
    >>> results["gap"]
    {'de': 0.5}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class GroupRateGap(vlfair.evaluate_support.CheckedInputs, evaluate.Metric):
    NOT_GROUPS = ("predictions", "references")  # classes answered and true: a blank answer is a wrong one, not a group
    OPTIONAL = ("languages",)  # may be left out: filled with "" (no split by language)

    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=vlfair.evaluate_support.label_features({}, ["predictions", "references", "groups", "languages"]),
            reference_urls=["https://arxiv.org/abs/2106.06683"],
        )

    def _compute(self, predictions, references, groups, languages, bootstrap=vlfair.measures.BOOTSTRAP,
                 confidence=vlfair.measures.CONFIDENCE, seed=vlfair.measures.SEED):
        languages = vlfair.evaluate_support.optional_column(languages, "languages")  # None where left out
        # the typed result as a plain dict: evaluate's outputs are JSON-ready dicts
        return vlfair.measures.group_rate_gap(predictions, references, groups, languages=languages,
                                              bootstrap=bootstrap, confidence=confidence, seed=seed).to_dict()
