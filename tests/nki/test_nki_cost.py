"""The trace and the first cost model: numbers move the right way and serialise."""

import json

import ml_dtypes
import numpy as np
import pytest

import migrator.nki as mn
from migrator.nki import EmulatorOptions
from migrator.nki import language as nl


def copy_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range(a.shape[0] // 128):
        tile = nl.load(a[r * 128 : (r + 1) * 128, :])
        nl.store(out[r * 128 : (r + 1) * 128, :], value=tile)
    return out


def strided_kernel(a):
    """Loads a transposed (column) view: one descriptor per element."""
    out = nl.ndarray((a.shape[1], 128), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(a.shape[1])[:, None]
    i_f = nl.arange(128)[None, :]
    nl.store(out, value=nl.load(a[i_f, i_p]))
    return out


def matmul_kernel(lhsT, rhs):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(lhsT.shape[0] // 128):
        acc += nl.matmul(
            nl.load(lhsT[k * 128 : (k + 1) * 128, :]),
            nl.load(rhs[k * 128 : (k + 1) * 128, :]),
            transpose_x=True,
        )
    nl.store(out, value=nl.copy(acc))
    return out


def test_profile_is_json_serialisable():
    p = mn.profile(copy_kernel, np.zeros((256, 512), np.float32))
    data = json.loads(p.model_dump_json())
    assert data["engines"]["dma"]["instructions"] == 4
    assert data["hbm_read_bytes"] == data["hbm_write_bytes"] == 256 * 512 * 4
    assert data["bottleneck"] == "dma"
    assert data["hotspots"][0]["location"].startswith(__file__)


def test_doubling_dma_bytes_increases_dma_time():
    small = mn.profile(copy_kernel, np.zeros((256, 512), np.float32))
    large = mn.profile(copy_kernel, np.zeros((512, 512), np.float32))
    assert large.dma_bytes == 2 * small.dma_bytes
    assert large.engines["dma"].busy_us > 1.9 * small.engines["dma"].busy_us


def test_strided_dma_has_more_descriptors_and_costs_more():
    a = np.zeros((128, 64), np.float32)
    contiguous = mn.profile(copy_kernel, a)
    strided = mn.profile(strided_kernel, a)
    assert contiguous.dma_bytes == strided.dma_bytes
    assert strided.dma_descriptors > 100 * contiguous.dma_descriptors
    assert strided.engines["dma"].busy_us > contiguous.engines["dma"].busy_us


def test_matmul_flops_and_fp32_is_slower_than_bf16():
    f32 = [np.ones((256, 128), np.float32), np.ones((256, 512), np.float32)]
    bf16 = [x.astype(ml_dtypes.bfloat16) for x in f32]
    p32, p16 = mn.profile(matmul_kernel, *f32), mn.profile(matmul_kernel, *bf16)
    assert p32.flops == p16.flops == 2 * 256 * 128 * 512
    assert p32.engines["tensor"].instructions == 2
    assert p32.engines["tensor"].busy_us == pytest.approx(4 * p16.engines["tensor"].busy_us)
    assert p16.peak_psum_banks >= 1
    assert 0 < p16.roofline_fraction <= 1


def test_trn1_and_trn2_differ():
    a = [np.ones((256, 128), np.float32), np.ones((256, 512), np.float32)]
    p1 = mn.profile(matmul_kernel, *a, options=EmulatorOptions(target="trn1"))
    p2 = mn.profile(matmul_kernel, *a, options=EmulatorOptions(target="trn2"))
    assert p1.target == "trn1" and p2.target == "trn2"
    assert p1.engines["tensor"].busy_us < p2.engines["tensor"].busy_us  # 2.8 vs 2.4 GHz


def test_trace_records_engine_shape_and_line():
    _, run = mn.run_kernel(
        matmul_kernel, np.ones((128, 128), np.float32), np.ones((128, 512), np.float32)
    )
    engines = [i.engine.value for i in run.trace]
    assert engines.count("tensor") == 1 and engines.count("dma") == 3
    mm = next(i for i in run.trace if i.engine.value == "tensor")
    assert (mm.partitions, mm.free, mm.stationary_free) == (128, 512, 128)
    assert mm.location.file == __file__


def test_tracing_can_be_disabled():
    _, run = mn.run_kernel(
        copy_kernel, np.zeros((128, 4), np.float32), options=EmulatorOptions(trace=False)
    )
    assert run.trace == []


def test_instruction_costs_follow_the_documented_formulas():
    from migrator.nki.cost import DMA_FIXED_NS, instruction_ns
    from migrator.nki.errors import SourceLocation
    from migrator.nki.hardware import TRN2
    from migrator.nki.trace import Engine, Instr

    here = SourceLocation("k.py", 1, "k")
    vec = Instr("tensor_tensor", Engine.VECTOR, 128, 512, "float32", here, streams=2)
    tiny = Instr("tensor_tensor", Engine.VECTOR, 128, 8, "float32", here, streams=2)
    mm = Instr("mm", Engine.TENSOR, 128, 512, "bfloat16", here, flops=1, stationary_free=128)
    mm32 = Instr("mm", Engine.TENSOR, 128, 512, "float32", here, flops=1, stationary_free=128)
    assert instruction_ns(vec, TRN2) == pytest.approx(1024 / 0.96)  # max(64, 2N) cycles
    assert instruction_ns(tiny, TRN2) == pytest.approx(64 / 0.96)  # MIN_II floor
    assert instruction_ns(mm, TRN2) == pytest.approx(512 / 2.4)  # max(min(64, M), N)
    assert instruction_ns(mm32, TRN2) == pytest.approx(4 * 512 / 2.4)  # fp32 is 4x
    dma = Instr("dma_load", Engine.DMA, 128, 512, "float32", here, bytes=262144, descriptors=128,
                contiguous_bytes=2048, hbm_read=262144)  # fmt: skip
    effective_bw = TRN2.dma_bytes_per_ns * TRN2.dma_efficiency  # calibrated, below HBM share
    assert instruction_ns(dma, TRN2) == pytest.approx(262144 / effective_bw + DMA_FIXED_NS)
