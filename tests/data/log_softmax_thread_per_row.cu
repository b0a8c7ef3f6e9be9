// One thread per row: log-softmax.
__global__ void log_softmax(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < rows) {
    float m = -3.402823466e+38f;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, x[row * cols + c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += expf(x[row * cols + c] - m);
    float lse = logf(s);
    for (int c = 0; c < cols; ++c) y[row * cols + c] = x[row * cols + c] - m - lse;
  }
}
void launch_log_softmax(const float* x, float* y, int rows, int cols) {
  log_softmax<<<(rows + 127) / 128, 128>>>(x, y, rows, cols);
}
