"""The backward of a causal row softmax (llm.c's `softmax_autoregressive_backward` kernels):
`dx[r, c] = scale * sum_{k <= t} y[r, k] * ((k == c) - y[r, c]) * dy[r, k]` for the columns
c <= t of row r (t = r % T), the columns past t left unwritten. It lifts once the Kronecker
delta's term is multiplied out; the row program takes `y[r, c]` out of the sum over k (inside
it, the row tile runs over k, not c) and masks the columns past t with 0, so that their terms
vanish from the sum and 0 is stored there."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from migrator.migration import migrate

KERNEL = Path(__file__).resolve().parents[1] / "data" / "softmax_causal_backward.cu"
SPEC = """
[kernel]
name = "softmax_bwd"
[sizes]
BH = 6
T = 40
[[size_sets]]
BH = 3
T = 33
[[tensors]]
name = "dy"
role = "in"
shape = ["BH * T", "T"]
[[tensors]]
name = "y"
role = "in"
shape = ["BH * T", "T"]
[[tensors]]
name = "dx"
role = "out"
shape = ["BH * T", "T"]
[[scalars]]
name = "T"
size = "T"
[[scalars]]
name = "scale"
dtype = "float32"
value = 0.125
[launch]
grid = ["ceil_div(T, 32)", "BH"]
block = [32]
"""


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_a_causal_softmax_backward_migrates_as_a_zero_masked_row_program(
    tmp_path: Path, api: str
) -> None:
    (tmp_path / "sbwd.cu").write_text(KERNEL.read_text())
    (tmp_path / "sbwd.toml").write_text(textwrap.dedent(SPEC))
    (k,) = migrate(tmp_path / "sbwd.cu", out_dir=tmp_path / api, nki_api=api).kernels
    assert (k.status, k.family) == ("complete", "rows"), [d.message for d in k.diagnostics]
    assert k.check is not None and k.check.ok
    src = k.nki_source or ""
    assert "0.0, y_row)" in src and 'float("-inf")' not in src  # masked with 0, not -inf
    # the output column's factor multiplies the row's sum, outside it
    assert "nl.multiply(y_row, red0)" in src
