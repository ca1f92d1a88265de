"""individual_fairness: multilingual individual fairness epsilon and its bound (vlfair)."""

import datasets
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
Multilingual individual fairness: captions of the same image in two languages should relate to
the image equally. For image v and captions t_a, t_b (unnormalised text features),
ratio = |cos(v, t_a) - cos(v, t_b)| / ||t_a - t_b||, and epsilon is the largest ratio: the model
is epsilon-individually fair. Every sample must satisfy ratio <= 2 / (||t_a|| + ||t_b||) (the
Dunkl-Williams inequality); `bound_holds` checks it. Pairs with identical features are counted
and left out (their ratio is 0/0).
"""

_KWARGS_DESCRIPTION = """
Args:
    image_embeddings (`list` of `float` sequences): one image embedding per sample.
    text_embeddings_a (`list` of `float` sequences): unnormalised text features, language a.
    text_embeddings_b (`list` of `float` sequences): unnormalised text features, language b.
    tolerance (`float`, defaults to 1e-6): numerical slack of the bound check.
Returns:
    epsilon (`float`), epsilon_row (`int`): the largest ratio and its sample.
    mean_ratio, median_ratio (`float`); bound_holds (`bool`), num_bound_violations (`int`), max_bound (`float`).
    ratios, similarity_gaps, text_distances (`list`): per sample, for plots.
Examples:
    >>> import vlfair
    >>> fairness = vlfair.load_metric("individual_fairness")
    >>> results = fairness.compute(image_embeddings=[[1.0, 0.0]], text_embeddings_a=[[2.0, 0.0]],
    ...     text_embeddings_b=[[0.0, 2.0]])
    >>> round(results["epsilon"], 4), results["bound_holds"], results["max_bound"]
    (0.3536, True, 0.5)

    >>> results = fairness.compute(image_embeddings=[[1.0, 0.0], [0.0, 1.0]],
    ...     text_embeddings_a=[[1.0, 1.0], [1.0, 0.0]], text_embeddings_b=[[1.0, 1.0], [2.0, 0.0]])
    >>> results["epsilon"], results["num_pairs"], results["num_identical_pairs"]
    (0.0, 1, 1)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class IndividualFairness(vlfair.evaluate_support.CheckedInputs, evaluate.Measurement):
    def _info(self):
        vector = datasets.Sequence(datasets.Value("float64"))
        return evaluate.MeasurementInfo(
            module_type="measurement",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"image_embeddings": vector, "text_embeddings_a": vector,
                                        "text_embeddings_b": vector}),
            reference_urls=["https://arxiv.org/abs/2106.06683"],
        )

    def _compute(self, image_embeddings, text_embeddings_a, text_embeddings_b, tolerance=1e-6):
        # the typed result as a plain dict: evaluate's outputs are JSON-ready dicts
        return vlfair.measures.individual_fairness(image_embeddings, text_embeddings_a, text_embeddings_b,
                                                   tolerance=tolerance).to_dict()
