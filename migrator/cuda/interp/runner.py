"""`run_kernel`: launch a kernel on the CPU, batch by batch of blocks, and collect findings.

The grid loop is plain and visible: blocks are cut into batches (a lane budget bounds memory),
each batch gets fresh shared memory and runs the kernel body once, vectorised over all its
lanes. Global buffers are the caller's arrays (written in place) unless `shadow_f64` upcasts
float32 arrays to float64 working copies (returned in `RunResult.outputs`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from migrator.cuda.interp import ctypes_ as ct
from migrator.cuda.interp.findings import Finding, FindingLog, InterpError, LaunchError
from migrator.cuda.interp.geometry import Dim3, Geometry
from migrator.cuda.interp.machine import Machine
from migrator.cuda.interp.memory import Buffer
from migrator.cuda.interp.options import InterpOptions
from migrator.cuda.interp.program import Program
from migrator.cuda.interp.scope import Binding, MemLV, Unavailable, Var
from migrator.cuda.interp.stmts import DECL_WORDS
from migrator.cuda.interp.structs import StructInfo
from migrator.cuda.interp.traced import TraceEscape
from migrator.cuda.interp.values import Val, scalar
from migrator.cuda.parse import ParsedSource, parse_file, parse_text

LANE_BUDGET = 1 << 18  # lanes per batch: int64 lane arrays of 2 MiB stay cache-friendly


@dataclass
class RunResult:
    """Arrays after the launch (by parameter name), findings, and throughput counters."""

    outputs: dict[str, np.ndarray]
    findings: list[Finding] = field(default_factory=list)
    thread_statements: int = 0
    seconds: float = 0.0
    batches: int = 0
    device_globals: dict[str, np.ndarray] = field(default_factory=dict)
    extents: dict[str, int] = field(default_factory=dict)  # InterpOptions.extents
    writers: dict[str, np.ndarray] = field(default_factory=dict)  # InterpOptions.writers
    # ... and per element whether several blocks stored into it (one value or not)
    overlaps: dict[str, np.ndarray] = field(default_factory=dict)
    stored: dict[str, np.ndarray] = field(default_factory=dict)  # InterpOptions.stores
    cross_block_reads: bool = False  # InterpOptions.writers: a block read another's store

    @property
    def statements_per_second(self) -> float:
        return self.thread_statements / self.seconds if self.seconds > 0 else 0.0


_PROGRAMS: dict[int, tuple[ParsedSource, Program]] = {}


def program_for(source: str | Path | ParsedSource) -> Program:
    """Parse (if needed) and index a translation unit; cached per ParsedSource object."""
    if isinstance(source, ParsedSource):
        parsed = source
    elif isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and source.endswith((".cu", ".cuh"))
    ):
        parsed = parse_file(source)
    else:
        parsed = parse_text(str(source))
    hit = _PROGRAMS.get(id(parsed))
    if hit is not None and hit[0] is parsed:
        return hit[1]
    prog = Program.build(parsed)
    if len(_PROGRAMS) > 64:
        _PROGRAMS.clear()
    _PROGRAMS[id(parsed)] = (parsed, prog)
    return prog


def kernel_signature(
    source: str | Path | ParsedSource,
    kernel_name: str | None,
    template_args: list[int | float | str] | None = None,
) -> list[tuple[str, ct.CType]]:
    """The kernel's parameters with their C types as the interpreter resolves them (typedefs
    such as `floatX`, template arguments, header types): what `args` must hold."""
    prog = program_for(source)
    try:
        fn = prog.kernel(kernel_name)
    except KeyError as e:
        raise LaunchError(str(e.args[0])) from e
    geo = Geometry((1, 1, 1), (1, 1, 1), 0, 1)
    m = Machine(prog, fn.name, geo, InterpOptions(), FindingLog(fn.name), 0)
    scope: dict[str, Binding] = {}
    m.push_frame(ct.VOID, scope)
    with np.errstate(all="ignore"):
        _globals(m, {}, {})
    if fn.template is not None:
        m.bind_template(fn.template, list(template_args or []), scope)
    return [_param_type(m, p) for p in fn.params if _named(p)]


def file_constants(
    source: str | Path | ParsedSource, kernel_name: str, texts: list[str]
) -> dict[str, int]:
    """Compile-time integers in the file's scope as the interpreter evaluates them
    (`sizeof(floatX)`, `x128::size`, `Packed128<float>::size`): host launch expressions use
    them. A text it cannot evaluate to one integer is left out, never guessed."""
    from migrator.cuda.parse import parse_text
    from migrator.cuda.source import SourceError

    prog = program_for(source)
    try:
        fn = prog.kernel(kernel_name)
    except KeyError:
        return {}
    m = Machine(prog, fn.name, Geometry((1, 1, 1), (1, 1, 1), 0, 1), InterpOptions(),
                FindingLog(fn.name), 0)  # fmt: skip
    m.push_frame(ct.VOID, {})
    out: dict[str, int] = {}
    with np.errstate(all="ignore"):
        _globals(m, {}, {})
        for text in texts:
            try:
                snippet = parse_text(f"auto __c2n_value = ({text});\n", "<host expression>")
            except SourceError:  # not an expression (a type name, a keyword)
                continue
            decl = snippet.tree.root_node.named_children[0]
            init = decl.child_by_field_name("declarator")
            node = init.child_by_field_name("value") if init is not None else None
            if node is None or snippet.tree.root_node.has_error:
                continue
            m.parsed = snippet  # names resolve in the program; text comes from the snippet
            try:
                v = m.ev(node, m.geo.full)
            except Exception:  # noqa: BLE001 - an expression it cannot evaluate stays text
                continue
            finally:
                m.parsed = prog.parsed
            if v.ctype.kind in ("int", "bool") and v.is_uniform:
                out[text] = int(v.data)
    return out


def _named(p: Any) -> bool:
    """An unnamed parameter (a tag such as `std::bool_constant<B>`) takes no argument: the
    body cannot read it; its template value comes from the launch's template arguments."""
    return p.child_by_field_name("declarator") is not None


def _param_type(m: Machine, p: Any) -> tuple[str, ct.CType]:
    """A kernel parameter's name and type, resolved in the machine's scope."""
    tnode, decl = p.child_by_field_name("type"), p.child_by_field_name("declarator")
    assert tnode is not None and decl is not None
    name, t, _, _ = m.declarator_type(m.base_type(tnode), decl)
    return name, t


def _dim3(v: int | tuple[int, ...] | list[int]) -> Dim3:
    vals = [int(v)] if isinstance(v, (int, np.integer)) else [int(x) for x in v]
    if not 1 <= len(vals) <= 3 or any(x < 1 for x in vals):
        raise ValueError(f"launch dimension {v!r}: expected 1-3 positive ints")
    return tuple((vals + [1, 1, 1])[:3])  # type: ignore[return-value]


SECONDS = [0.0]  # this process's time in launches so far (what a phase to come may cost)


def run_kernel(
    source_or_parsed: str | Path | ParsedSource,
    kernel_name: str | None,
    grid: int | tuple[int, ...],
    block: int | tuple[int, ...],
    args: Mapping[str, Any],
    shared_bytes: int = 0,
    template_args: list[int | float | str] | None = None,
    options: InterpOptions | None = None,
) -> RunResult:
    """Run `kernel_name<<<grid, block, shared_bytes>>>(args...)` with CUDA semantics.

    `args` maps parameter names to numpy arrays (pointers; written in place) or Python
    scalars. Raises `InterpError` (with kernel, block, thread and line) for out-of-bounds
    accesses in raise mode, divergent barriers and unsupported constructs.
    """
    opts = options or InterpOptions()
    prog = program_for(source_or_parsed)
    try:
        fn = prog.kernel(kernel_name)
    except KeyError as e:
        raise LaunchError(str(e.args[0])) from e
    g, b = _dim3(grid), _dim3(block)
    threads = b[0] * b[1] * b[2]
    if threads > 1024:
        raise LaunchError(f"block of {threads} threads exceeds CUDA's 1024", kernel=fn.name)
    n_blocks = g[0] * g[1] * g[2]
    batch = opts.block_batch or max(1, LANE_BUDGET // threads)
    log = FindingLog(fn.name)
    arrays: dict[str, np.ndarray] = {}
    result = RunResult(outputs=arrays)
    t0 = time.perf_counter()
    with np.errstate(all="ignore"):  # C wraps and divides silently; numpy would warn
        bound: dict[str, Any] | None = None
        global_cache: dict[str, Binding] = {}
        structs: dict[str, StructInfo] = {}
        for ids in _batches(n_blocks, batch, opts.blocks, fn.name):
            geo = Geometry(g, b, int(ids[0]), len(ids), ids if opts.blocks is not None else None)
            m = Machine(prog, fn.name, geo, opts, log, shared_bytes, structs)
            # (the count goes on across batches: `max_thread_statements` bounds the run, and a
            # grid of many small batches had each batch under it and the run never stopped)
            m.thread_statements = result.thread_statements
            scope: dict[str, Binding] = {}
            m.push_frame(ct.VOID, scope)
            _globals(m, args, global_cache)
            if fn.template is not None:  # explicit values, else deduced from the arrays
                params, actual = _deducible(fn.params, args)
                m.bind_template(fn.template, list(template_args or []), scope, params, actual)
            if bound is None:
                bound = _bind_args(m, fn.params, args, arrays)
            for name, (t, value) in bound.items():
                scope[name] = Var(t, value)
            try:
                m.exec(fn.body, geo.full)
            except InterpError:
                raise
            except TraceEscape as e:  # a traced run only: the value left what a trace follows
                raise InterpError(f"not traceable: {e}", m.span(m.current), fn.name) from e
            except Exception as e:  # a bug or an unmodelled case: keep the cause and the line
                raise InterpError(
                    f"internal error: {type(e).__name__}: {e}", m.span(m.current), fn.name
                ) from e
            finally:
                statements = m.thread_statements
                m.release()
            result.thread_statements = statements
            result.batches += 1
    result.seconds = time.perf_counter() - t0
    SECONDS[0] += result.seconds
    result.findings = log.items
    if opts.extents and bound is not None:
        for name, (_, v) in bound.items():
            if v.buf is not None and v.buf.track:
                result.extents[name] = -(-v.buf.hi_bytes // v.buf.elem.size)
    if opts.stores and bound is not None:
        for name, (_, v) in bound.items():
            if v.buf is not None and v.buf.stored is not None:
                result.stored[name] = v.buf.stored
    if opts.writers and bound is not None:
        for name, (_, v) in bound.items():
            if v.buf is not None and v.buf.writer is not None:
                result.writers[name] = v.buf.writer
                assert v.buf.overlap is not None
                result.overlaps[name] = v.buf.overlap
                result.cross_block_reads |= v.buf.cross_read
    for name, b in global_cache.items():  # __device__/__constant__ variables after the launch
        buf = b.val.buf if isinstance(b, Var) else b.ptr.buf if isinstance(b, MemLV) else None
        if buf is not None:
            result.device_globals[name] = buf.data
    return result


def _batches(
    n_blocks: int, batch: int, blocks: tuple[int, ...] | None, kernel: str
) -> Iterator[np.ndarray]:
    """The linear block ids of each batch: the grid in order (lazily: a grid may be larger than
    memory, and a run stops at its statement budget), or the chosen blocks."""
    if blocks is None:
        for f in range(0, n_blocks, batch):
            yield np.arange(f, min(f + batch, n_blocks), dtype=np.int64)
        return
    ids = np.array(blocks, np.int64)
    if ids.size and ids[-1] >= n_blocks:
        raise LaunchError(f"block {ids[-1]} is outside the grid of {n_blocks}", kernel=kernel)
    for f in range(0, ids.size, batch):
        yield ids[f : f + batch]


def _deducible(params: list[Any], args: Mapping[str, Any]) -> tuple[list[Any], list[Any]]:
    """Parameters bound to numpy arrays, with pointer values of the arrays' element types:
    what C++ deduces `template <typename T> __global__ void k(T* x)`'s T from."""
    ps, vals = [], []
    for p in params:
        decl = p.child_by_field_name("declarator")
        while decl is not None and decl.type not in ("identifier", "field_identifier"):
            decl = decl.child_by_field_name("declarator")
        a = args.get(decl.text.decode()) if decl is not None and decl.text else None
        t = ct.from_dtype(a.dtype) if isinstance(a, np.ndarray) else None
        if t is not None:
            ps.append(p)
            vals.append(Val(ct.ptr(t), np.int64(0)))
    return ps, vals


def _bind_args(
    m: Machine, params: list[Any], args: Mapping[str, Any], arrays: dict[str, np.ndarray]
) -> dict[str, tuple[ct.CType, Val]]:
    """Kernel parameters from `args`: arrays become global buffers, scalars typed values."""
    out: dict[str, tuple[ct.CType, Val]] = {}
    names = []
    for p in params:
        if not _named(p):
            continue
        name, t = _param_type(m, p)
        names.append(name)
        default = p.child_by_field_name("default_value")
        if name not in args and default is not None:  # `int* partial = NULL`: as written
            out[name] = (t, m.convert_to(m.ev(default, m.geo.full), t, default))
            continue
        if name not in args:
            raise LaunchError(f"missing argument {name!r} ({t})", m.span(p), m.kernel)
        a = args[name]
        if t.kind == "struct" or t.scalar.kind == "struct" or (t.elem and t.elem.kind == "struct"):
            raise LaunchError(
                f"struct parameter {name!r} ({t}) is not supported", m.span(p), m.kernel
            )
        if t.kind in ("ptr", "array"):
            assert t.elem is not None
            out[name] = (ct.ptr(t.elem), _pointer_arg(m, name, t.elem, a, arrays))
        elif isinstance(a, np.ndarray) and a.ndim > 0:
            raise LaunchError(
                f"argument {name!r} is an array but the parameter is {t}", m.span(p), m.kernel
            )
        else:
            out[name] = (t, scalar(t, a) if t.kind != "float" else Val(t, t.dtype.type(a)))
    extra = set(args) - set(names) - set(m.globals)
    if extra:
        raise LaunchError(
            f"unknown argument(s) {sorted(extra)}; parameters: {names}", kernel=m.kernel
        )
    return out


def _pointer_arg(
    m: Machine, name: str, elem: ct.CType, a: Any, arrays: dict[str, np.ndarray]
) -> Val:
    if a is None:  # a null pointer argument (an optional bias, say)
        return Val(ct.ptr(elem), np.int64(0))
    if not isinstance(a, np.ndarray):
        raise LaunchError(
            f"argument {name!r} must be a numpy array (parameter is {elem}*)", kernel=m.kernel
        )
    scalar_t = elem.scalar
    want = scalar_t.dtype
    if a.dtype == np.float32 and want == np.float64:
        # (the shadow run's float buffers; or a float32 tensor given to a `double*`
        # parameter: the float32 variant of a float64 kernel, its values widened exactly)
        a = a.astype(np.float64)
    if a.dtype != want:
        raise LaunchError(
            f"argument {name!r} has dtype {a.dtype}, parameter is {elem}*", kernel=m.kernel
        )
    if not a.flags.c_contiguous:
        raise LaunchError(f"argument {name!r} must be C-contiguous", kernel=m.kernel)
    arrays[name] = a
    flat = a.reshape(-1)
    buf = Buffer(name, "global", flat, scalar_t, flat.size, track=m.options.extents)
    if m.options.writers:
        buf.writer = np.full(flat.size, -1, dtype=np.int64)
        buf.overlap = np.zeros(flat.size, dtype=bool)
    if name in m.options.stores:
        buf.stored = np.zeros(flat.size, dtype=bool)
    return Val(ct.ptr(elem), np.int64(0), buf=buf)


def _globals(m: Machine, args: Mapping[str, Any], cache: dict[str, Binding]) -> None:
    """File-scope `__constant__`/`__device__` variables and `const` scalars.

    Built by the first batch and shared by later ones (a `__device__` variable written by one
    batch of blocks is seen by the next, as in one launch)."""
    if cache:
        m.globals.update(cache)
        return
    scope = m.frame.scopes[-1]
    m.frames[-1].scopes[-1] = m.globals
    try:
        for decl in m.program.globals:
            try:
                _global_decl(m, decl, args)
            except Exception as e:  # only a kernel that uses these names may fail for them
                err = (
                    e
                    if isinstance(e, InterpError)
                    else m.unsupported(decl, f"file-scope declaration ({type(e).__name__}: {e})")
                )
                # kept without tracebacks: theirs hold this run's frames, and with them its
                # arguments and machine (a traced run's values), until the cycle collector
                # finds them
                _drop_tracebacks(err)
                for name in _declared_names(m, decl):
                    m.globals.setdefault(name, Unavailable(name, err))
    finally:
        m.frames[-1].scopes[-1] = scope
    cache.update(m.globals)


def _drop_tracebacks(err: BaseException) -> None:
    """`err` and the exceptions chained to it, without their tracebacks (the message stays)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [err]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        e.__traceback__ = None
        todo += [e.__cause__, e.__context__]


def _global_decl(m: Machine, decl: Any, args: Mapping[str, Any]) -> None:
    if decl.type != "declaration":
        m.exec(decl, m.geo.full)  # typedef / using
        return
    words = {m.parsed.text(c) for c in decl.children if c.type in DECL_WORDS}
    tnode = decl.child_by_field_name("type")
    if tnode is None or "extern" in words:
        return
    base = m.base_type(tnode)
    for d in decl.children_by_field_name("declarator"):
        if d.type == "function_declarator":
            continue
        init = d.child_by_field_name("value") if d.type == "init_declarator" else None
        name, t, _, _ = m.declarator_type(base, d)
        if t.kind == "array" or "__constant__" in words or "__device__" in words:
            space = "constant" if "__constant__" in words else "global"
            m.globals[name] = _global_var(m, name, t, init, args.get(name), space)
        elif init is not None:
            v = m.convert_to(m.ev(init, m.geo.full), t, d)
            m.globals[name] = Var(t, v, const=True)


def _declared_names(m: Machine, decl: Any) -> list[str]:
    """Names a file-scope declaration, typedef or alias introduces (without evaluating it)."""
    if decl.type == "alias_declaration":
        name = decl.child_by_field_name("name")
        return [m.parsed.text(name)] if name is not None else []
    names = []
    for d in decl.children_by_field_name("declarator"):
        while d is not None and d.type not in ("identifier", "type_identifier"):
            d = d.child_by_field_name("declarator")
        if d is not None:
            names.append(m.parsed.text(d))
    return names


def _global_var(m: Machine, name: str, t: ct.CType, init: Any, given: Any, space: Any) -> Binding:
    elem = t.scalar
    assert elem.dtype is not None
    size = max(1, t.size // elem.size)
    data = np.zeros(size, dtype=elem.dtype)  # static storage is zero-initialised
    if isinstance(given, np.ndarray):
        data[: given.size] = given.reshape(-1)[:size]  # as cudaMemcpyToSymbol
    elif init is not None and init.type == "initializer_list":
        vals = _flatten_init(m, init)
        data[: len(vals)] = vals
    elif init is not None:
        data[0] = m.ev(init, m.geo.full).data
    buf = Buffer(name, space, data, elem, size)
    if t.kind != "array":  # a scalar variable: an lvalue into its one-element buffer
        return MemLV(Val(ct.ptr(t), np.int64(0), buf=buf), t)
    return Var(t, Val(t, np.int64(0), buf=buf), const=True)


def _flatten_init(m: Machine, node: Any) -> list[Any]:
    out: list[Any] = []
    for c in node.named_children:
        if c.type == "initializer_list":
            out.extend(_flatten_init(m, c))
        else:
            out.append(m.ev(c, m.geo.full).data)
    return out
