"""Registry of supported datasets and loading of their raw interactions.

Each dataset is described by a :class:`DatasetSpec`: where the canonical
archive lives, its checksum and size, its licence and how to cite it. Loading
prefers a copy that is already installed on the machine (a Python package that
ships the data) and falls back to downloading the canonical archive.
"""

from __future__ import annotations

import hashlib
import os
import warnings
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from mlflow_recsys.data.download import download, sha256_file

INTERACTION_COLUMNS = ("user", "item", "value", "timestamp")

DATA_DIR_ENV = "MLFLOW_RECSYS_DATA_DIR"


@dataclass(frozen=True)
class PackageCopy:
    """A copy of a dataset's interactions shipped inside an installed distribution.

    The file is tab-separated with one header line and the four columns user,
    item, rating, timestamp in that order.
    """

    distribution: str
    version: str
    path: str
    sha256: str


@dataclass(frozen=True)
class DatasetSpec:
    """Where a dataset comes from and the terms it is used under.

    ``archive_member`` is the member of the downloaded zip that holds the
    interactions as tab-separated text without a header, four columns: user,
    item, rating, timestamp (Unix seconds).
    """

    name: str
    description: str
    homepage: str
    url: str
    sha256: str
    size_bytes: int
    archive_member: str
    licence: str
    citation: str
    package_copy: PackageCopy | None = None

    @property
    def archive_name(self) -> str:
        """File name under which the downloaded archive is cached."""
        return self.url.rstrip("/").rsplit("/", 1)[-1]


_MOVIELENS_LICENCE = (
    "GroupLens Research (University of Minnesota) grants use of the MovieLens data "
    "under conditions stated in the README shipped in the archive. In short: the data "
    "may be used for research only; any publication that uses it must acknowledge it "
    "by citing Harper & Konstan (2015); it may not be redistributed, and it may not be "
    "used commercially, without separate permission from GroupLens; no statement of "
    "endorsement by the University of Minnesota or GroupLens may be implied; and the "
    "data comes with no warranty. Read the README in ml-100k.zip for the binding text."
)

_MOVIELENS_CITATION = (
    "F. Maxwell Harper and Joseph A. Konstan. 2015. The MovieLens Datasets: History and "
    "Context. ACM Transactions on Interactive Intelligent Systems 5, 4, Article 19 "
    "(December 2015). https://doi.org/10.1145/2827872"
)

DATASETS: dict[str, DatasetSpec] = {
    "movielens-100k": DatasetSpec(
        name="movielens-100k",
        description="100,000 ratings (1-5 stars) by 943 users on 1,682 movies, 1997-1998.",
        homepage="https://grouplens.org/datasets/movielens/100k/",
        url="https://files.grouplens.org/datasets/movielens/ml-100k.zip",
        # Size and SHA-256 as recorded in tensorflow/datasets
        # (tensorflow_datasets/url_checksums/movielens.txt); GroupLens itself
        # publishes only the MD5, 0e33842e24a9c977be4e0107933c0723.
        sha256="50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229",
        size_bytes=4924029,
        archive_member="ml-100k/u.data",
        licence=_MOVIELENS_LICENCE,
        citation=_MOVIELENS_CITATION,
        package_copy=PackageCopy(
            distribution="recbole",
            version="1.2.1",
            path="recbole/dataset_example/ml-100k/ml-100k.inter",
            # Digest of the file in the recbole 1.2.1 wheel; another version may
            # ship different content, so a mismatch sends us to the canonical archive.
            sha256="4edb74e2a81178c2ba9ff381495f754f996c4aea351b1272ca36b43da0935eff",
        ),
    ),
}


def get_dataset_spec(dataset: str) -> DatasetSpec:
    """Return the registry entry for ``dataset``.

    Raises
    ------
    ValueError
        If ``dataset`` is not a registered name; the message lists the known names.
    """
    if not isinstance(dataset, str) or dataset not in DATASETS:
        raise ValueError(
            f"dataset: expected one of {sorted(DATASETS)}, found {dataset!r}"
        )
    return DATASETS[dataset]


def default_data_dir() -> Path:
    """Folder for downloaded archives: ``$MLFLOW_RECSYS_DATA_DIR`` or ``~/.cache/mlflow-recsys``."""
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env) if env else Path.home() / ".cache" / "mlflow-recsys"


def load_interactions(
    dataset: str,
    data_dir: str | os.PathLike | None = None,
    *,
    use_package_copy: bool = True,
    progress: bool = True,
) -> pd.DataFrame:
    """Load the raw interactions of a registered dataset.

    Parameters
    ----------
    dataset:
        Registered name, e.g. ``"movielens-100k"`` (see :data:`DATASETS`).
    data_dir:
        Folder where the canonical archive is cached (downloaded on first use).
        Default: ``$MLFLOW_RECSYS_DATA_DIR`` or ``~/.cache/mlflow-recsys``. Not
        touched when an installed package copy is used.
    use_package_copy:
        Read the copy shipped inside an installed distribution (for MovieLens-100k
        the recbole 1.2.1 wheel, located with :mod:`importlib.metadata` without
        importing recbole) when present and its SHA-256 matches. Default True.
    progress:
        Show a tqdm bar while downloading.

    Returns
    -------
    pandas.DataFrame
        One row per rating in file order with columns ``user`` and ``item`` (int64
        when all raw ids are integers, else str), ``value`` (float64, the rating)
        and ``timestamp`` (int64, Unix seconds).

    Raises
    ------
    ValueError
        Unknown ``dataset`` (message lists known names), or a cached/downloaded
        archive whose SHA-256 differs from the registry.
    mlflow_recsys.data.download.DownloadError
        If the archive is needed but cannot be fetched; the message says where to
        place it by hand.
    """
    spec = get_dataset_spec(dataset)
    if use_package_copy and spec.package_copy is not None:
        path = _package_copy_path(spec.package_copy)
        if path is not None:
            return _normalise(pd.read_csv(path, sep="\t"))
    folder = Path(data_dir) if data_dir is not None else default_data_dir()
    archive = download(
        spec.url,
        folder / spec.archive_name,
        spec.sha256,
        expected_size=spec.size_bytes,
        progress=progress,
    )
    with zipfile.ZipFile(archive) as zf:
        try:
            member = zf.open(spec.archive_member)
        except KeyError:
            raise ValueError(
                f"{archive}: expected an archive member {spec.archive_member!r}, "
                f"found members {zf.namelist()[:10]}"
            ) from None
        with member:
            frame = pd.read_csv(member, sep="\t", header=None)
    return _normalise(frame)


def interactions_digest(frame: pd.DataFrame) -> str:
    """SHA-256 hex digest of an interaction frame, independent of its row order.

    Rows are sorted by (user, item, timestamp, value) and each column is hashed
    as int64/float64 bytes, or as unit-separated UTF-8 text for string ids.
    """
    missing = [c for c in INTERACTION_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(
            f"frame: expected columns {list(INTERACTION_COLUMNS)}, missing {missing}"
        )
    ordered = frame.sort_values(["user", "item", "timestamp", "value"], kind="mergesort")
    h = hashlib.sha256()
    for col in INTERACTION_COLUMNS:
        h.update(f"{col}:".encode())
        h.update(column_bytes(ordered[col].to_numpy()))
    return h.hexdigest()


def column_bytes(values: np.ndarray) -> bytes:
    """Canonical bytes of an id/value column for hashing (dtype kind, then content)."""
    values = np.asarray(values)
    if values.dtype.kind in "iub":
        return b"i" + values.astype(np.int64).tobytes()
    if values.dtype.kind == "f":
        return b"f" + values.astype(np.float64).tobytes()
    return b"s" + "\x1f".join(map(str, values.tolist())).encode("utf-8")


def _package_copy_path(copy: PackageCopy) -> Path | None:
    try:
        dist = metadata.distribution(copy.distribution)
    except metadata.PackageNotFoundError:
        return None
    path = Path(dist.locate_file(copy.path))
    if not path.is_file():
        return None
    found = sha256_file(path)
    if found != copy.sha256:
        warnings.warn(
            f"{path} (from {copy.distribution} {dist.version}) has SHA-256 {found}, "
            f"expected {copy.sha256} (the {copy.distribution} {copy.version} copy); "
            "ignoring it and using the canonical archive instead",
            UserWarning,
            stacklevel=3,
        )
        return None
    return path


def _normalise(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.shape[1] != 4:
        raise ValueError(
            f"interactions file: expected 4 columns (user, item, rating, timestamp), "
            f"found {frame.shape[1]}"
        )
    frame = frame.set_axis(list(INTERACTION_COLUMNS), axis=1)
    out = pd.DataFrame(
        {
            "user": _ids(frame["user"]),
            "item": _ids(frame["item"]),
            "value": frame["value"].to_numpy(dtype=np.float64),
            "timestamp": frame["timestamp"].to_numpy(dtype=np.float64).astype(np.int64),
        }
    )
    return out


def _ids(column: pd.Series) -> np.ndarray:
    if pd.api.types.is_integer_dtype(column):
        return column.to_numpy(dtype=np.int64)
    return column.astype(str).to_numpy(dtype=object)
