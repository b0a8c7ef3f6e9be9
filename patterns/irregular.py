"""Families with no automatic mapping, reported precisely: scans, histograms, sorts, gathers.

A fallback matcher: it never claims a kernel, but when no other family matched it names what it
found (with a C2N2xxx diagnostic at the CUDA line), so nothing is dropped silently.
"""

from __future__ import annotations

import re

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
                found.append(diag.make("HISTOGRAM", a.span, op=f"atomic {op}", array=a.array))
                reasons.append(f"histogram: atomic {op} into {a.array}[{a.indices[0].text}]")
                break
        if not any(d.id == "C2N2003" for d in found):
            counters = _private_counters(tu, k)
            if counters is not None:
                span, where, how = counters
                found.append(diag.make("HISTOGRAM", span, array=where, op=how))
                reasons.append(f"histogram: counters in {where} incremented at a key's bin")
        doubling = [lp for lp in k.loops if lp.kind == "doubling"]
        # a bitonic network: a halving stride loop inside a doubling size loop, stages
        # separated by barriers over shared memory (also written without XOR partners, as
        # `pos = 2*tid - (tid & (stride - 1))`); a scan has a single doubling loop
        network = [lp for lp in k.loops if lp.kind == "halving"
                   and any(d.id == lp.parent for d in doubling)]  # fmt: skip
        if network and k.barriers and k.shared:
            arr = k.shared[0].name
            found.append(diag.make("SORT", network[0].span, array=arr))
            reasons.append(f"sorting network: halving loop #{network[0].id} inside doubling loop "
                           f"#{network[0].parent} over shared {arr}")  # fmt: skip
            doubling = []
        # warp scan (lane i adds lane i - offset, offset doubling), often in a __device__ helper
        scans = [(f, lp) for f in _with_callees(tu, k) for lp in f.loops if lp.kind == "doubling"
                 and any(c.name == "__shfl_up_sync" for c in f.calls)]  # fmt: skip
        if scans and not any(d.id == "C2N2005" for d in found):
            lp = scans[0][1]
            found.append(diag.make("SCAN", lp.span, array="warp lanes (__shfl_up_sync)",
                                   line=lp.span.line))  # fmt: skip
            reasons.append(f"prefix scan: __shfl_up_sync in doubling loop #{lp.id}")
            doubling = []
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
        if not any(d.id == "C2N2004" for d in found):
            # a Hillis-Steele scan in a __device__ helper the kernel hands its shared array
            # (`t = s[pos] + s[pos - offset]`, offset doubling): the helper sees a pointer
            callees = _with_callees(tu, k)
            synced = any(g.barriers for g in callees)
            for f in callees[1:]:
                step = [(lp, a) for lp in f.loops if lp.kind == "doubling" and lp.var
                        for a in f.accesses if lp.id in a.loops and a.kind == "read"
                        and f"- {lp.var}" in a.indices[-1].text]  # fmt: skip
                if step and k.shared and synced:
                    lp, a = step[0]
                    found.append(
                        diag.make(
                            "SCAN",
                            lp.span,
                            line=lp.span.line,
                            array=f"shared {k.shared[0].name} (in {f.name})",
                        )
                    )
                    reasons.append(f"prefix scan: doubling loop #{lp.id} of {f.name} over "
                                   f"{a.array}[{a.indices[-1].text}]")  # fmt: skip
                    break
        xor_partner = any("^" in v.expr.text for v in k.index_vars) or any(
            "^" in a.indices[0].text for a in k.accesses
        )
        if not any(d.id == "C2N2005" for d in found) and (
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


def _private_counters(tu: TranslationUnit, k: Kernel) -> tuple[diag.Span, str, str] | None:
    """Counters incremented at a data-dependent index, by hand or by atomics in a helper
    (sub-histograms kept per thread or per warp in shared memory, cuda-samples' histogram64
    and histogram256): `s[data]++` in the kernel, or a
    `__device__` helper that increments `base[key * T]` where the key is a loaded value, passed
    down through helpers (`addWord(base, data.x)` -> `addByte(base, (data >> 2) & 0x3F)`), not
    a thread index (`sdata[tid] += ...` of a reduction helper). The span and the counters'
    name, and how they are counted; or None."""
    for a in k.accesses:
        if a.kind == "update" and a.space == "shared" and not all(i.affine for i in a.indices):
            return a.span, f"shared {a.array}", _NO_ATOMICS
    by_name = {f.name: f for f in tu.kernels}
    plain = {v.name for v in k.index_vars if v.expr.affine} | {lp.var for lp in k.loops if lp.var}
    plain |= {p.name for p in k.params} | _THREAD_WORDS
    todo, seen = [(k, plain, set())], set()
    while todo:
        f, known, data = todo.pop()
        for c in f.calls:
            g = by_name.get(c.name)
            if g is None or g is f or g.name in seen:
                continue
            seen.add(g.name)
            passed = set()
            for p, arg in zip(g.params, c.args, strict=False):
                names = set(re.findall(r"[A-Za-z_]\w*", arg))
                if not p.pointer_depth and ("[" in arg or names & data or names - known):
                    passed.add(p.name)
            pointers = {p.name for p in g.params if p.pointer_depth}
            for a in g.accesses:
                used = {n for i in a.indices for n in re.findall(r"[A-Za-z_]\w*", i.text)}
                if a.kind in ("update", "atomic") and a.array in pointers and used & passed:
                    keys = ", ".join(sorted(used & passed))
                    how = "atomic add" if a.kind == "atomic" else _NO_ATOMICS
                    return a.span, f"{a.array} (in {g.name}, at the key {keys})", how
            if passed:
                todo.append((g, {p.name for p in g.params} | _THREAD_WORDS, passed))
    return None


_NO_ATOMICS = "increment (per-thread counters, no atomics)"
_THREAD_WORDS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim", "x", "y", "z"})


def _with_callees(tu: TranslationUnit, k: Kernel) -> list[Kernel]:
    """`k` and the device functions it calls, transitively."""
    by_name = {f.name: f for f in tu.kernels}
    out, todo = [k], [k]
    while todo:
        for c in todo.pop().calls:
            f = by_name.get(c.name)
            if f is not None and f not in out:
                out.append(f)
                todo.append(f)
    return out
