"""`score()`: grade an NKI migration of a CUDA kernel end to end.

plan trials -> CUDA oracle and float64 truth per trial (in this process) -> the candidate in the
sandbox (all trials, one child process) -> numerics policy per output -> anti-gaming, fidelity
and performance findings -> rubric -> `FidelityReport`. Deterministic for a given seed except
the `timing` fields.
"""

from __future__ import annotations

import dataclasses
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from migrator.contract import (
    SpecError,
    TaskSpec,
    bind_source,
    check_parameters,
    load_spec,
    nki_args,
    np_dtype,
    spec_for_source,
)
from migrator.score import defences, fidelity, performance
from migrator.score.models import (
    FidelityReport,
    Finding,
    Numerics,
    OutputMetrics,
    Sandbox,
    Timing,
    Trial,
)
from migrator.score.numerics import compare, error_ratio, policy_table, ulp_histogram
from migrator.score.protocol import (
    DISTRIBUTIONS,
    Oracle,
    TrialPlan,
    make_trial_inputs,
    plan_trials,
    run_low_precision_oracle,
    run_oracle,
)
from migrator.score.rubric import grade
from migrator.score.sandbox import Limits, TrialJob, network_isolation, run_candidate

LOW_DTYPES = ("bfloat16", "float16", "float8_e4m3", "float8_e5m2")
STATUS_RULE = {
    "constraint": "C2N4005",
    "unsupported": "C2N4006",
    "crash": "C2N4001",
    "memory": "C2N4003",
    "host_compute": "C2N4020",
}


class ScoreInputError(ValueError):
    """The inputs of the scorer itself are unusable (no spec, missing file, wrong kernel)."""


def resolve_task(cuda_path: str | Path, kernel: str | None, spec: str | Path | None) -> TaskSpec:
    from migrator.cuda.frontend import analyze_file
    from migrator.cuda.source import SourceError

    cuda_path = Path(cuda_path)
    if not cuda_path.is_file():
        raise ScoreInputError(f"{cuda_path}: CUDA file not found")
    spec_path = Path(spec) if spec else spec_for_source(cuda_path)
    tu = None  # the front end's result, once
    if spec_path is None:  # no sidecar: the task `migrate` infers for this file
        from migrator.infer import InferenceError, infer_for_file

        try:
            tu = analyze_file(cuda_path)
            task = infer_for_file(cuda_path, kernel, tu)
        except InferenceError as e:
            raise ScoreInputError(
                f"no spec sidecar next to {cuda_path}, and none could be inferred: {e}; pass --spec"
            ) from e
        except SourceError as e:
            raise ScoreInputError(str(e)) from e
        spec_path = Path(task.path or cuda_path.with_suffix(".inferred.toml"))
    else:
        try:
            task = bind_source(load_spec(spec_path), cuda_path)
        except SpecError as e:
            raise ScoreInputError(str(e)) from e
    if kernel and task.kernel.name != kernel:
        raise ScoreInputError(f"{spec_path} describes {task.kernel.name}, not {kernel}")
    try:  # the spec must describe the kernel it names, parameter by parameter
        tu = tu if tu is not None else analyze_file(cuda_path, *task.preprocessor())
        k = tu.kernel(task.kernel.name)
        check_parameters(task, k.name, [(p.name, bool(p.pointer_depth)) for p in k.params],
                         {c.name for c in tu.constants})  # fmt: skip
    except (SpecError, SourceError) as e:
        raise ScoreInputError(str(e)) from e
    except KeyError as e:
        raise ScoreInputError(f"{spec_path} names kernel {task.kernel.name}, which "
                              f"{cuda_path} does not define") from e  # fmt: skip
    return task


def score(
    cuda_path: str | Path,
    candidate_path: str | Path,
    kernel: str | None = None,
    spec: str | Path | None = None,
    seed: int = 0,
    *,
    seeds: int = 5,
    hidden: bool = True,
    distributions: tuple[str, ...] = DISTRIBUTIONS,
    reference: str | Path | None = "generated",
    nki_name: str | None = None,
    limits: Limits | None = None,
    target: str = "trn2",
    migration: Any = None,
    oracle_cache: str | Path | None = None,
) -> FidelityReport:
    """Score `candidate_path` (an NKI kernel file) as a migration of `cuda_path`'s kernel.

    reference: "generated" (the migrator's own kernel), a path to a reference NKI file, or
    None (performance judged against the roofline only). nki_name: the kernel's name in the
    candidate (default: the CUDA kernel's name without ``_kernel``). migration: the migrator's
    result for this kernel (a `KernelMigration` whose `nki_file` still exists) when the caller
    already has it, instead of migrating again. oracle_cache: a directory where the CUDA
    oracle's results are kept per task and trial (`migrate score` uses one by default), so
    that further candidates of the same task do not run the CUDA original again."""
    t_start = time.perf_counter()
    task = resolve_task(cuda_path, kernel, spec)
    candidate = Path(candidate_path)
    if not candidate.is_file():
        raise ScoreInputError(f"{candidate}: candidate file not found")
    name = nki_name or task.kernel.name.removesuffix("_kernel")
    timing = Timing()

    plans = plan_trials(task, seed=seed, seeds=seeds, hidden=hidden, distributions=distributions)
    t0 = time.perf_counter()
    oracles = _oracles(task, plans, oracle_cache)
    timing.oracle_s = time.perf_counter() - t0

    runnable = [i for i, o in enumerate(oracles) if o.error is None]
    jobs = [
        TrialJob(
            i,
            nki_args(task, oracles[i].inputs),
            task.nki_kwargs(plans[i].sizes),
            profile=(i == runnable[0]),
        )
        for i in runnable
    ]
    # the reference first: its run time bounds the candidate's (an endless loop stops at a
    # limit derived from it, not at the default two minutes)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="c2n_ref_") as tmp:
        km = migration if migration is not None else _migration(task, cuda_path, target, tmp)
        if reference == "generated":  # our own emitted kernel: trusted, profiled in-process
            ref_file = km.nki_file if km is not None and km.status == "complete" else None
            label = "generated"
            t_ref = time.perf_counter()
            ref, ref_lines = _reference_profile(task, ref_file, oracles, runnable, target, plans)
            if limits is None and ref is not None:
                limits = _limits_from_reference(time.perf_counter() - t_ref, len(jobs))
        else:  # a file the user gave runs like a submission: sandboxed, with the same limits
            label = str(reference) if reference else None
            ref, ref_lines = _sandboxed_reference(task, reference, jobs, limits, target)
    timing.reference_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    box = run_candidate(candidate, name, jobs, limits=limits, target=target) if jobs else None
    timing.candidate_s = time.perf_counter() - t0

    findings = defences.scan_source(candidate, task, name)
    findings += _sandbox_findings(box)
    by_index = {int(t["index"]): t for t in (box.trials if box else [])}
    trials = [
        _grade_trial(task, p, o, by_index.get(p.index), box, findings)
        for p, o in zip(plans, oracles, strict=True)
    ]
    if box is not None:
        findings += defences.runtime_findings(box.trials, box.patched, task)
        findings += _constant_outputs(task, plans, oracles, box)
    findings += fidelity.failure_pattern_findings(trials)
    if box is not None:
        findings += _construct_findings(task, cuda_path, box)
    _three_way(task, plans, oracles, trials, box)
    numerics = _numerics_summary(task, trials, findings)

    prof, lines = _candidate_profile(box)
    ref_name = label if ref is not None else None
    if km is not None:
        fidelity.attach_cuda_locations(findings, task, str(cuda_path), km.constructs)
    perf = performance.summarize_performance(prof, ref, ref_name)
    min_bytes = sum(a.nbytes for a in oracles[runnable[0]].inputs.values()) if runnable else 0
    min_bytes += sum(a.nbytes for a in oracles[runnable[0]].cuda) if runnable else 0
    if runnable and trials[runnable[0]].status == "ok":  # judge the speed of correct code only
        findings += performance.performance_findings(prof, lines, ref, ref_lines, min_bytes)

    cats, total, gate, verdict = grade(trials, findings, perf)
    timing.total_s = time.perf_counter() - t_start
    prefix = network_isolation()
    report = FidelityReport(
        kernel=task.kernel.name,
        cuda_file=str(cuda_path),
        candidate_file=str(candidate),
        spec_file=task.path,
        seed=seed,
        verdict=verdict,
        score=total,
        gate_passed=gate,
        summary=_summary(verdict, total, trials, findings),
        categories=cats,
        findings=findings,
        numerics=numerics,
        trials=trials,
        performance=perf,
        sandbox=Sandbox(
            network_isolated=bool(prefix),
            isolation=box.isolation if box else [],
            limits={k: float(v) for k, v in vars(limits or Limits()).items()},
        ),
        timing=timing,
    )
    return report


def _sandbox_findings(box: Any) -> list[Finding]:
    if box is None:
        return []
    out = []
    if box.status == "timeout":
        out.append(Finding.of("C2N4002", box.detail))
    elif box.status in ("cpu_limit", "memory_limit"):
        out.append(Finding.of("C2N4003", box.detail))
    elif box.status != "ok":
        out.append(Finding.of("C2N4001", box.detail))
    if box.load_error:
        loc = box.load_error.split(": ", 1)[0] if ".py:" in box.load_error else None
        out.append(Finding.of("C2N4004", box.load_error, nki_location=loc))
    return out


def _grade_trial(
    task: TaskSpec,
    plan: TrialPlan,
    oracle: Oracle,
    result: dict[str, Any] | None,
    box: Any,
    findings: list[Finding],
) -> Trial:
    trial = Trial(
        index=plan.index,
        seed=plan.seed,
        distribution=plan.distribution,
        sizes=plan.sizes,
        hidden=plan.hidden,
        ragged=plan.ragged,
        status="failed",
    )
    if oracle.error is not None:
        trial.status, trial.detail = "no_oracle", oracle.error
        _once(
            findings,
            "C2N4015",
            f"the CUDA original failed on {plan.distribution} inputs "
            f"{plan.sizes}: {oracle.error[:200]}",
        )
        return trial
    if result is None:
        trial.detail = "no result from the sandbox"
        return trial
    status = result.get("status")
    if status != "ok":
        trial.detail = result.get("error", status)
        rule = STATUS_RULE.get(status, "C2N4001")
        if result.get("code") == "err_uninitialized_output":
            rule = "C2N4040"
        _once(findings, rule, str(trial.detail)[:400], loc=result.get("location"))
        return trial
    outs = box.outputs.get(plan.index, [])
    want = task.outputs_in_order
    if len(outs) != len(want):
        trial.detail = f"returned {len(outs)} output(s), the contract has {len(want)}"
        _once(findings, "C2N4012", trial.detail)
        return trial
    ok = True
    masks = box.unwritten.get(plan.index) or []
    for j, (t, got, o, tr) in enumerate(zip(want, outs, oracle.cuda, oracle.truth, strict=True)):
        missing = masks[j] if j < len(masks) else None
        if missing is not None and missing.shape == o.shape:
            # elements the candidate never wrote: fine where the CUDA original never writes
            # either (its outputs start NaN-poisoned: pitch padding stays NaN); integer
            # outputs start at 0, so every unwritten one of theirs counts
            cuda_wrote = np.isfinite(o) if o.dtype.kind == "f" else np.ones(o.shape, bool)
            bad = int((missing & cuda_wrote).sum())
            if bad:
                trial.detail = f"{t.name}: {bad} element(s) the CUDA original writes never written"
                _once(findings, "C2N4040", f"output {t.name!r} has {bad} element(s) that were "
                      "never written where the CUDA original writes them (check masks and loop "
                      f"bounds; sizes {plan.sizes})")  # fmt: skip
                ok = False
                continue
        if got.shape != o.shape:
            trial.detail = f"{t.name}: shape {got.shape}, expected {o.shape}"
            _once(
                findings,
                "C2N4011",
                f"output {t.name!r} has shape {got.shape} for sizes "
                f"{plan.sizes}; expected {o.shape}",
            )
            ok = False
            continue
        if got.dtype != np_dtype(t.dtype):
            _once(findings, "C2N4013", f"output {t.name!r} is {got.dtype}, the task says {t.dtype}")
        c = compare(got, o, tr, t.dtype)
        trial.outputs.append(
            OutputMetrics(
                name=t.name,
                dtype=t.dtype,
                elements=c.elements,
                max_abs=c.max_abs,
                max_rel=c.max_rel,
                rel_l2=c.rel_l2,
                cuda_rel_l2=c.cuda_rel_l2,
                allowed_rel_l2=c.allowed_rel_l2,
                max_ulp=c.max_ulp,
                cuda_max_ulp=c.cuda_max_ulp,
                max_err_scale_ulp=c.scale_ulp,
                ulp_histogram=c.histogram,
                beyond_tolerance=c.beyond,
                fraction_beyond=c.beyond / c.elements if c.elements else 0.0,
                nonfinite_mismatch=c.nonfinite_mismatch,
                ok=c.ok,
            )
        )
        ok = ok and c.ok
    trial.status = "ok" if ok else "mismatch"
    return trial


def _oracles(task: TaskSpec, plans: list[TrialPlan], cache_dir: str | Path | None) -> list[Oracle]:
    """The CUDA oracle of every trial, from the cache where it has them."""
    from migrator.score.oracle_cache import OracleCache

    try:
        cache = OracleCache(cache_dir, task) if cache_dir is not None else None
    except Exception:  # noqa: BLE001 - a source the key cannot read: run without the cache
        cache = None
    out = []
    for p in plans:
        o = cache.get(p) if cache is not None else None
        if o is None:
            o = run_oracle(task, p, make_trial_inputs(task, p))
            if cache is not None:
                cache.put(p, o)
        out.append(o)
    return out


def _once(findings: list[Finding], rule: str, message: str, loc: str | None = None) -> None:
    if not any(f.rule == rule for f in findings):
        findings.append(Finding.of(rule, message, nki_location=loc))


def _constant_outputs(
    task: TaskSpec, plans: list[TrialPlan], oracles: list[Oracle], box: Any
) -> list[Finding]:
    groups: dict[tuple[tuple[str, int], ...], list[tuple[list[np.ndarray], list[np.ndarray]]]]
    groups = {}
    seen: set[tuple[Any, ...]] = set()
    for p, o in zip(plans, oracles, strict=True):
        outs = box.outputs.get(p.index)
        sizes = tuple(sorted(p.sizes.items()))
        # trials with the same inputs say nothing about dependence on them: one of each
        key = (sizes, *(hash(np.ascontiguousarray(a).tobytes()) for a in o.inputs.values()))
        if o.error is None and outs and key not in seen:
            seen.add(key)
            groups.setdefault(sizes, []).append((outs, o.cuda))
    for g in groups.values():
        found = defences.constant_output_findings(g, task)
        if found:
            return found
    return []


def _construct_findings(task: TaskSpec, cuda_path: str | Path, box: Any) -> list[Finding]:
    """Structural comparison: CUDA math functions and max/min reductions vs the instructions
    the candidate executed (any trial)."""
    from migrator.cuda.frontend import analyze_file
    from migrator.cuda.source import SourceError

    names = {n for t in box.trials for n in t.get("instr_names", [])}
    try:
        kernel = analyze_file(cuda_path).kernel(task.kernel.name)
    except (SourceError, KeyError, ValueError):
        return []  # the oracle already reported the CUDA side's problem
    return fidelity.construct_findings(kernel, Path(cuda_path).name, names)


def _three_way(
    task: TaskSpec, plans: list[TrialPlan], oracles: list[Oracle], trials: list[Trial], box: Any
) -> None:
    """Error ratio vs the CUDA original at the candidate's lower precision (first 3 trials)."""
    if box is None:
        return
    lows = sorted({d for t in box.trials for d in t.get("compute_dtypes", []) if d in LOW_DTYPES})
    lows += [t.dtype for t in task.outputs_in_order if t.dtype in LOW_DTYPES]
    if not lows:
        return
    low = lows[0]
    done = 0
    for p, o, tr in zip(plans, oracles, trials, strict=True):
        if done == 3 or tr.status not in ("ok", "mismatch") or not tr.outputs:
            continue
        ref = run_low_precision_oracle(task, p, o.inputs, low)
        if ref is None:
            continue
        for m, got, r, truth in zip(tr.outputs, box.outputs[p.index], ref, o.truth, strict=False):
            m.error_ratio = error_ratio(got, r, truth)
        done += 1


def _numerics_summary(task: TaskSpec, trials: list[Trial], findings: list[Finding]) -> Numerics:
    ran = [t for t in trials if t.status != "no_oracle"]
    metrics = [m for t in ran for m in t.outputs]
    hist: dict[str, int] = {k: 0 for k in ulp_histogram(np.zeros(0, dtype=np.int64))}
    for m in metrics:
        for k, v in m.ulp_histogram.items():
            hist[k] += v
    bad = [(t, m) for t in ran for m in t.outputs if not m.ok]
    if bad:
        # the worst trial: most elements wrong (non-finite ones included), then the error
        t, m = max(bad, key=lambda tm: (
            (tm[1].beyond_tolerance + tm[1].nonfinite_mismatch) / max(tm[1].elements, 1),
            tm[1].rel_l2 / max(tm[1].allowed_rel_l2, 1e-300),
        ))  # fmt: skip
        nonfinite = (
            f", {m.nonfinite_mismatch} non-finite where the CUDA original is finite"
            if m.nonfinite_mismatch
            else ""
        )
        _once(
            findings,
            "C2N4010",
            f"{len({x[0].index for x in bad})} of {len(ran)} trials outside the policy; worst: "
            f"output {m.name!r}, {t.distribution} inputs, sizes {t.sizes}: "
            f"{m.beyond_tolerance}/{m.elements} elements beyond tolerance{nonfinite}; "
            f"relative L2 error {m.rel_l2:.3g} over the finite elements (CUDA fp32: "
            f"{m.cuda_rel_l2:.3g}, allowed {m.allowed_rel_l2:.3g}), max error "
            f"{m.max_err_scale_ulp:.0f} ulp of the largest output",
        )
    dtype = task.outputs_in_order[0].dtype if task.outputs_in_order else "float32"
    feedback = fidelity.accumulation_feedback(task, trials, dtype)
    if feedback and not bad:
        findings.append(Finding.of("C2N4045", feedback[0]))
    ratios = [m.error_ratio for m in metrics if m.error_ratio is not None]
    if ratios:
        feedback.append(
            f"three-way error ratio (candidate vs CUDA at the candidate's precision): max "
            f"{max(ratios):.2f} (<= 1.2 excellent, 1.2-2 marginal, > 2 suspicious)"
        )
    return Numerics(
        policy=policy_table(),
        trials=len(ran),
        passed=sum(t.status == "ok" for t in ran),
        worst_rel_l2=max((m.rel_l2 for m in metrics), default=0.0),
        worst_max_ulp=max((m.max_ulp for m in metrics), default=0),
        ulp_histogram=hist,
        feedback=feedback,
    )


def _candidate_profile(box: Any) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    if box is None:
        return None, []
    for t in box.trials:
        if t.get("profile"):
            return t["profile"], t.get("lines", [])
    return None, []


def _migration(task: TaskSpec, cuda_path: str | Path, target: str, out_dir: str) -> Any:
    """The migrator's own result for this kernel: its construct map and generated kernel."""
    from migrator.migration import migrate

    try:
        m = migrate(
            cuda_path,
            kernel=task.kernel.name,
            spec=task.path,
            out_dir=out_dir,
            check=False,
            target=target,
        )
    except Exception:  # noqa: BLE001 - no migration: no construct map, no reference
        return None
    return m.kernels[0] if m.kernels else None


REF_SLOWDOWN = 60.0  # the candidate may take this many times the reference's run time...
MIN_LIMIT_S = 20.0  # ...but at least this long (start-up, a tiny task)


def _limits_from_reference(ref_trial_s: float, trials: int) -> Limits:
    """Sandbox limits for a candidate from the reference's time on one trial: generous for a
    slower but honest kernel, far below the default two minutes for an endless loop."""
    base = Limits()
    wall = min(base.wall_seconds, max(MIN_LIMIT_S, REF_SLOWDOWN * ref_trial_s * max(1, trials)))
    # (+5 s: the child's own start-up)
    return dataclasses.replace(base, cpu_seconds=min(base.cpu_seconds, int(wall)),
                               wall_seconds=wall + 5.0)  # fmt: skip


_IN_PROCESS = threading.Lock()  # the emulator's import shim swaps sys.modules entries


def _reference_profile(
    task: TaskSpec,
    path: str | Path | None,
    oracles: list[Oracle],
    runnable: list[int],
    target: str,
    plans: list[TrialPlan],
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Profile the trusted reference (generated by the migrator, or a given file) in-process
    on the same inputs as the candidate's profiled trial."""
    if path is None or not runnable:
        return None, []
    import migrator.nki as mn
    from migrator.nki.cost import summarize

    inputs = oracles[runnable[0]].inputs
    args = nki_args(task, inputs)
    kwargs = task.nki_kwargs(plans[runnable[0]].sizes)
    try:
        with _IN_PROCESS:  # one in-process emulator run at a time (`migrate score --jobs`)
            module = mn.load_kernel_module(path)
            kernel = getattr(module, task.kernel.name.removesuffix("_kernel"))
            opts = mn.EmulatorOptions(target=target)
            _, run = mn.run_kernel(kernel, *args, options=opts, **kwargs)
    except Exception:  # noqa: BLE001 - a reference that does not run: judge without it
        return None, []
    return summarize(run, top=8).model_dump(mode="json"), performance.line_stats(run)


def _sandboxed_reference(
    task: TaskSpec,
    path: str | Path | None,
    jobs: list[TrialJob],
    limits: Limits | None,
    target: str,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Profile a user-supplied reference file in the sandbox, on the candidate's profiled trial."""
    profiled = [j for j in jobs if j.profile]
    if path is None or not profiled or not Path(path).is_file():
        return None, []
    name = task.kernel.name.removesuffix("_kernel")
    box = run_candidate(path, name, profiled, limits=limits, target=target)
    trial = next((t for t in box.trials if t.get("profile")), None)
    if trial is None or trial.get("status", "ok") != "ok":
        return None, []  # a reference that does not run: judge without it
    return _candidate_profile(box)


def _summary(verdict: str, total: float, trials: list[Trial], findings: list[Finding]) -> str:
    ran = [t for t in trials if t.status != "no_oracle"]
    ok = sum(t.status == "ok" for t in ran)
    errs = sum(f.severity == "error" for f in findings)
    warns = sum(f.severity == "warning" for f in findings)
    if trials and not ran:  # the oracle is the problem, not the candidate
        return (
            f"{verdict.upper()}: not graded: the CUDA original could not be run as the oracle "
            "on any trial (C2N4015 says why); the candidate is not at fault"
        )
    return (
        f"{verdict.upper()} {total:.1f}/100: {ok}/{len(ran)} trials within the numerics policy; "
        f"{errs} error(s), {warns} warning(s)"
    )
