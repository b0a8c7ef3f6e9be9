"""Accumulating loops run their body over every step at once.

`for (int x = 0; x < d; x++) sum += Qi[tx * d + x] * Kj[y * d + x];` costs one interpreted
statement per step, each over every lane: the score and value loops of llm.c's flash attention
were four fifths of its run. Where a `for` loop's body is one compound assignment to a local
(`acc op= E`) that neither the loop's condition, nor its update, nor E reads, and nothing in the
loop but that assignment and the update has an effect, the steps do not depend on the body.
(Before the assignment, the body may declare a step's temporaries, `float v = a[j] * w;`, and
its first statement may be `if (C) break;`, C read with the control.) Then:

1. the loop's control runs first, as `_loop` runs it (the condition, any `if (C) break;` and
   the update, each interpreted), recording each step's lanes and the values of the variables
   the update steps;
2. the temporaries and E are evaluated once over every (step, lane) pair: a LaneView that
   repeats each lane once per step it runs, the stepped variables at each step's values;
3. the assignments are applied step by step in order, each with the operations the statement
   itself would use (a contracted `acc += a * b` as one fma, conversions to the local's type),
   so every value and rounding is the sequential loop's.

Whatever the widened evaluation cannot vouch for undoes it all and runs the loop as usual: a
finding it would log, an error it would raise, a run past its statement budget. Findings and
errors are then exactly the sequential loop's, in its order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from tree_sitter import Node

from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp.builtins import MATH
from migrator.cuda.interp.compact import CASTS, LaneView, _gather
from migrator.cuda.interp.findings import FindingLog
from migrator.cuda.interp.half import HALF_BUILTINS
from migrator.cuda.interp.scope import CompLV, Loop, MemLV, Var
from migrator.cuda.interp.span import take
from migrator.cuda.interp.values import Val

if TYPE_CHECKING:
    from migrator.cuda.interp.machine import Machine
    from migrator.cuda.interp.memory import Buffer

# calls with no effect but their value (math, half conversions, read-only cache loads, casts)
PURE_CALLS = frozenset({*MATH, *HALF_BUILTINS, "__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu",
                        "__ldcv", *CASTS})  # fmt: skip
# expression nodes with no effect of their own (their operands are scanned too)
PURE_NODES = frozenset({
    "identifier", "number_literal", "char_literal", "true", "false", "null", "nullptr",
    "parenthesized_expression", "binary_expression", "unary_expression", "pointer_expression",
    "subscript_expression", "field_expression", "cast_expression", "conditional_expression",
    "call_expression", "argument_list", "sizeof_expression", "field_identifier", "comment",
    "subscript_argument_list",
})  # fmt: skip
MIN_STEPS = 2  # a loop of one step gains nothing from the widened evaluation
# lanes in the loop past which it runs step by step: a statement over that many lanes costs its
# arithmetic, not its interpretation, and the steps' pairs would only move more memory (a
# 512^3 tiled matmul's 262144 lanes x 16 steps: 2.0 -> 2.9 s widened)
MAX_LANES = 1 << 13
MAX_PAIRS = 1 << 20  # (step, lane) pairs evaluated at once (more: a group of steps at a time)


@dataclass(frozen=True)
class Plan:
    acc: str  # the local the body accumulates into
    op: str  # its compound assignment (`+=`)
    stmt: Node  # the body's statement (what `exec` counts and reports)
    assign: Node  # its assignment expression
    rhs: Node  # E
    stepped: tuple[str, ...]  # the variables the update assigns
    names: frozenset[str]  # the identifiers E and the declarations read (not those declared)
    decls: tuple[Node, ...] = ()  # the body's declarations of a step's temporaries, before it
    guard: Node | None = None  # C of a first statement `if (C) break;`
    # "acc": `acc op= E` into a local; "map": `X[i] op= E` into a local array X whose element
    # each step writes is its own (a register tile's `c[m][n] = fmaf(a[m], b[n], c[m][n])`),
    # E reading X only there
    kind: str = "acc"
    # a counted loop (`for (k = ...; k < BK; k++)`): the stepped variable, the comparison, its
    # bound (a number or a variable), the step's operator and amount (a number or a variable)
    counted: tuple[str, str, Node, str, Node | None] | None = None


def plan_of(m: Machine, node: Node) -> Plan | None:
    """The loop's plan, or None where its body is not one accumulation (cached per node)."""
    cache: dict[int, Plan | None] = m.program.widen_plans
    if node.id not in cache:
        cache[node.id] = _plan(m, node)
    return cache[node.id]


def _plan(m: Machine, node: Node) -> Plan | None:
    body = node.child_by_field_name("body")
    cond = node.child_by_field_name("condition")
    update = node.child_by_field_name("update")
    if body is None or cond is None or update is None:
        return None
    stmt, decls, guard = body, [], None
    if body.type == "compound_statement":
        parts = [c for c in body.named_children if c.type != "comment"]
        guard = _break_guard(m, parts[0]) if parts else None
        parts = parts[1:] if guard is not None else parts
        if not parts:
            return None
        stmt, decls = parts[-1], parts[:-1]
    if stmt.type != "expression_statement" or len(stmt.named_children) != 1:
        return None
    assign = stmt.named_children[0]
    if assign.type != "assignment_expression":
        return None
    op, left, rhs = m.operator_parts(assign)
    if left.type == "subscript_expression" and guard is None:
        return _map_plan(m, stmt, assign, left, rhs, cond, update, decls)
    if op == "=" or left.type != "identifier":
        return None
    acc = m.parsed.text(left)
    names: set[str] = set()
    parts = _parts(m, cond, update, decls, guard, names)
    if parts is None or not _pure(m, rhs, names):
        return None
    stepped, seen, declared = parts
    if acc in names or acc in seen or acc in stepped or acc in declared:
        return None
    return Plan(acc, op, stmt, assign, rhs, tuple(sorted(stepped)), frozenset(names - declared),
                tuple(decls), guard, counted=_counted_parts(m, cond, update, stepped))  # fmt: skip


def _parts(
    m: Machine, cond: Node, update: Node, decls: list[Node], guard: Node | None, names: set[str]
) -> tuple[set[str], set[str], set[str]] | None:
    """The loop's control and temporaries, checked: (the variables the update steps, the
    names the control reads, the temporaries declared), collecting into `names` what the
    temporaries read; None where any has an effect or a temporary shadows what the control
    reads."""
    stepped: set[str] = set()
    seen: set[str] = set()
    declared: set[str] = set()
    if not all(_local_decl(m, d, names, declared) for d in decls):
        return None
    if not _pure(m, cond, seen) or not _steps(m, update, stepped, seen) or not stepped:
        return None
    if guard is not None and not _pure(m, guard, seen):
        return None
    if declared & (stepped | seen):
        return None  # (a local of the body shadowing what the loop's control reads)
    return stepped, seen, declared


def _map_plan(
    m: Machine, stmt: Node, assign: Node, left: Node, rhs: Node, cond: Node, update: Node,
    decls: list[Node],
) -> Plan | None:  # fmt: skip
    """`X[i]...[j] op= E`: the plan of a loop whose steps each write their own element of X
    (checked as the loop runs: distinct elements, all inside X), E reading X only at the
    element assigned (any other element of X may be another step's)."""
    base = left
    while base.type == "subscript_expression":
        arg = base.child_by_field_name("argument")
        if arg is None:
            return None
        base = arg
    if base.type != "identifier":
        return None
    target = m.parsed.text(base)
    names: set[str] = set()
    lhs: set[str] = set()
    parts = _parts(m, cond, update, decls, None, names)
    if parts is None or not _pure(m, left, lhs) or not _pure(m, rhs, names, m.parsed.text(left)):
        return None
    stepped, seen, declared = parts
    if target in names or target in declared:
        return None  # (E reads another element of X, which may be another step's)
    names |= lhs - {target}
    if target in seen or target in stepped:
        return None
    return Plan(target, m.operator_parts(assign)[0], stmt, assign, rhs, tuple(sorted(stepped)),
                frozenset(names - declared), tuple(decls), kind="map",
                counted=_counted_parts(m, cond, update, stepped))  # fmt: skip


def _counted_parts(
    m: Machine, cond: Node, update: Node, stepped: set[str]
) -> tuple[str, str, Node, str, Node | None] | None:
    """`k < n` (<, <=, >, >=, !=; n a number or a name) with `k++`, `--k`, `k += s`, `k -= s`
    (s a number or a name), k the loop's one stepped variable; else None."""
    if len(stepped) != 1 or cond.type != "binary_expression":
        return None
    (k,) = stepped
    op, left, bound = m.operator_parts(cond)
    if (op not in ("<", "<=", ">", ">=", "!=") or left.type != "identifier"
            or m.parsed.text(left) != k or bound.type not in ("number_literal", "identifier")
            or m.parsed.text(bound) == k):  # fmt: skip
        return None
    if update.type == "update_expression":
        sign = m.parsed.text(update.child_by_field_name("operator") or update)
        return (k, op, bound, "+" if sign == "++" else "-", None)
    if update.type == "assignment_expression":
        aop, _, amount = m.operator_parts(update)
        if (
            aop in ("+=", "-=")
            and amount.type in ("number_literal", "identifier")
            and (m.parsed.text(amount) != k)
        ):
            return (k, op, bound, aop[0], amount)
    return None


def _break_guard(m: Machine, node: Node) -> Node | None:
    """The condition of `if (C) break;` (`{ break; }` too, no else), else None."""
    if node.type != "if_statement" or node.child_by_field_name("alternative") is not None:
        return None
    then, cond = node.child_by_field_name("consequence"), node.child_by_field_name("condition")
    if then is None or cond is None:
        return None
    inner = ([c for c in then.named_children if c.type != "comment"]
             if then.type == "compound_statement" else [then])  # fmt: skip
    if len(inner) != 1 or inner[0].type != "break_statement":
        return None
    if cond.type == "condition_clause":
        value = cond.child_by_field_name("value")
        return None if value is None or value.type == "declaration" else value
    return cond


def _local_decl(m: Machine, node: Node, names: set[str], declared: set[str]) -> bool:
    """Whether `node` declares plain locals, each initialised by a pure expression (`float v =
    att[t2] * (ind - att[t3]);`: a step's temporary); collects what the initialisers read and
    the names declared."""
    if node.type != "declaration":
        return False
    for c in node.named_children:
        if c.type in ("storage_class_specifier", "attribute_declaration", "ms_declspec_modifier"):
            return False  # (`static`, `__shared__`: not a step's temporary)
        if c.type == "init_declarator":
            inner, value = c.child_by_field_name("declarator"), c.child_by_field_name("value")
            if inner is None or inner.type != "identifier" or value is None:
                return False
            if value.type in ("initializer_list", "argument_list") or not _pure(m, value, names):
                return False
            declared.add(m.parsed.text(inner))
        elif c.type in ("identifier", "array_declarator", "pointer_declarator",
                        "reference_declarator", "function_declarator"):  # fmt: skip
            return False  # (declared without an initialiser, or not a plain local)
    return bool(declared)


def _pure(m: Machine, node: Node, names: set[str], skip: str | None = None) -> bool:
    """Whether `node` has no effect but its value; collects the identifiers it reads, except
    in subscripts spelt `skip` (the element a map loop assigns, which E may read)."""
    t = node.type
    if t not in PURE_NODES:
        return t in ("type_descriptor", "primitive_type", "sized_type_specifier")
    if skip is not None and t == "subscript_expression" and m.parsed.text(node) == skip:
        return _pure(m, node, set())
    if t == "identifier":
        names.add(m.parsed.text(node))
        return True
    if t == "call_expression":
        fn = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        if fn is not None and fn.type == "template_function":
            fn = fn.child_by_field_name("name")  # `static_cast<float>(x)`
        if fn is None or fn.type != "identifier" or m.parsed.text(fn) not in PURE_CALLS:
            return False
        return args is None or _pure(m, args, names, skip)
    return all(_pure(m, c, names, skip) for c in node.named_children)


def _steps(m: Machine, node: Node, stepped: set[str], names: set[str]) -> bool:
    """Whether the update only steps variables (`x++`, `k += 4`, `a += s, b += t`); collects
    them, and the identifiers the steps read."""
    t = node.type
    if t == "comma_expression":
        return all(_steps(m, c, stepped, names) for c in node.named_children)
    if t == "parenthesized_expression" and len(node.named_children) == 1:
        return _steps(m, node.named_children[0], stepped, names)
    if t == "update_expression":
        arg = node.child_by_field_name("argument")
        if arg is None or arg.type != "identifier":
            return False
        stepped.add(m.parsed.text(arg))
        return True
    if t == "assignment_expression":
        _, left, right = m.operator_parts(node)
        if left.type != "identifier":
            return False
        stepped.add(m.parsed.text(left))
        names.add(m.parsed.text(left))
        return _pure(m, right, names)
    return False


def run(
    m: Machine, node: Node, mask: np.ndarray, cond: Node | None, body: Node, update: Node | None
) -> bool:
    """Run the `for` loop `node` (its initialiser done) widened; False (nothing done) where its
    plan or its variables do not allow it."""
    if not m.options.widen or m.active_count(mask) > MAX_LANES:
        return False
    plan = plan_of(m, node)
    if plan is None or cond is None or update is None:
        return False
    if m.options.trace and plan.kind != "map":
        # (an accumulator's steps are applied outside the evaluator, where a traced value
        # would not get its source row; a map's every value is made by the statement itself)
        return False
    acc = m.lookup(plan.acc)
    if not isinstance(acc, Var) or acc.init is not None or acc.val.comps is not None:
        return False
    buf = acc.val.buf
    if plan.kind == "map":  # a local array, each lane its own row
        if buf is None or buf.space != "local" or buf.per != "lane" or np.ndim(acc.val.data):
            return False
    elif not acc.ctype.is_arith or buf is not None:
        return False
    stepped = [m.lookup(n) for n in plan.stepped]
    if not all(isinstance(v, Var) and v.val.comps is None for v in stepped):
        return False
    bound: list[Var] = []
    for name in plan.names:
        b = m.lookup(name)
        if isinstance(b, Var):
            if buf is not None and b.val.buf is buf:
                return False  # (a pointer into the map's array: E may read another element)
            bound.append(b)
        elif isinstance(b, CompLV) or (isinstance(b, MemLV) and np.ndim(b.ptr.data) > 0):
            return False  # a reference into memory at per-lane addresses
    steps_vars: list[Var] = stepped  # type: ignore[assignment]
    mark = _Mark(m, steps_vars)
    try:
        statements = 1 + len(plan.decls)
        records = _counted(m, plan, mask, steps_vars, statements, update)
        if records is False:  # (not a counted loop of uniform steps: interpreted)
            records = _control(m, node, mask, cond, update, steps_vars, statements, plan.guard)
        widened = _widened_map if plan.kind == "map" else _widened
        done = (records is not None and len(records) >= MIN_STEPS
                and widened(m, plan, acc, records, steps_vars, bound))  # fmt: skip
    except Exception:  # (the sequential loop raises it, or its own, where it arises)
        done = False
    if not done:
        mark.undo()
        m._loop(node, mask, cond, body, update, True)
    return True


class _Mark:
    """What the control and the widened evaluation may change, to undo them."""

    def __init__(self, m: Machine, stepped: list[Var]) -> None:
        self.m = m
        self.log: FindingLog = m.log
        self.items = len(self.log.items)
        self.counts = [f.count for f in self.log.items]
        self.statements = m.thread_statements
        self.stepped = [(v, v.val, v.init) for v in stepped]

    def changed(self) -> bool:
        """Whether a finding was logged since."""
        log = self.log
        return len(log.items) != self.items or any(
            f.count != c for f, c in zip(log.items, self.counts, strict=False)
        )

    def undo(self) -> None:
        log = self.log
        for f in log.items[self.items :]:
            log._index = {k: v for k, v in log._index.items() if v is not f}
        del log.items[self.items :]
        for f, c in zip(log.items, self.counts, strict=True):
            f.count = c
        self.m.thread_statements = self.statements
        for v, val, init in self.stepped:
            v.val, v.init = val, init


def _uniform_int(m: Machine, node: Node, mask: np.ndarray) -> Val | None:
    """A number, or a variable holding one int for every lane (no read to report)."""
    if node.type == "number_literal":
        v = m.ev(node, mask)
    else:
        b = m.lookup(m.parsed.text(node))
        if not isinstance(b, Var) or b.init is not None:
            return None
        v = b.val
    if v.ctype.kind != "int" or v.comps is not None or v.buf is not None or np.ndim(v.data):
        return None
    return v


def _counted(
    m: Machine, plan: Plan, mask: np.ndarray, stepped: list[Var], statements: int, update: Node
) -> list[tuple[np.ndarray, list[Val]]] | None | bool:
    """The steps of a counted loop whose variable, bound and step are one int for every lane
    (`for (int tn = 0; tn < TN; tn++)`), computed as the loop's own comparisons and additions
    would (`binary`, C's conversions and wrap-around) without interpreting them; False where
    the loop is not one, None where the sequential loop must run (limits)."""
    from migrator.cuda.interp.ops import binary
    from migrator.cuda.interp.scope import VarLV

    if plan.counted is None or plan.guard is not None:
        return False
    _, op, bound_node, sign, amount = plan.counted
    (k,) = stepped
    if k.ctype is not ct.INT or k.init is not None or np.ndim(k.val.data) or k.val.comps:
        return False
    bound = _uniform_int(m, bound_node, mask)
    step = _ONE if amount is None else _uniform_int(m, amount, mask)
    if bound is None or step is None:
        return False
    active = m.frame.running(mask, Loop(mask, mask))  # (not broken out of: returned lanes)
    n = m.active_count(active)
    records: list[tuple[np.ndarray, list[Val]]] = []
    if not n:
        return records
    cap = m.options.max_thread_statements
    v = k.val
    for it in range(m.options.max_loop_iterations + 1):
        if it == m.options.max_loop_iterations:
            return None
        if not bool(binary(op, v, bound, m.float_t).data):
            break
        records.append((active, [v]))
        m.thread_statements += n * statements
        if cap and m.thread_statements > cap:
            return None
        v = binary(sign, v, step, m.float_t)
        if v.ctype is not ct.INT:
            return None
    if records:  # (the update's store: lanes outside the loop keep their value)
        VarLV(k).store(m, v, active, update)
    return records


_ONE = Val(ct.INT, np.int32(1))


def _control(
    m: Machine, node: Node, mask: np.ndarray, cond: Node, update: Node, stepped: list[Var],
    statements: int, guard: Node | None,
) -> list[tuple[np.ndarray, list[Val]]] | None:  # fmt: skip
    """The loop's steps as `_loop` takes them, without the body: each step's lanes and the
    stepped variables' values there. None where the sequential loop must run instead (a
    finding, the iteration limit, the statement budget)."""
    mark = _Mark(m, [])
    loop = Loop(np.zeros(m.geo.n, dtype=bool), np.zeros(m.geo.n, dtype=bool))
    m.frame.loops.append(loop)
    records: list[tuple[np.ndarray, list[Val]]] = []
    cap = m.options.max_thread_statements
    try:
        active = mask
        for it in range(m.options.max_loop_iterations + 1):
            if it == m.options.max_loop_iterations:
                return None  # (the sequential loop says so)
            active = m.frame.running(active, loop)
            active = m.truth(cond, active)
            n = m.active_count(active)
            if not n:
                break
            if guard is not None:  # `if (C) break;`: the if, the breaks; those lanes leave
                m.thread_statements += n
                leave = m.truth(guard, active)
                if m.active_count(leave):
                    m.thread_statements += m.active_count(leave)
                    active = active & ~leave
                    n = m.active_count(active)
                    if not n:
                        break
            records.append((active, [v.val for v in stepped]))
            m.thread_statements += n * statements  # (the body's, as `exec` counts them)
            if cap and m.thread_statements > cap:
                return None
            m.ev(update, active)
    finally:
        m.frame.loops.pop()
    return None if mark.changed() else records


def _widened(
    m: Machine, plan: Plan, acc: Var, records: list[tuple[np.ndarray, list[Val]]],
    stepped: list[Var], bound: list[Var],
) -> bool:  # fmt: skip
    """Evaluate E over every recorded (step, lane) and apply the assignments in order; False
    (acc untouched) where a finding was logged meanwhile."""
    mark = _Mark(m, [])
    lanes = [np.flatnonzero(active) for active, _ in records]
    n = m.geo.n
    old = acc.val
    data = np.array(np.broadcast_to(old.data, (n,)))
    for start, stop in _groups(lanes):
        values = _evaluate(m, plan, records[start:stop], lanes[start:stop], stepped, bound,
                           old.ctype == ct.FLOAT)  # fmt: skip
        if mark.changed():
            return False
        if _fold_f32(m, plan, acc, old, values, data, lanes[start:stop]):
            continue
        offset = 0
        for k in range(start, stop):
            idx = lanes[k]
            part = [_part(v, offset, idx.size) for v in values]
            offset += idx.size
            cur = Val(old.ctype, data[idx])
            new = _assign(m, plan, acc.ctype, cur, part)
            got = np.asarray(new.data)
            if got.dtype != data.dtype:
                return False
            data[idx] = got
    if mark.changed():
        return False
    acc.val = Val(acc.ctype, data)
    return True


def _fold_f32(
    m: Machine, plan: Plan, acc: Var, old: Val, values: list[Val], data: np.ndarray,
    lanes: list[np.ndarray],
) -> bool:  # fmt: skip
    """The steps' assignments to a float accumulator in plain numpy, where they are what
    `_assign` computes: a contracted `acc ± a * b` (a and b float: `fma_f32`, the product in
    float64 and one rounding to float), or `acc ± E` and `acc *= E` with E a float (one float
    operation, rounded). False (nothing done) for any other statement or type."""
    from migrator.cuda.interp.values import convert

    if (acc.ctype != ct.FLOAT or old.ctype != ct.FLOAT or data.dtype != np.float32
            or ct.arith_result(ct.FLOAT, ct.FLOAT, m.float_t) != ct.FLOAT):  # fmt: skip
        return False
    op = plan.op[0]
    if len(values) == 2:
        x, y = values
        if op not in "+-" or ct.arith_result(x.ctype, y.ctype, m.float_t) != ct.FLOAT:
            return False
        xs, ys = (v.data if v.ctype == ct.FLOAT else convert(v, ct.DOUBLE).data for v in values)
        terms = np.multiply(xs, ys, dtype=np.float64)  # (exact: 24 + 24 bits < 53)
        wide = True
    else:
        (e,) = values
        if (op not in "+-*" or e.ctype != ct.FLOAT or e.comps is not None
                or np.asarray(e.data).dtype != np.float32):  # fmt: skip
            return False
        terms, wide = e.data, False
    total = sum(idx.size for idx in lanes)
    terms = np.broadcast_to(terms, (total,)) if np.ndim(terms) == 0 else terms
    fn = {"+": np.add, "-": np.subtract, "*": np.multiply}[op]
    if _same_lanes(lanes):  # one gather, a row per step, one scatter
        idx = lanes[0]
        rows = terms.reshape(len(lanes), idx.size)
        cur = data[idx]
        for row in rows:
            cur = fn(cur, row, dtype=np.float64).astype(np.float32) if wide else fn(cur, row)
        data[idx] = cur
        return True
    offset = 0
    for idx in lanes:
        row = terms[offset : offset + idx.size]
        offset += idx.size
        cur = data[idx]
        data[idx] = fn(cur, row, dtype=np.float64).astype(np.float32) if wide else fn(cur, row)
    return True


def _groups(lanes: list[np.ndarray]) -> Iterator[tuple[int, int]]:
    """Consecutive groups of steps (start, stop), in order, of at most MAX_PAIRS (step, lane)
    pairs each (a step with more: alone)."""
    start = 0
    while start < len(lanes):
        stop, pairs = start, 0
        while stop < len(lanes) and (stop == start or pairs + lanes[stop].size <= MAX_PAIRS):
            pairs += lanes[stop].size
            stop += 1
        yield start, stop
        start = stop


def _same_lanes(lanes: list[np.ndarray]) -> bool:
    """Whether every step runs on the same lanes (a loop no lane leaves early)."""
    return all(idx is lanes[0] or np.array_equal(idx, lanes[0]) for idx in lanes)


def _part(v: Val, offset: int, size: int) -> Val:
    if np.ndim(v.data) == 0:
        return v
    return Val(v.ctype, v.data[offset : offset + size], buf=v.buf)


@contextlib.contextmanager
def _over_steps(
    m: Machine, records: list[tuple[np.ndarray, list[Val]]], lanes: list[np.ndarray],
    stepped: list[Var], bound: list[Var],
) -> Iterator[np.ndarray]:  # fmt: skip
    """The machine over the steps' (step, lane) pairs: a LaneView repeating each lane once per
    step it runs, the variables E reads gathered to it (the stepped ones at each step's value),
    a scope for the body's temporaries. Yields the all-active mask; restores everything."""
    idx = np.concatenate(lanes)
    saved = [(v, v.val, v.init) for v in bound]
    statements, scoped = m.thread_statements, False
    at_steps = {id(v): n for n, v in enumerate(stepped)}
    parent = m.geo
    try:
        for v in bound:
            k = at_steps.get(id(v))
            if k is None:
                v.val = _gather(v.val, idx)
            else:  # each step's own value
                v.val = _steps_value([vals[k] for _, vals in records], lanes)
            if v.init is not None:
                v.init = take(v.init, idx, None)
        m.geo = LaneView(parent, idx)  # type: ignore[assignment]
        m.frame.scopes.append({})  # (the body's block: its temporaries, one per (step, lane))
        scoped = True
        yield m.geo.full
    finally:
        if scoped:
            m.frame.scopes.pop()
        m.thread_statements = statements  # (the control counted the body's statements)
        m.geo = parent
        for v, val, init in saved:
            v.val, v.init = val, init


def _evaluate(
    m: Machine, plan: Plan, records: list[tuple[np.ndarray, list[Val]]],
    lanes: list[np.ndarray], stepped: list[Var], bound: list[Var], contracted: bool,
) -> list[Val]:  # fmt: skip
    """E (or, where the statement contracts `acc += a * b`, a and b) over the steps' lanes."""
    with _over_steps(m, records, lanes, stepped, bound) as full:
        for d in plan.decls:
            m.exec(d, full)
        mul = m.contracted_operands(plan.op, plan.rhs)
        if mul is not None and contracted:  # (as `_e_assign`: a and b, the product unrounded)
            return [m.ev(mul[0], full), m.ev(mul[1], full)]
        return [m.ev(plan.rhs, full)]


def _widened_map(
    m: Machine, plan: Plan, target: Var, records: list[tuple[np.ndarray, list[Val]]],
    stepped: list[Var], bound: list[Var],
) -> bool:  # fmt: skip
    """Every step's assignment to its own element of the local array X at once (a group of
    steps at a time, in order); False (X as it was) where the elements of a group are not all
    distinct and inside X, or a finding was logged meanwhile."""
    mark = _Mark(m, [])
    buf = target.val.buf
    assert buf is not None
    undo: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = []
    all_init = buf.all_init
    lanes = [np.flatnonzero(active) for active, _ in records]
    ok = False
    try:
        ok = _map_groups(m, plan, buf, records, lanes, stepped, bound, mark, undo)
    finally:
        if not ok:
            for flat, data, init in reversed(undo):
                buf.data[flat] = data
                if init is not None and buf.init is not None:
                    buf.init[flat] = init
            buf.all_init = all_init
    return ok


def _map_groups(
    m: Machine, plan: Plan, buf: Buffer, records: list[tuple[np.ndarray, list[Val]]],
    lanes: list[np.ndarray], stepped: list[Var], bound: list[Var], mark: _Mark,
    undo: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]],
) -> bool:  # fmt: skip
    """`_widened_map`'s groups of steps, each stored once checked (what it overwrote in
    `undo`)."""
    from migrator.cuda.interp.values import lanes as lane_data

    for start, stop in _groups(lanes):
        pairs = sum(idx.size for idx in lanes[start:stop])
        with _over_steps(m, records[start:stop], lanes[start:stop], stepped, bound) as full:
            for d in plan.decls:
                m.exec(d, full)
            lv = m.lvalue(m.operator_parts(plan.assign)[1], full)
            if (not isinstance(lv, MemLV) or lv.ptr.buf is not buf or lv.ctype.kind == "vec"
                    or lv.ctype.dtype != buf.elem.dtype):  # fmt: skip
                return False
            off = np.asarray(lane_data(lv.ptr, pairs), dtype=np.int64)
            if off.size and (int(off.min()) < 0 or int(off.max()) >= buf.size):
                return False
            flat = m.geo.row_base("lane", buf.size) + off
            if not _distinct(flat, lanes[start:stop], buf.data.size):
                return False  # (two steps of a lane on one element: they depend on each other)
            undo.append((flat, buf.data[flat].copy(), None if buf.init is None
                         else buf.init[flat].copy()))  # fmt: skip
            m.ev(plan.assign, full)  # (as the statement evaluates it: a traced value's row)
        if mark.changed():
            return False
    return True


def _distinct(flat: np.ndarray, lanes: list[np.ndarray], size: int) -> bool:
    """Whether the flat elements (step-major over `lanes`) are all different: at once where
    every step has the same lanes and each lane's elements rise (or fall) from step to step
    (`acc[i][j]` over j), else by counting them."""
    if flat.size < 2:
        return True
    if _same_lanes(lanes):
        step = np.diff(flat.reshape(len(lanes), lanes[0].size), axis=0)
        if not step.size or bool((step > 0).all()) or bool((step < 0).all()):
            return True
    return int(np.bincount(flat, minlength=size).max()) <= 1


def _steps_value(vals: list[Val], lanes: list[np.ndarray]) -> Val:
    """One variable's values at each step, over the steps' lanes (step-major)."""
    t = vals[0].ctype
    if any(v.ctype != t or v.buf is not vals[0].buf for v in vals):
        raise TypeError("a stepped variable changes type or buffer")  # (run sequentially)
    parts = [np.broadcast_to(v.data, (idx.size,)) if np.ndim(v.data) == 0 else v.data[idx]
             for v, idx in zip(vals, lanes, strict=True)]  # fmt: skip
    return Val(t, np.concatenate(parts), buf=vals[0].buf)


def _assign(m: Machine, plan: Plan, t: ct.CType, old: Val, part: list[Val]) -> Val:
    """`acc op= E` at one step, as `_e_assign` computes it (E, or a and b, evaluated)."""
    return m.convert_to(m.compound_value(plan.op, old, part, plan.assign), t, plan.assign)
