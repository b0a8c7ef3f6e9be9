"""Batched matrix products from lifted programs: attention's weighted values (`P V`), causal,
over the V rows of a packed `[B, T, 3, NH, hs]` projection and stored head-interleaved
`[B, T, NH, hs]`, and a plain batched product of `[BH, M, K]` by `[BH, K, N]`, migrate without
a spec in both dialects, checked against the CUDA original."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from migrator.migration import migrate

KERNELS = """
    // one thread per (b, t, h): its head's weighted sum of the values up to t
    __global__ void causal_values(float* out, const float* att, const float* qkv,
                                  int B, int T, int C, int NH) {
        int n = blockIdx.x * blockDim.x + threadIdx.x;
        if (n >= B * T * NH) return;
        int h = n % NH, t = (n / NH) % T, b = n / (NH * T);
        int hs = C / NH;
        float* o = out + (b * T + t) * C + h * hs;
        const float* p = att + ((b * NH + h) * T + t) * T;
        for (int e = 0; e < hs; e++) o[e] = 0.0f;
        for (int s = 0; s <= t; s++) {
            const float* v = qkv + (b * T + s) * 3 * C + 2 * C + h * hs;
            for (int e = 0; e < hs; e++) o[e] += p[s] * v[e];
        }
    }

    __global__ void bmm(float* c, const float* a, const float* b, int BH, int M, int K, int N) {
        int n = blockIdx.x * blockDim.x + threadIdx.x;
        if (n >= BH * M * N) return;
        int j = n % N, i = (n / N) % M, z = n / (M * N);
        float acc = 0.0f;
        for (int k = 0; k < K; k++) acc += a[(z * M + i) * K + k] * b[(z * K + k) * N + j];
        c[n] = acc;
    }

    void forward(float* out, const float* att, const float* qkv, float* c, const float* a,
                 const float* b, int B, int T, int C, int NH, int M, int K, int N) {
        int total = B * T * NH;
        causal_values<<<(total + 127) / 128, 128>>>(out, att, qkv, B, T, C, NH);
        total = B * NH * M * N;
        bmm<<<(total + 255) / 256, 256>>>(c, a, b, B * NH, M, K, N);
    }
"""


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("batched") / "batched.cu"
    path.write_text(textwrap.dedent(KERNELS))
    return path


@pytest.mark.parametrize("api", ["legacy", "new"])
@pytest.mark.parametrize("kernel", ["causal_values", "bmm"])
def test_batched_products_migrate_checked(src: Path, kernel: str, api: str) -> None:
    (k,) = migrate(src, kernel=kernel, out_dir=src.parent / f"{kernel}_{api}",
                   nki_api=api).kernels  # fmt: skip
    assert k.status == "complete" and k.check is not None and k.check.ok, k.diagnostics
    assert k.family == "batched_matmul"
    code = k.nki_source or ""
    assert "nc_matmul" in code and "nc_transpose" in code
    if kernel == "causal_values":
        assert "affine_select" in code  # the diagonal block's columns past each row zeroed
        assert k.lifted is not None
        assert "sum_{k < i1 + 1}" in k.lifted.program.render()
