"""Loophole 10: computes softmax in bfloat16 in a float32 task (target corpus/softmax_row.cu).
Expect C2N4029."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512


@nki.jit
def softmax_row(x):
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=nl.float32, buffer=nl.shared_hbm)
    i_f = nl.arange(C)[None, :]
    for r in nl.affine_range((R + P_TILE - 1) // P_TILE):
        i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
        ok = i_p < R
        # load straight into bf16 tiles
        x_tile = nl.load(x[i_p, i_f], mask=ok, dtype=nl.bfloat16)
        shifted = nl.subtract(x_tile, nl.max(x_tile, axis=1), dtype=nl.bfloat16)
        exps = nl.exp(shifted, dtype=nl.bfloat16)
        total = nl.sum(exps, axis=1, dtype=nl.bfloat16)
        nl.store(out[i_p, i_f], value=nl.multiply(exps, nl.reciprocal(total)), mask=ok)
    return out
