"""Lazy shadows (storage.py, affine.py): written rectangles instead of poison/validity/stamp arrays.

Every test checks that the compact form answers exactly as the eager arrays would: unwritten
elements still read as poison and invalid, affine dependencies are still found.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrator.nki import EmulatorOptions, NkiConstraintError, run_kernel
from migrator.nki import language as nl
from migrator.nki.run import maybe_current_run
from migrator.nki.storage import MAX_BOXES

F32 = np.float32


def test_fully_written_tile_has_no_validity_array():
    seen = {}

    def kernel(a):
        t = nl.ndarray((128, 8), dtype=nl.float32)
        seen["before"] = (t.storage.boxes, t.storage._valid)
        t[...] = nl.load(a)  # one instruction writes the whole tile
        seen["after"] = (t.storage.boxes, t.storage._valid)
        return a

    run_kernel(kernel, np.ones((128, 8), F32))
    assert seen["before"] == ([], None)
    assert seen["after"] == (None, None)


def test_output_written_in_disjoint_tiles_never_materialises():
    seen = {}

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for r in nl.affine_range(2):
            for c in nl.affine_range(4):
                sl = (slice(r * 128, (r + 1) * 128), slice(c * 4, (c + 1) * 4))
                nl.store(out[sl], value=nl.load(a[sl]))
        s = out.storage
        seen["state"] = (s.boxes, s._valid, s.stamps, len(s.stamp_boxes))
        return out

    a = np.arange(256 * 16, dtype=F32).reshape(256, 16)
    out, r = run_kernel(kernel, a)
    np.testing.assert_array_equal(out, a)
    assert seen["state"] == (None, None, None, 8)
    assert r.findings == []


@pytest.mark.parametrize("uninit, poison", [("nan", np.nan), ("zero", 0.0)])
def test_partially_written_tile_reports_unwritten_elements(uninit, poison):
    seen = {}

    def kernel(a):
        t = nl.ndarray((128, 8), dtype=nl.float32)
        t[:, 0:4] = nl.load(a[:, 0:4])
        data, valid = t[:, 0:4].read()  # inside the written rectangle: still lazy
        seen["inside"] = (valid, t.storage.boxes is not None, data.copy())
        data, valid = t.read()  # spans unwritten memory: poison materialised
        seen["whole"] = (data.copy(), valid.copy(), t.storage.boxes)
        return a

    a = np.arange(128 * 8, dtype=F32).reshape(128, 8)
    run_kernel(kernel, a, options=EmulatorOptions(uninit=uninit))
    valid, lazy, data = seen["inside"]
    assert valid is None and lazy
    np.testing.assert_array_equal(data, a[:, 0:4])
    data, valid, boxes = seen["whole"]
    assert boxes is None
    assert valid[:, 0:4].all() and not valid[:, 4:].any()
    np.testing.assert_array_equal(data[:, 0:4], a[:, 0:4])
    np.testing.assert_array_equal(data[:, 4:], np.full((128, 4), poison, F32))


def test_partially_written_output_still_raises_with_first_bad_index():
    def kernel(a):
        out = nl.ndarray((256, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[0:128, :], value=nl.load(a))
        nl.store(out[128:256, 0:6], value=nl.load(a[:, 0:6]))  # out[128:, 6:] never written
        return out

    strict = EmulatorOptions(uninit_outputs="raise")
    with pytest.raises(NkiConstraintError, match="err_uninitialized_output") as info:
        run_kernel(kernel, np.ones((128, 8), F32), options=strict)
    assert "first at index (128, 6)" in str(info.value)
    assert "256 element(s)" in str(info.value)


def test_masked_and_overlapping_writes_fall_back_to_arrays():
    seen = {}

    def kernel(a):
        t = nl.ndarray((128, 8), dtype=nl.float32)
        t[:, 0:4] = nl.load(a[:, 0:4])
        t[:, 2:6] = nl.load(a[:, 2:6])  # partial overlap with the first rectangle
        i = nl.arange(8)[None, :]
        t[:, :] = nl.load(a, mask=(i == 7))  # masked: only column 7
        data, valid = t.read()
        seen["t"] = (data.copy(), valid.copy())
        return a

    a = np.arange(128 * 8, dtype=F32).reshape(128, 8)
    run_kernel(kernel, a)
    data, valid = seen["t"]
    expect = np.array([True] * 6 + [False, True])
    assert (valid == expect).all()
    np.testing.assert_array_equal(data[:, expect], a[:, expect])
    assert np.isnan(data[:, 6]).all()


def test_many_rectangles_past_the_limit_stay_exact():
    seen = {}

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        for r in nl.affine_range(128):  # one rectangle per row: MAX_BOXES of them
            nl.store(out[r : r + 1, 0:4], value=t[r : r + 1, 0:4])
        seen["full"] = (len(out.storage.boxes), len(out.storage.stamp_boxes))
        for r in nl.affine_range(128):  # one more overflows the compact form
            nl.store(out[r : r + 1, 4:8], value=t[r : r + 1, 4:8])
        seen["after"] = (out.storage.boxes, out.storage._valid.all(), out.storage.stamps.shape)
        return out

    assert MAX_BOXES == 128
    a = np.arange(128 * 8, dtype=F32).reshape(128, 8)
    out, r = run_kernel(kernel, a)
    np.testing.assert_array_equal(out, a)
    assert seen["full"] == (128, 128)
    assert seen["after"] == (None, True, (128, 8))
    assert r.findings == []


def test_rectangle_stamps_detect_overlapping_iterations():
    def kernel(a):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            # iteration 1 overwrites columns 2..3 that iteration 0 wrote: VIOLATION
            nl.store(out[:, i * 2 : i * 2 + 4], value=nl.load(a[:, 0:4]))
        return out

    with pytest.raises(NkiConstraintError, match="err_unexpected_output_dependencies"):
        run_kernel(kernel, np.ones((128, 8), F32))


def test_rectangle_stamps_detect_reads_of_other_iterations():
    def kernel(a):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 8), dtype=nl.float32)
        for i in nl.affine_range(2):
            t[:, i * 4 : i * 4 + 4] = nl.load(a[:, i * 4 : i * 4 + 4])
            nl.store(out, value=nl.exp(t))  # iteration 1 reads iteration 0's half: VIOLATION
        return out

    with pytest.raises(NkiConstraintError, match="err_affine_loop_carried_dependency"):
        run_kernel(kernel, np.ones((128, 8), F32))


@pytest.mark.parametrize("other, violation", [(False, False), (True, True)])
def test_masked_read_after_rectangle_stamps_uses_exact_elements(other, violation):
    seen = {}

    def kernel(a):
        buf = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            nl.store(buf[:, i * 4 : i * 4 + 4], value=nl.load(a[:, i * 4 : i * 4 + 4]))
            seen["compact"] = buf.storage.stamps is None
            j = nl.arange(8)[None, :]
            lo = 4 - i * 4 if other else i * 4  # the other iteration's columns, or its own
            nl.load(buf, mask=(j >= lo) & (j < lo + 4))
        seen["array"] = buf.storage.stamps is not None
        return a

    opts = EmulatorOptions(affine_deps="report")
    _, r = run_kernel(kernel, np.ones((128, 8), F32), options=opts)
    codes = [f.code for f in r.findings]
    assert codes == (["err_affine_loop_carried_dependency"] if violation else [])
    assert seen["compact"] is False and seen["array"]  # the masked read needed the array


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["write", "masked", "read"]),
            st.integers(0, 7),
            st.integers(1, 8),
            st.integers(0, 5),
            st.integers(1, 6),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_lazy_validity_matches_an_eager_model(steps):
    """Random rectangle/masked writes and reads agree with a per-element validity model."""
    model = np.zeros((8, 6), bool)
    checks = []

    def kernel(a):
        t = nl.ndarray((8, 6), dtype=nl.float32)
        for kind, r0, rn, c0, cn in steps:
            r1, c1 = min(r0 + rn, 8), min(c0 + cn, 6)
            sl = (slice(r0, r1), slice(c0, c1))
            if kind == "write":
                t[sl] = nl.load(a[sl])
                model[sl] = True
            elif kind == "masked":
                i = nl.arange(8)[:, None]
                t[:, :] = nl.load(a, mask=(i % 2 == 0))
                model[0::2, :] = True
            else:
                data, valid = t[sl].read()
                valid = None if valid is None else valid.copy()  # a view of the shadow
                checks.append((sl, data.copy(), valid, model[sl].copy()))
        data, valid = t.read()
        valid = None if valid is None else valid.copy()
        checks.append(((slice(None), slice(None)), data.copy(), valid, model.copy()))
        return a

    a = np.arange(48, dtype=F32).reshape(8, 6) + 1
    run_kernel(kernel, a)
    for sl, data, valid, expect in checks:
        got = np.ones_like(expect) if valid is None else valid
        np.testing.assert_array_equal(got, expect)
        np.testing.assert_array_equal(data[expect], a[sl][expect])
        assert np.isnan(data[~expect]).all()


def test_dead_psum_and_sbuf_tiles_release_exactly_once():
    seen = {}

    def kernel(a):
        run = maybe_current_run()
        for _ in range(4):
            p = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            t = nl.copy(nl.load(a))
            seen.setdefault("held", []).append((run.psum_live_banks, run.sbuf_live))
            del p, t
        seen["live"] = (run.psum_live_banks, run.sbuf_live)
        return a

    _, r = run_kernel(kernel, np.ones((128, 8), F32))
    assert seen["held"] == [(1, 8 * 4)] * 4  # the loaded tile died; its copy is live
    assert seen["live"] == (0, 0)
    assert r.psum_peak_banks == 1


def test_rejected_allocation_releases_nothing():
    def kernel(a):
        with pytest.raises(NkiConstraintError, match="err_num_partition_exceed_arch_limit"):
            nl.ndarray((256, 4), dtype=nl.float32)  # refused before any accounting
        return a

    _, r = run_kernel(kernel, np.ones((128, 8), F32))
    assert r.sbuf_live == 0


Step = tuple[str, int, int, int, int]
_steps = st.lists(
    st.tuples(
        st.sampled_from(["store", "masked_store", "load", "masked_load"]),
        st.integers(0, 5),
        st.integers(1, 4),
        st.integers(0, 5),
        st.integers(1, 6),
    ),
    min_size=1,
    max_size=6,
)


def _affine_program(steps: list[Step]):
    """A kernel storing/loading rectangles of one HBM buffer inside two nested affine loops."""

    def kernel(a):
        buf = nl.ndarray((8, 6), dtype=nl.float32, buffer=nl.shared_hbm)
        out = nl.ndarray((8, 6), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            for kind, r0, rn, c0, cn in steps:
                # iteration i shifts the rectangle down 2*i rows: iterations may overlap
                r1, c1 = min(r0 + rn + 2 * i, 8), min(c0 + cn, 6)
                sl = (slice(r0 + 2 * i, r1), slice(c0, c1))
                j = nl.arange(6)[None, :]
                if kind == "store":
                    nl.store(buf[sl], value=nl.load(a[sl]))
                elif kind == "masked_store":
                    nl.store(buf[0:8, :], value=nl.load(a), mask=(j % 2 == i))
                elif kind == "load":
                    nl.load(buf[sl])
                else:
                    nl.load(buf[0:8, :], mask=(j >= c0))
        nl.store(out, value=nl.load(buf))
        return out

    return kernel


@settings(max_examples=60, deadline=None)
@given(_steps)
def test_compact_shadows_match_the_array_form(steps):
    """Same findings, outputs and validity with rectangles as with the per-element arrays."""
    import migrator.nki.affine as affine_mod
    import migrator.nki.storage as storage_mod

    opts = EmulatorOptions(affine_deps="report", uninit_outputs="report")
    a = np.arange(48, dtype=F32).reshape(8, 6) + 1
    results = []
    for limit in (MAX_BOXES, 0):  # 0: every write takes the array form at once
        storage_mod.MAX_BOXES = affine_mod.MAX_BOXES = limit
        try:
            out, r = run_kernel(_affine_program(steps), a, options=opts)
        finally:
            storage_mod.MAX_BOXES = affine_mod.MAX_BOXES = MAX_BOXES
        results.append((out, [(f.code, f.message) for f in r.findings]))
    (compact, found), (eager, expect) = results
    assert found == expect
    np.testing.assert_array_equal(compact, eager)  # NaN where unwritten in both
