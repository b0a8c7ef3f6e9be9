"""Scatter-adds of rows (an embedding's backward): each output element is a sum over the rows
whose id names its row, so no index map fits it; it is fitted by value (the traced output less
its old value against each float input's rows scattered by each integer input) and verified at
other sizes like every fit. The kernel is ours (`tests/data/embedding_backward.cu`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from migrator.contract import load_spec
from migrator.lift import lift_task
from migrator.lift.program import LiftError, Program, evaluate
from migrator.lift.scatter import fit_scatter
from migrator.migration import migrate

KERNEL = Path(__file__).resolve().parents[1] / "data" / "embedding_backward.cu"


def _lifted(tmp_path: Path, kernel: str):  # type: ignore[no-untyped-def]
    migrate(KERNEL, kernel=kernel, out_dir=tmp_path, check=False)
    return lift_task(load_spec(next(tmp_path.glob(f"{kernel}.inferred.toml"))))


def test_token_rows_and_position_rows_lift(tmp_path: Path) -> None:
    result = _lifted(tmp_path, "embedding_backward")
    assert result.ok and result.program is not None, result.render()
    text = result.program.render()
    assert "(tokens[k] == (i // width) ? grad[width*k + (i % width)] : 0)" in text
    assert "d_pos" in text  # the position rows: a plain sum over the leading axis


def test_rows_walked_in_order_lift_to_the_same_scatter(tmp_path: Path) -> None:
    result = _lifted(tmp_path, "embedding_backward_cols")
    assert result.ok and result.program is not None, result.render()
    assert "tokens[k] == " in result.program.render()


def _case(rng: np.random.Generator, n: int = 40, rows: int = 7, cols: int = 5):  # type: ignore[no-untyped-def]
    ids = rng.integers(0, rows, n).astype(np.int32)
    x = rng.standard_normal((n, cols))
    old = rng.standard_normal((rows, cols))
    out = old.copy()
    np.add.at(out, ids, x)
    return ids, x, old, out


def test_the_fit_reproduces_the_scatter_it_found() -> None:
    ids, x, old, out = _case(np.random.default_rng(0))
    shapes = {"y": (7, 5), "ids": (40,), "x": (40, 5)}
    a = fit_scatter("y", out, old, shapes, {"x": x}, {"ids": ids})
    assert a.render() == "y[i, j] = y[i, j] + (sum_{k < 40} ((ids[k] == i ? x[k, j] : 0)))"
    got = evaluate(Program(assigns=[a]), {"y": old, "x": x, "ids": ids}, shapes, {}, {})["y"]
    np.testing.assert_allclose(got, out)


@pytest.mark.parametrize("change", ["shifted_ids", "scaled", "one_row_lost"])
def test_anything_else_is_no_scatter(change: str) -> None:
    ids, x, old, out = _case(np.random.default_rng(1))
    if change == "shifted_ids":  # rows added one row further than the ids say
        out = old.copy()
        np.add.at(out, (ids + 1) % 7, x)
    elif change == "scaled":
        out = old + 2.0 * (out - old)
    else:  # the last row's contribution missing
        out = out.copy()
        out[ids[-1]] -= x[-1]
    shapes = {"y": (7, 5), "ids": (40,), "x": (40, 5)}
    with pytest.raises(LiftError):
        fit_scatter("y", out, old, shapes, {"x": x}, {"ids": ids})
