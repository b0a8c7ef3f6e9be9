"""Hand-written NKI for corpus/relu_half.cu (ReLU on float16), to compare.

The flat vector is tiled as 128 partitions x 512 contiguous elements with a mask for the ragged
end. The CUDA kernel computes `v > 0.0f ? v : 0.0f`, which maps NaN to 0; `nl.where` on the
comparison keeps that (a max(x, 0) would propagate NaN). float16 tiles are compared in fp32 and
stored as float16 unchanged. relu_half(x) -> y.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512  # 1 KiB of float16 per partition per DMA


@nki.jit
def relu_half(x):
    N = x.shape[0]
    y = nl.ndarray((N,), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F_TILE)[None, :]
    for t in nl.affine_range((N + P_TILE * F_TILE - 1) // (P_TILE * F_TILE)):
        idx = t * (P_TILE * F_TILE) + i_p * F_TILE + i_f
        ok = idx < N  # the CUDA guard `i < n`
        x_tile = nl.load(x[idx], mask=ok)
        # `v > 0.0f ? v : 0.0f`, NaN -> 0 as in CUDA
        nl.store(y[idx], value=nl.where(nl.greater(x_tile, 0.0), x_tile, 0.0), mask=ok)
    return y
