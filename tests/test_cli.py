"""End-to-end tests of the `migrate` console script (run as a subprocess, like a user would)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus"


# Not the repository root: `python -m` puts the working directory first on sys.path, and the
# source tree's `migrator/` lacks `migrator.patterns`/`migrator.templates` (mapped at install).
NEUTRAL_CWD = Path(tempfile.gettempdir())


def run(*args: str, cwd: Path = NEUTRAL_CWD) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "migrator.cli", *args],
        capture_output=True, text=True, cwd=cwd, timeout=120,
    )  # fmt: skip


def test_version_and_help() -> None:
    from migrator import __version__

    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"cuda2nki {__version__}"
    r = run("--help")
    assert r.returncode == 0 and "inspect" in r.stdout and "migrate KERNEL.cu" in r.stdout


def test_inspect_human_summary() -> None:
    r = run("inspect", str(CORPUS / "reduce_sum_shared.cu"))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "__global__ void reduce_sum_shared_kernel" in out
    assert "partial" in out and "out" in out
    assert "float sdata[256]  (1024 B)" in out
    assert "__syncthreads x2" in out
    assert "reduce_sum_shared_kernel<256><<<blocks, 256, 0, stream>>>" in out


def test_inspect_json_is_the_ir() -> None:
    r = run("inspect", "--json", str(CORPUS / "matmul_naive.cu"))
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["ir_version"] == "1.0"
    (k,) = data["kernels"]
    assert [p["role"] for p in k["params"]] == ["in", "in", "out", "scalar", "scalar", "scalar"]


def test_inspect_one_kernel_and_unknown_kernel() -> None:
    r = run("inspect", "--kernel", "relu_kernel", str(CORPUS / "gelu.cu"))
    assert r.returncode == 0 and "relu_kernel" in r.stdout and "gelu_kernel" not in r.stdout
    r = run("inspect", "--kernel", "nope", str(CORPUS / "gelu.cu"))
    assert (
        r.returncode == 2 and "no kernel named 'nope'" in r.stderr and "Traceback" not in r.stderr
    )


def test_main_job_migrates_a_corpus_kernel(tmp_path: Path) -> None:
    r = run(str(CORPUS / "vector_add.cu"), "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "vector_add_kernel: complete (elementwise/1d)" in r.stdout and "check pass" in r.stdout
    kernel = tmp_path / "vector_add_nki.py"
    assert "@nki.jit" in kernel.read_text()
    report = json.loads((tmp_path / "vector_add_migration.json").read_text())
    assert report["kernels"][0]["status"] == "complete"
    assert report["kernels"][0]["check"]["ok"] is True
    assert (tmp_path / "vector_add_migration.md").read_text().startswith("# Migration report")
    # the emitted file checks itself against the CUDA original when run
    r = subprocess.run([sys.executable, str(kernel)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr


def test_main_job_without_family_writes_a_skeleton(tmp_path: Path) -> None:
    src = tmp_path / "hist.cu"
    src.write_text(
        "__global__ void hist(const int* keys, int* bins, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) atomicAdd(&bins[keys[i]], 1);\n}\n"
    )
    r = run(str(src), "-o", str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr  # partial: a skeleton with diagnostics
    skeleton = (tmp_path / "hist_nki.py").read_text()
    assert "C2N2003" in skeleton and "raise NotImplementedError" in skeleton
    compile(skeleton, "hist_nki.py", "exec")  # valid Python


def test_syntax_error_reports_position_with_caret(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k(float* x) {\n  x[0] = ;\n}\n")
    r = run("inspect", str(bad))
    assert r.returncode == 2
    assert f"{bad}:2:8: error: C2N1001" in r.stderr
    assert "  x[0] = ;" in r.stderr and "^" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize(
    ("content", "code"),
    [(b"", "C2N0003"), (b"\x00\x01\x02binary", "C2N0002"), (b"// \xff\xfe\n", "C2N0005")],
)
def test_bad_files_get_clear_errors(tmp_path: Path, content: bytes, code: str) -> None:
    f = tmp_path / "k.cu"
    f.write_bytes(content)
    r = run("inspect", str(f))
    assert r.returncode == 2 and code in r.stderr and "Traceback" not in r.stderr


def test_missing_file_and_bad_usage(tmp_path: Path) -> None:
    r = run("inspect", str(tmp_path / "missing.cu"))
    assert r.returncode == 2 and "C2N0001" in r.stderr
    r = run("inspect")
    assert r.returncode == 2 and "required" in r.stderr
    r = run("inspect", "-D", "1BAD", str(CORPUS / "saxpy.cu"))
    assert r.returncode == 2 and "not a macro name" in r.stderr


def test_include_dirs_and_defines(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "cfg.h").write_text("#define BS 64\n")
    src = tmp_path / "k.cu"
    src.write_text(
        '#include "cfg.h"\n#ifdef WIDE\n#define N2 (BS*2)\n#else\n#define N2 BS\n#endif\n'
        "__global__ void k(float* x) { __shared__ float s[N2]; s[threadIdx.x] = x[0]; }\n"
    )
    r = run("inspect", "-I", str(tmp_path / "inc"), "-D", "WIDE", str(src))
    assert r.returncode == 0, r.stderr
    assert "float s[128]" in r.stdout


def test_diagnostics_docs_are_current() -> None:
    r = run("diagnostics", "--markdown")
    assert r.returncode == 0
    assert (ROOT / "docs" / "diagnostics.md").read_text() == r.stdout, (
        "docs/diagnostics.md is stale: run `migrate diagnostics --markdown > docs/diagnostics.md`"
    )


def test_profile_runs_an_nki_kernel_file(tmp_path: Path) -> None:
    import numpy as np

    kernel = tmp_path / "k_nki.py"
    kernel.write_text(
        "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n\n\n"
        "@nki.jit\ndef double(a):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.load(a[0:128, 0:256])\n"
        "    nl.store(out[0:128, 0:256], value=nl.multiply(t, 2.0))\n"
        "    return out\n"
    )
    a = tmp_path / "a.npy"
    np.save(a, np.ones((128, 256), np.float32))
    r = run("profile", str(kernel), "--kernel", "double", "--inputs", str(a), "--json")
    assert r.returncode == 0, r.stderr
    prof = json.loads(r.stdout)
    assert prof["instructions"] >= 3 and prof["bottleneck"] in ("dma", "vector", "scalar")


def test_run_executes_a_corpus_kernel_and_matches_numpy(tmp_path: Path) -> None:
    import numpy as np

    r = run("run", str(CORPUS / "vector_add.cu"), "--sizes", "N=1000", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    c = np.load(tmp_path / "c.npy")
    assert c.shape == (1000,) and np.isfinite(c).all()


def test_a_kernel_without_host_code_migrates_from_one_command_line(tmp_path: Path) -> None:
    """No spec, no launch site: the diagnostic names the command line, and that command
    (--grid/--block in the kernel's parameters, --sizes for a size set) suffices."""
    cu = tmp_path / "scale.cu"
    cu.write_text(
        "__global__ void scale_rows(float* y, const float* x, const float* s, int rows,\n"
        "                           int cols) {\n"
        "  int c = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  int r = blockIdx.y * blockDim.y + threadIdx.y;\n"
        "  if (r < rows && c < cols) y[r * cols + c] = x[r * cols + c] * s[r];\n}\n"
    )
    r = run(str(cu), "-o", str(tmp_path / "a"))
    assert r.returncode == 1
    assert "--grid" in r.stdout and "--block" in r.stdout and "(rows, cols)" in r.stdout
    grid = "(cols + 31) / 32, (rows + 7) / 8"
    r = run(str(cu), "-o", str(tmp_path / "b"), "--grid", grid, "--block", "32, 8",
            "--sizes", "rows=300,cols=77")  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "complete" in r.stdout and "check pass" in r.stdout
    r = run(str(cu), "-o", str(tmp_path / "c"), "--grid", "4")
    assert r.returncode == 2 and "--grid and --block go together" in r.stderr


def test_run_infers_the_spec_as_migrate_does(tmp_path: Path) -> None:
    cu = tmp_path / "vadd.cu"
    cu.write_text(
        "__global__ void vadd(const float* A, const float* B, float* C, int numElements) {\n"
        "  int i = blockDim.x * blockIdx.x + threadIdx.x;\n"
        "  if (i < numElements) C[i] = A[i] + B[i];\n}\n"
        "int main(void) {\n  int numElements = 5000;\n  float *d_A, *d_B, *d_C;\n"
        "  vadd<<<(numElements + 255) / 256, 256>>>(d_A, d_B, d_C, numElements);\n}\n"
    )
    r = run("run", str(cu), "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "numElements" in r.stdout and "no findings" in r.stdout
    import numpy as np

    assert np.load(tmp_path / "out" / "C.npy").shape == (5000,)
    bare = tmp_path / "bare.cu"
    bare.write_text("__global__ void k(float* x, int n) { x[threadIdx.x] = n; }\n")
    r = run("run", str(bare), "-o", str(tmp_path / "out2"))
    assert r.returncode == 2 and "--grid" in r.stderr and "none could be inferred" in r.stderr


def test_newcomer_rough_edges_no_kernel_a_directory_and_a_closed_pipe(tmp_path: Path) -> None:
    """A file without a __global__ kernel is the user's error (exit 2, C2N0009), even with an
    output folder that does not exist yet; a directory points to `batch`; output piped into
    `head` ends quietly, as a Unix tool ends on SIGPIPE."""
    host = tmp_path / "host_only.cu"
    host.write_text("__device__ float twice(float x) { return 2 * x; }\nint main() { return 0; }\n")
    for extra in ([], ["-o", str(tmp_path / "new" / "dir")]):
        r = run(str(host), *extra)
        assert r.returncode == 2 and "C2N0009" in r.stderr and "Traceback" not in r.stderr
    r = run(str(tmp_path))
    assert r.returncode == 2 and "is a directory" in r.stderr and "migrate batch" in r.stderr
    # a --kernel the file does not define: the kernels it does define, no internal error
    r = run(str(CORPUS / "vector_add.cu"), "--kernel", "vector_sub", "-o", str(tmp_path / "k"))
    assert r.returncode == 2 and "C2N0010" in r.stderr and "vector_add_kernel" in r.stderr
    assert "internal error" not in r.stderr and not (tmp_path / "k").exists()
    (tmp_path / "vector_add.cu").write_text((CORPUS / "vector_add.cu").read_text())
    r = run(str(tmp_path / "vector_add.cu"), "-o", str(tmp_path / "made" / "here"), "--no-check")
    assert r.returncode in (0, 1) and (tmp_path / "made" / "here" / "vector_add_nki.py").is_file()
    pipe = subprocess.run(
        f"'{sys.executable}' -m migrator.cli diagnostics | head -2",
        shell=True, capture_output=True, text=True, cwd=NEUTRAL_CWD, timeout=120,
        executable="/bin/bash",
    )  # fmt: skip
    assert pipe.returncode == 0 and len(pipe.stdout.splitlines()) == 2
    assert "BrokenPipe" not in pipe.stderr and "internal error" not in pipe.stderr


def test_an_inferred_spec_moved_next_to_its_cu_is_used_as_is(tmp_path: Path) -> None:
    """The report suggests keeping the reviewed inferred spec next to the `.cu`; its stale
    `source = "../k.cu"` (relative to where it was written) must not break migrate, run or
    score: the file given on the command line wins."""
    cu = tmp_path / "vector_add.cu"
    cu.write_text((CORPUS / "vector_add.cu").read_text())
    r = run(str(cu), "-o", str(tmp_path / "out"), "--no-check")
    assert r.returncode == 0, r.stderr
    inferred = tmp_path / "out" / "vector_add.inferred.toml"
    assert 'source = "../vector_add.cu"' in inferred.read_text()
    inferred.rename(tmp_path / "vector_add.toml")
    r = run(str(cu), "-o", str(tmp_path / "again"))
    assert r.returncode == 0 and "check pass" in r.stdout, r.stdout + r.stderr
    r = run("run", str(cu), "-o", str(tmp_path / "ran"))
    assert r.returncode == 0, r.stdout + r.stderr
    r = run("score", str(cu), str(tmp_path / "again" / "vector_add_nki.py"), "--seeds", "1")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr


def test_a_spec_that_does_not_fit_the_kernel_is_a_spec_error(tmp_path: Path) -> None:
    """A tensor naming a parameter the kernel lacks: `migrate` and `score` say so, at the
    spec's line, listing the parameters that exist (exit 2), instead of a "recognised but
    cannot be emitted" row or thirty no_oracle trials; an unreadable spec is exit 2 too."""
    cu = tmp_path / "vector_add.cu"
    cu.write_text((CORPUS / "vector_add.cu").read_text())
    text = (CORPUS / "vector_add.toml").read_text()
    assert 'name = "a"' in text
    (tmp_path / "vector_add.toml").write_text(text.replace('name = "a"', 'name = "q"', 1))
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if 'name = "a"' in ln)
    r = run(str(cu), "-o", str(tmp_path / "out"))
    assert r.returncode == 2 and f"vector_add.toml:{line}: tensor q names CUDA parameter 'q'" in (
        r.stderr
    ), r.stderr
    assert "has parameters (a*, b*, c*, n)" in r.stderr
    nki = CORPUS / "expert" / "vector_add_expert.py"
    r = run("score", str(cu), str(nki), "--seeds", "1")
    assert r.returncode == 2 and "names CUDA parameter 'q'" in r.stderr, r.stdout + r.stderr
    (tmp_path / "vector_add.toml").write_text("[kernel\n")
    r = run(str(cu), "-o", str(tmp_path / "out"))
    assert r.returncode == 2 and "invalid TOML" in r.stderr and "internal error" not in r.stderr


def test_an_emitted_file_checks_itself_wherever_it_is_copied(tmp_path: Path) -> None:
    """Without a sidecar the emitted file carries the inferred spec; copied elsewhere, it
    says where the CUDA original was expected and takes `--cuda`."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "vector_add.cu").write_text((CORPUS / "vector_add.cu").read_text())
    r = run(str(src / "vector_add.cu"), "-o", str(src / "out"), "--no-check")
    assert r.returncode == 0, r.stderr
    away = tmp_path / "a" / "b"
    away.mkdir(parents=True)
    emitted = away / "vector_add_nki.py"
    emitted.write_text((src / "out" / "vector_add_nki.py").read_text())

    def check(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(emitted), *args], capture_output=True,
                              text=True, cwd=NEUTRAL_CWD, timeout=120)  # fmt: skip

    r = check()
    assert r.returncode == 2 and "--cuda" in r.stdout and "Traceback" not in r.stderr
    r = check("--cuda", str(src / "vector_add.cu"))
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr
    # `score` without a sidecar scores against the task `migrate` inferred
    r = run("score", str(src / "vector_add.cu"), str(emitted), "--seeds", "1")
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr


def test_run_with_a_launch_allocates_the_outputs_it_is_not_given(tmp_path: Path) -> None:
    """`migrate run k.cu --grid --block` without a spec: inputs come from .npy files, an
    output the kernel only writes needs no file (saved at the length the kernel reached); a
    missing array it reads is named."""
    import numpy as np

    cu = tmp_path / "va.cu"
    cu.write_text((CORPUS / "vector_add.cu").read_text())
    np.save(tmp_path / "a.npy", np.arange(1000, dtype=np.float32))
    np.save(tmp_path / "b.npy", np.ones(1000, np.float32))
    common = ["run", str(cu), "--grid", "4", "--block", "256", "--sizes", "n=1000"]
    r = run(*common, "--inputs", f"a={tmp_path / 'a.npy'}", f"b={tmp_path / 'b.npy'}",
            "-o", str(tmp_path / "o"))  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    c = np.load(tmp_path / "o" / "c.npy")
    assert c.shape == (1000,) and np.array_equal(c, np.arange(1000, dtype=np.float32) + 1)
    r = run(*common, "--inputs", f"a={tmp_path / 'a.npy'}", "-o", str(tmp_path / "o"))
    assert r.returncode == 2 and "reads b: pass b=FILE.npy" in r.stderr, r.stderr


def test_messages_say_what_the_code_does(tmp_path: Path) -> None:
    """A halving loop is not "step 1"; a while loop is not a loop "over None"; a long
    C2N2001 reason is cut at a word, with an ellipsis."""
    cu = tmp_path / "halve.cu"
    cu.write_text(
        "__global__ void k(float* x, int n) {\n"
        "  __shared__ float s[256];\n"
        "  s[threadIdx.x] = x[threadIdx.x];\n  __syncthreads();\n"
        "  for (int st = blockDim.x / 2; st > 0; st >>= 1) {\n"
        "    if (threadIdx.x < st) s[threadIdx.x] += s[threadIdx.x + st];\n"
        "    __syncthreads();\n  }\n"
        "  int i = 0;\n  while (i < n) { i++; }\n"
        "  if (threadIdx.x == 0) x[0] = s[0] + i;\n}\n"
    )
    r = run("inspect", str(cu))
    assert "step halved  [halving]" in r.stdout and "step 1" not in r.stdout, r.stdout
    r = run(str(cu), "-o", str(tmp_path / "o"))
    report = (tmp_path / "o" / "halve_migration.md").read_text()
    assert "| while loop |" in report and "None" not in report
    reason = next(ln for ln in report.splitlines() if "C2N2001" in ln and "matches no" in ln)
    text = reason.split("matches no supported family (", 1)[1].rsplit(")", 1)[0]
    assert len(text) <= 300 and (text.endswith("…") or len(text) < 299)
    assert not text.endswith("…") or text[-2].isalnum()


def test_help_shows_the_main_jobs_options() -> None:
    r = run("--help")
    assert r.returncode == 0 and "migrate KERNEL.cu [options]" in r.stdout
    assert all(o in r.stdout for o in ("--no-check", "--dtype", "--grid", "--spec", "-I DIR"))


@pytest.mark.parametrize(
    ("body", "expect"),
    [
        ("    open('/etc/passwd').read()\n", "k_nki.py:8"),
        ("    while True:\n        pass\n", "did not finish (cpu_limit"),
        ("    raise ValueError('my bug')\n", "k_nki.py:8: kernel 'double' failed: ValueError"),
    ],
    ids=["reads-a-file", "never-ends", "raises"],
)
def test_profile_runs_user_code_in_the_sandbox(tmp_path: Path, body: str, expect: str) -> None:
    """`migrate profile` runs the file as the scorer runs a candidate: isolated, with a time
    limit; whatever the kernel does wrong is the user's error (exit 1, the kernel's line)."""
    import numpy as np

    kernel = tmp_path / "k_nki.py"
    kernel.write_text(
        "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n\n\n"
        "@nki.jit\ndef double(a):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n" + body +
        "    return out\n"
    )  # fmt: skip
    a = tmp_path / "a.npy"
    np.save(a, np.ones((128, 256), np.float32))
    r = run("profile", str(kernel), "--inputs", str(a), "--timeout", "3")
    assert r.returncode == 1 and expect in r.stdout, r.stdout + r.stderr
    assert "internal error" not in r.stderr and "root:" not in r.stdout


def test_score_several_candidates_of_one_task(tmp_path: Path) -> None:
    """`migrate score CU A.py B.py --jobs 2`: a report each, the CUDA oracle run once (the
    first candidate fills the cache, the others reuse it); the exit code is the worst."""
    cache = tmp_path / "oracle"
    expert = CORPUS / "expert" / "vector_add_expert.py"
    gaming = ROOT / "tests" / "score" / "adversarial" / "host_read_tile.py"
    r = run("score", str(CORPUS / "vector_add.cu"), str(expert), str(gaming), "--jobs", "2",
            "--seeds", "1", "--no-reference", "--oracle-cache", str(cache))  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.count("vs ") == 2 and "PASS" in r.stdout and "FAIL" in r.stdout
    assert len(list(cache.rglob("*.npz"))) == 6  # one entry per trial, shared by both


_PREPROCESS_PIDS = """
import os, sys
from pathlib import Path
from migrator import cli, workers
from migrator.cuda import source

log = Path(sys.argv[1])
real = source._preprocess

def logged(s, *a):
    if not s.path.startswith("<"):
        with log.open("a") as f:
            f.write(f"{os.getpid()}\\n")
    return real(s, *a)

source._preprocess = logged
code = cli.main(sys.argv[2:])
print(os.getpid(), code)
"""


def test_the_main_job_preprocesses_its_file_in_a_child_while_it_imports(tmp_path: Path) -> None:
    """`migrate KERNEL.cu` starts the file's preprocessing in a forked child before it imports
    the pipeline; the front end then finds the file in the preprocessor's memo (the process
    itself preprocesses no file), and the migration is the one a single process makes. (In a
    fresh interpreter: a test that reloads modules makes their models unpicklable, and the
    child's memo entry then stays in the child, as it should.)"""
    src = Path(__file__).parent / "data" / "block_sums.cu"
    got = {}
    for workers_ in ("2", "1"):
        log = tmp_path / f"pids{workers_}"
        out = tmp_path / workers_
        env = {**os.environ, "C2N_WORKERS": workers_}
        cmd = [sys.executable, "-c", _PREPROCESS_PIDS, str(log), str(src), "-o", str(out),
               "--no-check"]  # fmt: skip
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        me, code = r.stdout.split()[-2:]
        assert code == "0"
        pids = log.read_text().split()
        assert pids and (me not in pids if workers_ == "2" else pids == [me])
        got[workers_] = json.loads((out / "block_sums_migration.json").read_text())
    assert got["2"]["kernels"][0]["nki_source"] == got["1"]["kernels"][0]["nki_source"]


def test_the_command_ends_without_teardown_yet_loses_no_output(tmp_path: Path) -> None:
    # `run` ends the process with os._exit after `main`: everything written must still arrive
    # (buffered stdout into a pipe), exit handlers must run, and the exit code must be main's
    import io
    from contextlib import redirect_stdout

    from migrator.cli import main

    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["diagnostics"]) == 0
    r = run("diagnostics")
    assert r.returncode == 0 and r.stdout == buf.getvalue() and len(r.stdout) > 4096
    marker = tmp_path / "exit-handler-ran"
    code = (
        "import atexit, pathlib, sys\n"
        f"atexit.register(pathlib.Path({str(marker)!r}).write_text, 'yes')\n"
        "from migrator.cli import run\n"
        f"sys.argv = ['migrate', {str(tmp_path / 'missing.cu')!r}]\n"
        "run()\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=NEUTRAL_CWD, timeout=120)  # fmt: skip
    assert r.returncode == 2 and "C2N0001" in r.stderr
    assert marker.read_text() == "yes"
