"""Where a study's trainings run: one after another through ``mlflow run``, or as tasks on Ray.

Both executors take the same list of :class:`Training` and give back one :class:`TrainingOutcome` per training,
failed ones included: a training that fails does not stop the others. Each training logs its own ``train`` run,
a child of the study run (tag ``mlflow.parentRunId``), to the study's tracking URI. Neither executor schedules
anything itself: the sequential one is ``mlflow.projects.run`` in a loop, the Ray one hands every training to
Ray as one task and waits for them.

Ray is an optional dependency (``pip install "mlflow-recsys[ray]"``), imported only when a Ray executor is made.
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
from mlflow_recsys.models.train_config import TrainConfig
from mlflow_recsys.tracking import tags
from mlflow_recsys.tracking.context import RUN_ID_ENV, absolute_sqlite_uri
from mlflow_recsys.tracking.plugin import COMMAND_ENV
from mlflow_recsys.tracking.redact import SUPPRESS_RUN_LINKS_ENV, redact
from mlflow_recsys.tracking.runs import FAILED, KILLED, RUNNING
from mlflow_recsys.tracking.training import run_train

#: The executors ``mlflow-recsys study --executor`` offers.
EXECUTORS = ("sequential", "ray")
ExecutorName = Literal["sequential", "ray"]

#: What ``--executor ray`` says when Ray is missing.
RAY_MISSING = 'executor: Ray is not installed; pip install "mlflow-recsys[ray]"'

#: Variables a Ray worker must not inherit from the study's process: the study's own run (``mlflow run`` sets
#: it for the study) and its experiment (each training's run already belongs to one).
_NOT_FORWARDED = frozenset({"MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME"})

#: What ``--ray-address`` accepts: ``auto``, or ``[ray://]host:port`` (a bracketed IPv6 host too).
_RAY_ADDRESS = re.compile(r"auto|(?:ray://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):\d{1,5}")

#: The prefix of the folder a study's local Ray keeps its session in (``tempfile.mkdtemp`` adds 8 characters).
_RAY_FOLDER_PREFIX = "ray-"

#: The longest file name Ray gives a socket of its session's ``sockets`` folder when it starts without its
#: dashboard, as here: ``plasma_store`` and ``raylet`` (``ray._private.node.Node._prepare_socket_file``).
_RAY_LONGEST_SOCKET = "plasma_store"

#: How ``mlflow.projects.run`` names the run of a step that failed (``mlflow.projects._wait_for``).
_FAILED_PROJECT_RUN = re.compile(r"Run \(ID '(\w+)'\) failed")


@dataclass(frozen=True)
class Training:
    """One training of a study: a registered model, its hyper-parameters (the seed among them) and its run name
    (``ELSA seed 1``, ``EASE``), which says model and seed.

    ``config`` and ``seed`` are the values the finished run's ``recsys.config`` and ``recsys.seed`` tags will
    hold; with the model and the split digest they identify a training, so a rerun of the study can reuse it.
    """

    model: str
    hyperparameters: Mapping[str, object]
    run_name: str
    config: str
    seed: str

    @property
    def key(self) -> tuple[str, str, str]:
        """``(model, config, seed)``: what a finished run must match, on the same split, to stand for this one."""
        return (self.model, self.config, self.seed)

    @property
    def device(self) -> str:
        return str(self.hyperparameters.get("device", "cpu"))


@dataclass(frozen=True)
class TrainingTarget:
    """Where a study's trainings read and log: the split's checkpoint, the experiment, and the study run each
    training's run is a child of."""

    checkpoint: str
    experiment_id: str
    parent_run_id: str


@dataclass(frozen=True)
class TrainingOutcome:
    """What became of one training: ``trained`` (a new FINISHED run), ``reused`` (a FINISHED run of an earlier
    study) or ``failed`` (``reason`` says why; ``run_id`` is the FAILED run, or ``None`` if none was made)."""

    training: Training
    status: Literal["trained", "reused", "failed"]
    run_id: str | None
    reason: str | None = None
    seconds: float | None = field(default=None, compare=False)

    @property
    def usable(self) -> bool:
        """Whether the run can be compared: it FINISHED, now or in an earlier study."""
        return self.status != "failed"


#: Where an executor writes its progress, a line at a time.
Echo = Callable[[str], None]


class Executor(Protocol):
    """What runs a study's trainings (:class:`SequentialExecutor`, :class:`RayExecutor`; :func:`make_executor`)."""

    #: One of :data:`EXECUTORS`, as the study's params and notes name it.
    name: str

    def started(self, trainings: Sequence[Training], *, echo: Echo) -> contextlib.AbstractContextManager[None]:
        """A context in which :meth:`run` may be called: checks the trainings can be placed, and sets up (and
        on exit tears down) what the executor needs, before the study makes any run."""
        ...

    def run(self, trainings: Sequence[Training], target: TrainingTarget, *, echo: Echo) -> list[TrainingOutcome]:
        """Each training's outcome, in the order given; a failed training is an outcome, not an error."""
        ...


def make_executor(name: str, *, ray_address: str | None = None, project_uri: str = ".") -> Executor:
    """The executor called ``name``: :class:`SequentialExecutor` or :class:`RayExecutor`.

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`EXECUTORS`, ``ray_address`` is given to the sequential executor, or it
        is neither ``auto`` nor ``[ray://]host:port``.
    ImportError
        For ``ray`` when Ray is not installed; the message says how to install it (:data:`RAY_MISSING`).
    """
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


class SequentialExecutor:
    """One ``train`` entry point after another (``mlflow.projects.run`` with ``env_manager="local"``).

    Each training is the ``MLproject``'s ``train`` entry point at ``project_uri``, run in its own process: exactly
    what a user runs alone with ``mlflow run . -e train``.
    """

    name = "sequential"

    def __init__(self, *, project_uri: str = "."):
        self.project_uri = project_uri

    @contextlib.contextmanager
    def started(self, trainings: Sequence[Training], *, echo: Echo) -> Iterator[None]:
        """Nothing to start: the trainings run on this machine as they come.

        Raises
        ------
        ValueError
            If a training's device is one this machine does not have (``cuda`` without a GPU), before any run.
        """
        from mlflow_recsys.models.elsa import check_device

        for device in sorted({t.device for t in trainings} - {"cpu"}):
            check_device(device)
        yield

    def run(self, trainings: Sequence[Training], target: TrainingTarget, *, echo: Echo) -> list[TrainingOutcome]:
        """Run each training in turn; a failed one is recorded and the next one starts."""
        return [self._run_one(t, target, echo) for t in trainings]

    def _run_one(self, training: Training, target: TrainingTarget, echo: Echo) -> TrainingOutcome:
        echo(f"\n== {training.run_name} ==")
        client = MlflowClient()
        started = time.perf_counter()
        try:
            # Synchronous: the entry point's command runs as a child of this process (asynchronous runs go through
            # an `mlflow run` process of their own, which refuses an experiment id beside MLFLOW_EXPERIMENT_NAME).
            run_id = mlflow.projects.run(
                self.project_uri,
                entry_point="train",
                experiment_id=target.experiment_id,
                run_name=training.run_name,
                parameters={"checkpoint": target.checkpoint, "model": training.model, **training.hyperparameters},
                env_manager="local",
                synchronous=True,
            ).run_id
        except ExecutionException as exc:
            # MLflow has marked the step's run FAILED; its message is the one place that names the run.
            found = _FAILED_PROJECT_RUN.search(exc.message)
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
        client.set_tag(run_id, MLFLOW_PARENT_RUN_ID, target.parent_run_id)
        return TrainingOutcome(training, "trained", run_id, seconds=time.perf_counter() - started)


class RayExecutor:
    """Every training one Ray task, all submitted at once; Ray runs as many at a time as it has resources.

    A task asks Ray for one CPU, and for one GPU as well when the training's device is CUDA (Ray then makes
    that GPU the task's only visible one, so ``cuda:N`` becomes ``cuda``). It calls
    :func:`~mlflow_recsys.tracking.training.run_train`, the code behind the ``train`` entry point, inside the
    Ray worker, logging to a run the study made for it as a child of the study run. The tracking URI and any
    other ``MLFLOW_*`` variable (credentials included) reach the task as one of its arguments, held by Ray in
    memory, and are set in the worker's environment for the length of the task. They do not travel in Ray's
    runtime environment, which Ray writes in clear text to its logs (``/tmp/ray/session_*/logs``).

    Parameters
    ----------
    address : str, optional
        ``None``: start a Ray on this machine with its CPUs and GPUs, for this study only, even if another Ray
        runs here; its session folder (logs included) is a new ``ray-*`` folder under ``RAY_TMPDIR`` or the
        system's temporary folder, where ``auto`` does not look. That folder must be short enough for Ray's
        socket paths (see :func:`check_ray_socket_paths`). ``"auto"``: join the Ray cluster this machine
        belongs to (``RAY_ADDRESS``, or the one ``ray start`` began). Anything else is a cluster address
        (``10.0.0.5:6379``, ``ray://head:10001``). If Ray is already initialised in this process, its cluster is
        used and ``address`` is ignored.

    Raises
    ------
    ImportError
        If Ray is not installed (:data:`RAY_MISSING`).
    """

    name = "ray"

    def __init__(self, *, address: str | None = None):
        if address is not None and (not isinstance(address, str) or not _RAY_ADDRESS.fullmatch(address)):
            raise ValueError(
                f"ray_address: expected 'auto' or a Ray cluster address such as 10.0.0.5:6379 or "
                f"ray://head:10001, found {redact(str(address))[:200]!r}"
            )
        self.address = address
        self._ray = _import_ray()
        self._started_here = False

    @contextlib.contextmanager
    def started(self, trainings: Sequence[Training], *, echo: Echo) -> Iterator[None]:
        """Join the cluster at ``address`` now, or check that a local Ray could place the trainings; on exit, shut
        down the Ray this executor started or joined.

        A cluster is joined here, before the study makes any run, so a wrong or unreachable address fails the
        study at once. A local Ray starts only when :meth:`run` has something to train, so a rerun that reuses
        every training starts none.

        Raises
        ------
        ValueError
            If a training's device is not a torch device, or is CUDA and this machine, where the local Ray
            would run, has no GPU; or if the local Ray's socket paths would be too long
            (:func:`check_ray_socket_paths`).
        ConnectionError
            If no Ray cluster answers at ``address`` (Ray's own error).
        """
        from mlflow_recsys.models.elsa import check_device_form

        for device in {t.device for t in trainings}:
            check_device_form(device)
        if self.address is None and not self._ray.is_initialized():
            _require_gpus([t for t in trainings if _on_gpu(t.device)], _machine_gpus(), "this machine (the local Ray)")
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
        """Start or join Ray unless this process already has; say what it offers."""
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
                    ray.init(
                        address="local",
                        num_cpus=_machine_cpus(),
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
        """Submit every training, then collect each outcome as its task ends; failures are outcomes, not errors.

        Starts or joins Ray first (see :meth:`started`). On an interrupt (Ctrl-C, SIGTERM) the tasks not yet
        ended are cancelled and their runs marked KILLED.
        """
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
        """Make each training's run and hand the training to Ray; yield its task and (training, run id, time of
        submission), one by one, so that the caller may stop submitting when a signal comes."""
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
                run_id, training.model, dict(training.hyperparameters), target.checkpoint, environment
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


def train_in_worker(
    run_id: str, model: str, hyperparameters: dict, checkpoint: str, environment: Mapping[str, str]
) -> str:
    """The body of a Ray task: :func:`~mlflow_recsys.tracking.training.run_train` logging into run ``run_id``.

    For the length of the call (a Ray worker runs one task after another), the worker's environment holds
    ``environment`` (see :func:`worker_environment`: the tracking URI, credentials) and, as ``mlflow run``
    hands its run to an entry point, ``MLFLOW_RUN_ID=run_id``; the study's own experiment variables, which a
    local worker inherits, are removed.
    """
    hyperparameters = dict(hyperparameters)
    if _on_gpu(str(hyperparameters.get("device", "cpu"))):
        hyperparameters["device"] = "cuda"  # the GPU Ray gave this task, the only one it sees
    with _environment({**environment, RUN_ID_ENV: run_id}, removed=_NOT_FORWARDED):
        # Checked here, not by the study: the device must exist on the machine that trains.
        return run_train(checkpoint, TrainConfig(model, hyperparameters))


@contextlib.contextmanager
def _environment(values: Mapping[str, str], *, removed: frozenset[str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set and ``removed`` unset, put back as it was on exit."""
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
    """SIGINT and SIGTERM appended to ``received`` instead of handled, until the block ends (main thread only)."""
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
    """Put back this process's SIGTERM handler after ``ray.init``, which replaces it with a bare ``sys.exit``:
    the CLI's handler unwinds the study so its runs end FAILED and say why."""
    main_thread = threading.current_thread() is threading.main_thread()
    handler = signal.getsignal(signal.SIGTERM) if main_thread else None
    try:
        yield
    finally:
        if main_thread and handler is not None:
            signal.signal(signal.SIGTERM, handler)


def worker_environment() -> dict[str, str]:
    """The variables a Ray task needs to log where the study logs: ``MLFLOW_*`` of this process (the
    tracking URI, credentials, timeouts) but its run and experiment, with the tracking URI as MLflow resolves
    it here (a relative SQLite path made absolute) and ``MLFLOW_RECSYS_COMMAND=train``. A tracking URI with
    credentials also turns off MLflow's run links, which would print them."""
    uri = absolute_sqlite_uri(mlflow.get_tracking_uri())
    env = {k: v for k, v in os.environ.items() if k.startswith("MLFLOW_") and k not in _NOT_FORWARDED}
    env["MLFLOW_TRACKING_URI"] = uri
    env[COMMAND_ENV] = "train"  # the runs' recsys.command, as under the sequential executor
    if redact(uri) != uri:
        env[SUPPRESS_RUN_LINKS_ENV] = "true"
    return env


def _probe(address: str, timeout: float = 10.0) -> None:
    """Refuse ``address`` unless something accepts a TCP connection there: ``ray.init`` retries an address where
    nothing answers for minutes on end.

    Raises
    ------
    ConnectionError
        Naming the address and the socket's error.
    """
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(
            f"ray_address: no Ray cluster answers at {address!r} ({exc}); start one there with "
            "`ray start --head`, or check the address"
        ) from None


def check_ray_socket_paths() -> str:
    """The folder a study's local Ray makes its session folder in, once it is known to be short enough.

    Ray names its sockets ``<folder>/ray-XXXXXXXX/session_<YYYY-mm-dd_HH-MM-SS_ffffff>_<pid>/sockets/plasma_store``
    (``raylet`` beside it is shorter; ``ray._private.node.Node``) and refuses to start, after the study's split,
    when one is longer than a Unix socket path may be: 107 bytes on Linux, 103 on macOS
    (``ray._private.utils.validate_socket_filepath``). That longest path is computed here from ``<folder>``, this
    process's id (the Ray session's) and a timestamp of fixed width.

    Returns
    -------
    str
        ``RAY_TMPDIR`` made absolute, or the system's temporary folder (``tempfile.gettempdir()``: ``TMPDIR``).

    Raises
    ------
    ValueError
        If the longest socket path would pass the limit, naming the variable, the folder, its length in bytes,
        the longest it may be and the limit.
    """
    given = os.environ.get("RAY_TMPDIR")
    folder = os.path.abspath(given) if given else tempfile.gettempdir()
    limit = ray_socket_path_limit()
    if limit is None:  # Windows: Ray uses TCP, not Unix sockets
        return folder
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


def ray_socket_path_limit() -> int | None:
    """The most bytes Ray lets a Unix socket path have on this system (107 on Linux, 103 on macOS), or None on
    Windows, as ``ray._private.utils.validate_socket_filepath`` counts."""
    if sys.platform == "win32":
        return None
    return (104 if sys.platform.startswith("darwin") else 108) - 1


def _import_ray():
    try:
        import ray
    except ModuleNotFoundError as exc:
        if exc.name != "ray":  # Ray is there, but something it needs is not: that error says what
            raise
        raise ImportError(RAY_MISSING, name="ray") from None
    return ray


def _machine_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the CPUs this process may use (a container's share)
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _machine_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _require_gpus(trainings: Sequence[Training], gpus: int, where: str) -> None:
    if trainings and gpus < 1:
        raise ValueError(
            f"device: {', '.join(t.run_name for t in trainings)} ask Ray for a GPU each, and {where} "
            "has none; use --device cpu, or join a cluster with GPUs (--ray-address)"
        )


def _on_gpu(device: str) -> bool:
    return device.split(":", 1)[0] == "cuda"


def _end_if_running(client, run_id: str, status: str) -> None:
    """End the run with ``status`` unless it has ended already (a failed step ends its own run FAILED)."""
    if client.get_run(run_id).info.status == RUNNING:
        client.set_terminated(run_id, status)


def _reason(exc: BaseException) -> str:
    """One line for a failed task: the training's own exception (Ray keeps it as ``cause``), else Ray's; its
    innermost system failure if it has one (:func:`~mlflow_recsys.errors.failure_text`)."""
    cause = getattr(exc, "cause", None) or exc
    lines = [line for line in failure_text(cause).splitlines() if line.strip()]
    return shorten(redact(lines[0] if lines else type(cause).__name__), 1000)
