"""Attention scores from lifted programs: a causal Q K^T over a packed `[B, T, 3, NH, hs]`
projection (the mask's -inf stored above the diagonal, the scale `1 / sqrt(C / NH)`) and a
plain scaled one over `[B, NH, T, hs]` heads migrate without a spec in both dialects, checked
against the CUDA original; a mask other than the causal one is refused with the reason."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from migrator.migration import migrate

KERNELS = """
    // separate Q and K heads [BH, T, D], a scale passed in: every score, no mask
    __global__ void head_scores(float* s, const float* q, const float* k, float scale,
                                int BH, int T, int D) {
        int n = blockIdx.x * blockDim.x + threadIdx.x;
        if (n >= BH * T * T) return;
        int j = n % T, i = (n / T) % T, bh = n / (T * T);
        float acc = 0.0f;
        for (int d = 0; d < D; d++) acc += q[(bh * T + i) * D + d] * k[(bh * T + j) * D + d];
        s[n] = scale * acc;
    }

    __global__ void band_scores(float* scores, const float* q, const float* k, int T, int D) {
        int n = blockIdx.x * blockDim.x + threadIdx.x;
        if (n >= T * T) return;
        int j = n % T, i = n / T;
        if (i > j + 2) { scores[n] = 0.0f; return; }  // keys well before the query: masked
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += q[i * D + d] * k[j * D + d];
        scores[n] = dot;
    }

    void forward(float* scores, float* s, const float* q, const float* k, int B, int T, int C,
                 int NH) {
        int hs = C / NH;
        head_scores<<<(B * NH * T * T + 63) / 64, 64>>>(s, q, k, 0.125f, B * NH, T, hs);
        band_scores<<<(T * T + 127) / 128, 128>>>(scores, q, k, T, hs);
    }
"""


CAUSAL = Path(__file__).resolve().parents[1] / "data" / "causal_scores.cu"  # (packed QKV)


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scores") / "scores.cu"
    path.write_text(textwrap.dedent(KERNELS))
    (path.parent / "causal_scores.cu").write_text(CAUSAL.read_text())
    return path


@pytest.mark.parametrize("api", ["legacy", "new"])
@pytest.mark.parametrize("kernel", ["causal_scores", "head_scores"])
def test_scores_migrate_checked(src: Path, kernel: str, api: str) -> None:
    file = src.parent / "causal_scores.cu" if kernel == "causal_scores" else src
    (k,) = migrate(file, kernel=kernel, out_dir=src.parent / f"{kernel}_{api}",
                   nki_api=api).kernels  # fmt: skip
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    assert k.family == "scores"
    code = k.nki_source or ""
    assert "nc_matmul" in code and "nc_transpose" in code
    if kernel == "causal_scores":
        assert "affine_select" in code and 'MASKED = float("-inf")' in code
        # the packed tensor viewed [B, T, 3, NH, C / NH]: Q rows at 0, K rows at 1
        assert k.lifted is not None and "qkv[i0, i2, 0, i1, k]" in k.lifted.program.render()


def test_a_mask_other_than_causal_is_named(src: Path) -> None:
    (k,) = migrate(src, kernel="band_scores", out_dir=src.parent / "band").kernels
    assert k.status != "complete"
    said = " ".join(d.message for d in k.diagnostics)
    assert "scores: a mask other than the causal `key > query`" in said
