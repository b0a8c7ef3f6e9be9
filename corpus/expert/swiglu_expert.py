"""Hand-written NKI for corpus/swiglu.cu (SwiGLU gating, gate/up packed in x[R, 2C]), to compare.

Rows go on the partitions and each row's gate and up halves are loaded as two column views of the
same HBM tensor (x[:, c] and x[:, C + c]), so the CUDA kernel's flat-index row/column
decomposition becomes plain 2-D tiling; silu comes from one ScalarE activation and the gating is
one VectorE multiply. swiglu(x) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512


@nki.jit
def swiglu(x):
    R, C2 = x.shape
    C = C2 // 2
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range((R + P_TILE - 1) // P_TILE):
        for c in nl.affine_range((C + F_TILE - 1) // F_TILE):
            i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
            i_f = c * F_TILE + nl.arange(F_TILE)[None, :]
            ok = (i_p < R) & (i_f < C)
            gate = nl.load(x[i_p, i_f], mask=ok)
            up = nl.load(x[i_p, C + i_f], mask=ok)
            nl.store(out[i_p, i_f], value=nl.multiply(nl.silu(gate), up), mask=ok)
    return out
