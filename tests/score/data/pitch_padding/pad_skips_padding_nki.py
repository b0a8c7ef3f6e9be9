import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def pad(x, m):
    # only the first C columns of each row: the padding is never written, as in CUDA
    R, LD = x.shape
    C = m.shape[0]
    y = nl.ndarray((R, LD), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(LD)[None, :]
    i_0 = nl.arange(1)[:, None]
    w = nl.load(m.reshape((1, C))[i_0, i_f], mask=i_f < C)
    for t in nl.affine_range((R + 127) // 128):
        rows = t * 128 + i_p
        ok = (rows < R) & (i_f < C)
        v = nl.load(x[rows, i_f], mask=ok)
        nl.store(y[rows, i_f], value=nl.multiply(v, w), mask=ok)
    return y
