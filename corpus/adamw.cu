// AdamW optimizer step (decoupled weight decay), one fused elementwise pass over the parameters.
// Bias corrections arrive folded into the step size and a square-root factor, as in fused
// optimizers (apex, PyTorch's fused AdamW), so the kernel reads them as plain scalars.
#include <cuda_runtime.h>

#define ADAM_THREADS 256

__global__ void __launch_bounds__(ADAM_THREADS)
adamw_kernel(float* __restrict__ param, float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq,
             const float* __restrict__ grad, float lr, float beta1, float beta2, float eps,
             float weight_decay, float step_size, float bias_correction2_sqrt, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const float g = grad[i];
    float p = param[i];
    p = p * (1.0f - lr * weight_decay);
    const float m = beta1 * exp_avg[i] + (1.0f - beta1) * g;
    const float v = beta2 * exp_avg_sq[i] + (1.0f - beta2) * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float denom = sqrtf(v) / bias_correction2_sqrt + eps;
    param[i] = p - step_size * m / denom;
  }
}

// The framework computes the bias corrections per step (step_size = lr / (1 - beta1^t),
// bias_correction2_sqrt = sqrt(1 - beta2^t)) and passes them in, as fused optimizers do.
cudaError_t launch_adamw(float* param, float* exp_avg, float* exp_avg_sq, const float* grad,
                         float lr, float beta1, float beta2, float eps, float weight_decay,
                         float step_size, float bias_correction2_sqrt, int n,
                         cudaStream_t stream) {
  const int blocks = min((n + ADAM_THREADS - 1) / ADAM_THREADS, 1024);
  adamw_kernel<<<blocks, ADAM_THREADS, 0, stream>>>(param, exp_avg, exp_avg_sq, grad, lr, beta1,
                                                    beta2, eps, weight_decay, step_size,
                                                    bias_correction2_sqrt, n);
  return cudaGetLastError();
}
