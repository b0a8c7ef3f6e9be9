"""A permuted copy whose innermost axis moves (keys [B, T, H, D] to [B, H, D, T], llm.c's
4-D permute test) is no row copy: it migrates as 2-D TensorE transposes of the two axes that
trade places, once per index of the others, in both dialects."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from migrator.migration import migrate

KERNEL = Path(__file__).resolve().parents[1] / "data" / "k_transpose_heads.cu"
SPEC = """
    [kernel]
    name = "k_transpose_heads"
    [sizes]
    B = 2
    T = 70
    H = 3
    D = 20
    [[size_sets]]
    B = 1
    T = 130
    H = 2
    D = 136
    [[tensors]]
    name = "k"
    role = "in"
    shape = ["B", "T", "H", "D"]
    [[tensors]]
    name = "kt"
    role = "out"
    shape = ["B", "H", "D", "T"]
    [[scalars]]
    name = "B"
    size = "B"
    [[scalars]]
    name = "T"
    size = "T"
    [[scalars]]
    name = "H"
    size = "H"
    [[scalars]]
    name = "D"
    size = "D"
    [launch]
    grid = ["(B * T * H * D + 255) / 256"]
    block = [256]
"""


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_a_copy_whose_innermost_axis_moves_is_a_transpose_per_head(
    tmp_path: Path, api: str
) -> None:
    (tmp_path / KERNEL.name).write_text(KERNEL.read_text())
    (tmp_path / "k_transpose_heads.toml").write_text(textwrap.dedent(SPEC))
    (k,) = migrate(tmp_path / KERNEL.name, out_dir=tmp_path / api, nki_api=api).kernels
    assert (k.family, k.status) == ("transpose", "complete"), k.diagnostics
    assert k.check is not None and k.check.ok and len(k.check.sizes) == 2
    src = k.nki_source or ""
    # the batch and head axes are loops; T and D are the transposed pair
    assert "for l0 in nl.affine_range(B):" in src and "for l1 in nl.affine_range(H):" in src
    assert ("nl.transpose(" if api == "legacy" else "nisa.nc_transpose(") in src
