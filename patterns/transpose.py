"""Transposes: the output is the input with its row and column roles swapped.

Recognises the naive form (``out[col*R + row] = in[row*C + col]``) and the shared-memory tiled
form (a 2-D ``__shared__`` tile written as ``tile[a][b]`` and read back as ``tile[b][a]``, often
padded by one column against bank conflicts).
"""

from __future__ import annotations

from migrator.patterns import facts
from migrator.patterns.registry import FamilyMatcher, MatchResult, Priority

from migrator import diagnostics as diag
from migrator.contract import TaskSpec
from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.plan import PMAX, Plan, PlanError, bind, note, source_line


class TransposeMatcher(FamilyMatcher):
    family = "transpose"
    priority: Priority = "default"

    def plan(self, match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
        return plan_kernel(match, tu, k, spec)

    def match(self, tu: TranslationUnit, k: Kernel) -> MatchResult:
        stores = facts.global_stores(k)
        if len(stores) != 1:
            return self.reject(k, f"writes {len(stores)} global outputs, not one")
        st = stores[0]
        value = st.value
        if value.kind != "load":
            return self.reject(k, "the output value is computed, not copied")
        if value.space == "shared":
            return self._tiled(k, st, value)
        if value.space != "global":
            return self.reject(k, "the copied value does not come from memory")
        out_axes = _minor_axis(st.index[0])
        in_axes = _minor_axis(value.index[0])
        if out_axes and in_axes and out_axes != in_axes:
            return self.accept(
                k,
                variant="naive",
                reasons=[
                    f"copies {value.name} to {st.array} with the contiguous axis switched "
                    f"({in_axes} → {out_axes})"
                ],
                plan={"variant": "naive", "input": value.name, "output": st.array},
            )
        return self.reject(k, "copy without a change of contiguous axis")

    def _tiled(self, k: Kernel, st, value) -> MatchResult:  # type: ignore[no-untyped-def]
        tile = next((s for s in k.shared if s.name == value.name), None)
        if tile is None or len(tile.dims) != 2:
            return self.reject(k, "the copy goes through a shared array that is not a 2-D tile")
        fills = [s for s in k.stores if s.array == tile.name]
        if not fills:
            return self.reject(k, f"nothing writes the tile {tile.name}")
        fill = fills[0]
        src = fill.value
        if src.kind != "load" or src.space != "global":
            return self.reject(k, f"{tile.name} is not filled by a plain global load")
        w = [facts.key(i) for i in fill.index]
        r = [facts.key(i) for i in value.index]
        if w != list(reversed(r)):
            return self.reject(
                k,
                f"{tile.name} is written as [{']['.join(w)}] and read as "
                f"[{']['.join(r)}], not with swapped indices",
            )
        padded = (
            tile.dims[1] is not None
            and tile.dims[0] is not None
            and tile.dims[1] == tile.dims[0] + 1
        )
        reasons = [
            f"{src.name} → shared tile {tile.name}{tile.dims} written [{']['.join(w)}], read "
            f"[{']['.join(r)}] → {st.array}",
            f"{k.barriers[0].kind} between fill and read" if k.barriers else "no barrier (!)",
        ]
        if padded:
            reasons.append("tile padded by one column against bank conflicts")
        return self.accept(
            k,
            variant="shared_tiled",
            reasons=reasons,
            plan={
                "variant": "shared_tiled",
                "input": src.name,
                "output": st.array,
                "tile": tile.dims,
                "padded": padded,
            },
        )


def _minor_axis(idx) -> str | None:  # type: ignore[no-untyped-def]
    """The thread axis with unit stride in a row-major index (x for in[row*C + col])."""
    if not idx.affine:
        return None
    p = idx.as_poly()
    for axis in "xyz":
        if p.get((f"threadIdx.{axis}",)) == 1:
            return axis
    return None


def plan_kernel(match: MatchResult, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan:
    """128 x 128 tiles: load, transpose on the Tensor engine, store at the swapped position."""
    info = match.plan or {}
    p = bind(tu, k, spec, "transpose", match.variant)
    x, out = p.tensor_for_param(info["input"]), p.tensor_for_param(info["output"])
    # [R, C] -> [C, R], or a batch of them: [B, R, C] -> [B, C, R] (blockIdx.z over the batch)
    batched = (
        x is not None and out is not None and len(x.shape) == 3
        and out.shape == [x.shape[0], x.shape[2], x.shape[1]]
    )  # fmt: skip
    if x is None or out is None or (len(x.shape) != 2 and not batched):
        raise PlanError(
            diag.make(
                "NOT_EMITTED",
                k.span,
                what="a transpose whose input is not a 2-D tensor (or a batch of them) of the task",
            )
        )
    st = facts.global_stores(k)[0]
    p.constants = {"TILE": PMAX}
    p.notes = {
        "tile": note(
            k.shared[0].span if k.shared else k.span,
            "the shared-memory tile (and its bank-conflict padding) becomes an SBUF "
            "tile; the Tensor engine transposes it, so no padding is needed",
        ),
        "store": note(st.span, source_line(st.span)),
    }
    p.fields = {
        "x": x.name,
        "out": out.var,
        "batch": x.shape[0] if batched else None,
        "rows": x.shape[-2],
        "cols": x.shape[-1],
        "dtype": x.nl_dtype,
        "constant_notes": {"TILE": "rows and columns per tile (pmax; TensorE transpose limit)"},
    }
    return p
