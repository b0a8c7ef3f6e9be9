"""Causal attention: O[i, j, l, m] = (1 / (sum_{k < l + 1} exp((scale * (sum_{s < HS} (K[i, j, k, s] * Q[i, j, l, s]))) - (max_{q < l + 1} (scale * (sum_{r < HS} (K[i, j, q, r] * Q[i, j, l, r]))))))) * (sum_{t < l + 1} (…

Migrated by cuda2nki from attention_mha.cu (kernel `attention_mha_kernel`, family attention, lifted).
Calling convention (cuda2nki task contract 1.0):
    attention_mha(Q, K, V, *, scale) -> O
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="attention_mha_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


P_TILE = 128  # queries per tile; keys per transposed block
KEY_TILE = 512  # keys per score matmul (one PSUM bank of fp32)
MAX_KEYS = 8192  # longest key sequence kept resident in SBUF


@nki.jit
def attention_mha(Q, K, V, *, scale):
    B = Q.shape[0]
    NH = Q.shape[1]
    T = Q.shape[2]
    HS = Q.shape[3]

    assert HS <= 128, "a head dim above 128 (the partitions) needs the contraction split over partition tiles"
    assert T <= MAX_KEYS, "longer sequences need K and V streamed (the online-softmax form)"
    O = nl.ndarray((B, NH, T, HS), dtype=nl.float32, buffer=nl.shared_hbm)

    # Tiles are cut to the sequence at trace time (lengths are known then), so no padded key
    # enters a max or a sum.
    # one attention per batch entry (and head), each tensor viewed as [entries, rows, cols]
    Q_h = Q.reshape((B * NH, T, HS))
    K_h = K.reshape((B * NH, T, HS))
    V_h = V.reshape((B * NH, T, HS))
    O_h = O.reshape((B * NH, T, HS))
    for bh in nl.affine_range(B * NH):
        n_kb = (T + P_TILE - 1) // P_TILE
        # from attention_mha.cu:12 — K^T (turned on the Tensor engine) and V stay in SBUF for every query tile
        k_t = nl.ndarray((nl.par_dim(HS), n_kb * P_TILE), dtype=nl.float32, buffer=nl.sbuf)
        v_sb = nl.ndarray((nl.par_dim(P_TILE), n_kb, HS), dtype=nl.float32, buffer=nl.sbuf)
        for b in nl.static_range(n_kb):
            b0 = b * P_TILE
            kb = min(P_TILE, T - b0)
            k_rows = nl.ndarray((nl.par_dim(P_TILE), HS), dtype=nl.float32, buffer=nl.sbuf)
            k_rows[0:kb, :] = nl.load(K_h[bh, b0 : b0 + kb, :])
            k_t[:, b0 : b0 + kb] = nisa.tensor_copy(nisa.nc_transpose(k_rows[0:kb, :]))
            v_sb[0:kb, b, :] = nl.load(V_h[bh, b0 : b0 + kb, :])
        for qt in nl.static_range((T + P_TILE - 1) // P_TILE):
            q0 = qt * P_TILE
            qr = min(P_TILE, T - q0)
            # from attention_mha.cu:12 — causal: key tiles past the query tile's last row are skipped; on the diagonal, keys after the query are set to -3e38 before the max (exp gives 0)
            n_keys = min(T, q0 + qr)
            n_kt = (n_keys + KEY_TILE - 1) // KEY_TILE
            q_t = nl.ndarray((nl.par_dim(HS), P_TILE), dtype=nl.float32, buffer=nl.sbuf)
            q_rows = nl.ndarray((nl.par_dim(P_TILE), HS), dtype=nl.float32, buffer=nl.sbuf)
            q_rows[0:qr, :] = nl.load(Q_h[bh, q0 : q0 + qr, :])
            q_t[:, 0:qr] = nisa.tensor_copy(nisa.nc_transpose(q_rows[0:qr, :]))
            # from attention_mha.cu:12 — scores for KEY_TILE keys per matmul (Q^T stationary, contraction over the head dim), scaled with their row max on the way out of PSUM
            s_sb = nl.ndarray((nl.par_dim(P_TILE), n_kb * P_TILE), dtype=nl.float32, buffer=nl.sbuf)
            maxes = nl.ndarray((nl.par_dim(P_TILE), n_kt), dtype=nl.float32, buffer=nl.sbuf)
            for kt in nl.static_range(n_kt):
                k0 = kt * KEY_TILE
                kw = min(KEY_TILE, n_keys - k0)
                s_ps = nisa.nc_matmul(q_t[:, 0:qr], k_t[:, k0 : k0 + kw])
                if k0 + kw > q0 + 1:  # a diagonal tile: keys after their query are masked
                    i_q = nl.arange(qr)[:, None]
                    i_k = nl.arange(kw)[None, :]
                    scaled = nisa.tensor_scalar(s_ps, op0=nl.multiply, operand0=scale)
                    s_sb[0:qr, k0 : k0 + kw] = nisa.affine_select(q0 + i_q - k0 - i_k >= 0, scaled, -3.0e38)
                    maxes[0:qr, kt : kt + 1] = nisa.tensor_reduce(nl.max, s_sb[0:qr, k0 : k0 + kw], axis=1)
                    continue
                s_sb[0:qr, k0 : k0 + kw] = nisa.tensor_scalar_reduce(data=s_ps, op0=nl.multiply, operand0=scale, reduce_op=nl.max, reduce_res=maxes[0:qr, kt : kt + 1])
            neg_max = nisa.tensor_reduce(nl.max, maxes[0:qr, :], axis=1, negate=True)
            # from attention_mha.cu:12 — exp(s - max) and its row sum in one ScalarE instruction per score tile
            sums = nl.ndarray((nl.par_dim(P_TILE), n_kt), dtype=nl.float32, buffer=nl.sbuf)
            for kt in nl.static_range(n_kt):
                k0 = kt * KEY_TILE
                kw = min(KEY_TILE, n_keys - k0)
                s_sb[0:qr, k0 : k0 + kw] = nisa.activation_reduce(op=nl.exp, data=s_sb[0:qr, k0 : k0 + kw], bias=neg_max, reduce_op=nl.add, reduce_res=sums[0:qr, kt : kt + 1])
            inv = nisa.reciprocal(nisa.tensor_reduce(nl.add, sums[0:qr, :], axis=1))
            # from attention_mha.cu:12 — each 128-key block of probabilities turned (keys on the partitions) and multiplied with V, accumulating in PSUM; 1 / sum on the way out
            o_ps = nl.zeros((nl.par_dim(P_TILE), HS), dtype=nl.float32, buffer=nl.psum)
            for b in nl.static_range((n_keys + P_TILE - 1) // P_TILE):
                b0 = b * P_TILE
                kb = min(P_TILE, n_keys - b0)
                p_t = nl.ndarray((nl.par_dim(P_TILE), P_TILE), dtype=nl.float32, buffer=nl.sbuf)
                # PSUM evictions alternate between the Vector and Scalar engines, both busy here
                eng = nisa.scalar_engine if b % 2 else nisa.vector_engine
                p_t[0:kb, 0:qr] = nisa.tensor_copy(nisa.nc_transpose(s_sb[0:qr, b0 : b0 + kb]), engine=eng)
                o_ps[0:qr, :] += nisa.nc_matmul(p_t[0:kb, 0:qr], v_sb[0:kb, b, :])
            # from attention_mha.cu:12 — lifted: O[i, j, l, m] = (1 / (sum_{k < l + 1} exp((scale * (sum_{s < HS} (K[i, j, k, s] * Q[i, j, l, s]))) - (max_{q < l + 1} (scale * (sum_{r < HS} (K[i, j, q, r] * Q…
            nl.store(O_h[bh, q0 : q0 + qr, :], value=nisa.tensor_scalar(o_ps[0:qr, :], op0=nl.multiply, operand0=inv))
    return O
