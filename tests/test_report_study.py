"""The paper's table of a study and the verdict's sentences: markers and bold cells recomputed by hand, every name
escaped in each format, and the floor said where the datasets are too few."""

import math

import numpy as np
import pandas as pd
import pytest

from mlflow_recsys.report._escaping import escape_markdown
from mlflow_recsys.report._study import (
    LEVEL_COLUMNS,
    study_csv,
    study_html_table,
    study_latex,
    study_markdown,
    study_table,
    study_text,
    table_legend,
    verdict_lines,
)
from mlflow_recsys.stats import ComparisonSettings, random_effects, rank_across_datasets
from mlflow_recsys.stats._verdict import StudyVerdict

HOSTILE = "<b>$x$</b>|*_%&"


def _levels():
    rows = [
        ("ml", "Pop", "ndcg@100", 0.25, math.nan, 1, math.nan),
        ("ml", "EASE", "ndcg@100", 0.45, math.nan, 1, 0.0009),  # <= 0.05 / 50: ***
        ("ml", HOSTILE, "ndcg@100", 0.44, 0.002, 3, 0.009),  # <= 0.01: **
        ("clicks", "Pop", "ndcg@100", 0.30, math.nan, 1, math.nan),
        ("clicks", "EASE", "ndcg@100", 0.30, math.nan, 1, 0.04),  # <= 0.05: *, tied best with Pop
        ("clicks", HOSTILE, "ndcg@100", 0.20, 0.010, 3, 0.2),
    ]
    return pd.DataFrame(rows, columns=list(LEVEL_COLUMNS))


def test_markers_and_the_best_of_each_column_are_as_by_hand():
    table = study_table(_levels(), alpha=0.05)
    assert list(table.index) == ["Pop", "EASE", HOSTILE] and list(table.columns) == [
        ("ml", "ndcg@100"),
        ("clicks", "ndcg@100"),
    ]
    ml, clicks = table[("ml", "ndcg@100")], table[("clicks", "ndcg@100")]
    assert [c.marker for c in ml] == ["", "***", "**"] and [c.marker for c in clicks] == ["", "*", ""]
    assert [c.best for c in ml] == [False, True, False] and [c.best for c in clicks] == [True, True, False]
    assert ml[HOSTILE].text() == "0.4400 ± 0.0020**" and ml["EASE"].text() == "0.4500***"


def test_every_format_writes_names_literally():
    levels = _levels()
    markdown = study_markdown(levels, 0.05, "legend")
    assert f"| {escape_markdown(HOSTILE)} |" in markdown and HOSTILE not in markdown  # escape_markdown: its own tests
    assert "**0.4500\\*\\*\\***" in markdown  # bold and markers escaped
    latex = study_latex(levels, 0.05, "legend")
    assert r"\multicolumn{1}{c}{ml} & \multicolumn{1}{c}{clicks}" in latex and "$x$" not in latex
    assert r"$\mathbf{0.4500}^{***}$" in latex and r"$0.4400 \pm 0.0020^{**}$" in latex
    html = study_html_table(levels, 0.05)
    assert "&lt;b&gt;$x$&lt;/b&gt;|*_%&amp;" in html and "<b>0.4500***</b>" in html
    assert HOSTILE in study_text(levels, 0.05)
    csv = pd.read_csv(pd.io.common.StringIO(study_csv(levels)))
    assert csv["best"].tolist() == [False, True, False, True, True, False]


def test_the_legend_states_the_test_b_sides_and_correction():
    legend = table_legend(ComparisonSettings(reference="Pop", n_resamples=999, correction="bonferroni"))
    assert "* adjusted p <= 0.05, ** <= 0.01, *** <= 0.001 against Pop on that dataset" in legend
    assert "B = 999" in legend and "two-sided" in legend and "Bonferroni adjustment" in legend
    assert "no markers" in table_legend(ComparisonSettings())


def test_the_verdict_says_the_pooled_effect_and_the_floor_of_few_datasets():
    meta = random_effects({"a": 0.02, "b": 0.03, "c": 0.01}, {"a": 0.01, "b": 0.01, "c": 0.01})
    rng = np.random.default_rng(0)
    ranks = rank_across_datasets(pd.DataFrame(rng.normal(size=(3, 4)), columns=list("ABCD")))
    lines = verdict_lines(StudyVerdict("Pop", "difference", (("EASE", "ndcg@100", meta),), (("ndcg@100", ranks),)))
    assert lines[0].startswith(f"EASE vs Pop on ndcg@100 over 3 datasets: pooled difference {meta.effect:+.4f}")
    assert f"[{meta.ci_low:+.4f}, {meta.ci_high:+.4f}]" in lines[0] and "2 df" in lines[0]
    assert "With 3 datasets no Wilcoxon signed-rank with Holm p-value of 4 models can go below 1" in lines[1]
    assert "8 datasets would be needed" in lines[1] and "no pair differs significantly" in lines[1]


def test_an_empty_table_is_refused():
    with pytest.raises(ValueError, match="levels: expected rows with the columns"):
        study_table(pd.DataFrame(columns=list(LEVEL_COLUMNS)), 0.05)
