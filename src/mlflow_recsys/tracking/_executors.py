"""Where a study's trainings run: one after another through ``mlflow run``, or as tasks on Ray.

Both executors give back one :class:`TrainingOutcome` per :class:`Training`, failed ones included: a training
that fails does not stop the others. Each training logs its own ``train`` run, a child of the study run, to the
study's tracking URI. Ray (``pip install "mlflow-recsys[ray]"``) is imported only when a Ray executor is made.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import mlflow
import mlflow.projects
from mlflow.exceptions import ExecutionException
from mlflow.tracking import MlflowClient
from mlflow.tracking.context.registry import resolve_tags
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

from mlflow_recsys._digests import shorten
from mlflow_recsys.errors import failure_text
from mlflow_recsys.models._train_config import DEFAULT_METRICS, TrainConfig
from mlflow_recsys.tracking import _tags as tags
from mlflow_recsys.tracking._context import RUN_ID_ENV, absolute_sqlite_uri
from mlflow_recsys.tracking._plugin import COMMAND_ENV
from mlflow_recsys.tracking._redact import SUPPRESS_RUN_LINKS_ENV, redact
from mlflow_recsys.tracking._runs import FAILED, KILLED, RUNNING
from mlflow_recsys.tracking._study_settings import EXECUTORS
from mlflow_recsys.tracking._training import run_train

RAY_MISSING = 'executor: Ray is not installed; pip install "mlflow-recsys[ray]"'

#: What a Ray worker must not inherit from the study's process: the study's run and experiment.
_NOT_FORWARDED = frozenset({"MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME"})

#: ``auto``, or ``[ray://]host:port`` (a bracketed IPv6 host too).
_RAY_ADDRESS = re.compile(r"auto|(?:ray://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):\d{1,5}")

_RAY_FOLDER_PREFIX = "ray-"  # tempfile.mkdtemp adds 8 characters

#: The longer of the two sockets (``plasma_store``, ``raylet``) Ray makes without its dashboard
#: (``ray._private.node.Node._prepare_socket_file``).
_RAY_LONGEST_SOCKET = "plasma_store"

#: How ``mlflow.projects.run`` names the run of a step that failed (``mlflow.projects._wait_for``).
FAILED_PROJECT_RUN = re.compile(r"Run \(ID '(\w+)'\) failed")


@dataclass(frozen=True)
class Training:
    """One training of a study: a registered model, its hyper-parameters (the seed among them), its run name
    (``ELSA seed 1``), the ``recsys.config`` and ``recsys.seed`` tags its run will hold, by which a rerun finds it on
    the same split, and the candidate a comparison will count it as (``EASE(l2=50)`` for one configuration of a
    grid)."""

    model: str
    hyperparameters: Mapping[str, object]
    run_name: str
    config: str
    seed: str
    candidate: str
    register: str | None = None  # the registered model its logged model becomes a version of

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.model, self.config, self.seed)

    @property
    def device(self) -> str:
        return str(self.hyperparameters.get("device", "cpu"))


@dataclass(frozen=True)
class TrainingTarget:
    """The split's checkpoint, the experiment, the study run each training's run is a child of, and the metric keys
    every training scores."""

    checkpoint: str
    experiment_id: str
    parent_run_id: str
    metrics: tuple[str, ...] = DEFAULT_METRICS


@dataclass(frozen=True)
class TrainingOutcome:
    """``trained`` (a new FINISHED run), ``reused`` (an earlier study's FINISHED run) or ``failed`` (``reason``
    says why; ``run_id`` is the FAILED run, or ``None`` if none was made)."""

    training: Training
    status: Literal["trained", "reused", "failed"]
    run_id: str | None
    reason: str | None = None
    seconds: float | None = field(default=None, compare=False)

    @property
    def usable(self) -> bool:
        return self.status != "failed"


Echo = Callable[[str], None]


class Executor(Protocol):
    """What runs a study's trainings (:class:`SequentialExecutor`, :class:`RayExecutor`; :func:`make_executor`)."""

    name: str  # one of EXECUTORS

    def started(self, trainings: Sequence[Training], *, echo: Echo) -> contextlib.AbstractContextManager[None]:
        """Check the trainings can be placed and set up what :meth:`run` needs, before the study makes any run."""
        ...

    def run(self, trainings: Sequence[Training], target: TrainingTarget, *, echo: Echo) -> list[TrainingOutcome]:
        """Each training's outcome, in the order given; a failed training is an outcome, not an error."""
        ...


def make_executor(name: str, *, ray_address: str | None = None, project_uri: str = ".") -> Executor:
    """The executor called ``name``: :class:`SequentialExecutor` or :class:`RayExecutor`. A ValueError for a name
    not in :data:`EXECUTORS`, a ``ray_address`` given to the sequential one or of another form than ``auto`` or
    ``[ray://]host:port``; ImportError (:data:`RAY_MISSING`) for ``ray`` without Ray."""
    if name == "sequential":
        if ray_address is not None:
            raise ValueError(
                f"ray_address: only the ray executor joins a Ray cluster, found {ray_address!r} "
                "with executor 'sequential'; add --executor ray or drop --ray-address"
            )
        return SequentialExecutor(project_uri=project_uri)
    if name == "ray":
        return RayExecutor(address=ray_address)
    raise ValueError(f"executor: expected one of {EXECUTORS}, found {name!r}")


@dataclass(frozen=True, kw_only=True)
class SequentialExecutor:
    """One ``train`` entry point of the ``MLproject`` at ``project_uri`` after another, each in its own process:
    what a user runs alone with ``mlflow run . -e train``."""

    project_uri: str = "."
    name = "sequential"

    @contextlib.contextmanager
    def started(self, trainings: Sequence[Training], *, echo: Echo) -> Iterator[None]:
        """Nothing to start; a ValueError for a device this machine lacks (``cuda`` without a GPU)."""
        from mlflow_recsys.models._device import check_device

        for device in sorted({t.device for t in trainings} - {"cpu"}):
            check_device(device)
        yield

    def run(self, trainings: Sequence[Training], target: TrainingTarget, *, echo: Echo) -> list[TrainingOutcome]:
        steps = EntryPoints(self.project_uri, target.experiment_id, target.parent_run_id, echo)
        return [self._run_one(t, target, steps) for t in trainings]

    def _run_one(self, training: Training, target: TrainingTarget, steps: EntryPoints) -> TrainingOutcome:
        client = MlflowClient()
        started = time.perf_counter()
        try:
            parameters = {
                "checkpoint": target.checkpoint,
                "model": training.model,
                "metrics": ",".join(target.metrics),
                **training.hyperparameters,
                **({"register": training.register} if training.register else {}),
            }
            run_id = steps.run("train", training.run_name, parameters)
        except ExecutionException as exc:
            # MLflow has marked the step's run FAILED; its message is the one place that names the run.
            found = FAILED_PROJECT_RUN.search(exc.message)
            if found is None:  # the step did not start (a bad project or parameter): no run was made
                return TrainingOutcome(training, "failed", None, redact(f"the train step did not start: {exc.message}"))
            run_id = found.group(1)
            client.set_tag(run_id, MLFLOW_PARENT_RUN_ID, target.parent_run_id)
            # The step's own output (above) says why; a step that recorded its reason on the run says it here too.
            reason = (
                client.get_run(run_id).data.tags.get(tags.ERROR) or "the train step failed; its output above says why"
            )
            client.set_tag(run_id, tags.ERROR, reason)
            return TrainingOutcome(training, "failed", run_id, reason, time.perf_counter() - started)
        return TrainingOutcome(training, "trained", run_id, seconds=time.perf_counter() - started)


@dataclass(frozen=True)
class EntryPoints:
    """The entry points of the ``MLproject`` at ``project_uri``, each run as a child run of ``parent_run_id``."""

    project_uri: str
    experiment_id: str
    parent_run_id: str
    echo: Echo

    def run(self, entry_point: str, run_name: str, parameters: Mapping[str, object]) -> str:
        """The step's run id; MLflow's ExecutionException if it fails (MLflow marks its run FAILED)."""
        self.echo(f"\n== {run_name} ==")
        # Synchronous: the entry point's command runs as a child of this process (asynchronous runs go through
        # an `mlflow run` process of their own, which refuses an experiment id beside MLFLOW_EXPERIMENT_NAME).
        run_id = mlflow.projects.run(
            self.project_uri,
            entry_point=entry_point,
            parameters=dict(parameters),
            env_manager="local",
            experiment_id=self.experiment_id,
            run_name=run_name,
            synchronous=True,
        ).run_id
        MlflowClient().set_tag(run_id, MLFLOW_PARENT_RUN_ID, self.parent_run_id)
        return run_id


class RayExecutor:
    """Every training one Ray task, all submitted at once; Ray runs as many at a time as it has resources.

    A task asks for one CPU, and one GPU when the device is CUDA (Ray then makes that GPU the task's only visible
    one, so ``cuda:N`` becomes ``cuda``), and calls :func:`~mlflow_recsys.tracking._training.run_train` in the
    worker, logging to a run the study made for it. The ``MLFLOW_*`` variables (credentials included) reach the task
    as one of its arguments, not in Ray's runtime environment, which Ray writes in clear text to its logs.

    ``address``: ``None`` starts a Ray on this machine for this study only, in a new ``ray-*`` folder under
    ``RAY_TMPDIR`` or the system's temporary folder, where ``auto`` does not look (see
    :func:`check_ray_socket_paths`); ``"auto"`` joins this machine's cluster (``RAY_ADDRESS``, or ``ray
    start``'s); anything else is a cluster address (``10.0.0.5:6379``, ``ray://head:10001``). A Ray already
    initialised in this process is used as it is. Raises ImportError (:data:`RAY_MISSING`) without Ray, and
    ValueError for an address of another form.
    """

    name = "ray"

    def __init__(self, *, address: str | None = None):
        if address is not None and (not isinstance(address, str) or not _RAY_ADDRESS.fullmatch(address)):
            raise ValueError(
                f"ray_address: expected 'auto' or a Ray cluster address such as 10.0.0.5:6379 or "
                f"ray://head:10001, found {redact(str(address))[:200]!r}"
            )
        self.address = address
        try:
            import ray
        except ModuleNotFoundError as exc:
            if exc.name != "ray":  # Ray is there, but something it needs is not: that error says what
                raise
            raise ImportError(RAY_MISSING, name="ray") from None
        self._ray = ray
        self._started_here = False

    @contextlib.contextmanager
    def started(self, trainings: Sequence[Training], *, echo: Echo) -> Iterator[None]:
        """Join the cluster at ``address`` now, so a wrong one fails the study before any run, or check that a
        local Ray could place the trainings (it starts only when :meth:`run` has something to train); on exit,
        shut down the Ray this executor started or joined.

        Raises ValueError for a device that is not a torch device, or CUDA where the local Ray would have no
        GPU, or socket paths too long (:func:`check_ray_socket_paths`); ConnectionError if no cluster answers.
        """
        from mlflow_recsys.models._device import check_device_form

        for device in {t.device for t in trainings}:
            check_device_form(device)
        if self.address is None and not self._ray.is_initialized():
            on_gpu = [t.run_name for t in trainings if _on_gpu(t.device)]
            if on_gpu and _machine_gpus() < 1:
                raise ValueError(
                    f"device: {', '.join(on_gpu)} ask Ray for a GPU each, and this machine (the local Ray) "
                    "has none; use --device cpu, or join a cluster with GPUs (--ray-address)"
                )
            check_ray_socket_paths()
        if self.address is not None:
            self._start(trainings, echo)
        try:
            yield
        finally:
            if self._started_here:
                self._ray.shutdown()
                self._started_here = False

    def _start(self, trainings: Sequence[Training], echo: Echo) -> None:
        ray = self._ray
        if not ray.is_initialized():
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            if self.address not in (None, "auto"):
                _probe(self.address)
            with _keeping_sigterm_handler():
                if self.address is None:
                    # "local", not None: None would join a Ray already running on this machine. A folder of its
                    # own, because Ray records the newest cluster in its default folder, where `--ray-address
                    # auto` of another study would find this private one and lose its tasks when this one ends.
                    affinity = getattr(os, "sched_getaffinity", None)  # a container's share; none on macOS
                    ray.init(
                        address="local",
                        num_cpus=len(affinity(0)) if affinity else os.cpu_count() or 1,
                        num_gpus=_machine_gpus(),
                        include_dashboard=False,
                        _temp_dir=tempfile.mkdtemp(prefix=_RAY_FOLDER_PREFIX, dir=check_ray_socket_paths()),
                    )
                else:
                    ray.init(address=self.address)
            self._started_here = True
        resources = ray.cluster_resources()
        echo(
            f"Ray: {resources.get('CPU', 0):g} CPUs and {resources.get('GPU', 0):g} GPUs for {len(trainings)} trainings"
        )
        on_gpu = [t for t in trainings if _on_gpu(t.device)]
        if on_gpu and resources.get("GPU", 0) < 1:  # a cluster's autoscaler may still add a GPU node
            echo(
                f"warning: {', '.join(t.run_name for t in on_gpu)} ask Ray for a GPU each, and the Ray cluster has "
                "none now; they wait until a GPU joins"
            )

    def run(self, trainings: Sequence[Training], target: TrainingTarget, *, echo: Echo) -> list[TrainingOutcome]:
        """Submit every training, then collect each outcome as its task ends. On an interrupt (Ctrl-C, SIGTERM)
        the tasks not yet ended are cancelled and their runs marked KILLED."""
        self._start(trainings, echo)
        client = MlflowClient()
        submitted: dict = {}
        outcomes: dict = {}
        received: list[int] = []
        try:
            # A signal handler that raises inside Ray's wait comes out as a SystemError, so signals only stop
            # the loop there, and are raised again, with this process's own handlers, once it has returned.
            with _deferred_signals(received):
                for ref, entry in self._submitted(trainings, target, client, echo):
                    submitted[ref] = entry
                    if received:
                        break
                pending = list(submitted)
                while pending and not received:
                    done, pending = self._ray.wait(pending, num_returns=1, timeout=1.0)
                    for ref in done:
                        outcomes[ref] = self._collect(ref, submitted[ref], client, echo)
            for signum in received[:1]:
                signal.raise_signal(signum)  # SIGTERM: the CLI's handler raises Terminated; SIGINT: Ctrl-C
        except BaseException:  # Ctrl-C, SIGTERM, or the tracking server gone: stop what still runs, and say so
            for ref, (_, run_id, _) in submitted.items():
                if ref not in outcomes:
                    with contextlib.suppress(Exception):
                        self._ray.cancel(ref, force=True)
                    with contextlib.suppress(Exception):
                        _end_if_running(client, run_id, KILLED)
            raise
        return [outcomes[ref] for ref in submitted]  # in the order given

    def _submitted(
        self, trainings: Sequence[Training], target: TrainingTarget, client, echo: Echo
    ) -> Iterator[tuple[object, tuple[Training, str, float]]]:
        """Make each training's run and hand it to Ray; yield (task, (training, run id, submission time)) one by
        one, so that the caller may stop submitting when a signal comes."""
        task = self._ray.remote(train_in_worker)
        environment = worker_environment()
        for training in trainings:
            run = client.create_run(
                target.experiment_id,
                run_name=training.run_name,
                tags=resolve_tags({MLFLOW_PARENT_RUN_ID: target.parent_run_id}),
            )  # RUNNING, under the study run, as `mlflow run` makes one for its entry point
            run_id, gpus = run.info.run_id, 1 if _on_gpu(training.device) else 0
            ref = task.options(num_cpus=1, num_gpus=gpus, max_retries=0, name=training.run_name).remote(
                run_id, training, target, environment
            )
            echo(f"submitted {training.run_name} (run {run_id}; 1 CPU{', 1 GPU' if gpus else ''})")
            yield ref, (training, run_id, time.perf_counter())

    def _collect(self, ref, submitted: tuple[Training, str, float], client, echo: Echo) -> TrainingOutcome:
        training, run_id, started = submitted
        seconds = time.perf_counter() - started
        try:
            self._ray.get(ref)
        except Exception as exc:  # the task's exception (as Ray's RayTaskError), or Ray's own (a worker died)
            reason = _reason(exc)
            _end_if_running(client, run_id, FAILED)
            client.set_tag(run_id, tags.ERROR, reason)
            echo(f"{training.run_name} FAILED, {seconds:.1f} s after submission (run {run_id}): {reason}")
            echo(redact(str(exc)))
            return TrainingOutcome(training, "failed", run_id, reason, seconds)
        echo(f"{training.run_name} finished, {seconds:.1f} s after submission (run {run_id})")
        return TrainingOutcome(training, "trained", run_id, seconds=seconds)


def train_in_worker(run_id: str, training: Training, target: TrainingTarget, environment: Mapping[str, str]) -> str:
    """The body of a Ray task: :func:`~mlflow_recsys.tracking._training.run_train` logging into run ``run_id``,
    with ``environment`` (:func:`worker_environment`) and ``MLFLOW_RUN_ID`` set for the length of the call (a
    worker runs one task after another), as ``mlflow run`` hands its run to an entry point."""
    hyperparameters = dict(training.hyperparameters)
    if _on_gpu(str(hyperparameters.get("device", "cpu"))):
        hyperparameters["device"] = "cuda"  # the GPU Ray gave this task, the only one it sees
    with _environment({**environment, RUN_ID_ENV: run_id}, removed=_NOT_FORWARDED):
        # Checked here, not by the study: the device must exist on the machine that trains.
        config = TrainConfig(training.model, hyperparameters, metrics=target.metrics, register=training.register)
        return run_train(target.checkpoint, config)


@contextlib.contextmanager
def _environment(values: Mapping[str, str], *, removed: frozenset[str]) -> Iterator[None]:
    keys = set(values) | set(removed)
    before = {k: os.environ.get(k) for k in keys}
    for key in removed:
        os.environ.pop(key, None)
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def _deferred_signals(received: list[int]) -> Iterator[None]:
    """SIGINT and SIGTERM appended to ``received`` instead of handled (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum in previous:
        signal.signal(signum, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def _keeping_sigterm_handler() -> Iterator[None]:
    """Put back the SIGTERM handler ``ray.init`` replaces with a bare ``sys.exit``: the CLI's unwinds the study
    so its runs end FAILED and say why."""
    handler = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    try:
        yield
    finally:
        if handler is not None:
            signal.signal(signal.SIGTERM, handler)


def worker_environment() -> dict[str, str]:
    """This process's ``MLFLOW_*`` variables but its run and experiment, with the tracking URI as MLflow resolves
    it here (a relative SQLite path made absolute), ``MLFLOW_RECSYS_COMMAND=train``, and MLflow's run links off
    when the URI holds credentials: what a Ray task needs to log where the study logs."""
    uri = absolute_sqlite_uri(mlflow.get_tracking_uri())
    env = {k: v for k, v in os.environ.items() if k.startswith("MLFLOW_") and k not in _NOT_FORWARDED}
    env["MLFLOW_TRACKING_URI"] = uri
    env[COMMAND_ENV] = "train"  # the runs' recsys.command, as under the sequential executor
    if redact(uri) != uri:
        env[SUPPRESS_RUN_LINKS_ENV] = "true"
    return env


def _probe(address: str, timeout: float = 10.0) -> None:
    """A ConnectionError unless something accepts a TCP connection at ``address``: ``ray.init`` retries an
    address where nothing answers for minutes on end."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(
            f"ray_address: no Ray cluster answers at {address!r} ({exc}); start one there with "
            "`ray start --head`, or check the address"
        ) from None


def check_ray_socket_paths() -> str:
    """The folder a study's local Ray makes its session folder in, checked short enough before the split: Ray
    refuses a socket path over 107 bytes (103 on macOS; ``ray._private.utils.validate_socket_filepath``)."""
    given = os.environ.get("RAY_TMPDIR")
    folder = os.path.abspath(given) if given else tempfile.gettempdir()
    if sys.platform == "win32":  # Ray uses TCP there, not Unix sockets
        return folder
    limit = (104 if sys.platform.startswith("darwin") else 108) - 1
    session = f"session_{'0000-00-00_00-00-00_000000'}_{os.getpid()}"
    tail = os.path.join(_RAY_FOLDER_PREFIX + "x" * 8, session, "sockets", _RAY_LONGEST_SOCKET)
    room = limit - len(tail.encode()) - 1  # the separator before the tail
    size = len(folder.encode())
    if size > room:
        name = "RAY_TMPDIR" if given else "TMPDIR (the system's temporary folder; RAY_TMPDIR is unset)"
        raise ValueError(
            f"{name}: expected a folder of at most {room} bytes, so that the local Ray's longest socket path "
            f"({os.path.join(folder, tail)}) stays within the {limit} bytes a Unix socket path may have, found "
            f"{folder!r} ({size} bytes); set RAY_TMPDIR to a shorter folder, e.g. /tmp"
        )
    return folder


def _machine_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _on_gpu(device: str) -> bool:
    return device.split(":", 1)[0] == "cuda"


def _end_if_running(client, run_id: str, status: str) -> None:
    """End the run with ``status`` unless it has ended already (a failed step ends its own run FAILED)."""
    if client.get_run(run_id).info.status == RUNNING:
        client.set_terminated(run_id, status)


def _reason(exc: BaseException) -> str:
    """One line: the training's own exception (Ray keeps it as ``cause``), else Ray's, by its innermost system
    failure if it has one (:func:`~mlflow_recsys.errors.failure_text`)."""
    cause = getattr(exc, "cause", None) or exc
    lines = [line for line in failure_text(cause).splitlines() if line.strip()]
    return shorten(redact(lines[0] if lines else type(cause).__name__), 1000)
