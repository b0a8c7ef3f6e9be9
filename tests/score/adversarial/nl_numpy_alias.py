"""Loophole: reaches numpy through the NKI language module (`nl.np`), computes on the host
and stores the array. Expect C2N4020."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128


@nki.jit
def vector_add(a, b):
    # numpy without importing it: the host does the work
    N = a.shape[0]
    c = nl.ndarray((N,), dtype=a.dtype, buffer=nl.shared_hbm)
    F = (N + P_TILE - 1) // P_TILE
    idx = nl.arange(P_TILE)[:, None] * F + nl.arange(F)[None, :]
    ok = idx < N
    host = nl.np.asarray(a.storage.data)
    total = host + nl.np.asarray(b.storage.data)
    flat = nl.np.zeros(P_TILE * F, dtype=total.dtype)
    flat[:N] = total
    nl.store(c[idx], value=flat.reshape(P_TILE, F), mask=ok)
    return c
