"""Check the CUDA interpreter against a real NVIDIA GPU, kernel by kernel, in ulps.

Usage::

    .venv/bin/python tools/gpu_check.py [--corpus DIR] [--only NAME] [--size-set I]
        [--keep DIR] [--compile-only] [--arch ARCH]

For every corpus kernel with a spec sidecar (`corpus/*.toml`) the tool writes the spec's inputs
(and the NaN-filled initial `out` tensors) as raw `.bin` files, generates a small host harness
(`main` reads the files, copies them to the device, launches the spec's kernel with the spec's
launch configuration and template arguments, copies the `out`/`inout` tensors back and writes
them), compiles it with nvcc twice (default `--fmad=true`, and `--fmad=false`), runs both, and
compares each output with the interpreter run on the same inputs with the matching
`InterpOptions(fmad=...)`. The table gives the largest difference in units in the last place
per output (integers: absolute difference; NaN against non-NaN: "nan").

Needs `nvcc` on PATH and a GPU (`nvidia-smi -L`); without them it says so and exits with
status 2. `--compile-only` needs only nvcc: it generates and compiles every harness (no run, no
comparison), a check that the generated C++ is valid. Exit status 1 when a harness fails to
compile or run. The harness generation and the ulp comparison are unit-tested on the CPU in
`tests/tools/test_gpu_check.py`.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from migrator.contract import TaskSpec, load_spec, make_inputs, np_dtype
from migrator.cuda.interp import InterpOptions
from migrator.cuda.interp.runner import program_for
from migrator.cuda.interp.spec_run import run_spec_full
from migrator.cuda.parse import parse_file

ROOT = Path(__file__).resolve().parents[1]
NO_DEVICE = 2

# numpy dtype name -> C++ element type in the harness
C_TYPES = {
    "float32": "float",
    "float64": "double",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "int8": "signed char",
    "uint8": "unsigned char",
    "int16": "short",
    "uint16": "unsigned short",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
    "uint64": "unsigned long long",
    "bool": "bool",
}


ML_FLOATS = ("bfloat16", "float8_e4m3fn", "float8_e5m2")  # ml_dtypes floats (numpy kind 'V')


def c_type(dtype: np.dtype) -> str:
    try:
        return C_TYPES[np.dtype(dtype).name]
    except KeyError:
        raise ValueError(f"no C type for dtype {np.dtype(dtype).name}") from None


def kernel_param_names(spec: TaskSpec) -> list[str]:
    """The kernel's parameter names in declaration order (from the .cu file)."""
    prog = program_for(parse_file(spec.cuda_source_path()))
    fn = prog.kernel(spec.kernel.name)
    names = []
    for p in fn.params:
        node = p.child_by_field_name("declarator")
        while node is not None and node.type != "identifier":
            inner = node.child_by_field_name("declarator")
            node = inner if inner is not None else (node.named_children or [None])[-1]
        if node is None:
            raise ValueError(f"{spec.kernel.name}: unnamed parameter {prog.parsed.text(p)!r}")
        names.append(prog.parsed.text(node))
    return names


def _scalar_literal(ctype: str, value: object) -> str:
    if ctype in ("float", "double"):
        return f"({ctype}){float(value)!r}"  # type: ignore[arg-type]
    if ctype in ("__half", "__nv_bfloat16"):
        return f"({ctype})(float){float(value)!r}"  # type: ignore[arg-type]
    if ctype == "bool":
        return "true" if value else "false"
    return f"({ctype}){int(value)}LL"  # type: ignore[call-overload]


@dataclass
class Harness:
    """Generated C++ plus what the runner needs to feed and read it."""

    source: str
    tensors: dict[str, np.ndarray]  # file stem -> initial contents (inputs and out tensors)
    outputs: list[str]  # stems copied back, spec output order


def generate_harness(spec: TaskSpec, sizes: dict[str, int], seed: int = 0) -> Harness:
    """The host harness for one spec and size set (inputs from `make_inputs(spec, sizes, seed)`,
    `out` tensors NaN-filled as `run_spec` starts them)."""
    ins = make_inputs(spec, sizes, seed)
    tensors: dict[str, np.ndarray] = {}
    by_param: dict[str, str] = {}
    lines_alloc: list[str] = []
    lines_back: list[str] = []
    for t in spec.tensors:
        dt = np_dtype(t.dtype)
        if t.role == "out":
            fill = np.nan if np.issubdtype(dt, np.floating) else 0
            arr = np.full(spec.shape_of(t, sizes), fill, dtype=dt)
        else:
            arr = ins[t.name]
        tensors[t.name] = np.ascontiguousarray(arr)
        ct = c_type(dt)
        nbytes = arr.size * dt.itemsize
        lines_alloc += [
            f"  // {t.role} {t.name}: {dt.name}{list(arr.shape)} -> parameter {t.cuda_param}",
            f'  {ct}* d_{t.name} = static_cast<{ct}*>(to_device(dir, "{t.name}", {nbytes}));',
        ]
        by_param[t.cuda_param] = f"d_{t.name}"
        if t.role in ("out", "inout"):
            lines_back.append(f'  from_device(dir, "{t.name}", d_{t.name}, {nbytes});')
    for s in spec.scalars:
        by_param[s.cuda_param] = _scalar_literal(
            c_type(np_dtype(s.dtype)), spec.scalar_value(s, sizes)
        )
    params = kernel_param_names(spec)
    missing = [p for p in params if p not in by_param]
    if missing:
        raise ValueError(f"{spec.kernel.name}: spec gives no value for parameter(s) {missing}")
    grid, block, smem = spec.launch_config(sizes)
    targs = spec.kernel.template_args
    tmpl = f"<{', '.join(str(a) for a in targs)}>" if targs else ""
    call_args = ", ".join(by_param[p] for p in params)
    src_path = spec.cuda_source_path().resolve()
    spec_name = Path(spec.path or "").name
    source = f"""// Generated by tools/gpu_check.py for {spec.kernel.name} ({spec_name})
// sizes: {sizes}
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define main c2n_corpus_main  // a corpus file's own main, if any, must not clash
#include "{src_path}"
#undef main

#define CHECK(x)                                                                  \\
  do {{                                                                            \\
    cudaError_t err_ = (x);                                                       \\
    if (err_ != cudaSuccess) {{                                                    \\
      std::fprintf(stderr, "%s failed: %s\\n", #x, cudaGetErrorString(err_));      \\
      std::exit(1);                                                               \\
    }}                                                                             \\
  }} while (0)

static void* to_device(const char* dir, const char* name, size_t bytes) {{
  char path[4096];
  std::snprintf(path, sizeof path, "%s/%s.bin", dir, name);
  FILE* f = std::fopen(path, "rb");
  if (!f) {{ std::fprintf(stderr, "cannot read %s\\n", path); std::exit(1); }}
  void* host = std::malloc(bytes ? bytes : 1);
  if (std::fread(host, 1, bytes, f) != bytes) {{
    std::fprintf(stderr, "short %s\\n", path);
    std::exit(1);
  }}
  std::fclose(f);
  void* dev = nullptr;
  CHECK(cudaMalloc(&dev, bytes ? bytes : 1));
  CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
  std::free(host);
  return dev;
}}

static void from_device(const char* dir, const char* name, const void* dev, size_t bytes) {{
  char path[4096];
  std::snprintf(path, sizeof path, "%s/out_%s.bin", dir, name);
  void* host = std::malloc(bytes ? bytes : 1);
  CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
  FILE* f = std::fopen(path, "wb");
  if (!f || std::fwrite(host, 1, bytes, f) != bytes) {{
    std::fprintf(stderr, "cannot write %s\\n", path);
    std::exit(1);
  }}
  std::fclose(f);
  std::free(host);
}}

int main(int argc, char** argv) {{
  if (argc != 2) {{ std::fprintf(stderr, "usage: %s DIR\\n", argv[0]); return 2; }}
  const char* dir = argv[1];
{chr(10).join(lines_alloc)}
  dim3 grid({grid[0]}, {grid[1]}, {grid[2]});
  dim3 block({block[0]}, {block[1]}, {block[2]});
  {spec.kernel.name}{tmpl}<<<grid, block, {smem}>>>({call_args});
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
{chr(10).join(lines_back)}
  return 0;
}}
"""
    outputs = [t.name for t in spec.outputs_in_order]
    return Harness(source, tensors, outputs)


# --- comparison ----------------------------------------------------------------------------
def ulp_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per element |a - b| in units in the last place (floats), or |a - b| (integers).

    Floats are mapped to integers that are ordered like the floats (sign-magnitude to two's
    complement), so +0 and -0 are 0 ulp apart and adjacent floats 1 ulp. NaN against NaN is 0;
    NaN against a number is inf.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        raise ValueError(f"cannot compare {a.dtype}{a.shape} with {b.dtype}{b.shape}")
    if not (np.issubdtype(a.dtype, np.floating) or a.dtype.name in ML_FLOATS):
        return np.abs(a.astype(np.float64) - b.astype(np.float64))
    bits = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    oa, ob = _ordered(a.view(bits)), _ordered(b.view(bits))
    with np.errstate(over="ignore"):
        exact = np.abs(oa - ob).astype(np.float64)  # exact unless the signs differ hugely
    rough = np.abs(oa.astype(np.float64) - ob.astype(np.float64))
    d = np.where((oa < 0) == (ob < 0), exact, rough)
    na, nb = _isnan(a), _isnan(b)
    d[na & nb] = 0.0
    d[na ^ nb] = np.inf
    return d


def _ordered(i: np.ndarray) -> np.ndarray:
    wide = i.astype(np.int64)
    top = np.int64(np.iinfo(i.dtype).min)  # the sign bit
    return np.where(wide < 0, top - wide, wide)


def _isnan(x: np.ndarray) -> np.ndarray:
    return np.isnan(x.astype(np.float64))


def max_ulp(a: np.ndarray, b: np.ndarray) -> float:
    d = ulp_diff(a, b)
    return float(d.max()) if d.size else 0.0


# --- running -------------------------------------------------------------------------------
def device_problem() -> str | None:
    """Why this machine cannot run the check (None: nvcc and a GPU are present)."""
    if shutil.which("nvcc") is None:
        return "nvcc not found on PATH"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "nvidia-smi not found (no NVIDIA driver)"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"nvidia-smi failed: {e}"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return f"no GPU visible to nvidia-smi ({(out.stderr or out.stdout).strip()[:200]})"
    return None


def compile_harness(cu: Path, exe: Path, fmad: bool, arch: str, compile_only: bool) -> None:
    cmd = ["nvcc", "-O2", "-std=c++17", f"-arch={arch}", f"--fmad={'true' if fmad else 'false'}"]
    cmd += ["-c", str(cu), "-o", str(exe)] if compile_only else [str(cu), "-o", str(exe)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{done.stderr.strip()}")


@dataclass
class Row:
    kernel: str
    output: str
    ulp_fmad: str
    ulp_nofmad: str
    note: str = ""


def _fmt(u: float) -> str:
    return "nan" if u == np.inf else f"{u:.0f}"


def check_spec(
    spec_path: Path, work: Path, size_set: int, arch: str, compile_only: bool
) -> list[Row]:
    spec = load_spec(spec_path)
    sets = spec.all_size_sets()
    sizes = sets[min(size_set, len(sets) - 1)]
    h = generate_harness(spec, sizes, seed=size_set)
    d = work / spec_path.stem
    d.mkdir(parents=True, exist_ok=True)
    cu = d / "harness.cu"
    cu.write_text(h.source)
    for name, arr in h.tensors.items():
        arr.tofile(d / f"{name}.bin")
    results: dict[bool, dict[str, float]] = {}
    for fmad in (True, False):
        exe = d / (f"harness_fmad{int(fmad)}" + (".o" if compile_only else ""))
        compile_harness(cu, exe, fmad, arch, compile_only)
        if compile_only:
            continue
        run = subprocess.run([str(exe), str(d)], capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise RuntimeError(f"{exe.name} failed: {run.stderr.strip()}")
        interp = run_spec_full(spec, sizes, seed=size_set, options=InterpOptions(fmad=fmad))
        per: dict[str, float] = {}
        for name, mine in zip(h.outputs, interp.outputs, strict=True):
            gpu = np.fromfile(d / f"out_{name}.bin", dtype=mine.dtype).reshape(mine.shape)
            per[name] = max_ulp(mine, gpu)
        results[fmad] = per
    if compile_only:
        return [Row(spec.kernel.name, ", ".join(h.outputs), "-", "-", "compiled")]
    return [
        Row(spec.kernel.name, name, _fmt(results[True][name]), _fmt(results[False][name]))
        for name in h.outputs
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "corpus")
    ap.add_argument("--only", action="append", help="spec stem(s) to check")
    ap.add_argument("--size-set", type=int, default=0, help="index into the spec's size sets")
    ap.add_argument("--keep", type=Path, help="keep harnesses and .bin files in this directory")
    ap.add_argument("--compile-only", action="store_true", help="generate and compile only")
    ap.add_argument("--arch", default="native", help="nvcc -arch (default: native)")
    args = ap.parse_args(argv)
    problem = (
        ("nvcc not found on PATH" if shutil.which("nvcc") is None else None)
        if args.compile_only
        else device_problem()
    )
    if problem is not None:
        print(f"gpu_check: cannot run here: {problem}", file=sys.stderr)
        return NO_DEVICE
    if args.compile_only and args.arch == "native":
        args.arch = "sm_80"  # nothing to detect without a GPU
    specs = sorted(args.corpus.glob("*.toml"))
    if args.only:
        specs = [s for s in specs if s.stem in args.only]
    rows: list[Row] = []
    failed = 0
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        work = args.keep or Path(tmp)
        for sp in specs:
            try:
                rows += check_spec(sp, work, args.size_set, args.arch, args.compile_only)
            except Exception as e:  # report and go on: one table for the whole corpus
                failed += 1
                rows.append(Row(sp.stem, "-", "-", "-", f"FAILED: {str(e).splitlines()[0]}"))
                print(f"--- {sp.stem}:\n{e}", file=sys.stderr)
    print(f"{'kernel':<28}{'output':<14}{'ulp fmad':>10}{'ulp no-fmad':>13}  note")
    for r in rows:
        print(f"{r.kernel:<28}{r.output:<14}{r.ulp_fmad:>10}{r.ulp_nofmad:>13}  {r.note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
