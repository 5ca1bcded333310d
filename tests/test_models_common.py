"""Behaviour every model shares: the recommend contract, input checks, persistence format."""

import dataclasses
import json

import numpy as np
import pytest
import scipy.sparse as sp

from mlflow_recsys.models import EASE, ELSA, MODELS, EASEConfig, ELSAConfig, Popularity, model_spec


def training_matrix():
    rng = np.random.default_rng(42)
    return sp.csr_matrix((rng.random((50, 12)) < 0.3).astype(np.float32))


FACTORIES = {
    "EASE": lambda: EASE(EASEConfig(l2=2.0)),
    "ELSA": lambda: ELSA(ELSAConfig(latent_dim=4, batch_size=16, epochs=1, seed=3)),
    "Popularity": Popularity,
}


@pytest.fixture(params=sorted(FACTORIES))
def fitted(request):
    return FACTORIES[request.param]().fit(training_matrix())


def test_model_classes_are_registered_under_their_names():
    assert {name: spec.model_class.name for name, spec in MODELS.items()} == {n: n for n in MODELS}
    assert set(MODELS) == set(FACTORIES)


def test_the_registry_builds_each_model_from_the_hyper_parameters_it_takes():
    settings = {"l2": 50.0, "seed": 3, "latent_dim": 8, "epochs": 2, "not_a_setting": 1}
    for name, spec in MODELS.items():
        fields = {f.name for f in dataclasses.fields(spec.config_class)} if spec.config_class else set()
        assert set(spec.hyperparameters) <= fields, name
        model = spec.build(settings)
        assert type(model) is spec.model_class
        taken = {k: v for k, v in settings.items() if k in spec.hyperparameters}
        assert {k: getattr(model.config, k) for k in taken} == taken
    assert MODELS["ELSA"].seeded and MODELS["ELSA"].epochs
    assert not any(MODELS[m].seeded or MODELS[m].epochs for m in ("EASE", "Popularity"))
    with pytest.raises(ValueError, match=r"model: expected one of \('EASE', 'ELSA', 'Popularity'\), found 'ALS'"):
        model_spec("ALS")


def test_recommendations_exclude_fold_in_and_follow_scores(fitted):
    source = training_matrix()[:10]
    indices, values = fitted.recommend(source, 6, batch_size=3)
    scores = fitted.score(source)
    assert indices.shape == (10, 6) and indices.dtype == np.int64 and values.dtype == np.float32
    for row in range(10):
        fold_in = set(source[row].indices.tolist())
        candidates = [j for j in range(12) if j not in fold_in]
        expected = sorted(candidates, key=lambda j: (-float(scores[row, j]), j))[:6]
        expected += [-1] * (6 - len(expected))
        assert indices[row].tolist() == expected


def test_scoring_a_matrix_with_wrong_item_count_raises(fitted):
    with pytest.raises(ValueError, match="source_rows: expected 12 columns.*found 13"):
        fitted.score(sp.csr_matrix((2, 13), dtype=np.float32))


def test_dense_source_rows_raise_type_error(fitted):
    with pytest.raises(TypeError, match="source_rows: expected a scipy.sparse CSR matrix, found ndarray"):
        fitted.recommend(np.zeros((2, 12), dtype=np.float32), 3)


def test_invalid_k_raises(fitted):
    with pytest.raises(ValueError, match="k: expected an integer >= 1, found 0"):
        fitted.recommend(training_matrix()[:2], 0)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_unfitted_model_refuses_to_score(name):
    with pytest.raises(RuntimeError, match="not fitted"):
        FACTORIES[name]().score(training_matrix())


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_negative_training_values_raise(name):
    x = sp.csr_matrix(np.array([[1.0, -1.0]], dtype=np.float32))
    with pytest.raises(ValueError, match="x_train: expected non-negative values"):
        FACTORIES[name]().fit(x)


def test_saved_directory_holds_json_and_plain_npy_only(fitted, tmp_path):
    fitted.save(tmp_path / "m")
    files = sorted(p.name for p in (tmp_path / "m").iterdir())
    assert "config.json" in files
    assert all(f == "config.json" or f.endswith(".npy") for f in files)
    document = json.loads((tmp_path / "m" / "config.json").read_text())
    assert document["model"] == fitted.name and document["state"]["n_items"] == 12
    for f in files:
        if f.endswith(".npy"):
            np.load(tmp_path / "m" / f, allow_pickle=False)


def test_loading_by_name_through_registry_round_trips(fitted, tmp_path):
    fitted.save(tmp_path / "m")
    loaded = MODELS[fitted.name].model_class.load(tmp_path / "m")
    source = training_matrix()
    np.testing.assert_array_equal(loaded.recommend(source, 4)[0], fitted.recommend(source, 4)[0])


def test_loading_a_directory_of_another_model_raises(tmp_path):
    Popularity().fit(training_matrix()).save(tmp_path / "pop")
    with pytest.raises(ValueError, match="expected a saved EASE model, found 'Popularity'"):
        EASE.load(tmp_path / "pop")


def test_loading_a_missing_directory_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        ELSA.load(tmp_path / "nothing")


@pytest.mark.parametrize("cls_name", ["EASE", "ELSA", "Popularity"])
def test_tampered_weights_file_fails_with_a_clear_error(tmp_path, cls_name):
    from mlflow_recsys.models import EASE, MODELS, ELSAConfig, ELSATrainer, Popularity

    rng = np.random.default_rng(0)
    x = sp.csr_matrix((rng.random((30, 12)) < 0.3).astype(np.float32))
    model = {
        "EASE": lambda: EASE().fit(x),
        "Popularity": lambda: Popularity().fit(x),
        "ELSA": lambda: ELSATrainer(ELSAConfig(latent_dim=3, epochs=1)).fit(x),
    }[cls_name]()
    folder = model.save(tmp_path / "m")
    (weights,) = [f for f in folder.iterdir() if f.suffix == ".npy"]
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # flip the bits of one weight
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"{weights.name} does not match the sha256"):
        MODELS[cls_name].model_class.load(folder)
