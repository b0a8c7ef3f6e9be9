"""Loophole 3: not an NKI kernel at all; returns a host array. Expect C2N4021."""

P_TILE = 128
F_TILE = 512


def vector_add(a, b):
    # returns something that no NKI store produced
    return [0.0]
