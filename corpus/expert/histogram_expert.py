"""Hand-written NKI for corpus/histogram.cu (bins += bincount(keys % 64)), to compare.

Trainium has no atomic scatter into SBUF, so each bin's count is a compare-and-reduce: keys sit
128 partitions x up to 2048 per partition, `key & 63` is computed in int32 (exact bit operation
on VectorE), and each of the 64 bins counts its matches along the free axis. The bins are shared
out over three engines: VectorE compares and sums in one tensor_scalar_reduce, GpSimd compares
and ScalarE sums (activation with an add-reduce) for the others. A ones-vector matmul adds the
128 partitions' counts into PSUM, accumulating over the key tiles; the old counts are added in
int32 on GpSimd (exact). histogram(keys, bins) -> bins_out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
F_MAX = 2048  # keys per partition per tile
BINS = 64


@nki.jit
def histogram(keys, bins):
    (N,) = keys.shape
    assert N < 2**24  # fp32 counts stay exact
    out = nl.ndarray((BINS,), dtype=bins.dtype, buffer=nl.shared_hbm)
    F = min(F_MAX, (N + P_TILE - 1) // P_TILE)
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F)[None, :]
    i_b = nl.arange(BINS)[None, :]
    ones = nl.full((P_TILE, 1), 1.0, dtype=nl.float32, buffer=nl.sbuf)
    total = nl.zeros((1, BINS), dtype=nl.float32, buffer=nl.psum)
    for t in nl.affine_range((N + P_TILE * F - 1) // (P_TILE * F)):
        pos = t * (P_TILE * F) + i_p * F + i_f
        valid = pos < N
        k = nl.load(keys[pos], mask=valid)
        b = nl.full((P_TILE, F), -1, dtype=nl.int32, buffer=nl.sbuf)  # past the end: no bin
        b[i_p, i_f] = nl.bitwise_and(k, BINS - 1, dtype=nl.int32, mask=valid)
        c = nl.ndarray((P_TILE, BINS), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.static_range(BINS):
            if j % 5 in (1, 3):  # VectorE: 2 bins in 5 (its clock is the slowest)
                nisa.tensor_scalar_reduce(
                    data=b,
                    op0=nl.equal,
                    operand0=j,
                    reduce_op=nl.add,
                    reduce_res=c[:, j : j + 1],
                    dtype=nl.float32,
                )
            else:
                eq = nisa.tensor_scalar(
                    b, op0=nl.equal, operand0=j, engine=nisa.gpsimd_engine, dtype=nl.float32
                )
                nisa.activation_reduce(
                    op=nl.copy,
                    data=eq,
                    reduce_op=nl.add,
                    reduce_res=c[:, j : j + 1],
                    dtype=nl.float32,
                )
        total += nl.matmul(ones, c, transpose_x=True)
    counts = nl.copy(total, dtype=bins.dtype)
    old = nl.load(bins[i_b])
    nl.store(
        out[i_b],
        value=nisa.tensor_tensor(
            counts, old, op=nl.add, engine=nisa.gpsimd_engine, dtype=bins.dtype
        ),
    )
    return out
