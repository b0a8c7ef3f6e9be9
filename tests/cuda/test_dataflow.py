"""Dataflow trees: the value each store writes, with locals substituted and helpers inlined."""

from __future__ import annotations

from pathlib import Path

from migrator.cuda.frontend import analyze_file, analyze_text
from migrator.cuda.ir import Expr, Kernel
from migrator.cuda.validate import validate

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def show(e: Expr) -> str:
    """A compact, stable rendering used to state expectations."""
    k = e.kind
    if k == "const":
        return f"{e.value}{'f' if e.dtype == 'float' else ''}"
    if k in ("param", "index"):
        return str(e.name)
    if k == "load":
        return f"{e.name}[{']['.join(i.canonical or i.text for i in e.index)}]"
    if k == "binary":
        return f"({show(e.args[0])} {e.op} {show(e.args[1])})"
    if k == "unary":
        return f"{e.op}{show(e.args[0])}"
    if k in ("call", "cast"):
        return f"{e.op}({', '.join(show(a) for a in e.args)})"
    if k == "select":
        return f"({show(e.args[0])} ? {show(e.args[1])} : {show(e.args[2])})"
    if k == "reduce":
        return f"{e.style}:{e.op}({', '.join(show(a) for a in e.args)})"
    return f"<opaque: {e.op}>"


def kernel(stem: str, name: str) -> Kernel:
    return validate(analyze_file(CORPUS / f"{stem}.cu")).kernel(name)


GX = "blockIdx.x*blockDim.x + threadIdx.x"


def test_vector_add_store() -> None:
    (st,) = kernel("vector_add", "vector_add_kernel").stores
    assert (st.array, st.op, st.index[0].pattern) == ("c", "=", "global_x")
    assert show(st.value) == f"(a[{GX}] + b[{GX}])"
    assert st.guards == [0]


def test_saxpy_reads_its_output() -> None:
    (st,) = kernel("saxpy", "saxpy_kernel").stores
    assert show(st.value) == "((a * x[i]) + y[i])" and st.loops == [0]


def test_helper_is_inlined_with_casts() -> None:
    (st,) = kernel("gelu", "gelu_kernel").stores
    text = show(st.value)
    assert text.startswith("T(((0.5f * float(x[i])) * (1.0f + tanhf(")
    assert "0.044715f" in text


def test_matmul_accumulation_is_a_reduce_over_k() -> None:
    (st,) = kernel("matmul_naive", "matmul_naive_kernel").stores
    assert show(st.value) == (
        "loop_accumulate:sum(0.0f, (A[blockIdx.y*blockDim.y*K + threadIdx.y*K + k] * "
        f"B[N*k + {GX}]))"
    )
    assert st.value.loop == 0


def test_tiled_matmul_nested_reduction_through_shared_tiles() -> None:
    k = kernel("matmul_tiled", "sgemm_tiled_kernel")
    out = next(s for s in k.stores if s.array == "C")
    assert show(out.value) == (
        "((alpha * loop_accumulate:sum(0.0f, loop_accumulate:sum((As[threadIdx.y][k] * "
        "Bs[k][threadIdx.x])))) + (beta * C[16*blockIdx.y*ldc + threadIdx.y*ldc + "
        "16*blockIdx.x + threadIdx.x]))"
    )
    tile_a = next(s for s in k.stores if s.array == "As")
    assert tile_a.value.kind == "select"  # zero-filled ragged edge
    assert tile_a.value.args[1].name == "A"


def test_warp_shuffle_helper_returns_a_warp_reduction() -> None:
    tu = validate(analyze_file(CORPUS / "reduce_warp_shuffle.cu"))
    assert show(tu.kernel("warp_reduce_sum").returns) == "warp_shuffle:sum(v)"  # type: ignore[arg-type]
    (st,) = tu.kernel("row_sum_warp_kernel").stores
    assert show(st.value).startswith("warp_shuffle:sum(loop_accumulate:sum(0.0f, in[")
    assert st.value.loop is None  # the shuffle loop belongs to the inlined helper


def test_stencil_weights_and_halo() -> None:
    k = kernel("stencil_1d", "stencil_1d_kernel")
    out = next(s for s in k.stores if s.array == "out")
    assert show(out.value) == (
        "loop_accumulate:sum(0.0f, (c_weights[k + 3] * s[k + threadIdx.x + 3]))"
    )
    assert [s.array for s in k.stores].count("s") == 3  # centre plus two halo loads


def test_conditionally_changed_value_is_opaque_not_guessed() -> None:
    k = validate(
        analyze_text(
            "__global__ void k(const float* x, float* y, int n) {\n"
            "  float v = x[threadIdx.x];\n"
            "  if (n > 4) v = v * 2.0f;\n"
            "  y[threadIdx.x] = v;\n}\n",
            "t.cu",
        )
    ).kernel("k")
    assert k.stores[0].value.kind == "opaque"


def test_a_local_a_helper_takes_by_reference_is_opaque_after_the_call() -> None:
    """`scale(v, s)` with `float &v`: the helper may change v, so the store's value is not the
    load v was declared with (the static matchers would copy x to y)."""
    k = validate(
        analyze_text(
            "__device__ void scale(float &v, const float &s) { v = v * s; }\n"
            "__global__ void k(const float* x, float* y, float s) {\n"
            "  float v = x[threadIdx.x];\n  float w = s;\n  scale(v, w);\n"
            "  y[threadIdx.x] = v + w;\n}\n",
            "t.cu",
        )
    ).kernel("k")
    value = k.stores[0].value
    assert value.kind == "binary" and value.args[0].kind == "opaque"
    assert "set by scale()" in (value.args[0].op or "")
    assert show(value.args[1]) == "s"  # a const reference leaves w as it was


def test_straight_line_updates_are_followed() -> None:
    k = validate(
        analyze_text(
            "__global__ void k(const float* x, float* y) {\n"
            "  float v = x[threadIdx.x];\n  v *= 3.0f;\n  v = v + 1.0;\n"
            "  y[threadIdx.x] = v > 0.0f ? v : -v;\n}\n",
            "t.cu",
        )
    ).kernel("k")
    assert show(k.stores[0].value) == (
        "((((x[threadIdx.x] * 3.0f) + 1.0) > 0.0f) ? ((x[threadIdx.x] * 3.0f) + 1.0) : "
        "-((x[threadIdx.x] * 3.0f) + 1.0))"
    )
    consts = [n for n in k.stores[0].value.walk() if n.kind == "const"]
    assert {c.dtype for c in consts} == {"float", "double"}  # 1.0 is a double literal


def test_local_declared_inside_the_loop_is_not_an_accumulator() -> None:
    # AdamW-style: `p` is fresh every grid-stride iteration, so `p = p * c` carries nothing
    src = """
    __global__ void decay(const float* x, float* y, float c, int n) {
      for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        float p = x[i];
        p = p * c;
        y[i] = p;
      }
    }
    """
    k = validate(analyze_text(src, "decay.cu")).kernel("decay")
    assert k.reductions == []
    assert show(k.stores[0].value) == "(x[i] * c)"


def test_local_declared_outside_the_loop_still_accumulates() -> None:
    src = """
    __global__ void total(const float* x, float* y, int n) {
      float s = 0.0f;
      for (int i = 0; i < n; ++i) {
        float v = x[i];
        s = s + v;
      }
      y[0] = s;
    }
    """
    k = validate(analyze_text(src, "total.cu")).kernel("total")
    assert [(r.target, r.op, r.style) for r in k.reductions] == [("s", "sum", "loop_accumulate")]


def test_shared_scalar_broadcast_carries_the_written_value() -> None:
    k = validate(
        analyze_text(
            "__global__ void k(const float* x, float* y, float s) {\n"
            "  __shared__ float scale;\n"
            "  if (threadIdx.x == 0) scale = rsqrtf(s + 1.0f);\n"
            "  __syncthreads();\n"
            "  const float v = scale;\n"
            "  y[threadIdx.x] = x[threadIdx.x] * v;\n}\n",
            "t.cu",
        )
    ).kernel("k")
    (st,) = [s for s in k.stores if s.array == "y"]
    assert show(st.value) == "(x[threadIdx.x] * rsqrtf((s + 1.0f)))"


def test_fmaf_accumulation_is_a_sum_of_products() -> None:
    k = validate(
        analyze_text(
            "__global__ void k(const float* a, const float* b, float* c, int n) {\n"
            "  float acc = 0.0f;\n"
            "  for (int i = 0; i < n; ++i) acc = fmaf(a[i], b[i], acc);\n"
            "  c[threadIdx.x] = acc;\n}\n",
            "t.cu",
        )
    ).kernel("k")
    assert {(r.target, r.op, r.style) for r in k.reductions} == {("acc", "sum", "loop_accumulate")}
    (st,) = k.stores
    assert show(st.value) == "loop_accumulate:sum(0.0f, (a[i] * b[i]))"
