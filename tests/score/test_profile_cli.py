"""`migrate profile`: a kernel file run in the emulator (in the scorer's sandbox) and its cost."""

import argparse
import json
from pathlib import Path

import numpy as np

from migrator.score.profile_cli import register

KERNELS = Path(__file__).resolve().parents[1] / "nki" / "kernels" / "legacy_kernels.py"


def parse(argv):
    parser = argparse.ArgumentParser(prog="migrate")
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_profile_json(tmp_path, capsys):
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, np.ones((128, 512), np.float32))
    np.save(b, np.ones((128, 512), np.float32))
    args = parse(
        [
            "profile",
            str(KERNELS),
            "--kernel",
            "tensor_add",
            "--inputs",
            str(a),
            str(b),
            "--grid",
            "1",
            "1",
            "--json",
        ]
    )
    assert args.func(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["engines"]["dma"]["instructions"] == 3


def test_profile_text_and_errors(tmp_path, capsys):
    a = tmp_path / "a.npy"
    np.save(a, np.ones((128, 64), np.float32))
    args = parse(
        [
            "profile",
            str(KERNELS),
            "--kernel",
            "transpose_tile",
            "--inputs",
            str(a),
            "--target",
            "trn1",
        ]
    )
    assert args.func(args) == 0
    assert "target trn1" in capsys.readouterr().out
    missing = parse(["profile", str(KERNELS), "--kernel", "nope", "--inputs", str(a)])
    assert missing.func(missing) == 2
    big = tmp_path / "big.npy"
    np.save(big, np.ones((256, 64), np.float32))
    bad = parse(["profile", str(KERNELS), "--kernel", "transpose_tile", "--inputs", str(big)])
    assert bad.func(bad) == 1
    assert "err_num_partition_exceed_arch_limit" in capsys.readouterr().out
