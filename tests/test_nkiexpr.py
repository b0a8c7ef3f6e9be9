"""CUDA expressions rendered as NKI: activation functions recognised whatever their spelling."""

from __future__ import annotations

import pytest

from migrator.cuda.frontend import analyze_text
from migrator.cuda.ir import Expr
from migrator.nkiexpr import activation_of, render


def _value(body: str) -> Expr:
    src = (
        "__global__ void k(const float* x, const float* b, float* y) {\n"
        "  int i = threadIdx.x;\n  float v = x[i];\n  float u = x[i] + b[i];\n"
        f"  y[i] = {body};\n}}\n"
    )
    (st,) = analyze_text(src, "t.cu").kernel("k").stores
    return st.value


def _nki(body: str) -> str:
    return render(_value(body), lambda ld: f"{ld.name}_tile", {})


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("v / (1.0f + expf(-v))", "nl.silu(x_tile)"),
        ("v * (1.0f / (1.0f + __expf(-v)))", "nl.silu(x_tile)"),
        ("1.0f / (1.0f + expf(-v))", "nl.sigmoid(x_tile)"),
        ("0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))",
         "nl.gelu_apprx_tanh(x_tile)"),
        ("0.5f * u * (1.0f + erff(u * 0.70710678f))", "nl.gelu(nl.add(x_tile, b_tile))"),
        ("logf(1.0f + expf(v))", "nl.softplus(x_tile)"),
    ],
)  # fmt: skip
def test_activation_spellings(body: str, expected: str) -> None:
    assert _nki(body) == expected


@pytest.mark.parametrize(
    "body",
    ["v * v + 1.0f", "v / (2.0f + expf(-v))", "0.5f * v * (1.0f + tanhf(0.8f * v))", "expf(v)"],
)
def test_near_misses_stay_as_written(body: str) -> None:
    assert activation_of(_value(body)) is None
    assert "nl.silu" not in _nki(body) and "nl.gelu" not in _nki(body)
