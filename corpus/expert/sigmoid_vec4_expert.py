"""Hand-written NKI for corpus/sigmoid_vec4.cu (logistic sigmoid over a float32 vector), to compare.

The CUDA kernel's float4 body and scalar tail collapse into one masked tiling: the flat vector is
cut into tiles of 128 partitions x 512 contiguous elements (2 KiB DMAs per partition), the ragged
end is the mask, and the sigmoid is a single ScalarE activation. sigmoid_vec4(x) -> y.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512


@nki.jit
def sigmoid_vec4(x):
    N = x.shape[0]
    y = nl.ndarray((N,), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F_TILE)[None, :]
    for t in nl.affine_range((N + P_TILE * F_TILE - 1) // (P_TILE * F_TILE)):
        idx = t * (P_TILE * F_TILE) + i_p * F_TILE + i_f
        ok = idx < N
        x_tile = nl.load(x[idx], mask=ok)
        nl.store(y[idx], value=nl.sigmoid(x_tile), mask=ok)
    return y
