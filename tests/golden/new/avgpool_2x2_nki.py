"""Window reduction: out[i, j] = 0.25 * (sum_{k < 4} x[2*i + (k // 2), 2*j + (k % 2)])

Migrated by cuda2nki from avgpool_2x2.cu (kernel `avgpool_2x2_kernel`, family window, lifted),
for the standalone `nki` package (NKI 0.3+): slices sized at trace time instead of masks.
Calling convention (cuda2nki task contract 1.0):
    avgpool_2x2(x) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="avgpool_2x2_kernel"))

import nki
import nki.isa as nisa
import nki.language as nl


P_TILE = 128  # output rows per tile, one per partition


@nki.jit
def avgpool_2x2(x):
    H = x.shape[0]
    W = x.shape[1]

    out = nl.ndarray((H // 2, W // 2), dtype=nl.float32, buffer=nl.shared_hbm)

    for t in nl.affine_range((H // 2 + P_TILE - 1) // P_TILE):
        r0 = t * P_TILE
        nr = min(P_TILE, H // 2 - r0)
        # from avgpool_2x2.cu:13 — one output row per partition; its window's input rows (2 * i + 0 ... + 1) in one DMA
        win = nl.ndarray((P_TILE, 2, W), dtype=x.dtype, buffer=nl.sbuf)
        for dy in nl.static_range(2):
            first = 2 * r0 + dy
            nisa.dma_copy(dst=win[0:nr, dy, :], src=x[first : first + 2 * (nr - 1) + 1 : 2, :])
        # from avgpool_2x2.cu:13 — 4 taps, each a strided view (step 2) of the rows tile, combined by sum on VectorE
        acc = nl.ndarray((P_TILE, W // 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=acc[0:nr, :], src=win[0:nr, 0, 0 : 2 * (W // 2 - 1) + 1 : 2])
        nisa.tensor_tensor(dst=acc[0:nr, :], data1=acc[0:nr, :], data2=win[0:nr, 0, 1 : 1 + 2 * (W // 2 - 1) + 1 : 2], op=nl.add)
        nisa.tensor_tensor(dst=acc[0:nr, :], data1=acc[0:nr, :], data2=win[0:nr, 1, 0 : 2 * (W // 2 - 1) + 1 : 2], op=nl.add)
        nisa.tensor_tensor(dst=acc[0:nr, :], data1=acc[0:nr, :], data2=win[0:nr, 1, 1 : 1 + 2 * (W // 2 - 1) + 1 : 2], op=nl.add)
        # from avgpool_2x2.cu:13 — lifted: out[i, j] = 0.25 * (sum_{k < 4} x[2*i + (k // 2), 2*j + (k % 2)])
        nl.store(out[r0 : r0 + nr, :], value=0.25 * acc[0:nr, :])
    return out
