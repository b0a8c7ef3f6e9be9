"""``nki.isa`` instructions: one ``IsaEngine`` method per instruction (house rule 4).

Methods normalise and check their arguments, then compute with plain numpy in fp32 and either
return a new tile (legacy ``neuronxcc.nki.isa``: value-returning) or write into ``dst`` (new
``nki.isa``, see ``isa_dst.py``). The legacy module-level functions at the bottom are thin
forwards. Semantics: nki-facts §4 "NumPy equivalents of the core instructions".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes as _dt
from . import ops as _ops
from .checks import (
    check_matmul,
    check_partitions,
    check_psum_dst,
    check_reduce_axes,
    check_same_partitions,
    require_buffer,
    require_on_chip,
)
from .dma import record_copy
from .errors import UNKNOWN_LOCATION, NkiConstraintError
from .isa_common import (
    TileShape,
    all_valid,
    emit,
    f32,
    flat,
    per_partition,
    pick_engine,
)
from .isa_extra import StatsScanInstructions
from .language import _fit, _mask, tt_streams
from .run import current_run
from .run import record_tile as _record
from .storage import Deferred, Storage, row_block
from .tensor import Buffer, Tensor
from .trace import Engine, Instr


def _rounded_products(sv: np.ndarray, mv: np.ndarray, chunk: int = 64) -> np.ndarray:
    """``sv.T @ mv`` with every product rounded to fp32 before it is added.

    BLAS may fuse multiply and add, so an overflowing product never becomes ±inf and a sum of
    +inf and -inf products comes out +inf instead of NaN (and differs between BLAS builds).
    Only taken when the fast result is not finite; chunked over columns to bound memory."""
    out = np.empty((sv.shape[1], mv.shape[1]), dtype=np.float32)
    with np.errstate(all="ignore"):
        for j in range(0, mv.shape[1], chunk):
            prods = sv[:, :, None] * mv[:, None, j : j + chunk]  # [K, M, n] fp32 products
            out[:, j : j + chunk] = prods.sum(axis=0, dtype=np.float32)
    return out


def tensor_product(sv: np.ndarray, mv: np.ndarray) -> np.ndarray:
    """``sv.T @ mv``: fp32 products and fp32 accumulation, as TensorE + PSUM do (nki-facts §5)."""
    with np.errstate(all="ignore"):
        values = sv.T @ mv
    if not np.isfinite(np.add.reduce(values, axis=None)):  # one pass; inf/NaN make it so
        values = _rounded_products(sv, mv)
    return values


class IsaEngine(StatsScanInstructions):
    """Stateless instruction implementations; per-run state comes from ``current_run()``."""

    def nc_matmul(
        self,
        stationary: Any,
        moving: Any,
        *,
        mask: Any = None,
        dst: Tensor | None = None,
        accumulate: bool | None = None,
        op: str = "nisa.nc_matmul",
    ) -> Tensor:
        """``stationary.T @ moving`` over the partition (K) axis into fp32 PSUM."""
        s = require_on_chip(stationary, op, "stationary")
        m = require_on_chip(moving, op, "moving")
        check_matmul(s, m, op)
        sv, s_ok = f32(s)
        mv, m_ok = f32(m)
        sv, mv = flat(sv), flat(mv)
        k, mm, n = sv.shape[0], sv.shape[1], mv.shape[1]
        run = current_run()
        if run.options.trace:
            dtype = _dt.name(s.dtype)
            flops = 2 * k * mm * n
            run.add(Instr(op, Engine.TENSOR, k, n, dtype, UNKNOWN_LOCATION, flops=flops,
                          stationary_free=mm))  # fmt: skip
        if dst is None and s_ok is None and m_ok is None and mask is None:
            # The product is queued on its PSUM tile (storage.Deferred): `psum += ` of it
            # joins a K-tile group computed by one BLAS call when the tile is read.
            storage = Storage(np.empty((mm, n), np.float32), Buffer.PSUM, run=run)
            run.note_write(storage.uid)
            out = Tensor(storage)
            blocks = (row_block(s.storage, s.key, sv), row_block(m.storage, m.key, mv))
            storage.defer(Deferred(out.key, False, sv, mv, blocks, tensor_product))
            return out
        values = tensor_product(sv, mv)
        valid = None
        if s_ok is not None or m_ok is not None:
            cols_s = np.ones(sv.shape[1], bool) if s_ok is None else flat(s_ok).all(axis=0)
            cols_m = np.ones(mv.shape[1], bool) if m_ok is None else flat(m_ok).all(axis=0)
            valid = cols_s[:, None] & cols_m[None, :]
        if dst is None:
            return Tensor.from_values(  # values: a new array from the matmul, adopted as is
                values, valid, _dt.float32, Buffer.PSUM, _mask(mask, values.shape), fresh=True
            )
        check_psum_dst(dst, op)
        storage = dst.storage
        # accumulate=None: the first matmul of a group overwrites, later ones add. We close a
        # group when the PSUM tile is read (evicted) — inferred from nki-facts §4 nc_matmul.
        group_open = storage.mm_open and (storage.valid is None or storage.valid[dst.key].all())
        if accumulate or (accumulate is None and group_open):
            with run.to_last_instruction():
                old, old_ok = f32(dst)
            values = old.reshape(values.shape) + values
            valid = all_valid(valid, None if old_ok is None else old_ok.reshape(values.shape))
        vals, ok = _fit(values, valid, dst.shape)
        with run.to_last_instruction():  # the accumulating read and write belong to this matmul
            dst.write(vals, ok, _mask(mask, dst.shape), accumulate=True)
        storage.mm_open = True
        return dst

    def nc_transpose(
        self,
        data: Any,
        *,
        dtype: Any = None,
        mask: Any = None,
        engine: Any = None,
        dst: Tensor | None = None,
        op: str = "nisa.nc_transpose",
    ) -> Tensor:
        """Partition↔free transpose: TensorE (≤128×128, into PSUM) or VectorE (≤32×32)."""
        t = require_on_chip(data, op, "data")
        eng = pick_engine(engine, Engine.TENSOR)
        limit = 32 if eng is Engine.VECTOR else 128
        if t.partitions > limit or t.free_size > limit:
            raise NkiConstraintError(
                "err_size_of_dimension_exceed_arch_limit",
                f"{op}: a {eng.value}-engine transpose handles at most {limit}x{limit}, got "
                f"{t.partitions}x{t.free_size}",
            )
        vals, ok = f32(t)
        values = flat(vals).T
        valid = None if ok is None else flat(ok).T
        _record(op, eng, t)
        buffer = Buffer.PSUM if eng is Engine.TENSOR else Buffer.SBUF
        return emit(values, valid, dtype or t.dtype, buffer, mask, dst)

    def activation(
        self,
        op: Any,
        data: Any,
        *,
        bias: Any = None,
        scale: Any = 1.0,
        dtype: Any = None,
        mask: Any = None,
        reduce_op: Any = None,
        reduce_res: Tensor | None = None,
        dst: Tensor | None = None,
        name: str = "nisa.activation",
    ) -> Tensor:
        """``op(data * scale + bias)`` on ScalarE, optional add-reduce into ``reduce_res``."""
        opname = _ops.resolve(op, name)
        fn, _ = _ops.UNARY[opname]
        t = require_on_chip(data, name, "data")
        vals, ok = f32(t)
        p = t.partitions
        sc, sc_ok = per_partition(scale, p, name, "scale")
        bi, bi_ok = per_partition(0.0 if bias is None else bias, p, name, "bias")
        shape2 = (vals.shape[0], -1)
        x = flat(vals) * sc + bi
        with np.errstate(all="ignore"):
            values = np.asarray(fn(x), dtype=np.float32)
        valid = all_valid(None if ok is None else flat(ok), sc_ok, bi_ok)
        if valid is not None:
            valid = np.broadcast_to(valid, values.shape)
        _record(f"{name}[{opname}]", Engine.SCALAR, t)  # the function: construct evidence
        if reduce_res is not None:
            if reduce_op is not None and _ops.resolve(reduce_op, name) != "add":
                raise NkiConstraintError(
                    "err_unsupported_operator", f"{name}: reduce_op must be add"
                )
            red = values.sum(axis=1, keepdims=True)
            red_ok = None if valid is None else valid.all(axis=1, keepdims=True)
            vals_r, ok_r = _fit(red, red_ok, reduce_res.shape)
            reduce_res.write(vals_r, ok_r)
        out_shape = t.shape if dst is None else dst.shape
        values = values.reshape(shape2).reshape(out_shape)
        valid = None if valid is None else valid.reshape(out_shape)
        return emit(values, valid, dtype or t.dtype, Buffer.SBUF, mask, dst)

    def tensor_tensor(
        self,
        data1: Any,
        data2: Any,
        op: Any,
        *,
        dtype: Any = None,
        mask: Any = None,
        engine: Any = None,
        dst: Tensor | None = None,
        name: str = "nisa.tensor_tensor",
    ) -> Tensor:
        """Elementwise ``op(data1, data2)``; not both inputs in PSUM (nki-facts §4)."""
        opname = _ops.resolve(op, name)
        a = require_on_chip(data1, name, "data1")
        b = require_on_chip(data2, name, "data2")
        if a.buffer is Buffer.PSUM and b.buffer is Buffer.PSUM:
            raise NkiConstraintError(
                "err_unsupported_memory",
                f"{name}: data1 and data2 cannot both be in PSUM; copy one to SBUF first",
            )
        check_same_partitions(name, a, b)
        if a.size != b.size:
            raise NkiConstraintError(
                "err_shape_mismatch", f"{name}: operand shapes {a.shape} and {b.shape} differ"
            )
        fn, default_engine = _ops.BINARY[opname]
        va, oka = f32(a)
        vb, okb = f32(b)
        with np.errstate(all="ignore"):
            values = np.asarray(fn(va, vb.reshape(va.shape)), dtype=np.float32)
        valid = all_valid(oka, None if okb is None else okb.reshape(va.shape))
        streams = tt_streams(opname, a, b)
        _record(f"tensor_tensor[{opname}]", pick_engine(engine, default_engine), a, streams)
        return emit(values, valid, dtype or _dt.promote(a.dtype, b.dtype), Buffer.SBUF, mask, dst)

    def tensor_scalar(
        self,
        data: Any,
        op0: Any,
        operand0: Any,
        reverse0: bool = False,
        op1: Any = None,
        operand1: Any = None,
        reverse1: bool = False,
        *,
        dtype: Any = None,
        mask: Any = None,
        engine: Any = None,
        dst: Tensor | None = None,
        name: str = "nisa.tensor_scalar",
    ) -> Tensor:
        """``(data op0 operand0) op1 operand1`` with scalar or (P, 1) operands."""
        t = require_on_chip(data, name, "data")
        vals, ok = f32(t)
        x = flat(vals)
        valids = [None if ok is None else flat(ok)]
        for op, operand, reverse in ((op0, operand0, reverse0), (op1, operand1, reverse1)):
            if op is None:
                continue
            opname = _ops.resolve(op, name)
            s, s_ok = per_partition(operand, t.partitions, name, "operand")
            valids.append(s_ok)
            with np.errstate(all="ignore"):
                if opname in _ops.UNARY:  # e.g. op0=nl.rsqrt with a dummy operand
                    x = _ops.UNARY[opname][0](x)
                else:
                    fn = _ops.BINARY[opname][0]
                    x = np.asarray(fn(s, x) if reverse else fn(x, s), dtype=np.float32)
        valid = all_valid(*valids)
        values = x.reshape(t.shape)
        valid = None if valid is None else np.broadcast_to(valid, x.shape).reshape(t.shape)
        _record(name, pick_engine(engine, Engine.VECTOR), t)
        return emit(values, valid, dtype or t.dtype, Buffer.SBUF, mask, dst)

    def tensor_reduce(
        self,
        op: Any,
        data: Any,
        axis: Any,
        *,
        dtype: Any = None,
        mask: Any = None,
        negate: bool = False,
        keepdims: bool = False,
        dst: Tensor | None = None,
        name: str = "nisa.tensor_reduce",
    ) -> Tensor:
        """Reduce over trailing free axes in fp32; ``negate`` multiplies by −1."""
        opname = _ops.resolve(op, name)
        if opname not in _ops.REDUCE:
            raise NkiConstraintError(
                "err_unsupported_operator", f"{name}: cannot reduce with {opname}"
            )
        t = require_on_chip(data, name, "data")
        axes = tuple(int(a) for a in (axis if isinstance(axis, list | tuple) else (axis,)))
        axes = tuple(a + t.ndim if a < 0 else a for a in axes)
        check_reduce_axes(axes, t.ndim, t.pdim, name)
        vals, ok = f32(t)
        with np.errstate(all="ignore"):
            values = np.asarray(_ops.REDUCE[opname](vals, axis=axes, keepdims=keepdims), np.float32)
        values = -values if negate else values
        valid = None if ok is None else ok.all(axis=axes, keepdims=keepdims)
        if values.ndim < 2:
            values = values.reshape(t.partitions, -1)
            valid = None if valid is None else valid.reshape(values.shape)
        _record(f"tensor_reduce[{opname}]", Engine.VECTOR, t)
        return emit(values, valid, dtype or t.dtype, Buffer.SBUF, mask, dst)

    def tensor_copy(
        self,
        src: Any,
        *,
        dtype: Any = None,
        mask: Any = None,
        engine: Any = None,
        dst: Tensor | None = None,
        name: str = "nisa.tensor_copy",
    ) -> Tensor:
        """On-chip copy; GpSimd cannot access PSUM (nki-facts §4)."""
        t = require_on_chip(src, name, "src")
        eng = pick_engine(engine, Engine.VECTOR)
        if eng is Engine.GPSIMD and (
            t.buffer is Buffer.PSUM or (dst is not None and dst.buffer is Buffer.PSUM)
        ):
            raise NkiConstraintError("err_unsupported_memory", f"{name}: GpSimd cannot access PSUM")
        data, ok = t.read()
        _record(name, eng, t)
        out_dt = dtype or (dst.dtype if dst is not None else t.dtype)
        vals = data if np.dtype(out_dt) == data.dtype else _dt.to_f32(data)
        return emit(vals, ok, out_dt, Buffer.SBUF, mask, dst)

    def memset(
        self, shape: Any, value: Any, dtype: Any, *, mask: Any = None, dst: Tensor | None = None
    ) -> Tensor:
        """Fill a tile with a constant."""
        shape = tuple(dst.shape if dst is not None else shape)
        check_partitions(shape, 0, "nisa.memset")
        values = np.full(shape, value, dtype=np.float32)
        _record("memset", Engine.VECTOR, TileShape.of(shape, dtype or dst.dtype))
        return emit(values, None, dtype, Buffer.SBUF, mask, dst)

    def iota_values(self, values: np.ndarray, dtype: Any, mask: Any, dst: Tensor | None) -> Tensor:
        """Write integer index values (computed in int32, then cast) on GpSimd."""
        if dst is not None:
            require_buffer(dst, "nisa.iota", "dst", ("sbuf",))
        check_partitions(values.shape, 0, "nisa.iota")
        _record("iota", Engine.GPSIMD, TileShape.of(values.shape, dtype or dst.dtype))
        return emit(values.astype(np.float32), None, dtype, Buffer.SBUF, mask, dst)

    def select_values(
        self,
        pred: np.ndarray,
        on_true: Any,
        on_false: float,
        dtype: Any,
        mask: Any,
        dst: Tensor | None,
    ) -> Tensor:
        """``where(pred, on_true, on_false)`` on GpSimd (affine_select)."""
        t = require_buffer(on_true, "nisa.affine_select", "on_true_tile", ("sbuf",))
        vals, ok = f32(t)
        values = np.where(np.broadcast_to(pred, vals.shape), vals, np.float32(on_false))
        _record("affine_select", Engine.GPSIMD, t)
        return emit(values.astype(np.float32), ok, dtype or t.dtype, Buffer.SBUF, mask, dst)

    def dma_copy(self, dst: Any, src: Any, *, mask: Any = None) -> None:
        """DMA between HBM and SBUF (or SBUF↔SBUF); casts go through fp32."""
        d = require_buffer(dst, "nisa.dma_copy", "dst", ("hbm", "sbuf"))
        s = require_buffer(src, "nisa.dma_copy", "src", ("hbm", "sbuf"))
        if d.size != s.size:
            raise NkiConstraintError(
                "err_shape_mismatch", f"nisa.dma_copy: dst has {d.size} elements, src {s.size}"
            )
        m = _mask(mask, d.shape)
        data, ok = s.read()
        vals = data.reshape(d.shape) if data.dtype == d.dtype else _dt.to_f32(data).reshape(d.shape)
        d.write(vals, None if ok is None else ok.reshape(d.shape), m)
        record_copy(s, d, m)


engine = IsaEngine()
