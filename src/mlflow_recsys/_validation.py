"""Argument checks with one message format: ``name: expected <what>, found <value>``.

Every public function checks its arguments before it computes or writes anything, and says which argument is wrong, what
it accepts and what it got. The helpers here are those checks; each returns the value in its canonical type (``int``,
``float``, ``str``) so callers keep what they checked. Booleans are never numbers here, although Python counts ``True``
as 1.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import unicodedata
from collections.abc import Collection, Iterable, Mapping, Sequence, Set
from typing import TypeVar, cast

T = TypeVar("T")

#: The largest seed or random state: torch's generators and Parquet's integers hold them as signed 64-bit.
MAX_SEED = 2**63 - 1


def expected(name: str, what: str, found: object) -> str:
    """The message: ``"<name>: expected <what>, found <found!r>"``; a long ``found`` is cut to 200 characters."""
    shown = repr(found)
    if len(shown) > 200:
        shown = shown[:199] + "…"
    return f"{name}: expected {what}, found {shown}"


def integer(value: object, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as ``int`` when it is an integer (numpy's included) within ``[minimum, maximum]``, else a ValueError
    ``"<name>: expected an integer >= <minimum>, found <value>"`` (or ``<= maximum``, or ``in [a, b]``)."""
    ok = not isinstance(value, bool) and isinstance(value, numbers.Integral)
    ok = ok and (minimum is None or value >= minimum) and (maximum is None or value <= maximum)  # type: ignore[operator]
    if not ok:
        raise ValueError(expected(name, _integer_range(minimum, maximum), value))
    return int(value)  # type: ignore[call-overload]  # an Integral


def number(
    value: object,
    name: str,
    *,
    above: float | None = None,
    at_least: float | None = None,
    below: float | None = None,
    at_most: float | None = None,
) -> float:
    """``value`` as ``float`` when it is a finite real number with ``value > above``, ``value >= at_least``,
    ``value < below`` and ``value <= at_most`` (each bound optional), else a ValueError ``"<name>: expected a finite
    number > 0, found <value>"``, ``"... strictly between 0 and 1 ..."``, and so on."""
    x = math.nan
    if not isinstance(value, bool) and isinstance(value, numbers.Real):
        with contextlib.suppress(OverflowError):  # an int past the float range (10**400) is no finite number
            x = float(value)
    ok = math.isfinite(x)
    ok = ok and (above is None or x > above) and (at_least is None or x >= at_least) and (below is None or x < below)
    ok = ok and (at_most is None or x <= at_most)
    if not ok:
        raise ValueError(expected(name, _number_range(above, at_least, below, at_most), value))
    return x + 0.0  # -0.0 becomes 0.0: one setting, one logged value


def seed(value: object, name: str) -> int:
    """``value`` as ``int`` when it is an integer in ``[0, MAX_SEED]``, else a ValueError ``"<name>: expected an integer
    >= 0, found <value>"``, or ``"... <= 9,223,372,036,854,775,807 (2**63 - 1) ..."`` above the range."""
    checked = integer(value, name, minimum=0)
    if checked > MAX_SEED:
        raise ValueError(expected(name, f"an integer <= {MAX_SEED:,} (2**63 - 1)", value))
    return checked


def ordered(value: object, name: str, what: str) -> list:
    """``value`` as a list when it is an ordered collection (a list, a tuple, an array, a generator), else a ValueError
    ``"<name>: expected <what> (in order), found <value>"``: a str or bytes would be read as its characters, and a set
    or a mapping has no order that holds between processes."""
    if isinstance(value, (str, bytes, Set, Mapping)) or not isinstance(value, Iterable):
        raise ValueError(expected(name, f"{what} (in order)", value))
    return list(value)


def one_of(value: T, name: str, choices: Collection[object]) -> T:
    """``value`` when it is one of ``choices``, else a ValueError ``"<name>: expected one of (<choices>), found
    <value>"``."""
    try:
        ok = bool(value in choices)
    except (TypeError, ValueError):  # an unhashable value against a set; an array compared element-wise
        ok = False
    if isinstance(value, bool) and not any(choice is value for choice in choices):
        ok = False  # True == 1, yet True is no choice among numbers
    if not ok:
        raise ValueError(expected(name, f"one of {tuple(choices)}", value))
    return cast(T, str(value)) if isinstance(value, str) else value  # numpy's str_ as str


#: Unicode categories a name may not hold: control (newline, tab, NUL, escape), format (zero-width space, right-to-left
#: override), surrogate (bytes that are not UTF-8, which MLflow cannot store) and the line and paragraph separators.
_UNSEEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def line(value: object, name: str, *, longest: int | None = None) -> str:
    """``value`` when it is a non-empty name on one line (at most ``longest`` characters), else a ValueError.

    For names shown in tables, logs and the MLflow UI: a control or invisible character (Unicode categories Cc, Cf,
    Cs, Zl, Zp) would break a row, hide or reorder what follows, or fail to encode as UTF-8; surrounding blanks would
    make two names look alike.
    """
    shown = "a non-empty name without control or invisible characters or surrounding blanks"
    if longest is not None:
        shown += f", of at most {longest:,} characters"
    ok = isinstance(value, str) and bool(value) and value == value.strip()
    ok = ok and not any(unicodedata.category(c) in _UNSEEN for c in cast(str, value))
    if not ok or (longest is not None and len(cast(str, value)) > longest):
        raise ValueError(expected(name, shown, value))
    return str(value)


def metric_keys(metrics: str | Sequence[str], name: str = "metrics") -> list[str]:
    """``metrics`` (the argument ``name``) as a list of distinct keys; one key may be given as a str. ValueError if
    ``metrics`` is not a str or a sequence of str, is empty or repeats a key."""
    if isinstance(metrics, str):
        metrics = [metrics]
    # No order: the report's rows, and the logged param, would vary by process (and bytes hold no keys).
    if isinstance(metrics, (bytes, Set, Mapping)):
        raise ValueError(
            f"{name}: expected a metric key or a list of keys (in order), found a {type(metrics).__name__}"
        )
    try:
        keys = list(metrics)
    except TypeError:
        raise ValueError(f"{name}: expected a metric key or a list of keys, found {type(metrics).__name__}") from None
    if not keys:
        raise ValueError(f"{name}: expected at least one metric key, found none")
    bad = [m for m in keys if not isinstance(m, str)]
    if bad:
        raise ValueError(f"{name}: expected metric keys (str), found {bad!r}")
    # Joined by commas into one param and read back as column names: a key must survive both.
    malformed = [m for m in keys if not m.strip() or m != m.strip() or "," in m or not m.isprintable()]
    if malformed:
        raise ValueError(expected(name, "keys without commas, control characters or surrounding blanks", malformed))
    if len(set(keys)) != len(keys):
        raise ValueError(f"{name}: expected distinct keys, found duplicates in {keys}")
    return [str(key) for key in keys]  # numpy's str_ as str


def whole_number_env(name: str, default: int, highest: int, what: str = "a whole number") -> int:
    """The whole number from 1 to ``highest`` in environment variable ``name``, written in ASCII digits (spaces around
    them ignored, as a shell may leave them), ``default`` when the variable is unset or blank; otherwise a ValueError
    ``"<name>: expected <what> from 1 to <highest>, found <value>"``. Other scripts' digits ("٣", "²") are refused:
    ``str.isdigit`` takes them, and ``int`` then reads some and fails on others."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    digits = raw.isascii() and raw.isdigit() and len(raw) <= len(str(highest)) + 3  # "007", never 5,000 digits
    if not digits or not 1 <= int(raw) <= highest:
        raise ValueError(expected(name, f"{what} from 1 to {highest} (ASCII digits)", raw))
    return int(raw)


def _integer_range(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"an integer in [{minimum}, {maximum:,}]"
    if minimum is not None:
        return f"an integer >= {minimum}"
    if maximum is not None:
        return f"an integer <= {maximum:,}"
    return "an integer"


def _number_range(above: float | None, at_least: float | None, below: float | None, at_most: float | None) -> str:
    if at_most is not None:
        low = "(" if above is not None else "["
        return f"a number in {low}{above if above is not None else at_least:g}, {at_most:g}]"
    if above is not None and below is not None:
        return f"a number strictly between {above:g} and {below:g}"
    if at_least is not None and below is not None:
        return f"a number in [{at_least:g}, {below:g})"
    bounds = [f" {op} {bound:g}" for op, bound in ((">", above), (">=", at_least), ("<", below)) if bound is not None]
    return "a finite number" + "".join(bounds[:1])
