"""Run and experiment tags of the ``recsys.`` namespace, named once (docs/howto/run-conventions.md lists them)."""

#: What a run is: one of the ``ROLE_*`` values below.
ROLE = "recsys.role"
ROLE_SPLIT = "split"
ROLE_TRAIN = "train"
ROLE_COMPARISON = "comparison"
ROLE_MAIN = "main"
ROLE_GATE = "gate"

#: The model a training run fitted (the registry name, e.g. ``EASE``).
MODEL = "recsys.model"
#: JSON of the model's hyper-parameters except the seed: what runs of one model must share to be pooled.
CONFIG = "recsys.config"
#: The training seed, or :data:`NO_SEED` for a deterministic model.
SEED = "recsys.seed"
#: Seed tag value of a deterministic model (no seed).
NO_SEED = "none"
SPLIT_DIGEST = "recsys.split_digest"
#: The torch device type a training fitted and scored on: ``cpu``, ``cuda`` or ``mps`` (the host is ``cpu``). Seeds
#: pooled or compared across types warn: a GPU's sums round otherwise, so its spread is not only the seeds'.
DEVICE = "recsys.device"
TARGETS_FINGERPRINT = "recsys.targets_fingerprint"
DATASET = "recsys.dataset"
#: A train-role run scored from another framework's lists: the format they came in (dataframe, parquet, csv,
#: trec, ranx).
IMPORTED_FROM = "recsys.imported_from"

#: Comparison runs: the runs compared, how many, the primary metric, the headline and, on failure, why.
SOURCE_RUNS = "recsys.source_runs"
#: How many runs a comparison compared (``recsys.source_runs`` may hold a digest instead of the list).
N_SOURCE_RUNS = "recsys.n_source_runs"
PRIMARY_METRIC = "recsys.primary_metric"
#: A comparison's headline: the first result sentence of its primary metric (or of its first metric).
RESULT = "recsys.result"
#: Why a run FAILED: a comparison, a training a study ran, or the study (each failed training, its run and why).
ERROR = "recsys.error"

#: Gate (audit) runs: the decision (PROMOTE, HOLD, REJECT, INVALID), its exit code, and the registry change made.
GATE_DECISION = "recsys.gate_decision"
GATE_EXIT_CODE = "recsys.gate_exit_code"
GATE_PROMOTED = "recsys.gate_promoted"

#: The main (study) run: the comparison run the study produced.
COMPARISON_RUN = "recsys.comparison_run"

#: Set by the run context provider on every run an ``mlflow-recsys`` command makes: the package version and
#: the command.
PACKAGE_VERSION = "recsys.package_version"
COMMAND = "recsys.command"
#: Set by the run context provider on runs a comparison job of the server pages makes: the job's id, so that the
#: server can end the run of a job whose process died.
SERVER_JOB = "recsys.server_job"

#: Experiment tag ("true"): the experiment holds training runs, so the server page lists it with one query.
HAS_TRAINING_RUNS = "recsys.has_training_runs"


def seed_order(seed: str) -> tuple:
    """Sort key for ``recsys.seed`` values: integers by value, then any other text."""
    numeric = seed.lstrip("-").isdigit()
    return (not numeric, int(seed) if numeric else 0, seed)
