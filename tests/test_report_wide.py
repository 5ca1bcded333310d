"""The wide models x metrics table (ranx's compare layout) and the run notes' size bound."""

import dataclasses

import numpy as np
import pytest

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.report import _notes as notes
from mlflow_recsys.report._latex import significance_marker
from mlflow_recsys.report._wide import wide_latex, wide_markdown, wide_table
from mlflow_recsys.stats import compare_models
from mlflow_recsys.tracking._limits import MAX_TAG_LENGTH

pytestmark = pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.LowResamplesWarning")


def _report(names, metrics=("ndcg@100", "recall@20"), reference=None, n=60):
    rng = np.random.default_rng(3)
    results = {
        name: EvaluationResult.from_per_user({m: rng.random(n) + 0.4 * i for m in metrics}, targets_fingerprint="x")
        for i, name in enumerate(names)
    }
    return compare_models(results, metrics=list(metrics), reference=reference or names[0], n_resamples=199)


def test_the_wide_table_holds_each_models_mean_and_its_marker_against_the_baseline():
    report = _report(["A", "B|*", "C"])
    frame = wide_table(report)
    assert list(frame.index) == ["A", "B|*", "C"] and list(frame.columns) == ["ndcg@100", "recall@20"]
    assert frame.index.name == "model"
    for c in report.comparisons:
        marker = significance_marker(c.adjusted_p_value, c.alpha)
        assert frame.loc[c.candidate, c.metric] == f"{c.candidate_mean:.4f}{marker}"
        assert frame.loc[c.baseline, c.metric] == f"{c.baseline_mean:.4f}"  # the baseline has no marker
    assert any(v.endswith("*") for v in frame.to_numpy().ravel())  # C is 0.8 higher on 60 users
    md = wide_markdown(report)
    assert "| B\\|\\* |" in md and "\\*" in md.splitlines()[-1] and md.startswith("Mean over users; * adjusted p")
    tex = wide_latex(report)
    assert tex.startswith(r"\begin{tabular}{lrr}") and "^{" in tex and r"B\textbar{}*" in tex


def test_the_wide_table_leaves_a_cell_empty_where_a_model_and_metric_were_not_compared():
    report = _report(["A", "B"], metrics=("ndcg@100",))
    assert wide_table(report).shape == (2, 1)
    with pytest.raises(ValueError, match="at least one hypothesis"):
        wide_table(dataclasses.replace(report, comparisons=()))


def test_the_longest_possible_run_note_fits_mlflows_limit():
    # Names that escape to ten characters a character, many pairs, seeds on every side, a long provenance.
    worst = "\U0010ffff" * 5000
    names = [worst + str(i) for i in range(14)]
    report = _report(names, metrics=("<" * 5000 + "a", "<" * 5000 + "b", "ndcg@100"), n=30)
    provenance = {
        "split": {"run_id": worst, "split_digest": worst},
        "models": {name: {"why": worst} for name in names},
    }
    note = notes.run_note(
        report, {}, "ndcg@100", provenance, declared=True, averaged=report, link="\n\n" + "x" * notes.NOTE_LINK_WIDTH
    )
    assert len(note) <= notes.NOTE_BOUND <= MAX_TAG_LENGTH
    rows = [line for line in note.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + notes.NOTE_ROWS  # the header and N whole rows
    assert f"{len(report.comparisons) - notes.NOTE_ROWS} more of the {len(report.comparisons)} rows" in note
    assert all(len(notes.note_name(n)) <= notes.NOTE_NAME_WIDTH for n in (*names, "R" * 7000, "<&*" * 900))
