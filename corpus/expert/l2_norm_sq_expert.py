"""Hand-written NKI for corpus/l2_norm_sq.cu (result[0] += sum(x^2)), to compare.

The grid-stride float4 loop becomes a [P, F] view of x (P <= 128 partitions of F >= 128
contiguous floats, >= 512 B per DMA row) in chunks of up to 512 columns, each squared and
row-summed by one ScalarE activation with a fused add-reduce. The warp shuffles and atomicAdds
become one TensorE matmul with a ones column (fp32 PSUM); the < P leftover floats are one row.
l2_norm_sq(x, result) -> result
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
F_MIN = 128  # at least 512 B per partition row
F_CHUNK = 512  # 2 KiB per partition row per DMA; chunks pipeline DMA against ScalarE


@nki.jit
def l2_norm_sq(x, result):
    N = x.shape[0]
    out = nl.ndarray((1,), dtype=result.dtype, buffer=nl.shared_hbm)
    P = max(1, min(P_TILE, N // F_MIN))  # partitions in the body view
    F = N // P  # contiguous elements per partition
    rem = N - P * F  # the scalar tail (< P elements)
    n_full = F // F_CHUNK
    last = F - n_full * F_CHUNK
    n_cols = n_full + (1 if last > 0 else 0)

    i_p = nl.arange(P)[:, None]
    i_1 = nl.arange(1)[:, None]
    # one column of per-partition partial sums per chunk (written by disjoint iterations)
    partials = nl.ndarray((P, n_cols), dtype=nl.float32, buffer=nl.sbuf)
    for c in nl.affine_range(n_full):
        i_f = c * F_CHUNK + nl.arange(F_CHUNK)[None, :]
        x_tile = nl.load(x[i_p * F + i_f])
        # sum += v.x * v.x + ...: square and row-sum in one ScalarE instruction
        nisa.activation_reduce(
            op=nl.square, data=x_tile, reduce_op=nl.add, reduce_res=partials[i_p, c + i_1]
        )
    if last > 0:
        i_f = n_full * F_CHUNK + nl.arange(last)[None, :]
        x_tile = nl.load(x[i_p * F + i_f])
        nisa.activation_reduce(
            op=nl.square, data=x_tile, reduce_op=nl.add, reduce_res=partials[i_p, n_full + i_1]
        )
    row_sums = partials if n_cols == 1 else nl.sum(partials, axis=1)
    # warp_reduce_sum + atomicAdd across warps/blocks: the partition-axis sum on TensorE
    ones = nl.ones((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    total = nl.matmul(row_sums, ones, transpose_x=True)  # (1, 1) fp32 in PSUM
    acc = nl.load(result[i_1])  # the caller's running total (atomicAdd adds to it)
    acc = nl.add(acc, total)
    if rem > 0:
        # for (i = n4 * 4 + tid; i < n; ...) sum += v * v: the leftover elements as one row
        tail = nl.load(x[P * F + i_1 + nl.arange(rem)[None, :]])
        tail_sq = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(op=nl.square, data=tail, reduce_op=nl.add, reduce_res=tail_sq)
        acc = nl.add(acc, tail_sq)
    nl.store(out[i_1], value=acc)
    return out
