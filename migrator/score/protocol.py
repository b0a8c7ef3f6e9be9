"""The correctness protocol: which trials run, with which inputs, against which oracle.

Trials are seeds x input distributions, spread over shapes: the spec's default sizes, its
published size sets, and hidden size sets made up here (odd sizes, so never multiples of 128,
of 32 or of the CUDA block; one just past a multiple of 128 to catch a skipped last tile).
Trial i uses distribution i % D and seed ``base * 1000 + i``; shapes rotate so that every
shape meets several distributions. Each trial's inputs are run once through the CUDA original
in float32 (the oracle, nvcc's default ``-fmad=true``) and once in float64 (the truth).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from migrator.check import LOW_PRECISION, cuda_view
from migrator.contract import InputDist, TaskSpec, make_inputs, np_dtype
from migrator.cuda.interp import InterpError, InterpOptions, run_spec
from migrator.score.fidelity import reduction_length

DISTRIBUTIONS = ("normal", "uniform", "heavy_tailed", "near_underflow", "near_overflow", "special")
# the float values "special" mixes in (elementwise kernels: IEEE special cases are defined)
SPECIALS_ELEMENTWISE = (0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40)
SPECIALS_EXACT = (-2.0, -1.0, 0.0, 1.0, 2.0)  # small integers: sums are exact in any order


@dataclass(frozen=True)
class TrialPlan:
    index: int
    seed: int
    distribution: str
    sizes: dict[str, int]
    hidden: bool
    ragged: bool


@dataclass
class Oracle:
    """The CUDA original's outputs (fp32, rounded to the task dtype) and the float64 truth."""

    inputs: dict[str, np.ndarray]
    cuda: list[np.ndarray] = field(default_factory=list)
    truth: list[np.ndarray] = field(default_factory=list)
    error: str | None = None


def _block_dims(spec: TaskSpec) -> list[int]:
    try:
        _, block, _ = spec.launch_config(spec.sizes)
    except Exception:  # noqa: BLE001 - a launch that needs other sizes: no block constraint
        return []
    return [b for b in block if b > 1]


def _bad(v: int, blocks: list[int]) -> bool:
    return v % 2 == 0 or v % 128 == 0 or any(v % b == 0 for b in blocks)


def hidden_size_sets(spec: TaskSpec, seed: int) -> list[dict[str, int]]:
    """Two size sets the task does not publish: odd, not multiples of 128 or the block
    (unless the spec's relations say the kernel assumes such multiples)."""
    rng = np.random.default_rng(10_000 + seed)
    blocks = _block_dims(spec)
    mid: dict[str, int] = {}
    tail: dict[str, int] = {}
    for name, v in spec.sizes.items():
        lo = max(3, -(-v // 3))
        h = int(rng.integers(lo, max(lo, v) + 1))
        while _bad(h, blocks):
            h += 1
        mid[name] = h
        t = 128 * max(1, round(v / 256)) + 1
        while _bad(t, blocks):
            t += 2
        tail[name] = t if v >= 64 else mid[name]
    for name, v in spec.specialised_sizes().items():  # (a template argument's head dim)
        mid[name] = tail[name] = v
    # sizes the kernel assumes (`N % 1024 == 0`) win over raggedness
    return spec.obeying([mid, tail])


def is_ragged(spec: TaskSpec, sizes: Mapping[str, int]) -> bool:
    blocks = _block_dims(spec)
    return any(v % 128 or any(v % b for b in blocks) for v in sizes.values())


def plan_trials(
    spec: TaskSpec,
    seed: int = 0,
    seeds: int = 5,
    hidden: bool = True,
    distributions: tuple[str, ...] = DISTRIBUTIONS,
) -> list[TrialPlan]:
    """seeds x distributions trials, with shapes rotating over published and hidden sets."""
    published = spec.all_size_sets()
    secret = hidden_size_sets(spec, seed) if hidden else []
    shapes = [(s, False) for s in published] + [(s, True) for s in secret]
    plans = []
    for s in range(seeds):
        for d, dist in enumerate(distributions):
            i = s * len(distributions) + d
            sizes, is_hidden = shapes[(s + d) % len(shapes)]
            plans.append(
                TrialPlan(i, seed * 1000 + i, dist, dict(sizes), is_hidden, is_ragged(spec, sizes))
            )
    return plans


def _summed_terms(spec: TaskSpec, sizes: Mapping[str, int]) -> int:
    """Input elements summed into one output element by a reduction or row-wise kernel at
    `sizes` (1 for other families: their near-overflow inputs stay at the dtype's edge)."""
    if spec.kernel.family not in ("reduction", "rowwise"):
        return 1
    try:
        return max(1, reduction_length(spec, sizes) or 1)
    except Exception:  # noqa: BLE001 - a shape that needs other sizes: no scaling
        return 1


def _constrained(dist: InputDist | None) -> bool:
    """A spec distribution that is a domain constraint (positive for log, integer keys)."""
    if dist is None:
        return False
    # (a fill is what the host sets before the launch: part of the task, never perturbed)
    return dist.dist in ("positive", "int", "fill") or (dist.low is not None and dist.low >= 0)


def make_trial_inputs(spec: TaskSpec, plan: TrialPlan) -> dict[str, np.ndarray]:
    """Inputs of one trial in the task's dtypes (published distributions for "normal")."""
    base = make_inputs(spec, plan.sizes, plan.seed)
    if plan.distribution == "normal":
        return base
    rng = np.random.default_rng(plan.seed + 7)
    out = {}
    for t in spec.inputs_in_order:
        dt = np_dtype(t.dtype)
        arr = base[t.name]
        declared = spec.inputs.get(t.name)
        if not (dt.kind == "f" or t.dtype in LOW_PRECISION) or _constrained(declared):
            out[t.name] = arr
            continue
        shape = arr.shape
        info = np.finfo(np.float32 if t.dtype in ("bfloat16",) else dt)
        if t.dtype.startswith("float8"):
            info = np.finfo(np.float16)
        sign = rng.choice([-1.0, 1.0], size=shape)
        if plan.distribution == "uniform":
            v = rng.uniform(-1.0, 1.0, size=shape)
        elif plan.distribution == "heavy_tailed":
            v = rng.standard_t(2.0, size=shape)
        elif plan.distribution == "near_underflow":  # 2^4..2^20 above the smallest normal
            v = sign * float(info.tiny) * np.exp2(rng.uniform(4, 20, size=shape))
        elif plan.distribution == "near_overflow":  # 2^-20..2^-4 below the largest value
            # ...divided by twice the terms a reduction sums into one output, so that every
            # summation order stays finite (CUDA's per-lane partials and an NKI kernel's tiles
            # sum in different orders; neither may be judged by an overflow the other avoids)
            top = float(info.max) / (2 * _summed_terms(spec, plan.sizes))
            v = sign * top * np.exp2(-rng.uniform(4, 20, size=shape))
        else:  # special
            pool = SPECIALS_ELEMENTWISE if spec.kernel.family == "elementwise" else SPECIALS_EXACT
            v = rng.standard_normal(size=shape)
            pick = rng.random(size=shape) < 0.5
            v = np.where(pick, rng.choice(np.array(pool), size=shape), v)
        with np.errstate(over="ignore"):
            out[t.name] = np.asarray(v).astype(dt)
    return out


def run_oracle(spec: TaskSpec, plan: TrialPlan, inputs: dict[str, np.ndarray]) -> Oracle:
    """The CUDA original on these inputs: float32 (rounded to the task dtype) and float64."""
    cspec = cuda_view(spec)
    pairs = zip(spec.inputs_in_order, cspec.inputs_in_order, strict=True)
    widened = {t.name: inputs[t.name].astype(np_dtype(c.dtype)) for t, c in pairs}
    oracle = Oracle(inputs=inputs)
    try:
        with np.errstate(all="ignore"):
            fp32 = run_spec(cspec, plan.sizes, plan.seed, inputs=widened)
            f64 = run_spec(
                cspec,
                plan.sizes,
                plan.seed,
                inputs=widened,
                options=InterpOptions(shadow_f64=True),
            )
    except (InterpError, ValueError) as e:
        oracle.error = f"{type(e).__name__}: {e}"
        return oracle
    with np.errstate(all="ignore"):
        oracle.cuda = [
            np.asarray(o).astype(np_dtype(t.dtype))
            for o, t in zip(fp32, spec.outputs_in_order, strict=True)
        ]
    oracle.truth = [np.asarray(o, dtype=np.float64) for o in f64]
    return oracle


def run_low_precision_oracle(
    spec: TaskSpec, plan: TrialPlan, inputs: dict[str, np.ndarray], dtype: str
) -> list[np.ndarray] | None:
    """The CUDA original with inputs and outputs rounded to `dtype` (three-way ratio)."""
    low = np_dtype(dtype)
    cspec = cuda_view(spec)
    with np.errstate(all="ignore"):
        rounded = {}
        for t, c in zip(spec.inputs_in_order, cspec.inputs_in_order, strict=True):
            arr = inputs[t.name]
            wide = np_dtype(c.dtype)
            rounded[t.name] = arr.astype(low).astype(wide) if wide.kind == "f" else arr
    try:
        with np.errstate(all="ignore"):
            outs = run_spec(cspec, plan.sizes, plan.seed, inputs=rounded)
    except (InterpError, ValueError):
        return None
    with np.errstate(all="ignore"):
        return [np.asarray(o).astype(low).astype(np.float64) for o in outs]
