"""1-D stencil: weighted sum of 7 neighbours, zero outside the array

Migrated by cuda2nki from stencil_1d.cu (kernel `stencil_1d_kernel`, family stencil, 1d).
Calling convention (cuda2nki task contract 1.0):
    stencil_1d(x) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="stencil_1d_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


P_TILE = 128  # partitions per tile
F_TILE = 512  # elements per partition
LOW = -3  # offset of the first tap (-radius)

# from stencil_1d.cu:10 — __constant__ c_weights[7]
WEIGHTS = [0.02, -0.05, 0.15, 0.5, 0.25, 0.1, 0.03]


@nki.jit
def stencil_1d(x):
    N = x.shape[0]

    out = nl.ndarray((N,), dtype=nl.float32, buffer=nl.shared_hbm)

    # from stencil_1d.cu:13 — shared tile with halos: one load per tile (per row offset in 2-D) brings the halo along, each tap is a free-axis slice of it, zero outside the array
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F_TILE)[None, :]
    i_h = nl.arange(F_TILE + len(WEIGHTS) - 1)[None, :]  # a partition's elements and its halo
    for t in nl.affine_range((N + P_TILE * F_TILE - 1) // (P_TILE * F_TILE)):
        idx = t * (P_TILE * F_TILE) + i_p * F_TILE + i_f
        src = t * (P_TILE * F_TILE) + i_p * F_TILE + i_h + LOW
        halo = nl.zeros((P_TILE, F_TILE + len(WEIGHTS) - 1), dtype=nl.float32, buffer=nl.sbuf)
        halo[...] = nl.load(x[src], mask=(src >= 0) & (src < N))
        # the taps in the CUDA order, each a shifted window of the one load
        acc = nl.multiply(halo[:, 0:F_TILE], WEIGHTS[0])
        for j in nl.static_range(1, len(WEIGHTS)):
            # acc + w * x as one VectorE instruction
            acc = nisa.scalar_tensor_tensor(data=halo[:, j : j + F_TILE], op0=nl.multiply, operand0=WEIGHTS[j], op1=nl.add, operand1=acc)
        # from stencil_1d.cu:32 — out[gidx] = acc;
        nl.store(out[idx], value=acc, mask=idx < N)
    return out
