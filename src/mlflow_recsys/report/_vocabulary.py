"""The one table of words for the methods: each test, side (alternative), interval, correction and Wilcoxon zero rule,
by the setting's value, in the forms the report surfaces use.

Forms: ``methods`` (the Methods paragraph; for no correction, its whole clause), ``label`` (settings lines, captions,
the printed procedure; a test's may hold ``{B}`` and ``{zeros}``) and ``result`` (the result sentence; ``p`` for a
correction: how its adjusted p-value is named, ``rate`` what it controls, ``split`` why a row whose interval excludes 0
is not significant).
"""

from __future__ import annotations

_WILCOXON = "a Wilcoxon signed-rank test on the per-user differences (Wilcoxon, 1945), its p-value from the "

WORDS: dict[str, dict[object, dict[str, str]]] = {
    "test_method": {
        "randomization": {
            "methods": "a paired sign-flip randomization test",
            "label": "paired sign-flip randomization test (B = {B:,} random sign patterns)",
            "result": "paired randomization test with {B:,} resamples",
        },
        "randomization-exact": {
            "methods": "an exact paired sign-flip randomization test (all sign patterns enumerated)",
            "label": "exact paired sign-flip randomization test (all sign patterns enumerated)",
            "result": "exact paired randomization test over all sign patterns",
        },
        "bootstrap": {
            "methods": "a paired null-centred bootstrap test",
            "label": "paired null-centred bootstrap test (B = {B:,} resamples)",
            "result": "paired bootstrap test with {B:,} resamples",
        },
        "t": {
            "methods": "a paired t-test on the per-user differences",
            "label": "paired t-test",
            "result": "paired t-test",
        },
        "wilcoxon": {
            "methods": _WILCOXON + "normal approximation of the signed-rank sum, with the variance corrected for "
            "tied ranks and no continuity correction",
            "label": "Wilcoxon signed-rank test, normal approximation ({zeros})",
            "result": "Wilcoxon signed-rank test (normal approximation)",
        },
        "wilcoxon-exact": {
            "methods": _WILCOXON + "exact null distribution of the signed-rank sum",
            "label": "Wilcoxon signed-rank test, exact null distribution (no zero or tied differences)",
            "result": "Wilcoxon signed-rank test (exact null distribution)",
        },
        "sign": {
            "methods": "a sign test (the exact binomial test of the users the candidate won on against those it "
            "lost on, ties dropped; Dixon and Mood, 1946)",
            "label": "sign test (exact binomial, ties dropped)",
            "result": "sign test",
        },
    },
    "zero_method": {
        "wilcox": {
            "methods": "users with a zero difference were dropped before ranking",
            "label": "zero differences dropped before ranking",
        },
        "pratt": {
            "methods": "zero differences were ranked with the others and their ranks then dropped (Pratt, 1959)",
            "label": "zero differences ranked, then their ranks dropped",
        },
        "zsplit": {
            "methods": "the ranks of zero differences were split equally between the two signs",
            "label": "ranks of zero differences split between the signs",
        },
    },
    "alternative": {
        "two-sided": {"methods": "two-sided", "label": "two-sided"},
        "greater": {"methods": "one-sided (candidate higher)", "label": "one-sided, alternative: candidate higher"},
        "less": {"methods": "one-sided (candidate lower)", "label": "one-sided, alternative: candidate lower"},
    },
    # A hypothesis' "label" names it in a settings line; "yes", "no" and "open" are its row's decision (direction
    # "non-inferior", "inferior", "inconclusive"; "equivalent", "not equivalent", "inconclusive"), {margin} filled in;
    # "split" an inconclusive row whose interval (the bootstrap's) would have passed where its test did not, "by test"
    # a passing row whose interval would not have.
    "hypothesis": {
        "superiority": {"label": "superiority"},
        "non-inferiority": {
            "methods": "non-inferiority: H0 difference <= -delta against H1 difference > -delta, one-sided at alpha "
            "(Blackwelder, 1982)",
            "label": "non-inferiority (H1: difference > -delta)",
            "yes": "non-inferior within {margin}",
            "no": "inferior by more than {margin}",
            "open": "not shown non-inferior",
            "split": "not shown non-inferior (the interval clears -{margin}, but the test's p is above alpha)",
            "by test": "non-inferior within {margin} (by the test's p; the interval reaches -{margin})",
        },
        "equivalence": {
            "methods": "equivalence: two one-sided tests, H0 difference <= -delta and H0 difference >= delta, each at "
            "alpha, the larger p-value reported (TOST; Schuirmann, 1987)",
            "label": "equivalence (TOST, H1: -delta < difference < delta)",
            "yes": "equivalent within \u00b1{margin}",
            "no": "not equivalent (outside \u00b1{margin})",
            "open": "not shown equivalent",
            "split": "not shown equivalent (the interval lies within \u00b1{margin}, but the test's p is above alpha)",
            "by test": "equivalent within \u00b1{margin} (by the test's p; the interval reaches \u00b1{margin})",
        },
    },
    "interval_method": {
        "percentile": {"methods": "percentile", "label": "percentile", "result": ""},
        "bca": {"methods": "bias-corrected and accelerated (BCa)", "label": "BCa", "result": "BCa "},
        "max-T": {
            "methods": "simultaneous studentized max-T bootstrap interval (one draw of the users for the whole family, "
            "one critical value for all its hypotheses; Beran, 1988; Romano and Wolf, 2005)",
            "label": "simultaneous max-T",
            "result": "simultaneous ",
        },
    },
    # A superiority row whose interval and adjusted p-value part ways: "reaches zero" a significant row whose interval
    # holds 0 (its not significant counterpart is its correction's "split").
    "disagreement": {
        "reaches zero": {
            "label": "significant by its adjusted p, although its interval (from the bootstrap, not the test) "
            "reaches 0",
        },
    },
    "correction": {
        "holm": {
            "methods": "Holm's step-down procedure (Holm, 1979)",
            "label": "Holm",
            "p": "Holm-adjusted p",
            "rate": "family-wise error rate under arbitrary dependence",
            "split": "the interval, which is not adjusted for the family, excludes 0, but the Holm-adjusted p is "
            "above alpha",
        },
        "bonferroni": {
            "methods": "the Bonferroni correction (each p-value multiplied by the size of its family)",
            "label": "Bonferroni",
            "p": "Bonferroni-adjusted p",
            "rate": "family-wise error rate under arbitrary dependence",
            "split": "the interval, which is not adjusted for the family, excludes 0, but the Bonferroni-adjusted p "
            "is above alpha",
        },
        "maxt": {
            "methods": "the Westfall-Young max-T step-down procedure (Westfall and Young, 1993) on the family's joint "
            "sign flips: one sign per user and resample flips that user's difference in every hypothesis of the "
            "family, and each hypothesis is standardized by the spread of its own null",
            "label": "max-T",
            "p": "max-T-adjusted p",
            "rate": "family-wise error rate, reading the dependence between its hypotheses off the joint resamples "
            "instead of assuming the worst",
            "split": "the simultaneous interval (from the bootstrap) excludes 0, but the max-T-adjusted p (from sign "
            "flips) is above alpha",
        },
        None: {
            "methods": "p-values were not adjusted for multiple comparisons",
            "label": "no",
            "p": "p",
            "split": "the bootstrap interval excludes 0, but the test's p is above alpha: the two are computed "
            "differently and can part ways at the edge",
        },
    },
}


def words(setting: str, value: object, form: str = "label", **fields: object) -> str:
    """The words for ``value`` of ``setting`` in ``form``, its ``{fields}`` filled in.

    E.g. ``words("test_method", "randomization", B=9999)`` is ``"paired sign-flip randomization test (B = 9,999 random
    sign patterns)"``. Raises KeyError for a value or form the table does not hold.
    """
    return WORDS[setting][value][form].format(**fields)
