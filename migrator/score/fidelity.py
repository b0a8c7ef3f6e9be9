"""Construct fidelity: does the candidate do what the CUDA original does, construct by construct.

Evidence comes from three places: the static contract check (`defences`: every input and value
scalar used), the runtime (every output element written; every input read by an instruction)
and the pattern of numerical failures over the trial grid: failing only on ragged hidden shapes
points at a missing mask or tail (the CUDA bounds guard), failing only for one input
distribution points at a missing safeguard (epsilon, max subtraction, scaling). Reductions are
explained: the CUDA and NKI accumulation orders and the expected size of the difference.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from migrator.contract import TaskSpec
from migrator.score.models import PENALTY, Finding, Trial
from migrator.score.numerics import reduction_feedback

HINTS = {
    "near_underflow": "tiny inputs: a missing epsilon (e.g. in a variance) or an underflow "
    "safeguard of the CUDA code",
    "near_overflow": "huge inputs: a missing max-subtraction or scaling that keeps the CUDA "
    "code from overflowing",
    "special": "special values (0, -0, inf, nan, exact integers) are treated differently",
    "heavy_tailed": "a wide dynamic range: scaling or accumulation differs from the CUDA code",
    "uniform": "signed inputs: an operation assumes non-negative values",
}
CUDA_ORDER = {
    "reduction": "CUDA tree reduction (shared memory / warp shuffles)",
    "rowwise": "CUDA block-level tree reduction",
    "matmul": "CUDA per-thread sequential K loop (fused multiply-add)",
}
# the order the candidate's engines sum in, whichever engine it chose: free-axis reductions run
# on the Vector or Scalar engine, cross-partition sums (ones-vector matmuls) on the Tensor engine
NKI_ORDER = {
    "reduction": "the NKI kernel's engine reductions (free-axis and/or cross-partition)",
    "rowwise": "the NKI kernel's free-axis reductions",
    "matmul": "NKI PE-array sums of 128-row K tiles accumulated in fp32 PSUM",
}


def reduction_length(spec: TaskSpec, sizes: Mapping[str, int] | None = None) -> int | None:
    """Terms summed into one output element at `sizes` (default: the spec's): K for matmuls
    (the size the inputs have and the outputs lack), the row length for row-wise kernels,
    otherwise input elements per output element."""
    sizes = spec.sizes if sizes is None else sizes
    ins, outs = spec.inputs_in_order, spec.outputs_in_order
    if not ins or not outs:
        return None
    if spec.kernel.family == "matmul":
        in_names = {str(d) for t in ins for d in t.shape}
        out_names = {str(d) for t in outs for d in t.shape}
        names = [n for n in spec.sizes if n in in_names and n not in out_names]
        return sizes[names[0]] if names else None
    if spec.kernel.family == "rowwise":
        return sizes.get(str(ins[0].shape[-1]))
    n_in = int(np.prod(spec.shape_of(ins[0], sizes)))
    n_out = int(np.prod(spec.shape_of(outs[0], sizes)))
    return n_in // n_out if n_out and n_in > n_out else None


def failure_pattern_findings(trials: list[Trial]) -> list[Finding]:
    """RAGGED_EDGE / DISTRIBUTION findings from which trials fail."""
    ran = [t for t in trials if t.status in ("ok", "mismatch", "failed")]
    bad = [t for t in ran if t.status != "ok"]
    good = [t for t in ran if t.status == "ok"]
    if not bad or not good:
        return []
    out: list[Finding] = []
    if all(t.hidden for t in bad):
        sizes = sorted({", ".join(f"{k}={v}" for k, v in t.sizes.items()) for t in bad})
        out.append(
            Finding.of(
                "C2N4032",
                f"fails only on hidden shapes ({'; '.join(sizes)}) that are not multiples of 128 "
                "or of the CUDA block: a missing mask or tail tile, or shapes hard-coded",
            )
        )
        return out
    dists = {t.distribution for t in bad}
    passing = {t.distribution for t in good}
    only = dists - passing
    # a pattern only where it is one: one or two distributions that never pass, while most
    # trials do (not when 25 of 30 fail)
    if only and len(only) <= 2 and 2 * len(good) >= len(ran):
        for d in sorted(only):
            k = sum(t.distribution == d for t in bad)
            out.append(
                Finding.of(
                    "C2N4044",
                    f"fails every trial with {d} inputs ({k}), while {len(good)} of {len(ran)} "
                    f"trials pass: {HINTS.get(d, d)}",
                )
            )
    return out


def accumulation_feedback(spec: TaskSpec, trials: list[Trial], dtype: str) -> list[str]:
    """Reduction-order explanation for reduction, row-wise and matmul kernels."""
    family = spec.kernel.family
    if family not in CUDA_ORDER:
        return []
    n = reduction_length(spec)
    if not n:
        return []
    ok = [o.max_err_scale_ulp for t in trials for o in t.outputs if t.status == "ok"]
    ulp = int(np.ceil(max(ok, default=0.0)))
    return [reduction_feedback(n, dtype, CUDA_ORDER[family], NKI_ORDER[family], ulp)]


def _quoted_name(message: str) -> str | None:
    m = re.search(r"'([^']+)'", message)
    return m.group(1) if m else None


def attach_cuda_locations(
    findings: list[Finding], spec: TaskSpec, cuda_path: str, constructs: list[Any]
) -> None:
    """Fill `cuda_location` (the CUDA construct a finding is about) from the migrator's
    construct map (`KernelMigration.constructs`) and the CUDA source."""

    def first(pred: Any) -> int | None:
        return next((c.line for c in constructs if c.line and pred(c.cuda)), None)

    params = {t.name: t.cuda_param for t in spec.tensors}
    params.update({s.name: s.cuda_param for s in spec.scalars})
    sig_end = max(
        (c.line for c in constructs if c.line and c.cuda.startswith("pointer")), default=0
    )
    try:
        source = Path(cuda_path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        source = []
    while 0 < sig_end <= len(source) and "{" not in source[sig_end - 1]:
        sig_end += 1  # the signature runs on to the opening brace

    def use_of(name: str | None) -> int | None:
        if not name or name not in params:
            return None
        word = re.compile(rf"\b{re.escape(params[name])}\b")
        return next(
            (i + 1 for i, text in enumerate(source) if i + 1 > sig_end and word.search(text)), None
        )

    def param_line(name: str | None) -> int | None:
        p = params.get(name or "")
        return first(lambda c: c.startswith(f"pointer parameter {p} (")) if p else None

    guard = first(lambda c: c.startswith("guard"))
    reduction = first(lambda c: "reduction" in c)
    for f in findings:
        if f.cuda_location:
            continue
        name = _quoted_name(f.message)
        line = {
            "C2N4032": guard,
            "C2N4040": guard,
            "C2N4045": reduction,
            "C2N4041": param_line(name),
            "C2N4025": param_line(name),
            "C2N4011": param_line(name),
            "C2N4042": use_of(name),
            "C2N4044": use_of(spec.value_scalars[0].name) if spec.value_scalars else reduction,
        }.get(f.rule)
        if line:
            f.cuda_location = f"{cuda_path}:{line}"


# CUDA math function (normalised: no "__" prefix, no "f" suffix) -> substrings of NKI instruction
# names that can compute it. Deliberately generous: composites that contain the function
# (softmax, sigmoid, gelu, ...) count, so a legitimate substitution is never flagged.
FUNCTION_EVIDENCE: dict[str, tuple[str, ...]] = {
    "exp": ("exp", "softmax", "sigmoid", "silu", "gelu", "softplus", "mish", "elu"),
    "tanh": ("tanh", "gelu", "sigmoid"),
    "log": ("log", "softplus"),
    "sqrt": ("sqrt", "pow", "bn_aggr"),
    "rsqrt": ("rsqrt", "sqrt", "pow", "bn_aggr"),
    "erf": ("erf", "gelu"),
    "sin": ("sin",),
    "cos": ("cos", "sin"),
    "pow": ("pow", "exp"),
}
REDUCTION_EVIDENCE: dict[str, tuple[str, ...]] = {"max": ("max",), "min": ("min",)}


def _function_name(name: str) -> str:
    base = name.removeprefix("__")
    return base[:-1] if base.endswith("f") and base[:-1] in FUNCTION_EVIDENCE else base


def cuda_constructs(kernel: Any) -> dict[str, int]:
    """The math functions and max/min reductions a kernel's stored values are computed with
    (helpers inlined), each with the CUDA line where it first appears."""
    found: dict[str, int] = {}
    for store in kernel.stores:
        for e in store.value.walk():
            if e.kind == "call" and e.op and _function_name(e.op) in FUNCTION_EVIDENCE:
                found.setdefault(_function_name(e.op), store.span.line)
            elif e.kind == "reduce" and e.op in REDUCTION_EVIDENCE:
                found.setdefault(f"{e.op} reduction", store.span.line)
    for call in kernel.calls:
        if call.kind == "math" and _function_name(call.name) in FUNCTION_EVIDENCE:
            found[_function_name(call.name)] = call.span.line  # the call site is more precise
    for red in kernel.reductions:
        if red.op in REDUCTION_EVIDENCE:
            found[f"{red.op} reduction"] = red.span.line
    return found


def construct_findings(kernel: Any, cuda_file: str, instr_names: set[str]) -> list[Finding]:
    """CONSTRUCT_MISSING for each CUDA construct no executed instruction can compute.

    Evidence is the set of instruction names the candidate ran (the emulator's trace); an
    instruction whose name does not say its function (a generic activation) counts for every
    function, so only a candidate that plainly never computes it is flagged."""
    names = {n.lower() for n in instr_names}
    if not names:
        return []
    generic = any("activation" in n and "[" not in n for n in names)
    out: list[Finding] = []
    for construct, line in sorted(cuda_constructs(kernel).items()):
        if construct.endswith(" reduction"):
            tokens = REDUCTION_EVIDENCE[construct.split()[0]]
        else:
            if generic:
                continue
            tokens = FUNCTION_EVIDENCE[construct]
        if any(t in n for n in names for t in tokens):
            continue
        what = construct if construct.endswith(" reduction") else f"{construct}()"
        f = Finding.of(
            "C2N4046",
            f"the CUDA kernel computes {what} (line {line}); the candidate executes no "
            f"instruction that can ({', '.join(tokens[:3])}...)",
            cuda_location=f"{cuda_file}:{line}",
        )
        if not construct.endswith(" reduction"):
            # a function (exp in a softmax, SiLU) no executed instruction can compute: its
            # values came from somewhere else (the host, a table, a fit to the tested inputs)
            f = f.model_copy(update={"severity": "error", "weight": PENALTY["error"]})
        out.append(f)
    return out
