"""A kernel that allocates far more than the memory limit. Expect C2N4003."""

import neuronxcc.nki as nki

P_TILE = 128
F_TILE = 512


@nki.jit
def vector_add(a, b):
    # 64 GiB
    blob = bytearray(64 << 30)
    return blob
