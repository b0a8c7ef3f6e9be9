"""Hand-written NKI for corpus/dot_atomic.cu (result[0] += sum(x * y)), to compare.

The grid-stride loop becomes [P, F] views of x and y (P <= 128 partitions of F >= 128 contiguous
floats) in chunks of up to 512 columns: VectorE multiplies and ScalarE row-sums the products (a
copy activation with a fused add-reduce), so the engines pipeline. The shared tree and the
atomicAdd become one TensorE matmul with a ones column (fp32 PSUM) plus result[0].
dot_atomic(x, y, result) -> result
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
F_MIN = 128  # at least 512 B per partition row
F_CHUNK = 512  # 2 KiB per partition row per DMA; chunks pipeline DMA against compute


@nki.jit
def dot_atomic(x, y, result):
    N = x.shape[0]
    out = nl.ndarray((1,), dtype=result.dtype, buffer=nl.shared_hbm)
    P = max(1, min(P_TILE, N // F_MIN))  # partitions in the body view
    F = N // P  # contiguous elements per partition
    rem = N - P * F  # leftover elements (< P), summed as one row
    n_full = F // F_CHUNK
    last = F - n_full * F_CHUNK
    n_cols = n_full + (1 if last > 0 else 0)

    i_p = nl.arange(P)[:, None]
    i_1 = nl.arange(1)[:, None]
    # one column of per-partition partial sums per chunk (written by disjoint iterations)
    partials = nl.ndarray((P, n_cols), dtype=nl.float32, buffer=nl.sbuf)
    for c in nl.affine_range(n_full):
        i_f = c * F_CHUNK + nl.arange(F_CHUNK)[None, :]
        prod = nl.multiply(nl.load(x[i_p * F + i_f]), nl.load(y[i_p * F + i_f]))  # x[i] * y[i]
        # sum += ...: the per-thread accumulation as a ScalarE row sum
        nisa.activation_reduce(
            op=nl.copy, data=prod, reduce_op=nl.add, reduce_res=partials[i_p, c + i_1]
        )
    if last > 0:
        i_f = n_full * F_CHUNK + nl.arange(last)[None, :]
        prod = nl.multiply(nl.load(x[i_p * F + i_f]), nl.load(y[i_p * F + i_f]))
        nisa.activation_reduce(
            op=nl.copy, data=prod, reduce_op=nl.add, reduce_res=partials[i_p, n_full + i_1]
        )
    row_sums = partials if n_cols == 1 else nl.sum(partials, axis=1)
    # the shared-memory tree and the atomicAdd across blocks: partition-axis sum on TensorE
    ones = nl.ones((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    total = nl.matmul(row_sums, ones, transpose_x=True)  # (1, 1) fp32 in PSUM
    acc = nl.add(nl.load(result[i_1]), total)  # atomicAdd(&result[0], ...) onto the caller's value
    if rem > 0:
        i_t = P * F + i_1 + nl.arange(rem)[None, :]
        tail = nl.multiply(nl.load(x[i_t]), nl.load(y[i_t]))
        acc = nl.add(acc, nl.sum(tail, axis=1))
    nl.store(out[i_1], value=acc)
    return out
