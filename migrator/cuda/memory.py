"""Memory accesses of a kernel body: what is read and written, where, through which pointer.

A mixin of `analysis.BodyAnalyzer`. Pointers resolve to (base array, element offset, vector width)
through aliases, pointer arithmetic, `&x[i]` and `reinterpret_cast`, so every access is attributed
to a kernel parameter or an on-chip array with an index in base elements.
"""

from __future__ import annotations

from tree_sitter import Node

from migrator import diagnostics as diag
from migrator.cuda import poly
from migrator.cuda.bodystate import BodyState
from migrator.cuda.builtins import TYPE_BYTES
from migrator.cuda.decl import callee_name
from migrator.cuda.indexing import Var
from migrator.cuda.ir import Access, IndexExpr
from migrator.cuda.parse import ParsedSource, unparen


class MemoryMixin(BodyState):
    def expr(self, node: Node, kind: str) -> None:
        handler = self._expr.get(node.type)
        if handler is not None:
            handler(node, kind)
            return
        for c in node.named_children:
            self.expr(c, "read")

    def _assignment(self, node: Node, kind: str) -> None:
        op = self.p.text(node.child_by_field_name("operator"))  # type: ignore[arg-type]
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if right is not None:  # (`A = &A[row * N]`: the pointer moves, as at a declaration)
            to_pointer = (
                left is not None
                and unparen(left).type == "identifier"
                and (self._is_pointer_var(self.p.text(unparen(left))))
            )
            self.read_assigned(right, to_pointer)
        if left is None:
            return
        left = unparen(left)  # `(LDST128BITS(c[i])) = v`: macros add parentheses
        if _has_template_call(left):  # `x < a && y > b = ...` cannot be an lvalue: a misparse
            self.facts.diagnostics.append(
                diag.make("AMBIGUOUS_COMPARISON", self.p.span(node), text=self.p.text(node)[:60])
            )
        self.expr(left, "write" if op == "=" else "update")
        style = self._maybe_reduction(node, left, op, right)  # type: ignore[attr-defined]
        if left.type in ("subscript_expression", "pointer_expression"):
            self.record_store(node, left, op, right)  # type: ignore[attr-defined]
        elif left.type == "identifier":
            name = self.p.text(left)
            self.facts.written_names.add(name)
            if self._is_pointer_var(name):
                self.assign_pointer(name, op, right, node)
                return
            accumulating = style is not None and style[1] in ("loop_accumulate", "warp_shuffle")
            if accumulating and right is not None:
                self.note_accumulation(name, style[0], style[1], right, op)  # type: ignore[attr-defined,index]
            self._assign_scalar(name, op, right, node, accumulating)  # type: ignore[attr-defined]

    def read_assigned(self, value: Node, to_pointer: bool) -> None:
        """What a value given to a variable reads. Given to a pointer, an alias of memory
        (`&x[off]`, `table + tok[n] * C`) accesses nothing itself, only its offsets read (the
        address is no escape: accesses through the pointer record the array's elements);
        anything else is read whole."""
        if to_pointer and self.resolve_pointer(value) is not None:  # type: ignore[attr-defined]
            for off in self._alias_offsets(value):  # type: ignore[attr-defined]
                self.expr(off, "read")
        else:
            self.expr(value, "read")

    def _update(self, node: Node, kind: str) -> None:
        arg = node.child_by_field_name("argument")
        if arg is not None:
            self.expr(arg, "update")
            if arg.type == "identifier":
                name = self.p.text(arg)
                self.facts.written_names.add(name)
                op = self.p.text(node.child_by_field_name("operator"))  # type: ignore[arg-type]
                if self._is_pointer_var(name):
                    self.assign_pointer(name, op, None, node)
                else:
                    self._assign_scalar(name, "++", None, node)

    def _is_pointer_var(self, name: str) -> bool:
        var = self.env.lookup(name)
        return var is not None and (
            var.kind == "alias" or (var.is_pointer and var.kind in ("array", "opaque"))
        )

    def assign_pointer(self, name: str, op: str, right: Node | None, node: Node) -> None:
        """`p += k`, `p -= k`, `p++`, `p = q + k`: the pointer moves, and every later access
        through it must see the new offset (dropping it would attribute `inp[c]` after
        `inp += C * row` to element c: a silently wrong index). A move at the pointer's
        declaration depth is a strong update; under a branch or loop the offset becomes
        unknown, so accesses through it are reported as not affine."""
        var = self.env.lookup(name)
        assert var is not None
        strong = self.branch_depth == var.ctx
        if op == "=":
            target = self.resolve_pointer(right) if right is not None else None
            if target is None or target.base is None:
                self.facts.diagnostics.append(
                    diag.make("UNRESOLVED_ALIAS", self.p.span(node), name=name)
                )
                self.env.assign(name, Var("opaque", reason=f"pointer {name} is not resolved",
                                          is_pointer=True, ctx=var.ctx))  # fmt: skip
                return
            if not strong and target.base != var.base:
                self.facts.diagnostics.append(
                    diag.make("UNRESOLVED_ALIAS", self.p.span(node), name=name)
                )
                why = f"pointer {name} is assigned conditionally"
                self.env.assign(name, Var("opaque", reason=why, is_pointer=True, ctx=var.ctx))
                return
            kind = var.kind if var.kind != "opaque" and target.base == var.base else "alias"
            width = target.width if target.width > 1 else var.width
            offset = target.offset if strong else None
            self.env.assign(name, Var(kind, base=target.base, space=target.space, offset=offset,
                                      width=width, elem_type=target.elem_type, is_pointer=True,
                                      deps=target.deps, ctx=var.ctx))  # fmt: skip
            return
        if var.kind == "opaque":
            return
        if op in ("++", "--"):
            step = poly.const(1 if op == "++" else -1)
            deps = frozenset[str]()
        elif op in ("+=", "-=") and right is not None:
            v = self.ev.value(right)
            step = None if v.poly is None else poly.scale(v.poly, 1 if op == "+=" else -1)
            deps = v.deps
        else:
            step, deps = None, frozenset()
        offset = (
            poly.add(var.offset, poly.scale(step, var.width))
            if strong and step is not None and var.offset is not None
            else None
        )
        self.env.assign(name, Var(var.kind, base=var.base, space=var.space, offset=offset,
                                  width=var.width, elem_type=var.elem_type, is_pointer=True,
                                  deps=var.deps | deps, via=var.via, ctx=var.ctx))  # fmt: skip

    def _field(self, node: Node, kind: str) -> None:
        arg = node.child_by_field_name("argument")
        if arg is not None:
            self.expr(arg, kind)

    def _subscript(self, node: Node, kind: str) -> None:
        base, indices = peel_subscripts(node)
        for idx in indices:
            self.expr(idx, "read")
        self._record(node, base, indices, kind)

    def _pointer(self, node: Node, kind: str) -> None:
        op = self.p.text(node.child_by_field_name("operator"))  # type: ignore[arg-type]
        arg = node.child_by_field_name("argument")
        if arg is None:
            return
        if op == "*":
            if arg.type != "identifier" and self.resolve_pointer(arg) is not None:
                # `*reinterpret_cast<const float4*>(&x[i])`: a load through the address, not
                # an escape of it (only the offsets are read)
                for off in self._alias_offsets(arg):
                    self.expr(off, "read")
            elif arg.type != "identifier":
                self.expr(arg, "read")
            self._record(node, arg, [], kind)
        else:  # &x: the address escapes (atomics handle their own first argument)
            self.expr(arg, "address" if kind == "read" else kind)

    def located(self, base: Node, indices: list[Node]) -> tuple[Var, list[IndexExpr]] | None:
        """The array an lvalue/load refers to and its index per dimension (base elements)."""
        target = self.resolve_pointer(base)
        if target is None or target.base is None:
            return None
        if target.space in ("global", None) and self.env.lookup(target.base) is None:
            return None
        if target.offset is None:  # a pointer moved by a non-affine or conditional amount
            why = f"the offset of pointer {self.p.text(base)} into {target.base} is not affine"
            text = self.p.text(base) + "".join(f"[{self.p.text(i)}]" for i in indices)
            return target, [IndexExpr(text=text, affine=False, variant=sorted(target.deps),
                                      reason=why)]  # fmt: skip
        offset = target.offset
        if target.space in ("shared", "local", "constant") and len(indices) > 1:
            exprs = [self.ev.index(i) for i in indices]
        elif indices:
            exprs = [self.ev.index(indices[0], offset=offset, scale=target.width)]
        else:  # *p or *(p + k)
            exprs = [self.ev.make_index(self.p.text(base), offset, None, target.deps)]
        return target, exprs

    def _record(self, node: Node, base: Node, indices: list[Node], kind: str) -> None:
        found = self.located(base, indices)
        if found is None:
            for array in self.choice_aliases.get(self.p.text(base), []):
                ev = self.facts.role_evidence.setdefault(array, set())
                if kind in ("read", "update", "atomic"):
                    ev.add("read")
                if kind in ("write", "update", "atomic"):
                    ev.add("write")
            return
        target, exprs = found
        for e in exprs:
            if not e.affine:
                self.facts.diagnostics.append(
                    diag.make(
                        "NON_AFFINE_INDEX", self.p.span(node), index=e.text, array=target.base
                    )
                )
        self.facts.accesses.append(
            Access(
                array=target.base,
                space=target.space or "global",
                kind=kind,  # type: ignore[arg-type]
                indices=exprs,
                via=target.via,
                vector_width=target.width,
                guards=list(self.guard_stack),
                loops=list(self.loop_stack),
                span=self.p.span(node),
            )
        )

    def resolve_pointer(self, node: Node) -> Var | None:
        """What a pointer-valued expression points into: base array, element offset, width."""
        t = node.type
        if t == "identifier":
            name = self.p.text(node)
            var = self.env.lookup(name)
            if var is None and name in self.tu_shared:
                decl = self.tu_shared[name]
                if all(s.name != name for s in self.facts.shared):
                    self.facts.shared.append(decl)
                return Var("array", base=name, space="shared", elem_type=decl.elem_type, offset={})
            if var is None or var.kind not in ("array", "alias"):
                return None
            via = name if var.kind == "alias" else None
            return Var(
                var.kind,
                base=var.base,
                space=var.space,
                offset=var.offset,
                width=var.width,
                elem_type=var.elem_type,
                deps=var.deps,
                via=via,
            )
        if t == "parenthesized_expression" and node.named_children:
            return self.resolve_pointer(node.named_children[0])
        if t == "binary_expression":
            op = self.p.text(node.child_by_field_name("operator"))  # type: ignore[arg-type]
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if op not in ("+", "-") or left is None or right is None:
                return None
            base = self.resolve_pointer(left)
            off_node = right
            if base is None and op == "+":
                base, off_node = self.resolve_pointer(right), left
            if base is None:
                return None
            v = self.ev.value(off_node)
            if v.poly is None or base.offset is None:
                return Var(
                    base.kind,
                    base=base.base,
                    space=base.space,
                    offset=None,
                    width=base.width,
                    elem_type=base.elem_type,
                    deps=base.deps | v.deps,
                )
            delta = poly.scale(v.poly, base.width * (1 if op == "+" else -1))
            return Var(
                base.kind,
                base=base.base,
                space=base.space,
                offset=poly.add(base.offset, delta),
                width=base.width,
                elem_type=base.elem_type,
                deps=base.deps | v.deps,
                via=base.via,
            )
        if t == "pointer_expression":
            op = self.p.text(node.child_by_field_name("operator"))  # type: ignore[arg-type]
            arg = node.child_by_field_name("argument")
            arg = unparen(arg) if arg is not None else None  # `&(a[idx])`, as macros spell it
            if op == "&" and arg is not None and arg.type == "subscript_expression":
                base = self.resolve_pointer(arg.child_by_field_name("argument"))  # type: ignore[arg-type]
                idx = arg.child_by_field_name("indices")
                if base is None or idx is None or not idx.named_children:
                    return base
                v = self.ev.value(idx.named_children[0])
                off = (
                    poly.add(base.offset, poly.scale(v.poly, base.width))
                    if v.poly is not None and base.offset is not None
                    else None
                )
                return Var(
                    base.kind,
                    base=base.base,
                    space=base.space,
                    offset=off,
                    width=base.width,
                    elem_type=base.elem_type,
                    deps=base.deps | v.deps,
                )
            return None
        if t in ("call_expression", "cast_expression"):
            return self._resolve_cast(node)
        return None

    def _resolve_cast(self, node: Node) -> Var | None:
        if node.type == "cast_expression":
            type_node = node.child_by_field_name("type")
            inner = node.child_by_field_name("value")
        else:
            name, targs = callee_name(self.p, node)
            if name not in ("reinterpret_cast", "static_cast", "const_cast"):
                return None
            type_node = (
                targs.named_children[0] if targs is not None and targs.named_children else None
            )
            args = node.child_by_field_name("arguments")
            inner = args.named_children[0] if args is not None and args.named_children else None
        if inner is None:
            return None
        base = self.resolve_pointer(inner)
        if base is None:
            return None
        new_elem = _type_descriptor_base(self.p, type_node)
        width = _width(new_elem, base.elem_type) if new_elem else 1
        # offsets stay in base elements whatever the view
        return Var(
            base.kind,
            base=base.base,
            space=base.space,
            offset=base.offset,
            width=width,
            elem_type=base.elem_type,
            deps=base.deps,
            via=base.via,
        )


def _width(elem: str | None, base_elem: str | None) -> int:
    if not elem or not base_elem or elem == base_elem:
        return 1
    a, b = TYPE_BYTES.get(elem), TYPE_BYTES.get(base_elem)
    if a and b and a > b and a % b == 0:
        return a // b
    return 1


def _type_descriptor_base(p: ParsedSource, node: Node | None) -> str | None:
    if node is None:
        return None
    t = node.child_by_field_name("type")
    return " ".join(p.text(t).split()) if t is not None else None


def peel_subscripts(node: Node) -> tuple[Node, list[Node]]:
    """``s[i][j]`` → (``s``, [i, j]): the array expression and its indices, outermost first."""
    indices: list[Node] = []
    base = node
    while base.type == "subscript_expression":
        idx = base.child_by_field_name("indices")
        if idx is not None and idx.named_children:
            indices.append(idx.named_children[0])
        base = base.child_by_field_name("argument")  # type: ignore[assignment]
    indices.reverse()
    return base, indices


def subscript_base(node: Node) -> Node:
    while node.type == "subscript_expression":
        node = node.child_by_field_name("argument")  # type: ignore[assignment]
    return node


_CASTS = (b"static_cast", b"reinterpret_cast", b"const_cast", b"dynamic_cast")


def _has_template_call(node: Node) -> bool:
    """A template call inside an lvalue, other than a C++ cast (`out[static_cast<size_t>(i)]`
    is an ordinary index; `x < a && y > b` read as a template is not)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "template_function":
            name = n.child_by_field_name("name")
            if name is None or name.text not in _CASTS:
                return True
        stack.extend(n.named_children)
    return False
