"""Structs as real code writes them: templates, static members, member functions, constructors.

`template <class E> struct Packed128 { static constexpr int size = 16 / sizeof(E);
E payload[size]; ... };` — the 128-bit packed vector of LLM training code — is the shape this
covers: a template struct is instantiated per argument list (`Packed128<__nv_bfloat16>`), its
`static constexpr` members are values of the instantiation (`x128::size`, `p.size`), array
fields are values like vectors, constructors run with the object's fields as the body's
mutable locals, other member functions see them read-only (as a `const` member; one that
writes its fields raises), and `operator[]` whose body returns an element of an array field is
that element as an lvalue. Static member functions are called through the type
(`x128::zeros()`). Inside a template's members the bare template name is the instantiation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from tree_sitter import Node

from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp.ctypes_ import CType
from migrator.cuda.interp.program import Function, function_declarator
from migrator.cuda.interp.scope import Binding, CompLV, LValue, TypeName, Var, ViewLV
from migrator.cuda.interp.values import Val

if TYPE_CHECKING:
    from migrator.cuda.interp.machine import Machine


OWNER = "<struct>"  # a name no C++ identifier can be: the struct whose member is running


@dataclass
class StructInfo:
    """What an instantiated struct type needs beyond its fields."""

    name: str
    body: Node
    bindings: dict[str, Binding] = field(default_factory=dict)  # template parameters
    statics: dict[str, Val] = field(default_factory=dict)
    type: CType | None = None  # set once the fields are known
    # member functions by (name, arity): found once, called in every loop iteration
    members: dict[tuple[str, int], Function | None] = field(default_factory=dict)

    def names(self) -> dict[str, Binding]:
        """Names a member body sees besides its fields: template parameters, statics, and
        the struct itself (`OWNER`) for calls of other members by their bare name."""
        out = dict(self.bindings)
        out.update({k: Var(v.ctype, v, const=True, name=k) for k, v in self.statics.items()})
        if self.type is not None:
            out[OWNER] = TypeName(self.type)
        return out


def _declarator_name(m: Machine, fn_node: Node) -> str | None:
    decl = function_declarator(fn_node)
    name = decl.child_by_field_name("declarator") if decl is not None else None
    return m.parsed.text(name).replace(" ", "") if name is not None else None


class StructMixin:
    """Struct types, instantiation and members; mixed into `Machine`."""

    struct_info: dict[str, StructInfo]

    def struct_type(
        self: Machine, name: str, body: Node, bindings: dict[str, Binding] | None = None
    ) -> CType:
        """A struct's type from its field list; statics are evaluated once per type."""
        hit = self.types.get(name)
        if hit is not None and hit.kind == "struct":
            return hit
        known = self.struct_info.get(name)
        if known is not None and known.type is not None:  # built by an earlier batch
            self.types[name] = known.type
            return known.type
        info = StructInfo(name, body, dict(bindings or {}))
        self.struct_info[name] = info
        fields: list[tuple[str, CType]] = []
        scope = info.names()
        self.push_frame(ct.VOID, scope)
        try:
            for fd in body.named_children:
                if fd.type != "field_declaration":
                    continue
                static = any(
                    c.type == "storage_class_specifier" and self.parsed.text(c) == "static"
                    for c in fd.children
                )
                tnode = fd.child_by_field_name("type")
                assert tnode is not None
                base = self.base_type(tnode)
                for d in fd.children_by_field_name("declarator"):
                    fname, t = self._field_declarator(base, d)
                    if static:
                        value = fd.child_by_field_name("default_value")
                        if value is None:
                            raise self.unsupported(fd, f"static member {fname!r} without a value")
                        v = self.convert_to(self.ev(value, self.geo.full), t, value)
                        info.statics[fname] = v
                        scope[fname] = Var(t, v, const=True, name=fname)
                    else:
                        fields.append((fname, t))
        finally:
            self.frames.pop()
        st = CType(name, "struct", fields=tuple(fields))
        self.types[name] = st
        info.type = st
        return st

    def _field_declarator(self: Machine, base: CType, d: Node) -> tuple[str, CType]:
        t = base
        while d.type in ("pointer_declarator", "array_declarator"):
            inner = d.child_by_field_name("declarator")
            assert inner is not None
            if d.type == "pointer_declarator":
                t = ct.ptr(t)
            else:  # an array field is a value of `n` elements, like a vector
                size = d.child_by_field_name("size")
                if size is None or t.kind not in ("int", "float", "bool"):
                    raise self.unsupported(d, f"array field {self.parsed.text(d)!r}")
                t = ct.vec(t, int(self.const_int(size)))
            d = inner
        if d.type != "field_identifier":
            raise self.unsupported(d, f"struct field {self.parsed.text(d)!r}")
        return self.parsed.text(d), t

    def instantiate(self: Machine, node: Node) -> CType | None:
        """`Packed128<floatX>`: the instantiation of a struct template, or None when `node`
        does not name one."""
        name_node = node.child_by_field_name("name")
        args = node.child_by_field_name("arguments")
        if name_node is None or args is None:
            return None
        name = self.parsed.text(name_node)
        tmpl = self.program.struct_templates.get(name)
        if tmpl is None:
            return None
        tparams, body = tmpl
        kinds = [c.type for c in tparams.named_children]
        values: list[Any] = []
        for i, a in enumerate(args.named_children):
            if i < len(kinds) and "type_parameter" in kinds[i]:
                values.append(
                    self.type_of_descriptor(a) if a.type == "type_descriptor" else self.base_type(a)
                )
            else:
                values.append(self.ev(a, self.geo.full))
        scope: dict[str, Binding] = {}
        self.bind_template(tparams, values, scope)
        key = f"{name}<" + ", ".join(_label(scope[k]) for k in scope) + ">"
        hit = self.types.get(key)
        if hit is not None:
            return hit
        known = self.struct_info.get(key)
        if known is not None and known.type is not None:
            self.types[key] = known.type
            return known.type
        scope[name] = TypeName(CType(key, "struct"))  # placeholder while the fields are read
        st = self.struct_type(key, body, scope)
        self.struct_info[key].bindings[name] = TypeName(st)  # the injected class name
        return st

    def scope_type(self: Machine, scope: Node | None) -> CType | None:
        """The struct a `T::` prefix names (`x128::size`, `Packed128<float>::zeros()`), or
        None when it names something else (a namespace)."""
        if scope is None:
            return None
        if scope.type == "template_type":
            return self.instantiate(scope)
        name = self.parsed.text(scope)
        b = self.frame.lookup(name) if self.frames else None
        if isinstance(b, TypeName):
            return b.ctype if b.ctype.kind == "struct" else None
        if name in self.program.structs:
            return self.struct_type(name, self.program.structs[name])
        t = self.types.get(name)
        return t if t is not None and t.kind == "struct" else None

    def _e_qualified(self: Machine, node: Node, mask: np.ndarray) -> Val:
        """`x128::size`: a static member of a struct."""
        t = self.scope_type(node.child_by_field_name("scope"))
        name = node.child_by_field_name("name")
        v = self.static_value(t, self.parsed.text(name)) if t and name is not None else None
        if v is None:
            raise self.unsupported(node, f"expression {node.type} ({self.parsed.text(node)!r})")
        return v

    # --- members -------------------------------------------------------------------------------
    def member_function(self: Machine, t: CType, name: str, arity: int) -> Function | None:
        info = self.struct_info.get(t.name)
        if info is None:
            return None
        key = (name, arity)
        if key not in info.members:
            info.members[key] = self._member_function(info, name, arity)
        return info.members[key]

    def _member_function(self: Machine, info: StructInfo, name: str, arity: int) -> Function | None:
        found = [
            c
            for c in info.body.named_children
            if c.type == "function_definition" and _declarator_name(self, c) == name
        ]
        for c in found:
            fn = Function(name, c, None, frozenset({"__device__"}))
            if c.child_by_field_name("body") is not None and len(fn.params) == arity:
                return fn
        return None

    def static_value(self: Machine, t: CType, name: str) -> Val | None:
        info = self.struct_info.get(t.name)
        return info.statics.get(name) if info is not None else None

    def call_member(
        self: Machine, obj: Val, name: str, arg_nodes: list[Node], mask: np.ndarray, node: Node
    ) -> Val:
        """`obj.f(args)`: a member function, the object's fields read-only in its body."""
        fn = self.member_function(obj.ctype, name, len(arg_nodes))
        if fn is None:
            raise self.unsupported(node, f"{obj.ctype.name} has no member function {name}()")
        info = self.struct_info[obj.ctype.name]
        return self.call_device(fn, node, None, arg_nodes, mask, this=obj, names=info.names())

    def call_static(
        self: Machine, t: CType, name: str, arg_nodes: list[Node], mask: np.ndarray, node: Node
    ) -> Val:
        """`T::f(args)`: a static member function of struct type T."""
        fn = self.member_function(t, name, len(arg_nodes))
        if fn is None:
            raise self.unsupported(node, f"{t.name} has no static member function {name}()")
        info = self.struct_info[t.name]
        return self.call_device(fn, node, None, arg_nodes, mask, names=info.names())

    def construct(
        self: Machine, t: CType, arg_nodes: list[Node], mask: np.ndarray, node: Node
    ) -> Val | None:
        """`S{a}` / `S(a)` with a user constructor: run it with the fields as mutable locals.
        None when S has no constructor of that arity (aggregate initialisation applies)."""
        info = self.struct_info.get(t.name)
        if info is None:
            return None
        short = t.name.split("<")[0]
        fn = self.member_function(t, short, len(arg_nodes))
        if fn is None:
            return None
        fields = {
            f: Var(ft, self.uninit_value(ft), name=f, init=np.zeros(self.geo.n, dtype=bool))
            for f, ft in t.fields
        }
        self.call_device(fn, node, None, arg_nodes, mask, names={**info.names(), **fields})
        return Val(t, comps=tuple(fields[f].val for f, _ in t.fields))

    def convert_struct(self: Machine, v: Val, to: CType, node: Node) -> Val | None:
        """`T* s = SharedMemory<T>();`: a user conversion operator (`operator T*()`) of the
        struct, run with the object's fields read-only; None when it has none for `to`."""
        info = self.struct_info.get(v.ctype.name)
        if info is None:
            return None
        for c in info.body.named_children:
            cast = c.child_by_field_name("declarator") if c.type == "function_definition" else None
            body = c.child_by_field_name("body")
            if cast is None or cast.type != "operator_cast" or body is None:
                continue
            names = info.names()
            self.push_frame(ct.VOID, names)
            try:
                tnode = cast.child_by_field_name("type")
                target = self.base_type(tnode) if tnode is not None else None
                decl = cast.child_by_field_name("declarator")
                if target is not None and decl is not None and "pointer" in decl.type:
                    target = ct.ptr(target)
            finally:
                self.frames.pop()
            if (
                target is None
                or target.kind != to.kind
                or (to.elem is not None and target.elem != to.elem)
            ):
                continue
            if any(c2.type not in ("declaration", "return_statement", "comment")
                   for c2 in body.named_children):  # fmt: skip
                raise self.unsupported(node, f"{v.ctype.name}'s conversion to {to} (not pure)")
            if v.comps is not None:
                for (f, ft), fv in zip(v.ctype.fields, v.comps, strict=True):
                    names[f] = Var(ft, fv, const=True, name=f)
            frame = self.push_frame(target, names)
            try:
                self.exec(body, self.geo.full)  # a pure body: every lane computes the same
                if frame.retval is None:
                    raise self.error(node, f"{v.ctype.name}'s conversion returned no value")
                return frame.retval
            finally:
                self.frames.pop()
        return None

    def element_lvalue(self: Machine, base: LValue, index: Val, node: Node) -> LValue | None:
        """`a[i]` where `a` is a local array-valued field or a struct whose `operator[]`
        returns an element of one of its array fields; None for anything else."""
        t = base.ctype
        if t.kind == "vec" and t.elem is not None:
            return ViewLV(base, t.elem, index)
        if t.kind != "struct":
            return None
        fn = self.member_function(t, "operator[]", 1)
        if fn is None:
            raise self.unsupported(node, f"{t.name}[...] without an operator[]")
        stmts = [c for c in fn.body.named_children if c.type != "comment"]
        ret = stmts[0] if len(stmts) == 1 and stmts[0].type == "return_statement" else None
        expr = ret.named_children[0] if ret is not None and ret.named_children else None
        arr = expr.child_by_field_name("argument") if expr is not None else None
        if expr is None or expr.type != "subscript_expression" or arr is None:
            raise self.unsupported(node, f"{t.name}::operator[] other than `return field[i];`")
        k = t.field_index(self.parsed.text(arr))
        if k is None or t.fields[k][1].kind != "vec":
            raise self.unsupported(node, f"{t.name}::operator[] returns no array field")
        ftype = t.fields[k][1]
        assert ftype.elem is not None
        return ViewLV(CompLV(base, k, ftype), ftype.elem, index)


def _label(b: Binding) -> str:
    if isinstance(b, TypeName):
        return b.ctype.name
    if isinstance(b, Var):
        return str(np.asarray(b.val.data).item()) if b.val.comps is None else "?"
    return "?"
