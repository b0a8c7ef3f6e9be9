"""`lift_task`: the tensor program a task's kernel computes, fitted and then verified.

The kernel is traced at small size sets (every size distinct, the spec's relations obeyed where
the traced work allows); the program fitted at the first has its numbers read as size
expressions, and where that does not verify, a second fit decides them. The program runs with
numpy against the CUDA interpreter on the same inputs at other sizes, ragged ones and the task's
own size sets included, before anything downstream may rely on it.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from migrator import teardown
from migrator.contract import (
    TaskSpec,
    divisor_pairs,
    is_float,
    np_dtype,
    paired_sizes,
    relation_moduli,
    tile_relations,
)
from migrator.cuda.interp.findings import InterpError
from migrator.cuda.interp.runner import SECONDS
from migrator.cuda.interp.spec_run import (
    RUN_MEMO,
    _parse_key,
    run_spec_full,
    unwritten_elements,
)
from migrator.cuda.interp.traced import TraceEscape
from migrator.cuda.steps import Nest, nest_steps, step_nests
from migrator.lift.counts import fit_counts
from migrator.lift.fit import (
    Canonicaliser,
    PartialTrace,
    fit_elements,
    fit_points,
    merge,
    sample,
    symbolise,
)
from migrator.lift.program import (
    Assign,
    Expr,
    IndexMap,
    LiftError,
    Program,
    _index,
    evaluate,
    index_maps,
    index_terms,
    magnitude,
    value_of,
)
from migrator.lift.scatter import fit_scatter
from migrator.lift.trace import Trace, blocks_to_trace, trace_run
from migrator.workers import Ahead, ahead, map_jobs, map_shared, seconds_setting

# evaluation of a program broadcasts over output x reduction axes: beyond VERIFY_ELEMENTS a
# verification samples output elements (tens of thousands of them: as telling as all, and the
# migration's check compares every element anyway); where that leaves too few, up to
# MAX_EVAL_ELEMENTS (also the check's limit for a per-element low-precision allowance)
VERIFY_ELEMENTS = 4_000_000
MAX_EVAL_ELEMENTS = 20_000_000
MAX_SAMPLE = 100_000  # output elements a sampled verification compares at most
MIN_SAMPLE = 64  # fewer sampled output elements than this verify nothing


class Verification(BaseModel):
    model_config = ConfigDict(frozen=True)

    sizes: dict[str, int]
    ok: bool
    max_abs_error: float = 0.0
    note: str | None = None
    skipped: bool = False  # too large to evaluate densely: compared nothing


class SourcePart(BaseModel):
    """The CUDA lines behind one part of a lifted program: an output's value (`part` is the
    tensor) or one of its reductions (`part` is e.g. `sum_{k < C}` of that output)."""

    model_config = ConfigDict(frozen=True)

    part: str
    lines: list[str]  # `file:line` of the kernel's own statements
    helpers: list[str] = Field(default_factory=list)  # lines inside the device helpers called

    def render(self) -> str:
        inner = f" (in helpers: {', '.join(self.helpers)})" if self.helpers else ""
        return f"{self.part}: {', '.join(self.lines) or '-'}{inner}"


class LiftResult(BaseModel):
    """What the kernel computes (`program`), at which sizes it was fitted and verified, or
    why it could not be lifted (`error`)."""

    model_config = ConfigDict(frozen=True)

    kernel: str
    program: Program | None = None
    fitted_at: list[dict[str, int]] = Field(default_factory=list)
    verified: list[Verification] = Field(default_factory=list)
    error: str | None = None
    sources: list[SourcePart] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.program is not None
            and self.error is None
            and any(not v.skipped for v in self.verified)  # a skipped set proves nothing
            and all(v.ok for v in self.verified)
        )

    def render(self) -> str:
        lines = [f"kernel {self.kernel}"]
        if self.program is not None:
            lines += ["computes:"] + [f"  {x}" for x in self.program.render().splitlines()]
        if self.sources:
            lines += ["from the CUDA lines:"] + [f"  {p.render()}" for p in self.sources]
        if self.fitted_at:
            lines.append("fitted at: " + "; ".join(_fmt(s) for s in self.fitted_at))
        for v in self.verified:
            status = "not compared" if v.skipped else "ok" if v.ok else "MISMATCH"
            extra = f" ({v.note})" if v.note else ""
            lines.append(f"verified at {_fmt(v.sizes)}: {status}, max |error| "
                         f"{v.max_abs_error:.2e}{extra}")  # fmt: skip
        if self.error:
            lines.append(f"not lifted: {self.error}")
        return "\n".join(lines)


def _fmt(s: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in s.items())


TRACE_BUDGET = 2_000_000  # product of the traced sizes beyond which a pair is not traced
# ... for the last resort of whole large tiles (`_tiled_pair`): a 128 x 128 tile GEMM whose K
# is in whole 64s traces 128 x 256 x 64 and 256 x 128 x 192 (K = 128 would equal N)
TILED_BUDGET = 4 * TRACE_BUDGET


def trace_pairs(spec: TaskSpec) -> list[list[dict[str, int]]]:
    """Pairs of small size sets to trace, in the order tried: every size distinct within a set
    and different between the sets (so that each number of the program names one size
    expression), multiples of 4 first (vectorised kernels often write only whole vectors).

    Pairs of sizes that obey the kernel's relations (`M % 128 == 0`) and of the smallest sizes,
    relations set aside, are tried cheapest first (a whole-tile kernel at the smallest sizes
    reads and writes past the edges, reported and not stored, and may compute its stored
    elements differently: verification at sizes that obey the relations decides)."""
    out: list[list[dict[str, int]]] = []
    # (scale 2: every size a multiple of 8, for kernels whose 16-byte vector accesses need it;
    # past the largest block: a kernel that works block by block (a scan within blocks of
    # 256) shows that structure only over two blocks or more)
    try:  # (`block_size`, a size of the task: its published value)
        block = max(spec.launch_config(spec.sizes)[1])
    except (ValueError, ArithmeticError, KeyError):
        block = max((int(b) for b in spec.launch.block if str(b).isdigit()), default=0)
    beyond = -(-(block + 1) // 8) if block > 128 else 16
    rank: list[tuple[int, bool]] = []  # per pair: its configuration, whether a fallback
    configs: list[tuple[bool, int, bool, str | None]] = [
        (True, 1, True, None), (True, 1, False, None), (False, 1, True, None),
        (True, 2, True, None), (True, 16, True, None), (True, beyond, True, None)]  # fmt: skip
    if block > 128:
        # one size past the block, the others small: a row of C elements that the kernel
        # assumes at least a block wide (`if (tid >= C) return;`), few rows of it
        fixed = _launch_only(spec)
        configs += [(True, beyond, True, n) for n in spec.sizes if n not in fixed]
    for ci, (obey, scale, avoid, wide) in enumerate(configs):
        # the larger pair: where the smallest sizes hide structure (one row of a whole-row
        # block, one tile), sizes several blocks wide show it; sizes equal to the kernel's
        # constants only where avoiding them costs too much (M % 128 == 0 with a 128 tile);
        # sizes that are simple expressions of each other (T = 2 * B) only as a fallback
        for fallback in (False, True):
            pair = _pair(spec, obey, scale, avoid, derived=not fallback, wide=wide)
            if pair is not None and pair not in out and spec.work(pair[1]) <= TRACE_BUDGET:
                out.append(pair)
                rank.append((ci, fallback))
    # no pair that obeys the relations (large tiles): the cheapest two sets of whole tiles,
    # first (the pairs that set the relations aside read past the tiles' edges)
    tiled = part = None
    if not any(not spec.broken_relations(a) and not spec.broken_relations(b) for a, b in out):
        tiled = _tiled_pair(spec)
        part = _tiled_pair(spec, part=True) if tiled else None
    if not out and tiled is None:
        raise LiftError("no two small size sets with distinct sizes obey the kernel's relations")

    def blocks(sizes: dict[str, int]) -> int:
        return math.prod(spec.launch_config(sizes)[0])

    # a kernel that works block by block looks like one block's computation where a pair's
    # launches are one block each (asked of blocks past 128 threads only)
    def one_block(pair: list[dict[str, int]]) -> bool:
        return block > 128 and all(blocks(s) == 1 for s in pair)

    if all(one_block(p) for p in out):
        # every pair one block per launch (a block takes 512 elements, two a thread): a
        # pair several blocks wide, else the output's index along the grid never shows
        for mult in (4, 16):
            pair = _pair(spec, True, mult * beyond, True)
            if (pair is not None and pair not in out and blocks(pair[0]) > 1
                    and spec.work(pair[1]) <= TRACE_BUDGET):  # fmt: skip
                out.append(pair)
                rank.append((len(configs), False))
                break

    # cheapest first: a traced run costs its work, and a small pair that shows the wrong
    # structure is caught by verification at the larger sizes anyway, except that pairs of
    # one-block launches go last where a pair past the block size exists
    work = {ci: min(spec.work(p[1]) for p, (c, _) in zip(out, rank, strict=True) if c == ci)
            for ci, _ in rank}  # fmt: skip

    def key(n: int) -> tuple[bool, int, bool, int]:
        return one_block(out[n]), work[rank[n][0]], rank[n][1], spec.work(out[n][1])

    order = sorted(range(len(out)), key=key)
    first = [p for p in (part, tiled) if p]
    return _one_tile_first(spec, [*first, *(out[n] for n in order)])


def _tiled_pair(spec: TaskSpec, part: bool = False) -> list[dict[str, int]] | None:
    """The cheapest two size sets of one to four whole tiles each (`M % 128 == 0`: 128 to 512),
    distinct within a set and different between the sets for every size, the values of one
    set free to reappear under other names in the other (M = 128, N = 256 then M = 256,
    N = 128): a kernel of large tiles has no pair among the sizes stepped up from small ones
    (a 128 x 128 tile GEMM: 128 x 256 x 32, then 256 x 384 x 64, past the budget). The last
    resort, within `TILED_BUDGET`."""
    fixed = _launch_only(spec)
    names = [n for n in spec.sizes if n not in fixed]
    tiles = whole = tile_relations(spec.relations)
    if not names or len(names) > 4 or any(tiles.get(n, 1) < 8 for n in names):
        return None  # (untiled sizes: the stepped pairs serve them)
    if part:
        # a size no grid dimension names (a GEMM's K, which each thread steps through a slice
        # at a time) at quarters of its tile: a quarter of the traced steps, its relation set
        # aside (verification at sizes that obey it decides)
        # (only where the quarter is a multiple of the size's finer relations, the step of
        # its loop where the spec names one: with `K % 16 == 0` beside `K % 32 == 0`, slices
        # of 16 that a K of 8 ends inside, K stays whole)
        grid = {w for g in spec.launch.grid for w in re.findall(r"[A-Za-z_]\w*", str(g))}
        finest = {n: min(cs) for n, cs in relation_moduli(spec.relations).items()}
        tiles = {n: t // 4 if n not in grid and t % 32 == 0
                 and (finest[n] == t or (t // 4) % finest[n] == 0) else t
                 for n, t in whole.items()}  # fmt: skip
        if tiles == whole:
            return None
    combos = []
    for values in itertools.product(*([tiles[n] * k for k in (1, 2, 3, 4)] for n in names)):
        sizes = {**fixed, **dict(zip(names, values, strict=True))}
        if len(set(values)) == len(values) and (part or not spec.broken_relations(sizes)):
            combos.append((spec.work(sizes), sizes))
    combos.sort(key=lambda c: c[0])
    for w1, first in combos:
        for w2, second in combos:
            if max(w1, w2) > TILED_BUDGET:
                break
            if all(first[n] != second[n] for n in names):
                return [first, second]
    return None


def _one_tile_first(
    spec: TaskSpec, pairs: list[list[dict[str, int]]]
) -> list[list[dict[str, int]]]:
    """A launch of whole problems that assumes whole tiles of a launch constant (`N % 32 == 0`
    with `Bc = 32`: a flash kernel that loads key tiles unguarded) first traced at one tile
    (N = 32, set aside elsewhere as equal to the constant), fitted there alone and verified at
    the other sizes: two tiles trace the running rescale across them, an expression too large
    to fit."""
    launch = _launch_only(spec)
    names = [n for n in spec.sizes if n not in launch]
    if not _batch_sizes(spec, names):
        return pairs
    for n, t in tile_relations(spec.relations).items():
        if t not in launch.values():
            continue
        for pair in pairs:
            if not spec.broken_relations(pair[0]) and not spec.broken_relations(pair[1]):
                first = {**pair[0], n: t}
                if first not in pair:
                    return [[first, pair[0]], *pairs]
    return pairs


def _launch_only(spec: TaskSpec) -> dict[str, int]:
    """Sizes kept at their published values: launch-only ones (a block size of 20 is no block
    size the kernel was written for: warp-level code assumes whole warps, and it computes
    nothing), and sizes the kernel is specialised on (a head dimension of 64 that is a template
    argument and the same in every size set: at D = 12 the kernel still computes with 64)."""
    used = spec.data_sizes()
    kept = spec.specialised_sizes()
    return {n: v for n, v in spec.sizes.items() if n not in used or n in kept}


def _pair(
    spec: TaskSpec,
    obey: bool,
    scale: int = 1,
    avoid: bool = True,
    derived: bool = True,
    wide: str | None = None,
) -> list[dict[str, int]] | None:
    """Two size sets from `scale` (`wide`: only that size scaled, the others from 8 up)."""
    fixed = _launch_only(spec)
    names = [n for n in spec.sizes if n not in fixed]
    specialised = spec.specialised_sizes()
    # a launch of whole problems, one per block of a grid of bare sizes (`grid(B, nh)`: an
    # attention per batch entry and head): those sizes small, a few problems are enough
    batch = _batch_sizes(spec, names) if wide is None else []
    rest = [n for n in names if n not in batch]
    # (sizes held to whole tiles last: the small values go to the sizes they stay at, not to
    # one raised to its tile anyway, `T % 32 == 0` beside a head size d)
    tiled = tile_relations(spec.relations) if obey else {}
    rest.sort(key=lambda n: tiled.get(n, 1) > 1)
    for base, step in ((8 * scale, 4 * scale), (5 * scale, scale)):
        out: list[dict[str, int]] = []
        start = {**fixed, **{n: base + step * i for i, n in enumerate(rest)},
                 **{n: 2 + i for i, n in enumerate(batch)}}  # fmt: skip
        if wide is not None:
            small = [n for n in names if n != wide]
            start = {**start, **{n: 8 + 4 * i for i, n in enumerate(small)}}
        # (with `wide`, the other sizes step as from scale 1)
        per = {n: 1 if wide is None or n == wide else 0 for n in names}
        for shift in range(0, 12 * step, step):
            cand = {n: v + (shift if per[n] else shift // scale) if n in names else v
                    for n, v in start.items()}  # fmt: skip
            for a, b in divisor_pairs(spec.relations):
                # `C % NH == 0`: C = NH * q with q a traced number of its own (C / NH, a head
                # size, then reads as that quotient, not as a small literal)
                if a in cand and b in cand:
                    # (C in no tensor's shape, kept at its published value: q still differs
                    # between the two sets, or `1 / sqrt(C / NH)` is one number at both; a
                    # size the kernel is compiled for keeps its value)
                    moved = a not in names and a not in specialised
                    cand[a] = (cand[a] + len(out) * step if moved else cand[a]) * cand[b]
            got = _distinct(spec, cand, obey, avoid, step if derived else 0)
            if got is None:
                continue
            if out and any(got[n] == out[0][n] for n in names):
                continue
            out.append(got)
            if len(out) == 2:
                if spec.work(out[1]) <= TRACE_BUDGET:
                    return out
                break  # (five sizes from 8 up trace millions of elements: smaller ones next)
            start = {n: v - (shift if per[n] else shift // scale) if n in names else v
                     for n, v in got.items()}  # one step up  # fmt: skip
            for a, b in divisor_pairs(spec.relations):
                if a in start and b in got and got[b]:
                    start[a] = got[a] // got[b] - shift  # (the quotient steps up, not C)
    return None


def _batch_sizes(spec: TaskSpec, names: list[str]) -> list[str]:
    """Sizes of a launch of whole problems, one per block of a grid of two or more bare sizes
    (`grid(B, nh)`: an attention per batch entry and head): traced small (a few problems show
    all the program does) and not held to `_coincident` (they number problems, not elements
    of one: `nh = T - B` does not make a length of T read as anything else)."""
    # (`dim3(num_blocks, B * NH)`: a grid axis that is a product of sizes beside another axis
    # numbers problems by each of its factors; a flat `B * NH * T` alone numbers rows)
    axes = [str(g).strip() for g in spec.launch.grid if str(g).strip() != "1"]
    products = [g for g in axes if _PRODUCT.fullmatch(g) and (len(axes) >= 2 or "*" not in g)]
    factors = {w.strip() for g in products for w in g.split("*")}
    bare = [n for n in names if n in factors]
    return bare if len(bare) >= 2 else []


_PRODUCT = re.compile(r"[A-Za-z_]\w*(?:\s*\*\s*[A-Za-z_]\w*)*")


def _constants(spec: TaskSpec) -> set[int]:
    """Numbers the kernel holds fixed (template arguments, literal block sizes, scalar values):
    a traced size equal to one of them would be read as that size wherever the constant is."""
    out: set[int] = set()
    text = [*spec.kernel.template_args, *spec.launch.block, *spec.launch.grid]
    text += [s.value for s in spec.scalars if s.value is not None]
    for v in text:
        for m in re.findall(r"\d+(?:\.\d+)?", str(v)):
            if float(m).is_integer() and float(m) > 1:
                out.add(int(float(m)))
    return out


def _distinct(
    spec: TaskSpec, sizes: dict[str, int], obey: bool, avoid: bool = True, step: int = 0
) -> dict[str, int] | None:
    """`_launchable` sizes with no two sizes equal and none equal to a constant of the kernel
    (a later size raised past an equal one); where the relations allow, also none equal to a
    simple expression of the others (`T = 2 * B` would let the fit read a length of T as
    `2 * B`, wrong at every other size) where `step` is not 0: a clashing size is then raised
    by `step`, so that sizes chosen as multiples of 8 stay so."""
    launch = _launch_only(spec)
    # `size_y == size_x` (a square problem the host insists on): the follower is the leader
    skip = set(launch) | (set(paired_sizes(spec.relations, "==")) if obey else set())
    batch = set(_batch_sizes(spec, [n for n in sizes if n not in skip]))
    fixed = (_constants(spec) if avoid else set()) | set(launch.values())
    for _ in range(24):
        got = _launchable(spec, sizes, obey)
        if got is None:
            return None
        seen: dict[int, str] = {v: "" for v in fixed}
        clash, bump = None, 1
        for n, v in got.items():
            if n in skip:
                continue
            if v in seen:
                clash, bump = n, step or 1  # (a step keeps multiples of 8 so)
                break
            seen[v] = n
        if clash is None and step:
            clash = _coincident(got, skip | batch)
            bump = step
        if clash is None:
            return got
        # a divisor equal to its multiple (`C % NH == 0` rounded C up to NH): the multiple
        # moves on, by the divisor (raising the divisor would only drag the multiple along)
        for a, b in divisor_pairs(spec.relations):
            if b == clash and got.get(a) == got.get(b):
                clash, bump = a, got[b]
        sizes = {**got, clash: got[clash] + bump}
    return None


def _divided(spec: TaskSpec, sizes: dict[str, int]) -> dict[str, int]:
    """`sizes` with each `C % NH == 0` relation between two sizes made to hold (C rounded up)."""
    out = dict(sizes)
    for a, b in divisor_pairs(spec.relations):
        if a in out and out.get(b):
            out[a] = -(-out[a] // out[b]) * out[b]
    # `P >= V`: rows padded past their width overlap otherwise
    for a, b in paired_sizes(spec.relations, ">=").items():
        if a in out:
            out[a] = max(out[a], out.get(b, 0) + 1)
    return out


def _coincident(sizes: dict[str, int], skip: set[str]) -> str | None:
    """A size equal to a size expression the fit could read it as (`symbolise`'s candidates:
    `2 * B`, `B + 1`, `B * NH`, `T - B` ...) of the other sizes, or None."""
    names = [n for n in sizes if n not in skip]
    for n in names:
        others = [sizes[m] for m in names if m != n]
        exprs = {e for w in others for e in (2 * w, w + 1, w - 1, w * w)}
        exprs |= {e for a, b in itertools.combinations(others, 2) for e in (a * b, a - b, b - a)}
        exprs |= {a * b * c for a, b, c in itertools.combinations(others, 3)}
        if sizes[n] in exprs:
            return n
    return None


def _launchable(spec: TaskSpec, sizes: dict[str, int], obey: bool = True) -> dict[str, int] | None:
    """`sizes` obeying the relations (unless not `obey`) and scaled up until the launch has at
    least one block and one thread in every dimension (`N / 256` blocks needs N >= 256)."""
    for _ in range(10):
        # (sizes that split evenly, `C % NH == 0`, are kept so even when the relations are set
        # aside: a kernel's own `C / NH` is 0 or 1 otherwise, and the trace shows nothing)
        got = spec.satisfy(sizes) if obey else _divided(spec, sizes)
        if got is None:
            return None
        try:
            grid, block, _smem = spec.launch_config(got)
            for t in spec.tensors:
                if min(spec.shape_of(t, got), default=1) < 1:
                    raise ValueError("an empty tensor")
        except (ValueError, ZeroDivisionError, ArithmeticError):
            return None
        if min(grid) >= 1 and min(block) >= 1:
            return got if math.prod(block) <= 1024 else None  # CUDA's threads per block
        launch = _launch_only(spec)
        sizes = {n: v if n in launch else 2 * v for n, v in got.items()}
    return None


def check_sizes(
    spec: TaskSpec, fitted: list[dict[str, int]], program: Program | None = None
) -> list[dict[str, int]]:
    """Where to verify: a ragged small set, a larger one, and the task's own size sets."""
    base = fitted[0]
    launch = _launch_only(spec)
    own = list(spec.all_size_sets())
    # the task's sets are run by the migration's check anyway; ours cost no more than the
    # largest of them or twice the first fitted set (doubling B, NH and T of a row-per-block launch
    # multiplies its threads 8x), in threads, elements and the program's arithmetic
    nests = _step_nests(spec)
    t0, e0, v0, s0 = _cost(spec, base, program, nests)
    costs = [_cost(spec, s, program, nests) for s in own] + [(2 * t0, 2 * e0, 2 * v0, 2 * s0)]
    budget = tuple(max(c[k] for c in costs) for k in range(4))
    out: list[dict[str, int]] = []
    for cand in ({n: launch.get(n, v * 2 + 3) for n, v in base.items()},
                 {n: launch.get(n, v + 1) for n, v in base.items()}):  # fmt: skip
        s = _launchable(spec, dict(cand))
        if s is not None:
            s = _within(spec, s, fitted, budget, set(launch), program, nests)
        if s is not None and s not in out and s not in fitted:
            out.append(s)
    for got in _own_sets(spec):
        if got not in out and got not in fitted:
            out.append(got)
    return out


def _own_sets(spec: TaskSpec) -> list[dict[str, int]]:
    """The task's own size sets, each as launchable (`_launchable`), where it can be."""
    return [s for s in (_launchable(spec, dict(x)) for x in spec.all_size_sets()) if s is not None]


LIFT_MIN_THREADS = 1 << 16  # a verification set may always be this large
LIFT_MIN_ELEMENTS = 1 << 18
# ... and compute this many element operations (outputs times the elements each reduces): the
# interpreter's time follows the arithmetic, which threads and tensor sizes do not show (an
# attention's threads each loop over T keys and d features: its grown set at B = 9, NH = 13,
# T = 64 took 2.6 s, five times its largest own set)
LIFT_MIN_VOLUME = 1 << 21
# ... and take this many loop steps a thread (`steps.nest_steps`), which neither shows: a kernel
# whose every block redoes every row (B * NH * T * T steps a thread) took six seconds at the
# grown set B = 9, NH = 13, T = 19 of its traced 3 x 5 x 8
LIFT_MIN_STEPS = 1 << 12


def _step_nests(spec: TaskSpec) -> list[Nest]:
    """The loop nests of `spec`'s kernel in its sizes (`steps.step_nests`), read from the
    kernel IR (the migration has analysed the file already: a cached read); none where the
    source cannot be analysed here."""
    from migrator.cuda.frontend import analyze_file
    from migrator.cuda.source import SourceError

    size_of = {s.cuda_param: s.size for s in spec.scalars
               if s.size is not None and re.fullmatch(r"[A-Za-z_]\w*", s.size)}  # fmt: skip
    try:
        dirs, defines = spec.preprocessor()
        key = f"{_parse_key(spec.cuda_source_path(), dirs, defines)}|{spec.kernel.name}|{size_of}"
        hit = _NESTS.get(key)
        if hit is not None:
            return hit
        tu = analyze_file(spec.cuda_source_path(), dirs, defines, spec.kernel.name)
    except (OSError, SourceError, ValueError):
        return []
    kernel = next((k for k in tu.kernels if k.name == spec.kernel.name), None)
    nests = step_nests(kernel, size_of) if kernel is not None else []
    if len(_NESTS) >= MAX_LIFTS:
        _NESTS.pop(next(iter(_NESTS)))
    _NESTS[key] = nests
    return nests


_NESTS: dict[str, list[Nest]] = {}  # by source, kernel and sizes (`api.clear_caches` empties it)


def _cost(
    spec: TaskSpec,
    sizes: dict[str, int],
    program: Program | None = None,
    nests: list[Nest] | None = None,
) -> tuple[int, int, int, int]:
    """Threads of the launch, elements of the largest tensor, the program's arithmetic
    (`_volume`) and a thread's loop steps (`nest_steps`) at `sizes` (0s if unknown)."""
    try:
        grid, block, _ = spec.launch_config(sizes)
        elems = max((math.prod(spec.shape_of(t, sizes)) for t in spec.tensors), default=0)
    except (ValueError, ZeroDivisionError, ArithmeticError):
        return (0, 0, 0, 0)
    threads = math.prod(grid) * math.prod(block)
    return threads, elems, _volume(spec, program, sizes), nest_steps(nests or [], sizes)


def _volume(spec: TaskSpec, program: Program | None, sizes: dict[str, int]) -> int:
    """Output elements times the input elements each reduces, summed over the program's
    assigns: the least arithmetic the original does at `sizes` (0 without a program, or where
    a size expression is undefined there)."""
    if program is None:
        return 0
    tensors = {t.name: t for t in spec.tensors}
    total = 0
    try:
        for a in program.assigns:
            shape = tuple(spec.shape_of(tensors[a.tensor], sizes))
            total += math.prod(shape) * reduce_cost(a.expr, sizes, shape, a.vars)
    except (KeyError, ValueError, ZeroDivisionError, ArithmeticError):
        return 0
    return total


def _within(
    spec: TaskSpec,
    sizes: dict[str, int],
    fitted: list[dict[str, int]],
    budget: tuple[int, ...],
    launch: set[str],
    program: Program | None = None,
    nests: list[Nest] | None = None,
) -> dict[str, int] | None:
    """`sizes` with its largest grown size halved (kept odd: still ragged, and still past the
    first fitted set) until the set costs no more than `budget`; None when that cannot be done."""
    cap_t, cap_e = max(budget[0], LIFT_MIN_THREADS), max(budget[1], LIFT_MIN_ELEMENTS)
    cap_v, cap_s = max(budget[2], LIFT_MIN_VOLUME), max(budget[3], LIFT_MIN_STEPS)
    floor = {n: fitted[0].get(n, 0) for n in sizes}
    for _ in range(32):
        threads, elems, volume, steps = _cost(spec, sizes, program, nests)
        if threads <= cap_t and elems <= cap_e and volume <= cap_v and steps <= cap_s:
            return sizes
        free = [n for n in sizes if n not in launch and sizes[n] // 2 + 1 > floor[n]]
        if not free:
            return None
        n = max(free, key=lambda x: sizes[x] - floor[x])
        got = _launchable(spec, {**sizes, n: sizes[n] // 2 + 1})
        if got is None:
            return None
        sizes = got
    return None


# lifts this process has made, by task, source and settings: a kernel migrated again (the other
# NKI dialect, a re-run in a batch) is not traced and fitted again (`api.clear_caches` empties it)
_LIFTS: dict[str, LiftResult] = {}
MAX_LIFTS = 32


def lift_task(spec: TaskSpec, seed: int = 0, budget_s: float = 3.0) -> LiftResult:
    """The verified tensor program of `spec`'s kernel (or why there is none); pairs of size
    sets are tried in `trace_pairs` order until one verifies or `budget_s` is spent."""
    key = f"{_parse_key(spec.cuda_source_path(), *spec.preprocessor())}|{seed}|{budget_s}|" + (
        spec.model_dump_json()
    )
    hit = _LIFTS.get(key)
    if hit is not None:
        return hit.model_copy(deep=True)
    with _no_cycle_collection():
        result = _lift_task(spec, seed, budget_s)
    if len(_LIFTS) >= MAX_LIFTS:
        _LIFTS.pop(next(iter(_LIFTS)))
    _LIFTS[key] = result.model_copy(deep=True)
    return result


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused: a traced run and its fit allocate millions of small
    objects (Syms, canonical tuples) that hold no cycles and are freed by reference counting,
    and the collector, triggered by the allocation count, walked all of them again and again
    (a third of the time of an attention's traced run)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _lift_task(spec: TaskSpec, seed: int, budget_s: float) -> LiftResult:
    global _AHEAD
    name = spec.kernel.name
    if not spec.outputs_in_order:
        return LiftResult(kernel=name, error=_no_outputs(spec))
    try:
        pairs = trace_pairs(spec)
    except LiftError as e:
        return LiftResult(kernel=name, error=str(e))
    outer = _AHEAD  # (a lift inside a lift, were there one, starts nothing and keeps it)
    _AHEAD = _runs_ahead(spec, seed, pairs[0] if pairs else None) if outer is None else None
    try:
        return _lift_pairs(spec, pairs, seed, budget_s)
    finally:
        if _AHEAD is not None:  # (no verification came: the runs are not wanted)
            _AHEAD.cancel()
        _AHEAD = outer


def _no_outputs(spec: TaskSpec) -> str:
    """Why a task with no output has no program, and the likeliest cause where the file shows
    it: a kernel body inside `#if __CUDA_ARCH__ >= 700`, empty in the host view the file is
    read in (nvcc compiles kernels with __CUDA_ARCH__ defined)."""
    msg = "the task has no output: the kernel stores nothing its host reads back"
    try:
        text = spec.cuda_source_path().read_text(encoding="utf-8", errors="replace")
    except OSError:
        return msg
    if "__CUDA_ARCH__" in text and "__CUDA_ARCH__" not in spec.preprocessor()[1]:
        msg += (" (the file tests __CUDA_ARCH__, which the host view it is read in leaves "
                "undefined, so code under `#if __CUDA_ARCH__ >= 700` is not there: pass "
                "-D__CUDA_ARCH__=800 to read it as the device compiler does)")  # fmt: skip
    return msg


AHEAD_AFTER = 0.1  # seconds of launches so far past which the verification's runs start ahead
_AHEAD: Ahead | None = None  # the task's own runs, started ahead (`verify_all` joins them)


def _runs_ahead(
    spec: TaskSpec, seed: int, first: list[dict[str, int]] | None = None
) -> Ahead | None:
    """The original's runs at the task's own size sets, which the verification (and the
    migration's check) will make, started now on the second core while this process traces
    and fits: where launches have cost time so far (the measurement's), those runs are
    likely to as well (an attention's cost seconds, as its trace and fit do). With them, the
    verification's other sets as `check_sizes` makes them for the `first` pair before a
    program is fitted (a guess: the program's arithmetic may shrink or drop them, and
    `verify_all` abandons what it does not want), cheapest first. Not below `AHEAD_AFTER`:
    while the child lives, every page this process writes is copied (a fork's copy-on-write),
    which runs of a few milliseconds do not repay."""
    # (`C2N_AHEAD_AFTER=0`: always, as the test comparing one process with two sets)
    if SECONDS[0] < seconds_setting("C2N_AHEAD_AFTER", AHEAD_AFTER):
        return None
    sets = _own_sets(spec)
    if first:
        with contextlib.suppress(LiftError, ValueError, ArithmeticError):
            sets += [s for s in check_sizes(spec, first) if s not in sets]
    sets.sort(key=spec.work)
    return ahead(lambda s: _run_quietly(spec, s, seed), sets, [RUN_MEMO])


def _run_quietly(spec: TaskSpec, sizes: dict[str, int], seed: int) -> None:
    with contextlib.suppress(InterpError, ValueError, ArithmeticError):
        run_spec_full(spec, sizes, seed)


def _lift_pairs(
    spec: TaskSpec, pairs: list[list[dict[str, int]]], seed: int, budget_s: float
) -> LiftResult:
    first: LiftResult | None = None
    # (this process's CPU time: other processes on the machine, parallel test workers or
    # migration jobs, do not change which pairs are tried)
    start = time.process_time()
    for sets in pairs:
        if first is not None and time.process_time() - start > budget_s:
            break  # the smallest pairs said why; larger ones would only cost more time
        result = _lift_at(spec, sets, seed)
        if result.ok:
            return result
        first = first or result
    assert first is not None
    return first


def _lift_at(spec: TaskSpec, sets: list[dict[str, int]], seed: int) -> LiftResult:
    """Fit at the first set and read its numbers as sizes (`symbolise`); if that program does
    not verify, fit at the second set too and let the two fits decide (`merge`)."""
    name = spec.kernel.name
    rows: dict[str, set[tuple[int, int]]] = {}
    try:
        first = _fit(spec, sets[0], seed, rows)
        # (a launch constant a size equals, `_one_tile_first`'s N = Bc: the number is the size;
        # one no tensor's shape reads, a block size, is read only where no expression of the
        # other sizes is the number)
        launch = _launch_only(spec)
        free = {v for n, v in sets[0].items() if n not in launch}
        single = symbolise(first, {n: v for n, v in sets[0].items()
                                   if n not in launch or v not in free},
                           frozenset(launch) - spec.data_sizes())  # fmt: skip
        # verified on the inputs the migration's check draws at the same sizes (its seed), so
        # the original's runs at the task's own sizes are computed once (spec_run's memo)
        checks = verify_all(spec, single, check_sizes(spec, sets, single), seed)
        # a set too large to evaluate proves nothing: the sizes read into the numbers (64 as
        # N * N at N = 8) may be what made it too large, which the second fit decides
        if checks and all(v.ok for v in checks) and any(not v.skipped for v in checks):
            return LiftResult(kernel=name, program=single, fitted_at=sets[:1], verified=checks,
                              sources=source_parts(spec, single, rows))  # fmt: skip
        program = merge(first, _fit(spec, sets[1], seed), sets[0], sets[1])
    except LiftError as e:
        return LiftResult(kernel=name, fitted_at=sets, error=str(e))
    except TraceEscape as e:
        return LiftResult(kernel=name, fitted_at=sets, error=str(e))
    except RecursionError:
        return LiftResult(kernel=name, fitted_at=sets,
                          error="the traced expressions nest too deeply to lift")  # fmt: skip
    except (InterpError, ValueError, TypeError, ArithmeticError) as e:
        # the kernel's own run at small sizes failed (a launch it cannot take, a construct the
        # interpreter lacks): nothing to lift from, said as such
        return LiftResult(kernel=name, fitted_at=sets, error=f"the traced run failed: {e}")
    checks = verify_all(spec, program, check_sizes(spec, sets, program), seed)
    return LiftResult(kernel=name, program=program, fitted_at=sets, verified=checks,
                      sources=source_parts(spec, program, rows))  # fmt: skip


def _fit(
    spec: TaskSpec,
    sizes: dict[str, int],
    seed: int,
    rows: dict[str, set[tuple[int, int]]] | None = None,
) -> Program:
    blocks, unwritten = blocks_to_trace(spec, sizes, seed, fit_points)
    try:
        tr, shared = _traced(spec, sizes, seed, blocks)
        return _fit_trace(tr, unwritten if blocks else {}, rows, shared)
    except PartialTrace:  # the blocks' writes differed traced (control flow on a rounding)
        tr, shared = _traced(spec, sizes, seed, None)
        return _fit_trace(tr, {}, rows, shared)


# The latest traced run, kept alive to the end of a process that ends without freeing its
# memory (`teardown.skipped`): a trace is millions of small objects, and freeing them one by
# one as the fit returned cost a third of a register-tiled GEMM's traced run (0.44 of 1.0 s),
# for memory the process gives back whole a moment later. The latest only (a trace can take
# hundreds of MB): an earlier one is freed as the next comes.
_SPARED: list[Trace] = []


def _spare(tr: Trace) -> None:
    if not teardown.skipped():
        return
    _SPARED[:] = [tr]
    # (out of the cycle collector's sight: its full collections would walk every traced
    # value, again and again, for the rest of the run)
    gc.freeze()


FIT_FORK_AFTER = 0.05  # seconds of traced run past which the outputs' fits share two processes


def _traced(
    spec: TaskSpec, sizes: dict[str, int], seed: int, blocks: tuple[int, ...] | None
) -> tuple[Trace, bool]:
    """The traced run (of `blocks`, or of all), and whether it took long enough
    (`FIT_FORK_AFTER`, or `C2N_FIT_FORK_AFTER`) that fitting its outputs pays for a second
    process (a fit takes one to ten times its traced run, a fork and its results' way back
    some tens of milliseconds). Then runs started ahead that are all done are joined (their
    results into spec_run's memo, where the verification finds them): the second core is
    free for the fit."""
    global _AHEAD
    start = time.perf_counter()
    tr = trace_run(spec, sizes, seed, blocks)
    _spare(tr)
    if time.perf_counter() - start < seconds_setting("C2N_FIT_FORK_AFTER", FIT_FORK_AFTER):
        return tr, False
    if _AHEAD is not None and _AHEAD.idle():
        _AHEAD.join()
        _AHEAD = None
    return tr, True


def _fit_trace(
    tr: Trace,
    unwritten: Mapping[str, np.ndarray],
    rows: dict[str, set[tuple[int, int]]] | None,
    shared: bool = False,
) -> Program:
    """The program whose assigns the outputs of `tr` fit; `shared`: several outputs are fitted
    on two processes at once (`workers.map_shared`), where a second core is free."""
    c = Canonicaliser()
    tensors: dict[str, np.ndarray] = {}  # the inputs in float64, made on the first check

    def agrees(a: Assign, flat: list[int]) -> bool:
        """The traced values of `a.tensor` at `flat`, as the assign computes them."""
        want = _numbers(tr.outputs[a.tensor].reshape(-1)[flat])
        if not tensors:
            tensors.update({n: np.asarray(v, dtype=np.float64) if n not in tr.int_tensors else v
                            for n, v in tr.inputs.items()})  # fmt: skip
        try:
            got = evaluate(Program(assigns=[a]), tensors, tr.shapes, tr.sizes, tr.params,
                           {a.tensor: np.asarray(flat, dtype=np.int64)})[a.tensor]  # fmt: skip
        except (ValueError, ArithmeticError, IndexError):
            return False
        finite = np.abs(want[np.isfinite(want)])  # (a masked score's -inf sets no scale)
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        # a NaN traced (poison: a load past a buffer at sizes the relations rule out, times a
        # masked key's 0) tells nothing here; verification at sizes that obey them decides
        told = ~np.isnan(want)
        return bool(told.any()) and bool(
            np.allclose(got[told], want[told], rtol=1e-4, atol=1e-6 * scale)
        )

    def fit_one(name: str) -> Assign:
        values = tr.outputs[name]
        if name in tr.int_tensors:
            # counts per bin (a histogram): fitted by bin function, not by expression
            keys = {n: np.asarray(v) for n, v in tr.inputs.items() if n in tr.int_tensors}
            return fit_counts(name, values, tr.inputs.get(name), keys)
        ints = {n: tr.inputs[n] for n in tr.int_tensors if n in tr.inputs}
        try:
            return fit_elements(c, name, values, tr.shapes, tr.sizes, rows, unwritten.get(name),
                                ints, agrees)  # fmt: skip
        except LiftError as e:
            if not ints:
                raise
            # rows of an input added where an integer input says (an embedding's backward)
            floats = {n: v for n, v in tr.inputs.items() if n not in tr.int_tensors}
            try:
                old = tr.inputs.get(name)
                return fit_scatter(name, _numbers(values.reshape(-1)), old, tr.shapes, floats,
                                   ints)  # fmt: skip
            except LiftError:
                raise e from None

    names = list(tr.outputs)
    if shared and len(names) >= 2:
        # each output is fitted on its own (the canonicaliser is a cache: what one output's fit
        # adds to it changes no other's form), so two processes take them in turn; the source
        # rows the child's fits record come back through the memo merge
        return Program(assigns=map_shared(fit_one, names, [rows] if rows is not None else []))
    return Program(assigns=[fit_one(n) for n in names])


def _numbers(values: np.ndarray) -> np.ndarray:
    """Traced values (Syms) as the numbers their shadows hold, float64."""
    return np.array([float(getattr(x, "v", x)) for x in values])


def source_parts(
    spec: TaskSpec, program: Program, rows: Mapping[str, set[tuple[int, int]]]
) -> list[SourcePart]:
    """The CUDA lines behind each output and each reduction of `program`, from the rows its
    traced operations were computed at (rows of the preprocessed file, mapped back)."""
    from migrator.cuda.interp.spec_run import _parsed

    try:
        pre = _parsed(spec.cuda_source_path(), *spec.preprocessor()).pre
    except (OSError, ValueError):
        return []

    def where(row: int) -> tuple[str, int]:
        file, line = pre.origin(row)
        return Path(file).name, line

    def part(label: str, found: set[tuple[int, int]]) -> SourcePart | None:
        own = sorted({where(k) for _, k in found if k >= 0}, key=lambda x: (x[1], x[0]))
        inner = sorted({where(r) for r, k in found if r >= 0 and r != k} - set(own),
                       key=lambda x: (x[1], x[0]))  # fmt: skip
        if not own and not inner:
            return None
        return SourcePart(part=label, lines=[f"{f}:{n}" for f, n in own],
                          helpers=[f"{f}:{n}" for f, n in inner])  # fmt: skip

    out: list[SourcePart] = []
    seen: set[str] = set()
    for a in program.assigns:
        p = part(f"{a.tensor}[{', '.join(a.vars)}]", rows.get(a.tensor, set()))
        if p is not None:
            out.append(p)
        for e in a.expr.walk():
            if e.kind == "reduce":
                bound = e.upto.render() if e.upto is not None else e.extent
                label = f"{e.op}_{{{e.var} < {bound}}} in {a.tensor}"
                p = part(label, rows.get(f"{a.tensor}/{e.var}", set()))
                if p is not None and label not in seen:  # a shared term is walked twice
                    seen.add(label)
                    out.append(p)
    return out


def low_unit(spec: TaskSpec) -> float:
    """The unit roundoff of the lowest-precision float tensor of the task (0.0: none below
    float32): a kernel given half data often computes in half too."""
    units = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float8_e4m3": 2.0**-4,
             "float8_e5m2": 2.0**-3}  # fmt: skip
    return max((units.get(t.dtype, 0.0) for t in spec.tensors), default=0.0)


def reduce_cost(e: Expr, sizes: Mapping[str, int], shape: tuple[int, ...], vars_: list[str]) -> int:
    """Elements evaluated per output element: the largest product of reduction extents along a
    chain of nested reductions (side by side ones add, nested ones multiply). A range that
    follows the element (`k < i + 1`) counts its largest value over the output (`shape`, its
    coordinates `vars_`)."""
    if e.kind != "reduce":
        return max((reduce_cost(a, sizes, shape, vars_) for a in e.args), default=1)
    # a reduction inside the body that does not read this one's variable (a softmax's max
    # within its sum) is evaluated once per element, broadcast along this one's axis
    inner, hoisted = 1, 0
    for sub in _outer_reduces(e.args[0]):
        cost = reduce_cost(sub, sizes, shape, vars_)
        if e.var in _variables(sub):
            inner = max(inner, cost)
        else:
            hoisted = max(hoisted, cost)
    if e.upto is not None:
        return max(1, _largest(e.upto, sizes, shape, vars_)) * inner + hoisted
    return max(1, int(value_of(e.extent or 1, sizes))) * inner + hoisted


def _outer_reduces(e: Expr) -> list[Expr]:
    """The reductions within `e` that no other reduction within `e` encloses."""
    if e.kind == "reduce":
        return [e]
    return [r for a in e.args for r in _outer_reduces(a)]


def _variables(e: Expr) -> set[str]:
    """The variables `e`'s indices and ranges read."""
    return {t.var for m in index_maps(e) for t in index_terms(m)}


def _largest(
    m: IndexMap, sizes: Mapping[str, int], shape: tuple[int, ...], vars_: list[str]
) -> int:
    """The largest value of an index map of the output coordinates over the output: at every
    element where there are few, else at a spread of them (its terms are monotone between the
    wrap-arounds of a mod, which the spread's edges and middles catch well enough for a cost).
    Remembered: the size choices ask it of each reduction of each assign at every halving
    (an attention's causal ranges, 315 times over outputs of up to a million elements)."""
    key = (m.render(), tuple(sorted(sizes.items())), tuple(shape), tuple(vars_))
    got = _LARGEST.get(key)
    if got is None:
        if len(_LARGEST) >= MAX_LARGEST:
            _LARGEST.clear()
        got = _LARGEST[key] = _largest_at(m, sizes, shape, vars_)
    return got


_LARGEST: dict[tuple[object, ...], int] = {}
MAX_LARGEST = 4096


def _largest_at(
    m: IndexMap, sizes: Mapping[str, int], shape: tuple[int, ...], vars_: list[str]
) -> int:
    total = math.prod(shape)
    at = np.arange(total) if total <= 1 << 20 else np.array(sample(shape, per_dim=33))
    coords = np.unravel_index(at, shape)
    env = dict(zip(vars_, (np.asarray(c) for c in coords), strict=True))
    try:
        return int(np.max(_index(m, env, sizes)))
    except (KeyError, ValueError):  # a bound that reads an enclosing reduction's variable
        return max(shape, default=1)


def verify_all(
    spec: TaskSpec, program: Program, size_sets: list[dict[str, int]], seed: int
) -> list[Verification]:
    """`verify` at each size set, on both cores (`workers.map_jobs`): each set's run of the
    original is independent of the others, and the runs come back into spec_run's memo, where
    the migration's check finds them."""
    global _AHEAD

    def one(s: dict[str, int]) -> Verification:
        return verify(spec, program, s, seed)

    done: dict[int, Verification] = {}
    fresh = list(range(len(size_sets)))
    if _AHEAD is not None:  # the runs started ahead: theirs are in the memo then
        own = _own_sets(spec)  # (the check runs these, verified here or not)

        def wanted(s: dict[str, int]) -> bool:
            return s in size_sets or s in own

        fresh = [i for i in fresh if size_sets[i] not in _AHEAD.items]
        fresh.sort(key=lambda i: spec.work(size_sets[i]))
        # while the child runs a set this needs, the sets it was not given are verified here,
        # cheapest first: both cores busy (the wait was a GEMM's 0.3 s)
        while fresh and _AHEAD.busy_with(wanted):
            i = fresh.pop(0)
            done[i] = one(size_sets[i])
        _AHEAD.join(wanted)
        _AHEAD = None
    rest = [i for i in range(len(size_sets)) if i not in done]
    sets = [size_sets[i] for i in rest]
    if len(fresh) >= 2 and SECONDS[0] >= seconds_setting("C2N_SHARE_AFTER", SHARE_AFTER):
        # where launches have cost time so far, two runs still to make are likely to as well:
        # both cores from the first (`map_jobs` times one before it forks, which leaves two
        # sets one after the other: a register-tiled GEMM's 0.3 and 0.2 s)
        got = map_shared(one, sets, [RUN_MEMO])
    else:
        work = [spec.work(s) for s in sets]  # (the sets differ in cost severalfold)
        got = map_jobs(one, sets, [RUN_MEMO], work)
    done.update(zip(rest, got, strict=True))
    return [done[i] for i in range(len(size_sets))]


SHARE_AFTER = 0.3  # seconds of launches so far past which the verification shares two cores


def verify(spec: TaskSpec, program: Program, sizes: dict[str, int], seed: int) -> Verification:
    try:
        return _verify(spec, program, sizes, seed)
    except (ValueError, ArithmeticError) as e:  # a size expression undefined here (1 / (C - T))
        return Verification(sizes=sizes, ok=False, note=f"the program is undefined here: {e}")


def _verify(spec: TaskSpec, program: Program, sizes: dict[str, int], seed: int) -> Verification:
    shapes = {t.name: spec.shape_of(t, sizes) for t in spec.tensors}
    # where the dense evaluation (output x reduction extents) is too large, the program is
    # compared at a random sample of output elements (the first and last always among them)
    rng = np.random.default_rng(seed)
    points: dict[str, np.ndarray] = {}
    for a in program.assigns:
        red = reduce_cost(a.expr, sizes, shapes[a.tensor], a.vars)
        total = math.prod(shapes[a.tensor])
        if total * red <= VERIFY_ELEMENTS:
            continue
        n = min(VERIFY_ELEMENTS // red, MAX_SAMPLE)
        if n < MIN_SAMPLE:
            n = MAX_EVAL_ELEMENTS // red
        if n < MIN_SAMPLE:
            return Verification(sizes=sizes, ok=True, skipped=True,
                                note="skipped: too large to evaluate")  # fmt: skip
        pick = rng.choice(total, size=min(n, total) - 2, replace=False)
        # (distinct already but for the two ends; np.sort, not np.unique: numpy 2.4's
        # hash-based unique took 5-20 ms for twenty thousand points, sorting 0.4)
        pick = pick[(pick > 0) & (pick < total - 1)]
        points[a.tensor] = np.sort(np.concatenate([[0, total - 1], pick]))
    try:
        run = run_spec_full(spec, sizes, seed)
    except InterpError as e:
        # the original cannot run at these sizes (a vector view of a ragged buffer, say): there
        # is nothing to compare with, which proves nothing either way
        note = f"not compared: the CUDA original does not run here ({e})"
        return Verification(sizes=sizes, ok=True, skipped=True, note=note)
    params = {s.name: float(spec.scalar_value(s, sizes)) for s in spec.scalars
              if s.value is not None}  # fmt: skip
    tensors = {n: np.asarray(v, dtype=np.float64) if is_float(v.dtype) else v
               for n, v in run.inputs.items()}  # fmt: skip
    try:
        got = evaluate(program, tensors, shapes, sizes, params, points)
        unit = low_unit(spec)
        mags = {}
        if unit:
            mag_prog = Program(assigns=[a.model_copy(update={"expr": magnitude(a.expr)})
                                        for a in program.assigns])  # fmt: skip
            mags = evaluate(mag_prog, tensors, shapes, sizes, params, points)
    except LiftError as e:
        return Verification(sizes=sizes, ok=False, note=str(e))
    worst = 0.0
    ok = True
    overflowed = 0
    unwritten: list[np.ndarray] | None = None
    outs = [np.asarray(r, dtype=np.float64) for r in run.outputs]
    for n, (t, ref) in enumerate(zip(spec.outputs_in_order, outs, strict=True)):
        at = points.get(t.name)
        ref64 = ref if at is None else ref.reshape(-1)[at]
        mine = got[t.name]
        floats = is_float(t.dtype)
        if t.role == "out" and (not floats or np.isnan(ref64).any() and not np.isnan(mine).all()):
            # NaN where the program has a value: an element the kernel never wrote (a float4
            # kernel at a size that is no multiple of 4), or a NaN it computed? A second run
            # with another fill tells them apart; unwritten elements are not compared (an
            # integer output's: those the run never stored)
            if unwritten is None:
                unwritten = unwritten_elements(spec, sizes, seed, outs, None, run.result.stored)
            mask = unwritten[n]
            if mask is not None:
                skip = mask if at is None else mask.reshape(-1)[at]
                ref64 = np.where(skip, mine, ref64)
        finite = np.abs(ref64[~np.isnan(ref64)])  # (all NaN: nothing to scale by)
        scale = max(1.0, float(finite.max()) if finite.size else 1.0)
        tol = 1e-5 * scale if np_dtype(t.dtype).itemsize >= 4 else 1e-2 * scale
        if not is_float(t.dtype):
            tol = 0.0  # integers (counts, indices) agree exactly or not at all
        if unit and t.name in mags and is_float(t.dtype):
            # low-precision arithmetic: rounding grows with the terms summed, not the result
            tol = tol + 0.25 * unit * np.nan_to_num(mags[t.name], nan=0.0, posinf=0.0)
        both_nan = np.isnan(ref64) & np.isnan(mine)
        if unit:
            # a half-precision original that overflows (hexp past 65504, inf - inf) where the
            # exact result is finite: a few such elements are its precision's limit, not a
            # different computation; many are not excused
            over = ~np.isfinite(ref64) & np.isfinite(mine)
            if 0 < over.sum() <= max(1, 0.01 * over.size):
                overflowed += int(over.sum())
                both_nan = both_nan | over
        with np.errstate(invalid="ignore"):  # (equal infinities, a mask's -inf, agree)
            err = np.where(both_nan | (mine == ref64), 0.0, np.abs(mine - ref64))
        err = np.nan_to_num(err, nan=np.inf)
        m = float(err.max()) if err.size else 0.0
        worst = max(worst, m)
        # (a NaN both sides agrees: its relative term must not be NaN too)
        rel = 1e-4 if is_float(t.dtype) else 0.0
        rel_ok = np.all(err <= tol + rel * np.abs(np.where(both_nan, 0.0, ref64)))
        ok = ok and bool(rel_ok)
    notes = []
    if points:
        notes.append("sampled " + ", ".join(f"{len(v)} elements of {k}" for k, v in points.items()))
    if overflowed:
        notes.append(f"{overflowed} elements where the low-precision original overflows "
                     "(inf/NaN) and the program is finite not compared")  # fmt: skip
    return Verification(sizes=sizes, ok=ok, max_abs_error=worst, note="; ".join(notes) or None)
