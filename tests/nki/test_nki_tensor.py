"""The memory model: views, indexing, dtypes/rounding, poison, masks."""

import inspect

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrator.nki import EmulatorOptions, NkiConstraintError, run_kernel
from migrator.nki import isa_legacy as nisa
from migrator.nki import language as nl
from migrator.nki.tensor import Buffer, Tensor


def run(kernel, *arrays, **kw):
    return run_kernel(kernel, *arrays, **kw)[0]


def test_tiles_are_handles_with_dtype_buffer_shape():
    seen = {}

    def kernel(a):
        t = nl.load(a[0:128, 0:64])
        seen["t"] = (type(t), t.shape, t.dtype, t.buffer)
        p = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        seen["p"] = (p.buffer, p.dtype)
        return a

    run(kernel, np.zeros((256, 64), np.float16))
    assert seen["t"] == (Tensor, (128, 64), np.dtype(np.float16), Buffer.SBUF)
    assert seen["p"] == (Buffer.PSUM, np.dtype(np.float32))


def test_bf16_store_of_fp32_is_ml_dtypes_rne():
    # values exactly halfway between bf16 neighbours check ties-to-even
    base = np.array([1.0, 1.0078125, 3.0, -2.5], dtype=np.float32)
    x = np.tile((base + np.float32(2.0**-9)).reshape(1, -1), (128, 1)).astype(np.float32)
    x[:, 0] = np.float32(1.0) + np.float32(2.0**-8)  # exact tie → rounds to even (1.0)

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(out, value=nl.copy(nl.load(a), dtype=nl.bfloat16))
        return out

    out = run(kernel, x)
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out, x.astype(ml_dtypes.bfloat16))
    assert float(out[0, 0]) == 1.0


def test_fp8_cast_uses_e4m3_max_240():
    x = np.full((128, 4), 1000.0, np.float32)

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=nl.float8_e4m3, buffer=nl.shared_hbm)
        nl.store(out, value=nl.copy(nl.load(a), dtype=nl.float8_e4m3))
        return out

    out = run(kernel, x)
    np.testing.assert_array_equal(out, x.astype(ml_dtypes.float8_e4m3))


def test_float_to_int_rounds_to_nearest_even_and_saturates():
    x = np.tile(np.array([[0.5, 1.5, 2.5, -0.5, 300.0, -300.0]], np.float32), (128, 1))

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=nl.int8, buffer=nl.shared_hbm)
        nl.store(out, value=nl.copy(nl.load(a), dtype=nl.int8))
        return out

    np.testing.assert_array_equal(run(kernel, x)[0], [0, 2, 2, 0, 127, -128])


@pytest.mark.parametrize("uninit, expect_nan", [("nan", True), ("zero", False)])
def test_fresh_tiles_are_poisoned(uninit, expect_nan):
    seen = {}

    def kernel(a):
        t = nl.ndarray((128, 4), dtype=nl.float32)
        i = nl.ndarray((128, 4), dtype=nl.int32)
        seen["f"], seen["i"] = t.read()[0].copy(), i.read()[0].copy()
        return a

    run(kernel, np.zeros((1, 1), np.float32), options=EmulatorOptions(uninit=uninit))
    assert np.isnan(seen["f"]).all() == expect_nan
    assert (seen["i"] == (np.iinfo(np.int32).max if expect_nan else 0)).all()


def test_uninitialised_read_reaching_output_is_detected():
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)  # allocated here
        t = nl.ndarray((128, 8), dtype=nl.float32)
        t[:, 0:4] = nl.load(a[:, 0:4])  # half the tile is never written
        nl.store(out, value=nl.exp(t))  # poison reaches the output
        return out

    strict = EmulatorOptions(uninit_outputs="raise")
    with pytest.raises(NkiConstraintError, match="err_uninitialized_output") as info:
        run(kernel, np.ones((128, 8), np.float32), options=strict)
    assert "first at index (0, 4)" in str(info.value)
    lines, start = inspect.getsourcelines(kernel)
    assert f"test_nki_tensor.py:{start + 1}:" in str(info.value)
    outputs, r = run_kernel(kernel, np.ones((128, 8), np.float32))  # default: a finding
    assert np.isnan(outputs[:, 4:]).all() and not np.isnan(outputs[:, :4]).any()
    assert r.findings and r.findings[0].code == "err_uninitialized_output"


def test_mask_leaves_masked_out_elements_untouched():
    def kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        t = nl.load(b[i_p, i_f])
        doubled = nl.multiply(t, 2.0, mask=(i_f < 32))  # right half never computed
        nl.store(out[i_p, i_f], value=doubled, mask=(i_p < 100) & (i_f < 32))
        return out

    a, b = np.full((128, 64), 7.0, np.float32), np.ones((128, 64), np.float32)
    out = run(kernel, a, b)
    assert (out[:100, :32] == 2.0).all()
    assert (out[100:, :] == 7.0).all() and (out[:, 32:] == 7.0).all()


def test_masked_load_does_not_read_out_of_bounds():
    def kernel(a):
        out = nl.ndarray((128, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(16)[None, :]
        tile = nl.load(a[i_p, i_f], mask=(i_p < 50))
        z = nl.zeros((128, 16), nl.float32)
        nl.store(out, value=z)
        nl.store(out[i_p, i_f], value=tile, mask=(i_p < 50))
        return out

    a = np.arange(50 * 16, dtype=np.float32).reshape(50, 16)
    out = run(kernel, a)
    np.testing.assert_array_equal(out[:50], a)
    assert (out[50:] == 0).all()


def test_views_share_storage_and_ds_slices():
    def kernel(a):
        out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.zeros((128, 8), nl.float32)
        view = t[:, nl.ds(2, 4)]
        view[...] = nl.load(a[:, 0:4])
        assert view.shape == (128, 4)
        nl.store(out, value=t)
        return out

    a = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    out = run(kernel, a)
    np.testing.assert_array_equal(out[:, 2:6], a)
    assert (out[:, [0, 1, 6, 7]] == 0).all()


def test_integer_index_keeps_partition_dim_on_chip():
    shapes = {}

    def kernel(a):
        t = nl.load(a)
        shapes["row"] = t[3].shape
        shapes["col"] = t[:, 3].shape
        shapes["hbm"] = a[3].shape
        return a

    run(kernel, np.zeros((128, 8), np.float32))
    assert shapes == {"row": (1, 8), "col": (128, 1), "hbm": (8,)}


def test_block_dims_with_par_dim():
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        blocks = nl.ndarray((2, nl.par_dim(128), 16), dtype=a.dtype)
        for k in nl.affine_range(2):
            blocks[k] = nl.load(a[k * 128 : (k + 1) * 128, :])
        for k in nl.affine_range(2):
            nl.store(out[k * 128 : (k + 1) * 128, :], value=blocks[k])
        return out

    a = np.arange(256 * 16, dtype=np.float32).reshape(256, 16)
    np.testing.assert_array_equal(run(kernel, a), a)


def test_mgrid_indexing_strided_free_axis():
    def kernel(a):
        out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        grid = nl.mgrid[0:128, 0:8]
        t = nl.load(a[grid.p, 2 * grid.x + 1])
        nl.store(out[grid.p, grid.x], value=t)
        return out

    a = np.arange(128 * 16, dtype=np.float32).reshape(128, 16)
    np.testing.assert_array_equal(run(kernel, a), a[:, 1::2])


def test_reduction_result_broadcasts_along_free_axis():
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        row_max = nl.max(t, axis=1)
        assert row_max.shape == (128, 1)
        nl.store(out, value=nl.subtract(t, row_max))
        return out

    a = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
    np.testing.assert_array_equal(run(kernel, a), a - a.max(axis=1, keepdims=True))


def test_psum_plus_equals_accumulates_in_place():
    def kernel(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 4), nl.float32, buffer=nl.psum)
        t = nl.load(a)
        for _ in nl.affine_range(3):
            acc += t
        nl.store(out, value=acc)
        return out

    a = np.ones((128, 4), np.float32)
    np.testing.assert_array_equal(run(kernel, a), 3 * a)


def test_type_promotion_follows_nki_rules():
    from migrator.nki import dtypes as d

    assert d.promote(d.float16, d.bfloat16) == d.float32
    assert d.promote(d.float8_e4m3, d.float8_e5m2) == d.bfloat16
    assert d.promote(d.int32, d.uint32) == d.float32
    assert d.promote(d.int8, d.uint8) == d.int16
    assert d.promote(d.float16, d.weak_scalar_dtype(1.5)) == d.float32


def test_bool_truth_value_is_an_error():
    def kernel(a):
        if nl.load(a):  # VIOLATION
            pass
        return a

    with pytest.raises(NkiConstraintError, match="err_ambiguous_tensor_truth_value"):
        run(kernel, np.zeros((128, 1), np.float32))


def test_nisa_tensor_scalar_reverse_and_reduce_negate():
    def kernel(a):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        s = nisa.tensor_scalar(t, np.subtract, 10.0, reverse0=True)  # 10 - t
        r = nisa.tensor_reduce(np.add, s, axis=1, negate=True)
        nl.store(out, value=r)
        return out

    a = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    np.testing.assert_allclose(run(kernel, a)[:, 0], -(10 - a).sum(axis=1))


def test_indirect_gather_and_scatter_rows():
    table = np.arange(300 * 8, dtype=np.float32).reshape(300, 8)
    rows = np.random.default_rng(3).choice(300, size=(128, 1), replace=False).astype(np.int32)

    def kernel(data, idx):
        out = nl.ndarray((128, 8), dtype=data.dtype, buffer=nl.shared_hbm)
        scattered = nl.ndarray((300, 8), dtype=data.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(8)[None, :]
        ids = nl.load(idx)
        gathered = nl.load(data[ids[i_p, 0], i_f])
        nl.store(out, value=gathered)
        for t in nl.affine_range(3):
            r = t * 100 + nl.arange(128)[:, None]
            nl.store(
                scattered[r, i_f], value=nl.zeros((128, 8), nl.float32), mask=(r < (t + 1) * 100)
            )
        nl.store(scattered[ids[i_p, 0], i_f], value=gathered)
        return out, scattered

    out, scattered = run(kernel, table, rows)
    np.testing.assert_array_equal(out, table[rows[:, 0]])
    expected = np.zeros_like(table)
    expected[rows[:, 0]] = table[rows[:, 0]]
    np.testing.assert_array_equal(scattered, expected)


@given(
    shape=st.tuples(st.integers(1, 128), st.integers(1, 40)),
    data=st.data(),
)
@settings(max_examples=60, deadline=None)
def test_nested_slice_views_match_numpy(shape, data):
    """Composition of basic views (the storage-coordinate key algebra) equals numpy slicing —
    through the general path and through __getitem__'s shortcut for step-less in-range slices
    (open bounds, empty and reversed ranges included), which must build the same view."""

    def a_slice(n):
        start = data.draw(st.integers(0, n))
        stop = data.draw(st.integers(0, n))
        step = data.draw(st.sampled_from([None, None, 1, 2, 3]))
        if step is not None:
            stop = max(stop, start)
        return slice(data.draw(st.sampled_from([start, None])), stop, step)

    base = np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape)
    first = (a_slice(shape[0]), a_slice(shape[1]))
    mid = base[first]
    second = (a_slice(mid.shape[0]), a_slice(mid.shape[1]))
    expected = mid[second]
    seen = {}

    def kernel(a):
        view = a[first][second]
        general = a._basic(first)._basic(second)  # no shortcut
        assert (view.key, view.shape, view.pdim) == (general.key, general.shape, general.pdim)
        seen["shape"] = view.shape
        if view.size:
            seen["values"] = view.read()[0].copy()
        return a

    run(kernel, base)
    assert seen["shape"] == expected.shape
    if expected.size:
        np.testing.assert_array_equal(seen["values"], expected)


def test_new_tiles_never_alias_their_source():
    """Same-dtype copies and loads own their memory (no hidden views of the source)."""

    def kernel(a):
        out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        loaded = nl.load(a)
        nl.store(a, value=nl.zeros((128, 8), nl.float32))  # overwrite the source in HBM
        acc = nl.zeros((128, 8), nl.float32, buffer=nl.psum)
        acc += loaded
        snapshot = nl.copy(acc)
        acc += loaded  # must not change the snapshot
        nl.store(out, value=nl.add(snapshot, loaded))
        return out

    a = np.ones((128, 8), np.float32)
    np.testing.assert_array_equal(run(kernel, a.copy()), 2 * a)


def test_the_host_access_guard_refuses_a_kernel_and_lets_the_emulator_through(monkeypatch):
    """Under the guard (a scored submission's child), code outside `migrator` that reaches a
    tensor's storage or reads or writes its values directly is refused; the emulator's own
    accesses, one call further down, are not."""
    import migrator.nki.tensor as tensor_module
    from migrator.nki.errors import NkiHostComputeError

    t = Tensor.wrap_input(np.zeros((4, 4), np.float32))
    monkeypatch.setattr(tensor_module, "_GUARDED", [True])
    for access in (lambda: t.storage, lambda: t.read(),
                   lambda: t.write(np.ones((4, 4), np.float32), None)):  # fmt: skip
        with pytest.raises(NkiHostComputeError, match="is not NKI"):
            access()
    assert t.dtype == np.float32 and t.buffer is not None  # (properties read it for the kernel)
    monkeypatch.setattr(tensor_module, "_GUARDED", [False])
    assert t.storage is t._st
