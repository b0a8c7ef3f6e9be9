"""Cost model: instruction trace → per-engine busy time, a dependency schedule, roofline.

Per instruction (N = elements per partition, nki-facts §4 cost column and §6.2):
  * Vector / Scalar / GpSimd: ``max(64, streams·N)`` cycles at the engine clock of §6.1
    (GpSimd iota/affine_select: ~150-cycle start + N). A two-input VectorE op reads one stream
    when an input is in PSUM or for all-bf16 add/subtract/multiply, else two (§4
    tensor_tensor). Partitions used do not change the time.
  * Tensor: matmul ``max(min(64, M_stationary), N_moving)`` cycles, ×4 for fp32 inputs;
    transpose ``max(P, min(64, F))``; at the TensorE clock.
  * DMA: ``bytes / effective bandwidth`` (every descriptor counts at least ``DMA_MIN_BYTES``)
    plus a fixed ~1.3 µs per DMA spread over the 16 queues (§6.2), never faster than the
    per-core HBM share. The effective bandwidth is the documented queue bandwidth (§2.1) times
    ``Hardware.dma_efficiency``, calibrated below.

Latency. Each instruction records the storages it read and wrote (``Run.deps``). The schedule
starts an instruction when its engine has a free slot and its inputs are ready: after the
last write of every storage it reads (RAW), and after earlier reads and writes of every
storage it writes (WAR/WAW). An engine may fill an earlier idle gap with a later independent
instruction, as the compiler reorders independent work (nki-facts §1.1). So overlap depends
on the loop structure: loads into a buffer allocated inside an ``affine_range`` body overlap
the previous iteration's compute, while one buffer reused across iterations serialises them
(nki-facts §3.4). ``estimated_latency_us`` is that makespan; ``overlap_bound_us`` (busiest
engine, perfect overlap) and ``serial_latency_us`` (no overlap) bracket it.

Calibration. The NKI matrix-multiplication tutorial ([SDK-old]
``general/nki/tutorials/matrix_multiplication.rst``, 4096×8192×8192 bf16 on one trn1
NeuronCore) reports 51.80 / 42.96 / 22.07 / 6.97 ms for the tiled, hoisted-load,
blocked-free-dimension and fully optimised kernels. The first three are DMA bound: they move
5.4 / 4.4 / 2.3 GB, mostly 128×512 bf16 ``rhs`` tiles (1 KiB rows) plus 128×128 ``lhsT``
tiles (256 B rows), i.e. 97–104 GB/s. Fitting ``t = bytes / BW + fixed`` per load to the
tiled and hoisted kernels gives BW ≈ 117 GB/s and ≈ 66–81 ns fixed per DMA (consistent with
``DMA_FIXED_NS``) with no visible penalty for 256-byte rows, hence trn1 ``dma_efficiency`` =
117 / 272 and ``DMA_MIN_BYTES`` = 256. The fully optimised kernel is TensorE bound (6.0 ms
of matmuls at 2.8 GHz; 85 % HFU measured). Running the published kernels at full size through
the emulator (trn1) gives 51.97 / 40.82 / 21.18 / 6.54 ms (+0.3 %, -5.0 %, -4.0 %, -6.2 %):
the same order and a 7.9x overall speed-up against 7.4x measured; the model puts the last
kernel at the DMA/TensorE balance point (DMA 6.46 ms, TensorE 5.99 ms) where the profile
shows it TensorE bound. ``tests/nki/test_nki_cost_calibration.py`` checks that the same four
steps, written in the same style at a small size, keep that order. trn2
reuses the trn1 efficiency (inferred: no published trn2 kernel timings were found).

Other published figures, for reference: the fused-Mamba tutorial (trn1, 4096 channels,
seq_len 512) reports 2.34 ms for ``mamba_v1`` and 1.61 ms for ``mamba_v2``; the model gives
2.74 and 2.36 ms — the same order (v1 DMA bound, v2 VectorE bound) but VectorE time ~45 % high
for the scan-heavy v2. The layernorm tutorial (trn1, 300×1000) reports 2311 µs (v1) and
1969 µs (v2) end to end; the model gives 28.4 and 28.9 µs: DMA bound, so it misses the
15 % gain although v2's VectorE time is 25 % lower (the published figures are dominated by
launch overhead the model does not include).

Not modelled: PSUM/SBUF access bubbles and the trn1 engine-sharing restrictions (§6.2),
semaphore/synchronisation latency between engines, DMA queue assignment and descriptor
generation (DGE) modes, stride-dependent SBUF bandwidth (>16-byte strides halve it),
LoadStationary/background weight load and fast-weight-load effects on TensorE, fp32
``is_*_onezero`` speed-ups, the 8-bank PSUM limit on how far TensorE runs ahead of
evictions, spills (over-subscribed SBUF/PSUM is only reported), kernel launch overhead,
instruction fetch and Python-level control flow, SPMD instances on separate cores (legacy
grids are scheduled one after another on one core, as on trn1), and the per-element accuracy
of the ScalarE activation tables. Dependencies are tracked per allocation, not per element,
so two independent halves of one tile are treated as dependent (conservative); the engines
reorder only within a window of ``_Timeline.WINDOW`` busy intervals.
"""

from __future__ import annotations

import bisect
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
# GpSimd instructions documented with the ~150-cycle start (iota, affine_select, local_gather)
# and the other GpSimd index/gather instructions, which run the same software start-up.
GPSIMD_STARTED = frozenset(
    ("iota", "affine_select", "nisa.local_gather", "nisa.sequence_bounds", "nl.gather_flattened")
)
DYNAMIC_MIN_CYCLES = 600  # tensor_copy_dynamic_src/dst: MIN_II_DYNAMIC (API docs)
DMA_MIN_BYTES = 256  # calibrated: 256 B rows show no extra cost in the matmul tutorial
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
    overlap_bound_us: float
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
        if ins.engine is Engine.GPSIMD and ins.name in GPSIMD_STARTED:
            cycles = GPSIMD_START + ins.free
        elif ins.name.startswith("nisa.tensor_copy_dynamic"):
            cycles = max(DYNAMIC_MIN_CYCLES, ins.free)
    return cycles / clocks[ins.engine]


def _dma_ns(ins: Instr, hw: Hardware) -> float:
    effective = ins.descriptors * max(ins.contiguous_bytes, DMA_MIN_BYTES)
    queue_ns = effective / (hw.dma_bytes_per_ns * hw.dma_efficiency)
    hbm_ns = (ins.hbm_read + ins.hbm_write) / hw.hbm_bytes_per_ns
    return max(queue_ns, hbm_ns) + DMA_FIXED_NS


def instruction_ns(ins: Instr, hw: Hardware) -> float:
    """Modelled engine busy time of one instruction, in nanoseconds."""
    return _dma_ns(ins, hw) if ins.engine is Engine.DMA else _compute_ns(ins, hw)


class _Timeline:
    """Busy intervals of one engine, kept sorted and merged.

    ``place`` puts an instruction in the earliest idle gap at or after its ready time, which
    models the compiler and the queues moving independent work earlier. Only the last
    ``WINDOW`` intervals are searched (a finite reordering window, and near-linear cost).
    """

    WINDOW = 64

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []

    def place(self, ready: float, duration: float) -> float:
        starts, ends = self.starts, self.ends
        i = bisect.bisect_right(ends, ready)
        t = ready
        floor = len(starts) - self.WINDOW
        if i < floor:
            i = floor
            t = max(ready, ends[i - 1])
        while i < len(starts) and starts[i] - t < duration:
            t = max(t, ends[i])
            i += 1
        end = t + duration
        # insert [t, end) at i, merging with touching neighbours
        if i and ends[i - 1] >= t:
            i -= 1
            ends[i] = max(ends[i], end)
        else:
            starts.insert(i, t)
            ends.insert(i, end)
        if i + 1 < len(starts) and starts[i + 1] <= ends[i]:
            ends[i] = max(ends[i], ends[i + 1])
            del starts[i + 1], ends[i + 1]
        return end

    @property
    def finish(self) -> float:
        return self.ends[-1] if self.ends else 0.0


def schedule_ns(run: Run, hw: Hardware) -> float:
    """Makespan of the trace under engine occupancy and storage dependencies (see module doc)."""
    deps = run.deps if len(run.deps) == len(run.trace) else [((), ())] * len(run.trace)
    lines: dict[Engine, _Timeline] = defaultdict(_Timeline)
    written: dict[int, float] = {}
    read: dict[int, float] = {}
    for ins, (reads, writes) in zip(run.trace, deps, strict=True):
        ready = 0.0
        for uid in reads:
            ready = max(ready, written.get(uid, 0.0))
        for uid in writes:
            ready = max(ready, written.get(uid, 0.0), read.get(uid, 0.0))
        end = lines[ins.engine].place(ready, instruction_ns(ins, hw))
        for uid in reads:
            read[uid] = max(read.get(uid, 0.0), end)
        for uid in writes:
            written[uid] = end
    return max((line.finish for line in lines.values()), default=0.0)


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
    overlap = max(busy.values(), default=0.0)
    estimated = max(schedule_ns(run, hw), overlap)
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
        overlap_bound_us=overlap / 1e3,
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


def render_profile(p: Profile) -> str:
    """Human-readable summary of a profile."""
    lines = [
        f"target {p.target}: {p.instructions} instructions, estimated "
        f"{p.estimated_latency_us:.2f} us (perfect overlap {p.overlap_bound_us:.2f} us, "
        f"serial {p.serial_latency_us:.2f} us), "
        f"roofline {p.roofline_latency_us:.2f} us ({p.roofline_fraction:.0%}), "
        f"bottleneck {p.bottleneck}",
    ]
    for name, stats in p.engines.items():
        if stats.instructions:
            lines.append(f"  {name:<7} {stats.instructions:6d} instr  {stats.busy_us:10.2f} us")
    lines.append(
        f"  DMA {p.dma_bytes} B in {p.dma_descriptors} descriptors "
        f"({p.mean_descriptor_bytes:.0f} B each); peak SBUF "
        f"{p.peak_sbuf_bytes_per_partition} B/partition, PSUM {p.peak_psum_banks} banks"
    )
    lines += [f"  hot: {h.location} {h.engine} {h.busy_us:.2f} us" for h in p.hotspots]
    lines += [f"  finding: {f}" for f in p.findings]
    return "\n".join(lines)
