"""Loophole 1: returns an output buffer it never wrote, hoping it holds a previous result.
Expect C2N4040 (the emulator poisons fresh buffers; the reference never ran in this process)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512


@nki.jit
def vector_add(a, b):
    N = a.shape[0]
    # allocated, never written
    c = nl.ndarray((N,), dtype=nl.float32, buffer=nl.shared_hbm)
    return c
