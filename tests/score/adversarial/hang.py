"""A kernel that never finishes. Expect C2N4002 (wall clock) or C2N4003 (CPU time)."""

import neuronxcc.nki as nki

P_TILE = 128
F_TILE = 512


@nki.jit
def vector_add(a, b):
    n = 0
    while True:
        n += 1
