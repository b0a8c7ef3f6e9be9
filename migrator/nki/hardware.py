"""Per-target hardware numbers, each with the nki-facts.md section it comes from.

Limits (partitions, PSUM banks, SBUF bytes) feed the checks; clocks and bandwidths feed the
cost model. Values marked "inferred" are derived, not documented.
"""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024


@dataclass(frozen=True, slots=True)
class Hardware:
    """One NeuronCore generation."""

    name: str
    pmax: int  # §2.3 tile_size.pmax
    psum_bank_bytes: int  # §2.1: 8 banks x 2 KiB per partition
    psum_banks: int  # §2.3 psum_num_banks
    sbuf_bytes_per_partition: int  # §2.1 usable SBUF per partition
    gemm_stationary_fmax: int  # §2.3
    gemm_moving_fmax: int  # §2.3
    tensor_ghz: float  # §6.1
    vector_ghz: float  # §6.1
    scalar_ghz: float  # §6.1
    gpsimd_ghz: float  # §6.1
    dma_bytes_per_ns: float  # §2.1: 16 DMA engines per core x per-engine B/ns
    dma_efficiency: float  # fraction of dma_bytes_per_ns one kernel's loads reach (calibrated)
    hbm_bytes_per_ns: float  # §2.1: per-core HBM bandwidth (inferred: chip / cores)
    bf16_tflops: float  # §6.1 TensorE peak per core
    fp32_tflops: float  # §6.1


TRN1 = Hardware(
    name="trn1",
    pmax=128,
    psum_bank_bytes=2 * KIB,
    psum_banks=8,
    sbuf_bytes_per_partition=192 * KIB - 16 * KIB,  # 176 KiB usable (§2.1)
    gemm_stationary_fmax=128,
    gemm_moving_fmax=512,
    tensor_ghz=2.8,
    vector_ghz=1.12,
    scalar_ghz=1.4,
    gpsimd_ghz=1.4,
    dma_bytes_per_ns=16 * 17.0,  # 272 GB/s per core
    # Calibrated on the matmul tutorial (cost.py docstring): ~117 GB/s effective.
    dma_efficiency=117.0 / 272.0,
    hbm_bytes_per_ns=410.0,  # 820 GB/s per 2-core chip (inferred per-core split)
    bf16_tflops=92.0,
    fp32_tflops=23.0,
)

TRN2 = Hardware(
    name="trn2",
    pmax=128,
    psum_bank_bytes=2 * KIB,
    psum_banks=8,
    # 224 KiB per partition (§2.1); the usable figure is undocumented for trn2, we subtract
    # the same 16 KiB compiler reserve as trn1 (inferred).
    sbuf_bytes_per_partition=224 * KIB - 16 * KIB,
    gemm_stationary_fmax=128,
    gemm_moving_fmax=512,
    tensor_ghz=2.4,
    vector_ghz=0.96,
    scalar_ghz=1.2,
    gpsimd_ghz=1.2,
    dma_bytes_per_ns=16 * 23.0,  # 368 GB/s per core
    dma_efficiency=117.0 / 272.0,  # trn1 calibration reused (inferred)
    hbm_bytes_per_ns=362.0,  # 2.9 TB/s per 8-core chip (inferred per-core split)
    bf16_tflops=79.0,
    fp32_tflops=20.0,
)

TARGETS: dict[str, Hardware] = {"trn1": TRN1, "trn2": TRN2}
