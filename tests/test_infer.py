"""Spec inference: without a sidecar, shapes, sizes and the launch come from the CUDA source."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from migrator.contract import load_spec, make_inputs
from migrator.cuda.frontend import analyze_file
from migrator.cuda.interp import run_spec
from migrator.infer import InferenceError, infer_spec, to_toml
from migrator.infer.measure import (
    DEFAULT_ELEMENTS,
    MAX_THREADS,
    SEQUENTIAL_WORK,
    SET_ELEMENTS,
    WORK_BUDGET,
    _cap_elements,
    _cap_threads,
    _cap_work,
    _halve_until,
)
from migrator.lift import lift_task
from migrator.migration import migrate

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
INFERABLE = [
    "vector_add", "saxpy", "scale_2d_pitch", "softmax_row", "layernorm", "matmul_naive",
    "reduce_sum_shared", "reduce_warp_shuffle", "transpose_tiled", "stencil_1d", "dot_atomic",
    "matmul_tiled", "conv2d_3x3", "gelu", "relu_half", "leaky_relu", "hardswish", "sgd_momentum",
    "bias_gelu_2d", "log_softmax", "transpose_naive", "matmul_bias_relu", "row_max", "rmsnorm",
    "adamw",
]  # fmt: skip


@pytest.mark.parametrize("stem", INFERABLE)
def test_inferred_shapes_match_the_hand_written_spec(stem: str) -> None:
    written = load_spec(CORPUS / f"{stem}.toml")
    tu = analyze_file(CORPUS / f"{stem}.cu")
    inferred = infer_spec(tu, tu.kernel(written.kernel.name))
    sizes = written.sizes
    # the same tensors (by CUDA parameter) with the same extents at the written spec's sizes,
    # once the inferred size names are bound through the kernel's scalar arguments
    bind = {s.cuda_param: written.scalar_value(s, sizes) for s in written.scalars if s.size}
    inferred_sizes = {n: bind.get(n, v) for n, v in inferred.sizes.items()}
    for t in written.tensors:
        it = next(x for x in inferred.tensors if x.cuda_param == t.cuda_param)
        assert it.role == t.role
        assert inferred.shape_of(it, inferred_sizes) == written.shape_of(t, sizes), t.name
    assert inferred.launch_config(inferred_sizes) == written.launch_config(sizes)


@pytest.mark.parametrize("stem", INFERABLE)
def test_migration_without_sidecar_is_complete_and_checked(stem: str, tmp_path: Path) -> None:
    shutil.copy(CORPUS / f"{stem}.cu", tmp_path / f"{stem}.cu")
    spec = load_spec(CORPUS / f"{stem}.toml")
    m = migrate(tmp_path / f"{stem}.cu", kernel=spec.kernel.name, out_dir=tmp_path / "out")
    (k,) = m.kernels
    assert k.status == "complete", [d.render() for d in k.diagnostics]
    assert "C2N2010" in {d.id for d in k.diagnostics}
    assert k.check is not None and k.check.ok and len(k.check.sizes) == 3
    inferred = tmp_path / "out" / f"{spec.kernel.name.removesuffix('_kernel')}.inferred.toml"
    assert load_spec(inferred).kernel.name == spec.kernel.name  # the written sidecar loads


def test_inference_says_what_it_could_not_infer(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text(
        "__global__ void k(float* x, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] = 1.0f;\n}\n"
    )
    tu = analyze_file(src)
    with pytest.raises(InferenceError, match="no launch of k"):
        infer_spec(tu, tu.kernel("k"))
    m = migrate(src, out_dir=tmp_path)
    assert any(d.id == "C2N2009" and "no launch" in d.message for d in m.kernels[0].diagnostics)


def test_typedef_types_casts_and_a_block_size_parameter(tmp_path: Path) -> None:
    """Element types behind a typedef, `(long)`/`(size_t)` casts at the launch and a host
    `block_size` parameter (a launch choice: 256 in every size set, never a problem size)."""
    for typedef, dtype in (("float", "float32"), ("__nv_bfloat16", "bfloat16")):
        src = tmp_path / f"scale_{dtype}.cu"
        src.write_text(
            f"typedef {typedef} floatX;\n"
            "__global__ void scale_kernel(floatX* out, const floatX* inp, long n, size_t m) {\n"
            "  long i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (i < n) out[i] = (floatX)((float)inp[i] * 2.0f);\n}\n"
            "void scale(floatX* out, const floatX* inp, int N, int block_size) {\n"
            "  int grid = (N + block_size - 1) / block_size;\n"
            "  scale_kernel<<<grid, block_size>>>(out, inp, (long)N, (size_t)N);\n}\n"
        )
        tu = analyze_file(src)
        spec = infer_spec(tu, tu.global_kernels[0])
        assert {t.name: t.dtype for t in spec.tensors} == {"inp": dtype, "out": dtype}
        assert {s.name: s.dtype for s in spec.scalars} == {"n": "int64", "m": "uint64"}
        assert set(spec.sizes) == {"N", "block_size"}
        assert all(s["block_size"] == 256 for s in spec.all_size_sets())
        assert spec.launch_config(spec.sizes)[1][0] == 256


ROW_SCALE = (
    "__global__ void row_scale(float* out, const float* inp, const float* w,\n"
    "                          int B, int T, int C) {\n"
    "  int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (idx >= B * T) return;\n"
    "  int b = idx / T, t = idx % T;\n"
    "  const float* x = inp + b * T * C + t * C;\n"
    "  float* y = out + b * T * C + t * C;\n"
    "  for (int c = 0; c < C; c++) y[c] = x[c] * w[c];\n}\n"
    "void launch(float* out, const float* inp, const float* w, int B, int T, int C) {\n"
    "  int block_size = 128;\n"
    "  int grid = (B * T + block_size - 1) / block_size;\n"
    "  row_scale<<<grid, block_size>>>(out, inp, w, B, T, C);\n}\n"
)


def test_extents_the_indices_do_not_show_are_measured(tmp_path: Path) -> None:
    """A row pointer from a split flat index (`x + b * T * C + t * C`) hides the shape from
    the index algebra; the kernel is run at several sizes and the extent fitted (B * C * T)."""
    src = tmp_path / "rows.cu"
    src.write_text(ROW_SCALE)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    shapes = {t.name: t.shape for t in spec.tensors}
    assert shapes == {"inp": ["B * C * T"], "w": ["C"], "out": ["B * C * T"]}
    # three sizes in every product: the defaults keep the tensors near a million elements
    assert all(spec.shape_of(t, spec.sizes)[0] <= 1 << 20 for t in spec.tensors)
    m = migrate(src, out_dir=tmp_path / "out")  # the oracle runs on the inferred spec
    assert not any(d.id == "C2N2009" for d in m.kernels[0].diagnostics)


def test_a_gather_table_is_a_size_its_indices_are_drawn_below(tmp_path: Path) -> None:
    src = tmp_path / "embed.cu"
    src.write_text(
        "__global__ void embed(float* out, const int* tok, const float* table, int N, int C) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i >= N * C) return;\n"
        "  int n = i / C, c = i % C;\n"
        "  const float* row = table + tok[n] * C;\n"
        "  out[i] = row[c];\n}\n"
        "void launch(float* out, const int* tok, const float* table, int N, int C) {\n"
        "  embed<<<(N * C + 255) / 256, 256>>>(out, tok, table, N, C);\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    # the table's rows are a size of their own, and the indices are drawn below it
    assert spec.sizes["V"] > 1 and all("V" in s for s in spec.all_size_sets())
    assert {t.name: t.shape for t in spec.tensors}["table"] == ["C * V"]
    assert spec.inputs["tok"].dist == "int" and spec.inputs["tok"].high == "V"
    assert '[inputs.tok]\ndist = "int"\nlow = 0.0\nhigh = "V"' in to_toml(spec)
    for sizes in spec.all_size_sets():
        inputs = make_inputs(spec, sizes, seed=1)
        (out,) = run_spec(spec, sizes, inputs=inputs)
        table = inputs["table"].reshape(sizes["V"], sizes["C"])
        assert np.array_equal(out, table[inputs["tok"]].ravel())


def test_gather_indices_into_a_size_the_task_has_and_a_histogram(tmp_path: Path) -> None:
    """`probs[i * V + targets[i]]`: the labels index V, a size the task already has; a
    histogram's bins are a size of their own (and its counts are its output)."""
    src = tmp_path / "pick.cu"
    src.write_text(
        "__global__ void pick(float* out, const float* probs, const int* targets, int N,\n"
        "                     int V) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < N) out[i] = probs[i * V + targets[i]];\n}\n"
        "__global__ void hist(const int* a, int* bins, int N) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < N) atomicAdd(&(bins[a[i]]), 1);\n}\n"
        "void launch(float* out, const float* probs, const int* targets, int* bins, int N,\n"
        "            int V) {\n"
        "  pick<<<(N + 127) / 128, 128>>>(out, probs, targets, N, V);\n"
        "  hist<<<(N + 127) / 128, 128>>>(targets, bins, N);\n}\n"
    )
    tu = analyze_file(src)
    pick = infer_spec(tu, tu.kernel("pick"))
    assert set(pick.sizes) == {"N", "V"} and pick.inputs["targets"].high == "V"
    assert {t.name: t.shape for t in pick.tensors}["probs"] == ["N * V"]
    hist = infer_spec(tu, tu.kernel("hist"))
    assert {t.name: (t.role, t.shape) for t in hist.tensors} == {
        "a": ("in", ["N"]), "bins": ("inout", ["V"])
    }  # fmt: skip
    sizes = hist.all_size_sets()[1]
    inputs = make_inputs(hist, sizes, seed=2)
    (counts,) = run_spec(hist, sizes, inputs=inputs)
    expect = inputs["bins"] + np.bincount(inputs["a"], minlength=sizes["V"])
    assert np.array_equal(counts, expect)


def test_sizes_that_are_literals_in_main(tmp_path: Path) -> None:
    """`int numElements = 50000;` and `dim3 block(256)` read as `block.x`: sizes keep the host's
    names and its values as defaults; launch-only literals stay as written."""
    src = tmp_path / "vadd.cu"
    src.write_text(
        "__global__ void vadd(const float* A, const float* B, float* C, int numElements) {\n"
        "  int i = blockDim.x * blockIdx.x + threadIdx.x;\n"
        "  if (i < numElements) C[i] = A[i] + B[i];\n}\n"
        "int main(void) {\n"
        "  int numElements = 50000;\n"
        "  float *d_A = NULL, *d_B = NULL, *d_C = NULL;\n"
        "  dim3 block(128);\n"
        "  int blocksPerGrid = (numElements + block.x - 1) / block.x;\n"
        "  vadd<<<blocksPerGrid, block>>>(d_A, d_B, d_C, numElements);\n"
        "  return 0;\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert spec.sizes == {"numElements": 50000}
    assert {t.name: t.shape for t in spec.tensors} == {n: ["numElements"] for n in "ABC"}
    assert spec.launch_config(spec.sizes)[:2] == ((391, 1, 1), (128, 1, 1))  # dim3 block.x
    m = migrate(src, out_dir=tmp_path / "out")
    assert m.kernels[0].status == "complete" and m.kernels[0].check.ok  # type: ignore[union-attr]


def test_row_pointers_and_an_inclusive_guard(tmp_path: Path) -> None:
    """`inp += C * idx` moves the row pointer; `if (idx > N) return;` lets idx reach N itself
    (an off-by-one in the original that the spec must follow, not hide)."""
    src = tmp_path / "rows.cu"
    src.write_text(
        "__global__ void rows(float* out, const float* inp, int N, int C) {\n"
        "  int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (idx > N) return;\n"
        "  inp += C * idx; out += C * idx;\n"
        "  for (int c = 0; c < C; ++c) out[c] = 2.0f * inp[c];\n}\n"
        "int main() {\n  int N = 100, C = 64;\n  float *o, *i;\n"
        "  rows<<<(N + 127) / 128, 128>>>(o, i, N, C);\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert {t.name: t.shape for t in spec.tensors} == {n: ["N + 1", "C"] for n in ("out", "inp")}


def test_sizeof_and_struct_statics_in_host_launch_expressions(tmp_path: Path) -> None:
    """`sizeof(floatX)` (a typedef a macro chose) and `x128::size` (a static of a struct
    template) in the host's launch are evaluated as the interpreter sees the file."""
    src = tmp_path / "packed.cu"
    src.write_text(
        "typedef float floatX;\n"
        "template <class T> struct Packed { static constexpr int size = 16 / sizeof(T); };\n"
        "typedef Packed<floatX> x128;\n"
        "__global__ void scale(floatX* out, const floatX* inp, int N) {\n"
        "  extern __shared__ floatX tmp[];\n"
        "  int i = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;\n"
        "  tmp[threadIdx.x] = 1.0f;\n"
        "  for (int k = 0; k < x128::size; ++k) if (i + k < N) out[i + k] = 2.0f * inp[i + k];\n}\n"
        "void launch(floatX* out, const floatX* inp, int N, int block_size) {\n"
        "  int grid = (N + block_size * x128::size - 1) / (block_size * x128::size);\n"
        "  size_t smem = block_size * sizeof(floatX);\n"
        "  scale<<<grid, block_size, smem>>>(out, inp, N);\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert spec.launch.shared_bytes == "block_size * 4"
    assert "4" in spec.launch.grid[0] and "x128" not in spec.launch.grid[0]


def test_square_blocks_and_grids_that_need_a_minimum_size(tmp_path: Path) -> None:
    """`dim3 block(s, s)` with s a host parameter defaults to 32 (256 would be 65536 threads);
    a grid of `(N + 255) / 256 / 8` blocks is empty below N = 2048, so N grows until it is not."""
    src = tmp_path / "two.cu"
    src.write_text(
        "__global__ void mm(float* out, const float* a, int M, int N) {\n"
        "  int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  int c = blockIdx.y * blockDim.y + threadIdx.y;\n"
        "  if (r < M && c < N) out[r * N + c] = 2.0f * a[r * N + c];\n}\n"
        "__global__ void packed(float* out, const float* a, int N) {\n"
        "  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 8;\n"
        "  for (int k = 0; k < 8; ++k) if (i + k < N) out[i + k] = a[i + k] + 1.0f;\n}\n"
        "void run(float* out, const float* a, int M, int N, int s) {\n"
        "  dim3 block(s, s);\n  dim3 grid((M + s - 1) / s, (N + s - 1) / s);\n"
        "  mm<<<grid, block>>>(out, a, M, N);\n"
        "  packed<<<(N + 255) / 256 / 8, 256>>>(out, a, N);\n}\n"
    )
    tu = analyze_file(src)
    mm = infer_spec(tu, tu.global_kernels[0])
    assert mm.sizes["s"] == 32  # 32 x 32 = 1024 threads, the most a block may have
    packed = infer_spec(tu, tu.global_kernels[1])
    for sset in packed.all_size_sets():
        assert packed.launch_config(sset)[0][0] >= 1


def test_template_types_from_the_host_and_a_reference_device(tmp_path: Path) -> None:
    """A kernel template launched without template arguments from a host template that main
    calls with `floatX*` pointers: T is floatX, as the compiler deduces it; `cuda_num_SMs`
    set from `deviceProp.multiProcessorCount` sizes the grid for the reference device; a
    pointer the kernel never touches is a one-element input."""
    src = tmp_path / "tmpl.cu"
    src.write_text(
        "typedef float floatX;\n"
        "int cuda_num_SMs = 0;\n"
        "template <class T, class U>\n"
        "__global__ void axpy(T* y, const U* x, T* unused, int n) {\n"
        "  int s = blockDim.x * gridDim.x;\n"
        "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += s)\n"
        "    y[i] = (T)(2.0f * (float)x[i]) + y[i];\n}\n"
        "template <class T>\n"
        "void launch(T* y, const T* x, int n) {\n"
        "  axpy<<<cuda_num_SMs, 128>>>(y, x, y, n);\n}\n"
        "int main() {\n  cudaDeviceProp deviceProp;\n  cudaGetDeviceProperties(&deviceProp, 0);\n"
        "  cuda_num_SMs = deviceProp.multiProcessorCount;\n"
        "  int n = 5000;\n  floatX *y, *x;\n  launch(y, x, n);\n}\n"
    )
    tu = analyze_file(src)
    site = tu.launch_sites[0]
    assert site.arg_types == {"y": "floatX*", "x": "floatX*"}
    spec = infer_spec(tu, tu.global_kernels[0])
    assert spec.kernel.template_args == ["floatX", "floatX"]
    assert spec.launch.grid == [8]  # the reference device's SMs
    by = {t.name: t for t in spec.tensors}
    assert by["y"].dtype == "float32" and by["y"].shape == ["n"] and by["y"].role == "inout"
    assert by["unused"].shape == ["1"] and by["unused"].role == "in"


def test_a_launcher_template_is_read_as_its_first_call_instantiates_it(tmp_path: Path) -> None:
    """A torch-style dtype dispatch: a macro calls `launcher<float>`, then `launcher<half>`;
    the launcher passes its scalar_t on to the kernel and sizes a pack by `sizeof(scalar_t)`:
    the task is the float instantiation (scalar_t float, 16 / sizeof(float) = 4 per pack)."""
    src = tmp_path / "dispatch.cu"
    src.write_text(
        "#include <cuda_fp16.h>\n"
        "template <typename scalar_t, int NT>\n"
        "__global__ void scale(scalar_t* out, const scalar_t* x, int n) {\n"
        "  int i = blockIdx.x * NT + threadIdx.x;\n"
        "  if (i < n) out[i] = x[i] * (scalar_t)2.0f;\n}\n"
        "template <typename scalar_t>\n"
        "void launcher(scalar_t* out, const scalar_t* x, int n) {\n"
        "  constexpr int NT = 128;\n"
        "  const int pack = 16 / sizeof(scalar_t);\n"
        "  scale<scalar_t, NT><<<(n + NT - 1) / NT, NT>>>(out, x, n);\n}\n"
        "#define CALL(T) launcher<T>((T*)out, (const T*)in, n)\n"
        "void dispatch(void* out, const void* in, int n, int dtype) {\n"
        "  if (dtype == 0) { CALL(float); } else { CALL(half); }\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert spec.kernel.template_args[0] == "float", spec.kernel.template_args
    by = {t.name: t for t in spec.tensors}
    assert by["out"].dtype == by["x"].dtype == "float32"


def test_host_templates_switch_cases_and_tag_dispatch(tmp_path: Path) -> None:
    """cuda-samples' reduction host code: a host template instantiated explicitly decides T
    (so `sizeof(T)` is 4); the shared-memory size set in another `case` is not on this
    launch's path; a ternary becomes `select`; a `constexpr` in a template argument expression
    is folded; a `std::bool_constant<B>{}` argument decides B; a kernel loop's `tid < s` is
    not a host bound."""
    src = tmp_path / "red.cu"
    src.write_text(
        "#include <type_traits>\n"
        "template <class T, unsigned int B, bool Atomic>\n"
        "__global__ void red(T* in, T* out, unsigned int n, std::bool_constant<Atomic>) {\n"
        "  __shared__ T s_[B];\n  unsigned tid = threadIdx.x;\n"
        "  unsigned i = blockIdx.x * B + tid;\n  s_[tid] = i < n ? in[i] : (T)0;\n"
        "  __syncthreads();\n"
        "  for (unsigned s = B / 2; s > 0; s >>= 1) { if (tid < s) s_[tid] += s_[tid + s];"
        " __syncthreads(); }\n"
        "  if (tid == 0) { if (Atomic) atomicAdd(&out[0], s_[0]); else out[blockIdx.x] = s_[0]; }\n"
        "}\n"
        "template <class T>\n"
        "void reduce(int size, int threads, int blocks, int which, T* d_in, T* d_out) {\n"
        "  int smem = (threads <= 32) ? 2 * threads * sizeof(T) : threads * sizeof(T);\n"
        "  switch (which) {\n"
        "  case 0:\n"
        "    red<T, 256, false><<<blocks, threads, smem>>>(d_in, d_out, size,"
        " std::bool_constant<false>{});\n"
        "    break;\n"
        "  case 9:\n"
        "    constexpr int groups = 2;\n    smem = groups * sizeof(T);\n"
        "    red<T, 512 / groups><<<blocks, threads, smem>>>(d_in, d_out, size,"
        " std::bool_constant<true>{});\n"
        "    break;\n  }\n}\n"
        "template void reduce<float>(int, int, int, int, float*, float*);\n"
    )
    tu = analyze_file(src)
    first, second = tu.launch_sites
    assert first.host_values["smem"].startswith("(threads <= 32)")
    assert second.host_values["smem"] == "groups * sizeof(float)"
    assert second.template_args == ["float", "512 / (2)"]
    k = tu.global_kernels[0]
    assert k.unnamed_params == [(3, "std::bool_constant<Atomic>")]
    spec = infer_spec(tu, k)
    assert spec.kernel.template_args == ["float", 256, "false"]
    assert spec.launch.shared_bytes == "select(threads <= 32, 2 * threads * 4, threads * 4)"
    assert {t.param: t.shape for t in spec.tensors} == {"in": ["size"], "out": ["blocks"]}
    m = migrate(src, kernel="red", out_dir=tmp_path / "out")
    assert m.kernels[0].check is None or m.kernels[0].check.ok


def test_file_scope_sizes_vector_tensors_and_fixed_problems(tmp_path: Path) -> None:
    """`const int OPT_N = 4000;` at file scope is a size like a local of main; a `float2*`
    tensor holds float elements, two per index, so its extent is measured; a launch with no
    size at all is measured once; `blockIdx.x * 256 + pos` is [blocks, 256], not [256, blocks]."""
    src = tmp_path / "fixed.cu"
    src.write_text(
        "const int OPT_N = 4000;\n"
        "__global__ void pairs(float2* out, const float* in, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n / 2) out[i] = make_float2(in[2 * i], in[2 * i + 1] * 2.0f);\n}\n"
        "__global__ void hist(unsigned int* part, unsigned int* all) {\n"
        "  if (threadIdx.x < 256) part[blockIdx.x * 256 + threadIdx.x] = threadIdx.x;\n"
        "  all[(blockIdx.x * blockDim.x + threadIdx.x) / 2] = 1u;\n}\n"
        "int main() {\n  float2* o; float* i; unsigned int* p;\n"
        "  pairs<<<(OPT_N / 2 + 127) / 128, 128>>>(o, i, OPT_N);\n"
        "  hist<<<240, 256>>>(p, p);\n}\n"
    )
    tu = analyze_file(src)
    pairs = infer_spec(tu, tu.global_kernels[0])
    assert set(pairs.sizes) == {"OPT_N"}  # (its default kept small for the oracle)
    assert {t.name: (t.shape, t.dtype) for t in pairs.tensors} == {
        "in_": (["OPT_N"], "float32"), "out": (["OPT_N"], "float32")}  # fmt: skip
    hist = infer_spec(tu, tu.global_kernels[1])
    shapes = {t.name: t.shape for t in hist.tensors}
    assert hist.sizes == {} and shapes == {"part": ["240", "256"], "all": ["30720"]}


def test_dim3_parameters_and_ceil_of_a_float_quotient(tmp_path: Path) -> None:
    """cuda-samples pass `const dim3 &dimsA` to the launching function: `dimsA.x` is a size
    (dimsA_x); llm.c's `int Tc = ceil((float) N / Bc)` is `ceil_div(N, Bc)`."""
    src = tmp_path / "dims.cu"
    src.write_text(
        "__global__ void rows(float* out, const float* a, int w, int tiles) {\n"
        "  int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (r < w) out[r] = a[r] * (float)tiles;\n}\n"
        "void run(float* out, const float* a, const dim3 &dimsA) {\n"
        "  const int Bc = 32;\n  const int Tc = ceil((float) dimsA.x / Bc);\n"
        "  rows<<<(dimsA.x + 127) / 128, 128>>>(out, a, dimsA.x, Tc);\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert set(spec.sizes) == {"dimsA_x", "Bc"}  # (a local literal is a size, 32 by default)
    tiles = next(s for s in spec.scalars if s.name == "tiles")
    assert tiles.size == "ceil_div(dimsA_x, Bc)" and spec.sizes["Bc"] == 32


def test_a_size_the_host_decides_at_run_time(tmp_path: Path) -> None:
    """`int N = 1; for (...) N *= x.size(i);` (a torch binding): N is a size of its own."""
    src = tmp_path / "relu.cu"
    src.write_text(
        "__global__ void relu_kernel(float* x, float* y, int N) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < N) y[i] = fmaxf(0.0f, x[i]);\n}\n"
        "void relu(torch::Tensor x, torch::Tensor y) {\n"
        "  const int ndim = x.dim();\n  int N = 1;\n"
        "  for (int i = 0; i < ndim; ++i) { N *= x.size(i); }\n"
        "  dim3 block(256);\n  dim3 grid((N + 256 - 1) / 256);\n"
        "  relu_kernel<<<grid, block>>>(reinterpret_cast<float*>(x.data_ptr()),\n"
        "                               reinterpret_cast<float*>(y.data_ptr()), N);\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert set(spec.sizes) == {"N"} and [t.shape for t in spec.tensors] == [["N"], ["N"]]


@pytest.mark.parametrize(
    "parse",
    ["atoi(argv[1])", "std::stoi(argv[1])", "strtol(argv[1], nullptr, 10)", "atol( argv[2] )"],
)
def test_sizes_read_from_the_command_line_are_sizes_of_their_own(
    tmp_path: Path, parse: str
) -> None:
    """`size_t M = atoi(argv[1]);` (a benchmark's `./main 1024 512`): M and N are the task's
    sizes, its defaults ours to choose, as for a size a tensor tells at run time."""
    src = tmp_path / "gemv.cu"
    src.write_text(
        "#include <cstdlib>\n#include <string>\n"
        "__global__ void gemv(const float* A, const float* x, float* y, int M, int N) {\n"
        "  int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (r < M) { float s = 0.0f;\n"
        "    for (int c = 0; c < N; ++c) s += A[r * N + c] * x[c];\n    y[r] = s; }\n}\n"
        "int main(int argc, char** argv) {\n"
        f"  size_t M = {parse};\n  size_t N = atoi(argv[3]);\n"
        "  float *A, *x, *y;\n  cudaMalloc(&A, M * N * sizeof(float));\n"
        "  gemv<<<(M + 127) / 128, 128>>>(A, x, y, M, N);\n  return 0;\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert set(spec.sizes) == {"M", "N"}
    assert [t.shape for t in spec.tensors] == [["M", "N"], ["N"], ["M"]]
    # an argument parsed as a float is no size: `alpha = atof(argv[1])` stays refused
    src.write_text(src.read_text().replace(f"size_t M = {parse};", "size_t M = atof(argv[1]);"))
    with pytest.raises(InferenceError, match="atof"):
        infer_spec(analyze_file(src), analyze_file(src).global_kernels[0])


def test_a_launch_a_call_sets_through_a_pointer_is_not_its_first_value(tmp_path: Path) -> None:
    """`int blocks = 0, threads = 0; cudaOccupancyMaxPotentialBlockSize(&blocks, &threads,
    k);`: the launch is decided at run time, not `<<<0, 0>>>`; inference says so."""
    src = tmp_path / "fill.cu"
    src.write_text(
        "__global__ void fill(float* x, int n) {\n"
        "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
        "       i += gridDim.x * blockDim.x) x[i] = 1.0f;\n}\n"
        "int main() {\n  int n = 4096; float* d; cudaMalloc(&d, n * sizeof(float));\n"
        "  int blocks = 0, threads = 0;\n"
        "  cudaOccupancyMaxPotentialBlockSize(&blocks, &threads, fill);\n"
        "  fill<<<blocks, threads>>>(d, n);\n  return 0;\n}\n"
    )
    tu = analyze_file(src)
    with pytest.raises(InferenceError, match="set by cudaOccupancyMaxPotentialBlockSize"):
        infer_spec(tu, tu.global_kernels[0])


def test_a_launch_in_a_lambda_a_dispatcher_calls_with_integral_constants(tmp_path: Path) -> None:
    """llm.c's `auto launch = [&](auto c) { k<c.value><<<g, c.value>>>(...); };
    dispatch_launch(launch, block_size);` where the dispatcher calls `launch` with
    `std::integral_constant<int, K>{}` under `case K:` of `switch (block_size)`: c.value is
    block_size, a launch-only size the kernel is compiled for (its template argument)."""
    src = tmp_path / "dispatch.cu"
    src.write_text(
        "#include <type_traits>\n"
        "template <int BS>\n"
        "__global__ void twice(float* y, const float* x, int n) {\n"
        "  for (int i = blockIdx.x * BS + threadIdx.x; i < n; i += gridDim.x * BS)\n"
        "    y[i] = 2.0f * x[i];\n}\n"
        "template <class L>\n"
        "void dispatch(L&& launch, int block_size) {\n"
        "  switch (block_size) {\n"
        "    case 128: return launch(std::integral_constant<int, 128>{});\n"
        "    case 256: return launch(std::integral_constant<int, 256>{});\n"
        "    default: return;\n  }\n}\n"
        "void run(float* y, const float* x, int n, int block_size) {\n"
        "  auto launch = [&](auto c) {\n"
        "    constexpr int threads = c.value;\n"
        "    twice<c.value><<<(n + threads - 1) / threads, threads>>>(y, x, n);\n  };\n"
        "  dispatch(launch, block_size);\n}\n"
        "int main() {\n  int n = 5000; float *x, *y;\n"
        "  cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));\n"
        "  run(y, x, n, 256);\n  return 0;\n}\n"
    )
    tu = analyze_file(src)
    (site,) = tu.launch_sites
    assert site.template_args == ["block_size"] and site.block == "threads"
    assert site.host_values["threads"] == "block_size"
    spec = infer_spec(tu, tu.global_kernels[0])
    assert spec.kernel.template_args == [256]
    result = migrate(src, out_dir=tmp_path / "out")
    assert result.kernels[0].status == "complete"


MEMSET = """#define cudaCheck(x) (x)
__global__ void running(float* m, float* s, float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        m[i] = fmaxf(m[i], x[i]);
        s[i] = s[i] + x[i];
        x[i] = 2.0f * x[i];
    }
}
int main() {
    int n = 4096;
    float *m, *s, *x;
    cudaMalloc(&m, n * sizeof(float));
    cudaMalloc(&s, n * sizeof(float));
    cudaMalloc(&x, n * sizeof(float));
    cudaMemset(m, -10000.0f, n * sizeof(float));
    cudaCheck(cudaMemset(s, 0, n * sizeof(float)));
    if (n > 10) cudaMemset(x, 0, n * sizeof(float));
    cudaMemset(x, 0, n / 2 * sizeof(float));
    running<<<(n + 255) / 256, 256>>>(m, s, x, n);
    return 0;
}
"""


def test_buffers_the_host_memsets_before_the_launch_are_filled_inputs(tmp_path: Path) -> None:
    """`cudaMemset(m, -10000.0f, bytes)` stores the int's low byte (0xF0) in every byte: m holds
    -5.96e29 (a flash attention's running max starts there); `cudaMemset(s, 0, ...)` inside
    `cudaCheck(...)`: 0. A memset under an `if` may not have run, one of half the buffer leaves
    the rest as it was: x stays a drawn input. The
    inputs are those values wherever the task is run (check, scorer), and the lifted program
    has them as constants (a max's starting value none)."""
    src = tmp_path / "fill.cu"
    src.write_text(MEMSET)
    tu = analyze_file(src)
    assert tu.launch_sites[0].fills == {"m": "-10000.0f", "s": "0", "x": "0"}
    spec = infer_spec(tu, tu.global_kernels[0])
    assert {n: (d.dist, d.value) for n, d in spec.inputs.items()} == {
        "m": ("fill", pytest.approx(-5.965414e29, rel=1e-6)), "s": ("fill", 0.0)}  # fmt: skip
    ins = make_inputs(spec, spec.sizes)
    assert np.all(ins["s"] == 0.0) and np.all(ins["m"].view(np.uint32) == 0xF0F0F0F0)
    assert np.std(ins["x"]) > 0.5
    lifted = lift_task(spec)
    assert lifted.ok and lifted.program is not None
    # (-5.96e29 is no operand of a max: as -INFINITY, it only starts it)
    assert lifted.program.render().splitlines()[:2] == ["m[i] = x[i]", "s[i] = x[i]"]
    assert 'dist = "fill"' in to_toml(spec)
    assert migrate(src, out_dir=tmp_path / "out").kernels[0].status == "complete"


def test_shapes_read_from_indices_are_checked_by_a_run(tmp_path: Path) -> None:
    """Operand pointers advanced per tile (`A += BK`) fool the index algebra into a shape too
    small; one measurement run catches it and the extent is measured instead."""
    src = tmp_path / "tiles.cu"
    src.write_text(
        "__global__ void rowsum(const float* A, float* out, int M, int K) {\n"
        "  int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (r >= M) return;\n"
        "  A += r * K;\n"
        "  float s = 0.0f;\n"
        "  for (int k = 0; k < K; k += 4) { s += A[0] + A[1] + A[2] + A[3]; A += 4; }\n"
        "  out[r] = s;\n}\n"
        "void launch(const float* A, float* out, int M, int K) {\n"
        "  rowsum<<<(M + 127) / 128, 128>>>(A, out, M, K);\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    shapes = {t.name: t.shape for t in spec.tensors}
    assert shapes["A"] == ["K * M"] and shapes["out"] == ["M"]


def test_include_dirs_travel_with_the_inferred_spec(tmp_path: Path) -> None:
    """A kernel behind `#include <kern.cuh>` found with -I: the spec records the directory,
    so the oracle parses the same program as the front end."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "kern.cuh").write_text(
        "__global__ void twice(float* y, const float* x, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = 2.0f * x[i];\n}\n"
    )
    src = tmp_path / "main.cu"
    src.write_text(
        "#include <kern.cuh>\n"
        "void launch(float* y, const float* x, int n) {\n"
        "  twice<<<(n + 255) / 256, 256>>>(y, x, n);\n}\n"
    )
    m = migrate(src, out_dir=tmp_path / "out", include_dirs=[inc])
    (k,) = m.kernels
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    inferred = (tmp_path / "out" / "twice.inferred.toml").read_text()
    assert str(inc.resolve()) in inferred


def test_dim3_declared_with_names_is_a_launch_not_a_function(tmp_path: Path) -> None:
    """`dim3 block(BN, BM);` parses as a function declaration (C++'s most vexing parse)."""
    src = tmp_path / "mm.cu"
    src.write_text(
        "__global__ void mm(const float* a, const float* b, float* c, int M, int N, int K) {\n"
        "  int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
        "  if (row < M && col < N) {\n    float s = 0.0f;\n"
        "    for (int k = 0; k < K; k++) s += a[row * K + k] * b[k * N + col];\n"
        "    c[row * N + col] = s;\n  }\n}\n"
        "void launch(const float* a, const float* b, float* c, int M, int N, int K) {\n"
        "  constexpr int BM = 16;\n  constexpr int BN = 32;\n"
        "  dim3 block(BN, BM);\n  dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);\n"
        "  mm<<<grid, block>>>(a, b, c, M, N, K);\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert spec.launch_config({"M": 40, "N": 70, "K": 9})[:2] == ((3, 3, 1), (32, 16, 1))
    assert {t.name: t.shape for t in spec.tensors} == {
        "a": ["M", "K"], "b": ["K", "N"], "c": ["M", "N"]}  # fmt: skip


def test_a_launch_under_a_switch_case_takes_the_case_value(tmp_path: Path) -> None:
    """`switch (K) { case 64: k<64><<<N, K>>>(..., 64); ... }` dispatching a template per K:
    at that site K is 64 (the block), whatever the host read K from."""
    src = tmp_path / "rows.cu"
    src.write_text(
        "template <int K>\n"
        "__global__ void rowscale(float* y, const float* x, int N, int k) {\n"
        "  int i = blockIdx.x * k + threadIdx.x;\n"
        "  if (blockIdx.x < N) y[i] = 2.0f * x[i];\n}\n"
        "void run(float* y, const float* x, int N, int K) {\n"
        "  dim3 block((K));\n  dim3 grid((N));\n"
        "  switch ((K)) {\n"
        "  case 64: rowscale<64><<<grid, block>>>(y, x, N, 64); break;\n"
        "  case 128: rowscale<128><<<grid, block>>>(y, x, N, 128); break;\n"
        "  }\n}\n"
    )
    tu = analyze_file(src)
    assert [s.host_values.get("K") for s in tu.launch_sites] == ["64", "128"]
    spec = infer_spec(tu, tu.global_kernels[0])
    assert spec.launch_config(spec.sizes)[1] == (64, 1, 1)
    assert [t.shape for t in spec.tensors] == [["64 * N"], ["64 * N"]]


def test_a_launch_under_an_if_takes_the_compared_value(tmp_path: Path) -> None:
    """`if (bs == 16) k<16><<<g, dim3(bs, bs)>>>(...); else k<32><<<...>>>(...)`: at the first
    site bs is 16, so the template's tile and the block agree. The kernel advances two operand
    offsets in one loop and takes its sizes from dim3 fields: it migrates as a GEMM."""
    src = tmp_path / "mm.cu"
    src.write_text(
        "template <int S> __global__ void mm(float* c, const float* a, const float* b,\n"
        "                                    int wa, int wb) {\n"
        "  __shared__ float as[S][S], bs_[S][S];\n"
        "  int tx = threadIdx.x, ty = threadIdx.y;\n"
        "  float acc = 0;\n"
        "  int first = wa * S * blockIdx.y, last = first + wa - 1;\n"
        "  for (int i = first, j = S * blockIdx.x; i <= last; i += S, j += S * wb) {\n"
        "    as[ty][tx] = a[i + wa * ty + tx];\n"
        "    bs_[ty][tx] = b[j + wb * ty + tx];\n"
        "    __syncthreads();\n"
        "    for (int k = 0; k < S; ++k) acc += as[ty][k] * bs_[k][tx];\n"
        "    __syncthreads();\n"
        "  }\n"
        "  c[wb * S * blockIdx.y + S * blockIdx.x + wb * ty + tx] = acc;\n}\n"
        "void run(float* c, const float* a, const float* b, const dim3& da, const dim3& db) {\n"
        "  int bs = 32;\n"
        "  dim3 threads(bs, bs);\n"
        "  dim3 grid(db.x / threads.x, da.y / threads.y);\n"
        "  if (bs == 16) {\n"
        "    mm<16><<<grid, threads>>>(c, a, b, da.x, db.x);\n"
        "  } else {\n"
        "    mm<32><<<grid, threads>>>(c, a, b, da.x, db.x);\n"
        "  }\n}\n"
    )
    tu = analyze_file(src)
    assert [s.host_values.get("bs") for s in tu.launch_sites] == ["16", "32"]
    spec = infer_spec(tu, tu.global_kernels[0])
    sz = spec.sizes
    assert spec.launch_config(sz)[1] == (16, 16, 1)
    assert {t.name: t.shape for t in spec.tensors} == {
        "a": ["da_y", "da_x"], "b": ["da_x", "db_x"], "c": ["da_y", "db_x"]}  # fmt: skip
    result = migrate(src, out_dir=tmp_path / "out")
    (k,) = result.kernels
    assert k.status == "complete" and k.family == "matmul", k.diagnostics
    assert k.check is not None and k.check.ok


POINTED = """#define TILE 32
#define ROWS 8
__global__ void tile_copy(float* out, const float* in, int w, int h) {
  __shared__ float t[TILE][TILE];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  int at = x + w * y;
  for (int r = 0; r < TILE; r += ROWS)
    if (x < w && y < h) t[threadIdx.y + r][threadIdx.x] = in[at + r * w];
  __syncthreads();
  for (int r = 0; r < TILE; r += ROWS)
    if (x < w && y < h) out[at + r * w] = t[threadIdx.y + r][threadIdx.x];
}
__global__ void flip(float* out, const float* in, int w, int h) {
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int r = 0; r < TILE; r += ROWS) out[(y + r) + h * x] = in[x + w * (y + r)];
}
void read_size(int argc, char** argv, int& w, int& h);
int main(int argc, char** argv) {
  int w, h;
  read_size(argc, argv, w, h);
  if (w != h || w % TILE != 0) { printf("square multiples of the tile only\\n"); exit(1); }
  void (*kernel)(float*, const float*, int, int);
  dim3 grid(w / TILE, h / TILE), threads(TILE, ROWS);
  float *d_in, *d_out;
  for (int k = 0; k < 2; k++) {
    switch (k) {
      case 0: kernel = &tile_copy; break;
      case 1: kernel = &flip; break;
    }
    kernel<<<grid, threads>>>(d_out, d_in, w, h);
  }
  return 0;
}
"""


def test_launches_through_a_function_pointer_and_the_hosts_refusals(tmp_path: Path) -> None:
    """`kernel = &flip; ... kernel<<<grid, threads>>>(...)` launches each kernel assigned to
    the pointer; sizes a call sets (`read_size(argc, argv, w, h)`) are sizes of the task; the
    host's refusal `if (w != h || w % TILE != 0) exit(1)` becomes relations, so no size set
    the host would refuse is checked; a guarded tile copy whose rows `y + r` add two bounded
    parts is measured, not read as [h, 32, w]. Both kernels migrate completely."""
    src = tmp_path / "pointed.cu"
    src.write_text(POINTED)
    tu = analyze_file(src)
    assert [s.kernel for s in tu.launch_sites] == ["tile_copy", "flip"]
    assert tu.launch_sites[0].requires == ["w == h", "w % 32 == 0"]
    spec = infer_spec(tu, tu.kernel("tile_copy"))
    assert set(spec.relations) == {"h == w", "w % 32 == 0"}
    for sset in spec.all_size_sets():
        assert sset["w"] == sset["h"] and sset["w"] % 32 == 0
    n = spec.sizes["w"] * spec.sizes["h"]
    assert [math.prod(spec.shape_of(t, spec.sizes)) for t in spec.tensors] == [n, n]
    result = migrate(src, out_dir=tmp_path / "out")
    assert [(k.kernel, k.status) for k in result.kernels] == [
        ("tile_copy", "complete"), ("flip", "complete")]  # fmt: skip
    assert all(k.check is not None and k.check.ok for k in result.kernels)


def test_a_size_in_whole_tiles_and_whole_blocks(tmp_path: Path) -> None:
    """`gridSize = n_elements / blockSize` with `blockSize = 256` and whole warps in shared
    memory: n_elements is a multiple of both the tile and the block in every size set (the
    tile's rounding broke `n_elements % blockSize == 0`: an internal error)."""
    src = tmp_path / "scan.cu"
    src.write_text(
        "__global__ void block_scan(float* data, int width, float* sums = nullptr) {\n"
        "  extern __shared__ float s[];\n"
        "  int id = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  float v = data[id];\n  s[threadIdx.x % 32] = v;\n  __syncthreads();\n"
        "  data[id] = v + s[0] * width;\n"
        "  if (sums != nullptr && threadIdx.x == blockDim.x - 1) sums[blockIdx.x] = v;\n}\n"
        "int main() {\n  const int n_elements = 65536;\n  int blockSize = 256;\n"
        "  int gridSize = n_elements / blockSize;\n  int nWarps = blockSize / 32;\n"
        "  float *d_data, *d_partial;\n"
        "  block_scan<<<gridSize, blockSize, nWarps * sizeof(float)>>>(d_data, 32, d_partial);\n"
        "  return 0;\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    for sset in spec.all_size_sets():
        assert sset["n_elements"] % 256 == 0
        assert not spec.broken_relations(sset)


GEMV_PINNED = """#define REQUIRE_K(cond, what) if (!(cond)) { throw what; }
#define K_MULTIPLE_OF(V) if (K % (V) != 0) { throw "K must be a multiple of " #V; }
#define K_EXACTLY(V) if (K != (V)) { throw "K must be " #V; }
__global__ void gemv_half_warp(const float* A, const float* x, float* y, int M, int K) {
  int lane = threadIdx.x % 32, k = lane % 16;
  int m = (blockDim.y * blockIdx.x + threadIdx.y) * 2 + lane / 16;
  if (m < M) {
    float s = A[m * K + k] * x[k];
    for (int off = 8; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off, 16);
    if (k == 0) y[m] = s;
  }
}
__global__ void gemv_vec4(const float* A, const float* x, float* y, int M, int K) {
  int lane = threadIdx.x, m = blockDim.y * blockIdx.x + threadIdx.y;
  if (m < M) {
    float s = 0.0f;
    for (int w = 0; w < K / 128; ++w) {
      int k = (w * 32 + lane) * 4;
      float4 a = *reinterpret_cast<const float4*>(&A[m * K + k]);
      float4 b = *reinterpret_cast<const float4*>(&x[k]);
      s += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off);
    if (lane == 0) y[m] = s;
  }
}
void run_half_warp(const float* A, const float* x, float* y, int M, int K) {
  K_EXACTLY(16)
  dim3 block(32, 4), grid((M + 7) / 8);
  gemv_half_warp<<<grid, block>>>(A, x, y, M, K);
}
void run_vec4(const float* A, const float* x, float* y, int M, int K) {
  K_MULTIPLE_OF(128)
  dim3 block(32, 4), grid((M + 3) / 4);
  gemv_vec4<<<grid, block>>>(A, x, y, M, K);
}
"""


def test_sizes_the_host_pins_or_requires_whole_tiles_of(tmp_path: Path) -> None:
    """A host that throws unless `K == 16` (a macro's `if (K != (16))`) pins K: every size set
    has K = 16, the extent of x is K, and the lifter keeps K (the kernel is written for it);
    one that throws unless `K % 128 == 0` gets K in whole tiles, measured at several of them.
    `*reinterpret_cast<const float4*>(&A[i])` is a load of A (A stays an input; the address
    does not escape). Both GEMVs migrate completely."""
    src = tmp_path / "gemv.cu"
    src.write_text(GEMV_PINNED)
    tu = analyze_file(src)
    assert [s.requires for s in tu.launch_sites] == [["K == 16"], ["K % 128 == 0"]]
    half = infer_spec(tu, tu.kernel("gemv_half_warp"))
    assert "K == 16" in half.relations
    assert all(s["K"] == 16 for s in half.all_size_sets())
    assert {t.name: t.shape for t in half.tensors}["x"] == ["K"]
    assert half.specialised_sizes() == {"K": 16}
    vec = infer_spec(tu, tu.kernel("gemv_vec4"))
    assert "K % 128 == 0" in vec.relations
    assert {t.name: t.shape for t in vec.tensors}["A"] == ["M", "K"]
    assert {t.name: t.role for t in vec.tensors} == {"A": "in", "x": "in", "y": "out"}
    result = migrate(src, out_dir=tmp_path / "out")
    assert [(k.kernel, k.status) for k in result.kernels] == [
        ("gemv_half_warp", "complete"), ("gemv_vec4", "complete")]  # fmt: skip


WARP_ROWS = """// one warp per row; threads past the row's width leave first (assumes C >= block)
__global__ void row_rms(float* y, const float* x, int N, int C) {
  int tid = threadIdx.x;
  if (tid >= C) return;
  int row = blockIdx.x * (blockDim.x / 32) + tid / 32, lane = tid % 32;
  if (row >= N) return;
  float total = 0.0f;
  for (int i = lane; i < C; i += 32) total += x[row * C + i] * x[row * C + i];
  for (int off = 16; off > 0; off >>= 1) total += __shfl_xor_sync(0xffffffff, total, off);
  for (int i = lane; i < C; i += 32) y[row * C + i] = x[row * C + i] * rsqrtf(total / C + 1e-5f);
}
void launch(float* y, const float* x, int N, int C) {
  int block_size = 256;
  row_rms<<<(N * 32 + block_size - 1) / block_size, block_size>>>(y, x, N, C);
}
"""


def test_size_sets_where_the_original_is_undefined_are_moved(tmp_path: Path) -> None:
    """Threads past the row's width return before a full-mask shuffle (`if (tid >= C)
    return;`, one warp per row, 256 threads): at C narrower than the block the shuffle names
    lanes that left, undefined behaviour that computes garbage. The extents are measured at
    sizes past the block, the extra size sets are moved (doubled) to where the original is
    clean, and the lifter traces one size past the block with few rows: the kernel migrates
    completely and its check passes at every set."""
    from migrator.lift.lifter import trace_pairs

    src = tmp_path / "warp_rows.cu"
    src.write_text(WARP_ROWS)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert {t.name: math.prod(spec.shape_of(t, {"N": 3, "C": 5})) for t in spec.tensors} == {
        "x": 15, "y": 15}  # fmt: skip
    assert all(s["C"] >= 256 for s in spec.all_size_sets()), spec.size_sets
    assert any(p[0]["C"] > 256 and p[0]["N"] < 16 for p in trace_pairs(spec))
    result = migrate(src, out_dir=tmp_path / "out")
    (k,) = result.kernels
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    assert len(k.check.sizes) == 3


def test_host_helpers_nested_with_a_conditional(tmp_path: Path) -> None:
    """`blocks = div_up(n, 32 * snap_down(255, 4))` with `div_up` a ternary: both helpers are
    inlined, the nested one too, and the conditional is a `select` of the formula language
    (a function of the formulas, never a size of the task)."""
    src = tmp_path / "helpers.cu"
    src.write_text(
        "inline unsigned div_up(unsigned a, unsigned b) { return (a % b != 0) ? (a / b + 1)"
        " : (a / b); }\n"
        "inline unsigned snap_down(unsigned a, unsigned b) { return a - a % b; }\n"
        "__global__ void per_block(float* part, const float* x, int n) {\n"
        "  int i = blockIdx.x * 32 + threadIdx.x;\n"
        "  if (i < n) part[blockIdx.x * 32 + threadIdx.x] = 2.0f * x[i];\n}\n"
        "void run(float* part, const float* x, unsigned n) {\n"
        "  const unsigned blocks = div_up(n, 32 * snap_down(255, 4));\n"
        "  per_block<<<blocks * 252, 32>>>(part, x, n);\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert "select" not in spec.sizes and set(spec.sizes) == {"n"}
    grid = spec.launch_config({"n": 8065})[0]
    assert grid[0] == 2 * 252  # div_up(8065, 32 * 252) = 2 blocks of 252


TILE_SUM = """#define TILE 512
__global__ void tile_sum(const float* x, float* total, int N) {
  __shared__ float part[256];
  const float* xb = x + blockIdx.x * TILE;  // a whole tile per block, unguarded
  part[threadIdx.x] = xb[2 * threadIdx.x] + xb[2 * threadIdx.x + 1];
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, part[0]);
}
void launch(const float* x, float* total, int N) {
  tile_sum<<<(N + TILE - 1) / TILE, 256>>>(x, total, N);
}
"""

TILE_GEMM = """#define T 16
__global__ void tile_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[T][T], Bs[T][T];
  int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += T) {  // no bounds checks: M, N and K are whole tiles
    As[threadIdx.y][threadIdx.x] = A[row * K + k0 + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[(k0 + threadIdx.y) * N + col];
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  C[row * N + col] = acc;
}
void launch(const float* A, const float* B, float* C, int M, int N, int K) {
  dim3 block(T, T), grid((N + T - 1) / T, (M + T - 1) / T);
  tile_gemm<<<grid, block>>>(A, B, C, M, N, K);
}
"""


def test_kernels_of_whole_tiles_get_relations(tmp_path: Path) -> None:
    """A kernel that reads whole tiles unguarded reaches past any ragged size, so its
    extents fit no formula there; measured at multiples of the tiles its grid divides the
    sizes by, they do, and the spec states the relation every size set then obeys."""
    src = tmp_path / "tile_sum.cu"
    src.write_text(TILE_SUM)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert spec.relations == ["N % 512 == 0"]
    assert {t.name: t.shape for t in spec.tensors} == {"x": ["N"], "total": ["1"]}
    assert len(spec.all_size_sets()) == 3 and all(s["N"] % 512 == 0 for s in spec.all_size_sets())


def test_a_measurement_runs_its_cheapest_size_sets_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each measurement attempt runs its drawn size sets cheapest first (by the product of
    the sizes), so an attempt that cannot fit (a GEMM of whole tiles at ragged sizes) is
    given up after its four cheapest runs; the attempt that fits runs cheapest first until
    one formula fits every extent (a run an earlier attempt made is not made again) and reads
    them in drawn order (the spec is the one `test_a_tiled_gemm...` expects)."""
    from migrator.infer import measure

    attempts: list[list[int]] = []
    real_measure, real_once = measure._measure, measure._probe_once

    def attempt(*a: object, **k: object) -> object:
        attempts.append([])
        return real_measure(*a, **k)  # type: ignore[arg-type]

    def once(parsed: object, data: object, big: object, sz: dict[str, int], *a: object) -> object:
        attempts[-1].append(math.prod(sz.values()))
        return real_once(parsed, data, big, sz, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(measure, "_measure", attempt)
    monkeypatch.setattr(measure, "_probe_once", once)
    monkeypatch.setattr(measure, "_PROBES", {})  # (runs remembered by this test's attempts only)
    monkeypatch.setenv("C2N_WORKERS", "1")  # (every run in this process, where `once` sees it)
    src = tmp_path / "tile_gemm.cu"
    src.write_text(TILE_GEMM)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert spec.relations == ["K % 16 == 0", "M % 16 == 0", "N % 16 == 0"]
    first, fitted = attempts[0], attempts[-1]
    assert len(first) == 4 and first == sorted(first)
    # (and no repeat with other integer inputs: it has none, so a repeat reaches as far;
    # an embedding's repeat is what tells its table's rows from a size)
    assert len(fitted) >= 4 and fitted == sorted(fitted)


def test_on_two_cores_a_measurement_runs_its_five_cheapest_sets_as_one_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a second process may run jobs, an attempt's first batch is its five cheapest runs
    (the fifth alone left one core idle), on one core its four (a failing attempt stops
    there); the spec is the same either way."""
    from migrator import workers
    from migrator.infer import measure

    specs = []
    for cores in (1, 2):
        batches: list[int] = []

        def jobs(fn: Any, items: Any, *a: object, **k: object) -> list[Any]:
            batches.append(len(items))  # noqa: B023
            return [fn(x) for x in items]

        monkeypatch.setattr(workers, "map_jobs", jobs)
        monkeypatch.setattr(workers, "workers", lambda c=cores: c)
        monkeypatch.setattr(measure, "_PROBES", {})
        src = tmp_path / "tile_gemm.cu"
        src.write_text(TILE_GEMM)
        tu = analyze_file(src)
        specs.append(infer_spec(tu, tu.global_kernels[0]).model_dump_json())
        assert batches[0] == (4 if cores == 1 else measure.DECIDED_AFTER), batches
    assert specs[0] == specs[1]


def test_a_measurement_attempt_whose_cheapest_run_is_over_budget_stops_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A measurement run may take PROBE_STATEMENTS thread-statements: where an attempt's
    cheapest run takes more, the attempt stops after it (its other runs cost more still), and
    the inference fails saying so; a run that failed is not made again by a later attempt."""
    from migrator.infer import measure
    from migrator.infer.error import InferenceError

    attempts: list[list[tuple[tuple[str, int], ...]]] = []
    real_measure, real_once = measure._measure, measure._probe_once

    def attempt(*a: object, **k: object) -> object:
        attempts.append([])
        return real_measure(*a, **k)  # type: ignore[arg-type]

    def once(parsed: object, data: object, big: object, sz: dict[str, int], *a: object) -> object:
        if attempts:
            attempts[-1].append(tuple(sorted(sz.items())))
        return real_once(parsed, data, big, sz, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(measure, "_measure", attempt)
    monkeypatch.setattr(measure, "_probe_once", once)
    monkeypatch.setattr(measure, "_PROBES", {})
    monkeypatch.setattr(measure, "PROBE_STATEMENTS", 500)  # (below any run of the GEMM)
    monkeypatch.setenv("C2N_WORKERS", "1")
    src = tmp_path / "tile_gemm.cu"
    src.write_text(TILE_GEMM)
    tu = analyze_file(src)
    with pytest.raises(InferenceError, match="too costly"):
        infer_spec(tu, tu.global_kernels[0])
    made = [a for a in attempts if a]
    assert len(attempts) >= 3 and all(len(a) <= 1 for a in attempts)
    runs = [r for a in made for r in a]
    assert len(runs) == len(set(runs))  # (a size set over budget once is not run again)


def test_a_measurement_stops_once_its_cheapest_runs_leave_one_formula_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cheapest DECIDED_AFTER runs of a measurement already leave one `c * product + d`
    for every extent (B * C * T for a row kernel's input and output): the costlier runs drawn
    after them are not made, and the extents are those all the runs would give."""
    from migrator.infer import measure

    runs: list[dict[str, int]] = []
    real_once = measure._probe_once

    def once(parsed: object, data: object, big: object, sz: dict[str, int], *a: object) -> object:
        runs.append(dict(sz))
        return real_once(parsed, data, big, sz, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(measure, "_probe_once", once)
    monkeypatch.setattr(measure, "_PROBES", {})
    monkeypatch.setenv("C2N_WORKERS", "1")
    src = tmp_path / "rows.cu"
    src.write_text(ROW_SCALE)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert {t.name: t.shape for t in spec.tensors}["inp"] == ["B * C * T"]
    probes = [r for r in runs if set(r) >= {"B", "T", "C"} and r.get("B", 0) <= 32]
    costs = [math.prod(r[n] for n in ("B", "T", "C")) for r in probes[: measure.DECIDED_AFTER]]
    assert costs == sorted(costs)
    assert len(probes) < measure.PROBE_RUNS  # (the eight drawn, less the two costliest)


def test_one_formula_each_needs_every_extent_decided() -> None:
    """Runs that tell B * T from B * T * T only where T varies: with T the same at every
    run, two formulas fit and the measurement goes on."""
    from migrator.infer.measure import _one_formula_each

    sets = [{"B": b, "T": t} for b, t in ((8, 16), (16, 8), (32, 16), (8, 32), (16, 32))]
    done = [(sz, {"x": sz["B"] * sz["T"], "y": sz["B"] * sz["T"] * sz["T"]}) for sz in sets]
    assert _one_formula_each(["x", "y"], ["B", "T"], done)
    flat = [(sz | {"T": 16}, {"x": sz["B"] * 16, "y": 0}) for sz in sets]
    assert not _one_formula_each(["x"], ["B", "T"], flat)  # B * T or 16 * B
    assert _one_formula_each(["x"], ["B", "T"], done[:4])
    assert not _one_formula_each(["x"], ["B", "T"], done[:3])  # too few runs


def test_a_tiled_gemm_without_bounds_checks_is_inferred_and_migrated(tmp_path: Path) -> None:
    """Measured extents `K * M` become [M, K] where the kernel strides by K; the size the
    grid does not divide (K) is a multiple of a tile too; the migration is checked."""
    src = tmp_path / "tile_gemm.cu"
    src.write_text(TILE_GEMM)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert spec.relations == ["K % 16 == 0", "M % 16 == 0", "N % 16 == 0"]
    assert {t.name: t.shape for t in spec.tensors} == {
        "A": ["M", "K"], "B": ["K", "N"], "C": ["M", "N"]
    }  # fmt: skip
    assert "relations = [" in to_toml(spec)
    m = migrate(src, out_dir=tmp_path / "out")
    kr = m.kernels[0]
    assert kr.family == "matmul" and kr.check is not None and kr.check.ok
    assert len(kr.check.sizes) == 3  # every published set, all whole tiles


SQUARE_GEMM = """#define T 16
// Written for square matrices: every matrix uses N as its leading dimension.
__global__ void square_gemm(int M, int N, int K, const float* A, const float* B, float* C) {
  __shared__ float As[T][T];
  __shared__ float Bs[T][T];
  int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += T) {
    As[threadIdx.y][threadIdx.x] = A[row * N + k0 + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[(k0 + threadIdx.y) * N + col];
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  C[row * N + col] = acc;
}
void launch(int M, int N, int K, const float* A, const float* B, float* C) {
  dim3 block(T, T), grid((N + T - 1) / T, (M + T - 1) / T);
  square_gemm<<<grid, block>>>(M, N, K, A, B, C);
}
"""


def test_a_kernel_written_for_square_problems_gets_equal_sizes(tmp_path: Path) -> None:
    """One leading dimension for every matrix (as GEMM tutorials write it): no extents fit
    independent sizes, so the sizes are measured tied, and the relations say M == N == K."""
    src = tmp_path / "square_gemm.cu"
    src.write_text(SQUARE_GEMM)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert set(spec.relations) == {"M == K", "N == K", "K % 16 == 0"}
    for s in spec.all_size_sets():
        assert s["M"] == s["N"] == s["K"] and s["K"] % 16 == 0
    inputs = make_inputs(spec, spec.sizes, seed=3)
    (c,) = run_spec(spec, spec.sizes, inputs=inputs)
    n = spec.sizes["N"]
    a, b = inputs["A"].reshape(n, n).astype(np.float64), inputs["B"].reshape(n, n)
    np.testing.assert_allclose(c.reshape(n, n), a @ b, rtol=1e-4, atol=1e-3)


def test_launches_of_many_threads_per_element_are_capped(tmp_path: Path) -> None:
    """llm.c style: one 256-thread block per row of T elements (T below the block size), rows
    B * NH * T: the inferred sizes keep each launch within MAX_THREADS, since the oracle
    simulates every thread (the sizes alone kept 4.7M threads per launch); no two sizes of a
    ragged set are equal (halving made B = NH, and halving T then stalled on the values the
    others held)."""
    src = tmp_path / "rowmax.cu"
    src.write_text(
        "__global__ void row_max(float* out, const float* inp, int N, int C) {\n"
        "  const float* x = inp + blockIdx.x * C;\n"
        "  float m = -3.0e38f;\n"
        "  for (int c = threadIdx.x; c < C; c += blockDim.x) m = fmaxf(m, x[c]);\n"
        "  if (threadIdx.x == 0) out[blockIdx.x] = m;\n}\n"
        "void launch(float* out, const float* inp, int B, int NH, int T) {\n"
        "  row_max<<<B * NH * T, 256>>>(out, inp, B * NH * T, T);\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    for sizes in spec.all_size_sets():
        grid, block, _ = spec.launch_config(sizes)
        assert int(np.prod(grid)) * int(np.prod(block)) <= MAX_THREADS, sizes
    for sizes in spec.size_sets:  # (the defaults, whole, may meet at the smallest, 8)
        assert len({sizes[n] for n in ("B", "NH", "T")}) == 3, sizes
    assert all(spec.sizes[n] % 8 == 0 for n in ("B", "NH", "T")), spec.sizes  # still whole


@pytest.mark.parametrize(
    ("sizes", "cap"),
    [({"B": 96, "C": 96, "T": 96}, 1 << 15), ({"B": 16, "NH": 24, "T": 32}, 1 << 12),
     ({"B": 51, "C": 91, "T": 33}, 1 << 13), ({"B": 256, "NH": 256, "T": 256}, 1 << 18)],
)  # fmt: skip
def test_halving_keeps_whole_sizes_whole_ragged_ones_ragged_and_all_apart(
    sizes: dict[str, int], cap: int
) -> None:
    sset = dict(sizes)
    _halve_until(sset, set(), lambda: math.prod(sset.values()) <= cap)
    assert math.prod(sset.values()) <= cap, sset
    assert len(set(sset.values())) == len(sset), sset
    for n, v in sset.items():
        assert v % 8 == 0 if sizes[n] % 8 == 0 else v % 2 == 1, (n, sset)


def test_caps_halve_only_sizes_the_cost_depends_on() -> None:
    """`C` of `hs = C / NH`, passed as a scalar and in no shape, is no cheaper smaller: the
    element cap halves the sizes the shapes use (C halved to 8 first made `C / NH` equal to a
    traced size, and the lifter traced larger sets to avoid it); the thread cap likewise."""
    tensors = [{"shape": ["B * NH * T * T"]}]
    sset = {"B": 16, "C": 32, "NH": 32, "T": 32}
    _cap_elements(tensors, sset, set(), 1 << 18)
    assert sset["C"] == 32 and sset["B"] * sset["NH"] * sset["T"] ** 2 <= 1 << 18
    data = {"launch": {"grid": ["ceil_div(T, 64)", "B * NH"], "block": ["256"]}}
    sset = {"B": 16, "C": 32, "NH": 32, "T": 32}
    _cap_threads(data, sset, set(), 1 << 16)
    assert sset["C"] == 32 and sset["T"] == 32 and sset["B"] * sset["NH"] * 256 <= 1 << 16


def test_a_contraction_is_capped_by_its_work_in_whole_tiles_and_launchable() -> None:
    """A GEMM's M * N * K, which no tensor's elements show (256^3 cost seconds a run of a
    register-tiled kernel in the oracle), is bounded: the largest size halved in whole tiles
    (`M % 64 == 0`), never below one tile, never to a grid without a block, and a kept size
    (a relation ties it) as it is."""
    data = {"tensors": [{"shape": ["M", "K"]}, {"shape": ["K", "N"]}, {"shape": ["M", "N"]}],
            "launch": {"grid": ["N / 128", "M / 64"], "block": ["256"]}}  # fmt: skip
    sset = {"K": 256, "M": 256, "N": 256}
    _cap_work(data, sset, set(), {"M": 64, "N": 64, "K": 32})
    assert math.prod(sset.values()) <= WORK_BUDGET, sset
    assert sset["M"] % 64 == 0 and sset["K"] % 32 == 0 and sset["N"] % 64 == 0, sset
    assert sset["N"] >= 128 and len(set(sset.values())) == 3, sset  # (N / 128: one block)
    kept = {"K": 512, "M": 256, "N": 256}
    ceil = {**data, "launch": {"grid": ["(N + 127) / 128", "(M + 63) / 64"], "block": ["256"]}}
    _cap_work(ceil, kept, {"K"}, {})
    assert kept["K"] == 512 and math.prod(kept.values()) <= WORK_BUDGET, kept
    small = {"K": 64, "M": 128, "N": 128}  # within the budget: as it was
    _cap_work(data, small, set(), {})
    assert small == {"K": 64, "M": 128, "N": 128}


UNGUARDED_GEMM = (
    "#define TS 64\n"
    "__global__ void tile_gemm(const float* a, const float* b, float* c, int M, int N,\n"
    "                          int K) {\n"
    "  __shared__ float sa[TS][8], sb[8][TS];\n"
    "  int tid = threadIdx.y * 16 + threadIdx.x;\n"
    "  int ar = tid >> 2, ak = (tid & 3) << 1;  // two elements of A's 64 x 8 tile a thread\n"
    "  int bk = tid >> 5, bn = (tid & 31) << 1;  // two of B's 8 x 64\n"
    "  float acc[4][4] = {0.0f};\n"
    "  for (int kt = 0; kt < K / 8; ++kt) {\n"
    "    for (int v = 0; v < 2; ++v) {\n"
    "      sa[ar][ak + v] = a[(blockIdx.y * TS + ar) * K + kt * 8 + ak + v];\n"
    "      sb[bk][bn + v] = b[(kt * 8 + bk) * N + blockIdx.x * TS + bn + v];\n"
    "    }\n"
    "    __syncthreads();\n"
    "    for (int k = 0; k < 8; ++k)\n"
    "      for (int i = 0; i < 4; ++i)\n"
    "        for (int j = 0; j < 4; ++j)\n"
    "          acc[i][j] += sa[threadIdx.y * 4 + i][k] * sb[k][threadIdx.x * 4 + j];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  int r = blockIdx.y * TS + threadIdx.y * 4, col = blockIdx.x * TS + threadIdx.x * 4;\n"
    "  for (int i = 0; i < 4; ++i)\n"
    "    for (int j = 0; j < 4; ++j) c[(r + i) * N + col + j] = acc[i][j];\n"
    "}\n"
    "void launch(const float* a, const float* b, float* c, int M, int N, int K) {\n"
    "  dim3 grid(N / TS, M / TS), block(16, 16);\n"
    "  tile_gemm<<<grid, block>>>(a, b, c, M, N, K);\n"
    "}\n"
)


def test_a_size_only_a_loop_counts_is_halved_below_the_work_of_the_grid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiled GEMM's K (a counted loop's bound, in no grid dimension) costs the oracle steps
    one after another, M and N only more threads at once: the sets' work is capped lower by
    halving K alone (a register-tiled GEMM's K = 128 cost 2.5 s a run, K = 32 a quarter), in
    whole tiles; the grid's sizes and a set already within the cap are as they were."""
    src = tmp_path / "tiled_gemm.cu"
    src.write_text(UNGUARDED_GEMM)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    import migrator.infer.spec as inference

    monkeypatch.setattr(inference, "SEQUENTIAL_WORK", 1 << 40)
    before = infer_spec(tu, tu.global_kernels[0])
    pairs = list(zip(spec.all_size_sets(), before.all_size_sets(), strict=True))
    assert any(before.work(b) > SEQUENTIAL_WORK for _, b in pairs), pairs
    for now, was in pairs:
        assert spec.work(now) <= SEQUENTIAL_WORK, now
        assert {n: v for n, v in now.items() if n != "K"} == {
            n: v for n, v in was.items() if n != "K"}, (now, was)  # fmt: skip
        assert now["K"] == was["K"] if before.work(was) <= SEQUENTIAL_WORK else now["K"] < was["K"]
        assert now["K"] >= 8 and not spec.broken_relations(now), (now, spec.relations)


def _measured_tiles(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, int] | None]:
    """The tiles of each measurement attempt, in order (None: sizes from the small probes),
    logged as `measure._measure` is called."""
    import migrator.infer.measure as measure

    tried: list[dict[str, int] | None] = []
    real = measure._measure

    def logged(*args: object, **kw: object) -> object:
        tried.append(args[6] if len(args) > 6 else kw.get("tiles"))  # type: ignore[arg-type]
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(measure, "_measure", logged)
    return tried


def test_a_kernel_that_checks_no_tiled_size_is_measured_at_whole_tiles_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grid tiles M and N by 64 and no statement compares either: sizes below a tile read
    a whole tile all the same, so the measurement starts at multiples of the tiles (the small
    probes of a register-tiled GEMM cost two seconds to fail) and the task is whole tiles; a
    kernel that bounds-checks a tiled size is measured at small sizes first, as before."""
    tried = _measured_tiles(monkeypatch)
    src = tmp_path / "tile_gemm.cu"
    src.write_text(UNGUARDED_GEMM)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    # (K, which the grid does not tile, at the step its loop takes, `kt < K / 8`: probes
    # four times cheaper; the task's relation for it is the tile's all the same, the step's
    # beside it, which the tile implies)
    assert tried and tried[0] == {"K": 8, "M": 64, "N": 64}, tried
    assert {"K % 32 == 0", "K % 8 == 0", "M % 64 == 0", "N % 64 == 0"} <= set(spec.relations)
    tried.clear()
    guarded = UNGUARDED_GEMM.replace(
        "  float acc[4][4]", "  if (blockIdx.y * TS >= M) return;\n  float acc[4][4]"
    )
    src.write_text(guarded)
    tu = analyze_file(src)
    infer_spec(tu, tu.global_kernels[0])
    assert tried and tried[0] is None, tried
    # a thread's own early return before the tile loop's barriers: every thread must reach
    # them, so at the sizes the kernel was written for none returns (whole tiles again)
    tried.clear()
    waited = UNGUARDED_GEMM.replace(
        "  float acc[4][4]", "  if (blockIdx.y * TS + ar >= M) return;\n  float acc[4][4]"
    )
    src.write_text(waited)
    tu = analyze_file(src)
    assert any(d.id == "C2N1011" for d in tu.global_kernels[0].diagnostics)
    infer_spec(tu, tu.global_kernels[0])
    assert tried and tried[0] == {"K": 8, "M": 64, "N": 64}, tried


TILE_COUNT_KERNEL = (
    "#define BC 32\n"
    "// one block per row, read in whole tiles of BC (past N where N % BC != 0): the kernel is\n"
    "// passed the tile count and compares no size\n"
    "__global__ void tile_max(const float* x, float* out, int N, int Tc) {\n"
    "  __shared__ float t[BC];\n"
    "  float m = -INFINITY;\n"
    "  for (int j = 0; j < Tc; ++j) {\n"
    "    t[threadIdx.x] = x[blockIdx.x * N + j * BC + threadIdx.x];\n"
    "    __syncthreads();\n"
    "    for (int c = 0; c < BC; ++c) m = fmaxf(m, t[c]);\n"
    "    __syncthreads();\n"
    "  }\n"
    "  out[blockIdx.x * BC + threadIdx.x] = m;\n"
    "}\n"
    "void launch(const float* x, float* out, int B, int N) {\n"
    "  const int Tc = ceil((float)N / BC);\n"
    "  tile_max<<<B, BC>>>(x, out, N, Tc);\n"
    "}\n"
)


def test_a_size_read_in_whole_tiles_of_a_passed_count_is_measured_at_tiles_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Tc = ceil(N / BC)` passed to a kernel that loads whole tiles of BC = 32 and compares
    no size (a flash kernel's key tiles): every small probe below the tile reads past it and
    fits no shape, so the measurement starts at multiples of the tile."""
    tried = _measured_tiles(monkeypatch)
    src = tmp_path / "tile_max.cu"
    src.write_text(TILE_COUNT_KERNEL)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert tried and tried[0] == {"N": 32}, tried
    assert "N % 32 == 0" in spec.relations, spec.relations


def test_whole_tiles_read_past_a_compared_size_skip_the_other_small_sizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same whole-tile loads, with the maximum loop checking N (`if (j * BC + c >= N)
    break;`, as llm.c's flash attention checks its key rows): the small probes come first, and
    where their extents are products once N is rounded up to whole tiles of 32 (the last row
    reads a whole tile past its start), the multiples of the tile come next, not the other
    small sizes, which read past the tile as well (a third of a second of an attention's
    measurement)."""
    tried = _measured_tiles(monkeypatch)
    src = tmp_path / "tile_max.cu"
    src.write_text(TILE_COUNT_KERNEL.replace(
        "for (int c = 0; c < BC; ++c) m", "for (int c = 0; c < BC; ++c) {\n"
        "      if (j * BC + c >= N) break;\n      m"
    ).replace("m = fmaxf(m, t[c]);", "m = fmaxf(m, t[c]); }"))  # fmt: skip
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert tried == [None, {"N": 32}], tried
    assert "N % 32 == 0" in spec.relations, spec.relations


def test_extents_of_whole_tiles_past_a_size_are_told_from_other_misfits() -> None:
    from migrator.infer.measure import reads_whole_tiles

    def runs(extent: Any) -> list[tuple[dict[str, int], dict[str, int]]]:
        sets = [{"B": 2, "T": 8, "d": 4}, {"B": 3, "T": 40, "d": 8}, {"B": 5, "T": 4, "d": 8},
                {"B": 2, "T": 32, "d": 16}, {"B": 3, "T": 48, "d": 16}]  # fmt: skip
        return [(s, {"q": s["B"] * s["T"] * s["d"], "k": extent(s)}) for s in sets]

    free, tiles = ["B", "T", "d"], {"T": 32}
    # the last of B rows of T * d reads whole tiles of 32 rows: (B - 1) * T * d + T' * d
    assert reads_whole_tiles(runs(lambda s: (s["B"] - 1) * s["T"] * s["d"]
                                  + 32 * -(-s["T"] // 32) * s["d"]), free, tiles)  # fmt: skip
    # every row rounded up to whole tiles: B * 32 * ceil(T / 32) * d
    assert reads_whole_tiles(runs(lambda s: s["B"] * 32 * -(-s["T"] // 32) * s["d"]), free,
                             tiles)  # fmt: skip
    # products as they are: nothing read past a tile
    assert not reads_whole_tiles(runs(lambda s: s["B"] * s["T"]), free, tiles)
    # rows padded by a size, not to whole tiles: another attempt's business
    assert not reads_whole_tiles(runs(lambda s: (s["B"] * s["T"] - 1) * s["d"] + 3), free, tiles)
    # a tile of 8 divides every other small size: those may fit as they are
    assert not reads_whole_tiles(runs(lambda s: s["B"] * 8 * -(-s["T"] // 8) * s["d"]), free,
                                 {"T": 8})  # fmt: skip


def test_a_do_while_that_steps_a_counter_through_a_size_is_a_loop_over_it(tmp_path: Path) -> None:
    """`do { t += BK; ... } while (t < K);` (a tutorial GEMM's tile loop) steps K by BK, like
    `for (t = 0; t < M; t += TM)` steps M by TM, and each thread runs through K one step
    after another (a size the work cap may halve); a loop stepping by an unknown name does
    not."""
    from migrator.infer.spec import _loop_steps, _sequential_sizes

    src = tmp_path / "dowhile.cu"
    src.write_text(
        "template <const int BK = 8>\n"
        "__global__ void k(float* c, int M, int N, int K, int S) {\n"
        "  const int TM = 4;\n"
        "  float s = 0.0f;\n"
        "  int t = 0;\n"
        "  do {\n    t += BK;\n    s += 1.0f;\n  } while (t < K);\n"
        "  for (int m = 0; m < M; m += TM) s += 2.0f;\n"
        "  for (int q = 0; q < N; q += S) s += 3.0f;\n"
        "  c[threadIdx.x] = s;\n}\n"
    )
    k = analyze_file(src).global_kernels[0]
    scalars = [{"name": n, "size": n} for n in ("M", "N", "K")]
    data = {"scalars": scalars, "kernel": {"template_args": [16]}, "sizes": {"M": 8, "N": 8,
            "K": 8}, "launch": {"grid": ["1"], "block": ["32"]}}  # fmt: skip
    assert _loop_steps(k, data) == {"K": 16, "M": 4}
    assert "K" in _sequential_sizes(k, data)


def test_the_step_a_loop_takes_through_a_size_is_read_from_its_bound(tmp_path: Path) -> None:
    """`bk < (K + BK - 1) / BK` with BK a template argument, `kt < N / TN` with a `const int`:
    the loop steps K by the instantiated BK and N by TN; a bound dividing by another name
    (`(K + BK - 1) / BM`), a size no scalar is, or a plain `i < M` give no step."""
    from migrator.infer.spec import _loop_steps

    src = tmp_path / "steps.cu"
    src.write_text(
        "template <const int BM = 128, const int BK = 8>\n"
        "__global__ void k(float* c, int M, int N, int K) {\n"
        "  const int TN = 4;\n"
        "  float s = 0.0f;\n"
        "  for (int bk = 0; bk < (K + BK - 1) / BK; ++bk) s += 1.0f;\n"
        "  for (int kt = 0; kt < N / TN; ++kt) s += 2.0f;\n"
        "  for (int q = 0; q < (K + BK - 1) / BM; ++q) s += 3.0f;\n"
        "  for (int i = 0; i < M; ++i) s += 4.0f;\n"
        "  c[threadIdx.x] = s;\n}\n"
    )
    k = analyze_file(src).global_kernels[0]
    scalars = [{"name": n, "size": n} for n in ("M", "N", "K")]
    data = {"scalars": scalars, "kernel": {"template_args": [64, 16]}}
    assert _loop_steps(k, data) == {"K": 16, "N": 4}
    data = {"scalars": scalars, "kernel": {"template_args": []}}
    assert _loop_steps(k, data) == {"N": 4}  # (BK's value unknown: no step of K)


def test_sizes_rounded_to_whole_tiles_are_capped_again(tmp_path: Path) -> None:
    """A relation `T % 256 == 0` rounds T up to a whole tile after the element caps: B and C,
    which no relation ties, are halved again so the sets stay within their budget (llm.c's
    `normalization_kernel` ran the oracle at 2.4M elements per set), T keeps its tiles."""
    src = tmp_path / "norm.cu"
    src.write_text(
        "__global__ void norm(float* out, const float* inp, const float* mean, int B, int T,\n"
        "                     int C) {\n"
        "  int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  int bt = idx / C;\n"
        "  out[idx] = inp[idx] - mean[bt];\n}\n"
        "void launch(float* out, const float* inp, const float* mean, int B, int T, int C) {\n"
        "  if (T % 256 != 0) throw 1;\n"
        "  norm<<<B * T * C / 256, 256>>>(out, inp, mean, B, T, C);\n}\n"
    )
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert "T % 256 == 0" in spec.relations
    for sizes in spec.all_size_sets():
        assert sizes["T"] % 256 == 0, sizes
        largest = max(math.prod(spec.shape_of(t, sizes)) for t in spec.tensors)
        assert largest <= SET_ELEMENTS, sizes
    assert max(math.prod(spec.shape_of(t, spec.sizes)) for t in spec.tensors) <= DEFAULT_ELEMENTS


def test_rows_padded_past_their_width_are_the_whole_product() -> None:
    """Extents `(R - 1) * P + V` (llm.c's logits: each row V wide at a stride P, V rounded up
    to P, the last row reached only V into) are read as the whole `R * P` with `P >= V`; a
    formula no padding explains is not."""
    from migrator.infer.measure import _padded_rows

    draws = ((4, 16, 9), (7, 32, 30), (5, 8, 3), (9, 64, 40))
    runs = [{"R": r, "P": p, "V": v} for r, p, v in draws]
    used = [(sz, None) for sz in runs]
    seen = [(sz["R"] - 1) * sz["P"] + sz["V"] for sz in runs]
    assert _padded_rows(["R", "P", "V"], used, seen) == [("R * P", "P >= V")]
    assert _padded_rows(["R", "P", "V"], used, [s + 1 for s in seen]) == []


def test_rows_padded_to_a_stride_are_measured_after_the_first_sizes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first sizes' extents are rows padded to P, which the kernel never compares: the
    padded reading of those same probes comes next (nothing run again), not the other sizes
    and square problems (a fused classifier's measurement: 0.4 s of probes that fail); where
    the padding size is compared (a GEMM tutorial's K, its loop bound), the order is kept."""
    import migrator.infer.measure as measure
    from migrator.infer.measure import Unfitted, measure_extents, padded_by_stride

    draws = ((4, 16, 9), (7, 32, 30), (5, 8, 3), (9, 64, 40))
    runs = [({"R": r, "P": p, "V": v}, {"x": (r - 1) * p + v}) for r, p, v in draws]
    assert padded_by_stride(runs, ["R", "P", "V"], frozenset({"V"}))
    assert not padded_by_stride(runs, ["R", "P", "V"], frozenset({"V", "P"}))
    assert not padded_by_stride([(sz, {"x": sz["R"] * sz["P"]}) for sz, _ in runs],
                                ["R", "P", "V"], frozenset({"V"}))  # fmt: skip
    # P the columns of another tensor too (a GEMM tutorial's one leading dimension)
    assert not padded_by_stride([(sz, {**e, "y": sz["V"] * sz["P"]}) for sz, e in runs],
                                ["R", "P", "V"], frozenset({"V"}))  # fmt: skip

    def attempts(compared: frozenset[str]) -> list[tuple[object, bool]]:
        tried: list[tuple[object, bool]] = []

        def fake(parsed: object, data: object, params: object, launch_only: object,
                 values: object, scale: int, tiles: object = None, padded: object = None,
                 nests: object = None) -> dict[str, str]:  # fmt: skip
            tried.append((values, padded is not None))
            if padded is None:  # (the probes show padded rows, whatever the sizes)
                raise Unfitted("the extent of x fits no product", runs)
            padded.append("P >= V")  # type: ignore[attr-defined]
            return {"x": "R * P"}

        monkeypatch.setattr(measure, "_measure", fake)
        data = {"sizes": {"R": 8, "P": 8, "V": 8}, "launch": {"grid": ["R"], "block": ["1"]},
                "scalars": [],
                "tensors": [{"param": "x", "role": "inout", "shape": []}]}  # fmt: skip
        got = measure_extents(None, data, ["x"], set(), compared=compared)
        assert got == ({"x": "R * P"}, ["P >= V"])
        return tried

    small = measure.PROBE_SIZES
    assert attempts(frozenset({"V"})) == [(small, False), (small, True)]
    slow = attempts(frozenset({"V", "P"}))  # (the others first, square problems among them)
    assert slow[0] == (small, False) and slow[-1] == (small, True) and len(slow) > 2


TRANSPOSE_VEC4 = """
__global__ void transpose_cols4(const float* in, float* out, int height, int width) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r4 = blockIdx.y * blockDim.y + threadIdx.y;  // four input rows per thread
  if (r4 * 4 + 3 < height && c < width) {
    float4 v;
    v.x = in[(r4 * 4) * width + c];
    v.y = in[(r4 * 4 + 1) * width + c];
    v.z = in[(r4 * 4 + 2) * width + c];
    v.w = in[(r4 * 4 + 3) * width + c];
    reinterpret_cast<float4*>(out)[c * height / 4 + r4] = v;
  }
}

void run(const float* in, float* out, int height, int width) {
  dim3 block(16, 16), grid((width + 15) / 16, (height + 63) / 64);
  transpose_cols4<<<grid, block>>>(in, out, height, width);
}
"""


def test_a_vector_index_that_divides_a_size_by_its_width_asks_whole_vectors(
    tmp_path: Path,
) -> None:
    """`out4[c * height / 4 + r4]`: each output row is height / 4 whole float4 vectors only
    when height % 4 == 0 (else the integer division shifts every row); the relation is on
    height, not
    on the flat output's last factor, and the transpose migrates checked."""
    src = tmp_path / "transpose_cols4.cu"
    src.write_text(TRANSPOSE_VEC4)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    height = next(s.size for s in spec.scalars if s.name == "height")
    assert f"{height} % 4 == 0" in spec.relations
    assert all(s[str(height)] % 4 == 0 for s in spec.all_size_sets())
    (kr,) = migrate(src, out_dir=tmp_path / "out").kernels
    assert kr.status == "complete" and kr.check is not None and kr.check.ok, kr.diagnostics


FLASH = Path(__file__).resolve().parent / "data" / "flash_stats.cu"


def test_a_tile_count_passed_to_the_kernel_measures_whole_tiles() -> None:
    """`const int bc = 32; n_tiles = ceil((float)T / bc)` passed to a kernel that loads whole
    tiles of bc keys (past T where T % bc != 0): bc is the kernel's tile, the same in every
    set; the extents of k and v are measured at whole tiles of T (the others small), the task
    says `T % 32 == 0`, and one set has two tiles (the loop over them runs twice). k's index
    `bh * T * D + tile * bc * D + e` (e < bc * D) does not nest densely as [tiles, BH, bc * D]
    (bh's stride is not the inner extent): it is measured, not read as that shape."""
    tu = analyze_file(FLASH)
    spec = infer_spec(tu, tu.global_kernels[0])
    sets = [spec.sizes, *spec.size_sets]
    assert {s["bc"] for s in sets} == {32}
    assert "T % 32 == 0" in spec.relations
    assert all(s["T"] % 32 == 0 for s in sets) and max(s["T"] for s in sets) >= 64
    shapes = {t.name: [str(d) for d in t.shape] for t in spec.tensors}
    assert shapes["q"] == ["BH", "T", "D"] and shapes["row_max"] == ["BH", "T"]
    assert shapes["k"] == shapes["v"] == ["BH * D * T"]
    assert spec.inputs["row_max"].dist == "fill"


TORCH_RUNNING = """#include <torch/types.h>
__global__ void running(const float* x, float* m, float* s, float* o, int T) {
    int row = blockIdx.x * gridDim.y + blockIdx.y;
    int t = threadIdx.x;
    if (t < T) {
        m[row * T + t] = fmaxf(m[row * T + t], x[row * T + t]);
        s[row * T + t] = s[row * T + t] + x[row * T + t];
        o[row * T + t] = o[row * T + t] * x[row * T + t];
    }
}
torch::Tensor forward(torch::Tensor x) {
    const int B = x.size(0); const int nh = x.size(1); const int T = x.size(2);
    auto m = torch::full({B, nh, T}, -INFINITY);
    auto s = (torch::zeros({B, nh, T})).to(x.device());
    auto o = torch::ones_like(x);
    dim3 grid(B, nh);
    running<<<grid, T>>>(x.data_ptr<float>(), m.data_ptr<float>(), s.data_ptr<float>(),
                         o.data_ptr<float>(), T);
    return o;
}
"""


def test_tensors_a_torch_binding_makes_with_a_value_are_filled_inputs(tmp_path: Path) -> None:
    """`torch::full(shape, -INFINITY)`, `torch::zeros(...)` then `.to(device)` and
    `torch::ones_like(x)`, passed whole (`m.data_ptr<float>()`), hold that value in every
    element; `nh = x.size(1)`, used only by the grid, stays a size of its own (it was read as
    the text `x.size(1)`)."""
    src = tmp_path / "running.cu"
    src.write_text(TORCH_RUNNING)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert "nh" in spec.sizes and [str(g) for g in spec.launch.grid] == ["B", "nh"]
    assert {n: (d.dist, d.value) for n, d in spec.inputs.items()} == {
        "m": ("fill", -math.inf), "s": ("fill", 0.0), "o": ("fill", 1.0)}  # fmt: skip
    assert "value = -inf" in to_toml(spec)
    lifted = lift_task(spec)
    assert lifted.ok and lifted.program is not None
    assert lifted.program.render().splitlines() == [
        f"{n}[i, j, l] = x[i, j, l]" for n in ("m", "s", "o")]  # fmt: skip


HEAD_SCALE = """
__global__ void head_scale(const float* x, float* y, int T, int D, int W) {
    // one block per (batch entry, head): a whole problem of T x D
    const float* xh = x + (blockIdx.x * gridDim.y + blockIdx.y) * T * D;
    float* yh = y + (blockIdx.x * gridDim.y + blockIdx.y) * T * D;
    for (int e = threadIdx.x; e < T * D; e += blockDim.x) yh[e] = 2.0f * xh[e] + W;
}
int main() {
    int B = 8, NH = 12, T = 64, D = 32;
    float *x, *y;
    cudaMalloc(&x, B * NH * T * D * sizeof(float));
    cudaMalloc(&y, B * NH * T * D * sizeof(float));
    dim3 grid(B, NH);
    head_scale<<<grid, 128>>>(x, y, T, D, B);
    return 0;
}
"""


def test_a_grid_of_whole_problems_runs_few_of_them(tmp_path: Path) -> None:
    """`grid(B, NH)`, a block per batch entry and head, whose sizes only multiply the shapes:
    a few problems, a different number of each in every set (B == NH would hide a swapped
    pair), the problems' own sizes as usual."""
    src = tmp_path / "heads.cu"
    src.write_text(HEAD_SCALE)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    sets = list(spec.all_size_sets())
    assert [(s["B"], s["NH"]) for s in sets] == [(4, 5), (2, 3), (3, 2)]
    assert all(s["T"] > 5 and s["D"] > 5 for s in sets)  # the problems keep their sizes
    m = migrate(src, out_dir=tmp_path / "out")
    assert m.kernels[0].status == "complete" and m.kernels[0].check.ok  # type: ignore[union-attr]


ROW_PER_BLOCK = """
__global__ void row_scale(const float* x, float* y, int C) {
    const int row = blockIdx.x * gridDim.y + blockIdx.y;  // one row of C per block
    for (int c = threadIdx.x; c < C; c += blockDim.x) y[row * C + c] = 2.0f * x[row * C + c];
}
int main() {
    int B = 8, T = 64, C = 768;
    float *x, *y;
    cudaMalloc(&x, B * T * C * sizeof(float));
    cudaMalloc(&y, B * T * C * sizeof(float));
    row_scale<<<dim3(B, T), 128>>>(x, y, C);
    return 0;
}
"""


def test_a_grid_of_rows_keeps_many_rows(tmp_path: Path) -> None:
    """`grid(B, T)` with a row of C per block: the problems are rows, which the NKI kernel lays
    on its partitions, so T stays as large as usual (twenty rows would check one small tile;
    B, the outermost axis of 3-D tensors, is a batch of 2-D problems as before)."""
    src = tmp_path / "rows.cu"
    src.write_text(ROW_PER_BLOCK)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert all(s["T"] > 32 and s["C"] > 32 for s in spec.all_size_sets())


OPTIONAL_OUTPUT = """
__global__ void scale_maybe(float* y, float* aux, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = 3.0f * x[i];
        if (aux != NULL) aux[i] = x[i] * x[i];  // written only for a caller that asks
    }
}
int main() {
    int n = 5000;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    scale_maybe<<<(n + 255) / 256, 256>>>(y, (float*)nullptr, x, n);
    return 0;
}
"""


def test_a_pointer_the_launch_passes_as_null_is_no_tensor(tmp_path: Path) -> None:
    """`(float*)nullptr` at the launch: `aux` is no tensor of the task; the original runs with
    a null pointer there (its guarded store never happens) and the task's TOML says so."""
    src = tmp_path / "maybe.cu"
    src.write_text(OPTIONAL_OUTPUT)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert [t.name for t in spec.tensors] == ["x", "y"]
    assert spec.launch.null_args == ["aux"] and 'null_args = ["aux"]' in to_toml(spec)
    x = np.random.default_rng(0).standard_normal(spec.sizes["n"]).astype(np.float32)
    (y,) = run_spec(spec, spec.sizes, inputs={"x": x})
    assert np.allclose(y, 3.0 * x)
    m = migrate(src, out_dir=tmp_path / "out")
    assert m.kernels[0].status == "complete" and m.kernels[0].check.ok  # type: ignore[union-attr]
    assert load_spec(next((tmp_path / "out").glob("*.toml"))).launch.null_args == ["aux"]


VECTOR_ROWS = """
__device__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__global__ void row_sum4(float* out, const float* x, int rows, int width) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = x + (size_t)r * width;  // each row read four floats at a time
    float acc = 0.0f;
    for (int c = 0; c < width; c += 4) {
        float4 v = load4(row + c);
        acc += (v.x + v.y) + (v.z + v.w);
    }
    out[r] = acc;
}
int main() {
    int rows = 1000, width = 50;
    float *x, *out;
    cudaMalloc(&x, rows * width * sizeof(float));
    cudaMalloc(&out, rows * sizeof(float));
    row_sum4<<<(rows + 127) / 128, 128>>>(out, x, rows, width);
    return 0;
}
"""


def test_rows_read_in_vectors_through_a_helper_hold_whole_vectors(tmp_path: Path) -> None:
    """`load4(row + c)` reinterprets a row pointer as float4 in a helper the index algebra does
    not follow: at the host's width of 50 the run makes misaligned reads, so the task states
    `width % 4 == 0` and every size set holds whole vectors (the ragged sets were dropped, or
    at a ragged default nothing could be checked at all)."""
    src = tmp_path / "vecrow.cu"
    src.write_text(VECTOR_ROWS)
    tu = analyze_file(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    assert spec.relations == ["width % 4 == 0"]
    assert all(s["width"] % 4 == 0 for s in spec.all_size_sets()) and spec.size_sets
    m = migrate(src, out_dir=tmp_path / "out")
    assert m.kernels[0].status == "complete" and m.kernels[0].check.ok  # type: ignore[union-attr]


def test_ragged_size_sets_of_whole_vector_rows_are_rounded_not_dropped(tmp_path: Path) -> None:
    """At the host's width of 64 the rows are whole vectors; the inferred sets' widths (130,
    67) are not, and the original stops at a misaligned read there: the migration states
    `width % 4 == 0` and checks at the sets rounded to it (C2N2018) rather than leaving them
    out."""
    src = tmp_path / "vecrow.cu"
    src.write_text(VECTOR_ROWS.replace("width = 50;", "width = 64;"))
    m = migrate(src, out_dir=tmp_path / "out")
    k = m.kernels[0]
    assert k.status == "complete" and k.check.ok  # type: ignore[union-attr]
    assert any(d.id == "C2N2018" for d in k.diagnostics)
    assert not any(d.id == "C2N2016" for d in k.diagnostics)  # nothing dropped
    spec = load_spec(next((tmp_path / "out").glob("*.toml")))
    assert spec.relations == ["width % 4 == 0"] and len(spec.size_sets) == 2
    assert all(s["width"] % 4 == 0 for s in spec.all_size_sets())


ASSERTED = """#include <cassert>
__global__ void column_sums(float* sums, const float* x, int rows, int cols) {
  // one warp per column: lane 0 of each warp adds its column (the launch covers cols / 32 blocks)
  const int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  for (int r = 0; r < rows; ++r) s += x[r * cols + c];
  sums[c] = sums[c] + s;
}
void launch(float* sums, const float* x, int rows, int cols) {
  assert(cols % 32 == 0 && rows > 0);
  if (rows > 100000) { assert(rows % 8 == 0); }
  column_sums<<<cols / 32, 32>>>(sums, x, rows, cols);
}
"""


def test_the_launchers_asserts_are_relations(tmp_path: Path) -> None:
    """`assert(cols % 32 == 0 && rows > 0)` before the launch: its equalities hold at every
    launch (an assert in a branch the launch is not in says nothing): no size set leaves
    columns past the last whole block unwritten (the in-place sums would keep their input
    there, and the lifter would see two different expressions)."""
    src = tmp_path / "asserted.cu"
    src.write_text(ASSERTED)
    tu = analyze_file(src)
    assert tu.launch_sites[0].requires == ["cols % 32 == 0"]
    spec = infer_spec(tu, tu.global_kernels[0])
    assert spec.relations == ["cols % 32 == 0"]
    assert all(s["cols"] % 32 == 0 for s in spec.all_size_sets())
    (k,) = migrate(src, out_dir=tmp_path / "out").kernels
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics


SETTLED = """__host__ __device__ int pow2_at_most(int n) {
  while ((n & (n - 1)) > 0) n = n & (n - 1);
  return n;
}
__global__ void row_sums(float* out, const float* x, int cols) {
  extern __shared__ float part[];
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += x[blockIdx.x * cols + c];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k /= 2) {
    if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}
void launch(float* out, const float* x, int rows, int cols, int threads) {
  threads = pow2_at_most(threads);
  row_sums<<<rows, threads, threads * sizeof(float)>>>(out, x, cols);
}
int main() {
  int threads = 200;
  launch(nullptr, nullptr, 100, 300, threads);
}
"""


def test_a_launch_size_a_helper_settles_at_run_time_is_a_size(tmp_path: Path) -> None:
    """`threads = pow2_at_most(threads)`, a helper with a loop (nothing the host helpers
    inline): the host settles the block size at run time, so it is a size of its own (a
    launch-only one), where inference gave up on the helper's name."""
    src = tmp_path / "settled.cu"
    src.write_text(SETTLED)
    spec = infer_spec(analyze_file(src), analyze_file(src).global_kernels[0])
    assert spec.launch.block == ["threads"]
    threads = spec.sizes["threads"]
    assert all(s["threads"] == threads for s in spec.all_size_sets())
    (k,) = migrate(src, out_dir=tmp_path / "out").kernels
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics


def test_probe_indices_that_cover_a_table_are_its_last_row_without_a_draw() -> None:
    """A gather's probe indices all point at the table's last row (so the reach is the table's
    extent): made as that one value, read-only unless the kernel writes them, and only the
    last few kept between probes (each size set has its own table)."""
    from migrator.infer import measure

    ro = measure._probe_values(np.dtype(np.int32), 37, 1000, cover=True, writable=False)
    assert ro.shape == (1000,) and (ro == 36).all() and not ro.flags.writeable
    rw = measure._probe_values(np.dtype(np.int32), 37, 10, cover=True)
    assert rw.flags.writeable and (rw == 36).all()
    rw[:] = 0  # a copy: the kept block is unchanged
    again = measure._probe_values(np.dtype(np.int32), 37, 1000, cover=True, writable=False)
    assert (again == 36).all()
    for high in range(2, 12):
        measure._probe_values(np.dtype(np.int64), high, 5, cover=True)
    assert len(measure._PROBE_COVER) <= measure.PROBE_COVER_KEPT


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
def test_writable_probe_values_are_private_copies_of_one_draw(dtype: str) -> None:
    """Each writable copy holds the block's values, and a store into one changes neither the
    block nor another copy (on Linux they are private mappings of one in-memory file, pages
    copied on write; elsewhere plain copies: the same values either way)."""
    from migrator.contract import np_dtype
    from migrator.infer import measure

    measure._PROBE_VALUES.clear()
    dt = np_dtype(dtype)
    first = measure._probe_values(dt, 50, 5000)
    second = measure._probe_values(dt, 50, 5000)
    ro = measure._probe_values(dt, 50, 5000, writable=False)
    assert first.flags.writeable and second.flags.writeable and not ro.flags.writeable
    assert first.dtype == dt and first.shape == (5000,)
    want = ro.astype(np.float64).copy()
    assert (first.astype(np.float64) == want).all() and (second.astype(np.float64) == want).all()
    first[:] = 7
    first[4999] = 1
    assert (second.astype(np.float64) == want).all()
    block = measure._probe_values(dt, 50, 5000, writable=False)
    assert (block.astype(np.float64) == want).all()
    assert (first[:-1].astype(np.float64) == 7).all()
    with pytest.raises(ValueError):
        ro[0] = 1  # the block itself is read-only
    measure._PROBE_VALUES.clear()


def test_an_inferred_task_too_large_for_the_oracle_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every run of the original allocates the task's tensors: a shape the host fixes past
    MAX_ELEMENTS (here lowered to 1000 for a 4096-element table) is refused, not run."""
    import migrator.infer.spec as inferred

    src = tmp_path / "table.cu"
    src.write_text(
        "__global__ void scale(const float* x, float* y) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  y[i] = 2.0f * x[i];\n}\n"
        "int main() {\n  float *x, *y;\n  scale<<<32, 128>>>(x, y);\n  return 0;\n}\n"
    )
    tu = analyze_file(src)
    assert math.prod(infer_spec(tu, tu.global_kernels[0]).shape_of(
        infer_spec(tu, tu.global_kernels[0]).tensors[0], {})) == 4096  # fmt: skip
    monkeypatch.setattr(inferred, "MAX_ELEMENTS", 1000)
    with pytest.raises(InferenceError, match="would hold 4096 elements"):
        infer_spec(tu, tu.global_kernels[0])


ROWS_AGAIN = Path(__file__).resolve().parent / "data" / "rows_again.cu"


@pytest.mark.parametrize("cores", [1, 2])
def test_a_kernel_whose_threads_loop_over_every_row_keeps_its_loop_steps_capped(
    monkeypatch: pytest.MonkeyPatch, cores: int
) -> None:
    """Every block of `rows_again_measured` loops over all B * H rows of T * T: a run's cost
    is the B * H * T * T steps each thread takes, which no tensor shows (at B = 4, H = 8,
    T = 32 a run took seconds). Every size set stays within NEST_STEPS of them, the sets
    still distinct and obeying `C % H == 0`, and the measured extent of x is what it was.
    On two cores too, where an attempt's first batch is larger (its fifth run, unless that
    one is past the cap: it took llm.c's naive attention backward from 3 to 8 s)."""
    from migrator import workers
    from migrator.cuda.steps import nest_steps, step_nests
    from migrator.infer import measure
    from migrator.infer.measure import NEST_STEPS

    if cores == 2:  # (the batches as two cores make them, run here where each is seen)
        monkeypatch.setattr(workers, "workers", lambda: 2)
        monkeypatch.setattr(workers, "map_jobs", lambda fn, items, *a, **k: [fn(x) for x in items])

    tu = analyze_file(ROWS_AGAIN)
    kernel = next(k for k in tu.global_kernels if k.name == "rows_again_measured")
    probed: list[dict[str, int]] = []
    run = measure._probe_run

    def probe(*args: object, **kwargs: object) -> object:
        probed.append(dict(args[3]))  # type: ignore[call-overload]
        return run(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(measure, "_probe_run", probe)
    monkeypatch.setattr(measure, "_PROBES", {})
    if cores == 1:
        monkeypatch.setenv("C2N_WORKERS", "1")  # (every probe in this process, where it is seen)
    spec = infer_spec(tu, kernel)
    nests = step_nests(kernel, {"B": "B", "H": "H", "T": "T"})
    sets = list(spec.all_size_sets())
    assert ("T", "T", "H", "B") in nests
    assert all(nest_steps(nests, s) <= NEST_STEPS for s in sets), sets
    # (the measurement's probes past the cap ran last, and the cheaper ones had decided)
    assert probed and all(nest_steps(nests, s) <= NEST_STEPS for s in probed), probed
    assert len({tuple(sorted(s.items())) for s in sets}) == len(sets)
    assert "C % H == 0" in spec.relations and all(s["C"] % s["H"] == 0 for s in sets)
    shapes = {t.name: [str(d) for d in t.shape] for t in spec.tensors}
    assert shapes["x"] == ["B * H * T*T"] and shapes["out"] == ["B", "H", "T", "T"]


def test_a_shape_check_of_many_loop_steps_runs_beside_the_measurement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shape check's run of a kernel whose threads loop past CHECK_AHEAD_STEPS is made in
    a second process while the measurement's probes run here, the measured tensors as large
    buffers: this process never makes it (the probe memo has it at the join), and the spec
    is the one a single process infers."""
    from migrator import workers as workers_module
    from migrator.infer import measure
    from migrator.infer import spec as inferred

    tu = analyze_file(ROWS_AGAIN)
    kernel = next(k for k in tu.global_kernels if k.name == "rows_again_measured")
    real_once, real_ahead = measure._probe_once, inferred._check_ahead
    made: list[tuple[frozenset[str], tuple[tuple[str, int], ...]]] = []
    started: list[object] = []

    def once(parsed: object, data: object, big: object, sz: dict[str, int], *a: object) -> object:
        made.append((frozenset(big), tuple(sorted(sz.items()))))  # type: ignore[arg-type]
        return real_once(parsed, data, big, sz, *a)  # type: ignore[arg-type]

    def check_ahead(*a: object) -> object:
        got = real_ahead(*a)  # type: ignore[arg-type]
        started.append(got)
        return got

    monkeypatch.setattr(measure, "_probe_once", once)
    monkeypatch.setattr(inferred, "_check_ahead", check_ahead)
    # (a thread another test left running would stop the fork: its locks are not ours)
    monkeypatch.setattr(workers_module.threading, "active_count", lambda: 1)
    specs, here = [], []
    for workers in ("1", "2"):
        made.clear()
        started.clear()
        monkeypatch.setattr(measure, "_PROBES", {})
        monkeypatch.setattr(inferred, "_PROBES", measure._PROBES)
        monkeypatch.setenv("C2N_WORKERS", workers)
        specs.append(infer_spec(tu, kernel).model_dump_json())
        here.append((list(made), list(started)))
    assert specs[0] == specs[1]
    (one, started_one), (two, started_two) = here
    assert started_one == [None] and started_two[0] is not None  # (one core: nothing forked)
    # the check's run (on two cores with the measured tensor x a large buffer) was made here
    # on one core, and not here on two; every probe of the measurement was made here on both
    checks = [m for m in one if m not in two]
    assert len(checks) == 1 and checks[0][0] == frozenset(), (one, two)
    assert [m for m in two if m not in one] == [] and len(two) == len(one) - 1


MACRO_HEADS = """#define HEADS(NAME, OP)                                                      \\
    __global__ void NAME(float* y, const float* x, int N, int C, int NH) {        \\
        int i = blockIdx.x * blockDim.x + threadIdx.x;                            \\
        int hs = C / NH;                                                          \\
        if (i < N * C) y[i] = OP(x[i]) / (float)hs;                               \\
    }
#define TWICE(v) (2.0f * (v))
HEADS(heads_scaled, TWICE)

void launch(float* y, const float* x, int N, int C, int NH) {
    heads_scaled<<<(N * C + 255) / 256, 256>>>(y, x, N, C, NH);
}
"""


def test_a_kernel_a_macro_defines_is_read_from_its_expansion(tmp_path: Path) -> None:
    """`#define HEADS(NAME, OP) __global__ void NAME(...) {...}`: the lines as written hold
    the invocation, so what inference reads from the kernel's text (`int hs = C / NH`: the
    task's `C % NH == 0`) is read from the expansion."""
    src = tmp_path / "heads.cu"
    src.write_text(MACRO_HEADS)
    tu = analyze_file(src)
    (k,) = tu.global_kernels
    assert k.expanded is not None and "C / NH" in k.expanded
    spec = infer_spec(tu, k)
    assert "C % NH == 0" in spec.relations
    assert all(s["C"] % s["NH"] == 0 for s in spec.all_size_sets())
