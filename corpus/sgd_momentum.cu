// sgd_momentum.cu — one SGD step with momentum and L2 weight decay, PyTorch semantics
// (torch.optim.SGD, dampening 0, nesterov off, momentum buffer already initialised):
//   d = grad + weight_decay * param;  buf = momentum * buf + d;  param -= lr * buf.
// Layout: param, momentum_buf (updated in place) and grad are contiguous 1-D arrays of n floats.
// Grid-stride loop over a capped grid; each element is a load-compute-store of two buffers.
#include <cuda_runtime.h>

#define SGD_THREADS 256
#define SGD_MAX_BLOCKS 1024

__global__ void __launch_bounds__(SGD_THREADS)
sgd_momentum_kernel(float* __restrict__ param, float* __restrict__ momentum_buf,
                    const float* __restrict__ grad, float lr, float momentum,
                    float weight_decay, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const float p = param[i];
    const float d = grad[i] + weight_decay * p;
    const float buf = momentum * momentum_buf[i] + d;
    momentum_buf[i] = buf;
    param[i] = p - lr * buf;
  }
}

cudaError_t launch_sgd_momentum(float* param, float* momentum_buf, const float* grad, float lr,
                                float momentum, float weight_decay, int n, cudaStream_t stream) {
  const int blocks = min((n + SGD_THREADS - 1) / SGD_THREADS, SGD_MAX_BLOCKS);
  sgd_momentum_kernel<<<blocks, SGD_THREADS, 0, stream>>>(param, momentum_buf, grad, lr, momentum,
                                                          weight_decay, n);
  return cudaGetLastError();
}
