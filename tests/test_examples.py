"""The example scripts must run, so they cannot rot.

README.md's code blocks are run by tests/test_docs.py, with those of the guide and how-to pages. Each script runs
whole, in its own process, so these are walkthrough tests: ``make docs-test`` runs them, and CI after ``make test``.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env

pytestmark = pytest.mark.walkthrough

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, env: dict | None = None, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_worked_example_runs_and_prints_every_table():
    out = run_example("worked_example.py")
    for marker in (
        "Aggregate metrics",
        "Paired comparison",
        "Randomization test against paired t-test",
        "Retraining ELSA under five seeds",
        "sd_retraining",
        "Methods",
    ):
        assert marker in out


#: How-to script -> lines its output must contain (each one a result the script computed).
HOWTOS = {
    "howto_run_conventions.py": [
        "recsys.role                  train",
        "recsys.seed                  none",
        "per_user.parquet: 188 rows, columns ['sample_id', 'ndcg@100', 'recall@20']",
        "evaluation.json: format mlflow-recsys-evaluation v1, 188 users",
        "CoOccurrence scored",
        "n = 188 users",
    ],
    "howto_select_by_filter.py": [
        "tags.`recsys.model` = 'ELSA'                   ['ELSA/0', 'ELSA/0', 'ELSA/1']",
        "params.epochs = '5'                            ['ELSA/0', 'ELSA/0', 'ELSA/1']",
        "Refused: runs were not evaluated on the same split (split digest)",
        "Compared: ['EASE', 'ELSA'] with seed tables [('EASE', 'ELSA')]",
    ],
    "howto_remote_backend.py": [
        "kubernetes_config.json: registry registry.example.com/mlflow-recsys, template kubernetes_job_template.yaml",
        "FINISHED, model=ELSA seed=0",
    ],
    "howto_serve_model.py": [
        "unknown: [999999] warnings: ['UnknownItemsWarning']",
        "Over HTTP: 3",
        "Over HTTP: 7",
        "Evaluator: {'ndcg_at_100':",
        "ELSA scored",
        "n = 188 users",
    ],
}


@pytest.mark.parametrize("script", sorted(HOWTOS))
def test_howto_script_runs(script, tmp_path):
    # Each script gets its own store; it must not need one to be set up for it.
    out = run_example(script, env=clean_env(f"sqlite:///{tmp_path}/mlruns.db"), cwd=tmp_path)
    missing = [line for line in HOWTOS[script] if line not in out]
    assert not missing, f"{script} did not print {missing}\n{out[-3000:]}"


@pytest.mark.integration
def test_howto_tracking_server_runs_against_a_live_server(mlflow_server, tmp_path):
    out = run_example("howto_tracking_server.py", env=clean_env(mlflow_server), cwd=tmp_path)
    assert f"tracking server: {mlflow_server}" in out
    assert "artifact URI scheme: mlflow-artifacts:" in out
    listed = out.split(" artifacts on the server: ", 1)[1].splitlines()[0].split(", ")
    assert ": FINISHED, " in out and {
        "report.html",
        "report.tex",
        "report.parquet",
        "methods.md",
        "provenance.json",
        "forest.png",
    } <= set(listed)
    assert "seed_averaged.csv" not in listed  # one run per model: nothing to average over seeds
    assert "Popularity scored" in out and "n = 188 users" in out
