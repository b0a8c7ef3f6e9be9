"""Statements and control flow over lanes with active masks.

`exec(node, mask)` runs a statement for the lanes in `mask`. Divergence never forks: an `if`
runs its then-branch with `mask & cond` and its else-branch with `mask & ~cond`; a loop keeps
iterating while any lane is still in it (thread-dependent trip counts); `break`, `continue` and
`return` park lanes in the current loop's/frame's masks, and each statement of a block re-derives
its mask from them, so parked lanes skip the rest of the body.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from tree_sitter import Node

from migrator.cuda.interp import compact, coop, lambdas, widen
from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp.builtins import MATH
from migrator.cuda.interp.findings import BUDGET_PHRASE, BudgetError
from migrator.cuda.interp.half import HALF_BUILTINS
from migrator.cuda.interp.memory import Buffer, poison
from migrator.cuda.interp.scope import Loop, MemLV, TypeName, Var
from migrator.cuda.interp.traced import as_object, is_traced
from migrator.cuda.interp.values import Val, convert, lanes, select
from migrator.cuda.interp.values import scalar as ct_scalar

if TYPE_CHECKING:
    from migrator.cuda.interp.exprs import TracedCond
    from migrator.cuda.interp.machine import Machine

DECL_WORDS = (
    "type_qualifier",
    "storage_class_specifier",
    "__device__",
    "__shared__",
    "__constant__",
)
IGNORED = {"preproc_call", "comment", ";", "empty_statement"}


class StmtMixin:
    """Statement execution; mixed into `Machine`."""

    def init_stmts(self: Machine) -> None:
        self._stmt: dict[str, Callable[[Node, np.ndarray], None]] = {
            "compound_statement": self._s_block,
            "expression_statement": self._s_expr,
            "declaration": self._s_declaration,
            "if_statement": self._s_if,
            "for_statement": self._s_for,
            "while_statement": self._s_while,
            "do_statement": self._s_do,
            "break_statement": self._s_break,
            "continue_statement": self._s_continue,
            "return_statement": self._s_return,
            "else_clause": lambda n, m: self.exec(n.named_children[-1], m),
            "switch_statement": self._s_switch,
            "type_definition": self._s_typedef,
            "alias_declaration": self._s_typedef,
            # `namespace cg = cooperative_groups;`, `using namespace ...;`, `using std::max;`:
            # names are resolved by their last component, so these change nothing here
            "namespace_alias_definition": self._s_nothing,
            "using_declaration": self._s_nothing,
            "static_assert_declaration": self._s_nothing,  # a compile-time check
        }

    def exec(self: Machine, node: Node, mask: np.ndarray) -> None:
        kind = node.type
        if kind in IGNORED:
            return
        fn = self._stmt.get(kind)
        if fn is None:
            raise self.unsupported(node, f"statement {kind}")
        active = self.active_count(mask)
        n = self.geo.n
        if (
            self.options.compact
            and n >= (compact.MIN_LANES if kind not in compact.LOOPS else compact.MIN_LOOP_LANES)
            and active <= compact.MAX_FRACTION * n
            and kind in compact.COMPACT_TYPES
            and compact.try_compacted(self, node, mask)
        ):
            return
        if kind != "compound_statement":
            self.thread_statements += active
            self.current = node  # where an unexpected internal error is reported
            cap = self.options.max_thread_statements
            if cap and self.thread_statements > cap:
                raise self.unsupported(
                    node, f"the run {BUDGET_PHRASE} {cap} thread-statements", BudgetError
                )
        fn(node, mask)

    def _s_nothing(self: Machine, node: Node, mask: np.ndarray) -> None:
        return None

    def _s_block(self: Machine, node: Node, mask: np.ndarray) -> None:
        self.frame.scopes.append({})
        try:
            for child in node.named_children:
                m = self.frame.live(mask)
                if not self.active_count(m):
                    break
                self.exec(child, m)
        finally:
            self.frame.scopes.pop()

    def _s_expr(self: Machine, node: Node, mask: np.ndarray) -> None:
        if not node.named_children:
            return
        expr = node.named_children[0]
        decl = coop.misparsed_declaration(self, expr)
        if decl is not None:  # `cg::thread_block_tile<32> t = ...;`
            t, name, init = decl
            v = self.uninit_value(t) if init is None else self.ev(init, mask)
            v = self.convert_to(v, t, expr)
            self.declare(self.parsed.text(name), Var(t, v))
            return
        self.ev(expr, mask)

    # --- declarations -------------------------------------------------------------------------
    def declaration_parts(
        self: Machine, node: Node
    ) -> tuple[frozenset[str], Node | None, bool, tuple[tuple[Node, Node | None], ...]]:
        """(specifier words, type node, whether `auto`, each declarator with its initialiser)
        of a declaration, read from the tree once per program (a loop body's declarations
        run at every step)."""
        memo = self.program.declaration_parts
        parts = memo.get(node.id)
        if parts is None:
            words = frozenset(self.parsed.text(c) for c in node.children if c.type in DECL_WORDS)
            tnode = node.child_by_field_name("type")
            is_auto = tnode is not None and self.parsed.text(tnode) == "auto"
            decls = tuple(
                (d, d.child_by_field_name("value") if d.type == "init_declarator" else None)
                for d in node.children_by_field_name("declarator")
            )
            parts = memo[node.id] = (words, tnode, is_auto, decls)
        return parts

    def _s_declaration(self: Machine, node: Node, mask: np.ndarray) -> None:
        words, tnode, is_auto, decls = self.declaration_parts(node)
        if tnode is None:
            raise self.unsupported(node, "declaration without a type")
        base = ct.VOID if is_auto else self.base_type(tnode)
        for decl, init in decls:
            if is_auto:  # `auto x = e;`: the type of e (evaluated once, below)
                if init is None or decl.child_by_field_name("declarator") is None:
                    raise self.error(decl, "auto without an initialiser")
                inner = decl.child_by_field_name("declarator")
                assert inner is not None
                if inner.type != "identifier":
                    raise self.unsupported(decl, f"auto declarator {self.parsed.text(inner)!r}")
                v = self.ev(init, mask)
                self.declare(self.parsed.text(inner), Var(v.ctype, v))
                continue
            name, t, is_ref, _ = self.declarator_type(base, decl)
            if "__shared__" in words:
                self.declare(name, self._shared(node, name, t, "extern" in words))
            elif is_ref:
                if init is None:
                    raise self.error(decl, f"reference {name!r} without initialiser")
                self.declare(name, self.lvalue(init, mask))
            elif t.kind == "array":
                self.declare(name, self._local_array(decl, name, t, init, mask))
            else:
                # `const float* p`: the const is the pointee's; p itself may be reassigned
                const = ("const" in words or "constexpr" in words) and t.kind != "ptr"
                self.declare(name, self._local(decl, t, init, mask, const, name))

    def _local(
        self: Machine,
        decl: Node,
        t: ct.CType,
        init: Node | None,
        mask: np.ndarray,
        const: bool,
        name: str = "",
    ) -> Var:
        if init is None:  # poison, and reads before a store are reported
            tracked = t.kind != "object"
            lanes_init = np.zeros(self.geo.n, dtype=bool) if tracked else None
            return Var(t, self.uninit_value(t), init=lanes_init, name=name)
        if init.type in ("initializer_list", "argument_list"):  # `float2 v = {..}`, `dim3 d(..)`
            if t.kind == "struct":
                return Var(t, self._struct_init(t, init, mask))
            if t.kind != "vec":
                raise self.unsupported(init, f"brace initialiser for {t}")
            assert t.elem is not None
            comps = [convert(self.ev(c, mask), t.elem) for c in init.named_children]
            if len(comps) > t.count:
                raise self.error(init, f"{len(comps)} initialisers for {t}")
            fill = 1 if t.name == "dim3" else 0  # dim3's constructor defaults are 1
            comps += [ct_scalar(t.elem, fill) for _ in range(t.count - len(comps))]
            return Var(t, Val(t, comps=tuple(comps)))
        v = self.convert_to(self.ev(init, mask), t, decl)
        # a const initialised for only some lanes is still per-lane; keep it a normal Var
        return Var(t, v, const=const and mask.all())

    def _struct_init(self: Machine, t: ct.CType, init: Node, mask: np.ndarray) -> Val:
        """`S s = {a, b};`: fields in order; fields without an initialiser are zero (C)."""
        items = init.named_children
        if len(items) > len(t.fields):
            raise self.error(init, f"{len(items)} initialisers for {t}")
        comps = []
        for k, (_, ft) in enumerate(t.fields):
            if k < len(items):
                if items[k].type == "initializer_list":
                    comps.append(self._local(items[k], ft, items[k], mask, False).val)
                else:
                    comps.append(self.convert_to(self.ev(items[k], mask), ft, items[k]))
            else:
                comps.append(self._zero(ft))
        return Val(t, comps=tuple(comps))

    def _zero(self: Machine, t: ct.CType) -> Val:
        if t.kind in ("vec", "struct"):
            parts = [f for _, f in t.fields] if t.kind == "struct" else [t.elem] * t.count
            return Val(t, comps=tuple(self._zero(p) for p in parts if p is not None))
        if t.kind == "ptr":
            return Val(t, np.int64(0), buf=None)
        return ct_scalar(t, 0)

    def uninit_value(self: Machine, t: ct.CType) -> Val:
        """An uninitialised local: poison, so reading it shows up in results."""
        if t.kind == "struct":
            return Val(t, comps=tuple(self.uninit_value(f) for _, f in t.fields))
        if t.kind == "vec":
            assert t.elem is not None
            return Val(t, comps=tuple(self.uninit_value(t.elem) for _ in range(t.count)))
        if t.kind == "ptr":
            return Val(t, np.int64(0), buf=None)
        if t.kind == "object":  # a group declared before it is assigned
            return Val(t, np.int8(0))
        assert t.dtype is not None
        return Val(t, np.full(self.geo.n, poison(t.dtype, self.options.uninit), dtype=t.dtype))

    def _local_array(
        self: Machine, decl: Node, name: str, t: ct.CType, init: Node | None, mask: np.ndarray
    ) -> Var:
        if t.scalar.kind == "struct" and init is not None:
            raise self.unsupported(decl, f"initialised array of struct {t.scalar}")
        store_t = t.scalar.storage  # a struct array: its fields' type, or bytes
        size = t.size // store_t.size
        rows = self.geo.lane_rows  # one row per lane of the batch (a LaneView indexes a subset)
        buf = Buffer.fresh(name, "local", store_t, size, rows, "lane", self.options.uninit)
        if init is None:  # reads of elements no lane stored are reported (memory.py)
            buf.init = np.zeros(buf.data.size, dtype=bool)
        elif init.type == "initializer_list":
            buf.data[:] = 0  # C aggregate initialisation: elements without an initialiser are 0
            for k, c in _flat_initialisers(init, t, 0):
                v = convert(self.ev(c, mask), t.scalar)
                buf.data[self.geo.lane * size + k] = np.broadcast_to(
                    np.asarray(v.data), (self.geo.n,)
                )
        return Var(t, Val(t, np.int64(0), buf=buf), const=True)

    def _shared(self: Machine, node: Node, name: str, t: ct.CType, extern: bool) -> Var:
        elem = t.scalar
        if elem.kind == "struct" and extern:
            raise self.unsupported(node, f"extern __shared__ array of struct {elem}")
        if extern:
            if self.dynamic_shared is None:
                # the launch's byte count is in the kernel's own types: a shadow-mode float
                # (stored as float64) still occupies 4 bytes of the program's shared memory
                nominal = 4 if elem is self.float_t and self.options.shadow_f64 else elem.size
                size = self.shared_bytes // nominal
                self.dynamic_shared = Buffer.fresh(
                    name,
                    "shared",
                    elem,
                    size,
                    self.geo.n_blocks,
                    "block",
                    self.options.uninit,
                    track=True,
                    races=self.options.races,
                )
            buf = self.dynamic_shared
            if buf.elem != elem:
                raise self.unsupported(
                    node, f"extern __shared__ {name!r} as {elem}, already declared as {buf.elem}"
                )
            return Var(t, Val(ct.array(elem, buf.size), np.int64(0), buf=buf), const=True)
        # per site, per declarator (`__shared__ float As[T][T], Bs[T][T];` is two arrays) and
        # per template instantiation
        key = (node.start_byte, name, t.name)
        buf = self.shared.get(key)
        if buf is None:
            if t.kind != "array" and t.kind not in ("int", "float", "bool", "struct"):
                raise self.unsupported(node, f"__shared__ of type {t}")
            size = t.size // elem.storage.size
            buf = Buffer.fresh(
                name,
                "shared",
                elem.storage,
                size,
                self.geo.n_blocks,
                "block",
                self.options.uninit,
                track=True,
                races=self.options.races,
            )
            self.shared[key] = buf
        if t.kind != "array":  # a shared scalar: an lvalue into its one-element buffer
            return MemLV(Val(ct.ptr(t), np.int64(0), buf=buf), t)  # type: ignore[return-value]
        return Var(t, Val(t, np.int64(0), buf=buf), const=True)

    # --- control flow --------------------------------------------------------------------------
    def _s_if(self: Machine, node: Node, mask: np.ndarray) -> None:
        cond = node.child_by_field_name("condition")
        then = node.child_by_field_name("consequence")
        other = node.child_by_field_name("alternative")
        assert cond is not None and then is not None
        if self.options.trace:
            traced_cond = self.traced_condition(self._cond_expr(cond), mask)
            if traced_cond is not None:
                self._traced_if(traced_cond, then, other, mask)
                return
        c = self.truth(self._cond_expr(cond), mask)
        if self.active_count(c):  # (the count `exec` asks of the same mask: kept per mask)
            self.exec(then, c)
        if other is not None:
            rest = self.frame.live(mask & ~c)
            if self.active_count(rest):
                self.exec(other, rest)

    def _traced_if(
        self: Machine,
        cond: TracedCond,
        then: Node,
        other: Node | None,
        mask: np.ndarray,
    ) -> None:
        """Both branches run on their lanes as usual; then every traced scalar variable (and
        the return value) they changed becomes `select(lhs op rhs, value after then, value
        after else)`: what the kernel computes includes the condition, for every element."""
        c = cond.holds
        f = self.frame
        names = [v for scope in f.scopes for v in scope.values() if isinstance(v, Var)]
        before = [v.val for v in names]
        ret_before = f.retval
        if self._speculable(then) and (other is None or self._speculable(other)):
            # branches that only compute values run on every lane, so that a branch the
            # traced inputs never take is still part of what the kernel computes
            ret_lanes, returned = f.ret.copy(), f.returned
            self.exec(then, mask)
            after_then = [v.val for v in names]
            ret_then, then_ret = f.retval, f.ret.copy()
            for v, old in zip(names, before, strict=True):
                v.val = old
            f.retval, f.ret, f.returned = ret_before, ret_lanes.copy(), returned
            if other is not None:
                self.exec(other, mask)
            else_ret = f.ret.copy()
            f.ret = ret_lanes | (c & then_ret) | (mask & ~c & else_ret)
            f.returned = bool(f.ret.any())
        else:
            if c.any():
                self.exec(then, c)
            after_then = [v.val for v in names]
            ret_then = f.retval
            if other is not None:
                rest = self.frame.live(mask & ~c)
                if rest.any():
                    self.exec(other, rest)

        def merged(then_v: Val | None, final: Val | None, old: Val | None) -> Val | None:
            if final is None or then_v is None or (then_v is old and final is old):
                return final
            if not is_traced(final.ctype) or final.comps is not None or then_v.comps is not None:
                return final
            t = lanes(then_v, self.geo.n)
            e = lanes(final, self.geo.n)
            return Val(final.ctype, cond.select(as_object(t), as_object(e)))

        for v, old, t in zip(names, before, after_then, strict=True):
            new = merged(t, v.val, old)
            if new is not None:
                v.val = new
        if f.retval is not None and ret_then is not None:
            f.retval = merged(ret_then, f.retval, ret_before)

    def _speculable(self: Machine, node: Node) -> bool:
        """Whether a branch only computes values: assignments to local names, declarations,
        returns, nested ifs and pure math (no memory writes, calls, loops or jumps)."""
        if node.type in ("compound_statement", "if_statement", "else_clause",
                         "condition_clause", "return_statement", "declaration",
                         "init_declarator", "expression_statement"):  # fmt: skip
            return all(self._speculable(c) for c in node.named_children)
        if node.type in ("assignment_expression", "update_expression"):
            target = node.child_by_field_name("left") or node.child_by_field_name("argument")
            return (
                target is not None
                and target.type == "identifier"
                and all(self._speculable(c) for c in node.named_children if c is not target)
            )
        if node.type == "call_expression":
            fn = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            name = self.parsed.text(fn) if fn is not None else ""
            return name in PURE_CALLS and (args is None or self._speculable(args))
        if node.type in ("for_statement", "while_statement", "do_statement", "break_statement",
                         "continue_statement", "goto_statement", "switch_statement"):  # fmt: skip
            return False
        return all(self._speculable(c) for c in node.named_children)

    def _cond_expr(self: Machine, cond: Node) -> Node:
        if cond.type == "condition_clause":
            v = cond.child_by_field_name("value")
            if v is None or v.type == "declaration":
                raise self.unsupported(cond, "declaration in a condition")
            return v
        return cond

    def _loop(
        self: Machine,
        node: Node,
        mask: np.ndarray,
        cond: Node | None,
        body: Node,
        update: Node | None,
        test_first: bool,
    ) -> None:
        loop = Loop(np.zeros(self.geo.n, dtype=bool), np.zeros(self.geo.n, dtype=bool))
        self.frame.loops.append(loop)
        active = mask
        try:
            for it in range(self.options.max_loop_iterations + 1):
                if it == self.options.max_loop_iterations:
                    raise self.error(
                        node,
                        f"loop ran {it} iterations; raise max_loop_iterations if this is intended",
                    )
                active = self.frame.running(active, loop)
                if (test_first or it > 0) and cond is not None:
                    active = self.truth(cond, active)
                if not self.active_count(active):
                    break
                self.exec(body, active)
                if loop.used:  # continued lanes rejoin for the update and next test
                    loop.cont[:] = False
                    loop.used = bool(loop.brk.any())
                active = self.frame.running(active, loop)
                if update is not None and self.active_count(active):
                    self.ev(update, active)
        finally:
            self.frame.loops.pop()

    def _s_for(self: Machine, node: Node, mask: np.ndarray) -> None:
        self.frame.scopes.append({})
        try:
            init = node.child_by_field_name("initializer")
            if init is not None:
                if init.type == "declaration":
                    self._s_declaration(init, mask)
                else:
                    self.ev(init, mask)
            body = node.child_by_field_name("body")
            assert body is not None
            cond, update = node.child_by_field_name("condition"), node.child_by_field_name("update")
            if widen.run(self, node, mask, cond, body, update):
                return  # (an accumulating loop, its steps evaluated at once: widen.py)
            self._loop(node, mask, cond, body, update, True)
        finally:
            self.frame.scopes.pop()

    def _s_while(self: Machine, node: Node, mask: np.ndarray) -> None:
        cond = node.child_by_field_name("condition")
        body = node.child_by_field_name("body")
        assert cond is not None and body is not None
        self._loop(node, mask, self._cond_expr(cond), body, None, True)

    def _s_do(self: Machine, node: Node, mask: np.ndarray) -> None:
        cond = node.child_by_field_name("condition")
        body = node.child_by_field_name("body")
        assert cond is not None and body is not None
        self._loop(node, mask, cond, body, None, False)

    def _s_break(self: Machine, node: Node, mask: np.ndarray) -> None:
        if not self.frame.loops:
            raise self.unsupported(node, "break outside a loop (switch is not supported)")
        loop = self.frame.loops[-1]
        loop.brk |= mask
        loop.used = True

    def _s_continue(self: Machine, node: Node, mask: np.ndarray) -> None:
        loop = next((lp for lp in reversed(self.frame.loops) if not lp.is_switch), None)
        if loop is None:
            raise self.error(node, "continue outside a loop")
        loop.cont |= mask
        loop.used = True

    def _s_switch(self: Machine, node: Node, mask: np.ndarray) -> None:
        """Lanes enter at their matching `case` (or `default`) and fall through until
        `break`, exactly like C; a lane matching no case and no default skips the body."""
        cond = node.child_by_field_name("condition")
        body = node.child_by_field_name("body")
        assert cond is not None and body is not None
        v = self.ev(self._cond_expr(cond), mask)
        cases = [c for c in body.named_children if c.type == "case_statement"]
        labels = [c.child_by_field_name("value") for c in cases]
        hits = [
            None if lab is None else self.truth_of(v, self.ev(lab, mask), mask) for lab in labels
        ]
        matched = np.zeros(self.geo.n, dtype=bool)
        for h in hits:
            if h is not None:
                matched |= h
        loop = Loop(np.zeros(self.geo.n, dtype=bool), np.zeros(self.geo.n, dtype=bool), True)
        self.frame.loops.append(loop)
        entered = np.zeros(self.geo.n, dtype=bool)
        try:
            for case, lab, hit in zip(cases, labels, hits, strict=True):
                entered = entered | (hit if hit is not None else mask & ~matched)
                for stmt in case.named_children:
                    if lab is not None and stmt.id == lab.id:
                        continue
                    m = self.frame.live(entered)
                    if m.any():
                        self.exec(stmt, m)
        finally:
            self.frame.loops.pop()

    def truth_of(self: Machine, v: Val, label: Val, mask: np.ndarray) -> np.ndarray:
        from migrator.cuda.interp.ops import binary, mask_and

        return mask_and(mask, binary("==", v, label).data)

    def _s_typedef(self: Machine, node: Node, mask: np.ndarray) -> None:
        """`typedef T name;` / `using name = T;`: a name bound to a type in this scope."""
        if node.type == "alias_declaration":
            name = node.child_by_field_name("name")
            tdesc = node.child_by_field_name("type")
            assert name is not None and tdesc is not None
            self.declare(self.parsed.text(name), TypeName(self.type_of_descriptor(tdesc)))
            return
        tnode = node.child_by_field_name("type")
        assert tnode is not None
        base = self.base_type(tnode)
        for decl in node.children_by_field_name("declarator"):
            t, d = base, decl
            while d.type == "pointer_declarator":
                t = ct.ptr(t)
                inner = d.child_by_field_name("declarator")
                assert inner is not None
                d = inner
            self.declare(self.parsed.text(d), TypeName(t))

    def _s_return(self: Machine, node: Node, mask: np.ndarray) -> None:
        f = self.frame
        if node.named_children:
            expr = node.named_children[0]
            if expr.type == "initializer_list" and f.ret_type.kind in ("struct", "vec"):
                v = self._local(expr, f.ret_type, expr, mask, False).val  # `return {};`
            else:
                v = self.ev(expr, mask)
            if f.ret_type is lambdas.AUTO:  # a lambda without `-> T`: its first return decides
                f.ret_type = v.ctype
            v = self.convert_to(v, f.ret_type, node)
            f.retval = v if f.retval is None or mask.all() else select(mask, v, f.retval)
        f.ret |= mask
        f.returned = True


PURE_CALLS = frozenset(MATH) | frozenset(HALF_BUILTINS)  # value-only calls a branch may make


def _flat_initialisers(init: Node, t: ct.CType, base: int) -> list[tuple[int, Node]]:
    """(flat element, initialiser) pairs of an array's initializer list: a braced sub-list
    (`{{1, 2}, {3, 4}}`) fills its sub-array, unbraced scalars fill elements in order."""
    elem = t.elem if t.kind == "array" else None
    stride = elem.size // t.scalar.size if elem is not None and elem.kind == "array" else 1
    out: list[tuple[int, Node]] = []
    for k, c in enumerate(init.named_children):
        if c.type == "initializer_list" and elem is not None and elem.kind == "array":
            out.extend(_flat_initialisers(c, elem, base + k * stride))
        else:
            out.append((base + k, c))
    return out
