"""The migration report as Markdown (the JSON report is `Migration.model_dump_json`)."""

from __future__ import annotations

from migrator.check import output_notes
from migrator.migration import KernelMigration, Migration


def _kernel_md(k: KernelMigration) -> list[str]:
    mapped, total = k.coverage
    out = [
        f"## `{k.kernel}` — {k.status}",
        "",
        f"- family: **{k.family or 'none'}**" + (f" ({k.variant})" if k.variant else ""),
        f"- coverage: {mapped} of {total} constructs mapped automatically",
        f"- NKI kernel: `{k.nki_file}`" if k.nki_file else "- NKI kernel: not written",
    ]
    if k.reasons:
        out += ["", "Why this family:", *[f"- {r}" for r in k.reasons]]
    if k.rejected:
        out += ["", "Other families, and why not:"]
        out += [f"- {fam}: {'; '.join(r)}" for fam, r in k.rejected.items()]
    if k.plan:
        consts = k.plan.get("constants") or {}
        if consts:
            out += ["", "Tiling plan: " + ", ".join(f"{n} = {v}" for n, v in consts.items())]
    out += ["", "| CUDA construct | line | NKI construct | mapped |", "|---|---|---|---|"]
    for c in k.constructs:
        out.append(f"| {c.cuda} | {c.line or ''} | {c.nki} | {'yes' if c.mapped else 'no'} |")
    if k.diagnostics:
        out += ["", "| ID | severity | effort | where | message |", "|---|---|---|---|---|"]
        for d in k.diagnostics:
            where = f"{d.span.file}:{d.span.line}:{d.span.col}" if d.span else ""
            out.append(f"| {d.id} | {d.severity} | {d.effort} | {where} | {d.message} |")
    if k.check is not None:
        out += [
            "",
            f"Numerical check against the CUDA interpreter: **{'pass' if k.check.ok else 'FAIL'}**",
            "",
            "| sizes | output | max abs | max rel | beyond tolerance |",
            "|---|---|---|---|---|",
        ]
        for s in k.check.sizes:
            sizes = ", ".join(f"{a}={b}" for a, b in s.sizes.items())
            if s.error:
                out.append(f"| {sizes} | error | | | {s.error} |")
            for o in s.outputs:
                notes = "".join(f"; {n}" for n in output_notes(o))
                out.append(
                    f"| {sizes} | {o.name} | {o.max_abs:.3g} | {o.max_rel:.3g} | "
                    f"{o.mismatches}/{o.elements}{notes} |"
                )
        if k.check.estimate_us is not None:
            out += [
                "",
                f"Cost model estimate on the default sizes: {k.check.estimate_us:.2f} us "
                f"(bottleneck: {k.check.bottleneck}).",
            ]
    elif k.status != "failed":
        out += ["", "Numerical check: not run (no spec sidecar, or --no-check)."]
    return out


def markdown(m: Migration) -> str:
    lines = [
        f"# Migration report: {m.source}",
        "",
        f"Status: **{m.status}** — target {m.target}, spec {m.spec or 'none'}, "
        f"{m.seconds:.2f} s. Report format {m.version}.",
        "",
    ]
    for k in m.kernels:
        lines += _kernel_md(k) + [""]
    return "\n".join(lines).rstrip() + "\n"


def summary(m: Migration) -> str:
    lines = []
    for k in m.kernels:
        mapped, total = k.coverage
        chk = ""
        if k.check is not None:
            chk = f", check {'pass' if k.check.ok else 'FAIL'}"
            if k.check.estimate_us is not None:
                chk += f", est. {k.check.estimate_us:.1f} us"
        lines.append(
            f"{k.kernel}: {k.status} ({k.family or 'no family'}"
            f"{'/' + k.variant if k.variant else ''}), {mapped}/{total} constructs "
            f"mapped{chk} -> {k.nki_file}"
        )
        for d in k.diagnostics:
            if d.severity != "note":
                lines.append(f"  {d.render()}")
    return "\n".join(lines) + "\n"
