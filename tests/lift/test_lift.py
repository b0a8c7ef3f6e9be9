"""Lifting: each spelling of a computation lifts to the same tensor program, verified.

Every kernel here is our own minimal version of an idiom seen in real code (a linear layer with
the weight stored (OC, C), a shared-memory tree softmax, a register-tiled GEMM with operand
pointers advanced per tile, a shuffle reduction ...)."""

from __future__ import annotations

import gc
import textwrap
from pathlib import Path

import numpy as np
import pytest

from migrator.contract import load_spec
from migrator.lift import lift_task

KERNELS: dict[str, tuple[str, str, str]] = {}


def kernel(name: str, cuda: str, toml: str, expect: str) -> None:
    KERNELS[name] = (textwrap.dedent(cuda), textwrap.dedent(toml), expect)


kernel(
    "linear",
    """
    // out = inp @ weight^T + bias, weight stored (OC, C); one thread per output, bias optional
    __global__ void linear(float* out, const float* inp, const float* weight, const float* bias,
                           int BT, int C, int OC) {
        int bt = blockIdx.x;
        for (int o = threadIdx.x; o < OC; o += blockDim.x) {
            const float* w = weight + o * C;
            const float* x = inp + bt * C;
            float val = (bias != NULL) ? bias[o] : 0.0f;
            for (int i = 0; i < C; i++) val += x[i] * w[i];
            out[bt * OC + o] = val;
        }
    }
    """,
    """
    [kernel]
    name = "linear"
    [sizes]
    BT = 6
    C = 9
    OC = 7
    [[tensors]]
    name = "out"
    role = "out"
    shape = ["BT", "OC"]
    [[tensors]]
    name = "inp"
    role = "in"
    shape = ["BT", "C"]
    [[tensors]]
    name = "weight"
    role = "in"
    shape = ["OC", "C"]
    [[tensors]]
    name = "bias"
    role = "in"
    shape = ["OC"]
    [[scalars]]
    name = "BT"
    size = "BT"
    [[scalars]]
    name = "C"
    size = "C"
    [[scalars]]
    name = "OC"
    size = "OC"
    [launch]
    grid = ["BT"]
    block = [32]
    """,
    "out[i, j] = bias[j] + (sum_{k < C} (inp[i, k] * weight[j, k]))",
)

kernel(
    "softmax_tree",
    """
    #define THREADS 16
    __global__ void softmax_tree(const float* in, float* out, int cols) {
        __shared__ float red[THREADS];
        const float* row = in + blockIdx.x * cols;
        float m = -INFINITY;
        for (int c = threadIdx.x; c < cols; c += THREADS) m = fmaxf(m, row[c]);
        red[threadIdx.x] = m;
        __syncthreads();
        for (int s = THREADS / 2; s > 0; s /= 2) {
            if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
            __syncthreads();
        }
        m = red[0];
        __syncthreads();
        float sum = 0.f;
        for (int c = threadIdx.x; c < cols; c += THREADS) {
            float e = expf(row[c] - m);
            out[blockIdx.x * cols + c] = e;  // written, then re-read and normalised
            sum += e;
        }
        red[threadIdx.x] = sum;
        __syncthreads();
        for (int s = THREADS / 2; s > 0; s /= 2) {
            if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
            __syncthreads();
        }
        sum = red[0];
        for (int c = threadIdx.x; c < cols; c += THREADS) out[blockIdx.x * cols + c] /= sum;
    }
    """,
    """
    [kernel]
    name = "softmax_tree"
    [sizes]
    R = 5
    C = 37
    [[tensors]]
    name = "in"
    role = "in"
    shape = ["R", "C"]
    [[tensors]]
    name = "out"
    role = "out"
    shape = ["R", "C"]
    [[scalars]]
    name = "cols"
    size = "C"
    [launch]
    grid = ["R"]
    block = [16]
    """,
    "exp(",
)

kernel(
    "gemm_reg_tiled",
    """
    // 2x2 results per thread, operand pointers advanced per K tile, shared tiles
    #define BM 8
    #define BN 8
    #define BK 4
    __global__ void gemm_reg_tiled(int M, int N, int K, const float* A, const float* B,
                                   float* C) {
        __shared__ float As[BM][BK];
        __shared__ float Bs[BK][BN];
        int tr = threadIdx.x / 4, tc = threadIdx.x % 4;  // 16 threads, each 2x2
        A += blockIdx.y * BM * K;
        B += blockIdx.x * BN;
        C += blockIdx.y * BM * N + blockIdx.x * BN;
        float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
        for (int k0 = 0; k0 < K; k0 += BK) {
            for (int e = threadIdx.x; e < BM * BK; e += 16) {
                int r = e / BK, c = e % BK;
                bool ok = blockIdx.y * BM + r < M && k0 + c < K;
                As[r][c] = ok ? A[r * K + c] : 0.f;
            }
            for (int e = threadIdx.x; e < BK * BN; e += 16) {
                int r = e / BN, c = e % BN;
                bool ok = k0 + r < K && blockIdx.x * BN + c < N;
                Bs[r][c] = ok ? B[r * N + c] : 0.f;
            }
            __syncthreads();
            A += BK;
            B += BK * N;
            for (int kk = 0; kk < BK; ++kk)
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 2; ++j)
                        acc[i][j] += As[tr * 2 + i][kk] * Bs[kk][tc * 2 + j];
            __syncthreads();
        }
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) {
                int r = blockIdx.y * BM + tr * 2 + i, c = blockIdx.x * BN + tc * 2 + j;
                if (r < M && c < N) C[(tr * 2 + i) * N + tc * 2 + j] = acc[i][j];
            }
    }
    """,
    """
    [kernel]
    name = "gemm_reg_tiled"
    [sizes]
    M = 13
    N = 11
    K = 10
    [[tensors]]
    name = "A"
    role = "in"
    shape = ["M", "K"]
    [[tensors]]
    name = "B"
    role = "in"
    shape = ["K", "N"]
    [[tensors]]
    name = "C"
    role = "out"
    shape = ["M", "N"]
    [[scalars]]
    name = "M"
    size = "M"
    [[scalars]]
    name = "N"
    size = "N"
    [[scalars]]
    name = "K"
    size = "K"
    [launch]
    grid = ["ceil_div(N, 8)", "ceil_div(M, 8)"]
    block = [16]
    """,
    "C[i, j] = sum_{k < K} (A[i, k] * B[k, j])",
)

kernel(
    "row_sum_shuffle",
    """
    // one warp per row, lanes stride the row, butterfly shuffle reduction
    __global__ void row_sum_shuffle(const float* x, float* out, int rows, int cols) {
        int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
        int lane = threadIdx.x % 32;
        if (row >= rows) return;
        float s = 0.f;
        for (int c = lane; c < cols; c += 32) s += x[row * cols + c];
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off);
        if (lane == 0) out[row] = s / cols;
    }
    """,
    """
    [kernel]
    name = "row_sum_shuffle"
    [sizes]
    R = 9
    C = 70
    [[tensors]]
    name = "x"
    role = "in"
    shape = ["R", "C"]
    [[tensors]]
    name = "out"
    role = "out"
    shape = ["R"]
    [[scalars]]
    name = "rows"
    size = "R"
    [[scalars]]
    name = "cols"
    size = "C"
    [launch]
    grid = ["ceil_div(R, 2)"]
    block = [64]
    """,
    "out[i] = (1.0 / C) * (sum_{k < C} x[i, k])",
)

kernel(
    "bias_map_flat",
    """
    // a broadcast through a split flat index: bias[i % OC]
    __global__ void bias_map_flat(float* y, const float* x, const float* bias, int N, int OC) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < N) y[i] = x[i] + bias[i % OC];
    }
    """,
    """
    [kernel]
    name = "bias_map_flat"
    [sizes]
    R = 9
    OC = 12
    [[tensors]]
    name = "y"
    role = "out"
    shape = ["R", "OC"]
    [[tensors]]
    name = "x"
    role = "in"
    shape = ["R", "OC"]
    [[tensors]]
    name = "bias"
    role = "in"
    shape = ["OC"]
    [[scalars]]
    name = "N"
    size = "R * OC"
    [[scalars]]
    name = "OC"
    size = "OC"
    [launch]
    grid = ["ceil_div(R * OC, 32)"]
    block = [32]
    """,
    "y[i, j] = bias[j] + x[i, j]",
)

kernel(
    "pair_blend",
    """
    #include <cuda_bf16.h>
    // a value placed in one half of a pair, the other half a zero constant, chosen per lane
    // (llm.c's bf16 atomicAdd helper): the select keeps the traced half traced
    __global__ void pair_blend(float* y, const __nv_bfloat16* x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            __nv_bfloat16 v = x[i];
            __nv_bfloat162 p = (i & 1) ? __halves2bfloat162(__ushort_as_bfloat16(0), v)
                                       : __halves2bfloat162(v, __ushort_as_bfloat16(0));
            y[i] = __low2float(p) + __high2float(p);
        }
    }
    """,
    """
    [kernel]
    name = "pair_blend"
    [sizes]
    N = 100
    [[tensors]]
    name = "y"
    role = "out"
    shape = ["N"]
    [[tensors]]
    name = "x"
    role = "in"
    dtype = "bfloat16"
    shape = ["N"]
    [[scalars]]
    name = "n"
    size = "N"
    [launch]
    grid = ["ceil_div(N, 32)"]
    block = [32]
    """,
    "y[i] = x[i]",
)


def _task(tmp_path: Path, name: str):  # type: ignore[no-untyped-def]
    cuda, toml, _ = KERNELS[name]
    (tmp_path / f"{name}.cu").write_text(cuda)
    (tmp_path / f"{name}.toml").write_text(toml)
    return load_spec(tmp_path / f"{name}.toml")


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_each_spelling_lifts_to_its_program_and_verifies(tmp_path: Path, name: str) -> None:
    result = lift_task(_task(tmp_path, name))
    assert result.ok, result.render()
    text = result.program.render()  # type: ignore[union-attr]
    assert KERNELS[name][2] in text, text
    # verified somewhere other than where it was fitted, a ragged size included
    assert result.verified and all(v.sizes not in result.fitted_at for v in result.verified)


def test_softmax_lifts_to_the_normalised_exponential(tmp_path: Path) -> None:
    result = lift_task(_task(tmp_path, "softmax_tree"))
    prog = result.program
    assert prog is not None
    ops = {(e.kind, e.op) for e in prog.assigns[0].expr.walk()}
    assert ("reduce", "max") in ops and ("reduce", "sum") in ops and ("op", "exp") in ops

    # the report names the CUDA lines behind each part: the max's tree (fitted where each
    # thread holds one element of a row, so its running max combines nothing), the running
    # sum and its tree, the normalising division that stores the output
    text = KERNELS["softmax_tree"][0].splitlines()

    def line(snippet: str) -> str:
        return f"softmax_tree.cu:{next(n for n, t in enumerate(text, 1) if snippet in t)}"

    parts = {p.part.split(" in ")[0].split("_")[0]: p.lines for p in result.sources}
    assert parts["max"] == [line("red[threadIdx.x] = fmaxf(")]
    assert line("sum += e;") in parts["sum"] and line("] += red[threadIdx.x + s]") in parts["sum"]
    assert parts["out[i, j]"] == [line("/= sum")]
    assert "from the CUDA lines" in result.render()


def test_a_wrong_fit_is_caught_by_verification(tmp_path: Path) -> None:
    """A kernel whose small-size behaviour hides its structure (partial sums per block of 64
    elements: at the small traced sizes there is one block) fits a program that verification at
    larger sizes rejects: lifted, but not ok."""
    cu = """
    __global__ void block_partial(const float* x, float* partial, int n) {
        __shared__ float s[64];
        int i = blockIdx.x * 64 + threadIdx.x;
        s[threadIdx.x] = i < n ? x[i] : 0.f;
        __syncthreads();
        for (int h = 32; h > 0; h >>= 1) {
            if (threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
            __syncthreads();
        }
        if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
    }
    """
    toml = """
    [kernel]
    name = "block_partial"
    [sizes]
    N = 300
    [[tensors]]
    name = "x"
    role = "in"
    shape = ["N"]
    [[tensors]]
    name = "partial"
    role = "out"
    shape = ["ceil_div(N, 64)"]
    [[scalars]]
    name = "n"
    size = "N"
    [launch]
    grid = ["ceil_div(N, 64)"]
    block = [64]
    """
    (tmp_path / "block_partial.cu").write_text(textwrap.dedent(cu))
    (tmp_path / "block_partial.toml").write_text(textwrap.dedent(toml))
    result = lift_task(load_spec(tmp_path / "block_partial.toml"))
    assert not result.ok
    assert result.error or any(not v.ok for v in result.verified)


def _one_axis_task(tmp_path: Path, name: str, cu: str, outputs: str = ""):  # type: ignore[no-untyped-def]
    """The task of `name(const float* x, ..., int len)` over L = 100 elements of x, 32 threads
    a block, with the output tensors `outputs` (TOML; default: a float y of L elements)."""
    y = '[[tensors]]\nname = "y"\nrole = "out"\nshape = ["L"]'
    toml = (
        textwrap.dedent(f"""
    [kernel]
    name = "{name}"
    [sizes]
    L = 100
    [[tensors]]
    name = "x"
    role = "in"
    shape = ["L"]
    """)
        + (y if outputs == "" else outputs)
        + textwrap.dedent("""
    [[scalars]]
    name = "len"
    size = "L"
    [launch]
    grid = ["ceil_div(L, 32)"]
    block = [32]
    """)
    )
    (tmp_path / f"{name}.cu").write_text(textwrap.dedent(cu))
    (tmp_path / f"{name}.toml").write_text(toml)
    return load_spec(tmp_path / f"{name}.toml")


def test_an_integer_output_is_named_not_guessed(tmp_path: Path) -> None:
    cu = """
    __global__ void count_pos(const float* x, int* n, int len) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < len && x[i] > 0.f) atomicAdd(n, 1);
    }
    """
    n = '[[tensors]]\nname = "n"\nrole = "out"\ndtype = "int32"\nshape = [1]'
    result = lift_task(_one_axis_task(tmp_path, "count_pos", cu, n))
    assert not result.ok and result.error and "integer output" in result.error


def test_a_test_for_infinities_of_a_traced_value_is_named_not_decided(tmp_path: Path) -> None:
    """`isinf(x) ? -INFINITY : x` (an attention state merge's guard): the trace's values are
    finite, so following its branch would drop the infinite case from the program, which no
    random input at verification shows; the lift says what stopped it instead."""
    cu = """
    __global__ void clamp_inf(const float* x, float* y, int len) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < len) y[i] = isinf(x[i]) ? -INFINITY : 2.0f * x[i];
    }
    """
    result = lift_task(_one_axis_task(tmp_path, "clamp_inf", cu))
    assert not result.ok and result.error
    assert "not traceable: isinf" in result.error and "internal error" not in result.error


def test_a_task_with_no_output_says_so_and_points_at_cuda_arch(tmp_path: Path) -> None:
    """A kernel whose body is under `#if __CUDA_ARCH__ >= 700` is empty in the host view the
    file is read in: its task has no output, and the lift says so (with the define that shows
    the body) instead of emitting a kernel for nothing."""
    cu = """
    __global__ void twice(const float* x, float* y, int len) {
    #if __CUDA_ARCH__ >= 700
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < len) y[i] = 2.0f * x[i];
    #endif
    }
    """
    result = lift_task(_one_axis_task(tmp_path, "twice", cu, "# (no output)"))
    assert not result.ok and result.error and "no output" in result.error
    assert "-D__CUDA_ARCH__=800" in result.error


def test_the_lifted_program_is_json_and_evaluates_like_numpy(tmp_path: Path) -> None:
    from migrator.lift.program import Program, evaluate

    result = lift_task(_task(tmp_path, "linear"))
    prog = Program.model_validate_json(result.program.model_dump_json())  # type: ignore[union-attr]
    rng = np.random.default_rng(1)
    inp, w, b = rng.normal(size=(4, 6)), rng.normal(size=(5, 6)), rng.normal(size=5)
    got = evaluate(prog, {"inp": inp, "weight": w, "bias": b},
                   {"out": (4, 5)}, {"BT": 4, "C": 6, "OC": 5}, {})  # fmt: skip
    np.testing.assert_allclose(got["out"], inp @ w.T + b, rtol=1e-12)


def test_large_verification_sets_are_sampled_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond the dense evaluation budget a verification compares a random sample of output
    elements (the first and last among them) instead of nothing, and a wrong program still
    fails there; the sampled evaluation agrees with the dense one."""
    import migrator.lift.lifter as lifter
    from migrator.lift.program import Assign, Expr, Program, evaluate

    spec = _task(tmp_path, "linear")
    result = lift_task(spec)
    assert result.ok and result.program is not None
    sizes = result.verified[0].sizes
    monkeypatch.setattr(lifter, "VERIFY_ELEMENTS", 100 * int(sizes["C"]))
    v = lifter.verify(spec, result.program, sizes, 3)
    assert v.ok and not v.skipped and v.note and v.note.startswith("sampled"), v
    (a,) = result.program.assigns
    twice = Expr(kind="op", op="*", args=[Expr(kind="const", value=2), a.expr])
    wrong = Program(assigns=[Assign(tensor=a.tensor, vars=a.vars, expr=twice)])
    assert not lifter.verify(spec, wrong, sizes, 3).ok
    rng = np.random.default_rng(1)
    inp, w, b = rng.normal(size=(4, 6)), rng.normal(size=(5, 6)), rng.normal(size=5)
    args = ({"inp": inp, "weight": w, "bias": b}, {"out": (4, 5)}, {"BT": 4, "C": 6, "OC": 5}, {})
    dense = evaluate(result.program, *args)["out"]
    at = np.array([0, 7, 19])
    sampled = evaluate(result.program, *args, points={"out": at})["out"]
    np.testing.assert_allclose(sampled, dense.reshape(-1)[at], rtol=1e-12)


def test_a_traced_run_past_its_statement_budget_stops_with_a_named_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A traced run is slow per value: past its budget of thread-statements it stops (an error
    naming the budget, deterministic on any machine) instead of running on."""
    import migrator.lift.trace as trace

    monkeypatch.setattr(trace, "TRACE_STATEMENTS", 50)
    result = lift_task(_task(tmp_path, "linear"))
    assert not result.ok and result.error and "budget of 50 thread-statements" in result.error


def test_reduction_variables_do_not_run_out() -> None:
    """More nested reductions than there are letters get numbered variables."""
    from migrator.lift.fit import RED_VARS, Canonicaliser, Fitter

    f = Fitter(Canonicaliser(), {}, {})
    names = [next(f.red_names) for _ in range(len(RED_VARS) + 3)]
    assert len(set(names)) == len(names) and names[-1] == "k3"


def test_sampled_points_of_a_row_program_agree_with_the_dense_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sample of a row-wise output has many points per row: each row's reductions are
    evaluated once for its points (nested max and sum of softmax), with the same values as the
    dense evaluation, including points repeated and a row met once."""
    import migrator.lift.program as program

    spec = _task(tmp_path, "softmax_tree")
    result = lift_task(spec)
    assert result.ok and result.program is not None
    rng = np.random.default_rng(5)
    rows, cols = 9, 37
    x = rng.normal(size=(rows, cols))
    (a,) = result.program.assigns
    args = ({"in": x}, {a.tensor: (rows, cols)}, {"R": rows, "C": cols}, {})
    dense = program.evaluate(result.program, *args)[a.tensor]
    at = np.array([0, 1, 5, 5, 40, 41, 42, 8 * cols + 36, 3 * cols])  # rows 0, 1, 8, 3
    calls: list[int] = []
    for op, fn in list(program._NP_REDUCE.items()):  # the rows each reduction is computed for

        def counted(body, *args, _fn=fn, **kw):  # type: ignore[no-untyped-def]
            calls.append(body.shape[0])
            return _fn(body, *args, **kw)

        monkeypatch.setitem(program._NP_REDUCE, op, counted)
    sampled = program.evaluate(result.program, *args, points={a.tensor: at})[a.tensor]
    np.testing.assert_allclose(sampled, dense.reshape(-1)[at], rtol=1e-12)
    assert calls and max(calls) == 4, calls  # four distinct rows among nine points


@pytest.mark.parametrize(
    ("index", "expect"),
    [
        (["i", "j"], lambda a, m: a),
        (["j", "i"], lambda a, m: a.T),  # a transposed read
        (["i", "k"], lambda a, m: np.broadcast_to(a.sum(axis=1, keepdims=True), a.shape)),
        (["k", "j"], lambda a, m: np.broadcast_to(a.sum(axis=0, keepdims=True), a.shape)),
        (["i", "i"], lambda a, m: np.broadcast_to(np.diag(a)[:, None], a.shape)),  # a diagonal
        (["i", "j+1"], lambda a, m: a[:, 1:]),  # an offset: still a gather
    ],
)
def test_loads_over_whole_axes_evaluate_as_the_gather_does(index: list[str], expect) -> None:  # type: ignore[no-untyped-def]
    """A load whose indices are variables running over whole dimensions is read as the array
    itself (axes moved), not gathered: the values must be the gather's, transposes, sums over
    either axis and diagonals included; anything else still gathers."""
    from migrator.lift.program import Assign, Expr, IndexMap, Program, Term, evaluate

    n = 6
    a = np.random.default_rng(2).normal(size=(n, n + 1 if index == ["i", "j+1"] else n))

    def ix(s: str) -> IndexMap:
        var, _, off = s.partition("+")
        return IndexMap(terms=[Term(coef=1, var=var)], const=int(off or 0))

    load = Expr(kind="load", tensor="a", index=[ix(s) for s in index])
    body = load
    if "k" in index:
        body = Expr(kind="reduce", op="sum", var="k", extent=n, args=[load])
    prog = Program(assigns=[Assign(tensor="out", vars=["i", "j"], expr=body)])
    got = evaluate(prog, {"a": a}, {"out": (n, n)}, {}, {})["out"]
    want = expect(a, n)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    at = np.array([0, 7, 35, 7])
    pts = evaluate(prog, {"a": a}, {"out": (n, n)}, {}, {}, points={"out": at})["out"]
    np.testing.assert_allclose(pts, np.asarray(want).reshape(-1)[at], rtol=1e-12)


def test_flat_rows_evaluate_each_row_once_with_the_dense_values() -> None:
    """`y[i] = x[i] / sum_k x[k + L*(i // L)]` (rows of a flat tensor): the whole output is
    evaluated one row sum per row, and equals the row-wise numpy result."""
    from migrator.lift.program import Assign, Expr, IndexMap, Program, Term, evaluate

    rows, width = 7, 5
    x = np.random.default_rng(4).normal(size=rows * width) + 3.0
    row = IndexMap(terms=[Term(coef=1, var="k"), Term(coef=width, var="i", div=width)])
    total = Expr(kind="reduce", op="sum", var="k", extent=width,
                 args=[Expr(kind="load", tensor="x", index=[row])])  # fmt: skip
    own = Expr(kind="load", tensor="x", index=[IndexMap(terms=[Term(coef=1, var="i")])])
    prog = Program(assigns=[Assign(tensor="y", vars=["i"],
                                   expr=Expr(kind="op", op="/", args=[own, total]))])  # fmt: skip
    got = evaluate(prog, {"x": x}, {"y": (rows * width,)}, {}, {})["y"]
    want = (x.reshape(rows, width) / x.reshape(rows, width).sum(axis=1, keepdims=True)).ravel()
    assert got.shape == (rows * width,)
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize(("limit", "words"), [("MAX_NODES", "program nodes"),
                                              ("MAX_CANON_WORK", "canonical form")])  # fmt: skip
def test_fits_past_their_work_limits_stop_with_a_named_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: str, words: str
) -> None:
    """A running value rescaled at every step (an online softmax) nests its expressions as deep
    as a row is long: canonical forms and fits past their limits stop with an error naming the
    cause, in every pair tried, instead of running for minutes."""
    import migrator.lift.fit as fit

    monkeypatch.setattr(fit, limit, 4)
    result = lift_task(_task(tmp_path, "softmax_tree"))
    assert not result.ok and result.error and words in result.error, result.error


def test_a_size_the_kernel_is_specialised_on_keeps_its_value_in_traces(tmp_path: Path) -> None:
    """`rowdot<16>` with D = 16 in every size set: traces keep D at 16 (at D = 8 the kernel
    would still read 16 columns), so the program is the one the kernel computes."""
    cu = """
    template <int D>
    __global__ void rowdot(const float* x, const float* w, float* y, int R) {
        int r = blockIdx.x * blockDim.x + threadIdx.x;
        if (r >= R) return;
        float acc = 0.0f;
    #pragma unroll
        for (int d = 0; d < D; ++d) acc += x[r * D + d] * w[d];
        y[r] = acc;
    }
    """
    toml = """
    [kernel]
    name = "rowdot"
    template_args = [16]
    [sizes]
    R = 100
    D = 16
    [[size_sets]]
    R = 37
    [[tensors]]
    name = "x"
    role = "in"
    shape = ["R", "D"]
    [[tensors]]
    name = "w"
    role = "in"
    shape = ["D"]
    [[tensors]]
    name = "y"
    role = "out"
    shape = ["R"]
    [[scalars]]
    name = "R"
    size = "R"
    [launch]
    grid = ["ceil_div(R, 32)"]
    block = [32]
    """
    (tmp_path / "rowdot.cu").write_text(textwrap.dedent(cu))
    (tmp_path / "rowdot.toml").write_text(textwrap.dedent(toml))
    result = lift_task(load_spec(tmp_path / "rowdot.toml"))
    assert result.ok, result.render()
    assert all(s["D"] == 16 for s in result.fitted_at + [v.sizes for v in result.verified])
    assert result.program.render() == "y[i] = sum_{k < D} (w[k] * x[i, k])"  # type: ignore[union-attr]


def test_trace_sizes_that_are_expressions_of_each_other_come_last() -> None:
    """`T = 2 * B` at the traced sizes lets the fit read a length of T as `2 * B` (wrong at
    every other size, so a second fit is needed): pairs free of such coincidences are tried
    first, and the others stay as fallbacks."""
    from migrator.contract import TaskSpec
    from migrator.lift.lifter import _coincident, trace_pairs

    assert _coincident({"B": 8, "NH": 12, "T": 16}, set()) == "T"  # 2 * B
    assert _coincident({"B": 8, "C": 12, "V": 20}, set()) == "B"  # V - C
    assert _coincident({"B": 12, "NH": 16, "T": 20}, set()) is None
    assert _coincident({"N": 8, "block": 16}, {"block"}) is None  # launch-only sizes aside
    spec = TaskSpec.model_validate({
        "kernel": {"name": "k"},
        "sizes": {"B": 4, "NH": 12, "T": 64},
        "tensors": [{"name": "x", "role": "in", "shape": ["B * NH * T", "T"]},
                    {"name": "y", "role": "out", "shape": ["B * NH * T", "T"]}],
        "launch": {"grid": ["B * NH * T"], "block": [32]},
    })  # fmt: skip
    pairs = trace_pairs(spec)
    assert _coincident(pairs[0][0], set()) is None and _coincident(pairs[0][1], set()) is None
    assert any(_coincident(p[0], set()) for p in pairs[1:])  # the plain pairs kept after


def _tiled_gemm(more: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    """A GEMM task of 128 x 128 tiles over M and N and slices of 32 along K, `more` relations
    beside those (a loop step)."""
    from migrator.contract import TaskSpec

    return TaskSpec.model_validate({
        "kernel": {"name": "k"},
        "sizes": {"M": 256, "N": 256, "K": 256},
        "relations": ["M % 128 == 0", "N % 128 == 0", "K % 32 == 0", *more],
        "tensors": [{"name": "A", "role": "in", "shape": ["M", "K"]},
                    {"name": "B", "role": "in", "shape": ["K", "N"]},
                    {"name": "C", "role": "out", "shape": ["M", "N"]}],
        "scalars": [{"name": n, "size": n} for n in ("M", "N", "K")],
        "launch": {"grid": ["N / 128", "M / 128"], "block": [16, 16]},
    })  # fmt: skip


def test_trace_pairs_of_large_tiles_may_trade_values_between_sizes() -> None:
    """A GEMM of 128 x 128 tiles (`M % 128 == 0`, `N % 128 == 0`, `K % 32 == 0`, a tutorial's
    template constants): the pairs stepped up from small sizes all pass the budget (the
    second set 256 x 384 x 64), so the last resort is the cheapest two sets of whole tiles
    whose values differ per size, free to reappear under another name (M = 128, N = 256, then
    M = 256, N = 128). Before it, the same with K, which no grid dimension names (each thread
    steps through it), at quarters of its tile: a quarter of the K steps to trace, its relation
    set aside (verification at sizes that obey it decides)."""
    from migrator.lift.lifter import TILED_BUDGET, trace_pairs

    spec = _tiled_gemm()
    (p, q), (a, b) = trace_pairs(spec)
    assert p["K"] % 8 == 0 and p["K"] < 32 and q["K"] != p["K"]
    assert {p["M"], p["N"]} == {q["M"], q["N"]} == {128, 256} and p["M"] != q["M"]
    assert spec.work(p) < spec.work(a)
    assert not spec.broken_relations(a) and not spec.broken_relations(b)
    assert all(a[n] != b[n] for n in "MNK") and len({*a.values()}) == len({*b.values()}) == 3
    assert max(spec.work(a), spec.work(b)) <= TILED_BUDGET
    assert {a["M"], a["N"]} == {b["M"], b["N"]} == {128, 256}


@pytest.mark.parametrize(
    ("more", "part"),
    [(["K % 8 == 0"], 8), (["K % 16 == 0"], None), (["K % 8 == 0", "K % 64 == 0"], 16)],
)
def test_a_loop_step_past_a_quarter_of_the_tile_keeps_the_tile_whole(
    more: list[str], part: int | None
) -> None:
    """`K % 16 == 0` beside `K % 32 == 0` (the measurement's step of the K loop, slices of
    16, double-buffered: its epilogue reads the second buffer): a K of 8 ends inside a slice
    and a K of 16 fills one buffer, so K is traced at whole tiles from the first pair; a step
    of 8 keeps the quarter (K = 8) as before, also of a tile of 64 (K = 16)."""
    from migrator.lift.lifter import trace_pairs

    spec = _tiled_gemm(tuple(more))
    first = trace_pairs(spec)[0]
    if part is not None:
        assert first[0]["K"] == part, first
    else:
        assert all(not spec.broken_relations(s) for s in first), first


def test_trace_pairs_keep_padded_rows_at_least_their_width() -> None:
    """`P >= V` (rows of width V at a stride P): a pair that sets relations aside still keeps
    P past V (rows that overlap compute nothing the program could say), and with a tied or a
    wide size the pairs of one block size past the block are offered."""
    from migrator.contract import TaskSpec
    from migrator.lift.lifter import trace_pairs

    spec = TaskSpec.model_validate({
        "kernel": {"name": "k"},
        "sizes": {"R": 64, "P": 128, "V": 96},
        "relations": ["P >= V"],
        "tensors": [{"name": "x", "role": "in", "shape": ["R * P"]},
                    {"name": "y", "role": "out", "shape": ["R * P"]},
                    {"name": "w", "role": "in", "shape": ["V"]}],
        "scalars": [{"name": "V", "size": "V"}],
        "launch": {"grid": ["R"], "block": [256]},
    })  # fmt: skip
    pairs = trace_pairs(spec)
    assert pairs and all(s["P"] > s["V"] for p in pairs for s in p)
    assert any(s["R"] < 16 and s["P"] > 256 for p in pairs for s in p)


@pytest.mark.parametrize("grid", [["B", "NH"], ["ceil_div(T, 8)", "B * NH"]])
def test_trace_pairs_keep_a_grid_of_whole_problems_small(grid: list[str]) -> None:
    """`grid(B, NH)`, one attention per block: a few problems show all the program does, so
    the bare grid sizes start from 3 (they were 8 and up, and 16 x 20 problems cost a trace
    of seconds); the other sizes keep their usual values, every size still distinct. A grid
    axis that is a product of sizes (`dim3(num_blocks, B * NH)`, llm.c's causal softmax
    backwards) numbers problems by each factor the same way."""
    from migrator.contract import TaskSpec
    from migrator.lift.lifter import trace_pairs

    spec = TaskSpec.model_validate({
        "kernel": {"name": "k"},
        "sizes": {"B": 4, "NH": 4, "T": 64, "D": 16},
        "tensors": [{"name": "q", "role": "in", "shape": ["B", "NH", "T", "D"]},
                    {"name": "o", "role": "out", "shape": ["B", "NH", "T", "D"]}],
        "launch": {"grid": grid, "block": [32]},
    })  # fmt: skip
    first = trace_pairs(spec)[0]
    assert all(s["B"] * s["NH"] <= 64 for s in first)
    assert all(len(set(s.values())) == len(s) for s in first) and first[0] != first[1]
    assert all(s["T"] >= 8 and s["D"] >= 8 for s in first)


BLOCK_ROWS = """// each block copies 32 rows of a problem of N rows: N % 32 == 0 assumed
__global__ void rows(const float* x, float* y, int N, int D) {
    int base = blockIdx.x * N * D;
    for (int c = 0; c < D; c++)
        y[base + threadIdx.x * D + c] = 2.0f * x[base + threadIdx.x * D + c];
}
"""


def test_a_pair_that_breaks_whole_tiles_and_makes_blocks_overlap_is_not_traced(
    tmp_path: Path,
) -> None:
    """At N = 20 (the task says `N % 32 == 0`) each block's 32 rows run into the next block's:
    the writers run shows blocks writing the same elements, so the pair is given up at once
    (the whole launch traced would cost much and show what no allowed size computes); at a
    pair that keeps whole tiles the program lifts."""
    from migrator.contract import TaskSpec
    from migrator.lift.fit import fit_points
    from migrator.lift.program import LiftError
    from migrator.lift.trace import blocks_to_trace

    (tmp_path / "rows.cu").write_text(BLOCK_ROWS)
    spec = TaskSpec.model_validate({
        "kernel": {"name": "rows"}, "relations": ["N % 32 == 0"],
        "sizes": {"H": 6, "N": 64, "D": 5}, "size_sets": [{"H": 5, "N": 32, "D": 7}],
        "tensors": [{"name": "x", "role": "in", "shape": ["H * N", "D"]},
                    {"name": "y", "role": "out", "shape": ["H * N", "D"]}],
        "scalars": [{"name": "N", "size": "N"}, {"name": "D", "size": "D"}],
        "launch": {"grid": ["H"], "block": [32]},
        "path": str(tmp_path / "rows.toml"),
    })  # fmt: skip
    with pytest.raises(LiftError, match="write the same elements of y"):
        blocks_to_trace(spec, {"H": 6, "N": 20, "D": 5}, 0, fit_points)
    result = lift_task(spec)
    assert result.ok and result.program is not None
    assert result.program.render() == "y[i, j] = 2 * x[i, j]"


TILED_SUM = """// a row sum over whole tiles of bc keys, one problem per block of grid(B, H)
__global__ void tiled_sum(const float* x, float* out, int N, int n_tiles, int bc) {
    int row = blockIdx.x * gridDim.y + blockIdx.y;
    if (threadIdx.x == 0) {
        float acc = 0.0f;
        for (int t = 0; t < n_tiles; t++)
            for (int c = 0; c < bc; c++) acc += x[row * N + t * bc + c];
        out[row] = acc;
    }
}
"""


def test_whole_problems_of_whole_tiles_are_first_traced_at_one_tile(tmp_path: Path) -> None:
    """`grid(B, H)` of problems over whole tiles of Bc = 32 keys (`N % 32 == 0`): the first
    pair traces N = 32, one tile (sizes equal to a launch constant are set aside elsewhere;
    two tiles of a flash kernel trace its running rescale, too large to fit), and there the
    32 keys are read as N, not as Bc: the sum verifies at N = 64 and 96."""
    from migrator.contract import TaskSpec
    from migrator.lift.lifter import trace_pairs

    (tmp_path / "tiled.cu").write_text(TILED_SUM)
    spec = TaskSpec.model_validate({
        "kernel": {"name": "tiled_sum"}, "relations": ["N % 32 == 0"],
        "sizes": {"B": 4, "H": 3, "N": 96, "Bc": 32},
        "size_sets": [{"B": 2, "H": 5, "N": 64, "Bc": 32}],
        "tensors": [{"name": "x", "role": "in", "shape": ["B", "H", "N"]},
                    {"name": "out", "role": "out", "shape": ["B", "H"]}],
        "scalars": [{"name": "N", "size": "N"}, {"name": "n_tiles", "size": "ceil_div(N, Bc)"},
                    {"name": "bc", "size": "Bc"}],
        "launch": {"grid": ["B", "H"], "block": [32]},
        "path": str(tmp_path / "tiled.toml"),
    })  # fmt: skip
    first = trace_pairs(spec)[0]
    assert first[0]["N"] == 32 and not spec.broken_relations(first[1])
    result = lift_task(spec)
    assert result.ok and result.program is not None and len(result.fitted_at) == 1
    assert result.program.render() == "out[i, j] = sum_{k < N} x[i, j, k]"


def test_a_trace_too_large_to_hold_is_refused_before_it_is_made() -> None:
    """A traced value is a Python object per element: a task whose tensors hold more than
    MAX_TRACED floats (a literal 10^8-element input took 24 GB) is refused, with why."""
    from migrator.contract import TaskSpec
    from migrator.lift.program import LiftError
    from migrator.lift.trace import MAX_TRACED, trace_run

    spec = TaskSpec.model_validate({
        "kernel": {"name": "copy"}, "sizes": {"N": MAX_TRACED + 1},
        "tensors": [{"name": "x", "role": "in", "shape": ["N"]},
                    {"name": "y", "role": "out", "shape": ["N"]}],
        "launch": {"grid": ["(N + 127) / 128"], "block": [128]},
    })  # fmt: skip
    with pytest.raises(LiftError, match="too large to trace"):
        trace_run(spec, {"N": MAX_TRACED // 2 + 1})


def test_runs_started_ahead_include_the_first_pairs_verification_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `AHEAD_AFTER` seconds of launches, the runs started ahead of the verification are
    the task's own size sets and the sets `check_sizes` makes for the first trace pair (a guess
    made before the program: `verify_all` abandons what it then does not want), cheapest
    first; the lift's result is the one it is without them."""
    from migrator.lift import lifter

    spec = _task(tmp_path, "linear")
    quiet = lift_task(spec)
    started: list[list[dict[str, int]]] = []
    real = lifter.ahead

    def ahead(fn, items, memos):  # type: ignore[no-untyped-def]
        started.append(list(items))
        return real(fn, items, memos)

    monkeypatch.setattr(lifter, "ahead", ahead)
    monkeypatch.setenv("C2N_AHEAD_AFTER", "0")
    lifter._LIFTS.clear()
    again = lift_task(spec)
    first = lifter.trace_pairs(spec)[0]
    [items] = started
    assert all(s in items for s in lifter._own_sets(spec))
    assert all(s in items for s in lifter.check_sizes(spec, first))
    work = [spec.work(s) for s in items]
    assert work == sorted(work)
    assert again.program == quiet.program
    assert [v.sizes for v in again.verified] == [v.sizes for v in quiet.verified]


def test_outputs_fitted_on_two_processes_give_the_program_one_process_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trace's outputs (dx and the two column sums of `rows_and_columns.cu`) are fitted on two
    processes at once where the traced run took long enough (`C2N_FIT_FORK_AFTER`): the
    program, the CUDA lines behind each part and the verification are those one process
    finds."""
    from migrator import api, workers
    from migrator.migration import migrate

    src = tmp_path / "rows_and_columns.cu"
    src.write_text((Path(__file__).parents[1] / "data" / "rows_and_columns.cu").read_text())
    forks: list[list[object]] = []  # the items of each child forked
    real = workers._fork

    def fork(fn: object, items: list[object], memos: object) -> object:
        child = real(fn, items, memos)  # type: ignore[arg-type]
        if child is not None:
            forks.append(list(items))
        return child

    monkeypatch.setattr(workers, "_fork", fork)
    monkeypatch.setattr(workers.threading, "active_count", lambda: 1)
    monkeypatch.setenv("C2N_AHEAD_AFTER", "1e9")  # (no runs ahead: the second core is free)
    monkeypatch.setenv("C2N_FIT_FORK_AFTER", "0")

    def lifted(workers_: str) -> object:
        monkeypatch.setenv("C2N_WORKERS", workers_)
        api.clear_caches()
        (k,) = migrate(src, out_dir=tmp_path / workers_).kernels
        assert k.status == "complete" and k.lifted is not None, k.diagnostics
        return k.lifted.model_dump(exclude={"verified"}), [v.ok for v in k.lifted.verified]

    one = lifted("1")
    assert not forks
    two = lifted("2")
    assert ["dgain", "dshift", "dx"] in forks  # (the fits went two ways)
    assert one == two


def test_the_grown_verification_set_keeps_a_threads_loop_steps_within_the_tasks() -> None:
    """A kernel whose every thread loops over B * H * T * T: the set grown from a traced
    3 x 5 x 8 (9 x 13 x 19, 42237 steps a thread, six seconds a run) is halved until a thread's
    steps are within the task's own sets', twice the traced set's or LIFT_MIN_STEPS, and is
    still larger than the traced set in every size."""
    from migrator.cuda.frontend import analyze_file
    from migrator.cuda.steps import nest_steps, step_nests
    from migrator.infer import infer_spec
    from migrator.lift.lifter import LIFT_MIN_STEPS, check_sizes

    src = Path(__file__).resolve().parents[1] / "data" / "rows_again.cu"
    tu = analyze_file(src)
    kernel = next(k for k in tu.global_kernels if k.name == "rows_again")
    spec = infer_spec(tu, kernel)
    nests = step_nests(kernel, {"B": "B", "H": "H", "T": "T"})
    traced = {"B": 3, "C": 15, "H": 5, "T": 8}
    cap = max([LIFT_MIN_STEPS, 2 * nest_steps(nests, traced)]
              + [nest_steps(nests, s) for s in spec.all_size_sets()])  # fmt: skip
    sets = check_sizes(spec, [traced])
    grown = [s for s in sets if all(s[n] > traced[n] for n in ("B", "H", "T"))]
    assert grown, sets
    assert all(nest_steps(nests, s) <= cap for s in sets), sets


def test_blocks_that_each_redo_every_row_are_traced_as_one() -> None:
    """Every block along y of `rows_again` stores the same values into every row: the writers'
    run keeps one writer per element, one block is traced, and the lift from it verifies."""
    from migrator.cuda.frontend import analyze_file
    from migrator.infer import infer_spec
    from migrator.lift.fit import fit_points
    from migrator.lift.trace import blocks_to_trace

    src = Path(__file__).resolve().parents[1] / "data" / "rows_again.cu"
    tu = analyze_file(src)
    spec = infer_spec(tu, next(k for k in tu.global_kernels if k.name == "rows_again"))
    blocks, _ = blocks_to_trace(spec, {"B": 3, "C": 15, "H": 5, "T": 8}, 0, fit_points)
    assert blocks is not None and len(blocks) == 1
    result = lift_task(spec)
    assert result.ok, result.error


def test_a_trace_is_kept_to_the_end_only_by_a_process_that_skips_teardown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a library's caller gets its memory back as the lift returns; the `migrate` command,
    # which ends with os._exit, keeps the latest trace (freeing it cost a GEMM a third of its
    # traced run) and only the latest
    from migrator import teardown
    from migrator.lift import lifter
    from migrator.lift.trace import Trace

    monkeypatch.setattr(lifter, "_SPARED", [])
    monkeypatch.setattr(teardown, "_SKIPPED", [False])
    assert lift_task(_task(tmp_path, "linear")).ok
    assert lifter._SPARED == []
    teardown.skip_teardown()
    monkeypatch.setattr(lifter, "_LIFTS", {})  # (lifted again, not found in the memo)
    try:
        assert lift_task(_task(tmp_path, "linear")).ok
        first = list(lifter._SPARED)
        assert len(first) == 1 and isinstance(first[0], Trace)
        assert lift_task(_task(tmp_path, "softmax_tree")).ok
        assert len(lifter._SPARED) == 1 and lifter._SPARED[0] is not first[0]
    finally:
        gc.unfreeze()  # (what the kept traces froze: this test process goes on)
