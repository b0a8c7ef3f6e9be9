"""Loophole 3: computes with numpy on the host instead of NKI ops. Expect C2N4020."""

import neuronxcc.nki as nki
import numpy as np

P_TILE = 128
F_TILE = 512


@nki.jit
def vector_add(a, b):
    # the "kernel" hands the work to numpy
    return np.add(np.asarray(a), np.asarray(b))
