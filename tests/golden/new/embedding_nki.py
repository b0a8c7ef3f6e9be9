"""Elementwise map: out[i, j] = wpe[(i % T), j] + wte[tokens[i], j]

Migrated by cuda2nki from embedding.cu (kernel `embedding_fwd_kernel`, family elementwise, lifted),
for the standalone `nki` package (NKI 0.3+): slices sized at trace time instead of masks.
Calling convention (cuda2nki task contract 1.0):
    embedding_fwd(tokens, wte, wpe) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="embedding_fwd_kernel"))

import nki
import nki.isa as nisa
import nki.language as nl


P_TILE = 128  # partitions per tile (nl.tile_size.pmax)
F_TILE = 512  # elements per partition per tile: 2 KiB fp32 DMAs


@nki.jit
def embedding_fwd(tokens, wte, wpe):
    T = wpe.shape[0]
    C = wte.shape[1]
    V = wte.shape[0]

    out = nl.ndarray((tokens.shape[0], C), dtype=nl.float32, buffer=nl.shared_hbm)

    # from embedding.cu:11 — one output element per CUDA thread (lifted program)
    # Row i reads row i % T of a [T, cols] tensor: the rows are tiled block by block
    # of T; each tile of that tensor is loaded once and serves every block.
    assert tokens.shape[0] % T == 0, "the rows come in whole blocks"
    for r in nl.affine_range((T + P_TILE - 1) // P_TILE):
        s0 = r * P_TILE
        rows = min(P_TILE, T - s0)
        for col in nl.affine_range((C + F_TILE - 1) // F_TILE):
            c0 = col * F_TILE
            cols = min(F_TILE, C - c0)
            wpe_tile_buf = nl.ndarray((P_TILE, F_TILE), dtype=wpe.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=wpe_tile_buf[0:rows, 0:cols], src=wpe[s0 : s0 + rows, c0 : c0 + cols])
            wpe_tile = wpe_tile_buf[0:rows, 0:cols]
            for b in nl.affine_range(tokens.shape[0] // T):
                r0 = b * T + s0
                # from embedding.cu:11 — rows gathered by index (indirect DMA): every index must lie inside its table, as in the CUDA original
                tokens_ids_buf = nl.ndarray((P_TILE, 1), dtype=tokens.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=tokens_ids_buf[0:rows, 0:1], src=tokens[r0 : r0 + rows].reshape((rows, 1)))
                tokens_ids = tokens_ids_buf[0:rows, 0:1]
                # one table row per partition, the row number taken from the index tile (indirect DMA)
                wte_tile_buf = nl.ndarray((P_TILE, F_TILE), dtype=wte.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=wte_tile_buf[0:rows, 0:cols], src=wte.ap(pattern=[[wte.shape[1], rows], [1, cols]], offset=c0, vector_offset=tokens_ids, indirect_dim=0))
                wte_tile = wte_tile_buf[0:rows, 0:cols]
                # from embedding.cu:11 — lifted: out[i, j] = wpe[(i % T), j] + wte[tokens[i], j]
                nl.store(out[r0 : r0 + rows, c0 : c0 + cols], value=nl.add(wpe_tile, wte_tile))

    return out
