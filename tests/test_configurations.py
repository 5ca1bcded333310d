"""Runs of one model that differ in hyper-parameters are distinct candidates, in a real SQLite MLflow store.

The training runs are synthetic (per-user values drawn here, written as real per-user artifacts and tagged as
`mlflow-recsys train` tags them), so every number the comparison reports can be recomputed from the arrays
this file drew, through :mod:`mlflow_recsys.stats` alone.
"""

import html
import json
import re
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from conftest import sqlite_store
from mlflow_recsys.cli import cli
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.report._escaping import escape_latex, escape_markdown
from mlflow_recsys.stats import ComparisonSettings, compare_models, compare_seed_averaged, seed_spread
from mlflow_recsys.tracking import RunSelectionError, check_selection, compare_runs
from mlflow_recsys.tracking._candidates import configuration_names
from mlflow_recsys.tracking._limits import MAX_KEY_LENGTH, MAX_RUN_NAME_LENGTH
from mlflow_recsys.tracking._naming import model_label
from simulated import log_training_run, ranking_result

pytestmark = pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.FewSeedsWarning")

METRICS = ["ndcg@100", "recall@20"]
SETTINGS = dict(metrics=METRICS, primary="ndcg@100", n_resamples=999, random_state=3)
N_USERS = 250
EASE_50, EASE_500 = {"dtype": "float32", "l2": 50.0}, {"dtype": "float32", "l2": 500.0}
ELSA_SMALL = {"batch_size": 128, "epochs": 5, "latent_dim": 64, "lr": 0.001}
ELSA_LARGE = {"batch_size": 128, "epochs": 5, "latent_dim": 128, "lr": 0.01}


def _log_run(
    client, experiment_id, folder: Path, *, model: str, config: dict, seed: str | None, shift: float, rng_seed: int
) -> tuple[str, EvaluationResult]:
    """One FINISHED training run tagged as `mlflow-recsys train` tags it, and the result its artifacts hold."""
    run_id = log_training_run(
        client,
        experiment_id,
        folder,
        model=model,
        seed=seed,
        config=config,
        shift=shift,
        n_users=N_USERS,
        rng_seed=rng_seed,
    )
    return run_id, ranking_result(N_USERS, shift, rng_seed)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """EASE at l2=50 and l2=500, Popularity, and ELSA in two configurations (seeds 0-1 and 0-2)."""
    root = tmp_path_factory.mktemp("configurations")
    with sqlite_store(root) as experiment_id:
        client, folder = MlflowClient(), root / "logged"
        runs = {
            "ease50": _log_run(
                client, experiment_id, folder, model="EASE", config=EASE_50, seed=None, shift=0.03, rng_seed=1
            ),
            "ease500": _log_run(
                client, experiment_id, folder, model="EASE", config=EASE_500, seed=None, shift=0.05, rng_seed=2
            ),
            "pop": _log_run(
                client, experiment_id, folder, model="Popularity", config={}, seed=None, shift=0.0, rng_seed=3
            ),
        }
        for s in (0, 1):
            runs[f"small{s}"] = _log_run(
                client, experiment_id, folder, model="ELSA", config=ELSA_SMALL, seed=str(s), shift=0.02, rng_seed=10 + s
            )
        for s in (0, 1, 2):
            runs[f"large{s}"] = _log_run(
                client, experiment_id, folder, model="ELSA", config=ELSA_LARGE, seed=str(s), shift=0.04, rng_seed=20 + s
            )
        yield {
            "ids": {k: rid for k, (rid, _) in runs.items()},
            "results": {k: res for k, (_, res) in runs.items()},
            "experiment_id": experiment_id,
            "folder": folder,
        }


def _artifact(run_id: str, name: str) -> str:
    return Path(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=name)).read_text()


def test_two_ease_configurations_and_popularity_are_three_candidates_matching_the_stats_api(study):
    ids, res = study["ids"], study["results"]
    selection = [ids["pop"], ids["ease500"], ids["ease50"]]
    assert [
        r.info.run_id for r in check_selection(run_ids=selection, settings=ComparisonSettings(reference="EASE(l2=50)"))
    ] == selection
    outcome = compare_runs(run_ids=selection, settings=ComparisonSettings(reference="EASE(l2=50)", **SETTINGS))

    assert outcome.source_runs == {
        "EASE(l2=50)": {"none": ids["ease50"]},
        "EASE(l2=500)": {"none": ids["ease500"]},
        "Popularity": {"none": ids["pop"]},
    }
    # Independently: the stats API on the arrays this file drew, under the names the comparison chose.
    expected = compare_models(
        {"EASE(l2=50)": res["ease50"], "EASE(l2=500)": res["ease500"], "Popularity": res["pop"]},
        reference="EASE(l2=50)",
        **SETTINGS,
    )
    pd.testing.assert_frame_equal(outcome.report.to_frame(), expected.to_frame())
    assert [(c.baseline, c.candidate) for c in outcome.report.comparisons if c.metric == "ndcg@100"] == [
        ("EASE(l2=50)", "EASE(l2=500)"),
        ("EASE(l2=50)", "Popularity"),
    ]
    row = outcome.report.get("ndcg@100", "EASE(l2=500)")
    d = res["ease500"].per_user["ndcg@100"] - res["ease50"].per_user["ndcg@100"]
    assert row.difference == pytest.approx(d.mean())
    assert outcome.seed_averaged is None and outcome.seed_spreads == {}

    # The comparison run: every key within MLflow's limits, each name mapped back, files that read well.
    run = MlflowClient().get_run(outcome.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["mlflow.runName"] == "EASE(l2=500), Popularity vs EASE(l2=50)"
    assert len(run.data.tags["mlflow.runName"]) <= MAX_RUN_NAME_LENGTH
    assert run.data.params["reference"] == "EASE(l2=50)"
    assert run.data.tags["recsys.result"] == outcome.report.results_text("ndcg@100", "EASE(l2=500)")
    assert all(len(k) <= MAX_KEY_LENGTH for k in [*run.data.metrics, *run.data.params, *run.data.tags])
    key_map = json.loads(_artifact(outcome.run_id, "metric_names.json"))
    by_name = {(e["candidate"], e["metric"], e["field"]): e["mlflow_metric"] for e in key_map}
    name = by_name["EASE(l2=500)", "ndcg@100", "difference"]
    assert re.fullmatch(r"EASE_l2_500_-[0-9a-f]{8}\.vs\.EASE_l2_50_-[0-9a-f]{8}\.ndcg_at_100\.difference", name)
    assert run.data.metrics[name] == pytest.approx(row.difference)
    assert (
        by_name["Popularity", "ndcg@100", "difference"]
        == f"Popularity.vs.{model_label('EASE(l2=50)')}.ndcg_at_100.difference"
    )
    assert len(set(by_name.values())) == len(by_name) == len(run.data.metrics)
    report_md = _artifact(outcome.run_id, "report.md")
    assert escape_markdown("EASE(l2=500)") in report_md and "| EASE(l2=50) |" in report_md
    provenance = json.loads(_artifact(outcome.run_id, "provenance.json"))
    assert provenance["models"]["EASE(l2=500)"]["hyperparameters"] == EASE_500
    assert escape_latex("EASE(l2=500) vs EASE(l2=50)") in _artifact(outcome.run_id, "report.tex")
    assert html.escape("EASE(l2=500)") in _artifact(outcome.run_id, "report.html")
    assert "EASE(l2=500)" in run.data.tags["mlflow.note.content"]


def test_seeds_are_pooled_within_a_configuration_and_not_across(study):
    ids, res = study["ids"], study["results"]
    small, large = "ELSA(latent_dim=64, lr=0.001)", "ELSA(latent_dim=128, lr=0.01)"
    selection = [ids[k] for k in ("large2", "small1", "pop", "large0", "small0", "large1")]
    outcome = compare_runs(run_ids=selection, settings=ComparisonSettings(reference="Popularity", **SETTINGS))

    # Only latent_dim and lr differ, so only they name the candidates; latent_dim 64 sorts before 128.
    assert outcome.source_runs == {
        "Popularity": {"none": ids["pop"]},
        small: {"1": ids["small1"], "0": ids["small0"]},
        large: {"2": ids["large2"], "0": ids["large0"], "1": ids["large1"]},
    }
    assert outcome.representative_seed_rule == "its lowest seed"
    expected = compare_models(
        {"Popularity": res["pop"], small: res["small0"], large: res["large0"]}, reference="Popularity", **SETTINGS
    )
    pd.testing.assert_frame_equal(outcome.report.to_frame(), expected.to_frame())

    seeds = {small: {s: res[f"small{s}"] for s in (0, 1)}, large: {s: res[f"large{s}"] for s in (0, 1, 2)}}
    averaged = compare_seed_averaged({"Popularity": res["pop"], **seeds}, reference="Popularity", **SETTINGS)
    pd.testing.assert_frame_equal(outcome.seed_averaged.to_frame(), averaged.to_frame())
    assert outcome.seed_averaged.get("ndcg@100", large).candidate_seeds == 3
    assert outcome.seed_averaged.get("ndcg@100", small).candidate_seeds == 2
    assert sorted(outcome.seed_spreads) == [("Popularity", large), ("Popularity", small)]
    for name, side in seeds.items():
        spread = seed_spread(
            res["pop"],
            side,
            metrics=METRICS,
            baseline_name="Popularity",
            candidate_name=name,
            n_resamples=999,
            random_state=3,
        )
        pd.testing.assert_frame_equal(outcome.seed_spreads["Popularity", name].to_frame(), spread.to_frame())

    seed_csv = pd.read_csv(mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path="seed_spread.csv"))
    assert sorted(set(seed_csv["candidate"])) == [large, small]
    run = MlflowClient().get_run(outcome.run_id)
    assert all(len(k) <= MAX_KEY_LENGTH for k in run.data.metrics)
    assert "seed_averaged" in " ".join(run.data.metrics) and ".seeds.sd_retraining" in " ".join(run.data.metrics)
    assert escape_markdown(small) == "ELSA(latent\\_dim=64, lr=0.001)" and escape_markdown(small) in _artifact(
        outcome.run_id, "report.md"
    )


def test_a_plain_model_name_that_is_several_candidates_is_refused_as_reference_naming_them(study):
    ids = study["ids"]
    selection = [ids["ease50"], ids["ease500"], ids["pop"]]
    reason = (
        "reference: EASE is 2 candidates here, one per configuration, so name one of ['EASE(l2=50)', 'EASE(l2=500)']"
    )
    for check in (check_selection, compare_runs):
        with pytest.raises(RunSelectionError) as refused:
            check(run_ids=selection, settings=ComparisonSettings(reference="EASE", n_resamples=999))
        assert refused.value.reason == reason
        assert refused.value.hint == "e.g. --reference 'EASE(l2=50)'"
    with pytest.raises(RunSelectionError, match=re.escape("found 'EASE(l2=5)'")):
        check_selection(run_ids=selection, settings=ComparisonSettings(reference="EASE(l2=5)"))
    # One configuration of EASE selected: it keeps its plain name, and the configured name means nothing.
    assert len(check_selection(run_ids=[ids["ease50"], ids["pop"]], settings=ComparisonSettings(reference="EASE"))) == 2
    with pytest.raises(
        RunSelectionError,
        match=re.escape("expected one of the compared models ['EASE', 'Popularity'], found 'EASE(l2=50)'"),
    ):
        check_selection(run_ids=[ids["ease50"], ids["pop"]], settings=ComparisonSettings(reference="EASE(l2=50)"))
    # Two configurations of one model are two candidates: enough for a comparison on their own.
    outcome = compare_runs(run_ids=[ids["ease500"], ids["ease50"]], settings=ComparisonSettings(**SETTINGS))
    assert [(c.baseline, c.candidate) for c in outcome.report.comparisons][:1] == [("EASE(l2=50)", "EASE(l2=500)")]


def test_a_second_run_of_one_configuration_and_seed_is_a_duplicate_naming_the_configuration(study):
    ids, client = study["ids"], MlflowClient()
    again, _ = _log_run(
        client, study["experiment_id"], study["folder"], model="EASE", config=EASE_50, seed=None, shift=0.0, rng_seed=99
    )
    try:
        # With both configurations selected, the candidate's name says which configuration is doubled.
        for check in (check_selection, compare_runs):
            with pytest.raises(RunSelectionError) as refused:
                check(
                    run_ids=[ids["ease50"], ids["ease500"], again, ids["pop"]],
                    settings=ComparisonSettings(n_resamples=999),
                )
            assert refused.value.reason == (
                f"runs {ids['ease50']} and {again} are both EASE(l2=50) with seed none, "
                "so they are the same candidate twice"
            )
            assert "tags.mlflow.parentRunId" in refused.value.hint
        # With one configuration, the plain name is followed by the configuration itself.
        with pytest.raises(
            RunSelectionError,
            match=re.escape(
                f"runs {ids['ease50']} and {again} are both EASE with seed none and the same configuration "
                '{"dtype": "float32", "l2": 50.0}, so they are the same candidate twice'
            ),
        ):
            check_selection(run_ids=[ids["ease50"], again, ids["pop"]])
        # A seeded configuration: seed 1 twice in ELSA(latent_dim=64, ...), while other seeds stay pooled.
        twin, _ = _log_run(
            client,
            study["experiment_id"],
            study["folder"],
            model="ELSA",
            config=ELSA_SMALL,
            seed="1",
            shift=0.0,
            rng_seed=98,
        )
        try:
            with pytest.raises(
                RunSelectionError,
                match=re.escape(f"runs {ids['small1']} and {twin} are both ELSA(latent_dim=64, lr=0.001) with seed 1"),
            ):
                check_selection(run_ids=[ids["small0"], ids["small1"], ids["large0"], twin])
        finally:
            client.delete_run(twin)
    finally:
        client.delete_run(again)


def test_a_model_named_like_another_models_configuration_is_refused(study):
    ids = study["ids"]
    imposter, _ = _log_run(
        MlflowClient(),
        study["experiment_id"],
        study["folder"],
        model="EASE(l2=50)",
        config={},
        seed=None,
        shift=0.0,
        rng_seed=97,
    )
    try:
        with pytest.raises(RunSelectionError) as refused:
            check_selection(run_ids=[ids["ease50"], ids["ease500"], imposter])
        assert refused.value.reason == (
            "model names: runs of EASE and of EASE(l2=50) would both be the candidate 'EASE(l2=50)'"
        )
        assert refused.value.hint == "rename a model (its recsys.model tag) so that the names stay apart"
    finally:
        MlflowClient().delete_run(imposter)


def test_configuration_names_list_only_what_differs_in_short_text_and_stay_apart():
    def names(configs):
        return [name for name, _ in configuration_names("M", dict(enumerate(configs))).values()]

    assert names([{"l2": 50.0, "dtype": "float32"}]) == ["M"]
    assert names([{"l2": 50.0, "dtype": "float32"}, {"l2": 500.0, "dtype": "float32"}]) == ["M(l2=50)", "M(l2=500)"]
    assert names(
        [
            {"lr": 0.001, "opt": "adam", "w": [64, 32]},
            {"lr": 1e-05, "opt": "sgd", "w": [64, 32]},
            {"lr": 0.001, "opt": "a b", "w": [64, 32]},
        ]
    ) == ["M(lr=0.001, opt=adam)", "M(lr=1e-05, opt=sgd)", 'M(lr=0.001, opt="a b")']
    assert names([{"p": True}, {"p": None}, {}]) == ["M(p=true)", "M(p=null)", "M(p=unset)"]
    # Short texts that coincide (50.0 and "50") fall back to exact JSON for every value.
    assert names([{"l2": 50.0, "k": 1}, {"l2": "50", "k": 1}, {"l2": 5, "k": 1}]) == [
        "M(l2=50.0)",
        'M(l2="50")',
        "M(l2=5)",
    ]
    # Told apart by k, the short form stands.
    assert names([{"l2": 50.0, "k": 1}, {"l2": "50", "k": 2}]) == ["M(k=1, l2=50)", "M(k=2, l2=50)"]
    # Long values are cut, with a hash that keeps them apart.
    long = names([{"s": "x" * 100}, {"s": "x" * 99 + "y"}])
    assert len(set(long)) == 2 and all(len(n) <= len("M(s=)") + 40 for n in long)
    # Candidates sort by model, then by the differing values (numbers by value, then text, then unset).
    ranks = configuration_names("M", {"a": {"l2": 500}, "b": {"l2": 50.0}, "c": {"l2": "x"}, "d": {}})
    assert [ranks[k][0] for k in sorted(ranks, key=lambda k: ranks[k][1])] == [
        "M(l2=50)",
        "M(l2=500)",
        "M(l2=x)",
        "M(l2=unset)",
    ]


def test_cli_compares_configurations_with_one_as_the_reference(study, monkeypatch):
    monkeypatch.setenv("MLFLOW_RECSYS_COMMAND", "")
    ids = study["ids"]
    args = [
        "compare",
        "--run-ids",
        ",".join([ids["ease50"], ids["ease500"], ids["pop"]]),
        "--metrics",
        "ndcg@100",
        "--primary",
        "ndcg@100",
        "--n-resamples",
        "999",
    ]
    res = CliRunner().invoke(cli, [*args, "--reference", "EASE(l2=50)"])
    assert res.exit_code == 0, res.output
    assert re.search(r"ndcg@100\s+EASE\(l2=50\)\s+EASE\(l2=500\)", res.output)
    assert re.search(r"ndcg@100\s+EASE\(l2=50\)\s+Popularity", res.output)
    res = CliRunner().invoke(cli, [*args, "--reference", "EASE"])
    assert res.exit_code == 1 and "name one of ['EASE(l2=50)', 'EASE(l2=500)']" in res.output
    assert "--reference 'EASE(l2=50)'" in res.output
