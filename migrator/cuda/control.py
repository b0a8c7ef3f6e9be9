"""Loops and guards of a kernel body: what iterates how, and what is guarded by what.

A mixin of `analysis.BodyAnalyzer`; it reads and extends the analyzer's state (environment, loop
and guard stacks, collected facts).
"""

from __future__ import annotations

from dataclasses import replace

from tree_sitter import Node

from migrator.cuda import poly
from migrator.cuda.bodystate import BodyState
from migrator.cuda.builtins import BLOCK_SYMBOLS, THREAD_SYMBOLS
from migrator.cuda.decl import unwrap_declarator
from migrator.cuda.indexing import Var
from migrator.cuda.ir import BoundCheck, Guard, IndexExpr, Loop


class ControlMixin(BodyState):
    def _enter_loop(self, node: Node, skip: str | None = None) -> set[str]:
        """Locals assigned anywhere in a loop hold different values per iteration: opaque.

        Their symbolic value stays the pre-loop one (an accumulator's init) until
        `finish_loop` says what the loop made of it. Returns the names it changed.
        """
        names = self._assigned_names(node) - {skip}  # type: ignore[attr-defined]
        for name in names:
            var = self.env.lookup(name)
            if var is not None and (var.kind == "alias" or var.is_pointer) and var.base:
                # a pointer moved inside a loop points elsewhere each iteration
                self.env.assign(name, replace(var, offset=None))
            elif var is not None and var.kind in ("value", "opaque", "param"):
                why = f"{name} changes inside a loop"
                self.env.assign(
                    name, Var("opaque", reason=why, deps=var.deps, ctx=var.ctx, expr=var.expr)
                )
        return names

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
        assigned = self._enter_loop(node, skip=var)
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
        self._loop_body(loop, node, assigned, [cond, update])
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
        assigned = self._enter_loop(node)
        self._loop_body(loop, node, assigned, [node.child_by_field_name("condition")])

    def _loop_body(
        self, loop: Loop, node: Node, assigned: set[str], header: list[Node | None]
    ) -> None:
        """Condition/update and body inside the loop's context; then settle accumulators."""
        self.loop_stack.append(loop.id)
        self.branch_depth += 1
        self.loop_depths.append(self.branch_depth)
        for part in header:
            if part is not None:
                self.expr(part, "read")
        body = node.child_by_field_name("body")
        if body is not None:
            self.stmt(body)
        self.loop_depths.pop()
        self.branch_depth -= 1
        self.loop_stack.pop()
        self.finish_loop(loop.id, assigned)  # type: ignore[attr-defined]

    def _if(self, node: Node) -> None:
        cond_clause = node.child_by_field_name("condition")
        cond = cond_clause.child_by_field_name("value") if cond_clause is not None else None
        if cond is None and cond_clause is not None and cond_clause.named_children:
            cond = cond_clause.named_children[-1]
        if cond is not None:
            self.expr(cond, "read")
        guard = self._make_guard(node, cond)
        self.facts.guards.append(guard)
        self.guard_of_if[node.id] = guard.id
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

    def _early_exit_guard(self, node: Node) -> int | None:
        if node.type != "if_statement" or node.child_by_field_name("alternative") is not None:
            return None
        cons = node.child_by_field_name("consequence")
        if cons is not None and cons.type == "compound_statement" and cons.named_child_count == 1:
            cons = cons.named_children[0]
        if cons is None or cons.type != "return_statement":
            return None
        return self.guard_of_if.get(node.id)

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
