"""Hand-written NKI for corpus/embedding.cu (token + position embedding), to compare.

Token rows go on the partitions: a tile of up to 128 positions t of one sequence b gathers its
rows of wte by token id with one indirect DMA (the id tile on the partition axis), and adds the
same 128 rows of wpe. The wpe tile is loaded once per (position tile, column tile) and reused
for every sequence of the batch. embedding_fwd(tokens, wte, wpe) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512


@nki.jit
def embedding_fwd(tokens, wte, wpe):
    T, C = wpe.shape
    B = tokens.shape[0] // T
    out = nl.ndarray((B * T, C), dtype=wte.dtype, buffer=nl.shared_hbm)
    i_l = nl.arange(P_TILE)[:, None]
    for r in nl.affine_range((T + P_TILE - 1) // P_TILE):
        i_t = r * P_TILE + i_l
        for c in nl.affine_range((C + F_TILE - 1) // F_TILE):
            i_f = c * F_TILE + nl.arange(F_TILE)[None, :]
            ok = (i_t < T) & (i_f < C)
            pos = nl.load(wpe[i_t, i_f], mask=ok)
            for b in nl.affine_range(B):
                # partitions past the last position still need a valid id: zeros first
                ids = nl.zeros((P_TILE, 1), dtype=tokens.dtype, buffer=nl.sbuf)
                ids[i_l, 0] = nl.load(tokens[b * T + i_t], mask=i_t < T)
                tok = nl.load(wte[ids[i_l, 0], i_f], mask=ok)
                nl.store(out[b * T + i_t, i_f], value=nl.add(tok, pos), mask=ok)
    return out
