"""ranking_skew: MaxSkew@k, MinSkew@k, NDKL and Bias@k of text-to-image retrieval (vlfair)."""

import datasets
import evaluate

import vlfair.evaluate_support
import vlfair.measures

_CITATION = """\
@inproceedings{geyik2019fairness,
  title = {Fairness-Aware Ranking in Search and Recommendation Systems with Application to LinkedIn Talent Search},
  author = {Geyik, Sahin Cem and Ambler, Stuart and Kenthapadi, Krishnaram},
  booktitle = {Proceedings of the 25th ACM SIGKDD International Conference on Knowledge Discovery and Data Mining},
  year = {2019}
}
"""

_DESCRIPTION = """\
Skew of the images a text query retrieves. Items (images) are ranked by their score for the
query; the group shares in the top k are compared with a target distribution p*: uniform over
the groups present (default), the dataset's own shares ("dataset"), or given shares.
Skew@k(a) = ln(p_k(a) / p*(a)); MaxSkew@k and MinSkew@k are its extremes over groups.
Zero counts: by default Skew smooths counts by `smoothing` (default 0.5), so a group absent from
the top k gets a finite, strongly negative skew; `smoothing=0` reports -inf. `zero_count="dvl"`
is debias-vision-lang's convention: an absent group counts as 1/k and MaxSkew is at least 0. NDKL = (1/Z) sum_{i<=k}
KL(p_i || p*) / log2(i + 1) on raw counts (0 ln 0 = 0). Bias@k = (n_a - n_b) / k for two groups.
Several queries (rows) are averaged. Intervals: a bootstrap over items, stratified by group, every
query re-ranked in every resample, the percentiles moved by the point value minus the resamples'
mean (copies of one item side by side in a resample's ranking shift every top-k statistic).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `float` sequences): one query's scores against every item.
    item_groups (`list` of `str`): the group of every item (same order as the scores).
    k (`int`): size of the top list; at most the number of items.
    target (`str` or `dict`, defaults to "uniform"): "uniform", "dataset" or {group: share}.
    smoothing (`float`, defaults to 0.5 under zero_count="smoothed"): additive count smoothing for Skew.
    zero_count (`str`, defaults to "smoothed"): "smoothed", or "dvl" (an absent group counts as 1/k; MaxSkew >= 0).
    bootstrap (`int`, defaults to 1000): resamples of the items for the intervals; 0 turns them off.
    confidence (`float`, defaults to 0.95), seed (`int`, defaults to 0): the intervals' level and seed.
    bias_pair (`list` of 2 `str`, optional): the groups (a, b) of Bias@k; default the two groups in sorted order.
Returns:
    max_skew, min_skew, ndkl (`float`); bias_at_k (`float` or None when there are not two groups).
    skew (`dict`): mean Skew@k per group; target (`dict`); *_per_query (`list`).
    max_skew_ci, min_skew_ci, ndkl_ci, bias_at_k_ci (`list` of 2 `float`), skew_ci (`dict`): intervals.
Examples:
    >>> import vlfair
    >>> skew = vlfair.load_metric("ranking_skew")
    >>> results = skew.compute(predictions=[[0.9, 0.8, 0.7, 0.1]], item_groups=["man", "man", "woman", "woman"], k=2)
    >>> results["bias_at_k"], round(results["ndkl"], 4), round(results["min_skew"], 4)
    (1.0, 0.6931, -1.0986)

    >>> results = skew.compute(predictions=[[0.9, 0.8, 0.7, 0.1]], item_groups=["man", "woman", "man", "woman"], k=2)
    >>> results["bias_at_k"], results["max_skew"]
    (0.0, 0.0)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class RankingSkew(vlfair.evaluate_support.CheckedInputs, evaluate.Measurement):
    def _info(self):
        return evaluate.MeasurementInfo(
            module_type="measurement",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Sequence(datasets.Value("float64"))}),
            reference_urls=["https://arxiv.org/abs/1905.01989"],
        )

    def _compute(self, predictions, item_groups=None, k=None, target="uniform", smoothing=None, bias_pair=None,
                 zero_count="smoothed", bootstrap=vlfair.measures.BOOTSTRAP, confidence=vlfair.measures.CONFIDENCE,
                 seed=vlfair.measures.SEED):
        if item_groups is None or k is None:
            raise ValueError("item_groups and k are required: the group of every item and the size of the top list")
        # the typed result as a plain dict: evaluate's outputs are JSON-ready dicts
        return vlfair.measures.ranking_skew(predictions, item_groups, k, target=target, smoothing=smoothing,
                                            bias_pair=bias_pair, zero_count=zero_count, bootstrap=bootstrap,
                                            confidence=confidence, seed=seed).to_dict()
