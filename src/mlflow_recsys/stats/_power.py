"""Power of a test of the mean paired difference: the smallest detectable effect, and the users needed.

Both functions use the normal approximation to the distribution of the mean of ``n`` paired differences with standard
deviation ``sd`` (Cohen, 1988, *Statistical Power Analysis for the Behavioral Sciences*, 2nd ed., ch. 2): a
level-``alpha`` test detects a true mean difference ``delta`` with probability ``power`` when ``delta * sqrt(n) / sd =
z_{1-a} + z_{power}``, where ``z_q`` is the standard normal quantile and ``a = alpha / 2`` for a two-sided test,
``alpha`` for a one-sided one. The far tail of a two-sided test is ignored (it adds less than ``alpha / 2`` to the
power).

The approximation treats ``sd`` as known. A t-test (or a randomization test, which behaves like it) estimates ``sd``
from the same users, so at the effect given here its power is below the stated one: for a two-sided test at ``alpha =
0.05`` and 80% power, about 0.70 at n = 10, 0.76 at n = 20, 0.78 at n = 50 and 0.80 at n = 188 (noncentral t). For small
``n`` the figures here are therefore optimistic: the effect really detected with the stated power is larger (by about
12% at n = 10, 5% at n = 20, 0.5% at n = 188), and so is the number of users needed.
"""

from __future__ import annotations

import math

import scipy.stats

from mlflow_recsys import _validation as validation
from mlflow_recsys.stats._settings import ALTERNATIVES, Alternative

#: Power the report's ``mde`` column is computed at.
REPORT_POWER = 0.8


def minimum_detectable_effect(
    sd: float, n: int, alpha: float, power: float = REPORT_POWER, alternative: Alternative = "two-sided"
) -> float:
    """The smallest true mean difference a level-``alpha`` test detects with probability ``power``.

    ``mde = (z_{1-alpha/2} + z_{power}) * sd / sqrt(n)`` for a two-sided test and ``(z_{1-alpha} + z_{power}) * sd /
    sqrt(n)`` for a one-sided one, by the normal approximation (Cohen, 1988); see the module docstring for what it
    ignores. It is a magnitude: for ``alternative="less"`` the effect detected is ``-mde``.

    Parameters
    ----------
    sd:
        float >= 0: standard deviation of the per-user differences (ddof=1).
    n:
        int >= 2: number of users (paired differences).
    alpha:
        float in (0, 1): the level the hypothesis is tested at, after any multiplicity adjustment (e.g. ``0.05 / J``
        under Bonferroni).
    power:
        float in (0, 1), default 0.8: the probability of detecting the effect.
    alternative:
        ``"two-sided"`` (default), ``"greater"`` or ``"less"``.

    Returns
    -------
    float
        The effect, in the units of the differences; NaN when ``sd`` is 0: differences without spread give the formula
        nothing to scale (every user differs by the same amount), so no minimum detectable effect can be estimated, and
        0 would claim that any effect is detected.

    Raises
    ------
    ValueError
        If an argument is out of range, naming it.
    """
    sd, n, alpha, power, alternative = _power_iv(sd=sd, n=n, alpha=alpha, power=power, alternative=alternative)
    if sd == 0:
        return math.nan
    return _z_sum(alpha, power, alternative) * sd / math.sqrt(n)


def required_users(
    effect: float, sd: float, alpha: float = 0.05, power: float = REPORT_POWER, alternative: Alternative = "two-sided"
) -> int:
    """Users needed for a level-``alpha`` test to detect a true mean difference ``effect`` with ``power``.

    The inverse of :func:`minimum_detectable_effect`: ``n = ceil(((z_a + z_{power}) * sd / effect) ** 2)`` with ``z_a =
    z_{1-alpha/2}`` two-sided and ``z_{1-alpha}`` one-sided (Cohen, 1988, normal approximation, so optimistic for small
    ``n``: see the module docstring).

    Parameters
    ----------
    effect:
        float > 0: the true mean difference to detect, as a magnitude.
    sd:
        float >= 0: expected standard deviation of the per-user differences, e.g. from a pilot comparison (its
        ``unit_differences``).
    alpha:
        float in (0, 1), default 0.05: the level the hypothesis will be tested at, after any multiplicity adjustment.
    power:
        float in (0, 1), default 0.8.
    alternative:
        ``"two-sided"`` (default), ``"greater"`` or ``"less"``.

    Returns
    -------
    int
        At least 1 (0 users never suffice; with ``sd == 0`` one user shows the effect).

    Raises
    ------
    ValueError
        If an argument is out of range, naming it.
    """
    validation.number(effect, "effect", above=0)
    sd, _, alpha, power, alternative = _power_iv(sd=sd, n=2, alpha=alpha, power=power, alternative=alternative)
    n = (_z_sum(alpha, power, alternative) * sd / float(effect)) ** 2
    # Guard the ceiling against a product that lands an ulp above an integer.
    return max(1, math.ceil(n - 1e-9 * n))


def non_inferiority_power(sd: float, n: int, margin: float, alpha: float, true_difference: float = 0.0) -> float:
    """Power of a level-``alpha`` non-inferiority test with margin ``margin`` when the true mean difference is
    ``true_difference``: ``Phi((true_difference + margin) * sqrt(n) / sd - z_{1-alpha})``, by the normal approximation
    (Chow, Shao & Wang, 2008, *Sample Size Calculations in Clinical Research*, 2nd ed., sec. 3.2.2; see the module
    docstring for what it ignores).

    Parameters
    ----------
    sd:
        float >= 0: standard deviation of the per-user differences (ddof=1).
    n:
        int >= 2: number of users.
    margin:
        float > 0: the margin, in the metric's units.
    alpha:
        float in (0, 1): the one-sided level.
    true_difference:
        float, default 0: the true mean difference (candidate minus reference) the power is computed at.

    Returns
    -------
    float
        In [0, 1]; with ``sd == 0``, 1 when ``true_difference > -margin`` and 0 otherwise.

    Raises
    ------
    ValueError
        If an argument is out of range, naming it.
    """
    sd, n, alpha, _, _ = _power_iv(sd=sd, n=n, alpha=alpha, power=REPORT_POWER, alternative="greater")
    shift = validation.number(true_difference, "true_difference") + validation.number(margin, "margin", above=0)
    if sd == 0:
        return 1.0 if shift > 0 else 0.0
    return float(scipy.stats.norm.cdf(shift * math.sqrt(n) / sd - scipy.stats.norm.isf(alpha)))


def _z_sum(alpha: float, power: float, alternative: str) -> float:
    tail = alpha / 2 if alternative == "two-sided" else alpha
    return float(scipy.stats.norm.isf(tail) + scipy.stats.norm.ppf(power))


def _power_iv(
    *, sd: float, n: int, alpha: float, power: float, alternative: Alternative
) -> tuple[float, int, float, float, Alternative]:
    return (
        validation.number(sd, "sd", at_least=0),
        validation.integer(n, "n", minimum=2),
        validation.number(alpha, "alpha", above=0, below=1),
        validation.number(power, "power", above=0, below=1),
        validation.one_of(alternative, "alternative", ALTERNATIVES),
    )
