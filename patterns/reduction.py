"""Reductions: many values combined into one per block, per row, or into a global accumulator.

Styles recognised from the IR's reduction records: shared-memory trees (halving loops over a
``__shared__`` array with barriers), warp-shuffle trees (``__shfl_down/xor_sync``), atomics into a
global accumulator, and per-thread loop accumulation. What is reduced decides the variant:
``block_partial`` (one partial result per block: the first pass of a two-pass full reduction),
``axis`` (one result per row of a matrix), ``atomic_total`` (one global accumulator).
"""

from __future__ import annotations

from migrator.patterns import facts
from migrator.patterns.registry import MatchResult, Priority

from migrator.cuda.ir import Kernel, TranslationUnit


class ReductionMatcher:
    family = "reduction"
    priority: Priority = "default"

    def match(self, tu: TranslationUnit, k: Kernel) -> MatchResult:
        styles = sorted({r.style for r in k.reductions})
        if not styles:
            return self._no(k, "combines no values (no accumulator, tree, shuffle or atomic)")
        stores = facts.global_stores(k)
        atomics = [r for r in k.reductions if r.style == "atomic"]
        if not stores and atomics:
            target = atomics[0].target
            if any(
                not a.indices[0].affine or a.indices[0].variant
                for a in k.accesses
                if a.array == target and a.kind == "atomic"
            ):
                return self._no(k, f"atomics into {target} at a data-dependent index (histogram)")
            return MatchResult(
                family=self.family,
                kernel=k.name,
                matched=True,
                variant="atomic_total",
                reasons=[
                    f"atomic {atomics[0].op} into {target}[0]: a global accumulator",
                    f"styles: {', '.join(styles)}",
                ],
                plan={"variant": "atomic_total", "output": target, "op": atomics[0].op},
            )
        if not stores:
            return self._no(k, "writes no global memory")
        out = stores[-1]
        idx = out.index[0]
        # a rowwise normalisation writes whole rows after reducing; a reduction writes one value
        # per block/row, outside any column loop
        if out.loops:
            return self._no(
                k,
                f"stores {out.array} inside loop(s) {out.loops}: it writes many "
                "values per reduced group (rowwise or stencil, not a reduction)",
            )
        axes = facts.axes(idx)
        op = _final_op(k)
        reasons = [f"reduction styles: {', '.join(styles)} ({op})"]
        if idx.affine and idx.canonical == "blockIdx.x":
            variant = "block_partial"
            reasons.append(
                f"one partial result per block: {out.array}[blockIdx.x] "
                "(first pass of a two-pass full reduction)"
            )
        elif idx.affine and axes <= {"x"} and any("floordiv" in s for s in idx.variant):
            variant = "axis"
            reasons.append(f"one result per warp-sized group: {out.array}[{idx.canonical}]")
        elif idx.affine and axes and not any("threadIdx" in s for s in idx.variant):
            variant = "axis"
            reasons.append(f"one result per block: {out.array}[{idx.canonical}]")
        else:
            return self._no(k, f"result index {idx.canonical or idx.text} is not per block/row")
        thread_sel = [k.guards[g] for g in out.guards if k.guards[g].kind == "thread_select"]
        if thread_sel:
            reasons.append(f"written by one thread ({thread_sel[-1].condition})")
        loads = sorted({a.array for a in k.accesses if a.space == "global" and a.kind == "read"})
        return MatchResult(
            family=self.family,
            kernel=k.name,
            matched=True,
            variant=variant,
            reasons=reasons,
            plan={
                "variant": variant,
                "output": out.array,
                "inputs": loads,
                "op": op,
                "styles": styles,
            },
        )

    def _no(self, k: Kernel, why: str) -> MatchResult:
        return MatchResult(family=self.family, kernel=k.name, matched=False, reasons=[why])


def _final_op(k: Kernel) -> str:
    ops = {r.op for r in k.reductions}
    return ops.pop() if len(ops) == 1 else "+".join(sorted(ops))
