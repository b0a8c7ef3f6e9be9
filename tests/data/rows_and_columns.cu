// A layer-norm-style backward in a spelling of our own: one block per row computes the row's
// two means by a shared-memory tree, writes the row gradient, and adds each element's share
// of the two column gradients with atomics (dgain over x_hat * dy, dshift over dy).
#include <cuda_runtime.h>

template <typename T>
__global__ void rows_and_columns(T* dx, float* dgain, float* dshift, const T* dy,
                                 const T* xhat, const T* gain, const T* inv_std, int rows,
                                 int width) {
    __shared__ float s_a[128];
    __shared__ float s_b[128];
    const int row = blockIdx.x;
    const T* dy_r = dy + (size_t)row * width;
    const T* xh_r = xhat + (size_t)row * width;
    float a = 0.0f, b = 0.0f;
    for (int c = threadIdx.x; c < width; c += blockDim.x) {
        float g = (float)gain[c] * (float)dy_r[c];
        a += g;
        b += g * (float)xh_r[c];
    }
    s_a[threadIdx.x] = a;
    s_b[threadIdx.x] = b;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            s_a[threadIdx.x] += s_a[threadIdx.x + stride];
            s_b[threadIdx.x] += s_b[threadIdx.x + stride];
        }
        __syncthreads();
    }
    const float mean_a = s_a[0] / width, mean_b = s_b[0] / width;
    const float inv = (float)inv_std[row];
    for (int c = threadIdx.x; c < width; c += blockDim.x) {
        float xh = (float)xh_r[c], d = (float)dy_r[c];
        dx[(size_t)row * width + c] = (T)(inv * ((float)gain[c] * d - mean_a - xh * mean_b));
        atomicAdd(&dgain[c], xh * d);
        atomicAdd(&dshift[c], d);
    }
}

int main() {
    const int rows = 512, width = 320;
    float *dx, *dgain, *dshift, *dy, *xhat, *gain, *inv_std;
    cudaMalloc(&dx, rows * width * sizeof(float));
    cudaMalloc(&dy, rows * width * sizeof(float));
    cudaMalloc(&xhat, rows * width * sizeof(float));
    cudaMalloc(&gain, width * sizeof(float));
    cudaMalloc(&inv_std, rows * sizeof(float));
    cudaMalloc(&dgain, width * sizeof(float));
    cudaMalloc(&dshift, width * sizeof(float));
    cudaMemset(dgain, 0, width * sizeof(float));
    cudaMemset(dshift, 0, width * sizeof(float));
    rows_and_columns<float><<<rows, 128>>>(dx, dgain, dshift, dy, xhat, gain, inv_std, rows,
                                           width);
    return 0;
}
