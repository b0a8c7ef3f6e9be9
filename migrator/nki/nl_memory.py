"""``nl`` memory, index and control surface: buffers, dtypes, allocation, index expressions,
loops and SPMD queries (nki-facts §1.6, §3.1–§3.4). Re-exported by ``language``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import ml_dtypes
import numpy as np

from . import dtypes as _dt
from .errors import NkiConstraintError, unsupported
from .run import current_run, maybe_current_run, record_tile
from .tensor import Buffer, Tensor
from .trace import Engine

# -- buffers and dtypes (nki-facts §3.1, §3.8) ----------------------------------------------
sbuf = Buffer.SBUF
psum = Buffer.PSUM
hbm = Buffer.HBM
shared_hbm = Buffer.SHARED_HBM
private_hbm = Buffer.PRIVATE_HBM

float32, bfloat16, float16, tfloat32 = _dt.float32, _dt.bfloat16, _dt.float16, _dt.tfloat32
float8_e4m3, float8_e5m2, float8_e4m3fn = _dt.float8_e4m3, _dt.float8_e5m2, _dt.float8_e4m3fn
int8, int16, int32 = _dt.int8, _dt.int16, _dt.int32
uint8, uint16, uint32 = _dt.uint8, _dt.uint16, _dt.uint32
bool_ = _dt.bool_

# Dtype constants kernels use as fill values (nki-facts §3.8): nl.fp32.min is the most negative
# finite fp32 (bit pattern 0xff7fffff); nl.bfp16.min is bit pattern 0xff80, i.e. -inf in bf16.
fp32 = SimpleNamespace(min=float(np.finfo(np.float32).min), max=float(np.finfo(np.float32).max))
bfp16 = SimpleNamespace(min=float("-inf"), max=float(ml_dtypes.finfo(ml_dtypes.bfloat16).max))


def finfo(dtype: Any) -> Any:
    """Machine limits of a float dtype (``nl.finfo(nl.bfloat16).min``), as numpy/ml_dtypes."""
    dt = _dt.normalize(dtype)
    return ml_dtypes.finfo(dt) if dt in _dt.LOW_PRECISION_FLOATS else np.finfo(dt)


def static_cast(value: Any, dtype: Any) -> np.ndarray:
    """Host-side cast of a numpy array to an NKI dtype (used by test drivers), rounding RNE."""
    return _dt.cast(np.asarray(value, dtype=np.float32), _dt.normalize(dtype))


tile_size = SimpleNamespace(
    pmax=128,
    psum_fmax=512,
    psum_bank_fmax=512,
    psum_num_banks=8,
    gemm_stationary_fmax=128,
    gemm_moving_fmax=512,
    bn_stats_fmax=512,
)


def is_hbm(t: Tensor) -> bool:
    """True when the tensor lives in (any) HBM."""
    return t.buffer.is_hbm


def is_sbuf(t: Tensor) -> bool:
    """True when the tensor lives in SBUF."""
    return t.buffer is Buffer.SBUF


def is_psum(t: Tensor) -> bool:
    """True when the tensor lives in PSUM."""
    return t.buffer is Buffer.PSUM


def is_on_chip(t: Tensor) -> bool:
    """True for SBUF and PSUM tensors."""
    return t.buffer.on_chip


# -- creation -------------------------------------------------------------------------------
class par_dim(int):  # noqa: N801 - NKI spelling
    """Marks the partition dimension in a shape; dimensions before it are block dims."""


def _check_address(address: Any, shape: tuple[int, ...], buffer: Any) -> None:
    if address is None:
        return
    try:
        partition, offset = (int(a) for a in address)
    except (TypeError, ValueError):
        raise NkiConstraintError(
            "err_invalid_operand", f"nl.ndarray: address={address!r} is not (partition, offset)"
        ) from None
    if partition < 0 or offset < 0 or partition + (shape[0] if shape else 1) > 128:
        raise NkiConstraintError(
            "err_num_partition_exceed_arch_limit",
            f"nl.ndarray: address {address!r} places a {shape} tile outside partitions 0..127",
        )


def _check_lazy(flag: Any) -> None:
    if not isinstance(flag, bool | np.bool_):
        raise NkiConstraintError(
            "err_invalid_operand", f"lazy_initialization must be a bool, got {flag!r}"
        )


def _buffer(buffer: Any) -> Buffer:
    if buffer is None:
        return Buffer.SBUF
    if isinstance(buffer, Buffer):
        return buffer
    if isinstance(buffer, str):
        return Buffer(buffer)
    raise unsupported("nki.language.ndarray with a direct-allocation buffer (ncc.sbuf/psum)")


def ndarray(
    shape: Sequence[int], dtype: Any, *, buffer: Any = None, name: str = "", address: Any = None
) -> Tensor:
    """Allocate an uninitialised tensor (poisoned; nki-facts §1.4, house rule 8).

    ``address=(partition, byte_offset)`` (new dialect, manual placement) is validated (an
    on-chip tile must fit below partition 128); placement itself does not change values."""
    shape_t = tuple(int(s) for s in shape)
    _check_address(address, shape_t, buffer)
    pdim = next((i for i, s in enumerate(shape) if isinstance(s, par_dim)), 0)
    buf, dt = _buffer(buffer), _dt.normalize(dtype)
    if buf.on_chip and len(shape_t) < 2:
        raise NkiConstraintError(
            "err_insufficient_rank",
            f"on-chip tensors need at least 2 dimensions (partition, free); got {shape_t} — "
            "use (P, 1) for a per-partition vector",
        )
    run = maybe_current_run()
    if buf is Buffer.SHARED_HBM and run is not None:
        # Grid instances share shared_hbm (nki-facts §1.6): the k-th shared allocation of every
        # instance is the same tensor.
        if run.shared_cursor < len(run.shared_allocations):
            existing = run.shared_allocations[run.shared_cursor]
            run.shared_cursor += 1
            return existing
        out = Tensor.allocate(shape_t, dt, buf, pdim=pdim, name=name)
        run.shared_allocations.append(out)
        run.shared_cursor += 1
        return out
    return Tensor.allocate(shape_t, dt, buf, pdim=pdim, name=name)


def full(
    shape: Sequence[int],
    fill_value: Any,
    dtype: Any,
    *,
    buffer: Any = None,
    name: str = "",
    lazy_initialization: bool = False,
) -> Tensor:
    """Allocate and fill an on-chip tensor (HBM tensors cannot have an init value).

    ``lazy_initialization`` (legacy, seen in published kernels) lets the compiler defer the
    fill; the tile holds the fill value either way, so only its type is checked."""
    _check_lazy(lazy_initialization)
    buf = _buffer(buffer)
    if buf.is_hbm:
        raise NkiConstraintError(
            "err_hbm_tensor_with_init_value_not_supported",
            "HBM tensors cannot be created with an initial value; create it with nl.ndarray "
            "and store a filled SBUF tile into it",
        )
    shape_t = tuple(int(s) for s in shape)
    pdim = next((i for i, s in enumerate(shape) if isinstance(s, par_dim)), 0)
    out = Tensor.allocate(shape_t, _dt.normalize(dtype), buf, pdim=pdim, name=name, fill=fill_value)
    record_tile("memset", Engine.VECTOR, out)
    run = maybe_current_run()
    if run is not None:
        run.note_write(out.storage.uid)  # the memset just recorded produced it
    return out


def zeros(
    shape: Sequence[int],
    dtype: Any,
    *,
    buffer: Any = None,
    name: str = "",
    lazy_initialization: bool = False,
) -> Tensor:
    """A zero-filled on-chip tensor."""
    return full(shape, 0, dtype, buffer=buffer, name=name, lazy_initialization=lazy_initialization)


def ones(
    shape: Sequence[int],
    dtype: Any,
    *,
    buffer: Any = None,
    name: str = "",
    lazy_initialization: bool = False,
) -> Tensor:
    """A one-filled on-chip tensor."""
    return full(shape, 1, dtype, buffer=buffer, name=name, lazy_initialization=lazy_initialization)


def empty_like(t: Tensor, dtype: Any = None, *, buffer: Any = None, name: str = "") -> Tensor:
    """Uninitialised tensor with the shape (and default dtype/buffer) of ``t``."""
    return ndarray(t.shape, dtype or t.dtype, buffer=buffer or t.buffer, name=name)


def zeros_like(t: Tensor, dtype: Any = None, *, buffer: Any = None, name: str = "") -> Tensor:
    """Zero tensor with the shape of ``t``."""
    return zeros(t.shape, dtype or t.dtype, buffer=buffer or Buffer.SBUF, name=name)


def ones_like(t: Tensor, dtype: Any = None, *, buffer: Any = None, name: str = "") -> Tensor:
    """One-filled tensor with the shape of ``t``."""
    return ones(t.shape, dtype or t.dtype, buffer=buffer or Buffer.SBUF, name=name)


# -- index expressions (nki-facts §3.2) ------------------------------------------------------
class _IndexArray(np.ndarray):
    """An ``nl.arange``/``nl.mgrid`` index expression (and anything computed from one).

    numpy semantics, except the truth value: the NKI tracer gives an index expression (or a
    predicate built from one) the truth value True, so ``mask=(i < n and j < m)`` means
    ``mask=(j < m)`` there. The emulator does the same, and records an
    ``err_index_truth_value`` finding, since ``&`` is what such code means."""

    def __bool__(self) -> bool:
        if self.size <= 1:
            return bool(self.view(np.ndarray).reshape(-1)[0]) if self.size else False
        run = maybe_current_run()
        if run is not None:
            run.violation(
                "err_index_truth_value",
                f"Python and/or/if/bool() on an nl.arange/nl.mgrid expression of shape "
                f"{self.shape} is taken as True (as the NKI tracer does); combine predicates "
                "with & and | and use masks, not Python control flow",
                "report",
            )
        return True


def arange(start: int, stop: int | None = None, step: int = 1) -> np.ndarray:
    """Index vector; combine with ``[:, None]`` / ``[None, :]`` to index tiles."""
    # arange(n, step=k) counts 0, k, ... below n (the step is not dropped)
    lo, hi = (start, stop) if stop is not None else (0, start)
    out = np.arange(lo, hi, step, dtype=np.intp)
    return out.view(_IndexArray)


class _Grid(tuple):
    """Open index grid from ``nl.mgrid``; unpacks like a tuple and has .p/.x/.y/.z."""

    @property
    def p(self) -> np.ndarray:
        return self[0]

    @property
    def x(self) -> np.ndarray:
        return self[1]

    @property
    def y(self) -> np.ndarray:
        return self[2]

    @property
    def z(self) -> np.ndarray:
        return self[3]


class _MGrid:
    """``nl.mgrid[0:P, 0:F]`` → broadcastable index arrays (numpy ``ogrid`` semantics)."""

    def __getitem__(self, key: Any) -> _Grid:
        key = key if isinstance(key, tuple) else (key,)
        return _Grid(a.astype(np.intp).view(_IndexArray) for a in np.ogrid[key])


mgrid = _MGrid()


def ds(start: int, size: int) -> slice:
    """Dynamic slice ``start : start + size``."""
    return slice(int(start), int(start) + int(size))


# -- loops (nki-facts §3.4) ------------------------------------------------------------------
# Loop keywords that only steer the compiler's schedule: the loop computes the same values.
LOOP_HINTS = frozenset({"precise_schedule", "directives"})


def _loop_hints(api: str, hints: dict[str, Any]) -> None:
    unknown = sorted(set(hints) - LOOP_HINTS)
    if unknown:
        raise TypeError(f"{api}() got an unexpected keyword argument {unknown[0]!r}")


def affine_range(*args: int, **hints: Any) -> Iterator[int]:
    """Parallel loop; iterations must be independent (checked, see checks.py).

    Scheduling hints (``precise_schedule=``, ``directives=``, seen in published kernels)
    do not change what a loop computes; any other keyword is an error."""
    _loop_hints("nl.affine_range", hints)
    run = maybe_current_run()
    if run is None:
        yield from range(*args)
        return
    frame = run.enter_affine()
    try:
        for n, i in enumerate(range(*args)):
            frame.iteration = n
            yield i
    finally:
        run.exit_affine(frame)


def sequential_range(*args: int, **hints: Any) -> Iterator[int]:
    """Loop with carried dependencies; runs in order (hints as for affine_range)."""
    _loop_hints("nl.sequential_range", hints)
    return iter(range(*args))


def dynamic_range(start: int, stop: int | None = None, step: int = 1) -> Iterator[int]:
    """Device loop with runtime bounds (new dialect); runs in order. Bounds held in
    registers (VirtualRegister) are not emulated: they must be Python integers here."""
    for bound in (start, stop, step):
        if bound is not None and not isinstance(bound, int | np.integer):
            raise unsupported("nki.language.dynamic_range with register bounds")
    if int(step) <= 0:
        raise NkiConstraintError(
            "err_invalid_operand", f"nl.dynamic_range: step must be a positive integer, got {step}"
        )
    lo, hi = (0, start) if stop is None else (start, stop)
    return iter(range(int(lo), int(hi), int(step)))


@contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Keep the operations of the block in program order: the emulator always runs them in
    program order, so the block is what it says."""
    yield


def static_range(*args: int, **hints: Any) -> Iterator[int]:
    """Fully unrolled loop; runs in order (hints as for affine_range)."""
    _loop_hints("nl.static_range", hints)
    return iter(range(*args))


# -- SPMD (nki-facts §1.6) --------------------------------------------------------------------
def program_id(axis: int = 0) -> int:
    """Index of this grid instance along ``axis`` (0 when launched without a grid)."""
    run = current_run()
    if axis >= max(len(run.grid), 1):
        raise NkiConstraintError("err_invalid_program_axis", f"grid {run.grid} has no axis {axis}")
    return run.grid_index[axis] if run.grid else 0


def num_programs(axes: int | Sequence[int] | None = None) -> int:
    """Grid size along ``axes`` (product for several; whole grid when None)."""
    run = current_run()
    grid = run.grid or (1,)
    picked = range(len(grid)) if axes is None else [axes] if isinstance(axes, int) else axes
    return int(np.prod([grid[a] for a in picked]))


class nc(int):  # noqa: N801 - NKI spelling
    """``nl.nc(n)``: n physical cores in a grid dimension; instances still run serially here."""


def spmd_dim(*dims: int) -> int:
    """``nl.spmd_dim(a, nl.nc(b))``: a grid dimension of a·b instances (nki-facts §1.6)."""
    return int(np.prod([int(d) for d in dims]))


def program_ndim() -> int:
    """Rank of the launch grid."""
    return len(current_run().grid)


def device_print(prefix: str, x: Any, *, mask: Any = None) -> None:
    """Print a tile (simulation-only in the real toolchain too); masked-off elements print as
    the uninitialised marker."""
    value = x.read()[0] if isinstance(x, Tensor) else x
    if mask is not None:
        value = np.where(np.broadcast_to(np.asarray(mask, bool), np.shape(value)), value, np.nan)
    print(prefix, value)
