"""Every statistical setting of a comparison in one frozen, validated object: :class:`ComparisonSettings`.

The command line, the ``compare`` entry point, the server page and Python callers each build one, once; the
comparison passes it on whole, logs it as the comparison run's params and prints it in ``methods.md``.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from mlflow_recsys import validation
from mlflow_recsys.stats.corrections import CORRECTIONS, Correction
from mlflow_recsys.validation import expected, integer, line, number, one_of

if TYPE_CHECKING:
    from mlflow_recsys.evaluation import EvaluationResult
    from mlflow_recsys.stats.comparison import ComparisonReport

Alternative = Literal["two-sided", "greater", "less"]
TestMethod = Literal["randomization", "bootstrap", "t", "wilcoxon"]
IntervalMethod = Literal["percentile", "bca"]
ZeroMethod = Literal["wilcox", "pratt", "zsplit"]
Family = Literal["primary", "all"]
PrimaryAnalysis = Literal["auto", "seed-averaged", "representative-seed"]

ALTERNATIVES = ("two-sided", "greater", "less")
TEST_METHODS = ("randomization", "bootstrap", "t", "wilcoxon")
INTERVAL_METHODS = ("percentile", "bca")
#: How the Wilcoxon signed-rank test treats zero differences (``scipy.stats.wilcoxon``'s ``zero_method``).
ZERO_METHODS = ("wilcox", "pratt", "zsplit")
FAMILIES = ("primary", "all")
#: Which of a comparison of runs' two analyses of the same hypotheses is the primary one (the other is a
#: sensitivity analysis): ``"auto"`` resolves by :func:`resolve_primary_analysis`.
PRIMARY_ANALYSES = ("auto", "seed-averaged", "representative-seed")

#: Largest ``n_resamples``: p-values below 1/(10**6 + 1) are better had from a test with a known null than
#: from more resamples.
MAX_RESAMPLES = 1_000_000

#: The settings :func:`~mlflow_recsys.stats.compare_models` takes as keywords, in its order.
COMPARE_MODELS_SETTINGS = (
    "reference",
    "correction",
    "confidence_level",
    "n_resamples",
    "alternative",
    "test_method",
    "random_state",
    "interval_method",
    "zero_method",
    "primary",
    "family",
)


#: The longest model name a reference may be: a model name is an MLflow tag value, which holds 8,000 characters.
MAX_NAME_LENGTH = 8_000


@dataclass(frozen=True)
class ComparisonSettings:
    """The statistical settings of a comparison, checked when made; immutable.

    Fields, defaults and meanings are those of :func:`~mlflow_recsys.stats.compare_models` (see it for the
    tests, intervals and corrections and their sources), plus the seed protocol of a comparison of runs.

    Parameters
    ----------
    reference : str, optional
        The baseline every other model is compared against; ``None`` compares every pair.
    metrics : sequence of str, optional
        Metric keys (``"ndcg@100"``), stored as a tuple; a single key may be given as a str. ``None``: every
        metric the compared runs share (for a comparison of runs; :meth:`compare` needs them named).
    primary : str, optional
        The metric the conclusion rests on; one of ``metrics`` when they are named.
    family : ``"primary"`` or ``"all"``, default ``"primary"``
        ``"primary"``: the primary metric's hypotheses form a family of their own.
    correction : ``"holm"``, ``"bonferroni"`` or None, default ``"holm"``
        Family-wise error control within each family (Holm 1979; Bonferroni).
    confidence_level : float, default 0.95
        Strictly between 0 and 1; ``1 - confidence_level`` is also the significance level.
    n_resamples : int, default 9999
        B, from 1 to :data:`MAX_RESAMPLES`.
    alternative : ``"two-sided"``, ``"greater"`` or ``"less"``, default ``"two-sided"``
        A one-sided alternative needs ``reference``.
    test_method : ``"randomization"``, ``"bootstrap"``, ``"t"`` or ``"wilcoxon"``, default ``"randomization"``
    zero_method : ``"wilcox"``, ``"pratt"`` or ``"zsplit"``, default ``"wilcox"``
        Only for the Wilcoxon test.
    interval_method : ``"percentile"`` or ``"bca"``, default ``"percentile"``
    random_state : int >= 0 or None, default 0
        Seed of the resampling; ``None`` draws fresh entropy.
    paired_seeds : bool, default False
        The seed protocol of the seed-spread table when both models have seeds: pair runs by seed (shared
        randomness) or treat the seeds as independent.
    seed : str, optional
        The seed (``recsys.seed`` tag) of the run that stands for each seeded model in the paired report;
        ``None``: each model's lowest. An int is stored as its text.
    primary_analysis : ``"auto"``, ``"seed-averaged"`` or ``"representative-seed"``, default ``"auto"``
        Which analysis of a comparison of runs the conclusion rests on, when a model has several seeds and
        both a representative-seed and a seed-averaged comparison test the same hypotheses; the other is
        reported as a sensitivity analysis. ``"auto"``: seed-averaged when any compared model has two or
        more seeds, else the representative seed (:func:`resolve_primary_analysis`).

    Raises
    ------
    ValueError
        For any field out of range or of the wrong type, as ``"<field>: expected ..., found ..."``; names
        (``reference``, ``primary``, ``seed``, metric keys) with control characters included.
    """

    reference: str | None = None
    metrics: tuple[str, ...] | None = None
    primary: str | None = None
    family: Family = "primary"
    correction: Correction = "holm"
    confidence_level: float = 0.95
    n_resamples: int = 9999
    alternative: Alternative = "two-sided"
    test_method: TestMethod = "randomization"
    zero_method: ZeroMethod = "wilcox"
    interval_method: IntervalMethod = "percentile"
    random_state: int | None = 0
    paired_seeds: bool = False
    seed: str | None = None
    primary_analysis: PrimaryAnalysis = "auto"

    def __post_init__(self) -> None:
        put = object.__setattr__  # frozen: the checked, canonical values replace the given ones
        if self.metrics is not None:
            put(self, "metrics", tuple(metric_keys(self.metrics)))
        for name, longest in (("reference", MAX_NAME_LENGTH), ("primary", None)):
            if getattr(self, name) is not None:
                put(self, name, line(getattr(self, name), name, longest=longest))
        if self.metrics is not None and self.primary is not None and self.primary not in self.metrics:
            raise ValueError(expected("primary", f"one of the compared metrics {list(self.metrics)}", self.primary))
        put(self, "family", one_of(self.family, "family", FAMILIES))
        if not isinstance(self.correction, (str, type(None))) or self.correction not in CORRECTIONS:
            raise ValueError(expected("correction", "one of 'holm', 'bonferroni' or None", self.correction))
        put(self, "confidence_level", number(self.confidence_level, "confidence_level", above=0, below=1))
        put(self, "n_resamples", integer(self.n_resamples, "n_resamples", minimum=1))
        if self.n_resamples > MAX_RESAMPLES:
            raise ValueError(f"n_resamples: expected at most {MAX_RESAMPLES:,}, found {self.n_resamples:,}")
        put(self, "alternative", one_of(self.alternative, "alternative", ALTERNATIVES))
        put(self, "test_method", one_of(self.test_method, "test_method", TEST_METHODS))
        put(self, "interval_method", one_of(self.interval_method, "interval_method", INTERVAL_METHODS))
        put(self, "zero_method", one_of(self.zero_method, "zero_method", ZERO_METHODS))
        if self.random_state is not None:
            put(self, "random_state", validation.seed(self.random_state, "random_state"))
        if not isinstance(self.paired_seeds, bool):
            raise ValueError(expected("paired_seeds", "True or False", self.paired_seeds))
        if isinstance(self.seed, numbers.Integral) and not isinstance(self.seed, bool):
            put(self, "seed", str(self.seed))  # compared as the recsys.seed tag's text
        if self.seed is not None:
            put(self, "seed", line(self.seed, "seed"))
        put(self, "primary_analysis", one_of(self.primary_analysis, "primary_analysis", PRIMARY_ANALYSES))
        if self.reference is None and self.alternative != "two-sided":
            raise ValueError(
                f"reference: a one-sided alternative ({self.alternative!r}) needs a reference model "
                "to say which side is the candidate, found None"
            )

    def replace(self, **changes) -> ComparisonSettings:
        """A copy with ``changes`` applied, checked again."""
        return dataclasses.replace(self, **changes)

    def compare_models_kwargs(self) -> dict:
        """The keywords of :func:`~mlflow_recsys.stats.compare_models` but ``metrics``: reference, correction,
        confidence_level, n_resamples, alternative, test_method, random_state, interval_method, zero_method,
        primary and family."""
        return {name: getattr(self, name) for name in COMPARE_MODELS_SETTINGS}

    def compare(self, results: Mapping[str, EvaluationResult]) -> ComparisonReport:
        """:func:`~mlflow_recsys.stats.compare_models` of ``results`` under these settings.

        Raises
        ------
        ValueError
            If ``metrics`` is ``None`` (name them), and whatever ``compare_models`` raises.
        """
        from mlflow_recsys.stats.comparison import compare_models

        if self.metrics is None:
            raise ValueError(expected("metrics", "the metric keys to compare", None))
        return compare_models(results, metrics=list(self.metrics), **self.compare_models_kwargs())

    def to_params(self) -> dict[str, str]:
        """The settings as MLflow params, in field order: text as MLflow stores it (``"None"`` for None), metrics
        comma-separated."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = ",".join(value) if f.name == "metrics" and value is not None else str(value)
        return out


def resolve_primary_analysis(
    primary_analysis: PrimaryAnalysis, *, seeded: bool
) -> Literal["seed-averaged", "representative-seed"]:
    """The primary analysis a comparison of runs reports: ``primary_analysis`` with ``"auto"`` resolved.

    Parameters
    ----------
    primary_analysis:
        One of :data:`PRIMARY_ANALYSES`.
    seeded:
        Whether some compared model has two or more seeds (so a seed-averaged comparison exists).

    Returns
    -------
    ``"seed-averaged"`` or ``"representative-seed"``; ``"auto"`` gives the first when ``seeded``, else the
    second.

    Raises
    ------
    ValueError
        If ``primary_analysis`` is ``"seed-averaged"`` and no model has seeds, or is not one of
        :data:`PRIMARY_ANALYSES`.
    """
    one_of(primary_analysis, "primary_analysis", PRIMARY_ANALYSES)
    if primary_analysis == "auto":
        return "seed-averaged" if seeded else "representative-seed"
    if primary_analysis == "seed-averaged" and not seeded:
        raise ValueError(
            expected(
                "primary_analysis",
                "'auto' or 'representative-seed' when no model has two or more seeds",
                primary_analysis,
            )
        )
    return primary_analysis


def metric_keys(metrics: str | Sequence[str]) -> list[str]:
    """``metrics`` as a list of distinct keys; one key may be given as a str.

    Raises
    ------
    ValueError
        If ``metrics`` is not a str or a sequence of str, is empty or repeats a key.
    """
    if isinstance(metrics, str):
        metrics = [metrics]
    if isinstance(metrics, (Set, Mapping)):  # no order: the report's rows, and the logged param, would vary by process
        raise ValueError(
            f"metrics: expected a metric key or a list of keys (in order), found a {type(metrics).__name__}"
        )
    try:
        keys = list(metrics)
    except TypeError:
        raise ValueError(f"metrics: expected a metric key or a list of keys, found {type(metrics).__name__}") from None
    if not keys:
        raise ValueError("metrics: expected at least one metric key, found none")
    bad = [m for m in keys if not isinstance(m, str)]
    if bad:
        raise ValueError(f"metrics: expected metric keys (str), found {bad!r}")
    # Joined by commas into one param and read back as column names: a key must survive both.
    malformed = [m for m in keys if not m.strip() or m != m.strip() or "," in m or not m.isprintable()]
    if malformed:
        raise ValueError(
            expected("metrics", "keys without commas, control characters or surrounding blanks", malformed)
        )
    if len(set(keys)) != len(keys):
        raise ValueError(f"metrics: expected distinct keys, found duplicates in {keys}")
    return [str(key) for key in keys]  # numpy's str_ as str
