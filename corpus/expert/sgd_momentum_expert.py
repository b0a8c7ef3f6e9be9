"""Hand-written NKI for corpus/sgd_momentum.cu (SGD step with momentum, weight decay), to compare.

The grid-stride loop becomes tiles of 128 partitions x F contiguous elements of the flat
buffers (F <= 512 fp32, 2 KiB per partition row, balanced so every tile is nearly full) with a
mask for the ragged end; each tile's buffers are allocated in the loop body so the next tile's
loads overlap this tile's compute. Each line of the CUDA body is one fused VectorE
scalar_tensor_tensor in fp32, and param and momentum_buf are written once per tile (both are
inout, returned as new HBM tensors). sgd_momentum(param, momentum_buf, grad, *, lr, momentum,
weight_decay) -> (param, momentum_buf).
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P_TILE = 128
F_MAX = 512  # fp32 elements per partition row: 2 KiB DMA rows


@nki.jit
def sgd_momentum(param, momentum_buf, grad, *, lr, momentum, weight_decay):
    N = param.shape[0]
    param_out = nl.ndarray((N,), dtype=param.dtype, buffer=nl.shared_hbm)
    buf_out = nl.ndarray((N,), dtype=momentum_buf.dtype, buffer=nl.shared_hbm)
    n_tiles = (N + P_TILE * F_MAX - 1) // (P_TILE * F_MAX)
    F = (N + P_TILE * n_tiles - 1) // (P_TILE * n_tiles)  # balanced tile width
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F)[None, :]
    for t in nl.affine_range(n_tiles):
        idx = (t * P_TILE + i_p) * F + i_f
        ok = idx < N  # the grid-stride bound `i < n`
        p = nl.load(param[idx], mask=ok)
        b = nl.load(momentum_buf[idx], mask=ok)
        g = nl.load(grad[idx], mask=ok)
        # d = grad[i] + weight_decay * p
        d = nisa.scalar_tensor_tensor(
            data=p, op0=nl.multiply, operand0=weight_decay, op1=nl.add, operand1=g
        )
        # buf = momentum * momentum_buf[i] + d
        buf = nisa.scalar_tensor_tensor(
            data=b, op0=nl.multiply, operand0=momentum, op1=nl.add, operand1=d
        )
        nl.store(buf_out[idx], value=buf, mask=ok)
        # param[i] = p - lr * buf, as p + (-lr) * buf (negation is exact)
        p_new = nisa.scalar_tensor_tensor(
            data=buf, op0=nl.multiply, operand0=-lr, op1=nl.add, operand1=p
        )
        nl.store(param_out[idx], value=p_new, mask=ok)
    return param_out, buf_out
