# ruff: noqa: F841, B007 - kernels bind results the way NKI code does; the call is the point
"""Each enforced constraint: the violation is caught with the kernel's file:line, and the legal
variant passes."""

import inspect
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from migrator.nki import EmulatorOptions, NkiConstraintError, run_kernel
from migrator.nki import isa_dst as nisa_new
from migrator.nki import isa_legacy as nisa
from migrator.nki import language as nl

F32 = np.float32
DUMMY = np.zeros((1, 1), F32)


def where(fn, marker="# VIOLATION"):
    """'test_nki_checks.py:<line>' of the marked line in ``fn``."""
    lines, start = inspect.getsourcelines(fn)
    for offset, text in enumerate(lines):
        if marker in text:
            return f"{Path(__file__).name}:{start + offset}"
    raise AssertionError("marker not found")


def expect_violation(kernel, code, *arrays, **kw):
    with pytest.raises(NkiConstraintError) as info:
        run_kernel(kernel, *arrays, **kw)
    err = info.value
    assert err.code == code, str(err)
    assert where(kernel) in str(err), str(err)
    return err


# -- partition dimension -----------------------------------------------------------------------
def partition_kernel(rows):
    def kernel(a):
        t = nl.ndarray((rows, 64), dtype=nl.float32)  # VIOLATION
        t[...] = 0.0
        return a

    return kernel


def test_partition_dim_over_128():
    err = expect_violation(partition_kernel(256), "err_num_partition_exceed_arch_limit", DUMMY)
    assert "256 exceeds architecture limitation of 128" in str(err)
    run_kernel(partition_kernel(128), DUMMY)


def load_rows_kernel(rows):
    def kernel(a):
        t = nl.load(a[0:rows, :])  # VIOLATION
        return a

    return kernel


def test_load_of_more_than_128_rows():
    expect_violation(
        load_rows_kernel(256), "err_num_partition_exceed_arch_limit", np.zeros((256, 4), F32)
    )
    run_kernel(load_rows_kernel(128), np.zeros((256, 4), F32))


# -- PSUM --------------------------------------------------------------------------------------
def psum_kernel(free):
    def kernel(a):
        acc = nl.zeros((128, free), nl.float32, buffer=nl.psum)  # VIOLATION
        return a

    return kernel


def test_psum_tile_larger_than_a_bank():
    err = expect_violation(psum_kernel(1024), "err_psum_tile_exceeds_bank", DUMMY)
    assert "2048-byte bank" in str(err)
    run_kernel(psum_kernel(512), DUMMY)


def psum_banks_kernel(n):
    def kernel(a):
        tiles = []
        for _ in range(n):
            tiles.append(nl.zeros((128, 512), nl.float32, buffer=nl.psum))  # VIOLATION
        return a

    return kernel


def test_more_than_eight_live_psum_banks():
    expect_violation(psum_banks_kernel(9), "err_psum_capacity_exceeded", DUMMY)
    _, run = run_kernel(psum_banks_kernel(8), DUMMY)
    assert run.psum_peak_banks == 8


# -- SBUF capacity -----------------------------------------------------------------------------
def sbuf_kernel(n):
    def kernel(a):
        keep = []
        for _ in range(n):
            keep.append(nl.ndarray((128, 16384), dtype=nl.float32))  # VIOLATION 64 KiB each
        return a

    return kernel


@pytest.mark.parametrize("target, fits", [("trn1", 2), ("trn2", 3)])
def test_sbuf_capacity_per_target(target, fits):
    opts = EmulatorOptions(target=target)
    expect_violation(sbuf_kernel(fits + 1), "err_sbuf_capacity_exceeded", DUMMY, options=opts)
    _, run = run_kernel(sbuf_kernel(fits), DUMMY, options=opts)
    assert run.sbuf_peak == fits * 65536


def test_sbuf_overflow_report_mode_records_a_finding():
    opts = EmulatorOptions(target="trn1", sbuf_overflow="report")
    _, run = run_kernel(sbuf_kernel(3), DUMMY, options=opts)
    assert [f.code for f in run.findings] == ["err_sbuf_capacity_exceeded"]


def test_dead_tiles_release_sbuf():
    def kernel(a):
        for _ in range(10):
            t = nl.ndarray((128, 16384), dtype=nl.float32)  # rebinding frees the previous tile
            del t
        return a

    _, run = run_kernel(kernel, DUMMY, options=EmulatorOptions(target="trn1"))
    assert run.sbuf_peak == 65536


# -- matmul ------------------------------------------------------------------------------------
def matmul_kernel(k, m, n, dtype_s=F32, dtype_m=F32):
    def kernel(s, mv):
        st = nl.load(s)
        mo = nl.load(mv)
        res = nisa.nc_matmul(st, mo)  # VIOLATION
        return s

    return kernel, np.zeros((k, m), dtype_s), np.zeros((k, n), dtype_m)


@pytest.mark.parametrize(
    "shape, code",
    [
        ((128, 256, 64), "err_size_of_dimension_exceed_arch_limit"),  # stationary free > 128
        ((128, 64, 1024), "err_size_of_dimension_exceed_arch_limit"),  # moving free > 512
    ],
)
def test_matmul_tile_limits(shape, code):
    kernel, s, m = matmul_kernel(*shape)
    expect_violation(kernel, code, s, m)
    kernel, s, m = matmul_kernel(128, 128, 512)
    run_kernel(kernel, s, m)


def test_matmul_contraction_mismatch():
    def kernel(s, mv):
        res = nisa.nc_matmul(nl.load(s), nl.load(mv))  # VIOLATION
        return s

    expect_violation(
        kernel, "err_num_partition_mismatch", np.zeros((128, 8), F32), np.zeros((64, 8), F32)
    )


def test_matmul_fp32_with_bf16_is_illegal():
    kernel, s, m = matmul_kernel(128, 64, 64, F32, ml_dtypes.bfloat16)
    expect_violation(kernel, "err_unsupported_dtype", s, m)
    kernel, s, m = matmul_kernel(128, 64, 64, ml_dtypes.bfloat16, ml_dtypes.bfloat16)
    run_kernel(kernel, s, m)


def test_new_matmul_dst_must_be_psum():
    def kernel(s, mv, buf):
        dst = nl.ndarray((64, 64), dtype=nl.float32, buffer=buf)
        nisa_new.nc_matmul(dst, nl.load(s), nl.load(mv))  # VIOLATION
        return s

    s, m = np.zeros((128, 64), F32), np.zeros((128, 64), F32)
    expect_violation(kernel, "err_unsupported_memory", s, m, buf=nl.sbuf)
    run_kernel(kernel, s, m, buf=nl.psum)


# -- buffers -----------------------------------------------------------------------------------
def test_compute_on_hbm_tensor():
    def kernel(a):
        return nl.exp(a)  # VIOLATION

    err = expect_violation(kernel, "err_unsupported_memory", np.zeros((128, 4), F32))
    assert "nl.load it into SBUF first" in str(err)


def test_load_from_sbuf_and_store_to_sbuf():
    def bad_load(a):
        t = nl.load(a)
        u = nl.load(t)  # VIOLATION
        return a

    def bad_store(a):
        t = nl.load(a)
        nl.store(nl.ndarray((128, 4), dtype=nl.float32), value=t)  # VIOLATION
        return a

    expect_violation(bad_load, "err_unsupported_memory", np.zeros((128, 4), F32))
    expect_violation(bad_store, "err_unsupported_memory", np.zeros((128, 4), F32))


def test_tensor_tensor_both_in_psum():
    def kernel(a):
        p1 = nl.zeros((128, 4), nl.float32, buffer=nl.psum)
        p2 = nl.zeros((128, 4), nl.float32, buffer=nl.psum)
        nisa.tensor_tensor(p1, p2, op=nl.add)  # VIOLATION
        return a

    expect_violation(kernel, "err_unsupported_memory", DUMMY)


def test_hbm_tensor_with_init_value():
    def kernel(a):
        z = nl.zeros((128, 4), nl.float32, buffer=nl.shared_hbm)  # VIOLATION
        return a

    expect_violation(kernel, "err_hbm_tensor_with_init_value_not_supported", DUMMY)


def test_reduce_over_partition_axis():
    def kernel(a):
        s = nl.sum(nl.load(a), axis=0)  # VIOLATION
        return a

    expect_violation(kernel, "err_unsupported_reduce_axis", np.zeros((128, 4), F32))


def test_illegal_dtype():
    def kernel(a):
        t = nl.ndarray((128, 4), dtype=np.float64)  # VIOLATION
        return a

    expect_violation(kernel, "err_unsupported_dtype", DUMMY)


# -- indexing ----------------------------------------------------------------------------------
def test_out_of_bounds_slice_is_not_clipped():
    def kernel(a):
        t = nl.load(a[0:128, 0:16])  # VIOLATION (a has 8 columns)
        return a

    expect_violation(kernel, "err_tensor_access_out_of_bound", np.zeros((128, 8), F32))


def test_out_of_bounds_arange_index_without_mask():
    def kernel(a):
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(8)[None, :]
        t = nl.load(a[i_p + 64, i_f])  # VIOLATION
        return a

    expect_violation(kernel, "err_tensor_access_out_of_bound", np.zeros((128, 8), F32))


def test_mixing_slices_and_arange():
    def kernel(a):
        i_p = nl.arange(128)[:, None]
        t = nl.load(a[i_p, 0:8])  # VIOLATION
        return a

    expect_violation(
        kernel, "err_unsupported_mixing_basic_advanced_tensor_indexing", np.zeros((128, 8), F32)
    )


# -- affine_range dependencies -----------------------------------------------------------------
def carried_kernel(loop):
    def kernel(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        state = nl.zeros((128, 4), nl.float32)
        t = nl.load(a)
        for _ in loop(4):
            state[...] = nl.add(state, t)  # VIOLATION carried through `state`
        nl.store(out, value=state)
        return out

    return kernel


def test_affine_range_loop_carried_dependency():
    a = np.ones((128, 4), F32)
    expect_violation(carried_kernel(nl.affine_range), "err_affine_loop_carried_dependency", a)
    out, run = run_kernel(carried_kernel(nl.sequential_range), a)
    np.testing.assert_array_equal(out, 4 * a)
    assert run.findings == []


def test_affine_dependency_report_mode():
    opts = EmulatorOptions(affine_deps="report")
    out, run = run_kernel(carried_kernel(nl.affine_range), np.ones((128, 4), F32), options=opts)
    # iteration 1 reads what iteration 0 wrote (and then overwrites it): both are reported
    assert run.findings[0].code == "err_affine_loop_carried_dependency"
    assert {f.code for f in run.findings} <= {
        "err_affine_loop_carried_dependency",
        "err_unexpected_output_dependencies",
    }
    assert where(carried_kernel(nl.affine_range)) in str(run.findings[0])
    np.testing.assert_array_equal(out, 4 * np.ones((128, 4), F32))


def test_affine_iterations_overwriting_same_output():
    def kernel(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            nl.store(out, value=nl.load(a))  # VIOLATION every iteration writes all of out
        return out

    expect_violation(kernel, "err_unexpected_output_dependencies", np.ones((128, 4), F32))


def test_affine_iterations_overwriting_through_reshaped_views():
    # every iteration reshapes the output afresh (as generated row-tiled kernels do): the
    # views share one write history, so two iterations writing the same rows still conflict
    def kernel(a):
        out = nl.ndarray((128 * 4,), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            i_p = nl.arange(128)[:, None]
            i_f = nl.arange(4)[None, :]
            rows = out.reshape((128, 4))
            nl.store(rows[i_p, i_f], value=nl.load(a), mask=(i_p < 128))  # VIOLATION
        return out

    expect_violation(kernel, "err_unexpected_output_dependencies", np.ones((128, 4), F32))

    def disjoint(a):
        out = nl.ndarray((256 * 4,), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            i_p = i * 128 + nl.arange(128)[:, None]
            i_f = nl.arange(4)[None, :]
            nl.store(out.reshape((256, 4))[i_p, i_f], value=nl.load(a), mask=(i_p < 256))
        return out

    out, run = run_kernel(disjoint, np.ones((128, 4), F32))
    np.testing.assert_array_equal(out, np.ones(1024, F32))
    assert run.findings == []


def test_psum_accumulation_in_affine_loop_is_allowed():
    def kernel(s, mv):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            acc += nl.matmul(
                nl.load(s[k * 128 : (k + 1) * 128, :]),
                nl.load(mv[k * 128 : (k + 1) * 128, :]),
                transpose_x=True,
            )
        nl.store(out, value=acc)
        return out

    s, m = np.ones((256, 128), F32), np.ones((256, 64), F32)
    out, run = run_kernel(kernel, s, m)
    np.testing.assert_array_equal(out, s.T @ m)
    assert run.findings == []


def test_grid_coordinates_in_error_message():
    def kernel(a):
        t = nl.load(a[nl.program_id(0) * 128 : nl.program_id(0) * 128 + 128, :])
        u = nl.exp(a)  # VIOLATION
        return a

    err = expect_violation(kernel, "err_unsupported_memory", np.zeros((256, 4), F32), grid=(2,))
    assert "grid instance (0,) of (2,)" in str(err)


def test_nested_affine_inner_loop_carried_dependency():
    def kernel(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        state = nl.zeros((128, 4), nl.float32)
        t = nl.load(a)
        for _ in nl.affine_range(2):
            for _ in nl.affine_range(3):
                state[...] = nl.add(state, t)  # VIOLATION carried across inner iterations
        nl.store(out, value=state)
        return out

    err = expect_violation(kernel, "err_affine_loop_carried_dependency", np.ones((128, 4), F32))
    assert "iteration 1 of an nl.affine_range loop reads" in str(err)


def test_nested_affine_reading_previous_outer_iteration():
    def kernel(a):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        buf = nl.zeros((128, 8), nl.float32)
        t = nl.load(a)
        for m in nl.affine_range(2):
            for n in nl.affine_range(2):
                buf[:, m * 4 + n * 2 : m * 4 + n * 2 + 2] = nl.copy(t[:, 0:2])
            if m == 1:
                nl.store(out[:, 0:4], value=buf[:, 0:4])  # VIOLATION written when m == 0
        return out

    expect_violation(kernel, "err_affine_loop_carried_dependency", np.ones((128, 8), F32))


def test_nested_affine_independent_regions_are_fine():
    def kernel(a):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        buf = nl.zeros((128, 8), nl.float32)
        t = nl.load(a)
        for m in nl.affine_range(2):
            row = nl.ndarray((128, 4), dtype=nl.float32)
            for n in nl.affine_range(2):
                buf[:, m * 4 + n * 2 : m * 4 + n * 2 + 2] = nl.copy(t[:, 0:2])
                row[:, n * 2 : n * 2 + 2] = nl.copy(t[:, 2:4])
            nl.store(out[:, m * 4 : m * 4 + 4], value=nl.add(row, buf[:, m * 4 : m * 4 + 4]))
        return out

    a = np.arange(128 * 8, dtype=F32).reshape(128, 8)
    out, run = run_kernel(kernel, a)
    assert run.findings == []
    np.testing.assert_array_equal(out[:, 0:2], a[:, 0:2] + a[:, 2:4])
