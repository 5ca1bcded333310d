"""A settings object declared once: each field's type, default, choices, range and help text.

A settings class is a frozen dataclass whose fields are made with :func:`setting`. From that one declaration come its
checks (:func:`check_fields`, which the class's ``__post_init__`` calls), the command line's options
(:func:`click_options`), the reading of a setting written as text (:meth:`Setting.parse`: a server form, an
``-P name=value`` of ``mlflow run``), the ``MLproject`` parameters an entry point declares
(:func:`mlproject_parameters`) and the rows of a settings table (:func:`describe`). A new setting is a new field, plus
the code that uses it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import click

from mlflow_recsys import _validation as validation

__all__ = [
    "Kind",
    "NONE_WORD",
    "Setting",
    "check_fields",
    "click_options",
    "describe",
    "mlproject_parameters",
    "option",
    "setting",
    "settings_of",
]

Kind = Literal["name", "choice", "integer", "number", "seed", "flag", "keys"]

#: How the command line, a server form and an ``MLproject`` parameter write "no value".
NONE_WORD = "none"


@dataclass(frozen=True)
class Setting:
    """What a setting is, beside its name and default (a dataclass field's ``metadata["setting"]``).

    Attributes
    ----------
    help : str
        What the setting does, in one line: for ``--help``, the server page and a settings table.
    kind : str
        ``"name"`` (a one-line name, :func:`~mlflow_recsys._validation.line`), ``"choice"`` (one of ``choices``),
        ``"integer"``, ``"number"`` (a finite float), ``"seed"`` (an integer in [0, 2**63 - 1]), ``"flag"`` (True or
        False) or ``"keys"`` (distinct metric keys, in order; comma-separated as text).
    choices : tuple of str
        The values of a ``"choice"``.
    low, high : float, optional
        The range: inclusive bounds of an integer; exclusive bounds of a number (inclusive with ``includes_low`` or
        ``includes_high``).
    includes_low, includes_high : bool, default False
        Whether a number may equal ``low`` (a share that may be 0) or ``high`` (a largest learning rate).
    optional : bool, default False
        Whether ``None`` is a value (written :data:`NONE_WORD`, or left empty, as text).
    longest : int, optional
        The most characters of a ``"name"``.
    off : str, optional
        The command-line option that sets a ``"flag"`` False (``--independent-seeds``).
    """

    help: str
    kind: Kind
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    includes_low: bool = False
    includes_high: bool = False
    optional: bool = False
    longest: int | None = None
    off: str | None = None

    def check(self, value: Any, name: str) -> Any:
        """``value`` in its canonical type (``int``, ``float``, ``str``, a tuple of keys), else a ValueError
        ``"<name>: expected <what>, found <value>"`` (see :mod:`mlflow_recsys._validation`)."""
        if value is None and self.optional:
            return None
        if self.kind == "name":
            return validation.line(value, name, longest=self.longest)
        if self.kind == "choice":
            return validation.one_of(value, name, self.choices + ((None,) if self.optional else ()))
        if self.kind == "integer":
            return validation.integer(value, name, minimum=_whole(self.low), maximum=_whole(self.high))
        if self.kind == "number":
            low = {"at_least" if self.includes_low else "above": self.low}
            high = {"at_most" if self.includes_high else "below": self.high}
            return validation.number(value, name, **low, **high)
        if self.kind == "seed":
            return validation.seed(value, name)
        if self.kind == "flag":
            if not isinstance(value, bool):
                raise ValueError(validation.expected(name, "True or False", value))
            return value
        return tuple(validation.metric_keys(value, name))

    def convert(self, text: str) -> Any:
        """A value written as text in this setting's type, unchecked: ``"9999"`` as 9999, :data:`NONE_WORD` or ``""`` as
        None when optional, ``"a, b"`` as ``["a", "b"]``; text that does not convert stays text, for :meth:`check` to
        refuse as it was written."""
        text = text.strip()
        if self.optional and text.lower() in (NONE_WORD, ""):
            return None
        converters: dict[str, Callable[[str], Any]] = {
            "integer": _whole_number,
            "seed": _whole_number,
            "number": _finite,
            "flag": lambda t: {"true": True, "false": False}[t.lower()],
            "keys": lambda t: [key.strip() for key in t.split(",") if key.strip()],
        }
        try:
            return converters.get(self.kind, str)(text)
        except (ValueError, KeyError):
            return text

    def parse(self, text: str, name: str) -> Any:
        """A value written as text, converted (:meth:`convert`) and checked (:meth:`check`: its ValueError)."""
        return self.check(self.convert(text), name)

    def text(self, value: Any) -> str:
        """``value`` written as text that :meth:`parse` reads back (``None`` as :data:`NONE_WORD`)."""
        if value is None:
            return NONE_WORD
        if self.kind == "keys":
            return ",".join(value)
        return str(value)


def setting(default: Any, help: str, kind: Kind, **details: Any) -> Any:
    """A dataclass field with its default and its :class:`Setting` (``details``: the other attributes)."""
    return dataclasses.field(default=default, metadata={"setting": Setting(help=help, kind=kind, **details)})


def settings_of(cls: type) -> dict[str, tuple[Any, Setting]]:
    """Each field of ``cls`` declared with :func:`setting`: name -> (default, :class:`Setting`), in order."""
    return {f.name: (f.default, f.metadata["setting"]) for f in dataclasses.fields(cls) if "setting" in f.metadata}


def check_fields(obj: Any) -> None:
    """Replace each declared field of the frozen dataclass ``obj`` by its checked, canonical value; ValueError, as
    :meth:`Setting.check`, for the first field its declaration refuses."""
    for name, (_, declared) in settings_of(type(obj)).items():
        object.__setattr__(obj, name, declared.check(getattr(obj, name), name))


def click_options(cls: type, names: Sequence[str] | None = None) -> Callable:
    """A decorator adding a ``click`` option for each declared field of ``cls`` (or those of ``names``), in order:
    ``--field-name`` (and ``--field_name``, as ``mlflow run -P`` passes it) with the field's default, choices and help.
    The command gets each under its field name, converted (:meth:`Setting.convert`) but not checked: the settings object
    checks it when the command makes one, so a refusal is reported like any other bad input of the command."""
    declared = settings_of(cls)
    chosen = list(declared) if names is None else list(names)

    def decorate(func: Callable) -> Callable:
        for name in reversed(chosen):
            func = option(name, *declared[name])(func)
        return func

    return decorate


def option(name: str, default: Any, declared: Setting, help: str | None = None) -> Callable:
    """The ``click`` option of one declared setting (see :func:`click_options`): ``default`` None leaves it "not given"
    (None reaches the command); ``help`` replaces the declared help text."""
    help = declared.help if help is None else help
    flag = "--" + name.replace("_", "-")
    if declared.kind == "flag":
        return click.option(f"{flag}/{declared.off}", name, default=default, show_default=True, help=help)
    # `mlflow run -P name=value` passes an undeclared parameter on as --name value, underscores kept.
    spellings = [flag, *([f"--{name}"] if "_" in name else [])]
    kind: click.ParamType = click.STRING
    if declared.kind == "choice":
        kind = click.Choice([*declared.choices, *([NONE_WORD] if declared.optional else [])])
    return click.option(
        *spellings,
        name,
        default=None if default is None else declared.text(default),
        show_default=default is not None,
        type=kind,
        metavar=None if declared.kind == "choice" else _METAVARS[declared.kind],
        callback=lambda ctx, param, text: None if text is None else declared.convert(text),
        help=help,
    )


#: How ``--help`` names the value each kind of option takes.
_METAVARS = {"name": "TEXT", "integer": "INTEGER", "number": "FLOAT", "seed": "INTEGER", "keys": "KEYS"}


def mlproject_parameters(cls: type, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The parameters an ``MLproject`` entry point declares for the fields ``names`` of ``cls``:
    ``{name: {"type": ..., "default": ...}}``, a number as MLflow's ``float`` (it has no integer type) and anything else
    as ``string``."""
    declared = settings_of(cls)
    out = {}
    for name in names:
        default, s = declared[name]
        numeric = s.kind in ("integer", "number", "seed")
        out[name] = {"type": "float" if numeric else "string", "default": default if numeric else s.text(default)}
    return out


def describe(cls: type) -> list[tuple[str, str, str]]:
    """(name, default as text, help) of each declared field of ``cls``: the rows of a settings table."""
    return [(name, s.text(default), s.help) for name, (default, s) in settings_of(cls).items()]


def _whole_number(text: str) -> int:
    """``"42"`` and ``"42.0"`` as 42: ``mlflow run`` knows only float parameters, so an integer may come written as one;
    ``"42.5"`` stays refused."""
    try:
        return int(text)
    except ValueError:
        number = float(text)
        if not number.is_integer():
            raise
        return int(number)


def _finite(text: str) -> float:
    # "1e400" reads as inf: kept as text, it is refused as it was typed
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(text)
    return number


def _whole(bound: float | None) -> int | None:
    return None if bound is None else int(bound)
