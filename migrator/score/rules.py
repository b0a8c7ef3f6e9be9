"""The scorer's rule table: one row per finding kind (proposed C2N4xxx ids).

The diagnostics owner imports `RULES` into `migrator/diagnostics.py` (range C2N4xxx is the
scorer's). Until then the scorer reads this table directly. IDs are permanent; a retired row
stays, marked ``retired=True``.

| id | name | severity | category | what it means |
|---|---|---|---|---|
| C2N4001 | SANDBOX_CRASH | error | correctness | the candidate process crashed / raised |
| C2N4002 | SANDBOX_TIMEOUT | error | correctness | wall-clock limit hit |
| C2N4003 | SANDBOX_LIMIT | error | correctness | CPU-time or memory limit hit |
| C2N4004 | CANDIDATE_LOAD_ERROR | error | correctness | file does not import / no kernel |
| C2N4005 | NKI_CONSTRAINT | error | hardware | the emulator rejected a Trainium rule |
| C2N4006 | NKI_UNSUPPORTED | error | hardware | an NKI API the emulator lacks |
| C2N4010 | NUMERICS_MISMATCH | error | correctness | outside the numerics policy |
| C2N4011 | OUTPUT_SHAPE | error | correctness | output shape differs from the contract |
| C2N4012 | OUTPUT_COUNT | error | correctness | wrong number of outputs |
| C2N4013 | OUTPUT_DTYPE | error | correctness | output dtype differs from the contract |
| C2N4015 | NO_ORACLE | warning | correctness | the CUDA original could not run a trial |
| C2N4020 | FRAMEWORK_COMPUTE | error | integrity | numpy/torch compute outside NKI ops |
| C2N4021 | OUTPUT_NOT_FROM_NKI | error | integrity | a returned value is not an NKI HBM tensor |
| C2N4022 | RETURNS_INPUT | error | integrity | an input tensor is returned as output |
| C2N4023 | CONSTANT_OUTPUT | error | integrity | output does not depend on the inputs |
| C2N4024 | MODULE_STATE | error | integrity | module-level mutable state (caching) |
| C2N4025 | INPUT_MUTATED | error | integrity | an `in` tensor changed during the run |
| C2N4026 | MONKEY_PATCH | error | integrity | assigns to NKI/emulator/scorer/sys attributes |
| C2N4027 | RUNTIME_PATCH | error | integrity | emulator objects changed while running |
| C2N4028 | SANDBOX_ESCAPE | error | integrity | forbidden import or builtin (open, eval, ...) |
| C2N4029 | PRECISION_DOWNGRADE | error | integrity | lower precision than the task's dtype |
| C2N4030 | SWALLOWED_EXCEPTION | error | integrity | try/except inside the kernel |
| C2N4031 | HARDCODED_SHAPE | warning | maintainability | literal equal to a task size |
| C2N4032 | RAGGED_EDGE | error | fidelity | fails only on hidden non-multiple shapes |
| C2N4040 | OUTPUT_INCOMPLETE | error | fidelity | output elements never written |
| C2N4041 | INPUT_UNUSED | error | fidelity | an input tensor is never read |
| C2N4042 | SCALAR_UNUSED | error | fidelity | a value scalar (eps, alpha) is never used |
| C2N4043 | SIGNATURE | error | fidelity | parameters do not follow the task contract |
| C2N4044 | DISTRIBUTION | error | fidelity | fails only for one input distribution |
| C2N4045 | ACCUMULATION_ORDER | note | correctness | expected reduction-order differences |
| C2N4046 | CONSTRUCT_MISSING | warning | fidelity | CUDA function or max/min not computed |
| C2N4050 | PARTITION_UNDERUSE | warning | performance | compute tiles use few of 128 partitions |
| C2N4051 | SMALL_DMA | warning | performance | DMA descriptors below 512 bytes |
| C2N4052 | HBM_TRAFFIC | warning | performance | more HBM traffic than the reference |
| C2N4053 | SLOWER_THAN_REFERENCE | warning | performance | modelled latency well above reference |
| C2N4054 | FP32_MATMUL | note | performance | fp32 matmul (1/4 TensorE rate) |
| C2N4055 | PSUM_PRESSURE | note | hardware | all PSUM banks live at once |
| C2N4056 | LOW_ROOFLINE | note | performance | low fraction of the roofline bound |
| C2N4057 | EMULATOR_FINDING | warning | hardware | non-fatal emulator finding |
| C2N4058 | ENGINES_SERIALISED | warning | performance | DMA and compute engines barely overlap |
| C2N4060 | NO_COMMENTS | note | maintainability | no comments tying the code to the CUDA |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "note"]
Category = Literal[
    "correctness", "integrity", "fidelity", "hardware", "performance", "maintainability"
]


# Rubric points a finding costs its category (fraction of the category's weight), per severity;
# each rule counts once per category. Errors also fail the verdict.
PENALTY: dict[str, float] = {"error": 1.0, "warning": 0.25, "note": 0.0}


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: Severity
    category: Category
    title: str
    why: str  # why it matters on Trainium / for the grade
    fix: str  # how to fix it


def _r(id_: str, name: str, sev: Severity, cat: Category, title: str, why: str, fix: str) -> Rule:
    return Rule(id_, name, sev, cat, title, why, fix)


_ROWS = (
    _r(
        "C2N4001",
        "SANDBOX_CRASH",
        "error",
        "correctness",
        "candidate crashed",
        "A kernel that raises produces no output.",
        "Run the file under the emulator and fix the traceback shown.",
    ),
    _r(
        "C2N4002",
        "SANDBOX_TIMEOUT",
        "error",
        "correctness",
        "wall-clock limit exceeded",
        "The candidate did not finish; hangs count as failures.",
        "Remove unbounded loops; the emulator runs one Python step per instruction.",
    ),
    _r(
        "C2N4003",
        "SANDBOX_LIMIT",
        "error",
        "correctness",
        "CPU or memory limit exceeded",
        "The candidate used more CPU time or memory than the sandbox allows.",
        "Tile the problem instead of materialising it whole.",
    ),
    _r(
        "C2N4004",
        "CANDIDATE_LOAD_ERROR",
        "error",
        "correctness",
        "candidate does not load",
        "The file must import with the NKI shim and define the kernel.",
        "Define the kernel named in the task contract with @nki.jit.",
    ),
    _r(
        "C2N4005",
        "NKI_CONSTRAINT",
        "error",
        "hardware",
        "Trainium constraint violated",
        "The real compiler or hardware rejects this (partition limit, PSUM/SBUF capacity...).",
        "Follow the emulator message; it names the rule and the fix.",
    ),
    _r(
        "C2N4006",
        "NKI_UNSUPPORTED",
        "error",
        "hardware",
        "NKI API not supported",
        "The emulator cannot run this API, so the migration cannot be graded.",
        "Use the supported nl/nisa subset (see docs).",
    ),
    _r(
        "C2N4010",
        "NUMERICS_MISMATCH",
        "error",
        "correctness",
        "outputs outside the policy",
        "err(candidate, truth) exceeds k*err(cuda fp32, truth) + floor(dtype).",
        "Compare the failing trial's inputs with the CUDA original; check masks, axes and "
        "constants.",
    ),
    _r(
        "C2N4011",
        "OUTPUT_SHAPE",
        "error",
        "correctness",
        "output shape differs",
        "Outputs must have the logical shape of the contract.",
        "Allocate outputs from the input shapes, never from literals.",
    ),
    _r(
        "C2N4012",
        "OUTPUT_COUNT",
        "error",
        "correctness",
        "wrong number of outputs",
        "The contract returns every out/inout tensor in spec order.",
        "Return a tuple of all outputs.",
    ),
    _r(
        "C2N4013",
        "OUTPUT_DTYPE",
        "error",
        "correctness",
        "output dtype differs",
        "Outputs are compared in the task's dtype.",
        "Allocate the output with the task dtype.",
    ),
    _r(
        "C2N4015",
        "NO_ORACLE",
        "warning",
        "correctness",
        "CUDA original could not run",
        "Trials without an oracle are skipped.",
        "Check the spec's sizes and launch.",
    ),
    _r(
        "C2N4020",
        "FRAMEWORK_COMPUTE",
        "error",
        "integrity",
        "compute outside NKI",
        "numpy/torch compute runs on the host, not on a NeuronCore.",
        "Express all compute with nl/nisa inside the @nki.jit kernel.",
    ),
    _r(
        "C2N4021",
        "OUTPUT_NOT_FROM_NKI",
        "error",
        "integrity",
        "output not produced by NKI",
        "Results must be HBM tensors written by NKI stores.",
        "Allocate the output with nl.ndarray(..., buffer=nl.shared_hbm) and nl.store into it.",
    ),
    _r(
        "C2N4022",
        "RETURNS_INPUT",
        "error",
        "integrity",
        "input returned as output",
        "Returning an argument computes nothing.",
        "Write results to a new HBM tensor.",
    ),
    _r(
        "C2N4023",
        "CONSTANT_OUTPUT",
        "error",
        "integrity",
        "output independent of inputs",
        "Different inputs gave identical outputs while the CUDA original's differ.",
        "Compute from the inputs.",
    ),
    _r(
        "C2N4024",
        "MODULE_STATE",
        "error",
        "integrity",
        "module-level mutable state",
        "State kept between calls (caches) can replay old results.",
        "Keep all state inside the kernel; module constants must be immutable.",
    ),
    _r(
        "C2N4025",
        "INPUT_MUTATED",
        "error",
        "integrity",
        "input tensor modified",
        "An `in` tensor must be read-only; the check would compare against altered data.",
        "Write only to outputs (and inout tensors).",
    ),
    _r(
        "C2N4026",
        "MONKEY_PATCH",
        "error",
        "integrity",
        "patches NKI, emulator or scorer",
        "Replacing library objects changes what is measured.",
        "Do not assign to attributes of nl/nisa/nki/migrator/sys/builtins.",
    ),
    _r(
        "C2N4027",
        "RUNTIME_PATCH",
        "error",
        "integrity",
        "emulator changed at runtime",
        "Emulator functions were replaced while the candidate ran.",
        "Do not modify library objects.",
    ),
    _r(
        "C2N4028",
        "SANDBOX_ESCAPE",
        "error",
        "integrity",
        "forbidden import or builtin",
        "Files, processes, reflection and dynamic code are outside what a kernel may use.",
        "Import only neuronxcc.nki / nki, numpy (dtypes) and math.",
    ),
    _r(
        "C2N4029",
        "PRECISION_DOWNGRADE",
        "error",
        "integrity",
        "silent precision downgrade",
        "Lower-precision tiles in a float32 task change the results' accuracy.",
        "Keep float32 tiles, or ask for a low-precision task (--dtype).",
    ),
    _r(
        "C2N4030",
        "SWALLOWED_EXCEPTION",
        "error",
        "integrity",
        "exception swallowed",
        "try/except around NKI calls hides failures (fallback paths).",
        "Let errors propagate; 'no output' is a failure.",
    ),
    _r(
        "C2N4031",
        "HARDCODED_SHAPE",
        "warning",
        "maintainability",
        "hard-coded size",
        "A literal equal to a test size suggests shape-specific code.",
        "Read sizes from the input shapes.",
    ),
    _r(
        "C2N4032",
        "RAGGED_EDGE",
        "error",
        "fidelity",
        "wrong on ragged shapes",
        "Shapes that are not multiples of 128 or of the CUDA block need masks/tails, like the "
        "CUDA bounds guard.",
        "Mask the last tile (mask=idx < N) or handle the tail.",
    ),
    _r(
        "C2N4040",
        "OUTPUT_INCOMPLETE",
        "error",
        "fidelity",
        "output not fully written",
        "Every element the CUDA kernel writes must be written.",
        "Check loop bounds and masks so the last tile is stored.",
    ),
    _r(
        "C2N4041",
        "INPUT_UNUSED",
        "error",
        "fidelity",
        "input never read",
        "The CUDA kernel reads this tensor; ignoring it changes the math.",
        "Load and use the tensor as the CUDA code does.",
    ),
    _r(
        "C2N4042",
        "SCALAR_UNUSED",
        "error",
        "fidelity",
        "scalar never used",
        "A value scalar (epsilon, scale) of the CUDA kernel is ignored.",
        "Use the keyword argument where the CUDA code uses the parameter.",
    ),
    _r(
        "C2N4043",
        "SIGNATURE",
        "error",
        "fidelity",
        "signature differs from the contract",
        "Positional: in/inout tensors in spec order; keywords: value scalars.",
        "Follow the calling convention in the task contract.",
    ),
    _r(
        "C2N4046",
        "CONSTRUCT_MISSING",
        "warning",
        "fidelity",
        "CUDA construct without an NKI counterpart",
        "The CUDA kernel computes this function or reduction, and no instruction the candidate "
        "executed can compute it: an approximation or a different formula that happens to pass "
        "the tested inputs may diverge on others.",
        "Use the NKI op for the same function (nl.exp, nl.tanh, nl.rsqrt, nl.max, ...) or "
        "explain the substitution in a comment.",
    ),
    _r(
        "C2N4044",
        "DISTRIBUTION",
        "error",
        "fidelity",
        "wrong for one input distribution",
        "Inputs near underflow/overflow or special values expose missing epsilons, scaling or "
        "max-subtraction.",
        "Replicate the CUDA kernel's numerical safeguards.",
    ),
    _r(
        "C2N4045",
        "ACCUMULATION_ORDER",
        "note",
        "correctness",
        "accumulation order differs",
        "CUDA and NKI reduce in different orders; bitwise equality is not expected.",
        "Nothing to do if within the policy.",
    ),
    _r(
        "C2N4050",
        "PARTITION_UNDERUSE",
        "warning",
        "performance",
        "few partitions used",
        "Engines process 128 partitions in parallel; tiles with fewer waste lanes.",
        "Put the long independent axis on the partition dimension (128 rows per tile).",
    ),
    _r(
        "C2N4051",
        "SMALL_DMA",
        "warning",
        "performance",
        "small or strided DMAs",
        "Each DMA descriptor costs fixed overhead; below ~512 B efficiency collapses.",
        "Load contiguous rows of >= 512 bytes; transpose on-chip instead of strided loads.",
    ),
    _r(
        "C2N4052",
        "HBM_TRAFFIC",
        "warning",
        "performance",
        "redundant HBM traffic",
        "HBM bandwidth bounds memory-bound kernels; re-reading data costs time.",
        "Keep reused tiles in SBUF; fuse passes.",
    ),
    _r(
        "C2N4053",
        "SLOWER_THAN_REFERENCE",
        "warning",
        "performance",
        "slower than reference",
        "The modelled latency is well above the generated/expert reference.",
        "See the hotspots; overlap DMA with compute and balance engines.",
    ),
    _r(
        "C2N4054",
        "FP32_MATMUL",
        "note",
        "performance",
        "fp32 matmul",
        "TensorE runs fp32 at a quarter of the bf16 rate.",
        "Use bf16 operands with fp32 PSUM accumulation if the task allows it.",
    ),
    _r(
        "C2N4055",
        "PSUM_PRESSURE",
        "note",
        "hardware",
        "PSUM fully used",
        "All 8 PSUM banks live leaves no room for double buffering.",
        "Copy results out of PSUM earlier.",
    ),
    _r(
        "C2N4056",
        "LOW_ROOFLINE",
        "note",
        "performance",
        "far from the roofline",
        "The modelled latency is far above the memory/compute bound.",
        "Overlap DMA with compute; use larger tiles.",
    ),
    _r(
        "C2N4057",
        "EMULATOR_FINDING",
        "warning",
        "hardware",
        "emulator finding",
        "The emulator recorded a rule violation in report mode.",
        "See the message.",
    ),
    _r(
        "C2N4058",
        "ENGINES_SERIALISED",
        "warning",
        "performance",
        "engines serialised",
        "Trainium's DMA queues and compute engines run concurrently; a kernel whose engines "
        "wait for each other runs at the sum of their times instead of the longest.",
        "Let independent tiles overlap: affine_range loops without loop-carried dependencies, "
        "tiles allocated inside the loop (multi-buffering), loads issued before compute.",
    ),
    _r(
        "C2N4060",
        "NO_COMMENTS",
        "note",
        "maintainability",
        "no comments",
        "Comments mapping NKI code back to CUDA lines make reviews possible.",
        "Add `# from kernel.cu:LINE` comments.",
    ),
)

RULES: dict[str, Rule] = {r.id: r for r in _ROWS}
BY_NAME: dict[str, Rule] = {r.name: r for r in _ROWS}


def rule(name: str) -> Rule:
    """The rule with this NAME (e.g. ``"INPUT_MUTATED"``)."""
    return BY_NAME[name]
