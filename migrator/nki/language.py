"""The ``nki.language`` (``nl``) surface, legacy ``neuronxcc.nki.language`` dialect first.

Every op reads its operands widened to fp32, computes with numpy over whole tiles, and rounds
the result to the destination dtype (RNE); ``mask=`` limits which elements are produced and
leaves the others untouched. Names the emulator does not implement raise
``NotImplementedError`` through the module ``__getattr__`` instead of guessing.
"""

from __future__ import annotations

import builtins as _builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import dtypes as _dt
from . import nl_int as _nl_int
from . import ops as _ops
from .checks import (
    check_partitions,
    check_reduce_axes,
    check_same_partitions,
    require_buffer,
    require_on_chip,
)
from .dma import record_dma
from .errors import NkiConstraintError, NkiHostComputeError, unsupported
from .nl_memory import (  # noqa: F401 - re-exported as the nl surface
    affine_range,
    arange,
    bfloat16,
    bfp16,
    bool_,
    device_print,
    ds,
    dynamic_range,
    empty_like,
    finfo,
    float8_e4m3,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    fp32,
    full,
    hbm,
    int8,
    int16,
    int32,
    is_hbm,
    is_on_chip,
    is_psum,
    is_sbuf,
    mgrid,
    nc,
    ndarray,
    no_reorder,
    num_programs,
    ones,
    ones_like,
    par_dim,
    private_hbm,
    program_id,
    program_ndim,
    psum,
    sbuf,
    sequential_range,
    shared_hbm,
    spmd_dim,
    static_cast,
    static_range,
    tfloat32,
    tile_size,
    uint8,
    uint16,
    uint32,
    zeros,
    zeros_like,
)
from .run import record_tile
from .tensor import Buffer, Tensor, host_access_guarded
from .trace import Engine

# -- helpers shared with tensor.py and isa.py ------------------------------------------------
# Public names of this module that other emulator modules import but that are not NKI API
# (kept out of the nl facade and the support table).
_INTERNAL = frozenset({"tt_streams", "split_mask"})


def _record_inplace(t: Tensor, op: str, other: Any = None) -> None:
    """`+=` on PSUM is free near-memory accumulation; on SBUF it is a Vector instruction."""
    if t.buffer is not Buffer.PSUM:
        record_tile(f"tensor_tensor[{op}]", Engine.VECTOR, t, streams=tt_streams(op, t, other))


_FAST_BF16 = frozenset({"add", "subtract", "multiply"})


def tt_streams(op: str, a: Any, b: Any) -> int:
    """Input streams a two-operand VectorE instruction pays for (nki-facts §4 tensor_tensor).

    ``max(64, N)`` cycles when one input is in PSUM, or for bf16 add/subtract/multiply with
    both inputs bf16; otherwise ``max(64, 2N)``. Scalars and (P, 1) operands are not streams.
    """
    tiles = [x for x in (a, b) if isinstance(x, Tensor) and x.free_size > 1]
    if len(tiles) < 2:
        return 1
    if any(x.buffer is Buffer.PSUM for x in tiles):
        return 1
    if op in _FAST_BF16 and _builtins.all(x.dtype == _dt.bfloat16 for x in tiles):
        return 1
    return 2


def _aligned(shape: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    """Partition-aligned broadcasting: pad missing axes at the end (nki-facts §3.2)."""
    return shape + (1,) * (ndim - len(shape))


def _operand_values(
    value: Any, shape: tuple[int, ...] | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """fp32 values (and validity) of a tile, scalar or numpy constant, fitted to ``shape``."""
    if isinstance(value, Tensor):
        if not value.buffer.on_chip and shape is not None:
            require_on_chip(value, "assignment", "value")
        data, valid = value.read()
        vals = _dt.to_f32(data) if value.dtype != _dt.bool_ else data.astype(np.float32)
    else:
        if isinstance(value, np.ndarray) and value.ndim and host_access_guarded():
            # values computed on the host, not a tile (refused for untrusted kernels)
            raise NkiHostComputeError(
                f"a numpy array {value.shape} as an operand is not NKI: tiles come from "
                "nl.load and NKI instructions"
            )
        vals, valid = np.asarray(value, dtype=np.float32), None
    if shape is None:
        return vals, valid
    return _fit(vals, valid, shape)


def _fit(
    vals: np.ndarray, valid: np.ndarray | None, shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray | None]:
    """Reshape (same element count) or partition-aligned broadcast values into ``shape``."""
    if vals.shape == shape:
        return vals, valid
    if vals.ndim and vals.size == math.prod(shape):
        return vals.reshape(shape), None if valid is None else valid.reshape(shape)
    target = _aligned(vals.shape, len(shape)) if vals.ndim <= len(shape) else vals.shape
    try:
        out = np.broadcast_to(vals.reshape(target), shape)
    except ValueError as exc:
        raise NkiConstraintError(
            "err_shape_mismatch", f"cannot fit a value of shape {vals.shape} into shape {shape}"
        ) from exc
    return out, None if valid is None else np.broadcast_to(valid.reshape(target), shape)


def _dtype_of(x: Any) -> np.dtype:
    if isinstance(x, Tensor):
        return x.dtype
    if isinstance(x, np.ndarray):
        return _dt.int32 if x.dtype.kind in "iu" else _dt.float32
    return _dt.weak_scalar_dtype(x)


def _mask(mask: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    if mask is None:
        return None
    return np.broadcast_to(np.asarray(mask, dtype=bool), shape)


def split_mask(
    mask: Any, in_shape: tuple[int, ...], out_shape: tuple[int, ...]
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(input mask, output mask) for an instruction whose output shape differs from its input.

    A legacy ``mask=`` predicates the instruction's iteration space: for reductions and
    statistics that is the input, and kernels write masks over the reduced free axes
    (e.g. ``nl.sum(t, axis=[1, 2], mask=(i_h < H) & (i_w < W))``). A mask that broadcasts to
    the output shape is an output mask (as before); otherwise it must cover the input.
    """
    if mask is None:
        return None, None
    m = np.asarray(mask, dtype=bool)
    try:
        return None, np.broadcast_to(m, out_shape)
    except ValueError:
        pass
    try:
        return np.broadcast_to(m, in_shape), None
    except ValueError as exc:
        raise NkiConstraintError(
            "err_shape_mismatch",
            f"mask of shape {m.shape} fits neither the input {in_shape} nor the output "
            f"{out_shape} of the instruction",
        ) from exc


def _combine(valids: Sequence[np.ndarray | None], shape: tuple[int, ...]) -> np.ndarray | None:
    present = [v for v in valids if v is not None]
    if not present:
        return None
    out = np.ones(shape, dtype=bool)
    for v in present:
        out &= np.broadcast_to(v.reshape(_aligned(v.shape, len(shape))), shape)
    return out


def _operands(
    op: str, args: Sequence[Any]
) -> tuple[list[np.ndarray], np.ndarray | None, tuple[int, ...]]:
    """Read operands as fp32 with partition-aligned broadcasting; return values, validity, shape."""
    tiles = [
        require_on_chip(a, f"nl.{op}", f"operand {n}")
        for n, a in enumerate(args)
        if isinstance(a, Tensor)
    ]
    if not tiles:
        raise NkiConstraintError("err_invalid_operand", f"nl.{op} needs at least one tile operand")
    check_same_partitions(f"nl.{op}", *tiles)
    if len(tiles) == len(args) and _builtins.all(t.shape == tiles[0].shape for t in tiles):
        # tiles of one shape (the common case): no broadcasting to work out
        read = [_operand_values(t) for t in tiles]
        return (
            [v for v, _ in read],
            _combine([ok for _, ok in read], tiles[0].shape),
            tiles[0].shape,
        )
    ndim = _builtins.max(np.ndim(a) if not isinstance(a, Tensor) else a.ndim for a in args)
    read = [_operand_values(a) for a in args]
    vals = [v.reshape(_aligned(v.shape, ndim)) for v, _ in read]
    shape = tuple(int(n) for n in np.broadcast_shapes(*(v.shape for v in vals)))
    return vals, _combine([ok for _, ok in read], shape), shape


def _finish(
    op: str,
    engine: Engine,
    result: np.ndarray,
    valid: np.ndarray | None,
    dtype: np.dtype,
    mask: Any,
    streams: int,
) -> Tensor:
    shape = result.shape
    out = Tensor.from_values(
        result.astype(np.float32, copy=False),
        valid,
        dtype,
        Buffer.SBUF,
        _mask(mask, shape),
        fresh=True,  # every caller passes a newly computed array
    )
    record_tile(op, engine, out, streams)
    return out


def _unary_op(op: str, x: Any, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """Elementwise unary op in fp32 (ScalarE activation or VectorE, see ops.UNARY)."""
    fn, engine = _ops.UNARY[op]
    (vals,), valid, _ = _operands(op, [x])
    with np.errstate(all="ignore"):
        result = fn(vals)
    default = x.dtype if _dt.is_float(x.dtype) else _dt.float32
    out_dt = (
        _dt.normalize(dtype)
        if dtype is not None
        else (_dt.bool_ if op in _ops.COMPARISONS else default)
    )
    return _finish(op, engine, np.asarray(result, dtype=np.float32), valid, out_dt, mask, 1)


def _binary_op(
    op: str, a: Any, b: Any, *, dtype: Any = None, mask: Any = None, record: bool = True
) -> Tensor:
    """Elementwise binary op: integer/bit-vector ops exactly (nl_int), the rest in fp32."""
    if op in _nl_int.INT_BINARY:
        return _nl_int.int_binary(op, a, b, dtype=dtype, mask=mask)
    return _f32_binary_op(op, a, b, dtype=dtype, mask=mask, record=record)


def _f32_binary_op(
    op: str, a: Any, b: Any, *, dtype: Any = None, mask: Any = None, record: bool = True
) -> Tensor:
    """Elementwise binary op with NKI type promotion and partition-aligned broadcasting."""
    fn, engine = _ops.BINARY[op]
    (va, vb), valid, _ = _operands(op, [a, b])
    with np.errstate(all="ignore"):
        result = np.asarray(fn(va, vb), dtype=np.float32)
    if dtype is not None:
        out_dt = _dt.normalize(dtype)
    elif op in _ops.COMPARISONS:
        out_dt = _dt.bool_
    elif op == "divide" and not (_dt.is_float(_dtype_of(a)) or _dt.is_float(_dtype_of(b))):
        # integer / integer is true division into fp32, as in numpy and Python 3: published
        # kernels compute row = floor(iota / width) and rely on the fractional quotient
        # (nki-samples reference/vision.py resize_nearest_fixed_dma_kernel).
        out_dt = _dt.float32
    else:
        out_dt = _dt.promote(_dtype_of(a), _dtype_of(b))
    if not record:
        return Tensor.from_values(
            result, valid, out_dt, Buffer.SBUF, _mask(mask, result.shape), fresh=True
        )
    return _finish(op, engine, result, valid, out_dt, mask, tt_streams(op, a, b))


def _unary(op: str) -> Any:
    def fn(x: Any, *, dtype: Any = None, mask: Any = None) -> Tensor:
        return _unary_op(op, x, dtype=dtype, mask=mask)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"nl.{op}: elementwise, computed in fp32 and rounded to the result dtype."
    return _ops.op_name(op)(fn)


def _binary(op: str) -> Any:
    def fn(x: Any, y: Any, *, dtype: Any = None, mask: Any = None) -> Tensor:
        return _binary_op(op, x, y, dtype=dtype, mask=mask)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"nl.{op}: elementwise with broadcasting, fp32 math, NKI type promotion."
    return _ops.op_name(op)(fn)


# One line per op (house rule: the vocabulary reads like a spec; semantics live in ops.py).
exp, log, sqrt, rsqrt = _unary("exp"), _unary("log"), _unary("sqrt"), _unary("rsqrt")
tanh, sigmoid, relu, gelu = _unary("tanh"), _unary("sigmoid"), _unary("relu"), _unary("gelu")
gelu_apprx_tanh, silu, erf = _unary("gelu_apprx_tanh"), _unary("silu"), _unary("erf")
softplus, mish, sin, cos = _unary("softplus"), _unary("mish"), _unary("sin"), _unary("cos")
square, abs, negative = _unary("square"), _unary("abs"), _unary("negative")  # noqa: A001
reciprocal, sign, floor, ceil = (
    _unary("reciprocal"),
    _unary("sign"),
    _unary("floor"),
    _unary("ceil"),
)
trunc, logical_not = _unary("trunc"), _unary("logical_not")
gelu_dx, gelu_apprx_sigmoid = _unary("gelu_dx"), _unary("gelu_apprx_sigmoid")
gelu_apprx_sigmoid_dx, silu_dx = _unary("gelu_apprx_sigmoid_dx"), _unary("silu_dx")
erf_dx, arctan, tan = _unary("erf_dx"), _unary("arctan"), _unary("tan")
add, subtract, multiply, divide = (
    _binary("add"),
    _binary("subtract"),
    _binary("multiply"),
    _binary("divide"),
)
maximum, minimum, power, fmod = (
    _binary("maximum"),
    _binary("minimum"),
    _binary("power"),
    _binary("fmod"),
)
equal, not_equal, greater = _binary("equal"), _binary("not_equal"), _binary("greater")
greater_equal, less, less_equal = _binary("greater_equal"), _binary("less"), _binary("less_equal")
logical_and, logical_or, logical_xor = (
    _binary("logical_and"),
    _binary("logical_or"),
    _binary("logical_xor"),
)


def where(condition: Any, x: Any, y: Any, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """Select ``x`` where ``condition`` else ``y`` (condition may be an arange predicate)."""
    args = [a for a in (condition, x, y)]
    if not any(isinstance(a, Tensor) for a in args):
        raise NkiConstraintError("err_invalid_operand", "nl.where needs at least one tile operand")
    (c, vx, vy), valid, shape = _operands("where", args)
    result = np.where(c != 0, vx, vy).astype(np.float32)
    if valid is not None:
        # an element is defined where the operand it selects is: `nl.where(row_ok, x, 0.0)`
        # over a masked load's tile is all defined, rows past the end being the constant
        ok = [_combine([_operand_values(a)[1]], shape) if isinstance(a, Tensor) else None
              for a in args]  # fmt: skip
        pick = np.broadcast_to(c != 0, shape)
        both = [np.ones(shape, dtype=bool) if v is None else v for v in ok]
        valid = both[0] & np.where(pick, both[1], both[2])
    out_dt = _dt.normalize(dtype) if dtype is not None else _dt.promote(_dtype_of(x), _dtype_of(y))
    return _finish("select", Engine.VECTOR, result, valid, out_dt, mask, 2)


# -- reductions (nki-facts §3.6) --------------------------------------------------------------
def _reduce(op: str, x: Any, axis: Any, dtype: Any, keepdims: bool, mask: Any) -> Tensor:
    t = require_on_chip(x, f"nl.{op}", "x")
    axes = tuple(int(a) for a in (axis if isinstance(axis, Sequence) else (axis,)))
    axes = tuple(a + t.ndim if a < 0 else a for a in axes)
    check_reduce_axes(axes, t.ndim, t.pdim, f"nl.{op}")
    kept_shape = tuple(1 if i in axes else n for i, n in enumerate(t.shape))
    in_mask, mask = split_mask(mask, t.shape, kept_shape)
    data, valid = t.read(None if in_mask is None else np.ascontiguousarray(in_mask))
    vals = data.astype(np.float32)
    count = np.float32(np.prod([t.shape[a] for a in axes]))
    if in_mask is not None:
        # masked-off inputs take the reduction's identity and do not count as read
        vals = np.where(in_mask, vals, np.float32(_IDENTITY[op]))
        valid = None if valid is None else valid | ~in_mask
        count = np.maximum(in_mask.sum(axis=axes, keepdims=keepdims), 1).astype(np.float32)
    with np.errstate(all="ignore"):
        if op == "mean":
            result = np.sum(vals, axis=axes, keepdims=keepdims) / count
        else:
            result = _ops.REDUCE[_RED[op]](vals, axis=axes, keepdims=keepdims)
    ok = None if valid is None else valid.all(axis=axes, keepdims=keepdims)
    if result.ndim < 2 and t.buffer.on_chip:
        # a reduced tile stays (P, 1) so it broadcasts along the free axis (nki-facts §3.2)
        result = result.reshape(t.partitions, -1)
        ok = None if ok is None else ok.reshape(result.shape)
    default = t.dtype if (_dt.is_float(t.dtype) or op != "mean") else _dt.float32
    out_dt = _dt.normalize(dtype) if dtype is not None else default
    out = Tensor.from_values(
        np.asarray(result, np.float32),
        ok,
        out_dt,
        Buffer.SBUF,
        None if mask is None else mask.reshape(np.shape(result)),
    )
    record_tile(f"tensor_reduce[{op}]", Engine.VECTOR, t)
    return out


_RED = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "multiply"}
_IDENTITY = {"sum": 0.0, "mean": 0.0, "max": -np.inf, "min": np.inf, "prod": 1.0}


@_ops.op_name("add")
def sum(
    x: Any, axis: Any, *, dtype: Any = None, keepdims: bool = False, mask: Any = None
) -> Tensor:  # noqa: A001
    """Sum over free axes in fp32."""
    return _reduce("sum", x, axis, dtype, keepdims, mask)


@_ops.op_name("maximum")
def max(
    x: Any, axis: Any, *, dtype: Any = None, keepdims: bool = False, mask: Any = None
) -> Tensor:  # noqa: A001
    """Maximum over free axes."""
    return _reduce("max", x, axis, dtype, keepdims, mask)


@_ops.op_name("minimum")
def min(
    x: Any, axis: Any, *, dtype: Any = None, keepdims: bool = False, mask: Any = None
) -> Tensor:  # noqa: A001
    """Minimum over free axes."""
    return _reduce("min", x, axis, dtype, keepdims, mask)


def mean(
    x: Any, axis: Any, *, dtype: Any = None, keepdims: bool = False, mask: Any = None
) -> Tensor:
    """Mean over free axes (fp32 result for integer inputs)."""
    return _reduce("mean", x, axis, dtype, keepdims, mask)


@_ops.op_name("multiply")
def prod(
    x: Any, axis: Any, *, dtype: Any = None, keepdims: bool = False, mask: Any = None
) -> Tensor:
    """Product over free axes."""
    return _reduce("prod", x, axis, dtype, keepdims, mask)


def all(  # noqa: A001 - NKI spelling
    x: Any, axis: Any, *, dtype: Any = _dt.bool_, keepdims: bool = False, mask: Any = None
) -> Tensor:
    """True where every element along the free ``axis`` is non-zero (a compare, then a
    min-reduction on VectorE)."""
    nonzero = _binary_op("not_equal", x, 0.0, dtype=_dt.float32, mask=mask)
    return _reduce("min", nonzero, axis, dtype, keepdims, mask)


def expand_dims(x: Any, axis: int) -> Tensor:
    """A view of ``x`` with a new size-1 axis at ``axis``."""
    return require_on_chip(x, "nl.expand_dims", "x").expand_dims(axis)


# -- data movement (nki-facts §3.3) -------------------------------------------------------------
def load(src: Any, *, mask: Any = None, dtype: Any = None) -> Tensor:
    """DMA an HBM view into a new SBUF tile (dtype cast through fp32)."""
    t = require_buffer(src, "nl.load", "src", ("hbm",))
    check_partitions(t.shape, 0, "nl.load result")
    out_dt = _dt.normalize(dtype) if dtype is not None else t.dtype
    if mask is None and out_dt == t.dtype:
        # Same dtype, no mask: the tile shares the HBM memory copy-on-write (no copy up front).
        shared = Tensor.borrow(t, Buffer.SBUF)
        if shared is not None:
            record_dma("load", t, shared, None)
            return shared
    m = _mask(mask, t.shape)
    data, valid = t.read(m)
    out = Tensor.from_values(
        data if data.dtype == out_dt else _dt.to_f32(data), valid, out_dt, Buffer.SBUF, m
    )
    record_dma("load", t, out, m)
    return out


def store(dst: Any, value: Any, *, mask: Any = None) -> None:
    """DMA a tile (SBUF, or PSUM via an implicit copy) into an HBM view.

    Same-dtype stores are bit copies; otherwise the value goes through fp32 and is rounded.
    """
    d = require_buffer(dst, "nl.store", "dst", ("hbm",))
    if isinstance(value, Tensor):
        require_on_chip(value, "nl.store", "value")
        data, valid = value.read()
        vals, valid = _fit(data if data.dtype == d.dtype else _dt.to_f32(data), valid, d.shape)
    else:
        vals, valid = _operand_values(value, d.shape)
    m = _mask(mask, d.shape)
    d.write(vals, valid, m)
    record_dma("store", d, value if isinstance(value, Tensor) else d, m)


@_ops.op_name("copy")
def copy(src: Any, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """On-chip copy into a new SBUF tile (e.g. to evacuate PSUM), optionally casting."""
    t = require_on_chip(src, "nl.copy", "src")
    data, valid = t.read()
    out_dt = _dt.normalize(dtype) if dtype is not None else t.dtype
    vals = data if data.dtype == out_dt else _dt.to_f32(data)
    out = Tensor.from_values(vals, valid, out_dt, Buffer.SBUF, _mask(mask, t.shape))
    record_tile("tensor_copy", Engine.VECTOR, out)
    return out


# -- TensorE (nki-facts §3.7) ----------------------------------------------------------------------
def matmul(x: Any, y: Any, *, transpose_x: bool = False, mask: Any = None) -> Tensor:
    """``x @ y`` (or ``x.T @ y``) on TensorE; fp32 result in PSUM.

    TensorE reads SBUF only; like the compiler, ``nl.matmul`` stages PSUM operands (e.g. the
    result of ``nl.transpose``) through SBUF with a traced copy. ``nisa.nc_matmul`` stays strict.
    """
    xt = require_on_chip(x, "nl.matmul", "x")
    y = require_on_chip(y, "nl.matmul", "y")
    if y.buffer is Buffer.PSUM:
        y = copy(y)
    if xt.buffer is Buffer.PSUM and transpose_x:
        xt = copy(xt)
    if not transpose_x:
        # The compiler transposes x for TensorE; pass x already transposed with transpose_x=True.
        check_partitions(xt.shape, 0, "nl.matmul x")
        xt = transpose(xt)
        xt = copy(xt)
    return _isa_engine().nc_matmul(xt, y, mask=mask, op="nl.matmul")


def transpose(x: Any, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """2-D partition↔free transpose on TensorE (each side ≤ 128); result in PSUM."""
    return _isa_engine().nc_transpose(x, dtype=dtype, mask=mask, op="nl.transpose")


_ISA: list[Any] = []  # isa.engine, imported on first use (isa.py imports this module)


def _isa_engine() -> Any:
    if not _ISA:
        from .isa import engine

        _ISA.append(engine)
    return _ISA[0]


# Composites use the primitives above, so they are imported last.
from .nl_composite import (  # noqa: E402, F401 - re-exported as the nl surface
    broadcast_to,
    load_transpose2d,
    rms_norm,
    shared_constant,
    shared_identity_matrix,
    softmax,
    var,
)
from .nl_extra import (  # noqa: E402, F401 - re-exported as the nl surface
    atomic_rmw,
    dropout,
    gather_flattened,
    loop_reduce,
    rand,
    random_seed,
)
from .nl_int import (  # noqa: E402, F401 - re-exported as the nl surface
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    invert,
    left_shift,
    mod,
    right_shift,
)


def __getattr__(name: str) -> Any:
    """Unknown ``nl`` names fail loudly instead of silently computing something else."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise unsupported(f"nki.language.{name}")
