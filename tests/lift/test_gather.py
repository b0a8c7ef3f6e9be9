"""Gathers: a coordinate read from an integer input (a token id, a label) is lifted as such,
fitted however the kernel spells the address, verified, and rewritten into 2-D views."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from migrator.contract import load_spec
from migrator.lift import lift_task
from migrator.lift.fit import Canonicaliser, Fitter
from migrator.lift.program import (
    Assign,
    Expr,
    Gather,
    IndexMap,
    LiftError,
    Program,
    Term,
    _index,
    evaluate,
)

EMBED_FLAT = (
    """
    // token + position embedding over flat tables, one thread per output element
    __global__ void embed(float* out, const int* ids, const float* wte, const float* wpe,
                          int B, int T, int C) {
        int idx = blockIdx.x * blockDim.x + threadIdx.x;
        if (idx < B * T * C) {
            int bt = idx / C, c = idx % C, t = bt % T;
            out[idx] = wte[ids[bt] * C + c] + wpe[t * C + c];
        }
    }
    """,
    """
    [kernel]
    name = "embed"
    [sizes]
    B = 3
    T = 5
    C = 7
    V = 11
    [[tensors]]
    name = "out"
    role = "out"
    shape = ["B * T * C"]
    [[tensors]]
    name = "ids"
    role = "in"
    dtype = "int32"
    shape = ["B * T"]
    [[tensors]]
    name = "wte"
    role = "in"
    shape = ["V * C"]
    [[tensors]]
    name = "wpe"
    role = "in"
    shape = ["T * C"]
    [[scalars]]
    name = "B"
    size = "B"
    [[scalars]]
    name = "T"
    size = "T"
    [[scalars]]
    name = "C"
    size = "C"
    [launch]
    grid = ["ceil_div(B * T * C, 64)"]
    block = [64]
    [inputs.ids]
    dist = "int"
    low = 0
    high = "V"
    """,
)

LABELS = (
    """
    // per-row loss of the probability at the row's label, one thread per row
    __global__ void nll(float* loss, const float* probs, const int* target, int R, int V) {
        int r = blockIdx.x * blockDim.x + threadIdx.x;
        if (r < R) loss[r] = -logf(probs[r * V + target[r]]);
    }
    """,
    """
    [kernel]
    name = "nll"
    [sizes]
    R = 20
    V = 9
    [[tensors]]
    name = "loss"
    role = "out"
    shape = ["R"]
    [[tensors]]
    name = "probs"
    role = "in"
    shape = ["R * V"]
    [[tensors]]
    name = "target"
    role = "in"
    dtype = "int32"
    shape = ["R"]
    [[scalars]]
    name = "R"
    size = "R"
    [[scalars]]
    name = "V"
    size = "V"
    [launch]
    grid = ["ceil_div(R, 32)"]
    block = [32]
    [inputs.probs]
    dist = "positive"
    [inputs.target]
    dist = "int"
    low = 0
    high = "V"
    """,
)

EMBED_3D = (
    """
    // ids[B][T] picks rows of wte[V][C]; a block per (b, t), threads over the channels
    __global__ void embed3(float* out, const int* ids, const float* wte, int T, int C) {
        int b = blockIdx.y, t = blockIdx.x;
        const float* row = wte + (long)ids[b * T + t] * C;
        for (int c = threadIdx.x; c < C; c += blockDim.x)
            out[((long)b * T + t) * C + c] = 2.0f * row[c];
    }
    """,
    """
    [kernel]
    name = "embed3"
    [sizes]
    B = 2
    T = 6
    C = 40
    V = 13
    [[tensors]]
    name = "out"
    role = "out"
    shape = ["B", "T", "C"]
    [[tensors]]
    name = "ids"
    role = "in"
    dtype = "int32"
    shape = ["B", "T"]
    [[tensors]]
    name = "wte"
    role = "in"
    shape = ["V", "C"]
    [[scalars]]
    name = "T"
    size = "T"
    [[scalars]]
    name = "C"
    size = "C"
    [launch]
    grid = ["T", "B"]
    block = [32]
    [inputs.ids]
    dist = "int"
    low = 0
    high = "V"
    """,
)


def _spec(tmp_path: Path, name: str, task: tuple[str, str]):  # type: ignore[no-untyped-def]
    (tmp_path / f"{name}.cu").write_text(textwrap.dedent(task[0]))
    (tmp_path / f"{name}.toml").write_text(textwrap.dedent(task[1]))
    return load_spec(tmp_path / f"{name}.toml")


@pytest.mark.parametrize(
    ("name", "task", "expect"),
    [
        ("embed", EMBED_FLAT, "out[i] = wpe[(i % (C * T))] + wte[C*ids[(i // C)] + (i % C)]"),
        ("nll", LABELS, "loss[i] = -1 * log(probs[target[i] + V*i])"),
        ("embed3", EMBED_3D, "out[i, j, l] = 2 * wte[ids[i, j], l]"),
    ],
)
def test_gathers_lift_and_verify(tmp_path: Path, name: str, task: tuple[str, str],
                                 expect: str) -> None:  # fmt: skip
    result = lift_task(_spec(tmp_path, name, task))
    assert result.ok, result.render()
    assert result.program is not None and result.program.render() == expect
    assert all(v.ok and not v.skipped for v in result.verified[:2])


def test_a_flat_gather_program_is_rewritten_over_2d_views(tmp_path: Path) -> None:
    from migrator.lift.views import with_views

    spec = _spec(tmp_path, "embed", EMBED_FLAT)
    result = lift_task(spec)
    assert result.program is not None
    views = with_views(result.program, spec)
    assert views is not None
    program, respec = views
    assert program.render() == "out[i, j] = wpe[(i % T), j] + wte[ids[i], j]"
    shapes = {t.name: t.shape for t in respec.tensors}
    assert shapes["wte"] == ["V", "C"] and shapes["wpe"] == ["T", "C"]
    assert shapes["out"] == ["B * T", "C"] and shapes["ids"] == ["B * T"]


def _evaluate_map(m: IndexMap, x: np.ndarray, names: list[str],
                  ints: dict[str, np.ndarray]) -> np.ndarray:  # fmt: skip
    env = {v: x[:, n] for n, v in enumerate(names)}
    return np.broadcast_to(_index(m, env, {}, ints), (len(x),))


@given(
    rows=st.integers(4, 40),
    width=st.integers(2, 12),
    values=st.integers(2, 30),
    flat_table=st.booleans(),
    seed=st.integers(0, 10_000),
)
@settings(max_examples=40, deadline=None)
def test_a_gathered_coordinate_is_found_among_repeated_values(
    rows: int, width: int, values: int, flat_table: bool, seed: int
) -> None:
    """Index values repeat (a few distinct ids over many rows): a map of where each element
    read its id is still found, and reproduces every element's coordinate."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, values, size=rows)
    n = np.arange(rows * width)
    x = n[np.unique(np.linspace(0, n.size - 1, 40).astype(int))][:, None]
    # the coordinate the kernel reads: a table row `ids[i // width]` (scaled by the row
    # length where the table is flat), plus the column `i % width`
    y = ids[x[:, 0] // width] * (width if flat_table else 1) + (x[:, 0] % width if flat_table
                                                                else 0)  # fmt: skip
    f = Fitter(Canonicaliser(), {}, {"W": width, "R": rows}, {"ids": ids})
    got = f.index(x, ["i"], y)  # (a small sample may also fit a div/mod by coincidence)
    np.testing.assert_array_equal(_evaluate_map(got, x, ["i"], {"ids": ids}), y)


def test_an_index_no_integer_input_explains_is_refused() -> None:
    x = np.arange(0, 60, 3)[:, None]
    y = (x[:, 0] * x[:, 0]) % 17  # not affine, not div/mod, not read from `ids`
    f = Fitter(Canonicaliser(), {}, {"N": 60}, {"ids": np.arange(5)})
    with pytest.raises(LiftError, match="not an affine"):
        f.index(x, ["i"], y)


def test_a_gather_outside_its_table_is_an_error_not_a_wraparound() -> None:
    g = IndexMap(gather=Gather(tensor="ids", index=[IndexMap(terms=[Term(coef=1, var="i")])]))
    load = Expr(kind="load", tensor="x", index=[g])
    prog = Program(assigns=[Assign(tensor="y", vars=["i"], expr=load)])
    x = np.arange(4.0)
    ok = evaluate(prog, {"x": x, "ids": np.array([3, 0, 1])}, {"y": (3,)}, {}, {})
    np.testing.assert_array_equal(ok["y"], [3.0, 0.0, 1.0])
    with pytest.raises(LiftError, match="reads outside x"):
        evaluate(prog, {"x": x, "ids": np.array([3, 4, 1])}, {"y": (3,)}, {}, {})


EMBED_H8 = (
    """
    #include <cuda_fp16.h>
    // rows of a half table gathered by id, eight halves (16 bytes) per thread
    __global__ void emb_h8(const int* idx, const __half* weight, __half* out, int C) {
        int row = blockIdx.x;
        int c = threadIdx.x * 8;
        if (c < C)
            *reinterpret_cast<uint4*>(out + row * C + c) =
                *reinterpret_cast<const uint4*>(weight + idx[row] * C + c);
    }
    """,
    """
    [kernel]
    name = "emb_h8"
    [sizes]
    N = 40
    C = 64
    V = 50
    [[tensors]]
    name = "idx"
    role = "in"
    dtype = "int32"
    shape = ["N"]
    [[tensors]]
    name = "weight"
    role = "in"
    dtype = "float16"
    shape = ["V", "C"]
    [[tensors]]
    name = "out"
    role = "out"
    dtype = "float16"
    shape = ["N", "C"]
    [[scalars]]
    name = "C"
    size = "C"
    [launch]
    grid = ["N"]
    block = ["C / 8"]
    [inputs.idx]
    dist = "int"
    low = 0
    high = "V"
    """,
)


def test_sizes_where_16_byte_loads_are_misaligned_are_not_traced(tmp_path: Path) -> None:
    """At C = 12 a 16-byte load of row ids[i] starts mid-vector (CUDA faults there): those
    sizes are rejected and the lift is fitted where the row length is a multiple of 8."""
    result = lift_task(_spec(tmp_path, "emb_h8", EMBED_H8))
    assert result.ok, result.render()
    assert result.program is not None
    assert result.program.render() == "out[i, j] = weight[idx[i], j]"
    assert all(s["C"] % 8 == 0 for s in result.fitted_at)


def test_a_literal_shape_factor_the_program_names_as_a_size_splits_the_view() -> None:
    """LeetCUDA-style: the spec says `256 * N` while the kernel strides by `emb_size`, which is
    256 in every size set: the flat tensors are still seen as [rows, emb_size]."""
    from migrator.contract import TaskSpec
    from migrator.lift.views import with_views

    spec = TaskSpec.model_validate({
        "kernel": {"name": "emb"},
        "sizes": {"N": 64, "emb_size": 256, "V": 300},
        "size_sets": [{"N": 37, "emb_size": 256, "V": 99}],
        "tensors": [
            {"name": "idx", "role": "in", "dtype": "int32", "shape": ["N"]},
            {"name": "weight", "role": "in", "dtype": "float32", "shape": ["256 * V"]},
            {"name": "output", "role": "out", "dtype": "float32", "shape": ["256 * N"]},
        ],
        "scalars": [{"name": "emb_size", "dtype": "int32", "size": "emb_size"}],
        "launch": {"grid": ["N"], "block": ["emb_size"]},
    })  # fmt: skip
    row = IndexMap(terms=[Term(coef=1, var="i", div="emb_size")])
    col = Term(coef=1, var="i", mod="emb_size")
    g = Gather(tensor="idx", index=[row], coef="emb_size")
    load = Expr(kind="load", tensor="weight", index=[IndexMap(terms=[col], gather=g)])
    prog = Program(assigns=[Assign(tensor="output", vars=["i"], expr=load)])
    views = with_views(prog, spec)
    assert views is not None
    program, respec = views
    assert program.render() == "output[i, j] = weight[idx[i], j]"
    shapes = {t.name: t.shape for t in respec.tensors}
    assert shapes["weight"] == ["V", "emb_size"] and shapes["output"] == ["N", "emb_size"]
