"""The verdict across datasets: each piece recomputed from the per-user values by the functions it combines, and the
datasets and models it leaves out."""

import numpy as np
import pandas as pd
import pytest

from mlflow_recsys.stats import (
    EFFECT_COLUMNS,
    paired_effect,
    random_effects,
    rank_across_datasets,
    verdict_across_datasets,
)
from simulated import result

METRICS = ("ndcg@100", "recall@20")


def _study(shifts: dict[str, float], datasets=("a", "b", "c", "d"), n=200, seed=0):
    """Dataset -> model -> result: each model's per-user values the reference's plus its shift and noise."""
    rng = np.random.default_rng(seed)
    out = {}
    for i, dataset in enumerate(datasets):
        base = {m: rng.uniform(0.1, 0.6, n + 10 * i) for m in METRICS}
        out[dataset] = {
            model: result({m: np.clip(v + shift + rng.normal(0, 0.05, v.size), 0, 1) for m, v in base.items()})
            for model, shift in shifts.items()
        }
    return out


def test_each_pooled_effect_is_the_meta_analysis_of_the_per_dataset_paired_effects():
    study = _study({"EASE": 0.0, "ELSA": 0.02, "Pop": -0.1})
    verdict = verdict_across_datasets(study, metrics=METRICS, reference="EASE", scale="log-ratio")
    assert [(c, m) for c, m, _ in verdict.effects] == [(c, m) for c in ("ELSA", "Pop") for m in METRICS]
    for candidate, metric, meta in verdict.effects:
        pairs = {
            d: paired_effect(r[candidate].per_user[metric], r["EASE"].per_user[metric], "log-ratio")
            for d, r in study.items()
        }
        expected = random_effects(
            {d: p[0] for d, p in pairs.items()}, {d: p[1] for d, p in pairs.items()}, scale="log-ratio"
        )
        assert meta.effect == pytest.approx(expected.effect, rel=1e-12) and meta.tau2 == pytest.approx(expected.tau2)
        assert meta.datasets == ("a", "b", "c", "d") and meta.scale == "log-ratio"
    frame = verdict.effects_frame()
    assert tuple(frame.columns) == EFFECT_COLUMNS and len(frame) == 4 * 5  # 4 analyses x (4 datasets + pooled)


def test_the_ranks_are_those_of_each_models_mean_over_users():
    study = _study({"EASE": 0.0, "ELSA": 0.02, "Pop": -0.1})
    verdict = verdict_across_datasets(study, metrics=METRICS, posthoc="nemenyi", confidence_level=0.9)
    assert verdict.effects == () and [m for m, _ in verdict.ranks] == list(METRICS)
    for metric, ranks in verdict.ranks:
        scores = pd.DataFrame({m: {d: r[m].metrics[metric] for d, r in study.items()} for m in ("EASE", "ELSA", "Pop")})
        expected = rank_across_datasets(scores, posthoc="nemenyi", alpha=0.1)
        assert ranks.models == expected.models and np.array_equal(ranks.p_values, expected.p_values)
        assert ranks.alpha == pytest.approx(0.1)
    assert set(verdict.ranks_frame()["metric"]) == set(METRICS)


def test_a_model_missing_on_a_dataset_is_pooled_where_it_was_scored_and_left_out_of_the_ranks():
    study = _study({"EASE": 0.0, "ELSA": 0.02, "Pop": -0.1}, datasets=("a", "b", "c"))
    del study["c"]["ELSA"]  # its training failed there
    del study["b"]["Pop"]
    del study["c"]["Pop"]  # only one dataset left: no pooled effect
    verdict = verdict_across_datasets(study, metrics=METRICS, reference="EASE")
    assert {(c, m): meta.datasets for c, m, meta in verdict.effects} == {("ELSA", m): ("a", "b") for m in METRICS}
    assert verdict.ranks == ()  # EASE alone is on every dataset


def test_one_dataset_gives_no_verdict_and_says_nothing_wrong():
    verdict = verdict_across_datasets(
        _study({"EASE": 0.0, "ELSA": 0.02}, datasets=("a",)), metrics=METRICS, reference="EASE"
    )
    assert verdict.effects == () and verdict.ranks == ()
    assert list(verdict.effects_frame().columns) == list(EFFECT_COLUMNS) and verdict.effects_frame().empty


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda s: s["a"].update(ELSA=result({"ndcg@100": np.ones(5)})),
            r"ELSA on a holds no per-user values of \['recall@20'\]",
        ),
        (
            lambda s: s["b"].update(ELSA=result({m: np.ones(210) for m in METRICS}, ids=np.arange(210)[::-1])),
            "scored other users",
        ),
        (lambda s: s.clear(), "results: expected a mapping"),
    ],
)
def test_bad_input_names_the_argument(edit, message):
    study = _study({"EASE": 0.0, "ELSA": 0.02}, datasets=("a", "b"))
    edit(study)
    with pytest.raises(ValueError, match=message):
        verdict_across_datasets(study, metrics=METRICS, reference="EASE")


def test_a_log_ratio_over_a_mean_of_0_leaves_that_effect_out_and_says_why():
    study = _study({"EASE": 0.0, "ELSA": 0.02, "Pop": -0.1}, datasets=("a", "b", "c"))
    zero = {m: np.zeros(v.size) for m, v in study["b"]["Pop"].per_user.items()}
    study["b"]["Pop"] = result(zero)
    verdict = verdict_across_datasets(study, metrics=METRICS, reference="Pop", scale="log-ratio")
    assert [(c, m) for c, m, _ in verdict.effects] == []  # every candidate is pooled against Pop, 0 on b
    assert verdict.notes == tuple(
        f"{c} vs Pop on {m} not pooled: on b, scale: a log ratio needs positive means, found candidate "
        f"{float(study['b'][c].per_user[m].mean())!r} and baseline {0.0!r}"
        for c in ("EASE", "ELSA")
        for m in METRICS
    )
    assert [m for m, _ in verdict.ranks] == list(METRICS)  # the ranks stand


def test_a_model_missing_on_a_dataset_is_named_as_left_out_of_the_ranks():
    study = _study({"EASE": 0.0, "ELSA": 0.02, "Pop": -0.1}, datasets=("a", "b", "c"))
    del study["c"]["ELSA"]
    verdict = verdict_across_datasets(study, metrics=METRICS, reference="EASE")
    assert verdict.unranked == ("ELSA",) and all(r.models == ("EASE", "Pop") for _, r in verdict.ranks)
