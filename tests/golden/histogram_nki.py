"""Counts per bin (histogram): bins[i] = bins[i] + (sum_{k < N} (((keys[k] % 64) == i ? 1 : 0)))

Migrated by cuda2nki from histogram.cu (kernel `histogram_kernel`, family histogram, lifted).
Calling convention (cuda2nki task contract 1.0):
    histogram(keys, bins) -> bins
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="histogram_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


P_TILE = 128  # partitions per key tile
F_TILE = 2048  # keys per partition per tile, at most


@nki.jit
def histogram(keys, bins):
    N = keys.shape[0]

    assert N < 2**24, "fp32 counts are exact below 2**24 keys"
    bins_out = nl.ndarray((64,), dtype=nl.uint32, buffer=nl.shared_hbm)

    F = min(F_TILE, (N + P_TILE - 1) // P_TILE)
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F)[None, :]
    i_b = nl.arange(64)[None, :]
    ones = nl.full((P_TILE, 1), 1.0, dtype=nl.float32, buffer=nl.sbuf)
    bin_ids = nisa.iota(i_b + 0 * i_p, dtype=nl.int32)  # 0 ... bins - 1 on every partition
    acc = nl.zeros((1, 64), dtype=nl.float32, buffer=nl.psum)
    for t in nl.affine_range((N + P_TILE * F - 1) // (P_TILE * F)):
        # from histogram.cu:9 — keys on the partitions, F per partition per tile; those past the end get bin -1 (counted nowhere)
        idx = t * (P_TILE * F) + i_p * F + i_f
        ok = idx < N
        key = nl.load(keys[idx], mask=ok)
        # from histogram.cu:9 — each key's bin in int32 (bitwise_and 63)
        bin_ = nl.full((P_TILE, F), -1, dtype=nl.int32, buffer=nl.sbuf)
        bin_[i_p, i_f] = nl.bitwise_and(key, 63, dtype=nl.int32, mask=ok)
        if F >= 64:
            # from histogram.cu:9 — per bin, the matches along the free axis: one tensor_scalar_reduce (equal, add) each
            counts = nl.ndarray((P_TILE, 64), dtype=nl.float32, buffer=nl.sbuf)
            for b in nl.static_range(64):
                if b % 5 < 2:  # VectorE takes ~1.5x as long per bin as the GpSimd + ScalarE pair
                    nisa.tensor_scalar_reduce(data=bin_, op0=nl.equal, operand0=b, reduce_op=nl.add, reduce_res=counts[:, b : b + 1], dtype=nl.float32)
                else:
                    # from histogram.cu:9 — three bins in five compared on GpSimd and summed on ScalarE, so three engines share the compare-and-count work
                    hits = nisa.tensor_scalar(bin_, op0=nl.equal, operand0=b, engine=nisa.gpsimd_engine, dtype=nl.float32)
                    nisa.activation_reduce(op=nl.copy, data=hits, reduce_op=nl.add, reduce_res=counts[:, b : b + 1], dtype=nl.float32)
            # from histogram.cu:9 — partitions summed by a ones-vector matmul, accumulated in PSUM over the key tiles (fp32: exact below 2**24 keys)
            acc += nl.matmul(ones, counts, transpose_x=True)
        else:
            # from histogram.cu:9 — fewer keys per partition than bins: per key column, its one-hot row against the bin numbers (one tensor_scalar), summed over the partitions by a ones-vector matmul into PSUM
            for c in nl.affine_range(F):
                hit = nisa.tensor_scalar(bin_ids, op0=nl.equal, operand0=bin_[i_p, c], dtype=nl.float32)
                acc += nl.matmul(ones, hit, transpose_x=True)
    # the old counts added in int32 on GpSimd (exact; fp32 would round past 2**24)
    got = nl.copy(acc, dtype=nl.uint32)
    old = nl.load(bins[i_b])
    total = nisa.tensor_tensor(got, old, op=nl.add, engine=nisa.gpsimd_engine, dtype=nl.uint32)
    # from histogram.cu:9 — lifted: bins[i] = bins[i] + (sum_{k < N} (((keys[k] % 64) == i ? 1 : 0)))
    nl.store(bins_out[i_b], value=total)
    return bins_out
