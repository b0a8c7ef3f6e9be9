"""Lane compaction (`compact.py`) is invisible: the fast path equals the all-lanes reference.

`MIN_LANES` is lowered to 0 so the small corpus launches compact too; every corpus kernel must
give bit-identical outputs and the same findings with `compact=True` and `compact=False`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from migrator.contract import load_spec
from migrator.cuda.interp import InterpOptions, RunResult, compact
from migrator.cuda.interp.spec_run import run_spec_full

CORPUS = Path(__file__).resolve().parents[3] / "corpus"
SPECS = sorted(CORPUS.glob("*.toml"))
Runner = Callable[..., RunResult]


@pytest.fixture
def always_compact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compact, "MIN_LANES", 0)
    monkeypatch.setattr(compact, "MIN_LOOP_LANES", 0)


def _run_both(krun: Runner, src: str, **kw: object) -> tuple[dict, dict]:
    out = []
    for flag in (True, False):
        args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        res = krun(src, options=InterpOptions(compact=flag), **args)
        out.append((args, res))
    return out[0], out[1]  # type: ignore[return-value]


@pytest.mark.parametrize("spec_path", SPECS, ids=[p.stem for p in SPECS])
def test_corpus_same_with_and_without_compaction(spec_path: Path, always_compact: None) -> None:
    spec = load_spec(spec_path)
    sizes = spec.all_size_sets()[0]
    fast = run_spec_full(spec, sizes, seed=3, options=InterpOptions(compact=True))
    slow = run_spec_full(spec, sizes, seed=3, options=InterpOptions(compact=False))
    for a, b in zip(fast.outputs, slow.outputs, strict=True):
        np.testing.assert_array_equal(a, b)
    assert fast.result.findings == slow.result.findings
    assert fast.result.thread_statements == slow.result.thread_statements


TREE = """
__global__ void tree(const float* in, float* out, int* hits) {
  __shared__ float s[256];
  unsigned tid = threadIdx.x;
  float mine = in[blockIdx.x * 256 + tid];
  int seen = 0;
  s[tid] = mine;
  __syncthreads();
  for (unsigned st = 128; st > 0; st >>= 1) {
    if (tid < st) { s[tid] += s[tid + st]; seen += 1; mine = mine * 0.5f; }
    __syncthreads();
  }
  if (tid < 3) { for (int k = 0; k < 4; ++k) { if (k == tid) break; atomicAdd(hits, 1); } }
  out[blockIdx.x * 256 + tid] = mine + (float)seen;
  if (tid == 0) out[blockIdx.x * 256] = s[0];
}"""


def test_tree_reduction_compacted_matches_reference(krun: Runner, always_compact: None) -> None:
    x = np.random.default_rng(5).standard_normal(4 * 256).astype(np.float32)
    (fa, fr), (sa, sr) = _run_both(
        krun,
        TREE,
        kernel="tree",
        grid=4,
        block=256,
        **{"in": x, "out": np.zeros(4 * 256, np.float32), "hits": np.zeros(1, np.int32)},
    )
    np.testing.assert_array_equal(fa["out"], sa["out"])
    assert fa["hits"][0] == sa["hits"][0] == 4 * (0 + 1 + 2)  # break at k == tid
    np.testing.assert_allclose(
        fa["out"][::256], x.reshape(4, 256).sum(axis=1), rtol=1e-5, atol=1e-5
    )
    # variables written under a few lanes keep the other lanes' values
    tid = np.arange(1, 256)
    k = np.array([sum(t < s for s in (128, 64, 32, 16, 8, 4, 2, 1)) for t in tid])
    want = x.reshape(4, 256)[:, 1:] * np.float32(0.5) ** k + k
    np.testing.assert_array_equal(fa["out"].reshape(4, 256)[:, 1:], want.astype(np.float32))
    assert fr.thread_statements == sr.thread_statements


def test_out_of_bounds_in_compacted_statement_names_the_real_thread(
    krun: Runner, always_compact: None
) -> None:
    from migrator.cuda.interp.findings import OutOfBoundsError

    src = """
    __global__ void k(float* a) {
      int t = threadIdx.x;
      if (t == 200) a[t + 1000] = 1.0f;
    }"""
    with pytest.raises(OutOfBoundsError, match=r"thread=\(200, 0, 0\)|\(200, 0, 0\)"):
        krun(src, "k", 1, 256, a=np.zeros(256, np.float32))


def test_unsafe_statements_are_not_compacted(always_compact: None) -> None:
    from migrator.cuda.interp.runner import program_for
    from migrator.cuda.parse import parse_text

    src = """
    __device__ float twice(float v) { return 2.0f * v; }
    __global__ void k(float* a) {
      int t = threadIdx.x;
      if (t < 4) a[t] = twice(a[t]) + twice(1.0f);
      if (t < 4) a[t] = __shfl_down_sync(0xffffffff, a[t], 1);
      if (t < 4) return;
      for (int i = 0; i < 3; ++i) { if (t < 2) continue; a[t] += 1.0f; }
    }"""
    prog = program_for(parse_text(src, "k.cu"))
    body = prog.kernel("k").body

    class _M:
        program = prog
        parsed = prog.parsed

    stmts = [c for c in body.named_children if c.type in ("if_statement", "for_statement")]
    ok = [compact.safety(_M, s).ok for s in stmts]  # type: ignore[arg-type]
    assert ok == [True, False, False, True]
    loop_body = stmts[3].child_by_field_name("body")
    assert loop_body is not None
    inner_if = loop_body.named_children[0]
    assert compact.safety(_M, inner_if).ok is False  # `continue` leaves the statement


def test_local_arrays_inside_and_outside_compacted_statements(
    krun: Runner, always_compact: None
) -> None:
    src = """
    __global__ void k(float* out) {
      int t = threadIdx.x;
      float outer[3] = {1.0f, 2.0f, 3.0f};
      if (t % 16 == 3) {
        float inner[2];
        inner[0] = t; inner[1] = 2 * t;
        outer[t % 3] += inner[0] + inner[1];
      }
      out[t] = outer[0] * 100.0f + outer[1] * 10.0f + outer[2];
    }"""
    (fa, fr), (sa, sr) = _run_both(
        krun, src, kernel="k", grid=2, block=64, out=np.zeros(64, np.float32)
    )
    np.testing.assert_array_equal(fa["out"], sa["out"])
    t = np.arange(64)
    want = np.full(64, 123.0, np.float32)
    for lane in t[t % 16 == 3]:
        o = np.array([1.0, 2.0, 3.0])
        o[lane % 3] += 3 * lane
        want[lane] = o[0] * 100 + o[1] * 10 + o[2]
    np.testing.assert_array_equal(fa["out"], want)
    assert fr.findings == sr.findings == []


LONG_TAIL = """
struct Pack { float v[4]; __device__ float& operator[](int k) { return v[k]; } };
__device__ Pack load4(const float* p) { return *reinterpret_cast<const Pack*>(p); }
__global__ void tail_sum(const float* x, float* dst, int n, int m) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i < n) {
    Pack acc;
    for (int k = 0; k < 4; ++k) acc[k] = 0.0f;
    for (int l = 0; l < m; ++l) {
      Pack s = load4(x + i + n * l);
      for (int k = 0; k < 4; ++k) acc[k] += s[k];
    }
    for (int k = 0; k < 4; ++k) dst[i + k] = acc[k];
  }
}"""


def test_a_loop_of_few_lanes_in_a_small_launch_runs_compacted(
    krun: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two of 256 lanes looping long (a launch smaller than MIN_LANES): the loop is gathered
    once and runs over its own lanes; the sums are the reference's, bit for bit."""
    calls: list[int] = []
    real = compact.try_compacted

    def counting(m: object, node: object, mask: np.ndarray) -> bool:
        done = real(m, node, mask)  # type: ignore[arg-type]
        calls.append(int(done))
        return done

    monkeypatch.setattr(compact, "try_compacted", counting)
    n, m = 8, 50
    x = np.random.default_rng(2).standard_normal(n * m).astype(np.float32)
    (fa, fr), (sa, sr) = _run_both(krun, LONG_TAIL, kernel="tail_sum", grid=1, block=256,
                                   x=x, dst=np.zeros(n, np.float32), n=n, m=m)  # fmt: skip
    assert any(calls)
    np.testing.assert_array_equal(fa["dst"], sa["dst"])
    np.testing.assert_allclose(fa["dst"], x.reshape(m, n).sum(axis=0), rtol=1e-5)
    assert fr.thread_statements == sr.thread_statements
