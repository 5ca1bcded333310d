"""Paired statistical comparison of recommenders evaluated on the same users.

Import-light on purpose: neither torch nor mlflow is imported here.
"""

from mlflow_recsys.stats.comparison import (
    COLUMNS,
    ComparisonReport,
    PairwiseComparison,
    compare_models,
    compare_pair,
)
from mlflow_recsys.stats.corrections import adjust_p_values
from mlflow_recsys.stats.power import minimum_detectable_effect, required_users
from mlflow_recsys.report.text import csv_safe_frame, escape_markdown, references_bibtex
from mlflow_recsys.stats.seeds import (
    SEED_COLUMNS,
    SeedSpread,
    average_over_seeds,
    compare_seed_averaged,
    seed_spread,
)
from mlflow_recsys.stats.warnings import (
    ComparisonWarning,
    FewNonzeroUnitsWarning,
    FewSeedsWarning,
    IntervalFallbackWarning,
    LowResamplesWarning,
    UnverifiedPairingWarning,
)

__all__ = [
    "COLUMNS",
    "SEED_COLUMNS",
    "ComparisonReport",
    "ComparisonWarning",
    "FewNonzeroUnitsWarning",
    "FewSeedsWarning",
    "IntervalFallbackWarning",
    "LowResamplesWarning",
    "PairwiseComparison",
    "SeedSpread",
    "UnverifiedPairingWarning",
    "adjust_p_values",
    "average_over_seeds",
    "compare_models",
    "compare_pair",
    "compare_seed_averaged",
    "csv_safe_frame",
    "escape_markdown",
    "minimum_detectable_effect",
    "references_bibtex",
    "required_users",
    "seed_spread",
]
