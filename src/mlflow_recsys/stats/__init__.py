"""Paired statistical comparison of recommenders evaluated on the same users.

Import-light on purpose: neither torch nor mlflow is imported here. The numbers only: what people read (text, markdown,
HTML, LaTeX, plots) is :mod:`mlflow_recsys.report`.
"""

from mlflow_recsys.stats._comparison import (
    COLUMNS,
    ComparisonReport,
    PairwiseComparison,
    compare_models,
    compare_pair,
    wilcoxon_method,
)
from mlflow_recsys.stats._corrections import adjust_p_values
from mlflow_recsys.stats._exposure import (
    EXPOSURE_COLUMNS,
    EXPOSURE_METRICS,
    ExposureAnalysis,
    GlobalMetricComparison,
    catalogue_coverage,
    compare_exposure,
    gini_index,
)
from mlflow_recsys.stats._gate_decision import GATE_COLUMNS, GateDecision, GateRule, Guardrail, gate_decision
from mlflow_recsys.stats._levels import LevelIntervals, metric_level_intervals
from mlflow_recsys.stats._meta import META_COLUMNS, MetaAnalysis, paired_effect, random_effects
from mlflow_recsys.stats._power import minimum_detectable_effect, non_inferiority_power, required_users
from mlflow_recsys.stats._ranks import RANK_COLUMNS, RankAnalysis, datasets_needed, p_value_floor, rank_across_datasets
from mlflow_recsys.stats._seeds import SEED_COLUMNS, SeedSpread, average_over_seeds, compare_seed_averaged, seed_spread
from mlflow_recsys.stats._settings import ComparisonSettings
from mlflow_recsys.stats._slices import HETEROGENEITY_COLUMNS, SLICE_COLUMNS, SliceAnalysis, StratumComparison
from mlflow_recsys.stats._strata import (
    Slice,
    cold_slice,
    history_lengths,
    history_slice,
    split_slices,
    target_popularity_slice,
)
from mlflow_recsys.stats._verdict import EFFECT_COLUMNS, StudyVerdict, verdict_across_datasets
from mlflow_recsys.stats._warnings import (
    ComparisonWarning,
    FewNonzeroUnitsWarning,
    FewSeedsWarning,
    IntervalFallbackWarning,
    LowResamplesWarning,
    MixedDevicesWarning,
    UnverifiedPairingWarning,
    WideMarginWarning,
)

__all__ = [
    "COLUMNS",
    "EFFECT_COLUMNS",
    "EXPOSURE_COLUMNS",
    "EXPOSURE_METRICS",
    "GATE_COLUMNS",
    "HETEROGENEITY_COLUMNS",
    "META_COLUMNS",
    "RANK_COLUMNS",
    "SEED_COLUMNS",
    "SLICE_COLUMNS",
    "ComparisonReport",
    "ComparisonSettings",
    "ComparisonWarning",
    "ExposureAnalysis",
    "FewNonzeroUnitsWarning",
    "FewSeedsWarning",
    "GateDecision",
    "GateRule",
    "GlobalMetricComparison",
    "Guardrail",
    "IntervalFallbackWarning",
    "LevelIntervals",
    "LowResamplesWarning",
    "MetaAnalysis",
    "PairwiseComparison",
    "RankAnalysis",
    "SeedSpread",
    "Slice",
    "SliceAnalysis",
    "StratumComparison",
    "StudyVerdict",
    "UnverifiedPairingWarning",
    "MixedDevicesWarning",
    "WideMarginWarning",
    "adjust_p_values",
    "average_over_seeds",
    "catalogue_coverage",
    "cold_slice",
    "compare_models",
    "compare_exposure",
    "compare_pair",
    "compare_seed_averaged",
    "datasets_needed",
    "gate_decision",
    "gini_index",
    "history_lengths",
    "history_slice",
    "metric_level_intervals",
    "minimum_detectable_effect",
    "non_inferiority_power",
    "p_value_floor",
    "paired_effect",
    "random_effects",
    "rank_across_datasets",
    "required_users",
    "seed_spread",
    "split_slices",
    "target_popularity_slice",
    "verdict_across_datasets",
    "wilcoxon_method",
]
