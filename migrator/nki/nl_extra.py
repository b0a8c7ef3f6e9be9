"""``nl`` random numbers, gathers and HBM read-modify-write (nki-facts §3.3).

``nl.rand`` / ``nl.dropout`` draw from the run's generator (``EmulatorOptions.seed``, reseeded
by ``nl.random_seed``), so a run is reproducible. ``nl.atomic_rmw`` adds every contribution
to a repeated index (an atomic add), unlike a plain scatter store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import dtypes as _dt
from . import ops as _ops
from .checks import check_partitions, require_buffer
from .dma import record_dma
from .errors import NkiConstraintError, not_emulated
from .language import _fit, _mask, _operand_values
from .nl_memory import _buffer
from .run import record_tile
from .tensor import Tensor
from .trace import Engine


def _engine() -> Any:
    from .isa import engine

    return engine


def rand(
    shape: Sequence[int], dtype: Any = _dt.float32, buffer: Any = None, name: str = ""
) -> Tensor:
    """A tile of uniform [0, 1) values (GpSimd random generator), cast to ``dtype``."""
    from .isa_select import random_uniform

    buf = _buffer(buffer)
    if buf.is_hbm:
        raise NkiConstraintError(
            "err_hbm_tensor_with_init_value_not_supported",
            "nl.rand fills an on-chip tile; create HBM tensors with nl.ndarray",
        )
    shape_t = tuple(int(s) for s in shape)
    check_partitions(shape_t, 0, "nl.rand")
    values = random_uniform(shape_t)
    out = Tensor.from_values(values, None, _dt.normalize(dtype), buf, None, fresh=True)
    if name:
        out.storage.name = name
    record_tile("rand", Engine.GPSIMD, out)
    return out


def random_seed(seed: Any, *, mask: Any = None) -> None:
    """Reseed the random generator: the same seed gives the same sequence."""
    from .isa_select import seed_random

    not_emulated("nl.random_seed", mask=(mask, None))
    seed_random(seed)


def dropout(x: Any, rate: Any, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """Zero each element of ``x`` with probability ``rate`` (scalar or one-element tile)."""
    from .isa_common import f32

    if (
        isinstance(rate, Tensor)
        and rate.size == 1
        and rate.partitions != getattr(x, "partitions", 1)
    ):
        vals, _ = f32(rate)
        rate = float(vals.reshape(-1)[0])
    return _engine().dropout(x, rate, dtype=dtype, mask=mask)


def gather_flattened(
    data: Any, indices: Any, *, axis: int = 0, mask: Any = None, dtype: Any = None
) -> Tensor:
    """Per partition ``take_along_axis`` over the flattened free axes."""
    not_emulated("nl.gather_flattened", axis=(axis, 0))
    return _engine().gather_flattened(data, indices, mask=mask, dtype=dtype)


def loop_reduce(
    x: Any, op: Any, loop_indices: Any, *, dtype: Any = None, mask: Any = None
) -> Tensor:
    """Reduce ``x`` across loop iterations into the tile the result is assigned to:
    ``t[...] = nl.loop_reduce(x, op, loop_indices=[k])`` is ``t[...] = op(t, x)`` (VectorE).

    The destination is the assignment target, so the result must be assigned into a tile;
    rebinding a name (``b = nl.loop_reduce(...)``) cannot be emulated and raises on the second
    call from the same line."""
    from .errors import kernel_location, unsupported
    from .run import current_run
    from .tensor import LOOP_REDUCE

    opname = _ops.resolve(op, "nl.loop_reduce")
    if opname not in ("add", "subtract", "multiply", "maximum", "minimum"):
        raise NkiConstraintError(
            "err_unsupported_operator", f"nl.loop_reduce: cannot reduce with {opname}"
        )
    registers = current_run().registers
    key = ("loop_reduce", kernel_location())
    site = registers.get(key)
    if site is not None and not site["assigned"]:
        raise unsupported(
            "nki.language.loop_reduce whose result is not assigned into a tile "
            "(write t[...] = nl.loop_reduce(...)); rebinding a name"
        )
    site = registers[key] = {"assigned": False}
    from .language import copy

    out = copy(x, dtype=dtype, mask=mask)
    LOOP_REDUCE[out] = (opname, site)
    return out


def atomic_rmw(dst: Any, value: Any, op: Any, *, mask: Any = None) -> None:
    """``dst = op(dst, value)`` on HBM, atomically (only ``np.add``/``nl.add``)."""
    from .isa import rmw_add
    from .isa_common import f32

    d = require_buffer(dst, "nl.atomic_rmw", "dst", ("hbm",))
    if _ops.resolve(op, "nl.atomic_rmw") != "add":
        raise NkiConstraintError(
            "err_unsupported_operator", "nl.atomic_rmw supports only op=np.add / nl.add"
        )
    if isinstance(value, Tensor):
        vals, ok = f32(value)
        vals, ok = _fit(vals, ok, d.shape)
    else:
        vals, ok = _operand_values(value, d.shape)
        vals = _dt.to_f32(vals)
    m = _mask(mask, d.shape)
    rmw_add(d, vals, ok, m)
    record_dma("atomic_rmw", d, value if isinstance(value, Tensor) else d, m)
