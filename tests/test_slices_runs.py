"""Slices declared by name in a comparison of runs (``--slices history:4,target_popularity``): built from the runs'
own split, checked before any run is made, and carried into the comparison run's files."""

from __future__ import annotations

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from conftest import trained_copy
from mlflow_recsys.data import load_recsys_split
from mlflow_recsys.errors import RunSelectionError
from mlflow_recsys.metrics import ItemPopularity, long_tail_items
from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.stats._strata import parse_slice_spec, split_slices
from mlflow_recsys.tracking import compare_runs, load_comparison
from mlflow_recsys.tracking._training import resolve_checkpoint


@pytest.fixture(scope="module")
def trained(trained_store, tmp_path_factory):
    with trained_copy(trained_store, tmp_path_factory.mktemp("slices"), "slices") as copy:
        yield copy


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("history", ("history", 4)),
        ("history:3", ("history", 3)),
        ("cold:2", ("cold", 2)),
        ("target_popularity", ("target_popularity", 0.2)),
        ("target_popularity:0.1", ("target_popularity", 0.1)),
    ],
)
def test_a_slice_is_named_with_an_optional_argument(spec, parsed):
    assert parse_slice_spec(spec) == parsed


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        (
            "age",
            r"slices: expected slices among history\[:int\], cold\[:int\], target_popularity\[:float\], found 'age'",
        ),
        ("history:four", r"slices: expected history:<int> \(quantile bins .*\), found 'history:four'"),
        ("cold:1.5", r"slices: expected cold:<int>"),
        ("history:1", r"slices: expected history:<int> \(.*at least 2\), found 'history:1'"),
        ("history:", r"slices: expected history:<int>"),
        ("cold:-1", r"slices: expected cold:<int> \(.*at least 0\)"),
        ("target_popularity:2", r"slices: expected target_popularity:<float> \(.*between 0 and 1\)"),
        ("history:4_0", r"slices: expected history:<int>"),
        ("history:\u0664", r"slices: expected history:<int>"),  # an Arabic-Indic 4, which int() takes
        ("cold: 5", r"slices: expected cold:<int>"),
        ("history:+4", r"slices: expected history:<int>"),
        ("target_popularity:2e-1", r"slices: expected target_popularity:<float>"),
    ],
)
def test_settings_refuse_an_unknown_slice_or_a_bad_argument_naming_it(spec, match):
    with pytest.raises(ValueError, match=match):
        ComparisonSettings(slices=(spec,))


def test_settings_refuse_a_slice_named_twice_before_any_run_is_made():
    """Two specs of one kind would make two slices of one name, which a comparison refuses only after its run exists."""
    with pytest.raises(
        ValueError, match=r"slices: expected each slice once \(history repeated\), found \['history:4', "
    ):
        ComparisonSettings(slices=("history:4", "cold", "history:3"))
    assert ComparisonSettings(slices=("history:4", "cold")).slices == ("history:4", "cold")


def test_settings_refuse_slices_under_a_margin_hypothesis():
    with pytest.raises(ValueError, match="slices: expected no slices with a margin hypothesis"):
        ComparisonSettings(slices=("history",), hypothesis="non-inferiority", margin=0.01, reference="EASE")


def test_the_comparison_of_runs_slices_the_split_s_test_users(trained, tmp_path):
    with pytest.warns(UserWarning):  # few resamples
        outcome = compare_runs(
            run_ids=[trained["ease"], trained["pop"]],
            settings=ComparisonSettings(
                metrics=("ndcg@100",),
                n_resamples=199,
                reference="Popularity",
                slices=("history:3", "target_popularity"),
            ),
        )
    split = load_recsys_split(resolve_checkpoint(trained["checkpoint"], str(tmp_path)))
    ids = split.test_eval_user_ids
    # Independently: fold-in counts per user, tertiles; a user is "tail" when half or more of their targets are in
    # the long tail of the training popularity.
    lengths = pd.Series(np.diff(split.test_source_matrix.indptr), index=ids)
    tail = long_tail_items(np.asarray((split.x_train > 0).sum(axis=0)).ravel())
    targets = split.test_target_matrix
    share = np.asarray(targets @ tail.astype(float)).ravel() / np.diff(targets.indptr)
    frame = outcome.report.slices.to_frame()
    tails = frame[(frame.slice == "target_popularity") & (frame.stratum == "tail")]
    assert int(tails.n_units.iloc[0]) == int((share >= 0.5).sum())
    history = frame[frame.slice == "history"]
    assert history.n_units.sum() == len(ids) and len(history) == 3
    first = history.iloc[0]
    low, high = (int(v) for v in first.stratum.split("-"))
    assert first.n_units == int(((lengths >= low) & (lengths <= high)).sum())
    files = {f.path for f in MlflowClient().list_artifacts(outcome.run_id, "report")}
    assert {"report/slices.parquet", "report/heterogeneity.parquet"} <= files


def test_slices_of_runs_without_a_checkpoint_are_refused_before_any_run(trained, copy_run, tmp_path):
    copied = copy_run(trained["pop"], tmp_path, model="Copy")
    before = len(mlflow.search_runs(search_all_experiments=True))
    with pytest.raises(
        RunSelectionError, match=r"slices: expected runs that name their split's checkpoint .* " + copied
    ):
        compare_runs(
            run_ids=[trained["ease"], copied], settings=ComparisonSettings(slices=("history",), n_resamples=99)
        )
    assert len(mlflow.search_runs(search_all_experiments=True)) == before


def _count_runs():
    return len(mlflow.search_runs(search_all_experiments=True))


def test_a_split_that_cannot_be_sliced_so_or_a_bad_checkpoint_is_refused_before_any_run(trained, copy_run, tmp_path):
    before = _count_runs()
    for spec, match in [
        ("history:150", r"expected at least 2 users in every stratum of 'history:150'"),
        ("history:1000", r"bins: expected 2 to \d+ quantile bins \(at most one a user\), found 1000"),
    ]:
        settings = ComparisonSettings(slices=(spec,), n_resamples=99, reference="Popularity")
        with pytest.raises(RunSelectionError, match=r"slices: .*" + match):
            compare_runs(run_ids=[trained["ease"], trained["pop"]], settings=settings)
    lost = copy_run(trained["pop"], tmp_path, model="Lost")
    MlflowClient().log_param(lost, "checkpoint", str(tmp_path / "gone.zip"))
    for order in ([trained["ease"], lost], [lost, trained["ease"]]):  # whichever run comes first
        with pytest.raises(RunSelectionError, match=f"slices: run {lost} names checkpoint .*gone.zip"):
            compare_runs(run_ids=order, settings=ComparisonSettings(slices=("history",), n_resamples=99))
    assert _count_runs() == before + 1  # the copied run alone


def test_the_strata_count_in_the_memory_bound_before_any_run(trained, monkeypatch):
    """The bound is checked once the split's slices are built, their strata counted, before a run is made (the bound
    is lowered here: the demo split's strata are too few to reach 4 GiB)."""
    from mlflow_recsys.stats import _comparison

    monkeypatch.setattr(_comparison, "MAX_REPLICATE_BYTES", 1)
    before = _count_runs()
    settings = ComparisonSettings(slices=("history:3", "target_popularity"), n_resamples=99, reference="Popularity")
    with pytest.raises(
        ValueError, match=r"99 resamples for each of \d+ hypotheses and \d+ stratum columns of its slices"
    ):
        compare_runs(run_ids=[trained["ease"], trained["pop"]], settings=settings)
    assert _count_runs() == before


def test_the_printout_shows_the_slices_and_the_global_metrics(trained):
    from mlflow_recsys.report._console import comparison_printout

    settings = ComparisonSettings(
        metrics=("ndcg@100",), n_resamples=199, reference="Popularity", slices=("cold:10",),
        global_metrics=("coverage@20",),
    )  # fmt: skip
    with pytest.warns(UserWarning):
        outcome = compare_runs(run_ids=[trained["ease"], trained["pop"]], settings=settings)
    printed = comparison_printout(outcome, None, "auto")
    row = outcome.report.global_metrics.comparisons[0]
    assert "Global metrics" in printed and f"{row.difference:+.4f}" in printed
    assert "Exploratory slices" in printed and "cold: at most 10 fold-in items" in printed
    params = MlflowClient().get_run(outcome.run_id).data.params
    assert params["slices"] == "cold:10" and params["global_metrics"] == "coverage@20"
    # read back from the run: the slices' and the global metrics' files come with the report
    loaded = load_comparison(outcome.run_id)
    assert loaded.slices.to_frame().equals(outcome.report.slices.to_frame())
    assert loaded.global_metrics.to_frame().equals(outcome.report.global_metrics.to_frame())
    assert loaded.to_frame().equals(outcome.report.to_frame())


def test_global_metrics_of_a_run_without_lists_are_refused_naming_it(trained, copy_run, tmp_path):
    def drop_lists(meta):
        return {k: v for k, v in meta.items() if k != "rankings"}

    bare = copy_run(trained["pop"], tmp_path, model="Bare", edit_meta=drop_lists)
    settings = ComparisonSettings(global_metrics=("coverage@20",), n_resamples=99)
    with pytest.raises(RunSelectionError, match=f"global_metrics: .*found none in run {bare} .*drop --global-metrics"):
        compare_runs(run_ids=[trained["ease"], bare], settings=settings)
    deep = ComparisonSettings(global_metrics=("gini@500",), n_resamples=99)
    with pytest.raises(RunSelectionError, match=r"global_metrics: expected lists at least 500 deep .*found 100 in run"):
        compare_runs(run_ids=[trained["ease"], trained["pop"]], settings=deep)


def test_split_slices_says_which_split_cannot_be_sliced(trained, tmp_path):
    split = load_recsys_split(resolve_checkpoint(trained["checkpoint"], str(tmp_path)))
    kwargs = dict(
        source=split.test_source_matrix,
        targets=split.test_target_matrix,
        sample_ids=split.test_eval_user_ids,
        item_popularity=ItemPopularity.from_interactions(split.x_train).counts,
    )
    with pytest.raises(ValueError, match="max_items: expected cold users .* found every user warm"):
        split_slices(["cold:0"], **kwargs)
