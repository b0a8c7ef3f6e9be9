"""Hand-written NKI for corpus/silu_bf16.cu (SiLU on bfloat16), to compare.

bfloat16 tiles are loaded as they are; the ScalarE silu activation computes in fp32 and the
result is rounded to bfloat16 once, on the way out, like the CUDA kernel's __float2bfloat16.
The flat vector is tiled as 128 partitions x 512 contiguous elements with a mask for the ragged
end. silu_bf16(x) -> y.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512


@nki.jit
def silu_bf16(x):
    N = x.shape[0]
    y = nl.ndarray((N,), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F_TILE)[None, :]
    for t in nl.affine_range((N + P_TILE * F_TILE - 1) // (P_TILE * F_TILE)):
        idx = t * (P_TILE * F_TILE) + i_p * F_TILE + i_f
        ok = idx < N
        x_tile = nl.load(x[idx], mask=ok)
        nl.store(y[idx], value=nl.silu(x_tile), mask=ok)
    return y
