"""The numerics policy and metrics (unit level)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from migrator.contract import load_spec
from migrator.score.numerics import (
    FLOOR,
    K_NORM,
    compare,
    error_ratio,
    policy_table,
    spacing,
    ulp_distance,
    ulp_histogram,
)
from migrator.score.protocol import DISTRIBUTIONS, hidden_size_sets, plan_trials

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def test_ulp_distance_counts_representable_steps() -> None:
    x = np.array([1.0, -1.0, 0.0], dtype=np.float32)
    y = np.nextafter(x, np.float32(np.inf))
    assert ulp_distance(x, y, "float32").tolist() == [1, 1, 1]
    assert ulp_distance(np.array([0.0]), np.array([-0.0]), "float32").tolist() == [0]
    b = np.array([1.0, 1.0078125])  # one bf16 step at 1.0
    assert ulp_distance(b[:1], b[1:], "bfloat16").tolist() == [1]
    assert spacing(1.0, "float32") == pytest.approx(2.0**-23)
    assert spacing(1.0, "bfloat16") == pytest.approx(2.0**-7)


def test_histogram_buckets_cover_everything() -> None:
    u = np.array([0, 1, 2, 3, 4, 16, 200, 70000])
    h = ulp_histogram(u)
    assert sum(h.values()) == u.size and h["3-4"] == 2 and h[">65536"] == 1


def test_equal_outputs_pass_and_a_bug_fails() -> None:
    rng = np.random.default_rng(0)
    truth = rng.standard_normal(1000)
    oracle = truth.astype(np.float32)
    assert compare(oracle, oracle, truth, "float32").ok
    wrong = oracle.copy()
    wrong[-1] += 1.0  # one bad element, e.g. a dropped tail
    c = compare(wrong, oracle, truth, "float32")
    assert not c.ok and c.beyond == 1


def test_reordered_sum_passes_relative_to_cuda_error() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 4097)).astype(np.float32)
    truth = x.astype(np.float64).sum(axis=1)
    seq = np.zeros(64, np.float32)
    for j in range(x.shape[1]):  # sequential order
        seq += x[:, j]
    tree = x.sum(axis=1, dtype=np.float32)  # numpy: pairwise
    assert compare(seq, tree, truth, "float32").ok
    assert compare(tree, seq, truth, "float32").ok


def test_nonfinite_only_where_the_original_is_nonfinite() -> None:
    truth = np.array([1.0, 2.0, 3.0])
    oracle = np.array([1.0, np.inf, 3.0], dtype=np.float32)
    assert compare(np.array([1.0, np.nan, 3.0], np.float32), oracle, truth, "float32").ok
    c = compare(np.array([np.nan, 2.0, 3.0], np.float32), oracle, truth, "float32")
    assert not c.ok and c.nonfinite_mismatch == 1


def test_reproducing_the_original_where_the_truth_overflows_is_not_penalised() -> None:
    truth = np.array([1.0, 1e60, 3.0])  # the float64 truth of element 1 overflows float32
    oracle = np.array([1.0, 0.0, 3.0], dtype=np.float32)  # fp32 CUDA: NaN, then fmaxf(., 0)
    assert compare(np.array([1.0, 0.0, 3.0], np.float32), oracle, truth, "float32").ok
    assert not compare(np.array([1.0, 5.0, 3.0], np.float32), oracle, truth, "float32").ok


def test_low_precision_policy_and_error_ratio() -> None:
    rng = np.random.default_rng(2)
    truth = rng.standard_normal(4096)
    import ml_dtypes

    bf = truth.astype(ml_dtypes.bfloat16)
    fp32 = truth.astype(np.float32).astype(ml_dtypes.bfloat16)
    assert compare(bf, fp32, truth, "bfloat16").ok
    assert error_ratio(bf.astype(np.float64), bf.astype(np.float64), truth) == pytest.approx(1.0)
    table = policy_table()
    assert table["k_norm"] == K_NORM and set(FLOOR) <= {k.split(".")[1] for k in table if "." in k}


def test_hidden_shapes_are_ragged_and_unpublished() -> None:
    spec = load_spec(CORPUS / "softmax_row.toml")
    hidden = hidden_size_sets(spec, 0)
    published = spec.all_size_sets()
    for h in hidden:
        assert h not in published
        assert all(v % 128 and v % 256 and v % 2 for v in h.values())
    plans = plan_trials(spec, seed=0, seeds=5)
    assert len(plans) == 30 and len({p.seed for p in plans}) == 30
    assert {tuple(p.sizes.items()) for p in plans if p.hidden} == {tuple(h.items()) for h in hidden}


def test_hidden_shapes_obey_the_relations_the_kernel_assumes() -> None:
    """A kernel of whole tiles (`N % 1024 == 0`) is never scored at a ragged N: hidden sets
    in the scorer and in dataset records are drawn, then adjusted to obey the relations."""
    from migrator.dataset.tasks import hidden_sizes

    base = load_spec(CORPUS / "softmax_row.toml")
    tiles = {n: 64 for n in base.sizes}
    rels = [f"{n} % {t} == 0" for n, t in tiles.items()]
    sizes = {n: 4 * t for n, t in tiles.items()}
    spec = base.model_copy(update={"relations": rels, "sizes": sizes, "size_sets": []})
    for drawn in (hidden_size_sets(spec, 0), hidden_sizes(spec)):
        assert drawn and all(v % tiles[n] == 0 for h in drawn for n, v in h.items())
        assert all(not spec.broken_relations(h) for h in drawn)
    assert all(p.sizes[n] % 64 == 0 for p in plan_trials(spec, seeds=2) for n in tiles)


IMUL = """__global__ void imul(const unsigned int* x, unsigned int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 3u + 7u;
}
void launch(const unsigned int* x, unsigned int* y, int n) {
  imul<<<(n + 255) / 256, 256>>>(x, y, n);
}
"""


def test_integer_outputs_are_compared_exactly(tmp_path: Path) -> None:
    """An unsigned output (it once crashed the scorer): exact, in the output's own type, so a
    value off by one fails and 64-bit values are not rounded through float64."""
    from migrator.migration import migrate
    from migrator.score import score
    from migrator.score.numerics import compare

    big = np.array([1, 2**53 + 1, 2**63 - 1], np.int64)
    assert compare(big.copy(), big, big.astype(np.float64), "int64").ok
    off = big.copy()
    off[1] -= 1  # equal to big[1] in float64
    assert not compare(off, big, big.astype(np.float64), "int64").ok
    frac = np.array([1.0, 2.5]), np.array([1, 2], np.int32)
    assert compare(frac[0], frac[1], frac[1].astype(float), "int32").beyond == 1
    cu = tmp_path / "imul.cu"
    cu.write_text(IMUL)
    m = migrate(cu, out_dir=tmp_path / "out")
    assert m.kernels[0].status == "complete", m.kernels[0].diagnostics
    nki = tmp_path / "out" / "imul_nki.py"
    r = score(cu, nki, seeds=1)
    assert r.verdict == "pass", r.summary
    wrong = tmp_path / "wrong_nki.py"
    text = nki.read_text()
    body = text[text.index("@nki.jit") :]  # the kernel, not its docstring
    mutated = body.replace("operand1=7", "operand1=8").replace("nl.add(x, 7)", "nl.add(x, 8)")
    assert mutated != body
    wrong.write_text(text.replace(body, mutated))
    assert score(cu, wrong, seeds=1).verdict == "fail"


def test_constant_output_needs_trials_with_different_inputs() -> None:
    """C2N4023 compares trials whose inputs differ; two trials with the same inputs (whose
    oracle outputs may still differ, e.g. in an atomic's order) prove nothing."""
    from types import SimpleNamespace

    from migrator.score.protocol import Oracle, TrialPlan
    from migrator.score.scorer import _constant_outputs

    spec = load_spec(CORPUS / "vector_add.toml")
    x = {"a": np.ones(4, np.float32), "b": np.ones(4, np.float32)}
    plans = [TrialPlan(i, i, "normal", {"n": 4}, False, True) for i in range(2)]
    same = [Oracle(inputs=x, cuda=[np.full(4, float(i), np.float32)]) for i in range(2)]
    box = SimpleNamespace(outputs={0: [np.zeros(4, np.float32)], 1: [np.zeros(4, np.float32)]})
    assert _constant_outputs(spec, plans, same, box) == []
    other = {"a": np.full(4, 2, np.float32), "b": np.ones(4, np.float32)}
    differ = [same[0], Oracle(inputs=other, cuda=[np.full(4, 1.0, np.float32)])]
    assert [f.rule for f in _constant_outputs(spec, plans, differ, box)] == ["C2N4023"]


def test_an_oracle_that_cannot_run_is_named_not_the_candidate(tmp_path: Path) -> None:
    """A kernel the interpreter refuses (inline PTX): the verdict is an error that says the
    oracle is the problem; the candidate is not graded."""
    from migrator.score import score

    cu = tmp_path / "k.cu"
    cu.write_text(
        "__global__ void k(const float* x, float* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        '  unsigned lane; asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));\n'
        "  if (i < n) y[i] = x[i] * 2.0f + (float)(lane & 0);\n}\n"
        "void launch(const float* x, float* y, int n) { k<<<(n + 255) / 256, 256>>>(x, y, n); }\n"
    )
    cand = tmp_path / "cand.py"
    cand.write_text(
        "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n\n\n"
        "@nki.jit\ndef k(x):\n"
        "    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
        "    return y\n"
    )
    r = score(cu, cand, seeds=1)
    assert r.verdict == "error" and "could not be run as the oracle" in r.summary
    assert any(f.rule == "C2N4015" and "asm" in f.message for f in r.findings)


def test_a_distribution_pattern_is_named_only_where_it_is_one() -> None:
    """C2N4044 ("fails for X inputs, passes the others") only when every failure is in that
    distribution and the others all pass; never when most trials fail."""
    from migrator.score.fidelity import failure_pattern_findings
    from migrator.score.models import Trial

    def trials(failing: set[str], extra_fail: int = 0) -> list[Trial]:
        out = []
        for i in range(30):
            d = DISTRIBUTIONS[i % len(DISTRIBUTIONS)]
            bad = d in failing or i < extra_fail
            out.append(Trial(index=i, seed=i, distribution=d, sizes={"N": 9}, hidden=False,
                             ragged=True, status="mismatch" if bad else "ok"))  # fmt: skip
        return out

    found = failure_pattern_findings(trials({"near_overflow"}))
    assert [f.rule for f in found] == ["C2N4044"] and "near_overflow" in found[0].message
    most = failure_pattern_findings(trials({"near_overflow"}, 25))
    assert "C2N4044" not in {f.rule for f in most}


ROW_SUM = """__global__ void row_sum(const float* x, float* y, int R, int C) {
  __shared__ float part[256];
  const float* row = x + (size_t)blockIdx.x * C;
  float s = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) s += row[c];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = part[0];
}
void launch(const float* x, float* y, int R, int C) { row_sum<<<R, 256>>>(x, y, R, C); }
"""


def test_near_overflow_inputs_keep_every_summation_order_finite(tmp_path: Path) -> None:
    """A correct row sum over 4097 columns: near-overflow inputs once overflowed in the NKI
    kernel's order where CUDA's per-lane partials did not (a false fail); they are now scaled
    by the terms summed, so every order stays finite."""
    import re

    from migrator.migration import migrate
    from migrator.score import score

    cu = tmp_path / "row_sum.cu"
    cu.write_text(ROW_SUM)
    k = migrate(cu, out_dir=tmp_path / "out", check=False).kernels[0]
    assert k.status == "complete"
    spec = tmp_path / "out" / "row_sum.inferred.toml"
    text = spec.read_text()
    spec.write_text(re.sub(r"(\[sizes\]\nC = )\d+", r"\g<1>4097", text))
    r = score(cu, k.nki_file, spec=spec, seeds=5, distributions=("near_overflow",), reference=None)
    assert r.verdict == "pass" and r.numerics is not None and r.numerics.passed == 5, r.summary


def test_output_elements_cuda_never_writes_are_not_required(tmp_path: Path) -> None:
    """A pitched output whose padding CUDA never writes: a candidate that skips the padding
    too passes; one that also skips an element CUDA writes fails with C2N4040."""
    from migrator.score import score

    data = Path(__file__).resolve().parent / "data" / "pitch_padding"
    good = data / "pad_skips_padding_nki.py"
    ok = score(data / "pad.cu", good, seeds=1, reference=None)
    assert ok.verdict == "pass", (ok.summary, [f.message for f in ok.findings])
    text = good.read_text()
    assert "(i_f < C)" in text
    wrong = tmp_path / "pad_skips_a_column_nki.py"  # the last real column is never written
    wrong.write_text(text.replace("(i_f < C)", "(i_f < C - 1)"))
    bad = score(data / "pad.cu", wrong, seeds=1, reference=None)
    assert bad.verdict == "fail" and "C2N4040" in bad.rule_ids()
