"""The main job: CUDA file in; NKI kernel, migration report and checks out.

front end → pattern classification → plan → template → (optional) numerical check against the
CUDA interpreter and Trainium constraint check in the emulator. The result is a `Migration`
(pydantic); the CLI writes `<kernel>_nki.py`, `<kernel>_migration.md` and `.json` from it.
"""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from migrator import diagnostics as diag
from migrator.check import CheckReport, check_kernel, float32_variant, with_dtype
from migrator.contract import (
    TaskSpec,
    bind_source,
    check_parameters,
    is_float,
    load_spec,
    spec_for_source,
)
from migrator.cuda.frontend import analyze_file
from migrator.cuda.ir import Kernel, TranslationUnit
from migrator.cuda.source import SourceError
from migrator.emit import has_template, render
from migrator.lift import LiftResult
from migrator.nkiexpr import Untranslatable
from migrator.patterns.registry import Classification, classify
from migrator.plan import Plan, PlanError

MIGRATION_VERSION = "1.0"
Status = Literal["complete", "partial", "failed"]


class Construct(BaseModel):
    """One CUDA construct and what became of it in NKI."""

    cuda: str
    nki: str
    line: int | None = None
    mapped: bool


class KernelMigration(BaseModel):
    kernel: str
    family: str | None
    variant: str | None
    status: Status
    reasons: list[str] = Field(default_factory=list)
    rejected: dict[str, list[str]] = Field(default_factory=dict)  # family -> why not
    constructs: list[Construct] = Field(default_factory=list)
    diagnostics: list[diag.Diagnostic] = Field(default_factory=list)
    plan: dict[str, object] | None = None
    nki_file: str | None = None
    nki_source: str | None = None
    check: CheckReport | None = None
    lifted: LiftResult | None = None  # what the kernel computes, where the lifter ran

    @property
    def coverage(self) -> tuple[int, int]:
        return sum(c.mapped for c in self.constructs), len(self.constructs)


class Migration(BaseModel):
    version: str = MIGRATION_VERSION
    source: str
    spec: str | None
    target: str
    kernels: list[KernelMigration]
    seconds: float = 0.0

    @property
    def status(self) -> Status:
        states = {k.status for k in self.kernels}
        if not states or states == {"failed"}:
            return "failed"
        return "complete" if states == {"complete"} else "partial"


def migrate(
    source: str | Path,
    *,
    kernel: str | None = None,
    spec: str | Path | None = None,
    out_dir: str | Path | None = None,
    target: str = "trn2",
    check: bool = True,
    dtype: str | None = None,
    sizes: dict[str, int] | None = None,
    nki_api: str = "legacy",
    include_dirs: list[str | Path] | None = None,
    defines: dict[str, str] | None = None,
    launch: tuple[str, str] | None = None,
) -> Migration:
    """Migrate the `__global__` kernels of a CUDA file (or one of them) to NKI. `launch`:
    (grid, block) for spec inference where the file has no usable launch site."""
    t0 = time.perf_counter()
    tu = analyze_file(source, include_dirs, defines, kernel)
    spec_path = Path(spec) if spec else spec_for_source(source)
    task = bind_source(load_spec(spec_path), source) if spec_path else None
    options = {"dtype": dtype, "sizes": sizes, "nki_api": nki_api, "launch": launch,
               "pre": (include_dirs, defines), "target": target}  # fmt: skip
    if task is not None and (include_dirs or defines):  # the oracle parses what was migrated
        kernel_ref = task.kernel.model_copy(update={
            "include_dirs": [*task.kernel.include_dirs,
                             *(str(Path(d).resolve()) for d in include_dirs or [])],
            "defines": {**task.kernel.defines, **(defines or {})},
        })  # fmt: skip
        task = task.model_copy(update={"kernel": kernel_ref})
    if not tu.global_kernels:  # a header of helpers, host code only: the user's input
        raise SourceError([diag.make("NO_GLOBAL_KERNEL", path=str(source))])
    out = Path(out_dir) if out_dir else Path(source).parent
    if kernel and kernel not in {k.name for k in tu.global_kernels}:  # the user's input
        known = ", ".join(k.name for k in tu.global_kernels)
        raise SourceError([diag.make("UNKNOWN_KERNEL", path=str(source), kernel=kernel,
                                     known=known)])  # fmt: skip
    kernels = [tu.kernel(kernel)] if kernel else tu.global_kernels
    results = [_migrate_kernel(tu, k, task, out, target, check, options) for k in kernels]
    return Migration(
        source=str(source),
        spec=str(spec_path) if spec_path else None,
        target=target,
        kernels=results,
        seconds=time.perf_counter() - t0,
    )


def _migrate_kernel(
    tu: TranslationUnit,
    k: Kernel,
    spec: TaskSpec | None,
    out: Path,
    target: str,
    check: bool,
    options: dict[str, Any],
) -> KernelMigration:
    c = classify(tu, k)
    km = KernelMigration(
        kernel=k.name,
        family=c.family,
        variant=c.winner.variant if c.winner else None,
        status="failed",
        reasons=c.winner.reasons if c.winner else [],
        rejected={v.family: v.reasons for v in c.verdicts if not v.matched},
        diagnostics=list(k.diagnostics),
        constructs=constructs_of(k, c),
    )
    nki_path = out / f"{k.name.removesuffix('_kernel')}_nki.py"
    plan: Plan | None = None
    inferred = False
    if spec is not None and spec.kernel.name != k.name:
        spec = None  # the sidecar describes another kernel of this file
    if spec is not None:  # a spec that does not fit the kernel is the user's to fix
        check_parameters(spec, k.name, [(p.name, bool(p.pointer_depth)) for p in k.params],
                         {c.name for c in tu.constants})  # fmt: skip
    if c.winner is None:
        km.diagnostics += [d for v in c.verdicts for d in v.diagnostics]
        why = "; ".join(f"{f}: {r[0]}" for f, r in km.rejected.items() if r)
        km.diagnostics.append(diag.make("NO_PATTERN", k.span, kernel=k.name, why=_clip(why)))
    else:
        inferred = spec is None
        if spec is None:
            spec = _inferred(tu, k, km, out, options.get("launch"), options.get("pre"))
        if spec is not None and options.get("dtype"):
            spec = with_dtype(spec, options["dtype"])
        if spec is not None:
            spec = _float32_variant(km, k, spec)
            try:
                plan = _plan(c, tu, k, spec)
            except PlanError as e:
                km.diagnostics.append(e.diagnostic)
    if plan is None and not (spec is None and c.winner is not None):
        # no family by spelling (or its plan failed): what does the kernel compute?
        if spec is None:
            spec = _inferred(tu, k, km, out, options.get("launch"), options.get("pre"))
            inferred = spec is not None
            if spec is not None and options.get("dtype"):
                spec = with_dtype(spec, options["dtype"])
        if spec is not None:
            spec = _float32_variant(km, k, spec)
            got = _lifted_plan(tu, k, spec, km, reshape=inferred)
            if got is None and inferred:
                got = _lifted_at_whole_trips(tu, k, spec, km)
            if got is not None:
                plan, spec = got
    if plan is None:
        km.constructs = [c.model_copy(update={"mapped": False}) for c in km.constructs]
        km.nki_source = render_skeleton(tu, k, km)
        km.status = "partial" if c.winner is not None or km.nki_source else "failed"
        out.mkdir(parents=True, exist_ok=True)
        nki_path.write_text(km.nki_source, encoding="utf-8")
        km.nki_file = str(nki_path)
        return km
    _emit(km, plan, tu, k, spec, inferred, out, nki_path, options)
    if check and spec is not None:
        _check(km, plan, k, spec, nki_path, target, options)
        if inferred and km.check is not None:
            trimmed = _runnable_sets(spec, km, k)
            if trimmed is not None:  # our own guess of sizes the original cannot run: retry
                spec = trimmed
                km.diagnostics = [
                    d for d in km.diagnostics if d.id not in ("C2N2011", "C2N2015", "C2N2017")
                ]
                if plan.fields.get("spec_toml"):
                    _emit(km, plan, tu, k, spec, inferred, out, nki_path, options)
                _check(km, plan, k, spec, nki_path, target, options)
        if km.status == "failed" and plan.fields.get("lifted"):
            # the program verified against the interpreter, but the NKI emitted from it does not
            # pass the check: no kernel is handed out as done; the skeleton names what was found
            km.diagnostics.append(diag.make(
                "NOT_LIFTED", k.span, kernel=k.name,
                why="the NKI emitted from the lifted program did not pass the check "
                    "(see the check's diagnostics)"))  # fmt: skip
            km.plan = None
            km.constructs = [c.model_copy(update={"mapped": False}) for c in km.constructs]
            km.nki_source = render_skeleton(tu, k, km)
            km.status = "partial"
            nki_path.write_text(km.nki_source, encoding="utf-8")
            return km
        if km.status == "failed" and km.lifted is None:
            # the family the matchers chose does not compute what the kernel does: try the
            # lifted program before giving up (the first check's findings go with the first
            # attempt: kept if the lifted one fails too)
            first = km.model_copy(deep=True)
            km.diagnostics = [d for d in km.diagnostics if d.id not in CHECK_FINDINGS]
            got = _lifted_plan(tu, k, spec, km, reshape=inferred)
            if got is not None:
                lifted, spec = got
                _emit(km, lifted, tu, k, spec, inferred, out, nki_path, options)
                _check(km, lifted, k, spec, nki_path, target, options)
            if km.status == "failed":  # keep the first attempt's report and kernel
                first.lifted = km.lifted
                first.diagnostics += [d for d in km.diagnostics if d.id == "C2N2014"]
                km = first
                nki_path.write_text(km.nki_source or "", encoding="utf-8")
    return km


def _lifted_at_whole_trips(
    tu: TranslationUnit, k: Kernel, spec: TaskSpec, km: KernelMigration
) -> tuple[Plan, TaskSpec] | None:
    """An inferred task whose lift failed, lifted again at sizes that are whole multiples of
    the constants the kernel divides its size arguments by (`N / 32` pieces: `N % 32 == 0`,
    a tutorial's "if N == 32"); the relations are then the task's, stated in its spec. None
    (and the first attempt's diagnostics) where there are none or the retry fails too."""
    from migrator.infer.spec import trip_count_relations, with_relations

    relations = trip_count_relations(k, spec)
    if not relations:
        return None
    try:
        whole = with_relations(spec, relations)
    except (ValueError, ArithmeticError):
        return None
    first, lifted = list(km.diagnostics), km.lifted
    km.diagnostics = [d for d in km.diagnostics if d.id not in ("C2N2006", "C2N2014")]
    got = _lifted_plan(tu, k, whole, km, reshape=True)
    if got is None:  # the first attempt's lift and diagnostics, which the report then shows
        km.diagnostics, km.lifted = first, lifted
        return None
    return got[0], _respec(got[1], k, km)


def _float32_variant(km: KernelMigration, k: Kernel, spec: TaskSpec) -> TaskSpec:
    """`check.float32_variant` of the task (a kernel in `double`: Trainium has no float64),
    compared at float32 tolerance; the diagnostic (once) says so: whether float32 suffices for
    the kernel's use is the user's call."""
    wide = [t.name for t in spec.tensors if t.dtype == "float64"]
    if not wide:
        return spec
    if not any(d.id == "C2N2019" for d in km.diagnostics):
        km.diagnostics.append(diag.make("FLOAT64", k.span, kernel=k.name,
                                        tensors=", ".join(wide)))  # fmt: skip
    return float32_variant(spec)


# what `_check` adds to a kernel's diagnostics
CHECK_FINDINGS = ("C2N2007", "C2N2008", "C2N2011", "C2N2015", "C2N2017")


def _lifted_plan(
    tu: TranslationUnit, k: Kernel, spec: TaskSpec, km: KernelMigration, reshape: bool = False
) -> tuple[Plan, TaskSpec] | None:
    """The plan from the kernel's lifted tensor program (`migrator.lift`) and the spec it
    follows, or None with a diagnostic naming what was found and why it was not emitted.

    `reshape` (an inferred spec, no user's contract to keep): where no rule fits a program over
    flat tensors, the 2-D views its index arithmetic shows are tried (verified again first)."""
    from migrator.lift import lift_task
    from migrator.lift.frozen import frozen_scalars
    from migrator.lift.lifter import verify_all
    from migrator.lift.views import view_candidates
    from migrator.patterns.lifted import plan_program

    result = lift_task(spec)
    km.lifted = result
    if not result.ok or result.program is None:
        why = (
            result.error
            or "; ".join(
                f"at {v.sizes}: {v.note or f'max error {v.max_abs_error:.3g}'}"
                for v in result.verified
                if not v.ok
            )
            or "nothing verified"
        )
        if result.program is not None and not result.error:
            why = f"`{_clip(result.program.render(), 200)}` did not verify ({why})"
        km.diagnostics.append(diag.make("NOT_LIFTED", k.span, kernel=k.name, why=_clip(why)))
        return None
    # a scalar the host derives from the sizes that the size sets never varied: what the
    # kernel computes at its other values was never seen
    tried = [*spec.all_size_sets(), *result.fitted_at, *(v.sizes for v in result.verified)]
    frozen = frozen_scalars(k, spec, tried)
    if frozen:
        km.diagnostics += [diag.make("FROZEN_SCALAR", f.loop.span if f.loop else k.span,
                                     kernel=k.name, program=_clip(result.program.render(), 200),
                                     scalar=f.scalar, expr=f.expr, value=f.value, use=f.use())
                           for f in frozen]  # fmt: skip
        return None
    # a program over flat tensors that needs a size no shape holds (`1 / C` over x[C * N]):
    # the 2-D views its indices show come first, as the NKI kernel could not read C otherwise
    views = view_candidates(result.program, spec) if reshape else []
    first_views = bool(views) and bool(_unreadable_sizes(result.program, spec))
    try:
        if first_views:
            raise PlanError(diag.make("NOT_EMITTED", k.span, what=_clip(
                f"the lifted program `{result.program.render()}` over flat tensors")))  # fmt: skip
        plan = plan_program(result.program, tu, k, spec)
    except PlanError as e:
        # each view the indices show, in order (2-D rows first, then N-D): verified, then planned
        told: PlanError | None = None
        for program, vspec in views:
            checks = verify_all(vspec, program, [v.sizes for v in result.verified], 0)
            if not checks or not all(v.ok for v in checks) or all(v.skipped for v in checks):
                continue
            try:
                plan = plan_program(program, tu, k, vspec)
            except PlanError as e2:
                told = e2
                continue
            result = result.model_copy(update={"program": program, "verified": checks})
            km.lifted = result
            spec = _respec(vspec, k, km)
            break
        else:
            km.diagnostics.append(told.diagnostic if told is not None and first_views
                                  else e.diagnostic)  # fmt: skip
            return None
    sizes = "; ".join(", ".join(f"{a}={b}" for a, b in v.sizes.items()) for v in result.verified)
    # a data-dependent read the program gathers through is emitted (indirect DMA): no gap
    tables = {x.tensor for a in result.program.assigns for x in a.expr.walk()
              if x.kind == "load" and any(m.gather is not None for m in x.index)}  # fmt: skip
    # rows written where an id says (a scatter-add): an atomic DMA, no gap either
    scattered = sorted(o["tensor"] for o in plan.fields.get("outs", []) if o["kind"] == "ids"
                       ) if plan.family == "scatter" else []  # fmt: skip
    arrays = tables | {spec.tensor_named(t).cuda_param for t in scattered}
    km.diagnostics = [d for d in km.diagnostics if d.id not in ("C2N2001", "C2N2006")
                      and not (d.id == "C2N2002" and d.args.get("array") in arrays)
                      and not (d.id == "C2N2004" and plan.family == "scan")
                      and not (d.id == "C2N2003"
                               and plan.family in ("histogram", "scatter"))]  # fmt: skip
    km.constructs += [Construct(cuda=f"data-dependent read of {t} (gather)",
                                nki="indirect DMA: index tile on the partition axis", mapped=True,
                                line=k.span.line if k.span else None)
                      for t in sorted(tables)]  # fmt: skip
    km.constructs += [Construct(cuda=f"add at data-dependent rows of {t} (scatter-add)",
                                nki="atomic read-modify-write DMA (nl.atomic_rmw), id tile on "
                                "the partition axis", mapped=True,
                                line=k.span.line if k.span else None)
                      for t in scattered]  # fmt: skip
    km.diagnostics.append(diag.make("LIFTED", k.span, kernel=k.name,
                                    program=_clip(result.program.render(), 200),
                                    sizes=_clip(sizes, 160)))  # fmt: skip
    km.family, km.variant = plan.family, plan.variant
    km.reasons = [f"computes {line}" for line in result.program.render().splitlines()]
    km.reasons += [f"from the CUDA lines: {p.render()}" for p in result.sources]
    if any(t.dtype in ("int64", "uint64") for t in spec.inputs_in_order):
        km.reasons.append("64-bit integer inputs are taken as int32 by the NKI kernel (NKI has "
                          "no 64-bit integers): the caller casts them")  # fmt: skip
    km.constructs = [c.model_copy(update={"mapped": not c.nki.endswith("no mapping")})
                     for c in km.constructs]  # fmt: skip
    return plan, spec


def _rounding_allowance(km: KernelMigration, plan: Plan, spec: TaskSpec) -> Any:
    """For a kernel emitted from its lifted program whose task has half/bf16/fp8 data: the
    check's allowance for the original's own rounding. The verified program evaluated in
    float64 is the exact result; an NKI kernel may differ from the original by twice as much
    as the original differs from it (it is then at least about as accurate)."""
    from migrator.lift.lifter import MAX_EVAL_ELEMENTS, MAX_SAMPLE, low_unit, reduce_cost
    from migrator.lift.program import evaluate

    if not plan.fields.get("lifted") or km.lifted is None or km.lifted.program is None:
        return None
    if not low_unit(spec):
        return None
    prog = km.lifted.program

    def allowance(
        sizes: dict[str, int], inputs: dict[str, Any], want: dict[str, Any]
    ) -> dict[str, Any]:
        shapes = {t.name: spec.shape_of(t, sizes) for t in spec.tensors}
        params = {s.name: float(spec.scalar_value(s, sizes)) for s in spec.scalars
                  if s.value is not None}  # fmt: skip
        arrays = {n: np.asarray(v, dtype=np.float64) if is_float(v.dtype) else v
                  for n, v in inputs.items()}  # fmt: skip
        # where the dense evaluation is too large, a sample of elements gives one allowance
        # for the whole output (the original's largest error there)
        points = {}
        rng = np.random.default_rng(0)
        for a in prog.assigns:
            total = math.prod(shapes[a.tensor])
            n = MAX_EVAL_ELEMENTS // max(1, reduce_cost(a.expr, sizes, shapes[a.tensor], a.vars))
            if total > n:
                size = max(1, min(n, MAX_SAMPLE))
                points[a.tensor] = rng.choice(total, size=size, replace=False)
        try:
            exact = evaluate(prog, arrays, shapes, sizes, params, points)
        except (ValueError, ArithmeticError):
            return {}
        out = {}
        for n, v in exact.items():
            if n not in want:
                continue
            w = np.asarray(want[n], dtype=np.float64)
            if n in points:
                err = np.abs(w.reshape(-1)[points[n]] - v)
                out[n] = np.float64(2.0 * np.nanmax(err)) if err.size else np.float64(0.0)
            else:
                # where the original overflows its precision (hexp past 65504) and the exact
                # result is finite, the NKI kernel is held to the exact result
                over = ~np.isfinite(w) & np.isfinite(v)
                out[n] = np.where(over, 0.0, 2.0 * np.abs(w - v))
                if over.any():
                    out[f"{n}@exact"] = np.where(over, v, np.nan)
        return out

    return allowance


def _unreadable_sizes(program: Any, spec: TaskSpec) -> set[str]:
    """Sizes the program uses that no tensor has as a whole dimension (the NKI kernel reads
    sizes from shapes, so it could not know them)."""
    used: set[str] = set()
    for a in program.assigns:
        for e in a.expr.walk():
            vals = [e.value, e.extent] + [x for m in e.index for t in m.terms
                                          for x in (t.coef, t.div, t.mod)]  # fmt: skip
            vals += [m.const for m in e.index]
            used |= {w for v in vals if isinstance(v, str) for w in re.findall(r"[A-Za-z_]\w*", v)}
    whole = {str(d).strip() for t in spec.tensors for d in t.shape}
    return {n for n in used if n in spec.sizes and n not in whole}


def _runnable_sets(spec: TaskSpec, km: KernelMigration, k: Kernel) -> TaskSpec | None:
    """An inferred spec without the extra size sets the CUDA original itself cannot run at (a
    vector view of a ragged buffer: the kernel assumes whole vectors), or None when it runs at
    all of them or at none (then the failure is the kernel's, and reported as such)."""
    from migrator.infer import whole_vectors

    assert km.check is not None
    bad = [s.sizes for s in km.check.sizes if s.cuda_error]
    if not bad or len(bad) == len(km.check.sizes) or spec.sizes in bad:
        return None
    why = next(s.cuda_error for s in km.check.sizes if s.cuda_error) or ""
    found = whole_vectors(spec, why, bad[0])
    if found is not None:  # rows read in misaligned vectors: sizes rounded, not dropped
        tensor, rel = found
        aligned = spec.model_copy(update={"relations": [*spec.relations, rel]})
        sets = [s for s in aligned.obeying([spec.resolve_sizes(s) for s in spec.size_sets])
                if s != spec.sizes]  # fmt: skip
        if sets and not aligned.broken_relations(spec.sizes):
            km.diagnostics.append(diag.make("SIZES_ALIGNED", k.span, tensor=tensor, relation=rel,
                                            sizes=_clip(str(bad), 160)))  # fmt: skip
            return _respec(aligned.model_copy(update={"size_sets": sets}), k, km)
    keep = [s for s in spec.size_sets if spec.resolve_sizes(s) not in bad]
    km.diagnostics.append(diag.make("SIZES_DROPPED", k.span, sizes=_clip(str(bad), 160),
                                    why=_clip(why, 200)))  # fmt: skip
    return _respec(spec.model_copy(update={"size_sets": keep}), k, km)


def _respec(spec: TaskSpec, k: Kernel, km: KernelMigration) -> TaskSpec:
    """An inferred spec whose tensors the lifted program showed to be 2-D: written out again."""
    from migrator.infer import to_toml

    if spec.path:
        Path(spec.path).write_text(to_toml(spec), encoding="utf-8")
    shapes = ", ".join(f"{t.name}[{', '.join(map(str, t.shape))}]" for t in spec.tensors)
    km.diagnostics = [d for d in km.diagnostics if d.id != "C2N2010"]
    km.diagnostics.append(diag.make("INFERRED_SPEC", k.span, path=str(spec.path), shapes=shapes))
    return spec


def _emit(
    km: KernelMigration,
    plan: Plan,
    tu: TranslationUnit,
    k: Kernel,
    spec: TaskSpec | None,
    inferred: bool,
    out: Path,
    nki_path: Path,
    options: dict[str, Any],
) -> None:
    plan.fields.setdefault("cuda_rel", os.path.relpath(tu.file, out))
    # instructions of newer generations only where the kernel is for one (range_select: trn2+)
    plan.fields["target"] = options.get("target") or "trn2"
    if inferred and spec is not None:  # the file re-checks itself wherever it is copied
        from migrator.infer import to_toml

        plan.fields["spec_toml"] = to_toml(spec)
    km.plan = plan.model_dump(mode="json", exclude={"diagnostics"})
    api = options.get("nki_api") or "legacy"
    if api == "new" and not has_template(plan.family, "new", plan.variant):
        km.diagnostics.append(diag.make("LEGACY_DIALECT", k.span, family=plan.family))
        api = "legacy"
    km.nki_source = render(plan, api=api)
    # the dialect asked for is part of the job: a legacy fallback is a partial migration
    km.status = "complete" if api == (options.get("nki_api") or "legacy") else "partial"
    out.mkdir(parents=True, exist_ok=True)
    nki_path.write_text(km.nki_source, encoding="utf-8")
    km.nki_file = str(nki_path)


def _check(
    km: KernelMigration,
    plan: Plan,
    k: Kernel,
    spec: TaskSpec,
    nki_path: Path,
    target: str,
    options: dict[str, Any],
) -> None:
    extra = [spec.resolve_sizes(options["sizes"])] if options.get("sizes") else []
    try:
        km.check = check_kernel(
            nki_path, spec, plan.nki_name, size_sets=spec.all_size_sets() + extra, target=target,
            allowance=_rounding_allowance(km, plan, spec),
        )  # fmt: skip
    except Exception as e:  # the emitted kernel broke a rule outside the per-size checks
        km.status = "failed"
        km.diagnostics.append(diag.make("CONSTRAINT_VIOLATION", k.span, detail=str(e)[:300]))
        return
    for s in km.check.sizes:
        if s.cuda_notes:
            km.diagnostics.append(diag.make("ORIGINAL_OVER_READS", k.span, sizes=str(s.sizes),
                                            detail=s.cuda_notes[0]))  # fmt: skip
        for o in s.outputs:
            if o.unwritten:
                km.diagnostics.append(diag.make("UNWRITTEN_BY_ORIGINAL", k.span, count=o.unwritten,
                                                tensor=o.name, sizes=str(s.sizes)))  # fmt: skip
    cuda_errors = [s.cuda_error for s in km.check.sizes if s.cuda_error]
    if cuda_errors:  # the input kernel itself does not run: report it, do not blame emission
        km.status = "partial"
        km.diagnostics.append(diag.make("CUDA_RUN_FAILED", k.span, detail=cuda_errors[0][:300]))
    elif not km.check.ok:
        km.status = "failed"
        for s in km.check.sizes:
            if s.error and "Constraint" in s.error:
                km.diagnostics.append(
                    diag.make("CONSTRAINT_VIOLATION", k.span, detail=s.error[:300])
                )
            elif not s.ok:
                bad = [o.name for o in s.outputs if not o.ok]
                km.diagnostics.append(
                    diag.make(
                        "NUMERIC_MISMATCH",
                        k.span,
                        sizes=str(s.sizes),
                        detail=s.error or f"outputs {', '.join(bad)}",
                    )
                )


def _inferred(
    tu: TranslationUnit,
    k: Kernel,
    km: KernelMigration,
    out: Path,
    launch: tuple[str, str] | None = None,
    pre: tuple[Any, Any] | None = None,
) -> TaskSpec | None:
    """No sidecar: infer the task from the kernel and its launch site, and write it out."""
    from migrator.infer import InferenceError, infer_spec, to_toml

    try:
        spec = infer_spec(tu, k, launch, *(pre or (None, None)))
    except InferenceError as e:
        km.diagnostics.append(diag.make("NO_SPEC", k.span, path=tu.file, why=str(e)))
        return None
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{k.name.removesuffix('_kernel')}.inferred.toml"
    source = os.path.relpath(tu.file, out)  # the sidecar names its .cu relative to itself
    spec = spec.model_copy(
        update={"path": str(path), "kernel": spec.kernel.model_copy(update={"source": source})}
    )
    path.write_text(to_toml(spec), encoding="utf-8")
    shapes = ", ".join(f"{t.name}[{', '.join(map(str, t.shape))}]" for t in spec.tensors)
    km.diagnostics.append(diag.make("INFERRED_SPEC", k.span, path=str(path), shapes=shapes))
    return spec


def _plan(c: Classification, tu: TranslationUnit, k: Kernel, spec: TaskSpec) -> Plan | None:
    from migrator.patterns.registry import planner_for

    planner = planner_for(c.winner.family)  # type: ignore[union-attr]
    if planner is None:
        raise PlanError(
            diag.make("NOT_EMITTED", k.span, what=f"the {c.family} family's NKI template")
        )
    try:
        return planner(c.winner, tu, k, spec)
    except Untranslatable as e:
        raise PlanError(diag.make("NOT_EMITTED", k.span, what=str(e))) from e


def constructs_of(k: Kernel, c: Classification) -> list[Construct]:
    """CUDA constructs found in the kernel and the NKI construct each maps to."""
    matched = c.winner is not None
    out: list[Construct] = []
    for p in k.params:
        if p.pointer_depth:
            out.append(
                Construct(
                    cuda=f"pointer parameter {p.name} ({p.role})",
                    nki=f"HBM tensor argument ({'returned' if p.role != 'in' else 'input'})",
                    line=p.span.line,
                    mapped=matched,
                )
            )
    for v in k.index_vars[:4]:
        out.append(
            Construct(
                cuda=f"index {v.name} = {v.expr.canonical}",
                nki="tile index (partition x free) from nl.arange",
                line=v.span.line,
                mapped=matched,
            )
        )
    for lp in k.loops:
        nki = {
            "grid_stride": "affine_range over tiles",
            "block_stride": "free axis of the tile",
            "halving": "single free-axis reduction instruction",
            "counted": "affine_range / unrolled taps",
        }.get(lp.kind, "sequential_range")
        out.append(
            Construct(
                cuda=f"{lp.kind} loop" + (f" over {lp.var}" if lp.var else ""),
                nki=nki,
                line=lp.span.line,
                mapped=matched,
            )
        )
    for g in k.guards:
        out.append(
            Construct(
                cuda=f"guard if ({g.condition})",
                nki="tile mask" if g.kind == "bounds" else "whole-tile operation",
                line=g.span.line,
                mapped=matched,
            )
        )
    for s in k.shared:
        out.append(
            Construct(
                cuda=f"__shared__ {s.elem_type} {s.name}",
                nki="SBUF tile",
                line=s.span.line,
                mapped=matched,
            )
        )
    for b in k.barriers:
        out.append(
            Construct(
                cuda=b.kind, nki="none needed (program order)", line=b.span.line, mapped=matched
            )
        )
    for r in k.reductions:
        out.append(
            Construct(
                cuda=f"{r.style} {r.op} reduction of {r.target}",
                nki="nl.matmul PSUM accumulation"
                if c.family == "matmul"
                else f"nl.{r.op} along the free axis",
                line=r.span.line,
                mapped=matched,
            )
        )
    # (sorted: a set's order follows the string hash, which differs from run to run)
    for call in sorted({(x.name, x.kind) for x in k.calls if x.kind in ("math", "warp", "atomic")}):
        out.append(
            Construct(cuda=f"{call[1]} {call[0]}()", nki="nl math / reductions", mapped=matched)
        )
    for d in k.diagnostics:
        if d.severity in ("warning", "error"):
            out.append(
                Construct(
                    cuda=d.message,
                    nki=f"{d.id}: no mapping",
                    line=d.span.line if d.span else None,
                    mapped=False,
                )
            )
    return out


def render_skeleton(tu: TranslationUnit, k: Kernel, km: KernelMigration) -> str:
    """Valid Python with the kernel's signature, the diagnostics at their place, no guesses."""
    from migrator.emit import environment, tidy

    lines = []
    try:
        src = Path(tu.file).read_text(encoding="utf-8").splitlines()
        body = src[k.span.line - 1 : (k.span.end_line or k.span.line)]
    except OSError:
        body = []
    return tidy(
        environment()
        .get_template("skeleton.py.j2")
        .render(
            kernel=k,
            km=km,
            cuda_file=Path(tu.file).name,
            cuda_lines=body,
            nki_name=k.name.removesuffix("_kernel"),
            lines=lines,
        )
    )


def _clip(text: str, limit: int = 300) -> str:
    """`text` within `limit` characters, cut at a word boundary with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(",;:") + "…"
