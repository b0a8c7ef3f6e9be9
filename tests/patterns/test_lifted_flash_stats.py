"""A flash-style causal attention forward (keys and values streamed through shared memory in
whole tiles, a running max and sum per query row rescaling the output, those two stored beside
it: llm.c's `attention_forward_kernel2` in a spelling of our own) lifts to softmax(Q K^T) V
plus the row max and the row sum, and emits the fused attention with both stored. The row
max starts from what `cudaMemset(m, -10000.0f, n)` leaves (0xF0 bytes, -5.97e29): no operand
of the max. Keys masked with -INFINITY weigh the padded tile's values by exp(-inf) = 0."""

from __future__ import annotations

from pathlib import Path

import pytest
from migrator.patterns.lifted import _NoFit
from migrator.patterns.lifted_attention import _match, _row_stat

from migrator.lift.program import Assign, Expr, IndexMap, Term
from migrator.migration import migrate

KERNEL = Path(__file__).resolve().parents[1] / "data" / "flash_stats.cu"
# as `migrate` infers it from the host code, at sizes a test runs quickly
SPEC = """
relations = ["T % 32 == 0"]
[kernel]
name = "flash_stats"
[sizes]
BH = 3
T = 64
D = 16
bc = 32
[[size_sets]]
BH = 2
T = 32
D = 8
bc = 32
[[tensors]]
name = "q"
role = "in"
shape = ["BH", "T", "D"]
[[tensors]]
name = "k"
role = "in"
shape = ["BH", "T", "D"]
[[tensors]]
name = "v"
role = "in"
shape = ["BH", "T", "D"]
[[tensors]]
name = "o"
role = "inout"
shape = ["BH", "T", "D"]
[[tensors]]
name = "row_max"
role = "inout"
shape = ["BH", "T"]
[[tensors]]
name = "row_sum"
role = "inout"
shape = ["BH", "T"]
[[scalars]]
name = "T"
size = "T"
[[scalars]]
name = "D"
size = "D"
[[scalars]]
name = "n_tiles"
size = "ceil_div(T, bc)"
[[scalars]]
name = "bc"
size = "bc"
[[scalars]]
name = "scale"
dtype = "float32"
value = 0.25
[launch]
grid = ["BH"]
block = [64]
shared_bytes = "(2 * bc * D + 64 * bc) * 4"
[inputs.row_max]
dist = "fill"
value = -5.965414233742897e+29
[inputs.row_sum]
dist = "fill"
value = 0.0
"""


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_a_flash_forward_emits_attention_with_its_row_max_and_sum(tmp_path: Path, api: str) -> None:
    (tmp_path / "k.cu").write_text(KERNEL.read_text())
    (tmp_path / "k.toml").write_text(SPEC)
    (k,) = migrate(tmp_path / "k.cu", out_dir=tmp_path / api, nki_api=api).kernels
    assert (k.status, k.family) == ("complete", "attention"), [d.message for d in k.diagnostics]
    assert k.check is not None and k.check.ok
    program = k.lifted.program.render() if k.lifted and k.lifted.program else ""
    assert "5.96" not in program  # the memset's value is no operand of the max
    src = k.nki_source or ""
    assert "nl.store(row_max_out_h[bh, q0 : q0 + qr, :]" in src
    assert "nl.store(row_sum_out_h[bh, q0 : q0 + qr, :]" in src


# --- which extra outputs the rule takes ---------------------------------------------------------
def _ix(*names: str) -> list[IndexMap]:
    return [IndexMap(terms=[Term(coef=1, var=n)]) for n in names]


def _load(t: str, *names: str) -> Expr:
    return Expr(kind="load", tensor=t, index=_ix(*names))


def _op(o: str, *args: Expr) -> Expr:
    return Expr(kind="op", op=o, args=list(args))


def _red(o: str, var: str, body: Expr, extent: str = "S") -> Expr:
    return Expr(kind="reduce", op=o, var=var, args=[body], extent=extent)


def _score(t: str, d: str, row: str = "i") -> Expr:
    return _red("sum", d, _op("*", _load("K", t, d), _load("Q", row, d)), extent="D")


def _prob(t: str, u: str, d: str, d2: str, row: str = "i") -> Expr:
    mx = _red("max", u, _score(u, d2, row))
    return _op("exp", _op("+", _score(t, d, row), _op("*", Expr(kind="const", value=-1), mx)))


def _attention() -> dict[str, object]:
    num = _red("sum", "t", _op("*", _load("V", "t", "j"), _prob("t", "u", "s", "r")))
    den = _red("sum", "k", _prob("k", "q", "w", "x"))
    return _match(_op("*", _op("/", Expr(kind="const", value=1), den), num), "i", "j")


def test_the_row_max_and_the_row_sum_are_told_apart_whatever_their_names() -> None:
    m = _attention()
    row_max = Assign(tensor="m", vars=["a"], expr=_red("max", "z", _score("z", "y", "a")))
    row_sum = Assign(tensor="l", vars=["a"], expr=_red("sum", "z", _prob("z", "y", "p", "n", "a")))
    assert _row_stat(row_max, [], "i", m) == "row max"
    assert _row_stat(row_sum, [], "i", m) == "row sum"


def test_other_row_values_are_refused() -> None:
    m = _attention()
    raw = Assign(tensor="l", vars=["a"], expr=_red("sum", "z", _score("z", "y", "a")))  # no exp
    with pytest.raises(_NoFit, match="neither the row max nor the row sum"):
        _row_stat(raw, [], "i", m)
    other_row = Assign(tensor="m", vars=["a"], expr=_red("max", "z", _score("z", "y", "b")))
    with pytest.raises(_NoFit):
        _row_stat(other_row, [], "i", m)
    matrix = Assign(tensor="m", vars=["a", "b"], expr=_load("V", "a", "b"))
    with pytest.raises(_NoFit, match="one value per query row"):
        _row_stat(matrix, [], "i", m)
