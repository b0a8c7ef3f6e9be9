"""Analysis of one kernel body: accesses, loops, guards, barriers, calls and reductions.

A single walk over the function's syntax tree with a context (scoped variables, enclosing loops
and guards). Statement and expression handlers are dispatched through dicts keyed by tree-sitter
node type; anything not listed is walked generically so no access is missed. Statements and
declarations live here; loops and guards in `control`, memory accesses in `memory`, calls and
reductions in `calls`.
"""

from __future__ import annotations

from collections.abc import Callable

from tree_sitter import Node

from migrator import diagnostics as diag
from migrator.cuda import poly
from migrator.cuda.bodystate import BodyFacts
from migrator.cuda.builtins import HALF_TYPES, TYPE_BYTES, VECTOR_TYPES
from migrator.cuda.calls import CG_SCOPES, CallMixin
from migrator.cuda.control import ControlMixin
from migrator.cuda.decl import (
    Declarator,
    base_type_text,
    callee_name,
    qualifiers,
    unwrap_declarator,
)
from migrator.cuda.exprs import ExprMixin, opaque
from migrator.cuda.indexing import Env, IndexEvaluator, Val, Var
from migrator.cuda.ir import ArrayDecl, IndexVar, Kernel
from migrator.cuda.memory import MemoryMixin, _width
from migrator.cuda.parse import ParsedSource, unparen

__all__ = ["BodyAnalyzer", "BodyFacts", "vector_and_half_types"]


class BodyAnalyzer(ControlMixin, MemoryMixin, CallMixin, ExprMixin):
    """Walks a function body. `device_roles` gives callee parameter roles for propagation."""

    def __init__(
        self,
        parsed: ParsedSource,
        env: Env,
        constants: dict[str, int],
        size_bindings: dict[str, int],
        tu_shared: dict[str, ArrayDecl],
        callees: dict[str, Kernel],
        kernel_name: str,
    ) -> None:
        self.p = parsed
        self.env = env
        self.ev = IndexEvaluator(parsed, env, constants)
        self.size_ev = IndexEvaluator(parsed, env, {**constants, **size_bindings})
        self.size_bindings = size_bindings
        self.tu_shared = tu_shared
        self.callees = callees
        self.kernel_name = kernel_name
        self.facts = BodyFacts()
        self.loop_stack: list[int] = []
        self.loop_depths: list[int] = []  # branch_depth inside each open loop's body
        self.guard_stack: list[int] = []
        self.branch_depth = 0
        self.guard_of_if = {}
        self.pending_acc = {}
        self.local_acc = {}
        self.local_values = {}
        self.stored = {}
        self.choice_aliases = {}
        self._stmt: dict[str, Callable[[Node], None]] = {
            "compound_statement": self._compound,
            "declaration": self._declaration,
            "expression_statement": self._expression_statement,
            "if_statement": self._if,
            "for_statement": self._for,
            "while_statement": self._while,
            "do_statement": self._while,
            "return_statement": self._return,
            "goto_statement": self._goto,
            "labeled_statement": self._labeled,
            "gnu_asm_expression": self._asm,
        }
        self._expr: dict[str, Callable[[Node, str], None]] = {
            "assignment_expression": self._assignment,
            "update_expression": self._update,
            "subscript_expression": self._subscript,
            "pointer_expression": self._pointer,
            "call_expression": self._call,
            "field_expression": self._field,
            "gnu_asm_expression": lambda n, k: self._asm(n),
        }

    # --- entry -------------------------------------------------------------------------
    def run(self, body: Node) -> BodyFacts:
        self._collect_types(body)
        self.stmt(body)
        return self.facts

    def _assigned_names(self, node: Node) -> set[str]:
        names: set[str] = set()
        stack = [node]
        while stack:
            n = stack.pop()
            target = None
            if n.type == "assignment_expression":
                target = n.child_by_field_name("left")
            elif n.type == "update_expression":
                target = n.child_by_field_name("argument")
            if target is not None and target.type == "identifier":
                names.add(self.p.text(target))
            stack.extend(n.named_children)
        return names

    def _assign_scalar(
        self, name: str, op: str, right: Node | None, node: Node, accumulating: bool = False
    ) -> None:
        """Flow-sensitive: an update at the declaration's control depth replaces x's value.

        Under a branch or loop the new value holds on some paths only, so x becomes opaque
        (an accumulator keeps its pre-loop value until `finish_loop` makes it a reduce).
        """
        var = self.env.lookup(name)
        if var is not None and var.kind == "array" and var.space == "shared" and op == "=":
            if right is not None and any(d.name == name and not d.dims for d in self.facts.shared):
                # a `__shared__ float s;` written (by one thread) for the block to read after
                # a barrier: readers see the written value (the broadcast idiom)
                var.expr = self.to_expr(right)
            return
        if var is None or var.kind not in ("value", "opaque", "param"):
            return
        new_expr = self.scalar_value(name, var, op, right)
        val = self._updated_value(name, var, op, right)
        if self.branch_depth != var.ctx:
            why = f"{name} is assigned conditionally" if op == "=" else f"{name} is updated"
            if var.kind == "opaque" and var.reason and "loop" in var.reason:
                why = var.reason
            kept = var.expr if accumulating else opaque(name, why)
            self.env.assign(
                name, Var("opaque", reason=why, deps=var.deps | val.deps, ctx=var.ctx, expr=kept)
            )
            return
        updated = self._value_var(name, val, right if right is not None else node, var.ctx)
        updated.expr = new_expr
        self.env.assign(name, updated)
        if val.poly is not None and val.reason is None and val.deps:
            expr = self.ev.make_index(self.p.text(node), val.poly, None, val.deps)
            self.facts.index_vars.append(IndexVar(name=name, expr=expr, span=self.p.span(node)))

    def _updated_value(self, name: str, var: Var, op: str, right: Node | None) -> Val:
        """The index value after `name op right` (`=`, `+=`, `-=`, `*=`, `++`, `--`)."""
        if op == "=":
            return self.ev.value(right)
        old = Val(var.poly, var.reason, var.deps) if var.kind == "value" else Val(
            None, var.reason or f"{name} is not affine", var.deps)  # fmt: skip
        step = Val(poly.const(1)) if op in ("++", "--") else self.ev.value(right)
        deps = old.deps | step.deps
        if old.poly is None or step.poly is None:
            return Val(None, old.reason or step.reason, deps)
        combine = {"+=": poly.add, "++": poly.add, "-=": poly.sub, "--": poly.sub,
                   "*=": poly.mul}.get(op)  # fmt: skip
        if combine is None:
            return Val(None, f"{name} {op} ...", deps)
        return Val(combine(old.poly, step.poly), old.reason or step.reason, deps)

    def _value_var(self, name: str, val, init: Node, ctx: int) -> Var:  # type: ignore[no-untyped-def]
        if val.poly is None or val.reason is not None:
            why = f"{name} = {self.p.text(init)} ({val.reason or 'not affine'})"
            return Var("opaque", reason=why, deps=val.deps, ctx=ctx)
        return Var("value", poly=val.poly, deps=val.deps, ctx=ctx)

    def _collect_types(self, body: Node) -> None:
        stack = [body]
        while stack:
            n = stack.pop()
            if n.type in ("type_identifier", "primitive_type"):
                self.facts.types_used.add(self.p.text(n))
            stack.extend(n.named_children)

    # --- statements ----------------------------------------------------------------------
    def stmt(self, node: Node) -> None:
        handler = self._stmt.get(node.type)
        if handler is not None:
            handler(node)
        elif node.type.startswith("preproc") or node.type in (
            "comment",
            "break_statement",
            "continue_statement",
            ";",
        ):
            return
        else:
            for c in node.named_children:
                if c.type.endswith("_statement") or c.type == "declaration":
                    self.stmt(c)
                else:
                    self.expr(c, "read")

    def _compound(self, node: Node) -> None:
        self.env.push()
        pushed = 0
        for child in node.named_children:
            self.stmt(child)
            gid = self._early_exit_guard(child)
            if gid is not None:
                self.guard_stack.append(gid)
                pushed += 1
        del self.guard_stack[len(self.guard_stack) - pushed :]
        self.env.pop()

    def _expression_statement(self, node: Node) -> None:
        for c in node.named_children:
            self.expr(c, "read")

    def _return(self, node: Node) -> None:
        self._expression_statement(node)
        self.record_return(node)

    def _goto(self, node: Node) -> None:
        self.facts.diagnostics.append(diag.make("GOTO", self.p.span(node)))

    def _labeled(self, node: Node) -> None:
        for c in node.named_children:
            if c.type != "statement_identifier":
                self.stmt(c)

    def _asm(self, node: Node) -> None:
        self.facts.diagnostics.append(diag.make("INLINE_ASM", self.p.span(node)))

    def _choice_alias(self, name: str, init: Node) -> None:
        """`q = c ? a : b`: an access through q may be an access of a or of b, so both get
        the role it implies (the index algebra cannot follow q)."""
        init = unparen(init)
        if init.type != "conditional_expression":
            return
        bases = []
        for field in ("consequence", "alternative"):
            branch = init.child_by_field_name(field)
            target = self.resolve_pointer(branch) if branch is not None else None
            if target is not None and target.base is not None:
                bases.append(target.base)
        if bases:
            self.choice_aliases[name] = bases

    def _alias_offsets(self, node: Node) -> list[Node]:
        """The offset expressions of a pointer alias's initialiser (not its base pointer)."""
        if node.type == "parenthesized_expression" and node.named_children:
            return self._alias_offsets(node.named_children[-1])
        if node.type == "cast_expression":
            value = node.child_by_field_name("value")
            return self._alias_offsets(value) if value is not None else []
        if node.type == "call_expression":  # reinterpret_cast<T*>(p + k)
            args = node.child_by_field_name("arguments")
            inner = args.named_children if args is not None else []
            return self._alias_offsets(inner[0]) if len(inner) == 1 else []
        if node.type == "binary_expression":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is None or right is None:
                return []
            if self.resolve_pointer(left) is not None:
                return [*self._alias_offsets(left), right]
            return [left, *self._alias_offsets(right)]
        if node.type == "pointer_expression":
            arg = node.child_by_field_name("argument")
            return self._alias_offsets(arg) if arg is not None else []
        if node.type == "subscript_expression":
            base = node.child_by_field_name("argument")
            idx = node.child_by_field_name("indices")
            offs = list(idx.named_children) if idx is not None else []
            return [*(self._alias_offsets(base) if base is not None else []), *offs]
        return []

    def _declaration(self, node: Node) -> None:
        quals = qualifiers(self.p, node)
        elem_type = base_type_text(self.p, node)
        for child in node.children_by_field_name("declarator"):
            d = unwrap_declarator(self.p, child)
            if d is None:
                continue
            if d.init is not None:
                self.read_assigned(d.init, bool(d.pointer_depth))
            if d.ctor_args is not None:
                self.expr(d.ctor_args, "read")
            if "__shared__" in quals:
                self._shared_decl(node, d, elem_type, "extern" in quals)
            elif d.array_dims:
                decl = self._array_decl(node, d, elem_type, "local")
                self.facts.local_arrays.append(decl)
                self.env.define(
                    d.name, Var("array", base=d.name, space="local", elem_type=elem_type, offset={})
                )
            elif d.pointer_depth:
                alias = self._alias(d, elem_type)
                alias.ctx = self.branch_depth
                self.env.define(d.name, alias)
            else:
                self._scalar_decl(node, d, elem_type, bool({"const", "constexpr"} & quals))

    def _scalar_decl(self, node: Node, d: Declarator, elem_type: str, is_const: bool) -> None:
        if d.init is not None and d.init.type == "call_expression":
            name, targs = callee_name(self.p, d.init)
            if name in CG_SCOPES:
                # a tile's size from tiled_partition<W>(...) (the index algebra needs W)
                size = (
                    self.ev.const_int(targs.named_children[0])
                    if targs is not None and targs.named_children
                    else None
                )
                self.env.define(d.name, Var("cg", cg_scope=CG_SCOPES[name], width=size or 1))
                return
        if d.init is None:
            self.env.define(
                d.name,
                Var("opaque", reason=f"{d.name} is uninitialised", ctx=self.branch_depth,
                    expr=opaque(d.name, "declared without a value")),
            )  # fmt: skip
            return
        if is_const:  # a local constant a shared array's size may use
            known = self.size_ev.const_int(d.init)
            if known is not None:
                self.size_ev.local_constants[d.name] = known
        val = self.ev.value(d.init)
        var = self._value_var(d.name, val, d.init, self.branch_depth)
        var.expr = self.to_expr(d.init)
        self.env.define(d.name, var)
        if var.kind == "value" and val.deps:
            expr = self.ev.make_index(self.p.text(d.init), val.poly, None, val.deps)
            self.facts.index_vars.append(IndexVar(name=d.name, expr=expr, span=self.p.span(node)))

    def _shared_decl(self, node: Node, d: Declarator, elem_type: str, extern: bool) -> None:
        decl = self._array_decl(node, d, elem_type, "shared", dynamic=extern)
        self.facts.shared.append(decl)
        self.env.define(
            d.name, Var("array", base=d.name, space="shared", elem_type=elem_type, offset={})
        )

    def _array_decl(
        self, node: Node, d: Declarator, elem_type: str, space: str, dynamic: bool = False
    ) -> ArrayDecl:
        dims: list[int | None] = []
        texts: list[str] = []
        used: dict[str, int] = {}
        span = self.p.span(node)
        for size_node in d.array_dims:
            if size_node is None:
                dims.append(None)
                texts.append("")
                if not dynamic:
                    self.facts.diagnostics.append(
                        diag.make("UNKNOWN_SHARED_SIZE", span, name=d.name, detail="no size given")
                    )
                continue
            texts.append(self.p.text(size_node))
            value = self.size_ev.const_int(size_node)
            dims.append(value)
            used.update(
                {k: v for k, v in self.size_bindings.items() if k in self.p.text(size_node)}
            )
            if value is None and space == "shared":
                self.facts.diagnostics.append(
                    diag.make(
                        "UNKNOWN_SHARED_SIZE",
                        span,
                        name=d.name,
                        detail=f"'{self.p.text(size_node)}' is not a compile-time constant",
                    )
                )
        if dynamic:
            self.facts.diagnostics.append(diag.make("DYNAMIC_SHARED", span, name=d.name))
        nbytes = None
        if dims and all(x is not None for x in dims) and elem_type in TYPE_BYTES:
            nbytes = TYPE_BYTES[elem_type]
            for x in dims:
                nbytes *= x  # type: ignore[operator]
        return ArrayDecl(
            name=d.name,
            elem_type=elem_type,
            space=space,
            dims=dims,
            dims_text=texts,  # type: ignore[arg-type]
            dynamic=dynamic,
            bytes=nbytes,
            bindings=used,
            has_initializer=d.init is not None,
            span=span,
        )

    def _alias(self, d: Declarator, elem_type: str) -> Var:
        if d.init is None:
            return Var("opaque", reason=f"pointer {d.name} has no initialiser", is_pointer=True)
        target = self.resolve_pointer(d.init)
        if target is None:
            self._choice_alias(d.name, d.init)
            self.facts.diagnostics.append(
                diag.make("UNRESOLVED_ALIAS", self.p.span(d.init), name=d.name)
            )
            return Var("opaque", reason=f"pointer {d.name} is not resolved", is_pointer=True)
        base = self.env.lookup(target.base or "")
        base_elem = (base.elem_type if base else None) or target.elem_type
        # a cast already gave the view's width; otherwise the declared type does
        width = target.width if target.width > 1 else _width(elem_type, base_elem)
        return Var(
            "alias",
            base=target.base,
            space=target.space,
            offset=target.offset,
            width=width,
            elem_type=base_elem,
            is_pointer=True,
            deps=target.deps,
        )


def vector_and_half_types(types_used: set[str]) -> tuple[list[str], list[str]]:
    return sorted(types_used & VECTOR_TYPES), sorted(types_used & HALF_TYPES)
