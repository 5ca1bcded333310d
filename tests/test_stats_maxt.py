"""The max-T correction (issue 32, point 3): Westfall-Young step-down adjusted p-values from joint sign flips, and the
simultaneous bootstrap intervals, each held to values computed here independently: by enumerating every sign vector of
a tiny data set, by hand, and by the limits the procedure must reach (one hypothesis; two identical metrics)."""

import itertools
import warnings

import numpy as np
import pytest

from mlflow_recsys.stats import ComparisonSettings, adjust_p_values, compare_models
from mlflow_recsys.stats._maxt import simultaneous_intervals, step_down_p_values
from simulated import result

ALPHA = 0.05


def _compare(models: dict[str, np.ndarray], metrics, **settings):
    """``models``: name -> per-user values ``(n_users, len(metrics))``; compared with max-T unless told otherwise."""
    results = {name: result({m: v[:, j] for j, m in enumerate(metrics)}) for name, v in models.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compare_models(results, metrics=list(metrics), **{"correction": "maxt", **settings})


def _enumerated_step_down(d: np.ndarray, alternative: str = "two-sided") -> np.ndarray:
    """Westfall & Young (1993) Algorithm 2.8 written out over every sign vector of the users, with plain loops: the
    statistic of a hypothesis is its mean difference over its null's standard deviation."""
    n, H = d.shape
    null = np.array([[sum(s * d[u, h] for u, s in enumerate(signs)) / n for h in range(H)]
                     for signs in itertools.product((1, -1), repeat=n)])  # fmt: skip
    sd = null.std(axis=0)
    t, star = d.mean(axis=0) / sd, null / sd
    if alternative == "two-sided":
        t, star = np.abs(t), np.abs(star)
    order = sorted(range(H), key=lambda h: -t[h])
    p, running = {}, 0.0
    for i, h in enumerate(order):
        rest = order[i:]
        count = sum(1 for row in star if max(row[k] for k in rest) >= t[h] - 1e-12)
        running = max(running, count / len(star))
        p[h] = running
    return np.array([p[h] for h in range(H)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adjusted_p_values_equal_an_enumeration_of_every_sign_vector(seed):
    rng = np.random.default_rng(seed)
    n, metrics = 9, ("a", "b", "c")
    base = rng.uniform(0.2, 0.8, (n, 3))
    common = rng.normal(0.05, 0.1, (n, 1))  # the metrics move together, as nDCG and recall do
    cand = base + common + rng.normal(0, 0.04, (n, 3))
    report = _compare({"A": base, "B": cand}, metrics, reference="A", n_resamples=999)
    rows = report.comparisons
    d = np.column_stack([row.unit_differences for row in rows])
    assert [row.adjusted_p_value for row in rows] == pytest.approx(_enumerated_step_down(d), abs=1e-12)
    # Every sign vector is used (2**9 = 512 <= B), so the unadjusted p-values are the exact ones too.
    assert {row.test_method for row in rows} == {"randomization-exact"}


def test_step_down_by_hand():
    observed = np.array([3.0, 1.0, 2.0])
    null = np.array([[0.5, 2.5, 0.1], [3.5, 0.2, 0.3], [0.1, 0.4, 2.2], [1.2, 1.1, 0.9]])
    # Ordered 3 (h0), 2 (h2), 1 (h1). h0: max of all >= 3 in row 1 only -> 1/4. h2: max(h2, h1) >= 2 in rows 0 and 2
    # -> 2/4. h1: h1 >= 1 in rows 0 and 3 -> 2/4, kept at least the step before: 2/4.
    p = step_down_p_values(observed, null, "two-sided", np.zeros(3), monte_carlo=False)
    assert p.tolist() == [0.25, 0.5, 0.5]
    p = step_down_p_values(observed, null, "two-sided", np.zeros(3), monte_carlo=True)
    assert p.tolist() == [2 / 5, 3 / 5, 3 / 5]
    # One-sided "less" reads the statistics negated: -observed are all below every -null but two.
    p = step_down_p_values(-observed, -null, "less", np.zeros(3), monte_carlo=False)
    assert p.tolist() == [0.25, 0.5, 0.5]


def test_one_hypothesis_gets_its_unadjusted_p_value_back():
    rng = np.random.default_rng(4)
    base = rng.uniform(0.2, 0.8, (300, 1))
    cand = base + rng.normal(0.01, 0.1, (300, 1))
    (row,) = _compare({"A": base, "B": cand}, ["m"], reference="A").comparisons
    assert row.test_method == "randomization"  # Monte Carlo
    assert row.adjusted_p_value == row.p_value


def test_two_identical_metrics_pay_nothing_where_holm_doubles():
    rng = np.random.default_rng(5)
    base = rng.uniform(0.2, 0.8, (400, 1))
    cand = base + rng.normal(0.012, 0.1, (400, 1))
    twice = {"A": np.hstack([base, base]), "B": np.hstack([cand, cand])}
    maxt = _compare(twice, ["m", "copy"], reference="A").comparisons
    holm = _compare(twice, ["m", "copy"], reference="A", correction="holm").comparisons
    assert [r.adjusted_p_value for r in maxt] == [maxt[0].p_value] * 2
    assert [r.adjusted_p_value for r in holm] == [min(1.0, 2 * holm[0].p_value)] * 2


def test_adjusted_p_values_are_at_least_the_unadjusted_and_grow_with_the_family():
    rng = np.random.default_rng(6)
    base = rng.uniform(0.2, 0.8, (500, 4))
    models = {"A": base, "B": base + rng.normal(0.01, 0.1, (500, 4)), "C": base + rng.normal(0, 0.1, (500, 4))}
    metrics = ("m1", "m2", "m3", "m4")
    pair = _compare({k: models[k] for k in "AB"}, metrics, reference="A").comparisons
    three = _compare(models, metrics, reference="A").comparisons
    assert all(r.adjusted_p_value >= r.p_value for r in pair)
    # B's hypotheses in a family that also holds C's: the maximum runs over more, so no p-value falls (to Monte Carlo
    # noise: the family of three models draws from its own stream).
    b_in_three = [r for r in three if r.candidate == "B"]
    assert all(
        big.adjusted_p_value >= small.adjusted_p_value - 0.01 for big, small in zip(b_in_three, pair, strict=True)
    )


def test_the_same_seed_gives_the_same_numbers_and_families_are_adjusted_apart():
    rng = np.random.default_rng(7)
    base = rng.uniform(0.2, 0.8, (200, 3))
    models = {"A": base, "B": base + rng.normal(0.01, 0.1, (200, 3)), "C": base + rng.normal(0, 0.1, (200, 3))}
    first = _compare(models, ("p", "s1", "s2"), reference="A", primary="p")
    second = _compare(models, ("p", "s1", "s2"), reference="A", primary="p")
    assert first.to_frame().equals(second.to_frame())
    primary = [r for r in first.comparisons if r.metric == "p"]
    assert {r.family for r in primary} == {"primary"} and {r.family_size for r in primary} == {2}
    assert {r.interval_method for r in first.comparisons} == {"max-T"}


def test_simultaneous_intervals_by_hand():
    estimates = np.array([1.0, 10.0])
    # Deviations (-1, 1, 0, 0) and (0, 0, -2, 2): standard errors sqrt(2/3) and sqrt(8/3); studentized maxima per
    # replicate sqrt(3/2) each, so the critical value is sqrt(3/2) and the half-widths 1 and 2.
    replicates = estimates + np.array([[-1.0, 0.0], [1.0, 0.0], [0.0, -2.0], [0.0, 2.0]])
    low, high = simultaneous_intervals(estimates, replicates, 0.05, "two-sided")
    assert low == pytest.approx([0.0, 8.0]) and high == pytest.approx([2.0, 12.0])
    low, high = simultaneous_intervals(estimates, replicates, 0.05, "greater")
    assert low == pytest.approx([0.0, 8.0]) and np.isinf(high).all()
    # A constant hypothesis keeps [estimate, estimate] and leaves the others' critical value alone.
    low, high = simultaneous_intervals(
        np.append(estimates, 3.0), np.column_stack([replicates, np.full(4, 3.0)]), 0.05, "two-sided"
    )
    assert low == pytest.approx([0.0, 8.0, 3.0]) and high == pytest.approx([2.0, 12.0, 3.0])


def test_simultaneous_intervals_are_wider_than_each_and_hold_the_estimate():
    rng = np.random.default_rng(8)
    base = rng.uniform(0.2, 0.8, (300, 3))
    models = {"A": base, "B": base + rng.normal(0.01, 0.1, (300, 3))}
    maxt = _compare(models, ("x", "y", "z"), reference="A").comparisons
    plain = _compare(models, ("x", "y", "z"), reference="A", correction=None).comparisons
    for m, p in zip(maxt, plain, strict=True):
        assert m.ci_low <= m.difference <= m.ci_high
        assert m.ci_high - m.ci_low > p.ci_high - p.ci_low


@pytest.mark.parametrize(
    "setting, value, expectation",
    [
        ("test_method", "t", "'randomization' with correction 'maxt'"),
        ("interval_method", "bca", "'percentile' with correction 'maxt'"),
    ],
)
def test_max_t_needs_the_randomization_test_and_its_own_intervals(setting, value, expectation):
    with pytest.raises(ValueError, match=rf"^{setting}: expected {expectation}.*found '{value}'"):
        ComparisonSettings(reference="A", correction="maxt", **{setting: value})


def test_max_t_refuses_a_margin_and_adjust_p_values_refuses_max_t():
    with pytest.raises(ValueError, match=r"^hypothesis: expected 'superiority' with correction 'maxt'"):
        ComparisonSettings(reference="A", correction="maxt", hypothesis="non-inferiority", margin=0.01)
    with pytest.raises(ValueError, match=r"^correction: expected one of 'holm', 'bonferroni' or None .*'maxt'"):
        adjust_p_values(np.array([0.01, 0.2]), "maxt")


def test_no_adjusted_p_value_falls_below_its_own_whatever_stream_or_enumeration_the_family_used():
    # Found by a break-test: with three models the family draws its own stream, and a row can be exact where its
    # family is Monte Carlo; either could leave an adjusted p below the row's own.
    for seed in range(20):
        rng = np.random.default_rng(seed)
        a = rng.random((30, 1))
        models = {"A": a, "B": a + rng.normal(0, 0.2, (30, 1)), "C": a + rng.normal(0, 0.2, (30, 1))}
        for row in _compare(models, ["m"], reference="A", n_resamples=199).comparisons:
            assert row.adjusted_p_value >= row.p_value
    rng = np.random.default_rng(3)
    base = rng.random((40, 2))
    cand = base + np.column_stack([np.r_[rng.normal(0, 0.2, 6), np.zeros(34)], rng.normal(0, 0.2, 40)])
    rows = _compare({"A": base, "B": cand}, ["few", "many"], reference="A", n_resamples=999).comparisons
    assert rows[0].test_method == "randomization-exact"
    assert all(r.adjusted_p_value >= r.p_value for r in rows)


def test_one_hypothesis_keeps_its_p_value_when_the_few_replicates_drawn_agree():
    # B = 2: both sign-flip replicates can be equal; the scale of the statistic is the null's exact spread.
    base = np.array([[0.3], [0.5], [0.1], [0.5], [0.4]])
    cand = np.array([[0.2], [0.3], [0.0], [0.3], [0.6]])
    for n_resamples in (1, 2):
        (row,) = _compare({"A": base, "B": cand}, ["m"], reference="A", n_resamples=n_resamples).comparisons
        assert row.adjusted_p_value == row.p_value
