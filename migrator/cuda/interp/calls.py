"""Calls: built-ins (math, conversions, warp ops, atomics, barriers) and `__device__` functions.

A `__device__` function is inlined per call: its body runs in a new frame under the caller's
lane mask, by-value parameters are fresh variables, reference parameters bind the caller's
lvalue, and the return value is merged per lane from every `return` reached. Templates bind
their parameters from explicit arguments (`block_sum<BLOCK>(...)`) or, for `typename T`, by
deduction from the argument types.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from tree_sitter import Node

from migrator.cuda.interp import coop, lambdas
from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp.atomics import ATOMICS
from migrator.cuda.interp.builtins import MATH
from migrator.cuda.interp.half import HALF_BUILTINS
from migrator.cuda.interp.program import Function
from migrator.cuda.interp.scope import Binding, FuncAlias, LValue, MemLV, TypeName, Var
from migrator.cuda.interp.structs import OWNER
from migrator.cuda.interp.values import Val, convert, scalar
from migrator.cuda.interp.warp import WARP

if TYPE_CHECKING:
    from migrator.cuda.interp.machine import Machine

Builtin = Callable[["Machine", list[Val], np.ndarray, Node], Val]
CASTS = ("static_cast", "reinterpret_cast", "const_cast")


class CallMixin:
    """Call evaluation; mixed into `Machine`."""

    def init_mixins(self: Machine) -> None:
        self.init_exprs()
        self.init_stmts()
        self.builtins: dict[str, Builtin] = {
            **MATH,
            **HALF_BUILTINS,
            **WARP,
            **ATOMICS,
            "__syncthreads": _syncthreads,
            "__syncwarp": _nothing,
            "__threadfence": _nothing,
            "__threadfence_block": _nothing,
            "__syncthreads_count": _sync_reduce("count"),
            "__syncthreads_and": _sync_reduce("and"),
            "__syncthreads_or": _sync_reduce("or"),
            "__ldg": _ldg,
            # cache-hinted loads and stores: the hint changes caching, not the value
            **dict.fromkeys(("__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv"), _ldg),
            **dict.fromkeys(("__stcg", "__stcs", "__stwb", "__stwt"), _st_hint),
            "printf": _printf,
            "assert": _assert,
            "__trap": _trap,
        }

    def call(self: Machine, node: Node, mask: np.ndarray) -> Val:
        fnode = node.child_by_field_name("function")
        args_node = node.child_by_field_name("arguments")
        assert fnode is not None and args_node is not None
        arg_nodes = [a for a in args_node.named_children if a.type != "comment"]
        targs: Node | None = None
        if fnode.type == "field_expression":  # `g.sync()`: a member of a cooperative group
            return self._member_call(fnode, arg_nodes, mask, node)
        qualified = fnode.type == "qualified_identifier"
        if qualified:  # `x128::zeros()`: a static member function of a struct
            owner = self.scope_type(fnode.child_by_field_name("scope"))
            member = fnode.child_by_field_name("name")
            if owner is not None and member is not None:
                return self.call_static(owner, self.parsed.text(member), arg_nodes, mask, node)
        if qualified:  # `cg::reduce(...)`, `cg::tiled_partition<32>(...)`
            inner = fnode.child_by_field_name("name")
            while inner is not None and inner.type == "qualified_identifier":
                inner = inner.child_by_field_name("name")
            fnode = inner or fnode
        templated = None  # `Packed128<T>(bits)`: a struct template's constructor
        if fnode.type == "template_function":
            targs = fnode.child_by_field_name("arguments")
            name_node = fnode.child_by_field_name("name")
            if name_node is not None and self.parsed.text(name_node) in (
                self.program.struct_templates
            ):
                templated = fnode
            fnode = name_node or fnode
        name = self.parsed.text(fnode)
        if not qualified and fnode.type == "identifier":
            alias = self.lookup(name)
            if isinstance(alias, FuncAlias):  # a function passed as a template argument
                name = alias.target
            elif isinstance(alias, Var) and alias.ctype is lambdas.LAMBDA:
                return lambdas.call(self, alias.val, node, arg_nodes, mask)
        if qualified and name in coop.FREE:
            return coop.FREE[name](self, node, targs, arg_nodes, mask)
        if name in CASTS:
            assert targs is not None
            t = self.type_of_descriptor(targs.named_children[0])
            return self.cast(self.ev(arg_nodes[0], mask), t, node)
        if name == "memcpy":
            return self._memcpy(arg_nodes, mask, node)
        ftype = (
            self.instantiate(templated)
            if templated is not None
            else self._functional_cast_type(fnode, qualified, targs)
        )
        if ftype is not None and ftype.kind == "struct":  # `S(a, b)`: a constructor
            built = self.construct(ftype, arg_nodes, mask, node)
            if built is not None:
                return built
        if ftype is not None:  # `float(x)`, `T(0)`, `floatX(v)`, `T()`
            if not arg_nodes:
                return self._zero(ftype)
            if len(arg_nodes) == 1 and ftype.kind not in ("vec", "struct"):
                return self.cast(self.ev(arg_nodes[0], mask), ftype, node)
            raise self.unsupported(node, f"constructor call {self.parsed.text(node)!r}")
        if not qualified and targs is None:
            owner = self.lookup(OWNER)  # inside a member: another member by its bare name
            if isinstance(owner, TypeName) and self.member_function(
                owner.ctype, name, len(arg_nodes)
            ):
                return self.call_static(owner.ctype, name, arg_nodes, mask, node)
            functor = self._functor_call(name, node, arg_nodes, mask)
            if functor is not None:
                return functor
        device = [
            f
            for f in self.program.functions.get(name, [])
            if not f.is_kernel and ("__device__" in f.qualifiers)
        ]
        if device:
            same = [f for f in device if len(f.params) == len(arg_nodes)]
            if len(same) > 1:  # overloads (`f(float)`, `f(half)`): chosen by argument types
                values = [self.ev(a, mask) for a in arg_nodes]
                fn = max(same, key=lambda f: self._overload_score(f, values))
                if not any(_is_reference(p) for p in fn.params):
                    return self.call_device(fn, node, targs, arg_nodes, mask, values=values)
                return self.call_device(fn, node, targs, arg_nodes, mask)
            fn = same[0] if same else device[0]
            return self.call_device(fn, node, targs, arg_nodes, mask)
        builtin = self.builtins.get(name)
        if builtin is not None:
            args = [self.ev(a, mask) for a in arg_nodes]
            return builtin(self, args, mask, node)
        if name in coop.FREE:  # `using namespace cooperative_groups;`
            return coop.FREE[name](self, node, targs, arg_nodes, mask)
        if name in self.program.functions:
            raise self.error(node, f"{name} is not a __device__ function")
        raise self.unsupported(node, f"call of unknown function {name!r}")

    def _functional_cast_type(
        self: Machine, fnode: Node, qualified: bool, targs: Node | None
    ) -> ct.CType | None:
        """The type a call names, when the 'function' is a type (C++ functional cast)."""
        if qualified or targs is not None:
            return None
        if fnode.type == "parenthesized_expression" and len(fnode.named_children) == 1:
            fnode = fnode.named_children[0]  # `(floatX)(v)`: a C cast spelled like a call
        if fnode.type in ("primitive_type", "sized_type_specifier"):
            return self.base_type(fnode)
        if fnode.type not in ("identifier", "type_identifier"):
            return None
        name = self.parsed.text(fnode)
        b = self.lookup(name)
        if isinstance(b, TypeName):
            return b.ctype
        if b is None and name in self.types and name not in self.builtins:
            t = self.types[name]
            return t if t.kind not in ("struct", "object") else None
        return None

    def _memcpy(self: Machine, arg_nodes: list[Node], mask: np.ndarray, node: Node) -> Val:
        """`memcpy(dst, src, n)`: dst takes src's n bytes. Each side is a local value (`&v`) or
        memory through a pointer (a local or shared array, a global buffer), read or written as
        whole elements of the pointer's type (how real code bit-casts packed values)."""
        from migrator.cuda.interp import memory
        from migrator.cuda.interp.values import from_bytes, to_bytes

        if len(arg_nodes) != 3:
            raise self.error(node, "memcpy takes (dst, src, bytes)")
        n = int(np.asarray(self.ev(arg_nodes[2], mask).data))
        lanes_n = self.geo.n

        def side(a: Node, write: bool) -> tuple[LValue | Val | None, Val | None]:
            """(a local lvalue or value, None) or (None, a pointer into memory)."""
            inner = self.address_operand(a)
            if inner is not None and not write and inner.type in ("identifier", "field_expression"):
                return self.ev(inner, mask), None  # a value: it may be a const member's field
            if inner is not None:
                lv = self.lvalue(inner, mask)
                if not isinstance(lv, MemLV):
                    return lv, None
                return None, Val(ct.ptr(lv.ctype), lv.ptr.data, buf=lv.ptr.buf)
            p = self.decay(self.ev(a, mask))
            if not p.ctype.is_pointer_like or p.buf is None:
                raise self.unsupported(node, f"memcpy through {self.parsed.text(a)!r}")
            return None, p

        def elements(p: Val) -> tuple[ct.CType, int, int]:
            """Element type, count, and offset step (in buffer elements) of one side."""
            assert p.buf is not None
            e = p.ctype.elem
            e = e if e is not None and e.kind != "void" else p.buf.elem
            e = e.storage if e.kind == "struct" else e
            if e.size == 0 or n % e.size or e.size % p.buf.elem.size:
                raise self.unsupported(node, f"memcpy of {n} bytes as {e} elements of "
                                       f"a {p.buf.elem} buffer")  # fmt: skip
            return e, n // e.size, e.size // p.buf.elem.size

        dst_lv, dst_p = side(arg_nodes[0], write=True)
        src_lv, src_p = side(arg_nodes[1], write=False)
        if self.options.trace:  # traced values have no bytes: regroup traced elements instead
            if src_lv is not None:
                src = src_lv if isinstance(src_lv, Val) else src_lv.load(self, mask, node)
                leaves = _leaves(src)
            else:
                assert src_p is not None
                e, count, step = elements(src_p)
                leaves = [memory.load(self, Val(ct.ptr(e), src_p.data + k * step, buf=src_p.buf),
                                      e, mask, node) for k in range(count)]  # fmt: skip
            if dst_lv is not None:
                assert not isinstance(dst_lv, Val)
                shape = _leaf_types(dst_lv.ctype)
            else:
                assert dst_p is not None
                e, count, step = elements(dst_p)
                shape = [e] * count
            vals = _regroup(leaves, shape, lanes_n, n)
            if dst_lv is not None:
                dst_lv.store(self, _assemble(dst_lv.ctype, vals), mask, node)
            else:
                for k, v in enumerate(vals):
                    memory.store(self, Val(ct.ptr(e), dst_p.data + k * step, buf=dst_p.buf), v,
                                 mask, node)  # fmt: skip
            return Val(ct.VOID, np.int8(0))
        if src_lv is not None:
            src = src_lv if isinstance(src_lv, Val) else src_lv.load(self, mask, node)
            if src.ctype.size != n:
                raise self.unsupported(node, f"memcpy of {n} bytes from a {src.ctype}")
            bits = to_bytes(src, lanes_n)
        else:
            assert src_p is not None
            e, count, step = elements(src_p)
            parts = [memory.load(self, Val(ct.ptr(e), src_p.data + k * step, buf=src_p.buf),
                                 e, mask, node) for k in range(count)]  # fmt: skip
            bits = np.concatenate([to_bytes(v, lanes_n) for v in parts], axis=1)
        if dst_lv is not None:
            assert not isinstance(dst_lv, Val)
            if dst_lv.ctype.size != n:
                raise self.unsupported(node, f"memcpy of {n} bytes into a {dst_lv.ctype}")
            dst_lv.store(self, from_bytes(bits, dst_lv.ctype), mask, node)
        else:
            assert dst_p is not None
            e, count, step = elements(dst_p)
            for k in range(count):
                v = from_bytes(bits[:, k * e.size : (k + 1) * e.size], e)
                memory.store(self, Val(ct.ptr(e), dst_p.data + k * step, buf=dst_p.buf), v,
                             mask, node)  # fmt: skip
        return Val(ct.VOID, np.int8(0))

    def _member_call(
        self: Machine, fnode: Node, arg_nodes: list[Node], mask: np.ndarray, node: Node
    ) -> Val:
        recv = fnode.child_by_field_name("argument")
        field = fnode.child_by_field_name("field")
        assert recv is not None and field is not None
        obj = self.ev(recv, mask)
        if obj.ctype.kind == "struct":
            return self.call_member(obj, self.parsed.text(field), arg_nodes, mask, node)
        if obj.ctype.kind != "object":
            raise self.unsupported(node, f"member function call on {obj.ctype}")
        args = [self.ev(a, mask) for a in arg_nodes]
        return coop.method(self, obj, self.parsed.text(field), args, mask, node)

    # --- device functions ------------------------------------------------------------------
    def _functor_call(
        self: Machine, name: str, node: Node, arg_nodes: list[Node], mask: np.ndarray
    ) -> Val | None:
        """`MaxOp()` (a value of a user struct) and `op(a, b)` (its `operator()`): the functors
        CUB-style reductions are written with."""
        if name in self.program.structs and not arg_nodes and self.lookup(name) is None:
            return self._zero(self.struct_type(name, self.program.structs[name]))
        b = self.lookup(name)
        if not isinstance(b, Var) or b.ctype.kind != "struct":
            return None
        body = self.program.structs.get(b.ctype.name)
        method = _call_operator(self, body) if body is not None else None
        if method is None:
            raise self.unsupported(node, f"{b.ctype.name} has no operator() to call")
        return self.call_device(method, node, None, arg_nodes, mask, this=b.val)

    def call_device(
        self: Machine,
        fn: Function,
        node: Node,
        targs: Node | None,
        arg_nodes: list[Node],
        mask: np.ndarray,
        this: Val | None = None,
        names: dict[str, Binding] | None = None,
        values: list[Val] | None = None,
    ) -> Val:
        """Call a `__device__` function; `this`: the object whose member function it is (its
        fields are read-only names in the body, as in a `const` member); `names`: more names
        the body sees (a struct's template parameters, statics, a constructor's fields)."""
        params = fn.params
        if values is not None:  # already evaluated (an operator cg::reduce applies)
            if len(values) != len(params):
                raise self.error(node, f"{fn.name} takes {len(params)} arguments")
            return self._run_device(fn, node, targs, list(values), mask, this, names)
        defaults = [p.child_by_field_name("default_value") for p in params[len(arg_nodes) :]]
        if len(params) < len(arg_nodes) or None in defaults:
            raise self.error(
                node, f"{fn.name} takes {len(params)} arguments, {len(arg_nodes)} given"
            )
        arg_nodes = [*arg_nodes, *defaults]  # type: ignore[list-item]  # omitted: defaults
        # arguments are evaluated in the caller's frame; references bind the caller's lvalue
        actual: list[Val | LValue] = []
        for p, a in zip(params, arg_nodes, strict=True):
            decl = p.child_by_field_name("declarator")
            if a.type == "initializer_list":  # `f({x, 1.0f})`: built as the parameter's type
                actual.append(self._brace_argument(p, a, fn, mask))
            elif decl is not None and decl.type == "reference_declarator":
                actual.append(self.lvalue(a, mask))
            else:
                actual.append(self.ev(a, mask))
        return self._run_device(fn, node, targs, actual, mask, this, names)

    def _run_device(
        self: Machine,
        fn: Function,
        node: Node,
        targs: Node | None,
        actual: list[Val | LValue],
        mask: np.ndarray,
        this: Val | None,
        names: dict[str, Binding] | None,
    ) -> Val:
        params = fn.params
        explicit = self._template_values(targs, fn) if targs is not None else []
        scope: dict[str, Binding] = dict(names or {})
        if this is not None and this.comps is not None:
            for (fname, ftype), value in zip(this.ctype.fields, this.comps, strict=True):
                scope[fname] = Var(ftype, value, const=True, name=fname)
        frame = self.push_frame(ct.VOID, scope)
        try:
            if fn.template is not None:
                self.bind_template(fn.template, explicit, scope, params, actual)
            for p, a in zip(params, actual, strict=True):
                self._bind_param(p, a, scope, node)
            rnode = fn.node.child_by_field_name("type")  # none: a constructor
            frame.ret_type = self.base_type(rnode) if rnode is not None else ct.VOID
            decl = fn.node.child_by_field_name("declarator")
            if decl is not None and decl.type == "pointer_declarator":
                frame.ret_type = ct.ptr(frame.ret_type)
            self.exec(fn.body, mask)
            if frame.ret_type.kind != "void" and frame.retval is None:
                raise self.error(node, f"{fn.name} returned no value")
            return frame.retval if frame.retval is not None else Val(ct.VOID, np.int8(0))
        finally:
            self.frames.pop()

    def _brace_argument(self: Machine, p: Node, a: Node, fn: Function, mask: np.ndarray) -> Val:
        """A `{x[i], 1.0f}` argument, built in the caller's frame as the parameter's type
        (a type the callee's template decides is not known here: said, not guessed)."""
        tnode, decl = p.child_by_field_name("type"), p.child_by_field_name("declarator")
        tparams = fn.template.named_children if fn.template is not None else []
        tname = self.parsed.text(tnode) if tnode is not None else ""
        if (
            tnode is None
            or decl is None
            or any(self.parsed.text(c).split()[-1] == tname for c in tparams)
        ):
            raise self.unsupported(a, "brace-initialised argument of a template-typed parameter")
        _, t, _, _ = self.declarator_type(self.base_type(tnode), decl)
        if t.kind not in ("struct", "vec"):
            raise self.unsupported(a, f"brace-initialised argument of type {t}")
        return self._local(a, t, a, mask, False).val

    def _overload_score(self: Machine, fn: Function, values: list[Val]) -> int:
        """How well argument values fit a candidate's parameter types: the same type scores 2,
        the same kind (both floating, both integer, both pointers) 1, template parameters 1."""
        score = 0
        for p, v in zip(fn.params, values, strict=False):
            tnode, decl = p.child_by_field_name("type"), p.child_by_field_name("declarator")
            if tnode is None or decl is None:
                continue
            try:
                _, t, _, _ = self.declarator_type(self.base_type(tnode), decl)
            except Exception:  # a template parameter or an unknown type: neutral
                score += 1
                continue
            a = v.ctype
            if t.name == a.name or (t.kind in ("ptr", "array") and a.kind in ("ptr", "array")
                                    and t.elem is not None and a.elem is not None
                                    and t.elem.name == a.elem.name):  # fmt: skip
                score += 2
            elif t.kind == a.kind:
                score += 1
        return score

    def _bind_param(
        self: Machine,
        p: Node,
        a: Val | LValue,
        scope: dict[str, Binding],
        node: Node,
    ) -> None:
        tnode = p.child_by_field_name("type")
        decl = p.child_by_field_name("declarator")
        assert tnode is not None
        if decl is None:
            return
        name, t, is_ref, _ = self.declarator_type(self.base_type(tnode), decl)
        if t.kind == "array":  # `float a[]` parameter is a pointer
            assert t.elem is not None
            t = ct.ptr(t.elem)
        if is_ref:
            scope[name] = a  # type: ignore[assignment]
        else:
            assert isinstance(a, Val)
            scope[name] = Var(t, self.convert_to(a, t, node))

    def _template_values(self: Machine, targs: Node, fn: Function) -> list[Any]:
        """Explicit template arguments as values (ints) or types, by the callee's params."""
        out: list[Any] = []
        kinds = [c.type for c in fn.template.named_children] if fn.template else []
        for i, a in enumerate(targs.named_children):
            is_type = i < len(kinds) and "type_parameter" in kinds[i]
            fname = self.parsed.text(a).lstrip("&").strip()
            bound = self.lookup(fname) if not is_type else None
            if isinstance(bound, FuncAlias):  # passed on: `blockReduce<op>(v, ...)` inside
                out.append(bound)
            elif (
                not is_type
                and bound is None
                and any("__device__" in f.qualifiers for f in self.program.functions.get(fname, []))
            ):
                out.append(FuncAlias(fname))
            elif is_type:
                out.append(
                    self.type_of_descriptor(a) if a.type == "type_descriptor" else self.base_type(a)
                )
            elif a.type == "type_descriptor":  # `f<BLOCK>`: a value spelled like a type name
                tname = a.child_by_field_name("type")
                assert tname is not None
                out.append(self.ev(tname, self.geo.full))
            else:
                out.append(self.ev(a, self.geo.full))
        return out

    def bind_template(
        self: Machine,
        tparams: Node,
        values: list[Any],
        scope: dict[str, Binding],
        params: list[Node] | None = None,
        actual: list[Val | LValue] | None = None,
    ) -> None:
        """Bind template parameters to explicit values, then deduce the rest from arguments."""
        decls = [
            c
            for c in tparams.named_children
            if c.type
            in (
                "parameter_declaration",
                "type_parameter_declaration",
                "optional_parameter_declaration",
                "optional_type_parameter_declaration",
            )
        ]
        for i, d in enumerate(decls):
            is_type = "type_parameter" in d.type
            name_node = (
                d.named_children[-1]
                if is_type and d.type == "type_parameter_declaration"
                else d.child_by_field_name("name") or d.child_by_field_name("declarator")
            )
            if name_node is None:
                raise self.unsupported(d, "unnamed template parameter")
            name = self.parsed.text(name_node)
            # explicit argument, else deduction from the call's arguments, else the default
            deduced = (
                self._deduce(name, params, actual)
                if is_type and i >= len(values) and params is not None and actual is not None
                else None
            )
            if i < len(values):
                v = values[i]
            elif deduced is not None:
                v = deduced
            elif "optional" in d.type:
                dflt = d.child_by_field_name("default_type") or d.child_by_field_name(
                    "default_value"
                )
                assert dflt is not None
                if not is_type:
                    v = self.ev(dflt, self.geo.full)
                elif dflt.type == "type_descriptor":
                    v = self.type_of_descriptor(dflt)
                else:
                    v = self.base_type(dflt)
            else:
                raise self.error(tparams, f"no value for template parameter {name!r}")
            if is_type:
                t = v if isinstance(v, ct.CType) else self._type_named(str(v))
                if t is None and params is not None and actual is not None:
                    # `reduce0<T><<<...>>>(d_in, ...)` inside a host template: T is the host's
                    # parameter, and the kernel's own arguments say what it is
                    t = self._deduce(name, params, actual)
                if t is None:
                    raise self.error(tparams, f"unknown type {v!r} for template parameter {name}")
                scope[name] = TypeName(t)
            elif isinstance(v, FuncAlias):
                scope[name] = v
            else:
                tnode = d.child_by_field_name("type")
                assert tnode is not None
                t = self.base_type(tnode)
                val = convert(v, t) if isinstance(v, Val) else self._template_literal(t, v, d)
                scope[name] = Var(t, val, const=True)

    def _type_named(self: Machine, name: str) -> ct.CType | None:
        """A type given by name from outside (a spec's template arguments): a built-in or
        header type, a typedef of the file (`floatX`), or a struct."""
        name = " ".join(name.split())
        if name in self.types:
            return self.types[name]
        b = self.lookup(name)
        if isinstance(b, TypeName):
            return b.ctype
        if name in self.program.structs:
            return self.struct_type(name, self.program.structs[name])
        words = name.split()
        if words and all(w in ("unsigned", "signed", "long", "short", "char", "int")
                         for w in words):  # fmt: skip
            return ct.sized(words)
        return None

    def _template_literal(self: Machine, t: ct.CType, v: Any, node: Node) -> Val:
        """A non-type template value given from outside (spec, CLI): a Python number or bool,
        or the text of a C literal. `"false"` is false and `"0"` zero; anything else that is
        not a literal (a name, an expression) is refused, never guessed."""
        if isinstance(v, str):
            text = v.strip()
            if text in ("true", "false"):
                v = text == "true"
            else:
                try:
                    _, v = ct.literal_type(text)
                except (ValueError, KeyError):
                    v = _constant_expression(text)
                    if v is None:
                        raise self.error(
                            node,
                            f"template value {text!r} for a {t} parameter is not a constant "
                            "(a literal or an expression of literals)",
                        ) from None
        if t.kind == "bool":
            return Val(ct.BOOL, np.bool_(bool(v)))
        return convert(scalar(ct.DOUBLE if isinstance(v, float) else ct.LLONG, v), t)

    def _deduce(self: Machine, name: str, params: list[Node], actual: list[Any]) -> ct.CType | None:
        for p, a in zip(params, actual, strict=True):
            tnode = p.child_by_field_name("type")
            if tnode is None or self.parsed.text(tnode) != name:
                continue
            t = a.ctype
            decl = p.child_by_field_name("declarator")
            while decl is not None and decl.type == "pointer_declarator" and t.elem is not None:
                t = t.elem
                decl = decl.child_by_field_name("declarator")
            return t
        return None


def _constant_expression(text: str) -> int | float | None:
    """`1024 / (8)`, `(64) / 4`: integer arithmetic of literals, as C computes it."""
    from migrator.contract import SpecError, eval_expr

    clean = re.sub(r"(?<=[0-9a-fA-Fx])[uUlL]+\b", "", text)
    if not re.fullmatch(r"[\d\s()+\-*/%x.a-fA-F]+", clean) or (
        "-" in clean and ("/" in clean or "%" in clean)  # C truncates, Python floors
    ):
        return None
    try:
        v = eval_expr(clean, {})
    except (SpecError, TypeError, ValueError):
        return None
    return v


def _syncthreads(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    """Block barrier: every live (not exited) thread of a block must arrive (synccheck)."""
    kernel_frame = m.frames[0]
    live = ~kernel_frame.ret
    g = m.geo
    if np.array_equal(mask, live):  # every live thread of every block is here
        _reset_races(m)
        return Val(ct.VOID, np.int8(0))
    arrived = np.bincount(g.blk[mask], minlength=g.n_blocks)
    alive = np.bincount(g.blk[live], minlength=g.n_blocks)
    bad = (arrived > 0) & (arrived != alive)
    if bad.any():
        from migrator.cuda.interp.findings import BarrierError

        b = int(np.flatnonzero(bad)[0])
        missing = live & ~mask & (g.blk == b)
        lane = int(np.flatnonzero(missing)[0])
        c = g.coord(lane)
        raise BarrierError(
            f"__syncthreads() reached by {int(arrived[b])} of {int(alive[b])} live threads of "
            f"block {c.block} (thread {c.thread} did not arrive; {int(bad.sum())} block(s) "
            "diverge)",
            m.span(node),
            m.kernel,
        )
    _reset_races(m)
    return Val(ct.VOID, np.int8(0))


def _reset_races(m: Machine) -> None:
    for buf in [*m.shared.values(), *([m.dynamic_shared] if m.dynamic_shared else [])]:
        if buf.race is not None:
            buf.race.reset()


def _sync_reduce(kind: str) -> Builtin:
    """`__syncthreads_count/and/or(pred)`: a barrier that also reduces `pred` over the block."""

    def call(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
        _syncthreads(m, [], mask, node)
        g = m.geo
        pred = np.broadcast_to(np.asarray(args[0].data != 0), (g.n,)) & mask
        count = np.bincount(g.blk[pred], minlength=g.n_blocks)[g.blk]
        arrived = np.bincount(g.blk[mask], minlength=g.n_blocks)[g.blk]
        table = {"count": count, "and": count == arrived, "or": count > 0}
        return Val(ct.INT, table[kind].astype(np.int32))

    return call


def _ldg(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    """`__ldg(p)`: a read-only-cache load; semantically `*p`."""
    from migrator.cuda.interp import memory

    p = m.decay(args[0])
    if not p.ctype.is_pointer_like or p.ctype.elem is None:
        raise m.error(node, "__ldg of a non-pointer")
    return memory.load(m, p, p.ctype.elem, mask, node)


def _st_hint(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    """`__stcs(p, v)` and the other cache-hinted stores: semantically `*p = v`."""
    from migrator.cuda.interp import memory

    p = m.decay(args[0])
    if not p.ctype.is_pointer_like or p.ctype.elem is None:
        raise m.error(node, "cache-hinted store through a non-pointer")
    memory.store(m, p, m.convert_to(args[1], p.ctype.elem, node), mask, node)
    return Val(ct.VOID, np.int8(0))


def _printf(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    """Device printf is dropped (its output is not part of a kernel's result); returns 0."""
    return Val(ct.INT, np.int32(0))


def _assert(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    """Device `assert(cond)`: fails the launch, like a device-side assertion trap."""
    failed = mask & ~np.broadcast_to(np.asarray(args[0].data != 0), (m.geo.n,))
    if failed.any():
        c = m.geo.coord(int(np.flatnonzero(failed)[0]))
        raise m.error(node, f"device assertion failed in {c} ({int(failed.sum())} threads)")
    return Val(ct.VOID, np.int8(0))


def _trap(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    """`__trap()`: the launch aborts where any lane reaches it."""
    if mask.any():
        c = m.geo.coord(int(np.flatnonzero(mask)[0]))
        raise m.error(node, f"__trap() reached in {c} ({int(mask.sum())} threads)")
    return Val(ct.VOID, np.int8(0))


def _nothing(m: Machine, args: list[Val], mask: np.ndarray, node: Node) -> Val:
    """Lockstep execution already orders a warp; fences need no action on one host."""
    return Val(ct.VOID, np.int8(0))


def _call_operator(m: Machine, body: Node) -> Function | None:
    """The `operator()` member of a struct body, as a callable function."""
    for child in body.named_children:
        if child.type != "function_definition":
            continue
        decl = child.child_by_field_name("declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        name = decl.child_by_field_name("declarator") if decl is not None else None
        if name is not None and m.parsed.text(name).replace(" ", "") == "operator()":
            return Function("operator()", child, None, frozenset({"__device__"}))
    return None


def _is_reference(p: Node) -> bool:
    decl = p.child_by_field_name("declarator")
    return decl is not None and decl.type == "reference_declarator"


# --- memcpy of traced values: the same bytes as groups of traced elements -------------------


def _leaves(v: Val) -> list[Val]:
    """A value's scalar parts in memory order (vector components, struct fields)."""
    if v.comps is not None:
        return [leaf for c in v.comps for leaf in _leaves(c)]
    return [v]


def _leaf_types(t: ct.CType) -> list[ct.CType]:
    if t.kind == "vec" and t.elem is not None:
        return [t.elem] * t.count
    if t.kind == "struct":
        return [leaf for _, f in t.fields for leaf in _leaf_types(f)]
    if t.kind == "array" and t.elem is not None:
        return _leaf_types(t.elem) * t.count
    return [t]


def _assemble(t: ct.CType, vals: list[Val]) -> Val:
    if t.kind == "vec":
        return Val(t, comps=tuple(vals))
    if t.kind == "struct":
        comps, k = [], 0
        for _, f in t.fields:
            m = len(_leaf_types(f))
            comps.append(_assemble(f, vals[k : k + m]))
            k += m
        return Val(t, comps=tuple(comps))
    if len(vals) != 1:
        from migrator.cuda.interp.traced import TraceEscape

        raise TraceEscape(f"memcpy of traced values into a {t}")
    return Val(t, vals[0].data)


def _regroup(leaves: list[Val], shape: list[ct.CType], lanes_n: int, n: int) -> list[Val]:
    """`leaves` (per-lane traced values; a `Packed` group stands for several elements) as
    values of the types `shape`: both sides are cut into elements of the narrowest width, and
    each destination value takes its share (one element, or a `Packed` group of them)."""
    from migrator.cuda.interp.traced import Packed, Sym, TraceEscape, unpack

    if sum(t.size for t in shape) != n or sum(v.ctype.size for v in leaves) != n:
        raise TraceEscape(f"memcpy of {n} bytes between traced values of other sizes")
    unit = min([t.size for t in shape] + [v.ctype.size for v in leaves])
    atoms: list[list[Any]] = []  # per element of `unit` bytes: its value in each lane
    for v in leaves:
        k = v.ctype.size // unit
        data = np.broadcast_to(np.asarray(v.data, dtype=object), (lanes_n,))
        if k == 1:  # an opaque one-element group (floats read as ints) is its element
            atoms.append([x.items[0] if isinstance(x, Packed) and len(x.items) == 1 else x
                          for x in data])  # fmt: skip
            continue
        split: list[list[Any]] = [[] for _ in range(k)]
        for x in data:
            # a group splits into its elements; a plain number (the poison of a lane that
            # loaded nothing, a zero fill) stands for each; a traced value cannot be split
            for j in range(k):
                split[j].append(unpack(x, j, k))
        atoms += split
    out: list[Val] = []
    at = 0
    for t in shape:
        k = t.size // unit
        group = atoms[at : at + k]
        at += k
        data = np.empty(lanes_n, dtype=object)
        opaque = k == 1 and t.dtype != np.dtype(object)  # traced floats as int bits
        for lane in range(lanes_n):
            if k > 1 or opaque and isinstance(group[0][lane], Sym):
                data[lane] = Packed(tuple(g[lane] for g in group))
            else:
                data[lane] = group[0][lane]
        out.append(Val(t, data))
    return out
