"""Layout planning: how a matched CUDA kernel becomes NKI tiles, loops and masks.

A `Plan` binds the kernel to the task contract (tensors in calling order, sizes read from input
shapes, value scalars as keywords), names the tile sizes from the hardware limits, and carries
the family-specific pieces a template needs (rendered expressions, which tiles to load, where
each piece came from in the CUDA source). Templates make no decisions: everything is here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from migrator import diagnostics as diag
from migrator.contract import TaskSpec, py_name
from migrator.cuda.ir import Kernel, Span, TranslationUnit

# Hardware-derived tile limits (nki-facts §2.3): partitions, PSUM bank width in fp32,
# matmul stationary/moving free sizes; free size of elementwise tiles is chosen so one DMA moves
# 2 KiB per partition (fp32), the documented minimum for efficient transfers (nki-facts §6.3).
PMAX = 128
PSUM_FMAX = 512
STATIONARY_FMAX = 128
MOVING_FMAX = 512
PSUM_BANKS = 8  # 2 KiB per partition each: one [1, 512] fp32 accumulator a bank
ELEMENTWISE_FREE = 512
BN_STATS_FMAX = 512  # nisa.bn_stats free-size limit (nki-facts §2.3)
MAX_ROW_FREE = 8192  # a whole row per partition for row-wise kernels (32 KiB fp32 of 192 KiB)

# Local names the templates use; an output tensor with one of these names gets a suffix.
TEMPLATE_LOCALS = frozenset(
    [
        "i_p",
        "i_f",
        "idx",
        "in_bounds",
        "t",
        "r",
        "col",
        "rows_ok",
        "x_tile",
        "row_max",
        "shifted",
        "exps",
        "row_sum",
        "mean",
        "centered",
        "var",
        "rstd",
        "ms",
        "y",
        "acc",
        "res",
        "tile",
        "out_tile",
        "a_tile",
        "b_tile",
        "k",
        "m",
        "n",
    ]
)

# Names the templates (both dialects) assign or use besides TEMPLATE_LOCALS: a size of the task
# with one of these names (inferred specs name sizes after host parameters: rows, cols, n) is
# renamed in the NKI kernel, or a loop's `rows = min(P_TILE, rows - r0)` would shadow it.
SIZE_RESERVED = TEMPLATE_LOCALS | frozenset(
    {
        "rows", "cols", "r0", "c0", "rs", "cs", "done", "count", "n", "m", "k", "g", "g0", "full",
        "rem", "total", "ones", "partial", "vec", "i", "j", "flip", "flipped", "src", "tap",
        "halo", "w", "dy", "dx", "ty", "row_offsets", "dx_low", "width", "i_h", "s_p", "s_h",
        "inside", "bt", "tm", "tn", "tk", "m0", "n0", "k0", "ns", "ks", "i_m", "i_n", "i_k",
        "i_kf", "i_kp", "i_np", "i_kf2", "i_mo", "i_no", "out_ok", "a_t", "c_tile", "bt_tile",
        "a_flip", "b_flip", "part", "shift", "first", "last", "stats", "mean_var", "norm", "g_row",
        "b_row", "i_0", "min", "max", "range", "len", "nl", "nki", "nisa", "np", "N_TAPS",
        "w_row", "w_all", "wts", "weights",
        # locals of the reduction (block partials), transpose (super-blocks), stencil, rowwise
        # and matmul-epilogue templates
        "per_p", "parts", "n_parts", "chunk", "i_q", "i_1", "i_b", "MAX_PARTS", "n_strips",
        "sb_rows", "sb_cols", "ragged", "strips", "strip", "SUPER", "o_p", "o_f", "ft", "win",
        "term", "sr0", "sr1", "sc0", "sc1", "acc", "sum_sq", "ms", "rstd", "y", "pre_clamp",
        "neg_max", "offset", "row_max", "row_sum", "shifted", "exps", "sq",
        # attention
        "n_kb", "k_t", "v_sb", "b", "b0", "kb", "k_rows", "qt", "q0", "qr", "n_keys", "n_kt",
        "q_t", "q_rows", "s_sb", "maxes", "kt", "kw", "s_ps", "scaled", "sums", "inv",
        "o_ps", "p_t", "eng", "KEY_TILE", "MAX_KEYS", "k_ps", "q_ps", "p_ps", "o_sb", "bh",
        # window reductions (pooling)
        "i_r", "i_w", "i_o", "nr",
        # rows: per-row values grouped per partition
        "n_t", "i_t", "all_ok", "t",
        # rows: sums down the columns beside them
        "W_C", "n_cc", "i_a", "row_ok", "i_c", "cc", "cw",
    }
)  # fmt: skip

NL_DTYPES = {
    "float32": "nl.float32",
    "float16": "nl.float16",
    "bfloat16": "nl.bfloat16",
    "float8_e4m3": "nl.float8_e4m3",
    "float8_e5m2": "nl.float8_e5m2",
    "int32": "nl.int32",
    "int8": "nl.int8",
    "uint8": "nl.uint8",
    "int16": "nl.int16",
    "uint32": "nl.uint32",
}


class TensorArg(BaseModel):
    name: str  # the NKI kernel's argument / output name
    param: str  # the CUDA pointer parameter it lives in
    role: str
    dtype: str
    nl_dtype: str
    shape: list[str]  # Python expressions over size names

    @property
    def var(self) -> str:
        """The NKI variable of the output: an `inout` tensor's result needs its own name, and
        a name a template uses for its own locals is suffixed too."""
        if self.role == "inout" or self.name in TEMPLATE_LOCALS:
            return f"{self.name}_out"
        return self.name


class Plan(BaseModel):
    """Everything a template needs to render one NKI kernel."""

    family: str
    variant: str | None = None
    cuda_kernel: str
    nki_name: str
    cuda_file: str
    tensors: list[TensorArg]
    value_scalars: list[str] = Field(default_factory=list)
    sizes: dict[str, str] = Field(default_factory=dict)  # size name -> expr over input shapes
    params: dict[str, str] = Field(default_factory=dict)  # CUDA scalar param -> NKI expr
    constants: dict[str, int] = Field(default_factory=dict)  # named tile sizes
    notes: dict[str, str] = Field(default_factory=dict)  # comment lines mapping to CUDA source
    fields: dict[str, Any] = Field(default_factory=dict)  # family-specific
    diagnostics: list[diag.Diagnostic] = Field(default_factory=list)

    @property
    def inputs(self) -> list[TensorArg]:
        return [t for t in self.tensors if t.role in ("in", "inout")]

    @property
    def outputs(self) -> list[TensorArg]:
        return [t for t in self.tensors if t.role in ("out", "inout")]

    def tensor_for_param(self, param: str) -> TensorArg | None:
        return next((t for t in self.tensors if t.param == param), None)

    def avoid_names(self, reserved: set[str] | frozenset[str]) -> None:
        """Rename input arguments that a template's locals would shadow (`res = nl.copy(acc)`
        then `nl.load(res[...])`); arguments are positional, so callers are unaffected."""
        for t in self.tensors:
            if t.role in ("in", "inout") and t.name in reserved:
                old, t.name = t.name, f"{t.name}_in"
                self.sizes = {n: e.replace(f"{old}.shape", f"{t.name}.shape")
                              for n, e in self.sizes.items()}  # fmt: skip


class PlanError(ValueError):
    """The kernel cannot be planned; carries the diagnostic to report."""

    def __init__(self, d: diag.Diagnostic) -> None:
        self.diagnostic = d
        super().__init__(d.message)


def size_expr_to_python(expr: str | int) -> str:
    """A spec size formula as Python (`ceil_div(N, 256)` → `(N + 255) // 256`)."""
    if isinstance(expr, int):
        return str(expr)
    tree = ast.parse(str(expr), mode="eval")

    class Rewrite(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id == "ceil_div":
                a, b = node.args
                return ast.parse(
                    f"(({ast.unparse(a)}) + ({ast.unparse(b)}) - 1) // ({ast.unparse(b)})",
                    mode="eval",
                ).body
            return node

        def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
            self.generic_visit(node)
            if isinstance(node.op, ast.Div):
                node.op = ast.FloorDiv()  # host C integer division
            return node

    return ast.unparse(Rewrite().visit(tree))


def bind(tu: TranslationUnit, k: Kernel, spec: TaskSpec, family: str, variant: str | None) -> Plan:
    """The contract side of a plan: arguments, sizes from shapes, scalars."""
    spec = _rename_keywords(_rename_sizes(spec, SIZE_RESERVED))
    tensors = [
        TensorArg(
            name=t.name,
            param=t.cuda_param,
            role=t.role,
            dtype=t.dtype,
            nl_dtype=NL_DTYPES.get(t.dtype, f"nl.{t.dtype}"),
            shape=[size_expr_to_python(d) for d in t.shape],
        )
        for t in spec.tensors
        if t.role != "scratch"  # (the CUDA original's working memory: no NKI argument)
    ]
    # a dimension an input has whole (`B * T`) is read from that input, so the sizes inside
    # it need not be known one by one
    whole = {size_expr_to_python(d): f"{t.name}.shape[{i}]"
             for t in reversed(spec.inputs_in_order) for i, d in enumerate(t.shape)
             if not isinstance(d, int) and not str(d).isidentifier()}  # fmt: skip
    sizes: dict[str, str] = {}
    needed: set[str] = set()
    for t in spec.tensors:  # where a size is used other than inside a whole dimension
        if t.role == "scratch":
            continue
        for d in t.shape:
            if size_expr_to_python(d) not in whole:
                needed |= set(re.findall(r"[A-Za-z_]\w*", str(d)))
    unknown: set[str] = set()  # sizes the NKI kernel cannot read (only a scalar names them)
    passed = {str(s.size): s.nki_kwarg for s in spec.passed_sizes}  # keyword arguments
    for name in spec.sizes:
        found = _size_from_shapes(name, spec)
        if found is not None:
            sizes[name] = found
        elif name in passed:
            if passed[name] != name:
                sizes[name] = passed[name]
        elif name in needed:
            raise PlanError(
                diag.make(
                    "NOT_EMITTED",
                    k.span,
                    what=f"size {name} (it appears in no input's shape, so "
                    "the NKI kernel cannot read it)",
                )
            )
        else:  # only the launch uses it (a block size), only whole dimensions, or a scalar
            unknown.add(name)
    params: dict[str, str] = {}
    for s in spec.scalars:
        if s.size is not None:
            expr = size_expr_to_python(s.size)
            expr = expr if expr in sizes else whole.get(expr, expr)
            if not set(re.findall(r"[A-Za-z_]\w*", expr)) & unknown:
                params[s.cuda_param] = expr  # else: an expression that uses it is refused
        else:
            params[s.cuda_param] = s.name
    # (a tensor may name a file-scope `__constant__` table the host fills: an input too)
    cuda_params = {p.name for p in k.params} | {c.name for c in tu.constants}
    for t in spec.tensors:
        if t.cuda_param not in cuda_params and t.role != "scratch":
            raise PlanError(
                diag.make(
                    "NOT_EMITTED",
                    k.span,
                    what=f"tensor {t.name} (no CUDA parameter {t.cuda_param})",
                )
            )
    for ta in tensors:
        ta.shape = [d if d in sizes or d.isdigit() else whole.get(d, d) for d in ta.shape]
    return Plan(
        family=family,
        variant=variant,
        cuda_kernel=k.name,
        nki_name=k.name.removesuffix("_kernel") or k.name,
        cuda_file=tu.file,
        tensors=tensors,
        value_scalars=[s.name for s in spec.keyword_scalars],
        sizes=sizes,
        params=params,
    )


def _size_from_shapes(name: str, spec: TaskSpec) -> str | None:
    """How the NKI kernel reads size `name` from its inputs' shapes: a dimension that is the
    size (`x.shape[1]`), else one that is a multiple of it (`2 * C`: `x.shape[1] // 2`)."""
    found = spec.size_in_shapes(name)
    if found is None:
        return None
    t, d, k = found
    return f"{t.name}.shape[{d}]" + (f" // {k}" if k != 1 else "")


def note(span: Span, what: str) -> str:
    """`from kernel.cu:42 — what` for a comment above the NKI code that implements it."""
    return f"from {Path(span.file).name}:{span.line} — {what}"


def source_line(span: Span) -> str:
    try:
        lines = Path(span.file).read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    return lines[span.line - 1].strip() if 0 < span.line <= len(lines) else ""


def _rename_keywords(spec: TaskSpec) -> TaskSpec:
    """The spec with tensors and scalars named by a Python keyword (`in`, a common CUDA
    parameter name) renamed `name_`, as the NKI kernel's arguments must be Python names; each
    keeps its CUDA parameter, and callers pass arguments by position, so they see no change."""
    if all(py_name(x.name) == x.name for x in (*spec.tensors, *spec.scalars)):
        return spec

    def renamed(x: Any) -> Any:
        if py_name(x.name) == x.name:
            return x
        return x.model_copy(update={"name": py_name(x.name), "param": x.cuda_param})

    inputs = {py_name(n): d for n, d in spec.inputs.items()}
    return spec.model_copy(update={"tensors": [renamed(t) for t in spec.tensors],
                                   "scalars": [renamed(x) for x in spec.scalars],
                                   "inputs": inputs})  # fmt: skip


def _rename_sizes(spec: TaskSpec, reserved: frozenset[str]) -> TaskSpec:
    """The spec with sizes whose names a template reserves renamed `name_` (in shapes and
    scalar formulas too); the NKI kernel reads sizes from shapes, so callers see no change."""
    clash = {n: f"{n}_" for n in spec.sizes if n in reserved}
    if not clash:
        return spec
    word = re.compile(r"\b(" + "|".join(re.escape(n) for n in clash) + r")\b")

    def sub(expr: Any) -> Any:
        return word.sub(lambda m: clash[m.group(1)], expr) if isinstance(expr, str) else expr

    tensors = [t.model_copy(update={"shape": [sub(d) for d in t.shape]}) for t in spec.tensors]
    scalars = [s.model_copy(update={"size": sub(s.size)}) for s in spec.scalars]
    sizes = {clash.get(n, n): v for n, v in spec.sizes.items()}
    relations = [sub(r) for r in spec.relations]
    return spec.model_copy(
        update={"tensors": tensors, "scalars": scalars, "sizes": sizes, "relations": relations}
    )
