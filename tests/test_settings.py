"""ComparisonSettings (issue 16, point 1) and the argument checks every setting goes through (point 2)."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import numpy as np
import pytest
import yaml

from mlflow_recsys import _validation as validation
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.settings_schema import mlproject_parameters, settings_of
from mlflow_recsys.stats import ComparisonSettings, compare_models, compare_pair, seed_spread
from mlflow_recsys.stats._settings import MAX_RESAMPLES


@pytest.mark.parametrize(("function", "n_settings"), [(compare_models, 16), (compare_pair, 10), (seed_spread, 4)])
def test_the_statistics_defaults_are_the_declared_ones(function, n_settings):
    declared = settings_of(ComparisonSettings)
    signature = inspect.signature(function).parameters
    shared = [name for name in signature if name in declared and name != "metrics"]  # metrics has no default
    assert len(shared) == n_settings  # every statistical keyword of the function is a declared setting
    assert {name: signature[name].default for name in shared} == {name: declared[name][0] for name in shared}


def test_the_mlproject_declares_each_fixed_default_setting_as_the_schema_does():
    """The MLproject's compare entry point declares every setting with a fixed default, in its declared type and
    default, and passes each on as its option; the others are given as further -P options when set."""
    project = yaml.safe_load((Path(__file__).parents[1] / "MLproject").read_text())["entry_points"]["compare"]
    fixed = [name for name, (default, s) in settings_of(ComparisonSettings).items() if default is not None]
    for flag in ("paired_seeds", "relative_margin"):  # flag pairs (--paired-seeds/--independent-seeds): given as -P
        fixed.remove(flag)
    assert project["parameters"] == mlproject_parameters(ComparisonSettings, fixed)
    for name in fixed:
        assert f"--{name.replace('_', '-')} {{{name}}}" in project["command"], name


def test_the_command_line_options_are_the_declared_settings():
    """Each declared setting is an option of compare with its help and default, and the values the options
    give make the same settings object as the keywords."""
    from mlflow_recsys.cli import cli

    compare = cli.commands["compare"]

    options = {p.name: p for p in compare.params}
    for name, (default, declared) in settings_of(ComparisonSettings).items():
        assert options[name].help == declared.help, name
        assert options[name].default == (default if declared.kind == "flag" or default is None else str(default))
    ctx = compare.make_context(
        "compare",
        [
            "--n-resamples",
            "99",
            "--correction",
            "none",
            "--metrics",
            "a, b",
            "--primary",
            "a",
            "--representative-seed",
            "3",
        ],
    )
    given = {name: ctx.params[name] for name in settings_of(ComparisonSettings)}
    assert ComparisonSettings(**given) == ComparisonSettings(
        n_resamples=99, correction=None, metrics=("a", "b"), primary="a", representative_seed="3"
    )
    refused = compare.make_context("compare", ["--n-resamples", "many"]).params
    with pytest.raises(ValueError, match="^n_resamples: expected an integer in \\[1, 1,000,000\\], found 'many'$"):
        ComparisonSettings(**{name: refused[name] for name in settings_of(ComparisonSettings)})


@pytest.mark.parametrize(
    "name, text, value",
    [
        ("n_resamples", " 999 ", 999),
        ("n_resamples", "999.0", 999),  # `mlflow run` knows float parameters only
        ("random_state", "7.0", 7),
        ("confidence_level", "0.9", 0.9),
        ("correction", "none", None),
        ("correction", "bonferroni", "bonferroni"),
        ("correction", "maxt", "maxt"),
        ("random_state", "none", None),
        ("random_state", "7", 7),
        ("paired_seeds", "True", True),
        ("metrics", "ndcg@100,recall@20", ("ndcg@100", "recall@20")),
        ("reference", "EASE", "EASE"),
    ],
)
def test_a_setting_written_as_text_reads_back_as_its_value_and_writes_as_the_same_text(name, text, value):
    declared = settings_of(ComparisonSettings)[name][1]
    assert declared.parse(text, name) == value
    assert declared.parse(declared.text(value), name) == value


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("n_resamples", "9.5", "n_resamples: expected an integer in [1, 1,000,000], found '9.5'"),
        ("n_resamples", "1e400", "n_resamples: expected an integer in [1, 1,000,000], found '1e400'"),
        ("random_state", "nan", "random_state: expected an integer >= 0, found 'nan'"),
        ("confidence_level", "high", "confidence_level: expected a number strictly between 0 and 1, found 'high'"),
        ("paired_seeds", "yes", "paired_seeds: expected True or False, found 'yes'"),
        ("correction", "sidak", "correction: expected one of ('holm', 'bonferroni', 'maxt', None), found 'sidak'"),
    ],
)
def test_text_that_is_no_value_of_the_setting_is_refused_as_written(name, text, message):
    with pytest.raises(ValueError) as refused:
        settings_of(ComparisonSettings)[name][1].parse(text, name)
    assert str(refused.value) == message


NAME = "a non-empty name without control or invisible characters or surrounding blanks"


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("confidence_level", 1.0, "confidence_level: expected a number strictly between 0 and 1, found 1.0"),
        ("confidence_level", True, "confidence_level: expected a number strictly between 0 and 1, found True"),
        ("confidence_level", float("nan"), "confidence_level: expected a number strictly between 0 and 1, found nan"),
        ("n_resamples", 0, "n_resamples: expected an integer in [1, 1,000,000], found 0"),
        ("n_resamples", 99.0, "n_resamples: expected an integer in [1, 1,000,000], found 99.0"),
        ("n_resamples", MAX_RESAMPLES + 1, "n_resamples: expected an integer in [1, 1,000,000], found 1000001"),
        ("alternative", "bigger", "alternative: expected one of ('two-sided', 'greater', 'less'), found 'bigger'"),
        (
            "test_method",
            "z",
            "test_method: expected one of ('randomization', 'bootstrap', 't', 'wilcoxon', 'sign'), found 'z'",
        ),
        ("interval_method", "bc", "interval_method: expected one of ('percentile', 'bca'), found 'bc'"),
        ("zero_method", "pratt ", "zero_method: expected one of ('wilcox', 'pratt', 'zsplit'), found 'pratt '"),
        ("family", "every", "family: expected one of ('primary', 'all'), found 'every'"),
        ("correction", "sidak", "correction: expected one of ('holm', 'bonferroni', 'maxt', None), found 'sidak'"),
        ("random_state", -1, "random_state: expected an integer >= 0, found -1"),
        ("paired_seeds", "yes", "paired_seeds: expected True or False, found 'yes'"),
        ("reference", " ", "reference: expected " + NAME + ", of at most 8,000 characters, found ' '"),
        ("reference", "EASE\n", "reference: expected " + NAME + ", of at most 8,000 characters, found 'EASE\\n'"),
        ("primary", "ndcg@100\t", "primary: expected " + NAME + ", found 'ndcg@100\\t'"),
        ("representative_seed", "", "representative_seed: expected " + NAME + ", found ''"),
        ("representative_seed", " 5", "representative_seed: expected " + NAME + ", found ' 5'"),
        ("reference", "EA\u200bSE", "reference: expected a non-empty name without control or invisible"),
        ("reference", "EASE\u2028", "reference: expected a non-empty name without control or invisible"),
        ("reference", "E\udcffASE", "reference: expected a non-empty name without control or invisible"),
        ("reference", "E" * 8001, "reference: expected " + NAME + ", of at most 8,000 characters"),
        ("metrics", {"ndcg@100"}, "metrics: expected a metric key or a list of keys (in order), found a set"),
        ("metrics", 5, "metrics: expected a metric key or a list of keys, found int"),
        ("metrics", [], "metrics: expected at least one metric key, found none"),
        ("metrics", ["a", "a"], "metrics: expected distinct keys, found duplicates in ['a', 'a']"),
    ],
)
def test_each_setting_out_of_range_is_refused_naming_it(field, value, message):
    with pytest.raises(ValueError) as refused:
        ComparisonSettings(**{field: value})
    assert str(refused.value).startswith(message)


def test_settings_that_contradict_each_other_are_refused():
    with pytest.raises(ValueError, match=r"^primary: expected one of the compared metrics \['a'\], found 'b'$"):
        ComparisonSettings(metrics=["a"], primary="b")
    with pytest.raises(ValueError, match=r"^reference: a one-sided alternative \('greater'\) needs a reference"):
        ComparisonSettings(alternative="greater")
    with pytest.raises(ValueError, match=r"^metrics: expected metric keys \(str\), found \[3\]$"):
        ComparisonSettings(metrics=["a", 3])


def test_values_are_kept_in_one_canonical_form_and_cannot_change():
    settings = ComparisonSettings(
        metrics="ndcg@100", n_resamples=np.int64(999), confidence_level=np.float32(0.5), representative_seed=2
    )
    assert settings.metrics == ("ndcg@100",) and settings.representative_seed == "2"
    assert type(settings.n_resamples) is int and type(settings.confidence_level) is float
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.n_resamples = 5  # type: ignore[misc]
    assert settings.replace(n_resamples=99).n_resamples == 99 and settings.n_resamples == 999
    with pytest.raises(ValueError, match="n_resamples"):
        settings.replace(n_resamples=0)
    assert hash(settings) == hash(
        ComparisonSettings(metrics=("ndcg@100",), n_resamples=999, confidence_level=0.5, representative_seed="2")
    )


def test_params_hold_every_field_as_text():
    params = ComparisonSettings(metrics=["ndcg@100", "recall@20"], correction=None).to_params()
    assert list(params) == [f.name for f in dataclasses.fields(ComparisonSettings)]
    assert params["metrics"] == "ndcg@100,recall@20" and params["correction"] == "none"
    assert params["n_resamples"] == "9999" and params["paired_seeds"] == "False"


def test_compare_gives_compare_models_under_the_same_settings():
    rng = np.random.default_rng(4)
    ids = np.arange(40)
    results = {
        name: EvaluationResult.from_per_user(
            {"m": rng.random(40), "k": rng.random(40)}, sample_ids=ids, targets_fingerprint="fp"
        )
        for name in ("A", "B", "C")
    }
    settings = ComparisonSettings(
        reference="A",
        metrics=["m", "k"],
        primary="m",
        n_resamples=999,
        random_state=7,
        test_method="bootstrap",
        interval_method="bca",
        correction="bonferroni",
    )
    direct = compare_models(
        results,
        metrics=["m", "k"],
        reference="A",
        primary="m",
        n_resamples=999,
        random_state=7,
        test_method="bootstrap",
        interval_method="bca",
        correction="bonferroni",
    )
    assert settings.compare(results).to_frame().equals(direct.to_frame())
    with pytest.raises(ValueError, match="^metrics: expected the metric keys to compare, found None$"):
        ComparisonSettings().compare(results)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: validation.integer(2.0, "k", minimum=1), "k: expected an integer >= 1, found 2.0"),
        (lambda: validation.integer(True, "k"), "k: expected an integer, found True"),
        (lambda: validation.integer(11, "k", minimum=0, maximum=10), "k: expected an integer in [0, 10], found 11"),
        (lambda: validation.number(0, "lr", above=0), "lr: expected a finite number > 0, found 0"),
        (lambda: validation.number(float("inf"), "l2", at_least=0), "l2: expected a finite number >= 0, found inf"),
        (lambda: validation.number(1, "frac", at_least=0, below=1), "frac: expected a number in [0, 1), found 1"),
        (lambda: validation.one_of([], "x", ("a",)), "x: expected one of ('a',), found []"),
        (lambda: validation.ordered("01", "seeds", "seeds"), "seeds: expected seeds (in order), found '01'"),
        (lambda: validation.ordered({0, 1}, "seeds", "seeds"), "seeds: expected seeds (in order), found {0, 1}"),
        (lambda: validation.ordered({"a": 1}, "ids", "ids"), "ids: expected ids (in order), found {'a': 1}"),
        (lambda: validation.ordered(3, "ids", "ids"), "ids: expected ids (in order), found 3"),
        (
            lambda: validation.one_of("x" * 500, "name", ("a",)),
            "name: expected one of ('a',), found " + repr("x" * 500)[:199] + "…",
        ),
    ],
)
def test_the_checks_say_name_expected_and_found(call, message):
    with pytest.raises(ValueError) as refused:
        call()
    assert str(refused.value) == message


def test_the_checks_return_the_value_in_its_canonical_type():
    assert validation.integer(np.int32(3), "k", minimum=1) == 3 and type(validation.integer(np.int32(3), "k")) is int
    assert type(validation.number(np.float32(0.5), "p", above=0, below=1)) is float
    assert validation.one_of("b", "x", ("a", "b")) == "b"
    assert validation.ordered((i for i in (2, 1)), "s", "s") == [2, 1] and validation.ordered(
        np.arange(2), "s", "s"
    ) == [0, 1]


@pytest.mark.parametrize(
    "raw, read",
    [("", 8), ("  ", 8), ("1", 1), (" 3 ", 3), ("3\n", 3), ("007", 7), ("64", 64)]
    + [(bad, None) for bad in ("0", "65", "-1", "+3", "1.5", "1e1", "0x10", "abc", "\u0663", "\uff11", "\u00b2")]
    + [("9" * 5000, None)],
)
def test_a_whole_number_setting_takes_ascii_digits_only(monkeypatch, raw, read):
    monkeypatch.setenv("MLFLOW_RECSYS_SOME_SETTING", raw)
    if read is not None:
        assert validation.whole_number_env("MLFLOW_RECSYS_SOME_SETTING", 8, 64) == read
        return
    with pytest.raises(ValueError) as caught:
        validation.whole_number_env("MLFLOW_RECSYS_SOME_SETTING", 8, 64)
    message = str(caught.value)
    assert message.startswith("MLFLOW_RECSYS_SOME_SETTING: expected a whole number from 1 to 64 (ASCII digits), found ")
    assert message.endswith(repr(raw.strip())) or (len(raw) > 200 and len(message) < 400)
