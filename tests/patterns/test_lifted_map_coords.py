"""Maps that choose by position (`t > t2 ? -inf : x * scale`, a triangle kept and the rest
zeroed) migrate as maps whose condition compares iotas of the tile's row and column numbers,
in both dialects; a rank-3 output maps as rows of its last axis."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from migrator.migration import migrate

# llm.c's scale step of attention: flat T x T matrices, one thread per element; the condition
# on a store made the elementwise tile program drop it before
CAUSAL_SCALE = """
    #include <math.h>
    __global__ void causal_scale(float* att, float scale, int BH, int T) {
        int idx = blockIdx.x * blockDim.x + threadIdx.x;
        if (idx < BH * T * T) {
            int rest = idx % (T * T);
            int row = rest / T, col = rest % T;
            if (col > row) {
                att[idx] = -INFINITY;
            } else {
                att[idx] *= scale;
            }
        }
    }

    void launch(float* att, float scale, int BH, int T) {
        int n = BH * T * T;
        causal_scale<<<(n + 255) / 256, 256>>>(att, scale, BH, T);
    }
"""
# a lower triangle kept from [B, T, T] (the spec says rank 3), the rest zeroed
TRIL = """
    __global__ void tril(const float* x, float* y, int B, int T) {
        int b = blockIdx.y;
        int i = blockIdx.x;
        for (int j = threadIdx.x; j < T; j += blockDim.x) {
            size_t at = ((size_t)b * T + i) * T + j;
            y[at] = j <= i ? 2.0f * x[at] : 0.0f;
        }
    }
"""
TRIL_SPEC = """
    [kernel]
    name = "tril"
    [sizes]
    B = 3
    T = 40
    [[size_sets]]
    B = 2
    T = 130
    [[tensors]]
    name = "x"
    role = "in"
    shape = ["B", "T", "T"]
    [[tensors]]
    name = "y"
    role = "out"
    shape = ["B", "T", "T"]
    [[scalars]]
    name = "B"
    size = "B"
    [[scalars]]
    name = "T"
    size = "T"
    [launch]
    grid = ["T", "B"]
    block = [64]
"""


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_a_causal_scale_migrates_as_a_map_masked_by_position(tmp_path: Path, api: str) -> None:
    (tmp_path / "scale.cu").write_text(textwrap.dedent(CAUSAL_SCALE))
    (k,) = migrate(tmp_path / "scale.cu", out_dir=tmp_path / api, nki_api=api).kernels
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    src = k.nki_source or ""
    assert "nisa.iota" in src and "nl.mod(" in src and 'float("-inf")' in src


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_a_rank_3_output_maps_as_rows_of_its_last_axis(tmp_path: Path, api: str) -> None:
    (tmp_path / "tril.cu").write_text(textwrap.dedent(TRIL))
    (tmp_path / "tril.toml").write_text(textwrap.dedent(TRIL_SPEC))
    (k,) = migrate(tmp_path / "tril.cu", out_dir=tmp_path / api, nki_api=api).kernels
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    src = k.nki_source or ""
    assert ".reshape((" in src and "nl.mod(row_ids" in src


# cross-entropy's logit gradient as its own kernel (llm.c's crossentropy_softmax_backward):
# one thread per element, the column compared with the row's label
CE_BACKWARD = """
    __global__ void ce_backward(float* dlogits, const float* dlosses, const float* probs,
                                const int* targets, int N, int V) {
        int idx = blockIdx.x * blockDim.x + threadIdx.x;
        if (idx < N * V) {
            int n = idx / V, v = idx % V;
            float hot = v == targets[n] ? 1.0f : 0.0f;
            dlogits[idx] += (probs[idx] - hot) * dlosses[n];
        }
    }

    void launch(float* dlogits, const float* dlosses, const float* probs, const int* targets,
                int N, int V) {
        ce_backward<<<(N * V + 255) / 256, 256>>>(dlogits, dlosses, probs, targets, N, V);
    }
"""


@pytest.mark.parametrize("api", ["legacy", "new"])
def test_a_map_comparing_the_column_with_a_rows_label(tmp_path: Path, api: str) -> None:
    """`j == targets[i] ? ... : ...`: the label is loaded one per partition and compared with
    the column numbers (no spec: the labels are inferred to lie within a row)."""
    (tmp_path / "ce.cu").write_text(textwrap.dedent(CE_BACKWARD))
    (k,) = migrate(tmp_path / "ce.cu", out_dir=tmp_path / api, nki_api=api).kernels
    assert (k.family, k.status) == ("elementwise", "complete"), k.diagnostics
    assert k.check is not None and k.check.ok
    src = k.nki_source or ""
    assert "col_ids" in src and "targets" in src and "nl.equal(" in src
