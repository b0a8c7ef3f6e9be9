"""Window reduction: out[i, j] = 0.25 * (sum_{k < 4} x[2*i + (k // 2), 2*j + (k % 2)])

Migrated by cuda2nki from avgpool_2x2.cu (kernel `avgpool_2x2_kernel`, family window, lifted).
Calling convention (cuda2nki task contract 1.0):
    avgpool_2x2(x) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="avgpool_2x2_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


P_TILE = 128  # output rows per tile, one per partition


@nki.jit
def avgpool_2x2(x):
    H = x.shape[0]
    W = x.shape[1]

    out = nl.ndarray((H // 2, W // 2), dtype=nl.float32, buffer=nl.shared_hbm)

    i_r = nl.arange(2)[None, :, None]
    i_w = nl.arange(W)[None, None, :]
    i_o = nl.arange(W // 2)[None, :]
    for t in nl.affine_range((H // 2 + P_TILE - 1) // P_TILE):
        i_p = t * P_TILE + nl.arange(P_TILE)[:, None, None]
        # from avgpool_2x2.cu:13 — one output row per partition; its window's input rows (2 * i + 0 ... + 1) in one DMA
        win = nl.load(x[2 * i_p + i_r, i_w], mask=i_p < H // 2)
        # from avgpool_2x2.cu:13 — 4 taps, each a strided view (step 2) of the rows tile, combined by sum on VectorE
        acc = win[:, 0, 0 : 2 * (W // 2 - 1) + 1 : 2]
        acc = nl.add(acc, win[:, 0, 1 : 1 + 2 * (W // 2 - 1) + 1 : 2])
        acc = nl.add(acc, win[:, 1, 0 : 2 * (W // 2 - 1) + 1 : 2])
        acc = nl.add(acc, win[:, 1, 1 : 1 + 2 * (W // 2 - 1) + 1 : 2])
        i_q = t * P_TILE + nl.arange(P_TILE)[:, None]
        # from avgpool_2x2.cu:13 — lifted: out[i, j] = 0.25 * (sum_{k < 4} x[2*i + (k // 2), 2*j + (k % 2)])
        nl.store(out[i_q, i_o], value=0.25 * acc, mask=i_q < H // 2)
    return out
