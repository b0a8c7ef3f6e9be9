"""The task contract: spec parsing, size formulas, launch configs and input generation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from migrator.contract import SpecError, eval_expr, load_spec, make_inputs

SPEC = """
[kernel]
name = "k"
family = "elementwise"

[sizes]
N = 1000

[[size_sets]]
N = 17

[[tensors]]
name = "x"
role = "in"
shape = ["N"]

[[tensors]]
name = "y"
role = "out"
shape = ["N"]

[[scalars]]
name = "n"
size = "N"

[[scalars]]
name = "alpha"
dtype = "float32"
value = 0.5

[launch]
grid = ["ceil_div(N, 256)"]
block = [256]

[inputs.x]
dist = "uniform"
low = 0.0
high = 1.0
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "k.toml"
    p.write_text(text)
    return p


def test_load_and_derive(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, SPEC))
    assert [t.name for t in spec.inputs_in_order] == ["x"]
    assert [t.name for t in spec.outputs_in_order] == ["y"]
    assert [s.name for s in spec.value_scalars] == ["alpha"]
    assert spec.all_size_sets() == [{"N": 1000}, {"N": 17}]
    assert spec.launch_config({"N": 1000}) == ((4, 1, 1), (256, 1, 1), 0)
    assert spec.cuda_source_path() == tmp_path / "k.cu"
    x = make_inputs(spec, {"N": 1000}, seed=1)["x"]
    assert x.dtype == np.float32 and x.shape == (1000,)
    assert x.min() >= 0.0 and x.max() <= 1.0  # low = 0.0 is honoured, not treated as unset
    assert np.array_equal(x, make_inputs(spec, {"N": 1000}, seed=1)["x"])


def test_drawn_inputs_are_remembered_as_copies_and_by_all_that_decides_them(
    tmp_path: Path,
) -> None:
    """A migration draws the same inputs a dozen times: they are drawn once, every caller gets
    its own copy, and another seed, size, dtype or distribution draws anew."""
    from migrator import contract
    from migrator.api import clear_caches

    spec = load_spec(write(tmp_path, SPEC))
    clear_caches()
    first = make_inputs(spec, {"N": 1000}, seed=1)["x"]
    first[:] = -7.0  # a caller's edit stays its own
    again = make_inputs(spec, {"N": 1000}, seed=1)["x"]
    assert again.min() >= 0.0 and len(contract._INPUTS) == 1
    assert not np.array_equal(again, make_inputs(spec, {"N": 1000}, seed=2)["x"])
    assert make_inputs(spec, {"N": 17}, seed=1)["x"].shape == (17,)
    wide = spec.model_copy(
        update={
            "tensors": [
                t.model_copy(update={"dtype": "float16"}) if t.name == "x" else t
                for t in spec.tensors
            ]
        }
    )
    assert make_inputs(wide, {"N": 1000}, seed=1)["x"].dtype == np.float16  # fmt: skip
    assert len(contract._INPUTS) == 4
    clear_caches()
    assert not contract._INPUTS


@pytest.mark.parametrize(
    ("expr", "value"),
    [("ceil_div(N, 256)", 4), ("(N + 15) / 16", 63), ("N * 2 - 1", 1999), ("max(N, 2048)", 2048),
     ("round_up(N, 128)", 1024), (7, 7), ("select(N <= 32, 2 * N, N) * 4", 4000),
     ("select(N > 32, 1, 0)", 1), ("6 * (1 << 5) + (N >> 3) + (N & 7)", 192 + 125 + 0)],
)  # fmt: skip
def test_size_expressions(expr: str | int, value: int) -> None:
    assert eval_expr(expr, {"N": 1000}) == value


@pytest.mark.parametrize(
    "expr", ["__import__('os')", "N.real", "M + 1", "N / 0", "lambda: 1", "1 < N < 2"]
)
def test_size_expressions_reject_unsafe_or_unknown(expr: str) -> None:
    with pytest.raises(SpecError):
        eval_expr(expr, {"N": 1000})


def test_a_size_expression_parsed_once_evaluates_at_each_size_set() -> None:
    """Formulas are compiled once per text (every run evaluates them at every size set): the
    same text at other sizes gives their value, and an error is the one evaluation reaches
    first, left to right, whichever sizes were seen before."""
    assert [eval_expr("ceil_div(N, 256) * M", {"N": n, "M": 3}) for n in (1, 256, 257)] == [
        3, 3, 6,
    ]  # fmt: skip
    assert eval_expr("M + N", {"M": 1, "N": 2}) == 3
    with pytest.raises(SpecError, match="unknown name 'M'"):
        eval_expr("M + N", {"N": 2})
    with pytest.raises(SpecError, match="unknown name 'M'"):
        eval_expr("M + foo(N)", {"N": 2})  # (the name comes first; foo is never reached)
    with pytest.raises(SpecError, match="unsupported syntax"):
        eval_expr("M + foo(N)", {"M": 1, "N": 2})
    with pytest.raises(SpecError, match="divides by zero"):
        eval_expr("N / (M - 1)", {"M": 1, "N": 2})


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('role = "in"', 'role = "input"', "tensors.0.role"),
        ("N = 1000", "N = 'big'", "sizes.N"),
        ('grid = ["ceil_div(N, 256)"]', 'grid = ["ceil_div(Q, 256)"]', "unknown name 'Q'"),
        ("value = 0.5", 'value = 0.5\nsize = "N"', "exactly one of"),
        ("[inputs.x]", "[inputs.zz]", "names no tensor"),
    ],
)
def test_bad_specs_name_the_field(tmp_path: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(SpecError) as e:
        load_spec(write(tmp_path, SPEC.replace(old, new, 1)))
    assert str(tmp_path / "k.toml") in str(e.value) and message in str(e.value)


def test_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="invalid TOML"):
        load_spec(write(tmp_path, "[kernel\nname="))


def test_relations_hold_in_every_published_set_and_steer_drawn_sizes(tmp_path: Path) -> None:
    """`relations` state what the kernel assumes (whole tiles, a leading dimension at least
    the row): published sets must obey them, `satisfy` adjusts drawn sizes, and an override
    that breaks one is refused with sizes that would do."""
    text = 'relations = ["N % 8 == 0", "ld >= N"]\n' + SPEC
    text = text.replace("N = 1000\n", "N = 1000\nld = 1000\n", 1).replace("N = 17", "N = 24")
    spec = load_spec(write(tmp_path, text))
    assert spec.satisfy({"N": 17, "ld": 3}) == {"N": 24, "ld": 24}
    assert spec.satisfy({"N": 16, "ld": 40}) == {"N": 16, "ld": 40}
    with pytest.raises(SpecError, match=r"'N % 8 == 0'.*N=1008"):
        spec.resolve_sizes({"N": 1001})
    with pytest.raises(SpecError, match="breaks the relation 'N % 8 == 0'"):
        load_spec(write(tmp_path, text.replace("N = 24", "N = 17")))
    with pytest.raises(SpecError, match="not one comparison"):
        load_spec(write(tmp_path, text.replace('"ld >= N"', '"ld + N"')))
    with pytest.raises(SpecError, match="unknown name 'Q'"):
        load_spec(write(tmp_path, text.replace('"ld >= N"', '"ld >= Q"')))


def test_a_spec_must_describe_its_kernels_parameters(tmp_path: Path) -> None:
    """Every pointer a tensor, every integer a scalar; a tensor may name a file-scope
    `__constant__` array the host fills (`cudaMemcpyToSymbol`)."""
    from migrator.contract import check_parameters

    spec = load_spec(write(tmp_path, SPEC))  # tensors x, y; scalars n, alpha
    params = [("x", True), ("y", True), ("n", False), ("alpha", False)]
    check_parameters(spec, "k", params)
    with pytest.raises(SpecError, match=r"k.toml:\d+: tensor x names CUDA parameter 'x'"):
        check_parameters(spec, "k", [("q", True), *params[1:]])
    with pytest.raises(SpecError, match="CUDA parameter 'z' has no tensor or scalar"):
        check_parameters(spec, "k", [*params, ("z", True)])
    with pytest.raises(SpecError, match="not a pointer"):
        check_parameters(spec, "k", [("x", False), *params[1:]])
    weights = SPEC.replace("[[scalars]]", '[[tensors]]\nname = "w"\nrole = "in"\nshape = ["4"]\n\n'
                           "[[scalars]]", 1)  # fmt: skip
    check_parameters(load_spec(write(tmp_path, weights)), "k", params, {"w"})
    # a pointer the launch passes as NULL is described by `null_args`, and only a pointer
    nulls = SPEC.replace("block = [256]\n", 'block = [256]\nnull_args = ["aux"]\n', 1)
    check_parameters(load_spec(write(tmp_path, nulls)), "k", [*params, ("aux", True)])
    with pytest.raises(SpecError, match="null argument 'aux' is no pointer"):
        check_parameters(load_spec(write(tmp_path, nulls)), "k", [*params, ("aux", False)])


FILL = """
__global__ void fill(float* out, int n, float value) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = value;
}

void run(float* out, int n) { fill<<<(n + 255) / 256, 256>>>(out, n, 0.5f); }
"""


def test_a_size_no_input_carries_is_passed_by_keyword(tmp_path: Path) -> None:
    """A kernel without inputs (a fill) cannot read its size from a shape: the size is passed
    by keyword like a value scalar, and the kernel takes no positional argument at all."""
    from migrator.migration import migrate

    (tmp_path / "fill.cu").write_text(FILL)
    (k,) = migrate(tmp_path / "fill.cu", out_dir=tmp_path / "out").kernels
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    assert "def fill(*, value, n):" in (k.nki_source or "")
    spec = load_spec(next((tmp_path / "out").glob("*.inferred.toml")))
    assert [s.name for s in spec.passed_sizes] == ["n"]
    assert spec.nki_kwargs({**spec.sizes, str(spec.passed_sizes[0].size): 7})["n"] == 7


def test_a_fill_input_needs_its_value_and_draws_it_everywhere() -> None:
    from migrator.contract import InputDist

    with pytest.raises(ValueError, match="fill"):
        InputDist(dist="fill")
    with pytest.raises(ValueError, match="fill"):
        InputDist(dist="normal", value=1.0)
    assert InputDist(dist="fill", value=0.0).value == 0.0
