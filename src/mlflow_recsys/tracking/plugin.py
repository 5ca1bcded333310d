"""MLflow plugin hooks, registered through entry points in ``pyproject.toml``."""

from __future__ import annotations

import os

from mlflow.tracking.context.abstract_context import RunContextProvider

#: Set by the ``mlflow-recsys`` command line (and so by every MLproject entry point) for its process.
COMMAND_ENV = "MLFLOW_RECSYS_COMMAND"
VERSION_TAG = "recsys.package_version"
COMMAND_TAG = "recsys.command"


class RecsysRunContext(RunContextProvider):
    """Tags runs started inside an ``mlflow-recsys`` command with the package version and the command."""

    def in_context(self) -> bool:
        return bool(os.environ.get(COMMAND_ENV))

    def tags(self) -> dict[str, str]:
        from mlflow_recsys import __version__

        return {VERSION_TAG: __version__, COMMAND_TAG: os.environ.get(COMMAND_ENV, "")}
