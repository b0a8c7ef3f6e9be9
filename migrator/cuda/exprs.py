"""Dataflow: the value each store writes, as an `Expr` tree over loads, parameters, constants.

A mixin of `analysis.BodyAnalyzer`. Local scalars carry their symbolic value (`Var.expr`),
updated flow-sensitively like their index value; loop accumulators (`acc += a[k] * b[k]`) become
`reduce` nodes when their loop ends; `__device__` helpers are inlined through their `returns`.
What cannot be followed (a value changed under a branch, a helper with several returns) becomes
an `opaque` node that says why, never a guess.
"""

from __future__ import annotations

from collections.abc import Callable

from tree_sitter import Node

from migrator.cuda.bodystate import BodyState
from migrator.cuda.builtins import BLOCK_SYMBOLS, DIM_SYMBOLS, FMA, THREAD_SYMBOLS
from migrator.cuda.decl import callee_name
from migrator.cuda.indexing import Var, parse_int_literal
from migrator.cuda.ir import Expr, Store
from migrator.cuda.memory import peel_subscripts

_INDEX_BUILTINS = THREAD_SYMBOLS | BLOCK_SYMBOLS | DIM_SYMBOLS


def opaque(text: str, why: str) -> Expr:
    return Expr(kind="opaque", op=why, text=text)


def substitute(e: Expr, params: dict[str, Expr]) -> Expr:
    """Replace `param` leaves by the given expressions (inlining a helper at a call site)."""
    if e.kind == "param" and e.name in params:
        return params[e.name]  # type: ignore[index]
    if not e.args:
        return e
    return e.model_copy(update={"args": [substitute(a, params) for a in e.args]})


def _detach_loops(e: Expr) -> Expr:
    """Loop ids of an inlined helper name the helper's loops, not the caller's: drop them."""
    args = [_detach_loops(a) for a in e.args]
    if e.kind == "reduce":
        return e.model_copy(update={"loop": None, "args": args})
    return e.model_copy(update={"args": args}) if e.args else e


class ExprMixin(BodyState):
    pending_acc: dict[int, dict[str, tuple[str, str, Expr]]]  # loop -> var -> (op, style, term)
    # register blocking: `acc[j] += a * b[j]` into a local array, per enclosing reduction loop
    local_acc: dict[int, dict[str, tuple[str, Expr]]]
    local_values: dict[str, Expr]
    # global elements this thread stored: (array, index) -> (value, loops, guards) at the store
    stored: dict[tuple[str, tuple[str, ...]], tuple[Expr, tuple[int, ...], tuple[int, ...]]]

    def _expr_table(self) -> dict[str, Callable[[Node], Expr]]:
        return {
            "number_literal": self._e_number,
            "identifier": self._e_identifier,
            "field_expression": self._e_field,
            "parenthesized_expression": lambda n: (
                self.to_expr(n.named_children[0])
                if n.named_children
                else opaque(self.p.text(n), "empty parentheses")
            ),
            "binary_expression": self._e_binary,
            "unary_expression": self._e_unary,
            "conditional_expression": self._e_select,
            "cast_expression": self._e_cast,
            "call_expression": self._e_call,
            "subscript_expression": self._e_load,
            "pointer_expression": self._e_deref,
            "true": lambda n: Expr(kind="const", value=1, dtype="bool", text="true"),
            "false": lambda n: Expr(kind="const", value=0, dtype="bool", text="false"),
        }

    def to_expr(self, node: Node | None) -> Expr:
        if node is None:
            return opaque("", "missing expression")
        handler = self._expr_table().get(node.type)
        if handler is None:
            return opaque(self.p.text(node), node.type.replace("_", " "))
        return handler(node)

    # --- leaves --------------------------------------------------------------------------
    def _e_number(self, node: Node) -> Expr:
        text = self.p.text(node)
        as_int = parse_int_literal(text)
        if as_int is not None:
            return Expr(kind="const", value=as_int, dtype="int", text=text)
        body = text.rstrip("fFlL")
        try:
            value = float(body)
        except ValueError:
            return opaque(text, "unreadable literal")
        # C: an unsuffixed floating literal is double; 1.0f is float
        dtype = "float" if text[-1:] in "fF" else "double"
        return Expr(kind="const", value=value, dtype=dtype, text=text)

    def _e_identifier(self, node: Node) -> Expr:
        name = self.p.text(node)
        var = self.env.lookup(name)
        if var is None:
            return Expr(kind="param", name=name, text=name)
        if var.kind == "param":
            return var.expr if var.expr is not None else Expr(kind="param", name=name, text=name)  # type: ignore[no-any-return]
        if var.kind == "loopvar":
            return Expr(kind="index", name=name, text=name)
        if var.expr is not None:
            return var.expr  # type: ignore[no-any-return]
        return opaque(name, f"{name} has no single known value here")

    def _e_field(self, node: Node) -> Expr:
        text = self.p.text(node)
        if text in _INDEX_BUILTINS:
            return Expr(kind="index", name=text, text=text)
        arg = node.child_by_field_name("argument")
        fld = node.child_by_field_name("field")
        if arg is not None and fld is not None:
            return Expr(kind="call", op=f".{self.p.text(fld)}", args=[self.to_expr(arg)], text=text)
        return opaque(text, "field access")

    # --- operators -----------------------------------------------------------------------
    def _e_binary(self, node: Node) -> Expr:
        op = self.p.text(node.child_by_field_name("operator"))  # type: ignore[arg-type]
        left = self.to_expr(node.child_by_field_name("left"))
        right = self.to_expr(node.child_by_field_name("right"))
        return Expr(kind="binary", op=op, args=[left, right], text=self.p.text(node))

    def _e_unary(self, node: Node) -> Expr:
        op = self.p.text(node.child_by_field_name("operator"))  # type: ignore[arg-type]
        arg = self.to_expr(node.child_by_field_name("argument"))
        if op == "+":
            return arg
        return Expr(kind="unary", op=op, args=[arg], text=self.p.text(node))

    def _e_select(self, node: Node) -> Expr:
        parts = [self.to_expr(node.child_by_field_name(f)) for f in ("condition", "consequence",
                                                                      "alternative")]  # fmt: skip
        return Expr(kind="select", args=parts, text=self.p.text(node))

    def _e_cast(self, node: Node) -> Expr:
        t = node.child_by_field_name("type")
        inner = self.to_expr(node.child_by_field_name("value"))
        to = " ".join(self.p.text(t).split()) if t is not None else "?"
        return Expr(kind="cast", op=to, args=[inner], text=self.p.text(node))

    def _e_call(self, node: Node) -> Expr:
        name, targs = callee_name(self.p, node)
        args_node = node.child_by_field_name("arguments")
        args = [self.to_expr(a) for a in (args_node.named_children if args_node else [])]
        text = self.p.text(node)
        if name in ("static_cast", "reinterpret_cast") and args:
            to = self.p.text(targs.named_children[0]) if targs and targs.named_children else "?"
            return Expr(kind="cast", op=" ".join(to.split()), args=args[:1], text=text)
        callee = self.callees.get(name)
        if callee is not None:
            if callee.returns is None:
                return opaque(text, f"{name}() has no single returned expression")
            binding = {p.name: a for p, a in zip(callee.params, args, strict=False)}
            return _detach_loops(substitute(callee.returns, binding))
        return Expr(kind="call", op=name, args=args, text=text)

    def _e_load(self, node: Node) -> Expr:
        base, indices = peel_subscripts(node)
        return self._load(node, base, indices)

    def _e_deref(self, node: Node) -> Expr:
        op = self.p.text(node.child_by_field_name("operator"))  # type: ignore[arg-type]
        arg = node.child_by_field_name("argument")
        if op != "*" or arg is None:
            return opaque(self.p.text(node), "address-of")
        return self._load(node, arg, [])

    def _load(self, node: Node, base: Node, indices: list[Node]) -> Expr:
        found = self.located(base, indices)  # type: ignore[attr-defined]
        text = self.p.text(node)
        if found is None:
            return opaque(text, "load through an unresolved pointer")
        target, exprs = found
        if target.space == "local" and target.base in self.local_values:
            return self.local_values[target.base]  # a register-blocked accumulator's value
        if target.space in ("global", None):
            key = (target.base or "", tuple(e.canonical or e.text for e in exprs))
            prior = self.stored.get(key)
            if prior is not None:  # this thread stored the element before: it reads that value
                value, loops, guards = prior
                if loops == tuple(self.loop_stack) and guards == tuple(
                    self.guard_stack[: len(guards)]
                ):
                    return value
                return opaque(text, "reads back an element stored under other control flow")
            if any(k[0] == key[0] for k in self.stored):
                return opaque(text, f"reads {key[0]} after storing to it at another index")
        return Expr(kind="load", name=target.base, index=exprs, space=target.space, text=text)

    # --- state updates (called by the statement walker) --------------------------------------
    def record_store(self, node: Node, left: Node, op: str, right: Node | None) -> None:
        base, indices = peel_subscripts(left)
        if base.type == "field_expression":  # v4[i].x = ...: a partial store, keep the vector
            return
        if left.type == "pointer_expression":
            base = left.child_by_field_name("argument")  # type: ignore[assignment]
        elif left.type != "subscript_expression":
            return
        found = self.located(base, indices)  # type: ignore[attr-defined]
        if found is None:
            return
        target, exprs = found
        if target.space == "local" and op in ("+=", "*=") and right is not None:
            self._local_accumulation(target.base or "", exprs, op, right)
        value = self.to_expr(right)
        if op not in ("=", "++", "--") and target.space != "local":
            # `a[i] -= v` writes a[i] - v: the value is the whole update, never just v
            old = self._load(left, base, indices)
            value = Expr(kind="binary", op=op[:-1], args=[old, value], text=self.p.text(node))
        if target.space in ("global", None):
            key = (target.base or "", tuple(e.canonical or e.text for e in exprs))
            self.stored[key] = (value, tuple(self.loop_stack), tuple(self.guard_stack))
        self.facts.stores.append(Store(
            array=target.base, space=target.space or "global", op=op, index=exprs,  # type: ignore[arg-type]
            value=value, guards=list(self.guard_stack),
            loops=list(self.loop_stack), span=self.p.span(node),
        ))  # fmt: skip

    def _local_accumulation(self, array: str, index: list, op: str, right: Node) -> None:  # type: ignore[type-arg]
        """`acc[j] += term` accumulates over the innermost loop whose variable does not pick
        the element (k, not j); remember the term for that loop's exit."""
        picked = {v for e in index for v in e.variant}
        for lid in reversed(self.loop_stack):
            var = self.facts.loops[lid].var
            if var is not None and var not in picked:
                red = {"+=": "sum", "*=": "prod"}[op]
                self.local_acc.setdefault(lid, {})[array] = (red, self.to_expr(right))
                return

    def scalar_value(self, name: str, old: Var | None, op: str, right: Node | None) -> Expr:
        """The new symbolic value of a scalar after `name op right`."""
        if op in ("++", "--"):
            new = Expr(kind="const", value=1, dtype="int", text="1")
            op = op[0] + "="
        else:
            new = self.to_expr(right)
        if op == "=":
            return new
        prev = old.expr if old is not None and old.expr is not None else opaque(name, "unknown")
        return Expr(kind="binary", op=op[:-1], args=[prev, new], text=f"{name} {op} ...")

    def note_accumulation(
        self, name: str, op: str, style: str, right: Node, assign_op: str
    ) -> None:
        """`acc += e` / `acc = fmaxf(acc, e)` in a loop: remember the contributed term."""
        if not self.loop_stack:
            return
        term = self._contribution(name, right, assign_op)
        self.pending_acc.setdefault(self.loop_stack[-1], {})[name] = (op, style, term)

    def _contribution(self, name: str, right: Node, assign_op: str) -> Expr:
        if assign_op != "=":
            return self.to_expr(right)
        if right.type == "call_expression":
            args = right.child_by_field_name("arguments")
            nodes = list(args.named_children) if args else []
            if callee_name(self.p, right)[0] in FMA and len(nodes) == 3:  # fmaf(a, b, acc)
                a, b = (self.to_expr(x) for x in nodes[:2])
                return Expr(kind="binary", op="*", args=[a, b],
                            text=f"{self.p.text(nodes[0])} * {self.p.text(nodes[1])}")  # fmt: skip
            others = [a for a in nodes if self.p.text(a) != name]
            return self.to_expr(others[0]) if others else opaque(self.p.text(right), "no term")
        if right.type == "binary_expression":
            for side in ("left", "right"):
                other = right.child_by_field_name("right" if side == "left" else "left")
                here = right.child_by_field_name(side)
                if here is not None and self.p.text(here) == name:
                    return self.to_expr(other)
        return self.to_expr(right)

    def finish_loop(self, loop_id: int, assigned: set[str]) -> None:
        """At loop exit: accumulators become reduce nodes; other changed scalars opaque."""
        for array, (op, term) in self.local_acc.pop(loop_id, {}).items():
            zero = Expr(kind="const", value=1.0 if op == "prod" else 0.0, dtype="float", text="0")
            self.local_values[array] = Expr(kind="reduce", op=op, style="loop_accumulate",
                                            loop=loop_id, args=[zero, term],
                                            text=f"{op}-reduction into {array}[]")  # fmt: skip
        accs = self.pending_acc.pop(loop_id, {})
        for name in assigned:
            var = self.env.lookup(name)
            if var is None or var.kind not in ("value", "opaque", "param"):
                continue
            if name not in accs:
                var.expr = opaque(name, f"{name} changes inside loop #{loop_id}")
                continue
            op, style, term = accs[name]
            init = var.expr if var.expr is not None else opaque(name, "no initial value")
            text = f"{op}-reduction of {name}"
            if style == "warp_shuffle":
                var.expr = Expr(kind="reduce", op=op, style=style, loop=loop_id, args=[init],
                                text=text)  # fmt: skip
            elif self.loop_stack:
                # nested accumulation (K tiles, then k within a tile): the enclosing loop
                # accumulates this loop's partial result, which has no init of its own
                inner = Expr(kind="reduce", op=op, style=style, loop=loop_id, args=[term],
                             text=text)  # fmt: skip
                self.pending_acc.setdefault(self.loop_stack[-1], {})[name] = (op, style, inner)
            else:
                var.expr = Expr(kind="reduce", op=op, style=style, loop=loop_id,
                                args=[init, term], text=text)  # fmt: skip

    def record_return(self, node: Node) -> None:
        values = [c for c in node.named_children]
        if not values:
            return
        if self.facts.returns_seen:
            self.facts.returns = opaque(self.p.text(node), "several return statements")
        else:
            self.facts.returns = self.to_expr(values[0])
        self.facts.returns_seen += 1
