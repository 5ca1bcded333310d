"""Wall time of a study over three datasets: plan (--dry-run), run and report, on the sequential executor and on a
local Ray side by side, and the time the study run's summary (table, verdict, figures) took once the trainings were
done (the issue's target: at most 10 s).

The study is the example of ``examples/study/`` (MovieLens-100k, a synthetic click log, a subsample of MovieLens-100k
under other ids; EASE with a two-value grid, ELSA under three seeds, Popularity: 4 candidates, 6 trainings a
dataset), with ``--epochs`` ELSA epochs. Each executor gets a fresh SQLite store, so nothing is reused. Ray is
timed when it is installed (``pip install "mlflow-recsys[ray]"``).

    python benchmarks/bench_study.py [--epochs 3] [--executors sequential,ray]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(args: list[str], folder: Path, env: dict) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--executors", default="sequential,ray")
    options = parser.parse_args()
    executors = options.executors.split(",")
    if "ray" in executors:
        try:
            import ray  # noqa: F401
        except ImportError:
            print('ray: not installed (pip install "mlflow-recsys[ray]"); timing the sequential executor only')
            executors.remove("ray")
    with tempfile.TemporaryDirectory(prefix="bench-study-") as tmp:
        folder = Path(tmp)
        subprocess.run([sys.executable, str(ROOT / "examples" / "study" / "make_logs.py"), "--out", tmp], check=True)
        study = (ROOT / "examples" / "study" / "study.toml").read_text()
        study = re.sub(r"epochs = \d+", f"epochs = {options.epochs}", study)
        rows = []
        for executor in executors:
            (folder / f"{executor}.toml").write_text(f'executor = "{executor}"\n' + study)
            env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
            env.update(
                MLFLOW_TRACKING_URI=f"sqlite:///{folder}/{executor}.db",
                PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
                MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="false",
            )
            command = [str(BIN / "mlflow-recsys"), "study", f"{executor}.toml", "--project-uri", str(ROOT)]
            plan_s, _ = run([*command, "--dry-run"], folder, env)
            run_s, out = run(command, folder, env)
            summary_s = float(re.search(r"made in ([0-9.]+) s", out).group(1))
            trainings = out.count("train run ") or out.count("finished, ")
            rows.append((executor, plan_s, run_s, summary_s, trainings))
    print(
        f"\nstudy: 3 datasets x 4 candidates (EASE l2 grid of 2, ELSA x 3 seeds at {options.epochs} epochs, Popularity)"
    )
    print(f"{'executor':<12}{'plan (s)':>10}{'run and report (s)':>20}{'summary (s)':>13}{'trainings':>11}")
    for executor, plan_s, run_s, summary_s, trainings in rows:
        print(f"{executor:<12}{plan_s:>10.1f}{run_s:>20.1f}{summary_s:>13.1f}{trainings:>11}")
    print(f"machine: {os.cpu_count()} CPUs; target for the summary: at most 10 s")


if __name__ == "__main__":
    main()
