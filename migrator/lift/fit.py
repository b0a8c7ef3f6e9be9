"""From traced output elements to one tensor program.

1. `canon`: each element's expression DAG becomes a canonical tree: `+`/`-` chains flatten into
   one sum, `*` chains into one product, `max`/`min` chains likewise (their identity constants,
   `-FLT_MAX`, `-INFINITY`, dropped), constants folded, operands sorted. Whatever tree shape a
   shuffle reduction, a shared-memory tree or a register tile gave the arithmetic, the sum over
   `k` comes out as one flat list of terms.
2. `fit_elements`: within a sum (product, max, min), terms with the same structure form a
   reduction; sorted by the input elements they read, the k-th term binds a new reduction
   variable to k. Every load's flat element is unravelled by its tensor's shape and each
   coordinate fitted as an integer affine map of the output coordinates and the reduction
   variables in scope (or a quasi-affine one, `(i // d) % m`), exactly, on every element.
3. `merge`: the programs fitted at two size sets must agree in structure; each number that
   differs between them (an extent, a stride, `1/N`) is replaced by the size expression that
   gives both values.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from migrator.contract import eval_expr
from migrator.cuda.interp.traced import FMA_OPS, Sym
from migrator.lift import transfer
from migrator.lift.program import (
    Assign,
    Expr,
    Gather,
    IndexMap,
    LiftError,
    Program,
    Term,
)

Canon = tuple[Any, ...]
_SUMS = frozenset({"+", "-", *FMA_OPS})  # traced operations `_chain` flattens into one sum


class _Product(NamedTuple):
    """The product of a traced multiply-add (`traced.multiply_add`), met in a sum's chain."""

    a: Any
    b: Any
    at: tuple[int, int]


_chained = itertools.chain.from_iterable  # keys concatenate their leaves' indices (in C)
OUT_VARS = ("i", "j", "l", "m", "n")
RED_VARS = ("k", "q", "r", "s", "t", "u", "w")
_FUNCS = {"exp", "exp2", "log", "log2", "sqrt", "tanh", "sin", "cos", "erf", "abs"}
_NARY = ("sum", "prod", "max", "min")
_OP_OF = {"sum": "+", "prod": "*", "max": "max", "min": "min"}
MAX_NODES = 5000  # program nodes one fit may build (Fitter.node)
MAX_CANON_WORK = 2_000_000  # operands copied per form fitted (100x a real GEMM or norm)
BUILD_EFFORT = 4  # a node built (rewrites, sorting) costs some values found in the memo
MAX_KEY_SIZE = 1_000_000  # characters plus input elements of one expression's structure key
# a max starting from -1e30 / -FLT_MAX / -INFINITY, or from what `cudaMemset(m, -10000.0f, n)`
# leaves (0xF0 bytes: -5.97e29): no operand (no value the tasks draw comes near)
_IDENTITY_LIMIT = 1e20


# --- 1. canonical trees ------------------------------------------------------------------------
def size_pool(sizes: Mapping[str, int]) -> list[int]:
    """The sizes above 1 and the products of two of them (the plane of a flat [B, T, C]
    tensor: `i % (T*C)`), ascending: the divisors a quasi-affine map is tried with first."""
    known = {s for s in sizes.values() if s > 1}
    return sorted(known | {a * b for a, b in itertools.combinations(sorted(known), 2)})


class Canonicaliser:
    def __init__(self, rename: bool = True) -> None:
        self.memo: dict[int, Canon] = {}
        self.keys: dict[int, tuple[str, tuple[float, ...]]] = {}
        # per n-ary node: the source rows (`Sym.at`) of the traced operations folded into it
        self.rows: dict[int, set[tuple[int, int]]] = {}
        self.work = 0  # operands copied by `nary` so far (MAX_CANON_WORK)
        # every tuple `keys` or `rows` holds an entry for, kept alive: they are keyed by id(),
        # and a temporary (a rewrite's candidate form) would hand its id to the next tuple
        self.held: list[Any] = []
        # maxima merges (`_by_one_select`): a condition is (comparison, operands' ids)
        self.conds: dict[int, frozenset[tuple[str, int, int]]] = {}  # `_conds`, by id
        self.cond_ops: dict[tuple[str, int, int], tuple[Canon, Canon]] = {}
        self.decided: dict[int, tuple[tuple[str, int, int], Canon, Canon]] = {}
        self.merges: set[tuple[str, int, int]] = set()  # conditions that made a max / min
        # hash-consing: a node built again from the same operands (by identity) is the node
        # built before, so the structurally equal values of different lanes (each lane of a
        # shuffle tree merges its own copy of every partial result) share their canonical
        # trees, and the rewrites below (memoised by id) run once for all of them
        self.shared: dict[tuple[Any, ...], tuple[tuple[Any, ...], Canon, bool]] = {}
        # `_subtracting`'s rewrites, by (node, old, new) ids (the three kept with the entry)
        self.substituted: dict[tuple[int, int, int], tuple[Canon, Canon, Canon, Canon]] = {}
        # values renamed from one of the same shape (`transfer`): per value, its shape (hash,
        # size, reads an input); per shape, values canonicalised before and their effort; per
        # shape and for the fit (None), renaming's ledger (steps spent, effort saved)
        self.rename = rename
        self.shapes: dict[int, tuple[int, int, bool]] = {}
        self.templates: dict[int, list[tuple[Sym, int]]] = {}
        self.ledger: dict[int | None, tuple[int, int]] = {}
        self.effort = 0  # values canonicalised, and nodes built (BUILD_EFFORT each), so far
        self.pending: dict[int, tuple[Sym, Any]] = {}  # values a transfer renames when asked
        self.grouped: dict[int, tuple[Canon, list[tuple[str, list[Canon]]]]] = {}  # `_groups`

    def __call__(self, x: Any) -> Canon:
        if not isinstance(x, Sym):
            return ("c", float(x))
        got = self.memo.get(id(x))
        if got is not None:
            return got
        if self.rename:
            got = transfer.pending(self, x) if self.pending else None
            if got is None:
                got = transfer.transferred(self, x)
            if got is not None:
                return got
        before = self.effort
        out = self._canon(x)
        self.effort += 1
        self.memo[id(x)] = out
        self.held.append(x)  # (keyed by id: a freed value's id would find this entry)
        if self.rename:
            transfer.offer(self, x, self.effort - before)
        return out

    def _canon(self, x: Sym) -> Canon:
        op, a = x.op, x.args
        if op == "in":
            return self._consed(("in", a[0], int(a[1])), (), lambda: (("in", a[0], int(a[1])), 0))
        if op == "param":
            return self._consed(("p", a[0]), (), lambda: (("p", a[0]), 0))
        if op in _SUMS:  # a chain of thousands of sequential additions: no recursion
            rows: set[tuple[int, int]] = set()
            return self.nary("sum", self._chain(x, rows), rows)
        if op == "neg":
            return self.neg(self(a[0]))
        if op == "*":
            return self.nary("prod", [self(a[0]), self(a[1])], {x.at})
        if op == "/":
            return self._div(self(a[0]), self(a[1]))
        if op in ("max", "min"):
            return self.nary(op, [self(a[0]), self(a[1])], {x.at})
        if op in _FUNCS:
            inner = self(a[0])
            if inner[0] == "c":
                return ("c", x.v)
            # (keyed apart from the nodes themselves: exp's operand is rewritten first)
            return self._consed(("fn", op), (inner,), lambda: (self._func(op, inner), 0))
        if op == "pow":
            base, power = self(a[0]), self(a[1])
            return self._consed(("pow",), (base, power), lambda: (("pow", base, power), 0))
        if op == "select":
            return self.select(a[0], self(a[1]), self(a[2]), self(a[3]), self(a[4]), x.at)
        raise LiftError(f"the traced operation {op!r} has no tensor-program form")

    def _func(self, op: str, inner: Canon) -> Canon:
        if op == "exp":
            inner = self._scaled_cancelled(inner)
            if inner[0] == "c":
                return ("c", math.exp(inner[1]))
            return self._consed(("exp",), (inner,), lambda: (("exp", inner), 0))
        return (op, inner)

    def _consed(
        self,
        head: tuple[Any, ...],
        operands: tuple[Canon, ...],
        build: Callable[[], tuple[Canon, int]],
        rows: set[tuple[int, int]] | None = None,
    ) -> Canon:
        """The node `build()` makes of `operands` under `head`, or the one it made before of
        the same operands (constants by value, the rest by identity: the operands are kept
        with the entry, so an id is never a freed node's). `build` returns the node and 1
        where the node is new and carries `rows` (its own source rows), 0 otherwise; a node
        found again gains the rows of this spelling too."""
        key = (*head, *(o if o[0] == "c" else id(o) for o in operands))
        hit = self.shared.get(key)
        if hit is not None and all(p is o or (o[0] == "c" and p == o)
                                   for p, o in zip(hit[0], operands, strict=True)):  # fmt: skip
            out = hit[1]
            if rows and hit[2]:
                self.rows.setdefault(id(out), set()).update(rows)
            return out
        out, fresh = build()
        self.effort += BUILD_EFFORT
        self.shared[key] = (operands, out, bool(fresh))
        self.held.append(out)
        return out

    def select(self, cmp: str, lhs: Canon, rhs: Canon, t: Canon, f: Canon,
               at: tuple[int, int] | None = None) -> Canon:  # fmt: skip
        return self._consed(("sel", cmp), (lhs, rhs, t, f),
                            lambda: (self._select(cmp, lhs, rhs, t, f, at), 0))  # fmt: skip

    def _select(self, cmp: str, lhs: Canon, rhs: Canon, t: Canon, f: Canon,
                at: tuple[int, int] | None = None) -> Canon:  # fmt: skip
        decided = _decided(cmp, lhs, rhs)
        if decided is not None:  # `-INFINITY > x`: a first step's comparison with the identity
            return t if decided else f
        if t == f:
            return t
        cond = (cmp, id(lhs), id(rhs))
        # `if (x > m) m = x;`: a running max (min) spelled as a select is a max (min)
        if cmp in (">", ">=", "<", "<=") and {t, f} == {lhs, rhs} and lhs != rhs:
            bigger = (t == lhs) == (cmp in (">", ">="))
            out = self.nary("max" if bigger else "min", [lhs, rhs], {at} if at else None)
            if out is not lhs and out is not rhs:
                # which operand it is, given the comparison (`_by_one_select`)
                self.decided[id(out)] = (cond, t, f)
                self.merges.add(cond)
                self.cond_ops[cond] = (lhs, rhs)
                self.held.extend((out, lhs, rhs))
            return out
        rescaled = self._rescaled(cmp, lhs, rhs, t, f)
        if rescaled is not None:
            return rescaled
        out = ("sel", cmp, lhs, rhs, t, f)
        self.cond_ops[cond] = (lhs, rhs)
        self.held.append(out)  # (its condition is keyed by the operands' ids: `_conds`)
        return out

    # A pair merged by comparing maxima (`big = a.m > b.m ? a : b; small = ...;
    # s = big.s + small.s * exp(small.m - big.m)`: an online softmax's merge of two partial
    # results) selects every field by one condition: the max and min it makes of the maxima,
    # and a select of the sums. A sum or product whose terms depend on such a condition
    # (two of them, or one through a select) is one select of the two sums (products), whose
    # branches `_rescaled` compares; field by field the selects would nest, each doubling the
    # spelled-out structure at every merge.
    def _conds(self, t: Canon) -> frozenset[tuple[str, int, int]]:
        """The conditions (comparison, operands' ids) of the selects within `t`."""
        got = self.conds.get(id(t))
        if got is not None:
            return got
        tag = t[0]
        out: frozenset[tuple[str, int, int]] = _NO_CONDS
        if tag == "sel":
            out = self._conds(t[4]) | self._conds(t[5]) | {(t[1], id(t[2]), id(t[3]))}
        elif tag not in ("c", "in", "p"):
            for y in t[1] if tag in _NARY else t[1:]:
                if isinstance(y, tuple):
                    c = self._conds(y)
                    if c:
                        out = out | c
        self.conds[id(t)] = out
        self.held.append(t)
        return out

    def _decided_by(self, t: Canon) -> tuple[str, int, int] | None:
        """The condition that decided the max / min `t` is (or `-t`), if one did."""
        d = self.decided.get(id(t))
        if d is None and t[0] == "prod" and len(t[1]) == 2 and t[1][0][0] == "c":
            d = self.decided.get(id(t[1][1]))
        return d[0] if d is not None else None

    def _branch(self, t: Canon, cond: tuple[str, int, int], taken: bool,
                memo: dict[int, Canon]) -> Canon:  # fmt: skip
        """`t` with every select by `cond` replaced by its taken (or other) branch, and the
        max / min `cond` decided by the operand it is."""
        d = self.decided.get(id(t))
        if d is not None and d[0] == cond:
            return d[1] if taken else d[2]
        tag = t[0]
        shallow = tag in _NARY and any(self._decided_by(y) == cond for y in t[1])
        if not shallow and cond not in self._conds(t):
            return t
        got = memo.get(id(t))
        if got is not None:
            return got
        if tag == "sel" and (t[1], id(t[2]), id(t[3])) == cond:
            out = self._branch(t[4] if taken else t[5], cond, taken, memo)
        elif tag == "sel":
            out = self.select(t[1], t[2], t[3], *(self._branch(y, cond, taken, memo)
                                                  for y in t[4:]))  # fmt: skip
        elif tag in _NARY:
            out = self.nary(tag, [self._branch(y, cond, taken, memo) for y in t[1]])
        elif tag == "div":
            out = self._div(*(self._branch(y, cond, taken, memo) for y in t[1:]))
        elif tag in _FUNCS:
            inner = self._branch(t[1], cond, taken, memo)
            out = ("c", _FUNC_VALUES[tag](inner[1])) if inner[0] == "c" else self._consed(
                (tag,), (inner,), lambda: ((tag, inner), 0))  # fmt: skip
        else:  # pow
            ops = tuple(self._branch(y, cond, taken, memo) for y in t[1:])
            out = self._consed((tag,), ops, lambda: ((tag, *ops), 0))
        memo[id(t)] = out
        return out

    def _by_one_select(self, tag: str, items: list[Canon]) -> Canon | None:
        """A sum (product) of items that depend on one maxima comparison (two of them, or one
        through a select) as one select of two sums (products); None for any other."""
        seen: dict[tuple[str, int, int], int] = {}
        selected: set[tuple[str, int, int]] = set()
        for it in items:
            conds = self._conds(it)
            d = self._decided_by(it)
            for c in conds | {d} if d is not None else conds:
                seen[c] = seen.get(c, 0) + 1
            selected |= conds
        cond = next((c for c, n in seen.items()
                     if c in self.merges and (n > 1 or c in selected)), None)  # fmt: skip
        if cond is None:
            return None
        ops = self.cond_ops[cond]
        sides = [self.nary(tag, [self._branch(it, cond, taken, {}) for it in items])
                 for taken in (True, False)]  # fmt: skip
        return self.select(cond[0], ops[0], ops[1], *sides)

    def _chain(self, x: Sym, rows: set[tuple[int, int]]) -> list[Canon]:
        """The operands of a `+`/`-` chain (each negated where it is subtracted), walked with
        an explicit stack: a loop that accumulates one term per iteration nests as deep as the
        loop is long. `rows` collects where its additions were computed."""
        out: list[Canon] = []
        stack: list[tuple[Any, bool]] = [(x, False)]
        while stack:
            v, negate = stack.pop()
            if type(v) is _Product:  # a multiply-add's product, as `*` would have given it
                t = self.nary("prod", [self(v.a), self(v.b)], {v.at})
                out.append(self.neg(t) if negate else t)
                continue
            if isinstance(v, Sym) and v.op in _SUMS and id(v) not in self.memo:
                rows.add(v.at)
                if v.op in FMA_OPS:  # `a * b + c` (`c + a * b`): the terms in their order
                    a, b, c = v.args
                    prod = _Product(a, b, v.at)
                    first, second = (prod, c) if v.op == "fma" else (c, prod)
                    stack.append((second, negate))
                    stack.append((first, negate))
                    continue
                left, right = v.args
                stack.append((right, negate != (v.op == "-")))
                stack.append((left, negate))
                continue
            t = self(v)
            out.append(self.neg(t) if negate else t)
        return out

    def neg(self, t: Canon) -> Canon:
        return self.nary("prod", [("c", -1.0), t])

    def nary(self, tag: str, items: list[Canon], rows: set[tuple[int, int]] | None = None) -> Canon:
        return self._consed((tag,), tuple(items), lambda: self._nary(tag, items, rows), rows)

    def _nary(
        self, tag: str, items: list[Canon], rows: set[tuple[int, int]] | None
    ) -> tuple[Canon, int]:
        if tag in ("sum", "prod") and len(items) > 1 and self.merges:
            merged = self._by_one_select(tag, items)
            if merged is not None:
                return (merged, 0)
        flat: list[Canon] = []
        rows = set(rows or ())
        for it in items:
            if it[0] == tag:
                self.work += len(it[1])
                flat.extend(it[1])
                rows |= self.rows.get(id(it), set())
            else:
                flat.append(it)
        self.work += len(items)
        if self.work > MAX_CANON_WORK:
            # flattening copies the operands of nested sums and products: a running value
            # rescaled at every step (an online softmax) nests them as deep as a row is long,
            # and copies quadratically; no program form here would hold it
            raise LiftError(f"the traced expressions take more than {MAX_CANON_WORK} operand "
                            "copies to put in canonical form (a running value rescaled at every "
                            "step, as an online softmax's)")  # fmt: skip
        consts = [c[1] for c in flat if c[0] == "c"]
        rest = [c for c in flat if c[0] != "c"]
        if tag == "sum":
            c = math.fsum(consts) if all(map(math.isfinite, consts)) else sum(consts)
            if math.isinf(c):
                # `s = -INFINITY` for a masked key, then `exp(s - m)`: -inf whatever the finite
                # terms beside it (the program is verified numerically all the same)
                return (("c", c), 0)
            if c != 0 or not rest:
                rest.append(("c", c))
        elif tag == "prod":
            c = math.prod(consts)
            if c == 0 or (c != c and 0.0 in consts):
                # (0 times a NaN: a poison load past a buffer, read at sizes the kernel's
                # relations rule out, weighted by a masked key's exp(-inf); the fit takes it as
                # 0, and verification at sizes that obey the relations decides)
                return (("c", 0.0), 0)
            if any(x[0] == "exp" for x in rest):
                spread = self._exp_product(rest, c, rows)
                if spread is not None:
                    return (spread, 0)
                rest = self._merged_exps(rest)
            if c != 1 or not rest:
                rest.append(("c", c))
        else:  # max/min: identity-like bounds are not operands
            lim = -_IDENTITY_LIMIT if tag == "max" else _IDENTITY_LIMIT
            keep = [c for c in consts if (c > lim if tag == "max" else c < lim)]
            if keep:
                rest.append(("c", max(keep) if tag == "max" else min(keep)))
            if not rest:
                rest.append(("c", lim))
        if len(rest) == 1:
            return (rest[0], 0)
        if tag == "prod":
            # factors of one shape keep the order the kernel multiplied them in: `q[t] * k[t2]`
            # read from one packed tensor is query times key at every element, where sorting by
            # the elements read would swap them wherever t2 < t
            rest.sort(key=lambda x: self.key(x)[0])
        else:
            rest.sort(key=self.key)
        out = (tag, tuple(rest))
        if rows:
            self.rows[id(out)] = rows
            self.held.append(out)
        return out, 1

    # An online softmax rescales its running sums by exp(m_old - m_new) whenever the max
    # grows: `acc * exp(m_old - m_new) + exp(s - m_new) * v`. Spreading the factor over a sum
    # of exponential terms and adding the exponents of a product (cancelling `m_old`) gives
    # `sum_j exp(s_j - m_new) * v_j`, the two-pass form, so both spellings lift alike.
    def _exp_product(
        self, factors: list[Canon], c: float, rows: set[tuple[int, int]]
    ) -> Canon | None:
        """A product of an exponential with a sum whose every term has an exponential factor,
        spread over that sum's terms (None for any other product)."""
        for n, f in enumerate(factors):
            if f[0] == "sum" and all(_has_exp(t) for t in f[1]):
                others = factors[:n] + factors[n + 1 :] + ([("c", c)] if c != 1 else [])
                return self.nary("sum", [self.nary("prod", [t, *others]) for t in f[1]], rows)
        return None

    def _rescaled(self, cmp: str, lhs: Canon, rhs: Canon, t: Canon, f: Canon) -> Canon | None:
        """`x > m ? <taken> : <else>` where the taken branch is what a running sum becomes with
        x the new max (`s * exp(m - x) + exp(x - x)`) and the other branch the same with m
        still the max (`s + exp(x - m)`): the taken branch with `max(x, m)` subtracted where
        it subtracts x, which equals either branch; None for any other select."""
        if cmp not in (">", ">=", "<", "<="):
            return None
        big, small = (lhs, rhs) if cmp in (">", ">=") else (rhs, lhs)
        # (both sides with each exponent's opposite terms cancelled: `exp(x0 - x0)`, a first
        # step's term, is left as traced elsewhere)
        target = self._subtracting(f, big, big)
        # ... or spelled as the constant it is (`{x, 1.0f}`: a sum of one term relative to its
        # own max): the running sum's constant terms then count relative to the max too
        for relative in (False, True):
            if self._subtracting(t, big, small, relative) == target:
                return self._subtracting(t, big, self.nary("max", [big, small]), relative)
        return None

    def _subtracting(self, t: Canon, old: Canon, new: Canon, relative: bool = False) -> Canon:
        """`t` rebuilt with `new` subtracted in every exponent that subtracts `old` (and, if
        `relative`, its constant terms `c` read as `c * exp(old - old)`)."""
        memo: dict[int, Canon] = {}
        if relative:
            terms = list(t[1]) if t[0] == "sum" else [t]
            if any(x[0] == "c" for x in terms):
                shift = self._exp_of([old, self.neg(new)])
                return self.nary("sum", [
                    self.nary("prod", [x, shift]) if x[0] == "c" else self._subtracting(x, old, new)
                    for x in terms
                ])  # fmt: skip

        return self._substituted(t, old, new, memo)

    def _substituted(self, x: Canon, old: Canon, new: Canon, memo: dict[int, Canon]) -> Canon:
        """`_subtracting`'s rewrite of `x` (a method, not a closure that calls itself: that
        would be a reference cycle holding the canonicaliser and all its nodes)."""
        got = memo.get(id(x))
        if got is not None:
            return got
        # (across calls too: the running sums of one row, rescaled at every merge, share
        # their older terms, each rebuilt for the same max once)
        key = (id(x), id(old), id(new))
        hit = self.substituted.get(key)
        if hit is not None and hit[0] is x and hit[1] is old and hit[2] is new:
            memo[id(x)] = hit[3]
            return hit[3]
        tag = x[0]
        if tag in _NARY:
            out = self.nary(tag, [self._substituted(y, old, new, memo) for y in x[1]])
        elif tag == "div":
            out = self._div(
                self._substituted(x[1], old, new, memo), self._substituted(x[2], old, new, memo)
            )
        elif tag == "exp":
            arg = self._substituted(x[1], old, new, memo)
            items = list(arg[1]) if arg[0] == "sum" else [arg]
            out = self._exp_of([self.neg(new) if _coef_base(y) == (-1.0, old) else y
                                for y in items])  # fmt: skip
        else:
            out = x
        memo[id(x)] = out
        self.substituted[key] = (x, old, new, out)
        return out

    def _merged_exps(self, factors: list[Canon]) -> list[Canon]:
        """`exp(a) * exp(b)` as `exp(a + b)`, a term and its negation cancelled in the sum."""
        exps = [f for f in factors if f[0] == "exp"]
        if len(exps) < 2:
            return factors
        return [f for f in factors if f[0] != "exp"] + [self._exp_of([e[1] for e in exps])]

    def _exp_of(self, terms: list[Canon]) -> Canon:
        """`exp` of a sum of terms, opposite terms cancelled (a constant if nothing is left)."""
        arg = self._scaled_cancelled(_cancelled(self, self.nary("sum", terms)))
        if arg[0] == "c":
            return ("c", math.exp(arg[1]))
        return self._consed(("exp",), (arg,), lambda: (("exp", arg), 0))

    def _scaled_cancelled(self, arg: Canon) -> Canon:
        """An exponent with its scaled differences multiplied out where opposite terms then
        cancel: `t * (x - m_old) + t * (m_old - m)` (a softmax with a temperature, rescaled
        online) is `t*x - t*m`; left as it is where nothing cancels (`t * (s - m)` keeps its
        form, which the attention rules read)."""
        items = list(arg[1]) if arg[0] == "sum" else [arg]
        spread: list[Canon] = []
        for y in items:
            sums = [f for f in y[1] if f[0] == "sum"] if y[0] == "prod" else []
            if len(sums) != 1:
                spread.append(y)
                continue
            others = [f for f in y[1] if f is not sums[0]]
            spread += [self.nary("prod", [*others, t]) for t in sums[0][1]]
        if len(spread) == len(items):
            return arg
        flat = self.nary("sum", spread)
        out = _cancelled(self, flat)
        if out is flat:
            return arg
        return out

    def spread_constant_sums(self, t: Canon) -> Canon:
        """A sum whose product terms have a factor `c + y` (c a constant) with that factor
        multiplied out: `x * (1 - a)` as `x - x * a`; `t` itself where no term has one."""
        if t[0] != "sum":
            return t
        terms: list[Canon] = []
        for y in t[1]:
            split = next((f for f in y[1] if f[0] == "sum" and any(z[0] == "c" for z in f[1])),
                         None) if y[0] == "prod" else None  # fmt: skip
            if split is None:
                terms.append(y)
                continue
            others = [f for f in y[1] if f is not split]
            terms.extend(self.nary("prod", [*others, z]) for z in split[1])
        if len(terms) == len(t[1]):
            return t
        return self.nary("sum", terms, self.rows.get(id(t)))

    def _div(self, num: Canon, den: Canon) -> Canon:
        """`num / den`: a product with the reciprocal where `den` is a nonzero constant."""
        if den[0] == "c" and den[1] != 0:
            return self.nary("prod", [num, ("c", 1.0 / den[1])])
        return self._consed(("div",), (num, den), lambda: (("div", num, den), 0))

    def key(self, t: Canon) -> tuple[str, tuple[float, ...]]:
        """Structure first (leaves abstracted), then the input elements read, in order."""
        got = self.keys.get(id(t))
        if got is not None:
            return got
        tag = t[0]
        if tag == "in":
            k = (str(t[1]), (float(t[2]),))
        elif tag == "c":
            k = ("c", (t[1],))
        elif tag == "p":
            k = (f"p:{t[1]}", ())
        elif tag in _NARY:
            ks = [self.key(x) for x in t[1]]
            sigs: list[str] = []
            for s, grp in itertools.groupby(k0 for k0, _ in ks):
                n = len(list(grp))
                sigs.append(f"{s}*" if n > 1 else s)
            k = (f"{tag}({','.join(sigs)})", tuple(_chained(vs for _, vs in ks)))
        else:
            parts = [x for x in t[1:] if isinstance(x, tuple)]
            ks = [self.key(x) for x in parts]
            head = t[0] if tag != "sel" else f"sel{t[1]}"
            k = (f"{head}({','.join(s for s, _ in ks)})", tuple(_chained(vs for _, vs in ks)))
        if len(k[0]) + len(k[1]) > MAX_KEY_SIZE:
            # a value read back at every step of a loop (an online softmax's running max and
            # sum) shares subtrees the key spells out in full: it doubles with every step
            raise LiftError(f"a traced expression's structure takes more than {MAX_KEY_SIZE} "
                            "terms to spell out (a running value rescaled at every step, as "
                            "an online softmax's)")  # fmt: skip
        self.keys[id(t)] = k
        self.held.append(t)
        return k


_NO_CONDS: frozenset[tuple[str, int, int]] = frozenset()
_FUNC_VALUES: dict[str, Callable[[float], float]] = {
    "exp": math.exp, "exp2": lambda v: 2.0**v, "log": math.log, "log2": math.log2,
    "sqrt": math.sqrt, "tanh": math.tanh, "sin": math.sin, "cos": math.cos, "erf": math.erf,
    "abs": abs,
}  # fmt: skip


def _decided(cmp: str, lhs: Canon, rhs: Canon) -> bool | None:
    """The comparison's outcome where it does not depend on the inputs: two constants, or an
    identity bound (`-INFINITY`, `-FLT_MAX`) against anything finite; None otherwise."""

    def bound(x: Canon) -> float | None:
        return x[1] if x[0] == "c" else None

    a, b = bound(lhs), bound(rhs)
    if a is None and b is None:
        return None
    if a is None or b is None:
        known = a if a is not None else b
        assert known is not None
        if abs(known) < _IDENTITY_LIMIT:
            return None
        # the unknown side is finite: replace it by 0 for the comparison
        a, b = (a, 0.0) if a is not None else (0.0, b)
    assert a is not None and b is not None
    return {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b,
            "==": a == b, "!=": a != b}.get(cmp)  # fmt: skip


def _has_exp(t: Canon) -> bool:
    return t[0] == "exp" or (t[0] == "prod" and any(x[0] == "exp" for x in t[1]))


def _coef_base(t: Canon) -> tuple[float, Canon]:
    """`t` as coefficient times the rest (`-2 * x` -> (-2, x))."""
    if t[0] == "prod":
        cs = [x for x in t[1] if x[0] == "c"]
        rest = [x for x in t[1] if x[0] != "c"]
        if len(cs) == 1 and rest:
            return cs[0][1], rest[0] if len(rest) == 1 else ("prod", tuple(rest))
    return 1.0, t


def _cancelled(c: Canonicaliser, t: Canon) -> Canon:
    """A sum with each pair of opposite terms (`m` and `-m`) removed."""
    if t[0] != "sum":
        return t
    items = list(t[1])
    split = [_coef_base(x) for x in items]
    gone: set[int] = set()
    for a in range(len(items)):
        if a in gone:
            continue
        for b in range(a + 1, len(items)):
            if b not in gone and split[a][0] + split[b][0] == 0 and split[a][1] == split[b][1]:
                gone |= {a, b}
                break
    if not gone:
        return t
    return c.nary("sum", [x for n, x in enumerate(items) if n not in gone] or [("c", 0.0)])


def _groups(c: Canonicaliser, t: Canon) -> list[tuple[str, list[Canon]]]:
    """The operands of an n-ary node grouped by structure (already sorted by `key`); read,
    not changed, by the fit, which asks again for nodes that several elements share."""
    got = c.grouped.get(id(t))
    if got is not None and got[0] is t:
        return got[1]
    out: list[tuple[str, list[Canon]]] = []
    for sig, grp in itertools.groupby(t[1], key=lambda x: c.key(x)[0]):
        out.append((sig, list(grp)))
    c.grouped[id(t)] = (t, out)
    return out


# --- 2. fitting one size set ------------------------------------------------------------------
Inst = tuple[dict[str, int], Canon]


MAX_DIVISORS = 48  # divisors tried per coordinate of a load that is not affine
MAX_POSITIONAL = 8  # terms of one shape fitted one by one when they are no reduction
MAX_GATHER_COMBINATIONS = 32768  # candidate positions of a gather's index solved for at once


class Fitter:
    def __init__(self, c: Canonicaliser, shapes: Mapping[str, tuple[int, ...]],
                 sizes: Mapping[str, int],
                 ints: Mapping[str, np.ndarray] | None = None) -> None:  # fmt: skip
        self.c = c
        self.shapes = shapes
        self.sizes = sizes
        self.ints = dict(ints or {})  # integer inputs' values: where a gather's indices come from
        # reduction variables: the usual letters, then numbered ones (an online softmax's
        # rescaling nests more reductions than there are letters)
        self.red_names = itertools.chain(RED_VARS, (f"k{n}" for n in itertools.count(1)))
        # reduction variable -> source rows of the traced operations that carried it out
        self.sources: dict[str, set[tuple[int, int]]] = {}
        self.nodes = 0  # program nodes fitted so far (MAX_NODES)

    def node(self, insts: list[Inst]) -> Expr:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            # a flat reduction is a few nodes whatever its length; thousands are a computation
            # nested as deep as a row is long (an online softmax's rescaled running sum), which
            # no program form here would hold: said, instead of fitted for minutes
            raise LiftError(
                f"the traced expressions nest past {MAX_NODES} program nodes "
                "(a running value rescaled at every step, as an online softmax's)"
            )
        # a subexpression the kernel computed once and used for many elements (a row's max in
        # every term of its softmax) is one tree object: fitted with a few of the elements
        # that used it, enough to show that its indices do not move with what varies among
        # them (all of them would make the fit quadratic in the row length)
        # (one subexpression: one object, or equal objects, which have equal `key`s: each lane
        # of a warp holds its own copy of a row's shuffled max)
        users: dict[Any, list[int]] = {}
        for n, x in enumerate(insts):
            users.setdefault(id(x[1]), []).append(n)
        if len(insts) > 64:
            # (by key: each object's once, its users in the order they come)
            by_key: dict[Any, list[int]] = {}
            for idx in users.values():
                by_key.setdefault(self.c.key(insts[idx[0]][1]), []).append(idx)
            users = {k: v[0] if len(v) == 1 else sorted(n for idx in v for n in idx)
                     for k, v in by_key.items()}  # fmt: skip
        keep: set[int] = set()
        for idx in users.values():  # the first, middle and last user: spread, not clustered
            keep.update(idx[int(q * (len(idx) - 1))] for q in (0.0, 0.5, 1.0))
        insts = [x for n, x in enumerate(insts) if n in keep]
        tag = insts[0][1][0]
        if any(t[0] != tag for _, t in insts):
            raise LiftError("output elements are computed by differently shaped expressions")
        if tag == "in":
            return self.load(insts)
        if tag == "c":
            vals = {t[1] for _, t in insts}
            if len(vals) != 1:
                raise LiftError("a constant of the computation changes from element to element")
            return Expr(kind="const", value=_tidy(vals.pop()))
        if tag == "p":
            return Expr(kind="param", name=insts[0][1][1])
        if tag in _NARY:
            return self.nary(tag, insts)
        if tag in ("div", "pow"):
            parts = [self.node([(e, t[p]) for e, t in insts]) for p in (1, 2)]
            return Expr(kind="op", op="/" if tag == "div" else "pow", args=parts)
        if tag == "sel":
            ops = {t[1] for _, t in insts}
            if len(ops) != 1:
                raise LiftError("a select compares differently from element to element")
            args = [self.node([(e, t[p]) for e, t in insts]) for p in range(2, 6)]
            return Expr(kind="op", op="select", name=ops.pop(), args=args)
        if tag in _FUNCS:
            return Expr(kind="op", op=tag, args=[self.node([(e, t[1]) for e, t in insts])])
        raise LiftError(f"no tensor-program form for {tag!r}")

    def nary(self, tag: str, insts: list[Inst]) -> Expr:
        try:
            return self._nary(tag, insts)
        except LiftError:
            if tag != "sum":
                raise
            # `sum_k a[k] * ((k == j ? 1 : 0) - a[j])` (a softmax's backward): the term at
            # k == j has a factor `1 - a[j]` where the others have `-a[j]`; multiplied out,
            # that term is one more of the others plus `a[j]`, and the reduction fits
            spread = [(env, self.c.spread_constant_sums(t)) for env, t in insts]
            if all(t is s for (_, t), (_, s) in zip(insts, spread, strict=True)):
                raise
            return self._nary(tag, spread)

    def _nary(self, tag: str, insts: list[Inst]) -> Expr:
        per = [(env, _groups(self.c, t)) for env, t in insts]
        # (a group's signature marks a repeated term `*`: a causal row's first element sums
        # one term where the others sum several, the same shape in a range that follows it)
        sigs = [s.replace("*", "") for s, _ in per[0][1]]
        if any([s.replace("*", "") for s, _ in g] != sigs for _, g in per):
            raise LiftError("output elements combine differently shaped terms")
        args: list[Expr] = []
        for gi in range(len(sigs)):
            counts = [len(g[gi][1]) for _, g in per]
            if max(counts) == 1:
                args.append(self.node([(env, g[gi][1][0]) for env, g in per]))
                continue
            if len(set(counts)) == 1 and all(
                _all_equal(self.c, g[gi][1]) for _, g in per
            ):  # `x * x`: one operand repeated, not a reduction
                one = self.node([(env, g[gi][1][0]) for env, g in per])
                args.extend([one] * counts[0])
                continue
            if len(set(counts)) != 1:
                args.append(self.ragged(tag, insts, per, gi, counts))
                continue
            # the same term object added m times (a shuffle tree that reads a lane twice):
            # m times the reduction over the distinct terms
            mult = {_multiplicity(g[gi][1]) for _, g in per}
            m = mult.pop() if len(mult) == 1 else None
            if tag in ("max", "min"):
                # idempotent: a term read twice (a clamped index `x[min(C - 1, i)]`, a tree
                # that reads a lane twice) changes nothing; the distinct terms are the range
                distinct = {len(_distinct(g[gi][1])) for _, g in per}
                if len(distinct) != 1:
                    raise LiftError(f"a {tag} runs over a different number of distinct terms "
                                    "depending on the element")  # fmt: skip
                counts, m = [distinct.pop()] * len(counts), 1
            if (m is None or m > 1) and tag == "prod" and counts[0] <= MAX_POSITIONAL:
                # `a[k] * a[j]`, the same element where k == j: factors in their places
                args.extend(self.node([(env, g[gi][1][p]) for env, g in per])
                            for p in range(counts[0]))  # fmt: skip
                continue
            if m is None or (m > 1 and tag != "sum"):
                raise LiftError(f"a {tag} repeats its terms unevenly across elements")
            var = next(self.red_names)
            body = [({**env, var: kk}, item) for env, g in per
                    for kk, item in enumerate(_distinct(g[gi][1]))]  # fmt: skip
            try:
                fitted = self.node(body)
            except LiftError:
                # a few terms of one shape that are no reduction (`exp(a) + exp(-a)`: the
                # constants differ): each term in its place, if that fits every element
                if m != 1 or counts[0] > MAX_POSITIONAL:
                    raise
                args.extend(self.node([(env, g[gi][1][p]) for env, g in per])
                            for p in range(counts[0]))  # fmt: skip
                continue
            red = Expr(kind="reduce", op=tag, var=var, extent=counts[0] // m, args=[fitted])
            self.sources[var] = set().union(*(self.c.rows.get(id(t), set()) for _, t in insts))
            if m > 1 and tag == "sum":
                red = Expr(kind="op", op="*", args=[Expr(kind="const", value=m), red])
            args.append(red)
        if len(args) == 1:
            return args[0]
        return Expr(kind="op", op=_OP_OF[tag], args=args)

    def ragged(
        self, tag: str, insts: list[Inst], per: list[Any], gi: int, counts: list[int]
    ) -> Expr:
        """A reduction whose number of terms follows the element (a prefix sum: `k < j + 1`):
        the count fitted as an index map of the coordinates in scope, the k-th term of each
        element (in the order of the input elements they read) bound to k."""
        why = (f"a {tag} runs over {min(counts)} to {max(counts)} terms depending on the "
               "element")  # fmt: skip
        names = list(per[0][0])
        x = np.array([[env[v] for v in names] for env, _ in per], dtype=np.int64)
        if any(_multiplicity(g[gi][1]) != 1 for _, g in per):
            raise LiftError(f"{why}, some terms repeated")
        try:
            upto = self.index(x, names, np.array(counts, dtype=np.int64), gathers=False)
        except LiftError:
            raise RaggedCount(f"{why}, and no affine (or div/mod) map of the coordinates gives "
                              "the count") from None  # fmt: skip
        var = next(self.red_names)
        body = [({**env, var: kk}, item) for env, g in per
                for kk, item in enumerate(g[gi][1])]  # fmt: skip
        fitted = self.node(body)
        self.sources[var] = set().union(*(self.c.rows.get(id(t), set()) for _, t in insts))
        return Expr(kind="reduce", op=tag, var=var, upto=upto, args=[fitted])

    def load(self, insts: list[Inst]) -> Expr:
        tensor = insts[0][1][1]
        if any(t[1] != tensor for _, t in insts):
            raise LiftError("one operand reads different tensors for different elements")
        shape = self.shapes[tensor]
        flats = np.array([t[2] for _, t in insts], dtype=np.int64)
        coords = np.unravel_index(flats, shape) if shape else ()
        names = list(insts[0][0])
        x = np.array([[env[v] for v in names] for env, _ in insts], dtype=np.int64)
        index = [self.index(x, names, np.asarray(coords[d])) for d in range(len(shape))]
        return Expr(kind="load", tensor=tensor, index=index)

    def index(
        self, x: np.ndarray, names: list[str], y: np.ndarray, gathers: bool = True
    ) -> IndexMap:
        fit = _affine(x, y)
        if fit is not None:
            coefs, const = fit
            return IndexMap(terms=[Term(coef=c, var=v) for c, v in zip(coefs, names,
                                   strict=True) if c], const=const)  # fmt: skip
        for j, v in enumerate(names):
            cands = self.divisors(x, j)
            others = np.delete(x, j, axis=1)
            for d in cands:
                col = x[:, j]
                feats = np.column_stack([others, col // d, col % d])
                fit = _affine(feats, y)
                if fit is None:
                    continue
                coefs, const = fit
                onames = [n for n in names if n != v]
                terms = [Term(coef=c, var=n) for c, n in zip(coefs[:-2], onames, strict=True) if c]
                if coefs[-2]:
                    terms.append(Term(coef=coefs[-2], var=v, div=d))
                if coefs[-1]:
                    terms.append(Term(coef=coefs[-1], var=v, mod=d))
                return IndexMap(terms=terms, const=const)
        found = self._div_mod(x, names, y)
        if found is not None:
            return found
        found = self._mixed_radix(x, names, y)
        if found is not None:
            return found
        found = self.gather(x, names, y) if gathers else None
        if found is not None:
            return found
        raise LiftError("an index that is not an affine (or div/mod) map of the coordinates")

    def _div_mod(self, x: np.ndarray, names: list[str], y: np.ndarray) -> IndexMap | None:
        """An affine map with one coordinate taken `// d` then `% m` (the row of a flat stack of
        square matrices: `(i // T) % T`), d and m sizes or products of two."""
        known = size_pool(self.sizes)
        for j, v in enumerate(names):
            col = x[:, j]
            top = int(col.max()) + 1 if len(col) else 0
            pool = [d for d in known if d < top]
            others = np.delete(x, j, axis=1)
            onames = [n for n in names if n != v]
            for d, m in itertools.product(pool, pool):
                fit = _affine(np.column_stack([others, (col // d) % m]), y)
                if fit is None:
                    continue
                coefs, const = fit
                terms = [Term(coef=c, var=n) for c, n in zip(coefs[:-1], onames, strict=True) if c]
                if coefs[-1]:
                    terms.append(Term(coef=coefs[-1], var=v, div=d, mod=m))
                return IndexMap(terms=terms, const=const)
        return None

    def _mixed_radix(self, x: np.ndarray, names: list[str], y: np.ndarray) -> IndexMap | None:
        """An affine map of the digits of one coordinate in a mixed radix of sizes: a flat
        index over `[B, NH, T, d]` split into `i % d`, `(i // d) % T`, `(i // (T*d)) % NH` and
        `i // (NH*T*d)` (a permutation of axes: `inp[b, t, nh, d_]` read for `q[b, nh, t, d_]`).
        Radices are sizes, tried innermost first, two or three of them."""
        sizes = {s for s in self.sizes.values() if s > 1}
        # (and quotients of sizes: a head size C / NH splits `n % C` into `(n // hs) % NH`)
        radices = sorted(sizes | {a // b for a in sizes for b in sizes
                                  if a > b and a % b == 0 and a // b > 2})  # fmt: skip
        for j, v in enumerate(names):
            col = x[:, j]
            top = int(col.max()) + 1 if len(col) else 0
            others = np.delete(x, j, axis=1)
            onames = [n for n in names if n != v]
            for depth in (2, 3):
                # (a size may repeat: `t2 = i % T, t = (i // T) % T` of a [B, NH, T, T] score)
                for chain in itertools.product(radices, repeat=depth):
                    if math.prod(chain) >= top:
                        continue
                    digits, div = [], 1
                    for r in chain:
                        digits.append((col // div) % r)
                        div *= r
                    digits.append(col // div)
                    fit = _affine(np.column_stack([others, *digits]), y)
                    if fit is None:
                        continue
                    coefs, const = fit
                    k = len(onames)
                    terms = [Term(coef=c, var=n) for c, n in zip(coefs[:k], onames,
                                                                 strict=True) if c]  # fmt: skip
                    div = 1
                    for c, r in zip(coefs[k:], chain, strict=False):
                        if c:
                            terms.append(Term(coef=c, var=v, div=div if div > 1 else None,
                                              mod=r))  # fmt: skip
                        div *= r
                    if coefs[-1]:
                        terms.append(Term(coef=coefs[-1], var=v, div=div))
                    return IndexMap(terms=terms, const=const)
        return None

    def divisors(self, x: np.ndarray, j: int) -> list[int]:
        """Divisors to try for column `j` of `x` in a div/mod index: sizes (and products of two),
        powers of two, then any other small one (a sample of the elements can agree with several
        divisors; verification settles the choice). At most MAX_DIVISORS: an index no small divisor,
        size or power of two explains is not quasi-affine in a way the lifter recognises."""
        top = int(x[:, j].max()) + 1 if len(x) else 0
        sizes = {s for s in size_pool(self.sizes) if s < top}
        pool = sizes | {1 << b for b in range(1, top.bit_length())} | set(range(2, 64))
        cands = sorted((d for d in pool if 1 < d < top),
                       key=lambda d: (d not in sizes, d & (d - 1) != 0, d))  # fmt: skip
        return cands[:MAX_DIVISORS]

    def positions(self, x: np.ndarray, q: np.ndarray, flat: np.ndarray) -> np.ndarray | None:
        """Where in `flat` each element read its value `q`, as a map of `x` (affine, or
        div/mod in one column): solved on a few elements with the fewest candidate positions
        (every combination of their candidates at once), then checked on all of them."""
        values, counts = np.unique(flat, return_counts=True)
        if values.size == 0:
            return None
        at = np.minimum(np.searchsorted(values, q), values.size - 1)
        if not np.array_equal(values[at], q):
            return None  # a value no element of the table holds
        order = np.argsort(counts[at], kind="stable")
        feature_sets = [x] + [np.column_stack([np.delete(x, j, axis=1), x[:, j] // d,
                                               x[:, j] % d])
                              for j in range(x.shape[1]) for d in self.divisors(x, j)]  # fmt: skip
        for feats in feature_sets:
            a = np.column_stack([feats, np.ones(len(q), dtype=np.int64)]).astype(np.float64)
            picked: list[int] = []
            for r in order:  # rows that raise the rank, fewest candidates first
                trial = a[[*picked, int(r)]]
                if np.linalg.matrix_rank(trial) == len(picked) + 1:
                    picked.append(int(r))
                    if len(picked) == a.shape[1]:
                        break
            if len(picked) < a.shape[1]:
                continue
            options = [np.flatnonzero(flat == q[r]) for r in picked]
            if math.prod(len(o) for o in options) > MAX_GATHER_COMBINATIONS:
                continue
            grid = np.array(np.meshgrid(*options, indexing="ij")).reshape(len(options), -1)
            sol = np.linalg.solve(a[picked], grid.astype(np.float64))  # one column per combination
            coefs = np.rint(sol)
            whole = np.all(np.abs(sol - coefs) < 1e-6, axis=0)
            pos = (a @ coefs).astype(np.int64)  # elements x combinations
            inside = np.all((pos >= 0) & (pos < flat.size), axis=0) & whole
            for col in np.flatnonzero(inside):
                if np.array_equal(flat[pos[:, col]], q):
                    return pos[:, col]
        return None

    def gather(self, x: np.ndarray, names: list[str], y: np.ndarray) -> IndexMap | None:
        """`y = d * G[f(x)] + a(x)` or `y = d * a(x) + G[f(x)]`: a coordinate read from an
        integer input `G` (a row of a flat table, `C * ids[i] + c`; an element of a flat row,
        `V * i + labels[i]`), `f` and `a` affine or div/mod maps (`positions`: the trace
        draws integer inputs as spread over their range as it allows)."""
        if not self.ints or not len(y):
            return None
        strides = [1] + sorted({s for s in self.sizes.values() if 1 < s <= int(y.max())},
                               reverse=True)  # fmt: skip
        for d in strides:
            q, rem = np.divmod(y, d)
            tries = [(q, rem, d)] if d == 1 else [(q, rem, d), (rem, q, 1)]
            for gathered, other, coef in tries:
                rest = IndexMap()
                if d > 1:
                    try:
                        rest = self.index(x, names, other, gathers=False)
                    except LiftError:
                        continue
                    if coef == 1:  # the affine part is the quotient: scaled back by d
                        rest = IndexMap(terms=[t.model_copy(update={"coef": t.coef * d})
                                               for t in rest.terms],
                                        const=int(rest.const) * d)  # fmt: skip
                g = self.gathered(x, names, gathered, coef)
                if g is not None:
                    return rest.model_copy(update={"gather": g})
        return None

    def gathered(self, x: np.ndarray, names: list[str], q: np.ndarray, coef: int) -> Gather | None:
        """`q = G[f(x)]` for an integer input G: the gather, or None."""
        for name, table in self.ints.items():
            flat = np.asarray(table).reshape(-1).astype(np.int64)
            pos = self.positions(x, q, flat)  # inside the table, flat[pos] == q: checked there
            if pos is None:
                continue
            try:
                fm = self.index(x, names, pos, gathers=False)  # exactly pos, or an error
            except LiftError:
                continue
            shape = np.shape(table)
            if len(shape) <= 1:
                return Gather(tensor=name, index=[fm], coef=coef)
            try:
                index = [self.index(x, names, np.asarray(c), gathers=False)
                         for c in np.unravel_index(pos, shape)]  # fmt: skip
            except LiftError:
                continue
            return Gather(tensor=name, index=index, coef=coef)
        return None


def _all_equal(c: Canonicaliser, items: list[Canon]) -> bool:
    """Every item the same expression as the first (equal trees have equal `key`s, which are
    memoised and flat: a cheap refusal before a deep comparison)."""
    first = items[0]
    k = c.key(first)
    return all(x is first or (c.key(x) == k and x == first) for x in items)


def _distinct(items: list[Canon]) -> list[Canon]:
    seen: set[int] = set()
    return [x for x in items if id(x) not in seen and not seen.add(id(x))]  # type: ignore[func-returns-value]


def _multiplicity(items: list[Canon]) -> int | None:
    """How often each distinct term object occurs (None: unevenly)."""
    counts: dict[int, int] = {}
    for x in items:
        counts[id(x)] = counts.get(id(x), 0) + 1
    values = set(counts.values())
    return values.pop() if len(values) == 1 else None


def _affine(x: np.ndarray, y: np.ndarray) -> tuple[list[int], int] | None:
    a = np.column_stack([x.astype(np.float64), np.ones(len(y))])
    sol, *_ = np.linalg.lstsq(a, y.astype(np.float64), rcond=None)
    r = np.rint(sol).astype(np.int64)
    if not np.array_equal(x @ r[:-1] + r[-1], y):
        return None
    return [int(c) for c in r[:-1]], int(r[-1])


def _tidy(v: float) -> int | float:
    return int(v) if float(v).is_integer() and abs(v) < 2**53 else float(v)


def fit_elements(
    c: Canonicaliser,
    tensor: str,
    values: np.ndarray,
    shapes: Mapping[str, tuple[int, ...]],
    sizes: Mapping[str, int],
    sources: dict[str, set[tuple[int, int]]] | None = None,
    unwritten: np.ndarray | None = None,
    ints: Mapping[str, np.ndarray] | None = None,
    agrees: Callable[[Assign, list[int]], bool] | None = None,
) -> Assign:
    """The expression, over the output coordinates, that every element of `values` is
    (`_one_form`); failing that, where some elements are one stored constant at positions a
    comparison of the coordinates tells (a causal mask's 0 or -inf above the diagonal), that
    constant there and the expression of the others elsewhere."""
    unpicked: Assign | None = None  # the form fitted where no label picks, if one was
    try:
        one = _one_form(c, tensor, values, shapes, sizes, sources, unwritten, ints, agrees)
        # the sample may miss the one element per row a label picks: checked there
        missed = agrees is not None and any(
            not agrees(one, at[:64].tolist()) for _, _, at in _label_positions(values, ints)
        )
        if not missed:
            return one
        unpicked = one
        first = LiftError(f"{tensor} is computed differently at the elements labels pick")
    except LiftError as e:
        # (kept without its traceback: the traceback holds this frame, whose `first` would
        # hold the traceback, a cycle that keeps the canonicaliser's nodes until the cycle
        # collector walks them all)
        first = e.with_traceback(None)
    names = list(OUT_VARS[: len(values.shape)])
    if unwritten is None:
        unwritten = _nan_elements(values)
    masked = _masked(values, names, unwritten, sizes, tensor)
    if masked is None:
        picked = _picked_by_index(c, tensor, values, shapes, sizes, sources, unwritten, ints,
                                  agrees, unpicked)  # fmt: skip
        if picked is not None:
            return picked
        try:
            raise first
        finally:
            del first  # (likewise: the raise gives it a traceback through this frame)
    value, (lhs, rhs), inside, kept = masked
    # the others are fitted at elements the trace computed (a trace of some blocks: the
    # elements picked now differ from those its blocks were chosen for)
    skip = np.union1d(np.union1d(np.union1d(unwritten, inside), kept), _nan_elements(values))
    rest = _one_form(c, tensor, values, shapes, sizes, sources, skip, ints, agrees,
                     share=False)  # fmt: skip
    cond = [Expr(kind="coord", index=[lhs]), Expr(kind="coord", index=[rhs])]
    expr = Expr(kind="op", op="select", name=">",
                args=[*cond, Expr(kind="const", value=value), rest.expr])  # fmt: skip
    return Assign(tensor=tensor, vars=names, expr=expr)


def _picked_by_index(
    c: Canonicaliser,
    tensor: str,
    values: np.ndarray,
    shapes: Mapping[str, tuple[int, ...]],
    sizes: Mapping[str, int],
    sources: dict[str, set[tuple[int, int]]] | None,
    unwritten: np.ndarray,
    ints: Mapping[str, np.ndarray] | None,
    agrees: Callable[[Assign, list[int]], bool] | None,
    unpicked: Assign | None = None,
) -> Assign | None:
    """`j == ids[i] ? picked : other`: one element per row, at the column an integer input
    gives (a label: cross-entropy's gradient subtracts 1 there), computed differently from the
    rest; each part fitted on its own elements. None where no integer input explains it.
    `unpicked`: the rest's form where a fit of elements no label picks made it already (a
    second fit of other such elements was a third of a cross-entropy's lift)."""
    shape = values.shape
    names = list(OUT_VARS[: len(shape)])
    # (elements of blocks the trace skipped are NaN: neither part reads them)
    unwritten = np.union1d(unwritten, _nan_elements(values))
    for name, width, at in _label_positions(values, ints):
        others = np.setdiff1d(np.arange(values.size), at)
        try:
            rest = unpicked if unpicked is not None else _one_form(
                c, tensor, values, shapes, sizes, sources, np.union1d(unwritten, at), ints,
                agrees, share=False)  # fmt: skip
            pick = _one_form(c, tensor, values, shapes, sizes, sources,
                             np.union1d(unwritten, others), ints, agrees, share=False)  # fmt: skip
        except LiftError:
            continue
        unit = [IndexMap(terms=[Term(coef=1, var=v)]) for v in names]
        col, row = unit[-1], unit[:-1]
        if len(shape) == 1:  # `i % V == targets[i // V]`
            col = IndexMap(terms=[Term(coef=1, var=names[0], mod=width)])
            row = [IndexMap(terms=[Term(coef=1, var=names[0], div=width)])]
        cond = [
            Expr(kind="coord", index=[col]),
            Expr(kind="coord", index=[IndexMap(gather=Gather(tensor=name, index=row))]),
        ]
        expr = Expr(kind="op", op="select", name="==", args=[*cond, pick.expr, rest.expr])
        return Assign(tensor=tensor, vars=names, expr=expr)
    return None


def _label_positions(
    values: np.ndarray, ints: Mapping[str, np.ndarray] | None
) -> list[tuple[str, int, np.ndarray]]:
    """Per integer input with one value per row of `values` (a flat output's rows of equal
    length, or all axes but the last): its name, the row length, and the flat elements its
    values pick (those within the row, and traced)."""
    out = []
    shape = values.shape
    traced = np.array([isinstance(v, Sym) for v in values.reshape(-1)], dtype=bool)
    for name, arr in (ints or {}).items():
        ids = np.asarray(arr)
        if len(shape) == 1 and ids.ndim == 1 and ids.size > 1 and shape[0] % ids.size == 0:
            width = shape[0] // ids.size  # a flat output: rows of `width`, one label per row
        elif len(shape) >= 2 and ids.shape == shape[:-1]:
            width = shape[-1]
        else:
            continue
        flat_ids = ids.reshape(-1).astype(np.int64)
        ok = (flat_ids >= 0) & (flat_ids < width)
        at = np.flatnonzero(ok) * width + flat_ids[ok]
        at = at[traced[at]]
        if width > 1 and at.size >= 2:
            out.append((name, width, at))
    return out


def _nan_elements(values: np.ndarray) -> np.ndarray:
    flat = values.reshape(-1)
    return np.array([i for i, v in enumerate(flat) if not isinstance(v, Sym) and v != v],
                    dtype=np.int64)  # fmt: skip


def _masked(
    values: np.ndarray,
    names: list[str],
    unwritten: np.ndarray,
    sizes: Mapping[str, int],
    tensor: str = "",
) -> tuple[float, tuple[IndexMap, IndexMap], np.ndarray, np.ndarray] | None:
    """Where some written elements are one stored constant and the others computed: the
    constant, the comparison `lhs > rhs` of the output coordinates true exactly at those
    elements (`_separating`), their flat indices, and those of the elements this trace did not
    compute (an in-place output's own input values, outside the traced blocks); None where
    there is no such split."""
    flat = values.reshape(-1)
    kept = np.array([i for i, v in enumerate(flat) if isinstance(v, Sym) and v.op == "in"
                     and v.args[0] == tensor and v.args[1] == i], dtype=np.int64)  # fmt: skip
    written = np.setdiff1d(np.arange(flat.size), np.union1d(unwritten, kept))
    # (a NaN no operation made: an element of a block the trace skipped, computed or not)
    written = np.array([i for i in written if isinstance(flat[i], Sym) or flat[i] == flat[i]],
                       dtype=np.int64)  # fmt: skip
    plain = [int(i) for i in written if not isinstance(flat[i], Sym)]
    if not plain or len(plain) == written.size:
        return None
    kinds, counts = np.unique(np.array([float(flat[i]) for i in plain]), return_counts=True)
    value = float(kinds[np.argmax(counts)])
    inside = np.array([i for i in plain if float(flat[i]) == value], dtype=np.int64)
    if inside.size < 2 or written.size - inside.size < 2:
        return None
    coords = np.stack(np.unravel_index(written, values.shape), axis=1).astype(np.int64)
    pred = _separating(coords, np.isin(written, inside), names, sizes)
    return None if pred is None else (value, pred, inside, kept)


MAX_MASK_FEATURES = 400  # quasi-affine features of the coordinates a mask predicate compares
MASK_SAMPLE = 256  # elements of either side a mask predicate's candidates are tested on first


def _separating(
    x: np.ndarray, y: np.ndarray, names: list[str], sizes: Mapping[str, int]
) -> tuple[IndexMap, IndexMap] | None:
    """(a, b) with `a > b` true exactly where `y` is, over quasi-affine features of the
    coordinates `x` (one row per element): one feature past a threshold (`i > 30`), else one
    past another within 2 (`j > i`, `(i % T) > ((i // T) % T)`: a diagonal); None if none."""
    known = size_pool(sizes)
    feats: list[tuple[IndexMap, np.ndarray]] = []
    seen: set[bytes] = set()

    def add(m: IndexMap, col: np.ndarray) -> None:
        key = col.tobytes()
        if col.min() != col.max() and key not in seen and len(feats) < MAX_MASK_FEATURES:
            seen.add(key)
            feats.append((m, col))

    for j, v in enumerate(names):
        col = x[:, j]
        add(IndexMap(terms=[Term(coef=1, var=v)]), col)
        divs = [d for d in known if d <= col.max()]
        for d in divs:
            add(IndexMap(terms=[Term(coef=1, var=v, mod=d)]), col % d)
            add(IndexMap(terms=[Term(coef=1, var=v, div=d)]), col // d)
            for m in divs:
                add(IndexMap(terms=[Term(coef=1, var=v, div=d, mod=m)]), (col // d) % m)
    if not feats:
        return None
    # Each test below is first made on a sample of the elements of either side: a test that
    # holds on all of them holds on the sample (a maximum over a subset is no larger, a
    # minimum no smaller), so the sample only drops candidates, and the first candidate that
    # holds on every element is the one a test of every pair on every element finds (the
    # pairs of a causal mask's 70 features over 77k elements: 0.29 -> 0.01 s).
    inside, outside = np.flatnonzero(y), np.flatnonzero(~y)
    sample = np.concatenate([side[np.linspace(0, side.size - 1, min(side.size, MASK_SAMPLE))
                                  .astype(np.int64)] for side in (inside, outside)])  # fmt: skip
    grid = np.stack([col[sample] for _, col in feats])
    ys = y[sample]
    fy, fn = grid[:, ys], grid[:, ~ys]
    for n in np.flatnonzero((fn.max(axis=1) < fy.min(axis=1)) | (fy.max(axis=1) < fn.min(axis=1))):
        m, col = feats[n]
        if col[~y].max() < col[y].min():
            return m, IndexMap(const=int(col[~y].max()))
        if col[y].max() < col[~y].min():
            return IndexMap(const=int(col[~y].min())), m
    for ia, (ma, a) in enumerate(feats):
        lo_s = (fn[ia] - fn).max(axis=1)  # per second feature b, on the sample
        ok = (lo_s < (fy[ia] - fy).min(axis=1)) & (lo_s <= 2)
        ok[ia] = False
        for ib in np.flatnonzero(ok):
            mb, b = feats[ib]
            d = a - b
            lo = int(d[~y].max())
            if lo < int(d[y].min()) and abs(lo) <= 2:
                return ma, mb.model_copy(update={"const": lo})
    return None


def _one_form(
    c: Canonicaliser,
    tensor: str,
    values: np.ndarray,
    shapes: Mapping[str, tuple[int, ...]],
    sizes: Mapping[str, int],
    sources: dict[str, set[tuple[int, int]]] | None = None,
    unwritten: np.ndarray | None = None,
    ints: Mapping[str, np.ndarray] | None = None,
    agrees: Callable[[Assign, list[int]], bool] | None = None,
    share: bool = True,
) -> Assign:
    """The one expression, over the output coordinates, that every element of `values` is.
    `agrees(assign, flat indices)`: whether an assign fitted to most sampled elements gives the
    traced values at the others (a causal row of one key spells `exp(s0 - s0) * v0 / exp(s0 -
    s0)`, with no sum or max left to fit); without it every element must share one form.
    `sources` receives the source rows behind it: the output's own (where its value was
    computed) under the tensor's name, each reduction's under `tensor/variable`. `unwritten`:
    the flat elements the kernel never writes, when known from elsewhere (a trace of some
    blocks only leaves others NaN too); else the NaN elements of `values`."""
    # (the canonical-form budget is per form fitted: a label's gradient fits the rows' form,
    # then the picked elements' and the others' apart, each over its own rows' running sums)
    c.work = 0
    shape = values.shape
    if len(shape) > len(OUT_VARS):
        raise LiftError(f"{tensor} has more than {len(OUT_VARS)} dimensions")
    names = list(OUT_VARS[: len(shape)])
    flat = values.reshape(-1)
    if unwritten is None:
        unwritten = _nan_elements(values)
    if share and 2 * len(unwritten) > flat.size:
        # (`share`: the elements not fitted are a mask's, not unwritten: any share of them)
        raise LiftError(f"{len(unwritten)} of {flat.size} elements of {tensor} are never written")
    # a launch that rounds the grid down, whole vectors only: the elements it leaves unwritten
    # define nothing; the rest is fitted (verification and the check then skip them too, and
    # the check's report names them)
    picked = fit_points(shape, unwritten)
    if any(not isinstance(flat[i], Sym) and flat[i] != flat[i] for i in picked):
        raise PartialTrace(f"an element of {tensor} the fit reads was not traced")
    found: tuple[Expr, Fitter] | None = None
    for count in FIRST_POINTS if agrees is not None else ():
        # a form fitted to a spread of the elements, then computed at the others and compared
        # with their traced values: each element put in canonical form costs its whole tree
        # (an attention's output element, tens of milliseconds), computing one costs nothing;
        # where the form does not hold there, a wider spread (the narrower one's elements
        # among it, their forms memoised), then every element, as before
        first = _first_points(picked, count)
        if len(first) == len(picked):
            break
        chosen = set(first)
        with contextlib.suppress(LiftError):
            found = _fit_at(c, tensor, flat, shape, first, names, shapes, sizes, ints, agrees)
        rest = [i for i in picked if i not in chosen]
        if found is not None and not agrees(Assign(tensor=tensor, vars=names, expr=found[0]), rest):
            found = None
        c.work = 0  # (the budget is the form's, fitted once more or not)
        if found is not None:
            break
    expr, fitter = found or _fit_at(
        c, tensor, flat, shape, picked, names, shapes, sizes, ints, agrees
    )
    if sources is not None:
        sources[tensor] = {flat[i].at for i in picked if isinstance(flat[i], Sym)}
        sources.update({f"{tensor}/{v}": rows for v, rows in fitter.sources.items()})
    return Assign(tensor=tensor, vars=names, expr=expr)


# elements a form is fitted to before it is checked at the others: a few first (an element of
# an attention's output costs tens of milliseconds to put in canonical form; six decide most
# index maps), twice as dense where their form does not hold at the others
FIRST_POINTS = (6, 11)


def _first_points(picked: list[int], count: int = FIRST_POINTS[-1]) -> list[int]:
    """A spread of `count` of the fit's elements, the first and last among them (all of them
    where there are not twice as many). Spreads of `c` and `2c - 1` elements nest (the wider
    fit puts only its new elements in canonical form)."""
    if len(picked) < 2 * count:
        return picked
    last, gaps = len(picked) - 1, count - 1
    # (k * last / gaps rounded half up, in integers: the same position in either spread)
    return sorted({picked[(2 * k * last + gaps) // (2 * gaps)] for k in range(count)})


def _fit_at(
    c: Canonicaliser,
    tensor: str,
    flat: np.ndarray,
    shape: tuple[int, ...],
    picked: list[int],
    names: list[str],
    shapes: Mapping[str, tuple[int, ...]],
    sizes: Mapping[str, int],
    ints: Mapping[str, np.ndarray] | None,
    agrees: Callable[[Assign, list[int]], bool] | None,
) -> tuple[Expr, Fitter]:
    """The one expression the elements `picked` of `flat` (the traced values, `shape`
    flattened) are, and the fitter that made it (its reductions' source rows)."""
    insts: list[Inst] = []
    by_sig: dict[str, int] = {}
    for i in picked:
        t = c(flat[i])
        by_sig[c.key(t)[0]] = by_sig.get(c.key(t)[0], 0) + 1
        coord = np.unravel_index(i, shape)
        insts.append(({n: int(x) for n, x in zip(names, coord, strict=True)}, t))
    if len(by_sig) > 1 and (promoted := _promote_singletons(c, insts)) is not None:
        insts, by_sig = promoted, {"": len(promoted)}
    fitter = Fitter(c, shapes, sizes, ints)
    expr = None
    if len(by_sig) > 1 and agrees is not None:
        sig, n = max(by_sig.items(), key=lambda kv: kv[1])
        if 3 * n >= 2 * len(insts):  # most elements share one form: fit it, check the rest
            keep = [c.key(t)[0] == sig for _, t in insts]
            expr = fitter.node([x for x, k in zip(insts, keep, strict=True) if k])
            others = [int(i) for i, k in zip(picked, keep, strict=True) if not k]
            if agrees(Assign(tensor=tensor, vars=names, expr=expr), others):
                by_sig = {sig: n}
    if len(by_sig) > 1:
        common = sorted(by_sig.items(), key=lambda kv: -kv[1])
        raise LiftError(
            f"the elements of {tensor} are computed by {len(by_sig)} different expressions "
            f"(the most common covers {common[0][1]} of {len(insts)} sampled)"
        )
    if expr is None:
        try:
            expr = fitter.node(insts)
        except RaggedCount:
            if agrees is None:
                raise
            padded = _padded_window(c, tensor, names, insts, picked,
                                    Fitter(c, shapes, sizes, ints), agrees)  # fmt: skip
            if padded is None:
                raise
            expr, fitter = padded
    return expr, fitter


def _promote_singletons(c: Canonicaliser, insts: list[Inst]) -> list[Inst] | None:
    """Where most elements are a sum (max ...) of terms of one shape and the others a single
    such term (a prefix sum's first element is `x[0]`, no sum at all): the single terms as
    sums of one, so that the terms' count may follow the element. None if that does not make
    every element the same expression."""
    tags = [t[0] for _, t in insts]
    tag = max(set(tags), key=tags.count)
    if tag not in _NARY:
        return None
    out = [(env, t if t[0] == tag else (tag, (t,))) for env, t in insts]

    def shape(t: Canon) -> str:  # the signature with repeated groups counted alike
        return c.key(t)[0].replace("*", "")

    return out if len({shape(t) for _, t in out}) == 1 else None


class RaggedCount(LiftError):
    """A reduction's number of terms follows the element in no way an index map gives."""


def _padded_window(
    c: Canonicaliser,
    tensor: str,
    names: list[str],
    insts: list[Inst],
    picked: list[int],
    fitter: Fitter,
    agrees: Callable[[Assign, list[int]], bool],
) -> tuple[Expr, Fitter] | None:
    """A window with fewer terms near the edges (a convolution whose taps past the image
    read 0, `(x >= 0) ? src[x] : 0`, and so vanish from the trace): the form fitted where the
    window is whole, its loads that move with both an output coordinate and the reduction
    read as zero padding, then checked numerically at the edge elements. None if that is not
    what the elements compute."""
    leaves = [len(c.key(t)[1]) for _, t in insts]
    keep = [n == max(leaves) for n in leaves]
    if sum(keep) < 2 or all(keep):
        return None
    try:
        expr = fitter.node([x for x, k in zip(insts, keep, strict=True) if k])
    except LiftError:
        return None
    padded = _pad_window_loads(expr, set(names), frozenset())
    if padded is expr:
        return None
    others = [int(i) for i, k in zip(picked, keep, strict=True) if not k]
    if not agrees(Assign(tensor=tensor, vars=names, expr=padded), others):
        return None
    return padded, fitter


def _pad_windows_of(m: IndexMap, outs: set[str], reduced: frozenset[str]) -> bool:
    """A window's coordinate: an output coordinate plus a reduction variable (`j + k - 8`).
    Not `-i + k + 5`: a window that was nowhere whole at the traced sizes, fitted as the
    weights slid over every input row (a larger trace shows the window)."""
    used = {t.var for t in m.terms}
    own = [t for t in m.terms if t.var in outs]
    return (m.gather is None and bool(used & reduced) and len(own) == 1 and own[0].coef == 1
            and own[0].div is None and own[0].mod is None)  # fmt: skip


def _pad_window_loads(e: Expr, outs: set[str], reduced: frozenset[str]) -> Expr:
    """`e` with every load whose index adds a reduction variable to an output coordinate
    (a window's tap) zero-padded; `e` itself where there is none."""
    if e.kind == "load":
        if any(_pad_windows_of(m, outs, reduced) for m in e.index):
            return e.model_copy(update={"pad": 0.0})
        return e
    inner = reduced | {e.var} if e.kind == "reduce" and e.var else reduced
    args = [_pad_window_loads(a, outs, inner) for a in e.args]
    if all(a is b for a, b in zip(args, e.args, strict=True)):
        return e
    return e.model_copy(update={"args": args})


class PartialTrace(LiftError):
    """A trace of some blocks lacks an element the fit reads: trace every block instead."""


def fit_points(shape: tuple[int, ...], unwritten: np.ndarray) -> list[int]:
    """The flat elements a fit reads: `sample`'s spread, and where some elements are never
    written, a spread of the written ones and the last written."""
    skip = set(unwritten.tolist())
    picked = [i for i in sample(shape) if i not in skip]
    if skip:
        written = np.setdiff1d(np.arange(math.prod(shape)), unwritten)
        # drawn at random (seeded): a regular stride can alias with the written pattern (every
        # 1260th element of causal 20 x 20 matrices is the same one of its matrix)
        rng = np.random.default_rng(written.size)
        spread = written[rng.choice(written.size, size=min(16, written.size), replace=False)]
        picked = sorted({*picked, *spread.tolist(), int(written[-1])})
    return picked


def sample(shape: tuple[int, ...], per_dim: int = 7) -> list[int]:
    """Flat indices of the elements fitted: the edges, second and middle of every dimension and
    two more per dimension, all combined (the fit is then verified on every element at other
    sizes, so a sample that covers each coordinate's variation is enough)."""
    rng = np.random.default_rng(len(shape) * 1000 + sum(shape))
    axes = []
    extra = max(2, 24 // len(shape) ** 2) if shape else 0  # 1-D outputs: more points
    for n in shape:
        pick = {0, 1, n // 2, n - 2, n - 1, *rng.integers(0, n, size=extra).tolist()}
        axes.append(sorted(x for x in pick if 0 <= x < n)[: per_dim + extra])
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(shape))
    return sorted({int(np.ravel_multi_index(tuple(g), shape)) for g in grid})


# --- 3. size expressions from two fits ---------------------------------------------------------
def _candidates(names: list[str]) -> list[str]:
    """Size expressions a number may be, in the order tried. Every size itself comes before
    any expression of one: a number equal to both (T = 16 = 2 * B) is far more often the size
    (a row of T) than the expression, which would be wrong at every other size and cost a
    second traced fit to undo."""
    base: list[str] = list(names)
    for n in names:
        base += [f"{n} - 1", f"{n} + 1", f"2 * {n}", f"{n} * {n}"]  # n*n: a mean squared
    for a, b in itertools.combinations(names, 2):
        base += [f"{a} * {b}", f"{a} - {b}", f"{b} - {a}"]
    for a, b, d in itertools.combinations(names, 3):
        base.append(f"{a} * {b} * {d}")
    out = list(base)
    out += [f"-({e})" if " " in e else f"-{e}" for e in base]
    out += [f"1.0 / ({e})" if " " in e else f"1.0 / {e}" for e in base]
    out += [f"-1.0 / ({e})" if " " in e else f"-1.0 / {e}" for e in base]
    return out


def _root_of_sizes(a: float, s1: Mapping[str, int], s2: Mapping[str, int] | None = None,
                   b: float | None = None) -> str | None:  # fmt: skip
    """`a` as `e ** -0.5` or `e ** 0.5`, e a size or a quotient of two (attention's score
    scale `1 / sqrt(C / NH)`, a head size the kernel computes), or the negation of one
    (`-scale`: a subtracted term's coefficient); with `s2`, `b` the same there."""
    if a < 0 and (b is None or b < 0):
        got = _root_of_sizes(-a, s1, s2, None if b is None else -b)
        return f"-({got})" if got is not None else None
    names = sorted(n for n, v in s1.items() if v > 1)
    bases = list(names) + [f"{x} / {y}" for x, y in itertools.permutations(names, 2)]
    for e in bases:
        for form in (f"({e}) ** -0.5", f"({e}) ** 0.5"):  # (size formulas' sqrt is isqrt)
            try:
                ok = math.isclose(eval_expr(form, s1), a, rel_tol=1e-9)
                if ok and s2 is not None:
                    ok = b is not None and math.isclose(eval_expr(form, s2), b, rel_tol=1e-9)
            except (ZeroDivisionError, ValueError, ArithmeticError):
                continue
            if ok:
                return form
    return None


def _product_of_sizes(a: int, s1: Mapping[str, int], s2: Mapping[str, int] | None = None,
                      b: int | None = None, unit: bool = False) -> str | None:  # fmt: skip
    """`a` as a small multiple (1-4) of a product of sizes (the stride `3 * T * NH * d`
    of a packed QKV tensor), fewest factors first, or a quotient of two (`C / NH`, a head size a
    kernel computes itself); with `s2`, `b` is the same expression there. `unit`: the product
    itself only (no multiple)."""
    names = sorted(n for n, v in s1.items() if v > 1)
    for x, y in itertools.permutations(names, 2):
        if s1[x] % s1[y] == 0 and s1[x] // s1[y] == a and (
            s2 is None or (b is not None and s2[y] and s2[x] % s2[y] == 0
                           and s2[x] // s2[y] == b)):  # fmt: skip
            return f"{x} / {y}"
    for k in range(1, 6):
        # (a size may repeat: `NH * T * T`, the stride of a head's [T, T] scores)
        for combo in itertools.combinations_with_replacement(names, k):
            p1 = math.prod(s1[n] for n in combo)
            for c in (1,) if unit else (1, 2, 3, 4):
                if c * p1 != a:
                    continue
                if s2 is not None and (b is None or c * math.prod(s2[n] for n in combo) != b):
                    continue
                return " * ".join(([str(c)] if c > 1 else []) + list(combo))
    return None


def size_expression(v1: float, v2: float, s1: Mapping[str, int], s2: Mapping[str, int]) -> str:
    for e in _candidates(sorted(s1)):
        try:
            a, b = eval_expr(e, s1), eval_expr(e, s2)
        except (ZeroDivisionError, ValueError):
            continue
        if math.isclose(a, v1, rel_tol=1e-9, abs_tol=1e-12) and math.isclose(
            b, v2, rel_tol=1e-9, abs_tol=1e-12
        ):
            return e
    if float(v1).is_integer() and float(v2).is_integer():
        got = _product_of_sizes(int(v1), s1, s2, int(v2))
        if got is not None:
            return got
    got = _root_of_sizes(v1, s1, s2, v2)
    if got is not None:
        return got
    raise LiftError(
        f"a number of the computation ({v1} at sizes {dict(s1)}, {v2} at {dict(s2)}) is no "
        "size expression the lifter knows"
    )


def symbolise(a: Any, s1: Mapping[str, int], constants: frozenset[str] = frozenset()) -> Any:
    """The program of one size set with each number that is a size (or `1 / size`, `size - 1`
    ...) at those sizes written as that size expression. Small integers (< 8, below every
    traced size) stay literals. A coincidence (a literal stride of 16 where a size is 16) is
    possible: verification at other sizes finds it, and two fits (`merge`) settle it.
    `constants` (launch constants, the same in every size set: `block_size`) are read only
    where no expression of the other sizes is the number (T * T = 256 = block_size: the plane
    of a [B, NH, T, T] output; NH * T * T, not NH * block_size)."""
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        if isinstance(a, int) and abs(a) < 8 or a == 0:
            return a
        free = {n: v for n, v in s1.items() if n not in constants}
        # the other sizes' expressions, then a product of them (`NH * T * T`), then the same
        # with the constants too, then a multiple of a product (`4 * N * N`, a stretch)
        passes = [(free, True), (dict(s1), False)] if len(free) < len(s1) else [(free, False)]
        for sizes, unit in passes:
            for e in _candidates(sorted(sizes)):
                try:
                    v = eval_expr(e, sizes)
                except (ZeroDivisionError, ValueError):
                    continue
                if math.isclose(v, a, rel_tol=1e-12, abs_tol=1e-15):
                    return e
            if isinstance(a, int) and (got := _product_of_sizes(a, sizes, unit=unit)):
                return got
        if isinstance(a, int):
            return a
        return _root_of_sizes(a, s1) or a
    if isinstance(a, list):
        return [symbolise(x, s1, constants) for x in a]
    if isinstance(a, (Expr, IndexMap, Term, Gather, Assign, Program)):
        return type(a)(**{f: symbolise(getattr(a, f), s1, constants)
                          for f in type(a).model_fields})  # fmt: skip
    return a


def merge(a: Any, b: Any, s1: Mapping[str, int], s2: Mapping[str, int]) -> Any:
    """One program from the fits at two size sets (same structure; numbers that differ become
    size expressions)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return a if a == b else size_expression(a, b, s1, s2)
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            raise LiftError("the computation found at two sizes differs in structure")
        return [merge(x, y, s1, s2) for x, y in zip(a, b, strict=True)]
    if isinstance(a, (Expr, IndexMap, Term, Gather, Assign, Program)):
        if type(a) is not type(b):
            raise LiftError("the computation found at two sizes differs in structure")
        fields = {}
        for f in type(a).model_fields:
            fields[f] = merge(getattr(a, f), getattr(b, f), s1, s2)
        return type(a)(**fields)
    if a != b:
        raise LiftError(f"the computation found at two sizes differs ({a!r} vs {b!r})")
    return a
