"""Seed spread: retraining variance beside user variance."""

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

from mlflow_recsys.stats import FewSeedsWarning, compare_pair, seed_spread
from simulated import result


@pytest.fixture
def runs():
    rng = np.random.default_rng(0)
    base = {"a": rng.random(500), "b": rng.random(500)}
    det = result(base)
    seeded = {
        seed: result({k: v + rng.normal(0.01 + 0.003 * seed, 0.05, 500) for k, v in base.items()}) for seed in range(5)
    }
    return det, seeded


def test_one_deterministic_side_uses_sd_of_per_seed_differences(runs):
    det, seeded = runs
    spread = seed_spread(det, seeded, metrics=["a", "b"], baseline_name="EASE", candidate_name="ELSA", n_resamples=999)
    frame = spread.to_frame()
    for metric in ("a", "b"):
        cmps = [
            compare_pair(det, seeded[s], metric=metric, baseline_name="EASE", candidate_name="ELSA", n_resamples=999)
            for s in range(5)
        ]
        diffs = np.array([c.difference for c in cmps])
        sd_users = np.mean([c.bootstrap_standard_error for c in cmps])
        row = frame[frame.metric == metric].iloc[0]
        assert row.protocol == "one-side-seeded" and row.n_seeds == 5
        assert row.mean_difference == pytest.approx(diffs.mean())
        assert row.sd_retraining == pytest.approx(np.std(diffs, ddof=1))
        assert row.sd_users == pytest.approx(sd_users)
        assert row.ratio == pytest.approx(np.std(diffs, ddof=1) / sd_users)
        assert row.widens_by == pytest.approx(math.hypot(sd_users, np.std(diffs, ddof=1)) / sd_users - 1)
        assert (row.min_difference, row.max_difference) == pytest.approx((diffs.min(), diffs.max()))
    assert len(spread.per_seed_frame()) == 10


def test_sign_reversals_count_seeds_against_the_mean():
    rng = np.random.default_rng(1)
    base = rng.random(300)
    det = result({"m": base})
    shifts = [0.02, 0.03, -0.01, 0.025, 0.02]
    seeded = {s: result({"m": base + shift}) for s, shift in enumerate(shifts)}
    row = seed_spread(det, seeded, metrics="m", n_resamples=199).to_frame().iloc[0]
    assert row.sign_reversals == 1
    text = seed_spread(det, seeded, metrics="m", n_resamples=199).results_text("m")
    assert "1 of 5 seeds reversed the sign" in text


def test_independent_seeds_add_each_models_spread_in_quadrature(runs):
    det, seeded = runs
    rng = np.random.default_rng(2)
    other = {s: result({k: v + rng.normal(0.0, 0.01, 500) for k, v in det.per_user.items()}) for s in range(5)}
    row = seed_spread(other, seeded, metrics="a", n_resamples=199).to_frame().iloc[0]
    base_aggs = np.array([other[s].per_user["a"].mean() for s in range(5)])
    cand_aggs = np.array([seeded[s].per_user["a"].mean() for s in range(5)])
    assert row.protocol == "independent-seeds"
    assert row.sd_retraining == pytest.approx(math.hypot(base_aggs.std(ddof=1), cand_aggs.std(ddof=1)))
    assert row.mean_difference == pytest.approx(cand_aggs.mean() - base_aggs.mean())


def test_paired_seeds_pair_by_seed_and_need_the_same_seeds(runs):
    det, seeded = runs
    other = {s: result({k: v + 0.001 * s for k, v in det.per_user.items()}) for s in range(5)}
    row = seed_spread(other, seeded, metrics="a", paired_seeds=True, n_resamples=199).to_frame().iloc[0]
    diffs = [seeded[s].per_user["a"].mean() - other[s].per_user["a"].mean() for s in range(5)]
    assert row.protocol == "paired-seeds"
    assert row.sd_retraining == pytest.approx(np.std(diffs, ddof=1))
    with pytest.raises(ValueError, match="same seeds"):
        seed_spread(
            {9: other[0], 8: other[1], 7: other[2], 6: other[3], 5: other[4]}, seeded, metrics="a", paired_seeds=True
        )
    with pytest.raises(ValueError, match="paired_seeds"):
        seed_spread(det, seeded, metrics="a", paired_seeds=True)


def test_fewer_than_two_seeds_raises_and_few_seeds_warn(runs):
    det, seeded = runs
    with pytest.raises(ValueError, match="at least 2 seeds.*found 1"):
        seed_spread(det, {0: seeded[0]}, metrics="a")
    with pytest.warns(FewSeedsWarning, match="only 3 seeds"):
        seed_spread(det, {s: seeded[s] for s in range(3)}, metrics="a", n_resamples=199)
    with pytest.raises(ValueError, match="at least one side"):
        seed_spread(det, det, metrics="a")


def test_ratio_near_one_with_few_seeds_adds_a_note():
    rng = np.random.default_rng(3)
    n = 400
    base = rng.random(n)
    det = result({"m": base})
    noise = rng.normal(0, 0.05, n)
    se = np.std(noise) / np.sqrt(n)  # the user-level SD of the difference
    shifts = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    shifts = shifts / np.std(shifts, ddof=1) * se  # retraining SD equal to the user SD
    seeded = {s: result({"m": base + 0.01 + noise + shift}) for s, shift in enumerate(shifts)}
    spread = seed_spread(det, seeded, metrics="m", n_resamples=999)
    row = spread.to_frame().iloc[0]
    assert 0.7 <= row.ratio <= 1.4
    assert "more seeds" in row.notes and "35%" in row.notes
    assert "more seeds" in spread.results_text("m")


def test_importing_stats_imports_neither_torch_nor_mlflow():
    code = "import sys, mlflow_recsys.stats; print('torch' in sys.modules, 'mlflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_models_that_tie_on_every_user_give_a_sentence_without_nan():
    det = result({"m": np.linspace(0, 1, 50)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spread = seed_spread(det, {0: det, 1: det}, metrics="m", n_resamples=99)
    row = spread.to_frame().iloc[0]
    assert row.sd_users == 0 and np.isnan(row.ratio)
    text = spread.results_text("m")
    assert "nan" not in text and "with no spread across users (bootstrap standard error 0)" in text
