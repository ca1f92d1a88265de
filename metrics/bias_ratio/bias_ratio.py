"""bias_ratio: ratio of a protected group's mean score to a reference group's (vlfair)."""

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
Bias ratio b = mean(score | protected group) / mean(score | reference group), as the public-figures
(P-FI) study reports gender bias in how strongly a vision-language model associates portraits with
their category (e.g. the mean score of the class "politician" for women vs men politicians). 1.0
is neutral; below 1 the protected group scores lower. Comes with a stratified-bootstrap confidence interval and a
permutation-test p-value for the difference of the two means.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `float`): one score per sample (e.g. a CLIP score of an image).
    references (`list` of `str`): the group of each sample.
    protected_group (`str`): the group in the numerator.
    reference_group (`str`): the group in the denominator.
    bootstrap (`int`, defaults to 1000): stratified bootstrap resamples for the interval; 0 turns it off.
    confidence (`float`, defaults to 0.95): confidence level of the interval.
    seed (`int`, defaults to 0): seed of the bootstrap and the permutation test.
    n_permutations (`int`, defaults to 10000): permutations for the p-value; 0 turns it off.
Returns:
    bias_ratio (`float`): mean(protected) / mean(reference).
    bias_ratio_ci (`list` of 2 `float`): its confidence interval.
    p_value (`float`): permutation test of the two groups' mean difference.
    group_means (`dict`), group_means_ci (`dict`), group_counts (`dict`): per group.
Examples:
    The P-FI study's Table 1, ALBEF: mean score (x100) of the class "politician" over all its
    politicians, 70.13 for women and 81.85 for men.

    >>> import vlfair
    >>> bias_ratio = vlfair.load_metric("bias_ratio")
    >>> results = bias_ratio.compute(predictions=[70.13, 70.13, 81.85, 81.85],
    ...     references=["women", "women", "men", "men"], protected_group="women", reference_group="men")
    >>> round(results["bias_ratio"], 4)
    0.8568

    Identical groups are neutral:

    >>> results = bias_ratio.compute(predictions=[0.2, 0.4, 0.2, 0.4], references=["a", "a", "b", "b"],
    ...     protected_group="a", reference_group="b", bootstrap=0)
    >>> results["bias_ratio"], results["bias_ratio_ci"]
    (1.0, None)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class BiasRatio(vlfair.evaluate_support.CheckedInputs, evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=vlfair.evaluate_support.label_features({"predictions": datasets.Value("float64")}, ["references"]),
        )

    def _compute(self, predictions, references, protected_group=None, reference_group=None,
                 bootstrap=vlfair.measures.BOOTSTRAP, confidence=vlfair.measures.CONFIDENCE,
                 seed=vlfair.measures.SEED, n_permutations=vlfair.measures.PERMUTATIONS):
        # the typed result as a plain dict: evaluate's outputs are JSON-ready dicts
        return vlfair.measures.bias_ratio(predictions, references, protected_group, reference_group,
                                          bootstrap=bootstrap, confidence=confidence, seed=seed,
                                          n_permutations=n_permutations).to_dict()
