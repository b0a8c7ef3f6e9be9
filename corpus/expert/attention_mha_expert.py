"""Hand-written NKI for corpus/attention_mha.cu (multi-head causal attention), to compare.

Written like the final fp32 form of the NKI attention tutorial, for Q, K, V stored [S, D]
row-major (D <= 128): K^T ([D, S], turned on the Tensor engine block by block) and V (keys on
the partitions) stay in SBUF for every query tile. Per tile of 128 queries: Q^T as the
stationary operand, scores for 512 keys per matmul into one PSUM bank each; every bank leaves
PSUM scaled, with its row max, in one VectorE instruction; exp(s - max) and its row sum are
one ScalarE instruction per bank; the probabilities are turned block by block (keys onto the
partitions) and multiplied with V, accumulating in PSUM; 1 / sum scales the result on its way
out. Ragged lengths take the tail tiles at their true sizes (S is known when the kernel is
traced), so no padded key ever enters a max or a sum. Causal: a query tile reads only the keys
up to its last row (the tiles above the diagonal are never computed), and on the diagonal tile
the scores of later keys become -3e38 (GpSimd affine select) before the max, so exp gives 0.
The CUDA kernel's one-pass (online) softmax is the same function: the tiles here are whole
rows, so the two-pass form needs no rescaling.
Heads are independent: each (batch, head) pair runs the single-head form on its [T, HS] slice,
in an affine loop so one head's loads overlap another's compute.
attention_mha(Q, K, V, *, scale) -> O
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128  # queries per tile; keys per transposed block of probabilities
KT = 512  # keys per score matmul: one 2 KiB PSUM bank of fp32


@nki.jit
def attention_mha(Q, K, V, *, scale):  # noqa: N803 - the CUDA names
    B, NH, S, D = Q.shape
    assert D <= P, "head dim above 128 needs the contraction split over partitions"
    O = nl.ndarray((B, NH, S, D), dtype=Q.dtype, buffer=nl.shared_hbm)  # noqa: E741
    for bh in nl.affine_range(B * NH):
        b, h = bh // NH, bh % NH
        _one_head(Q[b, h], K[b, h], V[b, h], O[b, h], S, D, scale)
    return O


def _one_head(Q, K, V, O, S, D, scale):  # noqa: N803, E741 - [S, D] slices of one head
    nb = (S + P - 1) // P  # key blocks of 128
    k_t = nl.ndarray((nl.par_dim(D), nb * P), dtype=nl.float32, buffer=nl.sbuf)
    v_sb = nl.ndarray((nl.par_dim(P), nb, D), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.static_range(nb):
        b0 = b * P
        kb = min(P, S - b0)
        k_rows = nl.ndarray((nl.par_dim(P), D), dtype=nl.float32, buffer=nl.sbuf)
        k_rows[0:kb, :] = nl.load(K[b0 : b0 + kb, :])
        k_t[:, b0 : b0 + kb] = nisa.tensor_copy(nisa.nc_transpose(k_rows[0:kb, :]))
        v_sb[0:kb, b, :] = nl.load(V[b0 : b0 + kb, :])
    for qt in nl.static_range(nb):
        q0 = qt * P
        qr = min(P, S - q0)
        q_rows = nl.ndarray((nl.par_dim(P), D), dtype=nl.float32, buffer=nl.sbuf)
        q_rows[0:qr, :] = nl.load(Q[q0 : q0 + qr, :])
        q_t = nl.ndarray((nl.par_dim(D), P), dtype=nl.float32, buffer=nl.sbuf)
        q_t[:, 0:qr] = nisa.tensor_copy(nisa.nc_transpose(q_rows[0:qr, :]))
        n_keys = q0 + qr  # keys 0 .. the tile's last query
        nk = (n_keys + KT - 1) // KT
        # s = (q . k) * scale for every key, and each bank's row max
        s_sb = nl.ndarray((nl.par_dim(P), nb * P), dtype=nl.float32, buffer=nl.sbuf)
        maxes = nl.ndarray((nl.par_dim(P), nk), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.static_range(nk):
            k0 = c * KT
            kw = min(KT, n_keys - k0)
            s_ps = nisa.nc_matmul(q_t[:, 0:qr], k_t[:, k0 : k0 + kw])
            if k0 + kw > q0 + 1:  # keys after some query of the tile: masked
                i_q = nl.arange(qr)[:, None]
                i_k = nl.arange(kw)[None, :]
                scaled = nisa.tensor_scalar(s_ps, op0=nl.multiply, operand0=scale)
                s_sb[0:qr, k0 : k0 + kw] = nisa.affine_select(
                    q0 + i_q - (k0 + i_k) >= 0, scaled, -3.0e38
                )
                maxes[0:qr, c : c + 1] = nisa.tensor_reduce(
                    nl.max, s_sb[0:qr, k0 : k0 + kw], axis=1
                )
                continue
            s_sb[0:qr, k0 : k0 + kw] = nisa.tensor_scalar_reduce(
                data=s_ps, op0=nl.multiply, operand0=scale, reduce_op=nl.max,
                reduce_res=maxes[0:qr, c : c + 1],
            )  # fmt: skip
        neg_max = nisa.tensor_reduce(nl.max, maxes[0:qr, :], axis=1, negate=True)
        # p = exp(s - max) in place, and each bank's row sum
        sums = nl.ndarray((nl.par_dim(P), nk), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.static_range(nk):
            k0 = c * KT
            kw = min(KT, n_keys - k0)
            s_sb[0:qr, k0 : k0 + kw] = nisa.activation_reduce(
                op=nl.exp, data=s_sb[0:qr, k0 : k0 + kw], bias=neg_max, reduce_op=nl.add,
                reduce_res=sums[0:qr, c : c + 1],
            )  # fmt: skip
        inv = nisa.reciprocal(nisa.tensor_reduce(nl.add, sums[0:qr, :], axis=1))
        # O = p V: each 128-key block of p turned (keys on the partitions), summed in PSUM
        o_ps = nl.zeros((nl.par_dim(P), D), dtype=nl.float32, buffer=nl.psum)
        for b in nl.static_range((n_keys + P - 1) // P):
            b0 = b * P
            kb = min(P, n_keys - b0)
            p_t = nl.ndarray((nl.par_dim(P), P), dtype=nl.float32, buffer=nl.sbuf)
            # the PSUM evictions alternate between VectorE and ScalarE, which are both busy
            eng = nisa.scalar_engine if b % 2 else nisa.vector_engine
            p_ps = nisa.nc_transpose(s_sb[0:qr, b0 : b0 + kb])
            p_t[0:kb, 0:qr] = nisa.tensor_copy(p_ps, engine=eng)
            o_ps[0:qr, :] += nisa.nc_matmul(p_t[0:kb, 0:qr], v_sb[0:kb, b, :])
        o_sb = nisa.tensor_scalar(o_ps[0:qr, :], op0=nl.multiply, operand0=inv)
        nl.store(O[q0 : q0 + qr, :], value=o_sb)
