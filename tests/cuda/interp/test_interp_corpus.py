"""Every corpus kernel, run by the interpreter through its spec, matches its numpy reference.

Parametrised over `corpus/*.toml`, so kernels added later are picked up. Kernels whose
arithmetic is order-independent and free of transcendental functions must match bit for bit
(with nvcc's default fma contraction the reference's float64-then-round equals the kernel's
single rounding); the rest within rtol 1e-5 and an absolute tolerance of 1e-5 times the output
scale (fp32 accumulations over K / row lengths, and ulp-level differences in expf/tanhf).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from migrator.contract import load_spec
from migrator.cuda.interp.spec_run import run_spec_full

CORPUS = Path(__file__).resolve().parents[3] / "corpus"
SPECS = sorted(CORPUS.glob("*.toml"))
BIT_EXACT = {"vector_add", "saxpy", "scale_2d_pitch", "transpose_tiled"}

CASES = [
    pytest.param(p, i, id=f"{p.stem}-{i}")
    for p in SPECS
    for i in range(len(load_spec(p).all_size_sets()))
]


@pytest.mark.parametrize(("spec_path", "set_index"), CASES)
def test_corpus_kernel_matches_reference(spec_path: Path, set_index: int) -> None:
    spec = load_spec(spec_path)
    sizes = spec.all_size_sets()[set_index]
    run = run_spec_full(spec, sizes, seed=set_index)
    assert run.result.findings == [], [f.render() for f in run.result.findings]
    ins = [run.inputs[t.name] for t in spec.inputs_in_order]
    kw = {s.name: s.value for s in spec.value_scalars}
    expected = spec.reference_function()(*ins, **kw)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(run.outputs) == len(expected)
    for got, exp in zip(run.outputs, expected, strict=True):
        assert got.shape == exp.shape and got.dtype == exp.dtype
        assert np.isfinite(got).all(), "kernel left elements unwritten (NaN poison)"
        if spec_path.stem in BIT_EXACT:
            np.testing.assert_array_equal(got, exp)
        else:
            scale = max(1.0, float(np.abs(exp.astype(np.float64)).max()))
            np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5 * scale)


def test_corpus_is_present() -> None:
    assert SPECS, f"no specs in {CORPUS}"


def test_run_spec_public_api_and_input_override() -> None:
    from migrator.cuda.interp import run_spec

    spec = load_spec(CORPUS / "saxpy.toml")
    x = np.arange(1000, dtype=np.float32)
    y = np.ones(1000, dtype=np.float32)
    (out,) = run_spec(spec, {"N": 1000}, inputs={"x": x, "y": y})
    np.testing.assert_array_equal(out, np.float32(2.5) * x + 1)
    with pytest.raises(ValueError, match="shape"):
        run_spec(spec, {"N": 1000}, inputs={"x": x[:10]})
