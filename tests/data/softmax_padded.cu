// Rows of width V stored at a stride P >= V (a vocabulary padded to a multiple of 64).
__global__ void softmax_padded(float* out, const float* x, int N, int V, int P) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    const float* xr = x + r * P;
    float m = -INFINITY;
    for (int c = 0; c < V; c++) m = fmaxf(m, xr[c]);
    float s = 0.0f;
    for (int c = 0; c < V; c++) s += expf(xr[c] - m);
    for (int c = 0; c < V; c++) out[r * P + c] = expf(xr[c] - m) / s;
}
