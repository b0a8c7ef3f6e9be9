"""Renderings of a `FidelityReport`: terminal text, Markdown, JSON and HTML (`report_html`).

All three come from the same report value; none adds information of its own.
"""

from __future__ import annotations

import json

from migrator.score.models import FidelityReport, Finding

SEVERITY_ORDER = {"error": 0, "warning": 1, "note": 2}


def _sorted(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.rule))


def _where(f: Finding) -> str:
    parts = [p for p in (f.nki_location, f.cuda_location) if p]
    return f" [{' / '.join(parts)}]" if parts else ""


def render_json(r: FidelityReport, timing: bool = True) -> str:
    exclude = None if timing else {"timing"}
    return json.dumps(r.model_dump(mode="json", exclude=exclude), indent=2, sort_keys=False)


def render_text(r: FidelityReport) -> str:
    lines = [
        f"{r.kernel}: {r.candidate_file} vs {r.cuda_file}",
        r.summary,
        "",
        "categories:",
    ]
    for c in r.categories:
        lines.append(f"  {c.name:<16} {c.points:5.1f} / {c.weight:4.0f}  ({c.findings} finding(s))")
    if r.findings:
        lines += ["", "findings:"]
        for f in _sorted(r.findings):
            lines.append(f"  {f.rule} {f.severity:<7} {f.name}: {f.message}{_where(f)}")
            if f.severity != "note":
                lines.append(f"      why: {f.why}")
                lines.append(f"      fix: {f.fix}")
    if r.numerics is not None:
        n = r.numerics
        lines += [
            "",
            f"numerics: {n.passed}/{n.trials} trials pass; worst relative L2 "
            f"{n.worst_rel_l2:.3g}; ulp histogram {n.ulp_histogram}",
        ]
        lines += [f"  {t}" for t in n.feedback]
        for t in r.trials:
            if t.status not in ("ok",):
                lines.append(
                    f"  trial {t.index} ({t.distribution}, {t.sizes}): {t.status}"
                    + (f" - {t.detail}" if t.detail else "")
                )
    p = r.performance
    if p.estimated_latency_us is not None:
        ref = (
            f", reference ({p.reference}) {p.reference_latency_us:.2f} us"
            if p.reference_latency_us is not None
            else ""
        )
        lines += [
            "",
            f"performance: {p.estimated_latency_us:.2f} us modelled{ref}; "
            f"bottleneck {p.bottleneck}; roofline {100 * (p.roofline_fraction or 0):.0f} %",
        ]
        lines += [f"  hotspot {h}" for h in p.hotspots[:3]]
    return "\n".join(lines) + "\n"


def render_markdown(r: FidelityReport) -> str:
    out = [
        f"# Fidelity report: `{r.kernel}`",
        "",
        f"- candidate: `{r.candidate_file}`",
        f"- CUDA original: `{r.cuda_file}` (spec `{r.spec_file}`)",
        f"- verdict: **{r.verdict.upper()}**, score **{r.score:.1f} / 100** (seed {r.seed})",
        f"- {r.summary}",
        "",
        "## Rubric",
        "",
        "| category | points | weight | findings |",
        "|---|---:|---:|---:|",
    ]
    out += [f"| {c.name} | {c.points:.1f} | {c.weight:.0f} | {c.findings} |" for c in r.categories]
    out += ["", "## Findings", ""]
    if not r.findings:
        out.append("None.")
    else:
        out += ["| rule | severity | where | what | how to fix |", "|---|---|---|---|---|"]
        for f in _sorted(r.findings):
            where = (f.nki_location or "").replace("|", "\\|")
            msg = f.message.replace("|", "\\|")
            out.append(f"| {f.rule} {f.name} | {f.severity} | `{where}` | {msg} | {f.fix} |")
    if r.numerics is not None:
        n = r.numerics
        out += [
            "",
            "## Numerics",
            "",
            f"{n.passed}/{n.trials} trials within the policy "
            f"(k = {n.policy['k_norm']:g}); worst relative L2 {n.worst_rel_l2:.3g}.",
            "",
        ]
        out += [f"- {t}" for t in n.feedback]
        out += [
            "",
            "| trial | distribution | sizes | status | rel L2 | allowed | max ulp |",
            "|---:|---|---|---|---:|---:|---:|",
        ]
        for t in r.trials:
            m = max(t.outputs, key=lambda o: o.rel_l2, default=None)
            sizes = ", ".join(f"{k}={v}" for k, v in t.sizes.items())
            cols = f"{m.rel_l2:.2g} | {m.allowed_rel_l2:.2g} | {m.max_ulp}" if m else " | | "
            out.append(f"| {t.index} | {t.distribution} | {sizes} | {t.status} | {cols} |")
    p = r.performance
    if p.estimated_latency_us is not None:
        out += [
            "",
            "## Performance (emulator cost model)",
            "",
            "| engine | candidate busy us | reference busy us |",
            "|---|---:|---:|",
        ]
        for e, v in p.engine_busy_us.items():
            rv = p.reference_engine_busy_us.get(e)
            out.append(f"| {e} | {v:.3f} | {'' if rv is None else f'{rv:.3f}'} |")
        out += [
            "",
            f"Modelled latency {p.estimated_latency_us:.2f} us"
            + (
                f" vs {p.reference_latency_us:.2f} us for the {p.reference} reference"
                if p.reference_latency_us is not None
                else ""
            )
            + f"; bottleneck {p.bottleneck}; {100 * (p.roofline_fraction or 0):.0f} % of the "
            "roofline.",
        ]
    return "\n".join(out) + "\n"


def render_html(r: FidelityReport) -> str:
    from migrator.score.report_html import render_html as html

    return html(r)


RENDERERS = {"text": render_text, "md": render_markdown, "json": render_json, "html": render_html}
