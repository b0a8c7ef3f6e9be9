"""Human-readable rendering of a `TranslationUnit` (what `migrate inspect` prints)."""

from __future__ import annotations

from collections import Counter

from migrator.cuda.ir import Access, IndexExpr, Kernel, TranslationUnit


def _ix(e: IndexExpr | None) -> str:
    if e is None:
        return "?"
    return e.canonical if e.affine and e.canonical else f"{e.text}  (non-affine: {e.reason})"


def _access_line(a: Access) -> str:
    idx = "][".join(_ix(i) for i in a.indices)
    extras = []
    if a.vector_width > 1:
        extras.append(f"x{a.vector_width} vector")
    if a.via:
        extras.append(f"via {a.via}")
    if a.guards:
        extras.append("guards " + ",".join(f"#{g}" for g in a.guards))
    if a.loops:
        extras.append("loops " + ",".join(f"#{lp}" for lp in a.loops))
    tail = f"  ({'; '.join(extras)})" if extras else ""
    return f"{a.kind:<7}{a.array}[{idx}]  line {a.span.line}{tail}"


def render_kernel(k: Kernel) -> list[str]:
    out: list[str] = []
    tmpl = ""
    if k.template_params:
        tmpl = (
            "template <"
            + ", ".join(
                (f"typename {t.name}" if t.kind == "type" else f"{t.type} {t.name}")
                for t in k.template_params
            )
            + "> "
        )
    out.append(
        f"{tmpl}__{k.qualifier.replace('host_device', 'host__ __device')}__ "
        f"{k.return_type} {k.name}  ({k.span})"
    )
    if k.instantiations:
        out.append(
            "  instantiated with: " + "; ".join("<" + ", ".join(i) + ">" for i in k.instantiations)
        )
    out.append("  parameters:")
    width = max((len(p.name) for p in k.params), default=4)
    for p in k.params:
        out.append(f"    {p.name:<{width}}  {p.type:<32} {p.role}")
    if k.shared:
        out.append("  shared memory:")
        for s in k.shared:
            dims = "".join(
                f"[{d if d is not None else (t or '?')}]"
                for d, t in zip(s.dims, s.dims_text, strict=False)
            )
            size = (
                f"{s.bytes} B"
                if s.bytes is not None
                else ("sized at launch" if s.dynamic else "size unknown")
            )
            out.append(
                f"    {'extern ' if s.dynamic else ''}{s.elem_type} {s.name}{dims}  ({size})"
            )
    if k.local_arrays:
        out.append(
            "  local arrays: "
            + ", ".join(
                f"{a.elem_type} {a.name}{''.join(f'[{d}]' for d in a.dims)}" for a in k.local_arrays
            )
        )
    if k.index_vars:
        out.append("  index variables:")
        for v in k.index_vars:
            pat = f"  [{v.expr.pattern}]" if v.expr.pattern else ""
            out.append(f"    {v.name} = {_ix(v.expr)}{pat}")
    if k.accesses:
        out.append("  memory accesses:")
        out.extend(f"    {_access_line(a)}" for a in k.accesses)
    if k.loops:
        out.append("  loops:")
        for lp in k.loops:
            if lp.kind == "while":
                out.append(f"    #{lp.id} while-loop  line {lp.span.line}")
                continue
            start = _ix(lp.start) if lp.start else "?"
            bound = _ix(lp.bound) if lp.bound else "?"
            # a halving loop's step holds its shift or divisor, not an increment
            step = "halved" if lp.kind == "halving" else _ix(lp.step) if lp.step else "?"
            unroll = ", #pragma unroll" if lp.unroll else ""
            out.append(
                f"    #{lp.id} {lp.var} from {start} while {lp.cmp or '?'} {bound}, "
                f"step {step}  [{lp.kind}{unroll}]  line {lp.span.line}"
            )
    if k.guards:
        out.append("  guards:")
        for g in k.guards:
            flags = [g.kind]
            if g.early_exit:
                flags.append("early exit")
            if g.thread_dependent:
                flags.append("varies within a block")
            out.append(f"    #{g.id} if ({g.condition})  [{', '.join(flags)}]  line {g.span.line}")
    if k.barriers:
        counts = Counter(b.kind for b in k.barriers)
        lines = ", ".join(str(b.span.line) for b in k.barriers)
        out.append(
            "  barriers: "
            + ", ".join(f"{n} x{c}" for n, c in counts.items())
            + f"  (lines {lines})"
        )
    by_kind: dict[str, set[str]] = {}
    for c in k.calls:
        if c.kind not in ("barrier", "other", "conversion"):
            by_kind.setdefault(c.kind, set()).add(c.name)
    for kind in ("warp", "atomic", "math", "device", "vector_ctor", "print", "texture"):
        if kind in by_kind:
            out.append(f"  {kind} calls: {', '.join(sorted(by_kind[kind]))}")
    if k.reductions:
        out.append(
            "  reductions: " + "; ".join(f"{r.target} ({r.op}, {r.style})" for r in k.reductions)
        )
    if k.vector_types or k.half_types:
        out.append(f"  types: {', '.join(k.vector_types + k.half_types)}")
    for d in k.diagnostics:
        out.append(f"  {d.render()}")
    return out


def render(tu: TranslationUnit) -> str:
    kernels = tu.global_kernels
    devices = [k for k in tu.kernels if k.qualifier != "global"]
    out = [
        f"{tu.file}: {len(kernels)} __global__ kernel(s), {len(devices)} __device__ "
        f"function(s), {len(tu.launch_sites)} launch site(s)  [IR {tu.ir_version}]",
        "",
    ]
    for k in tu.kernels:
        out.extend(render_kernel(k))
        out.append("")
    if tu.constants:
        out.append(
            "__constant__ / __device__ globals: "
            + ", ".join(
                f"{c.elem_type} {c.name}{''.join(f'[{d}]' for d in c.dims)}" for c in tu.constants
            )
        )
        out.append("")
    if tu.launch_sites:
        out.append("launch sites:")
        for s in tu.launch_sites:
            targs = f"<{', '.join(s.template_args)}>" if s.template_args else ""
            cfg = ", ".join(x for x in (s.grid, s.block, s.shared_bytes, s.stream) if x)
            where = f"in {s.host_function}, " if s.host_function else ""
            out.append(
                f"  {s.kernel}{targs}<<<{cfg}>>>({', '.join(s.args)})  ({where}line {s.span.line})"
            )
            for name, value in s.host_values.items():
                out.append(f"      {name} = {value}")
        out.append("")
    for d in tu.diagnostics:
        out.append(d.render())
    return "\n".join(out).rstrip() + "\n"
