"""`t[...] = nl.load(x, mask=m)` writes only where m holds; t keeps its values elsewhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import migrator.nki as mn

KERNEL = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def zero_padded(a):
    rows, cols = a.shape
    out = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(128)[None, :]
    tile = nl.zeros((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    tile[i_p, i_f] = nl.load(a[i_p, i_f], mask=(i_p < rows) & (i_f < cols))
    nl.store(out[i_p, i_f], value=tile)
    return out


@nki.jit
def unpadded(a):
    rows, cols = a.shape
    out = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(128)[None, :]
    tile = nl.load(a[i_p, i_f], mask=(i_p < rows) & (i_f < cols))
    nl.store(out[i_p, i_f], value=tile)
    return out
"""


def test_masked_load_into_zeroed_tile_keeps_zeros(tmp_path: Path) -> None:
    f = tmp_path / "k.py"
    f.write_text(KERNEL)
    m = mn.load_kernel_module(f)
    a = np.random.default_rng(0).random((100, 70), dtype=np.float32)
    out = m.zero_padded(a)
    assert np.array_equal(out[:100, :70], a)
    assert (out[100:] == 0).all() and (out[:, 70:] == 0).all()


def test_masked_load_without_a_destination_leaves_poison(tmp_path: Path) -> None:
    import pytest

    f = tmp_path / "k.py"
    f.write_text(KERNEL)
    m = mn.load_kernel_module(f, options=mn.EmulatorOptions(uninit_outputs="raise"))
    a = np.ones((100, 70), np.float32)
    with pytest.raises(mn.NkiConstraintError, match="never written"):
        m.unpadded(a)


SELECTED = """
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def column_sums(a):
    rows, cols = a.shape
    n_t = (rows + 127) // 128
    out = nl.ndarray((1, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    i_q = nl.arange(128)[:, None]
    i_f = nl.arange(cols)[None, :]
    ones = nl.full((128, 1), 1.0, dtype=nl.float32, buffer=nl.sbuf)
    acc = nl.zeros((1, cols), dtype=nl.float32, buffer=nl.psum)
    for t in nl.affine_range(n_t):
        i_p = i_q * n_t + t  # every tile ragged: row q * n_t + t
        tile = nl.load(a[i_p, i_f], mask=i_p < rows)
        ok = nl.less(nisa.iota(i_p, dtype=nl.int32), rows)
        acc += nl.matmul(ones, nl.where(ok, tile, 0.0), transpose_x=True)
    nl.store(out[nl.arange(1)[:, None], i_f], value=nl.copy(acc, dtype=nl.float32))
    return out
"""


def test_a_select_is_defined_where_its_chosen_operand_is(tmp_path: Path) -> None:
    """`nl.where(ok, tile, 0.0)` over a masked load's tile is defined everywhere (the rows past
    the end are the constant): a PSUM accumulation of it adds every tile, where an undefined
    result restarted the accumulation group and kept the last tile only."""
    f = tmp_path / "k.py"
    f.write_text(SELECTED)
    m = mn.load_kernel_module(f)
    a = np.random.default_rng(1).random((200, 5), dtype=np.float32)
    out = m.column_sums(a)
    assert np.allclose(out[0], a.sum(axis=0), rtol=1e-5)
