"""Pattern matchers: each corpus kernel lands in its family, with reasons; the rest is reported."""

from __future__ import annotations

from pathlib import Path

import pytest
from migrator.patterns.registry import (
    Classification,
    MatchResult,
    Priority,
    classify,
    matchers,
    register,
)

from migrator.cuda.frontend import analyze_file, analyze_text
from migrator.cuda.ir import Kernel, TranslationUnit

CORPUS = Path(__file__).resolve().parents[2] / "corpus"

EXPECT = {
    ("vector_add", "vector_add_kernel"): ("elementwise", "1d", "one thread per element"),
    ("saxpy", "saxpy_kernel"): ("elementwise", "1d", "grid-stride loop"),
    ("adamw", "adamw_kernel"): ("elementwise", "1d", "grid-stride loop"),
    ("gelu", "gelu_kernel"): ("elementwise", "1d", "math: tanhf"),
    ("gelu", "relu_kernel"): ("elementwise", "1d", "math: fmaxf"),
    ("scale_2d_pitch", "scale_2d_pitch_kernel"): ("elementwise", "2d", "leading dimension ld_in"),
    ("reduce_sum_shared", "reduce_sum_shared_kernel"): (
        "reduction",
        "block_partial",
        "shared_tree",
    ),
    ("reduce_warp_shuffle", "row_sum_warp_kernel"): ("reduction", "axis", "warp_shuffle"),
    ("softmax_row", "softmax_row_kernel"): ("rowwise", "softmax", "max, sum"),
    ("layernorm", "layernorm_kernel"): ("rowwise", "layernorm", "beta, gamma"),
    ("matmul_naive", "matmul_naive_kernel"): ("matmul", "naive", "A is row-major [M, K]"),
    ("matmul_tiled", "sgemm_tiled_kernel"): ("matmul", "shared_tiled", "alpha * acc + beta * C"),
    ("transpose_tiled", "transpose_tiled_kernel"): ("transpose", "shared_tiled", "padded"),
    ("stencil_1d", "stencil_1d_kernel"): ("stencil", "1d", "7 taps"),
    ("conv1d", "conv1d_same_kernel"): ("stencil", "1d", "weights from s_w (argument w)"),
    ("dot_atomic", "dot_atomic_kernel"): ("reduction", "atomic_total", "global accumulator"),
    ("conv2d_3x3", "conv2d_3x3_kernel"): ("stencil", "2d", "9 taps"),
    ("relu_half", "relu_half_kernel"): ("elementwise", "1d", "one thread per element"),
    ("silu_bf16", "silu_bf16_kernel"): ("elementwise", "1d", "grid-stride loop"),
    ("leaky_relu", "leaky_relu_kernel"): ("elementwise", "1d", "one thread per element"),
    ("hardswish", "hardswish_kernel"): ("elementwise", "1d", "one thread per element"),
    ("sgd_momentum", "sgd_momentum_kernel"): ("elementwise", "1d", "grid-stride loop"),
    ("bias_gelu_2d", "bias_gelu_2d_kernel"): ("elementwise", "2d", "2-D map"),
    ("log_softmax", "log_softmax_kernel"): ("rowwise", "log_softmax", "logf"),
    ("rmsnorm", "rmsnorm_kernel"): ("rowwise", "rmsnorm", "rsqrtf"),  # via a shared scalar
    ("batched_gemm", "batched_gemm_kernel"): ("matmul", "shared_tiled", "batched over blockIdx.z"),
    ("gemm_tn", "gemm_tn_kernel"): ("matmul", "naive", "A is transposed (stored [K, M])"),
    ("hgemm_bf16", "hgemm_bf16_kernel"): ("matmul", "naive", "A is row-major [M, K]"),
    ("transpose_naive", "transpose_naive_kernel"): ("transpose", "naive", "contiguous axis"),
    ("matmul_bias_relu", "matmul_bias_relu_kernel"): (
        "matmul",
        "shared_tiled",
        "fmaxf(acc + bias[col], 0.0f)",
    ),
    ("batched_transpose", "batched_transpose_kernel"): ("transpose", "shared_tiled", "shared tile"),
    ("gemv", "gemv_kernel"): ("reduction", "axis", "warp_shuffle"),
    # claimed by a family whose planner then reports what it cannot emit (C2N2006)
    ("row_max", "row_max_kernel"): ("reduction", "axis", "each block reading its row"),
    ("cross_entropy", "cross_entropy_fwd_kernel"): ("reduction", "axis", "max+sum"),
    ("l2_norm_sq", "l2_norm_sq_kernel"): ("reduction", "atomic_total", "global accumulator"),
}


# kept in the corpus for diagnostics: no family claims them, the fallback names them
UNSUPPORTED: dict[tuple[str, str], str | None] = {
    ("scan_block", "scan_block_kernel"): "C2N2004",
    ("histogram", "histogram_kernel"): "C2N2003",
    ("scan_warp", "scan_warp_kernel"): "C2N2004",  # __shfl_up_sync doubling in a helper
    ("bitonic_sort", "bitonic_sort_segments_kernel"): "C2N2005",  # halving inside doubling
    # a row gather by token id through a row pointer: no family, emitted from its lifted
    # program (indirect DMA)
    ("embedding", "embedding_fwd_kernel"): None,
    # no family claims them and no irregular structure is named: the migration's C2N2001
    # lists every family's reason (tests/test_migration.py)
    ("attention_fwd", "attention_fwd_kernel"): None,
    ("attention_causal_online", "attention_causal_online_kernel"): None,
    ("attention_mha", "attention_mha_kernel"): None,
    ("avgpool_2x2", "avgpool_2x2_kernel"): None,
    # the stencil matcher wants a tap loop over a loaded centre; these fill their halo tile
    # with guarded loads and complete from their lifted (zero-padded) window
    ("separable_rows", "separable_rows_kernel"): None,
    ("separable_cols", "separable_cols_kernel"): None,
    # a row program beside column sums by atomics: complete from its lifted program
    ("layernorm_backward", "layernorm_backward_kernel"): None,
    # rows added at token ids by atomics (and at positions): a scatter-add, from its lifted
    # program (atomic read-modify-write DMAs)
    ("embedding_backward", "embedding_bwd_kernel"): None,
    ("col_sum", "col_sum_kernel"): None,
    ("mean_rows_cg", "mean_rows_cg_kernel"): None,
    ("sigmoid_vec4", "sigmoid_vec4_kernel"): None,
    ("softmax_warp", "softmax_warp_kernel"): None,
    ("stencil_2d_5pt", "jacobi_5pt_kernel"): None,
    ("swiglu", "swiglu_kernel"): None,
    # (max, sum) pairs merged by comparing maxima, a label's one-hot row: lifted
    ("fused_classifier", "fused_classifier_kernel"): None,
}


@pytest.mark.parametrize(("stem", "kernel"), sorted(UNSUPPORTED))
def test_unsupported_corpus_kernels_are_reported(stem: str, kernel: str) -> None:
    c = _classify_corpus(stem, kernel)
    assert c.winner is None
    expected = UNSUPPORTED[(stem, kernel)]
    assert expected is None or expected in _ids(c)
    assert all(v.reasons for v in c.verdicts)  # every family says why not


def _classify_corpus(stem: str, kernel: str) -> Classification:
    tu = analyze_file(CORPUS / f"{stem}.cu")
    return classify(tu, tu.kernel(kernel))


@pytest.mark.parametrize(("stem", "kernel"), sorted(EXPECT))
def test_corpus_kernel_family(stem: str, kernel: str) -> None:
    family, variant, reason = EXPECT[(stem, kernel)]
    c = _classify_corpus(stem, kernel)
    assert c.winner is not None, [v.reasons for v in c.verdicts]
    assert (c.winner.family, c.winner.variant) == (family, variant)
    assert any(reason in r for r in c.winner.reasons), c.winner.reasons
    # every other family says why it did not match
    for v in c.verdicts:
        assert v.reasons, v.family


def test_every_global_corpus_kernel_is_expected() -> None:
    for cu in CORPUS.glob("*.cu"):
        for k in analyze_file(cu).global_kernels:
            key = (cu.stem, k.name)
            assert key in EXPECT or key in UNSUPPORTED, f"add an expectation for {key}"


def one(src: str) -> tuple[TranslationUnit, Kernel]:
    tu = analyze_text(src, "t.cu")
    return tu, tu.global_kernels[0]


def test_transposed_operand_layouts() -> None:
    tu, k = one(
        "__global__ void mm(const float* A, const float* B, float* C, int M, int N, int K) {\n"
        "  int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
        "  int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (row < M && col < N) {\n    float acc = 0.0f;\n"
        "    for (int k = 0; k < K; ++k) acc += A[k * M + row] * B[col * K + k];\n"
        "    C[row * N + col] = acc;\n  }\n}\n"
    )
    c = classify(tu, k)
    assert c.family == "matmul"
    assert c.winner.plan["a_layout"] == "transposed (stored [K, M])"  # type: ignore[union-attr,index]
    assert c.winner.plan["b_layout"] == "transposed (stored [N, K])"  # type: ignore[union-attr,index]


def test_broadcast_row_vector_is_elementwise() -> None:
    tu, k = one(
        "__global__ void add_bias(const float* x, const float* bias, float* y, int R, int C) {\n"
        "  int r = blockIdx.y * blockDim.y + threadIdx.y;\n"
        "  int c = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (r < R && c < C) y[r * C + c] = fmaxf(x[r * C + c] + bias[c], 0.0f);\n}\n"
    )
    c = classify(tu, k)
    assert (c.family, c.winner.variant) == ("elementwise", "2d")  # type: ignore[union-attr]
    assert "row-vector broadcast" in c.winner.plan["inputs"]["bias"]  # type: ignore[union-attr,index]


def test_a_store_under_a_non_bounds_condition_is_not_elementwise() -> None:
    """`if (t > t2) x[i] = -INFINITY; else x[i] *= s;`: a tile program that stores every element
    would drop the condition; the lifter takes such kernels (a select by coordinates)."""
    tu, k = one(
        "__global__ void mask(float* x, float s, int T, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) {\n"
        "    int t = i % T, t2 = (i / T) % T;\n"
        "    if (t > t2) { x[i] = -INFINITY; } else { x[i] *= s; }\n"
        "  }\n}\n"
    )
    c = classify(tu, k)
    assert c.family != "elementwise"
    reasons = next(v.reasons for v in c.verdicts if v.family == "elementwise")
    assert any("under `t > t2`" in r for r in reasons)


def _ids(c: Classification) -> set[str]:
    return {d.id for v in c.verdicts for d in v.diagnostics}


def test_histogram_is_reported_not_matched() -> None:
    tu, k = one(
        "__global__ void hist(const int* keys, int* bins, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) atomicAdd(&bins[keys[i]], 1);\n}\n"
    )
    c = classify(tu, k)
    assert c.winner is None and "C2N2003" in _ids(c)


def test_a_column_reduction_per_block_is_not_block_partials() -> None:
    """cuda-samples' histogram merge: block b sums `partial[b + i * 256]`, a strided column,
    which the block-partial plan (one contiguous chunk per block) would compute wrongly."""
    tu, k = one(
        "__global__ void merge(unsigned* out, const unsigned* partial, unsigned count) {\n"
        "  unsigned sum = 0;\n"
        "  for (unsigned i = threadIdx.x; i < count; i += 256)\n"
        "    sum += partial[blockIdx.x + i * 256];\n"
        "  __shared__ unsigned data[256];\n  data[threadIdx.x] = sum;\n"
        "  for (unsigned s = 128; s > 0; s >>= 1) {\n    __syncthreads();\n"
        "    if (threadIdx.x < s) data[threadIdx.x] += data[threadIdx.x + s];\n  }\n"
        "  if (threadIdx.x == 0) out[blockIdx.x] = data[0];\n}\n"
    )
    c = classify(tu, k)
    assert c.winner is None or c.winner.family != "reduction"
    why = next(r for r in c.verdicts if r.family == "reduction")
    assert "strided (column) reduction" in " ".join(why.reasons)


def test_scan_is_reported_not_matched() -> None:
    tu, k = one(
        "__global__ void scan(const float* in, float* out, int n) {\n"
        "  __shared__ float t[256];\n  int tid = threadIdx.x;\n"
        "  t[tid] = tid < n ? in[tid] : 0.0f;\n  __syncthreads();\n"
        "  for (int off = 1; off < 256; off *= 2) {\n"
        "    float v = tid >= off ? t[tid - off] : 0.0f;\n    __syncthreads();\n"
        "    t[tid] += v;\n    __syncthreads();\n  }\n"
        "  if (tid < n) out[tid] = t[tid];\n}\n"
    )
    c = classify(tu, k)
    assert c.winner is None and "C2N2004" in _ids(c)


def test_a_scan_in_a_helper_over_the_kernels_shared_array_is_named() -> None:
    """The doubling loop in a `__device__` helper the kernel hands its shared array (a
    Hillis-Steele scan of unsigned counts: `t = s[pos] + s[pos - offset]`): the fallback
    names the scan (C2N2004, with what to do on Trainium) where it named nothing."""
    src = (
        "__device__ unsigned inclusive(unsigned v, volatile unsigned* s, unsigned size) {\n"
        "  unsigned pos = 2 * threadIdx.x - (threadIdx.x & (size - 1));\n"
        "  s[pos] = 0;\n  pos += size;\n  s[pos] = v;\n"
        "  for (unsigned offset = 1; offset < size; offset <<= 1) {\n"
        "    __syncthreads();\n    unsigned t = s[pos] + s[pos - offset];\n"
        "    __syncthreads();\n    s[pos] = t;\n  }\n  return s[pos];\n}\n"
        "__global__ void scan_counts(unsigned* out, const unsigned* in) {\n"
        "  __shared__ unsigned buf[512];\n"
        "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  out[i] = inclusive(in[i], buf, blockDim.x) - in[i];\n}\n"
    )
    tu = analyze_text(src, "t.cu")
    c = classify(tu, tu.kernel("scan_counts"))
    assert c.winner is None and "C2N2004" in _ids(c)
    # a tree reduction's doubling loop reads upward (`s[tid + s]`): no scan named
    reduction = src.replace("s[pos - offset]", "s[pos + offset]")
    tu = analyze_text(reduction, "t.cu")
    assert "C2N2004" not in _ids(classify(tu, tu.kernel("scan_counts")))


def _hist_message(c: Classification) -> str:
    return next(d.message for v in c.verdicts for d in v.diagnostics if d.id == "C2N2003")


def test_counters_a_helper_increments_at_a_loaded_key_are_a_histogram() -> None:
    """Sub-histograms of per-thread byte counters (no atomics) or per-warp atomics, the key
    passed down through two helpers (`add_word(base, w)` -> `add_byte(base, (w >> 8) & 63)`):
    the fallback names the histogram (C2N2003) where it named nothing; a reduction helper
    that adds at the thread's own index (`s[tid] += s[tid + 32]`) is no histogram."""
    src = (
        "typedef unsigned char uchar;\n"
        "__device__ void add_byte(uchar* base, unsigned key) { base[key * 64]++; }\n"
        "__device__ void add_word(uchar* base, unsigned w) {\n"
        "  add_byte(base, w & 63U);\n  add_byte(base, (w >> 8) & 63U);\n}\n"
        "__global__ void sub_hist(unsigned* partial, const unsigned* words, unsigned n) {\n"
        "  __shared__ uchar counts[64 * 64];\n"
        "  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) counts[i] = 0;\n"
        "  __syncthreads();\n"
        "  for (unsigned i = blockIdx.x * 64 + threadIdx.x; i < n; i += gridDim.x * 64) {\n"
        "    unsigned w = words[i];\n    add_word(counts + threadIdx.x, w);\n  }\n"
        "  __syncthreads();\n  unsigned sum = 0;\n"
        "  for (int t = 0; t < 64; ++t) sum += counts[threadIdx.x * 64 + t];\n"
        "  partial[blockIdx.x * 64 + threadIdx.x] = sum;\n}\n"
    )
    tu = analyze_text(src, "t.cu")
    c = classify(tu, tu.kernel("sub_hist"))
    assert c.winner is None and "C2N2003" in _ids(c)
    assert _hist_message(c).startswith("increment (per-thread counters, no atomics) into base")
    atomic = src.replace("base[key * 64]++;", "atomicAdd((unsigned*)base + key, 1u);")
    tu = analyze_text(atomic, "t.cu")
    assert _hist_message(classify(tu, tu.kernel("sub_hist"))).startswith("atomic add into base")
    warp_sum = (
        "__device__ void warp_sum(volatile float* s, int tid) {\n"
        "  s[tid] += s[tid + 32];\n  s[tid] += s[tid + 16];\n}\n"
        "__global__ void block_sum(float* out, const float* x) {\n"
        "  __shared__ float s[64];\n  int tid = threadIdx.x;\n"
        "  s[tid] = x[blockIdx.x * 64 + tid];\n  __syncthreads();\n"
        "  if (tid < 32) warp_sum(s, tid);\n  if (tid == 0) out[blockIdx.x] = s[0];\n}\n"
    )
    tu = analyze_text(warp_sum, "t.cu")
    assert "C2N2003" not in _ids(classify(tu, tu.kernel("block_sum")))


def test_gather_is_reported_not_matched() -> None:
    tu, k = one(
        "__global__ void gather(const float* x, const int* idx, float* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) y[i] = x[idx[i]];\n}\n"
    )
    c = classify(tu, k)
    assert c.winner is None and "C2N2002" in _ids(c)


def test_user_matcher_takes_over_by_priority() -> None:
    class Everything:
        family = "user_everything"
        priority: Priority = "takeover"

        def match(self, tu: TranslationUnit, k: Kernel) -> MatchResult:
            return MatchResult(
                family=self.family, kernel=k.name, matched=True, reasons=["user rule"]
            )

    before = list(matchers())
    register(Everything())
    try:
        c = _classify_corpus("vector_add", "vector_add_kernel")
        assert c.family == "user_everything"
    finally:
        from migrator.patterns import registry

        registry._MATCHERS[:] = before
    assert _classify_corpus("vector_add", "vector_add_kernel").family == "elementwise"
