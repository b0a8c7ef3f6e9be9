"""Idioms from real elementwise and row kernels that the lifter must see through: piecewise
branches the traced inputs never take, compound and intrinsic conditions, 128-bit copies of
eight halves, flat rows (`x[k + C*(i // C)]`), each verified and migrated without a spec."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from migrator.migration import migrate

HOST = """
int main() {{
    int n = 4096;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    {launch}
    return 0;
}}
"""

CASES = {
    # a branch no normal input takes (|x| >= 3) still belongs to the program
    "piecewise": (
        """
        __device__ float hs(float x) {
            if (x >= 3.f) { return x; }
            else if (x <= -3.f) { return 0.f; }
            else { return x * (x + 3.f) / 6.f; }
        }
        __global__ void piecewise(float* x, float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) y[i] = hs(x[i]);
        }
        """,
        "piecewise<<<(n + 255) / 256, 256>>>(x, y, n);",
        ">= 3",
    ),
    # `a || b` of comparisons
    "shrink": (
        """
        __device__ float shrink(float x) {
            if (x > 0.5f || x < -0.5f) { return x; } else { return 0.f; }
        }
        __global__ void shrink_k(float* x, float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) y[i] = shrink(x[i]);
        }
        """,
        "shrink_k<<<(n + 255) / 256, 256>>>(x, y, n);",
        "< -0.5",
    ),
    # eight halves moved as one float4 (the 128-bit copy idiom), half2 arithmetic between
    "pack": (
        """
        #include <cuda_fp16.h>
        #define LDST128(v) (reinterpret_cast<float4 *>(&(v))[0])
        #define H2(v) (reinterpret_cast<half2 *>(&(v))[0])
        __global__ void pack_k(half* x, half* y, int n) {
            int i = 8 * (blockIdx.x * blockDim.x + threadIdx.x);
            half a[8], b[8];
            if (i + 7 < n) {
                LDST128(a[0]) = LDST128(x[i]);
                for (int j = 0; j < 8; j += 2) H2(b[j]) = __hadd2(H2(a[j]), H2(a[j]));
                LDST128(y[i]) = LDST128(b[0]);
            }
        }
        """,
        "pack_k<<<(n / 8 + 255) / 256, 256>>>((half*)x, (half*)y, n);",
        "x[i] + x[i]",
    ),
    # coshf (no NKI function of its own) traced as its exponentials; `exp(a) + exp(-a)` is two
    # terms of one shape that are no reduction
    "sech": (
        """
        __global__ void sech_k(float* x, float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) { float c = coshf(0.5f * x[i]); y[i] = 1.0f / (c * c); }
        }
        """,
        "sech_k<<<(n + 255) / 256, 256>>>(x, y, n);",
        "exp(-0.5 * x[i])",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_idiom_migrates_from_its_lifted_program(name: str, tmp_path: Path) -> None:
    cuda, launch, expect = CASES[name]
    src = tmp_path / f"{name}.cu"
    src.write_text(textwrap.dedent(cuda) + HOST.format(launch=launch))
    (k,) = migrate(src, out_dir=tmp_path / "out").kernels
    assert k.lifted is not None and k.lifted.ok, k.lifted.render() if k.lifted else None
    assert expect in k.lifted.program.render()  # type: ignore[union-attr]
    assert k.status == "complete", [d.render() for d in k.diagnostics]
    assert k.check is not None and k.check.ok
    assert "C2N2013" in {d.id for d in k.diagnostics}  # the report names the lifted program


def test_flat_rows_lift_and_lower_as_rows(tmp_path: Path) -> None:
    """RMS norm over a flat tensor, one block per row of 64, a shared-memory tree: the rows
    are `x[k + 64*(i // 64)]`, lowered as a [rows, 64] view."""
    cuda = """
    #define T 64
    __global__ void rms(float* x, float* y, int n) {
        __shared__ float s[T];
        int i = blockIdx.x * T + threadIdx.x;
        float v = x[i];
        s[threadIdx.x] = v * v;
        __syncthreads();
        for (int h = T / 2; h > 0; h >>= 1) {
            if (threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
            __syncthreads();
        }
        y[i] = v * rsqrtf(s[0] / T + 1e-5f);
    }
    """
    src = tmp_path / "rms.cu"
    src.write_text(textwrap.dedent(cuda) + HOST.format(launch="rms<<<n / 64, 64>>>(x, y, n);"))
    (k,) = migrate(src, out_dir=tmp_path / "out").kernels
    assert k.family == "rows" and k.status == "complete", [d.render() for d in k.diagnostics]
    assert "reshape" in (k.nki_source or "")


def test_linear_layer_and_flat_bias_migrate_without_a_spec(tmp_path: Path) -> None:
    """`out = inp @ weight^T + bias` with the weight stored (OC, C) and rows flattened as
    `B * T` (one thread per output, bias optional), and a bias added over the flat output
    (`out[i] += bias[i % OC]`): both complete, the first as a matmul with B stored [N, K]."""
    cuda = """
    __global__ void linear(float* out, const float* inp, const float* weight,
                           const float* bias, int BT, int C, int OC) {
        int bt = blockIdx.x * blockDim.x + threadIdx.x;
        int oc = blockIdx.y * blockDim.y + threadIdx.y;
        if (bt < BT && oc < OC) {
            float val = (bias != NULL) ? bias[oc] : 0.0f;
            const float* wrow = weight + oc * C;
            const float* inp_bt = inp + bt * C;
            for (int i = 0; i < C; i++) val += inp_bt[i] * wrow[i];
            out[bt * OC + oc] = val;
        }
    }
    __global__ void add_bias(float* out, const float* bias, int B, int T, int OC) {
        int idx = blockIdx.x * blockDim.x + threadIdx.x;
        for (int i = idx; i < B * T * OC; i += gridDim.x * blockDim.x) out[i] += bias[i % OC];
    }
    int main() {
        int B = 4, T = 32, C = 96, OC = 80;
        float *out, *inp, *w, *b;
        cudaMalloc(&out, B * T * OC * sizeof(float));
        cudaMalloc(&inp, B * T * C * sizeof(float));
        cudaMalloc(&w, OC * C * sizeof(float));
        cudaMalloc(&b, OC * sizeof(float));
        dim3 grid((B * T + 7) / 8, (OC + 7) / 8), block(8, 8);
        linear<<<grid, block>>>(out, inp, w, b, B * T, C, OC);
        add_bias<<<(B * T * OC + 255) / 256, 256>>>(out, b, B, T, OC);
        return 0;
    }
    """
    src = tmp_path / "linear.cu"
    src.write_text(textwrap.dedent(cuda))
    m = migrate(src, out_dir=tmp_path / "out")
    by = {k.kernel: k for k in m.kernels}
    lin, bias = by["linear"], by["add_bias"]
    assert lin.status == "complete" and lin.family == "matmul", [
        d.render() for d in lin.diagnostics
    ]
    assert lin.plan is not None and lin.plan["fields"]["b_transposed"]
    assert bias.status == "complete", [d.render() for d in bias.diagnostics]


def test_flat_transpose_gets_2d_views_and_a_truncating_launch_is_named(tmp_path: Path) -> None:
    """A 1-D launch over a flat matrix that splits its index (`r = i / cols`, `c = i % cols`)
    and stores through a float4 view of a local: lifted as `y[i] = x[(i // M) + N*(i % M)]`,
    the inferred spec is rewritten with the 2-D views the program shows (x[M, N], y[N, M]),
    and it lowers as a transpose. The host's grid rounds down, so at ragged sizes the original
    leaves elements unwritten: the check does not compare them and the report says so."""
    cuda = """
    #define F4(v) (reinterpret_cast<float4 *>(&(v))[0])
    __global__ void tr(float* x, float* y, int rows, int cols) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        int r = (4 * i) / cols, c = (4 * i) % cols;
        if (r < rows && c + 3 < cols) {
            float4 v = reinterpret_cast<float4 *>(x)[i];
            float4 w;
            F4(w) = F4(v);
            y[c * rows + r] = w.x;
            y[(c + 1) * rows + r] = w.y;
            y[(c + 2) * rows + r] = w.z;
            y[(c + 3) * rows + r] = w.w;
        }
    }
    int main() {
        int M = 256, N = 512;
        float *x, *y;
        cudaMalloc(&x, M * N * sizeof(float));
        cudaMalloc(&y, M * N * sizeof(float));
        tr<<<M * N / 4 / 256, 256>>>(x, y, M, N);
        return 0;
    }
    """
    src = tmp_path / "tr.cu"
    src.write_text(textwrap.dedent(cuda))
    (k,) = migrate(src, out_dir=tmp_path / "out").kernels
    assert k.status == "complete" and k.family == "transpose", [d.render() for d in k.diagnostics]
    assert k.lifted is not None and k.lifted.program is not None
    assert k.lifted.program.render() == "y[i, j] = x[j, i]"
    spec = (tmp_path / "out" / "tr.inferred.toml").read_text()
    assert 'shape = ["M", "N"]' in spec and 'shape = ["N", "M"]' in spec
    ids = [d.id for d in k.diagnostics]
    assert k.check is not None and k.check.ok
    unwritten = sum(o.unwritten for s in k.check.sizes for o in s.outputs)
    assert unwritten > 0 and "C2N2015" in ids
    assert k.check.sizes[0].outputs[0].unwritten == 0  # the default sizes: all written


def test_switch_case_launch_fixes_the_block_to_its_case(tmp_path: Path) -> None:
    """`switch (H) { case 32: k<32><<<S, H>>>` (a torch-binding dispatch): at this launch H is
    32, a constant, not a size: a per-row softmax whose block reduction is sized by the template
    argument is only right at that width, and the inferred spec must say so."""
    cuda = """
    template <int NT>
    __global__ void sm(float* x, float* y, int n) {
        __shared__ float s[NT];
        int i = blockIdx.x * NT + threadIdx.x;
        float e = expf(x[i]);
        s[threadIdx.x] = e;
        __syncthreads();
        for (int h = NT / 2; h > 0; h >>= 1) {
            if (threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
            __syncthreads();
        }
        y[i] = e / s[0];
    }
    void launch(float* x, float* y, int S, int H) {
        dim3 block(H), grid(S);
        switch (H) {
        case 32: sm<32><<<grid, block>>>(x, y, S * H); break;
        case 64: sm<64><<<grid, block>>>(x, y, S * H); break;
        }
    }
    """
    src = tmp_path / "sm.cu"
    src.write_text(textwrap.dedent(cuda))
    m = migrate(src, out_dir=tmp_path / "out", kernel="sm")
    (k,) = m.kernels
    spec = (tmp_path / "out" / "sm.inferred.toml").read_text()
    assert 'block = ["32"]' in spec, spec
    assert k.status == "complete", [d.render() for d in k.diagnostics]
    assert k.family == "rows"


PACKED128 = """
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;
// llm.c's Packed128 idiom: eight bf16 moved as one int4, copied in and out with memcpy
template <class E>
struct alignas(16) P128 {
    P128() = default;
    __device__ explicit P128(int4 bits) { memcpy(&payload, &bits, sizeof(bits)); }
    __device__ E& operator[](int i) { return payload[i]; }
    __device__ int4 get_bits() const {
        int4 bits;
        memcpy(&bits, &payload, sizeof(bits));
        return bits;
    }
    static constexpr const int size = sizeof(int4) / sizeof(E);
    E payload[size];
};
typedef P128<floatX> x128;
template <class E> __device__ P128<E> load128cs(const E* a) {
    return P128<E>{__ldcs(reinterpret_cast<const int4*>(a))};
}
template <class E> __device__ void store128(E* t, P128<E> v) {
    *reinterpret_cast<int4*>(t) = v.get_bits();
}
__global__ void scale2(floatX* out, const floatX* inp, int N) {
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (i < N) {
        x128 o;
        x128 a = load128cs(inp + i);
        for (int k = 0; k < a.size; ++k) o[k] = (floatX)(2.0f * (float)a[k]);
        store128(out + i, o);
    }
}
int main() {
    int N = 8192;
    floatX *out, *inp;
    cudaMalloc(&out, N * sizeof(floatX));
    cudaMalloc(&inp, N * sizeof(floatX));
    scale2<<<(N + 8 * 128 - 1) / (8 * 128), 128>>>(out, inp, N);
}
"""


def test_packed128_bits_copied_with_memcpy_lift_and_unrunnable_sizes_are_dropped(
    tmp_path: Path,
) -> None:
    """The traced run follows eight bf16 through an int4 and memcpy both ways (regrouped
    elements, no bytes); the inferred ragged size sets at which the original cannot even run
    (an int4 view of a 74-byte buffer) are left out of the spec, and the report says so."""
    src = tmp_path / "p128.cu"
    src.write_text(PACKED128)
    (k,) = migrate(src, out_dir=tmp_path / "out").kernels
    assert k.status == "complete", [d.render() for d in k.diagnostics]
    assert k.lifted is not None and k.lifted.program is not None
    assert k.lifted.program.render() == "out[i] = 2 * inp[i]"
    assert "C2N2016" in {d.id for d in k.diagnostics}
    assert k.check is not None and k.check.ok and not any(s.cuda_error for s in k.check.sizes)


def test_a_running_max_spelled_as_an_if_is_a_max_reduction(tmp_path: Path) -> None:
    """`if (x > m) m = x;` over a row (one thread per row, as a naive softmax does): the traced
    selects canonicalise to a max, so the row program lowers as rows, not as a select chain."""
    cuda = """
    __global__ void centre(const float* x, float* y, int R, int C) {
        int r = blockIdx.x * blockDim.x + threadIdx.x;
        if (r < R) {
            const float* row = x + r * C;
            float m = -INFINITY;
            for (int c = 0; c < C; c++) {
                if (row[c] > m) { m = row[c]; }
            }
            for (int c = 0; c < C; c++) y[r * C + c] = row[c] - m;
        }
    }
    int main() {
        int R = 300, C = 40;
        float *x, *y;
        cudaMalloc(&x, R * C * sizeof(float));
        cudaMalloc(&y, R * C * sizeof(float));
        centre<<<(R + 31) / 32, 32>>>(x, y, R, C);
        return 0;
    }
    """
    src = tmp_path / "centre.cu"
    src.write_text(textwrap.dedent(cuda))
    (k,) = migrate(src, out_dir=tmp_path / "out").kernels
    assert k.lifted is not None and k.lifted.program is not None
    assert "max_{" in k.lifted.program.render() and "?" not in k.lifted.program.render()
    assert k.status == "complete" and k.family == "rows", [d.render() for d in k.diagnostics]


def test_a_cg_reduce_with_greater_is_a_max_of_the_row(tmp_path: Path) -> None:
    """`cg::reduce(warp, v, cg::greater<float>())` keeps the larger value at every step: traced,
    it is the max the kernel computes, not the element this run's data made the largest."""
    cuda = """
    #include <cooperative_groups.h>
    #include <cooperative_groups/reduce.h>
    namespace cg = cooperative_groups;
    __global__ void centre(const float* x, float* y, int R, int C) {
        cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
        int r = blockIdx.x;
        const float* row = x + r * C;
        float m = -INFINITY;
        for (int c = warp.thread_rank(); c < C; c += 32) m = fmaxf(m, row[c]);
        m = cg::reduce(warp, m, cg::greater<float>());
        for (int c = warp.thread_rank(); c < C; c += 32) y[r * C + c] = row[c] - m;
    }
    int main() {
        int R = 300, C = 40;
        float *x, *y;
        cudaMalloc(&x, R * C * sizeof(float));
        cudaMalloc(&y, R * C * sizeof(float));
        centre<<<R, 32>>>(x, y, R, C);
        return 0;
    }
    """
    src = tmp_path / "centre.cu"
    src.write_text(textwrap.dedent(cuda))
    (k,) = migrate(src, out_dir=tmp_path / "out").kernels
    assert k.lifted is not None and k.lifted.program is not None, k.diagnostics
    assert "max_{" in k.lifted.program.render()
    assert k.status == "complete" and k.family == "rows", [d.render() for d in k.diagnostics]


def test_warp_per_row_layernorm_with_cg_reduce_and_int4_loads(tmp_path: Path) -> None:
    """One warp per row (`cg::tiled_partition<32>`, `cg::reduce`), floats loaded as int4 bits
    and memcpy'd back, the variance as E[x^2] - E[x]^2 (a 1/C^2 term), launched with a host
    block size: traced with whole warps, lifted over the flat tensors, and emitted over the
    [N, C] views the program shows (the NKI kernel could not read C from x[C * N])."""
    src = tmp_path / "ln.cu"
    src.write_text(LN_CG)
    (k,) = migrate(src, out_dir=tmp_path / "out").kernels
    assert k.status == "complete" and k.family == "rows", [d.render() for d in k.diagnostics]
    spec = (tmp_path / "out" / "ln.inferred.toml").read_text()
    assert 'shape = ["N", "C"]' in spec, spec


LN_CG = """#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
struct alignas(16) F4 { float v[4]; };
__device__ F4 ld(const float* p) {
    int4 b = *reinterpret_cast<const int4*>(p);
    F4 r;
    memcpy(&r.v, &b, sizeof(b));
    return r;
}
__global__ void ln(const float* x, float* y, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int row = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (row >= N) return;
    const float* xr = x + row * C;
    float s = 0.0f, ss = 0.0f;
    for (int c = 4 * warp.thread_rank(); c < C; c += 4 * warp.size()) {
        F4 v = ld(xr + c);
        for (int k = 0; k < 4; k++) { s += v.v[k]; ss += v.v[k] * v.v[k]; }
    }
    s = cg::reduce(warp, s, cg::plus<float>{}) / C;
    ss = cg::reduce(warp, ss, cg::plus<float>{}) / C;
    float r = rsqrtf(ss - s * s + 1e-5f);
    for (int c = warp.thread_rank(); c < C; c += warp.size()) y[row * C + c] = (xr[c] - s) * r;
}
int main() {
    int N = 256, C = 128;
    int block_size = 128;
    float *x, *y;
    cudaMalloc(&x, N * C * sizeof(float));
    cudaMalloc(&y, N * C * sizeof(float));
    ln<<<(N * 32 + block_size - 1) / block_size, block_size>>>(x, y, N, C);
}
"""


def test_a_half_precision_tree_sum_checks_against_the_exact_result(tmp_path: Path) -> None:
    """A row sum accumulated in half in a shared-memory tree: the original itself is off by
    its rounding, the NKI kernel (fp32 accumulation) is closer to the exact sum. The lift
    verifies within the unit roundoff times the terms' magnitude, and the check allows the NKI
    kernel as much as the original's own distance from the exact result (reported)."""
    src = tmp_path / "ht.cu"
    src.write_text(HALF_TREE)
    (k,) = migrate(src, out_dir=tmp_path / "out").kernels
    assert k.status == "complete" and k.family == "rows", [d.render() for d in k.diagnostics]
    assert k.check is not None and k.check.ok
    assert any(o.allowance > 0 for s in k.check.sizes for o in s.outputs)


HALF_TANH = """#include <cuda_fp16.h>
// tanh(2x) written with exponentials in half: hexp(4x) passes 65504 for x > 2.77, where the
// original returns inf / inf = NaN
__global__ void tanh2_h(const half* x, half* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        half e = hexp(__float2half(SCALE) * x[i]);
        y[i] = (e - __float2half(1.f)) / (e + __float2half(1.f));
    }
}
int main() {
    int n = 65536;
    half *x, *y;
    cudaMalloc(&x, n * sizeof(half));
    cudaMalloc(&y, n * sizeof(half));
    tanh2_h<<<(n + 255) / 256, 256>>>(x, y, n);
}
"""


@pytest.mark.parametrize("scale,excused", [(4, True), (8, False)])
def test_a_half_original_that_overflows_its_range_is_held_to_the_exact_result(
    tmp_path: Path, scale: int, excused: bool
) -> None:
    """A few elements where the half-precision original overflows (NaN from inf / inf) and the
    exact result is finite are its precision's limit: the lift does not compare them (and says
    so), the check holds the NKI kernel to the exact result there (and counts them). When many
    elements overflow (8% here) nothing is excused: no program is emitted."""
    src = tmp_path / "tanh2.cu"
    src.write_text(HALF_TANH.replace("SCALE", f"{scale}.f"))
    m = migrate(src, out_dir=tmp_path / "out")
    (k,) = m.kernels
    if not excused:
        assert k.status != "complete", [d.render() for d in k.diagnostics]
        assert k.lifted is not None and not k.lifted.ok
        return
    assert k.status == "complete", [d.render() for d in k.diagnostics]
    assert k.lifted is not None and any("overflows" in (v.note or "") for v in k.lifted.verified)
    assert k.check is not None and k.check.ok
    assert any(o.overflowed > 0 for s in k.check.sizes for o in s.outputs)
    from migrator.report import markdown

    assert "overflows its precision" in markdown(m)


HALF_TREE = """#include <cuda_fp16.h>
// one block per row of 512 halves, a shared-memory tree in half precision
#define C 512
__global__ void rowsum_tree(const half* x, half* y) {
    __shared__ half s[256];
    const half* row = x + blockIdx.x * C;
    s[threadIdx.x] = __hadd(row[threadIdx.x], row[threadIdx.x + 256]);
    __syncthreads();
    for (int h = 128; h > 0; h >>= 1) {
        if (threadIdx.x < h) s[threadIdx.x] = __hadd(s[threadIdx.x], s[threadIdx.x + h]);
        __syncthreads();
    }
    if (threadIdx.x == 0) y[blockIdx.x] = s[0];
}
int main() {
    int R = 300;
    half *x, *y;
    cudaMalloc(&x, R * C * sizeof(half));
    cudaMalloc(&y, R * sizeof(half));
    rowsum_tree<<<R, 256>>>(x, y);
}
"""


COLSUM = """
// a bias gradient: one thread per column sums it down the rows and adds to the old value
__global__ void bias_grad(float* dbias, const float* dout, int R, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) {
        float s = 0.0f;
        for (int r = 0; r < R; r++) s += dout[r * C + c];
        dbias[c] += s;
    }
}
int main() {
    int R = 300, C = 700;
    float *dbias, *dout;
    cudaMalloc(&dbias, C * sizeof(float));
    cudaMalloc(&dout, R * C * sizeof(float));
    bias_grad<<<(C + 127) / 128, 128>>>(dbias, dout, R, C);
}
"""


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_a_column_sum_lowers_to_ones_vector_matmuls(tmp_path: Path, api: str) -> None:
    """`dbias[j] += sum_k dout[k, j]`: row tiles on the partitions, summed across them by a
    ones-vector matmul accumulating in PSUM, column blocks of 512 (700 columns: a partial
    block), the old value added; both dialects."""
    src = tmp_path / "colsum.cu"
    src.write_text(COLSUM)
    (k,) = migrate(src, out_dir=tmp_path / "out", nki_api=api).kernels
    assert k.status == "complete", [d.render() for d in k.diagnostics]
    assert k.variant == "columns"
    assert k.check is not None and k.check.ok


def test_a_program_too_large_to_verify_at_first_reading_is_decided_by_the_second_fit(
    tmp_path: Path,
) -> None:
    """Rows of 64 (a template argument) traced at N = 8 rows: reading 64 as N * N makes every
    verification set too large to evaluate, which proves nothing. The second fit of the same
    pair decides that 64 is a constant; the lifter must not move on to larger, slower traces."""
    from migrator.api import inspect
    from migrator.infer import infer_spec
    from migrator.lift.lifter import lift_task, trace_pairs

    cuda = """
    template <int T = 64>
    __global__ void center_scale(float* x, float* y, int N, int K) {
        __shared__ float s[T];
        __shared__ float mean, var;
        int tid = threadIdx.x;
        int i = blockIdx.x * K + tid;
        float v = (i < N * K) ? x[i] : 0.0f;
        s[tid] = v;
        __syncthreads();
        for (int h = T / 2; h > 0; h >>= 1) {
            if (tid < h) s[tid] += s[tid + h];
            __syncthreads();
        }
        if (tid == 0) mean = s[0] / (float)K;
        __syncthreads();
        float d = v - mean;
        s[tid] = d * d;
        __syncthreads();
        for (int h = T / 2; h > 0; h >>= 1) {
            if (tid < h) s[tid] += s[tid + h];
            __syncthreads();
        }
        if (tid == 0) var = s[0] / (float)K;
        __syncthreads();
        if (i < N * K) y[i] = d * rsqrtf(var + 1e-5f);
    }
    int main() {
        int N = 4096;
        float *x, *y;
        cudaMalloc(&x, N * 64 * sizeof(float));
        cudaMalloc(&y, N * 64 * sizeof(float));
        center_scale<64><<<N, 64>>>(x, y, N, 64);
        return 0;
    }
    """
    src = tmp_path / "center_scale.cu"
    src.write_text(textwrap.dedent(cuda))
    tu = inspect(src)
    spec = infer_spec(tu, tu.global_kernels[0])
    first = trace_pairs(spec)[0]
    assert first[0] == {"N": 8}, first  # 8 * 8 is the row length: the coincidence
    result = lift_task(spec)
    assert result.ok, result.render()
    assert result.fitted_at[0] == first[0], result.render()
    assert "64" in result.program.render() and "N * N" not in result.program.render()


def test_a_max_over_clamped_reads_counts_each_element_once(tmp_path: Path) -> None:
    """llm.c's unrolled softmax reads `x[min(C - 1, i + u * blockDim.x)]`: past the row's end
    every read is its last element, so the max sees that term several times (and a different
    number of times per thread). A max is idempotent: the distinct terms are its range."""
    cuda = """
    __global__ void rowmax_exp(float* out, const float* inp, int N, int C) {
        __shared__ float red[32];
        const float* x = inp + blockIdx.x * C;
        float m = -INFINITY;
        for (int i = threadIdx.x; i < C; i += blockDim.x * 4)
            for (int u = 0; u < 4; u++) m = fmaxf(m, x[min(C - 1, i + u * blockDim.x)]);
        red[threadIdx.x] = m;
        __syncthreads();
        for (int h = 16; h > 0; h >>= 1) {
            if (threadIdx.x < h) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + h]);
            __syncthreads();
        }
        for (int i = threadIdx.x; i < C; i += blockDim.x)
            out[blockIdx.x * C + i] = expf(x[i] - red[0]);
    }
    int main() {
        int N = 64, C = 100;
        float *x, *y;
        cudaMalloc(&x, N * C * sizeof(float));
        cudaMalloc(&y, N * C * sizeof(float));
        rowmax_exp<<<N, 32>>>(y, x, N, C);
        return 0;
    }
    """
    src = tmp_path / "rowmax.cu"
    src.write_text(textwrap.dedent(cuda))
    (k,) = migrate(src, out_dir=tmp_path / "out").kernels
    assert k.status == "complete", [d.render() for d in k.diagnostics]
    assert k.lifted is not None and "max_{" in k.lifted.program.render()
    # fitted where the rows are shorter than one unrolled sweep (32 threads x 4), i.e. where
    # the clamped reads repeat: a larger trace without repeats is not needed (for llm.c's
    # 512 threads x 8 it would be past the trace budget)
    assert all(s["C"] < 128 for s in k.lifted.fitted_at), k.lifted.fitted_at
