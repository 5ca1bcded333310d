"""The sign test (test_method="sign"), checked against exhaustive enumeration of sign patterns and against scipy.

It was added as one new value of a declared setting plus its implementation: the command line, the server
form and the MLproject take it from the declaration, which these tests check too.
"""

import itertools

import numpy as np
import pytest
import scipy.stats
from click.testing import CliRunner

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats import ComparisonReport, ComparisonSettings, compare_models
from mlflow_recsys.stats._inference import sign_test_p_value


def enumerated_p(d, alternative):
    """The sign test's p-value by enumerating every sign pattern of the non-zero differences: under the null
    each of the 2**n patterns is equally likely, and the statistic is the number of positive signs."""
    n = int(np.count_nonzero(d))
    k = int(np.count_nonzero(d > 0))
    counts = [sum(signs) for signs in itertools.product((0, 1), repeat=n)]
    if alternative == "greater":
        extreme = [c >= k for c in counts]
    elif alternative == "less":
        extreme = [c <= k for c in counts]
    else:  # as far from n/2 as k is, on either side
        extreme = [abs(c - n / 2) >= abs(k - n / 2) for c in counts]
    return sum(extreme) / len(counts)


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
@pytest.mark.parametrize(
    "d",
    [
        [0.1, 0.2, 0.3, -0.05, 0.4, 0.0, 0.2, 0.1],  # 6 wins, 1 loss, 1 tie
        [-0.3, -0.1, 0.2, -0.2, 0.0, 0.0, -0.4],  # 1 win, 4 losses, 2 ties
        [0.5, -0.5, 0.5, -0.5],  # balanced
        [1e-9, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, -100.0],  # a large loss weighs as one
    ],
)
def test_the_sign_test_p_value_is_the_enumerated_one(d, alternative):
    d = np.asarray(d)
    assert sign_test_p_value(d, alternative) == pytest.approx(enumerated_p(d, alternative), rel=1e-12)


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_the_sign_test_p_value_equals_scipys_binomtest_for_every_count(alternative):
    """Read from the binomial distribution function, p equals binomtest's for every number of wins: all counts up
    to 60 units, the middle and the tails of larger samples (with p far below 1e-100)."""
    cases = [(wins, n) for n in range(1, 61) for wins in range(n + 1)]
    cases += [(wins, n) for n in (999, 1000, 5000) for wins in (0, 1, 3, n // 2 - 40, n // 2, n // 2 + 1, n - 2, n)]
    # large samples, where a distribution function can drift near the centre (scipy.special.bdtr did)
    cases += [(n // 2 + j, n) for n in (10**6 + 1, 10**7 + 1) for j in (-3000, -1, 0, 1, 2, 3000)]
    for wins, n in cases:
        d = np.concatenate([np.ones(wins), -np.ones(n - wins), np.zeros(3)])
        expected = scipy.stats.binomtest(wins, n, 0.5, alternative=alternative).pvalue
        assert sign_test_p_value(d, alternative) == pytest.approx(expected, rel=1e-9, abs=1e-300), (wins, n)


def test_the_most_balanced_large_sample_gives_p_one_and_a_half_each_side():
    # exact by symmetry: with n odd, P(X <= (n - 1) / 2) = P(X >= (n + 1) / 2) = 1/2
    n = 10**7 + 1
    d = np.concatenate([np.ones(n // 2), -np.ones(n - n // 2)])
    assert sign_test_p_value(d, "two-sided") == 1.0
    assert sign_test_p_value(d, "less") == pytest.approx(0.5, rel=1e-12)
    assert sign_test_p_value(-d, "greater") == pytest.approx(0.5, rel=1e-12)


def test_every_difference_zero_gives_p_one():
    assert sign_test_p_value(np.zeros(5), "two-sided") == 1.0


def test_compare_models_reports_the_sign_test_on_wins_and_losses():
    rng = np.random.default_rng(3)
    base = rng.uniform(0, 1, 200)
    cand = np.clip(base + rng.normal(0.02, 0.1, 200), 0, 1)
    cand[:20] = base[:20]  # ties

    def result(values):
        return EvaluationResult.from_per_user({"m": values}, targets_fingerprint="x")

    report = compare_models({"A": result(base), "B": result(cand)}, metrics=["m"], test_method="sign")
    row = report.get("m", "B", "A")
    d = cand - base
    wins, losses = int((d > 0).sum()), int((d < 0).sum())
    assert (row.wins, row.losses, row.ties) == (wins, losses, 20)
    assert row.test_method == "sign" and row.null_distribution is None
    assert row.p_value == pytest.approx(scipy.stats.binomtest(wins, wins + losses, 0.5).pvalue, rel=1e-12)
    assert "sign test" in report.methods_text()


def test_a_report_of_the_sign_test_saves_and_loads(tmp_path):
    rng = np.random.default_rng(5)
    values = {"A": rng.uniform(0, 1, 30), "B": rng.uniform(0, 1, 30)}
    results = {k: EvaluationResult.from_per_user({"m": v}, targets_fingerprint="x") for k, v in values.items()}
    report = compare_models(results, metrics=["m"], test_method="sign", n_resamples=999)
    loaded = ComparisonReport.load(report.save(tmp_path / "r"))
    assert loaded.get("m", "B", "A").p_value == report.get("m", "B", "A").p_value
    assert loaded.get("m", "B", "A").test_method == "sign"


def test_the_declaration_reaches_the_command_line_and_the_text_reader():
    from mlflow_recsys.cli import cli
    from mlflow_recsys.settings_schema import settings_of

    assert ComparisonSettings(test_method="sign").test_method == "sign"
    assert settings_of(ComparisonSettings)["test_method"][1].parse("sign", "test_method") == "sign"
    help_text = CliRunner().invoke(cli, ["compare", "--help"]).output
    assert "randomization|bootstrap|t|wilcoxon|sign" in "".join(help_text.split())
