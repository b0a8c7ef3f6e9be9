"""Turning C expressions into affine index forms, with a scoped environment of local variables.

Local variables defined once from index arithmetic (``int i = blockIdx.x*blockDim.x +
threadIdx.x``) are substituted, so ``x[i]`` normalises to the global-x form. Variables that are
reassigned, or defined by non-affine arithmetic (``lane = threadIdx.x % 32``), become opaque
symbols: still tracked for thread dependence, but an index through them is marked non-affine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tree_sitter import Node

from migrator.cuda import poly
from migrator.cuda.builtins import BLOCK_SYMBOLS, DIM_SYMBOLS, THREAD_SYMBOLS, TYPE_BYTES
from migrator.cuda.ir import AffineTerm, IndexExpr
from migrator.cuda.parse import ParsedSource

VarKind = Literal["value", "opaque", "loopvar", "alias", "array", "cg", "param"]
WARP_SIZE = 32
_INDEX_SYMBOLS = THREAD_SYMBOLS | BLOCK_SYMBOLS  # warpSize on every NVIDIA architecture to date


@dataclass
class Var:
    kind: VarKind
    poly: poly.Poly | None = None
    reason: str | None = None
    deps: frozenset[str] = frozenset()  # threadIdx/blockIdx/loop symbols it depends on
    # pointers and arrays
    base: str | None = None
    space: str | None = None
    offset: poly.Poly | None = None  # element offset into base, in base elements
    width: int = 1  # base elements per element of this pointer (4 for float4* over float*)
    elem_type: str | None = None
    is_pointer: bool = False
    cg_scope: str | None = None
    via: str | None = None  # the alias pointer an access went through
    ctx: int = 0  # control depth where it was declared (strong updates only at that depth)
    expr: Any = None  # symbolic value (ir.Expr) of a local scalar, for the dataflow trees


@dataclass
class Env:
    """Lexically scoped variables; inner scopes shadow outer ones."""

    scopes: list[dict[str, Var]] = field(default_factory=lambda: [{}])

    def push(self) -> None:
        self.scopes.append({})

    def pop(self) -> None:
        self.scopes.pop()

    def define(self, name: str, var: Var) -> None:
        self.scopes[-1][name] = var

    def assign(self, name: str, var: Var) -> None:
        """Replace a variable in the scope that declared it."""
        for scope in reversed(self.scopes):
            if name in scope:
                scope[name] = var
                return

    def lookup(self, name: str) -> Var | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def loop_vars(self) -> set[str]:
        return {n for s in self.scopes for n, v in s.items() if v.kind == "loopvar"}


@dataclass
class Val:
    """The affine value of an expression, or why there is none, plus what it depends on."""

    poly: poly.Poly | None
    reason: str | None = None
    deps: frozenset[str] = frozenset()


def parse_int_literal(text: str) -> int | None:
    t = text.replace("'", "").rstrip("uUlL")
    try:
        if t.lower().startswith("0x"):
            return int(t, 16)
        if t.lower().startswith("0b"):
            return int(t, 2)
        if len(t) > 1 and t.startswith("0") and t.isdigit():
            return int(t, 8)
        return int(t)
    except ValueError:
        return None


class IndexEvaluator:
    """Evaluates expressions to `Val` against an `Env` (pure apart from reading the env)."""

    def __init__(self, parsed: ParsedSource, env: Env, constants: dict[str, int]) -> None:
        self.parsed = parsed
        self.env = env
        self.constants = constants  # names with a known integer value (constexpr, bindings)
        # local `constexpr int NUM_WARPS = NUM_THREADS / 32;` known at these bindings (sizes of
        # shared arrays declared after them)
        self.local_constants: dict[str, int] = {}
        self._dispatch: dict[str, Callable[[Node], Val]] = {
            "number_literal": self._number,
            "identifier": self._identifier,
            "field_expression": self._field,
            "parenthesized_expression": self._paren,
            "binary_expression": self._binary,
            "unary_expression": self._unary,
            "cast_expression": self._cast,
            "call_expression": self._call,
            "sizeof_expression": self._sizeof,
        }

    # --- public ------------------------------------------------------------------------
    def value(self, node: Node | None) -> Val:
        if node is None:
            return Val(None, "missing expression")
        handler = self._dispatch.get(node.type)
        if handler is None:
            return Val(None, f"{node.type.replace('_', ' ')}", self.deps(node))
        return handler(node)

    def const_int(self, node: Node | None) -> int | None:
        v = self.value(node)
        return poly.constant_value(v.poly) if v.poly is not None else None

    def index(self, node: Node, offset: poly.Poly | None = None, scale: int = 1) -> IndexExpr:
        """An `IndexExpr` for ``offset + scale * node`` (pointer aliases add an offset)."""
        v = self.value(node)
        text = self.parsed.text(node)
        p = v.poly
        if p is not None:
            p = poly.scale(p, scale)
            if offset is not None:
                p = poly.add(p, offset)
        elif offset is not None and offset:
            text = f"{poly.render(offset)} + {text}" if scale == 1 else text
        return self.make_index(text, p, v.reason, v.deps)

    def make_index(
        self, text: str, p: poly.Poly | None, reason: str | None, deps: frozenset[str]
    ) -> IndexExpr:
        variant = THREAD_SYMBOLS | BLOCK_SYMBOLS | self.env.loop_vars()
        if p is not None:
            variant = variant | {s for s in poly.symbols(p) if is_derived_symbol(s)}
        if p is None:
            return IndexExpr(text=text, affine=False, variant=sorted(deps), reason=reason)
        opaque = sorted(s for s in poly.symbols(p) if self._is_opaque(s))
        if opaque:
            why = "; ".join(
                f"{s} is {(self.env.lookup(s) or Var('opaque')).reason or 'not affine'}"
                for s in opaque
            )
            return IndexExpr(text=text, affine=False, variant=sorted(deps), reason=why)
        terms = [AffineTerm(coeff=c, symbols=list(m)) for m, c in sorted(p.items())]
        used_variant = sorted(poly.symbols(p) & variant)
        if not poly.is_affine_in(p, variant):
            return IndexExpr(
                text=text,
                affine=False,
                terms=terms,
                canonical=poly.render(p),
                variant=used_variant,
                reason="product of two thread/block/loop indices",
            )
        return IndexExpr(
            text=text,
            affine=True,
            terms=terms,
            canonical=poly.render(p),
            variant=used_variant,
            pattern=pattern_of(p),
        )

    def deps(self, node: Node) -> frozenset[str]:
        """threadIdx/blockIdx/loop symbols an expression depends on, through local variables."""
        out: set[str] = set()
        stack = [node]
        while stack:
            n = stack.pop()
            if n.type == "field_expression":
                name = self._builtin_symbol(n)
                if name is not None:
                    if name in THREAD_SYMBOLS or name in BLOCK_SYMBOLS:
                        out.add(name)
                    continue
            elif n.type == "identifier":
                var = self.env.lookup(self.parsed.text(n))
                if var is not None:
                    out |= var.deps
                continue
            stack.extend(n.named_children)
        return frozenset(out)

    # --- handlers ----------------------------------------------------------------------
    def _is_opaque(self, name: str) -> bool:
        var = self.env.lookup(name)
        return var is not None and var.kind == "opaque"

    def _number(self, node: Node) -> Val:
        value = parse_int_literal(self.parsed.text(node))
        if value is None:
            return Val(None, "a floating-point value")
        return Val(poly.const(value))

    def _identifier(self, node: Node) -> Val:
        name = self.parsed.text(node)
        if name == "warpSize":
            return Val(poly.const(WARP_SIZE))
        if name in self.local_constants:
            return Val(poly.const(self.local_constants[name]))
        var = self.env.lookup(name)
        # (a function parameter shadows a file-scope constant of its name: `const int N =
        # 100000000;` and `__global__ void k(..., const int N)` read the argument)
        bound_value = var is not None and var.kind == "param" and var.expr is None
        if (var is None or bound_value) and name in self.constants:
            return Val(poly.const(self.constants[name]))  # constexpr or bound template value
        if var is None:
            return Val(poly.sym(name))  # kernel-invariant: a scalar/template parameter or global
        if var.kind == "value" and var.poly is not None:
            return Val(var.poly, None, var.deps)
        if var.kind in ("loopvar", "param"):
            return Val(poly.sym(name), None, var.deps)
        if var.kind == "opaque":
            return Val(poly.sym(name), var.reason, var.deps)
        return Val(None, f"{name} is not an integer value", var.deps)

    def _builtin_symbol(self, node: Node) -> str | None:
        arg = node.child_by_field_name("argument")
        fld = node.child_by_field_name("field")
        if arg is None or fld is None or arg.type != "identifier":
            return None
        name = f"{self.parsed.text(arg)}.{self.parsed.text(fld)}"
        if name in THREAD_SYMBOLS or name in BLOCK_SYMBOLS or name in DIM_SYMBOLS:
            return name
        return None

    def _field(self, node: Node) -> Val:
        name = self._builtin_symbol(node)
        if name is None:
            return Val(None, f"field {self.parsed.text(node)}", self.deps(node))
        deps = frozenset({name}) if name not in DIM_SYMBOLS else frozenset()
        return Val(poly.sym(name), None, deps)

    def _paren(self, node: Node) -> Val:
        inner = node.named_children
        return self.value(inner[0]) if inner else Val(None, "empty parentheses")

    def _binary(self, node: Node) -> Val:
        op_node = node.child_by_field_name("operator")
        op = self.parsed.text(op_node) if op_node is not None else ""
        left = self.value(node.child_by_field_name("left"))
        right = self.value(node.child_by_field_name("right"))
        deps = left.deps | right.deps
        if left.poly is None or right.poly is None:
            return Val(None, left.reason or right.reason, deps)
        reason = left.reason or right.reason
        if op == "+":
            return Val(poly.add(left.poly, right.poly), reason, deps)
        if op == "-":
            return Val(poly.sub(left.poly, right.poly), reason, deps)
        if op == "*":
            return Val(poly.mul(left.poly, right.poly), reason, deps)
        k = poly.constant_value(right.poly)
        if op in ("/", ">>") and k is not None:
            divisor = k if op == "/" else 1 << k if 0 <= k < 63 else 0
            q = poly.exact_div(left.poly, divisor) if divisor else None
            if q is not None:
                return Val(q, reason, deps)
            lc = poly.constant_value(left.poly)
            if lc is not None and divisor:
                return Val(poly.const(int(lc / divisor)), reason, deps)  # C truncates to zero
            quasi = self._quasi_affine(op, left.poly, k, deps)
            if quasi is not None:
                return Val(quasi, reason, deps)
            return Val(None, "integer division", deps)
        if op == "<<" and k is not None and 0 <= k < 63:
            return Val(poly.scale(left.poly, 1 << k), reason, deps)
        if op == "%":
            lc = poly.constant_value(left.poly)
            if lc is not None and k:
                return Val(poly.const(int(lc - k * int(lc / k))), reason, deps)
        quasi = self._quasi_affine(op, left.poly, k, deps)
        if quasi is not None:
            return Val(quasi, reason, deps)
        if op == "%":
            return Val(None, "modulo", deps)
        return Val(None, f"operator {op}", deps)

    @staticmethod
    def _quasi_affine(
        op: str, p: poly.Poly, k: int | None, deps: frozenset[str]
    ) -> poly.Poly | None:
        """``tid / 32`` and ``tid % 32`` (or ``tid & 31``) as derived index symbols.

        Warp and lane ids are quasi-affine: a floor division or modulo of a thread index by a
        constant. C truncates toward zero, which equals floor here because the dividend is a
        non-negative combination of thread/block indices and dimensions.
        """
        if k is None or k <= 0 or not deps or any(c < 0 for c in p.values()):
            return None
        if not all(s in THREAD_SYMBOLS | BLOCK_SYMBOLS | DIM_SYMBOLS for s in poly.symbols(p)):
            return None
        inner = poly.render(p)
        if op == "/":
            return poly.sym(f"floordiv({inner}, {k})")
        if op == ">>" and k < 31:
            return poly.sym(f"floordiv({inner}, {1 << k})")
        if op == "%":
            return poly.sym(f"mod({inner}, {k})")
        if op == "&" and (k + 1) & k == 0:
            return poly.sym(f"mod({inner}, {k + 1})")
        return None

    def _unary(self, node: Node) -> Val:
        op_node = node.child_by_field_name("operator")
        op = self.parsed.text(op_node) if op_node is not None else ""
        v = self.value(node.child_by_field_name("argument"))
        if op == "-" and v.poly is not None:
            return Val(poly.neg(v.poly), v.reason, v.deps)
        if op == "+":
            return v
        return Val(None, f"operator {op}", v.deps)

    def _cast(self, node: Node) -> Val:
        t = node.child_by_field_name("type")
        v = self.value(node.child_by_field_name("value"))
        if t is not None and any(f in self.parsed.text(t) for f in ("float", "double", "half")):
            return Val(None, "a floating-point value", v.deps)
        return v

    def _call(self, node: Node) -> Val:
        from migrator.cuda.decl import callee_name

        name, _ = callee_name(self.parsed, node)
        args = node.child_by_field_name("arguments")
        if name == "static_cast" and args is not None and args.named_children:
            return self.value(args.named_children[0])
        rank = self._cg_rank(node, name)
        if rank is not None:
            return rank
        return Val(None, f"the result of {name}()", self.deps(node))

    def _cg_rank(self, node: Node, name: str) -> Val | None:
        """Cooperative-group ranks of a 1-D block as thread-index algebra: for a tile of W
        threads, `thread_rank()` is threadIdx.x % W, `meta_group_rank()` threadIdx.x / W and
        `meta_group_size()` blockDim.x / W; for the block itself thread_rank() is threadIdx.x."""
        fn = node.child_by_field_name("function")
        obj = fn.child_by_field_name("argument") if fn is not None else None
        if obj is None or obj.type != "identifier":
            return None
        var = self.env.lookup(self.parsed.text(obj))
        if var is None or var.kind != "cg":
            return None
        tid, bdim = poly.sym("threadIdx.x"), poly.sym("blockDim.x")
        deps = frozenset({"threadIdx.x"})
        if var.cg_scope == "block" and name in (".thread_rank", ".size", ".num_threads"):
            return Val(tid, None, deps) if name == ".thread_rank" else Val(bdim)
        if var.cg_scope != "warp" or var.width <= 1:
            return None
        w = var.width
        if name == ".thread_rank":
            return Val(self._quasi_affine("%", tid, w, deps), None, deps)
        if name == ".meta_group_rank":
            return Val(self._quasi_affine("/", tid, w, deps), None, deps)
        if name == ".meta_group_size":
            return Val(self._quasi_affine("/", bdim, w, frozenset({"blockDim.x"})))
        if name in (".size", ".num_threads"):
            return Val(poly.const(w))
        return None

    def _sizeof(self, node: Node) -> Val:
        t = node.child_by_field_name("type")
        if t is not None:
            size = TYPE_BYTES.get(" ".join(self.parsed.text(t).split()))
            if size is not None:
                return Val(poly.const(size))
        return Val(None, "sizeof of an unknown type")


def pattern_of(p: poly.Poly) -> str | None:
    """Names the standard CUDA index forms; None for anything else."""
    for a in "xyz":
        tid, bid, bdim = f"threadIdx.{a}", f"blockIdx.{a}", f"blockDim.{a}"
        if p == {(bdim, bid): 1, (tid,): 1}:
            return f"global_{a}"
        if p == {(tid,): 1}:
            return f"thread_{a}"
        if p == {(bid,): 1}:
            return f"block_{a}"
        tile = poly.coefficient_of(p, bid)
        rest = poly.sub(p, poly.mul(tile, poly.sym(bid)))
        if rest == {(tid,): 1} and tile and not (poly.symbols(tile) & _INDEX_SYMBOLS):
            return f"block_tiled_{a}"  # blockIdx.x*TILE + threadIdx.x
    return None


def is_derived_symbol(name: str) -> bool:
    """Quasi-affine symbols built by `IndexEvaluator._quasi_affine` (warp id, lane id)."""
    return name.startswith(("floordiv(", "mod("))
