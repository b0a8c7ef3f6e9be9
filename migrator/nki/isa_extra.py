"""Statistics and scan instructions of ``IsaEngine`` (bn_stats/bn_aggr, scans, partition reduce).

Kept apart from isa.py so each module stays small; ``IsaEngine`` inherits these methods.
Semantics: nki-facts §4 table and "NumPy equivalents".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes as _dt
from . import ops as _ops
from .checks import require_on_chip
from .errors import NkiConstraintError
from .isa_common import TileShape, all_valid, emit, f32, flat, per_partition
from .language import _fit, split_mask
from .run import record_tile as _record
from .tensor import Buffer, Tensor
from .trace import Engine


class StatsScanInstructions:
    """Mixin: one method per instruction, same conventions as ``IsaEngine``."""

    def bn_stats(
        self, data: Any, *, dtype: Any = None, mask: Any = None, dst: Tensor | None = None
    ) -> Tensor:
        """Per partition (count, mean, var·count) of even- and odd-indexed elements (F ≤ 512)."""
        t = require_on_chip(data, "nisa.bn_stats", "data")
        in_mask, mask = split_mask(mask, t.shape, (t.partitions, 6))
        # masked-off inputs are not accessed (they may lie outside the tile)
        raw, ok = t.read(None if in_mask is None else np.ascontiguousarray(in_mask))
        x = flat(_dt.to_f32(raw))
        if x.shape[1] > 512:
            raise NkiConstraintError(
                "err_size_of_dimension_exceed_arch_limit",
                f"nisa.bn_stats: free size {x.shape[1]} exceeds bn_stats_fmax=512; split it",
            )
        keep = np.ones(x.shape, bool) if in_mask is None else flat(in_mask)
        cols = []
        for half, use in ((x[:, 0::2], keep[:, 0::2]), (x[:, 1::2], keep[:, 1::2])):
            n = use.sum(axis=1).astype(np.float64)
            total = np.where(use, half, 0.0).sum(axis=1, dtype=np.float64)
            mean = np.divide(total, n, out=np.zeros_like(total), where=n > 0)
            m2 = np.where(use, (half - mean[:, None]) ** 2, 0.0).sum(axis=1)
            cols += [n, mean, m2]
        values = np.stack(cols, axis=1).astype(np.float32)
        used_ok = None if ok is None else flat(ok) | ~keep
        valid = None if ok is None else np.repeat(used_ok.all(axis=1, keepdims=True), 6, axis=1)
        _record("bn_stats", Engine.VECTOR, t)
        return emit(values, valid, dtype or _dt.float32, Buffer.SBUF, mask, dst)

    def tensor_scalar_reduce(
        self,
        data: Any,
        op0: Any,
        operand0: Any,
        reduce_op: Any,
        reduce_res: Tensor,
        *,
        reverse0: bool = False,
        dtype: Any = None,
        mask: Any = None,
        dst: Tensor | None = None,
    ) -> Tensor:
        """``data op0 operand0`` (VectorE) and its reduction over all free axes into ``reduce_res``.

        Cost ``max(MIN_II, N) + MIN_II`` (the reduce readout is traced as a second instruction).
        """
        name = "nisa.tensor_scalar_reduce"
        red_name = _ops.resolve(reduce_op, name)
        if red_name not in _ops.REDUCE and red_name != "subtract":
            raise NkiConstraintError(
                "err_unsupported_operator", f"{name}: cannot reduce with {red_name}"
            )
        out = self.tensor_scalar(  # type: ignore[attr-defined]
            data, op0, operand0, reverse0, dtype=dtype, mask=mask, dst=dst, name=name
        )
        t = require_on_chip(data, name, "data")
        vals, ok = f32(out)
        x = flat(vals)
        if red_name == "subtract":  # a[0] - a[1] - ... (nki-facts §4 legal reduction ops)
            red = x[:, :1] - x[:, 1:].sum(axis=1, keepdims=True)
        else:
            red = _ops.REDUCE[red_name](x, axis=1, keepdims=True)
        red_ok = None if ok is None else flat(ok).all(axis=1, keepdims=True)
        vals_r, ok_r = _fit(red.astype(np.float32), red_ok, reduce_res.shape)
        reduce_res.write(vals_r, ok_r)
        _record(
            "tensor_scalar_reduce[readout]", Engine.VECTOR, TileShape(t.partitions, 1, _dt.float32)
        )
        return out

    def dma_transpose(
        self,
        src: Any,
        *,
        axes: Any = None,
        mask: Any = None,
        dst: Tensor | None = None,
        dtype: Any = None,
    ) -> Tensor:
        """2-D transpose performed by the DMA engines (trn2+), bit-exact; result in SBUF."""
        from .dma import record_copy

        if not isinstance(src, Tensor):
            raise NkiConstraintError(
                "err_invalid_operand", "nisa.dma_transpose: src must be a tensor"
            )
        data, ok = src.read()
        if axes is None or tuple(axes) == (1, 0):
            values = flat(data).T
            valid = None if ok is None else flat(ok).T
        else:
            perm = tuple(int(a) for a in axes)
            if sorted(perm) != list(range(src.ndim)):
                raise NkiConstraintError(
                    "err_invalid_operand",
                    f"nisa.dma_transpose: axes {perm} is not a permutation of the {src.ndim} "
                    f"axes of src {src.shape}",
                )
            values = np.transpose(data, perm)
            valid = None if ok is None else np.transpose(ok, perm)
        if dtype is not None and _dt.normalize(dtype) != src.dtype:
            values = _dt.to_f32(values)  # a DMA cast goes through fp32
        out = emit(values, valid, dtype or src.dtype, Buffer.SBUF, mask, dst)
        record_copy(src, out, None)
        return out

    def bn_aggr(
        self, data: Any, *, dtype: Any = None, mask: Any = None, dst: Tensor | None = None
    ) -> Tensor:
        """Combine k×(count, mean, M2) groups into (mean, population variance)."""
        t = require_on_chip(data, "nisa.bn_aggr", "data")
        vals, ok = f32(t)
        g = flat(vals).astype(np.float64).reshape(vals.shape[0], -1, 3)
        n, mean, m2 = g[..., 0], g[..., 1], g[..., 2]
        total = n.sum(axis=1)
        mu = (n * mean).sum(axis=1) / total
        var = (m2 + n * (mean - mu[:, None]) ** 2).sum(axis=1) / total
        values = np.stack([mu, var], axis=1).astype(np.float32)
        valid = None if ok is None else np.repeat(flat(ok).all(axis=1, keepdims=True), 2, axis=1)
        _record("bn_aggr", Engine.VECTOR, t)
        return emit(values, valid, dtype or _dt.float32, Buffer.SBUF, mask, dst)

    def tensor_tensor_scan(
        self,
        data0: Any,
        data1: Any,
        initial: Any,
        op0: Any,
        op1: Any,
        *,
        reverse0: bool = False,
        reverse1: bool = False,
        dtype: Any = None,
        mask: Any = None,
        dst: Tensor | None = None,
    ) -> Tensor:
        """Per partition ``r[i] = op1(op0(data0[i], r[i-1]), data1[i])``, ``r[-1] = initial``;
        ``reverse0``/``reverse1`` swap the operands of op0/op1.

        A loop over free positions, each step vectorised over all partitions.
        """
        name = "nisa.tensor_tensor_scan"
        f0, f1 = _ops.BINARY[_ops.resolve(op0, name)][0], _ops.BINARY[_ops.resolve(op1, name)][0]
        a = require_on_chip(data0, name, "data0")
        b = require_on_chip(data1, name, "data1")
        va, oka = f32(a)
        vb, okb = f32(b)
        x, y = flat(va), flat(vb).reshape(flat(va).shape)
        carry, ok_init = per_partition(initial, a.partitions, name, "initial")
        carry = np.broadcast_to(carry, (x.shape[0], 1))[:, 0].astype(np.float32)
        out = np.empty_like(x)
        with np.errstate(all="ignore"):
            for i in range(x.shape[1]):
                t = f0(carry, x[:, i]) if reverse0 else f0(x[:, i], carry)
                carry = np.asarray(f1(y[:, i], t) if reverse1 else f1(t, y[:, i]), np.float32)
                out[:, i] = carry
        valid = all_valid(
            None if oka is None else flat(oka), None if okb is None else flat(okb).reshape(x.shape)
        )
        if valid is not None:
            # a poisoned element poisons every later element of its partition
            valid = np.logical_and.accumulate(valid, axis=1)
        if ok_init is not None:
            valid = all_valid(valid, np.broadcast_to(ok_init, x.shape))
        _record(name, Engine.VECTOR, a, streams=2)
        values = out.reshape(a.shape)
        valid = None if valid is None else valid.reshape(a.shape)
        return emit(values, valid, dtype or a.dtype, Buffer.SBUF, mask, dst)

    def scalar_tensor_tensor(
        self,
        data: Any,
        op0: Any,
        operand0: Any,
        op1: Any,
        operand1: Any,
        *,
        reverse0: bool = False,
        reverse1: bool = False,
        dtype: Any = None,
        mask: Any = None,
        dst: Tensor | None = None,
    ) -> Tensor:
        """``(data op0 operand0) op1 operand1``: operand0 scalar or (P, 1), operand1 a tile;
        ``reverse0``/``reverse1`` swap the operands of op0/op1."""
        name = "nisa.scalar_tensor_tensor"
        f0, f1 = _ops.BINARY[_ops.resolve(op0, name)][0], _ops.BINARY[_ops.resolve(op1, name)][0]
        t = require_on_chip(data, name, "data")
        other = require_on_chip(operand1, name, "operand1")
        if other.size != t.size:
            raise NkiConstraintError(
                "err_shape_mismatch", f"{name}: operand1 {other.shape} must match data {t.shape}"
            )
        vals, ok = f32(t)
        s, s_ok = per_partition(operand0, t.partitions, name, "operand0")
        vo, oko = f32(other)
        with np.errstate(all="ignore"):
            x = np.asarray(f0(s, flat(vals)) if reverse0 else f0(flat(vals), s), np.float32)
            other_v = flat(vo).reshape(x.shape)
            x = np.asarray(f1(other_v, x) if reverse1 else f1(x, other_v), dtype=np.float32)
        valid = all_valid(
            None if ok is None else flat(ok),
            s_ok,
            None if oko is None else flat(oko).reshape(x.shape),
        )
        valid = None if valid is None else np.broadcast_to(valid, x.shape).reshape(t.shape)
        _record(name, Engine.VECTOR, t, streams=2)
        return emit(x.reshape(t.shape), valid, dtype or t.dtype, Buffer.SBUF, mask, dst)

    def tensor_partition_reduce(
        self, op: Any, data: Any, *, dtype: Any = None, mask: Any = None, dst: Tensor | None = None
    ) -> Tensor:
        """Reduce across partitions on GpSimd: (P, F) → (1, F)."""
        name = "nisa.tensor_partition_reduce"
        opname = _ops.resolve(op, name)
        if opname not in _ops.REDUCE:
            raise NkiConstraintError(
                "err_unsupported_operator", f"{name}: cannot reduce with {opname}"
            )
        t = require_on_chip(data, name, "data")
        vals, ok = f32(t)
        values = np.asarray(_ops.REDUCE[opname](vals, axis=0, keepdims=True), np.float32)
        valid = None if ok is None else ok.all(axis=0, keepdims=True)
        _record(name, Engine.GPSIMD, t)
        return emit(values, valid, dtype or t.dtype, Buffer.SBUF, mask, dst)
