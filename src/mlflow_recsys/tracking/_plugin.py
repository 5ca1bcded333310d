"""MLflow plugin hooks, registered through entry points in ``pyproject.toml``."""

from __future__ import annotations

import os

from mlflow.tracking.context.abstract_context import RunContextProvider

from mlflow_recsys.tracking import _tags as tags

#: Set by the ``mlflow-recsys`` command line (and so by every MLproject entry point) for its process.
COMMAND_ENV = "MLFLOW_RECSYS_COMMAND"
#: Set by the server pages for the process of one comparison job: the job's id.
SERVER_JOB_ENV = "MLFLOW_RECSYS_SERVER_JOB"


class RecsysRunContext(RunContextProvider):
    """Tags runs started inside an ``mlflow-recsys`` command with the package version and the command (and, in a
    comparison job of the server pages, the job's id)."""

    def in_context(self) -> bool:
        return bool(os.environ.get(COMMAND_ENV))

    def tags(self) -> dict[str, str]:
        from mlflow_recsys import __version__

        job = os.environ.get(SERVER_JOB_ENV)
        return {
            tags.PACKAGE_VERSION: __version__,
            tags.COMMAND: os.environ.get(COMMAND_ENV, ""),
            **({tags.SERVER_JOB: job} if job else {}),
        }
