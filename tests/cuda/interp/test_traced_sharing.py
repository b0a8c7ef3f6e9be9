"""Traced runs build one node per distinct computation: a value every lane of a block holds
(a row's mean after a block reduce) is one Sym, not one per lane, and the two lanes of a
butterfly pair share their sum. What is shared must be what each lane would have computed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from migrator.contract import load_spec
from migrator.cuda.interp.traced import OBJECT, Sym, per_distinct
from migrator.lift import lift_task
from migrator.lift.trace import trace_run


def _syms(n: int) -> np.ndarray:
    out = np.empty(n, dtype=object)
    for i in range(n):
        out[i] = Sym.leaf("x", i, float(i) + 0.5)
    return out


def test_per_distinct_calls_once_per_operand_tuple_and_shares_the_result() -> None:
    leaves = _syms(4)
    a = leaves[np.arange(256) % 4]  # four distinct objects over 256 lanes
    b = leaves[(np.arange(256) // 4) % 2]
    calls: list[int] = []

    def add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        calls.append(np.size(x))
        return np.add(x, y)

    got = per_distinct(add, a, b)
    assert calls == [8]  # 4 x 2 distinct pairs, not 256
    plain = np.add(a, b)
    assert got.dtype == OBJECT and got.shape == (256,)
    assert [g.v for g in got] == [p.v for p in plain]
    assert all(g.args[0] is p.args[0] and g.args[1] is p.args[1]
               for g, p in zip(got, plain, strict=True))  # fmt: skip
    assert got[0] is got[8]  # same operands: the same node


def test_commutative_pairs_are_one_node_and_other_operators_keep_their_order() -> None:
    leaves = _syms(64)
    lane = np.arange(64)
    a, b = leaves, leaves[lane ^ 1]  # a butterfly step: lane i pairs with i ^ 1
    s = per_distinct(np.add, a, b, commutative=True)
    assert len({id(x) for x in s}) == 32 and s[0] is s[1]
    assert all(x.v == y.v + z.v for x, y, z in zip(s, a, b, strict=True))
    d = per_distinct(np.subtract, a, b)  # not commutative: a - b and b - a stay apart
    assert len({id(x) for x in d}) == 64
    assert all(x.v == y.v - z.v and x.args[0] is y and x.args[1] is z
               for x, y, z in zip(d, a, b, strict=True))  # fmt: skip


def test_mostly_distinct_or_numeric_operands_take_the_plain_call() -> None:
    leaves = _syms(100)
    calls: list[int] = []

    def mul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        calls.append(np.size(x))
        return np.multiply(x, y)

    per_distinct(mul, leaves, 2.0)
    assert calls == [100]
    numbers = np.arange(100.0)
    assert np.array_equal(per_distinct(np.multiply, numbers, numbers), numbers * numbers)


BLOCK_MEAN = """
// one block per row; a shuffle butterfly then shared memory reduce the row; every thread
// divides the row total by n and writes its own element centred on that mean
__global__ void centre(float* out, const float* x, int n) {
    __shared__ float warp_sums[32];
    const float* row = x + blockIdx.x * n;
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += row[i];
    for (int k = 16; k > 0; k >>= 1) s += __shfl_xor_sync(0xffffffff, s, k);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < blockDim.x / 32; w++) total += warp_sums[w];
    float mean = total / n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[blockIdx.x * n + i] = row[i] - mean;
}
"""

SPEC = """
[kernel]
name = "centre"
[sizes]
R = 5
N = 300
[[tensors]]
name = "out"
role = "out"
shape = ["R", "N"]
[[tensors]]
name = "x"
role = "in"
shape = ["R", "N"]
[[scalars]]
name = "n"
size = "N"
[launch]
grid = ["R"]
block = ["128"]
"""


def test_a_block_reduce_gives_one_mean_node_per_row_and_still_lifts(tmp_path: Path) -> None:
    (tmp_path / "centre.cu").write_text(textwrap.dedent(BLOCK_MEAN))
    (tmp_path / "centre.toml").write_text(textwrap.dedent(SPEC))
    spec = load_spec(tmp_path / "centre.toml")
    tr = trace_run(spec, {"R": 3, "N": 40})
    out = tr.outputs["out"].reshape(3, 40)
    for r in range(3):
        means = {id(e.args[1]) for e in out[r]}  # out = row[i] - mean: one mean per row
        assert len(means) == 1
        mean = out[r][0].args[1]
        np.testing.assert_allclose(mean.v, np.mean(tr.inputs["x"].reshape(3, 40)[r]), rtol=1e-5)
    result = lift_task(spec)
    assert result.ok, result.render()
    assert "sum_" in result.program.render()  # type: ignore[union-attr]


SCALE = """
// a 2-D grid of 8x4 tiles; out[r, c] = 2 * x[r, c] where c < n - 1 (the last column never),
// and every block adds its tile's count into total[0] (all blocks, one element)
__global__ void scale(float* out, float* total, const float* x, int m, int n) {
    int c = blockIdx.x * 8 + threadIdx.x, r = blockIdx.y * 4 + threadIdx.y;
    if (r < m && c < n - 1) out[r * n + c] = 2.0f * x[r * n + c];
    if (threadIdx.x == 0 && threadIdx.y == 0) atomicAdd(total, 1.0f);
    // out of bounds in block (1, 2) of a 3 x 4 grid only: an error must name that block
    if (gridDim.y == 4 && blockIdx.x == 1 && blockIdx.y == 2 && threadIdx.x == 0) out[m * n] = 0;
}
"""


def _scale_args(m: int, n: int) -> dict[str, object]:
    x = np.arange(m * n, dtype=np.float32)
    return {"out": np.full(m * n, np.nan, np.float32), "total": np.zeros(1, np.float32),
            "x": x, "m": m, "n": n}  # fmt: skip


def test_a_run_of_chosen_blocks_computes_what_the_full_launch_computes_there() -> None:
    from migrator.cuda.interp import InterpOptions
    from migrator.cuda.interp.runner import run_kernel

    m, n, grid = 12, 21, (3, 3)
    full = run_kernel(SCALE, "scale", grid, (8, 4), _scale_args(m, n),
                      options=InterpOptions(writers=True))  # fmt: skip
    w = full.writers["out"].reshape(m, n)
    r, c = np.indices((m, n))
    expect = np.where(c < n - 1, (r // 4) * 3 + c // 8, -1)
    np.testing.assert_array_equal(w, expect)
    assert full.writers["total"].tolist() == [-2]  # nine blocks add into it
    # (in one statement of one batch: that overlaps, as the lifter's broken-tile check reads)
    assert full.overlaps["total"].tolist() == [True] and not full.overlaps["out"].any()
    some = run_kernel(SCALE, "scale", grid, (8, 4), _scale_args(m, n),
                      options=InterpOptions(blocks=(1, 5, 8), writers=True))  # fmt: skip
    got, want = some.outputs["out"].reshape(m, n), full.outputs["out"].reshape(m, n)
    ran = np.isin(expect, [1, 5, 8])
    np.testing.assert_array_equal(got[ran], want[ran])
    assert np.isnan(got[~ran]).all() and some.outputs["total"][0] == 3.0
    np.testing.assert_array_equal(some.writers["out"].reshape(m, n), np.where(ran, expect, -1))


AGAIN = """
// every block along y computes all of out (as llm.c's naive attention backward redoes every
// row in every block); `skew` makes the blocks' values differ
__global__ void again(float* out, const float* x, int n, int skew) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i] + (float)(skew * blockIdx.y);
}
"""


@pytest.mark.parametrize("batch", [None, 1])
def test_blocks_storing_what_another_stored_keep_one_writer(batch: int | None) -> None:
    """An element blocks store one value into keeps a block whose store alone gives it (the
    lifter traces that block only); one they store different values into is -2. All blocks at
    once (one statement, several lanes on an element) and one block a batch (a later block
    storing into what an earlier one stored) alike."""
    from migrator.cuda.interp import InterpOptions
    from migrator.cuda.interp.runner import run_kernel

    n, grid = 40, (3, 4)  # blocks of 16 along x, four copies along y
    x = np.arange(n, dtype=np.float32)

    def run(skew: int, **options: object):  # type: ignore[no-untyped-def]
        args = {"out": np.full(n, np.nan, np.float32), "x": x, "n": n, "skew": skew}
        return run_kernel(AGAIN, "again", grid, 16, args, options=InterpOptions(**options))

    same = run(0, writers=True, block_batch=batch)
    w = same.writers["out"]
    assert (w >= 0).all() and (w % 3 == np.arange(n) // 16).all()  # (linear id: bx + 3 * by)
    np.testing.assert_array_equal(same.outputs["out"], 2 * x)
    some = run(0, blocks=tuple(sorted(set(w.tolist()))))
    np.testing.assert_array_equal(some.outputs["out"], same.outputs["out"])
    skewed = run(1, writers=True, block_batch=batch)
    assert (skewed.writers["out"] == -2).all()


def test_chosen_blocks_are_checked_against_the_grid() -> None:

    from migrator.cuda.interp import InterpOptions
    from migrator.cuda.interp.findings import InterpError
    from migrator.cuda.interp.runner import run_kernel

    with pytest.raises(ValueError, match="sorted, unique"):
        InterpOptions(blocks=(3, 1))
    with pytest.raises(InterpError, match="outside the grid of 9"):
        run_kernel(SCALE, "scale", (3, 3), (8, 4), _scale_args(12, 21),
                   options=InterpOptions(blocks=(2, 9)))  # fmt: skip
    # the error names the block in the grid's numbering (block 7 of 3 x 4 is (1, 2))
    with pytest.raises(InterpError, match=r"block \(1, 2, 0\)"):
        run_kernel(SCALE, "scale", (3, 4), (8, 4), _scale_args(12, 21),
                   options=InterpOptions(blocks=(0, 7)))  # fmt: skip


TILES = """
// one block per row (rows in whole tiles of 32, as a tiled kernel asks): out = x * w + x[r, 0]
__global__ void tiles(float* out, const float* x, const float* w, int m, int n) {
    int r = blockIdx.x;
    for (int c = threadIdx.x; c < n; c += blockDim.x)
        out[r * n + c] = x[r * n + c] * w[c] + x[r * n];
}
"""

TILES_SPEC = """
relations = ["M % 32 == 0"]
[kernel]
name = "tiles"
[sizes]
M = 96
N = 90
[[tensors]]
name = "out"
role = "out"
shape = ["M", "N"]
[[tensors]]
name = "x"
role = "in"
shape = ["M", "N"]
[[tensors]]
name = "w"
role = "in"
shape = ["N"]
[[scalars]]
name = "m"
size = "M"
[[scalars]]
name = "n"
size = "N"
[launch]
grid = ["M"]
block = ["32"]
"""


def test_the_lifter_traces_only_the_blocks_its_fit_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 64 rows of one block each, the fit reads about a dozen rows: those blocks are traced,
    and the program fitted from them is the one the whole trace gives."""
    import migrator.lift.lifter as lifter

    (tmp_path / "tiles.cu").write_text(textwrap.dedent(TILES))
    (tmp_path / "tiles.toml").write_text(textwrap.dedent(TILES_SPEC))
    spec = load_spec(tmp_path / "tiles.toml")
    sizes = {"M": 64, "N": 12}
    traced: list[object] = []
    real = lifter.trace_run
    monkeypatch.setattr(lifter, "trace_run",
                        lambda s, z, seed=0, blocks=None: traced.append(blocks) or real(
                            s, z, seed, blocks))  # fmt: skip
    some = lifter._fit(spec, sizes, 0)
    assert traced[0] is not None and 0 < len(traced[0]) < 32  # type: ignore[arg-type]
    whole = lifter._fit_trace(real(spec, sizes, 0), {}, None)
    assert some.render() == whole.render() == "out[i, j] = (w[j] * x[i, j]) + x[i, 0]"
    assert lift_task(spec).ok


def test_sizes_where_the_kernel_writes_nothing_are_not_traced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below a whole tile (`M < 32`: a kernel whose loop needs one) the writers' run shows no
    element written: the fit's verdict comes at once, without the traced run it would read
    it from."""
    import migrator.lift.lifter as lifter
    from migrator.lift.program import LiftError

    (tmp_path / "tiles.cu").write_text(textwrap.dedent(TILES).replace(
        "    int r = blockIdx.x;", "    int r = blockIdx.x;\n    if (m < 32) return;"))  # fmt: skip
    (tmp_path / "tiles.toml").write_text(textwrap.dedent(TILES_SPEC))
    spec = load_spec(tmp_path / "tiles.toml")
    traced: list[object] = []
    monkeypatch.setattr(lifter, "trace_run", lambda *a, **k: traced.append(a))
    with pytest.raises(LiftError, match="^96 of 96 elements of out are never written$"):
        lifter._fit(spec, {"M": 8, "N": 12}, 0)
    assert not traced


def test_a_few_blocks_that_write_only_nan_at_broken_sizes_are_not_traced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three blocks (a launch traced whole) at sizes the relations rule out, storing what
    they read from shared memory nothing filled (a double-buffered GEMM's quarter tile of K):
    the untraced writers' run finds every element NaN, which the fit counts as unwritten, and
    the pair is refused without the traced run."""
    import migrator.lift.lifter as lifter
    from migrator.lift.program import LiftError

    kernel = textwrap.dedent(TILES).replace(
        "    int r = blockIdx.x;\n",
        (
            "    int r = blockIdx.x;\n    __shared__ float t[1];\n"
            "    if (m >= 32 && threadIdx.x == 0) t[0] = 1.0f;\n    __syncthreads();\n"
        ),
    )
    (tmp_path / "tiles.cu").write_text(kernel.replace("x[r * n];", "x[r * n] * t[0];"))
    (tmp_path / "tiles.toml").write_text(textwrap.dedent(TILES_SPEC))
    spec = load_spec(tmp_path / "tiles.toml")
    traced: list[object] = []
    real = lifter.trace_run
    monkeypatch.setattr(lifter, "trace_run", lambda *a, **k: traced.append(a) or real(*a, **k))
    with pytest.raises(LiftError, match="^36 of 36 elements of out are never written$"):
        lifter._fit(spec, {"M": 3, "N": 12}, 0)
    assert not traced
    lifter._fit(spec, {"M": 32, "N": 12}, 0)  # (whole tiles: traced, as the relations allow)
    assert traced


LAST_BLOCK = """
// each block writes its partial sum; the last block to finish adds the partials up
__device__ unsigned int done = 0;
__global__ void last_block_sum(float* partial, float* total, const float* x, int n) {
    __shared__ bool last;
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[blockIdx.x * n + i];
    for (int k = 16; k > 0; k >>= 1) s += __shfl_xor_sync(0xffffffff, s, k);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
    __threadfence();
    if (threadIdx.x == 0) last = atomicInc(&done, gridDim.x) == gridDim.x - 1;
    __syncthreads();
    if (last && threadIdx.x == 0) {
        float t = 0.0f;
        for (int b = 0; b < gridDim.x; b++) t += partial[b];
        total[0] = t;
    }
}
"""


def test_a_block_reading_another_blocks_store_is_reported() -> None:
    """The last block sums the partials the others stored: such blocks do not compute apart,
    so the lifter must trace them all (a subset would leave the partials unwritten)."""
    from migrator.cuda.interp import InterpOptions
    from migrator.cuda.interp.runner import run_kernel

    x = np.arange(6 * 32, dtype=np.float32)
    args = {"partial": np.full(6, np.nan, np.float32), "total": np.full(1, np.nan, np.float32),
            "x": x, "n": 32}  # fmt: skip
    run = run_kernel(LAST_BLOCK, "last_block_sum", 6, 32, args,
                     options=InterpOptions(writers=True))  # fmt: skip
    assert run.cross_block_reads and run.outputs["total"][0] == x.sum()
    assert run.writers["total"].tolist() == [5]  # one writer: the subset alone would miss it
    tiles = run_kernel(SCALE, "scale", (3, 3), (8, 4), _scale_args(12, 21),
                       options=InterpOptions(writers=True))  # fmt: skip
    assert not tiles.cross_block_reads


def test_a_grid_larger_than_memory_is_walked_lazily() -> None:
    """Batches of a whole grid are made as they run: a probe launch of 2^46 blocks stops at
    its statement budget (a named error), never allocating an id per block first."""
    from migrator.cuda.interp import InterpOptions
    from migrator.cuda.interp.findings import InterpError
    from migrator.cuda.interp.runner import run_kernel

    with pytest.raises(InterpError, match="thread-statements"):
        run_kernel(SCALE, "scale", (2**31 - 1, 2**15, 1), (8, 4), _scale_args(12, 21),
                   options=InterpOptions(max_thread_statements=10_000, oob="report"))  # fmt: skip


def test_object_ids_are_the_elements_ids() -> None:
    """The ids read from an object array's memory are `id` of each element, for a plain
    array, a strided view and a broadcast (which is copied first)."""
    import numpy as np

    from migrator.cuda.interp.traced import Sym, object_ids

    objs = [Sym.leaf("x", i, float(i)) for i in range(10)]
    a = np.empty(40, dtype=object)
    a[:] = [objs[i % 7] for i in range(40)]
    for view in (a, a[::3], a.reshape(5, 8)[:, 1], np.broadcast_to(a[:1], (12,))):
        assert object_ids(view).tolist() == [id(x) for x in view.reshape(-1)]


def test_the_statement_budget_bounds_the_run_not_each_batch_of_blocks() -> None:
    """`max_thread_statements` counts across the batches of a grid: a launch of many small
    batches, each well under the budget, stops once their sum passes it (BudgetError)."""
    from migrator.cuda.interp import InterpOptions
    from migrator.cuda.interp.findings import BudgetError
    from migrator.cuda.interp.runner import run_kernel

    def run(cap: int) -> int:
        opts = InterpOptions(max_thread_statements=cap, block_batch=1, oob="report")
        return run_kernel(SCALE, "scale", (8, 8), (8, 4), _scale_args(64, 32),
                          options=opts).thread_statements  # fmt: skip

    total = run(0)
    per_block = total // 64
    assert run(total) == total  # (the whole run at its budget)
    with pytest.raises(BudgetError, match=f"budget of {total // 2} thread-statements"):
        run(total // 2)
    assert total // 2 > 4 * per_block  # (every batch alone is far under it)


FEW = """
// one block of 256 threads, of which only the first n work: each loops over a triangle of
// its row (as llm.c's naive softmax backward loops over t2 <= t), the rest idle
__global__ void few(float* out, const float* x, const float* w, int rows, int n) {
    int t = threadIdx.x;
    if (t < n) {
        for (int r = 0; r < rows; r++) {
            float acc = 0.0f;
            for (int j = 0; j <= t; j++) acc += x[r * n + j] * w[j];
            out[r * n + t] = acc;
        }
    }
}
"""

FEW_SPEC = """
[kernel]
name = "few"
[sizes]
R = 3
N = 9
[[tensors]]
name = "out"
role = "out"
shape = ["R", "N"]
[[tensors]]
name = "x"
role = "in"
shape = ["R", "N"]
[[tensors]]
name = "w"
role = "in"
shape = ["N"]
[[scalars]]
name = "rows"
size = "R"
[[scalars]]
name = "n"
size = "N"
[launch]
grid = ["1"]
block = ["256"]
"""


def test_a_traced_run_runs_few_active_lanes_compacted_and_traces_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A traced value costs a Python object per lane and operation, idle lanes included: the
    traced run compacts statements that few lanes execute (9 of 256 here) as untraced runs
    do, and every output element's expression is the one the uncompacted run builds."""
    from migrator.cuda.interp import InterpOptions, compact
    from migrator.cuda.interp.runner import run_kernel

    rows, n = 3, 9
    x, w = _syms(rows * n), np.empty(n, dtype=object)
    for j in range(n):
        w[j] = Sym.leaf("w", j, 0.25 * j - 1.0)

    def run(on: bool) -> list[str]:
        args = {"out": np.full(rows * n, np.nan, dtype=object), "x": x, "w": w,
                "rows": rows, "n": n}  # fmt: skip
        got = run_kernel(FEW, "few", 1, 256, args,
                         options=InterpOptions(trace=True, races=False, compact=on))  # fmt: skip
        return [repr(e) for e in got.outputs["out"]]

    plain, compacted = run(False), run(True)
    assert compacted == plain
    # (each step's multiply-add one node; the first adds into a number, 0.0, as written)
    assert plain[n + 2] == "acc+fma(x[11], w[2], acc+fma(x[10], w[1], +(0.0, *(x[9], w[0]))))"

    (tmp_path / "few.cu").write_text(textwrap.dedent(FEW))
    (tmp_path / "few.toml").write_text(textwrap.dedent(FEW_SPEC))
    spec = load_spec(tmp_path / "few.toml")
    ran: list[bool] = []
    real = compact.try_compacted
    monkeypatch.setattr(compact, "try_compacted", lambda m, node, mask: ran.append(
        real(m, node, mask)) or ran[-1])  # fmt: skip
    tr = trace_run(spec, {"R": rows, "N": n})
    assert ran and all(ran)  # the lifter's traced run compacted the working lanes' loop
    assert [e.v for e in tr.outputs["out"].reshape(-1)] == pytest.approx(
        [sum(tr.inputs["x"].reshape(rows, n)[r, : t + 1] * tr.inputs["w"][: t + 1])
         for r in range(rows) for t in range(n)], rel=1e-6)  # fmt: skip


FMA_SPELLINGS = """
// three spellings of a multiply-add into an accumulator: an expression, a compound
// assignment and fmaf; one of a half multiply-add, stored widened; and a product on a row
// of its own (two nodes: each keeps its row)
#include <cuda_fp16.h>
__global__ void dots(float* out, const float* a, const float* b, const __half* h, int k) {
    int r = threadIdx.x;
    float s = 0.0f, t = 0.0f, u = 0.0f, w = 0.0f;
    __half v = __float2half(0.0f);
    for (int j = 0; j < k; j++) {
        s = a[r * k + j] * b[j] + s;
        t += a[r * k + j] * b[j];
        u = fmaf(a[r * k + j], b[j], u);
        v = __hfma(h[r * k + j], h[j], v);
        w +=
            a[r * k + j] * b[j];
    }
    out[5 * r] = s; out[5 * r + 1] = t; out[5 * r + 2] = u; out[5 * r + 3] = __half2float(v);
    out[5 * r + 4] = w;
}
"""


def test_multiply_adds_are_one_node_each_with_the_sums_canonical_form() -> None:
    """`x * y + z` in a traced run is one "fma" node per element whatever its spelling, with
    the value the two operations give in float64; its canonical form is the one the product
    and the sum spelled apart have (`Canonicaliser._chain`)."""
    from migrator.cuda.interp import InterpOptions
    from migrator.cuda.interp.runner import run_kernel
    from migrator.cuda.interp.traced import FMA_OPS, multiply_add
    from migrator.lift.fit import Canonicaliser

    rows, k = 3, 5
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(rows * k), rng.standard_normal(k)
    h = np.round(rng.standard_normal(rows * k) * 8) / 8  # (exact in half)

    def leaves(name: str, vals: np.ndarray) -> np.ndarray:
        return np.array([Sym.leaf(name, i, float(v)) for i, v in enumerate(vals)], dtype=object)

    args = {"out": np.full(5 * rows, np.nan, dtype=object), "a": leaves("a", a),
            "b": leaves("b", b), "h": leaves("h", h), "k": k}  # fmt: skip
    res = run_kernel(FMA_SPELLINGS, "dots", 1, rows, args, options=InterpOptions(trace=True))
    out = res.outputs["out"]
    for r in range(rows):
        want = [float(a[r * k : (r + 1) * k] @ b)] * 3 + [float(h[r * k : (r + 1) * k] @ h[:k])]
        for n, w in enumerate(want):
            v = out[5 * r + n]
            while v.op not in FMA_OPS:  # (through the half's conversions, if any)
                v = v.args[0]
            # (`s = a * b + s` keeps the product first; `t += a * b` and the calls add last)
            assert v.op == ("fma" if n != 1 else "acc+fma") and len(v.args) == 3
            np.testing.assert_allclose(out[5 * r + n].v, w, rtol=1e-12)
        apart = out[5 * r + 4]
        assert apart.op == "+" and apart.args[1].op == "*"
        assert apart.args[1].at[0] == apart.at[0] + 1
        np.testing.assert_allclose(apart.v, want[0], rtol=1e-12)
    # the same canonical tree as the product and the sum spelled apart, in either order
    x, y, z = leaves("a", a[:3]), leaves("b", b[:3]), leaves("h", h[:3])
    for first in (False, True):
        fused = multiply_add(x, y, z, sum_first=first)
        apart = z + x * y if first else x * y + z
        assert all(f.op in FMA_OPS and p.op == "+" for f, p in zip(fused, apart, strict=True))
        c = Canonicaliser()
        for f, p in zip(fused, apart, strict=True):
            assert c(f) == c(p) and c.key(c(f)) == c.key(c(p))
    # a number among the operands: the two operations, as written
    mixed = multiply_add(x, y, np.zeros(3, dtype=object))
    assert all(m.op == "+" and m.args[0].op == "*" for m in mixed)
