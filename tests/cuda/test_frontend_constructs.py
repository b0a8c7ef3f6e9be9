"""Front-end facts on small kernels, one construct at a time."""

from __future__ import annotations

from migrator.cuda.frontend import analyze_text
from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.cuda.validate import validate


def tu_of(src: str) -> TranslationUnit:
    return validate(analyze_text(src, "t.cu"))


def one(src: str, name: str = "k") -> Kernel:
    return tu_of(src).kernel(name)


def roles(k: Kernel) -> dict[str, str]:
    """Each parameter's role, by name."""
    return {p.name: p.role for p in k.params}


def diag_ids(k: Kernel) -> set[str]:
    return {d.id for d in k.diagnostics}


def test_float4_reinterpret_alias_scales_index() -> None:
    k = one(
        "__global__ void k(const float* __restrict__ x, float* y, int n4) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  const float4* x4 = reinterpret_cast<const float4*>(x);\n"
        "  if (i < n4) { float4 v = x4[i]; y[i] = v.x + v.y + v.z + v.w; }\n"
        "}\n"
    )
    read = next(a for a in k.accesses if a.array == "x")
    assert read.vector_width == 4 and read.via == "x4"
    assert read.indices[0].canonical == "4*blockIdx.x*blockDim.x + 4*threadIdx.x"
    assert "float4" in k.vector_types
    assert k.param("x").role == "in" and k.param("y").role == "out"


def test_a_parameter_shadows_a_file_scope_constant_of_its_name() -> None:
    """`const int N = 100000000;` at file scope and a kernel parameter `const int N` (teaching
    code passes the constant it is named after): the kernel's `n < N` reads the argument, a
    size, not the file's number."""
    k = one(
        "const int N = 100000000;\n"
        "__global__ void k(const float* x, float* y, const int N) {\n"
        "  for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N;"
        " n += blockDim.x * gridDim.x) y[n] = x[n];\n"
        "}\n"
    )
    (loop,) = k.loops
    assert loop.bound.canonical == "N"
    # (a name no parameter shadows stays the file's constant)
    k = one(
        "const int M = 64;\n"
        "__global__ void k(float* y, int n) {\n"
        "  for (int i = threadIdx.x; i < M; i += blockDim.x) y[i] = 0.0f;\n"
        "}\n"
    )
    assert k.loops[0].bound.canonical == "64"


def test_row_pointer_offset_alias() -> None:
    k = one(
        "__global__ void k(const float* in, float* out, int cols) {\n"
        "  const float* row = in + blockIdx.x * cols;\n"
        "  float* orow = &out[blockIdx.x * cols];\n"
        "  for (int c = threadIdx.x; c < cols; c += blockDim.x) orow[c] = 2.0f * row[c];\n"
        "}\n"
    )
    w = next(a for a in k.accesses if a.array == "out")
    assert w.indices[0].canonical == "blockIdx.x*cols + c" and w.via == "orow"
    assert k.loops[0].kind == "block_stride"


def test_a_moved_pointer_parameter_carries_its_offset() -> None:
    """`inp += C * row; inp[c]` reads element row*C + c, not c (that was a silent wrong index)."""
    k = one(
        "__global__ void k(float* out, const float* inp, int N, int C) {\n"
        "  int row = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (row >= N) return;\n"
        "  inp += C * row; out = out + C * row; out++; out -= 1;\n"
        "  for (int c = 0; c < C; ++c) out[c] = 2.0f * inp[c];\n"
        "}\n"
    )
    for a in k.accesses:
        assert a.indices[0].affine
        assert a.indices[0].canonical == "blockIdx.x*blockDim.x*C + threadIdx.x*C + c"


def test_a_pointer_moved_to_an_element_address_is_read_not_written() -> None:
    """`A = &A[row * N];` (a gemv tutorial's row pointer): the parameter moves, as `A += row *
    N` does; taking the address to move it writes nothing, so A stays an input, and the float4
    reads through it carry the offset."""
    k = one(
        "__global__ void k(float* __restrict__ A, float* x, float* y, const int N) {\n"
        "  int r = blockIdx.x;\n"
        "  A = &A[r * N];\n"
        "  float4 v = reinterpret_cast<float4 *>(A)[threadIdx.x];\n"
        "  y[r] = v.x + x[0];\n"
        "}\n"
    )
    assert k.param("A").role == "in"
    (read,) = [a for a in k.accesses if a.array == "A"]
    assert read.kind == "read" and read.indices[0].canonical == "blockIdx.x*N + 4*threadIdx.x"
    # (an address that escapes into something else is still a possible write)
    k = one("__global__ void k(float* A, float** P) { P[0] = &A[threadIdx.x]; }\n")
    assert k.param("A").role == "inout"


def test_an_element_a_helper_sets_through_a_reference_is_written() -> None:
    """`add(x[n], y[n], z[n])` with `__device__ void add(double x, double y, double &z)`: z[n]
    is stored by the helper, so z is an output of the kernel (it read as an input, and the
    NKI kernel emitted from the traced program returned an output the task did not have)."""
    k = one(
        "__device__ void add(const float x, const float y, float &z) { z = x + y; }\n"
        "__device__ float twice(const float &v) { return 2.0f * v; }\n"
        "__global__ void k(const float* x, const float* y, float* z, float* w, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) { add(x[i], y[i], z[i]); w[i] = twice(y[i]); }\n"
        "}\n"
    )
    assert roles(k) == {"x": "in", "y": "in", "z": "inout", "w": "out", "n": "scalar"}
    (z,) = [a for a in k.accesses if a.array == "z"]
    assert z.kind == "update" and z.indices[0].canonical == "blockIdx.x*blockDim.x + threadIdx.x"


def test_a_pointer_moved_in_a_loop_or_branch_is_not_affine() -> None:
    """Moved each iteration or on some paths only, the offset is unknown: said, never guessed."""
    k = one(
        "__global__ void k(float* out, const float* inp, int N) {\n"
        "  float* q = out + threadIdx.x;\n"
        "  if (blockIdx.x > 0) inp += N;\n"
        "  for (int c = 0; c < 4; ++c) { q[0] = inp[c]; q += N; }\n"
        "}\n"
    )
    by = {a.array: a.indices[0] for a in k.accesses}
    assert not by["out"].affine and "offset of pointer q" in (by["out"].reason or "")
    assert not by["inp"].affine
    assert "C2N1002" in diag_ids(k)


def test_atomic_add_makes_inout_and_reduction() -> None:
    k = one(
        "__global__ void k(const float* x, float* total, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) atomicAdd(&total[0], x[i]);\n"
        "}\n"
    )
    assert k.param("total").role == "inout"
    assert any(a.kind == "atomic" and a.array == "total" for a in k.accesses)
    assert [(r.target, r.op, r.style) for r in k.reductions] == [("total", "sum", "atomic")]
    assert any(c.name == "atomicAdd" and c.kind == "atomic" for c in k.calls)


def test_gather_index_is_non_affine_with_diagnostic() -> None:
    k = one(
        "__global__ void k(const float* x, const int* idx, float* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) y[i] = x[idx[i]];\n"
        "}\n"
    )
    read = next(a for a in k.accesses if a.array == "x")
    assert not read.indices[0].affine and "idx" in read.indices[0].text
    assert "C2N1002" in diag_ids(k)
    assert k.param("idx").role == "in"


def test_divergent_barrier_is_flagged() -> None:
    k = one(
        "__global__ void k(float* x) {\n"
        "  __shared__ float s[64];\n"
        "  if (threadIdx.x < 32) { s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); }\n"
        "  x[threadIdx.x] = s[0];\n"
        "}\n"
    )
    assert k.barriers[0].divergent
    assert "C2N1011" in diag_ids(k)


def test_uniform_condition_barrier_is_not_divergent() -> None:
    k = one(
        "__global__ void k(float* x, int n) {\n"
        "  __shared__ float s[64];\n"
        "  if (blockIdx.x < n) { s[threadIdx.x] = 1.0f; __syncthreads(); }\n"
        "}\n"
    )
    assert not k.barriers[0].divergent


def test_cooperative_groups_scopes() -> None:
    src = (
        "namespace cg = cooperative_groups;\n"
        "__global__ void k(float* x) {\n"
        "  cg::thread_block block = cg::this_thread_block();\n"
        "  auto tile = cg::tiled_partition<32>(block);\n"
        "  block.sync();\n  tile.sync();\n  cg::sync(block);\n"
        "  auto grid = cg::this_grid();\n  grid.sync();\n"
        "}\n"
    )
    k = one(src)
    assert [(b.kind, b.scope) for b in k.barriers] == [
        ("cg.sync", "block"),
        ("cg.sync", "warp"),
        ("cg::sync", "block"),
        ("cg.sync", "grid"),
    ]
    assert "C2N1013" in diag_ids(k)


def test_unsupported_constructs_become_diagnostics() -> None:
    src = (
        "__device__ int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }\n"
        "struct P { int a; };\n"
        "__global__ void child(float* x) { x[0] = 1.0f; }\n"
        "__global__ void k(float** pp, P p, float* x) {\n"
        '  asm volatile("membar.gl;");\n'
        '  printf("hi %d\\n", threadIdx.x);\n'
        "  if (threadIdx.x == 0) goto done;\n"
        "  x[0] = tex1Dfetch<float>(0, 1);\n"
        "done:\n  return;\n}\n"
        "__device__ void parent(float* x) { child<<<1, 1>>>(x); }\n"
    )
    tu = tu_of(src)
    k = tu.kernel("k")
    assert {"C2N1003", "C2N1008", "C2N1009", "C2N1014", "C2N1015", "C2N1004"} <= diag_ids(k)
    assert "C2N1010" in diag_ids(tu.kernel("fact"))
    assert "C2N1005" in diag_ids(tu.kernel("parent"))
    for d in k.diagnostics:
        assert d.span is not None and d.span.file == "t.cu" and d.span.line >= 4


def test_device_function_roles_propagate_and_reference_params() -> None:
    src = (
        "__device__ void load2(const float* src, float* dst, int i) { dst[i] = src[i]; }\n"
        "__device__ void minmax(float v, float& lo, float& hi) { lo = fminf(lo, v); hi = v; }\n"
        "__global__ void k(const float* a, float* b) {\n"
        "  load2(a, b, threadIdx.x);\n"
        "}\n"
    )
    tu = tu_of(src)
    k = tu.kernel("k")
    assert k.param("a").role == "in" and k.param("b").role == "out"
    mm = tu.kernel("minmax")
    assert mm.param("lo").role == "out" and mm.param("lo").is_reference
    assert mm.param("v").role == "scalar"


def test_templates_instantiations_and_shared_sizes() -> None:
    src = (
        "template <typename T, int TILE>\n"
        "__global__ void k(const T* in, T* out) {\n"
        "  __shared__ T tile[TILE][TILE + 1];\n"
        "  tile[threadIdx.y][threadIdx.x] = in[threadIdx.y * TILE + threadIdx.x];\n"
        "  __syncthreads();\n"
        "  out[threadIdx.x * TILE + threadIdx.y] = tile[threadIdx.x][threadIdx.y];\n"
        "}\n"
        "template __global__ void k<float, 32>(const float*, float*);\n"
        "void launch(const double* a, double* b) {\n"
        "  dim3 block(16, 16);\n  k<double, 16><<<1, block>>>(a, b);\n}\n"
    )
    tu = tu_of(src)
    k = tu.kernel("k")
    assert [t.name for t in k.template_params] == ["T", "TILE"]
    assert [t.kind for t in k.template_params] == ["type", "value"]
    assert k.instantiations == [["float", "32"], ["double", "16"]]
    assert k.shared[0].dims == [32, 33] and k.shared[0].bindings == {"TILE": 32}
    site = tu.launch_sites[0]
    assert site.template_args == ["double", "16"] and site.block == "block"
    assert site.host_values["block"] == "dim3(16, 16)"
    assert k.accesses[-1].indices[0].canonical == "threadIdx.x*TILE + threadIdx.y"


def test_shared_sizes_from_local_constants_and_parenthesised_template_arguments() -> None:
    """`constexpr int WARPS = (THREADS + 31) / 32; __shared__ float s[WARPS];` under launches
    written through a macro (`k<(H)>` gives `(128)`): the size is known, no C2N1006."""
    src = (
        "#define WARP 32\n"
        "template <const int THREADS = 256 / 4>\n"
        "__global__ void k(const float* x, float* y) {\n"
        "  constexpr int WARPS = (THREADS + WARP - 1) / WARP;\n"
        "  __shared__ float partial[WARPS];\n"
        "  partial[threadIdx.x / WARP] = x[threadIdx.x];\n"
        "  __syncthreads();\n"
        "  y[threadIdx.x] = partial[0];\n"
        "}\n"
        "#define LAUNCH(H) k<(H)><<<1, (H)>>>(x, y)\n"
        "void launch(const float* x, float* y) { LAUNCH(128); LAUNCH(256); }\n"
    )
    k = tu_of(src).kernel("k")
    assert k.instantiations[0] == ["(128)"]
    assert k.shared[0].dims == [4]
    assert "C2N1006" not in diag_ids(k)
    # no launch: the default (an expression of literals) gives the size
    alone = tu_of(src.split("#define LAUNCH")[0]).kernel("k")
    assert alone.shared[0].dims == [2] and "C2N1006" not in diag_ids(alone)


def test_template_values_of_a_single_instantiation_are_index_constants() -> None:
    """One instantiation gives a template value one meaning: `k < K` is a counted loop with a
    constant bound and `K / 2` folds into the index (with several, see the test above, the
    index stays symbolic in them)."""
    k = one(
        "template <int K>\n"
        "__global__ void k(const float* x, float* y, int n) {\n"
        "  constexpr int PAD = K / 2;\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  float acc = 0.0f;\n"
        "  for (int t = 0; t < K; ++t) acc += x[i + t - PAD];\n"
        "  y[i] = acc;\n"
        "}\n"
        "void launch(const float* x, float* y, int n) { k<5><<<1, 256>>>(x, y, n); }\n"
    )
    (loop,) = k.loops
    assert loop.kind == "counted" and loop.bound is not None and loop.bound.canonical == "5"
    read = next(a for a in k.accesses if a.array == "x")
    assert read.indices[0].affine
    assert read.indices[0].canonical.endswith("- 2"), read.indices[0].canonical


def test_loop_kinds_and_pragma() -> None:
    k = one(
        "__global__ void k(float* x, int n) {\n"
        "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)"
        " x[i] = 0;\n"
        "  for (int c = threadIdx.x; c < n; c += blockDim.x) x[c] += 1;\n"
        "  for (int s = blockDim.x / 2; s > 0; s >>= 1) x[threadIdx.x] += s;\n"
        "  for (int s = 1; s < 32; s <<= 1) x[threadIdx.x] -= s;\n"
        "  #pragma unroll\n"
        "  for (int j = 0; j < 4; ++j) x[j] = j;\n"
        "  for (int j = threadIdx.x; j < n; j++) x[j] = 2;\n"
        "  int w = 0; while (w < n) { w += 3; }\n"
        "}\n"
    )
    assert [lp.kind for lp in k.loops] == [
        "grid_stride", "block_stride", "halving", "doubling", "counted", "thread_dependent",
        "while",
    ]  # fmt: skip
    assert [lp.unroll for lp in k.loops] == [False, False, False, False, True, False, False]
    assert k.loops[4].bound is not None and k.loops[4].bound.canonical == "4"


def test_guards_bounds_early_exit_and_thread_select() -> None:
    k = one(
        "__global__ void k(float* x, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i >= n) return;\n"
        "  x[i] = 1.0f;\n"
        "  if (threadIdx.x == 0) x[blockIdx.x] = 2.0f;\n"
        "}\n"
    )
    g0, g1 = k.guards
    assert (g0.kind, g0.early_exit, g0.thread_dependent) == ("bounds", True, True)
    assert g0.checks[0].index.pattern == "global_x" and g0.checks[0].op == ">="
    assert g1.kind == "thread_select"
    first, second = (a for a in k.accesses if a.kind == "write")
    assert first.guards == [0] and second.guards == [0, 1]  # early exit guards what follows


def test_reassigned_variable_is_tracked_flow_sensitively() -> None:
    k = one(
        "__global__ void k(float* x, int n) {\n"
        "  int i = threadIdx.x;\n  x[i] = 0;\n"
        "  i = blockIdx.x * blockDim.x + threadIdx.x;\n  x[i] = 1;\n"
        "  if (n > 3) i = 5;\n  x[i] = 2;\n"
        "}\n"
    )
    idx = [a.indices[0] for a in k.accesses]
    assert idx[0].canonical == "threadIdx.x"
    assert idx[1].pattern == "global_x"
    assert not idx[2].affine and "conditionally" in (idx[2].reason or "")


def test_half_and_bf16_types_and_conversions() -> None:
    k = one(
        "__global__ void k(const __half* a, __nv_bfloat16* b) {\n"
        "  float v = __half2float(a[threadIdx.x]);\n"
        "  b[threadIdx.x] = __float2bfloat16(v * 2.0f);\n"
        "}\n"
    )
    assert set(k.half_types) == {"__half", "__nv_bfloat16"}
    assert {c.name for c in k.calls if c.kind == "conversion"} == {
        "__half2float", "__float2bfloat16"}  # fmt: skip


def test_warp_intrinsics_and_warp_reduction() -> None:
    k = one(
        "__global__ void k(const float* x, float* out) {\n"
        "  float v = x[threadIdx.x];\n"
        "  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o);\n"
        "  unsigned m = __ballot_sync(0xffffffff, v > 0.0f);\n"
        "  if ((threadIdx.x & 31) == 0) out[threadIdx.x / 32] = v + m;\n"
        "}\n"
    )
    assert {c.name for c in k.calls if c.kind == "warp"} == {"__shfl_xor_sync", "__ballot_sync"}
    assert [(r.target, r.style, r.op) for r in k.reductions] == [("v", "warp_shuffle", "sum")]
    w = next(a for a in k.accesses if a.array == "out")
    assert w.indices[0].canonical == "floordiv(threadIdx.x, 32)" and w.indices[0].affine
    assert k.guards[-1].kind == "thread_select"


def test_no_kernels_is_a_warning_not_an_error() -> None:
    tu = tu_of("int host_only(int a) { return a + 1; }\n")
    assert tu.kernels == [] and [d.id for d in tu.diagnostics] == ["C2N0008"]


def test_every_node_carries_a_span() -> None:
    k = one(
        "__global__ void k(float* x, int n) {\n"
        "  for (int i = threadIdx.x; i < n; i += 32) { if (i % 2) x[i] = 0; }\n"
        "  __syncthreads();\n}\n"
    )
    for node in [*k.params, *k.accesses, *k.loops, *k.guards, *k.barriers, *k.calls]:
        assert node.span.file == "t.cu" and node.span.line >= 1 and node.span.col >= 1


def test_validate_catches_broken_ir() -> None:
    import pytest

    from migrator.cuda.validate import IRError

    tu = tu_of("__global__ void k(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] = 1; }\n")
    k = tu.kernels[0]
    bad_access = k.accesses[0].model_copy(update={"guards": [7]})
    with pytest.raises(IRError, match="guard that does not exist"):
        validate(
            tu.model_copy(update={"kernels": [k.model_copy(update={"accesses": [bad_access]})]})
        )
    bad_role = k.params[1].model_copy(update={"role": "in"})
    with pytest.raises(IRError, match="role in does not fit"):
        validate(
            tu.model_copy(
                update={"kernels": [k.model_copy(update={"params": [k.params[0], bad_role]})]}
            )
        )


def test_launch_without_block_is_an_input_error() -> None:
    import pytest

    from migrator.cuda.source import SourceError

    with pytest.raises(SourceError) as e:
        tu_of("__global__ void k(float* x) {}\nvoid h(float* x) { k<<<4>>>(x); }\n")
    (d,) = e.value.diagnostics
    assert d.id == "C2N1018" and d.span is not None and d.span.line == 2


def test_comparison_chain_misread_as_template_is_flagged() -> None:
    k = one(
        "__global__ void k(float* out, const float* in, int H, int W) {\n"
        "  int y = threadIdx.y, x = threadIdx.x;\n"
        "  out[0] = (y >= 0 && y < H && x >= 0 && x < W) ? in[0] : 0.0f;\n}\n"
    )
    assert "C2N1019" in diag_ids(k)


def test_cast_in_a_store_index_is_not_a_misparse() -> None:
    k = one(
        "__global__ void k(float* out, const float* in, int rows) {\n"
        "  int r = threadIdx.x, c = blockIdx.x;\n"
        "  out[static_cast<size_t>(c) * rows + r] = in[static_cast<size_t>(r) * 4 + c];\n}\n"
    )
    assert "C2N1019" not in diag_ids(k)


def test_align_attribute_on_shared_arrays() -> None:
    k = one(
        "__global__ void k(float* x) {\n"
        "  __shared__ __align__(16) float s[64];\n"
        "  s[threadIdx.x] = 1.0f;\n  __syncthreads();\n  x[threadIdx.x] = s[threadIdx.x];\n}\n"
    )
    assert [(a.name, a.dims) for a in k.shared] == [("s", [64])]


def test_cooperative_group_ranks_are_thread_index_algebra() -> None:
    """`cg::thread_block_tile<32> warp = ...` (which tree-sitter reads as a comparison chain)
    declares the tile; its ranks become lane and warp ids."""
    k = one(
        "namespace cg = cooperative_groups;\n"
        "__global__ void k(float* y) {\n"
        "  cg::thread_block block = cg::this_thread_block();\n"
        "  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);\n"
        "  y[warp.meta_group_rank() * 32 + warp.thread_rank()] = 1.0f;\n"
        "  y[block.thread_rank()] = 2.0f;\n}\n"
    )
    got = [a.indices[0].canonical for a in k.accesses if a.array == "y"]
    assert got == ["32*floordiv(threadIdx.x, 32) + mod(threadIdx.x, 32)", "threadIdx.x"]
    assert "C2N1019" not in diag_ids(k)


def test_cache_hinted_loads_and_stores_are_accesses_of_their_pointer() -> None:
    """An output written only through `__stcs` is an output, not 'unused'; `__ldg(&x[i])`
    reads x (it does not let x's address escape as a write)."""
    k = one(
        "__global__ void k(float* y, const float* x, const float* z, float* w, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) { __stcs(y + i, __ldcs(x + i) + __ldg(&z[i])); __stcg(&w[i], 1.0f); }\n"
        "}\n"
    )
    assert roles(k) == {"y": "out", "x": "in", "z": "in", "w": "out", "n": "scalar"}
    w = next(a for a in k.accesses if a.array == "w")
    assert w.kind == "write" and w.indices[0].canonical == "blockIdx.x*blockDim.x + threadIdx.x"


def test_a_pointer_chosen_by_a_ternary_gives_both_arrays_their_roles() -> None:
    k = one(
        "__global__ void k(float* out, const float* a, const float* b, float* c, float* d,\n"
        "                  int v, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  const float* q = v == 0 ? a : b;\n"
        "  float* w = v ? c : d;\n"
        "  if (i < n) { w[i] = q[i]; out[i] = q[i] * 2.0f; }\n"
        "}\n"
    )
    assert roles(k) == {"out": "out", "a": "in", "b": "in", "c": "out", "d": "out",
                     "v": "scalar", "n": "scalar"}  # fmt: skip


def test_macro_wrapped_128_bit_accesses_are_reads_and_writes() -> None:
    """`#define LDST128BITS(v) (reinterpret_cast<float4 *>(&(v))[0])` on both sides of an
    assignment: parentheses around the lvalue and around `&(a[i])` hide nothing."""
    k = one(
        "#define LDST128BITS(value) (reinterpret_cast<float4 *>(&(value))[0])\n"
        "__global__ void k(half* a, half* c, int N) {\n"
        "  int idx = 8 * (blockIdx.x * blockDim.x + threadIdx.x);\n"
        "  half pa[8];\n"
        "  LDST128BITS(pa[0]) = LDST128BITS(a[idx]);\n"
        "  if ((idx + 7) < N) { LDST128BITS(c[idx]) = LDST128BITS(pa[0]); }\n"
        "}\n"
    )
    assert roles(k) == {"a": "in", "c": "out", "N": "scalar"}
    c = next(a for a in k.accesses if a.array == "c")
    assert c.kind == "write" and c.vector_width == 8


def test_host_values_follow_each_launch_path() -> None:
    """A launch sees the definitions on its own path: not another switch case's or if arm's
    (nor a declaration out of scope there), and an earlier assignment in its own block."""
    tu = tu_of(
        "__global__ void k(float* x, int n) { x[threadIdx.x] = 1.0f; }\n"
        "void run(float* x, int n, int which, int threads, int ndim) {\n"
        "  int smem = threads * 4;\n"
        "  switch (which) {\n"
        "  case 0: k<<<1, threads, smem>>>(x, n); break;\n"
        "  case 9: smem = 8; k<<<2, threads, smem>>>(x, n); break;\n"
        "  }\n"
        "  if (ndim != 2) {\n"
        "    int N = 1;\n"
        "    for (int i = 0; i < ndim; ++i) { N *= n; }\n"
        "    k<<<N, 32>>>(x, N);\n"
        "  } else {\n"
        "    int N = 7;\n"
        "    k<<<N, 32>>>(x, N);\n"
        "  }\n"
        "  for (int r = 0; r < 3; ++r) { k<<<smem, 32>>>(x, n); smem = 1; }\n"
        "}\n"
    )
    case0, case9, loop_n, lit_n, looped = tu.launch_sites
    assert case0.host_values["smem"] == "threads * 4" and case9.host_values["smem"] == "8"
    assert loop_n.host_values["N"].startswith("<conditional")  # N *= n in a loop
    assert lit_n.host_values["N"] == "7"
    assert looped.host_values["smem"].startswith("<conditional")  # the loop brings smem = 1 back


def test_atomic_targets_however_spelled_are_updates_and_their_indices_reads() -> None:
    """`atomicAdd(&(y[a[i]]), 1)` (a histogram as macros spell it) once left y an input, so
    the histogram was never compared; `y + a[i]` and casts left a unused."""
    targets = [
        "&(y[a[threadIdx.x]])", "(&y[a[threadIdx.x]])", "y + a[threadIdx.x]",
        "(int*)&y[a[threadIdx.x]]", "(int*)(y + a[threadIdx.x])",
    ]  # fmt: skip
    for t in targets:
        k = one(f"__global__ void k(const int* a, int* y) {{ atomicAdd({t}, 1); }}\n")
        assert (k.param("a").role, k.param("y").role) == ("in", "inout"), t
        assert [r.target for r in k.reductions] == ["y"], t
