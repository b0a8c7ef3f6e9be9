"""Lowering rules over lifted tensor programs (`migrator.lift`): a family by what a kernel
computes, whatever its CUDA spelling.

Each rule looks at the verified program's shape and fills the plan of a template:

- map: every load reads the output element itself (`x[i]`, `x[i, j]`), a row vector (`b[j]`) or
  a column vector (`s[i]`) -> the elementwise template;
- transpose: `out[i, j] = x[j, i]` -> the transpose template;
- matmul: `f(sum_k A[i, k] * B[k, j])` with either operand stored transposed, and any epilogue
  `f` over the accumulator and loads at the output element, its row or its column -> the matmul
  template (PSUM accumulation over K tiles);
- total: `out[0] = sum_k f(x[k], y[k])` (plus the old `out[0]` where the kernel accumulates
  into it with atomics) -> per-partition sums, then one ones-vector matmul across partitions;
- columns: `out[j] = sum_k f(x[k, j])` (plus the old `out[j]`: a bias gradient) -> row tiles
  on the partitions, each summed across them by a ones-vector matmul into PSUM;
- rows: `out[i, j]` (or a row result `out[i]`) from reductions along the row of 2-D inputs
  (`sum_k`, `max_k` of anything computed from `x[i, k]`) and a map of the row -> one row per
  partition, each reduction one free-axis instruction (softmax, layernorm, rmsnorm ... in any
  spelling).

A program no rule fits raises `PlanError` whose diagnostic shows the program, so the report says
what the kernel computes and why it was not emitted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from migrator import diagnostics as diag
from migrator import nkiexpr
from migrator.contract import TaskSpec, np_dtype, paired_sizes
from migrator.cuda.ir import Expr as CExpr
from migrator.cuda.ir import IndexExpr, Kernel, TranslationUnit
from migrator.lift.program import (
    Assign,
    Expr,
    Gather,
    IndexMap,
    Program,
    Term,
    index_maps,
    index_terms,
    negated,
    select_as_difference,
    value_of,
)
from migrator.nkiexpr import Untranslatable
from migrator.plan import (
    ELEMENTWISE_FREE,
    MAX_ROW_FREE,
    MOVING_FMAX,
    PMAX,
    PSUM_BANKS,
    SIZE_RESERVED,
    STATIONARY_FMAX,
    Plan,
    PlanError,
    bind,
    note,
)

_CALL = {"exp": "expf", "exp2": "exp2f", "log": "logf", "log2": "log2f", "sqrt": "sqrtf",
         "tanh": "tanhf", "sin": "sinf", "cos": "cosf", "erf": "erff", "abs": "fabsf",
         "max": "fmaxf", "min": "fminf", "pow": "powf"}  # fmt: skip


def plan_program(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    """The plan of the first lowering rule that fits `program`."""
    why: list[str] = []
    ragged = any(r.upto is not None for a in program.assigns for r in _reduces(a.expr))
    # (these build on this module)
    from migrator.patterns.lifted_attention import attention
    from migrator.patterns.lifted_batched import batched_matmul
    from migrator.patterns.lifted_causal import causal_rows
    from migrator.patterns.lifted_conv import padded_loads, weighted_window
    from migrator.patterns.lifted_histogram import histogram
    from migrator.patterns.lifted_permute import permute
    from migrator.patterns.lifted_scatter import scatter
    from migrator.patterns.lifted_scores import scores
    from migrator.patterns.lifted_window import window

    plain = (histogram, _map, _transpose, permute, _matmul, attention, scores, batched_matmul,
             window, weighted_window, _rows, _total, _columns, scatter)  # fmt: skip
    rules = (causal_rows, _scan, attention, batched_matmul) if ragged else plain
    if padded_loads(program):  # (reads past an input that give 0: a rule that pads them)
        rules = (weighted_window,)
    for rule in rules:
        try:
            return rule(program, tu, k, spec)
        except _NoFit as e:
            why.append(f"{rule.__name__.strip('_')}: {e}")
        except PlanError as e:  # (the contract side refused: a size no input's shape holds)
            said = e.diagnostic.message
            if not any(said in w for w in why):
                why.append(f"{rule.__name__.strip('_')}: {said}")
    raise PlanError(
        diag.make(
            "NOT_EMITTED",
            k.span,
            what=f"the lifted program `{_clip(program.render())}` (no lowering rule fits: "
            + "; ".join(why)
            + ")",
        )
    )


class _NoFit(ValueError):
    pass


def _the_output(program: Program, rank: int | None = None) -> Assign:
    """The program's one assignment, of `rank` output coordinates where given (1: a vector,
    2: a matrix); _NoFit for any other."""
    if len(program.assigns) != 1:
        raise _NoFit("more than one output")
    a = program.assigns[0]
    if rank is not None and len(a.vars) != rank:
        raise _NoFit(f"the output is not a {'vector' if rank == 1 else 'matrix'}")
    return a


def _clip(s: str, n: int = 240) -> str:
    s = s.replace("\n", "; ")
    return s if len(s) <= n else s[: n - 1] + "…"


# --- shapes of index maps ------------------------------------------------------------------------
def _unit_var(m: IndexMap) -> str | None:
    """The variable a coordinate is exactly (`k`), or None (`k + 1`, `2*k`, `k % 4` ...)."""
    if m.gather is not None or m.const != 0 or len(m.terms) != 1:
        return None
    t = m.terms[0]
    return t.var if t.coef == 1 and t.div is None and t.mod is None else None


def _is_var(m: IndexMap, var: str) -> bool:
    return _unit_var(m) == var


def _axis_of(ld: Expr, var: str) -> int | None:
    """The axis of a load whose index is exactly `var`, or None."""
    return next((j for j, m in enumerate(ld.index) if _unit_var(m) == var), None)


def _const_index(m: IndexMap, r: _Renderer) -> str | None:
    """A fixed index as NKI text (`1`, `NH`), or None where the index moves."""
    if m.terms or m.gather is not None:
        return None
    c = m.const
    return _bare(r.number(c).text) if isinstance(c, str) else str(int(c))


def _index_text(ld: Expr, names: dict[str, str], r: _Renderer) -> str:
    """A load's index in NKI: each coordinate by `names` (a loop variable, a slice, an
    arange), each fixed index as itself; _NoFit for any other index."""
    parts = []
    for m in ld.index:
        var, const = _unit_var(m), _const_index(m, r)
        if var is not None and var in names:
            parts.append(names[var])
        elif const is not None:
            parts.append(const)
        else:
            raise _NoFit(f"{ld.render()}: an index other than a coordinate or a constant")
    return ", ".join(parts)


def _float32_only(tensors: Any, what: str) -> None:
    for t in tensors:
        if t.dtype != "float32":
            raise _NoFit(f"{t.name} is {t.dtype}: {what} emitted for float32 tensors")


def _reads(e: Expr, *vars_: str) -> bool:
    """Whether the load reads exactly `tensor[vars...]`."""
    return [_unit_var(m) for m in e.index] == list(vars_)


def _offset_reads(ld: Expr, vars_: list[str], offs: list[str], r: _Renderer) -> bool:
    """Whether `ld` reads `tensor[v0 + c0, v1 + c1, ...]` with each c a constant or a size
    expression; the offsets go in `offs` as NKI source ("" for none)."""
    if len(ld.index) != len(vars_):
        return False
    for d, (m, v) in enumerate(zip(ld.index, vars_, strict=True)):
        if m.gather is not None:
            return False
        bare = IndexMap(terms=m.terms)
        if _unit_var(bare) != v:
            return False
        if m.const != 0:
            c = r.number(m.const)
            offs[d] = str(int(c.value)) if c.kind == "const" and c.value is not None \
                else c.name or ""  # fmt: skip
    return True


def _loads(e: Expr) -> list[Expr]:
    return [n for n in e.walk() if n.kind == "load"]


def _reduces(e: Expr) -> list[Expr]:
    return [n for n in e.walk() if n.kind == "reduce"]


# --- lifted expression -> CUDA-IR expression, rendered by nkiexpr --------------------------------
class _Renderer:
    """Renders lifted expressions through `nkiexpr` (activations recognised, maxNum selects,
    scalar fusion), naming each load's tile with `tile_of` and sizes as the NKI kernel does."""

    def __init__(self, p: Plan, spec: TaskSpec, tile_of: Callable[[Expr], str],
                 coord_of: Callable[[Expr], str] | None = None) -> None:  # fmt: skip
        self.p = p
        self.tile_of = tile_of
        self.coord_of = coord_of  # an output coordinate's tile, where a rule provides one
        self.sizes = {n: (f"{n}_" if n in SIZE_RESERVED else n) for n in spec.sizes}
        # a size expression that is a whole dimension of an input (`C / NH` of a packed
        # [B, T, 3, NH, C / NH] tensor) is read from its shape: C alone may be readable nowhere
        self.dims: dict[str, str] = {}
        for t in spec.inputs_in_order:
            arg = _tensor_or_none(p, t.name)
            for j, d in enumerate(t.shape):
                text = str(d)
                if arg is not None and not re.fullmatch(r"\w+", text):
                    self.dims.setdefault(text, f"{arg.name}.shape[{j}]")
        # (a scalar named by a Python keyword is the NKI kernel's `name_`, as bind renames it)
        self.params = {s.name: s.nki_kwarg for s in spec.scalars if s.value is not None}
        # a rule whose tiles are rows sets it: which factors are one value per row ([P, 1]),
        # multiplied together before they meet a whole row (one full-row instruction for each
        # row-wide factor, not one for each factor after the first row-wide one)
        self.per_row: Callable[[Expr], bool] | None = None
        self.by_key: dict[str, Expr] = {}
        self.tiles: set[str] = set()  # params that name a tile (a coordinate's), no scalar
        self.reduced: dict[str, str] = {}  # key of a reduce node -> NKI expression

    def number(self, v: Any) -> CExpr:
        if isinstance(v, str):
            src = v
            for text in sorted(self.dims, key=len, reverse=True):
                src = src.replace(text, self.dims[text])
            for n, nki in self.sizes.items():
                src = _replace_word(src, n, nki)
            name = f"({src})"
            self.params.setdefault(name, name)
            return CExpr(kind="param", name=name, text=name)
        return CExpr(kind="const", value=float(v), dtype="float", text=repr(float(v)))

    def convert(self, e: Expr) -> CExpr:
        k = e.kind
        if k == "const":
            return self.number(e.value)
        if k == "param":
            return CExpr(kind="param", name=e.name, text=e.name or "")
        if k == "coord":
            if self.coord_of is None:
                raise Untranslatable(f"the coordinate {e.render()} (a mask by position)")
            name = self.coord_of(e)
            self.params.setdefault(name, name)
            self.tiles.add(name)
            return CExpr(kind="param", name=name, text=name)
        if k == "load":
            key = e.render()
            self.by_key[key] = e
            return CExpr(kind="load", name=key, space="global", text=key,
                         index=[IndexExpr(text=key, affine=False, canonical=key)])  # fmt: skip
        if k == "reduce":
            key = reduce_key(e)
            if key not in self.reduced:
                raise Untranslatable(f"a reduction {e.render()} where none is expected")
            name = self.reduced[key]
            self.params.setdefault(name, name)
            return CExpr(kind="param", name=name, text=name)
        if e.op == "+":  # `x + (-1 * y)` as `x - y`
            terms = e.args
            if self.per_row is not None:  # a row's values added last: one fused instruction
                terms = sorted(e.args, key=lambda a: self.per_row(negated(a) or a))  # type: ignore[misc]
            pos = [self.convert(a) for a in terms if negated(a) is None]
            neg = [self.convert(n) for a in terms if (n := negated(a)) is not None]
            acc = pos[0] if pos else CExpr(kind="unary", op="-", args=[neg.pop(0)], text="-")
            for a in pos[1:]:
                acc = CExpr(kind="binary", op="+", args=[acc, a], text="+")
            for a in neg:
                acc = CExpr(kind="binary", op="-", args=[acc, a], text="-")
            return acc
        if e.op == "select" and (split := select_as_difference(e)) is not None:
            return self.convert(split)  # (before its branches are converted as they stand)
        ordered = e.args
        if e.op == "*" and self.per_row is not None:
            ordered = sorted(e.args, key=lambda a: not self.per_row(a))  # type: ignore[misc]
        op, args = e.op or "", [self.convert(a) for a in ordered]
        if op in ("+", "*"):
            acc = args[0]
            for a in args[1:]:
                acc = CExpr(kind="binary", op=op, args=[acc, a], text=op)
            return acc
        if op in ("-", "/"):
            return CExpr(kind="binary", op=op, args=args, text=op)
        if op == "neg":
            return CExpr(kind="unary", op="-", args=args, text="-")
        if op == "select":
            cond = CExpr(kind="binary", op=e.name, args=args[:2], text=e.name or "")
            return CExpr(kind="select", args=[cond, args[2], args[3]], text="?:")
        if op in ("max", "min") and len(args) > 2:
            acc = args[0]
            for a in args[1:]:
                acc = CExpr(kind="call", op=_CALL[op], args=[acc, a], text=op)
            return acc
        if op in _CALL:
            return CExpr(kind="call", op=_CALL[op], args=args, text=op)
        raise Untranslatable(f"the operation {op} has no NKI rendering")

    def dialects(self, e: Expr) -> dict[str, str]:
        """`e` for each dialect: `expr` as plain nl ops (the new one), `legacy` fused."""
        return {"expr": self.render(e), "legacy": self.render(e, fuse=True)}

    def render(self, e: Expr, fuse: bool = False) -> str:
        c = self.convert(e)
        if not (fuse and self.per_row is not None):
            return nkiexpr.render(c, lambda ld: self.tile_of(self.by_key[ld.name or ""]),
                                  self.params, fuse=fuse)  # fmt: skip
        per_row = self.per_row

        def scalar(n: CExpr) -> bool:  # [P, 1]: a row's statistic, reduction or scalar
            if n.kind == "load":
                return per_row(self.by_key[n.name or ""])
            return n.name not in self.tiles

        def wide(n: CExpr) -> bool:  # a whole row tile, [P, F]
            if n.kind != "load":
                return False
            ld = self.by_key[n.name or ""]
            return len(ld.index) == 2 and _unit_var(ld.index[1]) not in (None, "i")

        return nkiexpr.render(c, lambda ld: self.tile_of(self.by_key[ld.name or ""]),
                              self.params, fuse=True, scalar=scalar, wide=wide,
                              dtype="nl.float32")  # fmt: skip


def reduce_key(e: Expr) -> str:
    """A reduction's identity whatever its variables are called (`max_q x[i, q]` is
    `max_r x[i, r]`, and a sum of exp(x - max_q ...) the same sum of exp(x - max_r ...)):
    computed once however often the program uses it."""
    text = e.render()
    bound = [x.var for x in e.walk() if x.kind == "reduce" and x.var]
    for n, v in enumerate(dict.fromkeys(bound)):  # (a tensor of that name is followed by `[`)
        text = re.sub(rf"\b{re.escape(v)}\b(?!\[)", f"_{n}", text)
    return text


def _replace_word(src: str, word: str, new: str) -> str:
    return re.sub(rf"\b{re.escape(word)}\b", new, src) if word != new else src


def _bind(tu: TranslationUnit, k: Kernel, spec: TaskSpec, family: str, variant: str) -> Plan:
    p = bind(tu, k, spec, family, variant)
    p.fields["lifted"] = True
    return p


def _tensor_or_none(p: Plan, name: str | None) -> Any:
    # (`name_`: a tensor named by a Python keyword, renamed at bind time)
    return next((t for t in p.tensors if t.name in (name, f"{name}_in", f"{name}_")), None)


def _tensor(p: Plan, name: str | None) -> Any:
    t = _tensor_or_none(p, name)
    if t is None:
        raise _NoFit(f"{name} is not a tensor of the task")
    return t


def _lift_note(k: Kernel, program: Program) -> str:
    return note(k.span, f"lifted: {_clip(program.render(), 160)}")


# --- map ---------------------------------------------------------------------------------------
def _map(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    ndims = {len(a.vars) for a in program.assigns}
    if len(ndims) != 1:
        raise _NoFit("outputs of different ranks")
    if any(_reduces(a.expr) for a in program.assigns):
        raise _NoFit("it reduces")
    shape0 = [str(d) for d in spec.tensor_named(program.assigns[0].tensor).shape]
    reshaped: set[str] = set()
    flat: tuple[Program, set[str], Any] | None = None
    collapsed = ndims.pop() > 2
    if collapsed:  # [B*NH, T, T]: rows of the last axis, the others' coordinates by position
        program, reshaped = _collapsed(program, shape0)
    else:
        flat = _flat_rows(program)  # `bias[i % OC]` over a flat output: a [rows, OC] view
        if flat is not None:
            program, reshaped = flat[0], flat[1]
    first = program.assigns[0]
    two_d = len(first.vars) == 2
    shapes = {tuple(spec.shape_of(spec.tensor_named(a.tensor),
                                  spec.sizes)) for a in program.assigns}  # fmt: skip
    if len(shapes) != 1:
        raise _NoFit("outputs of different shapes")
    p = _bind(tu, k, spec, "elementwise", "lifted")
    loads: dict[str, dict[str, Any]] = {}
    flat_len = flat[2] if flat is not None else None
    out0 = _tensor(p, first.tensor)
    rows_expr = f"({out0.shape[0]}) // {flat_len}" if flat is not None else None
    if collapsed:
        rows_expr = " * ".join(str(d) for d in out0.shape[:-1])
        flat_len = out0.shape[-1]
    coords: dict[str, dict[str, Any]] = {}  # coordinate tiles a mask compares

    def coord_of(e: Expr) -> str:
        """The int32 tile of an output coordinate (`j`, `i`, `i % T`) for the tile's elements,
        or of a row's index (`targets[i]`: cross-entropy's gradient compares the column with
        the row's label), one per partition."""
        (m,) = e.index
        g = m.gather
        if (g is not None and not m.terms and m.const == 0 and g.coef == 1 and two_d
                and flat is None and len(g.index) == 1 and _is_var(g.index[0], "i")):  # fmt: skip
            return tile_of(Expr(kind="load", tensor=g.tensor, index=[g.index[0]]))
        if len(m.terms) != 1 or m.const != 0 or m.gather is not None:
            raise Untranslatable(f"the coordinate expression {m.render()}")
        (t,) = m.terms
        # the column itself, or the row taken modulo an extent (`i % T`)
        if (
            t.coef != 1
            or t.div is not None
            or t.var not in ("i", "j")
            or (t.var == "j" and t.mod is not None)
        ):
            raise Untranslatable(f"the coordinate expression {m.render()}")
        if flat is not None or not two_d:
            raise Untranslatable("a coordinate of a flat output")
        axis = "col" if t.var == "j" else "row"
        mod = _bare(r.number(t.mod).text) if t.mod is not None else None
        key = f"{axis}:{mod}"
        if key not in coords:
            name = "col_ids" if axis == "col" else f"row_ids{'_' + str(len(coords)) if mod else ''}"
            coords[key] = {"var": name, "axis": axis, "mod": mod}
        return str(coords[key]["var"])

    def view(name: str) -> str:  # a flat tensor as its [rows, L] view
        return f"{name}.reshape(({rows_expr}, {flat_len}))"

    segments: set[str] = set()  # T where a row reads row `i % T` of a [T, cols] tensor
    row_loads: dict[str, dict[str, Any]] = {}  # index tensors of gathers, one load per row tile

    def ids_of(g: Gather) -> str:
        """The tile of a gather's index values for the rows of a tile."""
        m = g.index[0] if len(g.index) == 1 else None
        if g.coef != 1 or m is None:
            raise Untranslatable(f"{g.render()} is no row gather (`ids[i]`)")
        local = _mod_of(m, "i")
        if not _is_var(m, "i") and local is None:
            raise Untranslatable(f"{g.render()}: a gather by other than the output row")
        if local is not None:
            segments.add(local)
        it = _tensor(p, g.tensor)
        key = f"{it.name}:{local}"
        if key not in row_loads:
            row_loads[key] = {"tensor": it.name, "var": f"{it.name}_ids",
                              "index": "i_s" if local else "i_p"}  # fmt: skip
        return str(row_loads[key]["var"])

    # `x[S*i + ids[i]]`: one element of each row of a flat table, by index; the outputs then
    # go one element per partition, as the picked elements do
    pick_mode = not two_d and any(m.gather is not None for a in program.assigns
                                  for ld in _loads(a.expr) for m in ld.index)  # fmt: skip
    picks: dict[str, dict[str, Any]] = {}
    two_axes: set[str] = set()  # tables of two axes a pick reads (no new-dialect form yet)

    def pick_of(ld: Expr) -> str:
        t = _tensor(p, ld.tensor)
        bad = Untranslatable(f"{ld.render()} is not a row's element by index (`x[S*i + ids[i]]` "
                             "or `x[i, ids[i]]`)")  # fmt: skip
        m = ld.index[-1]
        g = m.gather
        if g is None or g.coef != 1 or len(g.index) != 1 or not _is_var(g.index[0], "i"):
            raise bad
        if len(ld.index) == 2:  # a 2-D table: rows of x.shape[1], viewed flat
            if not _is_var(ld.index[0], "i") or m.terms or m.const != 0:
                raise bad
            stride = f"{t.name}.shape[1]"
            flat_view = f"{t.name}.reshape(({t.name}.shape[0] * {t.name}.shape[1], 1))"
            two_axes.add(t.name)
        else:
            unit = [x for x in m.terms if x.var == "i" and x.div is None and x.mod is None]
            if len(m.terms) != len(unit) or len(unit) > 1 or m.const != 0:
                raise bad
            # (no row term: `w[ids[i]]`, an element of a vector by index)
            stride = _bare(r.number(unit[0].coef).text) if unit else None
            flat_view = f"{t.name}.reshape(({t.name}.shape[0], 1))"
        it = _tensor(p, g.tensor)
        key = ld.render()
        if key not in picks:
            picks[key] = {"tensor": t.name, "ids_tensor": it.name, "ids": f"{it.name}_ids",
                          "stride": stride, "flat_view": flat_view,
                          "var": f"{t.name}_at_{it.name}"}  # fmt: skip
        return str(picks[key]["var"])

    def tile_of(ld: Expr) -> str:
        t = _tensor(p, ld.tensor)
        offs = ["", ""]
        ids = None
        if pick_mode and any(m.gather is not None for m in ld.index):
            return pick_of(ld)
        if pick_mode:
            if not _reads(ld, "i"):
                raise Untranslatable(f"{ld.render()} beside a picked element: not the element")
            key = f"{t.name}:i_p"
            loads.setdefault(key, {"tensor": t.name, "var": f"{t.name}_tile", "index": "i_p",
                                   "ids": None, "masked": True})  # fmt: skip
            return str(loads[key]["var"])
        if (
            two_d
            and len(ld.index) == 2
            and _is_var(ld.index[1], "j")
            and (g := ld.index[0].gather) is not None
        ):
            if ld.index[0].terms or ld.index[0].const != 0:
                raise Untranslatable(f"{ld.render()}: a gathered row plus an offset")
            index, ids = "gather", ids_of(g)
        elif (
            two_d
            and len(ld.index) == 2
            and _is_var(ld.index[1], "j")
            and (seg := _mod_of(ld.index[0], "i")) is not None
        ):
            segments.add(seg)
            index = "i_s, i_f"
        elif two_d and _reads(ld, "j"):
            index = "i_f"
        elif two_d and _reads(ld, "i"):
            index = "i_p"
        elif _offset_reads(ld, ["i", "j"] if two_d else ["i"], offs, r):
            index = "i_p, i_f" if two_d else "idx"  # the element, or a fixed shift of it
        else:
            raise Untranslatable(f"{ld.render()} is not the output element, its row or column")
        key = f"{t.name}:{index}:{offs}:{ids}"
        if key not in loads:
            var = f"{t.name}_tile" if not any(v["tensor"] == t.name for v in loads.values()) \
                else f"{t.name}_{len(loads)}"  # fmt: skip
            src = view(t.name) if ld.tensor in reshaped and index == "i_p, i_f" else t.name
            loads[key] = {"tensor": src, "var": var, "index": index, "ids": ids,
                          "masked": index in ("idx", "i_p, i_f", "i_s, i_f", "gather")}  # fmt: skip
            if two_d:
                loads[key].update(row_off=offs[0] or None, col_off=offs[1] or None)
            else:
                loads[key]["off"] = offs[0] or None
        return loads[key]["var"]

    r = _Renderer(p, spec, tile_of, coord_of)
    stores = []
    try:
        for a in program.assigns:
            out = _tensor(p, a.tensor)
            expr = r.render(a.expr)
            legacy = r.render(a.expr, fuse=True)
            dst = view(out.var) if a.tensor in reshaped else out.var
            stores.append({"tensor": out.name, "var": dst, "expr": expr, "legacy": legacy,
                           "local": None, "local_legacy": None,
                           "note": _lift_note(k, Program(assigns=[a]))})  # fmt: skip
    except Untranslatable as e:
        raise _NoFit(str(e)) from e
    out = _tensor(p, first.tensor)
    p.constants = {"P_TILE": PMAX, "F_TILE": ELEMENTWISE_FREE}
    p.notes = {"index": note(k.span, "one output element per CUDA thread (lifted program)"),
               "guard": note(k.span, "the kernel's bounds become the tile mask")}  # fmt: skip
    p.fields.update({
        "uses_isa": any("nisa." in s["legacy"] for s in stores),
        "kind": "2d" if two_d else "1d",
        "summary": "; ".join(a.render() for a in program.assigns),
        "loads": list(loads.values()),
        "stores": stores,
        "size_params": {},
        "constant_notes": {"P_TILE": "partitions per tile (nl.tile_size.pmax)",
                           "F_TILE": "elements per partition per tile: 2 KiB fp32 DMAs"},
    })  # fmt: skip
    p.fields["coords"] = list(coords.values())
    p.fields["uses_isa"] = p.fields["uses_isa"] or bool(coords)  # (nisa.iota)
    if coords and (segments or row_loads or picks or p.fields["kind"] != "2d"):
        raise _NoFit("a mask by coordinates beside rows read by position or index")
    if flat is not None or collapsed:
        p.fields["rows"], p.fields["cols"] = rows_expr, str(flat_len)
    elif two_d:
        p.fields["rows"], p.fields["cols"] = out.shape[0], out.shape[1]
    else:
        p.fields["extent"] = out.shape[0]
    if len(segments) > 1:
        raise _NoFit(f"rows read by position in blocks of different lengths ({sorted(segments)})")
    p.fields["segment"] = _bare(r.number(segments.pop()).text) if segments else None
    p.fields["row_loads"] = list(row_loads.values())
    p.fields["picks"] = list(picks.values())
    p.fields["pick_ids"] = sorted({(q["ids_tensor"], q["ids"]) for q in picks.values()})
    if picks:
        p.fields["kind"] = "1d_picks"
        if two_axes:  # `.ap(vector_offset=)` steps whole rows of the storage: legacy only
            p.variant = PICK_FROM_ROWS
        p.fields["uses_isa"] = True
        p.notes["picks"] = note(k.span, "each row's element picked by index: its flat position "
                                "(row start + index, exact int32 on GpSimd) gathered by "
                                "indirect DMA; every index must lie inside its row")  # fmt: skip
    if row_loads:
        p.notes["gather"] = note(k.span, "rows gathered by index (indirect DMA): every index "
                                 "must lie inside its table, as in the CUDA original")  # fmt: skip
    return p


PICK_FROM_ROWS = "lifted-pick-2d"  # elements picked from a 2-D table (emit.UNSUPPORTED_NEW)


def _bare(text: str) -> str:
    """A rendered size without the parentheses around a single name (`(T)` -> `T`); an
    expression keeps them (`(C * T)`: templates divide by it)."""
    return text[1:-1] if re.fullmatch(r"\(\w+\)", text) else text


def _mod_of(m: IndexMap, var: str, literal: bool = False) -> str | None:
    """T where the coordinate is exactly `var % T` for a size T (the row's place in its block),
    or for a literal T too where `literal`."""
    if m.gather is not None or m.const != 0 or len(m.terms) != 1:
        return None
    t = m.terms[0]
    kinds = (str, int) if literal else (str,)
    ok = t.var == var and t.coef == 1 and t.div is None and isinstance(t.mod, kinds)
    return str(t.mod) if ok else None


# --- scan --------------------------------------------------------------------------------------
def _scan(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    """A running sum along rows: `out[i, j] = sum_{k < j + 1} x[i, k]`, or over a flat array in
    runs of L (`out[i] = sum_{k < (i % L) + 1} x[k + L*(i // L)]`, one CUDA block's scan each):
    the rows on the partitions, each scanned along the free axis by one instruction."""
    a = _the_output(program)
    e = a.expr
    if e.kind != "reduce" or e.upto is None or e.op != "sum":
        raise _NoFit("not a running sum")
    body = e.args[0]
    kv = e.var or ""
    if body.kind != "load":
        raise _NoFit(f"a running sum of {body.render()}, not of a tensor's elements")
    p = _bind(tu, k, spec, "scan", "lifted")
    x, out = _tensor(p, body.tensor), _tensor(p, a.tensor)
    r = _Renderer(p, spec, lambda ld: "")
    if len(a.vars) == 2:
        if not (_is_var(IndexMap(terms=e.upto.terms), "j") and e.upto.const == 1
                and _reads(body, "i", kv)):  # fmt: skip
            raise _NoFit(f"not a running sum along the rows ({_clip(e.render(), 100)})")
        p.fields.update({"kind": "2d", "rows": x.shape[0], "cols": x.shape[1]})
    elif len(a.vars) == 1:
        # (a literal run length: a block size)
        run = _mod_of(IndexMap(terms=e.upto.terms), "i", literal=True) if e.upto.const == 1 \
            else None  # fmt: skip
        (m,) = body.index if len(body.index) == 1 else (None,)
        want = {("i", run, None), (kv, None, 1)}
        got = {(t.var, str(t.div) if t.div is not None else None, t.coef if t.var == kv else None)
               for t in m.terms} if m is not None else set()  # fmt: skip
        steps = {str(t.coef) for t in (m.terms if m is not None else []) if t.var == "i"}
        if run is None or m is None or m.const != 0 or got != want or steps != {run}:
            raise _NoFit(f"not runs of a flat array ({_clip(e.render(), 100)})")
        if run.isdigit() and int(run) > MAX_ROW_FREE:
            raise _NoFit(f"runs of {run} elements exceed one partition's {MAX_ROW_FREE}")
        length = _bare(r.number(run).text) if not run.isdigit() else run
        p.fields.update({"kind": "flat", "extent": out.shape[0], "run": length})
    else:
        raise _NoFit("an output of more than two axes")
    p.constants = {"P_TILE": PMAX, "MAX_ROW": MAX_ROW_FREE}
    p.notes = {"rows": note(k.span, "each run on a partition, scanned along the free axis "
                            "(one tensor_tensor_scan: r[j] = 1 * r[j - 1] + x[j])"),
               "store": _lift_note(k, program)}  # fmt: skip
    notes = {"P_TILE": "rows per tile, one per partition",
             "MAX_ROW": "longest run kept whole on a partition"}  # fmt: skip
    p.fields.update({"x": x.name, "out": out.var, "uses_isa": True, "summary": a.render(),
                     "constant_notes": notes})  # fmt: skip
    return p


# --- transpose ---------------------------------------------------------------------------------
def _transpose(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    a = _the_output(program)
    e = a.expr
    if e.kind == "load" and len(a.vars) > 2:
        return _transposed_axes(a, tu, k, spec)
    if e.kind != "load" or len(a.vars) != 2 or not _reads(e, "j", "i"):
        raise _NoFit("not out[i, j] = x[j, i]")
    p = _bind(tu, k, spec, "transpose", "lifted")
    x, out = _tensor(p, e.tensor), _tensor(p, a.tensor)
    p.constants = {"TILE": PMAX}
    p.notes = {"tile": note(k.span, "128 x 128 tiles turned on the Tensor engine"),
               "store": _lift_note(k, program)}  # fmt: skip
    p.fields.update({"x": x.name, "out": out.var, "batch": None, "rows": x.shape[0],
                     "cols": x.shape[1], "dtype": x.nl_dtype,
                     "constant_notes": {"TILE": "rows and columns per tile (pmax)"}})  # fmt: skip
    return p


def _transposed_axes(a: Assign, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    """`out[i0, i1, i2, i3] = x[i2, i3, i1, i0]`: a copy whose innermost axis moves (rows of
    neither tensor are rows of the other) is a 2-D transpose of x's innermost axis with the
    axis that becomes out's innermost, once per index of the other axes (loops)."""
    e = a.expr
    idx = [_unit_var(m) for m in e.index]
    if len(idx) != len(a.vars) or sorted(map(str, idx)) != sorted(a.vars):
        raise _NoFit(f"{e.render()}: not the output's axes permuted")
    cols_var, rows_var = idx[-1], a.vars[-1]  # x's innermost; the axis out holds innermost
    if cols_var == rows_var:
        raise _NoFit("the innermost axis stays (a permuted copy)")
    p = _bind(tu, k, spec, "transpose", "lifted")
    x, out = _tensor(p, e.tensor), _tensor(p, a.tensor)
    loops = {v: f"l{n}" for n, v in enumerate(v for v in a.vars if v not in (rows_var, cols_var))}

    def at(v: str | None) -> str:
        return "#R" if v == rows_var else "#C" if v == cols_var else loops[str(v)]

    p.constants = {"TILE": PMAX}
    p.notes = {"tile": note(k.span, "128 x 128 tiles turned on the Tensor engine"),
               "store": _lift_note(k, Program(assigns=[a])),
               "loops": f"one transpose of {x.name}'s axes {idx.index(rows_var)} and "
                        f"{len(idx) - 1} per index of the others"}  # fmt: skip
    p.fields.update({
        "x": x.name, "out": out.var, "batch": None, "dtype": x.nl_dtype,
        "rows": x.shape[idx.index(rows_var)], "cols": x.shape[-1],
        "loops": [(loops[v], out.shape[n]) for n, v in enumerate(a.vars) if v in loops],
        "x_index": ", ".join(at(v) for v in idx), "out_index": ", ".join(at(v) for v in a.vars),
        "constant_notes": {"TILE": "rows and columns per tile (pmax)"},
    })  # fmt: skip
    return p


# --- matmul ------------------------------------------------------------------------------------
def _matmul(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    a = _the_output(program, 2)
    reds = _reduces(a.expr)
    if len(reds) != 1 or reds[0].op != "sum":
        raise _NoFit("not exactly one sum")
    red = reds[0]
    body, kv = red.args[0], red.var or ""
    if body.kind != "op" or body.op != "*":
        raise _NoFit("the sum's term is not a product")
    factors = [f for f in body.args if f.kind == "load"]
    if len(factors) != 2 or len(body.args) != 2:
        raise _NoFit("the sum's term is not a product of two loads")
    a_ld = next((f for f in factors if _reads(f, "i", kv) or _reads(f, kv, "i")), None)
    others = [f for f in factors if f is not a_ld]
    b_ld = next((f for f in others if _reads(f, kv, "j") or _reads(f, "j", kv)), None)
    if a_ld is None or b_ld is None:
        raise _NoFit("operands are not A[i, k] (or A[k, i]) and B[k, j] (or B[j, k])")
    p = _bind(tu, k, spec, "matmul", "lifted")
    from migrator.patterns.matmul import MATMUL_LOCALS

    p.avoid_names(MATMUL_LOCALS)
    ta, tb, tc = _tensor(p, a_ld.tensor), _tensor(p, b_ld.tensor), _tensor(p, a.tensor)
    a_t, b_t = _reads(a_ld, kv, "i"), _reads(b_ld, "j", kv)
    m_size, k_size = (ta.shape[1], ta.shape[0]) if a_t else (ta.shape[0], ta.shape[1])
    n_size = tb.shape[0] if b_t else tb.shape[1]
    epi_loads: dict[str, dict[str, str]] = {}

    def tile_of(ld: Expr) -> str:
        t = _tensor(p, ld.tensor)
        kind = "same" if _reads(ld, "i", "j") else "row" if _reads(ld, "j") else \
            "col" if _reads(ld, "i") else None  # fmt: skip
        if kind is None:
            raise Untranslatable(f"{ld.render()} is not at the output element, row or column")
        entry = epi_loads.setdefault(t.name, {"tensor": t.name, "var": f"{t.name}_epi",
                                              "kind": kind})  # fmt: skip
        if entry["kind"] != kind:
            raise Untranslatable(f"{t.name} is read at two different indices")
        return entry["var"]

    r = _Renderer(p, spec, tile_of)
    r.reduced[reduce_key(red)] = nkiexpr.ACC
    epilogue = None
    if a.expr is not red:
        try:
            epilogue = r.render(a.expr)
        except Untranslatable as e:
            raise _NoFit(f"epilogue: {e}") from e
    p.constants = {"TILE_M": STATIONARY_FMAX, "TILE_K": PMAX,
                   "TILE_N": PMAX if b_t else MOVING_FMAX}  # fmt: skip
    p.notes = {"acc": note(k.span, f"{red.render()} accumulates in PSUM over K tiles"),
               "a": note(k.span, f"{ta.name} is " + ("stored [K, M]: loaded as A^T" if a_t
                         else "row-major [M, K]: tiles turned on the Tensor engine")),
               "store": _lift_note(k, program),
               "guard": "ragged edges: masked loads into zeroed tiles, masked stores"}  # fmt: skip
    p.fields.update({
        "a": ta.name, "b": tb.name, "c_in": None, "out": tc.var,
        "M": m_size, "K": k_size, "N": n_size, "a_transposed": a_t, "b_transposed": b_t,
        "batch": None, "alpha": None, "beta": None,
        "epilogue": epilogue, "epilogue_loads": list(epi_loads.values()), "epilogue_pre": [],
        "epilogue_from": "acc" if epilogue else "res",
        "dtype": ta.nl_dtype,
        "constant_notes": {"TILE_M": "output rows per tile (gemm_stationary_fmax)",
                           "TILE_K": "contraction per matmul = partitions (pmax)",
                           "TILE_N": "output columns per tile (one PSUM bank of fp32)"},
    })  # fmt: skip
    return p


# --- rows --------------------------------------------------------------------------------------
def _rows(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    # (one output may be a plain map of the row, a fused residual's sum, if another reduces)
    if not any(_reduces(a.expr) for a in program.assigns):
        raise _NoFit("nothing is reduced along a row")
    p = _bind(tu, k, spec, "rows", "lifted")
    cols: Any = None
    row_loads: dict[str, dict[str, str]] = {}
    # sums down the columns beside the rows (a layer norm's backward: dweight and dbias
    # accumulated over every row while dinp is computed row by row)
    col_sums = [(a, cs) for a in program.assigns if (cs := _column_sum(a)) is not None]
    if col_sums and len(col_sums) < len(program.assigns):
        program = Program(assigns=[a for a in program.assigns
                                   if all(a is not b for b, _ in col_sums)])  # fmt: skip
    else:
        col_sums = []
    flat = _flat_rows(program)  # rows of a flat tensor (`x[k + C*(i // C)]`): seen as 2-D
    reshaped: set[str] = set()
    if flat is not None:
        program, reshaped = flat[0], flat[1]

    # `sum_k x[i, k] * x[i, j]`: the factor at the output's column comes out of the sum
    program = Program(assigns=[
        a.model_copy(update={"expr": _column_factors_out(a.expr, a.vars[-1])})
        for a in program.assigns])  # fmt: skip
    for a in program.assigns:
        if len(a.vars) not in (1, 2):
            raise _NoFit("outputs are not rows or row results")
        for red in _reduces(a.expr):
            if red.op not in ("sum", "max", "min"):
                raise _NoFit(f"a {red.op} reduction")
            if cols is None:
                cols = red.extent
            elif red.extent != cols:
                raise _NoFit("reductions of different lengths")
    two_d = [a for a in program.assigns if len(a.vars) == 2]
    row_tensor = None
    for ld in (ld for a in program.assigns for ld in _loads(a.expr)):
        if len(ld.index) == 2:
            row_tensor = row_tensor or ld.tensor
    if row_tensor is None:
        raise _NoFit("no 2-D input is read along its rows")
    x = _tensor(p, row_tensor)
    if isinstance(cols, str) and cols not in spec.sizes:
        raise _NoFit(f"reductions over {cols}, not a size")
    # rows padded past the reduced length (`P >= V`: llm.c's vocabulary padded to P): the
    # tiles take the first V columns, and the columns past them are left as the original leaves them
    padded = paired_sizes(spec.relations, ">=")

    def row_of_cols(width: object) -> bool:
        return str(width) == str(cols) or padded.get(str(width)) == str(cols)

    for a in two_d:
        o = spec.tensor_named(a.tensor)
        if a.tensor not in reshaped and (len(o.shape) != 2 or not row_of_cols(o.shape[1])):
            raise _NoFit(f"{a.tensor}'s rows are not the reduced length")
    narrow = row_tensor not in reshaped and str(x.shape[1]) != str(cols) and row_of_cols(x.shape[1])
    r_rows = f"({x.shape[0]}) // {cols}" if row_tensor in reshaped else x.shape[0]
    for sset in spec.all_size_sets():  # a whole row on one partition
        n = int(value_of(cols, sset)) if cols is not None else 0
        if n > MAX_ROW_FREE:
            raise _NoFit(f"rows of {n} elements (at {sset}) exceed one partition's "
                         f"{MAX_ROW_FREE}; a blocked two-pass form is not emitted yet")  # fmt: skip

    def ref(name: str) -> str:  # a flat tensor as its [rows, cols] view
        return f"{name}.reshape(({r_rows}, {cols}))"

    picks: list[dict[str, Any]] = []  # `x[i, ids[i]]`: one element of each row, by index

    def pick_of(ld: Expr) -> str | None:
        """`x[i, ids[i]]` as a compare-and-select along the row tile of x (the row is on
        the partition already; an indirect DMA per element would cost more than the compare)."""
        if len(ld.index) != 2 or not _is_var(ld.index[0], "i"):
            return None
        m = ld.index[1]
        g = m.gather
        if g is None or m.terms or m.const != 0:
            return None
        if g.coef != 1 or len(g.index) != 1 or not _is_var(g.index[0], "i"):
            raise Untranslatable(f"{ld.render()}: a row element picked by other than `ids[i]`")
        row = tile_of(ld.model_copy(update={"index": [ld.index[0], IndexMap(terms=[
            Term(coef=1, var="_k")])]}))  # fmt: skip
        ids = tile_of(Expr(kind="load", tensor=g.tensor, index=[ld.index[0]]))
        var = f"{_tensor(p, ld.tensor).name}_at_{_tensor(p, g.tensor).name}"
        if all(q["var"] != var for q in picks):
            picks.append({"var": var, "row": row, "ids": ids,
                          "note": f"{ld.render()}: the element whose column is the row's index "
                                  "(compare with the column numbers, select, sum)"})  # fmt: skip
        return var

    def tile_of(ld: Expr) -> str:
        picked = pick_of(ld)
        if picked is not None:
            return picked
        t = _tensor(p, ld.tensor)
        units = [_unit_var(m) for m in ld.index]
        # (`_k`: the whole row tile a pick compares against the column numbers)
        if units and units[-1] not in (None, "i", "_k") and units[-1] != axis[-1]:
            # the tile's free axis is the column inside a store, the reduced variable inside
            # a reduction: a load at another column is no element of that tile
            raise Untranslatable(f"{ld.render()} read at {units[-1]} where the row runs over "
                                 f"{axis[-1]}")  # fmt: skip
        if len(units) == 2 and units[0] == "i" and units[1] not in (None, "i"):
            kind, index = "row", "i_p, i_f"
        elif units == ["i"]:
            kind, index = "col", "i_p"
        elif len(units) == 1 and units[0] is not None:
            kind, index = "vec", "i_f"
        else:
            raise Untranslatable(f"{ld.render()} is not a row of a tile, a row vector or a "
                                 "per-row value")  # fmt: skip
        key = f"{t.name}:{kind}"
        src = ref(t.name) if kind == "row" and ld.tensor in reshaped else t.name
        row_loads.setdefault(key, {"tensor": src, "var": f"{t.name}_{kind}",
                                   "index": index, "kind": kind})  # fmt: skip
        return row_loads[key]["var"]

    uses_cols: list[bool] = []
    axis = ["j"]  # what the free axis runs over where a load is rendered

    def coord_of(e: Expr) -> str:
        """`j` (the column numbers) or `ids[i]` (the row's index) where a select compares them:
        cross-entropy's gradient is `j == labels[i] ? p - 1 : p`."""
        (m,) = e.index
        g = m.gather
        if g is None and m.const == 0 and len(m.terms) == 1 and _unit_var(m) == "j":
            uses_cols.append(True)
            return "col_ids"
        if (g is not None and not m.terms and m.const == 0 and g.coef == 1
                and len(g.index) == 1 and _is_var(g.index[0], "i")):  # fmt: skip
            return tile_of(Expr(kind="load", tensor=g.tensor, index=[g.index[0]]))
        raise Untranslatable(f"the coordinate {m.render()} (a column or a row's index)")

    r = _Renderer(p, spec, tile_of, coord_of)
    r.per_row = _one_per_row
    pre: list[dict[str, str]] = []
    stores = []
    try:
        for a in program.assigns:
            axis[0] = a.vars[-1] if len(a.vars) == 2 else "j"
            for red in _post_order_reduces(a.expr):
                key = reduce_key(red)
                if key in r.reduced:
                    continue
                var = f"red{len(pre)}"
                note_ = f"{red.op} along the row: {_clip(red.render(), 100)}"
                axis.append(red.var or "")
                try:
                    fused = _exp_sum(red, r)
                    body = r.dialects(red.args[0]) if fused is None else {}
                finally:
                    axis.pop()
                if fused is not None:
                    # exp and its row sum in one ScalarE instruction, the max as its bias
                    pre.append({"var": var, "expr": "", "note": note_, "exp_of": fused[0],
                                "bias_of": fused[1]})  # fmt: skip
                    r.reduced[key] = var
                    continue
                fn = {"sum": "nl.sum", "max": "nl.max", "min": "nl.min"}[red.op or ""]
                reduced = {d: f"{fn}({text}, axis=1, keepdims=True)" for d, text in body.items()}
                pre.append({"var": var, "note": note_, **reduced})
                r.reduced[key] = var
            out = _tensor(p, a.tensor)
            dst = ref(out.var) if a.tensor in reshaped else out.var
            stores.append({"tensor": out.name, "var": dst, **r.dialects(a.expr),
                           "index": "i_p, i_f" if len(a.vars) == 2 else "i_p",
                           "note": _lift_note(k, Program(assigns=[a]))})  # fmt: skip
        sums = []
        row_read: dict[str, set[str]] = {}  # column sum -> the tensors its term reads as rows
        for a, (body, carried) in col_sums:
            axis[0] = "j"
            term = _as_row_tile(body, a.vars[0], flat[2] if flat is not None else None, reshaped)
            row_read[a.tensor] = {ld.tensor or "" for ld in _loads(term) if len(ld.index) == 2}
            if not row_read[a.tensor]:
                raise _NoFit(f"{a.tensor}: the column sum reads no row of a tile")
            out = _carrying_tensor(p, a.tensor, carried)
            sums.append({"var": f"cs{len(sums)}", **r.dialects(term), "out": out.var,
                         "out_in": out.name if carried is not None else None,
                         "note": _lift_note(k, Program(assigns=[a]))})  # fmt: skip
    except Untranslatable as e:
        raise _NoFit(str(e)) from e
    if sums:
        xt = spec.tensor_named(row_tensor)
        for a, _ in col_sums:
            (red,) = [e for e in a.expr.walk() if e.kind == "reduce"]
            o = spec.tensor_named(a.tensor)
            for sset in spec.all_size_sets():
                n_rows = math.prod(spec.shape_of(xt, sset)) // int(value_of(cols, sset))
                whole = n_rows * int(value_of(cols, sset))
                if (value_of(red.extent, sset) != n_rows
                        or spec.shape_of(o, sset) != (int(value_of(cols, sset)),)
                        or any(math.prod(spec.shape_of(spec.tensor_named(n), sset)) != whole
                               for n in row_read[a.tensor])):  # fmt: skip
                    raise _NoFit(f"{a.tensor} is no sum of a column over every row")
                banks = -(-int(value_of(cols, sset)) // MOVING_FMAX) * len(sums)
                # (one bank more for the product each `acc += nl.matmul(...)` makes before it
                # is added: the legacy dialect's accumulation)
                if banks > PSUM_BANKS - 1:
                    raise _NoFit(f"column sums of {int(value_of(cols, sset))} columns need "
                                 f"{banks} PSUM banks (at {sset}) beside the one each product "
                                 f"takes; {PSUM_BANKS} exist")  # fmt: skip
        if narrow:
            raise _NoFit("column sums of rows padded past their length")
        # the sums add thousands of rows in fp32, as the CUDA original does after `(float)x`:
        # terms rounded to a low-precision input's type first would drift past its result
        low = any(np_dtype(spec.tensor_named(ld.tensor).dtype).itemsize < 4
                  for a, _ in col_sums for ld in _loads(a.expr))  # fmt: skip
        p.fields["f32_loads"] = low
    for pk in picks:  # the one-hot row a pick makes serves the stores that compare alike
        for st in stores:
            for needle in (f"nl.equal(col_ids, {pk['ids']})", f"nl.equal({pk['ids']}, col_ids)"):
                for d in ("expr", "legacy"):
                    st[d] = st[d].replace(needle, f"{pk['var']}_hot")
        # trn2 picks by a range select, no one-hot row: it is made only where a store reads it
        pk["hot"] = any(f"{pk['var']}_hot" in st[d] for st in stores for d in ("expr", "legacy"))
    for red in pre:  # the exp tile a fused exp-and-sum makes serves the stores that read it
        if "exp_of" in red:
            needle = f"nl.exp(nl.subtract({red['exp_of']}, {red['bias_of']}))"
            for st in stores:
                for d in ("expr", "legacy"):
                    st[d] = st[d].replace(needle, f"{red['var']}_e")
    # a term the row's reductions, stores and column sums compute alike, computed once per tile
    # before them (a layer norm's backward reads `(x - mean) * rstd` in all three); each
    # dialect's own (the legacy one fuses a row's scalars into its instructions)
    later = {red["var"] for red in pre} | {f"{red['var']}_e" for red in pre}
    later |= {pk["var"] for pk in picks} | {f"{pk['var']}_hot" for pk in picks}
    common: dict[str, list[tuple[str, str]]] = {}
    for d in ("expr", "legacy"):
        common[d], texts = _hoisted(
            [red[d] for red in pre if "exp_of" not in red]
            + [st[d] for st in stores] + [cs[d] for cs in sums], "rc", later)  # fmt: skip
        it = iter(texts)
        for red in pre:
            if "exp_of" not in red:
                red[d] = next(it)
        for st in stores:
            st[d] = next(it)
        for cs in sums:
            cs[d] = next(it)
    # names of whole-row tiles: anything else a store reads is one value per row ([P, 1])
    wide = [v["var"] for v in row_loads.values() if v["kind"] == "row"]
    wide += [f"{red['var']}_e" for red in pre if "exp_of" in red] + ["col_ids"]
    for n, st in enumerate(stores):  # a value a store computes twice, computed once
        # (the legacy dialect's nisa calls return their tile; the new one's write a dst)
        st["legacy_locals"], (st["legacy"],) = _hoisted([_masked_add(st["legacy"], wide)], f"v{n}_")
        st["locals"], (st["expr"],) = _hoisted([st["expr"]], f"v{n}_")
    p.constants = {"P_TILE": PMAX, "MAX_ROW": MAX_ROW_FREE}
    p.notes = {"rows": note(k.span, "one row per partition; each reduction along the free axis")}
    p.fields.update({
        "summary": "; ".join(a.render() for a in program.assigns),
        "rows": r_rows, "cols": cols if row_tensor in reshaped or narrow else x.shape[1],
        "narrow": narrow,  # the first `cols` columns of wider rows
        "loads": list(row_loads.values()), "reduces": pre, "stores": stores, "picks": picks,
        "row_common": [{"var": name, "expr": call} for name, call in common["expr"]],
        "row_common_legacy": [{"var": name, "expr": call} for name, call in common["legacy"]],
        "col_ids": bool(uses_cols), "col_sums": sums, "W_C": MOVING_FMAX,
        "uses_isa": bool(picks) or bool(uses_cols) or bool(sums)
        or any("nisa." in x for st in stores
               for x in (st["legacy"], *dict(st["legacy_locals"]).values()))
        or any("nisa." in rc for _, rc in common["legacy"])
        or any("nisa." in red.get("legacy", "") for red in pre)
        or any("exp_of" in q for q in pre),
        "constant_notes": {"P_TILE": "rows per tile, one per partition (nl.tile_size.pmax)",
                           "MAX_ROW": "longest row kept whole on a partition (32 KiB fp32)"},
    })  # fmt: skip
    return p


def _column_sum(a: Assign) -> tuple[Expr, Expr | None] | None:
    """`out[j] = (out[j] +) sum_k body`, a vector output summed over a variable of its own
    (the rows, where `body` reads the row tiles at column j): (body, the old-value load)."""
    if len(a.vars) != 1:
        return None
    (j,) = a.vars
    try:
        body, kv, carried = _sum_plus_old(a, lambda ld: _is_var(ld.index[0], j)
                                          if len(ld.index) == 1 else False, "")  # fmt: skip
    except _NoFit:
        return None
    used = {t.var for e in body.walk() for m in e.index for t in m.terms}
    if not kv or kv not in used or j not in used:
        return None
    return body, carried


def _as_row_tile(body: Expr, col: str, width: Any, reshaped: set[str]) -> Expr:
    """A column sum's term over the row tile: its summed variable is the row (`i`), its output
    coordinate the column (`j`); loads read a row's element (`x[k, j]`, flat `x[j + L*k]`), a
    per-row value (`s[k]`) or a row vector (`w[j]`). Tensors read as rows join `reshaped`."""
    (red,) = [e for e in body.walk() if e.kind == "reduce"] or [None]
    if red is not None:
        raise _NoFit("a reduction inside a column sum")
    row_vars = {t.var for e in body.walk() for m in e.index for t in m.terms} - {col}
    if len(row_vars) != 1:
        raise _NoFit("a column sum's term reads other than its row and column")
    (kv,) = row_vars
    one = _unit_map

    def at(m: IndexMap) -> list[IndexMap] | None:
        terms = {(t.var, t.coef, t.div, t.mod) for t in m.terms}
        if m.const != 0 or m.gather is not None:
            return None
        if terms == {(col, 1, None, None), (kv, width, None, None)} and width is not None:
            return [one("i"), one("j")]
        if terms == {(kv, 1, None, None)}:
            return [one("i")]
        if terms == {(col, 1, None, None)}:
            return [one("j")]
        return None

    def rewrite(e: Expr) -> Expr:
        if e.kind == "coord":
            raise _NoFit(f"a coordinate in a column sum ({e.render()})")
        if e.kind != "load":
            return e.model_copy(update={"args": [rewrite(x) for x in e.args]})
        if len(e.index) == 2 and _is_var(e.index[0], kv) and _is_var(e.index[1], col):
            return e.model_copy(update={"index": [one("i"), one("j")]})
        index = at(e.index[0]) if len(e.index) == 1 else None
        if index is None:
            raise _NoFit(f"{e.render()} is no row element, per-row value or row vector")
        if len(index) == 2:
            reshaped.add(e.tensor or "")
        return e.model_copy(update={"index": index})

    return rewrite(body)


def _column_factors_out(e: Expr, col: str) -> Expr:
    """`e` with each sum's factors that read at the output's column `col` and not at the
    summed variable taken out of it: `sum_k a[k] * b * y[j]` is `y[j] * sum_k a[k] * b`."""
    args = [_column_factors_out(x, col) for x in e.args]
    e = e.model_copy(update={"args": args}) if args else e
    if e.kind != "reduce" or e.op != "sum" or not e.var:
        return e
    body = e.args[0]
    factors = body.args if body.kind == "op" and body.op == "*" else [body]

    def reads(x: Expr, var: str) -> bool:
        return any(t.var == var for m in index_maps(x) for t in index_terms(m))

    out = [f for f in factors if reads(f, col) and not reads(f, e.var)]
    if not out or len(out) == len(factors):
        return e
    kept = [f for f in factors if not any(f is g for g in out)]
    inner = kept[0] if len(kept) == 1 else Expr(kind="op", op="*", args=kept)
    return Expr(kind="op", op="*", args=[*out, e.model_copy(update={"args": [inner]})])


def _calls(text: str) -> list[str]:
    """Every `nl.f(...)` / `nisa.f(...)` call within `text`, as written."""
    out = []
    for m in re.finditer(r"\b(?:nl|nisa)\.\w+\(", text):
        depth = 0
        for j in range(m.end() - 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            if depth == 0:
                out.append(text[m.start() : j + 1])
                break
    return out


def _split_args(call: str) -> list[str]:
    """The top-level arguments of one call, as written."""
    inner = call[call.index("(") + 1 : -1]
    out, depth, start = [], 0, 0
    for j, ch in enumerate(inner):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(inner[start:j].strip())
            start = j + 1
    out.append(inner[start:].strip())
    return out


def _masked_add(expr: str, wide: list[str]) -> str:
    """`nl.add(x, nl.where(c, s, 0.0))` with `s` one value per row: one Vector engine
    instruction, `(c * s) + x` (the label's term of a gradient), instead of a select and an add."""
    for call in _calls(expr):
        if not call.startswith("nl.add("):
            continue
        args = _split_args(call)
        if len(args) != 2:
            continue
        for x, sel in (args, args[::-1]):
            if not sel.startswith("nl.where(") or _calls(sel)[0] != sel:
                continue
            w = _split_args(sel)
            if len(w) != 3 or w[2] != "0.0" or any(name in w[1] for name in wide):
                continue
            # only a one-hot condition (an equality): a maxNum select (`x > 0 ? x : 0`) keeps
            # its NaN handling, which a multiply would not
            if not (w[0].startswith("nl.equal(") or re.fullmatch(r"\w+_hot", w[0])):
                continue
            fused = (f"nisa.scalar_tensor_tensor(data={w[0]}, op0=nl.multiply, operand0={w[1]}, "
                     f"op1=nl.add, operand1={x}, dtype=nl.float32)")  # fmt: skip
            return _masked_add(expr.replace(call, fused), wide)
    return expr


def _one_per_row(e: Expr) -> bool:
    """Whether `e` is one value per row of a row program: constants, scalars, loads at the row
    alone (`rstd[i]`) and reductions along the row, no load at a column."""
    if e.kind == "reduce":
        return True
    if e.kind == "load":
        return all({t.var for t in m.terms} <= {"i"} and m.gather is None for m in e.index)
    if e.kind == "coord":
        return all({t.var for t in m.terms} <= {"i"} for m in e.index)
    return all(_one_per_row(a) for a in e.args)


def _hoisted(
    texts: list[str], prefix: str, later: set[str] | frozenset[str] = frozenset()
) -> tuple[list[tuple[str, str]], list[str]]:
    """`texts` with each call they make more than once in all (one expression twice: the two
    branches of a select share most of their work; several alike: a row's reductions, stores
    and column sums) bound to a local first, largest first: the engines compute it once.
    `later`: names computed after the locals are bound (a row's reductions), which a bound call
    may not read. The (local, call) pairs and the rewritten texts."""
    lines: list[tuple[str, str]] = []
    while True:
        # (a call inside a bound one counts too: `x - mean` in a shared `dy * (x - mean)`)
        calls = [c for t in [*texts, *(b for _, b in lines)] for c in _calls(t)]
        repeated = [c for c in set(calls) if calls.count(c) > 1
                    and not set(re.findall(r"\b\w+\b", c)) & later]  # fmt: skip
        if not repeated:
            break
        c = max(repeated, key=len)
        name = f"{prefix}{len(lines)}"
        lines = [(n, b.replace(c, name)) for n, b in lines] + [(name, c)]
        texts = [t.replace(c, name) for t in texts]
    ordered: list[tuple[str, str]] = []  # each local after the locals it reads
    while len(ordered) < len(lines):
        names = {n for n, _ in lines} - {n for n, _ in ordered}
        ordered += [(n, b) for n, b in lines if n in names
                    and not set(re.findall(r"\b\w+\b", b)) & (names - {n})]  # fmt: skip
    # numbered in the order they are computed
    new = {n: f"{prefix}{j}" for j, (n, _) in enumerate(ordered)}

    def renamed(t: str) -> str:
        return re.sub(rf"\b{re.escape(prefix)}\d+\b", lambda m: new.get(m[0], m[0]), t)

    return [(new[n], renamed(b)) for n, b in ordered], [renamed(t) for t in texts]


def _exp_sum(red: Expr, r: _Renderer) -> tuple[str, str] | None:
    """`sum_k exp(x[i, k] - m[i])` with m a reduction already computed: (the row tile of x, the
    tile of m), for one activation with a fused row sum; None for any other sum."""
    body = red.args[0] if red.op == "sum" else None
    if body is None or body.kind != "op" or body.op != "exp" or len(body.args) != 1:
        return None
    inner = body.args[0]
    if inner.kind != "op" or inner.op != "+" or len(inner.args) != 2:
        return None
    for x, other in (inner.args, inner.args[::-1]):
        m = negated(other)
        if x.kind == "load" and m is not None and m.kind == "reduce":
            held = r.reduced.get(reduce_key(m))
            if held is not None:
                return r.render(x), held
    return None


def _flat_rows(program: Program) -> tuple[Program, set[str], Any] | None:
    """A program over flat 1-D tensors whose rows have length L (`x[k + L*(i // L)]` the row,
    `x[i]` the element, `w[i % L]` a row vector, `s[i // L]` a per-row value) rewritten over
    [rows, L] views (`x[i, k]`, `x[i, j]`, `w[j]`, `s[i]`), with the names of the tensors
    that are read or written through such a view; None if it is not one."""
    if any(a.vars != ["i"] for a in program.assigns):
        return None
    divs = {t.div if t.div is not None else t.mod for a in program.assigns
            for e in a.expr.walk() for m in e.index for t in m.terms
            if t.var == "i" and (t.div is not None or t.mod is not None)}  # fmt: skip
    if len(divs) != 1:
        return None
    (L,) = divs
    reshaped: set[str] = {a.tensor for a in program.assigns}

    one = _unit_map

    def position(m: IndexMap) -> IndexMap:
        """A compared coordinate: `i % L` the column, `i // L` the row, `ids[i // L]` the
        row's index."""
        g = m.gather
        if g is not None and not m.terms and m.const == 0 and len(g.index) == 1:
            return m.model_copy(update={"gather": g.model_copy(update={
                "index": [position(g.index[0])]})})  # fmt: skip
        terms = {(t.var, t.coef, t.div, t.mod) for t in m.terms}
        if m.const == 0 and m.gather is None and terms == {("i", 1, None, L)}:
            return one("j")
        if m.const == 0 and m.gather is None and terms == {("i", 1, L, None)}:
            return one("i")
        raise _NoFit(f"the coordinate {m.render()} is not a row's or a column's")

    def rewrite(e: Expr) -> Expr:
        if e.kind == "coord":
            return e.model_copy(update={"index": [position(m) for m in e.index]})
        if e.kind != "load":
            return e.model_copy(update={"args": [rewrite(a) for a in e.args]})
        if len(e.index) != 1:
            raise _NoFit(f"{e.render()} is not a flat access")
        m = e.index[0]
        terms = {(t.var, t.coef, t.div, t.mod) for t in m.terms}
        if m.const != 0 or m.gather is not None:
            raise _NoFit(f"{e.render()} is not a flat row access")
        if terms == {("i", 1, None, None)}:
            reshaped.add(e.tensor or "")
            return e.model_copy(update={"index": [one("i"), one("j")]})
        if len(terms) == 2 and ("i", L, L, None) in terms:
            (other,) = terms - {("i", L, L, None)}
            if other[1:] == (1, None, None) and other[0] != "i":
                reshaped.add(e.tensor or "")
                return e.model_copy(update={"index": [one("i"), one(other[0])]})
        if terms == {("i", 1, None, L)}:
            return e.model_copy(update={"index": [one("j")]})
        if terms == {("i", 1, L, None)}:
            return e.model_copy(update={"index": [one("i")]})
        raise _NoFit(f"{e.render()} is not a row, element, row vector or per-row value")

    try:
        assigns = [a.model_copy(update={"vars": ["i", "j"], "expr": rewrite(a.expr)})
                   for a in program.assigns]  # fmt: skip
    except _NoFit:
        return None
    return Program(assigns=assigns), reshaped, L


def _unit_map(var: str) -> IndexMap:
    """The coordinate `var` itself."""
    return IndexMap(terms=[Term(coef=1, var=var)])


def _collapsed(program: Program, shape: list[str]) -> tuple[Program, set[str]]:
    """A map over an N-D output (N > 2) as one over its [rows, last axis] view: every load
    reads the output's own element (of a tensor viewed alike), coordinates that a mask
    compares become the column `j` or the row `i` taken modulo the axis's extent (only
    axes next to the last: the row of a [B*NH, T, T] stack is `i % T`)."""
    names = program.assigns[0].vars
    if any(a.vars != names for a in program.assigns):
        raise _NoFit("outputs index their coordinates differently")
    last = len(names) - 1
    reshaped = {a.tensor for a in program.assigns}
    one = _unit_map

    def coord(m: IndexMap) -> IndexMap:
        terms = []
        for t in m.terms:
            k = names.index(t.var)
            if t.div is not None or t.mod is not None:
                raise _NoFit(f"the coordinate {m.render()} of an N-D output")
            if k == last:
                terms.append(Term(coef=t.coef, var="j"))
            elif k == last - 1:
                terms.append(Term(coef=t.coef, var="i", mod=shape[k] if k > 0 else None))
            else:
                raise _NoFit(f"the coordinate {t.var} of an N-D output (only the last two)")
        return IndexMap(terms=terms, const=m.const)

    def rewrite(e: Expr) -> Expr:
        if e.kind == "coord":
            return e.model_copy(update={"index": [coord(m) for m in e.index]})
        if e.kind != "load":
            return e.model_copy(update={"args": [rewrite(a) for a in e.args]})
        if len(e.index) != len(names) or not all(
            _is_var(m, v) for m, v in zip(e.index, names, strict=True)
        ):
            raise _NoFit(f"{e.render()} is not the output element")
        reshaped.add(e.tensor or "")
        return e.model_copy(update={"index": [one("i"), one("j")]})

    assigns = [a.model_copy(update={"vars": ["i", "j"], "expr": rewrite(a.expr)})
               for a in program.assigns]  # fmt: skip
    return Program(assigns=assigns), reshaped


def _post_order_reduces(e: Expr) -> list[Expr]:
    out: list[Expr] = []
    for a in e.args:
        out.extend(_post_order_reduces(a))
    if e.kind == "reduce":
        out.append(e)
    return out


# --- total -------------------------------------------------------------------------------------
def _sum_plus_old(
    a: Any, is_old: Callable[[Expr], bool], what: str
) -> tuple[Expr, str, Expr | None]:
    """`out = sum_k body` or `out = out_old + sum_k body` (an accumulation into the output,
    `is_old` telling the load of its own element): (body, k, the old-value load or None)."""
    e, carried = a.expr, None
    if e.kind == "op" and e.op == "+" and len(e.args) == 2:
        old = [x for x in e.args if x.kind == "load" and x.tensor == a.tensor and is_old(x)]
        red = [x for x in e.args if x.kind == "reduce"]
        if len(old) == 1 and len(red) == 1:
            e, carried = red[0], old[0]
    if e.kind != "reduce" or e.op != "sum":
        raise _NoFit(f"not {what} (plus the old value)")
    body = e.args[0]
    if _reduces(body):
        raise _NoFit(f"a reduction inside {what}")
    return body, e.var or "", carried


def _summed_term(
    p: Plan, spec: TaskSpec, body: Expr, check: Callable[[Expr, Any, list[Any]], None]
) -> tuple[str, dict[str, str], list[Any]]:
    """The summed term as NKI source over one tile per tensor it loads (each load accepted by
    `check(load, tensor, tensors so far)`, which raises `Untranslatable` otherwise): (term,
    tensor -> tile name, the tensors read in order)."""
    loads: dict[str, str] = {}
    first: list[Any] = []

    def tile_of(ld: Expr) -> str:
        t = _tensor(p, ld.tensor)
        check(ld, t, first)
        first.append(t)
        loads.setdefault(t.name, f"{t.name}_tile")
        return loads[t.name]

    try:
        term = _Renderer(p, spec, tile_of).render(body)
    except Untranslatable as e:
        raise _NoFit(str(e)) from e
    if not first:
        raise _NoFit("the summed term reads no tensor")
    return term, loads, first


def _carrying_tensor(p: Plan, name: str, carried: Expr | None) -> Any:
    out = _tensor(p, name)
    if carried is not None and out.role != "inout":
        raise _NoFit(f"{name} adds its old value but is not an inout tensor")
    return out


def _total(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    a = _the_output(program)
    o = spec.tensor_named(a.tensor)
    if spec.shape_of(o, spec.sizes) != (1,):
        raise _NoFit(f"{a.tensor} is not a single value")
    if np_dtype(o.dtype).kind in "iu":
        # VectorE, ScalarE and TensorE add in fp32: an integer total is exact only below 2**24
        # (and the old value's add with it); exact int32 sums need GpSimd adds by hand
        raise _NoFit(f"{a.tensor} is an integer total (Trainium's engines sum in fp32: exact "
                     "only below 2**24)")  # fmt: skip
    total = [IndexMap()]  # the one element: out[0]
    body, kv, carried = _sum_plus_old(a, lambda ld: ld.index == total, "a sum over every element")
    p = _bind(tu, k, spec, "reduction", "atomic_total")
    out = _carrying_tensor(p, a.tensor, carried)

    def check(ld: Expr, t: Any, first: list[Any]) -> None:
        if not _reads(ld, kv) or len(t.shape) != 1:
            raise Untranslatable(f"{ld.render()} is not a 1-D tensor read at the summed index")

    term, loads, first = _summed_term(p, spec, body, check)
    p.constants = {"P_TILE": PMAX, "F_TILE": ELEMENTWISE_FREE}
    why = "the total over every element: per-partition sums, then one ones-vector matmul"
    p.notes = {"reduce": note(k.span, why)}
    square = body.kind == "op" and body.op == "*" and len(body.args) == 2 \
        and body.args[0] == body.args[1] and body.args[0].kind == "load"  # fmt: skip
    p.fields.update({
        "square_of": loads[first[0].name] if square else None, "uses_isa": square,
        "variant": "atomic_total", "term": term, "loads": loads, "n": first[0].shape[0],
        "out": out.var, "out_in": out.name if carried is not None else None, "op": "sum",
        "constant_notes": {"P_TILE": "partitions per tile", "F_TILE": "elements per partition"},
    })  # fmt: skip
    return p


def _columns(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    a = _the_output(program, 1)
    j = a.vars[0]
    body, kv, carried = _sum_plus_old(a, lambda ld: _reads(ld, j), "a sum down the columns")
    p = _bind(tu, k, spec, "reduction", "columns")
    out = _carrying_tensor(p, a.tensor, carried)

    body, views = _leading_axes_as_rows(body, kv, j, spec, p)

    def check(ld: Expr, t: Any, first: list[Any]) -> None:
        shape = views.get(t.name, t.shape)
        if not _reads(ld, kv, j) or len(shape) != 2:
            raise Untranslatable(f"{ld.render()} is not a 2-D tensor read at [{kv}, {j}]")
        if first and shape != views.get(first[0].name, first[0].shape):
            raise Untranslatable(f"{ld.render()}: operands of different shapes")

    term, loads, first = _summed_term(p, spec, body, check)
    rows, cols = views.get(first[0].name, first[0].shape)
    # a tensor whose leading axes are the summed rows is read through its 2-D view
    loads = {(f"{n}.reshape(({views[n][0]}, {views[n][1]}))" if n in views else n): v
             for n, v in loads.items()}  # fmt: skip
    p.constants = {"P_TILE": PMAX, "F_TILE": MOVING_FMAX}
    why = ("a sum down the columns: row tiles on the partitions, summed across them by a "
           "ones-vector matmul that accumulates in PSUM")  # fmt: skip
    p.notes = {"reduce": note(k.span, why)}
    p.fields.update({
        "variant": "columns", "term": term, "loads": loads, "rows": rows,
        "cols": cols, "out": out.var, "op": "sum",
        "out_in": out.name if carried is not None else None,
        "constant_notes": {"P_TILE": "rows per tile (partitions)",
                           "F_TILE": "columns per PSUM accumulation"},
    })  # fmt: skip
    return p


def _leading_axes_as_rows(
    body: Expr, kv: str, j: str, spec: TaskSpec, p: Plan
) -> tuple[Expr, dict[str, tuple[str, str]]]:
    """A column sum's loads of an N-D tensor (N > 2) whose leading axes the summed variable
    runs through in order (`dout[k // T, k % T, j]` over `[B, T, OC]`) as loads of its
    [rows, last axis] view at `[k, j]`: (the body, tensor -> (rows, columns) of its view, as
    the NKI kernel spells the sizes). Each coordinate is checked against the row's unravelled
    index at every size set."""
    import numpy as np

    views: dict[str, tuple[str, str]] = {}

    def flat(ld: Expr) -> bool:
        t = spec.tensor_named(ld.tensor or "")
        n = len(ld.index)
        if n < 3 or len(t.shape) != n or not _is_var(ld.index[-1], j):
            return False
        for m in ld.index[:-1]:
            if m.gather is not None or m.const != 0 or len(m.terms) != 1:
                return False
            term = m.terms[0]
            if term.var != kv or term.coef != 1:
                return False
        for sset in spec.all_size_sets():
            dims = [int(value_of(d, sset)) for d in t.shape[:-1]]
            ks = np.arange(min(math.prod(dims), 1 << 14))
            want = np.unravel_index(ks, dims)
            for m, w in zip(ld.index[:-1], want, strict=True):
                (term,) = m.terms
                got = ks if term.div is None else ks // int(value_of(term.div, sset))
                got = got if term.mod is None else got % int(value_of(term.mod, sset))
                if not np.array_equal(got, w):
                    return False
        return True

    def rewrite(e: Expr) -> Expr:
        if e.kind != "load":
            return e.model_copy(update={"args": [rewrite(a) for a in e.args]})
        if not flat(e):
            return e
        t = _tensor(p, e.tensor)
        lead = [str(d) if re.fullmatch(r"\w+", str(d)) else f"({d})" for d in t.shape[:-1]]
        views[t.name] = (" * ".join(lead), str(t.shape[-1]))
        return e.model_copy(update={"index": [_unit_map(kv), _unit_map(j)]})

    return rewrite(body), views
