"""One base class for the package's own errors, each still the built-in exception callers expect."""

import pytest

from mlflow_recsys import errors
from mlflow_recsys.tracking import ArtifactError, RunSelectionError, read_evaluation_artifacts

EXPECTED = {
    "RunSelectionError": ValueError,
    "ArtifactError": ValueError,
    "RunOwnershipError": ValueError,
    "TrackingServerError": ConnectionError,
    "DownloadError": OSError,
    "StudyStepError": RuntimeError,
}


@pytest.mark.parametrize("name, builtin", sorted(EXPECTED.items()))
def test_each_error_is_a_recsys_error_and_its_builtin(name, builtin):
    cls = getattr(errors, name)
    assert issubclass(cls, errors.RecsysError) and issubclass(cls, builtin)


def test_the_old_import_paths_name_the_same_classes():
    from mlflow_recsys.data._download import DownloadError
    from mlflow_recsys.tracking._context import RunOwnershipError
    from mlflow_recsys.tracking._server_errors import TrackingServerError
    from mlflow_recsys.tracking._study import StudyStepError

    assert (
        RunSelectionError,
        ArtifactError,
        RunOwnershipError,
        TrackingServerError,
        DownloadError,
        StudyStepError,
    ) == tuple(getattr(errors, n) for n in EXPECTED)


def test_a_raised_error_is_caught_as_recsys_error(tmp_path):
    with pytest.raises(errors.RecsysError, match="per_user.parquet"):
        read_evaluation_artifacts(tmp_path)


def test_terminated_is_not_an_exception():
    # `except Exception` in library code must not swallow a SIGTERM on its way to ending the run FAILED.
    assert not issubclass(errors.Terminated, Exception)
    with pytest.raises(errors.Terminated, match="signal 15"):
        errors.raise_terminated(15, None)
