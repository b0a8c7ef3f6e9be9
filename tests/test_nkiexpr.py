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


KERNEL = """import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def k(x, b):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    x_tile = nl.load(x)
    b_tile = nl.load(b)
    nl.store(out, value={expr})
    return out
"""


@pytest.mark.parametrize(
    ("body", "instruction"),
    [
        ("0.5f * v + 0.25f", "nisa.tensor_scalar"),
        ("2.0f - v * 3.0f", "nisa.tensor_scalar"),
        ("(v + 1.0f) / 4.0f", "nisa.tensor_scalar"),
        ("1.0f / (v - 2.5f)", "nisa.tensor_scalar"),
        ("v * 0.9f + u", "nisa.scalar_tensor_tensor"),
        ("u - (v - 0.5f)", None),  # other - (data op scalar): not one instruction
    ],
)
def test_fused_scalar_ops_compute_what_the_plain_ops_do(
    body: str, instruction: str | None, tmp_path
) -> None:
    import numpy as np

    import migrator.nki as mn

    e = _value(body)
    plain = render(e, lambda ld: f"{ld.name}_tile", {})
    fused = render(e, lambda ld: f"{ld.name}_tile", {}, fuse=True)
    assert (instruction in fused) if instruction else ("nisa." not in fused)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal((128, 64)).astype(np.float32)
    outs = []
    for i, expr in enumerate((plain, fused)):
        f = tmp_path / f"k{i}.py"
        f.write_text(KERNEL.format(expr=expr))
        out, _ = mn.run_kernel(mn.load_kernel_module(f).k, x, b)
        outs.append(np.asarray(out))
    np.testing.assert_array_equal(outs[0], outs[1])
