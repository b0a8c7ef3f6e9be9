"""The CUDA vocabulary the front end knows, declared once as data.

Analysis, the interpreter, matchers and docs read these tables instead of keeping private name
lists. Each name maps to a `CallKind`; groups are frozensets.
"""

from __future__ import annotations

from enum import StrEnum


class CallKind(StrEnum):
    BARRIER = "barrier"
    WARP = "warp"
    ATOMIC = "atomic"
    MATH = "math"
    CONVERSION = "conversion"
    VECTOR_CTOR = "vector_ctor"
    PRINT = "print"
    TEXTURE = "texture"
    GRID_SYNC = "grid_sync"
    DEVICE = "device"  # a __device__ function defined in the translation unit
    OTHER = "other"


INDEX_BUILTINS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})
THREAD_SYMBOLS = frozenset(f"threadIdx.{a}" for a in "xyz")
BLOCK_SYMBOLS = frozenset(f"blockIdx.{a}" for a in "xyz")
DIM_SYMBOLS = frozenset(f"{b}.{a}" for b in ("blockDim", "gridDim") for a in "xyz")

BARRIERS = frozenset(
    {"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__syncwarp"}
)
WARP_INTRINSICS = frozenset(
    {
        "__shfl_sync",
        "__shfl_up_sync",
        "__shfl_down_sync",
        "__shfl_xor_sync",
        "__shfl",
        "__shfl_up",
        "__shfl_down",
        "__shfl_xor",
        "__ballot_sync",
        "__any_sync",
        "__all_sync",
        "__activemask",
        "__match_any_sync",
        "__match_all_sync",
        "__reduce_add_sync",
        "__reduce_min_sync",
        "__reduce_max_sync",
    }
)
ATOMICS = frozenset(
    {
        "atomicAdd",
        "atomicSub",
        "atomicExch",
        "atomicMin",
        "atomicMax",
        "atomicInc",
        "atomicDec",
        "atomicCAS",
        "atomicAnd",
        "atomicOr",
        "atomicXor",
        "atomicAdd_block",
        "atomicAdd_system",
    }
)
_MATH_F32 = (
    "expf exp2f exp10f expm1f logf log2f log10f log1pf sqrtf rsqrtf cbrtf rcbrtf powf "
    "sinf cosf tanf asinf acosf atanf atan2f sinhf coshf tanhf asinhf acoshf atanhf "
    "erff erfcf erfinvf lgammaf tgammaf fabsf fmaxf fminf fmodf remainderf floorf ceilf "
    "truncf roundf rintf nearbyintf fmaf fdimf hypotf copysignf sincosf normcdff "
    "__expf __exp10f __logf __log2f __log10f __powf __sinf __cosf __tanf __fdividef "
    "__frcp_rn __fsqrt_rn __frsqrt_rn __fmul_rn __fadd_rn __fmaf_rn __saturatef"
)
_MATH_F64 = (
    "exp exp2 expm1 log log2 log10 log1p sqrt rsqrt cbrt pow sin cos tan asin acos atan atan2 "
    "sinh cosh tanh erf erfc fabs fmax fmin fmod floor ceil trunc round rint fma hypot copysign"
)
_MATH_INT = "abs min max umin umax llabs llmin llmax __popc __popcll __clz __ffs __brev __mul24"
_MATH_HALF = "hexp hlog hsqrt hrsqrt __hadd __hsub __hmul __hdiv __hfma __hmax __hmin __hneg"
MATH_FUNCTIONS = frozenset(
    (_MATH_F32 + " " + _MATH_F64 + " " + _MATH_INT + " " + _MATH_HALF).split()
)
FAST_MATH_INTRINSICS = frozenset(n for n in MATH_FUNCTIONS if n.startswith("__") and "f" in n)

CONVERSIONS = frozenset(
    [
        "__float2half",
        "__half2float",
        "__float2half_rn",
        "__float2bfloat16",
        "__bfloat162float",
        "__float2bfloat16_rn",
        "__int2float_rn",
        "__float2int_rn",
        "__float2int_rz",
        "__float2uint_rn",
        "__half22float2",
        "__float22half2_rn",
        "__floats2half2_rn",
        "__low2float",
        "__high2float",
        "__int_as_float",
        "__float_as_int",
        "__uint_as_float",
        "__float_as_uint",
        "static_cast",
        "reinterpret_cast",
        "const_cast",
    ]
)
VECTOR_CTORS = frozenset(
    f"make_{t}{n}"
    for t in ("float", "int", "uint", "double", "half", "char", "uchar")
    for n in (2, 3, 4)
)
PRINTS = frozenset({"printf", "assert", "__trap", "__brkpt"})
TEXTURES = frozenset(
    {"tex1Dfetch", "tex1D", "tex2D", "tex3D", "tex2DLod", "surf2Dread", "surf2Dwrite"}
)

VECTOR_TYPES = frozenset(
    f"{t}{n}"
    for t in ("float", "int", "uint", "double", "char", "uchar", "short", "ushort", "long")
    for n in (1, 2, 3, 4)
) | {"__half2", "half2", "__nv_bfloat162", "nv_bfloat162"}
HALF_TYPES = frozenset(
    {
        "__half",
        "half",
        "__half2",
        "half2",
        "__nv_bfloat16",
        "nv_bfloat16",
        "__nv_bfloat162",
        "nv_bfloat162",
        "__nv_fp8_e4m3",
        "__nv_fp8_e5m2",
    }
)
KNOWN_TYPES = VECTOR_TYPES | HALF_TYPES | {"dim3", "size_t", "cudaStream_t"}

# Bytes per element of the scalar types the front end sizes shared memory with.
TYPE_BYTES = {
    "char": 1, "signed char": 1, "unsigned char": 1, "bool": 1, "int8_t": 1, "uint8_t": 1,
    "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2,
    "__half": 2, "half": 2, "__nv_bfloat16": 2, "nv_bfloat16": 2,
    "int": 4, "unsigned": 4, "unsigned int": 4, "float": 4, "int32_t": 4, "uint32_t": 4,
    "__half2": 4, "half2": 4, "__nv_bfloat162": 4,
    "long": 8, "long long": 8, "unsigned long long": 8, "double": 8, "size_t": 8,
    "int64_t": 8, "uint64_t": 8, "float2": 8, "int2": 8,
    "float4": 16, "int4": 16, "double2": 16,
}  # fmt: skip


def call_kind(name: str) -> CallKind:
    """Classify a callee name from the tables above (DEVICE is decided by the caller)."""
    for table, kind in _TABLES:
        if name in table:
            return kind
    return CallKind.OTHER


_TABLES: tuple[tuple[frozenset[str], CallKind], ...] = (
    (BARRIERS, CallKind.BARRIER),
    (WARP_INTRINSICS, CallKind.WARP),
    (ATOMICS, CallKind.ATOMIC),
    (MATH_FUNCTIONS, CallKind.MATH),
    (CONVERSIONS, CallKind.CONVERSION),
    (VECTOR_CTORS, CallKind.VECTOR_CTOR),
    (PRINTS, CallKind.PRINT),
    (TEXTURES, CallKind.TEXTURE),
)

# fused multiply-adds: `acc = fmaf(a, b, acc)` accumulates a * b like `acc += a * b`
FMA = frozenset({"fmaf", "fma", "__fmaf_rn", "__fma_rn"})
