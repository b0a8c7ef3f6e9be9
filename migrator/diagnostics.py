"""The C2N diagnostics registry: every diagnostic the tool can emit, one row each.

IDs are permanent: a published ID never changes meaning, and a retired row stays in the table
marked ``retired=True``. Ranges: C2N0xxx input files, C2N1xxx CUDA front end, C2N2xxx migration
(patterns/emission), C2N3xxx NKI emulator, C2N4xxx scorer. Messages are templates with named
fields (``{name}``) written once; every rendering (terminal, JSON, inline ``# C2N1234:`` comments,
reports) comes from the same `Diagnostic` value.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Severity = Literal["error", "warning", "note"]
Effort = Literal["none", "low", "medium", "high"]


@dataclass(frozen=True)
class DiagnosticKind:
    id: str
    name: str
    severity: Severity
    effort: Effort
    message: str  # template with named fields
    help: str  # one line: what to do about it
    retired: bool = False

    @property
    def fields(self) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(self.message) if f}


_ROWS: tuple[DiagnosticKind, ...] = (
    # --- C2N0xxx: reading input ---------------------------------------------------------
    DiagnosticKind(
        "C2N0001",
        "FILE_NOT_FOUND",
        "error",
        "none",
        "file not found: {path}",
        "Check the path; relative paths are resolved from the current directory.",
    ),
    DiagnosticKind(
        "C2N0002",
        "FILE_BINARY",
        "error",
        "none",
        "{path} looks like a binary file (NUL byte at offset {offset})",
        "Pass CUDA C++ source text (.cu/.cuh), not an object file or PTX binary.",
    ),
    DiagnosticKind(
        "C2N0003",
        "FILE_EMPTY",
        "error",
        "none",
        "{path} is empty",
        "Pass a file that contains at least one __global__ kernel.",
    ),
    DiagnosticKind(
        "C2N0004",
        "FILE_TOO_LARGE",
        "error",
        "none",
        "{path} is {size} bytes; the limit is {limit} bytes",
        "Split the file or extract the kernels you want to migrate.",
    ),
    DiagnosticKind(
        "C2N0005",
        "FILE_NOT_UTF8",
        "error",
        "none",
        "{path} is not valid UTF-8 (byte 0x{byte:02x} at line {line}, column {col})",
        "Re-save the file as UTF-8.",
    ),
    DiagnosticKind(
        "C2N0006",
        "PREPROCESSOR_ERROR",
        "error",
        "low",
        "preprocessor: {detail}",
        "Fix the directive, or pass the missing -I include directory or -D define.",
    ),
    DiagnosticKind(
        "C2N0007",
        "SYSTEM_INCLUDE_SKIPPED",
        "note",
        "none",
        "system header <{header}> skipped",
        "System headers are not needed for analysis; CUDA built-ins are known.",
    ),
    DiagnosticKind(
        "C2N0008",
        "NO_KERNELS",
        "warning",
        "none",
        "no __global__ or __device__ function found in {path}",
        "Check that the kernels are not hidden behind an #if that is false.",
    ),
    DiagnosticKind(
        "C2N0009",
        "NO_GLOBAL_KERNEL",
        "error",
        "none",
        "no __global__ kernel in {path}: nothing to migrate",
        "Pass the file that defines the __global__ kernel (a file of __device__ helpers is "
        "migrated with the kernel that includes it); check that no #if hides the kernel.",
    ),
    DiagnosticKind(
        "C2N0010",
        "UNKNOWN_KERNEL",
        "error",
        "none",
        "no __global__ kernel named {kernel} in {path} (its kernels: {known})",
        "Pass --kernel with one of the names listed, or leave it out to migrate every kernel.",
    ),
    # --- C2N1xxx: CUDA front end ------------------------------------------------------------
    DiagnosticKind(
        "C2N1001",
        "SYNTAX_ERROR",
        "error",
        "low",
        "syntax error: {detail}",
        "Fix the CUDA source so that it compiles with nvcc.",
    ),
    DiagnosticKind(
        "C2N1002",
        "NON_AFFINE_INDEX",
        "note",
        "medium",
        "index {index} into {array} is not affine in thread/block/loop indices",
        "Patterns that need an affine layout treat this access as irregular.",
    ),
    DiagnosticKind(
        "C2N1003",
        "INLINE_ASM",
        "warning",
        "high",
        "inline PTX assembly has no NKI equivalent",
        "Rewrite the asm block with CUDA intrinsics or plain C++ first.",
    ),
    DiagnosticKind(
        "C2N1004",
        "TEXTURE_SURFACE",
        "warning",
        "high",
        "texture/surface access {name} is not supported",
        "Replace texture fetches with plain global-memory loads.",
    ),
    DiagnosticKind(
        "C2N1005",
        "DYNAMIC_PARALLELISM",
        "warning",
        "high",
        "kernel launch inside device code ({name})",
        "Hoist the child launch to the host; NKI has no device-side launches.",
    ),
    DiagnosticKind(
        "C2N1006",
        "UNKNOWN_SHARED_SIZE",
        "warning",
        "medium",
        "size of __shared__ array {name} could not be evaluated: {detail}",
        "Use a #define or constexpr constant, or pass -D for the macro.",
    ),
    DiagnosticKind(
        "C2N1007",
        "DYNAMIC_SHARED",
        "note",
        "low",
        "extern __shared__ array {name} is sized at launch time",
        "The launch site's shared-memory argument gives its size.",
    ),
    DiagnosticKind(
        "C2N1008",
        "GOTO",
        "warning",
        "high",
        "goto in a kernel is not supported",
        "Restructure the control flow with loops and break/continue.",
    ),
    DiagnosticKind(
        "C2N1009",
        "POINTER_TO_POINTER",
        "warning",
        "medium",
        "parameter {name} is a pointer to pointer",
        "Pass a flat buffer with explicit offsets instead of an array of pointers.",
    ),
    DiagnosticKind(
        "C2N1010",
        "RECURSION",
        "warning",
        "high",
        "device function {name} is recursive",
        "Rewrite the recursion as a loop; neither NKI nor the interpreter recurse.",
    ),
    DiagnosticKind(
        "C2N1011",
        "DIVERGENT_BARRIER",
        "warning",
        "medium",
        "{barrier} under a thread-dependent condition ({condition})",
        "All threads of a block must reach a barrier; move it out of the branch.",
    ),
    DiagnosticKind(
        "C2N1012",
        "UNRESOLVED_TEMPLATE",
        "note",
        "low",
        "template parameter {name} of {kernel} has no value at any launch site",
        "Launch with explicit template arguments or add an explicit instantiation.",
    ),
    DiagnosticKind(
        "C2N1013",
        "GRID_SYNC",
        "warning",
        "high",
        "grid-wide synchronisation ({name}) has no NKI equivalent",
        "Split the kernel into two launches at the grid sync.",
    ),
    DiagnosticKind(
        "C2N1014",
        "DEVICE_PRINTF",
        "note",
        "low",
        "{name} in device code is dropped by migration",
        "Use nl.device_print in NKI if the output is still needed.",
    ),
    DiagnosticKind(
        "C2N1015",
        "STRUCT_PARAM",
        "note",
        "medium",
        "parameter {name} has struct type {type}",
        "Pass the struct fields as separate scalars or tensors.",
    ),
    DiagnosticKind(
        "C2N1016",
        "UNRESOLVED_ALIAS",
        "note",
        "medium",
        "pointer {name} is not derived from a kernel parameter or shared array",
        "Accesses through it are not attributed to a tensor.",
    ),
    DiagnosticKind(
        "C2N1017",
        "UNKNOWN_LAUNCH_TARGET",
        "note",
        "none",
        "launch of {name}, which is not defined in this file",
        "Analyse the file that defines the kernel.",
    ),
    DiagnosticKind(
        "C2N1018",
        "BAD_LAUNCH_CONFIG",
        "error",
        "low",
        "launch of {name} has {count} configuration argument(s); grid and block are required",
        "Write kernel<<<grid, block[, shared_bytes[, stream]]>>>(...) as nvcc requires.",
    ),
    DiagnosticKind(
        "C2N1019",
        "AMBIGUOUS_COMPARISON",
        "warning",
        "low",
        "`{text}` was parsed as a template argument list (the C++ `a < b && c > d` ambiguity)",
        "Put the comparisons in parentheses: (a < b) && (c > d).",
    ),
    # --- C2N15xx: CUDA interpreter findings (sanitizer-grade) -----------------------
    DiagnosticKind(
        "C2N1501",
        "OOB_ACCESS",
        "error",
        "medium",
        "out-of-bounds access: {detail}",
        "Guard the access with the buffer's size (if (i < n)) or fix the index arithmetic.",
    ),
    DiagnosticKind(
        "C2N1502",
        "UNINITIALIZED_READ",
        "warning",
        "medium",
        "read of uninitialised memory (shared array, local variable or local array): {detail}",
        "Write it before any thread reads it (for shared memory: and __syncthreads() between).",
    ),
    DiagnosticKind(
        "C2N1503",
        "SHARED_RACE",
        "error",
        "medium",
        "shared-memory race: {detail}",
        "Put a __syncthreads() between the conflicting write and read/write.",
    ),
    DiagnosticKind(
        "C2N1504",
        "WARP_MASK",
        "warning",
        "low",
        "warp intrinsic mask names inactive lanes: {detail}",
        "Pass __activemask() or a mask of the lanes that actually reach the call.",
    ),
    DiagnosticKind(
        "C2N1505",
        "MISALIGNED",
        "error",
        "low",
        "misaligned vector access: {detail}",
        "Vector loads (float4) need an address aligned to the vector size.",
    ),
    # --- C2N2xxx: migration (patterns and emission) ----------------------------------
    DiagnosticKind(
        "C2N2001",
        "NO_PATTERN",
        "warning",
        "high",
        "kernel {kernel} matches no supported family ({why})",
        "It is emitted as a skeleton with the CUDA body in comments; port it by hand.",
    ),
    DiagnosticKind(
        "C2N2002",
        "IRREGULAR_GATHER",
        "warning",
        "high",
        "{array} is accessed at the data-dependent index {index} (gather/scatter)",
        "Indirect DMA (an index tile in the partition position) may express it; port by hand.",
    ),
    DiagnosticKind(
        "C2N2003",
        "HISTOGRAM",
        "warning",
        "high",
        "{op} into {array} at a data-dependent index (histogram)",
        "Where the lifter verifies the bin as a function of one integer key (key, key % m, "
        "masks, shifts; at most 512 bins), cuda2nki emits compare-and-count: bins in int32, "
        "matches per bin along the free axis, partitions summed by a ones-vector matmul. "
        "Otherwise, on Trainium: compute each key's bin yourself and count the same way for "
        "tens to hundreds of bins, or sort the keys and count run lengths for thousands.",
    ),
    DiagnosticKind(
        "C2N2004",
        "SCAN",
        "warning",
        "high",
        "prefix scan over {array} (doubling loop at line {line})",
        "A scan the lifter verifies is emitted (each run on a partition, one "
        "nisa.tensor_tensor_scan along the free axis); this one was not: lay each scanned run "
        "on a partition and scan it the same way, and for a scan across runs add a second pass "
        "over the run totals (a triangular ones matmul on the Tensor engine); port by hand.",
    ),
    DiagnosticKind(
        "C2N2005",
        "SORT",
        "warning",
        "high",
        "compare-and-swap network over {array} (sort)",
        "NKI has no sort instruction; port by hand or sort on the host.",
    ),
    DiagnosticKind(
        "C2N2006",
        "NOT_EMITTED",
        "warning",
        "high",
        "{what} is recognised but cannot be emitted automatically",
        "The generated skeleton marks the place; write this part by hand.",
    ),
    DiagnosticKind(
        "C2N2007",
        "NUMERIC_MISMATCH",
        "error",
        "high",
        "generated NKI differs from the CUDA interpreter on {sizes}: {detail}",
        "A bug in cuda2nki's emission for this kernel; please report it with the kernel.",
    ),
    DiagnosticKind(
        "C2N2008",
        "CONSTRAINT_VIOLATION",
        "error",
        "high",
        "generated NKI breaks a Trainium rule: {detail}",
        "A bug in cuda2nki's tiling plan for this kernel; please report it with the kernel.",
    ),
    DiagnosticKind(
        "C2N2009",
        "NO_SPEC",
        "warning",
        "medium",
        "no spec sidecar for {path}, and none could be inferred: {why}",
        "Write <kernel>.toml next to the .cu (see README, Task contract) to get a runnable kernel.",
    ),
    DiagnosticKind(
        "C2N2010",
        "INFERRED_SPEC",
        "note",
        "low",
        "no spec sidecar: inferred the task ({shapes}) and wrote it to {path}",
        "Review the inferred shapes and sizes; keep the file as <kernel>.toml to make them yours.",
    ),
    DiagnosticKind(
        "C2N2011",
        "CUDA_RUN_FAILED",
        "warning",
        "medium",
        "the CUDA original could not be run for the numerical check: {detail}",
        "Fix the CUDA source (it must compile with nvcc), or run with --no-check.",
    ),
    DiagnosticKind(
        "C2N2012",
        "LEGACY_DIALECT",
        "warning",
        "medium",
        "no {family} template for the new `nki` dialect yet: emitted legacy `neuronxcc.nki`",
        "Use an SDK that accepts neuronxcc.nki (<= 2.27), or port loads/stores to slices.",
    ),
    DiagnosticKind(
        "C2N2013",
        "LIFTED",
        "note",
        "low",
        "kernel {kernel} computes `{program}` (lifted from a traced run, verified against the "
        "CUDA interpreter at {sizes}); emitted from that program",
        "Nothing to do: the emitted kernel follows what the CUDA kernel computes.",
    ),
    DiagnosticKind(
        "C2N2014",
        "NOT_LIFTED",
        "warning",
        "high",
        "what kernel {kernel} computes could not be lifted to a tensor program: {why}",
        "Port it by hand, or give a spec whose family the pattern matchers recognise.",
    ),
    DiagnosticKind(
        "C2N2015",
        "UNWRITTEN_BY_ORIGINAL",
        "warning",
        "low",
        "the CUDA original leaves {count} element(s) of {tensor} unwritten or undefined at "
        "{sizes} (its launch or its guards do not cover them, or it stores uninitialised values "
        "there), so they were not compared",
        "Check the host code's grid arithmetic; give a spec whose size sets it covers, or add a "
        "relation (e.g. `N % 1024 == 0`) if the kernel is only meant for such sizes.",
    ),
    DiagnosticKind(
        "C2N2016",
        "SIZES_DROPPED",
        "note",
        "low",
        "the CUDA original does not run at the inferred size sets {sizes} ({why}); the "
        "inferred spec leaves them out",
        "Nothing to do if the kernel is only meant for such sizes; else add size sets it runs "
        "at (and a relation saying which) to the spec.",
    ),
    DiagnosticKind(
        "C2N2017",
        "ORIGINAL_OVER_READS",
        "warning",
        "medium",
        "the CUDA original reads past a shared array at {sizes} ({detail}); its outputs are "
        "the same whatever those reads return (run with two fills), so they were compared, "
        "but on a GPU such a read is undefined behaviour",
        "Bound the read in the CUDA source (e.g. `lane < NUM_WARPS ? smem[lane] : 0`), or size "
        "the shared array to the lanes that read it.",
    ),
    DiagnosticKind(
        "C2N2018",
        "SIZES_ALIGNED",
        "note",
        "low",
        "the CUDA original reads or writes {tensor} in misaligned vectors at {sizes}: it assumes "
        "rows of whole 16-byte vectors, so the inferred spec states `{relation}` and rounds its "
        "size sets to it",
        "Nothing to do if the kernel is only meant for such sizes; else its vector accesses "
        "need a scalar tail for ragged rows.",
    ),
    DiagnosticKind(
        "C2N2019",
        "FLOAT64",
        "warning",
        "high",
        "kernel {kernel} computes in float64 ({tensors}), a type Trainium has no engine or NKI "
        "dtype for: migrated as its float32 variant (the check compares the original's float64 "
        "results, rounded, at float32 tolerance)",
        "Check that float32 accuracy suffices for the kernel's use (long sums, differences of "
        "close values and iterative solvers may not); where it does not, the computation needs "
        "another formulation (compensated sums, mixed precision), not a migration.",
    ),
    DiagnosticKind(
        "C2N2020",
        "FROZEN_SCALAR",
        "warning",
        "high",
        "kernel {kernel} computes `{program}` at every size set tried, but {scalar} (= {expr}) "
        "is {value} at all of them ({use}): what the kernel computes for another value was "
        "never seen, so the program may hold only where {scalar} = {value}; not emitted",
        "Give {scalar} a size of its own in a spec (the tensors it indexes shaped by that size), "
        "so that the size sets vary it; if the kernel is only ever called with {scalar} = "
        "{value}, state it as a value scalar.",
    ),
    # --- C2N3xxx: NKI emulator (the err_* names of migrator/nki/codes.py) -----------
    DiagnosticKind(
        "C2N3001",
        "ERR_NUM_PARTITION_EXCEED_ARCH_LIMIT",
        "error",
        "medium",
        "{detail}",
        "Split or reshape the tile to fit the Trainium limit named in the message.",
    ),
    DiagnosticKind(
        "C2N3002",
        "ERR_NUM_PARTITION_MISMATCH",
        "error",
        "medium",
        "{detail}",
        "Split or reshape the tile to fit the Trainium limit named in the message.",
    ),
    DiagnosticKind(
        "C2N3003",
        "ERR_SIZE_OF_DIMENSION_EXCEED_ARCH_LIMIT",
        "error",
        "medium",
        "{detail}",
        "Split or reshape the tile to fit the Trainium limit named in the message.",
    ),
    DiagnosticKind(
        "C2N3004",
        "ERR_PSUM_TILE_EXCEEDS_BANK",
        "error",
        "medium",
        "{detail}",
        "Split or reshape the tile to fit the Trainium limit named in the message.",
    ),
    DiagnosticKind(
        "C2N3005",
        "ERR_PSUM_CAPACITY_EXCEEDED",
        "error",
        "medium",
        "{detail}",
        "Reduce live tiles or their size (or reuse buffers) so the data fits on chip.",
    ),
    DiagnosticKind(
        "C2N3006",
        "ERR_SBUF_CAPACITY_EXCEEDED",
        "error",
        "medium",
        "{detail}",
        "Reduce live tiles or their size (or reuse buffers) so the data fits on chip.",
    ),
    DiagnosticKind(
        "C2N3007",
        "ERR_UNSUPPORTED_MEMORY",
        "error",
        "medium",
        "{detail}",
        "Split or reshape the tile to fit the Trainium limit named in the message.",
    ),
    DiagnosticKind(
        "C2N3008",
        "ERR_UNSUPPORTED_DTYPE",
        "error",
        "medium",
        "{detail}",
        "Split or reshape the tile to fit the Trainium limit named in the message.",
    ),
    DiagnosticKind(
        "C2N3009",
        "ERR_HBM_TENSOR_WITH_INIT_VALUE_NOT_SUPPORTED",
        "error",
        "medium",
        "{detail}",
        "Split or reshape the tile to fit the Trainium limit named in the message.",
    ),
    DiagnosticKind(
        "C2N3010",
        "ERR_INSUFFICIENT_RANK",
        "error",
        "medium",
        "{detail}",
        "Split or reshape the tile to fit the Trainium limit named in the message.",
    ),
    DiagnosticKind(
        "C2N3011",
        "ERR_UNSUPPORTED_REDUCE_AXIS",
        "error",
        "medium",
        "{detail}",
        "Split or reshape the tile to fit the Trainium limit named in the message.",
    ),
    DiagnosticKind(
        "C2N3012",
        "ERR_TENSOR_ACCESS_OUT_OF_BOUND",
        "error",
        "medium",
        "{detail}",
        "Reduce live tiles or their size (or reuse buffers) so the data fits on chip.",
    ),
    DiagnosticKind(
        "C2N3013",
        "ERR_UNSUPPORTED_MIXING_BASIC_ADVANCED_TENSOR_INDEXING",
        "error",
        "low",
        "{detail}",
        "Fix the NKI call as the message describes.",
    ),
    DiagnosticKind(
        "C2N3014",
        "ERR_INVALID_INDEX",
        "error",
        "low",
        "{detail}",
        "Fix the NKI call as the message describes.",
    ),
    DiagnosticKind(
        "C2N3015",
        "ERR_UNINITIALIZED_INDEX",
        "error",
        "medium",
        "{detail}",
        "Reduce live tiles or their size (or reuse buffers) so the data fits on chip.",
    ),
    DiagnosticKind(
        "C2N3016",
        "ERR_UNINITIALIZED_OUTPUT",
        "error",
        "medium",
        "{detail}",
        "Reduce live tiles or their size (or reuse buffers) so the data fits on chip.",
    ),
    DiagnosticKind(
        "C2N3017",
        "ERR_AFFINE_LOOP_CARRIED_DEPENDENCY",
        "error",
        "medium",
        "{detail}",
        "Use nl.sequential_range for loops whose iterations depend on each other.",
    ),
    DiagnosticKind(
        "C2N3018",
        "ERR_UNEXPECTED_OUTPUT_DEPENDENCIES",
        "error",
        "medium",
        "{detail}",
        "Use nl.sequential_range for loops whose iterations depend on each other.",
    ),
    DiagnosticKind(
        "C2N3019",
        "ERR_SHAPE_MISMATCH",
        "error",
        "low",
        "{detail}",
        "Fix the NKI call as the message describes.",
    ),
    DiagnosticKind(
        "C2N3020",
        "ERR_INVALID_OPERAND",
        "error",
        "low",
        "{detail}",
        "Fix the NKI call as the message describes.",
    ),
    DiagnosticKind(
        "C2N3021",
        "ERR_UNSUPPORTED_OPERATOR",
        "error",
        "low",
        "{detail}",
        "Fix the NKI call as the message describes.",
    ),
    DiagnosticKind(
        "C2N3022",
        "ERR_ACTIVATION_BIAS_INVALID_TYPE",
        "error",
        "medium",
        "{detail}",
        "Split or reshape the tile to fit the Trainium limit named in the message.",
    ),
    DiagnosticKind(
        "C2N3023",
        "ERR_EXCEED_MAX_SUPPORTED_DIMENSION",
        "error",
        "medium",
        "{detail}",
        "Split or reshape the tile to fit the Trainium limit named in the message.",
    ),
    DiagnosticKind(
        "C2N3024",
        "ERR_AMBIGUOUS_TENSOR_TRUTH_VALUE",
        "error",
        "low",
        "{detail}",
        "Fix the NKI call as the message describes.",
    ),
    DiagnosticKind(
        "C2N3025",
        "ERR_INVALID_RESHAPE",
        "error",
        "low",
        "{detail}",
        "Fix the NKI call as the message describes.",
    ),
    DiagnosticKind(
        "C2N3026",
        "ERR_INVALID_PROGRAM_AXIS",
        "error",
        "low",
        "{detail}",
        "Fix the NKI call as the message describes.",
    ),
    DiagnosticKind(
        "C2N3027",
        "ERR_NESTED_KERNEL_WITH_SPMD_GRID",
        "error",
        "low",
        "{detail}",
        "Fix the NKI call as the message describes.",
    ),
    DiagnosticKind(
        "C2N3028",
        "ERR_OUTSIDE_KERNEL",
        "error",
        "low",
        "{detail}",
        "Fix the NKI call as the message describes.",
    ),
    DiagnosticKind(
        "C2N3029",
        "ERR_NOT_EMULATED",
        "error",
        "low",
        "{detail}",
        "Leave the named keyword at its default, or check this kernel on the Neuron toolchain.",
    ),
    DiagnosticKind(
        "C2N3030",
        "ERR_INDEX_TRUTH_VALUE",
        "error",
        "low",
        "{detail}",
        "Combine index predicates with & and |; Python and/or/if on them is always True.",
    ),
    # --- C2N4xxx: scorer findings (migrator/score/rules.py holds title, why, category) --
    DiagnosticKind(
        "C2N4001",
        "SANDBOX_CRASH",
        "error",
        "high",
        "{detail}",
        "Run the file under the emulator and fix the traceback shown.",
    ),
    DiagnosticKind(
        "C2N4002",
        "SANDBOX_TIMEOUT",
        "error",
        "high",
        "{detail}",
        "Remove unbounded loops; the emulator runs one Python step per instruction.",
    ),
    DiagnosticKind(
        "C2N4003",
        "SANDBOX_LIMIT",
        "error",
        "high",
        "{detail}",
        "Tile the problem instead of materialising it whole.",
    ),
    DiagnosticKind(
        "C2N4004",
        "CANDIDATE_LOAD_ERROR",
        "error",
        "high",
        "{detail}",
        "Define the kernel named in the task contract with @nki.jit.",
    ),
    DiagnosticKind(
        "C2N4005",
        "NKI_CONSTRAINT",
        "error",
        "high",
        "{detail}",
        "Follow the emulator message; it names the rule and the fix.",
    ),
    DiagnosticKind(
        "C2N4006",
        "NKI_UNSUPPORTED",
        "error",
        "high",
        "{detail}",
        "Use the supported nl/nisa subset (see docs).",
    ),
    DiagnosticKind(
        "C2N4010",
        "NUMERICS_MISMATCH",
        "error",
        "high",
        "{detail}",
        "Compare the failing trial with the CUDA original; check masks, axes and constants.",
    ),
    DiagnosticKind(
        "C2N4011",
        "OUTPUT_SHAPE",
        "error",
        "high",
        "{detail}",
        "Allocate outputs from the input shapes, never from literals.",
    ),
    DiagnosticKind(
        "C2N4012",
        "OUTPUT_COUNT",
        "error",
        "high",
        "{detail}",
        "Return a tuple of all outputs.",
    ),
    DiagnosticKind(
        "C2N4013",
        "OUTPUT_DTYPE",
        "error",
        "high",
        "{detail}",
        "Allocate the output with the task dtype.",
    ),
    DiagnosticKind(
        "C2N4015",
        "NO_ORACLE",
        "warning",
        "medium",
        "{detail}",
        "Check the spec's sizes and launch.",
    ),
    DiagnosticKind(
        "C2N4020",
        "FRAMEWORK_COMPUTE",
        "error",
        "high",
        "{detail}",
        "Express all compute with nl/nisa inside the @nki.jit kernel.",
    ),
    DiagnosticKind(
        "C2N4021",
        "OUTPUT_NOT_FROM_NKI",
        "error",
        "high",
        "{detail}",
        "Allocate the output with nl.ndarray(..., buffer=nl.shared_hbm) and nl.store into it.",
    ),
    DiagnosticKind(
        "C2N4022",
        "RETURNS_INPUT",
        "error",
        "high",
        "{detail}",
        "Write results to a new HBM tensor.",
    ),
    DiagnosticKind(
        "C2N4023",
        "CONSTANT_OUTPUT",
        "error",
        "high",
        "{detail}",
        "Compute from the inputs.",
    ),
    DiagnosticKind(
        "C2N4024",
        "MODULE_STATE",
        "error",
        "high",
        "{detail}",
        "Keep all state inside the kernel; module constants must be immutable.",
    ),
    DiagnosticKind(
        "C2N4025",
        "INPUT_MUTATED",
        "error",
        "high",
        "{detail}",
        "Write only to outputs (and inout tensors).",
    ),
    DiagnosticKind(
        "C2N4026",
        "MONKEY_PATCH",
        "error",
        "high",
        "{detail}",
        "Do not assign to attributes of nl/nisa/nki/migrator/sys/builtins.",
    ),
    DiagnosticKind(
        "C2N4027",
        "RUNTIME_PATCH",
        "error",
        "high",
        "{detail}",
        "Do not modify library objects.",
    ),
    DiagnosticKind(
        "C2N4028",
        "SANDBOX_ESCAPE",
        "error",
        "high",
        "{detail}",
        "Import only neuronxcc.nki / nki, numpy (dtypes) and math.",
    ),
    DiagnosticKind(
        "C2N4029",
        "PRECISION_DOWNGRADE",
        "error",
        "high",
        "{detail}",
        "Keep float32 tiles, or ask for a low-precision task (--dtype).",
    ),
    DiagnosticKind(
        "C2N4030",
        "SWALLOWED_EXCEPTION",
        "error",
        "high",
        "{detail}",
        "Let errors propagate; 'no output' is a failure.",
    ),
    DiagnosticKind(
        "C2N4031",
        "HARDCODED_SHAPE",
        "warning",
        "medium",
        "{detail}",
        "Read sizes from the input shapes.",
    ),
    DiagnosticKind(
        "C2N4032",
        "RAGGED_EDGE",
        "error",
        "high",
        "{detail}",
        "Mask the last tile (mask=idx < N) or handle the tail.",
    ),
    DiagnosticKind(
        "C2N4040",
        "OUTPUT_INCOMPLETE",
        "error",
        "high",
        "{detail}",
        "Check loop bounds and masks so the last tile is stored.",
    ),
    DiagnosticKind(
        "C2N4041",
        "INPUT_UNUSED",
        "error",
        "high",
        "{detail}",
        "Load and use the tensor as the CUDA code does.",
    ),
    DiagnosticKind(
        "C2N4042",
        "SCALAR_UNUSED",
        "error",
        "high",
        "{detail}",
        "Use the keyword argument where the CUDA code uses the parameter.",
    ),
    DiagnosticKind(
        "C2N4043",
        "SIGNATURE",
        "error",
        "high",
        "{detail}",
        "Follow the calling convention in the task contract.",
    ),
    DiagnosticKind(
        "C2N4044",
        "DISTRIBUTION",
        "error",
        "high",
        "{detail}",
        "Replicate the CUDA kernel's numerical safeguards.",
    ),
    DiagnosticKind(
        "C2N4045",
        "ACCUMULATION_ORDER",
        "note",
        "low",
        "{detail}",
        "Nothing to do if within the policy.",
    ),
    DiagnosticKind(
        "C2N4046",
        "CONSTRUCT_MISSING",
        "warning",
        "medium",
        "{detail}",
        "Use the NKI op for the same function (nl.exp, nl.tanh, nl.rsqrt, nl.max, ...) or "
        "explain the substitution in a comment.",
    ),
    DiagnosticKind(
        "C2N4050",
        "PARTITION_UNDERUSE",
        "warning",
        "medium",
        "{detail}",
        "Put the long independent axis on the partition dimension (128 rows per tile).",
    ),
    DiagnosticKind(
        "C2N4051",
        "SMALL_DMA",
        "warning",
        "medium",
        "{detail}",
        "Load contiguous rows of >= 512 bytes; transpose on-chip instead of strided loads.",
    ),
    DiagnosticKind(
        "C2N4052",
        "HBM_TRAFFIC",
        "warning",
        "medium",
        "{detail}",
        "Keep reused tiles in SBUF; fuse passes.",
    ),
    DiagnosticKind(
        "C2N4053",
        "SLOWER_THAN_REFERENCE",
        "warning",
        "medium",
        "{detail}",
        "See the hotspots; overlap DMA with compute and balance engines.",
    ),
    DiagnosticKind(
        "C2N4054",
        "FP32_MATMUL",
        "note",
        "low",
        "{detail}",
        "Use bf16 operands with fp32 PSUM accumulation if the task allows it.",
    ),
    DiagnosticKind(
        "C2N4055",
        "PSUM_PRESSURE",
        "note",
        "low",
        "{detail}",
        "Copy results out of PSUM earlier.",
    ),
    DiagnosticKind(
        "C2N4056",
        "LOW_ROOFLINE",
        "note",
        "low",
        "{detail}",
        "Overlap DMA with compute; use larger tiles.",
    ),
    DiagnosticKind(
        "C2N4057",
        "EMULATOR_FINDING",
        "warning",
        "medium",
        "{detail}",
        "See the message.",
    ),
    DiagnosticKind(
        "C2N4058",
        "ENGINES_SERIALISED",
        "warning",
        "medium",
        "{detail}",
        "Let independent tiles overlap: affine_range without loop-carried dependencies, "
        "tiles allocated inside the loop (multi-buffering), loads issued before compute.",
    ),
    DiagnosticKind(
        "C2N4060",
        "NO_COMMENTS",
        "note",
        "low",
        "{detail}",
        "Add `# from kernel.cu:LINE` comments.",
    ),
)

REGISTRY: dict[str, DiagnosticKind] = {}
for _row in _ROWS:
    if _row.id in REGISTRY:  # the table is the single source of truth; IDs never repeat
        raise RuntimeError(f"duplicate diagnostic id {_row.id}")
    REGISTRY[_row.id] = _row
BY_NAME: dict[str, DiagnosticKind] = {r.name: r for r in _ROWS}


class Span(BaseModel):
    """A source range; lines and columns are 1-based, in the original (unpreprocessed) file."""

    model_config = ConfigDict(frozen=True)

    file: str
    line: int
    col: int
    end_line: int | None = None
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class Diagnostic(BaseModel):
    """One occurrence of a registry row, with its arguments and where it happened."""

    model_config = ConfigDict(frozen=True)

    id: str
    severity: Severity
    effort: Effort
    message: str
    help: str
    span: Span | None = None
    args: dict[str, Any] = {}

    def render(self) -> str:
        where = f"{self.span}: " if self.span else ""
        return f"{where}{self.severity}: {self.id}: {self.message}"


def diagnostics_text(e: BaseException, sep: str = "; ") -> str | None:
    """The rendered diagnostics an exception carries (SourceError and kin), or None."""
    diags = getattr(e, "diagnostics", None)
    return sep.join(d.render() for d in diags) if diags else None


def make(name_or_id: str, span: Span | None = None, **args: Any) -> Diagnostic:
    """Build a diagnostic from its registry row; missing or unknown fields are a bug."""
    kind = REGISTRY.get(name_or_id) or BY_NAME.get(name_or_id)
    if kind is None:
        raise KeyError(f"unknown diagnostic {name_or_id!r}")
    if kind.retired:
        raise ValueError(f"diagnostic {kind.id} is retired")
    missing = kind.fields - set(args)
    extra = set(args) - kind.fields
    if missing or extra:
        raise TypeError(f"{kind.id}: missing fields {sorted(missing)}, extra {sorted(extra)}")
    return Diagnostic(
        id=kind.id,
        severity=kind.severity,
        effort=kind.effort,
        message=kind.message.format(**args),
        help=kind.help,
        span=span,
        args=args,
    )


def markdown_table() -> str:
    """The registry as a Markdown table (docs/diagnostics.md is generated from this)."""
    lines = [
        "# Diagnostics",
        "",
        "Generated from `migrator/diagnostics.py` by `migrate diagnostics --markdown`.",
        "",
        "| ID | Name | Severity | Effort | Message | What to do |",
        "|---|---|---|---|---|---|",
    ]
    for r in _ROWS:
        name = f"{r.name} (retired)" if r.retired else r.name
        msg = r.message.replace("|", "\\|")
        lines.append(f"| {r.id} | {name} | {r.severity} | {r.effort} | {msg} | {r.help} |")
    return "\n".join(lines) + "\n"
