"""The launch gate: decisions on constructed per-user data, the command's exit codes against a real SQLite store and
model registry, the audit run, the refusals made before any run, and the alias that moves only on PROMOTE with
--promote (and not for two racing gates)."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import mlflow
import numpy as np
import pytest
import scipy.stats
from click.testing import CliRunner
from mlflow import MlflowClient

from mlflow_recsys.cli import cli
from mlflow_recsys.errors import GateInvalid
from mlflow_recsys.evaluation import EvaluationResult
from mlflow_recsys.stats import GateRule, Guardrail, gate_decision, non_inferiority_power
from mlflow_recsys.tracking._gate import promote_version, resolve_subject, run_gate
from simulated import log_training_run

N = 400
#: Per-user differences spread evenly and symmetrically (SD 0.05, so SE 0.0025 over 400 users): a 90% interval of
#: the mean difference is about its value +- 0.0041.
SPREAD = np.linspace(-0.0866, 0.0866, N)


def _pair(primary_shift: float, guardrail_shift: float = 0.0) -> tuple[EvaluationResult, EvaluationResult]:
    ids = np.arange(N)
    base = {"ndcg@100": np.full(N, 0.4), "recall@20": np.full(N, 0.5)}
    cand = {"ndcg@100": 0.4 + primary_shift + SPREAD, "recall@20": 0.5 + guardrail_shift + SPREAD[::-1]}
    make = lambda v: EvaluationResult.from_per_user(v, sample_ids=ids, targets_fingerprint="t")  # noqa: E731
    return make(base), make(cand)


def _decide(rule: GateRule, primary_shift: float, guardrail_shift: float = 0.0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gate_decision(rule, *_pair(primary_shift, guardrail_shift))


RULE = GateRule("ndcg@100", 0.01, guardrails=(Guardrail("recall@20", 0.01),), n_resamples=1999)


@pytest.mark.parametrize(
    ("primary_shift", "guardrail_shift", "expected"),
    [
        # +-0.0041 around each shift, against -0.01: both clear it
        (0.0, 0.0, "PROMOTE"),
        (-0.005, 0.0, "PROMOTE"),  # worse, but within the margin: interval [-0.0091, -0.0009] clears -0.01
        (-0.009, 0.0, "HOLD"),  # [-0.0131, -0.0049] straddles -0.01: inconclusive
        (0.0, -0.009, "HOLD"),  # the guardrail inconclusive holds a good primary
        (-0.02, 0.0, "REJECT"),  # [-0.0241, -0.0159] lies below -0.01: worse by more than the margin
        (0.02, -0.02, "REJECT"),  # a failed guardrail rejects a primary that is better
    ],
)
def test_each_decision_on_constructed_per_user_data(primary_shift, guardrail_shift, expected):
    decision = _decide(RULE, primary_shift, guardrail_shift)
    assert decision.decision == expected
    assert decision.exit_code == {"PROMOTE": 0, "HOLD": 1, "REJECT": 2}[expected]
    assert decision.primary.difference == pytest.approx(primary_shift)
    # the interval by hand: a normal-theory 90% interval of the even spread, which the bootstrap's approximates
    se = np.std(SPREAD, ddof=1) / math.sqrt(N)
    low = primary_shift - scipy.stats.norm.isf(0.05) * se
    assert decision.primary.ci_low == pytest.approx(low, abs=5e-4)


def test_superiority_is_two_sided_and_rejects_a_worse_primary():
    rule = GateRule("ndcg@100", None, hypothesis="superiority", n_resamples=1999)
    assert _decide(rule, 0.02).decision == "PROMOTE"
    assert _decide(rule, 0.002).decision == "HOLD"
    assert _decide(rule, -0.02).decision == "REJECT"
    assert math.isnan(_decide(rule, 0.02).joint_power)  # no non-inferiority test: no power at equality to report


def test_the_joint_power_is_the_product_of_each_tests_power_at_equality():
    decision = _decide(RULE, 0.0)
    sd = np.std(SPREAD, ddof=1)
    each = non_inferiority_power(sd, N, 0.01, 0.05)
    assert each == pytest.approx(scipy.stats.norm.cdf(0.01 * math.sqrt(N) / sd - scipy.stats.norm.isf(0.05)))
    assert decision.joint_power == pytest.approx(each**2)
    frame = decision.to_frame()
    assert frame["role"].tolist() == ["primary", "guardrail"]
    assert frame["power"].tolist() == pytest.approx([each, each])


@pytest.mark.parametrize(
    ("rule", "named"),
    [
        (dict(primary="ndcg@100", margin=0.0), "margin"),
        (dict(primary="ndcg@100", margin=-0.01), "margin"),
        (dict(primary="ndcg@100", margin=math.inf), "margin"),
        (dict(primary="ndcg@100", margin=math.nan), "margin"),
        (dict(primary="ndcg@100", margin=1.0, relative=True), "margin"),
        (dict(primary="ndcg@100", margin=None), "margin"),
        (dict(primary="ndcg@100", margin=0.01, guardrails=(Guardrail("ndcg@100", 0.01),)), "guardrail"),
        (dict(primary="ndcg@100", margin=0.01, guardrails=(Guardrail("recall@20", 0),)), "guardrail recall@20"),
        (dict(primary="ndcg@100", margin=0.01, n_resamples=0), "n_resamples"),
        (dict(primary="ndcg@100", margin=0.01, hypothesis="superiority"), "margin"),
        (dict(primary="ndcg@100", margin=None, hypothesis="superiority", relative=True), "relative"),
        (dict(primary="ndcg@100", margin=0.01, test_method="wilcoxon"), "test_method"),
        (dict(primary="ndcg@100", margin=0.01, test_method="sign"), "test_method"),
        (dict(primary="ndcg@100", margin=0.01, confidence_level=0.5), "confidence_level"),
        (dict(primary="ndcg@100", margin=None, hypothesis="superiority", confidence_level=0.3), "confidence_level"),
    ],
)
def test_a_bad_rule_is_refused_naming_the_field(rule, named):
    with pytest.raises(ValueError, match=rf"^{named}: expected"):
        GateRule(**rule)


def test_a_guardrail_is_written_metric_colon_margin():
    assert Guardrail.parse("recall@20:0.01") == Guardrail("recall@20", 0.01)
    for bad in ("recall@20", "recall@20:", ":0.1", "recall@20:x"):
        with pytest.raises(ValueError, match="^guardrail: expected METRIC:MARGIN"):
            Guardrail.parse(bad)


# -- on a real store and registry ----------------------------------------------------------------------------------


@pytest.fixture
def registry(tmp_path):
    """A SQLite store with one experiment, MLflow pointed at it: the client and a function logging a training run of
    synthetic per-user values (:func:`simulated.log_training_run`, 300 users) and registering it as a version of
    ``recsys``."""
    from conftest import sqlite_store

    with sqlite_store(tmp_path) as experiment_id:
        client = MlflowClient()
        client.create_registered_model("recsys")

        def log(shift: float, *, register: bool = True, model="EASE", seed=None, **kwargs) -> tuple[str, str | None]:
            rid = log_training_run(client, experiment_id, tmp_path, model=model, seed=seed, shift=shift, **kwargs)
            if not register:
                return rid, None
            version = client.create_model_version("recsys", f"runs:/{rid}/model", run_id=rid)
            return rid, str(version.version)

        yield client, log, experiment_id


def _gate(*args: str):
    result = CliRunner().invoke(cli, ["gate", *args, "--n-resamples", "999"])
    return result.exit_code, result.output.strip()


def _gate_runs(client, experiment_id):
    return client.search_runs([experiment_id], "tags.`recsys.role` = 'gate'")


def test_the_gate_promotes_only_with_promote_and_keeps_the_old_version_as_previous_champion(registry):
    client, log, experiment_id = registry
    _, v1 = log(0.0, rng_seed=0)
    client.set_registered_model_alias("recsys", "champion", v1)
    _, v2 = log(0.0, rng_seed=0)  # the same values: shown non-inferior within any margin
    args = ["--candidate", f"models:/recsys/{v2}", "--incumbent", "models:/recsys@champion"]
    args += ["--primary", "ndcg@100", "--margin", "0.005", "--guardrail", "recall@20:0.01"]
    code, line = _gate(*args)
    assert code == 0, line
    assert line.startswith(
        f"PROMOTE models:/recsys/{v2} vs models:/recsys@champion: ndcg@100 non-inferior within 0.005"
    )
    assert "recall@20 non-inferior within 0.01" in line and len(line.splitlines()) == 1
    assert str(client.get_model_version_by_alias("recsys", "champion").version) == v1  # a dry run: nothing moved
    code, line = _gate(*args, "--promote")
    assert code == 0 and "recsys@champion -> version" in line
    assert str(client.get_model_version_by_alias("recsys", "champion").version) == v2
    assert str(client.get_model_version_by_alias("recsys", "previous-champion").version) == v1
    audit = _gate_runs(client, experiment_id)[0]  # the newest
    assert audit.data.tags["recsys.gate_decision"] == "PROMOTE" and audit.data.tags["recsys.gate_exit_code"] == "0"
    assert audit.data.params["margin"] == "0.005" and audit.data.params["guardrails"] == "recall@20:0.01"
    assert audit.data.tags["recsys.gate_promoted"] == f"recsys@champion -> version {v2}"
    path = mlflow.artifacts.download_artifacts(run_id=audit.info.run_id, artifact_path="gate/decision.json")
    record = json.loads(Path(path).read_text())
    assert record["decision"] == "PROMOTE" and [t["metric"] for t in record["tests"]] == ["ndcg@100", "recall@20"]


def test_hold_and_reject_leave_the_alias_where_it_was_even_with_promote(registry):
    client, log, _ = registry
    inc, v1 = log(0.0, rng_seed=0)
    client.set_registered_model_alias("recsys", "champion", v1)
    worse, _ = log(-0.15, rng_seed=1)
    close, _ = log(-0.02, rng_seed=2)
    base = ["--incumbent", "models:/recsys@champion", "--primary", "ndcg@100", "--margin", "0.01", "--promote"]
    code, line = _gate("--candidate", worse, *base)
    assert (code, line.split()[0]) == (2, "REJECT"), line
    code, line = _gate("--candidate", f"runs:/{close}", *base)
    assert (code, line.split()[0]) == (1, "HOLD"), line
    assert str(client.get_model_version_by_alias("recsys", "champion").version) == v1


def test_two_gates_racing_against_one_champion_cannot_both_promote(registry):
    client, log, _ = registry
    _, v1 = log(0.0, rng_seed=0)
    client.set_registered_model_alias("recsys", "champion", v1)
    a, va = log(0.0, rng_seed=0)
    b, vb = log(0.0, rng_seed=0)
    rule = GateRule("ndcg@100", 0.01, n_resamples=999)
    # gate B has read the champion (v1) and decided when gate A promotes first
    from mlflow_recsys.tracking._gate import _promotion_target

    b_target = _promotion_target(
        client,
        resolve_subject(client, b, "candidate"),
        resolve_subject(client, "models:/recsys@champion", "i"),
        "champion",
    )
    first = run_gate(a, "models:/recsys@champion", rule, promote=True)
    assert first.promoted is not None and str(client.get_model_version_by_alias("recsys", "champion").version) == va
    with pytest.raises(GateInvalid, match=f"marked version {v1} when the gate began and marks version {va} now"):
        promote_version(client, b_target)
    assert str(client.get_model_version_by_alias("recsys", "champion").version) == va
    assert str(client.get_model_version_by_alias("recsys", "previous-champion").version) == v1
    assert vb != va


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--margin", "0"], "margin: expected a finite number > 0"),
        (["--margin", "-0.01"], "margin: expected a finite number > 0"),
        (["--margin", "nan"], "margin: expected"),
        (["--margin", "1", "--relative"], "margin: expected a number strictly between 0 and 1"),
        (["--margin", "0.01", "--guardrail", "ndcg@100:0.01"], "guardrail: expected a metric other than the primary"),
        (["--margin", "0.01", "--guardrail", "mrr@10:0.01"], "guardrail: 'mrr@10' was not evaluated"),
        (["--margin", "0.01", "--primary", "mrr@10"], "primary: 'mrr@10' was not evaluated"),
        ([], "margin: expected a margin > 0"),
    ],
)
def test_bad_input_is_one_line_exit_3_and_no_audit_run(registry, args, message):
    client, log, experiment_id = registry
    inc, _ = log(0.0, rng_seed=0)
    cand, _ = log(0.0, rng_seed=3)
    argv = ["--candidate", cand, "--incumbent", inc, "--primary", "ndcg@100", *args]
    if "--primary" in args:
        argv = ["--candidate", cand, "--incumbent", inc, *args]
    code, line = _gate(*argv)
    assert code == 3, line
    assert message in line and len(line.splitlines()) == 1
    assert _gate_runs(client, experiment_id) == []


def test_what_cannot_be_gated_is_refused_before_any_run(registry, tmp_path):
    client, log, experiment_id = registry
    inc, v1 = log(0.0, rng_seed=0)
    other_split, _ = log(0.0, rng_seed=0, digest="e" * 64, register=False)
    bare = client.create_run(experiment_id).info.run_id
    client.set_terminated(bare, "FINISHED")
    client.create_model_version("recsys", f"runs:/{bare}/model", run_id=bare)
    rule = ["--primary", "ndcg@100", "--margin", "0.01"]
    cases = [
        (["--candidate", inc, "--incumbent", inc], "candidate: expected a run other than the incumbent's"),
        (["--candidate", f"models:/recsys/{v1}", "--incumbent", inc], "expected a run other than the incumbent's"),
        (["--candidate", other_split, "--incumbent", inc], "not comparable: the candidate was scored on split eeee"),
        (["--candidate", inc, "--incumbent", "models:/recsys@champion"], "an existing alias 'champion'"),
        (["--candidate", inc, "--incumbent", "models:/recsys/99"], "an existing version 99"),
        (["--candidate", inc, "--incumbent", "models:/nobody@champion"], "registered model 'nobody'"),
        (["--candidate", "models:/recsys/2", "--incumbent", inc], "holds no per-user artifacts"),
        (["--candidate", "0" * 32, "--incumbent", inc], "candidate: expected an existing run"),
        (["--candidate", "not a run", "--incumbent", inc], "candidate: expected a run id, runs:/"),
        (["--candidate", other_split, "--incumbent", inc, "--promote"], "promote: expected a registered model"),
    ]
    for args, message in cases:
        code, line = _gate(*args, *rule)
        assert code == 3, (args, line)
        assert line.startswith(("Error: INVALID: ", "Error: ")) and message in line, (args, line)
    assert _gate_runs(client, experiment_id) == []
    result = CliRunner().invoke(cli, ["gate", "--incumbent", inc])  # click's own refusal: 3 as well, never 2
    assert result.exit_code == 3 and "Missing option '--candidate'" in result.output


def test_a_store_without_a_model_registry_is_refused_before_any_run(registry, monkeypatch):
    client, log, experiment_id = registry
    inc, _ = log(0.0, rng_seed=0)
    cand, _ = log(0.0, rng_seed=0)
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", "nosuchregistry://here")
    code, line = _gate(
        "--candidate", cand, "--incumbent", inc, "--primary", "ndcg@100", "--margin", "0.01", "--promote"
    )
    assert code == 3 and "promote: this tracking store has no model registry" in line, line
    assert _gate_runs(client, experiment_id) == []


def test_per_user_values_that_disagree_leave_a_failed_audit_run_that_says_invalid(registry):
    client, log, experiment_id = registry
    inc, _ = log(0.0, rng_seed=0)
    fewer, _ = log(0.0, rng_seed=0, n_users=200)  # the same split and targets tags, other users
    code, line = _gate("--candidate", fewer, "--incumbent", inc, "--primary", "ndcg@100", "--margin", "0.01")
    assert code == 3 and "not comparable" in line, line
    (audit,) = _gate_runs(client, experiment_id)
    assert audit.info.status == "FAILED" and audit.data.tags["recsys.gate_decision"] == "INVALID"
    assert audit.data.params["primary"] == "ndcg@100"  # the rule was logged before the data were read


def test_train_register_makes_a_version_whose_source_run_is_the_training(trained_store, tmp_path):
    from conftest import trained_copy
    from mlflow_recsys.tracking import TrainConfig, run_train

    with trained_copy(trained_store, tmp_path, "register") as trained:
        config = TrainConfig("Popularity", metrics=("ndcg@100", "recall@20"), register="popular")
        run_id = run_train(trained["checkpoint"], config)
        version = MlflowClient().get_model_version("popular", "1")
        assert version.run_id == run_id
        assert MlflowClient().get_run(run_id).data.params["register"] == "popular"
        subject = resolve_subject(MlflowClient(), "models:/popular/1", "candidate")
        assert subject.run_id == run_id
        with pytest.raises(ValueError, match="^register: expected a registered model name without / @ :"):
            TrainConfig("Popularity", register="a/b")
        with pytest.raises(ValueError, match="^log_model: expected True to register"):
            run_train(trained["checkpoint"], config, log_model=False)


def test_compare_against_a_margin_states_it_in_the_run_and_the_comparisons_frame(registry):
    from mlflow_recsys import search_comparisons

    client, log, experiment_id = registry
    base = log(0.0, rng_seed=0, register=False)[0]
    seeds = [log(0.0, register=False, model="ELSA", seed=str(s), rng_seed=s)[0] for s in (1, 2, 3)]
    args = ["compare", base, *seeds, "--reference", "EASE", "--hypothesis", "non-inferiority", "--margin", "0.05"]
    result = CliRunner().invoke(cli, [*args, "--n-resamples", "999"])
    assert result.exit_code == 0, result.output
    assert "non-inferiority (H1: difference > -delta), delta = 0.05 on ndcg@100" in result.output
    frame = search_comparisons(experiment_id)
    assert set(frame["hypothesis"]) == {"non-inferiority"} and set(frame["margin"]) == {0.05}
    assert set(frame["direction"]) <= {"non-inferior", "inferior", "inconclusive"}
    (run,) = client.search_runs([experiment_id], "tags.`recsys.role` = 'comparison'")
    notes = run.data.tags["mlflow.note.content"]
    assert "within 0.05" in notes or "not shown non-inferior" in notes


@pytest.mark.parametrize(("method", "resamples"), [("randomization", 18), ("bootstrap", 1)])
def test_a_rule_whose_p_value_could_not_reach_alpha_is_refused(method, resamples):
    with pytest.raises(ValueError, match=r"^n_resamples: expected at least 19 resamples, so that 1/\(B\+1\)"):
        GateRule("ndcg@100", 0.05, test_method=method, n_resamples=resamples)
    GateRule("ndcg@100", 0.05, test_method="t", n_resamples=1)  # a test without resampling needs none


def test_a_margin_as_wide_as_the_incumbents_mean_warns():
    from mlflow_recsys.stats import WideMarginWarning

    with pytest.warns(WideMarginWarning, match="the margin 2 is at least the reference's mean 0.4"):
        gate_decision(GateRule("ndcg@100", 2.0, n_resamples=999), *_pair(0.0))


def _champion(client, log):
    _, v1 = log(0.0, rng_seed=0)
    client.set_registered_model_alias("recsys", "champion", v1)
    return v1


def test_promote_refuses_an_incumbent_other_than_the_champion_and_the_champion_itself(registry):
    client, log, experiment_id = registry
    v1 = _champion(client, log)
    other, v2 = log(0.0, rng_seed=0)
    cand, v3 = log(0.0, rng_seed=0)
    rule = ["--primary", "ndcg@100", "--margin", "0.01", "--promote"]
    cases = [
        (
            ["--candidate", f"models:/recsys/{v3}", "--incumbent", other],
            "incumbent: expected the version recsys@champion",
        ),
        (["--candidate", cand, "--incumbent", f"models:/recsys/{v2}"], "gate against models:/recsys@champion"),
        (["--candidate", "models:/recsys@champion", "--incumbent", other], f"version {v1} of 'recsys' already holds"),
    ]
    for args, message in cases:
        code, line = _gate(*args, *rule)
        assert code == 3 and message in line, (args, line)
    assert _gate_runs(client, experiment_id) == []
    assert str(client.get_model_version_by_alias("recsys", "champion").version) == v1
    assert v3 not in (v1, v2)


def test_deleted_and_unfinished_runs_are_refused(registry):
    client, log, experiment_id = registry
    inc, _ = log(0.0, rng_seed=0)
    deleted, _ = log(0.0, rng_seed=1)
    client.delete_run(deleted)
    failed, _ = log(0.0, rng_seed=2, status="FAILED")
    for cand, state in ((deleted, "deleted"), (failed, "FAILED")):
        code, line = _gate("--candidate", cand, "--incumbent", inc, "--primary", "ndcg@100", "--margin", "0.01")
        assert code == 3 and "candidate: expected a FINISHED, not deleted, run" in line and state in line, line
    assert _gate_runs(client, experiment_id) == []


@pytest.mark.parametrize("alias", ["latest", "v7", "with space", "a/b", "a@b", "x" * 247, ""])
def test_an_alias_mlflow_would_refuse_is_refused_before_any_run(registry, alias):
    client, log, experiment_id = registry
    v1 = _champion(client, log)
    cand, _ = log(0.0, rng_seed=0)
    args = ["--candidate", cand, "--incumbent", "models:/recsys@champion", "--primary", "ndcg@100"]
    code, line = _gate(*args, "--margin", "0.01", "--promote", "--alias", alias)
    assert code == 3 and "alias: expected" in line, line
    assert _gate_runs(client, experiment_id) == []
    assert set(client.get_registered_model("recsys").aliases) == {"champion"}
    assert str(client.get_model_version_by_alias("recsys", "champion").version) == v1


def test_debug_keeps_the_exit_code_of_no_decision(registry):
    client, log, _ = registry
    inc, _ = log(0.0, rng_seed=0)
    args = ["--debug", "gate", "--candidate", inc, "--incumbent", inc, "--primary", "ndcg@100", "--margin", "-1"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 3, result.output


def test_an_alias_moved_while_the_gate_ran_leaves_an_audit_run_that_says_invalid_throughout(registry, monkeypatch):
    from mlflow_recsys.tracking import _gate as gate_module

    client, log, experiment_id = registry
    v1 = _champion(client, log)
    cand, _ = log(0.0, rng_seed=0)
    _, other = log(0.0, rng_seed=0)
    real = gate_module.gate_decision

    def another_gate_promotes_meanwhile(*args, **kwargs):
        decided = real(*args, **kwargs)
        client.set_registered_model_alias("recsys", "champion", other)  # a real registry change, mid-gate
        return decided

    monkeypatch.setattr(gate_module, "gate_decision", another_gate_promotes_meanwhile)
    code, line = _gate(
        "--candidate",
        cand,
        "--incumbent",
        "models:/recsys@champion",
        "--primary",
        "ndcg@100",
        "--margin",
        "0.01",
        "--promote",
    )
    assert code == 3 and f"marked version {v1} when the gate began and marks version {other} now" in line, line
    (audit,) = _gate_runs(client, experiment_id)
    assert audit.info.status == "FAILED"
    assert (audit.data.tags["recsys.gate_decision"], audit.data.tags["recsys.gate_exit_code"]) == ("INVALID", "3")
    assert audit.data.tags["recsys.result"].startswith("INVALID (the tests said PROMOTE")
    assert audit.data.tags["mlflow.note.content"].startswith("# Gate: INVALID (exit code 3): the tests said PROMOTE")
    assert "recsys.gate_promoted" not in audit.data.tags
    path = mlflow.artifacts.download_artifacts(run_id=audit.info.run_id, artifact_path="gate/decision.json")
    record = json.loads(Path(path).read_text())
    assert (record["decision"], record["exit_code"], record["tests_decision"]) == ("INVALID", 3, "PROMOTE")
    assert str(client.get_model_version_by_alias("recsys", "champion").version) == other


def test_a_registered_name_with_a_quote_promotes(registry):
    client, log, _ = registry
    client.create_registered_model("it's")
    inc, _ = log(0.0, rng_seed=0, register=False)
    cand, _ = log(0.0, rng_seed=0, register=False)
    for rid in (inc, cand):
        client.create_model_version("it's", f"runs:/{rid}/model", run_id=rid)
    client.set_registered_model_alias("it's", "champion", "1")
    code, line = _gate(
        "--candidate",
        cand,
        "--incumbent",
        "models:/it's@champion",
        "--primary",
        "ndcg@100",
        "--margin",
        "0.01",
        "--promote",
    )
    assert code == 0, line
    assert str(client.get_model_version_by_alias("it's", "champion").version) == "2"


def test_a_superiority_primary_reports_no_power_at_equality_even_with_guardrails():
    guardrails = (Guardrail("recall@20", 0.01),)
    rule = GateRule("ndcg@100", None, hypothesis="superiority", guardrails=guardrails, n_resamples=999)
    assert math.isnan(_decide(rule, 0.02).joint_power)


def test_an_interrupt_after_the_decision_is_recorded_does_not_cut_the_promotion(caplog):
    import os
    import signal

    from mlflow_recsys.tracking._gate import _signals_held

    done = []
    with _signals_held():
        os.kill(os.getpid(), signal.SIGINT)
        done.append("moved, and recorded")
    assert done == ["moved, and recorded"]
    assert "SIGINT arrived after the gate decided; it finishes with its decision" in caplog.text
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back as it was


def test_the_module_entry_point_knows_every_command():
    import ast
    import subprocess
    import sys

    import mlflow_recsys.cli as module

    last = ast.parse(Path(module.__file__).read_text()).body[-1]
    assert isinstance(last, ast.If) and "__main__" in ast.unparse(last.test)  # no command is defined after it
    done = subprocess.run([sys.executable, "-m", "mlflow_recsys.cli", "gate", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "--guardrail" in done.stdout


def test_a_relative_margin_on_an_incumbent_scoring_zero_is_refused_before_any_run(registry):
    client, log, experiment_id = registry
    zero, _ = log(-1.0, rng_seed=0)  # every score clipped to 0: logged mean 0
    cand, _ = log(0.0, rng_seed=1)
    args = ["--candidate", cand, "--incumbent", zero, "--primary", "ndcg@100", "--margin", "0.02", "--relative"]
    code, line = _gate(*args)
    assert code == 3 and "relative: expected a positive mean of 'ndcg@100' for the incumbent" in line, line
    assert _gate_runs(client, experiment_id) == []


def test_the_warnings_of_a_gate_are_kept_in_its_audit_note(registry):
    client, log, experiment_id = registry
    inc, _ = log(0.0, rng_seed=0)
    cand, _ = log(0.0, rng_seed=1)
    code, line = _gate("--candidate", cand, "--incumbent", inc, "--primary", "ndcg@100", "--margin", "5")
    assert code == 0, line
    (audit,) = _gate_runs(client, experiment_id)
    note = audit.data.tags["mlflow.note.content"]
    assert "Warnings:" in note and "the margin 5 is at least the reference's mean" in note
