"""Run a task's kernel once with traced values: each output element as an expression.

Float inputs become leaves (`x[17]`, the flat element), float scalar parameters named leaves;
integer inputs (indices, labels) and sizes stay concrete. The run is the CUDA interpreter's own
(same semantics, same launch), in its traced mode (`migrator.cuda.interp.traced`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from migrator.contract import InputDist, TaskSpec, int_range, make_inputs, np_dtype
from migrator.cuda.interp.findings import InterpError
from migrator.cuda.interp.options import InterpOptions
from migrator.cuda.interp.runner import run_kernel
from migrator.cuda.interp.spec_run import _parsed, kernel_args
from migrator.cuda.interp.traced import Sym
from migrator.lift.program import LiftError

# traced values one run may hold (input leaves and the floats of outputs and scratch): a Sym
# per element is a Python object, and a trace past this is slow and large, never one we need
MAX_TRACED = 1 << 22


@dataclass
class Trace:
    sizes: dict[str, int]
    outputs: dict[str, np.ndarray]  # object arrays of Sym (or numbers where never computed)
    shapes: dict[str, tuple[int, ...]]  # every tensor's shape at these sizes
    inputs: dict[str, np.ndarray]  # the concrete inputs the leaves stand for
    params: dict[str, float]  # float scalar parameters (named leaves)
    int_tensors: set[str]


def _is_float(dtype: str) -> bool:
    return np_dtype(dtype).kind == "f" or dtype.startswith(("bfloat", "float"))


# thread-statements a traced run may take (a few seconds of traced arithmetic): beyond it the
# run stops with an error that names the budget, and the lifter tries no larger sizes
TRACE_STATEMENTS = 4_000_000


def fills(spec: TaskSpec) -> dict[str, float]:
    """Inputs the task fills with one value (`dist = "fill"`), by name."""
    return {n: float(d.value) for n, d in spec.inputs.items()
            if d.dist == "fill" and d.value is not None}  # fmt: skip


def trace_inputs(spec: TaskSpec, sizes: Mapping[str, int], seed: int) -> dict[str, np.ndarray]:
    """The task's inputs, with integer inputs redrawn as spread over their range as it allows
    (each value as rarely repeated as the tensor's size permits): a gather's index map is read
    off the elements whose index value occurs once."""
    ins = make_inputs(spec, sizes, seed)
    rng = np.random.default_rng(seed + 1)
    filled = fills(spec)
    for t in spec.inputs_in_order:
        if _is_float(t.dtype) or t.name not in ins or t.name in filled:
            continue
        arr = ins[t.name]
        if arr.size < 2:
            continue
        lo, hi = int_range(spec.inputs.get(t.name, InputDist()), sizes)  # as make_inputs draws
        if hi - lo < 2:
            continue
        if hi - lo > 4 * arr.size:  # distinct values without permuting a range of 2**32
            spread = lo + rng.choice(hi - lo, size=arr.size, replace=False)
        else:
            spread = lo + np.resize(rng.permutation(hi - lo), arr.size)
        ins[t.name] = rng.permutation(spread).reshape(arr.shape).astype(arr.dtype)
    return ins


def trace_run(
    spec: TaskSpec,
    sizes: Mapping[str, int],
    seed: int = 0,
    blocks: tuple[int, ...] | None = None,
) -> Trace:
    """The traced run at `sizes` (inputs drawn with `seed`), of every block of the launch or
    of `blocks` only (the others' elements stay unwritten: NaN in `out` tensors)."""
    sz = dict(sizes)
    held = sum(math.prod(spec.shape_of(t, sz)) for t in spec.tensors if _is_float(t.dtype))
    if held > MAX_TRACED:  # (a value object per element: a 10^8-element input took 24 GB)
        raise LiftError(
            f"a traced run at {sz} would hold {held} traced values (at most {MAX_TRACED}): "
            "the task's tensors are too large to trace"
        )
    ins = trace_inputs(spec, sz, seed)
    filled = fills(spec)
    args: dict[str, Any] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    ints: set[str] = set()
    for t in spec.tensors:
        shape = spec.shape_of(t, sz)
        shapes[t.name] = shape
        if t.role == "scratch":  # working memory: the floats the kernel stores there are traced
            held = object if _is_float(t.dtype) else np_dtype(t.dtype)  # (a counter: numbers)
            args[t.cuda_param] = np.full(shape, spec.scratch_fill(t), dtype=held)
            continue
        if not _is_float(t.dtype):
            ints.add(t.name)
            if t.role == "out":
                args[t.cuda_param] = np.zeros(shape, dtype=np_dtype(t.dtype))
            else:
                args[t.cuda_param] = ins[t.name].copy()
            continue
        if t.role == "out":
            args[t.cuda_param] = np.full(shape, np.nan, dtype=object)
            continue
        if t.name in filled:  # set by the host before the launch: a constant, no input
            args[t.cuda_param] = np.full(shape, filled[t.name], dtype=object)
            continue
        vals = np.asarray(ins[t.name], dtype=np.float64).reshape(-1)
        leaves = np.empty(vals.size, dtype=object)
        # (one comprehension over Python floats: a leaf per input element is most of a large
        # copy kernel's trace, and numpy scalars and item assignment add to its cost)
        name = t.name
        leaves[:] = [Sym.leaf(name, i, v) for i, v in enumerate(vals.tolist())]
        args[t.cuda_param] = leaves.reshape(shape)
    params: dict[str, float] = {}
    for s in spec.scalars:
        v = spec.scalar_value(s, sz)
        if s.value is not None and _is_float(s.dtype):
            params[s.name] = float(v)
            args[s.cuda_param] = Sym.param(s.name, float(v))
        else:
            args[s.cuda_param] = v
    for n in spec.launch.null_args:
        args[n] = None  # a null pointer, as the launch passes it
    grid, block, smem = spec.launch_config(sz)
    result = run_kernel(
        _parsed(spec.cuda_source_path(), *spec.preprocessor()),
        spec.kernel.name,
        grid,
        block,
        args,
        shared_bytes=smem,
        template_args=list(spec.kernel.template_args),
        options=InterpOptions(
            trace=True,
            oob="report",
            races=False,
            # (compacted, as untraced runs are: an idle lane's traced values cost as much as a
            # working lane's, a Python object each per operation)
            max_thread_statements=TRACE_STATEMENTS,
            blocks=blocks,
        ),
    )
    bad = next((f for f in result.findings if f.kind == "misaligned"), None)
    if bad is not None:
        # a vector access CUDA would fault on: these sizes break an unstated rule of the kernel
        # (`C % 8 == 0` for 16-byte loads of bf16 rows); larger multiples are tried next
        raise LiftError(f"misaligned vector access at these sizes ({bad.message})")
    outs = {
        t.name: np.asarray(result.outputs.get(t.cuda_param, args[t.cuda_param]))
        for t in spec.outputs_in_order
    }
    return Trace(sz, outs, shapes, ins, params, ints)


def blocks_to_trace(
    spec: TaskSpec, sizes: Mapping[str, int], seed: int, points: Any
) -> tuple[tuple[int, ...] | None, dict[str, np.ndarray]]:
    """The blocks that write the elements a fit reads, found by one untraced run that records
    each element's writer block, and each output's unwritten elements (flat indices). A traced
    value costs a Python object per operation; a fit reads a hundred-odd elements, so tracing
    only their blocks (a tenth of a 2-D grid, often less) is most of a lift's time saved.
    `points(shape, unwritten)`: the flat elements the fit will read.

    None (trace everything) where a subset would not show the same elements: several blocks
    combine into one element (atomics, partial sums; blocks that store the value another
    stored are one writer: every block of llm.c's naive attention backward redoes every row,
    and one block's trace shows them all) or read each other's stores, an in-place
    tensor has elements no block writes (the trace shows their input values there), or the
    subset is nearly the whole grid."""
    sz = dict(sizes)
    grid, block, smem = spec.launch_config(sz)
    n_blocks = grid[0] * grid[1] * grid[2]
    # (a launch of a few blocks is traced whole; at sizes its relations rule out, the run
    # that records writers first says whether it writes anything at all: a quarter of a tile
    # of K that a double-buffered GEMM's loop never reaches, a traced run of seconds saved)
    few = n_blocks <= 4
    if few and not spec.broken_relations(sz):
        return None, {}
    # the traced run's inputs, in the tensors' dtypes (not through run_spec_full: trace sizes
    # may set the spec's relations aside)
    args = kernel_args(spec, sz, trace_inputs(spec, sz, seed))
    options = InterpOptions(oob="report", races=False, writers=True)
    try:
        result = run_kernel(_parsed(spec.cuda_source_path(), *spec.preprocessor()),
                            spec.kernel.name, grid, block, args, shared_bytes=smem,
                            template_args=list(spec.kernel.template_args),
                            options=options)  # fmt: skip
    except (InterpError, ValueError, TypeError, ArithmeticError):
        return None, {}  # a run that fails: the traced run says why
    if few:
        _first_written(spec, result.writers, result.outputs)
        return None, {}
    # (blocks storing one value into an element count here: at such sizes they overlap)
    overlaps = [(t.cuda_param, result.overlaps.get(t.cuda_param)) for t in spec.outputs_in_order]
    shared = [p for p, o in overlaps if o is not None and o.any()]
    if (result.cross_block_reads or shared) and spec.broken_relations(sz):
        # a whole-tile kernel at sizes its relations rule out (`N % 32 == 0`): blocks run past
        # their rows into the next block's, which no size the task allows does; tracing the
        # whole launch would cost much and show nothing the task computes
        raise LiftError(
            f"at {dict(sz)}, sizes the kernel's relations ({', '.join(spec.relations)}) rule "
            "out, its blocks " + ("write the same elements of " + ", ".join(shared) if shared
                                  else "read each other's stores") + ": not traced there"
        )  # fmt: skip
    if result.cross_block_reads:
        return None, {}  # a block reads what others stored (a last block sums the partials)
    _first_written(spec, result.writers)
    chosen: set[int] = set()
    unwritten: dict[str, np.ndarray] = {}
    for t in spec.outputs_in_order:
        if not _is_float(t.dtype):
            continue
        w = result.writers.get(t.cuda_param)
        if w is None or (w == -2).any():
            return None, {}
        never = np.flatnonzero(w == -1)
        if t.role == "inout" and never.size:
            return None, {}
        if 2 * never.size > w.size:
            return None, {}  # the fit says why, from the whole trace
        unwritten[t.name] = never
        shape = spec.shape_of(t, sz)
        chosen.update(int(b) for b in w[points(shape, never)])
    if not chosen or 4 * len(chosen) > 3 * n_blocks:
        # (no float output to fit from: integer counts are fitted from the whole run; else
        # the writers' run would be most of the saving)
        return None, {}
    return tuple(sorted(chosen)), unwritten


def _first_written(
    spec: TaskSpec, writers: Mapping[str, np.ndarray],
    outputs: Mapping[str, np.ndarray] | None = None,
) -> None:  # fmt: skip
    """Raise where the first output, a float `out` tensor, has no element written (a part of
    a tile: the kernel's loop needs a whole one): the fit's own verdict, without tracing.
    With the run's `outputs`, elements written NaN count as unwritten too, as they do in the
    fit (a part of a tile that stores what it read from shared memory no step filled)."""
    t = spec.outputs_in_order[0] if spec.outputs_in_order else None
    if t is None or t.role != "out" or not _is_float(t.dtype):
        return
    w = writers.get(t.cuda_param)
    if w is None or not w.size:
        return
    gone = w == -1
    if outputs is not None and t.cuda_param in outputs:
        gone = gone | np.isnan(np.asarray(outputs[t.cuda_param], dtype=np.float64).reshape(-1))
    if bool(gone.all()):
        raise LiftError(f"{w.size} of {w.size} elements of {t.name} are never written")
