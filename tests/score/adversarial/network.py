"""Loophole 17: opens a network connection at import. Expect C2N4028 (static) and C2N4004
(the sandbox refuses the import)."""

import socket

import neuronxcc.nki as nki

P_TILE = 128
F_TILE = 512

socket.create_connection(("example.com", 80), timeout=1)


@nki.jit
def vector_add(a, b):
    return a
