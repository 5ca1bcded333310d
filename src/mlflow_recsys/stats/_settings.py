"""Every statistical setting of a comparison in one frozen, validated object: :class:`ComparisonSettings`.

The command line, the ``compare`` entry point, the server page and Python callers each build one, once; the comparison
passes it on whole, logs it as the comparison run's params and prints it in ``methods.md``.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from mlflow_recsys._validation import expected
from mlflow_recsys.settings_schema import check_fields, setting, settings_of
from mlflow_recsys.stats._corrections import Correction
from mlflow_recsys.stats._strata import parse_slice_spec

if TYPE_CHECKING:
    from mlflow_recsys.evaluation import EvaluationResult
    from mlflow_recsys.stats._results import ComparisonReport

Alternative = Literal["two-sided", "greater", "less"]
TestMethod = Literal["randomization", "bootstrap", "t", "wilcoxon", "sign"]
IntervalMethod = Literal["percentile", "bca"]
#: How the Wilcoxon signed-rank test treats zero differences (``scipy.stats.wilcoxon``'s ``zero_method``).
ZeroMethod = Literal["wilcox", "pratt", "zsplit"]
Family = Literal["primary", "all"]
#: What a comparison sets out to show: the candidate better (superiority), not worse by more than a margin
#: (non-inferiority) or within a margin either way (equivalence).
Hypothesis = Literal["superiority", "non-inferiority", "equivalence"]
#: Which of a comparison of runs' two analyses of the same hypotheses is the primary one (the other is a sensitivity
#: analysis): ``"auto"`` resolves by :func:`resolve_primary_analysis`.
PrimaryAnalysis = Literal["auto", "seed-averaged", "representative-seed"]

ALTERNATIVES: tuple[str, ...] = get_args(Alternative)
TEST_METHODS: tuple[str, ...] = get_args(TestMethod)
INTERVAL_METHODS: tuple[str, ...] = get_args(IntervalMethod)
ZERO_METHODS: tuple[str, ...] = get_args(ZeroMethod)
FAMILIES: tuple[str, ...] = get_args(Family)
HYPOTHESES: tuple[str, ...] = get_args(Hypothesis)
PRIMARY_ANALYSES: tuple[str, ...] = get_args(PrimaryAnalysis)

#: Largest ``n_resamples``: p-values below 1/(10**6 + 1) are better had from a test with a known null than from more
#: resamples.
MAX_RESAMPLES = 1_000_000

#: The longest model name a reference may be: a model name is an MLflow tag value, which holds 8,000 characters.
MAX_NAME_LENGTH = 8_000


@dataclass(frozen=True)
class ComparisonSettings:
    """The statistical settings of a comparison, checked when made; immutable.

    Each field is declared below with its type, default, range and meaning (:mod:`~mlflow_recsys.settings_schema`); the
    command line's options, the server page's form, the ``MLproject``'s parameters and the settings table of a
    comparison's ``methods.md`` are made from those declarations. The tests, intervals and corrections, with their
    sources, are those of :func:`~mlflow_recsys.stats.compare_models`: the sign-flip randomization test and the paired
    bootstrap (Efron & Tibshirani 1993; Smucker, Allan & Carterette 2007), the paired t-test, the Wilcoxon signed-rank
    test (Wilcoxon 1945), percentile and BCa intervals (Efron 1987), Holm's (1979), Bonferroni's and Westfall & Young's
    (1993) max-T corrections.

    ``metrics`` is stored as a tuple (one key may be given as a str; ``None``: every metric the compared runs
    share, for a comparison of runs); ``primary`` must be one of them when they are named; a one-sided
    ``alternative`` needs a ``reference``; ``representative_seed`` given as an int is stored as its text (the
    ``recsys.seed`` tag's); ``primary_analysis="auto"`` resolves by :func:`resolve_primary_analysis`.

    Raises
    ------
    ValueError
        For any field out of range or of the wrong type, as ``"<field>: expected ..., found ..."``; names
        (``reference``, ``primary``, ``representative_seed``, metric keys) with control characters included.
    """

    reference: str | None = setting(
        None,
        "baseline model every other model is compared with (none: every pair)",
        "name",
        optional=True,
        longest=MAX_NAME_LENGTH,
    )
    metrics: tuple[str, ...] | None = setting(
        None, "metric keys compared, comma-separated (default: every key all runs share)", "keys", optional=True
    )
    primary: str | None = setting(None, "metric declared primary in advance", "name", optional=True)
    family: Family = setting(
        "primary",
        "with a primary metric: adjust its hypotheses as a family of their own (primary) or together with the "
        "other metrics' (all)",
        "choice",
        choices=FAMILIES,
    )
    correction: Correction = setting(
        "holm",
        "family-wise adjustment within each family of hypotheses (Holm 1979, Bonferroni, maxt: Westfall-Young max-T "
        "step-down from joint sign flips, with simultaneous intervals; none: unadjusted)",
        "choice",
        choices=("holm", "bonferroni", "maxt"),
        optional=True,
    )
    confidence_level: float = setting(
        0.95, "interval level; 1 - level is also the significance level", "number", low=0, high=1
    )
    n_resamples: int = setting(
        9999,
        "sign flips and bootstrap replicates B; the smallest p-value is 1/(B+1)",
        "integer",
        low=1,
        high=MAX_RESAMPLES,
    )
    alternative: Alternative = setting(
        "two-sided",
        "one-sided (greater: candidate higher) only if the direction was fixed before seeing the data; needs a "
        "reference",
        "choice",
        choices=ALTERNATIVES,
    )
    hypothesis: Hypothesis = setting(
        "superiority",
        "what the candidate must be shown to be against the reference: better (superiority), not worse by more than "
        "the margin (non-inferiority) or within the margin either way (equivalence)",
        "choice",
        choices=HYPOTHESES,
    )
    margin: float | None = setting(
        None,
        "with non-inferiority or equivalence: the margin, in metric units (or a fraction of the reference's mean "
        "with --relative-margin)",
        "number",
        optional=True,
        low=0,
    )
    relative_margin: bool = setting(
        False,
        "read the margin as a fraction of the reference's mean, tested on the ratio of means",
        "flag",
        off="--absolute-margin",
    )
    test_method: TestMethod = setting("randomization", "the paired test", "choice", choices=TEST_METHODS)
    zero_method: ZeroMethod = setting(
        "wilcox", "with the Wilcoxon test: how zero differences are ranked", "choice", choices=ZERO_METHODS
    )
    interval_method: IntervalMethod = setting(
        "percentile",
        "bootstrap interval: percentile, or bias-corrected and accelerated (bca)",
        "choice",
        choices=INTERVAL_METHODS,
    )
    random_state: int | None = setting(
        0, "seed of the resampling, same seed same numbers (none: fresh entropy)", "seed", optional=True
    )
    paired_seeds: bool = setting(
        False,
        "when both models have training seeds: pair runs by seed (shared randomness) or treat them as independent",
        "flag",
        off="--independent-seeds",
    )
    representative_seed: str | None = setting(
        None,
        "seed of the run that represents each seeded model in the report (default: its lowest)",
        "name",
        optional=True,
    )
    primary_analysis: PrimaryAnalysis = setting(
        "auto",
        "the analysis the conclusion rests on when a model has seeds, the other being a sensitivity analysis "
        "(auto: seed-averaged when a model has two or more seeds, else the representative seed)",
        "choice",
        choices=PRIMARY_ANALYSES,
    )
    slices: tuple[str, ...] | None = setting(
        None,
        "exploratory slices of the users, comma-separated: history[:quantile bins, 4], cold[:most fold-in items, 5], "
        "target_popularity[:head share, 0.2]; built from the runs' split, each a Holm family of its own",
        "keys",
        optional=True,
    )
    global_metrics: tuple[str, ...] | None = setting(
        None,
        "metrics of all users' lists together, comma-separated: coverage@k (catalogue coverage) and gini@k (Gini index "
        "of item exposure), each with a paired bootstrap interval and a list-swap randomization test",
        "keys",
        optional=True,
    )

    def __post_init__(self) -> None:
        seed = self.representative_seed
        if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
            object.__setattr__(self, "representative_seed", str(seed))  # compared as the recsys.seed tag's text
        check_fields(self)
        if self.metrics is not None and self.primary is not None and self.primary not in self.metrics:
            raise ValueError(expected("primary", f"one of the compared metrics {list(self.metrics)}", self.primary))
        if self.reference is None and self.alternative != "two-sided":
            raise ValueError(
                f"reference: a one-sided alternative ({self.alternative!r}) needs a reference model "
                "to say which side is the candidate, found None"
            )
        self._check_margin()
        self._check_maxt()
        kinds = [parse_slice_spec(spec)[0] for spec in self.slices or ()]
        repeated = sorted({kind for kind in kinds if kinds.count(kind) > 1})
        if repeated:  # each becomes a slice of that name, and a comparison takes a name once
            raise ValueError(
                expected("slices", f"each slice once ({', '.join(repeated)} repeated)", list(self.slices or ()))
            )
        if self.global_metrics is not None:
            from mlflow_recsys.stats._exposure import _metrics_iv  # it reads these settings' ranges: imported late

            _metrics_iv(self.global_metrics, "global_metrics")
        if self.slices and self.hypothesis != "superiority":
            wanted = "no slices with a margin hypothesis (strata are explored, not gated)"
            raise ValueError(expected("slices", wanted, ",".join(self.slices)))

    def _check_maxt(self) -> None:
        """Max-T re-tests the family on joint relabellings of the users: the randomization test of a difference."""
        if self.correction != "maxt":
            return
        needs = {
            "test_method": ("randomization", "its joint null is the family's sign flips"),
            "hypothesis": ("superiority", "a margin's tests are not adjusted jointly"),
            "interval_method": ("percentile", "its intervals are the simultaneous max-T ones"),
        }
        for name, (value, why) in needs.items():
            if getattr(self, name) != value:
                raise ValueError(expected(name, f"{value!r} with correction 'maxt' ({why})", getattr(self, name)))

    def _check_margin(self) -> None:
        """A margin goes with a non-inferiority or equivalence hypothesis, and only there; such a hypothesis fixes
        its own sides and needs a reference to be not worse than."""
        if self.hypothesis == "superiority":
            if self.margin is not None or self.relative_margin:
                name, given = ("margin", self.margin) if self.margin is not None else ("relative_margin", True)
                what = f"no {name.replace('_', ' ')} with hypothesis 'superiority' (or non-inferiority or equivalence)"
                raise ValueError(expected(name, what, given))
            return
        if self.margin is None:
            raise ValueError(expected("margin", f"a margin > 0 for hypothesis {self.hypothesis!r}", None))
        if self.confidence_level <= 0.5:
            wanted = f"a level above 0.5 with hypothesis {self.hypothesis!r} (its interval is the 1 - 2 alpha one)"
            raise ValueError(expected("confidence_level", wanted, self.confidence_level))
        if self.relative_margin and self.margin >= 1:
            raise ValueError(expected("margin", "a relative margin strictly between 0 and 1", self.margin))
        if self.reference is None:
            wanted = f"the model the candidates are tested against (hypothesis {self.hypothesis!r})"
            raise ValueError(expected("reference", wanted, None))
        if self.alternative != "two-sided":
            raise ValueError(
                expected(
                    "alternative",
                    f"'two-sided' (the default) with hypothesis {self.hypothesis!r}, which sets its own sides",
                    self.alternative,
                )
            )
        if self.relative_margin and self.interval_method == "bca":
            raise ValueError(
                expected(
                    "interval_method",
                    "'percentile' with a relative margin (its interval is the percentile interval of the ratio "
                    "of means)",
                    self.interval_method,
                )
            )

    def replace(self, **changes) -> ComparisonSettings:
        """A copy with ``changes`` applied, checked again."""
        return dataclasses.replace(self, **changes)

    def compare_models_kwargs(self) -> dict:
        """The keywords of :func:`~mlflow_recsys.stats.compare_models` but ``metrics``: every field but those of
        a comparison of runs (``metrics``, ``paired_seeds``, ``representative_seed``, ``primary_analysis``, and
        ``slices``, built from the runs' split)."""
        of_runs = ("metrics", "paired_seeds", "representative_seed", "primary_analysis", "slices")
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in of_runs}

    def compare(self, results: Mapping[str, EvaluationResult]) -> ComparisonReport:
        """:func:`~mlflow_recsys.stats.compare_models` of ``results`` under these settings; ValueError, besides what
        that raises, when ``metrics`` is ``None`` (name them)."""
        from mlflow_recsys.stats._comparison import _compare

        if self.metrics is None:
            raise ValueError(expected("metrics", "the metric keys to compare", None))
        return _compare(results, self)

    def to_params(self) -> dict[str, str]:
        """The settings as text, in field order, as the command line writes them (``"none"`` for None, metrics
        comma-separated): what :meth:`~mlflow_recsys.settings_schema.Setting.parse` reads back."""
        return {name: s.text(getattr(self, name)) for name, (_, s) in settings_of(type(self)).items()}


def resolve_primary_analysis(
    primary_analysis: PrimaryAnalysis, *, seeded: bool
) -> Literal["seed-averaged", "representative-seed"]:
    """``primary_analysis`` (a checked setting) with ``"auto"`` resolved: ``"seed-averaged"`` when ``seeded`` (some
    model has two or more seeds), else ``"representative-seed"``; ValueError for ``"seed-averaged"`` unseeded."""
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
