"""Window reductions (pooling) from lifted programs: the window's taps are read off the index
maps whatever the spelling (one flat window index split by `// w` and `% w`, or nested loops),
near misses are refused, and a max pooling of our own migrates in both dialects."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from migrator.patterns.lifted import _NoFit
from migrator.patterns.lifted_window import _taps

from migrator.lift.program import Expr, IndexMap, Term
from migrator.migration import migrate

MAXPOOL = """
    // 3x3 max pooling, stride 2, no padding: one thread per output, nested window loops
    __global__ void maxpool3_kernel(const float* in, float* out, int H, int W, int Ho, int Wo) {
        int ox = blockIdx.x * blockDim.x + threadIdx.x;
        int oy = blockIdx.y * blockDim.y + threadIdx.y;
        if (ox >= Wo || oy >= Ho) return;
        float m = -3.0e38f;
        for (int dy = 0; dy < 3; ++dy)
            for (int dx = 0; dx < 3; ++dx) m = fmaxf(m, in[(2 * oy + dy) * W + 2 * ox + dx]);
        out[oy * Wo + ox] = m;
    }
"""
SPEC = """
    [kernel]
    name = "maxpool3_kernel"
    [sizes]
    H = 67
    W = 130
    [[size_sets]]
    H = 9
    W = 301
    [[tensors]]
    name = "x"
    param = "in"
    role = "in"
    shape = ["H", "W"]
    [[tensors]]
    name = "out"
    role = "out"
    shape = ["(H - 3) // 2 + 1", "(W - 3) // 2 + 1"]
    [[scalars]]
    name = "H"
    size = "H"
    [[scalars]]
    name = "W"
    size = "W"
    [[scalars]]
    name = "Ho"
    size = "(H - 3) // 2 + 1"
    [[scalars]]
    name = "Wo"
    size = "(W - 3) // 2 + 1"
    [launch]
    grid = ["ceil_div((W - 3) // 2 + 1, 32)", "ceil_div((H - 3) // 2 + 1, 8)"]
    block = [32, 8]
"""


def term(var: str, coef: int = 1, div: int | None = None, mod: int | None = None) -> Term:
    return Term(coef=coef, var=var, div=div, mod=mod)


def window_of(rows: IndexMap, cols: IndexMap, *levels: tuple[str, object]) -> Expr:
    e = Expr(kind="load", tensor="x", index=[rows, cols])
    for var, extent in reversed(levels):
        e = Expr(kind="reduce", op="sum", var=var, extent=extent, args=[e])  # type: ignore[arg-type]
    return e


def test_a_flat_window_index_split_by_div_and_mod_gives_the_taps() -> None:
    rows = IndexMap(terms=[term("i", 2), term("k", div=2)])
    cols = IndexMap(terms=[term("j", 2), term("k", mod=2)])
    taps, x, strides, offs = _taps(window_of(rows, cols, ("k", 4)), "i", "j")
    assert (taps, x, strides, offs) == ([(0, 0), (0, 1), (1, 0), (1, 1)], "x", (2, 2), (0, 0))


def test_nested_window_loops_with_an_offset_give_the_taps() -> None:
    rows = IndexMap(terms=[term("i", 3), term("u")], const=1)
    cols = IndexMap(terms=[term("j"), term("v")])
    taps, _, strides, offs = _taps(window_of(rows, cols, ("u", 2), ("v", 3)), "i", "j")
    assert strides == (3, 1) and offs == (1, 0)
    assert taps == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


@pytest.mark.parametrize(
    ("rows", "cols", "levels", "why"),
    [
        # a window as wide as a size: no literal window
        (IndexMap(terms=[term("i"), term("k")]), IndexMap(terms=[term("j")]), [("k", "K")],
         "not a literal"),
        # the row read moves with the output's column: no window
        (IndexMap(terms=[term("i", 2), term("j"), term("k")]), IndexMap(terms=[term("j", 2)]),
         [("k", 2)], "mixes"),
        # a stride given by a size
        (IndexMap(terms=[Term(coef="S", var="i"), term("k")]), IndexMap(terms=[term("j")]),
         [("k", 2)], "literal window offset"),
    ],
)  # fmt: skip
def test_other_reductions_are_not_windows(
    rows: IndexMap, cols: IndexMap, levels: list[tuple[str, object]], why: str
) -> None:
    with pytest.raises(_NoFit, match=why):
        _taps(window_of(rows, cols, *levels), "i", "j")


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_max_pooling_migrates_and_checks(api: str, tmp_path: Path) -> None:
    (tmp_path / "maxpool.cu").write_text(textwrap.dedent(MAXPOOL))
    (tmp_path / "maxpool.toml").write_text(textwrap.dedent(SPEC))
    (k,) = migrate(tmp_path / "maxpool.cu", out_dir=tmp_path / "out", nki_api=api).kernels
    assert (k.family, k.status) == ("window", "complete"), [d.render() for d in k.diagnostics]
    assert k.check is not None and k.check.ok
    assert (k.nki_source or "").count("maximum") == 8  # nine taps, eight combines
