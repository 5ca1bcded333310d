"""Imports point down (docs/development.md, "Layers"): each module of the package sits in one layer and imports
only from its own layer and the ones below, at module level and inside functions alike; the core imports no
MLflow. A new module is placed in a layer here, or this test names it."""

import ast
from pathlib import Path

import mlflow_recsys

SRC = Path(mlflow_recsys.__file__).parent

#: Layer of each top-level module or subpackage, lowest first. A module may import its own layer and those below.
LAYERS = {
    # plumbing every layer uses: atomic writes, digests, versioned JSON, canonical CSR, checks, the settings schema
    "_atomic": 0,
    "_digests": 0,
    "_envelope": 0,
    "_sparse": 0,
    "_parquet": 0,
    "errors": 0,
    "_validation": 0,
    "settings_schema": 0,
    "_catalogue": 0,
    "metrics": 1,
    # the compiled lookup of ranked items among a row's targets, behind metrics.hit_matrix
    "_hits_kernel": 1,
    # the training popularity of the items: what the item-side metrics and the popularity slice read
    "_item_popularity": 1,
    "data": 1,
    "models": 2,
    "evaluation": 3,
    "_evaluation_by_ids": 3,
    "stats": 4,
    "interchange": 4,
    "report": 5,
    "tracking": 6,
    "server": 7,
    "cli": 7,
    "_cli_group": 7,
    "__init__": 8,
}

#: The layers that make up the core: usable without a tracking server, so they never import MLflow.
CORE_TOP = LAYERS["report"]

#: Imports that point up, each with why it may: none may be added.
UPWARD = {
    # ComparisonReport's __str__, to_markdown and to_latex render through report/ (imported when called).
    ("stats", "report"),
}


def _unit(path: Path, root: Path) -> str:
    """The layer name of a module file: its subpackage, or its own name at the top level."""
    return path.relative_to(root).with_suffix("").parts[0]


def _imported(node: ast.AST) -> list[str]:
    """The package units an import statement names (``from mlflow_recsys import validation`` names validation)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        if node.module == "mlflow_recsys":
            return [f"mlflow_recsys.{a.name}" for a in node.names]
        return [node.module]
    return []


def imports_by_unit(root: Path = SRC) -> dict[str, set[str]]:
    """Each unit's imported names (module level and inside functions), as dotted module names."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        names = found.setdefault(_unit(path, root), set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names.update(_imported(node))
    return found


def test_every_module_has_a_layer():
    assert sorted(set(imports_by_unit()) - set(LAYERS)) == []


def test_imports_point_down():
    upward = []
    for unit, names in imports_by_unit().items():
        for name in names:
            parts = name.split(".")
            # the package's version is the one name of the package root that every layer may read
            if parts[0] != "mlflow_recsys" or len(parts) < 2 or parts[1] in (unit, "__version__"):
                continue
            if LAYERS[parts[1]] > LAYERS[unit] and (unit, parts[1]) not in UPWARD:
                upward.append(f"{unit} imports {name}")
    assert sorted(upward) == []


def test_the_core_imports_no_mlflow():
    found = [
        f"{unit} imports {name}"
        for unit, names in imports_by_unit().items()
        if LAYERS[unit] <= CORE_TOP
        for name in names
        if name.split(".")[0] == "mlflow"
    ]
    assert found == []


def test_the_check_sees_a_lazy_upward_import(tmp_path):
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "m.py").write_text("def f():\n    from mlflow_recsys import tracking\n    import mlflow\n")
    assert imports_by_unit(tmp_path) == {"metrics": {"mlflow_recsys.tracking", "mlflow"}}


def test_the_main_functions_are_importable_from_the_package_itself():
    import mlflow_recsys.stats
    import mlflow_recsys.tracking

    assert mlflow_recsys.compare_models is mlflow_recsys.stats.compare_models
    assert mlflow_recsys.compare_runs is mlflow_recsys.tracking.compare_runs
    assert mlflow_recsys.ComparisonSettings is mlflow_recsys.stats.ComparisonSettings
    missing = [name for name in mlflow_recsys.__all__ if not hasattr(mlflow_recsys, name)]
    assert missing == [] and {"evaluate_recommender", "seed_spread", "run_train", "TrainConfig"} <= set(
        dir(mlflow_recsys)
    )
