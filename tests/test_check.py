"""The migration check's element comparison: NaN and infinity agree with themselves only."""

from __future__ import annotations

import numpy as np

from migrator.check import compare


def test_matching_nan_and_infinity_agree_mismatched_ones_do_not() -> None:
    want = np.array([1.0, np.nan, np.inf, -np.inf, 2.0], dtype=np.float32)
    assert compare("y", want.copy(), want, 1e-5, 1e-6).ok  # sqrt(-1) in both: not a mismatch
    got = np.array([1.0, 0.5, np.inf, np.inf, np.nan], dtype=np.float32)
    r = compare("y", got, want, 1e-5, 1e-6)
    assert not r.ok and r.mismatches == 3  # number for NaN, +inf for -inf, NaN for a number


def test_tolerance_still_applies_to_finite_values() -> None:
    want = np.array([1.0, 100.0], dtype=np.float32)
    assert compare("y", want * (1 + 1e-7), want, 1e-5, 1e-6).ok
    assert compare("y", want * 1.01, want, 1e-5, 1e-6).mismatches == 2


def test_cuda_view_widens_only_dtype_variants_of_float_kernels() -> None:
    from pathlib import Path

    from migrator.check import cuda_view
    from migrator.contract import load_spec
    from migrator.dataset.tasks import variant_spec

    corpus = Path(__file__).resolve().parents[1] / "corpus"
    native = load_spec(corpus / "silu_bf16.toml")  # the kernel's own parameters are bf16
    assert [t.dtype for t in cuda_view(native).tensors] == ["bfloat16", "bfloat16"]
    variant = variant_spec(load_spec(corpus / "softmax_row.toml"), "bfloat16")
    assert {t.dtype for t in variant.tensors} == {"bfloat16"}
    assert {t.dtype for t in cuda_view(variant).tensors} == {"float32"}  # a float kernel


def test_cuda_view_follows_a_typedef_chosen_by_a_macro_in_a_header(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """llm.c's `floatX`: a header typedefs it as `__nv_bfloat16` when the file defines
    ENABLE_BF16. The CUDA original then takes bf16 buffers, as the interpreter resolves it."""
    from migrator.check import cuda_view
    from migrator.contract import load_spec

    (tmp_path / "common.h").write_text(
        "#include <cuda_bf16.h>\n#ifdef ENABLE_BF16\ntypedef __nv_bfloat16 floatX;\n"
        "#else\ntypedef float floatX;\n#endif\n"
    )
    (tmp_path / "k.cu").write_text(
        '#define ENABLE_BF16\n#include "common.h"\n'
        "__global__ void k(floatX* out, const floatX* inp, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) out[i] = (floatX)(2.0f * (float)inp[i]);\n}\n"
    )
    (tmp_path / "k.toml").write_text(
        '[kernel]\nname = "k"\n[sizes]\nN = 300\n'
        '[[tensors]]\nname = "inp"\nrole = "in"\ndtype = "bfloat16"\nshape = ["N"]\n'
        '[[tensors]]\nname = "out"\nrole = "out"\ndtype = "bfloat16"\nshape = ["N"]\n'
        '[[scalars]]\nname = "n"\nsize = "N"\n'
        '[launch]\ngrid = ["ceil_div(N, 128)"]\nblock = [128]\n'
    )
    spec = load_spec(tmp_path / "k.toml")
    assert {t.dtype for t in cuda_view(spec).tensors} == {"bfloat16"}


def test_an_allowance_widens_the_tolerance_where_given_and_only_there() -> None:
    want = np.array([1.0, 2.0, 3.0])
    got = want + np.array([0.05, 0.05, 0.05])
    assert not compare("y", got, want, 1e-3, 1e-3).ok
    allow = np.array([0.1, 0.1, 0.0])
    r = compare("y", got, want, 1e-3, 1e-3, allowance=allow)
    assert r.mismatches == 1 and r.allowance == 0.1
    # one allowance for the whole output (a sampled estimate of the original's error)
    assert compare("y", got, want, 1e-3, 1e-3, allowance=np.float64(0.1)).ok
