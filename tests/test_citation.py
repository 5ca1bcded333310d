"""The software citation names the version that is installed."""

import re
from pathlib import Path

import yaml

import mlflow_recsys

ROOT = Path(__file__).resolve().parents[1]


def test_citation_file_and_citing_page_give_the_package_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert str(cff["version"]) == mlflow_recsys.__version__ and cff["cff-version"] == "1.2.0"
    page = (ROOT / "docs" / "citing.md").read_text()
    assert re.search(r"version = \{(.*?)\}", page).group(1) == mlflow_recsys.__version__
