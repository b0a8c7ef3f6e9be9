"""Loophole 9/17: replaces an NKI function at import time. Expect C2N4026 (static) and C2N4027
(runtime: the emulator's object changed)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512

_real_add = nl.add


def _patched_add(x, y, **kw):
    return _real_add(x, y, **kw)


nl.add = _patched_add


@nki.jit
def vector_add(a, b):
    N = a.shape[0]
    c = nl.ndarray((N,), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F_TILE)[None, :]
    for t in nl.affine_range((N + P_TILE * F_TILE - 1) // (P_TILE * F_TILE)):
        idx = t * (P_TILE * F_TILE) + i_p * F_TILE + i_f
        ok = idx < N
        nl.store(c[idx], value=nl.add(nl.load(a[idx], mask=ok), nl.load(b[idx], mask=ok)), mask=ok)
    return c
