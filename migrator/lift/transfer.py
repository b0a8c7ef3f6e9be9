"""A traced value computed exactly as one canonicalised before, over other input elements: its
canonical form is the earlier one with the leaves renamed, not rebuilt.

Every row of a softmax (every query of an attention, every lane's copy of a shuffle tree's
merges) is the same arithmetic over other elements; canonicalising it costs the same rescaling
rewrites each time (tens of milliseconds for a row of an online softmax). Two values have the
same *shape* (a hash) when their operation DAGs agree node for node (operation, constants,
source rows) and differ only in the elements their leaves read; a walk of both in step
confirms it, which operand is shared where included. If the leaves correspond one to one (an
injective renaming per tensor) and in the same order within each tensor, every decision the
canonicaliser takes (flattening, constant folding, cancelling equal terms, sorting by
structure and elements read) comes out the same on the renamed tree, except where a sort
compares elements of two tensors at one position; those sums are sorted again. Anything that
does not match exactly is canonicalised as usual, and a ledger stops renaming where it costs
more than it saves.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from typing import TYPE_CHECKING, Any

from migrator.cuda.interp.traced import Sym
from migrator.lift.program import LiftError

if TYPE_CHECKING:
    from migrator.lift.fit import Canon, Canonicaliser

MIN_SIZE = 48  # operations (counted as a tree) below which a value is canonicalised directly
CANDIDATES = 2  # earlier values of one shape kept to rename from
WALK_PER_EFFORT = 1  # steps of a walk (or renaming) that cost about one unit of effort saved
KEY_STEPS = 4  # steps one renamed operand's sort key costs (its leaves spelled out)
FREE_STEPS = 1500  # steps each shape may walk before its ledger must show savings
FREE_STEPS_IN_ALL = 100000  # ... and all shapes together (values hashed included)
SIZE_CAP = 1 << 30


class _Mismatch(Exception):
    """A leaf of the earlier canonical form that the renaming does not cover."""


def shape_of(c: Canonicaliser, x: Sym, limit: int | None = None) -> tuple[int, int, bool] | None:
    """(hash of `x`'s DAG with leaves reduced to their tensors, its size as a tree, capped,
    whether it reads an input element), computed for `x` and every value below it once
    (iteratively: chains nest thousands deep); None where that would take more than about
    `limit` values not hashed yet (those hashed meanwhile are kept)."""
    shapes = c.shapes
    got = shapes.get(id(x))
    if got is not None:
        return got
    stack = [x]
    steps = 0
    while stack:
        steps += 1
        if limit is not None and steps > 2 * limit:
            return None
        v = stack[-1]
        if id(v) in shapes:
            stack.pop()
            continue
        pending = [a for a in v.args if isinstance(a, Sym) and id(a) not in shapes]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        if v.op == "in":
            shapes[id(v)] = (hash(("in", v.args[0], v.at)), 1, True)
        else:
            parts: list[Any] = [v.op, v.at]
            size, reads = 1, False
            for a in v.args:
                if isinstance(a, Sym):
                    h, n, r = shapes[id(a)]
                    parts.append(h)
                    size += n
                    reads = reads or r
                else:
                    parts.append(_token(a))
            shapes[id(v)] = (hash(tuple(parts)), min(size, SIZE_CAP), reads)
        c.held.append(v)  # (keyed by id)
    return shapes[id(x)]


def _token(a: Any) -> Any:
    if isinstance(a, str):
        return a
    try:
        return float(a)
    except (TypeError, ValueError):
        return repr(a)


def _same(a: Any, b: Any) -> bool:
    """Two non-traced operands alike: equal strings, or numbers equal to the bit (a NaN
    matches a NaN; 0.0 does not match -0.0: their quotients differ)."""
    if type(a) is float and type(b) is float and a == b and a:  # (the common case)
        return True
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    try:
        fa, fb = float(a), float(b)
    except (TypeError, ValueError):
        return False
    if fa != fa or fb != fb:
        return fa != fa and fb != fb
    return fa == fb and math.copysign(1.0, fa) == math.copysign(1.0, fb)


def offer(c: Canonicaliser, x: Sym, effort: int) -> None:
    """Keep canonicalised `x` (which took `effort`) to rename from, if it is large enough."""
    if not _paying(c):
        return  # (renaming has not paid in this fit: `transferred` tries no more)
    got = _shape_charged(c, x)
    if got is not None and got[1] >= MIN_SIZE:
        kept = c.templates.setdefault(got[0], [])
        if len(kept) < CANDIDATES:
            kept.append((x, effort))


# Renaming pays where canonicalising costs more than hashing and walking the two DAGs: a row
# of an online softmax (rescaling rewrites), not values mostly found in the memo (what other
# elements share), shapes that seldom match (a row's own column differs), or huge traces of
# cheap arithmetic (an iterative solver's). Each shape, and the fit as a whole (key None),
# keeps a ledger of steps spent (values hashed, paired, renamed) against canonicalisation
# effort saved: deterministic counts, not time, so a fit takes the same path every run.
def _paying(c: Canonicaliser, h: int | None = None) -> bool:
    spent, saved = c.ledger.get(h, (0, 0))
    free = FREE_STEPS_IN_ALL if h is None else FREE_STEPS
    return spent <= WALK_PER_EFFORT * saved + free


def _charge(c: Canonicaliser, h: int | None, steps: int, gain: int = 0) -> None:
    for key in (h, None) if h is not None else (None,):
        spent, saved = c.ledger.get(key, (0, 0))
        c.ledger[key] = (spent + steps, saved + gain)


def _shape_charged(c: Canonicaliser, x: Sym) -> tuple[int, int, bool] | None:
    """`shape_of(x)`, within what the fit's ledger has left (a trace of a million cheap
    values is not hashed at its first root), the values hashed charged to it."""
    spent, saved = c.ledger.get(None, (0, 0))
    left = WALK_PER_EFFORT * saved + FREE_STEPS_IN_ALL - spent
    before = len(c.shapes)
    got = shape_of(c, x, max(left, 1))
    _charge(c, None, max(len(c.shapes) - before, 1 if got is not None else left + 1))
    return got


def transferred(c: Canonicaliser, x: Sym) -> Canon | None:
    """`x`'s canonical form renamed from an earlier value of its shape (memoised for every
    value below `x` too), or None where none matches."""
    if not _paying(c):
        return None  # (nor are more values hashed)
    got = _shape_charged(c, x)
    if got is None or got[1] < MIN_SIZE:
        return None
    h = got[0]
    kept = c.templates.get(h)
    if not kept or not _paying(c, h):
        return None
    for t, effort in kept:
        try:
            done, cost, fresh = _transfer(c, t, x)
        except LiftError:  # (a structure too large to key: canonicalised as usual, and said so)
            done, cost, fresh = False, 0, 0.0
        # (saved: `t`'s effort for the share of `x`'s values not canonicalised already;
        # values other elements share would have been found in the memo)
        _charge(c, h, cost, int(effort * fresh) if done else 0)
        if done:
            return c.memo[id(x)]
    return None


def _transfer(c: Canonicaliser, t_root: Sym, n_root: Sym) -> tuple[bool, int, float]:
    """Walk the DAGs of `t_root` (canonicalised) and `n_root` in step; where they match and
    their leaves correspond as the module says, memoise `n_root`'s values as the renamed
    forms of `t_root`'s. Returns whether it did, its cost in steps (values paired, canonical
    nodes renamed) and the share of `n_root`'s values that were not canonicalised yet."""
    pairs: dict[int, tuple[Sym, Sym]] = {}
    taken: set[int] = set()
    leaves: dict[tuple[str, int], int] = {}
    back: dict[tuple[str, int], int] = {}
    queue: deque[tuple[Sym, Any]] = deque([(t_root, n_root)])
    if not _walk(c, queue, pairs, taken, leaves, back):
        return False, len(pairs), 0.0
    memo, pend = c.memo, c.pending  # (values a renaming left to rename: as good as done)
    fresh = sum(1 for _, n in pairs.values() if id(n) not in memo and id(n) not in pend)
    fresh /= len(pairs)
    renamed = _rename_from(c, t_root, n_root, pairs, leaves)
    return renamed is not None, len(pairs) + (renamed or 0), fresh


def _walk(
    c: Canonicaliser,
    queue: deque[tuple[Sym, Any]],
    pairs: dict[int, tuple[Sym, Sym]],
    taken: set[int],
    leaves: dict[tuple[str, int], int],
    back: dict[tuple[str, int], int],
) -> bool:
    """`_transfer`'s walk of the two DAGs in step: whether they match node for node, filling
    `pairs` (value ids to value pairs) and `leaves` (the renaming, `back` its inverse).
    Breadth first: a value both DAGs share (a row's max, which every element of the row
    reads), which refuses the renaming, is found near the roots before the walk goes deep
    (a fused classifier's walks failed after 110 steps each, depth first, 21 breadth first).
    A renaming that does not keep the order of a tensor's elements is refused as soon as one
    leaf shows it (`_kept_in_order`): two lanes of a butterfly reduce read the same elements
    in mirrored orders, and their walks matched node for node only to be refused at the end
    (an online softmax's 1400 of 1700)."""
    shapes = c.shapes
    order: dict[str, tuple[list[int], list[int]]] = {}  # per tensor: elements renamed, sorted
    popleft, append, get = queue.popleft, queue.append, pairs.get
    while queue:
        t, n = popleft()
        got = get(id(t))
        if got is not None:
            if got[1] is not n:
                return False
            continue
        if (type(n) is not Sym or n.op != t.op or n.at != t.at
                or len(n.args) != len(t.args) or id(n) in taken):  # fmt: skip
            return False
        if t is n and t.op != "in" and shapes[id(t)][2]:
            # a value of input elements both read (an element's row max, which every term
            # of its row also reads; a maximum two lanes both take, spelled apart): the
            # renaming would have to keep its leaves here and rename them elsewhere, which
            # shows only deep below; refused at once (renaming is only ever a shortcut)
            return False
        pairs[id(t)] = (t, n)
        taken.add(id(n))
        if t.op == "in":
            name = t.args[0]
            if n.args[0] != name:
                return False
            a, b = int(t.args[1]), int(n.args[1])
            was = leaves.get((name, a))
            if was is None:  # (a new element: its new name must keep the order)
                if back.setdefault((name, b), a) != a or not _kept_in_order(order, name, a, b):
                    return False
                leaves[(name, a)] = b
            elif was != b:
                return False
            continue
        for a, b in zip(t.args, n.args, strict=True):
            if type(a) is Sym:
                if a is b and a.op != "in" and shapes[id(a)][2]:
                    return False  # (as below, seen one level up)
                append((a, b))
            elif type(b) is Sym or not _same(a, b):
                return False
    return True


def _kept_in_order(
    order: dict[str, tuple[list[int], list[int]]], name: str, a: int, b: int
) -> bool:
    """Add `a -> b` to the renaming of `name`'s elements (a new `a`): whether the renaming
    still keeps their order (strictly)."""
    olds, news = order.setdefault(name, ([], []))
    i = bisect.bisect_left(olds, a)
    if (i and news[i - 1] >= b) or (i < len(news) and news[i] <= b):
        return False
    olds.insert(i, a)
    news.insert(i, b)
    return True


def _rename_from(
    c: Canonicaliser,
    t_root: Sym,
    n_root: Sym,
    pairs: dict[int, tuple[Sym, Sym]],
    leaves: dict[tuple[str, int], int],
) -> int | None:
    """Memoise `n_root`'s canonical form (and leave its values' to rename when asked) from
    the walk's pairs and leaves, where the renaming keeps the order the module says; the
    number of canonical nodes renamed, or None where it does not."""
    # (within each tensor, the renaming keeps the order of the elements read: `_walk`)
    # one renaming of the numbers for all tensors (a row of one tensor, or equal shifts)
    # keeps every comparison a sort makes; otherwise sorted sums are checked
    numbers: dict[int, int] = {}
    uniform = all(numbers.setdefault(a, b) == b for (_, a), b in leaves.items())
    renaming = _Renaming(leaves, not (uniform and _increasing(numbers)))
    try:
        root = renaming.of(c, c.memo[id(t_root)])
    except _Mismatch:
        return None
    c.memo[id(n_root)] = root
    c.held.append(n_root)
    # the values below: renamed when asked for (another element of the row, of the lane)
    for t, n in pairs.values():
        if n is not n_root and id(n) not in c.memo and id(t) in c.memo:
            c.pending[id(n)] = (t, renaming)
            c.held.append(n)
    return len(renaming.done) + KEY_STEPS * renaming.compared


def _increasing(renaming: dict[int, int]) -> bool:
    """Whether a renaming of numbers keeps their order (strictly)."""
    got = sorted(renaming.items())
    return all(p[1] < q[1] for p, q in zip(got, got[1:], strict=False))


class _Renaming:
    """The leaves' renaming of one transfer and the canonical nodes renamed so far."""

    __slots__ = ("leaves", "check", "done", "compared")

    def __init__(self, leaves: dict[tuple[str, int], int], check: bool) -> None:
        self.leaves = leaves
        self.check = check  # (sorted sums to check: tensors renamed apart)
        self.done: dict[int, Canon] = {}
        self.compared = 0  # operands whose renamed keys were compared (`_still_sorted`)

    def of(self, c: Canonicaliser, t: Canon) -> Canon:
        return _renamed(c, t, self)


def pending(c: Canonicaliser, x: Sym) -> Canon | None:
    """`x`'s canonical form where a transfer left it to rename (None if none did, or if
    its leaves fall outside that renaming)."""
    got = c.pending.pop(id(x), None)
    if got is None:
        return None
    t, renaming = got
    try:
        out = renaming.of(c, c.memo[id(t)])
    except _Mismatch:
        return None
    c.memo[id(x)] = out
    return out


def _renamed(c: Canonicaliser, t: Canon, r: _Renaming) -> Canon:
    got = r.done.get(id(t))
    if got is not None:
        return got
    tag = t[0]
    out: Canon
    if tag == "in":
        b = r.leaves.get((t[1], t[2]))
        if b is None:
            raise _Mismatch
        out = t if b == t[2] else ("in", t[1], b)
    elif tag in ("c", "p"):
        out = t
    elif tag in ("sum", "prod", "max", "min"):
        items = [_renamed(c, y, r) for y in t[1]]
        if all(a is b for a, b in zip(items, t[1], strict=True)):
            out = t
        else:
            if r.check and tag != "prod" and not _still_sorted(c, t[1], items, r):
                items.sort(key=c.key)
            out = (tag, tuple(items))
    elif tag == "sel":
        out = ("sel", t[1], *(_renamed(c, y, r) for y in t[2:]))
        if any(a is not b for a, b in zip(out[2:], t[2:], strict=True)):
            _renamed_condition(c, (t[1], id(t[2]), id(t[3])), (t[1], out[2], out[3]))
        else:
            out = t
    else:  # exp, div, pow, functions: operands after the tag
        parts = tuple(_renamed(c, y, r) if isinstance(y, tuple) else y for y in t[1:])
        out = t if all(a is b for a, b in zip(parts, t[1:], strict=True)) else (tag, *parts)
    if out is not t:
        rows = c.rows.get(id(t))
        if rows is not None:
            c.rows[id(out)] = set(rows)
        decided = c.decided.get(id(t))
        if decided is not None:
            cond, taken, other = decided
            lhs, rhs = c.cond_ops[cond]
            new = (cond[0], _renamed(c, lhs, r), _renamed(c, rhs, r))
            _renamed_condition(c, cond, new)
            c.decided[id(out)] = ((new[0], id(new[1]), id(new[2])),
                                  _renamed(c, taken, r),
                                  _renamed(c, other, r))  # fmt: skip
        c.held.append(out)
    r.done[id(t)] = out
    return out


def _renamed_condition(
    c: Canonicaliser, cond: tuple[str, int, int], new: tuple[str, Canon, Canon]
) -> None:
    """The maxima comparison `new` (comparison, operands) stands where `cond` stood."""
    key = (new[0], id(new[1]), id(new[2]))
    if cond in c.cond_ops:
        c.cond_ops[key] = (new[1], new[2])
        c.held.extend(new[1:])
    if cond in c.merges:
        c.merges.add(key)


def _still_sorted(
    c: Canonicaliser, before: tuple[Canon, ...], after: list[Canon], r: _Renaming
) -> bool:
    """Whether renamed operands keep the sorted order: a pair of one structure compares the
    elements read, and those of two tensors may meet at one position."""
    for n in range(len(after) - 1):
        if c.key(before[n])[0] != c.key(before[n + 1])[0]:
            continue  # (told apart by structure, which renaming keeps)
        r.compared += 2  # (keys of renamed operands: as costly as a walk's steps, or more)
        if c.key(after[n]) > c.key(after[n + 1]):
            return False
    return True
