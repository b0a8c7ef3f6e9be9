"""Idioms of real third-party CUDA files, each as a minimal kernel of our own.

Each test fails on an interpreter that refuses the idiom or, worse, runs it with a guess:
host-only file-scope code, header types, functional casts, functors as temporaries, functions
as template arguments, template types deduced from the arrays, cache-hinted loads and stores,
bit intrinsics and null-pointer semantics.
"""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest

from migrator.cuda.interp import InterpOptions, RunResult
from migrator.cuda.interp.findings import InterpError, UnsupportedError
from migrator.cuda.interp.runner import kernel_signature
from migrator.cuda.parse import parse_text

Runner = Callable[..., RunResult]


def test_host_only_file_scope_code_does_not_stop_a_kernel(krun: Runner) -> None:
    src = """
    using reduce_fn_t = float (*)(float);           // a function-pointer alias
    struct HostOnly { ssize_t n; const char* name = NULL; };
    HostOnly table[4];
    typedef struct { int a; } Plain;
    float* g_host_ptr = NULL;
    __global__ void scale(float* y, const float* x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = 2.0f * x[i];
    }"""
    x = np.arange(40, dtype=np.float32)
    y = np.zeros(40, np.float32)
    krun(src, "scale", 2, 32, y=y, x=x, n=40)
    assert np.array_equal(y, 2 * x)


def test_a_failed_declaration_stops_the_kernel_that_uses_it(krun: Runner) -> None:
    src = """
    using op_t = float (*)(float);
    __global__ void k(float* y) { op_t f; y[threadIdx.x] = 1.0f; }"""
    with pytest.raises(UnsupportedError, match="'op_t' is used.*could not be evaluated"):
        krun(src, "k", 1, 4, y=np.zeros(4, np.float32))


def test_header_types_are_predefined(krun: Runner) -> None:
    src = """
    __global__ void k(uint* o, ushort* s, ssize_t n, intptr_t base) {
        ulong i = threadIdx.x;
        uint4 v = make_uint4(1, 2, 3, 4);
        if (i < n) { o[i] = (uint)(i + base) + v.w; s[i] = (ushort)i; }
    }"""
    o = np.zeros(8, np.uint32)
    s = np.zeros(8, np.uint16)
    krun(src, "k", 1, 8, o=o, s=s, n=6, base=10)
    assert o.tolist() == [i + 14 for i in range(6)] + [0, 0]
    assert s.tolist() == list(range(6)) + [0, 0]


def test_functional_casts_and_typedef_casts(krun: Runner) -> None:
    src = """
    typedef __nv_bfloat16 floatX;
    template <typename T>
    __global__ void k(T* out, const floatX* x) {
        int i = threadIdx.x;
        T acc = T(0);
        acc += float(x[i]) * 2;
        out[i] = acc + (T)(1) + int(2.7f);
    }
    __global__ void back(floatX* out, const float* x) {
        out[threadIdx.x] = (floatX)(x[threadIdx.x]);
    }"""
    x = (np.arange(8) / 3).astype(ml_dtypes.bfloat16)
    out = np.zeros(8, np.float32)
    krun(src, "k", 1, 8, template_args=["float"], out=out, x=x)
    assert np.array_equal(out, x.astype(np.float32) * 2 + 3)
    b = np.zeros(8, ml_dtypes.bfloat16)
    f = np.linspace(0, 1, 8, dtype=np.float32)
    krun(src, "back", 1, 8, out=b, x=f)
    assert np.array_equal(b, f.astype(ml_dtypes.bfloat16))


def test_cg_functor_temporaries(krun: Runner) -> None:
    src = """
    #include <cooperative_groups.h>
    #include <cooperative_groups/reduce.h>
    namespace cg = cooperative_groups;
    __global__ void k(float* o, const float* x) {
        cg::thread_block block = cg::this_thread_block();
        cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
        float v = x[threadIdx.x];
        float s = cg::reduce(warp, v, cg::plus<float>{});
        float m = cg::reduce(warp, v, cg::greater<float>());
        if (warp.thread_rank() == 0) { o[2 * warp.meta_group_rank()] = s;
                                       o[2 * warp.meta_group_rank() + 1] = m; }
    }"""
    x = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    o = np.zeros(4, np.float32)
    krun(src, "k", 1, 64, o=o, x=x)
    assert np.allclose(o[[0, 2]], x.reshape(2, 32).sum(1), rtol=1e-5)
    assert np.array_equal(o[[1, 3]], x.reshape(2, 32).max(1))


def test_function_as_template_argument(krun: Runner) -> None:
    src = """
    using reduction_func_t = float (*) (float);
    __device__ float warpSum(float v) {
        for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffff, v, off);
        return v;
    }
    template <reduction_func_t op>
    __device__ float blockReduce(float v, float dflt) {
        __shared__ float part[32];
        float w = op(v);
        if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = w;
        __syncthreads();
        w = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : dflt;
        return op(w);
    }
    template <reduction_func_t op>
    __device__ float blockReduce(float v) { return blockReduce<op>(v, 0.0f); }
    __global__ void k(float* o, const float* x) {
        float s = blockReduce<warpSum>(x[threadIdx.x]);
        if (threadIdx.x == 0) o[0] = s;
    }"""
    x = np.arange(128, dtype=np.float32)
    o = np.zeros(1, np.float32)
    krun(src, "k", 1, 128, o=o, x=x)
    assert o[0] == x.sum()


def test_kernel_template_types_deduced_from_the_arrays(krun: Runner) -> None:
    src = """
    template <typename Tout, typename Tin>
    __global__ void cast_copy(Tout* out, const Tin* in, int n) {
        int i = threadIdx.x;
        if (i < n) out[i] = (Tout)((float)in[i] * 0.5f);
    }"""
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(16, ml_dtypes.bfloat16)
    krun(src, "cast_copy", 1, 16, out=out, **{"in": x}, n=16)
    assert np.array_equal(out, (x * 0.5).astype(ml_dtypes.bfloat16))


def test_cache_hinted_loads_and_stores(krun: Runner) -> None:
    src = """
    __global__ void k(float* y, const float* x) {
        int i = threadIdx.x;
        float a = __ldcs(x + i) + __ldcg(&x[i]) + __ldca(x + i) + __ldlu(x + i) + __ldcv(x + i);
        __stcs(y + i, a);
        __stcg(&y[32 + i], __ldg(x + i));
        __stwt(y + 64 + i, 1.0f);
        __stwb(y + 96 + i, 2.0f);
    }"""
    x = np.arange(32, dtype=np.float32)
    y = np.zeros(128, np.float32)
    krun(src, "k", 1, 32, y=y, x=x)
    assert np.array_equal(y[:32], 5 * x) and np.array_equal(y[32:64], x)
    assert (y[64:96] == 1).all() and (y[96:] == 2).all()


def test_integer_intrinsics(krun: Runner) -> None:
    src = """
    __global__ void k(int* o, unsigned* u, const int* a, const int* b) {
        int i = threadIdx.x;
        o[i] = __mul24(a[i], b[i]);
        u[i] = __umul24(a[i], b[i]);
        u[32 + i] = __brev(a[i]);
        u[64 + i] = __byte_perm(a[i], b[i], 0x5140);
        o[32 + i] = __float2int_rd(-1.5f + i) + __float2int_ru(0.25f * i);
    }"""
    rng = np.random.default_rng(3)
    a = rng.integers(-(1 << 30), 1 << 30, 32).astype(np.int32)
    b = rng.integers(-(1 << 30), 1 << 30, 32).astype(np.int32)
    o = np.zeros(64, np.int32)
    u = np.zeros(96, np.uint32)
    krun(src, "k", 1, 32, o=o, u=u, a=a, b=b)

    def low24(v: np.ndarray, signed: bool) -> np.ndarray:
        w = v.astype(np.int64) & 0xFFFFFF
        return (w ^ 0x800000) - 0x800000 if signed else w

    assert np.array_equal(o[:32], ((low24(a, True) * low24(b, True)) & 0xFFFFFFFF)
                          .astype(np.uint32).astype(np.int32))  # fmt: skip
    assert np.array_equal(u[:32], (low24(a, False) * low24(b, False)) & 0xFFFFFFFF)
    ua = a.view(np.uint32)
    assert u[32:64].tolist() == [int(f"{int(v):032b}"[::-1], 2) for v in ua]
    both = (b.view(np.uint32).astype(np.uint64) << 32) | ua.astype(np.uint64)
    want = [sum(((int(w) >> (8 * s)) & 0xFF) << (8 * n) for n, s in enumerate((0, 4, 1, 5)))
            for w in both]  # fmt: skip
    assert u[64:].tolist() == want
    i = np.arange(32)
    assert o[32:].tolist() == (np.floor(-1.5 + i) + np.ceil(0.25 * i)).astype(int).tolist()


def test_null_pointer_semantics(krun: Runner) -> None:
    """An optional bias: `if (bias)`, `bias != NULL ? ...`, `!bias`, `bias == nullptr`."""
    src = """
    __global__ void k(float* out, const float* x, const float* bias) {
        int i = threadIdx.x;
        float v = x[i];
        if (bias) v += bias[i];
        float flag = (bias != NULL ? 10.0f : 0.0f) + (!bias ? 100.0f : 0.0f)
                   + (bias == nullptr ? 1000.0f : 0.0f) + (bias != 0 ? 1e4f : 0.0f);
        bool has = bias;
        out[i] = v + flag + (has ? 1e5f : 0.0f);
    }"""
    x = np.arange(8, dtype=np.float32)
    bias = np.full(8, 0.5, np.float32)
    out = np.zeros(8, np.float32)
    krun(src, "k", 1, 8, out=out, x=x, bias=bias)
    assert np.array_equal(out, x + 0.5 + 10 + 1e4 + 1e5)
    krun(src, "k", 1, 8, out=out, x=x, bias=None)
    assert np.array_equal(out, x + 100 + 1000)


def test_null_dereference_and_cross_buffer_order_raise(krun: Runner) -> None:
    deref = """__global__ void k(float* o, const float* b) { o[threadIdx.x] = b[0]; }"""
    with pytest.raises(InterpError, match="no buffer"):
        krun(deref, "k", 1, 4, o=np.zeros(4, np.float32), b=None)
    order = """__global__ void k(float* o, const float* a, const float* b) {
        o[threadIdx.x] = a < b ? 1.0f : 0.0f; }"""
    two = np.zeros(4, np.float32)
    with pytest.raises(UnsupportedError, match="pointer comparison <"):
        krun(order, "k", 1, 4, o=np.zeros(4, np.float32), a=two, b=two.copy())


def test_pointer_chosen_per_lane_from_two_buffers_raises(krun: Runner) -> None:
    src = """__global__ void k(float* o, const float* a, const float* b) {
        const float* q = threadIdx.x % 2 == 0 ? a : b;
        o[threadIdx.x] = q[threadIdx.x]; }"""
    a, b = np.ones(4, np.float32), np.zeros(4, np.float32)
    with pytest.raises(UnsupportedError, match="different buffers"):
        krun(src, "k", 1, 4, o=np.zeros(4, np.float32), a=a, b=b)


def test_statement_level_namespace_alias_and_using(krun: Runner) -> None:
    src = """
    __global__ void k(float* o) {
        namespace cg = cooperative_groups;
        using namespace cooperative_groups;
        cg::thread_block block = cg::this_thread_block();
        o[block.thread_rank()] = fma(2.0f, 3.0f, 1.0f);
    }"""
    o = np.zeros(4, np.float32)
    krun(src, "k", 1, 4, o=o)
    assert (o == 7).all()


def test_kernel_signature_resolves_typedefs() -> None:
    parsed = parse_text(
        """typedef __nv_bfloat16 floatX;
        __global__ void k(floatX* y, const float* x, size_t n) {}""",
        "sig.cu",
    )
    sig = {name: t for name, t in kernel_signature(parsed, "k")}
    assert sig["y"].elem is not None and sig["y"].elem.dtype == np.dtype(ml_dtypes.bfloat16)
    assert sig["n"].dtype == np.uint64


@pytest.mark.parametrize(
    ("targs", "want"),
    [
        (["false", "3"], 5.0),
        (["true", 3], 1.0),
        ([False, 3], 5.0),
        (["0", "0x3"], 5.0),
        ([1, "2u"], 1.0),
        (["false", "1024 / (4 * 64)"], 6.0),
        (["0", "(6) / 2"], 5.0),
    ],
)
def test_template_values_from_a_spec_are_c_literals(krun: Runner, targs: list, want: float) -> None:
    """`template_args = ["false"]` is false (a non-empty string is not a true value)."""
    src = """template <bool Flag, int N>
    __global__ void k(float* o) { o[threadIdx.x] = Flag ? 1.0f : 2.0f + N; }"""
    o = np.zeros(2, np.float32)
    krun(src, "k", 1, 2, template_args=targs, o=o)
    assert (o == want).all()


def test_template_value_that_is_not_a_literal_is_refused(krun: Runner) -> None:
    src = """template <int N> __global__ void k(float* o) { o[threadIdx.x] = N; }"""
    with pytest.raises(InterpError, match="not a constant"):
        krun(src, "k", 1, 2, template_args=["BLOCK"], o=np.zeros(2, np.float32))


def test_struct_and_vector_compound_literals(krun: Runner) -> None:
    src = """
    struct Params { float scale; float offset; int n; };
    __device__ Params make(float s) { return Params{s, 1.0f}; }
    __global__ void k(float* o) {
        Params p = make(2.0f);
        float4 v = float4{1.0f, 2.0f, 3.0f, 4.0f};
        o[threadIdx.x] = p.scale * v.w + p.offset + p.n;
    }"""
    o = np.zeros(4, np.float32)
    krun(src, "k", 1, 4, o=o)
    assert (o == 9).all()


def test_half_and_bf16_intrinsics(krun: Runner) -> None:
    src = """
    __global__ void k(__half* h, __nv_bfloat16* b, float* f, const __half* x, const __half* y,
                      const __nv_bfloat16* bx) {
        int i = threadIdx.x;
        h[i] = __hadd(__hmul(x[i], y[i]), __hfma(x[i], y[i], x[i]));
        h[32 + i] = __hmax(x[i], y[i]);
        h[64 + i] = hexp(__hneg(x[i]));
        b[i] = __hmul(bx[i], bx[i]);
        __half2 p = __floats2half2_rn(1.5f, (float)x[i]);
        __half2 q = __hmul2(p, __half2half2(y[i]));
        f[i] = __low2float(q) + __high2float(q) + (__hgt(x[i], y[i]) ? 100.0f : 0.0f);
    }"""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(32).astype(np.float16)
    y = rng.standard_normal(32).astype(np.float16)
    bx = rng.standard_normal(32).astype(ml_dtypes.bfloat16)
    h = np.zeros(96, np.float16)
    b = np.zeros(32, ml_dtypes.bfloat16)
    f = np.zeros(32, np.float32)
    krun(src, "k", 1, 32, h=h, b=b, f=f, x=x, y=y, bx=bx)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    prod = (x32 * y32).astype(np.float16).astype(np.float32)
    fma = (x.astype(np.float64) * y + x).astype(np.float32).astype(np.float16).astype(np.float32)
    assert np.array_equal(h[:32], (prod + fma).astype(np.float16))
    assert np.array_equal(h[32:64], np.fmax(x, y))
    assert np.array_equal(h[64:], np.exp(-x32).astype(np.float16))
    bx32 = bx.astype(np.float32)
    assert np.array_equal(b, (bx32 * bx32).astype(ml_dtypes.bfloat16))
    lo = (np.float32(1.5) * y32).astype(np.float16).astype(np.float32)
    hi = prod
    assert np.array_equal(f, lo + hi + np.where(x > y, 100.0, 0.0).astype(np.float32))


def test_128_bit_packed_loads_and_stores_through_other_types(krun: Runner) -> None:
    """The f16x8 idiom: 16 bytes of halves moved as one float4, into a local array and back,
    with half2 arithmetic on the pairs in between; and a shared tile filled the same way."""
    src = """
    #define LDST128BITS(value) (reinterpret_cast<float4 *>(&(value))[0])
    #define HALF2(value) (reinterpret_cast<half2 *>(&(value))[0])
    __global__ void relu8(half* x, half* y, int n) {
        int idx = 8 * (blockIdx.x * blockDim.x + threadIdx.x);
        __shared__ half tile[8 * 32];
        half pack_x[8], pack_y[8];
        LDST128BITS(pack_x[0]) = LDST128BITS(x[idx]);
        LDST128BITS(tile[8 * threadIdx.x]) = LDST128BITS(pack_x[0]);
        __syncthreads();
        half2 zero = __float2half2_rn(0.0f);
        for (int i = 0; i < 8; i += 2) {
            HALF2(pack_y[i]) = __hmax2(HALF2(tile[8 * threadIdx.x + i]), zero);
        }
        if (idx + 7 < n) LDST128BITS(y[idx]) = LDST128BITS(pack_y[0]);
    }"""
    x = np.random.default_rng(5).standard_normal(256).astype(np.float16)
    y = np.zeros(256, np.float16)
    res = krun(src, "relu8", 1, 32, x=x, y=y, n=256)
    assert np.array_equal(y, np.maximum(x, np.float16(0)))
    assert not res.findings  # the local and shared halves were all written first


def test_reading_a_half_array_half_written_through_a_float_view_is_reported(
    krun: Runner,
) -> None:
    src = """
    __global__ void k(half* y) {
        half pack[8];
        reinterpret_cast<float*>(pack)[0] = 0.0f;    // writes pack[0] and pack[1] only
        y[threadIdx.x] = pack[2];
    }"""
    res = krun(src, "k", 1, 4, y=np.zeros(4, np.float16))
    assert any(f.kind == "uninitialized_read" for f in res.findings)


def test_misaligned_vector_view_raises(krun: Runner) -> None:
    src = """
    __global__ void k(half* x, float* o) {
        float4 v = reinterpret_cast<float4*>(&x[threadIdx.x])[0];   // 2-byte steps
        o[threadIdx.x] = v.x;
    }"""
    with pytest.raises(InterpError, match="misaligned"):
        krun(src, "k", 1, 4, x=np.zeros(64, np.float16), o=np.zeros(4, np.float32))


def test_template_argument_named_by_a_host_template_is_deduced(krun: Runner) -> None:
    """`reduce0<T><<<g, b>>>(in, out)` inside `template <class T> void reduce(...)`: the
    launch site's `T` is the host's; the kernel's T comes from its arrays."""
    src = """template <class T>
    __global__ void twice(T* out, const T* in) { out[threadIdx.x] = in[threadIdx.x] * 2; }"""
    x = np.arange(8, dtype=np.float64)
    out = np.zeros(8, np.float64)
    krun(src, "twice", 1, 8, template_args=["T"], out=out, **{"in": x})
    assert np.array_equal(out, 2 * x)


def test_local_variables_seen_through_reinterpreted_pointers(krun: Runner) -> None:
    """`FLOAT4(v)` on a local float4, `reinterpret_cast<const float*>(&v)[i]` with a per-lane
    i, a store through such a view, and int4 bits of a float4."""
    src = """
    #define FLOAT4(value) (reinterpret_cast<float4 *>(&(value))[0])
    __global__ void k(float* y, int* bits, const float* x) {
        int t = threadIdx.x;
        float4 v;
        v.x = x[4 * t]; v.y = x[4 * t + 1]; v.z = x[4 * t + 2]; v.w = x[4 * t + 3];
        reinterpret_cast<float4 *>(y)[t] = FLOAT4(v);
        y[32 * 4 + t] = reinterpret_cast<const float*>(&v)[t % 4];
        reinterpret_cast<float*>(&v)[1] = -1.0f;
        y[32 * 5 + t] = v.y + v.x;
        int4 b = *reinterpret_cast<int4*>(&v);
        bits[t] = b.z;
    }"""
    x = np.random.default_rng(2).standard_normal(128).astype(np.float32)
    y = np.zeros(32 * 6, np.float32)
    bits = np.zeros(32, np.int32)
    krun(src, "k", 1, 32, y=y, bits=bits, x=x)
    t = np.arange(32)
    assert np.array_equal(y[:128], x)
    assert np.array_equal(y[128:160], x[4 * t + t % 4])
    assert np.array_equal(y[160:], np.float32(-1) + x[4 * t])
    assert np.array_equal(bits, x[4 * t + 2].view(np.int32))


PACKED = """
template <class E>
struct alignas(16) Packed {
    Packed() = default;
    __device__ explicit Packed(int4 bits) {
        static_assert(sizeof(bits) == sizeof(payload), "size");
        memcpy(&payload, &bits, sizeof(bits));
    }
    __device__ static Packed filled(E value) {
        Packed out;
        for (int k = 0; k < size; ++k) out.payload[k] = value;
        return out;
    }
    __device__ static Packed zeros() { return filled(0.f); }
    __device__ E& operator[](int index) { return payload[index]; }
    __device__ const E& operator[](int index) const { return payload[index]; }
    __device__ int4 get_bits() const {
        int4 bits;
        memcpy(&bits, &payload, sizeof(bits));
        return bits;
    }
    static constexpr const int size = sizeof(int4) / sizeof(E);
    E payload[size];
};
template <class E>
__device__ Packed<E> load16(const E* p) {
    return Packed<E>{__ldcs(reinterpret_cast<const int4*>(p))};
}
template <class E>
__device__ void store16(E* p, Packed<E> v) { __stcs(reinterpret_cast<int4*>(p), v.get_bits()); }
"""


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_packed_128_bit_vector_struct(krun: Runner, dtype: type) -> None:
    """A 16-byte packed vector as LLM training code writes it: a template struct with a
    static size, an int4 constructor via memcpy, operator[], static factories, get_bits."""
    name = "float" if dtype is np.float32 else "__nv_bfloat16"
    src = (
        PACKED
        + f"""
    typedef {name} floatX;
    using x128 = Packed<floatX>;
    __global__ void residual(floatX* out, const floatX* a, const floatX* b, int n) {{
        int i = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
        if (i >= n) return;
        x128 pa = load16(a + i);
        x128 pb = load16(b + i);
        x128 po = x128::zeros();
        for (int k = 0; k < pa.size; ++k) po[k] = (floatX)((float)pa[k] + (float)pb[k]);
        store16(out + i, po);
    }}"""
    )
    rng = np.random.default_rng(11)
    width = 16 // np.dtype(dtype).itemsize
    n = 32 * width
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    out = np.zeros(n, dtype)
    krun(src, "residual", 1, 32, out=out, a=a, b=b, n=n)
    assert np.array_equal(out, (a.astype(np.float32) + b.astype(np.float32)).astype(dtype))


def test_a_member_that_writes_its_fields_is_refused(krun: Runner) -> None:
    src = """
    struct Acc { float s; __device__ void add(float v) { s += v; } };
    __global__ void k(float* o) { Acc a = Acc{0.0f}; a.add(1.0f); o[threadIdx.x] = a.s; }"""
    with pytest.raises(InterpError, match="const"):
        krun(src, "k", 1, 2, o=np.zeros(2, np.float32))


def test_struct_statics_survive_block_batches(krun: Runner) -> None:
    """File-scope `typedef P<float> x128;` read as `x128::size` in every batch of blocks."""
    src = """
    template <class E> struct P { static constexpr const int size = 16 / sizeof(E); };
    typedef P<float> x128;
    __device__ int width() { return x128::size; }
    __global__ void k(int* o) { o[blockIdx.x] = width(); }"""
    o = np.zeros(8, np.int32)
    krun(src, "k", 8, 32, o=o, options=InterpOptions(block_batch=2))
    assert (o == 4).all()


def test_shared_memory_accessor_struct(krun: Runner) -> None:
    """The CUDA samples' `SharedMemory<T>`: a struct whose `operator T*()` returns the
    `extern __shared__` array, used as `T* sdata = SharedMemory<T>();`."""
    src = """
    template <class T> struct SharedMemory {
        __device__ inline operator T *() { extern __shared__ int __smem[]; return (T *)__smem; }
        __device__ inline operator const T *() const {
            extern __shared__ int __smem[]; return (T *)__smem; }
    };
    template <class T>
    __global__ void reduce0(T *g_idata, T *g_odata, unsigned int n) {
        T *sdata = SharedMemory<T>();
        unsigned int tid = threadIdx.x;
        unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
        sdata[tid] = (i < n) ? g_idata[i] : 0;
        __syncthreads();
        for (unsigned int s = 1; s < blockDim.x; s *= 2) {
            if ((tid % (2 * s)) == 0) sdata[tid] += sdata[tid + s];
            __syncthreads();
        }
        if (tid == 0) g_odata[blockIdx.x] = sdata[0];
    }"""
    x = np.arange(1000, dtype=np.float32)
    out = np.zeros(4, np.float32)
    krun(src, "reduce0", 4, 256, shared_bytes=256 * 4, template_args=["float"],
         g_idata=x, g_odata=out, n=1000)  # fmt: skip
    want = np.array([x[b * 256 : (b + 1) * 256].sum() for b in range(4)], np.float32)
    assert np.array_equal(out, want)


def test_integer_to_half_pairs_from_float2_and_trap(krun: Runner) -> None:
    src = """
    __global__ void k(__half* h, const int* flag) {
        int i = threadIdx.x;
        h[i] = __int2half_rn(i * 1001);
        __half2 p = __float22half2_rn(make_float2(1.5f, 2.25f));
        h[8 + i] = __high2half(p) + __low2half(p);
        if (i == 3 && flag[0] == 7) __trap();
    }"""
    h = np.zeros(16, np.float16)
    krun(src, "k", 1, 8, h=h, flag=np.zeros(1, np.int32))
    assert np.array_equal(h[:8], (np.arange(8) * 1001).astype(np.float16))
    assert (h[8:] == np.float16(3.75)).all()
    with pytest.raises(InterpError, match=r"__trap\(\) reached in block \(0, 0, 0\) thread \(3"):
        krun(src, "k", 1, 8, h=h, flag=np.full(1, 7, np.int32))


def test_atomic_inc_and_dec_wrap(krun: Runner) -> None:
    """atomicInc(p, v): old >= v ? 0 : old + 1; atomicDec(p, v): old == 0 || old > v ? v :
    old - 1 — in thread order, each lane getting the value before its own update."""
    src = """
    __global__ void k(unsigned* c, unsigned* olds) {
        olds[threadIdx.x] = atomicInc(&c[0], 4u);
        olds[8 + threadIdx.x] = atomicDec(&c[1], 2u);
    }"""
    c = np.array([0, 1], np.uint32)
    olds = np.zeros(16, np.uint32)
    krun(src, "k", 1, 8, c=c, olds=olds)
    assert olds[:8].tolist() == [0, 1, 2, 3, 4, 0, 1, 2] and c[0] == 3
    assert olds[8:].tolist() == [1, 0, 2, 1, 0, 2, 1, 0] and c[1] == 2


def test_fp8_storage_and_conversions(krun: Runner) -> None:
    src = """
    #include <cuda_fp8.h>
    __global__ void k(__half* h, __nv_fp8_storage_t* q, const __nv_fp8_storage_t* a,
                      const float* x) {
        int i = threadIdx.x;
        h[i] = __nv_cvt_fp8_to_halfraw(a[i], __NV_E4M3);
        q[i] = __nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, __NV_E4M3);
        q[8 + i] = __nv_cvt_float_to_fp8(x[i], __NV_NOSAT, __NV_E5M2);
    }"""
    e4 = ml_dtypes.float8_e4m3fn
    a = np.array([0.5, -1.25, 3.0, 448.0, -0.0, 0.015625, 240.0, 7.0], dtype=e4)
    x = np.array([0.3, 1000.0, -1000.0, 2.5, 1e6, -0.1, 17.0, 0.0], np.float32)
    h = np.zeros(8, np.float16)
    q = np.zeros(16, np.uint8)
    krun(src, "k", 1, 8, h=h, q=q, a=a.view(np.uint8), x=x)
    assert np.array_equal(h, a.astype(np.float16))
    want = np.clip(x, -448, 448).astype(e4)
    assert np.array_equal(q[:8].view(e4).astype(np.float32), want.astype(np.float32))
    e5 = q[8:].view(ml_dtypes.float8_e5m2).astype(np.float32)
    assert np.array_equal(e5, x.astype(ml_dtypes.float8_e5m2).astype(np.float32))


def test_pointer_addresses_and_paired_bf16_atomics(krun: Runner) -> None:
    """llm.c's atomicAddX: a bf16 address rounded down to 4 bytes with `& ~3`, turned back
    into a `__nv_bfloat162*`, and a pair atomic whose other half adds zero; `(size_t)p % 4`
    tests alignment as on the device (buffers are 256-byte aligned)."""
    src = """
    #include <cuda_bf16.h>
    __device__ void atomicAddX(__nv_bfloat16* addr, __nv_bfloat16 val) {
      uintptr_t ptr_val = reinterpret_cast<uintptr_t>(addr);
      __nv_bfloat162* pair = reinterpret_cast<__nv_bfloat162*>(ptr_val & ~uintptr_t(0x3));
      __nv_bfloat162 add = (ptr_val & 0x3) ? __halves2bfloat162(__ushort_as_bfloat16(0), val)
                                           : __halves2bfloat162(val, __ushort_as_bfloat16(0));
      atomicAdd(pair, add);
    }
    __global__ void k(__nv_bfloat16* out, const float* x, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) atomicAddX(&out[i % 8], (__nv_bfloat16)x[i]);
      if (i == 0) out[8] = (size_t)(out + 3) % 4 == 2 ? 1.0f : 0.0f;
      if (i == 1) out[9] = __bfloat16_as_ushort(out[8]) == 0x3f80 ? 2.0f : 0.0f;
    }"""
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(10, ml_dtypes.bfloat16)
    krun(src, "k", 1, 32, out=out, x=x, n=32)
    want = x.reshape(4, 8).sum(axis=0)
    np.testing.assert_array_equal(out[:8].astype(np.float32), want)
    assert float(out[8]) == 1.0 and float(out[9]) == 2.0


def test_an_integer_that_addresses_no_buffer_is_not_a_pointer(krun: Runner) -> None:
    src = """
    __global__ void k(float* out) {
      float* p = reinterpret_cast<float*>((size_t)1234567);
      out[0] = *p;
    }"""
    with pytest.raises(InterpError, match="not an address"):
        krun(src, "k", 1, 1, out=np.zeros(1, np.float32))


def test_bf16_pair_operators_and_make_uchar4(krun: Runner) -> None:
    src = """
    #include <cuda_bf16.h>
    __global__ void k(const __nv_bfloat162* a, const __nv_bfloat162* b, __nv_bfloat162* s,
                      uchar4* c) {
      int t = threadIdx.x;
      s[t] = a[t] + b[t] * a[t] - b[t];
      c[t] = make_uchar4(t, t + 1, 255, 256 + t);
    }"""
    rng = np.random.default_rng(4)
    a = rng.standard_normal(8).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal(8).astype(ml_dtypes.bfloat16)
    s = np.zeros(8, ml_dtypes.bfloat16)
    c = np.zeros(16, np.uint8)
    krun(src, "k", 1, 4, a=a, b=b, s=s, c=c)
    bf = ml_dtypes.bfloat16
    want = ((a + (b * a).astype(bf)).astype(bf) - b).astype(bf)  # each operator rounds
    np.testing.assert_array_equal(s.view(np.uint16), want.view(np.uint16))
    t = np.arange(4)
    np.testing.assert_array_equal(c.reshape(4, 4), np.stack([t, t + 1, t * 0 + 255, t], 1))


def test_default_arguments_of_kernels_and_device_functions(krun: Runner) -> None:
    """`int* partial_sums = NULL` (cuda-samples' shfl_scan) is a parameter like any other:
    left out of a launch it takes its default; so do omitted device-function arguments."""
    src = """
    __device__ float scale(float x, float by = 2.0f) { return x * by; }
    __global__ void k(const float* x, float* out, float* extra = NULL, int n = 4) {
      int i = threadIdx.x;
      if (i < n) out[i] = scale(x[i]) + scale(x[i], 3.0f);
      if (extra != NULL) extra[i] = 1.0f;
    }"""
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    krun(src, "k", 1, 8, x=x, out=out)
    np.testing.assert_array_equal(out, np.r_[5 * x[:4], np.zeros(4, np.float32)])
    extra = np.zeros(8, np.float32)
    krun(src, "k", 1, 8, x=x, out=out, extra=extra, n=8)
    assert (extra == 1).all() and out[7] == 35
    assert [n for n, _ in kernel_signature(parse_text(src, "k.cu"), "k")] == [
        "x", "out", "extra", "n"]  # fmt: skip


def test_cg_reduce_with_a_device_function_over_struct_values(krun: Runner) -> None:
    """llm.c's online softmax: `cg::reduce(warp, partial, reduce_sum_max_op)` with a
    `__device__` function combining (max, sum) structs, in the tile's butterfly order."""
    src = """
    #include <cooperative_groups.h>
    #include <cooperative_groups/reduce.h>
    namespace cg = cooperative_groups;
    struct SumMax { float maxval; float sum; };
    __device__ SumMax op(SumMax a, SumMax b) {
      SumMax r; r.maxval = fmaxf(a.maxval, b.maxval); r.sum = a.sum + b.sum; return r;
    }
    __global__ void k(const float* x, float* out) {
      cg::thread_block block = cg::this_thread_block();
      cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
      SumMax p; p.maxval = x[threadIdx.x]; p.sum = x[threadIdx.x] * 0.5f;
      SumMax t = cg::reduce(warp, p, op);
      out[2 * threadIdx.x] = t.maxval;
      out[2 * threadIdx.x + 1] = t.sum;
    }"""
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    out = np.zeros(128, np.float32)
    krun(src, "k", 1, 64, x=x, out=out)
    w = x.reshape(2, 32)
    np.testing.assert_array_equal(out[0::2], np.repeat(w.max(axis=1), 32))
    halves = (w * np.float32(0.5)).astype(np.float32)
    for k in (16, 8, 4, 2, 1):  # the butterfly: lane i adds lane i ^ k
        halves = halves + halves[:, np.arange(32) ^ k]
    np.testing.assert_array_equal(out[1::2], halves.reshape(-1))


def test_unnamed_tag_parameters_take_no_argument(krun: Runner) -> None:
    """llm.c's `std::bool_constant<Atomic>` tag parameter has no name: the launch passes no
    value for it and the template argument decides the variant."""
    src = """
    #include <type_traits>
    template <bool Atomic>
    __global__ void k(float* out, const float* x, std::bool_constant<Atomic>) {
      int i = threadIdx.x;
      if constexpr (Atomic) atomicAdd(&out[0], x[i]);
      else out[i] = x[i];
    }"""
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    krun(src, "k", 1, 32, template_args=[True], out=out, x=x)
    assert out[0] == x.sum() and (out[1:] == 0).all()
    out[:] = 0
    krun(src, "k", 1, 32, template_args=["false"], out=out, x=x)
    np.testing.assert_array_equal(out, x)
    assert [n for n, _ in kernel_signature(parse_text(src, "k.cu"), "k", [True])] == ["out", "x"]


def test_memcpy_between_local_arrays_structs_and_global_memory(krun: Runner) -> None:
    """cuda-samples' integral image packs a local `unsigned int[16]` into a struct of uint4
    with memcpy; copies also go to global memory and between structs with padding."""
    src = """
    struct packed { uint4 x, y; };
    struct Mixed { float f; short s; };
    __global__ void k(const unsigned int* in, unsigned int* out, float* fo) {
      unsigned int result[8];
      for (int i = 0; i < 8; ++i) result[i] = in[threadIdx.x * 8 + i] + 1u;
      packed p;
      memcpy(&p, result, sizeof(p));
      unsigned int back[8];
      memcpy(back, &p, sizeof(back));
      memcpy(out + threadIdx.x * 8, back, 8 * sizeof(unsigned int));
      out[64 + threadIdx.x] = p.y.w;
      Mixed m; m.f = 1.5f; m.s = (short)threadIdx.x;
      Mixed n2; memcpy(&n2, &m, sizeof(Mixed));
      fo[threadIdx.x] = n2.f + n2.s;
    }"""
    inp = np.arange(64, dtype=np.uint32)
    out = np.zeros(72, np.uint32)
    fo = np.zeros(8, np.float32)
    krun(src, "k", 1, 8, out=out, fo=fo, **{"in": inp})
    np.testing.assert_array_equal(out[:64], inp + 1)
    np.testing.assert_array_equal(out[64:], inp.reshape(8, 8)[:, 7] + 1)
    np.testing.assert_array_equal(fo, np.arange(8) + 1.5)


def test_lambdas_capture_by_reference_and_by_value(krun: Runner) -> None:
    """llm.c's `auto loop_step = [&](int t2) {...}` updates the maker's locals; `[=]` copies
    them when made; `[&pk](unsigned idx) -> const uint4 { switch ... return {}; }` picks a
    field (cuda-samples' integral image)."""
    src = """
    struct packed { uint4 x, y; };
    __global__ void k(const float* x, float* out, unsigned int* u) {
      int t = threadIdx.x;
      float acc[2] = {0.0f, 0.0f};
      float scale = 2.0f;
      auto step = [&](int i) {
        float p = x[i] * scale;
        for (int k = 0; k < 2; ++k) acc[k] += p * (k + 1);
      };
      for (int i = t; i < 64; i += blockDim.x) step(i);
      auto twice = [=](float v) { return v * scale; };
      scale = 100.0f;
      packed pk; pk.x = make_uint4(1, 2, 3, 4); pk.y = make_uint4(5, 6, 7, 8);
      auto pick = [&pk](unsigned int idx) -> const uint4 {
        switch (idx) { case 0: return pk.x; case 1: return pk.y; }
        return {};
      };
      out[2 * t] = twice(acc[0]);
      out[2 * t + 1] = acc[1];
      u[t] = pick(t % 3).w;
    }"""
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(16, np.float32)
    u = np.zeros(8, np.uint32)
    krun(src, "k", 1, 8, x=x, out=out, u=u)
    sums = x.reshape(8, 8).sum(axis=0) * 2  # acc[0] of thread t
    np.testing.assert_array_equal(out[0::2], sums * 2)  # twice used scale = 2, not 100
    np.testing.assert_array_equal(out[1::2], sums * 2)
    np.testing.assert_array_equal(u, [[4, 8, 0][t % 3] for t in range(8)])


def test_unmodelled_lambda_captures_raise(krun: Runner) -> None:
    src = """
    __global__ void k(float* out) {
      float s = 1.0f;
      auto f = [v = s](float a) { return a * v; };
      out[0] = f(2.0f);
    }"""
    with pytest.raises(UnsupportedError, match="lambda capture"):
        krun(src, "k", 1, 1, out=np.zeros(1, np.float32))


def test_several_declarators_in_one_declaration_are_separate_variables(krun: Runner) -> None:
    """`__shared__ float As[T][T], Bs[T][T];` is two arrays (they once shared one buffer: a
    tiled GEMM's B tile overwrote its A tile, a silent wrong product); the same for scalars,
    locals, `__device__` and `__constant__` arrays."""
    src = """
    #define T 4
    __constant__ float c1[2] = {1.0f, 2.0f}, c2[2] = {10.0f, 20.0f};
    __device__ float g1[8], g2[8];
    __global__ void gemm(const float* A, const float* B, float* C, int n) {
        __shared__ float As[T][T], Bs[T][T];
        int r = blockIdx.y * T + threadIdx.y, c = blockIdx.x * T + threadIdx.x;
        float acc = 0.0f;
        for (int k0 = 0; k0 < n; k0 += T) {
            As[threadIdx.y][threadIdx.x] = A[r * n + k0 + threadIdx.x];
            Bs[threadIdx.y][threadIdx.x] = B[(k0 + threadIdx.y) * n + c];
            __syncthreads();
            for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
            __syncthreads();
        }
        C[r * n + c] = acc;
    }
    __global__ void scalars(float* out) {
        __shared__ int s1, s2;
        float x[2], y[2];
        int t = threadIdx.x;
        if (t == 0) { s1 = 3; s2 = 5; }
        x[0] = 1.0f; y[0] = 2.0f;
        g1[t] = 7.0f; g2[t] = 9.0f;
        __syncthreads();
        out[t] = c1[t % 2] + c2[t % 2] + s1 * 100 + s2 * 1000 + x[0] + y[0] * 10
                 + g1[t] * 1e4f + g2[t] * 1e5f;
    }"""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    c = np.zeros(64, np.float32)
    krun(src, "gemm", (2, 2), (4, 4), A=a.ravel(), B=b.ravel(), C=c, n=8)
    np.testing.assert_allclose(c.reshape(8, 8), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    out = np.zeros(4, np.float32)
    krun(src, "scalars", 1, 4, out=out)
    even, odd = 1 + 10 + 300 + 5000 + 21 + 7e4 + 9e5, 2 + 20 + 300 + 5000 + 21 + 7e4 + 9e5
    assert out.tolist() == [even, odd, even, odd]


def test_a_comparison_chain_read_as_a_template_is_a_comparison(krun: Runner) -> None:
    """tree-sitter-cuda reads `(x < w && y >= 0 && ...)` as the assignment `x<w && y> = 0...`
    (a template `x<...>` assigned to); the front end parenthesises `(x)<w` at the same width,
    so the kernel computes the comparison and every column stays where it was."""
    src = """
    __global__ void k(float* out, const float* img, int w, int h) {
        int x = threadIdx.x - 2, y = threadIdx.x % 7 - 3;
        out[threadIdx.x] = (x < w && y >= 0 && y < h) ? img[threadIdx.x] : -1.0f;
    }"""
    parsed = parse_text(src)
    assert "template_function" not in str(parsed.root)
    line = next(t for t in parsed.source_bytes.decode().splitlines() if "? img" in t)
    assert line.index("? img") == next(t for t in src.splitlines() if "? img" in t).index("? img")
    img = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    krun(src, "k", 1, 32, out=out, img=img, w=20, h=2)
    t = np.arange(32)
    x, y = t - 2, t % 7 - 3
    np.testing.assert_array_equal(out, np.where((x < 20) & (y >= 0) & (y < 2), img, -1.0))
