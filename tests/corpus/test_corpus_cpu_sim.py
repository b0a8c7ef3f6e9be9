"""Run each corpus kernel on the CPU and compare it with its numpy reference.

Independent of the project's CUDA interpreter: the `.cu` file is compiled with the host C++
compiler against `cpu_sim/sim_cuda.h` (one fiber per CUDA thread, see the header), the task's own
host launch function is called with the spec's tensors and scalars, and the test checks that

- the launch it makes (grid, block, dynamic shared bytes) equals the spec's `[launch]`, and
- every `out`/`inout` tensor matches `reference()` for every published size set.

`out` buffers start as NaN, so elements the kernel never writes fail the comparison. Skipped when
no `g++` is available.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from migrator.contract import TaskSpec, load_spec, make_inputs, np_dtype

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parents[1] / "corpus"
SIM = HERE / "cpu_sim"
SPEC_PATHS = sorted(CORPUS.glob("*.toml"))
CXX = shutil.which("g++")

pytestmark = pytest.mark.skipif(
    CXX is None or not sys.platform.startswith("linux"),
    reason="needs g++ and ucontext (Linux) for the CPU simulator",
)


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", " ", src)


def _host_launcher(src: str, kernel: str) -> tuple[str, list[tuple[str, str]]]:
    """The host function whose body launches `kernel`, with its (name, declaration) params."""
    clean = _strip_comments(src)
    header = re.compile(
        r"^(?:static\s+)?(?:inline\s+)?(?:void|cudaError_t)\s+(\w+)\s*\(([^)]*)\)\s*\{", re.M
    )
    launch = re.compile(re.escape(kernel) + r"\s*(<[^<>;]*>)?\s*<<<")
    for m in header.finditer(clean):
        end = clean.find("\n}", m.end())
        if launch.search(clean[m.end() : end]):
            params = []
            for decl in m.group(2).split(","):
                decl = " ".join(decl.split())
                params.append((re.search(r"(\w+)$", decl).group(1), decl))
            return m.group(1), params
    raise AssertionError(f"no host function launches {kernel}")


def _for_cpu(src: str) -> str:
    src = re.sub(
        r"extern\s+__shared__\s+(\w+)\s+(\w+)\s*\[\s*\]\s*;",
        r"\1* \2 = reinterpret_cast<\1*>(g_sim.dyn_smem);",
        src,
    )
    return re.sub(
        r"(\w+(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\((.*?)\);",
        r"sim_launch(\2, [&] { \1(\3); });",
        src,
        flags=re.S,
    )


C_TYPES = {
    "float32": "float",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "int32": "int",
    "uint32": "unsigned int",
}


def _build(spec: TaskSpec, workdir: Path) -> ctypes.CDLL:
    cu = spec.cuda_source_path()
    src = cu.read_text(encoding="utf-8")
    func, params = _host_launcher(src, spec.kernel.name)
    tensors = {t.cuda_param: i for i, t in enumerate(spec.tensors)}
    # a host pointer the launcher copies into a `__constant__` table: that table's tensor
    for sym, host in re.findall(r"cudaMemcpyToSymbol\(\s*(\w+)\s*,\s*(\w+)", src):
        if sym in tensors:
            tensors[host] = tensors[sym]
    scalars = {s.cuda_param: i for i, s in enumerate(spec.scalars)}
    args = []
    for name, decl in params:
        if "cudaStream_t" in decl:
            args.append("nullptr")
        elif name in tensors:
            ctype = C_TYPES[spec.tensors[tensors[name]].dtype]
            args.append(f"({ctype}*)ptrs[{tensors[name]}]")
        elif name in scalars:
            args.append(f"scal[{scalars[name]}]")
        elif name in spec.sizes:  # a host-only size (a batch count that only shapes the grid)
            args.append(f"scal[{len(spec.scalars) + list(spec.sizes).index(name)}]")
        else:
            raise AssertionError(f"{cu.name}: host parameter {name!r} is not in the spec")
    (workdir / f"{cu.stem}.cpp").write_text(_for_cpu(src), encoding="utf-8")
    harness = workdir / f"{cu.stem}_harness.cpp"
    harness.write_text(
        f'#include "{cu.stem}.cpp"\n'
        'extern "C" int c2n_run(void** ptrs, const double* scal, int* cfg) {\n'
        "  g_sim.record = cfg; g_sim.launches = 0; g_sim.error = 0;\n"
        f"  {func}({', '.join(args)});\n"
        "  return g_sim.error;\n}\n",
        encoding="utf-8",
    )
    lib = workdir / f"lib{cu.stem}.so"
    cmd = [CXX, "-std=c++17", "-O1", "-w", "-shared", "-fPIC", f"-I{SIM}", "-o", str(lib)]
    proc = subprocess.run([*cmd, str(harness)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return ctypes.CDLL(str(lib))


@pytest.mark.parametrize("spec_path", SPEC_PATHS, ids=[p.stem for p in SPEC_PATHS])
def test_kernel_matches_reference_on_cpu(spec_path: Path, tmp_path: Path) -> None:
    spec = load_spec(spec_path)
    lib = _build(spec, tmp_path)
    ref = spec.reference_function()
    for sizes in spec.all_size_sets():
        inputs = make_inputs(spec, sizes, seed=1)
        bufs = []
        for t in spec.tensors:
            assert t.dtype in C_TYPES, f"the CPU harness has no C type for {t.dtype}"
            if t.role == "out":
                dt = np_dtype(t.dtype)
                fill = np.nan if dt.kind in "fV" else np.iinfo(dt).max  # poison unwritten outputs
                bufs.append(np.full(spec.shape_of(t, sizes), fill, dtype=dt))
            else:
                bufs.append(np.ascontiguousarray(inputs[t.name]).copy())
        ptrs = (ctypes.c_void_p * len(bufs))(*[b.ctypes.data for b in bufs])
        values = [float(spec.scalar_value(s, sizes)) for s in spec.scalars]
        values += [float(sizes[n]) for n in spec.sizes]  # host-only sizes, after the scalars
        scal = (ctypes.c_double * max(1, len(values)))(*values)
        cfg = (ctypes.c_int * 7)()
        assert lib.c2n_run(ptrs, scal, cfg) == 0, f"{sizes}: barrier deadlock in the simulator"

        launched = (tuple(cfg[0:3]), tuple(cfg[3:6]), cfg[6])
        assert launched == spec.launch_config(sizes), f"{sizes}: host launch differs from [launch]"

        args = [inputs[t.name] for t in spec.inputs_in_order]
        expected = ref(*args, **{s.name: s.value for s in spec.value_scalars})
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = [b for b, t in zip(bufs, spec.tensors, strict=True) if t.role != "in"]
        for t, g, e in zip(spec.outputs_in_order, got, expected, strict=True):
            # 16-bit outputs: the float64 reference may round the other way (one ulp)
            tol = (
                1e-4
                if t.dtype not in ("float16", "bfloat16")
                else 2.0 ** -(7 if t.dtype == "bfloat16" else 10)
            )
            np.testing.assert_allclose(
                g.astype(np.float64),
                np.asarray(e).astype(np.float64),
                rtol=tol,
                atol=tol * 1e-1,
                err_msg=f"{t.name} {sizes}",
            )
