"""Loophole 2: returns an input tensor. Expect C2N4022."""

import neuronxcc.nki as nki

P_TILE = 128
F_TILE = 512


@nki.jit
def vector_add(a, b):
    # no computation at all
    return a
