"""Compiled resampling kernels (numba).

The kernels fuse drawing and summing, so no ``(B, n)`` matrix of signs or indices is ever held in memory, and spread
blocks of replicates over cores.

Randomness: each block of :data:`BLOCK` replicates has its own three xoshiro256** generators (Blackman & Vigna,
"Scrambled linear pseudorandom number generators", ACM TOMS 2021), their :data:`SEED_WORDS` state words drawn by
SplitMix64 from one word of a NumPy ``SeedSequence`` (:func:`~mlflow_recsys.stats._resampling.block_seeds`): signs come
from the first, unit indices from the first two in turn, and the strata of a slice reuse those indices' candidates,
drawing from the third only to replace one they reject. A block's numbers depend only on its seed, never on the thread
that ran it, so results are identical on any number of cores.
Bounded integers use Lemire's unbiased multiply-and-reject method (Lemire, "Fast random integer generation in an
interval", ACM TOMACS 2019).

The sign flips take units in segments (the strata of a slice; the whole comparison is one segment), each drawing
from its own seeds; the bootstrap resamples the strata of every slice from the comparison's own draw. A replicate is a
sum of rows picked by index (:func:`sum_picked_rows`: drawn units for the bootstrap, signed group sums for the sign
flips), whose every column is added in a fixed order of its own, so a column's numbers depend neither on which other
columns are in the call nor on the other segments. Column counts are padded to a multiple of
:data:`LANES` (``_stacked`` in :mod:`mlflow_recsys.stats._resampling`).

Why that sum is LLVM IR: written as numba loops, its adds stay scalar, one instruction per column and pick, most of a
comparison's time. The loop vectorizer needs a long inner loop, and the SLP vectorizer, which would pack the adds of
adjacent columns, is off in numba since its miscompilations (numba issue 8705). So it is emitted through numba's
intrinsic API: each picked row is read as vectors of :data:`LANES` doubles and added into two sets of vector
accumulators (even and odd picks in turn, two chains of adds at once) that are added together last. It lives in this
file because numba's cache checks only the file of a cached function: a helper in another module could change and
leave the kernels compiled from its old version.

This module is imported on first use only: importing :mod:`mlflow_recsys.stats` stays light.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

#: Replicates per independently seeded block.
BLOCK = 64

#: Seed words per block: the states of its three xoshiro256** generators.
SEED_WORDS = 12

_MASK32 = np.uint64(0xFFFFFFFF)


@numba.njit(inline="always")
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@numba.njit(inline="always")
def _next(s, o):
    """One 64-bit output of the xoshiro256** generator whose state is ``s[o:o + 4]``, advanced in place."""
    result = _rotl(s[o + 1] * np.uint64(5), 7) * np.uint64(9)
    t = s[o + 1] << np.uint64(17)
    s[o + 2] ^= s[o]
    s[o + 3] ^= s[o + 1]
    s[o + 1] ^= s[o + 2]
    s[o] ^= s[o + 3]
    s[o + 2] ^= t
    s[o + 3] = _rotl(s[o + 3], 45)
    return result


@numba.njit(inline="always")
def _fill_words(s, words):
    """Fill ``words`` with raw draws of the first generator: one sign bit per unit, bit ``j % 64`` of word
    ``j // 64``."""
    for k in range(words.shape[0]):
        words[k] = _next(s, 0)


@numba.njit(inline="always")
def _rejection_bound(n64):
    """Lemire's bound for a range of ``n64`` values (uint64): a 32-bit candidate ``c`` is rejected when the low 32
    bits of ``c * n64`` fall below ``(2**32 - n64) % n64``, which leaves every index equally likely."""
    return (np.uint64(4294967296) - n64) % n64


@numba.njit(inline="always")
def _fill_indices(s, idx, kept):
    """Fill ``idx`` with unit indices uniform on [0, len(idx)), by Lemire's unbiased method, and ``kept`` with the
    first generators' outputs (uint64, two a step, as long as it has room; its length even): read as uint32 on a
    little-endian machine, ``kept`` holds the candidates in the order they are taken. ``kept`` is None when no stratum
    reads them, which compiles the keeping away.

    The candidates are the 32-bit halves of one output of each of the block's two generators in turn (low half, then
    high; first generator, then second), taken in that order and skipped when rejected; those left when ``idx`` is full
    are dropped. Two independent generators keep two dependency chains in flight: drawing from one was bound by the
    latency of its state update.
    """
    n = idx.shape[0]
    n64 = np.uint64(n)
    threshold = _rejection_bound(n64)
    j = 0
    k = np.uint64(0)  # unsigned: a signed index is wrapped around when negative, three instructions a store
    room = np.uint64(0 if kept is None else kept.shape[0])
    while j < n:
        first, second = _next(s, 0), _next(s, 4)
        if kept is not None and k < room:
            kept[k], kept[k + np.uint64(1)] = first, second
            k += np.uint64(2)
        m0, m1 = (first & _MASK32) * n64, (first >> np.uint64(32)) * n64
        m2, m3 = (second & _MASK32) * n64, (second >> np.uint64(32)) * n64
        if j + 4 <= n and min(m0 & _MASK32, m1 & _MASK32, m2 & _MASK32, m3 & _MASK32) >= threshold:
            idx[j], idx[j + 1] = m0 >> np.uint64(32), m1 >> np.uint64(32)
            idx[j + 2], idx[j + 3] = m2 >> np.uint64(32), m3 >> np.uint64(32)
            j += 4
            continue
        for m in (m0, m1, m2, m3):  # a rejection, or the last few units: one candidate at a time
            if j < n and (m & _MASK32) >= threshold:
                idx[j] = m >> np.uint64(32)
                j += 1


@numba.njit(inline="always")
def _stratum_picks(s, candidates, picks):
    """Fill ``picks`` with indices uniform on [0, len(picks)) from the uint32 ``candidates`` (as many), each mapped by
    Lemire's multiply; one his method rejects is replaced by the low halves of the block's third generator
    (``s[8:12]``), in order, until one is accepted. The mapping has no branch (:func:`_map_eights`, then the last few
    one at a time); the replacing runs only after a rejection (about ``len(picks)**2 / 2**32`` a replicate)."""
    n64 = np.uint64(np.uint32(picks.shape[0]))  # known to fit 32 bits: the multiplies are 32 x 32 -> 64
    threshold = _rejection_bound(n64)
    lowest = _map_eights(candidates, n64, picks)
    for j in range(picks.shape[0] // 8 * 8, picks.shape[0]):
        m = np.uint64(candidates[j]) * n64
        picks[j] = m >> np.uint64(32)
        lowest = min(lowest, m & _MASK32)
    if lowest < threshold:
        for j in range(picks.shape[0]):
            m = np.uint64(candidates[j]) * n64
            while (m & _MASK32) < threshold:
                m = (_next(s, 8) & _MASK32) * n64
            picks[j] = m >> np.uint64(32)


#: Doubles in one vector (256 bits); the kernels pad their column counts to a multiple of it.
LANES = 4

_I64 = ir.IntType(64)
_VECTOR = ir.VectorType(ir.DoubleType(), LANES)


def _is_matrix(ty, ndim: int) -> bool:
    return isinstance(ty, types.Array) and ty.ndim == ndim and ty.dtype == types.float64 and ty.layout == "C"


def _picked_row_sum(vectors: int):
    """An intrinsic ``(rows, base, picks, column, out)`` setting ``out[column + c]``, for ``c`` in
    ``[0, LANES * vectors)``, to ``sum_j rows[base + picks[j], column + c]``.

    ``rows`` is float64 C-contiguous ``(n, m)``, ``picks`` a 1-D integer array, ``out`` float64 C-contiguous 1-D;
    the caller guarantees every index is in range (no bounds checks here: the kernels check their bounds with
    :func:`_check_segments` and draw picks within them). Picks ``0, 2, 4, ...`` are added in
    order into one accumulator, picks ``1, 3, ...`` into another, and the two are added last: a fixed order.
    """

    @intrinsic
    def picked_row_sum(typingctx, rows, base, picks, column, out):
        if not (
            _is_matrix(rows, 2)
            and _is_matrix(out, 1)
            and isinstance(picks, types.Array)
            and picks.ndim == 1
            and isinstance(picks.dtype, types.Integer)
            and isinstance(base, types.Integer)
            and isinstance(column, types.Integer)
        ):
            return None
        signature = types.void(rows, base, picks, column, out)

        def codegen(context, builder, sig, args):
            row_array = context.make_array(sig.args[0])(context, builder, args[0])
            pick_array = context.make_array(sig.args[2])(context, builder, args[2])
            out_array = context.make_array(sig.args[4])(context, builder, args[4])
            base_value = context.cast(builder, args[1], sig.args[1], types.int64)
            column_value = context.cast(builder, args[3], sig.args[3], types.int64)
            width = builder.extract_value(row_array.shape, 1)
            n_picks = builder.extract_value(pick_array.shape, 0)
            zero = ir.Constant(_VECTOR, [0.0] * LANES)
            sums = [[cgutils.alloca_once_value(builder, zero) for _ in range(vectors)] for _ in range(2)]

            def add_row(j, accumulators):
                pick = builder.load(builder.gep(pick_array.data, [j]))
                pick = builder.sext(pick, _I64) if pick.type.width < 64 else pick
                start = builder.add(builder.mul(builder.add(base_value, pick), width), column_value)
                for v, accumulator in enumerate(accumulators):
                    where = builder.gep(row_array.data, [builder.add(start, ir.Constant(_I64, LANES * v))])
                    row = builder.load(builder.bitcast(where, _VECTOR.as_pointer()), align=8)
                    builder.store(builder.fadd(builder.load(accumulator), row), accumulator)

            one = ir.Constant(_I64, 1)
            with cgutils.for_range(builder, builder.lshr(n_picks, one)) as loop:
                even = builder.shl(loop.index, one)
                add_row(even, sums[0])
                add_row(builder.add(even, one), sums[1])
            with builder.if_then(builder.trunc(n_picks, ir.IntType(1))):
                add_row(builder.sub(n_picks, one), sums[0])
            for v in range(vectors):
                total = builder.fadd(builder.load(sums[0][v]), builder.load(sums[1][v]))
                where = builder.gep(out_array.data, [builder.add(column_value, ir.Constant(_I64, LANES * v))])
                builder.store(total, builder.bitcast(where, _VECTOR.as_pointer()), align=8)
            return context.get_dummy_value()

        return signature, codegen

    return picked_row_sum


_sum_4, _sum_8, _sum_12 = (_picked_row_sum(vectors) for vectors in (1, 2, 3))


_U32X8 = ir.VectorType(ir.IntType(32), 8)
_U64X4 = ir.VectorType(_I64, 4)


def _splat(builder, value, vector_type):
    """``value`` in every lane of ``vector_type``."""
    undefined = ir.Constant(vector_type, ir.Undefined)
    lane0 = builder.insert_element(undefined, value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(
        lane0, undefined, ir.Constant(ir.VectorType(ir.IntType(32), vector_type.count), [0] * vector_type.count)
    )


@intrinsic
def _map_eights(typingctx, candidates, n64, picks):
    """An intrinsic ``(candidates, n64, picks) -> lowest`` setting ``picks[j] = (candidates[j] * n64) >> 32`` for ``j <
    len(candidates) // 8 * 8`` and returning the least low half ``(candidates[j] * n64) % 2**32`` among them (uint64;
    ``2**32 - 1`` when there are none), which Lemire's test compares with its bound.

    ``candidates`` is uint32 and ``picks`` int32, both C-contiguous 1-D of one length (the shorter one's is used);
    ``n64`` a uint64 below 2**32.
    Written as IR because numba's loop widened each candidate to 64 bits and narrowed each pick back, two shuffles per
    four candidates on the one port that runs them: here eight candidates are two vectors of 32 x 32 -> 64 bit products
    (the even lanes, then the odd ones), whose high halves are the picks in order.
    """
    if not (
        isinstance(candidates, types.Array)
        and candidates.ndim == 1
        and candidates.layout == "C"
        and candidates.dtype == types.uint32
        and isinstance(picks, types.Array)
        and picks.ndim == 1
        and picks.layout == "C"
        and picks.dtype == types.int32
        and n64 == types.uint64
    ):
        return None
    signature = types.uint64(candidates, n64, picks)

    def codegen(context, builder, sig, args):
        source = context.make_array(sig.args[0])(context, builder, args[0])
        target = context.make_array(sig.args[2])(context, builder, args[2])
        n = _splat(builder, args[1], _U64X4)
        low_half = ir.Constant(_U64X4, [0xFFFFFFFF] * 4)
        high_half = ir.Constant(_U64X4, [0xFFFFFFFF00000000] * 4)
        half = ir.Constant(_U64X4, [32] * 4)
        lowest = cgutils.alloca_once_value(builder, ir.Constant(_U32X8, [0xFFFFFFFF] * 8))
        size, room = (builder.extract_value(array.shape, 0) for array in (source, target))
        shorter = builder.select(builder.icmp_signed("<", size, room), size, room)  # never past either
        eights = builder.lshr(shorter, ir.Constant(_I64, 3))
        with cgutils.for_range(builder, eights) as loop:
            j = builder.shl(loop.index, ir.Constant(_I64, 3))
            words = builder.load(builder.bitcast(builder.gep(source.data, [j]), _U32X8.as_pointer()), align=4)
            pairs = builder.bitcast(words, _U64X4)  # lane i holds candidates 2i (low half) and 2i + 1 (high half)
            even = builder.mul(builder.and_(pairs, low_half), n)
            odd = builder.mul(builder.lshr(pairs, half), n)
            picked = builder.or_(builder.lshr(even, half), builder.and_(odd, high_half))
            where = builder.bitcast(builder.gep(target.data, [j]), _U32X8.as_pointer())
            builder.store(builder.bitcast(picked, _U32X8), where, align=4)
            lows = builder.bitcast(builder.or_(builder.and_(even, low_half), builder.shl(odd, half)), _U32X8)
            least = builder.load(lowest)
            builder.store(builder.select(builder.icmp_unsigned("<", lows, least), lows, least), lowest)
        least = builder.load(lowest)
        result = builder.extract_element(least, ir.Constant(ir.IntType(32), 0))
        for lane in range(1, 8):
            value = builder.extract_element(least, ir.Constant(ir.IntType(32), lane))
            result = builder.select(builder.icmp_unsigned("<", value, result), value, result)
        return builder.zext(result, _I64)

    return signature, codegen


@numba.njit(inline="always")
def sum_picked_rows(rows, base, picks, out):
    """``out[c] = sum_j rows[base + picks[j], c]`` for every column ``c`` of ``rows`` (float64 ``(n, m)``, ``m`` a
    multiple of :data:`LANES`); ``out`` is float64 ``(m,)``. Columns are summed twelve at a time (three vectors: a
    comparison of four metrics bootstraps their differences, squares and baselines in one pass over the picks), the
    last four or eight after."""
    m = rows.shape[1]
    column = 0
    while m - column >= 3 * LANES:
        _sum_12(rows, base, picks, column, out)
        column += 3 * LANES
    if m - column == 2 * LANES:
        _sum_8(rows, base, picks, column, out)
    elif m - column == LANES:
        _sum_4(rows, base, picks, column, out)


@numba.njit(inline="always")
def _check_segments(n_rows, m, starts):
    """ValueError unless ``m`` columns are whole vectors and the segments ``starts`` lie within the ``n_rows`` rows in
    order: the row sums read without bounds checks."""
    if m % LANES:
        raise ValueError("rows: expected a column count that is a multiple of LANES")
    if starts[0] < 0 or starts[starts.shape[0] - 1] > n_rows:
        raise ValueError("starts: expected segment bounds within the rows")
    for s in range(starts.shape[0] - 1):
        if starts[s + 1] < starts[s]:
            raise ValueError("starts: expected non-decreasing segment bounds")


@numba.njit(inline="always")
def _check_seeds(n_blocks, words, n_resamples):
    """ValueError unless there are :data:`SEED_WORDS` seed words a block and a block for every :data:`BLOCK` of the
    ``n_resamples`` replicates: ``out`` is filled only where there are seeds."""
    if words != SEED_WORDS:
        raise ValueError("seeds: expected SEED_WORDS words a block")
    if n_blocks * BLOCK < n_resamples:
        raise ValueError("seeds: expected a block of seeds for every BLOCK replicates")


@numba.njit(cache=True)
def nibble_tables(rows, starts):
    """Per group of four units of a segment, the 16 signed sums of their rows: ``(table, group_starts)``.

    ``rows`` is ``(n, m)`` with segment ``s`` at rows ``starts[s]:starts[s + 1]``; ``table[g, p, c]`` is the sum over
    the (up to) four units of group ``g`` of ``+-rows[unit, c]``, the sign of the ``t``-th unit given by bit ``t`` of
    ``p``; segment ``s`` owns groups ``group_starts[s]:group_starts[s + 1]``, so no group spans two segments.
    """
    m = rows.shape[1]
    n_segments = starts.shape[0] - 1
    group_starts = np.zeros(n_segments + 1, dtype=np.int64)
    for seg in range(n_segments):
        group_starts[seg + 1] = group_starts[seg] + (starts[seg + 1] - starts[seg] + 3) // 4
    table = np.zeros((group_starts[n_segments], 16, m), dtype=np.float64)
    for seg in range(n_segments):
        for g in range(group_starts[seg + 1] - group_starts[seg]):
            for pattern in range(16):
                for t in range(4):
                    unit = starts[seg] + 4 * g + t
                    if unit < starts[seg + 1]:
                        sign = 1.0 if (pattern >> t) & 1 else -1.0
                        for c in range(m):
                            table[group_starts[seg] + g, pattern, c] += sign * rows[unit, c]
    return table, group_starts


@numba.njit(parallel=True, cache=True)
def sign_flip_sums(table, group_starts, seeds, n_resamples):
    """Per segment, column and replicate, ``sum_j eps_j rows[j, c]`` over the segment's units for a random sign
    vector ``eps``: float64 ``(S, m, B)`` (each column's replicates contiguous, as its test reads them), from the
    tables of :func:`nibble_tables`.

    ``seeds`` is uint64 ``(S, n_blocks, SEED_WORDS)`` (:func:`~mlflow_recsys.stats._resampling.block_seeds`; signs use
    the first generator): each segment draws its own signs (unit ``j`` of a segment takes bit ``j % 64``
    of word ``j // 64``), shared by its columns. Signs are read four at a time and each group's signed sums looked up,
    so a replicate adds n/4 rows of the table (:func:`sum_picked_rows`) instead of n
    values per column.
    """
    m = table.shape[2]
    _check_segments(table.shape[0], m, group_starts)
    if group_starts.shape[0] != seeds.shape[0] + 1:
        raise ValueError("seeds: expected (S, n_blocks, SEED_WORDS) for the S segments of starts")
    _check_seeds(seeds.shape[1], seeds.shape[2], n_resamples)
    sums = table.reshape(table.shape[0] * 16, m)
    n_segments, n_blocks = seeds.shape[0], seeds.shape[1]
    out = np.empty((n_segments, m, n_resamples), dtype=np.float64)
    for task in numba.prange(n_segments * n_blocks):
        seg, block = task // n_blocks, task % n_blocks
        s = seeds[seg, block].copy()
        first, n_groups = group_starts[seg], group_starts[seg + 1] - group_starts[seg]
        words = np.empty((4 * n_groups + 63) // 64, dtype=np.uint64)
        picks = np.empty(n_groups, dtype=np.int64)
        total = np.empty(m, dtype=np.float64)
        for r in range(block * BLOCK, min(n_resamples, (block + 1) * BLOCK)):
            _fill_words(s, words)
            for w in range(words.shape[0]):  # a word's sixteen nibbles at constant shifts: the loop vectorizes
                word = words[w]
                for t in range(min(16, n_groups - 16 * w)):
                    picks[16 * w + t] = 256 * w + 16 * t + np.int64((word >> np.uint64(4 * t)) & np.uint64(15))
            sum_picked_rows(sums, 16 * first, picks, total)
            out[seg, :, r] = total
    return out


#: Bytes of stratum picks a block keeps, for the batch of replicates whose strata it then sums stratum by stratum: a
#: stratum's rows stay in the first-level cache across the batch, where the comparison's own rows evict them between
#: replicates.
STRATA_BATCH_BYTES = 1 << 18


@numba.njit(inline="always")
def _sum_strata(strata_rows, strata_starts, picks, first_r, stratum_out):
    """Each stratum's sums of replicates ``first_r, first_r + 1, ...`` (one a row of ``picks``) into
    ``stratum_out[t, :, r]``, stratum by stratum."""
    total = np.empty(strata_rows.shape[1], dtype=np.float64)
    for t in range(strata_starts.shape[0] - 1):
        first, end = strata_starts[t], strata_starts[t + 1]
        for b in range(picks.shape[0]):
            sum_picked_rows(strata_rows, first, picks[b, first:end], total)
            stratum_out[t, :, first_r + b] = total


@numba.njit(parallel=True, cache=True)
def bootstrap_sums(rows, seeds, n_resamples, strata_rows, strata_starts):
    """Per replicate and column, the sum of ``rows[i, c]`` over ``n`` units drawn with replacement from the ``n`` rows
    and, from the same draw, the stratified resample of every stratum: ``(sums (B, m), stratum_sums (T, m2, B))``
    (each stratum column's replicates contiguous, as its test reads them).

    ``rows`` is float64 ``(n, m)``; ``seeds`` uint64 ``(n_blocks, SEED_WORDS)``, three generators' states a block
    (:func:`~mlflow_recsys.stats._resampling.block_seeds`): a replicate's units come from the first two
    (:func:`_fill_indices`), shared by its columns, and a replicate adds their rows (:func:`sum_picked_rows`).

    ``strata_rows`` float64 ``(K * n, m2)`` holds, per slice, the ``n`` units again, ordered by stratum;
    ``strata_starts`` ``(T + 1,)`` bounds its ``T`` strata, each non-empty and within one slice. Stratum ``t``, at
    position ``p = strata_starts[t] % n`` of its slice, resamples its ``n_t`` units from the replicate's candidates
    ``p, ..., p + n_t - 1`` (:func:`_stratum_picks`): every stratum draws ``n_t`` units uniformly from itself, strata of
    one slice from disjoint candidates, and the slices add no generator draws but the rare rejections' (the third
    generator's), so ``sums`` are the same with or without strata. ``m2 = 0`` columns and ``T = 0`` draw no strata.
    A block maps the picks of a batch of replicates as it draws them, then sums them stratum by stratum
    (:data:`STRATA_BATCH_BYTES`); the order of the draws is the same as one replicate at a time.
    """
    n, m = rows.shape
    _check_segments(n, m, np.zeros(1, dtype=np.int64))
    _check_segments(strata_rows.shape[0], strata_rows.shape[1], strata_starts)
    _check_seeds(seeds.shape[0], seeds.shape[1], n_resamples)
    n_strata = strata_starts.shape[0] - 1
    for t in range(n_strata):
        if strata_starts[t + 1] <= strata_starts[t] or strata_starts[t] // n != (strata_starts[t + 1] - 1) // n:
            raise ValueError("strata_starts: expected non-empty strata, each within one slice's n rows")
    n_blocks = seeds.shape[0]
    out = np.empty((n_resamples, m), dtype=np.float64)
    stratum_out = np.empty((n_strata, strata_rows.shape[1], n_resamples), dtype=np.float64)
    batch = max(1, min(BLOCK, STRATA_BATCH_BYTES // (4 * max(1, strata_rows.shape[0])))) if n_strata else 1
    for block in numba.prange(n_blocks):
        s = seeds[block].copy()
        idx = np.empty(n, dtype=np.int32)
        kept = np.empty((n + 3) // 4 * 2 if n_strata else 0, dtype=np.uint64)
        candidates = kept.view(np.uint32)
        picks = np.empty((batch, strata_rows.shape[0] if n_strata else 0), dtype=np.int32)
        last = min(n_resamples, (block + 1) * BLOCK)
        for first_r in range(block * BLOCK, last, batch):
            for r in range(first_r, min(first_r + batch, last)):
                if n_strata:
                    _fill_indices(s, idx, kept)
                else:
                    _fill_indices(s, idx, None)
                sum_picked_rows(rows, 0, idx, out[r])
                for t in range(n_strata):
                    first, end = strata_starts[t], strata_starts[t + 1]
                    _stratum_picks(s, candidates[first % n : first % n + end - first], picks[r - first_r, first:end])
            if n_strata:
                _sum_strata(strata_rows, strata_starts, picks[: min(batch, last - first_r)], first_r, stratum_out)
    return out, stratum_out
