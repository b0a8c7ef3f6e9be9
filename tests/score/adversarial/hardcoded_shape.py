"""Loophole 11: special-cases the published sizes; everything else takes an unmasked path.
Expect C2N4032 (fails only on hidden shapes) and C2N4031 (literal sizes)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512


@nki.jit
def vector_add(a, b):
    N = a.shape[0]
    c = nl.ndarray((N,), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F_TILE)[None, :]
    published = N == 100000 or N == 1000 or N == 4097
    for t in nl.affine_range((N + P_TILE * F_TILE - 1) // (P_TILE * F_TILE)):
        idx = t * (P_TILE * F_TILE) + i_p * F_TILE + i_f
        # the mask only where the published sizes need it
        ok = idx < (N if published else P_TILE * F_TILE)
        nl.store(c[idx], value=nl.add(nl.load(a[idx], mask=ok), nl.load(b[idx], mask=ok)), mask=ok)
    return c
