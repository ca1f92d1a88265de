"""Every bias measure of vlfair as a pure function of arrays; numpy and scipy only.

Each returns a flat dict (JSON-friendly: floats, lists, dicts of floats) holding at least the
keys of the evaluate table in DESIGN.md, plus confidence intervals (``<key>_ci``), sample
counts and p-values. Group statistics take ``bootstrap`` (stratified resamples; 0 turns
intervals off), ``confidence`` and ``seed``. Accuracies and shares are fractions in [0, 1].
Group labels are compared as strings. Bad input raises a ValueError that names the problem.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vlfair import stats
from vlfair.defaults import BOOTSTRAP, CONFIDENCE, PERMUTATIONS, SEED

MIN_GROUP_SIZE = 2  # never report a group mean from fewer samples


# ---- input validation -------------------------------------------------------------------
def _floats(values: Any, name: str) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers") from None
    if array.size == 0:
        raise ValueError(f"{name} is empty")
    bad = np.flatnonzero(~np.isfinite(array.reshape(array.shape[0], -1)).all(axis=1)) if array.ndim else []
    if len(bad):
        kind = "NaN" if np.isnan(array.reshape(array.shape[0], -1)[bad[0]]).any() else "an infinite value"
        more = f" (and {len(bad) - 1} more rows)" if len(bad) > 1 else ""
        raise ValueError(f"{name} has {kind} at row {int(bad[0])}" + more)
    return array


def _labels(values: Any, name: str) -> np.ndarray:
    """Labels as text; a missing one (None, NaN) is an error naming its rows, never a group "None"."""
    values = list(values)
    missing = [row for row, v in enumerate(values) if v is None or (isinstance(v, float) and math.isnan(v))]
    if missing:
        raise ValueError(f"{name} is missing (None or NaN) at row {missing[0]}"
                         + (f" and {len(missing) - 1} more rows" if len(missing) > 1 else "")
                         + "; drop those rows or give them a label")
    labels = np.asarray([str(v) for v in values])
    if labels.size == 0:
        raise ValueError(f"{name} is empty")
    return labels


def check_options(**options: Any) -> None:
    """Validate the options every measure shares, naming the option and its valid range:
    ``bootstrap`` and ``n_permutations`` whole numbers >= 0 (0: off), ``confidence`` in (0, 1),
    ``seed`` None or a whole number."""
    for name, value in options.items():
        whole = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        if name in ("bootstrap", "n_permutations") and not (whole and value >= 0):
            raise ValueError(f"{name} must be a whole number >= 0 (0 turns it off), got {value!r}")
        if name == "confidence" and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                         and 0 < value < 1):
            raise ValueError(f"confidence must be a number in (0, 1), e.g. 0.95, got {value!r}")
        if name == "seed" and value is not None and not whole:
            raise ValueError(f"seed must be a whole number or None, got {value!r}")


def _same_length(**arrays: Any) -> None:
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError("inputs differ in length: " + ", ".join(f"{n}={length}" for n, length in lengths.items()))


def _require_present(group: str, names: list[str], role: str, column: str = "references") -> None:
    if group not in names:
        raise ValueError(f"{role} {group!r} does not occur in {column}; groups present: {names}")


def _require_sizes(names: list[str], counts: np.ndarray, what: str = "group") -> None:
    small = [(n, int(c)) for n, c in zip(names, counts) if c < MIN_GROUP_SIZE]
    if small:
        listed = ", ".join(f"{n!r} ({c})" for n, c in small)
        raise ValueError(f"{what} with fewer than {MIN_GROUP_SIZE} samples: {listed}; "
                         f"a mean needs at least {MIN_GROUP_SIZE}")


def _interval(ci: np.ndarray | None, index: Any = None) -> list[float] | None:
    if ci is None:
        return None
    lo, hi = (ci[0], ci[1]) if index is None else (ci[0][index], ci[1][index])
    return [float(lo), float(hi)]


class _GroupMeans:
    """Group means of one score column, with stratified-bootstrap resamples of them."""

    def __init__(self, values: np.ndarray, labels: np.ndarray, bootstrap: int, seed: int | None, what: str = "group"):
        self.names, self.codes = stats.encode_groups(labels)
        self.counts = np.bincount(self.codes, minlength=len(self.names))
        _require_sizes(self.names, self.counts, what)
        self.values = values
        self.means = stats.group_means(values, self.codes, len(self.names))
        self.samples = None
        if bootstrap:
            self.samples = stats.bootstrap_group_means(values, self.codes, len(self.names), bootstrap, seed)

    def index(self, name: str) -> int:
        return self.names.index(name)

    def interval(self, derived: Any, confidence: float) -> np.ndarray | None:
        """CI of ``derived(means)`` where ``means`` is (B, G) over the resamples."""
        if self.samples is None:
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            return stats.percentile_interval(derived(self.samples), confidence)

    def as_dict(self, values: np.ndarray) -> dict[str, float]:
        """Plain Python per group: counts stay ints, means floats; numpy label types become Python's."""
        return {(n.item() if hasattr(n, "item") else n): v.item() for n, v in zip(self.names, values)}

    def cis(self, confidence: float) -> dict[str, list[float]] | None:
        ci = self.interval(lambda m: m, confidence)
        return None if ci is None else {n: _interval(ci, i) for i, n in enumerate(self.names)}


# ---- bias_ratio, group_score_gap, trait_anova -------------------------------------------
def bias_ratio(scores: Sequence[float], groups: Sequence[Any], protected_group: Any, reference_group: Any,
               bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE, seed: int | None = SEED,
               n_permutations: int = PERMUTATIONS) -> dict[str, Any]:
    """The bias ratio b = mean(score | protected) / mean(score | reference); 1.0 is neutral.

    ``p_value``: permutation test of the two groups' mean difference (two-sided).
    """
    check_options(bootstrap=bootstrap, confidence=confidence, seed=seed, n_permutations=n_permutations)
    values, labels = _floats(scores, "predictions"), _labels(groups, "references")
    _same_length(predictions=values, references=labels)
    negative = np.flatnonzero(values < 0)
    if negative.size:  # a ratio of means says nothing when scores can cancel or flip its sign
        raise ValueError(f"predictions must be >= 0 for a ratio of means (e.g. CLIP scores, probabilities); row "
                         f"{int(negative[0])} is {values[negative[0]]:g}"
                         + (f" and {negative.size - 1} more rows are negative" if negative.size > 1 else "")
                         + "; for signed scores use group_score_gap")
    for option, value in (("protected_group", protected_group), ("reference_group", reference_group)):
        if value is None:
            raise ValueError(f"{option} is required: name the group to put in the "
                             + ("numerator" if option == "protected_group" else "denominator"))
    protected, reference = str(protected_group), str(reference_group)
    names = sorted(set(labels.tolist()))
    _require_present(protected, names, "protected_group")
    _require_present(reference, names, "reference_group")
    if protected == reference:
        raise ValueError(f"protected_group and reference_group are the same group ({protected!r})")
    g = _GroupMeans(values, labels, bootstrap, seed)
    p_i, r_i = g.index(protected), g.index(reference)
    if g.means[r_i] == 0:
        raise ValueError(f"the mean score of reference_group {reference!r} is 0: the ratio is undefined")
    ci = g.interval(lambda m: m[:, p_i] / m[:, r_i], confidence)
    pair = np.isin(labels, [protected, reference])
    test = None
    if n_permutations:
        codes = (labels[pair] == protected).astype(np.int64)
        test = stats.permutation_test(values[pair], codes, stats.mean_difference, n_permutations, seed)
    return {
        "bias_ratio": float(g.means[p_i] / g.means[r_i]), "bias_ratio_ci": _interval(ci), **_p_fields(test),
        "protected_group": protected, "reference_group": reference,
        "group_means": g.as_dict(g.means), "group_means_ci": g.cis(confidence), "group_counts": g.as_dict(g.counts),
        "confidence": confidence,
    }


def group_score_gap(scores: Sequence[float], groups: Sequence[Any], bootstrap: int = BOOTSTRAP,
                    confidence: float = CONFIDENCE, seed: int | None = SEED,
                    n_permutations: int = PERMUTATIONS) -> dict[str, Any]:
    """Group means, the most associated group, and the gap between the highest and lowest mean.

    ``p_value`` tests the range of group means against label permutations, so it accounts for
    the top and bottom groups being picked after looking at the data.
    """
    check_options(bootstrap=bootstrap, confidence=confidence, seed=seed, n_permutations=n_permutations)
    values, labels = _floats(scores, "predictions"), _labels(groups, "references")
    _same_length(predictions=values, references=labels)
    g = _GroupMeans(values, labels, bootstrap, seed)
    if len(g.names) < 2:
        raise ValueError(f"a gap needs at least 2 groups; references hold only {g.names}")
    top, bottom = int(np.argmax(g.means)), int(np.argmin(g.means))
    test = stats.permutation_test(values, g.codes, stats.mean_range, n_permutations, seed) if n_permutations else None
    ratio = float(g.means[bottom] / g.means[top]) if g.means[top] != 0 else float("nan")
    return {
        "group_means": g.as_dict(g.means), "group_means_ci": g.cis(confidence), "group_counts": g.as_dict(g.counts),
        "top_group": g.names[top], "bottom_group": g.names[bottom],
        "max_gap": float(g.means[top] - g.means[bottom]),
        "max_gap_ci": _interval(g.interval(lambda m: m.max(axis=1) - m.min(axis=1), confidence)),
        "min_max_ratio": ratio,
        "min_max_ratio_ci": _interval(g.interval(lambda m: m.min(axis=1) / m.max(axis=1), confidence)),
        **_p_fields(test), "confidence": confidence,
    }


def _p_fields(test: stats.PermutationResult | None) -> dict[str, Any]:
    """p_value, its log10 (finite below float64's 1e-308) and the method that gave it."""
    if test is None:
        return {"p_value": None, "log10_p_value": None, "p_value_method": None}
    return {"p_value": test.p_value, "log10_p_value": test.log10_p_value, "p_value_method": test.method}


def trait_anova(scores: Sequence[float], groups: Sequence[Any], strata: Sequence[Any] | None = None,
                welch: bool = False, bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                seed: int | None = SEED) -> dict[str, Any]:
    """One-way ANOVA of scores across groups (e.g. races), optionally within each stratum (e.g.
    gender): F, p, degrees of freedom, eta squared and group means with CIs.

    Without strata every key holds one value; with strata every key holds a dict by stratum.
    ``welch=True`` runs Welch's ANOVA (unequal variances).
    """
    check_options(bootstrap=bootstrap, confidence=confidence, seed=seed)
    values, labels = _floats(scores, "predictions"), _labels(groups, "references")
    _same_length(predictions=values, references=labels)
    if strata is None:
        return _anova_one(values, labels, welch, bootstrap, confidence, seed)
    strata_labels = _labels(strata, "strata")
    _same_length(predictions=values, strata=strata_labels)
    per = {s: _anova_one(values[strata_labels == s], labels[strata_labels == s], welch, bootstrap, confidence, seed,
                         where=f" in stratum {s!r}")
           for s in sorted(set(strata_labels.tolist()))}
    keys = next(iter(per.values())).keys()
    return {key: {s: result[key] for s, result in per.items()} for key in keys} | {"strata": list(per)}


def _anova_one(values, labels, welch, bootstrap, confidence, seed, where: str = "") -> dict[str, Any]:
    try:
        g = _GroupMeans(values, labels, bootstrap, seed)
        result = stats.one_way_anova([values[g.codes == i] for i in range(len(g.names))], welch=welch)
    except ValueError as exc:
        raise ValueError(f"{exc}{where}") from None
    return {
        "f_statistic": result.f_statistic, "p_value": result.p_value, "log10_p_value": result.log10_p_value,
        "df_between": result.df_between,
        "df_within": result.df_within, "eta_squared": result.eta_squared, "welch": welch,
        "group_means": g.as_dict(g.means), "group_means_ci": g.cis(confidence), "group_counts": g.as_dict(g.counts),
    }


# ---- word_influence ---------------------------------------------------------------------
def parse_variant(variant: Any, num_words: int, row: int) -> tuple[int, ...]:
    """``"0,2"`` / ``(0, 2)`` / ``""`` -> sorted word positions; positions must be < num_words."""
    if isinstance(variant, str):
        parts = [p.strip() for p in variant.split(",") if p.strip()]
        try:
            positions = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"variants row {row}: {variant!r} is not a comma-separated list of word positions") \
                from None
    else:
        positions = []
        for p in variant:  # 0.7 is not a position (int() would quietly make it 0)
            if isinstance(p, bool) or not isinstance(p, (int, np.integer, float)) or float(p) != int(p):
                raise ValueError(f"variants row {row}: {p!r} is not a word position (a whole number)")
            positions.append(int(p))
    for p in positions:
        if not 0 <= p < num_words:
            raise ValueError(f"variants row {row}: word position {p} is outside 0..{num_words - 1} "
                             f"(num_words={num_words})")
    if len(set(positions)) != len(positions):
        raise ValueError(f"variants row {row}: {variant!r} repeats a word position")
    return tuple(sorted(positions))


def word_influence(predictions: Sequence[int], variants: Sequence[Any], num_words: int, k: int = 1,
                   confidence: float = CONFIDENCE) -> dict[str, Any]:
    """k-level word influence on the share of images classified as the target group.

    P(R) = share of images with prediction 1 when the words in R are replaced. Influence of
    word i at level k = mean over R within the other words, |R| = k - 1, of P(R) - P(R + {i}).
    Level 1 is P(original) - P(i replaced). ``levels`` holds every level whose variants are
    all present; ``shapley`` is the mean of the n levels when all are present (it equals the
    Shapley value of the game v(S) = -P(S)). ``ci_half_width``: Hoeffding half-width at
    ``confidence`` for the least-sampled variant that level k uses.
    """
    check_options(confidence=confidence)
    if not isinstance(num_words, (int, np.integer)) or num_words < 1:
        raise ValueError(f"num_words must be a positive integer, got {num_words!r}")
    if not 1 <= k <= num_words:
        raise ValueError(f"k must be in 1..num_words={num_words}, got {k}")
    values = _floats(predictions, "predictions")
    if not np.isin(values, (0.0, 1.0)).all():
        row = int(np.flatnonzero(~np.isin(values, (0.0, 1.0)))[0])
        raise ValueError(f"predictions must be 0 or 1 (1 = classified as the target group); row {row} is {values[row]}")
    _same_length(predictions=values, variants=list(variants))
    keys = [parse_variant(v, num_words, row) for row, v in enumerate(variants)]
    sums: dict[tuple[int, ...], float] = {}
    counts: dict[tuple[int, ...], int] = {}
    for key, value in zip(keys, values):
        sums[key] = sums.get(key, 0.0) + value
        counts[key] = counts.get(key, 0) + 1
    shares = {key: sums[key] / counts[key] for key in sums}

    def level(level_k: int) -> tuple[list[float], int] | None:
        result, least = [], math.inf
        for word in range(num_words):
            others = [w for w in range(num_words) if w != word]
            terms = []
            for subset in itertools.combinations(others, level_k - 1):
                with_word = tuple(sorted(subset + (word,)))
                if subset not in shares or with_word not in shares:
                    return None
                terms.append(shares[subset] - shares[with_word])
                least = min(least, counts[subset], counts[with_word])
            result.append(float(np.mean(terms)))
        return result, int(least)

    levels = {j: level(j) for j in range(1, num_words + 1)}
    if levels[k] is None:
        missing = _missing_variant(shares, num_words, k)
        raise ValueError(f"level {k} needs variant {_describe(missing)}, which has no images")
    complete = {j: v for j, v in levels.items() if v is not None}
    shapley = ([float(np.mean([complete[j][0][w] for j in complete])) for w in range(num_words)]
               if len(complete) == num_words else None)
    influence, least = complete[k]
    return {
        "influence": influence, "k": k, "ci_half_width": stats.hoeffding_half_width(least, 1 - confidence),
        "levels": {str(j): v[0] for j, v in complete.items()},
        "levels_ci_half_width": {str(j): stats.hoeffding_half_width(v[1], 1 - confidence) for j, v in complete.items()},
        "shapley": shapley, "shares": {",".join(map(str, key)): float(s) for key, s in sorted(shares.items())},
        "images_per_variant": {",".join(map(str, key)): int(c) for key, c in sorted(counts.items())},
        "min_images_per_variant": least, "num_words": num_words, "confidence": confidence,
    }


def _missing_variant(shares: Mapping, num_words: int, k: int) -> tuple[int, ...]:
    for word in range(num_words):
        others = [w for w in range(num_words) if w != word]
        for subset in itertools.combinations(others, k - 1):
            for key in (subset, tuple(sorted(subset + (word,)))):
                if key not in shares:
                    return key
    raise AssertionError("unreachable: level was incomplete")


def _describe(variant: tuple[int, ...]) -> str:
    if not variant:
        return '"" (the original prompt)'
    return f'"{",".join(map(str, variant))}" (words {list(variant)} replaced)'


# ---- cross_lingual_gap, group_rate_gap ---------------------------------------------------
def _correct(predictions: Sequence[Any], references: Sequence[Any]) -> np.ndarray:
    preds, refs = _labels(predictions, "predictions"), _labels(references, "references")
    _same_length(predictions=preds, references=refs)
    return (preds == refs).astype(float)


def cross_lingual_gap(predictions: Sequence[Any], references: Sequence[Any], languages: Sequence[Any],
                      pivot: Any = None, bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                      seed: int | None = SEED) -> dict[str, Any]:
    """Accuracy per language; gap = max - min accuracy; ``gap_to_pivot`` = acc(pivot) - acc(l)."""
    check_options(bootstrap=bootstrap, confidence=confidence, seed=seed)
    correct = _correct(predictions, references)
    langs = _labels(languages, "languages")
    _same_length(predictions=correct, languages=langs)
    g = _GroupMeans(correct, langs, bootstrap, seed, what="language")
    if len(g.names) < 2:  # as group_score_gap refuses one group: one language has no gap
        raise ValueError(f"a cross-lingual gap needs at least 2 languages; languages hold only {g.names}")
    result = {
        "accuracy": g.as_dict(g.means), "accuracy_ci": g.cis(confidence), "counts": g.as_dict(g.counts),
        "gap": float(g.means.max() - g.means.min()),
        "gap_ci": _interval(g.interval(lambda m: m.max(axis=1) - m.min(axis=1), confidence)),
        "best_language": g.names[int(np.argmax(g.means))], "worst_language": g.names[int(np.argmin(g.means))],
        "pivot": None, "gap_to_pivot": None, "gap_to_pivot_ci": None, "confidence": confidence,
    }
    if pivot is not None:
        pivot = str(pivot)
        _require_present(pivot, g.names, "pivot language", "languages")
        p = g.index(pivot)
        ci = g.interval(lambda m: m[:, [p]] - m, confidence)
        result.update(pivot=pivot, gap_to_pivot=g.as_dict(g.means[p] - g.means),
                      gap_to_pivot_ci=None if ci is None else {n: _interval(ci, i) for i, n in enumerate(g.names)})
    return result


def group_rate_gap(predictions: Sequence[Any], references: Sequence[Any], groups: Sequence[Any],
                   languages: Sequence[Any] | None = None, bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
                   seed: int | None = SEED) -> dict[str, Any]:
    """Accuracy per group and the largest pairwise gap |acc(g1) - acc(g2)|, per language if given.

    Without languages every key holds one value; with languages every key holds a dict by language.
    """
    check_options(bootstrap=bootstrap, confidence=confidence, seed=seed)
    correct = _correct(predictions, references)
    group_labels = _labels(groups, "groups")
    _same_length(predictions=correct, groups=group_labels)
    if languages is None:
        return _rate_gap_one(correct, group_labels, bootstrap, confidence, seed)
    langs = _labels(languages, "languages")
    _same_length(predictions=correct, languages=langs)
    per = {lang: _rate_gap_one(correct[langs == lang], group_labels[langs == lang], bootstrap, confidence, seed,
                               where=f" in language {lang!r}")
           for lang in sorted(set(langs.tolist()))}
    keys = next(iter(per.values())).keys()
    return {key: {lang: r[key] for lang, r in per.items()} for key in keys} | {"languages": list(per)}


def _rate_gap_one(correct, labels, bootstrap, confidence, seed, where: str = "") -> dict[str, Any]:
    try:
        g = _GroupMeans(correct, labels, bootstrap, seed)
    except ValueError as exc:
        raise ValueError(f"{exc}{where}") from None
    if len(g.names) < 2:
        raise ValueError(f"a gap needs at least 2 groups; groups{where} hold only {g.names}")
    top, bottom = int(np.argmax(g.means)), int(np.argmin(g.means))
    return {
        "accuracy": g.as_dict(g.means), "accuracy_ci": g.cis(confidence), "counts": g.as_dict(g.counts),
        "gap": float(g.means[top] - g.means[bottom]), "gap_pair": [g.names[top], g.names[bottom]],
        "gap_ci": _interval(g.interval(lambda m: m.max(axis=1) - m.min(axis=1), confidence)),
        "confidence": confidence,
    }


# ---- individual_fairness ----------------------------------------------------------------
def individual_fairness(image_embeddings: Any, text_embeddings_a: Any, text_embeddings_b: Any,
                        tolerance: float = 1e-6) -> dict[str, Any]:
    """Individual fairness across two languages' captions of the same images.

    ratio = |cos(v, t_a) - cos(v, t_b)| / ||t_a - t_b|| on unnormalised text features;
    epsilon = max ratio. Every sample must satisfy ratio <= 2 / (||t_a|| + ||t_b||) (the
    Dunkl-Williams inequality); ``bound_holds`` checks it up to ``tolerance``. Pairs with
    identical text features (distance 0) have no ratio: they are left out and counted.
    """
    images = _matrix(image_embeddings, "image_embeddings")
    a, b = _matrix(text_embeddings_a, "text_embeddings_a"), _matrix(text_embeddings_b, "text_embeddings_b")
    _same_length(image_embeddings=images, text_embeddings_a=a, text_embeddings_b=b)
    if not images.shape[1] == a.shape[1] == b.shape[1]:
        raise ValueError(f"embedding sizes differ: images {images.shape[1]}, a {a.shape[1]}, b {b.shape[1]}")
    norm_v, norm_a, norm_b = (np.linalg.norm(x, axis=1) for x in (images, a, b))
    for name, norms in (("image_embeddings", norm_v), ("text_embeddings_a", norm_a), ("text_embeddings_b", norm_b)):
        if (norms == 0).any():
            raise ValueError(f"{name} has a zero vector at row {int(np.flatnonzero(norms == 0)[0])}: "
                             "its cosine is undefined")
    v = images / norm_v[:, None]
    gap = np.abs((v * a).sum(axis=1) / norm_a - (v * b).sum(axis=1) / norm_b)
    distance = np.linalg.norm(a - b, axis=1)
    bound = 2.0 / (norm_a + norm_b)
    usable = distance > 0
    if not usable.any():
        raise ValueError("every caption pair has identical text features: no ratio is defined")
    ratio = gap[usable] / distance[usable]
    violations = ratio > bound[usable] * (1 + tolerance) + tolerance
    rows = np.flatnonzero(usable)
    return {
        "epsilon": float(ratio.max()), "epsilon_row": int(rows[int(np.argmax(ratio))]),
        "mean_ratio": float(ratio.mean()), "median_ratio": float(np.median(ratio)),
        "bound_holds": bool(not violations.any()), "num_bound_violations": int(violations.sum()),
        "max_bound": float(bound.max()), "num_pairs": int(usable.sum()), "num_identical_pairs": int((~usable).sum()),
        "ratios": ratio.tolist(), "similarity_gaps": gap[usable].tolist(), "text_distances": distance[usable].tolist(),
    }


def _matrix(values: Any, name: str) -> np.ndarray:
    array = _floats(values, name)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (one vector per row), got shape {array.shape}")
    return array


# ---- retention --------------------------------------------------------------------------
def retention(scores: Any, references: Sequence[int], bootstrap: int = BOOTSTRAP, confidence: float = CONFIDENCE,
              seed: int | None = SEED) -> dict[str, Any]:
    """Name retention of public figures.

    ``scores[i, j]``: similarity of image i to candidate name j; ``references[i]``: the index
    of image i's own name. Text score = share of images whose best-scoring name is theirs;
    image score = share of names (those with at least one image) whose best-scoring image is
    one of theirs. Ties go to the lowest index. CIs resample images within each name; where every
    name has a single image there is nothing to resample, so the CIs are None and ``ci_note`` says why.
    """
    check_options(bootstrap=bootstrap, confidence=confidence, seed=seed)
    matrix = _matrix(scores, "predictions")
    refs = np.asarray(references)
    _same_length(predictions=matrix, references=refs)
    if not np.issubdtype(refs.dtype, np.integer):
        raise ValueError(f"references must be integer name indices, got {refs.dtype}")
    outside = np.flatnonzero((refs < 0) | (refs >= matrix.shape[1]))
    if outside.size:
        raise ValueError(f"references row {int(outside[0])} is {int(refs[outside[0]])}, outside the "
                         f"{matrix.shape[1]} candidate names")
    names = np.unique(refs)

    def scores_of(rows: np.ndarray) -> tuple[float, float]:
        text = float((matrix[rows].argmax(axis=1) == refs[rows]).mean())
        image = float((refs[rows][matrix[rows][:, names].argmax(axis=0)] == names).mean())
        return text, image

    text_score, image_score = scores_of(np.arange(refs.size))
    result = {"text_score": text_score, "image_score": image_score, "text_score_ci": None, "image_score_ci": None,
              "num_images": int(refs.size), "num_names": int(names.size), "num_candidates": int(matrix.shape[1]),
              "confidence": confidence}
    if bootstrap and np.bincount(refs).max() < 2:  # one image per name: every resample is the data itself
        result["ci_note"] = ("no interval: every name has one image, so resampling images within names cannot vary "
                             "(a zero-width interval would claim a certainty the data does not have)")
    elif bootstrap:
        samples = stats.bootstrap_samples(lambda idx: np.array([scores_of(rows) for rows in idx]), refs, bootstrap,
                                          seed)
        ci = stats.percentile_interval(samples, confidence)
        result.update(text_score_ci=_interval(ci, 0), image_score_ci=_interval(ci, 1))
    return result


# ---- ranking_skew -----------------------------------------------------------------------
def ranking_skew(scores: Any, item_groups: Sequence[Any], k: int, target: str | Mapping[str, float] = "uniform",
                 smoothing: float = 0.5, bias_pair: Sequence[Any] | None = None) -> dict[str, Any]:
    """Skew of the top-k items a text query retrieves, averaged over queries.

    ``scores``: (queries, items) or one query's (items,). Items are ranked by score, ties by
    index. Target p*: "uniform" over the groups present, "dataset" (each group's share of all
    items), or a dict of shares. Skew@k(a) = ln(p_k(a) / p*(a)); MaxSkew@k and MinSkew@k are its
    max and min over groups. Zero counts: a group absent from the top k would have Skew -inf,
    so Skew uses counts smoothed by ``smoothing`` (default 0.5, Jeffreys): p_k(a) =
    (n_a + s) / (k + s |A|); ``smoothing=0`` reports -inf. NDKL = (1/Z) sum_{i<=k}
    KL(p_i || p*) / log2(i + 1) with Z = sum 1/log2(i + 1), on raw counts and 0 ln 0 = 0, so it
    is >= 0 and 0 when every prefix matches the target. Bias@k = (n_a - n_b) / k for two groups
    (``bias_pair``, default the two groups in sorted order), in [-1, 1].
    """
    matrix = _floats(scores, "predictions")
    matrix = matrix[None, :] if matrix.ndim == 1 else matrix
    if matrix.ndim != 2:
        raise ValueError(f"predictions must be one score per item, per query; got shape {matrix.shape}")
    groups = _labels(item_groups, "item_groups")
    if groups.size != matrix.shape[1]:
        raise ValueError(f"item_groups has {groups.size} entries but each query scores {matrix.shape[1]} items")
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if k > groups.size:
        raise ValueError(f"k={k} is larger than the number of items ({groups.size})")
    if smoothing < 0:
        raise ValueError(f"smoothing must be >= 0, got {smoothing}")
    names, codes = stats.encode_groups(groups)
    p_star = _target(target, names, codes)
    order = np.argsort(-matrix, axis=1, kind="stable")[:, :k]
    ranked = codes[order]  # (Q, k)
    prefix_counts = np.stack([np.cumsum(ranked == g, axis=1) for g in range(len(names))], axis=2)  # (Q, k, G)
    counts_k = prefix_counts[:, -1, :].astype(float)
    with np.errstate(divide="ignore"):
        skew = np.log((counts_k + smoothing) / (k + smoothing * len(names)) / p_star)
    positions = np.arange(1, k + 1)
    shares = prefix_counts / positions[None, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(shares > 0, shares * np.log(shares / p_star), 0.0).sum(axis=2)
    discount = 1 / np.log2(positions + 1)
    ndkl = (kl * discount).sum(axis=1) / discount.sum()
    bias = None
    pair = [str(g) for g in bias_pair] if bias_pair is not None else (names if len(names) == 2 else None)
    if pair is not None:
        if len(pair) != 2:
            raise ValueError(f"bias_pair must name two groups, got {pair}")
        for group in pair:
            _require_present(group, names, "bias_pair group", "item_groups")
        bias = (counts_k[:, names.index(pair[0])] - counts_k[:, names.index(pair[1])]) / k
    return {
        "max_skew": float(skew.max(axis=1).mean()), "min_skew": float(skew.min(axis=1).mean()),
        "ndkl": float(ndkl.mean()), "bias_at_k": None if bias is None else float(bias.mean()),
        "skew": {n: float(skew[:, i].mean()) for i, n in enumerate(names)},
        "max_skew_per_query": skew.max(axis=1).tolist(), "min_skew_per_query": skew.min(axis=1).tolist(),
        "ndkl_per_query": ndkl.tolist(), "bias_at_k_per_query": None if bias is None else bias.tolist(),
        "target": {n: float(p) for n, p in zip(names, p_star)}, "bias_pair": pair, "k": int(k),
        "num_queries": int(matrix.shape[0]), "smoothing": smoothing,
    }


def _target(target: str | Mapping[str, float], names: list[str], codes: np.ndarray) -> np.ndarray:
    if isinstance(target, str):
        if target == "uniform":
            return np.full(len(names), 1 / len(names))
        if target == "dataset":
            return np.bincount(codes, minlength=len(names)) / codes.size
        raise ValueError(f"target must be 'uniform', 'dataset' or a dict of group shares, got {target!r}")
    shares = {str(g): float(p) for g, p in target.items()}
    missing = [n for n in names if n not in shares]
    if missing:
        raise ValueError(f"target gives no share for groups {missing}")
    p = np.array([shares[n] for n in names])
    if (p <= 0).any() or not math.isclose(sum(shares.values()), 1.0, abs_tol=1e-6):
        raise ValueError(f"target shares must be positive for every group present and sum to 1, got {shares}")
    return p


MEASURES = {
    "bias_ratio": bias_ratio, "group_score_gap": group_score_gap, "trait_anova": trait_anova,
    "word_influence": word_influence, "cross_lingual_gap": cross_lingual_gap, "group_rate_gap": group_rate_gap,
    "individual_fairness": individual_fairness, "retention": retention, "ranking_skew": ranking_skew,
}
