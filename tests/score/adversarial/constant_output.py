"""Loophole 2: writes a constant that does not depend on the inputs. Expect C2N4023."""

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
    for t in nl.affine_range((N + P_TILE * F_TILE - 1) // (P_TILE * F_TILE)):
        idx = t * (P_TILE * F_TILE) + i_p * F_TILE + i_f
        ok = idx < N
        # a memset instead of a + b
        nl.store(c[idx], value=nl.zeros((P_TILE, F_TILE), dtype=nl.float32), mask=ok)
    return c
