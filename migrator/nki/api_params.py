"""How the emulator handles every optional parameter of the public ``nl`` / ``nisa`` API.

The rule (issue 16): no keyword argument is silently ignored. Each optional parameter of every
public function of ``nki.language`` (one module for both dialects), legacy
``neuronxcc.nki.isa`` and new ``nki.isa`` is one of:

* ``honoured``: a non-default value changes the result, the traced instruction (engine,
  label) or the tensor made (dtype, buffer, name);
* ``validated``: values are checked and a wrong one raises a C2N constraint error (hints such
  as ``is_transpose`` the compiler trusts; PE tiling; a ``dtype`` that must match ``dst``);
* ``not_emulated``: any non-default value raises ``NkiNotEmulatedError`` (C2N3029) naming it;
* ``no_effect``: documented to steer only the compiler's schedule or placement, never the
  values (each entry says why); the emulator accepts and does not model it.

``handling(api, param)`` looks a parameter up: first the per-function table, then the
parameter names that mean the same thing everywhere. ``tests/nki/test_api_signatures.py``
walks the public signatures, requires every parameter to resolve here, and proves each entry
by running it.
"""

from __future__ import annotations

HONOURED = "honoured"
VALIDATED = "validated"
NOT_EMULATED = "not_emulated"
NO_EFFECT = "no_effect"
KINDS = (HONOURED, VALIDATED, NOT_EMULATED, NO_EFFECT)

# Parameter names with one meaning across the API.
COMMON: dict[str, str] = {
    "dtype": HONOURED,  # output dtype
    "mask": HONOURED,  # legacy predicate: masked-off elements are not computed/written
    "engine": HONOURED,  # the engine the instruction is traced on
    "name": HONOURED,  # new nisa: trace label; nl allocations: the tensor's name
    "keepdims": HONOURED,
    "buffer": HONOURED,
    "reverse0": HONOURED,
    "reverse1": HONOURED,
    "reduce_res": HONOURED,
    "reduce_cmd": HONOURED,  # accumulator registers (isa_select.accumulate_registers)
    "reduce_op": HONOURED,
}

# Per function: parameters whose handling is not the common one, or whose name is not common.
# Keys: "nl.<fn>", "legacy.<fn>" (neuronxcc.nki.isa), "new.<fn>" (nki.isa).
TABLE: dict[str, dict[str, str]] = {
    "nl.arange": {"stop": HONOURED, "step": HONOURED},
    "nl.matmul": {"transpose_x": HONOURED},
    "nl.gather_flattened": {"axis": NOT_EMULATED},
    "nl.random_seed": {"mask": NOT_EMULATED},
    "nl.softmax": {"axis": HONOURED, "compute_dtype": NOT_EMULATED},
    "nl.rms_norm": {"epsilon": HONOURED, "compute_dtype": NOT_EMULATED},
    "nl.ndarray": {"address": VALIDATED},
    "nl.full": {"lazy_initialization": VALIDATED},
    "nl.zeros": {"lazy_initialization": VALIDATED},
    "nl.ones": {"lazy_initialization": VALIDATED},
    "nl.num_programs": {"axes": HONOURED},
    "nl.dynamic_range": {"stop": HONOURED, "step": HONOURED},
    "new.nonzero_with_count": {"index_offset": HONOURED, "padding_val": HONOURED},
    "new.tensor_scalar_cumulative": {"imm1": HONOURED},
    "new.dma_compute": {"scales": VALIDATED, "unique_indices": VALIDATED, "oob_mode": HONOURED},
    "nl.program_id": {"axis": HONOURED},
    "nl.shared_identity_matrix": {"dtype": HONOURED},
    "legacy.activation": {"bias": HONOURED, "scale": HONOURED},
    "legacy.activation_reduce": {"bias": HONOURED, "scale": HONOURED},
    "new.activation": {"bias": HONOURED, "scale": HONOURED},
    "new.activation_reduce": {"bias": HONOURED, "scale": HONOURED},
    "new.affine_select": {"cmp_op": HONOURED, "offset": HONOURED},
    "new.iota": {"offset": HONOURED, "channel_multiplier": HONOURED},
    "legacy.dma_copy": {"dst_rmw_op": HONOURED, "oob_mode": HONOURED, "dge_mode": VALIDATED},
    "new.dma_copy": {
        "priority": NOT_EMULATED,
        "oob_mode": HONOURED,
        "dge_mode": VALIDATED,
        "engine": NOT_EMULATED,
    },
    "legacy.dma_transpose": {"axes": VALIDATED},
    "legacy.nc_stream_shuffle": {"dtype": VALIDATED},  # must equal src/dst dtype
    "legacy.tensor_copy_dynamic_dst": {"dtype": VALIDATED},
    "new.tensor_reduce": {"negate": HONOURED, "keepdims": VALIDATED},
    "new.dma_transpose": {
        "axes": VALIDATED,
        "priority": NOT_EMULATED,
        "dge_mode": NOT_EMULATED,
        "oob_mode": NOT_EMULATED,
    },
    "legacy.local_gather": {"num_elem_per_idx": HONOURED, "num_valid_indices": HONOURED},
    "new.local_gather": {"num_elem_per_idx": HONOURED, "num_valid_indices": HONOURED},
    "legacy.nc_match_replace8": {"dst_idx": HONOURED},
    "new.nc_match_replace8": {"dst_idx": HONOURED},
    "legacy.nc_matmul": {
        "is_stationary_onezero": VALIDATED,
        "is_moving_onezero": VALIDATED,
        "is_transpose": VALIDATED,
        "tile_position": VALIDATED,
        "tile_size": VALIDATED,
        "perf_mode": HONOURED,
    },
    "new.nc_matmul": {
        "is_stationary_onezero": VALIDATED,
        "is_moving_onezero": VALIDATED,
        "is_transpose": VALIDATED,
        "accumulate": HONOURED,
        "tile_position": VALIDATED,
        "tile_size": VALIDATED,
        "perf_mode": HONOURED,
    },
    "legacy.range_select": {"range_start": HONOURED, "on_false_value": HONOURED},
    "new.range_select": {"range_start": HONOURED, "on_false_value": HONOURED},
    "legacy.select_reduce": {"reverse_pred": HONOURED, "dtype": VALIDATED},  # dtype: dst's
    "new.select_reduce": {"reverse_pred": HONOURED},
    "legacy.tensor_copy_predicated": {"reverse_pred": HONOURED},
    "new.tensor_copy_predicated": {"reverse_pred": HONOURED},
    "legacy.tensor_reduce": {"negate": HONOURED},
    "legacy.tensor_scalar": {"op1": HONOURED, "operand1": HONOURED},
    "new.tensor_scalar": {"op1": HONOURED, "operand1": HONOURED},
    "new.tensor_copy": {"dtype": VALIDATED},
    "new.tensor_scalar_reduce": {
        "reduce_cmd": NOT_EMULATED,
        "reduce_init": NOT_EMULATED,
        "reduce_res_negate": NOT_EMULATED,
    },
}

# Keyword hints accepted through ``**hints`` by the loop iterators (nl_memory.LOOP_HINTS).
NO_EFFECT_WHY: dict[tuple[str, str], str] = {
    ("nl.affine_range", "precise_schedule"): "instruction scheduling directive",
    ("nl.affine_range", "directives"): "scheduling directive (e.g. no_reorder)",
    ("nl.sequential_range", "precise_schedule"): "instruction scheduling directive",
    ("nl.sequential_range", "directives"): "scheduling directive (e.g. no_reorder)",
    ("nl.static_range", "precise_schedule"): "instruction scheduling directive",
    ("nl.static_range", "directives"): "scheduling directive (e.g. no_reorder)",
}


def handling(api: str, param: str) -> str | None:
    """The handling class of ``param`` of ``api`` ("nl.exp", "legacy.nc_matmul", ...)."""
    if (api, param) in NO_EFFECT_WHY:
        return NO_EFFECT
    specific = TABLE.get(api, {})
    if param in specific:
        return specific[param]
    return COMMON.get(param)
