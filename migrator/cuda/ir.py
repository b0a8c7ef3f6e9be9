"""The kernel IR: what the front end knows about each CUDA kernel, as frozen pydantic models.

JSON-serializable (``TranslationUnit.model_dump_json()``) with a published schema
(``TranslationUnit.model_json_schema()``). Every node carries the span of the CUDA source it
came from, so later diagnostics can point at it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from migrator.cuda import poly
from migrator.diagnostics import Diagnostic, Span

IR_VERSION = "1.0"

Role = Literal["in", "out", "inout", "scalar", "unused"]
Space = Literal["global", "shared", "local", "constant"]
AccessKind = Literal["read", "write", "update", "atomic", "address"]
LoopKind = Literal[
    "grid_stride", "block_stride", "halving", "doubling", "counted", "thread_dependent", "while"
]
GuardKind = Literal["bounds", "thread_select", "other"]


class _Node(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AffineTerm(_Node):
    """``coeff * symbols[0] * symbols[1] * ...``; an empty symbol list is the constant term."""

    coeff: int
    symbols: list[str]


class IndexExpr(_Node):
    """An index (or bound, or step) expression and, where possible, its affine normal form."""

    text: str
    affine: bool
    terms: list[AffineTerm] = Field(default_factory=list)
    canonical: str | None = None
    variant: list[str] = Field(default_factory=list)  # thread/block/loop symbols it depends on
    pattern: str | None = None  # e.g. "global_x": blockIdx.x*blockDim.x + threadIdx.x
    reason: str | None = None  # why it is not affine

    def as_poly(self) -> poly.Poly:
        return {tuple(t.symbols): t.coeff for t in self.terms}


class IndexVar(_Node):
    """A local variable defined as an index expression (``int i = blockIdx.x*blockDim.x + ...``)."""

    name: str
    expr: IndexExpr
    span: Span


class TemplateParam(_Node):
    name: str
    kind: Literal["type", "value"]
    type: str | None = None
    default: str | None = None
    span: Span


class Param(_Node):
    name: str
    type: str  # as written, e.g. "const float* __restrict__"
    base_type: str  # element type, e.g. "float"
    pointer_depth: int = 0
    is_const: bool = False
    is_restrict: bool = False
    is_reference: bool = False
    role: Role
    span: Span


class ArrayDecl(_Node):
    """A `__shared__`, local or `__constant__` array (or scalar when dims is empty)."""

    name: str
    elem_type: str
    space: Space
    dims: list[int | None] = Field(default_factory=list)  # None: not evaluable / dynamic
    dims_text: list[str] = Field(default_factory=list)
    dynamic: bool = False  # extern __shared__ T x[];
    bytes: int | None = None
    bindings: dict[str, int] = Field(default_factory=dict)  # template values used for dims
    has_initializer: bool = False
    init_values: list[float] | None = None  # a constant initializer list, when all numeric
    span: Span


class Access(_Node):
    """One read or write of global/shared/local/constant memory."""

    array: str  # the parameter or array it resolves to
    space: Space
    kind: AccessKind
    indices: list[IndexExpr]  # one per subscript; pointer accesses have one (the flat offset)
    via: str | None = None  # a local pointer alias it went through (x4 for float4* x4 = ...)
    vector_width: int = 1  # elements per access (4 for a float4 access to a float buffer)
    guards: list[int] = Field(default_factory=list)  # ids of enclosing guards
    loops: list[int] = Field(default_factory=list)  # ids of enclosing loops, outermost first
    span: Span


class Loop(_Node):
    id: int
    var: str | None
    start: IndexExpr | None = None
    bound: IndexExpr | None = None
    cmp: str | None = None
    step: IndexExpr | None = None
    kind: LoopKind
    parent: int | None = None
    unroll: bool = False  # preceded by #pragma unroll
    span: Span


class BoundCheck(_Node):
    index: IndexExpr
    op: str  # <, <=, >, >=
    limit: IndexExpr


class Guard(_Node):
    id: int
    condition: str
    kind: GuardKind
    thread_dependent: bool  # varies between threads of one block
    depends_on: list[str] = Field(default_factory=list)
    checks: list[BoundCheck] = Field(default_factory=list)
    early_exit: bool = False  # `if (i >= n) return;` guards what follows
    span: Span


class Barrier(_Node):
    kind: str  # __syncthreads, __syncwarp, cg.sync, ...
    scope: Literal["block", "warp", "grid"]
    guards: list[int] = Field(default_factory=list)
    loops: list[int] = Field(default_factory=list)
    divergent: bool = False
    span: Span


class Call(_Node):
    name: str
    kind: str  # a builtins.CallKind value
    args: list[str] = Field(default_factory=list)
    guards: list[int] = Field(default_factory=list)
    loops: list[int] = Field(default_factory=list)
    span: Span


class Reduction(_Node):
    """A value combined across iterations or threads: the signature of a reduction."""

    target: str  # accumulator variable or shared array
    op: Literal["sum", "max", "min", "prod", "and", "or", "xor", "unknown"]
    style: Literal["loop_accumulate", "warp_shuffle", "shared_tree", "atomic"]
    loop: int | None = None
    span: Span


ExprKind = Literal[
    "const", "param", "index", "load", "unary", "binary", "call", "select", "cast", "reduce",
    "opaque",
]  # fmt: skip


class Expr(_Node):
    """A value computed by the kernel, as a tree over loads, parameters and constants.

    Locals are substituted and `__device__` helpers inlined, so the value a kernel stores reads as
    one expression: ``c[i] = a[i] + b[i]`` is ``binary(+, load a[gx], load b[gx])``. A loop
    accumulator becomes ``reduce(op, init, contribution)`` over its loop; a warp-shuffle tree
    becomes ``reduce(op, value)`` with style ``warp_shuffle``.
    """

    kind: ExprKind
    op: str | None = None  # operator, function name, reduction op, cast type
    args: list[Expr] = Field(default_factory=list)
    value: float | int | None = None  # const
    dtype: str | None = None  # const: "float" (1.0f), "double" (1.0) or "int"
    name: str | None = None  # param / index symbol / loaded array
    index: list[IndexExpr] = Field(default_factory=list)  # load
    space: Space | None = None  # load
    style: str | None = None  # reduce: loop_accumulate | warp_shuffle
    loop: int | None = None  # reduce: the loop it runs over
    text: str = ""

    def walk(self) -> list[Expr]:
        out: list[Expr] = [self]
        for a in self.args:
            out.extend(a.walk())
        return out


class Store(_Node):
    """A write to memory and the value written."""

    array: str
    space: Space
    op: str  # "=" or a compound operator such as "+="
    index: list[IndexExpr]
    value: Expr
    guards: list[int] = Field(default_factory=list)
    loops: list[int] = Field(default_factory=list)
    span: Span


class Kernel(_Node):
    """A `__global__` or `__device__` function."""

    name: str
    qualifier: Literal["global", "device", "host_device"]
    return_type: str
    template_params: list[TemplateParam] = Field(default_factory=list)
    instantiations: list[list[str]] = Field(default_factory=list)
    # (position, type) of parameters without a name: tags such as `std::bool_constant<B>`
    unnamed_params: list[tuple[int, str]] = Field(default_factory=list)
    params: list[Param]
    shared: list[ArrayDecl] = Field(default_factory=list)
    local_arrays: list[ArrayDecl] = Field(default_factory=list)
    index_vars: list[IndexVar] = Field(default_factory=list)
    accesses: list[Access] = Field(default_factory=list)
    loops: list[Loop] = Field(default_factory=list)
    guards: list[Guard] = Field(default_factory=list)
    barriers: list[Barrier] = Field(default_factory=list)
    calls: list[Call] = Field(default_factory=list)
    reductions: list[Reduction] = Field(default_factory=list)
    stores: list[Store] = Field(default_factory=list)
    returns: Expr | None = None  # a __device__ helper's returned value, in terms of its params
    vector_types: list[str] = Field(default_factory=list)
    half_types: list[str] = Field(default_factory=list)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    span: Span
    # the definition's preprocessed text where a macro wrote it (`#define K(NAME) __global__
    # void NAME(...) {...}`: the lines as written hold the invocation, not the body)
    expanded: str | None = None

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def accesses_to(self, array: str) -> list[Access]:
        return [a for a in self.accesses if a.array == array]


class LaunchSite(_Node):
    """`kernel<<<grid, block, smem, stream>>>(args)` in host code."""

    kernel: str
    template_args: list[str] = Field(default_factory=list)
    grid: str
    block: str
    shared_bytes: str | None = None
    stream: str | None = None
    args: list[str] = Field(default_factory=list)
    arg_types: dict[str, str] = Field(default_factory=dict)  # host-declared pointer types
    host_function: str | None = None
    host_values: dict[str, str] = Field(default_factory=dict)  # host locals the config uses
    # `switch (K) { case 64: k<64><<<...>>>` : K is 64 at this launch (a constant, not a size);
    # so is `BM` of `k<BM><<<N / BM, ...>>>` with `const int BM = 128`: the kernel's compiled tile
    case_values: dict[str, str] = Field(default_factory=dict)
    # `if (n % TILE != 0) exit(1);` before the launch: what the host requires, as conditions
    # that hold at the launch (`n % TILE == 0`), in host names
    requires: list[str] = Field(default_factory=list)
    # `cudaMemset(m, -10000.0f, n)` always run before the launch: host name -> the value
    # argument as written (memset stores its low byte in every byte)
    fills: dict[str, str] = Field(default_factory=dict)
    fill_bytes: dict[str, str] = Field(default_factory=dict)  # ... and the byte count
    span: Span


class TranslationUnit(_Node):
    """Everything the front end extracted from one `.cu` file."""

    ir_version: str = IR_VERSION
    file: str
    kernels: list[Kernel]
    constants: list[ArrayDecl] = Field(default_factory=list)
    launch_sites: list[LaunchSite] = Field(default_factory=list)
    # host helpers that compute launch sizes (`int grid_for(int n) { ... return b; }`):
    # name -> (parameter names, returned expression with the helper's locals substituted)
    host_helpers: dict[str, tuple[list[str], str]] = Field(default_factory=dict)
    macros: dict[str, str] = Field(default_factory=dict)
    diagnostics: list[Diagnostic] = Field(default_factory=list)

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        known = ", ".join(k.name for k in self.kernels) or "none"
        raise KeyError(f"no kernel named {name!r} in {self.file} (kernels: {known})")

    @property
    def global_kernels(self) -> list[Kernel]:
        return [k for k in self.kernels if k.qualifier == "global"]
