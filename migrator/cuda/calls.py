"""Calls in a kernel body: barriers, warp intrinsics, atomics, helpers, and reductions.

A mixin of `analysis.BodyAnalyzer`. Reductions are recognised here because their signatures are
call- and assignment-shaped: `acc += x`, `m = fmaxf(m, x)`, `v += __shfl_down_sync(...)`,
`s[tid] += s[tid + stride]`, `atomicAdd(&out[0], x)`.
"""

from __future__ import annotations

from tree_sitter import Node

from migrator import diagnostics as diag
from migrator.cuda.bodystate import BodyState
from migrator.cuda.builtins import ATOMICS, FMA, WARP_INTRINSICS, CallKind, call_kind
from migrator.cuda.decl import callee_name
from migrator.cuda.exprs import opaque
from migrator.cuda.indexing import Var
from migrator.cuda.ir import Barrier, Call, Reduction
from migrator.cuda.memory import subscript_base
from migrator.cuda.parse import ParsedSource, unparen

_COMPOUND_OPS = {"+=": "sum", "-=": "sum", "*=": "prod", "&=": "and", "|=": "or", "^=": "xor"}
_MAXMIN = {"fmaxf": "max", "fmax": "max", "max": "max", "fminf": "min", "fmin": "min", "min": "min"}
_ATOMIC_OP = {"atomicAdd": "sum", "atomicSub": "sum", "atomicMax": "max", "atomicMin": "min"}
# cache-hinted loads and stores: plain accesses of their pointer for roles and dataflow
CACHE_HINT_LOADS = frozenset({"__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv"})
CACHE_HINT_STORES = frozenset({"__stcg", "__stcs", "__stwb", "__stwt"})
CG_SCOPES = {"this_thread_block": "block", "this_grid": "grid", "tiled_partition": "warp",
             "coalesced_threads": "warp", "this_multi_grid": "grid"}  # fmt: skip


class CallMixin(BodyState):
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
        elif name in CACHE_HINT_LOADS and args:  # `__ldcs(p)`: a read of *p
            self._through_pointer(node, args[0], "read")
            args = args[1:]
        elif name in CACHE_HINT_STORES and len(args) == 2:  # `__stcs(p, v)`: *p = v
            self._through_pointer(node, args[0], "write")
            args = args[1:]
        elif ck == CallKind.DEVICE:
            args = self._device_call(node, name, args)
        for a in args:
            self.expr(a, "read")

    def _through_pointer(self, node: Node, ptr: Node, kind: str) -> None:
        """An access of `*ptr` made by an intrinsic: `&a[i]` is `a[i]`, `a + i` is `*(a + i)`."""
        ptr = unparen(ptr)
        inner = ptr.child_by_field_name("argument") if ptr.type == "pointer_expression" else None
        op = ptr.child_by_field_name("operator") if inner is not None else None
        if (
            inner is not None
            and op is not None
            and self.p.text(op) == "&"
            and inner.type == "subscript_expression"
        ):
            self._subscript(inner, kind)
            return
        if ptr.type != "identifier":
            self.expr(ptr, "read")
        self._record(node, ptr, [], kind)

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
            return CG_SCOPES.get(inner, "block")
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
        target = unparen(args[0])
        while target.type == "cast_expression" and target.child_by_field_name("value"):
            target = unparen(target.child_by_field_name("value"))  # type: ignore[arg-type]
        if target.type == "pointer_expression" and target.child_by_field_name("argument"):
            inner = target.child_by_field_name("argument")
            inner = unparen(inner) if inner is not None else None  # `&(y[a[i]])`
            if inner is not None and inner.type == "subscript_expression":
                self._subscript(inner, "atomic")
            else:
                self.expr(target, "atomic")
        else:
            self._record(node, target, [], "atomic")
            # `y + a[i]`: the offset's loads are reads of their own arrays
            for sub in _descendants(target, "subscript_expression"):
                self.expr(sub, "read")
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

    def _device_call(self, node: Node, name: str, args: list[Node]) -> list[Node]:
        """Pointer roles and reductions of a helper count for its caller; an element of memory
        bound to a reference parameter the helper sets (`add(x[n], y[n], z[n])` with `double
        &z`) is updated there (read and written: the helper's reads of it are not told apart).
        Returns the arguments still to be read as values."""
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
        plain = list(args)
        for arg, param in zip(args, callee.params, strict=False):
            in_memory = unparen(arg).type in ("subscript_expression", "pointer_expression")
            if param.is_reference and not param.is_const and param.role == "out" and in_memory:
                self.expr(unparen(arg), "update")
                plain.remove(arg)
                continue
            if param.is_reference and not param.is_const and unparen(arg).type == "identifier":
                # `mulAndScale(a, b, c)` with `fComplex &a`: the helper may change the local,
                # so its value after the call is not the one this analysis tracked
                local, why = self.p.text(unparen(arg)), f"{self.p.text(arg)} is set by {name}()"
                var = self.env.lookup(local)
                if var is not None and var.kind in ("value", "opaque", "param"):
                    self.env.assign(
                        local, Var("opaque", reason=why, deps=var.deps, ctx=var.ctx,
                                   expr=opaque(local, why)),
                    )  # fmt: skip
            role = param.role
            target = self.resolve_pointer(arg)
            if target is None or target.base is None:
                continue
            ev = self.facts.role_evidence.setdefault(target.base, set())
            if role in ("in", "inout"):
                ev.add("read")
            if role in ("out", "inout"):
                ev.add("write")
        return plain

    def _maybe_reduction(
        self, node: Node, left: Node, op: str, right: Node | None
    ) -> tuple[str, str] | None:
        """Recognise a reduction step; returns (op, style) or None."""
        if right is None:
            return None
        has_shfl = _contains_call(self.p, right, WARP_INTRINSICS | {".shfl_down", ".shfl_xor"})
        red_op = _COMPOUND_OPS.get(op)
        target = self.p.text(left)
        if red_op is None and op == "=":
            red_op = self._combine_op(right, left)
        if red_op is None:
            return None
        if left.type == "identifier":
            var = self.env.lookup(target)
            if var is None or var.kind not in ("opaque", "value", "param"):
                return None
            if has_shfl:
                style = "warp_shuffle"
            elif self.loop_stack and var.ctx >= self.loop_depths[-1]:
                return None  # declared inside the loop: a fresh value each iteration, not carried
            elif self.loop_stack:
                style = "loop_accumulate"
            else:
                return None
        elif left.type == "subscript_expression" and self.loop_stack:
            base = self.resolve_pointer(subscript_base(left))
            if base is None or base.space != "shared":
                return None
            if not _contains_name(self.p, right, base.base or ""):
                return None
            style, target = "shared_tree", base.base or target
        else:
            return None
        if any(r.target == target and r.style == style for r in self.facts.reductions):
            return red_op, style
        self.facts.reductions.append(
            Reduction(
                target=target,
                op=red_op,
                style=style,  # type: ignore[arg-type]
                loop=self.loop_stack[-1] if self.loop_stack else None,
                span=self.p.span(node),
            )
        )
        return red_op, style

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
            if name in FMA and len(texts) == 3 and texts[2] == lt:
                return "sum"
        return None


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


def _descendants(n: Node, kind: str) -> list[Node]:
    """The outermost descendants of `n` of node type `kind`."""
    out: list[Node] = []
    for c in n.named_children:
        out += [c] if c.type == kind else _descendants(c, kind)
    return out
