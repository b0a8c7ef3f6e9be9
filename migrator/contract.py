"""The task contract: a CUDA kernel, its spec sidecar, and how an NKI kernel is called.

One definition shared by `migrate`, `migrate score` and the dataset API (see README, "Task
contract"). A spec is a TOML file next to the `.cu` (``<stem>.toml``)::

    [kernel]
    name = "saxpy"                 # the __global__ function
    family = "elementwise"
    template_args = []             # optional, e.g. [256] or ["float", 128]

    [sizes]                        # named problem sizes with defaults
    N = 100_000

    [[size_sets]]                  # extra published test sizes (hidden ones are added later)
    N = 1000

    relations = ["N % 4 == 0"]     # what the kernel assumes of its sizes (every set obeys;
                                   # hidden sets are drawn to obey them too)

    [[tensors]]                    # spec order = calling order
    name = "x"
    role = "in"                    # in | out | inout | scratch (working memory of the
                                   # CUDA original: see `Role`)
    dtype = "float32"
    shape = ["N"]                  # size names or expressions
    param = "x"                    # CUDA pointer parameter (defaults to name)

    [[scalars]]
    name = "a"
    dtype = "float32"
    value = 2.5                    # or: size = "N" (derived from a size)

    [launch]
    grid = ["ceil_div(N, 256)"]
    block = [256]
    shared_bytes = "0"

    [reference]                    # numpy reference in <stem>.py
    function = "reference"

Calling convention for an NKI kernel (and for the numpy reference): positional arguments are the
``in`` and ``inout`` tensors in spec order; keyword arguments are the value scalars by name; sizes
are read from shapes and never passed; the result is the ``out`` and ``inout`` tensors in spec
order (one array, or a tuple).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import keyword
import math
import operator
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

CONTRACT_VERSION = "1.0"

# `scratch`: working memory the CUDA original needs and nobody reads afterwards (per-block
# partial sums and the counter a "last block" reduction keeps): the CUDA kernel gets it filled
# as `[inputs]` says (zeros by default: what the host's cudaMemset leaves), the NKI kernel does
# not get it, and its final contents are not compared
Role = Literal["in", "out", "inout", "scratch"]
DTYPES = (
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "float8_e4m3",
    "float8_e5m2",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
)


class SpecError(ValueError):
    """A spec sidecar that cannot be used; the message names the file and the field."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class KernelRef(_Frozen):
    name: str
    family: str = "unknown"
    template_args: list[int | float | str] = Field(default_factory=list)
    source: str | None = None  # .cu file, relative to the spec; default: same stem
    # how the file is preprocessed (as nvcc -I / -D): include dirs relative to the spec
    include_dirs: list[str] = Field(default_factory=list)
    defines: dict[str, str] = Field(default_factory=dict)


class TensorSpec(_Frozen):
    name: str
    role: Role
    dtype: str = "float32"
    shape: list[str | int]
    param: str | None = None
    layout: Literal["row_major", "col_major"] = "row_major"
    ld: str | None = None  # leading-dimension scalar parameter, if the kernel takes one

    @property
    def cuda_param(self) -> str:
        return self.param or self.name

    @model_validator(mode="after")
    def _check_dtype(self) -> TensorSpec:
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}; expected one of {', '.join(DTYPES)}")
        return self


def py_name(name: str) -> str:
    """`name` as a Python identifier in emitted code: a Python keyword (`in`, `lambda`, common
    CUDA parameter names) gets a trailing underscore, which no function could otherwise declare."""
    return f"{name}_" if keyword.iskeyword(name) else name


class ScalarSpec(_Frozen):
    name: str
    dtype: str = "int32"
    size: str | None = None  # expression of sizes
    value: float | int | bool | None = None
    param: str | None = None

    @property
    def cuda_param(self) -> str:
        return self.param or self.name

    @property
    def nki_kwarg(self) -> str:
        """The NKI kernel's keyword parameter for this value scalar (`py_name`)."""
        return py_name(self.name)

    @model_validator(mode="after")
    def _one_source(self) -> ScalarSpec:
        if (self.size is None) == (self.value is None):
            raise ValueError(f"scalar {self.name!r} needs exactly one of `size` or `value`")
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}")
        return self


class LaunchSpec(_Frozen):
    grid: list[str | int]
    block: list[str | int]
    shared_bytes: str | int = 0
    # pointer parameters the launch passes as NULL (`probs` of a training step that writes
    # none): no tensor of the task; the CUDA original runs with a null pointer there
    null_args: list[str] = Field(default_factory=list)


class InputDist(_Frozen):
    dist: Literal["normal", "uniform", "positive", "int", "heavy_tailed", "fill"] = "normal"
    low: float | None = None
    # a number, or for integer inputs a size expression: indices into a table of V rows are
    # drawn with `high = "V"` (in [0, V))
    high: float | str | None = None
    # dist = "fill": every element this value (a buffer the host sets with `cudaMemset` before
    # the launch: a running max at -5.96e29, the byte 0xF0 in every byte; a sum at 0)
    value: float | None = None

    @model_validator(mode="after")
    def _expression_only_for_int(self) -> InputDist:
        if isinstance(self.high, str) and self.dist != "int":
            raise ValueError('a size expression bounds only integer inputs (dist = "int")')
        if (self.dist == "fill") != (self.value is not None):
            raise ValueError('`value` goes with dist = "fill", and dist = "fill" needs one')
        return self


class Tolerance(_Frozen):
    atol: float | None = None
    rtol: float | None = None
    ulp: int | None = None


class ReferenceSpec(_Frozen):
    function: str = "reference"
    module: str | None = None  # .py file, relative to the spec; default: same stem


_NAME = re.compile(r"[A-Za-z_]\w*")  # a size's name in a shape expression


class TaskSpec(_Frozen):
    """A parsed spec sidecar."""

    contract_version: str = CONTRACT_VERSION
    kernel: KernelRef
    sizes: dict[str, int]
    size_sets: list[dict[str, int]] = Field(default_factory=list)
    # relations the kernel assumes between its sizes (`N % 128 == 0`, `ld >= cols`,
    # `K == 4 * K4`): every published size set obeys them, and sizes drawn for a task (hidden
    # sets, variants) are adjusted to obey them (see `satisfy`)
    relations: list[str] = Field(default_factory=list)
    tensors: list[TensorSpec]
    scalars: list[ScalarSpec] = Field(default_factory=list)
    launch: LaunchSpec
    inputs: dict[str, InputDist] = Field(default_factory=dict)
    tolerance: Tolerance | None = None
    reference: ReferenceSpec = Field(default_factory=ReferenceSpec)
    path: str | None = None  # where it was read from (set by load_spec)

    @model_validator(mode="after")
    def _check_names(self) -> TaskSpec:
        names = [t.name for t in self.tensors] + [s.name for s in self.scalars]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate tensor/scalar names: {sorted(dup)}")
        for key in self.inputs:
            if key not in {t.name for t in self.tensors}:
                raise ValueError(f"[inputs.{key}] names no tensor")
        for sset in self.size_sets:
            unknown = set(sset) - set(self.sizes)
            if unknown:
                raise ValueError(f"size set {sset} names unknown sizes {sorted(unknown)}")
        for rel in self.relations:
            _relation_parts(rel)  # raises on anything but a comparison
            eval_expr(rel, self.sizes)  # names only sizes
        for sset in self.all_size_sets():
            broken = self.broken_relations(sset)
            if broken:
                raise ValueError(
                    f"size set {sset} breaks the relation {broken[0]!r} the spec states"
                )
        return self

    # --- derived views -------------------------------------------------------------------
    def resolve_sizes(self, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
        sizes = dict(self.sizes)
        for k, v in (overrides or {}).items():
            if k not in sizes:
                raise SpecError(f"unknown size {k!r}; this task has {', '.join(sizes)}")
            sizes[k] = int(v)
        broken = self.broken_relations(sizes)
        if broken:
            fixed = self.satisfy(sizes)
            hint = (
                " (e.g. " + ", ".join(f"{k}={v}" for k, v in fixed.items() if sizes[k] != v) + ")"
                if fixed
                else ""
            )
            raise SpecError(
                f"sizes {', '.join(f'{k}={v}' for k, v in sizes.items())} break the relation "
                f"{broken[0]!r} the kernel assumes (the spec's `relations`); choose sizes that "
                f"obey it{hint}"
            )
        return sizes

    def broken_relations(self, sizes: Mapping[str, int]) -> list[str]:
        """The spec's relations that `sizes` do not obey."""
        return [r for r in self.relations if not eval_expr(r, sizes)]

    def satisfy(self, sizes: Mapping[str, int]) -> dict[str, int] | None:
        """`sizes` adjusted to obey the relations: `N % c == 0` rounds N up to a multiple,
        `A >= expr` raises A to it, `A == expr` sets A; None when that does not suffice."""
        out = dict(sizes)
        for _ in range(4):  # a few rounds: one adjustment can break an earlier relation
            broken = self.broken_relations(out)
            if not broken:
                return out
            for rel in broken:
                _adjust(rel, out)
        return None if self.broken_relations(out) else out

    def obeying(self, size_sets: list[dict[str, int]]) -> list[dict[str, int]]:
        """Drawn size sets adjusted to obey the relations (`satisfy`); a set that cannot be,
        or that repeats an earlier one, is dropped."""
        out: list[dict[str, int]] = []
        for sset in size_sets:
            fixed = self.satisfy(sset)
            if fixed is not None and fixed not in out:
                out.append(fixed)
        return out

    def all_size_sets(self) -> list[dict[str, int]]:
        """The default sizes followed by each published extra set (merged over the defaults)."""
        return [dict(self.sizes)] + [{**self.sizes, **s} for s in self.size_sets]

    def specialised_sizes(self) -> dict[str, int]:
        """Sizes the kernel is compiled for: a template argument's value that every size set
        keeps (a head dimension of 64 given as `template_args = [64]`): at another value the
        kernel still computes with its own, so drawn size sets keep these."""
        template = {str(a).strip() for a in self.kernel.template_args}
        # `K == 16` (the host refuses any other K): the kernel is written for that K alone
        pinned = {r.replace(" ", "") for r in self.relations}
        sets = self.all_size_sets()
        return {n: v for n, v in self.sizes.items()
                if (str(v) in template or f"{n}=={v}" in pinned)
                and all(s.get(n) == v for s in sets)}  # fmt: skip

    def data_sizes(self) -> set[str]:
        """The sizes that shape some tensor (not launch-only ones such as a block size)."""
        return {w for t in self.tensors for d in t.shape for w in _NAME.findall(str(d))}

    def work(self, sizes: Mapping[str, int]) -> int:
        """The product of the sizes that shape the data: an upper bound of a run's operations
        for a contraction over them, and a run's relative cost between size sets."""
        used = self.data_sizes()
        return math.prod(v for n, v in sizes.items() if n in used)

    def tensor_named(self, name: str | None) -> TensorSpec:
        return next(t for t in self.tensors if t.name == name)

    def shape_of(self, tensor: TensorSpec, sizes: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(int(eval_expr(d, sizes)) for d in tensor.shape)

    def scalar_value(self, scalar: ScalarSpec, sizes: Mapping[str, int]) -> Any:
        if scalar.size is not None:
            return int(eval_expr(scalar.size, sizes))
        return scalar.value

    def launch_config(
        self, sizes: Mapping[str, int]
    ) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        def dim3(v: list[str | int]) -> tuple[int, int, int]:
            vals = [int(eval_expr(x, sizes)) for x in v]
            return tuple((vals + [1, 1, 1])[:3])  # type: ignore[return-value]

        return (
            dim3(self.launch.grid),
            dim3(self.launch.block),
            int(eval_expr(self.launch.shared_bytes, sizes)),
        )

    @property
    def inputs_in_order(self) -> list[TensorSpec]:
        return [t for t in self.tensors if t.role in ("in", "inout")]

    @property
    def outputs_in_order(self) -> list[TensorSpec]:
        return [t for t in self.tensors if t.role in ("out", "inout")]

    def scratch_fill(self, tensor: TensorSpec) -> float:
        """What a scratch tensor holds before the launch: its `fill` value, else 0."""
        d = self.inputs.get(tensor.name)
        return float(d.value) if d is not None and d.dist == "fill" and d.value is not None else 0.0

    @property
    def value_scalars(self) -> list[ScalarSpec]:
        return [s for s in self.scalars if s.value is not None]

    @property
    def passed_sizes(self) -> list[ScalarSpec]:
        """Scalars carrying a size that no input's shape holds as a dimension (or a whole
        multiple of one): a padded row's true length `V` beside rows of width `P`; the block
        that sizes an output of partial sums; `NH` of `[B * NH * T, T]` rows, where the kernel
        scales by `1 / sqrt(C / NH)`. The NKI kernel cannot read it from a shape, so it is
        passed by keyword with the size set's value, as value scalars are."""
        return [s for s in self.scalars if s.size is not None and str(s.size) in self.sizes
                and self.size_in_shapes(str(s.size)) is None]  # fmt: skip

    def size_in_shapes(self, name: str) -> tuple[TensorSpec, int, int] | None:
        """Where an input's shape holds size `name`: (tensor, axis, k) for a dimension that is
        the size (k = 1), else the first that is a whole multiple of it (`2 * C`: k = 2); None
        where none does (the NKI kernel then cannot read it from a shape)."""
        for t in self.inputs_in_order:
            for d, dim in enumerate(t.shape):
                if str(dim).replace(" ", "") == name:
                    return t, d, 1
        n = re.escape(name)
        for t in self.inputs_in_order:
            for d, dim in enumerate(t.shape):
                text = str(dim).replace(" ", "")
                m = re.fullmatch(rf"(\d+)\*{n}", text) or re.fullmatch(rf"{n}\*(\d+)", text)
                if m:
                    return t, d, int(m.group(1))
        return None

    @property
    def keyword_scalars(self) -> list[ScalarSpec]:
        """What an NKI kernel takes by keyword: value scalars, then passed sizes."""
        return [*self.value_scalars, *self.passed_sizes]

    def nki_kwargs(self, sizes: Mapping[str, int] | None = None) -> dict[str, Any]:
        """The keyword arguments of an NKI kernel at `sizes` (default: the spec's own): value
        scalars and the passed sizes (`passed_sizes`)."""
        at = self.sizes if sizes is None else sizes
        return {s.nki_kwarg: s.value if s.value is not None else int(at[str(s.size)])
                for s in self.keyword_scalars}  # fmt: skip

    def cuda_source_path(self) -> Path:
        base = Path(self.path).parent if self.path else Path(".")
        stem = Path(self.path).stem if self.path else self.kernel.name
        return base / (self.kernel.source or f"{stem}.cu")

    def preprocessor(self) -> tuple[list[Path], dict[str, str]]:
        """(include dirs, defines) the CUDA source is parsed with, as the spec states them."""
        base = Path(self.path).parent if self.path else Path(".")
        return [base / d for d in self.kernel.include_dirs], dict(self.kernel.defines)

    def reference_function(self) -> Callable[..., Any]:
        base = Path(self.path).parent if self.path else Path(".")
        stem = Path(self.path).stem if self.path else self.kernel.name
        mod_path = base / (self.reference.module or f"{stem}.py")
        if not mod_path.is_file():
            raise SpecError(f"{self.path}: reference module {mod_path} does not exist")
        spec = importlib.util.spec_from_file_location(f"c2n_ref_{stem}", mod_path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = getattr(module, self.reference.function, None)
        if not callable(fn):
            raise SpecError(f"{mod_path}: no function {self.reference.function!r}")
        return fn


def load_spec(path: str | Path, text: str | None = None) -> TaskSpec:
    """The spec sidecar at `path`; `text`: its contents, given (an emitted file carries the
    spec it was checked with), `path` then only anchors its relative paths."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8") if text is None else text)
    except FileNotFoundError as e:
        raise SpecError(f"{path}: spec file not found") from e
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: invalid TOML: {e}") from e
    try:
        spec = TaskSpec.model_validate({**data, "path": str(path)})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise SpecError(f"{path}: {where}: {first['msg']}") from e
    for t in spec.tensors:
        for d in t.shape:
            _check_expr(d, spec, path)
    for s in spec.scalars:
        if s.size is not None:
            _check_expr(s.size, spec, path)
    for d in [*spec.launch.grid, *spec.launch.block, spec.launch.shared_bytes]:
        _check_expr(d, spec, path)
    for dist in spec.inputs.values():
        if isinstance(dist.high, str):
            _check_expr(dist.high, spec, path)
    return spec


def bind_source(spec: TaskSpec, cu_path: str | Path) -> TaskSpec:
    """The spec with `kernel.source` naming `cu_path` (relative to the spec, as every path in a
    spec is): the file given on the command line wins over a `source` line that names
    another (an inferred spec moved next to its `.cu` still says `../k.cu`)."""
    import os

    base = Path(spec.path).parent if spec.path else Path(".")
    target = Path(cu_path)
    if spec.cuda_source_path().resolve() == target.resolve():
        return spec
    rel = os.path.relpath(target.resolve(), base.resolve())
    return spec.model_copy(update={"kernel": spec.kernel.model_copy(update={"source": rel})})


def check_parameters(
    spec: TaskSpec,
    kernel: str,
    params: list[tuple[str, bool]],
    symbols: set[str] | frozenset[str] = frozenset(),
) -> None:
    """Raise SpecError where the spec does not describe the kernel's parameters
    (`params`: (name, is_pointer) in order): a tensor or scalar naming a parameter the kernel
    lacks, a pointer without a tensor, an integer without a scalar. `symbols`: file-scope
    `__constant__`/`__device__` arrays, which a tensor may name too (the host fills them with
    `cudaMemcpyToSymbol`). The message points at the spec's line and lists the parameters
    that exist."""
    names = [n for n, _ in params] + sorted(symbols)
    have = ", ".join(f"{n}{'*' if ptr else ''}" for n, ptr in params)
    pointers = {n for n, ptr in params if ptr} | set(symbols)
    described = {t.cuda_param for t in spec.tensors} | {s.cuda_param for s in spec.scalars}
    described |= set(spec.launch.null_args)
    problem: tuple[str, str] | None = None  # (text to find in the spec, what is wrong)
    for n in spec.launch.null_args:
        if n not in pointers:
            problem = (n, f"null argument {n!r} is no pointer parameter of the kernel")
            break
    for t in spec.tensors if problem is None else ():
        if t.cuda_param not in names:
            problem = (t.cuda_param, f"tensor {t.name} names CUDA parameter {t.cuda_param!r}")
            break
        if t.cuda_param not in pointers:
            problem = (t.cuda_param, f"tensor {t.name} is CUDA parameter {t.cuda_param!r}, "
                                     "which is not a pointer")  # fmt: skip
            break
    if problem is None:
        for sc in spec.scalars:
            if sc.cuda_param not in names:
                problem = (sc.cuda_param, f"scalar {sc.name} names CUDA parameter "
                                          f"{sc.cuda_param!r}")  # fmt: skip
                break
    if problem is None:
        missing = [n for n, _ in params if n not in described]
        if not missing:
            return
        problem = ("[[tensors]]", f"CUDA parameter {missing[0]!r} has no tensor or scalar")
    needle, what = problem
    where = str(spec.path or "spec")
    if spec.path and Path(spec.path).is_file():
        lines = Path(spec.path).read_text(encoding="utf-8").splitlines()
        hit = next((i for i, ln in enumerate(lines, 1) if f'"{needle}"' in ln), None)
        hit = hit or next((i for i, ln in enumerate(lines, 1) if needle in ln), None)
        where += f":{hit}" if hit else ""
    raise SpecError(f"{where}: {what}, but kernel {kernel} has parameters ({have}); every "
                    "pointer is a [[tensors]] entry and every integer or float a [[scalars]] "
                    "entry, by CUDA parameter name (`param`, default: `name`)")  # fmt: skip


def spec_for_source(cu_path: str | Path) -> Path | None:
    """The sidecar spec that belongs to a `.cu` file, if there is one."""
    p = Path(cu_path).with_suffix(".toml")
    return p if p.is_file() else None


def _check_expr(expr: str | int, spec: TaskSpec, path: Path) -> None:
    try:
        eval_expr(expr, spec.sizes)
    except SpecError as e:
        raise SpecError(f"{path}: {e}") from e


# --- size expressions ----------------------------------------------------------------------
# Size formulas are a tiny, safe arithmetic language (no eval): + - * / // % ** ( ), names of
# sizes, and ceil_div/min/max/round_up. `/` on integers is floor division, as in host C code.

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: lambda a, b: a // b if isinstance(a, int) and isinstance(b, int) else a / b,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,  # `1 << 5` in host constants
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
}
_FUNCS: dict[str, Callable[..., Any]] = {
    "ceil_div": lambda a, b: -(-a // b),
    "round_up": lambda a, b: -(-a // b) * b,
    "min": min,
    "max": max,
    "sqrt": math.isqrt,
    "select": lambda c, a, b: a if c else b,  # C's `c ? a : b` (host launch code)
}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}  # fmt: skip


def eval_expr(expr: str | int | float, sizes: Mapping[str, int]) -> int | float:
    """Evaluate a size formula such as ``"ceil_div(N, 256)"`` against named sizes."""
    if isinstance(expr, (int, float)):
        return expr
    try:
        return _compiled(str(expr))(sizes)
    except ZeroDivisionError as e:
        raise SpecError(f"size expression {expr!r} divides by zero") from e


_Evaluator = Callable[[Mapping[str, int]], Any]


@functools.lru_cache(maxsize=4096)
def _compiled(expr: str) -> _Evaluator:
    """The formula as a closure over the sizes, parsed once (formulas are evaluated at every
    size set of every run). Errors are raised when evaluation reaches them, left to right."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise SpecError(f"bad size expression {expr!r}: {e.msg}") from e

    def fail(message: str) -> _Evaluator:
        def raise_(_sizes: Mapping[str, int]) -> Any:
            raise SpecError(message)

        return raise_

    def comp(node: ast.AST) -> _Evaluator:
        if isinstance(node, ast.Expression):
            return comp(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            value = node.value
            return lambda _sizes: value
        if isinstance(node, ast.Name):
            name = node.id
            unknown = f"size expression {expr!r} uses unknown name {name!r}"

            def lookup(sizes: Mapping[str, int]) -> Any:
                if name not in sizes:
                    raise SpecError(unknown)
                return sizes[name]

            return lookup
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            op, left, right = _BINOPS[type(node.op)], comp(node.left), comp(node.right)
            return lambda sizes: op(left(sizes), right(sizes))
        if (
            isinstance(node, ast.Compare) and len(node.ops) == 1
            and type(node.ops[0]) in _COMPARE
        ):  # fmt: skip
            cmp = _COMPARE[type(node.ops[0])]
            left, right = comp(node.left), comp(node.comparators[0])
            return lambda sizes: int(cmp(left(sizes), right(sizes)))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand = comp(node.operand)
            return lambda sizes: -operand(sizes)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            fn = _FUNCS.get(node.func.id)
            if fn is not None and not node.keywords:
                args = [comp(a) for a in node.args]
                return lambda sizes: fn(*[a(sizes) for a in args])
        return fail(f"size expression {expr!r}: unsupported syntax {ast.dump(node)[:60]}")

    return comp(tree)


def _relation_parts(rel: str) -> tuple[ast.expr, type, ast.expr]:
    """(left, comparison operator, right) of a relation such as `N % 128 == 0`."""
    try:
        node = ast.parse(rel, mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"relation {rel!r}: {e.msg}") from e
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1
            and type(node.ops[0]) in _COMPARE):  # fmt: skip
        raise ValueError(f"relation {rel!r} is not one comparison (`N % 4 == 0`, `ld >= cols`)")
    return node.left, type(node.ops[0]), node.comparators[0]


def divisor_pairs(relations: list[str]) -> list[tuple[str, str]]:
    """`(C, NH)` for each relation `C % NH == 0` between two sizes (heads of equal size), in
    order."""
    return [(m.group(1), m.group(2)) for r in relations
            if (m := re.fullmatch(r"(\w+) % ([A-Za-z_]\w*) == 0", r.strip()))]  # fmt: skip


def relation_moduli(relations: list[str]) -> dict[str, list[int]]:
    """Each size's moduli, in order: `N % 128 == 0` and `N % 4 == 0` give `{N: [128, 4]}`."""
    moduli: dict[str, list[int]] = {}
    for r in relations:
        if m := re.fullmatch(r"(\w+) % (\d+) == 0", r.strip()):
            moduli.setdefault(m.group(1), []).append(int(m.group(2)))
    return moduli


def tile_relations(relations: list[str]) -> dict[str, int]:
    """`{N: 128}` for each relation `N % 128 == 0` (whole tiles of a constant); a size with
    several such relations gets their least common multiple."""
    return {n: math.lcm(*cs) for n, cs in relation_moduli(relations).items()}


def paired_sizes(relations: list[str], op: Literal["==", ">="]) -> dict[str, str]:
    """`{a: b}` for each relation `a == b` (a square problem: `size_y == size_x`) or `a >= b`
    (rows padded past their width: `P >= V`) between two sizes, by `op`."""
    return {m.group(1): m.group(2) for r in relations
            if (m := re.fullmatch(rf"\s*(\w+)\s*{op}\s*([A-Za-z_]\w*)\s*", r))}  # fmt: skip


def _adjust(rel: str, sizes: dict[str, int]) -> None:
    """Change one size so that `rel` holds, where its form says how (see `satisfy`)."""
    left, op, right = _relation_parts(rel)
    if op in (ast.Lt, ast.LtE):  # `cols <= ld`: the same as `ld >= cols`
        left, right, op = right, left, ast.GtE if op is ast.LtE else ast.Gt
    if (op is ast.Eq and isinstance(left, ast.BinOp) and isinstance(left.op, ast.Mod)
            and isinstance(left.left, ast.Name) and left.left.id in sizes):  # fmt: skip
        c = int(eval_expr(ast.unparse(left.right), sizes))
        rest = int(eval_expr(ast.unparse(right), sizes))
        if c > 0:
            n = sizes[left.left.id]
            sizes[left.left.id] = n + (rest - n) % c
        return
    if isinstance(left, ast.Name) and left.id in sizes:
        target = int(eval_expr(ast.unparse(right), sizes))
        if op is ast.Eq:
            sizes[left.id] = target
        elif op is ast.GtE:
            sizes[left.id] = max(sizes[left.id], target)
        elif op is ast.Gt:
            sizes[left.id] = max(sizes[left.id], target + 1)


# --- inputs --------------------------------------------------------------------------------


def np_dtype(name: str) -> np.dtype:
    """numpy dtype for a contract dtype name (bf16/fp8 through ml_dtypes)."""
    import ml_dtypes

    special = {
        "bfloat16": ml_dtypes.bfloat16,
        "float8_e4m3": ml_dtypes.float8_e4m3fn,
        "float8_e5m2": ml_dtypes.float8_e5m2,
    }
    return np.dtype(special.get(name, name))


def nki_args(spec: TaskSpec, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The NKI kernel's positional arguments: the inputs in contract order (copies), 64-bit
    integer tensors as int32. NKI has no 64-bit integers, so a migration takes such a tensor
    (an index tensor from PyTorch, `long long` in CUDA) as int32 and its caller casts; values
    outside int32 cannot be passed and raise."""
    out = []
    for t in spec.inputs_in_order:
        a = np.array(inputs[t.name], copy=True)
        if a.dtype in (np.int64, np.uint64):
            info = np.iinfo(np.int32)
            if a.size and (a.min() < info.min or a.max() > info.max):
                raise ValueError(f"{t.name}: 64-bit integer values outside int32 cannot be "
                                 "passed to an NKI kernel (it has no 64-bit integers)")  # fmt: skip
            a = a.astype(np.int32)
        out.append(a)
    return out


def is_float(dt: np.dtype) -> bool:
    """A floating-point dtype, ml_dtypes' bf16/fp8 included (numpy files those as kind 'V', and
    `np.issubdtype(bfloat16, np.floating)` is False)."""
    dt = np.dtype(dt)
    return dt.kind == "f" or dt.kind == "V" and dt.name.startswith(("bfloat", "float8", "float4"))


# Inputs drawn lately, by what decides them (seed, and each input's name, dtype, shape and
# distribution, in order): a migration draws the same inputs for its lift's verification, the
# check and the allowance (up to a dozen times, a second for 2M-element bf16 tensors). Callers
# get copies; the oldest entries go past _INPUTS_MAX_BYTES.
_INPUTS: dict[str, dict[str, np.ndarray]] = {}
_INPUTS_MAX_BYTES = 256 << 20


def make_inputs(spec: TaskSpec, sizes: Mapping[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic input arrays for every `in`/`inout` tensor, by name."""
    parts = []
    for t in spec.inputs_in_order:
        d = spec.inputs.get(t.name, InputDist())
        high = eval_expr(d.high, sizes) if isinstance(d.high, str) else d.high
        parts.append((t.name, t.dtype, spec.shape_of(t, sizes), d.dist, d.low, high, d.value))
    key = repr((seed, parts))
    hit = _INPUTS.get(key)
    if hit is None:
        hit = _draw_inputs(spec, sizes, seed)
        size = sum(a.nbytes for a in hit.values())
        while _INPUTS and size + sum(a.nbytes for v in _INPUTS.values()
                                     for a in v.values()) > _INPUTS_MAX_BYTES:  # fmt: skip
            _INPUTS.pop(next(iter(_INPUTS)))
        if size <= _INPUTS_MAX_BYTES:
            _INPUTS[key] = hit
    return {n: a.copy() for n, a in hit.items()}


def int_range(dist: InputDist, sizes: Mapping[str, int]) -> tuple[int, int]:
    """[low, high) of an integer input (default [0, 100); `high` may be a size expression)."""
    lo = int(dist.low if dist.low is not None else 0)
    hi = int(eval_expr(dist.high, sizes)) if dist.high is not None else 100
    return lo, hi


def _draw_inputs(spec: TaskSpec, sizes: Mapping[str, int], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for t in spec.inputs_in_order:
        shape = spec.shape_of(t, sizes)
        dist = spec.inputs.get(t.name, InputDist())
        dt = np_dtype(t.dtype)
        if dist.dist == "fill":
            arr = np.full(shape, dist.value)
        elif np.issubdtype(dt, np.integer) or dist.dist == "int":
            arr = rng.integers(*int_range(dist, sizes), size=shape)
        elif dist.dist == "uniform":
            arr = rng.uniform(_or(dist.low, -1.0), _or(dist.high, 1.0), size=shape)
        elif dist.dist == "positive":
            arr = rng.uniform(_or(dist.low, 0.1), _or(dist.high, 2.0), size=shape)
        elif dist.dist == "heavy_tailed":
            arr = rng.standard_t(2.0, size=shape)
        else:
            arr = rng.standard_normal(size=shape)
        out[t.name] = np.asarray(arr).astype(dt)
    return out


def _or(value: float | None, default: float) -> float:
    return default if value is None else value
