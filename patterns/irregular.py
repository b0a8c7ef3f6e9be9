"""Families with no automatic mapping, reported precisely: scans, histograms, sorts, gathers.

A fallback matcher: it never claims a kernel, but when no other family matched it names what it
found (with a C2N2xxx diagnostic at the CUDA line), so nothing is dropped silently.
"""

from __future__ import annotations

from migrator.patterns.registry import MatchResult, Priority

from migrator import diagnostics as diag
from migrator.cuda.ir import Kernel, TranslationUnit


class IrregularMatcher:
    family = "irregular"
    priority: Priority = "fallback"

    def match(self, tu: TranslationUnit, k: Kernel) -> MatchResult:
        found: list[diag.Diagnostic] = []
        reasons: list[str] = []
        for a in k.accesses:
            if a.kind == "atomic" and not a.indices[0].affine:
                op = next((r.op for r in k.reductions if r.target == a.array), "update")
                found.append(diag.make("HISTOGRAM", a.span, op=op, array=a.array))
                reasons.append(f"histogram: atomic {op} into {a.array}[{a.indices[0].text}]")
                break
        doubling = [lp for lp in k.loops if lp.kind == "doubling"]
        for lp in doubling:
            shared_reads = [
                a
                for a in k.accesses
                if a.space == "shared" and lp.id in a.loops and a.kind in ("read", "update")
            ]
            if (
                shared_reads
                and lp.var
                and any(
                    lp.var in a.indices[-1].variant and not a.indices[-1].text.startswith("2")
                    for a in shared_reads
                )
            ):
                arr = shared_reads[0].array
                found.append(diag.make("SCAN", lp.span, array=arr, line=lp.span.line))
                reasons.append(f"prefix scan: doubling loop #{lp.id} over shared {arr}")
                break
        xor_partner = any("^" in v.expr.text for v in k.index_vars) or any(
            "^" in a.indices[0].text for a in k.accesses
        )
        if (
            xor_partner
            and any(c.name in ("fminf", "fmaxf", "min", "max") for c in k.calls)
            or (xor_partner and k.barriers and k.shared)
        ):
            arr = k.shared[0].name if k.shared else "data"
            found.append(diag.make("SORT", k.span, array=arr))
            reasons.append("sorting network: partners chosen by XOR of the thread index")
        for a in k.accesses:
            idx = a.indices[0]
            if a.space == "global" and not idx.affine and a.kind != "atomic" and ("[" in idx.text):
                found.append(diag.make("IRREGULAR_GATHER", a.span, array=a.array, index=idx.text))
                reasons.append(f"gather/scatter: {a.array}[{idx.text}]")
                break
        if not reasons:
            reasons.append("no scan, histogram, sort or gather structure")
        return MatchResult(
            family=self.family, kernel=k.name, matched=False, reasons=reasons, diagnostics=found
        )
