"""The seed-averaged comparison: each model's per-user values averaged over its seeds, compared paired over users."""

import numpy as np
import pytest
import scipy.stats

from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats import FewNonzeroUnitsWarning, average_over_seeds, compare_models, compare_seed_averaged
from simulated import result

N_USERS = 400


@pytest.fixture
def models():
    """A deterministic baseline and a candidate trained under three seeds, each seed moving every user a little."""
    rng = np.random.default_rng(7)
    base = {"ndcg@10": rng.random(N_USERS), "recall@10": rng.random(N_USERS)}
    seeded = {
        seed: result({k: np.clip(v + 0.03 + rng.normal(0, 0.1, N_USERS), 0, 1) for k, v in base.items()})
        for seed in (3, 11, 5)
    }
    return result(base), seeded


def test_average_over_seeds_is_the_per_user_mean(models):
    _, seeded = models
    averaged = average_over_seeds(seeded)
    for key in ("ndcg@10", "recall@10"):
        by_hand = np.array([sum(seeded[s].per_user[key][u] for s in (3, 5, 11)) / 3 for u in range(N_USERS)])
        np.testing.assert_allclose(averaged.per_user[key], by_hand, rtol=0, atol=1e-15)
        assert averaged.metrics[key] == pytest.approx(by_hand.mean(), abs=1e-15)
    np.testing.assert_array_equal(averaged.sample_ids, np.arange(N_USERS))
    assert averaged.targets_fingerprint == "fp"
    # The mapping's order does not change a bit of the result.
    reordered = average_over_seeds({s: seeded[s] for s in (11, 3, 5)})
    for key in ("ndcg@10", "recall@10"):
        np.testing.assert_array_equal(reordered.per_user[key], averaged.per_user[key])


def test_seed_averaged_report_compares_the_averages_and_labels_its_seed_counts(models):
    det, seeded = models
    report = compare_seed_averaged(
        {"EASE": det, "ELSA": seeded},
        metrics=["ndcg@10", "recall@10"],
        reference="EASE",
        primary="ndcg@10",
        n_resamples=999,
    )
    assert report.seed_averaged
    for c in report.comparisons:
        mean_candidate = np.mean([seeded[s].per_user[c.metric] for s in seeded], axis=0)
        d = mean_candidate - det.per_user[c.metric]
        assert c.difference == pytest.approx(d.mean(), abs=1e-14)
        assert (c.wins, c.ties, c.losses) == (int((d > 0).sum()), int((d == 0).sum()), int((d < 0).sum()))
        assert (c.baseline_seeds, c.candidate_seeds) == (1, 3)
    # Same settings, same streams: exactly compare_models on the averaged results, with t from scipy.
    plain = compare_models(
        {"EASE": det, "ELSA": average_over_seeds(seeded)},
        metrics=["ndcg@10", "recall@10"],
        reference="EASE",
        primary="ndcg@10",
        n_resamples=999,
    )
    frame, expected = report.to_frame(), plain.to_frame()
    assert (expected[["baseline_seeds", "candidate_seeds"]] == 1).all().all()
    columns = [c for c in frame.columns if c not in ("baseline_seeds", "candidate_seeds")]
    assert frame[columns].equals(expected[columns])
    t_report = compare_seed_averaged(
        {"EASE": det, "ELSA": seeded}, metrics="ndcg@10", reference="EASE", test_method="t"
    )
    d = np.mean([seeded[s].per_user["ndcg@10"] for s in seeded], axis=0) - det.per_user["ndcg@10"]
    assert t_report.comparisons[0].p_value == pytest.approx(scipy.stats.ttest_1samp(d, 0).pvalue, rel=1e-10)


def test_averaging_shrinks_the_retraining_noise_in_each_users_difference(models):
    det, seeded = models
    averaged = compare_seed_averaged(
        {"EASE": det, "ELSA": seeded}, metrics="ndcg@10", reference="EASE", n_resamples=999
    ).comparisons[0]
    singles = [
        compare_models(
            {"EASE": det, "ELSA": seeded[s]}, metrics="ndcg@10", reference="EASE", n_resamples=999
        ).comparisons[0]
        for s in seeded
    ]
    sd = np.std(averaged.unit_differences, ddof=1)
    assert all(sd < np.std(c.unit_differences, ddof=1) for c in singles)
    assert averaged.mde < min(c.mde for c in singles)


def test_single_instances_and_one_seed_are_not_called_seed_averaged(models):
    det, seeded = models
    report = compare_seed_averaged({"EASE": det, "ELSA": {3: seeded[3]}}, metrics="ndcg@10", reference="EASE")
    assert not report.seed_averaged
    assert report.to_frame().equals(
        compare_models({"EASE": det, "ELSA": seeded[3]}, metrics="ndcg@10", reference="EASE").to_frame()
    )
    assert "Seed-averaged" not in report.to_markdown() and "Seed-averaged" not in report.methods_text()


def test_every_text_says_the_values_were_averaged_over_seeds(models):
    det, seeded = models
    report = compare_seed_averaged({"EASE": det, "ELSA": seeded}, metrics="ndcg@10", reference="EASE", n_resamples=999)
    assert report.to_markdown().startswith("Seed-averaged over training seeds (EASE: 1 seed; ELSA: 3 seeds); ")
    methods = report.methods_text()
    assert "Seed-averaged" in methods and "a new training seed" in methods
    assert report.results_text("ndcg@10", "ELSA").startswith("Averaged over training seeds (ELSA: 3, EASE: 1), ELSA")


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda r: result(r.per_user, ids=np.arange(N_USERS)[::-1]), r"results\['ELSA'\]: seed 5 .*other sample ids"),
        (lambda r: result(r.per_user, fingerprint="other"), r"results\['ELSA'\]: seed 5 has targets fingerprint"),
    ],
)
def test_seeds_scored_on_other_users_or_targets_are_refused_naming_the_model(models, edit, match):
    det, seeded = models
    bad = {**seeded, 5: edit(seeded[5])}
    with pytest.raises(ValueError, match=match):
        compare_seed_averaged({"EASE": det, "ELSA": bad}, metrics="ndcg@10", reference="EASE")


def test_bad_arguments_are_named(models):
    det, _ = models
    with pytest.raises(ValueError, match=r"results\['ELSA'\]: expected at least one seed"):
        compare_seed_averaged({"EASE": det, "ELSA": {}}, metrics="ndcg@10")
    with pytest.raises(TypeError, match=r"results\['ELSA'\]\[0\]: expected an EvaluationResult, found dict"):
        compare_seed_averaged({"EASE": det, "ELSA": {0: {"ndcg@10": [1.0]}}}, metrics="ndcg@10")
    with pytest.raises(TypeError, match="results: expected a mapping"):
        compare_seed_averaged([det, det], metrics="ndcg@10")


@pytest.mark.parametrize("copies", [3, 10])
def test_a_model_averaged_over_copies_of_the_baseline_ties_on_every_user(copies):
    # (0.4 + 0.4 + 0.4) / 3 is 0.4 plus rounding; such a user is a tie, not a win.
    rng = np.random.default_rng(2)
    values = rng.choice([0.0, 0.2, 0.4, 0.8, 1 / 3, 0.1], size=200)
    base = result({"recall@20": values})
    with pytest.warns(FewNonzeroUnitsWarning, match="only 0 of 200 users differ"):
        report = compare_seed_averaged(
            {"base": base, "copy": dict.fromkeys(range(copies), base)},
            metrics="recall@20",
            reference="base",
            n_resamples=999,
        )
    c = report.comparisons[0]
    assert (c.wins, c.ties, c.losses, c.n_nonzero) == (0, 200, 0, 0)
    assert c.difference == 0 and c.p_value == 1 and c.direction == "inconclusive"


def test_seeds_with_per_user_values_of_another_length_are_named():
    good = result({"m": np.zeros(5)})
    short = EvaluationResult(
        metrics={"m": 0.0}, per_user={"m": np.zeros(4)}, sample_ids=np.arange(5), targets_fingerprint="fp"
    )
    with pytest.raises(
        ValueError,
        match=r"results\[1\]: expected per-user values of 'm' .*\(5\), found shape \(4,\)",
    ):
        average_over_seeds({0: good, 1: short})
    # Seeds of mixed types still have one summation order.
    mixed = average_over_seeds({(1, 2): good, "a": good, 1: good})
    np.testing.assert_array_equal(mixed.per_user["m"], np.zeros(5))
