"""Scans, partition reductions, composites and convenience APIs against numpy."""

import numpy as np
import pytest

from migrator.nki import NkiConstraintError, run_kernel
from migrator.nki import isa_dst as nisa_new
from migrator.nki import isa_legacy as nisa
from migrator.nki import language as nl

RNG = np.random.default_rng(11)


def one_output(fn):
    """Wrap a tile → tile function as a kernel returning an HBM tensor."""

    def kernel(*arrays):
        tiles = [nl.load(a) for a in arrays]
        r = fn(*tiles)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    return kernel


def test_tensor_tensor_scan_linear_recurrence():
    a = RNG.uniform(0.5, 1.0, (128, 64)).astype(np.float32)
    b = RNG.standard_normal((128, 64)).astype(np.float32)
    out = run_kernel(
        one_output(lambda x, y: nisa.tensor_tensor_scan(x, y, 0.0, np.multiply, np.add)), a, b
    )[0]
    ref = np.zeros_like(a)
    h = np.zeros(128, np.float32)
    for i in range(64):
        h = a[:, i] * h + b[:, i]
        ref[:, i] = h
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_cumsum_via_scan_with_tile_initial():
    x = RNG.standard_normal((128, 32)).astype(np.float32)
    init = RNG.standard_normal((128, 1)).astype(np.float32)
    ones = np.ones_like(x)
    out = run_kernel(
        one_output(lambda o, v, i: nisa.tensor_tensor_scan(o, v, i, nl.multiply, nl.add)),
        ones,
        x,
        init,
    )[0]
    np.testing.assert_allclose(out, init + np.cumsum(x, axis=1), rtol=1e-5, atol=1e-5)


def test_scalar_tensor_tensor_and_partition_reduce():
    x = RNG.standard_normal((128, 16)).astype(np.float32)
    y = RNG.standard_normal((128, 16)).astype(np.float32)
    out = run_kernel(
        one_output(lambda a, b: nisa.scalar_tensor_tensor(a, np.multiply, 3.0, np.subtract, b)),
        x,
        y,
    )[0]
    np.testing.assert_allclose(out, x * 3 - y, rtol=1e-6)
    red = run_kernel(one_output(lambda a: nisa.tensor_partition_reduce(np.max, a)), x)[0]
    np.testing.assert_array_equal(red, x.max(axis=0, keepdims=True))


def test_composites_softmax_rms_norm_var():
    x = RNG.standard_normal((128, 40)).astype(np.float32)
    w = RNG.standard_normal((1, 40)).astype(np.float32)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(
        run_kernel(one_output(lambda a: nl.softmax(a, axis=1)), x)[0],
        e / e.sum(1, keepdims=True),
        rtol=1e-6,
    )
    got = run_kernel(
        one_output(lambda a, g: nl.rms_norm(a, nl.broadcast_to(g, (128, 40)), axis=1, n=40)), x, w
    )[0]
    np.testing.assert_allclose(
        got, x / np.sqrt((x**2).mean(1, keepdims=True) + 1e-6) * w, rtol=1e-5
    )
    np.testing.assert_allclose(
        run_kernel(one_output(lambda a: nl.var(a, axis=1)), x)[0],
        x.var(1, keepdims=True),
        rtol=1e-5,
    )


def test_load_transpose2d_and_identity_transpose_by_matmul():
    x = RNG.standard_normal((64, 128)).astype(np.float32)

    def kernel(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load_transpose2d(a))
        out2 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        ident = nl.load(nl.shared_constant(np.identity(64, dtype=np.float32)))
        # stationary = a (K=64 partitions, 128 free) against identity moving (64 x 64): a.T @ I
        nl.store(out2, value=nl.copy(nisa.nc_matmul(nl.load(a), ident)))
        eye = nl.shared_identity_matrix(64, dtype=nl.float32)
        out3 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out3, value=nl.copy(nisa.nc_matmul(nl.load(a), eye)))
        return out, out2, out3

    t1, t2, t3 = run_kernel(kernel, x)[0]
    np.testing.assert_array_equal(t1, x.T)
    np.testing.assert_array_equal(t2, x.T)
    np.testing.assert_array_equal(t3, x.T)


def test_new_dialect_scan_and_partition_reduce():
    x = RNG.standard_normal((128, 8)).astype(np.float32)

    def kernel(a):
        t = nl.load(a)
        s = nl.ndarray((128, 8), dtype=nl.float32)
        nisa_new.tensor_tensor_scan(s, nl.ones((128, 8), nl.float32), t, 0.0, nl.multiply, nl.add)
        r = nl.ndarray((1, 8), dtype=nl.float32)
        nisa_new.tensor_partition_reduce(r, nl.add, s)
        out = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=r)
        return out

    np.testing.assert_allclose(
        run_kernel(kernel, x)[0], np.cumsum(x, 1).sum(0, keepdims=True), rtol=1e-4, atol=1e-4
    )


def test_new_dialect_activation_scalar_ops_and_memset():
    x = RNG.standard_normal((128, 8)).astype(np.float32)

    def kernel(a, bad):
        t = nl.load(a)
        y = nl.ndarray((128, 8), dtype=nl.float32)
        nisa_new.activation(y, op=nl.tanh, data=t, scale=2.0)
        z = nl.ndarray((128, 8), dtype=nl.float32)
        nisa_new.tensor_scalar(z, y, nl.multiply, 3.0, op1=nl.add, operand1=1.0)
        m = nl.ndarray((128, 1), dtype=nl.float32)
        nisa_new.tensor_reduce(m, nl.maximum, z, axis=1)
        w = nl.ndarray((128, 8), dtype=nl.float32)
        nisa_new.memset(w, 0.0)
        if bad:
            nisa_new.tensor_tensor(w, z, m, nl.subtract)  # operands must have equal sizes
        else:
            nisa_new.tensor_scalar(w, z, nl.subtract, m)  # (P, 1) operand: the legal form
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=w)
        return out

    z = np.tanh(2 * x) * 3 + 1
    np.testing.assert_allclose(
        run_kernel(kernel, x, bad=False)[0], z - z.max(1, keepdims=True), rtol=1e-5, atol=1e-6
    )
    with pytest.raises(NkiConstraintError, match="err_shape_mismatch"):
        run_kernel(kernel, x, bad=True)


def test_new_matmul_accumulate_flags_and_group_closing():
    s = RNG.standard_normal((128, 64)).astype(np.float32)
    m = RNG.standard_normal((128, 32)).astype(np.float32)

    def kernel(st, mv):
        a, b = nl.load(st), nl.load(mv)
        acc = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.psum)
        nisa_new.nc_matmul(acc, a, b)  # first write of the group overwrites the poison
        nisa_new.nc_matmul(acc, a, b)  # accumulate=None: later writes add
        first = nl.copy(acc)  # reading (evicting) closes the accumulation group
        nisa_new.nc_matmul(acc, a, b)  # new group: overwrites
        second = nl.copy(acc)
        nisa_new.nc_matmul(acc, a, b, accumulate=True)
        third = nl.copy(acc)
        nisa_new.nc_matmul(acc, a, b, accumulate=False)
        fourth = nl.copy(acc)
        outs = []
        for tile in (first, second, third, fourth):
            o = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
            nl.store(o, value=tile)
            outs.append(o)
        return tuple(outs)

    one = s.T @ m
    got = run_kernel(kernel, s, m)[0]
    for value, factor in zip(got, (2, 1, 2, 1), strict=True):
        np.testing.assert_allclose(value, factor * one, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", [nl.add, nl.subtract, nl.multiply])
def test_integer_arithmetic_is_exact_on_gpsimd_and_fp32_elsewhere(op) -> None:  # type: ignore[no-untyped-def]
    """32-bit integer add/subtract/multiply are exact on GpSimd; the Vector engine computes
    through fp32, so a flat index past 2^24 (a row of a large table plus a label) rounds there."""
    a = (np.arange(128, dtype=np.int64) * 9_973 + (1 << 24) + 1).astype(np.int32).reshape(128, 1)
    b = np.full((128, 1), 3, dtype=np.int32)
    want = {nl.add: a + b, nl.subtract: a - b, nl.multiply: a * b}[op]
    exact = run_kernel(
        one_output(lambda x, y: nisa.tensor_tensor(x, y, op=op, engine=nisa.gpsimd_engine)), a, b
    )[0]
    np.testing.assert_array_equal(exact, want)
    assert exact.dtype == np.int32
    rounded = run_kernel(one_output(lambda x, y: nisa.tensor_tensor(x, y, op=op)), a, b)[0]
    assert not np.array_equal(rounded, want)
