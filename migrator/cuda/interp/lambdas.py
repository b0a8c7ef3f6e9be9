"""Lambdas: `auto step = [&](int t) { ... }; step(t2);` inside a kernel.

A lambda value is a closure: its node and the scopes its body sees besides its parameters. By
reference (`[&]`, `[&x]`) the body shares the maker's variables (the same `Var` objects, so
stores are seen on both sides); by value (`[=]`, `[x]`) it gets const copies made when the
lambda is. A call runs the body in a frame of its own (its `return` ends only the lambda).
Not modelled (raises): `this` and init captures, `mutable`, generic (`auto`) parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from tree_sitter import Node

from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp.ctypes_ import CType
from migrator.cuda.interp.scope import Binding, LValue, Var
from migrator.cuda.interp.values import Val

if TYPE_CHECKING:
    from migrator.cuda.interp.machine import Machine

LAMBDA = CType("lambda", "object")
AUTO = CType("auto", "void")  # a return type the first `return` decides


@dataclass
class Closure:
    node: Node  # the lambda_expression
    scopes: list[dict[str, Binding]]


def make(m: Machine, node: Node, mask: np.ndarray) -> Val:
    """The closure a lambda expression makes, as a value (an index into `m.closures`)."""
    spec = node.child_by_field_name("captures")
    items = [s.strip() for s in m.parsed.text(spec)[1:-1].split(",")] if spec else []
    default, by_value, by_ref = None, [], []
    for item in filter(None, items):
        if item in ("&", "="):
            default = item
        elif item.startswith("&") and item[1:].strip().isidentifier():
            by_ref.append(item[1:].strip())
        elif item.isidentifier() and item != "this":
            by_value.append(item)
        else:
            raise m.unsupported(spec, f"lambda capture {item!r}")
    decl = node.child_by_field_name("declarator")
    if decl is not None and "mutable" in m.parsed.text(decl).split(")")[-1]:
        raise m.unsupported(node, "mutable lambda")
    live = list(m.frame.scopes[1:])  # the maker's scopes (globals come with every frame)
    own: dict[str, Binding] = {}
    for name in by_ref:
        b = m.lookup(name)
        if b is None:
            raise m.error(spec, f"lambda captures unknown name {name!r}")
        own[name] = b
    names = by_value
    if default == "=":  # every name the maker sees, copied now (the body reads what it uses)
        names = [n for s in live for n in s if n not in own]
    for name in names:
        b = m.lookup(name)
        own[name] = Var(b.ctype, b.val, const=True, name=name) if isinstance(b, Var) else b  # type: ignore[assignment]
    scopes = [*live, own] if default == "&" else [own]
    m.closures.append(Closure(node, scopes))
    return Val(LAMBDA, np.int64(len(m.closures) - 1))


def call(m: Machine, f: Val, node: Node, arg_nodes: list[Node], mask: np.ndarray) -> Val:
    """`f(args)` for a closure `f`: arguments evaluated here, the body in its own frame."""
    c = m.closures[int(f.data)]
    decl = c.node.child_by_field_name("declarator")
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    params = [p for p in (plist.named_children if plist is not None else [])
              if p.type in ("parameter_declaration", "optional_parameter_declaration")]  # fmt: skip
    if len(params) != len(arg_nodes):
        raise m.error(node, f"lambda takes {len(params)} arguments, {len(arg_nodes)} given")
    actual: list[Val | LValue] = []
    for p, a in zip(params, arg_nodes, strict=True):
        pdecl = p.child_by_field_name("declarator")
        ptype = p.child_by_field_name("type")
        if ptype is not None and m.parsed.text(ptype) == "auto":
            raise m.unsupported(p, "generic lambda parameter (auto)")
        by_ref = pdecl is not None and pdecl.type == "reference_declarator"
        actual.append(m.lvalue(a, mask) if by_ref else m.ev(a, mask))
    ret = AUTO
    trailing = next((ch for ch in (decl.named_children if decl is not None else [])
                     if ch.type == "trailing_return_type"), None)  # fmt: skip
    if trailing is not None and trailing.named_children:
        ret = m.type_of_descriptor(trailing.named_children[0])
    scope: dict[str, Binding] = {}
    frame = m.push_frame(ret, scope)
    frame.scopes = [m.globals, *c.scopes, scope]
    try:
        for p, a in zip(params, actual, strict=True):
            m._bind_param(p, a, scope, node)
        m.exec(c.node.child_by_field_name("body"), mask)  # type: ignore[arg-type]
        if frame.retval is not None:
            return frame.retval
        if frame.ret_type not in (AUTO, ct.VOID):
            raise m.error(node, "lambda returned no value")
        return Val(ct.VOID, np.int8(0))
    finally:
        m.frames.pop()
