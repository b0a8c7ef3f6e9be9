"""CPU-testable parts of `tools/gpu_check.py`: harness generation and the ulp comparison.

Running a harness needs a GPU; compiling one needs nvcc (that test is skipped without it).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import ml_dtypes
import numpy as np
import pytest

from migrator.contract import load_spec

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "corpus"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = mod
    spec.loader.exec_module(mod)
    return mod


gc = _load()


# --- ulp ---------------------------------------------------------------------------------------
def test_ulp_adjacent_floats_and_signed_zero() -> None:
    a = np.array([1.0, 0.0, -1.0, 3.0], np.float32)
    b = np.array(
        [np.nextafter(np.float32(1), np.float32(2)), -0.0, np.float32(-1.0), 3.0], np.float32
    )
    np.testing.assert_array_equal(gc.ulp_diff(a, b), [1, 0, 0, 0])


def test_ulp_across_zero_counts_both_sides() -> None:
    tiny = np.float32(np.finfo(np.float32).smallest_subnormal)
    a = np.array([tiny], np.float32)
    b = np.array([-tiny], np.float32)
    assert gc.max_ulp(a, b) == 2  # -tiny, -0/+0, +tiny


def test_ulp_nan_handling_and_integers() -> None:
    a = np.array([np.nan, np.nan, 1.0], np.float32)
    b = np.array([np.nan, 1.0, 1.0], np.float32)
    np.testing.assert_array_equal(gc.ulp_diff(a, b), [0, np.inf, 0])
    ints = gc.ulp_diff(np.array([5, -3], np.int32), np.array([2, -3], np.int32))
    np.testing.assert_array_equal(ints, [3, 0])


@pytest.mark.parametrize("dtype", [np.float16, np.float64, ml_dtypes.bfloat16])
def test_ulp_other_float_widths(dtype: type) -> None:
    one = np.array([1.0], dtype)
    up = np.array([np.nextafter(np.float64(1.0), 2.0)], np.float64).astype(dtype)
    if dtype is ml_dtypes.bfloat16:  # nextafter in bf16: one step of its 7-bit mantissa
        up = np.array([1.0 + 2.0**-7], dtype)
    elif dtype is np.float16:
        up = np.array([np.nextafter(np.float16(1), np.float16(2))], np.float16)
    assert gc.max_ulp(one, up) == 1


def test_ulp_rejects_mismatched_arrays() -> None:
    with pytest.raises(ValueError, match="cannot compare"):
        gc.ulp_diff(np.zeros(2, np.float32), np.zeros(3, np.float32))


# --- harness text ------------------------------------------------------------------------------
def test_harness_for_a_template_kernel() -> None:
    spec = load_spec(CORPUS / "reduce_sum_shared.toml")
    sizes = spec.all_size_sets()[0]
    h = gc.generate_harness(spec, sizes)
    src = h.source
    assert '#include "' + str((CORPUS / "reduce_sum_shared.cu").resolve()) + '"' in src
    # the spec's template argument, launch configuration and argument order
    n = sizes["N"]
    blocks = -(-n // 512)
    launch = f"reduce_sum_shared_kernel<256><<<grid, block, 0>>>(d_x, d_partial, (int){n}LL);"
    assert launch in src
    assert f"dim3 grid({blocks}, 1, 1);" in src and "dim3 block(256, 1, 1);" in src
    assert f'to_device(dir, "x", {n * 4})' in src
    assert f'from_device(dir, "partial", d_partial, {blocks * 4});' in src
    assert "int main(int argc, char** argv)" in src and "#define main c2n_corpus_main" in src
    assert h.outputs == ["partial"]
    assert h.tensors["x"].shape == (n,) and np.isnan(h.tensors["partial"]).all()


def test_harness_float_scalars_and_2d_launch() -> None:
    spec = load_spec(CORPUS / "scale_2d_pitch.toml")
    sizes = spec.all_size_sets()[0]
    src = gc.generate_harness(spec, sizes).source
    call = re.search(r"scale_2d_pitch_kernel<<<grid, block, 0>>>\((.*)\);", src)
    assert call is not None
    args = [a.strip() for a in call.group(1).split(",")]
    assert "(float)1.75" in args and "(float)-0.5" in args
    assert args.count(f"(int){sizes['C']}LL") == 3  # ld_in, ld_out, cols
    r, c = sizes["R"], sizes["C"]
    assert f"dim3 grid({-(-c // 32)}, {-(-r // 8)}, 1);" in src


def test_scalar_literals() -> None:
    assert gc._scalar_literal("float", 0.1) == "(float)0.1"
    assert gc._scalar_literal("__half", 1.5) == "(__half)(float)1.5"
    assert gc._scalar_literal("int", 7) == "(int)7LL"
    assert gc._scalar_literal("bool", 0) == "false"
    assert gc.c_type(np.dtype(np.uint32)) == "unsigned int"
    with pytest.raises(ValueError, match="no C type"):
        gc.c_type(np.dtype(np.complex64))


def test_harness_inputs_match_the_interpreters() -> None:
    from migrator.cuda.interp.spec_run import run_spec_full

    spec = load_spec(CORPUS / "saxpy.toml")
    sizes = spec.all_size_sets()[0]
    h = gc.generate_harness(spec, sizes, seed=1)
    run = run_spec_full(spec, sizes, seed=1)
    for name, arr in run.inputs.items():
        np.testing.assert_array_equal(h.tensors[name], arr)


def test_every_corpus_kernel_gets_a_harness() -> None:
    for path in sorted(CORPUS.glob("*.toml")):
        spec = load_spec(path)
        h = gc.generate_harness(spec, spec.all_size_sets()[0])
        assert f"{spec.kernel.name}" in h.source and h.outputs


def test_no_device_exits_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(gc, "device_problem", lambda: "no GPU visible (test)")
    assert gc.main([]) == gc.NO_DEVICE
    assert "cannot run here: no GPU visible (test)" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_generated_harness_compiles_with_nvcc(tmp_path: Path) -> None:
    spec = load_spec(CORPUS / "reduce_sum_shared.toml")
    cu = tmp_path / "h.cu"
    cu.write_text(gc.generate_harness(spec, spec.all_size_sets()[0]).source)
    cmd = ["nvcc", "-std=c++17", "-arch=sm_80", "-c", str(cu), "-o", str(tmp_path / "h.o")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
