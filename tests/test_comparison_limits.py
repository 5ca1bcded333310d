"""Issue 12, kinds 2 and 3: MLflow's limits, and mistakes refused before any run exists.

Every comparison here runs on copies of two real training runs (EASE and Popularity on MovieLens-100k) in a
temporary SQLite store; the copies differ in their model names, tags or per-user files.
"""

import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

import mlflow_recsys
from conftest import trained_copy
from mlflow_recsys import load_comparison_settings, search_comparisons
from mlflow_recsys._digests import shorten
from mlflow_recsys.cli import cli
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.report._escaping import escape_markdown
from mlflow_recsys.report._notes import NOTE_NAME_WIDTH, NOTE_ROWS, note_name, run_note
from mlflow_recsys.stats import ComparisonSettings, compare_models
from mlflow_recsys.tracking import RunSelectionError, TrainConfig, compare_runs, run_train
from mlflow_recsys.tracking import _runs as runs_module
from mlflow_recsys.tracking._candidates import SEED_FIELDS
from mlflow_recsys.tracking._comparison_run import source_runs_tag
from mlflow_recsys.tracking._limits import (
    MAX_KEY_LENGTH,
    MAX_PARAM_LENGTH,
    MAX_RUN_NAME_LENGTH,
    MAX_TAG_LENGTH,
)
from mlflow_recsys.tracking._naming import model_label, pair_label

METRICS = ("ndcg@100", "recall@20", "mrr@20")
FAST = dict(n_resamples=199)

pytestmark = pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.LowResamplesWarning")


@pytest.fixture(scope="module")
def store(trained_store, tmp_path_factory):
    """EASE and Popularity evaluated on three metrics (the notes' row counts need them), on the shared split."""
    with trained_copy(trained_store, tmp_path_factory.mktemp("limits-store"), "limits") as trained:
        checkpoint = trained["checkpoint"]
        ease, pop = (
            run_train(checkpoint, TrainConfig(m, metrics=METRICS), log_model=False) for m in ("EASE", "Popularity")
        )
        yield {**trained, "ease": ease, "pop": pop}


@pytest.fixture
def experiment(store, tmp_path):
    """A fresh experiment per test, so run counts and searches see only that test's runs."""
    experiment_id = mlflow.create_experiment(tmp_path.name, artifact_location=(tmp_path / "art").as_uri())
    return experiment_id


def _copies(copy_run, store, tmp_path, experiment_id, names, source="pop", tags=None):
    """Copies of a run under other names, each with its per-user values scaled differently (so none is a tie)."""

    def scaled(factor):
        return lambda frame: frame.assign(**{m: frame[m] * factor for m in METRICS})

    return [
        copy_run(
            store[source],
            tmp_path / f"copy{i}",
            model=name,
            experiment_id=experiment_id,
            tags=tags,
            edit_frame=scaled(1 - 0.05 * i),
        )
        for i, name in enumerate(names)
    ]


def _runs_in(experiment_id):
    return MlflowClient().search_runs([experiment_id], run_view_type=3, max_results=1000)


def _comparison_runs():
    experiments = [e.experiment_id for e in MlflowClient().search_experiments(view_type=3)]
    return MlflowClient().search_runs(
        experiments, filter_string="tags.`recsys.role` = 'comparison'", run_view_type=3, max_results=1000
    )


def _artifact_names(run_id):
    return sorted(f.path for f in MlflowClient().list_artifacts(run_id))


# -- kind 2: MLflow's limits --------------------------------------------------------------------------------


def test_long_model_names_give_metric_keys_within_250_characters_with_a_mapping(store, experiment, tmp_path, copy_run):
    first, second = "A" * 110, "B" * 112
    ids = [store["ease"]] + _copies(copy_run, store, tmp_path, experiment, [first, second])
    outcome = compare_runs(
        run_ids=ids, settings=ComparisonSettings(metrics=["ndcg@100"], **FAST), output_experiment=None
    )
    run = MlflowClient().get_run(outcome.run_id)
    assert run.info.status == "FINISHED"
    logged = run.data.metrics
    assert logged and max(map(len, logged)) <= MAX_KEY_LENGTH
    raw = f"{second}.vs.{first}.ndcg_at_100.adjusted_p_value"
    assert len(raw) > MAX_KEY_LENGTH and raw not in logged
    assert any(k.startswith(raw[:200]) and k != raw for k in logged)  # a readable prefix and a hash
    mapping = json.loads(
        Path(mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path="metric_names.json")).read_text()
    )
    assert {m["mlflow_metric"] for m in mapping} == set(logged)
    for m in mapping:
        row = outcome.report.get(m["metric"], m["candidate"], m["baseline"])
        if not m["field"].startswith("seeds."):
            assert logged[m["mlflow_metric"]] == pytest.approx(getattr(row, m["field"]), abs=0, rel=1e-12)
    # Every hypothesis has its own six metrics: three pairs x one metric x six fields.
    assert len(logged) == 3 * 6


def test_names_that_sanitise_alike_keep_their_own_metrics(store, experiment, tmp_path, copy_run):
    ids = [store["ease"]] + _copies(copy_run, store, tmp_path, experiment, ["ELSA+", "ELSA_", "a//b", "x/../y"])
    # Different per-user values per model, so an overwritten metric would show.
    outcome = compare_runs(run_ids=ids, settings=ComparisonSettings(reference="EASE", metrics=["ndcg@100"], **FAST))
    logged = MlflowClient().get_run(outcome.run_id).data.metrics
    labels = {name: model_label(name) for name in ["ELSA+", "ELSA_", "a//b", "x/../y"]}
    assert len(set(labels.values())) == 4 and labels["ELSA_"] == "ELSA_"
    for name, label in labels.items():
        assert "/" not in label and ".." not in label
        key = f"{label}.vs.EASE.ndcg_at_100.difference"
        assert logged[key] == outcome.report.get("ndcg@100", name).difference
    assert len(logged) == 4 * 6


def test_names_joined_alike_keep_their_own_metric_names(store, experiment, tmp_path, copy_run):
    # Without a reference, "Z_vs_M" against "A" and "Z" against "M_vs_A" both logged "Z_vs_M_vs_A.<metric>" once,
    # and were refused; a "." joins the labels now, and no label holds one.
    names = ["A", "M_vs_A", "Z", "Z_vs_M"]
    ids = _copies(copy_run, store, tmp_path, experiment, names)
    outcome = compare_runs(run_ids=ids, settings=ComparisonSettings(metrics=["ndcg@100"], **FAST))
    logged = MlflowClient().get_run(outcome.run_id).data.metrics
    assert len(logged) == 6 * 6  # six pairs, six fields each
    assert logged["Z_vs_M.vs.A.ndcg_at_100.difference"] == outcome.report.get("ndcg@100", "Z_vs_M", "A").difference
    assert logged["Z.vs.M_vs_A.ndcg_at_100.difference"] == outcome.report.get("ndcg@100", "Z", "M_vs_A").difference


def _seed_pairs_of(per_seed_or_summary):
    return sorted(set(zip(per_seed_or_summary["baseline"], per_seed_or_summary["candidate"], strict=True)))


@pytest.mark.filterwarnings("ignore::mlflow_recsys.stats.FewSeedsWarning")
def test_per_pair_results_are_keyed_by_the_pair_not_by_joined_names(store, experiment, tmp_path, copy_run):
    # Without a reference, "Z" against "Y vs X" and "Z vs Y" against "X" both read "Z vs Y vs X": keyed by that
    # text, one seed table and its seeds.* metrics were lost and the run still FINISHED.
    seeded = [("X", "0"), ("X", "1"), ("Y vs X", None), ("Z", "0"), ("Z", "1"), ("Z vs Y", None)]
    ids = [
        copy_run(
            store["pop"],
            tmp_path / f"copy{i}",
            model=name,
            experiment_id=experiment,
            tags={"recsys.seed": seed} if seed else None,
            edit_frame=lambda f, i=i: f.assign(**{m: f[m] * (1 - 0.04 * i) for m in METRICS}),
        )
        for i, (name, seed) in enumerate(seeded)
    ]
    outcome = compare_runs(run_ids=ids, settings=ComparisonSettings(metrics=["ndcg@100"], **FAST))
    pairs = [("X", "Y vs X"), ("X", "Z"), ("X", "Z vs Y"), ("Y vs X", "Z"), ("Z", "Z vs Y")]  # a side seeded
    assert list(outcome.seed_spreads) == pairs
    for (base, cand), spread in outcome.seed_spreads.items():
        assert _seed_pairs_of(spread.to_frame()) == [(base, cand)]
    run = MlflowClient().get_run(outcome.run_id)
    assert run.info.status == "FINISHED"

    def artifact(name):
        return mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path=name)

    assert _seed_pairs_of(pd.read_csv(artifact("seed_spread.csv"))) == pairs
    per_seed = pd.read_csv(artifact("seed_spread_per_seed.csv"), keep_default_na=False)
    assert _seed_pairs_of(per_seed) == pairs
    labels = dict(
        zip(zip(per_seed["baseline"], per_seed["candidate"], strict=True), per_seed["comparison"], strict=True)
    )
    assert len(set(labels.values())) == 5
    assert labels["Y vs X", "Z"] == '"Z" vs "Y vs X"' and labels["X", "Z vs Y"] == '"Z vs Y" vs "X"'
    assert labels["X", "Z"] == "Z vs X"
    # Every seed table's every field is a metric of its own, with the table's value.
    mapping = json.loads(Path(artifact("metric_names.json")).read_text())
    seed_rows = [m for m in mapping if m["field"].startswith("seeds.")]
    assert sorted({(m["baseline"], m["candidate"]) for m in seed_rows}) == pairs
    for m in seed_rows:
        row = outcome.seed_spreads[m["baseline"], m["candidate"]].to_frame().iloc[0]
        assert run.data.metrics[m["mlflow_metric"]] == pytest.approx(row[m["field"].removeprefix("seeds.")], rel=1e-12)
    assert len(seed_rows) == sum(  # every finite value of every table
        int(pd.notna(s.to_frame().iloc[0][f])) for s in outcome.seed_spreads.values() for f in SEED_FIELDS
    )
    z_against_yx = f"Z.vs.{model_label('Y vs X')}.ndcg_at_100.seeds.mean_difference"
    assert run.data.metrics[z_against_yx] == outcome.seed_spreads["Y vs X", "Z"].to_frame()["mean_difference"][0]
    html = Path(artifact("report.html")).read_text()
    assert html.count("<h3>&quot;Z&quot; vs &quot;Y vs X&quot;</h3>") == 1
    assert html.count("<h3>&quot;Z vs Y&quot; vs &quot;X&quot;</h3>") == 1


def test_notes_hold_what_fits_and_never_end_mid_row(store, experiment, tmp_path, copy_run):
    names = [f"candidate-{i:02d}-" + "x" * 150 for i in range(20)]
    ids = [store["ease"]] + _copies(copy_run, store, tmp_path, experiment, names)
    outcome = compare_runs(run_ids=ids, settings=ComparisonSettings(reference="EASE", primary="ndcg@100", **FAST))
    note = MlflowClient().get_run(outcome.run_id).data.tags["mlflow.note.content"]
    assert len(note) <= MAX_TAG_LENGTH
    # No model has seeds, so no seed table was logged and the notes point to none.
    assert note.rstrip().endswith("report.md and report.csv.") and "seed_spread" not in note
    assert "seed_spread.csv" not in _artifact_names(outcome.run_id)
    table = [line for line in note.splitlines() if line.startswith("|")]
    assert table and all(line.endswith("|") and line.count("|") == 8 for line in table)
    shown = len(table) - 2
    assert shown == NOTE_ROWS and f"{60 - shown} more of the 60 rows are in report.md." in note
    report_md = Path(mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path="report.md")).read_text()
    assert all(escape_markdown(name) in report_md for name in names)


def test_source_runs_tag_lists_ids_while_they_fit_and_otherwise_a_count_and_digest():
    few = [f"{i:032x}" for i in range(10)]
    assert source_runs_tag(few) == ",".join(few)
    many = [f"{i:032x}" for i in range(250)]
    tag = source_runs_tag(many)
    assert len(",".join(many)) > MAX_TAG_LENGTH >= len(tag)
    assert tag.startswith("250 runs, sha256 ") and "source_runs.json" in tag


def test_source_runs_json_and_count_tag_list_every_compared_run(store, experiment, tmp_path, copy_run):
    ids = [store["ease"]] + _copies(copy_run, store, tmp_path, experiment, ["P1", "P2"])
    outcome = compare_runs(run_ids=ids, settings=ComparisonSettings(reference="EASE", metrics=["ndcg@100"], **FAST))
    run = MlflowClient().get_run(outcome.run_id)
    assert run.data.tags["recsys.n_source_runs"] == "3"
    assert run.data.tags["recsys.source_runs"] == ",".join(ids)
    listed = json.loads(
        Path(mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path="source_runs.json")).read_text()
    )
    assert listed["run_ids"] == ids and listed["by_model"]["P2"] == {"none": ids[2]}
    assert run.data.params["metrics"] == "ndcg@100" and run.data.params["compared_metrics"] == "ndcg@100"


def test_a_reference_name_longer_than_a_param_goes_whole_to_settings_json(store, experiment, tmp_path, copy_run):
    long_name = "R" * 7000
    ids = _copies(copy_run, store, tmp_path, experiment, [long_name, "Other"])
    outcome = compare_runs(run_ids=ids, settings=ComparisonSettings(reference=long_name, metrics=["ndcg@100"], **FAST))
    run = MlflowClient().get_run(outcome.run_id)
    assert run.info.status == "FINISHED"
    assert all(len(v) <= MAX_PARAM_LENGTH for v in run.data.params.values())
    assert all(len(k) <= MAX_KEY_LENGTH for k in [*run.data.params, *run.data.tags])
    assert all(len(v) <= MAX_TAG_LENGTH for v in run.data.tags.values())
    assert run.data.params["reference"].startswith("7,000 characters, sha256 ")
    assert len(run.info.run_name) <= MAX_RUN_NAME_LENGTH and run.info.run_name.startswith("Other vs RRR")
    settings = json.loads(
        Path(mlflow.artifacts.download_artifacts(run_id=outcome.run_id, artifact_path="settings.json")).read_text()
    )
    assert settings["reference"] == long_name
    assert all(len(k) <= MAX_KEY_LENGTH for k in run.data.metrics)
    # Read back whole, where the param holds only its length and hash.
    assert load_comparison_settings(outcome.run_id).reference == long_name
    assert set(search_comparisons(experiment)["reference"]) == {long_name}


def test_selection_by_experiment_reads_every_page(store, experiment, tmp_path, copy_run, monkeypatch):
    ids = _copies(copy_run, store, tmp_path, experiment, ["M1", "M2", "M3", "M4", "M5"])
    monkeypatch.setattr(runs_module, "SEARCH_PAGE_SIZE", 2)
    selected = runs_module.select_runs(experiment=experiment)
    assert sorted(r.info.run_id for r in selected) == sorted(ids)
    outcome = compare_runs(
        experiment=experiment, settings=ComparisonSettings(reference="M1", metrics=["ndcg@100"], **FAST)
    )
    assert sorted(outcome.source_runs) == ["M1", "M2", "M3", "M4", "M5"]


# -- kind 3: mistakes are refused before a run exists -------------------------------------------------------


MISTAKES = {
    "metric typo": (["--metrics", "ndgc@100"], "metrics: expected metric keys"),
    "metric not evaluated": (["--metrics", "ndcg@10"], "metrics: not evaluated by every run"),
    "primary typo": (["--primary", "ndcg@1000"], "primary: expected one of the compared metrics"),
    "primary not a key": (
        ["--primary", "nosuchmetric"],
        f"primary: expected one of the compared metrics {sorted(METRICS)}, found 'nosuchmetric'",
    ),
    "reference typo": (["--reference", "EASY"], "reference: expected one of the compared models"),
    "seed typo": (["--representative-seed", "7"], "representative_seed: expected a seed of a seeded model"),
    "no resamples": (["--n-resamples", "0"], "n_resamples: expected an integer in [1, 1,000,000], found 0"),
    "too many resamples": (["--n-resamples", "100000000"], "n_resamples: expected an integer in [1, 1,000,000]"),
    "level in percent": (["--confidence-level", "95"], "confidence_level: expected a number strictly between"),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_cli_mistakes_leave_no_run_and_no_experiment(store, experiment, tmp_path, copy_run, mistake):
    args, message = MISTAKES[mistake]
    ids = [store["ease"]] + _copies(copy_run, store, tmp_path, experiment, ["Pop"])
    before = len(_comparison_runs())
    new_experiment = f"never-made-{mistake.replace(' ', '-')}"
    result = CliRunner().invoke(cli, ["compare", *ids, "--output-experiment", new_experiment, *args])
    assert result.exit_code == 1, result.output
    assert message in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in result.output
    assert len(_comparison_runs()) == before
    assert mlflow.get_experiment_by_name(new_experiment) is None
    assert mlflow.active_run() is None


def test_selection_mistakes_are_refused_before_a_run(store, experiment, tmp_path, copy_run):
    client = MlflowClient()
    ease = store["ease"]
    pop, other_split, deleted = _copies(copy_run, store, tmp_path, experiment, ["Pop", "Pop2", "Pop3"])
    client.set_tag(other_split, "recsys.split_digest", "0" * 64)
    client.delete_run(deleted)
    twin = copy_run(ease, tmp_path / "twin", model="EASE", experiment_id=experiment)
    before = len(_comparison_runs())
    cases = [
        (dict(), r"^runs: expected exactly one of run ids, a compare URL or an experiment \(\+ filter\), found none$"),
        (dict(run_ids=[ease]), "expected at least two models"),
        (dict(run_ids=[ease, pop, pop]), "expected distinct run ids"),
        (dict(run_ids=[ease, other_split]), "not evaluated on the same split"),
        (dict(run_ids=[ease, deleted]), "deleted runs"),
        (dict(run_ids=[ease, twin, pop]), "are both EASE with seed none"),
        (dict(run_ids=[ease, pop], output_experiment="x" * 501), "output_experiment: expected a non-empty name"),
        # Arguments of the wrong type are refused by name, not by a TypeError from deep inside.
        (dict(run_ids=[1, 2]), r"^run_ids: expected run ids as strings, found 1$"),
        (dict(run_ids=5), r"^run_ids: expected a list of run ids, found 5$"),
        (dict(experiment=5), r"^experiment: expected a str or None, found 5$"),
        (dict(experiment=str(experiment), filter_string=3), r"^filter_string: expected a str or None, found 3$"),
        (dict(compare_url=3), r"^compare_url: expected a str or None, found 3$"),
        (dict(run_ids=[ease, pop], output_experiment=5), r"^output_experiment: expected a non-empty name without"),
        (dict(run_ids=[ease, pop], output_experiment="x\ny"), r"without control or invisible.*found 'x\\ny'$"),
        (dict(run_ids=[ease, pop], output_experiment="a\u202eb"), r"^output_experiment: expected a non-empty name"),
        (dict(run_ids=[ease, pop], output_experiment="a\udcffb"), r"^output_experiment: expected a non-empty name"),
        (dict(experiment="a\udcffb"), r"^experiment: expected UTF-8 text"),
        (dict(run_ids=np.array([ease, pop, pop])), "expected distinct run ids"),
        (dict(run_ids={ease, pop}), r"^run_ids: expected a list of run ids \(in order\), found a set"),
    ]
    for kwargs, message in cases:
        with pytest.raises((RunSelectionError, ValueError), match=message):
            compare_runs(settings=ComparisonSettings(metrics=["ndcg@100"], **FAST), **kwargs)
        assert mlflow.active_run() is None
    with pytest.raises(TypeError, match=r"^on_stage: expected a callable.*, found 'x'$"):
        compare_runs(run_ids=[ease, pop], on_stage="x")
    assert len(_comparison_runs()) == before
    assert mlflow.get_experiment_by_name("x\ny") is None


def test_the_output_experiment_is_found_by_name_or_by_id(store, experiment, tmp_path, copy_run):
    # A new name is made into an experiment: tests/test_run_selection.py does so on a server, whose artifact root
    # is its own (here, one would be the working folder's ./mlruns).
    ids = [store["ease"]] + _copies(copy_run, store, tmp_path, experiment, ["Pop"])
    settings = ComparisonSettings(metrics=["ndcg@100"], **FAST)
    other = mlflow.create_experiment(f"{tmp_path.name}-other", artifact_location=(tmp_path / "other").as_uri())
    by_name, by_id = (
        compare_runs(run_ids=ids, settings=settings, output_experiment=which)
        for which in (f"{tmp_path.name}-other", other)
    )
    assert [MlflowClient().get_run(o.run_id).info.experiment_id for o in (by_name, by_id)] == [other, other]
    assert mlflow.get_experiment_by_name(other) is None  # the id named an experiment: none was made


def test_a_failure_that_needs_the_artifacts_is_a_failed_run_without_results(store, experiment, tmp_path, copy_run):
    broken = copy_run(
        store["pop"],
        tmp_path / "broken",
        model="Broken",
        experiment_id=experiment,
        edit_frame=lambda f: f.assign(**{"ndcg@100": np.full(len(f), 45.0)}),
    )
    before = {r.info.run_id for r in _comparison_runs()}
    with pytest.raises(ValueError):
        compare_runs(run_ids=[store["ease"], broken], settings=ComparisonSettings(metrics=["ndcg@100"], **FAST))
    assert mlflow.active_run() is None  # the failed run was ended in this process too
    failed = [r for r in _comparison_runs() if r.info.run_id not in before]
    assert len(failed) == 1
    run = failed[0]
    assert run.info.status == "FAILED"
    assert "ndcg@100" in run.data.tags["recsys.error"]
    assert run.data.metrics == {} and _artifact_names(run.info.run_id) == []


def test_notes_cut_long_names_and_keep_the_result_sentences():
    # Twelve candidates against a 7,000-character reference: each result sentence repeats the name, cut.
    rng = np.random.default_rng(1)
    reference = "R" * 7000
    results = {reference: EvaluationResult.from_per_user({"ndcg@100": rng.random(50)}, targets_fingerprint="x")}
    for i in range(12):
        results[f"C{i}"] = EvaluationResult.from_per_user({"ndcg@100": rng.random(50)}, targets_fingerprint="x")
    report = compare_models(results, metrics="ndcg@100", reference=reference, n_resamples=199)
    note = run_note(report, {}, "ndcg@100")
    rows = [line for line in note.splitlines() if line.startswith("| ndcg@100 |")]
    assert len(note) <= MAX_TAG_LENGTH and len(rows) == NOTE_ROWS
    assert all(f"| {note_name(reference)} |" in row for row in rows) and len(note_name(reference)) <= NOTE_NAME_WIDTH
    assert "R" * 100 not in note and note.count("scored differently).") >= 1


def test_every_refusal_under_the_compare_entry_point_leaves_its_run_with_the_same_tags(
    store, experiment, tmp_path, copy_run, monkeypatch
):
    ids = [store["ease"]] + _copies(copy_run, store, tmp_path, experiment, ["Pop"])
    client = MlflowClient()
    mlflow.set_experiment(experiment_id=experiment)  # as `mlflow run` sets MLFLOW_EXPERIMENT_ID
    refusals = {  # refused by click, by the settings, by the selection (in the command), by the selection (Python)
        "option": (["compare", *ids, "--test-method", "nope"], "'nope' is not one of 'randomization'"),
        "setting": (["compare", *ids, "--n-resamples", "0"], "n_resamples: expected an integer in [1, 1,000,000]"),
        "selection": (["compare", "--experiment", "no-such-experiment"], "no-such-experiment"),
        "python": (None, "reference: expected one of the compared models"),
    }
    found = {}
    for kind, (args, reason) in refusals.items():
        # What `mlflow run -e compare` makes before the command starts: a RUNNING run without a recsys.role.
        created = client.create_run(experiment)
        entry, name = created.info.run_id, created.info.run_name
        monkeypatch.setenv("MLFLOW_RUN_ID", entry)
        monkeypatch.delenv("MLFLOW_RECSYS_COMMAND", raising=False)  # what the command sets for its process
        if args is None:
            with pytest.raises(RunSelectionError, match=reason):
                compare_runs(run_ids=ids, settings=ComparisonSettings(reference="Nope", n_resamples=99))
        else:
            result = CliRunner().invoke(cli, args)
            assert result.exit_code in (1, 2) and reason in result.output, result.output
        assert mlflow.active_run() is None
        run = client.get_run(entry)
        assert run.info.status == "FAILED" and run.data.metrics == {} and _artifact_names(entry) == []
        assert reason in run.data.tags["recsys.error"], kind
        tags = {k: v for k, v in run.data.tags.items() if k not in ("recsys.error", "mlflow.runName")}
        found[kind] = (run.info.run_name == name, tags)  # the name `mlflow run` gave it stays
    assert found["setting"][1]["recsys.role"] == "comparison"
    # The run context provider's tags come with the command only, as on every run the command makes.
    commands = {kind: tags.pop("recsys.command", None) for kind, (_, tags) in found.items()}
    assert commands == {"option": "compare", "setting": "compare", "selection": "compare", "python": None}
    versions = {tags.pop("recsys.package_version", None) for kind, (_, tags) in found.items() if kind != "python"}
    assert versions == {mlflow_recsys.__version__}
    assert all(named == found["setting"] for named in found.values()), found


@pytest.mark.parametrize(
    "args, role",
    [
        (["split", "--seed", "abc"], "split"),
        (["train", "--model", "EASE"], "train"),  # no --checkpoint: click's refusal
        (["main", "--seeds", "x"], "main"),
        (["study", "--seeds", "x"], "main"),
    ],
)
def test_a_refused_step_under_mlflow_run_is_a_failed_run_of_its_role(experiment, monkeypatch, args, role):
    client = MlflowClient()
    created = client.create_run(experiment)
    entry = created.info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", entry)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (1, 2)
    run = client.get_run(entry)
    assert run.info.status == "FAILED" and run.info.run_name == created.info.run_name  # the name it was given
    assert run.data.tags["recsys.role"] == role and run.data.tags["recsys.command"] == args[0]
    assert run.data.tags["recsys.error"] in result.output  # the reason, as the command printed it


def test_a_failed_command_that_makes_no_run_leaves_the_inherited_run_alone(experiment, monkeypatch, tmp_path):
    client = MlflowClient()
    entry = client.create_run(experiment).info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", entry)
    result = CliRunner().invoke(cli, ["export-split", "--checkpoint", str(tmp_path / "none.zip"), "--out", "x"])
    assert result.exit_code == 1
    run = client.get_run(entry)
    assert run.info.status == "RUNNING" and "recsys.error" not in run.data.tags


def test_the_cli_prints_control_characters_in_names_as_escapes(store, experiment, tmp_path, copy_run):
    name = "line1\nline2\r| evil |"
    ids = [store["ease"]] + _copies(copy_run, store, tmp_path, experiment, [name])
    result = CliRunner().invoke(
        cli,
        [
            "compare",
            *ids,
            "--reference",
            "EASE",
            "--metrics",
            "ndcg@100",
            "--primary",
            "ndcg@100",
            "--n-resamples",
            "199",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "\r" not in result.output and "line1\\nline2\\r| evil |" in result.output
    lines = result.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("metric baseline"))
    row = lines[header + 1]  # the one hypothesis, whole, on one line
    assert row.lstrip().startswith("ndcg@100") and row.rstrip().endswith(("worse", "better", "inconclusive"))


def test_pair_labels_are_one_to_one_for_names_that_hold_the_separator():
    names = ["X", "Y", "X vs Z", "Z vs Y", "a", "vs b", "a vs", "b", '"a vs"', '"b"', "vs", "vs vs", " vs ", "Z vs"]
    pairs = [(b, c) for b in names for c in names if b != c]
    labels = {pair_label(b, c) for b, c in pairs}
    assert len(labels) == len(pairs)
    assert pair_label("EASE", "ELSA") == "ELSA vs EASE"  # plain names stay plain
    assert pair_label("Y", "X vs Z") == '"X vs Z" vs "Y"' and pair_label("Z vs Y", "X") == '"X" vs "Z vs Y"'


def test_an_output_experiment_under_mlflow_run_is_refused_before_anything(
    store, experiment, tmp_path, copy_run, monkeypatch
):
    ids = [store["ease"]] + _copies(copy_run, store, tmp_path, experiment, ["Pop"])
    client = MlflowClient()
    entry = client.create_run(experiment).info.run_id  # the run `mlflow run -e compare` makes
    monkeypatch.setenv("MLFLOW_RUN_ID", entry)
    name = f"{tmp_path.name}-elsewhere"
    result = CliRunner().invoke(cli, ["compare", *ids, "--n-resamples", "99", "--output_experiment", name])
    assert result.exit_code == 1 and "output_experiment: under `mlflow run` the comparison logs into" in result.output
    assert mlflow.get_experiment_by_name(name) is None  # nothing was made
    run = client.get_run(entry)
    assert run.info.status == "FAILED" and "output_experiment" in run.data.tags["recsys.error"]


def test_runs_scored_on_one_user_are_refused_before_any_run(store, experiment, tmp_path, copy_run):
    ids = [store["ease"]] + _copies(copy_run, store, tmp_path, experiment, ["Pop"])
    MlflowClient().log_metric(ids[1], "n_eval_users", 1.0, step=1)  # as a split with one test user logs it
    before = {r.info.run_id for r in _comparison_runs()}
    with pytest.raises(
        RunSelectionError, match=rf"runs: expected runs scored on at least 2 users, found \{{'{ids[1]}': 1\}}"
    ):
        compare_runs(run_ids=ids, settings=ComparisonSettings(n_resamples=99))
    assert {r.info.run_id for r in _comparison_runs()} == before


def test_a_huge_value_is_cut_in_the_error_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    huge = "x" * 100_000
    for args in (["split", "--dataset", huge], ["compare", huge, "--n-resamples", "99"], ["study", "--executor", huge]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code in (1, 2) and len(result.output) < 2_000, args
        assert "characters in all" in result.output, result.output[-300:]


@pytest.mark.parametrize("name", ["_*" * 60, "a_b|c" * 30, "\x01\x02" * 40, "é" * 60, "\U0010ffff" * 20])
def test_a_cut_name_keeps_as_much_of_itself_as_its_escapes_allow(name):
    """A name whose characters escape to several each is cut to the longest prefix that fits, not to one character."""
    written = note_name(name)
    assert len(written) <= NOTE_NAME_WIDTH and written.endswith("\\]")
    kept = shorten(name, NOTE_NAME_WIDTH).split("…")[0]
    # Written from the longest cut that fits: one more character would not have.
    cut = next(c for c in range(NOTE_NAME_WIDTH, 9, -1) if len(escape_markdown(shorten(name, c))) <= NOTE_NAME_WIDTH)
    assert written == escape_markdown(shorten(name, cut))
    assert len(shorten(name, cut).split("…")[0]) >= min(len(kept), (NOTE_NAME_WIDTH - 11) // 10)
    if name.startswith("_*"):
        assert written.startswith("\\_\\*\\_\\*\\_\\*")  # several characters, where the old cut kept one
