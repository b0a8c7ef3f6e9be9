"""Fast paths of the emulator's hot loop must answer exactly as the general paths do.

Each test builds the situation a shortcut could get wrong (a cached widening whose source is
overwritten, an in-place accumulation into memory that other views share) and checks the
values against numpy.
"""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrator.nki import language as nl
from migrator.nki import run_kernel

F32 = np.float32
BF16 = ml_dtypes.bfloat16


def test_bf16_widening_cache_follows_writes_to_its_source():
    """Loaded bf16 tiles are widened once per source; a store into the source invalidates it."""

    def kernel(x, y):
        out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        first = nl.load(x)
        before = nl.matmul(first, nl.load(y), transpose_x=True)
        nl.store(out[:, 0:128], value=nl.copy(before))
        nl.store(x, value=nl.multiply(first, 2.0, dtype=nl.bfloat16))  # overwrite the source
        after = nl.matmul(nl.load(x), nl.load(y), transpose_x=True)
        nl.store(out[:, 128:256], value=nl.copy(after))
        return out

    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 128)).astype(BF16)
    y = rng.standard_normal((128, 128)).astype(BF16)
    xf, yf = x.astype(F32), y.astype(F32)
    out, _ = run_kernel(kernel, x.copy(), y)
    np.testing.assert_allclose(out[:, :128], xf.T @ yf, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out[:, 128:], (2 * xf).T @ yf, rtol=1e-5, atol=1e-4)


def test_psum_accumulation_in_place_is_seen_through_a_reshape_alias():
    """`acc += matmul(...)` adds in place; an alias made earlier must see the new values."""

    def kernel(a, b):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
        alias = acc.reshape((128, 64))
        for k in nl.sequential_range(2):
            acc += nl.matmul(
                nl.load(a[k * 128 : (k + 1) * 128, :]), nl.load(b[k * 128 : (k + 1) * 128, :]),
                transpose_x=True,
            )  # fmt: skip
        nl.store(out, value=nl.copy(alias))
        return out

    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 128)).astype(F32)
    b = rng.standard_normal((256, 64)).astype(F32)
    out, _ = run_kernel(kernel, a, b)
    np.testing.assert_allclose(out, a.T @ b, rtol=1e-5, atol=1e-4)


def _k_tiles(a, b, order, cols=slice(None)):
    """`acc += matmul` over the K tiles of a and b (its columns `cols`, 64 of them) in the given
    order; acc read once at the end."""

    def kernel(x, y):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
        for k in order:
            stat = nl.load(x[k * 128 : (k + 1) * 128, :])
            acc += nl.matmul(stat, nl.load(y[k * 128 : (k + 1) * 128, cols]), transpose_x=True)
        nl.store(out, value=nl.copy(acc))
        return out

    out, _ = run_kernel(kernel, a, b)
    return out


def test_queued_k_tiles_match_numpy_whether_adjacent_or_not():
    """Adjacent K tiles become one product over a view; any other order is stacked by copy."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((512, 128)).astype(F32)
    b = rng.standard_normal((512, 64)).astype(F32)
    expect = a.astype(np.float64).T @ b.astype(np.float64)
    tile = [a[k * 128 : (k + 1) * 128].T @ b[k * 128 : (k + 1) * 128] for k in range(4)]
    for order in ([0, 1, 2, 3], [3, 1, 0, 2], [0, 0, 1]):
        want = expect if len(order) == 4 else 2 * tile[0] + tile[1]
        np.testing.assert_allclose(_k_tiles(a, b, order), want, rtol=1e-4, atol=1e-3)


def test_k_tiles_loaded_in_order_are_one_product_over_views_of_the_inputs(monkeypatch):
    """In-order K tiles of one HBM tensor (fp32, or bf16 through its widening) reach the BLAS
    call as one view of that tensor's rows; out of order, as a stacked copy."""
    from migrator.nki import isa

    seen = []

    def spy(sv, mv):
        seen.append((sv, mv))
        return sv.T @ mv

    monkeypatch.setattr(isa, "tensor_product", spy)
    rng = np.random.default_rng(5)
    for dtype in (F32, BF16):
        a = rng.standard_normal((512, 128)).astype(dtype)
        b = rng.standard_normal((512, 256)).astype(dtype)
        for order, views in (([0, 1, 2, 3], True), ([1, 0, 2, 3], False), ([0, 2], False)):
            seen.clear()
            out = _k_tiles(a, b, order, slice(64, 128))  # moving: a strided view
            assert len(seen) == 1  # one BLAS call for the whole K loop
            sv, mv = seen[0]
            assert sv.shape == (128 * len(order), 128) and mv.shape == (128 * len(order), 64)
            assert (sv.base is not None and mv.base is not None) == views
            rows = np.concatenate([np.arange(k * 128, (k + 1) * 128) for k in order])
            lhs, rhs = a[rows].astype(F32), b[rows, 64:128].astype(F32)
            np.testing.assert_allclose(out, lhs.T @ rhs, rtol=1e-4, atol=1e-3)


def test_queued_product_sees_its_operand_as_it_was_before_a_write():
    """An SBUF operand overwritten after the matmul but before the PSUM tile is read."""

    def kernel(x, y):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
        lhs = nl.ndarray((128, 128), dtype=nl.float32)
        lhs[...] = nl.load(x)
        rhs = nl.load(y)
        acc += nl.matmul(lhs, rhs, transpose_x=True)
        lhs[...] = nl.multiply(lhs, 3.0)  # the queued product must not see this
        acc += nl.matmul(lhs, rhs, transpose_x=True)
        nl.store(out, value=nl.copy(acc))
        return out

    rng = np.random.default_rng(3)
    x = rng.standard_normal((128, 128)).astype(F32)
    y = rng.standard_normal((128, 64)).astype(F32)
    out, _ = run_kernel(kernel, x, y)
    np.testing.assert_allclose(out, 4 * (x.T @ y), rtol=1e-4, atol=1e-3)


def test_queued_product_read_directly_and_accumulated():
    """One product both added into a PSUM tile and copied out itself."""

    def kernel(x, y):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
        prod = nl.matmul(nl.load(x), nl.load(y), transpose_x=True)
        acc += prod
        acc += prod
        nl.store(out[:, 0:64], value=nl.copy(prod))
        nl.store(out[:, 64:128], value=nl.copy(acc))
        return out

    rng = np.random.default_rng(4)
    x = rng.standard_normal((128, 128)).astype(F32)
    y = rng.standard_normal((128, 64)).astype(F32)
    out, _ = run_kernel(kernel, x, y)
    np.testing.assert_allclose(out[:, :64], x.T @ y, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out[:, 64:], 2 * (x.T @ y), rtol=1e-5, atol=1e-4)


def test_queued_k_tiles_keep_the_overflow_rule():
    """Products that overflow fp32 are ±inf before they are added, so +inf and -inf tiles
    give NaN, and one +inf tile gives +inf, as tile-by-tile accumulation would."""
    a = np.zeros((256, 128), F32)
    b = np.zeros((256, 64), F32)
    a[0, 0], b[0, 0] = 1e30, 1e30  # K tile 0: +inf at (0, 0)
    a[128, 0], b[128, 0] = 1e30, -1e30  # K tile 1: -inf at (0, 0)
    a[0, 1], b[0, 1] = 1e30, 1e30  # +inf at (1, 1) from tile 0 only
    got = _k_tiles(a, b, [0, 1])
    with np.errstate(all="ignore"):
        tiles = [
            (a[t, :, None] * b[t, None, :]).sum(axis=0) for t in (slice(0, 128), slice(128, 256))
        ]
        want = tiles[0] + tiles[1]  # fmt: skip
    assert np.isnan(got[0, 0]) and got[1, 1] == np.inf
    np.testing.assert_array_equal(got, want)


# One random program over two PSUM accumulators and three SBUF operand tiles: accumulate a
# product, overwrite an operand, read an accumulator out, or reuse the last product. The
# emulator (which queues products) must agree with numpy evaluating each step when it happens.
_STEP = st.one_of(
    st.tuples(st.just("acc"), st.integers(0, 1), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("overwrite"), st.integers(0, 2), st.floats(-2, 2, width=32)),
    st.tuples(st.just("read"), st.integers(0, 1)),
    st.tuples(st.just("reuse"), st.integers(0, 1)),
)


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(_STEP, min_size=1, max_size=12), seed=st.integers(0, 2**16))
def test_queued_products_match_eager_numpy_on_random_programs(steps, seed):
    rng = np.random.default_rng(seed)
    init = rng.standard_normal((3, 128, 32)).astype(F32)
    n_out = sum(s[0] == "read" for s in steps) + 2  # each read, then both accumulators

    def kernel(ops):
        out = nl.ndarray((n_out, 32, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        tiles = []
        for k in range(3):
            t = nl.ndarray((128, 32), dtype=nl.float32)
            t[...] = nl.load(ops[k])
            tiles.append(t)
        accs = [nl.zeros((32, 16), nl.float32, buffer=nl.psum) for _ in range(2)]
        last = None
        n = 0
        for step in steps:
            if step[0] == "acc":
                _, a, s, m = step
                last = nl.matmul(tiles[s], tiles[m][:, 0:16], transpose_x=True)
                accs[a] += last
            elif step[0] == "overwrite":
                _, s, c = step
                tiles[s][...] = nl.add(tiles[s], float(c))
            elif step[0] == "read":
                nl.store(out[n], value=nl.copy(accs[step[1]]))
                n += 1
            elif last is not None:  # reuse the last product in the other accumulator
                accs[step[1]] += last
        for a in range(2):
            nl.store(out[n + a], value=nl.copy(accs[a]))
        return out

    out, _ = run_kernel(kernel, init.copy())
    # numpy, eagerly, step by step
    tiles = [init[k].astype(np.float64) for k in range(3)]
    accs = [np.zeros((32, 16)) for _ in range(2)]
    last = None
    want = []
    for step in steps:
        if step[0] == "acc":
            _, a, s, m = step
            last = tiles[s].T @ tiles[m][:, 0:16]
            accs[a] = accs[a] + last
        elif step[0] == "overwrite":
            tiles[step[1]] = tiles[step[1]] + float(np.float32(step[2]))
        elif step[0] == "read":
            want.append(accs[step[1]].copy())
        elif last is not None:
            accs[step[1]] = accs[step[1]] + last
    want += accs
    for i, w in enumerate(want):
        np.testing.assert_allclose(out[i], w, rtol=1e-4, atol=1e-3)


# Random programs whose operands are loaded straight from HBM (so in-order K tiles are queued
# as views of the inputs, storage.row_block): accumulate the product of K tile k of x (columns
# 0:16) and K tile k of y (a column window), or of K tiles k..3 in order ("run"), store into
# x's rows (a write under queued views), or read an accumulator out. Eager numpy is the
# reference, in fp32 and in bf16.
_WINDOW = st.sampled_from([0, 8, 16])
_HBM_STEP = st.one_of(
    st.tuples(st.just("acc"), st.integers(0, 1), st.integers(0, 3), _WINDOW),
    st.tuples(st.just("run"), st.integers(0, 1), st.integers(0, 2), _WINDOW),
    st.tuples(st.just("store"), st.integers(0, 3), st.sampled_from([0.5, -1.25, 3.0])),
    st.tuples(st.just("read"), st.integers(0, 1)),
)


def _k_range(step):
    """The K tiles an "acc" (one) or "run" (k0 up to the last, in order) step accumulates."""
    return range(step[2], step[2] + 1 if step[0] == "acc" else 4)


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(_HBM_STEP, min_size=1, max_size=14),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from([F32, BF16]),
)
def test_queued_views_of_hbm_match_eager_numpy_on_random_programs(steps, seed, dtype):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((128, 32)).astype(dtype)
    y = rng.standard_normal((128, 32)).astype(dtype)
    n_out = sum(s[0] == "read" for s in steps) + 2

    def kernel(xs, ys):
        out = nl.ndarray((n_out, 16, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        accs = [nl.zeros((16, 16), nl.float32, buffer=nl.psum) for _ in range(2)]
        n = 0
        for step in steps:
            if step[0] in ("acc", "run"):
                a, c = step[1], step[3]
                for k in _k_range(step):
                    stat = nl.load(xs[k * 32 : (k + 1) * 32, 0:16])
                    mov = nl.load(ys[k * 32 : (k + 1) * 32, c : c + 16])
                    accs[a] += nl.matmul(stat, mov, transpose_x=True)
            elif step[0] == "store":
                rows = xs[step[1] * 32 : (step[1] + 1) * 32, :]
                nl.store(rows, value=nl.add(nl.load(rows), step[2], dtype=xs.dtype))
            else:
                nl.store(out[n], value=nl.copy(accs[step[1]]))
                n += 1
        for a in range(2):
            nl.store(out[n + a], value=nl.copy(accs[a]))
        return out

    out, _ = run_kernel(kernel, x.copy(), y)
    xv, yv = x.astype(np.float64), y.astype(np.float64)
    accs = [np.zeros((16, 16)) for _ in range(2)]
    want = []
    for step in steps:
        if step[0] in ("acc", "run"):
            a, c = step[1], step[3]
            for k in _k_range(step):
                rows = slice(k * 32, (k + 1) * 32)
                accs[a] = accs[a] + xv[rows, 0:16].T @ yv[rows, c : c + 16]
        elif step[0] == "store":
            rows = slice(step[1] * 32, (step[1] + 1) * 32)
            # the kernel adds in fp32 and rounds to the tensor's dtype
            xv[rows] = (xv[rows] + step[2]).astype(F32).astype(dtype).astype(np.float64)
        else:
            want.append(accs[step[1]].copy())
    want += accs
    for i, w in enumerate(want):
        np.testing.assert_allclose(out[i], w, rtol=1e-4, atol=1e-3)


def test_a_launch_never_computes_another_threads_queued_products():
    """Queued products belong to their launch: a write in a launch on another thread (which
    computes its own queue first) leaves this launch's queue alone; results stay exact."""
    import threading

    queued, go = threading.Event(), threading.Event()
    seen = {}

    def waiting(x, y):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
        acc += nl.matmul(nl.load(x), nl.load(y), transpose_x=True)
        seen["storage"] = acc.storage
        queued.set()
        go.wait(10)
        seen["still_queued"] = acc.storage.pending is not None
        nl.store(out, value=nl.copy(acc))
        return out

    def writer(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))  # a write: computes this launch's queue
        return out

    rng = np.random.default_rng(6)
    x = rng.standard_normal((128, 128)).astype(F32)
    y = rng.standard_normal((128, 64)).astype(F32)
    result = {}
    worker = threading.Thread(target=lambda: result.update(out=run_kernel(waiting, x, y)[0]))
    worker.start()
    assert queued.wait(10)
    run_kernel(writer, x)
    go.set()
    worker.join(10)
    assert seen["still_queued"]
    np.testing.assert_allclose(result["out"], x.T @ y, rtol=1e-5, atol=1e-4)


def test_ragged_arange_tiles_check_only_live_indices_and_count_only_live_bytes():
    """A 128 x 512 tile over a (200, 96) tensor: indices past the edges are fine where the mask
    is off (whether or not every index is in bounds, the answer is the same), a live one out of
    bounds raises, and the DMA accounting counts the live elements only."""
    from migrator.nki import profile
    from migrator.nki.errors import NkiIndexError

    x = np.random.default_rng(3).standard_normal((200, 96)).astype(F32)

    def kernel(a, limit):
        out = nl.ndarray((200, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        for r in nl.affine_range(2):
            i_p = r * 128 + nl.arange(128)[:, None]
            i_f = nl.arange(512)[None, :]
            live = (i_p < 200) & (i_f < limit)
            t = nl.load(a[i_p, i_f], mask=live)
            nl.store(out[i_p, i_f], value=nl.multiply(t, 2.0), mask=live)
        return out

    np.testing.assert_array_equal(run_kernel(kernel, x, 96)[0], 2 * x)
    p = profile(kernel, x, 96)
    assert p.hbm_read_bytes == p.hbm_write_bytes == x.nbytes
    with pytest.raises(NkiIndexError, match="outside axis 1"):
        run_kernel(kernel, x, 97)
