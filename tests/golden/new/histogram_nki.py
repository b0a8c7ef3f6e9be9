"""Counts per bin (histogram): bins[i] = bins[i] + (sum_{k < N} (((keys[k] % 64) == i ? 1 : 0)))

Migrated by cuda2nki from histogram.cu (kernel `histogram_kernel`, family histogram, lifted),
for the standalone `nki` package (NKI 0.3+): slices sized at trace time instead of masks.
Calling convention (cuda2nki task contract 1.0):
    histogram(keys, bins) -> bins
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="histogram_kernel"))

import nki
import nki.isa as nisa
import nki.language as nl


P_TILE = 128  # partitions per key tile
F_TILE = 2048  # keys per partition per tile, at most


@nki.jit
def histogram(keys, bins):
    N = keys.shape[0]

    assert N < 2**24, "fp32 counts are exact below 2**24 keys"
    bins_out = nl.ndarray((64,), dtype=nl.uint32, buffer=nl.shared_hbm)

    F = min(F_TILE, (N + P_TILE - 1) // P_TILE)
    ones = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    bin_ids = nl.ndarray((P_TILE, 64), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(bin_ids, [[1, 64]])  # 0 ... bins - 1 on every partition
    acc = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.psum)
    for t in nl.affine_range((N + P_TILE * F - 1) // (P_TILE * F)):
        # from histogram.cu:9 — keys on the partitions, F per partition per tile; those past the end get bin -1 (counted nowhere)
        k0 = t * P_TILE * F
        n_t = min(P_TILE * F, N - k0)  # keys of this tile
        rows = n_t // F  # whole partitions
        r = n_t - rows * F  # keys on the last, partial partition
        key = nl.ndarray((P_TILE, F), dtype=keys.dtype, buffer=nl.sbuf)
        bin_ = nl.ndarray((P_TILE, F), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=bin_, value=-1)
        # from histogram.cu:9 — each key's bin in int32 (bitwise_and 63)
        if rows > 0:
            nisa.dma_copy(dst=key[0:rows, :], src=keys[k0 : k0 + rows * F].reshape((rows, F)))
            nisa.tensor_scalar(dst=bin_[0:rows, :], data=key[0:rows, :], op0=nl.bitwise_and, operand0=63)
        if r > 0:
            nisa.dma_copy(dst=key[rows : rows + 1, 0:r], src=keys[k0 + rows * F : k0 + n_t].reshape((1, r)))
            nisa.tensor_scalar(dst=bin_[rows : rows + 1, 0:r], data=key[rows : rows + 1, 0:r], op0=nl.bitwise_and, operand0=63)
        if F >= 64:
            # from histogram.cu:9 — per bin, the matches along the free axis: one tensor_scalar_reduce (equal, add) each
            counts = nl.ndarray((P_TILE, 64), dtype=nl.float32, buffer=nl.sbuf)
            for b in nl.static_range(64):
                hits = nl.ndarray((P_TILE, F), dtype=nl.float32, buffer=nl.sbuf)
                if b % 5 < 2:  # VectorE takes ~1.5x as long per bin as the GpSimd + ScalarE pair
                    nisa.tensor_scalar_reduce(dst=hits, data=bin_, op0=nl.equal, operand0=b, reduce_op=nl.add, reduce_res=counts[:, b : b + 1])
                else:
                    # from histogram.cu:9 — three bins in five compared on GpSimd and summed on ScalarE, so three engines share the compare-and-count work
                    nisa.tensor_scalar(dst=hits, data=bin_, op0=nl.equal, operand0=b, engine=nisa.engine.gpsimd)
                    nisa.activation_reduce(dst=hits, op=nl.copy, data=hits, reduce_op=nl.add, reduce_res=counts[:, b : b + 1])
            # from histogram.cu:9 — partitions summed by a ones-vector matmul, accumulated in PSUM over the key tiles (fp32: exact below 2**24 keys)
            nisa.nc_matmul(dst=acc, stationary=ones, moving=counts)
        else:
            # from histogram.cu:9 — fewer keys per partition than bins: per key column, its one-hot row against the bin numbers (one tensor_scalar), summed over the partitions by a ones-vector matmul into PSUM
            for c in nl.affine_range(F):
                hit = nl.ndarray((P_TILE, 64), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=hit, data=bin_ids, op0=nl.equal, operand0=bin_[:, c : c + 1])
                nisa.nc_matmul(dst=acc, stationary=ones, moving=hit)
    got = nl.ndarray((1, 64), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=got, src=acc)
    # the old counts added in int32 on GpSimd (exact; fp32 would round past 2**24)
    old = nl.ndarray((1, 64), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=old, src=bins.reshape((1, 64)))
    nisa.tensor_tensor(dst=got, data1=got, data2=old, op=nl.add, engine=nisa.engine.gpsimd)
    # from histogram.cu:9 — lifted: bins[i] = bins[i] + (sum_{k < N} (((keys[k] % 64) == i ? 1 : 0)))
    nl.store(bins_out.reshape((1, 64)), value=got)
    return bins_out
