"""Row program: dlogits[i, j] = (j == targets[i] ? dlosses[i] * (-1 + ((1 / (sum_{k < V} exp(logits[i, k] - (max_{q < V} logits[i, q])))) * exp(logits[i, j] - (max_{r < V} logits[i, r])))) : (1 / (sum_{k < V} exp(logits[i, k] - (max_{q < V} logits[i, q])))) * dlosses[i] * exp(logits[i, j] - (max_{r < V} logits[i, r]))); losses[i] = -1 * log((1 / (sum_{k < V} exp(logits[i, k] - (max_{q < V} logits[i, q])))) * exp(logits[i, targets[i]] - (max_{r < V} logits[i, r])))

Migrated by cuda2nki from fused_classifier.cu (kernel `fused_classifier_kernel`, family rows, lifted).
Calling convention (cuda2nki task contract 1.0):
    fused_classifier(logits, dlosses, targets) -> dlogits, losses
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="fused_classifier_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


P_TILE = 128  # rows per tile, one per partition (nl.tile_size.pmax)
MAX_ROW = 8192  # longest row kept whole on a partition (32 KiB fp32)


@nki.jit
def fused_classifier(logits, dlosses, targets):
    R = logits.shape[0]
    V = logits.shape[1]

    assert V <= MAX_ROW, "rows longer than MAX_ROW need a blocked two-pass version"
    dlogits = nl.ndarray((R, V), dtype=nl.float32, buffer=nl.shared_hbm)
    losses = nl.ndarray((R,), dtype=nl.float32, buffer=nl.shared_hbm)

    # from fused_classifier.cu:43 — one row per partition; each reduction along the free axis
    i_f = nl.arange(V)[None, :]
    col_ids = nisa.iota(i_f, dtype=nl.int32)  # the column numbers, [1, cols]
    # Row r * n_t + t on partition r, t = 0 .. n_t - 1: each partition's per-row values are
    # contiguous, so they load and store in one DMA each rather than one per row tile.
    n_t = (R + P_TILE - 1) // P_TILE
    i_q = nl.arange(P_TILE)[:, None]
    i_t = nl.arange(n_t)[None, :]
    i_1 = nl.arange(1)[None, :]
    all_ok = i_q * n_t + i_t < R
    targets_col_all = nl.load(targets[i_q * n_t + i_t], mask=all_ok)
    dlosses_col_all = nl.load(dlosses[i_q * n_t + i_t], mask=all_ok)
    losses_rows = nl.ndarray((P_TILE, n_t), dtype=nl.float32, buffer=nl.sbuf)
    for t in nl.affine_range(n_t):
        i_p = i_q * n_t + t
        rows_ok = i_p < R
        targets_col = targets_col_all[i_q, t + i_1]
        dlosses_col = dlosses_col_all[i_q, t + i_1]
        logits_row = nl.load(logits[i_p, i_f], mask=rows_ok)
        # logits[i, targets[i]]: the element whose column is the row's index (compare with the column numbers, select, sum)
        logits_at_targets = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        logits_at_targets_hot = nl.equal(col_ids, targets_col)  # the one-hot row of the index
        # one VectorE pass: keep the column equal to the index, -inf elsewhere, max along the row
        logits_at_targets_col = nl.copy(targets_col, dtype=nl.float32)  # the index as a float bound
        nisa.range_select(on_true_tile=logits_row, comp_op0=nl.greater_equal, comp_op1=nl.less_equal, bound0=logits_at_targets_col, bound1=logits_at_targets_col, reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_res=logits_at_targets, reduce_op=nl.max, on_false_value=float("-inf"))
        # max along the row: max_{q < V} logits[i, q]
        red0 = nl.max(logits_row, axis=1, keepdims=True)
        # sum along the row: sum_{k < V} exp(logits[i, k] - (max_{q < V} logits[i, q]))
        red1 = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        red1_e = nisa.activation_reduce(op=nl.exp, data=logits_row, bias=nl.multiply(red0, -1.0), reduce_op=nl.add, reduce_res=red1)
        # from fused_classifier.cu:43 — lifted: dlogits[i, j] = (j == targets[i] ? dlosses[i] * (-1 + ((1 / (sum_{k < V} exp(logits[i, k] - (max_{q < V} logits[i, q])))) * exp(logits[i, j] - (max_{r < V} log…
        nl.store(dlogits[i_p, i_f], value=nisa.scalar_tensor_tensor(data=logits_at_targets_hot, op0=nl.multiply, operand0=nl.multiply(-1.0, dlosses_col), op1=nl.add, operand1=nl.multiply(nl.multiply(nl.divide(1.0, red1), dlosses_col), red1_e), dtype=nl.float32), mask=rows_ok)
        # from fused_classifier.cu:43 — lifted: losses[i] = -1 * log((1 / (sum_{k < V} exp(logits[i, k] - (max_{q < V} logits[i, q])))) * exp(logits[i, targets[i]] - (max_{r < V} logits[i, r])))
        losses_rows[i_q, t + i_1] = nl.copy(nl.multiply(-1.0, nl.log(nl.multiply(nl.divide(1.0, red1), nl.exp(nl.subtract(logits_at_targets, red0))))), mask=rows_ok)
    nl.store(losses[i_q * n_t + i_t], value=losses_rows, mask=all_ok)
    return dlogits, losses
