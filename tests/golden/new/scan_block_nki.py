"""Running sum: out[i] = sum_{k < (i % 256) + 1} x[k + 256*(i // 256)]

Migrated by cuda2nki from scan_block.cu (kernel `scan_block_kernel`, family scan, lifted),
for the standalone `nki` package (NKI 0.3+): slices sized at trace time instead of masks.
Calling convention (cuda2nki task contract 1.0):
    scan_block(x) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="scan_block_kernel"))

import nki
import nki.isa as nisa
import nki.language as nl


P_TILE = 128  # rows per tile, one per partition
MAX_ROW = 8192  # longest run kept whole on a partition


@nki.jit
def scan_block(x):
    N = x.shape[0]

    out = nl.ndarray((N,), dtype=nl.float32, buffer=nl.shared_hbm)

    # from scan_block.cu:9 — each run on a partition, scanned along the free axis (one tensor_tensor_scan: r[j] = 1 * r[j - 1] + x[j])
    ones = nl.ndarray((P_TILE, 256), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    # The flat array as rows of 256: whole rows first, then the partial last row.
    n_full = N // 256
    for r in nl.affine_range((n_full + P_TILE - 1) // P_TILE):
        r0 = r * P_TILE
        rows = min(P_TILE, n_full - r0)
        x_buf = nl.ndarray((P_TILE, 256), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_buf[0:rows, :], src=x[r0 * 256 : (r0 + rows) * 256].reshape((rows, 256)))
        run = nl.ndarray((P_TILE, 256), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=run[0:rows, :], data0=ones[0:rows, :], data1=x_buf[0:rows, :], initial=0.0, op0=nl.multiply, op1=nl.add)
        # from scan_block.cu:9 — lifted: out[i] = sum_{k < (i % 256) + 1} x[k + 256*(i // 256)]
        nl.store(out[r0 * 256 : (r0 + rows) * 256].reshape((rows, 256)), value=run[0:rows, :])
    tail = N - n_full * 256
    if tail > 0:
        x_buf = nl.ndarray((1, 256), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_buf[0:1, 0:tail], src=x[n_full * 256 : N].reshape((1, tail)))
        run = nl.ndarray((1, 256), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=run[0:1, 0:tail], data0=ones[0:1, 0:tail], data1=x_buf[0:1, 0:tail], initial=0.0, op0=nl.multiply, op1=nl.add)
        nl.store(out[n_full * 256 : N].reshape((1, tail)), value=run[0:1, 0:tail])
    return out
