"""Launch-configuration variants: `#define` launch constants set to other values, the launch
read back from the rewritten host code, and variants that break the kernel rejected."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from migrator import dataset
from migrator.contract import load_spec
from migrator.dataset.variants import (
    MissingDefine,
    integer_defines,
    launch_variant,
    parse_defines,
    rewrite_defines,
)

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
SRC = "#define BLOCK 256  // threads\n#define NAME foo\n  #  define TILE 16u\nint x = BLOCK;\n"


def test_rewrite_sets_only_the_named_integer_macro() -> None:
    assert integer_defines(SRC) == {"BLOCK": 256, "TILE": 16}
    out = rewrite_defines(SRC, {"TILE": 8})
    assert "define TILE 8u" in out and "#define BLOCK 256  // threads" in out
    assert out.replace("TILE 8u", "TILE 16u") == SRC  # nothing else moved


def test_rewrite_refuses_what_it_cannot_vary() -> None:
    with pytest.raises(MissingDefine, match=r"no `#define NAME <integer>`.*BLOCK, TILE"):
        rewrite_defines(SRC, {"NAME": 3})
    with pytest.raises(ValueError, match="must be positive"):
        rewrite_defines(SRC, {"BLOCK": 0})
    with pytest.raises(ValueError, match="defined 2 times"):
        rewrite_defines(SRC + "#define BLOCK 128\n", {"BLOCK": 64})


def test_parse_defines() -> None:
    assert parse_defines("TILE_DIM=16, BLOCK_ROWS=4") == {"TILE_DIM": 16, "BLOCK_ROWS": 4}
    for bad in ("TILE", "TILE=x", "=4", ""):
        with pytest.raises(ValueError, match="NAME=INTEGER"):
            parse_defines(bad)


@pytest.mark.parametrize(
    ("stem", "defines", "sizes", "expected"),
    [
        ("reduce_warp_shuffle", {"WARPS_PER_BLOCK": 8}, {"R": 37, "C": 5},
         ((5, 1, 1), (256, 1, 1), 0)),
        ("softmax_row", {"SOFTMAX_THREADS": 128}, {"R": 7, "C": 5}, ((7, 1, 1), (128, 1, 1), 512)),
        ("transpose_tiled", {"TILE_DIM": 16, "BLOCK_ROWS": 4}, {"R": 33, "C": 17},
         ((2, 3, 1), (16, 4, 1), 0)),
    ],
)  # fmt: skip
def test_launch_is_read_back_from_the_host_code(
    stem: str, defines: dict[str, int], sizes: dict[str, int], expected: tuple
) -> None:
    spec = load_spec(CORPUS / f"{stem}.toml")
    source, varied = launch_variant(spec, (CORPUS / f"{stem}.cu").read_text(), defines)
    assert varied.launch_config(sizes) == expected
    assert all(f"{k} {v}" in source for k, v in defines.items())
    assert spec.launch_config(sizes) != expected  # it did change


def test_launch_variant_task_is_checked_and_distinct() -> None:
    base = dataset.build_task(CORPUS / "transpose_tiled.cu", check=False)
    t = dataset.build_task(CORPUS / "transpose_tiled.cu", defines={"TILE_DIM": 16, "BLOCK_ROWS": 4})
    assert t.id != base.id and "TILE_DIM=16,BLOCK_ROWS=4" in t.tags
    assert "#define TILE_DIM 16" in t.cuda_source and t.spec["launch"]["block"] == [16, 4]
    assert t.reference_check_ok  # regenerated from the variant and checked against it


def test_a_variant_that_breaks_the_kernel_is_rejected() -> None:
    # the shuffle tree assumes 32-lane warps: the interpreter's warp checks catch it
    with pytest.raises(ValueError, match="WARP_SIZE=16 the kernel no longer computes"):
        dataset.build_task(CORPUS / "reduce_warp_shuffle.cu", defines={"WARP_SIZE": 16})


def test_cli_builds_skips_and_rejects(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    cmd = [sys.executable, "-m", "migrator.cli", "tasks", str(CORPUS / "vector_add.cu"),
           str(CORPUS / "transpose_tiled.cu"), "--launch", "BLOCK_SIZE=128",
           "--launch", "BLOCK_SIZE=100", "--out", str(out)]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    tags = [json.loads(line)["tags"] for line in out.read_text().splitlines()]
    # vector_add: base + two block sizes (100 is not a multiple of 32: still correct);
    # transpose_tiled has no BLOCK_SIZE: only its base task
    assert len(tags) == 4 and sum("BLOCK_SIZE=100" in t for t in tags) == 1
    bad = subprocess.run([*cmd[:-4], "--launch", "BLOCK_SIZE", "--out", str(out)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert bad.returncode == 2 and "NAME=INTEGER" in bad.stderr
