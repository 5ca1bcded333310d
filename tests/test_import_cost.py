"""torch stays off the import path: only ELSA training (and checking a non-CPU device) imports it.

Each check runs in a fresh interpreter, since this test process may have imported torch already.
"""

import os
import subprocess
import sys
import textwrap

import mlflow
import numpy as np
import pytest
import scipy.sparse as sp

from conftest import sqlite_store
from mlflow_recsys.models import ELSAConfig, ELSATrainer

DATA = """
import numpy as np, scipy.sparse as sp
rng = np.random.default_rng(0)
x = sp.csr_matrix((rng.random((30, 12)) < 0.3).astype(np.float32))
"""


def loaded_after(code: str, env: dict | None = None) -> tuple[bool, bool]:
    """Run ``code`` in a fresh interpreter; return whether torch and mlflow are then in ``sys.modules``."""
    probe = textwrap.dedent(code) + "\nimport sys\nprint('torch' in sys.modules, 'mlflow' in sys.modules)\n"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    torch, mlflow_loaded = proc.stdout.split()[-2:]
    return torch == "True", mlflow_loaded == "True"


#: Imports that must load neither torch nor mlflow. One interpreter runs them all: if neither is loaded after the
#: last, none of them loaded it.
CORE_IMPORTS = """
import mlflow_recsys
import mlflow_recsys.stats
import mlflow_recsys.metrics
import mlflow_recsys.evaluation
import mlflow_recsys.data
# Every public name of the models package stays importable where it was, ELSA's included.
from mlflow_recsys.models import EASE, ELSA, MODELS, ELSAConfig, ELSATrainer, Popularity
"""


def test_importing_the_core_does_not_import_torch_or_mlflow():
    assert loaded_after(CORE_IMPORTS) == (False, False)


@pytest.mark.parametrize("model", ["EASE(EASEConfig(l2=5.0))", "Popularity()"])
def test_fitting_saving_loading_and_recommending_ease_and_popularity_do_not_import_torch(model, tmp_path):
    code = (
        DATA
        + f"""
from mlflow_recsys.models import MODELS, EASE, EASEConfig, Popularity
fitted = {model}.fit(x)
folder = fitted.save({str(tmp_path / "m")!r})
loaded = MODELS[fitted.name].model_class.load(folder)
assert type(loaded) is type(fitted)
np.testing.assert_array_equal(loaded.recommend(x[:3], 4)[0], fitted.recommend(x[:3], 4)[0])
"""
    )
    assert loaded_after(code) == (False, False)


@pytest.fixture(scope="module")
def saved_elsa(tmp_path_factory):
    rng = np.random.default_rng(1)
    x = sp.csr_matrix((rng.random((30, 12)) < 0.3).astype(np.float32))
    model = ELSATrainer(ELSAConfig(latent_dim=3, epochs=1)).fit(x)
    return model.save(tmp_path_factory.mktemp("elsa") / "m"), x


def test_a_trained_elsa_model_loads_and_scores_without_torch(saved_elsa):
    folder, x = saved_elsa
    code = f"""
import numpy as np, scipy.sparse as sp
from mlflow_recsys.models import ELSA
model = ELSA.load({str(folder)!r})
x = sp.csr_matrix(np.eye(4, {x.shape[1]}, dtype=np.float32))
assert model.score(x).shape == x.shape
"""
    assert loaded_after(code) == (False, False)


@pytest.mark.parametrize(
    "code",
    [
        DATA + "from mlflow_recsys.models import ELSAConfig, ELSATrainer\n"
        "ELSATrainer(ELSAConfig(latent_dim=2, epochs=1)).fit(x)",
        "from mlflow_recsys.models import ELSAConfig\nELSAConfig(device='cpu:0')",
    ],
    ids=["elsa-training", "non-default-device"],
)
def test_elsa_training_and_device_checks_import_torch_when_used(code):
    # Also shows that the probe sees torch when it is there.
    assert loaded_after(code) == (True, False)


def test_the_pyfunc_wrapper_loads_and_predicts_an_ease_model_without_torch(tmp_path):
    code = (
        DATA
        + f"""
import pandas as pd
from mlflow.pyfunc import PythonModelContext
from mlflow_recsys.models import EASE
from mlflow_recsys.tracking._pyfunc_model import RecommenderPyfunc
EASE().fit(x).save({str(tmp_path / "weights")!r})
(catalogue := __import__("pathlib").Path({str(tmp_path / "catalogue")!r})).mkdir()
np.save(catalogue / "item_ids.npy", np.arange(100, 112), allow_pickle=False)
wrapper = RecommenderPyfunc()
artifacts = {{"weights": {str(tmp_path / "weights")!r}, "catalogue": str(catalogue)}}
wrapper.load_context(PythonModelContext(artifacts=artifacts, model_config=None))
out = wrapper.predict(None, pd.DataFrame({{"items": [[100, 105]], "k": [3]}}))
assert len(out["items"][0]) == 3
"""
    )
    assert loaded_after(code) == (False, True)


@pytest.mark.parametrize("model", ["EASE"])  # Popularity loads through the same wrapper
def test_mlflow_pyfunc_load_model_of_a_logged_model_does_not_import_torch(model, tmp_path):
    from mlflow_recsys.models import EASE, Popularity
    from mlflow_recsys.tracking._model_logging import log_recommender

    rng = np.random.default_rng(2)
    x = sp.csr_matrix((rng.random((30, 12)) < 0.3).astype(np.float32))
    fitted = {"EASE": EASE, "Popularity": Popularity}[model]().fit(x)
    with sqlite_store(tmp_path), mlflow.start_run():
        uri = log_recommender(fitted, np.arange(100, 112)).model_uri
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp_path}/mlruns.db"
    code = f"""
import mlflow.pyfunc, pandas as pd
model = mlflow.pyfunc.load_model({uri!r})
assert len(model.predict(pd.DataFrame({{"items": [[100, 105]], "k": [3]}}))["items"][0]) == 3
"""
    assert loaded_after(code, env) == (False, True)
