"""The statistics options every measure, probe and evaluate module shares, declared once.

Pure Python (no numpy): the probes' settings models read these without loading scipy.
"""

BOOTSTRAP = 1000  # bootstrap resamples of an interval (0: no interval)
CONFIDENCE = 0.95  # confidence level of every interval
SEED = 0  # seed of every resampling and permutation
PERMUTATIONS = 10_000  # relabellings of a permutation test (0: no p-value)
# the multiple-testing corrections that decide "detected" over a run's tests (vlfair.verdicts), and the default:
# Holm's, which bounds the chance of any false alarm in the run (the family-wise error rate) at 1 - confidence
CORRECTIONS = ("holm", "bh", "none")
CORRECTION = "holm"
# the most of each a run may ask for: beyond, a run would not finish (40 rows and n_permutations = 1e13
# enumerated all 2^40 relabellings, past 2 GB), and no interval or p-value needs more
MAX_BOOTSTRAP = 1_000_000
MAX_PERMUTATIONS = 10_000_000
# the settings that change only intervals, p-values and verdicts, never a measured value: runs that differ
# in them alone are of one family (comparable), and vlfair rescore may change them
INTERVAL_SETTINGS = ("bootstrap", "confidence", "n_permutations", "correction")

MIN_GROUP_SIZE = 2  # never report a group mean from fewer samples (the measures and the declared metrics alike)

__all__ = ["BOOTSTRAP", "CONFIDENCE", "CORRECTION", "CORRECTIONS", "INTERVAL_SETTINGS", "MAX_BOOTSTRAP",
           "MAX_PERMUTATIONS", "MIN_GROUP_SIZE", "PERMUTATIONS", "SEED"]
