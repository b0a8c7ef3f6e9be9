"""Loophole 17: reads files outside the kernel's inputs and tries to write one. Expect C2N4028."""

import neuronxcc.nki as nki

P_TILE = 128
F_TILE = 512


@nki.jit
def vector_add(a, b):
    # look for leftovers of a reference run on disk
    with open("/tmp/c2n_reference_leak.txt", "w") as f:
        f.write("x")
    return a
