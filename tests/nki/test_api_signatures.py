"""No silent drops: every optional parameter of the public nl / nisa API does something.

The test walks the public signatures of ``nki.language`` (one module for both dialects),
legacy ``neuronxcc.nki.isa`` and new ``nki.isa`` as the import shim exposes them, and

* refuses ``**kwargs`` catch-alls (an unknown keyword must be a TypeError);
* requires a handling class (migrator/nki/api_params.py) for every optional parameter and an
  example call (EXAMPLES below) for every function that has one;
* proves each entry by running the example in a kernel: ``honoured`` parameters change the
  observable result (values, dtype, shape, buffer, name, traced engine/label, findings,
  printed output), ``validated`` ones raise a C2N constraint error on a bad value,
  ``not_emulated`` ones raise NkiNotEmulatedError naming the parameter, ``no_effect`` ones
  leave it unchanged. Adding a parameter or function without handling it makes this fail.
"""

from __future__ import annotations

import contextlib
import inspect
import io
from typing import Any

import numpy as np
import pytest

import migrator.nki as mn
from migrator.nki import api_params, isa_dst, isa_legacy, language
from migrator.nki import language as nl
from migrator.nki.errors import NkiConstraintError, NkiNotEmulatedError
from migrator.nki.nl_memory import LOOP_HINTS
from migrator.nki.shim import public_api
from migrator.nki.tensor import Tensor

MODULES = {"nl": language, "legacy": isa_legacy, "new": isa_dst}
RNG = np.random.default_rng(3)
X = RNG.uniform(1.0, 2.0, (128, 8)).astype(np.float32)
Y = RNG.uniform(1.0, 2.0, (128, 8)).astype(np.float32)
INTS = RNG.integers(1, 7, (128, 8)).astype(np.int32)
SQ = RNG.uniform(-1.0, 1.0, (128, 128)).astype(np.float32)
X3 = RNG.uniform(1.0, 2.0, (128, 4, 2)).astype(np.float32)


def functions() -> list[tuple[str, Any]]:
    out = []
    for tag, mod in MODULES.items():
        for name, fn in sorted(public_api(mod).items()):
            if inspect.isfunction(fn):
                out.append((f"{tag}.{name}", fn))
    return out


def optional_params(fn: Any) -> list[str]:
    sig = inspect.signature(fn)
    return [p.name for p in sig.parameters.values() if p.default is not p.empty]


# -------------------------------------------------------------------------------------------
# Example calls. Each gets the function, an Env (input tiles, made inside the kernel) and the
# keyword under test; it returns what to observe (tiles, arrays, numbers, or None).


class Env:
    def __init__(self, x: Any, y: Any, ints: Any, sq: Any, x3: Any) -> None:
        self.hx, self.hy, self.hints, self.hsq, self.hx3 = x, y, ints, sq, x3
        self.extra: list[Any] = []

    def x(self) -> Tensor:
        return nl.load(self.hx)

    def y(self) -> Tensor:
        return nl.load(self.hy)

    def i(self) -> Tensor:
        return nl.load(self.hints)

    def sq(self) -> Tensor:
        return nl.load(self.hsq)

    def x3(self) -> Tensor:
        return nl.load(self.hx3)

    def out(self, shape=(128, 8), dtype=nl.float32) -> Tensor:
        t = nl.zeros(shape, dtype=dtype)
        self.extra.append(t)
        return t

    def res(self) -> Tensor:
        return self.out((128, 1))

    def idx(self) -> Tensor:
        return isa_legacy.iota(nl.arange(128)[:, None], dtype=nl.int32)


MASK = "MASK"  # sentinel: nl.arange(8)[None, :] < 3, made inside the kernel
RES = "RES"  # sentinel: a fresh (128, 1) result tile, observed
OUT = "OUT"  # sentinel: a fresh (128, 8) tile, observed

UNARY = [
    "abs", "ceil", "cos", "erf", "exp", "floor", "gelu", "gelu_apprx_tanh", "log",
    "logical_not", "mish", "negative", "reciprocal", "relu", "rsqrt", "sigmoid", "sign", "silu",
    "sin", "softplus", "sqrt", "square", "tanh", "trunc", "copy", "arctan", "tan", "erf_dx",
    "gelu_dx", "gelu_apprx_sigmoid", "gelu_apprx_sigmoid_dx", "silu_dx",
]  # fmt: skip
BINARY = [
    "add", "divide", "equal", "fmod", "greater", "greater_equal", "less", "less_equal",
    "logical_and", "logical_or", "logical_xor", "maximum", "minimum", "mod", "multiply",
    "not_equal", "power", "subtract",
]  # fmt: skip
INTEGER = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]
REDUCE = ["sum", "max", "min", "mean", "prod", "var", "all"]


def _hbm_out(shape=(128, 8)) -> Tensor:
    return nl.ndarray(shape, dtype=nl.float32, buffer=nl.shared_hbm)


def _store_masked(f, e, **kw):
    out = _hbm_out()
    nl.store(out, nl.zeros((128, 8), nl.float32))
    f(out, e.x(), **kw)
    return out


def _atomic(f, e, **kw):
    out = _hbm_out()
    nl.store(out, nl.zeros((128, 8), nl.float32))
    f(out[e.idx(), nl.arange(8)[None, :]], value=e.x(), op=np.add, **kw)
    return out


def _loop_reduce(f, e, **kw):
    acc = e.out()
    for k in nl.affine_range(2):
        acc[...] = f(e.x(), np.add, loop_indices=[k], **kw)
    return acc


def _device_print(f, e, **kw):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        f("t", e.x(), **kw)
    return buf.getvalue()


def _matmul_psum(e):
    return isa_legacy.nc_matmul(e.sq(), e.x())


EXAMPLES: dict[str, Any] = {
    **{f"nl.{n}": (lambda f, e, **kw: f(e.x(), **kw)) for n in UNARY},
    **{f"nl.{n}": (lambda f, e, **kw: f(e.x(), e.y(), **kw)) for n in BINARY},
    **{f"nl.{n}": (lambda f, e, **kw: f(e.i(), e.i(), **kw)) for n in INTEGER},
    # keepdims is probed on a 3-D tile (a reduced 2-D tile is (P, 1) either way)
    **{
        f"nl.{n}": (
            lambda f, e, **kw: f(e.x3(), 2, **kw) if "keepdims" in kw else f(e.x(), 1, **kw)
        )
        for n in REDUCE
    },
    "nl.invert": lambda f, e, **kw: f(e.i(), **kw),
    "nl.all": lambda f, e, **kw: (
        f(nl.greater(e.x3(), 1.2), 2, **kw)
        if "keepdims" in kw
        else f(nl.greater(e.x(), 1.2), 1, **kw)
    ),  # fmt: skip
    "nl.where": lambda f, e, **kw: f(nl.greater(e.x(), 1.5), e.x(), e.y(), **kw),
    "nl.softmax": lambda f, e, **kw: f(e.x3(), **kw) if "axis" in kw else f(e.x(), **kw),
    "nl.rms_norm": lambda f, e, **kw: f(e.x(), e.y(), 1, 8, **kw),
    "nl.load": lambda f, e, **kw: f(e.hx, **kw),
    "nl.load_transpose2d": lambda f, e, **kw: f(e.hx, **kw),
    "nl.store": _store_masked,
    "nl.transpose": lambda f, e, **kw: f(e.x(), **kw),
    "nl.matmul": lambda f, e, **kw: f(e.sq(), e.x(), **kw),
    "nl.broadcast_to": lambda f, e, **kw: f(e.x()[0:1, :], shape=(128, 8), **kw),
    "nl.full": lambda f, e, **kw: f((128, 8), 2.5, nl.float32, **kw),
    "nl.zeros": lambda f, e, **kw: f((128, 8), nl.float32, **kw),
    "nl.ones": lambda f, e, **kw: f((128, 8), nl.float32, **kw),
    "nl.ndarray": lambda f, e, **kw: f((128, 8), nl.float32, **kw),
    "nl.empty_like": lambda f, e, **kw: f(e.x(), **kw),
    "nl.zeros_like": lambda f, e, **kw: f(e.x(), **kw),
    "nl.ones_like": lambda f, e, **kw: f(e.x(), **kw),
    "nl.rand": lambda f, e, **kw: f((128, 8), **kw),
    "nl.random_seed": lambda f, e, **kw: f(5, **kw),
    "nl.dropout": lambda f, e, **kw: f(e.x(), 0.5, **kw),
    "nl.gather_flattened": lambda f, e, **kw: f(e.x(), nl.copy(e.i(), dtype=nl.uint32), **kw),
    "nl.atomic_rmw": _atomic,
    "nl.loop_reduce": lambda f, e, **kw: _loop_reduce(f, e, **kw),
    "nl.arange": lambda f, e, **kw: f(6, **kw),
    "nl.dynamic_range": lambda f, e, **kw: list(f(6, **kw)),
    "nl.program_id": lambda f, e, **kw: f(**kw),
    "nl.num_programs": lambda f, e, **kw: f(**kw),
    "nl.device_print": _device_print,
    "nl.shared_constant": lambda f, e, **kw: f(
        np.arange(8.0, dtype=np.float32).reshape(2, 4) + 0.3, **kw
    ),
    "nl.shared_identity_matrix": lambda f, e, **kw: f(8, **kw),
    # -- legacy nisa (value-returning) ---------------------------------------------------
    "legacy.activation": lambda f, e, **kw: f(
        np.exp, e.x(), **{"reduce_res": e.res(), "reduce_op": np.add, **kw}
    ),
    "legacy.activation_reduce": lambda f, e, **kw: f(
        np.exp, e.x(), reduce_op=np.add, reduce_res=e.res(), **kw
    ),
    "legacy.affine_select": lambda f, e, **kw: f(
        nl.arange(128)[:, None] > nl.arange(8)[None, :], e.x(), -1.0, **kw
    ),
    "legacy.bn_stats": lambda f, e, **kw: f(e.x(), **kw),
    "legacy.bn_aggr": lambda f, e, **kw: f(isa_legacy.bn_stats(e.x()), **kw),
    "legacy.dma_copy": lambda f, e, **kw: _dma(f, e, **kw),
    "legacy.dma_transpose": lambda f, e, **kw: f(e.hx, **kw),
    "legacy.dropout": lambda f, e, **kw: f(e.x(), 0.5, **kw),
    "legacy.iota": lambda f, e, **kw: f(
        nl.arange(8)[None, :] + nl.arange(128)[:, None], dtype=nl.int32, **kw
    ),  # fmt: skip
    "legacy.local_gather": lambda f, e, **kw: f(
        e.x(),
        nl.copy(
            isa_legacy.iota(
                nl.arange(2)[None, :] * 3 + 0 * nl.arange(128)[:, None], dtype=nl.int32
            ),
            dtype=nl.uint16,
        ),
        **kw,
    ),  # fmt: skip
    "legacy.max8": lambda f, e, **kw: f(src=e.x(), **kw),
    "legacy.memset": lambda f, e, **kw: f((128, 8), 1.5, nl.float32, **kw),
    "legacy.nc_find_index8": lambda f, e, **kw: f(
        data=e.x(), vals=isa_legacy.max8(src=e.x()), **kw
    ),
    "legacy.nc_match_replace8": lambda f, e, **kw: f(
        data=e.x(), vals=isa_legacy.max8(src=e.x()), imm=0.0, **kw
    ),
    "legacy.nc_matmul": lambda f, e, **kw: f(e.sq(), e.x(), **kw),
    "legacy.nc_stream_shuffle": lambda f, e, **kw: f(
        e.x(), e.out(), [(i + 3) % 32 for i in range(32)], **kw
    ),
    "legacy.nc_transpose": lambda f, e, **kw: f(e.x()[0:32, :], **kw),
    "legacy.range_select": lambda f, e, **kw: f(
        **{
            "on_true_tile": e.x(),
            "comp_op0": np.greater_equal,
            "comp_op1": np.less,
            "bound0": nl.full((128, 1), 2.0, nl.float32),
            "bound1": nl.full((128, 1), 6.0, nl.float32),
            **kw,
        }
    ),  # fmt: skip
    "legacy.reciprocal": lambda f, e, **kw: f(e.x(), **kw),
    "legacy.scalar_tensor_tensor": lambda f, e, **kw: f(
        e.x(), np.subtract, 0.5, np.divide, e.y(), **kw
    ),
    "legacy.select_reduce": lambda f, e, **kw: f(
        **{
            "dst": e.out(),
            "predicate": nl.copy(nl.greater(e.x(), 1.5), dtype=nl.uint8),
            "on_true": e.x(),
            "on_false": -1.0,
            **kw,
        }
    ),  # fmt: skip
    "legacy.sequence_bounds": lambda f, e, **kw: f(segment_ids=e.i()[0:1, :], **kw),
    "legacy.tensor_copy": lambda f, e, **kw: f(e.x(), **kw),
    "legacy.tensor_copy_dynamic_src": lambda f, e, **kw: f(e.x(), **kw),
    "legacy.tensor_copy_dynamic_dst": lambda f, e, **kw: f(dst=e.out(), src=e.x(), **kw),
    "legacy.tensor_copy_predicated": lambda f, e, **kw: f(
        src=e.x(), dst=e.out(), predicate=nl.copy(nl.greater(e.x(), 1.5), dtype=nl.uint8), **kw
    ),
    "legacy.tensor_partition_reduce": lambda f, e, **kw: f(np.add, e.x(), **kw),
    "legacy.tensor_reduce": lambda f, e, **kw: (
        f(np.add, e.x3(), 2, **kw) if "keepdims" in kw else f(np.add, e.x(), 1, **kw)
    ),
    "legacy.tensor_scalar": lambda f, e, **kw: f(e.x(), np.subtract, 0.5, **kw),
    "legacy.tensor_scalar_reduce": lambda f, e, **kw: f(
        data=e.x(), op0=np.subtract, operand0=0.5, reduce_op=np.add, reduce_res=e.res(), **kw
    ),
    "legacy.tensor_tensor": lambda f, e, **kw: f(e.x(), e.y(), np.subtract, **kw),
    "legacy.tensor_tensor_scan": lambda f, e, **kw: f(
        e.x(), e.y(), 0.5, np.subtract, np.divide, **kw
    ),
}


def _dma(f, e, **kw):
    out = _hbm_out()
    nl.store(out, nl.full((128, 8), 1.0, nl.float32))
    src = e.x()
    if kw.get("oob_mode") is not None:  # an indirect gather whose last rows fall outside
        far = isa_legacy.iota(nl.arange(128)[:, None] + 8, dtype=nl.int32)
        tile = nl.full((128, 8), -1.0, nl.float32)
        f(dst=tile, src=e.hx[far, nl.arange(8)[None, :]], **kw)
        return tile
    f(dst=out, src=src, **kw)
    return out


NEW_EXAMPLES: dict[str, Any] = {
    "new.activation": lambda f, e, **kw: f(
        e.out(), np.exp, e.x(), **{"reduce_res": e.res(), "reduce_op": np.add, **kw}
    ),
    "new.activation_reduce": lambda f, e, **kw: f(e.out(), np.exp, e.x(), np.add, e.res(), **kw),
    "new.affine_select": lambda f, e, **kw: f(e.out(), [[1, 8]], -1, e.x(), -1.0, **kw),
    "new.bn_stats": lambda f, e, **kw: f(e.out((128, 6)), e.x(), **kw),
    "new.bn_aggr": lambda f, e, **kw: f(e.out((128, 2)), isa_legacy.bn_stats(e.x()), **kw),
    "new.dma_copy": lambda f, e, **kw: _new_dma(f, e, **kw),
    "new.dma_transpose": lambda f, e, **kw: f(e.out((8, 128)), e.hx, **kw),
    "new.dma_compute": lambda f, e, **kw: _new_compute(f, e, **kw),
    "new.nc_n_gather": lambda f, e, **kw: f(e.out(), e.x(), nl.copy(e.i(), dtype=nl.uint32), **kw),
    "new.rng": lambda f, e, **kw: f(e.out(dtype=nl.uint16), **kw),
    "new.set_rng_seed": lambda f, e, **kw: f(nl.full((1, 1), 7, nl.int32), **kw),
    "new.nonzero_with_count": lambda f, e, **kw: f(
        e.out((128, 9), nl.int32), nl.copy(nl.greater(e.x(), 1.5), dtype=nl.int32), **kw
    ),
    "new.tensor_scalar_cumulative": lambda f, e, **kw: f(
        e.out(), e.x(), np.subtract, np.add, 0.5, **kw
    ),
    "new.dropout": lambda f, e, **kw: f(e.out(), e.x(), 0.5, **kw),
    "new.iota": lambda f, e, **kw: f(e.out(dtype=nl.int32), [[1, 8]], **kw),
    "new.local_gather": lambda f, e, **kw: f(
        e.out((128, 32 * kw.get("num_elem_per_idx", 1)))
        if kw.get("num_valid_indices") is None
        else e.out((128, kw["num_valid_indices"] * kw.get("num_elem_per_idx", 1))),
        e.x(),
        nl.copy(
            isa_legacy.iota(
                nl.arange(2)[None, :] * 3 + 0 * nl.arange(128)[:, None], dtype=nl.int32
            ),
            dtype=nl.uint16,
        ),
        **kw,
    ),  # fmt: skip
    "new.max8": lambda f, e, **kw: f(e.out(), e.x(), **kw),
    "new.memset": lambda f, e, **kw: f(e.out(), 1.5, **kw),
    "new.nc_find_index8": lambda f, e, **kw: f(
        e.out(dtype=nl.uint32), e.x(), isa_legacy.max8(src=e.x()), **kw
    ),
    "new.nc_match_replace8": lambda f, e, **kw: f(
        e.out(), e.x(), isa_legacy.max8(src=e.x()), 0.0, **kw
    ),
    "new.nc_matmul": lambda f, e, **kw: _new_matmul(f, e, **kw),
    "new.nc_stream_shuffle": lambda f, e, **kw: f(
        e.out(), e.x(), [(i + 3) % 32 for i in range(32)], **kw
    ),
    "new.nc_transpose": lambda f, e, **kw: f(e.out((8, 32)), e.x()[0:32, :], **kw),
    "new.range_select": lambda f, e, **kw: f(
        e.out(),
        e.x(),
        np.greater_equal,
        np.less,
        nl.full((128, 1), 2.0, nl.float32),
        nl.full((128, 1), 6.0, nl.float32),
        **kw,
    ),  # fmt: skip
    "new.reciprocal": lambda f, e, **kw: f(e.out(), e.x(), **kw),
    "new.scalar_tensor_tensor": lambda f, e, **kw: f(
        e.out(), e.x(), np.subtract, 0.5, np.divide, e.y(), **kw
    ),
    "new.select_reduce": lambda f, e, **kw: f(
        e.out(), nl.copy(nl.greater(e.x(), 1.5), dtype=nl.uint8), e.x(), -1.0, **kw
    ),
    "new.sequence_bounds": lambda f, e, **kw: f(e.out((1, 2, 8)), e.i()[0:1, :], **kw),
    "new.tensor_copy": lambda f, e, **kw: f(e.out(), e.x(), **kw),
    "new.tensor_copy_predicated": lambda f, e, **kw: f(
        e.out(), e.x(), nl.copy(nl.greater(e.x(), 1.5), dtype=nl.uint8), **kw
    ),
    "new.tensor_partition_reduce": lambda f, e, **kw: f(e.out((1, 8)), np.add, e.x(), **kw),
    "new.tensor_reduce": lambda f, e, **kw: f(e.out((128, 4)), np.add, e.x3(), 2, **kw),
    "new.tensor_scalar": lambda f, e, **kw: f(e.out(), e.x(), np.subtract, 0.5, **kw),
    "new.tensor_scalar_reduce": lambda f, e, **kw: f(
        e.out(), e.x(), np.subtract, 0.5, np.add, **{"reduce_res": e.res(), **kw}
    ),
    "new.tensor_tensor": lambda f, e, **kw: f(e.out(), e.x(), e.y(), np.subtract, **kw),
    "new.tensor_tensor_scan": lambda f, e, **kw: f(
        e.out(), e.x(), e.y(), 0.5, np.subtract, np.divide, **kw
    ),
}
EXAMPLES.update(NEW_EXAMPLES)


def _new_dma(f, e, **kw):
    tile = nl.full((128, 8), -1.0, nl.float32)
    if kw.get("oob_mode") is not None:
        far = isa_legacy.iota(nl.arange(128)[:, None] + 8, dtype=nl.int32)
        f(tile, e.hx[far, nl.arange(8)[None, :]], **kw)
    else:
        f(tile, e.hx, **kw)
    return tile


def _new_compute(f, e, **kw):
    out = _hbm_out()
    nl.store(out, nl.full((128, 8), 1.0, nl.float32))
    rows = isa_legacy.iota(nl.arange(128)[:, None] + 8, dtype=nl.int32)  # the last 8 fall out
    view = out.ap([[8, 128], [1, 8]], offset=0, vector_offset=rows, indirect_dim=0)
    if kw.get("oob_mode") is None and "unique_indices" not in kw and "scales" not in kw:
        view = out  # a plain (direct) sum when the probe is not about indirection
    f(view, [view, e.x()], np.add, **kw)
    return out


def _new_matmul(f, e, **kw):
    acc = nl.zeros((128, 8), nl.float32, buffer=nl.psum)
    f(acc, e.sq(), e.x(), **kw)
    f(acc, e.sq(), e.x(), **kw)  # accumulate=None: the second matmul adds
    return nl.copy(acc)


# Values to pass (the default is the baseline). Per (api, param) first, then by name.
PROBE: dict[str, Any] = {
    "dtype": nl.bfloat16,
    "mask": MASK,
    "engine": isa_legacy.engine.gpsimd,
    "name": "probe",
    "keepdims": True,
    "buffer": nl.psum,
    "reverse0": True,
    "reverse1": True,
    "reduce_res": RES,
    "reduce_cmd": isa_legacy.reduce_cmd.reset,
    "reduce_op": np.max,
}
PROBE_FOR: dict[tuple[str, str], Any] = {
    ("nl.arange", "stop"): 9,
    ("nl.arange", "step"): 2,
    ("nl.matmul", "transpose_x"): True,
    ("nl.softmax", "axis"): 1,
    ("nl.rms_norm", "epsilon"): 0.75,
    ("nl.program_id", "axis"): 1,
    ("nl.num_programs", "axes"): 1,
    ("nl.transpose", "mask"): "MASK_T",
    ("nl.load_transpose2d", "mask"): "MASK_T",
    ("nl.shared_identity_matrix", "dtype"): nl.float32,
    ("nl.equal", "dtype"): nl.float32,
    ("nl.all", "dtype"): nl.float32,
    ("legacy.nc_transpose", "engine"): isa_legacy.engine.vector,
    ("new.nc_transpose", "engine"): isa_legacy.engine.vector,
    ("legacy.nc_transpose", "mask"): "MASK_32",
    ("legacy.activation", "bias"): "BIAS",
    ("new.activation", "bias"): "BIAS",
    ("legacy.activation_reduce", "bias"): "BIAS",
    ("new.activation_reduce", "bias"): "BIAS",
    ("legacy.activation", "scale"): 2.0,
    ("new.activation", "scale"): 2.0,
    ("legacy.activation_reduce", "scale"): 2.0,
    ("new.activation_reduce", "scale"): 2.0,
    ("legacy.activation", "reduce_op"): np.max,
    ("new.activation", "reduce_op"): np.max,
    ("legacy.range_select", "reduce_cmd"): isa_legacy.reduce_cmd.reset_reduce,
    ("legacy.sequence_bounds", "dtype"): nl.float32,
    ("legacy.nc_find_index8", "dtype"): nl.uint16,
    ("legacy.bn_aggr", "mask"): "MASK_2",
    ("legacy.local_gather", "mask"): "MASK_P",
    ("legacy.dma_transpose", "mask"): "MASK_T",
    ("legacy.tensor_reduce", "mask"): MASK,
    ("new.affine_select", "cmp_op"): np.greater,
    ("new.affine_select", "offset"): -3,
    ("new.iota", "offset"): 5,
    ("new.iota", "channel_multiplier"): 2,
    ("legacy.dma_copy", "dst_rmw_op"): np.add,
    ("legacy.dma_copy", "oob_mode"): isa_legacy.oob_mode.skip,
    ("new.dma_copy", "oob_mode"): isa_legacy.oob_mode.skip,
    ("new.dma_compute", "oob_mode"): isa_legacy.oob_mode.skip,
    ("nl.dynamic_range", "stop"): 9,
    ("new.nonzero_with_count", "index_offset"): 16,
    ("new.nonzero_with_count", "padding_val"): -5,
    ("new.tensor_scalar_cumulative", "imm1"): 3.0,
    ("new.tensor_scalar_cumulative", "reduce_cmd"): isa_legacy.reduce_cmd.load_reduce,
    ("new.rng", "engine"): isa_legacy.engine.gpsimd,
    ("nl.dynamic_range", "step"): 2,
    ("legacy.local_gather", "num_elem_per_idx"): 2,
    ("new.local_gather", "num_elem_per_idx"): 2,
    ("legacy.local_gather", "num_valid_indices"): 1,
    ("new.local_gather", "num_valid_indices"): 1,
    ("legacy.nc_match_replace8", "dst_idx"): "IDX",
    ("new.nc_match_replace8", "dst_idx"): "IDX",
    ("legacy.nc_matmul", "perf_mode"): "double_row_gen3",
    ("new.nc_matmul", "perf_mode"): isa_dst.matmul_perf_mode.double_row,
    ("new.nc_matmul", "accumulate"): False,
    ("legacy.range_select", "range_start"): 3,
    ("new.range_select", "range_start"): 3,
    ("legacy.range_select", "on_false_value"): -7.0,
    ("new.range_select", "on_false_value"): -7.0,
    ("new.range_select", "reduce_cmd"): isa_legacy.reduce_cmd.reset,
    ("legacy.select_reduce", "reverse_pred"): True,
    ("new.select_reduce", "reverse_pred"): True,
    ("legacy.select_reduce", "reduce_cmd"): isa_legacy.reduce_cmd.reset_reduce,
    ("new.select_reduce", "reduce_cmd"): isa_legacy.reduce_cmd.reset_reduce,
    ("legacy.range_select", "reduce_op"): np.min,
    ("new.range_select", "reduce_op"): np.min,
    ("legacy.select_reduce", "reduce_op"): np.min,
    ("new.select_reduce", "reduce_op"): np.min,
    ("legacy.tensor_copy_predicated", "reverse_pred"): True,
    ("new.tensor_copy_predicated", "reverse_pred"): True,
    ("legacy.tensor_reduce", "negate"): True,
    ("new.tensor_reduce", "negate"): True,
    ("legacy.tensor_scalar", "op1"): np.multiply,
    ("new.tensor_scalar", "op1"): np.multiply,
    ("legacy.tensor_scalar", "operand1"): 3.0,  # with op1 (below)
    ("new.tensor_scalar", "operand1"): 3.0,
    ("legacy.tensor_scalar_reduce", "reduce_op"): np.max,
    ("new.tensor_scalar_reduce", "reduce_op"): np.max,
    ("legacy.tensor_scalar_reduce", "reduce_res"): RES,
    ("legacy.memset", "engine"): isa_legacy.engine.gpsimd,
}
# Extra keywords a probe needs next to the one under test.
WITH: dict[tuple[str, str], dict[str, Any]] = {
    **{(f"nl.{n}", "keepdims"): {"keepdims": False} for n in REDUCE},
    ("legacy.tensor_reduce", "keepdims"): {"keepdims": False},
    ("nl.softmax", "axis"): {"axis": -1},
    ("legacy.tensor_scalar", "operand1"): {"op1": np.multiply},
    ("new.tensor_scalar", "operand1"): {"op1": np.multiply},
    ("legacy.tensor_scalar", "op1"): {"operand1": 3.0},
    ("new.tensor_scalar", "op1"): {"operand1": 3.0},
    ("legacy.tensor_scalar", "reverse1"): {"op1": np.subtract, "operand1": 3.0},
    ("new.tensor_scalar", "reverse1"): {"op1": np.subtract, "operand1": 3.0},
    ("legacy.range_select", "reduce_res"): {"reduce_cmd": isa_legacy.reduce_cmd.reset_reduce},
    ("new.tensor_scalar_cumulative", "imm1"): {"reduce_cmd": isa_legacy.reduce_cmd.load_reduce},
    ("new.tensor_scalar_cumulative", "reduce_cmd"): {"imm1": 3.0},
    ("new.range_select", "reduce_res"): {},
    ("legacy.range_select", "reduce_op"): {
        "reduce_cmd": isa_legacy.reduce_cmd.reset_reduce, "reduce_res": RES},
    ("new.range_select", "reduce_op"): {"reduce_res": RES},
    ("legacy.select_reduce", "reduce_op"): {
        "reduce_cmd": isa_legacy.reduce_cmd.reset_reduce, "reduce_res": RES},
    ("new.select_reduce", "reduce_op"): {
        "reduce_cmd": isa_legacy.reduce_cmd.reset_reduce, "reduce_res": RES},
    ("legacy.select_reduce", "reduce_cmd"): {"reduce_res": RES},
    ("new.select_reduce", "reduce_cmd"): {"reduce_res": RES},
    ("legacy.range_select", "reduce_cmd"): {"reduce_res": RES},
    ("new.range_select", "reduce_cmd"): {"reduce_res": RES},
    ("legacy.activation", "reduce_op"): {"reduce_cmd": isa_legacy.reduce_cmd.reset_reduce},
    ("new.activation", "reduce_op"): {"reduce_cmd": isa_legacy.reduce_cmd.reset_reduce},
    ("legacy.select_reduce", "reduce_res"): {"reduce_cmd": isa_legacy.reduce_cmd.reset_reduce},
    ("new.select_reduce", "reduce_res"): {"reduce_cmd": isa_legacy.reduce_cmd.reset_reduce},
}  # fmt: skip
# Validated parameters: a value that must be refused.
BAD: dict[tuple[str, str], Any] = {
    ("nl.ndarray", "address"): (120, 0),
    ("nl.full", "lazy_initialization"): "yes",
    ("nl.zeros", "lazy_initialization"): "yes",
    ("nl.ones", "lazy_initialization"): "yes",
    ("legacy.dma_copy", "dge_mode"): 7,
    ("new.dma_copy", "dge_mode"): 7,
    ("legacy.dma_transpose", "axes"): (2, 1, 0),
    ("new.dma_transpose", "axes"): (2, 1, 0),
    ("new.tensor_copy", "dtype"): nl.bfloat16,
    ("new.dma_compute", "scales"): [1.0, 2.0],
    ("new.dma_compute", "unique_indices"): False,
    ("legacy.nc_stream_shuffle", "dtype"): nl.bfloat16,
    ("legacy.select_reduce", "dtype"): nl.bfloat16,
    ("legacy.tensor_copy_dynamic_dst", "dtype"): nl.bfloat16,
    ("new.tensor_reduce", "keepdims"): True,
    **{
        (f"{d}.nc_matmul", p): v
        for d in ("legacy", "new")
        for p, v in (
            ("is_stationary_onezero", True),
            ("is_moving_onezero", True),
            ("is_transpose", True),
            ("tile_position", (16, 0)),
            ("tile_size", (16, 16)),
        )
    },
}
GRID = {"nl.program_id": (2, 3), "nl.num_programs": (2, 3)}
# A probe the example needs a different input for (the double-row matmul takes fp8 pairs).
SPECIAL = {("legacy.nc_matmul", "perf_mode"), ("new.nc_matmul", "perf_mode")}


def _resolve(value: Any, e: Env) -> Any:
    if isinstance(value, str):
        if value == MASK:
            return nl.arange(8)[None, :] < 3
        if value == "MASK_T":
            return nl.arange(8)[:, None] < 3
        if value == "MASK_32":
            return nl.arange(8)[:, None] < 3
        if value == "MASK_P":
            return nl.arange(128)[:, None] < 64
        if value == "MASK_2":
            return nl.arange(2)[None, :] < 1
        if value == RES:
            return e.res()
        if value == OUT:
            return e.out()
        if value == "IDX":
            return e.out((128, 8), nl.uint32)
        if value == "BIAS":
            return nl.full((128, 1), 0.25, nl.float32)
    return value


def _observe(value: Any) -> Any:
    if isinstance(value, Tensor):
        data, valid = value.read()
        data = np.array(data, copy=True)
        name = value.storage.name
        return ("tile", str(data.dtype), data.shape, value.buffer.value, name,
                data.tobytes(), None if valid is None else valid.tobytes())  # fmt: skip
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.shape, value.tobytes())
    if isinstance(value, tuple | list):
        return tuple(_observe(v) for v in value)
    return repr(value)


def run_example(api: str, kwargs: dict[str, Any], arrays: tuple[np.ndarray, ...] | None = None):
    """Run one example in a kernel; return what it observably did."""
    fn = public_api(MODULES[api.split(".")[0]])[api.split(".", 1)[1]]
    seen: list[Any] = []

    def kernel(x, y, ints, sq, x3):
        e = Env(x, y, ints, sq, x3)
        kw = {k: _resolve(v, e) for k, v in kwargs.items()}
        result = EXAMPLES[api](fn, e, **kw)
        seen[:] = [_observe(result), [_observe(t) for t in e.extra]]
        return x

    arrays = arrays or (X, Y, INTS, SQ, X3)
    _, run = mn.run_kernel(kernel, *arrays, grid=GRID.get(api, ()))
    trace = [(i.name, i.engine.value, i.label) for i in run.trace]
    return seen, trace, sorted(f.code for f in run.findings)


def cases() -> list[tuple[str, str, str]]:
    out = []
    for api, fn in functions():
        for param in optional_params(fn):
            out.append((api, param, api_params.handling(api, param)))
    return out


# -------------------------------------------------------------------------------------------


def test_facades_expose_these_functions_in_both_dialects():
    with mn.simulate(force=True):
        import neuronxcc.nki.isa as legacy_isa
        import neuronxcc.nki.language as legacy_nl
        import nki.isa as new_isa
        import nki.language as new_nl

        for facade, mod in ((legacy_nl, language), (new_nl, language), (legacy_isa, isa_legacy),
                            (new_isa, isa_dst)):  # fmt: skip
            names = {k for k, v in vars(facade).items() if inspect.isfunction(v) and k[:1] != "_"}
            assert names == {k for k, v in public_api(mod).items() if inspect.isfunction(v)}
            assert "record_tile" not in vars(facade) and "Tensor" not in vars(facade)


def test_no_keyword_catch_alls():
    for api, fn in functions():
        for p in inspect.signature(fn).parameters.values():
            if p.kind is p.VAR_KEYWORD:
                hinted = {k for (a, k) in api_params.NO_EFFECT_WHY if a == api}
                assert hinted == LOOP_HINTS, f"{api} swallows **{p.name}"


@pytest.mark.parametrize("name", ["affine_range", "sequential_range", "static_range"])
def test_loop_hints_change_nothing_and_other_keywords_fail(name):
    fn = getattr(nl, name)
    assert list(fn(4, precise_schedule=True, directives=None)) == [0, 1, 2, 3]
    with pytest.raises(TypeError, match="bogus"):
        list(fn(4, bogus=1))


def test_every_optional_parameter_has_a_handling_and_an_example():
    missing = [(api, p) for api, p, kind in cases() if kind not in api_params.KINDS]
    assert not missing, f"parameters without a handling class: {missing}"
    no_example = sorted({api for api, _, _ in cases()} - set(EXAMPLES))
    assert not no_example, f"functions without an example call: {no_example}"
    stale = sorted(set(api_params.TABLE) - {api for api, _ in functions()})
    assert not stale, f"table rows for functions that do not exist: {stale}"


def test_every_example_runs_with_defaults():
    for api in sorted({api for api, _, _ in cases()}):
        run_example(api, {})


@pytest.mark.parametrize(("api", "param", "kind"), cases(), ids=lambda v: str(v))
def test_parameter_is_honoured_validated_or_refused(api, param, kind):
    if kind == api_params.NOT_EMULATED:
        value = {"compute_dtype": nl.bfloat16, "axis": 1, "priority": 1, "engine": 3,
                 "dge_mode": isa_legacy.dge_mode.swdge, "oob_mode": isa_legacy.oob_mode.skip,
                 "reduce_cmd": isa_legacy.reduce_cmd.reduce, "reduce_init": 0.0,
                 "reduce_res_negate": True, "mask": MASK}[param]  # fmt: skip
        with pytest.raises(NkiNotEmulatedError, match=param):
            run_example(api, {param: value})
        return
    if kind == api_params.VALIDATED:
        run_example(api, {})  # the default is accepted
        with pytest.raises(NkiConstraintError):
            run_example(api, {param: BAD[(api, param)]})
        return
    assert kind == api_params.HONOURED, (api, param, kind)
    extra = WITH.get((api, param), {})
    value = PROBE_FOR.get((api, param), PROBE.get(param))
    assert value is not None, f"no probe value for {api}({param}=...)"
    if (api, param) in SPECIAL:
        _double_row(api, value)
        return
    base = run_example(api, dict(extra))
    probed = run_example(api, {**extra, param: value})
    assert probed != base, f"{api}({param}={value!r}) changed nothing: silently ignored"


def _double_row(api: str, mode: Any) -> None:
    """perf_mode double-row: fp8 [K, 2, M] x [K, 2, N] contracts over both axes."""
    s = RNG.integers(-3, 4, (128, 2, 8)).astype(nl.float8_e4m3)
    m = RNG.integers(-3, 4, (128, 2, 8)).astype(nl.float8_e4m3)

    def kernel(a, b):
        out = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        if api.startswith("legacy"):
            acc = isa_legacy.nc_matmul(nl.load(a), nl.load(b), perf_mode=mode)
        else:
            acc = nl.zeros((8, 8), nl.float32, buffer=nl.psum)
            isa_dst.nc_matmul(acc, nl.load(a), nl.load(b), perf_mode=mode)
        nl.store(out, nl.copy(acc))
        return out

    got = mn.run_kernel(kernel, s, m)[0]
    np.testing.assert_array_equal(got, np.einsum("kli,klj->ij", s.astype(np.float32),
                                                 m.astype(np.float32)))  # fmt: skip


def test_the_probe_catches_a_silently_ignored_keyword(monkeypatch):
    """The rule can fail: a function that accepts dtype= but ignores it is caught."""
    real = language.exp

    def exp(x, *, dtype=None, mask=None):  # accepts dtype, drops it
        return real(x, mask=mask)

    exp.__module__ = "migrator.nki.language"
    monkeypatch.setattr(language, "exp", exp)
    assert run_example("nl.exp", {"dtype": nl.bfloat16}) == run_example("nl.exp", {})
    monkeypatch.setattr(language, "exp", real)
    assert run_example("nl.exp", {"dtype": nl.bfloat16}) != run_example("nl.exp", {})


def test_a_catch_all_or_an_unclassified_parameter_fails_the_rule(monkeypatch):
    def newcomer(x, *, dtype=None, mask=None, fancy=False, **extra):
        return language.exp(x, dtype=dtype, mask=mask)

    newcomer.__module__ = "migrator.nki.language"
    monkeypatch.setitem(vars(language), "newcomer", newcomer)
    listed = dict(functions())
    assert "nl.newcomer" in listed
    assert api_params.handling("nl.newcomer", "fancy") is None  # -> the coverage test fails
    kinds = [p.kind for p in inspect.signature(listed["nl.newcomer"]).parameters.values()]
    assert inspect.Parameter.VAR_KEYWORD in kinds  # -> test_no_keyword_catch_alls fails
