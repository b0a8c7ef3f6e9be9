"""Hand-written NKI for corpus/scan_warp.cu (inclusive prefix sums
within each block of 256), to compare.

Each CUDA block's run of 256 consecutive elements becomes one partition's row: 128 runs per tile,
each scanned along the free axis by one VectorE tensor_tensor_scan (r[j] = 1 * r[j-1] + x[j]),
the partial last run masked at the array's end. scan_warp(x) -> out.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
RUN = 256  # elements per CUDA block


@nki.jit
def scan_warp(x):
    (N,) = x.shape
    out = nl.ndarray((N,), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(RUN)[None, :]
    ones = nl.full((P_TILE, RUN), 1.0, dtype=nl.float32, buffer=nl.sbuf)
    for t in nl.affine_range((N + P_TILE * RUN - 1) // (P_TILE * RUN)):
        idx = (t * P_TILE + nl.arange(P_TILE)[:, None]) * RUN + i_f
        ok = idx < N
        v = nl.load(x[idx], mask=ok)
        s = nisa.tensor_tensor_scan(ones, v, initial=0.0, op0=nl.multiply, op1=nl.add)
        nl.store(out[idx], value=s, mask=ok)
    return out
