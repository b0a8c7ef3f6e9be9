"""Lowering rule for scatter-adds of rows (an embedding's backward) over a lifted program:

    out[i, j] = out[i, j] + sum_{k < K} (ids[k] == i ? x[k, j] : 0)      (rows named by ids)
    pos[i, j] = pos[i, j] + sum_{b < B} x[b * R + i, j]                  (rows k % R, K = B * R)

flat outputs too (`i // C`, `i % C`), every output of the program reading the same rows of x.
Trainium has no scatter into SBUF at data-dependent rows; HBM has an atomic read-modify-write
DMA that takes a row index per partition and adds every contribution to a repeated row
(`nl.atomic_rmw`). So: each output gets its old value (or zeros), then per tile of 128 rows of x,
the rows are loaded once and added into every output at their row: the id tile for a gather's
rows, the row number modulo R (iota) for a sum over a leading axis. An id outside [0, rows) is an
error of the emulator (an out-of-bounds DMA on the device); the CUDA original writes out of
bounds there too. The new `nki` dialect's scatter DMA (`dma_compute`) requires unique indices
in one instruction, so there the rows are summed on TensorE instead: per tile of 128 output rows,
the ids' one-hot rows (ids compared with the tile's row numbers) times the input's rows, in PSUM
over the input's row tiles, plus the old value (work grows with the output's rows: fine for
positions and vocabularies of thousands, slower than the atomics for a 50k vocabulary).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
from migrator.patterns.lifted import (
    _bare,
    _bind,
    _carrying_tensor,
    _clip,
    _lift_note,
    _NoFit,
    _Renderer,
    _sum_plus_old,
    _tensor,
)

from migrator.contract import TaskSpec
from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.lift.program import Expr, IndexMap, Program, value_of
from migrator.plan import MOVING_FMAX, PMAX, Plan, note

MAX_COLS = 8192  # a tile of rows of x holds whole rows (32 KiB of fp32 per partition)
SAMPLES = 64  # positions per size set at which each index map is checked


def scatter(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    parts = [_part(a, spec) for a in program.assigns]
    if not any(pt["kind"] == "ids" for pt in parts):
        raise _NoFit("no rows scattered by an integer tensor")
    xs = {pt["x"] for pt in parts}
    if len(xs) != 1:
        raise _NoFit("the scattered rows come from more than one tensor")
    (xname,) = xs
    cols = {str(pt["cols"]) for pt in parts if pt["cols"] is not None}
    if len(cols) != 1:
        raise _NoFit("the outputs' rows differ in length")
    (width,) = cols
    p = _bind(tu, k, spec, "scatter", "lifted")
    r = _Renderer(p, spec, lambda e: "")
    x = _tensor(p, xname)
    xt = spec.tensor_named(xname)
    for pt in parts:  # every index map checked against the rows model at every size set
        _check(pt, spec, width, xt)
    for sset in spec.all_size_sets():
        c = int(value_of(width, sset))
        if c > MAX_COLS:
            raise _NoFit(f"rows of {c} elements (at {sset}) exceed one partition's {MAX_COLS}")

    def nki(v: Any) -> str:
        return _bare(r.number(v).name or "") if isinstance(v, str) else str(v)

    def rows_of(shape: list[str]) -> str:  # elements over the row length
        def factor(d: str) -> str:
            return d if re.fullmatch(r"[\w.\[\]]+", d) else f"({d})"

        if len(shape) > 1 and _bare(f"({shape[-1]})") == c_nki:  # [..., C]: the leading axes
            return " * ".join(factor(d) for d in shape[:-1])
        whole = " * ".join(factor(d) for d in shape)
        return f"{whole} // {c_nki}" if re.fullmatch(r"\w+", c_nki) else f"{whole} // ({c_nki})"

    c_nki = nki(width)
    outs = []
    for n, pt in enumerate(parts):
        o = _carrying_tensor(p, pt["a"].tensor, pt["carried"])
        entry = {"var": o.var, "tensor": pt["a"].tensor, "view": f"{o.name}_rows", "rows": f"R{n}",
                 "rows_expr": rows_of(o.shape),
                 "in_view": o.name if pt["carried"] is not None else None,
                 "kind": pt["kind"], "note": _lift_note(k, Program(assigns=[pt["a"]]))}  # fmt: skip
        if pt["kind"] == "ids":
            ids = _tensor(p, pt["ids"])
            entry["ids"] = ids.name
            entry["ids_dtype"] = f"{ids.name}.dtype"
            if ids.nl_dtype not in ("nl.int32", "nl.uint32"):
                raise _NoFit(f"{ids.name} is not a tensor of 32-bit integers")
        outs.append(entry)
    p.constants = {"P_TILE": PMAX, "MAX_COLS": MAX_COLS, "F_TILE": MOVING_FMAX}
    p.notes = {
        "old": note(k.span, "each output starts from its old value (zeros where it has none)"),
        "rows": note(k.span, "128 rows of the scattered tensor per tile, one per partition, "
                     "loaded once for every output"),
        "ids": note(k.span, "rows added at the row each id names: an atomic read-modify-write "
                    "DMA, every contribution to a repeated id summed"),
        "mod": note(k.span, "rows added at their position modulo the output's rows (a sum over "
                    "the leading axis), by the same DMA"),
        "new_dialect": note(k.span, "the new dialect's scatter DMA (dma_compute) takes unique "
                            "indices only, and ids repeat: per tile of output rows, the one-hot "
                            "rows of the ids times the input's rows on TensorE, accumulated "
                            "in PSUM over the input's row tiles"),
        "ids_new": note(k.span, "each row's id, made relative to this tile of output rows"),
        "mod_new": note(k.span, "each row's position modulo the output's rows (iota)"),
    }  # fmt: skip
    p.fields.update({
        "summary": _clip("; ".join(a.render() for a in program.assigns), 300),
        "x": x.name, "k_rows_expr": rows_of(x.shape), "cols": c_nki,
        "outs": outs, "uses_isa": any(o["kind"] == "mod" for o in outs),
        "x_f32": x.nl_dtype == "nl.float32",
        "constant_notes": {"P_TILE": "rows per tile (partitions)",
                           "MAX_COLS": "longest row kept whole on a partition",
                           "F_TILE": "columns per PSUM accumulation (new dialect)"},
    })  # fmt: skip
    return p


def _part(a: Any, spec: TaskSpec) -> dict[str, Any]:
    """One output's scatter: its kind (`ids`: rows by an integer tensor, `mod`: a sum over the
    leading axis), the rows' tensor, the row length where the program shows it."""
    own = a.vars

    def is_old(ld: Expr) -> bool:
        return [m.render() for m in ld.index] == own

    body, kv, carried = _sum_plus_old(a, is_old, "a scatter-add")
    out_rank = len(spec.tensor_named(a.tensor).shape)
    if out_rank != len(own) or out_rank not in (1, 2):
        raise _NoFit(f"{a.tensor} is neither rows nor flat rows")
    if body.kind == "op" and body.op == "select" and body.name == "==":
        key, coord, x, zero = body.args
        if coord.kind != "coord":
            key, coord = coord, key
        if coord.kind != "coord" or key.kind != "load" or x.kind != "load":
            raise _NoFit("not rows added where an integer tensor names them")
        if zero.kind != "const" or zero.value != 0:
            raise _NoFit("a select whose other branch is not 0")
        (m,) = coord.index
        if len(m.terms) != 1 or m.const != 0 or m.gather is not None:
            raise _NoFit(f"the compared coordinate {m.render()} is no row of the output")
        t = m.terms[0]
        if t.var != own[0] or t.coef != 1 or t.mod is not None:
            raise _NoFit(f"the compared coordinate {m.render()} is no row of the output")
        if out_rank == 2 and t.div is not None:
            raise _NoFit(f"the compared coordinate {m.render()} is no row of the output")
        # (a flat output compared at i itself: one element per id, a weighted histogram)
        cols = spec.tensor_named(a.tensor).shape[1] if out_rank == 2 else (t.div or 1)
        return {"a": a, "kind": "ids", "kv": kv, "key": key, "ids": key.tensor, "x": x.tensor,
                "load": x, "row": m, "cols": cols, "carried": carried}  # fmt: skip
    if body.kind == "load":
        cols = spec.tensor_named(a.tensor).shape[1] if out_rank == 2 else None
        return {"a": a, "kind": "mod", "kv": kv, "x": body.tensor, "load": body,
                "cols": cols, "carried": carried}  # fmt: skip
    raise _NoFit("not rows added at rows an integer tensor names, nor a sum over leading rows")


def _value(m: IndexMap, env: dict[str, np.ndarray], sset: dict[str, int]) -> np.ndarray:
    out = np.full(next(iter(env.values())).shape, int(value_of(m.const, sset)), dtype=np.int64)
    for t in m.terms:
        v = env[t.var]
        if t.div is not None:
            v = v // int(value_of(t.div, sset))
        if t.mod is not None:
            v = v % int(value_of(t.mod, sset))
        out = out + int(value_of(t.coef, sset)) * v
    return out


def _flat(ld: Expr, spec: TaskSpec, env: dict[str, np.ndarray], sset: dict[str, int]) -> Any:
    if any(m.gather is not None for m in ld.index):
        return None
    dims = spec.shape_of(spec.tensor_named(ld.tensor or ""), sset)
    if len(dims) != len(ld.index):
        return None
    pos = np.zeros(next(iter(env.values())).shape, dtype=np.int64)
    for m, d in zip(ld.index, dims, strict=True):
        pos = pos * d + _value(m, env, sset)
    return pos


def _check(pt: dict[str, Any], spec: TaskSpec, width: Any, xt: Any) -> None:
    """The part's index maps against its model at sample positions of every size set: the
    output's flat position p is row p // C, column p % C; x is read at row k (ids: the id at
    k is compared with the row) or at row b * R + p // C (mod: R the output's rows)."""
    a = pt["a"]
    o = spec.tensor_named(a.tensor)
    red = next(e for e in a.expr.walk() if e.kind == "reduce")
    rng = np.random.default_rng(0)
    for sset in spec.all_size_sets():
        c = int(value_of(width, sset))
        n_out = math.prod(spec.shape_of(o, sset))
        n_x = math.prod(spec.shape_of(xt, sset))
        if c <= 0 or n_out % c or n_x % c:
            raise _NoFit(f"{a.tensor} or {xt.name} is not whole rows of {c} (at {sset})")
        rows, k_rows = n_out // c, n_x // c
        extent = int(value_of(red.extent, sset))
        p = rng.integers(0, n_out, SAMPLES)
        kk = rng.integers(0, extent, SAMPLES)
        env = {pt["kv"]: kk}
        if len(a.vars) == 2:
            env.update({a.vars[0]: p // c, a.vars[1]: p % c})
        else:
            env[a.vars[0]] = p
        if pt["kind"] == "ids":
            want_x = kk * c + p % c
            key_at = _flat(pt["key"], spec, env, sset)
            ids_n = math.prod(spec.shape_of(spec.tensor_named(pt["ids"]), sset))
            ok = key_at is not None and np.array_equal(key_at, kk) and extent == k_rows == ids_n
            ok = ok and np.array_equal(_value(pt["row"], env, sset), p // c)
        else:
            want_x = (kk * rows + p // c) * c + p % c
            ok = extent * rows == k_rows
        got_x = _flat(pt["load"], spec, env, sset)
        if not ok or got_x is None or not np.array_equal(got_x, want_x):
            raise _NoFit(f"{a.tensor}: the rows read are not those the {pt['kind']} model "
                         f"reads (at {sset})")  # fmt: skip
