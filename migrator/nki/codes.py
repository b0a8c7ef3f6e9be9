"""Every error/finding code the emulator raises, one row each, with a proposed C2N id.

The codes reuse the legacy NKI compiler's ``err_*`` names where one exists (nki-facts §2.4) so
users can look them up in the NKI error manual; codes the compiler has no name for are ours.
``proposed_id`` is the code's row in the C2N3xxx (NKI emulator) range of
``migrator.diagnostics`` (named after the code); a test keeps the two tables in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Code:
    """One emulator error code."""

    code: str
    proposed_id: str
    kind: Literal["constraint", "memory", "dependency", "usage"]
    nki_name: bool  # True when the legacy NKI compiler uses the same err_* name
    summary: str


CODES: tuple[Code, ...] = (
    Code(
        "err_num_partition_exceed_arch_limit",
        "C2N3001",
        "constraint",
        True,
        "tile partition dim > 128",
    ),
    Code(
        "err_num_partition_mismatch",
        "C2N3002",
        "constraint",
        True,
        "operands span different partitions / matmul K differs",
    ),
    Code(
        "err_size_of_dimension_exceed_arch_limit",
        "C2N3003",
        "constraint",
        True,
        "matmul/transpose/bn_stats free size over its limit",
    ),
    Code(
        "err_psum_tile_exceeds_bank",
        "C2N3004",
        "constraint",
        False,
        "PSUM tile larger than one 2 KiB bank per partition",
    ),
    Code("err_psum_capacity_exceeded", "C2N3005", "memory", False, "more than 8 live PSUM banks"),
    Code(
        "err_sbuf_capacity_exceeded",
        "C2N3006",
        "memory",
        False,
        "live SBUF bytes per partition above the target's capacity",
    ),
    Code(
        "err_unsupported_memory",
        "C2N3007",
        "constraint",
        True,
        "operand in a buffer the instruction cannot use",
    ),
    Code(
        "err_unsupported_dtype",
        "C2N3008",
        "constraint",
        False,
        "dtype not in NKI, or illegal for the instruction",
    ),
    Code(
        "err_hbm_tensor_with_init_value_not_supported",
        "C2N3009",
        "constraint",
        True,
        "HBM tensor created with a fill value",
    ),
    Code(
        "err_insufficient_rank",
        "C2N3010",
        "constraint",
        False,
        "on-chip tensor with fewer than 2 dims",
    ),
    Code(
        "err_unsupported_reduce_axis",
        "C2N3011",
        "constraint",
        False,
        "reduction over the partition axis",
    ),
    Code(
        "err_tensor_access_out_of_bound",
        "C2N3012",
        "memory",
        True,
        "index or slice outside the tensor",
    ),
    Code(
        "err_unsupported_mixing_basic_advanced_tensor_indexing",
        "C2N3013",
        "usage",
        True,
        "slices mixed with arange indices",
    ),
    Code("err_invalid_index", "C2N3014", "usage", False, "non-integer index"),
    Code(
        "err_uninitialized_index",
        "C2N3015",
        "memory",
        False,
        "indirect index tile holds uninitialised values",
    ),
    Code(
        "err_uninitialized_output",
        "C2N3016",
        "memory",
        False,
        "returned tensor holds unwritten/poisoned elements",
    ),
    Code(
        "err_affine_loop_carried_dependency",
        "C2N3017",
        "dependency",
        False,
        "affine_range iteration reads another iteration's data",
    ),
    Code(
        "err_unexpected_output_dependencies",
        "C2N3018",
        "dependency",
        True,
        "affine_range iterations write the same location",
    ),
    Code(
        "err_shape_mismatch",
        "C2N3019",
        "usage",
        False,
        "operand/destination shapes cannot be fitted",
    ),
    Code(
        "err_invalid_operand",
        "C2N3020",
        "usage",
        False,
        "operand is not a tensor where one is required",
    ),
    Code(
        "err_unsupported_operator",
        "C2N3021",
        "usage",
        False,
        "op= is not a supported ALU/activation op",
    ),
    Code(
        "err_activation_bias_invalid_type",
        "C2N3022",
        "constraint",
        True,
        "bias/scale/operand not a scalar or (P, 1) tile",
    ),
    Code(
        "err_exceed_max_supported_dimension",
        "C2N3023",
        "constraint",
        True,
        "rank above what the API supports",
    ),
    Code(
        "err_ambiguous_tensor_truth_value", "C2N3024", "usage", True, "tile used as a Python bool"
    ),
    Code(
        "err_invalid_reshape",
        "C2N3025",
        "usage",
        False,
        "reshape of a non-contiguous view or wrong element count",
    ),
    Code(
        "err_invalid_program_axis",
        "C2N3026",
        "usage",
        False,
        "program_id axis not in the launch grid",
    ),
    Code(
        "err_nested_kernel_with_spmd_grid",
        "C2N3027",
        "usage",
        True,
        "gridded kernel called from a kernel",
    ),
    Code("err_outside_kernel", "C2N3028", "usage", False, "NKI call outside a kernel launch"),
    Code(
        "err_not_emulated",
        "C2N3029",
        "usage",
        False,
        "API keyword, mode or value the emulator does not model (never silently ignored)",
    ),
    Code(
        "err_index_truth_value",
        "C2N3030",
        "usage",
        False,
        "Python and/or/if on an arange/mgrid expression (taken as True, as the tracer does)",
    ),
)

BY_CODE: dict[str, Code] = {c.code: c for c in CODES}
