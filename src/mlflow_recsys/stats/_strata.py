"""Pre-declared strata of the evaluated users (slices) for an exploratory subgroup analysis.

A :class:`Slice` labels every evaluated user with one stratum. The builders here make the usual ones from the data of a
split: history length (fold-in items per user, in quantile bins or bins given), cold users (at most N fold-in
items), and the popularity of each user's targets (mostly long-tail or mostly head items of the training data); any
other user-level label comes in through :meth:`Slice.from_labels`. The inference on them is
:mod:`~mlflow_recsys.stats._slices`.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from mlflow_recsys._catalogue import plain_id
from mlflow_recsys._item_popularity import DEFAULT_HEAD_SHARE, long_tail_items
from mlflow_recsys._sparse import canonical_csr

__all__ = [
    "MIN_STRATUM_USERS",
    "SLICE_SPECS",
    "Slice",
    "cold_slice",
    "history_lengths",
    "history_slice",
    "parse_slice_spec",
    "split_slices",
    "target_popularity_slice",
]


@dataclass(frozen=True, eq=False)
class Slice:
    """A partition of the evaluated users into strata.

    Attributes
    ----------
    name:
        The slice's name (``"history"``, ``"cold"``, ``"target_popularity"`` or the user's own), non-empty str.
    labels:
        ``pd.Series`` indexed by ``sample_id`` (unique), the stratum (str) of each user.
    strata:
        The strata in display order (tuple of str), each held by some user.
    definition:
        One line saying how the strata were made, printed in the Methods text.
    """

    name: str
    labels: pd.Series
    strata: tuple[str, ...]
    definition: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"name: expected a non-empty slice name (str), found {self.name!r}")
        if not isinstance(self.labels, pd.Series):
            raise TypeError(
                f"labels: expected a pandas Series indexed by sample_id, found {type(self.labels).__name__}"
            )
        if self.labels.index.has_duplicates:
            first = plain_id(self.labels.index[self.labels.index.duplicated()][0])
            raise ValueError(f"slice {self.name!r}: expected one label per sample_id, found {first!r} twice")
        held = set(self.labels.astype(str).unique())
        if set(self.strata) != held or len(self.strata) != len(held):
            raise ValueError(
                f"slice {self.name!r}: expected strata {sorted(held)} (the labels held), found {list(self.strata)}"
            )
        blank = [s for s in self.strata if not s.strip()]
        if blank:  # every report would show an empty cell, as for a missing label
            raise ValueError(f"slice {self.name!r}: expected stratum labels that are not blank, found {blank}")

    @classmethod
    def from_labels(cls, name: str, labels: pd.DataFrame | pd.Series | Mapping, *, definition: str = "") -> Slice:
        """A slice of labels the user supplies: a frame with columns ``sample_id`` and ``label``, a Series indexed by
        sample id, or a mapping sample id -> label. Labels are read as str; strata are ordered by first appearance.

        Raises
        ------
        ValueError
            If the frame lacks either column, a label is missing, or a sample id is given twice.
        """
        if isinstance(labels, pd.DataFrame):
            missing = [c for c in ("sample_id", "label") if c not in labels.columns]
            if missing:
                found = list(labels.columns)
                raise ValueError(f"labels: expected columns 'sample_id' and 'label', found {found} (missing {missing})")
            series = pd.Series(labels["label"].to_numpy(), index=labels["sample_id"].to_numpy())
        elif isinstance(labels, pd.Series):
            series = labels
        elif isinstance(labels, Mapping):
            series = pd.Series(dict(labels))
        else:
            raise TypeError(
                f"labels: expected a DataFrame (sample_id, label), a Series or a mapping, found {type(labels).__name__}"
            )
        if series.isna().any():
            first = plain_id(series.index[series.isna().to_numpy()][0])
            raise ValueError(f"labels: expected a label for every sample id, found none for {first!r}")
        series = series.astype(str)
        return cls(name, series, tuple(pd.unique(series.to_numpy())), definition or f"labels supplied for {name!r}")

    def unit_strata(self, ids: np.ndarray) -> np.ndarray:
        """The stratum of each user id in ``ids`` (the units of a comparison) as its position in :attr:`strata`, int64
        ``(n_units,)``; ValueError naming up to five users without a label."""
        keys, wanted = self.labels.index, np.asarray(ids)
        at = keys.get_indexer(pd.Index(wanted))
        if keys.dtype.kind != wanted.dtype.kind and "f" in (keys.dtype.kind, wanted.dtype.kind):
            # pandas finds integer ids among float keys (and the reverse) as floats, which round ids past 2**53 onto
            # their neighbours: each match is confirmed by Python's comparison, exact between int and float.
            found = np.flatnonzero(at >= 0)
            exact = [a == b for a, b in zip(keys.take(at[found]).tolist(), wanted[found].tolist(), strict=True)]
            at[found[~np.array(exact, dtype=bool)]] = -1
        missing = at < 0
        if missing.any():
            shown = [plain_id(v) for v in wanted[missing][:5]]
            kinds = (
                f"; the slice's ids are {keys.dtype}, the compared ids {wanted.dtype}"
                if missing.all() and keys.dtype != wanted.dtype
                else ""
            )
            raise ValueError(
                f"slices[{self.name!r}]: expected a stratum for every compared user, found none for "
                f"{int(missing.sum())} of {len(ids)} (first {shown}){kinds}"
            )
        # Factorized first, so a label is read as str and placed among the strata once, not once per user.
        codes, distinct = pd.factorize(self.labels)
        position = {stratum: k for k, stratum in enumerate(self.strata)}
        return np.array([position[str(label)] for label in distinct], dtype=np.int64)[codes[at]]


def _counts(values: pd.Series | Mapping, name: str) -> pd.Series:
    if not isinstance(values, (pd.Series, Mapping)):
        raise ValueError(
            f"{name}: expected a pd.Series or mapping of sample id -> count (e.g. history_lengths(source, "
            f"sample_ids)), found {type(values).__name__}"
        )
    series = values if isinstance(values, pd.Series) else pd.Series(dict(values))
    numeric = pd.to_numeric(series, errors="coerce")
    bad = numeric.isna() | (numeric < 0) | (numeric != np.floor(numeric))
    if bad.any():
        first = plain_id(series.index[bad.to_numpy()][0])
        raise ValueError(f"{name}: expected a count (int >= 0) per sample id, found {series[first]!r} for {first!r}")
    return numeric.astype(np.int64)


def _span(low: int, high: int | None) -> str:
    if high is None:
        return f">={low}"
    return str(low) if low == high else f"{low}-{high}"


def history_slice(history_length: pd.Series | Mapping, bins: int | Sequence[int] = 4) -> Slice:
    """Users by history length, the number of their fold-in items.

    Parameters
    ----------
    history_length:
        Sample id -> fold-in items (int >= 0), e.g. :func:`history_lengths` of a split's fold-in matrix.
    bins:
        An int ``q >= 2`` (default 4): quantile bins of the users (``pd.qcut``; equal quantiles merge, so fewer bins
        may come out); or increasing ints, the upper ends of the bins, a last bin taking the rest: ``[5, 20]`` gives
        ``0-5``, ``6-20``, ``>=21``.

    Returns
    -------
    Slice
        Named ``"history"``; strata such as ``"1-13"`` in increasing order.

    Raises
    ------
    ValueError
        If a length is not an int >= 0, ``bins`` is an int below 2 or above the number of users, not increasing, or
        leaves fewer than two strata.
    """
    lengths = _counts(history_length, "history_length")
    if isinstance(bins, numbers.Integral) and not isinstance(bins, bool):
        if not 2 <= int(bins) <= len(lengths):  # the upper bound also keeps np.linspace from a huge allocation
            raise ValueError(f"bins: expected 2 to {len(lengths)} quantile bins (at most one a user), found {bins}")
        values = lengths.to_numpy()
        inner = np.unique(np.quantile(values, np.linspace(0, 1, int(bins) + 1)[1:-1], method="lower"))
        uppers = [int(e) for e in inner if e < values.max()]  # an upper end at the maximum would leave a bin empty
        asked = int(bins)
        how = f"{asked} quantile bins of"
        floor = int(values.min()) - 1  # the first bin starts at the shortest history
    else:
        if isinstance(bins, (bool, str)) or not isinstance(bins, Sequence):
            raise ValueError(f"bins: expected an int >= 2 or increasing ints (upper ends of the bins), found {bins!r}")
        uppers = [int(b) for b in bins]
        if not uppers or any(b < 0 for b in uppers) or any(b >= c for b, c in zip(uppers, uppers[1:], strict=False)):
            raise ValueError(f"bins: expected increasing ints >= 0 (upper ends of the bins), found {uppers}")
        how = "bins given by"
        asked, floor = 0, -1
    bounds = [floor, *uppers]
    codes = np.searchsorted(np.asarray(uppers), lengths.to_numpy(), side="left")
    names = [_span(bounds[i] + 1, uppers[i] if i < len(uppers) else None) for i in range(len(bounds))]
    labels = pd.Series(np.asarray(names, dtype=object)[codes], index=lengths.index)
    strata = tuple(n for i, n in enumerate(names) if np.any(codes == i))
    if len(strata) < 2:
        raise ValueError(f"bins: expected bins that split the users in at least two strata, found only {strata}")
    if len(strata) < asked:  # equal quantiles merged: say what came out
        how = f"{asked} quantile bins asked, {len(strata)} distinct, of"
    return Slice("history", labels, strata, f"history length (fold-in items), {how} the users: {', '.join(strata)}")


def cold_slice(history_length: pd.Series | Mapping, max_items: int = 5) -> Slice:
    """Cold users, with at most ``max_items`` (int >= 0, default 5) fold-in items, against the rest: strata ``"cold"``
    and ``"warm"``. ValueError if a length is not an int >= 0 or every user falls on one side."""
    lengths = _counts(history_length, "history_length")
    if not isinstance(max_items, numbers.Integral) or isinstance(max_items, bool) or max_items < 0:
        raise ValueError(f"max_items: expected an int >= 0, found {max_items!r}")
    cold = lengths.to_numpy() <= max_items
    if cold.all() or not cold.any():
        side = "cold" if cold.all() else "warm"
        raise ValueError(
            f"max_items: expected cold users (at most {max_items} fold-in items) and others, found every user {side}"
        )
    labels = pd.Series(np.where(cold, "cold", "warm").astype(object), index=lengths.index)
    return Slice("cold", labels, ("cold", "warm"), f"cold: at most {max_items} fold-in items; warm: more")


def target_popularity_slice(
    targets: sp.spmatrix,
    item_popularity: np.ndarray,
    sample_ids: np.ndarray,
    *,
    head_share: float = DEFAULT_HEAD_SHARE,
) -> Slice:
    """Users by the popularity of their targets: ``"tail"`` when at least half of a user's targets are long-tail items
    (:func:`long_tail_items` of the training popularity), else ``"head"``.

    Parameters
    ----------
    targets:
        Sparse ``(n, n_items)``, the held-out targets of each evaluation row.
    item_popularity:
        ``(n_items,)`` training interactions per item.
    sample_ids:
        ``(n,)`` the user of each row; a user with several rows is labelled by all their targets.
    head_share:
        Share of the items in the short head, default 0.2.

    Raises
    ------
    ValueError
        As :func:`long_tail_items`; if the shapes disagree; or if every user falls in one stratum.
    """
    csr = canonical_csr(targets, "targets")
    tail = long_tail_items(item_popularity, head_share)
    if csr.shape[1] != tail.shape[0]:
        raise ValueError(f"item_popularity: expected {csr.shape[1]} items like targets, found {tail.shape[0]}")
    ids = np.asarray(sample_ids)
    if ids.shape != (csr.shape[0],):
        raise ValueError(f"sample_ids: expected shape ({csr.shape[0]},), one id per row, found {ids.shape}")
    in_tail = pd.Series(csr @ tail.astype(np.float64)).groupby(ids, sort=False).sum()
    n_targets = pd.Series(np.diff(csr.indptr).astype(np.float64)).groupby(ids, sort=False).sum()
    is_tail = (2 * in_tail >= n_targets) & (n_targets > 0)
    if is_tail.all() or not is_tail.any():
        raise ValueError(
            f"targets: expected users with mostly long-tail targets and others, found every user "
            f"{'tail' if is_tail.all() else 'head'} (head_share {head_share})"
        )
    labels = pd.Series(np.where(is_tail.to_numpy(), "tail", "head").astype(object), index=is_tail.index)
    return Slice(
        "target_popularity",
        labels,
        ("head", "tail"),
        f"tail: at least half of the user's targets are long-tail items (outside the {head_share:g} most popular "
        "share of the items in training); head: the others",
    )


def history_lengths(source: sp.spmatrix, sample_ids: np.ndarray) -> pd.Series:
    """Fold-in items per user: ``pd.Series`` indexed by sample id (a user with several rows counts their first row's),
    int64, from ``source`` ``(n, n_items)`` and ``sample_ids`` ``(n,)``."""
    csr = canonical_csr(source, "source")
    ids = np.asarray(sample_ids)
    if ids.shape != (csr.shape[0],):
        raise ValueError(f"sample_ids: expected shape ({csr.shape[0]},), one id per row, found {ids.shape}")
    return pd.Series(np.diff(csr.indptr).astype(np.int64), index=ids).groupby(level=0, sort=False).first()


#: Fewest users a stratum may hold: a mean difference needs a spread to be tested.
MIN_STRATUM_USERS = 2

#: The slices a comparison of runs builds from the split by name (``name`` or ``name:argument``): the argument, its
#: type, its default and what it means.
SLICE_SPECS: dict[str, tuple[type, float, str]] = {
    "history": (int, 4, "quantile bins of the users' fold-in item counts, at least 2"),
    "cold": (int, 5, "most fold-in items of a cold user, at least 0"),
    "target_popularity": (float, DEFAULT_HEAD_SHARE, "share of the items in the short head, between 0 and 1"),
}


def _in_range(kind: str, value: float) -> bool:
    if kind == "history":
        return value >= 2
    if kind == "cold":
        return value >= 0
    return 0 < value < 1


def parse_slice_spec(spec: str, name: str = "slices") -> tuple[str, float]:
    """``"history:4"`` -> ``("history", 4)``; a bare name takes its default (:data:`SLICE_SPECS`). ValueError, naming
    ``name``, for an unknown slice, or an argument that is empty, not a number of the slice's type or out of its
    range."""
    kind, _, argument = str(spec).partition(":")
    if kind not in SLICE_SPECS:
        known = ", ".join(f"{k}[:{t.__name__}]" for k, (t, _, _) in SLICE_SPECS.items())
        raise ValueError(f"{name}: expected slices among {known}, found {spec!r}")
    cast_to, default, meaning = SLICE_SPECS[kind]
    if ":" not in str(spec):
        return kind, default
    # Plain ASCII numbers only: int() and float() also take "4_0", " 5", "+4", "1e3" and other scripts' digits.
    plain = re.fullmatch(r"[0-9]+" if cast_to is int else r"[0-9]*\.?[0-9]+", argument)
    value = cast_to(argument) if plain else None
    if value is None or not _in_range(kind, value):
        raise ValueError(f"{name}: expected {kind}:<{cast_to.__name__}> ({meaning}), found {spec!r}")
    return kind, value


def split_slices(
    specs: Sequence[str],
    *,
    source: sp.spmatrix,
    targets: sp.spmatrix,
    sample_ids: np.ndarray,
    item_popularity: np.ndarray,
) -> list[Slice]:
    """The slices ``specs`` name (e.g. ``["history:4", "cold:5", "target_popularity"]``, see
    :func:`parse_slice_spec`), built from a split's evaluation rows: ``source`` and ``targets`` sparse
    ``(n, n_items)``, ``sample_ids`` ``(n,)`` and ``item_popularity`` ``(n_items,)`` training users per item. ValueError
    as :func:`parse_slice_spec` and the builders (:func:`history_slice`, :func:`cold_slice`,
    :func:`target_popularity_slice`)."""
    built = []
    lengths = history_lengths(source, sample_ids)
    for spec in specs:
        kind, argument = parse_slice_spec(spec)
        if kind == "history":
            made = history_slice(lengths, bins=int(argument))
        elif kind == "cold":
            made = cold_slice(lengths, max_items=int(argument))
        else:
            made = target_popularity_slice(targets, item_popularity, sample_ids, head_share=float(argument))
        sizes = made.labels.value_counts()
        small = sizes[sizes < MIN_STRATUM_USERS]
        if len(small):
            raise ValueError(
                f"slices: expected at least {MIN_STRATUM_USERS} users in every stratum of {spec!r}, found "
                f"{len(small)} of {len(sizes)} strata smaller (e.g. {small.index[0]!r} with {int(small.iloc[0])})"
            )
        built.append(made)
    return built
