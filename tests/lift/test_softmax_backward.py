"""The backward of a causal row softmax (llm.c's `softmax_autoregressive_backward` spelling):
`sum_k y[k] * ((k == c ? 1 : 0) - y[c]) * dy[k]` lifts once the term at k == c, whose factor is
`1 - y[c]` where the others have `-y[c]`, is multiplied out; the score scale `1 / sqrt(C / NH)`
of a C that no tensor's shape names is traced at two different quotients, so it lifts as that
size expression (negated where a term subtracts)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from migrator.contract import load_spec
from migrator.lift import lift_task
from migrator.lift.fit import size_expression

SOURCE = """// backward of a causal row softmax: a thread per (row, column) walks the rows below
__global__ void softmax_bwd(float* dx, const float* dy, const float* y,
                            int BH, int T, int C, int NH) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int base = blockIdx.y * T * T;
    if (col >= T) return;
    float scale = 1.0f / sqrtf(C / NH);
    for (int t = col; t < T; t++) {
        const float* y_row = y + base + t * T;
        const float* dy_row = dy + base + t * T;
        float acc = 0.0f;
        for (int k = 0; k <= t; k++) {
            float delta = (k == col) ? 1.0f : 0.0f;
            acc += scale * y_row[k] * (delta - y_row[col]) * dy_row[k];
        }
        dx[base + t * T + col] = acc;
    }
}
"""

SPEC = """relations = ["C % NH == 0"]
[kernel]
name = "softmax_bwd"
[sizes]
BH = 6
T = 40
C = 64
NH = 4
[[size_sets]]
BH = 3
T = 33
C = 96
NH = 4
[[tensors]]
name = "dy"
role = "in"
shape = ["BH", "T", "T"]
[[tensors]]
name = "y"
role = "in"
shape = ["BH", "T", "T"]
[[tensors]]
name = "dx"
role = "out"
shape = ["BH", "T", "T"]
[[scalars]]
name = "BH"
size = "BH"
[[scalars]]
name = "T"
size = "T"
[[scalars]]
name = "C"
size = "C"
[[scalars]]
name = "NH"
size = "NH"
[launch]
grid = ["ceil_div(T, 32)", "BH"]
block = [32]
"""


def test_a_softmax_backward_with_a_kronecker_delta_lifts(tmp_path: Path) -> None:
    (tmp_path / "sbwd.cu").write_text(textwrap.dedent(SOURCE))
    (tmp_path / "sbwd.toml").write_text(textwrap.dedent(SPEC))
    result = lift_task(load_spec(tmp_path / "sbwd.toml"))
    assert result.ok, result.render()
    assert result.program is not None
    assert result.program.render() == (
        "dx[i, j, l] = (((C / NH) ** -0.5) * dy[i, j, l] * y[i, j, l]) + "
        "(sum_{q < j + 1} ((-((C / NH) ** -0.5)) * dy[i, j, q] * y[i, j, q] * y[i, j, l]))"
    )
    # the two traced size sets hold different head sizes C / NH
    (s1, s2) = result.fitted_at
    assert s1["C"] // s1["NH"] != s2["C"] // s2["NH"]


def test_a_negated_inverse_square_root_is_a_size_expression() -> None:
    s1, s2 = {"C": 92, "NH": 4}, {"C": 108, "NH": 4}
    assert size_expression(-(23**-0.5), -(27**-0.5), s1, s2) == "-((C / NH) ** -0.5)"


def test_a_number_that_is_a_size_reads_as_that_size_before_an_expression_of_another() -> None:
    """T = 16 = 2 * B at the traced sizes: the row length reads as T (a fit at those sizes
    that read it as `2 * B` was wrong everywhere else and took a second traced fit to undo:
    llm.c's causal softmax backward, 12 s)."""
    from migrator.lift.fit import symbolise

    sizes = {"B": 8, "C": 360, "NH": 12, "T": 16}
    assert symbolise(16, sizes) == "T"
    assert symbolise(9, sizes) == "B + 1"  # (expressions still read where no size is)
    assert symbolise(30, sizes) == "C / NH"


def test_launch_constants_read_after_the_other_sizes_and_their_products() -> None:
    """block_size = 256 = T * T at the traced sizes: the plane of a [B, NH, T, T] output reads
    as T * T (the launch constant is the same in every set, the plane is not), NH * T * T as
    such, not NH * block_size; a negative scale reads as the negated root."""
    from migrator.lift.fit import symbolise

    sizes = {"B": 10, "C": 168, "NH": 14, "T": 16, "block_size": 256}
    assert symbolise(256, sizes, frozenset({"block_size"})) == "T * T"
    assert symbolise(14 * 256, sizes, frozenset({"block_size"})) == "NH * T * T"
    assert symbolise(257, sizes, frozenset({"block_size"})) == "block_size + 1"
    # ... and before a multiple of a product (4 * N * N = 256 = emb_size: an embedding's row)
    rows = {"N": 8, "V": 12, "emb_size": 256}
    assert symbolise(256, rows, frozenset({"emb_size"})) == "emb_size"
    assert symbolise(-(12**-0.5), sizes) == "-((C / NH) ** -0.5)"
