"""Typed warnings of the statistics, raised at the caller's line."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from types import FrameType

_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])


class ComparisonWarning(UserWarning):
    """Base class of every warning :mod:`mlflow_recsys.stats` emits."""


class FewNonzeroUnitsWarning(ComparisonWarning):
    """Fewer than 30 units differ between the models: the null distribution is coarse."""


class LowResamplesWarning(ComparisonWarning):
    """``n_resamples`` is so low that adjusted p-values may be unable to reach alpha."""


class UnverifiedPairingWarning(ComparisonWarning):
    """A result carries no targets fingerprint, so identical targets cannot be checked."""


class IntervalFallbackWarning(ComparisonWarning):
    """A BCa interval could not be formed (infinite bias correction); the percentile interval is reported."""


class FewSeedsWarning(ComparisonWarning):
    """Two to four seeds: a standard deviation from so few runs is very uncertain."""


class MixedDevicesWarning(ComparisonWarning):
    """The compared runs were trained on more than one device type (``cpu``, ``cuda``, ``mps``): their sums round
    differently, so differences and seed spread mix the hardware with the models."""


class WideMarginWarning(ComparisonWarning):
    """A non-inferiority margin at least the reference's mean: a candidate that scores 0 would pass."""


def warn(message: str, category: type[Warning]) -> None:
    """Emit ``message`` attributed to the first frame outside this package.

    The warning then names the user's line, not an internal one, whatever the call depth inside the package.
    """
    # stacklevel 1 is this function, 2 its caller; climb until the frame is the user's.
    level = 2
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
