// backward of a causal row softmax over [BH, T, T] probabilities: a thread per column walks
// the rows at and below it
__global__ void softmax_bwd(float* dx, const float* dy, const float* y, int T, float scale) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int base = blockIdx.y * T * T;
    if (col >= T) return;
    for (int t = col; t < T; t++) {
        float acc = 0.0f;
        for (int k = 0; k <= t; k++) {
            float delta = (k == col) ? 1.0f : 0.0f;
            acc += y[base + t * T + k] * (delta - y[base + t * T + col]) * dy[base + t * T + k];
        }
        dx[base + t * T + col] = scale * acc;
    }
}

