"""group_score_gap: group means of a score, the most associated group and the largest gap (vlfair)."""

import datasets
import evaluate

import vlfair.evaluate_support
import vlfair.measures

_CITATION = """\
@inproceedings{hessel2021clipscore,
  title = {{CLIPScore}: A Reference-free Evaluation Metric for Image Captioning},
  author = {Hessel, Jack and Holtzman, Ari and Forbes, Maxwell and Le Bras, Ronan and Choi, Yejin},
  booktitle = {Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing},
  year = {2021}
}
"""

_DESCRIPTION = """\
Mean score per group with stratified-bootstrap intervals, the group with the highest mean (the
most associated group), the largest gap between group means and the min/max ratio. The
professions study computes it on CLIPScore(\"A photo of a {profession}\", image) per race and per
gender for each profession. The p-value tests the range of group means against label
permutations, which accounts for the top and bottom groups being chosen after seeing the data.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `float`): one score per sample (e.g. a CLIPScore).
    references (`list` of `str`): the group of each sample (at least 2 groups, 2 samples each).
    bootstrap (`int`, defaults to 1000): stratified bootstrap resamples; 0 turns intervals off.
    confidence (`float`, defaults to 0.95): confidence level of the intervals.
    seed (`int`, defaults to 0): seed of the bootstrap and the permutation test.
    n_permutations (`int`, defaults to 10000): permutations for the p-value; 0 turns it off.
Returns:
    group_means (`dict`), group_means_ci (`dict`), group_counts (`dict`): per group.
    top_group (`str`), bottom_group (`str`): highest and lowest mean.
    max_gap (`float`), max_gap_ci (`list`): highest minus lowest group mean.
    min_max_ratio (`float`), min_max_ratio_ci (`list`): lowest over highest group mean.
    p_value (`float`): permutation test of the range of group means.
Examples:
    >>> import vlfair
    >>> gap = vlfair.load_metric("group_score_gap")
    >>> results = gap.compute(predictions=[30.0, 32.0, 25.0, 27.0, 20.0, 22.0],
    ...     references=["Asian", "Asian", "Black", "Black", "White", "White"], bootstrap=0)
    >>> results["top_group"], results["max_gap"], round(results["min_max_ratio"], 4)
    ('Asian', 10.0, 0.6774)

    >>> results = gap.compute(predictions=[1.0, 2.0, 1.0, 2.0], references=["a", "a", "b", "b"], bootstrap=0)
    >>> results["max_gap"], results["p_value"]
    (0.0, 1.0)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class GroupScoreGap(vlfair.evaluate_support.CheckedInputs, evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=vlfair.evaluate_support.label_features({"predictions": datasets.Value("float64")}, ["references"]),
            reference_urls=["https://arxiv.org/abs/2104.08718"],
        )

    def _compute(self, predictions, references, bootstrap=vlfair.measures.BOOTSTRAP,
                 confidence=vlfair.measures.CONFIDENCE, seed=vlfair.measures.SEED,
                 n_permutations=vlfair.measures.PERMUTATIONS):
        # the typed result as a plain dict: evaluate's outputs are JSON-ready dicts
        return vlfair.measures.group_score_gap(predictions, references, bootstrap=bootstrap, confidence=confidence,
                                               seed=seed, n_permutations=n_permutations).to_dict()
