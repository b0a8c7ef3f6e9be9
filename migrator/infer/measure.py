"""Extents the indices do not show, measured by running the kernel (the CUDA interpreter)
at a few size sets, and the checks and caps on the sizes an inferred spec publishes."""

from __future__ import annotations

import contextlib
import copy
import itertools
import math
import mmap
import os
import re
from collections.abc import Mapping
from typing import Any

from migrator.cuda.interp.findings import BUDGET_PHRASE, InterpError
from migrator.cuda.steps import Nest, nest_steps
from migrator.infer.error import GatherError, InferenceError

# powers of two: packed vectors and asserts on multiples hold, and `C / NH` divides exactly
# whenever C >= NH (runs where it does not are void); fewer and smaller with four sizes
PROBE_SIZES = (8, 16, 32)


PROBE_SIZES_4 = (4, 8, 16, 32)


OTHER_SIZES = (8, 16, 24, 32)


PROBE_RUNS = 8


_WORDS = re.compile(r"[A-Za-z_]\w*")


MAX_HALO = 16  # `c * sizes + d`: |d| at most this (a stencil's halo, a trailing element)


ELEMENT_BUDGET = 1 << 20  # default sizes keep the largest tensor about this many elements


PROBE_ELEMS = 1 << 22  # elements of a tensor of unknown extent during a measurement


MAX_ELEMENTS = 1 << 22  # no tensor of an inferred size set is larger (the oracle runs it)
# ... and a size set whose sizes are chosen here, not read from the host code, is at most this
# large: every migration runs the original (each thread simulated), the lifted program and the
# NKI kernel at every set, so the sets' cost is most of a migration's time. 2^18 elements
# still span hundreds of 128-row tiles (a ragged last one included) and wide rows.
DEFAULT_ELEMENTS = 1 << 18
SET_ELEMENTS = 1 << 19  # (the other sets: ragged variants around the defaults)
# threads of one launch at an inferred size set: a kernel with a 256-thread block per row of 33
# elements runs 8x more threads than it has elements, and the oracle simulates every one
MAX_THREADS = 1 << 18
DEFAULT_THREADS = 1 << 18


MAX_PROBE_ALLOC = 1 << 26  # no measurement run allocates a larger tensor


def _fixed_extents(parsed: Any, data: dict[str, Any], params: list[str]) -> dict[str, str]:
    """Extents of a launch without sizes: one run shows how far it reaches (each a number)."""

    from migrator.cuda.interp.findings import InterpError

    if parsed is None:
        raise InferenceError(f"the extent of {params[0]} cannot be read from its indices")
    try:
        reached = _probe_run(parsed, data, set(params), {}, 8)
    except InterpError as e:
        raise InferenceError(
            f"the extent of {params[0]} cannot be read from its indices, and measuring it "
            f"failed: {e}"
        ) from e
    missing = [p for p in params if not reached.get(p)]
    if missing:
        raise InferenceError(f"the kernel never reached {missing[0]} when measured")
    if any(reached[p] > MAX_ELEMENTS for p in params):
        raise InferenceError(f"{params[0]} is larger than {MAX_ELEMENTS} elements")
    return {p: str(reached[p]) for p in params}


def _measure_into(tensors: list[dict[str, Any]], measured: dict[str, Any]) -> None:
    """Measured extents into the tensors' shapes (an extent, or a list of them)."""
    for t in tensors:
        if t["param"] in measured:
            e = measured[t["param"]]
            t["shape"] = list(e) if isinstance(e, list) else [e]


def _grow_until_launchable(data: dict[str, Any], sset: dict[str, int], free: set[str]) -> None:
    """Double the free sizes while the grid has no block (`grid((N + 255) / 256 / 8)` is 0
    below N = 2048): a launch with an empty grid is an error on the device, not a task."""
    from migrator.contract import SpecError, eval_expr

    for _ in range(12):
        try:
            dims = [eval_expr(str(g), sset) for g in data["launch"]["grid"]]
        except (SpecError, ArithmeticError, TypeError):
            return
        if min(dims, default=1) >= 1 or not free:
            return
        grown = {n: sset[n] * 2 for n in free}
        if any(
            math.prod(int(eval_expr(d, {**sset, **grown})) for d in t["shape"]) > MAX_ELEMENTS
            for t in data["tensors"]
        ):
            return
        sset.update(grown)


def _cap_elements(
    tensors: list[dict[str, Any]], sset: dict[str, int], keep: set[str], cap: int = MAX_ELEMENTS
) -> None:
    """Halve the largest free size a shape uses until every tensor of the size set has at most
    `cap` elements (`S * H` with S = 65536 is 16M)."""
    from migrator.contract import SpecError, eval_expr

    used = {w for t in tensors for d in t["shape"] for w in _WORDS.findall(str(d))}

    def largest() -> int:
        try:
            return max(
                (math.prod(int(eval_expr(d, sset)) for d in t["shape"]) for t in tensors),
                default=0,
            )  # fmt: skip
        except SpecError:
            return 0

    # (a size no shape uses, `C` of `hs = C / NH` passed as a scalar, is no cheaper smaller)
    _halve_until(sset, keep | (set(sset) - used), lambda: largest() <= cap)


def _halve_until(sset: dict[str, int], keep: set[str], small: Any) -> None:
    """Halve the largest free size until `small()` holds: a whole size (a multiple of 8, as
    the defaults are) stays whole, a ragged one stays ragged (odd); a halved size moves off a
    value another size has (B = C = 48 cannot tell a kernel that mixes the two up)."""
    for _ in range(64):
        free = [n for n in sset if n not in keep and sset[n] > 8]
        if small() or not free:
            return
        n = max(free, key=lambda x: sset[x])
        was, step = sset[n], 8 if sset[n] % 8 == 0 else 2
        half = max(8, was // 2 // 8 * 8) if step == 8 else was // 2 | 1
        taken = {v for m, v in sset.items() if m != n}
        near = (half + k * step for k in (0, -1, 1, -2, 2, -3, 3))
        sset[n] = next((v for v in near if 8 <= v < was and v not in taken), half)


WORK_BUDGET = 1 << 22  # product of the sizes the shapes use, at any inferred size set
# ... and where a size only counts a loop's steps (a GEMM's K, no grid dimension), at most this:
# the oracle runs a batch of blocks' threads at once, so its time follows the statements each
# thread executes one after another, not the threads (a register-tiled GEMM's 128 x 128 tile
# is one block, and each K step its 512 multiply-adds: 2.5 s a run at K = 128)
SEQUENTIAL_WORK = 1 << 20
# loop steps one thread may take in a run at an inferred size set (`steps.nest_steps`): a
# kernel whose threads each loop over B * NH * T * T (every block redoing every row) ran a
# verification at B = 9, NH = 13, T = 19 for six seconds; at this cap a run costs ~0.5 s
NEST_STEPS = 1 << 12


def _cap_work(
    data: dict[str, Any], sset: dict[str, int], keep: set[str],
    tiles: Mapping[str, int], cap: int = WORK_BUDGET,
) -> None:  # fmt: skip
    """Halve the largest free size a shape uses (in whole tiles where a relation asks for them,
    `M % 128 == 0`) until the product of the sizes the shapes use is at most `cap`: the work
    of a contraction (a GEMM's M * N * K), which no tensor's elements show, and the oracle
    simulates every thread's every step (a register-tiled GEMM took seconds a run at 256^3,
    ten at 256 x 128 x 512)."""
    from migrator.contract import SpecError, eval_expr

    def whole(sizes: dict[str, int]) -> bool:
        """Every grid dimension at least one block (`N / 128` at N = 64 has none: a tile
        the relations do not name, where only `N % 64 == 0` was inferred)."""
        try:
            return all(eval_expr(str(g), sizes) >= 1 for g in data["launch"]["grid"])
        except (SpecError, ArithmeticError, TypeError, ValueError):
            return False

    used = {w for t in data["tensors"] for d in t["shape"] for w in _WORDS.findall(str(d))}
    names = [n for n in sset if n in used]
    stuck: set[str] = set()  # sizes whose halving the launch does not take
    for _ in range(64):
        if math.prod(sset[n] for n in names) <= cap:
            return
        tile = {n: max(1, tiles.get(n, 1)) for n in names}
        free = [n for n in names
                if n not in keep | stuck and sset[n] // 2 >= max(8, tile[n])]  # fmt: skip
        if not free:
            return
        n = max(free, key=lambda x: sset[x])
        half = sset[n] // 2 // tile[n] * tile[n]
        if tile[n] == 1 and sset[n] % 2:
            half |= 1  # (a ragged size stays ragged)
        taken = {v for m, v in sset.items() if m != n}
        step = tile[n] if tile[n] > 1 else 2
        # (a halved size moves off a value another size has, as `_halve_until` does)
        near = (half + k * step for k in (0, 1, -1, 2, -2))
        v = next((v for v in near if max(8, tile[n]) <= v < sset[n] and v not in taken), half)
        if whole(sset) and not whole({**sset, n: v}):
            stuck.add(n)
            continue
        sset[n] = v


def _cap_threads(
    data: dict[str, Any], sset: dict[str, int], keep: set[str], cap: int = MAX_THREADS
) -> None:
    """Halve the largest free size the launch uses until it has at most `cap` threads (grid
    blocks times block threads) at `sset`."""
    from migrator.contract import SpecError, eval_expr

    launch = (*data["launch"]["grid"], *data["launch"]["block"])
    used = {w for d in launch for w in _WORDS.findall(str(d))}

    def threads() -> int:
        try:
            dims = [eval_expr(d, sset) for d in launch]
            return math.prod(max(1, math.ceil(float(x))) for x in dims)
        except (SpecError, ArithmeticError, ValueError, TypeError):
            return 0

    _halve_until(sset, keep | (set(sset) - used), lambda: threads() <= cap)


def spread(pool: tuple[int, ...], i: int, j: int) -> int:
    """Size `i`'s value in extra size set `j`, drawn in turn from `pool`; past the pool's length
    moved off the value it would share (sets where B == T cannot tell a kernel that mixes the
    two up)."""
    return pool[(i + j) % len(pool)] + 4 * (i // len(pool))


def _fit_budget(
    tensors: list[dict[str, Any]],
    sizes: dict[str, int],
    sets: list[dict[str, int]],
    launch_only: set[str],
) -> None:
    """Default sizes and size sets small enough that the largest tensor (a product of up to
    four sizes, measured) stays near ELEMENT_BUDGET elements; sets stay ragged."""
    # a tensor's degree: how many sizes its element count multiplies (`B * NH * T*T`: 4)
    degree = max(
        (sum(len(_WORDS.findall(d)) for d in t["shape"]) for t in tensors),
        default=1,
    )
    if degree < 3:
        return
    base = max(8, int(ELEMENT_BUDGET ** (1 / degree)) // 8 * 8)
    ragged = (base // 2 + 3, base - 5, base // 3 + 1)
    for i, n in enumerate(n for n in sorted(sizes) if n not in launch_only):
        sizes[n] = base
        for j, sset in enumerate(sets):
            sset[n] = spread(ragged, i, j)


def _probe_sizes(data: dict[str, Any], free: list[str], fixed: dict[str, int],
                 row: Any) -> dict[str, int]:  # fmt: skip
    """One measurement size set, grown until the grid has a block (`grid = N / 256`)."""
    from migrator.contract import SpecError, divisor_pairs, eval_expr, tile_relations

    sz = dict(fixed)
    sz.update({n: int(row[i]) for i, n in enumerate(free)})
    # `C % NH == 0`: C a multiple of NH near its draw
    for a, b in divisor_pairs(data.get("relations", [])):
        if a in sz and b in sz:
            sz[a] = max(1, round(sz[a] / sz[b])) * sz[b]
    for n, t in tile_relations(data.get("relations", [])).items():  # `K % 128 == 0`
        if n in free:
            v = sz[n]  # (one to three tiles where the draw is below one: the extent varies)
            sz[n] = t * (round(v / t) if v >= t else 1 + v % 3)
    for _ in range(3):
        try:
            dims = [eval_expr(g, sz) for g in data["launch"]["grid"]]
        except (SpecError, ArithmeticError):
            break
        if min(dims, default=1) >= 1 or math.prod(sz[n] for n in free) * 8 ** len(free) > (
            PROBE_ELEMS
        ):
            break
        sz.update({n: sz[n] * 8 for n in free})
    return sz


class _Block:
    """Probe values drawn once, read-only. Where the OS has anonymous in-memory files (Linux's
    memfd) the values live in one, and a writable copy is a private mapping of it whose pages
    are copied only where the kernel writes: a probe touches little of its sixteen megabytes,
    and copying all of them for each tensor of each probe was a fifth of some measurements."""

    def __init__(self, values: Any) -> None:
        self.fd: int | None = None
        self.values = values
        values.flags.writeable = False
        if not hasattr(os, "memfd_create") or values.nbytes == 0:
            return
        try:
            fd = os.memfd_create("c2n-probe-values", os.MFD_CLOEXEC)
        except OSError:
            return
        try:
            with os.fdopen(os.dup(fd), "wb") as f:
                f.write(values.view("u1").data)
            shared = mmap.mmap(fd, values.nbytes, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            os.close(fd)
            return
        import numpy as np

        self.fd, self.values = fd, np.frombuffer(shared, values.dtype)  # (one copy kept)

    def __del__(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError, TypeError):  # (TypeError: at interpreter exit)
                os.close(self.fd)

    def __len__(self) -> int:
        return len(self.values)

    def copy(self, n: int) -> Any:
        """The first `n` values, writable, the block left as it is."""
        import numpy as np

        if self.fd is None or n == 0:
            return self.values[:n].copy()
        private = mmap.mmap(self.fd, n * self.values.itemsize, access=mmap.ACCESS_COPY)
        return np.frombuffer(private, self.values.dtype, count=n)


_PROBE_VALUES: dict[tuple[Any, int, bool], _Block] = {}
_PROBE_COVER: dict[tuple[Any, int], _Block] = {}  # `cover` blocks, by dtype and value
PROBE_COVER_KEPT = 4


def _probe_values(dt: Any, high: int, n: int, cover: bool = False, writable: bool = True) -> Any:
    """`n` input values (integers in [0, high), floats normal) — a copy of a block drawn once
    per dtype, since four-million-element draws would dominate a measurement. `cover`: every
    integer is high - 1, so every gather reaches its table's last row (the extent then is
    the table's, exactly). Not `writable` (a tensor the kernel only reads): a read-only view
    of the block, not a copy (sixteen-megabyte copies were seconds of an attention's
    measurement); a store into it fails the run rather than change the block."""
    import numpy as np

    if cover and np.issubdtype(dt, np.integer):
        # one value, made as such, the last few kept: the table's rows follow the sizes, so
        # each size set has its own (a draw of four million integers then overwritten, per
        # probe, was most of a cross-entropy's measurement)
        block = _PROBE_COVER.pop((dt, high), None)
        if block is None or len(block) < n:
            block = _Block(np.full(max(n, PROBE_ELEMS), high - 1, dtype=dt))
        _PROBE_COVER[(dt, high)] = block  # (most recent last)
        while len(_PROBE_COVER) > PROBE_COVER_KEPT:
            _PROBE_COVER.pop(next(iter(_PROBE_COVER)))
        return block.copy(n) if writable else block.values[:n]
    block = _PROBE_VALUES.get((dt, high, cover))
    if block is None or len(block) < n:
        m = max(n, PROBE_ELEMS)
        # (a fixed seed: what a block holds never depends on when, or in which process, it
        # was drawn; measurement runs share the second core, `_measure`). One period of
        # PROBE_PERIOD values repeated: a measurement asks how far a kernel reaches, not what
        # it computes, and four million draws were 50-85 ms of every migration
        rng = np.random.default_rng(BLOCK_SEED)
        if np.issubdtype(dt, np.integer):
            period = rng.integers(0, high, PROBE_PERIOD).astype(dt)
        else:
            period = rng.standard_normal(PROBE_PERIOD, dtype=np.float32).astype(dt)
        block = _Block(np.resize(period, m))
        _PROBE_VALUES[(dt, high, cover)] = block
    return block.copy(n) if writable else block.values[:n]


BLOCK_SEED = 0
PROBE_PERIOD = 65521  # values drawn per block (a prime: no tile or row length divides it)
# recent probe runs: their reach, or the error a run raised
_PROBES: dict[tuple[Any, ...], dict[str, int] | Exception] = {}
PROBE_MEMO_SIZE = 64
# thread-statements one measurement run may take: the costliest that fitted an extent in the
# development suites took 1.2e8 (a causal softmax backward, 14 s); a run past this is not
# what a measurement can afford (a row kernel's runs past the block took 5.5e8 to 1.5e9)
PROBE_STATEMENTS = 200_000_000


def _probe_run(
    parsed: Any,
    data: dict[str, Any],
    big: set[str],
    sz: dict[str, int],
    high: int,
    budget: int = 0,
) -> dict[str, int]:
    """Run the kernel once at sizes `sz` (tensors in `big` as large buffers, the others at
    their shapes) and return how far it reached into each array argument. Runs repeat across
    a measurement's attempts and random size rows (a register-tiled GEMM probed 27 times ran 5
    sets twice, 0.2-0.5 s each): the reach is remembered per kernel, task and sizes (the
    inputs are fixed blocks of values, so a repeated run reaches as far), and so is a run that
    failed (its error raised again). `budget`: thread-statements the run may take (0: any)."""
    text = getattr(getattr(parsed, "pre", None), "text", None)
    # (a tensor run as a large buffer: its shape does not change the run, so the shape check's
    # run made ahead of the measurement, before the shape is measured, serves after it)
    tensors = [t if t["param"] not in big else {**t, "shape": None} for t in data["tensors"]]
    task = repr([data["kernel"], tensors, data["scalars"], data["launch"]])
    key = (id(parsed), hash(text) if text is not None else None, task, repr(data.get("inputs")),
           tuple(sorted(sz.items())), high, tuple(sorted(big)), budget)  # fmt: skip
    hit = _PROBES.get(key)
    if isinstance(hit, InterpError):
        raise copy.copy(hit)
    if hit is not None:
        return dict(hit)
    try:
        got = _probe_once(parsed, data, big, sz, high, budget)
    except InterpError as e:
        _remember_probe(key, copy.copy(e))
        raise
    _remember_probe(key, dict(got))
    return got


def _remember_probe(key: tuple[Any, ...], value: dict[str, int] | Exception) -> None:
    if len(_PROBES) >= PROBE_MEMO_SIZE:
        _PROBES.pop(next(iter(_PROBES)))
    _PROBES[key] = value


def _probe_once(
    parsed: Any,
    data: dict[str, Any],
    big: set[str],
    sz: dict[str, int],
    high: int,
    budget: int = 0,
) -> dict[str, int]:
    import numpy as np

    from migrator.contract import eval_expr, np_dtype
    from migrator.cuda.interp import InterpOptions
    from migrator.cuda.interp.runner import run_kernel

    args: dict[str, Any] = {}
    for t in data["tensors"]:
        dt = np_dtype(t["dtype"])
        n_el = PROBE_ELEMS if t["param"] in big else math.prod(
            int(eval_expr(d, sz)) for d in t["shape"]
        )  # fmt: skip
        if n_el > MAX_PROBE_ALLOC:  # sizes that would not fit in memory: say so, not crash
            raise InferenceError(
                f"measuring at sizes {sz} would allocate {n_el} elements for {t['param']}"
            )
        rows = data.get("inputs", {}).get(t["name"], {}).get("high")
        if t["role"] == "out":  # its values are never read: zeros cost no copy (calloc)
            args[t["param"]] = np.zeros(n_el, dtype=dt)
        elif isinstance(rows, str):  # indices into a table of `rows` rows (a gather)
            args[t["param"]] = _probe_values(dt, int(eval_expr(rows, sz)), n_el, True,
                                             writable=t["role"] != "in")  # fmt: skip
        else:
            args[t["param"]] = _probe_values(dt, high, n_el, writable=t["role"] != "in")
    for sc in data["scalars"]:
        args[sc["name"]] = eval_expr(sc["size"], sz) if "size" in sc else sc["value"]
    for p in data["launch"].get("null_args", []):
        args[p] = None  # passed as NULL at the launch
    grid = [int(eval_expr(g, sz)) for g in data["launch"]["grid"]]
    block = [int(eval_expr(b, sz)) for b in data["launch"]["block"]]
    smem = int(eval_expr(data["launch"]["shared_bytes"], sz))
    res = run_kernel(parsed, data["kernel"]["name"], grid, block, args, smem,
                     data["kernel"]["template_args"],
                     # (race findings only report: a probe wants its reach, and the
                     # race tables were a fifth of a shared-memory kernel's probe)
                     InterpOptions(oob="report", extents=True, races=False,
                                   max_thread_statements=budget))  # fmt: skip
    # (a misaligned vector access is kept as a negative reach: `_aligned_rows` reads it)
    misaligned = {m.group(1) for f in res.findings if f.kind == "misaligned"
                  for m in [MISALIGNED.search(f.message)] if m}  # fmt: skip
    return {**res.extents, **{f"misaligned:{n}": -1 for n in misaligned}}


def _draws_integers(data: dict[str, Any]) -> bool:
    """Whether a probe draws integer inputs below its `high` (indices, labels; not a gather's
    indices into a table of known rows, which cover it)."""
    import numpy as np

    from migrator.contract import np_dtype

    for t in data["tensors"]:
        rows = data.get("inputs", {}).get(t["name"], {}).get("high")
        if (t["role"] != "out" and not isinstance(rows, str)
                and np.issubdtype(np_dtype(t["dtype"]), np.integer)):  # fmt: skip
            return True
    return False


# the interpreter's finding for a vector access off its alignment: the buffer is the parameter
MISALIGNED = re.compile(r"misaligned (?:read|write) of global buffer '(\w+)'")
VECTOR_BYTES = 16  # the widest access CUDA vectorises (float4, int4, a 128-bit load)


def vector_relation(innermost: str, dtype: str, sizes: Mapping[str, int]) -> str | None:
    """`V % 4 == 0` for a tensor read in misaligned vectors at `sizes`: its rows hold whole
    16-byte vectors. The row's width is the innermost dimension's one size that is no
    multiple of the vector there (a flat `B * P * T` does not say which is innermost); None
    where that is not one size."""
    from migrator.contract import np_dtype

    width = VECTOR_BYTES // np_dtype(dtype).itemsize
    names = [n for n in _WORDS.findall(innermost) if n in sizes and sizes[n] % width]
    return f"{names[0]} % {width} == 0" if len(names) == 1 and width > 1 else None


def too_small_shapes(
    parsed: Any, data: dict[str, Any], big: frozenset[str] = frozenset()
) -> list[str]:
    """Tensors whose shape read from the indices is smaller than what the kernel reaches at
    the task's default sizes: those are measured instead. Buffers are allocated at the read
    shapes (the reach past them is recorded, out-of-bounds accesses only reported), the
    tensors in `big` as large buffers (measured ones, where the run was made ahead of their
    measurement); a kernel that does not run at those sizes keeps its shapes (the check will
    say why)."""

    from migrator.contract import SpecError, eval_expr
    from migrator.cuda.interp.findings import InterpError

    if parsed is None:
        return []
    sz = dict(data["sizes"])
    try:
        reached = _probe_run(parsed, data, set(big), sz, 8)
        shaped = {t["param"]: math.prod(int(eval_expr(d, sz)) for d in t["shape"])
                  for t in data["tensors"]}  # fmt: skip
    except (InterpError, SpecError, ValueError, ArithmeticError):
        return []
    return [p for p, n in shaped.items() if reached.get(p, 0) > n]


def measure_extents(
    parsed: Any,
    data: dict[str, Any],
    params: list[str],
    launch_only: set[str],
    tie: bool = True,
    pad: bool = True,
    whole: dict[str, int] | None = None,
    tiles_first: bool = False,
    steps: Mapping[str, int] | None = None,
    nests: list[Nest] | None = None,
    compared: frozenset[str] | None = None,
) -> tuple[dict[str, str], list[str]]:
    """`_measure` at power-of-two sizes (relations such as `C % NH == 0` hold); failing that,
    at sizes that are not all powers of two (a fit can depend on which multiples occur), then
    at multiples of the tiles the grid divides the sizes by (kernels that assume whole tiles:
    `a[idx]` read unguarded, a K loop over whole slices), then, with at most three sizes, at
    four times the sizes; last (`tie`), with every size equal (square problems). Returns the
    extents and the relations the sizes then obey (`N % 128 == 0`, `K == M`; none unless a
    tiled or tied attempt was the one that fitted). `whole`: constants the kernel divides
    sizes by (`kIteration = (N / 32) / 4`), the sizes' tiles of a last attempt before the
    tied one (a probe below 128 reads one piece of 128 whatever N is). `tiles_first`: the
    kernel checks none of the sizes its grid tiles (no `row < M`): sizes below a tile cannot
    fit, so the multiples of the tiles are tried first (a register-tiled GEMM's small probes
    cost two seconds to fail). `steps`: the step a loop of the kernel takes through a size
    (`bk < (K + BK - 1) / BK`: K by BK). `nests`: the kernel's loop nests (`steps.step_nests`):
    probes past NEST_STEPS loop steps a thread run last (often not at all). `compared`: the
    sizes the kernel compares anywhere (`i < V`); rows padded to a size it never compares (a
    stride only: llm.c's logits rows of P, V wide) are tried right after the first sizes show
    them (their probes are those sizes'), before the other sizes and square problems."""
    free = [n for n in data["sizes"] if n not in launch_only]
    small = PROBE_SIZES if len(free) <= 3 else PROBE_SIZES_4
    # (values, scale, tiles): sizes drawn from values x scale, or from multiples of the tiles
    attempts: list[tuple[tuple[int, ...], int, dict[str, int] | None]] = [
        (small, 1, None), (OTHER_SIZES, 1, None)
    ]  # fmt: skip
    tiles = grid_tiles(data, launch_only)
    # a size the grid does not tile, probed at the step a loop of the kernel takes through it
    # where that divides its tile (a GEMM's K by BK = 8, not 32: each K step is a probe's
    # cost); its relation is the tile's all the same, so the task is as it was
    grid = _divided([str(g) for g in data["launch"]["grid"]], data, launch_only)
    probe = {n: steps[n] if n not in grid and n in (steps or {}) and t % steps[n] == 0 else t
             for n, t in tiles.items()}  # fmt: skip
    if tiles and _tiles_affordable(data, probe, launch_only):
        attempts.append((TILE_MULTIPLES, 1, probe))  # before four times the sizes: cheaper
    elif (counts := count_tiles(data, launch_only)) and _tiles_affordable(
        data, counts, launch_only
    ):
        attempts.append((TILE_MULTIPLES, 1, counts))
    if tiles_first and len(attempts) == 3:
        attempts.insert(0, attempts.pop())
    if len(free) <= 3:
        attempts.append((small, 4, None))
        threads = _threads(data)
        if threads > 128:
            # sizes past the block: a row kernel whose threads past the row's end leave
            # (`if (threadIdx.x >= C) return;`) writes nothing useful in a narrower row
            attempts.append((tuple(threads + v for v in (8, 40, 72)), 1, None))
    first: InferenceError | None = None
    # rows padded past their width (`_padded_rows`) last, after square problems: a GEMM
    # tutorial's one leading dimension reaches `(M - 1) * K + N` too
    if whole:
        merged = dict(tiles or {})
        for n, c in whole.items():
            merged[n] = math.lcm(merged.get(n, 1), c)
        if merged != tiles and _tiles_affordable(data, merged, launch_only):
            attempts.append((TILE_MULTIPLES, 1, merged))
    plain = [(v, s, t, False) for v, s, t in attempts] + [("tied", 0, None, False)]
    padding = [(v, s, t, True) for v, s, t in attempts] if pad else []
    queue = plain + padding
    while queue:
        values, scale, tiled, padding_now = queue.pop(0)
        if values == "tied":
            if tie and len(free) >= 2:  # a kernel written for square problems (M == N == K)
                try:
                    return _measure_tied(parsed, data, params, launch_only, free, tiles)
                except GatherError:
                    raise
                except InferenceError:
                    pass
            continue
        padded: list[str] | None = [] if padding_now else None
        try:
            out = _measure(parsed, data, params, launch_only, values, scale, tiled, padded,
                           nests)  # fmt: skip
        except GatherError:
            raise  # no size set changes that: the table's rows must become a size
        except InferenceError as e:
            first = first or e
            # extents that fit once the tiled sizes are rounded up to whole tiles: other sizes
            # that are not whole tiles cannot fit either, so the tiles' attempt comes next (the
            # other sizes' probes cost an attention's measurement a third of a second to fail)
            if isinstance(e, Unfitted) and tiled is None and not padding_now:
                nxt = next((a for a in queue if a[2] is not None and not a[3]), None)
                twin = (values, scale, None, True)
                if nxt is not None and reads_whole_tiles(e.runs, free, nxt[2]):
                    queue.remove(nxt)
                    queue.insert(0, nxt)
                if (compared is not None and twin in queue
                        and padded_by_stride(e.runs, free, compared)):  # fmt: skip
                    queue.remove(twin)
                    queue.insert(0, twin)
            continue
        shown = tiles if tiled is probe else tiled or {}
        tiles_of = [f"{n} % {t} == 0" for n, t in sorted(shown.items()) if t > 1]
        if tiled is probe:  # the loop's step too (implied by the tile: the lift's part tile)
            tiles_of += [f"{n} % {t} == 0" for n, t in sorted(probe.items())
                         if 1 < t != tiles[n]]  # fmt: skip
        return out, tiles_of + (padded or [])
    raise first  # type: ignore[misc]


def _threads(data: dict[str, Any]) -> int:
    """Threads per block of the launch at the task's default sizes (0 where unknown)."""
    from migrator.contract import SpecError, eval_expr

    try:
        return math.prod(int(eval_expr(str(b), data["sizes"])) for b in data["launch"]["block"])
    except (SpecError, ArithmeticError, TypeError, ValueError):
        return 0


def _measure_tied(
    parsed: Any,
    data: dict[str, Any],
    params: list[str],
    launch_only: set[str],
    free: list[str],
    tiles: dict[str, int],
) -> tuple[dict[str, str], list[str]]:
    """The extents with every free size equal to the first (tutorial GEMMs index A, B and C
    with one leading dimension: they assume square matrices), at multiples of the sizes'
    common tile; the relations say so (`K == M`, `M % 32 == 0`)."""
    lead = free[0]
    word = re.compile(r"\b(" + "|".join(map(re.escape, free[1:])) + r")\b")

    def tie(v: Any) -> Any:
        return word.sub(lead, v) if isinstance(v, str) else v

    tied = {
        **data,
        "sizes": {n: v for n, v in data["sizes"].items() if n not in free[1:]},
        "tensors": [{**t, "shape": [tie(d) for d in t["shape"]]} for t in data["tensors"]],
        "scalars": [
            {**sc, "size": tie(sc["size"])} if "size" in sc else sc for sc in data["scalars"]
        ],  # fmt: skip
        "launch": {
            k: [tie(x) for x in v] if isinstance(v, list) else tie(v)
            for k, v in data["launch"].items()
        },  # fmt: skip
        "inputs": {k: {**d, "high": tie(d.get("high"))} for k, d in data.get("inputs", {}).items()},
    }
    tile = math.lcm(*(tiles.get(n, 1) for n in free)) if tiles else 1
    values = TILE_MULTIPLES if tile > 1 else OTHER_SIZES
    out = _measure(parsed, tied, params, launch_only, values, 1, {lead: tile} if tile > 1 else None)
    relations = [f"{n} == {lead}" for n in free[1:]]
    return out, relations + ([f"{lead} % {tile} == 0"] if tile > 1 else [])


TILE_MULTIPLES = (1, 2)  # sizes measured at these multiples of their tiles
UNTILED_BESIDE = (2, 3, 5)  # sizes beside tiled ones (`count_tiles`): primes tell products apart


def _tiles_affordable(data: dict[str, Any], tiles: dict[str, int], launch_only: set[str]) -> bool:
    """Whether the largest tiled measurement (every size at its largest tile multiple) keeps
    each shaped tensor within PROBE_ELEMS: four sizes of 256 each are not measured that way."""
    from migrator.contract import SpecError, eval_expr

    sz = {n: data["sizes"][n] for n in launch_only}
    sz.update({n: max(TILE_MULTIPLES) * t for n, t in tiles.items()})
    sz.update({n: max(UNTILED_BESIDE) for n in data["sizes"] if n not in sz})
    try:
        return all(
            math.prod(int(eval_expr(d, sz)) for d in t["shape"]) <= PROBE_ELEMS
            for t in data["tensors"]
        )
    except (SpecError, ArithmeticError, TypeError, ValueError):
        return False


UNTILED = 32  # a size the grid does not divide (GEMM's K) is measured at multiples of this


def grid_tiles(data: dict[str, Any], launch_only: set[str]) -> dict[str, int]:
    """The tile of each free size: what the grid divides it by (`(N + 127) / 128`,
    `ceil_div(N, BN)`, `N / block_size`: 128, BN, block_size's value). A free size the grid
    does not divide (a GEMM's K) gets the tiles' least common multiple, at most UNTILED; {}
    when the grid divides no size."""
    free = [n for n in data["sizes"] if n not in launch_only]
    found = _divided([str(g) for g in data["launch"]["grid"]], data, launch_only)
    if not found:
        return {}
    rest = min(math.lcm(*found.values()), UNTILED)
    return {n: found.get(n, rest) for n in free}


def grid_batches(data: dict[str, Any], free: list[str]) -> set[str]:
    """Free sizes that may number whole problems, one per block: factors of grid axes that are
    plain products of sizes (`grid(B, nh)`, `grid(T / 4, B * NH)`: an attention or a row
    block per batch entry and head), two or more such factors in all, none of them sizing the
    block or in a relation (`C % NH == 0`: NH splits a row into heads)."""
    product = re.compile(r"[A-Za-z_]\w*(\s*\*\s*[A-Za-z_]\w*)*")
    axes = [str(g).strip() for g in data["launch"]["grid"]]
    factors = [set(_WORDS.findall(g)) for g in axes if product.fullmatch(g)]
    if sum(len(f) for f in factors) < 2:
        return set()
    taken = {w for b in data["launch"]["block"] for w in _WORDS.findall(str(b))}
    taken |= {w for r in data.get("relations", []) for w in _WORDS.findall(str(r))}
    return {n for f in factors for n in f if n in free and n not in taken}


def count_tiles(data: dict[str, Any], launch_only: set[str]) -> dict[str, int]:
    """The tile of each size whose tile count the kernel is passed (`Tc = ceil_div(N, Bc)`
    with Bc a constant of the launch: a flash-attention kernel loads whole tiles of Bc rows,
    past N where N % Bc != 0); only those sizes, the others are not tiled."""
    exprs = [str(sc["size"]) for sc in data["scalars"] if "size" in sc]
    return _divided(exprs, data, launch_only)


def _divided(exprs: list[str], data: dict[str, Any], launch_only: set[str]) -> dict[str, int]:
    """Sizes the expressions divide by a constant of the launch (`(N + 127) / 128`,
    `ceil_div(N, BN)`), each with the least common multiple of its divisors."""
    import ast

    from migrator.contract import SpecError, eval_expr

    fixed = {n: data["sizes"][n] for n in launch_only}
    free = [n for n in data["sizes"] if n not in launch_only]
    found: dict[str, int] = {}

    def names(node: ast.AST) -> set[str]:
        return {x.id for x in ast.walk(node) if isinstance(x, ast.Name)}

    def note(dividend: ast.AST, divisor: ast.AST) -> None:
        # `(N + 255) / 256` tiles N; `B * T / 256` tiles no one size of the product
        if names(divisor) & set(free) or len(names(dividend) & set(free)) != 1:
            return
        try:
            t = int(eval_expr(ast.unparse(divisor), fixed))
        except (SpecError, ArithmeticError, TypeError, ValueError):
            return
        for n in names(dividend) & set(free):
            if t > 1:
                found[n] = math.lcm(found.get(n, 1), t)

    for g in exprs:
        for dividend, divisor, _ in divisions(g):
            note(dividend, divisor)
    return found


def divisions(expr: str) -> list[tuple[Any, Any, bool]]:
    """(dividend, divisor, whether a rounding-up call) of each `a / b`, `a // b`,
    `ceil_div(a, b)` and `round_up(a, b)` in a size expression, as `ast` nodes; [] where it
    does not parse."""
    import ast

    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return []
    out: list[tuple[Any, Any, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)):
            out.append((node.left, node.right, False))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("ceil_div", "round_up")
            and len(node.args) == 2
        ):
            out.append((node.args[0], node.args[1], True))
    return out


def _short_of_product(
    free: list[str], used: list[tuple[dict[str, int], Any]], seen: list[int]
) -> list[str]:
    """An input read up to k sizes short of a whole product (`3 * B * T * C - C`: a Q K^T
    kernel reads the packed QKV rows but not the last row's V): the product, its unread tail
    included, when exactly one such formula fits every run."""
    fits: list[str] = []
    for exps in itertools.product((0, 1, 2), repeat=len(free)):
        mono = [math.prod(sz[n] ** e for n, e in zip(free, exps, strict=True)) for sz, _ in used]
        terms = [f"{n}*{n}" if e == 2 else n for n, e in zip(free, exps, strict=True) if e]
        for short, k in itertools.product(free, (1, 2, 3)):
            whole = [v + k * sz[short] for v, (sz, _) in zip(seen, used, strict=True)]
            c, rem = divmod(whole[0], mono[0]) if mono[0] else (0, 1)
            if rem or c <= 0 or c > 8 or any(c * m != w for m, w in zip(mono, whole, strict=True)):
                continue
            if len(set(mono)) < 2:
                continue  # one product at every run: c and the tail not told apart
            expr = " * ".join(([str(c)] if c != 1 else []) + terms) or "1"
            if expr not in fits:
                fits.append(expr)
    return fits


def _padded_rows(
    free: list[str], used: list[tuple[dict[str, int], Any]], seen: list[int]
) -> list[tuple[str, str]]:
    """Rows of a padded width P whose last row the kernel reaches only V into (`(B*T - 1) *
    P + V`: llm.c's logits and their gradient, V the vocabulary, P it rounded up to 64): the
    whole product `B*T*P` and the relation `P >= V`, for each formula that fits every run."""
    fits: list[tuple[str, str]] = []
    for exps in itertools.product((0, 1), repeat=len(free)):
        terms = [n for n, e in zip(free, exps, strict=True) if e]
        if len(terms) < 2:
            continue
        mono = [math.prod(sz[n] for n in terms) for sz, _ in used]
        if len(set(mono)) < 2:
            continue
        for pad, width in itertools.permutations(terms + [n for n in free if n not in terms], 2):
            if pad not in terms:
                continue
            if all(
                m - sz[pad] + sz[width] == v for m, v, (sz, _) in zip(mono, seen, used, strict=True)
            ):
                fits.append((" * ".join(terms), f"{pad} >= {width}"))
    return fits


def _product_fits(free: list[str], used: list[Any], seen: list[int]) -> list[str]:
    """Every `c * monomial + d` (c > 0, |d| at most MAX_HALO) over the sizes `free` that gives
    the extents `seen` at the runs `used` exactly, as formulas."""
    fits: list[str] = []
    for exps in itertools.product((0, 1, 2), repeat=len(free)):
        terms = [f"{n}*{n}" if e == 2 else n for n, e in zip(free, exps, strict=True) if e]
        mono = [math.prod(sz[n] ** e for n, e in zip(free, exps, strict=True))
                for sz, _ in used]  # fmt: skip
        # two runs where the monomial differs fix c and d; every run then checks them
        b = next((i for i in range(1, len(mono)) if mono[i] != mono[0]), None)
        if b is None:
            continue
        c, rem = divmod(seen[0] - seen[b], mono[0] - mono[b])
        d = seen[0] - c * mono[0]
        if rem or c <= 0 or abs(d) > MAX_HALO:
            continue
        if any(c * m + d != v for m, v in zip(mono, seen, strict=True)):
            continue
        expr = " * ".join(([str(c)] if c != 1 else []) + terms) or "1"
        fits.append(expr + (f" + {d}" if d > 0 else f" - {-d}" if d < 0 else ""))
    return fits


DECIDED_AFTER = 5  # runs after which one formula fitting every extent ends a measurement


class Unfitted(InferenceError):
    """No formula fits the extents measured: `runs`, the (sizes, extents) of the runs that
    say so."""

    def __init__(self, message: str, runs: list[tuple[dict[str, int], dict[str, int]]]) -> None:
        super().__init__(message)
        self.runs = runs


def _misfits(
    runs: list[Any], free: list[str]
) -> tuple[list[tuple[list[Any], list[int]]], set[str]] | None:
    """The extents the runs measured that no product of the sizes fits, each as its runs and
    values (`_reached`), and the sizes the products that do fit are of; None where an extent
    was reached too few times to say, or not bounded by the probes."""
    out: list[tuple[list[Any], list[int]]] = []
    plain: set[str] = set()
    for p in sorted({p for _, ext in runs for p in ext}):
        used, seen = _reached(runs, p)
        if len(used) < DECIDED_AFTER - 1 or max(seen) >= PROBE_ELEMS:
            return None
        fits = _product_fits(free, used, seen)
        if fits:
            plain.update(n for f in fits for n in _WORDS.findall(f))
        else:
            out.append((used, seen))
    return out, plain


def reads_whole_tiles(runs: list[Any], free: list[str], tiles: Mapping[str, int]) -> bool:
    """Whether every extent the runs measured is a product of the sizes or one read a whole
    tile past a size `tiles` divides into tiles (`c * (m + (T' - T) * w)`, T' = T rounded up
    to its tile, w a factor of m / T: the last of m / w rows reads a whole tile of T), some
    only the latter: a kernel that reads whole tiles past a size (llm.c's flash attention
    loads its last key tile of Bc rows unguarded), which sizes that are not whole tiles never
    fit as they are."""
    tiled = [n for n in free if tiles.get(n, 1) > 1]
    if not tiled or any(all(v % tiles[n] == 0 for v in OTHER_SIZES) for n in tiled):
        return False  # (multiples of a tile among the other sizes: those may fit as they are)
    got = _misfits(runs, free)
    return bool(got and got[0]) and all(
        any(_whole_tile_fits(free, used, seen, n, tiles[n]) for n in tiled)
        for used, seen in got[0]  # type: ignore[index]
    )


def padded_by_stride(runs: list[Any], free: list[str], compared: frozenset[str]) -> bool:
    """Whether every extent the runs measured is a product of the sizes or exactly one rows
    padded formula (`_padded_rows`), some the latter, each padded to a size that is a row
    stride only: one the kernel never compares and no product extent has (llm.c's P beside
    the vocabulary V it loops to). Such rows fit at other sizes only by chance, and a square
    problem would hide them."""
    got = _misfits(runs, free)
    if not got or not got[0]:
        return False
    pads: set[str] = set()
    for used, seen in got[0]:
        rows = _padded_rows(free, used, seen)
        if len(rows) != 1:
            return False
        pads.add(rows[0][1].split(" >= ")[0])
    # (a size that is also another tensor's dimension is no stride only: a GEMM tutorial's N,
    # B's and C's columns and A's row stride, whose `(M - 1) * N + K` is a square problem's)
    return not pads & (compared | got[1])


def _whole_tile_fits(
    free: list[str], used: list[tuple[dict[str, int], Any]], seen: list[int], n: str, tile: int
) -> bool:
    """Whether some `c * (m + (n' - n) * w)` gives the extents `seen` at the runs `used` (n'
    is n rounded up to `tile`, m a monomial of the sizes `free` with n once, w a factor of
    m / n), past the plain product at some run."""
    k = free.index(n)
    for exps in itertools.product((0, 1, 2), repeat=len(free)):
        if exps[k] != 1:
            continue
        rest = [range(e + 1) if i != k else range(1) for i, e in enumerate(exps)]
        for sub in itertools.product(*rest):
            parts = []
            for sz, _ in used:
                m = math.prod(sz[f] ** e for f, e in zip(free, exps, strict=True))
                w = math.prod(sz[f] ** e for f, e in zip(free, sub, strict=True))
                parts.append((m, (-(-sz[n] // tile) * tile - sz[n]) * w))
            base = parts[0][0] + parts[0][1]
            c, rem = divmod(seen[0], base) if base else (0, 1)
            if rem or not 1 <= c <= 8 or not any(x for _, x in parts):
                continue
            if all(c * (m + x) == v for (m, x), v in zip(parts, seen, strict=True)):
                return True
    return False


def _reached(runs: list[Any], p: str) -> tuple[list[Any], list[int]]:
    """The runs (sizes, extents) that reached tensor `p`, and its extent at each: a run that
    never touched it (`C / NH` was 0 at those sizes) says nothing of it."""
    used = [r for r in runs if r[1].get(p, 0) > 0]
    return used, [r[1][p] for r in used]


def _one_formula_each(params: list[str], free: list[str], done: list[Any]) -> bool:
    """Whether the runs `done` (sizes, extents) leave exactly one `_product_fits` formula for
    every extent, each fitted to at least DECIDED_AFTER - 1 runs that reached it."""
    for p in params:
        used, seen = _reached(done, p)
        if len(used) < DECIDED_AFTER - 1 or max(seen) >= PROBE_ELEMS:
            return False
        if len(_product_fits(free, used, seen)) != 1:
            return False
    return True


def _possible(free: list[str], used: list[Any], seen: list[int], is_input: bool) -> bool:
    """Whether some formula `_measure` accepts could still fit runs that include `used`
    (extents `seen`): `_product_fits`, a constant extent (a monomial that may vary only at
    runs still to come), or (an input) a product short of its tail, or padded rows."""
    return (
        len(set(seen)) == 1
        or bool(_product_fits(free, used, seen))
        or (is_input and bool(_short_of_product(free, used, seen)))
        or bool(_padded_rows(free, used, seen))
    )


def _measure(
    parsed: Any,
    data: dict[str, Any],
    params: list[str],
    launch_only: set[str],
    values: tuple[int, ...],
    scale: int,
    tiles: dict[str, int] | None = None,
    padded: list[str] | None = None,
    nests: list[Nest] | None = None,
) -> dict[str, str]:
    """Extents the indices do not show, measured: the kernel runs at PROBE_RUNS size sets with
    the unknown tensors as large buffers, and each extent (one past the highest element reached) is
    fitted as `c * product of sizes + d`, exactly at every run. Raises when no such formula
    fits (a gather's table, whose extent follows the data, say)."""
    import itertools

    import numpy as np

    from migrator.cuda.interp.findings import InterpError
    from migrator.workers import map_jobs, workers

    if parsed is None:
        raise InferenceError(f"the extent of {params[0]} cannot be read from its indices")
    names = sorted(data["sizes"])
    fixed = {n: data["sizes"][n] for n in launch_only}  # block sizes stay as chosen
    free = [n for n in names if n not in fixed]
    # each size varies on its own from run to run, so every product of sizes is told apart
    # tiles are large: fewer runs where fewer sizes leave fewer products to tell apart
    n_runs = min(PROBE_RUNS, max(4, 2 ** len(free))) if tiles else PROBE_RUNS
    table = scale * np.random.default_rng(1).choice(values, size=(n_runs, len(free)))
    if tiles:  # whole tiles only: each size one or two of its tiles
        if len(free) <= 3:  # every combination (a full factorial), so products are told apart
            rows = list(itertools.product((1, 2), repeat=len(free)))
            table = np.array([rows[j % len(rows)] for j in range(n_runs)], dtype=np.int64)
        table = table * np.array([tiles.get(n, 1) for n in free], dtype=np.int64)
        beside = np.random.default_rng(2)  # (count_tiles: sizes not tiled small, each run
        for c, n in enumerate(free):  # differing; the probe values' draws stay as they were)
            if n not in tiles:
                table[:, c] = beside.choice(UNTILED_BESIDE, size=n_runs)
    batches = grid_batches(data, free)
    for c, n in enumerate(free):
        if n in batches:
            # a launch of whole problems: a few of them reach as far into each (a probe of
            # 32 x 32 attentions ran seconds), small primes still tell the products apart
            table[:, c] = np.random.default_rng(3 + c).choice(UNTILED_BESIDE, size=n_runs)
    inputs = {t["param"] for t in data["tensors"] if t["role"] == "in"}
    sets = [_probe_sizes(data, free, fixed, table[j]) for j in range(n_runs)]
    # cheapest first (by the product of the sizes): an attempt that cannot fit says so after
    # its four cheapest runs (its first four drawn cost an attention's measurement seconds);
    # the runs are then read in their drawn order, as if run in it
    cost = [math.prod(sets[j][n] for n in free) for j in range(n_runs)]
    # ... and a set whose threads each loop past NEST_STEPS steps last: every block of llm.c's
    # naive attention backward loops over all B * NH * T * T, a probe at B * NH = 40, T = 32
    # took 5 s, and the cheaper runs had decided every extent
    late = [nest_steps(nests or [], sets[j]) > NEST_STEPS for j in range(n_runs)]
    order = sorted(range(n_runs), key=lambda j: (late[j], cost[j], j))
    measured: dict[int, tuple[dict[str, int], dict[str, int] | None]] = {}
    failures: dict[int, str] = {}
    first_ok: int | None = None

    def probe(sz: dict[str, int], high: int) -> dict[str, int] | str:
        """The run's reach, or why it is void (sizes that break a relation the kernel assumes,
        `C % NH == 0`)."""
        try:
            return _probe_run(parsed, data, set(params), sz, high, PROBE_STATEMENTS)
        except (InterpError, ValueError, ArithmeticError) as e:
            return f"at sizes {sz}: {' '.join(str(e).split())[:200]}"

    def cheapest_first(i: int) -> dict[str, int] | str:
        """`probe`, and where the attempt's cheapest run is over its budget, the attempt stops
        there (map_jobs runs it first, here, before sharing the others): the others cost more
        (a row kernel's sizes past the block ran eight probes of 12-18 s each)."""
        got = probe(sets[i], 8)
        if i == order[0] and isinstance(got, str) and BUDGET_PHRASE in got:
            raise InferenceError(
                f"the extent of {params[0]} cannot be read from its indices, and measuring it "
                f"at these sizes is too costly: the cheapest run ({got}) takes more than "
                f"{PROBE_STATEMENTS} thread-statements"
            )
        return got

    # runs made ahead on both cores: the four cheapest (an attempt that cannot fit stops
    # there, as below) with the next (after which one formula may already fit each extent,
    # as below: in a batch of its own it left a core idle while the other ran it, a register-
    # tiled GEMM's 0.3 s; on one core it comes after, a run a failing attempt never makes),
    # then all the others
    first_batch = min(DECIDED_AFTER if workers() > 1 else 4, n_runs)
    if first_batch > 4 and late[order[first_batch - 1]]:
        first_batch = 4  # (a set past the loop-step cap waits for the others' verdict)
    ahead: dict[int, dict[str, int] | str] = {}
    decided = False
    for pos, j in enumerate([*order, n_runs]):
        if j < n_runs and decided:
            continue
        if j < n_runs:
            sz = sets[j]
            if j not in ahead:
                end = (first_batch if pos < first_batch else DECIDED_AFTER
                       if pos < DECIDED_AFTER else n_runs)  # fmt: skip
                batch = order[pos : max(end, pos + 1)]
                got = map_jobs(cheapest_first, batch, [_PROBES], [cost[i] for i in batch])
                ahead.update(zip(batch, got, strict=True))
        else:  # the first run that ran (in drawn order), repeated with other integer inputs
            first_ok = min((i for i, r in measured.items() if r[1] is not None), default=None)
            sz = sets[first_ok if first_ok is not None else 0]
        high = 8 if j < n_runs else 16  # integer inputs (indices, labels) drawn in [0, high)
        if j == n_runs and first_ok is not None and not _draws_integers(data):
            # (no integer input: the repeat would draw the same values and reach as far)
            measured[j] = measured[first_ok]
            break
        got = ahead.pop(j) if j < n_runs else probe(sz, high)
        extents = got if isinstance(got, dict) else None
        if isinstance(got, str):
            failures[j] = got
        measured[j] = (sz, extents)
        done = [measured[i] for i in sorted(measured)
                if i < n_runs and measured[i][1] is not None]  # fmt: skip
        if 4 <= len(done) < n_runs and j < n_runs:
            # no formula fits the runs so far: none fits them all (each run of a slow kernel
            # costs seconds, and the next attempt may fit)
            for p in params:
                used, seen = _reached(done, p)
                if (
                    len(used) >= 4
                    and max(seen) < PROBE_ELEMS
                    and not _possible(free, used, seen, p in inputs)
                ):
                    raise Unfitted(
                        f"the extent of {p} cannot be read from its indices, and the extents "
                        f"measured at {len(used)} size sets ({seen}) fit no product of "
                        f"{', '.join(free)}",
                        done,
                    )
        # the cheapest runs already leave one formula for every extent, each the formula of
        # a size set no costlier run would change (the larger ones cost an attention's or a
        # GEMM's measurement seconds; the sizes inferred are verified against the original),
        # asked before a set past the loop-step cap too (`_one_formula_each` wants four runs)
        before_late = pos + 1 < n_runs and late[order[pos + 1]]
        decided = (pos + 1 >= DECIDED_AFTER or before_late) and j < n_runs and (
            _one_formula_each(params, free, done))  # fmt: skip
    failed = failures[max(failures)] if failures else ""
    runs = [measured[j] for j in sorted(measured)]  # (drawn order; the repeat last)
    ok = [r for r in runs[:-1] if r[1] is not None]
    if len(ok) < 3 or runs[-1][1] is None:
        raise InferenceError(
            f"the extent of {params[0]} cannot be read from its indices, and measuring it "
            f"failed {failed}"
        )
    base = measured[first_ok][1]  # type: ignore[index]
    runs = ok + [runs[-1]]
    out: dict[str, str] = {}
    for p in params:
        if runs[-1][1].get(p, 0) != base.get(p, 0):  # type: ignore[union-attr]
            raise GatherError(
                f"the extent of {p} follows the values of an integer input (a gather: its "
                "table's size is not in the indices); give its shape in a spec"
            )
        used, seen = _reached(runs[:-1], p)
        if len(used) < 3:
            raise InferenceError(
                f"the extent of {p} cannot be read from its indices, and too few measurement "
                f"runs reached it ({len(used)} of {n_runs})"
            )
        if max(seen) >= PROBE_ELEMS:
            raise InferenceError(f"the extent of {p} is not bounded by the sizes (measured)")
        fits = _product_fits(free, used, seen)
        if not fits and p in inputs:
            fits = _short_of_product(free, used, seen)
        if not fits and padded is not None:
            rows = _padded_rows(free, used, seen)
            if len(rows) == 1:  # `(B*T - 1) * P + V`: rows padded from V to P
                fits = [rows[0][0]]
                if rows[0][1] not in padded:
                    padded.append(rows[0][1])
        if not fits and len(set(seen)) == 1:
            # the same extent at every run, that of a size the task pins (`K == 16`)
            fits = [n for n in fixed if fixed[n] == seen[0] and f"{n} == {seen[0]}"
                    in data.get("relations", [])][:1]  # fmt: skip
        if len(fits) != 1:
            raise Unfitted(
                f"the extent of {p} cannot be read from its indices, and the extents measured "
                f"at {len(used)} size sets ({seen}) fit "
                + (f"several formulas ({', '.join(fits[:3])})" if fits else
                   f"no product of {', '.join(free)}"),
                runs[:-1],
            )  # fmt: skip
        out[p] = fits[0]
    return out
