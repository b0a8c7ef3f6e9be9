"""Loophole: loads tiles with NKI, reads their values back into Python (the emulator's
Tensor.read), adds them with numpy and stores the numpy array. Expect C2N4020."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128


@nki.jit
def vector_add(a, b):
    # one tile column per partition row; the sum happens on the host
    N = a.shape[0]
    c = nl.ndarray((N,), dtype=a.dtype, buffer=nl.shared_hbm)
    F = (N + P_TILE - 1) // P_TILE
    idx = nl.arange(P_TILE)[:, None] * F + nl.arange(F)[None, :]
    ok = idx < N
    ta = nl.load(a[idx], mask=ok)
    tb = nl.load(b[idx], mask=ok)
    host = ta.read()[0] + tb.read()[0]
    nl.store(c[idx], value=host, mask=ok)
    return c
