"""Fast paths of the interpreter's memory and mask handling agree with plain numpy indexing.

`span.py` replaces gathers/scatters by strided views when indices form runs; `values.blend`
replaces `np.where` by a bit select; `ops.mask_and` special-cases uniform conditions. Each is
checked against the operation it stands in for, on structured and arbitrary inputs.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from migrator.cuda.interp.ops import mask_and
from migrator.cuda.interp.races import RaceTracker
from migrator.cuda.interp.span import MIN_COLS, Span, span_of
from migrator.cuda.interp.values import blend


def _runs(start: int, rows: int, cols: int, step: int) -> np.ndarray:
    return (start + np.arange(rows)[:, None] * step + np.arange(cols)[None, :]).reshape(-1)


@settings(max_examples=60, deadline=None)
@given(
    start=st.integers(0, 50),
    rows=st.integers(1, 40),
    cols=st.integers(MIN_COLS, 300),
    gap=st.integers(0, 40),
    poke=st.one_of(st.none(), st.integers(0, 10**6)),
)
def test_span_of_finds_runs_and_only_runs(start, rows, cols, gap, poke):
    flat = _runs(start, rows, cols, cols + gap).astype(np.int64)
    if poke is not None:  # break the pattern at one element
        flat[poke % flat.size] += 1 + poke % 3
    span = span_of(flat)
    if span is None:
        return  # irregular (or too small to bother): the caller keeps fancy indexing
    assert (span.rows, span.cols) in ((rows, cols), (1, flat.size))
    data = np.arange(flat.max() + 10, dtype=np.float32) * 1.5
    np.testing.assert_array_equal(span.take(data), np.take(data, flat))
    a, b = data.copy(), data.copy()
    values = -np.arange(flat.size, dtype=np.float32)
    span.put(a, values)
    b[flat] = values
    np.testing.assert_array_equal(a, b)


def test_span_of_rejects_repeats_and_disorder():
    tid = np.tile(np.arange(256), 4)  # s[tid] seen over 4 blocks without the row base
    assert span_of(tid) is None
    assert span_of(np.arange(1000)[::-1].copy()) is None
    assert span_of(np.random.default_rng(0).permutation(4096)) is None
    assert span_of(_runs(0, 8, MIN_COLS - 1, 256)) is None  # short runs: not worth a view
    assert span_of(_runs(3, 16, 128, 256)) == Span(3, 16, 128, 256)
    assert span_of(np.arange(7, 7 + 5000)) == Span(7, 1, 5000, 5000)


def test_race_tables_through_a_span_match_the_index_path():
    flat = _runs(0, 64, 128, 256)
    span = span_of(flat)
    assert span is not None
    tid = (flat % 256).astype(np.int16)
    fast, slow = RaceTracker(64 * 256), RaceTracker(64 * 256)
    for tracker, sp in ((fast, span), (slow, None)):
        tracker.read(flat, tid, sp)
        tracker.read(flat + 1 - 1, (tid + 1) % 256, sp)  # another thread read the same words
        race = tracker.write(flat, tid, sp)
        assert race.all()  # every written word was read by another thread
    np.testing.assert_array_equal(fast.reader, slow.reader)
    np.testing.assert_array_equal(fast.writer, slow.writer)


@settings(max_examples=40, deadline=None)
@given(
    dtype=st.sampled_from(["float32", "float64", "float16", "int32", "uint8", "int64", "bool"]),
    seed=st.integers(0, 2**16),
    uniform=st.sampled_from([None, "a", "b"]),
)
def test_blend_is_np_where_bit_for_bit(dtype, seed, uniform):
    rng = np.random.default_rng(seed)
    n = 257
    mask = rng.random(n) < 0.5
    a = (rng.standard_normal(n) * 50).astype(dtype)
    b = (rng.standard_normal(n) * 50).astype(dtype)
    if dtype.startswith("float"):
        a[::7], b[::5] = np.nan, -0.0  # payloads and signed zeros survive a bit select
    if uniform == "a":
        a = a[0]
    elif uniform == "b":
        b = np.asarray(b[0])
    got, want = blend(mask, a, b), np.where(mask, a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_mask_and_with_uniform_and_lane_conditions():
    mask = np.array([True, False, True, True])
    out = mask_and(mask, np.bool_(True))
    np.testing.assert_array_equal(out, mask)
    assert out is not mask  # callers may update it in place
    np.testing.assert_array_equal(mask_and(mask, False), np.zeros(4, bool))
    cond = np.array([True, True, False, True])
    np.testing.assert_array_equal(mask_and(mask, cond), mask & cond)


@settings(max_examples=40, deadline=None)
@given(start=st.integers(0, 50), rows=st.integers(1, 20), cols=st.integers(MIN_COLS, 200),
       gap=st.integers(0, 40))  # fmt: skip
def test_span_of_finds_every_regular_run_structure(start, rows, cols, gap):
    flat = _runs(start, rows, cols, cols + gap).astype(np.int64)
    if flat.size < 256:  # (below MIN_LANES a gather is as fast: not looked for)
        return
    assert span_of(flat) in (Span(start, rows, cols, cols + gap), Span(start, 1, flat.size,
                                                                     flat.size))  # fmt: skip


def test_span_of_rejects_lanes_that_share_a_row_at_once():
    tid = np.arange(256)
    assert span_of((tid // 16) * 8 + 3) is None  # `s[ty * TM + m][k]`: 16 lanes per element
    assert span_of(np.concatenate([np.arange(63), np.arange(100, 293)])) is None
