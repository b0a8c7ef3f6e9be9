"""Checking an NKI kernel against the CUDA original: same inputs, both executors, compare.

The CUDA interpreter runs the original under the task contract; the NKI emulator runs the
candidate (generated or hand-written) with Trainium's constraints enforced. Used by `migrate`
(the numerical check in the migration report) and by the `__main__` block of every emitted
kernel file.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, Field

from migrator.contract import (
    SpecError,
    TaskSpec,
    bind_source,
    load_spec,
    make_inputs,
    nki_args,
    np_dtype,
    spec_for_source,
)

if TYPE_CHECKING:
    from migrator.nki.cost import Profile

# Default closeness per output dtype (|got - want| <= atol * max(1, max|want|) + rtol * |want|):
# fp32 differences
# come from accumulation order (tree vs sequential reductions, PSUM matmul order), so the
# tolerance is a few hundred ulp relative; low-precision outputs are compared in their dtype.
TOLERANCE = {
    "float32": (1e-4, 1e-5),
    "float16": (2e-3, 1e-3),
    "bfloat16": (2e-2, 1e-2),
    "float8_e4m3": (1.3e-1, 6e-2),
    "float8_e5m2": (2.6e-1, 1.3e-1),
}


class OutputCheck(BaseModel):
    name: str
    max_abs: float
    max_rel: float
    mismatches: int
    elements: int
    ok: bool
    # elements the CUDA original never writes at these sizes (its launch does not cover them):
    # it defines no value there, so they are not compared, and the report says how many
    unwritten: int = 0
    # the largest extra allowance for the original's own low-precision rounding (0: none)
    allowance: float = 0.0
    # elements where the low-precision original overflows (inf/NaN) while the exact result is
    # finite: compared with the exact result instead of the original's
    overflowed: int = 0


class SizeCheck(BaseModel):
    sizes: dict[str, int]
    outputs: list[OutputCheck] = Field(default_factory=list)
    error: str | None = None  # constraint violation or crash in the NKI kernel
    cuda_error: str | None = None  # the CUDA original could not be run (a problem of the input)
    # what the original did that a GPU leaves undefined but that did not change its outputs
    # (an over-read of a shared array whose values are dropped)
    cuda_notes: list[str] = Field(default_factory=list)
    ok: bool = False
    nki_seconds: float = 0.0
    cuda_seconds: float = 0.0


class CheckReport(BaseModel):
    kernel: str
    nki_file: str
    sizes: list[SizeCheck]
    ok: bool
    estimate_us: float | None = None
    bottleneck: str | None = None
    profile: dict[str, Any] | None = None


LOW_PRECISION = ("bfloat16", "float16", "float8_e4m3", "float8_e5m2")


def with_dtype(spec: TaskSpec, dtype: str, of: str = "float32") -> TaskSpec:
    """The task with its `of` tensors in `dtype` (the `--dtype` policy: bf16 data, fp32
    accumulation on the engines and in PSUM)."""
    tensors = [t.model_copy(update={"dtype": dtype}) if t.dtype == of else t
               for t in spec.tensors]  # fmt: skip
    return spec.model_copy(update={"tensors": tensors})


def float32_variant(spec: TaskSpec) -> TaskSpec:
    """The task with its float64 tensors in float32: Trainium has no float64, so an NKI kernel
    for a kernel in `double` is its float32 variant. The original is given the same values,
    widened exactly (the interpreter widens a float32 tensor for a `double*` parameter), and
    its float64 results are rounded to float32 to compare."""
    if not any(t.dtype == "float64" for t in spec.tensors):
        return spec
    return with_dtype(spec, "float32", of="float64")


def cuda_view(spec: TaskSpec) -> TaskSpec:
    """The task as the CUDA kernel sees it: a low-precision tensor stays low precision where
    the kernel's own parameter is `__half*`/`__nv_bfloat16*`; elsewhere it is a dtype variant
    of a float32 kernel, which is given the data widened to float32."""
    native = _native_16bit(spec)
    tensors = [t.model_copy(update={"dtype": "float32"})
               if t.dtype in LOW_PRECISION and native.get(t.cuda_param) != t.dtype else t
               for t in spec.tensors]  # fmt: skip
    return spec.model_copy(update={"tensors": tensors})


def _native_16bit(spec: TaskSpec) -> dict[str, str]:
    """CUDA pointer parameters declared with a 16-bit float type: name -> task dtype."""
    if not spec.path:
        return {}
    path = spec.cuda_source_path()
    targs = tuple(str(a) for a in spec.kernel.template_args)
    dirs, defines = spec.preprocessor()
    pre = (tuple(str(d) for d in dirs), tuple(sorted(defines.items())))
    try:
        found = _params_16bit(str(path), path.stat().st_mtime_ns, spec.kernel.name, targs, pre)
    except OSError:
        return {}
    return {**_signature_16bit(spec), **found}


def _signature_16bit(spec: TaskSpec) -> dict[str, str]:
    """The same as the interpreter resolves the parameters (typedefs such as llm.c's `floatX`,
    chosen by a macro in a header, as the spec's preprocessor settings choose it)."""
    from migrator.cuda.interp.findings import InterpError
    from migrator.cuda.interp.runner import kernel_signature
    from migrator.cuda.interp.spec_run import _parsed
    from migrator.cuda.source import SourceError

    try:
        parsed = _parsed(spec.cuda_source_path(), *spec.preprocessor())
        sig = kernel_signature(parsed, spec.kernel.name, list(spec.kernel.template_args))
    except (InterpError, SourceError, OSError, KeyError, ValueError):
        return {}
    out = {}
    for name, t in sig:
        e = t.elem if t.kind == "ptr" else None
        if e is not None and e.kind == "float" and e.dtype is not None and e.dtype.itemsize == 2:
            out[name] = "bfloat16" if "bfloat16" in str(e.dtype) else "float16"
    return out


@functools.lru_cache(maxsize=64)
def _params_16bit(
    path: str,
    _mtime: int,
    kernel: str,
    targs: tuple[str, ...],
    pre: tuple[tuple[str, ...], tuple[tuple[str, str], ...]],
) -> dict[str, str]:
    from migrator.cuda.frontend import analyze_file
    from migrator.cuda.source import SourceError
    from migrator.infer import DTYPES

    try:  # (read as the spec says, with its -I and -D: the preprocessed file is then reused)
        k = analyze_file(path, list(pre[0]), dict(pre[1]), kernel).kernel(kernel)
    except (SourceError, KeyError, ValueError):
        return {}
    # `template <typename T> ... const T* x` instantiated as T = __nv_bfloat16
    types = {t.name: a for t, a in zip(k.template_params, targs, strict=False) if t.kind == "type"}
    out = {}
    for p in k.params:
        base = types.get(p.base_type, p.base_type)
        if p.pointer_depth and DTYPES.get(base) in LOW_PRECISION:  # __half, __nv_bfloat16 ...
            out[p.name] = DTYPES[base]
    return out


def _tolerance(spec: TaskSpec, dtype: str) -> tuple[float, float]:
    rtol, atol = TOLERANCE.get(dtype, (1e-4, 1e-5))
    if spec.tolerance is not None:
        rtol = spec.tolerance.rtol if spec.tolerance.rtol is not None else rtol
        atol = spec.tolerance.atol if spec.tolerance.atol is not None else atol
    return rtol, atol


def compare(
    name: str,
    got: np.ndarray,
    want: np.ndarray,
    rtol: float,
    atol: float,
    unwritten: np.ndarray | None = None,
    allowance: np.ndarray | None = None,
) -> OutputCheck:
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    skipped = 0
    if unwritten is not None and g.shape == w.shape and unwritten.shape == w.shape:
        skipped = int(unwritten.sum())
        w = np.where(unwritten, g, w)
    if g.shape != w.shape:
        return OutputCheck(
            name=name,
            max_abs=float("inf"),
            max_rel=float("inf"),
            mismatches=int(w.size),
            elements=int(w.size),
            ok=False,
        )
    # atol scales with the output's magnitude: sums that cancel to near zero carry the rounding
    # error of their largest terms, so a fixed absolute floor would flag correct reorderings
    finite = np.abs(w[np.isfinite(w)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    with np.errstate(invalid="ignore"):  # inf - inf and NaN: decided by equality / NaN below
        diff = np.abs(g - w)
        extra = 0.0 if allowance is None else np.nan_to_num(allowance, nan=0.0, posinf=0.0)
        close = np.isfinite(w) & (diff <= atol * scale + rtol * np.abs(w) + extra)
        # NaN where the CUDA original has NaN (sqrt of a negative, 0/0) and equal infinities agree
        bad = ~(close | (g == w) | (np.isnan(g) & np.isnan(w)))
        rel = diff / np.maximum(np.abs(w), np.finfo(np.float32).tiny)
    return OutputCheck(
        name=name,
        max_abs=float(np.nanmax(diff)) if diff.size and not np.isnan(diff).all() else 0.0,
        max_rel=float(np.nanmax(rel)) if rel.size and not np.isnan(rel).all() else 0.0,
        mismatches=int(bad.sum()),
        elements=int(w.size),
        ok=not bool(bad.any()),
        unwritten=skipped,
        allowance=float(np.max(extra)) if np.size(extra) else 0.0,
    )


def check_kernel(
    nki_file: str | Path,
    spec: TaskSpec,
    nki_name: str | None = None,
    size_sets: list[dict[str, int]] | None = None,
    seed: int = 0,
    target: str = "trn2",
    profile: bool = True,
    allowance: Callable[..., dict[str, np.ndarray]] | None = None,
) -> CheckReport:
    """Run the NKI kernel and the CUDA original on the same inputs at each size set.

    `allowance(sizes, inputs, want)`: per output, an extra absolute tolerance per element for
    an original that computes in low precision (from how far its outputs `want` are from the
    exact result); None: the dtype tolerances alone."""
    import migrator.nki as mn
    from migrator.cuda.interp.spec_run import RUN_MEMO
    from migrator.workers import map_jobs

    module = mn.load_kernel_module(nki_file)
    name = nki_name or spec.kernel.name.removesuffix("_kernel")
    kernel = getattr(module, name)
    # a kernel with emulator options of its own is checked under them, profiled under `target`
    one_run = profile and getattr(kernel, "options", None) is None
    sets = [dict(s) for s in (size_sets or spec.all_size_sets())]

    def at(k: int) -> tuple[SizeCheck, Profile | None]:
        # the default sizes are also the profile's: one emulator run gives both
        profiled = one_run and k == 0 and sets[0] == dict(spec.sizes)
        return _check_at(spec, kernel, sets[k], seed, target, profiled, allowance)

    # (each size set on its own: on both cores, the original's runs into spec_run's memo)
    done = map_jobs(at, range(len(sets)), [RUN_MEMO], [spec.work(s) for s in sets])
    results = [r for r, _ in done]
    prof = done[0][1] if done else None
    report = CheckReport(
        kernel=name, nki_file=str(nki_file), sizes=results, ok=all(r.ok for r in results)
    )
    if profile and results and results[0].error is None:
        if prof is None:
            ins = make_inputs(spec, spec.sizes, seed)
            args = nki_args(spec, ins)
            kwargs = spec.nki_kwargs()
            prof = mn.profile(kernel, *args, options=mn.EmulatorOptions(target=target), **kwargs)
        report.estimate_us = prof.estimated_latency_us
        report.bottleneck = prof.bottleneck
        report.profile = prof.model_dump(mode="json")
    return report


def _check_at(
    spec: TaskSpec,
    kernel: Any,
    sizes: dict[str, int],
    seed: int,
    target: str,
    profiled: bool,
    allowance: Callable[..., dict[str, np.ndarray]] | None,
) -> tuple[SizeCheck, Profile | None]:
    """The NKI kernel and the CUDA original at one size set, compared; the profile of the
    emulator's run where `profiled`."""
    import migrator.nki as mn
    from migrator.cuda.interp.findings import InterpError
    from migrator.cuda.interp.spec_run import run_spec_full, unwritten_elements
    from migrator.nki.cost import summarize

    prof: Profile | None = None
    res = SizeCheck(sizes=dict(sizes))
    ins = make_inputs(spec, sizes, seed)
    t0 = time.perf_counter()
    # the CUDA original computes on float32: low-precision task inputs are given to it
    # widened, and its outputs are rounded to the task's dtype before comparing
    cuda_spec = cuda_view(spec)
    pairs = zip(spec.inputs_in_order, cuda_spec.inputs_in_order, strict=True)
    cuda_ins = {t.name: ins[t.name].astype(np_dtype(c.dtype)) for t, c in pairs}
    try:
        full = run_spec_full(cuda_spec, sizes, seed=seed, inputs=cuda_ins)
        want = full.outputs
        res.cuda_notes = [f.message for f in full.result.findings
                          if f.kind == "out_of_bounds"]  # fmt: skip
        unwritten = unwritten_elements(cuda_spec, sizes, seed, want, cuda_ins,
                                       full.result.stored)  # fmt: skip
    except InterpError as e:  # the original does not run: nothing to compare against
        res.cuda_error = str(e)
        return res, None
    want = [w.astype(np_dtype(t.dtype)) for w, t in zip(want, spec.outputs_in_order,
                                                        strict=False)]  # fmt: skip
    res.cuda_seconds = time.perf_counter() - t0
    try:
        args = nki_args(spec, ins)
    except ValueError as e:
        res.error = str(e)
        return res, None
    kwargs = spec.nki_kwargs(sizes)
    t0 = time.perf_counter()
    try:
        if profiled:
            got, run = mn.run_kernel(
                kernel, *args, options=mn.EmulatorOptions(target=target), **kwargs
            )
            prof = summarize(run)
        else:
            got = kernel(*args, **kwargs)
    except (mn.NkiConstraintError, mn.NkiKernelError, mn.NkiUnsupportedError) as e:
        res.error = f"{type(e).__name__}: {e}"
        return res, None
    res.nki_seconds = time.perf_counter() - t0
    outs = list(got) if isinstance(got, tuple | list) else [got]
    named = {t.name: w for t, w in zip(spec.outputs_in_order, want, strict=False)}
    extra = allowance(dict(sizes), ins, named) if allowance is not None else {}
    for t, g, w, u in zip(spec.outputs_in_order, outs, want, unwritten, strict=False):
        rtol, atol = _tolerance(spec, t.dtype)
        a = extra.get(t.name)
        a = a if a is not None and np.ndim(a) in (0, np.ndim(w)) else None
        a = a if a is None or np.ndim(a) == 0 or np.shape(a) == np.shape(w) else None
        exact = extra.get(f"{t.name}@exact")  # finite exact values where the original is not
        over = 0
        if exact is not None and np.shape(exact) == np.shape(w):
            hit = ~np.isnan(exact)
            over = int(hit.sum())
            w = w.copy()
            w[hit] = exact[hit]  # rounded to the output's dtype
            if a is not None and np.ndim(a):
                a = np.where(hit, 0.0, a)
        out = compare(t.name, g, w, rtol, atol, u, a)
        res.outputs.append(out.model_copy(update={"overflowed": over}) if over else out)
    if len(outs) != len(spec.outputs_in_order):
        res.error = (
            f"returned {len(outs)} output(s), the contract expects {len(spec.outputs_in_order)}"
        )
    res.ok = res.error is None and all(o.ok for o in res.outputs)
    return res, prof


def output_notes(o: OutputCheck) -> list[str]:
    """What a comparison left out or allowed, in words (the text and markdown reports)."""
    notes = []
    if o.unwritten:
        notes.append(f"{o.unwritten} the CUDA original never writes: not compared")
    if o.allowance:
        notes.append(f"up to {o.allowance:.3g} allowed for the original's low-precision rounding")
    if o.overflowed:
        notes.append(f"{o.overflowed} where the original overflows its precision: compared "
                     "with the exact result")  # fmt: skip
    return notes


def render_text(r: CheckReport) -> str:
    lines = [f"{r.kernel} ({r.nki_file}): {'PASS' if r.ok else 'FAIL'}"]
    for s in r.sizes:
        sizes = ", ".join(f"{k}={v}" for k, v in s.sizes.items())
        if s.error:
            lines.append(f"  [{sizes}] error: {s.error}")
            continue
        for o in s.outputs:
            lines.append(
                f"  [{sizes}] {o.name}: {'ok' if o.ok else 'MISMATCH'} max abs "
                f"{o.max_abs:.3g}, max rel {o.max_rel:.3g}, {o.mismatches}/{o.elements}"
                " beyond tolerance" + "".join(f" ({n})" for n in output_notes(o))
            )
    if r.estimate_us is not None:
        lines.append(
            f"  estimated {r.estimate_us:.2f} us on the default sizes (bottleneck {r.bottleneck})"
        )
    return "\n".join(lines)


def main(
    nki_file: str, cuda: str, kernel: str, argv: list[str] | None = None, spec: str | None = None
) -> int:
    """Entry point of an emitted kernel's `__main__` block: check it against its CUDA source.
    `cuda`: the source relative to the file (or `--cuda PATH`); `spec`: the inferred spec's
    text, which the file carries when the .cu has no sidecar (a sidecar wins)."""
    ap = argparse.ArgumentParser(description=f"Check {Path(nki_file).name} against {cuda}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cuda", help=f"the CUDA original (default: {cuda}, next to this file)")
    args = ap.parse_args(argv)
    base = Path(nki_file).resolve().parent
    cuda_path = Path(args.cuda).resolve() if args.cuda else (base / cuda).resolve()
    if not cuda_path.is_file():
        print(f"the CUDA original {cuda_path} is not there (this file was moved?): pass "
              f"--cuda PATH/{Path(cuda).name}")  # fmt: skip
        return 2
    spec_path = spec_for_source(cuda_path)
    inferred = Path(nki_file).with_name(f"{kernel.removesuffix('_kernel')}.inferred.toml")
    text = None
    if spec_path is None and inferred.is_file():
        spec_path = inferred  # written by `migrate` when the .cu had no sidecar
    elif spec_path is None and spec is not None:
        spec_path, text = inferred, spec  # carried by the file itself
    if spec_path is None:
        print(f"no spec sidecar next to {cuda_path}; cannot build inputs (see the README)")
        return 2
    try:
        task = bind_source(load_spec(spec_path, text), cuda_path)
    except SpecError as e:
        print(f"error: {e}")
        return 2
    if task.kernel.name != kernel:
        print(f"{spec_path} describes {task.kernel.name}, not {kernel}")
        return 2
    report = check_kernel(nki_file, float32_variant(task), seed=args.seed)
    print(render_text(report))
    return 0 if report.ok else 1
