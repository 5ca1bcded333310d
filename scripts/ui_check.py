"""Open a comparison run's report.html in the real MLflow UI with headless Chromium; screenshot and check it.

    .venv/bin/python scripts/ui_check.py [--screenshot docs/images/comparison-run.png]

Needs Debian's ``chromium`` (``apt-get install chromium``). Builds a small study
in a temporary SQLite store (split, EASE, Popularity, compare), starts
``mlflow server`` (which serves the UI) on 127.0.0.1, loads the run's ``report.html`` artifact page,
checks that the page shows the HTML viewer and that the server hands it the
report with its table (the viewer's iframe is fed from a blob, which a DOM dump
cannot see into), and saves a screenshot to look at.
Exits non-zero when a check fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import warnings
from pathlib import Path

import mlflow

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--virtual-time-budget=20000", "--window-size=2000,1600",
]


from mlflow_recsys.tracking.local_server import local_tracking_server


def build_study(store: Path) -> tuple[str, str]:
    from mlflow_recsys.stats import ComparisonWarning
    from mlflow_recsys.tracking import compare_runs, run_split, run_train

    mlflow.set_tracking_uri(f"sqlite:///{store}/mlruns.db")
    experiment_id = mlflow.create_experiment("ui-check", artifact_location=(store / "artifacts").as_uri())
    mlflow.set_experiment(experiment_id=experiment_id)
    split = run_split(dataset="movielens-100k", seed=42)
    checkpoint = f"runs:/{split}/checkpoint.zip"
    ids = [run_train(checkpoint=checkpoint, model=m, log_model=False) for m in ("Popularity", "EASE")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComparisonWarning)
        outcome = compare_runs(run_ids=ids, reference="Popularity", primary="ndcg@100", n_resamples=999)
    return experiment_id, outcome.run_id


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        sys.exit("chromium not found: install Debian's chromium (apt-get install chromium)")
    return subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=180)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screenshot", default="docs/images/comparison-run.png")
    args = parser.parse_args()
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp)
        experiment_id, run_id = build_study(store)
        with local_tracking_server(f"sqlite:///{store}/mlruns.db", store / "served-artifacts") as url:
            page = f"{url}/#/experiments/{experiment_id}/runs/{run_id}/artifacts/report.html"
            dom = chromium("--dump-dom", page, profile=store / "profile-dom").stdout
            # The UI shows HTML artifacts in an iframe fed from this endpoint of the same server.
            with urllib.request.urlopen(f"{url}/get-artifact?path=report.html&run_uuid={run_id}", timeout=30) as r:
                served = r.read().decode()
            shot = Path(args.screenshot).resolve()
            shot.parent.mkdir(parents=True, exist_ok=True)
            chromium(f"--screenshot={shot}", page, profile=store / "profile-shot")
    checks = {
        "the UI page shows an HTML artifact viewer": 'class="mlflow-html-iframe"' in dom,
        "the UI server serves report.html with the report table": 'id="report-table"' in served
        and "<td>ndcg@100</td>" in served,
        "the screenshot was written": shot.is_file() and shot.stat().st_size > 10_000,
    }
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    print(f"page: {page}\nscreenshot: {shot}")
    if not all(checks.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
