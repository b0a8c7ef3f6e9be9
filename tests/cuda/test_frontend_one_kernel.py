"""`analyze(parsed, kernel)`: one kernel and the device functions it reaches, as the whole
file's analysis has them."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.cuda import frontend
from migrator.cuda.frontend import analyze, analyze_file
from migrator.cuda.parse import parse_text

SOURCE = """
template <typename T>
__device__ T square(T v) { return v * v; }

template <typename T>
__device__ T sum_squares(const T* x, int n) {
  T s = 0;
  for (int i = 0; i < n; ++i) s += square<T>(x[i]);
  return s;
}

__device__ float unused_helper(float v) { return v + 1.0f; }

template <typename T>
__global__ void row_energy(const T* x, T* out, int n) {
  out[blockIdx.x] = sum_squares<T>(x + blockIdx.x * n, n);
}

__global__ void scale(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * unused_helper(x[i]);
}

// a host function that shares a kernel's name (llm.c names its launchers after them)
__global__ void shift(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}

template <typename Tx>
void run_energy(const Tx* x, Tx* out, int rows, int n) {
  row_energy<<<rows, 1>>>(x, out, n);
}

void shift(const float* x, float* y, int n) { shift<<<(n + 255) / 256, 256>>>(x, y, n); }

void host(const float* x, float* out, float* y, int rows, int n) {
  run_energy(x, out, rows, n);
  scale<<<(n + 255) / 256, 256>>>(x, y, 2.0f, n);
}
"""


@pytest.mark.parametrize("kernel", ["row_energy", "scale", "shift"])
def test_one_kernel_is_analysed_as_in_the_whole_file(kernel: str) -> None:
    parsed = parse_text(SOURCE, "t.cu")
    whole = analyze(parsed)
    one = analyze(parsed, kernel)
    assert one.kernel(kernel) == whole.kernel(kernel)
    for k in one.kernels:  # each function analysed is the whole file's
        assert k == whole.kernel(k.name)
    assert one.launch_sites == whole.launch_sites  # every launch, read as before
    assert one.diagnostics == whole.diagnostics
    assert one.host_helpers == whole.host_helpers


def test_only_the_functions_a_kernel_reaches_are_analysed() -> None:
    parsed = parse_text(SOURCE, "t.cu")
    assert {k.name for k in analyze(parsed, "row_energy").kernels} == {
        "row_energy", "sum_squares", "square"
    }  # fmt: skip
    assert {k.name for k in analyze(parsed, "scale").kernels} == {"scale", "unused_helper"}
    assert {k.name for k in analyze(parsed, "shift").kernels} == {"shift"}
    # the template argument the host template binds reaches the helpers as before
    whole = analyze(parsed)
    assert whole.kernel("square").instantiations
    assert analyze(parsed, "row_energy").kernel("square") == whole.kernel("square")


def test_analyze_file_names_every_kernel_when_the_one_asked_is_not_there(
    tmp_path: Path,
) -> None:
    cu = tmp_path / "t.cu"
    cu.write_text(SOURCE)
    frontend._ANALYSED.clear()
    tu = analyze_file(cu, kernel="no_such_kernel")
    assert {k.name for k in tu.global_kernels} == {"row_energy", "scale", "shift"}
    one = analyze_file(cu, kernel="scale")  # the whole file, memoised, serves one kernel too
    assert one.kernel("scale") == tu.kernel("scale")


def test_a_launch_of_no_kernel_is_reported_whether_or_not_one_kernel_is_analysed() -> None:
    src = (
        "__global__ void k(float* y) { y[threadIdx.x] = 1.0f; }\n"
        "void not_a_kernel(float* y) {}\n"
        "void host(float* y) {\n  k<<<1, 32>>>(y);\n  not_a_kernel<<<1, 32>>>(y);\n}\n"
    )
    parsed = parse_text(src, "t.cu")
    assert [d.id for d in analyze(parsed).diagnostics] == ["C2N1017"]  # UNKNOWN_LAUNCH_TARGET
    assert analyze(parsed, "k").diagnostics == analyze(parsed).diagnostics
