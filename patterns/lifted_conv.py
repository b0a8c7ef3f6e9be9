"""Lowering rule for convolutions with a weight tensor over a lifted program:

    out[i, j] = sum_{k < K} w[a*k + c] * zeropad(x)[i + dy(k), j + dx(k)]

(nested sums for a 2-D window; `zeropad`: taps past the image read 0, as a CUDA halo filled
with `(x >= 0) ? src[x] : 0` does; weights read at an affine index of the window, from a
`__constant__` table the host fills or a tensor argument). The tap offsets and weight indices
are trace-time numbers, so the stencil templates emit it: one zero-filled, masked load per row
offset with every column a tap reaches, each tap a free-axis slice of it times its weight (a
per-partition scalar of one [1, n] weight load broadcast to the partitions), accumulated by
one fused multiply-add per tap on VectorE. A separable convolution's row pass has one row
offset (one load per tile), its column pass one per tap.
"""

from __future__ import annotations

import itertools
import math

from migrator.patterns.lifted import _bind, _lift_note, _NoFit, _tensor, _the_output
from migrator.patterns.stencil import STENCIL_LOCALS

from migrator.contract import TaskSpec
from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.lift.program import IndexMap, Program
from migrator.plan import ELEMENTWISE_FREE, PMAX, Plan, note

MAX_TAPS = 64  # taps combined one VectorE instruction each


def weighted_window(program: Program, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    a = _the_output(program, 2)
    i, j = a.vars
    e, red_vars = a.expr, []
    while e.kind == "reduce" and e.op == "sum":
        if e.upto is not None or not isinstance(e.extent, int) or not e.var:
            raise _NoFit("a window whose length is not a number")
        red_vars.append((e.var, e.extent))
        e = e.args[0]
    if not red_vars:
        raise _NoFit("no sum over a window")
    if e.kind != "op" or e.op != "*" or len(e.args) != 2 or any(x.kind != "load" for x in e.args):
        raise _NoFit("the window's term is not a weight times an input element")
    names = {v for v, _ in red_vars}
    data = [x for x in e.args if any(_moves_with(m, {i, j}) for m in x.index)]
    if len(data) != 1:
        raise _NoFit("not one input element that moves with the output")
    x, w = data[0], next(y for y in e.args if y is not data[0])
    if x.pad not in (None, 0, 0.0):
        raise _NoFit(f"{x.tensor} padded with {x.pad}, not zeros")
    n_taps = math.prod(n for _, n in red_vars)
    if n_taps > MAX_TAPS:
        raise _NoFit(f"{n_taps} taps (at most {MAX_TAPS} are emitted one instruction each)")
    if len(x.index) != 2:
        raise _NoFit(f"{x.tensor} is not a matrix")
    rows_off = _offset(x.index[0], i, names)
    cols_off = _offset(x.index[1], j, names)
    p = _bind(tu, k, spec, "stencil", "2d")
    p.avoid_names(STENCIL_LOCALS)
    xt, wt, out = _tensor(p, x.tensor), _tensor(p, w.tensor), _tensor(p, a.tensor)
    if [str(d) for d in out.shape] != [str(d) for d in xt.shape]:
        raise _NoFit(f"{a.tensor} is not shaped as {x.tensor} (a window kept inside the image)")
    try:
        w_shape = [int(str(d)) for d in wt.shape]
    except ValueError:
        raise _NoFit(f"the weights {w.tensor} have a size that is no number") from None
    if len(w.index) != len(w_shape) or any(m.gather is not None for m in w.index):
        raise _NoFit(f"{w.tensor} read at an index that is not affine in the window")
    if any({t.var for t in m.terms} - names for m in w.index):
        raise _NoFit(f"{w.tensor} read at an index that moves with the output")
    taps = []
    for values in itertools.product(*(range(n) for _, n in red_vars)):
        env = dict(zip((v for v, _ in red_vars), values, strict=True))
        flat = 0
        for m, n in zip(w.index, w_shape, strict=True):
            at = _affine_at(m, env)
            if not 0 <= at < n:
                raise _NoFit(f"tap {env} reads {w.tensor} outside its {n} elements")
            flat = flat * n + at
        taps.append((_affine_at(rows_off, env), _affine_at(cols_off, env), flat))
    p.constants = {"P_TILE": PMAX, "F_TILE": ELEMENTWISE_FREE}
    row_offsets = len({dy for dy, _, _ in taps})
    span = max(dy for dy, _, _ in taps) - min(dy for dy, _, _ in taps)
    # a window down the columns (one column offset, a row offset per tap): a banded matrix
    # product on TensorE, the rows of a tile and the `span` rows past them contracted against
    # a band built once from the weights, where taps on VectorE would load the tile per tap
    banded = (len({dx for _, dx, _ in taps}) == 1 and row_offsets == len(taps) >= 3
              and 0 < span < PMAX)  # fmt: skip
    p.notes = {
        "weights": note(k.span, f"the {math.prod(w_shape)} weights of {w.tensor}: one [1, n] "
                        "load, broadcast to the partitions as per-partition scalars"),
        "halo": note(k.span, f"{n_taps} taps over {row_offsets} row offset(s): one zero-filled "
                     "load per row offset with every column a tap reaches (zero outside the "
                     "image), each tap a free-axis slice of it"),
        "halo_shifted": note(k.span, "each tap a slice of its row offset's window, zero "
                             "outside the image"),
        "store": _lift_note(k, program),
        "band": note(k.span, f"{n_taps} taps down the columns as one banded matrix product: "
                     f"out_tile = band^T @ rows (128 rows and the {span} past them, zero "
                     "outside the image), the band w[p - m] built once from the weights; as in "
                     "any product, a non-finite pixel reaches every output row of its tile"),
    }  # fmt: skip
    p.fields.update({
        "uses_isa": True,  # fused multiply-add taps (nisa.scalar_tensor_tensor)
        "dims": 2, "x": xt.name, "out": out.var, "n": xt.shape[0], "rows": xt.shape[0],
        "cols": xt.shape[1], "weights": [], "weight_tensor": wt.name,
        "n_taps": math.prod(w_shape), "taps": taps, "banded": banded,
        "constant_notes": {"P_TILE": "partitions per tile", "F_TILE": "elements per partition"},
    })  # fmt: skip
    return p


def _moves_with(m: IndexMap, outs: set[str]) -> bool:
    return any(t.var in outs for t in m.terms)


def _offset(m: IndexMap, var: str, window: set[str]) -> IndexMap:
    """`var + a*k + c` as the offset `a*k + c` (window variables only)."""
    if m.gather is not None or any(t.div is not None or t.mod is not None for t in m.terms):
        raise _NoFit(f"{m.render()} is no shifted coordinate")
    own = [t for t in m.terms if t.var == var]
    rest = [t for t in m.terms if t.var != var]
    if len(own) != 1 or own[0].coef != 1 or any(t.var not in window for t in rest):
        raise _NoFit(f"{m.render()} is not {var} shifted by the window")
    if not isinstance(m.const, int) or any(not isinstance(t.coef, int) for t in rest):
        raise _NoFit(f"{m.render()}: an offset that is no number")
    return m.model_copy(update={"terms": rest})


def _affine_at(m: IndexMap, env: dict[str, int]) -> int:
    if not isinstance(m.const, int) or any(not isinstance(t.coef, int) for t in m.terms):
        raise _NoFit(f"{m.render()}: an offset that is no number")
    return m.const + sum(int(t.coef) * env[t.var] for t in m.terms)  # type: ignore[arg-type]


def padded_loads(program: Program) -> bool:
    """Whether some load of the program reads a pad value outside its tensor."""
    return any(x.kind == "load" and x.pad is not None for a in program.assigns
               for x in a.expr.walk())  # fmt: skip
