#include <math.h>

// one block per row: softmax of the logits, the loss at the row's label, and the gradient
// (probabilities minus the one-hot label, times the row's upstream gradient)
__global__ void fused_ce(float* dlogits, float* losses, const float* logits,
                         const float* dlosses, const int* targets, int N, int V) {
    __shared__ float red[32];
    int row = blockIdx.x;
    const float* x = logits + (size_t)row * V;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) m = fmaxf(m, x[i]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, off));
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < blockDim.x / 32; ++w) m = fmaxf(m, red[w]);
    __syncthreads();
    float s = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) s += expf(x[i] - m);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = s;
    __syncthreads();
    s = 0.0f;
    for (int w = 0; w < blockDim.x / 32; ++w) s += red[w];
    int label = targets[row];
    if (threadIdx.x == 0) losses[row] = logf(s) + m - x[label];
    float g = dlosses[row];
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float p = expf(x[i] - m) / s;
        dlogits[(size_t)row * V + i] = (p - (i == label ? 1.0f : 0.0f)) * g;
    }
}

void fused_ce_forward_backward(float* dlogits, float* losses, const float* logits,
                               const float* dlosses, const int* targets, int N, int V) {
    fused_ce<<<N, 128>>>(dlogits, losses, logits, dlosses, targets, N, V);
}
