"""Stencils and small convolutions: each output is a weighted sum of neighbouring inputs.

Recognised from the dataflow: the stored value is a sum over a short counted loop (constant
bounds, e.g. ``-R..R``) of a weight times a load at ``centre + k``, either straight from global
memory or from a shared tile filled with halos (loads at ``centre - R`` and ``centre + BLOCK``).
"""

from __future__ import annotations

from migrator.patterns import facts
from migrator.patterns.registry import FamilyMatcher, MatchResult, Priority

from migrator import diagnostics as diag
from migrator.contract import TaskSpec
from migrator.cuda import poly
from migrator.cuda.ir import Expr, Kernel, TranslationUnit
from migrator.plan import ELEMENTWISE_FREE, PMAX, Plan, PlanError, bind, note, source_line


class StencilMatcher(FamilyMatcher):
    family = "stencil"
    priority: Priority = "default"

    def plan(self, match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
        return plan_kernel(match, tu, k, spec)

    def match(self, tu: TranslationUnit, k: Kernel) -> MatchResult:
        for st in facts.global_stores(k):
            for red in facts.reduces(st.value):
                if red.op != "sum" or red.loop is None:
                    continue
                found = self._taps(k, st, red)
                if found is not None:
                    return found
        return self.reject(k, "no store of a short constant-range weighted sum of neighbours")

    def _taps(self, k: Kernel, st, red: Expr) -> MatchResult | None:  # type: ignore[no-untyped-def]
        """A sum over one tap loop (1-D) or two nested ones (2-D) of weight x shifted load."""
        loops, term = [], red
        while term.kind == "reduce" and term.op == "sum" and term.loop is not None:
            span = _const_range(k.loops[term.loop])
            if span is None:
                return None
            loops.append((k.loops[term.loop].var, span))
            term = term.args[-1]
        if not loops or len(loops) > 2:
            return None
        tap_vars = [v for v, _ in loops]
        loads = facts.loads(term)
        data = [ld for ld in loads if all(_is_data(ld, v) for v in tap_vars)]
        if not data:
            return None
        src = data[0]
        weights = [ld.name for ld in loads if ld is not src]
        variant = f"{len(loops)}d"
        ranges = ", ".join(f"{v} in [{lo}, {hi}]" for v, (lo, hi) in loops)
        n_taps = 1
        for _, (lo, hi) in loops:
            n_taps *= hi - lo + 1
        shift = _shift(k, st, src, tap_vars[-1]) if len(loops) == 1 else 0
        if shift is None:
            return None
        w_load = next((ld for ld in loads if ld is not src), None)
        # a kernel argument holding the weights in tap order (else a __constant__ table)
        w_arg = (
            _weight_source(k, w_load, tap_vars[-1], loops[-1][1][0])
            if w_load is not None and len(loops) == 1
            else None
        )
        via = f" (argument {w_arg})" if w_arg is not None and w_arg != weights[0] else ""
        reasons = [
            f"{st.array}[{st.index[0].canonical}] = sum over {ranges} of "
            + (f"{weights[0]}[...] * " if weights else "")
            + f"{src.name}[{']['.join(i.canonical or i.text for i in src.index)}]",
            f"{n_taps} taps" + (f", weights from {weights[0]}{via}" if weights else ""),
        ]
        halo = _halo(k, src) if src.space == "shared" else None
        if halo:
            reasons.append(halo)
        return self.accept(
            k,
            variant=variant,
            reasons=reasons,
            plan={
                "variant": variant,
                "output": st.array,
                "input": _global_source(k, src),
                "taps": n_taps,
                "ranges": [list(r) for _, r in loops],
                "offset_low": loops[-1][1][0] + shift,
                "weights": weights[0] if weights else None,
                "weights_source": w_arg,
                "shared_tile": src.name if src.space == "shared" else None,
            },
        )


def _const_range(loop) -> tuple[int, int] | None:  # type: ignore[no-untyped-def]
    """Inclusive constant bounds of a tap loop (`for (k = -R; k <= R; ++k)`)."""
    if loop.var is None or loop.start is None or loop.bound is None:
        return None
    if not (loop.start.affine and loop.bound.affine):
        return None
    lo = poly.constant_value(loop.start.as_poly())
    hi = poly.constant_value(loop.bound.as_poly())
    if lo is None or hi is None or loop.cmp not in ("<", "<="):
        return None
    return lo, hi - (1 if loop.cmp == "<" else 0)


def _is_data(ld: Expr, var: str) -> bool:
    """A tap reads at ``centre + var`` in some dimension (thread-dependent), unlike a weight
    ``w[var + R]``."""
    for idx in ld.index:
        if (
            idx.affine
            and any("threadIdx" in s or "blockIdx" in s for s in idx.variant)
            and poly.coefficient_of(idx.as_poly(), var) == {(): 1}
        ):
            return True
    # a flat 2-D index `(y + ky) * W + x + kx`: the var's coefficient is a size (the row pitch)
    idx = ld.index[-1]
    return bool(idx.affine and poly.coefficient_of(idx.as_poly(), var)) and any(
        "threadIdx" in s for s in idx.variant
    )


def _shift(k: Kernel, st, src: Expr, var: str) -> int | None:  # type: ignore[no-untyped-def]
    """Input offset, relative to the output index, of the tap at ``var == 0``: a constant, or None.

    A tap reading global memory at ``x[i + k + d]`` is ``d``. A tap reading a shared tile adds
    the tile's fill shift: ``s[j] = x[g]`` places input ``g`` at ``j``, so reading ``s[r]``
    reads input ``r + (g - j)`` (``s[tid + R + k]`` filled by ``s[tid + R] = x[i]``: ``k``;
    ``s[tid + k]`` filled by ``s[t] = x[base + t - PAD]``: ``k - PAD``). Every fill must agree."""
    out = st.index[0]
    read = src.index[0] if len(src.index) == 1 else None
    if read is None or not (out.affine and read.affine):
        return None
    at = poly.substitute(read.as_poly(), {var: poly.const(0)})
    if src.space == "shared":
        fill = _fill_shift(k, src.name)
        if fill is None:
            return None
        at = poly.add(at, fill)
    return poly.constant_value(poly.sub(at, out.as_poly()))


def _fill_shift(k: Kernel, tile: str) -> poly.Poly | None:
    """``g - j`` for the fills ``tile[j] = ... x[g] ...`` of a shared tile (one global load
    each, guarded or not), when every fill has the same shift; else None."""
    shifts: dict[str, poly.Poly] = {}
    for fill in (s for s in k.stores if s.array == tile):
        loads = [n for n in fill.value.walk() if n.kind == "load" and n.space == "global"]
        if len(fill.index) != 1 or len(loads) != 1 or len(loads[0].index) != 1:
            return None
        where, came = fill.index[0], loads[0].index[0]
        if not (where.affine and came.affine):
            return None
        shift = poly.sub(came.as_poly(), where.as_poly())
        shifts[poly.render(shift)] = shift
    return next(iter(shifts.values())) if len(shifts) == 1 else None


def _weight_source(k: Kernel, ld: Expr, var: str, low: int) -> str | None:
    """The kernel argument holding the taps' weights in tap order (``w[k - low]`` read
    directly, or through a shared copy ``s_w[t] = w[t]``); None otherwise."""
    if len(ld.index) != 1 or not ld.index[0].affine:
        return None
    read = ld.index[0].as_poly()
    if poly.coefficient_of(read, var) != poly.const(1):
        return None
    first = poly.substitute(read, {var: poly.const(low)})  # the first tap's weight index
    if ld.space == "shared":
        fill = _fill_shift(k, ld.name or "")
        if fill is None:
            return None
        first = poly.add(first, fill)
    elif ld.space != "global":
        return None
    if poly.constant_value(first) != 0:
        return None
    return _global_source(k, ld)


def _global_source(k: Kernel, ld: Expr) -> str | None:
    if ld.space == "global":
        return ld.name
    for st in k.stores:
        if st.array == ld.name:
            for node in st.value.walk():
                if node.kind == "load" and node.space == "global":
                    return node.name
    return None


def _halo(k: Kernel, ld: Expr) -> str | None:
    fills = [s for s in k.stores if s.array == ld.name]
    if len(fills) < 2:
        return None
    return f"shared tile {ld.name} filled by {len(fills)} loads (centre plus halos)"


def plan_kernel(match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    """Flat tiles as in elementwise maps; one masked, shifted load per tap (zero outside the
    array, like the CUDA halo), weights as trace-time constants from the `__constant__` table,
    or from a 1-D tensor argument read in tap order (loaded once, per-partition scalars)."""
    info = match.plan or {}
    p = bind(tu, k, spec, "stencil", match.variant)
    p.avoid_names(STENCIL_LOCALS)
    x, out = p.tensor_for_param(info["input"] or ""), p.tensor_for_param(info["output"])
    dims = 2 if match.variant == "2d" else 1
    if x is None or out is None or len(x.shape) != dims:
        raise PlanError(
            diag.make("NOT_EMITTED", k.span, what=f"a {dims}-D stencil whose input is not {dims}-D")
        )
    table = next((c for c in tu.constants if c.name == info.get("weights")), None)
    # weights from a kernel argument (a tensor of taps), loaded once at run time
    w_arg = p.tensor_for_param(info.get("weights_source") or "") if table is None else None
    if w_arg is not None and (len(w_arg.shape) != 1 or dims != 1):
        w_arg = None
    if w_arg is None and (table is None or table.init_values is None):
        raise PlanError(
            diag.make(
                "NOT_EMITTED",
                k.span,
                what="stencil weights that are neither a constant table initialised in the "
                "source nor a 1-D tensor argument read in tap order",
            )
        )
    weights = table.init_values[: info["taps"]] if table is not None and table.init_values else []
    if table is not None and len(weights) != info["taps"]:
        raise PlanError(diag.make("NOT_EMITTED", k.span, what=f"{table.name} has fewer values "
                                  f"than the {info['taps']} taps"))  # fmt: skip
    st = next(s for s in facts.global_stores(k) if s.array == info["output"])
    p.constants = {"P_TILE": PMAX, "F_TILE": ELEMENTWISE_FREE, "LOW": info["offset_low"]}
    if dims == 2:
        (lo_y, hi_y), (lo_x, hi_x) = info["ranges"]
        width = hi_x - lo_x + 1
        # each tap: (row offset, column offset, weight), from the row-major weight table
        taps = [(dy, dx, weights[(dy - lo_y) * width + (dx - lo_x)])
                for dy in range(lo_y, hi_y + 1) for dx in range(lo_x, hi_x + 1)]  # fmt: skip
        p.constants = {"P_TILE": PMAX, "F_TILE": ELEMENTWISE_FREE}
    shared_w = next((a for a in k.shared if a.name == info.get("weights")), None)
    p.notes = {
        "weights": (
            note(table.span, f"__constant__ {table.name}[{len(weights)}]")
            if table is not None
            else note(
                shared_w.span if shared_w is not None else k.span,
                f"the {info['taps']} weights of {info.get('weights_source')}: one [1, taps] "
                "load, broadcast to the partitions as per-partition scalars",
            )
        ),
        "halo": note(
            k.shared[0].span if k.shared else k.span,
            "shared tile with halos: one load per tile (per row offset in 2-D) brings the halo "
            "along, each tap is a free-axis slice of it, zero outside the array",
        ),
        "halo_shifted": note(
            k.shared[0].span if k.shared else k.span,
            "shared tile with halos: each tap is a shifted load instead, zero outside the array",
        ),
        "store": note(st.span, source_line(st.span)),
    }
    p.fields = {
        "uses_isa": True,  # fused multiply-add taps (nisa.scalar_tensor_tensor)
        "dims": dims,
        "x": x.name,
        "out": out.var,
        "n": x.shape[0],
        "rows": x.shape[0],
        "cols": x.shape[-1],
        "weights": weights,
        "weight_tensor": w_arg.name if w_arg is not None else None,
        "n_taps": info["taps"],
        "taps": taps if dims == 2 else [],
        "constant_notes": {
            "P_TILE": "partitions per tile",
            "F_TILE": "elements per partition",
            "LOW": "offset of the first tap (-radius)",
        },
    }
    return p


# Locals of the stencil templates (both dialects) that an input argument must not be named:
# the new dialect's tap loop binds `w`, for one.
STENCIL_LOCALS = frozenset({
    "w", "wts", "weights", "w_row", "w_all", "tap", "acc", "halo", "src", "idx", "shift",
    "first", "last", "done", "count", "rows", "cols", "n", "j", "t", "r", "col", "i_p", "i_f",
    "i_h", "s_p", "s_h", "inside", "dy", "dx", "ty", "ft", "width", "dx_low", "row_offsets", "wk",
    "dy_low", "span", "i_q", "i_s", "i_m", "diff_a", "diff_b", "band_a", "band_b", "c_f", "s_c",
    "s_a", "s_b", "rows_a", "rows_b", "band", "rows_x", "res", "r0", "c0", "rs", "cs", "sr0",
    "sr1", "sc0", "sc1", "win", "term",
})  # fmt: skip
