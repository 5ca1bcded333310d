"""Report text, tables and citations say exactly what was computed."""

import re
import warnings

import numpy as np
import pytest

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.report import references_bibtex
from mlflow_recsys.stats import FewNonzeroUnitsWarning, compare_models, compare_pair


def three_models(keys, elsa_shift, elsa_sd, n=600):
    """EASE, ELSA (EASE plus normal(elsa_shift, elsa_sd) noise) and Pop (EASE plus normal(0, 0.2)) per user."""
    rng = np.random.default_rng(0)
    base = {k: rng.random(n) for k in keys}
    shifted = {
        "ELSA": {k: v + rng.normal(elsa_shift, elsa_sd, n) for k, v in base.items()},
        "Pop": {k: v + rng.normal(0.0, 0.2, n) for k, v in base.items()},
    }
    return {
        name: EvaluationResult.from_per_user(values, targets_fingerprint="x")
        for name, values in {"EASE": base, **shifted}.items()
    }


@pytest.fixture(scope="module")
def report():
    results = three_models(("ndcg@100", "recall@20"), elsa_shift=0.2, elsa_sd=0.05)
    return compare_models(results, metrics=["ndcg@100", "recall@20"], reference="EASE", n_resamples=999)


def test_results_text_names_effect_interval_test_floor_and_counts(report):
    c = report.get("ndcg@100", "ELSA")
    text = report.results_text("ndcg@100", "ELSA")
    assert f"{c.difference:.4f}" in text and f"[{c.ci_low:.4f}, {c.ci_high:.4f}]" in text
    # 4 hypotheses at B = 999: the smallest adjusted p is 4 / 1000, and its Monte Carlo error, about 4 / 1000 too,
    # leaves three decimals.
    assert "999 resamples" in text and "Holm-adjusted p = 0.004," in text
    assert c.adjusted_p_value == pytest.approx(4 / 1000)
    assert "smallest attainable with 999 resamples and 4 hypotheses" in text
    assert "n = 600 users, of whom 600 scored differently" in text


def test_results_text_of_an_inconclusive_hypothesis_says_so(report):
    text = report.results_text("recall@20", "Pop")
    assert "not significant" in text and "smallest attainable" not in text


def test_improved_is_said_only_of_a_significant_gain():
    results = three_models(("ndcg@100",), elsa_shift=0.025, elsa_sd=0.3)
    weak = compare_models(results, metrics="ndcg@100", reference="EASE", n_resamples=999).get("ndcg@100", "ELSA")
    assert weak.difference > 0 and not weak.significant
    text = compare_models(results, metrics="ndcg@100", reference="EASE", n_resamples=999).results_text(
        "ndcg@100", "ELSA"
    )
    assert "improved" not in text and f"ELSA scored {weak.difference:.4f} higher than EASE" in text
    assert "not significant" in text
    strong = three_models(("ndcg@100",), elsa_shift=0.2, elsa_sd=0.05)
    text = compare_models(strong, metrics="ndcg@100", reference="EASE", n_resamples=999).results_text(
        "ndcg@100", "ELSA"
    )
    assert text.startswith("ELSA improved ndcg@100 over EASE by")


def test_methods_text_states_every_setting(report):
    text = report.methods_text()
    for needle in (
        "randomization test",
        "B = 999",
        "95% percentile interval",
        "paired bootstrap",
        "Holm",
        "all 4 hypotheses",
        "at most 0.05",
        "Phipson & Smyth",
        "Efron, 1979",
    ):
        assert needle in text


def test_markdown_and_latex_tables_hold_every_hypothesis(report):
    settings, table = report.to_markdown().split("\n\n", 1)
    assert "95% paired percentile bootstrap interval" in settings and "Holm adjustment over 4 hypotheses" in settings
    assert table.count("\n") == 1 + report.family_size  # header, rule, one line per hypothesis
    latex = report.to_latex()
    assert r"\begin{tabular}" in latex and latex.count(r"\\") >= report.family_size + 1


def test_bootstrap_test_p_value_is_recomputable_from_the_kept_replicates():
    rng = np.random.default_rng(3)
    d = rng.normal(0.01, 0.1, 400)
    base = EvaluationResult.from_per_user({"m": np.full(400, 0.5)}, targets_fingerprint="x")
    cand = EvaluationResult.from_per_user({"m": 0.5 + d}, targets_fingerprint="x")
    c = compare_pair(base, cand, metric="m", test_method="bootstrap", n_resamples=999)
    extreme = np.sum(np.abs(c.bootstrap_distribution - c.difference) >= abs(c.difference))
    assert c.p_value == pytest.approx((1 + extreme) / 1000)


def test_references_cover_methods_and_models():
    bib = references_bibtex()
    keys = re.findall(r"@\w+\{(\w+),", bib)
    assert keys == [
        "efron1979bootstrap",
        "liang2018vae",
        "smucker2007comparison",
        "phipson2010permutation",
        "holm1979simple",
        "davison1997bootstrap",
        "steck2019ease",
        "vancura2022elsa",
        "westfall1993resampling",
        "romano2005stepdown",
        "beran1988balanced",
        "lakens2013effect",
        "dixon1946sign",
        "cohen1988power",
        "cochran1954combination",
        "higgins2002quantifying",
    ]


def test_exact_test_is_named_in_the_report():
    d = np.zeros(40)
    d[:5] = [0.1, 0.2, -0.1, 0.3, 0.2]
    base = EvaluationResult.from_per_user({"m": np.full(40, 0.5)}, targets_fingerprint="x")
    cand = EvaluationResult.from_per_user({"m": 0.5 + d}, targets_fingerprint="x")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewNonzeroUnitsWarning)
        report = compare_models({"A": base, "B": cand}, metrics=["m"], reference="A")
    assert report.comparisons[0].test_method == "randomization-exact"
    assert "exact paired sign-flip randomization test" in report.methods_text()
    assert "exact paired randomization test over all sign patterns" in report.results_text("m", "B")


def test_a_baseline_mean_of_zero_gives_an_undefined_relative_change_in_words():
    zeros = EvaluationResult.from_per_user({"ndcg@100": np.zeros(40)}, targets_fingerprint="x")
    some = EvaluationResult.from_per_user({"ndcg@100": np.linspace(0, 1, 40)}, targets_fingerprint="x")
    report = compare_models({"Z0": zeros, "Z1": some}, metrics="ndcg@100", reference="Z0", n_resamples=999)
    assert np.isnan(report.get("ndcg@100", "Z1").relative_difference)
    text = report.results_text("ndcg@100", "Z1")
    assert "relative change that is undefined (the baseline's mean is 0)" in text and "nan" not in text
    assert report.to_markdown().count("n/a") == 1 and "nan" not in report.to_markdown()


def _holm(p):
    """Holm (1979) by hand: the k-th smallest p times (J - k + 1), made monotone, capped at 1."""
    order = np.argsort(p)
    out, running = np.empty(len(p)), 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, p[i] * (len(p) - k)))
        out[i] = running
    return out


def test_the_primary_metric_is_adjusted_as_its_own_family():
    metrics = ["ndcg@100", "recall@20", "mrr@20"]
    results = three_models(metrics, elsa_shift=0.01, elsa_sd=0.2)
    split = compare_models(results, metrics=metrics, reference="EASE", primary="ndcg@100", n_resamples=999)
    together = compare_models(
        results, metrics=metrics, reference="EASE", primary="ndcg@100", family="all", n_resamples=999
    )
    assert split.families == {"primary": 2, "secondary": 4} and together.families == {"all": 6}
    for family, members in (("primary", ["ndcg@100"]), ("secondary", ["recall@20", "mrr@20"])):
        rows = [c for c in split.comparisons if c.metric in members]
        assert {c.family for c in rows} == {family}
        np.testing.assert_allclose([c.adjusted_p_value for c in rows], _holm(np.array([c.p_value for c in rows])))
    rows = together.comparisons
    np.testing.assert_allclose([c.adjusted_p_value for c in rows], _holm(np.array([c.p_value for c in rows])))
    # The raw p-values do not depend on the family; only the adjustment does.
    assert [c.p_value for c in split.comparisons] == [c.p_value for c in together.comparisons]
    text = split.methods_text()
    assert "primary metric formed a family of its own (2 hypotheses, one per model pair)" in text
    assert "the other metrics a second family (4 hypotheses)" in text
    assert "within each family: the primary metric ndcg@100 (2 hypotheses)" in split.to_markdown()
    assert "Holm adjustment over 6 hypotheses" in together.to_markdown()
    with pytest.raises(ValueError, match=r"primary: expected one of the compared metrics .*found 'map@20'"):
        compare_models(results, metrics=metrics, primary="map@20", n_resamples=99)
    with pytest.raises(ValueError, match=r"family: expected one of \('primary', 'all'\), found 'each'"):
        compare_models(results, metrics=metrics, primary="ndcg@100", family="each", n_resamples=99)


def test_a_p_value_equal_to_alpha_is_significant_at_confidence_0_9():
    # B = 9 and the observed difference the most extreme: p = 1 / (9 + 1) = 0.1 exactly, and 1 - 0.9 != 0.1 in binary.
    results = three_models(("ndcg@100",), elsa_shift=0.2, elsa_sd=0.05, n=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compare_models(
            {k: results[k] for k in ("EASE", "ELSA")},
            metrics="ndcg@100",
            reference="EASE",
            n_resamples=9,
            confidence_level=0.9,
            correction=None,
        ).comparisons[0]
    assert c.p_value == 0.1 and c.alpha == 0.1
    assert c.significant and c.direction == "better"


def test_markdown_shows_control_characters_and_escapes_the_primary_metric_in_the_settings_line():
    from mlflow_recsys.report._escaping import escape_markdown

    assert escape_markdown("a\tb\x1b[31m") == "a\\\\tb\\\\x1b\\[31m"
    rng = np.random.default_rng(4)
    key = "ndcg@100"
    results = {
        name: EvaluationResult.from_per_user({key: rng.random(80), "m*x": rng.random(80)}, targets_fingerprint="x")
        for name in ("A", "B\tC")
    }
    report = compare_models(results, metrics=[key, "m*x"], reference="A", primary="m*x", n_resamples=999)
    settings, table = report.to_markdown().split("\n\n", 1)
    assert "the primary metric m\\*x (1 hypothesis)" in settings and "\t" not in table
