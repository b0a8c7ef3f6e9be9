"""The task spec of one kernel, from its IR and its file's host code (see the package)."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from migrator.contract import (
    SpecError,
    TaskSpec,
    divisor_pairs,
    eval_expr,
    is_float,
    np_dtype,
    paired_sizes,
    py_name,
    tile_relations,
)
from migrator.cuda import poly
from migrator.cuda.ir import IndexExpr, Kernel, LaunchSite, TranslationUnit
from migrator.cuda.steps import Nest, nest_steps, step_nests
from migrator.infer.error import GatherError, InferenceError
from migrator.infer.host import (
    _FORMULA_FUNCTIONS,
    _RUNTIME_SIZE,
    _clean,
    _constants_of,
    _device_globals,
    _file_scope_sizes,
    _Host,
    _int_or_text,
    _literal,
    _number,
    _positive_int,
)
from migrator.infer.measure import (
    _PROBES,
    _WORDS,
    DEFAULT_ELEMENTS,
    DEFAULT_THREADS,
    MAX_ELEMENTS,
    MISALIGNED,
    NEST_STEPS,
    PROBE_SIZES_4,
    SEQUENTIAL_WORK,
    SET_ELEMENTS,
    _cap_elements,
    _cap_threads,
    _cap_work,
    _divided,
    _fit_budget,
    _fixed_extents,
    _grow_until_launchable,
    _halve_until,
    _measure_into,
    _probe_run,
    count_tiles,
    divisions,
    grid_batches,
    measure_extents,
    spread,
    too_small_shapes,
    vector_relation,
)
from migrator.workers import Ahead, ahead

DTYPES = {"float": "float32", "double": "float64", "int": "int32", "unsigned int": "uint32",
          "unsigned": "uint32", "__half": "float16", "half": "float16",
          "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16", "int32_t": "int32",
          "uint32_t": "uint32",
          "long long": "int64", "long long int": "int64", "int64_t": "int64",
          "long": "int64"}  # fmt: skip


DEFAULT_1D, DEFAULT_2D = 65536, 256


SIZE_SETS_1D, SIZE_SETS_2D = (1000, 4097), (37, 130, 67)
ROLE_ORDER = {"in": 0, "inout": 1, "out": 2, "scratch": 3}  # the contract's order of tensors


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
    parsed = _parse(tu.file, pre)  # the program the interpreter runs: parsed once, here
    site = _instantiated(site, parsed)
    site = site.model_copy(update={"template_args": deduced_template_args(k, site)})
    values = {n: v for n, v in site.host_values.items() if not v.startswith("<parameter")}
    # `const int OPT_N = 4000000;` at file scope, read by main's launch: a size like a local's
    values.update(_file_scope_sizes(parsed, k.name, site, values))
    # `int numElements = 50000;` in main: a size named as the host names it, 50000 by default
    # (a `case 64:` label's value is a constant of that launch, not a size)
    literal = {n: v for n, v in ((n, _positive_int(v)) for n, v in values.items())
               if v and n not in site.case_values}  # fmt: skip
    # `int N = 1; for (...) N *= x.size(i);` or N set in two branches: the host decides N at
    # run time, so it is a size of its own (where the kernel's arguments use it)
    chosen = {n for n, v in values.items() if v.startswith("<conditional")}
    # `const int N = x.size(0);` (a torch binding): a size only the tensor knows at run time
    chosen |= {n for n, v in values.items() if _RUNTIME_SIZE.search(v)}
    # `block_size = largestPowerOfTwoLessOrEqual(block_size);` through a helper with a loop
    # (none the host helpers inline): the host settles it at run time, a size of its own
    settled = {n for n, v in values.items()
               if (m := re.fullmatch(rf"(\w+)\s*\(\s*\(?{re.escape(n)}\)?\s*\)", v))
               and m.group(1) not in tu.host_helpers}  # fmt: skip
    chosen |= settled
    for name, value in _device_globals(parsed).items():  # `cuda_num_SMs = prop.mult...;`
        values.setdefault(name, value)
    host_params = {n for n, v in site.host_values.items() if v.startswith("<parameter")}
    host = _Host({n: v for n, v in values.items() if n not in literal and n not in chosen},
                 tu.host_helpers, _constants_of(parsed, k.name), host_params)  # fmt: skip
    # `int NUM_PER_BLOCK = 2 * 256; grid(N / NUM_PER_BLOCK)`: the elements one block takes,
    # fixed by the kernel's code (two per thread), not a size of the problem: its value
    for n in _block_work(site, host, literal):
        literal.pop(n)
        host.host[n] = values[n]
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
    null_args: list[str] = []  # `NULL` / `nullptr` at the launch: no tensor, a null pointer
    scratch = _last_block_buffers(k)
    for p in k.params:
        if not p.pointer_depth:
            continue
        if p.name in args and _NULL_ARG.fullmatch(args[p.name].strip()):
            null_args.append(p.name)
            continue
        dtype = DTYPES.get(_base(p.base_type, bindings)) or resolved.get(p.name)
        if dtype is None:
            raise InferenceError(f"tensor {p.name}: type {p.base_type}, role {p.role}")
        vector = dtype.startswith(VECTOR)  # its indices count vectors: measure its elements
        dtype = dtype.removeprefix(VECTOR)
        if p.role == "unused":
            # passed and never touched: one element (an access the front end missed would be
            # an out-of-bounds error in the oracle, never a silent guess)
            tensors.append({"name": py_name(p.name), "param": p.name, "role": "in",
                            "dtype": dtype, "shape": ["1"]})  # fmt: skip
            continue
        shape = None if vector else _shape(k, p.name, bounds, ties, _dense_check(args, host))
        if shape is None:  # measured below, by running the kernel at a few sizes
            unshaped.append(p.name)
            shape = []
        size_names |= {n for d in shape for n in re.findall(r"[A-Za-z_]\w*", d)}
        size_names -= _FORMULA_FUNCTIONS  # (`select(...)` of an inlined helper: no size)
        role = "scratch" if p.name in scratch else p.role
        tensors.append({"name": py_name(p.name), "param": p.name, "role": role,
                        "dtype": dtype, "shape": shape})  # fmt: skip
    tensors += _constant_tables(tu, k)
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
    # a literal the kernel's arguments never name (`threads = 256`) is the launch as written;
    # not one too large to run as written (`N = 100000000`, the grid `N / 128` of a kernel that
    # takes no N): the problem's size, a size of its own
    unused = {n: v for n, v in literal.items() if n not in size_names and v <= MAX_ELEMENTS}
    # a launch set under a branch is its values' text; one a tensor's size sets at run time
    # (`nh = Q.size(1)`, used only by the grid) stays a size of its own
    branched = {n for n in chosen - size_names - settled if not _RUNTIME_SIZE.search(values[n])}
    host_params -= set(unused) | branched
    launch_host = _Host(
        {**host.host, **{n: str(v) for n, v in unused.items()},
         **{n: values[n] for n in branched}},
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
    sets = [{n: spread(pool, i, j) for i, n in enumerate(sizes)} for j in range(2)]
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
    for n in _block_constants(in_block & set(sizes), literal, tensors, scalars):
        # `const int BLOCK_SIZE = 128;` as the block, and one partial sum a block: the block
        # the launch is written for sizes an output (`(N + BLOCK_SIZE - 1) / BLOCK_SIZE`),
        # no input and no argument; its value, as a `#define` would be (a size of its own,
        # varied from set to set, the NKI kernel could read from no shape)
        grid, block, smem, tensors = _substituted(n, literal[n], grid, block, smem, tensors)
        for sset in (sizes, *sets):
            sset.pop(n, None)
        shaped.discard(n)
        in_block.discard(n)
    launch_only = (in_block & set(sizes)) - shaped
    for n in in_block & set(sizes):
        # `dim3 block(s, s)` or `block = s * s`: s at most 16 (CUDA's 1024 threads a block)
        cap = _block_size_cap(block, n, sizes)
        if n in shaped:  # a problem size that is also the block: within CUDA's 1024
            sizes[n] = min(sizes[n], cap)
            for sset, v in zip(sets, (cap // 2, cap // 4), strict=False):
                sset[n] = v
        else:  # only sizes the block (`block_size`): a launch choice, the same in every set
            sizes[n] = literal.get(n, cap)
            for sset in sets:
                sset[n] = sizes[n]
    for n in _tile_constants(scalars, literal) & set(sizes) - shaped:
        # `const int Bc = 32;` and the kernel passed `ceil(N / Bc)`: a tile the kernel is
        # written for (its shared tiles hold Bc rows), the same in every set, as the block
        launch_only.add(n)
        for sset in (sizes, *sets):
            sset[n] = literal[n]
    tensors.sort(key=lambda t: ROLE_ORDER[t["role"]])  # inputs first, as the contract calls them
    # `k<block_size><<<grid, block_size>>>`: a launch-only size, the same in every size set,
    # is the constant the kernel is compiled for
    fixed = {n: v for n, v in sizes.items() if all(sset.get(n, v) == v for sset in sets)}
    targs = [fixed.get(str(a).strip(), a) if str(a).strip() in in_block else a
             for a in site.template_args]  # fmt: skip
    data: dict[str, Any] = {
        "kernel": {"name": k.name, "family": "inferred", "source": Path(tu.file).name,
                   "template_args": [_number(str(a)) for a in targs],
                   "include_dirs": pre[0], "defines": pre[1]},
        "sizes": sizes, "size_sets": sets, "tensors": tensors, "scalars": scalars,
        "launch": {"grid": grid, "block": block, "shared_bytes": smem,
                   **({"null_args": null_args} if null_args else {})},
        "path": tu.file.removesuffix(".cu") + ".inferred.toml",
    }  # fmt: skip
    # a quotient the kernel takes as an argument (`hs = C / NH`) becomes a size before anything
    # is measured: extents over it (`T * hs`) are then products of sizes
    data["relations"] = _quotient_relations(data)
    if data["relations"]:
        _name_quotients(data)
    relations: list[str] = list(data.pop("relations"))  # `N % 128 == 0`: whole tiles assumed
    # `int hs = C / NH` in the kernel: sizes that split evenly, measured so (else the extent
    # reached is `NH * (C / NH)`, no product of sizes)
    divides = _kernel_quotients(k, scalars)
    # what the host refuses to launch without (`if (K % 128 != 0) throw ...`): measured so
    required = _required(site.requires, resolve, sizes)
    for r in required:
        if m := re.fullmatch(r"(\w+) == (\d+)", r):  # `K == 16`: the kernel's only K
            for sset in (sizes, *sets):
                sset[m.group(1)] = int(m.group(2))
            launch_only.add(m.group(1))
    if divides or required:
        data["relations"] = [*divides, *(r for r in required if r not in divides)]
        relations += [r for r in data["relations"] if r not in relations]
    big: frozenset[str] = frozenset()  # tensors the shape check runs as large buffers
    if unshaped and not sizes:  # a fixed problem (`img[blockIdx.x * 120 + id]`, 1080 rows)
        _measure_into(tensors, _fixed_extents(parsed, data, unshaped))
    elif unshaped:
        check = _check_ahead(parsed, data, unshaped, launch_only, in_block, set(literal),
                             relations, _nests(k, data))  # fmt: skip
        if check is not None:
            big = frozenset(unshaped)
        try:
            extents, measured = _measured(parsed, data, unshaped, launch_only,
                                          _trip_tiles(k, data),
                                          _unguarded_tiles(k, data, launch_only),
                                          _loop_steps(k, data), _nests(k, data),
                                          _compared_sizes(k, data))  # fmt: skip
        except BaseException:
            if check is not None:
                check.cancel()
            raise
        if check is not None:
            check.join()  # (its run in the probe memo, where the check finds it)
        relations += [r for r in measured if r not in relations]
        _measure_into(tensors, _rows_of(k, extents, args, host))
    if sizes and any(t["param"] not in unshaped for t in tensors):
        # shapes read from the indices (measured ones fitted eight runs), checked by one run
        # at the task's default sizes (pointers advanced per tile, `scratch + C * gridDim.x`
        # then [i], fool the index algebra); kernels that assume whole tiles reach past a
        # ragged size by design, so tiny sizes would accuse them wrongly
        _check_sizes(data, launch_only | in_block, set(literal))
        short = [p for p in too_small_shapes(parsed, _checked_at(data, launch_only | in_block,
                                                                  relations, _nests(k, data)),
                                             big)
                 if p not in unshaped]  # fmt: skip
        if short:
            for p in short:
                next(t for t in tensors if t["param"] == p)["shape"] = []
            extents, more = _measured(parsed, data, short, launch_only, _trip_tiles(k, data),
                                      nests=_nests(k, data))  # fmt: skip
            _measure_into(tensors, extents)
            relations += [r for r in more if r not in relations]
            unshaped += short
        else:
            # rows read in 16-byte vectors through a pointer (`load128(x + row * V)`): whole
            # vectors (the findings of the run just made, memoised: no run of its own)
            relations += [r for r in _aligned_rows(parsed, data, launch_only | in_block,
                                                   relations, _nests(k, data), big)
                          if r not in relations]  # fmt: skip
    if unshaped:
        _fit_budget(tensors, sizes, sets, launch_only)
    for sset in (sizes, *sets):
        _cap_elements(tensors, sset, launch_only | in_block, SET_ELEMENTS)
        _cap_threads(data, sset, launch_only | in_block)
    # sizes the host code does not state are ours to choose: small enough that a migration's
    # runs at the defaults (original, lifted program, NKI kernel, profile) stay quick
    _cap_elements(tensors, sizes, launch_only | in_block | set(literal), DEFAULT_ELEMENTS)
    _cap_threads(data, sizes, launch_only | in_block | set(literal), DEFAULT_THREADS)
    for sset in (sizes, *sets):
        _grow_until_launchable(data, sset, set(sset) - launch_only - in_block)
    relations += [r for r in _vector_relations(k, tensors, sizes, block, scalars)
                  if r not in relations]  # fmt: skip
    relations += [r for r in _quotient_relations(data) if r not in relations]
    if relations:
        _whole_tiles(data, relations)
        named = _name_quotients(data)
        # rounding to whole tiles grows sets (T to 256 and B, C as they were), and a named
        # quotient changes every set's cost: capped again, the sizes the relations tie left
        tied = set() if named else {w for r in data["relations"] for w in _WORDS.findall(r)}
        for sset in (data["sizes"], *data["size_sets"]):
            _cap_elements(tensors, sset, launch_only | in_block | tied, SET_ELEMENTS)
            _cap_threads(data, sset, launch_only | in_block | tied)
        _cap_elements(tensors, data["sizes"], launch_only | in_block | set(literal) | tied,
                      DEFAULT_ELEMENTS)  # fmt: skip
    # a contraction's work (M * N * K), which no tensor shows, bounded at every set: sizes
    # tied by a relation other than whole tiles (`C % NH == 0`, `K == M`) stay as they are
    tiles = tile_relations(data.get("relations", []))
    tied = {w for r in data.get("relations", []) if not tile_relations([r])
            for w in _WORDS.findall(r)}  # fmt: skip
    for sset in (data["sizes"], *data["size_sets"]):
        _cap_work(data, sset, launch_only | in_block | tied, tiles)
    _cap_steps(data, _sequential_sizes(k, data), launch_only | in_block | tied, tiles)
    _cap_nests(data, _nests(k, data), launch_only | in_block | tied | set(tiles))
    _drop_repeated_sets(data)
    _small_batches(data)
    _label_ranges(k, data)
    _memset_inputs(k, site, data, resolve)
    try:
        spec = TaskSpec.model_validate(data)
    except ValueError as e:  # (pydantic's ValidationError): a task we could not make consistent
        raise InferenceError(
            f"the inferred task is inconsistent: {' '.join(str(e).split())[:300]}"
        ) from e
    for sset in spec.all_size_sets():  # every formula must evaluate
        spec.launch_config(sset)
        for t in spec.tensors:
            # (a shape the host fixes, `const int N = 100000000` read by the indices, is
            # no size of ours to shrink: every run of the original would allocate it all)
            if (count := math.prod(spec.shape_of(t, sset))) > MAX_ELEMENTS:
                raise InferenceError(
                    f"{t.cuda_param} would hold {count} elements at "
                    f"{sset} (at most {MAX_ELEMENTS} in an inferred task): give a spec with "
                    "smaller sizes"
                )
    if _leaves_before_a_shuffle(k):
        spec = _defined_sets(spec, launch_only | in_block)
    return _written_before_read(spec, k)


_LAST_BLOCK = re.compile(r"gridDim\s*\.\s*[xyz]\s*-\s*1\b")  # the last ticket
_RESULT_USED = re.compile(r"=\s*atomic(?:Add|Inc)\s*\(|atomic(?:Add|Inc)\s*\([^;]*\)\s*[=!<>]=?")


def _last_block_buffers(k: Kernel) -> set[str]:
    """Pointer parameters holding the counter of a "last block" reduction: an atomicAdd on
    the buffer whose old value the kernel keeps (`flag = atomicAdd(count, 1)`, then `flag ==
    gridDim.x - 1`: the last block to finish sums the others' partials, which the same buffer
    holds). Working memory of the launch, not a result: `role = "scratch"` (llm.c's
    layernorm_backward kernels 5-7 pass `scratch`, which the host frees unread)."""
    if not _LAST_BLOCK.search(_kernel_text(k)):
        return set()
    pointers = {p.name for p in k.params if p.pointer_depth}
    read = {a.array for a in k.accesses if a.kind == "read" and a.space == "global"}
    lines: dict[str, list[str]] = {}  # per file (an atomic may sit in an inlined helper)
    found: set[str] = set()
    for a in k.accesses:
        if a.kind != "atomic" or a.array not in pointers or a.array not in read:
            continue
        if a.span.file not in lines:
            try:
                lines[a.span.file] = Path(a.span.file).read_text(encoding="utf-8").splitlines()
            except OSError:
                lines[a.span.file] = []
        text = lines[a.span.file]
        if 0 < a.span.line <= len(text) and _RESULT_USED.search(text[a.span.line - 1]):
            found.add(a.array)
    return found


def _constant_tables(tu: TranslationUnit, k: Kernel) -> list[dict[str, Any]]:
    """`__constant__ float w[17];` without an initializer, read by the kernel: the host fills
    it (`cudaMemcpyToSymbol`), so it is an input of the task. Left as the zeros static storage
    starts with, a convolution's weights would make every output 0, and the check would
    compare zeros with zeros."""
    read = {a.array for a in k.accesses if a.kind == "read" and a.space == "constant"}
    tables = []
    for c in tu.constants:
        if c.space != "constant" or c.has_initializer or c.name not in read:
            continue
        dtype = DTYPES.get(c.elem_type)
        if dtype is None or not c.dims or any(d is None for d in c.dims):
            raise InferenceError(
                f"__constant__ {c.elem_type} {c.name}{''.join(f'[{t}]' for t in c.dims_text)}:"
                " the host fills it, and its type or size is not known here; name it as an"
                " input tensor in a spec (param = the symbol)"
            )
        tables.append({"name": py_name(c.name), "param": c.name, "role": "in", "dtype": dtype,
                       "shape": [str(d) for d in c.dims]})  # fmt: skip
    return tables


def _leaves_before_a_shuffle(k: Kernel) -> bool:
    """Whether threads may return early in a kernel that uses warp intrinsics (the only
    kernels whose size sets `_defined_sets` runs: elsewhere it would cost a run per set)."""
    text = _kernel_text(k)
    return bool(re.search(r"\breturn\b", text)) and bool(
        re.search(r"__shfl\w*_sync|\bshfl(_down|_up|_xor)?\s*\(|cg::reduce", text)
    )


def _written_before_read(spec: TaskSpec, k: Kernel) -> TaskSpec:
    """An `inout` tensor whose old values nothing the kernel computes depends on is an output:
    the kernel writes each element before it reads it back (llm.c's `residual`, re-read for
    the row's mean). As an output it starts NaN, so the elements a launch leaves unwritten
    are known as such (as an inout they would keep values no program says). Decided by runs
    with other old values (at the smallest size set): shifted, and NaN (an old value read
    only to be multiplied by zero would make NaN of an output); every output agrees with the
    first run, and the tensor's elements are either what it computed or its old values."""
    import numpy as np

    from migrator.contract import make_inputs
    from migrator.cuda.interp.findings import InterpError
    from migrator.cuda.interp.spec_run import run_spec_full

    def read_after_write(t: Any) -> bool:  # (cheap filter: a read below the first write)
        acc = [a for a in k.accesses if a.array == t.cuda_param and a.space == "global"]
        first = min((a.span.line for a in acc if a.kind == "write"), default=None)
        return first is not None and any(a.kind == "read" and a.span.line > first for a in acc)

    cands = [t for t in spec.tensors if t.role == "inout" and is_float(t.dtype)
             and read_after_write(t)]  # fmt: skip
    if not cands:
        return spec
    sizes = min(
        spec.all_size_sets(),
        key=lambda s: sum(math.prod(spec.shape_of(t, s)) for t in spec.tensors),
    )
    base = make_inputs(spec, sizes, 0)
    demoted = set()
    try:
        first = run_spec_full(spec, sizes, 0, inputs=base).outputs
        for t in cands:
            old1 = np.asarray(base[t.name], dtype=np.float64)
            ok = True
            for shifted in (old1 + 7.25, np.full_like(old1, np.nan)):
                other = {**base, t.name: shifted.astype(base[t.name].dtype)}
                again = run_spec_full(spec, sizes, 0, inputs=other).outputs
                for o, w1, w2 in zip(spec.outputs_in_order, first, again, strict=True):
                    a, b = np.asarray(w1, dtype=np.float64), np.asarray(w2, dtype=np.float64)
                    same = (a == b) | (np.isnan(a) & np.isnan(b))
                    if o.name == t.name:  # elements left as they were are not read either
                        old2 = np.asarray(other[t.name], dtype=np.float64).reshape(a.shape)
                        same |= (a == old1.reshape(a.shape)) & ((b == old2) | np.isnan(old2))
                    ok = ok and bool(same.all())
            if ok:
                demoted.add(t.name)
    except (InterpError, ValueError, ArithmeticError, TypeError):
        return spec  # (the check says why)
    if not demoted:
        return spec
    tensors = [t.model_copy(update={"role": "out"}) if t.name in demoted else t
               for t in spec.tensors]  # fmt: skip
    tensors.sort(key=lambda t: ROLE_ORDER[t.role])
    return spec.model_copy(update={"tensors": tensors})


UNDEFINED = ("warp_mask",)  # findings that make a run's results undefined behaviour


def _defined_sets(spec: TaskSpec, fixed: set[str]) -> TaskSpec:
    """The extra size sets moved to sizes where the original is defined: a warp intrinsic
    whose mask names lanes that left (`if (threadIdx.x >= C) return;` before a full-mask
    shuffle, C narrower than the block) computes garbage there, so neither the lifter nor the
    check may compare against it. Such a set's sizes are doubled (up to three times) until
    the run is clean; a set that never is, is dropped. The default set is left as published
    (the check then reports what the original does there)."""
    from migrator.cuda.interp.findings import InterpError
    from migrator.cuda.interp.spec_run import run_spec_full

    def clean(sset: dict[str, int]) -> bool | None:
        try:
            run = run_spec_full(spec, sset)
        except (InterpError, ValueError, ArithmeticError, TypeError):
            return None  # (the check says why)
        return not any(f.kind in UNDEFINED for f in run.result.findings)

    if all(clean({**spec.sizes, **s}) is not False for s in spec.size_sets):
        return spec
    sets: list[dict[str, int]] = []
    for extra in spec.size_sets:
        sset = {**spec.sizes, **extra}
        for _ in range(4):
            if clean(sset) is not False:
                if sset not in sets and sset != spec.sizes:
                    sets.append(sset)
                break
            sset = spec.satisfy({n: v if n in fixed else 2 * v for n, v in sset.items()}) or {}
            if not sset or any(spec.broken_relations(sset)):
                break
    return spec.model_copy(update={"size_sets": sets})


TABLE_ROWS = (256, 37, 130)  # a gather table's rows: the default, then one per size set


def _measured(
    parsed: Any,
    data: dict[str, Any],
    params: list[str],
    launch_only: set[str],
    whole: dict[str, int] | None = None,
    unguarded: bool = False,
    steps: dict[str, int] | None = None,
    nests: list[Nest] | None = None,
    compared: frozenset[str] | None = None,
) -> tuple[dict[str, str], list[str]]:
    """`measure_extents`; where an extent follows the values of the integer inputs (a gather:
    `table[idx[i] * C + c]`), the table's rows become a size of the task (V) that the
    integer inputs index (drawn in [0, V)), and the extents are measured again."""
    from migrator.contract import np_dtype

    try:
        return measure_extents(parsed, data, params, launch_only, whole=whole,
                               tiles_first=unguarded, steps=steps, nests=nests,
                               compared=compared)  # fmt: skip
    except GatherError:
        ints = [t for t in data["tensors"] if t["role"] == "in"
                and np_dtype(t["dtype"]).kind in "iu"]  # fmt: skip
        if not ints or data.get("inputs"):
            raise
    # the rows: a size of their own (an embedding's vocabulary), else one the task has
    # (`probs[(b * T + t) * V + targets[b * T + t]]`: targets index V)
    v = next(n for n in ("V", "V_rows", "V_table") if n not in data["sizes"])
    first: InferenceError | None = None
    # (rows padded past their width, `P >= V`, only where no plain table fits: labels into
    # V-wide rows also reach `(N - 1) * V + V_rows`)
    candidates = [v, *(n for n in data["sizes"] if n not in launch_only)]
    for rows, pad in [(r, False) for r in candidates] + [(r, True) for r in candidates]:
        if rows == v:
            data["sizes"][v] = TABLE_ROWS[0]
            for j, sset in enumerate(data["size_sets"]):
                sset[v] = TABLE_ROWS[1 + j % 2]
        data["inputs"] = {t["name"]: {"dist": "int", "low": 0, "high": rows} for t in ints}
        try:  # (a table's rows tied to another size would hide which size they are)
            return measure_extents(parsed, data, params, launch_only, tie=False, pad=pad,
                                   nests=nests)  # fmt: skip
        except InferenceError as e:
            first = first or e
        if rows == v:
            del data["sizes"][v]
            for sset in data["size_sets"]:
                del sset[v]
    del data["inputs"]
    raise first  # type: ignore[misc]


CHECK_ELEMENTS = 1 << 16  # the run that checks shapes read from indices: tensors this large
# a thread of the shape check's run looping past this many steps (`steps.nest_steps`): the run
# is made in a second process while the measurement's probes run here (`_check_ahead`)
CHECK_AHEAD_STEPS = 1 << 10


def _check_sizes(data: dict[str, Any], keep: set[str], literal: set[str]) -> None:
    """The task's default sizes made small enough for the shape check's run (in place)."""
    _cap_elements(data["tensors"], data["sizes"], keep)
    _cap_elements(data["tensors"], data["sizes"], keep | literal, DEFAULT_ELEMENTS)
    _cap_threads(data, data["sizes"], keep | literal, DEFAULT_THREADS)


def _check_ahead(
    parsed: Any, data: dict[str, Any], unshaped: list[str], launch_only: set[str],
    in_block: set[str], literal: set[str], relations: list[str], nests: list[Nest],
) -> Ahead | None:  # fmt: skip
    """The shape check's run started in a forked child before the measurement, with the
    tensors to measure as large buffers (the check compares the others' shapes only), where
    each of its threads loops past CHECK_AHEAD_STEPS steps: every block of llm.c's naive
    attention backward loops over B * NH * T * T, and its check ran a second after the
    probes, alone, while the measurement's last probe had left the other core idle. Its
    sizes are those the check will take unless the measurement changes them (a relation, a
    measured shape that caps them): then the check runs again, and the child's run is
    unused. None where nothing is started."""
    if parsed is None or not data["sizes"] or len(unshaped) == len(data["tensors"]):
        return None
    trial = copy.deepcopy(data)
    _check_sizes(trial, launch_only | in_block, literal)
    at = _checked_at(trial, launch_only | in_block, relations, nests)
    if nest_steps(nests, at["sizes"]) < CHECK_AHEAD_STEPS:
        return None
    big = set(unshaped)

    def run(_: int) -> None:
        _probe_run(parsed, at, big, at["sizes"], 8)

    return ahead(run, [0], [_PROBES])


def _checked_at(
    data: dict[str, Any], keep: set[str], relations: list[str], nests: list[Nest]
) -> dict[str, Any]:
    """`data` at sizes for the run that checks the shapes: the defaults made smaller (an
    attention at its defaults costs that run seconds), in whole tiles where the kernel
    assumes them (`T % 32 == 0`), never below 8 (tiny sizes would accuse tiled kernels), with
    no more loop steps a thread than NEST_STEPS (`nests`)."""
    sizes = dict(data["sizes"])
    _cap_elements(data["tensors"], sizes, keep, CHECK_ELEMENTS)
    tiles = tile_relations(relations)
    _halve_nests(sizes, nests, keep | set(tiles))
    _round_to_tiles(sizes, tiles)
    return {**data, "sizes": sizes}


def _nests(k: Kernel, data: dict[str, Any]) -> list[Nest]:
    """The kernel's loop nests in the task's sizes (`steps.step_nests`)."""
    return step_nests(k, _size_params(data))


def _halve_nests(sset: dict[str, int], nests: list[Nest], keep: set[str]) -> None:
    """Halve the largest size of the nests (not in `keep`) until a thread takes at most
    NEST_STEPS loop steps at `sset` (`_halve_until`: never below 8, ragged stays ragged)."""
    if nest_steps(nests, sset) <= NEST_STEPS:
        return
    looped = {n for nest in nests for n in nest}
    _halve_until(sset, keep | (set(sset) - looped),
                 lambda: nest_steps(nests, sset) <= NEST_STEPS)  # fmt: skip


def _cap_nests(data: dict[str, Any], nests: list[Nest], keep: set[str]) -> None:
    """`_halve_nests` at every size set."""
    for sset in (data["sizes"], *data["size_sets"]):
        _halve_nests(sset, nests, keep)


def _aligned_rows(
    parsed: Any, data: dict[str, Any], keep: set[str], relations: list[str], nests: list[Nest],
    big: frozenset[str] = frozenset(),
) -> list[str]:  # fmt: skip
    """`V % 4 == 0` where the run at the shape check's sizes makes a misaligned vector access
    to a tensor: the kernel reads its rows in 16-byte vectors through a pointer the index
    algebra does not follow (llm.c's `load128cs(logits + idx * P)` in a helper), so its
    innermost size holds whole vectors. (The shape check's run, memoised.)"""

    from migrator.contract import SpecError
    from migrator.cuda.interp.findings import InterpError

    at = _checked_at(data, keep, relations, nests)
    try:
        reached = _probe_run(parsed, at, set(big), at["sizes"], 8)
    except (InterpError, SpecError, ValueError, ArithmeticError, TypeError):
        return []
    out: list[str] = []
    for t in data["tensors"]:
        if f"misaligned:{t['param']}" in reached and t["shape"]:
            rel = vector_relation(str(t["shape"][-1]), t["dtype"], at["sizes"])
            if rel is not None and rel not in out:
                out.append(rel)
    return out


def whole_vectors(spec: TaskSpec, error: str, sizes: dict[str, int]) -> tuple[str, str] | None:
    """(tensor, `V % 4 == 0`) where the original's `error` at `sizes` is a misaligned vector
    access of a tensor whose rows' width is one size (`vector_relation`); else None."""
    m = MISALIGNED.search(error)
    t = next((t for t in spec.tensors if m and t.cuda_param == m.group(1)), None)
    if t is None or not t.shape:
        return None
    rel = vector_relation(str(t.shape[-1]), t.dtype, sizes)
    return None if rel is None else (t.name, rel)


def _round_to_tiles(sset: dict[str, int], tiles: dict[str, int]) -> None:
    """Each tiled size of `sset` to the nearest whole number of its tiles, at least one."""
    for n, t in tiles.items():
        if n in sset:
            sset[n] = max(t, round(sset[n] / t) * t)


def _block_constants(
    names: set[str],
    literal: dict[str, int],
    tensors: list[dict[str, Any]],
    scalars: list[dict[str, Any]],
) -> list[str]:
    """Host literals among the block's `names` that shape outputs only: in no input's shape
    and in no scalar the kernel is passed (`layernorm<<<B * T, C>>>(out, inp, C)` keeps C, a
    size of the problem)."""

    def words(roles: tuple[str, ...]) -> set[str]:
        return {w for t in tensors if t["role"] in roles for d in t["shape"]
                for w in _WORDS.findall(str(d))}  # fmt: skip

    inputs, outputs = words(("in", "inout")), words(("out",))
    passed = {w for sc in scalars for w in _WORDS.findall(str(sc.get("size", "")))}
    return sorted(n for n in names
                  if n in literal and n in outputs and n not in inputs | passed)  # fmt: skip


def _substituted(
    name: str, value: int, grid: list[Any], block: list[Any], smem: Any,
    tensors: list[dict[str, Any]],
) -> tuple[list[Any], list[Any], Any, list[dict[str, Any]]]:  # fmt: skip
    """The launch and the tensors' shapes with size `name` written as its `value`."""
    word = re.compile(rf"\b{re.escape(name)}\b")

    def sub(x: Any) -> Any:
        if not isinstance(x, str):
            return x
        out = word.sub(str(value), x)
        return int(out) if out.strip().isdigit() else out

    return ([sub(g) for g in grid], [sub(b) for b in block], sub(smem),
            [{**t, "shape": [str(sub(d)) for d in t["shape"]]} for t in tensors])  # fmt: skip


def _tile_constants(scalars: list[dict[str, Any]], literal: dict[str, int]) -> set[str]:
    """Host constants that divide a size into the tile count a kernel is passed (`Bc` of
    `Tc = ceil_div(N, Bc)`)."""
    import ast

    cuts = [d for sc in scalars for d in divisions(str(sc.get("size", "")))]
    return {divisor.id for _, divisor, rounds_up in cuts
            if rounds_up and isinstance(divisor, ast.Name) and divisor.id in literal}  # fmt: skip


def _block_work(site: LaunchSite, host: _Host, literal: dict[str, int]) -> set[str]:
    """Host constants that the grid only divides by (`N / NUM_PER_BLOCK`), named neither in
    the block nor among the kernel's arguments: the work of one block as the kernel's code
    fixes it. Kept as names they would be sizes of their own, varied from set to set, and
    a kernel that takes 512 elements a block whatever the host's constant says reads no
    product of them. `host` resolves everything but the literals, which stay names."""
    import ast

    if not literal:
        return set()
    try:
        grid = [str(g) for g in host.dim3(site.grid)]
        elsewhere = " ".join([*(str(b) for b in host.dim3(site.block)),
                              *(host.resolve(a) for a in site.args)])  # fmt: skip
    except (InferenceError, ValueError, TypeError):
        return set()
    out: set[str] = set()
    for n in literal:
        word = re.compile(rf"\b{re.escape(n)}\b")
        uses = sum(len(word.findall(g)) for g in grid)
        divides = sum(1 for g in grid for _, d, _ in divisions(g)
                      if isinstance(d, ast.Name) and d.id == n)  # fmt: skip
        if uses and divides == uses and not word.search(elsewhere):
            out.add(n)
    return out


def _memset_inputs(
    k: Kernel, site: LaunchSite, data: dict[str, Any], resolve: Callable[[str], str]
) -> None:
    """Inputs the host sets with `cudaMemset` before the launch (`LaunchSite.fills`), all of
    their bytes at every size set, or makes with a torch factory (`_torch_fill`), hold that
    value in every element: `dist = "fill"`. A
    running max set with `cudaMemset(m, -10000.0f, n)` holds the byte 0xF0 in every byte
    (memset takes an int and stores its low byte), the float -5.96e29; the kernel computes with
    that, so the task does too."""
    host_of = {p: a.strip() for p, a in site_arguments(k, site).items()}
    sets = [data["sizes"], *({**data["sizes"], **s} for s in data["size_sets"])]
    for t in data["tensors"]:
        host = host_of.get(t["param"], "")
        made = _torch_fill(host, site.host_values)
        if made is not None and t["role"] in ("in", "inout", "scratch"):
            # `l = torch::zeros({B, nh, N})`, `m = torch::full(..., -INFINITY)` passed as
            # `l.data_ptr<float>()`: the whole tensor holds the value
            data.setdefault("inputs", {})[t["name"]] = {"dist": "fill", "value": made}
            continue
        written = site.fills.get(host)
        if t["role"] not in ("in", "inout", "scratch") or written is None:
            continue
        item = np_dtype(t["dtype"]).itemsize
        try:  # (a memset of part of the buffer leaves the rest as it was: no fill)
            whole = all(
                int(eval_expr(resolve(site.fill_bytes.get(host, "")), sset))
                == item * math.prod(int(eval_expr(str(d), sset)) for d in t["shape"])
                for sset in sets
            )
        except (SpecError, InferenceError, ArithmeticError, ValueError, KeyError, TypeError):
            whole = False
        if not whole:
            continue
        value = fill_value(written, t["dtype"])
        if value is not None:
            data.setdefault("inputs", {})[t["name"]] = {"dist": "fill", "value": value}


_DATA_PTR = re.compile(r"\(?\s*(\w+)\s*\.\s*data_ptr\s*(?:<[^<>]*>)?\s*\(\s*\)\s*\)?")
_MOVED = re.compile(r"\)?\.to\((?:[^()]|\([^()]*\))*\)")  # `).to(x.device())`
_TORCH_FACTORY = re.compile(r"^\(?\s*(?:torch|at)::(zeros|ones|full)(?:_like)?\s*\(")


def _torch_fill(arg: str, host_values: dict[str, str]) -> float | None:
    """The value every element of a tensor the host made with `torch::zeros` / `ones` /
    `full(shape, v)` (or their `_like` forms, then `.to(device)`) holds, where the launch
    passes it whole (`x.data_ptr<float>()`); None otherwise."""
    m = _DATA_PTR.fullmatch(arg)
    text = host_values.get(m.group(1), "") if m else ""
    made = _TORCH_FACTORY.match(text)
    if made is None:
        return None
    args: list[str] = [""]  # the call's arguments, split at its top-level commas
    depth = 0
    for i, ch in enumerate(text[made.end() :]):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            if depth == 0:
                rest = text[made.end() + i + 1 :].replace(" ", "")
                if rest not in ("", ")") and not _MOVED.fullmatch(rest):
                    return None  # (anything done to it after: not known to keep the value)
                break
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("")
            continue
        args[-1] += ch
    else:
        return None
    kind = made.group(1)
    if kind != "full":
        return 0.0 if kind == "zeros" else 1.0
    return _number_text(args[1]) if len(args) > 1 else None


def _number_text(text: str) -> float | None:
    """A literal value as the host wrote it (`0.5f`, `-INFINITY`, the expanded macro
    `-__int_as_float(0x7f800000)`), or None."""
    t = text.strip().replace(" ", "")
    sign = -1.0 if t.startswith("-") else 1.0
    t = t.lstrip("+-")
    if m := re.fullmatch(r"__int_as_float\((0[xX][0-9a-fA-F]+)\)", t):
        value = float(np.array([int(m.group(1), 16)], dtype=np.uint32).view(np.float32)[0])
    elif t in ("INFINITY", "HUGE_VALF"):
        value = math.inf
    else:
        value = _literal(t, math.nan)  # (`0.5f`; NaN where it is no number)
    return sign * value if not math.isnan(value) else None


def fill_value(text: str, dtype: str) -> float | None:
    """What every element of a `dtype` buffer holds after `cudaMemset(p, text, n)`, or None
    where `text` is no literal (or the result is no finite number)."""
    m = re.fullmatch(r"\(?\s*([-+]?(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?))"
                     r"[fFuUlL]*\s*\)?", text.strip())  # fmt: skip
    if m is None:
        return None
    lit = m.group(1)
    number = int(lit, 16) if lit.lower().lstrip("+-").startswith("0x") else float(lit)
    byte = int(number) & 0xFF  # (C converts the value to int; memset stores its low byte)
    dt = np_dtype(dtype)
    value = float(np.frombuffer(bytes([byte]) * dt.itemsize, dtype=dt)[0])
    return value if np.isfinite(value) else None


def _label_ranges(k: Kernel, data: dict[str, Any]) -> None:
    """Integer inputs added as a column to a row's start (`logits[idx * P + ix]` with
    `ix = targets[idx]`: a label picks one element of its row) are drawn in [0, columns):
    drawn past the row, a label would read the next row, which no real label does."""
    from migrator.contract import np_dtype

    by_param = {t["param"]: t for t in data["tensors"]}
    ints = {t["param"] for t in data["tensors"] if t["role"] == "in"
            and np_dtype(t["dtype"]).kind in "iu"}  # fmt: skip
    strides = {s["name"]: s["size"] for s in data["scalars"] if s.get("size")}
    inputs = data.setdefault("inputs", {})
    for a in k.accesses:
        table = by_param.get(a.array)
        if table is None or len(table["shape"]) not in (1, 2) or len(a.indices) != 1:
            continue
        idx = a.indices[0]
        found = re.search(r"\b(\w+) is \1 = (\w+)\[", idx.reason or "")
        if idx.affine or found is None or found.group(2) not in ints:
            continue
        var, label = found.groups()
        terms = [t.strip() for t in idx.text.split("+")]
        name = by_param[label]["name"]
        if var not in terms or name in inputs:
            continue
        rest = [set(re.findall(r"\w+", t)) for t in terms if t != var]
        if len(table["shape"]) == 2 and (rest or a.via):
            # (through a row pointer, `x = logits + row * V; x[label]`: the alias's row start)
            inputs[name] = {"dist": "int", "low": 0, "high": str(table["shape"][1])}
        elif len(table["shape"]) == 1 and rest:
            # a flat table: the row stride every other term is a multiple of (`idx * P`)
            common = set.intersection(*rest) & set(strides)
            if len(common) == 1:
                high = str(strides[common.pop()])
                # rows padded past their width (`P >= V`): a label is a column of the width
                padded = paired_sizes(data.get("relations", []), ">=")
                inputs[name] = {"dist": "int", "low": 0, "high": padded.get(high, high)}
    if not inputs:
        del data["inputs"]


def _rows_of(k: Kernel, extents: dict[str, str], args: dict[str, str],
             host: _Host) -> dict[str, list[str] | str]:  # fmt: skip
    """Measured extents `K * M` as rows and columns where the kernel strides the tensor by
    one of the two sizes (`A[row * K + k]`: [M, K]); the same elements either way, but the
    generator sees a matrix."""
    size_of = {p: host.resolve(a) for p, a in args.items()}  # kernel parameter -> host size
    out: dict[str, list[str] | str] = dict(extents)
    for param, ext in extents.items():
        m = re.fullmatch(r"([A-Za-z_]\w*) \* ([A-Za-z_]\w*)", ext)  # two sizes
        if not m:
            continue
        pair = {m.group(1), m.group(2)}
        strides: set[str] = set()
        for a in k.accesses:
            if a.array != param or a.space != "global" or not a.indices[0].affine:
                continue
            for mono in a.indices[0].as_poly():
                strides |= {size_of[s] for s in mono if len(mono) > 1 and size_of.get(s) in pair}
        if len(strides) == 1:
            (inner,) = strides
            out[param] = [next(iter(pair - {inner})), inner]
    return out


def _required(requires: list[str], resolve: Any, sizes: dict[str, int]) -> list[str]:
    """The host's refusals (`if (size_x % TILE_DIM != 0) exit(1);`, `if (m != n) return;`) as
    relations of the task's sizes (`size_x % 32 == 0`, `m == n`): size sets the host would not
    launch are not measured or checked."""
    out: list[str] = []
    for req in requires:
        left, _, right = req.partition(" == ")
        try:
            a, b = _clean(resolve(left)), _clean(resolve(right))
        except (InferenceError, SpecError, ValueError, KeyError):
            continue
        if m := re.fullmatch(r"([A-Za-z_]\w*) % (\d+)", a):
            if b == "0" and m.group(1) in sizes and int(m.group(2)) > 1:
                out.append(f"{m.group(1)} % {m.group(2)} == 0")
        elif a in sizes and b.isdigit() and int(b) > 0:
            out.append(f"{a} == {b}")
        elif a in sizes and b in sizes and a != b:
            out.append(f"{b} == {a}")  # (the first named leads: `size_y == size_x`)
    return out


_DIVIDED = re.compile(r"\b([A-Za-z_]\w*)\s*/\s*(\d+)\b")  # `row / 4`


def _vector_relations(
    k: Kernel,
    tensors: list[dict[str, Any]],
    sizes: dict[str, int],
    block: list[Any],
    scalars: list[dict[str, Any]] | None = None,
) -> list[str]:
    """`C % 4 == 0` where the kernel moves a tensor in vectors of 4 (`float4`, eight halves in
    a `float4`): the innermost dimension holds whole vectors, as the kernel assumes (without a
    scalar tail a ragged size would read past the end). A vector access under no guard at all
    assumes whole blocks of them: `N % (8 * 256) == 0`. A vector index that divides a size by
    the vector's width (`y4[x * row / 4 + y]`: a transpose's rows of whole vectors) assumes
    the size a multiple of it (`row % 4 == 0`)."""
    try:
        threads = int(eval_expr(block[0], sizes)) if block else 1
    except (SpecError, TypeError, ValueError):
        threads = 1
    out: list[str] = []
    carried = {str(s["name"]): str(s["size"]) for s in scalars or [] if s.get("size")}
    for t in tensors:
        vec = [a for a in k.accesses if a.array == t["param"] and a.space == "global"]
        widths = [max(a.vector_width, _thread_stride(a)) * (1 if a.guards else max(1, threads))
                  for a in vec if a.vector_width > 1]  # fmt: skip
        # a thread's element read or written with no guard and no loop: the launch covers the
        # tensor exactly, in whole blocks
        widths += [_thread_stride(a) * threads for a in vec if not a.guards and not a.loops
                   and a.vector_width == 1 and threads > 1 and _per_thread(a)]  # fmt: skip
        if not widths or not t.get("shape"):
            continue
        divided = [carried[m.group(1)] for a in vec if a.vector_width > 1 for ix in a.indices
                   for m in _DIVIDED.finditer(ix.text)
                   if int(m.group(2)) == a.vector_width
                   and carried.get(m.group(1)) in sizes]  # fmt: skip
        for name in divided:
            rel = f"{name} % {max(widths)} == 0"
            if rel not in out:
                out.append(rel)
        if divided:
            continue
        last = str(t["shape"][-1])
        name = last.rsplit("*", 1)[-1].strip()  # `S * H`: whole vectors per H
        if name in sizes:
            rel = f"{name} % {max(widths)} == 0"
            if rel not in out:
                out.append(rel)
    return out


_QUOTIENT = re.compile(r"\b([A-Za-z_]\w*)\s*/\s*([A-Za-z_]\w*)\b")  # `C / NH`


def _quotient_relations(data: dict[str, Any]) -> list[str]:
    """`C % NH == 0` where a shape or an argument divides one size by another (`C / NH`, a
    head dimension): the host code splits C into NH equal parts; a C that is not a multiple
    would leave a remainder that no launch covers, and C < NH an empty tensor."""
    sizes = set(data["sizes"])
    exprs = [str(d) for t in data["tensors"] for d in t["shape"]]
    exprs += [str(s.get("size") or "") for s in data["scalars"]]
    out: list[str] = []
    for e in exprs:
        for a, b in _QUOTIENT.findall(e):
            rel = f"{a} % {b} == 0"
            if a in sizes and b in sizes and a != b and rel not in out:
                out.append(rel)
    return out


QUOTIENT_VALUES = (8, 5, 6)  # a named quotient (a head dimension): the default, then per set


def _kernel_text(k: Kernel) -> str:
    """The kernel's own lines, as written ("" where the file cannot be read); its expansion
    where a macro wrote it."""
    if k.expanded is not None:
        return k.expanded
    try:
        lines = Path(k.span.file).read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[k.span.line - 1 : k.span.end_line or len(lines)])


def _uncommented(text: str) -> str:
    """`text` with its comments blanked, line breaks kept (a line count still finds the
    source line)."""
    return _COMMENT.sub(lambda m: "\n" * m.group().count("\n") or " ", text)


def _kernel_quotients(k: Kernel, scalars: list[dict[str, Any]]) -> list[str]:
    """`C % NH == 0` where the kernel's own code divides one size argument by another
    (llm.c's `int hs = C / NH; // head size`)."""
    text = _kernel_text(k)
    size_of = {s["name"]: str(s["size"]) for s in scalars
               if re.fullmatch(r"[A-Za-z_]\w*", str(s.get("size") or ""))}  # fmt: skip
    out: list[str] = []
    for a, b in _QUOTIENT.findall(text):
        if a in size_of and b in size_of and size_of[a] != size_of[b]:
            rel = f"{size_of[a]} % {size_of[b]} == 0"
            if rel not in out:
                out.append(rel)
    return out


_CONST_INT = re.compile(r"\bconst(?:expr)?\s+(?:unsigned\s+)?int\s+(\w+)\s*=\s*(\d+)\s*;")
_BY_CONSTANT = re.compile(r"\b([A-Za-z_]\w*)\s*/\s*(\d+(?![.\w])|[A-Za-z_]\w*\b)")  # not `x / 2.0f`
_BY_CONSTANT_TWICE = re.compile(
    r"\(\s*([A-Za-z_]\w*)\s*/\s*(\d+|[A-Za-z_]\w*)\s*\)\s*/\s*(\d+(?![.\w])|[A-Za-z_]\w*\b)"
)


def _trip_divisors(k: Kernel, size_of: Mapping[str, str]) -> list[tuple[str, int]]:
    """(size, c) where the kernel divides a size argument by a constant c, directly or twice
    (`N / warp_size`, `(N / warp_size) / 4`: c = 128), `size_of` naming each parameter's size."""
    text = _kernel_text(k)
    consts = {m.group(1): int(m.group(2)) for m in _CONST_INT.finditer(text)}

    def value(b: str) -> int | None:
        return int(b) if b.isdigit() else consts.get(b)

    found = [(a, value(b)) for a, b in _BY_CONSTANT.findall(text)]
    for a, b, c in _BY_CONSTANT_TWICE.findall(text):
        vb, vc = value(b), value(c)
        found.append((a, vb * vc if vb is not None and vc is not None else None))
    out: list[tuple[str, int]] = []
    for a, c in found:
        if a in size_of and c is not None and c > 1 and (size_of[a], c) not in out:
            out.append((size_of[a], c))
    return out


def trip_count_relations(k: Kernel, spec: TaskSpec) -> list[str]:
    """`N % 32 == 0` where the kernel divides a size argument by a constant (`int kIteration =
    N / warp_size;` with `const int warp_size = 32;`): a loop over `N / 32` whole pieces reads
    the first `32 * (N / 32)` elements only, so the kernel computes what its name says only at
    multiples (tutorials write it for them: "if N == 32"). Relations the spec lacks, for a
    retry of a lift that failed at ragged sizes, never imposed up front."""
    size_of = {sc.cuda_param: str(sc.size) for sc in spec.scalars
               if sc.size is not None and re.fullmatch(r"[A-Za-z_]\w*", str(sc.size))}  # fmt: skip
    out: list[str] = []
    for n, c in _trip_divisors(k, size_of):
        rel = f"{n} % {c} == 0"
        if rel not in out and rel not in spec.relations:
            out.append(rel)
    return out


def _size_params(data: dict[str, Any]) -> dict[str, str]:
    """Each scalar parameter that is a size of the task, by name, with that size's name."""
    return {sc["name"]: str(sc["size"]) for sc in data["scalars"]
            if "size" in sc and _WORDS.fullmatch(str(sc["size"]))}  # fmt: skip


def _grid_words(data: dict[str, Any]) -> set[str]:
    """The names the launch's grid expressions use."""
    return {w for g in data["launch"]["grid"] for w in _WORDS.findall(str(g))}


def _cap_steps(
    data: dict[str, Any], steps: set[str], fixed: set[str], tiles: Mapping[str, int]
) -> None:
    """Every size set's work capped at SEQUENTIAL_WORK by halving `steps` alone (sizes only a
    thread's loop runs over: `_sequential_sizes`); a set the halving made a repeat of an
    earlier one takes a tile more of a grid size instead (more threads at once, where more
    steps would cost what the halving saved)."""
    if not steps:
        return
    grid = _grid_words(data)
    done: list[dict[str, int]] = []
    for sset in (data["sizes"], *data["size_sets"]):
        was = dict(sset)
        _cap_work(data, sset, fixed | (set(sset) - steps), tiles, SEQUENTIAL_WORK)
        wide = sorted((n for n in set(sset) - fixed - steps if n in grid),
                      key=lambda n: (sset[n], n))  # fmt: skip
        for j in range(8):
            if sset not in done or not wide or sset == was:
                break
            n = wide[j % len(wide)]
            sset[n] += tiles.get(n, 1) if tiles.get(n, 1) > 1 else 8 if sset[n] % 8 == 0 else 2
        done.append(sset)


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_NOT_COMPARING = re.compile(r"<<|>>|->|#\s*include\s*<[^>]*>")


def _compared_sizes(k: Kernel, data: dict[str, Any]) -> frozenset[str]:
    """The sizes the kernel compares anywhere: those of a scalar named beside `<` or `>` in
    a statement (`i < V`, `if (row >= M)`, a template's brackets too: erring towards compared);
    the others it only multiplies and adds (strides)."""
    parts = [p for _, p in _comparing_statements(k)]
    out: set[str] = set()
    for sc in data["scalars"]:
        used = re.compile(rf"\b{re.escape(str(sc['name']))}\b")
        if any(used.search(p) for p in parts):
            out.update(n for n in data["sizes"]
                       if re.search(rf"\b{re.escape(n)}\b", str(sc.get("size"))))  # fmt: skip
    return frozenset(out)


def _unguarded_tiles(k: Kernel, data: dict[str, Any], launch_only: set[str]) -> bool:
    """Whether the grid divides a size into tiles larger than any small probe (`dim3 grid(N /
    128, M / 128)`) and no statement of the kernel that compares names such a size (no `if (row
    < M)`, `col < N ? ... : 0`, `imageW - x > r`): a kernel written for whole tiles, which
    reads a whole tile past any smaller size. A comparison that a `__syncthreads` waits under
    (`if (row >= M || col >= N) return;` before the tile loop's barriers) guards nothing at the
    sizes the kernel was written for: every thread of a block must reach the barrier, so no
    thread may leave, and the tiles are whole there too."""
    tiled = _divided([str(g) for g in data["launch"]["grid"]], data, launch_only)
    if not tiled or max(tiled.values()) <= max(PROBE_SIZES_4):
        # a tile count the kernel is passed (`Tc = ceil_div(N, Bc)`: a flash kernel loads
        # whole key tiles of Bc rows): every probe below the tile reads past it
        tiled = {n: t for n, t in count_tiles(data, launch_only).items()
                 if t > min(PROBE_SIZES_4)}  # fmt: skip
    params = {sc["name"] for sc in data["scalars"] if str(sc.get("size")) in tiled}
    if not params:
        return False
    name = re.compile(r"\b(" + "|".join(sorted(map(re.escape, params))) + r")\b")
    by_id = {g.id: g for g in k.guards}
    # (the lines of those conditions: a guard's text is the preprocessed one, TS as 64)
    waited = {by_id[g].span.line for b in k.barriers if b.divergent for g in b.guards
              if g in by_id and by_id[g].thread_dependent}  # fmt: skip
    for first, part in _comparing_statements(k):
        if name.search(part) and not any(first <= w <= first + part.count("\n") for w in waited):
            return False
    return True


def _comparing_statements(k: Kernel) -> list[tuple[int, str]]:
    """The kernel's statements that compare (`<` or `>` in them, not shifts, arrows or include
    brackets), each with its first source line: statement by statement, so a loop header's
    `j < 4` and its body's `c[r * N + j]` stand apart."""
    text = _NOT_COMPARING.sub(" ", _uncommented(_kernel_text(k)))
    return [(k.span.line + text.count("\n", 0, m.start()), m.group())
            for m in re.finditer(r"[^;{}]+", text)
            if "<" in m.group() or ">" in m.group()]  # fmt: skip


_STEPS_OF = re.compile(r"\(\s*(\w+)\s*\+\s*(\w+)\s*-\s*1\s*\)\s*/\s*(\w+)|(\w+)\s*/\s*(\w+)")


def _loop_steps(k: Kernel, data: dict[str, Any]) -> dict[str, int]:
    """The step a counted loop of the kernel takes through a size, in elements: `bk < (K +
    BK - 1) / BK` and `kt < K / BK` step K by BK (a template argument, a `const int`, a
    number). A GEMM's K is read a BK-slice at a time, so multiples of BK are whole slices."""
    size_of = _size_params(data)
    raw = _kernel_text(k)
    values = {m.group(1): int(m.group(2)) for m in _CONST_INT.finditer(raw)}
    args = data["kernel"].get("template_args", [])
    values |= {p.name: a for p, a in zip(k.template_params, args, strict=False)
               if isinstance(a, int) and not isinstance(a, bool)}  # fmt: skip

    def number(w: str) -> int | None:
        return int(w) if w.isdigit() else values.get(w)

    out: dict[str, int] = {}

    def add(size: str, step: int | None) -> None:
        if size in size_of and step is not None and step > 1:
            out[size_of[size]] = math.lcm(out.get(size_of[size], 1), step)

    for loop in k.loops:
        if loop.kind != "counted" or loop.bound is None:
            continue
        m = _STEPS_OF.fullmatch(loop.bound.text.strip())
        if m is None:
            # `for (t = 0; t < K; t += BK)`: K by BK too
            by = loop.step.text.strip() if loop.step else ""
            add(loop.bound.text.strip(), number(by) if by else None)
            continue
        size, c = (m.group(1), m.group(3)) if m.group(1) else (m.group(4), m.group(5))
        if m.group(1) and m.group(2) != m.group(3):
            continue  # (`(K + BK - 1) / BN`: no step of K)
        add(size, number(c))
    # a do-while that moves its own counter by BK up to K (`do { t += BK; ... } while (t <
    # K);`): K by BK as well
    text = _uncommented(raw)
    for m in _RUNS_UP_TO.finditer(text):
        steps = {number(w) for w in re.findall(rf"\b{re.escape(m.group(1))}\s*\+=\s*(\w+)", text)}
        if len(steps) == 1:
            add(m.group(2), steps.pop())
    return out


# `while (t < K)`: a counter run up to a size (a do-while: no counted loop of the IR)
_RUNS_UP_TO = re.compile(r"\bwhile\s*\(\s*(\w+)\s*<\s*(\w+)\s*\)")


def _sequential_sizes(k: Kernel, data: dict[str, Any]) -> set[str]:
    """Sizes a counted loop of the kernel runs over (`for (k = 0; k < K; ++k)`, `bk < (K +
    BK - 1) / BK`) that no grid dimension uses: each thread steps through them one after
    another, where the sizes of the grid are more threads run at once."""
    size_of = _size_params(data)
    out: set[str] = set()
    for loop in k.loops:
        if loop.kind != "counted" or loop.bound is None:
            continue
        words = {s for t in loop.bound.terms for s in t.symbols} or set(
            _WORDS.findall(loop.bound.text))  # fmt: skip
        out |= {size_of[w] for w in words if w in size_of}
    # (a do-while's test, `while (tile_idx < K)`, is no counted loop's bound)
    out |= {size_of[m.group(2)] for m in _RUNS_UP_TO.finditer(_uncommented(_kernel_text(k)))
            if m.group(2) in size_of}  # fmt: skip
    return {n for n in out - _grid_words(data) if n in data["sizes"]}


def _trip_tiles(k: Kernel, data: dict[str, Any]) -> dict[str, int]:
    """The same divisions as tiles to measure at (`kIteration = (N / 32) / 4`, at least one:
    a probe below 128 reads one piece of 128 whatever N is, so its reach fits no formula), the
    largest constant per size; for the measurement's last resort, not imposed up front."""
    size_of = _size_params(data)
    out: dict[str, int] = {}
    for n, c in _trip_divisors(k, size_of):
        if n in data["sizes"]:
            out[n] = max(out.get(n, 1), c)
    return out


def with_relations(spec: TaskSpec, relations: list[str]) -> TaskSpec:
    """`spec` with `relations` added and its sizes and size sets rounded to them."""
    data = spec.model_dump(mode="json")
    _whole_tiles(data, [*spec.relations, *relations])
    return TaskSpec.model_validate(data)


def _name_quotients(data: dict[str, Any]) -> bool:
    """A size of its own for `C / NH` where the kernel takes it as an argument (`d`, a head
    dimension), C then written `NH * d`: the kernel's index arithmetic is in d, and a program
    fitted over B, T, NH and d reads its strides (`3 * NH * d`) as products of sizes."""
    names = set(data["sizes"])
    named = False
    for a, b in divisor_pairs(data.get("relations", [])):
        if a not in names or b not in names:
            continue
        quotient = re.compile(rf"\b{a}\s*/\s*{b}\b")
        arg = next((s for s in data["scalars"] if quotient.fullmatch(str(s.get("size") or "")
                    .strip().strip("()").strip())), None)  # fmt: skip
        new = arg["name"] if arg is not None else None
        if new is None or not re.fullmatch(r"[A-Za-z_]\w*", new) or new in names:
            continue

        def rewrite(e: Any, a: str = a, b: str = b, new: str = new, q: Any = quotient) -> Any:
            if not isinstance(e, str):
                return e
            e = q.sub(new, e)
            return re.sub(rf"\b{a}\b", f"({b} * {new})", e)

        for t in data["tensors"]:
            t["shape"] = [rewrite(d) for d in t["shape"]]
        for sc in data["scalars"]:
            if sc.get("size"):
                sc["size"] = rewrite(sc["size"])
        launch = data["launch"]
        launch["grid"] = [rewrite(g) for g in launch["grid"]]
        launch["block"] = [rewrite(g) for g in launch["block"]]
        launch["shared_bytes"] = rewrite(launch["shared_bytes"])
        for j, sset in enumerate((data["sizes"], *data["size_sets"])):
            # a part of its own value in each set (C = 15 with NH = 5 left every d at 3)
            sset.pop(a, None)
            sset[new] = QUOTIENT_VALUES[min(j, len(QUOTIENT_VALUES) - 1)]
        data["relations"] = [rewrite(r) for r in data["relations"]
                             if divisor_pairs([r]) != [(a, b)]]  # fmt: skip
        names = set(data["sizes"])
        named = True
    return named


def _split_evenly(sset: dict[str, int], a: str, b: str) -> None:
    """`a` made a multiple of `b` with at least 3 parts, near its value (`C = 48, NH = 88`
    becomes `C = 48, NH = 16`): b shrinks where a holds fewer than 3 of it."""
    if sset[b] * 3 > sset[a]:
        sset[b] = max(2, sset[a] // 3)
    sset[a] = max(3, sset[a] // sset[b]) * sset[b]


def _per_thread(a: Any) -> bool:
    """Whether an access's index moves with the thread and block (`blockIdx.x * T + tid`)."""
    idx = a.indices[0] if a.indices else None
    if idx is None or not idx.affine:
        return False
    syms = {s for mono in idx.as_poly() for s in mono}
    return "threadIdx.x" in syms and any(s.startswith("blockIdx.x") for s in syms)


def _thread_stride(a: Any) -> int:
    """Elements between neighbouring threads' accesses (`idx = 8 * tid`, then half2 pieces of
    those 8): the vector a thread moves is that wide."""
    idx = a.indices[0] if a.indices else None
    if idx is None or not idx.affine:
        return 1
    c = poly.coefficient_of(idx.as_poly(), "threadIdx.x")
    v = c.get((), 0) if c and set(c) == {()} else 0
    return int(v) if isinstance(v, int) and 1 < v <= 64 else 1


def _small_batches(data: dict[str, Any]) -> None:
    """A launch of whole problems, a block each (`grid(B, nh)`: an attention per batch entry
    and head; `grid(T / 4, B * NH)`), whose numbering sizes only multiply the shapes, and where
    each problem is two-dimensional (`T * d` per head; a row per block is not: the NKI kernel
    puts the rows on partitions, and needs many): a few problems show all the kernel does, so
    both executors run a few (1024 attentions at the defaults cost the original's run 6 s).
    Distinct in each set (B = nh would hide a swapped pair)."""
    words = re.compile(r"[A-Za-z_]\w*")
    product = re.compile(r"\w+(\s*\*\s*\w+)*")
    batch = grid_batches(data, list(data["sizes"]))
    batch -= {w for s in data["scalars"] for w in words.findall(str(s.get("value", "")))}
    widest = 0
    for t in data["tensors"]:
        for d in t["shape"]:
            # (shapes are still flat here: `B * N * d * nh`) a batch size that sizes anything
            # but a whole number of problems (`B * T + 1`) is no batch
            if not product.fullmatch(str(d).strip()):
                batch -= set(words.findall(str(d)))
    for t in data["tensors"]:
        names = [w for d in t["shape"] for w in words.findall(str(d)) if w in data["sizes"]]
        if batch & set(names):
            widest = max(widest, len([n for n in names if n not in batch]))
    if not batch or widest < 2:
        return
    values = ((4, 5, 3), (2, 3, 4), (3, 2, 5))  # (a grid has at most three axes)
    for j, sset in enumerate((data["sizes"], *data["size_sets"])):
        for i, n in enumerate(sorted(batch)):
            sset[n] = values[j][i] if j < 3 and i < 3 else 2 + i + j
    _drop_repeated_sets(data)


def _drop_repeated_sets(data: dict[str, Any]) -> None:
    """The extra size sets without any that repeats the defaults or an earlier set (a cap or
    a rounding can make two sets one)."""
    data["size_sets"] = [s for i, s in enumerate(data["size_sets"])
                         if s != data["sizes"] and s not in data["size_sets"][:i]]  # fmt: skip


def _whole_tiles(data: dict[str, Any], relations: list[str]) -> None:
    """Sizes and size sets rounded to the tiles of `relations` (`N % 128 == 0`), each at
    least one tile; sets that then repeat another are dropped."""
    tiles = tile_relations(relations)  # `N % 128 == 0` and `N % 4 == 0`: multiples of both
    ties, wider = paired_sizes(relations, "=="), paired_sizes(relations, ">=")
    parts = divisor_pairs(relations)
    # a block size that divides a size (`n % blockSize == 0`, `gridSize = n / blockSize`) is
    # the launch as written: the size grows to whole blocks, the block does not shrink
    in_block = {w for b in data["launch"]["block"] for w in re.findall(r"[A-Za-z_]\w*", str(b))}
    seen: list[dict[str, int]] = []
    for j, sset in enumerate((data["sizes"], *data["size_sets"])):
        for a, b in parts:  # `C % NH == 0`: heads of equal size
            if a in sset and b in sset and b not in in_block:
                _split_evenly(sset, a, b)
        _round_to_tiles(sset, tiles)
        for a, b in parts:  # whole tiles and whole parts at once
            if a in sset and sset.get(b, 0) > 0 and sset[a] % sset[b]:
                unit = math.lcm(tiles.get(a, 1), sset[b])
                sset[a] = max(unit, round(sset[a] / unit) * unit)
        if sset in seen:  # rounding made it a repeat: j more tiles in each size, still small
            for n, t in tiles.items():
                if n in sset:
                    sset[n] += j * t
        for n, lead in ties.items():  # `K == M`: a square problem
            sset[n] = sset[lead]
        for n, low in wider.items():  # `P >= V`: rows padded past the vocabulary
            if n in sset and low in sset and sset[n] < sset[low]:
                sset[n] = sset[low] + (sset[n] if sset[n] < sset[low] // 2 else 0)
        seen.append(sset)
    for n, t in tiles.items():
        # one tile in every set: the last takes two (a loop over the tiles runs twice there)
        if len(seen) > 1 and all(sset.get(n) == t for sset in seen) and n not in ties:
            seen[-1][n] = 2 * t
            for m, lead in ties.items():  # (`K == M`: still square)
                seen[-1][m] = seen[-1][lead]
    data["size_sets"] = [s for i, s in enumerate(seen[1:]) if s not in seen[: i + 1]]
    data["relations"] = relations


def infer_for_file(
    source: str | Path, kernel: str | None = None, tu: TranslationUnit | None = None
) -> TaskSpec:
    """The inferred spec of `kernel` (or of the file's only kernel), as `migrate` infers it;
    `tu`: the file's front-end result when the caller already has it."""
    from migrator.cuda.frontend import analyze_file

    tu = tu if tu is not None else analyze_file(source)
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
    ]
    if spec.relations:  # top-level keys come before the first table
        rels = ", ".join(f'"{r}"' for r in spec.relations)
        lines += ["# the kernel reads whole tiles: every size set obeys these",
                  f"relations = [{rels}]", ""]  # fmt: skip
    lines += [
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
    if spec.launch.null_args:
        lines += ["null_args = [" + ", ".join(f'"{n}"' for n in spec.launch.null_args) + "]"]
    for name, dist in spec.inputs.items():  # a gather's indices: in [0, rows of the table)
        lines += ["", f"[inputs.{name}]", f'dist = "{dist.dist}"']
        lines += [f"{k} = {v!r}".replace("'", '"') for k, v in
                  (("low", dist.low), ("high", dist.high), ("value", dist.value))
                  if v is not None]  # fmt: skip
    return "\n".join(lines) + "\n"


def _block_size_cap(block: list[Any], name: str, sizes: dict[str, int]) -> int:
    """The largest power of two up to 256 for size `name` that keeps the block within 1024
    threads (the other sizes at their defaults); by dimension count if a formula fails."""
    from migrator.contract import SpecError, eval_expr

    for v in (256, 128, 64, 32, 16, 8, 4, 2, 1):
        try:
            threads = math.prod(int(eval_expr(b, {**sizes, name: v})) for b in block)
        except (SpecError, ArithmeticError, TypeError):
            break
        if threads <= 1024:
            return v
    dims = sum(1 for b in block if name in re.findall(r"[A-Za-z_]\w*", str(b)))
    return {1: 256, 2: 16}.get(dims, 8)


def _base(t: str, bindings: dict[str, str]) -> str:
    t = t.replace("const", "").strip()
    return bindings.get(t, t)


def _parse(file: str, pre: tuple[list[str], dict[str, str]]) -> Any:
    """The kernel's file as the interpreter parses it (with the -I/-D the spec records), or
    None when it cannot be read again (then nothing is resolved or measured)."""
    from migrator.cuda.interp.spec_run import _parsed
    from migrator.cuda.source import SourceError

    try:  # (the parse the task's runs use: read and preprocessed once per migration)
        return _parsed(Path(file), [Path(d) for d in pre[0]], pre[1])
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


def _instantiated(site: LaunchSite, parsed: Any) -> LaunchSite:
    """The launch as the first instantiation of its host function template runs it: a
    launcher `template <typename scalar_t> void launcher(...)` whose launch passes scalar_t on
    (`kernel<scalar_t, 128><<<...>>>`), called as `launcher<float>(...)` (a torch dtype
    dispatch's first branch) launches `kernel<float, 128>`, and its `sizeof(scalar_t)` is
    `sizeof(float)`. The site as it is where the host function is no template or no call of
    it names its arguments."""
    if parsed is None or not site.host_function:
        return site
    text = parsed.source_bytes.decode("utf-8", "replace")
    name = re.escape(site.host_function)
    head = re.search(rf"template\s*<([^<>]*)>\s*[\w:\s\*&]*?\b{name}\s*\(", text)
    call = re.search(rf"\b{name}\s*<([^<>()]*)>\s*\(", text)
    if head is None or call is None:
        return site
    params = [re.sub(r"=.*", "", p).split()[-1] for p in head.group(1).split(",") if p.split()]
    args = [a.strip() for a in call.group(1).split(",")]
    if not params or len(args) > len(params) or any(not a for a in args):
        return site
    bound = dict(zip(params, args, strict=False))
    word = re.compile(r"\b(" + "|".join(map(re.escape, bound)) + r")\b")

    def sub(v: str) -> str:
        return word.sub(lambda m: bound[m.group(1)], v)

    return site.model_copy(update={
        "template_args": [sub(a) for a in site.template_args],
        "args": [sub(a) for a in site.args],
        "arg_types": {n: sub(v) for n, v in site.arg_types.items()},
        "host_values": {n: sub(v) for n, v in site.host_values.items()},
        "requires": [sub(r) for r in site.requires],
    })  # fmt: skip


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


# `NULL`, `nullptr`, `0`, `(float*)NULL`, `(floatX*) nullptr`: a null pointer argument
_NULL_ARG = re.compile(r"(?:\(\s*(?:const\s+)?\w+\s*\*\s*\)\s*)?(?:NULL|nullptr|0)")


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
        return host_poly(e.as_poly())

    def add(p: poly.Poly, limit: str | None) -> None:
        if limit and p and all(q != p for q, _ in out):
            out.append((p, limit))

    def host_poly(p: poly.Poly) -> str:
        return _host_text(p, args, host)

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


def _host_text(p: poly.Poly, args: dict[str, str], host: _Host) -> str:
    """A polynomial in the kernel's parameters as text in the host's sizes."""
    text = poly.render(p)
    for param, arg in args.items():
        text = re.sub(rf"\b{re.escape(param)}\b", f"({host.resolve(arg)})", text)
    return _clean(text)


def _dense_check(
    args: dict[str, str], host: _Host
) -> Callable[[list[tuple[poly.Poly, str]]], bool]:
    """Whether pieces (stride in the kernel's names, extent in the host's) nest as a dense
    row-major tensor: each stride the next inner one times that one's extent, at two
    assignments of the sizes. `k + bh * T * D + tile * bc * D` with `k < bc * D`,
    `tile < ceil(T / bc)`, `bh < BH` is not [tiles, BH, bc * D] (bh's stride is T * D, not
    bc * D): such an index is measured instead. Unknown where a text cannot be evaluated."""

    def text(p: poly.Poly) -> str:
        return _host_text(p, args, host)

    def dense(pieces: list[tuple[poly.Poly, str]]) -> bool:
        for (outer, _), (inner, extent) in zip(pieces, pieces[1:], strict=False):
            if len(outer) == 1 and len(poly.symbols(outer)) == 1:
                continue  # `ld * row`: a leading dimension, tied to the row's extent
            exprs = (text(outer), f"({text(inner)}) * ({extent})")
            names = {n for e in exprs for n in re.findall(r"[A-Za-z_][\w.]*", e)}
            names -= _FORMULA_FUNCTIONS
            for j in (0, 1):
                env = {n: 7 + 4 * i + 13 * j for i, n in enumerate(sorted(names))}
                try:
                    a, b = (eval_expr(e, env) for e in exprs)
                except (SpecError, ArithmeticError, TypeError, ValueError, SyntaxError):
                    return True
                if a != b:
                    return False
        return True

    return dense


def _shape(
    k: Kernel,
    param: str,
    bounds: Bounds,
    ties: dict[str, str],
    dense: Callable[[list[tuple[poly.Poly, str]]], bool] = lambda pieces: True,
) -> list[str] | None:
    """Extents of a tensor; a leading-dimension parameter used as a row stride is recorded in
    `ties` as equal to the row's extent (the contract's tensors are dense); an index whose
    strides do not nest densely (`dense`) shows no shape."""
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
        if not dense(pieces):
            continue
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
    strides = [tuple(sorted(stride.items())) for stride, _ in pieces]
    if len(set(strides)) < len(strides):
        # `x + W * (y0 + i)`, y0 < H and i < 32 both rows: their extents add up, they do not
        # nest (no [H, 32, W]); measured instead
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
