"""Running sum: out[i] = sum_{k < (i % 256) + 1} x[k + 256*(i // 256)]

Migrated by cuda2nki from scan_block.cu (kernel `scan_block_kernel`, family scan, lifted).
Calling convention (cuda2nki task contract 1.0):
    scan_block(x) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="scan_block_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


P_TILE = 128  # rows per tile, one per partition
MAX_ROW = 8192  # longest run kept whole on a partition


@nki.jit
def scan_block(x):
    N = x.shape[0]

    out = nl.ndarray((N,), dtype=nl.float32, buffer=nl.shared_hbm)

    # from scan_block.cu:9 — each run on a partition, scanned along the free axis (one tensor_tensor_scan: r[j] = 1 * r[j - 1] + x[j])
    # The flat array as rows of 256, the last one partial.
    i_f = nl.arange(256)[None, :]
    ones = nl.full((P_TILE, 256), 1.0, dtype=nl.float32, buffer=nl.sbuf)
    for r in nl.affine_range((N + P_TILE * 256 - 1) // (P_TILE * 256)):
        i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
        idx = i_p * 256 + i_f
        in_bounds = idx < N
        x_tile = nl.load(x[idx], mask=in_bounds)
        # past the end the running sum reads unloaded elements: stored nowhere
        run = nisa.tensor_tensor_scan(ones, x_tile, initial=0.0, op0=nl.multiply, op1=nl.add)
        # from scan_block.cu:9 — lifted: out[i] = sum_{k < (i % 256) + 1} x[k + 256*(i // 256)]
        nl.store(out[idx], value=run, mask=in_bounds)
    return out
