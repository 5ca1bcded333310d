"""Import cost of the package's light entry points, from ``python -X importtime``.

Each case runs in a fresh interpreter. For each it prints, in milliseconds, the
import time the case's code caused (the sum of the top-level ``cumulative``
figures, less those of an empty ``-c pass``), the cumulative figures of
``mlflow_recsys``, ``torch`` and ``mlflow`` where they were imported, the wall
time of the case's code, and whether ``torch`` was in ``sys.modules`` at the end.
Figures are medians over ``--repeat`` runs.

Cases: ``import mlflow_recsys``, ``mlflow_recsys.stats``, ``mlflow_recsys.metrics``,
``mlflow_recsys.models``; loading a saved EASE and Popularity model with
``EASE.load`` / ``Popularity.load``; loading a logged EASE model with
``mlflow.pyfunc.load_model`` (logged by ``log_recommender`` to a temporary
SQLite store); and, for scale, ELSA training (which does need torch).

    python benchmarks/import_time.py
    python benchmarks/import_time.py --repeat 5 --no-pyfunc
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)$")
_REPORT = "import sys; print('TORCH', 'torch' in sys.modules)"

_FIT = """
import numpy as np, scipy.sparse as sp
rng = np.random.default_rng(0)
x = sp.random(60, 25, density=0.2, format="csr", random_state=rng, dtype=np.float32); x.data[:] = 1.0
"""


def cases(folder: Path, pyfunc_uri: str | None) -> dict[str, str]:
    found = {
        "import mlflow_recsys": "import mlflow_recsys",
        "import mlflow_recsys.stats": "import mlflow_recsys.stats",
        "import mlflow_recsys.metrics": "import mlflow_recsys.metrics",
        "import mlflow_recsys.models": "import mlflow_recsys.models",
        "EASE.load(path)": f"from mlflow_recsys.models import EASE; EASE.load({str(folder / 'ease')!r})",
        "Popularity.load(path)": (
            f"from mlflow_recsys.models import Popularity; Popularity.load({str(folder / 'popularity')!r})"
        ),
    }
    if pyfunc_uri is not None:
        found["mlflow.pyfunc.load_model (EASE)"] = f"import mlflow.pyfunc; mlflow.pyfunc.load_model({pyfunc_uri!r})"
    found["ELSA fit (needs torch)"] = _FIT + (
        "from mlflow_recsys.models import ELSAConfig, ELSATrainer\n"
        "ELSATrainer(ELSAConfig(latent_dim=4, epochs=1)).fit(x)"
    )
    return found


def prepare(folder: Path, pyfunc: bool) -> str | None:
    """Save an EASE and a Popularity model under ``folder``; log the EASE one if ``pyfunc``; return its URI."""
    script = _FIT + textwrap.dedent(f"""
        from mlflow_recsys.models import EASE, EASEConfig, Popularity
        EASE(EASEConfig(l2=10.0)).fit(x).save({str(folder / "ease")!r})
        Popularity().fit(x).save({str(folder / "popularity")!r})
        if {pyfunc!r}:
            import mlflow
            from mlflow_recsys.tracking._model_logging import log_recommender
            eid = mlflow.create_experiment("import-time", artifact_location={(folder / "artifacts").as_uri()!r})
            with mlflow.start_run(experiment_id=eid):
                print("URI", log_recommender(EASE.load({str(folder / "ease")!r}), np.arange(25)).model_uri)
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], env=_env(folder), capture_output=True, text=True, check=True
    ).stdout
    uris = [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("URI ")]
    return uris[0] if uris else None


def _env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{folder}/mlruns.db"
    return env


def measure(code: str, env: dict[str, str]) -> dict[str, float]:
    """One fresh interpreter running ``code`` under ``-X importtime``."""
    timed = (
        f"import time as _t; _s = _t.perf_counter()\n{code}\n_w = _t.perf_counter() - _s\n{_REPORT}\nprint('WALL', _w)"
    )
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", timed], env=env, capture_output=True, text=True, check=True
    )
    figures = {"total": 0.0}
    for line in proc.stderr.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        cumulative, indent, name = int(match[2]) / 1000, match[3], match[4]
        if not indent:
            figures["total"] += cumulative
        if name in ("mlflow_recsys", "torch", "mlflow") and name not in figures:
            figures[name] = cumulative
    for line in proc.stdout.splitlines():
        if line.startswith("TORCH "):
            figures["torch_loaded"] = float(line.split()[1] == "True")
        elif line.startswith("WALL "):
            figures["wall"] = float(line.split()[1]) * 1000
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; medians are printed (default 3)")
    parser.add_argument("--no-pyfunc", action="store_true", help="skip the MLflow pyfunc case (it needs SQLite)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="import-time-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        uri = prepare(folder, not args.no_pyfunc)
        print(f"prepared models in {time.perf_counter() - started:.1f} s; python {sys.version.split()[0]}")
        env = _env(folder)
        baseline = statistics.median(measure("pass", env)["total"] for _ in range(args.repeat))
        header = f"{'case':34} {'imports':>9} {'mlflow_recsys':>13} {'torch':>8} {'mlflow':>8} {'wall':>8}  torch?"
        print(header)
        print("-" * len(header))
        for label, code in cases(folder, uri).items():
            runs = [measure(code, env) for _ in range(args.repeat)]

            def median(key: str, runs: list[dict[str, float]] = runs) -> str:
                values = [r[key] for r in runs if key in r]
                return f"{statistics.median(values):.0f}" if values else "-"

            total = statistics.median(r["total"] for r in runs) - baseline
            loaded = "yes" if any(r.get("torch_loaded") for r in runs) else "no"
            print(
                f"{label:34} {total:9.0f} {median('mlflow_recsys'):>13} {median('torch'):>8} "
                f"{median('mlflow'):>8} {median('wall'):>8}  {loaded}"
            )
        print("ms; imports = the case's import time (-X importtime, top-level cumulative, less `-c pass`)")


if __name__ == "__main__":
    main()
