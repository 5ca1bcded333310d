"""Other frameworks' formats in and out: recommendation lists, TREC runs, split exports. No MLflow here."""
