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
import neuronxcc.nki.language as nl


P_TILE = 128  # rows per tile, one per partition (nl.tile_size.pmax)
MAX_ROW = 8192  # longest row kept whole on a partition (32 KiB fp32)


@nki.jit
def layernorm(x, gamma, beta, *, eps):
    R = x.shape[0]
    C = x.shape[1]

    assert C <= MAX_ROW, "rows longer than MAX_ROW need a blocked two-pass version"
    y_out = nl.ndarray((R, C), dtype=nl.float32, buffer=nl.shared_hbm)

    # from layernorm.cu:38 — one CUDA block per row (row offset blockIdx.x*cols)
    # from layernorm.cu:58 — block_stride loop over c becomes the free axis
    i_f = nl.arange(C)[None, :]
    gamma_row = nl.load(gamma[i_f])
    beta_row = nl.load(beta[i_f])
    for r in nl.affine_range((R + P_TILE - 1) // P_TILE):
        i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
        rows_ok = i_p < R
        x_tile = nl.load(x[i_p, i_f], mask=rows_ok)
        # from layernorm.cu:54 — row sum (loop_accumulate): mean, then variance about it (two passes, as in CUDA)
        mean = nl.multiply(nl.sum(x_tile, axis=1), 1.0 / C)
        centered = nl.subtract(x_tile, mean)
        var = nl.multiply(nl.sum(nl.multiply(centered, centered), axis=1), 1.0 / C)
        rstd = nl.rsqrt(nl.add(var, eps))
        # from layernorm.cu:59 — yr[c] = (xr[c] - mean) * inv_std * gamma[c] + beta[c];
        y = nl.multiply(centered, rstd)
        y = nl.multiply(y, gamma_row)
        y = nl.add(y, beta_row)
        nl.store(y_out[i_p, i_f], value=y, mask=rows_ok)
    return y_out
