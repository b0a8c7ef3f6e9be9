"""Row-wise layernorm: each row reduced, then mapped, on one partition

Migrated by cuda2nki from layernorm.cu (kernel `layernorm_kernel`, family rowwise, layernorm).
Calling convention (cuda2nki task contract 1.0):
    layernorm(x, gamma, beta, *, eps) -> y
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="layernorm_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


P_TILE = 128  # rows per tile, one per partition (nl.tile_size.pmax)
MAX_ROW = 8192  # longest row kept whole on a partition (32 KiB fp32)
BN_FMAX = 512  # bn_stats free-size limit (nl.tile_size.bn_stats_fmax)


@nki.jit
def layernorm(x, gamma, beta, *, eps):
    R = x.shape[0]
    C = x.shape[1]

    assert C <= MAX_ROW, "rows longer than MAX_ROW need a blocked two-pass version"
    y_out = nl.ndarray((R, C), dtype=nl.float32, buffer=nl.shared_hbm)

    # from layernorm.cu:38 — one CUDA block per row (row offset blockIdx.x*cols)
    # from layernorm.cu:58 — block_stride loop over c becomes the free axis
    i_f = nl.arange(C)[None, :]
    n_chunks = (C + BN_FMAX - 1) // BN_FMAX
    gamma_row = nl.load(gamma[i_f])
    beta_row = nl.load(beta[i_f])
    for r in nl.affine_range((R + P_TILE - 1) // P_TILE):
        i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
        rows_ok = i_p < R
        x_tile = nl.load(x[i_p, i_f], mask=rows_ok)
        # from layernorm.cu:54 — row sum (loop_accumulate): mean and variance from the Vector engine's batch-norm statistics
        # (one pass in chunks of BN_FMAX; the CUDA kernel's two passes give the same values)
        stats = nl.ndarray((P_TILE, 6 * n_chunks), dtype=nl.float32, buffer=nl.sbuf)
        for ch in nl.static_range(n_chunks):
            lo = ch * BN_FMAX
            stats[:, 6 * ch : 6 * ch + 6] = nisa.bn_stats(x_tile[:, lo : min(lo + BN_FMAX, C)])
        mean_var = nisa.bn_aggr(stats)
        rstd = nl.rsqrt(nl.add(mean_var[:, 1:2], eps))
        # from layernorm.cu:59 — yr[c] = (xr[c] - mean) * inv_std * gamma[c] + beta[c];
        y = nisa.tensor_scalar(x_tile, op0=nl.subtract, operand0=mean_var[:, 0:1], op1=nl.multiply, operand1=rstd)
        y = nl.multiply(y, gamma_row)
        y = nl.add(y, beta_row)
        nl.store(y_out[i_p, i_f], value=y, mask=rows_ok)
    return y_out
