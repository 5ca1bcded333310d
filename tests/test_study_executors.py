"""A study's trainings on a local Ray beside the same study run one after another (issue 17, points 1-3).

Real throughout: `mlflow-recsys study` processes against a SQLite store, MovieLens-100k, EASE and ELSA (2 epochs), a
local Ray started by the study with this machine's CPUs. The tests marked ``ray`` take about 3 minutes (`make
ray-test`, which prints the two studies' wall times with -s); the others are quick and run in `make test`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mlflow
import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from conftest import BIN, clean_env, new_sqlite_store, small_study

PROJECT = Path(__file__).resolve().parents[1]
SMALL = [
    "--epochs",
    "2",
    "--latent-dim",
    "8",
    "--batch-size",
    "128",
    "--n-resamples",
    "999",
    "--metrics",
    "ndcg@100,recall@20",
    "--project-uri",
    str(PROJECT),
]
#: Logged by a training run but not a result of it.
TIMINGS = {"fit_seconds"}


#: Each store's folder for Ray's sessions: short, since Ray's socket paths must fit in 107 bytes.
RAY_TMPDIRS: dict[Path, Path] = {}
#: A password the studies carry in MLFLOW_TRACKING_PASSWORD (SQLite ignores it): it must not reach Ray's logs.
PASSWORD = "pw-4d1f9c0e-never-in-a-log"


def study_env(store: Path, experiment: str, uri: str | None = None) -> dict[str, str]:
    env = clean_env(uri or f"sqlite:///{store}/mlruns.db")
    # Ray's session folder (logs included) inside the store, so a test can read every log this study's Ray wrote.
    env.update(
        MLFLOW_EXPERIMENT_NAME=experiment,
        RAY_USAGE_STATS_ENABLED="0",
        MLFLOW_TRACKING_PASSWORD=PASSWORD,
        RAY_TMPDIR=str(RAY_TMPDIRS[store]),
    )
    return env


def study(
    store: Path, experiment: str, *args: str, uri: str | None = None
) -> tuple[subprocess.CompletedProcess, float]:
    """Run `mlflow-recsys study` in the store's folder, in ``experiment``; return the process and its wall time."""
    env = study_env(store, experiment, uri)
    started = time.perf_counter()
    proc = subprocess.run(
        [str(BIN / "mlflow-recsys"), "study", *SMALL, *args],
        cwd=store,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc, time.perf_counter() - started


def runs_of(experiment: str, role: str) -> list:
    experiment_id = mlflow.get_experiment_by_name(experiment).experiment_id
    return MlflowClient().search_runs([experiment_id], f"tags.`recsys.role` = '{role}'", max_results=1000)


def trainings(experiment: str) -> dict[tuple[str, str], list]:
    """Training runs by (model, seed), oldest first."""
    out: dict[tuple[str, str], list] = {}
    for run in sorted(runs_of(experiment, "train"), key=lambda r: r.info.start_time):
        out.setdefault((run.data.tags["recsys.model"], run.data.tags["recsys.seed"]), []).append(run)
    return out


def named(experiment: str, run_name: str) -> list:
    """Every run of that name, oldest first: a training that failed before it began logging has no recsys tags."""
    experiment_id = mlflow.get_experiment_by_name(experiment).experiment_id
    runs = MlflowClient().search_runs([experiment_id], f"tags.`mlflow.runName` = '{run_name}'", max_results=1000)
    return sorted(runs, key=lambda r: r.info.start_time)


def show(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"


@pytest.fixture
def env_store(tmp_path, monkeypatch):
    """MLFLOW_TRACKING_URI set to a fresh SQLite file under ``tmp_path``, and no tracking URI set in this process (the
    module's ``store`` sets one for the module, which would win over the variable); yields the file's path."""
    from mlflow.tracking._tracking_service import utils as tracking_utils

    monkeypatch.setattr(tracking_utils, "_tracking_uri", None)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/m.db")
    return tmp_path / "m.db"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One SQLite store for the module's studies; MLflow in this process points at it."""
    root = tmp_path_factory.mktemp("studies")
    RAY_TMPDIRS[root] = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
    from mlflow.tracking._tracking_service import utils as tracking_utils

    previous = tracking_utils._tracking_uri  # often unset: put back exactly, so MLFLOW_TRACKING_URI is read again
    mlflow.set_tracking_uri(new_sqlite_store(root / "mlruns.db"))
    for name in ("sequential", "ray", "failing", "gpu", "relative", "unreachable"):
        mlflow.create_experiment(name, artifact_location=(root / "artifacts" / name).as_uri())
    yield root
    tracking_utils._tracking_uri = previous
    shutil.rmtree(RAY_TMPDIRS.pop(root), ignore_errors=True)


@pytest.fixture(scope="module")
def studies(store):
    """The same study (EASE, ELSA under seeds 0, 1, 2) on each executor, in experiments of their own."""
    seconds = {}
    for executor in ("sequential", "ray"):
        proc, seconds[executor] = study(store, executor, "--seeds", "0,1,2", "--executor", executor)
        assert proc.returncode == 0, show(proc)
    print(
        f"\nstudy wall time (EASE + ELSA x 3 seeds, 2 epochs, MovieLens-100k): sequential "
        f"{seconds['sequential']:.1f} s, ray {seconds['ray']:.1f} s"
    )
    return seconds


@pytest.mark.ray
def test_ray_study_logs_the_same_runs_as_the_sequential_study(studies):
    sequential, on_ray = trainings("sequential"), trainings("ray")
    assert sorted(on_ray) == sorted(sequential) == [("EASE", "none"), ("ELSA", "0"), ("ELSA", "1"), ("ELSA", "2")]
    for key in sequential:
        (a,), (b,) = sequential[key], on_ray[key]
        assert a.info.status == b.info.status == "FINISHED"
        # Bit for bit: the same split, seed and code give the same model, so the same scores, in a Ray worker (one
        # thread) as in its own process (every core), MKL's sums kept in one order (MKL_CBWR, set on import). The
        # mean training loss is a diagnostic summed by torch's threaded reduction: it agrees to float32 precision.
        ray_metrics, own_metrics = ({k: v for k, v in run.data.metrics.items() if k not in TIMINGS} for run in (b, a))
        assert ray_metrics.pop("train_loss", 0.0) == pytest.approx(own_metrics.pop("train_loss", 0.0), rel=1e-6)
        assert ray_metrics == own_metrics, key
        for tag in ("recsys.config", "recsys.split_digest", "recsys.targets_fingerprint", "recsys.command"):
            assert b.data.tags[tag] == a.data.tags[tag], (key, tag)
        assert {k: v for k, v in b.data.params.items() if k != "checkpoint"} == {
            k: v for k, v in a.data.params.items() if k != "checkpoint"
        }, key
    for executor in ("sequential", "ray"):
        (main,) = runs_of(executor, "main")
        assert main.info.status == "FINISHED" and main.data.params["executor"] == executor
        children = [r for rs in trainings(executor).values() for r in rs]
        assert {r.data.tags["mlflow.parentRunId"] for r in children} == {main.info.run_id}
        assert "| ELSA seed 2 | trained |" in main.data.tags["mlflow.note.content"]
    # Same per-user values, same resampling seed: the comparisons agree to the last digit too.
    (seq_comparison,), (ray_comparison,) = runs_of("sequential", "comparison"), runs_of("ray", "comparison")
    assert ray_comparison.data.metrics == seq_comparison.data.metrics
    print(
        f"per-seed metrics identical (exact) on both executors; sequential {studies['sequential']:.1f} s, "
        f"ray {studies['ray']:.1f} s"
    )


@pytest.mark.ray
def test_a_rerun_reuses_every_finished_training(store, studies):
    before = {key: [r.info.run_id for r in runs] for key, runs in trainings("ray").items()}
    proc, seconds = study(store, "ray", "--seeds", "0,1,2", "--executor", "ray")
    assert proc.returncode == 0, show(proc)
    assert {key: [r.info.run_id for r in runs] for key, runs in trainings("ray").items()} == before
    assert proc.stdout.count("reusing ") == 4 and "0 trainings on the ray executor, 4 reused" in proc.stdout
    assert "Started a local Ray" not in proc.stderr  # nothing to train, so no Ray
    first, second = sorted(runs_of("ray", "comparison"), key=lambda r: r.info.start_time)
    assert second.data.tags["recsys.source_runs"] == first.data.tags["recsys.source_runs"]
    print(f"rerun on ray, every training reused: {seconds:.1f} s")


@pytest.mark.ray
def test_a_failed_training_leaves_the_others_and_fails_the_study(store):
    # A seed ELSA refuses fails in its own task, while the other three train beside it.
    proc, seconds = study(store, "failing", "--seeds", "0,1,-1", "--executor", "ray")
    assert proc.returncode == 1, show(proc)
    (main,) = runs_of("failing", "main")
    runs = trainings("failing")
    (bad,) = named("failing", "ELSA seed -1")
    assert bad.data.tags["mlflow.parentRunId"] == main.info.run_id
    reason = "ValueError: seed: expected an integer >= 0, found -1"
    assert bad.info.status == "FAILED" and bad.data.tags["recsys.error"] == reason
    found = {key: [(r.info.status, r.data.tags.get("recsys.error")) for r in rs] for key, rs in runs.items()}
    assert sorted(found) == [("EASE", "none"), ("ELSA", "0"), ("ELSA", "1")], (found, show(proc))
    assert all(statuses == [("FINISHED", None)] for statuses in found.values()), (found, show(proc))
    assert main.info.status == "FAILED"
    failure = f"movielens-100k: 1 of 4 trainings failed: ELSA seed -1 (run {bad.info.run_id}): {reason}"
    assert main.data.tags["recsys.error"] == failure
    assert f"ELSA seed -1 (run {bad.info.run_id}): {reason}" in proc.stderr
    assert "| ELSA seed -1 | **FAILED** |" in main.data.tags["mlflow.note.content"]  # a hyphen needs no escape
    # What finished was compared all the same.
    (comparison,) = runs_of("failing", "comparison")
    assert comparison.info.status == "FINISHED"
    compared = sorted(comparison.data.tags["recsys.source_runs"].split(","))
    assert compared == sorted(r.info.run_id for (r,) in runs.values())
    assert f"the 3 finished were compared in run {comparison.info.run_id}" in proc.stderr
    print(f"ray study with a failing training: {seconds:.1f} s")

    # The rerun trains only what is missing (seed 2); the runs that finished are reused.
    proc, seconds = study(store, "failing", "--seeds", "0,1,2", "--executor", "ray")
    assert proc.returncode == 0, show(proc)
    after = trainings("failing")
    assert {key: [r.info.run_id for r in rs] for key, rs in after.items() if key != ("ELSA", "2")} == {
        key: [r.info.run_id for r in rs] for key, rs in runs.items()
    }
    (new,) = after[("ELSA", "2")]
    rerun = max(runs_of("failing", "main"), key=lambda r: r.info.start_time)
    assert new.data.tags["mlflow.parentRunId"] == rerun.info.run_id and rerun.info.status == "FINISHED"
    assert "1 trainings on the ray executor, 3 reused" in proc.stdout
    print(f"rerun on ray, 3 reused and 1 trained: {seconds:.1f} s")


@pytest.mark.ray
def test_the_sequential_executor_records_a_failed_training_too(store, studies):
    proc, seconds = study(store, "sequential", "--seeds", "1,-1")
    assert proc.returncode == 1, show(proc)
    main = max(runs_of("sequential", "main"), key=lambda r: r.info.start_time)
    (bad,) = named("sequential", "ELSA seed -1")
    assert bad.info.status == "FAILED" and bad.data.tags["mlflow.parentRunId"] == main.info.run_id
    assert main.info.status == "FAILED"
    # The step recorded its own reason on the run `mlflow run` made for it, before any logging began.
    reason = "ValueError: seed: expected an integer >= 0, found -1"
    assert bad.data.tags["recsys.error"] == reason
    failure = f"movielens-100k: 1 of 3 trainings failed: ELSA seed -1 (run {bad.info.run_id}): {reason}"
    assert main.data.tags["recsys.error"] == failure
    # The step's own error is in the output, and EASE and ELSA seed 1 came from the first study.
    assert "seed: expected an integer >= 0, found -1" in proc.stderr
    assert "0 trainings" not in proc.stdout and "1 trainings on the sequential executor, 2 reused" in proc.stdout
    assert max(runs_of("sequential", "comparison"), key=lambda r: r.info.start_time).info.status == "FINISHED"
    print(f"sequential study with a failing training, 2 reused: {seconds:.1f} s")


@pytest.mark.ray
def test_no_credential_reaches_rays_logs_or_the_output(store, studies):
    ray_logs = [p for p in RAY_TMPDIRS[store].rglob("*") if p.is_file() and not p.is_symlink()]
    assert len(ray_logs) > 10, "the study's Ray wrote no logs where RAY_TMPDIR says"
    leaked = [str(p) for p in ray_logs if PASSWORD.encode() in p.read_bytes()]
    assert leaked == [], leaked
    assert any(b"runtime_env" in p.read_bytes() for p in ray_logs if p.name.startswith("runtime_env"))


@pytest.mark.ray
def test_the_local_ray_of_a_study_is_private_so_auto_cannot_join_it(store, studies):
    # `--ray-address auto` finds the newest cluster through this file of Ray's default folder; a study's own Ray
    # lives in a folder of its own and leaves no such file behind.
    ray_tmpdir = RAY_TMPDIRS[store]
    assert list(ray_tmpdir.glob("ray-*/session_*")), sorted(p.name for p in ray_tmpdir.iterdir())
    assert not (ray_tmpdir / "ray" / "ray_current_cluster").exists()


@pytest.mark.ray
def test_sigterm_during_a_sequential_step_stops_that_step_too(store):
    experiment = "sequential-stopped"
    mlflow.create_experiment(experiment, artifact_location=(store / "artifacts" / experiment).as_uri())
    proc = subprocess.Popen(
        [str(BIN / "mlflow-recsys"), "study", *SMALL, "--seeds", "0,1", "--epochs", "200"],
        cwd=store,
        env=study_env(store, experiment),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stdout:
        if line.startswith("== ELSA seed 0 =="):
            break
    time.sleep(5)  # the train step's process is training
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, f"exit {proc.returncode}\n{out[-3000:]}\n{err[-3000:]}"
    (main,) = runs_of(experiment, "main")
    assert (
        main.info.status == "FAILED" and main.data.tags["recsys.error"] == "Terminated: stopped by signal 15 (SIGTERM)"
    )
    (elsa,) = named(experiment, "ELSA seed 0")
    # The step's process was stopped with the study: its run ended, and no process trains on from its checkpoint.
    (split,) = runs_of(experiment, "split")
    time.sleep(3)
    left = subprocess.run(["pgrep", "-f", split.info.run_id], capture_output=True, text=True).stdout.split()
    assert left == [] and MlflowClient().get_run(elsa.info.run_id).info.status == "FAILED"
    assert not named(experiment, "ELSA seed 1")


@pytest.mark.ray
def test_a_relative_sqlite_uri_is_one_database_for_every_step(store):
    # The steps run in the project's folder (--project-uri), elsewhere than the folder the URI is relative to.
    def project_db():  # `make demo` may have made one there: it must stay as it was
        path = PROJECT / "mlruns.db"
        return path.stat().st_mtime_ns if path.exists() else None

    before = project_db()
    proc, _ = study(store, "relative", "--seeds", "0,1", "--n-resamples", "99", uri="sqlite:///mlruns.db")
    assert proc.returncode == 0, show(proc)
    assert project_db() == before
    (main,) = runs_of("relative", "main")
    roles = sorted(r.data.tags["recsys.role"] for r in MlflowClient().search_runs([main.info.experiment_id]))
    assert roles == ["comparison", "main", "split", "train", "train", "train"]


@pytest.mark.ray
def test_an_unreachable_ray_address_fails_before_any_run(store):
    proc, seconds = study(store, "unreachable", "--seeds", "0,1", "--executor", "ray", "--ray-address", "127.0.0.1:9")
    assert proc.returncode == 1, show(proc)
    assert proc.stderr.startswith("Error: ConnectionError: ray_address: no Ray cluster answers at '127.0.0.1:9' ("), (
        show(proc)
    )
    assert seconds < 60
    assert MlflowClient().search_runs([mlflow.get_experiment_by_name("unreachable").experiment_id]) == []
    print(f"unreachable Ray address refused after {seconds:.1f} s")


@pytest.mark.ray
@pytest.mark.parametrize(
    "signum, status, message, reason",
    [
        (signal.SIGTERM, 143, "Error: stopped by signal 15 (SIGTERM)", "Terminated: stopped by signal 15 (SIGTERM)"),
        (signal.SIGINT, 1, "Aborted!", "KeyboardInterrupt: interrupted (Ctrl-C)"),
    ],
    ids=["SIGTERM", "Ctrl-C"],
)
def test_a_stopped_study_ends_failed_with_its_reason_and_kills_the_trainings(store, signum, status, message, reason):
    experiment = f"interrupted-{signum}"
    mlflow.create_experiment(experiment, artifact_location=(store / "artifacts" / experiment).as_uri())
    proc = subprocess.Popen(
        [str(BIN / "mlflow-recsys"), "study", *SMALL, "--seeds", "0,1", "--epochs", "200", "--executor", "ray"],
        cwd=store,
        env=study_env(store, experiment),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stdout:
        if line.startswith("submitted ELSA seed 1"):
            break
    time.sleep(3)  # the trainings are running
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == status, f"exit {proc.returncode}\n{out[-3000:]}\n{err[-3000:]}"
    assert message in err and "Traceback" not in err, err[-3000:]
    (main,) = runs_of(experiment, "main")
    assert main.info.status == "FAILED" and main.data.tags["recsys.error"] == reason
    elsa = named(experiment, "ELSA seed 0") + named(experiment, "ELSA seed 1")
    assert sorted(r.info.status for r in elsa) == ["KILLED", "KILLED"]


@pytest.mark.ray
def test_gpu_trainings_on_a_local_ray_without_gpus_are_refused_before_any_run(store):
    proc, _ = study(store, "gpu", "--seeds", "5,6", "--executor", "ray", "--device", "cuda")
    assert proc.returncode == 1, show(proc)
    assert proc.stderr == (
        "Error: ValueError: device: ELSA seed 5, ELSA seed 6 ask Ray for a GPU each, and this "
        "machine (the local Ray) has none; use --device cpu, or join a cluster with GPUs "
        "(--ray-address)\n"
    )
    assert MlflowClient().search_runs([mlflow.get_experiment_by_name("gpu").experiment_id]) == []


def test_ray_executor_without_ray_says_how_to_install_it(tmp_path):
    # Ray blocked as if it were not installed; nothing may be logged.
    code = (
        "import sys; sys.modules['ray'] = None; from mlflow_recsys.cli import cli; "
        "cli(['study', '--executor', 'ray', '--seeds', '0,1'], prog_name='mlflow-recsys')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=clean_env(f"sqlite:///{tmp_path}/m.db"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, show(proc)
    assert proc.stderr.strip() == 'Error: ImportError: executor: Ray is not installed; pip install "mlflow-recsys[ray]"'
    assert not (tmp_path / "m.db").exists()


def test_ray_address_needs_the_ray_executor(tmp_path, monkeypatch, env_store):
    from mlflow_recsys.cli import cli

    result = CliRunner().invoke(cli, ["study", "--ray-address", "auto"])
    assert result.exit_code == 1
    assert "ValueError: ray_address: only the ray executor joins a Ray cluster, found 'auto'" in result.output
    assert not (tmp_path / "m.db").exists()


def test_ray_workers_get_the_tracking_uri_and_credentials_as_a_task_argument(tmp_path, monkeypatch):
    from mlflow.tracking._tracking_service import utils as tracking_utils

    from mlflow_recsys.tracking._executors import _environment, worker_environment

    # A tracking URI set in this process by an earlier test would win over the variable set below.
    monkeypatch.setattr(tracking_utils, "_tracking_uri", None)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///relative.db")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3cret")
    monkeypatch.setenv("MLFLOW_RUN_ID", "the-study-run")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "study")
    monkeypatch.delenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", raising=False)  # a CLI test may have set it
    env = worker_environment()
    assert env["MLFLOW_TRACKING_URI"] == f"sqlite:///{tmp_path.resolve()}/relative.db"
    assert env["MLFLOW_TRACKING_PASSWORD"] == "s3cret" and env["MLFLOW_RECSYS_COMMAND"] == "train"
    assert "MLFLOW_RUN_ID" not in env and "MLFLOW_EXPERIMENT_NAME" not in env
    assert all(k.startswith("MLFLOW_") for k in env)
    assert "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT" not in env  # no credentials in this URI
    # Set for the task, and the worker's own environment put back after it.
    with _environment({**env, "MLFLOW_RUN_ID": "the-training"}, removed=frozenset({"MLFLOW_EXPERIMENT_NAME"})):
        assert os.environ["MLFLOW_RUN_ID"] == "the-training" and "MLFLOW_EXPERIMENT_NAME" not in os.environ
    assert os.environ["MLFLOW_RUN_ID"] == "the-study-run" and os.environ["MLFLOW_EXPERIMENT_NAME"] == "study"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://alice:s3cret@tracking.example:5000")
    assert worker_environment()["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] == "true"


def test_a_tracking_uri_with_credentials_turns_off_mlflows_run_links(tmp_path, monkeypatch):
    from mlflow_recsys.tracking._redact import hide_run_links_with_credentials

    monkeypatch.delenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", raising=False)
    assert not hide_run_links_with_credentials("http://tracking.example:5000")
    assert "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT" not in os.environ
    assert hide_run_links_with_credentials("https://alice:s3cret@tracking.example")
    assert os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] == "true"


# A blank address is the option left out (a local Ray), as every empty option is.
@pytest.mark.parametrize("address", ["not an address", "10.0.0.5", "http://head:6379", "head:port", " x"])
def test_a_malformed_ray_address_is_refused_before_anything(tmp_path, monkeypatch, env_store, address):
    pytest.importorskip("ray")
    from mlflow_recsys.cli import cli

    result = CliRunner().invoke(cli, ["study", "--executor", "ray", "--ray-address", address])
    assert result.exit_code == 1, result.output
    assert "ValueError: ray_address: expected 'auto' or a Ray cluster address such as 10.0.0.5:6379" in result.output
    assert not (tmp_path / "m.db").exists()


@pytest.mark.parametrize(
    "executor, device, message",
    [
        ("sequential", "cuda:x", "device: expected a torch device string such as 'cpu' or 'cuda', found 'cuda:x'"),
        ("ray", "gpu", "device: expected a torch device string such as 'cpu' or 'cuda', found 'gpu'"),
        (
            "ray",
            "meta",
            "device: expected a torch device string such as 'cpu' or 'cuda', found 'meta'; the models run on ",
        ),
    ],
)
def test_a_device_torch_cannot_read_is_refused_before_any_run(
    tmp_path, monkeypatch, env_store, executor, device, message
):
    if executor == "ray":
        pytest.importorskip("ray")
    from mlflow_recsys.cli import cli

    result = CliRunner().invoke(cli, ["study", "--executor", executor, "--device", device])
    assert result.exit_code == 1 and message in result.output, result.output
    assert not (tmp_path / "m.db").exists()


def test_the_sequential_executor_refuses_a_gpu_this_machine_lacks_before_any_run(tmp_path, monkeypatch, env_store):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from mlflow_recsys.cli import cli

    result = CliRunner().invoke(cli, ["study", "--device", "cuda"])
    assert result.exit_code == 1 and "device: expected a device this machine has, found 'cuda'" in result.output
    assert not (tmp_path / "m.db").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seeds", "0,1,0"], "ValueError: seeds: expected each seed once, found 0 more than once in [0, 1, 0]"),
        (["--latent-dim", "0"], "ValueError: latent_dim: expected an integer in [1, 65,536], found 0"),
    ],
)
def test_settings_every_training_shares_are_refused_before_any_run(tmp_path, monkeypatch, env_store, args, message):
    from mlflow_recsys.cli import cli

    result = CliRunner().invoke(cli, ["study", *args])
    assert result.exit_code == 1 and message in result.output
    assert not (tmp_path / "m.db").exists()


def test_seeds_that_are_not_integers_are_refused_by_option_name_before_any_run(tmp_path, monkeypatch, env_store):
    from mlflow_recsys.cli import cli

    result = CliRunner().invoke(cli, ["study", "--seeds", "0,x"])
    assert result.exit_code == 2, result.output
    assert "Invalid value for --seeds: expected comma-separated integers, found '0,x'" in result.output
    assert not (tmp_path / "m.db").exists()


@pytest.mark.parametrize(
    "given, error, message",
    [
        ({"seeds": "01"}, ValueError, "seeds: expected a list of integer seeds (in order), found '01'"),
        ({"seeds": {0, 1}}, ValueError, "seeds: expected a list of integer seeds (in order), found {0, 1}"),
        ({"seeds": [0, 1.5]}, ValueError, "seeds: expected an integer, found 1.5"),
        ({"seeds": [0, True]}, ValueError, "seeds: expected an integer, found True"),
        ({"seeds": [0, "1"]}, ValueError, "seeds: expected an integer, found '1'"),
        (
            {"seeds": (s for s in (0, 0))},
            ValueError,
            "seeds: expected each seed once, found 0 more than once in [0, 0]",
        ),
        ({"echo": None}, TypeError, "echo: expected a callable that takes one line of text, found None"),
        ({"echo": "log"}, TypeError, "echo: expected a callable that takes one line of text, found 'log'"),
    ],
)
def test_run_study_refuses_seeds_of_the_wrong_kind_and_an_echo_it_cannot_call_before_any_run(
    tmp_path, monkeypatch, env_store, given, error, message
):
    from mlflow_recsys.tracking._study import run_study

    with pytest.raises(error) as refused:
        echo = given.pop("echo", print)
        run_study(small_study(**given), project_uri=str(PROJECT), echo=echo)
    assert str(refused.value) == message
    assert not (tmp_path / "m.db").exists()


#: A socket path of a real local Ray (2.60, started without its dashboard), as it named it under /tmp/rs.HV0F.
RAY_SOCKET_SEEN = "/tmp/rs.HV0F/session_2026-12-02_17-06-27_755956_13205/sockets/plasma_store"


def room_for_ray_tmpdir() -> int:
    """By hand, from the path Ray built: 107 bytes less everything after its folder, for this process's id."""
    after_folder = "/ray-12345678" + RAY_SOCKET_SEEN[len("/tmp/rs.HV0F") :].replace("13205", str(os.getpid()))
    return 107 - len(after_folder)


def folder_of(tmp: Path, size: int) -> Path:
    """A folder whose absolute path is exactly ``size`` bytes long (``tmp`` is shorter)."""
    folder = tmp / ("r" * (size - len(str(tmp)) - 1))
    folder.mkdir()
    assert len(str(folder)) == size
    return folder


def test_ray_socket_path_length_is_checked_as_ray_counts_it(monkeypatch):
    from mlflow_recsys.tracking._executors import check_ray_socket_paths

    room = room_for_ray_tmpdir()
    assert 30 <= room <= 36  # process ids of 1 to 7 digits
    short = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))
    try:
        fits = folder_of(short, room)
        monkeypatch.setenv("RAY_TMPDIR", str(fits))
        assert check_ray_socket_paths() == str(fits)
        too_long = folder_of(short, room + 1)
        monkeypatch.setenv("RAY_TMPDIR", str(too_long))
        with pytest.raises(ValueError) as refused:
            check_ray_socket_paths()
        message = str(refused.value)
        assert message.startswith(f"RAY_TMPDIR: expected a folder of at most {room} bytes")
        assert f"found {str(too_long)!r} ({room + 1} bytes)" in message and "within the 107 bytes" in message
        # The issue's folder of 28 characters fits now; under the old ray-study-XXXXXXXX it left 107 - 109 bytes.
        issue = folder_of(short, 28)
        monkeypatch.setenv("RAY_TMPDIR", str(issue))
        assert check_ray_socket_paths() == str(issue)
        # With the 5-digit process id of the path Ray built, the old folder name passed the limit, the new one fits.
        tail = RAY_SOCKET_SEEN[len("/tmp/rs.HV0F") :]
        assert 28 + len("/ray-study-12345678") + len(tail) > 107 >= 28 + len("/ray-12345678") + len(tail)
    finally:
        shutil.rmtree(short)


@pytest.mark.ray  # needs the ray extra, which make ray-test installs
def test_a_study_with_a_long_ray_tmpdir_is_refused_before_any_run(tmp_path, monkeypatch, env_store):
    import ray

    from mlflow_recsys.tracking._study import run_study

    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    long_folder = folder_of(tmp_path, max(len(str(tmp_path)) + 2, room_for_ray_tmpdir() + 1))
    monkeypatch.setenv("RAY_TMPDIR", str(long_folder))
    with pytest.raises(ValueError, match=rf"^RAY_TMPDIR: expected a folder of at most {room_for_ray_tmpdir()} bytes"):
        run_study(small_study(executor="ray"), project_uri=str(PROJECT), echo=lambda _: None)
    assert not ray.is_initialized() and list(long_folder.iterdir()) == []
    assert MlflowClient().search_runs([e.experiment_id for e in MlflowClient().search_experiments()]) == []


@pytest.mark.ray
def test_the_socket_path_check_matches_the_path_a_real_ray_builds(monkeypatch):
    import ray

    from mlflow_recsys.tracking._executors import RayExecutor

    room = room_for_ray_tmpdir()
    short = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))
    try:
        monkeypatch.setenv("RAY_TMPDIR", str(folder_of(short, room)))
        monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        executor = RayExecutor()
        with executor.started([], echo=lambda _: None):
            executor._start([], lambda _: None)  # a local Ray at the longest folder the check allows
            assert ray.is_initialized()
            sockets = sorted(p for p in short.rglob("sockets/*"))
        assert [p.name for p in sockets] == ["plasma_store", "raylet"]
        assert len(str(sockets[0]).encode()) == 107  # exactly at the limit, as computed
    finally:
        shutil.rmtree(short, ignore_errors=True)
