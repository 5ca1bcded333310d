"""Issue 28, part 5: comparisons out as data.

A comparison run is read back as the report it computed (load_comparison), its settings as a ComparisonSettings,
and the hypotheses of many comparison runs or the training runs of an experiment as one frame. Every expected value
comes from the comparison's own return value (RunComparison) or the training runs' logged metrics, never from the
functions under test. The runs are real: EASE and Popularity trained on MovieLens-100k, and copies of Popularity's
per-user values, scaled, as a model trained under two seeds.
"""

import dataclasses
import io
import json

import mlflow
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from conftest import TRAINED_METRICS, copy_training_run, trained_copy
from mlflow_recsys import load_comparison, load_comparison_settings, search_comparisons, search_trainings
from mlflow_recsys.cli import cli
from mlflow_recsys.errors import ArtifactError, RunSelectionError
from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.stats._comparison import COLUMNS
from mlflow_recsys.tracking import _queries as queries
from mlflow_recsys.tracking import _runs as runs_module
from mlflow_recsys.tracking import compare_runs
from mlflow_recsys.tracking._downloads import DOWNLOAD_THREADS_ENV
from mlflow_recsys.tracking._queries import COMPARISON_COLUMNS, TRAINING_COLUMNS

METRICS = TRAINED_METRICS
FAST = dict(n_resamples=199, random_state=5)

pytestmark = pytest.mark.filterwarnings(
    "ignore::mlflow_recsys.stats.LowResamplesWarning", "ignore::mlflow_recsys.stats.FewSeedsWarning"
)


@pytest.fixture(scope="module")
def study(trained_store, tmp_path_factory):
    """EASE, Popularity and a two-seed model 'Seeded' (Popularity's values scaled by 0.9 and 0.8); three
    comparison runs: every model against EASE, EASE against Popularity with and without a reference."""
    make = copy_training_run
    root = tmp_path_factory.mktemp("queries")
    with trained_copy(trained_store, root, "queries") as trained:

        def scaled(factor):
            return lambda frame: frame.assign(**{m: frame[m] * factor for m in METRICS})

        seeded = [
            make(trained["pop"], root / f"seed{s}", model="Seeded", tags={"recsys.seed": str(s)}, edit_frame=scaled(f))
            for s, f in ((0, 0.9), (1, 0.8))
        ]
        imported = make(trained["pop"], root / "imported", model="Listed", tags={"recsys.imported_from": "trec"})
        settings = ComparisonSettings(reference="EASE", metrics=METRICS, primary="ndcg@100", **FAST)
        with_seeds = compare_runs(run_ids=[trained["ease"], trained["pop"], *seeded], settings=settings)
        pair = [trained["ease"], trained["pop"]]
        with_reference = compare_runs(run_ids=pair, settings=ComparisonSettings(reference="EASE", **FAST))
        without_reference = compare_runs(run_ids=pair, settings=ComparisonSettings(**FAST))
        yield {
            **trained,
            "seeded": seeded,
            "imported": imported,
            "settings": settings,
            "with_seeds": with_seeds,
            "with_reference": with_reference,
            "without_reference": without_reference,
        }


def _same_report(loaded, computed):
    """Field by field, floats bit for bit, arrays element by element."""
    assert (loaded.correction, loaded.reference, loaded.primary) == (
        computed.correction,
        computed.reference,
        computed.primary,
    )
    assert len(loaded.comparisons) == len(computed.comparisons)
    for got, want in zip(loaded.comparisons, computed.comparisons, strict=True):
        for field in dataclasses.fields(want):
            a, b = getattr(got, field.name), getattr(want, field.name)
            if isinstance(b, np.ndarray):
                np.testing.assert_array_equal(a, b)
            elif isinstance(b, float) and np.isnan(b):
                assert np.isnan(a), field.name
            else:
                assert a == b, field.name


# -- load_comparison ------------------------------------------------------------------------------------------


def test_load_comparison_gives_back_each_analysis_the_run_computed(study):
    outcome = study["with_seeds"]
    assert outcome.primary_analysis == "seed-averaged"
    _same_report(load_comparison(outcome.run_id), outcome.seed_averaged)
    _same_report(load_comparison(outcome.run_id, analysis="seed-averaged"), outcome.seed_averaged)
    _same_report(load_comparison(outcome.run_id, analysis="representative-seed"), outcome.report)


def test_a_comparison_without_seeds_has_one_analysis(study):
    outcome = study["with_reference"]
    _same_report(load_comparison(outcome.run_id), outcome.report)
    with pytest.raises(ArtifactError, match=r"seed-averaged report in seed_averaged_report/.*no seeded model"):
        load_comparison(outcome.run_id, analysis="seed-averaged")


def test_a_max_t_comparison_run_logs_and_loads_back_its_simultaneous_intervals(study, tmp_path):
    runs = [study["ease"], study["pop"], *study["seeded"]]
    settings = study["settings"].replace(correction="maxt")
    # An experiment of its own (the other tests count the comparison runs of the study's), its artifacts under
    # tmp_path: by default they would land in ./mlruns of the working directory.
    mlflow.create_experiment("queries-maxt", artifact_location=(tmp_path / "artifacts").as_uri())
    outcome = compare_runs(run_ids=runs, settings=settings, output_experiment="queries-maxt")
    for analysis, report in (("seed-averaged", outcome.seed_averaged), ("representative-seed", outcome.report)):
        assert report.correction == "maxt"
        assert {c.interval_method for c in report.comparisons} == {"max-T"}
        _same_report(load_comparison(outcome.run_id, analysis=analysis), report)
    assert load_comparison_settings(outcome.run_id).correction == "maxt"
    run = mlflow.get_run(outcome.run_id)
    assert run.data.params["correction"] == "maxt"
    assert "max-T" in run.data.tags["mlflow.note.content"]


def test_settings_load_back_as_comparison_settings(study):
    outcome = study["with_seeds"]
    assert load_comparison_settings(outcome.run_id) == study["settings"]
    path = mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path="settings.json")
    with open(path) as handle:
        assert ComparisonSettings(**json.load(handle)) == study["settings"]
    assert load_comparison_settings(study["without_reference"].run_id) == ComparisonSettings(**FAST)


def test_load_comparison_refuses_what_is_not_a_finished_comparison_run(study):
    with pytest.raises(RunSelectionError, match=r"run_id: expected a comparison run .* recsys.role = 'train'"):
        load_comparison(study["ease"])
    with pytest.raises(RunSelectionError, match="found no run 'nope'"):
        load_comparison("nope")
    with pytest.raises(ValueError, match="analysis: expected 'primary', 'representative-seed' or 'seed-averaged'"):
        load_comparison(study["with_seeds"].run_id, analysis="auto")
    client = MlflowClient()
    failed = client.create_run(study["experiment_id"], tags={"recsys.role": "comparison", "recsys.error": "boom"})
    client.set_terminated(failed.info.run_id, "FAILED")
    with pytest.raises(RunSelectionError, match=r"expected a FINISHED comparison run, found run .* FAILED \(boom\)"):
        load_comparison(failed.info.run_id)


def test_hand_made_comparison_runs_with_bad_files_are_named(study, tmp_path):
    client = MlflowClient()
    experiment_id = mlflow.create_experiment("hand-made", artifact_location=(tmp_path / "art").as_uri())
    empty = client.create_run(experiment_id, tags={"recsys.role": "comparison"})
    client.set_terminated(empty.info.run_id, "FINISHED")
    with pytest.raises(ArtifactError, match=f"run {empty.info.run_id}: expected the seed-averaged|expected the rep"):
        load_comparison(empty.info.run_id)
    with pytest.raises(ArtifactError, match="expected artifact report.parquet, found none"):
        search_comparisons("hand-made")
    with pytest.raises(ArtifactError, match="expected artifact settings.json, found none"):
        load_comparison_settings(empty.info.run_id)
    hostile = client.create_run(experiment_id, tags={"recsys.role": "comparison"})
    (tmp_path / "settings.json").write_text(json.dumps({"reference": "EASE", "model_tag": "recsys.model"}))
    client.log_artifact(hostile.info.run_id, str(tmp_path / "settings.json"))
    client.set_terminated(hostile.info.run_id, "FINISHED")
    with pytest.raises(ArtifactError, match="settings.json holds no comparison settings .*model_tag"):
        load_comparison_settings(hostile.info.run_id)
    client.delete_run(empty.info.run_id)
    with pytest.raises(
        RunSelectionError, match=f"expected an active comparison run, found run {empty.info.run_id} del"
    ):
        load_comparison(empty.info.run_id)
    big = client.create_run(experiment_id, tags={"recsys.role": "comparison"})
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "settings.json").write_text(" " * (queries.MAX_SETTINGS_BYTES + 1))
    client.log_artifact(big.info.run_id, str(tmp_path / "big" / "settings.json"))
    client.set_terminated(big.info.run_id, "FINISHED")
    with pytest.raises(ArtifactError, match=r"settings.json of at most 1,048,576 bytes, found 1,048,577"):
        load_comparison_settings(big.info.run_id)
    client.delete_run(big.info.run_id)
    (tmp_path / "settings.json").write_text(json.dumps(dataclasses.asdict(ComparisonSettings())))
    client.log_artifact(hostile.info.run_id, str(tmp_path / "settings.json"))
    with pytest.raises(ArtifactError, match=f"run {hostile.info.run_id}: expected artifact report.parquet"):
        search_comparisons(experiment_id)
    pd.DataFrame({"metric": ["x"]}).to_parquet(tmp_path / "report.parquet")
    client.log_artifact(hostile.info.run_id, str(tmp_path / "report.parquet"))
    with pytest.raises(ArtifactError, match=r"report.parquet: expected columns \['baseline'"):
        search_comparisons(experiment_id)


# -- metric names ---------------------------------------------------------------------------------------------


def test_a_hypothesis_has_one_metric_name_with_or_without_a_reference(study):
    names = {}
    for key in ("with_reference", "without_reference"):
        outcome = study[key]
        logged = MlflowClient().get_run(outcome.run_id).data.metrics
        (row,) = [c for c in outcome.report.comparisons if c.metric == "ndcg@100"]
        assert (row.baseline, row.candidate) == ("EASE", "Popularity")
        assert logged["Popularity.vs.EASE.ndcg_at_100.p_value"] == row.p_value
        names[key] = {n for n in logged if n.startswith("Popularity.vs.EASE.")}
    assert names["with_reference"] == names["without_reference"] and len(names["with_reference"]) > 6


# -- search_comparisons ---------------------------------------------------------------------------------------


def _expected_rows(outcome, run_id):
    analyses = {"representative-seed": outcome.report}
    if outcome.seed_averaged is not None:
        analyses["seed-averaged"] = outcome.seed_averaged
    rows = []
    for kind, report in analyses.items():
        frame = report.to_frame()
        frame["analysis"] = kind
        frame["analysis_role"] = "primary" if kind == outcome.primary_analysis else "sensitivity"
        rows.append(frame)
    return pd.concat(rows, ignore_index=True).assign(run_id=run_id)


def test_search_comparisons_holds_every_hypothesis_of_every_run(study):
    frame = search_comparisons("queries")
    assert list(frame.columns) == list(COMPARISON_COLUMNS)
    outcomes = [study[k] for k in ("with_seeds", "with_reference", "without_reference")]
    assert list(dict.fromkeys(frame["run_id"])) == [o.run_id for o in outcomes]  # oldest first
    for outcome in outcomes:
        got = frame[frame["run_id"] == outcome.run_id].reset_index(drop=True)
        want = _expected_rows(outcome, outcome.run_id)
        pd.testing.assert_frame_equal(got[list(want.columns)], want, check_dtype=False)
    seeded = frame[frame["run_id"] == study["with_seeds"].run_id]
    assert set(seeded["analysis"]) == {"representative-seed", "seed-averaged"}
    assert set(seeded.loc[seeded["analysis"] == "seed-averaged", "analysis_role"]) == {"primary"}
    assert set(seeded.loc[seeded["analysis"] == "representative-seed", "analysis_role"]) == {"sensitivity"}
    digest = MlflowClient().get_run(study["ease"]).data.tags["recsys.split_digest"]
    assert set(frame["split_digest"]) == {digest} and set(frame["dataset"]) == {"movielens-100k"}
    assert set(seeded["reference"]) == {"EASE"} and set(seeded["primary_metric"]) == {"ndcg@100"}
    unreferenced = frame[frame["run_id"] == study["without_reference"].run_id]
    assert unreferenced["reference"].isna().all() and unreferenced["primary_metric"].isna().all()
    assert set(frame["correction"]) == {"holm"} and frame["start_time"].dt.tz is not None


def test_which_candidate_beat_the_reference_is_a_pandas_query(study):
    frame = search_comparisons(["queries"], filter_string="params.reference = 'EASE'")
    assert set(frame["run_id"]) == {study["with_seeds"].run_id, study["with_reference"].run_id}
    wins = frame.query("metric == 'ndcg@100' and analysis_role == 'primary' and significant")
    expected = {
        (c.candidate, c.baseline, c.direction)
        for o in (study["with_seeds"], study["with_reference"])
        for c in o.primary_report.comparisons
        if c.metric == "ndcg@100" and c.significant
    }
    assert set(zip(wins["candidate"], wins["baseline"], wins["direction"], strict=True)) == expected
    assert expected  # EASE beats Popularity on nDCG@100 by far: the query has rows to find


def test_search_comparisons_reads_every_page(study, monkeypatch):
    pages = []

    def one_a_page(*args, **kwargs):
        result = runs_module.search_training_runs(*args, **{**kwargs, "page_size": 1})
        pages.append(len(result[0]))
        return result

    monkeypatch.setattr(queries, "search_training_runs", one_a_page)
    monkeypatch.setenv(DOWNLOAD_THREADS_ENV, "1")
    frame = search_comparisons("queries")
    assert frame["run_id"].nunique() == 3 and pages == [3]
    assert len(frame) == len(search_comparisons("queries"))


def test_search_comparisons_refuses_bad_input_before_reading_runs(study, monkeypatch):
    with pytest.raises(RunSelectionError, match="experiments: expected an experiment name or id .* found 'absent'"):
        search_comparisons("absent")
    with pytest.raises(RunSelectionError, match="experiments: expected experiment names or ids"):
        search_comparisons([])
    for bad in (None, 0):
        with pytest.raises(RunSelectionError, match=f"experiments: expected an experiment name or id, .* found {bad}"):
            search_comparisons(bad)
        with pytest.raises(RunSelectionError, match="experiments: expected an experiment name or id"):
            search_trainings(bad)
    with pytest.raises(RunSelectionError, match="filter_string: MLflow could not parse"):
        search_comparisons("queries", filter_string="params.reference === 'EASE'")
    monkeypatch.setattr(queries, "search_training_runs", None)  # any read of the runs would fail otherwise
    monkeypatch.setenv(DOWNLOAD_THREADS_ENV, "0")
    with pytest.raises(ValueError, match=rf"{DOWNLOAD_THREADS_ENV}: expected a whole number .*, found '0'"):
        search_comparisons("queries")


def test_an_experiment_without_comparisons_gives_an_empty_frame_with_the_columns(study, tmp_path):
    mlflow.create_experiment("nothing-here", artifact_location=(tmp_path / "a").as_uri())
    frame = search_comparisons("nothing-here")
    assert frame.empty and list(frame.columns) == list(COMPARISON_COLUMNS)
    assert set(COLUMNS) <= set(COMPARISON_COLUMNS)
    trainings = search_trainings("nothing-here")
    assert trainings.empty and list(trainings.columns) == list(TRAINING_COLUMNS)


# -- search_trainings -----------------------------------------------------------------------------------------


def test_search_trainings_lists_trained_and_imported_runs_with_their_metrics(study):
    frame = search_trainings("queries")
    client = MlflowClient()
    ids = [study["ease"], study["pop"], *study["seeded"], study["imported"]]
    assert list(frame["run_id"]) == ids
    assert list(frame.columns[: len(TRAINING_COLUMNS)]) == list(TRAINING_COLUMNS)
    assert list(frame["model"]) == ["EASE", "Popularity", "Seeded", "Seeded", "Listed"]
    assert list(frame["seed"])[2:4] == ["0", "1"]
    assert frame["imported_from"].isna().tolist() == [True] * 4 + [False] and frame["imported_from"][4] == "trec"
    for row in frame.itertuples(index=False):
        run = client.get_run(row.run_id)
        assert row.configuration == run.data.tags["recsys.config"]
        assert row.split_digest == run.data.tags["recsys.split_digest"]
        logged = run.data.metrics
        values = frame.set_index("run_id").loc[row.run_id]
        assert values["ndcg@100"] == logged["ndcg_at_100"]
        assert values["recall@20.ci_low"] == logged["recall_at_20.ci_low"]
        assert values["ndcg@100.ci_high"] == logged["ndcg_at_100.ci_high"]
    assert search_trainings("queries", "tags.`recsys.model` = 'Seeded'")["run_id"].tolist() == study["seeded"]


# -- the comparisons command ----------------------------------------------------------------------------------


def test_the_comparisons_command_prints_the_frame_as_table_csv_and_json(study):
    frame = search_comparisons("queries")
    runner = CliRunner()
    as_csv = runner.invoke(cli, ["comparisons", "--experiment", "queries", "--format", "csv"])
    assert as_csv.exit_code == 0, as_csv.output
    read = pd.read_csv(io.StringIO(as_csv.output))
    assert list(read.columns) == list(COMPARISON_COLUMNS) and len(read) == len(frame)
    np.testing.assert_array_equal(read["p_value"], frame["p_value"])
    as_json = runner.invoke(cli, ["comparisons", "--experiment", "queries", "--format", "json"])
    records = json.loads(as_json.output)
    assert len(records) == len(frame) and records[0]["run_id"] == frame["run_id"][0]
    assert [r["difference"] for r in records] == frame["difference"].tolist()
    table = runner.invoke(cli, ["comparisons", "--experiment", "queries"])
    assert table.exit_code == 0
    assert f"{len(frame)} hypotheses of 3 comparison runs" in table.output
    assert study["with_seeds"].run_id in table.output and "seed-averaged" not in table.output.splitlines()[0]
    one_run = runner.invoke(cli, ["comparisons", "--experiment", "queries", "--filter", "params.reference = 'None'"])
    assert "2 hypotheses of 1 comparison run;" in one_run.output
    missing = runner.invoke(cli, ["comparisons", "--experiment", "absent"])
    assert missing.exit_code == 1 and "experiments: expected an experiment name or id" in missing.output


# -- a live server --------------------------------------------------------------------------------------------


def test_search_comparisons_over_http(study, mlflow_server, tmp_path):
    """The comparison of EASE and Popularity logged again on a real `mlflow server`, read back over HTTP."""
    local = MlflowClient()
    sources = [local.get_run(study["ease"]), local.get_run(study["pop"])]
    folders = {}
    for run in sources:
        folder = tmp_path / run.info.run_id
        folder.mkdir()
        for name in ("per_user.parquet", "evaluation.json", "rankings.parquet"):  # evaluation.json names all three
            mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path=name, dst_path=str(folder))
        folders[run.info.run_id] = folder
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(mlflow_server)
    try:
        client = MlflowClient()
        experiment_id = client.create_experiment(f"queries-http-{tmp_path.name}")
        ids = []
        for run in sources:
            made = client.create_run(experiment_id, tags={k: v for k, v in run.data.tags.items() if "recsys." in k})
            for key, value in run.data.metrics.items():
                client.log_metric(made.info.run_id, key, value)
            client.log_artifacts(made.info.run_id, str(folders[run.info.run_id]))
            client.set_terminated(made.info.run_id, "FINISHED")
            ids.append(made.info.run_id)
        outcome = compare_runs(run_ids=ids, settings=ComparisonSettings(reference="EASE", **FAST))
        frame = search_comparisons(experiment_id)
        pd.testing.assert_frame_equal(frame[list(COLUMNS)], outcome.report.to_frame()[list(COLUMNS)], check_dtype=False)
        _same_report(load_comparison(outcome.run_id), outcome.report)
        assert search_trainings(experiment_id)["run_id"].tolist() == ids
    finally:
        mlflow.set_tracking_uri(previous)
