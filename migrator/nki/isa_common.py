"""Shared argument handling for ``nki.isa`` instructions (engine choice, operands, output)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import Enum
from typing import Any

import numpy as np

from . import dtypes as _dt
from .checks import require_on_chip
from .errors import NkiConstraintError
from .language import _fit, _mask
from .tensor import Buffer, Tensor
from .trace import Engine


class engine_kind(Enum):  # noqa: N801 - NKI spelling (nisa.engine)
    """Engine selector accepted by ``engine=`` (values as in nki-facts §4)."""

    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


class reduce_cmd(Enum):  # noqa: N801 - NKI spelling (nisa.reduce_cmd)
    """Accumulator-register command of activation/tensor_scalar reductions (nki-facts §4).

    The emulator writes each instruction's own reduction to ``reduce_res`` (reset_reduce
    semantics); accumulating across instructions in the registers is not modelled.
    """

    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class oob_mode(Enum):  # noqa: N801 - NKI spelling (nisa.oob_mode)
    """Out-of-bounds policy of indirect DMA: ``error`` raises, ``skip`` drops those elements."""

    error = 0
    skip = 1


class dge_mode(Enum):  # noqa: N801 - NKI spelling (nisa.dge_mode)
    """DMA descriptor generation mode. Functionally every mode is the same copy (nki-facts §4,
    "DMA descriptor modes"); ``hwdge`` needs trn2+ and equal dtypes, which is checked."""

    none = 0
    swdge = 1
    hwdge = 2
    unknown = 3


class nc_version(Enum):  # noqa: N801 - NKI spelling (nisa.nc_version)
    """NeuronCore generation; ordered so ``get_nc_version() >= nc_version.gen3`` works."""

    gen2 = 2
    gen3 = 3
    gen4 = 4

    def __ge__(self, other: Any) -> bool:
        return self.value >= other.value

    def __gt__(self, other: Any) -> bool:
        return self.value > other.value

    def __le__(self, other: Any) -> bool:
        return self.value <= other.value

    def __lt__(self, other: Any) -> bool:
        return self.value < other.value


def get_nc_version() -> nc_version:
    """The emulated target's generation (trn1 → gen2, trn2 → gen3)."""
    from .run import maybe_current_run

    run = maybe_current_run()
    target = run.options.target if run is not None else "trn1"
    return {"trn1": nc_version.gen2, "trn2": nc_version.gen3}.get(target, nc_version.gen2)


_ENGINES = {
    engine_kind.tensor: Engine.TENSOR,
    engine_kind.scalar: Engine.SCALAR,
    engine_kind.gpsimd: Engine.GPSIMD,
    engine_kind.vector: Engine.VECTOR,
    engine_kind.dma: Engine.DMA,
}


class TileShape:
    """Shape stand-in for tracing an instruction before its output tile exists."""

    __slots__ = ("partitions", "free_size", "dtype")

    def __init__(self, partitions: int, free_size: int, dtype: Any) -> None:
        self.partitions, self.free_size, self.dtype = partitions, free_size, dtype

    @classmethod
    def of(cls, shape: tuple[int, ...], dtype: Any) -> TileShape:
        free = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
        return cls(int(shape[0]), free, _dt.normalize(dtype))


def pick_engine(choice: Any, default: Engine) -> Engine:
    """The engine named by ``engine=`` (either dialect's enum or its value); unknown/None:
    ``default``. An engine that cannot run the instruction's kind of work is an error."""
    if choice is None:
        return default
    value = getattr(choice, "value", choice)
    if not isinstance(value, int) or value not in _BY_VALUE:
        raise NkiConstraintError("err_invalid_operand", f"engine={choice!r} is not a nisa.engine")
    kind = _BY_VALUE[value]
    if kind is engine_kind.unknown:
        return default
    picked = _ENGINES.get(kind)
    if picked is None:
        raise NkiConstraintError(
            "err_invalid_operand", f"engine={kind.name} cannot run this instruction"
        )
    return picked


_BY_VALUE = {e.value: e for e in engine_kind}


@contextlib.contextmanager
def labelled(name: Any) -> Iterator[None]:
    """New dialect ``name=``: label the trace entries of one instruction call."""
    from .run import maybe_current_run

    run = maybe_current_run()
    start = len(run.trace) if run is not None else 0
    yield
    if name is not None and run is not None:
        if not isinstance(name, str):
            raise NkiConstraintError("err_invalid_operand", f"name={name!r} must be a string")
        for ins in run.trace[start:]:
            ins.label = name


Values = tuple[np.ndarray, np.ndarray | None]


def f32(t: Tensor, mask: np.ndarray | None = None) -> Values:
    """Operand values widened to the engines' fp32 (read-only: may be a view of storage)."""
    data, valid = t.read(mask)
    if data.dtype == _dt.bfloat16 and not t.advanced and mask is None:
        widened = t.storage.widened_f32(t.key)
        if widened is not None:
            return widened, valid
    return _dt.to_f32(data), valid


def per_partition(value: Any, p: int, op: str, role: str) -> Values:
    """A scalar or (P, 1) operand broadcast along the free axes."""
    if isinstance(value, Tensor):
        require_on_chip(value, op, role)
        if value.free_size != 1 or value.partitions not in (1, p):
            raise NkiConstraintError(
                "err_activation_bias_invalid_type",
                f"{op}: {role} must be a scalar or a ({p}, 1) tile, got shape {value.shape}",
            )
        vals, valid = f32(value)
        return vals.reshape(-1, 1), None if valid is None else valid.reshape(-1, 1)
    return np.asarray(value, dtype=np.float32), None


def flat(vals: np.ndarray) -> np.ndarray:
    """[partitions, free elements] (2-D tiles as they are)."""
    return vals if vals.ndim == 2 else vals.reshape(vals.shape[0], -1)


def all_valid(*valids: np.ndarray | None) -> np.ndarray | None:
    present = [v for v in valids if v is not None]
    if not present:
        return None
    out = present[0]
    for v in present[1:]:
        out = out & v
    return out


def emit(
    values: np.ndarray,
    valid: np.ndarray | None,
    dtype: Any,
    buffer: Buffer,
    mask: Any,
    dst: Tensor | None,
) -> Tensor:
    """Legacy: a new tile holding the result; new dialect: write the result into ``dst``."""
    if dst is None:
        dt = _dt.normalize(dtype)
        return Tensor.from_values(values, valid, dt, buffer, _mask(mask, values.shape))
    vals, ok = _fit(values, valid, dst.shape)
    dst.write(vals, ok, _mask(mask, dst.shape))
    return dst
