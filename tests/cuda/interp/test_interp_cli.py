"""`migrate run` handler, driven through our own argparse parser (cli.py wires it later)."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
import pytest

from migrator.cuda.interp.run_cli import register

CORPUS = Path(__file__).resolve().parents[3] / "corpus"


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="migrate")
    register(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(argv)
    return args.handler(args)


def test_run_with_sidecar_spec_saves_outputs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = _main(["run", str(CORPUS / "vector_add.cu"), "--sizes", "N=1000", "-o", str(tmp_path)])
    assert rc == 0
    c = np.load(tmp_path / "c.npy")
    assert c.shape == (1000,) and np.isfinite(c).all()
    out = capsys.readouterr().out
    assert "vector_add_kernel" in out and "thread-statements" in out and "no findings" in out


def test_run_without_spec_and_no_fmad(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text(
        "__global__ void k(const float* x, float* y, float a) {\n"
        "  y[threadIdx.x] = a * x[threadIdx.x] + 1.0f;\n}\n"
    )
    np.save(tmp_path / "x.npy", np.arange(8, dtype=np.float32))
    np.save(tmp_path / "y.npy", np.zeros(8, np.float32))
    rc = _main(
        [
            "run",
            str(src),
            "--kernel",
            "k",
            "--grid",
            "1",
            "--block",
            "8",
            "--inputs",
            f"x={tmp_path / 'x.npy'}",
            f"y={tmp_path / 'y.npy'}",
            "--sizes",
            "a=2.5",
            "--no-fmad",
            "-o",
            str(tmp_path / "out"),
        ]
    )
    assert rc == 0
    assert np.load(tmp_path / "out" / "y.npy").tolist() == [2.5 * i + 1 for i in range(8)]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["run", "missing.cu"], "file not found"),
        (["run", "{corpus}/vector_add.cu", "--sizes", "Q=3"], "unknown size 'Q'"),
        (["run", "{corpus}/vector_add.cu", "--grid", "0"], "positive integers"),
        (["run", "{corpus}/vector_add.cu", "--inputs", "zz=nofile.npy"], "cannot read"),
        (["run", "{tmp}/k.cu"], "pass --spec, or --grid and --block"),
        (["run", "{tmp}/bad.cu", "--grid", "1", "--block", "1"], "syntax error"),
        (["run", "{tmp}/k.cu", "--grid", "1", "--block", "1"], "reads x: pass x=FILE.npy"),
    ],
)
def test_user_errors_exit_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture, argv: list[str], fragment: str
) -> None:
    (tmp_path / "k.cu").write_text("__global__ void k(const float* x, float* y) { y[0] = x[0]; }\n")
    (tmp_path / "bad.cu").write_text("__global__ void k(float* y) { y[0] = ; }\n")
    argv = [a.format(corpus=CORPUS, tmp=tmp_path) for a in argv]
    assert _main([*argv, "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err


def test_kernel_bug_exits_1_with_findings(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    shutil.copy(CORPUS / "vector_add.cu", tmp_path / "v.cu")
    (tmp_path / "v.cu").write_text((tmp_path / "v.cu").read_text().replace("if (i < n)", ""))
    rc = _main(
        [
            "run",
            str(tmp_path / "v.cu"),
            "--spec",
            str(CORPUS / "vector_add.toml"),
            "--sizes",
            "N=1000",
            "-o",
            str(tmp_path),
        ]
    )
    assert rc == 1
    assert "out_of_bounds" in capsys.readouterr().out


def test_bf16_inputs_and_outputs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A bf16 `.npy` (numpy stores ml_dtypes' bfloat16 as raw `|V2`) is read as bf16, and a
    bf16 output is written as exact float32, never as raw bytes."""
    import ml_dtypes

    cu = tmp_path / "half_it.cu"
    cu.write_text(
        "typedef __nv_bfloat16 floatX;\n"
        "__global__ void half_it(floatX* y, const floatX* x, int n) {\n"
        "  int i = threadIdx.x;\n  if (i < n) y[i] = (floatX)((float)x[i] * 0.5f);\n}\n"
    )
    x = (np.arange(16) * 0.75).astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.zeros(16, ml_dtypes.bfloat16))
    assert np.load(tmp_path / "x.npy").dtype.kind == "V"  # what numpy writes for bf16
    rc = _main(["run", str(cu), "--kernel", "half_it", "--grid", "1", "--block", "16",
                "--inputs", f"x={tmp_path / 'x.npy'}", f"y={tmp_path / 'y.npy'}",
                "--sizes", "n=16", "-o", str(tmp_path / "out")])  # fmt: skip
    assert rc == 0
    y = np.load(tmp_path / "out" / "y.npy")
    assert y.dtype == np.float32
    assert np.array_equal(y, x.astype(np.float32) * 0.5)
    assert "saved as float32" in capsys.readouterr().out
