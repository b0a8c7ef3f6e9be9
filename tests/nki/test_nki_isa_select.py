"""Selection, top-8, gather, shuffle, random and read-modify-write APIs against numpy.

Kernels of our own (both dialects); every assertion checks values a wrong implementation
would get wrong (duplicates, reversed predicates, repeated scatter indices, quadrants).
"""

import numpy as np
import pytest

from migrator.nki import EmulatorOptions, NkiConstraintError, run_kernel
from migrator.nki import isa_dst as nisa_new
from migrator.nki import isa_legacy as nisa
from migrator.nki import language as nl
from migrator.nki.errors import NkiIndexError, NkiNotEmulatedError

RNG = np.random.default_rng(5)
F32 = np.float32


def stored(tile):
    out = nl.ndarray(tile.shape, dtype=tile.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=tile)
    return out


def test_tensor_copy_predicated_and_reverse():
    src = RNG.standard_normal((64, 32)).astype(F32)
    old = RNG.standard_normal((64, 32)).astype(F32)
    pred = (RNG.random((64, 32)) < 0.3).astype(np.uint8)

    def kernel(s, d, p, reverse):
        dst = nl.load(d)
        nisa.tensor_copy_predicated(src=nl.load(s), dst=dst, predicate=nl.load(p),
                                    reverse_pred=reverse)  # fmt: skip
        return stored(dst)

    out = run_kernel(kernel, src, old, pred, False)[0]
    np.testing.assert_array_equal(out, np.where(pred != 0, src, old))
    out = run_kernel(kernel, src, old, pred, True)[0]
    np.testing.assert_array_equal(out, np.where(pred != 0, old, src))


def test_dropout_probabilities_and_seed():
    x = np.ones((128, 512), F32)
    prob = np.zeros((128, 1), F32)
    prob[64:] = 1.0

    def kernel(a, p):
        return stored(nisa.dropout(nl.load(a), prob=nl.load(p)))

    out = run_kernel(kernel, x, prob)[0]
    assert (out[:64] == 1).all() and (out[64:] == 0).all()

    def half(a):
        return stored(nisa.dropout(nl.load(a), prob=0.5))

    a1 = run_kernel(half, x, options=EmulatorOptions(seed=1))[0]
    a2 = run_kernel(half, x, options=EmulatorOptions(seed=1))[0]
    b = run_kernel(half, x, options=EmulatorOptions(seed=2))[0]
    assert 0.45 < (a1 == 0).mean() < 0.55
    np.testing.assert_array_equal(a1, a2)
    assert not np.array_equal(a1, b)
    assert set(np.unique(a1)) == {0.0, 1.0}  # kept elements are not rescaled


def test_max8_find_index8_match_replace8():
    data = RNG.permutation(128 * 40).reshape(128, 40).astype(F32)
    data[:, 5] = data[:, 3]  # a duplicated value: two successive occurrences
    data[:, 3] = 1e6
    data[:, 5] = 1e6

    def kernel(d):
        t = nl.load(d)
        top = nisa.max8(src=t)
        idx = nisa.nc_find_index8(data=t, vals=top)
        where = nl.ndarray((128, 8), dtype=nl.uint32)
        replaced = nisa.nc_match_replace8(data=t, vals=top, imm=-1.0, dst_idx=where)
        return stored(top), stored(idx), stored(replaced), stored(where)

    top, idx, replaced, where = run_kernel(kernel, data)[0]
    ref_top = -np.sort(-data, axis=1)[:, :8]
    np.testing.assert_array_equal(top, ref_top)
    assert idx.dtype == np.uint32
    # find_index8: the first occurrence of each value (both 1e6 entries map to column 3)
    np.testing.assert_array_equal(idx[:, 0], 3)
    np.testing.assert_array_equal(idx[:, 1], 3)
    np.testing.assert_array_equal(data[np.arange(128)[:, None], idx], ref_top)
    # match_replace8: successive occurrences, so columns 3 and 5 are both replaced
    np.testing.assert_array_equal(where[:, :2], np.tile([3, 5], (128, 1)))
    assert ((replaced == -1).sum(axis=1) == 8).all()
    expect = data.copy()
    np.put_along_axis(expect, where.astype(np.int64), -1.0, axis=1)
    np.testing.assert_array_equal(replaced, expect)


def test_nc_stream_shuffle_quadrants_and_keep():
    src = RNG.standard_normal((64, 8)).astype(F32)
    mask = [(i + 1) % 32 for i in range(32)]
    mask[7] = 255  # partition 7 of every quadrant keeps dst's value

    def kernel(a):
        s = nl.load(a)
        d = nl.zeros((64, 8), dtype=nl.float32)
        nisa.nc_stream_shuffle(src=s, dst=d, shuffle_mask=mask)
        return stored(d)

    out = run_kernel(kernel, src)[0]
    expect = np.zeros_like(src)
    for q in range(2):
        for i in range(32):
            if mask[i] != 255:
                expect[32 * q + i] = src[32 * q + mask[i]]
    np.testing.assert_array_equal(out, expect)


def test_range_select_accumulates_max_across_instructions():
    x = RNG.random((128, 64)).astype(F32)
    lo = np.full((128, 1), 10, F32)
    hi = RNG.integers(20, 60, (128, 1)).astype(F32)

    def kernel(a, b0, b1):
        t, l_, h = nl.load(a), nl.load(b0), nl.load(b1)
        res = nl.ndarray((128, 1), dtype=nl.float32)
        first = nisa.range_select(on_true_tile=t, comp_op0=np.greater_equal, comp_op1=np.less,
                                  bound0=l_, bound1=h, reduce_cmd=nisa.reduce_cmd.reset_reduce,
                                  reduce_op=np.max, range_start=0)  # fmt: skip
        nisa.range_select(on_true_tile=nl.multiply(t, 2.0), comp_op0=np.greater_equal,
                          comp_op1=np.less, bound0=l_, bound1=h,
                          reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=res, reduce_op=np.max,
                          range_start=32)  # fmt: skip
        return stored(first), stored(res)

    first, res = run_kernel(kernel, x, lo, hi)[0]
    col = np.arange(64)[None, :]
    keep0 = (col >= lo) & (col < hi)
    keep1 = (col + 32 >= lo) & (col + 32 < hi)
    fmin = np.finfo(F32).min
    np.testing.assert_array_equal(first, np.where(keep0, x, fmin))
    want = np.maximum(np.where(keep0, x, fmin).max(1), np.where(keep1, 2 * x, fmin).max(1))
    np.testing.assert_allclose(res[:, 0], want)


def test_select_reduce_vector_on_false_and_reverse():
    x = RNG.standard_normal((128, 32)).astype(F32)
    pred = (RNG.random((128, 32)) < 0.5).astype(np.uint8)
    off = RNG.standard_normal((128, 1)).astype(F32)

    def kernel(a, p, f):
        dst = nl.ndarray((128, 32), dtype=nl.float32)
        red = nl.ndarray((128, 1), dtype=nl.float32)
        nisa.select_reduce(dst=dst, predicate=nl.load(p), on_true=nl.load(a),
                           on_false=nl.load(f), reverse_pred=True, reduce_res=red,
                           reduce_cmd=nisa.reduce_cmd.reset_reduce)  # fmt: skip
        return stored(dst), stored(red)

    dst, red = run_kernel(kernel, x, pred, off)[0]
    expect = np.where(pred == 0, x, off)
    np.testing.assert_array_equal(dst, expect)
    np.testing.assert_array_equal(red[:, 0], expect.max(axis=1))


def test_local_gather_per_sixteen_partition_group():
    src = RNG.standard_normal((32, 64)).astype(F32)
    index = RNG.integers(0, 31, (32, 2)).astype(np.uint16) * 2  # element offsets

    def kernel(s, i):
        return stored(nisa.local_gather(nl.load(s), nl.load(i), 2, 20))

    out = run_kernel(kernel, src, index)[0]
    expect = np.empty((32, 40), F32)
    for g in range(2):
        rows = slice(16 * g, 16 * g + 16)
        idx = index[rows].flatten(order="F")[:20].astype(int)  # partition-first
        cols = (idx[:, None] + np.arange(2)).reshape(-1)
        expect[rows] = src[rows][:, cols]
    np.testing.assert_array_equal(out, expect)


def test_sequence_bounds_runs_and_padding():
    ids = np.array([[0, 3, 3, 5, 0, 7, 7, 7]], F32)

    def kernel(s):
        return stored(nisa.sequence_bounds(segment_ids=nl.load(s)))

    out = run_kernel(kernel, ids)[0]
    assert out.shape == (1, 2, 8)
    np.testing.assert_array_equal(out[0, 0], [8, 1, 1, 3, 8, 5, 5, 5])
    np.testing.assert_array_equal(out[0, 1], [-1, 3, 3, 4, -1, 8, 8, 8])


def test_tensor_copy_dynamic_src_reads_at_a_register_offset():
    src = RNG.standard_normal((128, 64)).astype(F32)
    offsets = np.array([[5, 17, 2]], np.int32)

    def kernel(s, o):
        t, off = nl.load(s), nl.load(o)
        out = nl.ndarray((128, 3), dtype=nl.float32)
        i_p, i_f = nl.mgrid[0:128, 0:1]
        for j in nl.affine_range(3):
            out[i_p, j + i_f] = nisa.tensor_copy_dynamic_src(t[i_p, off[0, j] + i_f])
        return stored(out)

    np.testing.assert_array_equal(run_kernel(kernel, src, offsets)[0], src[:, [5, 17, 2]])


def test_dma_copy_rmw_add_sums_repeated_indices_and_oob_modes():
    a = RNG.standard_normal((8, 16)).astype(F32)
    idx = np.array([[1], [3], [1], [0], [3], [3], [6], [2]], np.int32)

    def rmw(v, ix):
        out = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.full((8, 16), 1.0, dtype=nl.float32))
        i_f = nl.arange(16)[None, :]
        nisa.dma_copy(dst=out[nl.load(ix), i_f], src=nl.load(v), dst_rmw_op=np.add)
        return out

    out = run_kernel(rmw, a, idx)[0]
    expect = np.ones((8, 16), F32)
    np.add.at(expect, idx[:, 0], a)
    np.testing.assert_allclose(out, expect, rtol=1e-6)

    far = np.array([[0], [9], [2], [40], [4], [5], [6], [7]], np.int32)

    def gather(v, ix, mode):
        out = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        tile = nl.full((8, 16), -1.0, dtype=nl.float32)
        i_f = nl.arange(16)[None, :]
        nisa.dma_copy(dst=tile, src=v[nl.load(ix), i_f], oob_mode=mode)
        nl.store(out, value=tile)
        return out

    out = run_kernel(gather, a, far, nisa.oob_mode.skip)[0]
    live = far[:, 0] < 8
    np.testing.assert_array_equal(out[live], a[far[live, 0]])
    assert (out[~live] == -1).all()
    with pytest.raises(NkiIndexError) as info:
        run_kernel(gather, a, far, nisa.oob_mode.error)
    assert isinstance(info.value, IndexError) and isinstance(info.value, NkiConstraintError)
    assert info.value.code == "err_tensor_access_out_of_bound"


def test_dma_copy_hwdge_refuses_casts():
    a = np.ones((4, 8), F32)

    def kernel(x):
        t = nl.ndarray((4, 8), dtype=nl.bfloat16)
        nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge)
        return stored(t)

    with pytest.raises(NkiConstraintError, match="hwdge"):
        run_kernel(kernel, a)


def test_nc_matmul_double_row_fp8():
    fp8 = nl.float8_e4m3
    s = RNG.integers(-3, 4, (128, 2, 16)).astype(fp8)
    m = RNG.integers(-3, 4, (128, 2, 512)).astype(fp8)

    def kernel(a, b, mode):
        return stored(nl.copy(nisa.nc_matmul(nl.load(a), nl.load(b), perf_mode=mode)))

    out = run_kernel(kernel, s, m, "double_row_gen3")[0]
    ref = np.einsum("kli,klj->ij", s.astype(F32), m.astype(F32))
    np.testing.assert_array_equal(out, ref)
    with pytest.raises(NkiNotEmulatedError, match="perf_mode"):
        run_kernel(kernel, s, m, "quad_row")
    with pytest.raises(NkiConstraintError, match="trn2"):
        run_kernel(kernel, s, m, "double_row_gen3", options=EmulatorOptions(target="trn1"))


def test_nc_matmul_hints_and_pe_tiling_are_validated():
    a = RNG.standard_normal((64, 64)).astype(F32)

    def kernel(x, **kw):
        t = nl.load(x)
        return stored(nl.copy(nisa.nc_matmul(t, t, **kw)))

    out = run_kernel(kernel, a, tile_position=(64, 0), tile_size=(64, 64))[0]
    np.testing.assert_allclose(out, a.T @ a, rtol=1e-4, atol=1e-4)
    with pytest.raises(NkiConstraintError, match="multiples of 32"):
        run_kernel(kernel, a, tile_position=(0, 16), tile_size=(64, 64))
    with pytest.raises(NkiConstraintError, match="onezero"):
        run_kernel(kernel, a, is_moving_onezero=True)
    with pytest.raises(NkiConstraintError, match="identity"):
        run_kernel(kernel, a, is_transpose=True)


def test_rand_random_seed_and_gather_flattened():
    def kernel():
        nl.random_seed(7)
        r1 = nl.rand((32, 64))
        nl.random_seed(7)
        r2 = nl.rand((32, 64))
        idx = nl.ndarray((32, 2, 3), dtype=nl.uint32)
        idx[...] = nisa.iota(nl.arange(6)[None, :] * 5 + nl.arange(32)[:, None], dtype=nl.uint32)
        g = nl.gather_flattened(r1, idx)
        return stored(r1), stored(r2), stored(g)

    r1, r2, g = run_kernel(kernel)[0]
    assert (r1 >= 0).all() and (r1 < 1).all() and r1.std() > 0.2
    np.testing.assert_array_equal(r1, r2)
    cols = (np.arange(6)[None, :] * 5 + np.arange(32)[:, None]).reshape(32, 2, 3)
    np.testing.assert_array_equal(
        g, np.take_along_axis(r1, cols.reshape(32, 6), 1).reshape(g.shape)
    )


def test_atomic_rmw_adds_every_contribution():
    base = np.zeros((4, 8), F32)
    vals = np.arange(6 * 8, dtype=F32).reshape(6, 8)
    idx = np.array([[0], [2], [0], [0], [3], [2]], np.int32)

    def kernel(b, v, ix):
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(b))
        nl.atomic_rmw(out[nl.load(ix), nl.arange(8)[None, :]], value=nl.load(v), op=np.add)
        return out

    out = run_kernel(kernel, base, vals, idx)[0]
    expect = base.copy()
    np.add.at(expect, idx[:, 0], vals)
    np.testing.assert_array_equal(out, expect)


def test_tensor_view_reinterprets_bits():
    a = np.array([[1.0, -2.0], [0.5, 3.0]], F32)

    def kernel(x):
        t = nl.load(x)
        bits = t.view(nl.int32)
        halves = t.view(nl.uint16)
        return stored(nl.copy(bits)), stored(nl.copy(halves))

    bits, halves = run_kernel(kernel, a)[0]
    np.testing.assert_array_equal(bits, a.view(np.int32))
    assert halves.shape == (2, 4)
    np.testing.assert_array_equal(halves, a.view(np.uint16))


def test_reverse_operands_of_scan_and_scalar_tensor_tensor():
    x = RNG.uniform(1, 2, (16, 8)).astype(F32)
    y = RNG.uniform(1, 2, (16, 8)).astype(F32)

    def kernel(a, b):
        ta, tb = nl.load(a), nl.load(b)
        s = nisa.scalar_tensor_tensor(data=ta, op0=np.subtract, operand0=1.0, op1=np.divide,
                                      operand1=tb, reverse0=True, reverse1=True)  # fmt: skip
        c = nisa.tensor_tensor_scan(ta, tb, 0.0, np.subtract, np.add, reverse0=True)
        return stored(s), stored(c)

    s, c = run_kernel(kernel, x, y)[0]
    np.testing.assert_allclose(s, y / (1.0 - x), rtol=1e-6)
    ref = np.zeros_like(x)
    carry = np.zeros(16, F32)
    for i in range(8):
        carry = (carry - x[:, i]) + y[:, i]  # reverse0: op0(r[i-1], data0[i])
        ref[:, i] = carry
    np.testing.assert_allclose(c, ref, rtol=1e-5)


def test_activation_reduce_cmd_accumulates_registers():
    x = RNG.standard_normal((128, 16)).astype(F32)

    def kernel(a):
        t = nl.load(a)
        res = nl.ndarray((128, 1), dtype=nl.float32)
        nisa.activation(
            op=nl.exp, data=t, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reset_reduce
        )
        nisa.activation(op=nl.exp, data=t, reduce_op=nl.add, reduce_res=res,
                        reduce_cmd=nisa.reduce_cmd.reduce)  # fmt: skip
        return stored(res)

    res = run_kernel(kernel, x)[0]
    np.testing.assert_allclose(res[:, 0], 2 * np.exp(x).sum(axis=1), rtol=1e-5)


def test_python_and_on_index_predicates_is_true_with_a_finding():
    a = np.arange(128 * 8, dtype=F32).reshape(128, 8)

    def kernel(x):
        i_p, i_f = nl.mgrid[0:128, 0:8]
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x), mask=(i_p < 64 and i_f < 4))  # means: i_f < 4
        return out

    out, run = run_kernel(kernel, a)
    np.testing.assert_array_equal(out[:, :4], a[:, :4])
    assert np.isnan(out[:, 4:]).all()
    codes = [f.code for f in run.findings]
    assert "err_index_truth_value" in codes and "err_uninitialized_output" in codes


def test_new_dialect_writes_dst_labels_and_checks_dtype():
    x = RNG.standard_normal((32, 64)).astype(F32)

    def kernel(a):
        t = nl.load(a)
        top = nl.ndarray((32, 8), dtype=nl.float32)
        nisa_new.max8(top, t, name="top8")
        copy = nl.ndarray((32, 8), dtype=nl.float32)
        nisa_new.tensor_copy(copy, top, dtype=nl.float32)
        return stored(copy)

    out, run = run_kernel(kernel, x)
    np.testing.assert_array_equal(out, -np.sort(-x, axis=1)[:, :8])
    assert any(i.label == "top8" and i.name == "nisa.max8" for i in run.trace)

    def bad(a):
        t = nl.load(a)
        nisa_new.tensor_copy(nl.ndarray((32, 64), dtype=nl.float32), t, dtype=nl.bfloat16)
        return a

    with pytest.raises(NkiConstraintError, match="dtype"):
        run_kernel(bad, x)
    with pytest.raises(NkiNotEmulatedError, match="priority"):
        run_kernel(lambda a: nisa_new.dma_copy(nl.ndarray((32, 64), dtype=nl.float32), a,
                                               priority=1), x)  # fmt: skip


@pytest.mark.parametrize(
    ("deriv", "base"),
    [("gelu_dx", "gelu"), ("silu_dx", "silu"), ("erf_dx", "erf"),
     ("gelu_apprx_sigmoid_dx", "gelu_apprx_sigmoid")],
)  # fmt: skip
def test_activation_derivatives_match_finite_differences(deriv, base):
    x = np.linspace(-3, 3, 128 * 8, dtype=F32).reshape(128, 8)
    h = F32(1e-2)

    def kernel(a, lo, hi):
        f, g = getattr(nl, deriv), getattr(nl, base)
        return stored(f(nl.load(a))), stored(g(nl.load(lo))), stored(g(nl.load(hi)))

    d, below, above = run_kernel(kernel, x, x - h, x + h)[0]
    np.testing.assert_allclose(d, (above - below) / (2 * h), atol=2e-3)


def test_gelu_apprx_sigmoid_arctan_tan_all_expand_dims():
    x = RNG.uniform(-1.2, 1.2, (128, 8)).astype(F32)

    def kernel(a):
        t = nl.load(a)
        flags = nl.all(nl.greater(t, -1.0), axis=1)
        wide = nl.expand_dims(t, 1)
        return (stored(nl.gelu_apprx_sigmoid(t)), stored(nl.arctan(t)), stored(nl.tan(t)),
                stored(flags), stored(nl.copy(wide)))  # fmt: skip

    g, at, tn, flags, wide = run_kernel(kernel, x)[0]
    np.testing.assert_allclose(g, x / (1 + np.exp(-1.702 * x)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(at, np.arctan(x), rtol=1e-6)
    np.testing.assert_allclose(tn, np.tan(x), rtol=1e-5)
    np.testing.assert_array_equal(flags[:, 0], (x > -1.0).all(axis=1))
    assert flags.dtype == np.bool_ and wide.shape == (128, 1, 8)


def test_new_dma_compute_sums_sources_and_scatters_with_skip():
    a = RNG.standard_normal((8, 16)).astype(F32)
    b = RNG.standard_normal((8, 16)).astype(F32)
    rows = np.array([[6], [1], [9], [3], [0], [12], [2], [5]], np.int32)  # 9 and 12: outside

    def direct(x, y):
        out = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa_new.dma_compute(out, [x, nl.load(y)], nl.add)
        return out

    np.testing.assert_allclose(run_kernel(direct, a, b)[0], a + b, rtol=1e-6)

    def scatter(base, y, r, mode):
        out = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.load(base))
        view = out.ap([[16, 8], [1, 16]], offset=0, vector_offset=nl.load(r), indirect_dim=0)
        nisa_new.dma_compute(view, [view, nl.load(y)], nl.add, oob_mode=mode)
        return out

    got = run_kernel(scatter, a, b, rows, nisa_new.oob_mode.skip)[0]
    expect = a.copy()
    for i, r in enumerate(rows[:, 0]):
        if r < 8:
            expect[r] += b[i]
    np.testing.assert_allclose(got, expect, rtol=1e-6)
    with pytest.raises(NkiIndexError):
        run_kernel(scatter, a, b, rows, nisa_new.oob_mode.error)
    repeated = np.array([[1], [1], [2], [3], [4], [5], [6], [7]], np.int32)
    with pytest.raises(NkiConstraintError, match="repeat"):
        run_kernel(scatter, a, b, repeated, nisa_new.oob_mode.error)


def test_new_dma_copy_gather_skips_rows_outside():
    a = RNG.standard_normal((8, 16)).astype(F32)
    rows = np.array([[7], [20], [0], [3]], np.int32)

    def kernel(x, r):
        t = nl.full((4, 16), -1.0, dtype=nl.float32)
        view = x.ap([[16, 4], [1, 16]], offset=0, vector_offset=nl.load(r), indirect_dim=0)
        nisa_new.dma_copy(t, view, oob_mode=nisa_new.oob_mode.skip)
        return stored(t)

    out = run_kernel(kernel, a, rows)[0]
    np.testing.assert_array_equal(out[[0, 2, 3]], a[[7, 0, 3]])
    assert (out[1] == -1).all()


def test_dynamic_range_and_no_reorder():
    def kernel(x):
        acc = nl.zeros((128, 8), dtype=nl.float32)
        with nl.no_reorder():
            for i in nl.dynamic_range(1, 7, 2):
                acc[...] = nl.add(acc, nl.multiply(nl.load(x), float(i)))
        return stored(acc)

    x = RNG.standard_normal((128, 8)).astype(F32)
    np.testing.assert_allclose(run_kernel(kernel, x)[0], x * (1 + 3 + 5), rtol=1e-5)


def test_new_nc_n_gather_rng_seed_nonzero_and_cumulative():
    data = RNG.standard_normal((32, 4, 4)).astype(F32)
    idx = RNG.integers(0, 16, (32, 6)).astype(np.uint32)
    src = (RNG.random((128, 8)) < 0.4).astype(np.int32)

    def kernel(d, i, s):
        g = nl.ndarray((32, 6), dtype=nl.float32)
        nisa_new.nc_n_gather(g, nl.load(d), nl.load(i))
        seed = nl.full((1, 1), 11, dtype=nl.int32)
        r1, r2 = nl.ndarray((4, 8), dtype=nl.uint16), nl.ndarray((4, 8), dtype=nl.uint16)
        nisa_new.set_rng_seed(seed)
        nisa_new.rng(r1)
        nisa_new.set_rng_seed(seed)
        nisa_new.rng(r2)
        nz = nl.full((128, 9), 99, dtype=nl.int32)
        nisa_new.nonzero_with_count(nz, nl.load(s), index_offset=100, padding_val=-1)
        cum = nl.ndarray((32, 6), dtype=nl.float32)
        nisa_new.tensor_scalar_cumulative(cum, g, np.multiply, np.maximum, 2.0)
        return stored(g), stored(r1), stored(r2), stored(nz), stored(cum)

    g, r1, r2, nz, cum = run_kernel(kernel, data, idx, src)[0]
    np.testing.assert_array_equal(g, np.take_along_axis(data.reshape(32, 16), idx.astype(int), 1))
    np.testing.assert_array_equal(r1, r2)
    assert len(np.unique(r1)) > 16  # random bits, not a constant
    for p in range(128):
        if p % 16:
            assert (nz[p] == 99).all()  # partitions a GpSimd core does not own: untouched
            continue
        hits = np.flatnonzero(src[p])
        expect = np.full(9, -1)
        expect[: hits.size] = hits + 100
        expect[8] = hits.size
        np.testing.assert_array_equal(nz[p], expect)
    np.testing.assert_allclose(cum, np.maximum.accumulate(2.0 * g, axis=1), rtol=1e-6)

    def bad(d, i):
        g = nl.ndarray((32, 6), dtype=nl.float32)
        nisa_new.nc_n_gather(g, nl.load(d), nl.load(i))
        return stored(g)

    with pytest.raises(NkiIndexError):
        run_kernel(bad, data, idx + 16)


def test_loop_reduce_accumulates_into_the_assigned_tile():
    x = RNG.standard_normal((4, 128, 16)).astype(F32) - 5.0  # all negative

    def kernel(a, op):
        best = nl.zeros((128, 16), dtype=nl.float32)
        for k in nl.affine_range(4):
            best[...] = nl.loop_reduce(nl.load(a[k]), op=op, loop_indices=[k])
        return stored(best)

    np.testing.assert_allclose(run_kernel(kernel, x, np.add)[0], x.sum(axis=0), rtol=1e-5)
    # the destination is the rhs: its zero start takes part in the max
    np.testing.assert_array_equal(run_kernel(kernel, x, np.maximum)[0], np.zeros((128, 16)))

    def rebinding(a):
        best = nl.zeros((128, 16), dtype=nl.float32)
        for k in nl.affine_range(4):
            best = nl.loop_reduce(nl.load(a[k]), op=np.add, loop_indices=[k])
        return stored(best)

    with pytest.raises(NotImplementedError, match="loop_reduce"):
        run_kernel(rebinding, x)


def _label_pick(a, lab):
    """A row's element at its label: range_select between equal bounds, -inf elsewhere."""
    rows = a.shape[0]
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(a.shape[1])[None, :]
    ok = i_p < rows
    t = nl.load(a[i_p, i_f], mask=ok)
    b = nl.copy(nl.load(lab[i_p, nl.arange(1)[None, :]], mask=ok), dtype=nl.float32)
    res = nl.ndarray((128, 1), dtype=nl.float32)
    nisa.range_select(on_true_tile=t, comp_op0=np.greater_equal, comp_op1=np.less_equal,
                      bound0=b, bound1=b, reduce_cmd=nisa.reduce_cmd.reset_reduce,
                      reduce_res=res, reduce_op=np.max, on_false_value=float("-inf"))  # fmt: skip
    out = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out[i_p, nl.arange(1)[None, :]], value=res, mask=ok)
    return out


def test_range_select_picks_a_label_and_keeps_minus_infinity():
    x = RNG.standard_normal((100, 40)).astype(F32)
    x[3, :] = -np.inf  # a whole row of -inf logits: the pick is -inf, not the fill's minimum
    x[5, 7] = -np.inf  # -inf elsewhere in a row does not reach its pick (a product would: NaN)
    lab = RNG.integers(0, 40, (100, 1)).astype(np.int32)
    lab[5] = 8
    # rows 100..127 had no label (undefined bounds): their picks are undefined, not an error,
    # and the masked store never reads them
    out = run_kernel(_label_pick, x, lab, options=EmulatorOptions(uninit_outputs="raise"))[0]
    np.testing.assert_array_equal(out[:, 0], x[np.arange(100), lab[:, 0]])


def test_range_select_is_no_trn1_instruction():
    x = RNG.standard_normal((100, 40)).astype(F32)
    lab = RNG.integers(0, 40, (100, 1)).astype(np.int32)
    with pytest.raises(NkiConstraintError, match="trn2"):
        run_kernel(_label_pick, x, lab, options=EmulatorOptions(target="trn1"))


def test_a_pick_from_undefined_bounds_is_caught_where_it_is_read():
    x = RNG.standard_normal((100, 40)).astype(F32)
    lab = RNG.integers(0, 40, (100, 1)).astype(np.int32)

    def unmasked(a, lab):
        i_p = nl.arange(128)[:, None]
        ok = i_p < a.shape[0]
        t = nl.load(a[i_p, nl.arange(40)[None, :]], mask=ok)
        b = nl.copy(nl.load(lab[i_p, nl.arange(1)[None, :]], mask=ok), dtype=nl.float32)
        res = nl.ndarray((128, 1), dtype=nl.float32)
        nisa.range_select(on_true_tile=t, comp_op0=np.greater_equal, comp_op1=np.less_equal,
                          bound0=b, bound1=b, reduce_cmd=nisa.reduce_cmd.reset_reduce,
                          reduce_res=res, reduce_op=np.max)  # fmt: skip
        return stored(nl.add(res, 1.0))  # all 128 partitions, 28 of them undefined

    with pytest.raises(NkiConstraintError, match="never written"):
        run_kernel(unmasked, x, lab, options=EmulatorOptions(uninit_outputs="raise"))


def test_range_select_streams_one_tile_where_select_reduce_streams_two():
    from migrator.nki import profile

    x = RNG.standard_normal((128, 2048)).astype(F32)
    bounds = np.full((128, 1), 5.0, F32)
    pred = np.ones((128, 2048), np.uint8)

    def by_range(a, b):
        t, lo = nl.load(a), nl.load(b)
        return stored(nisa.range_select(on_true_tile=t, comp_op0=np.greater_equal,
                                        comp_op1=np.less, bound0=lo, bound1=lo))  # fmt: skip

    def by_predicate(a, p):
        dst = nl.ndarray((128, 2048), dtype=nl.float32)
        nisa.select_reduce(dst=dst, predicate=nl.load(p), on_true=nl.load(a), on_false=0.0)
        return stored(dst)

    r = profile(by_range, x, bounds).engines["vector"].busy_us
    s = profile(by_predicate, x, pred).engines["vector"].busy_us
    assert r == pytest.approx(s / 2, rel=0.05)
