"""Recommendation lists from other frameworks, read, checked against a split's protocol and scored.

Inputs: a pandas frame, a Parquet or CSV file (user, item and a rank or a score column), a TREC run file
(``qid Q0 docid rank score tag``) or a ``ranx.Run``. Every reader returns one frame of (user, item, rank) rows;
:func:`score_recommendations` never knows where a list came from. Scoring goes through
:func:`mlflow_recsys.evaluation.evaluate_rankings` over the split's own fold-in, targets and sample ids, so the metric
definitions and the targets fingerprint are exactly a ``train`` run's on that split."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from mlflow_recsys import _validation as validation
from mlflow_recsys._catalogue import ItemCatalogue
from mlflow_recsys.data._checkpoint import LoadedSplit
from mlflow_recsys.evaluation import EvaluationResult, FoldInRankedWarning, evaluate_rankings
from mlflow_recsys.metrics import ItemMetric, ItemPopularity, RankingMetric, hit_matrix, parse_metric_keys

#: Most rows read from one file: 250,000 users x 100 items. A Parquet file's footer is checked before anything
#: is read; CSV and TREC files are read in batches and refused, naming this limit, as soon as more rows than this
#: have been read. Reading, checking and scoring take about 2 GiB per 10 million rows
#: (``benchmarks/bench_import.py``), so memory stays within about 5 GiB.
MAX_ROWS = 25_000_000
#: Rows shown in a refusal.
SHOWN_ROWS = 3
FORMATS = ("auto", "parquet", "csv", "trec")
HISTORY_POLICIES = ("remove", "strict")
MISSING_POLICIES = ("zero", "strict")
_TREC_SUFFIXES = (".trec", ".run", ".txt")


@dataclass(frozen=True)
class Recommendations:
    """Lists as read: ``frame`` has columns user, item, order (float64, smaller is better) and optionally draw;
    ``source`` names the input in messages; ``kind`` is dataframe/parquet/csv/trec/ranx; ``order_col`` the
    column the order came from."""

    frame: pd.DataFrame
    source: str
    kind: str
    order_col: str

    def rows(self, mask: np.ndarray) -> pd.DataFrame:
        """The rows ``mask`` picks, as the input wrote them for a refusal: the order as its rank or score."""
        shown = self.frame[mask]
        if self.kind == "trec":  # reordered by score: the position in the list stands for the rank
            return shown.assign(order=shown["order"] + 1).rename(columns={"order": "position"})
        if self.order_col != "score" and self.kind in ("dataframe", "parquet", "csv"):
            return shown.rename(columns={"order": self.order_col})
        return shown.assign(order=-shown["order"]).rename(columns={"order": self.order_col})


@dataclass(frozen=True)
class ScoredRecommendations:
    """The scored lists: the evaluation result and the counts ``n_history_items_removed``, ``n_missing_users``
    and ``n_short_lists``."""

    result: EvaluationResult
    counts: dict[str, int]


@dataclass(frozen=True)
class _Columns:
    """Where a frame holds each list's user, item and rank or score; with neither, ``rank`` or else ``score``."""

    user: str = "user"
    item: str = "item"
    rank: str | None = None
    score: str | None = None


def _fail(where: str, column: str, what: str, rows: pd.DataFrame | None = None) -> ValueError:
    shown = "" if rows is None else f"; first rows: {rows.head(SHOWN_ROWS).to_dict('records')}"
    return ValueError(f"{where}[{column!r}]: {what}{shown}")


def read_recommendations(
    recommendations: Any,
    *,
    user_col: str = "user",
    item_col: str = "item",
    rank_col: str | None = None,
    score_col: str | None = None,
    format: str = "auto",
) -> Recommendations:
    """Lists from a frame, a .parquet/.csv path, a TREC run file or a ``ranx.Run``; ValueError naming the input.

    One of ``rank_col`` (1 best) and ``score_col`` (higher better), else a column ``rank`` or else ``score``; a ``draw``
    column is kept. TREC runs are ordered as trec_eval orders them: by score descending, the rank breaking ties."""
    validation.one_of(format, "format", FORMATS)
    columns = _Columns(user_col, item_col, rank_col, score_col)
    if isinstance(recommendations, pd.DataFrame):
        return _from_frame(recommendations, "recommendations", "dataframe", columns)
    if type(recommendations).__name__ == "Run" and hasattr(recommendations, "to_dict"):  # ranx, not imported
        rows = [(q, d, s) for q, docs in recommendations.to_dict().items() for d, s in docs.items()]
        frame = pd.DataFrame(rows, columns=["user", "item", "score"])
        return _from_frame(frame, "recommendations (ranx.Run)", "ranx", _Columns(score="score"))
    if not isinstance(recommendations, (str, os.PathLike)):
        raise ValueError(
            validation.expected(
                "recommendations", "a DataFrame, a .parquet/.csv/TREC path or a ranx.Run", recommendations
            )
        )
    path = Path(recommendations)
    if path.is_dir():
        raise ValueError(validation.expected("recommendations", "a file of lists", f"the folder {path}"))
    if not path.is_file():
        raise FileNotFoundError(f"recommendations: no file at {path}")
    named = [c for c in (user_col, item_col, rank_col, score_col) if c is not None]
    if len(set(named)) != len(named):
        raise ValueError(
            validation.expected("user_col, item_col, rank_col, score_col", "a different column for each", named)
        )
    kind = format
    if format == "auto":
        suffix = path.suffix.lower()
        if suffix not in (".parquet", ".csv", *_TREC_SUFFIXES):
            what = "a .parquet, .csv or TREC (.trec/.run/.txt) file"
            raise ValueError(validation.expected("recommendations", what, path.name))
        kind = "trec" if suffix in _TREC_SUFFIXES else suffix[1:]
    if kind == "trec":
        return _from_trec(path)
    wanted = [c for c in (user_col, item_col, rank_col, score_col, "draw", "rank", "score") if c]
    frame, names = _read_batches(path, kind, wanted, ids=(user_col, item_col))
    return _from_frame(frame, str(path), kind, columns, file_columns=names)


def _read_batches(path: Path, kind: str, wanted: list[str], ids: tuple[str, str]) -> tuple[pd.DataFrame, list[str]]:
    """The file's wanted columns, read in Arrow batches, and all its column names; a CSV file's ``ids`` columns
    as text (``"007"`` stays ``"007"``: the split decides what an id is)."""
    import pyarrow as pa
    import pyarrow.csv as pv
    import pyarrow.parquet as pq

    try:
        if kind == "parquet":
            handle = pq.ParquetFile(path)
            names, n = handle.schema_arrow.names, handle.metadata.num_rows
        else:
            options = pv.ConvertOptions(strings_can_be_null=False, column_types={c: pa.string() for c in ids})
            reader = pv.open_csv(path, convert_options=options)
            names, n = reader.schema.names, 0
        twice = sorted({c for c in names if names.count(c) > 1})
        if twice:
            raise ValueError(f"{path}: expected distinct column names, found {twice} more than once in {names}")
        if n > MAX_ROWS:  # a Parquet footer's count, before anything is read
            raise ValueError(_too_many(path, n))
        keep = [c for c in dict.fromkeys(wanted) if c in names]
        batches = handle.iter_batches(1 << 20, columns=keep) if kind == "parquet" else (b.select(keep) for b in reader)
        kept, n = [], 0
        for batch in batches:
            n += batch.num_rows
            if n > MAX_ROWS:
                raise ValueError(_too_many(path, None))
            kept.append(batch)
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        first = _readable(exc)
        raise ValueError(f"{path}: expected a readable {kind} file ({first})") from None
    if not kept:
        return pd.DataFrame({c: [] for c in names}), names
    # Text as Arrow strings, not a Python object per row: a CSV's ids are text until the split says otherwise.
    table = pa.Table.from_batches(kept)
    return table.to_pandas(types_mapper={pa.string(): pd.StringDtype("pyarrow")}.get), names


def _readable(exc: Exception) -> str:
    """The first line of a reader's error, at most 200 characters, bytes it quotes from a binary file as ``?``."""
    return "".join(c if c.isprintable() and c.isascii() else "?" for c in str(exc).splitlines()[0][:200])


def _too_many(path: Path, found: int | None) -> str:
    return f"{path}: expected at most {MAX_ROWS:,} rows (MAX_ROWS), found {'more' if found is None else f'{found:,}'}"


def _from_trec(path: Path) -> Recommendations:
    names = ["user", "q0", "item", "rank", "score", "tag"]  # qid and docid are the user and the item
    chunks, n = [], 0
    try:
        # Every field as text: a score of "nan" is refused as a score, not read as a missing field.
        for chunk in pd.read_csv(path, sep=r"\s+", header=None, dtype=str, na_filter=False, chunksize=1 << 20):
            n += len(chunk)
            if n > MAX_ROWS:
                raise ValueError(_too_many(path, None))
            if chunk.shape[1] != len(names):
                raise ValueError(
                    f"{path}: expected six whitespace-separated fields (qid Q0 docid rank score tag), found "
                    f"{chunk.shape[1]} on the first lines"
                )
            chunks.append(chunk.set_axis(names, axis=1))
    except pd.errors.EmptyDataError:
        pass
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        first = _readable(exc)
        raise ValueError(
            f"{path}: expected six whitespace-separated fields (qid Q0 docid rank score tag) on every line ({first})"
        ) from None
    frame = pd.concat(chunks, ignore_index=True) if chunks else pd.DataFrame(columns=names)
    checked = _from_frame(frame, str(path), "trec", _Columns(score="score"))
    ranks = _integer_ranks(frame, str(path), "rank", least=None)  # trec_eval reads any integer; it only breaks ties
    # trec_eval's order: score descending; here the rank field breaks ties.
    order = checked.frame.assign(_r=ranks).sort_values(["user", "order", "_r"], kind="mergesort")
    order["order"] = order.groupby("user", sort=False).cumcount().astype(np.float64)
    return Recommendations(order.drop(columns="_r"), str(path), "trec", "rank")


def _from_frame(frame, where: str, kind: str, columns: _Columns, file_columns=None) -> Recommendations:
    """``file_columns``: every column of the file, for messages (``frame`` holds only those read)."""
    shown_columns = list(frame.columns) if file_columns is None else list(file_columns)
    rank_col, score_col = columns.rank, columns.score
    if rank_col is None and score_col is None:
        rank_col = "rank" if "rank" in frame.columns else None
        score_col = "score" if rank_col is None and "score" in frame.columns else None
    order_col = rank_col or score_col
    if order_col is None or (rank_col and score_col):
        raise ValueError(
            f"{where}: expected exactly one of a rank column and a score column (rank_col/score_col), "
            f"found columns {shown_columns}"
        )
    for column in (columns.user, columns.item, order_col):
        if column not in frame.columns:
            raise ValueError(f"{where}[{column!r}]: expected this column, found columns {shown_columns}")
    if len(frame) == 0:
        raise ValueError(f"{where}: expected at least one recommended item, found an empty input")
    order = _integer_ranks(frame, where, order_col, least=1) if rank_col else _finite_scores(frame, where, order_col)
    # .array keeps Arrow strings as they are: .to_numpy() would make a Python str per row
    out = {"user": frame[columns.user].array, "item": frame[columns.item].array, "order": order}
    if "draw" in frame.columns:
        out["draw"] = _integer_ranks(frame, where, "draw", least=0).astype(np.int64)
    return Recommendations(pd.DataFrame(out), where, kind, order_col)


def _integer_ranks(frame: pd.DataFrame, where: str, column: str, *, least: int | None) -> np.ndarray:
    """The column as float64 integers, each at least ``least`` (ranks count from 1, draws from 0)."""
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values) | (np.mod(values, 1) != 0) | (values < (-np.inf if least is None else least))
    if bad.any():
        what = "integers" if least is None else f"integers >= {least}"
        raise _fail(where, column, f"expected {what}, found {int(bad.sum()):,} other value(s)", frame[bad])
    return values


def _finite_scores(frame: pd.DataFrame, where: str, column: str) -> np.ndarray:
    """The column negated, as float64: higher scores first."""
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        what = f"expected finite numbers, found {int(bad.sum()):,} NaN/infinite/non-numeric"
        raise _fail(where, column, what, frame[bad])
    return -values


def _as_kind(values: pd.Series, kind: str, recs: Recommendations, column: str) -> np.ndarray:
    """Ids as the split holds them: int64 for an integer split (text ids such as TREC's ``"12"`` converted),
    else str."""
    import pyarrow as pa
    import pyarrow.compute as pc

    series = values.reset_index(drop=True)
    if pd.api.types.is_integer_dtype(series):
        return series.to_numpy(dtype=np.int64)
    text = series.astype("string[pyarrow]")  # Arrow strings: no Python object per row
    empty = (text.isna() | (text.str.strip() == "")).to_numpy(dtype=bool)
    if empty.any():
        what = f"expected an id on every row, found {int(empty.sum()):,} empty"
        raise _fail(recs.source, column, what, recs.rows(empty))
    if kind == "string":
        return series.to_numpy().astype(str)
    try:
        return pc.cast(pa.array(text), pa.int64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        good = text.str.fullmatch(r"-?[0-9]{1,18}").to_numpy(dtype=bool)
    raise _fail(recs.source, column, "expected integer ids like the split's, found other values", recs.rows(~good))


def score_recommendations(
    recs: Recommendations,
    split: LoadedSplit | Mapping[str, Any],
    *,
    metrics: Any,
    history: Literal["remove", "strict"] = "remove",
    missing: Literal["zero", "strict"] = "zero",
) -> ScoredRecommendations:
    """``recs`` checked against the split's test protocol and scored on its test rows (one per user and draw).

    History items in a list are taken out and counted (``history="remove"``) or refused (``"strict"``); a test user
    without a list scores 0 (``missing="zero"``) or is refused; a short list is scored as it is, and counted. A
    ValueError names the input, the column and the first offending rows."""
    validation.one_of(history, "history", HISTORY_POLICIES)
    validation.one_of(missing, "missing", MISSING_POLICIES)
    given = list(metrics)
    metric_objs: list[RankingMetric] = (
        given if all(isinstance(m, RankingMetric) for m in given) else parse_metric_keys(given)
    )
    max_k = max(m.max_k for m in metric_objs)
    rows, cols, positions = _positions(recs, split)
    n_rows = split["test_source_matrix"].shape[0]
    width = max(max_k, int(positions.max()) + 1)
    rankings = np.full((n_rows, width), -1, dtype=np.int64)
    rankings[rows, positions] = cols
    source, targets = split["test_source_matrix"], split["test_target_matrix"]
    leaked = hit_matrix(rankings, source, width)
    n_leaked = int(leaked.sum())
    if n_leaked and history == "strict":
        what = f"expected no fold-in (history) item of the user, found {n_leaked:,} (history='strict')"
        raise _fail(recs.source, "item", what, recs.rows(leaked[rows, positions]))
    has_list = np.zeros(n_rows, dtype=bool)
    has_list[rows] = True
    ids = split["test_eval_user_ids"]
    n_missing = int(len(pd.unique(ids[~has_list])))
    if n_missing and missing == "strict":
        what = f"expected a list for every test user of the split, found {n_missing:,} without (missing='strict')"
        raise _fail(recs.source, "user", what, pd.DataFrame({"user": ids[~has_list][:SHOWN_ROWS]}))
    item_side = [key for m in metric_objs if isinstance(m, ItemMetric) for key in m.keys]
    if n_missing and item_side:
        what = (
            f"expected a list for every test user with the item-side metrics {', '.join(item_side)} (a user without "
            f"one has no popularity to average; missing='zero' scores only accuracy as 0), found {n_missing:,} without"
        )
        raise _fail(recs.source, "user", what, pd.DataFrame({"user": ids[~has_list][:SHOWN_ROWS]}))
    lengths = (rankings >= 0).sum(axis=1) - leaked.sum(axis=1)
    n_short = int((has_list & (lengths < max_k)).sum())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FoldInRankedWarning)  # warned below with the file's name
        popularity = ItemPopularity.from_interactions(split["x_train"]) if item_side else None
        result = evaluate_rankings(
            rankings, targets=targets, metrics=metric_objs, sample_ids=ids, source=source, item_popularity=popularity
        )
    if n_leaked:
        warnings.warn(
            f"{recs.source}: {n_leaked:,} fold-in (history) item(s) were taken out of the users' lists before "
            "scoring; pass history='strict' to refuse such lists",
            FoldInRankedWarning,
            stacklevel=2,
        )
    counts = {"n_history_items_removed": n_leaked, "n_missing_users": n_missing, "n_short_lists": n_short}
    return ScoredRecommendations(result, counts)


def _positions(
    recs: Recommendations, split: LoadedSplit | Mapping[str, Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(test row, item column, 0-based position in the list) of every row, checked."""
    frame, where = recs.frame, recs.source
    ids = split["test_eval_user_ids"]
    catalogue = ItemCatalogue(split["item_ids"], name="split item_ids")
    # The columns as they are (Arrow strings from a CSV), not as NumPy objects: one Python str per row is 1 GB.
    users = _as_kind(frame["user"], "string" if ids.dtype.kind in "UO" else "integer", recs, "user")
    items = _as_kind(frame["item"], catalogue.kind, recs, "item")
    per_draw = pd.Index(pd.unique(ids))
    n_draws = len(ids) // len(per_draw)
    user_row = per_draw.get_indexer(users)
    if (user_row < 0).any():
        raise _fail(where, "user", "expected test users of the split, found other users", recs.rows(user_row < 0))
    cols = catalogue.indices(items)
    if (cols < 0).any():
        raise _fail(where, "item", "expected items of the split's catalogue, found other items", recs.rows(cols < 0))
    if "draw" in frame.columns:
        draw = frame["draw"].to_numpy()
        if ((draw < 0) | (draw >= n_draws)).any():
            raise _fail(where, "draw", f"expected draws 0..{n_draws - 1}", recs.rows((draw < 0) | (draw >= n_draws)))
    elif n_draws > 1:
        what = f"expected a draw column (0-based): the split scores each user in {n_draws} draws, each its own fold-in"
        raise _fail(where, "draw", what)
    else:
        draw = np.zeros(len(frame), dtype=np.int64)
    rows = draw * len(per_draw) + user_row
    return _ordered(rows, cols, frame["order"].to_numpy(), recs, len(catalogue))


def _ordered(rows, cols, order, recs: Recommendations, n_items: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows sorted by (test row, order) with their 0-based positions; duplicate items or (for ranks) repeated
    ranks within a list refused. NumPy sorts, not pandas groupbys: about 40 bytes a row."""
    frame, where = recs.frame, recs.source
    codes = np.sort(rows * n_items + cols)
    repeated = codes[1:][codes[1:] == codes[:-1]]
    if repeated.size:
        bad = np.isin(rows * n_items + cols, repeated)
        raise _fail(where, "item", "expected each (user, item) once, found duplicate rows", recs.rows(bad))
    by = np.lexsort((order, rows))
    rows, cols, order = rows[by], cols[by], order[by]
    first = np.r_[True, rows[1:] != rows[:-1]]
    if recs.order_col != "score" and recs.kind != "trec":
        tied = ~first[1:] & (order[1:] == order[:-1])
        if tied.any():
            bad = np.zeros(len(frame), dtype=bool)
            bad[by[1:][tied]] = bad[by[:-1][tied]] = True
            what = "expected distinct ranks within a user's list, found repeated"
            raise _fail(where, recs.order_col, what, recs.rows(bad))
    steps = np.arange(rows.size)
    positions = steps - np.maximum.accumulate(np.where(first, steps, 0))
    return rows, cols, positions
