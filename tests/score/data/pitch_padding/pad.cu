__global__ void pad(const float* x, const float* m, float* y, int rows, int cols, int ld) {
  int r = blockIdx.y * blockDim.y + threadIdx.y;
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows && c < cols) y[r * ld + c] = m[c] * x[r * ld + c];
}
