"""The ``mlflow.app`` plugin: pages inside ``mlflow server --app-name recsys`` to pick runs and compare them.

:mod:`~mlflow_recsys.server._app` makes the apps (``recsys``, ``recsys-auth``), :mod:`~mlflow_recsys.server._views`
holds the routes under ``/recsys/``, :mod:`~mlflow_recsys.server._listing` reads and groups the runs,
:mod:`~mlflow_recsys.server._selection` the Compare form, :mod:`~mlflow_recsys.server._jobs` the job files and slots
all worker processes share, and :mod:`~mlflow_recsys.server._runner` the process that runs one job. Nothing here is
imported by the rest of the package; importing this package imports neither Flask nor MLflow's server.
"""

__all__: list[str] = []  # MLflow finds the apps by their entry points; nothing here is imported by name
