"""Legacy behaviours published kernels rely on (each exercised with a kernel written here).

Reduction masks over the reduced axes, bn_stats masks, tensor_scalar_reduce, compiler hints,
PSUM operands of nl.matmul / affine_select, first-write PSUM accumulation, dtype constants,
nc_version, dma_transpose and the PSUM over-subscription policy.
"""

import ml_dtypes
import numpy as np
import pytest

import migrator.nki as mn
from migrator.nki import EmulatorOptions, NkiConstraintError, run_kernel
from migrator.nki import isa_legacy as nisa
from migrator.nki import language as nl

RNG = np.random.default_rng(5)


def test_reduction_mask_over_reduced_axes_limits_the_inputs():
    def kernel(a):
        t = nl.load(a)
        i_h = nl.arange(6)[None, :, None]
        i_w = nl.arange(6)[None, None, :]
        s = nl.sum(t, axis=[1, 2], mask=(i_h < 4) & (i_w < 3))
        m = nl.max(t, axis=[1, 2], mask=(i_h < 4) & (i_w < 3))
        out = nl.ndarray((a.shape[0], 2), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[:, 0:1], value=s)
        nl.store(out[:, 1:2], value=m)
        return out

    a = RNG.standard_normal((64, 6, 6)).astype(np.float32)
    out, _ = run_kernel(kernel, a)
    np.testing.assert_allclose(out[:, 0], a[:, :4, :3].sum(axis=(1, 2)), rtol=1e-5)
    np.testing.assert_allclose(out[:, 1], a[:, :4, :3].max(axis=(1, 2)))


def test_reduction_mask_on_partitions_is_still_an_output_mask():
    def kernel(a):
        i_p = nl.arange(128)[:, None]
        s = nl.sum(nl.load(a), axis=1, mask=i_p < 100)
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.zeros((128, 1), nl.float32))
        nl.store(out[0:100, :], value=s[0:100, :])
        return out

    a = RNG.standard_normal((128, 16)).astype(np.float32)
    out, _ = run_kernel(kernel, a)
    np.testing.assert_allclose(out[:100, 0], a[:100].sum(axis=1), rtol=1e-5)


def test_bn_stats_mask_over_the_free_axis_skips_columns():
    def kernel(a):
        t = nl.load(a)
        i_f = nl.arange(8)[None, :]
        stats = nisa.bn_stats(t, mask=i_f < 5, dtype=nl.float32)
        mv = nisa.bn_aggr(stats)
        out = nl.ndarray((a.shape[0], 2), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=mv)
        return out

    a = RNG.standard_normal((128, 8)).astype(np.float32)
    out, _ = run_kernel(kernel, a)
    np.testing.assert_allclose(out[:, 0], a[:, :5].mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[:, 1], a[:, :5].var(axis=1), rtol=1e-4, atol=1e-6)


def test_tensor_scalar_reduce_returns_the_result_and_fills_reduce_res():
    def kernel(a):
        t = nl.load(a)
        red = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        scaled = nisa.tensor_scalar_reduce(
            data=t, op0=nl.multiply, operand0=2.0, reduce_op=nl.max, reduce_res=red
        )
        out = nl.ndarray((128, a.shape[1] + 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[:, 0 : a.shape[1]], value=scaled)
        nl.store(out[:, a.shape[1] :], value=red)
        return out

    a = RNG.standard_normal((128, 32)).astype(np.float32)
    out, run = run_kernel(kernel, a)
    np.testing.assert_allclose(out[:, :32], 2 * a)
    np.testing.assert_allclose(out[:, 32], (2 * a).max(axis=1))
    assert any(i.name.startswith("tensor_scalar_reduce") for i in run.trace)


def test_matmul_with_psum_operand_is_staged_through_sbuf():
    def kernel(x, y):
        xs = nl.load(x)
        yt = nl.transpose(nl.load(y))  # in PSUM
        r = nl.matmul(xs, yt, transpose_x=True)
        out = nl.ndarray((x.shape[1], y.shape[0]), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.copy(r))
        return out

    x = RNG.standard_normal((128, 64)).astype(np.float32)
    y = RNG.standard_normal((128, 128)).astype(np.float32)
    out, run = run_kernel(kernel, x, y)
    np.testing.assert_allclose(out, x.T @ y.T, rtol=1e-4, atol=1e-4)
    assert sum(i.name == "tensor_copy" for i in run.trace) >= 2  # staging + evacuation


def test_nc_matmul_still_rejects_psum_operands():
    def kernel(x):
        xs = nl.load(x)
        p = nisa.nc_transpose(xs)
        r = nisa.nc_matmul(xs, p)
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.copy(r))
        return out

    with pytest.raises(NkiConstraintError, match="psum"):
        run_kernel(kernel, np.ones((128, 128), np.float32))


def test_legacy_affine_select_accepts_a_psum_tile():
    def kernel(x):
        p = nisa.nc_transpose(nl.load(x))
        i_p, i_f = nl.mgrid[0:128, 0:128]
        r = nisa.affine_select(pred=(i_f <= i_p), on_true_tile=p, on_false_value=-1.0)
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    x = RNG.standard_normal((128, 128)).astype(np.float32)
    out, _ = run_kernel(kernel, x)
    np.testing.assert_array_equal(out, np.where(np.tril(np.ones((128, 128), bool)), x.T, -1.0))


def test_first_matmul_into_unwritten_psum_overwrites():
    def kernel(a, b):
        acc = nl.ndarray((2, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.psum)
        for i in nl.affine_range(2):
            for k in nl.affine_range(2):
                acc[i, :, :] += nisa.nc_matmul(
                    nl.load(a[k * 128 : (k + 1) * 128, :]), nl.load(b[k * 128 : (k + 1) * 128, :])
                )
        out = nl.ndarray((2, 128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            nl.store(out[i], value=nl.copy(acc[i]))
        return out

    a = RNG.standard_normal((256, 128)).astype(np.float32)
    b = RNG.standard_normal((256, 128)).astype(np.float32)
    out, _ = run_kernel(kernel, a, b)
    np.testing.assert_allclose(out[0], a.T @ b, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(out[1], a.T @ b, rtol=1e-4, atol=1e-3)


def test_sbuf_add_into_unwritten_tile_still_reports_poison():
    def kernel(a):
        acc = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        acc += nl.load(a)
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=acc)
        return out

    with pytest.raises(NkiConstraintError, match="err_uninitialized_output"):
        run_kernel(
            kernel, np.ones((128, 4), np.float32), options=EmulatorOptions(uninit_outputs="raise")
        )


def test_dtype_constants_and_static_cast():
    assert nl.fp32.min == float(np.finfo(np.float32).min)
    assert nl.bfp16.min == float("-inf")
    assert nl.finfo(nl.bfloat16).max == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    assert nl.finfo(nl.float16).max == 65504.0
    cast = nl.static_cast(np.array([1.00390625, 2.0]), nl.bfloat16)
    assert cast.dtype == ml_dtypes.bfloat16 and float(cast[0]) == 1.0  # RNE to even


def test_compiler_hints_are_no_ops_through_the_shim(tmp_path):
    src = tmp_path / "hinted.py"
    src.write_text(
        "import numpy as np\n"
        "from neuronxcc import nki\n"
        "import neuronxcc.nki.language as nl\n"
        "import neuronxcc.nki.compiler as ncc\n"
        "\n"
        "@ncc.skip_middle_end_transformations\n"
        "@nki.jit\n"
        "def twice(a):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))\n"
        "    with ncc.no_reorder():\n"
        "        t[...] = nl.load(a)\n"
        "        nl.store(out, value=nl.multiply(t, 2.0))\n"
        "    return out\n"
    )
    module = mn.load_kernel_module(src)
    a = RNG.standard_normal((128, 8)).astype(np.float32)
    np.testing.assert_allclose(module.twice(a), 2 * a)


@pytest.mark.parametrize("target, gen", [("trn1", 2), ("trn2", 3)])
def test_get_nc_version_follows_the_target(target, gen):
    seen = []

    def kernel(a):
        seen.append(nisa.get_nc_version())
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out

    run_kernel(kernel, np.ones((128, 2), np.float32), options=EmulatorOptions(target=target))
    assert seen[0].value == gen
    assert (seen[0] >= nisa.nc_version.gen3) == (gen >= 3)


def test_dma_transpose_is_a_bit_exact_transpose():
    def kernel(a):
        t = nisa.dma_transpose(a)
        out = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    a = RNG.standard_normal((64, 128)).astype(ml_dtypes.bfloat16)
    out, run = run_kernel(kernel, a)
    np.testing.assert_array_equal(out, a.T)
    assert any(i.engine.value == "dma" for i in run.trace)


def _psum_hog(a):
    acc = nl.ndarray((9, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(a))
    return out, acc


@pytest.mark.parametrize("policy", ["raise", "report"])
def test_psum_overflow_policy(policy):
    def kernel(a):
        return _psum_hog(a)[0]

    options = EmulatorOptions(psum_overflow=policy)
    a = np.ones((128, 4), np.float32)
    if policy == "raise":
        with pytest.raises(NkiConstraintError, match="err_psum_capacity_exceeded"):
            run_kernel(kernel, a, options=options)
    else:
        out, run = run_kernel(kernel, a, options=options)
        np.testing.assert_array_equal(out, a)
        assert [f.code for f in run.findings] == ["err_psum_capacity_exceeded"]


# -- copy-on-write memory (loads and kernel arguments are shared until written) --------------
def test_loaded_tile_keeps_its_values_when_the_hbm_source_is_overwritten():
    def kernel(a):
        out = nl.ndarray((2, 128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        half = nl.load(a[:, 0:8])  # a strided view, shared with the argument
        view = a.reshape((128, 16))  # an alias of the same HBM memory
        nl.store(view[:, 0:8], value=nl.full((128, 8), 5.0, nl.float32))
        nl.store(out[0], value=half)
        nl.store(out[1], value=nl.load(a[:, 0:8]))
        return out

    a = np.arange(128 * 16, dtype=np.float32).reshape(128, 16)
    original = a.copy()
    out, _ = run_kernel(kernel, a)
    np.testing.assert_array_equal(out[0], original[:, :8])
    np.testing.assert_array_equal(out[1], 5.0)
    np.testing.assert_array_equal(a[:, :8], 5.0)  # written arguments are copied back
    np.testing.assert_array_equal(a[:, 8:], original[:, 8:])


def test_writing_a_loaded_tile_leaves_the_source_alone():
    def kernel(a):
        t = nl.load(a)
        t[...] = nl.multiply(t, 3.0)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(t, nl.load(a)))
        return out

    a = RNG.standard_normal((128, 4)).astype(np.float32)
    before = a.copy()
    out, _ = run_kernel(kernel, a)
    np.testing.assert_allclose(out, 4 * before, rtol=1e-6)
    np.testing.assert_array_equal(a, before)


def test_read_only_arguments_are_neither_copied_nor_modified():
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out

    a = RNG.standard_normal((128, 4)).astype(np.float32)
    a.flags.writeable = False  # the emulator must not need to write the caller's memory
    out, _ = run_kernel(kernel, a)
    np.testing.assert_array_equal(out, a)
    assert not np.shares_memory(out, a)


def test_psum_overflow_default_is_strict():
    assert EmulatorOptions().psum_overflow == "raise"


def test_masked_off_inputs_of_reductions_and_bn_stats_are_not_accessed():
    # The second 8-wide chunk of a 12-wide tile reaches past the tile; the mask keeps the
    # reduction (and bn_stats) inside, so no out-of-bounds access may be reported.
    def kernel(a):
        t = nl.load(a)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(8)[None, :]
        s = nl.sum(t[i_p, 8 + i_f], axis=1, mask=(8 + i_f < 12))
        stats = nisa.bn_stats(t[i_p, 8 + i_f], mask=(8 + i_f < 12), dtype=nl.float32)
        mv = nisa.bn_aggr(stats)
        out = nl.ndarray((128, 3), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[:, 0:1], value=s)
        nl.store(out[:, 1:3], value=mv)
        return out

    a = RNG.standard_normal((128, 12)).astype(np.float32)
    out, _ = run_kernel(kernel, a)
    np.testing.assert_allclose(out[:, 0], a[:, 8:].sum(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[:, 1], a[:, 8:].mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[:, 2], a[:, 8:].var(axis=1), rtol=1e-4, atol=1e-6)


def test_affine_check_still_works_after_many_loop_instances():
    # > 128 affine loop instances push writer keys past int32; the check must keep working.
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for _ in range(130):
            for _j in nl.affine_range(1):
                pass
        t = nl.load(a)
        for _i in nl.affine_range(2):
            nl.store(out, value=t)  # every iteration overwrites the same region
        return out

    with pytest.raises(NkiConstraintError, match="err_unexpected_output_dependencies"):
        run_kernel(kernel, np.ones((128, 4), np.float32))


def test_broadcast_view_of_a_loaded_row_survives_a_write_to_the_source():
    def kernel(g):
        row = nl.load(g)  # (1, 8), shares g's memory until either side is written
        wide = row.broadcast_to((128, 8))
        nl.store(g, value=nl.full((1, 8), 9.0, nl.float32))
        out = nl.ndarray((128, 8), dtype=g.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.copy(wide))
        return out

    g = np.arange(8, dtype=np.float32).reshape(1, 8)
    out, _ = run_kernel(kernel, g.copy())
    np.testing.assert_array_equal(out, np.broadcast_to(np.arange(8, dtype=np.float32), (128, 8)))
