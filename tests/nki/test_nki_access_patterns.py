"""New-dialect ``tensor.ap()`` access patterns: flat-storage semantics, dynamic offsets, checks."""

import numpy as np
import pytest

from migrator.nki import NkiConstraintError, NkiKernelError, run_kernel
from migrator.nki import isa_dst as nisa
from migrator.nki import language as nl

RNG = np.random.default_rng(3)


def _copy_through(pattern, offset=None, out_shape=None, **ap_kwargs):
    """Load `a` into SBUF, read it back through an access pattern, store the view."""

    def kernel(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        view = t.ap(pattern=pattern, offset=offset, **ap_kwargs)
        res = nl.ndarray(view.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=view)
        out = nl.ndarray(view.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out

    return kernel


def test_ap_selects_a_sub_block_like_the_documented_example():
    a = RNG.standard_normal((16, 16)).astype(np.float32)
    out, _ = run_kernel(_copy_through([[16, 16], [1, 8]], offset=8), a)
    np.testing.assert_array_equal(out, a[:, 8:16])


def test_ap_with_strides_and_extra_dims():
    a = RNG.standard_normal((8, 24)).astype(np.float32)
    # per partition: 4 groups of 3 elements taken every 6 elements -> shape (8, 4, 3)
    out, _ = run_kernel(_copy_through([[24, 8], [6, 4], [1, 3]], offset=0), a)
    np.testing.assert_array_equal(out, a.reshape(8, 4, 6)[:, :, :3])


def test_ap_offset_none_keeps_the_view_start():
    def kernel(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        view = t[:, 4:12].ap(pattern=[[16, 16], [2, 4]])  # starts at element 4
        res = nl.ndarray((16, 4), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=view)
        out = nl.ndarray((16, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out

    a = RNG.standard_normal((16, 16)).astype(np.float32)
    out, _ = run_kernel(kernel, a)
    np.testing.assert_array_equal(out, a[:, 4:12:2])


def test_ap_as_a_destination_writes_through():
    def kernel(a):
        t = nl.ndarray((16, 16), dtype=a.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        src = nl.ndarray((16, 8), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=a)
        nisa.tensor_copy(dst=t.ap(pattern=[[16, 16], [2, 8]], offset=1), src=src)
        out = nl.ndarray((16, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = RNG.standard_normal((16, 8)).astype(np.float32)
    out, _ = run_kernel(kernel, a)
    np.testing.assert_array_equal(out[:, 1::2], a)
    np.testing.assert_array_equal(out[:, 0::2], 0.0)


def test_ap_vector_offset_gathers_hbm_rows():
    def kernel(table, idx):
        rows = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=idx)
        d = table.shape[1]
        got = nl.ndarray((4, d), dtype=table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=got, src=table.ap(pattern=[[d, 4], [1, d]], offset=0, vector_offset=rows))
        out = nl.ndarray((4, d), dtype=table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=got)
        return out

    table = RNG.standard_normal((10, 6)).astype(np.float32)
    idx = np.array([[7], [0], [7], [3]], np.int32)
    out, _ = run_kernel(kernel, table, idx)
    np.testing.assert_array_equal(out, table[idx[:, 0]])


def test_ap_scalar_offset_moves_the_start_by_whole_rows():
    def kernel(table, start):
        s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=start)
        d = table.shape[1]
        got = nl.ndarray((2, d), dtype=table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=got, src=table.ap(pattern=[[d, 2], [1, d]], offset=0, scalar_offset=s))
        out = nl.ndarray((2, d), dtype=table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=got)
        return out

    table = RNG.standard_normal((10, 6)).astype(np.float32)
    out, _ = run_kernel(kernel, table, np.array([[5]], np.int32))
    np.testing.assert_array_equal(out, table[5:7])


def test_ap_on_chip_first_step_must_cover_a_partition():
    a = np.zeros((16, 16), np.float32)
    with pytest.raises((NkiConstraintError, NkiKernelError), match="whole partitions"):
        run_kernel(_copy_through([[8, 16], [1, 8]], offset=0), a)


def test_ap_out_of_bounds_is_reported():
    a = np.zeros((16, 16), np.float32)
    with pytest.raises((NkiConstraintError, NkiKernelError), match="outside the storage"):
        run_kernel(_copy_through([[16, 16], [1, 16]], offset=8), a)


def test_ap_vector_offset_scatters_rows_into_hbm():
    def kernel(src_data, idx, table):
        p, f = src_data.shape
        src = nl.ndarray((p, f), dtype=src_data.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=src_data)
        rows = nl.ndarray((p, 1), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=idx)
        nisa.dma_copy(dst=table.ap(pattern=[[f, p], [1, f]], vector_offset=rows), src=src)
        return table

    src = RNG.standard_normal((3, 5)).astype(np.float32)
    table = np.zeros((8, 5), np.float32)
    out, _ = run_kernel(kernel, src, np.array([[6], [1], [4]], np.uint32), table)
    expected = np.zeros((8, 5), np.float32)
    expected[[6, 1, 4]] = src
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(table, expected)  # written arguments are copied back


def test_ap_vector_offset_needs_an_hbm_tensor():
    def kernel(a, idx):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        rows = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=idx)
        return t.ap(pattern=[[4, 4], [1, 4]], vector_offset=rows)

    with pytest.raises((NkiConstraintError, NkiKernelError), match="must be in HBM"):
        run_kernel(kernel, np.zeros((4, 4), np.float32), np.zeros((4, 1), np.int32))
