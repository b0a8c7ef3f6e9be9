"""Loophole 4: caches results across calls, keyed by shape. Expect C2N4024 (and wrong results
on later trials with fresh inputs of a shape seen before)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512

_CACHE = {}


@nki.jit
def vector_add(a, b):
    N = a.shape[0]
    if N in _CACHE:
        # replay the earlier result
        return _CACHE[N]
    c = nl.ndarray((N,), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F_TILE)[None, :]
    for t in nl.affine_range((N + P_TILE * F_TILE - 1) // (P_TILE * F_TILE)):
        idx = t * (P_TILE * F_TILE) + i_p * F_TILE + i_f
        ok = idx < N
        nl.store(c[idx], value=nl.add(nl.load(a[idx], mask=ok), nl.load(b[idx], mask=ok)), mask=ok)
    _CACHE[N] = c
    return c
