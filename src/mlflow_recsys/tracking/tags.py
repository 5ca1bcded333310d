"""Run tags of the ``recsys.`` namespace, named once."""

ROLE = "recsys.role"
MODEL = "recsys.model"
SEED = "recsys.seed"
SPLIT_DIGEST = "recsys.split_digest"
TARGETS_FINGERPRINT = "recsys.targets_fingerprint"
SOURCE_RUNS = "recsys.source_runs"
PRIMARY_METRIC = "recsys.primary_metric"
DATASET = "recsys.dataset"
#: JSON of the model's hyper-parameters except the seed: what runs of one model must share to be pooled.
CONFIG = "recsys.config"

ROLE_SPLIT = "split"
ROLE_TRAIN = "train"
ROLE_COMPARISON = "comparison"
ROLE_MAIN = "main"

#: Experiment tag ("true"): the experiment holds training runs, so the server page lists it with one query.
HAS_TRAINING_RUNS = "recsys.has_training_runs"

#: Seed tag value of a deterministic model (no seed).
NO_SEED = "none"


def seed_order(seed: str) -> tuple:
    """Sort key for ``recsys.seed`` values: integers by value, then any other text."""
    numeric = seed.lstrip("-").isdigit()
    return (not numeric, int(seed) if numeric else 0, seed)
#: Why a comparison run FAILED.
ERROR = "recsys.error"
#: A comparison's headline: the first result sentence of its primary metric (or of its first metric).
RESULT = "recsys.result"
#: How many runs a comparison compared (``recsys.source_runs`` may hold a digest instead of the list).
N_SOURCE_RUNS = "recsys.n_source_runs"
