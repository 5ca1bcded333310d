"""Issue 13, item 1: every report surface says what was compared (data, split, runs, the seed in the table)."""

import json
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from conftest import TRAINED_METRICS, trained_copy
from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.tracking import TrainConfig, compare_runs, run_train
from mlflow_recsys.tracking._study import print_result

pytestmark = pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.ComparisonWarning")
FAST_ELSA = dict(latent_dim=8, batch_size=128, epochs=2, lr=0.01)
METRICS = TRAINED_METRICS


@pytest.fixture(scope="module")
def study(trained_store, tmp_path_factory):
    with trained_copy(trained_store, tmp_path_factory.mktemp("provenance"), "provenance") as trained:
        experiment_id, split, checkpoint, ease = (trained[k] for k in ("experiment_id", "split", "checkpoint", "ease"))
        elsa = {
            s: run_train(checkpoint, TrainConfig("ELSA", {"seed": s, **FAST_ELSA}, metrics=METRICS), log_model=False)
            for s in (0, 1, 2)
        }
        yield {"experiment_id": experiment_id, "split": split, "ease": ease, "elsa": elsa}


def _artifact(run_id: str, name: str) -> str:
    return Path(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=name)).read_text()


def test_every_surface_names_the_data_the_split_and_the_runs(study):
    ids = [study["ease"], *study["elsa"].values()]
    outcome = compare_runs(
        run_ids=ids, settings=ComparisonSettings(reference="EASE", primary="ndcg@100", n_resamples=199)
    )
    prov = json.loads(_artifact(outcome.run_id, "provenance.json"))
    split = prov["split"]
    assert split["run_id"] == study["split"] and split["dataset"]["name"] == "movielens-100k"
    assert split["parameters"]["seed"] == 42 and split["parameters"]["split_mode"] == "user_split"
    assert split["parameters"]["min_rating"] == 4.0 and split["counts"]["n_test_users"] == 188
    assert prov["models"]["EASE"]["why"] == "its only run"
    assert prov["models"]["ELSA"]["why"] == "seed 0, the lowest of 0, 1, 2"
    assert prov["models"]["ELSA"]["hyperparameters"]["latent_dim"] == 8
    assert {s: r["run_id"] for s, r in prov["models"]["ELSA"]["runs"].items()} == {
        str(s): rid for s, rid in study["elsa"].items()
    }

    report_md = _artifact(outcome.run_id, "report.md")
    methods = _artifact(outcome.run_id, "methods.md")
    note = MlflowClient().get_run(outcome.run_id).data.tags["mlflow.note.content"]
    # These runs were trained outside a study that fixed the primary metric first.
    assert "Primary metric (chosen at comparison time, not before training): **ndcg@100**." in note
    # The notes hold the data and split in short lines and which run stands for each model; the files hold all.
    assert "- Split: user\\_split, seed 42, digest " in note and "- Runs in the table: EASE: its only run" in note
    for text in (report_md, methods):
        assert "## What was compared" in text
        assert "Split: user\\_split, seed 42, digest " + split["split_digest"] in text
        assert "ratings >= 4 kept as positives" in text and "188 test users (0 dropped)" in text
        assert study["elsa"][1] in text  # every run compared is named, not only the one in the table
    page = _artifact(outcome.run_id, "report.html")
    exp = study["experiment_id"]
    assert f'<a href="/#/experiments/{exp}/runs/{study["ease"]}" target="_top">' in page
    assert "seed 0, the lowest of 0, 1, 2" in page and "Split: user_split, seed 42" in page


def test_a_chosen_seed_is_stated_in_words(study):
    ids = [study["ease"], *study["elsa"].values()]
    outcome = compare_runs(
        run_ids=ids, settings=ComparisonSettings(reference="EASE", representative_seed="2", n_resamples=199)
    )
    prov = json.loads(_artifact(outcome.run_id, "provenance.json"))
    assert prov["models"]["ELSA"]["why"] == "seed 2, chosen for the report (--representative-seed 2)"
    assert prov["models"]["ELSA"]["representative_seed"] == "2"
    assert "seed 2, chosen for the report (--representative-seed 2)" in _artifact(outcome.run_id, "report.md")


def test_terminal_gets_plain_text_and_markdown_escapes_only_what_it_must(study):
    """summary.txt (what the study prints) has no markdown escapes; the notes and report.md keep the address whole."""
    ids = [study["ease"], *study["elsa"].values()]
    outcome = compare_runs(
        run_ids=ids, settings=ComparisonSettings(reference="EASE", primary="ndcg@100", n_resamples=199)
    )
    prov = json.loads(_artifact(outcome.run_id, "provenance.json"))
    url = prov["split"]["dataset"]["url"]
    assert url.startswith("https://")
    summary = _artifact(outcome.run_id, "summary.txt")
    assert f"Dataset: movielens-100k ({url}; " in summary
    assert "ratings >= 4 kept as positives" in summary and "Split: user_split, seed 42" in summary
    assert "Primary metric (chosen at comparison time, not before training): ndcg@100." in summary
    assert "\\" not in summary and "&gt;" not in summary and "**" not in summary and "&#" not in summary
    # The study prints summary.txt, not the notes.
    printed: list[str] = []
    print_result(outcome.run_id, "movielens-100k", printed.append)
    assert summary.rstrip("\n") in printed and not any("**" in line for line in printed)
    note = MlflowClient().get_run(outcome.run_id).data.tags["mlflow.note.content"]
    for text in (note, _artifact(outcome.run_id, "report.md")):
        assert f"Dataset: movielens-100k (<{url}>; " in text  # an autolink: clicked and copied as it is
        assert "movielens\\-100k" not in text and "&gt;=" not in text
