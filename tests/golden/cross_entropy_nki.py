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
    for r in nl.affine_range((R + P_TILE - 1) // P_TILE):
        i_p = r * P_TILE + nl.arange(P_TILE)[:, None]
        rows_ok = i_p < R
        logits_row = nl.load(logits[i_p, i_f], mask=rows_ok)
        labels_col = nl.load(labels[i_p], mask=rows_ok)
        # logits[i, labels[i]]: the element whose column is the row's index (compare with the column numbers, select, sum)
        logits_at_labels = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(op=nl.copy, data=nl.where(nl.equal(labels_col, col_ids), logits_row, 0.0), reduce_op=nl.add, reduce_res=logits_at_labels)
        # max along the row: max_{q < C} logits[i, q]
        red0 = nl.max(logits_row, axis=1, keepdims=True)
        # sum along the row: sum_{k < C} exp(logits[i, k] - (max_{q < C} logits[i, q]))
        red1 = nl.ndarray((P_TILE, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(op=nl.exp, data=logits_row, bias=nl.multiply(red0, -1.0), reduce_op=nl.add, reduce_res=red1)
        # from cross_entropy.cu:68 — lifted: loss[i] = log(sum_{k < C} exp(logits[i, k] - (max_{q < C} logits[i, q]))) + (max_{r < C} logits[i, r]) - logits[i, labels[i]]
        nl.store(loss[i_p], value=nl.subtract(nl.add(nl.log(red1), red0), logits_at_labels), mask=rows_ok)
    return loss
