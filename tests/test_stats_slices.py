"""Slices: the strata builders by hand, each stratum's comparison against independent computation (the mean by hand,
scipy's paired t-test, an enumeration of sign flips), Holm within the slice, Cochran's Q against statsmodels."""

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import scipy.stats
from statsmodels.stats.meta_analysis import combine_effects

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.metrics import long_tail_items
from mlflow_recsys.stats import (
    HETEROGENEITY_COLUMNS,
    SLICE_COLUMNS,
    Slice,
    adjust_p_values,
    cold_slice,
    compare_models,
    history_lengths,
    history_slice,
    target_popularity_slice,
)
from mlflow_recsys.stats._comparison import check_replicate_memory, stratum_columns
from mlflow_recsys.stats._slices import cochran_q


def _results(n=120, seed=0, shift=0.05):
    rng = np.random.default_rng(seed)
    ids = np.arange(n) + 1000
    base = rng.random((2, n))
    cand = base + shift * rng.standard_normal((2, n)) + np.linspace(-0.05, 0.1, n)
    fp = "f" * 64
    return {
        "base": EvaluationResult.from_per_user(
            {"a@10": base[0], "b@10": base[1]}, sample_ids=ids, targets_fingerprint=fp
        ),
        "cand": EvaluationResult.from_per_user(
            {"a@10": cand[0], "b@10": cand[1]}, sample_ids=ids, targets_fingerprint=fp
        ),
    }, ids


def test_history_slice_quantile_bins_by_hand():
    lengths = pd.Series([1, 2, 3, 4, 5, 6, 7, 8], index=list("abcdefgh"))
    sl = history_slice(lengths, bins=2)
    # The lower median of 1..8 is 4: the bins are 1-4 (from the shortest history) and >=5.
    assert sl.strata == ("1-4", ">=5")
    assert sl.labels.to_dict() == {k: ("1-4" if v <= 4 else ">=5") for k, v in lengths.items()}
    given = history_slice(lengths, bins=[2, 5])
    assert given.strata == ("0-2", "3-5", ">=6")
    assert given.labels["c"] == "3-5" and given.labels["f"] == ">=6" and given.labels["b"] == "0-2"


def test_history_slice_merges_equal_quantiles_and_refuses_one_stratum():
    lengths = pd.Series([3] * 9 + [10], index=range(10))
    sl = history_slice(lengths, bins=4)
    assert sl.strata == ("3", ">=4")
    with pytest.raises(ValueError, match="at least two strata"):
        history_slice(pd.Series([3] * 10), bins=4)
    with pytest.raises(ValueError, match="bins: expected increasing"):
        history_slice(lengths, bins=[5, 5])
    with pytest.raises(ValueError, match="history_length: expected a count"):
        history_slice(pd.Series([1.5, 2.0]), bins=2)


def test_cold_slice_and_history_lengths():
    source = sp.csr_matrix(np.array([[1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]]))
    lengths = history_lengths(source, np.array([7, 8, 9, 10]))
    assert lengths.to_dict() == {7: 1, 8: 3, 9: 0, 10: 4}
    sl = cold_slice(lengths, max_items=1)
    assert sl.labels.to_dict() == {7: "cold", 8: "warm", 9: "cold", 10: "warm"}
    with pytest.raises(ValueError, match="every user cold"):
        cold_slice(lengths, max_items=4)


def test_long_tail_items_and_target_popularity_slice():
    popularity = np.array([50, 3, 3, 20, 1, 0, 7, 2, 9, 4])
    tail = long_tail_items(popularity, head_share=0.2)
    # ceil(0.2 * 10) = 2 head items: the two most popular, items 0 and 3.
    assert np.flatnonzero(~tail).tolist() == [0, 3]
    # A head of 6: 50, 20, 9, 7, 4, then one of the tied 3s (items 1 and 2), the lower index.
    assert np.flatnonzero(~long_tail_items(popularity, head_share=0.6)).tolist() == [0, 1, 3, 6, 8, 9]
    targets = sp.csr_matrix(
        np.array([[1, 0, 0, 1, 0, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0, 0, 0]])
    )
    sl = target_popularity_slice(targets, popularity, np.array(["u", "v", "w"]))
    # u: both head; v: both tail; w: one of two in the tail, which is at least half.
    assert sl.labels.to_dict() == {"u": "head", "v": "tail", "w": "tail"}
    with pytest.raises(ValueError, match="head_share"):
        long_tail_items(popularity, head_share=1.0)


def test_each_stratum_is_the_comparison_of_its_users():
    results, ids = _results()
    labels = pd.Series(np.where(np.arange(ids.size) < 50, "early", "late"), index=ids)
    sl = Slice.from_labels("period", labels)
    report = compare_models(results, metrics=["a@10", "b@10"], test_method="t", slices=sl, random_state=3)
    frame = report.slices.to_frame()
    assert list(frame.columns) == list(SLICE_COLUMNS) and len(frame) == 4
    for row in frame.itertuples():
        users = (labels == row.stratum).to_numpy()
        b = results["base"].per_user[row.metric][users]
        c = results["cand"].per_user[row.metric][users]
        assert row.n_units == users.sum()
        assert row.difference == pytest.approx(np.mean(c - b), rel=1e-12)
        assert row.p_value == pytest.approx(scipy.stats.ttest_rel(c, b).pvalue, rel=1e-9)
        assert row.ci_low <= row.difference <= row.ci_high
        assert row.exploratory and row.family == "slice:period"
    raw = frame["p_value"].to_numpy()
    np.testing.assert_allclose(frame["adjusted_p_value"], adjust_p_values(raw, "holm"), rtol=0, atol=0)


def test_exact_randomization_in_a_small_stratum_against_enumeration():
    results, ids = _results(n=40, seed=5)
    labels = pd.Series(["few"] * 6 + ["many"] * 34, index=ids)
    report = compare_models(results, metrics="a@10", slices=Slice.from_labels("size", labels), random_state=0)
    row = report.slices.to_frame().set_index("stratum").loc["few"]
    d = results["cand"].per_user["a@10"][:6] - results["base"].per_user["a@10"][:6]
    means = [np.mean(np.array(s) * d) for s in itertools.product((1, -1), repeat=6)]
    expected = np.mean(np.abs(means) >= abs(d.mean()) - 1e-12)
    assert row.test_method == "randomization-exact"
    assert row.p_value == pytest.approx(expected, abs=1e-12)


def test_cochran_q_against_statsmodels():
    rng = np.random.default_rng(2)
    for _ in range(5):
        means, variances = rng.normal(0, 0.1, 4), rng.uniform(0.001, 0.01, 4)
        q, df, p, i2 = cochran_q(means, variances)
        sm = combine_effects(means, variances)
        assert q == pytest.approx(sm.q, rel=1e-12)
        assert df == 3
        assert p == pytest.approx(scipy.stats.chi2.sf(sm.q, 3), rel=1e-12)
        assert i2 == pytest.approx(max(0.0, sm.i2), abs=1e-12)
    assert np.isnan(cochran_q(np.array([0.1, 0.2]), np.array([0.0, 0.1]))[0])


def test_heterogeneity_rows_are_cochran_q_of_the_strata():
    results, ids = _results(n=90, seed=1)
    lengths = pd.Series(np.arange(90) % 30, index=ids)
    report = compare_models(results, metrics=["a@10"], slices=[history_slice(lengths, bins=3)])
    het = report.slices.heterogeneity_frame()
    assert list(het.columns) == list(HETEROGENEITY_COLUMNS) and len(het) == 1
    labels = history_slice(lengths, bins=3).labels
    d = results["cand"].per_user["a@10"] - results["base"].per_user["a@10"]
    groups = [d[(labels == s).to_numpy()] for s in history_slice(lengths, bins=3).strata]
    sm = combine_effects(np.array([g.mean() for g in groups]), np.array([g.var(ddof=1) / g.size for g in groups]))
    assert het.loc[0, "q"] == pytest.approx(sm.q, rel=1e-9) and het.loc[0, "df"] == 2


def test_slices_leave_the_main_rows_bit_identical_and_repeat_exactly():
    results, ids = _results()
    sl = Slice.from_labels("half", pd.Series(np.arange(ids.size) % 2, index=ids))
    plain = compare_models(results, metrics=["a@10", "b@10"], primary="a@10")
    sliced = compare_models(results, metrics=["a@10", "b@10"], primary="a@10", slices=[sl])
    again = compare_models(results, metrics=["a@10", "b@10"], primary="a@10", slices=[sl])
    pd.testing.assert_frame_equal(plain.to_frame(), sliced.to_frame())
    pd.testing.assert_frame_equal(sliced.slices.to_frame(), again.slices.to_frame())
    assert plain.slices is None
    assert set(sliced.to_frame()["family"]) == {"primary", "secondary"}


def test_bad_slices_are_refused_before_any_resampling():
    results, ids = _results()
    partial = Slice.from_labels("partial", pd.Series("x", index=ids[:-3]))
    with pytest.raises(ValueError, match=r"slices\['partial'\]: expected a stratum for every compared user"):
        compare_models(results, metrics="a@10", slices=partial)
    lonely = Slice.from_labels("lonely", pd.Series(["x"] + ["y"] * (ids.size - 1), index=ids))
    with pytest.raises(ValueError, match=r"at least 2 compared users per stratum, found \{'x': 1\}"):
        compare_models(results, metrics="a@10", slices=lonely)
    one = Slice.from_labels("one", pd.Series(["x"] * ids.size + ["y"], index=[*ids, -1]))  # "y": no compared user
    with pytest.raises(ValueError, match=r"slices\['one'\]: expected the compared users in at least 2 strata, .* 'x'"):
        compare_models(results, metrics="a@10", slices=one)
    twice = Slice.from_labels("s", pd.Series(np.arange(ids.size) % 2, index=ids))
    with pytest.raises(ValueError, match="each slice name once"):
        compare_models(results, metrics="a@10", slices=[twice, twice])
    with pytest.raises(ValueError, match="hypothesis 'superiority'"):
        compare_models(
            results, metrics="a@10", reference="base", hypothesis="non-inferiority", margin=0.1, slices=twice
        )
    with pytest.raises(TypeError, match=r"slices\[0\]: expected a Slice"):
        compare_models(results, metrics="a@10", slices=["history:4"])
    with pytest.raises(ValueError, match="columns 'sample_id' and 'label'"):
        Slice.from_labels("x", pd.DataFrame({"user": [1]}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Slice.from_labels("ok", {1: "a", 2: "b"})


def test_the_strata_count_in_the_bound_on_replicate_memory():
    """Each pair holds B stratified bootstrap and B sign-flip means per stratum and padded metric column: 100 strata
    of 2 users x 4 columns at B = 1,000,000 would hold 6.0 GiB, refused before any resampling (minutes of it)."""
    results, ids = _results(n=200)
    pairs_of_users = Slice.from_labels("pairs", pd.Series((np.arange(ids.size) // 2).astype(str), index=ids))
    assert stratum_columns(1, 100, 2) == 400  # two metrics take a whole vector of four
    with pytest.raises(
        ValueError,
        match=r"1,000,000 resamples for each of 2 hypotheses and 400 stratum columns of its slices would keep 6\.0 "
        r"GiB .* compare fewer metrics, models or strata",
    ):
        compare_models(results, metrics=["a@10", "b@10"], n_resamples=1_000_000, slices=pairs_of_users)
    check_replicate_memory(1_000_000, 2)  # the same comparison without the slice is within the bound


def test_slices_are_saved_read_back_and_printed_as_exploratory(tmp_path):
    results, ids = _results()
    sl = history_slice(pd.Series(np.arange(ids.size) % 17, index=ids), bins=3)
    report = compare_models(results, metrics=["a@10", "b@10"], slices=[sl])
    back = type(report).load(report.save(tmp_path / "saved"))
    pd.testing.assert_frame_equal(report.slices.to_frame(), back.slices.to_frame())
    pd.testing.assert_frame_equal(report.slices.heterogeneity_frame(), back.slices.heterogeneity_frame())
    assert back.slices.definitions == {"history": sl.definition}
    text, markdown = str(back), back.to_markdown()
    assert "Exploratory slices" in text and "## Exploratory slices" in markdown
    # One line per stratum row after the caveat, the definition and the header.
    block = text.split("Exploratory slices")[1].splitlines()
    assert len(block) == 1 + 1 + 1 + len(report.slices.strata)
    plain = compare_models(results, metrics="a@10")
    assert "slices" not in str(plain).lower()
    assert type(plain).load(plain.save(tmp_path / "plain")).slices is None


def test_the_holm_family_is_the_whole_slice_across_pairs():
    results, ids = _results(n=60, seed=4)
    results["third"] = EvaluationResult.from_per_user(
        {k: v[::-1].copy() for k, v in results["cand"].per_user.items()}, sample_ids=ids, targets_fingerprint="f" * 64
    )
    sl = Slice.from_labels("half", pd.Series(np.arange(ids.size) % 2, index=ids))
    frame = compare_models(results, metrics=["a@10", "b@10"], reference="base", slices=sl).slices.to_frame()
    # 2 candidates x 2 metrics x 2 strata, adjusted together.
    assert len(frame) == 8 and set(frame["family_size"]) == {8}
    np.testing.assert_array_equal(frame["adjusted_p_value"], adjust_p_values(frame["p_value"].to_numpy(), "holm"))


def test_history_slice_names_a_wrong_input_and_says_when_quantile_bins_merged():
    with pytest.raises(ValueError, match="history_length: expected a pd.Series or mapping .*found ndarray"):
        history_slice(np.arange(50))
    lengths = pd.Series([1, 1, 1, 1, 5, 5, 5, 5], index=np.arange(8))
    with pytest.raises(ValueError, match="bins: expected an int >= 2 or increasing ints .*found True"):
        history_slice(lengths, bins=True)
    merged = history_slice(lengths, bins=4)  # two distinct lengths: two strata, and the definition says so
    assert merged.strata == ("1", ">=2") and "4 quantile bins asked, 2 distinct" in merged.definition
    for bins in (1, 9, 10**20):  # more bins than users; 10**20 once reached NumPy as a 10**20-point linspace
        with pytest.raises(
            ValueError, match=rf"bins: expected 2 to 8 quantile bins \(at most one a user\), found {bins}"
        ):
            history_slice(lengths, bins=bins)


def test_ids_past_2_53_are_matched_exactly_between_int_and_float():
    """pandas looks int ids up among float keys as floats, where 2**53 + 1 rounds to 2**53: every match is confirmed
    exactly, so a neighbour's label is never taken."""
    ids = np.array([2**53 + 1, 2**53 + 3, 2**53 + 5, 2**53 + 7], dtype=np.int64)
    keys = np.array([2**53, 2**53 + 2, 2**53 + 4, 2**53 + 6], dtype=np.float64)  # four other users
    with pytest.raises(
        ValueError, match=r"found none for 4 of 4 .*; the slice's ids are float64, the compared ids int64"
    ):
        Slice.from_labels("g", pd.Series(list("abab"), index=keys)).unit_strata(ids)
    with pytest.raises(ValueError, match=r"found none for 4 of 4"):
        Slice.from_labels("g", pd.Series(list("abab"), index=ids)).unit_strata(keys)
    exact = Slice.from_labels("g", pd.Series(list("abab"), index=keys))
    np.testing.assert_array_equal(exact.unit_strata(keys.astype(np.int64)), [0, 1, 0, 1])  # 2**53 + 2k are floats
    np.testing.assert_array_equal(exact.unit_strata(np.array([2**53 + 6, 2**53])), [1, 0])


def test_a_blank_stratum_label_is_refused_as_a_blank_slice_name_is():
    for blank in ("", "   ", "\t"):
        with pytest.raises(ValueError, match=r"slice 's': expected stratum labels that are not blank, found \["):
            Slice.from_labels("s", pd.Series([blank, "a"], index=[1, 2]))
    with pytest.raises(ValueError, match="expected a non-empty slice name"):
        Slice.from_labels("   ", pd.Series(["b", "a"], index=[1, 2]))


def test_slice_errors_show_ids_as_python_values():
    with pytest.raises(ValueError, match=r"expected one label per sample_id, found 0 twice"):
        Slice("d", pd.Series(["a", "b", "a"], index=np.array([0, 0, 1])), ("a", "b"), "d")
    with pytest.raises(ValueError, match=r"expected a label for every sample id, found none for 1$"):
        Slice.from_labels("n", pd.Series(["a", None, "b"], index=np.arange(3)))
