"""A scalar the host derives from the sizes (`m = max(1, 64 / N)` rows of partial sums) that
every size set tried holds at one value (m = 1): a loop it bounds ran once each time, an
offset it scales was one stride, so the program fitted there (`dst += part[0]`) says nothing
about other values. Such a kernel is not emitted (C2N2020 names the scalar, its value and the
loop it bounds); given a size of its own, the same kernel lifts as the sum it is."""

from __future__ import annotations

import textwrap
from pathlib import Path

from migrator.contract import load_spec
from migrator.cuda.frontend import analyze_file
from migrator.lift.frozen import frozen_scalars
from migrator.migration import migrate

KERNEL = """
    __global__ void add_partials(float* dst, const float* part, int n, int m) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        int rows = m;
        if (i < n) {
            float acc = 0.f;
            for (int l = 0; l < rows; ++l) acc += part[i + l * n];
            dst[i] += acc;
        }
    }
"""


def _spec(rows: str, extra: tuple[str, str] = ("", "")) -> str:
    return textwrap.dedent(f"""
        [kernel]
        name = "add_partials"
        source = "add_partials.cu"
        [sizes]
        N = 2048{extra[0]}
        [[size_sets]]
        N = 4096{extra[1]}
        [[tensors]]
        name = "dst"
        role = "inout"
        shape = ["N"]
        [[tensors]]
        name = "part"
        role = "in"
        shape = ["{rows}", "N"]
        [[scalars]]
        name = "n"
        size = "N"
        [[scalars]]
        name = "m"
        size = "{rows}"
        [launch]
        grid = ["ceil_div(N, 256)"]
        block = [256]
    """)


def _write(tmp_path: Path, spec: str) -> Path:
    (tmp_path / "add_partials.cu").write_text(textwrap.dedent(KERNEL))
    (tmp_path / "spec.toml").write_text(spec)
    return tmp_path / "spec.toml"


def test_a_row_count_held_at_one_is_named_and_the_kernel_not_emitted(tmp_path: Path) -> None:
    spec = _write(tmp_path, _spec("max(1, 64 / N)"))
    (k,) = migrate(tmp_path / "add_partials.cu", spec=spec, out_dir=tmp_path / "out").kernels
    assert k.status != "complete"
    (d,) = [d for d in k.diagnostics if d.id == "C2N2020"]
    assert d.args["scalar"] == "m" and d.args["value"] == 1
    assert d.args["use"] == "it bounds the loop over l"
    assert "dst[i] = dst[i] + part[0, i]" in d.message
    assert d.span is not None and d.span.line == 7  # the loop


def test_the_same_kernel_with_its_own_row_size_lifts_as_a_sum(tmp_path: Path) -> None:
    spec = _write(tmp_path, _spec("R", ("\nR = 3", "\nR = 5")))
    (k,) = migrate(tmp_path / "add_partials.cu", spec=spec, out_dir=tmp_path / "out").kernels
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    assert not [d for d in k.diagnostics if d.id == "C2N2020"]
    assert k.lifted is not None and k.lifted.program is not None
    assert k.lifted.program.render() == "dst[i] = dst[i] + (sum_{k < R} part[k, i])"


def test_only_a_derived_scalar_held_at_one_value_is_frozen(tmp_path: Path) -> None:
    (k,) = analyze_file(_write(tmp_path, "").with_name("add_partials.cu")).kernels
    held = load_spec(_write(tmp_path, _spec("max(1, 64 / N)")))
    varied = load_spec(_write(tmp_path, _spec("max(1, 8192 / N)")))
    own = load_spec(_write(tmp_path, _spec("R", ("\nR = 3", "\nR = 5"))))
    sets = [{"N": 2048, "R": 3}, {"N": 4096, "R": 3}]
    (f,) = frozen_scalars(k, held, sets)  # the loop found through `rows = m`
    assert (f.scalar, f.value) == ("m", 1) and f.loop is not None and f.loop.var == "l"
    assert frozen_scalars(k, varied, sets) == []  # 4 and 2
    assert frozen_scalars(k, own, sets) == []  # one size: the contract, whatever the sets


# no loop: the scalar scales an offset (the partial row read), one stride at every set
OFFSET = """
    __global__ void add_last_partial(float* dst, const float* part, int n, int m) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) dst[i] += part[i + (m - 1) * n];
    }
"""


def test_a_frozen_scalar_in_an_offset_is_named_too(tmp_path: Path) -> None:
    (tmp_path / "add_partials.cu").write_text(textwrap.dedent(OFFSET))
    spec = tmp_path / "spec.toml"
    spec.write_text(
        _spec("max(1, 64 / N)").replace('name = "add_partials"', 'name = "add_last_partial"')
    )
    (k,) = migrate(tmp_path / "add_partials.cu", spec=spec, out_dir=tmp_path / "out").kernels
    assert k.status != "complete"
    (d,) = [d for d in k.diagnostics if d.id == "C2N2020"]
    assert d.args["scalar"] == "m" and d.args["use"] == "the kernel reads it"
