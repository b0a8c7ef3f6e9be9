"""Inferring a task spec from the CUDA source when no sidecar exists.

Sizes are the host launch function's integer parameters; the launch configuration is the launch
site's grid/block with host locals substituted; scalar kernel arguments are sizes (integers) or
values (floats, with stated defaults); each tensor's logical shape comes from its index
expressions and the bounds that guard them: ``A[row*K + k]`` with ``row < M`` and a loop
``k < K`` is ``A[M, K]``; ``out[blockIdx.x]`` is ``out[grid.x]``. What cannot be inferred is
reported, never guessed; the inferred spec is written out for the user to review.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from migrator.contract import TaskSpec
from migrator.cuda import poly
from migrator.cuda.ir import IndexExpr, Kernel, LaunchSite, TranslationUnit

DTYPES = {"float": "float32", "double": "float64", "int": "int32", "unsigned int": "uint32",
          "unsigned": "uint32", "__half": "float16", "half": "float16",
          "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16", "int32_t": "int32",
          "uint32_t": "uint32",
          "long long": "int64", "long long int": "int64", "int64_t": "int64",
          "long": "int64"}  # fmt: skip
DEFAULT_1D, DEFAULT_2D = 65536, 256
SIZE_SETS_1D, SIZE_SETS_2D = (1000, 4097), (37, 130, 67)


class InferenceError(ValueError):
    """The spec cannot be inferred; the message says what is missing."""


def infer_spec(
    tu: TranslationUnit,
    k: Kernel,
    launch: tuple[str, str] | None = None,
    include_dirs: list[str | Path] | None = None,
    defines: dict[str, str] | None = None,
) -> TaskSpec:
    """The task of kernel `k` as its source shows it. `launch`: (grid, block) expressions in
    the kernel's own integer parameters, used instead of the file's launch site (`migrate
    k.cu --grid '(n + 255) / 256' --block 256`). `include_dirs`/`defines`: how the file was
    preprocessed (`-I`, `-D`); the spec records them so the oracle parses the same program."""
    pre = ([str(Path(d).resolve()) for d in include_dirs or []], dict(defines or {}))
    site = next((s for s in tu.launch_sites if s.kernel == k.name), None)
    if launch is not None:
        site = LaunchSite(
            kernel=k.name, grid=f"dim3({launch[0]})", block=f"dim3({launch[1]})",
            args=[p.name for p in k.params],
            host_values={p.name: "<parameter>" for p in k.params if not p.pointer_depth},
            span=k.span,
        )  # fmt: skip
    if site is None:
        ints = [p.name for p in k.params if not p.pointer_depth]
        raise InferenceError(
            f"no launch of {k.name} in {tu.file}, so grid and block are unknown: pass them, in "
            f"the kernel's integer parameters ({', '.join(ints) or 'none'}), e.g. "
            f"migrate {Path(tu.file).name} --kernel {k.name} --grid '(n + 255) / 256' "
            "--block 256"
        )
    site = site.model_copy(update={"template_args": deduced_template_args(k, site)})
    values = {n: v for n, v in site.host_values.items() if not v.startswith("<parameter")}
    parsed = _parse(tu.file, pre)  # the program the interpreter runs: parsed once, here
    # `const int OPT_N = 4000000;` at file scope, read by main's launch: a size like a local's
    values.update(_file_scope_sizes(parsed, k.name, site, values))
    # `int numElements = 50000;` in main: a size named as the host names it, 50000 by default
    literal = {n: v for n, v in ((n, _positive_int(v)) for n, v in values.items()) if v}
    # `int N = 1; for (...) N *= x.size(i);` or N set in two branches: the host decides N at
    # run time, so it is a size of its own (where the kernel's arguments use it)
    chosen = {n for n, v in values.items() if v.startswith("<conditional")}
    # `const int N = x.size(0);` (a torch binding): a size only the tensor knows at run time
    chosen |= {n for n, v in values.items() if _RUNTIME_SIZE.search(v)}
    for name, value in _device_globals(parsed).items():  # `cuda_num_SMs = prop.mult...;`
        values.setdefault(name, value)
    host_params = {n for n, v in site.host_values.items() if v.startswith("<parameter")}
    host = _Host({n: v for n, v in values.items() if n not in literal and n not in chosen},
                 tu.host_helpers, _constants_of(parsed, k.name), host_params)  # fmt: skip
    # `const dim3 &dimsA` passed in: `dimsA.x` is a size of its own, named dimsA_x
    host_params |= {f"{n}_{a}" for n in host_params for a in "xyz"}
    host_params |= set(literal) | chosen
    resolve = host.resolve
    bindings = _template_bindings(k, site)
    resolved = _resolved_dtypes(parsed, k, site)
    tensors, scalars = [], []
    args = site_arguments(k, site)
    bounds = _bounds(k, host, args, site)
    size_names: set[str] = set()
    ties: dict[str, str] = {}  # kernel parameter used as a leading dimension -> row extent
    unshaped: list[str] = []  # tensors whose indices do not show their extent
    for p in k.params:
        if not p.pointer_depth:
            continue
        dtype = DTYPES.get(_base(p.base_type, bindings)) or resolved.get(p.name)
        if dtype is None:
            raise InferenceError(f"tensor {p.name}: type {p.base_type}, role {p.role}")
        vector = dtype.startswith(VECTOR)  # its indices count vectors: measure its elements
        dtype = dtype.removeprefix(VECTOR)
        if p.role == "unused":  # passed and never touched: one element, and an access the
            tensors.append(
                {
                    "name": _pyname(p.name),
                    "param": p.name,
                    "role": "in",
                    "dtype": dtype,
                    "shape": ["1"],
                }
            )  # front end missed is an OOB
            continue  # fmt: skip
        shape = None if vector else _shape(k, p.name, bounds, ties)
        if shape is None:  # measured below, by running the kernel at a few sizes
            unshaped.append(p.name)
            shape = []
        size_names |= {n for d in shape for n in re.findall(r"[A-Za-z_]\w*", d)}
        tensors.append({"name": _pyname(p.name), "param": p.name, "role": p.role,
                        "dtype": dtype, "shape": shape})  # fmt: skip
    for p in k.params:
        if p.pointer_depth:
            continue
        arg = _clean(resolve(args.get(p.name, p.name)))
        dtype = DTYPES.get(_base(p.base_type, bindings)) or resolved.get(p.name)
        if dtype is None:
            raise InferenceError(f"parameter {p.name} has type {p.base_type}")
        names = set(re.findall(r"[A-Za-z_]\w*", arg)) - _FORMULA_FUNCTIONS
        if dtype.startswith("float"):
            value = 1e-5 if p.name.lower().startswith("eps") else _literal(arg, 0.5)
            scalars.append({"name": p.name, "dtype": dtype, "value": value})
        elif p.name in ties:
            scalars.append({"name": p.name, "dtype": dtype, "size": ties[p.name]})
        elif names and names <= host_params:
            size_names |= names
            scalars.append({"name": p.name, "dtype": dtype, "size": arg})
        elif not names and (constant := _positive_int(arg)) is not None:  # `k<<<g, b>>>(x, 64)`
            scalars.append({"name": p.name, "dtype": dtype, "value": constant})
        else:
            raise InferenceError(f"integer argument {p.name} = {arg} is not a host size")
    size_names -= set(ties) - {v for v in ties.values()}
    # a literal the kernel's arguments never name (`threads = 256`) is the launch as written
    unused = {n: v for n, v in literal.items() if n not in size_names}
    host_params -= set(unused) | (chosen - size_names)
    launch_host = _Host(
        {**host.host, **{n: str(v) for n, v in unused.items()},
         **{n: values[n] for n in chosen - size_names}},  # a launch set under a branch
        host.helpers, host.constants, host.params,
    )  # fmt: skip
    grid, block = launch_host.dim3(site.grid), launch_host.dim3(site.block)
    smem = _clean(launch_host.resolve(site.shared_bytes or "0"))
    for expr in [*grid, *block, smem]:
        size_names |= set(re.findall(r"[A-Za-z_]\w*", str(expr))) - _FORMULA_FUNCTIONS
    unknown = size_names - host_params
    if unknown:
        where = (
            ", ".join(
                f"{n} = {values[n]}"
                for n in sorted(values)
                if n in str([site.grid, site.block, site.shared_bytes])
            )
            if values
            else ""
        )
        raise InferenceError(
            f"the launch or the arguments use {', '.join(sorted(unknown))}, which the host "
            "code does not fix as a size"
            + (f" ({where[:200]})" if where else "")
            + "; pass --grid and --block in the kernel's integer parameters, or a spec"
        )
    one_d = all(len(t["shape"]) == 1 for t in tensors)
    default = DEFAULT_1D if one_d else DEFAULT_2D
    # a literal from the host is the default, within what both executors run quickly
    sizes = {
        n: min(literal.get(n, default), default * (1 if one_d else 4)) for n in sorted(size_names)
    }
    # extra sets that are not multiples of 128 or of typical block sizes, and differ per size
    pool = SIZE_SETS_1D if one_d else SIZE_SETS_2D
    sets = [{n: pool[(i + j) % len(pool)] for i, n in enumerate(sizes)} for j in range(2)]
    # a batch dimension (outermost of 3-D tensors, nowhere else) stays small: each entry is a
    # whole 2-D problem for both executors
    inner = {d for t in tensors for d in (t["shape"][1:] if len(t["shape"]) == 3 else t["shape"])}
    for n in sizes:
        if n not in inner and any(len(t["shape"]) == 3 and t["shape"][0] == n for t in tensors):
            sizes[n] = 4
            for j, sset in enumerate(sets):
                sset[n] = 3 - j
    shaped = {n for t in tensors for d in t["shape"] for n in re.findall(r"[A-Za-z_]\w*", d)}
    in_block = {n for b in block for n in re.findall(r"[A-Za-z_]\w*", str(b))}
    launch_only = (in_block & set(sizes)) - shaped
    for n in in_block & set(sizes):
        # `dim3 block(s, s)`: a size in two block dimensions is at most 16 (CUDA's 1024 threads)
        dims = sum(1 for b in block if n in re.findall(r"[A-Za-z_]\w*", str(b)))
        cap = {1: 256, 2: 16}.get(dims, 8)
        if n in shaped:  # a problem size that is also the block: within CUDA's 1024
            sizes[n] = min(sizes[n], cap)
            for sset, v in zip(sets, (cap // 2, cap // 4), strict=False):
                sset[n] = v
        else:  # only sizes the block (`block_size`): a launch choice, the same in every set
            sizes[n] = literal.get(n, cap)
            for sset in sets:
                sset[n] = sizes[n]
    order = {"in": 0, "inout": 1, "out": 2}
    tensors.sort(key=lambda t: order[t["role"]])  # inputs first, as the contract calls them
    data: dict[str, Any] = {
        "kernel": {"name": k.name, "family": "inferred", "source": Path(tu.file).name,
                   "template_args": [_number(a) for a in site.template_args],
                   "include_dirs": pre[0], "defines": pre[1]},
        "sizes": sizes, "size_sets": sets, "tensors": tensors, "scalars": scalars,
        "launch": {"grid": grid, "block": block, "shared_bytes": smem},
        "path": tu.file.removesuffix(".cu") + ".inferred.toml",
    }  # fmt: skip
    if unshaped and not sizes:  # a fixed problem (`img[blockIdx.x * 120 + id]`, 1080 rows)
        _measure_into(tensors, _fixed_extents(parsed, data, unshaped))
    elif unshaped:
        _measure_into(tensors, measure_extents(parsed, data, unshaped, launch_only))
    if sizes:
        # shapes read from the indices, checked by one run at the task's default sizes
        # (pointers advanced per tile, `scratch + C * gridDim.x` then [i], fool the index
        # algebra); kernels that assume whole tiles reach past a ragged size by design, so
        # tiny sizes would accuse them wrongly
        _cap_elements(tensors, sizes, launch_only | in_block)
        short = [p for p in too_small_shapes(parsed, data) if p not in unshaped]
        if short:
            for p in short:
                next(t for t in tensors if t["param"] == p)["shape"] = []
            _measure_into(tensors, measure_extents(parsed, data, short, launch_only))
            unshaped += short
    if unshaped:
        _fit_budget(tensors, sizes, sets, launch_only)
    for sset in (sizes, *sets):
        _cap_elements(tensors, sset, launch_only | in_block)
        _grow_until_launchable(data, sset, set(sset) - launch_only - in_block)
    spec = TaskSpec.model_validate(data)
    for sset in spec.all_size_sets():  # every formula must evaluate
        spec.launch_config(sset)
        for t in spec.tensors:
            spec.shape_of(t, sset)
    return spec


# powers of two: packed vectors and asserts on multiples hold, and `C / NH` divides exactly
# whenever C >= NH (runs where it does not are void); fewer and smaller with four sizes
PROBE_SIZES = (8, 16, 32)
PROBE_SIZES_4 = (4, 8, 16, 32)
OTHER_SIZES = (8, 16, 24, 32)
PROBE_RUNS = 8
MAX_HALO = 16  # `c * sizes + d`: |d| at most this (a stencil's halo, a trailing element)
ELEMENT_BUDGET = 1 << 20  # default sizes keep the largest tensor about this many elements
PROBE_ELEMS = 1 << 22  # elements of a tensor of unknown extent during a measurement
MAX_ELEMENTS = 1 << 22  # no tensor of an inferred size set is larger (the oracle runs it)


def _fixed_extents(parsed: Any, data: dict[str, Any], params: list[str]) -> dict[str, str]:
    """Extents of a launch without sizes: one run shows how far it reaches (each a number)."""
    import numpy as np

    from migrator.cuda.interp.findings import InterpError

    if parsed is None:
        raise InferenceError(f"the extent of {params[0]} cannot be read from its indices")
    try:
        reached = _probe_run(parsed, data, set(params), {}, 8, np.random.default_rng(0))
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


def _measure_into(tensors: list[dict[str, Any]], measured: dict[str, str]) -> None:
    for t in tensors:
        if t["param"] in measured:
            t["shape"] = [measured[t["param"]]]


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


def _cap_elements(tensors: list[dict[str, Any]], sset: dict[str, int], keep: set[str]) -> None:
    """Halve the largest free size (keeping it odd: still ragged) until every tensor of the
    size set has at most MAX_ELEMENTS elements (`S * H` with S = 65536 is 16M)."""
    from migrator.contract import SpecError, eval_expr

    def largest() -> int:
        try:
            return max(
                (math.prod(int(eval_expr(d, sset)) for d in t["shape"]) for t in tensors),
                default=0,
            )  # fmt: skip
        except SpecError:
            return 0

    for _ in range(64):
        free = [n for n in sset if n not in keep and sset[n] > 8]
        if largest() <= MAX_ELEMENTS or not free:
            return
        n = max(free, key=lambda x: sset[x])
        sset[n] = sset[n] // 2 + 1


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
        (sum(len(re.findall(r"[A-Za-z_]\w*", d)) for d in t["shape"]) for t in tensors),
        default=1,
    )
    if degree < 3:
        return
    base = max(8, int(ELEMENT_BUDGET ** (1 / degree)) // 8 * 8)
    ragged = (base // 2 + 3, base - 5, base // 3 + 1)
    for i, n in enumerate(sorted(sizes)):
        if n in launch_only:
            continue
        sizes[n] = base
        for j, sset in enumerate(sets):
            sset[n] = ragged[(i + j) % len(ragged)]


def infer_for_file(source: str | Path, kernel: str | None = None) -> TaskSpec:
    """The inferred spec of `kernel` (or of the file's only kernel), as `migrate` infers it."""
    from migrator.cuda.frontend import analyze_file

    tu = analyze_file(source)
    if kernel is None:
        if len(tu.global_kernels) != 1:
            names = ", ".join(k.name for k in tu.global_kernels) or "none"
            raise InferenceError(f"pass --kernel: the file's kernels are {names}")
        return infer_spec(tu, tu.global_kernels[0])
    try:
        k = tu.kernel(kernel)
    except KeyError as e:
        raise InferenceError(str(e.args[0])) from e
    return infer_spec(tu, k)


def _probe_sizes(data: dict[str, Any], free: list[str], fixed: dict[str, int],
                 row: Any) -> dict[str, int]:  # fmt: skip
    """One measurement size set, grown until the grid has a block (`grid = N / 256`)."""
    from migrator.contract import SpecError, eval_expr

    sz = dict(fixed)
    sz.update({n: int(row[i]) for i, n in enumerate(free)})
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


_PROBE_VALUES: dict[tuple[Any, int], Any] = {}


def _probe_values(dt: Any, high: int, n: int, rng: Any) -> Any:
    """`n` input values (integers in [0, high), floats normal) — a copy of a block drawn once
    per dtype, since four-million-element draws would dominate a measurement."""
    import numpy as np

    block = _PROBE_VALUES.get((dt, high))
    if block is None or len(block) < n:
        m = max(n, PROBE_ELEMS)
        if np.issubdtype(dt, np.integer):
            block = rng.integers(0, high, m).astype(dt)
        else:
            block = rng.standard_normal(m, dtype=np.float32).astype(dt)
        _PROBE_VALUES[(dt, high)] = block
    return block[:n].copy()


def _probe_run(
    parsed: Any, data: dict[str, Any], big: set[str], sz: dict[str, int], high: int, rng: Any
) -> dict[str, int]:
    """Run the kernel once at sizes `sz` (tensors in `big` as large buffers, the others at
    their shapes) and return how far it reached into each array argument."""
    from migrator.contract import eval_expr, np_dtype
    from migrator.cuda.interp import InterpOptions
    from migrator.cuda.interp.runner import run_kernel

    args: dict[str, Any] = {}
    for t in data["tensors"]:
        dt = np_dtype(t["dtype"])
        n_el = PROBE_ELEMS if t["param"] in big else math.prod(
            int(eval_expr(d, sz)) for d in t["shape"]
        )  # fmt: skip
        args[t["param"]] = _probe_values(dt, high, n_el, rng)
    for sc in data["scalars"]:
        args[sc["name"]] = eval_expr(sc["size"], sz) if "size" in sc else sc["value"]
    grid = [int(eval_expr(g, sz)) for g in data["launch"]["grid"]]
    block = [int(eval_expr(b, sz)) for b in data["launch"]["block"]]
    smem = int(eval_expr(data["launch"]["shared_bytes"], sz))
    res = run_kernel(parsed, data["kernel"]["name"], grid, block, args, smem,
                     data["kernel"]["template_args"],
                     InterpOptions(oob="report", extents=True))  # fmt: skip
    return res.extents


def too_small_shapes(parsed: Any, data: dict[str, Any]) -> list[str]:
    """Tensors whose shape read from the indices is smaller than what the kernel reaches at
    the task's default sizes: those are measured instead. Buffers are allocated at the read
    shapes (the reach past them is recorded, out-of-bounds accesses only reported); a kernel
    that does not run at those sizes keeps its shapes (the check will say why)."""
    import numpy as np

    from migrator.contract import SpecError, eval_expr
    from migrator.cuda.interp.findings import InterpError

    if parsed is None:
        return []
    sz = dict(data["sizes"])
    try:
        reached = _probe_run(parsed, data, set(), sz, 8, np.random.default_rng(0))
        shaped = {t["param"]: math.prod(int(eval_expr(d, sz)) for d in t["shape"])
                  for t in data["tensors"]}  # fmt: skip
    except (InterpError, SpecError, ValueError, ArithmeticError):
        return []
    return [p for p, n in shaped.items() if reached.get(p, 0) > n]


def measure_extents(
    parsed: Any, data: dict[str, Any], params: list[str], launch_only: set[str]
) -> dict[str, str]:
    """`_measure` at power-of-two sizes (relations such as `C % NH == 0` hold); failing that,
    at sizes that are not all powers of two (a fit can depend on which multiples occur), then,
    with at most three sizes, at four times the sizes (kernels that assume whole tiles)."""
    free = [n for n in data["sizes"] if n not in launch_only]
    small = PROBE_SIZES if len(free) <= 3 else PROBE_SIZES_4
    attempts = [(small, 1), (OTHER_SIZES, 1)] + ([(small, 4)] if len(free) <= 3 else [])
    for i, (values, scale) in enumerate(attempts):
        try:
            return _measure(parsed, data, params, launch_only, values, scale)
        except InferenceError:
            if i == len(attempts) - 1:
                raise
    raise AssertionError("unreachable")


def _measure(
    parsed: Any,
    data: dict[str, Any],
    params: list[str],
    launch_only: set[str],
    values: tuple[int, ...],
    scale: int,
) -> dict[str, str]:
    """Extents the indices do not show, measured: the kernel runs at PROBE_RUNS size sets with
    the unknown tensors as large buffers, and each extent (one past the highest element reached) is
    fitted as `c * product of sizes + d`, exactly at every run. Raises when no such formula
    fits (a gather's table, whose extent follows the data, say)."""
    import itertools

    import numpy as np

    from migrator.cuda.interp.findings import InterpError

    if parsed is None:
        raise InferenceError(f"the extent of {params[0]} cannot be read from its indices")
    names = sorted(data["sizes"])
    fixed = {n: data["sizes"][n] for n in launch_only}  # block sizes stay as chosen
    free = [n for n in names if n not in fixed]
    runs: list[tuple[dict[str, int], dict[str, int]]] = []
    rng = np.random.default_rng(0)
    # each size varies on its own from run to run, so every product of sizes is told apart
    table = scale * np.random.default_rng(1).choice(values, size=(PROBE_RUNS, len(free)))
    failed = ""
    first_ok = None  # the first run that ran: repeated last with other integer inputs
    for j in range(PROBE_RUNS + 1):
        row = table[j] if j < PROBE_RUNS else table[first_ok if first_ok is not None else 0]
        sz = _probe_sizes(data, free, fixed, row)
        high = 8 if j < PROBE_RUNS else 16  # integer inputs (indices, labels) drawn in [0, high)
        try:
            extents = _probe_run(parsed, data, set(params), sz, high, rng)
        except (InterpError, ValueError, ArithmeticError) as e:
            # sizes that break a relation the kernel assumes (`C % NH == 0`): this run is void
            failed = f"at sizes {sz}: {' '.join(str(e).split())[:200]}"
            extents = None
        if extents is not None and first_ok is None and j < PROBE_RUNS:
            first_ok = j
        runs.append((sz, extents))
    ok = [r for r in runs[:PROBE_RUNS] if r[1] is not None]
    if len(ok) < 3 or runs[-1][1] is None:
        raise InferenceError(
            f"the extent of {params[0]} cannot be read from its indices, and measuring it "
            f"failed {failed}"
        )
    base = runs[first_ok][1]  # type: ignore[index]
    runs = ok + [runs[-1]]
    out: dict[str, str] = {}
    for p in params:
        if runs[-1][1].get(p, 0) != base.get(p, 0):  # type: ignore[union-attr]
            raise InferenceError(
                f"the extent of {p} follows the values of an integer input (a gather: its "
                "table's size is not in the indices); give its shape in a spec"
            )
        # a run that never touched the tensor (`C / NH` was 0 at those sizes) says nothing
        used = [r for r in runs[:-1] if r[1].get(p, 0) > 0]
        seen = [r[1][p] for r in used]
        if len(used) < 3:
            raise InferenceError(
                f"the extent of {p} cannot be read from its indices, and too few measurement "
                f"runs reached it ({len(used)} of {PROBE_RUNS})"
            )
        if max(seen) >= PROBE_ELEMS:
            raise InferenceError(f"the extent of {p} is not bounded by the sizes (measured)")
        fits: list[str] = []
        for exps in itertools.product((0, 1, 2), repeat=len(free)):
            terms = [f"{n}*{n}" if e == 2 else n for n, e in zip(free, exps, strict=True) if e]
            mono = [math.prod(sz[n] ** e for n, e in zip(free, exps, strict=True))
                    for sz, _ in used]  # fmt: skip
            if mono[0] == mono[1]:
                continue
            c, rem = divmod(seen[0] - seen[1], mono[0] - mono[1])
            d = seen[0] - c * mono[0]
            if rem or c <= 0 or abs(d) > MAX_HALO:
                continue
            if any(c * m + d != v for m, v in zip(mono, seen, strict=True)):
                continue
            expr = " * ".join(([str(c)] if c != 1 else []) + terms) or "1"
            fits.append(expr + (f" + {d}" if d > 0 else f" - {-d}" if d < 0 else ""))
        if len(fits) != 1:
            raise InferenceError(
                f"the extent of {p} cannot be read from its indices, and the extents measured "
                f"at {len(used)} size sets ({seen}) fit "
                + (f"several formulas ({', '.join(fits[:3])})" if fits else
                   f"no product of {', '.join(free)}")
            )  # fmt: skip
        out[p] = fits[0]
    return out


def site_launch(tu: TranslationUnit, kernel: str) -> tuple[list[Any], list[Any], Any, list[Any]]:
    """The launch of `kernel` at its host launch site, as expressions of the host function's
    parameters: (grid, block, shared_bytes, template_args)."""
    site = next((s for s in tu.launch_sites if s.kernel == kernel), None)
    if site is None:
        raise InferenceError(f"no launch of {kernel} in {tu.file} (grid and block are unknown)")
    host = _Host(
        {n: v for n, v in site.host_values.items() if not v.startswith("<parameter")},
        tu.host_helpers,
    )
    smem = _int_or_text(host.resolve(site.shared_bytes or "0"))
    targs = [_number(a) for a in site.template_args]
    return host.dim3(site.grid), host.dim3(site.block), smem, targs


def to_toml(spec: TaskSpec) -> str:
    """The inferred spec as a sidecar the user can review and keep."""
    lines = [
        "# Inferred by cuda2nki from the kernel's indices and its launch site; review it.",
        "[kernel]",
        f'name = "{spec.kernel.name}"',
        f'family = "{spec.kernel.family}"',
        f'source = "{spec.kernel.source}"',
        f"template_args = {list(spec.kernel.template_args)!r}".replace("'", '"'),
    ]
    if spec.kernel.include_dirs:
        lines.append("include_dirs = [" + ", ".join(f'"{d}"' for d in spec.kernel.include_dirs)
                     + "]")  # fmt: skip
    if spec.kernel.defines:
        lines.append("defines = { " + ", ".join(f'{n} = "{v}"' for n, v in
                                               spec.kernel.defines.items()) + " }")  # fmt: skip
    lines += ["",
             "[sizes]"] + [f"{n} = {v}" for n, v in spec.sizes.items()]  # fmt: skip
    for s in spec.size_sets:
        lines += ["", "[[size_sets]]"] + [f"{n} = {v}" for n, v in s.items()]
    for t in spec.tensors:
        shape = ", ".join(f'"{d}"' for d in t.shape)
        lines += ["", "[[tensors]]", f'name = "{t.name}"', f'role = "{t.role}"']
        lines += [f'dtype = "{t.dtype}"', f"shape = [{shape}]", f'param = "{t.cuda_param}"']
    for s in spec.scalars:
        lines += ["", "[[scalars]]", f'name = "{s.name}"', f'dtype = "{s.dtype}"']
        lines.append(f'size = "{s.size}"' if s.size is not None else f"value = {s.value!r}")
    g = ", ".join(f'"{x}"' for x in spec.launch.grid)
    b = ", ".join(f'"{x}"' for x in spec.launch.block)
    lines += ["", "[launch]", f"grid = [{g}]", f"block = [{b}]",
              f'shared_bytes = "{spec.launch.shared_bytes}"']  # fmt: skip
    return "\n".join(lines) + "\n"


# --- helpers --------------------------------------------------------------------------------

_SIZEOF = {"sizeof(float)": "4", "sizeof(double)": "8", "sizeof(int)": "4",
           "sizeof(unsigned int)": "4", "sizeof(__half)": "2"}  # fmt: skip


# Launches sized from the device (`deviceProp.multiProcessorCount`) are inferred for one small
# reference device: 8 SMs with the per-SM limits of compute capability 8.0 (CUDA programming
# guide, table of technical specifications). A correct kernel gives the same results on any
# device, a small one keeps the CPU oracle quick, and the spec's formulas show the numbers used.
REFERENCE_DEVICE = {
    "multiProcessorCount": 8, "maxThreadsPerMultiProcessor": 2048, "warpSize": 32,
    "maxThreadsPerBlock": 1024, "sharedMemPerBlock": 49152, "sharedMemPerBlockOptin": 166912,
    "sharedMemPerMultiprocessor": 167936, "regsPerBlock": 65536, "regsPerMultiprocessor": 65536,
    "maxBlocksPerMultiProcessor": 32,
}  # fmt: skip
_DEVICE_FIELD = re.compile(rf"\b\w+\s*(?:\.|->)\s*({'|'.join(REFERENCE_DEVICE)})\b")
_DEVICE_GLOBAL = re.compile(
    rf"\b([A-Za-z_]\w*)\s*=\s*\w+\s*(?:\.|->)\s*({'|'.join(REFERENCE_DEVICE)})\s*;"
)


def _device_globals(parsed: Any) -> dict[str, str]:
    """Variables the host sets from a device property (`cuda_num_SMs =
    deviceProp.multiProcessorCount;` in main, read by a launch elsewhere): the reference
    device's value."""
    if parsed is None:
        return {}
    text = parsed.source_bytes.decode("utf-8", "replace")
    found: dict[str, str] = {}
    for m in _DEVICE_GLOBAL.finditer(text):
        found.setdefault(m.group(1), str(REFERENCE_DEVICE[m.group(2)]))
    return found


_FORMULA_FUNCTIONS = {"ceil_div", "round_up", "min", "max", "sqrt", "select"}  # contract's
_FILE_CONSTANT = re.compile(r"\bsizeof\s*\(\s*[\w:<>, ]+\)|\b(?!std::)\w+(?:<[\w, ]+>)?::\w+\b")
_RUNTIME_SIZE = re.compile(r"\.\s*(?:size|numel|stride|sizes|dim)\s*\(")
_C_CAST = re.compile(
    r"\((?:\s*(?:const|unsigned|signed)\s+)*(?:long\s+long|long|int|short|unsigned|size_t|"
    r"ssize_t|ptrdiff_t|u?int(?:8|16|32|64)_t|float|double)(?:\s+int)?\s*\)"
)


class _Host:
    """Host-side definitions of one launch site: expressions resolved to host parameters."""

    def __init__(
        self,
        host: dict[str, str],
        helpers: dict[str, tuple[list[str], str]] | None = None,
        constants: Callable[[list[str]], dict[str, int]] | None = None,
        params: set[str] | None = None,
    ) -> None:
        self.host = host
        self.helpers = helpers or {}
        self.params = params or set()  # the host function's parameters
        self.constants = constants  # evaluates `sizeof(floatX)`, `x128::size` in the file
        self._known: dict[str, int | None] = {}

    def _file_constants(self, text: str) -> str:
        """`sizeof(T)` and `S::member` replaced by their values, as the interpreter sees the
        file (typedefs chosen by macros, struct templates); others stay as written."""
        if self.constants is None:
            return text
        found = set(_FILE_CONSTANT.findall(text)) - set(self._known)
        if found:
            values = self.constants(sorted(found))
            self._known.update({t: values.get(t) for t in found})
        for t, v in self._known.items():
            if v is not None and t in text:
                text = text.replace(t, str(v))
        return text

    def resolve(self, text: str, depth: int = 0) -> str:
        if text.startswith("<conditional"):
            raise InferenceError(f"the launch depends on a value set under a branch ({text})")
        out = _min_max(self._inline_helpers(text))
        out = re.sub(r"\b(\w+)\.([xyz])\b", self._dim3_component, out)  # blockSize.x
        for k, v in _SIZEOF.items():
            out = out.replace(k, v)
        out = self._file_constants(out)
        out = _DEVICE_FIELD.sub(lambda m: str(REFERENCE_DEVICE[m.group(1)]), out)
        if depth <= 8:
            for name, value in self.host.items():
                if not value.startswith("dim3") and re.search(rf"\b{re.escape(name)}\b", out):
                    sub = f"({self.resolve(value, depth + 1)})"
                    out = re.sub(rf"\b{re.escape(name)}\b", sub, out)
        out = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", out)  # `block_size / 32U`: a suffix, not a name
        out = re.sub(r"\bstatic_cast<[^>]*>", "", out)
        out = _C_CAST.sub("", out)  # `(long)N`, `(size_t)n`: casts, never sizes
        # `ceil((float) N / Bc)`: the cast is gone, the rounding up stays
        out = _ceil_of_quotient(out)
        out = _c_conditionals(out)
        return re.sub(r"\(\((\w+)\)\)", r"(\1)", out).strip()

    def _dim3_component(self, m: re.Match[str]) -> str:
        if m.group(1) in self.params:  # a dim3 parameter: each component a size
            return f"{m.group(1)}_{m.group(2)}"
        value = self.host.get(m.group(1), "")
        inner = re.fullmatch(r"\s*dim3\s*\((.*)\)\s*", value, re.S)
        if inner is None:
            return m.group(0)
        parts = _split_args(inner.group(1))
        k = "xyz".index(m.group(2))
        return f"({parts[k]})" if k < len(parts) else "1"

    def _inline_helpers(self, text: str) -> str:
        """`grid_for(n)` → the helper's returned expression with `n` for its parameter."""
        for name, (params, body) in self.helpers.items():
            m = re.search(rf"\b{re.escape(name)}\s*\(", text)
            if m is None:
                continue
            depth, i = 1, m.end()
            while i < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            args = _split_args(text[m.end() : i - 1])
            if len(args) != len(params):
                continue
            inlined = body
            for p, a in zip(params, args, strict=True):
                inlined = re.sub(rf"\b{re.escape(p)}\b", f"({a})", inlined)
            text = text[: m.start()] + f"({inlined})" + text[i:]
        return text

    def dim3(self, text: str) -> list[Any]:
        source = self.host.get(text.strip(), text)
        if not str(source).startswith("dim3"):
            source = text
        inner = re.fullmatch(r"\s*dim3\s*\((.*)\)\s*", source, re.S)
        parts = _split_args(inner.group(1)) if inner else [source]
        return [_int_or_text(self.resolve(part)) for part in parts]


def _ceil_of_quotient(text: str) -> str:
    """`ceil(a / b)` (a float division, its cast already dropped) as `ceil_div(a, b)`."""
    m = re.search(r"\bceil[f]?\s*\(", text)
    if m is None:
        return text
    depth, i, slash = 1, m.end(), []
    while i < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if text[i] == "/" and depth == 1:
            slash.append(i)
        i += 1
    if depth or len(slash) != 1:
        return text
    a, b = text[m.end() : slash[0]].strip(), text[slash[0] + 1 : i - 1].strip()
    return text[: m.start()] + f"ceil_div({a}, {b})" + _ceil_of_quotient(text[i:])


def _c_conditionals(text: str) -> str:
    """C's `c ? a : b` as `select(c, a, b)`, the spec formulas' spelling (innermost first)."""
    if "?" not in text:
        return text

    def split_top(s: str) -> tuple[str, str, str] | None:
        depth, q, nested = 0, -1, 0
        for i, ch in enumerate(s):
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
            if depth == 0 and ch == "?":
                nested += q >= 0
                q = i if q < 0 else q
            elif depth == 0 and ch == ":" and q >= 0:
                if not nested:
                    return s[:q], s[q + 1 : i], s[i + 1 :]
                nested -= 1
        return None

    def conv(s: str) -> str:
        out, i = "", 0
        while i < len(s):
            if s[i] != "(":
                out, i = out + s[i], i + 1
                continue
            depth, j = 1, i + 1
            while j < len(s) and depth:
                depth += {"(": 1, ")": -1}.get(s[j], 0)
                j += 1
            out, i = out + "(" + conv(s[i + 1 : j - 1]) + ")", j
        parts = split_top(out)
        if parts is None:
            return out
        c, a, b = (conv(x).strip() for x in parts)
        return f"select({c}, {a}, {b})"

    return conv(text)


def _min_max(text: str) -> str:
    """`a > B ? B : a` and friends (clamping idioms) as `min(a, B)` / `max(a, B)`."""
    t = r"([\w()+\-*/ ]+?)"
    text = re.sub(rf"{t}\s*>\s*{t}\s*\?\s*\2\s*:\s*\1", r"min(\1, \2)", text)
    text = re.sub(rf"{t}\s*<\s*{t}\s*\?\s*\2\s*:\s*\1", r"max(\1, \2)", text)
    text = re.sub(rf"{t}\s*<\s*{t}\s*\?\s*\1\s*:\s*\2", r"min(\1, \2)", text)
    text = re.sub(rf"{t}\s*>\s*{t}\s*\?\s*\1\s*:\s*\2", r"max(\1, \2)", text)
    return text


def _clean(expr: str) -> str:
    """Drop redundant parentheses (`((n))` → `n`) so the spec reads like hand-written ones."""
    import ast

    try:
        return ast.unparse(ast.parse(expr, mode="eval"))
    except SyntaxError:
        return expr


def _split_args(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return [*parts, cur.strip()] if cur.strip() else parts


def _positive_int(text: str) -> int | None:
    """`50000`, `1 << 20`, `32 * 1024`: a positive integer constant, else None."""
    from migrator.contract import SpecError, eval_expr

    clean = re.sub(r"(?<=\d)[uUlL]+\b", "", text.strip())
    if not re.fullmatch(r"[\d\s()+*/%-]+", clean):
        return None
    try:
        v = eval_expr(clean, {})
    except (SpecError, TypeError, ValueError):
        return None
    return v if isinstance(v, int) and v > 0 else None


def _int_or_text(s: str) -> Any:
    try:
        return int(_clean(s))
    except ValueError:
        return _clean(s)


def _number(text: str) -> Any:
    try:
        return int(text.rstrip("uUlL"), 0)
    except ValueError:
        return text


def _literal(text: str, default: float) -> float:
    try:
        return float(text.rstrip("fF"))
    except ValueError:
        return default


def _base(t: str, bindings: dict[str, str]) -> str:
    t = t.replace("const", "").strip()
    return bindings.get(t, t)


def _pyname(name: str) -> str:
    import keyword

    return f"{name}_" if keyword.iskeyword(name) else name


def _parse(file: str, pre: tuple[list[str], dict[str, str]]) -> Any:
    """The kernel's file as the interpreter parses it (with the -I/-D the spec records), or
    None when it cannot be read again (then nothing is resolved or measured)."""
    from migrator.cuda.parse import parse_file
    from migrator.cuda.source import SourceError

    try:
        return parse_file(file, *pre)
    except (SourceError, OSError):
        return None


def _resolved_dtypes(parsed: Any, k: Kernel, site: LaunchSite) -> dict[str, str]:
    """Parameter element types as the interpreter resolves them: typedefs chosen by a macro
    (`floatX`), header types (`size_t`), template types bound at the launch site."""
    from migrator.cuda.interp.findings import InterpError
    from migrator.cuda.interp.runner import kernel_signature

    if parsed is None:
        return {}
    try:
        sig = kernel_signature(parsed, k.name, [_number(a) for a in site.template_args])
    except InterpError:
        return {}
    out = {}
    for name, t in sig:
        e = t.elem if t.kind in ("ptr", "array") and t.elem is not None else t
        if e.kind in ("int", "float", "bool") and e.dtype is not None:
            out[name] = str(e.dtype)
        elif e.kind == "vec" and t.kind == "ptr" and e.elem is not None and e.elem.dtype:
            out[name] = VECTOR + str(e.elem.dtype)  # `uint4* img`: uint32 elements, 4 each
    return out


VECTOR = "vector of "  # _resolved_dtypes: a pointer to a CUDA vector type


def _file_scope_sizes(
    parsed: Any, kernel: str, site: LaunchSite, values: dict[str, str]
) -> dict[str, str]:
    """Names the launch reads that the host function does not define, which the file defines
    as integer constants (`const int OPT_N = 4000000;`, `constexpr int N = 1 << 20;`)."""
    if parsed is None:
        return {}
    text = " ".join([site.grid, site.block, site.shared_bytes or "", *site.args,
                     *(v for v in values.values() if not v.startswith("<"))])  # fmt: skip
    names = set(re.findall(r"\b[A-Za-z_]\w*\b", text)) - set(values) - set(site.host_values)
    names -= _FORMULA_FUNCTIONS | {"sizeof", "dim3"}
    if not names:
        return {}
    from migrator.cuda.interp.runner import file_constants

    found = file_constants(parsed, kernel, sorted(names))
    return {n: str(v) for n, v in found.items() if v > 0 and n.isidentifier()}


def _constants_of(parsed: Any, kernel: str) -> Callable[[list[str]], dict[str, int]] | None:
    if parsed is None:
        return None

    def evaluate(texts: list[str]) -> dict[str, int]:
        from migrator.cuda.interp.runner import file_constants

        return file_constants(parsed, kernel, texts)

    return evaluate


def deduced_template_args(k: Kernel, site: LaunchSite) -> list[str]:
    """The launch's template arguments, with type parameters the launch leaves to deduction
    taken from the host's declared argument types (`layernorm_backward<<<..>>>(dinp, ...)`
    with `Tdinp* dinp` in the kernel and `floatX* dinp` in the host: Tdinp is floatX). Stops
    at the first parameter nothing decides (a default or the interpreter may still)."""
    out = list(site.template_args)
    args = site_arguments(k, site)
    tag_values = _tag_values(k, site)
    for t in k.template_params[len(out) :]:
        found = tag_values.get(t.name)
        if t.kind == "type":
            for p in k.params:
                host = site.arg_types.get(args.get(p.name, "").strip(), "")
                stars = len(host) - len(host.rstrip("*"))
                if p.base_type == t.name and p.pointer_depth and stars == p.pointer_depth:
                    found = re.sub(r"\b(const|volatile|__restrict__)\b", "", host.rstrip("*"))
                    found = " ".join(found.split())
                    break
        if found is None or found in {x.name for x in k.template_params}:
            break
        out.append(found)
    return out


def site_arguments(k: Kernel, site: LaunchSite) -> dict[str, str]:
    """Each named kernel parameter's argument text at the launch (unnamed tag parameters hold
    their places in the argument list)."""
    tags = {i for i, _ in k.unnamed_params}
    named_at = [i for i in range(len(k.params) + len(tags)) if i not in tags]
    pairs = zip(k.params, named_at, strict=True)
    return {p.name: site.args[i] for p, i in pairs if i < len(site.args)}


_TAG = re.compile(r"std::(?:bool_constant|integral_constant\s*<\s*[\w ]+,)\s*<?\s*(\w+)\s*>")


def _tag_values(k: Kernel, site: LaunchSite) -> dict[str, str]:
    """`std::bool_constant<false>{}` passed for a `std::bool_constant<Atomic>` parameter:
    Atomic is false (tag dispatch, as llm.c selects kernel variants)."""
    out: dict[str, str] = {}
    for i, ptype in k.unnamed_params:
        declared = _TAG.search(ptype)
        given = _TAG.search(site.args[i]) if i < len(site.args) else None
        if declared and given:
            out[declared.group(1)] = given.group(1)
    return out


def _template_bindings(k: Kernel, site: LaunchSite) -> dict[str, str]:
    return {t.name: a for t, a in zip(k.template_params, site.template_args, strict=False)}


Bounds = list[tuple[poly.Poly, str]]  # bounded index polynomial, exclusive upper bound


def _bounds(k: Kernel, host: _Host, args: dict[str, str], site: LaunchSite) -> Bounds:
    """Index polynomials with an upper bound from a guard, a loop condition or the grid."""
    out: Bounds = []

    def host_expr(e: IndexExpr) -> str | None:
        if not e.affine:
            return None
        if any(  # `if (tid < s)` in a reduction loop: s is the kernel's, not a host size
            sym not in args and not sym.startswith(("blockDim.", "gridDim."))
            for sym in poly.symbols(e.as_poly())
        ):
            return None
        text = poly.render(e.as_poly())
        for param, arg in args.items():
            text = re.sub(rf"\b{re.escape(param)}\b", f"({host.resolve(arg)})", text)
        return _clean(text)

    def add(p: poly.Poly, limit: str | None) -> None:
        if limit and p and all(q != p for q, _ in out):
            out.append((p, limit))

    def host_poly(p: poly.Poly) -> str:
        text = poly.render(p)
        for param, arg in args.items():
            text = re.sub(rf"\b{re.escape(param)}\b", f"({host.resolve(arg)})", text)
        return _clean(text)

    # `cond ? x[i] : 0` guards a load as surely as an if: take `i < n` bounds from it too
    for st in k.stores:
        for node in st.value.walk():
            if node.kind == "select":
                for lhs, op, rhs in _comparisons(node.args[0]):
                    a, b = _expr_poly(lhs), _expr_poly(rhs)
                    if op == "<" and a and b is not None and not _thread_dependent(b):
                        add(a, host_poly(b))

    for g in k.guards:
        for c in g.checks:
            upper = (c.op == "<" and not g.early_exit) or (c.op == ">=" and g.early_exit)
            inclusive = (c.op == "<=" and not g.early_exit) or (c.op == ">" and g.early_exit)
            if (upper or inclusive) and c.index.affine:
                limit = host_expr(c.limit)  # `if (i > n) return;` lets i reach n itself
                add(c.index.as_poly(), f"{limit} + 1" if inclusive and limit else limit)
    for lp in k.loops:
        if lp.var and lp.cmp == "<" and lp.bound is not None:
            add(poly.sym(lp.var), host_expr(lp.bound))
    for axis, g in zip("xyz", host.dim3(site.grid), strict=False):
        add(poly.sym(f"blockIdx.{axis}"), str(g))
    return out


def _shape(k: Kernel, param: str, bounds: Bounds, ties: dict[str, str]) -> list[str] | None:
    """Extents of a tensor; a leading-dimension parameter used as a row stride is recorded in
    `ties` as equal to the row's extent (the contract's tensors are dense)."""
    best: list[str] | None = None
    for a in k.accesses:
        if a.array != param or a.space != "global" or not a.indices[0].affine:
            continue
        const = poly.constant_value(a.indices[0].as_poly())
        if const is not None:  # x[0], x[3]: a small fixed-size buffer (an accumulator)
            if best is None:
                best = [str(const + 1)]
            elif len(best) == 1 and best[0].isdigit():
                best = [str(max(int(best[0]), const + 1))]
            continue
        found = _decompose(a.indices[0].as_poly(), bounds)
        if found is None:  # (the run at the default sizes checks what this leaves out)
            continue
        dims, pieces = found
        if len(pieces) == 2:
            (outer, _), (inner, inner_limit) = pieces
            syms = poly.symbols(outer)
            if poly.constant_value(inner) == 1 and len(outer) == 1 and len(syms) == 1:
                (ld,) = syms
                if ld != inner_limit:
                    ties[ld] = inner_limit
        if best is None or len(dims) > len(best):
            best = dims
    return best


def _decompose(
    p: poly.Poly, bounds: Bounds
) -> tuple[list[str], list[tuple[poly.Poly, str]]] | None:
    """``sum(stride_i * bounded_i) + const`` → extents ordered outermost first."""
    for q, limit in bounds:
        if poly.constant_value(poly.sub(p, q)) is not None:
            return [limit], [({(): 1}, limit)]  # bounded itself (up to a constant halo offset)
    pieces: list[tuple[poly.Poly, str]] = []  # (stride, extent)
    rest = dict(p)
    for q, limit in sorted(bounds, key=lambda b: -len(b[0])):
        anchor = next((m[0] for m, c in q.items() if len(m) == 1 and c == 1
                       and not m[0].startswith(("blockDim", "gridDim"))), None)  # fmt: skip
        if anchor is None:
            continue
        stride = poly.coefficient_of(rest, anchor)
        if not stride:
            continue
        part = poly.mul(stride, q)
        if any(rest.get(m) != c for m, c in part.items()):
            continue
        rest = poly.sub(rest, part)
        pieces.append((stride, limit))
    if not pieces or poly.constant_value(rest) is None:
        return None
    # outermost first: a stride that is a product of more sizes (M*K) encloses a smaller one (K)
    # (and of two constant strides, the larger: `blockIdx.x * 256 + pos` is [blocks, 256])
    pieces.sort(key=lambda sl: (-max((len(m) for m in sl[0]), default=0),
                                -sum(abs(c) for c in sl[0].values())))  # fmt: skip
    return [limit for _, limit in pieces], pieces


def _comparisons(e: Any) -> list[tuple[Any, str, Any]]:
    """The `a < b` (and `b > a`) conjuncts of a condition expression."""
    if e.kind == "binary" and e.op == "&&":
        return _comparisons(e.args[0]) + _comparisons(e.args[1])
    if e.kind == "binary" and e.op in ("<", ">"):
        lhs, rhs = e.args
        return [(lhs, "<", rhs)] if e.op == "<" else [(rhs, "<", lhs)]
    return []


def _expr_poly(e: Any) -> poly.Poly | None:
    """An integer dataflow expression as a polynomial (indices, parameters, + - *)."""
    if e.kind == "const" and e.dtype == "int":
        return poly.const(int(e.value))
    if e.kind in ("index", "param") and e.name:
        return poly.sym(e.name)
    if e.kind == "binary" and e.op in ("+", "-", "*"):
        a, b = (_expr_poly(x) for x in e.args)
        if a is None or b is None:
            return None
        return {"+": poly.add, "-": poly.sub, "*": poly.mul}[e.op](a, b)
    if e.kind == "cast" and e.args:
        return _expr_poly(e.args[0])
    return None


def _thread_dependent(p: poly.Poly) -> bool:
    return any("Idx." in s for s in poly.symbols(p))
