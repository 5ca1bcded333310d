"""The ``mlflow.app`` plugin: pages inside ``mlflow server --app-name recsys`` to pick runs and compare them.

- :mod:`~mlflow_recsys.server.app`: the app factories (``recsys``, ``recsys-auth``).
- :mod:`~mlflow_recsys.server.views`: the routes under ``/recsys/``.
- :mod:`~mlflow_recsys.server.listing`: runs read page by page and grouped by split, model and seed.
- :mod:`~mlflow_recsys.server.selection`: the Compare form and the checks it passes before a job starts.
- :mod:`~mlflow_recsys.server.jobs`: job files and comparison slots shared by all worker processes.
- :mod:`~mlflow_recsys.server.runner`: the process that runs one comparison job.

Nothing here is imported by the rest of the package; importing this package imports neither Flask nor MLflow's
server.
"""
