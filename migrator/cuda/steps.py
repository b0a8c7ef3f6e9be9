"""The loop nests a thread steps through one iteration after another, in the task's sizes.

The CUDA interpreter runs all threads of a batch of blocks at once, so its time follows the
statements a thread executes in sequence, not the threads: a kernel whose every thread loops
over `b < B`, `h < NH`, `t < T`, `t2 <= t` (llm.c's naive attention backward: each block redoes
every row) costs B * NH * T * T loop steps a run, which no tensor's shape shows. `step_nests`
reads those nests from the kernel IR; `nest_steps` is their cost at a size set, the measure the
size choices of inference and lifting bound. Loops that stride by a thread count (`i +=
blockDim.x`) are the threads' parallel work, not a thread's sequence, and count no steps.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from migrator.cuda.ir import Kernel, Loop

Nest = tuple[str, ...]  # the sizes a nest's trip counts multiply (a size once per loop over it)

_WORDS = re.compile(r"[A-Za-z_]\w*")
_UNIT_STEPS = frozenset({"++", "--"})


def _steps_one(loop: Loop) -> bool:
    """Whether the loop moves by a constant (`i++`, `k += 8`): one thread's sequence."""
    text = loop.step.text.strip() if loop.step is not None else ""
    return text in _UNIT_STEPS or text.isdigit()


def step_nests(kernel: Kernel, size_of: Mapping[str, str]) -> list[Nest]:
    """For each loop of `kernel` that steps by a constant, the sizes its trip count and its
    enclosing loops' multiply: `size_of` names the size each kernel variable is (`B` for the
    parameter `B`); a bound on an enclosing loop's variable (`t2 <= t`) takes that loop's trip.
    Loops bounded by no size (`k < 8`) add nothing; an empty list where none is bounded."""
    loops = {lp.id: lp for lp in kernel.loops}
    trips: dict[int, Nest] = {}

    def enclosing(lp: Loop) -> list[Loop]:
        out: list[Loop] = []
        at = lp.parent
        while at is not None and at in loops and len(out) < len(loops):
            out.append(loops[at])
            at = loops[at].parent
        return out

    def trip(lp: Loop) -> Nest:
        if lp.id in trips:
            return trips[lp.id]
        trips[lp.id] = ()  # (a bound that names its own loop's variable adds nothing)
        out: Nest = ()
        if _steps_one(lp):
            # a loop counting down (`i = n - 1; i >= 0; --i`) runs from its start
            ends = [lp.start] if lp.cmp in (">", ">=") else [lp.bound]
            words: set[str] = set()
            for e in ends:
                if e is not None:
                    words |= {s for t in e.terms for s in t.symbols} or set(_WORDS.findall(e.text))
            outer = {o.var: o for o in enclosing(lp) if o.var}
            for w in sorted(words):
                if w in size_of:
                    out += (size_of[w],)
                elif w in outer:
                    out += trip(outer[w])
        trips[lp.id] = out
        return out

    nests: list[Nest] = []
    for lp in kernel.loops:
        nest = trip(lp) + tuple(n for o in enclosing(lp) for n in trip(o))
        if nest and nest not in nests:
            nests.append(nest)
    return nests


def nest_steps(nests: list[Nest], sizes: Mapping[str, int]) -> int:
    """The most loop steps one thread takes at `sizes`: the largest nest's product (1 if
    there is none)."""
    return max((math.prod(max(1, int(sizes.get(n, 1))) for n in nest) for nest in nests),
               default=1)  # fmt: skip
