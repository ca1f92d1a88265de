"""trait_anova: one-way ANOVA of trait confidences across groups, optionally per stratum (vlfair)."""

import datasets
import evaluate

import vlfair.evaluate_support
import vlfair.measures

_CITATION = """\
@inproceedings{karkkainen2021fairface,
  title = {FairFace: Face Attribute Dataset for Balanced Race, Gender, and Age for Bias Measurement and Mitigation},
  author = {K{\\"a}rkk{\\"a}inen, Kimmo and Joo, Jungseock},
  booktitle = {Proceedings of the IEEE/CVF Winter Conference on Applications of Computer Vision},
  year = {2021}
}
"""

_DESCRIPTION = """\
One-way ANOVA (F = MSB / MSW, equal to scipy.stats.f_oneway, also for unequal group sizes) of a
per-image score across groups, with eta squared as effect size and group means with bootstrap
intervals. The FairFace-traits study runs it on the confidence of a positive trait over its
negative ("a smart person" vs "a dumb person") across races within each gender and across
genders within each race: pass the second attribute as `strata`. `welch=True` runs Welch's ANOVA
for unequal variances. p-values come from the F survival function, so tiny values are kept.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `float`): one score per sample (e.g. a trait confidence).
    references (`list` of `str`): the group compared (e.g. race).
    strata (`list` of `str`, optional): run one ANOVA per stratum (e.g. gender).
    welch (`bool`, defaults to False): Welch's ANOVA instead of the classic one.
    bootstrap (`int`, defaults to 1000), confidence (`float`, defaults to 0.95), seed (`int`, defaults to 0):
        intervals of the group means.
Returns:
    f_statistic, p_value, df_between, df_within, eta_squared (`float`, or `dict` by stratum).
    group_means, group_means_ci, group_counts (`dict`, or `dict` of them by stratum).
Examples:
    >>> import vlfair
    >>> anova = vlfair.load_metric("trait_anova")
    >>> results = anova.compute(predictions=[0.71, 0.74, 0.69, 0.62, 0.60, 0.65, 0.70, 0.72],
    ...     references=["East Asian"] * 3 + ["Black"] * 3 + ["White"] * 2, bootstrap=0)
    >>> round(results["f_statistic"], 3), round(results["p_value"], 4), results["df_between"], results["df_within"]
    (13.495, 0.0097, 2.0, 5.0)

    >>> results = anova.compute(predictions=[0.7, 0.8, 0.6, 0.5, 0.7, 0.7, 0.6, 0.6],
    ...     references=["Black", "Black", "White", "White"] * 2, strata=["Female"] * 4 + ["Male"] * 4, bootstrap=0)
    >>> sorted(results["p_value"]), round(results["f_statistic"]["Female"], 2)
    (['Female', 'Male'], 8.0)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class TraitAnova(vlfair.evaluate_support.CheckedInputs, evaluate.Metric):
    OPTIONAL = ("strata",)  # may be left out: filled with "" (no stratification)

    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=vlfair.evaluate_support.label_features({"predictions": datasets.Value("float64")},
                                                            ["references", "strata"]),
            reference_urls=["https://github.com/joojs/fairface"],
        )

    def _compute(self, predictions, references, strata, welch=False, bootstrap=vlfair.measures.BOOTSTRAP,
                 confidence=vlfair.measures.CONFIDENCE, seed=vlfair.measures.SEED):
        strata = vlfair.evaluate_support.optional_column(strata, "strata")  # None where left out
        # the typed result as a plain dict: evaluate's outputs are JSON-ready dicts
        return vlfair.measures.trait_anova(predictions, references, strata=strata, welch=welch, bootstrap=bootstrap,
                                           confidence=confidence, seed=seed).to_dict()
