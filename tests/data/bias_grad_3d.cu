// Bias gradient of a linear layer over a [batch, time, channels] activation: one thread per
// channel walks every (batch, time) position, accumulating in double.
#include <cuda_runtime.h>

__global__ void bias_grad_3d(float* dbias, const float* grad, int batch, int steps, int ch) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ch) return;
    double acc = 0.0;
    for (int b = 0; b < batch; ++b)
        for (int s = 0; s < steps; ++s)
            acc += grad[(b * steps + s) * ch + c];
    dbias[c] = (float)acc;
}

void bias_grad(float* dbias, const float* grad, int batch, int steps, int ch) {
    const int threads = 128;
    bias_grad_3d<<<(ch + threads - 1) / threads, threads>>>(dbias, grad, batch, steps, ch);
}

int main() {
    const int B = 4, T = 96, C = 200;
    float *dbias, *grad;
    cudaMalloc(&dbias, C * sizeof(float));
    cudaMalloc(&grad, B * T * C * sizeof(float));
    bias_grad(dbias, grad, B, T, C);
    cudaDeviceSynchronize();
    return 0;
}
