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
# dy, y and dx are [BH * T, T] stacks of causal rows; each kernel adds its scalars and launch
SPEC = """
[kernel]
name = "{name}"
[sizes]
BH = {bh}
T = 40
[[size_sets]]
BH = 2
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
"""
COLUMNS = """
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
ROWS = """
[[scalars]]
name = "rows"
size = "BH * T"
[[scalars]]
name = "T"
size = "T"
[launch]
grid = ["ceil_div(BH * T, 64)"]
block = [64]
"""


def _migrate(tmp_path: Path, source: str, spec: str, api: str = "legacy"):  # type: ignore[no-untyped-def]
    (tmp_path / "k.cu").write_text(source)
    (tmp_path / "k.toml").write_text(textwrap.dedent(spec))
    (k,) = migrate(tmp_path / "k.cu", out_dir=tmp_path / api, nki_api=api).kernels
    assert (k.status, k.family) == ("complete", "rows"), [d.message for d in k.diagnostics]
    assert k.check is not None and k.check.ok
    return k


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_a_causal_softmax_backward_migrates_as_a_zero_masked_row_program(
    tmp_path: Path, api: str
) -> None:
    spec = SPEC.format(name="softmax_bwd", bh=6) + COLUMNS
    k = _migrate(tmp_path, KERNEL.read_text(), spec, api)
    src = k.nki_source or ""
    assert "0.0, y_row)" in src and 'float("-inf")' not in src  # masked with 0, not -inf
    # the output column's factor multiplies the row's sum, outside it
    # (the row's sum first: one value per row meets the row tile once)
    # (the legacy dialect fuses it with the add that follows: one VectorE instruction)
    fused = "data=y_row, op0=nl.multiply, operand0=red0, op1=nl.add"
    assert (fused if api == "legacy" else "nl.multiply(red0, y_row)") in src


ROWS_FIRST = """// softmax backward, a thread per causal row: its dot product, then each column
__global__ void softmax_bwd_rows(float* dx, const float* dy, const float* y, int rows, int T) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    int t = r % T;
    float s = 0.0f;
    for (int k = 0; k <= t; k++) s += y[r * T + k] * dy[r * T + k];
    for (int c = 0; c <= t; c++) dx[r * T + c] = y[r * T + c] * (dy[r * T + c] - s);
}
"""


def test_a_row_whose_first_sum_has_one_term_lifts_with_the_others(tmp_path: Path) -> None:
    """The kernel7 spelling: the row's dot product first, then each column. Row t = 0 sums one
    term where the others sum several (no repeated term in its canonical form): one shape, a
    range that follows the row."""
    k = _migrate(tmp_path, ROWS_FIRST, SPEC.format(name="softmax_bwd_rows", bh=3) + ROWS)
    assert k.lifted is not None and k.lifted.program is not None
    assert "sum_{k < (i % T) + 1}" in k.lifted.program.render()
