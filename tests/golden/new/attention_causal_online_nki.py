"""Causal attention: O[i, j] = (1 / (sum_{k < i + 1} exp((scale * (sum_{s < D} (K[k, s] * Q[i, s]))) - (max_{q < i + 1} (scale * (sum_{r < D} (K[q, r] * Q[i, r]))))))) * (sum_{t < i + 1} (V[t, j] * exp((scale * (sum_{k1 …

Migrated by cuda2nki from attention_causal_online.cu (kernel `attention_causal_online_kernel`, family attention, lifted),
for the standalone `nki` package (NKI 0.3+): slices sized at trace time instead of masks.
Calling convention (cuda2nki task contract 1.0):
    attention_causal_online(Q, K, V, *, scale) -> O
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="attention_causal_online_kernel"))

import nki
import nki.isa as nisa
import nki.language as nl


P_TILE = 128  # queries per tile; keys per transposed block
KEY_TILE = 512  # keys per score matmul (one PSUM bank of fp32)
MAX_KEYS = 8192  # longest key sequence kept resident in SBUF


@nki.jit
def attention_causal_online(Q, K, V, *, scale):
    T = Q.shape[0]
    D = Q.shape[1]

    assert D <= 128, "a head dim above 128 (the partitions) needs the contraction split over partition tiles"
    assert T <= MAX_KEYS, "longer sequences need K and V streamed (the online-softmax form)"
    O = nl.ndarray((T, D), dtype=nl.float32, buffer=nl.shared_hbm)

    n_kb = (T + P_TILE - 1) // P_TILE
    # from attention_causal_online.cu:15 — K^T (turned on the Tensor engine) and V stay in SBUF for every query tile
    k_t = nl.ndarray((D, n_kb * P_TILE), dtype=nl.float32, buffer=nl.sbuf)
    v_sb = nl.ndarray((P_TILE, n_kb, D), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.static_range(n_kb):
        b0 = b * P_TILE
        kb = min(P_TILE, T - b0)
        k_rows = nl.ndarray((P_TILE, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=k_rows[0:kb, :], src=K[b0 : b0 + kb, :])
        k_ps = nl.ndarray((D, P_TILE), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=k_ps[:, 0:kb], data=k_rows[0:kb, :])
        nisa.tensor_copy(dst=k_t[:, b0 : b0 + kb], src=k_ps[:, 0:kb])
        nisa.dma_copy(dst=v_sb[0:kb, b, :], src=V[b0 : b0 + kb, :])
    for qt in nl.static_range((T + P_TILE - 1) // P_TILE):
        q0 = qt * P_TILE
        qr = min(P_TILE, T - q0)
        # from attention_causal_online.cu:15 — causal: key tiles past the query tile's last row are skipped; on the diagonal, keys after the query are set to -3e38 before the max (exp gives 0)
        n_keys = min(T, q0 + qr)
        n_kt = (n_keys + KEY_TILE - 1) // KEY_TILE
        q_t = nl.ndarray((D, P_TILE), dtype=nl.float32, buffer=nl.sbuf)
        q_rows = nl.ndarray((P_TILE, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=q_rows[0:qr, :], src=Q[q0 : q0 + qr, :])
        q_ps = nl.ndarray((D, P_TILE), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=q_ps[:, 0:qr], data=q_rows[0:qr, :])
        nisa.tensor_copy(dst=q_t[:, 0:qr], src=q_ps[:, 0:qr])
        # from attention_causal_online.cu:15 — scores for KEY_TILE keys per matmul (Q^T stationary, contraction over the head dim), scaled with their row max on the way out of PSUM
        s_sb = nl.ndarray((P_TILE, n_kb * P_TILE), dtype=nl.float32, buffer=nl.sbuf)
        maxes = nl.ndarray((P_TILE, n_kt), dtype=nl.float32, buffer=nl.sbuf)
        for kt in nl.static_range(n_kt):
            k0 = kt * KEY_TILE
            kw = min(KEY_TILE, n_keys - k0)
            s_ps = nl.ndarray((P_TILE, KEY_TILE), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_ps[0:qr, 0:kw], stationary=q_t[:, 0:qr], moving=k_t[:, k0 : k0 + kw])
            if k0 + kw > q0 + 1:  # a diagonal tile: keys after their query are masked
                scaled = nl.ndarray((P_TILE, KEY_TILE), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=scaled[0:qr, 0:kw], data=s_ps[0:qr, 0:kw], op0=nl.multiply, operand0=scale)
                # keep (q0 + p) - (k0 + f) >= 0: the key is not after the query
                nisa.affine_select(dst=s_sb[0:qr, k0 : k0 + kw], pattern=[[-1, kw]], channel_multiplier=1, on_true_tile=scaled[0:qr, 0:kw], on_false_value=-3.0e38, cmp_op=nl.greater_equal, offset=q0 - k0)
                nisa.tensor_reduce(dst=maxes[0:qr, kt : kt + 1], op=nl.max, data=s_sb[0:qr, k0 : k0 + kw], axis=1)
                continue
            nisa.tensor_scalar_reduce(dst=s_sb[0:qr, k0 : k0 + kw], data=s_ps[0:qr, 0:kw], op0=nl.multiply, operand0=scale, reduce_op=nl.max, reduce_res=maxes[0:qr, kt : kt + 1])
        neg_max = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max[0:qr, :], op=nl.max, data=maxes[0:qr, 0:n_kt], axis=1, negate=True)
        # from attention_causal_online.cu:15 — exp(s - max) and its row sum in one ScalarE instruction per score tile
        sums = nl.ndarray((P_TILE, n_kt), dtype=nl.float32, buffer=nl.sbuf)
        for kt in nl.static_range(n_kt):
            k0 = kt * KEY_TILE
            kw = min(KEY_TILE, n_keys - k0)
            nisa.activation_reduce(dst=s_sb[0:qr, k0 : k0 + kw], op=nl.exp, data=s_sb[0:qr, k0 : k0 + kw], reduce_op=nl.add, reduce_res=sums[0:qr, kt : kt + 1], bias=neg_max[0:qr, :])
        total = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=total[0:qr, :], op=nl.add, data=sums[0:qr, 0:n_kt], axis=1)
        inv = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[0:qr, :], data=total[0:qr, :])
        # from attention_causal_online.cu:15 — each 128-key block of probabilities turned (keys on the partitions) and multiplied with V, accumulating in PSUM; 1 / sum on the way out
        o_ps = nl.ndarray((P_TILE, D), dtype=nl.float32, buffer=nl.psum)
        for b in nl.static_range((n_keys + P_TILE - 1) // P_TILE):
            b0 = b * P_TILE
            kb = min(P_TILE, n_keys - b0)
            p_ps = nl.ndarray((P_TILE, P_TILE), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=p_ps[0:kb, 0:qr], data=s_sb[0:qr, b0 : b0 + kb])
            p_t = nl.ndarray((P_TILE, P_TILE), dtype=nl.float32, buffer=nl.sbuf)
            # PSUM evictions alternate between the Vector and Scalar engines, both busy here
            eng = nisa.engine.scalar if b % 2 else nisa.engine.vector
            nisa.tensor_copy(dst=p_t[0:kb, 0:qr], src=p_ps[0:kb, 0:qr], engine=eng)
            nisa.nc_matmul(dst=o_ps[0:qr, :], stationary=p_t[0:kb, 0:qr], moving=v_sb[0:kb, b, :])
        # from attention_causal_online.cu:15 — lifted: O[i, j] = (1 / (sum_{k < i + 1} exp((scale * (sum_{s < D} (K[k, s] * Q[i, s]))) - (max_{q < i + 1} (scale * (sum_{r < D} (K[q, r] * Q[i, r]))))))) * (sum_{t < …
        o_sb = nl.ndarray((P_TILE, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o_sb[0:qr, :], data=o_ps[0:qr, :], op0=nl.multiply, operand0=inv[0:qr, :])
        nl.store(O[q0 : q0 + qr, :], value=o_sb[0:qr, :])
    return O
