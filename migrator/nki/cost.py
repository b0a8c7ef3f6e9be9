"""First cost model: instruction trace → per-engine busy time, latency, roofline, bottleneck.

Per instruction (N = elements per partition, nki-facts §4 cost column and §6.2):
  * Vector / Scalar / GpSimd: ``max(64, streams·N)`` cycles (GpSimd iota/affine_select add the
    ~150-cycle start), at the engine clock of §6.1. Partitions used do not change the time.
  * Tensor: matmul ``max(min(64, M_stationary), N_moving)`` cycles, ×4 for fp32; transpose
    ``max(P, min(64, F))``; at the TensorE clock.
  * DMA: every descriptor moves at least 512 bytes' worth of time (small runs are inefficient,
    §6.3), at 16 queues × per-queue bandwidth (§2.1), but never faster than the per-core HBM
    share for HBM bytes; plus ~1.3 µs fixed DMA cost spread over the 16 queues (§6.2).
Latency is estimated as the busiest engine (engines fully overlapped — a lower bound); the
fully serial sum is reported as an upper bound. The roofline time is
``max(flops / TensorE peak, HBM bytes / HBM bandwidth)``; ``roofline_fraction`` is roofline over
estimated latency. Not modelled yet: dependencies between engines, PSUM/SBUF access bubbles,
trn1 engine-sharing restrictions, DMA queue assignment, spills.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pydantic import BaseModel, ConfigDict

from .frontend import run_kernel
from .hardware import TARGETS, Hardware
from .options import EmulatorOptions
from .run import Run
from .trace import Engine, Instr

MIN_CYCLES = 64  # MIN_II, nki-facts §6.2
GPSIMD_START = 150  # nki-facts §4 iota/affine_select
DMA_MIN_BYTES = 512  # minimum efficient descriptor (inferred from §6.3's ≥512 B advice)
DMA_FIXED_NS = 1300.0 / 16  # ~1.3 µs per DMA, overlapped across 16 queues (§6.2)


class EngineStats(BaseModel):
    """Aggregate of one engine's instructions."""

    model_config = ConfigDict(frozen=True)
    instructions: int
    busy_us: float


class Hotspot(BaseModel):
    """Busy time attributed to one kernel source line and engine."""

    model_config = ConfigDict(frozen=True)
    location: str
    engine: str
    instructions: int
    busy_us: float


class Profile(BaseModel):
    """JSON-serialisable summary of one emulated run."""

    model_config = ConfigDict(frozen=True)
    target: str
    instructions: int
    engines: dict[str, EngineStats]
    dma_bytes: int
    dma_descriptors: int
    mean_descriptor_bytes: float
    hbm_read_bytes: int
    hbm_write_bytes: int
    flops: int
    peak_sbuf_bytes_per_partition: int
    peak_psum_banks: int
    estimated_latency_us: float
    serial_latency_us: float
    roofline_latency_us: float
    roofline_fraction: float
    bottleneck: str
    hotspots: list[Hotspot]
    findings: list[str]


def _compute_ns(ins: Instr, hw: Hardware) -> float:
    clocks = {
        Engine.VECTOR: hw.vector_ghz,
        Engine.SCALAR: hw.scalar_ghz,
        Engine.GPSIMD: hw.gpsimd_ghz,
        Engine.TENSOR: hw.tensor_ghz,
    }
    if ins.engine is Engine.TENSOR:
        if ins.flops:
            cycles = max(min(64, ins.stationary_free), ins.free)
            cycles *= 4 if ins.dtype == "float32" else 1
        else:
            cycles = max(ins.partitions, min(64, ins.free))
    else:
        cycles = max(MIN_CYCLES, ins.streams * ins.free)
        if ins.engine is Engine.GPSIMD and ins.name in ("iota", "affine_select"):
            cycles = GPSIMD_START + ins.free
    return cycles / clocks[ins.engine]


def _dma_ns(ins: Instr, hw: Hardware) -> float:
    effective = ins.descriptors * max(ins.contiguous_bytes, DMA_MIN_BYTES)
    queue_ns = effective / hw.dma_bytes_per_ns
    hbm_ns = (ins.hbm_read + ins.hbm_write) / hw.hbm_bytes_per_ns
    return max(queue_ns, hbm_ns) + DMA_FIXED_NS


def instruction_ns(ins: Instr, hw: Hardware) -> float:
    """Modelled engine busy time of one instruction, in nanoseconds."""
    return _dma_ns(ins, hw) if ins.engine is Engine.DMA else _compute_ns(ins, hw)


def summarize(run: Run, top: int = 5) -> Profile:
    """Apply the cost model to a finished run."""
    hw = TARGETS[run.options.target]
    busy: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    lines: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    flops = dma_bytes = descriptors = hbm_r = hbm_w = 0
    tensor_dtypes: set[str] = set()
    for ins in run.trace:
        ns = instruction_ns(ins, hw)
        busy[ins.engine.value] += ns
        counts[ins.engine.value] += 1
        slot = lines[(str(ins.location), ins.engine.value)]
        slot[0] += 1
        slot[1] += ns
        flops += ins.flops
        if ins.flops:
            tensor_dtypes.add(ins.dtype)
        if ins.engine is Engine.DMA:
            dma_bytes += ins.bytes
            descriptors += ins.descriptors
            hbm_r += ins.hbm_read
            hbm_w += ins.hbm_write
    estimated = max(busy.values(), default=0.0)
    peak = hw.fp32_tflops if tensor_dtypes == {"float32"} else hw.bf16_tflops
    roofline = max(flops / (peak * 1e3), (hbm_r + hbm_w) / hw.hbm_bytes_per_ns)
    ranked = sorted(lines.items(), key=lambda kv: -kv[1][1])[:top]
    return Profile(
        target=hw.name,
        instructions=len(run.trace),
        engines={
            e.value: EngineStats(instructions=counts[e.value], busy_us=busy[e.value] / 1e3)
            for e in Engine
        },
        dma_bytes=dma_bytes,
        dma_descriptors=descriptors,
        mean_descriptor_bytes=dma_bytes / descriptors if descriptors else 0.0,
        hbm_read_bytes=hbm_r,
        hbm_write_bytes=hbm_w,
        flops=flops,
        peak_sbuf_bytes_per_partition=run.sbuf_peak,
        peak_psum_banks=run.psum_peak_banks,
        estimated_latency_us=estimated / 1e3,
        serial_latency_us=sum(busy.values()) / 1e3,
        roofline_latency_us=roofline / 1e3,
        roofline_fraction=min(1.0, roofline / estimated) if estimated else 0.0,
        bottleneck=max(busy, key=busy.__getitem__) if busy else "none",
        hotspots=[
            Hotspot(location=loc, engine=eng, instructions=int(n), busy_us=t / 1e3)
            for (loc, eng), (n, t) in ranked
        ],
        findings=[str(f) for f in run.findings],
    )


def profile(
    kernel: Any, *arrays: Any, grid: Any = (), options: EmulatorOptions | None = None, **kwargs: Any
) -> Profile:
    """Run ``kernel`` on numpy ``arrays`` in the emulator and return its cost profile."""
    _, run = run_kernel(kernel, *arrays, grid=grid, options=options, **kwargs)
    return summarize(run)
