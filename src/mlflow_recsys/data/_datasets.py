"""Registry of public datasets (:class:`DatasetSpec`: archive, SHA-256, ratings file, licence, citation), and loading
of their raw interactions into the frame of :mod:`mlflow_recsys.data._interactions`: from a copy an installed package
ships, else from the canonical archive, downloaded once into ``data_dir``."""

from __future__ import annotations

import dataclasses
import os
import warnings
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import cast

import pandas as pd

from mlflow_recsys._digests import sha256_file
from mlflow_recsys.data import _safezip as safezip
from mlflow_recsys.data._download import download
from mlflow_recsys.data._interactions import INTERACTION_COLUMNS, normalise


@dataclass(frozen=True)
class PackageCopy:
    """A copy of a dataset's interactions inside an installed distribution: tab-separated, one header line, the
    columns user, item, rating, timestamp."""

    distribution: str
    version: str
    path: str
    sha256: str


@dataclass(frozen=True)
class RatingsFile:
    """Where the ratings are inside an archive and how they are written.

    ``member`` is the path of the file in the zip; a bare file name (no ``/``) matches that name in any folder of the
    archive, for archives whose top folder is not documented. ``columns`` names the fields in file order, using
    ``user``, ``item``, ``value`` and ``timestamp``; ``None`` marks a field to skip. ``sep`` is the field separator
    (``"::"`` is read exactly), ``header`` whether the first line holds column names."""

    member: str
    sep: str
    header: bool
    columns: tuple[str | None, ...]
    encoding: str = "utf-8"


@dataclass(frozen=True)
class DatasetSpec:
    """Where a dataset comes from, how to read it and the terms it is used under.

    ``size_bytes`` is the archive size when it is published (used for the progress bar only; the SHA-256 is what is
    checked), else None."""

    name: str
    description: str
    homepage: str
    url: str
    sha256: str
    size_bytes: int | None
    ratings: RatingsFile
    licence: str
    citation: str
    package_copy: PackageCopy | None = None

    @property
    def archive_name(self) -> str:
        """File name under which the downloaded archive is cached."""
        return self.url.rstrip("/").rsplit("/", 1)[-1]


_MOVIELENS_LICENCE = (
    "GroupLens Research (University of Minnesota) grants use of the MovieLens data under conditions stated in the "
    "README shipped in each archive. In short: the data may be used for research only; any publication that uses it "
    "must acknowledge it by citing Harper & Konstan (2015); it may not be redistributed, and it may not be used "
    "commercially, without separate permission from GroupLens; no statement of endorsement by the University of "
    "Minnesota or GroupLens may be implied; and the data comes with no warranty. Read the README in the archive for "
    "the binding text."
)

_MOVIELENS_CITATION = (
    "F. Maxwell Harper and Joseph A. Konstan. 2015. The MovieLens Datasets: History and Context. ACM Transactions on "
    "Interactive Intelligent Systems 5, 4, Article 19 (December 2015). https://doi.org/10.1145/2827872"
)


# Sizes and SHA-256 of the MovieLens archives as recorded in tensorflow/datasets
# (tensorflow_datasets/url_checksums/movielens.txt); GroupLens itself publishes only MD5 sums.
def _movielens(release: str, description: str, sha256: str, size_bytes: int, ratings: RatingsFile) -> DatasetSpec:
    """A GroupLens MovieLens release (``"100k"``, ``"1m"``, ...): its page and archive follow one pattern."""
    return DatasetSpec(
        name=f"movielens-{release}",
        description=description,
        homepage=f"https://grouplens.org/datasets/movielens/{release}/",
        url=f"https://files.grouplens.org/datasets/movielens/ml-{release}.zip",
        sha256=sha256,
        size_bytes=size_bytes,
        ratings=ratings,
        licence=_MOVIELENS_LICENCE,
        citation=_MOVIELENS_CITATION,
    )


DATASETS: dict[str, DatasetSpec] = {
    "goodbooks": DatasetSpec(
        name="goodbooks",
        description="GoodBooks-10k: about 6 million ratings (1-5 stars) by 53,424 users on "
        "10,000 books from Goodreads; no timestamps.",
        homepage="https://github.com/zygmuntz/goodbooks-10k",
        url="https://github.com/zygmuntz/goodbooks-10k/releases/download/v1.0/goodbooks-10k.zip",
        # Recorded by ludwig-ai/ludwig (ludwig/datasets/configs/goodbooks_books.yaml);
        # the author publishes no checksum and no archive size.
        sha256="261b97b56db61f3fb2ce5aadbb13704d30179fcc986c17ace665a0af9ed00731",
        size_bytes=None,
        ratings=RatingsFile("ratings.csv", sep=",", header=True, columns=("user", "item", "value")),
        licence="Creative Commons Attribution-ShareAlike 4.0 International (CC BY-SA 4.0), "
        "as stated in the repository's LICENSE file.",
        citation="Zygmunt Zając. 2017. Goodbooks-10k: a new dataset for book recommendations. "
        "FastML. https://github.com/zygmuntz/goodbooks-10k",
    ),
    "movielens-100k": dataclasses.replace(
        _movielens(
            "100k",
            "MovieLens 100K: 100,000 ratings (1-5 stars) by 943 users on 1,682 movies, 1997-1998.",
            "50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229",
            4924029,
            RatingsFile("ml-100k/u.data", sep="\t", header=False, columns=INTERACTION_COLUMNS),
        ),
        package_copy=PackageCopy(
            distribution="recbole",
            version="1.2.1",
            path="recbole/dataset_example/ml-100k/ml-100k.inter",
            # Digest of the file in the recbole 1.2.1 wheel; another version may
            # ship different content, so a mismatch sends us to the canonical archive.
            sha256="4edb74e2a81178c2ba9ff381495f754f996c4aea351b1272ca36b43da0935eff",
        ),
    ),
    "movielens-1m": _movielens(
        "1m",
        "MovieLens 1M: 1,000,209 ratings (1-5 stars) by 6,040 users on about 3,900 movies, 2000-2003.",
        "a6898adb50b9ca05aa231689da44c217cb524e7ebd39d264c56e2832f2c54e20",
        5917549,
        RatingsFile("ml-1m/ratings.dat", sep="::", header=False, columns=INTERACTION_COLUMNS, encoding="latin-1"),
    ),
    "movielens-20m": _movielens(
        "20m",
        "MovieLens 20M: 20,000,263 ratings (0.5-5 stars in half steps) by 138,493 users on 26,744 movies, 1995-2015.",
        "96f243c338a8665f6bcc89c53edf6ee39162a846940de6b7c8c48aeada765ff3",
        198702078,
        RatingsFile("ml-20m/ratings.csv", sep=",", header=True, columns=INTERACTION_COLUMNS),
    ),
}

#: Datasets people ask for that cannot be registered, and what to do instead.
NOT_REGISTERED = {
    "netflix": (
        "the Netflix Prize data has no official download: Netflix withdrew it, the copies on "
        "archive.org and Kaggle are unofficial (the licence forbids redistribution) and no SHA-256 "
        "is published for them. If you hold the data, write its ratings as a CSV or Parquet file "
        "with columns user, item, value, timestamp and pass that path as the dataset"
    )
}


def get_dataset_spec(dataset: str) -> DatasetSpec:
    """The registry entry for ``dataset``; ValueError if it is not a registered name, the message listing the known
    names (and, for a known but unregistrable dataset such as ``netflix``, saying why and what to do instead)."""
    if isinstance(dataset, str) and dataset.lower() in NOT_REGISTERED:
        raise ValueError(f"dataset: {dataset!r} is not registered: {NOT_REGISTERED[dataset.lower()]}")
    if not isinstance(dataset, str) or dataset not in DATASETS:
        raise ValueError(
            f"dataset: expected one of {sorted(DATASETS)} or a path to a .csv or .parquet file, found {dataset!r}"
        )
    return DATASETS[dataset]


def load_interactions(
    dataset: str, data_dir: str | os.PathLike | None = None, *, use_package_copy: bool = True, progress: bool = True
) -> pd.DataFrame:
    """Load the raw interactions of a registered dataset: one row per rating in file order, in the columns of
    :mod:`mlflow_recsys.data._interactions`.

    Parameters
    ----------
    dataset:
        Registered name, e.g. ``"movielens-100k"`` (see :data:`DATASETS`).
    data_dir:
        Folder where the canonical archive is cached (downloaded on first use). Default: ``$MLFLOW_RECSYS_DATA_DIR`` or
        ``~/.cache/mlflow-recsys``. Not touched when an installed package copy is used.
    use_package_copy:
        Read the copy shipped inside an installed distribution (for MovieLens-100k the recbole 1.2.1 wheel, located with
        :mod:`importlib.metadata` without importing recbole) when present and its SHA-256 matches. Default True.
    progress:
        Show a tqdm bar while downloading. Default True.

    Raises
    ------
    ValueError
        Unknown ``dataset`` (message lists known names); a cached or downloaded archive whose SHA-256 differs from the
        registry; an archive that is corrupted, has an unsafe member, or lacks the ratings file.
    mlflow_recsys.data.DownloadError
        If the archive is needed but cannot be fetched; the message says where to place it by hand.
    """
    spec = get_dataset_spec(dataset)
    if use_package_copy and spec.package_copy is not None:
        path = _package_copy_path(spec.package_copy)
        if path is not None:
            return normalise(pd.read_csv(path, sep="\t"), INTERACTION_COLUMNS, str(path))
    if data_dir is None:
        data_dir = os.environ.get("MLFLOW_RECSYS_DATA_DIR") or Path.home() / ".cache" / "mlflow-recsys"
    return read_archive(
        download(spec.url, Path(data_dir) / spec.archive_name, spec.sha256, progress=progress), spec.ratings
    )


def read_archive(archive: str | os.PathLike, ratings: RatingsFile) -> pd.DataFrame:
    """The ``ratings`` file of the zip ``archive``, read once the archive is checked safe; nothing is extracted."""
    archive = Path(archive)
    try:
        with zipfile.ZipFile(archive) as zf:
            safezip.check_members(zf, archive)
            member = _find_member(zf, ratings.member, archive)
            # "::" is read on single colons with the C parser, the fields then at even positions: faster than the
            # python engine.
            sep = ":" if ratings.sep == "::" else ratings.sep
            with zf.open(member) as handle:
                frame = pd.read_csv(handle, sep=sep, header=0 if ratings.header else None, encoding=ratings.encoding)
    except (zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"{archive}: the archive is truncated or corrupted ({exc})") from None
    return normalise(frame.iloc[:, ::2] if ratings.sep == "::" else frame, ratings.columns, f"{archive}:{member}")


def _find_member(zf: zipfile.ZipFile, wanted: str, archive: Path) -> str:
    """The one member named ``wanted`` (its bare file name in any folder, when ``wanted`` has no ``/``)."""
    names = zf.namelist()
    found = [n for n in names if (n if "/" in wanted else PurePosixPath(n).name) == wanted]
    if len(found) == 1:
        return found[0]
    raise ValueError(
        f"{archive}: expected one archive member {wanted!r}, found "
        f"{found if found else 'none among ' + str(names[:10])}"
    )


def _package_copy_path(copy: PackageCopy) -> Path | None:
    try:
        dist = metadata.distribution(copy.distribution)
    except metadata.PackageNotFoundError:
        return None
    # typeshed says SimplePath; a distribution installed on the file system locates a pathlib.Path.
    path = Path(cast("os.PathLike[str]", dist.locate_file(copy.path)))
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
