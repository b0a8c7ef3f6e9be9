"""Elementwise map: out[i, j] = wpe[(i % T), j] + wte[tokens[i], j]

Migrated by cuda2nki from embedding.cu (kernel `embedding_fwd_kernel`, family elementwise, lifted).
Calling convention (cuda2nki task contract 1.0):
    embedding_fwd(tokens, wte, wpe) -> out
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="embedding_fwd_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


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
    i_l = nl.arange(P_TILE)[:, None]
    for r in nl.affine_range((T + P_TILE - 1) // P_TILE):
        i_s = r * P_TILE + i_l
        for col in nl.affine_range((C + F_TILE - 1) // F_TILE):
            i_f = col * F_TILE + nl.arange(F_TILE)[None, :]
            # from embedding.cu:11 — the kernel's bounds become the tile mask
            in_bounds = (i_s < T) & (i_f < C)
            wpe_tile = nl.load(wpe[i_s, i_f], mask=in_bounds)
            for b in nl.affine_range(tokens.shape[0] // T):
                i_p = b * T + i_s
                # from embedding.cu:11 — rows gathered by index (indirect DMA): every index must lie inside its table, as in the CUDA original
                # zeros first: partitions past the last row must still hold an index (none is read there)
                tokens_ids = nl.zeros((P_TILE, 1), dtype=tokens.dtype, buffer=nl.sbuf)
                tokens_ids[i_l, 0] = nl.load(tokens[i_p], mask=i_s < T)
                wte_tile = nl.load(wte[tokens_ids[i_l, 0], i_f], mask=in_bounds)
                # from embedding.cu:11 — lifted: out[i, j] = wpe[(i % T), j] + wte[tokens[i], j]
                nl.store(out[i_p, i_f], value=nl.add(wpe_tile, wte_tile), mask=in_bounds)

    return out
