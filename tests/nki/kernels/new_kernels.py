"""New-dialect (standalone ``nki``) kernels: explicit ``dst=`` ISA calls, slices only."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def tensor_add(a, b):
    """c = a + b, one 128-row slab per iteration."""
    rows, cols = a.shape
    out = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(rows // 128):
        a_tile = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((128, cols), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a[i * 128 : (i + 1) * 128, :])
        nisa.dma_copy(dst=b_tile, src=b[i * 128 : (i + 1) * 128, :])
        c_tile = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add)
        nisa.dma_copy(dst=out[i * 128 : (i + 1) * 128, :], src=c_tile)
    return out


@nki.jit
def matmul(lhsT, rhs):
    """out = lhsT.T @ rhs with nc_matmul(dst=psum) accumulating over K (accumulate=None)."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in range(M // 128):
        for n in range(N // 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in range(K // 128):
                lhsT_tile = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(
                    dst=lhsT_tile, src=lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128]
                )
                nisa.dma_copy(
                    dst=rhs_tile, src=rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512]
                )
                nisa.nc_matmul(dst=acc, stationary=lhsT_tile, moving=rhs_tile)
            res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], src=res)
    return out


@nki.jit
def iota_rows(x):
    """dst = p * 10 + j via the new iota pattern form, then added to x."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    idx = nl.ndarray((rows, cols), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=idx, pattern=[[1, cols]], offset=0, channel_multiplier=10)
    tile = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    res = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=res, data1=tile, data2=idx, op=nl.add)
    nisa.dma_copy(dst=out, src=res)
    return out
