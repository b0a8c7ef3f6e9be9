// A flash-style causal attention forward of our own: keys and values streamed through shared
// memory in whole tiles of bc rows (the host passes the tile count), a running max and sum
// per query row kept in global memory (set by cudaMemset before the launch) and stored beside
// the output, as llm.c's attention_forward_kernel2 does in its own spelling.
#include <cmath>

__global__ void flash_stats(const float* q, const float* k, const float* v, float* o,
                            float* row_max, float* row_sum, int T, int D, int n_tiles, int bc,
                            float scale) {
    extern __shared__ float smem[];
    float* ks = smem;               // [bc, D]
    float* vs = smem + bc * D;      // [bc, D]
    float* s = smem + 2 * bc * D;   // [blockDim.x, bc]
    const int bh = blockIdx.x;
    const float* qb = q + bh * T * D;
    const float* kb = k + bh * T * D;
    const float* vb = v + bh * T * D;
    float* ob = o + bh * T * D;
    for (int tile = 0; tile < n_tiles; ++tile) {
        for (int e = threadIdx.x; e < bc * D; e += blockDim.x) {  // whole tiles only
            ks[e] = kb[tile * bc * D + e];
            vs[e] = vb[tile * bc * D + e];
        }
        __syncthreads();
        for (int row = threadIdx.x; row < T; row += blockDim.x) {
            float* sr = s + threadIdx.x * bc;
            const float m_prev = row_max[bh * T + row];
            const float l_prev = row_sum[bh * T + row];
            float m_tile = -INFINITY;
            for (int c = 0; c < bc; ++c) {
                float acc = 0.0f;
                for (int x = 0; x < D; ++x) acc += qb[row * D + x] * ks[c * D + x];
                sr[c] = (tile * bc + c <= row) ? acc * scale : -INFINITY;
                m_tile = fmaxf(m_tile, sr[c]);
            }
            const float m_new = fmaxf(m_prev, m_tile);
            float l_tile = 0.0f;
            for (int c = 0; c < bc; ++c) {
                sr[c] = expf(sr[c] - m_new);
                l_tile += sr[c];
            }
            const float keep = expf(m_prev - m_new);
            const float l_new = l_prev * keep + l_tile;
            for (int x = 0; x < D; ++x) {
                float pv = 0.0f;
                for (int c = 0; c < bc; ++c) pv += sr[c] * vs[c * D + x];
                ob[row * D + x] = (ob[row * D + x] * l_prev * keep + pv) / l_new;
            }
            row_max[bh * T + row] = m_new;
            row_sum[bh * T + row] = l_new;
        }
        __syncthreads();
    }
}

void flash_forward(const float* q, const float* k, const float* v, float* o, float* m,
                   float* l, int BH, int T, int D) {
    const int bc = 32;
    const int n_tiles = ceil((float)T / bc);
    const float scale = 1.0f / sqrtf((float)D);
    cudaMemset(m, -10000.0f, BH * T * sizeof(float));
    cudaMemset(l, 0, BH * T * sizeof(float));
    const int threads = 64;
    const int shared = (2 * bc * D + threads * bc) * sizeof(float);
    flash_stats<<<BH, threads, shared>>>(q, k, v, o, m, l, T, D, n_tiles, bc, scale);
}
