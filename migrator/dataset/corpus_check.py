"""`migrate corpus-check`: validate every entry of a corpus directory, step by step.

An entry is `NAME.cu` with its spec sidecar `NAME.toml` and numpy reference `NAME.py` (and, for
supported families, `expert/KERNEL_expert.py`). The steps, each reported with what went wrong:
the spec parses and agrees with the source; the kernel parses; the CUDA interpreter matches the
numpy reference on every published size set with no sanitizer findings; and the reference NKI
kernels (the expert one where present, the generated one when the family is supported) pass the
task's own scorer. A corpus that fails here would make every downstream task record suspect.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from migrator.contract import TaskSpec
from migrator.diagnostics import diagnostics_text

Status = Literal["ok", "failed", "skipped"]
RTOL = 1e-5  # the interpreter vs numpy float64-then-round: ulp-level differences only


class Step(BaseModel):
    name: str
    status: Status
    detail: str = ""


class EntryCheck(BaseModel):
    entry: str
    steps: list[Step] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(s.status != "failed" for s in self.steps)


def _error_text(e: Exception) -> str:
    return diagnostics_text(e) or f"{type(e).__name__}: {e}"


def _eps(dtype: np.dtype) -> float:
    try:
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).eps)
    except (ImportError, ValueError, TypeError):
        return 0.0


def interpreter_matches(spec: TaskSpec) -> Step:
    from migrator.cuda.interp.findings import InterpError
    from migrator.cuda.interp.spec_run import run_spec_full

    worst = 0.0
    for i, sizes in enumerate(spec.all_size_sets()):
        try:
            run = run_spec_full(spec, sizes, seed=i)
        except InterpError as e:  # out of bounds, divergent barrier, unsupported construct
            return Step(name="interpreter", status="failed", detail=f"{sizes}: {_error_text(e)}")
        if run.result.findings:
            return Step(
                name="interpreter",
                status="failed",
                detail=f"{sizes}: " + "; ".join(f.render() for f in run.result.findings),
            )
        ins = [run.inputs[t.name] for t in spec.inputs_in_order]
        kw = spec.nki_kwargs(sizes)
        expected = spec.reference_function()(*ins, **kw)
        expected = expected if isinstance(expected, tuple) else (expected,)
        if len(expected) != len(run.outputs):
            return Step(
                name="interpreter",
                status="failed",
                detail=f"the reference returns {len(expected)} arrays, the kernel "
                f"writes {len(run.outputs)} outputs",
            )
        for got, exp in zip(run.outputs, expected, strict=True):
            exp = np.asarray(exp)
            if got.shape != exp.shape:
                return Step(
                    name="interpreter",
                    status="failed",
                    detail=f"{sizes}: shape {got.shape} vs reference {exp.shape}",
                )
            if not np.isfinite(got).all():
                return Step(
                    name="interpreter",
                    status="failed",
                    detail=f"{sizes}: non-finite outputs (elements left unwritten?)",
                )
            # a 16-bit output may round the other way from a float64 reference: one ulp of slack
            rtol = max(RTOL, _eps(exp.dtype))
            g, e = got.astype(np.float64), exp.astype(np.float64)
            scale = max(1.0, float(np.abs(e).max(initial=0.0)))
            err = float(np.max(np.abs(g - e) / (rtol * np.abs(e) + rtol * scale), initial=0.0))
            worst = max(worst, err)
            if err > 1.0:
                return Step(
                    name="interpreter",
                    status="failed",
                    detail=f"{sizes}: differs from the numpy reference by {err:.1f}× "
                    f"the tolerance (rtol {rtol:g}, atol {rtol:g}·max|ref|)",
                )
    n = len(spec.all_size_sets())
    return Step(
        name="interpreter",
        status="ok",
        detail=f"{n} size sets match numpy (worst {worst:.2f}× tolerance)",
    )


def _scores(cu: Path, spec_path: Path, kernel: str, seeds: int) -> list[Step]:
    from migrator.migration import migrate
    from migrator.score import score

    steps: list[Step] = []
    base = kernel.removesuffix("_kernel")
    expert = cu.parent / "expert" / f"{base}_expert.py"
    with tempfile.TemporaryDirectory() as tmp:
        m = migrate(cu, kernel=kernel, spec=spec_path, out_dir=tmp, check=False)
        km = m.kernels[0]
        candidates: list[tuple[str, Path]] = []
        if expert.is_file():
            candidates.append(("expert NKI", expert))
        if km.family and km.status == "complete" and km.nki_source:
            generated = Path(tmp) / f"{base}__generated.py"
            generated.write_text(km.nki_source, encoding="utf-8")
            candidates.append(("generated NKI", generated))
        else:
            steps.append(
                Step(
                    name="generated NKI",
                    status="skipped",
                    detail=f"no automatic migration ({km.status}; "
                    f"{', '.join(sorted({d.id for d in km.diagnostics}))})",
                )
            )
        for label, path in candidates:
            rep = score(cu, path, kernel=kernel, spec=spec_path, seeds=seeds, nki_name=base,
                        migration=km)  # fmt: skip
            status: Status = "ok" if rep.verdict == "pass" else "failed"
            rules = sorted({f.rule for f in rep.findings if f.severity != "info"})
            steps.append(
                Step(
                    name=label,
                    status=status,
                    detail=f"score {rep.score:.1f} ({rep.verdict})"
                    + (f"; {' '.join(rules)}" if rules and status == "failed" else ""),
                )
            )
    return steps


def check_entry(cu: Path, *, score: bool = True, seeds: int = 1) -> EntryCheck:
    """Every step for one corpus entry; a failed step stops the steps that depend on it."""
    from migrator.contract import load_spec, spec_for_source
    from migrator.cuda.frontend import analyze_file

    out = EntryCheck(entry=cu.stem)
    spec_path = spec_for_source(cu)
    if spec_path is None:
        out.steps.append(
            Step(
                name="spec",
                status="failed",
                detail=f"no spec sidecar {cu.with_suffix('.toml').name}",
            )
        )
        return out
    try:
        spec = load_spec(spec_path)
        out.steps.append(Step(name="spec", status="ok", detail=spec_path.name))
    except Exception as e:  # noqa: BLE001 - any spec problem is this entry's failure
        out.steps.append(Step(name="spec", status="failed", detail=_error_text(e)))
        return out
    try:
        analyze_file(cu).kernel(spec.kernel.name)
        out.steps.append(Step(name="parse", status="ok", detail=spec.kernel.name))
    except Exception as e:  # noqa: BLE001
        out.steps.append(Step(name="parse", status="failed", detail=_error_text(e)))
        return out
    try:
        out.steps.append(interpreter_matches(spec))
    except Exception as e:  # noqa: BLE001
        out.steps.append(Step(name="interpreter", status="failed", detail=_error_text(e)))
    if score and out.ok:
        try:
            out.steps += _scores(cu, spec_path, spec.kernel.name, seeds)
        except Exception as e:  # noqa: BLE001
            out.steps.append(Step(name="score", status="failed", detail=_error_text(e)))
    return out


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    p = sub.add_parser(
        "corpus-check",
        help="validate every corpus entry (spec, parse, "
        "interpreter vs numpy, reference NKI vs the scorer)",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("inputs", nargs="*", default=["corpus"], help="corpus directories or .cu files")
    p.add_argument("--no-score", action="store_true", help="skip the scorer steps (fast)")
    p.add_argument("--seeds", type=int, default=1, help="seeds per distribution when scoring")
    p.add_argument("--json", action="store_true", help="one JSON object per entry")
    p.set_defaults(func=handle)
    return p


def handle(args: argparse.Namespace) -> int:
    from migrator.dataset.tasks import iter_sources

    missing = [i for i in args.inputs if not Path(i).exists()]
    if missing:
        sys.stderr.write(f"migrate: error: {', '.join(missing)}: no such file or directory\n")
        return 2
    sources = list(iter_sources(args.inputs))
    if not sources:
        sys.stderr.write(f"migrate: error: no .cu files in {', '.join(args.inputs)}\n")
        return 2
    failed = 0
    for cu in sources:
        r = check_entry(cu, score=not args.no_score, seeds=args.seeds)
        failed += not r.ok
        if args.json:
            sys.stdout.write(r.model_dump_json() + "\n")
            continue
        sys.stdout.write(f"{'ok  ' if r.ok else 'FAIL'} {cu}\n")
        for s in r.steps:
            sys.stdout.write(f"     {s.status:<7} {s.name:<14} {s.detail}\n")
    if not args.json:
        sys.stdout.write(f"{len(sources) - failed} of {len(sources)} entries pass\n")
    return 0 if failed == 0 else 1
