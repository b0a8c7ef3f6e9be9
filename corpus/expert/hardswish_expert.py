"""Hand-written NKI for corpus/hardswish.cu (hard swish x * relu6(x + 3) / 6), to compare.

Tiles of 128 partitions x F contiguous elements of the flat vector (F <= 512 fp32, 2 KiB per
partition row, balanced so every tile is nearly full) with a mask for the ragged end; each
tile's buffers are allocated in the loop body so the next tile's load overlaps this tile's
compute. The formula is three fused VectorE instructions in the CUDA kernel's order of
operations (add 3 then clamp at 0; clamp at 6 then multiply by v; divide by 6), so the
rounding matches fp32 CUDA. hardswish(x) -> y.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
F_MAX = 512  # fp32 elements per partition row: 2 KiB DMA rows


@nki.jit
def hardswish(x):
    N = x.shape[0]
    y = nl.ndarray((N,), dtype=x.dtype, buffer=nl.shared_hbm)
    n_tiles = (N + P_TILE * F_MAX - 1) // (P_TILE * F_MAX)
    F = (N + P_TILE * n_tiles - 1) // (P_TILE * n_tiles)  # balanced tile width
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F)[None, :]
    for t in nl.affine_range(n_tiles):
        idx = (t * P_TILE + i_p) * F + i_f
        ok = idx < N  # the CUDA guard `i < n`
        v = nl.load(x[idx], mask=ok)
        # fmaxf(v + 3.0f, 0.0f)
        r = nisa.tensor_scalar(v, op0=nl.add, operand0=3.0, op1=nl.maximum, operand1=0.0)
        # v * fminf(..., 6.0f)
        r = nisa.scalar_tensor_tensor(
            data=r, op0=nl.minimum, operand0=6.0, op1=nl.multiply, operand1=v
        )
        # ... / 6.0f
        nl.store(y[idx], value=nisa.tensor_scalar(r, op0=nl.divide, operand0=6.0), mask=ok)
    return y
