"""A self-contained HTML rendering of a `FidelityReport`: no scripts, no external files.

Plots are inline SVG bar charts: the ulp histogram of the candidate's errors (all trials) and
the per-engine busy time of the candidate next to the reference's.
"""

from __future__ import annotations

from html import escape

from migrator.score.models import FidelityReport

COLORS = {"error": "#b00020", "warning": "#a66300", "note": "#555"}


def _bars(title: str, series: dict[str, list[float]], labels: list[str], unit: str) -> str:
    """Grouped horizontal bars; one group per label, one bar per series."""
    names = list(series)
    top = max((v for vals in series.values() for v in vals), default=0.0) or 1.0
    row, bar_h, left, width = 14 * len(names) + 8, 12, 110, 360
    height = row * len(labels) + 30
    fills = ["#3367d6", "#9aa0a6", "#0b8043"]
    parts = [
        f'<svg width="{left + width + 90}" height="{height}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
    ]
    for i, label in enumerate(labels):
        y0 = 20 + i * row
        parts.append(f'<text x="0" y="{y0 + bar_h}" font-size="11">{escape(label)}</text>')
        for j, name in enumerate(names):
            v = series[name][i]
            w = width * v / top
            y = y0 + j * 14
            parts.append(
                f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                f'fill="{fills[j % 3]}"><title>{escape(name)}: {v:g}</title></rect>'
            )
            parts.append(
                f'<text x="{left + w + 4:.1f}" y="{y + 10}" font-size="10">{v:g}{unit}</text>'
            )
    legend = " ".join(
        f'<tspan fill="{fills[j % 3]}">&#9632; {escape(n)}</tspan>' for j, n in enumerate(names)
    )
    parts.append(f'<text x="{left}" y="12" font-size="11">{legend}</text></svg>')
    return "".join(parts)


def render_html(r: FidelityReport) -> str:
    verdict_color = {"pass": "#0b8043", "fail": "#b00020"}.get(r.verdict, "#555")
    rows = "".join(
        f"<tr><td>{escape(c.name)}</td><td>{c.points:.1f}</td><td>{c.weight:.0f}</td>"
        f"<td>{c.findings}</td></tr>"
        for c in r.categories
    )
    findings = (
        "".join(
            f'<tr><td>{f.rule} {escape(f.name)}</td><td style="color:{COLORS[f.severity]}">'
            f"{f.severity}</td><td><code>{escape(f.nki_location or '')}</code><br><code>"
            f"{escape(f.cuda_location or '')}</code></td><td>{escape(f.message)}</td>"
            f"<td>{escape(f.why)}<br><b>Fix:</b> {escape(f.fix)}</td></tr>"
            for f in r.findings
        )
        or '<tr><td colspan="5">None.</td></tr>'
    )
    plots = []
    if r.numerics is not None and r.numerics.ulp_histogram:
        hist = r.numerics.ulp_histogram
        plots.append(
            _bars(
                "ulp error histogram (elements, all trials)",
                {"elements": [float(v) for v in hist.values()]},
                [f"{k} ulp" for k in hist],
                "",
            )
        )
    p = r.performance
    if p.engine_busy_us:
        engines = list(p.engine_busy_us)
        series = {"candidate": [round(p.engine_busy_us[e], 3) for e in engines]}
        if p.reference_engine_busy_us:
            series[f"reference ({p.reference})"] = [
                round(p.reference_engine_busy_us.get(e, 0.0), 3) for e in engines
            ]
        plots.append(_bars("busy time per engine (us, cost model)", series, engines, " us"))
    feedback = "".join(f"<li>{escape(t)}</li>" for t in (r.numerics.feedback if r.numerics else []))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Fidelity report: {escape(r.kernel)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}table{{border-collapse:
collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;vertical-align:top;font-size:13px}}
</style></head><body>
<h1>Fidelity report: <code>{escape(r.kernel)}</code></h1>
<p>Candidate <code>{escape(r.candidate_file)}</code>, CUDA original <code>{escape(r.cuda_file)}
</code>, seed {r.seed}, schema {escape(r.schema_version)}.</p>
<p style="font-size:20px;color:{verdict_color}"><b>{r.verdict.upper()}</b> {r.score:.1f} / 100
</p><p>{escape(r.summary)}</p>
<h2>Rubric</h2><table><tr><th>category</th><th>points</th><th>weight</th><th>findings</th></tr>
{rows}</table>
<h2>Findings</h2><table><tr><th>rule</th><th>severity</th><th>where (NKI / CUDA)</th>
<th>what</th><th>why / fix</th></tr>{findings}</table>
<h2>Numerics and performance</h2><ul>{feedback}</ul>
{"".join(f"<div>{svg}</div>" for svg in plots)}
</body></html>
"""
