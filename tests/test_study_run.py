"""A study file run whole: MovieLens-100k, a log of the test's own and a log too small to split, EASE and Popularity;
the study run's table and verdict checked against the training runs' own metrics and per-user files, and the broken
dataset failing only itself."""

import dataclasses
import subprocess
import textwrap
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from conftest import BIN, clean_env, new_sqlite_store, sqlite_store
from mlflow_recsys.cli import cli
from mlflow_recsys.stats import paired_effect, random_effects
from mlflow_recsys.tracking import RunSelectionError, load_evaluation, mlflow_metric_name

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.ComparisonWarning")]

PROJECT = Path(__file__).resolve().parents[1]

STUDY = """
name = "three datasets"

[split]
seed = 3

[[dataset]]
name = "movielens-100k"

[[dataset]]
name = "clicks"
path = "clicks.csv"
columns = { user = "u", item = "i", value = "none", timestamp = "none" }

[[dataset]]
name = "broken"
path = "broken.csv"
columns = { user = "u", item = "i", value = "none", timestamp = "none" }

[[model]]
name = "EASE"
l2 = 100.0

[[model]]
name = "Popularity"
register = "popular"                 # each training's model a version of the registered model "popular"

[[model]]
name = "Listed"                      # trained elsewhere: its lists of the clicks split's test users, imported
recommendations = { clicks = "listed.parquet" }

[compare]
reference = "Popularity"
metrics = ["ndcg@100", "recall@20"]
primary = "ndcg@100"
n_resamples = 199
"""


def lists_for_the_clicks_split(folder):
    """What a user of another framework does: make the study's split of clicks.csv (the same settings give the same
    split), export it, and recommend to its test users the 30 items most clicked in training."""
    from mlflow_recsys.data import SplitConfig, build_recsys_checkpoint
    from mlflow_recsys.tracking import export_split

    columns = {"user": "u", "item": "i", "value": None, "timestamp": None}
    settings = SplitConfig(seed=3, min_rating=None).to_params()
    checkpoint = build_recsys_checkpoint(
        dataset=str(folder / "clicks.csv"), columns=columns, checkpoint_path=folder / "split.zip", **settings
    )
    exported = export_split(checkpoint, folder / "exported")
    train, test = (pd.read_parquet(exported / f"{name}.parquet") for name in ("train", "test_targets"))
    top = train["item"].value_counts().index[:30]
    users = test["user"].unique()
    lists = pd.DataFrame(
        [(u, item, r + 1) for u in users for r, item in enumerate(top)], columns=["user", "item", "rank"]
    )
    lists.to_parquet(folder / "listed.parquet")


def clicks(path, seed=0, n_users=300, n_items=120):
    """Implicit feedback: each user clicks mostly within one of four blocks of items."""
    rng = np.random.default_rng(seed)
    rows = {
        (f"u{u}", f"i{item}")
        for u in range(n_users)
        for item in np.where(rng.random(20) < 0.8, (u % 4) * 30 + rng.integers(0, 30, 20), rng.integers(0, n_items, 20))
    }
    pd.DataFrame(sorted(rows), columns=["u", "i"]).to_csv(path, index=False)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study")
    clicks(folder / "clicks.csv")
    (folder / "broken.csv").write_text("u,i\nx,1\n")  # one user of one item: nothing is left after the 5-core
    lists_for_the_clicks_split(folder)
    (folder / "study.toml").write_text(textwrap.dedent(STUDY))
    uri = new_sqlite_store(folder / "mlruns.db")
    mlflow.set_tracking_uri(uri)
    EXPERIMENT.append(mlflow.create_experiment("study", artifact_location=(folder / "artifacts").as_uri()))
    proc = subprocess.run(
        [str(BIN / "mlflow-recsys"), "study", "study.toml", "--project-uri", str(PROJECT)],
        cwd=folder,
        env={**clean_env(uri), "MLFLOW_EXPERIMENT_NAME": "study"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    yield {"folder": folder, "uri": uri, "proc": proc, "stdout": proc.stdout}
    mlflow.set_tracking_uri(None)


#: The id of the study's experiment, whose artifacts live under the test's folder.
EXPERIMENT: list[str] = []


def runs_by_role(role):
    return MlflowClient().search_runs(EXPERIMENT[-1:], f"tags.`recsys.role` = '{role}'", max_results=1000)


def dataset_of(run) -> str:
    """The study's name of the dataset a training or comparison run scored: by its split run's ``dataset`` param."""
    digest = run.data.tags["recsys.split_digest"]
    (split,) = [r for r in runs_by_role("split") if r.data.tags.get("recsys.split_digest") == digest]
    given = split.data.params["dataset"]
    return given if given == "movielens-100k" else Path(given).stem


def candidate_of(run) -> str:
    return run.data.tags["recsys.model"]


def test_each_dataset_gets_its_split_trainings_and_comparison_under_the_study_run(study):
    (main,) = runs_by_role("main")
    assert main.info.run_name == "three datasets" and main.data.params["primary"] == "ndcg@100"
    assert main.data.params["datasets"] == "movielens-100k,clicks,broken"
    children = {r.info.run_id for role in ("split", "train", "comparison") for r in runs_by_role(role)}
    parents = {MlflowClient().get_run(r).data.tags["mlflow.parentRunId"] for r in children}
    # Per dataset a split, EASE, Popularity and a comparison; Listed's imported run on clicks; broken's FAILED split.
    assert parents == {main.info.run_id} and len(children) == 2 * (1 + 2 + 1) + 1 + 1
    comparisons = runs_by_role("comparison")
    assert sorted(dataset_of(r) for r in comparisons) == ["clicks", "movielens-100k"]
    compared = {dataset_of(r): int(r.data.tags["recsys.n_source_runs"]) for r in comparisons}
    assert compared == {"movielens-100k": 2, "clicks": 3}  # clicks with the imported lists
    (listed,) = [r for r in runs_by_role("train") if r.data.tags["recsys.model"] == "Listed"]
    assert listed.data.tags["recsys.imported_from"] == "parquet" and dataset_of(listed) == "clicks"
    assert main.data.tags["recsys.comparison_run"].split(",") == [
        r.info.run_id for r in sorted(comparisons, key=lambda r: r.info.start_time)
    ]
    assert "== Across datasets" in study["stdout"] and "EASE vs Popularity on ndcg@100 over 2" in study["stdout"]


def test_a_registered_model_gets_a_version_per_training_whose_source_is_that_run(study):
    trained = {r.info.run_id for r in runs_by_role("train") if r.data.tags["recsys.model"] == "Popularity"}
    versions = MlflowClient().search_model_versions("name = 'popular'")
    assert len(trained) == 2 and {v.run_id for v in versions} == trained


def test_the_table_holds_each_training_runs_own_metric(study):
    (main,) = runs_by_role("main")
    table = pd.read_csv(mlflow.artifacts.download_artifacts(f"runs:/{main.info.run_id}/study/table.csv"))
    assert (
        set(table["dataset"]) == {"movielens-100k", "clicks"} and len(table) == (2 + 3) * 2  # models x metrics
    )  # datasets x models x metrics
    for run in runs_by_role("train"):
        name, candidate = dataset_of(run), candidate_of(run)
        for metric in ("ndcg@100", "recall@20"):
            row = table[(table["dataset"] == name) & (table["model"] == candidate) & (table["metric"] == metric)]
            assert row["mean"].item() == pytest.approx(run.data.metrics[mlflow_metric_name(metric)], rel=1e-12)
            assert row["seeds"].item() == 1 and np.isnan(row["sd"].item())
    assert table["best"].equals(table["mean"] == table.groupby(["dataset", "metric"])["mean"].transform("max"))


def test_the_pooled_effect_is_recomputed_from_the_training_runs_per_user_files(study):
    (main,) = runs_by_role("main")
    effects = pd.read_csv(mlflow.artifacts.download_artifacts(f"runs:/{main.info.run_id}/study/effects.csv"))
    by_dataset = {}
    for run in runs_by_role("train"):
        by_dataset.setdefault(dataset_of(run), {})[candidate_of(run)] = load_evaluation(run.info.run_id)
    pairs = [
        paired_effect(by_dataset[d]["EASE"].per_user["ndcg@100"], by_dataset[d]["Popularity"].per_user["ndcg@100"])
        for d in ("movielens-100k", "clicks")
    ]
    expected = random_effects([p[0] for p in pairs], [p[1] for p in pairs])
    chosen = (effects["candidate"] == "EASE") & (effects["metric"] == "ndcg@100")
    rows = effects[chosen].set_index("dataset")
    assert list(rows.index) == ["movielens-100k", "clicks", "pooled"]
    assert rows.loc["clicks", "effect"] == pytest.approx(pairs[1][0], rel=1e-12)
    pooled = rows.loc[["pooled"]]
    assert pooled["effect"].item() == pytest.approx(expected.effect, rel=1e-10)
    assert (pooled["ci_low"].item(), pooled["ci_high"].item()) == pytest.approx(
        (expected.ci_low, expected.ci_high), rel=1e-10
    )


def test_the_study_run_holds_the_tables_figures_and_page(study):
    (main,) = runs_by_role("main")
    names = {f.path for f in MlflowClient().list_artifacts(main.info.run_id, "study")}
    expected = {"table.md", "table.tex", "table.csv", "effects.csv", "ranks.csv", "report.html"}
    assert {f"study/{n}" for n in expected} <= names
    assert sum(n.startswith("study/forest_") for n in names) == 2  # 1 candidate x 2 metrics
    assert sum(n.startswith("study/ranks_") for n in names) == 2
    page = mlflow.artifacts.load_text(f"runs:/{main.info.run_id}/study/report.html")
    assert page.count("data:image/png;base64,") == 4 and "EASE" in page
    latex = mlflow.artifacts.load_text(f"runs:/{main.info.run_id}/study/table.tex")
    assert r"\multicolumn{2}{c}{movielens-100k}" in latex and r"\toprule" in latex
    assert "study.toml" in {f.path for f in MlflowClient().list_artifacts(main.info.run_id)}


def test_a_rerun_reuses_every_training_and_the_dry_run_says_so(study):
    env = {**clean_env(study["uri"]), "MLFLOW_EXPERIMENT_NAME": "study"}
    before = len(MlflowClient().search_runs(EXPERIMENT[-1:], max_results=1000))
    plan = subprocess.run(
        [str(BIN / "mlflow-recsys"), "study", "study.toml", "--dry-run"],
        cwd=study["folder"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert plan.stdout.count("train 0: -") == 2 and plan.stdout.count("reuse 2: ") == 2
    assert "broken (" in plan.stdout and plan.stdout.count("train 2: EASE, Popularity") == 1  # no split to reuse
    assert plan.stdout.count("import: Listed: ") == 1 and plan.stdout.count("import: -") == 2
    assert (
        "with 3 datasets and 3 candidates the smallest wilcoxon-holm p-value of a pair of ranks is 0.75" in plan.stdout
    )
    assert len(MlflowClient().search_runs(EXPERIMENT[-1:], max_results=1000)) == before  # the dry run made nothing


def test_a_dataset_whose_split_fails_leaves_the_others_and_fails_the_study(study):
    proc = study["proc"]
    assert proc.returncode == 1 and "broken: the split failed" in proc.stderr
    (main,) = runs_by_role("main")
    assert main.info.status == "FAILED" and main.data.tags["recsys.error"].startswith("broken: the split failed")
    assert [r.info.status for r in runs_by_role("comparison")] == ["FINISHED", "FINISHED"]
    table = pd.read_csv(mlflow.artifacts.download_artifacts(f"runs:/{main.info.run_id}/study/table.csv"))
    assert set(table["dataset"]) == {"movielens-100k", "clicks"}
    # Every surface of the summary says what is missing from it.
    for name in ("table.md", "table.tex", "report.html"):
        assert "Missing: broken (its split failed)." in mlflow.artifacts.load_text(
            f"runs:/{main.info.run_id}/study/{name}"
        )
    assert "Missing: broken (its split failed)." in study["stdout"]


def test_the_options_are_refused_beside_a_study_file(tmp_path, monkeypatch):
    (tmp_path / "study.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["study", "study.toml", "--epochs", "3"])
    assert result.exit_code == 2 and "--epochs: a study file declares the whole study" in result.output


def test_a_training_is_reused_only_where_it_scored_every_compared_metric(study):
    from mlflow_recsys.tracking._study import finished_trainings
    from mlflow_recsys.tracking._study_file import read_study

    plan = read_study(study["folder"] / "study.toml")
    (ease,) = [r for r in runs_by_role("train") if r.data.tags["recsys.model"] == "EASE" and dataset_of(r) == "clicks"]
    digest = ease.data.tags["recsys.split_digest"]
    client = MlflowClient()
    found = finished_trainings(client, EXPERIMENT[-1], digest, plan.trainings(), ["ndcg@100", "recall@20"])
    assert {key[0] for key in found} == {"EASE", "Popularity"}
    assert finished_trainings(client, EXPERIMENT[-1], digest, plan.trainings(), ["ndcg@100", "mrr@5"]) == {}


@pytest.mark.parametrize(
    ("make_id", "message"),
    [
        (lambda: "0" * 32, r"Shuf runs: expected a run id of this store, found '0{32}'"),
        (
            lambda: runs_by_role("split")[0].info.run_id,
            r"Shuf runs: expected a FINISHED training run, found run \w+ with",
        ),
        (
            lambda: [r for r in runs_by_role("train") if r.data.tags["recsys.model"] == "EASE"][0].info.run_id,
            r"Shuf runs: run \w+ is the model 'EASE' \(its recsys.model tag\), not 'Shuf'",
        ),
    ],
)
def test_imported_runs_are_checked_before_the_study_makes_anything(study, make_id, message):
    from mlflow_recsys.tracking._study import check_imported_runs, plan_text
    from mlflow_recsys.tracking._study_file import read_study

    run_id = make_id()
    text = STUDY.replace('recommendations = { clicks = "listed.parquet" }', f'runs = {{ clicks = "{run_id}" }}')
    (study["folder"] / "imports.toml").write_text(text.replace('name = "Listed"', 'name = "Shuf"'))
    plan = read_study(study["folder"] / "imports.toml")
    with pytest.raises(RunSelectionError, match=message):
        check_imported_runs(plan, MlflowClient())
    with pytest.raises(RunSelectionError, match=message):  # the dry run says so too
        plan_text(plan)


def test_a_bad_download_setting_is_refused_before_the_study_makes_anything(tmp_path, monkeypatch):
    """The comparisons read it at the end; a study must not train everything first and then fail on it."""
    from mlflow_recsys.stats import ComparisonSettings
    from mlflow_recsys.tracking._study import run_study
    from mlflow_recsys.tracking._study_file import shorthand_plan

    plan = shorthand_plan(
        dataset="movielens-100k", split_seed=0, seeds=[0, 1], ease={}, elsa={}, comparison=ComparisonSettings()
    )
    monkeypatch.setenv("MLFLOW_RECSYS_DOWNLOAD_THREADS", "0")
    with sqlite_store(tmp_path):
        with pytest.raises(ValueError, match=r"MLFLOW_RECSYS_DOWNLOAD_THREADS: expected .* from 1 to 64 .*found '0'"):
            run_study(plan, project_uri=PROJECT)
        assert MlflowClient().search_runs([e.experiment_id for e in MlflowClient().search_experiments()]) == []


def test_the_project_folder_is_checked_before_any_run(tmp_path):
    from mlflow_recsys.tracking._study import check_project

    with pytest.raises(ValueError, match=r"project_uri: expected the folder of mlflow-recsys's MLproject"):
        check_project(tmp_path)
    check_project(PROJECT)
    check_project("https://github.com/example/project")  # a URI is MLflow's to fetch


def test_a_training_is_reused_for_a_registered_model_only_where_its_run_is_a_version_of_it(study):
    from mlflow_recsys.tracking._study import finished_trainings
    from mlflow_recsys.tracking._study_file import read_study

    plan = read_study(study["folder"] / "study.toml")
    (pop,) = [
        r
        for r in runs_by_role("train")
        if r.data.tags["recsys.model"] == "Popularity" and dataset_of(r) == "movielens-100k"
    ]
    digest = pop.data.tags["recsys.split_digest"]
    kept = finished_trainings(MlflowClient(), EXPERIMENT[-1], digest, plan.trainings(), plan.compared_metrics)
    assert sorted(key[0] for key in kept) == ["EASE", "Popularity"]  # Popularity's run is a version of "popular"
    elsewhere = [dataclasses.replace(t, register="another") if t.model == "Popularity" else t for t in plan.trainings()]
    kept = finished_trainings(MlflowClient(), EXPERIMENT[-1], digest, elsewhere, plan.compared_metrics)
    assert sorted(key[0] for key in kept) == ["EASE"]  # trained again, so that it becomes a version of "another"
