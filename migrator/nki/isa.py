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
from . import nl_int as _nl_int
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
from .errors import UNKNOWN_LOCATION, NkiConstraintError, NkiIndexError, NkiNotEmulatedError
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
from .isa_select import (
    NewDialectInstructions,
    SelectInstructions,
    accumulate_registers,
    check_dst_dtype,
)
from .language import _fit, _mask, split_mask, tt_streams
from .run import current_run
from .run import record_tile as _record
from .storage import Deferred, Storage, row_block
from .tensor import Buffer, Tensor
from .trace import Engine, Instr


# integer operations GpSimd carries out exactly in 32 bits (the others go through fp32)
def _bits_name(op: Any) -> str | None:
    """The name of a bit-vector operator (nl.bitwise_and, "right_shift" ...), else None."""
    name = getattr(op, "_nki_op", op if isinstance(op, str) else None)
    return name if name in _nl_int.BITVEC else None


_EXACT_INT = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}


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


def _double_row(perf_mode: Any, op: str) -> bool:
    """True for the fp8 double-row mode (legacy 'double_row_gen3', new 'double_row')."""
    value = getattr(perf_mode, "value", perf_mode)
    if value in (None, "none", "", 0):
        return False
    if value in ("double_row", "double_row_gen3"):
        return True
    raise NkiNotEmulatedError(op, "perf_mode", perf_mode)


def check_double_row(s: Tensor, m: Tensor, op: str) -> None:
    """Double-row operands: fp8, shapes [K, 2, M] / [K, 2, N], M <= 128, N <= 512, trn2+."""
    run = current_run()
    if run.options.target == "trn1":
        raise NkiConstraintError(
            "err_unsupported_dtype", f"{op}: perf_mode double_row needs NeuronCore-v3 (trn2)"
        )
    for t, role, limit in ((s, "stationary", 128), (m, "moving", 512)):
        if t.buffer is not Buffer.SBUF:
            require_buffer(t, op, role, ("sbuf",))
        fp8 = (_dt.float8_e4m3, _dt.float8_e5m2)
        held = run.options.precision == "fp32" and t.dtype == _dt.float32  # fp8 held in fp32
        if t.dtype not in fp8 and not held:
            raise NkiConstraintError(
                "err_unsupported_dtype", f"{op}: double_row {role} must be fp8, not {t.dtype}"
            )
        if t.ndim != 3 or t.shape[1] != 2 or t.shape[2] > limit:
            raise NkiConstraintError(
                "err_shape_mismatch",
                f"{op}: double_row {role} must have shape [K, 2, <= {limit}], got {t.shape}",
            )
        check_partitions(t.shape, 0, f"{op} {role}")
    if s.partitions != m.partitions:
        raise NkiConstraintError(
            "err_num_partition_mismatch",
            f"{op}: stationary has {s.partitions} partitions and moving {m.partitions}",
        )


def check_pe_tiling(s: Tensor, position: Any, size: Any, op: str) -> None:
    """PE tiling (nki-facts §4 nc_matmul): both set, multiples of 32, size covers stationary."""
    position, size = tuple(position or ()), tuple(size or ())
    if not position and not size:
        return
    if len(position) != 2 or len(size) != 2:
        raise NkiConstraintError(
            "err_invalid_operand",
            f"{op}: tile_position and tile_size must both be (row, column) pairs",
        )
    values = [int(v) for v in position + size]
    if any(v % 32 or v < 0 for v in values) or any(v == 0 for v in size):
        raise NkiConstraintError(
            "err_invalid_operand",
            f"{op}: tile_position {position} and tile_size {size} must be multiples of 32",
        )
    rows, cols = int(size[0]), int(size[1])
    if int(position[0]) + rows > 128 or int(position[1]) + cols > 128:
        raise NkiConstraintError(
            "err_invalid_operand", f"{op}: PE tile {position}+{size} leaves the 128x128 array"
        )
    if s.partitions > rows or s.free_size > cols:
        raise NkiConstraintError(
            "err_invalid_operand",
            f"{op}: tile_size {size} is smaller than the stationary tile "
            f"({s.partitions}x{s.free_size})",
        )
    if rows == 32 and cols == 32 and current_run().options.target == "trn1":
        raise NkiConstraintError("err_invalid_operand", f"{op}: 32x32 PE tiles need trn2")


def check_hints(
    sv: np.ndarray, mv: np.ndarray, s_onezero: bool, m_onezero: bool, transpose: bool, op: str
) -> None:
    """The compiler trusts these hints; a wrong one gives wrong numbers, so it raises here."""
    for flag, values, role in ((s_onezero, sv, "stationary"), (m_onezero, mv, "moving")):
        if flag and not np.isin(values, (0.0, 1.0)).all():
            raise NkiConstraintError(
                "err_invalid_operand",
                f"{op}: is_{role}_onezero=True but {role} holds values other than 0 and 1",
            )
    if transpose and not (
        mv.shape[0] == mv.shape[1] and np.array_equal(mv, np.eye(mv.shape[0], dtype=mv.dtype))
    ):
        raise NkiConstraintError(
            "err_invalid_operand", f"{op}: is_transpose=True needs an identity matrix as moving"
        )


def tensor_product(sv: np.ndarray, mv: np.ndarray) -> np.ndarray:
    """``sv.T @ mv``: fp32 products and fp32 accumulation, as TensorE + PSUM do (nki-facts §5)."""
    with np.errstate(all="ignore"):
        values = sv.T @ mv
    if not np.isfinite(np.add.reduce(values, axis=None)):  # one pass; inf/NaN make it so
        values = _rounded_products(sv, mv)
    return values


class IsaEngine(StatsScanInstructions, SelectInstructions, NewDialectInstructions):
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
        perf_mode: Any = None,
        is_stationary_onezero: bool = False,
        is_moving_onezero: bool = False,
        is_transpose: bool = False,
        tile_position: Any = (),
        tile_size: Any = (),
    ) -> Tensor:
        """``stationary.T @ moving`` over the partition (K) axis into fp32 PSUM.

        ``perf_mode`` double-row (trn2+, fp8): operands ``[K, 2, M]`` and ``[K, 2, N]``, the
        contraction runs over both K and the pair axis (256 rows). The hints
        ``is_*_onezero`` / ``is_transpose`` and PE tiling ``tile_position`` / ``tile_size``
        do not change the numbers; they are validated (a wrong hint raises)."""
        s = require_on_chip(stationary, op, "stationary")
        m = require_on_chip(moving, op, "moving")
        double = _double_row(perf_mode, op)
        if double:
            check_double_row(s, m, op)
        else:
            check_matmul(s, m, op)
        check_pe_tiling(s, tile_position, tile_size, op)
        sv, s_ok = f32(s)
        mv, m_ok = f32(m)
        sv, mv = flat(sv), flat(mv)
        if double:  # [K, 2*M] -> [2K, M]: row k*2 + l holds pair l of partition k
            sv = sv.reshape(sv.shape[0] * 2, -1)
            mv = mv.reshape(mv.shape[0] * 2, -1)
            s_ok = None if s_ok is None else flat(s_ok).reshape(sv.shape)
            m_ok = None if m_ok is None else flat(m_ok).reshape(mv.shape)
        check_hints(sv, mv, is_stationary_onezero, is_moving_onezero, is_transpose, op)
        k, mm, n = sv.shape[0], sv.shape[1], mv.shape[1]
        run = current_run()
        if run.options.trace:
            dtype = _dt.name(s.dtype)
            flops = 2 * k * mm * n
            # double-row packs two fp8 pairs per PE: the same cycles as one K=128 pass
            run.add(Instr(op, Engine.TENSOR, s.partitions, n, dtype, UNKNOWN_LOCATION,
                          flops=flops, stationary_free=mm))  # fmt: skip
        if dst is None and s_ok is None and m_ok is None and mask is None and not double:
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
        reduce_cmd: Any = None,
    ) -> Tensor:
        """``op(data * scale + bias)`` on ScalarE, optional add-reduce into ``reduce_res``.

        ``reduce_cmd`` idle (default) with ``reduce_res``: this instruction's sum is written
        (activation_reduce); other commands drive ScalarE's accumulator registers."""
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
        if _cmd_value(reduce_cmd) not in (None, 0):
            accumulate_registers(
                name, Engine.SCALAR, values, reduce_cmd, reduce_op or "add", reduce_res
            )
        elif reduce_res is not None:
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
        eng = pick_engine(engine, default_engine)
        out_dtype = dtype or _dt.promote(a.dtype, b.dtype)
        if (
            eng is Engine.GPSIMD
            and opname in _EXACT_INT
            and a.dtype.kind in "iu"
            and b.dtype.kind in "iu"
            and np.dtype(_dt.normalize(out_dtype)).kind in "iu"
        ):
            # 32-bit integer add/subtract/multiply are exact on GpSimd (nki-facts, ALU table),
            # not rounded through fp32 as on the other engines (a flat index past 2^24)
            da, oka = a.read()
            db, okb = b.read()
            exact = _EXACT_INT[opname](da.astype(np.int64), db.reshape(da.shape).astype(np.int64))
            valid = all_valid(oka, None if okb is None else okb.reshape(da.shape))
            _record(f"tensor_tensor[{opname}]", eng, a, tt_streams(opname, a, b))
            return emit(exact, valid, out_dtype, Buffer.SBUF, mask, dst)
        va, oka = f32(a)
        vb, okb = f32(b)
        with np.errstate(all="ignore"):
            values = np.asarray(fn(va, vb.reshape(va.shape)), dtype=np.float32)
        valid = all_valid(oka, None if okb is None else okb.reshape(va.shape))
        streams = tt_streams(opname, a, b)
        _record(f"tensor_tensor[{opname}]", eng, a, streams)
        return emit(values, valid, out_dtype, Buffer.SBUF, mask, dst)

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
        ops = [_bits_name(op) or _ops.resolve(op, name) for op in (op0, op1) if op is not None]
        bitvec = [op in _nl_int.BITVEC for op in ops]
        if any(bitvec):
            operands, reverse = (operand0, operand1), (reverse0, reverse1)
            return self._tensor_scalar_bits(t, ops, bitvec, operands, reverse, dtype, mask, dst,
                                            name)  # fmt: skip
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

    def _tensor_scalar_bits(
        self,
        t: Tensor,
        ops: list[str],
        bitvec: list[bool],
        operands: tuple[Any, Any],
        reverse: tuple[bool, bool],
        dtype: Any,
        mask: Any,
        dst: Tensor | None,
        name: str,
    ) -> Tensor:
        """Bit-vector ops (and, or, xor, shifts) on the raw integer bits, on VectorE (nki-facts
        §4 ALU table: both ops bitvec or both arithmetic, bitvec on integers only)."""
        if not all(bitvec):
            raise NkiConstraintError(
                "err_unsupported_operator",
                f"{name}: {ops[0]} and {ops[1]} mix a bit-vector and an arithmetic operator "
                "(both must be one kind)",
            )
        if t.dtype.kind not in "iu":
            raise NkiConstraintError(
                "err_unsupported_dtype",
                f"{name}: bit-vector operator {ops[0]} on {t.dtype} data (integers only)",
            )
        out_dtype = _dt.normalize(dtype) if dtype is not None else t.dtype
        width = 8 * np.dtype(out_dtype).itemsize
        vals, ok = t.read()
        x = flat(vals).astype(np.int64)
        valids = [None if ok is None else flat(ok)]
        for opname, operand, rev in zip(ops, operands, reverse, strict=False):
            per_partition(operand, t.partitions, name, "operand")  # its shape rules
            if isinstance(operand, Tensor):  # the raw bits, not through fp32
                raw, s_ok = operand.read()
                s = raw.astype(np.int64).reshape(-1, 1)
                valids.append(None if s_ok is None else s_ok.reshape(-1, 1))
            else:
                s = np.asarray(int(operand), dtype=np.int64)
            fn = _nl_int.INT_BINARY[opname]
            x = fn(s, x, width) if rev else fn(x, s, width)
        valid = all_valid(*valids)
        values = x.reshape(t.shape)
        valid = None if valid is None else np.broadcast_to(valid, x.shape).reshape(t.shape)
        _record(name, Engine.VECTOR, t)
        return emit(values, valid, out_dtype, Buffer.SBUF, mask, dst)

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
        kept = tuple(1 if i in axes else n for i, n in enumerate(t.shape))
        in_mask, mask = split_mask(mask, t.shape, kept)
        vals, ok = f32(t, None if in_mask is None else np.ascontiguousarray(in_mask))
        if in_mask is not None:  # masked-off inputs take the reduction's identity
            vals = np.where(in_mask, vals, np.float32(_REDUCE_IDENTITY.get(opname, 0.0)))
            ok = None if ok is None else ok | ~in_mask
        with np.errstate(all="ignore"):
            values = np.asarray(_ops.REDUCE[opname](vals, axis=axes, keepdims=keepdims), np.float32)
        values = -values if negate else values
        valid = None if ok is None else ok.all(axis=axes, keepdims=keepdims)
        if values.ndim < 2:
            values = values.reshape(t.partitions, -1)
            valid = None if valid is None else valid.reshape(values.shape)
        if mask is not None:
            mask = np.asarray(mask).reshape(kept) if keepdims else mask.reshape(values.shape)
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
        check_dst_dtype(name, dtype, dst)
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
        self,
        shape: Any,
        value: Any,
        dtype: Any,
        *,
        mask: Any = None,
        dst: Tensor | None = None,
        engine: Any = None,
    ) -> Tensor:
        """Fill a tile with a constant (VectorE, or GpSimd with ``engine=``)."""
        shape = tuple(dst.shape if dst is not None else shape)
        check_partitions(shape, 0, "nisa.memset")
        eng = pick_engine(engine, Engine.VECTOR)
        if eng not in (Engine.VECTOR, Engine.GPSIMD):
            raise NkiConstraintError(
                "err_invalid_operand", f"nisa.memset runs on vector or gpsimd, not {eng.value}"
            )
        values = np.full(shape, value, dtype=np.float32)
        _record("memset", eng, TileShape.of(shape, dtype or dst.dtype))
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

    def dma_copy(
        self,
        dst: Any,
        src: Any,
        *,
        mask: Any = None,
        dst_rmw_op: Any = None,
        oob_mode: Any = None,
        dge_mode: Any = None,
        name: str = "nisa.dma_copy",
    ) -> None:
        """DMA between HBM and SBUF (or SBUF↔SBUF); casts go through fp32.

        ``dst_rmw_op=np.add`` adds ``src`` to ``dst`` (read-modify-write; repeated destination
        indices all add up). ``oob_mode=skip`` drops elements whose indirect index falls
        outside the indexed tensor instead of raising. ``dge_mode`` is functionally a copy;
        ``hwdge`` is checked (trn2+, same dtypes)."""
        d = require_buffer(dst, name, "dst", ("hbm", "sbuf"))
        s = require_buffer(src, name, "src", ("hbm", "sbuf"))
        if d.size != s.size:
            raise NkiConstraintError(
                "err_shape_mismatch", f"{name}: dst has {d.size} elements, src {s.size}"
            )
        skip = _enum_value(oob_mode, 0) == 1
        mode = _enum_value(dge_mode, 3)
        if mode not in (0, 1, 2, 3):
            raise NkiConstraintError("err_invalid_operand", f"{name}: dge_mode={dge_mode!r}")
        if mode == 2:
            if current_run().options.target == "trn1":
                raise NkiConstraintError(
                    "err_invalid_operand", f"{name}: dge_mode=hwdge needs NeuronCore-v3 (trn2)"
                )
            if d.dtype != s.dtype:
                raise NkiConstraintError(
                    "err_unsupported_dtype", f"{name}: hwdge copies cannot cast ({s.dtype} to "
                    f"{d.dtype})",
                )  # fmt: skip
        m = _mask(mask, d.shape)
        if skip:
            if dst_rmw_op is not None:
                raise NkiConstraintError(
                    "err_invalid_operand", f"{name}: dst_rmw_op needs oob_mode=oob_mode.error"
                )
            live = in_bounds(d) & in_bounds(s).reshape(d.shape)
            m = live if m is None else m & live
        sm = None if m is None else np.ascontiguousarray(m.reshape(s.shape))
        data, ok = s.read(sm)
        if dst_rmw_op is not None:
            if _ops.resolve(dst_rmw_op, name) != "add":
                raise NkiConstraintError(
                    "err_unsupported_operator", f"{name}: dst_rmw_op supports only np.add"
                )
            rmw_add(d, _dt.to_f32(data).reshape(d.shape), ok, m)
            record_copy(s, d, m)
            return
        vals = data.reshape(d.shape) if data.dtype == d.dtype else _dt.to_f32(data).reshape(d.shape)
        d.write(vals, None if ok is None else ok.reshape(d.shape), m)
        record_copy(s, d, m)


_REDUCE_IDENTITY = {"add": 0.0, "maximum": -np.inf, "minimum": np.inf, "multiply": 1.0}


def dma_compute(
    dst: Any,
    srcs: Any,
    reduce_op: Any,
    *,
    scales: Any = None,
    unique_indices: bool = True,
    oob_mode: Any = None,
) -> None:
    """``dst = srcs[0]*scales[0] + srcs[1]*scales[1] + ...`` on the DMA engines (fp32 math).

    Only ``add`` with all scales 1.0 exists (API docs); with an indirect (vector_offset) view
    it is a scatter/gather read-modify-write, whose indices must be unique."""
    name = "nisa.dma_compute"
    d = require_buffer(dst, name, "dst", ("hbm", "sbuf"))
    sources = [require_buffer(t, name, f"srcs[{i}]", ("hbm", "sbuf")) for i, t in enumerate(srcs)]
    if not 1 <= len(sources) <= 16:
        raise NkiConstraintError("err_invalid_operand", f"{name}: 1 to 16 srcs, got {len(sources)}")
    if _ops.resolve(reduce_op, name) != "add":
        raise NkiConstraintError("err_unsupported_operator", f"{name}: reduce_op must be nl.add")
    factors = [1.0] * len(sources) if scales is None else [float(v) for v in scales]
    if len(factors) != len(sources) or any(v != 1.0 for v in factors):
        raise NkiConstraintError(
            "err_invalid_operand", f"{name}: scales must be one 1.0 per source, got {scales!r}"
        )
    if any(t.size != d.size for t in sources):
        raise NkiConstraintError(
            "err_shape_mismatch",
            f"{name}: dst has {d.size} elements, srcs {[t.size for t in sources]}",
        )
    indirect = d.advanced or any(t.advanced for t in sources)
    if indirect and not unique_indices:
        raise NkiConstraintError(
            "err_invalid_operand",
            f"{name}: unique_indices=False (repeated scatter indices) is not supported by the "
            "DMA read-modify-write",
        )
    m = None
    if _enum_value(oob_mode, 0) == 1:
        m = in_bounds(d)
        for t in sources:
            m = m & in_bounds(t).reshape(d.shape)
    if d.advanced:
        live = in_bounds(d) if m is None else m  # outside rows: an error when accessed
        flat_pos = np.ravel_multi_index(
            tuple(np.broadcast_to(np.asarray(k), d.shape)[live] for k in d.key),
            d.storage.data.shape,
        )
        ordered = np.sort(flat_pos)
        if (ordered[1:] == ordered[:-1]).any():
            raise NkiConstraintError(
                "err_invalid_operand", f"{name}: unique_indices=True but dst indices repeat"
            )
    total = np.zeros(d.shape, np.float32)
    valid = None
    for t in sources:
        vals, ok = t.read(None if m is None else np.ascontiguousarray(m.reshape(t.shape)))
        total = total + _dt.to_f32(vals).reshape(d.shape)
        valid = all_valid(valid, None if ok is None else ok.reshape(d.shape))
    d.write(total, valid, m)
    record_copy(sources[0], d, m)


def _cmd_value(value: Any) -> int | None:
    return None if value is None else int(getattr(value, "value", value))


def _enum_value(value: Any, default: int) -> int:
    """An NKI enum argument (either dialect's enum, or its int value); None is the default."""
    if value is None:
        return default
    return int(getattr(value, "value", value))


def in_bounds(t: Tensor) -> np.ndarray:
    """Elementwise: does this view's (possibly indirect) index fall inside its storage?"""
    if not t.advanced:
        return np.ones(t.shape, dtype=bool)
    shape = t.storage.data.shape
    ok = np.ones(t.shape, dtype=bool)
    for dim, k in enumerate(t.key):
        arr = np.broadcast_to(np.asarray(k), t.shape)
        ok &= (arr >= 0) & (arr < shape[dim])
    return ok


def rmw_add(d: Tensor, vals: np.ndarray, ok: np.ndarray | None, m: np.ndarray | None) -> None:
    """``d += vals`` where ``m`` holds, summing every contribution to a repeated index."""
    if d.advanced:
        live = np.ones(d.shape, bool) if m is None else m
        idx = tuple(np.broadcast_to(np.asarray(k), d.shape)[live] for k in d.key)
        shape = d.storage.data.shape
        for dim, arr in enumerate(idx):
            if arr.size and (arr.min() < 0 or arr.max() >= shape[dim]):
                bad = int(arr.max()) if arr.max() >= shape[dim] else int(arr.min())
                raise NkiIndexError(
                    f"index {bad} is outside axis {dim} of size {shape[dim]} (tensor shape {shape})"
                )
        flat_pos = np.ravel_multi_index(idx, shape)
        unique, inverse = np.unique(flat_pos, return_inverse=True)
        sums = np.bincount(inverse, weights=vals[live].astype(np.float64), minlength=unique.size)
        target = Tensor(d.storage, np.unravel_index(unique, shape))
        old, old_ok = target.read()
        src_ok = None
        if ok is not None:
            bad = np.bincount(inverse, weights=~ok.reshape(d.shape)[live], minlength=unique.size)
            src_ok = bad == 0
        new = _dt.to_f32(old) + sums.astype(np.float32)
        target.write(new, all_valid(old_ok, src_ok))
        return
    old, old_ok = f32(d)
    valid = all_valid(old_ok, None if ok is None else ok.reshape(d.shape))
    d.write(old + vals, valid, m)


engine = IsaEngine()
