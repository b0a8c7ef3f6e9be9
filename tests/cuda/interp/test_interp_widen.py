"""Accumulating loops evaluated over all their steps at once (`widen.py`) are invisible: every
output bit, finding, error and statement count equals the step-by-step reference
(`InterpOptions(widen=False)`), on the corpus and on the idioms below, and the widened path is
the one taken where it applies."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from migrator.contract import load_spec
from migrator.cuda.interp import InterpOptions, RunResult, widen
from migrator.cuda.interp.findings import InterpError
from migrator.cuda.interp.spec_run import run_spec_full

CORPUS = Path(__file__).resolve().parents[3] / "corpus"
SPECS = sorted(CORPUS.glob("*.toml"))
Runner = Callable[..., RunResult]


def _logged(monkeypatch: pytest.MonkeyPatch, name: str) -> list[bool]:
    done: list[bool] = []
    real = getattr(widen, name)

    def logged(*args: Any, **kw: Any) -> bool:
        done.append(real(*args, **kw))
        return done[-1]

    monkeypatch.setattr(widen, name, logged)
    return done


@pytest.fixture
def widened(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each accumulating loop the widened path took on was completed that way (False:
    undone and run step by step)."""
    return _logged(monkeypatch, "_widened")


@pytest.fixture
def widened_maps(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """As `widened`, for loops that store each step's own element of a local array."""
    return _logged(monkeypatch, "_widened_map")


def _both(krun: Runner, src: str, grid: Any, block: Any, **args: Any) -> tuple[Any, Any]:
    """(args after, result or error) with the widened path, then without it."""
    out = []
    opts = dict(args.pop("_options", {}))
    shared = int(args.pop("_shared", 0))
    for flag in (True, False):
        mine = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        try:
            res: Any = krun(src, grid=grid, block=block, shared_bytes=shared,
                            options=InterpOptions(widen=flag, **opts), **mine)  # fmt: skip
        except InterpError as e:
            res = f"{type(e).__name__}: {e}"
        out.append((mine, res))
    return out[0], out[1]


def _same(a: tuple[Any, Any], b: tuple[Any, Any]) -> None:
    (args_a, res_a), (args_b, res_b) = a, b
    if isinstance(res_a, str) or isinstance(res_b, str):
        assert res_a == res_b
        return
    for name, v in args_a.items():
        if isinstance(v, np.ndarray):  # bit for bit (NaN payloads, -0.0)
            assert v.tobytes() == args_b[name].tobytes(), name
    assert res_a.findings == res_b.findings
    assert res_a.thread_statements == res_b.thread_statements


@pytest.mark.parametrize("spec_path", SPECS, ids=[p.stem for p in SPECS])
def test_corpus_same_widened_or_step_by_step(spec_path: Path) -> None:
    spec = load_spec(spec_path)
    sizes = spec.all_size_sets()[0]
    fast = run_spec_full(spec, sizes, seed=3, options=InterpOptions(widen=True))
    slow = run_spec_full(spec, sizes, seed=3, options=InterpOptions(widen=False))
    for a, b in zip(fast.outputs, slow.outputs, strict=True):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    assert fast.result.findings == slow.result.findings
    assert fast.result.thread_statements == slow.result.thread_statements


SCORES = """
// a block's rows of Q against its tile of K in shared memory: the dot product over d is the
// loop widened (contracted: one fma a step), with a scaled, masked score after it
__global__ void scores(const float* Q, const float* K, float* S, int d, int bc, float scale) {
    extern __shared__ float sram[];
    float* Qi = sram;
    float* Kj = sram + blockDim.x * d;
    int tx = threadIdx.x;
    for (int x = 0; x < d; x++) {
        Qi[tx * d + x] = Q[(blockIdx.x * blockDim.x + tx) * d + x];
        Kj[tx * d + x] = K[(blockIdx.x * blockDim.x + tx) * d + x];
    }
    __syncthreads();
    for (int y = 0; y < bc; y++) {
        float sum = 0;
        for (int x = 0; x < d; x++) sum += Qi[(tx * d) + x] * Kj[(y * d) + x];
        sum *= scale;
        if (tx < y) sum = -INFINITY;
        S[(blockIdx.x * blockDim.x + tx) * bc + y] = sum;
    }
}
"""


def test_a_contracted_dot_product_over_shared_tiles(krun: Runner, widened: list[bool]) -> None:
    rng = np.random.default_rng(0)
    d, bc, blocks = 13, 16, 3
    q = rng.standard_normal(blocks * bc * d).astype(np.float32)
    k = rng.standard_normal(blocks * bc * d).astype(np.float32)
    a, b = _both(krun, SCORES, blocks, bc, Q=q, K=k, S=np.zeros(blocks * bc * bc, np.float32),
                 d=d, bc=bc, scale=np.float32(0.3), _shared=2 * bc * d * 4)  # fmt: skip
    assert not isinstance(a[1], str), a[1]
    _same(a, b)
    assert widened and all(widened)
    # (the fma's single rounding, not a product rounded first: float32 throughout differs)
    s = a[0]["S"].reshape(blocks * bc, bc)
    qq, kk = q.reshape(blocks, bc, d).astype(np.float64), k.reshape(blocks, bc, d)
    want = np.einsum("bix,bjx->bij", qq, kk.astype(np.float64)).reshape(blocks * bc, bc) * 0.3
    ok = np.isfinite(s)
    np.testing.assert_allclose(s[ok], want[ok], rtol=1e-4, atol=1e-5)


IDIOMS = """
// per-lane trip counts (a causal row: j <= t), two induction variables stepped at once, a
// double and an int accumulator, `-=` and `*=`, an uncontracted sum of exponentials
__global__ void idioms(const float* a, const float* b, float* out, double* dout, int* cnt,
                       int n) {
    int t = threadIdx.x;
    if (t >= n) return;
    float acc = 0.0f;
    for (int j = 0; j <= t; j++) acc += a[t * n + j] * (j == t ? 1.0f : 0.5f);
    float two = 1.0f;
    int ia, ib;
    for (ia = t, ib = 0; ia < n * n; ia += n, ib += 1) two -= a[ia] * b[ib];
    double wide = 0.0;
    for (int j = 0; j < n; j++) wide += (double)a[t * n + j] * b[j];
    int pos = 0;
    for (int j = 0; j < n; j++) pos += a[t * n + j] > 0.0f;
    float prod = 1.0f;
    for (int j = 0; j < 4; j++) prod *= 1.0f + 0.1f * b[j];
    float m = 0.0f;
    for (int j = n - 1; j >= 0; --j) m += expf(a[t * n + j] - 1.0f);
    float dsum = 0.0f;  // a softmax's backward: a step's temporaries, then the sum
    for (int j = 0; j <= t; j++) {
        float indicator = j == t ? 1.0f : 0.0f;
        float local = a[t * n + j] * (indicator - a[t * n + t]);
        dsum += 0.5f * local * b[j];
    }
    m += dsum;
    float pv = 0.0f;  // a value loop that leaves at a lane's own bound (`if (...) break;`)
    for (int y = 0; y < 16; y++) {
        if (y >= n - t) break;
        pv += a[t * n + y % n] * b[y % n];
    }
    m += pv;
    out[4 * t] = acc;
    out[4 * t + 1] = two;
    out[4 * t + 2] = prod;
    out[4 * t + 3] = m;
    dout[t] = wide;
    cnt[t] = pos + ia + ib;
}
"""


def test_trip_counts_steps_and_types_as_step_by_step(krun: Runner, widened: list[bool]) -> None:
    rng = np.random.default_rng(1)
    n = 11
    a, b = _both(krun, IDIOMS, 1, 16, a=rng.standard_normal(n * n).astype(np.float32),
                 b=rng.standard_normal(n).astype(np.float32),
                 out=np.zeros(4 * n, np.float32), dout=np.zeros(n, np.float64),
                 cnt=np.zeros(n, np.int32), n=n)  # fmt: skip
    assert not isinstance(a[1], str), a[1]
    _same(a, b)
    assert len(widened) == 8 and all(widened)
    got = a[0]
    x = got["a"].reshape(n, n).astype(np.float64)
    t = np.arange(n)
    assert got["cnt"].tolist() == ((x > 0).sum(1) + t + n * n + n).tolist()
    np.testing.assert_allclose(got["dout"], x @ got["b"].astype(np.float64), rtol=1e-12)


OVER = """
// reads past the end of `a` for the last lanes: each such step is an out-of-bounds finding
__global__ void over(const float* a, float* out, int n, int len) {
    float s = 0.0f;
    for (int j = 0; j < len; j++) s += a[threadIdx.x + j];
    out[threadIdx.x] = s;
}
"""


@pytest.mark.parametrize("oob", ["report", "raise"])
def test_findings_and_errors_are_the_step_by_step_loops(
    krun: Runner, widened: list[bool], oob: str
) -> None:
    """A finding the widened evaluation would log (or an error it would raise) undoes it, and
    the loop runs step by step: the findings (counts, first lanes) and the error are exactly
    the reference's."""
    a, b = _both(krun, OVER, 1, 8, a=np.arange(10, dtype=np.float32),
                 out=np.zeros(8, np.float32), n=10, len=5,
                 _options={"oob": oob})  # fmt: skip
    _same(a, b)
    if oob == "raise":
        assert isinstance(a[1], str) and "out-of-bounds read" in a[1]
    else:
        # (lane 6 reads a[10] once, lane 7 a[10] and a[11])
        assert [(f.kind, f.count) for f in a[1].findings] == [("out_of_bounds", 3)]
        assert widened == [False]  # (tried, undone)
    assert not any(widened)


def test_a_statement_budget_ends_the_run_where_step_by_step_would(krun: Runner) -> None:
    a, b = _both(krun, OVER, 1, 4, a=np.arange(100, dtype=np.float32),
                 out=np.zeros(4, np.float32), n=100, len=50,
                 _options={"max_thread_statements": 120})  # fmt: skip
    _same(a, b)
    assert isinstance(a[1], str) and "thread-statements" in a[1]


def test_only_a_lone_accumulation_that_nothing_else_reads_is_widened() -> None:
    from migrator.cuda.interp.machine import Machine
    from migrator.cuda.parse import parse_text

    src = """__global__ void k(float* o, const float* a, int n) {
        float s = 0.0f, t = 0.0f;
        for (int j = 0; j < n; j++) s += a[j];
        for (int j = 0; j < n; j++) { s += a[j]; t += a[j]; }
        for (int j = 0; j < n; j++) s += s * a[j];
        for (int j = 0; j < n; j++) s = s + a[j];
        for (int j = 0; j < n; j++) s += a[j++];
        for (int j = 0; j < n && s < 4.0f; j++) s += a[j];
        for (int j = 0; j < n; j++) s += atomicAdd(o, a[j]);
        for (int j = 0; j < n; j++) s += fmaxf(a[j], 0.0f);
        for (int j = 0, k = n; j < k; j++, k--) s += a[j] * a[k];
        for (int j = 0; j < n; j++) { float v = a[j] * 2.0f; const float w = v + 1.0f; s += w; }
        for (int j = 0; j < n; j++) { float v; v = a[j]; s += v; }
        for (int j = 0; j < n; j++) { float v[2] = {a[j], 0.0f}; s += v[0]; }
        for (int j = 0; j < n; j++) { float s = a[j]; t += s; }
        for (int j = 0; j < n; j++) { float q = t; t += q; }
        for (int j = 0; j < n; j++) { if (j > n - 3) break; float v = a[j]; s += v; }
        for (int j = 0; j < n; j++) { if (s > 3.0f) { break; } s += a[j]; }
        for (int j = 0; j < n; j++) { s += a[j]; if (j > 3) break; }
        for (int j = 0; j < n; j++) { if (j > 3) continue; s += a[j]; }
    }"""
    parsed = parse_text(src, "k.cu")
    loops: list[Any] = []

    def walk(node: Any) -> None:
        if node.type == "for_statement":
            loops.append(node)
        for c in node.named_children:
            walk(c)

    walk(parsed.tree.root_node)
    m = Machine.__new__(Machine)  # (the plan reads the program's text only)
    from migrator.cuda.interp.program import Program

    m.program, m.parsed = Program(parsed), parsed
    got = [widen.plan_of(m, lp) is not None for lp in loops]
    assert got == [True, False, False, False, False, False, False, True, True,
                   True, False, False, True, False, True, False, False, False]  # fmt: skip


TILE = """
// a register tile: each step of the inner loops writes its own element of a local array
// (`acc[i][j] = fmaf(ra[i], rb[j], acc[i][j])`); loops whose steps share an element, read
// another step's, reach it through a pointer or read it uninitialised run as the reference
__global__ void tile(const float* a, const float* b, float* c, float* d, int n) {
    float acc[4][4] = {0.0f};
    float ra[4], rb[4];
    for (int k = 0; k < n; k++) {
        for (int i = 0; i < 4; i++) ra[i] = a[(threadIdx.x * 4 + i) * n + k];
        for (int j = 0; j < 4; j++) rb[j] = b[k * 4 + j];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
    }
    float pair[2] = {0.0f, 0.0f};
    for (int j = 0; j < 4; j++) pair[j % 2] += rb[j];
    float run[4] = {1.0f, 0.0f, 0.0f, 0.0f};
    for (int j = 1; j < 4; j++) run[j] = run[j - 1] * 2.0f + ra[j];
    float* p = &acc[0][0];
    for (int j = 0; j < 3; j++) acc[0][j] = p[j + 1] + 1.0f;
    float u[4];
    for (int j = 0; j < 4; j++) u[j] += 1.0f;
    int k = 100;
    if (threadIdx.x < 3) { for (k = 0; k != 6; k += 2) pair[0] += rb[k / 2]; }
    int m = 50;
    for (m = 10; m > 0; m -= 3) pair[1] -= ra[m % 4];
    for (int j = 0; j < 4; j++) {  // a step's temporaries first (hgemm's smem indices)
        int jj = (j + 1) % 4;
        const float half_b = rb[jj] * 0.5f;
        acc[3][j] = fmaf(half_b, ra[jj], acc[3][j]);
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) c[(threadIdx.x * 4 + i) * 4 + j] = acc[i][j];
    d[threadIdx.x * 8] = pair[0];
    d[threadIdx.x * 8 + 1] = pair[1];
    d[threadIdx.x * 8 + 2] = run[3];
    d[threadIdx.x * 8 + 3] = u[2];
    d[threadIdx.x * 8 + 4] = (float)k;
    d[threadIdx.x * 8 + 5] = (float)m;
}
"""


@pytest.mark.parametrize("uninit", ["nan", "zero"])
def test_a_register_tiles_steps_each_write_their_own_element(
    krun: Runner, monkeypatch: pytest.MonkeyPatch, uninit: str
) -> None:
    maps = _logged(monkeypatch, "_widened_map")
    rng = np.random.default_rng(2)
    n, threads = 5, 8
    a, b = _both(krun, TILE, 1, threads, a=rng.standard_normal(threads * 4 * n).astype(np.float32),
                 b=rng.standard_normal(4 * n).astype(np.float32),
                 c=np.zeros(threads * 16, np.float32), d=np.zeros(threads * 8, np.float32), n=n,
                 _options={"uninit": uninit})  # fmt: skip
    assert not isinstance(a[1], str), a[1]
    _same(a, b)
    got = a[0]
    want = got["a"].reshape(threads, 4, n).astype(np.float64) @ got["b"].reshape(n, 4)
    np.testing.assert_allclose(got["c"].reshape(threads, 4, 4)[:, 1:3], want[:, 1:3], rtol=1e-5)
    d = got["d"].reshape(threads, 8)
    assert d[:, 4].tolist() == [6.0] * 3 + [100.0] * 5 and d[:, 5].tolist() == [-2.0] * threads
    # the tile's map loops widened at every step of k; `pair[j % 2]` (two steps on one
    # element) tried and undone, as is `u` where reading it uninitialised is reported
    assert maps.count(True) >= 6 * n and False in maps


def _same_tree(a: Any, b: Any, seen: set[tuple[int, int]]) -> bool:
    """Two traced values built alike: operations, operands, values and source rows."""
    from migrator.cuda.interp.traced import Sym

    if type(a) is not type(b):
        return False
    if not isinstance(a, Sym):
        return bool(a == b or (a != a and b != b))
    if (id(a), id(b)) in seen:
        return True
    seen.add((id(a), id(b)))
    if a.op != b.op or a.at != b.at or len(a.args) != len(b.args):
        return False
    if not (a.v == b.v or (a.v != a.v and b.v != b.v)):
        return False
    return all(_same_tree(x, y, seen) for x, y in zip(a.args, b.args, strict=True))


def test_a_traced_register_tile_is_widened_into_the_same_expressions(
    krun: Runner, widened_maps: list[bool]
) -> None:
    """In a traced run only map loops are widened (every value is made by the statement
    itself, each with its source row); the expressions match the step-by-step run's node for
    node, rows included."""
    from migrator.cuda.interp.traced import Sym

    n, threads = 3, 4

    def leaves(name: str, size: int) -> np.ndarray:
        out = np.empty(size, dtype=object)
        out[:] = [Sym.leaf(name, i, 0.5 * i - 1.0) for i in range(size)]
        return out

    a_in, b_in = leaves("a", threads * 4 * n), leaves("b", 4 * n)
    got = []
    for flag in (True, False):
        c = np.full(threads * 16, np.nan, dtype=object)
        d = np.full(threads * 8, np.nan, dtype=object)
        krun(TILE, grid=1, block=threads, a=a_in, b=b_in, c=c, d=d, n=n,
             options=InterpOptions(trace=True, races=False, widen=flag))  # fmt: skip
        got.append((c, d))
    seen: set[tuple[int, int]] = set()
    for x, y in zip(got[0], got[1], strict=True):
        assert all(_same_tree(p, q, seen) for p, q in zip(x.tolist(), y.tolist(), strict=True))
    assert widened_maps and any(widened_maps)
    assert isinstance(got[0][0][5], Sym) and got[0][0][5].op in ("+", "fma", "acc+fma")
