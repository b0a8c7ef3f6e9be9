"""`run_spec`: run a task's CUDA kernel with the inputs, scalars and launch its spec defines.

Follows `migrator.contract`: inputs come from `make_inputs` (or the caller), `out` tensors start
NaN-poisoned so that elements the kernel never writes show up, scalars are the spec's values
or size formulas, and the result is the `out`/`inout` tensors in spec order, like the numpy
reference returns them.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from migrator.contract import TaskSpec, is_float, load_spec, make_inputs, np_dtype
from migrator.cuda.interp.findings import InterpError
from migrator.cuda.interp.memory import OutOfBoundsError
from migrator.cuda.interp.options import InterpOptions
from migrator.cuda.interp.runner import RunResult, run_kernel
from migrator.cuda.parse import ParsedSource, parse_file

_PARSED: dict[str, ParsedSource] = {}

# Recent runs, keyed by everything that decides their result (`_run_key`: the parsed source,
# kernel, launch, options and the arguments' bytes): the lifter's verification and the
# migration's check run the original on the same inputs at the task's own sizes, the largest
# runs of a migration. A verification compares at five or more size sets, and a second fit
# verifies at the same ones again: fewer entries than that would evict each run before its reuse.
# A run that raised is kept as its error (and no outputs), raised again on a hit.
_RUNS: dict[str, tuple[dict[str, np.ndarray], RunResult | InterpError]] = {}
_RUNS_MAX = 16
RUN_MEMO = _RUNS  # (runs made in a worker process are copied into it: `migrator.workers`)
_RUNS_MAX_BYTES = 256 << 20


@dataclass
class SpecRun:
    """The outputs in spec order plus the full run result and the inputs used."""

    outputs: list[np.ndarray]
    inputs: dict[str, np.ndarray]
    result: RunResult
    sizes: dict[str, int]


def _parse_key(
    path: Path, include_dirs: list[Path] | None = None, defines: dict[str, str] | None = None
) -> str:
    st = path.stat()
    # an edited file is parsed again; so is one preprocessed with other -I/-D
    dirs, defs = [str(d) for d in include_dirs or []], sorted((defines or {}).items())
    return f"{path.resolve()}:{st.st_mtime_ns}:{st.st_size}:{dirs}:{defs}"  # None, [] alike


def _parsed(
    path: Path, include_dirs: list[Path] | None = None, defines: dict[str, str] | None = None
) -> ParsedSource:
    key = _parse_key(path, include_dirs, defines)
    p = _PARSED.get(key)
    if p is None:
        p = parse_file(path, include_dirs, defines)
        _PARSED[key] = p
    return p


def _run_key(parse_key: str, parts: tuple[Any, ...], args: dict[str, Any]) -> str:
    """What decides a run: the source, kernel, launch and options (`parts`), and the bytes of
    every argument. Not the spec's shapes: the kernel sees flat memory, so a task read with 2-D
    views of the same buffers is the same run."""
    h = hashlib.blake2b(digest_size=20)
    h.update(repr((parse_key, parts)).encode())
    for name in sorted(args):
        v = args[name]
        if isinstance(v, np.ndarray):
            h.update(f"{name}:{v.dtype.str}:{v.size}".encode())
            h.update(np.ascontiguousarray(v).view(np.uint8).data)
        else:
            h.update(f"{name}={v!r}".encode())
    return h.hexdigest()


def _remember(key: str, outs: dict[str, np.ndarray], result: RunResult | InterpError) -> None:
    size = sum(o.nbytes for o in outs.values())
    if size > _RUNS_MAX_BYTES:
        return
    while _RUNS and (
        len(_RUNS) >= _RUNS_MAX
        or size + sum(o.nbytes for v in _RUNS.values() for o in v[0].values()) > _RUNS_MAX_BYTES
    ):
        _RUNS.pop(next(iter(_RUNS)))  # oldest first  # fmt: skip
    _RUNS[key] = ({p: o.copy() for p, o in outs.items()}, result)


def as_dtype(arr: np.ndarray, want: np.dtype) -> np.ndarray:
    """An input array in the tensor's dtype. A raw 2-byte `.npy` (`|V2`: how numpy saves an
    ml_dtypes bfloat16 array) is reinterpreted, never converted from its bytes as numbers."""
    if arr.dtype.kind == "V":
        if arr.dtype.itemsize != want.itemsize:
            raise ValueError(
                f"a raw {arr.dtype} array cannot be read as {want} ({want.itemsize} bytes)"
            )
        return np.ascontiguousarray(arr).view(want)
    return np.ascontiguousarray(arr, dtype=want)


def kernel_args(
    spec: TaskSpec, sz: Mapping[str, int], ins: Mapping[str, np.ndarray], out_fill: float = np.nan
) -> dict[str, Any]:
    """The launch's arguments by CUDA parameter: copies of the inputs `ins`, `out` tensors
    filled with `out_fill` (integer ones with 0), scalars at sizes `sz`."""
    args: dict[str, Any] = {}
    for t in spec.tensors:
        if t.role == "out":
            dt = np_dtype(t.dtype)
            fill = out_fill if is_float(dt) else 0
            args[t.cuda_param] = np.full(spec.shape_of(t, sz), fill, dtype=dt)
        elif t.role == "scratch":  # the original's working memory, as the host left it
            fill = spec.scratch_fill(t)
            args[t.cuda_param] = np.full(spec.shape_of(t, sz), fill, dtype=np_dtype(t.dtype))
        else:
            args[t.cuda_param] = ins[t.name].copy()
    for s in spec.scalars:
        args[s.cuda_param] = spec.scalar_value(s, sz)
    for p in spec.launch.null_args:
        args[p] = None  # a null pointer
    return args


def run_spec_full(
    spec: TaskSpec | str | Path,
    sizes: Mapping[str, int] | None = None,
    seed: int = 0,
    inputs: Mapping[str, np.ndarray] | None = None,
    options: InterpOptions | None = None,
    grid: tuple[int, ...] | None = None,
    block: tuple[int, ...] | None = None,
    source: str | Path | None = None,
    out_fill: float = np.nan,
) -> SpecRun:
    """Like `run_spec`, returning inputs, sizes and the `RunResult` (findings) too.

    `grid`/`block` override the spec's launch; `source` runs another .cu file than the spec's
    (an edited copy of the kernel, say) under the same contract. `out_fill`: what float `out`
    tensors hold before the kernel runs (NaN: unwritten elements show)."""
    if not isinstance(spec, TaskSpec):
        spec = load_spec(spec)
    sz = spec.resolve_sizes(sizes)
    ins = make_inputs(spec, sz, seed)
    for name, arr in (inputs or {}).items():
        if name not in ins:
            raise ValueError(
                f"--inputs {name}: not an input tensor of this task "
                f"(inputs: {', '.join(ins) or 'none'})"
            )
        t = spec.tensor_named(name)
        want = spec.shape_of(t, sz)
        if tuple(arr.shape) != want:
            raise ValueError(f"input {name!r} has shape {arr.shape}, expected {want}")
        ins[name] = as_dtype(arr, np_dtype(t.dtype))
    args = kernel_args(spec, sz, ins, out_fill)
    g, b, smem = spec.launch_config(sz)
    if options is None:  # the oracle: which elements of its outputs it stores is recorded
        options = InterpOptions(stores=tuple(t.cuda_param for t in spec.outputs_in_order
                                             if t.role == "out"))  # fmt: skip
    path = Path(source) if source is not None else spec.cuda_source_path()
    key = ""  # traced values are not bytes to hash (and traced runs are small)
    if not (options is not None and options.trace) and not any(
        isinstance(v, np.ndarray) and v.dtype == object for v in args.values()
    ):
        parts = (spec.kernel.name, tuple(map(str, spec.kernel.template_args)), tuple(grid or g),
                 tuple(block or b), smem,
                 # (the stores recorded add to a result, never change it: a run with or without
                 # them serves both, `unwritten_elements` reruns where a record is missing)
                 repr(replace(options, stores=()) if options is not None else None))  # fmt: skip
        key = _run_key(_parse_key(path, *spec.preprocessor()), parts, args)
    hit = _RUNS.get(key) if key else None
    if hit is not None:
        if isinstance(hit[1], InterpError):
            raise copy.copy(hit[1])  # (a fresh one: no traceback of the first raise's frames)
        outs = [hit[0][t.cuda_param].reshape(np.shape(args[t.cuda_param])).copy()
                for t in spec.outputs_in_order]  # fmt: skip
        return SpecRun(outs, ins, hit[1], sz)

    def run(opts: InterpOptions | None, fresh: bool = True) -> tuple[RunResult, dict[str, Any]]:
        # (the kernel writes its arguments in place: a rerun gets its own, made anew)
        a = kernel_args(spec, sz, ins, out_fill) if fresh else args
        return run_kernel(
            _parsed(path, *spec.preprocessor()),
            spec.kernel.name,
            grid or g,
            block or b,
            a,
            shared_bytes=smem,
            template_args=list(spec.kernel.template_args),
            options=opts,
        ), a

    try:
        try:
            result, _ = run(options, fresh=False)
        except OutOfBoundsError as e:
            outputs = [t.cuda_param for t in spec.outputs_in_order]
            result, args = _benign_over_read(e, run, options, outputs)
    except InterpError as e:
        # the same run fails the same way: a ragged set the kernel reaches past is asked of
        # the lift's verification, a view's and the check's, each a whole run up to the error
        if key:
            _remember(key, {}, copy.copy(e))
        raise
    outs = [result.outputs.get(t.cuda_param, args[t.cuda_param]) for t in spec.outputs_in_order]
    if key:
        _remember(key, {t.cuda_param: o for t, o in zip(spec.outputs_in_order, outs,
                                                          strict=True)}, result)  # fmt: skip
    return SpecRun(outs, ins, result, sz)


def _benign_over_read(
    error: OutOfBoundsError,
    run: Callable[[InterpOptions | None], tuple[RunResult, dict[str, Any]]],
    options: InterpOptions | None,
    outputs: list[str],
) -> tuple[RunResult, dict[str, Any]]:
    """A kernel whose lanes read past a shared array (`shared[lane]` for every lane of a
    warp when the array holds one value per warp) and then drop what they read: run twice
    more with those reads returning poison (NaN, then zero; fresh memory likewise), and where
    the outputs agree exactly the first of the two is the result, its findings saying where
    the over-read is. Anything else (outputs that differ: the read is used; an over-read of
    global memory or a write) raises the original error: the oracle never guesses."""
    base = options or InterpOptions()
    if base.oob != "raise" or base.trace or "read of shared buffer" not in str(error):
        raise error
    try:
        first, second = (run(replace(base, oob="shared_reads", uninit=u)) for u in ("nan", "zero"))
    except OutOfBoundsError:
        raise error from None
    for name in outputs:
        a = np.asarray(first[0].outputs.get(name, first[1][name]))
        b = np.asarray(second[0].outputs.get(name, second[1][name]))
        if not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            raise error
    return first


def run_spec(
    spec: TaskSpec | str | Path,
    sizes: Mapping[str, int] | None = None,
    seed: int = 0,
    inputs: Mapping[str, np.ndarray] | None = None,
    options: InterpOptions | None = None,
) -> list[np.ndarray]:
    """Run a spec's kernel; returns the `out`/`inout` tensors in spec order."""
    return run_spec_full(spec, sizes, seed, inputs, options).outputs


def unwritten_elements(
    spec: TaskSpec,
    sizes: Mapping[str, int],
    seed: int,
    outputs: list[np.ndarray],
    inputs: Mapping[str, np.ndarray] | None = None,
    stored: Mapping[str, np.ndarray] | None = None,
) -> list[np.ndarray | None]:
    """Per output of a run (`outputs`, with NaN-filled `out` tensors): where the kernel left it
    unwritten (NaN that a second run with another fill keeps as that fill, not a NaN it
    computed) or undefined (a NaN it stored from uninitialised memory, a number when that
    memory starts at zero), or None where it has no NaN to explain. `stored` (the run's
    `RunResult.stored`): where no NaN element was stored, the NaN ones are those never
    stored, and no second run is needed (a causal mask's upper triangle). An integer output
    holds no NaN: its unwritten elements are those `stored` says were never stored (a grid
    of `N / 32` blocks leaves a ragged N's last columns as the zeros they started as)."""
    ints = _unstored_integers(spec, outputs, stored)
    nan = [t.role == "out" and is_float(w.dtype) and bool(np.isnan(w).any())
           for t, w in zip(spec.outputs_in_order, outputs, strict=False)]  # fmt: skip
    if not any(nan):
        return ints
    return [h if h is not None else i for h, i in
            zip(_unwritten_floats(spec, sizes, seed, outputs, inputs, stored, nan), ints,
                strict=True)]  # fmt: skip


def _unstored_integers(
    spec: TaskSpec, outputs: list[np.ndarray], stored: Mapping[str, np.ndarray] | None
) -> list[np.ndarray | None]:
    out: list[np.ndarray | None] = []
    for t, w in zip(spec.outputs_in_order, outputs, strict=False):
        # (the task's dtype: a caller may hand the outputs over widened to float64)
        s = None if stored is None or is_float(np_dtype(t.dtype)) else stored.get(t.cuda_param)
        hole = None
        if t.role == "out" and s is not None and s.size == w.size and not s.all():
            hole = ~s.reshape(w.shape)
        out.append(hole)
    return out


def _unwritten_floats(
    spec: TaskSpec,
    sizes: Mapping[str, int],
    seed: int,
    outputs: list[np.ndarray],
    inputs: Mapping[str, np.ndarray] | None,
    stored: Mapping[str, np.ndarray] | None,
    nan: list[bool],
) -> list[np.ndarray | None]:
    if stored is not None:
        known: list[np.ndarray | None] = []
        for n, t, w in zip(nan, spec.outputs_in_order, outputs, strict=False):
            s = stored.get(t.cuda_param) if n else None
            if n and (s is None or s.size != w.size):
                break
            hole = np.isnan(w) if n else None
            if hole is not None and s is not None and (hole & s.reshape(w.shape)).any():
                break  # a stored NaN: computed, or the fill copied? the second run tells
            known.append(hole)
        else:
            return known
    again = run_spec_full(spec, sizes, seed, inputs=inputs, out_fill=7.25).outputs
    holes = [np.isnan(w) & (np.asarray(a, dtype=np.float64) == 7.25) if n else None
             for n, w, a in zip(nan, outputs, again, strict=False)]  # fmt: skip
    if all(h is None or bool((h == np.isnan(w)).all()) for h, w in zip(holes, outputs,
                                                                       strict=False)):  # fmt: skip
        return holes
    # NaN the kernel stored: computed (sqrt of a negative), or an uninitialised local's value
    # (the interpreter's NaN) stored as such: `packed[k]` left unset for the elements past V of
    # a 128-bit store, which a GPU fills with whatever the register held (copying a struct
    # with unset members is no uninitialised read)? A run with zeroed fresh memory tells: an
    # element it gives a number is undefined, never compared either
    zero = run_spec_full(spec, sizes, seed, inputs=inputs,
                         options=InterpOptions(uninit="zero")).outputs  # fmt: skip
    return [h | (np.isnan(w) & ~np.isnan(np.asarray(z, dtype=np.float64))) if h is not None
            else None for h, w, z in zip(holes, outputs, zero, strict=False)]  # fmt: skip
