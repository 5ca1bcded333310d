"""The recsys pages in a real browser: Debian's chromium, driven by Playwright, against `mlflow server --app-name
recsys` on 127.0.0.1.

Ticks runs, clicks Compare, waits for the result, follows the link into the MLflow UI and checks the comparison
run; then checks that an incomparable selection is refused in the page. Run with ``make browser-test``
(``pytest -m browser``); the default suite leaves it out. Screenshots of each step go to
``$MLFLOW_RECSYS_SCREENSHOTS`` when it names a folder (``docs/images`` refreshes the docs' pictures), else to the
test's temporary folder.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from test_server_app import XSS, log_training_run, recsys_server, small_study

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def chromium():
    sync_api = pytest.importorskip("playwright.sync_api", reason='Playwright is missing: pip install -e ".[ui]"')
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium not found: apt-get install chromium (make browser-test installs it)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def test_tick_compare_follow_the_link_and_be_refused(chromium, tmp_path):
    started = time.monotonic()
    shots = Path(os.environ.get("MLFLOW_RECSYS_SCREENSHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    with recsys_server(tmp_path) as url:
        client = MlflowClient(tracking_uri=url)
        experiment_id = client.create_experiment("movielens study")
        study = small_study(client, experiment_id, tmp_path / "local")
        log_training_run(client, experiment_id, tmp_path / "local", model=XSS, seed=None, digest="e" * 64)
        page = chromium.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_navigation_timeout(90_000)  # a loaded CI machine: the first page of a cold server is slow
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

        # 1. The experiment's runs, grouped by split, model and seed.
        page.goto(f"{url}/recsys/", wait_until="domcontentloaded")
        page.click("#experiments a")
        page.wait_for_selector("#compare-form", timeout=90_000)
        assert page.locator("input[name=run]").count() == 6
        assert page.locator(".model-name", has_text=XSS).count() == 1  # shown as text, not as an element
        # 2. Tick EASE's run, ELSA's group (three seeds) and Popularity's run; choose the settings.
        first_split = page.locator(".split").first
        for model in ("EASE", "ELSA", "Popularity"):
            first_split.locator(".model", has=page.locator(".model-name", has_text=model)).locator(
                "input.group"
            ).check()
        assert page.locator("input[name=run]:checked").count() == 5
        page.fill("#reference", "EASE")
        # Choosing a primary metric shows its values beside the runs at once, with no round trip.
        ease = first_split.locator(".model", has=page.locator(".model-name", has_text="EASE"))
        page.select_option("#primary", "recall@20")
        recall = client.get_run(study["EASE"][0]).data.metrics["recall_at_20"]
        assert ease.locator("td.num").inner_text() == f"{recall:.4f}"
        assert page.inner_text("#shown-metric") == "recall@20"
        page.select_option("#primary", "ndcg@100")
        ndcg = client.get_run(study["EASE"][0]).data.metrics["ndcg_at_100"]
        assert ease.locator("td.num").inner_text() == f"{ndcg:.4f}"
        assert ease.locator(".mean").inner_text() == f"· mean {ndcg:.4f} over 1 run"
        page.fill("#n_resamples", "999")
        page.screenshot(path=str(shots / "server-runs.png"))
        # 3. Compare, and wait for the result.
        clicked = time.monotonic()
        page.click("#compare")
        page.wait_for_selector("#result", timeout=150_000)
        page.wait_for_function(
            "document.querySelector('#forest').complete && document.querySelector('#forest').naturalWidth > 0",
            timeout=30_000,
        )
        compare_seconds = time.monotonic() - clicked
        sentences = page.locator(".sentence").all_inner_texts()
        assert any("ndcg@100" in s and "ELSA" in s for s in sentences), sentences
        page.screenshot(path=str(shots / "server-result.png"), full_page=True)
        # 4. Follow the link into the MLflow UI: the comparison run, FINISHED, with the expected table.
        link = page.get_attribute("#run-link", "href")
        run_id = link.rsplit("/", 1)[1]
        page.click("#run-link")
        page.wait_for_url(f"**/#/experiments/{experiment_id}/runs/{run_id}**", timeout=120_000)
        page.wait_for_selector(f"text={client.get_run(run_id).info.run_name}", timeout=120_000)
        page.screenshot(path=str(shots / "server-run.png"))
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED" and run.data.tags["recsys.role"] == "comparison"
        table = json.loads(Path(client.download_artifacts(run_id, "report_table.json", str(tmp_path))).read_text())
        rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
        assert sorted((r["candidate"], r["baseline"], r["metric"]) for r in rows) == sorted(
            (m, "EASE", k) for m in ("ELSA", "Popularity") for k in ("ndcg@100", "recall@20")
        )
        assert set(run.data.tags["recsys.source_runs"].split(",")) == {
            r for m in ("EASE", "ELSA", "Popularity") for r in study[m]
        }
        # 5. An incomparable selection (one model only) is refused in the page, and nothing is started.
        n_runs = len(client.search_runs([experiment_id]))
        page.goto(f"{url}/recsys/experiments/{experiment_id}", wait_until="domcontentloaded")
        page.locator(".split").first.locator(".model", has=page.locator(".model-name", has_text="ELSA")).locator(
            "input.group"
        ).check()
        page.click("#compare")
        error = page.wait_for_selector("#error", timeout=90_000).inner_text()
        assert "expected at least two models to compare, found only ['ELSA']" in error, error
        assert page.locator("input[name=run]:checked").count() == 3  # the selection stays ticked
        page.screenshot(path=str(shots / "server-refused.png"))
        assert len(client.search_runs([experiment_id])) == n_runs
        # 6. The UI's compare-runs address with recsys/compare in place of #/compare-runs: pre-ticked.
        chosen = study["EASE"] + study["Popularity"]
        page.goto(f"{url}/recsys/compare?runs={json.dumps(chosen)}&experiments={json.dumps([experiment_id])}")
        assert sorted(page.locator("input[name=run]:checked").evaluate_all("els => els.map(e => e.value)")) == sorted(
            chosen
        )
        assert not dialogs  # no script ran from a name
    print(
        f"browser test: compare from the click to the forest plot {compare_seconds:.1f} s; "
        f"whole test {time.monotonic() - started:.1f} s"
    )
