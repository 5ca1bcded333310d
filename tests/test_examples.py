"""Examples and README snippets must run, so they cannot rot."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_worked_example_runs_and_prints_every_table():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "worked_example.py")], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    for marker in ("Aggregate metrics", "Paired comparison", "Randomization test against paired t-test",
                   "Retraining ELSA under five seeds", "sd_retraining", "Methods"):
        assert marker in out


def test_readme_python_example_runs(tmp_path):
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, check=True).stdout
    assert "ndcg@100" in out and "calibrated_recall@20" in out
