"""Two real outside frameworks (implicit's ALS, Cornac's BPR) trained on an exported MovieLens-100k split,
their lists imported and compared with the project's EASE in one comparison run."""

from __future__ import annotations

import math

import mlflow
import numpy as np
import pandas as pd
import pytest

import frameworks
from conftest import TRAINED_METRICS, trained_copy
from mlflow_recsys import export_split, log_recommendations
from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.tracking import compare_runs

pytest.importorskip("implicit")
pytest.importorskip("cornac")

METRICS = TRAINED_METRICS

pytestmark = pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.LowResamplesWarning")


@pytest.fixture(scope="module")
def study(trained_store, tmp_path_factory):
    root = tmp_path_factory.mktemp("frameworks")
    with trained_copy(trained_store, root, "frameworks") as trained:
        checkpoint = trained["checkpoint"]
        folder = export_split(checkpoint, root / "export")
        lists = {"ALS": frameworks.implicit_als(folder), "BPR": frameworks.cornac_bpr(folder)}
        runs = {"EASE": trained["ease"]}
        with pytest.warns(UserWarning):  # BPR's lists hold the users' own items: removed, and said so
            for model, frame in lists.items():
                runs[model] = log_recommendations(
                    frame[["user", "item", "rank"]], checkpoint=checkpoint, model=model, metrics=METRICS
                )
        yield {"root": root, "folder": folder, "checkpoint": checkpoint, "lists": lists, "runs": runs}


def _per_user(run_id: str, dst) -> pd.DataFrame:
    path = mlflow.artifacts.download_artifacts(f"runs:/{run_id}/per_user.parquet", dst_path=str(dst))
    return pd.read_parquet(path).set_index("sample_id")


def _by_hand_ndcg(frame: pd.DataFrame, folder, k: int = 100) -> pd.Series:
    """nDCG@k per user with binary relevance (Jarvelin & Kekalainen 2002), each user's fold-in items taken out
    of the list first, computed from the exported files alone."""
    fold_in = pd.read_parquet(folder / "test_fold_in.parquet").groupby("user")["item"].apply(set)
    targets = pd.read_parquet(folder / "test_targets.parquet").groupby("user")["item"].apply(set)
    values = {}
    for user, rows in frame.sort_values(["user", "rank"]).groupby("user"):
        ranked = [i for i in rows["item"] if i not in fold_in.get(user, set())][:k]
        dcg = sum(1 / math.log2(pos + 2) for pos, item in enumerate(ranked) if item in targets[user])
        ideal = sum(1 / math.log2(pos + 2) for pos in range(min(len(targets[user]), k)))
        values[user] = dcg / ideal
    return pd.Series(values)


@pytest.mark.parametrize("model", ["ALS", "BPR"])
def test_imported_lists_score_as_computed_by_hand_from_the_exported_files(study, model, tmp_path):
    logged = _per_user(study["runs"][model], tmp_path)
    by_hand = _by_hand_ndcg(study["lists"][model], study["folder"])
    assert len(logged) == len(by_hand) == 188
    np.testing.assert_allclose(logged["ndcg@100"].sort_index(), by_hand.sort_index(), rtol=1e-12, atol=1e-15)
    assert logged["ndcg@100"].mean() > 0.2  # a working recommender, not an empty list


def test_frameworks_join_one_comparison_run_with_the_projects_ease(study):
    outcome = compare_runs(
        run_ids=list(study["runs"].values()),
        settings=ComparisonSettings(reference="EASE", metrics=METRICS, primary="ndcg@100", n_resamples=999),
    )
    run = mlflow.MlflowClient().get_run(outcome.run_id)
    assert run.info.status == "FINISHED"
    frame = outcome.report.to_frame()
    assert sorted(zip(frame["candidate"], frame["metric"], strict=True)) == sorted(
        (c, m) for c in ("ALS", "BPR") for m in METRICS
    )
    assert set(frame["baseline"]) == {"EASE"}


def test_the_same_lists_as_a_trec_run_give_the_same_per_user_values(study, tmp_path):
    frame = study["lists"]["BPR"]
    trec = tmp_path / "bpr.trec"
    lines = [
        f"{u} Q0 {i} {r} {101 - r} cornac-bpr"
        for u, i, r in zip(frame["user"], frame["item"], frame["rank"], strict=True)
    ]
    trec.write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning):
        run_id = log_recommendations(trec, checkpoint=study["checkpoint"], model="BPR-trec", metrics=METRICS)
    pd.testing.assert_frame_equal(_per_user(run_id, tmp_path / "a"), _per_user(study["runs"]["BPR"], tmp_path / "b"))
    assert mlflow.MlflowClient().get_run(run_id).data.tags["recsys.imported_from"] == "trec"


def test_ranx_agrees_on_ndcg_per_user_where_the_conventions_match(study, tmp_path):
    ranx = pytest.importorskip("ranx")
    folder = study["folder"]
    fold_in = pd.read_parquet(folder / "test_fold_in.parquet").groupby("user")["item"].apply(set)
    targets = pd.read_parquet(folder / "test_targets.parquet")
    qrels = ranx.Qrels({str(u): {str(i): 1 for i in rows["item"]} for u, rows in targets.groupby("user")})
    frame = study["lists"]["ALS"]  # ALS lists leave the users' own items out, as ranx would need
    assert not any(i in fold_in[u] for u, i in zip(frame["user"], frame["item"], strict=True))
    run = ranx.Run(
        {
            str(u): {str(i): float(101 - r) for i, r in zip(rows["item"], rows["rank"], strict=True)}
            for u, rows in frame.groupby("user")
        }
    )
    theirs = ranx.evaluate(qrels, run, "ndcg@100", return_mean=False)
    ours = _per_user(study["runs"]["ALS"], tmp_path)["ndcg@100"]
    np.testing.assert_allclose(ours.loc[[int(q) for q in run.keys()]].to_numpy(), theirs, rtol=1e-9)
