"""Torch devices for fitting and scoring: which are accepted, the settings a fit runs under, the fold-in rows held on
the device, the tie rule of :func:`~mlflow_recsys.models._ranking.top_k` on the device, and what an exhausted device
says.

torch is imported inside each function, so that importing this module (and fitting or scoring on the CPU without a
device) costs nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from mlflow_recsys.errors import DeviceMemoryError

if TYPE_CHECKING:
    import torch

#: The torch device types the models fit and score on.
DEVICE_TYPES = ("cpu", "cuda", "mps")

#: How float32 matrix products run on CUDA: ``"fp32"`` (full precision, the default) or ``"tf32"`` (TensorFloat-32
#: tensor cores: a 10-bit mantissa in the products, float32 sums; faster, and no longer bit-comparable with fp32).
MATMUL_PRECISIONS = ("fp32", "tf32")


def check_device_form(device: str, name: str = "device") -> None:
    """ValueError unless torch reads ``device`` as one of :data:`DEVICE_TYPES` (``meta`` and other back ends refused),
    whether or not this machine has it: a study checks this before its trainings go to machines of their own.
    ``name`` is the argument the message names. Plain ``"cpu"``, every default, is taken without importing torch."""
    message = f"{name}: expected a torch device string such as 'cpu' or 'cuda', found {device!r}"
    if not isinstance(device, str):
        raise ValueError(message)
    if device == "cpu":
        return
    import torch

    try:
        kind = torch.device(device).type
    except (RuntimeError, ValueError, TypeError) as exc:
        raise ValueError(message) from exc
    if kind not in DEVICE_TYPES:
        raise ValueError(f"{message}; the models run on {', '.join(DEVICE_TYPES)}")


def check_device(device: str, name: str = "device") -> None:
    """ValueError (naming ``name``) unless ``device`` passes :func:`check_device_form` and torch sees that device
    here (the CUDA GPU of that index, or MPS)."""
    check_device_form(device, name)
    if device == "cpu":
        return
    import torch

    parsed = torch.device(device)
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"{name}: expected a device this machine has, found {device!r} but torch "
            f"{torch.__version__} sees no CUDA GPU; use 'cpu'"
        )
    if parsed.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(
            f"{name}: expected a device this machine has, found {device!r} but torch "
            f"{torch.__version__} sees no MPS (Apple GPU) device; use 'cpu'"
        )
    if parsed.type == "cuda" and parsed.index is not None and parsed.index >= torch.cuda.device_count():
        raise ValueError(
            f"{name}: expected a device this machine has, found {device!r} but torch sees "
            f"{torch.cuda.device_count()} CUDA GPU(s), numbered from 0"
        )


def device_type(device: str) -> str:
    """``"cpu"``, ``"cuda"`` or ``"mps"`` of a device string :func:`check_device_form` accepted (``"cuda:1"`` ->
    ``"cuda"``): what a run records, since the index of a GPU says nothing about the results."""
    return device.split(":", 1)[0]


def ranking_device(device: str | None) -> str | None:
    """Where lists are ranked for a device setting: ``device`` itself for an accelerator; None, the host's compiled
    ranking (the faster way on a CPU, with the same lists), for None or a CPU device."""
    return None if device is None or device_type(device) == "cpu" else device


@contextlib.contextmanager
def fitting_on(device: torch.device, matmul_precision: str = "fp32") -> Iterator[None]:
    """torch's deterministic algorithms for the block, and TF32 matrix products on CUDA when ``matmul_precision`` is
    ``"tf32"``; the caller's settings are restored after."""
    import torch

    previous = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    if device.type == "cuda":
        # cuBLAS is only reproducible with a fixed workspace; torch raises without it.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cuda.matmul.allow_tf32 = matmul_precision == "tf32"
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])
        torch.backends.cuda.matmul.allow_tf32 = previous_tf32


@contextlib.contextmanager
def memory_remedy(work: str, remedy: str) -> Iterator[None]:
    """Turn running out of memory (torch's ``OutOfMemoryError`` on a GPU, ``MemoryError`` on the host) inside the block
    into one :class:`~mlflow_recsys.errors.DeviceMemoryError` line: what ran out, and ``remedy``, the setting to lower
    (``"lower batch_size (it is 1,024)"``), instead of a trace."""
    try:
        yield
    except BaseException as exc:
        torch = sys.modules.get("torch")
        exhausted = (MemoryError, *((torch.OutOfMemoryError,) if torch is not None else ()))
        if not isinstance(exc, exhausted):
            raise
        raise DeviceMemoryError(f"{work} ran out of memory ({type(exc).__name__}); {remedy}") from None


class DeviceRows:
    """Rows of a sparse matrix in CSR form (row pointers, columns, values) as three tensors on a device, gathered a
    batch at a time there: memory O(nnz), and no dense batch copied from the host. (Three plain tensors rather than
    torch's sparse CSR layout, which torch still calls beta.)"""

    def __init__(self, x: sp.csr_matrix, device: torch.device) -> None:
        import torch

        self.shape, self.host = x.shape, x
        self.row_lengths = np.diff(x.indptr)  # on the host: a batch's entry count, known without waiting on the device
        self.indptr, self.columns, self.values = (
            torch.from_numpy(part).to(device)
            for part in (x.indptr.astype(np.int64), x.indices.astype(np.int64), x.data.astype(np.float32))
        )

    def entries(self, rows: np.ndarray) -> tuple[torch.Tensor, ...]:
        """(batch row, position in ``columns``/``values``) of every stored entry of ``rows`` (row numbers on the host)
        in row order, and the index of each row's first entry among them."""
        import torch

        device = self.values.device
        rows_on_device = torch.from_numpy(rows).to(device)  # a batch of row numbers: a few kilobytes
        starts = self.indptr[rows_on_device]
        lengths = self.indptr[rows_on_device + 1] - starts
        nnz = int(self.row_lengths[rows].sum())
        # Entry e belongs to batch row r(e) and sits at starts[r(e)] + (e - the first entry of r(e)).
        batch_row = torch.repeat_interleave(torch.arange(len(rows), device=device), lengths, output_size=nnz)
        first = torch.cumsum(lengths, 0) - lengths
        return batch_row, torch.arange(nnz, device=device) - first[batch_row] + starts[batch_row], first

    def dense(self, rows: np.ndarray) -> torch.Tensor:
        """float32 ``(len(rows), n_columns)`` of the given rows, in their order."""
        import torch

        if self.values.device.type == "cpu":  # the host is the device: SciPy fills it faster than the gathers
            return torch.from_numpy(self.host[rows].toarray().astype(np.float32, copy=False))
        return self.gathered(rows)

    def gathered(self, rows: np.ndarray) -> torch.Tensor:
        """:meth:`dense` filled on the device from the stored entries (what :meth:`dense` does off the host)."""
        import torch

        batch_row, position, _ = self.entries(rows)
        batch = torch.zeros((len(rows), self.shape[1]), dtype=torch.float32, device=self.values.device)
        batch[batch_row, self.columns[position]] = self.values[position]
        return batch

    def times(self, rows: np.ndarray, weights: torch.Tensor) -> torch.Tensor:
        """``X[rows] @ weights`` (``weights`` ``(n_columns, d)`` on the device), each row's products summed in its
        stored order, as SciPy's sparse product sums them."""
        import torch.nn.functional as F

        _, position, first = self.entries(rows)
        return F.embedding_bag(
            self.columns[position],
            weights,
            first,
            mode="sum",
            per_sample_weights=self.values[position].to(weights.dtype),
        )


def top_k_on_device(scores: torch.Tensor, k: int, excluded: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~mlflow_recsys.models._ranking.top_k` on the device holding ``scores`` (float32 ``(n_rows, n_items)``,
    no NaN), with ``excluded`` a bool tensor of the same shape: the same indices (int64 ``(n_rows, k)``, ``-1``
    padding) and scores (float32, ``-inf`` padding), returned on the host.

    The tie rule (score descending, then item index ascending; excluded items never, ``-inf`` items last) comes from
    two stable sorts: by score, then, stably, by whether the item is excluded."""
    import torch

    n_rows, n_items = scores.shape
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    candidates_first = torch.sort(excluded.gather(1, order).to(torch.uint8), dim=1, stable=True).indices
    take = min(k, n_items)
    best = order.gather(1, candidates_first[:, :take])
    kept = ~excluded.gather(1, best)
    indices = np.full((n_rows, k), -1, dtype=np.int64)
    top_scores = np.full((n_rows, k), -np.inf, dtype=np.float32)
    indices[:, :take] = torch.where(kept, best, -1).cpu().numpy()
    top_scores[:, :take] = torch.where(kept, scores.gather(1, best), -torch.inf).cpu().numpy()
    return indices, top_scores
