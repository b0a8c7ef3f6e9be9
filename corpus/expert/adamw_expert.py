"""Hand-written NKI for corpus/adamw.cu (one fused AdamW step, three buffers in place), to compare.

The grid-stride loop becomes tiles of 128 partitions x F contiguous elements of the flat
buffers (F <= 512 fp32, 2 KiB per partition row, balanced so every tile is nearly full) with a
mask for the ragged end; each tile's buffers are allocated in the loop body so the next tile's
loads overlap this tile's compute. The update is fused VectorE tensor_scalar /
scalar_tensor_tensor instructions in fp32 following the CUDA expressions, with the square root
on ScalarE; param, exp_avg and exp_avg_sq are written once each (inout, returned as new HBM
tensors). adamw(param, exp_avg, exp_avg_sq, grad, *, lr, beta1, beta2, eps, weight_decay,
step_size, bias_correction2_sqrt) -> (param, exp_avg, exp_avg_sq).
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

P_TILE = 128
F_MAX = 512  # fp32 elements per partition row: 2 KiB DMA rows


@nki.jit
def adamw(
    param,
    exp_avg,
    exp_avg_sq,
    grad,
    *,
    lr,
    beta1,
    beta2,
    eps,
    weight_decay,
    step_size,
    bias_correction2_sqrt,
):
    N = param.shape[0]
    param_out = nl.ndarray((N,), dtype=param.dtype, buffer=nl.shared_hbm)
    m_out = nl.ndarray((N,), dtype=exp_avg.dtype, buffer=nl.shared_hbm)
    v_out = nl.ndarray((N,), dtype=exp_avg_sq.dtype, buffer=nl.shared_hbm)
    # the kernel's scalar subexpressions, evaluated in fp32 as CUDA does
    f32 = np.float32
    decay = float(f32(1.0) - f32(lr) * f32(weight_decay))  # 1.0f - lr * weight_decay
    one_m_b1 = float(f32(1.0) - f32(beta1))  # 1.0f - beta1
    one_m_b2 = float(f32(1.0) - f32(beta2))  # 1.0f - beta2
    n_tiles = (N + P_TILE * F_MAX - 1) // (P_TILE * F_MAX)
    F = (N + P_TILE * n_tiles - 1) // (P_TILE * n_tiles)  # balanced tile width
    i_p = nl.arange(P_TILE)[:, None]
    i_f = nl.arange(F)[None, :]
    for t in nl.affine_range(n_tiles):
        idx = (t * P_TILE + i_p) * F + i_f
        ok = idx < N  # the grid-stride bound `i < n`
        g = nl.load(grad[idx], mask=ok)
        m0 = nl.load(exp_avg[idx], mask=ok)
        v0 = nl.load(exp_avg_sq[idx], mask=ok)
        p0 = nl.load(param[idx], mask=ok)
        # m = beta1 * exp_avg[i] + (1.0f - beta1) * g
        m = nisa.scalar_tensor_tensor(
            data=g,
            op0=nl.multiply,
            operand0=one_m_b1,
            op1=nl.add,
            operand1=nisa.tensor_scalar(m0, op0=nl.multiply, operand0=beta1),
        )
        nl.store(m_out[idx], value=m, mask=ok)
        # v = beta2 * exp_avg_sq[i] + (1.0f - beta2) * g * g
        gg = nisa.scalar_tensor_tensor(
            data=g, op0=nl.multiply, operand0=one_m_b2, op1=nl.multiply, operand1=g
        )
        v = nisa.scalar_tensor_tensor(
            data=v0, op0=nl.multiply, operand0=beta2, op1=nl.add, operand1=gg
        )
        nl.store(v_out[idx], value=v, mask=ok)
        # denom = sqrtf(v) / bias_correction2_sqrt + eps  (sqrt on ScalarE)
        denom = nisa.tensor_scalar(
            nl.sqrt(v),
            op0=nl.divide,
            operand0=bias_correction2_sqrt,
            op1=nl.add,
            operand1=eps,
        )
        # step_size * m / denom
        upd = nisa.scalar_tensor_tensor(
            data=m, op0=nl.multiply, operand0=step_size, op1=nl.divide, operand1=denom
        )
        # param[i] = p * (1.0f - lr * weight_decay) - update
        p_new = nisa.scalar_tensor_tensor(
            data=p0, op0=nl.multiply, operand0=decay, op1=nl.subtract, operand1=upd
        )
        nl.store(param_out[idx], value=p_new, mask=ok)
    return param_out, m_out, v_out
