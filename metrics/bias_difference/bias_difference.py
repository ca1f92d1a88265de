"""bias_difference: two models' bias ratios and group gaps on the same rows, paired (vlfair)."""

import datasets
import evaluate

import vlfair.evaluate_support
import vlfair.measures

_CITATION = """\
@book{efron1993bootstrap,
  title = {An Introduction to the Bootstrap},
  author = {Efron, Bradley and Tibshirani, Robert J.},
  publisher = {Chapman and Hall/CRC},
  year = {1993}
}
@misc{flores_pfi,
  title = {The {P-FI} Benchmark: Probing Vision-Language Models for Societal Bias and Retention across Domains},
  author = {Flores, Veronica}
}
"""

_DESCRIPTION = """\
Compares two models scored on the same rows (the same images, in the same order): the bias ratio
b = mean(score | protected group) / mean(score | reference group) of each model (1 is neutral) and
its largest group gap, max - min of the group means (0 is neutral), their differences A - B with
a paired bootstrap interval (both models on the same resampled rows, stratified by group) and a
paired permutation test (each row's two scores swapped or not). A verdict names the less biased
model (closer to the neutral value) only where the interval of A - B excludes 0 and p < 1 - confidence.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions1 (`list` of `float`): model A's score per row (e.g. a CLIP score of an image).
    predictions2 (`list` of `float`): model B's score per row: the same rows in the same order.
    references (`list` of `str`): the group of each row.
    protected_group (`str`): the group in the ratio's numerator.
    reference_group (`str`): the group in the ratio's denominator.
    bootstrap (`int`, defaults to 1000): paired stratified resamples for the intervals; 0 turns them
        (and the verdicts) off.
    confidence (`float`, defaults to 0.95): level of the intervals; a verdict also needs p < 1 - confidence.
    seed (`int`, defaults to 0): seed of the bootstrap and the permutation test.
    n_permutations (`int`, defaults to 10000): swaps for the p-values (exact over all 2^N when 2^N fits); 0 turns
        them off.
Returns:
    ratio_a, ratio_b (`float`): each model's bias ratio; ratio_difference (`float`): A - B.
    ratio_difference_ci (`list` of 2 `float`): its paired bootstrap interval.
    ratio_distance_difference (`float`), ratio_distance_difference_ci: |A - 1| - |B - 1| (< 0: A closer to 1).
    ratio_p_value, ratio_log10_p_value (`float`), ratio_p_value_method (`str`): the paired test.
    ratio_verdict (`str`): "A less biased", "B less biased", "differ; neither closer to no bias" or
        "no difference detected".
    max_gap_a, max_gap_b, max_gap_difference, max_gap_difference_ci, max_gap_p_value, max_gap_log10_p_value,
        max_gap_p_value_method, max_gap_verdict: the same for the largest gap between group means.
    protected_group, reference_group (`str`), group_counts (`dict`), confidence (`float`).
Examples:
    Model A scores women's portraits lower than men's; model B, on the same eight portraits, much less so.
    Eight rows allow 2^8 = 256 swaps, so the p-value is exact.

    >>> import vlfair
    >>> bias_difference = vlfair.load_metric("bias_difference")
    >>> results = bias_difference.compute(predictions1=[70.0, 72.0, 68.0, 71.0, 82.0, 80.0, 83.0, 81.0],
    ...     predictions2=[78.0, 79.0, 77.0, 80.0, 81.0, 80.0, 82.0, 79.0],
    ...     references=["women"] * 4 + ["men"] * 4, protected_group="women", reference_group="men")
    >>> round(results["ratio_a"], 4), round(results["ratio_b"], 4), round(results["ratio_difference"], 4)
    (0.862, 0.9752, -0.1132)
    >>> [round(x, 4) for x in results["ratio_difference_ci"]], results["ratio_p_value"]
    ([-0.126, -0.101], 0.015625)
    >>> results["ratio_verdict"], results["max_gap_difference"], results["max_gap_verdict"]
    ('B less biased', 9.25, 'B less biased')

    A model against itself: no difference, a zero-width interval and p = 1.

    >>> scores = [70.0, 72.0, 68.0, 71.0, 82.0, 80.0, 83.0, 81.0]
    >>> results = bias_difference.compute(predictions1=scores, predictions2=scores,
    ...     references=["women"] * 4 + ["men"] * 4, protected_group="women", reference_group="men")
    >>> results["ratio_difference"], results["ratio_difference_ci"], results["ratio_p_value"]
    (0.0, [0.0, 0.0], 1.0)
    >>> results["ratio_verdict"]
    'no difference detected'
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class BiasDifference(vlfair.evaluate_support.CheckedInputs, evaluate.Comparison):
    def _info(self):
        return evaluate.ComparisonInfo(
            module_type="comparison",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=vlfair.evaluate_support.label_features(
                {"predictions1": datasets.Value("float64"), "predictions2": datasets.Value("float64")}, ["references"]),
        )

    def _compute(self, predictions1, predictions2, references, protected_group=None, reference_group=None,
                 bootstrap=vlfair.measures.BOOTSTRAP, confidence=vlfair.measures.CONFIDENCE,
                 seed=vlfair.measures.SEED, n_permutations=vlfair.measures.PERMUTATIONS):
        # the typed result as a plain dict: evaluate's outputs are JSON-ready dicts
        return vlfair.measures.bias_difference(predictions1, predictions2, references, protected_group,
                                               reference_group, bootstrap=bootstrap, confidence=confidence,
                                               seed=seed, n_permutations=n_permutations).to_dict()
