"""Every metric against two independent implementations, ranx and trec_eval, on random rankings.

trec_eval is reached through ``ir_measures``' ``pytrec_eval`` provider (the C trec_eval behind
``pytrec_eval-terrier``); ranx (Bassani, ECIR 2022) is a separate, numba-based implementation. Both are
test-only dependencies (the ``test`` extra).

Per evaluated user, on several seeds and cutoffs, with users whose number of targets ``|R|`` is below,
equal to and above ``k``, users with no target, and rankings padded with ``-1``:

- where the conventions match (recall, precision, hit rate, nDCG with binary gains, MRR) the values
  are equal to 1e-9;
- where they differ the documented relation holds exactly (to 1e-9), as
  ``docs/reference/metrics.md`` states it: MAP@k here divides by ``min(k, |R|)`` and theirs by
  ``|R|``; calibrated recall (no counterpart there) divides by ``min(k, |R|)`` where their recall
  divides by ``|R|``; a user without targets is NaN here (left out of means) and 0 there.

ranx compiles its metrics with numba, which takes over a minute on a cold cache; the test runs the
same ranx Python code with ``NUMBA_DISABLE_JIT=1`` in a subprocess (well under a second for this data).
pytrec_eval has no cutoff for reciprocal rank, so MRR@k is checked against trec_eval's RR of the run
cut to its top ``k``, which is RR@k by definition.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from mlflow_recsys.metrics import METRIC_CLASSES, ItemMetric

ir_measures = pytest.importorskip("ir_measures", reason="ir_measures is a test dependency: pip install -e '.[test]'")
if importlib.util.find_spec("ranx") is None:
    pytest.skip("ranx is a test dependency: pip install -e '.[test]'", allow_module_level=True)

SEEDS = (0, 1, 2)
KS = (1, 3, 5, 10)
WIDTH = max(KS)  # ranked columns per user
N_USERS = 90
N_ITEMS = 40
# |R| of the first users of every seed, so each cutoff meets |R| = 0, < k, = k and > k;
# the other users draw |R| uniformly from 0..20.
FIXED_RELEVANT = (0, 0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 15, 25)
ATOL = 1e-9

# Our metric name -> (ranx metric name, ir_measures measure name) where the convention is the same.
EQUAL = {
    "recall": ("recall", "R"),
    "precision": ("precision", "P"),
    "hit_rate": ("hit_rate", "Success"),
    "ndcg": ("ndcg", "nDCG"),
    "mrr": ("mrr", "RR"),
}
# Their metric that shares the numerator of ours (the sum of precisions at hits, or hits@k) but
# divides by |R| where ours divides by min(k, |R|).
BY_MIN_K_R = {
    "map": ("map", "AP"),
    "calibrated_recall": ("recall", "R"),
}
# The item-side metrics (no targets; ranx and trec_eval have none) are checked in tests/test_metrics_item_side.py.
ACCURACY = {name for name, cls in METRIC_CLASSES.items() if not issubclass(cls, ItemMetric)}
assert set(EQUAL) | set(BY_MIN_K_R) == ACCURACY, "a metric without a cross-check"

RANX_WORKER = """
import json, sys
import ranx
cases = json.load(sys.stdin)
out = []
for case in cases:
    qrels = ranx.Qrels.from_dict(case["qrels"])
    run = ranx.Run.from_dict(case["run"])
    ranx.evaluate(qrels, run, case["metrics"], return_mean=False, save_results_in_run=True)
    out.append({m: {q: float(v) for q, v in run.scores[m].items()} for m in case["metrics"]})
json.dump(out, sys.stdout)
"""


def random_case(seed: int) -> tuple[np.ndarray, sp.csr_matrix]:
    """Rankings (N_USERS, WIDTH) with -1 padding and binary targets, from one seed."""
    rng = np.random.default_rng(seed)
    n_relevant = np.concatenate([FIXED_RELEVANT, rng.integers(0, 21, size=N_USERS - len(FIXED_RELEVANT))])
    rows, cols = [], []
    rankings = np.full((N_USERS, WIDTH), -1, dtype=np.int64)
    for user, n_rel in enumerate(n_relevant):
        targets = rng.choice(N_ITEMS, size=n_rel, replace=False)
        rows += [user] * n_rel
        cols += targets.tolist()
        # scores favour the targets by a random margin: from a random ranking (0) to targets first (5)
        score = rng.random(N_ITEMS)
        score[targets] += rng.choice([0.0, 0.3, 0.6, 5.0])
        length = WIDTH if rng.random() < 0.85 else int(rng.integers(1, WIDTH))
        rankings[user, :length] = np.argsort(-score, kind="stable")[:length]
    targets = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(N_USERS, N_ITEMS), dtype=np.float64)
    return rankings, targets


def trec_inputs(rankings: np.ndarray, targets: sp.csr_matrix, cut: int = WIDTH):
    """qrels and run dicts; a user without targets gets one judged non-relevant item."""
    qrels = {f"u{u}": {f"i{i}": 1 for i in targets[u].indices} or {"none": 0} for u in range(rankings.shape[0])}
    # distinct, decreasing scores: no ties for either library to break
    run = {
        f"u{u}": {f"i{i}": float(WIDTH - r) for r, i in enumerate(row[:cut]) if i >= 0}
        for u, row in enumerate(rankings)
    }
    return qrels, run


def trec_eval_values(rankings: np.ndarray, targets: sp.csr_matrix) -> dict[str, np.ndarray]:
    """ir_measures name@k -> per-user values from trec_eval (pytrec_eval provider)."""
    from ir_measures import AP, RR, P, R, Success, nDCG

    qrels, run = trec_inputs(rankings, targets)
    values: dict[str, np.ndarray] = {}

    def collect(measures, run_k, suffix=""):
        for name in measures:
            values.setdefault(name + suffix, np.full(rankings.shape[0], np.nan))
        for metric in ir_measures.pytrec_eval.iter_calc(list(measures.values()), qrels, run_k):
            name = next(n for n, m in measures.items() if m == metric.measure)
            values[name + suffix][int(metric.query_id[1:])] = metric.value

    for k in KS:
        collect(
            {f"AP@{k}": AP @ k, f"nDCG@{k}": nDCG @ k, f"P@{k}": P @ k, f"R@{k}": R @ k, f"Success@{k}": Success @ k},
            run,
        )
        collect({"RR": RR}, trec_inputs(rankings, targets, cut=k)[1], suffix=f"@{k}")
    return values


@pytest.fixture(scope="module")
def cases() -> list[dict]:
    """Per seed: n_relevant, our per-user values, ranx's and trec_eval's, keyed 'name@k'."""
    data = [random_case(seed) for seed in SEEDS]
    ranx_metrics = [f"{m}@{k}" for m in ("map", "ndcg", "precision", "recall", "mrr", "hit_rate") for k in KS]
    request = [dict(zip(("qrels", "run"), trec_inputs(r, t), strict=True), metrics=ranx_metrics) for r, t in data]
    proc = subprocess.run(
        [sys.executable, "-c", RANX_WORKER],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NUMBA_DISABLE_JIT": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    ranx_scores = json.loads(proc.stdout)

    out = []
    for (rankings, targets), ranx_case in zip(data, ranx_scores, strict=True):
        ours: dict[str, np.ndarray] = {}
        for name in ACCURACY:
            ours.update(METRIC_CLASSES[name](KS).compute(rankings, targets))
        ranx_values = {m: np.array([ranx_case[m][f"u{u}"] for u in range(rankings.shape[0])]) for m in ranx_metrics}
        out.append(
            {
                "n_relevant": np.diff(targets.indptr),
                "padded": (rankings < 0).any(axis=1),
                "ours": ours,
                "ranx": ranx_values,
                "trec_eval": trec_eval_values(rankings, targets),
            }
        )
    return out


def theirs(case: dict, library: str, names: tuple[str, str], k: int) -> np.ndarray:
    return case[library][f"{names[0] if library == 'ranx' else names[1]}@{k}"]


def test_data_covers_every_regime(cases):
    for case in cases:
        n = case["n_relevant"]
        for k in KS:
            assert (n == 0).any() and (n == k).any() and (n > k).any()
            assert k == 1 or ((n > 0) & (n < k)).any()
        # some rankings are short (padded with -1) and some put every target first
        assert case["padded"].any() and (case["ours"][f"ndcg@{WIDTH}"] == 1).any()


@pytest.mark.parametrize("library", ["ranx", "trec_eval"])
@pytest.mark.parametrize("name", sorted(EQUAL))
def test_same_convention_equal(cases, library, name):
    for case in cases:
        has = case["n_relevant"] > 0
        for k in KS:
            ours = case["ours"][f"{name}@{k}"][has]
            np.testing.assert_allclose(
                ours,
                theirs(case, library, EQUAL[name], k)[has],
                rtol=0,
                atol=ATOL,
                err_msg=f"{name}@{k} vs {library}",
            )


@pytest.mark.parametrize("library", ["ranx", "trec_eval"])
@pytest.mark.parametrize("name", sorted(BY_MIN_K_R))
def test_min_k_r_normaliser_differs_exactly(cases, library, name):
    # ours * min(k, |R|) == theirs * |R|: the same numerator over a different denominator
    seen_a_difference = False
    for case in cases:
        n = case["n_relevant"]
        has = n > 0
        for k in KS:
            ours = case["ours"][f"{name}@{k}"][has]
            other = theirs(case, library, BY_MIN_K_R[name], k)[has]
            np.testing.assert_allclose(
                ours * np.minimum(k, n[has]),
                other * n[has],
                rtol=0,
                atol=ATOL,
                err_msg=f"{name}@{k} vs {library}",
            )
            # equal where |R| <= k, and larger by |R| / k where |R| > k and anything was found
            small = n[has] <= k
            np.testing.assert_allclose(ours[small], other[small], rtol=0, atol=ATOL)
            seen_a_difference |= bool((ours[~small] > other[~small] + 1e-3).any())
    assert seen_a_difference


@pytest.mark.parametrize("library", ["ranx", "trec_eval"])
def test_user_without_targets_is_nan_here_and_zero_there(cases, library):
    for case in cases:
        empty = case["n_relevant"] == 0
        for name in ACCURACY:
            for k in KS:
                assert np.isnan(case["ours"][f"{name}@{k}"][empty]).all()
        for key, values in case[library].items():
            np.testing.assert_array_equal(values[empty], 0.0, err_msg=f"{library} {key}")
