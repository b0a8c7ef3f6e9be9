"""Expressions over lanes: `ev(node, mask)` evaluates for the active lanes of `mask`.

Dispatch is a dict from tree-sitter node type to method. The mask matters inside expressions:
`&&`, `||` and `?:` evaluate their right/branch operands only for the lanes that need them, so
`i < n && x[i] > 0` never loads `x[i]` for lanes with `i >= n` (no false out-of-bounds report).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from tree_sitter import Node

from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp import lambdas, memory, traced
from migrator.cuda.interp.ctypes_ import CType
from migrator.cuda.interp.ops import COMPARE, UNARY, binary, mask_and, truthy
from migrator.cuda.interp.scope import (
    CompLV,
    LaneElemLV,
    LValue,
    MemLV,
    TypeName,
    Var,
    VarLV,
    ViewLV,
)
from migrator.cuda.interp.traced import SELECT, as_object, is_traced
from migrator.cuda.interp.values import Val, convert, lanes, scalar, select
from migrator.cuda.parse import unparen

if TYPE_CHECKING:
    from migrator.cuda.interp.machine import Machine

COMPONENTS = {"x": 0, "y": 1, "z": 2, "w": 3}
INDEX_MEMO_SIZE = 8  # widened index arrays kept per batch (see `scaled_index`)
DIM3 = ("threadIdx", "blockIdx", "blockDim", "gridDim")

# Constants from headers the preprocessor skips (<cfloat>, <climits>, <math_constants.h>).
HEADER_CONSTANTS: dict[str, tuple[CType, Any]] = {
    "FLT_MAX": (ct.FLOAT, np.finfo(np.float32).max),
    "FLT_MIN": (ct.FLOAT, np.finfo(np.float32).tiny),
    "FLT_EPSILON": (ct.FLOAT, np.finfo(np.float32).eps),
    "DBL_MAX": (ct.DOUBLE, np.finfo(np.float64).max),
    "INT_MAX": (ct.INT, 2**31 - 1),
    "INT_MIN": (ct.INT, -(2**31)),
    "UINT_MAX": (ct.UINT, 2**32 - 1),
    "INFINITY": (ct.FLOAT, np.inf),
    "NAN": (ct.FLOAT, np.nan),
    "CUDART_INF_F": (ct.FLOAT, np.inf),
    "CUDART_NAN_F": (ct.FLOAT, np.nan),
    "M_PI": (ct.DOUBLE, np.pi),
    "warpSize": (ct.INT, 32),
}

ASSIGN_OPS = {
    "+=": "+",
    "-=": "-",
    "*=": "*",
    "/=": "/",
    "%=": "%",
    "&=": "&",
    "|=": "|",
    "^=": "^",
    "<<=": "<<",
    ">>=": ">>",
}


_INT_SCALARS = (np.integer, np.bool_)  # (a tuple: `A | B` would build a union at every call)
_ONE = scalar(ct.INT, 1)  # `i++`'s step (values are never modified: one object serves)
_I64 = 1 << 63


class ExprMixin:
    """Expression evaluation; mixed into `Machine`."""

    def init_exprs(self: Machine) -> None:
        self.index_memo: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self.closures: list[lambdas.Closure] = []  # lambda values index this
        self.numbers: dict[str, Val] = {}  # number literals by spelling (`_e_number`)
        self._expr: dict[str, Callable[[Node, np.ndarray], Val]] = {
            "number_literal": self._e_number,
            "char_literal": self._e_char,
            "true": lambda n, m: Val(ct.BOOL, np.bool_(True)),
            "false": lambda n, m: Val(ct.BOOL, np.bool_(False)),
            "identifier": self._e_identifier,
            "type_identifier": self._e_identifier,
            "field_expression": self._e_field,
            "subscript_expression": lambda n, m: self.lvalue(n, m).load(self, m, n),
            "pointer_expression": self._e_pointer,
            "parenthesized_expression": lambda n, m: self.ev(n.named_children[-1], m),
            "binary_expression": self._e_binary,
            "unary_expression": self._e_unary,
            "update_expression": self._e_update,
            "assignment_expression": self._e_assign,
            "conditional_expression": self._e_conditional,
            "cast_expression": self._e_cast,
            "call_expression": self.call,
            "sizeof_expression": self._e_sizeof,
            "comma_expression": self._e_comma,
            "null": lambda n, m: _NULL,
            "compound_literal_expression": self._e_compound_literal,
            "lambda_expression": lambda n, m: lambdas.make(self, n, m),
            "qualified_identifier": self._e_qualified,
            # only printf takes strings; it ignores them
            "string_literal": lambda n, m: Val(ct.ptr(ct.CHAR), np.int64(0)),
            "concatenated_string": lambda n, m: Val(ct.ptr(ct.CHAR), np.int64(0)),
        }
        self._lvalue: dict[str, Callable[[Node, np.ndarray], LValue]] = {
            "identifier": self._lv_identifier,
            "subscript_expression": self._lv_subscript,
            "field_expression": self._lv_field,
            "pointer_expression": self._lv_deref,
            "parenthesized_expression": lambda n, m: self.lvalue(n.named_children[-1], m),
        }

    def ev(self: Machine, node: Node, mask: np.ndarray) -> Val:
        fn = self._expr.get(node.type)
        if fn is None:
            raise self.unsupported(node, f"expression {node.type} ({self.parsed.text(node)!r})")
        if self.options.trace:
            # traced values made here remember this expression's row, and the row of the
            # kernel's own statement that led here (the call of a device helper)
            prev = traced.AT[0]
            row = node.start_point[0]
            traced.AT[0] = (row, row if len(self.frames) <= 1 else prev[1])
            try:
                return fn(node, mask)
            finally:
                traced.AT[0] = prev
        return fn(node, mask)

    def lvalue(self: Machine, node: Node, mask: np.ndarray) -> LValue:
        fn = self._lvalue.get(node.type)
        if fn is None:
            raise self.error(node, f"{self.parsed.text(node)!r} is not assignable")
        return fn(node, mask)

    # --- leaves ------------------------------------------------------------------------------
    def _e_number(self: Machine, node: Node, mask: np.ndarray) -> Val:
        text = self.parsed.text(node)
        v = self.numbers.get(text)  # (values are never modified: one per spelling and run)
        if v is None:
            t, value = ct.literal_type(text)
            if t == ct.FLOAT or (t == ct.DOUBLE and self.options.trace):
                t = self.float_t  # a `1.0f` literal is float (float64 in shadow mode, traced)
            v = self.numbers[text] = scalar(t, value)
        return v

    def _e_char(self: Machine, node: Node, mask: np.ndarray) -> Val:
        text = self.parsed.text(node)[1:-1]
        esc = {"\\n": 10, "\\t": 9, "\\0": 0, "\\\\": 92, "\\'": 39}
        return scalar(ct.CHAR, esc.get(text, ord(text[0]) if text else 0))

    def name_of(self: Machine, node: Node) -> str:
        """An identifier's text, decoded once per program (every execution of a statement
        asks for the names it reads)."""
        names = self.program.names
        name = names.get(node.id)
        if name is None:
            name = names[node.id] = self.parsed.text(node)
        return name

    def _e_identifier(self: Machine, node: Node, mask: np.ndarray) -> Val:
        name = self.name_of(node)
        b = self.lookup(name)
        if b is not None:
            return self.as_val(b, node, mask)
        if name in DIM3:  # `dim3 d = blockDim;`: the whole vector
            t3 = ct.NAMED["dim3"]
            comps = tuple(self._dim3_component(name, k) for k in range(3))
            return Val(t3, comps=comps)
        if name in HEADER_CONSTANTS:
            t, v = HEADER_CONSTANTS[name]
            return scalar(self.float_t if t == ct.FLOAT else t, v)
        raise self.error(node, f"unknown name {name!r}")

    def _lv_identifier(self: Machine, node: Node, mask: np.ndarray) -> LValue:
        name = self.name_of(node)
        b = self.lookup(name)
        if isinstance(b, Var):
            if b.const:
                raise self.error(node, f"assignment to const {name!r}")
            return VarLV(b)
        if b is None or isinstance(b, TypeName):
            raise self.error(node, f"unknown variable {name!r}")
        return b

    def _e_field(self: Machine, node: Node, mask: np.ndarray) -> Val:
        """`threadIdx.x` and friends, `v.x` of a vector value, or `p->x` through a pointer."""
        memo = self.program.dim3_fields
        key = node.id
        which = memo.get(key, False)
        if which is False:  # (`threadIdx.x` in a loop: which of the four, read once)
            arg = node.child_by_field_name("argument")
            name = self.parsed.text(arg) if arg is not None and arg.type == "identifier" else ""
            which = memo[key] = name if name in DIM3 else None
        if which is not None:
            return self._dim3(node, which)
        arg = node.child_by_field_name("argument")
        op = node.child_by_field_name("operator")
        assert arg is not None and op is not None
        if arg.type == "identifier" and self.parsed.text(arg) in DIM3:
            return self._dim3(node, self.parsed.text(arg))
        if self.parsed.text(op) == ".":
            if arg.type in ("subscript_expression", "pointer_expression"):
                lv = self.lvalue(node, mask)  # `smem[i].m`: that field alone, from memory
                if isinstance(lv, MemLV):
                    return lv.load(self, mask, node)
            return self._component(node, self.ev(arg, mask))
        return self.lvalue(node, mask).load(self, mask, node)

    def _dim3(self: Machine, node: Node, which: str) -> Val:
        memo = self.program.dim3_components
        k = memo.get(node.id)
        if k is None:
            f = node.child_by_field_name("field")
            k = COMPONENTS.get(self.parsed.text(f) if f is not None else "")
            if k is None or k > 2:
                raise self.error(node, f"{which} has fields x, y, z")
            memo[node.id] = k
        return self._dim3_component(which, k)

    def _dim3_component(self: Machine, which: str, k: int) -> Val:
        g = self.geo
        if which == "threadIdx":
            return Val(ct.UINT, g.thread_index(k))
        if which == "blockIdx":
            return Val(ct.UINT, g.block_index(k))
        return Val(ct.UINT, np.uint32((g.block if which == "blockDim" else g.grid)[k]))

    def _component(self: Machine, node: Node, base: Val) -> Val:
        f = node.child_by_field_name("field")
        fname = self.parsed.text(f) if f is not None else ""
        if base.ctype.kind == "struct":
            k = base.ctype.field_index(fname)
            if k is None:  # `packed.size`: a static member read through an object
                static = self.static_value(base.ctype, fname)
                if static is not None:
                    return static
            if k is None or base.comps is None:
                raise self.error(node, f"{base.ctype} has no field {fname!r}")
            return base.comps[k]
        k = COMPONENTS.get(fname)
        if base.comps is None or k is None or k >= len(base.comps):
            raise self.unsupported(node, f"field access {self.parsed.text(node)!r}")
        return base.comps[k]

    # --- lvalues -------------------------------------------------------------------------------
    def _lv_subscript(self: Machine, node: Node, mask: np.ndarray) -> LValue:
        arg, index, name, plain = self.subscript_parts(node)
        if name is not None:  # `x[i]` of a pointer or array variable: one lookup
            b = self.lookup(name)
            if isinstance(b, Var) and b.ctype.kind != "struct":
                b.check_read(self, mask, arg)
                i = self.ev(index, mask)
                return self._lane_element(b.val, i) or self._element(b.val, i, node)
        elif plain and arg.type == "subscript_expression":
            row = self._row_of_matrix(arg, mask)
            if row is not None:  # `s[i][k]` of a 2-D array variable: its row, then the element
                i = self.ev(index, mask)
                return self._lane_element(row, i) or self._element(row, i, node)
        if not plain:
            view = self._local_view(arg, mask, node)
            if view is not None:  # `reinterpret_cast<float*>(&v4)[i]`
                return ViewLV(view[0], view[1], self.ev(index, mask))
        local = self._local_aggregate(arg, mask)
        if local is not None:  # `packed[k]`, `result.payload[k]`: an element of a local value
            lv = self.element_lvalue(local, self.ev(index, mask), node)
            if lv is not None:
                return lv
        base = self.ev(arg, mask)
        return self._element(base, self.ev(index, mask), node)

    def _row_of_matrix(self: Machine, node: Node, mask: np.ndarray) -> Val | None:
        """`s[i]` of an array-of-arrays variable (`float s[BM][BK]`, shared or a register
        tile) as the row's value, as the general path gives it (its element's lvalue,
        loaded: a sub-array loads as its address), without building the lvalue; None for
        anything else (pointers to pointers load from memory there)."""
        arg, index, name, _ = self.subscript_parts(node)
        if name is None:
            return None
        b = self.lookup(name)
        if not isinstance(b, Var) or b.ctype.kind != "array":
            return None
        elem = b.ctype.elem
        if elem is None or elem.kind != "array":
            return None
        b.check_read(self, mask, arg)
        p = self.ptr_add(b.val, self.ev(index, mask), node)
        return Val(elem, p.data, buf=p.buf)

    def subscript_parts(self: Machine, node: Node) -> tuple[Node, Node, str | None, bool]:
        """(argument, index, the argument's name where it is an identifier, whether it is a
        plain subscript or identifier, which no cast view can be) of `x[i]`, read from the
        tree once per program (`a[i][k]` in a loop asks at every step)."""
        memo = self.program.subscript_parts
        parts = memo.get(node.id)
        if parts is None:
            arg = node.child_by_field_name("argument")
            idx_list = node.child_by_field_name("indices")
            assert arg is not None and idx_list is not None
            name = self.parsed.text(arg) if arg.type == "identifier" else None
            plain = arg.type in ("identifier", "subscript_expression")
            parts = memo[node.id] = (arg, idx_list.named_children[0], name, plain)
        return parts

    def _lane_element(self: Machine, base: Val, idx: Val) -> LaneElemLV | None:
        """`base[idx]` where base is a local array (a register tile, one row per lane) and idx
        one in-bounds integer every lane shares (`r[m]` in an unrolled loop): its element
        at one offset in every lane's row, which `LaneElemLV` loads and stores without
        resolving a pointer (the accesses of a register tile's multiply-add were half of a
        GEMM's run); None for anything else (the general path, `_element`)."""
        buf, d, pd = base.buf, idx.data, base.data
        if (
            buf is None or buf.per != "lane" or type(pd) is not np.int64
            or not isinstance(d, _INT_SCALARS) or buf.base is not None or buf.views
        ):  # fmt: skip
            return None
        elem = base.ctype.elem
        if elem is None or (elem is not buf.elem and elem != buf.elem) or elem.kind in (
            "array", "struct", "vec"
        ):  # fmt: skip
            return None
        off = int(pd) + int(d)
        if not 0 <= off < buf.size:
            return None  # (the general path reports it)
        return LaneElemLV(Val(ct.ptr(elem), np.int64(off), buf=buf), elem)

    def _element(self: Machine, base: Val, idx: Val, node: Node) -> LValue:
        """`base[idx]` of a pointer or an array in memory."""
        if not base.ctype.is_pointer_like:
            raise self.error(node, f"subscript of non-pointer {base.ctype}")
        p = self.ptr_add(base, idx, node)
        assert p.ctype.elem is not None
        return MemLV(p, p.ctype.elem)

    def _lv_field(self: Machine, node: Node, mask: np.ndarray) -> LValue:
        arg = node.child_by_field_name("argument")
        op = node.child_by_field_name("operator")
        f = node.child_by_field_name("field")
        assert arg is not None and f is not None
        if op is not None and self.parsed.text(op) == "->":
            p = self.ev(arg, mask)
            assert p.ctype.elem is not None
            base: LValue = MemLV(p, p.ctype.elem)
        else:
            base = self.lvalue(arg, mask)
        t = base.ctype
        if t.kind == "struct":
            ks = t.field_index(self.parsed.text(f))
            if ks is None:
                raise self.error(node, f"{t} has no field {self.parsed.text(f)!r}")
            if isinstance(base, MemLV):  # a field of a struct in memory: memory itself
                p, ft = memory.field_pointers(self, base.ptr, t, node)[ks]
                return MemLV(p, ft)
            return CompLV(base, ks, t.fields[ks][1])
        k = COMPONENTS.get(self.parsed.text(f))
        if t.kind != "vec" or k is None or k >= t.count or t.elem is None:
            raise self.unsupported(node, f"field access {self.parsed.text(node)!r} on {t}")
        return CompLV(base, k, t.elem)

    def _lv_deref(self: Machine, node: Node, mask: np.ndarray) -> LValue:
        op = node.child_by_field_name("operator")
        arg = node.child_by_field_name("argument")
        assert op is not None and arg is not None
        if self.parsed.text(op) != "*":
            raise self.error(node, "address-of is not assignable")
        view = self._local_view(arg, mask, node)
        if view is not None:  # `*reinterpret_cast<int4*>(&packed)`
            return ViewLV(view[0], view[1], scalar(ct.INT, 0))
        p = self.ev(arg, mask)
        if not p.ctype.is_pointer_like or p.ctype.elem is None:
            raise self.error(node, f"dereference of non-pointer {p.ctype}")
        return MemLV(self.decay(p), p.ctype.elem)

    def _local_aggregate(self: Machine, node: Node, mask: np.ndarray) -> LValue | None:
        """The lvalue of a local struct or array-valued field named by `node`, else None
        (pointers and arrays in memory take the ordinary subscript path)."""
        if node.type == "identifier":
            b = self.lookup(self.parsed.text(node))
            if isinstance(b, Var) and b.ctype.kind == "struct":
                return VarLV(b)
            return None
        if node.type == "field_expression":
            op = node.child_by_field_name("operator")
            if op is None or self.parsed.text(op) != ".":
                return None
            lv = self.lvalue(node, mask)
            return lv if lv.ctype.kind in ("vec", "struct") and not isinstance(lv, MemLV) else None
        return None

    def address_operand(self: Machine, node: Node) -> Node | None:
        """`x` of `&x` (parentheses around either allowed), else None."""
        node = unparen(node)
        op = node.child_by_field_name("operator") if node.type == "pointer_expression" else None
        if op is None or self.parsed.text(op) != "&":
            return None
        return node.child_by_field_name("argument")

    def _local_view(
        self: Machine, node: Node, mask: np.ndarray, where: Node
    ) -> tuple[LValue, CType] | None:
        """`reinterpret_cast<T*>(&v)` / `(T*)&v` of a local variable (not memory): the
        variable's lvalue and T, or None when `node` is not that shape."""
        node = unparen(node)
        target: CType | None = None
        operand: Node | None = None
        if node.type == "cast_expression":
            tnode, operand = node.child_by_field_name("type"), node.child_by_field_name("value")
            target = self.type_of_descriptor(tnode) if tnode is not None else None
        elif node.type == "call_expression":
            fn = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            targs = fn.child_by_field_name("arguments") if fn is not None else None
            name = fn.child_by_field_name("name") if fn is not None else None
            if (
                fn is not None and fn.type == "template_function" and name is not None
                and self.parsed.text(name) == "reinterpret_cast" and targs is not None
                and args is not None and len(args.named_children) == 1
            ):  # fmt: skip
                target = self.type_of_descriptor(targs.named_children[0])
                operand = args.named_children[0]
        if target is None or operand is None or target.kind != "ptr" or target.elem is None:
            return None
        inner = self.address_operand(operand)
        if inner is None:
            return None
        lv = self.lvalue(inner, mask)
        if isinstance(lv, MemLV):
            return None  # memory: the ordinary pointer path (a view of the buffer)
        elem = target.elem
        if elem.size == 0 or lv.ctype.size % elem.size or lv.ctype.kind == "struct":
            raise self.unsupported(
                where, f"local {lv.ctype} seen as {elem} (sizes {lv.ctype.size}, {elem.size})"
            )
        return lv, elem

    def _e_pointer(self: Machine, node: Node, mask: np.ndarray) -> Val:
        op = node.child_by_field_name("operator")
        arg = node.child_by_field_name("argument")
        assert op is not None and arg is not None
        if self.parsed.text(op) == "&":
            lv = self.lvalue(arg, mask)
            if isinstance(lv, MemLV):
                return Val(ct.ptr(lv.ctype), lv.ptr.data, buf=lv.ptr.buf)
            raise self.unsupported(node, "address of a local variable")
        return self._lv_deref(node, mask).load(self, mask, node)

    # --- pointers ------------------------------------------------------------------------------
    def decay(self, p: Val) -> Val:
        """Array-to-pointer decay: `float a[4][8]` used as a value is a `float (*)[8]`."""
        if p.ctype.kind == "array":
            assert p.ctype.elem is not None
            return Val(ct.ptr(p.ctype.elem), p.data, buf=p.buf)
        return p

    def ptr_add(self: Machine, p: Val, i: Val, node: Node, sign: int = 1) -> Val:
        """`p + i` for a pointer: the offset moves by i * sizeof(*p) / sizeof(buffer element)."""
        if p.ctype.kind == "array":
            p = self.decay(p)
        pt, buf = p.ctype, p.buf
        assert pt.elem is not None
        if i.ctype.kind not in ("int", "bool"):
            raise self.error(node, f"pointer offset of type {i.ctype}")
        if buf is None:
            raise self.unsupported(node, "arithmetic on a pointer with no buffer")
        k, rest = divmod(pt.elem.size, buf.elem.size)
        if rest:
            raise self.unsupported(node, f"{p.ctype} into a {buf.elem} buffer")
        k *= sign
        d, pd = i.data, p.data
        if isinstance(d, _INT_SCALARS) and type(pd) is np.int64:
            # (a uniform offset: numpy scalars, widened as `astype` widens, wrapping; below 64
            # bits the exact sum in Python ints is the same number while it fits)
            if d.dtype.itemsize < 8:
                moved = int(pd) + int(d) * k
                if -_I64 <= moved < _I64:
                    return Val(pt, np.int64(moved), buf=buf)
            return Val(pt, pd + d.astype(np.int64) * np.int64(k), buf=buf)
        if np.ndim(d) == 0:
            delta = np.asarray(d).astype(np.int64)[()] * np.int64(k)
            return Val(pt, np.add(pd, delta), buf=buf)
        scaled = self.scaled_index(d, k)
        if np.ndim(pd) == 0 and pd == 0:
            return Val(pt, scaled, buf=buf)
        return Val(pt, scaled + pd, buf=buf)

    def scaled_index(self: Machine, d: np.ndarray, k: int) -> np.ndarray:
        """`d` widened to int64 (wrapping, as astype does) times `k`, memoised by the array's
        identity: values are never modified in place, so `As[ty][k]` in a loop widens and
        scales `ty` once. The memo holds its key arrays (no id reuse) and stays small."""
        key = (id(d), k)
        hit = self.index_memo.get(key)
        if hit is not None and hit[0] is d:
            return hit[1]
        out = d.astype(np.int64)
        if k != 1:
            out *= k
        if len(self.index_memo) >= INDEX_MEMO_SIZE:
            self.index_memo.pop(next(iter(self.index_memo)))
        self.index_memo[key] = (d, out)
        return out

    # --- operators -----------------------------------------------------------------------------
    def operator_parts(self: Machine, node: Node) -> tuple[str, Node, Node]:
        """(operator, left, right) of a binary or assignment expression, read from the tree
        once per program: the evaluator asks for them at every execution."""
        memo = self.program.operator_parts
        parts = memo.get(node.id)
        if parts is None:
            op, left, right = (node.child_by_field_name(f) for f in ("operator", "left", "right"))
            assert op is not None and left is not None and right is not None
            parts = memo[node.id] = (self.parsed.text(op), left, right)
        return parts

    def _e_binary(self: Machine, node: Node, mask: np.ndarray) -> Val:
        op, left, right = self.operator_parts(node)
        if op in ("&&", "||"):
            a = truthy(self.ev(left, mask))
            # short-circuit per lane: the right side runs only where it decides the result
            sub = mask_and(mask, a if op == "&&" else ~np.asarray(a))
            if not np.any(sub):
                return Val(ct.BOOL, np.asarray(a, dtype=bool))
            b = truthy(self.ev(right, sub))
            out = (a & b) if op == "&&" else (a | b)
            return Val(ct.BOOL, out)
        if op in ("+", "-") and self.options.contract:
            fused = self._try_fma(op, left, right, mask)
            if fused is not None:
                return fused
        elif op == "+" and self.options.trace:
            fused = self._traced_fma(node, left, right, mask)
            if fused is not None:
                return fused
        a, b = self.ev(left, mask), self.ev(right, mask)
        if op in _ORDERING and self.options.trace and (is_traced(a.ctype) or is_traced(b.ctype)):
            # `bool bigger = a.maxval > b.maxval;`: the comparison is kept with its bool, so a
            # later `bigger ? a : b` is a select of what the kernel computes, not of this run
            lv, rv = as_object(lanes(a, self.geo.n)), as_object(lanes(b, self.geo.n))
            holds = mask & np.asarray(COMPARE[op](lv, rv), dtype=bool)
            return CondVal(ct.BOOL, holds, cond=TracedCond(op, (lv, rv), holds))
        return self.apply_binary(op, a, b, node)

    def apply_binary(self: Machine, op: str, a: Val, b: Val, node: Node) -> Val:
        pa, pb = a.ctype.is_pointer_like, b.ctype.is_pointer_like
        try:
            if pa and pb and op == "-":
                a, b = self.decay(a), self.decay(b)
                assert a.ctype.elem is not None and a.buf is not None
                stride = a.ctype.elem.size // a.buf.elem.size
                return Val(ct.LONG, (np.subtract(a.data, b.data) // stride).astype(np.int64))
            if pa and op in ("+", "-") and not pb:
                return self.ptr_add(a, b, node, 1 if op == "+" else -1)
            if pb and op == "+":
                return self.ptr_add(b, a, node)
            if op in COMPARE and (pa or pb) and _null_constant(b if pa else a):
                pb = pa = True  # `p == 0`: 0 is the null pointer constant
                a, b = (a, _NULL) if not b.ctype.is_pointer_like else (_NULL, b)
            if pa and pb and op in COMPARE:
                if a.buf is not b.buf:
                    return self.compare_buffers(op, a, b, node)
                return binary(op, Val(ct.LONG, a.data), Val(ct.LONG, b.data))
            if pa or pb:
                raise self.error(node, f"operator {op} with a pointer operand")
            if a.comps is not None or b.comps is not None:
                return self._paired_binary(op, a, b, node)
            return binary(op, a, b, self.float_t)
        except TypeError as e:
            raise self.error(node, str(e)) from e

    def _paired_binary(self: Machine, op: str, a: Val, b: Val, node: Node) -> Val:
        """`h2 + h2` on `__half2` / `__nv_bfloat162`: cuda_fp16.h and cuda_bf16.h define + - * /
        per component (each rounded to the element type, as `__hadd2` does). Plain CUDA vector
        types (float4, int2) have no operators unless the program defines them."""
        t = a.ctype
        if (
            t != b.ctype or t.kind != "vec" or t.elem not in (ct.HALF, ct.BF16)
            or op not in ("+", "-", "*", "/") or a.comps is None or b.comps is None
        ):  # fmt: skip
            raise self.unsupported(node, f"operator {op} on {a.ctype} and {b.ctype}")
        from migrator.cuda.interp.half import HALF_BUILTINS

        name = {"+": "__hadd2", "-": "__hsub2", "*": "__hmul2", "/": "__hdiv2"}[op]
        return HALF_BUILTINS[name](self, [a, b], self.geo.full, node)

    def _e_compound_literal(self: Machine, node: Node, mask: np.ndarray) -> Val:
        """`cg::plus<float>{}` (a functor for cg::reduce), `MaxOp{}`, `float4{a, b, c, d}`."""
        from migrator.cuda.interp import coop

        tnode, init = node.child_by_field_name("type"), node.child_by_field_name("value")
        assert tnode is not None and init is not None
        inner = tnode.child_by_field_name("name") if tnode.type == "qualified_identifier" else tnode
        if inner is not None and inner.type == "template_type":
            name_node = inner.child_by_field_name("name")
            name = self.parsed.text(name_node) if name_node is not None else ""
            if name in coop.FUNCTORS and not init.named_children:
                return coop.FREE[name](self, node, inner.child_by_field_name("arguments"), [], mask)
        t = self.base_type(tnode)
        items = [c for c in init.named_children if c.type != "comment"]
        if t.kind == "struct":
            built = self.construct(t, items, mask, node)
            if built is not None:
                return built
        if not items:
            return self._zero(t)
        if t.kind == "vec" and t.elem is not None and len(items) == t.count:
            return Val(t, comps=tuple(self.convert_to(self.ev(c, mask), t.elem, c) for c in items))
        if t.kind == "struct" and len(items) <= len(t.fields):  # `Params{a, b}`: zero fill
            fields = t.fields[: len(items)]
            comps = [
                self.convert_to(self.ev(c, mask), ft, c)
                for c, (_, ft) in zip(items, fields, strict=True)
            ]
            comps += [self._zero(ft) for _, ft in t.fields[len(items) :]]
            return Val(t, comps=tuple(comps))
        if t.kind not in ("vec", "struct") and len(items) == 1:
            return self.convert_to(self.ev(items[0], mask), t, node)
        raise self.unsupported(node, f"initialiser {self.parsed.text(node)!r}")

    def compare_buffers(self: Machine, op: str, a: Val, b: Val, node: Node) -> Val:
        """`p == q` / `p != q` for pointers into different buffers (or null): never equal,
        unless the two buffers share memory (one array bound to two parameters), which the
        interpreter does not model; ordering them has no meaning."""
        bufs = [x.buf for x in (a, b) if x.buf is not None]
        if op not in ("==", "!=") or (
            len(bufs) == 2 and np.shares_memory(bufs[0].data, bufs[1].data)
        ):
            raise self.unsupported(node, f"pointer comparison {op} across different buffers")
        return Val(ct.BOOL, np.bool_(op == "!="))

    def _mul_operands(self: Machine, node: Node) -> tuple[Node, Node] | None:
        memo = self.program.mul_parts
        key = node.id
        if key in memo:
            return memo[key]
        got = memo[key] = self._find_mul_operands(node)
        return got

    def _find_mul_operands(self: Machine, node: Node) -> tuple[Node, Node] | None:
        while node.type == "parenthesized_expression":
            node = node.named_children[-1]
        if node.type != "binary_expression":
            return None
        op = node.child_by_field_name("operator")
        if op is None or self.parsed.text(op) != "*":
            return None
        lhs, rhs = node.child_by_field_name("left"), node.child_by_field_name("right")
        assert lhs is not None and rhs is not None
        return lhs, rhs

    def _product_side(
        self: Machine, left: Node, right: Node
    ) -> tuple[tuple[Node, Node], bool] | None:
        """The factors of the product among a sum's two operands, and whether it is the
        left one (looked for there first); None where neither is a product."""
        mul = self._mul_operands(left)
        if mul is not None:
            return mul, True
        mul = self._mul_operands(right)
        return None if mul is None else (mul, False)

    def _try_fma(self: Machine, op: str, left: Node, right: Node, mask: np.ndarray) -> Val | None:
        """nvcc -fmad=true: `a*b ± c` and `c ± a*b` on float32 round once.

        Computed as float64 a*b (exact for float32 inputs) ± c, then rounded to float32. That is
        a true fma except in rare double-rounding ties (53-bit then 24-bit rounding).
        """
        side = self._product_side(left, right)
        if side is None:
            return None
        mul, mul_left = side
        x, y = self.ev(mul[0], mask), self.ev(mul[1], mask)
        # C leaves operand order unspecified; the product goes first
        z = self.ev(right if mul_left else left, mask)
        t_mul = (
            ct.arith_result(x.ctype, y.ctype, self.float_t)
            if x.ctype.is_arith and y.ctype.is_arith
            else None
        )
        if (
            t_mul != ct.FLOAT
            or not z.ctype.is_arith
            or ct.arith_result(t_mul, z.ctype, self.float_t) != ct.FLOAT
        ):
            prod = self.apply_binary("*", x, y, mul[0])
            a, b = (prod, z) if mul_left else (z, prod)
            return self.apply_binary(op, a, b, mul[0])
        return fma_f32(x, y, z, op, mul_left)

    def _traced_fma(
        self: Machine, node: Node, left: Node, right: Node, mask: np.ndarray
    ) -> Val | None:
        """A traced run's `a*b + c` / `c + a*b` as one node per element where all are traced
        (`_traced_multiply_add`), else as written (the product, then the sum, operands in
        their order); None where neither side is a product."""
        side = self._product_side(left, right)
        if side is None or not _one_row(side[0][0], node):
            return None
        mul, mul_left = side
        product = left if mul_left else right
        z = None if mul_left else self.ev(left, mask)
        x, y = self.ev(mul[0], mask), self.ev(mul[1], mask)
        z = self.ev(right, mask) if z is None else z
        if x.ctype.is_arith and y.ctype.is_arith and z.ctype.is_arith:
            t_mul = ct.arith_result(x.ctype, y.ctype, self.float_t)
            fused = _traced_multiply_add(x, y, z, t_mul, self.float_t, not mul_left)
            if fused is not None:
                return fused
        prod = self.apply_binary("*", x, y, product)
        a, b = (prod, z) if mul_left else (z, prod)
        return self.apply_binary("+", a, b, node)

    def _e_unary(self: Machine, node: Node, mask: np.ndarray) -> Val:
        op = node.child_by_field_name("operator")
        arg = node.child_by_field_name("argument")
        assert op is not None and arg is not None
        v = self.ev(arg, mask)
        fn = UNARY.get(self.parsed.text(op))
        if fn is None:
            raise self.unsupported(node, f"unary operator {self.parsed.text(op)}")
        if v.ctype.is_pointer_like:
            if self.parsed.text(op) != "!":
                raise self.error(node, f"unary {self.parsed.text(op)} on a pointer")
            return Val(ct.BOOL, np.bool_(v.buf is None))  # only a buffer-less pointer is null
        try:
            return fn(v)
        except TypeError as e:
            raise self.error(node, str(e)) from e

    def _e_update(self: Machine, node: Node, mask: np.ndarray) -> Val:
        memo = self.program.update_parts
        parts = memo.get(node.id)
        if parts is None:  # (read from the tree once: a loop's `i++` runs at every step)
            op = node.child_by_field_name("operator")
            arg = node.child_by_field_name("argument")
            assert op is not None and arg is not None
            step = 1 if self.parsed.text(op) == "++" else -1
            parts = memo[node.id] = (step, arg, node.children[0].type in ("++", "--"))
        step, arg, prefix = parts
        lv = self.lvalue(arg, mask)
        old = lv.load(self, mask, node)
        if old.ctype is ct.INT:  # (int + int is int: no pointer, no conversion to make)
            new = binary("+" if step > 0 else "-", old, _ONE)
        else:
            new = self.apply_binary("+" if step > 0 else "-", old, _ONE, node)
            new = convert(new, lv.ctype)
        lv.store(self, new, mask, node)
        return new if prefix else old

    def _e_assign(self: Machine, node: Node, mask: np.ndarray) -> Val:
        op, left, right = self.operator_parts(node)
        lv = self.lvalue(left, mask)
        if op == "=":
            v = self.ev(right, mask)
        else:
            mul = self.contracted_operands(op, right)
            old = lv.load(self, mask, node)
            if mul is None and self.options.trace and is_traced(old.ctype) and op == "+=":
                mul = self._mul_operands(right)  # (`_traced_multiply_add`: one node)
                mul = mul if mul is not None and _one_row(mul[0], node) else None
            if mul is not None and (old.ctype == ct.FLOAT or is_traced(old.ctype)):
                parts = [self.ev(mul[0], mask), self.ev(mul[1], mask)]
            else:
                parts = [self.ev(right, mask)]
            v = self.compound_value(op, old, parts, node)
        v = self.convert_to(v, lv.ctype, node)
        lv.store(self, v, mask, node)
        return v

    def contracted_operands(self: Machine, op: str, right: Node) -> tuple[Node, Node] | None:
        """The factors of `right` where `x op= a * b` may be one fused multiply-add (`+=`/`-=`,
        contraction on), else None."""
        if ASSIGN_OPS[op] in "+-" and self.options.contract:
            return self._mul_operands(right)
        return None

    def compound_value(self: Machine, op: str, old: Val, parts: list[Val], node: Node) -> Val:
        """`old op parts` for a compound assignment `op` (`+=`), before the conversion to the
        target's type: `parts` the product's factors of a contracted `+=`/`-=` on a float (one
        fma where the product is float), or the right side alone."""
        bop = ASSIGN_OPS[op]
        if len(parts) == 2:
            x, y = parts
            t_mul = ct.arith_result(x.ctype, y.ctype, self.float_t)
            if t_mul == ct.FLOAT and old.ctype == ct.FLOAT:
                return fma_f32(x, y, old, bop, mul_left=False)
            if bop == "+":  # (`old + x * y`, as the assignment adds)
                fused = _traced_multiply_add(x, y, old, t_mul, self.float_t, True)
                if fused is not None:
                    return fused
            return self.apply_binary(bop, old, binary("*", x, y, self.float_t), node)
        return self.apply_binary(bop, old, parts[0], node)

    def convert_to(self: Machine, v: Val, t: CType, node: Node) -> Val:
        if v.ctype.kind == "struct" and t != v.ctype:  # a user conversion operator
            converted = self.convert_struct(v, t, node)
            if converted is not None:
                return converted
        try:
            return convert(v, t)
        except TypeError as e:
            raise self.error(node, str(e)) from e

    def _e_conditional(self: Machine, node: Node, mask: np.ndarray) -> Val:
        cond = node.child_by_field_name("condition")
        a_node = node.child_by_field_name("consequence")
        b_node = node.child_by_field_name("alternative")
        assert cond is not None and a_node is not None and b_node is not None
        if self.options.trace:
            picked = self._traced_select(cond, a_node, b_node, mask)
            if picked is not None:
                return picked
        c = np.asarray(truthy(self.ev(cond, mask)), dtype=bool)
        ma, mb = mask_and(mask, c), mask_and(mask, ~c)
        # each branch only for its lanes; a branch no lane takes is not evaluated at all
        if not mb.any():
            return self.ev(a_node, ma)
        if not ma.any():
            return self.ev(b_node, mb)
        a, b = self.ev(a_node, ma), self.ev(b_node, mb)
        if a.ctype != b.ctype and a.ctype.is_arith and b.ctype.is_arith:
            t = ct.arith_result(a.ctype, b.ctype, self.float_t)
            a, b = convert(a, t), convert(b, t)
        try:
            return select(c, a, b)
        except TypeError as e:
            raise self.unsupported(node, str(e)) from e

    def traced_condition(self: Machine, cond: Node, mask: np.ndarray) -> TracedCond | None:
        """A condition on traced values, in a traced run: comparisons (`x > t`, `__hgt(x, t)`)
        joined by `&&`, `||` and `!`, with the lanes where it holds; None for any condition
        that does not compare traced values (the usual lane masking then applies)."""
        cond = unparen(cond)
        if cond.type == "identifier":  # a bool that holds a traced comparison
            b = self.lookup(self.parsed.text(cond))
            v = b.val if isinstance(b, Var) else None
            if not isinstance(v, CondVal) or v.cond is None:
                return None
            return TracedCond(v.cond.op, v.cond.parts, mask & v.cond.holds)
        if cond.type == "unary_expression":
            op = cond.child_by_field_name("operator")
            arg = cond.child_by_field_name("argument")
            if op is not None and arg is not None and self.parsed.text(op) == "!":
                inner = self.traced_condition(arg, mask)
                return None if inner is None else TracedCond("not", (inner,), mask & ~inner.holds)
            return None
        if cond.type == "call_expression":
            fn = cond.child_by_field_name("function")
            args = cond.child_by_field_name("arguments")
            sym = _HALF_COMPARE.get(self.parsed.text(fn) if fn is not None else "")
            if sym is None or args is None or len(args.named_children) != 2:
                return None
            lhs, rhs = args.named_children
        elif cond.type == "binary_expression":
            op = cond.child_by_field_name("operator")
            sym = self.parsed.text(op) if op is not None else ""
            lhs, rhs = cond.child_by_field_name("left"), cond.child_by_field_name("right")
            assert lhs is not None and rhs is not None
            if sym in ("&&", "||"):
                a = self.traced_condition(lhs, mask)
                b = self.traced_condition(rhs, mask) if a is not None else None
                if a is None or b is None:
                    return None
                holds = (a.holds & b.holds) if sym == "&&" else (a.holds | b.holds)
                return TracedCond("and" if sym == "&&" else "or", (a, b), mask & holds)
            if sym not in ("<", "<=", ">", ">="):
                return None
        else:
            return None
        left, right = self.ev(lhs, mask), self.ev(rhs, mask)
        if not (is_traced(left.ctype) or is_traced(right.ctype)):
            return None
        lv, rv = as_object(lanes(left, self.geo.n)), as_object(lanes(right, self.geo.n))
        holds = np.asarray(COMPARE[sym](lv, rv), dtype=bool)
        return TracedCond(sym, (lv, rv), mask & holds)

    def _traced_select(self: Machine, cond: Node, a_node: Node, b_node: Node,
                       mask: np.ndarray) -> Val | None:  # fmt: skip
        """`x > y ? a : b` on traced values, in a traced run: a select node (the condition is
        part of what the kernel computes, as in `v > 0 ? v : alpha * v`)."""
        c = self.traced_condition(cond, mask)
        if c is None:
            return None
        a, b = self.ev(a_node, mask), self.ev(b_node, mask)
        if a.comps is not None and b.comps is not None and a.ctype == b.ctype:
            return self._select_parts(c, a, b)  # `bigger ? a : b` of two structs
        if not (a.ctype.is_arith and b.ctype.is_arith):
            return None
        t = ct.arith_result(a.ctype, b.ctype, self.float_t)
        if not is_traced(t):
            return None
        a, b = convert(a, t), convert(b, t)
        n = self.geo.n
        return Val(t, c.select(as_object(lanes(a, n)), as_object(lanes(b, n))))

    def _select_parts(self: Machine, c: TracedCond, a: Val, b: Val) -> Val:
        """A traced select of two structs (or vectors): traced fields become select nodes,
        the others (counts, indices) are chosen lane by lane where the condition holds."""
        assert a.comps is not None and b.comps is not None
        n = self.geo.n
        parts = []
        for x, y in zip(a.comps, b.comps, strict=True):
            if x.comps is not None and y.comps is not None:
                parts.append(self._select_parts(c, x, y))
            elif is_traced(x.ctype) or is_traced(y.ctype):
                t = x.ctype if is_traced(x.ctype) else y.ctype
                parts.append(Val(t, c.select(as_object(lanes(x, n)), as_object(lanes(y, n)))))
            else:
                parts.append(select(c.holds, x, y))
        return Val(a.ctype, comps=tuple(parts))

    def _e_cast(self: Machine, node: Node, mask: np.ndarray) -> Val:
        tnode = node.child_by_field_name("type")
        vnode = node.child_by_field_name("value")
        assert tnode is not None and vnode is not None
        t = self.type_of_descriptor(tnode)
        return self.cast(self.ev(vnode, mask), t, node)

    def cast(self: Machine, v: Val, t: CType, node: Node) -> Val:
        if t.kind == "ptr":
            if v.ctype.kind == "int" and v.ctype.size == 8:  # an address made by (uintptr_t)p
                return self.convert_to(v, t, node)
            if not v.ctype.is_pointer_like:
                raise self.unsupported(node, f"cast of {v.ctype} to pointer")
            return Val(t, self.decay(v).data, buf=v.buf)  # reinterpret: offset kept
        return self.convert_to(v, t, node)

    def _e_sizeof(self: Machine, node: Node, mask: np.ndarray) -> Val:
        tnode = node.child_by_field_name("type")
        if tnode is not None:
            return scalar(ct.ULONG, self.type_of_descriptor(tnode).size)
        vnode = node.child_by_field_name("value")
        assert vnode is not None
        inner = vnode
        while inner.type == "parenthesized_expression":
            inner = inner.named_children[-1]
        if inner.type == "identifier":  # `sizeof(T)` with T a typedef parses as a value
            name = self.parsed.text(inner)
            b = self.lookup(name)
            if isinstance(b, TypeName):
                return scalar(ct.ULONG, b.ctype.size)
            if b is None and name in self.program.structs:
                return scalar(ct.ULONG, self.struct_type(name, self.program.structs[name]).size)
            if b is None and name in self.types:
                return scalar(ct.ULONG, self.types[name].size)
        return scalar(ct.ULONG, self.ev(vnode, mask).ctype.size)

    def _e_comma(self: Machine, node: Node, mask: np.ndarray) -> Val:
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        assert left is not None and right is not None
        self.ev(left, mask)
        return self.ev(right, mask)

    def truth(self: Machine, node: Node, mask: np.ndarray) -> np.ndarray:
        """Lanes of `mask` where the condition holds (a bool array over all lanes)."""
        return mask_and(mask, truthy(self.ev(node, mask)))


_HALF_COMPARE = {"__hgt": ">", "__hge": ">=", "__hlt": "<", "__hle": "<="}


class TracedCond:
    """A condition over traced values: a comparison (`op` with its two operands' lane arrays)
    or `and`/`or`/`not` of conditions; `holds`: the lanes where it is true."""

    def __init__(self, op: str, parts: tuple[Any, ...], holds: np.ndarray) -> None:
        self.op, self.parts, self.holds = op, parts, holds

    def select(self, then: Any, other: Any) -> Any:
        """Per lane `cond ? then : other`, as select nodes over traced values."""
        if self.op == "not":
            return self.parts[0].select(other, then)
        if self.op == "or":
            a, b = self.parts
            return a.select(then, b.select(then, other))
        if self.op == "and":
            a, b = self.parts
            return a.select(b.select(then, other), other)
        lhs, rhs = self.parts
        return SELECT(self.op, lhs, rhs, then, other)


@dataclass
class CondVal(Val):
    """A bool computed by comparing traced values, with the comparison (traced runs only)."""

    cond: TracedCond | None = None


_ORDERING = ("<", "<=", ">", ">=")

_NULL = Val(ct.ptr(ct.VOID), np.int64(0))  # `NULL` / `nullptr`: a pointer naming no buffer


def _null_constant(v: Val) -> bool:
    """An integer 0 compared with a pointer is the null pointer constant."""
    return v.ctype.kind in ("int", "bool") and v.is_uniform and v.data == 0


def _one_row(product: Node, node: Node) -> bool:
    """Whether a product (its first operand's row, where it starts) is on the row of the
    sum: a traced node has one source row, and a product on a row of its own keeps it apart."""
    return product.start_point[0] == node.start_point[0]


def _traced_multiply_add(
    x: Val, y: Val, z: Val, t_mul: CType, float_t: CType, sum_first: bool = False
) -> Val | None:
    """`x * y + z` (`z + x * y`: `sum_first`) of a traced run as one node per element
    (`traced.multiply_add`), where the product and the sum are both of traced type; None
    otherwise (computed as written)."""
    t = ct.arith_result(t_mul, z.ctype, float_t)
    if not (is_traced(t_mul) and is_traced(t)):
        return None
    xs, ys = (v.data if v.ctype is t_mul else convert(v, t_mul).data for v in (x, y))
    zs = z.data if z.ctype is t else convert(z, t).data
    return Val(t, traced.multiply_add(xs, ys, zs, sum_first))


def fma_f32(x: Val, y: Val, z: Val, op: str, mul_left: bool) -> Val:
    """Fused `x*y ± z` (mul_left) or `z ± x*y`, rounded once to float32 (see `_try_fma`).

    The float64 product is exact (24+24 bits < 53). Everything happens in one preallocated
    float64 array: fresh multi-megabyte temporaries cost page faults that dominate the math.
    """
    xs, ys, zs = (v.data if v.ctype == ct.FLOAT else convert(v, ct.DOUBLE).data for v in (x, y, z))
    # (lane arrays all have one shape: the first of them is the result's)
    shape = next((np.shape(d) for d in (xs, ys, zs) if np.ndim(d)), ())
    acc = np.empty(shape, dtype=np.float64)
    np.multiply(xs, ys, out=acc, dtype=np.float64)
    if mul_left:
        (np.add if op == "+" else np.subtract)(acc, zs, out=acc, dtype=np.float64)
    else:
        (np.add if op == "+" else np.subtract)(zs, acc, out=acc, dtype=np.float64)
    out = acc.astype(np.float32)
    return Val(ct.FLOAT, out if out.ndim else out[()])
