"""Row program: loss[i] = log(sum_{k < C} exp(logits[i, k] - (max_{q < C} logits[i, q]))) + (max_{r < C} logits[i, r]) - logits[i, labels[i]]

Migrated by cuda2nki from cross_entropy.cu (kernel `cross_entropy_fwd_kernel`, family rows, lifted).
Calling convention (cuda2nki task contract 1.0):
    cross_entropy_fwd(logits, labels) -> loss
Run this file to check it against the CUDA original in the cuda2nki emulator.
"""

if __name__ == "__main__":
    import sys

    from migrator.check import main

    sys.exit(main(__file__, cuda="<relative path to the .cu>", kernel="cross_entropy_fwd_kernel"))

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


P_TILE = 128  # rows per tile, one per partition (nl.tile_size.pmax)
MAX_ROW = 8192  # longest row kept whole on a partition (32 KiB fp32)


@nki.jit
def cross_entropy_fwd(logits, labels):
    R = logits.shape[0]
    C = logits.shape[1]

    assert C <= MAX_ROW, "rows longer than MAX_ROW need a blocked two-pass version"
    loss = nl.ndarray((R,), dtype=nl.float32, buffer=nl.shared_hbm)

    # from cross_entropy.cu:68 — one row per partition; each reduction along the free axis
    i_f = nl.arange(C)[None, :]
    col_ids = nisa.iota(i_f, dtype=nl.int32)  # the column numbers, [1, cols]
    # Row r * n_t + t on partition r, t = 0 .. n_t - 1: each partition's per-row values are
    # contiguous, so they load and store in one DMA each rather than one per row tile.
    n_t = (R + P_TILE - 1) // P_TILE
    i_q = nl.arange(P_TILE)[:, None]
    i_t = nl.arange(n_t)[None, :]
    i_1 = nl.arange(1)[None, :]
    all_ok = i_q * n_t + i_t < R
    labels_col_all = nl.load(labels[i_q * n_t + i_t], mask=all_ok)
    loss_rows = nl.ndarray((P_TILE, n_t), dtype=nl.float32, buffer=nl.sbuf)
    for t in nl.affine_range(n_t):
        i_p = i_q * n_t + t
        rows_ok = i_p < R
        labels_col = labels_col_all[i_q, t + i_1]
        logits_row = nl.load(logits[i_p, i_f], mask=rows_ok)
        # logits[i, labels[i]]: the element whose column is the row's index (compare with the column numbers, select, sum)
        logits_at_labels = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        # one VectorE pass: keep the column equal to the index, -inf elsewhere, max along the row
        logits_at_labels_col = nl.copy(labels_col, dtype=nl.float32)  # the index as a float bound
        nisa.range_select(on_true_tile=logits_row, comp_op0=nl.greater_equal, comp_op1=nl.less_equal, bound0=logits_at_labels_col, bound1=logits_at_labels_col, reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_res=logits_at_labels, reduce_op=nl.max, on_false_value=float("-inf"))
        # max along the row: max_{q < C} logits[i, q]
        red0 = nl.max(logits_row, axis=1, keepdims=True)
        # sum along the row: sum_{k < C} exp(logits[i, k] - (max_{q < C} logits[i, q]))
        red1 = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        red1_e = nisa.activation_reduce(op=nl.exp, data=logits_row, bias=nl.multiply(red0, -1.0), reduce_op=nl.add, reduce_res=red1)
        # from cross_entropy.cu:68 — lifted: loss[i] = log(sum_{k < C} exp(logits[i, k] - (max_{q < C} logits[i, q]))) + (max_{r < C} logits[i, r]) - logits[i, labels[i]]
        loss_rows[i_q, t + i_1] = nl.copy(nl.subtract(nl.add(nl.log(red1), red0), logits_at_labels), mask=rows_ok)
    nl.store(loss[i_q * n_t + i_t], value=loss_rows, mask=all_ok)
    return loss
