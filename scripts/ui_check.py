"""Open the demo's comparison report in the real MLflow UI with headless Chromium; measure it and screenshot it.

    make demo            # first: the comparison run this script looks at
    .venv/bin/python scripts/ui_check.py [--store sqlite:///mlruns.db] [--experiment mlflow-recsys-demo]
                                         [--screenshot docs/images/comparison-run.png]

Takes the newest FINISHED run tagged ``recsys.role=comparison`` in the
experiment (by default what ``make demo`` leaves in ``./mlruns.db``), starts
``mlflow server`` on 127.0.0.1 for that store, and opens the run's
``report.html`` in the UI's artifact viewer with Playwright driving Debian's
``chromium`` in a 1280x800 window. Inside the viewer's iframe it checks that
every header of the key table ends within the visible width (no horizontal
scrolling needed), that the page itself does not scroll sideways and that the
table has the primary metric's row: first as the UI opens on a first visit
(with its Assistant panel, the narrowest viewer), then with that panel closed.
Then it saves a screenshot of the UI page, the report scrolled to its title.
Prints ``ok``/``FAIL`` per check and exits non-zero when one fails.

Needs ``pip install -e ".[ui]"`` (Playwright, which drives the system chromium:
no browser download) and ``apt-get install chromium``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._local_server import local_tracking_server

KEY_COLUMNS = ("metric", "comparison", "difference", "interval", "adjusted p", "direction", "mde", "W/T/L")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

ASSISTANT_CLOSE = 'button[data-component-id="mlflow.assistant.chat_panel.close"]'
# Run inside the report's frame: where each key header ends, against the widths a reader sees without scrolling.
MEASURE = """() => {
  const table = document.querySelector('#report-table table');
  if (!table) return null;
  const headers = [...table.querySelectorAll('thead th')].map(th => ({
    text: th.textContent.trim(), right: th.getBoundingClientRect().right}));
  const rows = [...table.querySelectorAll('tbody tr')].map(tr => tr.cells[0].textContent.trim());
  return {headers, rows, viewport: window.innerWidth, client: document.documentElement.clientWidth,
          scroll: document.documentElement.scrollWidth};
}"""


def measure(page, iframe, primary: str | None, args, layout: str) -> dict[str, bool]:
    """The checks on the key table as the viewer shows it now; prints the widths measured."""
    page.wait_for_timeout(500)  # let the layout settle (fonts, images, panels)
    frame = iframe.content_frame()
    box = iframe.bounding_box()
    iframe_client = iframe.evaluate("e => e.clientWidth")
    m = frame.evaluate(MEASURE)
    if m is None:
        return {f"[{layout}] the report has its key table (#report-table)": False}
    visible = min(iframe_client, m["client"])
    print(
        f"[{layout}] window {args.width}x{args.height}: iframe at x={box['x']:.0f}, client width "
        f"{iframe_client}px; report document client width {m['client']}px, scroll width {m['scroll']}px; "
        f"last key column ends at {m['headers'][-1]['right'] if m['headers'] else float('nan'):.0f}px"
    )
    by_text = {h["text"]: h["right"] for h in m["headers"]}
    checks = {
        f"[{layout}] the key table has exactly the key columns, in order": tuple(h["text"] for h in m["headers"])
        == KEY_COLUMNS
    }
    for name in KEY_COLUMNS:
        right = by_text.get(name)
        edge = "missing" if right is None else f"{right:.0f}px"
        checks[f"[{layout}] key column {name!r} visible without horizontal scrolling ({edge} <= {visible}px)"] = (
            right is not None and right <= visible
        )
    checks[f"[{layout}] the report itself needs no horizontal scrolling ({m['scroll']}px <= {m['client']}px)"] = (
        m["scroll"] <= m["client"]
    )
    checks[f"[{layout}] the key table has the primary metric's row ({primary})"] = (
        primary is not None and primary in m["rows"]
    )
    return checks


def absolute_sqlite(uri: str) -> str:
    """``sqlite:///mlruns.db`` relative to the working directory, as an absolute URI (other stores unchanged)."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri[len(prefix) :].startswith("/"):
        return prefix + str(Path(uri[len(prefix) :]).resolve())
    return uri


def find_comparison(store: str, experiment: str):
    """The experiment and its newest FINISHED comparison run; exits with advice when there is none."""
    from mlflow.tracking import MlflowClient

    hint = "run `make demo` first (it leaves a comparison run in ./mlruns.db), or pass --store/--experiment"
    if store.startswith("sqlite:///") and not Path(store[len("sqlite:///") :]).is_file():
        sys.exit(f"ui-check: no store at {store}: {hint}")
    client = MlflowClient(tracking_uri=store)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        sys.exit(f"ui-check: no experiment {experiment!r} in {store}: {hint}")
    runs = client.search_runs(
        [exp.experiment_id],
        filter_string=f"tags.`{tags.ROLE}` = '{tags.ROLE_COMPARISON}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if not runs:
        sys.exit(f"ui-check: no finished comparison run in experiment {experiment!r} of {store}: {hint}")
    return exp, runs[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="sqlite:///mlruns.db", help="tracking store of the demo")
    parser.add_argument("--experiment", default="mlflow-recsys-demo")
    parser.add_argument("--screenshot", default="docs/images/comparison-run.png")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=800)
    args = parser.parse_args()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sys.exit('ui-check: Playwright is missing: .venv/bin/pip install -e ".[ui]"')
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser_path is None:
        sys.exit("ui-check: chromium not found: apt-get install chromium")

    store = absolute_sqlite(args.store)
    exp, run = find_comparison(store, args.experiment)
    run_id = run.info.run_id
    primary = run.data.tags.get(tags.PRIMARY_METRIC) or None
    print(f"comparison run {run_id} ({run.info.run_name}) in experiment {exp.name!r} ({exp.experiment_id})")
    checks: dict[str, bool] = {}
    shot = Path(args.screenshot).resolve()
    with (
        tempfile.TemporaryDirectory() as tmp,
        local_tracking_server(store, Path(tmp) / "served-artifacts") as url,
        sync_playwright() as p,
    ):
        page_url = f"{url}/#/experiments/{exp.experiment_id}/runs/{run_id}/artifacts/report.html"
        browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": args.width, "height": args.height})
            page.goto(page_url, wait_until="domcontentloaded", timeout=120_000)
            iframe = page.wait_for_selector("iframe.mlflow-html-iframe", timeout=120_000)
            frame = iframe.content_frame()
            frame.wait_for_selector("#report-table table", timeout=60_000)
            # A first visit opens the MLflow Assistant beside the run page, which narrows the viewer the most:
            # measure as it comes, then with the assistant closed (the layout of the screenshot).
            checks.update(measure(page, iframe, primary, args, "as first opened"))
            close = page.query_selector(ASSISTANT_CLOSE)
            if close is not None:
                close.click()
                page.wait_for_timeout(500)
                checks.update(measure(page, iframe, primary, args, "assistant closed"))

            # The screenshot: the UI page with the report scrolled so the result sentence and key table show.
            iframe.content_frame().evaluate("""() => {
              const h = document.querySelector('h1');
              if (h) window.scrollTo(0, Math.max(0, h.getBoundingClientRect().top + window.scrollY - 8));
            }""")
            page.wait_for_timeout(300)
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    checks["the screenshot was written"] = shot.is_file() and shot.stat().st_size > 10_000
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    print(f"page: {page_url}\nscreenshot: {shot}")
    if not all(checks.values()):
        sys.exit(1)


if __name__ == "__main__":
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    main()
