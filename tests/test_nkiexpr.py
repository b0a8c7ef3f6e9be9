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


def test_activations_of_a_big_expression_are_found_in_each_copy_once() -> None:
    """A lifted expression repeats its subtrees (each copy a node of its own): each copy of an
    activation is recognised, and an activation of a large operand too (the operand's own
    operations are not the activation's, whatever MAX_ACTIVATION_OPS allows)."""
    big = " + ".join(f"x[i] * {k}.5f" for k in range(30))  # 59 operations
    body = f"(v / (1.0f + expf(-v))) * (v / (1.0f + expf(-v))) + 1.0f / (1.0f + expf(-({big})))"
    out = _nki(body)
    assert out.count("nl.silu(x_tile)") == 2 and out.count("nl.sigmoid(") == 1
    assert "nl.exp" not in out


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
        # hardswish: its clamps are plain max/min (v's NaN reaches the result) and fuse too
        ("v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f", "nisa.scalar_tensor_tensor"),
        ("fmaxf(v + 3.0f, 0.0f) * u", "nisa.scalar_tensor_tensor"),
        ("fmaxf(v, 0.0f) * 2.0f", None),  # ReLU keeps its maxNum select: nothing to fuse
    ],
)
def test_fused_scalar_ops_compute_what_the_plain_ops_do(
    body: str, instruction: str | None, tmp_path
) -> None:
    import numpy as np

    e = _value(body)
    plain = render(e, lambda ld: f"{ld.name}_tile", {})
    fused = render(e, lambda ld: f"{ld.name}_tile", {}, fuse=True)
    assert (instruction in fused) if instruction else ("nisa." not in fused)
    a, b = _emulated(KERNEL, (plain, fused), tmp_path, seed=3)
    np.testing.assert_array_equal(a, b)


def _emulated(kernel: str, exprs: tuple[str, ...], tmp_path, seed: int) -> list:  # type: ignore[no-untyped-def]
    """The stored output of `kernel` with each of `exprs` as its value, in the emulator, on the
    same random [128, 64] inputs x and b."""
    import numpy as np

    import migrator.nki as mn

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal((128, 64)).astype(np.float32)
    outs = []
    for i, expr in enumerate(exprs):
        f = tmp_path / f"k{i}.py"
        f.write_text(kernel.format(expr=expr))
        out, _ = mn.run_kernel(mn.load_kernel_module(f).k, x, b)
        outs.append(np.asarray(out))
    return outs


@pytest.mark.parametrize(
    ("body", "select"),
    [
        ("v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f", False),  # hardswish: v's NaN wins
        ("fmaxf(v + 3.0f, 0.0f) * u", False),  # u = x + b carries x's NaN to the result
        ("fmaxf(v, 0.0f)", True),  # ReLU: CUDA maps NaN to 0
        ("fmaxf(v * 0.0f, 1.0f) * v", True),  # inf * 0 is NaN while v is not
        ("fminf(b[i] + 1.0f, 2.0f) * v", True),  # b's NaN does not reach the result otherwise
    ],
)
def test_maxnum_select_only_where_a_nan_could_be_hidden(body: str, select: bool, tmp_path) -> None:
    """fmaxf/fminf return the non-NaN operand; `nl.maximum` propagates NaN. The generator may
    use the plain maximum only when the two agree on every input, NaN and inf included: the
    rendered kernel must then match the CUDA interpreter bit for bit in NaN positions."""
    import numpy as np

    import migrator.nki as mn
    from migrator.cuda.interp import run_kernel as run_cuda
    from migrator.cuda.parse import parse_text

    expr = render(_value(body), lambda ld: f"{ld.name}_tile", {})
    assert ("nl.where(" in expr) is select
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e38, -3.0, 2.5], np.float32)
    x = np.tile(special, 8)
    b = np.repeat(special, 8)  # every pair of special values
    src = parse_text(
        "__global__ void k(const float* x, const float* b, float* y) {\n  int i = threadIdx.x;\n"
        f"  float v = x[i];\n  float u = x[i] + b[i];\n  y[i] = {body};\n}}",
        "k.cu",
    )
    want = np.zeros(64, np.float32)
    run_cuda(src, "k", 1, 64, {"x": x, "b": b, "y": want})
    f = tmp_path / "k.py"
    f.write_text(KERNEL.format(expr=expr))
    got, _ = mn.run_kernel(mn.load_kernel_module(f).k, x.reshape(1, 64), b.reshape(1, 64))
    np.testing.assert_array_equal(np.isnan(np.asarray(got).reshape(-1)), np.isnan(want))
    np.testing.assert_allclose(np.asarray(got).reshape(-1), want, rtol=1e-6)


def test_bind_computes_a_clamped_operand_once() -> None:
    """With a place for statements (`bind`), the maxNum select names its operand instead of
    rendering it twice, and nested clamps stay selects instead of falling back to nl.maximum."""
    bound: list[tuple[str, str]] = []

    def bind(source: str) -> str:
        bound.append((f"t{len(bound)}", source))
        return bound[-1][0]

    e = _value("fminf(fmaxf(u * 2.0f, 0.0f), 6.0f)")  # ReLU6 of u: NaN must become 0
    expr = render(e, lambda ld: f"{ld.name}_tile", {}, bind=bind)
    assert bound == [
        ("t0", "nl.multiply(nl.add(x_tile, b_tile), 2.0)"),
        ("t1", "nl.where(nl.greater(t0, 0.0), t0, 0.0)"),
    ]
    assert expr == "nl.where(nl.less(t1, 6.0), t1, 6.0)"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("-INFINITY", '-float("inf")'),
        ("v > 0.0f ? v : NAN", 'nl.where(nl.greater(x_tile, 0.0), x_tile, float("nan"))'),
        ("__int_as_float(0x3f800000)", "1.0"),
    ],
)
def test_constants_spelled_by_their_bits_are_numbers(body: str, expected: str) -> None:
    """<math.h> spells INFINITY and NAN as `__int_as_float(bits)`: a float of the kernel, not a
    call NKI lacks (and inf and nan have no Python literal)."""
    assert _nki(body) == expected


# the same kernel with one value per partition and a row vector besides the whole tiles
ROW_KERNEL = KERNEL.replace(
    "    b_tile = nl.load(b)\n",
    "    b_tile = nl.load(b)\n"
    "    s_tile = nl.load(x[:, 0:1])  # one value per partition\n"
    "    w_tile = nl.load(b[0:1, :])  # a row vector, broadcast along the partitions\n",
)


@pytest.mark.parametrize(
    ("body", "instructions"),
    [
        ("(x[i] - s[i]) * s[i] * 0.5f", ["nisa.tensor_scalar"]),
        ("(x[i] - s[i]) * (s[i] * 2.0f) + b[i]", ["nisa.scalar_tensor_tensor"]),
        ("x[i] * s[i] + b[i] + s[i]", ["nisa.scalar_tensor_tensor"]),  # then one nl.add
        ("s[i] - x[i] * s[i]", ["nisa.tensor_scalar"]),  # reversed operand
        ("x[i] * s[i] + w[i]", []),  # a [1, F] row vector is no instruction's tile operand
        ("w[i] * s[i] + x[i]", []),  # nor its data
    ],
)
def test_one_value_per_partition_fuses_as_a_scalar_operand(
    body: str, instructions: list[str], tmp_path
) -> None:
    """A row program's per-row values ([P, 1]) are legal scalar operands of the fused
    instructions; row vectors are neither scalars nor tiles there, so they stay as nl ops."""
    import numpy as np

    src = (
        "__global__ void k(const float* x, const float* b, const float* s, const float* w, "
        f"float* y) {{\n  int i = threadIdx.x;\n  y[i] = {body};\n}}\n"
    )
    (st,) = analyze_text(src, "t.cu").kernel("k").stores
    tiles = {"x": "x_tile", "b": "b_tile", "s": "s_tile", "w": "w_tile"}
    plain = render(st.value, lambda ld: tiles[ld.name or ""], {})
    fused = render(st.value, lambda ld: tiles[ld.name or ""], {}, fuse=True,
                   scalar=lambda n: n.kind != "load" or n.name == "s",
                   wide=lambda n: n.kind == "load" and n.name in ("x", "b"),
                   dtype="nl.float32")  # fmt: skip
    assert [c for c in ("nisa.tensor_scalar", "nisa.scalar_tensor_tensor") if c in fused] == (
        instructions
    ), fused
    a, b = _emulated(ROW_KERNEL, (plain, fused), tmp_path, seed=5)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
