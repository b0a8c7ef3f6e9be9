"""Analysis of one kernel body: accesses, loops, guards, barriers, calls and reductions.

A single walk over the function's syntax tree with a context (scoped variables, enclosing loops
and guards). Statement and expression handlers are dispatched through dicts keyed by tree-sitter
node type; anything not listed is walked generically so no access is missed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tree_sitter import Node

from migrator import diagnostics as diag
from migrator.cuda import poly
from migrator.cuda.builtins import (
    ATOMICS,
    BLOCK_SYMBOLS,
    HALF_TYPES,
    THREAD_SYMBOLS,
    TYPE_BYTES,
    VECTOR_TYPES,
    WARP_INTRINSICS,
    CallKind,
    call_kind,
)
from migrator.cuda.decl import (
    Declarator,
    base_type_text,
    callee_name,
    qualifiers,
    unwrap_declarator,
)
from migrator.cuda.indexing import Env, IndexEvaluator, Var
from migrator.cuda.ir import (
    Access,
    ArrayDecl,
    Barrier,
    BoundCheck,
    Call,
    Guard,
    IndexExpr,
    IndexVar,
    Kernel,
    Loop,
    Reduction,
)
from migrator.cuda.parse import ParsedSource

_COMPOUND_OPS = {"+=": "sum", "-=": "sum", "*=": "prod", "&=": "and", "|=": "or", "^=": "xor"}
_MAXMIN = {"fmaxf": "max", "fmax": "max", "max": "max", "fminf": "min", "fmin": "min", "min": "min"}
_ATOMIC_OP = {"atomicAdd": "sum", "atomicSub": "sum", "atomicMax": "max", "atomicMin": "min"}
_CG_SCOPES = {"this_thread_block": "block", "this_grid": "grid", "tiled_partition": "warp",
              "coalesced_threads": "warp", "this_multi_grid": "grid"}  # fmt: skip


@dataclass
class BodyFacts:
    """What the walk collected; `frontend` turns it into a `Kernel`."""

    shared: list[ArrayDecl] = field(default_factory=list)
    local_arrays: list[ArrayDecl] = field(default_factory=list)
    index_vars: list[IndexVar] = field(default_factory=list)
    accesses: list[Access] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    guards: list[Guard] = field(default_factory=list)
    barriers: list[Barrier] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    reductions: list[Reduction] = field(default_factory=list)
    types_used: set[str] = field(default_factory=set)
    diagnostics: list[diag.Diagnostic] = field(default_factory=list)
    # extra role evidence from calls into device functions: param -> {"read", "write"}
    role_evidence: dict[str, set[str]] = field(default_factory=dict)
    written_names: set[str] = field(default_factory=set)  # identifiers assigned (for refs)


class BodyAnalyzer:
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
        self.guard_stack: list[int] = []
        self.branch_depth = 0  # loops and if-branches entered; decides strong vs weak updates
        self._stmt: dict[str, Callable[[Node], None]] = {
            "compound_statement": self._compound,
            "declaration": self._declaration,
            "expression_statement": self._expression_statement,
            "if_statement": self._if,
            "for_statement": self._for,
            "while_statement": self._while,
            "do_statement": self._while,
            "return_statement": self._expression_statement,
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

    def _enter_loop(self, node: Node, skip: str | None = None) -> None:
        """Locals assigned anywhere in a loop hold different values per iteration: opaque."""
        for name in self._assigned_names(node) - {skip}:
            var = self.env.lookup(name)
            if var is not None and var.kind in ("value", "opaque"):
                self.env.assign(
                    name,
                    Var(
                        "opaque", reason=f"{name} changes inside a loop", deps=var.deps, ctx=var.ctx
                    ),
                )

    def _assign_scalar(self, name: str, op: str, right: Node | None, node: Node) -> None:
        """Flow-sensitive: `x = e` at the declaration's control depth replaces x's value."""
        var = self.env.lookup(name)
        if var is None or var.kind not in ("value", "opaque"):
            return
        val = self.ev.value(right) if right is not None else None
        deps = var.deps | (val.deps if val is not None else frozenset())
        if op != "=" or val is None or self.branch_depth != var.ctx:
            why = f"{name} is updated" if op != "=" else f"{name} is assigned conditionally"
            if var.kind == "opaque" and var.reason and "loop" in var.reason:
                why = var.reason
            self.env.assign(name, Var("opaque", reason=why, deps=deps, ctx=var.ctx))
            return
        self.env.assign(name, self._value_var(name, val, right, var.ctx))  # type: ignore[arg-type]
        if val.poly is not None and val.reason is None and val.deps:
            expr = self.ev.make_index(self.p.text(right), val.poly, None, val.deps)  # type: ignore[arg-type]
            self.facts.index_vars.append(IndexVar(name=name, expr=expr, span=self.p.span(node)))

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

    def _early_exit_guard(self, node: Node) -> int | None:
        if node.type != "if_statement" or node.child_by_field_name("alternative") is not None:
            return None
        cons = node.child_by_field_name("consequence")
        if cons is not None and cons.type == "compound_statement" and cons.named_child_count == 1:
            cons = cons.named_children[0]
        if cons is None or cons.type != "return_statement":
            return None
        guard = self._guard_by_span.get(node.id)
        return guard

    def _expression_statement(self, node: Node) -> None:
        for c in node.named_children:
            self.expr(c, "read")

    def _goto(self, node: Node) -> None:
        self.facts.diagnostics.append(diag.make("GOTO", self.p.span(node)))

    def _labeled(self, node: Node) -> None:
        for c in node.named_children:
            if c.type != "statement_identifier":
                self.stmt(c)

    def _asm(self, node: Node) -> None:
        self.facts.diagnostics.append(diag.make("INLINE_ASM", self.p.span(node)))

    def _declaration(self, node: Node) -> None:
        quals = qualifiers(self.p, node)
        elem_type = base_type_text(self.p, node)
        for child in node.children_by_field_name("declarator"):
            d = unwrap_declarator(self.p, child)
            if d is None:
                continue
            if d.init is not None and not (d.pointer_depth and self.resolve_pointer(d.init)):
                self.expr(d.init, "read")  # an alias initialiser (`&x[off]`) accesses nothing
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
                self.env.define(d.name, self._alias(d, elem_type))
            else:
                self._scalar_decl(node, d, elem_type, "const" in quals)

    def _scalar_decl(self, node: Node, d: Declarator, elem_type: str, is_const: bool) -> None:
        if d.init is not None and d.init.type == "call_expression":
            name, _ = callee_name(self.p, d.init)
            if name in _CG_SCOPES:
                self.env.define(d.name, Var("cg", cg_scope=_CG_SCOPES[name]))
                return
        if d.init is None:
            self.env.define(
                d.name, Var("opaque", reason=f"{d.name} is uninitialised", ctx=self.branch_depth)
            )
            return
        val = self.ev.value(d.init)
        var = self._value_var(d.name, val, d.init, self.branch_depth)
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

    # --- loops and guards -------------------------------------------------------------------
    def _for(self, node: Node) -> None:
        self.env.push()
        init = node.child_by_field_name("initializer")
        var = None
        start_node = None
        if init is not None and init.type == "declaration":
            for child in init.children_by_field_name("declarator"):
                d = unwrap_declarator(self.p, child)
                if d is not None:
                    var, start_node = d.name, d.init
        elif init is not None and init.type == "assignment_expression":
            left = init.child_by_field_name("left")
            if left is not None and left.type == "identifier":
                var, start_node = self.p.text(left), init.child_by_field_name("right")
        if start_node is not None:
            self.expr(start_node, "read")
        start = self.ev.index(start_node) if start_node is not None else None
        if var is not None:
            deps = self.ev.value(start_node).deps if start_node is not None else frozenset()
            self.env.define(var, Var("loopvar", deps=deps | {var}))
        self._enter_loop(node, skip=var)
        cond = node.child_by_field_name("condition")
        update = node.child_by_field_name("update")
        cmp_op, bound = self._loop_bound(cond, var)
        step, kind_hint = self._loop_step(update, var)
        loop = Loop(
            id=len(self.facts.loops),
            var=var,
            start=start,
            bound=bound,
            cmp=cmp_op,
            step=step,
            kind=self._loop_kind(start, bound, step, kind_hint),
            parent=self.loop_stack[-1] if self.loop_stack else None,
            unroll=_has_unroll_pragma(node),
            span=self.p.span(node),
        )
        self.facts.loops.append(loop)
        self.loop_stack.append(loop.id)
        self.branch_depth += 1
        for part in (cond, update):
            if part is not None:
                self.expr(part, "read")
        body = node.child_by_field_name("body")
        if body is not None:
            self.stmt(body)
        self.branch_depth -= 1
        self.loop_stack.pop()
        self.env.pop()

    def _loop_bound(
        self, cond: Node | None, var: str | None
    ) -> tuple[str | None, IndexExpr | None]:
        if cond is None or cond.type != "binary_expression" or var is None:
            return None, None
        left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
        op = self.p.text(cond.child_by_field_name("operator"))  # type: ignore[arg-type]
        if left is not None and self.p.text(left) == var and right is not None:
            return op, self.ev.index(right)
        flip = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
        if right is not None and self.p.text(right) == var and left is not None:
            return flip.get(op, op), self.ev.index(left)
        return op, None

    def _loop_step(self, update: Node | None, var: str | None) -> tuple[IndexExpr | None, str]:
        if update is None or var is None:
            return None, ""
        if update.type == "update_expression":
            op = self.p.text(update.child_by_field_name("operator"))  # type: ignore[arg-type]
            return self.ev.make_index(
                op, poly.const(1 if op == "++" else -1), None, frozenset()
            ), ""
        if update.type == "assignment_expression":
            op = self.p.text(update.child_by_field_name("operator"))  # type: ignore[arg-type]
            right = update.child_by_field_name("right")
            if right is None:
                return None, ""
            k = self.ev.const_int(right)
            if (op == ">>=" and k == 1) or (op == "/=" and k == 2):
                return self.ev.index(right), "halving"
            if (op == "<<=" and k == 1) or (op == "*=" and k == 2):
                return self.ev.index(right), "doubling"
            if op == "+=":
                return self.ev.index(right), ""
            if op == "-=":
                v = self.ev.value(right)
                neg = poly.neg(v.poly) if v.poly is not None else None
                return self.ev.make_index(self.p.text(update), neg, v.reason, v.deps), ""
            if op == "=" and right.type == "binary_expression":
                lhs = right.child_by_field_name("left")
                if lhs is not None and self.p.text(lhs) == var:
                    return self.ev.index(right.child_by_field_name("right")), ""  # type: ignore[arg-type]
        return None, ""

    @staticmethod
    def _loop_kind(
        start: IndexExpr | None, bound: IndexExpr | None, step: IndexExpr | None, hint: str
    ) -> str:
        if hint:
            return hint
        start_syms = set(start.variant) if start is not None else set()
        step_p = step.as_poly() if step is not None else {}
        if any(
            len(m) == 2 and m[0].startswith("blockDim") and m[1].startswith("gridDim")
            for m in step_p
        ):
            return "grid_stride"
        thread_start = any("threadIdx" in s for s in start_syms)
        block_start = any("blockIdx" in s for s in start_syms)
        uniform_step = step is not None and step.affine and not step.variant
        if thread_start and not block_start and uniform_step and step_p != {(): 1}:
            return "block_stride"
        dependent = any(
            "threadIdx" in s or "blockIdx" in s
            for s in start_syms | set(bound.variant if bound is not None else [])
        )
        return "thread_dependent" if dependent else "counted"

    def _while(self, node: Node) -> None:
        loop = Loop(
            id=len(self.facts.loops),
            var=None,
            kind="while",
            parent=self.loop_stack[-1] if self.loop_stack else None,
            unroll=_has_unroll_pragma(node),
            span=self.p.span(node),
        )
        self.facts.loops.append(loop)
        self._enter_loop(node)
        self.loop_stack.append(loop.id)
        self.branch_depth += 1
        cond = node.child_by_field_name("condition")
        if cond is not None:
            self.expr(cond, "read")
        body = node.child_by_field_name("body")
        if body is not None:
            self.stmt(body)
        self.branch_depth -= 1
        self.loop_stack.pop()

    _guard_by_span: dict[int, int]

    def _if(self, node: Node) -> None:
        if not hasattr(self, "_guard_by_span"):
            self._guard_by_span = {}
        cond_clause = node.child_by_field_name("condition")
        cond = cond_clause.child_by_field_name("value") if cond_clause is not None else None
        if cond is None and cond_clause is not None and cond_clause.named_children:
            cond = cond_clause.named_children[-1]
        if cond is not None:
            self.expr(cond, "read")
        guard = self._make_guard(node, cond)
        self.facts.guards.append(guard)
        self._guard_by_span[node.id] = guard.id
        self.guard_stack.append(guard.id)
        self.branch_depth += 1
        for part in ("consequence", "alternative"):
            child = node.child_by_field_name(part)
            if child is not None:
                if child.type == "else_clause":
                    for c in child.named_children:
                        self.stmt(c)
                else:
                    self.stmt(child)
        self.branch_depth -= 1
        self.guard_stack.pop()

    def _make_guard(self, node: Node, cond: Node | None) -> Guard:
        text = self.p.text(cond) if cond is not None else ""
        deps = self.ev.deps(cond) if cond is not None else frozenset()
        thread_dep = bool(set(deps) & THREAD_SYMBOLS) or any(
            (self.env.lookup(s) or Var("value")).kind == "loopvar"
            and bool((self.env.lookup(s) or Var("value")).deps & THREAD_SYMBOLS)
            for s in deps
        )
        checks: list[BoundCheck] = []
        kinds: set[str] = set()
        for conj in _conjuncts(cond):
            check, kind = self._classify_comparison(conj)
            kinds.add(kind)
            if check is not None:
                checks.append(check)
        if not deps:
            kind = "other"
        elif kinds == {"bounds"}:
            kind = "bounds"
        elif kinds <= {"bounds", "thread_select"} and "thread_select" in kinds:
            kind = "thread_select"
        else:
            kind = "other"
        return Guard(
            id=len(self.facts.guards),
            condition=text,
            kind=kind,  # type: ignore[arg-type]
            thread_dependent=thread_dep,
            depends_on=sorted(deps),
            checks=checks,
            early_exit=self._is_early_exit(node),
            span=self.p.span(node),
        )

    def _is_early_exit(self, node: Node) -> bool:
        if node.child_by_field_name("alternative") is not None:
            return False
        cons = node.child_by_field_name("consequence")
        if cons is not None and cons.type == "compound_statement" and cons.named_child_count == 1:
            cons = cons.named_children[0]
        return cons is not None and cons.type == "return_statement"

    def _classify_comparison(self, node: Node) -> tuple[BoundCheck | None, str]:
        if node.type != "binary_expression":
            return None, "other"
        op = self.p.text(node.child_by_field_name("operator"))  # type: ignore[arg-type]
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None:
            return None, "other"
        tb = THREAD_SYMBOLS | BLOCK_SYMBOLS
        ld, rd = self.ev.deps(left) & tb, self.ev.deps(right) & tb
        if ld and not rd:
            idx_node, lim_node, rel = left, right, op
        elif rd and not ld:
            flip = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}
            idx_node, lim_node, rel = right, left, flip.get(op, op)
        else:
            return None, "other"
        index, limit = self.ev.index(idx_node), self.ev.index(lim_node)
        check = BoundCheck(index=index, op=rel, limit=limit)
        if rel in ("==", "!="):
            return check, "thread_select"
        if rel not in ("<", "<=", ">", ">="):
            return None, "other"
        lim_syms = set(poly.symbols(limit.as_poly())) if limit.affine else set()
        loopish = any((self.env.lookup(s) or Var("value")).kind == "loopvar" for s in lim_syms)
        if loopish:
            return check, "thread_select"  # `tid < s` in a tree reduction
        if lim_syms or any(s.startswith("blockIdx") for s in index.variant):
            return check, "bounds"
        if limit.affine and poly.constant_value(limit.as_poly()) == 0:
            return check, "bounds"  # `i >= 0`
        return check, "thread_select"  # `tid < 32`: picks a subset of the block

    # --- expressions ---------------------------------------------------------------------
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
        if right is not None:
            self.expr(right, "read")
        if left is not None:
            self.expr(left, "write" if op == "=" else "update")
            self._maybe_reduction(node, left, op, right)
            if left.type == "identifier":
                self.facts.written_names.add(self.p.text(left))
                self._assign_scalar(self.p.text(left), op, right, node)

    def _update(self, node: Node, kind: str) -> None:
        arg = node.child_by_field_name("argument")
        if arg is not None:
            self.expr(arg, "update")
            if arg.type == "identifier":
                self.facts.written_names.add(self.p.text(arg))
                self._assign_scalar(self.p.text(arg), "++", None, node)

    def _field(self, node: Node, kind: str) -> None:
        arg = node.child_by_field_name("argument")
        if arg is not None:
            self.expr(arg, kind)

    def _subscript(self, node: Node, kind: str) -> None:
        indices: list[Node] = []
        base = node
        while base.type == "subscript_expression":
            idx = base.child_by_field_name("indices")
            if idx is not None and idx.named_children:
                indices.append(idx.named_children[0])
            base = base.child_by_field_name("argument")  # type: ignore[assignment]
        indices.reverse()
        for idx in indices:
            self.expr(idx, "read")
        self._record(node, base, indices, kind)

    def _pointer(self, node: Node, kind: str) -> None:
        op = self.p.text(node.child_by_field_name("operator"))  # type: ignore[arg-type]
        arg = node.child_by_field_name("argument")
        if arg is None:
            return
        if op == "*":
            self.expr(arg, "read") if arg.type != "identifier" else None
            self._record(node, arg, [], kind)
        else:  # &x: the address escapes (atomics handle their own first argument)
            self.expr(arg, "address" if kind == "read" else kind)

    def _record(self, node: Node, base: Node, indices: list[Node], kind: str) -> None:
        target = self.resolve_pointer(base)
        if target is None or target.base is None:
            return
        if target.space in ("global", None) and self.env.lookup(target.base) is None:
            return
        offset = target.offset or {}
        if target.space in ("shared", "local", "constant") and len(indices) > 1:
            exprs = [self.ev.index(i) for i in indices]
        elif indices:
            exprs = [self.ev.index(indices[0], offset=offset, scale=target.width)]
        else:  # *p or *(p + k)
            exprs = [self.ev.make_index(self.p.text(base), offset, None, target.deps)]
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
                offset=var.offset or {},
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

    def _call(self, node: Node, kind: str) -> None:
        name, _ = callee_name(self.p, node)
        args_node = node.child_by_field_name("arguments")
        args = list(args_node.named_children) if args_node is not None else []
        ck = self._call_kind(name, node)
        span = self.p.span(node)
        self.facts.calls.append(
            Call(
                name=name,
                kind=ck.value,
                args=[self.p.text(a) for a in args],
                guards=list(self.guard_stack),
                loops=list(self.loop_stack),
                span=span,
            )
        )
        if ck in (CallKind.BARRIER, CallKind.GRID_SYNC):
            self._barrier(node, name, args, ck)
        elif ck == CallKind.PRINT:
            self.facts.diagnostics.append(diag.make("DEVICE_PRINTF", span, name=name))
        elif ck == CallKind.TEXTURE:
            self.facts.diagnostics.append(diag.make("TEXTURE_SURFACE", span, name=name))
        if name in ATOMICS and args:
            self._atomic(node, name, args)
            args = args[1:]
        elif ck == CallKind.DEVICE:
            self._device_call(node, name, args)
        for a in args:
            self.expr(a, "read")

    def _call_kind(self, name: str, node: Node) -> CallKind:
        if name in self.callees:
            return CallKind.DEVICE
        if name == ".sync" or name == "sync":
            scope = self._cg_scope(node, name)
            return CallKind.GRID_SYNC if scope == "grid" else CallKind.BARRIER
        if name in (
            ".shfl_down",
            ".shfl_up",
            ".shfl_xor",
            ".shfl",
            ".ballot",
            ".any",
            ".all",
            "reduce",
        ):
            return CallKind.WARP
        return call_kind(name)

    def _cg_scope(self, node: Node, name: str) -> str:
        if name == ".sync":
            fn = node.child_by_field_name("function")
            obj = fn.child_by_field_name("argument") if fn is not None else None
        else:
            args = node.child_by_field_name("arguments")
            obj = args.named_children[0] if args is not None and args.named_children else None
        if obj is not None and obj.type == "call_expression":
            inner, _ = callee_name(self.p, obj)
            return _CG_SCOPES.get(inner, "block")
        var = self.env.lookup(self.p.text(obj)) if obj is not None else None
        return (var.cg_scope if var is not None and var.cg_scope else None) or "block"

    def _barrier(self, node: Node, name: str, args: list[Node], ck: CallKind) -> None:
        if ck == CallKind.GRID_SYNC:
            scope = "grid"
            self.facts.diagnostics.append(
                diag.make("GRID_SYNC", self.p.span(node), name=self.p.text(node))
            )
        elif name in (".sync", "sync"):
            scope = self._cg_scope(node, name)
        else:
            scope = "warp" if name == "__syncwarp" else "block"
        guards = [self.facts.guards[g] for g in self.guard_stack]
        divergent = scope == "block" and any(g.thread_dependent for g in guards)
        label = {".sync": "cg.sync", "sync": "cg::sync"}.get(name, name)
        if divergent:
            cond = next(g.condition for g in guards if g.thread_dependent)
            self.facts.diagnostics.append(
                diag.make("DIVERGENT_BARRIER", self.p.span(node), barrier=label, condition=cond)
            )
        self.facts.barriers.append(
            Barrier(
                kind=label,
                scope=scope,
                guards=list(self.guard_stack),  # type: ignore[arg-type]
                loops=list(self.loop_stack),
                divergent=divergent,
                span=self.p.span(node),
            )
        )

    def _atomic(self, node: Node, name: str, args: list[Node]) -> None:
        target = args[0]
        if target.type == "pointer_expression" and target.child_by_field_name("argument"):
            inner = target.child_by_field_name("argument")
            if inner is not None and inner.type == "subscript_expression":
                self._subscript(inner, "atomic")
            else:
                self.expr(target, "atomic")
        else:
            self._record(node, target, [], "atomic")
        base = self.resolve_pointer(target)
        if base is not None and base.base is not None:
            self.facts.reductions.append(
                Reduction(
                    target=base.base,
                    op=_ATOMIC_OP.get(name, "unknown"),
                    style="atomic",  # type: ignore[arg-type]
                    loop=self.loop_stack[-1] if self.loop_stack else None,
                    span=self.p.span(node),
                )
            )

    def _device_call(self, node: Node, name: str, args: list[Node]) -> None:
        """Pointer roles and reductions of a helper count for its caller."""
        callee = self.callees[name]
        for r in callee.reductions:
            if not any(x.target == f"{name}:{r.target}" for x in self.facts.reductions):
                self.facts.reductions.append(
                    Reduction(
                        target=f"{name}:{r.target}",
                        op=r.op,
                        style=r.style,
                        loop=self.loop_stack[-1] if self.loop_stack else None,
                        span=self.p.span(node),
                    )
                )
        for arg, param in zip(args, callee.params, strict=False):
            role = param.role
            target = self.resolve_pointer(arg)
            if target is None or target.base is None:
                continue
            ev = self.facts.role_evidence.setdefault(target.base, set())
            if role in ("in", "inout"):
                ev.add("read")
            if role in ("out", "inout"):
                ev.add("write")

    def _maybe_reduction(self, node: Node, left: Node, op: str, right: Node | None) -> None:
        if right is None:
            return
        has_shfl = _contains_call(self.p, right, WARP_INTRINSICS | {".shfl_down", ".shfl_xor"})
        red_op = _COMPOUND_OPS.get(op)
        target = self.p.text(left)
        if red_op is None and op == "=":
            red_op = self._combine_op(right, left)
        if red_op is None:
            return
        if left.type == "identifier":
            var = self.env.lookup(target)
            if var is None or var.kind not in ("opaque", "value", "param"):
                return
            if has_shfl:
                style = "warp_shuffle"
            elif self.loop_stack:
                style = "loop_accumulate"
            else:
                return
        elif left.type == "subscript_expression" and self.loop_stack:
            base = self.resolve_pointer(_subscript_base(left))
            if base is None or base.space != "shared":
                return
            if not _contains_name(self.p, right, base.base or ""):
                return
            style, target = "shared_tree", base.base or target
        else:
            return
        if any(r.target == target and r.style == style for r in self.facts.reductions):
            return
        self.facts.reductions.append(
            Reduction(
                target=target,
                op=red_op,
                style=style,  # type: ignore[arg-type]
                loop=self.loop_stack[-1] if self.loop_stack else None,
                span=self.p.span(node),
            )
        )

    def _combine_op(self, right: Node, left: Node) -> str | None:
        lt = self.p.text(left)
        if right.type == "binary_expression":
            op = self.p.text(right.child_by_field_name("operator"))  # type: ignore[arg-type]
            operands = [right.child_by_field_name("left"), right.child_by_field_name("right")]
            if op in ("+", "*") and any(o is not None and self.p.text(o) == lt for o in operands):
                return "sum" if op == "+" else "prod"
        if right.type == "call_expression":
            name, _ = callee_name(self.p, right)
            args = right.child_by_field_name("arguments")
            texts = [self.p.text(a) for a in args.named_children] if args is not None else []
            if name in _MAXMIN and lt in texts:
                return _MAXMIN[name]
        return None


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


def _has_unroll_pragma(node: Node) -> bool:
    prev = node.prev_named_sibling
    return (
        prev is not None
        and prev.type.startswith("preproc")
        and "unroll" in (prev.text.decode("utf-8", "replace") if prev.text else "")
    )


def _conjuncts(node: Node | None) -> list[Node]:
    if node is None:
        return []
    if node.type == "parenthesized_expression" and node.named_children:
        return _conjuncts(node.named_children[0])
    if node.type == "binary_expression":
        op = node.child_by_field_name("operator")
        if op is not None and op.type == "&&":
            return _conjuncts(node.child_by_field_name("left")) + _conjuncts(
                node.child_by_field_name("right")
            )
    return [node]


def _subscript_base(node: Node) -> Node:
    while node.type == "subscript_expression":
        node = node.child_by_field_name("argument")  # type: ignore[assignment]
    return node


def _contains_call(p: ParsedSource, node: Node, names: set[str] | frozenset[str]) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "call_expression" and callee_name(p, n)[0] in names:
            return True
        stack.extend(n.named_children)
    return False


def _contains_name(p: ParsedSource, node: Node, name: str) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier" and p.text(n) == name:
            return True
        stack.extend(n.named_children)
    return False


def vector_and_half_types(types_used: set[str]) -> tuple[list[str], list[str]]:
    return sorted(types_used & VECTOR_TYPES), sorted(types_used & HALF_TYPES)
