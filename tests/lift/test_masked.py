"""Values chosen by position: where a kernel stores one constant at positions a comparison of
the output coordinates tells (a causal mask's 0 above the diagonal) and computes the others,
the program is `lhs > rhs ? constant : expression`, verified like any other."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from migrator.contract import load_spec
from migrator.lift import lift_task
from migrator.lift.fit import _separating
from migrator.lift.program import IndexMap, Term

# llm.c style: a flat stack of T x T score matrices, one thread per row, the causal row's softmax
# normalised in place and zeros stored above the diagonal
CAUSAL_SOFTMAX = (
    """
    __global__ void causal_softmax(float* att, const float* pre, int BH, int T) {
        int idx = blockIdx.x * blockDim.x + threadIdx.x;
        if (idx >= BH * T) return;
        int t = idx % T;
        const float* row = pre + idx * T;
        float* out = att + idx * T;
        float m = -3.0e38f;
        for (int k = 0; k <= t; k++) if (row[k] > m) m = row[k];
        float s = 0.0f;
        for (int k = 0; k <= t; k++) { float e = expf(row[k] - m); s += e; out[k] = e; }
        for (int k = 0; k < T; k++) out[k] = k <= t ? out[k] / s : 0.0f;
    }
    """,
    """
    [kernel]
    name = "causal_softmax"
    [sizes]
    BH = 6
    T = 40
    [[size_sets]]
    BH = 5
    T = 17
    [[tensors]]
    name = "att"
    role = "out"
    shape = ["BH * T * T"]
    [[tensors]]
    name = "pre"
    role = "in"
    shape = ["BH * T * T"]
    [[scalars]]
    name = "BH"
    size = "BH"
    [[scalars]]
    name = "T"
    size = "T"
    [launch]
    grid = ["ceil_div(BH * T, 64)"]
    block = [64]
    """,
)
# the mask below the diagonal, on a 2-D output: -inf stored where the key is past the query
MASKED_SCORES = (
    """
    __global__ void masked_scores(float* s, const float* q, const float* k, int T, int D) {
        int i = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
        if (j >= T) return;
        if (j > i) { s[i * T + j] = -INFINITY; return; }
        float acc = 0.0f;
        for (int d = 0; d < D; d++) acc += q[i * D + d] * k[j * D + d];
        s[i * T + j] = acc;
    }
    """,
    """
    [kernel]
    name = "masked_scores"
    [sizes]
    T = 70
    D = 16
    [[size_sets]]
    T = 33
    D = 9
    [[tensors]]
    name = "s"
    role = "out"
    shape = ["T", "T"]
    [[tensors]]
    name = "q"
    role = "in"
    shape = ["T", "D"]
    [[tensors]]
    name = "k"
    role = "in"
    shape = ["T", "D"]
    [[scalars]]
    name = "T"
    size = "T"
    [[scalars]]
    name = "D"
    size = "D"
    [launch]
    grid = ["ceil_div(T, 32)", "T"]
    block = [32]
    """,
)


def _spec(tmp_path: Path, name: str, task: tuple[str, str]):  # type: ignore[no-untyped-def]
    (tmp_path / f"{name}.cu").write_text(textwrap.dedent(task[0]))
    (tmp_path / f"{name}.toml").write_text(textwrap.dedent(task[1]))
    return load_spec(tmp_path / f"{name}.toml")


def test_a_causal_softmax_over_flat_matrices_lifts_with_its_mask(tmp_path: Path) -> None:
    r = lift_task(_spec(tmp_path, "causal_softmax", CAUSAL_SOFTMAX))
    assert r.ok, r.render()
    assert r.program is not None
    text = r.program.render()
    # zero above the diagonal of each T x T matrix, the softmax of the row's first t + 1 keys
    assert text.startswith("att[i] = ((i % T) > ((i // T) % T) ? 0.0 : "), text
    assert "sum_{q < ((i // T) % T) + 1} exp(pre[q + T*(i // T)]" in text


def test_a_score_matrix_with_minus_infinity_above_the_diagonal_lifts(tmp_path: Path) -> None:
    r = lift_task(_spec(tmp_path, "masked_scores", MASKED_SCORES))
    assert r.ok, r.render()
    assert r.program is not None
    assert r.program.render() == "s[i, j] = (j > i ? -inf : sum_{k < D} (k[j, k] * q[i, k]))"


def _column(v: str, div: int | None = None, mod: int | None = None) -> IndexMap:
    return IndexMap(terms=[Term(coef=1, var=v, div=div, mod=mod)])


def test_separating_finds_thresholds_and_diagonals_or_nothing() -> None:
    grid = np.stack(np.meshgrid(np.arange(6), np.arange(6), indexing="ij"), -1).reshape(-1, 2)
    i, j = grid[:, 0], grid[:, 1]
    assert _separating(grid, i > 3, ["i", "j"], {}) == (_column("i"), IndexMap(const=3))
    assert _separating(grid, j < 2, ["i", "j"], {}) == (IndexMap(const=2), _column("j"))
    assert _separating(grid, j > i, ["i", "j"], {}) == (_column("j"), _column("i"))
    assert _separating(grid, j > i + 1, ["i", "j"], {}) == (
        _column("j"),
        IndexMap(terms=[Term(coef=1, var="i")], const=1),
    )
    # a boundary (a union of four half-planes) is no single comparison
    edge = (i == 0) | (i == 5) | (j == 0) | (j == 5)
    assert _separating(grid, edge, ["i", "j"], {}) is None
    # a flat stack of 4 x 4 matrices: the column past the row within each matrix
    flat = np.arange(3 * 16).reshape(-1, 1)
    above = (flat[:, 0] % 4) > ((flat[:, 0] // 4) % 4)
    assert _separating(flat, above, ["i"], {"T": 4, "B": 3}) == (
        _column("i", mod=4),
        _column("i", div=4, mod=4),
    )


def _separating_every_pair(x, y, names, sizes):  # type: ignore[no-untyped-def]
    """`_separating` as it was before its sample: every test on every element, in order."""
    import itertools

    from migrator.lift import fit

    seen_feats: list[tuple[IndexMap, np.ndarray]] = []  # (built as `_separating` builds them)
    known = fit.size_pool(sizes)
    seen: set[bytes] = set()
    for j, v in enumerate(names):
        col = x[:, j]
        cands = [(IndexMap(terms=[Term(coef=1, var=v)]), col)]
        divs = [d for d in known if d <= col.max()]
        for d in divs:
            cands.append((IndexMap(terms=[Term(coef=1, var=v, mod=d)]), col % d))
            cands.append((IndexMap(terms=[Term(coef=1, var=v, div=d)]), col // d))
            cands += [(IndexMap(terms=[Term(coef=1, var=v, div=d, mod=m)]), (col // d) % m)
                      for m in divs]  # fmt: skip
        for m, c in cands:
            if c.min() != c.max() and c.tobytes() not in seen and len(seen_feats) < 400:
                seen.add(c.tobytes())
                seen_feats.append((m, c))
    for m, col in seen_feats:
        if col[~y].max() < col[y].min():
            return m, IndexMap(const=int(col[~y].max()))
        if col[y].max() < col[~y].min():
            return IndexMap(const=int(col[~y].min())), m
    for (ma, a), (mb, b) in itertools.permutations(seen_feats, 2):
        d = a - b
        lo = int(d[~y].max())
        if lo < int(d[y].min()) and abs(lo) <= 2:
            return ma, mb.model_copy(update={"const": lo})
    return None


def test_separating_on_a_sample_first_finds_what_every_pair_on_every_element_finds() -> None:
    """The candidates are tested on a sample of either side first (only dropping ones that
    fail on every element too): over causal masks of flat stacks, thresholds, near-diagonals
    and random sets, the comparison found is the one testing every pair everywhere finds."""
    rng = np.random.default_rng(7)
    for t, b in ((4, 3), (20, 12), (33, 5)):
        flat = np.arange(b * t * t).reshape(-1, 1)
        i = flat[:, 0]
        sizes = {"T": t, "B": b}
        masks = [(i % t) > ((i // t) % t), (i % t) + 1 > ((i // t) % t), i > b * t,
                 (i // t) % t < 2, rng.random(i.size) < 0.3]  # fmt: skip
        found = []
        for y in masks:
            got = _separating(flat, y, ["i"], sizes)
            assert got == _separating_every_pair(flat, y, ["i"], sizes)
            found.append(got is not None)
        assert found == [True, True, True, True, False]  # (the random set: no comparison)
