"""Global metrics (coverage@k, gini@k) inside compare_models: the same numbers as compare_exposure on the results'
scored lists, refused without lists, saved and read back, and shown on every surface of the report."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.report._html import report_html
from mlflow_recsys.stats import ComparisonReport, ComparisonSettings, compare_exposure, compare_models
from test_report_exports import compile_latex, needs_pdflatex

N_ITEMS = 60


def _result(seed, *, n=80, rankings=True, ids=None, n_items=N_ITEMS, shift=0.0):
    rng = np.random.default_rng(seed)
    values = np.clip(rng.beta(2, 3, n) + shift, 0, 1)
    lists = np.argsort(rng.random((n, n_items)) * (1 + np.arange(n_items) * (seed + 1) / n_items), axis=1)[:, :10]
    return EvaluationResult(
        metrics={"ndcg@10": float(values.mean())},
        per_user={"ndcg@10": values},
        sample_ids=np.arange(n) if ids is None else ids,
        targets_fingerprint="f" * 64,
        rankings=lists.astype(np.int32) if rankings else None,
        n_items=n_items if rankings else None,
    )


def _results(**kwargs):
    return {"EASE": _result(0), "<b>ELSA&</b>": _result(1, shift=0.02, **kwargs)}


KEYS = ("coverage@5", "gini@10")


def test_the_report_holds_compare_exposure_of_the_scored_lists():
    results = _results()
    report = compare_models(results, metrics="ndcg@10", reference="EASE", n_resamples=499, global_metrics=KEYS)
    lists = {name: r.rankings for name, r in results.items()}
    direct = compare_exposure(lists, n_items=N_ITEMS, metrics=KEYS, reference="EASE", n_resamples=499)
    assert report.global_metrics.to_frame().equals(direct.to_frame())
    coverage = report.global_metrics.get("coverage@5", "<b>ELSA&</b>")
    # by hand: distinct items among every user's top 5, over the catalogue
    assert coverage.baseline_value == len(np.unique(results["EASE"].rankings[:, :5])) / N_ITEMS
    assert coverage.candidate_value == len(np.unique(results["<b>ELSA&</b>"].rankings[:, :5])) / N_ITEMS
    plain = compare_models(results, metrics="ndcg@10", reference="EASE", n_resamples=499)
    assert plain.global_metrics is None
    assert plain.to_frame().equals(report.to_frame())  # the hypotheses above do not move


def test_holm_adjusts_the_global_rows_as_one_family():
    report = compare_models(_results(), metrics="ndcg@10", reference="EASE", n_resamples=499, global_metrics=KEYS)
    rows = report.global_metrics.comparisons
    raw = sorted(r.p_value for r in rows)
    # Holm with two hypotheses, by hand: the smaller p doubled, the larger at least that, each at most 1
    first = min(1.0, 2 * raw[0])
    expected = sorted([first, max(first, raw[1])])
    assert sorted(r.adjusted_p_value for r in rows) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize(
    ("results", "match"),
    [
        (lambda: _results(rankings=False), r"global_metrics: expected results that kept their scored lists .*ELSA"),
        (lambda: _results(n_items=70), r"global_metrics: expected lists over one catalogue, found n_items \[60, 70\]"),
        (
            lambda: {k: _result(i, ids=np.repeat(np.arange(40), 2)) for i, k in enumerate(("A", "B"))},
            "global_metrics: expected one row per user",
        ),
    ],
)
def test_global_metrics_are_refused_without_lists_of_one_catalogue_one_per_user(results, match):
    with pytest.raises(ValueError, match=match):
        compare_models(results(), metrics="ndcg@10", n_resamples=99, global_metrics=KEYS)


def test_settings_refuse_a_key_that_is_no_global_metric():
    with pytest.raises(ValueError, match=r"global_metrics: expected keys 'coverage@<k>' or 'gini@<k>'.*recall@20"):
        ComparisonSettings(global_metrics=("coverage@20", "recall@20"))


def test_the_global_rows_round_trip_and_show_on_every_surface(tmp_path):
    report = compare_models(_results(), metrics="ndcg@10", reference="EASE", n_resamples=499, global_metrics=KEYS)
    loaded = ComparisonReport.load(report.save(tmp_path / "saved"))
    assert ComparisonReport.load(report.save(tmp_path / "saved")).to_frame().equals(report.to_frame())  # replaced
    assert loaded.global_metrics.to_frame().equals(report.global_metrics.to_frame())
    assert loaded.global_metrics.reference == "EASE" and loaded.global_metrics.n_items == N_ITEMS
    gini = report.global_metrics.get("gini@10", "<b>ELSA&</b>")
    shown = f"{gini.difference:+.4f}"
    page = report_html(report, {}, primary=None, title="global", forest_png=b"")
    for surface in (str(report), report.to_markdown(), page):
        assert "Global metrics" in surface and shown in surface and ("gini@10" in surface or "gini<wbr>@10" in surface)
    assert "&lt;b&gt;ELSA&amp;&lt;/b&gt;" in page and "<b>ELSA&</b>" not in page


def _global_table(latex: str) -> str:
    return latex.split("\\begin{table}")[-1]


def test_latex_adds_a_table_of_the_global_rows_after_the_first():
    report = compare_models(_results(), metrics="ndcg@10", reference="EASE", n_resamples=499, global_metrics=KEYS)
    latex = report.to_latex(label="tab:x")
    assert latex.startswith(dataclasses.replace(report, global_metrics=None).to_latex(label="tab:x"))
    table = _global_table(latex)
    assert "\\label{tab:x-global}" in table and "Global metrics, each of all users" in table
    lines = table.splitlines()
    for r in report.global_metrics.comparisons:  # every number as the other renderings print it, in math mode
        cells = [
            r.metric,
            "\\textless{}b\\textgreater{}ELSA\\&\\textless{}/b\\textgreater{} vs EASE",
            str(r.n_units),
            f"${r.baseline_value:.4f}$",
            f"${r.candidate_value:.4f}$",
            f"${r.difference:+.4f}$",
            f"$[{r.ci_low:+.4f}, {r.ci_high:+.4f}]$",
            f"${r.p_value:.4f}$",
            f"${r.adjusted_p_value:.4f}$",
            f"${r.bootstrap_bias:+.4f}$",
        ]
        assert " & ".join(cells) + " \\\\" in lines
    assert "<b>ELSA&</b>" not in latex
    assert "-global" not in compare_models(_results(), metrics="ndcg@10", reference="EASE", n_resamples=499).to_latex()


@needs_pdflatex
def test_pdflatex_typesets_the_global_table_within_the_line_width(tmp_path):
    report = compare_models(_results(), metrics="ndcg@10", reference="EASE", n_resamples=499, global_metrics=KEYS)
    log = compile_latex(tmp_path, report.to_latex())
    assert "Overfull \\hbox" not in log and "Overfull \\vbox" not in log


def test_a_one_sided_alternative_reads_higher_not_better_for_it_tests_gini_too():
    """``greater`` tests for a higher candidate; for the Gini index higher is more concentrated exposure, so no
    surface may call that alternative "better"."""
    report = compare_models(
        _results(), metrics="ndcg@10", reference="EASE", n_resamples=499, global_metrics=KEYS, alternative="greater"
    )
    gini = report.global_metrics.get("gini@10", "<b>ELSA&</b>")
    assert gini.alternative == "greater" and gini.ci_high == np.inf  # the one-sided interval of a higher candidate
    for surface in (str(report), report.to_markdown(), report.to_latex(), report.methods_text()):
        assert "candidate higher" in surface and "candidate better" not in surface
    # Its open end is written as the main table writes one, in every rendering.
    interval = f"[{gini.ci_low:+.4f}, inf)"
    page = report_html(report, {}, primary=None, title="global", forest_png=b"")
    for surface in (str(report), report.to_markdown(), page):
        assert interval in surface and "+inf]" not in surface
    assert f"$[{gini.ci_low:+.4f}, \\infty)$" in report.to_latex()


def test_the_global_markdown_table_prints_numbers_as_they_are_and_escapes_names():
    report = compare_models(_results(), metrics="ndcg@10", reference="EASE", n_resamples=499, global_metrics=KEYS)
    rows = [line for line in report.to_markdown().splitlines() if line.startswith("| gini@10 |")]
    assert rows
    for row, r in zip(rows, [r for r in report.global_metrics.comparisons if r.metric == "gini@10"], strict=True):
        cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        assert cells[1] == "&lt;b>ELSA&&lt;/b> vs EASE"
        assert cells[3:7] == [
            f"{r.baseline_value:.4f}",
            f"{r.candidate_value:.4f}",
            f"{r.difference:+.4f}",
            f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}]",
        ]
