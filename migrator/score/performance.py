"""Trainium performance findings: the candidate's emulator profile vs a reference and the roofline.

The reference is the migrator's generated kernel (``migrate(..., check=False)``) profiled on the
same default-size inputs; without one, only absolute rules apply. Every finding names the
candidate line it concerns (the profile's per-line statistics carry ``file:line``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from migrator.score.models import Finding, Performance

SLOWER_FACTOR = 1.5  # modelled latency above this multiple of the reference: warning
SMALL_DMA_BYTES = 512  # bytes per descriptor (nki-facts: >= 512 B for efficient DMAs)
HBM_FACTOR = 1.5  # HBM bytes above this multiple of the reference: warning
LOW_PARTITIONS = 64  # mean partitions per compute instruction below this: warning
SERIAL_OVERLAP = 0.25  # overlap efficiency below this (0 = engines one after another): warning
OVERLAP_GAIN = 0.35  # ... when the reference overlaps at least this much better (without a
# reference nothing says the work could overlap: a single tile's load-compute-store cannot)


def overlap_efficiency(prof: dict[str, Any]) -> float | None:
    """How much of the engines' work runs concurrently: 1 when the modelled latency equals the
    busiest engine's time (perfect overlap), 0 when it equals the sum of all engines' times;
    None when there is too little to overlap (one engine does nearly everything)."""
    serial, bound = prof["serial_latency_us"], prof["overlap_bound_us"]
    if serial <= 1.3 * bound or serial <= 0:
        return None
    eff = (serial - prof["estimated_latency_us"]) / (serial - bound)
    return min(1.0, max(0.0, eff))


def line_stats(run: Any) -> list[dict[str, Any]]:
    """Per (kernel line, engine, instruction, dtype): counts, partitions, DMA shape."""
    agg: dict[tuple[str, str, str, str], dict[str, Any]] = defaultdict(
        lambda: {
            "count": 0,
            "partitions": 0,
            "min_partitions": 1 << 30,
            "bytes": 0,
            "descriptors": 0,
            "flops": 0,
            "free": 0,
        }
    )
    for ins in run.trace:
        a = agg[(str(ins.location), ins.engine.value, ins.name, ins.dtype)]
        a["count"] += 1
        a["partitions"] += ins.partitions
        a["min_partitions"] = min(a["min_partitions"], ins.partitions)
        a["free"] += ins.free
        a["bytes"] += ins.bytes
        a["descriptors"] += ins.descriptors
        a["flops"] += ins.flops
    return [
        {"location": k[0], "engine": k[1], "name": k[2], "dtype": k[3], **v}
        for k, v in sorted(agg.items())
    ]


def _mean_partitions(lines: list[dict[str, Any]]) -> float | None:
    comp = [x for x in lines if x["engine"] != "dma"]
    n = sum(x["count"] for x in comp)
    return sum(x["partitions"] for x in comp) / n if n else None


def _descriptor_bytes(lines: list[dict[str, Any]]) -> float | None:
    dma = [x for x in lines if x["engine"] == "dma"]
    d = sum(x["descriptors"] for x in dma)
    return sum(x["bytes"] for x in dma) / d if d else None


def summarize_performance(
    prof: dict[str, Any] | None, ref: dict[str, Any] | None, reference: str | None
) -> Performance:
    if prof is None:
        return Performance(reference=reference)
    perf = Performance(
        estimated_latency_us=prof["estimated_latency_us"],
        roofline_latency_us=prof["roofline_latency_us"],
        roofline_fraction=prof["roofline_fraction"],
        bottleneck=prof["bottleneck"],
        engine_busy_us={k: v["busy_us"] for k, v in prof["engines"].items()},
        dma_bytes=prof["dma_bytes"],
        mean_descriptor_bytes=prof["mean_descriptor_bytes"],
        peak_sbuf_bytes_per_partition=prof["peak_sbuf_bytes_per_partition"],
        peak_psum_banks=prof["peak_psum_banks"],
        hotspots=[
            f"{h['location']} {h['engine']}: {h['busy_us']:.3f} us ({h['instructions']} instr)"
            for h in prof["hotspots"]
        ],
        reference=reference,
    )
    if ref is not None:
        perf.reference_latency_us = ref["estimated_latency_us"]
        perf.reference_engine_busy_us = {k: v["busy_us"] for k, v in ref["engines"].items()}
        if ref["estimated_latency_us"] > 0:
            perf.ratio_to_reference = prof["estimated_latency_us"] / ref["estimated_latency_us"]
    return perf


def performance_findings(
    prof: dict[str, Any] | None,
    lines: list[dict[str, Any]],
    ref: dict[str, Any] | None,
    ref_lines: list[dict[str, Any]],
    min_hbm_bytes: int,
) -> list[Finding]:
    """Rules C2N4050-C2N4058 on one profiled trial."""
    if prof is None:
        return []
    out: list[Finding] = []
    top = prof["hotspots"][0]["location"] if prof["hotspots"] else None
    est = prof["estimated_latency_us"]
    if ref is not None and ref["estimated_latency_us"] > 0:
        ratio = est / ref["estimated_latency_us"]
        if ratio > SLOWER_FACTOR:
            out.append(
                Finding.of(
                    "C2N4053",
                    f"modelled latency {est:.2f} us is {ratio:.1f}x the reference's "
                    f"{ref['estimated_latency_us']:.2f} us (bottleneck: {prof['bottleneck']})",
                    nki_location=top,
                )
            )
    mp, rp = _mean_partitions(lines), _mean_partitions(ref_lines)
    if mp is not None and mp < LOW_PARTITIONS and (rp is None or rp >= 2 * mp):
        comp = [x for x in lines if x["engine"] != "dma" and x["min_partitions"] < 128]
        worst = max(comp, key=lambda x: x["count"], default=None)
        out.append(
            Finding.of(
                "C2N4050",
                f"compute instructions use {mp:.0f} of 128 partitions on average"
                + (f" (reference: {rp:.0f})" if rp is not None else ""),
                nki_location=worst["location"] if worst else top,
            )
        )
    db, rb = _descriptor_bytes(lines), _descriptor_bytes(ref_lines)
    if db is not None and db < SMALL_DMA_BYTES and (rb is None or rb >= 2 * db):
        dma = [x for x in lines if x["engine"] == "dma" and x["descriptors"]]
        worst = min(dma, key=lambda x: x["bytes"] / x["descriptors"], default=None)
        out.append(
            Finding.of(
                "C2N4051",
                f"DMAs move {db:.0f} bytes per descriptor on average"
                + (f" (reference: {rb:.0f})" if rb is not None else ""),
                nki_location=worst["location"] if worst else top,
            )
        )
    hbm = prof["hbm_read_bytes"] + prof["hbm_write_bytes"]
    base = ref["hbm_read_bytes"] + ref["hbm_write_bytes"] if ref is not None else 2 * min_hbm_bytes
    if base and hbm > HBM_FACTOR * base:
        out.append(
            Finding.of(
                "C2N4052",
                f"{hbm} bytes of HBM traffic vs {base} for the "
                + ("reference" if ref is not None else "inputs+outputs (x2)"),
                nki_location=top,
            )
        )
    mm = [x for x in lines if x["flops"] and x["dtype"] == "float32"]
    if mm:
        out.append(
            Finding.of(
                "C2N4054",
                "matmuls run on float32 operands (1/4 of the bf16 TensorE rate)",
                nki_location=mm[0]["location"],
            )
        )
    eff = overlap_efficiency(prof)
    ref_eff = overlap_efficiency(ref) if ref is not None else None
    if (
        eff is not None
        and eff < SERIAL_OVERLAP
        and ref_eff is not None
        and ref_eff >= eff + OVERLAP_GAIN
    ):
        out.append(
            Finding.of(
                "C2N4058",
                f"engines overlap {100 * eff:.0f} %: modelled {est:.2f} us against "
                f"{prof['overlap_bound_us']:.2f} us for the busiest engine and "
                f"{prof['serial_latency_us']:.2f} us for all engines one after another"
                + f" (the reference overlaps {100 * ref_eff:.0f} %)",
                nki_location=top,
            )
        )
    if prof["peak_psum_banks"] >= 8:
        out.append(Finding.of("C2N4055", "all 8 PSUM banks are live at the peak"))
    frac = prof["roofline_fraction"]
    if frac < 0.05 and (ref is None or frac < ref["roofline_fraction"] / 2):
        out.append(
            Finding.of("C2N4056", f"{100 * frac:.1f} % of the roofline bound", nki_location=top)
        )
    return out
