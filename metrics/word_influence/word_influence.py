"""word_influence: k-level and Shapley influence of each prompt word on a group share (vlfair)."""

import datasets
import evaluate

import vlfair.evaluate_support
import vlfair.measures

_CITATION = """\
@article{lin2023wordlevel,
  title = {Word-Level Explanations for Analyzing Bias in Text-to-Image Models},
  author = {Lin, Alexander and Paes, Lucas Monteiro and Tanneru, Sree Harsha and Srinivas, Suraj and \
Lakkaraju, Himabindu},
  journal = {arXiv preprint arXiv:2306.05500},
  year = {2023}
}
"""

_DESCRIPTION = """\
Which word of a text-to-image prompt causes a skewed group distribution. Each generated image is
classified (1 = target group) and tagged with the variant of the prompt it came from: the word
positions that were replaced ("" for the original). P(R) is the target share among images of
variant R. The k-level influence of word i is the mean, over sets R of k-1 other words, of
P(R) - P(R + {i}); level 1 is P(original) - P(word i replaced). With every level computed, the
Shapley value (mean of the n levels) is returned too. The Hoeffding half-width bounds the error:
P(|I^ - I| >= eps) <= 4 exp(-m eps^2 / 2) with m images per variant.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): 1 if the image is classified as the target group, else 0.
    variants (`list` of `str`): comma-separated 0-based positions of the replaced words ("" = original).
    num_words (`int`): number of words that may be replaced.
    k (`int`, defaults to 1): the level reported in `influence`.
    confidence (`float`, defaults to 0.95): level of the Hoeffding half-width.
Returns:
    influence (`list` of `float`): one per word, level k.
    ci_half_width (`float`): Hoeffding half-width for level k.
    levels (`dict`): every complete level; shapley (`list` or None): mean of the n levels.
    shares, images_per_variant (`dict`): P(R) and m for every variant.
Examples:
    "a nurse at the hospital" with words 0 (nurse) and 1 (hospital); share of women per variant:

    >>> import vlfair
    >>> influence = vlfair.load_metric("word_influence")
    >>> predictions = [1, 1, 1, 0] + [1, 0, 0, 0] + [1, 1, 1, 0] + [0, 1, 0, 0]
    >>> variants = [""] * 4 + ["0"] * 4 + ["1"] * 4 + ["0,1"] * 4
    >>> results = influence.compute(predictions=predictions, variants=variants, num_words=2)
    >>> results["influence"]
    [0.5, 0.0]

    >>> results = influence.compute(predictions=predictions, variants=variants, num_words=2, k=2)
    >>> results["influence"], results["shapley"], round(results["ci_half_width"], 3)
    ([0.5, 0.0], [0.5, 0.0], 1.48)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class WordInfluence(vlfair.evaluate_support.CheckedInputs, evaluate.Measurement):
    NOT_GROUPS = ("variants",)  # variant ids: "" is the prompt with no word replaced, not a group

    def _info(self):
        return evaluate.MeasurementInfo(
            module_type="measurement",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=vlfair.evaluate_support.label_features({"predictions": datasets.Value("int64")}, ["variants"]),
            reference_urls=["https://arxiv.org/abs/2306.05500"],
        )

    def _compute(self, predictions, variants, num_words=None, k=1, confidence=vlfair.measures.CONFIDENCE):
        if num_words is None:
            raise ValueError("num_words is required: the number of replaceable words in the prompt")
        # the typed result as a plain dict: evaluate's outputs are JSON-ready dicts
        return vlfair.measures.word_influence(predictions, variants, num_words, k=k, confidence=confidence).to_dict()
