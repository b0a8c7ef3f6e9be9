"""Loophole 20: hides a failing kernel behind try/except and a fallback. Expect C2N4030."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

P_TILE = 128
F_TILE = 512


@nki.jit
def vector_add(a, b):
    try:
        # an illegal 256-partition tile: the emulator raises
        t = nl.load(a[nl.arange(256)[:, None]])
        return t
    except Exception:
        return b
