"""Trainium/NKI constraint checks, applied at the boundary of every instruction.

Each check raises ``NkiConstraintError`` naming the rule (legacy error code where one exists,
nki-facts §2.4), the kernel line and the fix. Affine-loop dependencies live in affine.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import dtypes
from .errors import NkiConstraintError
from .run import maybe_current_run

if TYPE_CHECKING:
    from .tensor import Tensor


def pmax() -> int:
    """Partition limit of the current target (128 on trn1/trn2, nki-facts §2.3)."""
    run = maybe_current_run()
    return run.hw.pmax if run is not None else 128


def check_partitions(shape: tuple[int, ...], pdim: int, what: str) -> None:
    """On-chip tiles span at most 128 partitions on their partition axis."""
    limit = pmax()
    if shape and shape[pdim] > limit:
        raise NkiConstraintError(
            "err_num_partition_exceed_arch_limit",
            f"{what}: size of partition dimension {shape[pdim]} exceeds architecture "
            f"limitation of {limit} (shape {shape}); tile the first axis into chunks of "
            f"{limit} (nl.tile_size.pmax)",
        )


_TENSOR: list[type] = []  # the Tensor class, imported on first use (tensor.py imports us)


def require_tensor(value: Any, op: str, role: str) -> Tensor:
    """Operands that must be tensors (not Python scalars or numpy arrays)."""
    if not _TENSOR:
        from .tensor import Tensor

        _TENSOR.append(Tensor)
    if not isinstance(value, _TENSOR[0]):
        raise NkiConstraintError(
            "err_invalid_operand", f"{op}: {role} must be an NKI tensor, got {type(value).__name__}"
        )
    return value


def require_on_chip(value: Any, op: str, role: str) -> Tensor:
    """Engines compute only on SBUF/PSUM tiles; HBM data must be loaded first."""
    t = require_tensor(value, op, role)
    if not t.buffer.on_chip:
        raise NkiConstraintError(
            "err_unsupported_memory",
            f"{op}: {role} lives in {t.buffer.value}; compute engines only read SBUF/PSUM "
            "tiles — nl.load it into SBUF first",
        )
    return t


def require_buffer(value: Any, op: str, role: str, allowed: tuple[str, ...]) -> Tensor:
    """An operand must live in one of the named buffers ('sbuf', 'psum', 'hbm')."""
    t = require_tensor(value, op, role)
    buffer = t.buffer
    kind = "hbm" if buffer.is_hbm else buffer.value
    if kind not in allowed:
        raise NkiConstraintError(
            "err_unsupported_memory",
            f"{op}: {role} must be in {' or '.join(allowed)}, but it is in {t.buffer.value}",
        )
    return t


def check_matmul(stationary: Tensor, moving: Tensor, op: str) -> None:
    """TensorE limits (nki-facts §2.3/§4): K ≤ 128 on partitions, M ≤ 128, N ≤ 512."""
    run = maybe_current_run()
    hw_stat = run.hw.gemm_stationary_fmax if run else 128
    hw_mov = run.hw.gemm_moving_fmax if run else 512
    limit = run.hw.pmax if run else 128
    for t, role in ((stationary, "stationary"), (moving, "moving")):
        if t.buffer.value != "sbuf":
            require_buffer(t, op, role, ("sbuf",))  # raises, naming the buffer
        shape = t.shape
        if shape and shape[t.pdim] > limit:  # the message is only formatted when it is raised
            check_partitions(shape, t.pdim, f"{op} {role} (contraction axis K)")
    if stationary.partitions != moving.partitions:
        raise NkiConstraintError(
            "err_num_partition_mismatch",
            f"{op}: contraction runs over the partition axis, but stationary has "
            f"{stationary.partitions} partitions and moving has {moving.partitions}",
        )
    if stationary.free_size > hw_stat:
        raise NkiConstraintError(
            "err_size_of_dimension_exceed_arch_limit",
            f"{op}: stationary free size {stationary.free_size} exceeds "
            f"gemm_stationary_fmax={hw_stat}; split M into tiles of {hw_stat}",
        )
    if moving.free_size > hw_mov:
        raise NkiConstraintError(
            "err_size_of_dimension_exceed_arch_limit",
            f"{op}: moving free size {moving.free_size} exceeds gemm_moving_fmax={hw_mov}; "
            f"split N into tiles of {hw_mov}",
        )
    kinds = {stationary.dtype, moving.dtype}
    if any(not dtypes.is_float(d) for d in kinds):
        raise NkiConstraintError(
            "err_unsupported_dtype",
            f"{op}: TensorE multiplies floating types only, got {sorted(map(str, kinds))}",
        )
    if dtypes.float32 in kinds and kinds != {dtypes.float32}:
        raise NkiConstraintError(
            "err_unsupported_dtype",
            f"{op}: fp32 operands must pair with fp32 (got {sorted(map(str, kinds))}); cast "
            "both to bfloat16 for full TensorE speed",
        )


def check_psum_dst(dst: Tensor, op: str) -> None:
    """Matmul/TensorE-transpose results go to PSUM on trn1/trn2 (nki-facts §4)."""
    require_buffer(dst, op, "dst", ("psum",))


def check_same_partitions(op: str, *tiles: Tensor) -> None:
    """Vector/Scalar/GpSimd operands must span the same partitions (nki-facts §2.2)."""
    counts = {t.partitions for t in tiles if t.partitions != 1}
    if len(counts) > 1:
        raise NkiConstraintError(
            "err_num_partition_mismatch",
            f"{op}: operands span different partition counts {sorted(counts)}",
        )


def check_reduce_axes(axes: tuple[int, ...], ndim: int, pdim: int, op: str) -> None:
    """Reductions run over free axes only (nki-facts §3.6)."""
    for ax in axes:
        if ax == pdim or not 0 <= ax < ndim:
            raise NkiConstraintError(
                "err_unsupported_reduce_axis",
                f"{op}: axis {ax} is not a free axis of a rank-{ndim} tile (partition axis is "
                f"{pdim}); reduce across partitions with nisa.nc_matmul against a ones vector "
                "or transpose first",
            )
