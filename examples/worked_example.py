"""Does ELSA beat EASE on MovieLens-100k? The whole argument, from split to seed spread.

Runs on a laptop CPU in well under a minute and needs no MLflow: everything
here is the core library. Run it with ``.venv/bin/python examples/worked_example.py``.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import numpy as np

import mlflow_recsys as mr
from mlflow_recsys.evaluation import evaluate_recommender
from mlflow_recsys.metrics import MRR, NDCG, CalibratedRecall, Recall
from mlflow_recsys.models import EASE, EASEConfig, ELSAConfig, ELSATrainer
from mlflow_recsys.stats import FewSeedsWarning, compare_models, compare_pair, seed_spread

REPORTED = ["ndcg@100", "calibrated_recall@20", "recall@20", "mrr@20"]
# ELSA sized for ~1.4k items and ~650 training users: a small latent space, few epochs.
ELSA_SETTINGS = dict(latent_dim=24, batch_size=64, epochs=20, lr=0.01, device="cpu")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = mr.build_recsys_checkpoint(
            dataset="movielens-100k",
            checkpoint_path=Path(tmp) / "comparison.zip",
            split_mode="user_split",
            eval_draws=1,
            seed=42,
        )
        with mr.read_checkpoint(checkpoint) as root:
            split = mr.load_recsys_split(root)

    x_train = split["x_train"]
    print(f"x_train {x_train.shape}, {x_train.nnz:,} interactions")
    source, targets, user_ids = split["test_source_matrix"], split["test_target_matrix"], split["test_eval_user_ids"]
    metrics = [CalibratedRecall([20, 50]), Recall([20, 50]), NDCG(100), MRR(20)]

    def evaluate(model):
        return evaluate_recommender(model, source=source, targets=targets, metrics=metrics, sample_ids=user_ids)

    ease = EASE(EASEConfig(l2=500.0)).fit(x_train)
    elsa = ELSATrainer(ELSAConfig(seed=0, **ELSA_SETTINGS)).fit(x_train)
    results = {"EASE": evaluate(ease), "ELSA": evaluate(elsa)}
    print("\nAggregate metrics")
    for name, result in results.items():
        print(name, {k: round(v, 4) for k, v in result.metrics.items()})

    report = compare_models(results, metrics=REPORTED, reference="EASE", n_resamples=9999, random_state=0)
    print("\nPaired comparison")
    print(
        report.to_frame()[
            [
                "metric",
                "n_samples",
                "n_nonzero",
                "tie_rate",
                "baseline_mean",
                "candidate_mean",
                "difference",
                "relative_difference",
                "ci_low",
                "ci_high",
                "adjusted_p_value",
                "direction",
            ]
        ].to_string(index=False)
    )
    print("\n" + report.results_text("ndcg@100", "ELSA"))

    print("\nRandomization test against paired t-test")
    t_report = compare_models(results, metrics=REPORTED, reference="EASE", test_method="t")
    for rnd, t in zip(report.comparisons, t_report.comparisons, strict=True):
        print(f"{rnd.metric:<22}{rnd.n_nonzero:>6}{rnd.tie_rate:>8.1%}{rnd.p_value:>12.4f}{t.p_value:>12.2e}")

    print("\nRetraining ELSA under five seeds")
    by_seed = {0: results["ELSA"]}
    for seed in range(1, 5):
        by_seed[seed] = evaluate(ELSATrainer(ELSAConfig(seed=seed, **ELSA_SETTINGS)).fit(x_train))
    spread = seed_spread(results["EASE"], by_seed, metrics=REPORTED, baseline_name="EASE", candidate_name="ELSA")
    print(
        spread.to_frame()[
            ["metric", "mean_difference", "sd_users", "sd_retraining", "ratio", "widens_by", "sign_reversals"]
        ].to_string(index=False)
    )
    print(spread.results_text("ndcg@100"))

    single = compare_pair(results["EASE"], by_seed[0], metric="ndcg@100", baseline_name="EASE", candidate_name="ELSA")
    assert np.isclose(single.difference, report.get("ndcg@100", "ELSA").difference)
    print("\nMethods\n" + report.methods_text())


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("default", FewSeedsWarning)
        main()
