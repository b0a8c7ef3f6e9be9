"""Selection, top-8, gather, shuffle and random instructions of ``IsaEngine``.

Kept apart from isa.py so each module stays small; ``IsaEngine`` inherits these methods.
Semantics from the public ``nki.isa`` API documentation (aws-neuron-sdk v2.26.0,
``general/nki/api/nki/isa``; nki-facts §4): every instruction works on whole tiles with numpy
(the top-8 family loops over its eight values, never over elements).

Engine accumulator registers (``reduce_cmd``) are modelled per run and engine: ``reset``
sets them to the reduction's identity, ``reset_reduce`` resets then accumulates this
instruction's free-axis reduction, ``reduce`` accumulates onto them, ``idle`` leaves them; a
given ``reduce_res`` receives the registers after the instruction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes as _dt
from . import ops as _ops
from .checks import check_same_partitions, require_buffer, require_on_chip
from .errors import NkiConstraintError, NkiIndexError
from .isa_common import TileShape, all_valid, emit, f32, flat, per_partition, reduce_cmd
from .isa_common import reduce_cmd as reduce_cmd_enum
from .language import _fit, _mask
from .run import Run, current_run
from .run import record_tile as _record
from .tensor import Buffer, Tensor
from .trace import Engine

_IDENTITY = {"maximum": -np.inf, "minimum": np.inf, "add": 0.0}
_ACC = {"maximum": np.maximum, "minimum": np.minimum, "add": np.add}


def _cmd(value: Any, name: str) -> reduce_cmd:
    """A ``reduce_cmd`` given as the enum (either dialect's) or its integer value."""
    try:
        return reduce_cmd(int(getattr(value, "value", value)))
    except (TypeError, ValueError):
        raise NkiConstraintError(
            "err_invalid_operand", f"{name}: reduce_cmd={value!r} is not a nisa.reduce_cmd"
        ) from None


def accumulate_registers(
    name: str,
    engine: Engine,
    values: np.ndarray,
    cmd: Any,
    reduce_op: Any,
    reduce_res: Tensor | None,
    rows_ok: np.ndarray | None = None,
) -> None:
    """Apply ``reduce_cmd`` to the engine's accumulator registers and write ``reduce_res``
    (``rows_ok``: (P, 1), partitions whose reduction is defined; None: all)."""
    command = _cmd(cmd, name)
    opname = _ops.resolve(reduce_op, name)
    if opname not in _ACC:
        raise NkiConstraintError(
            "err_unsupported_operator", f"{name}: reduce_op must be max, min or add, got {opname}"
        )
    if command is reduce_cmd.idle and reduce_res is None:
        return
    parts = values.shape[0]
    regs = current_run().registers
    acc = regs.get(engine)
    if acc is None or acc.shape[0] != parts:
        acc = np.full(parts, _IDENTITY[opname], dtype=np.float32)
    if command in (reduce_cmd.reset, reduce_cmd.reset_reduce):
        acc = np.full(parts, _IDENTITY[opname], dtype=np.float32)
    if command in (reduce_cmd.reduce, reduce_cmd.reset_reduce):
        with np.errstate(all="ignore"):
            part = _ops.REDUCE[opname](flat(values), axis=1).astype(np.float32)
        acc = _ACC[opname](acc, part).astype(np.float32)
    regs[engine] = acc
    if reduce_res is not None:
        ok = None if rows_ok is None else np.asarray(rows_ok, dtype=bool).reshape(parts, 1)
        out, ok = _fit(acc.reshape(parts, 1), ok, reduce_res.shape)
        reduce_res.write(out, ok)
        _record(f"{name}[readout]", engine, TileShape(parts, 1, _dt.float32))


def _predicate(pred: Tensor, shape: tuple[int, ...], name: str) -> np.ndarray:
    """A predicate tile as booleans (any non-zero value is true)."""
    p = require_on_chip(pred, name, "predicate")
    data, ok = p.read()
    if ok is not None:
        raise NkiConstraintError(
            "err_uninitialized_index", f"{name}: the predicate tile holds uninitialised elements"
        )
    if data.size != int(np.prod(shape)):
        raise NkiConstraintError(
            "err_shape_mismatch", f"{name}: predicate {p.shape} does not match data {shape}"
        )
    return (np.asarray(data) != 0).reshape(shape)


def _rng(run: Run) -> np.random.Generator:
    """The run's random generator (seeded by EmulatorOptions.seed or nl.random_seed)."""
    if run.rng is None:
        run.rng = np.random.default_rng(run.options.seed)
    return run.rng


def seed_random(seed: Any) -> None:
    """``nl.random_seed``: reseed the run's generator (deterministic sequences per seed)."""
    run = current_run()
    if isinstance(seed, Tensor):
        data, _ = seed.read()
        seed = int(np.asarray(data).reshape(-1)[0])
    run.rng = np.random.default_rng(int(seed))


def random_uniform(shape: tuple[int, ...]) -> np.ndarray:
    """Uniform [0, 1) fp32 values from the run's generator."""
    return _rng(current_run()).random(shape, dtype=np.float32)


class SelectInstructions:
    """Mixin: one method per instruction, same conventions as ``IsaEngine``."""

    def tensor_copy_predicated(
        self,
        src: Any,
        dst: Tensor,
        predicate: Any,
        *,
        reverse_pred: bool = False,
        mask: Any = None,
        dtype: Any = None,
    ) -> Tensor:
        """``dst = where(predicate, src, dst)`` on VectorE (``reverse_pred`` negates)."""
        name = "nisa.tensor_copy_predicated"
        d = require_on_chip(dst, name, "dst")
        s = require_on_chip(src, name, "src")
        check_same_partitions(name, s, d)
        if s.size != d.size:
            raise NkiConstraintError(
                "err_shape_mismatch", f"{name}: src {s.shape} and dst {d.shape} differ in size"
            )
        pred = _predicate(predicate, d.shape, name)
        if reverse_pred:
            pred = ~pred
        vs, oks = s.read()
        vals = vs.reshape(d.shape) if vs.dtype == d.dtype else _dt.to_f32(vs).reshape(d.shape)
        if dtype is not None and _dt.normalize(dtype) != d.dtype:
            vals = _dt.cast(_dt.to_f32(vals), _dt.normalize(dtype))
        user = _mask(mask, d.shape)
        where = pred if user is None else pred & user
        d.write(vals, None if oks is None else oks.reshape(d.shape), where)
        _record(name, Engine.VECTOR, d, streams=2)
        return d

    def dropout(self, data: Any, prob: Any, *, mask: Any = None, dtype: Any = None) -> Tensor:
        """Zero each element with probability ``prob`` (scalar or (P, 1)); VectorE.

        Values are drawn from the run's generator (``EmulatorOptions.seed``,
        ``nl.random_seed``), so a run is reproducible; kept elements are not rescaled."""
        name = "nisa.dropout"
        t = require_on_chip(data, name, "data")
        vals, ok = f32(t)
        p, p_ok = per_partition(prob, t.partitions, name, "prob")
        x = flat(vals)
        drop = random_uniform(x.shape) < p
        values = np.where(drop, np.float32(0.0), x).reshape(t.shape)
        valid = all_valid(None if ok is None else flat(ok), p_ok)
        valid = None if valid is None else np.broadcast_to(valid, x.shape).reshape(t.shape)
        _record(name, Engine.VECTOR, t)
        return emit(values, valid, dtype or t.dtype, Buffer.SBUF, mask, None)

    def max8(self, src: Any, *, mask: Any = None, dtype: Any = None) -> Tensor:
        """The 8 largest values of each partition, descending, as a (P, 8) tile."""
        name = "nisa.max8"
        t = require_on_chip(src, name, "src")
        in_mask = _mask(mask, t.shape)  # the mask predicates the values read
        raw, ok = t.read(None if in_mask is None else np.ascontiguousarray(in_mask))
        x = flat(_dt.to_f32(raw))
        _check_top8_size(x.shape[1], name)
        if in_mask is not None:
            x = np.where(flat(in_mask), x, -np.inf)
        top = -np.sort(-x, axis=1)[:, :8]
        valid = None if ok is None else np.repeat(flat(ok).all(axis=1, keepdims=True), 8, 1)
        _record(name, Engine.VECTOR, t)
        return emit(top.astype(np.float32), valid, dtype or t.dtype, Buffer.SBUF, None, None)

    def nc_find_index8(
        self, data: Any, vals: Any, *, mask: Any = None, dtype: Any = None
    ) -> Tensor:
        """Index of the first occurrence of each of 8 values per partition ((P, 8), uint32).

        A value not present is undefined on hardware: its index is left uninitialised."""
        name = "nisa.nc_find_index8"
        t = require_on_chip(data, name, "data")
        v = require_on_chip(vals, name, "vals")
        check_same_partitions(name, t, v)
        in_mask = _mask(mask, t.shape)  # "a mask is applied only to the data tensor"
        raw, ok = t.read(None if in_mask is None else np.ascontiguousarray(in_mask))
        x = flat(_dt.to_f32(raw))
        _check_top8_size(x.shape[1], name)
        want, want_ok = f32(v)
        want = flat(want)
        if want.shape[1] != 8:
            raise NkiConstraintError(
                "err_shape_mismatch", f"{name}: vals must hold 8 values per partition"
            )
        hits = x[:, None, :] == want[:, :, None]  # (P, 8, N)
        if in_mask is not None:
            hits &= flat(in_mask)[:, None, :]
        found = hits.any(axis=2)
        index = hits.argmax(axis=2)
        out_dt = _dt.normalize(dtype) if dtype is not None else _dt.uint32
        if out_dt not in (_dt.uint32, _dt.uint16):
            raise NkiConstraintError("err_unsupported_dtype", f"{name}: dtype must be uint16/32")
        valid = all_valid(
            None if found.all() else found,
            None if ok is None else np.repeat(flat(ok).all(axis=1, keepdims=True), 8, 1),
            None if want_ok is None else flat(want_ok),
        )
        _record(name, Engine.VECTOR, t)
        return emit(index.astype(np.float32), valid, out_dt, Buffer.SBUF, None, None)

    def nc_match_replace8(
        self,
        data: Any,
        vals: Any,
        imm: Any,
        *,
        dst_idx: Tensor | None = None,
        mask: Any = None,
        dtype: Any = None,
        dst: Tensor | None = None,
    ) -> Tensor:
        """Replace the first occurrence of each of 8 values with ``imm``; optional indices.

        Values are matched in order, each against the data as already replaced, so equal
        values replace successive occurrences. ``mask`` applies to ``data``."""
        name = "nisa.nc_match_replace8"
        t = require_on_chip(data, name, "data")
        v = require_on_chip(vals, name, "vals")
        check_same_partitions(name, t, v)
        m = _mask(mask, t.shape)
        x, ok = f32(t)
        x = flat(x).copy()
        if x.shape[1] > 16384:
            raise NkiConstraintError(
                "err_size_of_dimension_exceed_arch_limit",
                f"{name}: data has {x.shape[1]} elements per partition (at most 16384)",
            )
        want, _ = f32(v)
        want = flat(want)
        if want.shape[1] != 8:
            raise NkiConstraintError(
                "err_shape_mismatch", f"{name}: vals must hold 8 values per partition"
            )
        live = np.ones(x.shape, bool) if m is None else flat(m).copy()
        rows = np.arange(x.shape[0])
        index = np.zeros(want.shape, dtype=np.float32)
        found = np.ones(want.shape, dtype=bool)
        for j in range(8):  # eight values, each matched over whole tiles
            hits = (x == want[:, j : j + 1]) & live
            first = hits.argmax(axis=1)
            hit = hits[rows, first]
            x[rows[hit], first[hit]] = np.float32(imm)
            live[rows[hit], first[hit]] = False
            index[:, j] = first
            found[:, j] = hit
        if dst_idx is not None:
            require_on_chip(dst_idx, name, "dst_idx")
            vals_i, ok_i = _fit(index, None if found.all() else found, dst_idx.shape)
            dst_idx.write(vals_i, ok_i)
        _record(name, Engine.VECTOR, t)
        values = x.reshape(t.shape)
        valid = None if ok is None else ok
        return emit(values, valid, dtype or t.dtype, Buffer.SBUF, m, dst)

    def nc_stream_shuffle(
        self, src: Any, dst: Tensor, shuffle_mask: Any, *, dtype: Any = None, mask: Any = None
    ) -> Tensor:
        """Within each 32-partition quadrant: ``dst[i] = src[shuffle_mask[i]]`` (255: keep)."""
        name = "nisa.nc_stream_shuffle"
        s = require_on_chip(src, name, "src")
        d = require_on_chip(dst, name, "dst")
        order = [int(getattr(i, "value", i)) for i in shuffle_mask]
        if len(order) != 32 or any(not (0 <= i < 32 or i == 255) for i in order):
            raise NkiConstraintError(
                "err_invalid_operand",
                f"{name}: shuffle_mask must be 32 entries in 0..31 or 255, got {order}",
            )
        if s.free_size != d.free_size:
            raise NkiConstraintError(
                "err_shape_mismatch",
                f"{name}: src and dst need the same elements per partition "
                f"({s.free_size} vs {d.free_size})",
            )
        out_dt = _dt.normalize(dtype) if dtype is not None else d.dtype
        if s.dtype != d.dtype or out_dt != d.dtype:
            raise NkiConstraintError("err_unsupported_dtype", f"{name}: dst dtype must equal src")
        data, ok = s.read()
        data = flat(data)
        parts = np.arange(d.partitions)
        pick = np.asarray(order)[parts % 32]
        keep = pick == 255
        rows = (parts // 32) * 32 + np.where(keep, 0, pick)
        if rows[~keep].size and rows[~keep].max() >= s.partitions:
            raise NkiIndexError(
                f"{name}: shuffle_mask reads partition {int(rows[~keep].max())} of a "
                f"{s.partitions}-partition src",
            )
        rows = np.where(keep, 0, rows)
        vals = data[rows].reshape(d.shape)
        valid = None if ok is None else flat(ok)[rows].reshape(d.shape)
        where = np.broadcast_to(~keep.reshape((-1,) + (1,) * (d.ndim - 1)), d.shape)
        user = _mask(mask, d.shape)
        where = where if user is None else where & user
        d.write(vals, valid, None if where.all() else where)
        _record(name, Engine.VECTOR, d)
        return d

    def select_values_reduce(
        self,
        name: str,
        pred: np.ndarray,
        on_true: Tensor,
        on_false: Any,
        *,
        reduce_cmd: Any,
        reduce_res: Tensor | None,
        reduce_op: Any,
        dtype: Any,
        mask: Any,
        dst: Tensor | None,
        streams: int = 2,
        rows_ok: np.ndarray | None = None,
    ) -> Tensor:
        """``where(pred, on_true, on_false)`` plus accumulator-register reduction (VectorE).
        ``streams``: full tiles the instruction reads (the predicate counts where it is one)."""
        check_dst_dtype(name, dtype, dst)
        vals, ok = f32(on_true)
        x = flat(vals)
        if isinstance(on_false, Tensor):
            require_on_chip(on_false, name, "on_false")
            if on_false.size == on_true.size:
                fv, fok = f32(on_false)
                fv, fok = flat(fv).reshape(x.shape), None if fok is None else flat(fok)
            else:
                fv, fok = per_partition(on_false, on_true.partitions, name, "on_false")
        else:
            fv, fok = np.float32(on_false), None
        p = flat(pred.reshape(on_true.shape))
        values = np.where(p, x, fv).astype(np.float32)
        valid = all_valid(None if ok is None else flat(ok), fok, rows_ok)
        valid = None if valid is None else np.broadcast_to(valid, x.shape)
        _record(name, Engine.VECTOR, on_true, streams=streams)
        accumulate_registers(
            name, Engine.VECTOR, values, reduce_cmd, reduce_op, reduce_res, rows_ok=rows_ok
        )
        values = values.reshape(on_true.shape)
        valid = None if valid is None else valid.reshape(on_true.shape)
        return emit(values, valid, dtype or on_true.dtype, Buffer.SBUF, mask, dst)

    def select_reduce(
        self,
        dst: Tensor,
        predicate: Any,
        on_true: Any,
        on_false: Any,
        *,
        reduce_res: Tensor | None = None,
        reduce_cmd: Any = reduce_cmd.idle,
        reduce_op: Any = np.amax,
        reverse_pred: bool = False,
        mask: Any = None,
        dtype: Any = None,
    ) -> Tensor:
        """``dst = where(predicate, on_true, on_false)`` with an optional max-reduction."""
        name = "nisa.select_reduce"
        t = require_on_chip(on_true, name, "on_true")
        require_on_chip(dst, name, "dst")
        pred = _predicate(predicate, t.shape, name)
        if reverse_pred:
            pred = ~pred
        return self.select_values_reduce(
            name, pred, t, on_false, reduce_cmd=reduce_cmd, reduce_res=reduce_res,
            reduce_op=reduce_op, dtype=dtype, mask=mask, dst=dst,
        )  # fmt: skip

    def range_select(
        self,
        on_true_tile: Any,
        comp_op0: Any,
        comp_op1: Any,
        bound0: Any,
        bound1: Any,
        *,
        reduce_cmd: Any = reduce_cmd.idle,
        reduce_res: Tensor | None = None,
        reduce_op: Any = np.amax,
        range_start: Any = 0,
        on_false_value: Any = None,
        mask: Any = None,
        dtype: Any = None,
        dst: Tensor | None = None,
    ) -> Tensor:
        """Keep elements whose free index ``range_start + f`` satisfies both comparisons
        with the per-partition bounds, else ``on_false_value``; optional reduction."""
        name = "nisa.range_select"
        if current_run().options.target == "trn1":  # nki-facts §4: trn2 and newer only
            raise NkiConstraintError(
                "err_invalid_operand", f"{name} needs NeuronCore-v3 (trn2); not on trn1"
            )
        t = require_on_chip(on_true_tile, name, "on_true_tile")
        c0 = _ops.BINARY[_ops.resolve(comp_op0, name)][0]
        c1 = _ops.BINARY[_ops.resolve(comp_op1, name)][0]
        b0, b0_ok = per_partition(bound0, t.partitions, name, "bound0")
        b1, b1_ok = per_partition(bound1, t.partitions, name, "bound1")
        # a partition whose bound is undefined (a row past the end) selects nothing defined:
        # its elements and its reduction are undefined, as an activation's undefined bias makes
        # them, and any read of them is caught where it happens
        bounds_ok = all_valid(b0_ok, b1_ok)
        index = np.float32(range_start) + np.arange(t.free_size, dtype=np.float32)[None, :]
        pred = c0(index, b0) & c1(index, b1)
        pred = np.broadcast_to(pred, (t.partitions, t.free_size))
        off = float(np.finfo(np.float32).min) if on_false_value is None else on_false_value
        # one tile streams in: the predicate is the engine's own index compare, not a tile
        return self.select_values_reduce(
            name, pred, t, off, reduce_cmd=reduce_cmd, reduce_res=reduce_res,
            reduce_op=reduce_op, dtype=dtype, mask=mask, dst=dst, streams=1, rows_ok=bounds_ok,
        )  # fmt: skip

    def local_gather(
        self,
        src_buffer: Any,
        index: Any,
        num_elem_per_idx: int = 1,
        num_valid_indices: int | None = None,
        *,
        mask: Any = None,
        dst: Tensor | None = None,
    ) -> Tensor:
        """GpSimd gather inside each 16-partition core group.

        Each group flattens its 16 partitions of ``index`` partition-first, keeps the first
        ``num_valid_indices`` and reads ``num_elem_per_idx`` contiguous elements at each
        index from every partition of the group (flattened free axes)."""
        name = "nisa.local_gather"
        s = require_buffer(src_buffer, name, "src_buffer", ("sbuf",))
        ix = require_buffer(index, name, "index", ("sbuf",))
        p = s.partitions
        if ix.partitions != p or p % 16:
            raise NkiConstraintError(
                "err_num_partition_mismatch",
                f"{name}: src_buffer and index need the same partition count, a multiple of 16 "
                f"(got {p} and {ix.partitions})",
            )
        if num_elem_per_idx not in (1, 2, 4, 8, 16, 32):
            raise NkiConstraintError(
                "err_invalid_operand",
                f"{name}: num_elem_per_idx must be 1, 2, 4, 8, 16 or 32, not {num_elem_per_idx}",
            )
        if ix.dtype != _dt.uint16:
            raise NkiConstraintError("err_unsupported_dtype", f"{name}: index must be uint16")
        raw_idx, ok_idx = ix.read()
        if ok_idx is not None:
            raise NkiConstraintError(
                "err_uninitialized_index", f"{name}: the index tile holds uninitialised elements"
            )
        groups = p // 16
        per_group = flat(np.asarray(raw_idx, dtype=np.int64)).reshape(groups, 16, -1)
        per_group = per_group.transpose(0, 2, 1).reshape(groups, -1)  # partition-first
        count = per_group.shape[1] if num_valid_indices is None else int(num_valid_indices)
        if not 0 < count <= min(per_group.shape[1], 4096):
            raise NkiConstraintError(
                "err_invalid_operand",
                f"{name}: num_valid_indices={count} must be in 1..{min(per_group.shape[1], 4096)}",
            )
        offsets = per_group[:, :count, None] + np.arange(num_elem_per_idx)  # (G, count, k)
        data, ok = s.read()
        x = flat(data)
        if offsets.size and (offsets.min() < 0 or offsets.max() >= x.shape[1]):
            raise NkiIndexError(
                f"{name}: an index reads element {int(offsets.max())} of a partition holding "
                f"{x.shape[1]}",
            )
        cols = np.repeat(offsets.reshape(groups, -1), 16, axis=0)  # (P, count*k)
        values = np.take_along_axis(x, cols, axis=1)
        valid = None if ok is None else np.take_along_axis(flat(ok), cols, axis=1)
        _record(name, Engine.GPSIMD, TileShape(p, values.shape[1], s.dtype))
        if dst is None:
            return Tensor.from_values(
                values, valid, s.dtype, Buffer.SBUF, _mask(mask, values.shape)
            )
        return emit(values, valid, s.dtype, Buffer.SBUF, mask, dst)

    def sequence_bounds(self, segment_ids: Any, *, dtype: Any = None, dst: Tensor | None = None):
        """Per element, the [start, end) of its run of equal segment ids along the free axis;
        padding id 0 gives [n, -1]. Output (P, 2, n); GpSimd."""
        name = "nisa.sequence_bounds"
        t = require_on_chip(segment_ids, name, "segment_ids")
        vals, ok = f32(t)
        x = flat(vals)
        n = x.shape[1]
        pos = np.arange(n)
        first = np.ones(x.shape, bool)
        first[:, 1:] = x[:, 1:] != x[:, :-1]
        last = np.ones(x.shape, bool)
        last[:, :-1] = x[:, :-1] != x[:, 1:]
        start = np.maximum.accumulate(np.where(first, pos, 0), axis=1)
        end = np.minimum.accumulate(np.where(last, pos + 1, n)[:, ::-1], axis=1)[:, ::-1]
        pad = x == 0
        start = np.where(pad, n, start)
        end = np.where(pad, -1, end)
        values = np.stack([start, end], axis=1).astype(np.float32)  # (P, 2, n)
        valid = None if ok is None else np.repeat(flat(ok)[:, None, :], 2, axis=1)
        _record(name, Engine.GPSIMD, t)
        return emit(values, valid, dtype or t.dtype, Buffer.SBUF, None, dst)

    def gather_flattened(
        self, data: Any, indices: Any, *, mask: Any = None, dtype: Any = None
    ) -> Tensor:
        """Per partition ``take_along_axis`` over the flattened free axes (GpSimd).

        Out-of-range indices read garbage on hardware: their results are uninitialised."""
        name = "nl.gather_flattened"
        t = require_on_chip(data, name, "data")
        ix = require_on_chip(indices, name, "indices")
        check_same_partitions(name, t, ix)
        if ix.dtype.kind not in "iu":
            raise NkiConstraintError("err_invalid_index", f"{name}: indices must be integers")
        raw, ok = t.read()
        x = flat(raw)
        idx, idx_ok = ix.read()
        cols = flat(np.asarray(idx, dtype=np.int64))
        inside = (cols >= 0) & (cols < x.shape[1])
        safe = np.where(inside, cols, 0)
        values = np.take_along_axis(x, safe, axis=1)
        valid = all_valid(
            None if inside.all() else inside,
            None if ok is None else np.take_along_axis(flat(ok), safe, axis=1),
            None if idx_ok is None else flat(idx_ok),
        )
        values = values.reshape(ix.shape)
        valid = None if valid is None else valid.reshape(ix.shape)
        _record(name, Engine.GPSIMD, ix)
        out_dt = _dt.normalize(dtype) if dtype is not None else t.dtype
        vals = values if out_dt == values.dtype else _dt.to_f32(values)
        return Tensor.from_values(vals, valid, out_dt, Buffer.SBUF, _mask(mask, ix.shape))


def check_dst_dtype(name: str, dtype: Any, dst: Tensor | None) -> None:
    """With a destination the output dtype is dst's: a different ``dtype=`` is refused."""
    if dst is not None and dtype is not None and _dt.normalize(dtype) != dst.dtype:
        raise NkiConstraintError(
            "err_unsupported_dtype",
            f"{name}: dtype={_dt.normalize(dtype)} differs from dst's dtype {dst.dtype}",
        )


class NewDialectInstructions:
    """Mixin: new-dialect-only instructions (dst first), same conventions as ``IsaEngine``."""

    def nc_n_gather(self, dst: Tensor, data: Any, indices: Any) -> Tensor:
        """Per partition gather over the flattened free axes (GpSimd, SBUF only); indices
        must be uint32 and in range."""
        name = "nisa.nc_n_gather"
        for t, role in ((dst, "dst"), (data, "data"), (indices, "indices")):
            require_buffer(t, name, role, ("sbuf",))
        if indices.dtype != _dt.uint32:
            raise NkiConstraintError("err_unsupported_dtype", f"{name}: indices must be uint32")
        if dst.dtype != data.dtype:
            raise NkiConstraintError("err_unsupported_dtype", f"{name}: dst dtype must be data's")
        raw_idx, _ = indices.read()
        cols = flat(np.asarray(raw_idx, dtype=np.int64))
        if cols.size and cols.max() >= data.free_size:
            raise NkiIndexError(
                f"{name}: index {int(cols.max())} is outside the {data.free_size} elements of a "
                "partition of data"
            )
        return _into(dst, self.gather_flattened(data, indices, dtype=dst.dtype))  # type: ignore[attr-defined]

    def rng(self, dst: Tensor, *, engine: Any = None) -> Tensor:
        """32 random bits per element, truncated to ``dst``'s integer type (its low bits)."""
        name = "nisa.rng"
        from .isa_common import pick_engine

        d = require_on_chip(dst, name, "dst")
        eng = pick_engine(engine, Engine.VECTOR)
        if eng not in (Engine.VECTOR, Engine.GPSIMD):
            raise NkiConstraintError("err_invalid_operand", f"{name}: vector or gpsimd engine")
        if eng is Engine.GPSIMD and d.buffer is Buffer.PSUM:
            raise NkiConstraintError("err_unsupported_memory", f"{name}: GpSimd cannot write PSUM")
        if d.dtype.kind not in "iu" or d.dtype.itemsize > 4:
            raise NkiConstraintError("err_unsupported_dtype", f"{name}: dst must be an integer")
        bits = _rng(current_run()).integers(0, 2**32, d.shape, dtype=np.uint64)
        d.write(bits.astype(np.uint32).astype(d.dtype), None)  # two's-complement truncation
        _record(name, eng, d)
        return d

    def set_rng_seed(self, src_seeds: Any) -> None:
        """Seed the generator from a (1, 1) 32-bit tile."""
        t = require_on_chip(src_seeds, "nisa.set_rng_seed", "src_seeds")
        if t.size != 1 or t.dtype.itemsize != 4:
            raise NkiConstraintError(
                "err_invalid_operand", "nisa.set_rng_seed: src_seeds must be a [1, 1] 32-bit tile"
            )
        data, _ = t.read()
        seed_random(int(np.asarray(data).view(np.uint32).reshape(-1)[0]))
        _record("nisa.set_rng_seed", Engine.VECTOR, TileShape(1, 1, t.dtype))

    def nonzero_with_count(
        self, dst: Tensor, src: Any, *, index_offset: int = 0, padding_val: int = -1
    ) -> Tensor:
        """Per GpSimd core (partitions 0, 16, ..., 112): indices of the nonzero elements plus
        ``index_offset``, then ``padding_val``, then the count; other partitions untouched."""
        name = "nisa.nonzero_with_count"
        s = require_buffer(src, name, "src", ("sbuf",))
        d = require_buffer(dst, name, "dst", ("sbuf",))
        if d.dtype != _dt.int32 or s.dtype not in (_dt.float32, _dt.int32):
            raise NkiConstraintError(
                "err_unsupported_dtype", f"{name}: src float32/int32 and dst int32"
            )
        if d.partitions != s.partitions or d.free_size != s.free_size + 1:
            raise NkiConstraintError(
                "err_shape_mismatch", f"{name}: dst must be src {s.shape} with one more element"
            )
        data, ok = s.read()
        rows = np.arange(0, s.partitions, 16)
        x = flat(np.asarray(data))[rows]
        nz = x != 0
        count = nz.sum(axis=1)
        n = x.shape[1]
        order = np.argsort(~nz, axis=1, kind="stable")  # nonzero positions first, in order
        slots = np.arange(n)[None, :]
        out = np.where(slots < count[:, None], order + int(index_offset), int(padding_val))
        out = np.concatenate([out, count[:, None]], axis=1).astype(np.int64)
        where = np.zeros((d.partitions, n + 1), bool)
        where[rows] = True
        full = np.zeros((d.partitions, n + 1), np.int64)
        full[rows] = out
        valid = None
        if ok is not None:
            bad = ~flat(ok)[rows].all(axis=1)
            valid = np.ones(full.shape, bool)
            valid[rows[bad]] = False
        ok_out = None if valid is None else valid.reshape(d.shape)
        d.write(full.reshape(d.shape).astype(np.int32), ok_out, where.reshape(d.shape))
        _record(name, Engine.GPSIMD, s)
        return d

    def tensor_scalar_cumulative(
        self,
        dst: Tensor,
        src: Any,
        op0: Any,
        op1: Any,
        imm0: Any,
        *,
        imm1: Any = None,
        reduce_cmd: Any = 3,
    ) -> Tensor:
        """Running ``reg = op1(op0(src[i], imm0), reg)`` along the free axes, each step
        written to ``dst``; ``reg`` starts at op1's identity (reset_reduce), the registers
        (reduce) or ``imm1`` (load_reduce). One step per free position, vectorised over
        partitions."""
        name = "nisa.tensor_scalar_cumulative"
        t = require_on_chip(src, name, "src")
        f0 = _ops.BINARY[_ops.resolve(op0, name)][0]
        red = _ops.resolve(op1, name)
        combine = {
            "add": np.add, "subtract": np.subtract, "multiply": np.multiply,
            "maximum": np.maximum, "minimum": np.minimum,
        }.get(red)  # fmt: skip
        if combine is None:
            raise NkiConstraintError(
                "err_unsupported_operator", f"{name}: op1 must be add/subtract/mult/max/min"
            )
        command = _cmd(reduce_cmd, name)
        parts = t.partitions
        regs = current_run().registers
        if command is reduce_cmd_enum.reset_reduce:
            start = {"add": 0.0, "subtract": 0.0, "multiply": 1.0,
                     "maximum": -np.inf, "minimum": np.inf}[red]  # fmt: skip
            acc = np.full(parts, start, np.float32)
        elif command is reduce_cmd_enum.reduce:
            acc = regs.get(Engine.VECTOR)
            if acc is None or acc.shape[0] != parts:
                raise NkiConstraintError(
                    "err_invalid_operand", f"{name}: reduce_cmd=reduce with no accumulated value"
                )
        elif command is reduce_cmd_enum.load_reduce:
            v, _ = per_partition(imm1, parts, name, "imm1")
            acc = np.broadcast_to(v, (parts, 1))[:, 0].astype(np.float32)
        else:
            raise NkiConstraintError(
                "err_invalid_operand", f"{name}: reduce_cmd must be reset_reduce/reduce/load_reduce"
            )
        vals, ok = f32(t)
        s0, s0_ok = per_partition(imm0, parts, name, "imm0")
        with np.errstate(all="ignore"):
            x = np.asarray(f0(flat(vals), s0), np.float32)
            out = np.empty_like(x)
            for i in range(x.shape[1]):  # a running value: one step per free position
                acc = np.asarray(combine(x[:, i], acc), np.float32)
                out[:, i] = acc
        regs[Engine.VECTOR] = acc
        valid = all_valid(None if ok is None else flat(ok), s0_ok)
        if valid is not None:
            valid = np.logical_and.accumulate(np.broadcast_to(valid, x.shape), axis=1)
        _record(name, Engine.VECTOR, t)
        return emit(out.reshape(t.shape), None if valid is None else valid.reshape(t.shape),
                    dst.dtype, Buffer.SBUF, None, dst)  # fmt: skip


def _into(dst: Tensor, tile: Tensor) -> Tensor:
    vals, ok = tile.read()
    vals, ok = _fit(vals, ok, dst.shape)
    dst.write(vals, ok)
    return dst


def _check_top8_size(n: int, name: str) -> None:
    if not 8 <= n <= 16384:
        raise NkiConstraintError(
            "err_size_of_dimension_exceed_arch_limit",
            f"{name}: needs 8 to 16384 elements per partition, got {n}",
        )
