"""Train and compare runs in a real temporary SQLite store, on MovieLens-100k."""

import json
import os
import re
import threading
import time
import urllib.parse
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import scipy.stats
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from conftest import sqlite_store
from mlflow_recsys.cli import cli
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.report._analyses import primary_analysis_text
from mlflow_recsys.report._escaping import escape_markdown
from mlflow_recsys.stats import ComparisonSettings, FewSeedsWarning
from mlflow_recsys.tracking import (
    ArtifactError,
    RunSelectionError,
    SplitConfig,
    TrainConfig,
    compare_runs,
    load_evaluation,
    metric_key,
    mlflow_metric_name,
    parse_compare_url,
    read_evaluation_artifacts,
    run_split,
    run_train,
    write_evaluation_artifacts,
)
from mlflow_recsys.tracking._context import mark_training_experiment
from mlflow_recsys.tracking._tags import HAS_TRAINING_RUNS

FAST_ELSA = dict(latent_dim=8, batch_size=128, epochs=2, lr=0.01)
METRICS = ("ndcg@100", "recall@20", "mrr@20")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    with sqlite_store(root):
        yield root


@pytest.fixture(scope="module")
def study(store):
    split_id = run_split("movielens-100k", SplitConfig(seed=42))
    checkpoint = f"runs:/{split_id}/checkpoint.zip"
    ease = run_train(checkpoint, TrainConfig("EASE", metrics=METRICS))
    elsa = {
        s: run_train(checkpoint, TrainConfig("ELSA", {"seed": s, **FAST_ELSA}, metrics=METRICS), log_model=s == 0)
        for s in (0, 1, 2)
    }
    return {"split": split_id, "checkpoint": checkpoint, "ease": ease, "elsa": elsa}


def test_metric_names_round_trip_and_reject_bad_keys():
    assert mlflow_metric_name("ndcg@100") == "ndcg_at_100"
    assert metric_key("calibrated_recall_at_20") == "calibrated_recall@20"
    with pytest.raises(ValueError, match="key"):
        mlflow_metric_name("ndcg100")


def test_compare_url_is_decoded_until_stable():
    url = 'http://127.0.0.1:5000/#/compare-runs?runs=["a1","b2"]&experiments=["3"]'
    once = urllib.parse.quote(url, safe=":/#?&=")
    twice = urllib.parse.quote(once, safe="")
    for text in (url, once, twice):
        assert parse_compare_url(text) == (["a1", "b2"], ["3"])
    with pytest.raises(ValueError, match="runs="):
        parse_compare_url("http://127.0.0.1:5000/#/experiments/1")
    # A %-encoded byte that is not UTF-8 is refused, not read as U+FFFD; encoded UTF-8 is read.
    with pytest.raises(ValueError, match=r"^compare_url: expected %-encoded UTF-8, found 'http://x/#/compare-runs"):
        parse_compare_url("http://x/#/compare-runs?runs=%5B%22%FF%22%5D")
    assert parse_compare_url("http://x/#/compare-runs?runs=%5B%22a%C3%A9%22%5D") == (["a\u00e9"], [])


def test_artifacts_round_trip_and_refuse_malformed_files(tmp_path):
    result = EvaluationResult.from_per_user(
        {"ndcg@10": np.array([0.1, 0.5, 1.0])}, sample_ids=np.array([4, 9, 2]), targets_fingerprint="abc"
    )
    write_evaluation_artifacts(result, tmp_path, split_digest="s1")
    back = read_evaluation_artifacts(tmp_path, origin="run x")
    np.testing.assert_array_equal(back.result.per_user["ndcg@10"], result.per_user["ndcg@10"])
    np.testing.assert_array_equal(back.result.sample_ids, result.sample_ids)
    assert back.split_digest == "s1" and back.result.targets_fingerprint == "abc"

    meta = json.loads((tmp_path / "evaluation.json").read_text())
    (tmp_path / "evaluation.json").write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(ArtifactError, match="run x.*format_version 1, found 99"):
        read_evaluation_artifacts(tmp_path, origin="run x")
    (tmp_path / "evaluation.json").write_text(json.dumps(meta))
    pd.DataFrame({"sample_id": [4, 9, 2], "ndcg@10": [0.1, np.nan, 1.0]}).to_parquet(tmp_path / "per_user.parquet")
    with pytest.raises(ArtifactError, match="'ndcg@10'.*1 NaN"):
        read_evaluation_artifacts(tmp_path)
    pd.DataFrame({"sample_id": [4, 9, 2]}).to_parquet(tmp_path / "per_user.parquet")
    with pytest.raises(ArtifactError, match="expected columns"):
        read_evaluation_artifacts(tmp_path)


def test_trainings_that_start_together_all_mark_their_experiment(tmp_path):
    # Trainings on Ray start within milliseconds and insert the same experiment tag; SQLite refuses every insert
    # but the first, and a refused trainer must not fail for it.
    with sqlite_store(tmp_path):
        client = MlflowClient()
        for trial in range(12):
            experiment_id = client.create_experiment(f"race {trial}", artifact_location=(tmp_path / "a").as_uri())
            start = threading.Barrier(8)
            errors: list[BaseException] = []

            def mark(experiment_id=experiment_id, start=start, errors=errors):
                start.wait()
                try:
                    mark_training_experiment(experiment_id)
                except BaseException as exc:  # noqa: BLE001 - any failure of a thread fails the test below
                    errors.append(exc)

            threads = [threading.Thread(target=mark) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert errors == []
            assert client.get_experiment(experiment_id).tags[HAS_TRAINING_RUNS] == "true"


def test_train_run_logs_tags_metrics_and_per_user_artifacts(study):
    client = MlflowClient()
    run = client.get_run(study["elsa"][1])
    assert run.data.tags["recsys.role"] == "train"
    assert run.data.tags["recsys.model"] == "ELSA" and run.data.tags["recsys.seed"] == "1"
    assert client.get_experiment(run.info.experiment_id).tags["recsys.has_training_runs"] == "true"
    split_run = client.get_run(study["split"])
    assert run.data.tags["recsys.split_digest"] == split_run.data.tags["recsys.split_digest"]
    result = load_evaluation(study["elsa"][1])
    assert run.data.tags["recsys.targets_fingerprint"] == result.targets_fingerprint
    for key in METRICS:
        assert run.data.metrics[mlflow_metric_name(key)] == pytest.approx(result.per_user[key].mean())
    assert len(client.get_metric_history(run.info.run_id, "train_loss")) == FAST_ELSA["epochs"]
    val = client.get_metric_history(run.info.run_id, "val_ndcg_at_100")
    assert [m.step for m in val] == list(range(1, FAST_ELSA["epochs"] + 1)) and all(0 < m.value < 1 for m in val)
    assert client.get_run(study["ease"]).data.tags["recsys.seed"] == "none"
    # Lineage: the split run and the train run name the same dataset (the split) as their input.
    split_input = split_run.inputs.dataset_inputs[0].dataset
    train_input = run.inputs.dataset_inputs[0].dataset
    assert split_input.digest == train_input.digest == split_run.data.tags["recsys.split_digest"][:36]


@pytest.fixture(scope="module")
def split_arrays(study, tmp_path_factory):
    from mlflow_recsys import load_recsys_split, read_checkpoint
    from mlflow_recsys.tracking._training import resolve_checkpoint

    with read_checkpoint(resolve_checkpoint(study["checkpoint"], str(tmp_path_factory.mktemp("ckpt")))) as root:
        return load_recsys_split(root)


def test_logged_model_takes_item_ids_and_never_recommends_fold_in(study, split_arrays):
    ids = split_arrays["item_ids"]
    model = mlflow.pyfunc.load_model(f"runs:/{study['elsa'][0]}/model")
    assert model.metadata.get_input_schema().input_dict()["items"].type.dtype.name == "long"
    history = [ids[[0, 1, 2]].tolist(), [ids[5].item()]]
    out = model.predict(pd.DataFrame({"user": [7, 8], "items": history, "k": [10, 10]}))
    assert out["user"].tolist() == [7, 8] and out["unknown_items"].tolist() == [[], []]
    assert [len(r) for r in out["items"]] == [10, 10]
    assert set(out["items"][0]) <= set(ids.tolist())
    assert not set(out["items"][0]) & set(history[0]) and history[1][0] not in out["items"][1]
    assert all(np.diff(s).max() <= 0 for s in out["scores"])


def test_logged_model_reports_unknown_item_ids_and_scores_the_known_ones(study, split_arrays):
    from mlflow_recsys.models import ELSA, UnknownItemsWarning

    ids = split_arrays["item_ids"]
    unknown = [int(ids.max()) + 1, -3]
    model_uri = f"runs:/{study['elsa'][0]}/model"
    with pytest.warns(UnknownItemsWarning, match="2 item id.s. in 1 row"):
        out = mlflow.pyfunc.load_model(model_uri).predict(
            pd.DataFrame({"items": [[ids[4].item(), *unknown], [ids[9].item()]], "k": [5, 5]})
        )
    assert out["unknown_items"].tolist() == [unknown, []]
    # The known id alone gives the same list as the raw model scoring that column only.
    weights = mlflow.artifacts.download_artifacts(f"{model_uri}/artifacts/weights")
    import scipy.sparse as sp

    top, _ = ELSA.load(weights).recommend(sp.csr_matrix(([1.0], ([0], [4])), shape=(1, len(ids))), 5)
    assert out["items"][0] == ids[top[0]].tolist()


def test_compare_runs_logs_a_comparison_run_matching_an_independent_computation(study):
    ids = [study["ease"], *study["elsa"].values()]
    with pytest.warns(FewSeedsWarning):
        outcome = compare_runs(
            run_ids=ids,
            settings=ComparisonSettings(reference="EASE", metrics=list(METRICS), primary="ndcg@100", n_resamples=999),
        )
    ease = load_evaluation(study["ease"])
    elsa = {s: load_evaluation(r) for s, r in study["elsa"].items()}
    # The report compares the lowest seed; its difference is the mean per-user difference.
    row = outcome.report.get("ndcg@100", "ELSA")
    assert row.difference == pytest.approx(np.mean(elsa[0].per_user["ndcg@100"] - ease.per_user["ndcg@100"]))
    diffs = [np.mean(elsa[s].per_user["ndcg@100"] - ease.per_user["ndcg@100"]) for s in (0, 1, 2)]
    seeds = outcome.seed_frame().set_index("metric").loc["ndcg@100"]
    assert seeds.sd_retraining == pytest.approx(np.std(diffs, ddof=1))
    assert seeds.mean_difference == pytest.approx(np.mean(diffs))

    client = MlflowClient()
    run = client.get_run(outcome.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["recsys.role"] == "comparison"
    assert set(run.data.tags["recsys.source_runs"].split(",")) == set(ids)
    assert run.data.tags["recsys.primary_metric"] == "ndcg@100"
    # ELSA has seeds: the headline is the primary analysis, seed-averaged by default.
    assert outcome.primary_analysis == "seed-averaged" and outcome.primary_report is outcome.seed_averaged
    assert run.data.tags["recsys.result"] == (
        "Primary analysis: seed-averaged comparison. " + outcome.seed_averaged.results_text("ndcg@100", "ELSA")
    )
    assert "ELSA" in run.data.tags["mlflow.note.content"]
    # The notes point to the seed table, which this comparison (ELSA with 3 seeds) logged.
    assert run.data.tags["mlflow.note.content"].rstrip().endswith("; seed_spread.csv holds the seed table.")
    assert run.data.params["n_resamples"] == "999" and run.data.params["correction"] == "holm"
    assert run.data.metrics["ELSA.vs.EASE.ndcg_at_100.difference"] == pytest.approx(row.difference)
    assert run.data.metrics["ELSA.vs.EASE.ndcg_at_100.seeds.sd_retraining"] == pytest.approx(seeds.sd_retraining)
    names = {a.path for a in client.list_artifacts(outcome.run_id)}
    assert {
        "report.csv",
        "report.md",
        "report.parquet",
        "seed_spread.csv",
        "methods.md",
        "references.bib",
        "report_table.json",
        "seed_spread_table.json",
        "forest.png",
        "seed_spread.png",
        "seed_averaged.csv",
        "seed_averaged.parquet",
        "seed_averaged_table.json",
        "report.tex",
    } <= names
    tex = Path(mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path="report.tex")).read_text()
    # The primary analysis (seed-averaged) first, the sensitivity analysis after it, each caption naming its role.
    title = "one trained run per model (EASE: its only run; ELSA: seed 0, the lowest of 0, 1, 2)."
    assert tex == (
        outcome.seed_averaged.to_latex(
            label="tab:seed-averaged",
            title="Primary analysis: seed-averaged comparison, each model's per-user values averaged over its "
            "training seeds.",
        )
        + "\n"
        + outcome.report.to_latex(title="Sensitivity analysis: representative-seed comparison, " + title)
    )

    # Beside it, the seed-averaged comparison: ELSA's per-user values averaged over its 3 seeds, EASE's one run.
    averaged = outcome.seed_averaged.get("ndcg@100", "ELSA")
    d = np.mean([elsa[s].per_user["ndcg@100"] for s in (0, 1, 2)], axis=0) - ease.per_user["ndcg@100"]
    assert averaged.difference == pytest.approx(d.mean(), abs=1e-12)
    assert (averaged.baseline_seeds, averaged.candidate_seeds) == (1, 3)
    assert (averaged.wins, averaged.losses) == (int((d > 1e-12).sum()), int((d < -1e-12).sum()))
    assert averaged.family == "primary" and averaged.family_size == 1
    assert run.data.metrics["ELSA.vs.EASE.ndcg_at_100.seed_averaged.difference"] == pytest.approx(averaged.difference)
    assert run.data.metrics["ELSA.vs.EASE.ndcg_at_100.seed_averaged.adjusted_p_value"] == averaged.adjusted_p_value
    note = run.data.tags["mlflow.note.content"]
    primary = "**Primary analysis: seed-averaged comparison.** Averaged over training seeds (ELSA: 3, EASE: 1)"
    sensitivity = "**Sensitivity analysis: representative-seed comparison.** ELSA"
    assert note.index(primary) < note.index(sensitivity)
    report_md = Path(mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path="report.md")).read_text()
    assert report_md.index("## Primary analysis: seed-averaged comparison") < report_md.index(
        "## Sensitivity analysis: representative-seed comparison"
    )
    methods = Path(mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path="methods.md")).read_text()
    assert methods.count("Seed-averaged:") == 1 and "Seed-averaged comparison: Seed" not in methods
    logged = pd.read_parquet(
        mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path="seed_averaged.parquet")
    )
    pd.testing.assert_frame_equal(logged, outcome.seed_averaged.to_frame())


def test_compare_runs_passes_the_rank_test_and_bca_through_and_logs_them_as_params(study):
    ids = [study["ease"], study["elsa"][0]]
    outcome = compare_runs(
        run_ids=ids,
        settings=ComparisonSettings(
            reference="EASE",
            metrics=["ndcg@100"],
            n_resamples=999,
            test_method="wilcoxon",
            zero_method="zsplit",
            interval_method="bca",
        ),
    )
    ease, elsa = load_evaluation(study["ease"]), load_evaluation(study["elsa"][0])
    d = elsa.per_user["ndcg@100"] - ease.per_user["ndcg@100"]
    row = outcome.report.get("ndcg@100", "ELSA")
    assert row.p_value == scipy.stats.wilcoxon(d, zero_method="zsplit").pvalue
    assert row.interval_method == "bca" and row.zero_method == "zsplit"
    assert (row.wins, row.ties, row.losses) == (int((d > 0).sum()), int((d == 0).sum()), int((d < 0).sum()))
    params = MlflowClient().get_run(outcome.run_id).data.params
    assert (params["test_method"], params["zero_method"], params["interval_method"]) == ("wilcoxon", "zsplit", "bca")
    # 188 users with ties: the normal approximation, by the package's rule, and the SciPy version that computed it.
    assert row.test_method == "wilcoxon" and params["scipy_version"] == scipy.__version__
    methods = Path(mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path="methods.md")).read_text()
    assert (
        f"| scipy\\_version | {escape_markdown(scipy.__version__)} |" in methods
        and "the normal approximation otherwise" in methods
    )
    # Without a primary metric the headline is the first metric's first sentence.
    assert MlflowClient().get_run(outcome.run_id).data.tags["recsys.result"] == outcome.report.results_text(
        "ndcg@100", "ELSA"
    )
    # One run per model: nothing to average over seeds, so no seed-averaged report or metrics.
    assert outcome.seed_averaged is None
    assert not [k for k in MlflowClient().get_run(outcome.run_id).data.metrics if "seed_averaged" in k]
    with pytest.raises(ValueError, match="zero_method: expected one of"):
        compare_runs(run_ids=ids, settings=ComparisonSettings(reference="EASE", zero_method="pratt "))


def test_paired_seeds_with_different_seed_sets_is_refused_before_any_run(study, copy_run, tmp_path):
    # A second seeded model with seeds 0, 1, 5 (copies of ELSA's runs): seed 5 has no partner among 0, 1, 2.
    client = MlflowClient()
    aside = client.create_experiment(  # kept out of the study's experiment and its filters
        "paired-seeds-unmatched", artifact_location=(tmp_path / "aside").as_uri()
    )
    other = [
        copy_run(
            study["elsa"][s], tmp_path / f"c{s}", model="ELSA-wd", tags={"recsys.seed": str(t)}, experiment_id=aside
        )
        for s, t in ((0, 0), (1, 1), (2, 5))
    ]
    experiment = client.get_run(study["ease"]).info.experiment_id
    before = len(client.search_runs([experiment, aside], max_results=1000))
    with pytest.raises(
        RunSelectionError,
        match=r"paired_seeds: expected ELSA-wd and ELSA to have the same seeds.*"
        r"ELSA: \['0', '1', '2'\] and ELSA-wd: \['0', '1', '5'\]",
    ):
        compare_runs(
            run_ids=[*study["elsa"].values(), *other],
            settings=ComparisonSettings(reference="ELSA", paired_seeds=True, n_resamples=99),
        )
    assert len(client.search_runs([experiment, aside], max_results=1000)) == before


@pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.FewSeedsWarning")
@pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.LowResamplesWarning")
def test_downloads_at_once_follow_their_setting_and_a_bad_setting_writes_nothing(study, monkeypatch):
    from mlflow_recsys.tracking import _runs
    from mlflow_recsys.tracking._downloads import DOWNLOAD_THREADS_ENV

    client = MlflowClient()
    experiment = client.get_run(study["ease"]).info.experiment_id
    ids = [study["ease"], *study["elsa"].values()]
    before = len(client.search_runs([experiment], max_results=1000))
    for bad in ("0", "65", "two", "-1"):
        monkeypatch.setenv(DOWNLOAD_THREADS_ENV, bad)
        with pytest.raises(
            ValueError, match=rf"^{DOWNLOAD_THREADS_ENV}: expected a whole number from 1 to 64 .*, found '{bad}'$"
        ):
            compare_runs(run_ids=ids, settings=ComparisonSettings(reference="EASE", n_resamples=99))
    assert len(client.search_runs([experiment], max_results=1000)) == before

    # The runs are read from their own artifact URIs (the selection holds them; runs:/ would ask for each run again),
    # never more at once than the setting allows.
    in_flight, most, asked, lock = 0, 0, [], threading.Lock()
    download = _runs.download_files

    def counted(uri, *args, **kwargs):
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
            asked.append(uri)
        try:
            time.sleep(0.05)  # long enough for the pool to start every download it may
            return download(uri, *args, **kwargs)
        finally:
            with lock:
                in_flight -= 1

    monkeypatch.setattr(_runs, "download_files", counted)
    for threads in (1, 2):
        monkeypatch.setenv(DOWNLOAD_THREADS_ENV, str(threads))
        most, asked[:] = 0, []
        # The setting is read once, before the run is made: a change while the comparison runs changes nothing.
        spoil = lambda stage: stage == "loading artifacts" and os.environ.update({DOWNLOAD_THREADS_ENV: "0"})  # noqa: E731
        compare_runs(run_ids=ids, settings=ComparisonSettings(reference="EASE", n_resamples=99), on_stage=spoil)
        assert most == threads
        assert sorted(asked) == sorted(client.get_run(i).info.artifact_uri for i in ids)


def test_check_selection_refuses_what_compare_runs_refuses_and_stages_are_reported_in_order(study):
    from mlflow_recsys.tracking import check_selection

    ids = [study["ease"], study["elsa"][0]]
    assert [r.info.run_id for r in check_selection(run_ids=ids, settings=ComparisonSettings(reference="EASE"))] == ids
    for selected, bad in ((ids, dict(reference="Pop")), (ids[:1], {}), (ids, dict(metrics=["map@20"]))):
        with pytest.raises((RunSelectionError, ValueError)) as refused:
            check_selection(run_ids=selected, settings=ComparisonSettings(**bad))
        with pytest.raises(type(refused.value), match=re.escape(str(refused.value))):
            compare_runs(run_ids=selected, settings=ComparisonSettings(**bad))
    with pytest.raises(TypeError, match="settings: expected a ComparisonSettings, found dict"):
        check_selection(run_ids=ids, settings={"n_resamples": 0})
    with pytest.raises(TypeError, match="output"):
        check_selection(run_ids=ids, output="x")
    stages = []
    compare_runs(
        run_ids=ids,
        settings=ComparisonSettings(reference="EASE", metrics=["ndcg@100"], n_resamples=999),
        on_stage=stages.append,
    )
    from mlflow_recsys.tracking._comparison import STAGES

    assert stages == list(STAGES)


@pytest.mark.parametrize("config", ["not json <img src=x>", "[1, 2]"])
def test_a_config_tag_that_is_not_a_json_object_is_named(study, copy_run, tmp_path, config):
    client = MlflowClient()
    aside = client.create_experiment(f"bad-config-{len(config)}", artifact_location=(tmp_path / "aside").as_uri())
    bad = copy_run(
        study["elsa"][1], tmp_path / "bad", model="ELSA", experiment_id=aside, tags={"recsys.config": config}
    )
    with pytest.raises(RunSelectionError, match=rf"run {bad}: expected its 'recsys.config' tag to hold a JSON object"):
        compare_runs(run_ids=[study["ease"], study["elsa"][0], bad], settings=ComparisonSettings(reference="EASE"))


def test_compare_refuses_runs_that_are_not_finished(study):
    client = MlflowClient()
    exp = client.get_run(study["ease"]).info.experiment_id
    stuck = client.create_run(exp, tags={"recsys.role": "train", "recsys.model": "ELSA", "recsys.seed": "9"})
    with pytest.raises(RunSelectionError, match=rf"{stuck.info.run_id} \(RUNNING\)"):
        compare_runs(run_ids=[study["ease"], stuck.info.run_id])
    client.set_terminated(stuck.info.run_id, "KILLED")


def test_compare_refuses_runs_from_different_splits_naming_them(study):
    other_split = run_split("movielens-100k", SplitConfig(seed=7))
    other = run_train(
        f"runs:/{other_split}/checkpoint.zip", TrainConfig("Popularity", metrics=METRICS), log_model=False
    )
    with pytest.raises(RunSelectionError, match=rf"same split.*{study['ease']}.*{other}"):
        compare_runs(run_ids=[study["ease"], other])


def test_compare_refuses_a_metric_that_was_not_evaluated(study):
    with pytest.raises(RunSelectionError, match=r"\['map@20'\].*available"):
        compare_runs(run_ids=[study["ease"], study["elsa"][0]], settings=ComparisonSettings(metrics=["map@20"]))


def test_compare_by_experiment_and_filter(study):
    client = MlflowClient()
    run = client.get_run(study["ease"])
    digest = run.data.tags["recsys.split_digest"]
    with pytest.warns(FewSeedsWarning):
        outcome = compare_runs(
            experiment=run.info.experiment_id,
            filter_string=f"tags.`recsys.split_digest` = '{digest}'",
            settings=ComparisonSettings(reference="EASE", n_resamples=999),
        )
    assert {c.candidate for c in outcome.report.comparisons} == {"ELSA"}
    assert set(outcome.source_runs["ELSA"]) == {"0", "1", "2"}


@pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.FewSeedsWarning")
def test_one_primary_analysis_is_named_on_every_surface_and_the_other_is_a_sensitivity_analysis(study, monkeypatch):
    monkeypatch.setenv("MLFLOW_RECSYS_COMMAND", "")
    ids = [study["ease"], *study["elsa"].values()]
    args = ["compare", *ids, "--reference", "EASE", "--metrics", "ndcg@100", "--primary", "ndcg@100"]
    primary, sensitivity = (
        "Primary analysis: seed-averaged comparison",
        "Sensitivity analysis: representative-seed comparison",
    )
    res = CliRunner().invoke(cli, [*args, "--n-resamples", "999"])
    assert res.exit_code == 0, res.output
    out = res.output
    # Default rule: ELSA has 3 seeds, so the seed-averaged comparison is primary, printed first.
    assert out.index(primary + " (each model's per-user values averaged") < out.index(sensitivity + " (one trained")
    assert "seeds, 1 to 3 per model)" in out and primary_analysis_text("seed-averaged", "auto") in out
    assert f"{primary}. Averaged over training seeds (ELSA: 3, EASE: 1), ELSA" in out
    assert f"{sensitivity}. ELSA scored" in out
    run = MlflowClient().get_run(out.split("comparison run ")[-1].strip())
    assert run.data.params["primary_analysis"] == "auto" and run.data.params["primary_analysis_used"] == "seed-averaged"
    assert run.data.tags["recsys.result"].startswith(primary + ". Averaged over training seeds")
    methods = Path(mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path="methods.md")).read_text()
    assert primary_analysis_text("seed-averaged", "auto") in methods
    for name in ("summary.txt", "report.html"):
        text = Path(mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path=name)).read_text()
        assert primary in text and sensitivity in text, name

    # Set the other way, the representative seed is primary everywhere.
    res = CliRunner().invoke(cli, [*args, "--n-resamples", "199", "--primary-analysis", "representative-seed"])
    assert res.exit_code == 0, res.output
    assert res.output.index("Primary analysis: representative-seed comparison (one trained run per model") < (
        res.output.index("Sensitivity analysis: seed-averaged comparison")
    )
    run = MlflowClient().get_run(res.output.split("comparison run ")[-1].strip())
    assert run.data.params["primary_analysis_used"] == "representative-seed"
    assert run.data.tags["recsys.result"].startswith("Primary analysis: representative-seed comparison. ELSA")

    # Seed-averaged asked for where no model has seeds: refused before any run is written.
    experiment = MlflowClient().get_run(study["ease"]).info.experiment_id
    before = len(MlflowClient().search_runs([experiment]))
    settings = ComparisonSettings(reference="EASE", primary_analysis="seed-averaged", n_resamples=199)
    with pytest.raises(RunSelectionError, match="^primary_analysis: expected 'auto' or 'representative-seed' when"):
        compare_runs(run_ids=[study["ease"], study["elsa"][0]], settings=settings)
    assert len(MlflowClient().search_runs([experiment])) == before
    with pytest.raises(ValueError, match="^primary_analysis: expected one of"):
        ComparisonSettings(primary_analysis="averaged")


@pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.FewSeedsWarning")
def test_the_primary_analysis_states_every_candidate_and_the_sensitivity_one_only_the_seeded(study, monkeypatch):
    """With one seeded and one unseeded candidate, the seed-averaged (primary) analysis states both; the
    representative-seed (sensitivity) analysis states only the seeded one, whose comparison it tests differently:
    the unseeded pair's comparison is one and the same in both analyses and is not called a sensitivity result."""
    monkeypatch.setenv("MLFLOW_RECSYS_COMMAND", "")
    pop = run_train(study["checkpoint"], TrainConfig("Popularity", metrics=METRICS), log_model=False)
    ids = [study["ease"], pop, *study["elsa"].values()]
    args = ["compare", *ids, "--reference", "EASE", "--metrics", "ndcg@100", "--primary", "ndcg@100"]
    res = CliRunner().invoke(cli, [*args, "--n-resamples", "199"])
    assert res.exit_code == 0, res.output
    primary = "Primary analysis: seed-averaged comparison."
    sensitivity = "Sensitivity analysis: representative-seed comparison."
    lines = res.output.splitlines()
    stated = [line for line in lines if line.startswith((primary, sensitivity))]
    assert [line.startswith(primary) for line in stated] == [True, True, False]
    assert "ELSA" in stated[0] + stated[1] and "Popularity" in stated[0] + stated[1]
    assert "ELSA" in stated[2] and "Popularity" not in stated[2]
    run = MlflowClient().get_run(res.output.split("comparison run ")[-1].strip())
    notes = run.data.tags["mlflow.note.content"]
    assert notes.count(f"**{primary}**") == 2 and notes.count(f"**{sensitivity}**") == 1
    # The headline is one of the primary analysis' sentences, said with the same label as in the notes.
    headline = run.data.tags["recsys.result"]
    assert headline.startswith(primary) and headline[len(primary) + 1 :] in notes.split(f"**{sensitivity}**")[0]
    summary = mlflow.artifacts.load_text(f"runs:/{run.info.run_id}/summary.txt")
    assert "report.csv: the representative-seed comparison, the sensitivity analysis" in summary
    assert "seed_averaged.csv: the seed-averaged comparison, the primary analysis" in summary
    html = mlflow.artifacts.load_text(f"runs:/{run.info.run_id}/report.html")
    assert html.count(f"<b>{primary}</b>") == 2 and html.count(f"<b>{sensitivity}</b>") == 1


@pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.FewSeedsWarning")
def test_printout_states_seed_protocol_test_and_interval_in_words(study, monkeypatch):
    """No code-words (one-side-seeded, 'test randomization: all'): each setting the reader needs is a sentence."""
    monkeypatch.setenv("MLFLOW_RECSYS_COMMAND", "")
    ids = [study["ease"], *study["elsa"].values()]
    args = ["compare", *ids, "--reference", "EASE", "--metrics", "ndcg@100", "--n-resamples", "999"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    out = res.output
    for jargon in ("protocol:", "one-side-seeded", "test randomization", "interval percentile", ": all"):
        assert jargon not in out, jargon
    assert "ELSA trained under 3 seeds, EASE once: the spread is ELSA's retraining alone." in out
    assert "Test: paired sign-flip randomization test (B = 999 random sign patterns), two-sided, for every " in out
    assert "Interval: 95% percentile bootstrap interval, for every hypothesis." in out
    assert "Holm adjustment over 1 hypothesis; significant where the adjusted p <= 0.05." in out
    outcome = compare_runs(run_ids=ids, settings=ComparisonSettings(reference="EASE", n_resamples=199))
    note = MlflowClient().get_run(outcome.run_id).data.tags["mlflow.note.content"]
    page = Path(mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path="report.html")).read_text()
    for text in (note, page):
        assert "ELSA trained under 3 seeds, EASE once" in text and "one-side-seeded" not in text


def test_cli_reports_bad_input_in_one_line(study, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_RECSYS_COMMAND", "")  # the CLI sets it; monkeypatch restores it afterwards
    runner = CliRunner()
    res = runner.invoke(cli, ["split", "--dataset", "movielens-1b"])
    assert res.exit_code == 1 and "movielens-100k" in res.output and "Traceback" not in res.output
    res = runner.invoke(cli, ["train", "--checkpoint", str(tmp_path / "missing.zip"), "--model", "EASE"])
    assert res.exit_code == 1 and "missing.zip" in res.output
    res = runner.invoke(cli, ["compare", study["ease"], study["elsa"][0], "--metrics", "ndcg@7"])
    assert res.exit_code == 1 and "ndcg@7" in res.output and "available" in res.output
    res = runner.invoke(cli, ["split", "--split-mode", "leave_one_out", "--test-frac", "0.3"])
    assert res.exit_code == 1 and "test_frac: does not apply to split_mode='leave_one_out'" in res.output


def test_cli_splits_a_users_own_log_by_time_with_lineage(store, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_RECSYS_COMMAND", "")
    rng = np.random.default_rng(1)
    n = 3000
    log = pd.DataFrame(
        {
            "user": rng.integers(0, 150, n),
            "item": rng.integers(0, 90, n),
            "value": 1.0,
            "timestamp": rng.integers(10**9, 10**9 + 10**6, n),
        }
    )
    log.to_parquet(tmp_path / "clicks.parquet")
    args = [
        "split",
        "--dataset",
        str(tmp_path / "clicks.parquet"),
        "--split-mode",
        "time_split",
        "--test-frac",
        "0.25",
        "--eval-holdout-frac",
        "",
    ]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1 and "min_rating: expected some interactions with value >= 4.0" in res.output
    res = CliRunner().invoke(cli, [*args, "--min-rating", "none", "--min-user-interactions", "2"])
    assert res.exit_code == 0, res.output
    run_id = res.output.split("split run ")[1].split(":")[0]
    run = MlflowClient().get_run(run_id)
    assert run.data.params["split_mode"] == "time_split" and run.data.params["test_frac"] == "0.25"
    assert run.data.params["eval_holdout_frac"] == "None" and run.data.tags["recsys.dataset"] == "clicks"
    source = json.loads(run.inputs.dataset_inputs[0].dataset.source)
    assert source["tags"]["file_name"] == "clicks.parquet" and len(source["tags"]["file_sha256"]) == 64
    assert run.data.metrics["test_cut_timestamp"] > run.data.metrics["val_cut_timestamp"]


def test_representative_seed_picks_the_representative_run(study):
    ids = [study["ease"], *study["elsa"].values()]
    with pytest.warns(FewSeedsWarning):
        outcome = compare_runs(
            run_ids=ids,
            settings=ComparisonSettings(
                reference="EASE", metrics=["ndcg@100"], representative_seed="2", n_resamples=999
            ),
        )
    ease, elsa2 = load_evaluation(study["ease"]), load_evaluation(study["elsa"][2])
    expected = np.mean(elsa2.per_user["ndcg@100"] - ease.per_user["ndcg@100"])
    assert outcome.report.get("ndcg@100", "ELSA").difference == pytest.approx(expected)
    with pytest.raises(RunSelectionError, match="representative_seed.*'7'"):
        compare_runs(
            run_ids=ids, settings=ComparisonSettings(reference="EASE", representative_seed="7", n_resamples=999)
        )


def test_runs_of_one_model_with_different_hyperparameters_are_distinct_candidates(study):
    other = run_train(
        study["checkpoint"],
        TrainConfig("ELSA", {**FAST_ELSA, "seed": 5, "latent_dim": 4}, metrics=METRICS),
        log_model=False,
    )
    ids = [study["ease"], study["elsa"][0], study["elsa"][1], other]
    with pytest.raises(
        RunSelectionError,
        match=re.escape(
            "reference: ELSA is 2 candidates here, one per configuration, so name one of "
            "['ELSA(latent_dim=4)', 'ELSA(latent_dim=8)']"
        ),
    ):
        compare_runs(run_ids=ids, settings=ComparisonSettings(reference="ELSA"))
    with pytest.warns(FewSeedsWarning):
        outcome = compare_runs(
            run_ids=ids, settings=ComparisonSettings(reference="EASE", metrics=["ndcg@100"], n_resamples=999)
        )
    # Seeds 0 and 1 of latent_dim 8 are pooled; the latent_dim 4 run (seed 5) stands alone.
    assert outcome.source_runs == {
        "EASE": {"none": study["ease"]},
        "ELSA(latent_dim=4)": {"5": other},
        "ELSA(latent_dim=8)": {"0": study["elsa"][0], "1": study["elsa"][1]},
    }
    ease, small = load_evaluation(study["ease"]), load_evaluation(other)
    row = outcome.report.get("ndcg@100", "ELSA(latent_dim=4)")
    assert row.baseline == "EASE"
    assert row.difference == pytest.approx(np.mean(small.per_user["ndcg@100"] - ease.per_user["ndcg@100"]))
    assert list(outcome.seed_spreads) == [("EASE", "ELSA(latent_dim=8)")]


def _failed_comparisons(experiment_id):
    return MlflowClient().search_runs(
        [experiment_id], filter_string="tags.`recsys.role` = 'comparison' and attributes.status = 'FAILED'"
    )


def test_mismatched_fingerprints_leave_the_comparison_run_failed_with_the_reason(study, tmp_path, copy_run):
    exp = MlflowClient().get_run(study["ease"]).info.experiment_id
    before = len(_failed_comparisons(exp))
    fake = copy_run(
        study["ease"], tmp_path, model="Other", edit_meta=lambda m: {**m, "targets_fingerprint": "deadbeef" * 8}
    )
    with pytest.raises(RunSelectionError, match=r"users and targets.*deadbeef"):
        compare_runs(run_ids=[study["ease"], fake], settings=ComparisonSettings(reference="EASE", n_resamples=999))
    failed = _failed_comparisons(exp)
    assert len(failed) == before + 1
    assert "targets fingerprint" in failed[0].data.tags["recsys.error"]
    assert not MlflowClient().list_artifacts(failed[0].info.run_id)


def test_corrupted_per_user_artifact_is_refused_naming_the_run(study, tmp_path, copy_run):
    def poison(frame):
        frame.loc[3, "ndcg@100"] = np.nan
        return frame

    fake = copy_run(study["ease"], tmp_path, model="Broken", edit_frame=poison)
    with pytest.raises(ArtifactError, match=rf"run {fake}.*'ndcg@100'.*NaN"):
        compare_runs(run_ids=[study["ease"], fake], settings=ComparisonSettings(reference="EASE", n_resamples=999))


def test_comparison_run_holds_a_self_contained_html_report(study, tmp_path):
    with pytest.warns(FewSeedsWarning):
        outcome = compare_runs(
            run_ids=[study["ease"], *study["elsa"].values()],
            settings=ComparisonSettings(reference="EASE", metrics=["ndcg@100"], primary="ndcg@100", n_resamples=999),
        )
    page = Path(
        mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path="report.html", dst_path=str(tmp_path))
    ).read_text()
    assert 'id="report-table"' in page and page.count("data:image/png;base64,") == 2
    assert outcome.report.results_text("ndcg@100", "ELSA").split(" (")[0] in page
    assert "Holm" in page and "@inproceedings{steck2019ease" in page
    assert 'src="http' not in page  # nothing fetched from elsewhere


def test_run_context_provider_tags_runs_started_inside_a_command(store, monkeypatch):
    from mlflow.tracking.context.registry import _run_context_provider_registry

    from mlflow_recsys import __version__

    assert "RecsysRunContext" in [type(p).__name__ for p in _run_context_provider_registry]
    with mlflow.start_run() as outside:
        pass
    monkeypatch.setenv("MLFLOW_RECSYS_COMMAND", "compare")
    with mlflow.start_run() as inside:
        pass
    assert "recsys.package_version" not in MlflowClient().get_run(outside.info.run_id).data.tags
    run_tags = MlflowClient().get_run(inside.info.run_id).data.tags
    assert run_tags["recsys.package_version"] == __version__ and run_tags["recsys.command"] == "compare"


def test_recsys_evaluator_computes_ranking_metrics_through_mlflow_evaluate(study, split_arrays, tmp_path):
    from mlflow_recsys.evaluation import evaluate_recommender
    from mlflow_recsys.models import ELSA

    split = split_arrays
    source, targets, ids = split["test_source_matrix"], split["test_target_matrix"], split["test_eval_user_ids"]
    item_ids = split["item_ids"]

    def row_ids(m, i):
        return item_ids[m.indices[m.indptr[i] : m.indptr[i + 1]]].tolist()

    frame = pd.DataFrame(
        {
            "sample_id": ids,
            "items": [row_ids(source, i) for i in range(source.shape[0])],
            "targets": [row_ids(targets, i) for i in range(targets.shape[0])],
        }
    )
    model_uri = f"runs:/{study['elsa'][0]}/model"
    served = MlflowClient().create_experiment("served model", artifact_location=(tmp_path / "served").as_uri())
    with mlflow.start_run(experiment_id=served) as run:
        out = mlflow.models.evaluate(
            model_uri,
            data=frame,
            targets="targets",
            model_type="recommender",
            evaluators="recsys",
            evaluator_config={
                "metrics": ["ndcg@100", "recall@20"],
                "model_name": "ELSA-served",
                "seed": 0,
                "item_ids": item_ids,
            },
        )
    # The same model evaluated directly, without MLflow in between.
    weights = mlflow.artifacts.download_artifacts(f"{model_uri}/artifacts/weights", dst_path=str(tmp_path / "w"))
    direct = evaluate_recommender(
        ELSA.load(weights), source=source, targets=targets, metrics=["ndcg@100", "recall@20"], sample_ids=ids
    )
    assert out.metrics["ndcg_at_100"] == pytest.approx(direct.metrics["ndcg@100"])
    logged = load_evaluation(run.info.run_id)
    np.testing.assert_allclose(logged.per_user["recall@20"], direct.per_user["recall@20"])
    run_tags = MlflowClient().get_run(run.info.run_id).data.tags
    assert run_tags["recsys.role"] == "train" and run_tags["recsys.model"] == "ELSA-served"
    experiment = MlflowClient().get_experiment(run.info.experiment_id)
    assert experiment.tags.get("recsys.has_training_runs") == "true"  # the server page lists it with one query
    assert run_tags["recsys.targets_fingerprint"] == direct.targets_fingerprint


def test_recsys_evaluator_refuses_a_model_name_mlflow_would_cut(study, split_arrays):
    split = split_arrays
    source, targets, item_ids = split["test_source_matrix"], split["test_target_matrix"], split["item_ids"]
    frame = pd.DataFrame(
        {
            "sample_id": split["test_eval_user_ids"][:5],
            "items": [item_ids[source.indices[source.indptr[i] : source.indptr[i + 1]]].tolist() for i in range(5)],
            "targets": [
                item_ids[targets.indices[targets.indptr[i] : targets.indptr[i + 1]]].tolist() for i in range(5)
            ],
        }
    )
    with mlflow.start_run() as run:
        with pytest.raises(Exception, match=r"model_name'\]: expected at most 8,000 characters, found 8,001"):
            mlflow.models.evaluate(
                f"runs:/{study['elsa'][0]}/model",
                data=frame,
                targets="targets",
                model_type="recommender",
                evaluators="recsys",
                evaluator_config={"model_name": "x" * 8001, "item_ids": item_ids},
            )
    assert "recsys.model" not in MlflowClient().get_run(run.info.run_id).data.tags


def test_recsys_evaluator_never_volunteers_for_other_model_types():
    from mlflow_recsys.tracking._evaluator import RecsysEvaluator

    assert RecsysEvaluator.can_evaluate(model_type="recommender", evaluator_config={})
    for other in ("classifier", "regressor", "retriever", None):
        assert not RecsysEvaluator.can_evaluate(model_type=other, evaluator_config={})


def test_logged_model_gives_identical_recommendations_in_a_fresh_process(study):
    import subprocess
    import sys

    uri = f"runs:/{study['elsa'][0]}/model"
    frame = pd.DataFrame({"items": [[1, 2, 3], [50], [7, 9]], "k": [10, 10, 10]})
    here = mlflow.pyfunc.load_model(uri).predict(frame)
    code = (
        "import json, sys, mlflow, pandas as pd\n"
        "frame = pd.DataFrame(json.loads(sys.argv[2]))\n"
        "out = mlflow.pyfunc.load_model(sys.argv[1]).predict(frame)\n"
        "print(json.dumps({'items': out['items'].tolist(), 'scores': out['scores'].tolist()}))\n"
    )
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow.get_tracking_uri()}
    proc = subprocess.run(
        [sys.executable, "-c", code, uri, frame.to_json(orient="columns")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    there = json.loads(proc.stdout.strip().splitlines()[-1])
    assert there["items"] == [list(map(int, r)) for r in here["items"]]
    assert there["scores"] == [list(map(float, r)) for r in here["scores"]]
