"""The study file: a TOML file read into a checked plan, and every mistake refused before any run, naming the file,
the key and what was expected."""

import textwrap

import pytest

from mlflow_recsys.data import SplitConfig
from mlflow_recsys.settings_schema import settings_of
from mlflow_recsys.stats import ComparisonSettings
from mlflow_recsys.tracking._study_file import candidate_names, read_study, shorthand_plan
from mlflow_recsys.tracking._study_settings import StudySettings

GOOD = """
name = "three datasets"
metrics = ["ndcg@100", "recall@20"]
scale = "log-ratio"

[split]
seed = 7

[[dataset]]
name = "movielens-100k"

[[dataset]]
name = "clicks"
path = "clicks.csv"
columns = { user = "uid", value = "none" }
split = { split_mode = "time_split", test_frac = 0.3 }

[[model]]
name = "EASE"
l2 = [50.0, 500.0]

[[model]]
name = "ELSA"
seeds = [0, 1, 2]
epochs = 5
latent_dim = [8, 16]

[[model]]
name = "Popularity"

[[model]]
name = "ALS"
runs = { movielens-100k = "abc", clicks = ["def", "ghi"] }

[compare]
reference = "Popularity"
primary = "ndcg@100"
n_resamples = 999
correction = "none"
"""


def _write(tmp_path, text, name="study.toml"):
    (tmp_path / "clicks.csv").write_text("uid,item\n")
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_a_study_file_becomes_a_checked_plan(tmp_path):
    plan = read_study(_write(tmp_path, GOOD))
    assert plan.settings.name == "three datasets" and plan.settings.scale == "log-ratio"
    assert plan.metrics == ("ndcg@100", "recall@20")
    ml, clicks = plan.datasets
    assert ml.split == SplitConfig(seed=7) and ml.path is None
    assert clicks.path == str(tmp_path / "clicks.csv") and clicks.columns == {"user": "uid", "value": None}
    # A dataset's split overrides [split]; implicit feedback (value = "none") keeps every row, as `split` does.
    assert clicks.split == SplitConfig(seed=7, split_mode="time_split", test_frac=0.3, min_rating=None)
    assert plan.comparison == ComparisonSettings(
        reference="Popularity", primary="ndcg@100", n_resamples=999, correction=None
    )
    trainings = plan.trainings()
    # 2 EASE configurations, 2 ELSA configurations x 3 seeds, Popularity once; ALS is imported only.
    assert len(trainings) == 2 + 2 * 3 + 1
    assert [t.run_name for t in trainings][:4] == [
        "EASE(l2=50)",
        "EASE(l2=500)",
        "ELSA(latent_dim=8) seed 0",
        "ELSA(latent_dim=8) seed 1",
    ]
    assert {t.seed for t in trainings if t.model == "ELSA"} == {"0", "1", "2"}
    assert trainings[2].hyperparameters == {"epochs": 5, "latent_dim": 8, "seed": 0}
    assert candidate_names(plan) == [
        "EASE(l2=50)",
        "EASE(l2=500)",
        "ELSA(latent_dim=8)",
        "ELSA(latent_dim=16)",
        "Popularity",
        "ALS",
    ]
    assert plan.models[3].runs == {"movielens-100k": ("abc",), "clicks": ("def", "ghi")}


def test_the_configuration_tag_is_what_the_train_step_logs(tmp_path):
    # A hyper-parameter left out takes the train step's default (ELSA latent_dim 24), not the config class's.
    from mlflow_recsys.models import TrainConfig
    from mlflow_recsys.tracking._training import configuration_tag

    plan = read_study(_write(tmp_path, GOOD.replace("latent_dim = [8, 16]", "")))
    elsa = [t for t in plan.trainings() if t.model == "ELSA"][0]
    assert elsa.config == configuration_tag(TrainConfig("ELSA", elsa.hyperparameters).build().config)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: "foo = 1\n" + t, "study.toml: foo: unknown key; expected one of name, executor"),
        (lambda t: t.replace("[split]\nseed = 7", "[split]\nsede = 7"), r"\[split\]: sede: unknown key"),
        (
            lambda t: t.replace("n_resamples = 999", "n_resamples = 0"),
            r"\[compare\]: n_resamples: expected an integer in \[1, 1,000,000\], found 0",
        ),
        (lambda t: t.replace('scale = "log-ratio"', 'scale = "ratio"'), "study.toml: scale: expected one of"),
        (
            lambda t: t.replace('"recall@20"]', '"bogus@1"]', 1),
            "study.toml: metrics: unknown metric name 'bogus' in 'bogus@1'",
        ),
        (
            lambda t: t.replace('metrics = ["ndcg@100", "recall@20"]\n', "").replace(
                "[compare]", '[compare]\nmetrics = ["ndcg@100", "bogus@1"]'
            ),
            r"study.toml: \[compare\]: metrics: unknown metric name 'bogus'",
        ),
        (
            lambda t: t.replace("l2 = [50.0, 500.0]", "l2 = [50.0, 50.0]"),
            r"\[\[model\]\] 1: l2: expected each value of a grid once, found 50.0 more than once",
        ),
        (
            lambda t: t.replace("l2 = [50.0, 500.0]", "l2 = []"),
            r"\[\[model\]\] 1: l2: expected a value or a list of values, found an empty list",
        ),
        (
            lambda t: t.replace("l2 = [50.0, 500.0]", "epochs = 3"),
            r"\[\[model\]\] 1: epochs: unknown key; expected one of name, seeds, runs, register, l2",
        ),
        (lambda t: t.replace("l2 = [50.0, 500.0]", "l2 = -1.0"), r"\[\[model\]\] 1: l2: expected"),
        (lambda t: t.replace("seeds = [0, 1, 2]", 'seeds = [0, "x"]'), r"\[\[model\]\] 2: seeds: expected"),
        (
            lambda t: t.replace("seeds = [0, 1, 2]", "seeds = [1, 1]"),
            r"seeds: expected each value of a grid once, found 1 more than once",
        ),
        (
            lambda t: t.replace('name = "Popularity"', 'name = "Popularity"\nseeds = [1]'),
            "Popularity draws no random numbers, so it takes no seeds",
        ),
        (
            lambda t: t.replace('name = "clicks"', 'name = "movielens-100k"'),
            r"\[\[dataset\]\] name: expected each dataset once, found movielens-100k",
        ),
        (
            lambda t: t.replace("[compare]", '[[model]]\nname = "Popularity"\n\n[compare]'),
            r"\[\[model\]\] name: expected each model once, found Popularity",
        ),
        (lambda t: t.replace('name = "ALS"', 'name = "EASE"'), r"\[\[model\]\] 4: runs: EASE is trained by the study"),
        (
            lambda t: t.replace('name = "ALS"', 'name = "EASE(l2=50)"'),
            r"\[\[model\]\] name: 'EASE\(l2=50\)' names a configuration",
        ),
        (
            lambda t: t.replace('clicks = ["def", "ghi"]', 'clicks = ["abc"]'),
            r"\[\[model\]\] runs: expected each run once, found abc more than once",
        ),
        (
            lambda t: t.replace("l2 = [50.0, 500.0]", "l2 = [50, 50.0]"),
            r"\[\[model\]\] 1: expected distinct configurations, found \{'l2': 50\} and \{'l2': 50.0\}",
        ),
        (
            lambda t: t.replace(
                "latent_dim = [8, 16]", f"latent_dim = [8, 16]\nlr = {[0.001 * (i + 1) for i in range(200)]}"
            ),
            r"\[\[model\]\] 2: expected at most 1,000 trainings \(configurations x seeds\) a model, found 1,200",
        ),
        (
            lambda t: t.replace("n_resamples = 999", 'n_resamples = "999"'),
            r"\[compare\]: n_resamples: expected an integer",
        ),
        (lambda t: t.replace("[split]\nseed = 7", "[split]\nseed = -1"), r"study.toml: \[split\]: seed: expected"),
        (
            lambda t: t.replace('name = "movielens-100k"\n', 'name = "movielens-100k"\ncolumns = { user = "u" }\n', 1),
            r"\[\[dataset\]\] 1: columns: movielens-100k is registered",
        ),
        (
            lambda t: t.replace('name = "clicks"', 'name = "pooled"'),
            r"\[\[dataset\]\] 2: name: 'pooled' names the pooled row",
        ),
        (
            lambda t: t.replace(
                'name = "movielens-100k"\n',
                'name = "copy"\npath = "clicks.csv"\ncolumns = { user = "uid", value = "none" }\n'
                'split = { split_mode = "time_split", test_frac = 0.3 }\n',
                1,
            ).replace('movielens-100k = "abc", ', ""),
            r"\[\[dataset\]\] clicks: expected other data or another split than dataset 'copy'",
        ),
        (
            lambda t: 'ray_address = "auto"\n' + t,
            r"study.toml: ray_address: only the ray executor joins a Ray cluster, found 'auto' with executor",
        ),
        (
            lambda t: t.replace("n_resamples = 999", 'n_resamples = 999\nrepresentative_seed = "7"'),
            r"\[compare\]: representative_seed: expected a seed of a seeded model \(0, 1, 2\), found '7'",
        ),
        (
            lambda t: t.replace('path = "clicks.csv"', 'path = "nope.csv"'),
            r"\[\[dataset\]\] 2: path: expected your log's .csv or .parquet file, found no file",
        ),
        (
            lambda t: t.replace('name = "movielens-100k"\n', 'name = "netflix"\n', 1),
            r"\[\[dataset\]\] 1: name: expected a registered dataset",
        ),
        (lambda t: t.replace('user = "uid"', 'usr = "uid"'), r"\[\[dataset\]\] 2.columns: usr: unknown key"),
        (lambda t: t.replace("test_frac = 0.3", "test_frac = 1.5"), r"\[\[dataset\]\] 2.split: test_frac: expected"),
        (
            lambda t: t.replace('reference = "Popularity"', 'reference = "EASE"'),
            r"reference: expected one of the candidates .*EASE is one candidate per configuration: "
            r"name one of \['EASE\(l2=50\)', 'EASE\(l2=500\)'\]",
        ),
        (
            lambda t: t.replace('reference = "Popularity"', 'reference = "Nope"'),
            r"\[compare\]: reference: expected one of the candidates",
        ),
        (
            lambda t: t.replace('primary = "ndcg@100"', 'primary = "mrr@20"'),
            r"\[compare\]: primary: expected one of the scored metrics",
        ),
        (
            lambda t: t.replace("clicks = [", "netflix = ["),
            r"ALS runs: expected datasets of the study \(clicks, movielens-100k\), found 'netflix'",
        ),
        (
            lambda t: t.replace('name = "ALS"\n', 'name = "ALS2"\n').replace(
                'runs = { movielens-100k = "abc", clicks = ["def", "ghi"] }', ""
            ),
            r"\[\[model\]\] 4: name: expected a registered model .* or runs or recommendations to import, found 'ALS2'",
        ),
        (
            lambda t: t.replace(
                'runs = { movielens-100k = "abc", clicks = ["def", "ghi"] }',
                'recommendations = { clicks = "x.parquet" }',
            ),
            r"\[\[model\]\] 4.recommendations: clicks: expected a .parquet, .csv or TREC file of lists, found no file",
        ),
        (
            lambda t: t.replace(
                'runs = { movielens-100k = "abc", clicks = ["def", "ghi"] }',
                'recommendations = { netflix = "clicks.csv" }',
            ),
            r"ALS recommendations: expected datasets of the study \(clicks, movielens-100k\), found 'netflix'",
        ),
        (
            lambda t: t.replace(
                'name = "Popularity"\n', 'name = "Popularity"\nrecommendations = { clicks = "clicks.csv" }\n'
            ),
            r"\[\[model\]\] 3: recommendations: unknown key; expected one of name, seeds, runs",
        ),
        (
            lambda t: "split = 3\n" + t.replace("[split]\nseed = 7\n", ""),
            r"study.toml: \[split\]: expected a table, found 3",
        ),
        (lambda t: "model = 3\n" + t[: t.index("[[model]]")], "study.toml: model: expected an array of tables"),
        (lambda t: t + "\n[[model\n", "study.toml: expected a TOML file, found"),
    ],
)
def test_a_mistake_is_refused_naming_the_file_and_the_key(tmp_path, edit, message):
    with pytest.raises(ValueError, match=message):
        read_study(_write(tmp_path, edit(GOOD)))


def test_bytes_that_are_not_text_are_refused(tmp_path):
    path = tmp_path / "study.toml"
    path.write_bytes(b"name = '\xff'\n")
    with pytest.raises(ValueError, match="study.toml: expected UTF-8 text"):
        read_study(path)


def test_the_flags_make_the_one_dataset_study():
    plan = shorthand_plan(
        dataset="movielens-100k",
        split_seed=3,
        seeds=[0, 1],
        ease={"l2": 500.0},
        elsa={"latent_dim": 8, "epochs": 1, "batch_size": 64, "lr": 0.01, "device": "cpu"},
        comparison=ComparisonSettings(reference="EASE", primary="ndcg@100", metrics=["ndcg@100"]),
    )
    assert [t.run_name for t in plan.trainings()] == ["EASE", "ELSA seed 0", "ELSA seed 1"]
    assert plan.datasets[0].split.seed == 3 and plan.settings.name == "study movielens-100k"
    with pytest.raises(ValueError, match="seeds: expected at least 2 ELSA seeds"):
        shorthand_plan(
            dataset="movielens-100k", split_seed=3, seeds=[0], ease={}, elsa={}, comparison=ComparisonSettings()
        )


def test_the_guide_shows_the_example_study_file_whole():
    import re
    from pathlib import Path

    import tomllib

    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "guide" / "studies.md").read_text(encoding="utf-8")
    (shown,) = re.findall(r"```toml\n(.*?)```", page, flags=re.S)
    assert tomllib.loads(shown) == tomllib.loads((root / "examples" / "study" / "study.toml").read_text())
    for name in [*settings_of(StudySettings), *settings_of(SplitConfig), *settings_of(ComparisonSettings)]:
        assert f"`{name}`" in page, name  # every key the file takes is named


def test_a_model_registered_by_the_study_registers_every_training_of_it(tmp_path):
    text = GOOD.replace('name = "EASE"\n', 'name = "EASE"\nregister = "ease-prod"\n')
    plan = read_study(_write(tmp_path, text))
    registers = {t.model: t.register for t in plan.trainings()}
    assert registers == {"EASE": "ease-prod", "ELSA": None, "Popularity": None}
    with pytest.raises(ValueError, match=r"\[\[model\]\] 1: register: expected a registered model name without / @ :"):
        read_study(_write(tmp_path, GOOD.replace('name = "EASE"\n', 'name = "EASE"\nregister = "a/b"\n')))
