"""A launch decision from paired per-user results: the candidate against the incumbent on a primary metric and on
guardrail metrics, each against its own margin.

The rule (Schultzberg, Ankargren & Frånberg 2024, "Risk-aware product decisions in A/B tests with multiple metrics",
arXiv 2402.11609): ship when the primary metric is shown non-inferior (or, asked for, superior) **and** every
guardrail is shown non-inferior at its own margin, each test at the full alpha. Requiring all of them to pass already
bounds the chance of shipping a model worse on any one of them by alpha, so no adjustment across guardrails is made;
the price is power, which the rule reports: the chance that all of its tests pass when the candidate is truly equal to
the incumbent on every metric, the product of each test's power (the metrics taken as independent, which understates
it when they move together).

Decisions: ``PROMOTE`` (every test passes), ``REJECT`` (the primary metric or a guardrail is shown worse by more than
its margin; shown worse at all, for a superiority primary), else ``HOLD`` (inconclusive). Exit codes 0, 2 and 1, and 3
for ``INVALID`` (not comparable), which is raised before a decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from mlflow_recsys._validation import expected, line, metric_keys, number, one_of
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats._comparison import compare_pair
from mlflow_recsys.stats._power import non_inferiority_power
from mlflow_recsys.stats._results import PairwiseComparison
from mlflow_recsys.stats._settings import ComparisonSettings, TestMethod

__all__ = ["DECISIONS", "EXIT_CODES", "GATE_COLUMNS", "GateDecision", "GateRule", "Guardrail", "gate_decision"]

Decision = Literal["PROMOTE", "HOLD", "REJECT", "INVALID"]
#: The gate's decisions, by exit code.
EXIT_CODES: dict[str, int] = {"PROMOTE": 0, "HOLD": 1, "REJECT": 2, "INVALID": 3}
DECISIONS: tuple[str, ...] = tuple(EXIT_CODES)

#: The tests a gate may use: those of the mean difference, which its interval describes too.
MEAN_TESTS = ("randomization", "bootstrap", "t")

#: Columns of :meth:`GateDecision.to_frame`: one row per test, the primary metric first.
GATE_COLUMNS = (
    *("role", "metric", "hypothesis", "margin", "relative_margin", "incumbent_mean", "candidate_mean", "difference"),
    *("ci_low", "ci_high", "p_value", "outcome", "power"),
)


@dataclass(frozen=True)
class Guardrail:
    """A metric the candidate must not be worse on by more than ``margin`` (metric units, or a fraction of the
    incumbent's mean when the rule's margins are relative)."""

    metric: str
    margin: float

    @classmethod
    def parse(cls, text: str) -> Guardrail:
        """``"recall@20:0.01"`` -> ``Guardrail("recall@20", 0.01)``; ValueError naming ``guardrail`` otherwise."""
        key, colon, value = str(text).rpartition(":")
        try:
            margin = float(value)
        except ValueError:
            margin = math.nan
        if not colon or not key.strip() or not math.isfinite(margin):
            raise ValueError(expected("guardrail", "METRIC:MARGIN, e.g. recall@20:0.01", text))
        return cls(key.strip(), margin)


@dataclass(frozen=True)
class GateRule:
    """What the gate decides by, fixed (and logged) before any data are read; checked when made.

    Attributes
    ----------
    primary : str
        The metric key the decision rests on, e.g. ``"ndcg@100"``.
    margin : float or None
        The primary metric's non-inferiority margin: > 0, in metric units, or in (0, 1) as a fraction of the
        incumbent's mean with ``relative``. ``None`` only with ``hypothesis="superiority"``.
    hypothesis : ``"non-inferiority"`` (default) or ``"superiority"``
        What the primary metric must show; superiority is tested two-sided (shown better: pass, shown worse: reject).
    guardrails : tuple of :class:`Guardrail`
        Other metrics, each tested for non-inferiority at its own margin; distinct, none the primary.
    relative : bool, default False
        Read every margin as a fraction of the incumbent's mean (tested on the ratio of means).
    confidence_level : float, default 0.95
        alpha = 1 - level, the one-sided level of each non-inferiority test.
    test_method, n_resamples, random_state
        As :func:`~mlflow_recsys.stats.compare_models` (defaults ``"randomization"``, 9999, 0); the test one of
        :data:`MEAN_TESTS`.

    Raises
    ------
    ValueError
        Naming the field: a margin zero, negative, non-finite or (relative) at least 1; a guardrail on the primary
        metric or twice; a margin with superiority, or none with non-inferiority; ``relative`` with superiority and no
        guardrail; a test of a median-like location (Wilcoxon, sign).
    """

    primary: str
    margin: float | None
    hypothesis: Literal["non-inferiority", "superiority"] = "non-inferiority"
    guardrails: tuple[Guardrail, ...] = ()
    relative: bool = False
    confidence_level: float = 0.95
    test_method: TestMethod = "randomization"
    n_resamples: int = 9999
    random_state: int | None = 0

    def __post_init__(self) -> None:
        metric_keys(self.primary, "primary")
        one_of(self.hypothesis, "hypothesis", ("non-inferiority", "superiority"))
        if not isinstance(self.relative, bool):
            raise ValueError(expected("relative", "True or False", self.relative))
        # The settings these share with a comparison, checked by their declarations, in their canonical types.
        shared = ComparisonSettings(
            confidence_level=self.confidence_level,
            n_resamples=self.n_resamples,
            test_method=self.test_method,
            random_state=self.random_state,
        )
        for name in ("confidence_level", "n_resamples", "test_method", "random_state"):
            object.__setattr__(self, name, getattr(shared, name))
        if self.confidence_level <= 0.5:  # alpha at least 0.5: every test, and the 1 - 2 alpha interval, is void
            raise ValueError(expected("confidence_level", "a level above 0.5 (alpha below 0.5)", self.confidence_level))
        alpha = 1 - self.confidence_level
        if self.test_method != "t" and 1 / (self.n_resamples + 1) > alpha:  # no p-value could reach alpha
            wanted = f"at least {math.ceil(1 / alpha - 1)} resamples, so that 1/(B+1) can reach alpha = {alpha:.4g}"
            raise ValueError(expected("n_resamples", wanted, self.n_resamples))
        if self.test_method not in MEAN_TESTS:
            raise ValueError(
                expected(
                    "test_method",
                    f"a test of the mean difference ({', '.join(MEAN_TESTS)}), which the interval the gate rejects "
                    "by describes too (the Wilcoxon and sign tests address a median-like location)",
                    self.test_method,
                )
            )
        if self.hypothesis == "superiority" and self.margin is not None:
            raise ValueError(expected("margin", "no margin with hypothesis 'superiority'", self.margin))
        if self.hypothesis == "superiority" and self.relative and not self.guardrails:
            raise ValueError(expected("relative", "guardrails for relative margins to apply to", self.relative))
        if self.hypothesis == "non-inferiority":
            self._check_margin(self.margin, "margin")
        object.__setattr__(self, "guardrails", tuple(self.guardrails))
        seen = {self.primary}
        for guardrail in self.guardrails:
            metric_keys(guardrail.metric, "guardrail")
            if guardrail.metric in seen:
                what = "the primary metric" if guardrail.metric == self.primary else "given twice"
                wanted = f"a metric other than the primary and the other guardrails (it is {what})"
                raise ValueError(expected("guardrail", wanted, guardrail.metric))
            seen.add(guardrail.metric)
            self._check_margin(guardrail.margin, f"guardrail {guardrail.metric}")

    def _check_margin(self, margin: float | None, name: str) -> None:
        if margin is None:
            raise ValueError(expected(name, "a margin > 0 for a non-inferiority test", None))
        if self.relative:
            number(margin, name, above=0, below=1)
        else:
            number(margin, name, above=0)

    @property
    def metrics(self) -> list[str]:
        """The primary metric, then the guardrails'."""
        return [self.primary, *(g.metric for g in self.guardrails)]

    def to_params(self) -> dict[str, str]:
        """The rule as MLflow params (text), logged before any data are read."""
        return {
            "primary": self.primary,
            "hypothesis": self.hypothesis,
            "margin": "none" if self.margin is None else repr(self.margin),
            "relative": str(self.relative).lower(),
            "guardrails": ",".join(f"{g.metric}:{g.margin!r}" for g in self.guardrails) or "none",
            "confidence_level": repr(self.confidence_level),
            "test_method": self.test_method,
            "n_resamples": str(self.n_resamples),
            "random_state": "none" if self.random_state is None else str(self.random_state),
            "decision_rule": "PROMOTE when the primary and every guardrail pass, each at alpha, no adjustment "
            "(Schultzberg et al. 2024); REJECT when one is shown worse by more than its margin; else HOLD",
        }


@dataclass(frozen=True)
class GateDecision:
    """The gate's decision and every test behind it.

    ``decision`` is ``"PROMOTE"``, ``"HOLD"`` or ``"REJECT"`` and ``exit_code`` its code (:data:`EXIT_CODES`);
    ``primary`` and ``guardrails`` are the tests (:class:`~mlflow_recsys.stats.PairwiseComparison`, baseline the
    incumbent); ``joint_power`` is the chance that every non-inferiority test of the rule passes when the candidate
    truly equals the incumbent (NaN with a superiority primary, which equal models pass only by error). In words:
    :func:`~mlflow_recsys.report.gate_line`.
    """

    rule: GateRule
    decision: Decision
    primary: PairwiseComparison
    guardrails: tuple[PairwiseComparison, ...]
    joint_power: float

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.decision]

    @property
    def tests(self) -> tuple[PairwiseComparison, ...]:
        return (self.primary, *self.guardrails)

    def to_frame(self) -> pd.DataFrame:
        """One row per test, the primary first; columns :data:`GATE_COLUMNS`."""
        rows = [
            {
                "role": "primary" if i == 0 else "guardrail",
                "metric": c.metric,
                "hypothesis": c.hypothesis,
                "margin": c.margin,
                "relative_margin": c.relative_margin,
                "incumbent_mean": c.baseline_mean,
                "candidate_mean": c.candidate_mean,
                "difference": c.difference,
                "ci_low": c.ci_low,
                "ci_high": c.ci_high,
                "p_value": c.p_value,
                "outcome": c.direction,
                "power": _power(c),
            }
            for i, c in enumerate(self.tests)
        ]
        return pd.DataFrame(rows, columns=list(GATE_COLUMNS))


def gate_decision(
    rule: GateRule,
    incumbent: EvaluationResult,
    candidate: EvaluationResult,
    *,
    names: tuple[str, str] = ("incumbent", "candidate"),
) -> GateDecision:
    """The gate's decision on two models scored on the same users (:class:`GateRule`, module docstring).

    Parameters
    ----------
    rule:
        The rule.
    incumbent, candidate:
        Per-user results of the model in production and of the one proposed, on the same users and targets, holding
        every metric of the rule.
    names:
        How the two are named in the tests' rows (and seed the resampling, :func:`~mlflow_recsys.stats.compare_pair`).

    Returns
    -------
    GateDecision

    Raises
    ------
    ValueError, TypeError
        As :func:`~mlflow_recsys.stats.compare_pair` (not the same users or targets, a metric not evaluated, an
        incumbent mean of 0 under a relative margin): the models are not comparable, the gate's ``INVALID``.
    """
    if not isinstance(rule, GateRule):
        raise TypeError(expected("rule", "a GateRule", type(rule).__name__))
    line(names[0], "names")

    def test(metric: str, margin: float | None) -> PairwiseComparison:
        """Non-inferiority at ``margin``; superiority (two-sided) without one."""
        return compare_pair(
            incumbent,
            candidate,
            metric=metric,
            baseline_name=names[0],
            candidate_name=names[1],
            confidence_level=rule.confidence_level,
            n_resamples=rule.n_resamples,
            test_method=rule.test_method,
            random_state=rule.random_state,
            hypothesis="superiority" if margin is None else "non-inferiority",
            margin=margin,
            relative_margin=rule.relative and margin is not None,
        )

    primary = test(rule.primary, rule.margin)
    guardrails = tuple(test(g.metric, g.margin) for g in rule.guardrails)
    tests = (primary, *guardrails)
    failed = [c for c in tests if c.direction in ("inferior", "worse")]
    passed = [c for c in tests if c.direction in ("non-inferior", "better")]
    decision: Decision = "REJECT" if failed else "PROMOTE" if len(passed) == len(tests) else "HOLD"
    # Equal models pass a superiority primary only by error: the rule's power at equality is then not reported.
    powers = [_power(c) for c in tests]
    joint = math.nan if rule.hypothesis == "superiority" else float(np.prod(powers))
    return GateDecision(rule, decision, primary, guardrails, joint)


def _power(c: PairwiseComparison) -> float:
    """A non-inferiority test's power when the models are truly equal (normal approximation; the rule has made sure
    its Monte Carlo p-value can reach alpha); NaN for a test without a margin."""
    if c.hypothesis != "non-inferiority":
        return math.nan
    sd = float(np.std(c.unit_differences, ddof=1))
    return non_inferiority_power(sd, c.n_units, c.margin, c.alpha)
