"""Other frameworks' formats in and out: recommendation lists, TREC runs, split exports. No MLflow here."""

from mlflow_recsys.interchange._split_export import export_split_files

__all__ = ["export_split_files"]
